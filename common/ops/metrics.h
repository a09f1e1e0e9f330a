/* Prometheus metrics: the status (status.h) in the text exposition format,
 * served at /metrics by libevent's evhttp on MetricsListen. */
#ifndef ROVE_METRICS_H
#define ROVE_METRICS_H

#include <stdbool.h>
#include <sys/socket.h>

#include "status.h"

struct event_base;
struct evbuffer;
struct metrics;

/* Write `st` and this process's figures (CPU, memory, open files) into
 * `out` as Prometheus text (format 0.0.4): rove_* families, per-peer ones
 * labelled peer="NAME". */
void metrics_render(struct evbuffer *out, const struct status *st);

/* The same in parts, so that thousands of peers do not keep the event
 * loop from everything else: metrics_scrape_new copies what it needs of
 * `st` (which may then change or go), and each metrics_scrape_next adds
 * a part of at most a few hundred lines to `out`, returning false after
 * the last. */
struct metrics_scrape;
struct metrics_scrape *metrics_scrape_new(const struct status *st);
bool metrics_scrape_next(struct metrics_scrape *, struct evbuffer *out);
void metrics_scrape_free(struct metrics_scrape *);

/* Serve GET /metrics on `addr`, in chunks (chunked transfer encoding);
 * `scrape` makes the scrape of the owner's status now. At most
 * `max_conns` HTTP connections are open at once: more are closed as they
 * come (counted, and logged at most every 10 s). Of the few scrapes sent
 * at once, one whose scraper has read nothing for a second gives its
 * place to a newcomer. Returns NULL with *cause set. */
struct metrics *metrics_create(struct event_base *, const struct sockaddr *addr,
    socklen_t addrlen, unsigned max_conns,
    struct metrics_scrape *(*scrape)(void *arg), void *arg, char **cause);
void metrics_free(struct metrics *);

#endif

/* Prometheus metrics: the status (status.h) in the text exposition format,
 * served at /metrics by libevent's evhttp on MetricsListen. */
#ifndef ROVE_METRICS_H
#define ROVE_METRICS_H

#include <sys/socket.h>

#include "status.h"

struct event_base;
struct evbuffer;
struct metrics;

/* Write `st` and this process's figures (CPU, memory, open files) into
 * `out` as Prometheus text (format 0.0.4): rove_* families, per-peer ones
 * labelled peer="NAME". */
void metrics_render(struct evbuffer *out, const struct status *st);

/* Serve GET /metrics on `addr`; `fill` writes the current exposition into
 * `out` (metrics_render with the owner's status). Returns NULL with
 * *cause set. */
struct metrics *metrics_create(struct event_base *, const struct sockaddr *addr,
    socklen_t addrlen, void (*fill)(struct evbuffer *out, void *arg),
    void *arg, char **cause);
void metrics_free(struct metrics *);

#endif

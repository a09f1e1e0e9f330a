/* Worker processes: Workers = N makes roved N processes that share its
 * listeners. Each owns the connections whose CIDs carry its index, and
 * the kernel steers every datagram to its owner (udp_open_workers), so no
 * packet crosses between processes. Worker 0 is the process started; it
 * forks the others, passes them signals, and stops them all when one
 * dies (their shared sockets' order would no longer match the CIDs). */
#ifndef ROVE_WORKERS_H
#define ROVE_WORKERS_H

#include <event2/event.h>
#include <stdbool.h>

#include "config/cfg.h"
#include "transport/udp.h"

struct workers;

/*
 * Open every Listen address's socket group for cfg->workers processes
 * (CIDs laid out as `layout`), fork workers 1 .. N-1, and leave each
 * process with its own pair per address in est[i] / hs[i]; the rest are
 * closed. Returns the process's worker index (0 in the process that
 * called it), or -1 with *cause set. In a new worker the event base is
 * reinitialised and it dies with worker 0 (PR_SET_PDEATHSIG).
 */
int workers_start(struct event_base *, const struct cfg *,
    const struct cid_server_id *layout, struct udp_socket *est,
    struct udp_socket *hs, struct workers **, char **cause);
/* Worker 0: call `died` when a worker exits on its own. */
void workers_watch(struct workers *, struct event_base *,
    void (*died)(void *), void *arg);
/* Worker 0: send `sig` to every worker still running. */
void workers_signal(struct workers *, int sig);
/* Worker 0: whether a worker exited on its own. */
bool workers_failed(const struct workers *);
/* Worker 0: stop the others (SIGTERM, then SIGKILL after 5 s) and wait
 * for them; any worker: release. NULL is fine. */
void workers_free(struct workers *);

/* Worker w's name for a per-process path or device: "NAME" for worker 0,
 * else "NAME" + sep + w, malloc'd; NULL when that is longer than `max`. */
char *workers_name(const char *name, const char *sep, unsigned w, size_t max);

#endif

/* roved's server: listeners, the connection-ID demultiplexer, sessions,
 * peers with their addresses and routes, and the TUN device. */
#ifndef ROVE_SERVER_H
#define ROVE_SERVER_H

#include <event2/event.h>
#include <stdbool.h>

#include "config/cfg.h"

struct server;

/* Set up everything `cfg` asks for (sockets, TUN, routes, control socket).
 * Returns NULL with *cause set. The server keeps `cfg` (caller owns it). */
struct server *server_create(struct event_base *, const struct cfg *, int verbose,
    char **cause);
/* Tell the service manager we are ready (the first time) and how many
 * peers are connected (notify.h); called again whenever that changes. */
void server_notify(struct server *);
/* SIGHUP: apply the configuration `next` (the same file read again,
 * without errors) as daemon.h's reload describes. Peers are the same when
 * their Name and PublicKey are: the others are removed (sessions closed)
 * or added. A peer kept has its Address, AllowedIPs, AllowForward and
 * AllowRemoteForward replaced while its session, forwards and counters
 * go on. Returns -1 with the reason logged, changing nothing, when the
 * new peers do not fit the running server (an address in use by another
 * peer, one outside the running subnet, an exhausted pool, a route that
 * cannot be added). NULL counts a refused reload.
 *
 * With Workers, worker 0 alone reads the file: once it has applied
 * `next`, it puts `buf` (the bytes `next` came from) on the board with
 * the next generation and sends SIGHUP to the others, which load those
 * bytes (server_reload_source), not the file, so that every worker has
 * the same peers. A worker that refuses what worker 0 applied stops: a
 * worker that kept peers the others removed would let a removed peer in
 * by steering its handshake there; worker 0 then stops them all (and the
 * service manager restarts roved on the new file). */
int server_reload(struct server *, const struct cfg *next, const char *buf,
    size_t len);
/* SIGHUP's source (daemon.h's reload_source): the file for worker 0 (0);
 * for another worker, worker 0's bytes from the board (1), or -1 when
 * worker 0 applied no reload yet or the generation is applied already (a
 * SIGHUP sent to that worker alone). */
int server_reload_source(struct server *, char **buf, size_t *len);
/* Close every connection (CONNECTION_CLOSE sent), then stop the loop:
 * at once, or 100 ms later when a TCP-transport close still drains. */
void server_shutdown(struct server *);
/* 1 when a worker died and took the server down, else 0. */
int server_exit_status(const struct server *);
/* Release everything; the TUN device and its routes disappear. */
void server_free(struct server *);
/* At exit, after server_shutdown: stop the workers, remove the control
 * socket, write what is queued for the TUN, and leave the rest to the
 * process's end (the TUN device goes with its descriptor). */
void server_exit(struct server *);

#endif

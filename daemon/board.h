/* The board: with Workers, what each worker shows worker 0 of the peers
 * whose sessions it holds and of its own totals, so that worker 0's
 * status and metrics speak for the whole server.
 *
 * It lives in memory the workers share (MAP_SHARED, made before they
 * fork): a slot per configured peer, by the peer's position in the
 * configuration (the same in every worker: they apply the same
 * bytes), checked against the first octets of its key (after a reload
 * the workers may disagree for a moment, and a peer beyond the slots
 * made at start is not shown), and a slot per worker. A slot is written under its sequence
 * count (odd while a writer holds it), and read by copying it between two
 * equal, even counts. A worker refreshes its slots every BOARD_REFRESH_MS,
 * claims a peer's at once when a session is established and gives it up
 * when the session ends; of two workers holding sessions of one peer (a
 * client that reconnected to another worker before its old session timed
 * out), the newer session's shows.
 *
 * It also holds the configuration worker 0 applied last, as the bytes it
 * read and a generation (1 for the first reload), for the other workers
 * to apply on the SIGHUP worker 0 sends them: all apply the same bytes,
 * whatever the file says by then. Each worker shows the generation it
 * applied, and its reloads applied and refused, in its slot. */
#ifndef ROVE_BOARD_H
#define ROVE_BOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "forward/fwd.h"
#include "ops/status.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "tunnel/tunnel.h"

#define BOARD_REFRESH_MS 1000
#define BOARD_KEY 8

/* A peer as its worker shows it. */
struct board_peer {
	uint8_t key[BOARD_KEY];        /* the first octets of its public key */
	unsigned worker;               /* whose session */
	uint64_t since;                /* when the session was established */
	struct tunnel_counters counters;
	struct quic_conn_stats quic;
	uint64_t handshakes, rebinds, zero_rtt;
	struct sockaddr_storage remote, local;
	char connection_id[QUIC_CONN_ID_STRLEN];
	struct fwd_counters fwd;
	size_t fwd_open;
};

/* A worker's totals. */
struct board_worker {
	struct tunnel_counters counters;
	struct status_admission admission;
	struct state_stats tickets;
	uint64_t reload_gen, reloads, reloads_refused;
};

struct board;

/* Slots for `npeers` peers and `nworkers` workers, and room for a
 * configuration of `config_max` bytes (reserved, not used until
 * written); NULL if the memory cannot be had. */
struct board *board_create(size_t npeers, unsigned nworkers,
    size_t config_max);
void board_free(struct board *);

/* Worker bp->worker: the peer at `idx` is held by it, as `bp` says
 * (bp->since: its session's). Returns false if another worker holds a
 * newer session of it, or idx is beyond the slots. */
bool board_put(struct board *, size_t idx, const struct board_peer *bp);
/* Worker `worker`: its session of the peer at `idx`, established at
 * `since`, ended. */
void board_drop(struct board *, size_t idx, unsigned worker, uint64_t since);
/* The peer at `idx` whose key begins with `key`, if a worker other than
 * `except` holds a session of it newer than `newer_than`: copied into
 * `out`. */
bool board_get(struct board *, size_t idx, const uint8_t key[BOARD_KEY],
    unsigned except, uint64_t newer_than, struct board_peer *out);

/* Worker 0: the configuration it applied, generation `gen`. False if
 * longer than config_max. */
bool board_put_config(struct board *, uint64_t gen, const char *buf,
    size_t len);
/* A copy of the configuration last put (malloc'd, NUL added) and its
 * generation: false if none was put yet, or no copy came out whole
 * while worker 0 kept writing it. */
bool board_get_config(struct board *, uint64_t *gen, char **buf, size_t *len);

/* The generation of the configuration last put (0: none), for a worker
 * to see whether it missed one. */
uint64_t board_config_gen(struct board *);

void board_put_worker(struct board *, unsigned worker,
    const struct board_worker *);
/* False until the worker first put its totals. */
bool board_get_worker(struct board *, unsigned worker, struct board_worker *);

#endif

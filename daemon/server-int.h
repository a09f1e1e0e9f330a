/* The inside of roved's server (struct server), its peers and its
 * sessions, shared by the files that make it up and private to them:
 * server.c (set-up, shutdown, the TUN), listener.c (datagrams and TCP
 * clients in, admission), session.c (one client's connection), session-ctl.c
 * (its control stream), peer.c (the configured peers and their addresses),
 * reload.c (SIGHUP) and server-status.c (status, metrics, the workers'
 * board). Nothing else includes it: the rest of roved sees server.h. */
#ifndef ROVE_SERVER_INT_H
#define ROVE_SERVER_INT_H

#include <ngtcp2/ngtcp2.h>

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "admit.h"
#include "base/accept.h"
#include "base/addr.h"
#include "base/key.h"
#include "base/log.h"
#include "board.h"
#include "config/cfg.h"
#include "config/keyidx.h"
#include "egress.h"
#include "forward/fwd.h"
#include "forward/udprelay.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "route.h"
#include "server.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "tun/tun.h"
#include "tunnel/tunnel.h"
#include "wire/cid.h"
#include "workers.h"

/* The connection-ID map starts with this many buckets and doubles when
 * it holds twice as many IDs (each connection has about ten). */
#define CID_BUCKETS_MIN 4096
/* Sources of unknown keys remembered for rate-limiting their log line. */
#define UNKNOWN_LOG_SLOTS 256

struct session;

/* One configured peer. Sessions, forwards and the route table point at
 * it, so it stays where it is while it is configured: a reload changes
 * its copy of the configuration in place, and one that removes it closes
 * every session referring to it before freeing it (reload.c). */
struct peer {
	struct cfg_peer conf;               /* its [Peer] section, owned */
	const struct cfg_peer *cfg;         /* &conf */
	struct prefix addrs[CFG_MAX_ADDRS]; /* its tunnel addresses (host) */
	size_t naddrs;
	uint8_t subnet_len[CFG_MAX_ADDRS];  /* prefix length told to the client */
	struct session *sess;               /* the live connection, or NULL */
	struct session *probe;              /* its rate probe, or NULL */
	struct tunnel_counters counters;
	struct fwd_counters fwd_counters;
	struct udp_flow_counters udp_counters;
	/* Its forwards that outlived their connection, waiting for the next
	 * (fwd_set_park); set up when first needed. */
	struct fwd_set parked;
	bool parked_init;
	uint64_t handshakes;
	uint64_t rebinds;        /* its address changed under a connection */
	uint64_t zero_rtt;       /* connections whose 0-RTT was accepted */
	uint64_t latest_handshake; /* wall-clock seconds; 0: never */
	const char *gone;        /* a reload removed it: why, for its sessions */
	size_t idx;              /* in server.peers: its slot on the board */
};

struct cid_entry {
	struct cid_entry *next;       /* bucket chain */
	struct cid_entry *sess_next;  /* the session's own list */
	ngtcp2_cid cid;
	struct session *sess;
};

struct listener {
	struct server *srv;
	struct udp_socket sock;     /* established connections; all sending */
	struct udp_batch batch;
	struct event *ev;
	/* Long-header datagrams (handshakes), when the kernel steers them to
	 * a socket of their own (udp_open_split): a flood of Initials then
	 * overflows this queue, not the established connections'. fd -1:
	 * everything arrives on `sock`. */
	struct udp_socket hs;
	struct event *hs_ev;
};

/* A ListenTCP socket: sessions over TLS on TCP. */
struct tcp_listener {
	struct server *srv;
	int fd;
	struct event *ev;
	struct accept_guard guard;
};

struct session {
	LIST_ENTRY(session) entry;
	struct server *srv;
	struct quic_conn *qc;
	struct peer *peer;          /* set once the handshake completed */
	struct peer *pending_peer;  /* matched by the pin check */
	struct cid_entry *cids;
	uint8_t *ctl;               /* SESSION_CTL_MAX bytes (session-ctl.c)
	                             * while a control message is
	                             * incomplete, else NULL */
	size_t ctllen;
	bool configured;            /* server config sent */
	struct fwd_set fwds;        /* valid once fwd_peer is set */
	struct peer *fwd_peer;      /* whose forwards: set at the handshake's
	                             * end, or at a 0-RTT forward stream */
	struct udp_relay udp;       /* its UDP flows; valid with fwd_peer */
	struct egress_hold hold;    /* 0-RTT forwards on another member's
	                             * ticket: dialed at the handshake's end */
	struct egress_listener *rlisteners[CFG_MAX_REMOTE_FORWARDS]; /* -R */
	size_t nrlisteners;
	/* -R requests refused (the last CFG_MAX_REMOTE_FORWARDS), for
	 * status: the bind address and port, and why (the status). */
	struct proto_remote_forward rrefused[CFG_MAX_REMOTE_FORWARDS];
	size_t nrrefused;
	bool half_open;             /* counted in server.half_open, or
	                             * half_open_tcp */
	bool tcp;                   /* over TLS on TCP */
	/* In server.tcp_evictable: half-open over TCP from a source that
	 * admission does not know (admit.h). */
	bool evictable;
	TAILQ_ENTRY(session) evict_entry;
	size_t ctl_requests;        /* REMOTE_FORWARD requests so far */
	uint64_t features;          /* PROTO_FEATURE_* agreed in the hello */
	/* When it ends, its forwards wait for the peer's next connection
	 * (not when the client said it was going away). */
	bool park_forwards;
	struct recovery *rec;       /* loss recovery, with a client that
	                             * decodes it (else NULL) */
	uint64_t since;             /* the handshake completed (clock_now) */
	/* A rate probe of pending_peer's (ALPN PROTO_ALPN_PROBE, its
	 * handshake done): every DATAGRAM goes back as it came, nothing
	 * else is served, and it is never the peer's session. */
	bool probe;
};

struct unknown_log {
	struct ipaddr addr;
	uint64_t last_ms;
};

struct server {
	struct event_base *base;
	const struct cfg *cfg;
	WOLFSSL_CTX *tls;
	struct quic_settings qs;
	struct state_server *state;
	struct log_ratelimit reset_rl;
	uint64_t cid_seed;

	struct listener listeners[CFG_MAX_LISTEN];
	size_t nlisteners;
	WOLFSSL_CTX *tls_tcp;       /* for ListenTCP's sessions */
	struct tcp_listener tcp_listeners[CFG_MAX_LISTEN];
	size_t ntcp_listeners;

	struct tun tun;
	bool has_tun;
	struct event *tun_ev;
	/* The TUN's write side, shared by all peers: one receive batch may
	 * mix them, and each super-packet is one flow, so one peer. */
	struct tunnel_out tun_out;
	struct route_table *routes;

	struct peer **peers;        /* in the configuration's order */
	size_t npeers;
	size_t nconnected;          /* peers with a live connection */
	struct keyidx keys;         /* public key -> index into peers */
	uint64_t reloads, reloads_refused;
	/* The reload generation applied (worker 0: the last it put on the
	 * board; another worker: the last it took), and the one being
	 * loaded. */
	uint64_t reload_gen, reload_loading;
	LIST_HEAD(, session) sessions;
	size_t nsessions, max_sessions;
	size_t half_open;           /* QUIC sessions still in their handshake */
	size_t half_open_tcp;       /* ... TCP ones (worker 0) */
	/* TCP handshakes from unknown sources, oldest first: the one to end
	 * when a known source finds TCP's budget full. */
	TAILQ_HEAD(, session) tcp_evictable;
	struct admit admit;
	struct event *wait_ev;      /* one-shot: start_waiting (listener.c) */
	/* The connection-ID map (session.c): cid_buckets chains, a power
	 * of two. */
	struct cid_entry **cid_map;
	size_t cid_buckets, ncids;

	struct tunnel_counters counters;
	uint64_t stateless_resets;
	struct egress *egress;
	struct unknown_log unknown_log[UNKNOWN_LOG_SLOTS]; /* the pin check's */
	struct control *control;
	struct metrics *metrics;    /* MetricsListen; NULL: off */
	bool shutting_down;

	/* Workers (workers.h): this process's index and the group; the
	 * server ID and worker its CIDs carry. */
	struct cid_server_id sid;
	unsigned worker;
	struct workers *workers;
	/* With workers: what the others hold, for worker 0's status, and
	 * (workers 1..N-1) the timer that shows it what this one holds. */
	struct board *board;
	struct event *board_ev;
	char *control_path;         /* ControlSocket, per worker */
};

/* The tunnel addresses a peer is to have, worked out before anything
 * changes, with the prefix length each is told to the client. */
struct addr_plan {
	struct prefix addrs[CFG_MAX_ADDRS];
	uint8_t subnet_len[CFG_MAX_ADDRS];
	size_t naddrs;
};

/* server.c */

/* After a batch of input: packets for the TUN out (coalesced), then every
 * connection's pending output, then every listener's queued datagrams. */
void server_flush(struct server *);

/* listener.c: the sockets that bring clients in. */

/* Open (or, with workers, take workers_start's) socket pair of every
 * Listen address and watch them. Returns 0, or -1 with *cause set. */
int listener_setup(struct server *, char **cause);
/* Worker 0: listen on every ListenTCP address. Returns 0, or -1 with
 * *cause set. */
int listener_setup_tcp(struct server *, char **cause);
/* srv->wait_ev's callback: start the handshakes waiting for a slot. */
void listener_wait_cb(evutil_socket_t, short, void *srv);

/* session.c: one client's connection, from its first packet to its close. */

/* The session `cid` belongs to, or NULL. */
struct session *session_find(struct server *, const uint8_t *cid, size_t len);
/* Start the handshake of the Initial `pkt` (parsed into `hd`) that came
 * to `l` and that admission let through with `adm`. On failure, logged,
 * nothing is left. */
void session_start(struct listener *l, const ngtcp2_pkt_hd *hd,
    const struct admit_result *adm, const uint8_t *pkt, size_t len,
    const struct sockaddr *from, socklen_t fromlen, uint8_t ecn);
/* Start a session over TLS on TCP on the accepted socket `fd`, which it
 * takes over, as admission said (`adm`; its eviction done). */
void session_start_tcp(struct server *, int fd, const struct sockaddr *from,
    socklen_t fromlen, const struct admit_tcp *adm);
/* Release a session: its CIDs, forwards and -R listeners, and its peer's
 * hold on it. Sends nothing; close the connection first to tell the
 * client. */
void session_free(struct session *);
/* The server whose peers session_pin_check knows (one per process), or
 * NULL, which refuses every key. */
void session_set_server(struct server *);
/* quic_set_pin_check's check: true when `pub` is a configured peer's key,
 * which becomes the session's pending peer; an unknown key is counted and
 * logged (at most once a minute per source prefix). */
bool session_pin_check(struct quic_conn *, const uint8_t *pub, void *sess);

/* session-ctl.c: the control stream (stream 0) of a session. */

/* Bytes that arrived on the control stream of `sess` (a peer's, past its
 * handshake) through `qc`: consumed, and every complete message acted on.
 * Returns 0, or -1 to close the connection (a malformed or unexpected
 * message). */
int session_ctl_data(struct session *sess, struct quic_conn *qc,
    const uint8_t *data, size_t len);
/* Send the peer its SERVER_CONFIG (addresses, routes, MTU, DNS): in
 * answer to its hello, and again when a reload changes its Address.
 * Returns 0, or -1 when it could not be queued. */
int session_ctl_send_config(struct session *);
/* The peer now sends from a new address after `quiet_ms` of silence. */
void session_ctl_path_notice(struct session *, uint64_t quiet_ms);
/* The session's QUIC packets lost: tell the client (LOSS_REPORT), if it
 * takes the report. */
void session_ctl_loss_report(struct session *, uint64_t sent, uint64_t lost);
/* Close the -R listeners of `sess` on ports (or bind addresses) that `cp`'s AllowRemoteForward
 * no longer lists, telling the client "denied" for each. */
void session_ctl_close_remote(struct session *sess, const struct cfg_peer *cp);

/* peer.c: the configured peers, their tunnel addresses and routes. */

/* A peer for the [Peer] section `cp` (copied); with no address yet. */
struct peer *peer_create(const struct cfg_peer *cp);
/* NULL is fine. Its sessions must be gone. */
void peer_free(struct peer *);
/* Give peers[0..n) (the configuration's order, confs[i] each one's [Peer])
 * their addresses in plan[i] and fill the route table `rt`: a peer with
 * keep[i] keeps the addresses plan[i] holds already (a reload that left
 * its Address alone), the others get their static Address, and the rest
 * the next free host of the server's subnet in each family. Returns 0, or
 * -1 with "FILE:LINE:" (`path`) in *cause when a prefix would be routed
 * to two peers, a static address is outside the running server's subnet
 * (its Address changes only with a restart) or the pool runs out. */
int peer_plan_addresses(struct server *, struct peer **peers,
    const struct cfg_peer *const *confs, const bool *keep, size_t n,
    struct addr_plan *plan, struct route_table *rt, const char *path,
    char **cause);
/* `p` takes the addresses `pl` planned for it. */
void peer_set_addresses(struct peer *p, const struct addr_plan *pl);
/* After the set of peers changed: the key index the pin check searches,
 * each peer's slot on the board, and the cap on sessions. */
void peer_index(struct server *);
/* The configuration's peers, with their addresses, routed in srv->routes.
 * Returns 0, or -1 with *cause set. */
int peer_setup(struct server *, char **cause);
/* With workers: point the kernel's routes to `p` into this worker's TUN
 * (`add`, when its session starts here) or take them out. Failures are
 * logged. */
void peer_routes(struct server *, const struct peer *p, bool add);
/* state.h's peer_key: the key of the configured peer that begins with
 * `prefix`, into `key`; false when none does. `arg` is the server. */
bool peer_key_by_prefix(const uint8_t *prefix, size_t len,
    uint8_t key[KEY_LEN], void *arg);

/* reload.c */

/* Apply the configuration `next` to the running server's peers, as
 * server_reload describes. Returns 0, or -1 with the reason logged and
 * nothing changed. */
int reload_apply(struct server *, const struct cfg *next);

/* server-status.c: what status, metrics and the workers' board show. */

/* Workers 1..N-1: show worker 0 the peer `p`, whose session this worker
 * holds, as it is now. */
void server_status_show_peer(struct server *, const struct peer *p);
/* Workers 1..N-1: srv->board_ev's callback, every BOARD_REFRESH_MS. */
void server_status_board_cb(evutil_socket_t, short, void *srv);
/* control_create's status callback (ops/control.h). */
void server_status_control_cb(struct evbuffer *out, const char *request,
    void *srv, struct control_more *more);
/* metrics_create's scrape callback (ops/metrics.h). */
struct metrics_scrape *server_status_scrape(void *srv);

#endif

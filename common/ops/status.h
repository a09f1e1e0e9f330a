/* Status output shared by roved and rove: one description of the state,
 * rendered as JSON (for scripts and tests) or as text (for people). */
#ifndef ROVE_STATUS_H
#define ROVE_STATUS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/addr.h"
#include "base/json.h"
#include "forward/fwd.h"
#include "forward/udpflow.h"
#include "transport/quic.h"
#include "tunnel/recovery.h"
#include "tunnel/tunnel.h"

struct evbuffer;
struct state_stats;

/* Roaming counters (all lifetime totals). */
struct status_roam {
	uint64_t migrations;        /* client: migrations started */
	uint64_t rebinds;           /* server: validated new peer addresses */
	uint64_t reconnects;        /* client: new connections after a loss */
	uint64_t stateless_resets;  /* client: resets received */
	uint64_t zero_rtt_attempted, zero_rtt_accepted, zero_rtt_rejected;
	/* client, Transport = auto: moves of the session to TLS over TCP
	 * (UDP got no answer), and back to QUIC (UDP works again) */
	uint64_t tcp_fallbacks, quic_returns;
	/* client, auto: of the tcp_fallbacks, those because QUIC looked
	 * policed (heavy loss at a steady round trip) */
	uint64_t throttle_moves;
	/* client, auto: rate probes at a hold's end that found QUIC still
	 * policed, so the session stayed on TCP */
	uint64_t throttle_probes_failed;
	/* client: moves to another uplink because the one in use went
	 * silent (its link and route still up) */
	uint64_t uplink_moves;
	/* client: moves to a new local port (a new socket) on the same way
	 * out because the path in use went silent: a middlebox that cut the
	 * flow, or a path back after an outage */
	uint64_t port_moves;
	/* client: the keepalive in use (shorter than configured when a NAT
	 * forgot the client sooner) */
	uint64_t keepalive_ms;
};

/* A forward's listening end: -L and -D on the client, -R on the server
 * (the client lists its -R too, as the server answered them). */
#define STATUS_LISTENERS_MAX 80   /* -L and -D (64), -R (16) */
struct status_listener {
	const char *kind;     /* "local", "dynamic", "remote", "local udp", "remote udp" */
	char bind[ADDR_STRLEN + 24];  /* "127.0.0.1:8080", "port 8081" */
	char target[PROTO_FWD_MAX_HOST + 8]; /* "" when not known here */
	const char *state;    /* "listening", "requested", "denied", ... */
};

struct status_peer {
	const char *name;
	const uint8_t *public_key;     /* KEY_LEN bytes */
	const char *state;
	const struct prefix *addrs;
	size_t naddrs;
	const struct prefix *allowed;
	size_t nallowed;
	const struct sockaddr *remote; /* NULL when not connected */
	const struct sockaddr *local;  /* our end of the current path */
	/* A client's Proxy as "http://host:port", never its credentials
	 * (NULL: none), and whether the session goes through it. */
	const char *proxy;
	bool via_proxy;
	struct status_roam roam;
	const struct tunnel_counters *counters;
	bool has_quic;
	struct quic_conn_stats quic;
	/* loss recovery, when the connection has it (both ends decode it) */
	bool has_recovery;
	struct recovery_stats recovery;
	uint64_t handshakes;
	/* Wall-clock seconds of the latest completed handshake (0: never),
	 * as wg's "latest handshake"; while connected, how long ago the
	 * last packet came from the peer. */
	uint64_t latest_handshake;
	bool has_rx_idle;
	uint64_t rx_idle_ms;
	const char *connection_id;     /* quic_conn_id; NULL when not connected */
	const struct fwd_set *fwds;              /* NULL when not connected */
	const struct status_listener *listeners;
	size_t nlisteners;
	const struct fwd_counters *fwd_counters; /* NULL: no forwarding */
	const struct udp_flow_counters *udp_counters; /* NULL: none */
	const struct udp_flow_set *udp_flows;    /* NULL when not connected */
	/* A server with workers: the worker holding its session, if any. */
	bool has_worker;
	unsigned worker;
};

/* Server: how new connections were admitted (see daemon/admit.h). */
struct status_admission {
	uint64_t half_open;      /* handshakes under way now */
	uint64_t accepted, validated, retries, bad_tokens, rate_limited,
	    half_open_full;
	uint64_t waiting;        /* Initials waiting for a half-open slot now */
	uint64_t waited, wait_dups, wait_expired;
	/* TLS over TCP's share of half_open, and its budget's counters */
	uint64_t half_open_tcp, tcp_full, tcp_evicted, tcp_hurried;
};

/* Client: the server's DNS on the host's resolver (client/dns.h). */
struct status_dns {
	const char *state;   /* "off", "none", "applied", "failed" */
	const char *backend; /* "resolved", "resolvconf"; NULL unless applied */
	const struct ipaddr *servers; /* what the server sent */
	size_t nservers;
	const char (*search)[ADDR_DNS_NAME_MAX + 1];
	size_t nsearch;
	const char *error;   /* why it failed, or NULL */
};

/* Server: how many of its configured peers are in each state, whatever
 * part of them the answer lists. */
struct status_peer_counts {
	size_t configured, established, handshaking, closed;
};

struct status {
	const char *role;  /* "server" or "client" */
	const char *tun;   /* NULL in forward-only mode */
	/* Client: the configured TUN not up yet (it comes with the server's
	 * configuration), so that it does not read as forward-only. */
	const char *tun_pending;
	unsigned mtu;
	size_t datagram_mtu; /* largest inner packet one DATAGRAM carries now */
	unsigned offloads;   /* OFFLOAD_F_* on the TUN now */
	const struct prefix *addrs; /* client: addresses it was given */
	size_t naddrs;
	const struct tunnel_counters *counters;
	const struct status_peer *peers;
	size_t npeers;
	const struct state_stats *tickets; /* server: session tickets */
	const struct status_admission *admission; /* server */
	const struct status_dns *dns;             /* client */
	const struct status_peer_counts *peer_counts; /* server */
	bool summary;      /* no list of peers, only their counts */
	/* SIGHUP: configurations applied, and refused (errors in the file,
	 * or changes the running state could not take); the generation of
	 * the one running (a server: 0 as started, 1 after the first reload
	 * applied, ...). */
	uint64_t reloads, reloads_refused, reload_generation;
	/* Worker 0 of a server with workers: the others' reloads. */
	const struct status_worker_reload *worker_reloads;
	size_t nworker_reloads;
};

/* A worker's reloads as worker 0 sees them on the board. */
struct status_worker_reload {
	unsigned worker;
	uint64_t generation, applied, refused;
};

/* What a request on the control socket asks for: "status" (or
 * "metrics"), then in any order "json", "summary" (the counts of peers
 * by state instead of the list: a server's list can run to thousands)
 * and "peer NAME" (that peer alone). Unknown words are ignored, as they
 * always were. */
#define STATUS_NAME_MAX 64
struct status_request {
	bool metrics;
	bool json;
	bool summary;
	char peer[STATUS_NAME_MAX + 1]; /* "": every peer */
};
void status_request_parse(const char *request, struct status_request *);
/* Should the answer to `rq` list the peer called `name`? */
bool status_request_wants(const struct status_request *, const char *name);

/* Render `st` into `out` as JSON when `json`, else as text. */
void status_render(struct evbuffer *out, const struct status *st, bool json);

/* The same in parts, for a list of peers too long to render at once:
 * the head (all but the peers; st->peers is not read), the peers in any
 * number of calls, then the end. Each part may go to another buffer. */
struct status_renderer {
	bool json, summary;
	bool server;   /* the peers are a server's (its 0-RTT has no attempts) */
	struct json j;
};
void status_render_head(struct status_renderer *, struct evbuffer *out,
    const struct status *st, bool json);
void status_render_peers(struct status_renderer *, struct evbuffer *out,
    const struct status_peer *peers, size_t n);
void status_render_end(struct status_renderer *, struct evbuffer *out);

/* Peer state names for status. */
const char *status_state_name(const struct quic_conn *qc);

#endif

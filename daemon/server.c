/* roved: accept QUIC connections, authenticate peers by pinned key, give
 * them addresses, and route IP packets between the TUN device and them. */
#include <ngtcp2/ngtcp2.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admit.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/key.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "board.h"
#include "config/cfg-diff.h"
#include "config/cfg-table.h"
#include "config/keyidx.h"
#include "egress.h"
#include "forward/fwd.h"
#include "forward/tcp.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "ops/notify.h"
#include "ops/privdrop.h"
#include "ops/status.h"
#include "route.h"
#include "server.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "tun/tun-netlink.h"
#include "tun/tun.h"
#include "tunnel/tunnel.h"
#include "wire/proto-fwd.h"
#include "wire/proto.h"
#include "workers.h"

/* The connection-ID map starts with this many buckets and doubles when
 * it holds twice as many IDs (each connection has about ten). */
#define CID_BUCKETS_MIN 4096
/* Connections at once: at least this many, and room for every peer twice
 * (a reconnecting peer's new connection and its old one) plus the
 * handshakes admit.c lets run. */
#define MIN_SESSIONS 4096
#define TUN_BURST 64
#define UNKNOWN_LOG_SLOTS 256
/* A client has no reason to ask for more remote forwards than it may hold,
 * give or take a few retries; past this its control stream is abuse. */
#define CTL_MAX_REQUESTS (4 * CFG_MAX_REMOTE_FORWARDS)
/* Control replies the client has not acknowledged: a client that stops
 * reading its control stream is closed before they pile up. */
#define CTL_MAX_UNACKED 16384
#define UNKNOWN_LOG_INTERVAL_MS 60000
/* The longest control message, with its type and length. */
#define SESSION_CTL_MAX (PROTO_MAX_MSG + 16)

struct session;

/* One configured peer. Sessions, forwards and the route table point at
 * it, so it stays where it is while it is configured: a reload changes
 * its copy of the configuration in place, and one that removes it closes
 * every session referring to it before freeing it (peer_remove). */
struct peer {
	struct cfg_peer conf;               /* its [Peer] section, owned */
	const struct cfg_peer *cfg;         /* &conf */
	struct prefix addrs[CFG_MAX_ADDRS]; /* its tunnel addresses (host) */
	size_t naddrs;
	uint8_t subnet_len[CFG_MAX_ADDRS];  /* prefix length told to the client */
	struct session *sess;               /* the live connection, or NULL */
	struct tunnel_counters counters;
	struct fwd_counters fwd_counters;
	uint64_t handshakes;
	uint64_t rebinds;        /* its address changed under a connection */
	uint64_t zero_rtt;       /* connections whose 0-RTT was accepted */
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
};

struct session {
	LIST_ENTRY(session) entry;
	struct server *srv;
	struct quic_conn *qc;
	struct peer *peer;          /* set once the handshake completed */
	struct peer *pending_peer;  /* matched by the pin check */
	struct cid_entry *cids;
	uint8_t *ctl;               /* SESSION_CTL_MAX bytes while a control
	                             * message is incomplete, else NULL */
	size_t ctllen;
	bool configured;            /* server config sent */
	struct fwd_set fwds;        /* valid once fwd_peer is set */
	struct peer *fwd_peer;      /* whose forwards: set at the handshake's
	                             * end, or at a 0-RTT forward stream */
	struct egress_listener *rlisteners[CFG_MAX_REMOTE_FORWARDS]; /* -R */
	size_t nrlisteners;
	bool half_open;             /* counted in server.half_open */
	size_t ctl_requests;        /* REMOTE_FORWARD requests so far */
	uint64_t features;          /* PROTO_FEATURE_* agreed in the hello */
	uint64_t since;             /* the handshake completed (clock_now) */
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
	LIST_HEAD(, session) sessions;
	size_t nsessions, max_sessions;
	size_t half_open;           /* sessions still in their handshake */
	struct admit admit;
	struct event *wait_ev;      /* one-shot: start_waiting */
	struct cid_entry **cid_map; /* cid_buckets chains, a power of two */
	size_t cid_buckets, ncids;

	struct tunnel_counters counters;
	uint64_t stateless_resets;
	struct egress *egress;
	struct unknown_log unknown_log[UNKNOWN_LOG_SLOTS];
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

/* Only one server per process; the pin check reaches it through here. */
static struct server *the_server;

static uint64_t
cid_hash(const struct server *srv, const uint8_t *cid, size_t len)
{
	/* Keyed so that client-chosen initial CIDs cannot aim at one bucket. */
	uint64_t h = srv->cid_seed ^ 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= cid[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 29;
	return h;
}

static struct cid_entry **
cid_bucket(struct server *srv, const uint8_t *cid, size_t len)
{
	return &srv->cid_map[cid_hash(srv, cid, len) & (srv->cid_buckets - 1)];
}

static struct session *
cid_lookup(struct server *srv, const uint8_t *cid, size_t len)
{
	struct cid_entry *e;

	for (e = *cid_bucket(srv, cid, len); e != NULL; e = e->next) {
		if (e->cid.datalen == len && memcmp(e->cid.data, cid, len) == 0)
			return e->sess;
	}
	return NULL;
}

/* Twice as many buckets, so that chains stay short as peers connect. */
static void
cid_grow(struct server *srv)
{
	struct cid_entry **old = srv->cid_map, *e, *next;
	size_t n = srv->cid_buckets;

	srv->cid_buckets = n * 2;
	srv->cid_map = xcalloc(srv->cid_buckets, sizeof *srv->cid_map);
	for (size_t i = 0; i < n; i++) {
		for (e = old[i]; e != NULL; e = next) {
			struct cid_entry **b = cid_bucket(srv, e->cid.data,
			    e->cid.datalen);

			next = e->next;
			e->next = *b;
			*b = e;
		}
	}
	free(old);
}

static void
cid_add_cb(struct quic_conn *qc, const ngtcp2_cid *cid, void *arg)
{
	struct session *sess = arg;
	struct server *srv = sess->srv;
	struct cid_entry *e, **b;

	(void)qc;
	if (cid_lookup(srv, cid->data, cid->datalen) != NULL)
		return;
	if (srv->ncids >= 2 * srv->cid_buckets)
		cid_grow(srv);
	e = xcalloc(1, sizeof *e);
	e->cid = *cid;
	e->sess = sess;
	b = cid_bucket(srv, cid->data, cid->datalen);
	e->next = *b;
	*b = e;
	srv->ncids++;
	e->sess_next = sess->cids;
	sess->cids = e;
}

static void
cid_unlink(struct server *srv, struct cid_entry *e)
{
	struct cid_entry **pp = cid_bucket(srv, e->cid.data, e->cid.datalen);

	for (; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			srv->ncids--;
			return;
		}
	}
}

static void
cid_remove_cb(struct quic_conn *qc, const ngtcp2_cid *cid, void *arg)
{
	struct session *sess = arg;
	struct cid_entry **pp;

	(void)qc;
	for (pp = &sess->cids; *pp != NULL; pp = &(*pp)->sess_next) {
		struct cid_entry *e = *pp;
		if (e->cid.datalen == cid->datalen &&
		    memcmp(e->cid.data, cid->data, cid->datalen) == 0) {
			*pp = e->sess_next;
			cid_unlink(sess->srv, e);
			free(e);
			return;
		}
	}
}

/* The handshake is over, one way or the other. */
static void
session_opened(struct session *sess)
{
	if (sess->half_open) {
		sess->half_open = false;
		sess->srv->half_open--;
		/* A slot is free: the next waiter may start, once this
		 * callback has returned. */
		if (sess->srv->admit.nwaiting > 0 && sess->srv->wait_ev != NULL)
			event_active(sess->srv->wait_ev, EV_TIMEOUT, 1);
	}
}

/*
 * With workers, the kernel's routes to a peer (its tunnel addresses and
 * AllowedIPs) point into the TUN device of the worker that holds its
 * session: added (replacing another worker's) when it connects, removed
 * when it goes unless another worker has taken them over since (a delete
 * names our device). Failures leave packets to the wrong worker, which
 * drops them as no_route: logged, never fatal.
 */
static void
peer_routes(struct server *srv, const struct peer *p, bool add)
{
	const struct cfg_prefix_list *allowed = &p->cfg->allowed_ips;
	char *cause = NULL, s[ADDR_STRLEN];

	if (srv->workers == NULL || !srv->has_tun)
		return;
	for (size_t k = 0; k < p->naddrs + allowed->n; k++) {
		struct prefix dst = k < p->naddrs ? p->addrs[k] :
		    allowed->v[k - p->naddrs];
		int rv;

		if (k < p->naddrs)
			dst.len = dst.addr.family == AF_INET ? 32 : 128;
		rv = add ? tun_netlink_replace_route(srv->tun.ifindex, &dst,
		    &cause) : tun_netlink_del_route(srv->tun.ifindex, &dst,
		    &cause);
		if (rv != 0 && add)
			log_warn("peer %s: route %s into %s: %s", p->cfg->name,
			    addr_prefix_str(&dst, s), srv->tun.name, cause);
		free(cause);
		cause = NULL;
	}
}

static void
session_free(struct session *sess)
{
	struct server *srv = sess->srv;
	struct cid_entry *e, *next;

	session_opened(sess);
	/* Under MaxSessions too, a waiter may start now. */
	if (srv->admit.nwaiting > 0 && srv->wait_ev != NULL)
		event_active(srv->wait_ev, EV_TIMEOUT, 1);
	for (e = sess->cids; e != NULL; e = next) {
		next = e->sess_next;
		cid_unlink(srv, e);
		free(e);
	}
	/* Forwards and -R listeners go away with the session. */
	for (size_t i = 0; i < sess->nrlisteners; i++)
		egress_listener_free(sess->rlisteners[i]);
	if (sess->fwds.qc != NULL)
		fwd_set_clear(&sess->fwds);
	if (sess->peer != NULL && sess->peer->sess == sess) {
		sess->peer->sess = NULL;
		srv->nconnected--;
		board_drop(srv->board, sess->peer->idx, srv->worker, sess->since);
		if (!srv->shutting_down)
			peer_routes(srv, sess->peer, false);
	}
	LIST_REMOVE(sess, entry);
	srv->nsessions--;
	quic_conn_free(sess->qc);
	free(sess->ctl);
	free(sess);
}

/* state.c: the configured peer whose key a group member's ticket names
 * by its first octets. */
static bool
peer_key_by_prefix(const uint8_t *prefix, size_t len, uint8_t key[KEY_LEN],
    void *arg)
{
	struct server *srv = arg;
	size_t i;

	if (!keyidx_find_prefix(&srv->keys, prefix, len, &i))
		return false;
	memcpy(key, srv->peers[i]->cfg->pubkey, KEY_LEN);
	return true;
}

static bool
pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct session *sess = arg;
	struct server *srv = the_server;
	const struct sockaddr *remote;
	struct unknown_log *slot;
	struct ipaddr from;
	socklen_t len;
	uint64_t now;
	size_t i;

	if (srv == NULL || sess == NULL)
		return false;
	if (keyidx_find(&srv->keys, pub, &i)) {
		sess->pending_peer = srv->peers[i];
		return true;
	}
	tunnel_drop(TUNNEL_DROP_UNKNOWN_PEER, NULL, &srv->counters);
	/* At most one line per source prefix per minute: an IPv6 host holds
	 * a whole /64 and could otherwise buy a line per handshake. */
	remote = quic_conn_remote(qc, &len);
	if (!admit_source_prefix(remote, &from))
		return false;
	slot = &srv->unknown_log[cid_hash(srv, from.b, sizeof from.b) %
	    UNKNOWN_LOG_SLOTS];
	now = clock_now_ms();
	if (!addr_equal(&slot->addr, &from) || slot->last_ms == 0 ||
	    now - slot->last_ms >= UNKNOWN_LOG_INTERVAL_MS) {
		char abuf[ADDR_STRLEN], kbuf[KEY_B64_LEN + 1];

		slot->addr = from;
		slot->last_ms = now;
		key_encode(pub, kbuf);
		log_warn("unknown peer %s with public key %s: rejected",
		    addr_sockaddr_str(remote, abuf), kbuf);
	}
	return false;
}

static void
fwd_request(struct fwd_set *set, struct fwd *f, const struct proto_fwd_header *hdr)
{
	struct session *sess = set->arg;

	egress_request(sess->srv->egress, sess->fwd_peer->cfg, f, hdr);
}

static const struct fwd_ops session_fwd_ops = {
	.request = fwd_request,
	.release = egress_release,
};

/* Start serving the forwards of `peer` on this session. */
static void
session_fwds_init(struct session *sess, struct peer *peer)
{
	if (sess->fwd_peer != NULL)
		return;
	sess->fwd_peer = peer;
	fwd_set_init(&sess->fwds, sess->srv->base, sess->qc,
	    sess->srv->cfg->forward_buffer, sess->srv->cfg->max_forwards,
	    &session_fwd_ops, sess, &peer->fwd_counters, peer->cfg->name);
}

/* Workers 1..N-1: show worker 0 (the board) a peer whose session this
 * worker holds, as it is now. */
static void
board_show_peer(struct server *srv, const struct peer *p)
{
	struct board_peer bp = {
		.worker = srv->worker,
		.since = p->sess->since,
		.counters = p->counters,
		.handshakes = p->handshakes,
		.rebinds = p->rebinds,
		.zero_rtt = p->zero_rtt,
		.fwd = p->fwd_counters,
		.fwd_open = p->sess->fwds.n,
	};
	const struct sockaddr *sa;
	socklen_t len;

	if (srv->board == NULL || srv->worker == 0)
		return;
	memcpy(bp.key, p->cfg->pubkey, BOARD_KEY);
	quic_conn_get_stats(p->sess->qc, &bp.quic);
	if ((sa = quic_conn_remote(p->sess->qc, &len)) != NULL &&
	    len <= sizeof bp.remote)
		memcpy(&bp.remote, sa, len);
	if ((sa = quic_conn_local(p->sess->qc, &len)) != NULL &&
	    len <= sizeof bp.local)
		memcpy(&bp.local, sa, len);
	snprintf(bp.connection_id, sizeof bp.connection_id, "%s",
	    quic_conn_id(p->sess->qc));
	board_put(srv->board, p->idx, &bp);
}

/* How this worker admitted new connections, for status. */
static void
admission_now(const struct server *srv, struct status_admission *a)
{
	const struct admit_stats *as = &srv->admit.stats;

	*a = (struct status_admission){
		.half_open = srv->half_open,
		.accepted = as->accepted,
		.validated = as->validated,
		.retries = as->retries,
		.bad_tokens = as->bad_tokens,
		.rate_limited = as->rate_limited,
		.half_open_full = as->half_open_full,
		.waiting = srv->admit.nwaiting,
		.waited = as->waited,
		.wait_dups = as->wait_dups,
		.wait_expired = as->wait_expired,
	};
}

/* Workers 1..N-1, every BOARD_REFRESH_MS: all this worker holds, and its
 * totals. */
static void
board_refresh_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct board_worker bw = { .counters = srv->counters };

	(void)fd;
	(void)what;
	admission_now(srv, &bw.admission);
	for (size_t k = 0; k < srv->npeers; k++) {
		if (srv->peers[k]->sess != NULL)
			board_show_peer(srv, srv->peers[k]);
	}
	state_server_stats(srv->state, &bw.tickets);
	board_put_worker(srv->board, srv->worker, &bw);
}

/* May forward streams arriving before the handshake's end be served?
 * They came in 0-RTT, which anyone who saw the client's first flight can
 * send again. They are served only when this handshake spent a ticket
 * the register held unspent: a replay presents a spent ticket, gets a
 * full handshake without 0-RTT keys (so ngtcp2 cannot even read its
 * 0-RTT packets), and cannot finish that handshake without the client's
 * private key. The three checks say the same thing three ways: wolfSSL
 * accepted the early data, the register spent the ticket for this very
 * handshake, and the ticket named a configured peer. */
static bool
early_forwards_ok(struct session *sess)
{
	return sess->srv->cfg->zero_rtt && sess->pending_peer != NULL &&
	    quic_conn_early_rx(sess->qc) &&
	    state_ticket_spent_here(quic_conn_tls(sess->qc));
}

static void
handshake_done_cb(struct quic_conn *qc, void *arg)
{
	struct session *sess = arg;
	struct peer *peer = sess->pending_peer;
	const struct sockaddr *remote;
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	char abuf[ADDR_STRLEN];
	socklen_t len;
	size_t tokenlen;

	session_opened(sess);
	if (peer == NULL) {
		quic_conn_close(qc, 3, "unknown peer");
		return;
	}
	/* A peer has one live connection: a new one (a reconnect after a
	 * restart or a lost path) replaces the old. */
	if (peer->sess != NULL && peer->sess != sess) {
		struct session *old = peer->sess;
		old->peer = NULL;
		quic_conn_close(old->qc, 0, "replaced by a new connection");
	} else if (peer->sess == NULL)
		sess->srv->nconnected++;
	sess->peer = peer;
	sess->since = clock_now();
	peer->sess = sess;
	peer->handshakes++;
	peer_routes(sess->srv, peer, true);
	{
		struct quic_conn_stats st;
		quic_conn_get_stats(qc, &st);
		if (st.early_accepted)
			peer->zero_rtt++;
	}
	session_fwds_init(sess, peer);
	board_show_peer(sess->srv, peer);
	remote = quic_conn_remote(qc, &len);
	/* Its next connection from this address skips the Retry that a
	 * server under load asks of unknown addresses. */
	tokenlen = admit_new_token(&sess->srv->admit, remote, len, clock_now(),
	    token, sizeof token);
	quic_conn_submit_new_token(qc, token, tokenlen);
	log_info("peer %s connected from %s", peer->cfg->name,
	    addr_sockaddr_str(remote, abuf));
	server_notify(sess->srv);
}

_Static_assert(CFG_MAX_DNS <= PROTO_MAX_DNS &&
    CFG_MAX_DNS_SEARCH <= PROTO_MAX_DNS_SEARCH,
    "the config may list more DNS entries than a SERVER_CONFIG carries");

static int
send_server_config(struct session *sess)
{
	struct server *srv = sess->srv;
	struct peer *peer = sess->peer;
	struct proto_server_config sc;
	uint8_t buf[PROTO_MAX_MSG];
	size_t n;

	memset(&sc, 0, sizeof sc);
	sc.version = PROTO_VERSION;
	for (size_t i = 0; i < peer->naddrs; i++) {
		sc.addrs[sc.naddrs] = peer->addrs[i];
		sc.addrs[sc.naddrs].len = peer->subnet_len[i];
		sc.naddrs++;
	}
	/* The tunnel subnets; the client adds its own Routes on top. */
	for (size_t i = 0; i < srv->cfg->naddrs && sc.nroutes < PROTO_MAX_ROUTES; i++) {
		sc.routes[sc.nroutes] = srv->cfg->addrs[i];
		addr_prefix_mask(&sc.routes[sc.nroutes]);
		sc.nroutes++;
	}
	sc.mtu = srv->cfg->mtu;
	sc.keepalive = srv->cfg->keepalive;
	/* DNS and DNSSearch: the config parser bounds both lists by the
	 * protocol's limits and validates every name. */
	sc.ndns = srv->cfg->ndns_servers;
	memcpy(sc.dns, srv->cfg->dns_servers, sc.ndns * sizeof sc.dns[0]);
	for (size_t i = 0; i < srv->cfg->ndns_search; i++)
		snprintf(sc.dns_search[sc.ndns_search++], sizeof sc.dns_search[0],
		    "%s", srv->cfg->dns_search[i]);
	sc.features = sess->features;
	n = proto_encode_server_config(buf, sizeof buf, &sc);
	if (n == 0)
		return -1;
	sess->configured = true;
	return quic_conn_stream_send(sess->qc, 0, buf, n, false);
}

/* -R: listen where the peer asks, if its AllowRemoteForward permits. */
static int
remote_forward(struct session *sess, const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf;
	uint8_t buf[64];
	size_t n;

	if (!sess->configured || proto_fwd_remote_decode(body, len, &rf) != 0)
		return -1;
	/* Bounded: every request costs a reply we keep until it is
	 * acknowledged. */
	if (++sess->ctl_requests > CTL_MAX_REQUESTS ||
	    quic_conn_stream_unacked(sess->qc, 0) > CTL_MAX_UNACKED) {
		quic_conn_close(sess->qc, 2, "control stream abuse");
		return 0;
	}
	rf.status = PROTO_FWD_OK;
	if (sess->nrlisteners == sizeof sess->rlisteners / sizeof sess->rlisteners[0])
		rf.status = PROTO_FWD_ERR_LIMIT;
	else {
		struct egress_listener *l = egress_listen(sess->srv->egress,
		    sess->peer->cfg, &sess->fwds, rf.port, &rf.status);
		if (l != NULL)
			sess->rlisteners[sess->nrlisteners++] = l;
	}
	n = proto_fwd_remote_encode(buf, sizeof buf, PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
	return n > 0 ? quic_conn_stream_send(sess->qc, 0, buf, n, false) : -1;
}

/* -R taken back (the client's configuration was reloaded): stop
 * listening there. Connections accepted before carry on. Counted with the
 * requests, so asking and cancelling in a loop ends as abuse too. */
static int
remote_forward_cancel(struct session *sess, const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf;
	size_t kept = 0;

	if (!sess->configured || proto_fwd_remote_decode(body, len, &rf) != 0)
		return -1;
	if (++sess->ctl_requests > CTL_MAX_REQUESTS) {
		quic_conn_close(sess->qc, 2, "control stream abuse");
		return 0;
	}
	for (size_t i = 0; i < sess->nrlisteners; i++) {
		if (egress_listener_port(sess->rlisteners[i]) != rf.port) {
			sess->rlisteners[kept++] = sess->rlisteners[i];
			continue;
		}
		log_info("peer %s: remote forward on port %u closed at its "
		    "request", sess->peer->cfg->name, rf.port);
		egress_listener_free(sess->rlisteners[i]);
	}
	sess->nrlisteners = kept;
	return 0;
}

static int
control_message(struct session *sess, uint64_t type, const uint8_t *body, size_t len)
{
	struct proto_client_hello hello;

	if (type == PROTO_MSG_REMOTE_FORWARD)
		return remote_forward(sess, body, len);
	/* Only from a client that announced it, as docs/PROTOCOL.md has it. */
	if (type == PROTO_MSG_REMOTE_FORWARD_CANCEL &&
	    (sess->features & PROTO_FEATURE_CANCEL_REMOTE))
		return remote_forward_cancel(sess, body, len);
	if (type != PROTO_MSG_CLIENT_HELLO || sess->configured)
		return -1;
	if (proto_decode_client_hello(body, len, &hello) != 0)
		return -1;
	if (hello.version != PROTO_VERSION) {
		quic_conn_close(sess->qc, 4, "unsupported protocol version");
		return 0;
	}
	sess->features = hello.features & PROTO_FEATURES;
	return send_server_config(sess);
}

static int
stream_data_cb(struct quic_conn *qc, int64_t stream_id, const uint8_t *data,
    size_t len, bool fin, void *stream_arg, void *arg)
{
	struct session *sess = arg;
	const uint8_t *body;
	uint64_t type;
	size_t bodylen;
	long used;

	(void)fin;
	if (sess->peer == NULL && stream_id != 0 && early_forwards_ok(sess)) {
		session_fwds_init(sess, sess->pending_peer);
		return fwd_on_data(&sess->fwds, stream_id, stream_arg, data, len, fin);
	}
	if (sess->peer == NULL) {
		/* Other streams before the handshake completed (the control
		 * stream, or 0-RTT we cannot prove fresh) are refused. */
		quic_conn_stream_consume(qc, stream_id, len);
		quic_conn_stream_reset(qc, stream_id, PROTO_FWD_ERR_DENIED);
		return 0;
	}
	if (stream_id != 0)
		return fwd_on_data(&sess->fwds, stream_id, stream_arg, data, len, fin);
	if (sess->ctl == NULL)
		sess->ctl = xmalloc(SESSION_CTL_MAX);
	if (len > SESSION_CTL_MAX - sess->ctllen)
		return -1;
	memcpy(sess->ctl + sess->ctllen, data, len);
	sess->ctllen += len;
	quic_conn_stream_consume(qc, stream_id, len);
	while ((used = proto_msg_next(sess->ctl, sess->ctllen, &type, &body,
	    &bodylen)) > 0) {
		if (control_message(sess, type, body, bodylen) != 0)
			return -1;
		if (quic_conn_state(qc) == QUIC_STATE_CLOSED)
			return 0;
		memmove(sess->ctl, sess->ctl + used, sess->ctllen - (size_t)used);
		sess->ctllen -= (size_t)used;
	}
	/* Kept only while a message is incomplete: the control stream is
	 * quiet after the hello, so an idle session holds no buffer. */
	if (sess->ctllen == 0) {
		free(sess->ctl);
		sess->ctl = NULL;
	}
	return used < 0 ? -1 : 0;
}

static void
datagram_cb(struct quic_conn *qc, const uint8_t *data, size_t len, void *arg)
{
	struct session *sess = arg;
	struct server *srv = sess->srv;
	struct peer *peer = sess->peer;
	struct ippkt_info info;
	const uint8_t *pkt;
	size_t pktlen;

	(void)qc;
	/* 0-RTT arrives before the handshake completes: the peer is then
	 * the one its session ticket named. */
	if (peer == NULL)
		peer = sess->pending_peer;
	if (peer == NULL) {
		tunnel_drop(TUNNEL_DROP_UNKNOWN_PEER, NULL, &srv->counters);
		return;
	}
	if (tunnel_decode(data, len, &pkt, &pktlen, &info, &peer->counters,
	    &srv->counters) != 0)
		return;
	/* Cryptokey routing: the source must be one this peer owns. */
	if (route_lookup(srv->routes, &info.src) != peer) {
		tunnel_drop(TUNNEL_DROP_SPOOFED_SOURCE, &peer->counters, &srv->counters);
		return;
	}
	if (!srv->has_tun) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, &peer->counters, &srv->counters);
		return;
	}
	tunnel_deliver(&srv->tun_out, pkt, pktlen, &peer->counters);
}

static void
path_validated_cb(struct quic_conn *qc, enum quic_path_result res,
    const struct sockaddr *local, const struct sockaddr *remote, void *arg)
{
	struct session *sess = arg;
	char abuf[ADDR_STRLEN];

	(void)qc;
	(void)local;
	if (res != QUIC_PATH_OK || sess->peer == NULL)
		return;
	/* A validated new path on our side is the peer's NAT rebinding or
	 * its migration; routing is by connection ID, so nothing else moves. */
	sess->peer->rebinds++;
	log_info("peer %s now at %s", sess->peer->cfg->name,
	    addr_sockaddr_str(remote, abuf));
}

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *ci, void *arg)
{
	struct session *sess = arg;
	struct server *srv = sess->srv;
	bool was_peer = sess->peer != NULL;

	(void)qc;
	if (was_peer)
		log_info("peer %s disconnected: %s%s", sess->peer->cfg->name,
		    ci->remote ? "closed by peer: " : "", ci->reason);
	session_free(sess);
	if (was_peer)
		server_notify(srv);
}

/* A burst over TCP brought packets for the TUN: out they go, coalesced. */
static void
input_done_cb(struct quic_conn *qc, void *arg)
{
	struct session *sess = arg;

	(void)qc;
	if (sess->srv->has_tun)
		tunnel_flush(&sess->srv->tun_out);
}

static const struct quic_conn_cbs session_cbs = {
	.handshake_done = handshake_done_cb,
	.datagram = datagram_cb,
	.stream_data = stream_data_cb,
	.stream_reset = fwd_stream_reset,
	.stream_acked = fwd_stream_acked,
	.stream_close = fwd_stream_close,
	.cid_add = cid_add_cb,
	.cid_remove = cid_remove_cb,
	.closed = closed_cb,
	.path_validated = path_validated_cb,
	.input_done = input_done_cb,
};

static void
send_version_negotiation(struct listener *l, const ngtcp2_version_cid *vc,
    const struct sockaddr *to, socklen_t tolen)
{
	uint32_t versions[] = { NGTCP2_PROTO_VER_V1 };
	uint8_t *dst = udp_batch_slot(&l->batch), r;
	ngtcp2_ssize n;

	random_bytes(&r, 1);
	n = ngtcp2_pkt_write_version_negotiation(dst, UDP_MAX_PAYLOAD, r,
	    vc->scid, vc->scidlen, vc->dcid, vc->dcidlen, versions, 1);
	if (n > 0)
		udp_batch_commit(&l->batch, (size_t)n, to, tolen, 0);
}

static void
send_stateless_reset(struct listener *l, const ngtcp2_version_cid *vc,
    size_t len, const struct sockaddr *to, socklen_t tolen)
{
	struct server *srv = l->srv;
	uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN], rnd[64];
	size_t randlen;
	ngtcp2_cid cid;
	ngtcp2_ssize n;

	tunnel_drop(TUNNEL_DROP_INVALID_PACKET, NULL, &srv->counters);
	/* Smaller than what triggered it (no reset loops, no amplification),
	 * yet long enough to look like a packet; and rate-limited. */
	if (len < 1 + NGTCP2_MIN_STATELESS_RESET_RANDLEN + sizeof token + 1 ||
	    !log_ratelimit_ok(&srv->reset_rl, clock_now_ms()))
		return;
	randlen = len - 1 - sizeof token - 1;
	if (randlen > sizeof rnd)
		randlen = sizeof rnd;
	ngtcp2_cid_init(&cid, vc->dcid, vc->dcidlen);
	if (ngtcp2_crypto_generate_stateless_reset_token(token,
	    state_reset_secret(srv->state), STATE_RESET_SECRET_LEN, &cid) != 0)
		return;
	random_bytes(rnd, randlen);
	n = ngtcp2_pkt_write_stateless_reset(udp_batch_slot(&l->batch),
	    UDP_MAX_PAYLOAD, token, rnd, randlen);
	if (n > 0) {
		udp_batch_commit(&l->batch, (size_t)n, to, tolen, 0);
		srv->stateless_resets++;
	}
}

/* A session for a handshake admission let through, whichever transport
 * it arrived on: counted against the session cap and as half-open until
 * its handshake completes. */
static struct session *
session_new_half_open(struct server *srv)
{
	struct session *sess = xcalloc(1, sizeof *sess);

	sess->srv = srv;
	LIST_INSERT_HEAD(&srv->sessions, sess, entry);
	srv->nsessions++;
	sess->half_open = true;
	srv->half_open++;
	return sess;
}

/* Starts the handshake of the Initial `pkt` (parsed into `hd`) that
 * admission let through with `adm`. */
static void
start_session(struct listener *l, const ngtcp2_pkt_hd *hd,
    const struct admit_result *adm, const uint8_t *pkt, size_t len,
    const struct sockaddr *from, socklen_t fromlen, uint8_t ecn)
{
	struct server *srv = l->srv;
	struct quic_settings qs;
	struct session *sess;
	char *cause = NULL;

	sess = session_new_half_open(srv);
	qs = srv->qs;
	qs.max_udp_payload = l->sock.family == AF_INET6 ? UDP_MAX_PAYLOAD6 :
	    UDP_MAX_PAYLOAD;
	if (adm->validated) {
		qs.token = hd->token;
		qs.tokenlen = hd->tokenlen;
		qs.token_retry = adm->retried;
		qs.odcid = &adm->odcid;
	}
	sess->qc = quic_conn_server_create(srv->base, &qs, &session_cbs, sess,
	    srv->tls, &l->batch, hd, from, fromlen, &cause);
	if (sess->qc == NULL) {
		log_warn("%s: %s", __func__, cause);
		free(cause);
		session_free(sess);
		return;
	}
	quic_conn_set_send_limit(sess->qc, srv->cfg->forward_memory);
	quic_conn_read(sess->qc, &l->sock, from, fromlen, pkt, len, ecn);
}

/* The next pass of start_waiting: after the sockets have been read. */
static const struct timeval wait_next_pass = { 0, 0 };

static void
new_session(struct listener *l, const uint8_t *pkt, size_t len,
    const struct sockaddr *from, socklen_t fromlen, uint8_t ecn)
{
	struct server *srv = l->srv;
	struct admit_result adm;
	ngtcp2_pkt_hd hd;
	size_t retrylen;

	if (srv->shutting_down || ngtcp2_accept(&hd, pkt, len) != 0) {
		tunnel_drop(TUNNEL_DROP_INVALID_PACKET, NULL, &srv->counters);
		return;
	}
	if (srv->nsessions >= srv->max_sessions) {
		tunnel_drop(TUNNEL_DROP_QUEUE_FULL, NULL, &srv->counters);
		return;
	}
	/* Nothing is allocated for an Initial before this says yes. */
	switch (admit_check(&srv->admit, &hd, from, fromlen, srv->half_open,
	    clock_now(), &adm, udp_batch_slot(&l->batch), UDP_MAX_PAYLOAD,
	    &retrylen)) {
	case ADMIT_RETRY:
		udp_batch_commit(&l->batch, retrylen, from, fromlen, 0);
		return;
	case ADMIT_DROP:
		return;
	case ADMIT_WAIT:
		admit_wait_push(&srv->admit, &hd, &adm, pkt, len, ecn, from,
		    fromlen, l, clock_now());
		/* Behind others while a slot is free: the next pass starts
		 * it (one may already be due; adding again keeps one). */
		if (srv->half_open < ADMIT_MAX_HALF_OPEN)
			event_add(srv->wait_ev, &wait_next_pass);
		return;
	case ADMIT_ACCEPT:
		break;
	}
	start_session(l, &hd, &adm, pkt, len, from, fromlen, ecn);
}

static void handle_packet(struct listener *, const uint8_t *, size_t,
    const struct sockaddr *, socklen_t, uint8_t);
static void flush_all(struct server *);

/* Starts the handshakes that waited for a half-open slot while slots are
 * free: returning clients first, each in the order they came. At most
 * ADMIT_WAIT_BATCH per pass, the next pass after the sockets have been
 * read: in a reconnect storm the Finished of handshakes under way then
 * completes them (freeing their slots) between batches, so the clients
 * work on one batch while roved starts the next, instead of both sides
 * taking turns on a line of 256. */
static void
start_waiting(struct server *srv)
{
	struct admit_waiter *w;
	uint64_t now = clock_now();
	ngtcp2_pkt_hd hd;
	unsigned started = 0;

	while (!srv->shutting_down && srv->half_open < ADMIT_MAX_HALF_OPEN &&
	    srv->nsessions < srv->max_sessions) {
		struct listener *l;

		if (started++ == ADMIT_WAIT_BATCH) {
			if (srv->admit.nwaiting > 0)
				event_add(srv->wait_ev, &wait_next_pass);
			break;
		}
		if ((w = admit_wait_pop(&srv->admit, now)) == NULL)
			break;
		l = w->arg;

		if (ngtcp2_accept(&hd, w->pkts[0].data, w->pkts[0].len) == 0) {
			start_session(l, &hd, &w->res, w->pkts[0].data,
			    w->pkts[0].len, (struct sockaddr *)&w->from, w->fromlen,
			    w->pkts[0].ecn);
			/* The 0-RTT packets that came after it find the new
			 * session by their DCID. */
			for (size_t i = 1; i < w->npkts; i++)
				handle_packet(l, w->pkts[i].data, w->pkts[i].len,
				    (struct sockaddr *)&w->from, w->fromlen,
				    w->pkts[i].ecn);
		}
		admit_waiter_free(w);
	}
}

static void
wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;

	(void)fd;
	(void)what;
	start_waiting(srv);
	flush_all(srv);
}

static void
handle_packet(struct listener *l, const uint8_t *pkt, size_t len,
    const struct sockaddr *from, socklen_t fromlen, uint8_t ecn)
{
	struct server *srv = l->srv;
	struct admit_waiter *w;
	ngtcp2_version_cid vc;
	struct session *sess;
	int rv;

	rv = ngtcp2_pkt_decode_version_cid(&vc, pkt, len, QUIC_SCID_LEN);
	if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
		/* Only for a datagram as large as a real Initial, so the answer
		 * can never amplify. */
		if (len >= 1200)
			send_version_negotiation(l, &vc, from, fromlen);
		return;
	}
	/* Version 0 with a long header parses too, with CIDs of any length;
	 * QUIC v1 never uses more than 20 bytes. */
	if (rv != 0 || vc.dcidlen > NGTCP2_MAX_CIDLEN || vc.scidlen > NGTCP2_MAX_CIDLEN) {
		tunnel_drop(TUNNEL_DROP_INVALID_PACKET, NULL, &srv->counters);
		return;
	}
	sess = cid_lookup(srv, vc.dcid, vc.dcidlen);
	if (sess != NULL) {
		quic_conn_read(sess->qc, &l->sock, from, fromlen, pkt, len, ecn);
		return;
	}
	if (vc.version == 0 && (pkt[0] & 0x80) == 0) {
		/* A short header for a connection we do not know: most likely
		 * one from before a restart. Tell the client at once. */
		send_stateless_reset(l, &vc, len, from, fromlen);
		return;
	}
	/* More of a client whose Initial waits for a half-open slot. */
	if ((w = admit_wait_find(&srv->admit, vc.dcid, vc.dcidlen)) != NULL) {
		admit_wait_add(&srv->admit, w, pkt, len, ecn);
		return;
	}
	new_session(l, pkt, len, from, fromlen, ecn);
}

/* A client over TCP: admitted by the same rules as a QUIC Initial, and
 * from then on a session like any other. */
static void
tcp_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_listener *tl = arg;
	struct server *srv = tl->srv;
	struct sockaddr_storage from;
	struct session *sess;
	socklen_t fromlen;
	int c;

	(void)fd;
	(void)what;
	/* Bounded: a flood of connections leaves room for everything else. */
	for (int i = 0; i < 64; i++) {
		fromlen = sizeof from;
		c = accept4(tl->fd, (struct sockaddr *)&from, &fromlen,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c == -1) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				log_warn("ListenTCP: accept: %s", strerror(errno));
			return;
		}
		if (srv->shutting_down || srv->nsessions >= srv->max_sessions ||
		    admit_check_tcp(&srv->admit, (struct sockaddr *)&from,
		    srv->half_open, clock_now()) != ADMIT_ACCEPT) {
			if (!srv->shutting_down && srv->nsessions >= srv->max_sessions)
				tunnel_drop(TUNNEL_DROP_QUEUE_FULL, NULL, &srv->counters);
			close(c);
			continue;
		}
		sess = session_new_half_open(srv);
		sess->qc = quic_tcp_server_create(srv->base, &srv->qs, &session_cbs,
		    sess, srv->tls_tcp, c, (struct sockaddr *)&from, fromlen);
		quic_conn_set_send_limit(sess->qc, srv->cfg->forward_memory);
	}
}

static int
setup_tcp_listeners(struct server *srv, char **cause)
{
	/* Worker 0 serves TLS over TCP for the whole server. */
	for (size_t i = 0; srv->worker == 0 && i < srv->cfg->nlisten_tcp; i++) {
		struct tcp_listener *tl = &srv->tcp_listeners[i];

		tl->srv = srv;
		tl->fd = tcp_listen((const struct sockaddr *)&srv->cfg->listen_tcp[i],
		    srv->cfg->listen_tcp_len[i], cause);
		if (tl->fd == -1)
			return -1;
		srv->ntcp_listeners++;
		tl->ev = event_new(srv->base, tl->fd, EV_READ | EV_PERSIST,
		    tcp_accept_cb, tl);
		event_add(tl->ev, NULL);
	}
	return 0;
}

static void
flush_all(struct server *srv)
{
	/* The packets this batch delivered go to the TUN, coalesced. */
	if (srv->has_tun)
		tunnel_flush(&srv->tun_out);
	quic_write_dirty();
	for (size_t i = 0; i < srv->nlisteners; i++)
		udp_batch_flush(&srv->listeners[i].batch);
}

static void
listener_read(struct listener *l, struct udp_socket *sock)
{
	static struct udp_recv r[UDP_RECV_BATCH];
	int got, rounds = 0;

	/* Bounded so the TUN side, and the other socket, get their turn
	 * under load; a short batch means the socket is empty, so no call
	 * is spent learning that. */
	do {
		got = udp_recv_many(sock, r, UDP_RECV_BATCH);
		for (int i = 0; i < got; i++) {
			for (size_t off = 0; off < r[i].len; off += r[i].segsize) {
				size_t seg = r[i].len - off < r[i].segsize ?
				    r[i].len - off : r[i].segsize;
				handle_packet(l, r[i].buf + off, seg,
				    (const struct sockaddr *)&r[i].peer, r[i].peerlen,
				    r[i].ecn);
			}
		}
	} while (got == UDP_RECV_BATCH && ++rounds < 8);
	flush_all(l->srv);
}

static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;

	(void)fd;
	(void)what;
	listener_read(l, &l->sock);
}

static void
hs_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;

	(void)fd;
	(void)what;
	listener_read(l, &l->hs);
}

static void
tun_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static uint8_t buf[TUNNEL_BUF];
	struct server *srv = arg;
	struct virtio_net_hdr vh;
	struct ippkt_info info;
	struct peer *peer;
	ssize_t n;

	(void)fd;
	(void)what;
	for (int i = 0; i < TUN_BURST; i++) {
		n = tun_read_vnet(&srv->tun, &vh, buf + TUNNEL_HEADROOM,
		    sizeof buf - TUNNEL_HEADROOM);
		/* EINVAL lost one packet and turned the offloads off. */
		if (n == -EINVAL)
			continue;
		if (n <= 0)
			break;
		if (ippkt_parse(buf + TUNNEL_HEADROOM, (size_t)n, &info) != IPPKT_OK) {
			tunnel_drop(TUNNEL_DROP_INVALID_PACKET, NULL, &srv->counters);
			continue;
		}
		peer = route_lookup(srv->routes, &info.dst);
		if (peer == NULL || peer->sess == NULL) {
			tunnel_drop(TUNNEL_DROP_NO_ROUTE, peer != NULL ? &peer->counters :
			    NULL, &srv->counters);
			continue;
		}
		/* A super-packet has one destination: route it once. */
		tunnel_send_read(peer->sess->qc, &vh, buf, (size_t)n, &info,
		    &srv->tun, &peer->counters, &srv->counters);
	}
	flush_all(srv);
}

/* The all-ones host of an IPv4 subnet is its broadcast address. */
static bool
is_ipv4_broadcast(const struct prefix *net, const struct ipaddr *a)
{
	uint32_t v, host;

	if (a->family != AF_INET || net->len >= 31)
		return false;
	v = (uint32_t)a->b[0] << 24 | (uint32_t)a->b[1] << 16 |
	    (uint32_t)a->b[2] << 8 | a->b[3];
	host = net->len == 0 ? UINT32_MAX : (1u << (32 - net->len)) - 1;
	return (v & host) == host;
}

static struct peer *
peer_create(const struct cfg_peer *cp)
{
	struct peer *p = xcalloc(1, sizeof *p);

	cfg_peer_copy(&p->conf, cp);
	p->cfg = &p->conf;
	return p;
}

static void
peer_free(struct peer *p)
{
	if (p == NULL)
		return;
	cfg_peer_clear(&p->conf);
	free(p);
}

/* The tunnel addresses a peer is to have, worked out before anything
 * changes, with the prefix length each is told to the client. */
struct addr_plan {
	struct prefix addrs[CFG_MAX_ADDRS];
	uint8_t subnet_len[CFG_MAX_ADDRS];
	size_t naddrs;
};

/* The server's subnet in `family`, or NULL. */
static const struct prefix *
server_subnet(const struct server *srv, int family)
{
	for (size_t f = 0; f < srv->cfg->naddrs; f++) {
		if (srv->cfg->addrs[f].addr.family == family)
			return &srv->cfg->addrs[f];
	}
	return NULL;
}

/* Route `pfx` to `owner` in `rt`, or say who has it already. */
static int
plan_route(struct route_table *rt, const struct prefix *pfx, struct peer *owner,
    const char *path, const struct cfg_peer *cp, const char *key, char **cause)
{
	char s[ADDR_STRLEN];
	struct peer *other;

	if (route_add(rt, pfx, owner) == 0)
		return 0;
	other = route_lookup(rt, &pfx->addr);
	xasprintf(cause, "%s:%u: peer %s: %s %s is already routed to peer %s%s",
	    path, cp->line, cp->name, key, addr_prefix_str(pfx, s),
	    other != NULL ? other->cfg->name : "?",
	    other != NULL && other->cfg->naddrs == 0 ?
	    " (from the address pool)" : "");
	return -1;
}

/* Give peers[0..n) (the configuration's order, confs[i] each one's [Peer])
 * their addresses in plan[i] and fill the route table `rt`: a peer with
 * keep[i] keeps the addresses plan[i] holds already (a reload that left
 * its Address alone), the others get their static Address, and the rest
 * the next free host of the server's subnet in each family. Fails, with
 * "FILE:LINE:" in *cause, when a prefix would be routed to two peers, a
 * static address is outside the running server's subnet (its Address
 * changes only with a restart) or the pool runs out. */
static int
plan_addresses(struct server *srv, struct peer **peers,
    const struct cfg_peer *const *confs, const bool *keep, size_t n,
    struct addr_plan *plan, struct route_table *rt, const char *path,
    char **cause)
{
	char s[ADDR_STRLEN], net[ADDR_STRLEN];

	/* Addresses a peer keeps first, so a clash is blamed on the new. */
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; keep[i] && k < plan[i].naddrs; k++) {
			if (plan_route(rt, &plan[i].addrs[k], peers[i], path,
			    confs[i], "Address", cause) != 0)
				return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct cfg_peer *cp = confs[i];

		if (keep[i])
			continue;
		plan[i].naddrs = 0;
		for (size_t k = 0; k < cp->naddrs; k++) {
			const struct prefix *own = server_subnet(srv,
			    cp->addrs[k].addr.family);
			struct prefix sub;

			addr_ip_str(&cp->addrs[k].addr, s);
			if (own == NULL) {
				xasprintf(cause, "%s:%u: peer %s: Address %s: the "
				    "running server has no address in that "
				    "family", path, cp->line, cp->name, s);
				return -1;
			}
			sub = *own;
			addr_prefix_mask(&sub);
			if (!addr_prefix_contains(&sub, &cp->addrs[k].addr) ||
			    addr_equal(&own->addr, &cp->addrs[k].addr)) {
				xasprintf(cause, "%s:%u: peer %s: Address %s is not "
				    "a host of the running server's subnet %s",
				    path, cp->line, cp->name, s,
				    addr_prefix_str(&sub, net));
				return -1;
			}
			plan[i].addrs[plan[i].naddrs] = cp->addrs[k];
			plan[i].subnet_len[plan[i].naddrs] = own->len;
			plan[i].naddrs++;
			if (plan_route(rt, &cp->addrs[k], peers[i], path, cp,
			    "Address", cause) != 0)
				return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < confs[i]->allowed_ips.n; k++) {
			if (plan_route(rt, &confs[i]->allowed_ips.v[k], peers[i],
			    path, confs[i], "AllowedIPs", cause) != 0)
				return -1;
		}
	}
	/* The pool: the next free host of each subnet, in the order of the
	 * configuration, for every peer without an address in that family. */
	for (size_t f = 0; f < srv->cfg->naddrs; f++) {
		const struct prefix *sub = &srv->cfg->addrs[f];
		struct prefix next = *sub;
		unsigned bits = sub->addr.family == AF_INET ? 32 : 128;

		addr_prefix_mask(&next);
		for (size_t i = 0; i < n; i++) {
			struct addr_plan *pl = &plan[i];
			bool have = false;

			for (size_t k = 0; k < pl->naddrs; k++)
				have |= pl->addrs[k].addr.family == sub->addr.family;
			if (have)
				continue;
			for (;;) {
				/* Increment the address as a big-endian integer. */
				size_t nb = bits / 8;
				int k = (int)nb - 1;
				while (k >= 0 && ++next.addr.b[k] == 0)
					k--;
				next.len = (uint8_t)bits;
				if (!addr_prefix_contains(sub, &next.addr) ||
				    is_ipv4_broadcast(sub, &next.addr)) {
					xasprintf(cause, "%s:%u: address pool of the "
					    "server's subnet is exhausted at peer %s",
					    path, confs[i]->line, confs[i]->name);
					return -1;
				}
				if (addr_equal(&next.addr, &sub->addr))
					continue;
				if (route_lookup(rt, &next.addr) != NULL)
					continue;
				break;
			}
			pl->addrs[pl->naddrs] = next;
			pl->subnet_len[pl->naddrs] = sub->len;
			pl->naddrs++;
			if (route_add(rt, &next, peers[i]) != 0) {
				xasprintf(cause, "%s: pool address conflict", path);
				return -1;
			}
		}
	}
	return 0;
}

static void
peer_set_addresses(struct peer *p, const struct addr_plan *pl)
{
	memcpy(p->addrs, pl->addrs, sizeof p->addrs);
	memcpy(p->subnet_len, pl->subnet_len, sizeof p->subnet_len);
	p->naddrs = pl->naddrs;
}

/* What depends on the set of peers: the index the pin check finds a key's
 * peer in during every handshake (keys are unique, the configuration made
 * sure), and how many sessions may exist at once. */
static void
index_peers(struct server *srv)
{
	keyidx_clear(&srv->keys);
	keyidx_init(&srv->keys, srv->npeers);
	for (size_t i = 0; i < srv->npeers; i++) {
		keyidx_add(&srv->keys, srv->peers[i]->cfg->pubkey, i);
		srv->peers[i]->idx = i;
	}
	keyidx_sort(&srv->keys);
	srv->max_sessions = 2 * srv->npeers + ADMIT_MAX_HALF_OPEN;
	if (srv->max_sessions < MIN_SESSIONS)
		srv->max_sessions = MIN_SESSIONS;
}

static int
setup_peers(struct server *srv, char **cause)
{
	size_t n = srv->cfg->npeers;
	const struct cfg_peer **confs = xcalloc(n + 1, sizeof *confs);
	struct addr_plan *plan = xcalloc(n + 1, sizeof *plan);
	bool *keep = xcalloc(n + 1, sizeof *keep);
	int ret = -1;

	srv->peers = xcalloc(n + 1, sizeof *srv->peers);
	for (size_t i = 0; i < n; i++) {
		srv->peers[srv->npeers++] = peer_create(&srv->cfg->peers[i]);
		confs[i] = srv->peers[i]->cfg;
	}
	index_peers(srv);
	if (plan_addresses(srv, srv->peers, confs, keep, n, plan, srv->routes,
	    srv->cfg->path, cause) != 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		peer_set_addresses(srv->peers[i], &plan[i]);
	ret = 0;
out:
	free(confs);
	free(plan);
	free(keep);
	return ret;
}

static int
setup_tun(struct server *srv, char **cause)
{
	char *name;
	int rv;

	if (srv->cfg->tun == NULL)
		return 0;
	/* Each worker has a TUN device of its own; the kernel's routes to
	 * each peer (peer_routes) pick the worker that owns its session. */
	if ((name = workers_name(srv->cfg->tun, "w", srv->worker,
	    IFNAMSIZ - 1)) == NULL) {
		xasprintf(cause, "Tun %s: too long for worker %u's device "
		    "(%sw%u)", srv->cfg->tun, srv->worker, srv->cfg->tun,
		    srv->worker);
		return -1;
	}
	rv = tun_open(&srv->tun, name, srv->cfg->offload == CFG_OFFLOAD_AUTO,
	    cause);
	free(name);
	if (rv != 0)
		return -1;
	srv->has_tun = true;
	tunnel_out_init(&srv->tun_out, &srv->tun, &srv->counters);
	/* The server's addresses (and its subnet's route) on worker 0's. */
	for (size_t i = 0; srv->worker == 0 && i < srv->cfg->naddrs; i++) {
		if (tun_netlink_add_address(srv->tun.ifindex, &srv->cfg->addrs[i], cause) != 0)
			return -1;
	}
	if (tun_netlink_set_mtu_up(srv->tun.ifindex, srv->cfg->mtu, cause) != 0)
		return -1;
	/* Site-to-site: the prefixes behind each peer go into the TUN; with
	 * workers, into the owner's when the peer connects. */
	for (size_t i = 0; srv->workers == NULL && i < srv->npeers; i++) {
		const struct cfg_peer *cp = srv->peers[i]->cfg;
		for (size_t k = 0; k < cp->allowed_ips.n; k++) {
			if (tun_netlink_add_route(srv->tun.ifindex, &cp->allowed_ips.v[k],
			    cause) != 0)
				return -1;
		}
	}
	srv->tun_ev = event_new(srv->base, srv->tun.fd, EV_READ | EV_PERSIST,
	    tun_read_cb, srv);
	event_add(srv->tun_ev, NULL);
	return 0;
}

static int
setup_listeners(struct server *srv, char **cause)
{
	for (size_t i = 0; i < srv->cfg->nlisten; i++) {
		struct listener *l = &srv->listeners[i];
		const struct sockaddr *sa = (const struct sockaddr *)&srv->cfg->listen[i];

		char *why = NULL;

		l->srv = srv;
		/* With workers, workers_start opened this worker's pair. */
		if (srv->workers == NULL && udp_open_split(&l->sock, &l->hs,
		    sa->sa_family, sa, srv->cfg->listen_len[i], &why) != 0) {
			/* Its own error, if it has one (bind), says more. */
			if (udp_open(&l->sock, sa->sa_family, sa,
			    srv->cfg->listen_len[i], cause) != 0) {
				free(why);
				return -1;
			}
			log_warn("handshakes share the established connections' "
			    "socket: %s", why);
			free(why);
			l->hs.fd = -1;
		}
		srv->nlisteners++;
		udp_batch_init(&l->batch, &l->sock);
		l->ev = event_new(srv->base, l->sock.fd, EV_READ | EV_PERSIST,
		    udp_read_cb, l);
		event_add(l->ev, NULL);
		if (l->hs.fd != -1) {
			l->hs_ev = event_new(srv->base, l->hs.fd,
			    EV_READ | EV_PERSIST, hs_read_cb, l);
			event_add(l->hs_ev, NULL);
		}
	}
	return 0;
}

void
server_notify(struct server *srv)
{
	char buf[ADDR_STRLEN], status[200];

	if (srv->shutting_down)
		return;
	snprintf(status, sizeof status, "%zu of %zu peers connected; "
	    "listening on %s%s", srv->nconnected, srv->npeers,
	    srv->nlisteners > 0 ?
	    addr_sockaddr_str((const struct sockaddr *)
	    &srv->listeners[0].sock.local, buf) : "-",
	    srv->nlisteners > 1 ? " and more" : "");
	notify_ready(status);
}

/* One peer as status and metrics show it: from `bp` when another worker
 * holds its session (bp points into what the caller keeps). */
static void
status_peer_fill(const struct server *srv, struct status_peer *sp,
    const struct peer *p, const char *state, const struct board_peer *bp)
{
	struct quic_conn *qc = p->sess != NULL ? p->sess->qc : NULL;
	socklen_t len;

	*sp = (struct status_peer){
		.name = p->cfg->name,
		.public_key = p->cfg->pubkey,
		.state = state,
		.addrs = p->addrs,
		.naddrs = p->naddrs,
		.allowed = p->cfg->allowed_ips.v,
		.nallowed = p->cfg->allowed_ips.n,
		.has_worker = srv->board != NULL && (qc != NULL || bp != NULL),
		.worker = bp != NULL ? bp->worker : srv->worker,
	};
	if (bp != NULL) {
		sp->counters = &bp->counters;
		sp->handshakes = bp->handshakes;
		sp->connection_id = bp->connection_id;
		sp->fwd_counters = &bp->fwd;
		sp->roam.rebinds = bp->rebinds;
		sp->roam.zero_rtt_accepted = bp->zero_rtt;
		sp->remote = (const struct sockaddr *)&bp->remote;
		sp->local = (const struct sockaddr *)&bp->local;
		sp->has_quic = true;
		sp->quic = bp->quic;
		return;
	}
	sp->counters = &p->counters;
	sp->handshakes = p->handshakes;
	sp->connection_id = qc != NULL ? quic_conn_id(qc) : NULL;
	sp->fwd_counters = &p->fwd_counters;
	sp->fwds = p->sess != NULL ? &p->sess->fwds : NULL;
	sp->roam.rebinds = p->rebinds;
	sp->roam.zero_rtt_accepted = p->zero_rtt;
	if (qc != NULL) {
		sp->remote = quic_conn_remote(qc, &len);
		sp->local = quic_conn_local(qc, &len);
		sp->has_quic = true;
		quic_conn_get_stats(qc, &sp->quic);
	}
}

struct server_status {
	struct status st;
	struct tunnel_counters counters;
	struct status_admission adm;
	struct status_peer_counts counts;
	struct state_stats tickets;
	struct board_peer other;   /* room for a peer another worker holds */
};

/* Worker 0 with workers: add the others' totals (as of their last
 * refresh) to its own. */
static void
server_status_add_workers(struct server *srv, struct server_status *now)
{
	struct board_worker bw;

	for (unsigned w = 1; srv->board != NULL && w < srv->cfg->workers; w++) {
		if (!board_get_worker(srv->board, w, &bw))
			continue;
		now->counters.rx_packets += bw.counters.rx_packets;
		now->counters.rx_bytes += bw.counters.rx_bytes;
		now->counters.tx_packets += bw.counters.tx_packets;
		now->counters.tx_bytes += bw.counters.tx_bytes;
		now->counters.gso_read += bw.counters.gso_read;
		now->counters.gso_written += bw.counters.gso_written;
		for (int i = 0; i < TUNNEL_DROP_COUNT; i++)
			now->counters.drops[i] += bw.counters.drops[i];
		now->adm.half_open += bw.admission.half_open;
		now->adm.accepted += bw.admission.accepted;
		now->adm.validated += bw.admission.validated;
		now->adm.retries += bw.admission.retries;
		now->adm.bad_tokens += bw.admission.bad_tokens;
		now->adm.rate_limited += bw.admission.rate_limited;
		now->adm.half_open_full += bw.admission.half_open_full;
		now->adm.waiting += bw.admission.waiting;
		now->adm.waited += bw.admission.waited;
		now->adm.wait_dups += bw.admission.wait_dups;
		now->adm.wait_expired += bw.admission.wait_expired;
		now->tickets.issued += bw.tickets.issued;
		now->tickets.resumed += bw.tickets.resumed;
		now->tickets.replayed += bw.tickets.replayed;
		now->tickets.unknown += bw.tickets.unknown;
		now->tickets.group_resumed += bw.tickets.group_resumed;
	}
}

/* Worker 0 with workers: is `p`'s live session in another worker (newer
 * than one here, if any)? Then `bp` holds it as that worker showed it. */
static bool
peer_elsewhere(struct server *srv, const struct peer *p, struct board_peer *bp)
{
	if (srv->board == NULL || srv->worker != 0)
		return false;
	return board_get(srv->board, p->idx, p->cfg->pubkey, 0,
	    p->sess != NULL ? p->sess->since : 0, bp);
}

/* `p`'s state for status; *bp stays pointing at its figures when another
 * worker holds its session, else it is set to NULL. */
static const char *
peer_state(struct server *srv, const struct peer *p, struct board_peer **bp)
{
	if (peer_elsewhere(srv, p, *bp))
		return "established";
	*bp = NULL;
	return status_state_name(p->sess != NULL ? p->sess->qc : NULL);
}

/* A status answer's list of peers, STATUS_PAGE at a time (control_more):
 * with thousands of peers the whole list would keep the loop from the
 * tunnels for a tenth of a second. Each part reads the peers as they are
 * then; after a reload the list goes on from the same position in the
 * new configuration. */
#define STATUS_PAGE 64
struct status_stream {
	struct server *srv;
	struct status_request rq;
	struct status_renderer r;
	size_t next;          /* index in srv->peers of the next to look at */
	struct board_peer other[STATUS_PAGE]; /* peers other workers hold */
};

static bool
status_more(struct evbuffer *out, void *arg)
{
	struct status_stream *ss = arg;
	struct server *srv = ss->srv;
	struct status_peer sp[STATUS_PAGE];
	size_t n = 0, looked = 0;

	/* A filter that matches few peers still looks at a bounded number
	 * of them a part. */
	while (ss->next < srv->npeers && n < STATUS_PAGE &&
	    looked++ < 16 * STATUS_PAGE) {
		const struct peer *p = srv->peers[ss->next++];
		struct board_peer *bp = &ss->other[n];
		const char *state;

		if (!status_request_wants(&ss->rq, p->cfg->name))
			continue;
		state = peer_state(srv, p, &bp);
		status_peer_fill(srv, &sp[n++], p, state, bp);
	}
	status_render_peers(&ss->r, out, sp, n);
	if (ss->next < srv->npeers)
		return true;
	status_render_end(&ss->r, out);
	return false;
}

/* The server's status now; `now` holds every part `now->st` points to.
 * With `peers` (room for srv->npeers), every peer is in it too. */
static void
server_status(struct server *srv, struct server_status *now,
    struct status_peer *peers, struct board_peer *others)
{
	now->counters = srv->counters;
	admission_now(srv, &now->adm);
	now->st = (struct status){
		.role = "server",
		.tun = srv->has_tun ? srv->tun.name : NULL,
		.mtu = srv->cfg->mtu,
		.offloads = srv->has_tun ? srv->tun.offloads : 0,
		.counters = &now->counters,
		.peers = peers,
		.reloads = srv->reloads,
		.reloads_refused = srv->reloads_refused,
		.tickets = &now->tickets,
		.admission = &now->adm,
		.peer_counts = &now->counts,
	};
	now->counts = (struct status_peer_counts){ .configured = srv->npeers };
	state_server_stats(srv->state, &now->tickets);
	server_status_add_workers(srv, now);
	for (size_t k = 0; k < srv->npeers; k++) {
		struct peer *p = srv->peers[k];
		struct quic_conn *qc = p->sess != NULL ? p->sess->qc : NULL;
		struct board_peer *bp = others != NULL ? &others[k] : &now->other;
		const char *state = peer_state(srv, p, &bp);

		if (strcmp(state, "established") == 0)
			now->counts.established++;
		else if (strcmp(state, "handshaking") == 0)
			now->counts.handshaking++;
		else
			now->counts.closed++;
		if (qc != NULL && bp == NULL && (now->st.datagram_mtu == 0 ||
		    tunnel_inner_mtu(qc) < now->st.datagram_mtu))
			now->st.datagram_mtu = tunnel_inner_mtu(qc);
		if (peers != NULL)
			status_peer_fill(srv, &peers[now->st.npeers++], p, state, bp);
	}
}

/* Metrics (MetricsListen, and "metrics" on the control socket): every
 * peer's figures copied now, sent in parts. */
static struct metrics_scrape *
server_scrape(void *arg)
{
	struct server *srv = arg;
	struct status_peer *sp = xcalloc(srv->npeers ? srv->npeers : 1, sizeof *sp);
	struct board_peer *others = srv->board == NULL || srv->worker != 0 ? NULL :
	    xcalloc(srv->npeers ? srv->npeers : 1, sizeof *others);
	struct server_status now;
	struct metrics_scrape *ms;

	server_status(srv, &now, sp, others);
	ms = metrics_scrape_new(&now.st);
	free(others);
	free(sp);
	return ms;
}

static bool
scrape_more(struct evbuffer *out, void *arg)
{
	return metrics_scrape_next(arg, out);
}

static void
scrape_done(void *arg)
{
	metrics_scrape_free(arg);
}

/* Status (the control socket): the figures of the server and the counts
 * of peers by state now, then the peers by status_more. */
static void
status_cb(struct evbuffer *out, const char *request, void *arg,
    struct control_more *more)
{
	struct server *srv = arg;
	struct server_status now;
	struct status_request rq;
	struct status_stream *ss;

	status_request_parse(request, &rq);
	if (rq.metrics) {
		*more = (struct control_more){ scrape_more, scrape_done,
		    server_scrape(srv) };
		return;
	}
	server_status(srv, &now, NULL, NULL);
	now.st.summary = rq.summary;
	ss = xcalloc(1, sizeof *ss);
	ss->srv = srv;
	ss->rq = rq;
	status_render_head(&ss->r, out, &now.st, rq.json);
	if (rq.summary) {
		status_render_end(&ss->r, out);
		free(ss);
		return;
	}
	*more = (struct control_more){ status_more, free, ss };
}

/* Worker 0: another worker died; the kernel's steering no longer matches
 * the CIDs, so all stop (a service manager starts them again). */
static void
worker_died(void *arg)
{
	struct server *srv = arg;

	log_error("stopping every worker");
	server_shutdown(srv);
}

int
server_exit_status(const struct server *srv)
{
	return workers_failed(srv->workers) ? 1 : 0;
}

struct server *
server_create(struct event_base *base, const struct cfg *cfg, int verbose,
    char **cause)
{
	struct server *srv = xcalloc(1, sizeof *srv);
	struct udp_socket listen_est[CFG_MAX_LISTEN], listen_hs[CFG_MAX_LISTEN];
	static char logname[32];
	uint8_t priv[KEY_LEN];

	srv->base = base;
	srv->cfg = cfg;
	srv->sid = cfg->server_id;
	if (cfg->workers > 1) {
		int w;

		srv->sid.workers = (uint8_t)cfg->workers;
		/* Shared by all workers, so made before they fork; room for
		 * peers a reload adds. */
		if ((srv->board = board_create(2 * cfg->npeers + 64,
		    cfg->workers)) == NULL) {
			*cause = xstrdup("cannot make the workers' board");
			goto fail;
		}
		if ((w = workers_start(base, cfg, &srv->sid, listen_est,
		    listen_hs, &srv->workers, cause)) == -1)
			goto fail;
		srv->worker = (unsigned)w;
		srv->sid.worker = (uint8_t)w;
		for (size_t i = 0; i < cfg->nlisten; i++) {
			srv->listeners[i].sock = listen_est[i];
			srv->listeners[i].hs = listen_hs[i];
		}
		if (w > 0) {
			snprintf(logname, sizeof logname, "roved[w%d]", w);
			log_open(logname, verbose);
		}
		log_info("worker %u of %u", srv->worker, (unsigned)cfg->workers);
	}
	LIST_INIT(&srv->sessions);
	srv->cid_buckets = CID_BUCKETS_MIN;
	srv->cid_map = xcalloc(srv->cid_buckets, sizeof *srv->cid_map);
	the_server = srv;
	random_bytes((uint8_t *)&srv->cid_seed, sizeof srv->cid_seed);
	quic_set_send_limit_all(cfg->forward_memory_total);
	/* Kept in StateDir, so that after a restart clients still recognise
	 * our stateless resets and resume their sessions with 0-RTT. */
	/* Workers share their keys like the members of a group, through
	 * StateDir when there is no KeyDir; each keeps its own register. */
	srv->state = state_server_open_opts(cfg->state_dir, &(struct state_opts){
	    .base = base, .user = cfg->user != NULL ? cfg->uid : (uid_t)-1,
	    .key_dir = cfg->key_dir != NULL ? cfg->key_dir :
	    srv->workers != NULL ? cfg->state_dir : NULL,
	    .server_id = &srv->sid,
	    .peer_key = peer_key_by_prefix, .peer_key_arg = srv }, cause);
	if (srv->state == NULL)
		goto fail;
	admit_init(&srv->admit, cfg->retry_threshold, clock_now(), srv->state);
	srv->admit.server_id = &srv->sid;
	srv->wait_ev = event_new(srv->base, -1, 0, wait_cb, srv);
	if (srv->board != NULL && srv->worker > 0) {
		srv->board_ev = event_new(srv->base, -1, EV_PERSIST,
		    board_refresh_cb, srv);
		event_add(srv->board_ev, &(struct timeval){
		    BOARD_REFRESH_MS / 1000, BOARD_REFRESH_MS % 1000 * 1000 });
	}
	srv->reset_rl = (struct log_ratelimit)LOG_RATELIMIT_INIT(1000, 200);
	srv->qs = (struct quic_settings){
		.role = QUIC_ROLE_SERVER,
		.cc = cfg->congestion == CFG_CC_BBR ? NGTCP2_CC_ALGO_BBR : NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = cfg->idle_timeout,
		.keepalive_s = cfg->keepalive,
		.max_udp_payload = UDP_MAX_PAYLOAD,
		.reset_secret = state_reset_secret(srv->state),
		.server_id = &srv->sid,
		.stream_window = cfg->forward_buffer,
		.early_data = cfg->zero_rtt,
		.verbose = verbose > 1,
		.qlog_dir = cfg->qlog_dir,
	};
	srv->routes = route_create();
	if ((srv->egress = egress_create(base, cause)) == NULL)
		goto fail;
	quic_set_pin_check(pin_check);
	if (key_load_private(cfg->private_key_file, priv, cause) != 0)
		goto fail;
	srv->tls = tls_ctx_create(TLS_ROLE_SERVER, priv, quic_tls_pin, cause);
	explicit_bzero(priv, sizeof priv);
	if (srv->tls == NULL)
		goto fail;
	tls_ctx_enable_resumption(srv->tls, TLS_ROLE_SERVER, cfg->zero_rtt);
	if (cfg->keylog_file != NULL &&
	    tls_ctx_set_keylog(srv->tls, cfg->keylog_file, cause) != 0)
		goto fail;
	if (cfg->qlog_dir != NULL)
		log_info("QlogDir: a qlog file per connection goes to %s",
		    cfg->qlog_dir);
	state_server_attach(srv->state, srv->tls);
	if (cfg->nlisten_tcp > 0) {
		if (key_load_private(cfg->private_key_file, priv, cause) != 0)
			goto fail;
		srv->tls_tcp = tls_ctx_create_tcp(TLS_ROLE_SERVER, priv,
		    quic_tls_pin, cause);
		explicit_bzero(priv, sizeof priv);
		if (srv->tls_tcp == NULL)
			goto fail;
		if (cfg->keylog_file != NULL &&
		    tls_ctx_set_keylog(srv->tls_tcp, cfg->keylog_file, cause) != 0)
			goto fail;
	}
	if (setup_peers(srv, cause) != 0 || setup_listeners(srv, cause) != 0 ||
	    setup_tcp_listeners(srv, cause) != 0 || setup_tun(srv, cause) != 0)
		goto fail;
	srv->control_path = workers_name(cfg->control_socket, ".", srv->worker,
	    SIZE_MAX);
	srv->control = control_create(base, srv->control_path, status_cb, srv,
	    cause);
	if (srv->control == NULL)
		goto fail;
	workers_watch(srv->workers, base, worker_died, srv);
	/* One process serves metrics: worker 0's (its own figures). */
	if (srv->worker == 0 && cfg->metrics_listen_len != 0 &&
	    (srv->metrics = metrics_create(base,
	    (const struct sockaddr *)&cfg->metrics_listen,
	    cfg->metrics_listen_len, server_scrape, srv, cause)) == NULL)
		goto fail;
	return srv;
fail:
	server_free(srv);
	return NULL;
}

/* --- SIGHUP: the configuration read again --- */

/* The peers a reload removed (their `gone` set): every session that
 * speaks for one (connected, in its handshake, or serving its forwards
 * while being replaced) is closed with "not allowed", which its client
 * takes as a refusal; then the peers themselves are freed. Their tickets
 * are refused from now on: the pin check no longer finds their keys. One
 * pass over the sessions, however many peers go. */
static struct peer *
gone_peer(const struct session *sess)
{
	struct peer *v[] = { sess->peer, sess->pending_peer, sess->fwd_peer };

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		if (v[i] != NULL && v[i]->gone != NULL)
			return v[i];
	}
	return NULL;
}

static void
peers_remove(struct server *srv, struct peer **gone, size_t n)
{
	struct session *sess, *next;
	struct peer *p;

	for (sess = LIST_FIRST(&srv->sessions); sess != NULL; sess = next) {
		next = LIST_NEXT(sess, entry);
		if ((p = gone_peer(sess)) == NULL)
			continue;
		quic_conn_close(sess->qc, 3, p->gone);
		session_free(sess);
	}
	for (size_t i = 0; i < n; i++)
		peer_free(gone[i]);
}

static int
prefix_cmp(const void *va, const void *vb)
{
	const struct prefix *a = va, *b = vb;

	if (a->addr.family != b->addr.family)
		return a->addr.family < b->addr.family ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return memcmp(a->addr.b, b->addr.b, sizeof a->addr.b);
}

/* Every AllowedIPs prefix of `peers`, copied and sorted, for finding by
 * bisection which ones a reload adds and drops (thousands of peers). */
static struct prefix *
allowed_all(const struct cfg_peer *const *peers, size_t n, size_t *count)
{
	struct prefix *v;
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += peers[i]->allowed_ips.n;
	v = xcalloc(total + 1, sizeof *v);
	*count = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < peers[i]->allowed_ips.n; k++)
			v[(*count)++] = peers[i]->allowed_ips.v[k];
	}
	qsort(v, *count, sizeof *v, prefix_cmp);
	return v;
}

static bool
prefix_listed(const struct prefix *pfx, const struct prefix *sorted, size_t n)
{
	return n > 0 && bsearch(pfx, sorted, n, sizeof *sorted, prefix_cmp) != NULL;
}

static int
name_cmp(const void *va, const void *vb)
{
	return strcmp(*(const char *const *)va, *(const char *const *)vb);
}

/* One line of what a list now holds, for the log. */
static const char *
prefixes_str(const struct prefix *v, size_t n, char *buf, size_t len)
{
	char s[ADDR_STRLEN];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i ? ", " : "", addr_prefix_str(&v[i], s));
	if (n == 0)
		snprintf(buf, len, "(none)");
	return buf;
}

/* -R listeners of `sess` on ports AllowRemoteForward no longer lists are
 * closed; the client hears "denied" for each. Connections already
 * accepted there carry on. */
static void
close_remote_listeners(struct session *sess, const struct cfg_peer *cp)
{
	size_t kept = 0;

	for (size_t i = 0; i < sess->nrlisteners; i++) {
		struct proto_remote_forward rf = {
			.port = egress_listener_port(sess->rlisteners[i]),
			.status = PROTO_FWD_ERR_DENIED,
		};
		bool allowed = false;
		uint8_t buf[64];
		size_t n;

		for (size_t j = 0; j < cp->nallow_remote_forward; j++)
			allowed |= cp->allow_remote_forward[j] == rf.port;
		if (allowed) {
			sess->rlisteners[kept++] = sess->rlisteners[i];
			continue;
		}
		log_info("reload: peer %s: remote forward on port %u closed: "
		    "no longer in AllowRemoteForward", cp->name, rf.port);
		egress_listener_free(sess->rlisteners[i]);
		n = proto_fwd_remote_encode(buf, sizeof buf,
		    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
		if (n > 0)
			(void)quic_conn_stream_send(sess->qc, 0, buf, n, false);
	}
	sess->nrlisteners = kept;
}

/* The changed keys of a peer the reload keeps: its copy of the
 * configuration takes the new lists (the name stays, and with it every
 * pointer to it), and its live session sees them at once. */
static void
peer_update(struct peer *p, const struct cfg_peer *next, unsigned changes,
    const struct addr_plan *pl)
{
	struct cfg_peer fresh;
	char buf[512];

	cfg_peer_copy(&fresh, next);
	free(fresh.name);
	fresh.name = p->conf.name;
	p->conf.name = NULL;
	cfg_peer_clear(&p->conf);
	p->conf = fresh;
	peer_set_addresses(p, pl);
	if (changes & CFG_DIFF_ADDRESS) {
		log_info("reload: peer %s: Address now %s", p->cfg->name,
		    prefixes_str(p->addrs, p->naddrs, buf, sizeof buf));
		/* The client learns its new addresses on its live connection
		 * (docs/PROTOCOL.md, SERVER_CONFIG). */
		if (p->sess != NULL && p->sess->configured &&
		    send_server_config(p->sess) != 0)
			quic_conn_close(p->sess->qc, 1, "cannot send the new "
			    "configuration");
	}
	if (changes & CFG_DIFF_ALLOWED_IPS)
		log_info("reload: peer %s: AllowedIPs now %s", p->cfg->name,
		    prefixes_str(p->cfg->allowed_ips.v, p->cfg->allowed_ips.n,
		    buf, sizeof buf));
	if (changes & CFG_DIFF_ALLOW_FORWARD) {
		char *t = cfg_key_text(p->cfg, CFG_KEY_PEER_ALLOW_FORWARD);

		t[strcspn(t, "\n")] = '\0';
		log_info("reload: peer %s: AllowForward now %s (for forwards "
		    "opened from now on)", p->cfg->name,
		    t[0] != '\0' ? strchr(t, '=') + 2 : "(none)");
		free(t);
	}
	if (changes & CFG_DIFF_ALLOW_REMOTE_FORWARD) {
		char *t = cfg_key_text(p->cfg, CFG_KEY_PEER_ALLOW_REMOTE_FORWARD);

		t[strcspn(t, "\n")] = '\0';
		log_info("reload: peer %s: AllowRemoteForward now %s",
		    p->cfg->name, t[0] != '\0' ? strchr(t, '=') + 2 : "(none)");
		free(t);
		if (p->sess != NULL)
			close_remote_listeners(p->sess, p->cfg);
	}
}

int
server_reload(struct server *srv, const struct cfg *next)
{
	size_t n, nold = srv->npeers, nold_allowed, nnew_allowed, nadded = 0;
	const struct cfg_peer **old_confs, **confs;
	struct prefix *old_allowed = NULL, *new_allowed = NULL, *added = NULL;
	struct peer **peers;
	struct addr_plan *plan;
	struct route_table *rt;
	unsigned *changes;
	size_t *match, nchanged = 0;
	bool *keep, *kept;
	struct peer **gone;
	const char **added_names;
	size_t ngone = 0, nadded_names = 0;
	char *cause = NULL;
	int ret = -1;

	/* Each worker reads the file again itself. */
	workers_signal(srv->workers, SIGHUP);
	if (next == NULL) {
		srv->reloads_refused++;
		return -1;
	}
	n = next->npeers;
	gone = xcalloc(nold + 1, sizeof *gone);
	added_names = xcalloc(n + 1, sizeof *added_names);
	old_confs = xcalloc(nold + 1, sizeof *old_confs);
	for (size_t j = 0; j < nold; j++)
		old_confs[j] = srv->peers[j]->cfg;
	match = xcalloc(n + 1, sizeof *match);
	cfg_diff_peers(old_confs, nold, next->peers, n, match);
	peers = xcalloc(n + 1, sizeof *peers);
	confs = xcalloc(n + 1, sizeof *confs);
	plan = xcalloc(n + 1, sizeof *plan);
	changes = xcalloc(n + 1, sizeof *changes);
	keep = xcalloc(n + 1, sizeof *keep);
	kept = xcalloc(nold + 1, sizeof *kept);
	for (size_t i = 0; i < n; i++) {
		confs[i] = &next->peers[i];
		if (match[i] == CFG_DIFF_NONE) {
			peers[i] = peer_create(&next->peers[i]);
			continue;
		}
		peers[i] = srv->peers[match[i]];
		kept[match[i]] = true;
		changes[i] = cfg_diff_peer(peers[i]->cfg, &next->peers[i]);
		keep[i] = !(changes[i] & CFG_DIFF_ADDRESS);
		if (keep[i]) {
			memcpy(plan[i].addrs, peers[i]->addrs, sizeof plan[i].addrs);
			memcpy(plan[i].subnet_len, peers[i]->subnet_len,
			    sizeof plan[i].subnet_len);
			plan[i].naddrs = peers[i]->naddrs;
		}
	}
	/* Everything that can fail comes before anything changes. */
	rt = route_create();
	if (plan_addresses(srv, peers, confs, keep, n, plan, rt, next->path,
	    &cause) != 0) {
		log_error("%s", cause);
		free(cause);
		route_free(rt);
		goto out;
	}
	old_allowed = allowed_all(old_confs, nold, &nold_allowed);
	new_allowed = allowed_all(confs, n, &nnew_allowed);
	added = xcalloc(nnew_allowed + 1, sizeof *added);
	/* With workers, a peer's routes follow its session (peer_routes). */
	for (size_t i = 0; srv->has_tun && srv->workers == NULL &&
	    i < nnew_allowed; i++) {
		char s[ADDR_STRLEN];

		if (prefix_listed(&new_allowed[i], old_allowed, nold_allowed))
			continue;
		if (tun_netlink_add_route(srv->tun.ifindex, &new_allowed[i],
		    &cause) != 0) {
			log_error("%s: AllowedIPs %s: cannot route it into %s: %s",
			    next->path, addr_prefix_str(&new_allowed[i], s),
			    srv->tun.name, cause);
			free(cause);
			cause = NULL;
			for (size_t k = 0; k < nadded; k++) {
				if (tun_netlink_del_route(srv->tun.ifindex,
				    &added[k], &cause) != 0) {
					free(cause);
					cause = NULL;
				}
			}
			route_free(rt);
			goto out;
		}
		added[nadded++] = new_allowed[i];
	}

	/* From here on nothing fails: the new peers, addresses and routes
	 * take over. A peer removed whose name comes back is one whose key
	 * changed. */
	route_free(srv->routes);
	srv->routes = rt;
	for (size_t i = 0; i < n; i++) {
		if (match[i] == CFG_DIFF_NONE)
			added_names[nadded_names++] = next->peers[i].name;
	}
	qsort(added_names, nadded_names, sizeof *added_names, name_cmp);
	for (size_t j = 0; j < nold; j++) {
		struct peer *p = srv->peers[j];
		bool rekeyed;

		if (kept[j])
			continue;
		rekeyed = nadded_names > 0 && bsearch(&p->cfg->name, added_names,
		    nadded_names, sizeof *added_names, name_cmp) != NULL;
		log_info("reload: peer %s removed%s%s", p->cfg->name,
		    p->sess != NULL ? ", its connection closed" : "",
		    rekeyed ? " (its PublicKey changed)" : "");
		p->gone = rekeyed ? "public key changed" :
		    "peer removed from the configuration";
		gone[ngone++] = p;
		nchanged++;
	}
	peers_remove(srv, gone, ngone);
	for (size_t i = 0; i < n; i++) {
		char buf[512];

		if (match[i] == CFG_DIFF_NONE) {
			peer_set_addresses(peers[i], &plan[i]);
			log_info("reload: peer %s added, address %s",
			    peers[i]->cfg->name, prefixes_str(peers[i]->addrs,
			    peers[i]->naddrs, buf, sizeof buf));
			nchanged++;
		} else if (changes[i] != 0) {
			peer_update(peers[i], &next->peers[i], changes[i],
			    &plan[i]);
			nchanged++;
		}
	}
	free(srv->peers);
	srv->peers = peers;
	srv->npeers = n;
	peers = NULL;
	index_peers(srv);
	/* Prefixes no peer owns any more leave the TUN. Failing here only
	 * leaves a route whose packets are dropped as no_route. */
	for (size_t i = 0; srv->has_tun && srv->workers == NULL &&
	    i < nold_allowed; i++) {
		char s[ADDR_STRLEN];

		if (prefix_listed(&old_allowed[i], new_allowed, nnew_allowed))
			continue;
		if (tun_netlink_del_route(srv->tun.ifindex, &old_allowed[i],
		    &cause) != 0) {
			log_warn("reload: AllowedIPs %s: cannot remove its route "
			    "from %s: %s", addr_prefix_str(&old_allowed[i], s),
			    srv->tun.name, cause);
			free(cause);
			cause = NULL;
		}
	}
	/* Capabilities are given up once, at start: a port below 1024 that
	 * no peer had then cannot be bound now. */
	if (geteuid() != 0 && (privdrop_caps(next) &
	    ~privdrop_caps(srv->cfg) & PRIVDROP_CAP(CAP_NET_BIND_SERVICE)))
		log_warn("reload: an AllowRemoteForward port below 1024 needs "
		    "CAP_NET_BIND_SERVICE, which roved gave up at start: restart "
		    "it to listen there");
	if (nchanged == 0)
		log_info("reload: no peer changed");
	srv->reloads++;
	server_notify(srv);
	flush_all(srv);
	ret = 0;
out:
	if (peers != NULL) {
		for (size_t i = 0; i < n; i++) {
			if (match[i] == CFG_DIFF_NONE)
				peer_free(peers[i]);
		}
		free(peers);
		srv->reloads_refused++;
	}
	free(old_confs);
	free(old_allowed);
	free(new_allowed);
	free(added);
	free(match);
	free(confs);
	free(plan);
	free(changes);
	free(keep);
	free(kept);
	free(gone);
	free(added_names);
	return ret;
}

void
server_shutdown(struct server *srv)
{
	struct timeval grace = { 0, 100000 };
	struct session *sess, *next;
	bool tcp = false;

	srv->shutting_down = true;
	workers_signal(srv->workers, SIGTERM);
	for (sess = LIST_FIRST(&srv->sessions); sess != NULL; sess = next) {
		next = LIST_NEXT(sess, entry);
		tcp |= quic_conn_is_tcp(sess->qc);
		quic_conn_close(sess->qc, 0, "server shutting down");
	}
	flush_all(srv);
	/* The UDP closes have left (sent synchronously); a TCP-transport
	 * close may still sit in a socket the loop drains. Without one, exit
	 * at once: after a restart, clients come back only once the new
	 * roved has the port, so every millisecond here is theirs. */
	event_base_loopexit(srv->base, tcp || quic_tcp_lingering() ? &grace : NULL);
}

void
server_exit(struct server *srv)
{
	/* Freeing 10,000 sessions one by one takes a fifth of a second, and
	 * a restarting server's clients wait for the port through all of
	 * it. What outlives the process is undone here: the worker
	 * processes, the control socket's path, packets still bound for the
	 * TUN; the kernel takes the rest (descriptors, memory). The server
	 * stays reachable from the_server. */
	workers_free(srv->workers);
	srv->workers = NULL;
	control_free(srv->control);
	srv->control = NULL;
	if (srv->has_tun)
		tunnel_flush(&srv->tun_out);
}

void
server_free(struct server *srv)
{
	struct session *sess;

	if (srv == NULL)
		return;
	workers_free(srv->workers);
	while ((sess = LIST_FIRST(&srv->sessions)) != NULL)
		session_free(sess);
	quic_tcp_linger_clear();
	if (srv->wait_ev != NULL)
		event_free(srv->wait_ev);
	if (srv->board_ev != NULL)
		event_free(srv->board_ev);
	board_free(srv->board);
	admit_clear(&srv->admit);
	control_free(srv->control);
	free(srv->control_path);
	metrics_free(srv->metrics);
	for (size_t i = 0; i < srv->nlisteners; i++) {
		if (srv->listeners[i].ev != NULL)
			event_free(srv->listeners[i].ev);
		if (srv->listeners[i].hs_ev != NULL)
			event_free(srv->listeners[i].hs_ev);
		udp_close(&srv->listeners[i].sock);
		udp_close(&srv->listeners[i].hs);
	}
	for (size_t i = 0; i < srv->ntcp_listeners; i++) {
		event_free(srv->tcp_listeners[i].ev);
		close(srv->tcp_listeners[i].fd);
	}
	if (srv->tls_tcp != NULL)
		wolfSSL_CTX_free(srv->tls_tcp);
	if (srv->tun_ev != NULL)
		event_free(srv->tun_ev);
	if (srv->has_tun) {
		tunnel_flush(&srv->tun_out);
		tunnel_out_clear(&srv->tun_out);
		tun_close(&srv->tun);
	}
	route_free(srv->routes);
	egress_free(srv->egress);
	state_server_free(srv->state);
	if (srv->tls != NULL)
		wolfSSL_CTX_free(srv->tls);
	for (size_t i = 0; i < srv->npeers; i++)
		peer_free(srv->peers[i]);
	free(srv->peers);
	keyidx_clear(&srv->keys);
	free(srv->cid_map);
	if (the_server == srv)
		the_server = NULL;
	free(srv);
}

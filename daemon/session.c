/* One client's connection to roved (server-int.h): found by its connection
 * IDs, authenticated by the pin check, given its peer at the handshake's
 * end, and the QUIC callbacks that carry its packets to the TUN and its
 * forward streams to fwd.c; its control stream is session-ctl.c's. */
#include <ngtcp2/ngtcp2.h>

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "forward/streams.h"
#include "server-int.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "tunnel/recovery.h"
#include "wire/proto-fwd.h"

#define UNKNOWN_LOG_INTERVAL_MS 60000

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

struct session *
session_find(struct server *srv, const uint8_t *cid, size_t len)
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
	if (session_find(srv, cid->data, cid->datalen) != NULL)
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
	struct server *srv = sess->srv;

	if (sess->half_open && sess->tcp) {
		sess->half_open = false;
		srv->half_open_tcp--;
		if (sess->evictable) {
			sess->evictable = false;
			TAILQ_REMOVE(&srv->tcp_evictable, sess, evict_entry);
		}
	} else if (sess->half_open) {
		sess->half_open = false;
		srv->half_open--;
		/* A slot is free: the next waiter may start, once this
		 * callback has returned. */
		if (srv->admit.nwaiting > 0 && srv->wait_ev != NULL)
			event_active(srv->wait_ev, EV_TIMEOUT, 1);
	}
}

static struct fwd_set *peer_park(struct server *, struct peer *);

void
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
	if (sess->fwd_peer != NULL)
		udp_relay_clear(&sess->udp);
	if (sess->fwds.qc != NULL) {
		if (sess->park_forwards && sess->peer != NULL &&
		    sess->peer->sess == sess && !srv->shutting_down)
			fwd_set_park(&sess->fwds, peer_park(srv, sess->peer));
		else
			fwd_set_clear(&sess->fwds);
	}
	if (sess->peer != NULL && sess->peer->sess == sess) {
		const struct sockaddr *remote;
		socklen_t len;

		/* Its address was in use until now: known from here on. */
		if ((remote = quic_conn_remote(sess->qc, &len)) != NULL)
			admit_remember(&srv->admit, remote, clock_now());
		sess->peer->sess = NULL;
		srv->nconnected--;
		board_drop(srv->board, sess->peer->idx, srv->worker, sess->since);
		if (!srv->shutting_down)
			peer_routes(srv, sess->peer, false);
	}
	if (sess->probe && sess->pending_peer->probe == sess)
		sess->pending_peer->probe = NULL;
	LIST_REMOVE(sess, entry);
	srv->nsessions--;
	recovery_free(sess->rec);
	quic_conn_free(sess->qc);
	free(sess->ctl);
	free(sess);
}

void
session_set_server(struct server *srv)
{
	the_server = srv;
}

bool
session_pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
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

	/* Before the handshake's end these came in 0-RTT (early_forwards_ok
	 * let them in). On a ticket another member issued, a replay cannot
	 * be told from the real flight here: the target waits for the
	 * handshake, which a replay never completes. */
	egress_request(sess->srv->egress, sess->fwd_peer->cfg, f, hdr,
	    sess->peer == NULL && state_ticket_foreign(quic_conn_tls(sess->qc)) ?
	    &sess->hold : NULL);
}

static const struct fwd_ops session_fwd_ops = {
	.request = fwd_request,
	.release = egress_release,
};

/* Where the forwards of `peer` wait between its connections. They wait
 * as long as an idle connection would. */
static struct fwd_set *
peer_park(struct server *srv, struct peer *peer)
{
	if (!peer->parked_init) {
		fwd_set_init(&peer->parked, srv->base, NULL, srv->cfg->forward_buffer,
		    srv->cfg->max_forwards, &session_fwd_ops, NULL,
		    &peer->fwd_counters, peer->cfg->name);
		peer->parked_init = true;
	}
	peer->parked.park_ms = (uint64_t)srv->cfg->idle_timeout * 1000;
	return &peer->parked;
}

/* A UDP flow's target, checked against the peer's udp/ rules. */
static void *
udp_request(struct udp_link *l, const char *host, uint16_t port, void *arg,
    uint64_t *err)
{
	struct session *sess = arg;

	(void)err;
	return egress_udp_request(sess->srv->egress, sess->fwd_peer->cfg, l,
	    host, port);
}

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
	sess->fwds.park = peer_park(sess->srv, peer);
	udp_relay_init(&sess->udp, sess->srv->base, PROTO_UDP_BY_SERVER,
	    &peer->udp_counters, udp_request, egress_udp_cancel, sess,
	    peer->cfg->name);
	udp_relay_attach(&sess->udp, sess->qc);
	/* Unless the client says goodbye, its forwards outlive this. */
	sess->park_forwards = true;
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

/* A client on TCP asks whether QUIC would carry its load again, without
 * moving its session (client-throttle.c): the session stays where it
 * is, and a newer probe of the peer's replaces an older one. */
static void
probe_start(struct session *sess, struct peer *peer)
{
	char abuf[ADDR_STRLEN];
	socklen_t len;

	/* The older stays a probe while it closes (its DATAGRAMs are never
	 * the tunnel's); session_free leaves peer->probe to the newer. */
	if (peer->probe != NULL)
		quic_conn_close(peer->probe->qc, 0, "replaced by a newer rate probe");
	sess->probe = true;
	peer->probe = sess;
	log_info("peer %s probes QUIC's rate from %s", peer->cfg->name,
	    addr_sockaddr_str(quic_conn_remote(sess->qc, &len), abuf));
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
	if (tls_alpn_is(quic_conn_tls(qc), PROTO_ALPN_PROBE)) {
		probe_start(sess, peer);
		return;
	}
	/* A peer has one live connection: a new one (a reconnect after a
	 * restart or a lost path) replaces the old. */
	if (peer->sess != NULL && peer->sess != sess) {
		struct session *old = peer->sess;
		/* Its forwards wait for this connection, where the client
		 * resumes them. */
		if (old->fwds.qc != NULL)
			fwd_set_park(&old->fwds, peer_park(sess->srv, peer));
		old->peer = NULL;
		quic_conn_close(old->qc, 0, "replaced by a new connection");
	} else if (peer->sess == NULL)
		sess->srv->nconnected++;
	sess->peer = peer;
	sess->since = clock_now();
	peer->sess = sess;
	peer->handshakes++;
	peer->latest_handshake = clock_wall();
	egress_hold_release(sess->srv->egress, &sess->hold);
	peer_routes(sess->srv, peer, true);
	{
		struct quic_conn_stats st;
		quic_conn_get_stats(qc, &st);
		if (st.early_accepted)
			peer->zero_rtt++;
	}
	session_fwds_init(sess, peer);
	server_status_show_peer(sess->srv, peer);
	remote = quic_conn_remote(qc, &len);
	/* Over TCP, its next connection from this prefix is preferred when
	 * TCP's half-open budget is full. */
	admit_remember(&sess->srv->admit, remote, clock_now());
	/* Its next connection from this address skips the Retry that a
	 * server under load asks of unknown addresses. */
	tokenlen = admit_new_token(&sess->srv->admit, remote, len, clock_now(),
	    token, sizeof token);
	quic_conn_submit_new_token(qc, token, tokenlen);
	log_info("peer %s connected from %s", peer->cfg->name,
	    addr_sockaddr_str(remote, abuf));
	server_notify(sess->srv);
}

static int
stream_data_cb(struct quic_conn *qc, int64_t stream_id, const uint8_t *data,
    size_t len, bool fin, void *stream_arg, void *arg)
{
	struct session *sess = arg;

	(void)fin;
	if (sess->peer == NULL && stream_id != 0 && early_forwards_ok(sess)) {
		session_fwds_init(sess, sess->pending_peer);
		if (udp_relay_stream_data(&sess->udp, stream_id, stream_arg,
		    data, len, fin))
			return 0;
		return fwd_on_data(&sess->fwds, stream_id, stream_arg, data, len, fin);
	}
	if (sess->peer == NULL) {
		/* Other streams before the handshake completed (the control
		 * stream, or 0-RTT we cannot prove fresh) are refused. */
		quic_conn_stream_consume(qc, stream_id, len);
		quic_conn_stream_reset(qc, stream_id, PROTO_FWD_ERR_DENIED);
		return 0;
	}
	if (stream_id != 0 && sess->fwd_peer != NULL &&
	    udp_relay_stream_data(&sess->udp, stream_id, stream_arg, data, len,
	    fin))
		return 0;
	if (stream_id != 0)
		return fwd_on_data(&sess->fwds, stream_id, stream_arg, data, len, fin);
	return session_ctl_data(sess, qc, data, len);
}

/* The peer whose packets a session carries. 0-RTT arrives before the
 * handshake completes: the peer is then the one its session ticket named. */
static struct peer *
dgram_peer(const struct session *sess)
{
	return sess->peer != NULL ? sess->peer : sess->pending_peer;
}

/* An IP packet from a peer: to the TUN, if its source is the peer's. */
static void
packet_cb(const uint8_t *pkt, size_t len, const struct ippkt_info *info,
    void *arg)
{
	struct session *sess = arg;
	struct server *srv = sess->srv;
	struct peer *peer = dgram_peer(sess);

	/* Cryptokey routing: the source must be one this peer owns. */
	if (route_lookup(srv->routes, &info->src) != peer) {
		tunnel_drop(TUNNEL_DROP_SPOOFED_SOURCE, &peer->counters, &srv->counters);
		return;
	}
	if (!srv->has_tun) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, &peer->counters, &srv->counters);
		return;
	}
	tunnel_deliver(&srv->tun_out, pkt, len, &peer->counters);
}

/* A UDP flow's datagram from the peer: its forwards' relay, once there
 * is one. */
static void
flow_dgram(const uint8_t *data, size_t len, void *arg)
{
	struct session *sess = arg;

	if (sess->fwd_peer != NULL)
		udp_relay_datagram(&sess->udp, data, len);
	else
		dgram_peer(sess)->udp_counters.drops[UDP_DROP_NO_FLOW]++;
}

static void
datagram_cb(struct quic_conn *qc, const uint8_t *data, size_t len, void *arg)
{
	struct session *sess = arg;
	struct server *srv = sess->srv;
	struct peer *peer = dgram_peer(sess);
	struct tunnel_sink sink = {
		.packet = packet_cb,
		.flow = flow_dgram,
		.arg = sess,
		.global = &srv->counters,
	};

	/* A rate probe's load goes back as it came, paced by our own
	 * congestion window like any DATAGRAM. */
	if (sess->probe) {
		(void)quic_conn_send_datagram(qc, data, len);
		return;
	}
	if (peer == NULL) {
		tunnel_drop(TUNNEL_DROP_UNKNOWN_PEER, NULL, &srv->counters);
		return;
	}
	sink.peer = &peer->counters;
	tunnel_input(sess->rec, data, len, &sink);
}

/* Stream ends: a UDP flow's, else a forward's
 * (streams.h); the relay serves the session once it has its forwards. */
static struct udp_relay *
session_udp(struct session *sess)
{
	return sess->fwd_peer != NULL ? &sess->udp : NULL;
}

static void
stream_reset_cb(struct quic_conn *qc, int64_t sid, uint64_t code,
    void *stream_arg, void *arg)
{
	streams_reset(session_udp(arg), qc, sid, code, stream_arg);
}

static void
stream_close_cb(struct quic_conn *qc, int64_t sid, uint64_t code,
    void *stream_arg, void *arg)
{
	streams_close(session_udp(arg), qc, sid, code, stream_arg);
}

static void
path_validated_cb(struct quic_conn *qc, enum quic_path_result res,
    const struct sockaddr *local, const struct sockaddr *remote, void *arg)
{
	struct session *sess = arg;
	struct quic_conn_stats st;
	char abuf[ADDR_STRLEN];

	(void)local;
	if (res != QUIC_PATH_OK || sess->peer == NULL)
		return;
	/* A validated new path on our side is the peer's NAT rebinding or
	 * its migration; routing is by connection ID, so nothing else moves. */
	sess->peer->rebinds++;
	quic_conn_get_stats(qc, &st);
	log_info("peer %s now at %s (quiet for %llu ms before)",
	    sess->peer->cfg->name, addr_sockaddr_str(remote, abuf),
	    (unsigned long long)st.rebind_quiet_ms);
	session_ctl_path_notice(sess, st.rebind_quiet_ms);
}

/* Handshakes refused for their key exchange, logged at most 5 at once and
 * then one per 10 s: a crowd of old clients must not flood the log. */
static struct log_ratelimit kex_rl = LOG_RATELIMIT_INIT(10000, 5);

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *ci, void *arg)
{
	struct session *sess = arg;
	struct server *srv = sess->srv;
	bool was_peer = sess->peer != NULL;

	if (was_peer)
		log_info("peer %s disconnected: %s%s", sess->peer->cfg->name,
		    ci->remote ? "closed by peer: " : "", ci->reason);
	else if (ci->transport && tls_kex_alert(ci->code) &&
	    ci->remote == (ci->code == 0x100 + 47) &&
	    tls_kex() == TLS_KEX_PQ_REQUIRED &&
	    log_ratelimit_ok(&kex_rl, clock_now_ms())) {
		const struct sockaddr *remote;
		char abuf[ADDR_STRLEN];
		socklen_t len;

		/* Our handshake_failure, or the client's illegal_parameter
		 * to our request for X25519MLKEM768 (tls_kex_alert): it
		 * offers none of our groups, which is X25519MLKEM768 alone. */
		remote = quic_conn_remote(qc, &len);
		log_warn("refused a handshake from %s%s",
		    remote != NULL ? addr_sockaddr_str(remote, abuf) : "?",
		    tls_kex_hint((int)(ci->code - 0x100), true));
	}
	/* A client that goes away says so with "no error" (code 0); a switch
	 * to another transport says PROTO_CLOSE_MOVED. */
	if (ci->remote && !ci->transport && ci->code == 0)
		sess->park_forwards = false;
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

static void
loss_cb(struct quic_conn *qc, uint64_t sent, uint64_t lost, void *arg)
{
	(void)qc;
	session_ctl_loss_report(arg, sent, lost);
}

static const struct quic_conn_cbs session_cbs = {
	.handshake_done = handshake_done_cb,
	.datagram = datagram_cb,
	.stream_data = stream_data_cb,
	.stream_reset = stream_reset_cb,
	.stream_acked = streams_acked,
	.stream_close = stream_close_cb,
	.cid_add = cid_add_cb,
	.cid_remove = cid_remove_cb,
	.closed = closed_cb,
	.path_validated = path_validated_cb,
	.input_done = input_done_cb,
	.loss = loss_cb,
};

/* A session for a handshake admission let through, whichever transport
 * it arrived on: counted against the session cap and as half-open until
 * its handshake completes. */
static struct session *
session_new_half_open(struct server *srv, bool tcp)
{
	struct session *sess = xcalloc(1, sizeof *sess);

	sess->srv = srv;
	egress_hold_init(&sess->hold);
	LIST_INSERT_HEAD(&srv->sessions, sess, entry);
	srv->nsessions++;
	sess->half_open = true;
	sess->tcp = tcp;
	if (tcp)
		srv->half_open_tcp++;
	else
		srv->half_open++;
	return sess;
}

void
session_start(struct listener *l, const ngtcp2_pkt_hd *hd,
    const struct admit_result *adm, const uint8_t *pkt, size_t len,
    const struct sockaddr *from, socklen_t fromlen, uint8_t ecn)
{
	struct server *srv = l->srv;
	struct quic_settings qs;
	struct session *sess;
	char *cause = NULL;

	sess = session_new_half_open(srv, false);
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

/* The TCP handshakes from unknown sources get ADMIT_TCP_HURRY (counted). */
static void
session_hurry_tcp(struct server *srv)
{
	struct session *sess;

	TAILQ_FOREACH(sess, &srv->tcp_evictable, evict_entry) {
		quic_tcp_hurry(sess->qc, ADMIT_TCP_HURRY);
		srv->admit.stats.tcp_hurried++;
	}
}

void
session_start_tcp(struct server *srv, int fd, const struct sockaddr *from,
    socklen_t fromlen, const struct admit_tcp *adm)
{
	struct session *sess;

	if (adm->evict) {
		/* The oldest from an unknown source makes room: a silent
		 * one's client, if it has one, sees its connection closed. */
		sess = TAILQ_FIRST(&srv->tcp_evictable);
		session_free(sess);
	}
	if (adm->hurry_others)
		session_hurry_tcp(srv);
	sess = session_new_half_open(srv, true);
	sess->qc = quic_tcp_server_create(srv->base, &srv->qs, &session_cbs,
	    sess, srv->tls_tcp, fd, from, fromlen);
	quic_conn_set_send_limit(sess->qc, srv->cfg->forward_memory);
	if (adm->timeout < QUIC_SERVER_HANDSHAKE_TIMEOUT)
		quic_tcp_hurry(sess->qc, adm->timeout);
	if (!adm->known) {
		sess->evictable = true;
		TAILQ_INSERT_TAIL(&srv->tcp_evictable, sess, evict_entry);
	}
}

/* Clients coming in (server-int.h): the Listen sockets' datagrams, each
 * handed to its session by connection ID, answered statelessly (version
 * negotiation, stateless reset) or, for an Initial, put to admission
 * (admit.h), which starts a session, asks for a Retry, drops it or lets it
 * wait for a half-open slot; and ListenTCP's connections, admitted by the
 * same rules. */
#include <ngtcp2/ngtcp2.h>

#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "base/random.h"
#include "forward/tcp.h"
#include "server-int.h"

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
	session_start(l, &hd, &adm, pkt, len, from, fromlen, ecn);
}

static void handle_packet(struct listener *, const uint8_t *, size_t,
    const struct sockaddr *, socklen_t, uint8_t);

/* Whatever a batch of datagrams (or TUN reads) produced leaves now:
 * packets for the TUN, coalesced, then every connection's writes and the
 * listeners' batched datagrams. */
void
server_flush(struct server *srv)
{
	/* The packets this batch delivered go to the TUN, coalesced. */
	if (srv->has_tun)
		tunnel_flush(&srv->tun_out);
	quic_write_dirty();
	for (size_t i = 0; i < srv->nlisteners; i++)
		udp_batch_flush(&srv->listeners[i].batch);
}

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
			session_start(l, &hd, &w->res, w->pkts[0].data,
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

void
listener_wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;

	(void)fd;
	(void)what;
	start_waiting(srv);
	server_flush(srv);
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
	sess = session_find(srv, vc.dcid, vc.dcidlen);
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

/* A client over TCP: admitted with a half-open budget of its own and
 * the same per-prefix rate as a QUIC Initial (admit.h), and from then on
 * a session like any other. */
static void
tcp_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_listener *tl = arg;
	struct server *srv = tl->srv;
	struct sockaddr_storage from;
	struct admit_tcp adm;
	socklen_t fromlen;
	int c;

	(void)fd;
	(void)what;
	/* Bounded: a flood of connections leaves room for everything else. */
	for (int i = 0; i < 64; i++) {
		fromlen = sizeof from;
		c = accept_guarded(&tl->guard, tl->fd, (struct sockaddr *)&from,
		    &fromlen);
		if (c == -1)
			return;
		if (srv->shutting_down || srv->nsessions >= srv->max_sessions ||
		    admit_check_tcp(&srv->admit, (struct sockaddr *)&from,
		    srv->half_open_tcp, !TAILQ_EMPTY(&srv->tcp_evictable),
		    clock_now(), &adm) != ADMIT_ACCEPT) {
			if (!srv->shutting_down && srv->nsessions >= srv->max_sessions)
				tunnel_drop(TUNNEL_DROP_QUEUE_FULL, NULL, &srv->counters);
			close(c);
			continue;
		}
		session_start_tcp(srv, c, (struct sockaddr *)&from, fromlen, &adm);
	}
}

/* "FILE:LINE: Listen: bind ...: Address already in use": which line of
 * the file to change (the default, a line of none, says so). */
static void
at_line(const struct cfg *cfg, const char *key, unsigned line, char **cause)
{
	char *c = *cause;

	if (line != 0)
		xasprintf(cause, "%s:%u: %s: %s", cfg->path, line, key, c);
	else
		xasprintf(cause, "%s: %s (the default; set %s): %s", cfg->path,
		    key, key, c);
	free(c);
}

int
listener_setup_tcp(struct server *srv, char **cause)
{
	/* Worker 0 serves TLS over TCP for the whole server. */
	for (size_t i = 0; srv->worker == 0 && i < srv->cfg->nlisten_tcp; i++) {
		struct tcp_listener *tl = &srv->tcp_listeners[i];

		tl->srv = srv;
		tl->fd = tcp_listen((const struct sockaddr *)&srv->cfg->listen_tcp[i],
		    srv->cfg->listen_tcp_len[i], cause);
		if (tl->fd == -1)
			at_line(srv->cfg, "ListenTCP", srv->cfg->listen_tcp_line[i],
			    cause);
		if (tl->fd == -1)
			return -1;
		srv->ntcp_listeners++;
		tl->ev = event_new(srv->base, tl->fd, EV_READ | EV_PERSIST,
		    tcp_accept_cb, tl);
		if (tl->ev == NULL || accept_guard_init(&tl->guard, srv->base,
		    tl->ev, "ListenTCP") != 0) {
			xasprintf(cause, "ListenTCP: out of memory");
			return -1;
		}
		event_add(tl->ev, NULL);
	}
	return 0;
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
	server_flush(l->srv);
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

int
listener_setup(struct server *srv, char **cause)
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
				at_line(srv->cfg, "Listen", srv->cfg->listen_line[i],
				    cause);
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

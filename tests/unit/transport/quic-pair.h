/* Test helper: a client and a server quic_conn talking over two real UDP
 * sockets on 127.0.0.1, driven by hand on a virtual clock. Each round moves
 * the clock by one one-way delay, delivers everything in flight, and runs
 * both write loops and the due timers, until nothing moves any more.
 * Header-only so that each test binary stays a single file. */
#ifndef ROVE_TEST_QUIC_PAIR_H
#define ROVE_TEST_QUIC_PAIR_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/key.h"
#include "base/random.h"
#include "transport/quic.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "wire/proto.h"

#define PAIR_STREAM_WINDOW 32768
#define PAIR_DELAY_NS (1000 * 1000)   /* one-way delay: 1 ms virtual */
#define PAIR_IDLE_ROUNDS 60           /* quiet for longer than max_ack_delay */
#define PAIR_MAX_DGRAMS 2048
#define PAIR_MAX_SESSIONS 4
#define PAIR_MAX_MOVES 48             /* client sockets beyond the first */

struct pair;

struct endpoint {
	const char *name;
	struct pair *pair;
	struct quic_conn *qc;
	const uint8_t *accept;       /* the one key the pin check accepts */
	int pin_calls;
	uint8_t pin_seen[KEY_LEN];
	int handshakes;
	/* The ALPN agreed, as the handshake's end saw it ("" for none). */
	char alpn[16];
	int closed;
	struct quic_close_info close_info;

	size_t ndgrams;
	uint8_t *dgram[PAIR_MAX_DGRAMS];
	size_t dgram_len[PAIR_MAX_DGRAMS];
	bool dgram_early[PAIR_MAX_DGRAMS]; /* arrived before our handshake ended */

	uint8_t *stream;             /* bytes of every stream, in arrival order */
	size_t stream_len, stream_cap;
	int64_t stream_id;
	bool stream_fin;
	bool stream_early;           /* some arrived in accepted 0-RTT */
	bool consume;                /* return flow-control credit at once */
	int stream_closes;
	uint64_t stream_close_code;
	int stream_resets, stream_acks;
	uint64_t stream_reset_code;

	size_t nsessions;
	uint8_t *session[PAIR_MAX_SESSIONS];
	size_t sessionlen[PAIR_MAX_SESSIONS];
	uint8_t *params[PAIR_MAX_SESSIONS];
	size_t paramslen[PAIR_MAX_SESSIONS];
};

struct pair {
	struct udp_socket csock, ssock;
	struct udp_batch cbatch, sbatch;
	/* More client sockets (pair_open_move), for migrations: each a new
	 * local port, as rove opens for every move. A dead socket's packets
	 * vanish both ways, as on a link that went down; c1_dead is the
	 * first socket's. */
	struct udp_socket msock[PAIR_MAX_MOVES];
	struct udp_batch mbatch[PAIR_MAX_MOVES];
	bool mdead[PAIR_MAX_MOVES];
	size_t nmoves;
	bool c1_dead;
	uint64_t dead_drops;
	/* A NAT in front of the first socket that has just rebound: the
	 * server sees its packets come from `nat`'s address, and what it
	 * sends there reaches the first socket (pair_nat_rebind). */
	struct udp_socket nat;
	bool nat_on;
	struct endpoint c, s;
	WOLFSSL_CTX *cctx, *sctx;
	struct quic_settings cqs, sqs;
	uint64_t c_rx, s_rx;        /* packets each side has read */
	size_t accepts;             /* server connections created */
	size_t accept_errors;       /* first packets ngtcp2_accept refused */
	bool block_to_server;       /* hold packets for the server in its socket */
};

/* Pairs not yet freed: a failed assertion leaves its test early, and the
 * test's teardown frees what it left (pair_free_all). */
#define PAIR_MAX_LIVE 8
static struct pair *pair_live[PAIR_MAX_LIVE];

static struct event_base *pair_base;
static uint64_t pair_now = 1000 * NGTCP2_SECONDS;
static uint8_t pair_client_reset[QUIC_RESET_SECRET_LEN];
static uint8_t pair_server_reset[QUIC_RESET_SECRET_LEN];

static inline uint64_t
pair_clock(void)
{
	return pair_now;
}

/* The one pin check of the process: each side accepts only its key. */
static inline bool
pair_pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct endpoint *e = arg;

	(void)qc;
	e->pin_calls++;
	memcpy(e->pin_seen, pub, KEY_LEN);
	return e->accept != NULL && memcmp(e->accept, pub, KEY_LEN) == 0;
}

static inline void
pair_on_handshake(struct quic_conn *qc, void *arg)
{
	struct endpoint *e = arg;
	const char *known[] = { PROTO_ALPN, PROTO_ALPN_PROBE };

	e->handshakes++;
	e->alpn[0] = '\0';
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		if (tls_alpn_is(quic_conn_tls(qc), known[i]))
			snprintf(e->alpn, sizeof e->alpn, "%s", known[i]);
	}
}

static inline void
pair_on_datagram(struct quic_conn *qc, const uint8_t *data, size_t len,
    void *arg)
{
	struct endpoint *e = arg;

	if (e->ndgrams == PAIR_MAX_DGRAMS)
		return;
	e->dgram[e->ndgrams] = malloc(len + 1);
	if (e->dgram[e->ndgrams] == NULL)
		abort();
	if (len > 0) /* an empty DATAGRAM may come as NULL */
		memcpy(e->dgram[e->ndgrams], data, len);
	e->dgram_len[e->ndgrams] = len;
	e->dgram_early[e->ndgrams] = quic_conn_state(qc) == QUIC_STATE_HANDSHAKING;
	e->ndgrams++;
}

static inline int
pair_on_stream_data(struct quic_conn *qc, int64_t id, const uint8_t *data,
    size_t len, bool fin, void *sarg, void *arg)
{
	struct endpoint *e = arg;

	(void)sarg;
	if (e->stream_len + len > e->stream_cap) {
		e->stream_cap = (e->stream_len + len) * 2 + 1;
		e->stream = realloc(e->stream, e->stream_cap);
		if (e->stream == NULL)
			abort();
	}
	if (len > 0) /* a bare FIN may come as NULL */
		memcpy(e->stream + e->stream_len, data, len);
	e->stream_len += len;
	e->stream_id = id;
	if (quic_conn_early_rx(qc))
		e->stream_early = true;
	if (fin)
		e->stream_fin = true;
	if (e->consume)
		quic_conn_stream_consume(qc, id, len);
	return 0;
}

static inline void
pair_on_stream_close(struct quic_conn *qc, int64_t id, uint64_t code,
    void *sarg, void *arg)
{
	struct endpoint *e = arg;

	(void)qc;
	(void)id;
	(void)sarg;
	e->stream_closes++;
	e->stream_close_code = code;
}

static inline void
pair_on_stream_reset(struct quic_conn *qc, int64_t id, uint64_t code,
    void *sarg, void *arg)
{
	struct endpoint *e = arg;

	(void)qc;
	(void)id;
	(void)sarg;
	e->stream_resets++;
	e->stream_reset_code = code;
}

static inline void
pair_on_stream_acked(struct quic_conn *qc, int64_t id, void *sarg, void *arg)
{
	struct endpoint *e = arg;

	(void)qc;
	(void)id;
	(void)sarg;
	e->stream_acks++;
}

static inline struct udp_batch *
pair_batch_for(struct quic_conn *qc, const ngtcp2_path *path, void *arg);

static inline void
pair_on_closed(struct quic_conn *qc, const struct quic_close_info *info,
    void *arg)
{
	struct endpoint *e = arg;

	(void)qc;
	e->closed++;
	e->close_info = *info;
}

static inline void
pair_on_new_session(struct quic_conn *qc, const uint8_t *der, size_t derlen,
    const uint8_t *params, size_t paramslen, void *arg)
{
	struct endpoint *e = arg;
	size_t i = e->nsessions;

	(void)qc;
	e->nsessions++;
	if (i >= PAIR_MAX_SESSIONS)
		return;
	e->session[i] = malloc(derlen);
	e->params[i] = malloc(paramslen + 1);
	if (e->session[i] == NULL || e->params[i] == NULL)
		abort();
	memcpy(e->session[i], der, derlen);
	e->sessionlen[i] = derlen;
	memcpy(e->params[i], params, paramslen);
	e->paramslen[i] = paramslen;
}

static const struct quic_conn_cbs pair_cbs = {
	.handshake_done = pair_on_handshake,
	.datagram = pair_on_datagram,
	.stream_data = pair_on_stream_data,
	.stream_reset = pair_on_stream_reset,
	.stream_acked = pair_on_stream_acked,
	.stream_close = pair_on_stream_close,
	.closed = pair_on_closed,
	.new_session = pair_on_new_session,
	.batch_for = pair_batch_for,
};

/* Once per test binary: the event base, the virtual clock, the pin check. */
static inline int
pair_global_setup(void)
{
	if ((pair_base = event_base_new()) == NULL)
		return -1;
	clock_set_source(pair_clock);
	quic_set_pin_check(pair_pin_check);
	random_bytes(pair_client_reset, sizeof pair_client_reset);
	random_bytes(pair_server_reset, sizeof pair_server_reset);
	return 0;
}

static inline void
pair_global_teardown(void)
{
	/* quic.c keeps a process-wide flush event on this base: let it run
	 * before the base goes. */
	event_base_loop(pair_base, EVLOOP_NONBLOCK);
	event_base_free(pair_base);
	pair_base = NULL;
	clock_set_source(NULL);
}

static inline WOLFSSL_CTX *
pair_ctx(enum tls_role role, const uint8_t priv[static KEY_LEN])
{
	char *cause = NULL;
	WOLFSSL_CTX *ctx = tls_ctx_create(role, priv, quic_tls_pin, &cause);

	if (ctx == NULL) {
		fprintf(stderr, "tls_ctx_create: %s\n", cause);
		free(cause);
		abort();
	}
	return ctx;
}

/* The two ends' keys, fixed so that a failure replays, and contexts
 * without resumption for the tests that need no tickets. */
static uint8_t pair_server_priv[KEY_LEN], pair_server_pub[KEY_LEN];
static uint8_t pair_client_priv[KEY_LEN], pair_client_pub[KEY_LEN];
static WOLFSSL_CTX *pair_sctx, *pair_cctx;

/* A cmocka group setup for the tests over a pair: the loop, the keys and
 * the contexts above. */
static inline int
pair_group_setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < KEY_LEN; i++) {
		pair_server_priv[i] = (uint8_t)(0x21 + i);
		pair_client_priv[i] = (uint8_t)(0x42 + i * 5);
	}
	if (key_public(pair_server_priv, pair_server_pub) != 0 ||
	    key_public(pair_client_priv, pair_client_pub) != 0 ||
	    pair_global_setup() != 0)
		return -1;
	pair_sctx = pair_ctx(TLS_ROLE_SERVER, pair_server_priv);
	pair_cctx = pair_ctx(TLS_ROLE_CLIENT, pair_client_priv);
	return 0;
}

static inline int
pair_group_teardown(void **state)
{
	(void)state;
	wolfSSL_CTX_free(pair_cctx);
	wolfSSL_CTX_free(pair_sctx);
	pair_global_teardown();
	return 0;
}

/* Two sockets and default settings; the client accepts `server_pub` and
 * the server `client_pub`. */
static inline struct pair *
pair_new(WOLFSSL_CTX *cctx, WOLFSSL_CTX *sctx, const uint8_t *server_pub,
    const uint8_t *client_pub)
{
	struct pair *p = calloc(1, sizeof *p);
	struct sockaddr_in lo;
	char *cause = NULL;

	if (p == NULL)
		abort();
	memset(&lo, 0, sizeof lo);
	lo.sin_family = AF_INET;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (udp_open(&p->csock, AF_INET, (struct sockaddr *)&lo, sizeof lo,
	    &cause) != 0 ||
	    udp_open(&p->ssock, AF_INET, (struct sockaddr *)&lo, sizeof lo,
	    &cause) != 0) {
		fprintf(stderr, "udp_open: %s\n", cause);
		abort();
	}
	udp_batch_init(&p->cbatch, &p->csock);
	udp_batch_init(&p->sbatch, &p->ssock);
	p->cctx = cctx;
	p->sctx = sctx;
	p->c.name = "client";
	p->s.name = "server";
	p->c.pair = p->s.pair = p;
	p->c.accept = server_pub;
	p->s.accept = client_pub;
	p->c.consume = p->s.consume = true;
	p->c.stream_id = p->s.stream_id = -1;
	p->cqs = (struct quic_settings){
		.role = QUIC_ROLE_CLIENT,
		.cc = NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = 30,
		.max_udp_payload = UDP_MAX_PAYLOAD,
		.stream_window = PAIR_STREAM_WINDOW,
		.reset_secret = pair_client_reset,
	};
	p->sqs = p->cqs;
	p->sqs.role = QUIC_ROLE_SERVER;
	p->sqs.reset_secret = pair_server_reset;
	for (size_t i = 0; i < PAIR_MAX_LIVE; i++) {
		if (pair_live[i] == NULL) {
			pair_live[i] = p;
			return p;
		}
	}
	abort();
}

/* A pair over the plain contexts, each end pinning the other's key. */
static inline struct pair *
pair_new_plain(void)
{
	return pair_new(pair_cctx, pair_sctx, pair_server_pub, pair_client_pub);
}

static inline void
endpoint_clear(struct endpoint *e)
{
	quic_conn_free(e->qc);
	e->qc = NULL;
	for (size_t i = 0; i < e->ndgrams; i++)
		free(e->dgram[i]);
	for (size_t i = 0; i < e->nsessions && i < PAIR_MAX_SESSIONS; i++) {
		free(e->session[i]);
		free(e->params[i]);
	}
	free(e->stream);
}

static inline void
pair_free(struct pair *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < PAIR_MAX_LIVE; i++) {
		if (pair_live[i] == p)
			pair_live[i] = NULL;
	}
	endpoint_clear(&p->c);
	endpoint_clear(&p->s);
	for (size_t i = 0; i < p->nmoves; i++)
		udp_close(&p->msock[i]);
	if (p->nat_on)
		udp_close(&p->nat);
	udp_close(&p->csock);
	udp_close(&p->ssock);
	free(p);
}

/* A cmocka teardown: free the pairs a failed test left behind. */
static inline int
pair_free_all(void **state)
{
	(void)state;
	for (size_t i = 0; i < PAIR_MAX_LIVE; i++)
		pair_free(pair_live[i]);
	return 0;
}

/* Start the client; `resume` may be NULL. */
static inline void
pair_connect(struct pair *p, const struct quic_resume *resume)
{
	char *cause = NULL;

	p->c.qc = quic_conn_client_create(pair_base, &p->cqs, &pair_cbs, &p->c,
	    p->cctx, &p->cbatch, (const struct sockaddr *)&p->ssock.local,
	    p->ssock.locallen, resume, &cause);
	if (p->c.qc == NULL) {
		fprintf(stderr, "quic_conn_client_create: %s\n", cause);
		abort();
	}
}

/* What roved's listener does with a packet (daemon/listener.c new_session):
 * a connection from the first Initial, then every packet to it. */
static inline void
pair_server_input(struct pair *p, const uint8_t *pkt, size_t len,
    const struct sockaddr *from, socklen_t fromlen, uint8_t ecn)
{
	ngtcp2_pkt_hd hd;
	char *cause = NULL;

	if (p->s.qc == NULL) {
		if (ngtcp2_accept(&hd, pkt, len) != 0) {
			p->accept_errors++;
			return;
		}
		p->s.qc = quic_conn_server_create(pair_base, &p->sqs, &pair_cbs,
		    &p->s, p->sctx, &p->sbatch, &hd, from, fromlen, &cause);
		if (p->s.qc == NULL) {
			fprintf(stderr, "quic_conn_server_create: %s\n", cause);
			abort();
		}
		p->accepts++;
	}
	quic_conn_read(p->s.qc, &p->ssock, from, fromlen, pkt, len, ecn);
}

static inline bool
pair_sockaddr_is(const struct udp_socket *sock, const struct sockaddr *a)
{
	return memcmp(&sock->local, a, sizeof(struct sockaddr_in)) == 0;
}

/* The client's socket for a path, by its local address (what
 * client_path_batch_for does in rove). */
static inline struct udp_batch *
pair_batch_for(struct quic_conn *qc, const ngtcp2_path *path, void *arg)
{
	struct endpoint *e = arg;
	struct pair *p = e->pair;

	if (qc != p->c.qc)
		return NULL;
	for (size_t i = 0; i < p->nmoves; i++) {
		if (pair_sockaddr_is(&p->msock[i], path->local.addr))
			return &p->mbatch[i];
	}
	return &p->cbatch;
}

/* Is the client socket with this address on a dead link? */
static inline bool
pair_dead_addr(const struct pair *p, const struct sockaddr *a)
{
	for (size_t i = 0; i < p->nmoves; i++) {
		if (pair_sockaddr_is(&p->msock[i], a))
			return p->mdead[i];
	}
	return p->c1_dead;
}

/* Read everything queued on one socket; returns the packets read. */
static inline size_t
pair_drain_sock(struct pair *p, struct udp_socket *sock, bool to_server)
{
	static struct udp_recv r;
	size_t n = 0;

	while (udp_recv(sock, &r) == 1) {
		for (size_t off = 0; off < r.len; off += r.segsize) {
			size_t seg = r.len - off < r.segsize ? r.len - off : r.segsize;
			const struct sockaddr *from = (const struct sockaddr *)&r.peer;

			/* The NAT's mapping: out from the first socket,
			 * back in through the NAT's to it. */
			const struct udp_socket *local = sock == &p->nat ?
			    &p->csock : sock;

			n++;
			if (pair_dead_addr(p, to_server ? from :
			    (const struct sockaddr *)&local->local)) {
				p->dead_drops++;
				continue;
			}
			if (to_server && p->nat_on && pair_sockaddr_is(&p->csock, from))
				from = (const struct sockaddr *)&p->nat.local;
			if (to_server)
				pair_server_input(p, r.buf + off, seg, from,
				    r.peerlen, r.ecn);
			else if (p->c.qc != NULL)
				quic_conn_read(p->c.qc, local, from, r.peerlen,
				    r.buf + off, seg, r.ecn);
		}
	}
	if (to_server)
		p->s_rx += n;
	else
		p->c_rx += n;
	return n;
}

static inline size_t
pair_drain(struct pair *p, bool to_server)
{
	size_t n;

	if (to_server)
		return pair_drain_sock(p, &p->ssock, true);
	n = pair_drain_sock(p, &p->csock, false);
	if (p->nat_on)
		n += pair_drain_sock(p, &p->nat, false);
	for (size_t i = 0; i < p->nmoves; i++)
		n += pair_drain_sock(p, &p->msock[i], false);
	return n;
}

/* Packets the client has sent, from any of its sockets. */
static inline uint64_t
pair_client_sent(const struct pair *p)
{
	uint64_t n = p->cbatch.sent_packets;

	for (size_t i = 0; i < p->nmoves; i++)
		n += p->mbatch[i].sent_packets;
	return n;
}

static inline void
pair_flush_client(struct pair *p)
{
	udp_batch_flush(&p->cbatch);
	for (size_t i = 0; i < p->nmoves; i++)
		udp_batch_flush(&p->mbatch[i]);
}

/* A new client socket to move to (a new local port); its batch. */
static inline struct udp_batch *
pair_open_move(struct pair *p)
{
	struct sockaddr_in lo;
	char *cause = NULL;
	size_t i = p->nmoves;

	if (i == PAIR_MAX_MOVES)
		abort();
	memset(&lo, 0, sizeof lo);
	lo.sin_family = AF_INET;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (udp_open(&p->msock[i], AF_INET, (struct sockaddr *)&lo, sizeof lo,
	    &cause) != 0) {
		fprintf(stderr, "udp_open: %s\n", cause);
		abort();
	}
	udp_batch_init(&p->mbatch[i], &p->msock[i]);
	p->mdead[i] = false;
	p->nmoves++;
	return &p->mbatch[i];
}

/* The first socket's NAT forgets its mapping and makes a new one: from
 * now on the server sees its packets come from another address. */
static inline void
pair_nat_rebind(struct pair *p)
{
	struct sockaddr_in lo;
	char *cause = NULL;

	memset(&lo, 0, sizeof lo);
	lo.sin_family = AF_INET;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (p->nat_on || udp_open(&p->nat, AF_INET, (struct sockaddr *)&lo,
	    sizeof lo, &cause) != 0) {
		fprintf(stderr, "udp_open: %s\n", cause != NULL ? cause : "twice");
		abort();
	}
	p->nat_on = true;
}

/* Every client socket but `live` on a dead link (NULL: all live). */
static inline void
pair_kill_all_but(struct pair *p, const struct udp_batch *live)
{
	p->c1_dead = live != NULL && live != &p->cbatch;
	for (size_t i = 0; i < p->nmoves; i++)
		p->mdead[i] = live != NULL && live != &p->mbatch[i];
}

/* Deliver every packet in flight. Loopback delivery is nearly immediate,
 * but wait (boundedly) until each packet sent has been read. */
static inline size_t
pair_deliver(struct pair *p)
{
	size_t n = 0;

	for (int i = 0; i < 2000; i++) {
		struct pollfd pfd[3 + PAIR_MAX_MOVES] = {
			{ .fd = p->ssock.fd, .events = POLLIN },
			{ .fd = p->csock.fd, .events = POLLIN },
			{ .fd = p->nat_on ? p->nat.fd : -1, .events = POLLIN },
		};
		bool to_s = !p->block_to_server && p->s_rx < pair_client_sent(p);
		bool to_c = p->c_rx < p->sbatch.sent_packets;

		if (!to_s && !to_c)
			return n;
		for (size_t m = 0; m < p->nmoves; m++)
			pfd[3 + m] = (struct pollfd){ .fd = p->msock[m].fd, .events = POLLIN };
		if (poll(pfd, 3 + p->nmoves, 1) < 0)
			break;
		if (to_s)
			n += pair_drain(p, true);
		if (to_c)
			n += pair_drain(p, false);
	}
	fprintf(stderr, "pair_deliver: packets lost on loopback (c %llu/%llu, "
	    "s %llu/%llu)\n", (unsigned long long)p->s_rx,
	    (unsigned long long)pair_client_sent(p),
	    (unsigned long long)p->c_rx, (unsigned long long)p->sbatch.sent_packets);
	abort();
}

/* Both write loops, then send. */
static inline void
pair_write(struct pair *p)
{
	if (p->c.qc != NULL)
		quic_conn_write(p->c.qc);
	if (p->s.qc != NULL)
		quic_conn_write(p->s.qc);
	quic_write_dirty();
	pair_flush_client(p);
	udp_batch_flush(&p->sbatch);
}

/* One round: the clock moves one delay, what was sent arrives, both sides
 * answer, due timers and deferred events run. Returns packets moved. */
static inline size_t
pair_round(struct pair *p)
{
	uint64_t sent = pair_client_sent(p) + p->sbatch.sent_packets +
	    p->cbatch.send_errors + p->sbatch.send_errors;
	size_t n;

	pair_now += PAIR_DELAY_NS;
	n = pair_deliver(p);
	pair_write(p);
	event_base_loop(pair_base, EVLOOP_NONBLOCK);
	pair_flush_client(p);
	udp_batch_flush(&p->sbatch);
	return n + (size_t)(pair_client_sent(p) + p->sbatch.sent_packets +
	    p->cbatch.send_errors + p->sbatch.send_errors - sent);
}

/* Rounds until nothing has moved for a while. Returns the rounds run, or
 * -1 if it never settled within `max` rounds. */
static inline int
pair_run(struct pair *p, int max)
{
	int quiet = 0;

	pair_write(p);
	for (int i = 0; i < max; i++) {
		if (pair_round(p) == 0) {
			if (++quiet == PAIR_IDLE_ROUNDS)
				return i + 1;
		} else
			quiet = 0;
	}
	return -1;
}

#endif

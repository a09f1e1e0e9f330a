/*
 * libFuzzer harness for QUIC at the server: datagrams that someone on the
 * path can forge, replay, drop, duplicate, reorder, corrupt or readdress,
 * fed to server connections through the calls roved's listener makes
 * (ngtcp2_accept, quic_conn_server_create, quic_conn_read), with its TLS
 * context, StateDir tickets and 0-RTT, on a virtual clock.
 *
 * New connections pass roved's admission first (daemon/admit.c): Retry
 * under load, NEW_TOKEN for the next connection, rate limits per source.
 *
 * Two kinds of traffic meet the server:
 * - forged packets from an address of their own: raw bytes, or Initial
 *   packets whose frames come from the input, protected with the Initial
 *   keys anyone can derive (RFC 9001 5.2), so that the frame decoder, the
 *   CRYPTO stream and the TLS ClientHello parser see fuzzed bytes;
 * - a real rove client (quic_conn_client_create) whose packets, in both
 *   directions, pass through a queue the input controls.
 *
 * Input: a sequence of operations, one byte each plus arguments (see
 * fuzz-quic.h). After the last one every connection is freed.
 *
 * Invariants: a forged connection never completes a handshake; the real
 * one completes only with the client's pinned key; stream bytes arrive at
 * either end exactly as the other sent them (a prefix of them), and every
 * DATAGRAM that arrives is one that was sent.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <assert.h>
#include <dirent.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/clock.h"
#include "base/key.h"
#include "daemon/admit.h"
#include "fuzz-quic.h"
#include "quic-initial.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "transport/udp.h"

int LLVMFuzzerInitialize(int *, char ***);
int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define MAX_OPS 256
#define MAX_QUEUE 128        /* packets held per direction */
#define MAX_PKT 1500
#define MAX_STREAMS 4        /* tracked streams per direction */
#define STREAM_CAP 8192      /* bytes tracked per stream */
#define MAX_DGRAMS 32
#define MAX_CONNS 4          /* server connections per slot and input */
#define FLUSH_ROUNDS 64
#define CLOCK_START (1000 * NGTCP2_SECONDS)
/* Half-open handshakes beyond which the server asks for a Retry. */
#define RETRY_THRESHOLD 4

/* One side of a connection, as its owner sees it. */
struct end {
	const char *name;
	struct quic_conn *qc;
	const uint8_t *accept;      /* the peer key its pin check accepts */
	bool forged;                /* the forger's connection (server) */
	bool closed;
	int handshakes;
	unsigned conns;             /* connections made in this slot */
	/* what arrived on the streams the peer opened, by index */
	int64_t rx_id[MAX_STREAMS];
	size_t rx_len[MAX_STREAMS];
	size_t nrx;
	/* what this end sent on the streams it opened */
	int64_t tx_id[MAX_STREAMS];
	uint8_t tx[MAX_STREAMS][STREAM_CAP];
	size_t tx_len[MAX_STREAMS];
	bool tx_fin[MAX_STREAMS];
	size_t ntx;
};

struct packet {
	uint8_t *data;
	size_t len;
};

struct queue {
	struct packet p[MAX_QUEUE];
	size_t head, n;
};

static struct event_base *base;
static uint64_t now_ns;
static uint8_t server_priv[KEY_LEN], server_pub[KEY_LEN];
static uint8_t client_priv[KEY_LEN], client_pub[KEY_LEN];
static WOLFSSL_CTX *sctx, *cctx;
static char statedir[64];
static struct state_server *st;

/* The server's socket, the client's, the address the client's packets
 * come from behind a rebinding NAT, and the forger's. */
static struct udp_socket ssock, csock, nsock, fsock;
static struct udp_batch sbatch, cbatch;
static uint64_t s_expect, s_seen, c_expect, c_seen;

static struct end srv_real, srv_forged, cli;
static struct queue to_server, to_client;
static bool nat;

/* The client's DATAGRAMs, for matching what arrives: each may arrive
 * once, at whichever server connection (a replayed 0-RTT flight may
 * reach the forger's first), never twice. */
static uint8_t dgram[MAX_DGRAMS][256];
static size_t dgram_len[MAX_DGRAMS], ndgrams;
static bool dgram_seen[MAX_DGRAMS];
static unsigned client_starts;

/* The last session ticket the client got, for a resumed start. */
static uint8_t *saved_session, *saved_params;
static size_t saved_sessionlen, saved_paramslen;

static struct initial_keys forged_keys;
static uint32_t forged_pn;
static uint8_t forged_token[INITIAL_MAX_TOKEN];
static size_t forged_tokenlen;

/* The server's admission, how busy it claims to be (OP_LOAD), and the
 * NEW_TOKEN token the client got for its next connection. */
static struct admit adm;
static unsigned load;
static uint8_t saved_token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
static size_t saved_tokenlen;

static uint64_t
fuzz_clock(void)
{
	return now_ns;
}

/* RFC 9001 A.1: with a wrong derivation the harness would fuzz nothing
 * but the AEAD. */
static void
check_initial_keys(void)
{
	static const uint8_t want_key[16] = {
		0x1f, 0x36, 0x96, 0x13, 0xdd, 0x76, 0xd5, 0x46,
		0x77, 0x30, 0xef, 0xcb, 0xe3, 0xb1, 0xa2, 0x2d,
	};
	static const uint8_t want_hp[16] = {
		0x9f, 0x50, 0x44, 0x9e, 0x04, 0xa0, 0xe8, 0x10,
		0x28, 0x3a, 0x1e, 0x99, 0x33, 0xad, 0xed, 0xd2,
	};

	assert(initial_keys_derive(forged_dcid, sizeof forged_dcid,
	    &forged_keys) == 0);
	assert(memcmp(forged_keys.key, want_key, sizeof want_key) == 0);
	assert(memcmp(forged_keys.hp, want_hp, sizeof want_hp) == 0);
}

/* --- the owner's side of each connection --- */

static bool
pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct end *e = arg;

	(void)qc;
	return memcmp(e->accept, pub, KEY_LEN) == 0;
}

static void
on_handshake(struct quic_conn *qc, void *arg)
{
	struct end *e = arg;

	const struct sockaddr *remote;
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	size_t tokenlen;
	socklen_t len;

	e->handshakes++;
	if (e == &cli)
		return;
	/* The server knows its peer by the key it proved, and gives it a
	 * token for next time, as roved does. */
	assert(memcmp(quic_conn_peer_key(qc), client_pub, KEY_LEN) == 0);
	remote = quic_conn_remote(qc, &len);
	tokenlen = admit_new_token(&adm, remote, len, now_ns, token,
	    sizeof token);
	quic_conn_submit_new_token(qc, token, tokenlen);
}

static void
on_datagram(struct quic_conn *qc, const uint8_t *data, size_t len, void *arg)
{
	struct end *e = arg;
	size_t i;

	(void)qc;
	assert(e != &cli);
	for (i = 0; i < ndgrams; i++) {
		if (!dgram_seen[i] && dgram_len[i] == len &&
		    (len == 0 || memcmp(dgram[i], data, len) == 0))
			break;
	}
	if (i == ndgrams) {
		fprintf(stderr, "%s: a DATAGRAM of %zu bytes that was not sent, "
		    "or arrived twice\n", e->name, len);
		abort();
	}
	dgram_seen[i] = true;
}

/* The peer of `e`: whose tx the bytes arriving at `e` must match. */
static struct end *
peer_of(struct end *e)
{
	return e == &cli ? &srv_real : &cli;
}

static int
on_stream_data(struct quic_conn *qc, int64_t id, const uint8_t *data,
    size_t len, bool fin, void *sarg, void *arg)
{
	struct end *e = arg, *from = peer_of(e);
	size_t i, j;

	(void)sarg;
	assert(!e->forged);
	for (i = 0; i < e->nrx && e->rx_id[i] != id; i++)
		;
	if (i == e->nrx) {
		assert(e->nrx < MAX_STREAMS);
		e->rx_id[e->nrx++] = id;
	}
	for (j = 0; j < from->ntx && from->tx_id[j] != id; j++)
		;
	/* Only streams the peer opened and wrote to carry anything. */
	assert(j < from->ntx);
	assert(e->rx_len[i] + len <= from->tx_len[j]);
	assert(len == 0 || memcmp(from->tx[j] + e->rx_len[i], data, len) == 0);
	e->rx_len[i] += len;
	if (fin)
		assert(from->tx_fin[j] && e->rx_len[i] == from->tx_len[j]);
	quic_conn_stream_consume(qc, id, len);
	return 0;
}

static void
on_closed(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	struct end *e = arg;

	(void)qc;
	(void)info;
	e->closed = true;
}

static void
on_new_session(struct quic_conn *qc, const uint8_t *der, size_t derlen,
    const uint8_t *params, size_t paramslen, void *arg)
{
	(void)qc;
	(void)arg;
	free(saved_session);
	free(saved_params);
	saved_session = malloc(derlen + 1);
	saved_params = malloc(paramslen + 1);
	assert(saved_session != NULL && saved_params != NULL);
	memcpy(saved_session, der, derlen);
	memcpy(saved_params, params, paramslen);
	saved_sessionlen = derlen;
	saved_paramslen = paramslen;
}

static void
on_new_token(struct quic_conn *qc, const uint8_t *token, size_t len,
    void *arg)
{
	(void)qc;
	(void)arg;
	if (len == 0 || len > sizeof saved_token)
		return;
	memcpy(saved_token, token, len);
	saved_tokenlen = len;
}

static const struct quic_conn_cbs cbs = {
	.handshake_done = on_handshake,
	.datagram = on_datagram,
	.stream_data = on_stream_data,
	.closed = on_closed,
	.new_session = on_new_session,
	.new_token = on_new_token,
};

/* --- set-up --- */

static void
open_socket(struct udp_socket *s)
{
	struct sockaddr_in lo;
	char *cause = NULL;

	memset(&lo, 0, sizeof lo);
	lo.sin_family = AF_INET;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (udp_open(s, AF_INET, (struct sockaddr *)&lo, sizeof lo, &cause) != 0) {
		fprintf(stderr, "udp_open: %s\n", cause);
		abort();
	}
}

static WOLFSSL_CTX *
make_ctx(enum tls_role role, const uint8_t *priv)
{
	char *cause = NULL;
	WOLFSSL_CTX *ctx = tls_ctx_create(role, priv, quic_tls_pin, &cause);

	if (ctx == NULL) {
		fprintf(stderr, "tls_ctx_create: %s\n", cause);
		abort();
	}
	tls_ctx_enable_resumption(ctx, role == TLS_ROLE_SERVER ?
	    TLS_ROLE_SERVER : TLS_ROLE_CLIENT, true);
	return ctx;
}

static void
empty_statedir(void)
{
	char path[128];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(statedir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", statedir, de->d_name);
		unlink(path);
	}
	closedir(d);
}

static void
cleanup(void)
{
	state_server_free(st);
	empty_statedir();
	rmdir(statedir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char *cause = NULL;

	(void)argc;
	(void)argv;
	for (size_t i = 0; i < KEY_LEN; i++) {
		server_priv[i] = (uint8_t)(0x10 + i);
		client_priv[i] = (uint8_t)(0x80 + i * 3);
	}
	assert(key_public(server_priv, server_pub) == 0);
	assert(key_public(client_priv, client_pub) == 0);
	assert((base = event_base_new()) != NULL);
	clock_set_source(fuzz_clock);
	quic_set_pin_check(pin_check);
	sctx = make_ctx(TLS_ROLE_SERVER, server_priv);
	cctx = make_ctx(TLS_ROLE_CLIENT, client_priv);
	open_socket(&ssock);
	open_socket(&csock);
	open_socket(&nsock);
	open_socket(&fsock);
	udp_batch_init(&sbatch, &ssock);
	udp_batch_init(&cbatch, &csock);
	snprintf(statedir, sizeof statedir, "%s/rove-fuzz-quic.XXXXXX", tmp);
	assert(mkdtemp(statedir) != NULL);
	atexit(cleanup);
	/* One StateDir for the whole run, as roved has: opening it costs
	 * more than most inputs, so its ticket register carries over from
	 * one input to the next (it only ever records tickets issued). */
	if ((st = state_server_open(statedir, &cause)) == NULL) {
		fprintf(stderr, "state_server_open: %s\n", cause);
		abort();
	}
	state_server_attach(st, sctx);
	check_initial_keys();
	return 0;
}

/* --- moving packets --- */

static void
queue_push(struct queue *q, const uint8_t *data, size_t len)
{
	struct packet *p;

	if (q->n == MAX_QUEUE) {
		/* Full: the oldest goes, as on a congested link. */
		free(q->p[q->head].data);
		q->head = (q->head + 1) % MAX_QUEUE;
		q->n--;
	}
	p = &q->p[(q->head + q->n) % MAX_QUEUE];
	p->data = malloc(len ? len : 1);
	assert(p->data != NULL);
	memcpy(p->data, data, len);
	p->len = len;
	q->n++;
}

/* Take the oldest packet (caller frees its data); false if none. */
static bool
queue_pop(struct queue *q, struct packet *out)
{
	if (q->n == 0)
		return false;
	*out = q->p[q->head];
	q->head = (q->head + 1) % MAX_QUEUE;
	q->n--;
	return true;
}

static void
queue_clear(struct queue *q)
{
	struct packet p;

	while (queue_pop(q, &p))
		free(p.data);
	q->head = 0;
}

/* Read what arrived on one socket; `q` NULL discards it. */
static size_t
drain(struct udp_socket *s, struct queue *q)
{
	static struct udp_recv r;
	size_t n = 0;

	while (udp_recv(s, &r) == 1) {
		for (size_t off = 0; off < r.len; off += r.segsize) {
			size_t seg = r.len - off < r.segsize ? r.len - off :
			    r.segsize;

			if (q != NULL)
				queue_push(q, r.buf + off, seg);
			n++;
		}
	}
	return n;
}

/* Run every write loop and send; then wait (boundedly: loopback loses
 * nothing) until each packet sent has been read into its queue. */
static void
pump(void)
{
	struct end *ends[] = { &srv_real, &srv_forged, &cli };

	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		if (ends[i]->qc != NULL)
			quic_conn_write(ends[i]->qc);
	}
	quic_write_dirty();
	event_base_loop(base, EVLOOP_NONBLOCK);
	udp_batch_flush(&sbatch);
	udp_batch_flush(&cbatch);
	s_expect = cbatch.sent_packets;
	c_expect = sbatch.sent_packets;
	for (int i = 0; i < 2000 && (s_seen < s_expect || c_seen < c_expect);
	    i++) {
		struct pollfd pfd[4] = {
			{ .fd = ssock.fd, .events = POLLIN },
			{ .fd = csock.fd, .events = POLLIN },
			{ .fd = nsock.fd, .events = POLLIN },
			{ .fd = fsock.fd, .events = POLLIN },
		};

		if (poll(pfd, 4, 1) < 0)
			break;
		s_seen += drain(&ssock, &to_server);
		c_seen += drain(&csock, &to_client);
		c_seen += drain(&nsock, &to_client);
		c_seen += drain(&fsock, NULL);
	}
	/* Sends the kernel refused count as sent and never arrive. */
	s_seen = s_expect;
	c_seen = c_expect;
}

/* Both ends as the programs set them up by default, the server with
 * 0-RTT and roved's congestion controller. */
static struct quic_settings
settings(enum quic_role role)
{
	return (struct quic_settings){
		.role = role,
		.cc = role == QUIC_ROLE_SERVER ? NGTCP2_CC_ALGO_BBR :
		    NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = 30,
		.keepalive_s = 15,
		.max_udp_payload = UDP_MAX_PAYLOAD,
		.stream_window = 32768,
		.early_data = role == QUIC_ROLE_SERVER,
		.reset_secret = state_reset_secret(st),
	};
}

/* Handshakes under way, as roved counts them for admission, or the
 * level OP_LOAD set. */
static size_t
half_open(void)
{
	size_t n = 0;

	if (load % 3 == 1)
		return RETRY_THRESHOLD;
	if (load % 3 == 2)
		return ADMIT_MAX_HALF_OPEN;
	if (srv_real.qc != NULL && srv_real.handshakes == 0)
		n++;
	if (srv_forged.qc != NULL)
		n++;
	return n;
}

/* What roved's listener does (daemon/listener.c new_session): admission,
 * then a new connection from a packet ngtcp2_accept takes, then every
 * packet to it. Here the slot stands for the connection-ID lookup. */
static void
to_server_slot(struct end *e, const uint8_t *pkt, size_t len,
    const struct udp_socket *from)
{
	const struct sockaddr *sa = (const struct sockaddr *)&from->local;
	struct quic_settings qs = settings(QUIC_ROLE_SERVER);
	struct admit_result res;
	ngtcp2_pkt_hd hd;
	char *cause = NULL;
	size_t retrylen;

	if (e->qc == NULL) {
		if (e->conns == MAX_CONNS || ngtcp2_accept(&hd, pkt, len) != 0)
			return;
		switch (admit_check(&adm, &hd, sa, from->locallen, half_open(),
		    now_ns, &res, udp_batch_slot(&sbatch), UDP_MAX_PAYLOAD,
		    &retrylen)) {
		case ADMIT_RETRY:
			udp_batch_commit(&sbatch, retrylen, sa, from->locallen, 0);
			return;
		case ADMIT_DROP:
		case ADMIT_WAIT: /* a line needs more than MAX_CONNS half-open */
			return;
		case ADMIT_ACCEPT:
			break;
		}
		if (res.validated) {
			qs.token = hd.token;
			qs.tokenlen = hd.tokenlen;
			qs.token_retry = res.retried;
			qs.odcid = &res.odcid;
		}
		e->qc = quic_conn_server_create(base, &qs, &cbs, e, sctx,
		    &sbatch, &hd, sa, from->locallen, &cause);
		if (e->qc == NULL) {
			fprintf(stderr, "quic_conn_server_create: %s\n", cause);
			abort();
		}
		e->conns++;
		e->closed = false;
	}
	quic_conn_read(e->qc, &ssock, sa, from->locallen, pkt, len, 0);
}

static void
deliver_to_server(const uint8_t *pkt, size_t len, bool rebound, bool forged)
{
	if (forged)
		to_server_slot(&srv_forged, pkt, len, &fsock);
	else
		to_server_slot(&srv_real, pkt, len, nat != rebound ? &nsock :
		    &csock);
}

static void
deliver_to_client(const uint8_t *pkt, size_t len)
{
	if (cli.qc != NULL)
		quic_conn_read(cli.qc, &csock, (const struct sockaddr *)&ssock.local,
		    ssock.locallen, pkt, len, 0);
}

/* Free what has closed, as owners do outside the callbacks. */
static void
reap(void)
{
	struct end *ends[] = { &srv_real, &srv_forged, &cli };

	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		if (ends[i]->qc != NULL && ends[i]->closed) {
			quic_conn_free(ends[i]->qc);
			ends[i]->qc = NULL;
		}
	}
}

/* Everything held, delivered as sent, until nothing moves. */
static void
flush(void)
{
	struct packet p;

	for (int round = 0; round < FLUSH_ROUNDS; round++) {
		if (to_server.n == 0 && to_client.n == 0)
			break;
		now_ns += NGTCP2_MILLISECONDS;
		while (queue_pop(&to_server, &p)) {
			deliver_to_server(p.data, p.len, false, false);
			free(p.data);
		}
		while (queue_pop(&to_client, &p)) {
			deliver_to_client(p.data, p.len);
			free(p.data);
		}
		pump();
		reap();
	}
}

struct timers {
	struct event *ev[64];
	size_t n;
};

static int
collect_timer(const struct event_base *b, const struct event *ev, void *arg)
{
	struct timers *t = arg;

	(void)b;
	if (t->n < sizeof t->ev / sizeof t->ev[0] &&
	    event_pending(ev, EV_TIMEOUT, NULL))
		t->ev[t->n++] = (struct event *)(uintptr_t)ev;
	return 0;
}

/* The clock jumps; every armed timer fires at once (each handler checks
 * against the clock what is actually due). */
static void
advance(uint64_t ns)
{
	struct timers t = { .n = 0 };

	now_ns += ns;
	event_base_foreach_event(base, collect_timer, &t);
	for (size_t i = 0; i < t.n; i++)
		event_active(t.ev[i], EV_TIMEOUT, 1);
	event_base_loop(base, EVLOOP_NONBLOCK);
	pump();
	reap();
}

/* --- operations --- */

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t
get8(struct input *in)
{
	uint8_t v;

	if (in->left == 0)
		return 0;
	v = *in->p++;
	in->left--;
	return v;
}

/* Up to `max` bytes (fewer if the input ends); returns how many. */
static size_t
getn(struct input *in, size_t want, size_t max, const uint8_t **out)
{
	size_t n = want < max ? want : max;

	if (n > in->left)
		n = in->left;
	*out = in->p;
	in->p += n;
	in->left -= n;
	return n;
}

static void
end_reset(struct end *e, const char *name, const uint8_t *accept,
    bool forged)
{
	memset(e, 0, sizeof *e);
	e->name = name;
	e->accept = accept;
	e->forged = forged;
}

static void
client_start(uint8_t flags)
{
	struct quic_settings qs = settings(QUIC_ROLE_CLIENT);
	struct quic_resume resume = {
		.session = saved_session,
		.sessionlen = saved_sessionlen,
		.params = saved_params,
		.paramslen = saved_paramslen,
		.early_data = true,
	};
	char *cause = NULL;

	unsigned conns = srv_real.conns;

	/* One client at a time, and one server connection for it: a new
	 * client (resuming the last one's session if it got one) starts
	 * only once both are gone. */
	if (cli.qc != NULL || srv_real.qc != NULL || client_starts == MAX_CONNS)
		return;
	client_starts++;
	/* The last server's NEW_TOKEN token, as rove presents it. */
	if (saved_tokenlen > 0) {
		qs.token = saved_token;
		qs.tokenlen = saved_tokenlen;
	}
	end_reset(&cli, "client", server_pub, false);
	end_reset(&srv_real, "server", client_pub, false);
	srv_real.conns = conns;
	cli.qc = quic_conn_client_create(base, &qs, &cbs, &cli, cctx, &cbatch,
	    (const struct sockaddr *)&ssock.local, ssock.locallen,
	    (flags & 1) && saved_session != NULL ? &resume : NULL, &cause);
	if (cli.qc == NULL) {
		fprintf(stderr, "quic_conn_client_create: %s\n", cause);
		abort();
	}
}

/* One packet off a queue, and what happens to it on the way. */
static void
packet_op(struct input *in)
{
	uint8_t fate = get8(in), a, b;
	bool toward_server = (fate & 1) == 0;
	struct queue *q = toward_server ? &to_server : &to_client;
	struct packet p;

	if (q->n == 0) {
		toward_server = !toward_server;
		q = toward_server ? &to_server : &to_client;
	}
	if (!queue_pop(q, &p))
		return;
	switch ((fate >> 1) % 8) {
	case 1:                 /* lost */
		break;
	case 2:                 /* duplicated */
	case 0:                 /* delivered */
		for (int i = (fate >> 1) % 8 == 2 ? 2 : 1; i > 0; i--) {
			if (toward_server)
				deliver_to_server(p.data, p.len, false, false);
			else
				deliver_to_client(p.data, p.len);
		}
		break;
	case 3:                 /* one byte changed, or cut short */
	case 4:
		a = get8(in);
		b = get8(in);
		if (p.len > 0 && (fate >> 1) % 8 == 3)
			p.data[a % p.len] ^= (uint8_t)(b | 1);
		else if (p.len > 0)
			p.len = a % p.len;
		if (toward_server)
			deliver_to_server(p.data, p.len, false, false);
		else
			deliver_to_client(p.data, p.len);
		break;
	case 5:                 /* overtaken by everything queued */
		queue_push(q, p.data, p.len);
		break;
	case 6:                 /* from the other address, this once */
		if (toward_server)
			deliver_to_server(p.data, p.len, true, false);
		else
			deliver_to_client(p.data, p.len);
		break;
	case 7:                 /* replayed by the forger */
		if (toward_server)
			deliver_to_server(p.data, p.len, false, true);
		break;
	}
	free(p.data);
	pump();
	reap();
}

static void
stream_op(struct input *in)
{
	uint8_t flags = get8(in);
	struct end *e = (flags & 1) ? &srv_real : &cli;
	const uint8_t *data;
	size_t len = getn(in, get8(in), 255, &data), i;
	bool fin = (flags & 2) != 0;
	int64_t id;

	if (e->qc == NULL || quic_conn_state(e->qc) != QUIC_STATE_ESTABLISHED)
		return;
	/* A new stream, or more on one of ours that is still open. */
	i = (flags >> 2) % MAX_STREAMS;
	if (i >= e->ntx) {
		if (e->ntx == MAX_STREAMS ||
		    (id = quic_conn_open_stream(e->qc, NULL)) < 0)
			return;
		i = e->ntx++;
		e->tx_id[i] = id;
	}
	if (e->tx_fin[i] || e->tx_len[i] + len > STREAM_CAP)
		return;
	if (quic_conn_stream_send(e->qc, e->tx_id[i], data, len, fin) != 0)
		return;
	memcpy(e->tx[i] + e->tx_len[i], data, len);
	e->tx_len[i] += len;
	e->tx_fin[i] = fin;
	pump();
}

static void
datagram_op(struct input *in)
{
	const uint8_t *data;
	size_t len = getn(in, get8(in), 255, &data);

	if (cli.qc == NULL || ndgrams == MAX_DGRAMS ||
	    (quic_conn_state(cli.qc) != QUIC_STATE_ESTABLISHED &&
	    !quic_conn_early_ready(cli.qc)))
		return;
	memcpy(dgram[ndgrams], data, len);
	dgram_len[ndgrams] = len;
	if (quic_conn_send_datagram(cli.qc, data, len) >= 0)
		ndgrams++;
	pump();
}

static void
close_op(struct input *in)
{
	uint8_t flags = get8(in), code = get8(in);
	struct end *e = (flags & 1) ? &srv_real : &cli;

	if (e->qc != NULL && !e->closed)
		quic_conn_close(e->qc, code, "fuzz");
	pump();
	reap();
}

static void
run(struct input *in)
{
	uint8_t pkt[INITIAL_MIN_DATAGRAM + INITIAL_MAX_TOKEN + 64];
	const uint8_t *data;
	size_t len;
	uint8_t op, v;

	for (int n = 0; n < MAX_OPS && in->left > 0; n++) {
		op = get8(in);
		switch (op % OP_COUNT) {
		case OP_FORGED_INITIAL:
			len = get8(in);
			len = getn(in, len | (size_t)get8(in) << 8, INITIAL_MIN_DATAGRAM,
			    &data);
			len = initial_protect(&forged_keys, forged_dcid,
			    sizeof forged_dcid, forged_scid, sizeof forged_scid,
			    forged_token, forged_tokenlen, forged_pn++, data,
			    len, pkt);
			assert(len > 0);
			deliver_to_server(pkt, len, false, true);
			pump();
			reap();
			break;
		case OP_FORGED_RAW:
			len = get8(in);
			len = getn(in, len | (size_t)get8(in) << 8, MAX_PKT, &data);
			deliver_to_server(data, len, false, true);
			pump();
			reap();
			break;
		case OP_CLIENT_START:
			client_start(get8(in));
			pump();
			break;
		case OP_PACKET:
			packet_op(in);
			break;
		case OP_FLUSH:
			flush();
			break;
		case OP_TIME:
			/* Up to 199 ms in steps of 1 ms, else whole seconds
			 * (past the 30 s idle timeout). */
			v = get8(in);
			advance(v < 200 ? v * NGTCP2_MILLISECONDS :
			    (uint64_t)(v - 199) * NGTCP2_SECONDS);
			break;
		case OP_NAT:
			nat = !nat;
			break;
		case OP_STREAM:
			stream_op(in);
			break;
		case OP_DATAGRAM:
			datagram_op(in);
			break;
		case OP_CLOSE:
			close_op(in);
			break;
		case OP_LOAD:
			load = get8(in);
			break;
		case OP_FORGED_TOKEN:
			forged_tokenlen = getn(in, get8(in), sizeof forged_token,
			    &data);
			memcpy(forged_token, data, forged_tokenlen);
			break;
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct end *ends[] = { &srv_real, &srv_forged, &cli };

	now_ns = CLOCK_START;
	nat = false;
	forged_pn = 0;
	forged_tokenlen = 0;
	saved_tokenlen = 0;
	load = 0;
	admit_init(&adm, RETRY_THRESHOLD, now_ns, NULL);
	ndgrams = 0;
	client_starts = 0;
	memset(dgram_seen, 0, sizeof dgram_seen);
	end_reset(&srv_real, "server", client_pub, false);
	end_reset(&srv_forged, "forged", client_pub, true);
	end_reset(&cli, "client", server_pub, false);
	free(saved_session);
	free(saved_params);
	saved_session = saved_params = NULL;
	pump();

	run(&in);

	assert(srv_forged.handshakes == 0);
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		quic_conn_free(ends[i]->qc);
		ends[i]->qc = NULL;
	}
	event_base_loop(base, EVLOOP_NONBLOCK);
	udp_batch_flush(&sbatch);
	udp_batch_flush(&cbatch);
	pump();
	queue_clear(&to_server);
	queue_clear(&to_client);
	free(saved_session);
	free(saved_params);
	saved_session = saved_params = NULL;
	return 0;
}

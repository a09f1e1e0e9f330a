/* Unit tests for common/transport/quic-tcp.c: a client and a server session over
 * TLS on a real TCP connection on 127.0.0.1, driven by the event loop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/clock.h"
#include "base/key.h"
#include "transport/quic.h"
#include "transport/tls.h"

#define WINDOW 32768

struct end {
	struct quic_conn *qc;
	const uint8_t *accept;   /* the key its pin check accepts */
	bool consume;            /* return flow-control credit at once */
	int handshakes, closed;
	struct quic_close_info ci;
	size_t rx;               /* stream bytes received */
	int64_t sid;
	bool fin;
	int resets, closes;
	uint64_t reset_code, close_code;
	size_t dgrams;
};

static struct event_base *base;
static uint8_t cpriv[KEY_LEN], spriv[KEY_LEN], cpub[KEY_LEN], spub[KEY_LEN];
static uint8_t other[KEY_LEN];
static struct end cl, sv;
/* Tickets the client got (want_tickets: it asks for them). */
static bool want_tickets;
static int tickets;

static int
count_ticket(WOLFSSL *ssl, WOLFSSL_SESSION *sess)
{
	(void)ssl;
	(void)sess;
	tickets++;
	return 0;
}

static bool
pin(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct end *e = arg;

	(void)qc;
	return memcmp(pub, e->accept, KEY_LEN) == 0;
}

static void
hs_done(struct quic_conn *qc, void *arg)
{
	(void)qc;
	((struct end *)arg)->handshakes++;
}

static int
data_cb(struct quic_conn *qc, int64_t sid, const uint8_t *d, size_t n,
    bool fin, void *sarg, void *arg)
{
	struct end *e = arg;

	(void)d;
	(void)sarg;
	e->rx += n;
	e->sid = sid;
	e->fin |= fin;
	if (e->consume)
		quic_conn_stream_consume(qc, sid, n);
	return 0;
}

static void
reset_cb(struct quic_conn *qc, int64_t sid, uint64_t code, void *sarg, void *arg)
{
	struct end *e = arg;

	(void)qc;
	(void)sid;
	(void)sarg;
	e->resets++;
	e->reset_code = code;
}

static void
close_cb(struct quic_conn *qc, int64_t sid, uint64_t code, void *sarg, void *arg)
{
	struct end *e = arg;

	(void)qc;
	(void)sid;
	(void)sarg;
	e->closes++;
	e->close_code = code;
}

static void
dgram_cb(struct quic_conn *qc, const uint8_t *d, size_t n, void *arg)
{
	(void)qc;
	(void)d;
	(void)n;
	((struct end *)arg)->dgrams++;
}

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *ci, void *arg)
{
	struct end *e = arg;

	(void)qc;
	e->closed++;
	e->ci = *ci;
}

static const struct quic_conn_cbs cbs = {
	.handshake_done = hs_done,
	.datagram = dgram_cb,
	.stream_data = data_cb,
	.stream_reset = reset_cb,
	.stream_close = close_cb,
	.closed = closed_cb,
};

/* Run the loop until `done` holds, for at most 5 s. */
static bool
run_until(bool (*done)(void))
{
	uint64_t end = clock_now() + 5000000000ull;

	while (!done()) {
		if (clock_now() > end)
			return false;
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		quic_write_dirty();
		usleep(200);
	}
	return true;
}

/* Run the loop for `ms` milliseconds: nothing more is to happen. */
static void
run_for(unsigned ms)
{
	uint64_t end = clock_now() + (uint64_t)ms * 1000000u;

	while (clock_now() < end) {
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		quic_write_dirty();
		usleep(200);
	}
}

static bool both_up(void) { return cl.handshakes == 1 && sv.handshakes == 1; }
static bool both_closed(void) { return cl.closed == 1 && sv.closed == 1; }
static bool cl_closed(void) { return cl.closed == 1; }

/* A listener on 127.0.0.1, a client session to it, and the server
 * session on the accepted connection; the server accepts `key`. */
static void
connect_pair(const uint8_t *server_accepts)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct quic_settings qs = {
		.idle_timeout_s = 30,
		.stream_window = WINDOW,
		.max_udp_payload = 1472,
	};
	socklen_t len = sizeof sin;
	WOLFSSL_CTX *cctx, *sctx;
	char *cause = NULL;
	int lfd, fd;

	memset(&cl, 0, sizeof cl);
	memset(&sv, 0, sizeof sv);
	cl.accept = spub;
	sv.accept = server_accepts;
	cl.consume = sv.consume = true;
	quic_set_pin_check(pin);
	cctx = tls_ctx_create_tcp(TLS_ROLE_CLIENT, cpriv, quic_tls_pin, &cause);
	sctx = tls_ctx_create_tcp(TLS_ROLE_SERVER, spriv, quic_tls_pin, &cause);
	assert_non_null(cctx);
	assert_non_null(sctx);
	if (want_tickets) {
		wolfSSL_CTX_UseSessionTicket(cctx);
		wolfSSL_CTX_sess_set_new_cb(cctx, count_ticket);
	}
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	qs.role = QUIC_ROLE_CLIENT;
	cl.qc = quic_tcp_client_create(base, &qs, &cbs, &cl, cctx,
	    (struct sockaddr *)&sin, sizeof sin, QUIC_TCP_DIRECT, NULL, &cause);
	assert_non_null(cl.qc);
	assert_true(quic_conn_is_tcp(cl.qc));
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	assert_true(fd >= 0);
	close(lfd);
	qs.role = QUIC_ROLE_SERVER;
	sv.qc = quic_tcp_server_create(base, &qs, &cbs, &sv, sctx, fd,
	    (struct sockaddr *)&sin, sizeof sin);
	/* Each session holds its own reference to the context. */
	wolfSSL_CTX_free(cctx);
	wolfSSL_CTX_free(sctx);
}

static void
free_pair(void)
{
	quic_conn_free(cl.qc);
	quic_conn_free(sv.qc);
	cl.qc = sv.qc = NULL;
}

static bool sv_got_all(void) { return sv.rx == 1000000 && sv.fin; }
static bool sv_all(void) { return sv.rx == 1000000 && sv.fin && sv.closes == 1 && cl.closes == 1; }

/* Handshake with pins both ways, a stream of 1 MB with FIN each way
 * closing cleanly, DATAGRAMs, and a clean close. */
static void
test_stream_and_close(void **state)
{
	static uint8_t buf[1000000];
	int64_t sid;

	(void)state;
	connect_pair(cpub);
	assert_true(run_until(both_up));
	assert_int_equal(quic_conn_state(cl.qc), QUIC_STATE_ESTABLISHED);
	assert_memory_equal(quic_conn_peer_key(sv.qc), cpub, KEY_LEN);
	sid = quic_conn_open_stream(cl.qc, NULL);
	assert_int_equal(sid, 0);
	assert_true(quic_conn_stream_is_local(cl.qc, sid));
	assert_false(quic_conn_stream_is_local(sv.qc, sid));
	assert_int_equal(quic_conn_stream_send(cl.qc, sid, buf, sizeof buf, true), 0);
	assert_true(run_until(sv_got_all));
	assert_int_equal(sv.sid, sid);
	/* The server answers with its own FIN once it has it all. */
	assert_int_equal(quic_conn_stream_send(sv.qc, sid, NULL, 0, true), 0);
	assert_true(run_until(sv_all));
	assert_int_equal(sv.close_code, 0);
	assert_int_equal(cl.close_code, 0);
	assert_int_equal(quic_conn_unacked(cl.qc), 0);
	/* DATAGRAMs: one whole each, no larger than QUIC would carry. */
	assert_int_equal(quic_conn_send_datagram(cl.qc, buf, 100), 0);
	assert_int_equal(quic_conn_send_datagram(cl.qc, buf,
	    quic_conn_dgram_max(cl.qc) + 1), -EMSGSIZE);
	run_for(50);
	assert_int_equal(sv.dgrams, 1);
	quic_conn_close(cl.qc, 0, "done");
	assert_true(run_until(both_closed));
	assert_true(sv.ci.remote);
	assert_false(sv.ci.transport);
	assert_int_equal(sv.ci.code, 0);
	assert_string_equal(sv.ci.reason, "done");
	free_pair();
}

/* A receiver that never consumes: the sender gets exactly one window
 * through and holds the rest; credit brings the rest. */
static void
test_flow_control(void **state)
{
	static uint8_t buf[4 * WINDOW];
	int64_t sid;

	(void)state;
	connect_pair(cpub);
	assert_true(run_until(both_up));
	sv.consume = false;
	sid = quic_conn_open_stream(cl.qc, NULL);
	assert_int_equal(quic_conn_stream_send(cl.qc, sid, buf, sizeof buf, false), 0);
	run_for(200);
	assert_int_equal(sv.rx, WINDOW);
	/* Bytes are kept until the server's reader consumes them, not
	 * only until they are written (qmux.h, consumed_step). */
	assert_int_equal(quic_conn_stream_unacked(cl.qc, sid), sizeof buf);
	/* Half a window consumed is when credit goes back. */
	quic_conn_stream_consume(sv.qc, sid, WINDOW / 2 + 1);
	run_for(200);
	assert_int_equal(sv.rx, WINDOW + WINDOW / 2 + 1);
	assert_int_equal(quic_conn_stream_unacked(cl.qc, sid),
	    sizeof buf - (WINDOW / 2 + 1));
	/* Everything received so far consumed: the rest flows, and what
	 * the reader took is reported at least every WINDOW / 8 bytes. */
	sv.consume = true;
	quic_conn_stream_consume(sv.qc, sid, WINDOW);
	run_for(300);
	assert_int_equal(sv.rx, sizeof buf);
	assert_true(quic_conn_stream_unacked(cl.qc, sid) < WINDOW / 8);
	free_pair();
}

static bool sv_reset(void) { return sv.resets == 1 && sv.closes == 1 && cl.closes == 1; }

/* A reset reaches the other side with its code, and closes the stream on
 * both sides with it. */
static void
test_reset(void **state)
{
	int64_t sid;

	(void)state;
	connect_pair(cpub);
	assert_true(run_until(both_up));
	sid = quic_conn_open_stream(cl.qc, NULL);
	assert_int_equal(quic_conn_stream_send(cl.qc, sid, (const uint8_t *)"x", 1,
	    false), 0);
	run_for(50);
	assert_int_equal(sv.rx, 1);
	quic_conn_stream_reset(cl.qc, sid, 0x107);
	assert_true(run_until(sv_reset));
	assert_int_equal(sv.reset_code, 0x107);
	assert_int_equal(sv.close_code, 0x107);
	assert_int_equal(cl.close_code, 0x107);
	/* Its sending side is over. */
	assert_int_equal(quic_conn_stream_send(cl.qc, sid, (const uint8_t *)"x", 1,
	    false), -1);
	free_pair();
}

/* A client key the server does not pin: the client hears a fatal TLS
 * alert, as over QUIC (0x100 + alert), and no session is established. */
static void
test_unknown_key(void **state)
{
	(void)state;
	connect_pair(other);
	assert_true(run_until(cl_closed));
	assert_int_equal(cl.handshakes, 0);
	assert_true(cl.ci.remote);
	assert_true(cl.ci.transport);
	assert_true(cl.ci.code > 0x100 && cl.ci.code < 0x200);
	run_for(50);
	assert_int_equal(sv.handshakes, 0);
	assert_int_equal(sv.closed, 1);
	assert_true(sv.ci.pin_mismatch);
	free_pair();
}

/* The TLS/TCP server issues no session ticket: a resumption would skip
 * the pin check (a peer removed by a reload could come back on its
 * ticket), and the TCP transport has neither rove's own ticket keys and
 * single-use register nor any need for 0-RTT. */
static void
test_no_tickets(void **state)
{
	static uint8_t data[4096];

	(void)state;
	want_tickets = true;
	tickets = 0;
	connect_pair(cpub);
	want_tickets = false;
	assert_true(run_until(both_up));
	assert_int_equal(quic_conn_open_stream(cl.qc, NULL), 0);
	assert_int_equal(quic_conn_stream_send(cl.qc, 0, data, sizeof data,
	    false), 0);
	quic_conn_write(cl.qc);
	run_for(300);
	assert_int_equal(sv.rx, sizeof data);
	assert_int_equal(tickets, 0);
	free_pair();
}

/* The peer's max_idle_timeout only ever shortens ours, and a huge one
 * (2^62 ms, which times 10^6 wrapped to almost nothing) leaves ours. */
static void
test_idle_timeout_params(void **state)
{
	const uint64_t ours = UINT64_C(30) * 1000000000u;

	(void)state;
	assert_int_equal(quic_tcp_idle_ns(ours, 0), ours);
	assert_int_equal(quic_tcp_idle_ns(ours, 10000), UINT64_C(10) * 1000000000u);
	assert_int_equal(quic_tcp_idle_ns(ours, 30000), ours);
	assert_int_equal(quic_tcp_idle_ns(ours, 60000), ours);
	assert_int_equal(quic_tcp_idle_ns(ours, UINT64_C(1) << 62), ours);
	assert_int_equal(quic_tcp_idle_ns(ours, UINT64_C(18446744073710)), ours);
	assert_int_equal(quic_tcp_idle_ns(ours, 1), 1000000u);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_and_close),
		cmocka_unit_test(test_flow_control),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_idle_timeout_params),
		cmocka_unit_test(test_no_tickets),
	};

	base = event_base_new();
	if (key_generate(cpriv) != 0 || key_generate(spriv) != 0 ||
	    key_generate(other) != 0 || key_public(cpriv, cpub) != 0 ||
	    key_public(spriv, spub) != 0)
		return 1;
	/* `other` is a private key, used here only as a key nobody pins. */
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for client/client.c: a real rove client (forward-only, no
 * TUN) against a minimal server of the test's own on 127.0.0.1, on the
 * real clock and one event loop. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "base/key.h"
#include "base/log.h"
#include "base/random.h"
#include "client/client.h"
#include "config/cfg.h"
#include "transport/quic.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "wire/proto.h"

/* What the server answers the CLIENT_HELLO with: text a hostile or broken
 * server could send, with a terminal escape (clear screen, red) and a
 * newline followed by a forged log line. */
#define EVIL_TEXT "no\x1b[2J\x1b[31m\nrove: connected (forward-only mode)\x7f\\"
#define EVIL_CODE 3

struct server {
	struct event_base *base;
	struct udp_socket sock;
	struct udp_batch batch;
	struct event *ev;
	WOLFSSL_CTX *ctx;
	struct quic_settings qs;
	uint8_t reset_secret[QUIC_RESET_SECRET_LEN];
	struct quic_conn *qc;
	bool answered;
};

struct fixture {
	char dir[64];
	char log[96];
	int saved_stderr;
	struct event_base *base;
	struct server srv;
	struct cfg cfg;
	struct client *client;
};

/* Both ends live in this process, and quic.c has one pin check for all
 * connections: client_create installs the client's, which would take the
 * server's connection for a client's. This one stands in for both: the
 * server takes any client key, the client only the server's. */
static const struct server *the_server;
static const uint8_t *pinned_server_key;

static bool
pin_both(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	(void)qc;
	return arg == the_server || memcmp(pub, pinned_server_key, KEY_LEN) == 0;
}

static int
srv_stream_data(struct quic_conn *qc, int64_t id, const uint8_t *data,
    size_t len, bool fin, void *sarg, void *arg)
{
	struct server *s = arg;
	struct proto_error e = { .code = EVIL_CODE };
	uint8_t msg[512];
	size_t n;

	(void)data;
	(void)fin;
	(void)sarg;
	quic_conn_stream_consume(qc, id, len);
	if (s->answered)
		return 0;
	/* Whatever the client said, answer with the ERROR. */
	s->answered = true;
	snprintf(e.text, sizeof e.text, "%s", EVIL_TEXT);
	n = proto_encode_error(msg, sizeof msg, &e);
	assert_true(n > 0);
	assert_int_equal(quic_conn_stream_send(qc, id, msg, n, false), 0);
	return 0;
}

static void
srv_closed(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	(void)qc;
	(void)info;
	(void)arg;
}

static const struct quic_conn_cbs srv_cbs = {
	.stream_data = srv_stream_data,
	.closed = srv_closed,
};

static void
srv_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static struct udp_recv r;
	struct server *s = arg;
	ngtcp2_pkt_hd hd;
	char *cause = NULL;

	(void)fd;
	(void)what;
	while (udp_recv(&s->sock, &r) == 1) {
		for (size_t off = 0; off < r.len; off += r.segsize) {
			size_t seg = r.len - off < r.segsize ? r.len - off : r.segsize;
			const struct sockaddr *from = (const struct sockaddr *)&r.peer;

			/* A handshake that failed leaves a closed connection;
			 * the client's next attempt gets a fresh one. */
			if (s->qc != NULL && quic_conn_state(s->qc) ==
			    QUIC_STATE_CLOSED && ngtcp2_accept(&hd, r.buf + off,
			    seg) == 0) {
				quic_conn_free(s->qc);
				s->qc = NULL;
			}
			if (s->qc == NULL) {
				if (ngtcp2_accept(&hd, r.buf + off, seg) != 0)
					continue;
				s->qc = quic_conn_server_create(s->base, &s->qs,
				    &srv_cbs, s, s->ctx, &s->batch, &hd, from,
				    r.peerlen, &cause);
				assert_non_null(s->qc);
			}
			quic_conn_read(s->qc, &s->sock, from, r.peerlen,
			    r.buf + off, seg, r.ecn);
		}
	}
	quic_write_dirty();
	udp_batch_flush(&s->batch);
}

static void
server_start(struct server *s, struct event_base *base,
    const uint8_t priv[static KEY_LEN])
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char *cause = NULL;

	s->base = base;
	assert_int_equal(udp_open(&s->sock, AF_INET, (struct sockaddr *)&lo,
	    sizeof lo, &cause), 0);
	udp_batch_init(&s->batch, &s->sock);
	s->ctx = tls_ctx_create(TLS_ROLE_SERVER, priv, quic_tls_pin, &cause);
	assert_non_null(s->ctx);
	random_bytes(s->reset_secret, sizeof s->reset_secret);
	s->qs = (struct quic_settings){
		.role = QUIC_ROLE_SERVER,
		.cc = NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = 30,
		.max_udp_payload = UDP_MAX_PAYLOAD,
		.stream_window = 65536,
		.reset_secret = s->reset_secret,
	};
	s->ev = event_new(base, s->sock.fd, EV_READ | EV_PERSIST, srv_read_cb, s);
	assert_non_null(s->ev);
	assert_int_equal(event_add(s->ev, NULL), 0);
}

static void
server_stop(struct server *s)
{
	if (s->qc != NULL)
		quic_conn_free(s->qc);
	if (s->ev != NULL)
		event_free(s->ev);
	if (s->ctx != NULL)
		wolfSSL_CTX_free(s->ctx);
	udp_close(&s->sock);
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	uint8_t spriv[KEY_LEN], spub[KEY_LEN], cpriv[KEY_LEN];
	char spub64[KEY_B64_LEN + 1], cpriv64[KEY_B64_LEN + 1], key[96];
	char *conf = NULL;
	struct cfg_errors errs = { 0 };
	struct sockaddr_in *sin;
	FILE *f;
	int fd;

	assert_non_null(fx);
	snprintf(fx->dir, sizeof fx->dir, "/tmp/rove-test-client.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	assert_int_equal(key_generate(spriv), 0);
	assert_int_equal(key_public(spriv, spub), 0);
	assert_int_equal(key_generate(cpriv), 0);
	key_encode(spub, spub64);
	key_encode(cpriv, cpriv64);
	snprintf(key, sizeof key, "%s/client.key", fx->dir);
	fd = open(key, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_non_null(f = fdopen(fd, "w"));
	fprintf(f, "%s\n", cpriv64);
	fclose(f);

	fx->base = event_base_new();
	assert_non_null(fx->base);
	server_start(&fx->srv, fx->base, spriv);
	sin = (struct sockaddr_in *)&fx->srv.sock.local;
	assert_true(asprintf(&conf, "[Client]\n"
	    "Server = 127.0.0.1:%u\n"
	    "ServerPublicKey = %s\n"
	    "PrivateKeyFile = %s\n"
	    "Tun = none\n"
	    "StateDir = %s/state\n"
	    "ControlSocket = %s/rove.sock\n",
	    ntohs(sin->sin_port), spub64, key, fx->dir, fx->dir) > 0);
	if (cfg_load_buffer("t.conf", conf, strlen(conf), CFG_ROLE_CLIENT,
	    &fx->cfg, &errs) != 0) {
		for (size_t i = 0; i < errs.n; i++)
			print_error("%s\n", errs.msg[i]);
		fail();
	}
	cfg_errors_clear(&errs);
	free(conf);

	/* What the client logs goes to a file of the test's. */
	snprintf(fx->log, sizeof fx->log, "%s/stderr", fx->dir);
	fd = open(fx->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	fx->saved_stderr = dup(STDERR_FILENO);
	assert_true(fx->saved_stderr >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
	log_open("rove", 0);
	*state = fx;
	return 0;
}

/* Put stderr back, show what was logged, remove the files. */
static int
teardown(void **state)
{
	struct fixture *fx = *state;
	char path[160], line[2048];
	FILE *f;

	client_free(fx->client);
	server_stop(&fx->srv);
	/* quic.c keeps a process-wide flush event on the base. */
	event_base_loop(fx->base, EVLOOP_NONBLOCK);
	event_base_free(fx->base);
	cfg_clear(&fx->cfg);
	fflush(stderr);
	dup2(fx->saved_stderr, STDERR_FILENO);
	close(fx->saved_stderr);
	if ((f = fopen(fx->log, "r")) != NULL) {
		while (fgets(line, sizeof line, f) != NULL)
			print_message("logged: %s", line);
		fclose(f);
	}
	unlink(fx->log);
	snprintf(path, sizeof path, "%s/client.key", fx->dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/rove.sock", fx->dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/state", fx->dir);
	rmdir(path);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

/* The whole of what the client has logged so far (static buffer). */
static const char *
logged(const struct fixture *fx)
{
	static char buf[8192];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	if ((fd = open(fx->log, O_RDONLY)) == -1)
		return buf;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

struct waiter {
	struct fixture *fx;
	const char *needle;
	struct event *ev;
};

static void
poll_log_cb(evutil_socket_t fd, short what, void *arg)
{
	struct waiter *w = arg;
	struct timeval tv = { 0, 20000 };

	(void)fd;
	(void)what;
	if (strstr(logged(w->fx), w->needle) != NULL)
		event_base_loopbreak(w->fx->base);
	else
		evtimer_add(w->ev, &tv);
}

/* Run the loop until the log holds `needle`, for at most 10 s. */
static void
run_until_logged(struct fixture *fx, const char *needle)
{
	struct waiter w = { fx, needle, NULL };
	struct timeval tv = { 0, 20000 }, limit = { 10, 0 };

	w.ev = evtimer_new(fx->base, poll_log_cb, &w);
	assert_non_null(w.ev);
	evtimer_add(w.ev, &tv);
	event_base_loopexit(fx->base, &limit);
	event_base_dispatch(fx->base);
	event_free(w.ev);
}

/* The server's ERROR text reaches the log escaped, on one line: no
 * terminal escape, no forged line. */
static void
test_error_text_escaped(void **state)
{
	struct fixture *fx = *state;
	char *cause = NULL;
	const char *log;

	fx->client = client_create(fx->base, &fx->cfg, 0, &cause);
	assert_non_null(fx->client);
	the_server = &fx->srv;
	pinned_server_key = fx->cfg.server_pubkey;
	quic_set_pin_check(pin_both);
	run_until_logged(fx, "forward-only mode");
	assert_true(fx->srv.answered);
	log = logged(fx);
	assert_non_null(strstr(log,
	    "rove: error: server error 3: no\\x1b[2J\\x1b[31m\\x0arove: "
	    "connected (forward-only mode)\\x7f\\x5c\n"));
	assert_null(strchr(log, '\x1b'));
	assert_null(strchr(log, '\x7f'));
	assert_null(strstr(log, "\nrove: connected"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_error_text_escaped, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

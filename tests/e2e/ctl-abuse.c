/* ctl-abuse: a configured peer that abuses its control stream, for
 * test-ctl-abuse.sh.
 *
 * usage: ctl-abuse [-n REQUESTS] [-t SECONDS] [-w WINDOW] KEYFILE
 *        SERVER_PUBKEY ADDR:PORT
 *
 * Connects to roved at ADDR:PORT (inside 198.18.0.0/15) with the private
 * key in KEYFILE, sends its CLIENT_HELLO, then REQUESTS REMOTE_FORWARD
 * requests (default 100000) as fast as the connection takes them, and
 * never reads a reply: its control stream's flow-control window is WINDOW
 * bytes (default 4096) and is never widened. Prints one line and exits 0
 * when roved closes the connection ("closed by server: code N"), 1 when
 * SECONDS (default 20) pass first or the connection fails otherwise.
 */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <arpa/inet.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/key.h"
#include "base/random.h"
#include "transport/quic.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "wire/proto-fwd.h"
#include "wire/proto.h"

struct abuser {
	struct event_base *base;
	struct quic_conn *qc;
	struct udp_socket sock;
	struct udp_batch batch;
	uint8_t server_pub[KEY_LEN];
	unsigned long requests, sent;
	int64_t ctl;
	bool closed, by_server;
	uint64_t code;
	char reason[sizeof ((struct quic_close_info *)0)->reason];
};

static struct abuser ab;

static bool
pin(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	(void)qc;
	(void)arg;
	return memcmp(pub, ab.server_pub, KEY_LEN) == 0;
}

/* Queue requests while the stream takes them; ngtcp2 sends as the
 * server's window allows, and we keep what it has not yet acknowledged. */
static void
send_requests(void)
{
	uint8_t buf[64];
	size_t n;

	while (ab.sent < ab.requests &&
	    quic_conn_stream_unacked(ab.qc, ab.ctl) < 65536) {
		struct proto_remote_forward rf = {
			.port = (uint16_t)(1024 + ab.sent % 60000),
		};

		n = proto_fwd_remote_encode(buf, sizeof buf, PROTO_MSG_REMOTE_FORWARD,
		    &rf);
		if (n == 0 || quic_conn_stream_send(ab.qc, ab.ctl, buf, n, false) != 0)
			return;
		ab.sent++;
	}
}

static void
handshake_done(struct quic_conn *qc, void *arg)
{
	struct proto_client_hello hello = { .version = PROTO_VERSION };
	uint8_t buf[64];
	size_t n;

	(void)arg;
	ab.ctl = quic_conn_open_stream(qc, &ab);
	n = proto_encode_client_hello(buf, sizeof buf, &hello);
	if (ab.ctl < 0 || n == 0 ||
	    quic_conn_stream_send(qc, ab.ctl, buf, n, false) != 0) {
		fprintf(stderr, "ctl-abuse: cannot open the control stream\n");
		exit(1);
	}
	send_requests();
}

/* Replies arrive and are dropped on the floor: the credit for them is
 * never returned (no quic_conn_stream_consume). */
static int
stream_data(struct quic_conn *qc, int64_t sid, const uint8_t *data, size_t len,
    bool fin, void *sarg, void *arg)
{
	(void)qc;
	(void)sid;
	(void)data;
	(void)len;
	(void)fin;
	(void)sarg;
	(void)arg;
	return 0;
}

static void
acked(struct quic_conn *qc, int64_t sid, void *sarg, void *arg)
{
	(void)qc;
	(void)sid;
	(void)sarg;
	(void)arg;
	send_requests();
}

static void
closed(struct quic_conn *qc, const struct quic_close_info *ci, void *arg)
{
	(void)qc;
	(void)arg;
	ab.closed = true;
	ab.by_server = ci->remote;
	ab.code = ci->code;
	snprintf(ab.reason, sizeof ab.reason, "%s", ci->reason);
	event_base_loopbreak(ab.base);
}

static const struct quic_conn_cbs cbs = {
	.handshake_done = handshake_done,
	.stream_data = stream_data,
	.stream_acked = acked,
	.closed = closed,
};

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	static struct udp_recv r;

	(void)fd;
	(void)what;
	(void)arg;
	while (!ab.closed && udp_recv(&ab.sock, &r) == 1) {
		for (size_t off = 0; off < r.len && !ab.closed; off += r.segsize) {
			size_t seg = r.len - off < r.segsize ? r.len - off : r.segsize;

			quic_conn_read(ab.qc, &ab.sock, (struct sockaddr *)&r.peer,
			    r.peerlen, r.buf + off, seg, r.ecn);
		}
	}
	quic_write_dirty();
}

static void
usage(void)
{
	fprintf(stderr, "usage: ctl-abuse [-n REQUESTS] [-t SECONDS] [-w WINDOW] "
	    "KEYFILE SERVER_PUBKEY ADDR:PORT\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	uint8_t priv[KEY_LEN], reset[QUIC_RESET_SECRET_LEN];
	struct sockaddr_storage dst;
	struct prefix test_net;
	struct ipaddr ip;
	struct quic_settings qs;
	struct timeval limit;
	struct event *rev;
	WOLFSSL_CTX *ctx;
	socklen_t dstlen;
	char *cause = NULL;
	unsigned long window = 4096;
	int secs = 20, c;
	uint16_t port;

	ab.requests = 100000;
	while ((c = getopt(argc, argv, "n:t:w:")) != -1) {
		switch (c) {
		case 'n': ab.requests = strtoul(optarg, NULL, 10); break;
		case 't': secs = atoi(optarg); break;
		case 'w': window = strtoul(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (argc - optind != 3 || secs <= 0 || window < 1024)
		usage();
	if (key_load_private(argv[optind], priv, &cause) != 0 ||
	    key_decode(argv[optind + 1], ab.server_pub) != 0) {
		fprintf(stderr, "ctl-abuse: %s\n", cause != NULL ? cause : "bad key");
		return 2;
	}
	/* Only the test's own network: this program is a load generator. */
	addr_parse_prefix("198.18.0.0/15", &test_net, false);
	dstlen = sizeof dst;
	if (addr_parse_sockaddr(argv[optind + 2], &dst, &dstlen) != 0 ||
	    addr_from_sockaddr((struct sockaddr *)&dst, &ip, &port) != 0 ||
	    !addr_prefix_contains(&test_net, &ip)) {
		fprintf(stderr, "ctl-abuse: %s: not an address in 198.18.0.0/15\n",
		    argv[optind + 2]);
		return 2;
	}
	wolfSSL_Init();
	quic_set_pin_check(pin);
	ctx = tls_ctx_create(TLS_ROLE_CLIENT, priv, quic_tls_pin, &cause);
	explicit_bzero(priv, sizeof priv);
	if (ctx == NULL || udp_open(&ab.sock, AF_INET, NULL, 0, &cause) != 0) {
		fprintf(stderr, "ctl-abuse: %s\n", cause);
		return 1;
	}
	udp_batch_init(&ab.batch, &ab.sock);
	ab.base = event_base_new();
	random_bytes(reset, sizeof reset);
	memset(&qs, 0, sizeof qs);
	qs.role = QUIC_ROLE_CLIENT;
	qs.cc = NGTCP2_CC_ALGO_BBR;
	qs.idle_timeout_s = 30;
	qs.max_udp_payload = UDP_MAX_PAYLOAD;
	qs.stream_window = window;
	qs.reset_secret = reset;
	ab.qc = quic_conn_client_create(ab.base, &qs, &cbs, &ab, ctx, &ab.batch,
	    (struct sockaddr *)&dst, dstlen, NULL, &cause);
	if (ab.qc == NULL) {
		fprintf(stderr, "ctl-abuse: %s\n", cause);
		return 1;
	}
	rev = event_new(ab.base, ab.sock.fd, EV_READ | EV_PERSIST, read_cb, NULL);
	event_add(rev, NULL);
	limit.tv_sec = secs;
	limit.tv_usec = 0;
	quic_conn_write(ab.qc);
	udp_batch_flush(&ab.batch);
	event_base_loopexit(ab.base, &limit);
	event_base_dispatch(ab.base);
	if (ab.closed && ab.by_server) {
		printf("closed by server: code %llu (%s) after %lu requests\n",
		    (unsigned long long)ab.code, ab.reason, ab.sent);
		return 0;
	}
	printf("%s after %lu requests%s%s\n", ab.closed ? "closed" :
	    "still connected", ab.sent, ab.closed ? ": " : "",
	    ab.closed ? ab.reason : "");
	return 1;
}

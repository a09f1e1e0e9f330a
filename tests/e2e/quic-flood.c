/* quic-flood: a client that opens handshakes and never finishes them. It
 * sends roved valid QUIC v1 Initials, each the first flight of a fresh
 * connection, as fast as one sender can, and never reads an answer: the
 * load that address validation and handshake limits must absorb.
 *
 * usage: quic-flood -n COUNT [-t SECONDS] [-b BATCH] [-S PREFIX/LEN]
 *                   [-i FILE | -o FILE] ADDR:PORT
 *
 * First builds COUNT Initials, each from its own ngtcp2 client connection
 * with random destination and source connection IDs and a real ClientHello
 * (ALPN rove/1, the TLS context rove itself uses, with a throwaway key), as
 * rove's own client would send it: at least 1200 bytes, padded by ngtcp2.
 * Every packet is checked with ngtcp2_accept, the server's own test for a
 * first packet. Building runs on every CPU. Then sends them with sendmmsg
 * in batches of BATCH (default 64, at most 1024):
 *  - by default from one UDP socket connected to ADDR:PORT, so all of them
 *    come from one source address and port;
 *  - with -S, from a raw socket (IP_HDRINCL) that writes each packet's IPv4
 *    and UDP headers itself, with a source address drawn at random from
 *    PREFIX/LEN and a random source port. Needs CAP_NET_RAW.
 * So that it can only ever load the test networks, ADDR must lie in
 * 198.18.0.0/15 or fd00::/8, and PREFIX inside 198.18.0.0/15 (-S is IPv4
 * only).
 *
 * Building costs far more than sending, so a run can keep what it built:
 * -o FILE builds COUNT Initials, writes them to FILE and sends nothing;
 * -i FILE sends the first COUNT Initials of FILE instead of building any.
 * (A server that never saw them cannot tell them from new ones.)
 *
 * Stops after COUNT packets or SECONDS (default 10, from the start,
 * building included), whichever comes first. Prints "sending COUNT" on
 * stderr once the packets are ready (a script starts its measurement
 * there) and "sent ..." when done, then one JSON object on stdout: mode,
 * packets built (or loaded) and the seconds that took, the mean size of
 * the Initials, packets sent, the seconds sending took, packets/s, send
 * errors and whether the time limit cut it short. Exits 0 if every packet
 * was sent (with -o: built), 1 if not, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

#include "base/addr.h"
#include "base/key.h"
#include "base/random.h"
#include "transport/tls.h"
#include "wire/proto.h"
#include "wire/ippkt.h"

#define MAX_COUNT 1000000
#define MAX_BATCH 1024
#define MAX_SECONDS 600
#define CID_LEN 16           /* what rove's client uses */
#define PKT_MAX 1452         /* an Ethernet path's UDP payload over IPv4 */
#define IP_UDP_HDR 28
#define SOCKBUF (4 * 1024 * 1024)
#define MAX_BUILDERS 16  /* builder threads: one per CPU, at most this */

struct pkt {
	uint16_t len;    /* the Initial's; with -S, the headers' once added */
	uint8_t *data;   /* its slot: for -S, IPv4 + UDP headers first */
};

/* What one throwaway client connection needs while it writes its Initial. */
struct gen {
	ngtcp2_crypto_conn_ref ref;
	ngtcp2_conn *conn;
};

/* Random bytes for IDs, addresses and ports: getrandom(2) is safe from
 * every builder thread at once (rove's random_bytes is not). */
static void
fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len > 0) {
		n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "quic-flood: getrandom: %s\n", strerror(errno));
			exit(1);
		}
		p += n;
		len -= (size_t)n;
	}
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
usage(void)
{
	fprintf(stderr, "usage: quic-flood -n COUNT [-t SECONDS] [-b BATCH] "
	    "[-S PREFIX/LEN]\n"
	    "                  [-i FILE | -o FILE] ADDR:PORT\n");
	exit(2);
}

static bool
num_arg(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* The addresses this tool may ever send to, or pretend to come from. */
static bool
in_test_net(const struct ipaddr *a)
{
	struct prefix p;

	if (a->family == AF_INET) {
		addr_parse_prefix("198.18.0.0/15", &p, false);
		return addr_prefix_contains(&p, a);
	}
	addr_parse_prefix("fd00::/8", &p, false);
	return addr_prefix_contains(&p, a);
}

static ngtcp2_conn *
get_conn(ngtcp2_crypto_conn_ref *ref)
{
	return ((struct gen *)ref->user_data)->conn;
}

static void
rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	fill_random(dest, len);
}

static int
new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
    void *user_data)
{
	(void)conn;
	(void)user_data;
	fill_random(cid->data, cidlen);
	cid->datalen = cidlen;
	fill_random(token, NGTCP2_STATELESS_RESET_TOKENLEN);
	return 0;
}

/* The handshake never gets far enough to check the server's key. */
static bool
pin_never(WOLFSSL *ssl, const uint8_t pub[static KEY_LEN])
{
	(void)ssl;
	(void)pub;
	return false;
}

/* Write the first Initial of a new client connection into buf; returns its
 * length, or -1 with a message on stderr. */
static ssize_t
make_initial(WOLFSSL_CTX *ctx, const ngtcp2_path *path, uint8_t *buf, size_t len)
{
	ngtcp2_callbacks cb = {
		.client_initial = ngtcp2_crypto_client_initial_cb,
		.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
		.encrypt = ngtcp2_crypto_encrypt_cb,
		.decrypt = ngtcp2_crypto_decrypt_cb,
		.hp_mask = ngtcp2_crypto_hp_mask_cb,
		.recv_retry = ngtcp2_crypto_recv_retry_cb,
		.rand = rand_cb,
		.get_new_connection_id = new_cid_cb,
		.update_key = ngtcp2_crypto_update_key_cb,
		.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
		.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
		.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
		.version_negotiation = ngtcp2_crypto_version_negotiation_cb,
	};
	ngtcp2_settings settings;
	ngtcp2_transport_params params;
	ngtcp2_pkt_info pi;
	ngtcp2_pkt_hd hd;
	ngtcp2_cid dcid, scid;
	struct gen g = { .ref = { get_conn, &g } };
	WOLFSSL *ssl;
	ngtcp2_ssize n;
	int rv;

	ngtcp2_settings_default(&settings);
	settings.initial_ts = now_ns();
	/* The transport parameters rove's client offers (common/transport/quic-udp.c), so
	 * that the ClientHello is the size and shape of a real one. */
	ngtcp2_transport_params_default(&params);
	params.initial_max_data = 16 * 1024 * 1024;
	params.initial_max_stream_data_bidi_local = 1024 * 1024;
	params.initial_max_stream_data_bidi_remote = 1024 * 1024;
	params.initial_max_streams_bidi = 256;
	params.max_idle_timeout = 120 * NGTCP2_SECONDS;
	params.active_connection_id_limit = 8;
	params.max_datagram_frame_size = 65535;
	params.max_udp_payload_size = PKT_MAX;
	dcid.datalen = CID_LEN;
	fill_random(dcid.data, dcid.datalen);
	scid.datalen = CID_LEN;
	fill_random(scid.data, scid.datalen);
	rv = ngtcp2_conn_client_new(&g.conn, &dcid, &scid, path, NGTCP2_PROTO_VER_V1,
	    &cb, &settings, &params, NULL, &g);
	if (rv != 0) {
		fprintf(stderr, "quic-flood: ngtcp2_conn_client_new: %s\n",
		    ngtcp2_strerror(rv));
		return -1;
	}
	ssl = tls_session_create(ctx, TLS_ROLE_CLIENT, &g.ref, PROTO_ALPN);
	ngtcp2_conn_set_tls_native_handle(g.conn, ssl);
	n = ngtcp2_conn_write_pkt(g.conn, NULL, &pi, buf, len, now_ns());
	ngtcp2_conn_del(g.conn);
	wolfSSL_free(ssl);
	if (n < 0) {
		fprintf(stderr, "quic-flood: ngtcp2_conn_write_pkt: %s\n",
		    ngtcp2_strerror((int)n));
		return -1;
	}
	/* The server's own test: a packet it would not start a connection
	 * for would measure nothing. */
	if (n < 1200 || ngtcp2_accept(&hd, buf, (size_t)n) != 0 ||
	    hd.type != NGTCP2_PKT_INITIAL) {
		fprintf(stderr, "quic-flood: built a packet (%zd bytes) that "
		    "ngtcp2_accept refuses\n", n);
		return -1;
	}
	return n;
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* A random host inside `src` (neither its network nor, for /30 and
 * wider, its broadcast address). */
static void
random_source(const struct prefix *src, uint8_t out[static 4])
{
	uint32_t net, host, hostmask, r;

	net = (uint32_t)src->addr.b[0] << 24 | (uint32_t)src->addr.b[1] << 16 |
	    (uint32_t)src->addr.b[2] << 8 | src->addr.b[3];
	hostmask = src->len == 0 ? UINT32_MAX :
	    (src->len >= 32 ? 0 : (UINT32_MAX >> src->len));
	do {
		fill_random((uint8_t *)&r, sizeof r);
		host = r & hostmask;
	} while (hostmask >= 3 && (host == 0 || host == hostmask));
	net = (net & ~hostmask) | host;
	out[0] = (uint8_t)(net >> 24);
	out[1] = (uint8_t)(net >> 16);
	out[2] = (uint8_t)(net >> 8);
	out[3] = (uint8_t)net;
}

/* Put IPv4 and UDP headers in front of the Initial at p + IP_UDP_HDR; the
 * UDP checksum is computed, so the packet is one a host would accept. */
static void
add_headers(uint8_t *p, size_t qlen, const uint8_t src[static 4], uint16_t sport,
    const struct sockaddr_in *dst)
{
	uint8_t *udp = p + 20;
	uint8_t pseudo[12];
	uint16_t id, sum;
	size_t ulen = 8 + qlen;

	memset(p, 0, IP_UDP_HDR);
	p[0] = 0x45;
	put16(p + 2, (uint16_t)(20 + ulen));
	fill_random((uint8_t *)&id, sizeof id);
	put16(p + 4, id);
	p[6] = 0x40;                     /* DF, as a Linux UDP socket sends */
	p[8] = 64;
	p[9] = IPPROTO_UDP;
	memcpy(p + 12, src, 4);
	memcpy(p + 16, &dst->sin_addr, 4);
	put16(p + 10, ippkt_checksum(p, 20, 0));

	put16(udp, sport);
	memcpy(udp + 2, &dst->sin_port, 2);
	put16(udp + 4, (uint16_t)ulen);
	memcpy(pseudo, p + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_UDP;
	put16(pseudo + 10, (uint16_t)ulen);
	sum = ippkt_checksum(udp, ulen,
	    (uint16_t)~ippkt_checksum(pseudo, sizeof pseudo, 0));
	put16(udp + 6, sum == 0 ? 0xffff : sum);
}

static int
open_socket(bool spoof, const struct sockaddr_storage *dst, socklen_t dstlen,
    struct sockaddr_storage *local, socklen_t *locallen)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
	int size = SOCKBUF, fd;

	fd = spoof ? socket(AF_INET, SOCK_RAW, IPPROTO_RAW) :
	    socket(dst->ss_family, SOCK_DGRAM, 0);
	if (fd == -1) {
		fprintf(stderr, "quic-flood: socket: %s\n", strerror(errno));
		return -1;
	}
	/* A full send buffer makes sendmmsg wait; the timeout lets the loop
	 * look at the clock in between. */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) == -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
	if (spoof) {
		/* The kernel only routes: the headers are ours. */
		memset(local, 0, sizeof *local);
		local->ss_family = AF_INET;
		*locallen = sizeof(struct sockaddr_in);
		return fd;
	}
	/* Nothing is ever read: no receive buffer worth keeping. */
	size = 4096;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
	if (connect(fd, (const struct sockaddr *)dst, dstlen) == -1) {
		fprintf(stderr, "quic-flood: connect: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	*locallen = sizeof *local;
	if (getsockname(fd, (struct sockaddr *)local, locallen) == -1) {
		fprintf(stderr, "quic-flood: getsockname: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One builder thread's share: packets [from, to) of the array. */
struct builder {
	pthread_t thread;
	WOLFSSL_CTX *ctx;
	const ngtcp2_path *path;
	struct pkt *pkts;
	uint8_t *slab;                    /* SLOT bytes per packet */
	size_t off;                       /* room for our own headers */
	size_t from, to, built;
	uint64_t deadline;
	bool failed, timed_out;
};

/* Each packet's place in the slab: headers (with -S), then the Initial. */
#define SLOT (IP_UDP_HDR + PKT_MAX)

static void *
build(void *arg)
{
	struct builder *b = arg;

	for (size_t i = b->from; i < b->to; i++) {
		uint8_t *p = b->slab + i * SLOT;
		ssize_t n;

		if ((n = make_initial(b->ctx, b->path, p + b->off, PKT_MAX)) < 0) {
			b->failed = true;
			break;
		}
		b->pkts[i].data = p;
		b->pkts[i].len = (uint16_t)n;
		b->built++;
		if ((b->built & 63) == 0 && now_ns() >= b->deadline) {
			b->timed_out = true;
			break;
		}
	}
	return NULL;
}

/* A client context like rove's, with the key `priv`: one per builder
 * thread, since wolfSSL is built single-threaded (scripts/deps.sh) and a
 * context's RNG serves every TLS object made from it. */
static WOLFSSL_CTX *
client_ctx(const uint8_t priv[static KEY_LEN])
{
	WOLFSSL_CTX *ctx;
	char *cause = NULL;

	ctx = tls_ctx_create(TLS_ROLE_CLIENT, priv, pin_never, &cause);
	if (ctx == NULL) {
		fprintf(stderr, "quic-flood: %s\n", cause);
		exit(1);
	}
	/* rove's client asks for tickets, which shows in its ClientHello. */
	tls_ctx_enable_resumption(ctx, TLS_ROLE_CLIENT, false);
	return ctx;
}

/* Build `count` Initials on every CPU (a TLS client and its key share per
 * packet cost far more than sending it), each thread with a context of
 * its own. Returns how many were built; fewer only when the deadline
 * stopped it (*timed_out). */
static size_t
build_all(const uint8_t priv[static KEY_LEN], const ngtcp2_path *path,
    struct pkt *pkts, uint8_t *slab, size_t off, size_t count,
    uint64_t deadline, bool *timed_out)
{
	static struct builder builders[MAX_BUILDERS];
	size_t built = 0;
	long n;

	n = sysconf(_SC_NPROCESSORS_ONLN);
	n = n < 1 ? 1 : n > MAX_BUILDERS ? MAX_BUILDERS : n;
	if ((size_t)n > count)
		n = (long)count;
	for (long i = 0; i < n; i++) {
		struct builder *b = &builders[i];

		b->ctx = client_ctx(priv);
		b->path = path;
		b->pkts = pkts;
		b->slab = slab;
		b->off = off;
		b->from = count * (size_t)i / (size_t)n;
		b->to = count * (size_t)(i + 1) / (size_t)n;
		b->deadline = deadline;
		if (pthread_create(&b->thread, NULL, build, b) != 0) {
			fprintf(stderr, "quic-flood: cannot start a builder thread\n");
			exit(1);
		}
	}
	/* Gaps left by a builder the clock stopped are closed up. */
	for (long i = 0; i < n; i++) {
		struct builder *b = &builders[i];

		pthread_join(b->thread, NULL);
		wolfSSL_CTX_free(b->ctx);
		if (b->failed)
			exit(1);
		*timed_out |= b->timed_out;
		memmove(&pkts[built], &pkts[b->from], b->built * sizeof *pkts);
		built += b->built;
	}
	return built;
}

/* -o: the Initials alone, each as a 2-byte big-endian length and its
 * bytes. */
static void
save(const char *file, const struct pkt *pkts, size_t n, size_t off)
{
	FILE *f = fopen(file, "w");
	uint8_t len[2];

	if (f == NULL) {
		fprintf(stderr, "quic-flood: %s: %s\n", file, strerror(errno));
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		put16(len, pkts[i].len);
		if (fwrite(len, 2, 1, f) != 1 ||
		    fwrite(pkts[i].data + off, pkts[i].len, 1, f) != 1)
			break;
	}
	if (ferror(f) || fclose(f) != 0) {
		fprintf(stderr, "quic-flood: cannot write %s\n", file);
		exit(1);
	}
}

/* -i: the first `count` Initials of a file -o wrote, each checked again
 * with ngtcp2_accept. */
static size_t
load(const char *file, struct pkt *pkts, uint8_t *slab, size_t off, size_t count)
{
	FILE *f = fopen(file, "r");
	ngtcp2_pkt_hd hd;
	uint8_t len[2];
	size_t n;

	if (f == NULL) {
		fprintf(stderr, "quic-flood: %s: %s\n", file, strerror(errno));
		exit(1);
	}
	for (n = 0; n < count && fread(len, 2, 1, f) == 1; n++) {
		uint8_t *p = slab + n * SLOT;
		size_t l = (size_t)len[0] << 8 | len[1];

		if (l < 1200 || l > PKT_MAX || fread(p + off, l, 1, f) != 1 ||
		    ngtcp2_accept(&hd, p + off, l) != 0) {
			fprintf(stderr, "quic-flood: %s: packet %zu is not an "
			    "Initial\n", file, n);
			exit(1);
		}
		pkts[n].data = p;
		pkts[n].len = (uint16_t)l;
	}
	fclose(f);
	if (n < count) {
		fprintf(stderr, "quic-flood: %s holds only %zu Initials\n", file, n);
		exit(1);
	}
	return n;
}

int
main(int argc, char **argv)
{
	static struct mmsghdr msgs[MAX_BATCH];
	static struct iovec iovs[MAX_BATCH];
	struct sockaddr_storage dst, local;
	socklen_t dstlen, locallen;
	struct prefix spoof_net, test_net;
	uint8_t priv[KEY_LEN], src[4];
	struct ipaddr dst_ip;
	uint16_t dst_port, sport;
	struct pkt *pkts;
	uint8_t *slab;
	ngtcp2_path path;
	const char *in = NULL, *out = NULL;
	long count = 0, secs = 10, batch = 64;
	bool spoof = false, timed_out = false;
	uint64_t start, deadline, send_start, send_end, bytes = 0;
	size_t built = 0, sent = 0, errors = 0, off;
	int c, fd = -1, last_errno = 0;

	while ((c = getopt(argc, argv, "n:t:b:S:i:o:")) != -1) {
		switch (c) {
		case 'n':
			if (!num_arg(optarg, 1, MAX_COUNT, &count))
				usage();
			break;
		case 't':
			if (!num_arg(optarg, 1, MAX_SECONDS, &secs))
				usage();
			break;
		case 'b':
			if (!num_arg(optarg, 1, MAX_BATCH, &batch))
				usage();
			break;
		case 'S':
			if (addr_parse_prefix(optarg, &spoof_net, false) != 0) {
				fprintf(stderr, "quic-flood: -S %s: not a prefix "
				    "(host bits must be zero)\n", optarg);
				exit(2);
			}
			spoof = true;
			break;
		case 'i':
			in = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		default:
			usage();
		}
	}
	if (count == 0 || argc - optind != 1 || (in != NULL && out != NULL))
		usage();
	if (addr_parse_sockaddr(argv[optind], &dst, &dstlen) != 0 ||
	    addr_from_sockaddr((struct sockaddr *)&dst, &dst_ip, &dst_port) != 0) {
		fprintf(stderr, "quic-flood: %s: not a numeric ADDR:PORT\n", argv[optind]);
		exit(2);
	}
	if (!in_test_net(&dst_ip)) {
		fprintf(stderr, "quic-flood: %s: refusing a target outside "
		    "198.18.0.0/15 and fd00::/8\n", argv[optind]);
		exit(2);
	}
	if (spoof) {
		addr_parse_prefix("198.18.0.0/15", &test_net, false);
		if (spoof_net.addr.family != AF_INET || spoof_net.len < test_net.len ||
		    !addr_prefix_contains(&test_net, &spoof_net.addr)) {
			fprintf(stderr, "quic-flood: -S: the prefix must lie inside "
			    "198.18.0.0/15\n");
			exit(2);
		}
		if (dst.ss_family != AF_INET) {
			fprintf(stderr, "quic-flood: -S needs an IPv4 target\n");
			exit(2);
		}
	}

	start = now_ns();
	deadline = start + (uint64_t)secs * 1000000000u;
	pkts = calloc((size_t)count, sizeof *pkts);
	slab = malloc((size_t)count * SLOT);
	if (pkts == NULL || slab == NULL) {
		fprintf(stderr, "quic-flood: out of memory\n");
		exit(1);
	}
	off = spoof ? IP_UDP_HDR : 0;
	if (out == NULL && (fd = open_socket(spoof, &dst, dstlen, &local,
	    &locallen)) == -1)
		exit(1);
	if (in != NULL)
		built = load(in, pkts, slab, off, (size_t)count);
	else {
		wolfSSL_Init();
		fill_random(priv, sizeof priv);
		/* The addresses only name the path to ngtcp2; none of them
		 * goes into the packet. */
		if (out != NULL) {
			memset(&local, 0, sizeof local);
			local.ss_family = dst.ss_family;
			locallen = dstlen;
		}
		path.local.addr = (ngtcp2_sockaddr *)&local;
		path.local.addrlen = locallen;
		path.remote.addr = (ngtcp2_sockaddr *)&dst;
		path.remote.addrlen = dstlen;
		path.user_data = NULL;
		built = build_all(priv, &path, pkts, slab, off, (size_t)count,
		    deadline, &timed_out);
		explicit_bzero(priv, sizeof priv);
	}
	for (size_t i = 0; i < built; i++)
		bytes += pkts[i].len;
	if (out != NULL) {
		save(out, pkts, built, off);
		printf("{\"built\": %zu, \"build_seconds\": %.3f, \"timed_out\": %s}\n",
		    built, (double)(now_ns() - start) / 1e9,
		    timed_out ? "true" : "false");
		return built == (size_t)count ? 0 : 1;
	}
	if (spoof) {
		for (size_t i = 0; i < built; i++) {
			random_source(&spoof_net, src);
			fill_random(&sport, sizeof sport);
			sport = (uint16_t)(1024 + sport % (65536 - 1024));
			add_headers(pkts[i].data, pkts[i].len, src, sport,
			    (const struct sockaddr_in *)&dst);
			pkts[i].len = (uint16_t)(pkts[i].len + IP_UDP_HDR);
		}
	}

	send_start = now_ns();
	fprintf(stderr, "sending %zu\n", built);
	fflush(stderr);
	while (sent < built && !timed_out) {
		size_t n = built - sent < (size_t)batch ? built - sent : (size_t)batch;
		int rv;

		for (size_t i = 0; i < n; i++) {
			iovs[i].iov_base = pkts[sent + i].data;
			iovs[i].iov_len = pkts[sent + i].len;
			memset(&msgs[i], 0, sizeof msgs[i]);
			msgs[i].msg_hdr.msg_iov = &iovs[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			if (spoof) {
				msgs[i].msg_hdr.msg_name = &dst;
				msgs[i].msg_hdr.msg_namelen = dstlen;
			}
		}
		rv = sendmmsg(fd, msgs, (unsigned)n, 0);
		if (rv > 0)
			sent += (size_t)rv;
		else if (errno != EINTR) {
			/* ENOBUFS, a timeout, or an ICMP error reported back
			 * on the connected socket: go on, the clock bounds it. */
			errors++;
			last_errno = errno;
		}
		if (now_ns() >= deadline)
			timed_out = sent < built;
	}
	send_end = now_ns();

	{
		double gen_s = (double)(send_start - start) / 1e9;
		double send_s = (double)(send_end - send_start) / 1e9;

		fprintf(stderr, "sent %zu Initials in %.3f s: %.0f packets/s\n", sent,
		    send_s, send_s > 0 ? (double)sent / send_s : 0.0);
		printf("{\"mode\": \"%s\", \"built\": %zu, \"build_seconds\": %.3f, "
		    "\"mean_bytes\": %.0f, \"sent\": %zu, \"seconds\": %.6f, "
		    "\"pps\": %.0f, \"send_errors\": %zu, \"last_error\": \"%s\", "
		    "\"timed_out\": %s}\n",
		    spoof ? "spoofed" : "one-source", built, gen_s,
		    built ? (double)bytes / (double)built : 0.0, sent, send_s,
		    send_s > 0 ? (double)sent / send_s : 0.0, errors,
		    last_errno ? strerror(last_errno) : "",
		    timed_out ? "true" : "false");
	}
	free(slab);
	free(pkts);
	close(fd);
	return sent == (size_t)count ? 0 : 1;
}

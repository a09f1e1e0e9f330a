/* Writes the seed corpora of the fuzz harnesses, one directory per
 * harness under the directory given (make fuzz-seeds: tests/fuzz/corpus).
 * The seeds come from the real encoders, from the sample configs and from
 * a real client's first packet, so that each harness starts from inputs
 * that get past its first checks; the fuzzer mutates from there. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/bytes.h"
#include "base/key.h"
#include "fuzz-quic.h"
#include "quic-initial.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "tunnel/fec.h"
#include "wire/ippkt.h"
#include "wire/proto-fwd.h"
#include "wire/proto-udp.h"
#include "wire/proto.h"
#include "wire/qmux.h"
#include "wire/socks5.h"

static const char *top;

static void
die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "make-seeds: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Write one seed, tests/fuzz/corpus/HARNESS/NAME. */
static void
put(const char *harness, const char *name, const void *data, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", top, harness);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("%s: %s", path, strerror(errno));
	snprintf(path, sizeof path, "%s/%s/%s", top, harness, name);
	if ((f = fopen(path, "wb")) == NULL ||
	    (len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
		die("%s: %s", path, strerror(errno));
}

/* A growing byte string for building inputs. */
struct buf {
	uint8_t b[16384];
	size_t n;
};

static void
add(struct buf *b, const void *data, size_t len)
{
	if (b->n + len > sizeof b->b)
		die("seed too large");
	memcpy(b->b + b->n, data, len);
	b->n += len;
}

static void
add8(struct buf *b, unsigned v)
{
	uint8_t c = (uint8_t)v;

	add(b, &c, 1);
}

static void
add16le(struct buf *b, size_t v)
{
	add8(b, (unsigned)(v & 0xff));
	add8(b, (unsigned)(v >> 8));
}

static size_t
read_file(const char *path, uint8_t *out, size_t max)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (f == NULL)
		die("%s: %s", path, strerror(errno));
	n = fread(out, 1, max, f);
	fclose(f);
	return n;
}

/* --- config parser: the sample configs without their comments --- */

static void
cfg_seed(const char *path, const char *name)
{
	char line[1024], out[8192];
	size_t n = 0, l;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof line, f) != NULL) {
		const char *p = line + strspn(line, " \t");

		if (*p == '#' || *p == '\n')
			continue;
		l = strlen(line);
		if (n + l > sizeof out)
			die("%s: too long", path);
		memcpy(out + n, line, l);
		n += l;
	}
	fclose(f);
	put("cfg", name, out, n);
}

static void
cfg_seeds(void)
{
	static const char forwards[] =
	    "[Client]\n"
	    "Server = vpn.example.org:4433\n"
	    "ServerPublicKey = SMvS1tvZi8uPn0QkZSpUW9Iw04vBC7c++p7vqBenT2k=\n"
	    "PrivateKeyFile = keys/laptop.key\n"
	    "Tun = none\n"
	    "LocalForward = 127.0.0.1:8080 = intranet.example:80\n"
	    "LocalForward = [::1]:2222 = 10.0.0.5:22\n"
	    "RemoteForward = 2222 = 127.0.0.1:22\n"
	    "DynamicForward = 127.0.0.1:1080\n"
	    "ForwardBuffer = 1048576\n"
	    "MaxForwards = 64\n"
	    "ZeroRTT = no\n"
	    "Congestion = cubic\n";
	/* AllowForward with protocol prefixes, and a tcp/ forward. */
	static const char protos[] =
	    "[Server]\n"
	    "PrivateKeyFile = k\n"
	    "Tun = none\n"
	    "[Peer]\n"
	    "Name = a\n"
	    "PublicKey = SMvS1tvZi8uPn0QkZSpUW9Iw04vBC7c++p7vqBenT2k=\n"
	    "AllowForward = 198.19.10.0/24:22, tcp/10.0.0.5:80, "
	    "udp/198.19.53.0/24:53, udp/[fd00:53::/64]:*, udp/dns.example:53\n";

	cfg_seed("configs/roved.conf", "roved.conf");
	cfg_seed("configs/rove.conf", "rove.conf");
	cfg_seed("configs/rove2.conf", "rove2.conf");
	cfg_seed("tests/configs/bad-peer-lists.conf", "bad-peer-lists.conf");
	cfg_seed("tests/configs/bad-forward.conf", "bad-forward.conf");
	cfg_seed("tests/configs/bad-syntax.conf", "bad-syntax.conf");
	put("cfg", "forwards.conf", forwards, sizeof forwards - 1);
	put("cfg", "allow-proto.conf", protos, sizeof protos - 1);
}

/* --- IP packets --- */

/* An IPv4 header of `total` bytes with protocol `proto`, checksummed. */
static void
ip4(uint8_t *p, size_t total, uint8_t proto)
{
	uint16_t sum;

	memset(p, 0, 20);
	p[0] = 0x45;
	p[2] = (uint8_t)(total >> 8);
	p[3] = (uint8_t)total;
	p[4] = 0x12;
	p[5] = 0x34;
	p[6] = 0x40;            /* don't fragment */
	p[8] = 64;
	p[9] = proto;
	memcpy(p + 12, "\xc6\x12\x00\x02", 4);
	memcpy(p + 16, "\xc6\x12\x01\x01", 4);
	sum = ippkt_checksum(p, 20, 0);
	p[10] = (uint8_t)(sum >> 8);
	p[11] = (uint8_t)sum;
}

static void
ip6(uint8_t *p, size_t payload, uint8_t next)
{
	memset(p, 0, 40);
	p[0] = 0x60;
	p[4] = (uint8_t)(payload >> 8);
	p[5] = (uint8_t)payload;
	p[6] = next;
	p[7] = 64;
	memcpy(p + 8, "\xfd\x00\x00\x00\x00\x00\x00\x00"
	    "\x00\x00\x00\x00\x00\x00\x00\x02", 16);
	memcpy(p + 24, "\xfd\x00\x00\x01\x00\x00\x00\x00"
	    "\x00\x00\x00\x00\x00\x00\x00\x01", 16);
}

static void
ippkt_seeds(void)
{
	static uint8_t p[1500];

	/* Large enough that answers must quote only part of them. */
	memset(p, 0, sizeof p);
	ip4(p, 1400, 17);
	put("ippkt", "v4-udp-1400", p, 1400);
	memset(p, 0, sizeof p);
	ip6(p, 1460, 6);
	put("ippkt", "v6-tcp-1500", p, 1500);
	/* A hop-by-hop header, then an echo request. */
	memset(p, 0, sizeof p);
	ip6(p, 160, 0);
	p[40] = 58;
	p[48] = 128;
	put("ippkt", "v6-hbh-echo", p, 200);
	/* An ICMP error: never answered with another. */
	memset(p, 0, sizeof p);
	ip4(p, 576, 1);
	p[20] = 3;
	p[21] = 4;
	put("ippkt", "v4-icmp-error", p, 576);
}

/* --- FEC frames (fuzz-fec.c describes the two input modes) --- */

/* The frames of one group from the real encoder. */
static struct {
	uint8_t orig[FEC_MAX_K][FEC_ORIG_OVERHEAD + 1500];
	size_t olen[FEC_MAX_K];
	uint8_t rep[FEC_MAX_M][FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD + 1500];
	size_t rlen[FEC_MAX_M];
	unsigned nrep;
} fg;

static void
fec_emit(const uint8_t *frame, size_t len, void *arg)
{
	(void)arg;
	if (fg.nrep >= FEC_MAX_M || len > sizeof fg.rep[0])
		die("fec: repair too long");
	memcpy(fg.rep[fg.nrep], frame, len);
	fg.rlen[fg.nrep++] = len;
}

/* k IPv4 packets of the lengths given, closed with m repairs. */
static void
fec_group(struct fec_enc *e, unsigned k, unsigned m, const size_t *len)
{
	static uint8_t p[1500];
	ssize_t n;

	for (unsigned i = 0; i < k; i++) {
		memset(p, (int)i, sizeof p);
		ip4(p, len[i], 17);
		n = fec_enc_add(e, p, len[i], fg.orig[i], sizeof fg.orig[i]);
		if (n < 0)
			die("fec: encoding failed");
		fg.olen[i] = (size_t)n;
	}
	fg.nrep = 0;
	if (fec_enc_close(e, m, fec_emit, NULL) != (int)m)
		die("fec: closing failed");
}

/* One record of the stream mode: kind (odd: original), length, frame. */
static void
fec_record(struct buf *b, bool original, const uint8_t *f, size_t n)
{
	add8(b, original ? 1 : 0);
	add8(b, (unsigned)(n >> 8));
	add8(b, (unsigned)(n & 0xff));
	add(b, f, n);
}

/* One group of the round-trip mode. */
static void
fec_spec(struct buf *b, unsigned k, unsigned m, uint32_t lost,
    unsigned lost_rep, unsigned seed, size_t len)
{
	add8(b, k - 1);
	add8(b, m);
	add8(b, lost >> 24);
	add8(b, (lost >> 16) & 0xff);
	add8(b, (lost >> 8) & 0xff);
	add8(b, lost & 0xff);
	add8(b, lost_rep);
	add8(b, seed);
	for (unsigned i = 0; i < k; i++) {
		size_t l = (len + i * 37) % 1500 + 20;

		add8(b, (unsigned)(l >> 8));
		add8(b, (unsigned)(l & 0xff));
	}
}

static void
fec_seeds(void)
{
	static const size_t lens[] = { 84, 1400, 40, 576 }, small[] = { 28, 40 };
	static const uint8_t bad[][10] = {
		{ 0, 0, 0, 1, 0, 1, 0, 0, 1, 2 },       /* k = 0 */
		{ 0, 0, 0, 1, 33, 1, 0, 0, 1, 2 },      /* k = 33 */
		{ 0, 0, 0, 1, 2, 9, 0, 0, 1, 2 },       /* m = 9 */
		{ 0, 0, 0, 1, 2, 2, 2, 0, 1, 2 },       /* row = m */
	};
	struct fec_enc *e = fec_enc_create();
	struct buf b = { .n = 0 };

	/* One original lost, rebuilt by the first repair. */
	add8(&b, 0);
	fec_group(e, 4, 2, lens);
	fec_record(&b, true, fg.orig[0], fg.olen[0]);
	fec_record(&b, true, fg.orig[2], fg.olen[2]);
	fec_record(&b, true, fg.orig[3], fg.olen[3]);
	fec_record(&b, false, fg.rep[0], fg.rlen[0]);
	fec_record(&b, false, fg.rep[1], fg.rlen[1]);
	put("fec", "lost-one", b.b, b.n);

	/* The repairs first, then the originals (and one twice). */
	b.n = 0;
	add8(&b, 0);
	fec_group(e, 3, 2, lens + 1);
	fec_record(&b, false, fg.rep[1], fg.rlen[1]);
	fec_record(&b, false, fg.rep[0], fg.rlen[0]);
	fec_record(&b, true, fg.orig[2], fg.olen[2]);
	fec_record(&b, true, fg.orig[2], fg.olen[2]);
	put("fec", "repair-first", b.b, b.n);

	/* Groups that lose too much and leave the window, then a late
	 * repair and a late original. */
	b.n = 0;
	add8(&b, 0);
	for (unsigned i = 0; i < FEC_DEC_WINDOW + 2; i++) {
		fec_group(e, 2, 1, small);
		if (i == 0)
			continue;
		fec_record(&b, true, fg.orig[1], fg.olen[1]);
		if (i == 1) {
			fec_record(&b, false, fg.rep[0], fg.rlen[0]);
			continue;
		}
		fec_record(&b, true, fg.orig[0], fg.olen[0]);
	}
	fec_group(e, 1, 1, small);
	be32_put(fg.rep[0], 0);
	be32_put(fg.orig[0], 1);
	fec_record(&b, false, fg.rep[0], fg.rlen[0]);
	fec_record(&b, true, fg.orig[0], fg.olen[0]);
	put("fec", "window", b.b, b.n);

	/* Malformed frames, and a repair whose symbol says length 0. */
	b.n = 0;
	add8(&b, 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		fec_record(&b, false, bad[i], sizeof bad[i]);
	fec_record(&b, true, bad[0], 5);
	fec_group(e, 1, 1, lens);
	fg.rep[0][FEC_REPAIR_OVERHEAD] = 0;
	fg.rep[0][FEC_REPAIR_OVERHEAD + 1] = 0;
	fec_record(&b, false, fg.rep[0], fg.rlen[0]);
	put("fec", "malformed", b.b, b.n);

	/* Round trips: groups the encoder makes from the input. */
	b.n = 0;
	add8(&b, 1);
	fec_spec(&b, 4, 2, 0x5, 0, 3, 100);
	fec_spec(&b, 1, 1, 0x1, 0, 9, 1400);
	fec_spec(&b, 32, 8, 0x80402010, 0x11, 77, 60);
	fec_spec(&b, 8, 2, 0x7, 0, 5, 500);
	fec_spec(&b, 6, 0, 0x2, 0, 1, 40);
	put("fec", "groups", b.b, b.n);
	fec_enc_free(e);
}

/* --- control stream messages --- */

static void
proto_seeds(void)
{
	struct proto_client_hello h = { .version = PROTO_VERSION };
	struct proto_server_config c;
	struct proto_error e = { .code = 5 };
	uint8_t msg[3][1024];
	size_t n[3];
	struct buf all = { .n = 0 };

	memset(&c, 0, sizeof c);
	c.version = PROTO_VERSION;
	c.naddrs = 2;
	c.addrs[0] = (struct prefix){ { AF_INET, { 198, 19, 77, 2 } }, 24 };
	c.addrs[1] = (struct prefix){ { AF_INET6, { 0xfd, 0, 0, 0x77,
	    [15] = 2 } }, 64 };
	c.nroutes = 2;
	c.routes[0] = (struct prefix){ { AF_INET, { 198, 19, 10, 0 } }, 24 };
	c.routes[1] = (struct prefix){ { AF_INET6, { 0xfd, 0, 0, 0x77 } }, 64 };
	c.mtu = 1380;
	c.keepalive = 15;
	snprintf(e.text, sizeof e.text, "address pool exhausted");
	n[0] = proto_encode_client_hello(msg[0], sizeof msg[0], &h);
	n[1] = proto_encode_server_config(msg[1], sizeof msg[1], &c);
	n[2] = proto_encode_error(msg[2], sizeof msg[2], &e);
	if (n[0] == 0 || n[1] == 0 || n[2] == 0)
		die("proto: encoding failed");
	put("proto", "client-hello", msg[0], n[0]);
	put("proto", "server-config", msg[1], n[1]);
	put("proto", "error", msg[2], n[2]);
	for (size_t i = 0; i < 3; i++)
		add(&all, msg[i], n[i]);
	put("proto", "stream", all.b, all.n);
	/* The same configuration with DNS servers and search domains. */
	c.ndns = 2;
	c.dns[0] = (struct ipaddr){ AF_INET, { 198, 19, 77, 1 } };
	c.dns[1] = (struct ipaddr){ AF_INET6, { 0xfd, 0, 0, 0x77, [15] = 1 } };
	c.ndns_search = 2;
	snprintf(c.dns_search[0], sizeof c.dns_search[0], "corp.example");
	snprintf(c.dns_search[1], sizeof c.dns_search[1], "example.org");
	if ((n[1] = proto_encode_server_config(msg[1], sizeof msg[1], &c)) == 0)
		die("proto: encoding failed");
	put("proto", "server-config-dns", msg[1], n[1]);
}

/* --- frames of the TLS-over-TCP transport --- */

/* What one side writes on its TLS stream: its parameters, a forward's
 * first bytes and FIN, a DATAGRAM, credit, a reset, a close. */
static void
qmux_seeds(void)
{
	struct qmux_params p = {
		.max_idle_timeout_ms = 120000, .initial_max_data = 16u << 20,
		.max_stream_data_bidi_local = 8u << 20,
		.max_stream_data_bidi_remote = 8u << 20,
		.initial_max_streams_bidi = 256, .max_datagram_frame_size = 65535,
	};
	static const uint8_t ping4[] = { 0x00, 0x45, 0x00, 0x00, 0x1c };
	struct buf all = { .n = 0 }, one;
	uint8_t f[600];
	size_t n;

	n = qmux_encode_params(f, sizeof f, &p);
	put("qmux", "params", f, n);
	add(&all, f, n);
	one.n = 0;
	n = qmux_encode_stream_header(f, sizeof f, 4, 0, 5, false);
	add(&one, f, n);
	add(&one, "hello", 5);
	n = qmux_encode_stream_header(f, sizeof f, 4, 5, 0, true);
	add(&one, f, n);
	put("qmux", "stream", one.b, one.n);
	add(&all, one.b, one.n);
	one.n = 0;
	n = qmux_encode_datagram_header(f, sizeof f, sizeof ping4);
	add(&one, f, n);
	add(&one, ping4, sizeof ping4);
	put("qmux", "datagram", one.b, one.n);
	add(&all, one.b, one.n);
	n = qmux_encode_max(f, sizeof f, QMUX_MAX_DATA, 0, 32u << 20);
	add(&all, f, n);
	n = qmux_encode_max(f, sizeof f, QMUX_MAX_STREAM_DATA, 4, 12u << 20);
	add(&all, f, n);
	n = qmux_encode_max(f, sizeof f, QMUX_MAX_STREAMS_BIDI, 0, 257);
	add(&all, f, n);
	n = qmux_encode_reset_stream(f, sizeof f, 8, 0x101, 10);
	add(&all, f, n);
	n = qmux_encode_stop_sending(f, sizeof f, 8, 0x101);
	add(&all, f, n);
	n = qmux_encode_ping(f, sizeof f);
	add(&all, f, n);
	n = qmux_encode_close(f, sizeof f, true, 0, "client shutting down");
	put("qmux", "close", f, n);
	add(&all, f, n);
	put("qmux", "session", all.b, all.n);
}

/* --- forward headers and remote-forward messages --- */

static void
fwd_header(const char *name, uint64_t type, const char *host, uint16_t port)
{
	struct proto_fwd_header h;
	uint8_t out[300];
	size_t n;

	memset(&h, 0, sizeof h);
	h.type = type;
	snprintf(h.host, sizeof h.host, "%s", host);
	h.port = port;
	if ((n = proto_fwd_encode(out, sizeof out, &h)) == 0)
		die("proto-fwd: encoding %s failed", name);
	put("proto-fwd", name, out, n);
}

static void
proto_fwd_seeds(void)
{
	struct proto_remote_forward rf = { .port = 2222, .status = 0 };
	uint8_t req[64], rep[64];
	size_t nreq, nrep;
	struct buf both = { .n = 0 };

	fwd_header("connect-name", PROTO_FWD_CONNECT, "intranet.example", 80);
	fwd_header("connect-v4", PROTO_FWD_CONNECT, "10.0.0.5", 22);
	fwd_header("connect-v6", PROTO_FWD_CONNECT, "fd00::1", 443);
	fwd_header("remote", PROTO_FWD_REMOTE, "", 2222);
	nreq = proto_fwd_remote_encode(req, sizeof req, PROTO_MSG_REMOTE_FORWARD,
	    &rf);
	rf.status = 3;
	nrep = proto_fwd_remote_encode(rep, sizeof rep,
	    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
	if (nreq == 0 || nrep == 0)
		die("proto-fwd: encoding the remote forward failed");
	add(&both, req, nreq);
	add(&both, rep, nrep);
	put("proto-fwd", "remote-request-reply", both.b, both.n);
	/* With bind addresses: one IPv6 address asked, all of them
	 * answered. */
	both.n = 0;
	rf.status = 0;
	rf.bind = PROTO_RBIND_ADDR;
	rf.bind_addr.family = AF_INET6;
	rf.bind_addr.b[0] = 0xfd;
	rf.bind_addr.b[15] = 1;
	nreq = proto_fwd_remote_encode(req, sizeof req, PROTO_MSG_REMOTE_FORWARD,
	    &rf);
	rf.bind = PROTO_RBIND_ALL;
	rf.status = 4;
	nrep = proto_fwd_remote_encode(rep, sizeof rep,
	    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
	if (nreq == 0 || nrep == 0)
		die("proto-fwd: encoding the bound remote forward failed");
	add(&both, req, nreq);
	add(&both, rep, nrep);
	put("proto-fwd", "remote-bind", both.b, both.n);
}

/* --- UDP flow headers and datagrams --- */

static void
udp_header(const char *name, uint64_t type, uint64_t ctx, const char *host,
    uint16_t port)
{
	struct proto_udp_header h;
	uint8_t out[300];
	size_t n;

	memset(&h, 0, sizeof h);
	h.type = type;
	h.ctx = ctx;
	snprintf(h.host, sizeof h.host, "%s", host);
	h.port = port;
	if ((n = proto_udp_encode(out, sizeof out, &h)) == 0)
		die("proto-udp: encoding %s failed", name);
	put("proto-udp", name, out, n);
}

static void
proto_udp_seeds(void)
{
	static const uint8_t query[] = { 0x12, 0x34, 0x01, 0x00, 0x00, 0x01 };
	uint8_t out[64];
	size_t n;

	udp_header("connect-name", PROTO_FWD_UDP_CONNECT, 4, "dns.example", 53);
	udp_header("connect-v6", PROTO_FWD_UDP_CONNECT, 1000, "fd00::53", 5353);
	udp_header("remote", PROTO_FWD_UDP_REMOTE, 5, "", 51820);
	if ((n = proto_udp_dgram_encode(out, sizeof out, 6, query,
	    sizeof query)) == 0)
		die("proto-udp: encoding a datagram failed");
	put("proto-udp", "dgram", out, n);
}

/* --- SOCKS5 --- */

static void
socks5_seeds(void)
{
	/* Each long enough for the harness's reply check (21 bytes). */
	static const uint8_t greeting[] = {
		5, 2, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	};
	static const uint8_t v4[] = {
		5, 1, 0, 1, 10, 0, 0, 5, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	};
	static const uint8_t v6[] = {
		5, 1, 0, 4, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		1, 0xbb,
	};
	static const uint8_t bind[] = {
		5, 2, 0, 1, 127, 0, 0, 1, 0x1f, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0,
	};
	struct buf name = { .n = 0 };

	add(&name, "\x05\x01\x00\x03\x10" "intranet.example" "\x00\x50", 23);
	put("socks5", "greeting", greeting, sizeof greeting);
	put("socks5", "connect-v4", v4, sizeof v4);
	put("socks5", "connect-v6", v6, sizeof v6);
	put("socks5", "connect-name", name.b, name.n);
	put("socks5", "bind", bind, sizeof bind);
}

/* SOCKS5 UDP datagram headers, with a payload behind each. */
static void
socks5_udp_seeds(void)
{
	static const struct socks5_udp_header v4 = {
		.atyp = SOCKS5_ATYP_IPV4, .host = "198.18.5.7", .port = 7777,
	};
	static const struct socks5_udp_header v6 = {
		.atyp = SOCKS5_ATYP_IPV6, .host = "fd00::53", .port = 53,
	};
	static const struct socks5_udp_header name = {
		.atyp = SOCKS5_ATYP_DOMAIN, .host = "echo.example", .port = 7,
	};
	static const struct socks5_udp_header frag = {
		.frag = 1, .atyp = SOCKS5_ATYP_IPV4, .host = "127.0.0.1",
		.port = 9,
	};
	const struct {
		const char *name;
		const struct socks5_udp_header *h;
	} seeds[] = {
		{ "v4", &v4 }, { "v6", &v6 }, { "name", &name }, { "frag", &frag },
	};
	uint8_t out[SOCKS5_UDP_HEADER_MAX + 8];
	size_t n;

	for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
		if ((n = socks5_udp_encode(out, sizeof out, seeds[i].h)) == 0)
			die("socks5-udp: encoding a header failed");
		memcpy(out + n, "payload", 7);
		put("socks5-udp", seeds[i].name, out, n + 7);
	}
}

/* --- StateDir files, as the real code writes them --- */

static void
state_seeds(void)
{
	char dir[] = "/tmp/rove-make-seeds.XXXXXX", path[128], *cause = NULL;
	uint8_t reset[64], ticket[256], session[512];
	size_t nreset, nticket, nsession;
	struct state_server *st;
	struct buf b = { .n = 0 };
	/* Two register records: issued, then used (type, 7 bytes of
	 * padding, expiry in seconds, tag, peer key), expiring in 2100. */
	uint8_t reg[2][64];

	if (mkdtemp(dir) == NULL)
		die("mkdtemp: %s", strerror(errno));
	if ((st = state_server_open(dir, &cause)) == NULL)
		die("state_server_open: %s", cause);
	state_server_free(st);
	if (state_client_save(dir, "x", (const uint8_t *)"a session", 9,
	    (const uint8_t *)"params", 6) != 0)
		die("state_client_save failed");
	snprintf(path, sizeof path, "%s/reset.key", dir);
	nreset = read_file(path, reset, sizeof reset);
	unlink(path);
	snprintf(path, sizeof path, "%s/ticket.key", dir);
	nticket = read_file(path, ticket, sizeof ticket);
	unlink(path);
	snprintf(path, sizeof path, "%s/session-x", dir);
	nsession = read_file(path, session, sizeof session);
	unlink(path);
	snprintf(path, sizeof path, "%s/tickets", dir);
	unlink(path);
	rmdir(dir);

	memset(reg, 0, sizeof reg);
	for (size_t i = 0; i < 2; i++) {
		uint64_t expiry = UINT64_C(4102444800);

		reg[i][0] = (uint8_t)(i + 1);
		memcpy(reg[i] + 8, &expiry, 8);
		memset(reg[i] + 16, 0x40 + (int)i, 16);
		memset(reg[i] + 32, 0x77, 32);
	}

	/* flags, then reset.key, ticket.key, tickets, session-fuzz */
	add8(&b, 0x0f);
	add16le(&b, nreset);
	add(&b, reset, nreset);
	add16le(&b, nticket);
	add(&b, ticket, nticket);
	add16le(&b, sizeof reg);
	add(&b, reg, sizeof reg);
	add16le(&b, nsession);
	add(&b, session, nsession);
	put("state", "all-valid", b.b, b.n);

	b.n = 0;
	add8(&b, 0x08);
	add16le(&b, 0);
	add16le(&b, 0);
	add16le(&b, 0);
	add16le(&b, nsession);
	add(&b, session, nsession);
	put("state", "session-only", b.b, b.n);

	/* A short reset key, the register a directory, the ticket keys a
	 * link: each replaced or refused. */
	b.n = 0;
	add8(&b, 0x43 | 0x20);
	add16le(&b, nreset - 1);
	add(&b, reset, nreset - 1);
	put("state", "odd-files", b.b, b.n);
}

/* --- control socket requests: the first byte cuts the rest up --- */

static void
control_seed(const char *name, unsigned chunk, const char *req, size_t len)
{
	struct buf b = { .n = 0 };

	add8(&b, chunk);
	add(&b, req, len);
	put("control", name, b.b, b.n);
}

static void
control_seeds(void)
{
	char longline[300];

	memset(longline, 'a', sizeof longline);
	longline[sizeof longline - 1] = '\n';
	control_seed("status", 0, "status\n", 7);
	control_seed("status-json-crlf", 3, "status json\r\n", 13);
	control_seed("eof", 1, "status", 6);
	control_seed("two-lines", 0, "status\nstatus json\n", 19);
	control_seed("nul", 2, "st\0atus\n", 8);
	control_seed("long", 16, longline, sizeof longline);
}

/* --- QUIC --- */

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	(void)qc;
	(void)info;
	(void)arg;
}

/* A real rove client's first datagram, as sent. */
static size_t
client_first_datagram(uint8_t *out, size_t max)
{
	static struct udp_recv r;
	static struct udp_batch batch;
	struct udp_socket cs, ss;
	struct sockaddr_in lo;
	struct event_base *base = event_base_new();
	uint8_t priv[KEY_LEN], reset[QUIC_RESET_SECRET_LEN];
	struct quic_settings qs = {
		.role = QUIC_ROLE_CLIENT,
		.cc = NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = 30,
		.max_udp_payload = UDP_MAX_PAYLOAD,
		.stream_window = 32768,
		.reset_secret = reset,
	};
	static const struct quic_conn_cbs cbs = { .closed = closed_cb };
	struct pollfd pfd;
	struct quic_conn *qc;
	WOLFSSL_CTX *ctx;
	char *cause = NULL;
	size_t n;

	memset(priv, 0x42, sizeof priv);
	memset(reset, 0x17, sizeof reset);
	memset(&lo, 0, sizeof lo);
	lo.sin_family = AF_INET;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (base == NULL ||
	    udp_open(&cs, AF_INET, (struct sockaddr *)&lo, sizeof lo, &cause) ||
	    udp_open(&ss, AF_INET, (struct sockaddr *)&lo, sizeof lo, &cause) ||
	    (ctx = tls_ctx_create(TLS_ROLE_CLIENT, priv, quic_tls_pin,
	    &cause)) == NULL)
		die("client set-up: %s", cause);
	udp_batch_init(&batch, &cs);
	qc = quic_conn_client_create(base, &qs, &cbs, NULL, ctx, &batch,
	    (struct sockaddr *)&ss.local, ss.locallen, NULL, &cause);
	if (qc == NULL)
		die("quic_conn_client_create: %s", cause);
	quic_conn_write(qc);
	udp_batch_flush(&batch);
	pfd = (struct pollfd){ .fd = ss.fd, .events = POLLIN };
	if (poll(&pfd, 1, 2000) != 1 || udp_recv(&ss, &r) != 1)
		die("the client sent nothing");
	n = r.len < r.segsize ? r.len : r.segsize;
	if (n > max)
		die("the client's first datagram is too large");
	memcpy(out, r.buf, n);
	quic_conn_free(qc);
	event_base_loop(base, EVLOOP_NONBLOCK);
	wolfSSL_CTX_free(ctx);
	udp_close(&cs);
	udp_close(&ss);
	event_base_free(base);
	return n;
}

/* The ClientHello's frames from that datagram, its PADDING dropped and
 * its source connection ID replaced by the one forged Initials carry,
 * so that its transport parameters agree with their header. */
static size_t
client_hello_frames(const uint8_t *dgram, size_t len, uint8_t *out)
{
	uint8_t pkt[2048], *frames;
	const uint8_t *scid;
	size_t nframes, scidlen;

	memcpy(pkt, dgram, len);
	if (initial_unprotect(pkt, len, &frames, &nframes, &scid, &scidlen) != 0)
		die("cannot open the client's Initial");
	if (scidlen != sizeof forged_scid)
		die("the client's connection ID has %zu bytes", scidlen);
	while (nframes > 0 && frames[nframes - 1] == 0)
		nframes--;
	for (size_t i = 0; i + scidlen <= nframes; i++) {
		if (memcmp(frames + i, scid, scidlen) == 0)
			memcpy(frames + i, forged_scid, scidlen);
	}
	memcpy(out, frames, nframes);
	return nframes;
}

static void
op(struct buf *b, enum fuzz_quic_op o)
{
	add8(b, o);
}

/* A handshake, stream bytes both ways and a DATAGRAM. */
static void
quic_session(struct buf *b, unsigned start_flags)
{
	op(b, OP_CLIENT_START);
	add8(b, start_flags);
	op(b, OP_DATAGRAM);             /* 0-RTT when resuming */
	add8(b, 5);
	add(b, "early", 5);
	op(b, OP_FLUSH);
	op(b, OP_STREAM);
	add8(b, 0);                     /* client, a new stream */
	add8(b, 5);
	add(b, "hello", 5);
	op(b, OP_DATAGRAM);
	add8(b, 4);
	add(b, "ping", 4);
	op(b, OP_FLUSH);
	op(b, OP_STREAM);
	add8(b, 1 | 2);                 /* server, a new stream, FIN */
	add8(b, 5);
	add(b, "world", 5);
	op(b, OP_FLUSH);
}

static void
quic_seeds(void)
{
	uint8_t dgram[2048], frames[2048];
	size_t n, nf;
	struct buf b = { .n = 0 };

	quic_session(&b, 0);
	op(&b, OP_TIME);
	add8(&b, 150);
	op(&b, OP_FLUSH);
	op(&b, OP_CLOSE);
	add8(&b, 0);
	add8(&b, 0);
	op(&b, OP_FLUSH);
	put("quic", "session", b.b, b.n);

	/* Then the server forgets, and the client comes back with its
	 * ticket and 0-RTT. */
	b.n = 0;
	quic_session(&b, 0);
	op(&b, OP_CLOSE);
	add8(&b, 0);
	add8(&b, 0);
	op(&b, OP_FLUSH);
	op(&b, OP_TIME);
	add8(&b, 255);
	op(&b, OP_FLUSH);
	quic_session(&b, 1);
	put("quic", "resume", b.b, b.n);

	/* A server under load: the client answers a Retry first; its next
	 * connection brings the NEW_TOKEN token instead. */
	b.n = 0;
	op(&b, OP_LOAD);
	add8(&b, 1);
	quic_session(&b, 0);
	op(&b, OP_CLOSE);
	add8(&b, 1);
	add8(&b, 0);
	op(&b, OP_FLUSH);
	op(&b, OP_TIME);
	add8(&b, 255);
	op(&b, OP_FLUSH);
	quic_session(&b, 1);
	put("quic", "retry", b.b, b.n);

	/* The client's address changes mid-session. */
	b.n = 0;
	quic_session(&b, 0);
	op(&b, OP_NAT);
	op(&b, OP_STREAM);
	add8(&b, 0 << 2);               /* client, its first stream */
	add8(&b, 3);
	add(&b, "...", 3);
	op(&b, OP_FLUSH);
	op(&b, OP_TIME);
	add8(&b, 100);
	op(&b, OP_FLUSH);
	put("quic", "nat-rebinding", b.b, b.n);

	/* A handshake through a bad network: the first flight lost (the
	 * client probes again after a second), a packet duplicated, one
	 * corrupted, one delayed, one replayed by the forger. */
	b.n = 0;
	op(&b, OP_CLIENT_START);
	add8(&b, 0);
	op(&b, OP_PACKET);
	add8(&b, 1 << 1);               /* toward the server: lost */
	op(&b, OP_TIME);
	add8(&b, 200);                  /* 1 s */
	op(&b, OP_PACKET);
	add8(&b, 2 << 1);               /* duplicated */
	op(&b, OP_PACKET);
	add8(&b, 1 | 3 << 1);           /* toward the client: corrupted */
	add8(&b, 40);
	add8(&b, 0x80);
	op(&b, OP_PACKET);
	add8(&b, 1 | 5 << 1);           /* overtaken */
	op(&b, OP_PACKET);
	add8(&b, 7 << 1);               /* replayed by the forger */
	op(&b, OP_TIME);
	add8(&b, 200);
	op(&b, OP_FLUSH);
	op(&b, OP_TIME);
	add8(&b, 201);                  /* 2 s */
	op(&b, OP_FLUSH);
	op(&b, OP_STREAM);
	add8(&b, 0);
	add8(&b, 2);
	add(&b, "ok", 2);
	op(&b, OP_FLUSH);
	put("quic", "lossy", b.b, b.n);

	/* Forged: a real client's ClientHello in an Initial of ours, its
	 * whole datagram replayed, and packets no connection expects. */
	n = client_first_datagram(dgram, sizeof dgram);
	nf = client_hello_frames(dgram, n, frames);
	b.n = 0;
	op(&b, OP_FORGED_INITIAL);
	add16le(&b, nf);
	add(&b, frames, nf);
	op(&b, OP_TIME);
	add8(&b, 199);
	op(&b, OP_FORGED_INITIAL);
	add16le(&b, 2);
	add(&b, "\x01\x01", 2);         /* PING, PING */
	put("quic", "forged-hello", b.b, b.n);

	/* The same under load, with a token that is not ours. */
	b.n = 0;
	op(&b, OP_LOAD);
	add8(&b, 1);
	op(&b, OP_FORGED_TOKEN);
	add8(&b, 24);
	add(&b, "\xb6not a token of roved's", 24);
	op(&b, OP_FORGED_INITIAL);
	add16le(&b, nf);
	add(&b, frames, nf);
	put("quic", "forged-token", b.b, b.n);

	b.n = 0;
	op(&b, OP_FORGED_RAW);
	add16le(&b, n);
	add(&b, dgram, n);
	op(&b, OP_FORGED_RAW);
	add16le(&b, 40);
	add(&b, "\x40\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d"
	    "\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d"
	    "\x1e\x1f\x20\x21\x22\x23\x24\x25\x26\x27", 40);
	put("quic", "forged-replay", b.b, b.n);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make-seeds CORPUS_DIR\n");
		return 2;
	}
	top = argv[1];
	if (mkdir(top, 0755) != 0 && errno != EEXIST)
		die("%s: %s", top, strerror(errno));
	cfg_seeds();
	ippkt_seeds();
	fec_seeds();
	proto_seeds();
	qmux_seeds();
	proto_fwd_seeds();
	proto_udp_seeds();
	socks5_seeds();
	socks5_udp_seeds();
	state_seeds();
	control_seeds();
	quic_seeds();
	return 0;
}

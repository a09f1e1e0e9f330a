/* Unit tests for common/wire/ippkt.c: header checks and "packet too big" answers. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "wire/ippkt.h"

static struct ipaddr
ip(const char *s)
{
	struct ipaddr a;

	memset(&a, 0, sizeof a);
	a.family = strchr(s, ':') != NULL ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(a.family, s, a.b), 1);
	return a;
}

static uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* An independent one's-complement sum, written plainly, to check the
 * checksums the module produces without trusting ippkt_checksum. */
static uint32_t
naive_sum(const uint8_t *p, size_t len, uint32_t sum)
{
	for (size_t i = 0; i < len; i++)
		sum += i % 2 == 0 ? (uint32_t)p[i] << 8 : p[i];
	return sum;
}

static uint16_t
naive_fold(uint32_t sum)
{
	while (sum > 0xffff)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)(~sum & 0xffff);
}

/* An IPv4 packet of `total` bytes: IHL 5, the given protocol, DF, payload
 * bytes i & 0xff. */
static void
mk4(uint8_t *p, size_t total, uint8_t proto, const char *src, const char *dst)
{
	struct ipaddr s = ip(src), d = ip(dst);

	for (size_t i = 0; i < total; i++)
		p[i] = (uint8_t)i;
	p[0] = 0x45;
	p[1] = 0;
	p[2] = (uint8_t)(total >> 8);
	p[3] = (uint8_t)total;
	p[4] = 0x12;
	p[5] = 0x34;
	p[6] = 0x40; /* DF */
	p[7] = 0;
	p[8] = 63;
	p[9] = proto;
	p[10] = p[11] = 0;
	memcpy(p + 12, s.b, 4);
	memcpy(p + 16, d.b, 4);
}

/* An IPv6 packet of `total` bytes with the given next header. */
static void
mk6(uint8_t *p, size_t total, uint8_t nh, const char *src, const char *dst)
{
	struct ipaddr s = ip(src), d = ip(dst);

	for (size_t i = 0; i < total; i++)
		p[i] = (uint8_t)(i * 7);
	p[0] = 0x60;
	p[1] = p[2] = p[3] = 0;
	p[4] = (uint8_t)((total - 40) >> 8);
	p[5] = (uint8_t)(total - 40);
	p[6] = nh;
	p[7] = 63;
	memcpy(p + 8, s.b, 16);
	memcpy(p + 24, d.b, 16);
}

static void
test_parse_v4(void **state)
{
	uint8_t p[1410];
	struct ippkt_info info;
	struct ipaddr s = ip("198.18.0.2"), d = ip("198.18.1.1");

	(void)state;
	mk4(p, 1400, 17, "198.18.0.2", "198.18.1.1");
	/* Ten bytes of trailing junk are tolerated and excluded. */
	assert_int_equal(ippkt_parse(p, sizeof p, &info), IPPKT_OK);
	assert_int_equal(info.family, AF_INET);
	assert_int_equal(info.src.family, AF_INET);
	assert_memory_equal(info.src.b, s.b, 4);
	assert_int_equal(info.dst.family, AF_INET);
	assert_memory_equal(info.dst.b, d.b, 4);
	assert_int_equal(info.proto, 17);
	assert_int_equal(info.len, 1400);
	assert_true(info.df);

	/* DF clear, and a header with options (IHL 6). */
	p[6] = 0x20; /* MF only */
	p[0] = 0x46;
	assert_int_equal(ippkt_parse(p, 1400, &info), IPPKT_OK);
	assert_false(info.df);
	assert_int_equal(info.len, 1400);

	/* The smallest valid packet: a bare 20-byte header. */
	mk4(p, 20, 6, "198.18.0.2", "198.18.1.1");
	assert_int_equal(ippkt_parse(p, 20, &info), IPPKT_OK);
	assert_int_equal(info.len, 20);
	assert_int_equal(info.proto, 6);
}

static void
test_parse_v6(void **state)
{
	uint8_t p[1500];
	struct ippkt_info info;
	struct ipaddr s = ip("fd00::2"), d = ip("fd00:1::1");

	(void)state;
	mk6(p, 1300, 6, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_parse(p, sizeof p, &info), IPPKT_OK);
	assert_int_equal(info.family, AF_INET6);
	assert_int_equal(info.src.family, AF_INET6);
	assert_memory_equal(info.src.b, s.b, 16);
	assert_int_equal(info.dst.family, AF_INET6);
	assert_memory_equal(info.dst.b, d.b, 16);
	assert_int_equal(info.proto, 6);
	assert_int_equal(info.len, 1300);
	assert_true(info.df);

	/* A bare header with an empty payload. */
	mk6(p, 40, 59, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_parse(p, 40, &info), IPPKT_OK);
	assert_int_equal(info.len, 40);
	assert_int_equal(info.proto, 59);
}

static void
test_parse_errors(void **state)
{
	uint8_t p[100] = { 0 };
	struct ippkt_info info;

	(void)state;
	assert_int_equal(ippkt_parse(p, 0, &info), IPPKT_ERR_SHORT);

	mk4(p, 60, 17, "198.18.0.2", "198.18.1.1");
	assert_int_equal(ippkt_parse(p, 19, &info), IPPKT_ERR_SHORT);
	assert_int_equal(ippkt_parse(p, 1, &info), IPPKT_ERR_SHORT);
	/* Total length 60 but only 59 bytes: the length runs past. */
	assert_int_equal(ippkt_parse(p, 59, &info), IPPKT_ERR_LENGTH);
	p[0] = 0x44; /* IHL 4 */
	assert_int_equal(ippkt_parse(p, 60, &info), IPPKT_ERR_HEADER);
	p[0] = 0x4f; /* IHL 15 = 60 bytes of header in a 40-byte buffer */
	assert_int_equal(ippkt_parse(p, 40, &info), IPPKT_ERR_HEADER);
	p[0] = 0x46; /* IHL 6, total length 23 < 24 */
	p[2] = 0;
	p[3] = 23;
	assert_int_equal(ippkt_parse(p, 60, &info), IPPKT_ERR_LENGTH);
	p[3] = 24;
	assert_int_equal(ippkt_parse(p, 60, &info), IPPKT_OK);

	p[0] = 0x55;
	assert_int_equal(ippkt_parse(p, 60, &info), IPPKT_ERR_VERSION);
	assert_int_equal(ippkt_parse(p, 1, &info), IPPKT_ERR_VERSION);
	p[0] = 0x05;
	assert_int_equal(ippkt_parse(p, 60, &info), IPPKT_ERR_VERSION);
	p[0] = 0xf5;
	assert_int_equal(ippkt_parse(p, 60, &info), IPPKT_ERR_VERSION);

	mk6(p, 100, 17, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_parse(p, 39, &info), IPPKT_ERR_SHORT);
	assert_int_equal(ippkt_parse(p, 99, &info), IPPKT_ERR_LENGTH);
	assert_int_equal(ippkt_parse(p, 100, &info), IPPKT_OK);
	p[4] = 0xff; /* payload length 65340 */
	assert_int_equal(ippkt_parse(p, 100, &info), IPPKT_ERR_LENGTH);
}

static void
test_checksum(void **state)
{
	/* The example of RFC 1071 section 3: the sum is ddf2. */
	static const uint8_t b[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	static const uint8_t odd[] = { 0x01, 0x02, 0x03 };
	uint16_t first;

	(void)state;
	assert_int_equal(ippkt_checksum(b, sizeof b, 0), 0x220d);
	assert_int_equal(ippkt_checksum(b, 0, 0), 0xffff);
	/* 0x0102 + 0x0300 = 0x0402. */
	assert_int_equal(ippkt_checksum(odd, sizeof odd, 0), 0xfbfd);
	/* Continuing from an earlier chunk's uncomplemented sum. */
	first = ippkt_checksum(b, 4, 0);
	assert_int_equal(ippkt_checksum(b + 4, 4, (uint16_t)~first), 0x220d);
	/* A raw 32-bit partial sum with carries to fold. */
	assert_int_equal(ippkt_checksum(b, sizeof b, 0x2ffff), 0x220b);
}

/* RFC 1071's definition, one big-endian word at a time. */
static uint64_t
csum_reference(uint64_t sum, const uint8_t *p, size_t len)
{
	for (; len >= 2; p += 2, len -= 2)
		sum += (uint64_t)(p[0] << 8 | p[1]);
	if (len == 1)
		sum += (uint64_t)p[0] << 8;
	return sum;
}

/* The word-wise fast sum agrees with the definition at every length and
 * alignment, on data whose sums carry often (all ones) and on mixed data,
 * from a zero and from a running start. */
static void
test_checksum_fast(void **state)
{
	static uint8_t buf[1600];
	static const size_t lens[] = { 0, 1, 2, 7, 8, 9, 31, 32, 33, 63, 64,
		65, 1279, 1280, 1380, 1500, 1591 };
	uint32_t x = 12345;

	(void)state;
	for (size_t fill = 0; fill < 3; fill++) {
		for (size_t i = 0; i < sizeof buf; i++) {
			x = x * 1103515245u + 12345u;
			buf[i] = fill == 0 ? 0xff : fill == 1 ? (uint8_t)(x >> 24) : 0;
		}
		for (size_t off = 0; off < 8; off++) {
			for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
				for (uint64_t start = 0; start < 0x30000; start += 0x17fff) {
					uint64_t want = csum_reference(start, buf + off, lens[l]);
					uint64_t got = ippkt_csum_add(start, buf + off, lens[l]);

					assert_int_equal(ippkt_csum_fold(got), ippkt_csum_fold(want));
				}
			}
		}
	}
}

/* Check every field of an ICMPv4 answer to `p`. */
static void
check_ptb4(const uint8_t *out, size_t outlen, const uint8_t *p, size_t quote,
    const char *from, const char *to, uint16_t mtu)
{
	struct ipaddr f = ip(from), t = ip(to);

	assert_int_equal(outlen, 28 + quote);
	assert_int_equal(out[0], 0x45);
	assert_int_equal(out[1], 0);
	assert_int_equal(rd16(out + 2), 28 + quote);
	assert_int_equal(rd16(out + 4), 0);
	assert_int_equal(rd16(out + 6), 0); /* DF clear, no fragment */
	assert_int_equal(out[8], 64);
	assert_int_equal(out[9], 1);
	assert_memory_equal(out + 12, f.b, 4);
	assert_memory_equal(out + 16, t.b, 4);
	assert_int_equal(naive_fold(naive_sum(out, 20, 0)), 0);
	assert_int_equal(out[20], 3);
	assert_int_equal(out[21], 4);
	assert_int_equal(rd16(out + 24), 0);
	assert_int_equal(rd16(out + 26), mtu);
	assert_int_equal(naive_fold(naive_sum(out + 20, 8 + quote, 0)), 0);
	assert_memory_equal(out + 28, p, quote);
}

static void
test_ptb_v4(void **state)
{
	uint8_t p[1500], out[1600];
	struct ipaddr from = ip("198.18.0.1");
	size_t n;

	(void)state;
	mk4(p, 1400, 17, "198.18.0.2", "198.18.1.1");
	n = ippkt_make_ptb(p, 1400, &from, 1300, out, sizeof out);
	assert_int_equal(n, 576);
	check_ptb4(out, n, p, 548, "198.18.0.1", "198.18.0.2", 1300);

	/* A small packet is quoted whole, without the trailing junk. */
	mk4(p, 100, 6, "198.18.0.2", "198.18.1.1");
	n = ippkt_make_ptb(p, 110, &from, 1300, out, sizeof out);
	check_ptb4(out, n, p, 100, "198.18.0.1", "198.18.0.2", 1300);

	/* The MTU is clamped to 68..65535. */
	n = ippkt_make_ptb(p, 100, &from, 20, out, sizeof out);
	check_ptb4(out, n, p, 100, "198.18.0.1", "198.18.0.2", 68);
	n = ippkt_make_ptb(p, 100, &from, 70000, out, sizeof out);
	check_ptb4(out, n, p, 100, "198.18.0.1", "198.18.0.2", 65535);

	/* An echo request (not an error) and a first fragment (MF set) are
	 * answered. */
	mk4(p, 100, 1, "198.18.0.2", "198.18.1.1");
	p[20] = 8;
	n = ippkt_make_ptb(p, 100, &from, 1300, out, sizeof out);
	check_ptb4(out, n, p, 100, "198.18.0.1", "198.18.0.2", 1300);
	mk4(p, 100, 17, "198.18.0.2", "198.18.1.1");
	p[6] = 0x20;
	n = ippkt_make_ptb(p, 100, &from, 1300, out, sizeof out);
	check_ptb4(out, n, p, 100, "198.18.0.1", "198.18.0.2", 1300);

	/* outlen: one byte short gives nothing, exact fits. */
	mk4(p, 1400, 17, "198.18.0.2", "198.18.1.1");
	assert_int_equal(ippkt_make_ptb(p, 1400, &from, 1300, out, 575), 0);
	assert_int_equal(ippkt_make_ptb(p, 1400, &from, 1300, out, 576), 576);
	assert_int_equal(ippkt_make_ptb(p, 1400, &from, 1300, out, 0), 0);
}

static void
check_ptb6(const uint8_t *out, size_t outlen, const uint8_t *p, size_t quote,
    const char *from, const char *to, uint32_t mtu)
{
	struct ipaddr f = ip(from), t = ip(to);
	uint8_t len[4];
	uint32_t sum;

	assert_int_equal(outlen, 48 + quote);
	assert_int_equal(rd32(out), 0x60000000);
	assert_int_equal(rd16(out + 4), 8 + quote);
	assert_int_equal(out[6], 58);
	assert_int_equal(out[7], 64);
	assert_memory_equal(out + 8, f.b, 16);
	assert_memory_equal(out + 24, t.b, 16);
	assert_int_equal(out[40], 2);
	assert_int_equal(out[41], 0);
	assert_int_equal(rd32(out + 44), mtu);
	assert_memory_equal(out + 48, p, quote);

	/* Pseudo-header: addresses, 32-bit length, next header 58. */
	len[0] = 0;
	len[1] = 0;
	len[2] = (uint8_t)((8 + quote) >> 8);
	len[3] = (uint8_t)(8 + quote);
	sum = naive_sum(f.b, 16, 0);
	sum = naive_sum(t.b, 16, sum);
	sum = naive_sum(len, 4, sum);
	sum += 58;
	sum = naive_sum(out + 40, 8 + quote, sum);
	assert_int_equal(naive_fold(sum), 0);
}

static void
test_ptb_v6(void **state)
{
	uint8_t p[1500], out[1600];
	struct ipaddr from = ip("fd00::1");
	size_t n;

	(void)state;
	mk6(p, 1500, 6, "fd00::2", "fd00:1::1");
	n = ippkt_make_ptb(p, 1500, &from, 1400, out, sizeof out);
	assert_int_equal(n, 1280);
	check_ptb6(out, n, p, 1232, "fd00::1", "fd00::2", 1400);

	mk6(p, 200, 17, "fd00::2", "fd00:1::1");
	n = ippkt_make_ptb(p, 220, &from, 1400, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1400);

	/* Clamped up to 1280; large values pass unchanged. */
	n = ippkt_make_ptb(p, 200, &from, 1000, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1280);
	n = ippkt_make_ptb(p, 200, &from, 100000, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 100000);

	/* Echo request is answered; so is a multicast destination (RFC
	 * 4443 2.4 (e.2)). */
	mk6(p, 200, 58, "fd00::2", "fd00:1::1");
	p[40] = 128;
	n = ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1400);
	mk6(p, 200, 17, "fd00::2", "ff0e::1");
	n = ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1400);

	mk6(p, 1500, 6, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 1500, &from, 1400, out, 1279), 0);
	assert_int_equal(ippkt_make_ptb(p, 1500, &from, 1400, out, 1280), 1280);
}

static void
test_ptb_v6_exthdr(void **state)
{
	uint8_t p[300], out[1600];
	struct ipaddr from = ip("fd00::1");
	size_t n;

	(void)state;
	/* Hop-by-hop (8 bytes) -> destination options (16 bytes) -> ICMPv6
	 * destination unreachable: an error, not answered. */
	mk6(p, 200, 0, "fd00::2", "fd00:1::1");
	p[40] = 60;
	p[41] = 0;
	p[48] = 58;
	p[49] = 1;
	p[64] = 1;
	assert_int_equal(ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out), 0);
	/* The same chain ending in an echo request is answered. */
	p[64] = 128;
	n = ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1400);
	/* Ending in TCP: answered. */
	p[48] = 6;
	n = ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1400);

	/* AH, length (1 + 2) * 4 = 12 bytes, then an ICMPv6 error. */
	mk6(p, 200, 51, "fd00::2", "fd00:1::1");
	p[40] = 58;
	p[41] = 1;
	p[52] = 3;
	assert_int_equal(ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out), 0);

	/* A chain that runs past the packet is not answered. */
	mk6(p, 56, 0, "fd00::2", "fd00:1::1");
	p[40] = 60;
	p[41] = 0;
	p[48] = 6;
	p[49] = 1; /* 16 bytes at 48, but only 8 remain */
	assert_int_equal(ippkt_make_ptb(p, 56, &from, 1400, out, sizeof out), 0);
	mk6(p, 41, 0, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 41, &from, 1400, out, sizeof out), 0);

	/* A first fragment of an ICMPv6 error is not answered; a later
	 * fragment cannot be an error and is answered. */
	mk6(p, 200, 44, "fd00::2", "fd00:1::1");
	p[40] = 58;
	p[41] = 0;
	p[42] = 0x00;
	p[43] = 0x01; /* offset 0, M set */
	p[48] = 1;
	assert_int_equal(ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out), 0);
	p[42] = 0x05;
	p[43] = 0x00; /* offset 160 bytes */
	n = ippkt_make_ptb(p, 200, &from, 1400, out, sizeof out);
	check_ptb6(out, n, p, 200, "fd00::1", "fd00::2", 1400);
	mk6(p, 44, 44, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 44, &from, 1400, out, sizeof out), 0);
}

static void
test_no_ptb(void **state)
{
	static const uint8_t errors4[] = { 3, 4, 5, 11, 12 };
	static const uint8_t errors6[] = { 1, 2, 3, 4, 0, 127 };
	static const char *const src4[] = { "0.0.0.0", "224.0.0.5",
		"239.255.255.255", "255.255.255.255" };
	static const char *const dst4[] = { "224.0.0.1", "255.255.255.255" };
	uint8_t p[200], out[1600];
	struct ipaddr from4 = ip("198.18.0.1"), from6 = ip("fd00::1");

	(void)state;
	for (size_t i = 0; i < sizeof errors4; i++) {
		mk4(p, 100, 1, "198.18.0.2", "198.18.1.1");
		p[20] = errors4[i];
		assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out,
		    sizeof out), 0);
	}
	/* ICMP without even its type byte. */
	mk4(p, 20, 1, "198.18.0.2", "198.18.1.1");
	assert_int_equal(ippkt_make_ptb(p, 20, &from4, 1300, out, sizeof out), 0);

	/* Non-first fragments (offset 8 and the largest offset). */
	mk4(p, 100, 17, "198.18.0.2", "198.18.1.1");
	p[6] = 0x00;
	p[7] = 0x01;
	assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out, sizeof out), 0);
	p[6] = 0x3f;
	p[7] = 0xff;
	assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out, sizeof out), 0);
	p[6] = 0x50; /* DF and the offset's top bit */
	p[7] = 0x00;
	assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out, sizeof out), 0);

	for (size_t i = 0; i < sizeof src4 / sizeof src4[0]; i++) {
		mk4(p, 100, 17, src4[i], "198.18.1.1");
		assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out,
		    sizeof out), 0);
	}
	for (size_t i = 0; i < sizeof dst4 / sizeof dst4[0]; i++) {
		mk4(p, 100, 17, "198.18.0.2", dst4[i]);
		assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out,
		    sizeof out), 0);
	}

	for (size_t i = 0; i < sizeof errors6; i++) {
		mk6(p, 100, 58, "fd00::2", "fd00:1::1");
		p[40] = errors6[i];
		assert_int_equal(ippkt_make_ptb(p, 100, &from6, 1400, out,
		    sizeof out), 0);
	}
	mk6(p, 40, 58, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 40, &from6, 1400, out, sizeof out), 0);
	mk6(p, 100, 17, "::", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 100, &from6, 1400, out, sizeof out), 0);
	mk6(p, 100, 17, "ff02::1", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 100, &from6, 1400, out, sizeof out), 0);

	/* `from` of the other family, and malformed packets. */
	mk4(p, 100, 17, "198.18.0.2", "198.18.1.1");
	assert_int_equal(ippkt_make_ptb(p, 100, &from6, 1300, out, sizeof out), 0);
	assert_int_equal(ippkt_make_ptb(p, 99, &from4, 1300, out, sizeof out), 0);
	assert_int_equal(ippkt_make_ptb(p, 0, &from4, 1300, out, sizeof out), 0);
	mk6(p, 100, 17, "fd00::2", "fd00:1::1");
	assert_int_equal(ippkt_make_ptb(p, 100, &from4, 1300, out, sizeof out), 0);
	assert_int_equal(ippkt_make_ptb(p, 100, NULL, 1300, out, sizeof out), 0);
}

static void
test_ptb_in_place(void **state)
{
	uint8_t p[1500], buf[1500];
	struct ipaddr from4 = ip("198.18.0.1"), from6 = ip("fd00::1");
	size_t n;

	(void)state;
	/* The answer may overwrite the packet it answers. */
	mk4(p, 1400, 17, "198.18.0.2", "198.18.1.1");
	memcpy(buf, p, sizeof buf);
	n = ippkt_make_ptb(buf, 1400, &from4, 1300, buf, sizeof buf);
	check_ptb4(buf, n, p, 548, "198.18.0.1", "198.18.0.2", 1300);

	mk6(p, 1500, 6, "fd00::2", "fd00:1::1");
	memcpy(buf, p, sizeof buf);
	n = ippkt_make_ptb(buf, 1500, &from6, 1400, buf, sizeof buf);
	check_ptb6(buf, n, p, 1232, "fd00::1", "fd00::2", 1400);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_v4),
		cmocka_unit_test(test_parse_v6),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_checksum),
		cmocka_unit_test(test_checksum_fast),
		cmocka_unit_test(test_ptb_v4),
		cmocka_unit_test(test_ptb_v6),
		cmocka_unit_test(test_ptb_v6_exthdr),
		cmocka_unit_test(test_no_ptb),
		cmocka_unit_test(test_ptb_in_place),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for common/wire/proto-udp.c: UDP flow headers, flow contexts
 * and flow datagrams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/proto-udp.h"

static struct proto_udp_header
hdr(uint64_t type, uint64_t ctx, const char *host, uint16_t port)
{
	struct proto_udp_header h;

	memset(&h, 0, sizeof h);
	h.type = type;
	h.ctx = ctx;
	strcpy(h.host, host);
	h.port = port;
	return h;
}

static void
poison(struct proto_udp_header *h)
{
	memset(h, 0xa5, sizeof *h);
}

static void
assert_poisoned(const struct proto_udp_header *h)
{
	struct proto_udp_header p;

	poison(&p);
	assert_memory_equal(h, &p, sizeof p);
}

/* `h` encodes to exactly `want`, and nothing is written into any smaller
 * buffer; `want` decodes back to `h`, every shorter prefix asks for more
 * and leaves the struct alone, and trailing bytes are not taken. */
static void
check_both(const struct proto_udp_header *h, const uint8_t *want, size_t n)
{
	struct proto_udp_header d;
	uint8_t buf[300];

	assert_true(n + 3 < sizeof buf);
	memset(buf, 0xee, sizeof buf);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, h), n);
	assert_memory_equal(buf, want, n);
	assert_int_equal(buf[n], 0xee);
	for (size_t i = 0; i < n; i++) {
		memset(buf, 0xee, sizeof buf);
		assert_int_equal(proto_udp_encode(buf, i, h), 0);
		for (size_t j = 0; j < sizeof buf; j++)
			assert_int_equal(buf[j], 0xee);
	}

	poison(&d);
	assert_int_equal(proto_udp_decode(want, n, &d), n);
	assert_memory_equal(&d, h, sizeof d);
	for (size_t i = 0; i < n; i++) {
		poison(&d);
		assert_int_equal(proto_udp_decode(want, i, &d), 0);
		assert_poisoned(&d);
	}
	memcpy(buf, want, n);
	memcpy(buf + n, "\x01\x02\x03", 3);
	poison(&d);
	assert_int_equal(proto_udp_decode(buf, n + 3, &d), n);
	assert_memory_equal(&d, h, sizeof d);
	assert_int_equal(proto_udp_is_udp(want, n), 1);
}

static void
test_connect(void **state)
{
	/* CONNECT, context 4, "dns.example", port 53. */
	static const uint8_t want[] = {
		0x06, 0x04, 0x0b,
		'd', 'n', 's', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e',
		0x00, 0x35,
	};
	/* Context 1000 (a 2-byte varint), an IPv6 literal, port 65535. */
	static const uint8_t v6[] = {
		0x06, 0x43, 0xe8, 0x08, 'f', 'd', '0', '0', ':', ':', '5', '3',
		0xff, 0xff,
	};
	struct proto_udp_header h;

	(void)state;
	h = hdr(PROTO_FWD_UDP_CONNECT, 4, "dns.example", 53);
	check_both(&h, want, sizeof want);
	h = hdr(PROTO_FWD_UDP_CONNECT, 1000, "fd00::53", 65535);
	check_both(&h, v6, sizeof v6);
}

static void
test_remote(void **state)
{
	/* REMOTE, context 5, listener port 5353: no host at all. */
	static const uint8_t want[] = { 0x07, 0x05, 0x14, 0xe9 };
	/* The largest context: an 8-byte varint. */
	static const uint8_t big[] = {
		0x07, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x01,
	};
	struct proto_udp_header h;

	(void)state;
	h = hdr(PROTO_FWD_UDP_REMOTE, 5, "", 5353);
	check_both(&h, want, sizeof want);
	h = hdr(PROTO_FWD_UDP_REMOTE, PROTO_CTX_UDP_MAX, "", 1);
	check_both(&h, big, sizeof big);
}

static void
test_encode_refuses(void **state)
{
	struct proto_udp_header h;
	uint8_t buf[300];

	(void)state;
	/* The tunnel's contexts, the other side's parity, too large. */
	for (uint64_t ctx = 0; ctx < 4; ctx++) {
		h = hdr(PROTO_FWD_UDP_CONNECT, ctx, "a", 1);
		assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
		h = hdr(PROTO_FWD_UDP_REMOTE, ctx, "", 1);
		assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	}
	h = hdr(PROTO_FWD_UDP_CONNECT, 5, "a", 1);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_UDP_REMOTE, 6, "", 1);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_UDP_CONNECT, PROTO_CTX_UDP_MAX + 1, "a", 1);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	/* Port 0, a host where none belongs or none where one does, a bad
	 * host, a TCP header type. */
	h = hdr(PROTO_FWD_UDP_CONNECT, 4, "a", 0);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_UDP_REMOTE, 5, "a", 53);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_UDP_CONNECT, 4, "", 53);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_UDP_CONNECT, 4, "a b", 53);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_CONNECT, 4, "a", 53);
	assert_int_equal(proto_udp_encode(buf, sizeof buf, &h), 0);
}

/* Refused as soon as the bad byte is in, whatever follows. */
static void
check_malformed(const uint8_t *in, size_t n)
{
	struct proto_udp_header h;

	poison(&h);
	assert_int_equal(proto_udp_decode(in, n, &h), -1);
	assert_poisoned(&h);
}

static void
test_decode_malformed(void **state)
{
	static const uint8_t tcp[] = { 0x01 };
	static const uint8_t ctx_tunnel[] = { 0x06, 0x00 };
	static const uint8_t ctx3[] = { 0x07, 0x03 };
	static const uint8_t ctx_odd[] = { 0x06, 0x05 };
	static const uint8_t ctx_even[] = { 0x07, 0x04 };
	static const uint8_t nohost[] = { 0x06, 0x04, 0x00 };
	static const uint8_t longhost[] = { 0x06, 0x04, 0x41, 0x00 };
	static const uint8_t badhost[] = { 0x06, 0x04, 0x03, 'a', '/' };
	static const uint8_t port0[] = { 0x06, 0x04, 0x01, 'a', 0x00, 0x00 };
	static const uint8_t rport0[] = { 0x07, 0x05, 0x00, 0x00 };

	(void)state;
	check_malformed(tcp, sizeof tcp);
	check_malformed(ctx_tunnel, sizeof ctx_tunnel);
	check_malformed(ctx3, sizeof ctx3);
	check_malformed(ctx_odd, sizeof ctx_odd);
	check_malformed(ctx_even, sizeof ctx_even);
	check_malformed(nohost, sizeof nohost);
	check_malformed(longhost, sizeof longhost);
	check_malformed(badhost, sizeof badhost);
	check_malformed(port0, sizeof port0);
	check_malformed(rport0, sizeof rport0);
}

static void
test_is_udp(void **state)
{
	static const uint8_t connect[] = { 0x01 };
	static const uint8_t resume[] = { 0x05 };
	static const uint8_t udp[] = { 0x06 };
	static const uint8_t udp_remote[] = { 0x07 };
	static const uint8_t cut[] = { 0x40 };

	(void)state;
	assert_int_equal(proto_udp_is_udp(connect, 1), 0);
	assert_int_equal(proto_udp_is_udp(resume, 1), 0);
	assert_int_equal(proto_udp_is_udp(udp, 1), 1);
	assert_int_equal(proto_udp_is_udp(udp_remote, 1), 1);
	assert_int_equal(proto_udp_is_udp(cut, 1), -1);
	assert_int_equal(proto_udp_is_udp(udp, 0), -1);
}

static void
test_ctx(void **state)
{
	(void)state;
	assert_false(proto_udp_ctx_valid(0, PROTO_UDP_BY_CLIENT));
	assert_false(proto_udp_ctx_valid(2, PROTO_UDP_BY_CLIENT));
	assert_false(proto_udp_ctx_valid(3, PROTO_UDP_BY_SERVER));
	assert_true(proto_udp_ctx_valid(4, PROTO_UDP_BY_CLIENT));
	assert_false(proto_udp_ctx_valid(4, PROTO_UDP_BY_SERVER));
	assert_true(proto_udp_ctx_valid(5, PROTO_UDP_BY_SERVER));
	assert_false(proto_udp_ctx_valid(5, PROTO_UDP_BY_CLIENT));
	assert_true(proto_udp_ctx_valid(PROTO_CTX_UDP_MAX, PROTO_UDP_BY_SERVER));
	assert_false(proto_udp_ctx_valid(PROTO_CTX_UDP_MAX + 1,
	    PROTO_UDP_BY_CLIENT));

	assert_true(proto_udp_ctx_next(0, PROTO_UDP_BY_CLIENT) == 4);
	assert_true(proto_udp_ctx_next(4, PROTO_UDP_BY_CLIENT) == 6);
	assert_true(proto_udp_ctx_next(5, PROTO_UDP_BY_CLIENT) == 6);
	assert_true(proto_udp_ctx_next(0, PROTO_UDP_BY_SERVER) == 5);
	assert_true(proto_udp_ctx_next(5, PROTO_UDP_BY_SERVER) == 7);
	assert_true(proto_udp_ctx_next(6, PROTO_UDP_BY_SERVER) == 7);
	assert_true(proto_udp_ctx_next(PROTO_CTX_UDP_MAX - 1,
	    PROTO_UDP_BY_CLIENT) == 0);
	assert_true(proto_udp_ctx_next(PROTO_CTX_UDP_MAX - 2,
	    PROTO_UDP_BY_SERVER) == PROTO_CTX_UDP_MAX);
	assert_true(proto_udp_ctx_next(PROTO_CTX_UDP_MAX,
	    PROTO_UDP_BY_SERVER) == 0);
}

static void
test_dgram(void **state)
{
	static const uint8_t payload[] = { 0xde, 0xad, 0xbe, 0xef };
	static const uint8_t want4[] = { 0x04, 0xde, 0xad, 0xbe, 0xef };
	static const uint8_t want1000[] = { 0x43, 0xe8, 0xde, 0xad, 0xbe, 0xef };
	uint8_t buf[16];
	const uint8_t *body;
	size_t blen;
	uint64_t ctx;

	(void)state;
	assert_int_equal(proto_udp_dgram_encode(buf, sizeof buf, 4, payload, 4), 5);
	assert_memory_equal(buf, want4, 5);
	assert_int_equal(proto_udp_dgram_encode(buf, 6, 1000, payload, 4), 6);
	assert_memory_equal(buf, want1000, 6);
	/* It reads back with the tunnel's own context split. */
	assert_int_equal(proto_dgram_decode(buf, 6, &ctx, &body, &blen), 0);
	assert_true(ctx == 1000);
	assert_int_equal(blen, 4);
	assert_memory_equal(body, payload, 4);
	/* One byte short: nothing, never a cut datagram. */
	assert_int_equal(proto_udp_dgram_encode(buf, 5, 1000, payload, 4), 0);
	assert_int_equal(proto_udp_dgram_encode(buf, 0, 4, payload, 0), 0);
	assert_int_equal(proto_udp_dgram_encode(buf, 1, 4, payload, 0), 1);
	/* Not a flow context. */
	assert_int_equal(proto_udp_dgram_encode(buf, sizeof buf, 0, payload, 4), 0);
	assert_int_equal(proto_udp_dgram_encode(buf, sizeof buf,
	    PROTO_CTX_UDP_MAX + 1, payload, 4), 0);

	assert_int_equal(proto_udp_dgram_room(1200, 4), 1199);
	assert_int_equal(proto_udp_dgram_room(1200, 1000), 1198);
	assert_int_equal(proto_udp_dgram_room(1, 1000), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect),
		cmocka_unit_test(test_remote),
		cmocka_unit_test(test_encode_refuses),
		cmocka_unit_test(test_decode_malformed),
		cmocka_unit_test(test_is_udp),
		cmocka_unit_test(test_ctx),
		cmocka_unit_test(test_dgram),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

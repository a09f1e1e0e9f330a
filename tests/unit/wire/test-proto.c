/* Unit tests for common/wire/proto.c: varints, datagram contexts, control messages. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "wire/proto.h"

static struct prefix
pfx(const char *s, uint8_t len)
{
	struct prefix p;

	memset(&p, 0, sizeof p);
	p.addr.family = strchr(s, ':') != NULL ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(p.addr.family, s, p.addr.b), 1);
	p.len = len;
	return p;
}

static void
assert_prefix_equal(const struct prefix *a, const struct prefix *b)
{
	assert_int_equal(a->addr.family, b->addr.family);
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->addr.b, b->addr.b, 16);
}

/* The server config of docs/PROTOCOL.md's example, and its bytes. */
static void
example_config(struct proto_server_config *c)
{
	memset(c, 0, sizeof *c);
	c->version = 1;
	c->addrs[0] = pfx("10.77.0.2", 24);
	c->addrs[1] = pfx("fd00:77::2", 64);
	c->naddrs = 2;
	c->routes[0] = pfx("10.77.0.0", 24);
	c->nroutes = 1;
	c->mtu = 1380;
	c->keepalive = 15;
}

static const uint8_t example_bytes[] = {
	0x02, 0x2e,                   /* SERVER_CONFIG, 46 bytes */
	0x01, 0x01, 0x01,             /* version 1 */
	0x02, 0x06, 0x04, 0x18, 0x0a, 0x4d, 0x00, 0x02, /* 10.77.0.2/24 */
	0x02, 0x12, 0x06, 0x40,       /* fd00:77::2/64 */
	0xfd, 0x00, 0x00, 0x77, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
	0x03, 0x06, 0x04, 0x18, 0x0a, 0x4d, 0x00, 0x00, /* route 10.77.0.0/24 */
	0x04, 0x02, 0x45, 0x64,       /* mtu 1380 */
	0x05, 0x01, 0x0f,             /* keepalive 15 */
};

static void
test_varint_len(void **state)
{
	(void)state;
	assert_int_equal(varint_len(0), 1);
	assert_int_equal(varint_len(63), 1);
	assert_int_equal(varint_len(64), 2);
	assert_int_equal(varint_len(16383), 2);
	assert_int_equal(varint_len(16384), 4);
	assert_int_equal(varint_len((UINT64_C(1) << 30) - 1), 4);
	assert_int_equal(varint_len(UINT64_C(1) << 30), 8);
	assert_int_equal(varint_len((UINT64_C(1) << 62) - 1), 8);
	assert_int_equal(varint_len(UINT64_C(1) << 62), 0);
	assert_int_equal(varint_len(UINT64_MAX), 0);
}

static void
check_put_get(uint64_t v, const uint8_t *want, size_t n)
{
	uint8_t buf[9];
	uint64_t got;

	memset(buf, 0xee, sizeof buf);
	assert_int_equal(varint_put(buf, sizeof buf, v), n);
	assert_memory_equal(buf, want, n);
	assert_int_equal(buf[n], 0xee);
	/* One byte less room writes nothing. */
	memset(buf, 0xee, sizeof buf);
	assert_int_equal(varint_put(buf, n - 1, v), 0);
	for (size_t i = 0; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0xee);

	got = 12345;
	assert_int_equal(varint_get(want, n, &got), n);
	assert_true(got == v);
	/* Every truncation needs more bytes. */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(varint_get(want, i, &got), 0);
}

static void
test_varint_put_get(void **state)
{
	static const uint8_t v0[] = { 0x00 };
	static const uint8_t v63[] = { 0x3f };
	static const uint8_t v64[] = { 0x40, 0x40 };
	static const uint8_t v16383[] = { 0x7f, 0xff };
	static const uint8_t v16384[] = { 0x80, 0x00, 0x40, 0x00 };
	static const uint8_t v30m1[] = { 0xbf, 0xff, 0xff, 0xff };
	static const uint8_t v30[] = { 0xc0, 0, 0, 0, 0x40, 0, 0, 0 };
	static const uint8_t v62m1[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff };
	uint8_t buf[8];

	(void)state;
	check_put_get(0, v0, 1);
	check_put_get(63, v63, 1);
	check_put_get(64, v64, 2);
	check_put_get(16383, v16383, 2);
	check_put_get(16384, v16384, 4);
	check_put_get((UINT64_C(1) << 30) - 1, v30m1, 4);
	check_put_get(UINT64_C(1) << 30, v30, 8);
	check_put_get((UINT64_C(1) << 62) - 1, v62m1, 8);
	assert_int_equal(varint_put(buf, sizeof buf, UINT64_C(1) << 62), 0);
	assert_int_equal(varint_put(buf, sizeof buf, UINT64_MAX), 0);
}

static void
test_varint_rfc_examples(void **state)
{
	/* RFC 9000 appendix A.1, including a non-minimal encoding. */
	static const uint8_t e8[] = { 0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14,
		0xe8, 0x8c };
	static const uint8_t e4[] = { 0x9d, 0x7f, 0x3e, 0x7d };
	static const uint8_t e2[] = { 0x7b, 0xbd };
	static const uint8_t e1[] = { 0x25 };
	static const uint8_t e2n[] = { 0x40, 0x25 };
	uint64_t v;

	(void)state;
	assert_int_equal(varint_get(e8, sizeof e8, &v), 8);
	assert_true(v == UINT64_C(151288809941952652));
	assert_int_equal(varint_get(e4, sizeof e4, &v), 4);
	assert_true(v == 494878333);
	assert_int_equal(varint_get(e2, sizeof e2, &v), 2);
	assert_true(v == 15293);
	assert_int_equal(varint_get(e1, sizeof e1, &v), 1);
	assert_true(v == 37);
	assert_int_equal(varint_get(e2n, sizeof e2n, &v), 2);
	assert_true(v == 37);
	assert_int_equal(varint_get(e1, 0, &v), 0);
}

static void
test_dgram(void **state)
{
	static const uint8_t ip[] = { 0x00, 0x45, 0x00, 0x00, 0x14 };
	static const uint8_t ctx1[] = { 0x40, 0x01, 0xaa };
	static const uint8_t bare[] = { 0x05 };
	static const uint8_t cut[] = { 0x40 };
	const uint8_t *body;
	size_t bodylen;
	uint64_t ctx;

	(void)state;
	assert_int_equal(proto_dgram_decode(ip, sizeof ip, &ctx, &body, &bodylen), 0);
	assert_true(ctx == PROTO_CTX_IP);
	assert_ptr_equal(body, ip + 1);
	assert_int_equal(bodylen, 4);

	assert_int_equal(proto_dgram_decode(ctx1, sizeof ctx1, &ctx, &body,
	    &bodylen), 0);
	assert_true(ctx == 1);
	assert_ptr_equal(body, ctx1 + 2);
	assert_int_equal(bodylen, 1);

	assert_int_equal(proto_dgram_decode(bare, sizeof bare, &ctx, &body,
	    &bodylen), 0);
	assert_true(ctx == 5);
	assert_int_equal(bodylen, 0);

	assert_int_equal(proto_dgram_decode(cut, sizeof cut, &ctx, &body,
	    &bodylen), -1);
	assert_int_equal(proto_dgram_decode(ip, 0, &ctx, &body, &bodylen), -1);
}

static void
test_msg_next(void **state)
{
	/* Two messages back to back: an empty hello, then type 0x4123 with
	 * a 2-byte body. */
	static const uint8_t two[] = { 0x01, 0x00, 0x41, 0x23, 0x02, 0xaa, 0xbb };
	/* Length 4097 (0x5001): refused before the body arrives. */
	static const uint8_t big[] = { 0x01, 0x50, 0x01 };
	/* Length 4096 is the largest accepted; it just waits. */
	static const uint8_t max[] = { 0x01, 0x50, 0x00 };
	/* An 8-byte length varint holding 2^62 - 1. */
	static const uint8_t huge[] = { 0x02, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff };
	uint8_t whole[3 + PROTO_MAX_MSG];
	const uint8_t *body;
	size_t bodylen;
	uint64_t type;

	(void)state;
	assert_int_equal(proto_msg_next(two, sizeof two, &type, &body, &bodylen), 2);
	assert_true(type == 1);
	assert_ptr_equal(body, two + 2);
	assert_int_equal(bodylen, 0);
	assert_int_equal(proto_msg_next(two + 2, sizeof two - 2, &type, &body,
	    &bodylen), 5);
	assert_true(type == 0x0123);
	assert_ptr_equal(body, two + 5);
	assert_int_equal(bodylen, 2);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(proto_msg_next(two + 2, i, &type, &body,
		    &bodylen), 0);

	assert_int_equal(proto_msg_next(big, sizeof big, &type, &body, &bodylen), -1);
	assert_int_equal(proto_msg_next(huge, sizeof huge, &type, &body,
	    &bodylen), -1);
	assert_int_equal(proto_msg_next(max, sizeof max, &type, &body, &bodylen), 0);
	memset(whole, 0x33, sizeof whole);
	memcpy(whole, max, sizeof max);
	assert_int_equal(proto_msg_next(whole, sizeof whole, &type, &body,
	    &bodylen), 3 + PROTO_MAX_MSG);
	assert_int_equal(bodylen, PROTO_MAX_MSG);
	assert_int_equal(proto_msg_next(whole, sizeof whole - 1, &type, &body,
	    &bodylen), 0);
	assert_int_equal(proto_msg_next(NULL, 0, &type, &body, &bodylen), 0);
}

static void
test_server_config_bytes(void **state)
{
	struct proto_server_config c, d;
	uint8_t buf[256];
	const uint8_t *body;
	size_t n, bodylen;
	uint64_t type;

	(void)state;
	example_config(&c);
	n = proto_encode_server_config(buf, sizeof buf, &c);
	assert_int_equal(n, sizeof example_bytes);
	assert_memory_equal(buf, example_bytes, sizeof example_bytes);

	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_true(type == PROTO_MSG_SERVER_CONFIG);
	assert_int_equal(bodylen, 46);
	memset(&d, 0xa5, sizeof d);
	assert_int_equal(proto_decode_server_config(body, bodylen, &d), 0);
	assert_true(d.version == 1);
	assert_int_equal(d.naddrs, 2);
	assert_prefix_equal(&d.addrs[0], &c.addrs[0]);
	assert_prefix_equal(&d.addrs[1], &c.addrs[1]);
	assert_int_equal(d.nroutes, 1);
	assert_prefix_equal(&d.routes[0], &c.routes[0]);
	assert_int_equal(d.mtu, 1380);
	assert_int_equal(d.keepalive, 15);

	/* Exactly as long as needed, and one byte short. */
	assert_int_equal(proto_encode_server_config(buf, n, &c), n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(proto_encode_server_config(buf, i, &c), 0);
}

static void
test_server_config_round_trip(void **state)
{
	struct proto_server_config c, d;
	uint8_t buf[PROTO_MAX_MSG + 8];
	const uint8_t *body;
	size_t n, bodylen;
	uint64_t type;
	char s[32];

	(void)state;
	memset(&c, 0, sizeof c);
	c.version = 7;
	c.addrs[0] = pfx("fd00::5", 128);
	c.naddrs = 1;
	for (size_t i = 0; i < PROTO_MAX_ROUTES; i++) {
		if (i % 2 == 0) {
			snprintf(s, sizeof s, "10.%zu.0.0", i);
			c.routes[i] = pfx(s, (uint8_t)(i % 33));
		} else {
			snprintf(s, sizeof s, "2001:db8:%zx::", i);
			c.routes[i] = pfx(s, (uint8_t)(i * 2));
		}
	}
	c.routes[0] = pfx("0.0.0.0", 0);
	c.routes[1] = pfx("::", 0);
	c.routes[2] = pfx("192.0.2.1", 32);
	c.nroutes = PROTO_MAX_ROUTES;
	c.mtu = UINT32_MAX;
	c.keepalive = 0;

	n = proto_encode_server_config(buf, sizeof buf, &c);
	assert_true(n > 0);
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_true(type == PROTO_MSG_SERVER_CONFIG);
	assert_int_equal(proto_decode_server_config(body, bodylen, &d), 0);
	assert_true(d.version == 7);
	assert_int_equal(d.naddrs, 1);
	assert_prefix_equal(&d.addrs[0], &c.addrs[0]);
	assert_int_equal(d.nroutes, PROTO_MAX_ROUTES);
	for (size_t i = 0; i < PROTO_MAX_ROUTES; i++)
		assert_prefix_equal(&d.routes[i], &c.routes[i]);
	assert_int_equal(d.mtu, UINT32_MAX);
	assert_int_equal(d.keepalive, 0);

	/* Features only when there are some: field 8, after the rest. */
	memset(&c, 0, sizeof c);
	c.features = PROTO_FEATURE_CANCEL_REMOTE;
	n = proto_encode_server_config(buf, sizeof buf, &c);
	assert_int_equal(n, 2 + 9 + 3);
	assert_memory_equal(buf + n - 3, "\x08\x01\x01", 3);
	assert_int_equal(proto_decode_server_config(buf + 2, n - 2, &d), 0);
	assert_true(d.features == PROTO_FEATURE_CANCEL_REMOTE);

	/* Nothing to say: just the scalars. */
	memset(&c, 0, sizeof c);
	n = proto_encode_server_config(buf, sizeof buf, &c);
	assert_int_equal(n, 2 + 9);
	assert_int_equal(proto_decode_server_config(buf + 2, n - 2, &d), 0);
	assert_int_equal(d.naddrs, 0);
	assert_int_equal(d.nroutes, 0);
}

static void
test_server_config_encode_refuses(void **state)
{
	struct proto_server_config c;
	uint8_t buf[PROTO_MAX_MSG + 8];

	(void)state;
	example_config(&c);
	c.naddrs = 3;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_config(&c);
	c.nroutes = PROTO_MAX_ROUTES + 1;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_config(&c);
	c.routes[0].len = 33;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_config(&c);
	c.addrs[1].len = 129;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_config(&c);
	c.addrs[0].addr.family = AF_UNIX;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_config(&c);
	c.version = UINT64_C(1) << 62;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
}

static int dec_config(const uint8_t *, size_t, struct proto_server_config *);

/* The example with the DNS fields docs/PROTOCOL.md shows: the same 46
 * bytes, then two servers and two search domains. */
static const uint8_t example_dns_bytes[] = {
	0x06, 0x05, 0x04, 0xc6, 0x13, 0x4d, 0x01, /* dns 198.19.77.1 */
	0x06, 0x11, 0x06,                         /* dns fd00:77::1 */
	0xfd, 0x00, 0x00, 0x77, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x07, 0x0c, 'c', 'o', 'r', 'p', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e',
	0x07, 0x0b, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'o', 'r', 'g',
};

static void
example_dns_config(struct proto_server_config *c)
{
	example_config(c);
	c->dns[0] = pfx("198.19.77.1", 32).addr;
	c->dns[1] = pfx("fd00:77::1", 128).addr;
	c->ndns = 2;
	snprintf(c->dns_search[0], sizeof c->dns_search[0], "corp.example");
	snprintf(c->dns_search[1], sizeof c->dns_search[1], "example.org");
	c->ndns_search = 2;
}

static void
test_server_config_dns(void **state)
{
	struct proto_server_config c, d;
	uint8_t buf[256], want[256];
	const uint8_t *body;
	size_t n, bodylen, wantlen;
	uint64_t type;

	(void)state;
	example_dns_config(&c);
	/* 46 + 53 = 99 bytes of body: a two-byte length (0x40 0x63). */
	want[0] = 0x02;
	want[1] = 0x40;
	want[2] = 0x63;
	memcpy(want + 3, example_bytes + 2, sizeof example_bytes - 2);
	wantlen = 3 + sizeof example_bytes - 2;
	memcpy(want + wantlen, example_dns_bytes, sizeof example_dns_bytes);
	wantlen += sizeof example_dns_bytes;
	assert_int_equal(wantlen, 3 + 99);
	n = proto_encode_server_config(buf, sizeof buf, &c);
	assert_int_equal(n, wantlen);
	assert_memory_equal(buf, want, wantlen);

	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	memset(&d, 0xa5, sizeof d);
	assert_int_equal(proto_decode_server_config(body, bodylen, &d), 0);
	assert_int_equal(d.ndns, 2);
	assert_int_equal(d.dns[0].family, AF_INET);
	assert_memory_equal(d.dns[0].b, c.dns[0].b, 4);
	assert_int_equal(d.dns[1].family, AF_INET6);
	assert_memory_equal(d.dns[1].b, c.dns[1].b, 16);
	assert_int_equal(d.ndns_search, 2);
	assert_string_equal(d.dns_search[0], "corp.example");
	assert_string_equal(d.dns_search[1], "example.org");
	/* The rest reads as before: a receiver that skips fields 6 and 7
	 * (any older client) sees exactly the example. */
	assert_int_equal(d.naddrs, 2);
	assert_int_equal(d.nroutes, 1);
	assert_int_equal(d.mtu, 1380);
	assert_int_equal(d.keepalive, 15);

	/* The most a message carries: 8 servers, 8 names of 253 bytes,
	 * with 64 IPv6 routes and two addresses, still within 4096. */
	memset(&c, 0, sizeof c);
	c.version = 1;
	c.naddrs = 2;
	c.addrs[0] = pfx("198.19.77.2", 24);
	c.addrs[1] = pfx("fd00:77::2", 64);
	for (size_t i = 0; i < PROTO_MAX_ROUTES; i++)
		c.routes[c.nroutes++] = pfx("2001:db8::", 64);
	for (size_t i = 0; i < PROTO_MAX_DNS; i++)
		c.dns[c.ndns++] = pfx("2001:db8::53", 128).addr;
	for (size_t i = 0; i < PROTO_MAX_DNS_SEARCH; i++) {
		/* 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 */
		memset(c.dns_search[i], 'a', 253);
		c.dns_search[i][63] = c.dns_search[i][127] = c.dns_search[i][191] = '.';
		c.dns_search[i][0] = (char)('a' + i);
		c.dns_search[i][253] = '\0';
		c.ndns_search++;
	}
	{
		uint8_t big[PROTO_MAX_MSG + 8];

		n = proto_encode_server_config(big, sizeof big, &c);
		assert_true(n > 0);
		assert_int_equal(proto_msg_next(big, n, &type, &body, &bodylen),
		    (long)n);
		assert_int_equal(proto_decode_server_config(body, bodylen, &d), 0);
		assert_int_equal(d.ndns, PROTO_MAX_DNS);
		assert_int_equal(d.ndns_search, PROTO_MAX_DNS_SEARCH);
		for (size_t i = 0; i < PROTO_MAX_DNS_SEARCH; i++)
			assert_string_equal(d.dns_search[i], c.dns_search[i]);
	}

	/* The encoder sends nothing the decoder would refuse. */
	example_dns_config(&c);
	c.ndns = PROTO_MAX_DNS + 1;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_dns_config(&c);
	c.ndns_search = PROTO_MAX_DNS_SEARCH + 1;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_dns_config(&c);
	c.dns[1].family = AF_UNIX;
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_dns_config(&c);
	snprintf(c.dns_search[1], sizeof c.dns_search[1], "a\nnameserver 6.6.6.6");
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_dns_config(&c);
	c.dns_search[0][0] = '\0';
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
	example_dns_config(&c);
	memset(c.dns_search[0], 'a', sizeof c.dns_search[0]);
	assert_int_equal(proto_encode_server_config(buf, sizeof buf, &c), 0);
}

static void
test_server_config_dns_malformed(void **state)
{
	static const uint8_t v4[] = { 0x06, 0x05, 0x04, 192, 0, 2, 53 };
	static const uint8_t v4_long[] = { 0x06, 0x06, 0x04, 192, 0, 2, 53, 0 };
	static const uint8_t v4_short[] = { 0x06, 0x04, 0x04, 192, 0, 2 };
	static const uint8_t fam5[] = { 0x06, 0x05, 0x05, 192, 0, 2, 53 };
	static const uint8_t v6_as_v4[] = { 0x06, 0x05, 0x06, 192, 0, 2, 53 };
	static const uint8_t empty_addr[] = { 0x06, 0x00 };
	static const uint8_t name[] = { 0x07, 0x03, 'a', '.', 'b' };
	static const uint8_t empty_name[] = { 0x07, 0x00 };
	static const uint8_t nl[] = { 0x07, 0x03, 'a', '\n', 'b' };
	static const uint8_t space[] = { 0x07, 0x03, 'a', ' ', 'b' };
	static const uint8_t nul[] = { 0x07, 0x03, 'a', '\0', 'b' };
	static const uint8_t dot[] = { 0x07, 0x02, 'a', '.' };
	static const uint8_t digits[] = { 0x07, 0x03, '1', '.', '2' };
	static const uint8_t high[] = { 0x07, 0x02, 'a', 0xe9 };
	uint8_t many[(PROTO_MAX_DNS + 1) * sizeof v4];
	uint8_t names[(PROTO_MAX_DNS_SEARCH + 1) * sizeof name];
	uint8_t longname[3 + 254];
	struct proto_server_config c;

	(void)state;
	assert_int_equal(dec_config(v4, sizeof v4, &c), 0);
	assert_int_equal(c.ndns, 1);
	assert_int_equal(dec_config(v4_long, sizeof v4_long, &c), -1);
	assert_int_equal(dec_config(v4_short, sizeof v4_short, &c), -1);
	assert_int_equal(dec_config(fam5, sizeof fam5, &c), -1);
	assert_int_equal(dec_config(v6_as_v4, sizeof v6_as_v4, &c), -1);
	assert_int_equal(dec_config(empty_addr, sizeof empty_addr, &c), -1);
	assert_int_equal(dec_config(name, sizeof name, &c), 0);
	assert_int_equal(c.ndns_search, 1);
	assert_string_equal(c.dns_search[0], "a.b");
	/* What could make another line of resolv.conf, or hide part of
	 * one, is refused, and so is anything not a plain name. */
	assert_int_equal(dec_config(empty_name, sizeof empty_name, &c), -1);
	assert_int_equal(dec_config(nl, sizeof nl, &c), -1);
	assert_int_equal(dec_config(space, sizeof space, &c), -1);
	assert_int_equal(dec_config(nul, sizeof nul, &c), -1);
	assert_int_equal(dec_config(dot, sizeof dot, &c), -1);
	assert_int_equal(dec_config(digits, sizeof digits, &c), -1);
	assert_int_equal(dec_config(high, sizeof high, &c), -1);

	for (size_t i = 0; i < PROTO_MAX_DNS + 1; i++)
		memcpy(many + i * sizeof v4, v4, sizeof v4);
	assert_int_equal(dec_config(many, PROTO_MAX_DNS * sizeof v4, &c), 0);
	assert_int_equal(c.ndns, PROTO_MAX_DNS);
	assert_int_equal(dec_config(many, sizeof many, &c), -1);
	for (size_t i = 0; i < PROTO_MAX_DNS_SEARCH + 1; i++)
		memcpy(names + i * sizeof name, name, sizeof name);
	assert_int_equal(dec_config(names, PROTO_MAX_DNS_SEARCH * sizeof name,
	    &c), 0);
	assert_int_equal(c.ndns_search, PROTO_MAX_DNS_SEARCH);
	assert_int_equal(dec_config(names, sizeof names, &c), -1);

	/* 253 bytes is the longest name; 254 is refused. */
	longname[0] = 0x07;
	longname[1] = 0x40;
	longname[2] = 254;
	memset(longname + 3, 'a', 254);
	for (size_t i = 3 + 50; i < sizeof longname; i += 51)
		longname[i] = '.';
	assert_int_equal(dec_config(longname, sizeof longname, &c), -1);
	longname[2] = 253;
	assert_int_equal(dec_config(longname, sizeof longname - 1, &c), 0);
	assert_int_equal(strlen(c.dns_search[0]), 253);
}

static void
test_truncation(void **state)
{
	/* Field boundaries inside example_bytes' 46-byte body. */
	static const size_t cuts[] = { 0, 3, 11, 31, 39, 43, 46 };
	struct proto_server_config c, d;
	const uint8_t *body;
	size_t bodylen;
	uint64_t type;
	bool boundary;

	(void)state;
	for (size_t i = 0; i < sizeof example_bytes; i++)
		assert_int_equal(proto_msg_next(example_bytes, i, &type, &body,
		    &bodylen), 0);

	example_config(&c);
	body = example_bytes + 2;
	for (size_t k = 0; k <= 46; k++) {
		boundary = false;
		for (size_t j = 0; j < sizeof cuts / sizeof cuts[0]; j++)
			boundary |= cuts[j] == k;
		assert_int_equal(proto_decode_server_config(body, k, &d),
		    boundary ? 0 : -1);
	}
	/* A cut at a boundary is a shorter, valid message. */
	assert_int_equal(proto_decode_server_config(body, 31, &d), 0);
	assert_true(d.version == 1);
	assert_int_equal(d.naddrs, 2);
	assert_int_equal(d.nroutes, 0);
	assert_int_equal(d.mtu, 0);
}

/* Decode a hand-made server config body. */
static int
dec_config(const uint8_t *b, size_t len, struct proto_server_config *c)
{
	return proto_decode_server_config(b, len, c);
}

static void
test_server_config_malformed(void **state)
{
	static const uint8_t past[] = { 0x04, 0x03, 0x45, 0x64 };
	static const uint8_t cut_id[] = { 0x40 };
	static const uint8_t cut_len[] = { 0x04, 0x40 };
	static const uint8_t empty_scalar[] = { 0x04, 0x00 };
	static const uint8_t trailing[] = { 0x04, 0x03, 0x45, 0x64, 0x00 };
	static const uint8_t short_scalar[] = { 0x04, 0x01, 0x45 };
	static const uint8_t mtu_big[] = { 0x04, 0x08, 0xc0, 0, 0, 1, 0, 0, 0, 0 };
	static const uint8_t ka_big[] = { 0x05, 0x08, 0xc0, 0, 0, 1, 0, 0, 0, 0 };
	static const uint8_t mtu_max[] = { 0x04, 0x08, 0xc0, 0, 0, 0, 0xff,
		0xff, 0xff, 0xff };
	static const uint8_t fam5[] = { 0x02, 0x06, 0x05, 0x18, 10, 0, 0, 1 };
	static const uint8_t v4_33[] = { 0x03, 0x06, 0x04, 0x21, 10, 0, 0, 1 };
	static const uint8_t v4_32[] = { 0x03, 0x06, 0x04, 0x20, 10, 0, 0, 1 };
	static const uint8_t v4_long[] = { 0x02, 0x07, 0x04, 0x18, 10, 0, 0, 1, 0 };
	static const uint8_t v4_short[] = { 0x02, 0x05, 0x04, 0x18, 10, 0, 0 };
	static const uint8_t v6_as_v4[] = { 0x02, 0x06, 0x06, 0x18, 10, 0, 0, 1 };
	static const uint8_t one_byte[] = { 0x02, 0x01, 0x04 };
	static const uint8_t no_byte[] = { 0x03, 0x00 };
	uint8_t v6[20] = { 0x03, 0x12, 0x06, 0x81 };
	uint8_t three[3 * 8];
	uint8_t routes[(PROTO_MAX_ROUTES + 1) * 8];
	struct proto_server_config c;

	(void)state;
	assert_int_equal(dec_config(past, sizeof past, &c), -1);
	assert_int_equal(dec_config(cut_id, sizeof cut_id, &c), -1);
	assert_int_equal(dec_config(cut_len, sizeof cut_len, &c), -1);
	assert_int_equal(dec_config(empty_scalar, sizeof empty_scalar, &c), -1);
	assert_int_equal(dec_config(trailing, sizeof trailing, &c), -1);
	assert_int_equal(dec_config(short_scalar, sizeof short_scalar, &c), -1);
	assert_int_equal(dec_config(mtu_big, sizeof mtu_big, &c), -1);
	assert_int_equal(dec_config(ka_big, sizeof ka_big, &c), -1);
	assert_int_equal(dec_config(mtu_max, sizeof mtu_max, &c), 0);
	assert_int_equal(c.mtu, UINT32_MAX);
	assert_int_equal(dec_config(fam5, sizeof fam5, &c), -1);
	assert_int_equal(dec_config(v4_33, sizeof v4_33, &c), -1);
	assert_int_equal(dec_config(v4_32, sizeof v4_32, &c), 0);
	assert_int_equal(c.nroutes, 1);
	assert_int_equal(c.routes[0].len, 32);
	assert_int_equal(dec_config(v4_long, sizeof v4_long, &c), -1);
	assert_int_equal(dec_config(v4_short, sizeof v4_short, &c), -1);
	assert_int_equal(dec_config(v6_as_v4, sizeof v6_as_v4, &c), -1);
	assert_int_equal(dec_config(one_byte, sizeof one_byte, &c), -1);
	assert_int_equal(dec_config(no_byte, sizeof no_byte, &c), -1);
	/* IPv6 /129 refused, /128 accepted. */
	assert_int_equal(dec_config(v6, sizeof v6, &c), -1);
	v6[3] = 128;
	assert_int_equal(dec_config(v6, sizeof v6, &c), 0);
	assert_int_equal(c.routes[0].addr.family, AF_INET6);
	assert_int_equal(c.routes[0].len, 128);

	/* Two addresses pass, a third is refused. */
	for (size_t i = 0; i < 3; i++) {
		memcpy(three + i * 8, v4_32, 8);
		three[i * 8] = 0x02;
	}
	assert_int_equal(dec_config(three, 16, &c), 0);
	assert_int_equal(c.naddrs, 2);
	assert_int_equal(dec_config(three, 24, &c), -1);

	/* PROTO_MAX_ROUTES routes pass, one more is refused. */
	for (size_t i = 0; i < PROTO_MAX_ROUTES + 1; i++)
		memcpy(routes + i * 8, v4_32, 8);
	assert_int_equal(dec_config(routes, PROTO_MAX_ROUTES * 8, &c), 0);
	assert_int_equal(c.nroutes, PROTO_MAX_ROUTES);
	assert_int_equal(dec_config(routes, sizeof routes, &c), -1);
}

static void
test_unknown_and_duplicate_fields(void **state)
{
	static const uint8_t b[] = {
		0x09, 0x03, 0xff, 0xff, 0xff, /* unknown field 9 */
		0x04, 0x02, 0x45, 0x64,       /* mtu 1380 */
		0x41, 0x00, 0x00,             /* unknown field 256, empty */
		0x04, 0x02, 0x40, 0x40,       /* mtu 64: the last one wins */
		0x80, 0x01, 0x00, 0x00, 0x01, 0x07, /* unknown field 65536 */
		0x00, 0x00,                   /* unknown field 0 */
	};
	static const uint8_t hello[] = {
		0x07, 0x01, 0x3f, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03,
		0x01, 0x01, 0x02,
	};
	static const uint8_t err[] = { 0x02, 0x02, 'h', 'i', 0x3f, 0x00,
		0x01, 0x01, 0x04 };
	static const uint8_t err2[] = { 0x02, 0x03, 'a', 'b', 'x', 0x02, 0x01,
		'c' };
	struct proto_server_config c;
	struct proto_client_hello h;
	struct proto_error e;

	(void)state;
	assert_int_equal(proto_decode_server_config(b, sizeof b, &c), 0);
	assert_int_equal(c.mtu, 64);
	assert_true(c.version == 0);
	assert_int_equal(c.naddrs, 0);
	assert_int_equal(c.keepalive, 0);

	assert_int_equal(proto_decode_client_hello(hello, sizeof hello, &h), 0);
	assert_true(h.version == 2);
	assert_true(h.features == 3);

	assert_int_equal(proto_decode_error(err, sizeof err, &e), 0);
	assert_true(e.code == 4);
	assert_string_equal(e.text, "hi");

	/* A repeated text replaces the earlier one entirely. */
	assert_int_equal(proto_decode_error(err2, sizeof err2, &e), 0);
	assert_string_equal(e.text, "c");
	for (size_t i = 1; i < sizeof e.text; i++)
		assert_int_equal(e.text[i], 0);
}

static void
test_client_hello(void **state)
{
	static const uint8_t want[] = { 0x01, 0x06, 0x01, 0x01, 0x01, 0x02,
		0x01, 0x00 };
	struct proto_client_hello h = { PROTO_VERSION, 0 }, d;
	uint8_t buf[64];
	const uint8_t *body;
	size_t n, bodylen;
	uint64_t type;

	(void)state;
	n = proto_encode_client_hello(buf, sizeof buf, &h);
	assert_int_equal(n, sizeof want);
	assert_memory_equal(buf, want, sizeof want);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(proto_msg_next(buf, i, &type, &body, &bodylen), 0);
		assert_int_equal(proto_encode_client_hello(buf + 32, i, &h), 0);
	}
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_true(type == PROTO_MSG_CLIENT_HELLO);
	memset(&d, 0xa5, sizeof d);
	assert_int_equal(proto_decode_client_hello(body, bodylen, &d), 0);
	assert_true(d.version == PROTO_VERSION);
	assert_true(d.features == 0);
	/* Cut inside a field: -1; at the boundary after version: 0. */
	for (size_t k = 0; k <= bodylen; k++)
		assert_int_equal(proto_decode_client_hello(body, k, &d),
		    k == 0 || k == 3 || k == 6 ? 0 : -1);

	h.version = 300;
	h.features = (UINT64_C(1) << 62) - 1;
	n = proto_encode_client_hello(buf, sizeof buf, &h);
	assert_int_equal(n, 2 + 4 + 10);
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_int_equal(proto_decode_client_hello(body, bodylen, &d), 0);
	assert_true(d.version == 300);
	assert_true(d.features == (UINT64_C(1) << 62) - 1);

	h.features = UINT64_C(1) << 62;
	assert_int_equal(proto_encode_client_hello(buf, sizeof buf, &h), 0);
}

static void
test_path_notice(void **state)
{
	/* type 7, length 6: field 1, length 4, varint 70000 */
	static const uint8_t want[] = { 0x07, 0x06, 0x01, 0x04, 0x80, 0x01,
		0x11, 0x70 };
	struct proto_path_notice pn = { .quiet_ms = 70000 }, d;
	uint8_t buf[64];
	const uint8_t *body;
	size_t n, bodylen;
	uint64_t type;

	(void)state;
	n = proto_encode_path_notice(buf, sizeof buf, &pn);
	assert_int_equal(n, sizeof want);
	assert_memory_equal(buf, want, sizeof want);
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_true(type == PROTO_MSG_PATH_NOTICE);
	assert_int_equal(proto_decode_path_notice(body, bodylen, &d), 0);
	assert_true(d.quiet_ms == 70000);
	/* Every truncation of the body is malformed but the empty one (no
	 * field: 0 ms) and the whole. */
	for (size_t k = 0; k <= bodylen; k++) {
		assert_int_equal(proto_decode_path_notice(body, k, &d),
		    k == 0 || k == bodylen ? 0 : -1);
		if (k == 0)
			assert_true(d.quiet_ms == 0);
	}
	/* An unknown field is skipped; a field that is not a varint is not. */
	{
		static const uint8_t extra[] = { 0x09, 0x01, 0xaa, 0x01, 0x01, 0x2a };
		static const uint8_t bad[] = { 0x01, 0x02, 0x2a, 0x00 };

		assert_int_equal(proto_decode_path_notice(extra, sizeof extra, &d), 0);
		assert_true(d.quiet_ms == 42);
		assert_int_equal(proto_decode_path_notice(bad, sizeof bad, &d), -1);
	}
	/* Too small a buffer: nothing written. */
	assert_int_equal(proto_encode_path_notice(buf, sizeof want - 1, &pn), 0);
}

static void
test_loss_report(void **state)
{
	/* type 8, length 9: field 1, length 4, varint 70000; field 2,
	 * length 1, varint 9 */
	static const uint8_t want[] = { 0x08, 0x09, 0x01, 0x04, 0x80, 0x01,
		0x11, 0x70, 0x02, 0x01, 0x09 };
	struct proto_loss_report lr = { .sent = 70000, .lost = 9 }, d;
	uint8_t buf[64];
	const uint8_t *body;
	size_t n, bodylen;
	uint64_t type;

	(void)state;
	n = proto_encode_loss_report(buf, sizeof buf, &lr);
	assert_int_equal(n, sizeof want);
	assert_memory_equal(buf, want, sizeof want);
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_true(type == PROTO_MSG_LOSS_REPORT);
	assert_int_equal(proto_decode_loss_report(body, bodylen, &d), 0);
	assert_true(d.sent == 70000 && d.lost == 9);
	/* Truncations: whole fields decode (the missing one reads 0), cut
	 * ones do not. */
	for (size_t k = 0; k <= bodylen; k++)
		assert_int_equal(proto_decode_loss_report(body, k, &d),
		    k == 0 || k == 6 || k == bodylen ? 0 : -1);
	/* More lost than sent is refused; an unknown field is skipped. */
	{
		static const uint8_t more[] = { 0x01, 0x01, 0x05, 0x02, 0x01, 0x06 };
		static const uint8_t extra[] = { 0x09, 0x01, 0xaa, 0x01, 0x01,
			0x06, 0x02, 0x01, 0x06 };

		assert_int_equal(proto_decode_loss_report(more, sizeof more, &d), -1);
		assert_int_equal(proto_decode_loss_report(extra, sizeof extra, &d), 0);
		assert_true(d.sent == 6 && d.lost == 6);
	}
	assert_int_equal(proto_encode_loss_report(buf, sizeof want - 1, &lr), 0);
}

static void
test_error(void **state)
{
	static const uint8_t want[] = { 0x03, 0x1b, 0x01, 0x01, 0x05, 0x02,
		0x16, 'a', 'd', 'd', 'r', 'e', 's', 's', ' ', 'p', 'o', 'o',
		'l', ' ', 'e', 'x', 'h', 'a', 'u', 's', 't', 'e', 'd' };
	static const uint8_t nul[] = { 0x02, 0x03, 'a', 0x00, 'b' };
	struct proto_error e, d;
	uint8_t buf[PROTO_MAX_MSG];
	const uint8_t *body;
	size_t n, bodylen;
	uint64_t type;

	(void)state;
	memset(&e, 0, sizeof e);
	e.code = 5;
	strcpy(e.text, "address pool exhausted");
	n = proto_encode_error(buf, sizeof buf, &e);
	assert_int_equal(n, sizeof want);
	assert_memory_equal(buf, want, sizeof want);
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_true(type == PROTO_MSG_ERROR);
	assert_int_equal(proto_decode_error(body, bodylen, &d), 0);
	assert_true(d.code == 5);
	assert_string_equal(d.text, "address pool exhausted");
	for (size_t i = 0; i < n; i++)
		assert_int_equal(proto_msg_next(buf, i, &type, &body, &bodylen), 0);
	for (size_t k = 0; k <= bodylen; k++)
		assert_int_equal(proto_decode_error(body, k, &d),
		    k == 0 || k == 3 || k == bodylen ? 0 : -1);

	/* Empty text. */
	e.text[0] = '\0';
	e.code = 0;
	n = proto_encode_error(buf, sizeof buf, &e);
	assert_int_equal(n, 7);
	assert_int_equal(proto_decode_error(buf + 2, n - 2, &d), 0);
	assert_string_equal(d.text, "");

	/* A full 255-character text round trips exactly; an unterminated
	 * 256-byte buffer is sent as its first 255 bytes. */
	memset(e.text, 'x', sizeof e.text);
	n = proto_encode_error(buf, sizeof buf, &e);
	assert_int_equal(n, 3 + 3 + 3 + 255);
	assert_int_equal(proto_msg_next(buf, n, &type, &body, &bodylen), (long)n);
	assert_int_equal(proto_decode_error(body, bodylen, &d), 0);
	assert_int_equal(strlen(d.text), 255);

	/* A longer text on the wire is cut to 255 bytes. */
	buf[0] = 0x02;
	buf[1] = 0x41;
	buf[2] = 0x2c; /* 300 */
	memset(buf + 3, 'y', 300);
	assert_int_equal(proto_decode_error(buf, 303, &d), 0);
	assert_int_equal(strlen(d.text), 255);
	assert_int_equal(d.text[254], 'y');

	assert_int_equal(proto_decode_error(nul, sizeof nul, &d), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_len),
		cmocka_unit_test(test_varint_put_get),
		cmocka_unit_test(test_varint_rfc_examples),
		cmocka_unit_test(test_dgram),
		cmocka_unit_test(test_msg_next),
		cmocka_unit_test(test_server_config_bytes),
		cmocka_unit_test(test_server_config_round_trip),
		cmocka_unit_test(test_server_config_encode_refuses),
		cmocka_unit_test(test_server_config_dns),
		cmocka_unit_test(test_server_config_dns_malformed),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_server_config_malformed),
		cmocka_unit_test(test_unknown_and_duplicate_fields),
		cmocka_unit_test(test_client_hello),
		cmocka_unit_test(test_error),
		cmocka_unit_test(test_path_notice),
		cmocka_unit_test(test_loss_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

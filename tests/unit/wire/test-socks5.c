/* Unit tests for common/wire/socks5.c: greeting, request, replies, error codes. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cmocka.h>

#include "wire/proto-fwd.h"
#include "wire/socks5.h"

/* The greeting `in` is complete at `used` bytes with method 0 offered or
 * not; shorter prefixes ask for more and leave *no_auth alone. */
static void
check_greeting(const uint8_t *in, size_t len, long used, bool want_no_auth)
{
	bool no_auth;

	for (size_t i = 0; i < (size_t)used; i++) {
		no_auth = !want_no_auth;
		assert_int_equal(socks5_parse_greeting(in, i, &no_auth), 0);
		assert_int_equal(no_auth, !want_no_auth);
	}
	for (size_t i = (size_t)used; i <= len; i++) {
		no_auth = !want_no_auth;
		assert_int_equal(socks5_parse_greeting(in, i, &no_auth), used);
		assert_int_equal(no_auth, want_no_auth);
	}
}

/* The greeting is refused from `from` bytes on, and *no_auth left alone. */
static void
check_greeting_refused(const uint8_t *in, size_t len, size_t from)
{
	bool no_auth;

	for (size_t i = 0; i <= len; i++) {
		no_auth = true;
		assert_int_equal(socks5_parse_greeting(in, i, &no_auth),
		    i < from ? 0 : -1);
		assert_true(no_auth);
	}
}

static void
test_greeting(void **state)
{
	static const uint8_t one[] = { 0x05, 0x01, 0x00 };
	static const uint8_t two[] = { 0x05, 0x02, 0x02, 0x00 };
	static const uint8_t userpass[] = { 0x05, 0x01, 0x02 };
	static const uint8_t others[] = { 0x05, 0x03, 0x01, 0x02, 0x80 };
	/* The client's request right behind its greeting stays unread. */
	static const uint8_t pipelined[] = { 0x05, 0x01, 0x00, 0x05, 0x01, 0x00,
		0x01, 0x7f, 0x00, 0x00, 0x01, 0x00, 0x16 };

	(void)state;
	check_greeting(one, sizeof one, 3, true);
	check_greeting(two, sizeof two, 4, true);
	check_greeting(userpass, sizeof userpass, 3, false);
	check_greeting(others, sizeof others, 5, false);
	check_greeting(pipelined, sizeof pipelined, 3, true);
}

static void
test_greeting_255_methods(void **state)
{
	uint8_t in[2 + 255 + 1];

	(void)state;
	in[0] = 0x05;
	in[1] = 0xff;
	memset(in + 2, 0x02, 255);
	in[sizeof in - 1] = 0x00; /* after the methods: not one of them */
	check_greeting(in, sizeof in, 257, false);
	in[2 + 254] = 0x00;
	check_greeting(in, sizeof in, 257, true);
	in[2 + 254] = 0x02;
	in[2] = 0x00;
	check_greeting(in, sizeof in, 257, true);
}

static void
test_greeting_malformed(void **state)
{
	static const uint8_t nmethods0[] = { 0x05, 0x00, 0x00 };
	static const uint8_t v4[] = { 0x04, 0x01, 0x00, 0x50, 0x7f, 0x00, 0x00,
		0x01, 0x00 };
	static const uint8_t v0[] = { 0x00, 0x01, 0x00 };
	static const uint8_t http[] = { 'G', 'E', 'T', ' ' };

	(void)state;
	check_greeting_refused(nmethods0, sizeof nmethods0, 2);
	check_greeting_refused(v4, sizeof v4, 1);
	check_greeting_refused(v0, sizeof v0, 1);
	check_greeting_refused(http, sizeof http, 1);
}

static void
test_method_reply(void **state)
{
	uint8_t out[3];

	(void)state;
	memset(out, 0xee, sizeof out);
	assert_int_equal(socks5_method_reply(out, true), 2);
	assert_int_equal(out[0], 0x05);
	assert_int_equal(out[1], 0x00);
	assert_int_equal(out[2], 0xee);
	assert_int_equal(socks5_method_reply(out, false), 2);
	assert_int_equal(out[0], 0x05);
	assert_int_equal(out[1], 0xff);
	assert_int_equal(out[2], 0xee);
}

static void
poison(struct socks5_request *r)
{
	memset(r, 0xa5, sizeof *r);
}

static void
assert_poisoned(const struct socks5_request *r)
{
	struct socks5_request p;

	poison(&p);
	assert_memory_equal(r, &p, sizeof p);
}

/* `in` parses to `result` (bytes used, or CMD_UNSUPPORTED) with the given
 * fields; every shorter prefix asks for more; trailing bytes stay unread. */
static void
check_request(const uint8_t *in, size_t len, long result, size_t used,
    uint8_t cmd, const char *host, uint16_t port)
{
	struct socks5_request r, want;
	uint8_t more[300];

	memset(&want, 0, sizeof want);
	want.cmd = cmd;
	strcpy(want.host, host);
	want.port = port;

	for (size_t i = 0; i < used; i++) {
		poison(&r);
		assert_int_equal(socks5_parse_request(in, i, &r), 0);
		assert_poisoned(&r);
	}
	poison(&r);
	assert_int_equal(socks5_parse_request(in, len, &r), result);
	assert_int_equal(r.cmd, cmd);
	assert_string_equal(r.host, host);
	assert_int_equal(r.port, port);
	assert_memory_equal(&r, &want, sizeof r);

	assert_true(len + 2 <= sizeof more);
	memcpy(more, in, len);
	more[len] = 0x05;
	more[len + 1] = 0x00;
	poison(&r);
	assert_int_equal(socks5_parse_request(more, len + 2, &r), result);
	assert_memory_equal(&r, &want, sizeof r);
}

static void
test_request_ipv4(void **state)
{
	static const uint8_t in[] = { 0x05, 0x01, 0x00, 0x01, 0xc0, 0x00, 0x02,
		0x01, 0x00, 0x50 };
	static const uint8_t zero[] = { 0x05, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00,
		0x00, 0xff, 0xff };
	static const uint8_t bcast[] = { 0x05, 0x01, 0x00, 0x01, 0xff, 0xff, 0xff,
		0xff, 0x00, 0x01 };

	(void)state;
	check_request(in, sizeof in, 10, 10, 1, "192.0.2.1", 80);
	check_request(zero, sizeof zero, 10, 10, 1, "0.0.0.0", 65535);
	check_request(bcast, sizeof bcast, 10, 10, 1, "255.255.255.255", 1);
}

static void
test_request_ipv6(void **state)
{
	static const uint8_t in[] = { 0x05, 0x01, 0x00, 0x04,
		0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x1f, 0x90 };
	/* inet_ntop's canonical text: the longest zero run shortened, lower
	 * case, IPv4-mapped addresses in dotted form. */
	static const uint8_t two_runs[] = { 0x05, 0x01, 0x00, 0x04,
		0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x16 };
	static const uint8_t mapped[] = { 0x05, 0x01, 0x00, 0x04,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0xff, 0xff, 0xc0, 0x00, 0x02, 0x01,
		0x00, 0x16 };
	static const uint8_t any[] = { 0x05, 0x01, 0x00, 0x04,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff };
	static const uint8_t full[] = { 0x05, 0x01, 0x00, 0x04,
		0xfd, 0x00, 0xab, 0xcd, 0x00, 0x01, 0x00, 0x02,
		0x00, 0x03, 0x00, 0x04, 0x00, 0x05, 0xff, 0xff,
		0x00, 0x01 };

	(void)state;
	check_request(in, sizeof in, 22, 22, 1, "2001:db8::1", 8080);
	check_request(two_runs, sizeof two_runs, 22, 22, 1,
	    "2001:db8::1:0:0:1", 22);
	check_request(mapped, sizeof mapped, 22, 22, 1, "::ffff:192.0.2.1", 22);
	check_request(any, sizeof any, 22, 22, 1, "::", 65535);
	check_request(full, sizeof full, 22, 22, 1, "fd00:abcd:1:2:3:4:5:ffff", 1);
}

static void
test_request_domain(void **state)
{
	static const uint8_t in[] = { 0x05, 0x01, 0x00, 0x03, 0x0b,
		'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'o', 'r', 'g', 0x01, 0xbb };
	static const uint8_t one[] = { 0x05, 0x01, 0x00, 0x03, 0x01, 'x',
		0x00, 0x01 };
	/* A literal sent as a name stays text. */
	static const uint8_t literal[] = { 0x05, 0x01, 0x00, 0x03, 0x03, ':',
		':', '1', 0xff, 0xff };
	uint8_t max[5 + 255 + 2];
	char host[256];

	(void)state;
	check_request(in, sizeof in, 18, 18, 1, "example.org", 443);
	check_request(one, sizeof one, 8, 8, 1, "x", 1);
	check_request(literal, sizeof literal, 10, 10, 1, "::1", 65535);

	memcpy(max, "\x05\x01\x00\x03\xff", 5);
	memset(max + 5, 'n', 255);
	max[260] = 0x12;
	max[261] = 0x34;
	memset(host, 'n', 255);
	host[255] = '\0';
	check_request(max, sizeof max, 262, 262, 1, host, 0x1234);
}

/* A request refused with `result` from `from` bytes on; *req untouched. */
static void
check_request_refused(const uint8_t *in, size_t len, size_t from, long result)
{
	struct socks5_request r;

	for (size_t i = 0; i <= len; i++) {
		poison(&r);
		assert_int_equal(socks5_parse_request(in, i, &r),
		    i < from ? 0 : result);
		assert_poisoned(&r);
	}
}

static void
test_request_malformed(void **state)
{
	static const uint8_t v4[] = { 0x04, 0x01, 0x00, 0x01, 0x7f, 0x00, 0x00,
		0x01, 0x00, 0x16 };
	static const uint8_t rsv[] = { 0x05, 0x01, 0x01, 0x01, 0x7f, 0x00, 0x00,
		0x01, 0x00, 0x16 };
	static const uint8_t empty_name[] = { 0x05, 0x01, 0x00, 0x03, 0x00, 0x00,
		0x16 };
	static const uint8_t nul_name[] = { 0x05, 0x01, 0x00, 0x03, 0x03, 'a',
		0x00, 'b', 0x00, 0x16 };
	static const uint8_t port0_v4[] = { 0x05, 0x01, 0x00, 0x01, 0x7f, 0x00,
		0x00, 0x01, 0x00, 0x00 };
	static const uint8_t port0_name[] = { 0x05, 0x01, 0x00, 0x03, 0x01, 'a',
		0x00, 0x00 };
	static const uint8_t port0_v6[] = { 0x05, 0x01, 0x00, 0x04,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x00, 0x00 };
	static const uint8_t atyp[] = { 0, 2, 5, 6, 0x80, 0xff };
	uint8_t bad_atyp[] = { 0x05, 0x01, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x01,
		0x00, 0x16 };
	/* A bad address type wins over an unsupported command: its length is
	 * unknown, so the request cannot even be read whole. */
	static const uint8_t bind_bad_atyp[] = { 0x05, 0x02, 0x00, 0x07 };
	static const uint8_t bind_bad_rsv[] = { 0x05, 0x02, 0xff, 0x01 };

	(void)state;
	check_request_refused(v4, sizeof v4, 1, SOCKS5_MALFORMED);
	check_request_refused(rsv, sizeof rsv, 3, SOCKS5_MALFORMED);
	check_request_refused(empty_name, sizeof empty_name, 5, SOCKS5_MALFORMED);
	check_request_refused(nul_name, sizeof nul_name, 7, SOCKS5_MALFORMED);
	check_request_refused(port0_v4, sizeof port0_v4, 10, SOCKS5_MALFORMED);
	check_request_refused(port0_name, sizeof port0_name, 8, SOCKS5_MALFORMED);
	check_request_refused(port0_v6, sizeof port0_v6, 22, SOCKS5_MALFORMED);
	for (size_t i = 0; i < sizeof atyp; i++) {
		bad_atyp[3] = atyp[i];
		check_request_refused(bad_atyp, sizeof bad_atyp, 4,
		    SOCKS5_ATYP_UNSUPPORTED);
	}
	check_request_refused(bind_bad_atyp, sizeof bind_bad_atyp, 4,
	    SOCKS5_ATYP_UNSUPPORTED);
	check_request_refused(bind_bad_rsv, sizeof bind_bad_rsv, 3,
	    SOCKS5_MALFORMED);
}

/* Each byte a target name may not hold, anywhere in the name. */
static void
test_request_domain_bytes(void **state)
{
	uint8_t in[] = { 0x05, 0x01, 0x00, 0x03, 0x03, 'a', 'b', 'c', 0x00,
		0x50 };
	struct socks5_request r;
	bool ok;

	(void)state;
	for (unsigned c = 0; c < 256; c++) {
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == ':' || c == '_';
		for (size_t pos = 5; pos < 8; pos++) {
			memcpy(in + 5, "abc", 3);
			in[pos] = (uint8_t)c;
			if (ok) {
				poison(&r);
				assert_int_equal(socks5_parse_request(in,
				    sizeof in, &r), 10);
				assert_int_equal((uint8_t)r.host[pos - 5], c);
			} else
				check_request_refused(in, sizeof in, pos + 1,
				    SOCKS5_MALFORMED);
		}
	}
}

static void
test_request_unsupported_cmd(void **state)
{
	uint8_t v4[] = { 0x05, 0x02, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01, 0x04,
		0x38 };
	uint8_t name[] = { 0x05, 0x03, 0x00, 0x03, 0x01, 'h', 0x00, 0x35 };
	static const uint8_t cmds[] = { 0x00, 0x02, 0x04, 0xff };

	(void)state;
	/* Reported once the whole request is in, with its fields. */
	for (size_t i = 0; i < sizeof cmds; i++) {
		v4[1] = cmds[i];
		check_request(v4, sizeof v4, SOCKS5_CMD_UNSUPPORTED, 10, cmds[i],
		    "10.0.0.1", 1080);
		name[1] = cmds[i];
		check_request(name, sizeof name, SOCKS5_CMD_UNSUPPORTED, 8,
		    cmds[i], "h", 53);
	}
}

/* UDP ASSOCIATE is taken; its DST names the client's own address and
 * port, which may be all zeros (not known yet), or a name (PySocks sends
 * "0" and its port). */
static void
test_request_udp_associate(void **state)
{
	static const uint8_t zero[] = { 0x05, 0x03, 0x00, 0x01, 0, 0, 0, 0,
		0x00, 0x00 };
	static const uint8_t v4[] = { 0x05, 0x03, 0x00, 0x01, 0x7f, 0x00, 0x00,
		0x01, 0xa4, 0x10 };
	static const uint8_t name[] = { 0x05, 0x03, 0x00, 0x03, 0x01, '0',
		0xd4, 0x31 };
	static const uint8_t v6[] = { 0x05, 0x03, 0x00, 0x04,
		0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x00, 0x00 };
	static const uint8_t bad_name[] = { 0x05, 0x03, 0x00, 0x03, 0x01, ' ',
		0x00, 0x00 };

	(void)state;
	check_request(zero, sizeof zero, 10, 10, SOCKS5_CMD_UDP_ASSOCIATE,
	    "0.0.0.0", 0);
	check_request(v4, sizeof v4, 10, 10, SOCKS5_CMD_UDP_ASSOCIATE,
	    "127.0.0.1", 42000);
	check_request(name, sizeof name, 8, 8, SOCKS5_CMD_UDP_ASSOCIATE, "0",
	    54321);
	check_request(v6, sizeof v6, 22, 22, SOCKS5_CMD_UDP_ASSOCIATE,
	    "fd00::2", 0);
	check_request_refused(bad_name, sizeof bad_name, 6, SOCKS5_MALFORMED);
}

static void
poison_udp(struct socks5_udp_header *h)
{
	memset(h, 0xa5, sizeof *h);
}

/* The datagram `in` has a header of `used` bytes with these fields;
 * encoding them gives those bytes back exactly. */
static void
check_udp(const uint8_t *in, size_t len, size_t used, uint8_t frag,
    uint8_t atyp, const char *host, uint16_t port)
{
	struct socks5_udp_header h, want;
	uint8_t out[SOCKS5_UDP_HEADER_MAX + 8];

	memset(&want, 0, sizeof want);
	want.frag = frag;
	want.atyp = atyp;
	strcpy(want.host, host);
	want.port = port;

	poison_udp(&h);
	assert_int_equal(socks5_udp_decode(in, len, &h), (long)used);
	assert_int_equal(h.frag, frag);
	assert_int_equal(h.atyp, atyp);
	assert_string_equal(h.host, host);
	assert_int_equal(h.port, port);
	assert_memory_equal(&h, &want, sizeof h);
	/* Whole or nothing: every shorter datagram is cut short. */
	for (size_t i = 0; i < used; i++) {
		poison_udp(&h);
		assert_int_equal(socks5_udp_decode(in, i, &h), SOCKS5_MALFORMED);
	}

	memset(out, 0xee, sizeof out);
	assert_int_equal(socks5_udp_encode(out, sizeof out, &want), used);
	assert_memory_equal(out, in, used);
	assert_int_equal(out[used], 0xee);
	/* Exactly the room it needs, and not a byte less. */
	memset(out, 0xee, sizeof out);
	assert_int_equal(socks5_udp_encode(out, used, &want), used);
	assert_memory_equal(out, in, used);
	for (size_t i = 0; i < used; i++) {
		memset(out, 0xee, sizeof out);
		assert_int_equal(socks5_udp_encode(out, i, &want), 0);
		for (size_t k = 0; k < sizeof out; k++)
			assert_int_equal(out[k], 0xee);
	}
}

static void
test_udp_header(void **state)
{
	static const uint8_t v4[] = { 0x00, 0x00, 0x00, 0x01, 198, 18, 5, 7,
		0x1e, 0x61, 'p', 'a', 'y' };
	static const uint8_t v4_empty[] = { 0x00, 0x00, 0x00, 0x01, 10, 0, 0,
		1, 0x00, 0x35 };
	static const uint8_t v6[] = { 0x00, 0x00, 0x00, 0x04,
		0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34,
		0xff, 0xff, 0x01 };
	static const uint8_t name[] = { 0x00, 0x00, 0x00, 0x03, 0x0c,
		'e', 'c', 'h', 'o', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e',
		0x00, 0x07, 0xde, 0xad };
	static const uint8_t frag[] = { 0x00, 0x00, 0x81, 0x01, 127, 0, 0, 1,
		0x00, 0x07, 'x' };
	uint8_t longest[SOCKS5_UDP_HEADER_MAX];
	char host[256];

	(void)state;
	check_udp(v4, sizeof v4, 10, 0, SOCKS5_ATYP_IPV4, "198.18.5.7", 7777);
	check_udp(v4_empty, sizeof v4_empty, 10, 0, SOCKS5_ATYP_IPV4,
	    "10.0.0.1", 53);
	check_udp(v6, sizeof v6, 22, 0, SOCKS5_ATYP_IPV6, "fd00::1234", 65535);
	check_udp(name, sizeof name, 19, 0, SOCKS5_ATYP_DOMAIN, "echo.example",
	    7);
	/* FRAG is reported as it is, for the caller to drop. */
	check_udp(frag, sizeof frag, 10, 0x81, SOCKS5_ATYP_IPV4, "127.0.0.1", 7);

	/* A 255-byte name: the longest header. */
	memset(longest, 0, sizeof longest);
	longest[3] = SOCKS5_ATYP_DOMAIN;
	longest[4] = 255;
	memset(longest + 5, 'a', 255);
	longest[5 + 255 + 1] = 9;
	memset(host, 'a', 255);
	host[255] = '\0';
	check_udp(longest, sizeof longest, SOCKS5_UDP_HEADER_MAX, 0,
	    SOCKS5_ATYP_DOMAIN, host, 9);
}

static void
test_udp_decode_malformed(void **state)
{
	static const uint8_t rsv0[] = { 0x01, 0x00, 0x00, 0x01, 127, 0, 0, 1,
		0x00, 0x07 };
	static const uint8_t rsv1[] = { 0x00, 0x80, 0x00, 0x01, 127, 0, 0, 1,
		0x00, 0x07 };
	static const uint8_t port0[] = { 0x00, 0x00, 0x00, 0x01, 127, 0, 0, 1,
		0x00, 0x00 };
	static const uint8_t empty_name[] = { 0x00, 0x00, 0x00, 0x03, 0x00,
		0x00, 0x07 };
	static const uint8_t bad_name[] = { 0x00, 0x00, 0x00, 0x03, 0x03, 'a',
		0x00, 'b', 0x00, 0x07 };
	static const uint8_t short_name[] = { 0x00, 0x00, 0x00, 0x03, 0x05, 'a',
		'b', 0x00, 0x07 };
	static const uint8_t atyps[] = { 0, 2, 5, 0x80, 0xff };
	uint8_t bad_atyp[] = { 0x00, 0x00, 0x00, 0x00, 127, 0, 0, 1, 0x00, 0x07,
		'x', 'y', 'z', 'w', 'v', 'u', 't', 's', 'r', 'q', 'p', 'o' };
	const struct {
		const uint8_t *in;
		size_t len;
	} bad[] = {
		{ rsv0, sizeof rsv0 },
		{ rsv1, sizeof rsv1 },
		{ port0, sizeof port0 },
		{ empty_name, sizeof empty_name },
		{ bad_name, sizeof bad_name },
		{ short_name, sizeof short_name },
	};
	struct socks5_udp_header h, p;

	(void)state;
	poison_udp(&p);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		poison_udp(&h);
		assert_int_equal(socks5_udp_decode(bad[i].in, bad[i].len, &h),
		    SOCKS5_MALFORMED);
		assert_memory_equal(&h, &p, sizeof h);
	}
	for (size_t i = 0; i < sizeof atyps; i++) {
		bad_atyp[3] = atyps[i];
		poison_udp(&h);
		assert_int_equal(socks5_udp_decode(bad_atyp, sizeof bad_atyp,
		    &h), SOCKS5_MALFORMED);
		assert_memory_equal(&h, &p, sizeof h);
	}
}

static void
test_udp_encode_refused(void **state)
{
	struct socks5_udp_header h;
	uint8_t out[SOCKS5_UDP_HEADER_MAX + 8];
	const struct {
		uint8_t atyp;
		const char *host;
		uint16_t port;
	} bad[] = {
		{ SOCKS5_ATYP_IPV4, "198.18.0.1", 0 },   /* port 0 */
		{ SOCKS5_ATYP_IPV4, "fd00::1", 53 },     /* not IPv4 text */
		{ SOCKS5_ATYP_IPV4, "example.org", 53 },
		{ SOCKS5_ATYP_IPV6, "198.18.0.1", 53 },  /* not IPv6 text */
		{ SOCKS5_ATYP_DOMAIN, "", 53 },          /* empty name */
		{ SOCKS5_ATYP_DOMAIN, "a b", 53 },       /* a bad byte */
		{ 0, "198.18.0.1", 53 },                 /* unknown ATYP */
		{ 2, "198.18.0.1", 53 },
		{ 5, "198.18.0.1", 53 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&h, 0, sizeof h);
		h.atyp = bad[i].atyp;
		strcpy(h.host, bad[i].host);
		h.port = bad[i].port;
		memset(out, 0xee, sizeof out);
		assert_int_equal(socks5_udp_encode(out, sizeof out, &h), 0);
		for (size_t k = 0; k < sizeof out; k++)
			assert_int_equal(out[k], 0xee);
	}
	/* A host with no NUL in its buffer. */
	memset(&h, 'a', sizeof h);
	h.atyp = SOCKS5_ATYP_DOMAIN;
	h.frag = 0;
	h.port = 53;
	assert_int_equal(socks5_udp_encode(out, sizeof out, &h), 0);
}

static void
test_rep_from_parse_error(void **state)
{
	(void)state;
	assert_int_equal(socks5_rep_from_parse_error(SOCKS5_MALFORMED),
	    SOCKS5_REP_GENERAL_FAILURE);
	assert_int_equal(socks5_rep_from_parse_error(SOCKS5_ATYP_UNSUPPORTED),
	    SOCKS5_REP_ATYP_NOT_SUPPORTED);
	assert_int_equal(socks5_rep_from_parse_error(SOCKS5_CMD_UNSUPPORTED),
	    SOCKS5_REP_CMD_NOT_SUPPORTED);
	assert_int_equal(socks5_rep_from_parse_error(-4),
	    SOCKS5_REP_GENERAL_FAILURE);
	assert_int_equal(SOCKS5_REP_ATYP_NOT_SUPPORTED, 8);
	assert_int_equal(SOCKS5_REP_CMD_NOT_SUPPORTED, 7);
	assert_int_equal(SOCKS5_REP_GENERAL_FAILURE, 1);
}

/* `bound` replies with exactly `want`; a buffer one byte short gets
 * nothing written. */
static void
check_reply(uint8_t rep, const struct sockaddr *bound, const uint8_t *want,
    size_t n)
{
	uint8_t out[SOCKS5_REPLY_MAX + 2];

	memset(out, 0xee, sizeof out);
	assert_int_equal(socks5_reply(out, sizeof out, rep, bound), n);
	assert_memory_equal(out, want, n);
	assert_int_equal(out[n], 0xee);
	memset(out, 0xee, sizeof out);
	assert_int_equal(socks5_reply(out, n, rep, bound), n);
	assert_memory_equal(out, want, n);
	for (size_t i = 0; i < n; i++) {
		memset(out, 0xee, sizeof out);
		assert_int_equal(socks5_reply(out, i, rep, bound), 0);
		for (size_t j = 0; j < sizeof out; j++)
			assert_int_equal(out[j], 0xee);
	}
}

static void
test_reply(void **state)
{
	static const uint8_t none[] = { 0x05, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00 };
	static const uint8_t refused[] = { 0x05, 0x05, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00 };
	static const uint8_t v4[] = { 0x05, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x02,
		0x01, 0x04, 0x38 };
	static const uint8_t v6[] = { 0x05, 0x04, 0x00, 0x04,
		0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x01, 0xbb };
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr_un sun;
	struct sockaddr_storage ss;

	(void)state;
	check_reply(SOCKS5_REP_SUCCEEDED, NULL, none, sizeof none);
	check_reply(SOCKS5_REP_REFUSED, NULL, refused, sizeof refused);

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(1080);
	assert_int_equal(inet_pton(AF_INET, "192.0.2.1", &sin.sin_addr), 1);
	check_reply(SOCKS5_REP_SUCCEEDED, (struct sockaddr *)&sin, v4, sizeof v4);

	memset(&sin6, 0, sizeof sin6);
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(443);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &sin6.sin6_addr), 1);
	check_reply(SOCKS5_REP_HOST_UNREACHABLE, (struct sockaddr *)&sin6, v6,
	    sizeof v6);
	/* The same from a sockaddr_storage. */
	memset(&ss, 0, sizeof ss);
	memcpy(&ss, &sin6, sizeof sin6);
	check_reply(SOCKS5_REP_HOST_UNREACHABLE, (struct sockaddr *)&ss, v6,
	    sizeof v6);

	/* Not an IP address: sent as 0.0.0.0:0. */
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, "/run/x");
	check_reply(SOCKS5_REP_SUCCEEDED, (struct sockaddr *)&sun, none,
	    sizeof none);
	memset(&ss, 0, sizeof ss);
	ss.ss_family = AF_UNSPEC;
	check_reply(SOCKS5_REP_REFUSED, (struct sockaddr *)&ss, refused,
	    sizeof refused);
}

static void
test_reply_codes(void **state)
{
	uint8_t out[SOCKS5_REPLY_MAX];

	(void)state;
	assert_int_equal(SOCKS5_REP_SUCCEEDED, 0);
	assert_int_equal(SOCKS5_REP_GENERAL_FAILURE, 1);
	assert_int_equal(SOCKS5_REP_NOT_ALLOWED, 2);
	assert_int_equal(SOCKS5_REP_NET_UNREACHABLE, 3);
	assert_int_equal(SOCKS5_REP_HOST_UNREACHABLE, 4);
	assert_int_equal(SOCKS5_REP_REFUSED, 5);
	assert_int_equal(SOCKS5_REP_TTL_EXPIRED, 6);
	assert_int_equal(SOCKS5_REP_CMD_NOT_SUPPORTED, 7);
	assert_int_equal(SOCKS5_REP_ATYP_NOT_SUPPORTED, 8);
	/* Whatever REP the caller gives goes out as is. */
	for (unsigned rep = 0; rep < 256; rep++) {
		assert_int_equal(socks5_reply(out, sizeof out, (uint8_t)rep,
		    NULL), 10);
		assert_int_equal(out[0], 5);
		assert_int_equal(out[1], rep);
		assert_int_equal(out[2], 0);
	}
}

static void
test_rep_from_fwd_error(void **state)
{
	(void)state;
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_OK),
	    SOCKS5_REP_SUCCEEDED);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_RESET),
	    SOCKS5_REP_GENERAL_FAILURE);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_REFUSED),
	    SOCKS5_REP_REFUSED);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_UNREACHABLE),
	    SOCKS5_REP_HOST_UNREACHABLE);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_DENIED),
	    SOCKS5_REP_NOT_ALLOWED);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_TIMEOUT),
	    SOCKS5_REP_TTL_EXPIRED);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_LIMIT),
	    SOCKS5_REP_GENERAL_FAILURE);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_PROTOCOL),
	    SOCKS5_REP_GENERAL_FAILURE);
	assert_int_equal(socks5_rep_from_fwd_error(PROTO_FWD_ERR_NAME),
	    SOCKS5_REP_HOST_UNREACHABLE);
	assert_int_equal(socks5_rep_from_fwd_error(9), SOCKS5_REP_GENERAL_FAILURE);
	assert_int_equal(socks5_rep_from_fwd_error(UINT64_MAX),
	    SOCKS5_REP_GENERAL_FAILURE);
}

/* What the SOCKS front end does: every parsed request's target goes into a
 * forward header unchanged and comes back out the same. */
static void
test_request_to_forward_header(void **state)
{
	static const uint8_t name[] = { 0x05, 0x01, 0x00, 0x03, 0x09,
		'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0x1f, 0x90 };
	static const uint8_t v4[] = { 0x05, 0x01, 0x00, 0x01, 0x0a, 0x4d, 0x00,
		0x01, 0x00, 0x16 };
	static const uint8_t v6[] = { 0x05, 0x01, 0x00, 0x04,
		0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0xff, 0xff };
	const uint8_t *reqs[] = { name, v4, v6 };
	const size_t lens[] = { sizeof name, sizeof v4, sizeof v6 };
	struct socks5_request r;
	struct proto_fwd_header h, back;
	uint8_t buf[300];
	size_t n;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(socks5_parse_request(reqs[i], lens[i], &r),
		    (long)lens[i]);
		memset(&h, 0, sizeof h);
		h.type = PROTO_FWD_CONNECT;
		memcpy(h.host, r.host, sizeof h.host);
		h.port = r.port;
		n = proto_fwd_encode(buf, sizeof buf, &h);
		assert_int_equal(n, 4 + strlen(r.host));
		assert_int_equal(proto_fwd_decode(buf, n, &back), (long)n);
		assert_string_equal(back.host, r.host);
		assert_int_equal(back.port, r.port);
	}
	assert_string_equal(r.host, "fe80::1");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greeting),
		cmocka_unit_test(test_greeting_255_methods),
		cmocka_unit_test(test_greeting_malformed),
		cmocka_unit_test(test_method_reply),
		cmocka_unit_test(test_request_ipv4),
		cmocka_unit_test(test_request_ipv6),
		cmocka_unit_test(test_request_domain),
		cmocka_unit_test(test_request_malformed),
		cmocka_unit_test(test_request_domain_bytes),
		cmocka_unit_test(test_request_unsupported_cmd),
		cmocka_unit_test(test_request_udp_associate),
		cmocka_unit_test(test_udp_header),
		cmocka_unit_test(test_udp_decode_malformed),
		cmocka_unit_test(test_udp_encode_refused),
		cmocka_unit_test(test_rep_from_parse_error),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_reply_codes),
		cmocka_unit_test(test_rep_from_fwd_error),
		cmocka_unit_test(test_request_to_forward_header),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

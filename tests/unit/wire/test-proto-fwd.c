/* Unit tests for common/wire/proto-fwd.c: forward stream headers, remote-forward
 * control messages, error names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/proto-fwd.h"

static struct proto_fwd_header
hdr(uint64_t type, const char *host, uint16_t port)
{
	struct proto_fwd_header h;

	memset(&h, 0, sizeof h);
	h.type = type;
	strcpy(h.host, host);
	h.port = port;
	return h;
}

/* A header struct full of garbage, to see that failures leave it alone. */
static void
poison(struct proto_fwd_header *h)
{
	memset(h, 0xa5, sizeof *h);
}

static void
assert_poisoned(const struct proto_fwd_header *h)
{
	struct proto_fwd_header p;

	poison(&p);
	assert_memory_equal(h, &p, sizeof p);
}

static void
assert_header_equal(const struct proto_fwd_header *a,
    const struct proto_fwd_header *b)
{
	assert_true(a->type == b->type);
	assert_string_equal(a->host, b->host);
	assert_int_equal(a->port, b->port);
	assert_true(a->id == b->id);
	assert_true(a->rx == b->rx);
}

/* `in` decodes to `want` consuming `used` bytes; every shorter prefix asks
 * for more and leaves the struct alone; trailing bytes are not consumed. */
static void
check_decode(const uint8_t *in, size_t len, long used,
    const struct proto_fwd_header *want)
{
	struct proto_fwd_header h;
	uint8_t more[512];

	poison(&h);
	assert_int_equal(proto_fwd_decode(in, len, &h), used);
	assert_header_equal(&h, want);
	/* The rest of host[] is zeroed, so the struct compares whole. */
	assert_memory_equal(&h, want, sizeof h);

	for (size_t i = 0; i < (size_t)used; i++) {
		poison(&h);
		assert_int_equal(proto_fwd_decode(in, i, &h), 0);
		assert_poisoned(&h);
	}

	assert_true(len + 3 <= sizeof more);
	memcpy(more, in, len);
	memcpy(more + len, "\x01\x02\x03", 3);
	poison(&h);
	assert_int_equal(proto_fwd_decode(more, len + 3, &h), used);
	assert_memory_equal(&h, want, sizeof h);
}

/* `h` encodes to exactly `want`; any smaller buffer gets nothing written. */
static void
check_encode(const struct proto_fwd_header *h, const uint8_t *want, size_t n)
{
	uint8_t buf[300];

	assert_true(n < sizeof buf);
	memset(buf, 0xee, sizeof buf);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, h), n);
	assert_memory_equal(buf, want, n);
	assert_int_equal(buf[n], 0xee);
	assert_int_equal(proto_fwd_encode(buf, n, h), n);
	for (size_t i = 0; i < n; i++) {
		memset(buf, 0xee, sizeof buf);
		assert_int_equal(proto_fwd_encode(buf, i, h), 0);
		for (size_t j = 0; j < sizeof buf; j++)
			assert_int_equal(buf[j], 0xee);
	}
}

static void
test_header_connect_name(void **state)
{
	static const uint8_t want[] = {
		0x01, 0x10,
		'i', 'n', 't', 'r', 'a', 'n', 'e', 't',
		'.', 'e', 'x', 'a', 'm', 'p', 'l', 'e',
		0x00, 0x50,
	};
	struct proto_fwd_header h = hdr(PROTO_FWD_CONNECT, "intranet.example", 80);

	(void)state;
	check_encode(&h, want, sizeof want);
	check_decode(want, sizeof want, sizeof want, &h);
}

static void
test_header_connect_literals(void **state)
{
	static const uint8_t v4[] = {
		0x01, 0x08, '1', '0', '.', '0', '.', '0', '.', '1', 0x00, 0x16,
	};
	static const uint8_t v6[] = {
		0x01, 0x0d, 'f', 'd', '0', '0', ':', '7', '7', ':', ':', 'a',
		'b', 'c', 'd', 0xff, 0xff,
	};
	static const uint8_t under[] = {
		0x01, 0x0b, '_', 's', 'i', 'p', '.', 'A', '-', 'Z', '.', '0', '9',
		0x00, 0x01,
	};
	struct proto_fwd_header h;

	(void)state;
	h = hdr(PROTO_FWD_CONNECT, "10.0.0.1", 22);
	check_encode(&h, v4, sizeof v4);
	check_decode(v4, sizeof v4, sizeof v4, &h);
	h = hdr(PROTO_FWD_CONNECT, "fd00:77::abcd", 65535);
	check_encode(&h, v6, sizeof v6);
	check_decode(v6, sizeof v6, sizeof v6, &h);
	h = hdr(PROTO_FWD_CONNECT, "_sip.A-Z.09", 1);
	check_encode(&h, under, sizeof under);
	check_decode(under, sizeof under, sizeof under, &h);
}

static void
test_header_remote(void **state)
{
	static const uint8_t want[] = { 0x02, 0x00, 0x08, 0xae };
	struct proto_fwd_header h = hdr(PROTO_FWD_REMOTE, "", 2222);

	(void)state;
	check_encode(&h, want, sizeof want);
	check_decode(want, sizeof want, sizeof want, &h);
}

/* Host lengths 1, 63 (last 1-byte varint), 64 and 255 (2-byte varint). */
static void
test_header_host_lengths(void **state)
{
	static const size_t lens[] = { 1, 63, 64, 255 };
	struct proto_fwd_header h;
	uint8_t want[300];
	size_t n;

	(void)state;
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		size_t len = lens[k];

		memset(&h, 0, sizeof h);
		h.type = PROTO_FWD_CONNECT;
		memset(h.host, 'h', len);
		h.port = 0x1234;
		n = 0;
		want[n++] = 0x01;
		if (len < 64)
			want[n++] = (uint8_t)len;
		else {
			want[n++] = 0x40;
			want[n++] = (uint8_t)len;
		}
		memset(want + n, 'h', len);
		n += len;
		want[n++] = 0x12;
		want[n++] = 0x34;
		assert_int_equal(n, (len < 64 ? 4 : 5) + len);
		check_encode(&h, want, n);
		check_decode(want, n, (long)n, &h);
	}
}

/* Varints need not be minimal (RFC 9000 16): a 2-byte type and a 4-byte
 * host length still decode. */
static void
test_header_nonminimal_varints(void **state)
{
	static const uint8_t in[] = {
		0x40, 0x01, 0x80, 0x00, 0x00, 0x01, 'x', 0x01, 0xbb,
	};
	static const uint8_t remote[] = { 0x40, 0x02, 0x40, 0x00, 0x00, 0x05 };
	struct proto_fwd_header h;

	(void)state;
	h = hdr(PROTO_FWD_CONNECT, "x", 443);
	check_decode(in, sizeof in, sizeof in, &h);
	h = hdr(PROTO_FWD_REMOTE, "", 5);
	check_decode(remote, sizeof remote, sizeof remote, &h);
}

/* A malformed header is refused as soon as its bytes show it, and stays
 * refused however much more arrives. */
static void
check_refused(const uint8_t *in, size_t len, size_t from)
{
	struct proto_fwd_header h;

	for (size_t i = 0; i < from; i++) {
		poison(&h);
		assert_int_equal(proto_fwd_decode(in, i, &h), 0);
	}
	for (size_t i = from; i <= len; i++) {
		poison(&h);
		assert_int_equal(proto_fwd_decode(in, i, &h), -1);
		assert_poisoned(&h);
	}
}

static void
test_header_malformed(void **state)
{
	static const uint8_t type0[] = { 0x00, 0x01, 'a', 0x00, 0x50 };
	static const uint8_t type6[] = { 0x06, 0x01, 'a', 0x00, 0x50 };
	static const uint8_t type_huge[] = { 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0x00 };
	static const uint8_t type_2byte[] = { 0x40, 0x06, 0x00 };
	static const uint8_t connect_empty[] = { 0x01, 0x00, 0x00, 0x50 };
	static const uint8_t remote_host[] = { 0x02, 0x01, 'a', 0x00, 0x50 };
	static const uint8_t host256[] = { 0x01, 0x41, 0x00, 'a', 'b' };
	/* Host length 2^32 in an 8-byte varint. */
	static const uint8_t host_huge[] = { 0x01, 0xc0, 0x00, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x00, 'a' };
	static const uint8_t host_nul[] = { 0x01, 0x03, 'a', 0x00, 'b', 0x00, 0x50 };
	static const uint8_t port0[] = { 0x01, 0x01, 'a', 0x00, 0x00 };
	static const uint8_t remote_port0[] = { 0x02, 0x00, 0x00, 0x00 };

	(void)state;
	check_refused(type0, sizeof type0, 1);
	check_refused(type6, sizeof type6, 1);
	check_refused(type_huge, sizeof type_huge, 8);
	check_refused(type_2byte, sizeof type_2byte, 2);
	check_refused(connect_empty, sizeof connect_empty, 2);
	check_refused(remote_host, sizeof remote_host, 2);
	check_refused(host256, sizeof host256, 3);
	check_refused(host_huge, sizeof host_huge, 9);
	check_refused(host_nul, sizeof host_nul, 4);
	/* The port is only known complete. */
	check_refused(port0, sizeof port0, sizeof port0);
	check_refused(remote_port0, sizeof remote_port0, sizeof remote_port0);
}

/* Every byte outside A-Z a-z 0-9 . - : _ is refused wherever it sits in
 * the host, and every byte inside is accepted. */
static void
test_header_host_bytes(void **state)
{
	uint8_t in[] = { 0x01, 0x03, 'a', 'b', 'c', 0x00, 0x50 };
	struct proto_fwd_header h;
	bool ok;

	(void)state;
	for (unsigned c = 0; c < 256; c++) {
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == ':' || c == '_';
		for (size_t pos = 2; pos < 5; pos++) {
			in[2] = 'a';
			in[3] = 'b';
			in[4] = 'c';
			in[pos] = (uint8_t)c;
			poison(&h);
			if (ok) {
				assert_int_equal(proto_fwd_decode(in, sizeof in, &h), 7);
				assert_int_equal((uint8_t)h.host[pos - 2], c);
			} else {
				check_refused(in, sizeof in, pos + 1);
			}
		}
	}
}

static void
test_host_valid(void **state)
{
	char buf[300];

	(void)state;
	memset(buf, 'a', sizeof buf);
	assert_false(proto_fwd_host_valid(buf, 0));
	assert_true(proto_fwd_host_valid(buf, 1));
	assert_true(proto_fwd_host_valid(buf, 255));
	assert_false(proto_fwd_host_valid(buf, 256));
	assert_true(proto_fwd_host_valid("example.org", 11));
	assert_true(proto_fwd_host_valid("192.0.2.1", 9));
	assert_true(proto_fwd_host_valid("2001:db8::1", 11));
	assert_true(proto_fwd_host_valid("::ffff:192.0.2.1", 16));
	assert_false(proto_fwd_host_valid("[::1]", 5));
	assert_false(proto_fwd_host_valid("fe80::1%eth0", 12));
	assert_false(proto_fwd_host_valid("a b", 3));
	assert_false(proto_fwd_host_valid("a\0b", 3));
	assert_false(proto_fwd_host_valid("host/x", 6));
	assert_false(proto_fwd_host_valid("user@host", 9));
	assert_false(proto_fwd_host_valid("h\xc3\xa9", 3));
	/* Only `len` bytes are looked at. */
	assert_true(proto_fwd_host_valid("ab cd", 2));
}

static void
test_header_encode_refuses(void **state)
{
	struct proto_fwd_header h;
	uint8_t buf[300];

	(void)state;
	h = hdr(0, "a", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(3, "a", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(UINT64_MAX, "a", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_CONNECT, "", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_CONNECT, "a b", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_CONNECT, "[::1]", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_CONNECT, "a", 0);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_REMOTE, "a", 1);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h = hdr(PROTO_FWD_REMOTE, "", 0);
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	/* 256 host bytes and no terminator: longer than the wire allows. */
	memset(&h, 0, sizeof h);
	h.type = PROTO_FWD_CONNECT;
	memset(h.host, 'a', sizeof h.host);
	h.port = 1;
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 0);
	h.host[255] = '\0';
	assert_int_equal(proto_fwd_encode(buf, sizeof buf, &h), 260);
}

static void
test_header_round_trip(void **state)
{
	struct proto_fwd_header in[] = {
		hdr(PROTO_FWD_CONNECT, "a", 1),
		hdr(PROTO_FWD_CONNECT, "localhost", 8080),
		hdr(PROTO_FWD_CONNECT, "::", 65535),
		hdr(PROTO_FWD_CONNECT, "127.0.0.1", 32768),
		hdr(PROTO_FWD_REMOTE, "", 1),
		hdr(PROTO_FWD_REMOTE, "", 65535),
	};
	struct proto_fwd_header out;
	uint8_t buf[300];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		n = proto_fwd_encode(buf, sizeof buf, &in[i]);
		assert_int_equal(n, 4 + strlen(in[i].host));
		poison(&out);
		assert_int_equal(proto_fwd_decode(buf, n, &out), (long)n);
		assert_memory_equal(&out, &in[i], sizeof out);
	}
}

/* A forward that may be resumed carries its ID after the port, under
 * types 3 (CONNECT) and 4 (REMOTE). */
static void
test_header_with_id(void **state)
{
	static const uint8_t connect[] = {
		0x03, 0x03, 'a', '.', 'b', 0x00, 0x16,
		0x80, 0x01, 0x02, 0x03,
	};
	static const uint8_t remote[] = { 0x04, 0x00, 0x08, 0xae, 0x3f };
	struct proto_fwd_header h = hdr(PROTO_FWD_CONNECT, "a.b", 22);
	static const uint8_t zero_id[] = { 0x03, 0x03, 'a', '.', 'b', 0x00, 0x16, 0x00 };
	struct proto_fwd_header back;

	(void)state;
	h.id = 0x010203;
	check_encode(&h, connect, sizeof connect);
	check_decode(connect, sizeof connect, sizeof connect, &h);
	h = hdr(PROTO_FWD_REMOTE, "", 2222);
	h.id = 63;
	check_encode(&h, remote, sizeof remote);
	check_decode(remote, sizeof remote, sizeof remote, &h);
	/* ID 0 means "none" and is never on the wire. */
	poison(&back);
	assert_int_equal(proto_fwd_decode(zero_id, sizeof zero_id, &back), -1);
	assert_poisoned(&back);
	h.id = PROTO_FWD_ID_MAX + 1;
	assert_int_equal(proto_fwd_encode((uint8_t[64]){ 0 }, 64, &h), 0);
}

static void
test_header_resume(void **state)
{
	static const uint8_t want[] = {
		0x05, 0x80, 0x01, 0x02, 0x03, 0x40, 0x64,
	};
	static const uint8_t zero_id[] = { 0x05, 0x00, 0x00 };
	struct proto_fwd_header h, back;

	(void)state;
	memset(&h, 0, sizeof h);
	h.type = PROTO_FWD_RESUME;
	h.id = 0x010203;
	h.rx = 100;
	check_encode(&h, want, sizeof want);
	check_decode(want, sizeof want, sizeof want, &h);
	poison(&back);
	assert_int_equal(proto_fwd_decode(zero_id, sizeof zero_id, &back), -1);
	assert_poisoned(&back);
	h.id = 0;
	assert_int_equal(proto_fwd_encode((uint8_t[64]){ 0 }, 64, &h), 0);
	h.id = 1;
	h.rx = PROTO_FWD_ID_MAX + 1;
	assert_int_equal(proto_fwd_encode((uint8_t[64]){ 0 }, 64, &h), 0);
}

static void
test_resumed_answer(void **state)
{
	uint8_t buf[16];
	uint64_t rx = 7;

	(void)state;
	assert_int_equal(proto_fwd_resumed_encode(buf, sizeof buf, 300), 3);
	assert_memory_equal(buf, "\x00\x41\x2c", 3);
	assert_int_equal(proto_fwd_resumed_encode(buf, 2, 300), 0);
	assert_int_equal(proto_fwd_resumed_decode(buf, 0, &rx), 0);
	assert_int_equal(proto_fwd_resumed_decode(buf, 2, &rx), 0);
	assert_int_equal(rx, 7);
	assert_int_equal(proto_fwd_resumed_decode(buf, 3, &rx), 3);
	assert_int_equal(rx, 300);
	/* Anything but OK first is not an answer to RESUME. */
	buf[0] = PROTO_FWD_ERR_GONE;
	assert_int_equal(proto_fwd_resumed_decode(buf, 3, &rx), -1);
}

static void
test_error_names(void **state)
{
	(void)state;
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_OK), "ok");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_RESET), "reset");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_REFUSED), "refused");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_UNREACHABLE),
	    "unreachable");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_DENIED), "denied");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_TIMEOUT), "timeout");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_LIMIT), "limit");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_PROTOCOL),
	    "protocol");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_NAME), "name");
	assert_string_equal(proto_fwd_error_name(PROTO_FWD_ERR_GONE), "gone");
	assert_string_equal(proto_fwd_error_name(10), "unknown");
	assert_string_equal(proto_fwd_error_name(1000), "unknown");
	assert_string_equal(proto_fwd_error_name(UINT64_MAX), "unknown");
}

/* `rf` encodes as message `type` to exactly `want`, which proto_msg_next
 * frames and the body decoder reads back as `back`. */
static void
check_remote(uint64_t type, const struct proto_remote_forward *rf,
    const uint8_t *want, size_t n, const struct proto_remote_forward *back)
{
	struct proto_remote_forward got;
	const uint8_t *body;
	uint8_t buf[64];
	size_t bodylen;
	uint64_t t;

	memset(buf, 0xee, sizeof buf);
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf, type, rf), n);
	assert_memory_equal(buf, want, n);
	assert_int_equal(buf[n], 0xee);
	assert_int_equal(proto_fwd_remote_encode(buf, n, type, rf), n);
	for (size_t i = 0; i < n; i++) {
		memset(buf, 0xee, sizeof buf);
		assert_int_equal(proto_fwd_remote_encode(buf, i, type, rf), 0);
		for (size_t j = 0; j < sizeof buf; j++)
			assert_int_equal(buf[j], 0xee);
		/* A cut message is one the framer waits on. */
		assert_int_equal(proto_msg_next(want, i, &t, &body, &bodylen), 0);
	}

	assert_int_equal(proto_msg_next(want, n, &t, &body, &bodylen), (long)n);
	assert_true(t == type);
	assert_ptr_equal(body, want + 2);
	assert_int_equal(bodylen, n - 2);
	memset(&got, 0xa5, sizeof got);
	assert_int_equal(proto_fwd_remote_decode(body, bodylen, &got), 0);
	assert_int_equal(got.port, back->port);
	assert_true(got.status == back->status);
	assert_int_equal(got.bind, back->bind);
	assert_true(proto_fwd_remote_same(&got, back));
}

static void
test_remote_encode(void **state)
{
	static const uint8_t req2222[] = { 0x04, 0x04, 0x01, 0x02, 0x48, 0xae };
	static const uint8_t req1[] = { 0x04, 0x03, 0x01, 0x01, 0x01 };
	static const uint8_t cancel2222[] = { 0x06, 0x04, 0x01, 0x02, 0x48, 0xae };
	static const uint8_t req63[] = { 0x04, 0x03, 0x01, 0x01, 0x3f };
	static const uint8_t req65535[] = { 0x04, 0x06, 0x01, 0x04, 0x80, 0x00,
		0xff, 0xff };
	static const uint8_t ok2222[] = { 0x05, 0x07, 0x01, 0x02, 0x48, 0xae,
		0x02, 0x01, 0x00 };
	static const uint8_t denied80[] = { 0x05, 0x07, 0x01, 0x02, 0x40, 0x50,
		0x02, 0x01, 0x04 };
	/* Status 300 (2-byte varint 0x412c), for an error code yet to come. */
	static const uint8_t st300[] = { 0x05, 0x07, 0x01, 0x01, 0x07,
		0x02, 0x02, 0x41, 0x2c };
	struct proto_remote_forward rf, back;

	(void)state;
	/* A request carries no status, so it decodes as OK. */
	rf = (struct proto_remote_forward){ .port = 2222, .status = PROTO_FWD_ERR_DENIED };
	back = (struct proto_remote_forward){ .port = 2222, .status = PROTO_FWD_OK };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf, req2222, sizeof req2222, &back);
	rf = back = (struct proto_remote_forward){ .port = 1, .status = 0 };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf, req1, sizeof req1, &back);
	rf = back = (struct proto_remote_forward){ .port = 63, .status = 0 };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf, req63, sizeof req63, &back);
	rf = back = (struct proto_remote_forward){ .port = 65535, .status = 0 };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf, req65535, sizeof req65535,
	    &back);

	rf = back = (struct proto_remote_forward){ .port = 2222, .status = PROTO_FWD_OK };
	check_remote(PROTO_MSG_REMOTE_FORWARD_REPLY, &rf, ok2222, sizeof ok2222,
	    &back);
	rf = back = (struct proto_remote_forward){ .port = 80, .status = PROTO_FWD_ERR_DENIED };
	check_remote(PROTO_MSG_REMOTE_FORWARD_REPLY, &rf, denied80,
	    sizeof denied80, &back);
	rf = back = (struct proto_remote_forward){ .port = 7, .status = 300 };
	check_remote(PROTO_MSG_REMOTE_FORWARD_REPLY, &rf, st300, sizeof st300,
	    &back);

	/* Taking one back: the port alone, like a request. */
	rf = (struct proto_remote_forward){ .port = 2222, .status = PROTO_FWD_ERR_DENIED };
	back = (struct proto_remote_forward){ .port = 2222, .status = PROTO_FWD_OK };
	check_remote(PROTO_MSG_REMOTE_FORWARD_CANCEL, &rf, cancel2222,
	    sizeof cancel2222, &back);
}

/* Field 3, the bind address: none is the server's default (loopback on a
 * roved that has PROTO_FEATURE_REMOTE_BIND), empty all its addresses, 4 or
 * 16 bytes one address. A reply and a cancel carry it like the request. */
static void
test_remote_bind(void **state)
{
	static const uint8_t all2222[] = { 0x04, 0x06, 0x01, 0x02, 0x48, 0xae,
		0x03, 0x00 };
	static const uint8_t v4_2222[] = { 0x04, 0x0a, 0x01, 0x02, 0x48, 0xae,
		0x03, 0x04, 198, 18, 1, 1 };
	static const uint8_t v6_80[] = { 0x06, 0x16, 0x01, 0x02, 0x40, 0x50,
		0x03, 0x10, 0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x01 };
	static const uint8_t reply_v4[] = { 0x05, 0x0d, 0x01, 0x02, 0x48, 0xae,
		0x02, 0x01, 0x04, 0x03, 0x04, 198, 18, 1, 1 };
	struct proto_remote_forward rf, back;
	char s[PROTO_FWD_REMOTE_STRLEN];
	uint8_t buf[64];

	(void)state;
	rf = back = (struct proto_remote_forward){ 2222, 0, PROTO_RBIND_ALL,
		{ 0, { 0 } }, false };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf, all2222, sizeof all2222,
	    &back);
	assert_string_equal(proto_fwd_remote_str(&rf, s), "*:2222");

	rf = back = (struct proto_remote_forward){ 2222, 0, PROTO_RBIND_ADDR,
		{ AF_INET, { 198, 18, 1, 1 } }, false };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf, v4_2222, sizeof v4_2222,
	    &back);
	assert_string_equal(proto_fwd_remote_str(&rf, s), "198.18.1.1:2222");
	rf.status = back.status = PROTO_FWD_ERR_DENIED;
	check_remote(PROTO_MSG_REMOTE_FORWARD_REPLY, &rf, reply_v4,
	    sizeof reply_v4, &back);

	rf = back = (struct proto_remote_forward){ 80, 0, PROTO_RBIND_ADDR,
		{ AF_INET6, { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1 } }, false };
	check_remote(PROTO_MSG_REMOTE_FORWARD_CANCEL, &rf, v6_80, sizeof v6_80,
	    &back);
	assert_string_equal(proto_fwd_remote_str(&rf, s), "[fd00::1]:80");

	/* The default sends no field at all: the message an older client
	 * sends, byte for byte, and what an older server answers. */
	rf = (struct proto_remote_forward){ 2222, 0, PROTO_RBIND_DEFAULT,
		{ AF_INET, { 127, 0, 0, 1 } }, false };
	back = (struct proto_remote_forward){ 2222, 0, PROTO_RBIND_DEFAULT,
		{ 0, { 0 } }, false };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf,
	    (const uint8_t[]){ 0x04, 0x04, 0x01, 0x02, 0x48, 0xae }, 6, &back);
	assert_string_equal(proto_fwd_remote_str(&rf, s), "localhost:2222");

	/* The same forward is the same port and bind address. */
	rf = back = (struct proto_remote_forward){ 2222, 0, PROTO_RBIND_ADDR,
		{ AF_INET, { 198, 18, 1, 1 } }, false };
	back.status = 4;
	assert_true(proto_fwd_remote_same(&rf, &back));
	back.bind_addr.b[3] = 2;
	assert_false(proto_fwd_remote_same(&rf, &back));
	back = rf;
	back.bind = PROTO_RBIND_ALL;
	assert_false(proto_fwd_remote_same(&rf, &back));
	back = rf;
	back.port = 2223;
	assert_false(proto_fwd_remote_same(&rf, &back));
	back = rf;
	back.udp = true;
	assert_false(proto_fwd_remote_same(&rf, &back));

	/* Field 4, empty: a UDP remote forward, after the bind address;
	 * absent, TCP. Anything in it is malformed. */
	rf = back = (struct proto_remote_forward){ 5353, 0, PROTO_RBIND_ALL,
		{ 0, { 0 } }, true };
	check_remote(PROTO_MSG_REMOTE_FORWARD, &rf,
	    (const uint8_t[]){ 0x04, 0x08, 0x01, 0x02, 0x54, 0xe9, 0x03, 0x00,
	    0x04, 0x00 }, 10, &back);
	assert_string_equal(proto_fwd_remote_str(&rf, s), "udp/*:5353");
	assert_int_equal(proto_fwd_remote_decode((const uint8_t[]){ 0x01,
	    0x02, 0x54, 0xe9, 0x04, 0x01, 0x00 }, 7, &back), -1);
	assert_int_equal(proto_fwd_remote_decode((const uint8_t[]){ 0x01,
	    0x02, 0x54, 0xe9, 0x04, 0x00 }, 6, &back), 0);
	assert_true(back.udp);
	assert_int_equal(back.bind, PROTO_RBIND_DEFAULT);
	rf = back = (struct proto_remote_forward){ 2222, 0, PROTO_RBIND_ADDR,
		{ AF_INET, { 198, 18, 1, 1 } }, false };
	/* An address of no known family, or an unknown bind, is not sent. */
	rf.bind_addr.family = 0;
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD, &rf), 0);
	rf.bind_addr.family = AF_INET;
	rf.bind = 7;
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD, &rf), 0);
}

static void
check_bind_decode(const uint8_t *body, size_t len, int want,
    enum proto_remote_bind bind, int family, const uint8_t *addr)
{
	struct proto_remote_forward rf;

	memset(&rf, 0xa5, sizeof rf);
	assert_int_equal(proto_fwd_remote_decode(body, len, &rf), want);
	if (want != 0)
		return;
	assert_int_equal(rf.bind, bind);
	if (bind == PROTO_RBIND_ADDR) {
		assert_int_equal(rf.bind_addr.family, family);
		assert_memory_equal(rf.bind_addr.b, addr,
		    family == AF_INET ? 4 : 16);
	}
}

static void
test_remote_bind_decode(void **state)
{
	static const uint8_t v4[] = { 198, 18, 1, 1 };
	static const uint8_t any[16] = { 0 };
	/* Before the port, and the field alone among unknown ones. */
	static const uint8_t first[] = { 0x03, 0x04, 198, 18, 1, 1, 0x09, 0x01,
		0x00, 0x01, 0x01, 0x05 };
	static const uint8_t v6_any[] = { 0x01, 0x01, 0x05, 0x03, 0x10, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	/* Repeated: the later one counts, address or all. */
	static const uint8_t v4_then_all[] = { 0x01, 0x01, 0x05, 0x03, 0x04,
		198, 18, 1, 1, 0x03, 0x00 };
	static const uint8_t all_then_v4[] = { 0x01, 0x01, 0x05, 0x03, 0x00,
		0x03, 0x04, 198, 18, 1, 1 };
	static const uint8_t len1[] = { 0x01, 0x01, 0x05, 0x03, 0x01, 0x7f };
	static const uint8_t len5[] = { 0x01, 0x01, 0x05, 0x03, 0x05, 1, 2, 3,
		4, 5 };
	static const uint8_t len15[] = { 0x01, 0x01, 0x05, 0x03, 0x0f, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t len17[] = { 0x01, 0x01, 0x05, 0x03, 0x11, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t cut[] = { 0x01, 0x01, 0x05, 0x03, 0x04, 198, 18 };
	/* A good port does not save a bad bind address. */
	static const uint8_t bad_then_port[] = { 0x03, 0x02, 1, 2, 0x01, 0x01,
		0x05 };

	(void)state;
	check_bind_decode(first, sizeof first, 0, PROTO_RBIND_ADDR, AF_INET, v4);
	check_bind_decode(v6_any, sizeof v6_any, 0, PROTO_RBIND_ADDR, AF_INET6,
	    any);
	check_bind_decode(v4_then_all, sizeof v4_then_all, 0, PROTO_RBIND_ALL,
	    0, NULL);
	check_bind_decode(all_then_v4, sizeof all_then_v4, 0, PROTO_RBIND_ADDR,
	    AF_INET, v4);
	check_bind_decode(len1, sizeof len1, -1, 0, 0, NULL);
	check_bind_decode(len5, sizeof len5, -1, 0, 0, NULL);
	check_bind_decode(len15, sizeof len15, -1, 0, 0, NULL);
	check_bind_decode(len17, sizeof len17, -1, 0, 0, NULL);
	check_bind_decode(cut, sizeof cut, -1, 0, 0, NULL);
	check_bind_decode(bad_then_port, sizeof bad_then_port, -1, 0, 0, NULL);
	/* Every cut of a message with the field is malformed, except the
	 * one that ends right after the port. */
	for (size_t i = 0; i < sizeof v6_any; i++)
		check_bind_decode(v6_any, i, i == 3 ? 0 : -1,
		    PROTO_RBIND_DEFAULT, 0, NULL);
}

static void
test_remote_encode_refuses(void **state)
{
	struct proto_remote_forward rf = { .port = 22 };
	uint8_t buf[64];

	(void)state;
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_CLIENT_HELLO, &rf), 0);
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_ERROR, &rf), 0);
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf, 7, &rf), 0);
	rf.port = 0;
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD, &rf), 0);
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf), 0);
	/* The largest status fits, the next value has no varint. */
	rf.port = 22;
	rf.status = (UINT64_C(1) << 62) - 1;
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf), 2 + 3 + 10);
	rf.status = UINT64_C(1) << 62;
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf), 0);
	/* A request ignores the status. */
	assert_int_equal(proto_fwd_remote_encode(buf, sizeof buf,
	    PROTO_MSG_REMOTE_FORWARD, &rf), 5);
}

static void
check_remote_decode(const uint8_t *body, size_t len, int want, uint16_t port,
    uint64_t status)
{
	struct proto_remote_forward rf, p;

	memset(&rf, 0xa5, sizeof rf);
	memset(&p, 0xa5, sizeof p);
	assert_int_equal(proto_fwd_remote_decode(body, len, &rf), want);
	if (want == 0) {
		assert_int_equal(rf.port, port);
		assert_true(rf.status == status);
	} else
		assert_memory_equal(&rf, &p, sizeof rf);
}

static void
test_remote_decode(void **state)
{
	static const uint8_t nonminimal[] = { 0x01, 0x02, 0x40, 0x05 };
	static const uint8_t unknown[] = { 0x01, 0x01, 0x05, 0x07, 0x03, 0xaa,
		0xbb, 0xcc, 0x02, 0x01, 0x03, 0x40, 0x63, 0x00 };
	static const uint8_t repeated[] = { 0x01, 0x01, 0x05, 0x02, 0x01, 0x02,
		0x01, 0x01, 0x06, 0x02, 0x01, 0x00 };
	static const uint8_t status_max[] = { 0x02, 0x08, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01, 0x09 };
	static const uint8_t reply[] = { 0x01, 0x02, 0x48, 0xae, 0x02, 0x01, 0x02 };

	(void)state;
	check_remote_decode(nonminimal, sizeof nonminimal, 0, 5, 0);
	check_remote_decode(unknown, sizeof unknown, 0, 5, 3);
	check_remote_decode(repeated, sizeof repeated, 0, 6, 0);
	check_remote_decode(status_max, sizeof status_max, 0, 9,
	    (UINT64_C(1) << 62) - 1);
	check_remote_decode(reply, sizeof reply, 0, 2222, PROTO_FWD_ERR_REFUSED);
	/* Any cut inside the fields is malformed: a body is always whole. */
	for (size_t i = 0; i < sizeof reply; i++) {
		if (i == 4)
			continue; /* the port field alone is a valid request */
		check_remote_decode(reply, i, -1, 0, 0);
	}
	check_remote_decode(reply, 4, 0, 2222, 0);
}

static void
test_remote_decode_malformed(void **state)
{
	static const uint8_t status_only[] = { 0x02, 0x01, 0x00 };
	static const uint8_t port0[] = { 0x01, 0x01, 0x00 };
	static const uint8_t port65536[] = { 0x01, 0x04, 0x80, 0x01, 0x00, 0x00 };
	static const uint8_t port_empty[] = { 0x01, 0x00 };
	static const uint8_t port_extra[] = { 0x01, 0x02, 0x05, 0x00 };
	static const uint8_t port_short[] = { 0x01, 0x02, 0x48 };
	static const uint8_t port_cut_varint[] = { 0x01, 0x01, 0x48 };
	static const uint8_t status_empty[] = { 0x01, 0x01, 0x05, 0x02, 0x00 };
	static const uint8_t status_extra[] = { 0x01, 0x01, 0x05, 0x02, 0x02,
		0x00, 0x00 };
	static const uint8_t id_cut[] = { 0x01, 0x01, 0x05, 0x40 };
	static const uint8_t len_cut[] = { 0x01, 0x01, 0x05, 0x07, 0x40 };
	static const uint8_t unknown_long[] = { 0x01, 0x01, 0x05, 0x07, 0x05,
		0x00 };
	/* A later bad port spoils an earlier good one. */
	static const uint8_t later_bad[] = { 0x01, 0x01, 0x05, 0x01, 0x01, 0x00 };

	(void)state;
	check_remote_decode(NULL, 0, -1, 0, 0);
	check_remote_decode(status_only, sizeof status_only, -1, 0, 0);
	check_remote_decode(port0, sizeof port0, -1, 0, 0);
	check_remote_decode(port65536, sizeof port65536, -1, 0, 0);
	check_remote_decode(port_empty, sizeof port_empty, -1, 0, 0);
	check_remote_decode(port_extra, sizeof port_extra, -1, 0, 0);
	check_remote_decode(port_short, sizeof port_short, -1, 0, 0);
	check_remote_decode(port_cut_varint, sizeof port_cut_varint, -1, 0, 0);
	check_remote_decode(status_empty, sizeof status_empty, -1, 0, 0);
	check_remote_decode(status_extra, sizeof status_extra, -1, 0, 0);
	check_remote_decode(id_cut, sizeof id_cut, -1, 0, 0);
	check_remote_decode(len_cut, sizeof len_cut, -1, 0, 0);
	check_remote_decode(unknown_long, sizeof unknown_long, -1, 0, 0);
	check_remote_decode(later_bad, sizeof later_bad, -1, 0, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_connect_name),
		cmocka_unit_test(test_header_connect_literals),
		cmocka_unit_test(test_header_remote),
		cmocka_unit_test(test_header_host_lengths),
		cmocka_unit_test(test_header_nonminimal_varints),
		cmocka_unit_test(test_header_malformed),
		cmocka_unit_test(test_header_host_bytes),
		cmocka_unit_test(test_host_valid),
		cmocka_unit_test(test_header_encode_refuses),
		cmocka_unit_test(test_header_round_trip),
		cmocka_unit_test(test_header_with_id),
		cmocka_unit_test(test_header_resume),
		cmocka_unit_test(test_resumed_answer),
		cmocka_unit_test(test_error_names),
		cmocka_unit_test(test_remote_encode),
		cmocka_unit_test(test_remote_encode_refuses),
		cmocka_unit_test(test_remote_bind),
		cmocka_unit_test(test_remote_bind_decode),
		cmocka_unit_test(test_remote_decode),
		cmocka_unit_test(test_remote_decode_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

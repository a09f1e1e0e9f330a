/* libFuzzer harness for common/wire/proto.c: framing, decoders, re-encoding. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Large enough for any re-encoded message: the decoders bound how much a
 * decoded struct can hold. */
static uint8_t enc[PROTO_MAX_MSG + 16];

static void
check_varint(const uint8_t *data, size_t size)
{
	uint8_t buf[8];
	uint64_t v, w;
	size_t n, m;

	n = varint_get(data, size, &v);
	if (n == 0) {
		assert(size == 0 || size < (size_t)1 << (data[0] >> 6));
		return;
	}
	assert(n == (size_t)1 << (data[0] >> 6));
	assert(varint_len(v) != 0 && varint_len(v) <= n);
	m = varint_put(buf, sizeof buf, v);
	assert(m == varint_len(v));
	assert(varint_get(buf, m, &w) == m && w == v);
}

/* Decode `body` as every message type; whatever decodes must re-encode,
 * frame, and decode again to the same struct. */
static void
check_body(const uint8_t *body, size_t len)
{
	struct proto_client_hello h, h2;
	struct proto_server_config c, c2;
	struct proto_error e, e2;
	struct proto_loss_report l, l2;
	const uint8_t *b;
	size_t n, blen;
	uint64_t type;

	if (proto_decode_client_hello(body, len, &h) == 0) {
		n = proto_encode_client_hello(enc, sizeof enc, &h);
		assert(n > 0);
		assert(proto_msg_next(enc, n, &type, &b, &blen) == (long)n);
		assert(type == PROTO_MSG_CLIENT_HELLO);
		assert(proto_decode_client_hello(b, blen, &h2) == 0);
		assert(memcmp(&h, &h2, sizeof h) == 0);
	}
	if (proto_decode_server_config(body, len, &c) == 0) {
		assert(c.naddrs <= 2 && c.nroutes <= PROTO_MAX_ROUTES);
		assert(c.ndns <= PROTO_MAX_DNS &&
		    c.ndns_search <= PROTO_MAX_DNS_SEARCH);
		/* A search domain reaches resolv.conf: never more than a
		 * plain name (no newline, space or NUL inside). */
		for (size_t i = 0; i < c.ndns_search; i++)
			assert(addr_dns_name_valid(c.dns_search[i]));
		n = proto_encode_server_config(enc, sizeof enc, &c);
		assert(n > 0);
		assert(proto_msg_next(enc, n, &type, &b, &blen) == (long)n);
		assert(type == PROTO_MSG_SERVER_CONFIG);
		assert(proto_decode_server_config(b, blen, &c2) == 0);
		assert(memcmp(&c, &c2, sizeof c) == 0);
	}
	if (proto_decode_error(body, len, &e) == 0) {
		assert(memchr(e.text, '\0', sizeof e.text) != NULL);
		n = proto_encode_error(enc, sizeof enc, &e);
		assert(n > 0);
		assert(proto_msg_next(enc, n, &type, &b, &blen) == (long)n);
		assert(type == PROTO_MSG_ERROR);
		assert(proto_decode_error(b, blen, &e2) == 0);
		assert(memcmp(&e, &e2, sizeof e) == 0);
	}
	if (proto_decode_loss_report(body, len, &l) == 0) {
		assert(l.lost <= l.sent);
		n = proto_encode_loss_report(enc, sizeof enc, &l);
		assert(n > 0);
		assert(proto_msg_next(enc, n, &type, &b, &blen) == (long)n);
		assert(type == PROTO_MSG_LOSS_REPORT);
		assert(proto_decode_loss_report(b, blen, &l2) == 0);
		assert(memcmp(&l, &l2, sizeof l) == 0);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *body, *p = data;
	size_t left = size, bodylen;
	uint64_t type, ctx;
	long r;

	check_varint(data, size);
	if (proto_dgram_decode(data, size, &ctx, &body, &bodylen) == 0)
		assert(body > data && body + bodylen == data + size);

	/* The input as a control stream: every whole message in turn. */
	while ((r = proto_msg_next(p, left, &type, &body, &bodylen)) > 0) {
		assert((size_t)r <= left);
		assert(bodylen <= PROTO_MAX_MSG);
		assert(body + bodylen == p + r);
		check_body(body, bodylen);
		p += r;
		left -= (size_t)r;
	}
	/* And the whole input as a bare body. */
	check_body(data, size);
	return 0;
}

/* libFuzzer harness for common/wire/proto-udp.c: UDP flow headers and flow
 * datagrams. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/proto-udp.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Longest header: 8-byte type, context and length varints, 255 host
 * bytes, port. */
#define HEADER_MAX (8 + 8 + 8 + PROTO_FWD_MAX_HOST + 2)

/* What a decoded header must satisfy, and that it survives re-encoding. */
static void
check_decoded(const uint8_t *data, long r, const struct proto_udp_header *h)
{
	struct proto_udp_header h2;
	uint8_t enc[HEADER_MAX];
	size_t hostlen, n;

	assert(r > 0 && r <= HEADER_MAX);
	hostlen = strnlen(h->host, sizeof h->host);
	assert(hostlen < sizeof h->host);
	assert(h->port != 0);
	assert(h->port == (data[r - 2] << 8 | data[r - 1]));
	if (h->type == PROTO_FWD_UDP_CONNECT) {
		assert(proto_udp_ctx_valid(h->ctx, PROTO_UDP_BY_CLIENT));
		assert(proto_fwd_host_valid(h->host, hostlen));
		assert(memcmp(data + r - 2 - hostlen, h->host, hostlen) == 0);
	} else {
		assert(h->type == PROTO_FWD_UDP_REMOTE);
		assert(proto_udp_ctx_valid(h->ctx, PROTO_UDP_BY_SERVER));
		assert(hostlen == 0);
	}
	assert(proto_udp_is_udp(data, (size_t)r) == 1);

	/* Re-encoding uses minimal varints, so it may only be shorter. */
	n = proto_udp_encode(enc, sizeof enc, h);
	assert(n > 0 && n <= (size_t)r);
	assert(n == 1 + varint_len(h->ctx) + 2 + (hostlen > 0 ?
	    varint_len(hostlen) + hostlen : 0));
	assert(proto_udp_decode(enc, n, &h2) == (long)n);
	assert(memcmp(h, &h2, sizeof h2) == 0);
}

/* The decoder over every prefix: "need more" until the bytes decide, then
 * the same verdict however many more arrive. */
static void
check_header(const uint8_t *data, size_t size)
{
	struct proto_udp_header h, first;
	size_t lim = size < HEADER_MAX + 1 ? size : HEADER_MAX + 1;
	long r, verdict = 0;

	memset(&first, 0, sizeof first);
	for (size_t i = 0; i <= lim; i++) {
		memset(&h, 0x5a, sizeof h);
		r = proto_udp_decode(data, i, &h);
		assert(r >= -1 && r <= (long)i);
		if (verdict == 0) {
			verdict = r;
			if (r > 0) {
				assert((size_t)r == i);
				check_decoded(data, r, &h);
				first = h;
			}
		} else {
			assert(r == verdict);
			if (r > 0)
				assert(memcmp(&h, &first, sizeof h) == 0);
		}
	}
	r = proto_udp_decode(data, size, &h);
	assert(r == verdict);
	if (r > 0)
		assert(memcmp(&h, &first, sizeof h) == 0);
}

/* The input as one DATAGRAM payload: a flow context's round-trips whole,
 * or not at all when the buffer is a byte short. */
static void
check_dgram(const uint8_t *data, size_t size)
{
	static uint8_t enc[8192 + 8];
	const uint8_t *body;
	size_t blen, n;
	uint64_t ctx;

	if (proto_dgram_decode(data, size, &ctx, &body, &blen) != 0)
		return;
	if (blen > sizeof enc - 8)
		return;
	n = proto_udp_dgram_encode(enc, sizeof enc, ctx, body, blen);
	if (ctx < PROTO_CTX_UDP_BASE || ctx > PROTO_CTX_UDP_MAX) {
		assert(n == 0);
		return;
	}
	assert(n == varint_len(ctx) + blen && n <= size);
	assert(proto_udp_dgram_room(n, ctx) == blen);
	assert(proto_udp_dgram_encode(enc, n - 1, ctx, body, blen) == 0);
	assert(proto_udp_ctx_valid(ctx, PROTO_UDP_BY_CLIENT) !=
	    proto_udp_ctx_valid(ctx, PROTO_UDP_BY_SERVER));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t v;

	check_header(data, size);
	check_dgram(data, size);

	/* A context from the input: the next of either side is of that
	 * side, above it, and none lies between. */
	if (varint_get(data, size, &v) > 0) {
		for (int o = 0; o < 2; o++) {
			uint64_t next = proto_udp_ctx_next(v, (enum proto_udp_opener)o);

			if (next == 0) {
				assert(v >= PROTO_CTX_UDP_MAX - 2);
				continue;
			}
			assert(proto_udp_ctx_valid(next, (enum proto_udp_opener)o));
			assert(next > v || (v < PROTO_CTX_UDP_BASE &&
			    next >= PROTO_CTX_UDP_BASE));
			assert(next - v <= 2 || v < PROTO_CTX_UDP_BASE);
		}
	}
	return 0;
}

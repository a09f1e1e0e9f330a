/* rove wire protocol v1: UDP flow headers and their datagrams. */
#include <string.h>

#include "proto-udp.h"

bool
proto_udp_ctx_valid(uint64_t ctx, enum proto_udp_opener opener)
{
	if (ctx < PROTO_CTX_UDP_BASE || ctx > PROTO_CTX_UDP_MAX)
		return false;
	/* The client's are even, roved's odd. */
	return (ctx & 1) == (opener == PROTO_UDP_BY_SERVER ? 1 : 0);
}

uint64_t
proto_udp_ctx_next(uint64_t prev, enum proto_udp_opener opener)
{
	uint64_t first = PROTO_CTX_UDP_BASE +
	    (opener == PROTO_UDP_BY_SERVER ? 1 : 0);

	if (prev < first)
		return first;
	if (!proto_udp_ctx_valid(prev, opener))
		prev -= 1;
	if (prev > PROTO_CTX_UDP_MAX - 2)
		return 0;
	return prev + 2;
}

static enum proto_udp_opener
opener_of(uint64_t type)
{
	return type == PROTO_FWD_UDP_CONNECT ? PROTO_UDP_BY_CLIENT :
	    PROTO_UDP_BY_SERVER;
}

size_t
proto_udp_encode(uint8_t *out, size_t outlen, const struct proto_udp_header *h)
{
	size_t hostlen, need, off;

	/* Refuse what the decoder would refuse, so that whatever is sent
	 * decodes back to the same header. */
	if (h->type != PROTO_FWD_UDP_CONNECT && h->type != PROTO_FWD_UDP_REMOTE)
		return 0;
	if (!proto_udp_ctx_valid(h->ctx, opener_of(h->type)) || h->port == 0)
		return 0;
	hostlen = strnlen(h->host, sizeof h->host);
	if (h->type == PROTO_FWD_UDP_CONNECT ?
	    !proto_fwd_host_valid(h->host, hostlen) : hostlen != 0)
		return 0;

	need = varint_len(h->type) + varint_len(h->ctx) + 2;
	if (h->type == PROTO_FWD_UDP_CONNECT)
		need += varint_len(hostlen) + hostlen;
	if (outlen < need)
		return 0;
	off = varint_put(out, outlen, h->type);
	off += varint_put(out + off, outlen - off, h->ctx);
	if (h->type == PROTO_FWD_UDP_CONNECT) {
		off += varint_put(out + off, outlen - off, hostlen);
		memcpy(out + off, h->host, hostlen);
		off += hostlen;
	}
	out[off++] = (uint8_t)(h->port >> 8);
	out[off++] = (uint8_t)h->port;
	return off;
}

/*
 * As proto_fwd_decode: every check runs on the bytes already present, so a
 * malformed header is refused as soon as it is seen, and a prefix of a
 * valid one only ever asks for more.
 */
long
proto_udp_decode(const uint8_t *in, size_t inlen, struct proto_udp_header *h)
{
	uint64_t type, ctx, hostlen = 0;
	size_t n1, n2, n3 = 0, avail, left;
	const uint8_t *p;
	uint16_t port;

	n1 = varint_get(in, inlen, &type);
	if (n1 == 0)
		return 0;
	if (type != PROTO_FWD_UDP_CONNECT && type != PROTO_FWD_UDP_REMOTE)
		return -1;
	n2 = varint_get(in + n1, inlen - n1, &ctx);
	if (n2 == 0)
		return 0;
	if (!proto_udp_ctx_valid(ctx, opener_of(type)))
		return -1;
	p = in + n1 + n2;
	left = inlen - n1 - n2;
	if (type == PROTO_FWD_UDP_CONNECT) {
		n3 = varint_get(p, left, &hostlen);
		if (n3 == 0)
			return 0;
		if (hostlen == 0 || hostlen > PROTO_FWD_MAX_HOST)
			return -1;
		p += n3;
		left -= n3;
		avail = left < hostlen ? left : (size_t)hostlen;
		if (avail > 0 && !proto_fwd_host_valid((const char *)p, avail))
			return -1;
	}
	if (left < hostlen + 2)
		return 0;
	port = (uint16_t)(p[hostlen] << 8 | p[hostlen + 1]);
	if (port == 0)
		return -1;

	memset(h, 0, sizeof *h);
	h->type = type;
	h->ctx = ctx;
	memcpy(h->host, p, (size_t)hostlen);
	h->port = port;
	return (long)(n1 + n2 + n3 + hostlen + 2);
}

int
proto_udp_is_udp(const uint8_t *in, size_t inlen)
{
	uint64_t type;

	if (varint_get(in, inlen, &type) == 0)
		return -1;
	return type == PROTO_FWD_UDP_CONNECT || type == PROTO_FWD_UDP_REMOTE;
}

size_t
proto_udp_dgram_room(size_t room, uint64_t ctx)
{
	size_t n = varint_len(ctx);

	return room > n ? room - n : 0;
}

size_t
proto_udp_dgram_encode(uint8_t *out, size_t outlen, uint64_t ctx,
    const uint8_t *payload, size_t len)
{
	size_t n;

	if (ctx < PROTO_CTX_UDP_BASE || ctx > PROTO_CTX_UDP_MAX ||
	    outlen < varint_len(ctx) || len > outlen - varint_len(ctx))
		return 0;
	n = varint_put(out, outlen, ctx);
	if (len > 0)
		memcpy(out + n, payload, len);
	return n + len;
}

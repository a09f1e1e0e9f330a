/* rove wire protocol v1: forward stream headers and remote-forward messages. */
#include <string.h>

#include "proto-fwd.h"

/* Field IDs of REMOTE_FORWARD and REMOTE_FORWARD_REPLY bodies. */
enum {
	REMOTE_PORT = 1,
	REMOTE_STATUS = 2,
};

static const char *const error_names[PROTO_FWD_ERR_COUNT] = {
	[PROTO_FWD_OK] = "ok",
	[PROTO_FWD_ERR_RESET] = "reset",
	[PROTO_FWD_ERR_REFUSED] = "refused",
	[PROTO_FWD_ERR_UNREACHABLE] = "unreachable",
	[PROTO_FWD_ERR_DENIED] = "denied",
	[PROTO_FWD_ERR_TIMEOUT] = "timeout",
	[PROTO_FWD_ERR_LIMIT] = "limit",
	[PROTO_FWD_ERR_PROTOCOL] = "protocol",
	[PROTO_FWD_ERR_NAME] = "name",
};

/* A DNS name or an IPv4/IPv6 literal needs no other byte. Refusing the rest
 * keeps control characters and shell or format metacharacters out of logs,
 * the resolver and the status output. */
static int
host_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':' ||
	    c == '_';
}

bool
proto_fwd_host_valid(const char *host, size_t len)
{
	if (len == 0 || len > PROTO_FWD_MAX_HOST)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!host_char_ok((unsigned char)host[i]))
			return false;
	}
	return true;
}

const char *
proto_fwd_error_name(uint64_t code)
{
	if (code >= PROTO_FWD_ERR_COUNT)
		return "unknown";
	return error_names[code];
}

size_t
proto_fwd_encode(uint8_t *out, size_t outlen, const struct proto_fwd_header *h)
{
	size_t hostlen, off;

	/* Refuse what the decoder would refuse, so that whatever is sent
	 * decodes back to the same header. */
	hostlen = strnlen(h->host, sizeof h->host);
	switch (h->type) {
	case PROTO_FWD_CONNECT:
		if (!proto_fwd_host_valid(h->host, hostlen))
			return 0;
		break;
	case PROTO_FWD_REMOTE:
		if (hostlen != 0)
			return 0;
		break;
	default:
		return 0;
	}
	if (h->port == 0)
		return 0;

	/* Nothing is written unless all of it fits. */
	if (outlen < proto_varint_len(h->type) + proto_varint_len(hostlen) +
	    hostlen + 2)
		return 0;
	off = proto_varint_put(out, outlen, h->type);
	off += proto_varint_put(out + off, outlen - off, hostlen);
	memcpy(out + off, h->host, hostlen);
	off += hostlen;
	out[off++] = (uint8_t)(h->port >> 8);
	out[off++] = (uint8_t)h->port;
	return off;
}

/*
 * Every check runs on the bytes already present, so a malformed header is
 * refused as soon as it is seen instead of after the peer sends more; a
 * prefix of a valid header only ever asks for more.
 */
long
proto_fwd_decode(const uint8_t *in, size_t inlen, struct proto_fwd_header *h)
{
	uint64_t type, hostlen;
	size_t n1, n2, avail;
	uint16_t port;

	n1 = proto_varint_get(in, inlen, &type);
	if (n1 == 0)
		return 0;
	if (type != PROTO_FWD_CONNECT && type != PROTO_FWD_REMOTE)
		return -1;
	n2 = proto_varint_get(in + n1, inlen - n1, &hostlen);
	if (n2 == 0)
		return 0;
	if (hostlen > PROTO_FWD_MAX_HOST)
		return -1;
	if (type == PROTO_FWD_CONNECT && hostlen == 0)
		return -1;
	if (type == PROTO_FWD_REMOTE && hostlen != 0)
		return -1;

	in += n1 + n2;
	inlen -= n1 + n2;
	avail = inlen < hostlen ? inlen : (size_t)hostlen;
	if (avail > 0 && !proto_fwd_host_valid((const char *)in, avail))
		return -1;
	if (inlen < hostlen + 2)
		return 0;
	port = (uint16_t)(in[hostlen] << 8 | in[hostlen + 1]);
	if (port == 0)
		return -1;

	memset(h, 0, sizeof *h);
	h->type = type;
	memcpy(h->host, in, (size_t)hostlen);
	h->port = port;
	return (long)(n1 + n2 + hostlen + 2);
}

/* One field holding one varint, as proto.c writes scalars. */
static size_t
put_field_varint(uint8_t *out, size_t outlen, uint64_t id, uint64_t v)
{
	uint8_t buf[3 * 8];
	size_t n = 0, m;

	if ((m = proto_varint_put(buf, sizeof buf, id)) == 0)
		return 0;
	n += m;
	if ((m = proto_varint_put(buf + n, sizeof buf - n, proto_varint_len(v))) == 0)
		return 0;
	n += m;
	if ((m = proto_varint_put(buf + n, sizeof buf - n, v)) == 0)
		return 0;
	n += m;
	if (outlen < n)
		return 0;
	memcpy(out, buf, n);
	return n;
}

size_t
proto_fwd_remote_encode(uint8_t *out, size_t outlen, uint64_t type,
    const struct proto_remote_forward *rf)
{
	uint8_t body[2 * 3 * 8];
	size_t blen, n, off;

	if (type != PROTO_MSG_REMOTE_FORWARD &&
	    type != PROTO_MSG_REMOTE_FORWARD_REPLY &&
	    type != PROTO_MSG_REMOTE_FORWARD_CANCEL)
		return 0;
	if (rf->port == 0)
		return 0;
	blen = put_field_varint(body, sizeof body, REMOTE_PORT, rf->port);
	/* Only a reply has a status; a request's would mean nothing. */
	if (type == PROTO_MSG_REMOTE_FORWARD_REPLY) {
		if ((n = put_field_varint(body + blen, sizeof body - blen,
		    REMOTE_STATUS, rf->status)) == 0)
			return 0;
		blen += n;
	}

	if (outlen < proto_varint_len(type) + proto_varint_len(blen) + blen)
		return 0;
	off = proto_varint_put(out, outlen, type);
	off += proto_varint_put(out + off, outlen - off, blen);
	memcpy(out + off, body, blen);
	return off + blen;
}

/* The next (id, value) field of a body: 1, 0 at the end, -1 if malformed. */
static int
next_field(const uint8_t **p, size_t *left, uint64_t *id, const uint8_t **v,
    size_t *vlen)
{
	uint64_t len;
	size_t n;

	if (*left == 0)
		return 0;
	if ((n = proto_varint_get(*p, *left, id)) == 0)
		return -1;
	*p += n;
	*left -= n;
	if ((n = proto_varint_get(*p, *left, &len)) == 0)
		return -1;
	*p += n;
	*left -= n;
	if (len > *left)
		return -1;
	*v = *p;
	*vlen = (size_t)len;
	*p += len;
	*left -= (size_t)len;
	return 1;
}

/* A scalar field holds exactly one varint and nothing else. */
static int
field_varint(const uint8_t *v, size_t vlen, uint64_t *x)
{
	if (vlen == 0 || proto_varint_get(v, vlen, x) != vlen)
		return -1;
	return 0;
}

/* As in proto.c, a repeated field overrides the earlier one. */
int
proto_fwd_remote_decode(const uint8_t *body, size_t len,
    struct proto_remote_forward *rf)
{
	const uint8_t *v;
	uint64_t id, x, port = 0, status = PROTO_FWD_OK;
	size_t vlen;
	int r;

	while ((r = next_field(&body, &len, &id, &v, &vlen)) == 1) {
		switch (id) {
		case REMOTE_PORT:
			if (field_varint(v, vlen, &x) != 0 || x == 0 ||
			    x > UINT16_MAX)
				return -1;
			port = x;
			break;
		case REMOTE_STATUS:
			if (field_varint(v, vlen, &status) != 0)
				return -1;
			break;
		default:
			break;
		}
	}
	if (r != 0 || port == 0)
		return -1;
	memset(rf, 0, sizeof *rf);
	rf->port = (uint16_t)port;
	rf->status = status;
	return 0;
}

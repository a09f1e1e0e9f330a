/* rove wire protocol v1: forward stream headers and remote-forward messages. */
#include <string.h>

#include "proto-fwd.h"
#include "tlv.h"

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
	if (outlen < varint_len(h->type) + varint_len(hostlen) +
	    hostlen + 2)
		return 0;
	off = varint_put(out, outlen, h->type);
	off += varint_put(out + off, outlen - off, hostlen);
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

	n1 = varint_get(in, inlen, &type);
	if (n1 == 0)
		return 0;
	if (type != PROTO_FWD_CONNECT && type != PROTO_FWD_REMOTE)
		return -1;
	n2 = varint_get(in + n1, inlen - n1, &hostlen);
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

size_t
proto_fwd_remote_encode(uint8_t *out, size_t outlen, uint64_t type,
    const struct proto_remote_forward *rf)
{
	uint8_t body[2 * 3 * 8];
	struct tlv_writer w = TLV_WRITER(body);

	if (type != PROTO_MSG_REMOTE_FORWARD &&
	    type != PROTO_MSG_REMOTE_FORWARD_REPLY &&
	    type != PROTO_MSG_REMOTE_FORWARD_CANCEL)
		return 0;
	if (rf->port == 0)
		return 0;
	tlv_put_field_varint(&w, REMOTE_PORT, rf->port);
	/* Only a reply has a status; a request's would mean nothing. */
	if (type == PROTO_MSG_REMOTE_FORWARD_REPLY)
		tlv_put_field_varint(&w, REMOTE_STATUS, rf->status);
	return tlv_put_message(out, outlen, type, &w);
}

struct remote_fields {
	uint64_t port, status;
};

static int
take_remote(const struct tlv_field *f, void *arg)
{
	struct remote_fields *r = arg;
	uint64_t x;

	switch (f->id) {
	case REMOTE_PORT:
		if (tlv_field_varint(f, &x) != 0 || x == 0 || x > UINT16_MAX)
			return -1;
		r->port = x;
		return 0;
	case REMOTE_STATUS:
		return tlv_field_varint(f, &r->status);
	default:
		return 0;
	}
}

/* As in proto.c, a repeated field overrides the earlier one. */
int
proto_fwd_remote_decode(const uint8_t *body, size_t len,
    struct proto_remote_forward *rf)
{
	struct remote_fields r = { 0, PROTO_FWD_OK };

	if (tlv_decode(body, len, take_remote, &r) != 0 || r.port == 0)
		return -1;
	memset(rf, 0, sizeof *rf);
	rf->port = (uint16_t)r.port;
	rf->status = r.status;
	return 0;
}

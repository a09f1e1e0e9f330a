/* rove wire protocol v1: forward stream headers and remote-forward messages. */
#include <string.h>
#include <sys/socket.h>

#include "proto-fwd.h"
#include "tlv.h"

/* Field IDs of REMOTE_FORWARD and REMOTE_FORWARD_REPLY bodies. */
enum {
	REMOTE_PORT = 1,
	REMOTE_STATUS = 2,
	REMOTE_BIND = 3,
	REMOTE_UDP = 4,
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
	[PROTO_FWD_ERR_GONE] = "gone",
};

/* Wire types of CONNECT and REMOTE with an ID (see proto-fwd.h). */
enum { WIRE_CONNECT_ID = 3, WIRE_REMOTE_ID = 4 };

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
	uint64_t type = h->type;

	if (h->type == PROTO_FWD_RESUME) {
		if (h->id == 0 || h->id > PROTO_FWD_ID_MAX || h->rx > PROTO_FWD_ID_MAX ||
		    outlen < varint_len(type) + varint_len(h->id) + varint_len(h->rx))
			return 0;
		off = varint_put(out, outlen, type);
		off += varint_put(out + off, outlen - off, h->id);
		off += varint_put(out + off, outlen - off, h->rx);
		return off;
	}
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
	if (h->port == 0 || h->id > PROTO_FWD_ID_MAX)
		return 0;
	if (h->id != 0)
		type = h->type == PROTO_FWD_CONNECT ? WIRE_CONNECT_ID : WIRE_REMOTE_ID;

	/* Nothing is written unless all of it fits. */
	if (outlen < varint_len(type) + varint_len(hostlen) + hostlen + 2 +
	    (h->id != 0 ? varint_len(h->id) : 0))
		return 0;
	off = varint_put(out, outlen, type);
	off += varint_put(out + off, outlen - off, hostlen);
	memcpy(out + off, h->host, hostlen);
	off += hostlen;
	out[off++] = (uint8_t)(h->port >> 8);
	out[off++] = (uint8_t)h->port;
	if (h->id != 0)
		off += varint_put(out + off, outlen - off, h->id);
	return off;
}

/* RESUME's body after its type: the ID (never 0), then rx. */
static long
decode_resume(const uint8_t *in, size_t inlen, size_t n1,
    struct proto_fwd_header *h)
{
	uint64_t id, rx;
	size_t n2, n3;

	n2 = varint_get(in + n1, inlen - n1, &id);
	if (n2 == 0)
		return 0;
	if (id == 0)
		return -1;
	n3 = varint_get(in + n1 + n2, inlen - n1 - n2, &rx);
	if (n3 == 0)
		return 0;
	memset(h, 0, sizeof *h);
	h->type = PROTO_FWD_RESUME;
	h->id = id;
	h->rx = rx;
	return (long)(n1 + n2 + n3);
}

/*
 * Every check runs on the bytes already present, so a malformed header is
 * refused as soon as it is seen instead of after the peer sends more; a
 * prefix of a valid header only ever asks for more.
 */
long
proto_fwd_decode(const uint8_t *in, size_t inlen, struct proto_fwd_header *h)
{
	uint64_t type, hostlen, id = 0;
	size_t n1, n2, n3 = 0, avail;
	uint16_t port;
	bool with_id;

	n1 = varint_get(in, inlen, &type);
	if (n1 == 0)
		return 0;
	if (type == PROTO_FWD_RESUME)
		return decode_resume(in, inlen, n1, h);
	with_id = type == WIRE_CONNECT_ID || type == WIRE_REMOTE_ID;
	if (type == WIRE_CONNECT_ID)
		type = PROTO_FWD_CONNECT;
	else if (type == WIRE_REMOTE_ID)
		type = PROTO_FWD_REMOTE;
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
	if (with_id) {
		n3 = varint_get(in + hostlen + 2, inlen - hostlen - 2, &id);
		if (n3 == 0)
			return 0;
		if (id == 0)
			return -1;
	}

	memset(h, 0, sizeof *h);
	h->type = type;
	memcpy(h->host, in, (size_t)hostlen);
	h->port = port;
	h->id = id;
	return (long)(n1 + n2 + hostlen + 2 + n3);
}

size_t
proto_fwd_resumed_encode(uint8_t *out, size_t outlen, uint64_t rx)
{
	if (rx > PROTO_FWD_ID_MAX || outlen < 1 + varint_len(rx))
		return 0;
	out[0] = PROTO_FWD_OK;
	return 1 + varint_put(out + 1, outlen - 1, rx);
}

long
proto_fwd_resumed_decode(const uint8_t *in, size_t inlen, uint64_t *rx)
{
	size_t n;

	if (inlen == 0)
		return 0;
	if (in[0] != PROTO_FWD_OK)
		return -1;
	n = varint_get(in + 1, inlen - 1, rx);
	return n == 0 ? 0 : (long)(1 + n);
}

size_t
proto_fwd_remote_encode(uint8_t *out, size_t outlen, uint64_t type,
    const struct proto_remote_forward *rf)
{
	uint8_t body[2 * 3 * 8 + 2 + 16];
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
	switch (rf->bind) {
	case PROTO_RBIND_DEFAULT:
		/* No field: what an older peer sends and understands. */
		break;
	case PROTO_RBIND_ALL:
		tlv_put_field(&w, REMOTE_BIND, NULL, 0);
		break;
	case PROTO_RBIND_ADDR:
		if (rf->bind_addr.family == AF_INET)
			tlv_put_field(&w, REMOTE_BIND, rf->bind_addr.b, 4);
		else if (rf->bind_addr.family == AF_INET6)
			tlv_put_field(&w, REMOTE_BIND, rf->bind_addr.b, 16);
		else
			return 0;
		break;
	default:
		return 0;
	}
	/* Absent for TCP, what an older peer sends and understands. */
	if (rf->udp)
		tlv_put_field(&w, REMOTE_UDP, NULL, 0);
	return tlv_put_message(out, outlen, type, &w);
}

struct remote_fields {
	uint64_t port, status;
	enum proto_remote_bind bind;
	struct ipaddr bind_addr;
	bool udp;
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
	case REMOTE_BIND:
		memset(&r->bind_addr, 0, sizeof r->bind_addr);
		if (f->len == 0) {
			r->bind = PROTO_RBIND_ALL;
			return 0;
		}
		if (f->len != 4 && f->len != 16)
			return -1;
		r->bind = PROTO_RBIND_ADDR;
		r->bind_addr.family = f->len == 4 ? AF_INET : AF_INET6;
		memcpy(r->bind_addr.b, f->v, f->len);
		return 0;
	case REMOTE_UDP:
		if (f->len != 0)
			return -1;
		r->udp = true;
		return 0;
	default:
		return 0;
	}
}

/* As in proto.c, a repeated field overrides the earlier one. */
int
proto_fwd_remote_decode(const uint8_t *body, size_t len,
    struct proto_remote_forward *rf)
{
	struct remote_fields r;

	memset(&r, 0, sizeof r);
	r.status = PROTO_FWD_OK;
	r.bind = PROTO_RBIND_DEFAULT;
	if (tlv_decode(body, len, take_remote, &r) != 0 || r.port == 0)
		return -1;
	memset(rf, 0, sizeof *rf);
	rf->port = (uint16_t)r.port;
	rf->status = r.status;
	rf->bind = r.bind;
	rf->bind_addr = r.bind_addr;
	rf->udp = r.udp;
	return 0;
}

bool
proto_fwd_remote_same(const struct proto_remote_forward *a,
    const struct proto_remote_forward *b)
{
	if (a->port != b->port || a->bind != b->bind || a->udp != b->udp)
		return false;
	return a->bind != PROTO_RBIND_ADDR ||
	    addr_equal(&a->bind_addr, &b->bind_addr);
}

const char *
proto_fwd_remote_str(const struct proto_remote_forward *rf,
    char buf[static PROTO_FWD_REMOTE_STRLEN])
{
	char a[ADDR_STRLEN];
	size_t off = 0;

	if (rf->udp) {
		memcpy(buf, "udp/", 4);
		off = 4;
	}
	switch (rf->bind) {
	case PROTO_RBIND_DEFAULT:
		addr_hostport_str(buf + off, PROTO_FWD_REMOTE_STRLEN - off,
		    "localhost", rf->port);
		break;
	case PROTO_RBIND_ALL:
		addr_hostport_str(buf + off, PROTO_FWD_REMOTE_STRLEN - off, "*",
		    rf->port);
		break;
	default:
		addr_hostport_str(buf + off, PROTO_FWD_REMOTE_STRLEN - off,
		    addr_ip_str(&rf->bind_addr, a), rf->port);
		break;
	}
	return buf;
}

/* rove wire protocol v1: QUIC varints, DATAGRAM contexts, control messages. */
#include <string.h>
#include <sys/socket.h>

#include "proto.h"

#define VARINT_MAX ((UINT64_C(1) << 62) - 1)

/* Field IDs inside message bodies (docs/PROTOCOL.md). */
enum {
	HELLO_VERSION = 1,
	HELLO_FEATURES = 2,
};
enum {
	CONFIG_VERSION = 1,
	CONFIG_ADDRESS = 2,
	CONFIG_ROUTE = 3,
	CONFIG_MTU = 4,
	CONFIG_KEEPALIVE = 5,
	CONFIG_DNS = 6,
	CONFIG_DNS_SEARCH = 7,
	CONFIG_FEATURES = 8,
};
enum {
	ERROR_CODE = 1,
	ERROR_TEXT = 2,
};

/* Wire family codes of an address or route field. */
#define WIRE_FAMILY_INET 4
#define WIRE_FAMILY_INET6 6

size_t
proto_varint_len(uint64_t v)
{
	if (v < 64)
		return 1;
	if (v < 16384)
		return 2;
	if (v < (UINT64_C(1) << 30))
		return 4;
	if (v <= VARINT_MAX)
		return 8;
	return 0;
}

size_t
proto_varint_put(uint8_t *out, size_t outlen, uint64_t v)
{
	size_t n = proto_varint_len(v);
	uint8_t prefix;

	if (n == 0 || outlen < n)
		return 0;
	/* The top two bits of the first byte give log2 of the length. */
	prefix = n == 1 ? 0x00 : n == 2 ? 0x40 : n == 4 ? 0x80 : 0xc0;
	for (size_t i = n; i > 0; i--) {
		out[i - 1] = (uint8_t)v;
		v >>= 8;
	}
	out[0] |= prefix;
	return n;
}

size_t
proto_varint_get(const uint8_t *in, size_t inlen, uint64_t *v)
{
	size_t n;
	uint64_t x;

	if (inlen < 1)
		return 0;
	n = (size_t)1 << (in[0] >> 6);
	if (inlen < n)
		return 0;
	x = in[0] & 0x3f;
	for (size_t i = 1; i < n; i++)
		x = x << 8 | in[i];
	*v = x;
	return n;
}

int
proto_dgram_decode(const uint8_t *in, size_t inlen, uint64_t *ctx,
    const uint8_t **body, size_t *bodylen)
{
	size_t n;

	n = proto_varint_get(in, inlen, ctx);
	if (n == 0)
		return -1;
	*body = in + n;
	*bodylen = inlen - n;
	return 0;
}

long
proto_msg_next(const uint8_t *in, size_t inlen, uint64_t *type,
    const uint8_t **body, size_t *bodylen)
{
	uint64_t t, len;
	size_t n1, n2;

	n1 = proto_varint_get(in, inlen, &t);
	if (n1 == 0)
		return 0;
	n2 = proto_varint_get(in + n1, inlen - n1, &len);
	if (n2 == 0)
		return 0;
	/* Refuse an oversized length at once rather than buffer towards it. */
	if (len > PROTO_MAX_MSG)
		return -1;
	if (inlen - n1 - n2 < len)
		return 0;
	*type = t;
	*body = in + n1 + n2;
	*bodylen = (size_t)len;
	return (long)(n1 + n2 + len);
}

/*
 * Encoding: a bounded writer that remembers overflow, so the encoders can
 * write every field and check once at the end.
 */
struct wbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
	bool full;
};

static void
put_bytes(struct wbuf *w, const void *data, size_t len)
{
	if (w->full || w->cap - w->len < len) {
		w->full = true;
		return;
	}
	if (len > 0)
		memcpy(w->p + w->len, data, len);
	w->len += len;
}

static void
put_varint(struct wbuf *w, uint64_t v)
{
	size_t n;

	if (w->full)
		return;
	n = proto_varint_put(w->p + w->len, w->cap - w->len, v);
	if (n == 0)
		w->full = true;
	w->len += n;
}

static void
put_field_varint(struct wbuf *w, uint64_t id, uint64_t v)
{
	put_varint(w, id);
	put_varint(w, proto_varint_len(v));
	put_varint(w, v);
}

/* A prefix as 1 byte family (4 or 6), 1 byte length, 4 or 16 bytes address.
 * Returns -1 for a prefix the decoder would refuse. */
static int
put_field_prefix(struct wbuf *w, uint64_t id, const struct prefix *p)
{
	uint8_t v[2 + 16];
	size_t alen;

	if (p->addr.family == AF_INET && p->len <= 32) {
		v[0] = WIRE_FAMILY_INET;
		alen = 4;
	} else if (p->addr.family == AF_INET6 && p->len <= 128) {
		v[0] = WIRE_FAMILY_INET6;
		alen = 16;
	} else
		return -1;
	v[1] = p->len;
	memcpy(v + 2, p->addr.b, alen);
	put_varint(w, id);
	put_varint(w, 2 + alen);
	put_bytes(w, v, 2 + alen);
	return 0;
}

/* An address as 1 byte family (4 or 6), then 4 or 16 bytes. */
static int
put_field_addr(struct wbuf *w, uint64_t id, const struct ipaddr *a)
{
	uint8_t v[1 + 16];
	size_t alen;

	if (a->family == AF_INET) {
		v[0] = WIRE_FAMILY_INET;
		alen = 4;
	} else if (a->family == AF_INET6) {
		v[0] = WIRE_FAMILY_INET6;
		alen = 16;
	} else
		return -1;
	memcpy(v + 1, a->b, alen);
	put_varint(w, id);
	put_varint(w, 1 + alen);
	put_bytes(w, v, 1 + alen);
	return 0;
}

static void
put_field_text(struct wbuf *w, uint64_t id, const char *text, size_t len)
{
	put_varint(w, id);
	put_varint(w, len);
	put_bytes(w, text, len);
}

/* Frame a finished body as type, length, body into `out`. */
static size_t
put_message(uint8_t *out, size_t outlen, uint64_t type, const struct wbuf *body)
{
	struct wbuf w = { out, 0, outlen, false };

	if (body->full || body->len > PROTO_MAX_MSG)
		return 0;
	put_varint(&w, type);
	put_varint(&w, body->len);
	put_bytes(&w, body->p, body->len);
	return w.full ? 0 : w.len;
}

size_t
proto_encode_client_hello(uint8_t *out, size_t outlen,
    const struct proto_client_hello *h)
{
	uint8_t buf[PROTO_MAX_MSG];
	struct wbuf w = { buf, 0, sizeof buf, false };

	put_field_varint(&w, HELLO_VERSION, h->version);
	put_field_varint(&w, HELLO_FEATURES, h->features);
	return put_message(out, outlen, PROTO_MSG_CLIENT_HELLO, &w);
}

size_t
proto_encode_server_config(uint8_t *out, size_t outlen,
    const struct proto_server_config *c)
{
	uint8_t buf[PROTO_MAX_MSG];
	struct wbuf w = { buf, 0, sizeof buf, false };

	if (c->naddrs > 2 || c->nroutes > PROTO_MAX_ROUTES ||
	    c->ndns > PROTO_MAX_DNS || c->ndns_search > PROTO_MAX_DNS_SEARCH)
		return 0;
	put_field_varint(&w, CONFIG_VERSION, c->version);
	for (size_t i = 0; i < c->naddrs; i++) {
		if (put_field_prefix(&w, CONFIG_ADDRESS, &c->addrs[i]) != 0)
			return 0;
	}
	for (size_t i = 0; i < c->nroutes; i++) {
		if (put_field_prefix(&w, CONFIG_ROUTE, &c->routes[i]) != 0)
			return 0;
	}
	put_field_varint(&w, CONFIG_MTU, c->mtu);
	put_field_varint(&w, CONFIG_KEEPALIVE, c->keepalive);
	for (size_t i = 0; i < c->ndns; i++) {
		if (put_field_addr(&w, CONFIG_DNS, &c->dns[i]) != 0)
			return 0;
	}
	/* Only what the decoder accepts, so a round trip is exact. */
	for (size_t i = 0; i < c->ndns_search; i++) {
		const char *d = c->dns_search[i];
		size_t n = strnlen(d, sizeof c->dns_search[i]);

		if (n == sizeof c->dns_search[i] || !addr_dns_name_valid(d))
			return 0;
		put_field_text(&w, CONFIG_DNS_SEARCH, d, n);
	}
	/* Only for a client that announced some: an older one knows no
	 * field 8 (it would skip it anyway). */
	if (c->features != 0)
		put_field_varint(&w, CONFIG_FEATURES, c->features);
	return put_message(out, outlen, PROTO_MSG_SERVER_CONFIG, &w);
}

size_t
proto_encode_error(uint8_t *out, size_t outlen, const struct proto_error *e)
{
	uint8_t buf[PROTO_MAX_MSG];
	struct wbuf w = { buf, 0, sizeof buf, false };
	size_t tlen;

	/* At most what the decoder can hand back, so a round trip is exact. */
	tlen = strnlen(e->text, sizeof e->text - 1);
	put_field_varint(&w, ERROR_CODE, e->code);
	put_varint(&w, ERROR_TEXT);
	put_varint(&w, tlen);
	put_bytes(&w, e->text, tlen);
	return put_message(out, outlen, PROTO_MSG_ERROR, &w);
}

/*
 * Decoding: a cursor over one body, yielding (id, value) fields. Any field
 * whose header is truncated or whose length runs past the body makes the
 * whole message malformed.
 */
struct field {
	uint64_t id;
	const uint8_t *v;
	size_t len;
};

/* Returns 1 with the next field, 0 at the end of the body, -1 if malformed. */
static int
next_field(const uint8_t **p, size_t *left, struct field *f)
{
	uint64_t len;
	size_t n;

	if (*left == 0)
		return 0;
	n = proto_varint_get(*p, *left, &f->id);
	if (n == 0)
		return -1;
	*p += n;
	*left -= n;
	n = proto_varint_get(*p, *left, &len);
	if (n == 0)
		return -1;
	*p += n;
	*left -= n;
	if (len > *left)
		return -1;
	f->v = *p;
	f->len = (size_t)len;
	*p += len;
	*left -= (size_t)len;
	return 1;
}

/* A scalar field holds exactly one varint and nothing else. */
static int
field_varint(const struct field *f, uint64_t *v)
{
	if (f->len == 0 || proto_varint_get(f->v, f->len, v) != f->len)
		return -1;
	return 0;
}

static int
field_u32(const struct field *f, uint32_t *v)
{
	uint64_t x;

	if (field_varint(f, &x) != 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int
field_prefix(const struct field *f, struct prefix *p)
{
	memset(p, 0, sizeof *p);
	if (f->len < 2)
		return -1;
	switch (f->v[0]) {
	case WIRE_FAMILY_INET:
		if (f->len != 2 + 4 || f->v[1] > 32)
			return -1;
		p->addr.family = AF_INET;
		memcpy(p->addr.b, f->v + 2, 4);
		break;
	case WIRE_FAMILY_INET6:
		if (f->len != 2 + 16 || f->v[1] > 128)
			return -1;
		p->addr.family = AF_INET6;
		memcpy(p->addr.b, f->v + 2, 16);
		break;
	default:
		return -1;
	}
	p->len = f->v[1];
	return 0;
}

static int
field_addr(const struct field *f, struct ipaddr *a)
{
	memset(a, 0, sizeof *a);
	if (f->len == 1 + 4 && f->v[0] == WIRE_FAMILY_INET)
		a->family = AF_INET;
	else if (f->len == 1 + 16 && f->v[0] == WIRE_FAMILY_INET6)
		a->family = AF_INET6;
	else
		return -1;
	memcpy(a->b, f->v + 1, f->len - 1);
	return 0;
}

/* A search domain goes into the host's resolver configuration (a line of
 * resolv.conf through resolvconf), so anything but a plain DNS name, a
 * newline or a space above all, makes the message malformed. */
static int
field_domain(const struct field *f, char out[static ADDR_DNS_NAME_MAX + 1])
{
	if (f->len == 0 || f->len > ADDR_DNS_NAME_MAX ||
	    memchr(f->v, '\0', f->len) != NULL)
		return -1;
	memcpy(out, f->v, f->len);
	out[f->len] = '\0';
	return addr_dns_name_valid(out) ? 0 : -1;
}

/* Scalar fields may repeat; the last one wins, as when a later writer
 * overrides a default it emitted earlier. */
int
proto_decode_client_hello(const uint8_t *body, size_t len,
    struct proto_client_hello *h)
{
	struct field f;
	int r;

	memset(h, 0, sizeof *h);
	while ((r = next_field(&body, &len, &f)) == 1) {
		switch (f.id) {
		case HELLO_VERSION:
			if (field_varint(&f, &h->version) != 0)
				return -1;
			break;
		case HELLO_FEATURES:
			if (field_varint(&f, &h->features) != 0)
				return -1;
			break;
		default:
			break;
		}
	}
	return r;
}

int
proto_decode_server_config(const uint8_t *body, size_t len,
    struct proto_server_config *c)
{
	struct field f;
	int r;

	memset(c, 0, sizeof *c);
	while ((r = next_field(&body, &len, &f)) == 1) {
		switch (f.id) {
		case CONFIG_VERSION:
			if (field_varint(&f, &c->version) != 0)
				return -1;
			break;
		case CONFIG_ADDRESS:
			if (c->naddrs == 2 ||
			    field_prefix(&f, &c->addrs[c->naddrs]) != 0)
				return -1;
			c->naddrs++;
			break;
		case CONFIG_ROUTE:
			if (c->nroutes == PROTO_MAX_ROUTES ||
			    field_prefix(&f, &c->routes[c->nroutes]) != 0)
				return -1;
			c->nroutes++;
			break;
		case CONFIG_MTU:
			if (field_u32(&f, &c->mtu) != 0)
				return -1;
			break;
		case CONFIG_KEEPALIVE:
			if (field_u32(&f, &c->keepalive) != 0)
				return -1;
			break;
		case CONFIG_DNS:
			if (c->ndns == PROTO_MAX_DNS ||
			    field_addr(&f, &c->dns[c->ndns]) != 0)
				return -1;
			c->ndns++;
			break;
		case CONFIG_DNS_SEARCH:
			if (c->ndns_search == PROTO_MAX_DNS_SEARCH ||
			    field_domain(&f, c->dns_search[c->ndns_search]) != 0)
				return -1;
			c->ndns_search++;
			break;
		case CONFIG_FEATURES:
			if (field_varint(&f, &c->features) != 0)
				return -1;
			break;
		default:
			break;
		}
	}
	return r;
}

int
proto_decode_error(const uint8_t *body, size_t len, struct proto_error *e)
{
	struct field f;
	size_t n;
	int r;

	memset(e, 0, sizeof *e);
	while ((r = next_field(&body, &len, &f)) == 1) {
		switch (f.id) {
		case ERROR_CODE:
			if (field_varint(&f, &e->code) != 0)
				return -1;
			break;
		case ERROR_TEXT:
			/* The text carries no terminator; an embedded NUL
			 * would silently hide the rest, so it is refused. */
			if (memchr(f.v, '\0', f.len) != NULL)
				return -1;
			/* A repeated field replaces the text whole, leaving
			 * no bytes of the earlier one behind. */
			n = f.len < sizeof e->text - 1 ? f.len : sizeof e->text - 1;
			memset(e->text, 0, sizeof e->text);
			memcpy(e->text, f.v, n);
			break;
		default:
			break;
		}
	}
	return r;
}

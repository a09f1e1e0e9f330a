/* rove wire protocol v1: DATAGRAM contexts and the control messages. */
#include <string.h>
#include <sys/socket.h>

#include "proto.h"
#include "tlv.h"

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
enum {
	PATH_NOTICE_QUIET_MS = 1,
};
enum {
	LOSS_REPORT_SENT = 1,
	LOSS_REPORT_LOST = 2,
};

/* Wire family codes of an address or route field. */
#define WIRE_FAMILY_INET 4
#define WIRE_FAMILY_INET6 6

int
proto_dgram_decode(const uint8_t *in, size_t inlen, uint64_t *ctx,
    const uint8_t **body, size_t *bodylen)
{
	size_t n;

	n = varint_get(in, inlen, ctx);
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

	n1 = varint_get(in, inlen, &t);
	if (n1 == 0)
		return 0;
	n2 = varint_get(in + n1, inlen - n1, &len);
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

/* A prefix as 1 byte family (4 or 6), 1 byte length, 4 or 16 bytes address.
 * Returns -1 for a prefix the decoder would refuse. */
static int
put_field_prefix(struct tlv_writer *w, uint64_t id, const struct prefix *p)
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
	tlv_put_field(w, id, v, 2 + alen);
	return 0;
}

/* An address as 1 byte family (4 or 6), then 4 or 16 bytes. */
static int
put_field_addr(struct tlv_writer *w, uint64_t id, const struct ipaddr *a)
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
	tlv_put_field(w, id, v, 1 + alen);
	return 0;
}

size_t
proto_encode_client_hello(uint8_t *out, size_t outlen,
    const struct proto_client_hello *h)
{
	uint8_t buf[PROTO_MAX_MSG];
	struct tlv_writer w = TLV_WRITER(buf);

	tlv_put_field_varint(&w, HELLO_VERSION, h->version);
	tlv_put_field_varint(&w, HELLO_FEATURES, h->features);
	return tlv_put_message(out, outlen, PROTO_MSG_CLIENT_HELLO, &w);
}

size_t
proto_encode_server_config(uint8_t *out, size_t outlen,
    const struct proto_server_config *c)
{
	uint8_t buf[PROTO_MAX_MSG];
	struct tlv_writer w = TLV_WRITER(buf);

	if (c->naddrs > 2 || c->nroutes > PROTO_MAX_ROUTES ||
	    c->ndns > PROTO_MAX_DNS || c->ndns_search > PROTO_MAX_DNS_SEARCH)
		return 0;
	tlv_put_field_varint(&w, CONFIG_VERSION, c->version);
	for (size_t i = 0; i < c->naddrs; i++) {
		if (put_field_prefix(&w, CONFIG_ADDRESS, &c->addrs[i]) != 0)
			return 0;
	}
	for (size_t i = 0; i < c->nroutes; i++) {
		if (put_field_prefix(&w, CONFIG_ROUTE, &c->routes[i]) != 0)
			return 0;
	}
	tlv_put_field_varint(&w, CONFIG_MTU, c->mtu);
	tlv_put_field_varint(&w, CONFIG_KEEPALIVE, c->keepalive);
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
		tlv_put_field(&w, CONFIG_DNS_SEARCH, d, n);
	}
	/* Only for a client that announced some: an older one knows no
	 * field 8 (it would skip it anyway). */
	if (c->features != 0)
		tlv_put_field_varint(&w, CONFIG_FEATURES, c->features);
	return tlv_put_message(out, outlen, PROTO_MSG_SERVER_CONFIG, &w);
}

size_t
proto_encode_error(uint8_t *out, size_t outlen, const struct proto_error *e)
{
	uint8_t buf[PROTO_MAX_MSG];
	struct tlv_writer w = TLV_WRITER(buf);
	size_t tlen;

	/* At most what the decoder can hand back, so a round trip is exact. */
	tlen = strnlen(e->text, sizeof e->text - 1);
	tlv_put_field_varint(&w, ERROR_CODE, e->code);
	tlv_put_field(&w, ERROR_TEXT, e->text, tlen);
	return tlv_put_message(out, outlen, PROTO_MSG_ERROR, &w);
}

size_t
proto_encode_path_notice(uint8_t *out, size_t outlen,
    const struct proto_path_notice *pn)
{
	uint8_t buf[32];
	struct tlv_writer w = TLV_WRITER(buf);

	tlv_put_field_varint(&w, PATH_NOTICE_QUIET_MS, pn->quiet_ms);
	return tlv_put_message(out, outlen, PROTO_MSG_PATH_NOTICE, &w);
}

size_t
proto_encode_loss_report(uint8_t *out, size_t outlen,
    const struct proto_loss_report *lr)
{
	uint8_t buf[32];
	struct tlv_writer w = TLV_WRITER(buf);

	tlv_put_field_varint(&w, LOSS_REPORT_SENT, lr->sent);
	tlv_put_field_varint(&w, LOSS_REPORT_LOST, lr->lost);
	return tlv_put_message(out, outlen, PROTO_MSG_LOSS_REPORT, &w);
}

/* Decoding: each message takes its fields from tlv_decode. */

static int
field_u32(const struct tlv_field *f, uint32_t *v)
{
	uint64_t x;

	if (tlv_field_varint(f, &x) != 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int
field_prefix(const struct tlv_field *f, struct prefix *p)
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
field_addr(const struct tlv_field *f, struct ipaddr *a)
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
field_domain(const struct tlv_field *f, char out[static ADDR_DNS_NAME_MAX + 1])
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
static int
take_hello(const struct tlv_field *f, void *arg)
{
	struct proto_client_hello *h = arg;

	switch (f->id) {
	case HELLO_VERSION:
		return tlv_field_varint(f, &h->version);
	case HELLO_FEATURES:
		return tlv_field_varint(f, &h->features);
	default:
		return 0;
	}
}

int
proto_decode_client_hello(const uint8_t *body, size_t len,
    struct proto_client_hello *h)
{
	memset(h, 0, sizeof *h);
	return tlv_decode(body, len, take_hello, h);
}

static int
take_config(const struct tlv_field *f, void *arg)
{
	struct proto_server_config *c = arg;

	switch (f->id) {
	case CONFIG_VERSION:
		return tlv_field_varint(f, &c->version);
	case CONFIG_ADDRESS:
		if (c->naddrs == 2 ||
		    field_prefix(f, &c->addrs[c->naddrs]) != 0)
			return -1;
		c->naddrs++;
		return 0;
	case CONFIG_ROUTE:
		if (c->nroutes == PROTO_MAX_ROUTES ||
		    field_prefix(f, &c->routes[c->nroutes]) != 0)
			return -1;
		c->nroutes++;
		return 0;
	case CONFIG_MTU:
		return field_u32(f, &c->mtu);
	case CONFIG_KEEPALIVE:
		return field_u32(f, &c->keepalive);
	case CONFIG_DNS:
		if (c->ndns == PROTO_MAX_DNS ||
		    field_addr(f, &c->dns[c->ndns]) != 0)
			return -1;
		c->ndns++;
		return 0;
	case CONFIG_DNS_SEARCH:
		if (c->ndns_search == PROTO_MAX_DNS_SEARCH ||
		    field_domain(f, c->dns_search[c->ndns_search]) != 0)
			return -1;
		c->ndns_search++;
		return 0;
	case CONFIG_FEATURES:
		return tlv_field_varint(f, &c->features);
	default:
		return 0;
	}
}

int
proto_decode_server_config(const uint8_t *body, size_t len,
    struct proto_server_config *c)
{
	memset(c, 0, sizeof *c);
	return tlv_decode(body, len, take_config, c);
}

static int
take_error(const struct tlv_field *f, void *arg)
{
	struct proto_error *e = arg;
	size_t n;

	switch (f->id) {
	case ERROR_CODE:
		return tlv_field_varint(f, &e->code);
	case ERROR_TEXT:
		/* The text carries no terminator; an embedded NUL would
		 * silently hide the rest, so it is refused. */
		if (memchr(f->v, '\0', f->len) != NULL)
			return -1;
		/* A repeated field replaces the text whole, leaving no bytes
		 * of the earlier one behind. */
		n = f->len < sizeof e->text - 1 ? f->len : sizeof e->text - 1;
		memset(e->text, 0, sizeof e->text);
		memcpy(e->text, f->v, n);
		return 0;
	default:
		return 0;
	}
}

int
proto_decode_error(const uint8_t *body, size_t len, struct proto_error *e)
{
	memset(e, 0, sizeof *e);
	return tlv_decode(body, len, take_error, e);
}

static int
take_path_notice(const struct tlv_field *f, void *arg)
{
	struct proto_path_notice *pn = arg;

	if (f->id == PATH_NOTICE_QUIET_MS)
		return tlv_field_varint(f, &pn->quiet_ms);
	return 0;
}

int
proto_decode_path_notice(const uint8_t *body, size_t len,
    struct proto_path_notice *pn)
{
	memset(pn, 0, sizeof *pn);
	return tlv_decode(body, len, take_path_notice, pn);
}

static int
take_loss_report(const struct tlv_field *f, void *arg)
{
	struct proto_loss_report *lr = arg;

	if (f->id == LOSS_REPORT_SENT)
		return tlv_field_varint(f, &lr->sent);
	if (f->id == LOSS_REPORT_LOST)
		return tlv_field_varint(f, &lr->lost);
	return 0;
}

int
proto_decode_loss_report(const uint8_t *body, size_t len,
    struct proto_loss_report *lr)
{
	memset(lr, 0, sizeof *lr);
	if (tlv_decode(body, len, take_loss_report, lr) != 0 ||
	    lr->lost > lr->sent)
		return -1;
	return 0;
}

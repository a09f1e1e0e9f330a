/* SOCKS5 (RFC 1928) server-side greeting/request parsing and replies. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "proto-fwd.h"
#include "socks5.h"

long
socks5_parse_greeting(const uint8_t *in, size_t len, bool *no_auth)
{
	size_t n;

	if (len < 1)
		return 0;
	if (in[0] != SOCKS5_VERSION)
		return -1;
	if (len < 2)
		return 0;
	if (in[1] == 0)
		return -1;
	n = 2 + (size_t)in[1];
	if (len < n)
		return 0;
	*no_auth = memchr(in + 2, SOCKS5_METHOD_NO_AUTH, in[1]) != NULL;
	return (long)n;
}

size_t
socks5_method_reply(uint8_t out[static 2], bool accept)
{
	out[0] = SOCKS5_VERSION;
	out[1] = accept ? SOCKS5_METHOD_NO_AUTH : SOCKS5_METHOD_NONE;
	return 2;
}

/* Where the address of a request or a UDP header (ATYP at in[3]) lies:
 * *off and *alen. 1, or 0 while `len` does not yet show a domain's
 * length, SOCKS5_MALFORMED for an empty domain, SOCKS5_ATYP_UNSUPPORTED
 * for another ATYP. */
static long
addr_span(const uint8_t *in, size_t len, size_t *off, size_t *alen)
{
	switch (in[3]) {
	case SOCKS5_ATYP_IPV4:
		*off = 4;
		*alen = 4;
		return 1;
	case SOCKS5_ATYP_IPV6:
		*off = 4;
		*alen = 16;
		return 1;
	case SOCKS5_ATYP_DOMAIN:
		if (len < 5)
			return 0;
		if (in[4] == 0)
			return SOCKS5_MALFORMED;
		*off = 5;
		*alen = in[4];
		return 1;
	default:
		return SOCKS5_ATYP_UNSUPPORTED;
	}
}

/* The address `a` of type `atyp` as text: an IP address, or the domain
 * as sent (checked by the caller). `host` must hold 256 bytes. */
static void
addr_text(uint8_t atyp, const uint8_t *a, size_t alen, char host[static 256])
{
	memset(host, 0, 256);
	if (atyp == SOCKS5_ATYP_IPV4)
		(void)inet_ntop(AF_INET, a, host, 256);
	else if (atyp == SOCKS5_ATYP_IPV6)
		(void)inet_ntop(AF_INET6, a, host, 256);
	else
		memcpy(host, a, alen);
}

/* As with the forward header, each check runs on the bytes present so far:
 * a client sending garbage is answered at once, and any prefix of a valid
 * request only asks for more. */
long
socks5_parse_request(const uint8_t *in, size_t len, struct socks5_request *req)
{
	char host[sizeof req->host];
	size_t alen, off, avail;
	uint16_t port;
	long r;

	if (len < 1)
		return 0;
	if (in[0] != SOCKS5_VERSION)
		return SOCKS5_MALFORMED;
	if (len < 3)
		return 0;
	if (in[2] != 0)
		return SOCKS5_MALFORMED;
	if (len < 4)
		return 0;
	if ((r = addr_span(in, len, &off, &alen)) <= 0)
		return r;
	/* A domain is checked on the bytes that came so far. */
	avail = len - off < alen ? len - off : alen;
	if (in[3] == SOCKS5_ATYP_DOMAIN && avail > 0 &&
	    !proto_fwd_host_valid((const char *)in + off, avail))
		return SOCKS5_MALFORMED;
	if (len - off < alen + 2)
		return 0;
	port = (uint16_t)(in[off + alen] << 8 | in[off + alen + 1]);
	if (port == 0 && in[1] != SOCKS5_CMD_UDP_ASSOCIATE)
		return SOCKS5_MALFORMED;
	addr_text(in[3], in + off, alen, host);
	memset(req, 0, sizeof *req);
	req->cmd = in[1];
	memcpy(req->host, host, sizeof req->host);
	req->port = port;
	if (req->cmd != SOCKS5_CMD_CONNECT &&
	    req->cmd != SOCKS5_CMD_UDP_ASSOCIATE)
		return SOCKS5_CMD_UNSUPPORTED;
	return (long)(off + alen + 2);
}

uint8_t
socks5_rep_from_parse_error(long r)
{
	switch (r) {
	case SOCKS5_ATYP_UNSUPPORTED:
		return SOCKS5_REP_ATYP_NOT_SUPPORTED;
	case SOCKS5_CMD_UNSUPPORTED:
		return SOCKS5_REP_CMD_NOT_SUPPORTED;
	default:
		return SOCKS5_REP_GENERAL_FAILURE;
	}
}

size_t
socks5_reply(uint8_t *out, size_t outlen, uint8_t rep,
    const struct sockaddr *bound)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	const void *addr;
	size_t alen;
	uint16_t port; /* network byte order, as in the sockaddr */
	uint8_t atyp;

	/* Copied out rather than cast: `bound` need not be aligned for the
	 * larger structs. */
	if (bound != NULL && bound->sa_family == AF_INET6) {
		memcpy(&sin6, bound, sizeof sin6);
		atyp = SOCKS5_ATYP_IPV6;
		addr = &sin6.sin6_addr;
		alen = 16;
		port = sin6.sin6_port;
	} else {
		memset(&sin, 0, sizeof sin);
		if (bound != NULL && bound->sa_family == AF_INET)
			memcpy(&sin, bound, sizeof sin);
		atyp = SOCKS5_ATYP_IPV4;
		addr = &sin.sin_addr;
		alen = 4;
		port = sin.sin_port;
	}
	if (outlen < 4 + alen + 2)
		return 0;
	out[0] = SOCKS5_VERSION;
	out[1] = rep;
	out[2] = 0;
	out[3] = atyp;
	memcpy(out + 4, addr, alen);
	memcpy(out + 4 + alen, &port, 2);
	return 4 + alen + 2;
}

uint8_t
socks5_rep_from_fwd_error(uint64_t code)
{
	switch (code) {
	case PROTO_FWD_OK:
		return SOCKS5_REP_SUCCEEDED;
	case PROTO_FWD_ERR_REFUSED:
		return SOCKS5_REP_REFUSED;
	case PROTO_FWD_ERR_UNREACHABLE:
	case PROTO_FWD_ERR_NAME:
		return SOCKS5_REP_HOST_UNREACHABLE;
	case PROTO_FWD_ERR_DENIED:
		return SOCKS5_REP_NOT_ALLOWED;
	case PROTO_FWD_ERR_TIMEOUT:
		return SOCKS5_REP_TTL_EXPIRED;
	default:
		return SOCKS5_REP_GENERAL_FAILURE;
	}
}

long
socks5_udp_decode(const uint8_t *in, size_t len, struct socks5_udp_header *h)
{
	size_t alen, off;
	uint16_t port;

	if (len < 4 || in[0] != 0 || in[1] != 0 ||
	    addr_span(in, len, &off, &alen) != 1 || len - off < alen + 2)
		return SOCKS5_MALFORMED;
	if (in[3] == SOCKS5_ATYP_DOMAIN &&
	    !proto_fwd_host_valid((const char *)in + off, alen))
		return SOCKS5_MALFORMED;
	port = (uint16_t)(in[off + alen] << 8 | in[off + alen + 1]);
	if (port == 0)
		return SOCKS5_MALFORMED;
	memset(h, 0, sizeof *h);
	h->frag = in[2];
	h->atyp = in[3];
	h->port = port;
	addr_text(in[3], in + off, alen, h->host);
	return (long)(off + alen + 2);
}

size_t
socks5_udp_encode(uint8_t *out, size_t outlen,
    const struct socks5_udp_header *h)
{
	uint8_t addr[16];
	size_t alen, off, hostlen = strnlen(h->host, sizeof h->host);

	if (h->port == 0 || hostlen == sizeof h->host)
		return 0;
	switch (h->atyp) {
	case SOCKS5_ATYP_IPV4:
		if (inet_pton(AF_INET, h->host, addr) != 1)
			return 0;
		alen = 4;
		off = 4;
		break;
	case SOCKS5_ATYP_IPV6:
		if (inet_pton(AF_INET6, h->host, addr) != 1)
			return 0;
		alen = 16;
		off = 4;
		break;
	case SOCKS5_ATYP_DOMAIN:
		if (!proto_fwd_host_valid(h->host, hostlen))
			return 0;
		alen = hostlen;
		off = 5;
		break;
	default:
		return 0;
	}
	if (outlen < off + alen + 2)
		return 0;
	out[0] = 0;
	out[1] = 0;
	out[2] = h->frag;
	out[3] = h->atyp;
	if (h->atyp == SOCKS5_ATYP_DOMAIN) {
		out[4] = (uint8_t)alen;
		memcpy(out + off, h->host, alen);
	} else {
		memcpy(out + off, addr, alen);
	}
	out[off + alen] = (uint8_t)(h->port >> 8);
	out[off + alen + 1] = (uint8_t)h->port;
	return off + alen + 2;
}

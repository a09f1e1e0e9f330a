/* Addresses, prefixes and endpoints: strict parsing, formatting, matching. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"

/* Address length in bytes and bits for a family, 0 if unknown. */
static size_t
family_bytes(int family)
{
	if (family == AF_INET)
		return 4;
	if (family == AF_INET6)
		return 16;
	return 0;
}

int
addr_parse_ip(const char *s, struct ipaddr *a)
{
	memset(a, 0, sizeof *a);
	/*
	 * inet_pton is strict enough: no whitespace, no shorthand IPv4 forms
	 * ("10.1"), no leading zeros, no scope suffix.
	 */
	if (inet_pton(AF_INET, s, a->b) == 1) {
		a->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, a->b) == 1) {
		a->family = AF_INET6;
		return 0;
	}
	memset(a, 0, sizeof *a);
	return -1;
}

/* Parse 1..3 decimal digits up to `max`; -1 otherwise. */
static int
parse_small(const char *s, unsigned max)
{
	unsigned v = 0;
	size_t n;

	for (n = 0; s[n] != '\0'; n++) {
		if (s[n] < '0' || s[n] > '9' || n == 3)
			return -1;
		v = v * 10 + (unsigned)(s[n] - '0');
	}
	if (n == 0 || v > max)
		return -1;
	return (int)v;
}

/* True if any bit of `a` past the first `len` bits is set. */
static bool
has_host_bits(const struct ipaddr *a, unsigned len)
{
	size_t nbytes = family_bytes(a->family);

	for (size_t i = 0; i < nbytes; i++) {
		unsigned first = (unsigned)i * 8;
		uint8_t mask;

		if (first + 8 <= len)
			continue;
		mask = first >= len ? 0xff : (uint8_t)(0xff >> (len - first));
		if (a->b[i] & mask)
			return true;
	}
	return false;
}

int
addr_parse_prefix(const char *s, struct prefix *p, bool allow_host_bits)
{
	char ip[INET6_ADDRSTRLEN];
	const char *slash;
	size_t iplen;
	unsigned max;
	int len;

	memset(p, 0, sizeof *p);
	if ((slash = strchr(s, '/')) == NULL)
		iplen = strlen(s);
	else
		iplen = (size_t)(slash - s);
	if (iplen == 0 || iplen >= sizeof ip)
		return -1;
	memcpy(ip, s, iplen);
	ip[iplen] = '\0';
	if (addr_parse_ip(ip, &p->addr) != 0)
		return -1;
	max = (unsigned)family_bytes(p->addr.family) * 8;
	if (slash == NULL)
		len = (int)max;
	else if ((len = parse_small(slash + 1, max)) < 0)
		goto fail;
	if (!allow_host_bits && has_host_bits(&p->addr, (unsigned)len))
		goto fail;
	p->len = (uint8_t)len;
	return 0;
fail:
	memset(p, 0, sizeof *p);
	return -1;
}

/* A host name or IPv4 literal: letters, digits, '.', '-', '_'. */
static bool
valid_plain_host(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
			return false;
	}
	return true;
}

int
addr_parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t n;

	for (n = 0; s[n] != '\0'; n++) {
		if (s[n] < '0' || s[n] > '9' || n == 5)
			return -1;
		v = v * 10 + (unsigned long)(s[n] - '0');
	}
	if (n == 0 || v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int
addr_split_hostport(const char *s, char *host, size_t hostlen, uint16_t *port,
    int default_port)
{
	const char *h, *rest, *close, *colon;
	size_t len;

	if (hostlen > 0)
		host[0] = '\0';
	if (s[0] == '[') {
		/* Brackets are only for IPv6 literals. */
		struct ipaddr a;
		char tmp[INET6_ADDRSTRLEN];

		if ((close = strchr(s, ']')) == NULL)
			return -1;
		h = s + 1;
		len = (size_t)(close - h);
		if (len == 0 || len >= sizeof tmp)
			return -1;
		memcpy(tmp, h, len);
		tmp[len] = '\0';
		if (addr_parse_ip(tmp, &a) != 0 || a.family != AF_INET6)
			return -1;
		rest = close + 1;
		if (*rest != '\0' && *rest != ':')
			return -1;
	} else {
		/* More than one colon is an unbracketed IPv6 literal: refuse
		 * it, since "::1:4433" would be ambiguous. */
		h = s;
		colon = strchr(s, ':');
		if (colon != NULL && strchr(colon + 1, ':') != NULL)
			return -1;
		len = colon != NULL ? (size_t)(colon - s) : strlen(s);
		if (!valid_plain_host(h, len))
			return -1;
		rest = s + len;
	}
	if (*rest == ':') {
		if (addr_parse_port(rest + 1, port) != 0)
			return -1;
	} else {
		if (default_port <= 0 || default_port > 65535)
			return -1;
		*port = (uint16_t)default_port;
	}
	if (len >= hostlen)
		return -1;
	memcpy(host, h, len);
	host[len] = '\0';
	return 0;
}

int
addr_parse_sockaddr(const char *s, struct sockaddr_storage *ss,
    socklen_t *sslen)
{
	char host[INET6_ADDRSTRLEN];
	struct ipaddr a;
	uint16_t port;

	if (addr_split_hostport(s, host, sizeof host, &port, 0) != 0)
		return -1;
	if (addr_parse_ip(host, &a) != 0)
		return -1;
	/* "[v4]:port" passes the split only for IPv6, so a bare v4 is all
	 * that can arrive here without brackets. */
	addr_to_sockaddr(&a, port, ss, sslen);
	return 0;
}

bool
addr_prefix_contains(const struct prefix *p, const struct ipaddr *a)
{
	size_t nbytes = family_bytes(p->addr.family);
	unsigned full, rem;

	if (nbytes == 0 || a->family != p->addr.family || p->len > nbytes * 8)
		return false;
	full = p->len / 8;
	rem = p->len % 8;
	if (memcmp(p->addr.b, a->b, full) != 0)
		return false;
	if (rem != 0) {
		uint8_t mask = (uint8_t)(0xff << (8 - rem));
		if ((p->addr.b[full] & mask) != (a->b[full] & mask))
			return false;
	}
	return true;
}

void
addr_prefix_mask(struct prefix *p)
{
	size_t nbytes = family_bytes(p->addr.family);

	for (size_t i = 0; i < sizeof p->addr.b; i++) {
		unsigned first = (unsigned)i * 8;

		if (i >= nbytes || first >= p->len)
			p->addr.b[i] = 0;
		else if (first + 8 > p->len)
			p->addr.b[i] &= (uint8_t)(0xff << (first + 8 - p->len));
	}
}

bool
addr_is_multicast(const struct ipaddr *a)
{
	if (a->family == AF_INET)
		return (a->b[0] & 0xf0) == 0xe0 || (a->b[0] == 255 &&
		    a->b[1] == 255 && a->b[2] == 255 && a->b[3] == 255);
	return a->b[0] == 0xff;
}

bool
addr_equal(const struct ipaddr *a, const struct ipaddr *b)
{
	size_t nbytes = family_bytes(a->family);

	return a->family == b->family && memcmp(a->b, b->b, nbytes) == 0;
}

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* True if `a` is IPv6 and its first 96 bits are those of `head`. */
static bool
v6_head_is(const struct ipaddr *a, const uint8_t head[static 12])
{
	return a->family == AF_INET6 && memcmp(a->b, head, 12) == 0;
}

/* ::ffff:a.b.c.d -> a.b.c.d */
static void
unmap(struct ipaddr *a)
{
	memmove(a->b, a->b + 12, 4);
	memset(a->b + 4, 0, sizeof a->b - 4);
	a->family = AF_INET;
}

const char *
addr_target_normalise(struct ipaddr *a)
{
	static const uint8_t zero[16];

	if (v6_head_is(a, v4mapped))
		unmap(a);
	if (a->family == AF_INET) {
		if (a->b[0] == 0)
			return "unspecified";
		if ((a->b[0] & 0xf0) == 0xe0)
			return "multicast";
		if (memcmp(a->b, "\xff\xff\xff\xff", 4) == 0)
			return "broadcast";
		return NULL;
	}
	if (a->family != AF_INET6)
		return "not IP";
	if (a->b[0] == 0xff)
		return "multicast";
	if (memcmp(a->b, zero, 12) == 0) {
		/* ::/96 holds ::, ::1 and the IPv4-compatible rest. */
		if (memcmp(a->b + 12, zero, 4) == 0)
			return "unspecified";
		if (memcmp(a->b + 12, "\0\0\0\1", 4) != 0)
			return "IPv4-compatible";
	}
	return NULL;
}

void
addr_prefix_normalise(struct prefix *p)
{
	if (p->len >= 96 && v6_head_is(&p->addr, v4mapped)) {
		unmap(&p->addr);
		p->len -= 96;
	}
}

const char *
addr_ip_str(const struct ipaddr *a, char buf[static ADDR_STRLEN])
{
	if (family_bytes(a->family) == 0 ||
	    inet_ntop(a->family, a->b, buf, ADDR_STRLEN) == NULL)
		snprintf(buf, ADDR_STRLEN, "(family %d)", a->family);
	return buf;
}

/* Copy a formatted string into a caller buffer of ADDR_STRLEN, cutting it
 * if needed (only a scoped, IPv4-embedded IPv6 endpoint can be that long). */
static const char *
copy_out(char buf[static ADDR_STRLEN], const char *s)
{
	size_t len = strlen(s);

	if (len >= ADDR_STRLEN)
		len = ADDR_STRLEN - 1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return buf;
}

const char *
addr_prefix_str(const struct prefix *p, char buf[static ADDR_STRLEN])
{
	char ip[ADDR_STRLEN], tmp[ADDR_STRLEN + 16];

	snprintf(tmp, sizeof tmp, "%s/%u", addr_ip_str(&p->addr, ip),
	    (unsigned)p->len);
	return copy_out(buf, tmp);
}

const char *
addr_sockaddr_str(const struct sockaddr *sa, char buf[static ADDR_STRLEN])
{
	struct ipaddr a;
	char ip[ADDR_STRLEN], tmp[ADDR_STRLEN + 32];
	uint16_t port;

	if (addr_from_sockaddr(sa, &a, &port) != 0) {
		snprintf(tmp, sizeof tmp, "(family %d)", (int)sa->sa_family);
		return copy_out(buf, tmp);
	}
	addr_ip_str(&a, ip);
	if (a.family == AF_INET) {
		snprintf(tmp, sizeof tmp, "%s:%u", ip, (unsigned)port);
	} else {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		if (sin6->sin6_scope_id != 0)
			snprintf(tmp, sizeof tmp, "[%s%%%u]:%u", ip,
			    (unsigned)sin6->sin6_scope_id, (unsigned)port);
		else
			snprintf(tmp, sizeof tmp, "[%s]:%u", ip,
			    (unsigned)port);
	}
	return copy_out(buf, tmp);
}

const char *
addr_hostport_str(char *buf, size_t len, const char *host, uint16_t port)
{
	bool v6 = strchr(host, ':') != NULL;

	snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
	    (unsigned)port);
	return buf;
}

void
addr_to_sockaddr(const struct ipaddr *a, uint16_t port,
    struct sockaddr_storage *ss, socklen_t *sslen)
{
	memset(ss, 0, sizeof *ss);
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (void *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, a->b, 4);
		*sslen = sizeof *sin;
	} else if (a->family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (void *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, a->b, 16);
		*sslen = sizeof *sin6;
	} else {
		*sslen = 0;
	}
}

int
addr_from_sockaddr(const struct sockaddr *sa, struct ipaddr *a, uint16_t *port)
{
	memset(a, 0, sizeof *a);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)sa;

		a->family = AF_INET;
		memcpy(a->b, &sin->sin_addr, 4);
		if (port != NULL)
			*port = ntohs(sin->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		/* IPv4-mapped addresses stay IPv6: the caller decides. */
		a->family = AF_INET6;
		memcpy(a->b, &sin6->sin6_addr, 16);
		if (port != NULL)
			*port = ntohs(sin6->sin6_port);
		return 0;
	}
	return -1;
}

/* Shared by config names (AllowForward, forward targets, DNSSearch) and
 * the search domains a client takes from its server. */
bool
addr_dns_name_valid(const char *s)
{
	size_t len = strlen(s), label = 0;
	bool digits = true;

	if (len == 0 || len > ADDR_DNS_NAME_MAX)
		return false;
	for (size_t i = 0; i <= len; i++) {
		char c = s[i];

		if (c == '.' || c == '\0') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			if (c == '\0')
				break;
			label = 0;
			digits = true;
			continue;
		}
		if (c == '-' && label == 0)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
		if (c < '0' || c > '9')
			digits = false;
		if (++label > 63)
			return false;
	}
	return !digits;
}

/* Configuration values: one parser per value type of the key table
 * (cfg-table.h), each checking the text of one "Key = value" line and
 * storing it in struct cfg or struct cfg_peer. Cross-field checks wait for
 * finish (cfg-check.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "base/account.h"
#include "base/key.h"
#include "base/xmalloc.h"
#include "cfg-int.h"

#define PEER_NAME_MAX 32

/* The next comma-separated item of *rest, trimmed; NULL after the last. */
static char *
next_item(char **rest)
{
	char *s = *rest, *comma;

	if (s == NULL)
		return NULL;
	if ((comma = strchr(s, ',')) != NULL) {
		*comma = '\0';
		*rest = comma + 1;
	} else
		*rest = NULL;
	return trim(s);
}

/* A connect target: an IP address (IPv6 already unbracketed) or DNS name. */
static bool
valid_host(const char *s)
{
	struct ipaddr a;

	return addr_parse_ip(s, &a) == 0 || addr_dns_name_valid(s);
}

/* Each parser below reports its own error and returns 0 or -1. */

static int
parse_path(struct cfg_parse *cp, const struct cfg_key *k, char **dst,
    const char *v)
{
	char *path = cfg_resolve(cp->dir, v);
	char e[ESC_LEN];

	if ((k->flags & CFG_F_SOCKET) &&
	    strlen(path) >= sizeof ((struct sockaddr_un){ 0 }).sun_path) {
		parse_error(cp, "%s: %s is longer than %zu bytes, too long "
		    "for a unix socket", k->name, quote(e, path),
		    sizeof ((struct sockaddr_un){ 0 }).sun_path - 1);
		free(path);
		return -1;
	}
	free(*dst);
	*dst = path;
	return 0;
}

static int
parse_tun(struct cfg_parse *cp, const struct cfg_key *k, char **dst,
    const char *v)
{
	size_t len = strlen(v);
	char e[ESC_LEN];
	int pct = 0;

	if (strcasecmp(v, "none") == 0) {
		free(*dst);
		*dst = NULL;
		return 0;
	}
	if (len > 15) {
		parse_error(cp, "%s: '%s' is longer than 15 characters",
		    k->name, quote(e, v));
		return -1;
	}
	/* What the kernel takes as a name, plus one "%d" for it to number. */
	for (size_t i = 0; i < len; i++) {
		char c = v[i];

		if (c == '%' && v[i + 1] == 'd' && pct++ == 0) {
			i++;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
			goto bad;
	}
	if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0)
		goto bad;
	free(*dst);
	*dst = xstrdup(v);
	return 0;
bad:
	parse_error(cp, "%s: '%s' is not a valid interface name", k->name,
	    quote(e, v));
	return -1;
}

static int
parse_number(struct cfg_parse *cp, const struct cfg_key *k, uint32_t *dst,
    const char *v)
{
	const char *s = v;
	unsigned long long n = 0;
	bool neg = false, huge = false;
	char e[ESC_LEN];

	if (*s == '-') {
		neg = true;
		s++;
	}
	if (*s == '\0')
		goto nan;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			goto nan;
		/* Keep scanning: "99999999999x" is not a number at all. */
		if (n > 0xffffffffULL)
			huge = true;
		else
			n = n * 10 + (unsigned long long)(*s - '0');
	}
	if ((neg && n != 0) || huge || n < k->min || n > k->max) {
		parse_error(cp, "%s: %s is out of range (%u..%u)", k->name, v,
		    (unsigned)k->min, (unsigned)k->max);
		return -1;
	}
	*dst = (uint32_t)n;
	return 0;
nan:
	parse_error(cp, "%s: '%s' is not a number", k->name, quote(e, v));
	return -1;
}

static int
parse_key_exchange(struct cfg_parse *cp, const struct cfg_key *k,
    enum cfg_key_exchange *dst, const char *v)
{
	char e[ESC_LEN];

	if (strcasecmp(v, "hybrid") == 0)
		*dst = CFG_KEX_HYBRID;
	else if (strcasecmp(v, "classic") == 0)
		*dst = CFG_KEX_CLASSIC;
	else if (strcasecmp(v, "pq-required") == 0)
		*dst = CFG_KEX_PQ_REQUIRED;
	else {
		parse_error(cp, "%s: '%s' is not hybrid, classic or pq-required",
		    k->name, quote(e, v));
		return -1;
	}
	return 0;
}

static int
parse_congestion(struct cfg_parse *cp, const struct cfg_key *k,
    enum cfg_congestion *dst, const char *v)
{
	char e[ESC_LEN];

	if (strcasecmp(v, "cubic") == 0)
		*dst = CFG_CC_CUBIC;
	else if (strcasecmp(v, "bbr") == 0)
		*dst = CFG_CC_BBR;
	else {
		parse_error(cp, "%s: '%s' is not cubic or bbr", k->name,
		    quote(e, v));
		return -1;
	}
	return 0;
}

static int
parse_auto_off(struct cfg_parse *cp, const struct cfg_key *k,
    enum cfg_auto_off *dst, const char *v)
{
	char e[ESC_LEN];

	if (strcasecmp(v, "auto") == 0)
		*dst = CFG_AUTO;
	else if (strcasecmp(v, "off") == 0)
		*dst = CFG_OFF;
	else {
		parse_error(cp, "%s: '%s' is not auto or off", k->name,
		    quote(e, v));
		return -1;
	}
	return 0;
}

static int
parse_bool(struct cfg_parse *cp, const struct cfg_key *k, bool *dst, const char *v)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	char e[ESC_LEN];

	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*dst = true;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*dst = false;
			return 0;
		}
	}
	parse_error(cp, "%s: '%s' is not yes or no", k->name, quote(e, v));
	return -1;
}

static int
parse_transport(struct cfg_parse *cp, const struct cfg_key *k,
    enum cfg_transport *dst, const char *v)
{
	char e[ESC_LEN];

	if (strcasecmp(v, "auto") == 0)
		*dst = CFG_TRANSPORT_AUTO;
	else if (strcasecmp(v, "quic") == 0)
		*dst = CFG_TRANSPORT_QUIC;
	else if (strcasecmp(v, "tcp") == 0)
		*dst = CFG_TRANSPORT_TCP;
	else {
		parse_error(cp, "%s: '%s' is not auto, quic or tcp", k->name,
		    quote(e, v));
		return -1;
	}
	return 0;
}

/* The value holds a password perhaps: a message never quotes it. */
static int
parse_proxy(struct cfg_parse *cp, const struct cfg_key *k,
    struct proxy_url *dst, const char *v)
{
	const char *why = NULL;

	if (proxy_url_parse(v, dst, &why) != 0) {
		explicit_bzero(dst, sizeof *dst);
		parse_error(cp, "%s: not http://[user:password@]host[:port], "
		    "socks5://[user:password@]host[:port], none or env: %s",
		    k->name, why);
		return -1;
	}
	return 0;
}

struct listen_set
cfg_value_listen_set(const struct cfg_key *k, struct cfg *cfg)
{
	if (k == &cfg_table[CFG_KEY_LISTEN_TCP])
		return (struct listen_set){ cfg->listen_tcp, cfg->listen_tcp_len,
		    &cfg->nlisten_tcp, cfg->listen_tcp_line };
	return (struct listen_set){ cfg->listen, cfg->listen_len, &cfg->nlisten,
	    cfg->listen_line };
}

static int
parse_listen(struct cfg_parse *cp, const struct cfg_key *k, struct cfg *cfg,
    const char *v)
{
	char host[INET6_ADDRSTRLEN], e[ESC_LEN], a1[ADDR_STRLEN];
	struct listen_set l = cfg_value_listen_set(k, cfg);
	struct sockaddr_storage ss;
	struct ipaddr a;
	socklen_t len;
	uint16_t port;

	if (*l.n == CFG_MAX_LISTEN) {
		parse_error(cp, "%s: more than %d addresses", k->name,
		    CFG_MAX_LISTEN);
		return -1;
	}
	if (addr_split_hostport(v, host, sizeof host, &port,
	    k == &cfg_table[CFG_KEY_LISTEN_TCP] ? CFG_DEFAULT_TCP_PORT :
	    CFG_DEFAULT_PORT) != 0 || addr_parse_ip(host, &a) != 0) {
		parse_error(cp, "%s: '%s' is not a numeric address[:port]",
		    k->name, quote(e, v));
		return -1;
	}
	addr_to_sockaddr(&a, port, &ss, &len);
	for (size_t i = 0; i < *l.n; i++) {
		if (l.len[i] == len && memcmp(&l.ss[i], &ss, len) == 0) {
			parse_error(cp,
			    "%s: %s is listed twice (first on line %u)",
			    k->name, addr_sockaddr_str((void *)&ss, a1),
			    l.line[i]);
			return -1;
		}
	}
	l.ss[*l.n] = ss;
	l.len[*l.n] = len;
	l.line[*l.n] = cp->line;
	(*l.n)++;
	return 0;
}

/* A numeric ADDR:PORT, the port required (there is no usual one). */
static int
parse_addrport(struct cfg_parse *cp, const struct cfg_key *k, void *obj,
    const char *v)
{
	char host[INET6_ADDRSTRLEN], e[ESC_LEN];
	struct sockaddr_storage *ss = field(obj, k->off);
	socklen_t *len = field(obj, k->off_n);
	struct ipaddr a;
	uint16_t port;

	if (addr_split_hostport(v, host, sizeof host, &port, 0) != 0 ||
	    addr_parse_ip(host, &a) != 0 || port == 0) {
		parse_error(cp, "%s: '%s' is not a numeric address:port",
		    k->name, quote(e, v));
		return -1;
	}
	addr_to_sockaddr(&a, port, ss, len);
	return 0;
}

/* Server Address: a host address with the length of the pool's subnet. */
static int
check_ifaddr(struct cfg_parse *cp, const struct cfg_key *k, const char *item,
    struct prefix *p)
{
	char e[ESC_LEN];
	unsigned lo, hi;

	if (addr_parse_prefix(item, p, true) != 0) {
		parse_error(cp, "%s: '%s' is not an address/prefix-length",
		    k->name, quote(e, item));
		return -1;
	}
	if (strchr(item, '/') == NULL) {
		parse_error(cp, "%s: %s needs a prefix length, e.g. %s/%d", k->name,
		    item, item, p->addr.family == AF_INET ? 24 : 64);
		return -1;
	}
	lo = p->addr.family == AF_INET ? 8 : 16;
	hi = p->addr.family == AF_INET ? 30 : 126;
	if (p->len < lo || p->len > hi) {
		parse_error(cp, "%s: %s: prefix length must be %u..%u for %s",
		    k->name, item, lo, hi, family_name(p->addr.family));
		return -1;
	}
	if (host_bits_all(p, false)) {
		parse_error(cp, "%s: %s is the network address, "
		    "not a host address", k->name, item);
		return -1;
	}
	if (p->addr.family == AF_INET && host_bits_all(p, true)) {
		parse_error(cp, "%s: %s is the broadcast address, "
		    "not a host address", k->name, item);
		return -1;
	}
	return 0;
}

/* Peer Address: a single host address; subnet checks wait for finish. */
static int
check_hostaddr(struct cfg_parse *cp, const struct cfg_key *k, const char *item,
    struct prefix *p)
{
	char e[ESC_LEN];

	if (addr_parse_prefix(item, p, true) != 0) {
		parse_error(cp, "%s: '%s' is not an address", k->name, quote(e, item));
		return -1;
	}
	if (p->len != (p->addr.family == AF_INET ? 32 : 128)) {
		parse_error(cp, "%s: %s is not a single address (use /%d)", k->name,
		    item, p->addr.family == AF_INET ? 32 : 128);
		return -1;
	}
	return 0;
}

/* A list of addresses, at most one per family, each passing `check`. */
static int
parse_addrs(struct cfg_parse *cp, const struct cfg_key *k, struct prefix *dst,
    size_t *dstn, char *v, int (*check)(struct cfg_parse *,
    const struct cfg_key *, const char *, struct prefix *))
{
	struct prefix tmp[CFG_MAX_ADDRS], p;
	char *item, *rest = v;
	size_t n = 0;

	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			return -1;
		}
		if (check(cp, k, item, &p) != 0)
			return -1;
		for (size_t i = 0; i < n; i++) {
			if (tmp[i].addr.family == p.addr.family) {
				parse_error(cp, "%s: more than one %s address",
				    k->name, family_name(p.addr.family));
				return -1;
			}
		}
		tmp[n++] = p;
	}
	memcpy(dst, tmp, n * sizeof *tmp);
	*dstn = n;
	return 0;
}

static int
parse_prefixes(struct cfg_parse *cp, const struct cfg_key *k,
    struct cfg_prefix_list *dst, char *v)
{
	struct cfg_prefix_list l = { NULL, 0 };
	char e[ESC_LEN], s[ADDR_STRLEN], *item, *rest = *v ? v : NULL;
	struct prefix p, m;

	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			goto fail;
		}
		if (addr_parse_prefix(item, &p, true) != 0) {
			parse_error(cp, "%s: '%s' is not an address or prefix",
			    k->name, quote(e, item));
			goto fail;
		}
		m = p;
		addr_prefix_mask(&m);
		if (!addr_equal(&m.addr, &p.addr)) {
			parse_error(cp,
			    "%s: %s has host bits set; did you mean %s?",
			    k->name, item, addr_prefix_str(&m, s));
			goto fail;
		}
		for (size_t i = 0; i < l.n; i++) {
			if (prefix_equal(&l.v[i], &p)) {
				parse_error(cp, "%s: %s is listed twice",
				    k->name, addr_prefix_str(&p, s));
				goto fail;
			}
		}
		l.v = xrealloc(l.v, (l.n + 1) * sizeof *l.v);
		l.v[l.n++] = p;
	}
	free(dst->v);
	*dst = l;
	return 0;
fail:
	free(l.v);
	return -1;
}

static int
parse_pubkey(struct cfg_parse *cp, const struct cfg_key *k, uint8_t *dst,
    const char *v)
{
	char e[ESC_LEN];

	if (key_decode(v, dst) != 0) {
		parse_error(cp, "%s: '%s' is not a base64 32-byte key", k->name,
		    quote(e, v));
		return -1;
	}
	return 0;
}

static int
parse_name(struct cfg_parse *cp, const struct cfg_key *k, char **dst,
    const char *v)
{
	size_t len = strspn(v, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
	char e[ESC_LEN];

	if (v[len] != '\0' || len > PEER_NAME_MAX) {
		parse_error(cp, "%s: '%s' is not a valid peer name (1..%d of "
		    "A-Z a-z 0-9 . _ -)", k->name, quote(e, v), PEER_NAME_MAX);
		return -1;
	}
	free(*dst);
	*dst = xstrdup(v);
	return 0;
}

/* A DNS name, kept in lower case; an address is refused (TLS sends
 * none as a server name, RFC 6066 section 3). */
static int
parse_hostname(struct cfg_parse *cp, const struct cfg_key *k, char **dst,
    char *v)
{
	char e[ESC_LEN];

	if (!addr_dns_name_valid(v)) {
		parse_error(cp, "%s: '%s' is not a DNS name", k->name,
		    quote(e, v));
		return -1;
	}
	for (char *c = v; *c != '\0'; c++) {
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	}
	free(*dst);
	*dst = xstrdup(v);
	return 0;
}

/* "first-last", two ports, the first not above the last. */
static int
parse_ports(struct cfg_parse *cp, const struct cfg_key *k, uint16_t *first,
    uint16_t *last, const char *v)
{
	unsigned long a, b;
	char *end, e[ESC_LEN];

	errno = 0;
	a = strtoul(v, &end, 10);
	if (end != v && *end == '-' && end[1] >= '0' && end[1] <= '9') {
		b = strtoul(end + 1, &end, 10);
		if (errno == 0 && *end == '\0' && v[0] >= '0' && v[0] <= '9' &&
		    a >= 1 && a <= b && b <= 65535) {
			*first = (uint16_t)a;
			*last = (uint16_t)b;
			return 0;
		}
	}
	parse_error(cp, "%s: '%s' is not first-last (ports 1-65535, the "
	    "first not above the last)", k->name, quote(e, v));
	return -1;
}

static int
parse_server_id(struct cfg_parse *cp, const struct cfg_key *k,
    struct cid_server_id *dst, const char *v)
{
	char e[ESC_LEN];

	if (cid_server_id_parse(v, dst) != 0) {
		parse_error(cp, "%s: '%s' is not 1 to %d octets in hex", k->name,
		    quote(e, v), CID_SERVER_ID_MAX);
		return -1;
	}
	return 0;
}

/* The protocol prefix of a forward or an AllowForward item: "udp/" sets
 * *udp, "tcp/" (what no prefix means) clears it; returns what follows. */
static const char *
skip_proto(const char *v, bool *udp)
{
	*udp = strncmp(v, "udp/", 4) == 0;
	if (*udp || strncmp(v, "tcp/", 4) == 0)
		return v + 4;
	return v;
}

/* One AllowForward item: "prefix:port", "[v6prefix]:port" or "name:port",
 * each with an optional "tcp/" or "udp/" in front. */
static int
parse_rule(struct cfg_parse *cp, const struct cfg_key *k,
    struct cfg_forward_rule *r, const char *item)
{
	char buf[CFG_MAX_LINE + 1], e[ESC_LEN], s[ADDR_STRLEN];
	char *target, *port, *close;
	struct prefix m;
	bool udp;

	memset(r, 0, sizeof *r);
	snprintf(buf, sizeof buf, "%s", skip_proto(item, &udp));
	r->udp = udp;
	if (buf[0] == '[') {
		if ((close = strchr(buf, ']')) == NULL || close[1] != ':')
			goto bad;
		*close = '\0';
		target = buf + 1;
		port = close + 2;
		if (addr_parse_prefix(target, &r->prefix, true) != 0 ||
		    r->prefix.addr.family != AF_INET6)
			goto bad;
	} else {
		if ((port = strrchr(buf, ':')) == NULL)
			goto bad;
		*port++ = '\0';
		target = buf;
		if (strchr(target, ':') != NULL) {
			parse_error(cp, "%s: '%s' needs brackets around the "
			    "IPv6 prefix, e.g. [fd00::/64]:22", k->name,
			    quote(e, item));
			return -1;
		}
		if (addr_parse_prefix(target, &r->prefix, true) != 0) {
			if (!addr_dns_name_valid(target))
				goto bad;
			r->is_name = true;
		}
	}
	if (!r->is_name) {
		m = r->prefix;
		addr_prefix_mask(&m);
		if (!addr_equal(&m.addr, &r->prefix.addr)) {
			parse_error(cp,
			    "%s: %s has host bits set; did you mean %s?",
			    k->name, target, addr_prefix_str(&m, s));
			return -1;
		}
	}
	if (strcmp(port, "*") == 0)
		r->port = 0;
	else if (addr_parse_port(port, &r->port) != 0) {
		parse_error(cp, "%s: '%s' is not a port (1..65535 or *)",
		    k->name, quote(e, port));
		return -1;
	}
	if (r->is_name) {
		/* Names compare case-insensitively; store them lower-case. */
		r->name = xstrdup(target);
		for (char *c = r->name; *c != '\0'; c++) {
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		}
	}
	return 0;
bad:
	parse_error(cp, "%s: '%s' is not [udp/]prefix:port, "
	    "[udp/][IPv6-prefix]:port or [udp/]name:port", k->name,
	    quote(e, item));
	return -1;
}

static int
parse_fwdrules(struct cfg_parse *cp, const struct cfg_key *k,
    struct cfg_forward_rule **dst, size_t *dstn, char *v)
{
	struct cfg_forward_rule *l = NULL, r;
	char *item, *rest = *v ? v : NULL;
	size_t n = 0;

	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			goto fail;
		}
		if (parse_rule(cp, k, &r, item) != 0)
			goto fail;
		l = xrealloc(l, (n + 1) * sizeof *l);
		l[n++] = r;
	}
	cfg_forward_rules_free(*dst, *dstn);
	*dst = l;
	*dstn = n;
	return 0;
fail:
	cfg_forward_rules_free(l, n);
	return -1;
}

/* "[bind:]port" of a forward, and an AllowRemoteForward entry: 0, -1 if
 * malformed, -2 if the bind address is neither numeric nor localhost (nor
 * "*" where `remote`). A forward's bind address is on this host, or with
 * `remote` on the server, where localhost means its loopback addresses (no
 * host, the default) and "*" all its addresses. */
static int
parse_bind(const char *s, bool remote, char **host, uint16_t *port)
{
	char h[MAX_HOST];
	struct ipaddr a;

	*host = NULL;
	if (strspn(s, "0123456789") == strlen(s))
		return addr_parse_port(s, port);
	if (strncmp(s, "*:", 2) == 0) {
		if (!remote)
			return -2;
		if (addr_parse_port(s + 2, port) != 0)
			return -1;
		*host = xstrdup("*");
		return 0;
	}
	if (addr_split_hostport(s, h, sizeof h, port, 0) != 0)
		return -1;
	/* As ssh takes it; the one name a bind address may have. */
	if (strcasecmp(h, "localhost") == 0) {
		*host = remote ? NULL : xstrdup("127.0.0.1");
		return 0;
	}
	if (addr_parse_ip(h, &a) != 0)
		return -2;
	*host = xstrdup(h);
	return 0;
}

/* AllowRemoteForward: entries written as a RemoteForward's bind part. */
static int
parse_remote_rules(struct cfg_parse *cp, const struct cfg_key *k,
    struct cfg_remote_rule **dst, size_t *dstn, char *v)
{
	char e[ESC_LEN], s[PROTO_FWD_REMOTE_STRLEN], *item, *host;
	char *rest = *v ? v : NULL;
	struct cfg_remote_rule *l = NULL, r;
	struct proto_remote_forward rf;
	struct cfg_forward f;
	size_t n = 0;
	int rc;

	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			goto fail;
		}
		memset(&f, 0, sizeof f);
		if ((rc = parse_bind(skip_proto(item, &f.udp), true, &host,
		    &f.bind_port)) != 0) {
			parse_error(cp, "%s: '%s' is not a port (1..65535), "
			    "ADDR:PORT, [IPv6-ADDR]:PORT or *:PORT", k->name,
			    quote(e, item));
			goto fail;
		}
		f.bind_host = host;
		cfg_forward_remote(&f, &rf);
		free(host);
		memset(&r, 0, sizeof r);
		r.bind = rf.bind;
		r.addr = rf.bind_addr;
		r.port = rf.port;
		r.udp = rf.udp;
		for (size_t i = 0; i < n; i++) {
			if (l[i].port == r.port && l[i].bind == r.bind &&
			    l[i].udp == r.udp &&
			    (r.bind != PROTO_RBIND_ADDR ||
			    addr_equal(&l[i].addr, &r.addr))) {
				parse_error(cp, "%s: %s is listed twice",
				    k->name, proto_fwd_remote_str(&rf, s));
				goto fail;
			}
		}
		l = xrealloc(l, (n + 1) * sizeof *l);
		l[n++] = r;
	}
	free(*dst);
	*dst = l;
	*dstn = n;
	return 0;
fail:
	free(l);
	return -1;
}

static int
parse_endpoint(struct cfg_parse *cp, const struct cfg_key *k, char **host,
    uint16_t *port, const char *v)
{
	char h[MAX_HOST], e[ESC_LEN];

	if (addr_split_hostport(v, h, sizeof h, port,
	    k == &cfg_table[CFG_KEY_SERVER_TCP] ? CFG_DEFAULT_TCP_PORT :
	    CFG_DEFAULT_PORT) != 0 || !valid_host(h)) {
		parse_error(cp, "%s: '%s' is not host[:port]", k->name,
		    quote(e, v));
		return -1;
	}
	free(*host);
	*host = xstrdup(h);
	return 0;
}

static int
parse_forward(struct cfg_parse *cp, const struct cfg_key *k,
    struct cfg_forward **dst, size_t *dstn, const char *v)
{
	struct cfg_forward f;
	char buf[CFG_MAX_LINE + 1], h[MAX_HOST], e[ESC_LEN];
	char *bind = buf, *target = NULL, *eq;
	/* A RemoteForward's bind address is the server's. */
	bool remote = k == &cfg_table[CFG_KEY_REMOTE_FORWARD];
	const char *spec = v; /* as written, for messages */
	bool udp = false;
	int rc;

	memset(&f, 0, sizeof f);
	if (k->type == CFG_T_FORWARD)
		v = skip_proto(v, &udp);
	f.udp = udp;
	snprintf(buf, sizeof buf, "%s", v);
	if (k->type == CFG_T_FORWARD) {
		if ((eq = strchr(buf, '=')) == NULL)
			goto bad;
		*eq = '\0';
		bind = trim(buf);
		target = trim(eq + 1);
	}
	if ((rc = parse_bind(bind, remote, &f.bind_host, &f.bind_port)) == -2) {
		/* The split found "name:port"; name only, for the message. */
		*strrchr(bind, ':') = '\0';
		parse_error(cp, "%s: bind address '%s' is not a numeric IP "
		    "address (or localhost%s)", k->name, quote(e, bind),
		    remote ? " or *" : "");
		return -1;
	}
	if (rc != 0)
		goto bad;
	if (target != NULL) {
		if (addr_split_hostport(target, h, sizeof h, &f.target_port,
		    0) != 0 || !valid_host(h)) {
			free(f.bind_host);
			goto bad;
		}
		f.target_host = xstrdup(h);
	}
	f.line = cp->line;
	*dst = xrealloc(*dst, (*dstn + 1) * sizeof **dst);
	(*dst)[(*dstn)++] = f;
	return 0;
bad:
	if (k->type == CFG_T_FORWARD)
		parse_error(cp, "%s: '%s' is not [bind:]port = host:port",
		    k->name, quote(e, spec));
	else
		parse_error(cp, "%s: '%s' is not [bind:]port", k->name,
		    quote(e, v));
	return -1;
}

/* User: the account must exist here, so that a typo shows at -n time. */
static int
parse_user(struct cfg_parse *cp, const struct cfg_key *k, struct cfg *cfg,
    const char *v)
{
	char e[ESC_LEN];
	uid_t uid;
	gid_t gid;
	int rv;

	if ((rv = account_lookup_user(v, &uid, &gid)) != 0) {
		if (rv == -ENOENT)
			parse_error(cp, "%s: unknown user '%s'", k->name,
			    quote(e, v));
		else
			parse_error(cp, "%s: cannot look up user '%s': %s",
			    k->name, quote(e, v), strerror(-rv));
		return -1;
	}
	free(cfg->user);
	cfg->user = xstrdup(v);
	cfg->uid = uid;
	cp->user_gid = gid;
	return 0;
}

static int
parse_group(struct cfg_parse *cp, const struct cfg_key *k, struct cfg *cfg,
    const char *v)
{
	char e[ESC_LEN];
	gid_t gid;
	int rv;

	if ((rv = account_lookup_group(v, &gid)) != 0) {
		if (rv == -ENOENT)
			parse_error(cp, "%s: unknown group '%s'", k->name,
			    quote(e, v));
		else
			parse_error(cp, "%s: cannot look up group '%s': %s",
			    k->name, quote(e, v), strerror(-rv));
		return -1;
	}
	free(cfg->group);
	cfg->group = xstrdup(v);
	cfg->gid = gid;
	return 0;
}

/* DNS: addresses a resolver can be sent to, adding to those of earlier
 * lines. */
static int
parse_dnsaddrs(struct cfg_parse *cp, const struct cfg_key *k,
    struct ipaddr *dst, size_t *dstn, char *v)
{
	struct ipaddr tmp[CFG_MAX_DNS], a;
	char e[ESC_LEN], s[ADDR_STRLEN], *item, *rest = v;
	const char *why;
	size_t n = *dstn;

	memcpy(tmp, dst, n * sizeof *tmp);
	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			return -1;
		}
		if (addr_parse_ip(item, &a) != 0) {
			parse_error(cp, "%s: '%s' is not an IP address", k->name,
			    quote(e, item));
			return -1;
		}
		if ((why = addr_target_normalise(&a)) != NULL) {
			parse_error(cp, "%s: %s is %s, not a DNS server's address",
			    k->name, item, why);
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			if (addr_equal(&tmp[i], &a)) {
				parse_error(cp, "%s: %s is listed twice", k->name,
				    addr_ip_str(&a, s));
				return -1;
			}
		}
		if (n == CFG_MAX_DNS) {
			parse_error(cp, "%s: more than %d servers", k->name,
			    CFG_MAX_DNS);
			return -1;
		}
		tmp[n++] = a;
	}
	memcpy(dst, tmp, n * sizeof *tmp);
	*dstn = n;
	return 0;
}

/* DNSSearch: domain names, lower-case, adding to those of earlier lines. */
static int
parse_domains(struct cfg_parse *cp, const struct cfg_key *k, char **dst,
    size_t *dstn, char *v)
{
	char e[ESC_LEN], *item, *rest = v;
	size_t n = *dstn, first = *dstn;

	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			goto fail;
		}
		if (!addr_dns_name_valid(item)) {
			parse_error(cp, "%s: '%s' is not a domain name", k->name,
			    quote(e, item));
			goto fail;
		}
		for (char *c = item; *c != '\0'; c++) {
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		}
		for (size_t i = 0; i < n; i++) {
			if (strcmp(dst[i], item) == 0) {
				parse_error(cp, "%s: %s is listed twice", k->name,
				    item);
				goto fail;
			}
		}
		if (n == CFG_MAX_DNS_SEARCH) {
			parse_error(cp, "%s: more than %d domains", k->name,
			    CFG_MAX_DNS_SEARCH);
			goto fail;
		}
		dst[n++] = xstrdup(item);
	}
	*dstn = n;
	return 0;
fail:
	/* The line counts as a whole: none of its names stay. */
	for (size_t i = first; i < n; i++) {
		free(dst[i]);
		dst[i] = NULL;
	}
	return -1;
}

int
cfg_value_parse(struct cfg_parse *cp, const struct cfg_key *k, void *obj,
    char *v)
{
	void *f = field(obj, k->off);

	switch (k->type) {
	case CFG_T_PATH:
		return parse_path(cp, k, f, v);
	case CFG_T_TUN:
		return parse_tun(cp, k, f, v);
	case CFG_T_NUMBER:
		return parse_number(cp, k, f, v);
	case CFG_T_CONGESTION:
		return parse_congestion(cp, k, f, v);
	case CFG_T_AUTO_OFF:
		return parse_auto_off(cp, k, f, v);
	case CFG_T_TRANSPORT:
		return parse_transport(cp, k, f, v);
	case CFG_T_PROXY:
		return parse_proxy(cp, k, f, v);
	case CFG_T_KEY_EXCHANGE:
		return parse_key_exchange(cp, k, f, v);
	case CFG_T_BOOL:
		return parse_bool(cp, k, f, v);
	case CFG_T_LISTEN:
		return parse_listen(cp, k, obj, v);
	case CFG_T_ADDRPORT:
		return parse_addrport(cp, k, obj, v);
	case CFG_T_IFADDRS:
		return parse_addrs(cp, k, f, field(obj, k->off_n), v, check_ifaddr);
	case CFG_T_HOSTADDRS:
		return parse_addrs(cp, k, f, field(obj, k->off_n), v, check_hostaddr);
	case CFG_T_PREFIXES:
		return parse_prefixes(cp, k, f, v);
	case CFG_T_PUBKEY:
		return parse_pubkey(cp, k, f, v);
	case CFG_T_NAME:
		return parse_name(cp, k, f, v);
	case CFG_T_FWDRULES:
		return parse_fwdrules(cp, k, f, field(obj, k->off_n), v);
	case CFG_T_REMOTE_RULES:
		return parse_remote_rules(cp, k, f, field(obj, k->off_n), v);
	case CFG_T_ENDPOINT:
		return parse_endpoint(cp, k, f, field(obj, k->off_n), v);
	case CFG_T_FORWARD:
	case CFG_T_DYNAMIC:
		return parse_forward(cp, k, f, field(obj, k->off_n), v);
	case CFG_T_USER:
		return parse_user(cp, k, obj, v);
	case CFG_T_GROUP:
		return parse_group(cp, k, obj, v);
	case CFG_T_DNSADDRS:
		return parse_dnsaddrs(cp, k, f, field(obj, k->off_n), v);
	case CFG_T_DOMAINS:
		return parse_domains(cp, k, f, field(obj, k->off_n), v);
	case CFG_T_SERVER_ID:
		return parse_server_id(cp, k, f, v);
	case CFG_T_HOSTNAME:
		return parse_hostname(cp, k, f, v);
	case CFG_T_PORTS:
		return parse_ports(cp, k, f, field(obj, k->off_n), v);
	}
	return -1;
}

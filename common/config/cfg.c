/* Configuration parser: INI lines into struct cfg, driven by cfg-table.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/account.h"
#include "base/key.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "cfg-table.h"
#include "keyidx.h"

/* Room to escape the longest line (every byte as \xNN). */
#define ESC_LEN (CFG_MAX_LINE * 4 + 1)
#define MAX_HOST 256 /* a DNS name is at most 253 bytes */
#define PEER_NAME_MAX 32

static const struct {
	const char *name;
	unsigned sec;
} cfg_sections[] = {
	{ "Server", CFG_SEC_SERVER },
	{ "Peer", CFG_SEC_PEER },
	{ "Client", CFG_SEC_CLIENT },
};
#define NSECTIONS (sizeof cfg_sections / sizeof cfg_sections[0])

static const char *
section_name(unsigned sec)
{
	for (size_t i = 0; i < NSECTIONS; i++) {
		if (cfg_sections[i].sec == sec)
			return cfg_sections[i].name;
	}
	return "?";
}

/* The sections a file of this role may have. */
static unsigned
role_sections(enum cfg_role role)
{
	return role == CFG_ROLE_SERVER ?
	    CFG_SEC_SERVER | CFG_SEC_PEER : CFG_SEC_CLIENT;
}

static unsigned
main_section(enum cfg_role role)
{
	return role == CFG_ROLE_SERVER ? CFG_SEC_SERVER : CFG_SEC_CLIENT;
}

/* Append "PATH:LINE: message"; the line is kept to sort errors later. */
static void __attribute__((format(printf, 3, 4)))
error_at(struct cfg_parse *cp, unsigned line, const char *fmt, ...)
{
	struct cfg_errors *e = cp->errs;
	size_t i = e->n - cp->errs_start;
	char *msg;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		fatalx("out of memory");
	va_end(ap);
	e->msg = xrealloc(e->msg, (e->n + 1) * sizeof *e->msg);
	if (cp->noptions > 0 && line > cp->file_lines)
		xasprintf(&e->msg[e->n], "%s: %s",
		    cp->option_names[line - cp->file_lines - 1], msg);
	else
		xasprintf(&e->msg[e->n], "%s:%u: %s", cp->path, line, msg);
	e->n++;
	cp->err_lines = xrealloc(cp->err_lines,
	    (i + 1) * sizeof *cp->err_lines);
	cp->err_lines[i] = line;
	free(msg);
}

#define parse_error(cp, ...) error_at((cp), (cp)->line, __VA_ARGS__)

/* User text for a message: anything but printable ASCII becomes \xNN. */
static const char *
quote(char buf[static ESC_LEN], const char *s)
{
	log_escape(buf, ESC_LEN, s, strlen(s));
	return buf;
}

static bool
is_space(char c)
{
	return c == ' ' || c == '\t';
}

static char *
trim(char *s)
{
	size_t len;

	while (is_space(*s))
		s++;
	len = strlen(s);
	while (len > 0 && is_space(s[len - 1]))
		s[--len] = '\0';
	return s;
}

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

/* `rel` made absolute against `dir` (already absolute, unless getcwd
 * failed); leading "./" components are dropped. */
static char *
resolve(const char *dir, const char *rel)
{
	char *out;
	size_t len;

	if (rel[0] == '/')
		return xstrdup(rel);
	while (rel[0] == '.' && rel[1] == '/') {
		rel += 2;
		while (*rel == '/')
			rel++;
	}
	if (*rel == '\0' || strcmp(rel, ".") == 0)
		return xstrdup(dir);
	len = strlen(dir);
	if (len > 0 && dir[len - 1] == '/')
		xasprintf(&out, "%s%s", dir, rel);
	else
		xasprintf(&out, "%s/%s", dir, rel);
	return out;
}

/* The absolute directory holding the config file at `path`. */
static char *
config_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *d, *cwd, *out;

	if (slash == NULL)
		d = xstrdup(".");
	else if (slash == path)
		d = xstrdup("/");
	else
		d = xstrndup(path, (size_t)(slash - path));
	if (d[0] == '/')
		return d;
	if ((cwd = getcwd(NULL, 0)) == NULL)
		return d;
	out = resolve(cwd, d);
	free(cwd);
	free(d);
	return out;
}

/* The control socket when none is configured: a system path for root,
 * else one the user can create. */
char *
cfg_default_socket(enum cfg_role role)
{
	const char *file = role == CFG_ROLE_SERVER ? "roved.sock" : "rove.sock";
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *out;

	if (geteuid() == 0)
		xasprintf(&out, "/run/rove/%s", file);
	else if (xdg != NULL && xdg[0] == '/')
		xasprintf(&out, "%s/rove/%s", xdg, file);
	else
		xasprintf(&out, "/tmp/rove-%u/%s", (unsigned)geteuid(), file);
	return out;
}

/* Address of the field at `off` in `obj`. */
static void *
field(void *obj, size_t off)
{
	return (char *)obj + off;
}

static const void *
cfield(const void *obj, size_t off)
{
	return (const char *)obj + off;
}

/* True if every host bit of `p` (beyond its length) equals `one`. */
static bool
host_bits_all(const struct prefix *p, bool one)
{
	unsigned bits = p->addr.family == AF_INET ? 32 : 128;

	for (unsigned i = p->len; i < bits; i++) {
		bool set = (p->addr.b[i / 8] >> (7 - i % 8)) & 1;
		if (set != one)
			return false;
	}
	return true;
}

static const char *
family_name(int family)
{
	return family == AF_INET ? "IPv4" : "IPv6";
}

/* --- value parsers: each reports its own error and returns 0 or -1 --- */

static int
parse_path(struct cfg_parse *cp, const struct cfg_key *k, char **dst,
    const char *v)
{
	char *path = resolve(cp->dir, v);
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
parse_offload(struct cfg_parse *cp, const struct cfg_key *k,
    enum cfg_offload *dst, const char *v)
{
	char e[ESC_LEN];

	if (strcasecmp(v, "auto") == 0)
		*dst = CFG_OFFLOAD_AUTO;
	else if (strcasecmp(v, "off") == 0)
		*dst = CFG_OFFLOAD_OFF;
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

/* The arrays of Listen or of ListenTCP. */
struct listen_set {
	struct sockaddr_storage *ss;
	socklen_t *len;
	size_t *n;
	unsigned *line;
};

static struct listen_set
listen_set(struct cfg_parse *cp, const struct cfg_key *k, struct cfg *cfg)
{
	if (k == &cfg_table[CFG_KEY_LISTEN_TCP])
		return (struct listen_set){ cfg->listen_tcp, cfg->listen_tcp_len,
		    &cfg->nlisten_tcp, cp != NULL ? cp->listen_tcp_line : NULL };
	return (struct listen_set){ cfg->listen, cfg->listen_len, &cfg->nlisten,
	    cp != NULL ? cp->listen_line : NULL };
}

static int
parse_listen(struct cfg_parse *cp, const struct cfg_key *k, struct cfg *cfg,
    const char *v)
{
	char host[INET6_ADDRSTRLEN], e[ESC_LEN], a1[ADDR_STRLEN];
	struct listen_set l = listen_set(cp, k, cfg);
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

static bool
prefix_equal(const struct prefix *a, const struct prefix *b)
{
	return a->len == b->len && addr_equal(&a->addr, &b->addr);
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

static void
free_rules(struct cfg_forward_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].name);
	free(r);
}

/* One AllowForward item: "prefix:port", "[v6prefix]:port" or "name:port". */
static int
parse_rule(struct cfg_parse *cp, const struct cfg_key *k,
    struct cfg_forward_rule *r, const char *item)
{
	char buf[CFG_MAX_LINE + 1], e[ESC_LEN], s[ADDR_STRLEN];
	char *target, *port, *close;
	struct prefix m;

	memset(r, 0, sizeof *r);
	snprintf(buf, sizeof buf, "%s", item);
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
	parse_error(cp, "%s: '%s' is not prefix:port, [IPv6-prefix]:port or "
	    "name:port", k->name, quote(e, item));
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
	free_rules(*dst, *dstn);
	*dst = l;
	*dstn = n;
	return 0;
fail:
	free_rules(l, n);
	return -1;
}

static int
parse_ports(struct cfg_parse *cp, const struct cfg_key *k, uint16_t **dst,
    size_t *dstn, char *v)
{
	char e[ESC_LEN], *item, *rest = *v ? v : NULL;
	uint16_t *l = NULL, port;
	size_t n = 0;

	while ((item = next_item(&rest)) != NULL) {
		if (*item == '\0') {
			parse_error(cp, "%s: empty item in list", k->name);
			goto fail;
		}
		if (addr_parse_port(item, &port) != 0) {
			parse_error(cp, "%s: '%s' is not a port (1..65535)",
			    k->name, quote(e, item));
			goto fail;
		}
		for (size_t i = 0; i < n; i++) {
			if (l[i] == port) {
				parse_error(cp, "%s: port %u is listed twice",
				    k->name, (unsigned)port);
				goto fail;
			}
		}
		l = xrealloc(l, (n + 1) * sizeof *l);
		l[n++] = port;
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

/* "[bind:]port" of a forward: 0, -1 if malformed, -2 if the bind address
 * is not numeric. */
static int
parse_bind(const char *s, char **host, uint16_t *port)
{
	char h[MAX_HOST];
	struct ipaddr a;

	*host = NULL;
	if (strspn(s, "0123456789") == strlen(s))
		return addr_parse_port(s, port);
	if (addr_split_hostport(s, h, sizeof h, port, 0) != 0)
		return -1;
	if (addr_parse_ip(h, &a) != 0)
		return -2;
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
	int rc;

	memset(&f, 0, sizeof f);
	snprintf(buf, sizeof buf, "%s", v);
	if (k->type == CFG_T_FORWARD) {
		if ((eq = strchr(buf, '=')) == NULL)
			goto bad;
		*eq = '\0';
		bind = trim(buf);
		target = trim(eq + 1);
	}
	if ((rc = parse_bind(bind, &f.bind_host, &f.bind_port)) == -2) {
		/* The split found "name:port"; name only, for the message. */
		*strrchr(bind, ':') = '\0';
		parse_error(cp, "%s: bind address '%s' is not a numeric IP "
		    "address", k->name, quote(e, bind));
		return -1;
	}
	if (rc != 0)
		goto bad;
	if (f.bind_host != NULL && k == &cfg_table[CFG_KEY_REMOTE_FORWARD] &&
	    strcmp(f.bind_host, "0.0.0.0") != 0) {
		/* roved listens on all its IPv4 addresses; taking another
		 * address here and ignoring it would mislead. */
		parse_error(cp, "%s: bind address %s is not supported: roved "
		    "listens on 0.0.0.0 (all its IPv4 addresses)", k->name,
		    f.bind_host);
		free(f.bind_host);
		return -1;
	}
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
		    k->name, quote(e, v));
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

/* Parse `v` (modified in place) as key `k` into `obj`, a struct cfg or
 * struct cfg_peer. */
static int
parse_value(struct cfg_parse *cp, const struct cfg_key *k, void *obj, char *v)
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
	case CFG_T_OFFLOAD:
		return parse_offload(cp, k, f, v);
	case CFG_T_TRANSPORT:
		return parse_transport(cp, k, f, v);
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
	case CFG_T_PORTS:
		return parse_ports(cp, k, f, field(obj, k->off_n), v);
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
	}
	return -1;
}

/* --- lines --- */

void
cfg_parse_init(struct cfg_parse *cp, const char *path, enum cfg_role role,
    struct cfg *cfg, struct cfg_errors *errs)
{
	memset(cp, 0, sizeof *cp);
	memset(cfg, 0, sizeof *cfg);
	cfg->role = role;
	cfg->path = xstrdup(path);
	cp->cfg = cfg;
	cp->errs = errs;
	cp->errs_start = errs->n;
	cp->path = cfg->path;
	cp->dir = config_dir(path);
}

static void
parse_section(struct cfg_parse *cp, char *s)
{
	struct cfg *cfg = cp->cfg;
	unsigned sec = 0;
	char e[ESC_LEN], *close, *name;

	cp->skipping = true;
	if ((close = strchr(s, ']')) == NULL) {
		parse_error(cp, "missing ']' in section header");
		return;
	}
	if (close[1] != '\0')
		parse_error(cp, "unexpected text after section header");
	*close = '\0';
	name = trim(s + 1);
	for (size_t i = 0; i < NSECTIONS; i++) {
		if (strcasecmp(name, cfg_sections[i].name) == 0)
			sec = cfg_sections[i].sec;
	}
	if (sec == 0) {
		parse_error(cp, "unknown section [%s]", quote(e, name));
		return;
	}
	if (!(sec & role_sections(cfg->role))) {
		parse_error(cp, "[%s] is not valid in a %s config",
		    section_name(sec),
		    cfg->role == CFG_ROLE_SERVER ? "server" : "client");
		return;
	}
	cp->skipping = false;
	cp->section = sec;
	if (sec == CFG_SEC_PEER) {
		struct cfg_peer *p;

		/* Doubling: a server may have thousands of peers. */
		if (cfg->npeers == cp->peers_cap) {
			cp->peers_cap = cp->peers_cap > 0 ? cp->peers_cap * 2 : 4;
			cfg->peers = xrealloc(cfg->peers,
			    cp->peers_cap * sizeof *cfg->peers);
			cp->peers = xrealloc(cp->peers,
			    cp->peers_cap * sizeof *cp->peers);
		}
		p = &cfg->peers[cfg->npeers];
		memset(p, 0, sizeof *p);
		memset(&cp->peers[cfg->npeers], 0, sizeof *cp->peers);
		p->line = cp->line;
		cfg->npeers++;
		return;
	}
	if (cp->main_line != 0) {
		parse_error(cp, "duplicate [%s] section (first on line %u)",
		    section_name(sec), cp->main_line);
		return;
	}
	cp->main_line = cp->line;
}

/* Explain a key that is not valid in the open section. */
static void
misplaced_key(struct cfg_parse *cp, const char *name)
{
	unsigned mine = role_sections(cp->cfg->role);
	const struct cfg_key *k = NULL;
	char e[ESC_LEN];

	/* Prefer a home in this program's sections ("Address" has two). */
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		if (strcasecmp(cfg_table[i].name, name) != 0)
			continue;
		if (k == NULL || (cfg_table[i].sections & mine))
			k = &cfg_table[i];
	}
	if (k == NULL)
		parse_error(cp, "unknown key '%s' in [%s]", quote(e, name),
		    section_name(cp->section));
	else if (k->sections & mine)
		parse_error(cp, "%s: belongs in [%s], not [%s]", k->name,
		    section_name(k->sections & mine),
		    section_name(cp->section));
	else
		parse_error(cp, "%s: is a [%s] key, not valid in a %s config",
		    k->name, section_name(k->sections & ~mine),
		    cp->cfg->role == CFG_ROLE_SERVER ? "server" : "client");
}

static void
parse_key(struct cfg_parse *cp, const char *name, char *value)
{
	const struct cfg_key *k;
	struct cfg_seen *seen;
	char e[ESC_LEN];
	void *obj;
	size_t id;

	if (cp->skipping)
		return;
	if (cp->section == 0) {
		k = cfg_table_find(name, 0, true);
		parse_error(cp, "%s: key outside any section",
		    k != NULL ? k->name : quote(e, name));
		return;
	}
	if ((k = cfg_table_find(name, cp->section, false)) == NULL) {
		misplaced_key(cp, name);
		return;
	}
	if (cp->section == CFG_SEC_PEER) {
		obj = &cp->cfg->peers[cp->cfg->npeers - 1];
		seen = &cp->peers[cp->cfg->npeers - 1];
	} else {
		obj = cp->cfg;
		seen = &cp->main;
	}
	id = (size_t)(k - cfg_table);
	if (seen->line[id] != 0 && !(k->flags & CFG_F_REPEAT)) {
		parse_error(cp, "%s: duplicate key (first on line %u)", k->name,
		    seen->line[id]);
		return;
	}
	if (seen->line[id] == 0)
		seen->line[id] = cp->line;
	if (*value == '\0' && !(k->flags & CFG_F_EMPTY)) {
		parse_error(cp, "%s: missing value", k->name);
		seen->bad[id] = true;
		return;
	}
	if (parse_value(cp, k, obj, value) != 0)
		seen->bad[id] = true;
}

void
cfg_parse_line(struct cfg_parse *cp, const char *line, size_t len)
{
	char buf[CFG_MAX_LINE + 1], e[ESC_LEN], *s, *eq;

	cp->line++;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len > CFG_MAX_LINE) {
		parse_error(cp, "line is longer than %d characters",
		    CFG_MAX_LINE);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c == '\0') {
			parse_error(cp, "line contains a NUL byte");
			return;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			parse_error(cp,
			    "line contains control character 0x%02x", c);
			return;
		}
	}
	memcpy(buf, line, len);
	buf[len] = '\0';

	/* A comment starts at '#' or ';' at the start or after blank space,
	 * so values such as "a#b" survive. */
	for (size_t i = 0; i < len; i++) {
		if ((buf[i] == '#' || buf[i] == ';') &&
		    (i == 0 || is_space(buf[i - 1]))) {
			buf[i] = '\0';
			break;
		}
	}
	s = trim(buf);
	if (*s == '\0')
		return;
	if (*s == '[') {
		parse_section(cp, s);
		return;
	}
	if ((eq = strchr(s, '=')) == NULL) {
		parse_error(cp, "missing '=' in \"%s\"", quote(e, s));
		return;
	}
	*eq = '\0';
	s = trim(s);
	if (*s == '\0') {
		parse_error(cp, "missing key name before '='");
		return;
	}
	parse_key(cp, s, trim(eq + 1));
}

/* --- finish: defaults and cross-field checks --- */

static void
fill_defaults(struct cfg_parse *cp, unsigned sec, void *obj,
    struct cfg_seen *seen)
{
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		const struct cfg_key *k = &cfg_table[i];
		char *v;

		if (!(k->sections & sec) || seen->line[i] != 0)
			continue;
		if (k->flags & CFG_F_SOCKET) {
			char **f = field(obj, k->off);

			free(*f);
			*f = cfg_default_socket(cp->cfg->role);
		} else if (k->dflt != NULL) {
			/* The table's defaults are valid values. */
			v = xstrdup(k->dflt);
			(void)parse_value(cp, k, obj, v);
			free(v);
		}
	}
}

static void
check_required(struct cfg_parse *cp, unsigned sec, struct cfg_seen *seen,
    unsigned header)
{
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		const struct cfg_key *k = &cfg_table[i];

		if ((k->sections & sec) && (k->flags & CFG_F_REQUIRED) &&
		    seen->line[i] == 0)
			error_at(cp, header, "missing required key %s",
			    k->name);
	}
}

/* True when the value of key `id` of this section is usable. */
static bool
good(const struct cfg_seen *seen, size_t id)
{
	return !seen->bad[id];
}

static bool
tun_none(const struct cfg_parse *cp)
{
	return cp->main.line[CFG_KEY_TUN] != 0 &&
	    good(&cp->main, CFG_KEY_TUN) && cp->cfg->tun == NULL;
}

/* "peer 'laptop' on line 9", or "the peer on line 9" if it has no name. */
static const char *
peer_label(const struct cfg_peer *p, char *buf, size_t len)
{
	if (p->name != NULL)
		snprintf(buf, len, "peer '%s' on line %u", p->name, p->line);
	else
		snprintf(buf, len, "the peer on line %u", p->line);
	return buf;
}

/* A static peer address must be a usable host of the server's subnet. */
static void
check_peer_addr(struct cfg_parse *cp, const struct prefix *a, unsigned line)
{
	const struct cfg *cfg = cp->cfg;
	const struct prefix *own = NULL;
	struct prefix net;
	char s[ADDR_STRLEN], n[ADDR_STRLEN];

	if (!good(&cp->main, CFG_KEY_ADDRESS))
		return;
	for (size_t i = 0; i < cfg->naddrs; i++) {
		if (cfg->addrs[i].addr.family == a->addr.family)
			own = &cfg->addrs[i];
	}
	addr_ip_str(&a->addr, s);
	if (own == NULL) {
		error_at(cp, line,
		    "Address: %s needs an %s Address in [Server]", s,
		    family_name(a->addr.family));
		return;
	}
	net = *own;
	addr_prefix_mask(&net);
	addr_prefix_str(&net, n);
	if (!addr_prefix_contains(&net, &a->addr))
		error_at(cp, line, "Address: %s is outside the server's "
		    "subnet %s", s, n);
	else if (addr_equal(&own->addr, &a->addr))
		error_at(cp, line, "Address: %s is the server's own address",
		    s);
	else if (addr_equal(&net.addr, &a->addr))
		error_at(cp, line, "Address: %s is the network address of %s",
		    s, n);
	else if (a->addr.family == AF_INET &&
	    host_bits_all(&(struct prefix){ a->addr, net.len }, true))
		error_at(cp, line, "Address: %s is the broadcast address of %s",
		    s, n);
}

/* One prefix routed to a peer, for the uniqueness check. */
struct owned {
	size_t peer;
	size_t key;
	const struct prefix *p;
	size_t pos;   /* in the order the peers list them */
};

static int
owned_cmp(const void *va, const void *vb)
{
	const struct owned *a = va, *b = vb;
	int c;

	if (a->p->addr.family != b->p->addr.family)
		return a->p->addr.family < b->p->addr.family ? -1 : 1;
	if (a->p->len != b->p->len)
		return a->p->len < b->p->len ? -1 : 1;
	c = memcmp(a->p->addr.b, b->p->addr.b, a->p->addr.family == AF_INET ?
	    4 : 16);
	if (c != 0)
		return c;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* The uniqueness checks sort, then find each item's first equal in one
 * pass, so that a configuration of thousands of peers is checked about as
 * quickly as one of two; DUP_NONE marks an item that is the first. */
#define DUP_NONE SIZE_MAX

/* Every prefix routed to a peer (its addresses and AllowedIPs) must be
 * routed to it alone: the route table cannot hold one prefix twice. */
static void
check_unique_prefixes(struct cfg_parse *cp)
{
	const struct cfg *cfg = cp->cfg;
	struct owned *o = NULL, *sorted;
	size_t n = 0, cap = 0, *first;
	char s[ADDR_STRLEN], label[128];

	for (size_t i = 0; i < cfg->npeers; i++) {
		const struct cfg_peer *p = &cfg->peers[i];
		const struct cfg_seen *seen = &cp->peers[i];
		size_t more = (good(seen, CFG_KEY_PEER_ADDRESS) ? p->naddrs : 0) +
		    (good(seen, CFG_KEY_PEER_ALLOWED_IPS) ? p->allowed_ips.n : 0);

		if (n + more > cap) {
			cap = (n + more) * 2;
			o = xrealloc(o, cap * sizeof *o);
		}
		if (good(seen, CFG_KEY_PEER_ADDRESS)) {
			for (size_t j = 0; j < p->naddrs; j++, n++)
				o[n] = (struct owned){ i,
				    CFG_KEY_PEER_ADDRESS, &p->addrs[j], n };
		}
		if (good(seen, CFG_KEY_PEER_ALLOWED_IPS)) {
			for (size_t j = 0; j < p->allowed_ips.n; j++, n++)
				o[n] = (struct owned){ i,
				    CFG_KEY_PEER_ALLOWED_IPS,
				    &p->allowed_ips.v[j], n };
		}
	}
	if (n == 0)
		return;
	sorted = xcalloc(n, sizeof *sorted);
	memcpy(sorted, o, n * sizeof *o);
	qsort(sorted, n, sizeof *sorted, owned_cmp);
	first = xcalloc(n, sizeof *first);
	for (size_t i = 0, head = 0; i < n; i++) {
		if (i > 0 && prefix_equal(sorted[i].p, sorted[head].p))
			first[sorted[i].pos] = sorted[head].pos;
		else {
			head = i;
			first[sorted[i].pos] = DUP_NONE;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (first[i] == DUP_NONE)
			continue;
		peer_label(&cfg->peers[o[first[i]].peer], label, sizeof label);
		error_at(cp, cp->peers[o[i].peer].line[o[i].key],
		    "%s: %s is already used by %s", cfg_table[o[i].key].name,
		    addr_prefix_str(o[i].p, s), label);
	}
	free(first);
	free(sorted);
	free(o);
}

struct named {
	const char *name;
	size_t peer;
};

static int
named_cmp(const void *va, const void *vb)
{
	const struct named *a = va, *b = vb;
	int c = strcmp(a->name, b->name);

	if (c != 0)
		return c;
	return a->peer < b->peer ? -1 : a->peer > b->peer;
}

/* For each peer, the first peer before it with the same name (DUP_NONE:
 * none). */
static size_t *
first_same_name(const struct cfg *cfg)
{
	struct named *v = xcalloc(cfg->npeers + 1, sizeof *v);
	size_t *first = xcalloc(cfg->npeers + 1, sizeof *first), n = 0;

	for (size_t i = 0; i < cfg->npeers; i++) {
		first[i] = DUP_NONE;
		if (cfg->peers[i].name != NULL)
			v[n++] = (struct named){ cfg->peers[i].name, i };
	}
	qsort(v, n, sizeof *v, named_cmp);
	for (size_t i = 1, head = 0; i < n; i++) {
		if (strcmp(v[i].name, v[head].name) == 0)
			first[v[i].peer] = v[head].peer;
		else
			head = i;
	}
	free(v);
	return first;
}

static void
note_dup_key(size_t peer, size_t first, void *arg)
{
	size_t *firsts = arg;

	firsts[peer] = first;
}

/* For each peer, the first peer before it with the same public key
 * (DUP_NONE: none), among the keys that parsed. */
static size_t *
first_same_key(const struct cfg_parse *cp)
{
	const struct cfg *cfg = cp->cfg;
	size_t *first = xcalloc(cfg->npeers + 1, sizeof *first);
	struct keyidx ix;

	keyidx_init(&ix, cfg->npeers);
	for (size_t i = 0; i < cfg->npeers; i++) {
		const struct cfg_seen *seen = &cp->peers[i];

		first[i] = DUP_NONE;
		if (seen->line[CFG_KEY_PEER_PUBLIC_KEY] != 0 &&
		    good(seen, CFG_KEY_PEER_PUBLIC_KEY))
			keyidx_add(&ix, cfg->peers[i].pubkey, i);
	}
	keyidx_sort(&ix);
	keyidx_dups(&ix, note_dup_key, first);
	keyidx_clear(&ix);
	return first;
}

static void
check_peers(struct cfg_parse *cp)
{
	const struct cfg *cfg = cp->cfg;
	size_t *same_name = first_same_name(cfg), *same_key = first_same_key(cp);
	char label[128];

	for (size_t i = 0; i < cfg->npeers; i++) {
		const struct cfg_peer *p = &cfg->peers[i];
		struct cfg_seen *seen = &cp->peers[i];
		check_required(cp, CFG_SEC_PEER, seen, p->line);
		if (same_name[i] != DUP_NONE)
			error_at(cp, seen->line[CFG_KEY_PEER_NAME],
			    "Name: '%s' is already used by the peer on line %u",
			    p->name, cfg->peers[same_name[i]].line);
		if (same_key[i] != DUP_NONE) {
			peer_label(&cfg->peers[same_key[i]], label, sizeof label);
			error_at(cp, seen->line[CFG_KEY_PEER_PUBLIC_KEY],
			    "PublicKey: already used by %s", label);
		}
		if (good(seen, CFG_KEY_PEER_ADDRESS)) {
			for (size_t j = 0; j < p->naddrs; j++)
				check_peer_addr(cp, &p->addrs[j],
				    seen->line[CFG_KEY_PEER_ADDRESS]);
		}
		if (tun_none(cp) && p->allowed_ips.n > 0)
			error_at(cp, seen->line[CFG_KEY_PEER_ALLOWED_IPS],
			    "AllowedIPs: has no effect with Tun = none");
	}
	free(same_name);
	free(same_key);
	check_unique_prefixes(cp);
}

static void
check_server(struct cfg_parse *cp, unsigned eof)
{
	const struct cfg *cfg = cp->cfg;
	const struct cfg_seen *m = &cp->main;
	bool v6 = false;

	if (cp->main_line != 0) {
		check_required(cp, CFG_SEC_SERVER, &cp->main, cp->main_line);
		if (m->line[CFG_KEY_ADDRESS] == 0 && !tun_none(cp))
			error_at(cp, cp->main_line, "missing required key "
			    "Address (or set Tun = none)");
	}
	if (cfg->npeers == 0)
		error_at(cp, cp->main_line != 0 ? cp->main_line : eof,
		    "at least one [Peer] section is required");
	for (size_t i = 0; i < cfg->naddrs; i++)
		v6 |= cfg->addrs[i].addr.family == AF_INET6;
	/* IPv6 requires every link to carry 1280 bytes (RFC 8200). */
	if (v6 && good(m, CFG_KEY_MTU) && cfg->mtu < 1280)
		error_at(cp, m->line[CFG_KEY_MTU], "MTU: %u is below 1280, the "
		    "minimum with an IPv6 Address", (unsigned)cfg->mtu);
	cp->cfg->server_id.config = (uint8_t)cfg->server_id_config;
	/* Sharing keys means taking tickets the others issued: each
	 * server must tell its own from theirs (state.c). */
	if (m->line[CFG_KEY_KEY_DIR] != 0 && m->line[CFG_KEY_SERVER_ID] == 0)
		error_at(cp, m->line[CFG_KEY_KEY_DIR], "KeyDir: needs a ServerID "
		    "(each server of a group has its own)");
	check_peers(cp);
}

static const char *
bind_str(const struct cfg_forward *f, char *buf, size_t len)
{
	if (f->bind_host == NULL)
		snprintf(buf, len, "port %u", (unsigned)f->bind_port);
	else if (strchr(f->bind_host, ':') != NULL)
		snprintf(buf, len, "[%s]:%u", f->bind_host,
		    (unsigned)f->bind_port);
	else
		snprintf(buf, len, "%s:%u", f->bind_host,
		    (unsigned)f->bind_port);
	return buf;
}

/* A forward and the key it was given by. */
struct bound {
	const struct cfg_forward *f;
	const char *key;
};

/* Add the forwards of key `id` to `b`. */
static size_t
collect_forwards(const struct cfg *cfg, size_t id, struct bound *b, size_t n)
{
	const struct cfg_key *k = &cfg_table[id];
	const struct cfg_forward *f =
	    *(struct cfg_forward *const *)cfield(cfg, k->off);
	size_t nf = *(const size_t *)cfield(cfg, k->off_n);

	for (size_t i = 0; i < nf; i++)
		b[n++] = (struct bound){ &f[i], k->name };
	return n;
}

/* "on line N" of the file, or "given by -L SPEC" for an option. */
static const char *
line_str(const struct cfg_parse *cp, unsigned line, char *buf, size_t len)
{
	if (cp->noptions > 0 && line > cp->file_lines)
		snprintf(buf, len, "given by %s",
		    cp->option_names[line - cp->file_lines - 1]);
	else
		snprintf(buf, len, "on line %u", line);
	return buf;
}

/* Two forwards may not listen on one address: LocalForward and
 * DynamicForward share this host, RemoteForwards the server. Each clash
 * is reported at the later line. */
static void
check_binds(struct cfg_parse *cp, size_t ka, size_t kb)
{
	const struct cfg *cfg = cp->cfg;
	struct bound *b;
	size_t n = 0;
	char s[MAX_HOST + 16], w[CFG_MAX_LINE + 16];

	b = xcalloc(cfg->nlocal_forward + cfg->nremote_forward +
	    cfg->ndynamic_forward, sizeof *b);
	n = collect_forwards(cfg, ka, b, n);
	if (kb != ka)
		n = collect_forwards(cfg, kb, b, n);
	for (size_t i = 0; i < n; i++) {
		const struct bound *first = NULL;

		for (size_t j = 0; j < n; j++) {
			if (b[j].f->line < b[i].f->line &&
			    cfg_forward_same_bind(b[j].f, b[i].f) &&
			    (first == NULL || b[j].f->line < first->f->line))
				first = &b[j];
		}
		if (first != NULL)
			error_at(cp, b[i].f->line, "%s: %s is already used by "
			    "%s %s", b[i].key, bind_str(b[i].f, s, sizeof s),
			    first->key, line_str(cp, first->f->line, w, sizeof w));
	}
	free(b);
}

static void
check_client(struct cfg_parse *cp)
{
	const struct cfg *cfg = cp->cfg;

	if (cp->main_line != 0)
		check_required(cp, CFG_SEC_CLIENT, &cp->main, cp->main_line);
	if (tun_none(cp) && cfg->routes.n > 0)
		error_at(cp, cp->main.line[CFG_KEY_ROUTES],
		    "Routes: has no effect with Tun = none");
	check_binds(cp, CFG_KEY_LOCAL_FORWARD, CFG_KEY_DYNAMIC_FORWARD);
	check_binds(cp, CFG_KEY_REMOTE_FORWARD, CFG_KEY_REMOTE_FORWARD);
	/* TLS over TCP goes to the same host, on HTTPS's port, unless told. */
	if (cfg->server_tcp_host == NULL && cfg->server_host != NULL) {
		cp->cfg->server_tcp_host = xstrdup(cfg->server_host);
		cp->cfg->server_tcp_port = CFG_DEFAULT_TCP_PORT;
	}
	if (cfg->nremote_forward > CFG_MAX_REMOTE_FORWARDS)
		error_at(cp, cfg->remote_forward[CFG_MAX_REMOTE_FORWARDS].line,
		    "RemoteForward: more than %d", CFG_MAX_REMOTE_FORWARDS);
}

/* Group defaults to the user's primary group, and means nothing alone. */
static void
check_user(struct cfg_parse *cp)
{
	struct cfg *cfg = cp->cfg;
	const struct cfg_seen *m = &cp->main;

	cfg->user_line = m->line[CFG_KEY_USER];
	cfg->group_line = m->line[CFG_KEY_GROUP];
	if (m->line[CFG_KEY_GROUP] != 0 && m->line[CFG_KEY_USER] == 0 &&
	    good(m, CFG_KEY_GROUP))
		error_at(cp, m->line[CFG_KEY_GROUP],
		    "Group: has no effect without User");
	else if (cfg->user != NULL && m->line[CFG_KEY_GROUP] == 0)
		cfg->gid = cp->user_gid;
}

static void
check_timers(struct cfg_parse *cp)
{
	const struct cfg *cfg = cp->cfg;
	const struct cfg_seen *m = &cp->main;

	if (!good(m, CFG_KEY_KEEPALIVE) || !good(m, CFG_KEY_IDLE_TIMEOUT) ||
	    cfg->keepalive == 0 || cfg->idle_timeout > cfg->keepalive)
		return;
	if (m->line[CFG_KEY_IDLE_TIMEOUT] != 0)
		error_at(cp, m->line[CFG_KEY_IDLE_TIMEOUT], "IdleTimeout: %u "
		    "must be greater than KeepAlive (%u)",
		    (unsigned)cfg->idle_timeout, (unsigned)cfg->keepalive);
	else
		error_at(cp, m->line[CFG_KEY_KEEPALIVE], "KeepAlive: %u must "
		    "be less than IdleTimeout (%u)", (unsigned)cfg->keepalive,
		    (unsigned)cfg->idle_timeout);
}

struct sorted_error {
	unsigned line;
	size_t seq;
	char *msg;
};

static int
sorted_error_cmp(const void *va, const void *vb)
{
	const struct sorted_error *a = va, *b = vb;

	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Put this parse's errors in line order; ties keep the order found. */
static void
sort_errors(struct cfg_parse *cp)
{
	struct cfg_errors *e = cp->errs;
	size_t n = e->n - cp->errs_start;
	struct sorted_error *s;

	if (n < 2)
		return;
	s = xcalloc(n, sizeof *s);
	for (size_t i = 0; i < n; i++)
		s[i] = (struct sorted_error){ cp->err_lines[i], i,
		    e->msg[cp->errs_start + i] };
	qsort(s, n, sizeof *s, sorted_error_cmp);
	for (size_t i = 0; i < n; i++)
		e->msg[cp->errs_start + i] = s[i].msg;
	free(s);
}

int
cfg_parse_finish(struct cfg_parse *cp)
{
	struct cfg *cfg = cp->cfg;
	unsigned sec = main_section(cfg->role);
	unsigned last = cp->noptions > 0 ? cp->file_lines : cp->line;
	unsigned eof = last > 0 ? last : 1;
	int ret;

	if (cp->main_line == 0)
		error_at(cp, eof, "missing [%s] section", section_name(sec));
	fill_defaults(cp, sec, cfg, &cp->main);
	if (cfg->role == CFG_ROLE_SERVER)
		check_server(cp, eof);
	else
		check_client(cp);
	check_timers(cp);
	check_user(cp);
	sort_errors(cp);

	ret = cp->errs->n > cp->errs_start ? -1 : 0;
	free(cp->dir);
	free(cp->err_lines);
	free(cp->peers);
	for (size_t i = 0; i < cp->noptions; i++)
		free(cp->option_names[i]);
	free(cp->option_names);
	memset(cp, 0, sizeof *cp);
	return ret;
}

/* --- whole files --- */

/* Split ssh's "[bind:]port:host:hostport" at its colons, brackets kept
 * whole; the config's "[bind:]port = host:hostport" into `out`. */
static int
option_forward(const char *spec, char *out, size_t outlen)
{
	const char *f[4];
	size_t flen[4], nf = 0, depth = 0;
	const char *start = spec;

	for (const char *p = spec;; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']' && depth > 0)
			depth--;
		else if ((*p == ':' && depth == 0) || *p == '\0') {
			if (nf == 4)
				return -1;
			f[nf] = start;
			flen[nf++] = (size_t)(p - start);
			start = p + 1;
			if (*p == '\0')
				break;
		}
	}
	if (nf == 3)
		snprintf(out, outlen, "%.*s = %.*s:%.*s", (int)flen[0], f[0],
		    (int)flen[1], f[1], (int)flen[2], f[2]);
	else if (nf == 4)
		snprintf(out, outlen, "%.*s:%.*s = %.*s:%.*s", (int)flen[0], f[0],
		    (int)flen[1], f[1], (int)flen[2], f[2], (int)flen[3], f[3]);
	else
		return -1;
	return 0;
}

/* One command-line option, as a key of the main section. */
static void
parse_option(struct cfg_parse *cp, const struct cfg_option *o)
{
	char value[CFG_MAX_LINE + 1];
	const char *key;

	cp->option_names = xrealloc(cp->option_names,
	    (cp->noptions + 1) * sizeof *cp->option_names);
	xasprintf(&cp->option_names[cp->noptions++], "-%c %s", o->flag, o->spec);
	cp->line = cp->file_lines + (unsigned)cp->noptions;
	cp->section = main_section(cp->cfg->role);
	cp->skipping = false;
	if (strlen(o->spec) > CFG_MAX_LINE / 2) {
		parse_error(cp, "too long");
		return;
	}
	switch (o->flag) {
	case 'L':
	case 'R':
		key = o->flag == 'L' ? "LocalForward" : "RemoteForward";
		if (option_forward(o->spec, value, sizeof value) != 0) {
			parse_error(cp, "not [bind:]port:host:hostport");
			return;
		}
		break;
	case 'D':
		key = "DynamicForward";
		snprintf(value, sizeof value, "%s", o->spec);
		break;
	default:
		parse_error(cp, "not a forward option");
		return;
	}
	parse_key(cp, key, trim(value));
}

static int
load(const char *path, const char *buf, size_t len, enum cfg_role role,
    struct cfg *cfg, struct cfg_errors *errs, const struct cfg_option *opts,
    size_t nopts)
{
	struct cfg_parse cp;
	size_t off = 0;

	cfg_parse_init(&cp, path, role, cfg, errs);
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t n = nl != NULL ? (size_t)(nl - (buf + off)) : len - off;

		cfg_parse_line(&cp, buf + off, n);
		off += n + (nl != NULL);
	}
	cp.file_lines = cp.line;
	for (size_t i = 0; i < nopts; i++)
		parse_option(&cp, &opts[i]);
	return cfg_parse_finish(&cp);
}

int
cfg_load_buffer(const char *path, const char *buf, size_t len,
    enum cfg_role role, struct cfg *cfg, struct cfg_errors *errs)
{
	return load(path, buf, len, role, cfg, errs, NULL, 0);
}

static void
file_error(struct cfg_errors *errs, const char *path, const char *what)
{
	errs->msg = xrealloc(errs->msg, (errs->n + 1) * sizeof *errs->msg);
	xasprintf(&errs->msg[errs->n++], "%s: %s", path, what);
}

int
cfg_load(const char *path, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs)
{
	return cfg_load_options(path, role, cfg, errs, NULL, 0);
}

int
cfg_load_options(const char *path, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs, const struct cfg_option *opts, size_t nopts)
{
	struct stat st;
	char *buf = NULL, what[128];
	size_t len = 0;
	ssize_t n;
	int fd, ret = -1;

	memset(cfg, 0, sizeof *cfg);
	cfg->role = role;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		file_error(errs, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		file_error(errs, path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		file_error(errs, path, strerror(EISDIR));
		goto out;
	}
	buf = xmalloc(CFG_MAX_FILE + 1);
	/* Read one byte past the limit to tell "too large" from "exactly". */
	while (len <= CFG_MAX_FILE) {
		n = read(fd, buf + len, CFG_MAX_FILE + 1 - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			file_error(errs, path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > CFG_MAX_FILE) {
		snprintf(what, sizeof what, "file is larger than %d bytes",
		    CFG_MAX_FILE);
		file_error(errs, path, what);
		goto out;
	}
	ret = load(path, buf, len, role, cfg, errs, opts, nopts);
out:
	free(buf);
	close(fd);
	return ret;
}

/* --- cleanup --- */

static void
free_forwards(struct cfg_forward *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].bind_host);
		free(f[i].target_host);
	}
	free(f);
}

void
cfg_clear(struct cfg *cfg)
{
	if (cfg == NULL)
		return;
	free(cfg->path);
	free(cfg->private_key_file);
	free(cfg->tun);
	free(cfg->state_dir);
	free(cfg->control_socket);
	free(cfg->keylog_file);
	free(cfg->qlog_dir);
	free(cfg->key_dir);
	free(cfg->user);
	free(cfg->group);
	for (size_t i = 0; i < cfg->npeers; i++)
		cfg_peer_clear(&cfg->peers[i]);
	free(cfg->peers);
	for (size_t i = 0; i < cfg->ndns_search; i++)
		free(cfg->dns_search[i]);
	free(cfg->server_host);
	free(cfg->server_tcp_host);
	free(cfg->routes.v);
	free_forwards(cfg->local_forward, cfg->nlocal_forward);
	free_forwards(cfg->remote_forward, cfg->nremote_forward);
	free_forwards(cfg->dynamic_forward, cfg->ndynamic_forward);
	memset(cfg, 0, sizeof *cfg);
}

/* --- copies, for a program that keeps parts of a configuration past the
 * struct cfg they came from (a reload) --- */

static char *
dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

void
cfg_peer_copy(struct cfg_peer *dst, const struct cfg_peer *src)
{
	*dst = *src;
	dst->name = dup_or_null(src->name);
	dst->allowed_ips.v = NULL;
	if (src->allowed_ips.n > 0) {
		dst->allowed_ips.v = xcalloc(src->allowed_ips.n,
		    sizeof *dst->allowed_ips.v);
		memcpy(dst->allowed_ips.v, src->allowed_ips.v,
		    src->allowed_ips.n * sizeof *dst->allowed_ips.v);
	}
	dst->allow_forward = NULL;
	if (src->nallow_forward > 0) {
		dst->allow_forward = xcalloc(src->nallow_forward,
		    sizeof *dst->allow_forward);
		for (size_t i = 0; i < src->nallow_forward; i++) {
			dst->allow_forward[i] = src->allow_forward[i];
			dst->allow_forward[i].name =
			    dup_or_null(src->allow_forward[i].name);
		}
	}
	dst->allow_remote_forward = NULL;
	if (src->nallow_remote_forward > 0) {
		dst->allow_remote_forward = xcalloc(src->nallow_remote_forward,
		    sizeof *dst->allow_remote_forward);
		memcpy(dst->allow_remote_forward, src->allow_remote_forward,
		    src->nallow_remote_forward *
		    sizeof *dst->allow_remote_forward);
	}
}

void
cfg_peer_clear(struct cfg_peer *p)
{
	if (p == NULL)
		return;
	free(p->name);
	free(p->allowed_ips.v);
	free_rules(p->allow_forward, p->nallow_forward);
	free(p->allow_remote_forward);
	memset(p, 0, sizeof *p);
}

void
cfg_forward_copy(struct cfg_forward *dst, const struct cfg_forward *src)
{
	*dst = *src;
	dst->bind_host = dup_or_null(src->bind_host);
	dst->target_host = dup_or_null(src->target_host);
}

void
cfg_forward_clear(struct cfg_forward *f)
{
	if (f == NULL)
		return;
	free(f->bind_host);
	free(f->target_host);
	memset(f, 0, sizeof *f);
}

void
cfg_errors_clear(struct cfg_errors *errs)
{
	if (errs == NULL)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->msg[i]);
	free(errs->msg);
	errs->msg = NULL;
	errs->n = 0;
}

/* --- printing --- */

static void
print_prefixes(FILE *f, const char *name, const struct prefix *v, size_t n)
{
	char s[ADDR_STRLEN];

	if (n == 0)
		return;
	fprintf(f, "%s = ", name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ", " : "", addr_prefix_str(&v[i], s));
	fputc('\n', f);
}

/* "host:port", bracketing IPv6 literals. */
static void
print_hostport(FILE *f, const char *host, uint16_t port)
{
	if (strchr(host, ':') != NULL)
		fprintf(f, "[%s]:%u", host, (unsigned)port);
	else
		fprintf(f, "%s:%u", host, (unsigned)port);
}

static void
print_key(const struct cfg_key *k, const void *obj, FILE *f)
{
	const void *p = cfield(obj, k->off);
	char s[ADDR_STRLEN], b64[KEY_B64_LEN + 1];

	switch (k->type) {
	case CFG_T_PATH:
	case CFG_T_NAME:
	case CFG_T_USER:
	case CFG_T_GROUP: {
		const char *v = *(char *const *)p;

		if (v != NULL)
			fprintf(f, "%s = %s\n", k->name, v);
		break;
	}
	case CFG_T_TUN: {
		const char *v = *(char *const *)p;

		fprintf(f, "%s = %s\n", k->name, v != NULL ? v : "none");
		break;
	}
	case CFG_T_NUMBER:
		fprintf(f, "%s = %u\n", k->name,
		    (unsigned)*(const uint32_t *)p);
		break;
	case CFG_T_BOOL:
		fprintf(f, "%s = %s\n", k->name, *(const bool *)p ? "yes" : "no");
		break;
	case CFG_T_CONGESTION:
		fprintf(f, "%s = %s\n", k->name,
		    *(const enum cfg_congestion *)p == CFG_CC_BBR ?
		    "bbr" : "cubic");
		break;
	case CFG_T_OFFLOAD:
		fprintf(f, "%s = %s\n", k->name,
		    *(const enum cfg_offload *)p == CFG_OFFLOAD_OFF ? "off" : "auto");
		break;
	case CFG_T_TRANSPORT: {
		enum cfg_transport t = *(const enum cfg_transport *)p;

		fprintf(f, "%s = %s\n", k->name, t == CFG_TRANSPORT_QUIC ? "quic" :
		    t == CFG_TRANSPORT_TCP ? "tcp" : "auto");
		break;
	}
	case CFG_T_LISTEN: {
		struct listen_set l = listen_set(NULL, k,
		    (struct cfg *)(uintptr_t)obj);

		for (size_t i = 0; i < *l.n; i++) {
			const void *sa = &l.ss[i];

			fprintf(f, "%s = %s\n", k->name,
			    addr_sockaddr_str(sa, s));
		}
		break;
	}
	case CFG_T_ADDRPORT:
		if (*(const socklen_t *)cfield(obj, k->off_n) != 0)
			fprintf(f, "%s = %s\n", k->name,
			    addr_sockaddr_str(p, s));
		break;
	case CFG_T_IFADDRS:
	case CFG_T_HOSTADDRS:
		print_prefixes(f, k->name, p,
		    *(const size_t *)cfield(obj, k->off_n));
		break;
	case CFG_T_PREFIXES: {
		const struct cfg_prefix_list *l = p;

		print_prefixes(f, k->name, l->v, l->n);
		break;
	}
	case CFG_T_DNSADDRS: {
		const struct ipaddr *v = p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%s", i ? ", " : "", addr_ip_str(&v[i], s));
		fputc('\n', f);
		break;
	}
	case CFG_T_DOMAINS: {
		char *const *v = p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%s", i ? ", " : "", v[i]);
		fputc('\n', f);
		break;
	}
	case CFG_T_SERVER_ID: {
		char hex[2 * CID_SERVER_ID_MAX + 1];
		const struct cid_server_id *sid = p;

		if (sid->len > 0)
			fprintf(f, "%s = %s\n", k->name, cid_server_id_str(sid, hex));
		break;
	}
	case CFG_T_PUBKEY:
		key_encode(p, b64);
		fprintf(f, "%s = %s\n", k->name, b64);
		break;
	case CFG_T_FWDRULES: {
		const struct cfg_forward_rule *r =
		    *(struct cfg_forward_rule *const *)p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++) {
			if (i > 0)
				fputs(", ", f);
			if (r[i].is_name)
				fputs(r[i].name, f);
			else if (r[i].prefix.addr.family == AF_INET6)
				fprintf(f, "[%s]",
				    addr_prefix_str(&r[i].prefix, s));
			else
				fputs(addr_prefix_str(&r[i].prefix, s), f);
			if (r[i].port == 0)
				fputs(":*", f);
			else
				fprintf(f, ":%u", (unsigned)r[i].port);
		}
		fputc('\n', f);
		break;
	}
	case CFG_T_PORTS: {
		const uint16_t *v = *(uint16_t *const *)p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%u", i ? ", " : "", (unsigned)v[i]);
		fputc('\n', f);
		break;
	}
	case CFG_T_ENDPOINT: {
		const char *host = *(char *const *)p;

		if (host == NULL)
			break;
		fprintf(f, "%s = ", k->name);
		print_hostport(f, host,
		    *(const uint16_t *)cfield(obj, k->off_n));
		fputc('\n', f);
		break;
	}
	case CFG_T_FORWARD:
	case CFG_T_DYNAMIC: {
		const struct cfg_forward *v = *(struct cfg_forward *const *)p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		for (size_t i = 0; i < n; i++) {
			fprintf(f, "%s = ", k->name);
			if (v[i].bind_host != NULL)
				print_hostport(f, v[i].bind_host,
				    v[i].bind_port);
			else
				fprintf(f, "%u", (unsigned)v[i].bind_port);
			if (v[i].target_host != NULL) {
				fputs(" = ", f);
				print_hostport(f, v[i].target_host,
				    v[i].target_port);
			}
			fputc('\n', f);
		}
		break;
	}
	}
}

static void
print_section(const void *obj, unsigned sec, FILE *f)
{
	fprintf(f, "[%s]\n", section_name(sec));
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		if (cfg_table[i].sections & sec)
			print_key(&cfg_table[i], obj, f);
	}
}

void
cfg_print(const struct cfg *cfg, FILE *f)
{
	print_section(cfg, main_section(cfg->role), f);
	for (size_t i = 0; i < cfg->npeers; i++) {
		fputc('\n', f);
		print_section(&cfg->peers[i], CFG_SEC_PEER, f);
	}
}

char *
cfg_key_text(const void *obj, enum cfg_key_id id)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	print_key(&cfg_table[id], obj, f);
	if (fclose(f) != 0)
		fatal("open_memstream");
	return buf;
}

/* The same host (both NULL, or equal text) and port. */
static bool
same_host_port(const char *ha, uint16_t pa, const char *hb, uint16_t pb)
{
	if (pa != pb)
		return false;
	if (ha == NULL || hb == NULL)
		return ha == hb;
	return strcmp(ha, hb) == 0;
}

bool
cfg_forward_same_bind(const struct cfg_forward *a, const struct cfg_forward *b)
{
	return same_host_port(a->bind_host, a->bind_port, b->bind_host,
	    b->bind_port);
}

bool
cfg_forward_same_target(const struct cfg_forward *a, const struct cfg_forward *b)
{
	return same_host_port(a->target_host, a->target_port, b->target_host,
	    b->target_port);
}

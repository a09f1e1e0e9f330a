/* The configuration's model: section names, errors, paths relative to
 * the config file, the struct's lifetime (copy, clear) and comparisons of
 * forwards. Below everything else in config/: the line parser
 * (cfg-parse.c), the values (cfg-value.c), finish's cross-field checks
 * (cfg-check.c) and -T's printing (cfg-print.c) all build on it. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "cfg-int.h"

static const struct {
	const char *name;
	unsigned sec;
} cfg_sections[] = {
	{ "Server", CFG_SEC_SERVER },
	{ "Peer", CFG_SEC_PEER },
	{ "Client", CFG_SEC_CLIENT },
};
#define NSECTIONS (sizeof cfg_sections / sizeof cfg_sections[0])

const char *
cfg_key_exchange_name(enum cfg_key_exchange kex)
{
	switch (kex) {
	case CFG_KEX_CLASSIC:
		return "classic";
	case CFG_KEX_PQ_REQUIRED:
		return "pq-required";
	case CFG_KEX_HYBRID:
		break;
	}
	return "hybrid";
}

const char *
cfg_section_name(unsigned sec)
{
	for (size_t i = 0; i < NSECTIONS; i++) {
		if (cfg_sections[i].sec == sec)
			return cfg_sections[i].name;
	}
	return "?";
}

unsigned
cfg_section_named(const char *name)
{
	for (size_t i = 0; i < NSECTIONS; i++) {
		if (strcasecmp(name, cfg_sections[i].name) == 0)
			return cfg_sections[i].sec;
	}
	return 0;
}

unsigned
cfg_main_section(enum cfg_role role)
{
	return role == CFG_ROLE_SERVER ? CFG_SEC_SERVER : CFG_SEC_CLIENT;
}

/* Append "PATH:LINE: message"; the line is kept to sort errors later. */
void
cfg_error_at(struct cfg_parse *cp, unsigned line, const char *fmt, ...)
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

/* `rel` made absolute against `dir` (already absolute, unless getcwd
 * failed); leading "./" components are dropped. */
char *
cfg_resolve(const char *dir, const char *rel)
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

/* --- cleanup --- */

void
cfg_forward_rules_free(struct cfg_forward_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].name);
	free(r);
}

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
	free(cfg->server_name);
	explicit_bzero(&cfg->proxy, sizeof cfg->proxy);
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
	cfg_forward_rules_free(p->allow_forward, p->nallow_forward);
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
	/* A TCP and a UDP socket may share an address and port. */
	return a->udp == b->udp && same_host_port(a->bind_host, a->bind_port,
	    b->bind_host, b->bind_port);
}

bool
cfg_forward_same_target(const struct cfg_forward *a, const struct cfg_forward *b)
{
	return a->udp == b->udp && same_host_port(a->target_host,
	    a->target_port, b->target_host, b->target_port);
}

bool
cfg_addr_loopback(const struct ipaddr *a)
{
	struct prefix p = { *a, a->family == AF_INET ? 32 : 128 };
	static const uint8_t v6_loopback[16] = { [15] = 1 };

	addr_prefix_normalise(&p);
	if (p.addr.family == AF_INET)
		return p.addr.b[0] == 127;
	return p.addr.family == AF_INET6 &&
	    memcmp(p.addr.b, v6_loopback, sizeof v6_loopback) == 0;
}

/* An IPv4-mapped address is the IPv4 one: the socket it binds listens
 * there, and a rule written either way matches both. */
static struct ipaddr
plain_addr(const struct ipaddr *a)
{
	struct prefix p = { *a, a->family == AF_INET ? 32 : 128 };

	addr_prefix_normalise(&p);
	return p.addr;
}

void
cfg_forward_remote(const struct cfg_forward *f, struct proto_remote_forward *rf)
{
	struct ipaddr a;

	memset(rf, 0, sizeof *rf);
	rf->port = f->bind_port;
	rf->udp = f->udp;
	if (f->bind_host == NULL)
		rf->bind = PROTO_RBIND_DEFAULT;
	else if (strcmp(f->bind_host, "*") == 0)
		rf->bind = PROTO_RBIND_ALL;
	else if (addr_parse_ip(f->bind_host, &a) == 0) {
		rf->bind = PROTO_RBIND_ADDR;
		rf->bind_addr = plain_addr(&a);
	}
}

static bool
unspecified(const struct ipaddr *a)
{
	static const uint8_t zero[16];

	return memcmp(a->b, zero, a->family == AF_INET ? 4 : 16) == 0;
}

static bool
port_ok(uint16_t rule, uint16_t port)
{
	return rule == 0 || rule == port;
}

bool
cfg_forward_addr_allowed(const struct cfg_peer *peer, bool udp,
    const struct ipaddr *a, uint16_t port)
{
	for (size_t i = 0; i < peer->nallow_forward; i++) {
		const struct cfg_forward_rule *r = &peer->allow_forward[i];
		struct prefix p = r->prefix;

		/* Targets are matched with IPv4-mapped made IPv4; so are
		 * rules written that way. */
		addr_prefix_normalise(&p);
		if (r->udp == udp && !r->is_name && port_ok(r->port, port) &&
		    addr_prefix_contains(&p, a))
			return true;
	}
	return false;
}

bool
cfg_forward_name_allowed(const struct cfg_peer *peer, bool udp,
    const char *name, uint16_t port)
{
	for (size_t i = 0; i < peer->nallow_forward; i++) {
		const struct cfg_forward_rule *r = &peer->allow_forward[i];

		if (r->udp == udp && r->is_name && port_ok(r->port, port) &&
		    strcasecmp(r->name, name) == 0)
			return true;
	}
	return false;
}

bool
cfg_remote_allowed(const struct cfg_peer *peer,
    const struct proto_remote_forward *want)
{
	struct ipaddr w = plain_addr(&want->bind_addr);

	for (size_t i = 0; i < peer->nallow_remote_forward; i++) {
		const struct cfg_remote_rule *r = &peer->allow_remote_forward[i];
		struct ipaddr ra;

		if (r->port != want->port || r->udp != want->udp)
			continue;
		/* Loopback on a port listed, as ssh without GatewayPorts. */
		if (want->bind == PROTO_RBIND_DEFAULT ||
		    (want->bind == PROTO_RBIND_ADDR && cfg_addr_loopback(&w)))
			return true;
		if (r->bind == PROTO_RBIND_ALL)
			return true;
		if (r->bind != PROTO_RBIND_ADDR ||
		    want->bind != PROTO_RBIND_ADDR)
			continue;
		ra = plain_addr(&r->addr);
		if (addr_equal(&ra, &w) ||
		    (ra.family == w.family && unspecified(&ra)))
			return true;
	}
	return false;
}

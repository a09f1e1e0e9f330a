/* Configuration checks across fields, run by finish once every line is
 * parsed and defaults are filled in: what one value alone cannot tell
 * (cfg_check in cfg-int.h). */
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "cfg-int.h"
#include "keyidx.h"

/* "missing required key" at the section's header, for each one it lacks. */
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

/* Each peer without an Address in a family takes the next free host of
 * the server's subnet at start (daemon/peer.c): say here, with the line of
 * the first peer left without one, when the subnet is too small, so that
 * -n catches it. Hosts also routed by AllowedIPs are skipped at start
 * too; that rarer case is still found only there. */
static void
check_pool(struct cfg_parse *cp)
{
	const struct cfg *cfg = cp->cfg;
	char n[ADDR_STRLEN];

	if (!good(&cp->main, CFG_KEY_ADDRESS))
		return;
	for (size_t f = 0; f < cfg->naddrs; f++) {
		const struct prefix *own = &cfg->addrs[f];
		unsigned bits = own->addr.family == AF_INET ? 32 : 128;
		unsigned host_bits = bits - own->len;
		struct prefix net = *own;
		uint64_t room, taken = 0, need = 0;

		/* Beyond 2^32 hosts no list of peers fills the pool. */
		if (host_bits > 32)
			continue;
		addr_prefix_mask(&net);
		/* Not the network address, not the server's own, not the
		 * IPv4 broadcast address (none on a /31). */
		room = ((uint64_t)1 << host_bits) - 1;
		room -= room > 0;
		if (own->addr.family == AF_INET && own->len < 31)
			room -= room > 0;
		for (size_t i = 0; i < cfg->npeers; i++) {
			for (size_t k = 0; k < cfg->peers[i].naddrs; k++) {
				if (addr_prefix_contains(&net,
				    &cfg->peers[i].addrs[k].addr))
					taken++;
			}
		}
		room = taken < room ? room - taken : 0;
		for (size_t i = 0; i < cfg->npeers; i++) {
			const struct cfg_peer *p = &cfg->peers[i];
			bool have = false;

			for (size_t k = 0; k < p->naddrs; k++)
				have |= p->addrs[k].addr.family == own->addr.family;
			if (have || ++need <= room)
				continue;
			error_at(cp, p->line, "peer '%s' has no %s Address, and the "
			    "pool of %s (%llu free host%s) is used up by the peers "
			    "before it: give it an Address, or the server a larger "
			    "subnet", p->name != NULL ? p->name : "?",
			    family_name(own->addr.family), addr_prefix_str(&net, n),
			    (unsigned long long)room, room == 1 ? "" : "s");
			break;
		}
	}
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
	 * server must tell its own from theirs (state-ticket.c). */
	if (m->line[CFG_KEY_KEY_DIR] != 0 && m->line[CFG_KEY_SERVER_ID] == 0)
		error_at(cp, m->line[CFG_KEY_KEY_DIR], "KeyDir: needs a ServerID "
		    "(each server of a group has its own)");
	check_peers(cp);
	check_pool(cp);
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
 * DynamicForward share this host, RemoteForwards the server, where a port
 * is taken whatever the bind address (a connection to it reaches rove
 * named by its port alone; a TCP and a UDP one may share it). Each clash is reported at the later line. */
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
			    (ka == CFG_KEY_REMOTE_FORWARD ?
			    (b[j].f->bind_port == b[i].f->bind_port &&
			    b[j].f->udp == b[i].f->udp) :
			    cfg_forward_same_bind(b[j].f, b[i].f)) &&
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
	/* The other ports are for QUIC's moves, and Server's is where every
	 * connection starts. */
	if (cfg->server_ports_first != 0 && good(&cp->main, CFG_KEY_SERVER_PORTS)) {
		unsigned line = cp->main.line[CFG_KEY_SERVER_PORTS];

		if (cfg->transport == CFG_TRANSPORT_TCP)
			error_at(cp, line, "ServerPorts: has no effect with "
			    "Transport = tcp (the ports are UDP's)");
		else if (cfg->server_port < cfg->server_ports_first ||
		    cfg->server_port > cfg->server_ports_last)
			error_at(cp, line, "ServerPorts: %u-%u does not hold "
			    "Server's port %u", (unsigned)cfg->server_ports_first,
			    (unsigned)cfg->server_ports_last,
			    (unsigned)cfg->server_port);
	}
	/* Only TLS over TCP can go through a proxy. */
	if (cfg->proxy.kind != PROXY_NONE && cfg->transport == CFG_TRANSPORT_QUIC &&
	    good(&cp->main, CFG_KEY_PROXY))
		error_at(cp, cp->main.line[CFG_KEY_PROXY], "Proxy: has no effect "
		    "with Transport = quic (only TLS over TCP goes through a proxy)");
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

void
cfg_check(struct cfg_parse *cp, unsigned eof)
{
	if (cp->cfg->role == CFG_ROLE_SERVER)
		check_server(cp, eof);
	else
		check_client(cp);
	check_timers(cp);
	check_user(cp);
}

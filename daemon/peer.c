/* The configured peers (server-int.h): each one's tunnel addresses, static
 * or from the server's subnet's pool, the route table that maps them and
 * AllowedIPs to their peer, the key index the pin check searches, and,
 * with workers, the kernel's routes that follow a peer's session. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "server-int.h"
#include "tun/tun-netlink.h"

/* Connections at once: at least this many, and room for every peer twice
 * (a reconnecting peer's new connection and its old one) plus the
 * handshakes admit.c lets run. */
#define MIN_SESSIONS 4096

/* The all-ones host of an IPv4 subnet is its broadcast address. */
static bool
is_ipv4_broadcast(const struct prefix *net, const struct ipaddr *a)
{
	uint32_t v, host;

	if (a->family != AF_INET || net->len >= 31)
		return false;
	v = (uint32_t)a->b[0] << 24 | (uint32_t)a->b[1] << 16 |
	    (uint32_t)a->b[2] << 8 | a->b[3];
	host = net->len == 0 ? UINT32_MAX : (1u << (32 - net->len)) - 1;
	return (v & host) == host;
}

struct peer *
peer_create(const struct cfg_peer *cp)
{
	struct peer *p = xcalloc(1, sizeof *p);

	cfg_peer_copy(&p->conf, cp);
	p->cfg = &p->conf;
	return p;
}

void
peer_free(struct peer *p)
{
	if (p == NULL)
		return;
	if (p->parked_init)
		fwd_set_clear(&p->parked);
	cfg_peer_clear(&p->conf);
	free(p);
}

/* The server's subnet in `family`, or NULL. */
static const struct prefix *
server_subnet(const struct server *srv, int family)
{
	for (size_t f = 0; f < srv->cfg->naddrs; f++) {
		if (srv->cfg->addrs[f].addr.family == family)
			return &srv->cfg->addrs[f];
	}
	return NULL;
}

/* Route `pfx` to `owner` in `rt`, or say who has it already. */
static int
plan_route(struct route_table *rt, const struct prefix *pfx, struct peer *owner,
    const char *path, const struct cfg_peer *cp, const char *key, char **cause)
{
	char s[ADDR_STRLEN];
	struct peer *other;

	if (route_add(rt, pfx, owner) == 0)
		return 0;
	other = route_lookup(rt, &pfx->addr);
	xasprintf(cause, "%s:%u: peer %s: %s %s is already routed to peer %s%s",
	    path, cp->line, cp->name, key, addr_prefix_str(pfx, s),
	    other != NULL ? other->cfg->name : "?",
	    other != NULL && other->cfg->naddrs == 0 ?
	    " (from the address pool)" : "");
	return -1;
}

/* Static addresses are checked against the running server's subnets, not
 * those of the configuration read again: its Address changes only with a
 * restart. */
int
peer_plan_addresses(struct server *srv, struct peer **peers,
    const struct cfg_peer *const *confs, const bool *keep, size_t n,
    struct addr_plan *plan, struct route_table *rt, const char *path,
    char **cause)
{
	char s[ADDR_STRLEN], net[ADDR_STRLEN];

	/* Addresses a peer keeps first, so a clash is blamed on the new. */
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; keep[i] && k < plan[i].naddrs; k++) {
			if (plan_route(rt, &plan[i].addrs[k], peers[i], path,
			    confs[i], "Address", cause) != 0)
				return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct cfg_peer *cp = confs[i];

		if (keep[i])
			continue;
		plan[i].naddrs = 0;
		for (size_t k = 0; k < cp->naddrs; k++) {
			const struct prefix *own = server_subnet(srv,
			    cp->addrs[k].addr.family);
			struct prefix sub;

			addr_ip_str(&cp->addrs[k].addr, s);
			if (own == NULL) {
				xasprintf(cause, "%s:%u: peer %s: Address %s: the "
				    "running server has no address in that "
				    "family", path, cp->line, cp->name, s);
				return -1;
			}
			sub = *own;
			addr_prefix_mask(&sub);
			if (!addr_prefix_contains(&sub, &cp->addrs[k].addr) ||
			    addr_equal(&own->addr, &cp->addrs[k].addr)) {
				xasprintf(cause, "%s:%u: peer %s: Address %s is not "
				    "a host of the running server's subnet %s",
				    path, cp->line, cp->name, s,
				    addr_prefix_str(&sub, net));
				return -1;
			}
			plan[i].addrs[plan[i].naddrs] = cp->addrs[k];
			plan[i].subnet_len[plan[i].naddrs] = own->len;
			plan[i].naddrs++;
			if (plan_route(rt, &cp->addrs[k], peers[i], path, cp,
			    "Address", cause) != 0)
				return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < confs[i]->allowed_ips.n; k++) {
			if (plan_route(rt, &confs[i]->allowed_ips.v[k], peers[i],
			    path, confs[i], "AllowedIPs", cause) != 0)
				return -1;
		}
	}
	/* The pool: the next free host of each subnet, in the order of the
	 * configuration, for every peer without an address in that family. */
	for (size_t f = 0; f < srv->cfg->naddrs; f++) {
		const struct prefix *sub = &srv->cfg->addrs[f];
		struct prefix next = *sub;
		unsigned bits = sub->addr.family == AF_INET ? 32 : 128;

		addr_prefix_mask(&next);
		for (size_t i = 0; i < n; i++) {
			struct addr_plan *pl = &plan[i];
			bool have = false;

			for (size_t k = 0; k < pl->naddrs; k++)
				have |= pl->addrs[k].addr.family == sub->addr.family;
			if (have)
				continue;
			for (;;) {
				/* Increment the address as a big-endian integer. */
				size_t nb = bits / 8;
				int k = (int)nb - 1;
				while (k >= 0 && ++next.addr.b[k] == 0)
					k--;
				next.len = (uint8_t)bits;
				if (!addr_prefix_contains(sub, &next.addr) ||
				    is_ipv4_broadcast(sub, &next.addr)) {
					xasprintf(cause, "%s:%u: address pool of the "
					    "server's subnet is exhausted at peer %s",
					    path, confs[i]->line, confs[i]->name);
					return -1;
				}
				if (addr_equal(&next.addr, &sub->addr))
					continue;
				if (route_lookup(rt, &next.addr) != NULL)
					continue;
				break;
			}
			pl->addrs[pl->naddrs] = next;
			pl->subnet_len[pl->naddrs] = sub->len;
			pl->naddrs++;
			if (route_add(rt, &next, peers[i]) != 0) {
				xasprintf(cause, "%s: pool address conflict", path);
				return -1;
			}
		}
	}
	return 0;
}

void
peer_set_addresses(struct peer *p, const struct addr_plan *pl)
{
	memcpy(p->addrs, pl->addrs, sizeof p->addrs);
	memcpy(p->subnet_len, pl->subnet_len, sizeof p->subnet_len);
	p->naddrs = pl->naddrs;
}

/* What depends on the set of peers: the index the pin check finds a key's
 * peer in during every handshake (keys are unique, the configuration made
 * sure), and how many sessions may exist at once. */
void
peer_index(struct server *srv)
{
	keyidx_clear(&srv->keys);
	keyidx_init(&srv->keys, srv->npeers);
	for (size_t i = 0; i < srv->npeers; i++) {
		keyidx_add(&srv->keys, srv->peers[i]->cfg->pubkey, i);
		srv->peers[i]->idx = i;
	}
	keyidx_sort(&srv->keys);
	srv->max_sessions = 2 * srv->npeers + ADMIT_MAX_HALF_OPEN;
	if (srv->max_sessions < MIN_SESSIONS)
		srv->max_sessions = MIN_SESSIONS;
}

int
peer_setup(struct server *srv, char **cause)
{
	size_t n = srv->cfg->npeers;
	const struct cfg_peer **confs = xcalloc(n + 1, sizeof *confs);
	struct addr_plan *plan = xcalloc(n + 1, sizeof *plan);
	bool *keep = xcalloc(n + 1, sizeof *keep);
	int ret = -1;

	srv->peers = xcalloc(n + 1, sizeof *srv->peers);
	for (size_t i = 0; i < n; i++) {
		srv->peers[srv->npeers++] = peer_create(&srv->cfg->peers[i]);
		confs[i] = srv->peers[i]->cfg;
	}
	peer_index(srv);
	if (peer_plan_addresses(srv, srv->peers, confs, keep, n, plan, srv->routes,
	    srv->cfg->path, cause) != 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		peer_set_addresses(srv->peers[i], &plan[i]);
	ret = 0;
out:
	free(confs);
	free(plan);
	free(keep);
	return ret;
}

/*
 * With workers, the kernel's routes to a peer (its tunnel addresses and
 * AllowedIPs) point into the TUN device of the worker that holds its
 * session: added (replacing another worker's) when it connects, removed
 * when it goes unless another worker has taken them over since (a delete
 * names our device). Failures leave packets to the wrong worker, which
 * drops them as no_route: logged, never fatal.
 */
void
peer_routes(struct server *srv, const struct peer *p, bool add)
{
	const struct cfg_prefix_list *allowed = &p->cfg->allowed_ips;
	char *cause = NULL, s[ADDR_STRLEN];

	if (srv->workers == NULL || !srv->has_tun)
		return;
	for (size_t k = 0; k < p->naddrs + allowed->n; k++) {
		struct prefix dst = k < p->naddrs ? p->addrs[k] :
		    allowed->v[k - p->naddrs];
		int rv;

		if (k < p->naddrs)
			dst.len = dst.addr.family == AF_INET ? 32 : 128;
		rv = add ? tun_netlink_replace_route(srv->tun.ifindex, &dst,
		    &cause) : tun_netlink_del_route(srv->tun.ifindex, &dst,
		    &cause);
		if (rv != 0 && add)
			log_warn("peer %s: route %s into %s: %s", p->cfg->name,
			    addr_prefix_str(&dst, s), srv->tun.name, cause);
		free(cause);
		cause = NULL;
	}
}

/* state-ticket.c: the configured peer whose key a group member's ticket names
 * by its first octets. */
bool
peer_key_by_prefix(const uint8_t *prefix, size_t len, uint8_t key[KEY_LEN],
    void *arg)
{
	struct server *srv = arg;
	size_t i;

	if (!keyidx_find_prefix(&srv->keys, prefix, len, &i))
		return false;
	memcpy(key, srv->peers[i]->cfg->pubkey, KEY_LEN);
	return true;
}

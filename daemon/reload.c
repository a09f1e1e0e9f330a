/* SIGHUP (server_reload): the running server's peers brought in line with
 * the configuration read again. Peers are matched by Name and PublicKey
 * (cfg-diff.h); a kept one is changed in place, with its session going
 * on, removed ones lose their sessions, new ones are added. Everything
 * that can fail (addresses, the TUN's routes) is tried before anything
 * changes. */
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "config/cfg-diff.h"
#include "config/cfg-table.h"
#include "ops/privdrop.h"
#include "server-int.h"
#include "tun/tun-netlink.h"

/* The peers a reload removed (their `gone` set): every session that
 * speaks for one (connected, in its handshake, or serving its forwards
 * while being replaced) is closed with "not allowed", which its client
 * takes as a refusal; then the peers themselves are freed. Their tickets
 * are refused from now on: the pin check no longer finds their keys. One
 * pass over the sessions, however many peers go. */
static struct peer *
gone_peer(const struct session *sess)
{
	struct peer *v[] = { sess->peer, sess->pending_peer, sess->fwd_peer };

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		if (v[i] != NULL && v[i]->gone != NULL)
			return v[i];
	}
	return NULL;
}

static void
peers_remove(struct server *srv, struct peer **gone, size_t n)
{
	struct session *sess, *next;
	struct peer *p;

	for (sess = LIST_FIRST(&srv->sessions); sess != NULL; sess = next) {
		next = LIST_NEXT(sess, entry);
		if ((p = gone_peer(sess)) == NULL)
			continue;
		quic_conn_close(sess->qc, 3, p->gone);
		session_free(sess);
	}
	for (size_t i = 0; i < n; i++)
		peer_free(gone[i]);
}

static int
prefix_cmp(const void *va, const void *vb)
{
	const struct prefix *a = va, *b = vb;

	if (a->addr.family != b->addr.family)
		return a->addr.family < b->addr.family ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return memcmp(a->addr.b, b->addr.b, sizeof a->addr.b);
}

/* Every AllowedIPs prefix of `peers`, copied and sorted, for finding by
 * bisection which ones a reload adds and drops (thousands of peers). */
static struct prefix *
allowed_all(const struct cfg_peer *const *peers, size_t n, size_t *count)
{
	struct prefix *v;
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += peers[i]->allowed_ips.n;
	v = xcalloc(total + 1, sizeof *v);
	*count = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < peers[i]->allowed_ips.n; k++)
			v[(*count)++] = peers[i]->allowed_ips.v[k];
	}
	qsort(v, *count, sizeof *v, prefix_cmp);
	return v;
}

static bool
prefix_listed(const struct prefix *pfx, const struct prefix *sorted, size_t n)
{
	return n > 0 && bsearch(pfx, sorted, n, sizeof *sorted, prefix_cmp) != NULL;
}

static int
name_cmp(const void *va, const void *vb)
{
	return strcmp(*(const char *const *)va, *(const char *const *)vb);
}

/* One line of what a list now holds, for the log. */
static const char *
prefixes_str(const struct prefix *v, size_t n, char *buf, size_t len)
{
	char s[ADDR_STRLEN];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i ? ", " : "", addr_prefix_str(&v[i], s));
	if (n == 0)
		snprintf(buf, len, "(none)");
	return buf;
}


/* The changed keys of a peer the reload keeps: its copy of the
 * configuration takes the new lists (the name stays, and with it every
 * pointer to it), and its live session sees them at once. */
static void
peer_update(struct peer *p, const struct cfg_peer *next, unsigned changes,
    const struct addr_plan *pl)
{
	struct cfg_peer fresh;
	char buf[512];

	cfg_peer_copy(&fresh, next);
	free(fresh.name);
	fresh.name = p->conf.name;
	p->conf.name = NULL;
	cfg_peer_clear(&p->conf);
	p->conf = fresh;
	peer_set_addresses(p, pl);
	if (changes & CFG_DIFF_ADDRESS) {
		log_info("reload: peer %s: Address now %s", p->cfg->name,
		    prefixes_str(p->addrs, p->naddrs, buf, sizeof buf));
		/* The client learns its new addresses on its live connection
		 * (docs/PROTOCOL.md, SERVER_CONFIG). */
		if (p->sess != NULL && p->sess->configured &&
		    session_ctl_send_config(p->sess) != 0)
			quic_conn_close(p->sess->qc, 1, "cannot send the new "
			    "configuration");
	}
	if (changes & CFG_DIFF_ALLOWED_IPS)
		log_info("reload: peer %s: AllowedIPs now %s", p->cfg->name,
		    prefixes_str(p->cfg->allowed_ips.v, p->cfg->allowed_ips.n,
		    buf, sizeof buf));
	if (changes & CFG_DIFF_ALLOW_FORWARD) {
		char *t = cfg_key_text(p->cfg, CFG_KEY_PEER_ALLOW_FORWARD);

		t[strcspn(t, "\n")] = '\0';
		log_info("reload: peer %s: AllowForward now %s (for forwards "
		    "opened from now on)", p->cfg->name,
		    t[0] != '\0' ? strchr(t, '=') + 2 : "(none)");
		free(t);
	}
	if (changes & CFG_DIFF_ALLOW_REMOTE_FORWARD) {
		char *t = cfg_key_text(p->cfg, CFG_KEY_PEER_ALLOW_REMOTE_FORWARD);

		t[strcspn(t, "\n")] = '\0';
		log_info("reload: peer %s: AllowRemoteForward now %s",
		    p->cfg->name, t[0] != '\0' ? strchr(t, '=') + 2 : "(none)");
		free(t);
		if (p->sess != NULL)
			session_ctl_close_remote(p->sess, p->cfg);
	}
}

int
reload_apply(struct server *srv, const struct cfg *next)
{
	size_t n, nold = srv->npeers, nold_allowed, nnew_allowed, nadded = 0;
	const struct cfg_peer **old_confs, **confs;
	struct prefix *old_allowed = NULL, *new_allowed = NULL, *added = NULL;
	struct peer **peers;
	struct addr_plan *plan;
	struct route_table *rt;
	unsigned *changes;
	size_t *match, nchanged = 0;
	bool *keep, *kept;
	struct peer **gone;
	const char **added_names;
	size_t ngone = 0, nadded_names = 0;
	char *cause = NULL;
	int ret = -1;

	n = next->npeers;
	gone = xcalloc(nold + 1, sizeof *gone);
	added_names = xcalloc(n + 1, sizeof *added_names);
	old_confs = xcalloc(nold + 1, sizeof *old_confs);
	for (size_t j = 0; j < nold; j++)
		old_confs[j] = srv->peers[j]->cfg;
	match = xcalloc(n + 1, sizeof *match);
	cfg_diff_peers(old_confs, nold, next->peers, n, match);
	peers = xcalloc(n + 1, sizeof *peers);
	confs = xcalloc(n + 1, sizeof *confs);
	plan = xcalloc(n + 1, sizeof *plan);
	changes = xcalloc(n + 1, sizeof *changes);
	keep = xcalloc(n + 1, sizeof *keep);
	kept = xcalloc(nold + 1, sizeof *kept);
	for (size_t i = 0; i < n; i++) {
		confs[i] = &next->peers[i];
		if (match[i] == CFG_DIFF_NONE) {
			peers[i] = peer_create(&next->peers[i]);
			continue;
		}
		peers[i] = srv->peers[match[i]];
		kept[match[i]] = true;
		changes[i] = cfg_diff_peer(peers[i]->cfg, &next->peers[i]);
		keep[i] = !(changes[i] & CFG_DIFF_ADDRESS);
		if (keep[i]) {
			memcpy(plan[i].addrs, peers[i]->addrs, sizeof plan[i].addrs);
			memcpy(plan[i].subnet_len, peers[i]->subnet_len,
			    sizeof plan[i].subnet_len);
			plan[i].naddrs = peers[i]->naddrs;
		}
	}
	/* Everything that can fail comes before anything changes. */
	rt = route_create();
	if (peer_plan_addresses(srv, peers, confs, keep, n, plan, rt, next->path,
	    &cause) != 0) {
		log_error("%s", cause);
		free(cause);
		route_free(rt);
		goto out;
	}
	old_allowed = allowed_all(old_confs, nold, &nold_allowed);
	new_allowed = allowed_all(confs, n, &nnew_allowed);
	added = xcalloc(nnew_allowed + 1, sizeof *added);
	/* With workers, a peer's routes follow its session (peer_routes). */
	for (size_t i = 0; srv->has_tun && srv->workers == NULL &&
	    i < nnew_allowed; i++) {
		char s[ADDR_STRLEN];

		if (prefix_listed(&new_allowed[i], old_allowed, nold_allowed))
			continue;
		if (tun_netlink_add_route(srv->tun.ifindex, &new_allowed[i],
		    &cause) != 0) {
			log_error("%s: AllowedIPs %s: cannot route it into %s: %s",
			    next->path, addr_prefix_str(&new_allowed[i], s),
			    srv->tun.name, cause);
			free(cause);
			cause = NULL;
			for (size_t k = 0; k < nadded; k++) {
				if (tun_netlink_del_route(srv->tun.ifindex,
				    &added[k], &cause) != 0) {
					free(cause);
					cause = NULL;
				}
			}
			route_free(rt);
			goto out;
		}
		added[nadded++] = new_allowed[i];
	}

	/* From here on nothing fails: the new peers, addresses and routes
	 * take over. A peer removed whose name comes back is one whose key
	 * changed. */
	route_free(srv->routes);
	srv->routes = rt;
	for (size_t i = 0; i < n; i++) {
		if (match[i] == CFG_DIFF_NONE)
			added_names[nadded_names++] = next->peers[i].name;
	}
	qsort(added_names, nadded_names, sizeof *added_names, name_cmp);
	for (size_t j = 0; j < nold; j++) {
		struct peer *p = srv->peers[j];
		bool rekeyed;

		if (kept[j])
			continue;
		rekeyed = nadded_names > 0 && bsearch(&p->cfg->name, added_names,
		    nadded_names, sizeof *added_names, name_cmp) != NULL;
		log_info("reload: peer %s removed%s%s", p->cfg->name,
		    p->sess != NULL ? ", its connection closed" : "",
		    rekeyed ? " (its PublicKey changed)" : "");
		p->gone = rekeyed ? "public key changed" :
		    "peer removed from the configuration";
		gone[ngone++] = p;
		nchanged++;
	}
	peers_remove(srv, gone, ngone);
	for (size_t i = 0; i < n; i++) {
		char buf[512];

		if (match[i] == CFG_DIFF_NONE) {
			peer_set_addresses(peers[i], &plan[i]);
			log_info("reload: peer %s added, address %s",
			    peers[i]->cfg->name, prefixes_str(peers[i]->addrs,
			    peers[i]->naddrs, buf, sizeof buf));
			nchanged++;
		} else if (changes[i] != 0) {
			peer_update(peers[i], &next->peers[i], changes[i],
			    &plan[i]);
			nchanged++;
		}
	}
	free(srv->peers);
	srv->peers = peers;
	srv->npeers = n;
	peers = NULL;
	peer_index(srv);
	/* Prefixes no peer owns any more leave the TUN. Failing here only
	 * leaves a route whose packets are dropped as no_route. */
	for (size_t i = 0; srv->has_tun && srv->workers == NULL &&
	    i < nold_allowed; i++) {
		char s[ADDR_STRLEN];

		if (prefix_listed(&old_allowed[i], new_allowed, nnew_allowed))
			continue;
		if (tun_netlink_del_route(srv->tun.ifindex, &old_allowed[i],
		    &cause) != 0) {
			log_warn("reload: AllowedIPs %s: cannot remove its route "
			    "from %s: %s", addr_prefix_str(&old_allowed[i], s),
			    srv->tun.name, cause);
			free(cause);
			cause = NULL;
		}
	}
	/* Capabilities are given up once, at start: a port below 1024 that
	 * no peer had then cannot be bound now. */
	if (geteuid() != 0 && (privdrop_caps(next) &
	    ~privdrop_caps(srv->cfg) & PRIVDROP_CAP(CAP_NET_BIND_SERVICE)))
		log_warn("reload: an AllowRemoteForward port below 1024 needs "
		    "CAP_NET_BIND_SERVICE, which roved gave up at start: restart "
		    "it to listen there");
	if (nchanged == 0)
		log_info("reload: no peer changed");
	ret = 0;
out:
	if (peers != NULL) {
		for (size_t i = 0; i < n; i++) {
			if (match[i] == CFG_DIFF_NONE)
				peer_free(peers[i]);
		}
		free(peers);
	}
	free(old_confs);
	free(old_allowed);
	free(new_allowed);
	free(added);
	free(match);
	free(confs);
	free(plan);
	free(changes);
	free(keep);
	free(kept);
	free(gone);
	free(added_names);
	return ret;
}

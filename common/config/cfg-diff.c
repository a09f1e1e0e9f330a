/* Differences between two configurations, for a reload. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/key.h"
#include "base/xmalloc.h"
#include "cfg-diff.h"
#include "cfg-table.h"
#include "keyidx.h"

/* Every element of `a` is in `b` and the other way round. The lists are
 * a few entries long. */
static bool
same_set(const void *a, size_t na, const void *b, size_t nb, size_t size,
    bool (*eq)(const void *, const void *))
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < na; i++) {
			size_t j;

			for (j = 0; j < nb && !eq((const char *)a + i * size,
			    (const char *)b + j * size); j++)
				;
			if (j == nb)
				return false;
		}
		{
			const void *t = a;
			size_t nt = na;

			a = b, na = nb, b = t, nb = nt;
		}
	}
	return true;
}

static bool
prefix_eq(const void *va, const void *vb)
{
	const struct prefix *a = va, *b = vb;

	return a->len == b->len && addr_equal(&a->addr, &b->addr);
}

static bool
rule_eq(const void *va, const void *vb)
{
	const struct cfg_forward_rule *a = va, *b = vb;

	if (a->udp != b->udp || a->is_name != b->is_name || a->port != b->port)
		return false;
	return a->is_name ? strcasecmp(a->name, b->name) == 0 :
	    prefix_eq(&a->prefix, &b->prefix);
}

static bool
remote_rule_eq(const void *va, const void *vb)
{
	const struct cfg_remote_rule *a = va, *b = vb;

	return a->port == b->port && a->bind == b->bind && a->udp == b->udp &&
	    (a->bind != PROTO_RBIND_ADDR || addr_equal(&a->addr, &b->addr));
}

unsigned
cfg_diff_peer(const struct cfg_peer *a, const struct cfg_peer *b)
{
	unsigned changed = 0;

	if (!same_set(a->addrs, a->naddrs, b->addrs, b->naddrs,
	    sizeof *a->addrs, prefix_eq))
		changed |= CFG_DIFF_ADDRESS;
	if (!same_set(a->allowed_ips.v, a->allowed_ips.n, b->allowed_ips.v,
	    b->allowed_ips.n, sizeof *a->allowed_ips.v, prefix_eq))
		changed |= CFG_DIFF_ALLOWED_IPS;
	if (!same_set(a->allow_forward, a->nallow_forward, b->allow_forward,
	    b->nallow_forward, sizeof *a->allow_forward, rule_eq))
		changed |= CFG_DIFF_ALLOW_FORWARD;
	if (!same_set(a->allow_remote_forward, a->nallow_remote_forward,
	    b->allow_remote_forward, b->nallow_remote_forward,
	    sizeof *a->allow_remote_forward, remote_rule_eq))
		changed |= CFG_DIFF_ALLOW_REMOTE_FORWARD;
	return changed;
}

void
cfg_diff_peers(const struct cfg_peer *const *old, size_t nold,
    const struct cfg_peer *next, size_t nnext, size_t *match)
{
	struct keyidx ix;

	/* Thousands of peers: find each key by bisection, then its name. */
	keyidx_init(&ix, nold);
	for (size_t j = 0; j < nold; j++)
		keyidx_add(&ix, old[j]->pubkey, j);
	keyidx_sort(&ix);
	for (size_t i = 0; i < nnext; i++) {
		size_t j;

		match[i] = CFG_DIFF_NONE;
		if (keyidx_find(&ix, next[i].pubkey, &j) && old[j]->name != NULL &&
		    next[i].name != NULL && strcmp(old[j]->name, next[i].name) == 0)
			match[i] = j;
	}
	keyidx_clear(&ix);
}

/* "Key = a\nKey = b\n" as "a, b"; "(none)" when empty. Malloc'd. */
static char *
values(const char *text)
{
	char *out = xcalloc(1, strlen(text) + sizeof "(none)");
	const char *line = text;

	while (*line != '\0') {
		const char *nl = strchr(line, '\n'), *eq = strstr(line, " = ");
		size_t end = nl != NULL ? (size_t)(nl - line) : strlen(line);

		if (eq != NULL && (size_t)(eq - line) < end) {
			if (out[0] != '\0')
				strcat(out, ", ");
			strncat(out, eq + 3, end - (size_t)(eq + 3 - line));
		}
		line += end + (nl != NULL);
	}
	if (out[0] == '\0')
		strcpy(out, "(none)");
	return out;
}

size_t
cfg_diff_restart(const struct cfg *running, const struct cfg *next,
    struct cfg_errors *out)
{
	unsigned sec = next->role == CFG_ROLE_SERVER ? CFG_SEC_SERVER :
	    CFG_SEC_CLIENT;
	size_t added = 0;

	for (size_t id = 0; id < CFG_KEY_COUNT; id++) {
		char *a, *b;

		if (!(cfg_table[id].sections & sec))
			continue;
		if (next->role == CFG_ROLE_CLIENT &&
		    (id == CFG_KEY_LOCAL_FORWARD || id == CFG_KEY_REMOTE_FORWARD ||
		    id == CFG_KEY_DYNAMIC_FORWARD))
			continue;
		a = cfg_key_text(running, (enum cfg_key_id)id);
		b = cfg_key_text(next, (enum cfg_key_id)id);
		if (strcmp(a, b) != 0) {
			char *va = values(a), *vb = values(b);

			out->msg = xrealloc(out->msg, (out->n + 1) *
			    sizeof *out->msg);
			xasprintf(&out->msg[out->n++], "%s: needs a restart "
			    "(running: %s; file: %s)", cfg_table[id].name, va, vb);
			free(va);
			free(vb);
			added++;
		}
		free(a);
		free(b);
	}
	return added;
}

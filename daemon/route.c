/* The route table: a path-compressed binary trie per address family. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/xmalloc.h"
#include "route.h"

/*
 * Each node is a prefix (key masked to `len` bits). A node with an owner is
 * a route; a node without one only joins two subtrees, so it always has
 * both children. A node's children extend its prefix, chosen by the bit
 * right after it. A lookup walks at most one node per distinct prefix
 * length on the path and allocates nothing.
 */
struct route_node {
	uint8_t key[16];
	uint8_t len;
	void *owner;
	struct route_node *child[2];
};

struct route_table {
	struct route_node *root4;
	struct route_node *root6;
	size_t count;
};

static int
bit_at(const uint8_t *key, unsigned i)
{
	return (key[i / 8] >> (7 - i % 8)) & 1;
}

/* How many leading bits of a and b agree, up to `limit`. */
static unsigned
common_bits(const uint8_t *a, const uint8_t *b, unsigned limit)
{
	unsigned n = 0;
	uint8_t x;

	while (n < limit) {
		x = a[n / 8] ^ b[n / 8];
		if (x == 0) {
			n += 8;
			continue;
		}
		/* n is a multiple of 8 here: count the equal high bits. */
		while ((x & 0x80) == 0) {
			x <<= 1;
			n++;
		}
		break;
	}
	return n < limit ? n : limit;
}

static void
mask_key(uint8_t key[16], unsigned len)
{
	if (len % 8 != 0)
		key[len / 8] &= (uint8_t)(0xff << (8 - len % 8));
	for (unsigned i = (len + 7) / 8; i < 16; i++)
		key[i] = 0;
}

static struct route_node **
root_of(struct route_table *t, int family, unsigned *maxlen)
{
	if (family == AF_INET) {
		*maxlen = 32;
		return &t->root4;
	}
	if (family == AF_INET6) {
		*maxlen = 128;
		return &t->root6;
	}
	return NULL;
}

struct route_table *
route_create(void)
{
	return xcalloc(1, sizeof(struct route_table));
}

static void
free_nodes(struct route_node *n)
{
	if (n == NULL)
		return;
	free_nodes(n->child[0]);
	free_nodes(n->child[1]);
	free(n);
}

void
route_free(struct route_table *t)
{
	if (t == NULL)
		return;
	free_nodes(t->root4);
	free_nodes(t->root6);
	free(t);
}

static struct route_node *
new_node(const uint8_t key[16], unsigned len, void *owner)
{
	struct route_node *n = xcalloc(1, sizeof *n);

	memcpy(n->key, key, 16);
	mask_key(n->key, len);
	n->len = (uint8_t)len;
	n->owner = owner;
	return n;
}

int
route_add(struct route_table *t, const struct prefix *p, void *owner)
{
	struct route_node **link, *n, *leaf, *join;
	unsigned maxlen, plen, common;
	uint8_t key[16];

	/* NULL marks a joining node, so it cannot own a route. */
	if (owner == NULL)
		return -1;
	link = root_of(t, p->addr.family, &maxlen);
	if (link == NULL || p->len > maxlen)
		return -1;
	plen = p->len;
	memcpy(key, p->addr.b, 16);
	mask_key(key, plen);

	while ((n = *link) != NULL) {
		common = common_bits(n->key, key, plen < n->len ? plen : n->len);
		if (common < n->len) {
			/* n is not a prefix of the new route: the new route
			 * sits above n, or a joining node splits at the
			 * first differing bit. */
			leaf = new_node(key, plen, owner);
			if (common == plen) {
				leaf->child[bit_at(n->key, plen)] = n;
				*link = leaf;
			} else {
				join = new_node(key, common, NULL);
				join->child[bit_at(n->key, common)] = n;
				join->child[bit_at(key, common)] = leaf;
				*link = join;
			}
			t->count++;
			return 0;
		}
		if (n->len == plen) {
			if (n->owner == NULL) {
				n->owner = owner;
				t->count++;
				return 0;
			}
			return n->owner == owner ? 0 : -1;
		}
		link = &n->child[bit_at(key, n->len)];
	}
	*link = new_node(key, plen, owner);
	t->count++;
	return 0;
}

/* Clear `owner`'s routes below *link, then drop nodes that no longer join
 * two subtrees, so the trie keeps its shape. */
static void
remove_owner(struct route_node **link, void *owner, size_t *count)
{
	struct route_node *n = *link;

	if (n == NULL)
		return;
	remove_owner(&n->child[0], owner, count);
	remove_owner(&n->child[1], owner, count);
	if (n->owner != NULL && n->owner == owner) {
		n->owner = NULL;
		(*count)--;
	}
	if (n->owner != NULL || (n->child[0] != NULL && n->child[1] != NULL))
		return;
	*link = n->child[0] != NULL ? n->child[0] : n->child[1];
	free(n);
}

void
route_remove_owner(struct route_table *t, void *owner)
{
	if (owner == NULL)
		return;
	remove_owner(&t->root4, owner, &t->count);
	remove_owner(&t->root6, owner, &t->count);
}

void *
route_lookup(const struct route_table *t, const struct ipaddr *a)
{
	const struct route_node *n;
	void *best = NULL;

	if (a->family == AF_INET)
		n = t->root4;
	else if (a->family == AF_INET6)
		n = t->root6;
	else
		return NULL;

	while (n != NULL) {
		if (common_bits(n->key, a->b, n->len) < n->len)
			break;
		if (n->owner != NULL)
			best = n->owner;
		if (n->len == (a->family == AF_INET ? 32 : 128))
			break;
		n = n->child[bit_at(a->b, n->len)];
	}
	return best;
}

size_t
route_count(const struct route_table *t)
{
	return t->count;
}

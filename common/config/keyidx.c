/* An index of public keys (see keyidx.h). */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "keyidx.h"

void
keyidx_init(struct keyidx *ix, size_t n)
{
	memset(ix, 0, sizeof *ix);
	ix->cap = n > 0 ? n : 1;
	ix->v = xcalloc(ix->cap, sizeof *ix->v);
}

void
keyidx_clear(struct keyidx *ix)
{
	free(ix->v);
	memset(ix, 0, sizeof *ix);
}

void
keyidx_add(struct keyidx *ix, const uint8_t key[static KEY_LEN], size_t value)
{
	if (ix->n == ix->cap) {
		ix->cap = ix->cap > 0 ? ix->cap * 2 : 16;
		ix->v = xrealloc(ix->v, ix->cap * sizeof *ix->v);
	}
	memcpy(ix->v[ix->n].key, key, KEY_LEN);
	ix->v[ix->n].value = value;
	ix->n++;
	ix->sorted = false;
}

static int
entry_cmp(const void *va, const void *vb)
{
	const struct keyidx_entry *a = va, *b = vb;
	int c = memcmp(a->key, b->key, KEY_LEN);

	if (c != 0)
		return c;
	return a->value < b->value ? -1 : a->value > b->value;
}

void
keyidx_sort(struct keyidx *ix)
{
	if (ix->n > 1)
		qsort(ix->v, ix->n, sizeof *ix->v, entry_cmp);
	ix->sorted = true;
}

bool
keyidx_find(const struct keyidx *ix, const uint8_t key[static KEY_LEN],
    size_t *value)
{
	return keyidx_find_prefix(ix, key, KEY_LEN, value);
}

bool
keyidx_find_prefix(const struct keyidx *ix, const uint8_t *prefix, size_t len,
    size_t *value)
{
	size_t lo = 0, hi = ix->n;

	if (!ix->sorted)
		fatalx("%s: the index is not sorted", __func__);
	if (len > KEY_LEN)
		return false;
	/* The first entry not below `prefix`: with duplicates, the lowest
	 * value. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (memcmp(ix->v[mid].key, prefix, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ix->n || memcmp(ix->v[lo].key, prefix, len) != 0)
		return false;
	*value = ix->v[lo].value;
	return true;
}

size_t
keyidx_dups(const struct keyidx *ix,
    void (*dup)(size_t value, size_t first, void *arg), void *arg)
{
	size_t n = 0, first = 0;

	if (!ix->sorted)
		fatalx("%s: the index is not sorted", __func__);
	for (size_t i = 1; i < ix->n; i++) {
		if (memcmp(ix->v[i].key, ix->v[first].key, KEY_LEN) != 0) {
			first = i;
			continue;
		}
		dup(ix->v[i].value, ix->v[first].value, arg);
		n++;
	}
	return n;
}

/* An index of public keys: which peer presents this key, among thousands.
 * A sorted array searched by bisection, built once from a configuration
 * (its peers do not change while it is loaded): O(log n) per lookup, no
 * hashing, so no key an attacker chooses can make a lookup slower. */
#ifndef ROVE_KEYIDX_H
#define ROVE_KEYIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/key.h"

struct keyidx_entry {
	uint8_t key[KEY_LEN];
	size_t value;
};

struct keyidx {
	struct keyidx_entry *v;
	size_t n, cap;
	bool sorted;
};

/* An empty index with room for `n` keys (it grows past that if need be). */
void keyidx_init(struct keyidx *, size_t n);
/* Frees the entries; the index is empty again. */
void keyidx_clear(struct keyidx *);
/* Adds `key` with `value` (the caller's, e.g. an array index). The same
 * key may be added more than once. */
void keyidx_add(struct keyidx *, const uint8_t key[static KEY_LEN], size_t value);
/* Sorts the index; call after the last add, before the first lookup.
 * Entries with equal keys end up in the order of their values. */
void keyidx_sort(struct keyidx *);
/* The value added with `key` (the lowest, if it was added more than once).
 * Returns false if the key is not in the index. */
bool keyidx_find(const struct keyidx *, const uint8_t key[static KEY_LEN],
    size_t *value);
/* The same for the first `len` octets of a key (a key's prefix names it
 * as surely as the key at 16 octets): the lowest value among keys that
 * begin so. */
bool keyidx_find_prefix(const struct keyidx *, const uint8_t *prefix,
    size_t len, size_t *value);
/* Calls `dup` for every entry whose key was added before with a lower
 * value: with its value and the lowest value of that key. Returns how many
 * there were. */
size_t keyidx_dups(const struct keyidx *,
    void (*dup)(size_t value, size_t first, void *arg), void *arg);

#endif

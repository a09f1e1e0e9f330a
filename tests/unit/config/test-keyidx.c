/* Unit tests for common/config/keyidx.c: public key -> value by bisection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/keyidx.h"

/* A key that is all `b`, with `last` as its final byte. */
static void
key_of(uint8_t key[KEY_LEN], uint8_t b, uint8_t last)
{
	memset(key, b, KEY_LEN);
	key[KEY_LEN - 1] = last;
}

static void
test_empty(void **state)
{
	struct keyidx ix;
	uint8_t k[KEY_LEN];
	size_t v = 77;

	(void)state;
	keyidx_init(&ix, 0);
	keyidx_sort(&ix);
	key_of(k, 0, 0);
	assert_false(keyidx_find(&ix, k, &v));
	assert_int_equal(v, 77);
	keyidx_clear(&ix);
	assert_null(ix.v);
	assert_int_equal(ix.n, 0);
}

/* Keys found with their values whatever the order they were added in;
 * keys before the first, after the last, between two and differing from
 * one only in the last or the first byte are not found. */
static void
test_find(void **state)
{
	static const uint8_t bytes[] = { 0x80, 0x01, 0xfe, 0x40, 0x7f };
	struct keyidx ix;
	uint8_t k[KEY_LEN];
	size_t v;

	(void)state;
	keyidx_init(&ix, 2); /* grows past its first size */
	for (size_t i = 0; i < sizeof bytes; i++) {
		key_of(k, bytes[i], 0x10);
		keyidx_add(&ix, k, 100 + i);
	}
	keyidx_sort(&ix);
	assert_int_equal(ix.n, sizeof bytes);
	for (size_t i = 0; i < sizeof bytes; i++) {
		key_of(k, bytes[i], 0x10);
		assert_true(keyidx_find(&ix, k, &v));
		assert_int_equal(v, 100 + i);
		key_of(k, bytes[i], 0x11);
		assert_false(keyidx_find(&ix, k, &v));
		key_of(k, bytes[i], 0x0f);
		assert_false(keyidx_find(&ix, k, &v));
		key_of(k, bytes[i], 0x10);
		k[0] ^= 1;
		assert_false(keyidx_find(&ix, k, &v));
	}
	key_of(k, 0x00, 0x00);
	assert_false(keyidx_find(&ix, k, &v));
	key_of(k, 0xff, 0xff);
	assert_false(keyidx_find(&ix, k, &v));
	key_of(k, 0x41, 0x10);
	assert_false(keyidx_find(&ix, k, &v));
	keyidx_clear(&ix);
}

struct dup_seen {
	size_t n;
	size_t value[8], first[8];
};

static void
record_dup(size_t value, size_t first, void *arg)
{
	struct dup_seen *d = arg;

	assert_true(d->n < 8);
	d->value[d->n] = value;
	d->first[d->n] = first;
	d->n++;
}

/* A key added three times (values 9, 2, 5) is found as the lowest; each
 * later one is reported once against it, as is the second of another
 * pair, in key order; unique keys are never reported. */
static void
test_duplicates(void **state)
{
	struct dup_seen d = { 0 };
	struct keyidx ix;
	uint8_t a[KEY_LEN], b[KEY_LEN], c[KEY_LEN];
	size_t v;

	(void)state;
	key_of(a, 0x20, 1);
	key_of(b, 0x30, 1);
	key_of(c, 0x10, 1);
	keyidx_init(&ix, 8);
	keyidx_add(&ix, a, 9);
	keyidx_add(&ix, b, 4);
	keyidx_add(&ix, a, 2);
	keyidx_add(&ix, c, 0);
	keyidx_add(&ix, a, 5);
	keyidx_add(&ix, b, 7);
	keyidx_sort(&ix);
	assert_true(keyidx_find(&ix, a, &v));
	assert_int_equal(v, 2);
	assert_true(keyidx_find(&ix, b, &v));
	assert_int_equal(v, 4);
	assert_true(keyidx_find(&ix, c, &v));
	assert_int_equal(v, 0);
	assert_int_equal(keyidx_dups(&ix, record_dup, &d), 3);
	assert_int_equal(d.n, 3);
	assert_int_equal(d.value[0], 5);
	assert_int_equal(d.first[0], 2);
	assert_int_equal(d.value[1], 9);
	assert_int_equal(d.first[1], 2);
	assert_int_equal(d.value[2], 7);
	assert_int_equal(d.first[2], 4);
	keyidx_clear(&ix);
}

/* 10,000 pseudo-random keys, as many peers as a large server has: each is
 * found with its own value, and 10,000 others are not, exactly as a
 * linear scan of the same keys says. */
static void
test_many(void **state)
{
	enum { N = 10000 };
	uint8_t (*keys)[KEY_LEN] = malloc(N * sizeof *keys), k[KEY_LEN];
	struct dup_seen d = { 0 };
	struct keyidx ix;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	size_t v;

	(void)state;
	assert_non_null(keys);
	keyidx_init(&ix, N);
	for (size_t i = 0; i < N; i++) {
		for (size_t j = 0; j < KEY_LEN; j++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			keys[i][j] = (uint8_t)x;
		}
		keyidx_add(&ix, keys[i], i);
	}
	keyidx_sort(&ix);
	assert_int_equal(keyidx_dups(&ix, record_dup, &d), 0);
	for (size_t i = 0; i < N; i++) {
		assert_true(keyidx_find(&ix, keys[i], &v));
		assert_int_equal(v, i);
		memcpy(k, keys[i], KEY_LEN);
		k[i % KEY_LEN] ^= 0x01;
		bool linear = false;
		for (size_t j = 0; j < N && !linear; j++)
			linear = memcmp(keys[j], k, KEY_LEN) == 0;
		assert_int_equal(keyidx_find(&ix, k, &v), linear);
	}
	keyidx_clear(&ix);
	free(keys);
}

/* A prefix finds the lowest value among keys that begin so; one that no
 * key begins with finds nothing, however close it sorts. */
static void
test_prefix(void **state)
{
	struct keyidx ix;
	uint8_t k[KEY_LEN];
	size_t v = 0;

	(void)state;
	keyidx_init(&ix, 4);
	key_of(k, 0x20, 1);
	keyidx_add(&ix, k, 10);
	key_of(k, 0x20, 2);
	keyidx_add(&ix, k, 11);
	key_of(k, 0x30, 0);
	keyidx_add(&ix, k, 12);
	keyidx_sort(&ix);
	key_of(k, 0x30, 9);
	assert_true(keyidx_find_prefix(&ix, k, 16, &v));
	assert_int_equal(v, 12);
	key_of(k, 0x20, 2);
	assert_true(keyidx_find_prefix(&ix, k, KEY_LEN, &v));
	assert_int_equal(v, 11);
	assert_true(keyidx_find_prefix(&ix, k, KEY_LEN - 1, &v));
	assert_int_equal(v, 10);
	k[15] = 0x21;
	assert_false(keyidx_find_prefix(&ix, k, 16, &v));
	key_of(k, 0x40, 0);
	assert_false(keyidx_find_prefix(&ix, k, 16, &v));
	assert_false(keyidx_find_prefix(&ix, k, KEY_LEN + 1, &v));
	assert_int_equal(v, 10);
	keyidx_clear(&ix);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_prefix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

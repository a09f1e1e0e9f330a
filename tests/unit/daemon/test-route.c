/* Unit tests for daemon/route.c: longest prefix match by owner. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "daemon/route.h"

/* Owners are just distinct addresses. */
static int own_a, own_b, own_c, own_d, own_e, own_f;
#define A (&own_a)
#define B (&own_b)
#define C (&own_c)
#define D (&own_d)
#define E (&own_e)
#define F (&own_f)

static struct ipaddr
ip(const char *s)
{
	struct ipaddr a;

	memset(&a, 0, sizeof a);
	a.family = strchr(s, ':') != NULL ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(a.family, s, a.b), 1);
	return a;
}

static int
add(struct route_table *t, const char *addr, unsigned len, void *owner)
{
	struct prefix p;

	p.addr = ip(addr);
	p.len = (uint8_t)len;
	return route_add(t, &p, owner);
}

static void *
look(const struct route_table *t, const char *addr)
{
	struct ipaddr a = ip(addr);

	return route_lookup(t, &a);
}

static void
test_empty(void **state)
{
	struct route_table *t = route_create();

	(void)state;
	assert_int_equal(route_count(t), 0);
	assert_null(look(t, "10.0.0.1"));
	assert_null(look(t, "::"));
	route_remove_owner(t, A);
	assert_int_equal(route_count(t), 0);
	route_free(t);
	route_free(NULL);
}

static void
test_v4_longest(void **state)
{
	struct route_table *t = route_create();

	(void)state;
	assert_int_equal(add(t, "10.1.2.0", 24, C), 0);
	assert_int_equal(add(t, "10.0.0.0", 8, A), 0);
	assert_int_equal(add(t, "10.1.2.3", 32, D), 0);
	assert_int_equal(add(t, "10.1.0.0", 16, B), 0);
	assert_int_equal(route_count(t), 4);

	assert_ptr_equal(look(t, "10.1.2.3"), D);
	assert_ptr_equal(look(t, "10.1.2.4"), C);
	assert_ptr_equal(look(t, "10.1.2.255"), C);
	assert_ptr_equal(look(t, "10.1.3.1"), B);
	assert_ptr_equal(look(t, "10.1.255.255"), B);
	assert_ptr_equal(look(t, "10.2.0.0"), A);
	assert_ptr_equal(look(t, "10.255.255.255"), A);
	assert_null(look(t, "11.0.0.1"));
	assert_null(look(t, "9.255.255.255"));
	assert_null(look(t, "0.0.0.0"));

	/* Host bits are masked off: 192.168.1.77/24 is 192.168.1.0/24. */
	assert_int_equal(add(t, "192.168.1.77", 24, E), 0);
	assert_ptr_equal(look(t, "192.168.1.1"), E);
	assert_ptr_equal(look(t, "192.168.1.77"), E);
	assert_null(look(t, "192.168.2.1"));
	assert_int_equal(add(t, "192.168.1.0", 24, E), 0);
	assert_int_equal(route_count(t), 5);

	/* Sibling prefixes split at a joining node. */
	assert_int_equal(add(t, "192.168.0.0", 24, F), 0);
	assert_ptr_equal(look(t, "192.168.0.9"), F);
	assert_ptr_equal(look(t, "192.168.1.9"), E);
	assert_int_equal(route_count(t), 6);

	/* The /0 default catches the rest. */
	assert_int_equal(add(t, "0.0.0.0", 0, F), 0);
	assert_ptr_equal(look(t, "11.0.0.1"), F);
	assert_ptr_equal(look(t, "255.255.255.255"), F);
	assert_ptr_equal(look(t, "10.1.2.3"), D);
	assert_int_equal(route_count(t), 7);
	route_free(t);
}

static void
test_v6_longest(void **state)
{
	struct route_table *t = route_create();

	(void)state;
	assert_int_equal(add(t, "fd00:77::2", 128, C), 0);
	assert_int_equal(add(t, "fd00::", 8, A), 0);
	assert_int_equal(add(t, "fd00:77::", 64, B), 0);
	assert_int_equal(add(t, "2001:db8::", 32, D), 0);
	assert_int_equal(route_count(t), 4);

	assert_ptr_equal(look(t, "fd00:77::2"), C);
	assert_ptr_equal(look(t, "fd00:77::3"), B);
	assert_ptr_equal(look(t, "fd00:77::ffff:ffff:ffff:ffff"), B);
	assert_ptr_equal(look(t, "fd00:78::2"), A);
	assert_ptr_equal(look(t, "fdff:ffff::1"), A);
	assert_ptr_equal(look(t, "2001:db8:ffff::1"), D);
	assert_null(look(t, "2001:db9::1"));
	assert_null(look(t, "fe00::1"));
	assert_null(look(t, "::"));

	/* Host bits masked, odd lengths. */
	assert_int_equal(add(t, "2001:db8:1234:5678::1", 61, E), 0);
	assert_ptr_equal(look(t, "2001:db8:1234:5678::9"), E);
	assert_ptr_equal(look(t, "2001:db8:1234:567f::9"), E);
	assert_ptr_equal(look(t, "2001:db8:1234:5670::9"), D);

	assert_int_equal(add(t, "::", 0, F), 0);
	assert_ptr_equal(look(t, "fe00::1"), F);
	assert_ptr_equal(look(t, "fd00:77::2"), C);
	assert_int_equal(route_count(t), 6);
	route_free(t);
}

static void
test_families_apart(void **state)
{
	struct route_table *t = route_create();
	struct ipaddr bad;

	(void)state;
	assert_int_equal(add(t, "0.0.0.0", 0, A), 0);
	assert_null(look(t, "::"));
	assert_null(look(t, "a00::1"));
	assert_ptr_equal(look(t, "10.0.0.1"), A);

	/* The same bytes and length in both families are two routes. */
	assert_int_equal(add(t, "10.0.0.0", 8, B), 0);
	assert_int_equal(add(t, "a00::", 8, C), 0);
	assert_int_equal(route_count(t), 3);
	assert_ptr_equal(look(t, "10.0.0.1"), B);
	assert_ptr_equal(look(t, "a00::1"), C);
	assert_null(look(t, "b00::1"));

	memset(&bad, 0, sizeof bad);
	bad.family = AF_UNIX;
	assert_null(route_lookup(t, &bad));
	route_free(t);
}

static void
test_duplicates_and_overlaps(void **state)
{
	struct route_table *t = route_create();
	struct prefix p;

	(void)state;
	assert_int_equal(add(t, "10.77.0.0", 24, A), 0);
	/* The same owner again: idempotent. */
	assert_int_equal(add(t, "10.77.0.0", 24, A), 0);
	assert_int_equal(add(t, "10.77.0.9", 24, A), 0);
	assert_int_equal(route_count(t), 1);
	/* Another owner of the exact prefix is an overlap. */
	assert_int_equal(add(t, "10.77.0.0", 24, B), -1);
	assert_int_equal(add(t, "10.77.0.200", 24, B), -1);
	assert_int_equal(route_count(t), 1);
	assert_ptr_equal(look(t, "10.77.0.5"), A);

	/* Overlapping prefixes of different lengths coexist. */
	assert_int_equal(add(t, "10.77.0.5", 32, B), 0);
	assert_int_equal(add(t, "10.77.0.0", 16, C), 0);
	assert_int_equal(add(t, "10.77.0.0", 25, D), 0);
	assert_ptr_equal(look(t, "10.77.0.5"), B);
	assert_ptr_equal(look(t, "10.77.0.6"), D);
	assert_ptr_equal(look(t, "10.77.0.200"), A);
	assert_ptr_equal(look(t, "10.77.1.1"), C);
	assert_int_equal(route_count(t), 4);

	/* Bad input. */
	assert_int_equal(add(t, "10.0.0.0", 33, A), -1);
	assert_int_equal(add(t, "fd00::", 129, A), -1);
	assert_int_equal(add(t, "10.0.0.0", 8, NULL), -1);
	memset(&p, 0, sizeof p);
	p.addr.family = AF_UNIX;
	assert_int_equal(route_add(t, &p, A), -1);
	assert_int_equal(route_count(t), 4);
	route_free(t);
}

static void
test_remove_owner(void **state)
{
	struct route_table *t = route_create();

	(void)state;
	assert_int_equal(add(t, "10.0.0.0", 8, A), 0);
	assert_int_equal(add(t, "10.1.0.0", 16, B), 0);
	assert_int_equal(add(t, "10.1.2.0", 24, C), 0);
	assert_int_equal(add(t, "10.1.3.0", 24, B), 0);
	assert_int_equal(add(t, "fd00::", 16, B), 0);
	assert_int_equal(add(t, "fd00:1::", 32, A), 0);
	assert_int_equal(route_count(t), 6);

	route_remove_owner(t, B);
	assert_int_equal(route_count(t), 3);
	assert_ptr_equal(look(t, "10.1.3.1"), A);
	assert_ptr_equal(look(t, "10.1.4.1"), A);
	assert_ptr_equal(look(t, "10.1.2.1"), C);
	assert_null(look(t, "fd00:2::1"));
	assert_ptr_equal(look(t, "fd00:1::1"), A);

	/* Removing an owner with nothing left changes nothing. */
	route_remove_owner(t, B);
	route_remove_owner(t, NULL);
	assert_int_equal(route_count(t), 3);

	/* The freed prefix can now go to someone else. */
	assert_int_equal(add(t, "10.1.0.0", 16, D), 0);
	assert_ptr_equal(look(t, "10.1.3.1"), D);

	route_remove_owner(t, A);
	route_remove_owner(t, C);
	route_remove_owner(t, D);
	assert_int_equal(route_count(t), 0);
	assert_null(look(t, "10.1.2.1"));
	assert_null(look(t, "fd00:1::1"));

	assert_int_equal(add(t, "10.1.2.0", 24, E), 0);
	assert_ptr_equal(look(t, "10.1.2.1"), E);
	assert_int_equal(route_count(t), 1);
	route_free(t);
}

/*
 * Against a plain reference: random prefixes, adds and removals, checked
 * with lookups near the stored prefixes. The generator is a fixed xorshift,
 * so a failure reproduces.
 */
struct ref_route {
	struct prefix p;
	void *owner;
};

static uint64_t rng = 0x9e3779b97f4a7c15;

static uint64_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
mask(struct ipaddr *a, unsigned len)
{
	for (unsigned i = 0; i < 128; i++) {
		if (i >= len)
			a->b[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
	}
}

static bool
ref_contains(const struct prefix *p, const struct ipaddr *a)
{
	struct ipaddr m = *a;

	if (p->addr.family != a->family)
		return false;
	mask(&m, p->len);
	return memcmp(m.b, p->addr.b, 16) == 0;
}

static void
random_addr(struct ipaddr *a, int family)
{
	memset(a, 0, sizeof *a);
	a->family = family;
	for (size_t i = 0; i < (family == AF_INET ? 4u : 16u); i++)
		a->b[i] = (uint8_t)next_rand();
	/* Crowd everything into a few /12s so prefixes overlap a lot. */
	a->b[0] = 10;
	a->b[1] = (uint8_t)((a->b[1] & 0x30) | 0x40);
}

static void
test_against_reference(void **state)
{
	static struct ref_route ref[600];
	static int owners[8];
	struct route_table *t = route_create();
	struct ipaddr a;
	struct prefix p;
	size_t nref = 0, live, best;
	void *owner, *want;
	int family, r, expect;

	(void)state;
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 150; i++) {
			family = next_rand() % 2 ? AF_INET : AF_INET6;
			random_addr(&p.addr, family);
			p.len = (uint8_t)(next_rand() %
			    (family == AF_INET ? 33 : 129));
			owner = &owners[next_rand() % 8];
			r = route_add(t, &p, owner);

			mask(&p.addr, p.len);
			expect = 0;
			for (size_t j = 0; j < nref; j++) {
				if (ref[j].owner != NULL &&
				    ref[j].p.addr.family == family &&
				    ref[j].p.len == p.len &&
				    memcmp(ref[j].p.addr.b, p.addr.b, 16) == 0) {
					expect = ref[j].owner == owner ? 1 : -1;
					break;
				}
			}
			assert_int_equal(r, expect < 0 ? -1 : 0);
			if (expect == 0) {
				ref[nref].p = p;
				ref[nref].owner = owner;
				nref++;
			}
		}
		/* Drop one owner each round. */
		owner = &owners[next_rand() % 8];
		route_remove_owner(t, owner);
		for (size_t j = 0; j < nref; j++) {
			if (ref[j].owner == owner)
				ref[j].owner = NULL;
		}

		live = 0;
		for (size_t j = 0; j < nref; j++)
			live += ref[j].owner != NULL;
		assert_int_equal(route_count(t), live);

		for (int i = 0; i < 3000; i++) {
			random_addr(&a, next_rand() % 2 ? AF_INET : AF_INET6);
			/* Often start from a stored prefix, to land deep. */
			if (nref > 0 && next_rand() % 2) {
				struct ref_route *q = &ref[next_rand() % nref];
				unsigned keep = q->p.len;

				/* Mostly inside it, sometimes just beside. */
				if (next_rand() % 4 == 0)
					keep = (unsigned)(next_rand() % (keep + 1u));

				a.family = q->p.addr.family;
				for (unsigned b = 0; b < keep; b++) {
					uint8_t bit = (uint8_t)(0x80 >> (b % 8));
					a.b[b / 8] = (uint8_t)((a.b[b / 8] & ~bit) |
					    (q->p.addr.b[b / 8] & bit));
				}
			}
			if (a.family == AF_INET)
				memset(a.b + 4, 0, 12);
			want = NULL;
			best = 0;
			for (size_t j = 0; j < nref; j++) {
				if (ref[j].owner == NULL ||
				    !ref_contains(&ref[j].p, &a))
					continue;
				if (want == NULL || ref[j].p.len >= best) {
					want = ref[j].owner;
					best = ref[j].p.len;
				}
			}
			assert_ptr_equal(route_lookup(t, &a), want);
		}
	}
	route_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_v4_longest),
		cmocka_unit_test(test_v6_longest),
		cmocka_unit_test(test_families_apart),
		cmocka_unit_test(test_duplicates_and_overlaps),
		cmocka_unit_test(test_remove_owner),
		cmocka_unit_test(test_against_reference),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

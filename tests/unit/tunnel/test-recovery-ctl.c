/* Unit tests for common/tunnel/recovery-ctl.c: the group failure rate, and
 * the repairs the controller asks for after given loss histories. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tunnel/recovery-ctl.h"

/* P(X > m), X ~ Binomial(n, p), the plain way: 1 - P(X <= m) from
 * binomial coefficients, for moderate tails where it is exact enough. */
static double
tail_direct(unsigned n, unsigned m, double p)
{
	double below = 0, c = 1;

	for (unsigned i = 0; i <= m; i++) {
		below += c * pow(p, i) * pow(1 - p, n - i);
		c = c * (n - i) / (i + 1);
	}
	return 1 - below;
}

/* Exact for the values the controller sets (1.0, 8.0, 0). */
static bool
same(double a, double b)
{
	return fabs(a - b) < 1e-12;
}

static void
test_fail_rate(void **state)
{
	(void)state;
	assert_true(fabs(recovery_fail_rate(3, 0, 0.5) - 0.875) < 1e-12);
	assert_true(fabs(recovery_fail_rate(2, 1, 0.1) - 0.01) < 1e-12);
	assert_true(fabs(recovery_fail_rate(20, 2, 0.1) -
	    tail_direct(20, 2, 0.1)) < 1e-12);
	assert_true(fabs(recovery_fail_rate(40, 8, 0.2) -
	    tail_direct(40, 8, 0.2)) < 1e-12);
	/* A tail far below what 1 - P(X <= m) can show: C(34, 3) p^3 to
	 * first order. */
	assert_true(fabs(recovery_fail_rate(34, 2, 1e-3) / (5984 * 1e-9) -
	    1) < 0.05);
	assert_true(same(recovery_fail_rate(5, 5, 0.5), 0));
	assert_true(same(recovery_fail_rate(5, 1, 0), 0));
	assert_true(same(recovery_fail_rate(5, 1, 1), 1));
}

/* `ticks` ticks at `rate` datagrams each, `loss` of them lost, on a
 * path whose round trip is `rtt` ms (minimum 50). */
static void
feed(struct recovery_ctl *c, uint64_t *sent, uint64_t *lost, int ticks,
    uint64_t rate, double loss, double rtt)
{
	static double carry;

	for (int i = 0; i < ticks; i++) {
		double l = (double)rate * loss + carry;

		*sent += rate;
		*lost += (uint64_t)l;
		carry = l - floor(l);
		recovery_ctl_tick(c, *sent, *lost, rtt, 50);
	}
}

static void
test_no_loss_no_repairs(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	feed(&c, &s, &l, 50, 1000, 0, 50);
	for (unsigned k = 1; k <= 32; k++)
		assert_int_equal(recovery_ctl_repairs(&c, k), 0);
	assert_true(same(recovery_ctl_loss(&c), 0));
}

static void
test_steady_loss(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	/* 0.1%: one repair leaves 5e-4 of groups of 32 failing, two 6e-6. */
	recovery_ctl_init(&c);
	feed(&c, &s, &l, 60, 1000, 0.001, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 2);
	/* 1%: groups of 32 need 4 (3 leave 4e-4), groups of 16 need 3. */
	recovery_ctl_init(&c);
	s = l = 0;
	feed(&c, &s, &l, 60, 1000, 0.01, 50);
	assert_true(fabs(recovery_ctl_loss(&c) - 0.01) < 0.001);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 4);
	assert_int_equal(recovery_ctl_repairs(&c, 16), 3);
	/* A group closed early by time still gets one. */
	assert_int_equal(recovery_ctl_repairs(&c, 1), 1);
	assert_int_equal(recovery_ctl_repairs(&c, 3), 1);
	/* 2%: 5 of 32. */
	recovery_ctl_init(&c);
	s = l = 0;
	feed(&c, &s, &l, 60, 1000, 0.02, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 5);
	/* 10%: capped at a quarter of the group. */
	recovery_ctl_init(&c);
	s = l = 0;
	feed(&c, &s, &l, 60, 1000, 0.10, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 8);
	assert_int_equal(recovery_ctl_repairs(&c, 16), 4);
	assert_int_equal(recovery_ctl_repairs(&c, 8), 2);
}

static void
test_before_evidence(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	/* Nothing sent yet: the prior of 0.5% asks for 3 of 32. */
	assert_true(same(recovery_ctl_loss(&c), RECOVERY_PRIOR));
	assert_int_equal(recovery_ctl_repairs(&c, 32), 3);
	assert_int_equal(recovery_ctl_repairs(&c, 1), 1);
	/* 150 sent without a loss: still the prior. */
	feed(&c, &s, &l, 1, 150, 0, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 3);
	/* 4 lost of the first 190: 4 / 200 is more than the prior. */
	feed(&c, &s, &l, 1, 40, 0.1, 50);
	assert_true(same(recovery_ctl_loss(&c), 4.0 / RECOVERY_MIN_SAMPLES));
	/* Past 200 the connection's own figure rules. */
	recovery_ctl_init(&c);
	s = l = 0;
	feed(&c, &s, &l, 1, 250, 0, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 0);
}

static void
test_loss_ends(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	feed(&c, &s, &l, 60, 1000, 0.01, 50);
	/* A second without loss lowers the plan but does not end it. */
	feed(&c, &s, &l, 10, 1000, 0, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 3);
	/* 0.01 * 0.9^t falls under 1e-4 on the 44th tick. */
	feed(&c, &s, &l, 33, 1000, 0, 50);
	assert_true(recovery_ctl_repairs(&c, 32) > 0);
	feed(&c, &s, &l, 1, 1000, 0, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 0);
}

static void
test_congestive_loss(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	/* 1% with the round trip at 80 ms over a 50 ms minimum. */
	feed(&c, &s, &l, 60, 1000, 0.01, 80);
	assert_true(c.congested);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 2);
	assert_int_equal(recovery_ctl_repairs(&c, 8), 1);
	/* The queue drains: the full plan again. */
	feed(&c, &s, &l, 1, 1000, 0.01, 60);
	assert_false(c.congested);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 4);
}

static void
test_reports_boost(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	feed(&c, &s, &l, 60, 1000, 0.01, 50);
	recovery_ctl_report(&c, 1000, 10, 0, 0);
	assert_true(same(c.boost, 1.0));
	/* Losses in bursts: 5 of 2000 left unrepaired, over the target. */
	recovery_ctl_report(&c, 2990, 15, 5, 0);
	assert_true(fabs(c.boost - 1.5) < 1e-12);
	assert_true(fabs(recovery_ctl_loss(&c) - 0.015) < 0.0015);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 5);
	recovery_ctl_report(&c, 4980, 20, 10, 0);
	assert_true(fabs(c.boost - 2.25) < 1e-12);
	/* Too few to judge: no change, and the next report covers them. */
	recovery_ctl_report(&c, 5000, 20, 10, 0);
	assert_true(fabs(c.boost - 2.25) < 1e-12);
	/* Clean reports bring it back down, not below 1. */
	for (int i = 1; i <= 40; i++)
		recovery_ctl_report(&c, 5000 + (uint64_t)i * 1000, 20, 10, 0);
	assert_true(same(c.boost, 1.0));
	/* Bounded however long groups fail. */
	for (int i = 1; i <= 40; i++)
		recovery_ctl_report(&c, 50000 + (uint64_t)i * 1000, 20,
		    10 + (uint64_t)i * 10, 0);
	assert_true(same(c.boost, 8.0));
	/* A peer that started over resets the baseline, not the boost. */
	recovery_ctl_report(&c, 10, 0, 0, 0);
	assert_true(same(c.boost, 8.0));
	assert_int_equal(c.rep_received, 10);
}

/* Failures in runs (a queue that overflows: each failed group lost far
 * more than its repairs) are not what more repairs fix: no boost, and the
 * repairs are cut as for congestion, until reports show failures of the
 * random kind again. */
static void
test_reports_overrun(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	feed(&c, &s, &l, 60, 1000, 0.01, 50);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 4);
	/* 40 unrepaired, all in overwhelmed groups. */
	recovery_ctl_report(&c, 2000, 10, 40, 40);
	assert_true(same(c.boost, 1.0));
	assert_true(c.overrun);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 2);
	/* Mostly runs, a few of the random kind (over the target): raised,
	 * and still cut. */
	recovery_ctl_report(&c, 4000, 20, 60, 55);
	assert_true(fabs(c.boost - 1.5) < 1e-12);
	assert_true(c.overrun);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 2);
	/* Random failures dominate again: the cut ends. */
	recovery_ctl_report(&c, 6000, 30, 70, 57);
	assert_false(c.overrun);
	assert_true(fabs(c.boost - 2.25) < 1e-12);
	assert_int_equal(recovery_ctl_repairs(&c, 32), 6);
	/* A clean report: no cut, the boost decays. */
	recovery_ctl_report(&c, 8000, 40, 70, 57);
	assert_false(c.overrun);
	/* An older peer (no overwhelmed field: 0) is taken as before. */
	recovery_ctl_report(&c, 10000, 40, 80, 57);
	assert_false(c.overrun);
	/* overwhelmed above unrepaired is nonsense: a fresh baseline. */
	recovery_ctl_report(&c, 12000, 40, 80, 900);
	assert_int_equal(c.rep_overwhelmed, 0);
}

static void
test_counters_restart(void **state)
{
	struct recovery_ctl c;
	uint64_t s = 0, l = 0;

	(void)state;
	recovery_ctl_init(&c);
	feed(&c, &s, &l, 60, 1000, 0.01, 50);
	/* A new connection: its counters start from zero again. */
	s = l = 0;
	feed(&c, &s, &l, 5, 1000, 0.01, 50);
	assert_true(fabs(recovery_ctl_loss(&c) - 0.01) < 0.001);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fail_rate),
		cmocka_unit_test(test_no_loss_no_repairs),
		cmocka_unit_test(test_steady_loss),
		cmocka_unit_test(test_before_evidence),
		cmocka_unit_test(test_loss_ends),
		cmocka_unit_test(test_congestive_loss),
		cmocka_unit_test(test_reports_boost),
		cmocka_unit_test(test_reports_overrun),
		cmocka_unit_test(test_counters_restart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

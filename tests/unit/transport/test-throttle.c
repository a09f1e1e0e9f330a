/* Unit tests for common/transport/throttle.c: the policer verdicts after
 * given loss and round-trip histories, in both directions; the rate
 * probe's offer, pacing and verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transport/throttle.h"

/* Feed `ticks` ticks of `per_tick` packets sent and `lost_per_tick` lost
 * at the given round trip, from *now and the cumulative *sent / *lost;
 * returns the 1-based tick of the first true verdict, or 0. */
static unsigned
feed(struct throttle_watch *t, uint64_t *now, uint64_t *sent, uint64_t *lost,
    unsigned ticks, uint64_t per_tick, uint64_t lost_per_tick, double rtt,
    double min_rtt)
{
	unsigned first = 0;

	for (unsigned i = 1; i <= ticks; i++) {
		*now += THROTTLE_TICK_MS;
		*sent += per_tick;
		*lost += lost_per_tick;
		if (throttle_tick(t, *now, *sent, *lost, *sent * 1000, rtt,
		    min_rtt) && first == 0)
			first = i;
	}
	return first;
}

static void
test_clean_path(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	assert_int_equal(feed(&t, &now, &sent, &lost, 100, 500, 0, 1.0, 0.5), 0);
	/* 2% random loss on a 50 ms path: not a policer. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 100, 500, 10, 51, 50), 0);
	assert_true(t.loss > 0.0199 && t.loss < 0.0201);
}

static void
test_policer(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	/* 40% lost at a steady round trip: the window fills at tick 9, and
	 * the fourth policed tick in a row (12) is the verdict. */
	assert_int_equal(t.n, 0);
	assert_int_equal(throttle_rate_bps(&t), 0);
	assert_int_equal(feed(&t, &now, &sent, &lost, 20, 50, 20, 0.4, 0.1), 12);
	assert_false(t.peer_worse);
	/* 50 packets of "1000 bytes" a 250 ms tick: 1.6 Mbit/s. */
	assert_int_equal(throttle_rate_bps(&t), 1600000);
	/* The streak starts over after a verdict: the next one 4 ticks on. */
	assert_int_equal(t.streak, 0);
	assert_int_equal(feed(&t, &now, &sent, &lost, 4, 50, 20, 0.4, 0.1), 4);
}

static void
test_queue_is_not_policer(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	/* The same loss with the round trip up by a filling queue
	 * (50 ms path, 120 ms smoothed): congestion, not a policer. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 40, 50, 20, 120, 50), 0);
	/* At 84 ms (under 50 * 1.5 + 10) it is steady enough. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 4, 50, 20, 84, 50), 4);
}

static void
test_too_few_packets(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	/* 12 a tick: 96 in the window, under THROTTLE_MIN_PKTS. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 40, 12, 6, 1, 1), 0);
	/* 13 a tick: the window reaches 100 at the fourth tick (12 * 4 +
	 * 13 * 4), the verdict three ticks of loss later. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 40, 13, 6, 1, 1), 7);
}

static void
test_burst(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	assert_int_equal(feed(&t, &now, &sent, &lost, 9, 100, 0, 1, 1), 0);
	/* One burst of loss (a 300 ms outage) lifts the window's share over
	 * the line for 8 ticks, but it is one tick of loss. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 1, 100, 150, 1, 1), 0);
	assert_true(t.loss >= THROTTLE_LOSS);
	assert_int_equal(t.streak, 1);
	assert_int_equal(feed(&t, &now, &sent, &lost, 7, 100, 0, 1, 1), 0);
	assert_true(t.loss >= THROTTLE_LOSS);
	assert_int_equal(t.streak, 1);
	assert_int_equal(feed(&t, &now, &sent, &lost, 1, 100, 0, 1, 1), 0);
	assert_true(t.loss < THROTTLE_LOSS);
	assert_int_equal(t.streak, 0);
	/* Three bursts, then the window clears: still no verdict. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(feed(&t, &now, &sent, &lost, 1, 100, 60, 1, 1), 0);
	assert_int_equal(feed(&t, &now, &sent, &lost, 20, 100, 0, 1, 1), 0);
	assert_int_equal(t.streak, 0);
}

static void
test_peer_reports(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	/* We send little (ACKs of a download); the peer reports every
	 * 500 ms that it loses 30%: a verdict at the fourth report with
	 * fresh loss, the ticks between keeping the streak (the first
	 * report brings no loss of its own: there is none to compare). */
	throttle_peer_report(&t, 500, 1000, 100);
	now = 500;
	for (int i = 1; i <= 3; i++) {
		throttle_peer_report(&t, now, 1000 + 50 * (uint64_t)i,
		    100 + 15 * (uint64_t)i);
		assert_int_equal(feed(&t, &now, &sent, &lost, 2, 10, 0, 1, 1), 0);
		assert_int_equal(t.streak, i);
		assert_true(t.peer_worse);
		assert_true(t.loss > 0.2999 && t.loss < 0.3001);
	}
	throttle_peer_report(&t, now, 1200, 160);
	assert_int_equal(feed(&t, &now, &sent, &lost, 1, 10, 0, 1, 1), 1);
	/* No report since: it goes stale 2.5 s after the last. */
	assert_int_equal(feed(&t, &now, &sent, &lost, 9, 10, 0, 1, 1), 0);
	assert_true(t.peer_worse);
	assert_int_equal(feed(&t, &now, &sent, &lost, 1, 10, 0, 1, 1), 0);
	assert_false(t.peer_worse);
	/* Reports far apart (a quiet spell between) do not make a window. */
	now = 10000;
	throttle_peer_report(&t, now, 1300, 190);
	assert_int_equal(feed(&t, &now, &sent, &lost, 8, 10, 0, 1, 1), 0);
	assert_false(t.peer_worse);
	/* Too few packets between two reports two seconds apart (49 < 100). */
	throttle_peer_report(&t, now, 1349, 240);
	assert_int_equal(feed(&t, &now, &sent, &lost, 4, 10, 0, 1, 1), 0);
	assert_false(t.peer_worse);
}

static void
test_reports_together(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	/* Five reports (4 with fresh loss) held up on a lossy stream and
	 * read at once: one tick counts all four. */
	now = 1000;
	for (uint64_t i = 0; i < 5; i++)
		throttle_peer_report(&t, now, 1000 + 60 * i, 100 + 20 * i);
	assert_int_equal(t.peer_lossy, 4);
	assert_int_equal(feed(&t, &now, &sent, &lost, 1, 10, 0, 1, 1), 1);
	assert_int_equal(t.streak, 0);
	/* Not while the round trip shows a queue. */
	for (uint64_t i = 5; i < 10; i++)
		throttle_peer_report(&t, now, 1000 + 60 * i, 100 + 20 * i);
	assert_int_equal(feed(&t, &now, &sent, &lost, 1, 10, 0, 100, 1), 0);
	assert_int_equal(t.streak, 0);
}

static void
test_new_connection(void **state)
{
	struct throttle_watch t;
	uint64_t now = 0, sent = 0, lost = 0;

	(void)state;
	throttle_init(&t);
	assert_int_equal(feed(&t, &now, &sent, &lost, 11, 50, 20, 1, 1), 0);
	assert_int_equal(t.streak, 3);
	/* Counters that go back: a new connection, whose window starts
	 * empty. */
	sent = 0;
	lost = 0;
	assert_int_equal(feed(&t, &now, &sent, &lost, 8, 50, 20, 1, 1), 0);
	assert_int_equal(t.streak, 0);
	assert_int_equal(feed(&t, &now, &sent, &lost, 4, 50, 20, 1, 1), 4);
	/* A peer report that goes back starts the peer's pair over. */
	throttle_peer_report(&t, now, 500, 10);
	throttle_peer_report(&t, now, 100, 10);
	assert_int_equal(t.npeer, 1);
	/* Impossible: more lost than sent. */
	throttle_peer_report(&t, now, 100, 101);
	assert_int_equal(t.npeer, 1);
}

static void
test_probe_offer(void **state)
{
	(void)state;
	assert_int_equal(throttle_probe_offer(0), 4000000);
	assert_int_equal(throttle_probe_offer(1000000), 4000000);
	assert_int_equal(throttle_probe_offer(2000000), 4000000);
	assert_int_equal(throttle_probe_offer(10000000), 20000000);
	assert_int_equal(throttle_probe_offer(99999999), 199999998);
	assert_int_equal(throttle_probe_offer(100000000), 200000000);
	assert_int_equal(throttle_probe_offer(UINT64_MAX), 200000000);
}

static void
test_probe_pacing(void **state)
{
	struct throttle_probe p;

	(void)state;
	/* 100 ms: eight round trips of warm-up, two of tail but at least
	 * 300 ms. */
	throttle_probe_start(&p, 1000, 8000000, 100);
	assert_int_equal(p.measure_from_ms, 1800);
	assert_int_equal(p.measure_to_ms, 3800);
	assert_int_equal(p.end_ms, 4100);
	/* A LAN: the shortest warm-up; 400 ms: eight round trips; a
	 * satellite: the longest. The tail is two round trips there. */
	throttle_probe_start(&p, 0, 8000000, 0.4);
	assert_int_equal(p.measure_from_ms, 500);
	assert_int_equal(p.end_ms, 2800);
	throttle_probe_start(&p, 0, 8000000, 400);
	assert_int_equal(p.measure_from_ms, 3200);
	assert_int_equal(p.measure_to_ms, 5200);
	assert_int_equal(p.end_ms, 6000);
	throttle_probe_start(&p, 0, 8000000, 600);
	assert_int_equal(p.measure_from_ms, 4000);
	assert_int_equal(p.measure_to_ms, 6000);
	assert_int_equal(p.end_ms, 7200);

	/* 8 Mbit/s is 1,000 bytes a millisecond. */
	throttle_probe_start(&p, 1000, 8000000, 100);
	assert_int_equal(throttle_probe_due(&p, 999), 0);
	assert_int_equal(throttle_probe_due(&p, 1005), 5000);
	throttle_probe_sent(&p, 1005, 4800);
	assert_int_equal(throttle_probe_due(&p, 1005), 200);
	assert_int_equal(throttle_probe_due(&p, 1010), 5200);
	throttle_probe_sent(&p, 1010, 6000);
	assert_int_equal(throttle_probe_due(&p, 1010), 0);
	assert_int_equal(p.measured_sent, 0);
	/* Nothing is due once the measured span is over. */
	assert_int_equal(throttle_probe_due(&p, 3799), 2799000 - 10800);
	assert_int_equal(throttle_probe_due(&p, 3800), 0);
	assert_false(throttle_probe_over(&p, 4099));
	assert_true(throttle_probe_over(&p, 4100));
}

/* Send 1,200 bytes each 5 ms through the whole probe, and echo back
 * `back` of each `of`, from the warm-up on. */
static void
probe_run(struct throttle_probe *p, unsigned back, unsigned of)
{
	unsigned n = 0;

	throttle_probe_start(p, 0, 8000000, 50);
	for (uint64_t t = 0; t < p->measure_to_ms; t += 5) {
		throttle_probe_sent(p, t, 1200);
		if (n++ % of < back)
			throttle_probe_echo(p, t, 1200);
	}
}

static void
test_probe_share(void **state)
{
	struct throttle_probe p;

	(void)state;
	/* A policer: a quarter comes back. */
	probe_run(&p, 1, 4);
	assert_int_equal(p.measured_sent, 400 * 1200);
	assert_int_equal(p.measured_back, 100 * 1200);
	assert_false(throttle_probe_passed(&p));
	/* A clean path with some loss: four in five come back. */
	probe_run(&p, 4, 5);
	assert_int_equal(p.measured_back, 320 * 1200);
	assert_true(throttle_probe_share(&p) > 0.799 &&
	    throttle_probe_share(&p) < 0.801);
	assert_true(throttle_probe_passed(&p));
	/* Just three quarters pass; just under does not. */
	probe_run(&p, 3, 4);
	assert_true(throttle_probe_passed(&p));
	p.measured_back -= 1;
	assert_false(throttle_probe_passed(&p));

	/* Echoes of the warm-up's datagrams, or of stamps after the span,
	 * are not the verdict's; nor is more back than was sent. */
	throttle_probe_start(&p, 0, 8000000, 50);
	throttle_probe_sent(&p, 100, 1200);
	throttle_probe_echo(&p, 100, 1200);
	assert_int_equal(p.measured_back, 0);
	throttle_probe_sent(&p, 600, 1200);
	throttle_probe_echo(&p, 600, 1200);
	throttle_probe_echo(&p, 600, 1200);
	throttle_probe_echo(&p, 2600, 1200);
	assert_int_equal(p.measured_sent, 1200);
	assert_int_equal(p.measured_back, 1200);
	assert_true(throttle_probe_passed(&p));
	/* Nothing measured: no verdict for QUIC. */
	throttle_probe_start(&p, 0, 8000000, 50);
	assert_false(throttle_probe_passed(&p));
	assert_true(throttle_probe_share(&p) < 1e-9);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_path),
		cmocka_unit_test(test_policer),
		cmocka_unit_test(test_queue_is_not_policer),
		cmocka_unit_test(test_too_few_packets),
		cmocka_unit_test(test_burst),
		cmocka_unit_test(test_peer_reports),
		cmocka_unit_test(test_reports_together),
		cmocka_unit_test(test_new_connection),
		cmocka_unit_test(test_probe_offer),
		cmocka_unit_test(test_probe_pacing),
		cmocka_unit_test(test_probe_share),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

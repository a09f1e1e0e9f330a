/* The DATAGRAM queue's policy: bounded, head drop, age bound, counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "transport/dgramq.h"

static void
push_id(struct dgramq *q, uint8_t id, uint64_t now, size_t expect_dropped)
{
	uint8_t pkt[3] = { id, (uint8_t)~id, id };

	assert_int_equal(dgramq_push(q, pkt, sizeof pkt, now), expect_dropped);
}

static uint8_t
pop_id(struct dgramq *q)
{
	const struct dgramq_item *it = dgramq_peek(q);
	uint8_t id;

	assert_non_null(it);
	assert_int_equal(it->len, 3);
	id = it->data[0];
	assert_int_equal(it->data[1], (uint8_t)~id);
	assert_int_equal(it->data[2], id);
	dgramq_pop(q);
	return id;
}

static void
test_fifo(void **state)
{
	struct dgramq q;

	(void)state;
	dgramq_init(&q, 4, 64);
	assert_null(dgramq_peek(&q));
	for (uint8_t i = 0; i < 3; i++)
		push_id(&q, i, 100, 0);
	assert_int_equal(dgramq_len(&q), 3);
	assert_int_equal(pop_id(&q), 0);
	push_id(&q, 3, 100, 0);
	push_id(&q, 4, 100, 0);
	assert_int_equal(pop_id(&q), 1);
	assert_int_equal(pop_id(&q), 2);
	assert_int_equal(pop_id(&q), 3);
	assert_int_equal(pop_id(&q), 4);
	assert_int_equal(dgramq_len(&q), 0);
	dgramq_pop(&q); /* empty: nothing happens */
	assert_int_equal(q.dropped_full + q.dropped_stale, 0);
	dgramq_clear(&q);
}

/* A full queue never refuses: the oldest goes, and is counted. */
static void
test_full_drops_oldest(void **state)
{
	struct dgramq q;

	(void)state;
	dgramq_init(&q, 3, 64);
	for (uint8_t i = 0; i < 3; i++)
		push_id(&q, i, 100, 0);
	for (uint8_t i = 3; i < 10; i++)
		push_id(&q, i, 100, 1);
	assert_int_equal(dgramq_len(&q), 3);
	assert_int_equal(q.dropped_full, 7);
	assert_int_equal(q.dropped_stale, 0);
	assert_int_equal(pop_id(&q), 7);
	assert_int_equal(pop_id(&q), 8);
	assert_int_equal(pop_id(&q), 9);
	dgramq_clear(&q);
}

static void
test_expire(void **state)
{
	struct dgramq q;

	(void)state;
	dgramq_init(&q, 8, 64);
	push_id(&q, 0, 1000, 0);
	push_id(&q, 1, 2000, 0);
	push_id(&q, 2, 3000, 0);
	/* Exactly max_age old stays; older goes. */
	assert_int_equal(dgramq_expire(&q, 2500, 1500), 0);
	assert_int_equal(dgramq_expire(&q, 2501, 1500), 1);
	assert_int_equal(dgramq_len(&q), 2);
	assert_int_equal(dgramq_expire(&q, 10000, 1500), 2);
	assert_int_equal(dgramq_len(&q), 0);
	assert_int_equal(q.dropped_stale, 3);
	assert_int_equal(q.dropped_full, 0);
	assert_int_equal(dgramq_expire(&q, 20000, 0), 0);
	dgramq_clear(&q);
}

/* A clock that seems to go back (a virtual one, say) drops nothing. */
static void
test_expire_clock_behind(void **state)
{
	struct dgramq q;

	(void)state;
	dgramq_init(&q, 2, 64);
	push_id(&q, 5, 5000, 0);
	assert_int_equal(dgramq_expire(&q, 1000, 0), 0);
	assert_int_equal(pop_id(&q), 5);
	dgramq_clear(&q);
}

/* Drops spare small packets: the oldest large one goes instead, and the
 * order of the rest stays. */
static void
test_drop_spares_small(void **state)
{
	static uint8_t big[1200];
	struct dgramq q;
	const struct dgramq_item *it;

	(void)state;
	dgramq_init(&q, 5, sizeof big);
	push_id(&q, 1, 10, 0);
	push_id(&q, 2, 10, 0);
	big[0] = 3;
	assert_int_equal(dgramq_push(&q, big, sizeof big, 10), 0);
	push_id(&q, 4, 10, 0);
	big[0] = 5;
	assert_int_equal(dgramq_push(&q, big, sizeof big, 10), 0);
	/* Full: the large packet 3 goes, not the small 1. */
	push_id(&q, 6, 10, 1);
	assert_int_equal(q.dropped_full, 1);
	assert_int_equal(pop_id(&q), 1);
	assert_int_equal(pop_id(&q), 2);
	assert_int_equal(pop_id(&q), 4);
	it = dgramq_peek(&q);
	assert_int_equal(it->len, sizeof big);
	assert_int_equal(it->data[0], 5);
	dgramq_pop(&q);
	assert_int_equal(pop_id(&q), 6);
	assert_int_equal(dgramq_len(&q), 0);
	/* Nothing but small ones: the oldest goes. */
	for (uint8_t i = 0; i < 5; i++)
		push_id(&q, i, 20, 0);
	push_id(&q, 9, 20, 1);
	assert_int_equal(pop_id(&q), 1);
	dgramq_clear(&q);
}

/* CoDel: a queue whose head has waited longer than the target (a tenth
 * of the interval) for a whole interval loses one packet, then one more
 * each interval / sqrt(drops); a short queue or a short delay loses
 * nothing. */
static void
test_codel(void **state)
{
	const uint64_t iv = 1000, t0 = 100000;
	struct dgramq q;
	uint8_t id = 0;

	(void)state;
	dgramq_init(&q, 64, 64);
	/* Fresh packets: below target, nothing happens. */
	for (; id < 10; id++)
		push_id(&q, id, t0, 0);
	assert_int_equal(dgramq_codel(&q, t0 + 50, iv), 0);
	/* Above target (100) for the first time: the clock starts. */
	assert_int_equal(dgramq_codel(&q, t0 + 200, iv), 0);
	assert_int_equal(q.first_above, t0 + 200 + iv);
	/* Still above, but not for a whole interval yet. */
	assert_int_equal(dgramq_codel(&q, t0 + 1199, iv), 0);
	/* A whole interval above target: the oldest goes, and only it. */
	assert_int_equal(dgramq_codel(&q, t0 + 1200, iv), 1);
	assert_true(q.dropping);
	assert_int_equal(q.drop_next, t0 + 1200 + iv);
	assert_int_equal(dgramq_codel(&q, t0 + 1500, iv), 0);
	/* The next one interval / sqrt(1) later, then / sqrt(2). */
	assert_int_equal(dgramq_codel(&q, t0 + 2200, iv), 1);
	assert_int_equal(q.drop_next, t0 + 2200 + 707);
	assert_int_equal(dgramq_codel(&q, t0 + 2906, iv), 0);
	assert_int_equal(dgramq_codel(&q, t0 + 2907, iv), 1);
	assert_int_equal(q.dropped_stale, 3);
	assert_int_equal(pop_id(&q), 3);
	/* Fresh packets at the head: the delay is below target again, and
	 * dropping stops. */
	while (dgramq_len(&q) > 0)
		dgramq_pop(&q);
	push_id(&q, 50, t0 + 3000, 0);
	push_id(&q, 51, t0 + 3000, 0);
	assert_int_equal(dgramq_codel(&q, t0 + 3050, iv), 0);
	assert_false(q.dropping);
	assert_int_equal(q.first_above, 0);
	/* A single packet, however old, is no standing queue. */
	dgramq_pop(&q);
	assert_int_equal(dgramq_codel(&q, t0 + 90000, iv), 0);
	assert_int_equal(dgramq_codel(&q, t0 + 99000, iv), 0);
	assert_int_equal(dgramq_len(&q), 1);
	assert_int_equal(q.dropped_stale, 3);
	assert_int_equal(q.dropped_full, 0);
	dgramq_clear(&q);
}

/* Zero-length payloads are legal; a zero capacity means one. */
static void
test_edges(void **state)
{
	struct dgramq q;
	const struct dgramq_item *it;

	(void)state;
	dgramq_init(&q, 0, 64);
	assert_int_equal(dgramq_push(&q, NULL, 0, 1), 0);
	assert_int_equal(dgramq_push(&q, NULL, 0, 2), 1);
	it = dgramq_peek(&q);
	assert_non_null(it);
	assert_int_equal(it->len, 0);
	assert_int_equal(it->queued, 2);
	dgramq_clear(&q);
	dgramq_clear(&q); /* twice is harmless */
}

/* Slots are allocated as the queue first grows, then recycled: as many
 * as its deepest point, however many packets pass, and pops, drops from
 * a full queue, the age bound and CoDel all give theirs back. */
static void
test_slots_recycled(void **state)
{
	static uint8_t full[100];
	struct dgramq q;
	uint8_t id = 0;

	(void)state;
	dgramq_init(&q, 4, sizeof full);
	assert_int_equal(q.nslots, 0);
	/* One at a time, many times over: one slot. */
	for (int i = 0; i < 1000; i++, id++) {
		push_id(&q, id, 10, 0);
		assert_int_equal(pop_id(&q), id);
	}
	assert_int_equal(q.nslots, 1);
	assert_int_equal(q.nspare, 1);
	/* Three deep: three slots, the old one among them. */
	for (int i = 0; i < 3; i++)
		push_id(&q, (uint8_t)(id + i), 10, 0);
	assert_int_equal(q.nslots, 3);
	assert_int_equal(q.nspare, 0);
	/* Full, then pushed past it: never more slots than the capacity. */
	push_id(&q, (uint8_t)(id + 3), 10, 0);
	for (int i = 4; i < 50; i++)
		push_id(&q, (uint8_t)(id + i), 10, 1);
	assert_int_equal(q.nslots, 4);
	assert_int_equal(q.nspare, 0);
	assert_int_equal(q.dropped_full, 46);
	/* The age bound empties it into the spares. */
	assert_int_equal(dgramq_expire(&q, 1000, 10), 4);
	assert_int_equal(dgramq_len(&q), 0);
	assert_int_equal(q.nspare, 4);
	/* A recycled slot takes a payload of the full size, and a shorter
	 * one after it reads back only its own bytes. */
	memset(full, 0xab, sizeof full);
	assert_int_equal(dgramq_push(&q, full, sizeof full, 2000), 0);
	assert_int_equal(dgramq_peek(&q)->len, sizeof full);
	assert_memory_equal(dgramq_peek(&q)->data, full, sizeof full);
	dgramq_pop(&q);
	push_id(&q, 7, 2000, 0);
	assert_int_equal(pop_id(&q), 7);
	assert_int_equal(q.nslots, 4);
	assert_int_equal(q.nspare, 4);
	/* CoDel's drops give their slots back too. */
	for (int i = 0; i < 4; i++)
		push_id(&q, (uint8_t)i, 3000, 0);
	assert_int_equal(dgramq_codel(&q, 3500, 100), 0);
	assert_int_equal(dgramq_codel(&q, 3600, 100), 1);
	assert_int_equal(dgramq_len(&q), 3);
	assert_int_equal(q.nspare + dgramq_len(&q), 4);
	assert_int_equal(q.nslots, 4);
	/* Clearing with packets still queued frees every slot (ASan's leak
	 * check holds it to that). */
	dgramq_clear(&q);
	assert_int_equal(q.nslots, 0);
}

/* The ring grows with the queue: nothing before the first packet, then
 * doubling from DGRAMQ_RING_MIN up to the capacity, never beyond; each
 * growth keeps the packets in order, also when the ring has wrapped
 * round, and a full queue at its capacity still drops the oldest. */
static void
test_ring_grows(void **state)
{
	struct dgramq q;
	uint8_t next_in = 0, next_out = 0;

	(void)state;
	dgramq_init(&q, 20, 64);
	assert_null(q.ring);
	assert_int_equal(q.ringcap, 0);
	assert_null(dgramq_peek(&q));
	dgramq_pop(&q);
	assert_int_equal(dgramq_expire(&q, 100, 1), 0);
	assert_int_equal(dgramq_codel(&q, 100, 10), 0);
	assert_null(q.ring);
	push_id(&q, next_in++, 1, 0);
	assert_int_equal(q.ringcap, DGRAMQ_RING_MIN);
	/* Wrap the head round the small ring before it grows. */
	for (int i = 0; i < 5; i++) {
		push_id(&q, next_in++, 1, 0);
		assert_int_equal(pop_id(&q), next_out++);
	}
	while (dgramq_len(&q) < DGRAMQ_RING_MIN)
		push_id(&q, next_in++, 1, 0);
	assert_int_equal(q.ringcap, DGRAMQ_RING_MIN);
	push_id(&q, next_in++, 1, 0);
	assert_int_equal(q.ringcap, 2 * DGRAMQ_RING_MIN);
	while (dgramq_len(&q) < 20)
		push_id(&q, next_in++, 1, 0);
	assert_int_equal(q.ringcap, 20);
	/* Full: the oldest goes, the ring stays. */
	push_id(&q, next_in++, 1, 1);
	next_out++;
	assert_int_equal(q.ringcap, 20);
	assert_int_equal(q.nslots, 20);
	while (dgramq_len(&q) > 0)
		assert_int_equal(pop_id(&q), next_out++);
	assert_int_equal(next_out, next_in);
	assert_int_equal(q.nspare, 20);
	dgramq_clear(&q);
	assert_null(q.ring);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_full_drops_oldest),
		cmocka_unit_test(test_expire),
		cmocka_unit_test(test_expire_clock_behind),
		cmocka_unit_test(test_codel),
		cmocka_unit_test(test_drop_spares_small),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_slots_recycled),
		cmocka_unit_test(test_ring_grows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

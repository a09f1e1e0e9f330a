/* Unit tests for common/tunnel/spread.c: interleaved groups. Every burst
 * of up to SPREAD_DEPTH consecutive lost frames, at every position of the
 * frames a run of packets becomes, must be repaired with one repair per
 * group, which a single group cannot do; group ids must come in the order
 * groups open; the repairs' order must follow the rule spread.h states.
 * Seeded, no timing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/bytes.h"
#include "tunnel/fec.h"
#include "tunnel/spread.h"

#define MAX_FRAMES 512
#define PKT_MAX 1400

/* One run's frames as they would leave, in order. */
struct wire {
	size_t n;
	bool repair[MAX_FRAMES];
	uint32_t group[MAX_FRAMES];
	size_t len[MAX_FRAMES];
	uint8_t *frame[MAX_FRAMES];
	unsigned m;  /* repairs per group this run asks for */
};

static void
wire_clear(struct wire *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->frame[i]);
	w->n = 0;
}

static void
wire_put(struct wire *w, bool repair, const uint8_t *frame, size_t len)
{
	assert_true(w->n < MAX_FRAMES);
	w->repair[w->n] = repair;
	w->group[w->n] = be32_get(frame);
	w->len[w->n] = len;
	w->frame[w->n] = malloc(len);
	assert_non_null(w->frame[w->n]);
	memcpy(w->frame[w->n], frame, len);
	w->n++;
}

static void
emit(const uint8_t *frame, size_t len, void *arg)
{
	wire_put(arg, true, frame, len);
}

static unsigned
fixed_m(unsigned k, void *arg)
{
	const struct wire *w = arg;

	(void)k;
	return w->m;
}

/* Packet i: its number in the first two bytes, then a pattern; lengths
 * differ from packet to packet (so within a group too). */
static size_t
make_packet(unsigned i, uint8_t *p)
{
	size_t len = 40 + (i * 97) % (PKT_MAX - 40);

	be16_put(p, (uint16_t)i);
	for (size_t j = 2; j < len; j++)
		p[j] = (uint8_t)(i * 31 + j);
	return len;
}

/* n packets through a spread of groups of k, closed once at the end (or
 * whenever a group fills), m repairs per group. */
static void
encode_run(struct wire *w, unsigned k, unsigned n, unsigned m)
{
	struct spread *s = spread_create(k);
	struct spread_close_info ci;
	uint8_t pkt[PKT_MAX], out[FEC_ORIG_OVERHEAD + PKT_MAX];

	w->m = m;
	for (unsigned i = 0; i < n; i++) {
		size_t len = make_packet(i, pkt);
		ssize_t fl = spread_add(s, pkt, len, out, sizeof out);

		assert_true(fl > 0);
		wire_put(w, false, out, (size_t)fl);
		if (spread_full(s))
			spread_close(s, fixed_m, emit, w, &ci);
	}
	if (spread_count(s) > 0)
		spread_close(s, fixed_m, emit, w, &ci);
	assert_int_equal(spread_count(s), 0);
	spread_free(s);
}

struct got {
	unsigned n;
	unsigned count[MAX_FRAMES];
};

static void
check_packet(const uint8_t *p, size_t len, struct got *g)
{
	uint8_t want[PKT_MAX];
	unsigned i = be16_get(p);

	assert_true(i < MAX_FRAMES);
	assert_int_equal(len, make_packet(i, want));
	assert_memory_equal(p, want, len);
	g->count[i]++;
}

static void
deliver(const uint8_t *p, size_t len, void *arg)
{
	check_packet(p, len, arg);
}

/* Feed the frames but those in [from, from + burst) to a fresh decoder;
 * returns how many of the n packets arrived, each checked. */
static unsigned
decode_without(const struct wire *w, size_t from, size_t burst, unsigned n)
{
	struct fec_dec *d = fec_dec_create();
	struct got g;
	unsigned whole = 0;

	memset(&g, 0, sizeof g);
	for (size_t i = 0; i < w->n; i++) {
		const uint8_t *pkt;
		size_t len;

		if (i >= from && i < from + burst)
			continue;
		if (w->repair[i]) {
			assert_true(fec_dec_repair(d, w->frame[i], w->len[i],
			    deliver, &g) >= 0);
		} else {
			assert_int_equal(fec_dec_original(d, w->frame[i],
			    w->len[i], &pkt, &len, deliver, &g), 0);
			check_packet(pkt, len, &g);
		}
	}
	for (unsigned i = 0; i < n; i++) {
		assert_true(g.count[i] <= 1);
		whole += g.count[i];
	}
	fec_dec_free(d);
	return whole;
}

/* Every burst of up to `maxb` frames anywhere in n packets' frames (groups
 * of k, one repair per group): nothing lost. */
static void
assert_bursts_repaired(unsigned k, unsigned n, size_t maxb)
{
	struct wire w = { 0 };

	encode_run(&w, k, n, 1);
	for (size_t b = 1; b <= maxb; b++) {
		for (size_t from = 0; from + b <= w.n; from++) {
			if (decode_without(&w, from, b, n) != n)
				fail_msg("groups of %u, %u packets: a burst of %zu "
				    "frames from frame %zu lost packets", k, n, b, from);
		}
	}
	wire_clear(&w);
}

/* Groups close when the first of them is full, (k - 1) * SPREAD_DEPTH + 1
 * packets after they opened, every group in use: any burst of up to
 * SPREAD_DEPTH frames, anywhere across several closes, is repaired with
 * one repair per group. */
static void
test_every_burst_repaired(void **state)
{
	static const unsigned ks[] = { 2, 5, 8, 32 };

	(void)state;
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		unsigned k = ks[ki], per = (k - 1) * SPREAD_DEPTH + 1;

		for (unsigned closes = 1; closes <= 3; closes++) {
			if (closes * (per + SPREAD_DEPTH) > MAX_FRAMES)
				break;
			assert_bursts_repaired(k, closes * per, SPREAD_DEPTH);
		}
	}
}

/* Fewer packets than groups before a close (a slow flow closing by
 * time): u groups of one, and any burst of up to u frames is repaired,
 * the close before it included. */
static void
test_short_close(void **state)
{
	(void)state;
	for (unsigned u = 1; u < SPREAD_DEPTH; u++) {
		assert_bursts_repaired(8, u, u);
		assert_bursts_repaired(8, 7 * SPREAD_DEPTH + 1 + u, u);
	}
}

/* The same bursts defeat one group with one repair: the last original
 * and the repair right after it go together. This is what spread.c is
 * for. */
static void
test_single_group_loses_to_a_burst(void **state)
{
	struct fec_enc *e = fec_enc_create();
	struct wire w = { 0 };
	uint8_t pkt[PKT_MAX], out[FEC_ORIG_OVERHEAD + PKT_MAX];
	const unsigned n = 4;

	(void)state;
	for (unsigned i = 0; i < n; i++) {
		size_t len = make_packet(i, pkt);
		ssize_t fl = fec_enc_add(e, pkt, len, out, sizeof out);

		assert_true(fl > 0);
		wire_put(&w, false, out, (size_t)fl);
	}
	assert_int_equal(fec_enc_close(e, 1, emit, &w), 1);
	assert_int_equal(w.n, n + 1);
	assert_int_equal(decode_without(&w, n - 1, 2, n), n - 1);
	wire_clear(&w);
	fec_enc_free(e);
}

/* Ids in the order groups open; repairs row by row, starting with the
 * slot the next original would go to. */
static void
test_ids_and_order(void **state)
{
	struct wire w = { 0 };
	const unsigned k = 8, n = 6, m = 2;

	(void)state;
	/* 6 packets in 4 slots: slots 0 and 1 hold two (groups 0 and 1),
	 * slots 2 and 3 one (groups 2 and 3); the next original would go to
	 * slot 2. */
	encode_run(&w, k, n, m);
	assert_int_equal(w.n, n + 4 * m);
	for (unsigned i = 0; i < n; i++) {
		assert_false(w.repair[i]);
		assert_int_equal(w.group[i], i % SPREAD_DEPTH);
	}
	{
		static const uint32_t want[] = { 2, 3, 0, 1, 2, 3, 0, 1 };

		for (unsigned i = 0; i < 4 * m; i++) {
			assert_true(w.repair[n + i]);
			assert_int_equal(w.group[n + i], want[i]);
			/* row (frame byte 7) */
			assert_int_equal(w.frame[n + i][6], i / 4);
		}
	}
	wire_clear(&w);
	/* A second close: new groups take the next ids, 4 onwards, in the
	 * order they open. */
	{
		struct spread *s = spread_create(k);
		struct spread_close_info ci;
		uint8_t pkt[PKT_MAX], out[FEC_ORIG_OVERHEAD + PKT_MAX];

		w.m = 1;
		for (unsigned round = 0; round < 2; round++) {
			for (unsigned i = 0; i < 3; i++) {
				size_t len = make_packet(i, pkt);
				ssize_t fl = spread_add(s, pkt, len, out, sizeof out);

				assert_true(fl > 0);
				wire_put(&w, false, out, (size_t)fl);
			}
			spread_close(s, fixed_m, emit, &w, &ci);
			assert_int_equal(ci.groups, 3);
			assert_int_equal(ci.repairs, 3);
			assert_int_equal(ci.k, 1);
			assert_int_equal(ci.m, 1);
		}
		/* originals: groups 0 1 2, repairs 0 1 2 (from slot 3,
		 * empty, round to 0); then slots 3 0 1 take groups 3 4 5 */
		static const uint32_t want[] = { 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5 };

		assert_int_equal(w.n, 12);
		for (unsigned i = 0; i < 12; i++)
			assert_int_equal(w.group[i], want[i]);
		spread_free(s);
		wire_clear(&w);
	}
}

/* A packet the encoder refuses costs no slot and no id. */
static void
test_refused_packet(void **state)
{
	struct spread *s = spread_create(4);
	uint8_t pkt[16] = { 0 }, out[8];

	(void)state;
	assert_int_equal(spread_add(s, pkt, sizeof pkt, out, sizeof out),
	    -EMSGSIZE);
	assert_int_equal(spread_count(s), 0);
	assert_false(spread_full(s));
	assert_int_equal(spread_repair_len(s), 0);
	spread_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_burst_repaired),
		cmocka_unit_test(test_short_close),
		cmocka_unit_test(test_single_group_loses_to_a_burst),
		cmocka_unit_test(test_ids_and_order),
		cmocka_unit_test(test_refused_packet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

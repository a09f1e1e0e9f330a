/* Unit tests for common/tunnel/fec.c: the wire format, round trips over
 * every group size and redundancy with losses and reordering, the
 * decoder's window (duplicates, late frames, the wrap of group ids,
 * groups that never complete) and malformed frames. Seeded, no timing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <isa-l/erasure_code.h>

#include "base/bytes.h"
#include "tunnel/fec.h"

#define ORIG_MAX (FEC_ORIG_OVERHEAD + FEC_MAX_PACKET)
#define REPAIR_MAX (FEC_REPAIR_OVERHEAD + FEC_MAX_SYMBOL)

/* splitmix64: a fixed seed gives the same patterns on every run. */
static uint64_t rng_state;

static uint64_t
rng(void)
{
	uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static unsigned
rnd(unsigned n)
{
	return (unsigned)(rng() % n);
}

/* One encoded group: its packets, their frames and its repairs. Each
 * packet starts with its index, so that a rebuilt one says which it is. */
static struct group {
	unsigned k, m;
	uint32_t id;
	uint8_t pkt[FEC_MAX_K][FEC_MAX_PACKET];
	size_t len[FEC_MAX_K];
	uint8_t orig[FEC_MAX_K][ORIG_MAX];
	size_t olen[FEC_MAX_K];
	uint8_t rep[FEC_MAX_M][REPAIR_MAX];
	size_t rlen[FEC_MAX_M];
	unsigned nrep;
} G;

static void
emit(const uint8_t *frame, size_t len, void *arg)
{
	struct group *g = arg;

	assert_true(g->nrep < FEC_MAX_M);
	assert_true(len <= REPAIR_MAX);
	memcpy(g->rep[g->nrep], frame, len);
	g->rlen[g->nrep++] = len;
}

/* Encode k packets of 1..maxlen bytes (the shortest and the longest
 * among them now and then) and close the group with m repairs. */
static void
make_group(struct fec_enc *e, unsigned k, unsigned m, size_t maxlen)
{
	size_t longest = 0;

	G.k = k;
	G.m = m;
	G.nrep = 0;
	G.id = fec_enc_group(e);
	for (unsigned i = 0; i < k; i++) {
		G.len[i] = 1 + rnd((unsigned)maxlen);
	}
	if (rnd(2))
		G.len[rnd(k)] = maxlen;
	if (rnd(2))
		G.len[rnd(k)] = 1;
	for (unsigned i = 0; i < k; i++) {
		G.pkt[i][0] = (uint8_t)i;
		for (size_t j = 1; j < G.len[i]; j++)
			G.pkt[i][j] = (uint8_t)rng();
		if (G.len[i] > longest)
			longest = G.len[i];
		assert_int_equal(fec_enc_add(e, G.pkt[i], G.len[i], G.orig[i],
		    sizeof G.orig[i]), FEC_ORIG_OVERHEAD + G.len[i]);
		G.olen[i] = FEC_ORIG_OVERHEAD + G.len[i];
	}
	assert_int_equal(fec_enc_count(e), k);
	assert_int_equal(fec_enc_repair_len(e),
	    FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD + longest);
	assert_int_equal(fec_enc_close(e, m, emit, &G), m);
	assert_int_equal(G.nrep, m);
	assert_int_equal(fec_enc_group(e), G.id + 1);
	assert_int_equal(fec_enc_count(e), 0);
	for (unsigned r = 0; r < m; r++)
		assert_int_equal(G.rlen[r], FEC_REPAIR_OVERHEAD +
		    FEC_SYMBOL_OVERHEAD + longest);
}

/* What arrived of the current group: originals given back at once, and
 * those rebuilt (each checked byte for byte against what was sent); an
 * original that arrives after it was rebuilt is a duplicate. */
struct rx {
	uint32_t direct, rebuilt;
	unsigned calls, dups;
};

static void
deliver(const uint8_t *pkt, size_t len, void *arg)
{
	struct rx *rx = arg;
	unsigned i;

	assert_true(len >= 1);
	i = pkt[0];
	assert_true(i < G.k);
	assert_int_equal(len, G.len[i]);
	assert_memory_equal(pkt, G.pkt[i], len);
	assert_false((rx->direct | rx->rebuilt) & UINT32_C(1) << i);
	rx->rebuilt |= UINT32_C(1) << i;
	rx->calls++;
}

/* Feed original i; expect it back at once. */
static void
feed_original(struct fec_dec *d, unsigned i, struct rx *rx)
{
	const uint8_t *pkt = NULL;
	size_t len = 0;

	assert_int_equal(fec_dec_original(d, G.orig[i], G.olen[i], &pkt, &len,
	    deliver, rx), 0);
	assert_ptr_equal(pkt, G.orig[i] + FEC_ORIG_OVERHEAD);
	assert_int_equal(len, G.len[i]);
	assert_memory_equal(pkt, G.pkt[i], len);
	assert_false((rx->direct | rx->rebuilt) & UINT32_C(1) << i);
	rx->direct |= UINT32_C(1) << i;
}

static unsigned
popcount(uint32_t x)
{
	return (unsigned)__builtin_popcount(x);
}

static void
shuffle(unsigned *a, unsigned n)
{
	unsigned j, t;

	for (unsigned i = n; i > 1; i--) {
		j = rnd(i);
		t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* Feed the group minus the originals in `lost` and the repairs in
 * `lost_rep`: the originals in random order, then the repairs, or
 * (`mixed`) all of them shuffled together. A model of the decoder says
 * when the group becomes decodable (a repair has told k, and k symbols
 * are there) and so which originals come back rebuilt and at which
 * frame: exactly the lost ones unless mixed, when an original still on
 * its way may be rebuilt first and then arrive as a duplicate. */
static void
feed_mode(struct fec_dec *d, uint32_t lost, uint32_t lost_rep, bool mixed,
    struct rx *rx)
{
	uint32_t all = G.k == 32 ? UINT32_MAX : (UINT32_C(1) << G.k) - 1;
	uint32_t have = 0, expect = 0;
	unsigned order[FEC_MAX_K + FEC_MAX_M], n = 0, no, t, nrep = 0, calls;
	const uint8_t *pkt;
	size_t len;
	bool known = false, done = false;
	int rv = 0;

	memset(rx, 0, sizeof *rx);
	for (unsigned i = 0; i < G.k; i++)
		if (!(lost & UINT32_C(1) << i))
			order[n++] = i;
	no = n;
	for (unsigned r = 0; r < G.nrep; r++)
		if (!(lost_rep & 1u << r))
			order[n++] = FEC_MAX_K + r;
	if (mixed) {
		shuffle(order, n);
	} else {
		shuffle(order, no);
		shuffle(order + no, n - no);
	}
	for (unsigned i = 0; i < n; i++) {
		calls = rx->calls;
		if (order[i] < FEC_MAX_K && (expect & UINT32_C(1) << order[i])) {
			pkt = NULL;
			t = order[i];
			assert_int_equal(fec_dec_original(d, G.orig[t], G.olen[t],
			    &pkt, &len, deliver, rx), 1);
			assert_null(pkt);
			rx->dups++;
			continue;
		}
		if (order[i] < FEC_MAX_K) {
			feed_original(d, order[i], rx);
			have |= UINT32_C(1) << order[i];
		} else {
			t = order[i] - FEC_MAX_K;
			rv = fec_dec_repair(d, G.rep[t], G.rlen[t], deliver, rx);
			known = true;
			nrep++;
		}
		if (known && !done && have != all &&
		    popcount(have) + nrep >= G.k) {
			expect = all & ~have;
			done = true;
			assert_int_equal(rx->calls - calls, popcount(expect));
			if (order[i] >= FEC_MAX_K)
				assert_int_equal(rv, popcount(expect));
		} else {
			assert_int_equal(rx->calls, calls);
			if (order[i] >= FEC_MAX_K)
				assert_int_equal(rv, 0);
		}
		if (known && have == all)
			done = true;
	}
	assert_int_equal(rx->rebuilt, expect);
}

static void
feed(struct fec_dec *d, uint32_t lost, uint32_t lost_rep, struct rx *rx)
{
	feed_mode(d, lost, lost_rep, false, rx);
}

/* A random set of `n` of the low `bits` bits. */
static uint32_t
random_set(unsigned bits, unsigned n)
{
	uint32_t set = 0;

	while (popcount(set) < n)
		set |= UINT32_C(1) << rnd(bits);
	return set;
}

static uint64_t expect_rebuilt, expect_dups;

/* One group with losses the repairs can make up for: every original
 * comes back once, equal to what was sent, the lost ones rebuilt (and,
 * when repairs overtake originals, those they overtook). */
static void
round_trip(struct fec_enc *e, struct fec_dec *d, unsigned k, unsigned m,
    size_t maxlen, uint32_t lost, bool mixed)
{
	unsigned spare = m - popcount(lost);
	uint32_t all = k == 32 ? UINT32_MAX : (UINT32_C(1) << k) - 1;
	uint32_t lost_rep = random_set(m, rnd(spare + 1));
	struct rx rx;

	make_group(e, k, m, maxlen);
	feed_mode(d, lost, lost_rep, mixed, &rx);
	assert_int_equal(rx.direct | rx.rebuilt, all);
	assert_int_equal(rx.direct & rx.rebuilt, 0);
	assert_int_equal(rx.rebuilt & lost, lost);
	if (!mixed)
		assert_int_equal(rx.rebuilt, lost);
	assert_int_equal(rx.dups, popcount(rx.rebuilt & ~lost));
	expect_rebuilt += popcount(rx.rebuilt);
	expect_dups += rx.dups;
	assert_int_equal(fec_dec_counters(d)->rebuilt, expect_rebuilt);
	assert_int_equal(fec_dec_counters(d)->duplicates, expect_dups);
}

static const size_t maxlens[] = { 1, 40, 1400, FEC_MAX_PACKET };

static void
assert_quiet(struct fec_dec *d)
{
	const struct fec_dec_counters *c = fec_dec_counters(d);

	assert_int_equal(c->unrepaired, 0);
	assert_int_equal(c->duplicates, expect_dups);
	assert_int_equal(c->malformed, 0);
	assert_int_equal(c->late, 0);
}

/* Every loss pattern of up to m originals for the small groups. */
static void
test_round_trip_exhaustive(void **state)
{
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	unsigned n = 0;

	(void)state;
	rng_state = 1;
	expect_rebuilt = expect_dups = 0;
	for (unsigned k = 1; k <= 6; k++)
		for (unsigned m = 1; m <= 3; m++)
			for (uint32_t lost = 0; lost < UINT32_C(1) << k; lost++) {
				if (popcount(lost) > m)
					continue;
				round_trip(e, d, k, m, maxlens[n % 4], lost,
				    false);
				round_trip(e, d, k, m, maxlens[n++ % 4], lost,
				    true);
			}
	/* Some repairs overtook originals that were only late. */
	assert_true(expect_dups > 0);
	assert_quiet(d);
	fec_enc_free(e);
	fec_dec_free(d);
}

/* Every k and m, random patterns of up to m losses. */
static void
test_round_trip_random(void **state)
{
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	unsigned n = 0;

	(void)state;
	rng_state = 2;
	expect_rebuilt = expect_dups = 0;
	for (unsigned k = 1; k <= FEC_MAX_K; k++)
		for (unsigned m = 1; m <= FEC_MAX_M; m++)
			for (unsigned t = 0; t < 4; t++) {
				unsigned nlost = rnd((m < k ? m : k) + 1);

				round_trip(e, d, k, m, maxlens[n++ % 4],
				    random_set(k, nlost), t % 2 == 1);
			}
	/* Some repairs overtook originals that were only late. */
	assert_true(expect_dups > 0);
	assert_quiet(d);
	fec_enc_free(e);
	fec_dec_free(d);
}

/* The repairs are the Cauchy code of the symbols: row r of a group of k
 * is the sum over j of symbol j times 1/((k + r) ^ j) in GF(2^8), checked
 * with ISA-L's own multiply and inverse, so the wire format does not hang
 * on how fec.c calls the library. */
static void
test_repair_bytes(void **state)
{
	static uint8_t sym[FEC_MAX_K][FEC_MAX_SYMBOL];
	struct fec_enc *e = fec_enc_create();
	size_t symlen;

	(void)state;
	rng_state = 3;
	for (unsigned k = 1; k <= FEC_MAX_K; k += 5) {
		make_group(e, k, FEC_MAX_M, 300);
		symlen = G.rlen[0] - FEC_REPAIR_OVERHEAD;
		for (unsigned j = 0; j < k; j++) {
			memset(sym[j], 0, symlen);
			be16_put(sym[j], (uint16_t)G.len[j]);
			memcpy(sym[j] + 2, G.pkt[j], G.len[j]);
		}
		for (unsigned r = 0; r < FEC_MAX_M; r++) {
			assert_int_equal(be32_get(G.rep[r]), G.id);
			assert_int_equal(G.rep[r][4], k);
			assert_int_equal(G.rep[r][5], FEC_MAX_M);
			assert_int_equal(G.rep[r][6], r);
			for (size_t b = 0; b < symlen; b++) {
				uint8_t want = 0;

				for (unsigned j = 0; j < k; j++)
					want ^= gf_mul(gf_inv(
					    (uint8_t)((k + r) ^ j)), sym[j][b]);
				assert_int_equal(G.rep[r][FEC_REPAIR_OVERHEAD + b],
				    want);
			}
		}
	}
	/* With one original the repair is its symbol. */
	make_group(e, 1, 1, 10);
	assert_int_equal(G.rlen[0], FEC_REPAIR_OVERHEAD + 2 + G.len[0]);
	assert_int_equal(be16_get(G.rep[0] + FEC_REPAIR_OVERHEAD), G.len[0]);
	assert_memory_equal(G.rep[0] + FEC_REPAIR_OVERHEAD + 2, G.pkt[0],
	    G.len[0]);
	fec_enc_free(e);
}

static void
test_encoder(void **state)
{
	struct fec_enc *e = fec_enc_create();
	uint8_t pkt[FEC_MAX_PACKET + 1], out[ORIG_MAX + 1];
	uint8_t buf[FEC_ORIG_OVERHEAD + 100];
	uint32_t g;

	(void)state;
	memset(pkt, 0xab, sizeof pkt);
	assert_int_equal(fec_enc_group(e), 0);
	assert_int_equal(fec_enc_repair_len(e), 0);
	/* Too long, or no room: sent unprotected by the caller. */
	assert_int_equal(fec_enc_add(e, pkt, FEC_MAX_PACKET + 1, out,
	    sizeof out), -EMSGSIZE);
	assert_int_equal(fec_enc_add(e, pkt, 100, out, 104), -EMSGSIZE);
	assert_int_equal(fec_enc_add(e, pkt, 0, out, sizeof out), -EINVAL);
	assert_int_equal(fec_enc_count(e), 0);
	/* The longest packet takes exactly its frame's room. */
	assert_int_equal(fec_enc_add(e, pkt, FEC_MAX_PACKET, out,
	    FEC_ORIG_OVERHEAD + FEC_MAX_PACKET), ORIG_MAX);
	assert_int_equal(fec_enc_repair_len(e), REPAIR_MAX);

	/* The frame: group, index, the packet. */
	assert_int_equal(fec_enc_add(e, (const uint8_t *)"hello", 5, out,
	    sizeof out), 10);
	assert_memory_equal(out, "\x00\x00\x00\x00\x01hello", 10);
	/* A packet already in place behind headroom is left there. */
	memcpy(buf + FEC_ORIG_OVERHEAD, "world", 5);
	assert_int_equal(fec_enc_add(e, buf + FEC_ORIG_OVERHEAD, 5, buf,
	    sizeof buf), 10);
	assert_memory_equal(buf, "\x00\x00\x00\x00\x02world", 10);

	/* Full at FEC_MAX_K. */
	for (unsigned i = 3; i < FEC_MAX_K; i++)
		assert_int_equal(fec_enc_add(e, pkt, 1, out, sizeof out), 6);
	assert_int_equal(fec_enc_add(e, pkt, 1, out, sizeof out), -ENOSPC);
	assert_int_equal(fec_enc_count(e), FEC_MAX_K);
	assert_int_equal(fec_enc_set_group(e, 7), -EBUSY);
	assert_int_equal(fec_enc_close(e, FEC_MAX_M + 1, emit, &G), -EINVAL);
	assert_int_equal(fec_enc_count(e), FEC_MAX_K);
	G.nrep = 0;
	assert_int_equal(fec_enc_close(e, 0, emit, &G), 0);
	assert_int_equal(G.nrep, 0);
	assert_int_equal(fec_enc_group(e), 1);
	assert_int_equal(fec_enc_count(e), 0);
	assert_int_equal(fec_enc_repair_len(e), 0);
	/* An empty group emits nothing and keeps its id. */
	assert_int_equal(fec_enc_close(e, 3, emit, &G), 0);
	assert_int_equal(G.nrep, 0);
	assert_int_equal(fec_enc_group(e), 1);

	/* A smaller k, and the frame of the next group. */
	assert_int_equal(fec_enc_set_k(e, 0), -EINVAL);
	assert_int_equal(fec_enc_set_k(e, FEC_MAX_K + 1), -EINVAL);
	assert_int_equal(fec_enc_set_k(e, 2), 0);
	assert_int_equal(fec_enc_add(e, pkt, 3, out, sizeof out), 8);
	assert_memory_equal(out, "\x00\x00\x00\x01\x00\xab\xab\xab", 8);
	assert_int_equal(fec_enc_add(e, pkt, 1, out, sizeof out), 6);
	assert_int_equal(fec_enc_add(e, pkt, 1, out, sizeof out), -ENOSPC);
	assert_int_equal(fec_enc_repair_len(e), 7 + 2 + 3);
	assert_int_equal(fec_enc_close(e, 2, emit, &G), 2);
	assert_int_equal(G.rlen[0], 12);
	assert_memory_equal(G.rep[1], "\x00\x00\x00\x01\x02\x02\x01", 7);
	assert_int_equal(fec_enc_group(e), 2);

	/* Ids wrap. */
	assert_int_equal(fec_enc_set_group(e, UINT32_MAX), 0);
	assert_int_equal(fec_enc_add(e, pkt, 1, out, sizeof out), 6);
	assert_int_equal(be32_get(out), UINT32_MAX);
	assert_int_equal(fec_enc_close(e, 0, NULL, NULL), 0);
	g = fec_enc_group(e);
	assert_int_equal(g, 0);
	fec_enc_free(e);
	fec_enc_free(NULL);
	fec_dec_free(NULL);
}

/* Push `n` whole groups (no loss) through, moving the window on. */
static void
push_groups(struct fec_enc *e, struct fec_dec *d, unsigned n)
{
	struct rx rx;

	for (unsigned i = 0; i < n; i++) {
		make_group(e, 2, 1, 50);
		feed(d, 0, 0, &rx);
		assert_int_equal(rx.rebuilt, 0);
	}
}

static void
test_too_many_lost(void **state)
{
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	struct rx rx;

	(void)state;
	rng_state = 4;
	make_group(e, 8, 2, 1000);
	feed(d, 0x25, 0, &rx);
	assert_int_equal(rx.rebuilt, 0);
	assert_int_equal(rx.direct, 0xda);
	assert_int_equal(c->rebuilt, 0);
	assert_int_equal(c->unrepaired, 0);
	/* Still in the window after FEC_DEC_WINDOW - 1 newer groups... */
	push_groups(e, d, FEC_DEC_WINDOW - 1);
	assert_int_equal(c->unrepaired, 0);
	/* ...and lost for good once it leaves. */
	push_groups(e, d, 1);
	assert_int_equal(c->unrepaired, 3);
	assert_int_equal(c->rebuilt, 0);
	assert_int_equal(c->late, 0);
	assert_int_equal(c->malformed, 0);
	fec_enc_free(e);
	fec_dec_free(d);
}

static void
test_duplicates(void **state)
{
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	const uint8_t *pkt = NULL;
	size_t len = 0;
	struct rx rx;

	(void)state;
	rng_state = 5;
	make_group(e, 4, 2, 500);
	memset(&rx, 0, sizeof rx);
	feed_original(d, 0, &rx);
	assert_int_equal(fec_dec_original(d, G.orig[0], G.olen[0], &pkt, &len,
	    deliver, &rx), 1);
	assert_null(pkt);
	assert_int_equal(c->duplicates, 1);
	assert_int_equal(fec_dec_repair(d, G.rep[1], G.rlen[1], deliver, &rx), 0);
	assert_int_equal(fec_dec_repair(d, G.rep[1], G.rlen[1], deliver, &rx), 0);
	assert_int_equal(c->duplicates, 2);
	/* Original 1, then the second repair: 2 and 3 are rebuilt. */
	feed_original(d, 1, &rx);
	assert_int_equal(rx.rebuilt, 0);
	assert_int_equal(fec_dec_repair(d, G.rep[0], G.rlen[0], deliver, &rx), 2);
	assert_int_equal(rx.rebuilt, 0xc);
	/* The originals themselves, late: not delivered twice. */
	assert_int_equal(fec_dec_original(d, G.orig[2], G.olen[2], &pkt, &len,
	    deliver, &rx), 1);
	assert_int_equal(fec_dec_original(d, G.orig[3], G.olen[3], &pkt, &len,
	    deliver, &rx), 1);
	assert_null(pkt);
	assert_int_equal(fec_dec_repair(d, G.rep[0], G.rlen[0], deliver, &rx), 0);
	assert_int_equal(c->duplicates, 5);
	assert_int_equal(c->rebuilt, 2);
	assert_int_equal(c->malformed, 0);
	assert_int_equal(c->late, 0);
	fec_enc_free(e);
	fec_dec_free(d);
}

/* The repair first: the original that completes k symbols rebuilds. */
static void
test_repair_first(void **state)
{
	static struct group older;
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	struct rx rx;

	(void)state;
	rng_state = 6;
	make_group(e, 4, 1, 1400);
	memset(&rx, 0, sizeof rx);
	assert_int_equal(fec_dec_repair(d, G.rep[0], G.rlen[0], deliver, &rx), 0);
	feed_original(d, 3, &rx);
	feed_original(d, 0, &rx);
	assert_int_equal(rx.rebuilt, 0);
	feed_original(d, 1, &rx);
	assert_int_equal(rx.rebuilt, 0x4);
	assert_int_equal(c->rebuilt, 1);

	/* Groups out of order within the window: both complete. */
	make_group(e, 3, 1, 100);
	older = G;
	make_group(e, 3, 2, 100);
	feed(d, 0x2, 0x1, &rx);
	assert_int_equal(rx.rebuilt, 0x2);
	G = older;
	feed(d, 0x1, 0, &rx);
	assert_int_equal(rx.rebuilt, 0x1);
	assert_int_equal(c->rebuilt, 3);
	assert_int_equal(c->late, 0);
	assert_int_equal(c->malformed, 0);
	assert_int_equal(c->duplicates, 0);
	fec_enc_free(e);
	fec_dec_free(d);
}

/* Frames of a group that left the window: an original is still
 * delivered, a repair is dropped; both count as late. */
static void
test_late(void **state)
{
	static struct group old;
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	struct rx rx;

	(void)state;
	rng_state = 7;
	make_group(e, 3, 1, 200);
	old = G;
	memset(&rx, 0, sizeof rx);
	feed_original(d, 0, &rx);
	push_groups(e, d, FEC_DEC_WINDOW);
	G = old;
	memset(&rx, 0, sizeof rx);
	assert_int_equal(fec_dec_repair(d, G.rep[0], G.rlen[0], deliver, &rx), 0);
	assert_int_equal(c->late, 1);
	feed_original(d, 1, &rx);
	feed_original(d, 2, &rx);
	/* No memory of it: even a repeat is delivered. */
	feed_original(d, 0, &rx);
	assert_int_equal(c->late, 4);
	assert_int_equal(rx.rebuilt, 0);
	/* Its repair never came, so nobody knew what was missing. */
	assert_int_equal(c->unrepaired, 0);
	assert_int_equal(c->rebuilt, 0);
	assert_int_equal(c->duplicates, 0);
	fec_enc_free(e);
	fec_dec_free(d);
}

/* Group ids run through 2^32 without the window noticing. */
static void
test_wrap(void **state)
{
	static struct group old;
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	struct rx rx;
	unsigned lost = 0;

	(void)state;
	rng_state = 8;
	assert_int_equal(fec_enc_set_group(e, UINT32_MAX - 5), 0);
	for (unsigned i = 0; i < 12; i++) {
		make_group(e, 5, 2, 700);
		if (i == 0)
			old = G;
		feed(d, UINT32_C(1) << (i % 5), 0, &rx);
		assert_int_equal(rx.rebuilt, UINT32_C(1) << (i % 5));
	}
	assert_int_equal(fec_enc_group(e), 6);
	assert_int_equal(c->rebuilt, 12);
	/* Ids 0..5 are newer than UINT32_MAX - 5: nothing was late, and
	 * the first group is still in the window. */
	assert_int_equal(c->late, 0);
	assert_int_equal(c->unrepaired, 0);
	G = old;
	memset(&rx, 0, sizeof rx);
	assert_int_equal(fec_dec_original(d, G.orig[0], G.olen[0],
	    &(const uint8_t *){ NULL }, &(size_t){ 0 }, deliver, &rx), 1);
	assert_int_equal(c->duplicates, 1);
	/* A group that loses too much, then the window moves past it. */
	make_group(e, 4, 1, 100);
	feed(d, 0x3, 0, &rx);
	lost += 2;
	push_groups(e, d, FEC_DEC_WINDOW);
	assert_int_equal(c->unrepaired, lost);
	/* Two frames lost, twice its one repair: not a run. */
	assert_int_equal(c->overwhelmed, 0);
	/* Now the first group is late. */
	G = old;
	memset(&rx, 0, sizeof rx);
	feed_original(d, 0, &rx);
	assert_int_equal(c->late, 1);
	fec_enc_free(e);
	fec_dec_free(d);
}

/* A thousand groups that never complete: memory stays within the bound
 * of the window, and each of their losses is counted once. */
static void
test_never_complete(void **state)
{
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	uint64_t unrepaired = 0, overwhelmed = 0;
	size_t mem = 0, top = 0;
	struct rx rx;
	unsigned k, m, nlost;

	(void)state;
	rng_state = 9;
	for (unsigned i = 0; i < 1000; i++) {
		k = 2 + rnd(FEC_MAX_K - 1);
		m = 1 + rnd(k - 1 < FEC_MAX_M ? k - 1 : FEC_MAX_M);
		nlost = m + 1 + rnd(k - m);
		make_group(e, k, m, 1000);
		/* Half the groups lose their repairs too, so that nothing
		 * says what they miss. */
		if (i % 2 == 0) {
			feed(d, random_set(k, nlost), 0, &rx);
			unrepaired += nlost;
			/* More than twice its repairs lost: a run. */
			if (nlost > 2 * m)
				overwhelmed += nlost;
		} else {
			feed(d, random_set(k, nlost), (1u << m) - 1, &rx);
		}
		assert_int_equal(rx.rebuilt, 0);
		mem = fec_dec_memory(d);
		if (mem > top)
			top = mem;
		/* Packets of at most 1000 bytes: buffers of 1024. */
		assert_true(mem <= FEC_DEC_WINDOW * (FEC_MAX_K + FEC_MAX_M) * 1024);
	}
	/* The pool stops growing once it holds a window's worth. */
	assert_true(top > 0);
	assert_true(top <= FEC_DEC_WINDOW * FEC_MAX_K * 1024);
	push_groups(e, d, FEC_DEC_WINDOW);
	assert_int_equal(fec_dec_memory(d), top);
	assert_int_equal(c->unrepaired, unrepaired);
	assert_true(overwhelmed > 0 && overwhelmed < unrepaired);
	assert_int_equal(c->overwhelmed, overwhelmed);
	assert_int_equal(c->rebuilt, 0);
	assert_int_equal(c->malformed, 0);
	assert_int_equal(c->late, 0);
	assert_int_equal(c->duplicates, 0);
	fec_enc_free(e);
	fec_dec_free(d);
}

static void
assert_bad_repair(struct fec_dec *d, const uint8_t *f, size_t n)
{
	uint64_t before = fec_dec_counters(d)->malformed;
	struct rx rx;

	memset(&rx, 0, sizeof rx);
	assert_int_equal(fec_dec_repair(d, f, n, deliver, &rx), -EINVAL);
	assert_int_equal(fec_dec_counters(d)->malformed, before + 1);
	assert_int_equal(rx.calls, 0);
}

static void
assert_bad_original(struct fec_dec *d, const uint8_t *f, size_t n)
{
	uint64_t before = fec_dec_counters(d)->malformed;
	const uint8_t *pkt = NULL;
	size_t len = 0;
	struct rx rx;

	memset(&rx, 0, sizeof rx);
	assert_int_equal(fec_dec_original(d, f, n, &pkt, &len, deliver, &rx),
	    -EINVAL);
	assert_null(pkt);
	assert_int_equal(fec_dec_counters(d)->malformed, before + 1);
	assert_int_equal(rx.calls, 0);
}

static void
test_malformed(void **state)
{
	static uint8_t f[REPAIR_MAX + 2];
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	const struct fec_dec_counters *c = fec_dec_counters(d);
	struct rx rx;
	uint64_t n;

	(void)state;
	rng_state = 10;
	memset(f, 0, sizeof f);
	/* Short frames, and nothing to code. */
	for (size_t len = 0; len <= FEC_ORIG_OVERHEAD; len++)
		assert_bad_original(d, f, len);
	for (size_t len = 0; len < FEC_REPAIR_OVERHEAD + 3; len++)
		assert_bad_repair(d, f, len);
	/* An original too long, or with an index no group has. */
	f[4] = 0;
	assert_bad_original(d, f, ORIG_MAX + 1);
	f[4] = FEC_MAX_K;
	assert_bad_original(d, f, 20);
	/* Repairs with k, m or row out of range, or too long. */
	memcpy(f, "\x00\x00\x00\x09\x00\x01\x00", 7);
	assert_bad_repair(d, f, 20);                      /* k = 0 */
	f[4] = FEC_MAX_K + 1;
	assert_bad_repair(d, f, 20);                      /* k = 33 */
	f[4] = 3;
	f[5] = 0;
	assert_bad_repair(d, f, 20);                      /* m = 0 */
	f[5] = FEC_MAX_M + 1;
	f[6] = 0;
	assert_bad_repair(d, f, 20);                      /* m = 9 */
	f[5] = 2;
	f[6] = 2;
	assert_bad_repair(d, f, 20);                      /* row = m */
	f[6] = 1;
	assert_bad_repair(d, f, REPAIR_MAX + 1);
	assert_int_equal(c->malformed,
	    (FEC_ORIG_OVERHEAD + 1) + (FEC_REPAIR_OVERHEAD + 3) + 2 + 6);
	/* None of them moved the window or left a trace. */
	assert_int_equal(fec_dec_memory(d), 0);
	n = c->malformed;

	/* Repairs that contradict the first of their group. */
	make_group(e, 4, 3, 300);
	memset(&rx, 0, sizeof rx);
	assert_int_equal(fec_dec_repair(d, G.rep[0], G.rlen[0], deliver, &rx), 0);
	memcpy(f, G.rep[1], G.rlen[1]);
	f[4] = 5;
	assert_bad_repair(d, f, G.rlen[1]);              /* another k */
	f[4] = 4;
	f[5] = 2;
	assert_bad_repair(d, f, G.rlen[1]);              /* another m */
	f[5] = 3;
	assert_bad_repair(d, f, G.rlen[1] + 1);          /* another length */
	assert_bad_repair(d, f, G.rlen[1] - 1);
	/* Originals beyond what the repair announced. */
	memcpy(f, G.orig[0], G.olen[0]);
	f[4] = 4;
	assert_bad_original(d, f, G.olen[0]);
	f[4] = 1;
	memset(f + FEC_ORIG_OVERHEAD, 0, G.rlen[0]);
	assert_bad_original(d, f, G.rlen[0] - 2);        /* too long */
	assert_int_equal(c->malformed, n + 6);
	/* The group itself is still fine. */
	feed_original(d, 0, &rx);
	feed_original(d, 2, &rx);
	assert_int_equal(fec_dec_repair(d, G.rep[2], G.rlen[2], deliver, &rx), 2);
	assert_int_equal(rx.rebuilt, 0xa);
	assert_int_equal(c->malformed, n + 6);
	n = c->malformed;

	/* A first repair that leaves no room for what arrived: k not above
	 * an index seen, a symbol shorter than an original's. */
	make_group(e, 4, 2, 300);
	memset(&rx, 0, sizeof rx);
	feed_original(d, 3, &rx);
	memcpy(f, G.rep[0], G.rlen[0]);
	f[4] = 3;
	assert_bad_repair(d, f, G.rlen[0]);
	f[4] = 4;
	assert_bad_repair(d, f, G.len[3] + FEC_REPAIR_OVERHEAD + 1);
	assert_int_equal(c->malformed, n + 2);
	feed_original(d, 0, &rx);
	feed_original(d, 1, &rx);
	assert_int_equal(fec_dec_repair(d, G.rep[1], G.rlen[1], deliver, &rx), 1);
	assert_int_equal(rx.rebuilt, 0x4);
	n = c->malformed;

	/* A rebuilt symbol whose length field is impossible: the repair of
	 * one original is its symbol, so its length is in plain sight. */
	for (unsigned t = 0; t < 2; t++) {
		make_group(e, 1, 1, 100);
		memcpy(f, G.rep[0], G.rlen[0]);
		be16_put(f + FEC_REPAIR_OVERHEAD,
		    t == 0 ? 0 : (uint16_t)(G.rlen[0] - FEC_REPAIR_OVERHEAD - 1));
		memset(&rx, 0, sizeof rx);
		assert_int_equal(fec_dec_repair(d, f, G.rlen[0], deliver, &rx), 0);
		assert_int_equal(rx.calls, 0);
		assert_int_equal(c->malformed, n + t + 1);
		/* Given up, not lost: the original itself is still taken. */
		feed_original(d, 0, &rx);
	}
	/* Given up groups are not counted as unrepaired either. */
	push_groups(e, d, FEC_DEC_WINDOW);
	assert_int_equal(c->unrepaired, 0);
	assert_int_equal(c->rebuilt, 3);
	assert_int_equal(c->duplicates, 0);
	assert_int_equal(c->late, 0);
	fec_enc_free(e);
	fec_dec_free(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encoder),
		cmocka_unit_test(test_repair_bytes),
		cmocka_unit_test(test_round_trip_exhaustive),
		cmocka_unit_test(test_round_trip_random),
		cmocka_unit_test(test_too_many_lost),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_repair_first),
		cmocka_unit_test(test_late),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_never_complete),
		cmocka_unit_test(test_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* libFuzzer harness for common/tunnel/fec.c: the parsers of protected
 * originals and repairs, and the decoder behind them. The first byte
 * picks one of two modes:
 *   even  a stream of frames for one decoder, each `kind u8 | len u16 |
 *         frame` (kind odd: an original, even: a repair), anything goes;
 *   odd   groups made by the real encoder, each described by
 *         `k u8 | m u8 | lost u32 | lost-repairs u8 | order u8 |
 *         lengths u16 * k`, fed with those losses in a shuffled order:
 *         whatever can be rebuilt must come back exactly as it was sent.
 * Both end in invariants: what is delivered is a sane packet, return
 * values agree with the deliveries, counters only grow and memory stays
 * within the decoder's bound. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/bytes.h"
#include "tunnel/fec.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define MEM_BOUND ((size_t)FEC_DEC_WINDOW * (FEC_MAX_K + FEC_MAX_M) * \
	FEC_MAX_SYMBOL)

/* What the current group sent, and what came back of it. */
static struct {
	unsigned k;
	uint8_t pkt[FEC_MAX_K][FEC_MAX_PACKET];
	size_t len[FEC_MAX_K];
	uint8_t orig[FEC_MAX_K][FEC_ORIG_OVERHEAD + FEC_MAX_PACKET];
	size_t olen[FEC_MAX_K];
	uint8_t rep[FEC_MAX_M][FEC_REPAIR_OVERHEAD + FEC_MAX_SYMBOL];
	size_t rlen[FEC_MAX_M];
	unsigned nrep;
	uint32_t got;
	unsigned calls;
	bool check; /* round-trip mode: deliveries must match `pkt` */
} g;

static void
emit(const uint8_t *frame, size_t len, void *arg)
{
	(void)arg;
	assert(g.nrep < FEC_MAX_M);
	assert(len <= sizeof g.rep[0]);
	memcpy(g.rep[g.nrep], frame, len);
	g.rlen[g.nrep++] = len;
}

static void
deliver(const uint8_t *pkt, size_t len, void *arg)
{
	unsigned i;

	(void)arg;
	assert(len >= 1 && len <= FEC_MAX_PACKET);
	g.calls++;
	if (!g.check)
		return;
	i = pkt[0];
	assert(i < g.k);
	assert(len == g.len[i]);
	assert(memcmp(pkt, g.pkt[i], len) == 0);
	assert(!(g.got & UINT32_C(1) << i));
	g.got |= UINT32_C(1) << i;
}

static void
check_counters(const struct fec_dec *d, struct fec_dec_counters *last)
{
	const struct fec_dec_counters *c = fec_dec_counters(d);

	assert(c->rebuilt >= last->rebuilt);
	assert(c->unrepaired >= last->unrepaired);
	assert(c->duplicates >= last->duplicates);
	assert(c->malformed >= last->malformed);
	assert(c->late >= last->late);
	*last = *c;
	assert(fec_dec_memory(d) <= MEM_BOUND);
}

/* Feed one frame of either kind; returns the decoder's answer. */
static int
feed(struct fec_dec *d, bool original, const uint8_t *f, size_t n)
{
	const struct fec_dec_counters *c = fec_dec_counters(d);
	uint64_t rebuilt = c->rebuilt;
	unsigned calls = g.calls;
	const uint8_t *pkt = NULL;
	size_t len = 0;
	int rv;

	if (original) {
		rv = fec_dec_original(d, f, n, &pkt, &len, deliver, NULL);
		assert(rv == 0 || rv == 1 || rv == -EINVAL);
		if (rv == 0) {
			assert(pkt == f + FEC_ORIG_OVERHEAD);
			assert(len == n - FEC_ORIG_OVERHEAD);
			assert(len >= 1 && len <= FEC_MAX_PACKET);
		} else {
			assert(pkt == NULL);
		}
	} else {
		rv = fec_dec_repair(d, f, n, deliver, NULL);
		assert(rv == -EINVAL || (rv >= 0 && rv <= FEC_MAX_M));
		if (rv > 0)
			assert(g.calls - calls == (unsigned)rv);
	}
	if (rv < 0)
		assert(g.calls == calls);
	assert(c->rebuilt - rebuilt == g.calls - calls);
	return rv;
}

static void
stream_mode(const uint8_t *data, size_t size)
{
	struct fec_dec *d = fec_dec_create();
	struct fec_dec_counters last = { 0 };
	size_t off = 0, n;
	bool original;

	g.check = false;
	while (size - off >= 3) {
		original = data[off] & 1;
		n = be16_get(data + off + 1);
		off += 3;
		if (n > size - off)
			n = size - off;
		(void)feed(d, original, data + off, n);
		off += n;
		check_counters(d, &last);
	}
	fec_dec_free(d);
}

/* A permutation of 0..n-1 from `seed`, for the order frames arrive in. */
static void
shuffle(unsigned *a, unsigned n, uint32_t seed)
{
	unsigned j, t;

	for (unsigned i = n; i > 1; i--) {
		seed = seed * 1103515245u + 12345u;
		j = (seed >> 8) % i;
		t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

static void
group_mode(const uint8_t *data, size_t size)
{
	struct fec_enc *e = fec_enc_create();
	struct fec_dec *d = fec_dec_create();
	struct fec_dec_counters last = { 0 };
	unsigned order[FEC_MAX_K + FEC_MAX_M], n, k, m, nlost, nrep;
	uint32_t lost, all, seed;
	uint8_t lost_rep;
	size_t off = 0;
	int rv;

	g.check = true;
	while (size - off >= 8) {
		k = 1 + data[off] % FEC_MAX_K;
		m = data[off + 1] % (FEC_MAX_M + 1);
		lost = be32_get(data + off + 2);
		lost_rep = data[off + 6];
		seed = data[off + 7];
		off += 8;
		if (size - off < 2 * (size_t)k)
			break;
		all = k == 32 ? UINT32_MAX : (UINT32_C(1) << k) - 1;
		lost &= all;
		g.k = k;
		for (unsigned i = 0; i < k; i++) {
			g.len[i] = 1 + be16_get(data + off) % FEC_MAX_PACKET;
			off += 2;
			g.pkt[i][0] = (uint8_t)i;
			for (size_t j = 1; j < g.len[i]; j++)
				g.pkt[i][j] = (uint8_t)(j * 7 + i + seed);
			rv = (int)fec_enc_add(e, g.pkt[i], g.len[i], g.orig[i],
			    sizeof g.orig[i]);
			assert(rv == (int)(FEC_ORIG_OVERHEAD + g.len[i]));
			g.olen[i] = (size_t)rv;
		}
		g.nrep = 0;
		assert(fec_enc_close(e, m, emit, NULL) == (int)m);
		assert(g.nrep == m);

		n = 0;
		for (unsigned i = 0; i < k; i++)
			if (!(lost & UINT32_C(1) << i))
				order[n++] = i;
		nrep = 0;
		for (unsigned r = 0; r < m; r++)
			if (!(lost_rep & 1u << r)) {
				order[n++] = FEC_MAX_K + r;
				nrep++;
			}
		shuffle(order, n, seed);
		g.got = 0;
		for (unsigned i = 0; i < n; i++) {
			unsigned t = order[i];

			if (t < FEC_MAX_K) {
				rv = feed(d, true, g.orig[t], g.olen[t]);
				/* Delivered now, unless a repair that
				 * overtook it rebuilt it already. */
				if (rv == 0) {
					assert(!(g.got & UINT32_C(1) << t));
					g.got |= UINT32_C(1) << t;
				} else {
					assert(rv == 1);
					assert(g.got & UINT32_C(1) << t);
				}
			} else {
				t -= FEC_MAX_K;
				rv = feed(d, false, g.rep[t], g.rlen[t]);
				assert(rv >= 0);
			}
			check_counters(d, &last);
		}
		/* Frames from our own encoder, in the window: never refused. */
		assert(last.malformed == 0);
		assert(last.late == 0);
		nlost = (unsigned)__builtin_popcount(lost);
		if (nrep > 0 && nlost <= nrep)
			assert(g.got == all);
		else
			assert(g.got == (all & ~lost));
	}
	fec_enc_free(e);
	fec_dec_free(d);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		group_mode(data + 1, size - 1);
	else
		stream_mode(data + 1, size - 1);
	return 0;
}

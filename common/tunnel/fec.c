/* The erasure code of the tunnel's loss recovery: groups of IP packets and
 * their Reed-Solomon repairs (fec.h has the wire format), the arithmetic
 * over GF(2^8) all ISA-L's. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "base/bytes.h"
#include "base/xmalloc.h"
#include "fec.h"

/* ISA-L expands each coefficient of a coding matrix into 32 bytes of
 * tables, row after row: the tables of the first m rows are the first
 * 32 * k * m bytes of the tables of more rows. */
#define GF_TBL 32

/* Buffers grow in steps, so a stream of packets a little longer than the
 * last does not realloc each time. */
#define GROW_STEP 512

/* Serial-number comparison of group ids (RFC 1982): how far `a` is ahead
 * of `b`, negative when behind, so that the window slides over the wrap
 * at 2^32. Written without converting an out-of-range unsigned. */
static int32_t
seq_diff(uint32_t a, uint32_t b)
{
	uint32_t d = a - b;

	if (d < UINT32_C(0x80000000))
		return (int32_t)d;
	return -(int32_t)(~d) - 1;
}

static size_t
grow_size(size_t need, size_t limit)
{
	size_t n = (need + GROW_STEP - 1) / GROW_STEP * GROW_STEP;

	return n < limit ? n : limit;
}

/* The coding matrix both sides use: k rows of identity (the originals
 * are sent as they are), then m rows of a Cauchy matrix, any k of the
 * k + m rows invertible. Row k + r of the matrix for m repairs is the
 * same for every m > r, so a repair's row does not depend on m. */
static void
coding_matrix(uint8_t *a, unsigned k, unsigned m)
{
	gf_gen_cauchy1_matrix(a, (int)(k + m), (int)k);
}

/* --- Sender */

struct fec_enc {
	uint32_t group;
	unsigned count; /* originals in the open group */
	unsigned kmax;  /* the group is full at this many */
	size_t maxlen;  /* the open group's longest packet */

	/* Original i's symbol: its length, the packet, and (at close) the
	 * zeros up to the group's symbol length. */
	uint8_t *sym[FEC_MAX_K];
	size_t symcap[FEC_MAX_K];
	/* Repair frames: the header, then the symbol ISA-L writes. */
	uint8_t *rep[FEC_MAX_M];
	size_t repcap[FEC_MAX_M];
	/* Encode tables for FEC_MAX_M repairs of k originals, made on first
	 * use of each k: fewer repairs use the first rows. */
	uint8_t *tbls[FEC_MAX_K + 1];
};

static void
enc_grow(uint8_t **p, size_t *cap, size_t need, size_t limit)
{
	if (*cap >= need)
		return;
	*cap = grow_size(need, limit);
	*p = xrealloc(*p, *cap);
}

struct fec_enc *
fec_enc_create(void)
{
	struct fec_enc *e = xcalloc(1, sizeof *e);

	e->kmax = FEC_MAX_K;
	return e;
}

void
fec_enc_free(struct fec_enc *e)
{
	if (e == NULL)
		return;
	for (unsigned i = 0; i < FEC_MAX_K; i++)
		free(e->sym[i]);
	for (unsigned r = 0; r < FEC_MAX_M; r++)
		free(e->rep[r]);
	for (unsigned k = 0; k <= FEC_MAX_K; k++)
		free(e->tbls[k]);
	free(e);
}

int
fec_enc_set_k(struct fec_enc *e, unsigned k)
{
	if (k < 1 || k > FEC_MAX_K)
		return -EINVAL;
	e->kmax = k;
	return 0;
}

int
fec_enc_set_group(struct fec_enc *e, uint32_t group)
{
	if (e->count > 0)
		return -EBUSY;
	e->group = group;
	return 0;
}

uint32_t
fec_enc_group(const struct fec_enc *e)
{
	return e->group;
}

ssize_t
fec_enc_add(struct fec_enc *e, const uint8_t *pkt, size_t len, uint8_t *out,
    size_t outlen)
{
	unsigned i = e->count;
	size_t longest;

	if (len > FEC_MAX_PACKET || outlen < FEC_ORIG_OVERHEAD + len)
		return -EMSGSIZE;
	/* A symbol of length 0 is what a broken rebuild looks like. */
	if (len == 0)
		return -EINVAL;
	if (i >= e->kmax)
		return -ENOSPC;

	/* Room for the group's symbol length as it stands, so that close
	 * pads in place and rarely grows anything. */
	longest = len > e->maxlen ? len : e->maxlen;
	enc_grow(&e->sym[i], &e->symcap[i], FEC_SYMBOL_OVERHEAD + longest,
	    FEC_MAX_SYMBOL);
	be16_put(e->sym[i], (uint16_t)len);
	memcpy(e->sym[i] + FEC_SYMBOL_OVERHEAD, pkt, len);

	be32_put(out, e->group);
	out[4] = (uint8_t)i;
	/* A caller with headroom has the packet in place already. */
	if (out + FEC_ORIG_OVERHEAD != pkt)
		memmove(out + FEC_ORIG_OVERHEAD, pkt, len);

	e->count++;
	e->maxlen = longest;
	return (ssize_t)(FEC_ORIG_OVERHEAD + len);
}

unsigned
fec_enc_count(const struct fec_enc *e)
{
	return e->count;
}

size_t
fec_enc_repair_len(const struct fec_enc *e)
{
	if (e->count == 0)
		return 0;
	return FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD + e->maxlen;
}

/* The encode tables for k originals, made once per encoder and k. */
static uint8_t *
enc_tables(struct fec_enc *e, unsigned k)
{
	uint8_t a[(FEC_MAX_K + FEC_MAX_M) * FEC_MAX_K];

	if (e->tbls[k] == NULL) {
		e->tbls[k] = xmalloc((size_t)GF_TBL * k * FEC_MAX_M);
		coding_matrix(a, k, FEC_MAX_M);
		ec_init_tables((int)k, FEC_MAX_M, a + k * k, e->tbls[k]);
	}
	return e->tbls[k];
}

int
fec_enc_close(struct fec_enc *e, unsigned m,
    void (*emit)(const uint8_t *, size_t, void *), void *arg)
{
	uint8_t *data[FEC_MAX_K], *coding[FEC_MAX_M];
	unsigned k = e->count;
	size_t symlen, n;

	if (m > FEC_MAX_M)
		return -EINVAL;
	if (k == 0)
		return 0;
	if (m == 0)
		goto next;

	symlen = FEC_SYMBOL_OVERHEAD + e->maxlen;
	for (unsigned i = 0; i < k; i++) {
		enc_grow(&e->sym[i], &e->symcap[i], symlen, FEC_MAX_SYMBOL);
		n = FEC_SYMBOL_OVERHEAD + be16_get(e->sym[i]);
		memset(e->sym[i] + n, 0, symlen - n);
		data[i] = e->sym[i];
	}
	for (unsigned r = 0; r < m; r++) {
		enc_grow(&e->rep[r], &e->repcap[r], FEC_REPAIR_OVERHEAD + symlen,
		    FEC_REPAIR_OVERHEAD + FEC_MAX_SYMBOL);
		be32_put(e->rep[r], e->group);
		e->rep[r][4] = (uint8_t)k;
		e->rep[r][5] = (uint8_t)m;
		e->rep[r][6] = (uint8_t)r;
		coding[r] = e->rep[r] + FEC_REPAIR_OVERHEAD;
	}
	ec_encode_data((int)symlen, (int)k, (int)m, enc_tables(e, k), data,
	    coding);
	for (unsigned r = 0; r < m; r++)
		emit(e->rep[r], FEC_REPAIR_OVERHEAD + symlen, arg);

next:
	e->group++;
	e->count = 0;
	e->maxlen = 0;
	return (int)m;
}

/* --- Receiver */

/* A symbol buffer; the decoder's pool hands them out and takes them back,
 * so that groups coming and going allocate nothing once it has grown. */
struct symbuf {
	size_t cap;
	uint8_t data[];
};

/* Group g lives in slot g % FEC_DEC_WINDOW, which stays one slot per
 * group across the wrap at 2^32 only if the window divides 2^32. */
_Static_assert((FEC_DEC_WINDOW & (FEC_DEC_WINDOW - 1)) == 0,
    "FEC_DEC_WINDOW must be a power of two");

#define SLOT_SYMS (FEC_MAX_K + FEC_MAX_M)
#define POOL_MAX (FEC_DEC_WINDOW * SLOT_SYMS)

/* One group of the window. Until a repair arrives nothing is known of it
 * but the originals seen; the first repair fixes k, m and the symbol
 * length, and later frames must agree with them. */
struct slot {
	bool used;
	bool done;        /* nothing more to rebuild: whole, or given up */
	uint32_t group;
	unsigned k, m;    /* 0 until a repair arrives */
	size_t symlen;
	unsigned maxidx;  /* 1 + the highest original index seen */
	size_t maxsym;    /* the longest original's symbol seen */
	uint32_t have;    /* originals delivered (arrived or rebuilt) */
	uint32_t nhave;
	uint8_t reps;     /* repair rows arrived */
	unsigned nreps;   /* of which held in sym[] */
	/* Originals' symbols at 0..FEC_MAX_K-1, repairs' after them; held
	 * only while the group may still need rebuilding. */
	struct symbuf *sym[SLOT_SYMS];
};

struct fec_dec {
	bool started;
	uint32_t newest;  /* the newest group seen */
	struct slot slot[FEC_DEC_WINDOW]; /* group g lives at g % WINDOW */
	struct symbuf *pool[POOL_MAX];
	unsigned npool;
	size_t bytes;     /* capacity of every symbuf, in use or pooled */
	struct fec_dec_counters c;
	/* Decode tables: at most FEC_MAX_M originals are missing when k
	 * symbols are there, since each missing one is made up by a repair. */
	uint8_t tbls[GF_TBL * FEC_MAX_K * FEC_MAX_M];
};

/* A buffer of at least `need` bytes: `b` grown (its bytes kept), or one
 * from the pool when b is NULL, or a new one when the pool is empty. */
static struct symbuf *
buf_get(struct fec_dec *d, struct symbuf *b, size_t need)
{
	size_t cap;

	if (b == NULL && d->npool > 0)
		b = d->pool[--d->npool];
	if (b != NULL && b->cap >= need)
		return b;
	cap = grow_size(need, FEC_MAX_SYMBOL);
	d->bytes += cap - (b != NULL ? b->cap : 0);
	b = xrealloc(b, sizeof *b + cap);
	b->cap = cap;
	return b;
}

/* Give back a group's buffers; the group keeps only what it knows. */
static void
slot_release(struct fec_dec *d, struct slot *s)
{
	for (unsigned i = 0; i < SLOT_SYMS; i++) {
		if (s->sym[i] == NULL)
			continue;
		/* Every buffer came through buf_get and there are at most
		 * POOL_MAX positions to hold one, so the pool has room. */
		d->pool[d->npool++] = s->sym[i];
		s->sym[i] = NULL;
	}
	s->nreps = 0;
}

static void
slot_done(struct fec_dec *d, struct slot *s)
{
	s->done = true;
	slot_release(d, s);
}

/* The group leaves the window: what a repair announced and nobody
 * delivered was lost for good. */
static void
slot_evict(struct fec_dec *d, struct slot *s)
{
	if (s->k > 0 && !s->done) {
		unsigned lost = s->k - s->nhave +
		    s->m - (unsigned)__builtin_popcount(s->reps);

		d->c.unrepaired += s->k - s->nhave;
		if (lost > 2 * s->m)
			d->c.overwhelmed += s->k - s->nhave;
	}
	slot_release(d, s);
	s->used = false;
}

/* The slot of group g, taken (and the window moved) if g is new; NULL
 * when g is older than the window. */
static struct slot *
slot_for(struct fec_dec *d, uint32_t g)
{
	struct slot *s;
	int32_t ahead;

	if (!d->started) {
		d->started = true;
		d->newest = g;
	}
	ahead = seq_diff(g, d->newest);
	if (ahead <= -FEC_DEC_WINDOW)
		return NULL;
	if (ahead > 0) {
		for (unsigned i = 0; i < FEC_DEC_WINDOW; i++) {
			s = &d->slot[i];
			if (s->used && g - s->group >= FEC_DEC_WINDOW)
				slot_evict(d, s);
		}
		d->newest = g;
	}
	s = &d->slot[g % FEC_DEC_WINDOW];
	if (!s->used) {
		/* Keeps no buffers: slot_evict gave them back. */
		memset(s, 0, sizeof *s);
		s->used = true;
		s->group = g;
	}
	return s;
}

struct fec_dec *
fec_dec_create(void)
{
	return xcalloc(1, sizeof(struct fec_dec));
}

void
fec_dec_free(struct fec_dec *d)
{
	if (d == NULL)
		return;
	for (unsigned i = 0; i < FEC_DEC_WINDOW; i++)
		slot_release(d, &d->slot[i]);
	for (unsigned i = 0; i < d->npool; i++)
		free(d->pool[i]);
	free(d);
}

/* Rebuild the missing originals of `s`, which holds k symbols, and
 * deliver them. The group is done afterwards either way. */
static int
rebuild(struct fec_dec *d, struct slot *s,
    void (*deliver)(const uint8_t *, size_t, void *), void *arg)
{
	uint8_t a[(FEC_MAX_K + FEC_MAX_M) * FEC_MAX_K];
	uint8_t b[FEC_MAX_K * FEC_MAX_K], inv[FEC_MAX_K * FEC_MAX_K];
	uint8_t rows[FEC_MAX_M * FEC_MAX_K];
	uint8_t *src[FEC_MAX_K], *out[FEC_MAX_M];
	unsigned lost[FEC_MAX_M];
	unsigned k = s->k, n = 0, nlost = 0, i, r;
	size_t len, symlen = s->symlen;
	int rebuilt = 0;

	coding_matrix(a, k, s->m);
	/* The symbols there are, each with its row of the coding matrix:
	 * originals first (zero-padded now that the length is known), then
	 * as many repairs as make up for the rest. */
	for (i = 0; i < k; i++) {
		if (s->sym[i] == NULL)
			continue;
		s->sym[i] = buf_get(d, s->sym[i], symlen);
		len = FEC_SYMBOL_OVERHEAD + be16_get(s->sym[i]->data);
		memset(s->sym[i]->data + len, 0, symlen - len);
		memcpy(b + n * k, a + i * k, k);
		src[n++] = s->sym[i]->data;
	}
	for (r = 0; r < s->m && n < k; r++) {
		if (s->sym[FEC_MAX_K + r] == NULL)
			continue;
		memcpy(b + n * k, a + (k + r) * k, k);
		src[n++] = s->sym[FEC_MAX_K + r]->data;
	}
	/* Any k rows of a Cauchy code are invertible; a failure here would
	 * be a broken invariant of ours, but it costs a group, not the
	 * daemon. */
	if (n < k || gf_invert_matrix(b, inv, (int)k) != 0) {
		d->c.malformed++;
		slot_done(d, s);
		return 0;
	}
	/* symbols = B * originals, so original i = row i of B^-1 times the
	 * symbols held. */
	for (i = 0; i < k; i++) {
		if (s->have & UINT32_C(1) << i)
			continue;
		memcpy(rows + nlost * k, inv + i * k, k);
		s->sym[i] = buf_get(d, NULL, symlen);
		out[nlost] = s->sym[i]->data;
		lost[nlost++] = i;
	}
	ec_init_tables((int)k, (int)nlost, rows, d->tbls);
	ec_encode_data((int)symlen, (int)k, (int)nlost, d->tbls, src, out);

	for (r = 0; r < nlost; r++) {
		len = be16_get(out[r]);
		/* Repairs that disagree with the originals (a broken sender)
		 * rebuild noise; its length is the one thing we can check. */
		if (len == 0 || len > symlen - FEC_SYMBOL_OVERHEAD) {
			d->c.malformed++;
			continue;
		}
		s->have |= UINT32_C(1) << lost[r];
		s->nhave++;
		d->c.rebuilt++;
		rebuilt++;
		deliver(out[r] + FEC_SYMBOL_OVERHEAD, len, arg);
	}
	slot_done(d, s);
	return rebuilt;
}

/* Rebuild if `s` now holds enough symbols and misses something. */
static int
try_rebuild(struct fec_dec *d, struct slot *s,
    void (*deliver)(const uint8_t *, size_t, void *), void *arg)
{
	if (s->k == 0 || s->done)
		return 0;
	if (s->nhave == s->k) {
		slot_done(d, s);
		return 0;
	}
	if (s->nhave + s->nreps < s->k)
		return 0;
	return rebuild(d, s, deliver, arg);
}

int
fec_dec_original(struct fec_dec *d, const uint8_t *frame, size_t flen,
    const uint8_t **pkt, size_t *len,
    void (*deliver)(const uint8_t *, size_t, void *), void *arg)
{
	struct slot *s;
	unsigned idx;
	size_t n, symlen;

	if (flen <= FEC_ORIG_OVERHEAD ||
	    flen - FEC_ORIG_OVERHEAD > FEC_MAX_PACKET ||
	    frame[4] >= FEC_MAX_K) {
		d->c.malformed++;
		return -EINVAL;
	}
	idx = frame[4];
	n = flen - FEC_ORIG_OVERHEAD;
	symlen = FEC_SYMBOL_OVERHEAD + n;

	if ((s = slot_for(d, be32_get(frame))) == NULL) {
		/* Too old to help any rebuild, still a packet. */
		d->c.late++;
		goto deliver;
	}
	if (s->k > 0 && (idx >= s->k || symlen > s->symlen)) {
		d->c.malformed++;
		return -EINVAL;
	}
	if (s->have & UINT32_C(1) << idx) {
		d->c.duplicates++;
		return 1;
	}
	s->have |= UINT32_C(1) << idx;
	s->nhave++;
	if (s->done)
		goto deliver;
	if (idx >= s->maxidx)
		s->maxidx = idx + 1;
	if (symlen > s->maxsym)
		s->maxsym = symlen;
	if (s->k == 0 || s->nhave < s->k) {
		/* Kept for a rebuild: the decoder's one copy of it. Sized for
		 * the padding a rebuild adds, when that is known. */
		s->sym[idx] = buf_get(d, NULL, s->k > 0 ? s->symlen : symlen);
		be16_put(s->sym[idx]->data, (uint16_t)n);
		memcpy(s->sym[idx]->data + FEC_SYMBOL_OVERHEAD,
		    frame + FEC_ORIG_OVERHEAD, n);
	}
	(void)try_rebuild(d, s, deliver, arg);

deliver:
	*pkt = frame + FEC_ORIG_OVERHEAD;
	*len = n;
	return 0;
}

int
fec_dec_repair(struct fec_dec *d, const uint8_t *frame, size_t flen,
    void (*deliver)(const uint8_t *, size_t, void *), void *arg)
{
	struct slot *s;
	unsigned k, m, row;
	size_t symlen;

	/* The smallest symbol holds a one-byte packet. */
	if (flen < FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD + 1 ||
	    flen - FEC_REPAIR_OVERHEAD > FEC_MAX_SYMBOL)
		goto malformed;
	k = frame[4];
	m = frame[5];
	row = frame[6];
	symlen = flen - FEC_REPAIR_OVERHEAD;
	if (k < 1 || k > FEC_MAX_K || m < 1 || m > FEC_MAX_M || row >= m)
		goto malformed;

	if ((s = slot_for(d, be32_get(frame))) == NULL) {
		d->c.late++;
		return 0;
	}
	if (s->k == 0) {
		/* The first repair must leave room for what arrived. */
		if (k < s->maxidx || symlen < s->maxsym)
			goto malformed;
		s->k = k;
		s->m = m;
		s->symlen = symlen;
	} else if (k != s->k || m != s->m || symlen != s->symlen)
		goto malformed;
	if (s->reps & 1u << row) {
		d->c.duplicates++;
		return 0;
	}
	s->reps |= (uint8_t)(1u << row);
	if (s->done)
		return 0;
	if (s->nhave < s->k) {
		s->sym[FEC_MAX_K + row] = buf_get(d, NULL, symlen);
		memcpy(s->sym[FEC_MAX_K + row]->data,
		    frame + FEC_REPAIR_OVERHEAD, symlen);
		s->nreps++;
	}
	return try_rebuild(d, s, deliver, arg);

malformed:
	d->c.malformed++;
	return -EINVAL;
}

const struct fec_dec_counters *
fec_dec_counters(const struct fec_dec *d)
{
	return &d->c;
}

size_t
fec_dec_memory(const struct fec_dec *d)
{
	return d->bytes;
}

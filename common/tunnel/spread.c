/* Interleaved loss-recovery groups (spread.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "spread.h"

struct pending {
	size_t off, len;
};

struct spread {
	struct fec_enc *enc[SPREAD_DEPTH];
	unsigned k;
	unsigned next;        /* the slot the next original goes to */
	unsigned last;        /* the slot the last original went to */
	uint32_t next_group;  /* the id the next group to open takes */
	/* One close's repair frames, held until every group has made its
	 * own, then sent row by row: slot i's rows are pend[first[i]..]. */
	uint8_t *frames;
	size_t frames_len, frames_cap;
	struct pending pend[SPREAD_DEPTH * FEC_MAX_M];
	unsigned npend, first[SPREAD_DEPTH], rows[SPREAD_DEPTH];
};

struct spread *
spread_create(unsigned k)
{
	struct spread *s = xcalloc(1, sizeof *s);

	s->k = k < 1 ? 1 : k > FEC_MAX_K ? FEC_MAX_K : k;
	return s;
}

void
spread_free(struct spread *s)
{
	if (s == NULL)
		return;
	for (unsigned i = 0; i < SPREAD_DEPTH; i++)
		fec_enc_free(s->enc[i]);
	free(s->frames);
	free(s);
}

ssize_t
spread_add(struct spread *s, const uint8_t *pkt, size_t len, uint8_t *out,
    size_t outlen)
{
	unsigned slot = s->next;
	struct fec_enc *e = s->enc[slot];
	ssize_t n;

	if (e == NULL) {
		e = s->enc[slot] = fec_enc_create();
		(void)fec_enc_set_k(e, s->k);
	}
	/* A group takes its id when it opens, so ids count up in the order
	 * the groups' first frames leave (the receiver's window is by id). */
	if (fec_enc_count(e) == 0)
		(void)fec_enc_set_group(e, s->next_group);
	if ((n = fec_enc_add(e, pkt, len, out, outlen)) < 0)
		return n;
	if (fec_enc_count(e) == 1)
		s->next_group++;
	s->last = slot;
	s->next = (slot + 1) % SPREAD_DEPTH;
	return n;
}

unsigned
spread_count(const struct spread *s)
{
	unsigned n = 0;

	for (unsigned i = 0; i < SPREAD_DEPTH; i++)
		n += s->enc[i] != NULL ? fec_enc_count(s->enc[i]) : 0;
	return n;
}

bool
spread_full(const struct spread *s)
{
	/* Only the group the last original went to can have filled. */
	return s->enc[s->last] != NULL && fec_enc_count(s->enc[s->last]) >= s->k;
}

size_t
spread_repair_len(const struct spread *s)
{
	size_t max = 0, l;

	for (unsigned i = 0; i < SPREAD_DEPTH; i++) {
		if (s->enc[i] != NULL && (l = fec_enc_repair_len(s->enc[i])) > max)
			max = l;
	}
	return max;
}

static void
hold_frame(const uint8_t *frame, size_t len, void *arg)
{
	struct spread *s = arg;
	struct pending *p;

	if (s->npend == sizeof s->pend / sizeof s->pend[0])
		return; /* cannot happen: at most FEC_MAX_M per group */
	if (s->frames_len + len > s->frames_cap) {
		s->frames_cap = (s->frames_len + len) * 2;
		s->frames = xrealloc(s->frames, s->frames_cap);
	}
	memcpy(s->frames + s->frames_len, frame, len);
	p = &s->pend[s->npend++];
	*p = (struct pending){ s->frames_len, len };
	s->frames_len += len;
}

void
spread_close(struct spread *s, unsigned (*repairs)(unsigned k, void *arg),
    void (*emit)(const uint8_t *frame, size_t len, void *arg), void *arg,
    struct spread_close_info *info)
{
	unsigned maxrow = 0;

	*info = (struct spread_close_info){ 0 };
	s->npend = 0;
	s->frames_len = 0;
	for (unsigned i = 0; i < SPREAD_DEPTH; i++) {
		struct fec_enc *e = s->enc[i];
		unsigned k = e != NULL ? fec_enc_count(e) : 0, m;

		s->first[i] = s->npend;
		s->rows[i] = 0;
		if (k == 0)
			continue;
		m = repairs(k, arg);
		if (m > FEC_MAX_M)
			m = FEC_MAX_M;
		(void)fec_enc_close(e, m, hold_frame, s);
		s->rows[i] = s->npend - s->first[i];
		info->groups++;
		if (k > info->k) {
			info->k = k;
			info->m = m;
		}
		if (m > maxrow)
			maxrow = m;
	}
	/* Row by row; within a row, from the slot the next original goes to
	 * (the one whose last original left longest ago) round to the one
	 * that took the last. */
	for (unsigned row = 0; row < maxrow; row++) {
		for (unsigned j = 0; j < SPREAD_DEPTH; j++) {
			unsigned slot = (s->next + j) % SPREAD_DEPTH;
			const struct pending *p;

			if (row >= s->rows[slot])
				continue;
			p = &s->pend[s->first[slot] + row];
			emit(s->frames + p->off, p->len, arg);
			info->repairs++;
		}
	}
}

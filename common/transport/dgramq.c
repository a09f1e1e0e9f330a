/* A bounded, head-dropping DATAGRAM queue (see dgramq.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "dgramq.h"

void
dgramq_init(struct dgramq *q, size_t cap, size_t maxlen)
{
	memset(q, 0, sizeof *q);
	q->cap = cap > 0 ? cap : 1;
	q->maxlen = maxlen;
	/* The ring comes with the first push: most connections of a busy
	 * server are idle, and a full-size ring is 16 KB each. */
}

/* Double the ring (from DGRAMQ_RING_MIN, up to the capacity), keeping the
 * order of what it holds; the spare stack grows with it, since it must
 * hold every slot there is. */
static void
ring_grow(struct dgramq *q)
{
	size_t n = q->ringcap == 0 ? DGRAMQ_RING_MIN : q->ringcap * 2;
	struct dgramq_item **ring;

	if (n > q->cap)
		n = q->cap;
	ring = xcalloc(n, sizeof *ring);
	for (size_t i = 0; i < q->len; i++)
		ring[i] = q->ring[(q->head + i) % q->ringcap];
	free(q->ring);
	q->ring = ring;
	q->head = 0;
	q->spare = xrealloc(q->spare, n * sizeof *q->spare);
	q->ringcap = n;
}

void
dgramq_clear(struct dgramq *q)
{
	while (q->len > 0)
		dgramq_pop(q);
	for (size_t i = 0; i < q->nspare; i++)
		free(q->spare[i]);
	free(q->spare);
	free(q->ring);
	q->spare = NULL;
	q->ring = NULL;
	q->nspare = q->nslots = 0;
	q->cap = q->ringcap = 0;
}

/* A slot for the next push: a recycled one if any. There is always room
 * on the spare stack for a released slot, since slots in use plus spare
 * ones never exceed the ring's size. */
static struct dgramq_item *
slot_get(struct dgramq *q)
{
	if (q->nspare > 0)
		return q->spare[--q->nspare];
	q->nslots++;
	return xmalloc(sizeof(struct dgramq_item) + q->maxlen);
}

static void
slot_put(struct dgramq *q, struct dgramq_item *it)
{
	q->spare[q->nspare++] = it;
}

const struct dgramq_item *
dgramq_peek(const struct dgramq *q)
{
	return q->len > 0 ? q->ring[q->head] : NULL;
}

void
dgramq_pop(struct dgramq *q)
{
	if (q->len == 0)
		return;
	slot_put(q, q->ring[q->head]);
	q->ring[q->head] = NULL;
	q->head = (q->head + 1) % q->ringcap;
	q->len--;
}

/* Drops the oldest packet larger than DGRAMQ_SMALL among the first
 * DGRAMQ_SCAN, else the oldest. Head drop: the packet that has waited
 * longest is the one the inner sender can best do without, and losing it
 * tells that sender about the congestion soonest. Small packets (TCP
 * acknowledgements, pings, DNS) are spared: they cost the queue little,
 * and losing a bulk flow's acknowledgements in a burst stalls the flow
 * going the other way. */
static void
drop_oldest(struct dgramq *q)
{
	size_t scan = q->len < DGRAMQ_SCAN ? q->len : DGRAMQ_SCAN, i;

	for (i = 0; i < scan; i++) {
		if (q->ring[(q->head + i) % q->ringcap]->len > DGRAMQ_SMALL)
			break;
	}
	if (i == scan || i == 0) {
		dgramq_pop(q);
		return;
	}
	slot_put(q, q->ring[(q->head + i) % q->ringcap]);
	/* Close the gap: the small ones ahead of it move up one slot. */
	for (; i > 0; i--)
		q->ring[(q->head + i) % q->ringcap] =
		    q->ring[(q->head + i - 1) % q->ringcap];
	q->ring[q->head] = NULL;
	q->head = (q->head + 1) % q->ringcap;
	q->len--;
}

size_t
dgramq_push(struct dgramq *q, const uint8_t *data, size_t len, uint64_t now)
{
	struct dgramq_item *it;
	size_t dropped = 0;

	if (len > q->maxlen)
		fatalx("%s: %zu bytes in a queue of %zu-byte slots", __func__,
		    len, q->maxlen);
	if (q->len == q->cap) {
		drop_oldest(q);
		q->dropped_full++;
		dropped = 1;
	} else if (q->len == q->ringcap)
		ring_grow(q);
	it = slot_get(q);
	it->queued = now;
	it->len = len;
	if (len > 0)
		memcpy(it->data, data, len);
	q->ring[(q->head + q->len) % q->ringcap] = it;
	q->len++;
	return dropped;
}

static uint64_t
sojourn(const struct dgramq *q, uint64_t now)
{
	const struct dgramq_item *it = dgramq_peek(q);

	return it != NULL && now > it->queued ? now - it->queued : 0;
}

/* RFC 8289's control law: drops come closer together, as 1/sqrt(count),
 * for as long as the delay stays above target. */
static uint64_t
control_law(uint64_t t, uint64_t interval, uint32_t count)
{
	return t + (uint64_t)((double)interval / sqrt((double)count));
}

size_t
dgramq_codel(struct dgramq *q, uint64_t now, uint64_t interval)
{
	uint64_t target = interval / 10;
	size_t dropped = 0;
	bool ok_to_drop = false;

	/* One packet never makes a standing queue. */
	if (q->len <= 1 || sojourn(q, now) < target)
		q->first_above = 0;
	else if (q->first_above == 0)
		q->first_above = now + interval;
	else if (now >= q->first_above)
		ok_to_drop = true;
	if (q->dropping) {
		if (!ok_to_drop) {
			q->dropping = false;
			return 0;
		}
		while (q->dropping && now >= q->drop_next) {
			drop_oldest(q);
			dropped++;
			q->count++;
			if (q->len <= 1 || sojourn(q, now) < target) {
				q->dropping = false;
				q->first_above = 0;
			} else
				q->drop_next = control_law(q->drop_next, interval,
				    q->count);
		}
	} else if (ok_to_drop) {
		uint32_t delta = q->count - q->last_count;

		drop_oldest(q);
		dropped++;
		q->dropping = true;
		/* Back into dropping soon after leaving it: carry on near
		 * the rate that was reached, not from the start. */
		q->count = delta > 1 && now - q->drop_next < 16 * interval ?
		    delta : 1;
		q->last_count = q->count;
		q->drop_next = control_law(now, interval, q->count);
	}
	q->dropped_stale += dropped;
	return dropped;
}

size_t
dgramq_expire(struct dgramq *q, uint64_t now, uint64_t max_age)
{
	size_t dropped = 0;

	/* Pushes are in time order, so the stale ones are all at the head. */
	while (q->len > 0 && now > q->ring[q->head]->queued &&
	    now - q->ring[q->head]->queued > max_age) {
		dgramq_pop(q);
		q->dropped_stale++;
		dropped++;
	}
	return dropped;
}

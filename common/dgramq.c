/* A bounded, head-dropping DATAGRAM queue (see dgramq.h). */
#include <stdlib.h>
#include <string.h>

#include "dgramq.h"
#include "xmalloc.h"

void
dgramq_init(struct dgramq *q, size_t cap)
{
	memset(q, 0, sizeof *q);
	q->cap = cap > 0 ? cap : 1;
	q->ring = xcalloc(q->cap, sizeof *q->ring);
}

void
dgramq_clear(struct dgramq *q)
{
	while (q->len > 0)
		dgramq_pop(q);
	free(q->ring);
	q->ring = NULL;
	q->cap = 0;
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
	free(q->ring[q->head]);
	q->ring[q->head] = NULL;
	q->head = (q->head + 1) % q->cap;
	q->len--;
}

size_t
dgramq_push(struct dgramq *q, const uint8_t *data, size_t len, uint64_t now)
{
	struct dgramq_item *it;
	size_t dropped = 0;

	/* Head drop: the packet that has waited longest is the one the
	 * inner sender can best do without, and losing it tells that
	 * sender about the congestion soonest. */
	if (q->len == q->cap) {
		dgramq_pop(q);
		q->dropped_full++;
		dropped = 1;
	}
	it = xmalloc(sizeof *it + len);
	it->queued = now;
	it->len = len;
	if (len > 0)
		memcpy(it->data, data, len);
	q->ring[(q->head + q->len) % q->cap] = it;
	q->len++;
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

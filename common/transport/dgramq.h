/* The queue of DATAGRAMs waiting for the congestion window: bounded in
 * count and in age, and never refusing a new packet. It behaves like a
 * router's queue with head drop and CoDel (RFC 8289): when full, or when
 * a packet has waited too long, the oldest go; while the queue stands
 * above its target delay for a whole interval, single packets go, spaced
 * so that the senders behind it slow down without a burst of losses.
 * Every drop is counted. Pure: time is passed in, so tests drive it
 * without a clock.
 *
 * Storage: every item is a slot of the same size (the largest payload
 * the queue takes), allocated the first time the queue grows that deep
 * and recycled after that, so a queue in steady use costs no allocation
 * per packet. It holds at most as many slots as its deepest point, never
 * more than its capacity. The ring of pointers to them grows the same
 * way, doubling from DGRAMQ_RING_MIN: a queue that never held a packet
 * costs nothing but the struct. */
#ifndef ROVE_DGRAMQ_H
#define ROVE_DGRAMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Drops spare packets of at most DGRAMQ_SMALL bytes when a larger one is
 * among the DGRAMQ_SCAN oldest. */
#define DGRAMQ_SMALL 200
#define DGRAMQ_SCAN 64
/* The ring's first size, once a packet arrives. */
#define DGRAMQ_RING_MIN 8

/* One queued DATAGRAM payload. */
struct dgramq_item {
	uint64_t queued;  /* the time it was pushed (nanoseconds) */
	size_t len;
	uint8_t data[];
};

struct dgramq {
	struct dgramq_item **ring;   /* ringcap entries; NULL until a push */
	size_t cap, ringcap, head, len;
	size_t maxlen;               /* payload bytes each slot holds */
	struct dgramq_item **spare;  /* slots not in use (a stack of nspare) */
	size_t nspare, nslots;       /* spare ones; all ever allocated */
	uint64_t dropped_full;  /* pushed out by a newer packet */
	uint64_t dropped_stale; /* waited too long: age bound or CoDel */
	/* CoDel's state: when the delay first stood above target (0: it
	 * does not), whether it is dropping, the next drop, the count. */
	uint64_t first_above, drop_next;
	uint32_t count, last_count;
	bool dropping;
};

/* Room for `cap` packets (at least 1) of at most `maxlen` bytes each; the
 * slots (and the ring) are allocated as the queue first grows, then
 * reused. Allocates nothing itself. */
void dgramq_init(struct dgramq *, size_t cap, size_t maxlen);
/* Frees every slot and the ring. */
void dgramq_clear(struct dgramq *);

/* Appends a copy of `data`, which the caller has checked is at most the
 * queue's maxlen (a longer one is a broken invariant: fatal). Never fails
 * otherwise: a full queue first drops its oldest packet (sparing small
 * ones, see DGRAMQ_SMALL). Returns the number dropped to make room (0 or
 * 1). */
size_t dgramq_push(struct dgramq *, const uint8_t *data, size_t len,
    uint64_t now);
/* Drops, from the head, every packet queued before now - max_age.
 * Returns the number dropped. */
size_t dgramq_expire(struct dgramq *, uint64_t now, uint64_t max_age);
/* CoDel at the head, with `interval` (about one round trip) and a target
 * of a tenth of it: once the oldest packet has waited longer than the
 * target for a whole interval, drop it, then one more every interval /
 * sqrt(drops) while that lasts. Returns the number dropped. */
size_t dgramq_codel(struct dgramq *, uint64_t now, uint64_t interval);
/* The oldest packet, or NULL when empty. It stays queued. */
const struct dgramq_item *dgramq_peek(const struct dgramq *);
/* Removes the oldest packet, its slot kept for reuse (no-op when empty);
 * not a drop. */
void dgramq_pop(struct dgramq *);

static inline size_t
dgramq_len(const struct dgramq *q)
{
	return q->len;
}

#endif

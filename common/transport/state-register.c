/* The single-use ticket register: every ticket roved issued, until it
 * expires, with whether it was spent, in memory (lists, indexes, quotas
 * per peer) and in a file of fixed-size records that each change rewrites
 * in place, so that a ticket stays spent across a restart. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "state-int.h"

/* The register's indexes (tag -> entry, key -> peer): linear probing, at
 * most half full. A deletion moves the rest of its run back, so there are
 * no tombstones and a failed lookup stops at the first empty slot. */
#define INDEX_BITS 15
#define INDEX_SLOTS ((size_t)1 << INDEX_BITS)
#define INDEX_MASK (INDEX_SLOTS - 1)
_Static_assert(INDEX_SLOTS >= 2 * STATE_REGISTER_MAX,
    "the register's index must stay at most half full");

/* Expired entries forgotten per ticket issued and per tick: bounded work
 * on the event loop, yet more per issue than one, so they never pile up. */
#define SWEEP_PER_ISSUE 4
#define SWEEP_PER_TICK 1024

/* On disk: a header the size of a record, then record i for entry i.
 * Records never straddle a page, and each change rewrites one in place. */
struct reg_record {
	uint8_t type;           /* REG_ISSUED, REG_USED; REG_EMPTY: unused */
	uint8_t pad[7];
	uint64_t expiry;
	uint8_t tag[STATE_TAG_LEN];
	uint8_t peer[KEY_LEN];
};
_Static_assert(sizeof(struct reg_record) == 64,
    "register records are 64 bytes");
static const char reg_magic[8] = { 'R', 'O', 'V', 'E', 'R', 'E', 'G', '1' };

/* --- The register: lists and indexes ---------------------------------- */

static void
list_unlink(struct reg *r, struct reg_list *l, uint32_t i, int k)
{
	uint32_t prev = r->e[i].link[k][0], next = r->e[i].link[k][1];

	if (prev != NONE)
		r->e[prev].link[k][1] = next;
	else
		l->head = next;
	if (next != NONE)
		r->e[next].link[k][0] = prev;
	else
		l->tail = prev;
}

static void
list_append(struct reg *r, struct reg_list *l, uint32_t i, int k)
{
	r->e[i].link[k][0] = l->tail;
	r->e[i].link[k][1] = NONE;
	if (l->tail != NONE)
		r->e[l->tail].link[k][1] = i;
	else
		l->head = i;
	l->tail = i;
}

static void
list_prepend(struct reg *r, struct reg_list *l, uint32_t i, int k)
{
	r->e[i].link[k][0] = NONE;
	r->e[i].link[k][1] = l->head;
	if (l->head != NONE)
		r->e[l->head].link[k][0] = i;
	else
		l->tail = i;
	l->head = i;
}

static size_t
tag_home(const uint8_t tag[STATE_TAG_LEN])
{
	uint64_t h;

	/* An AEAD tag under our key: uniformly random, and no client can
	 * choose the tags that get inserted. */
	memcpy(&h, tag, sizeof h);
	return (size_t)(h & INDEX_MASK);
}

static size_t
key_home(const struct reg *r, const uint8_t key[KEY_LEN])
{
	uint64_t h;

	memcpy(&h, key, sizeof h);
	h = (h ^ r->pseed) * UINT64_C(0x9e3779b97f4a7c15);
	return (size_t)(h >> (64 - INDEX_BITS));
}

static size_t
entry_home(const struct reg *r, uint32_t i)
{
	return tag_home(r->e[i].tag);
}

static size_t
peer_home(const struct reg *r, uint32_t i)
{
	return key_home(r, r->p[i].key);
}

static void
index_add(uint32_t *ix, size_t s, uint32_t item)
{
	while (ix[s] != 0)
		s = (s + 1) & INDEX_MASK;
	ix[s] = item + 1;
}

/* Remove `item` (present) and close the gap: each later member of the run
 * moves back unless its home lies between the gap and where it is. */
static void
index_del(const struct reg *r, uint32_t *ix, size_t home, uint32_t item,
    size_t (*home_of)(const struct reg *, uint32_t))
{
	size_t gap = home, j, h;

	while (ix[gap] != item + 1)
		gap = (gap + 1) & INDEX_MASK;
	for (j = gap;;) {
		ix[gap] = 0;
		for (;;) {
			j = (j + 1) & INDEX_MASK;
			if (ix[j] == 0)
				return;
			h = home_of(r, ix[j] - 1);
			if (gap <= j ? (h <= gap || h > j) : (h <= gap && h > j))
				break;
		}
		ix[gap] = ix[j];
		gap = j;
	}
}

static uint32_t
entry_lookup(struct reg *r, const uint8_t tag[STATE_TAG_LEN])
{
	for (size_t s = tag_home(tag);; s = (s + 1) & INDEX_MASK) {
		uint32_t v = r->index[s];

		r->info.probes++;
		if (v == 0)
			return NONE;
		if (memcmp(r->e[v - 1].tag, tag, STATE_TAG_LEN) == 0)
			return v - 1;
	}
}

static uint32_t
peer_lookup(const struct reg *r, const uint8_t key[KEY_LEN])
{
	for (size_t s = key_home(r, key); r->pindex[s] != 0;
	    s = (s + 1) & INDEX_MASK) {
		uint32_t pi = r->pindex[s] - 1;

		if (memcmp(r->p[pi].key, key, KEY_LEN) == 0)
			return pi;
	}
	return NONE;
}

static void
bucket_unlink(struct reg *r, uint32_t pi)
{
	struct reg_peer *p = &r->p[pi];

	if (p->bprev != NONE)
		r->p[p->bprev].bnext = p->bnext;
	else
		r->bucket[p->n] = p->bnext;
	if (p->bnext != NONE)
		r->p[p->bnext].bprev = p->bprev;
}

/* Move a peer to the bucket of `n` entries, keeping maxn exact (counts
 * move by one, so it falls by at most one). */
static void
peer_set_n(struct reg *r, uint32_t pi, uint32_t n)
{
	struct reg_peer *p = &r->p[pi];

	if (p->n > 0)
		bucket_unlink(r, pi);
	p->n = n;
	if (n > 0) {
		p->bprev = NONE;
		p->bnext = r->bucket[n];
		if (p->bnext != NONE)
			r->p[p->bnext].bprev = pi;
		r->bucket[n] = pi;
		if (n > r->maxn)
			r->maxn = n;
	}
	while (r->maxn > 0 && r->bucket[r->maxn] == NONE)
		r->maxn--;
}

static uint32_t
peer_get(struct reg *r, const uint8_t key[KEY_LEN])
{
	uint32_t pi = peer_lookup(r, key);
	struct reg_peer *p;

	if (pi != NONE)
		return pi;
	/* Peers never outnumber entries, and the caller made room for one. */
	if (r->pfree != NONE) {
		pi = r->pfree;
		r->pfree = r->p[pi].bnext;
	} else
		pi = r->pfresh++;
	p = &r->p[pi];
	memcpy(p->key, key, KEY_LEN);
	p->n = 0;
	p->issued = p->used = (struct reg_list){ NONE, NONE };
	index_add(r->pindex, key_home(r, key), pi);
	r->peers++;
	return pi;
}

/* --- The register: entries -------------------------------------------- */

static void
entry_drop(struct reg *r, uint32_t i)
{
	struct reg_entry *e = &r->e[i];
	uint32_t pi = e->peer;
	struct reg_peer *p = &r->p[pi];

	index_del(r, r->index, tag_home(e->tag), i, entry_home);
	list_unlink(r, &r->all, i, L_ALL);
	list_unlink(r, e->state == REG_USED ? &p->used : &p->issued, i, L_PEER);
	peer_set_n(r, pi, p->n - 1);
	if (p->n == 0) {
		index_del(r, r->pindex, key_home(r, p->key), pi, peer_home);
		p->bnext = r->pfree;
		r->pfree = pi;
		r->peers--;
	}
	e->state = REG_EMPTY;
	/* Reused first: the slot about to be written is the one just freed,
	 * so an evicted ticket does not come back from disk. */
	list_prepend(r, &r->free, i, L_ALL);
	r->live--;
}

/* A peer's entry to give up: a spent one first (it only tells a replay
 * from an unknown ticket), else its oldest unspent one. */
static uint32_t
peer_oldest(const struct reg *r, uint32_t pi)
{
	const struct reg_peer *p = &r->p[pi];

	return p->used.head != NONE ? p->used.head : p->issued.head;
}

static size_t
sweep(struct reg *r, uint64_t now, size_t max)
{
	size_t n = 0;

	/* Issue order is expiry order, the lifetime being fixed; after a
	 * clock step it may not be quite, and lookups check expiry anyway. */
	while (n < max && r->all.head != NONE &&
	    r->e[r->all.head].expiry <= now) {
		entry_drop(r, r->all.head);
		r->info.expired++;
		n++;
	}
	return n;
}

/* Room for one more entry of the peer `key`: its own quota first, then
 * the register's size (an expired entry, else the oldest of a peer that
 * holds the most, which may be the same peer). */
static void
make_room(struct reg *r, const uint8_t key[KEY_LEN], uint64_t now)
{
	uint32_t pi = peer_lookup(r, key);

	if (pi != NONE && r->p[pi].n >= STATE_REGISTER_PEER_MAX) {
		entry_drop(r, peer_oldest(r, pi));
		r->info.evicted_quota++;
	} else if (r->live >= STATE_REGISTER_MAX) {
		if (r->e[r->all.head].expiry <= now) {
			entry_drop(r, r->all.head);
			r->info.expired++;
		} else {
			entry_drop(r, peer_oldest(r, r->bucket[r->maxn]));
			r->info.evicted_full++;
		}
	}
}

/* A free slot, the caller having made room. Every empty slot is on the
 * free list or at efresh or above (loaded entries sit anywhere there). */
static uint32_t
entry_alloc(struct reg *r)
{
	uint32_t i = r->free.head;

	if (i != NONE) {
		list_unlink(r, &r->free, i, L_ALL);
		return i;
	}
	while (r->e[r->efresh].state != REG_EMPTY)
		r->efresh++;
	return r->efresh++;
}

/* Add an entry in slot `slot` (loading), or in any free one (NONE). */
static uint32_t
reg_add(struct reg *r, const uint8_t tag[STATE_TAG_LEN],
    const uint8_t key[KEY_LEN], uint64_t expiry, uint8_t state, uint32_t slot,
    uint64_t now)
{
	uint32_t i, pi;
	struct reg_entry *e;
	struct reg_peer *p;

	make_room(r, key, now);
	pi = peer_get(r, key);
	p = &r->p[pi];
	i = slot != NONE ? slot : entry_alloc(r);
	e = &r->e[i];
	memcpy(e->tag, tag, STATE_TAG_LEN);
	e->expiry = expiry;
	e->serial = ++r->serial;
	e->peer = pi;
	e->state = state;
	list_append(r, &r->all, i, L_ALL);
	list_append(r, state == REG_USED ? &p->used : &p->issued, i, L_PEER);
	peer_set_n(r, pi, p->n + 1);
	index_add(r->index, tag_home(tag), i);
	r->live++;
	return i;
}

void
state_register_init(struct reg *r)
{
	r->e = xcalloc(STATE_REGISTER_MAX, sizeof *r->e);
	r->p = xcalloc(STATE_REGISTER_MAX, sizeof *r->p);
	r->index = xcalloc(INDEX_SLOTS, sizeof *r->index);
	r->pindex = xcalloc(INDEX_SLOTS, sizeof *r->pindex);
	r->all = r->free = (struct reg_list){ NONE, NONE };
	r->pfree = NONE;
	for (size_t n = 0; n <= STATE_REGISTER_PEER_MAX; n++)
		r->bucket[n] = NONE;
	random_bytes((uint8_t *)&r->pseed, sizeof r->pseed);
}

void
state_register_free(struct reg *r)
{
	free(r->e);
	free(r->p);
	free(r->index);
	free(r->pindex);
}

static off_t
record_offset(uint32_t i)
{
	return (off_t)sizeof(struct reg_record) * ((off_t)i + 1);
}

/* Write entry i's record, or only its first `len` bytes (the type). Not
 * synced: a crash may forget the last few changes, as any log would. */
static void
reg_write(struct state_server *st, uint32_t i, size_t len)
{
	const struct reg_entry *e = &st->reg.e[i];
	struct reg_record rec;

	memset(&rec, 0, sizeof rec);
	rec.type = e->state;
	rec.expiry = e->expiry;
	memcpy(rec.tag, e->tag, sizeof rec.tag);
	memcpy(rec.peer, st->reg.p[e->peer].key, sizeof rec.peer);
	st->reg.info.writes++;
	st->reg.info.bytes_written += len;
	/* Without the record, a spent ticket would be usable again after a
	 * restart: say so, once per bout of failures. */
	if (pwrite(st->regfd, &rec, len, record_offset(i)) != (ssize_t)len) {
		if (!st->reg_failing)
			log_warn("StateDir %s: %s: %s", st->dir, st->regname,
			    errno != 0 ? strerror(errno) : "short write");
		st->reg_failing = true;
	} else
		st->reg_failing = false;
}

uint32_t
state_register_find(struct reg *r, const uint8_t tag[STATE_TAG_LEN], uint64_t now)
{
	uint32_t i = entry_lookup(r, tag);

	if (i != NONE && r->e[i].expiry <= now) {
		entry_drop(r, i);
		r->info.expired++;
		i = NONE;
	}
	return i;
}

void
state_register_use(struct state_server *st, uint32_t i)
{
	struct reg *r = &st->reg;
	struct reg_entry *e = &r->e[i];
	struct reg_peer *p = &r->p[e->peer];

	list_unlink(r, &p->issued, i, L_PEER);
	list_append(r, &p->used, i, L_PEER);
	e->state = REG_USED;
	reg_write(st, i, 1);
}

struct load_item {
	uint64_t expiry;
	uint32_t slot;
};

static int
load_item_cmp(const void *a, const void *b)
{
	const struct load_item *x = a, *y = b;

	if (x->expiry != y->expiry)
		return x->expiry < y->expiry ? -1 : 1;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* Read the register back: the records still valid, oldest first, so the
 * quotas keep each peer's newest; what does not come back is cleared on
 * disk. A file of another format or size starts afresh. */
int
state_register_load(struct state_server *st, char **cause)
{
	const size_t size = sizeof(struct reg_record) * (STATE_REGISTER_MAX + 1);
	struct reg_record *recs;
	struct load_item *items;
	size_t n = 0;
	uint64_t now = clock_wall();
	ssize_t got;

	st->regfd = state_open_file(st, false, st->regname, O_RDWR | O_CREAT, false,
	    cause);
	if (st->regfd == -1)
		return -1;
	recs = xmalloc(size);
	got = pread(st->regfd, recs, size, 0);
	if (got != (ssize_t)size || memcmp(recs, reg_magic, sizeof reg_magic) != 0) {
		if (got > 0)
			log_info("StateDir %s: %s: not a register of this "
			    "version; starting an empty one", st->dir, st->regname);
		memset(recs, 0, size);
		memcpy(recs, reg_magic, sizeof reg_magic);
		if (ftruncate(st->regfd, 0) == -1 ||
		    pwrite(st->regfd, recs, size, 0) != (ssize_t)size) {
			xasprintf(cause, "StateDir %s: %s: %s", st->dir,
			    st->regname, strerror(errno));
			free(recs);
			return -1;
		}
	}
	items = xcalloc(STATE_REGISTER_MAX, sizeof *items);
	for (uint32_t i = 0; i < STATE_REGISTER_MAX; i++) {
		const struct reg_record *rec = &recs[i + 1];

		if ((rec->type == REG_ISSUED || rec->type == REG_USED) &&
		    rec->expiry > now && rec->expiry <= now + st->lifetime_s)
			items[n++] = (struct load_item){ rec->expiry, i };
	}
	qsort(items, n, sizeof *items, load_item_cmp);
	for (size_t k = 0; k < n; k++) {
		const struct reg_record *rec = &recs[items[k].slot + 1];

		if (entry_lookup(&st->reg, rec->tag) == NONE)
			reg_add(&st->reg, rec->tag, rec->peer, rec->expiry,
			    rec->type, items[k].slot, now);
	}
	for (uint32_t i = 0; i < STATE_REGISTER_MAX; i++) {
		if (recs[i + 1].type != REG_EMPTY && st->reg.e[i].state == REG_EMPTY)
			reg_write(st, i, 1);
	}
	free(items);
	free(recs);
	memset(&st->reg.info, 0, sizeof st->reg.info);
	return 0;
}

/* A new entry for a ticket issued now (its lifetime from now), written
 * to the file. Returns it. */
static uint32_t
record(struct state_server *st, const uint8_t tag[STATE_TAG_LEN],
    const uint8_t peer[KEY_LEN], uint8_t state, uint64_t now)
{
	uint32_t i = reg_add(&st->reg, tag, peer, now + st->lifetime_s, state,
	    NONE, now);

	reg_write(st, i, sizeof(struct reg_record));
	return i;
}

bool
state_register_sweep(struct state_server *st, uint64_t now)
{
	return sweep(&st->reg, now, SWEEP_PER_TICK) == SWEEP_PER_TICK;
}

void
state_register_issue(struct state_server *st, const uint8_t tag[STATE_TAG_LEN],
    const uint8_t peer[KEY_LEN])
{
	uint64_t now = clock_wall();

	sweep(&st->reg, now, SWEEP_PER_ISSUE);
	/* Tags are AEAD tags under a fresh nonce: equal ones do not happen,
	 * but the index must never hold one twice. */
	if (entry_lookup(&st->reg, tag) != NONE)
		return;
	record(st, tag, peer, REG_ISSUED, now);
}

uint32_t
state_register_taken(struct state_server *st,
    const uint8_t tag[STATE_TAG_LEN], const uint8_t peer[KEY_LEN])
{
	uint64_t now = clock_wall();

	sweep(&st->reg, now, SWEEP_PER_ISSUE);
	return record(st, tag, peer, REG_USED, now);
}

enum state_ticket
state_register_spend(struct state_server *st, const uint8_t tag[STATE_TAG_LEN],
    uint8_t peer[KEY_LEN])
{
	uint32_t i = state_register_find(&st->reg, tag, clock_wall());

	if (i == NONE)
		return STATE_TICKET_UNKNOWN;
	if (st->reg.e[i].state == REG_USED)
		return STATE_TICKET_SPENT;
	state_register_use(st, i);
	memcpy(peer, st->reg.p[st->reg.e[i].peer].key, KEY_LEN);
	return STATE_TICKET_FRESH;
}

void
state_register_info(const struct state_server *st,
    struct state_register_info *out)
{
	*out = st->reg.info;
	out->live = st->reg.live;
	out->peers = st->reg.peers;
	out->max_per_peer = st->reg.maxn;
}

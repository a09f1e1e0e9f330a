/* The board between workers (board.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "board.h"

/* Copies of a slot that keep meeting a writer give up after this many
 * tries: the reader shows the peer as its own worker knows it. */
#define BOARD_READ_TRIES 8

struct peer_data {
	bool held;            /* by p.worker; else no worker shows it */
	struct board_peer p;
};

struct peer_slot {
	atomic_uint seq;      /* odd: a writer holds it */
	struct peer_data d;
};

struct worker_slot {
	atomic_uint seq;      /* 0: never written; odd: being written */
	struct board_worker w;
};

/* The configuration's bytes follow. */
struct config_slot {
	atomic_uint seq;      /* odd: worker 0 is writing it */
	uint64_t gen;         /* 0: none yet */
	size_t len;
	char buf[];
};

/* Copies of the configuration that keep meeting worker 0 writing a newer
 * one: tried again after a millisecond, this many times. */
#define BOARD_CONFIG_TRIES 200

struct board {
	size_t npeers;
	unsigned nworkers;
	size_t size;
	struct peer_slot *peers;
	struct worker_slot *workers;
	struct config_slot *config;
	size_t config_max, config_size;
};

struct board *
board_create(size_t npeers, unsigned nworkers, size_t config_max)
{
	struct board *b = xcalloc(1, sizeof *b);
	size_t psize = npeers * sizeof *b->peers;
	void *mem;

	b->npeers = npeers;
	b->nworkers = nworkers;
	b->size = psize + nworkers * sizeof *b->workers;
	/* Zeroed: every count even and every slot free. */
	mem = mmap(NULL, b->size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		free(b);
		return NULL;
	}
	b->peers = mem;
	b->workers = (struct worker_slot *)((char *)mem + psize);
	/* Up to 16 MiB that no page backs until a reload writes it. */
	b->config_max = config_max;
	b->config_size = sizeof *b->config + config_max;
	mem = mmap(NULL, b->config_size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		munmap(b->peers, b->size);
		free(b);
		return NULL;
	}
	b->config = mem;
	return b;
}

void
board_free(struct board *b)
{
	if (b == NULL)
		return;
	munmap(b->peers, b->size);
	munmap(b->config, b->config_size);
	free(b);
}

/* Take a slot's sequence count for writing: false if another writer
 * has it (the caller tries again at its next refresh). */
static bool
seq_lock(atomic_uint *seq, unsigned *was)
{
	unsigned s = atomic_load_explicit(seq, memory_order_relaxed);

	if (s & 1)
		return false;
	if (!atomic_compare_exchange_strong_explicit(seq, &s, s + 1,
	    memory_order_acquire, memory_order_relaxed))
		return false;
	*was = s;
	/* What follows is not seen before the count is odd. */
	atomic_thread_fence(memory_order_release);
	return true;
}

static void
seq_unlock(atomic_uint *seq, unsigned was)
{
	atomic_store_explicit(seq, was + 2, memory_order_release);
}

/* Copy `len` bytes of a slot guarded by `seq` into `out`: false if no
 * copy came out whole, or the slot was never written. */
static bool
seq_read(atomic_uint *seq, const void *slot, size_t len, void *out,
    bool (*want)(const void *copy, const void *arg), const void *arg)
{
	for (int i = 0; i < BOARD_READ_TRIES; i++) {
		unsigned s1 = atomic_load_explicit(seq, memory_order_acquire);

		if (s1 & 1)
			continue;
		memcpy(out, slot, len);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(seq, memory_order_relaxed) == s1)
			return want == NULL || want(out, arg);
	}
	return false;
}

bool
board_put(struct board *b, size_t idx, const struct board_peer *bp)
{
	struct peer_slot *slot;
	struct peer_data *d;
	unsigned was;
	bool put = false;

	if (b == NULL || idx >= b->npeers)
		return false;
	slot = &b->peers[idx];
	d = &slot->d;
	if (!seq_lock(&slot->seq, &was))
		return false;
	if (!d->held || d->p.worker == bp->worker ||
	    memcmp(d->p.key, bp->key, BOARD_KEY) != 0 || d->p.since <= bp->since) {
		d->p = *bp;
		d->held = true;
		put = true;
	}
	seq_unlock(&slot->seq, was);
	return put;
}

void
board_drop(struct board *b, size_t idx, unsigned worker, uint64_t since)
{
	struct peer_slot *slot;
	unsigned was;

	if (b == NULL || idx >= b->npeers)
		return;
	slot = &b->peers[idx];
	/* A writer in the way: the slot stays claimed until the next
	 * refresh finds no session and tries again (board_drop is called
	 * from that refresh too). */
	if (!seq_lock(&slot->seq, &was))
		return;
	if (slot->d.held && slot->d.p.worker == worker && slot->d.p.since == since)
		slot->d.held = false;
	seq_unlock(&slot->seq, was);
}

struct get_want {
	const uint8_t *key;
	unsigned except;
	uint64_t newer_than;
};

static bool
peer_wanted(const void *copy, const void *arg)
{
	const struct peer_data *d = copy;
	const struct get_want *w = arg;

	return d->held && d->p.worker != w->except &&
	    memcmp(d->p.key, w->key, BOARD_KEY) == 0 && d->p.since > w->newer_than;
}

bool
board_get(struct board *b, size_t idx, const uint8_t key[BOARD_KEY],
    unsigned except, uint64_t newer_than, struct board_peer *out)
{
	struct get_want w = { key, except, newer_than };
	struct peer_data d;

	if (b == NULL || idx >= b->npeers)
		return false;
	if (!seq_read(&b->peers[idx].seq, &b->peers[idx].d, sizeof d, &d,
	    peer_wanted, &w))
		return false;
	*out = d.p;
	/* Whatever another worker wrote, the reader gets a string it can
	 * print. */
	out->connection_id[sizeof out->connection_id - 1] = '\0';
	return true;
}

void
board_put_worker(struct board *b, unsigned worker,
    const struct board_worker *bw)
{
	struct worker_slot *slot;
	unsigned was;

	if (b == NULL || worker >= b->nworkers)
		return;
	slot = &b->workers[worker];
	if (!seq_lock(&slot->seq, &was))
		return;
	slot->w = *bw;
	seq_unlock(&slot->seq, was);
}

bool
board_get_worker(struct board *b, unsigned worker, struct board_worker *out)
{
	struct worker_slot *slot;

	if (b == NULL || worker >= b->nworkers)
		return false;
	slot = &b->workers[worker];
	if (atomic_load_explicit(&slot->seq, memory_order_acquire) == 0)
		return false;
	return seq_read(&slot->seq, &slot->w, sizeof slot->w, out, NULL, NULL);
}

bool
board_put_config(struct board *b, uint64_t gen, const char *buf, size_t len)
{
	unsigned was;

	if (b == NULL || len > b->config_max)
		return false;
	/* Worker 0 is its one writer: the count is never odd here. */
	if (!seq_lock(&b->config->seq, &was))
		return false;
	b->config->gen = gen;
	b->config->len = len;
	memcpy(b->config->buf, buf, len);
	seq_unlock(&b->config->seq, was);
	return true;
}

bool
board_get_config(struct board *b, uint64_t *gen, char **out, size_t *outlen)
{
	struct config_slot *c;

	if (b == NULL)
		return false;
	c = b->config;
	for (int i = 0; i < BOARD_CONFIG_TRIES; i++) {
		unsigned s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
		uint64_t g;
		size_t len;
		char *buf;

		if (s1 & 1) {
			usleep(1000);
			continue;
		}
		g = c->gen;
		len = c->len;
		if (g == 0 || len > b->config_max)
			return false;
		buf = xmalloc(len + 1);
		memcpy(buf, c->buf, len);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&c->seq, memory_order_relaxed) == s1) {
			buf[len] = '\0';
			*gen = g;
			*out = buf;
			*outlen = len;
			return true;
		}
		free(buf);
	}
	return false;
}

uint64_t
board_config_gen(struct board *b)
{
	struct config_slot *c;

	if (b == NULL)
		return 0;
	c = b->config;
	for (int i = 0; i < BOARD_READ_TRIES; i++) {
		unsigned s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
		uint64_t g = c->gen;

		atomic_thread_fence(memory_order_acquire);
		if (!(s1 & 1) &&
		    atomic_load_explicit(&c->seq, memory_order_relaxed) == s1)
			return g;
	}
	return 0;
}

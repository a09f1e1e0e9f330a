/* StateDir: reset secret, rotated ticket and token keys, single-use ticket
 * register, and the client's remembered sessions. */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/chacha20_poly1305.h>

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"
#include "base/safedir.h"
#include "base/xmalloc.h"
#include "quic.h"
#include "state.h"

#define TICKET_KEY_FILE "ticket.key"
#define TOKEN_KEY_FILE "token.key"
#define RESET_KEY_FILE "reset.key"
#define REGISTER_FILE "tickets"
/* In KeyDir: held (flock) by the member of a group that rotates a key. */
#define KEYS_LOCK_FILE "keys.lock"

/* The register's indexes (tag -> entry, key -> peer): linear probing, at
 * most half full. A deletion moves the rest of its run back, so there are
 * no tombstones and a failed lookup stops at the first empty slot. */
#define INDEX_BITS 15
#define INDEX_SLOTS ((size_t)1 << INDEX_BITS)
#define INDEX_MASK (INDEX_SLOTS - 1)
_Static_assert(INDEX_SLOTS >= 2 * STATE_REGISTER_MAX,
    "the register's index must stay at most half full");
#define NONE UINT32_MAX

/* Expired entries forgotten per ticket issued and per tick: bounded work
 * on the event loop, yet more per issue than one, so they never pile up. */
#define SWEEP_PER_ISSUE 4
#define SWEEP_PER_TICK 1024
/* The timer looks at least this often, so that a wall clock set forward
 * or back is noticed within the hour rather than the day. */
#define TICK_MAX_S 3600
/* How soon to try again to write a key file after a failure. */
#define KEYS_RETRY_S 60

struct ticket_key {
	uint8_t name[WOLFSSL_TICKET_NAME_SZ];
	uint8_t key[CHACHA20_POLY1305_AEAD_KEYSIZE];
	uint64_t created;  /* wall clock, seconds; 0: no key */
};
_Static_assert(CHACHA20_POLY1305_AEAD_KEYSIZE == STATE_TOKEN_KEY_LEN,
    "token keys share the ticket keys' layout");

/* A rotated pair of keys kept in one file: [0] makes (tickets, tokens) and
 * opens; [1], the key before it, still opens until one lifetime after it
 * stopped making, then it is erased. The file holds `keys` as is. */
struct keyring {
	const char *file;
	uint32_t rotate_s, lifetime_s;
	struct ticket_key keys[2];
	bool unsaved;           /* the file is behind: write it again */
	uint64_t rotations;     /* replaced while running */
	ino_t ino;              /* of the file last read or written */
};

enum reg_state { REG_EMPTY, REG_ISSUED, REG_USED };

/* Which pair of links of an entry a list uses. */
enum { L_ALL, L_PEER };

struct reg_list {
	uint32_t head, tail;
};

struct reg_entry {
	uint8_t tag[STATE_TAG_LEN];
	uint64_t expiry;
	uint64_t serial;        /* tells this ticket from a later one in the slot */
	uint32_t peer;
	/* [L_ALL]: every live entry in issue order, or the free list;
	 * [L_PEER]: the peer's unspent or spent entries, oldest first. */
	uint32_t link[2][2];    /* [list][0: previous, 1: next] */
	uint8_t state;
};

struct reg_peer {
	uint8_t key[KEY_LEN];
	uint32_t n;             /* entries it holds */
	struct reg_list issued, used;
	uint32_t bprev, bnext;  /* peers holding as many; the free list */
};

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

struct reg {
	struct reg_entry *e;    /* STATE_REGISTER_MAX */
	struct reg_peer *p;     /* STATE_REGISTER_MAX: never more peers than entries */
	uint32_t *index;        /* entry + 1 by tag; 0: empty */
	uint32_t *pindex;       /* peer + 1 by key */
	uint32_t bucket[STATE_REGISTER_PEER_MAX + 1]; /* peers by entries held */
	uint32_t maxn;          /* the most any peer holds */
	/* Slots freed since the start, and the first never used: memory is
	 * touched only as the register fills, not all at startup. */
	struct reg_list all, free;
	uint32_t efresh;
	uint32_t pfree, pfresh;
	size_t live, peers;
	uint64_t serial;
	uint64_t pseed;
	struct state_register_info info;
};

struct state_server {
	char *dir;
	int dirfd;
	/* Where the keys live: KeyDir, shared by a group of servers, or
	 * StateDir itself (keydir == dir, keyfd == dirfd). */
	char *keydir;
	int keyfd;
	int lockfd;             /* KEYS_LOCK_FILE in a KeyDir, else -1 */
	struct cid_server_id issuer; /* ours, named in our tickets */
	char *regname;          /* the register's file in StateDir */
	bool (*peer_key)(const uint8_t *, size_t, uint8_t *, void *);
	void *peer_key_arg;
	uid_t user;
	uint32_t lifetime_s;    /* of a ticket */
	struct event *timer;
	uint8_t reset_secret[STATE_RESET_SECRET_LEN];
	struct keyring tickets; /* session tickets (TLS) */
	struct keyring tokens;  /* Retry and NEW_TOKEN tokens (admit.c) */
	struct reg reg;
	int regfd;
	bool reg_failing;       /* a failed write was logged */
	struct state_stats stats;
};

/* Per-handshake notes on the WOLFSSL object: the serial of the register
 * entry this handshake spent, and whether it was counted already. */
static int ex_spent = -1, ex_counted = -1;

/* --- StateDir and its files ------------------------------------------- */

/* safedir_open, then private to us whatever the umask made it. */
static int
open_private_dir(const char *dir, uid_t user, bool create, char **cause)
{
	struct stat sb;
	int fd = safedir_open("StateDir", dir, user, create, cause);

	if (fd != -1 && fstat(fd, &sb) == 0 && (sb.st_mode & 077) != 0 &&
	    fchmod(fd, 0700) == -1) {
		xasprintf(cause, "StateDir %s: %s", dir, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Open one of our files in StateDir, never through a link, and check it
 * like the directory; a key (`secret`) must not even be readable by
 * others. Returns the descriptor; -1 with errno ENOENT and no cause if it
 * does not exist (and O_CREAT is not given); -1 with *cause otherwise. */
static int
open_file(struct state_server *st, bool key, const char *name, int flags,
    bool secret, char **cause)
{
	const char *dir = key ? st->keydir : st->dir;
	const char *what = key && st->keyfd != st->dirfd ? "KeyDir" : "StateDir";
	struct stat sb;
	char owners[64];
	int fd;

	/* O_NONBLOCK: a FIFO planted under our name must not hang us. */
	fd = openat(key ? st->keyfd : st->dirfd, name,
	    flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd == -1) {
		if (errno == ENOENT && !(flags & O_CREAT))
			return -1;
		if (errno == ELOOP)
			xasprintf(cause, "%s %s: %s: is a symbolic link",
			    what, dir, name);
		else
			xasprintf(cause, "%s %s: %s: %s", what, dir, name,
			    strerror(errno));
		errno = EPERM;
		return -1;
	}
	if (fstat(fd, &sb) == -1)
		xasprintf(cause, "%s %s: %s: %s", what, dir, name,
		    strerror(errno));
	else if (!S_ISREG(sb.st_mode))
		xasprintf(cause, "%s %s: %s: not a regular file", what,
		    dir, name);
	else if (sb.st_nlink != 1)
		xasprintf(cause, "%s %s: %s: %u links to it", what, dir, name,
		    (unsigned)sb.st_nlink);
	else if (!safedir_owner_ok(sb.st_uid, st->user, owners, sizeof owners))
		xasprintf(cause, "%s %s: %s: owned by uid %u, not by %s",
		    what, dir, name, (unsigned)sb.st_uid, owners);
	else if (sb.st_mode & (S_IWGRP | S_IWOTH))
		xasprintf(cause, "%s %s: %s: group or others can write it "
		    "(mode %04o)", what, dir, name, (unsigned)(sb.st_mode & 07777));
	else if (secret && (sb.st_mode & (S_IRWXG | S_IRWXO)))
		xasprintf(cause, "%s %s: %s: group or others can read it "
		    "(mode %04o)", what, dir, name, (unsigned)(sb.st_mode & 07777));
	else
		return fd;
	close(fd);
	errno = EPERM;
	return -1;
}

/* Read a whole small key file: 1 if it has exactly `len` bytes, 0 if it
 * is missing or has another size (the caller makes a new one), -1 with
 * *cause if it may not be used. *ino (if not NULL): the file's inode. */
static int
read_exact(struct state_server *st, const char *name, void *data, size_t len,
    ino_t *ino, char **cause)
{
	int fd = open_file(st, true, name, O_RDONLY, true, cause);
	struct stat sb;
	ssize_t n;

	if (fd == -1)
		return errno == ENOENT ? 0 : -1;
	if (ino != NULL && fstat(fd, &sb) == 0)
		*ino = sb.st_ino;
	/* One byte more than expected tells a file of the wrong size: such a
	 * file is not ours (or from another version), and is replaced. */
	{
		uint8_t extra[1];
		struct iovec iov[2] = { { data, len }, { extra, sizeof extra } };

		n = readv(fd, iov, 2);
	}
	close(fd);
	return n == (ssize_t)len ? 1 : 0;
}

/* Replace a whole file atomically: a new temporary file (never through a
 * link: after User drops root the directory is that user's), synced,
 * renamed over the old one, and the directory synced, so that after a
 * crash the file is either the old one or the new one. Mode 0600. */
static int
write_file(int dirfd, const char *name, const void *data, size_t len)
{
	char *tmp;
	int fd, ret = -1, saved;

	xasprintf(&tmp, "%s.tmp", name);
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd != -1) {
		if (fchmod(fd, 0600) == 0 &&
		    write(fd, data, len) == (ssize_t)len && fsync(fd) == 0 &&
		    renameat(dirfd, tmp, dirfd, name) == 0 &&
		    fsync(dirfd) == 0)
			ret = 0;
		saved = errno;
		close(fd);
		errno = saved;
	}
	if (ret != 0) {
		saved = errno;
		unlinkat(dirfd, tmp, 0);
		errno = saved;
	}
	free(tmp);
	return ret;
}

static int
load_reset_secret(struct state_server *st, char **cause)
{
	int rv = read_exact(st, RESET_KEY_FILE, st->reset_secret,
	    sizeof st->reset_secret, NULL, cause);

	if (rv != 0)
		return rv == 1 ? 0 : -1;
	random_bytes(st->reset_secret, sizeof st->reset_secret);
	if (write_file(st->keyfd, RESET_KEY_FILE, st->reset_secret,
	    sizeof st->reset_secret) != 0) {
		xasprintf(cause, "%s: writing %s: %s", st->keydir,
		    RESET_KEY_FILE, strerror(errno));
		return -1;
	}
	return 0;
}

/* --- Ticket and token keys ------------------------------------------- */

static void
new_key(struct ticket_key *k, uint64_t now)
{
	random_bytes(k->name, sizeof k->name);
	random_bytes(k->key, sizeof k->key);
	k->created = now;
}

static bool
rotation_due(const struct keyring *kr, uint64_t now)
{
	uint64_t c = kr->keys[0].created;

	/* A key made in the future means the clock was set back: its age
	 * says nothing, and a new key costs nothing. */
	return now >= c + kr->rotate_s || c > now + kr->rotate_s;
}

/* When the previous key stops opening: one lifetime after the last thing
 * it made, which it made at the latest when it was replaced or when it
 * fell due (whichever came first: the server may have been down). */
static uint64_t
retire_time(const struct keyring *kr)
{
	uint64_t replaced = kr->keys[0].created;
	uint64_t due = kr->keys[1].created + kr->rotate_s;

	return (replaced < due ? replaced : due) + kr->lifetime_s;
}

static bool
previous_live(const struct keyring *kr, uint64_t now)
{
	return kr->keys[1].created != 0 && now < retire_time(kr);
}

static void
keyring_init(struct keyring *kr, const char *file, uint32_t rotate_s,
    uint32_t lifetime_s)
{
	kr->file = file;
	kr->lifetime_s = lifetime_s;
	/* Two keys cover a lifetime only if a key serves at least that long. */
	kr->rotate_s = rotate_s < lifetime_s ? lifetime_s : rotate_s;
}

/* Write the keyring's file and note its new inode. */
static int
keyring_save(struct state_server *st, struct keyring *kr)
{
	struct stat sb;

	if (write_file(st->keyfd, kr->file, kr->keys, sizeof kr->keys) != 0)
		return -1;
	if (fstatat(st->keyfd, kr->file, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		kr->ino = sb.st_ino;
	return 0;
}

/* In a group, take the keys another member wrote, if its newest key is
 * newer than ours: rotation makes a new file (a new inode), so an
 * unchanged inode means there is nothing to read. Returns whether the
 * keys changed. */
static bool
keyring_reread(struct state_server *st, struct keyring *kr)
{
	struct ticket_key keys[2];
	struct stat sb;
	char *cause = NULL;
	bool changed = false;
	ino_t ino = 0;

	if (st->lockfd == -1 || fstatat(st->keyfd, kr->file, &sb,
	    AT_SYMLINK_NOFOLLOW) == -1 || sb.st_ino == kr->ino)
		return false;
	if (read_exact(st, kr->file, keys, sizeof keys, &ino, &cause) == 1 &&
	    keys[0].created >= kr->keys[0].created) {
		changed = memcmp(keys, kr->keys, sizeof keys) != 0;
		memcpy(kr->keys, keys, sizeof keys);
		kr->ino = ino;
		kr->unsaved = false;
	}
	if (cause != NULL) {
		log_warn("%s", cause);
		free(cause);
	}
	explicit_bzero(keys, sizeof keys);
	return changed;
}

static int
keyring_load(struct state_server *st, struct keyring *kr, char **cause)
{
	int rv = read_exact(st, kr->file, kr->keys, sizeof kr->keys, &kr->ino,
	    cause);

	if (rv == -1)
		return -1;
	if (rv == 1 && kr->keys[0].created != 0)
		return 0; /* keyring_tick rotates it if it is due */
	memset(kr->keys, 0, sizeof kr->keys);
	new_key(&kr->keys[0], clock_wall());
	if (keyring_save(st, kr) != 0) {
		xasprintf(cause, "%s: writing %s: %s", st->keydir, kr->file,
		    strerror(errno));
		return -1;
	}
	return 0;
}

static void keyring_rotate(struct state_server *, struct keyring *, uint64_t);

/* Rotate and retire as due, and save what changed. Returns the wall time
 * at which it has work again; *retry is set when a write failed. */
static uint64_t
keyring_tick(struct state_server *st, struct keyring *kr, uint64_t now,
    bool *retry)
{
	uint64_t next;

	/* A group rotates once: the first member whose key falls due makes
	 * the new one under the lock, the others find it in the file. */
	if (st->lockfd != -1)
		keyring_reread(st, kr);
	if (st->lockfd != -1 && (rotation_due(kr, now) ||
	    (kr->keys[1].created != 0 && !previous_live(kr, now)))) {
		if (flock(st->lockfd, LOCK_EX) == 0) {
			keyring_reread(st, kr);
			keyring_rotate(st, kr, now);
			flock(st->lockfd, LOCK_UN);
		} else
			log_warn("%s: %s: %s", st->keydir, KEYS_LOCK_FILE,
			    strerror(errno));
	} else
		keyring_rotate(st, kr, now);
	next = kr->keys[0].created + kr->rotate_s;
	if (kr->keys[1].created != 0 && retire_time(kr) < next)
		next = retire_time(kr);
	if (kr->unsaved)
		*retry = true;
	return next;
}

/* Rotate and retire as due, and write the file if anything changed. */
static void
keyring_rotate(struct state_server *st, struct keyring *kr, uint64_t now)
{
	if (rotation_due(kr, now)) {
		kr->keys[1] = kr->keys[0];
		new_key(&kr->keys[0], now);
		kr->rotations++;
		kr->unsaved = true;
	}
	if (kr->keys[1].created != 0 && !previous_live(kr, now)) {
		explicit_bzero(&kr->keys[1], sizeof kr->keys[1]);
		kr->unsaved = true;
	}
	/* Until this is on disk a restart would bring the old keys back and
	 * lose what was made since: try again within the minute. */
	if (kr->unsaved) {
		if (keyring_save(st, kr) == 0)
			kr->unsaved = false;
		else
			log_warn("%s: writing %s: %s", st->keydir, kr->file,
			    strerror(errno));
	}
}

/* The key a ticket names, if it may still be used. */
static const struct ticket_key *
key_named(const struct state_server *st, const uint8_t *name, uint64_t now)
{
	const struct keyring *kr = &st->tickets;

	if (memcmp(kr->keys[0].name, name, WOLFSSL_TICKET_NAME_SZ) == 0)
		return &kr->keys[0];
	if (previous_live(kr, now) &&
	    memcmp(kr->keys[1].name, name, WOLFSSL_TICKET_NAME_SZ) == 0)
		return &kr->keys[1];
	return NULL;
}

size_t
state_token_keys(struct state_server *st,
    const uint8_t *keys[STATE_TOKEN_KEYS])
{
	struct keyring *kr = &st->tokens;
	uint64_t now = clock_wall();

	/* Should the timer be late (or the clock jump), no token is made
	 * under a key older than the rotation interval. */
	if (rotation_due(kr, now) || (kr->keys[1].created != 0 &&
	    !previous_live(kr, now)))
		state_server_tick(st);
	/* A token another member of the group made under a key it has just
	 * made: look (one stat) before calling it invalid. */
	keyring_reread(st, kr);
	keys[0] = kr->keys[0].key;
	if (!previous_live(kr, now))
		return 1;
	keys[1] = kr->keys[1].key;
	return 2;
}

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

static void
reg_init(struct reg *r)
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

static void
reg_free(struct reg *r)
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

static uint32_t
reg_get(struct reg *r, const uint8_t tag[STATE_TAG_LEN], uint64_t now)
{
	uint32_t i = entry_lookup(r, tag);

	if (i != NONE && r->e[i].expiry <= now) {
		entry_drop(r, i);
		r->info.expired++;
		i = NONE;
	}
	return i;
}

static void
reg_spend(struct state_server *st, uint32_t i)
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
static int
load_register(struct state_server *st, char **cause)
{
	const size_t size = sizeof(struct reg_record) * (STATE_REGISTER_MAX + 1);
	struct reg_record *recs;
	struct load_item *items;
	size_t n = 0;
	uint64_t now = clock_wall();
	ssize_t got;

	st->regfd = open_file(st, false, st->regname, O_RDWR | O_CREAT, false,
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

void
state_register_issue(struct state_server *st, const uint8_t tag[STATE_TAG_LEN],
    const uint8_t peer[KEY_LEN])
{
	uint64_t now = clock_wall();
	uint32_t i;

	sweep(&st->reg, now, SWEEP_PER_ISSUE);
	/* Tags are AEAD tags under a fresh nonce: equal ones do not happen,
	 * but the index must never hold one twice. */
	if (entry_lookup(&st->reg, tag) != NONE)
		return;
	i = reg_add(&st->reg, tag, peer, now + st->lifetime_s, REG_ISSUED, NONE,
	    now);
	reg_write(st, i, sizeof(struct reg_record));
}

enum state_ticket
state_register_spend(struct state_server *st, const uint8_t tag[STATE_TAG_LEN],
    uint8_t peer[KEY_LEN])
{
	uint32_t i = reg_get(&st->reg, tag, clock_wall());

	if (i == NONE)
		return STATE_TICKET_UNKNOWN;
	if (st->reg.e[i].state == REG_USED)
		return STATE_TICKET_SPENT;
	reg_spend(st, i);
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

/* --- Rotation --------------------------------------------------------- */

unsigned
state_server_tick(struct state_server *st)
{
	uint64_t now = clock_wall(), next, tnext, most = TICK_MAX_S;
	bool retry = false;

	next = keyring_tick(st, &st->tickets, now, &retry);
	tnext = keyring_tick(st, &st->tokens, now, &retry);
	if (tnext < next)
		next = tnext;
	st->stats.rotations = st->tickets.rotations;
	st->stats.token_rotations = st->tokens.rotations;
	if (retry)
		most = KEYS_RETRY_S;
	if (sweep(&st->reg, now, SWEEP_PER_TICK) == SWEEP_PER_TICK)
		return 1;
	next = next > now ? next - now : 1;
	return (unsigned)(next < most ? next : most);
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct state_server *st = arg;
	struct timeval tv = { 0, 0 };

	(void)fd;
	(void)what;
	tv.tv_sec = state_server_tick(st);
	evtimer_add(st->timer, &tv);
}

/* --- Opening and closing ---------------------------------------------- */

struct state_server *
state_server_open(const char *dir, char **cause)
{
	const struct state_opts opts = { .user = (uid_t)-1 };

	return state_server_open_opts(dir, &opts, cause);
}

struct state_server *
state_server_open_opts(const char *dir, const struct state_opts *opts,
    char **cause)
{
	struct state_server *st = xcalloc(1, sizeof *st);
	struct timeval tv = { 0, 0 };
	bool rv;

	st->dir = xstrdup(dir);
	st->keydir = xstrdup(opts->key_dir != NULL ? opts->key_dir : dir);
	st->dirfd = -1;
	st->keyfd = -1;
	st->lockfd = -1;
	st->regfd = -1;
	if (opts->server_id != NULL)
		st->issuer = *opts->server_id;
	/* Each worker of a server keeps its own register: the tickets it
	 * issued and those it took (group_ticket). */
	if (st->issuer.workers > 1)
		xasprintf(&st->regname, "%s-w%u", REGISTER_FILE,
		    (unsigned)st->issuer.worker);
	else
		st->regname = xstrdup(REGISTER_FILE);
	st->peer_key = opts->peer_key;
	st->peer_key_arg = opts->peer_key_arg;
	st->user = opts->user;
	st->lifetime_s = opts->lifetime_s != 0 ? opts->lifetime_s :
	    STATE_TICKET_LIFETIME_S;
	keyring_init(&st->tickets, TICKET_KEY_FILE, opts->rotate_s != 0 ?
	    opts->rotate_s : STATE_ROTATE_S, st->lifetime_s);
	keyring_init(&st->tokens, TOKEN_KEY_FILE, opts->token_rotate_s != 0 ?
	    opts->token_rotate_s : STATE_TOKEN_ROTATE_S, opts->token_rotate_s != 0 ?
	    opts->token_rotate_s : STATE_TOKEN_ROTATE_S);
	reg_init(&st->reg);
	if ((st->dirfd = open_private_dir(dir, opts->user, true, cause)) == -1)
		goto fail;
	if (opts->key_dir == NULL)
		st->keyfd = st->dirfd;
	else if ((st->keyfd = open_private_dir(opts->key_dir, opts->user, true,
	    cause)) == -1 || (st->lockfd = open_file(st, true, KEYS_LOCK_FILE,
	    O_RDWR | O_CREAT, false, cause)) == -1)
		goto fail;
	/* Members starting together must not each make their own keys. */
	if (st->lockfd != -1 && flock(st->lockfd, LOCK_EX) == -1) {
		xasprintf(cause, "KeyDir %s: %s: %s", st->keydir, KEYS_LOCK_FILE,
		    strerror(errno));
		goto fail;
	}
	rv = load_reset_secret(st, cause) != 0 ||
	    keyring_load(st, &st->tickets, cause) != 0 ||
	    keyring_load(st, &st->tokens, cause) != 0;
	if (st->lockfd != -1)
		flock(st->lockfd, LOCK_UN);
	if (rv || load_register(st, cause) != 0)
		goto fail;
	tv.tv_sec = state_server_tick(st);
	/* Keys replaced at start-up were not replaced "while running". */
	st->tickets.rotations = st->tokens.rotations = 0;
	memset(&st->stats, 0, sizeof st->stats);
	if (opts->base != NULL) {
		st->timer = evtimer_new(opts->base, tick_cb, st);
		if (st->timer == NULL) {
			xasprintf(cause, "StateDir %s: cannot make a timer", dir);
			goto fail;
		}
		evtimer_add(st->timer, &tv);
	}
	return st;
fail:
	state_server_free(st);
	return NULL;
}

void
state_server_free(struct state_server *st)
{
	if (st == NULL)
		return;
	if (st->timer != NULL)
		event_free(st->timer);
	if (st->regfd != -1)
		close(st->regfd);
	if (st->lockfd != -1)
		close(st->lockfd);
	if (st->keyfd != -1 && st->keyfd != st->dirfd)
		close(st->keyfd);
	if (st->dirfd != -1)
		close(st->dirfd);
	explicit_bzero(st->tickets.keys, sizeof st->tickets.keys);
	explicit_bzero(st->tokens.keys, sizeof st->tokens.keys);
	explicit_bzero(st->reset_secret, sizeof st->reset_secret);
	reg_free(&st->reg);
	free(st->keydir);
	free(st->regname);
	free(st->dir);
	free(st);
}

const uint8_t *
state_reset_secret(const struct state_server *st)
{
	return st->reset_secret;
}

void
state_server_stats(const struct state_server *st, struct state_stats *out)
{
	*out = st->stats;
}

/* --- Tickets ---------------------------------------------------------- */

/*
 * What a group member's ticket says besides wolfSSL's sealed session: who
 * issued it and for which peer key, so that another member, which has no
 * register entry for it, can still resume it once (see ticket_cb). It
 * rides in the bytes of wolfSSL's IV and MAC fields that the nonce and
 * the tag leave free (20 octets: the peer is named by its key's prefix,
 * which the server looks up), and is authenticated with them.
 */
#define EXTRA_IV_OFF CHACHA20_POLY1305_AEAD_IV_SIZE
#define EXTRA_MAC_OFF STATE_TAG_LEN
#define EXTRA_LEN (WOLFSSL_TICKET_IV_SZ - EXTRA_IV_OFF + \
	WOLFSSL_TICKET_MAC_SZ - EXTRA_MAC_OFF)
struct ticket_extra {
	/* Bits 0-1: the issuer's ServerID length; bits 2-7: its worker + 1
	 * when its server has workers. 0: a lone server's ticket, no extra. */
	uint8_t issuer_tag;
	uint8_t issuer[CID_SERVER_ID_MAX];
	uint8_t peer[STATE_PEER_PREFIX_LEN]; /* its key's first octets */
};
_Static_assert(sizeof(struct ticket_extra) == EXTRA_LEN,
    "the extra fills the free bytes of IV and MAC exactly");

/* A server shares its keys with others (a KeyDir group, or workers). */
_Static_assert(CID_WORKERS_MAX + 1 < 1 << 6, "a worker fits the tag");
static bool
shares_keys(const struct cid_server_id *sid)
{
	return sid->len > 0 || sid->workers > 1;
}

static uint8_t
issuer_tag(const struct cid_server_id *sid)
{
	return (uint8_t)(sid->len |
	    (sid->workers > 1 ? (sid->worker + 1) << 2 : 0));
}

static void
extra_put(const struct ticket_extra *x, uint8_t *iv, uint8_t *mac)
{
	const uint8_t *p = (const uint8_t *)x;
	size_t n = WOLFSSL_TICKET_IV_SZ - EXTRA_IV_OFF;

	memcpy(iv + EXTRA_IV_OFF, p, n);
	memcpy(mac + EXTRA_MAC_OFF, p + n, EXTRA_LEN - n);
}

static void
extra_get(struct ticket_extra *x, const uint8_t *iv, const uint8_t *mac)
{
	uint8_t *p = (uint8_t *)x;
	size_t n = WOLFSSL_TICKET_IV_SZ - EXTRA_IV_OFF;

	memcpy(p, iv + EXTRA_IV_OFF, n);
	memcpy(p + n, mac + EXTRA_MAC_OFF, EXTRA_LEN - n);
}

/* ChaCha20-Poly1305 with the key name, the nonce and (when there is one)
 * the extra as associated data. A lone server's tickets have no extra
 * and the associated data they always had. Returns its length. */
static size_t
ticket_aad(uint8_t *aad, const uint8_t *name, const uint8_t *iv,
    const uint8_t *mac)
{
	struct ticket_extra x;
	size_t n = WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE;

	memcpy(aad, name, WOLFSSL_TICKET_NAME_SZ);
	memcpy(aad + WOLFSSL_TICKET_NAME_SZ, iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
	extra_get(&x, iv, mac);
	if (x.issuer_tag == 0)
		return n;
	memcpy(aad + n, &x, sizeof x);
	return n + sizeof x;
}

static int
ticket_seal(struct state_server *st, const uint8_t *peer,
    uint8_t name[WOLFSSL_TICKET_NAME_SZ], uint8_t iv[WOLFSSL_TICKET_IV_SZ],
    uint8_t mac[WOLFSSL_TICKET_MAC_SZ], uint8_t *buf, size_t len)
{
	uint8_t aad[WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE +
	    EXTRA_LEN];
	struct ticket_extra x;
	const struct ticket_key *k;
	size_t aadlen;

	/* Should the timer be late (or the clock jump), no ticket is sealed
	 * under a key older than the rotation interval. */
	if (rotation_due(&st->tickets, clock_wall()))
		state_server_tick(st);
	k = &st->tickets.keys[0];
	if (len > UINT32_MAX)
		return -1;
	memcpy(name, k->name, WOLFSSL_TICKET_NAME_SZ);
	random_bytes(iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
	memset(&x, 0, sizeof x);
	if (peer != NULL && shares_keys(&st->issuer)) {
		x.issuer_tag = issuer_tag(&st->issuer);
		memcpy(x.issuer, st->issuer.id, st->issuer.len);
		memcpy(x.peer, peer, sizeof x.peer);
	}
	memset(mac, 0, WOLFSSL_TICKET_MAC_SZ);
	extra_put(&x, iv, mac);
	aadlen = ticket_aad(aad, name, iv, mac);
	/* The tag goes into the MAC field's first bytes, before the extra. */
	return wc_ChaCha20Poly1305_Encrypt(k->key, iv, aad, (word32)aadlen, buf,
	    (word32)len, buf, mac) == 0 ? 0 : -1;
}

int
state_ticket_seal(struct state_server *st, uint8_t name[WOLFSSL_TICKET_NAME_SZ],
    uint8_t iv[WOLFSSL_TICKET_IV_SZ], uint8_t mac[WOLFSSL_TICKET_MAC_SZ],
    uint8_t *buf, size_t len)
{
	return ticket_seal(st, NULL, name, iv, mac, buf, len);
}

int
state_ticket_open(struct state_server *st,
    const uint8_t name[WOLFSSL_TICKET_NAME_SZ],
    const uint8_t iv[WOLFSSL_TICKET_IV_SZ],
    const uint8_t mac[WOLFSSL_TICKET_MAC_SZ], uint8_t *buf, size_t len)
{
	uint8_t aad[WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE +
	    EXTRA_LEN];
	const struct ticket_key *k = key_named(st, name, clock_wall());
	size_t aadlen;

	if (k == NULL || len > UINT32_MAX)
		return -1;
	aadlen = ticket_aad(aad, name, iv, mac);
	return wc_ChaCha20Poly1305_Decrypt(k->key, iv, aad, (word32)aadlen, buf,
	    (word32)len, mac, buf) == 0 ? 0 : -1;
}

static const uint8_t *
peer_key_of(WOLFSSL *ssl)
{
	ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);

	return ref != NULL ? quic_conn_peer_key(ref->user_data) : NULL;
}

/* Count a rejected ticket once per handshake, however many times wolfSSL
 * asks about it (once per cipher suite it tries). */
static void
count_once(WOLFSSL *ssl, struct state_server *st, uint64_t *counter)
{
	if (wolfSSL_get_ex_data(ssl, ex_counted) == NULL) {
		(*counter)++;
		wolfSSL_set_ex_data(ssl, ex_counted, st);
	}
}

/*
 * A ticket our register does not know. If another member of our group
 * issued it, resume it here once: it goes into our register as spent, so
 * a replay of it here finds it so. A replayed 0-RTT flight can therefore
 * be taken once by each member (by its issuer too), never more; 0-RTT
 * carries only IP packets, to which a replay is a network duplicate. Our
 * own tickets that the register forgot (expired, pushed out) stay
 * refused, as on a lone server.
 */
static int
group_ticket(WOLFSSL *ssl, struct state_server *st,
    const uint8_t *key_name, const uint8_t *iv, const uint8_t *mac,
    uint8_t *ticket, int inlen, int *outlen)
{
	struct ticket_extra x;
	uint8_t peer[KEY_LEN];
	uint64_t now = clock_wall();
	uint32_t i;

	extra_get(&x, iv, mac);
	if (x.issuer_tag == 0 || !shares_keys(&st->issuer) ||
	    (x.issuer_tag == issuer_tag(&st->issuer) &&
	    memcmp(x.issuer, st->issuer.id, st->issuer.len) == 0) ||
	    st->peer_key == NULL ||
	    state_ticket_open(st, key_name, iv, mac, ticket,
	    (size_t)inlen) != 0 ||
	    !st->peer_key(x.peer, sizeof x.peer, peer, st->peer_key_arg)) {
		count_once(ssl, st, &st->stats.unknown);
		return WOLFSSL_TICKET_RET_REJECT;
	}
	*outlen = inlen;
	sweep(&st->reg, now, SWEEP_PER_ISSUE);
	i = reg_add(&st->reg, mac, peer, now + st->lifetime_s, REG_USED, NONE,
	    now);
	reg_write(st, i, sizeof(struct reg_record));
	wolfSSL_set_ex_data(ssl, ex_spent, (void *)(uintptr_t)st->reg.e[i].serial);
	if (!quic_tls_resumed(ssl, peer))
		return WOLFSSL_TICKET_RET_REJECT;
	st->stats.resumed++;
	st->stats.group_resumed++;
	return WOLFSSL_TICKET_RET_OK;
}

/* wolfSSL's ticket callback: seal and record, or look up, open and spend.
 * The tag (first bytes of `mac`) names the ticket in the register. */
static int
ticket_cb(WOLFSSL *ssl, unsigned char key_name[WOLFSSL_TICKET_NAME_SZ],
    unsigned char iv[WOLFSSL_TICKET_IV_SZ],
    unsigned char mac[WOLFSSL_TICKET_MAC_SZ], int enc, unsigned char *ticket, int inlen, int *outlen, void *arg)
{
	struct state_server *st = arg;
	struct reg *r = &st->reg;
	const uint8_t *peer;
	uint32_t i;

	if (inlen < 0)
		return WOLFSSL_TICKET_RET_FATAL;
	if (enc) {
		if ((peer = peer_key_of(ssl)) == NULL)
			return WOLFSSL_TICKET_RET_FATAL; /* no ticket: not fatal */
		if (ticket_seal(st, peer, key_name, iv, mac, ticket,
		    (size_t)inlen) != 0)
			return WOLFSSL_TICKET_RET_FATAL;
		*outlen = inlen;
		state_register_issue(st, mac, peer);
		st->stats.issued++;
		return WOLFSSL_TICKET_RET_OK;
	}
	/* Not one of our keys (another server's, or retired): say nothing.
	 * In a group, another member may have just made a new key. */
	if (key_named(st, key_name, clock_wall()) == NULL &&
	    (!keyring_reread(st, &st->tickets) ||
	    key_named(st, key_name, clock_wall()) == NULL))
		return WOLFSSL_TICKET_RET_REJECT;
	if ((i = reg_get(r, mac, clock_wall())) == NONE)
		return group_ticket(ssl, st, key_name, iv, mac, ticket, inlen,
		    outlen);
	/* Single use: a second ClientHello with this ticket is a replay (or
	 * a client retrying); no resumption, no 0-RTT. The handshake that
	 * spent it may ask again for another suite. */
	if (r->e[i].state == REG_USED &&
	    (uintptr_t)wolfSSL_get_ex_data(ssl, ex_spent) != r->e[i].serial) {
		count_once(ssl, st, &st->stats.replayed);
		return WOLFSSL_TICKET_RET_REJECT;
	}
	if (state_ticket_open(st, key_name, iv, mac, ticket, (size_t)inlen) != 0)
		return WOLFSSL_TICKET_RET_REJECT;
	*outlen = inlen;
	if (r->e[i].state == REG_USED)
		return WOLFSSL_TICKET_RET_OK; /* this handshake, another suite */
	reg_spend(st, i);
	wolfSSL_set_ex_data(ssl, ex_spent, (void *)(uintptr_t)r->e[i].serial);
	if (!quic_tls_resumed(ssl, r->p[r->e[i].peer].key))
		return WOLFSSL_TICKET_RET_REJECT;
	st->stats.resumed++;
	return WOLFSSL_TICKET_RET_OK;
}

bool
state_ticket_spent_here(WOLFSSL *ssl)
{
	/* Serials start at 1; the note is made only where reg_spend ran. */
	return ex_spent >= 0 && wolfSSL_get_ex_data(ssl, ex_spent) != NULL;
}

void
state_server_attach(struct state_server *st, WOLFSSL_CTX *ctx)
{
	if (ex_spent < 0) {
		/* Index 0 is the app data (our ngtcp2_crypto_conn_ref), which
		 * wolfSSL's counter hands out first: skip it. */
		ex_spent = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		if (ex_spent == 0)
			ex_spent = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		ex_counted = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	}
	wolfSSL_CTX_set_TicketEncCb(ctx, ticket_cb);
	wolfSSL_CTX_set_TicketEncCtx(ctx, st);
	wolfSSL_CTX_set_TicketHint(ctx, (int)st->lifetime_s);
}

/* Client session files: "RVS1", then length-prefixed session and params. */
static const char session_magic[4] = { 'R', 'V', 'S', '1' };

int
state_client_save(const char *dir, const char *id, const uint8_t *session,
    size_t sessionlen, const uint8_t *params, size_t paramslen)
{
	size_t len = sizeof session_magic + 8 + sessionlen + paramslen;
	uint8_t *buf = xmalloc(len), *p = buf;
	uint32_t l;
	char *name, *cause = NULL;
	int dirfd, ret;

	if ((dirfd = open_private_dir(dir, (uid_t)-1, true, &cause)) == -1) {
		log_warn("%s", cause);
		free(cause);
		free(buf);
		return -1;
	}
	memcpy(p, session_magic, sizeof session_magic);
	p += sizeof session_magic;
	l = (uint32_t)sessionlen;
	memcpy(p, &l, 4);
	if (sessionlen > 0)
		memcpy(p + 4, session, sessionlen);
	p += 4 + sessionlen;
	l = (uint32_t)paramslen;
	memcpy(p, &l, 4);
	if (paramslen > 0)
		memcpy(p + 4, params, paramslen);
	xasprintf(&name, "session-%s", id);
	ret = write_file(dirfd, name, buf, len);
	free(name);
	free(buf);
	close(dirfd);
	return ret;
}

/* The session file for `id`; with `take`, removed whatever it holds. */
static int
client_read(const char *dir, const char *id, bool take, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen)
{
	uint8_t buf[16384];
	uint32_t l1, l2;
	ssize_t n;
	char *path;
	int fd;

	xasprintf(&path, "%s/session-%s", dir, id);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (take)
		unlink(path);
	free(path);
	if (fd == -1)
		return -1;
	n = read(fd, buf, sizeof buf);
	close(fd);
	if (n < (ssize_t)sizeof session_magic + 8 ||
	    memcmp(buf, session_magic, sizeof session_magic) != 0)
		return -1;
	memcpy(&l1, buf + 4, 4);
	if ((size_t)n < 8 + (size_t)l1 + 4)
		return -1;
	memcpy(&l2, buf + 8 + l1, 4);
	if ((size_t)n != 12 + (size_t)l1 + l2)
		return -1;
	*session = xmalloc(l1);
	memcpy(*session, buf + 8, l1);
	*sessionlen = l1;
	*params = xmalloc(l2 ? l2 : 1);
	memcpy(*params, buf + 12 + l1, l2);
	*paramslen = l2;
	return 0;
}

int
state_client_take(const char *dir, const char *id, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen)
{
	/* A ticket serves once: whatever happens, it is gone now. */
	return client_read(dir, id, true, session, sessionlen, params,
	    paramslen);
}

int
state_client_load(const char *dir, const char *id, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen)
{
	return client_read(dir, id, false, session, sessionlen, params,
	    paramslen);
}

void
state_client_forget(const char *dir, const char *id)
{
	char *path;

	xasprintf(&path, "%s/session-%s", dir, id);
	unlink(path);
	free(path);
}

int
state_note_write(const char *dir, uid_t user, const char *name,
    const void *data, size_t len, char **cause)
{
	int dirfd, ret;

	if ((dirfd = open_private_dir(dir, user, true, cause)) == -1)
		return -1;
	if ((ret = write_file(dirfd, name, data, len)) != 0)
		xasprintf(cause, "StateDir %s: writing %s: %s", dir, name,
		    strerror(errno));
	close(dirfd);
	return ret;
}

ssize_t
state_note_read(const char *dir, uid_t user, const char *name, void *buf,
    size_t cap, char **cause)
{
	struct stat sb;
	ssize_t n = -1;
	int dirfd, fd;

	/* No StateDir yet: nothing was noted in it. */
	if (lstat(dir, &sb) == -1 && errno == ENOENT)
		return 0;
	if ((dirfd = safedir_open("StateDir", dir, user, false, cause)) == -1)
		return -1;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1 && errno == ENOENT)
		n = 0;
	else if (fd == -1)
		xasprintf(cause, "StateDir %s: %s: %s", dir, name, strerror(errno));
	else if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode))
		xasprintf(cause, "StateDir %s: %s: not a regular file", dir, name);
	else if ((n = read(fd, buf, cap)) == -1)
		xasprintf(cause, "StateDir %s: %s: %s", dir, name, strerror(errno));
	if (fd != -1)
		close(fd);
	close(dirfd);
	return n;
}

int
state_note_remove(const char *dir, uid_t user, const char *name, char **cause)
{
	struct stat sb;
	int dirfd, ret = 0;

	if (lstat(dir, &sb) == -1 && errno == ENOENT)
		return 0;
	if ((dirfd = safedir_open("StateDir", dir, user, false, cause)) == -1)
		return -1;
	if (unlinkat(dirfd, name, 0) == -1 && errno != ENOENT) {
		xasprintf(cause, "StateDir %s: removing %s: %s", dir, name,
		    strerror(errno));
		ret = -1;
	}
	close(dirfd);
	return ret;
}

/* StateDir: the directory and our files in it, the reset secret, the
 * rotated ticket and token keyrings (KeyDir in a group), opening, closing
 * and the timer that rotates. The ticket register is state-register.c,
 * ticket sealing state-ticket.c, rove's sessions and notes state-client.c;
 * state-int.h holds what they share. */
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
#include "state-int.h"

#define TICKET_KEY_FILE "ticket.key"
#define TOKEN_KEY_FILE "token.key"
#define RESET_KEY_FILE "reset.key"
#define REGISTER_FILE "tickets"
/* In KeyDir: held (flock) by the member of a group that rotates a key. */
#define KEYS_LOCK_FILE "keys.lock"

/* The timer looks at least this often, so that a wall clock set forward
 * or back is noticed within the hour rather than the day. */
#define TICK_MAX_S 3600
/* How soon to try again to write a key file after a failure. */
#define KEYS_RETRY_S 60

/* --- StateDir and its files ------------------------------------------- */

/* safedir_open, then private to us whatever the umask made it. */
int
state_open_private_dir(const char *dir, uid_t user, bool create, char **cause)
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
int
state_open_file(struct state_server *st, bool key, const char *name, int flags,
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
	int fd = state_open_file(st, true, name, O_RDONLY, true, cause);
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
int
state_write_file(int dirfd, const char *name, const void *data, size_t len)
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
	if (state_write_file(st->keyfd, RESET_KEY_FILE, st->reset_secret,
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

bool
state_keyring_due(const struct keyring *kr, uint64_t now)
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

	if (state_write_file(st->keyfd, kr->file, kr->keys, sizeof kr->keys) != 0)
		return -1;
	if (fstatat(st->keyfd, kr->file, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		kr->ino = sb.st_ino;
	return 0;
}

/* In a group, take the keys another member wrote, if its newest key is
 * newer than ours: rotation makes a new file (a new inode), so an
 * unchanged inode means there is nothing to read. Returns whether the
 * keys changed. */
bool
state_keyring_reread(struct state_server *st, struct keyring *kr)
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
		state_keyring_reread(st, kr);
	if (st->lockfd != -1 && (state_keyring_due(kr, now) ||
	    (kr->keys[1].created != 0 && !previous_live(kr, now)))) {
		if (flock(st->lockfd, LOCK_EX) == 0) {
			state_keyring_reread(st, kr);
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
	if (state_keyring_due(kr, now)) {
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
const struct ticket_key *
state_key_named(const struct state_server *st, const uint8_t *name, uint64_t now)
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
	if (state_keyring_due(kr, now) || (kr->keys[1].created != 0 &&
	    !previous_live(kr, now)))
		state_server_tick(st);
	/* A token another member of the group made under a key it has just
	 * made: look (one stat) before calling it invalid. */
	state_keyring_reread(st, kr);
	keys[0] = kr->keys[0].key;
	if (!previous_live(kr, now))
		return 1;
	keys[1] = kr->keys[1].key;
	return 2;
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
	if (state_register_sweep(st, now))
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
	 * issued and those it took (group_ticket, state-ticket.c). */
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
	state_register_init(&st->reg);
	if ((st->dirfd = state_open_private_dir(dir, opts->user, true, cause)) == -1)
		goto fail;
	if (opts->key_dir == NULL)
		st->keyfd = st->dirfd;
	else if ((st->keyfd = state_open_private_dir(opts->key_dir, opts->user, true,
	    cause)) == -1 || (st->lockfd = state_open_file(st, true, KEYS_LOCK_FILE,
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
	if (rv || state_register_load(st, cause) != 0)
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
	state_register_free(&st->reg);
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

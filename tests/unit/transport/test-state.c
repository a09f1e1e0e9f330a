/* Unit tests for common/transport/state.c and its parts (state-register.c,
 * state-client.c): the server's StateDir files and the client's single-use
 * session store. Tickets themselves (state-ticket.c) are exercised through
 * real handshakes in test-quic.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <event2/event.h>

#include "base/clock.h"
#include "base/safedir.h"
#include "transport/state.h"

/* The register file: a header and one 64-byte record per entry. */
#define REGISTER_FILE_SIZE (64 * (STATE_REGISTER_MAX + 1))
#define DAY UINT64_C(86400)
#define T0 UINT64_C(1700000000)

/* The wall clock the module sees: moved by hand. */
static uint64_t wall = T0;

static uint64_t
test_wall(void)
{
	return wall;
}

struct tmp {
	char root[64];     /* made by mkdtemp, removed recursively */
	char dir[128];     /* the StateDir under test, not yet created */
};

static void
rm_rf(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	char sub[512];

	if (lstat(path, &st) == -1)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
			rm_rf(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

static int
tmp_setup(void **state)
{
	struct tmp *t = calloc(1, sizeof *t);

	if (t == NULL)
		return -1;
	/* The usual umask: the module must not depend on a strict one. */
	umask(022);
	snprintf(t->root, sizeof t->root, "/tmp/rove-test-state.XXXXXX");
	if (mkdtemp(t->root) == NULL) {
		free(t);
		return -1;
	}
	snprintf(t->dir, sizeof t->dir, "%s/state", t->root);
	wall = T0;
	clock_set_wall_source(test_wall);
	*state = t;
	return 0;
}

static int
tmp_teardown(void **state)
{
	struct tmp *t = *state;

	clock_set_wall_source(NULL);
	rm_rf(t->root);
	free(t);
	return 0;
}

static mode_t
mode_of(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	if (name != NULL)
		snprintf(path, sizeof path, "%s/%s", dir, name);
	else
		snprintf(path, sizeof path, "%s", dir);
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode;
}

static off_t
size_of(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	assert_int_equal(lstat(path, &st), 0);
	return st.st_size;
}

static bool
exists(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* Read a whole small file; returns its length. */
static size_t
slurp(const char *dir, const char *name, uint8_t *buf, size_t len)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd != -1);
	n = read(fd, buf, len);
	assert_true(n >= 0);
	close(fd);
	return (size_t)n;
}

static void
put_file(const char *dir, const char *name, const void *data, size_t len)
{
	char path[512];
	int fd;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd != -1);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* The names in `dir`, sorted, joined by spaces. */
static void
list_dir(const char *dir, char *out, size_t outlen)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);

	assert_true(n >= 0);
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		size_t used = strlen(out);

		if (names[i]->d_name[0] != '.') {
			int w = snprintf(out + used, outlen - used, "%s%s",
			    used > 0 ? " " : "", names[i]->d_name);
			assert_true(w > 0 && (size_t)w < outlen - used);
		}
		free(names[i]);
	}
	free(names);
}

static void
test_server_creates_private_files(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	struct state_stats stats;
	uint8_t secret[64];
	char *cause = NULL, names[256];

	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	assert_null(cause);
	assert_true(S_ISDIR(mode_of(t->dir, NULL)));
	assert_int_equal(mode_of(t->dir, NULL) & 07777, 0700);
	assert_int_equal(mode_of(t->dir, "reset.key") & 07777, 0600);
	assert_int_equal(mode_of(t->dir, "ticket.key") & 07777, 0600);
	assert_int_equal(mode_of(t->dir, "tickets") & 07777, 0600);
	assert_true(S_ISREG(mode_of(t->dir, "reset.key")));
	assert_true(S_ISREG(mode_of(t->dir, "ticket.key")));
	assert_true(S_ISREG(mode_of(t->dir, "tickets")));
	/* Nothing else: no temporary files left behind. */
	list_dir(t->dir, names, sizeof names);
	assert_string_equal(names, "reset.key ticket.key tickets token.key");

	/* The secret on disk is the one in use; the register starts empty. */
	assert_int_equal(size_of(t->dir, "reset.key"), STATE_RESET_SECRET_LEN);
	assert_int_equal(slurp(t->dir, "reset.key", secret, sizeof secret),
	    STATE_RESET_SECRET_LEN);
	assert_memory_equal(secret, state_reset_secret(st), STATE_RESET_SECRET_LEN);
	assert_true(size_of(t->dir, "ticket.key") > 0);
	/* The register has its full size from the start: a header and a
	 * record per entry, rewritten in place. */
	assert_int_equal(size_of(t->dir, "tickets"), REGISTER_FILE_SIZE);

	memset(&stats, 0xff, sizeof stats);
	state_server_stats(st, &stats);
	assert_int_equal(stats.issued, 0);
	assert_int_equal(stats.resumed, 0);
	assert_int_equal(stats.replayed, 0);
	assert_int_equal(stats.unknown, 0);
	state_server_free(st);
	state_server_free(NULL);
}

static void
test_server_nested_dirs(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	char deep[256], *cause = NULL;

	snprintf(deep, sizeof deep, "%s/a/b", t->dir);
	st = state_server_open(deep, &cause);
	assert_non_null(st);
	assert_null(cause);
	/* Every level it made is private. */
	assert_int_equal(mode_of(t->dir, NULL) & 07777, 0700);
	assert_int_equal(mode_of(t->dir, "a") & 07777, 0700);
	assert_int_equal(mode_of(deep, NULL) & 07777, 0700);
	assert_int_equal(mode_of(deep, "reset.key") & 07777, 0600);
	state_server_free(st);
}

static void
test_server_persistence(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	uint8_t secret[STATE_RESET_SECRET_LEN], keys1[512], keys2[512];
	size_t n1, n2;
	char *cause = NULL;

	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	memcpy(secret, state_reset_secret(st), sizeof secret);
	state_server_free(st);
	n1 = slurp(t->dir, "ticket.key", keys1, sizeof keys1);

	/* A restart finds the same secret and the same ticket keys. */
	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	assert_null(cause);
	assert_memory_equal(state_reset_secret(st), secret, sizeof secret);
	n2 = slurp(t->dir, "ticket.key", keys2, sizeof keys2);
	assert_int_equal(n1, n2);
	assert_memory_equal(keys1, keys2, n1);
	state_server_free(st);

	/* A different directory has its own secret. */
	{
		char other[256];
		struct state_server *st2;

		snprintf(other, sizeof other, "%s/other", t->root);
		st2 = state_server_open(other, &cause);
		assert_non_null(st2);
		assert_memory_not_equal(state_reset_secret(st2), secret, sizeof secret);
		state_server_free(st2);
	}
}

static void
test_server_damaged_secret(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	uint8_t secret[STATE_RESET_SECRET_LEN], disk[64];
	char *cause = NULL;

	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	memcpy(secret, state_reset_secret(st), sizeof secret);
	state_server_free(st);

	/* A short reset.key is replaced by a fresh, full-length secret. */
	put_file(t->dir, "reset.key", "short", 5);
	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	assert_null(cause);
	assert_memory_not_equal(state_reset_secret(st), secret, sizeof secret);
	assert_int_equal(slurp(t->dir, "reset.key", disk, sizeof disk),
	    STATE_RESET_SECRET_LEN);
	assert_memory_equal(disk, state_reset_secret(st), STATE_RESET_SECRET_LEN);
	assert_int_equal(mode_of(t->dir, "reset.key") & 07777, 0600);
	state_server_free(st);
}

static void
test_server_open_fails(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	char path[256], want[300], *cause = NULL;

	/* A regular file where a directory should be. */
	snprintf(path, sizeof path, "%s/file", t->root);
	put_file(t->root, "file", "x", 1);
	strncat(path, "/sub", sizeof path - strlen(path) - 1);
	st = state_server_open(path, &cause);
	assert_null(st);
	assert_non_null(cause);
	snprintf(want, sizeof want, "StateDir %s: Not a directory", path);
	assert_string_equal(cause, want);
	free(cause);
}

/* --- Ticket keys ------------------------------------------------------ */

static struct state_server *
open_ok(const struct tmp *t)
{
	char *cause = NULL;
	struct state_server *st = state_server_open(t->dir, &cause);

	if (st == NULL)
		fail_msg("state_server_open: %s", cause);
	return st;
}

/* The ticket-key tests count the timer's seconds to the next rotation;
 * token keys rotating hourly would cut them short, so theirs is moved out
 * of the way (test_token_keys covers them). */
static const struct state_opts ticket_opts = { .user = (uid_t)-1,
    .token_rotate_s = 30 * DAY };

static struct state_server *
open_tickets(const struct tmp *t)
{
	char *cause = NULL;
	struct state_server *st = state_server_open_opts(t->dir, &ticket_opts,
	    &cause);

	if (st == NULL)
		fail_msg("state_server_open_opts: %s", cause);
	return st;
}


/* A ticket sealed by the module, and the text inside. */
struct sealed {
	uint8_t name[WOLFSSL_TICKET_NAME_SZ];
	uint8_t iv[WOLFSSL_TICKET_IV_SZ];
	uint8_t mac[WOLFSSL_TICKET_MAC_SZ];
	uint8_t buf[32];
	size_t len;
};

static void
seal(struct state_server *st, struct sealed *s, const char *text)
{
	s->len = strlen(text);
	assert_true(s->len <= sizeof s->buf);
	memcpy(s->buf, text, s->len);
	assert_int_equal(state_ticket_seal(st, s->name, s->iv, s->mac, s->buf,
	    s->len), 0);
	assert_memory_not_equal(s->buf, text, s->len);
}

/* Whether `s` opens to `text`; on a copy, so it can be tried again. */
static bool
opens(struct state_server *st, const struct sealed *s, const char *text)
{
	uint8_t buf[32];

	memcpy(buf, s->buf, s->len);
	if (state_ticket_open(st, s->name, s->iv, s->mac, buf, s->len) != 0)
		return false;
	assert_memory_equal(buf, text, s->len);
	return true;
}

/* The key names in ticket.key, two records of name (16 bytes), key (32)
 * and creation time (8): [0] the newest, [1] the one before or zeros. */
static void
disk_key_names(const char *dir, uint8_t names[2][WOLFSSL_TICKET_NAME_SZ])
{
	uint8_t buf[256];

	assert_int_equal(slurp(dir, "ticket.key", buf, sizeof buf), 112);
	memcpy(names[0], buf, WOLFSSL_TICKET_NAME_SZ);
	memcpy(names[1], buf + 56, WOLFSSL_TICKET_NAME_SZ);
}

static const uint8_t no_name[WOLFSSL_TICKET_NAME_SZ];

/* ticket.key names `newest`, then `previous` (NULL: no previous key). */
static void
expect_disk_keys(const char *dir, const uint8_t *newest,
    const uint8_t *previous)
{
	uint8_t names[2][WOLFSSL_TICKET_NAME_SZ];

	disk_key_names(dir, names);
	assert_memory_equal(names[0], newest, WOLFSSL_TICKET_NAME_SZ);
	assert_memory_equal(names[1], previous != NULL ? previous : no_name,
	    WOLFSSL_TICKET_NAME_SZ);
}

static uint64_t
rotations(const struct state_server *st)
{
	struct state_stats ss;

	state_server_stats(st, &ss);
	return ss.rotations;
}

static void
test_rotation(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	struct sealed a, b, c;
	char *cause = NULL;

	st = state_server_open_opts(t->dir, &ticket_opts, &cause);
	assert_non_null(st);
	seal(st, &a, "before");
	expect_disk_keys(t->dir, a.name, NULL);

	/* A second short of a day: the same key, due in a second. */
	wall = T0 + DAY - 1;
	assert_int_equal(state_server_tick(st), 1);
	assert_int_equal(rotations(st), 0);
	seal(st, &b, "still");
	assert_memory_equal(b.name, a.name, sizeof a.name);

	/* A day: a new key seals, the old one still opens, both on disk; the
	 * next work is a day away, looked at again within the hour. */
	wall = T0 + DAY;
	assert_int_equal(state_server_tick(st), 3600);
	assert_int_equal(rotations(st), 1);
	seal(st, &c, "after");
	assert_memory_not_equal(c.name, a.name, sizeof a.name);
	assert_true(opens(st, &a, "before"));
	assert_true(opens(st, &b, "still"));
	assert_true(opens(st, &c, "after"));
	expect_disk_keys(t->dir, c.name, a.name);

	/* A restart keeps both keys, and the newest still seals. */
	state_server_free(st);
	st = state_server_open_opts(t->dir, &ticket_opts, &cause);
	assert_non_null(st);
	assert_null(cause);
	assert_true(opens(st, &a, "before"));
	assert_true(opens(st, &c, "after"));
	seal(st, &b, "restarted");
	assert_memory_equal(b.name, c.name, sizeof c.name);

	/* The old key opens for one ticket lifetime after it was replaced,
	 * and not a second longer. */
	wall = T0 + DAY + STATE_TICKET_LIFETIME_S - 1;
	assert_int_equal(state_server_tick(st), 1);
	assert_true(opens(st, &a, "before"));
	wall++;
	state_server_tick(st);
	assert_false(opens(st, &a, "before"));
	assert_true(opens(st, &c, "after"));
	/* Lifetime and interval being equal, that is the next rotation. */
	assert_int_equal(rotations(st), 1);
	seal(st, &b, "third key");
	assert_memory_not_equal(b.name, c.name, sizeof c.name);
	expect_disk_keys(t->dir, b.name, c.name);
	state_server_free(st);
}

/* An interval longer than the lifetime: the old key goes between two
 * rotations, from memory and from disk. An interval shorter than the
 * lifetime is raised to it, so that two keys always cover a ticket. */
static void
test_rotation_retires(void **state)
{
	struct tmp *t = *state;
	const struct state_opts two_days = { .user = (uid_t)-1,
	    .rotate_s = 2 * DAY, .lifetime_s = DAY, .token_rotate_s = 30 * DAY };
	const struct state_opts short_interval = { .user = (uid_t)-1,
	    .rotate_s = 10, .lifetime_s = 100, .token_rotate_s = 30 * DAY };
	struct state_server *st;
	struct sealed a, b;
	char *cause = NULL;

	st = state_server_open_opts(t->dir, &two_days, &cause);
	assert_non_null(st);
	seal(st, &a, "first");
	wall = T0 + 2 * DAY;
	state_server_tick(st);
	assert_int_equal(rotations(st), 1);
	seal(st, &b, "second");
	wall = T0 + 3 * DAY - 1;
	assert_int_equal(state_server_tick(st), 1);
	assert_true(opens(st, &a, "first"));
	wall++;
	assert_int_equal(state_server_tick(st), 3600);
	assert_false(opens(st, &a, "first"));
	assert_true(opens(st, &b, "second"));
	assert_int_equal(rotations(st), 1);
	expect_disk_keys(t->dir, b.name, NULL);
	state_server_free(st);

	rm_rf(t->dir);
	wall = T0;
	st = state_server_open_opts(t->dir, &short_interval, &cause);
	assert_non_null(st);
	seal(st, &a, "short");
	wall += 99;
	assert_int_equal(state_server_tick(st), 1);
	assert_int_equal(rotations(st), 0);
	wall++;
	state_server_tick(st);
	assert_int_equal(rotations(st), 1);
	state_server_free(st);
}

/* No tick for days (a late timer, or roved stopped): sealing never uses
 * a key past its interval, and a key whose tickets all expired while
 * roved was down is gone at once. */
static void
test_rotation_catches_up(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	struct sealed a, b;
	uint8_t names[2][WOLFSSL_TICKET_NAME_SZ];
	char *cause = NULL;

	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	seal(st, &a, "old");
	wall = T0 + DAY;
	seal(st, &b, "sealed late");
	assert_memory_not_equal(b.name, a.name, sizeof a.name);
	assert_int_equal(rotations(st), 1);
	assert_true(opens(st, &a, "old"));
	state_server_free(st);

	/* Down from T0 + DAY to T0 + 4 DAY: b's key sealed its last ticket
	 * at T0 + 2 DAY at the latest, which expired at T0 + 3 DAY. */
	wall = T0 + 4 * DAY;
	st = state_server_open(t->dir, &cause);
	assert_non_null(st);
	assert_false(opens(st, &a, "old"));
	assert_false(opens(st, &b, "sealed late"));
	disk_key_names(t->dir, names);
	assert_memory_not_equal(names[0], b.name, sizeof b.name);
	assert_memory_equal(names[1], no_name, sizeof no_name);
	state_server_free(st);
}

/* Token keys: kept in token.key, the same after a restart, a new one every
 * hour while the one before still verifies for another hour, then gone;
 * a server that was down longer than that starts with one key. */
static void
test_token_keys(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	struct state_stats ss;
	const uint8_t *k[STATE_TOKEN_KEYS];
	uint8_t k0[STATE_TOKEN_KEY_LEN], k1[STATE_TOKEN_KEY_LEN];
	uint8_t disk[256];

	st = open_ok(t);
	assert_int_equal(state_token_keys(st, k), 1);
	memcpy(k0, k[0], sizeof k0);
	assert_int_equal(mode_of(t->dir, "token.key") & 07777, 0600);
	assert_int_equal(slurp(t->dir, "token.key", disk, sizeof disk), 112);
	assert_memory_equal(disk + WOLFSSL_TICKET_NAME_SZ, k0, sizeof k0);
	state_server_free(st);

	st = open_ok(t);
	assert_int_equal(state_token_keys(st, k), 1);
	assert_memory_equal(k[0], k0, sizeof k0);
	wall = T0 + STATE_TOKEN_ROTATE_S - 1;
	assert_int_equal(state_token_keys(st, k), 1);
	assert_memory_equal(k[0], k0, sizeof k0);

	/* Due: the call itself rotates (no waiting for the timer). */
	wall = T0 + STATE_TOKEN_ROTATE_S;
	assert_int_equal(state_token_keys(st, k), 2);
	assert_memory_not_equal(k[0], k0, sizeof k0);
	assert_memory_equal(k[1], k0, sizeof k0);
	memcpy(k1, k[0], sizeof k1);
	state_server_stats(st, &ss);
	assert_int_equal(ss.token_rotations, 1);
	assert_int_equal(ss.rotations, 0);
	assert_int_equal(slurp(t->dir, "token.key", disk, sizeof disk), 112);
	assert_memory_equal(disk + WOLFSSL_TICKET_NAME_SZ, k1, sizeof k1);
	assert_memory_equal(disk + 56 + WOLFSSL_TICKET_NAME_SZ, k0, sizeof k0);
	state_server_free(st);

	/* Both come back after a restart. */
	st = open_ok(t);
	assert_int_equal(state_token_keys(st, k), 2);
	assert_memory_equal(k[0], k1, sizeof k1);
	assert_memory_equal(k[1], k0, sizeof k0);

	/* An hour on, k0 has verified for its hour and k1 is due: k1 moves
	 * back and k0 is erased, on disk too. */
	wall = T0 + 2 * STATE_TOKEN_ROTATE_S;
	assert_int_equal(state_token_keys(st, k), 2);
	assert_memory_equal(k[1], k1, sizeof k1);
	assert_memory_not_equal(k[0], k0, sizeof k0);
	assert_memory_not_equal(k[0], k1, sizeof k1);
	assert_int_equal(slurp(t->dir, "token.key", disk, sizeof disk), 112);
	assert_memory_equal(disk + 56 + WOLFSSL_TICKET_NAME_SZ, k1, sizeof k1);
	state_server_free(st);

	/* Down for three hours: the key it had is too old to verify. */
	wall = T0 + 5 * STATE_TOKEN_ROTATE_S;
	st = open_ok(t);
	assert_int_equal(state_server_tick(st) <= STATE_TOKEN_ROTATE_S, true);
	assert_int_equal(state_token_keys(st, k), 1);
	assert_memory_not_equal(k[0], k1, sizeof k1);
	state_server_free(st);
}

/* A group shares KeyDir: both members start with the same keys, made
 * once, and when one rotates the other takes the new key from the file
 * instead of making its own; neither keeps keys in its StateDir. */
static void
test_group_keys(void **state)
{
	struct tmp *t = *state;
	struct cid_server_id id1 = { .id = { 1 }, .len = 1 };
	struct cid_server_id id2 = { .id = { 2 }, .len = 1 };
	struct state_server *a, *b;
	struct state_stats sa, sb;
	const uint8_t *ka[STATE_TOKEN_KEYS], *kb[STATE_TOKEN_KEYS];
	uint8_t k0[STATE_TOKEN_KEY_LEN];
	char da[160], db[160], keys[160], *cause = NULL, names[256];

	snprintf(da, sizeof da, "%s/a", t->root);
	snprintf(db, sizeof db, "%s/b", t->root);
	snprintf(keys, sizeof keys, "%s/keys", t->root);
	a = state_server_open_opts(da, &(struct state_opts){ .user = (uid_t)-1,
	    .key_dir = keys, .server_id = &id1 }, &cause);
	assert_non_null(a);
	b = state_server_open_opts(db, &(struct state_opts){ .user = (uid_t)-1,
	    .key_dir = keys, .server_id = &id2 }, &cause);
	assert_non_null(b);
	assert_memory_equal(state_reset_secret(a), state_reset_secret(b),
	    STATE_RESET_SECRET_LEN);
	assert_int_equal(state_token_keys(a, ka), 1);
	assert_int_equal(state_token_keys(b, kb), 1);
	assert_memory_equal(ka[0], kb[0], STATE_TOKEN_KEY_LEN);
	memcpy(k0, ka[0], sizeof k0);
	list_dir(da, names, sizeof names);
	assert_string_equal(names, "tickets");
	list_dir(keys, names, sizeof names);
	assert_string_equal(names, "keys.lock reset.key ticket.key token.key");

	/* a rotates first; b, due too, finds a's new key in the file. */
	wall = T0 + STATE_TOKEN_ROTATE_S;
	assert_int_equal(state_token_keys(a, ka), 2);
	assert_memory_not_equal(ka[0], k0, sizeof k0);
	assert_int_equal(state_token_keys(b, kb), 2);
	assert_memory_equal(kb[0], ka[0], STATE_TOKEN_KEY_LEN);
	assert_memory_equal(kb[1], k0, sizeof k0);
	state_server_stats(a, &sa);
	state_server_stats(b, &sb);
	assert_int_equal(sa.token_rotations, 1);
	assert_int_equal(sb.token_rotations, 0);
	state_server_free(a);
	state_server_free(b);
}

/* A key file one byte too long is not ours: it is replaced, not read. */
static void
test_key_file_too_long(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	uint8_t longer[STATE_RESET_SECRET_LEN + 1], disk[64];

	st = open_ok(t);
	state_server_free(st);
	memset(longer, 0xab, sizeof longer);
	put_file(t->dir, "reset.key", longer, sizeof longer);
	st = open_ok(t);
	assert_int_equal(slurp(t->dir, "reset.key", disk, sizeof disk),
	    STATE_RESET_SECRET_LEN);
	assert_memory_equal(disk, state_reset_secret(st), STATE_RESET_SECRET_LEN);
	assert_memory_not_equal(state_reset_secret(st), longer,
	    STATE_RESET_SECRET_LEN);
	state_server_free(st);
}

/* A ticket.key that cannot be replaced (here a directory sits where its
 * temporary file goes) is tried again within the minute. */
static void
test_rotation_unsaved(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	struct sealed a, b;
	char tmp[512];

	st = open_tickets(t);
	seal(st, &a, "kept");
	snprintf(tmp, sizeof tmp, "%s/ticket.key.tmp", t->dir);
	assert_int_equal(mkdir(tmp, 0700), 0);
	wall = T0 + DAY;
	assert_int_equal(state_server_tick(st), 60);
	assert_int_equal(rotations(st), 1);
	seal(st, &b, "new");
	expect_disk_keys(t->dir, a.name, NULL);
	assert_int_equal(rmdir(tmp), 0);
	wall += 60;
	assert_int_equal(state_server_tick(st), 3600);
	expect_disk_keys(t->dir, b.name, a.name);
	state_server_free(st);
}

/* The timer on an event base does the ticking by itself. */
static void
test_rotation_timer(void **state)
{
	struct tmp *t = *state;
	struct event_base *base = event_base_new();
	struct state_opts opts = { .user = (uid_t)-1, .rotate_s = 1,
	    .lifetime_s = 1 };
	struct state_server *st;
	struct sealed a, b;
	char *cause = NULL;

	assert_non_null(base);
	opts.base = base;
	st = state_server_open_opts(t->dir, &opts, &cause);
	assert_non_null(st);
	seal(st, &a, "timer");
	wall++;
	/* The timer is due in a real second; its callback finds the wall
	 * clock a second on, and rotates. */
	assert_int_equal(event_base_loop(base, EVLOOP_ONCE), 0);
	assert_int_equal(rotations(st), 1);
	assert_true(opens(st, &a, "timer"));
	seal(st, &b, "next");
	assert_memory_not_equal(b.name, a.name, sizeof a.name);
	state_server_free(st);
	event_base_free(base);
}

/* --- The ticket register ---------------------------------------------- */

static uint64_t
mix(uint64_t x)
{
	/* splitmix64: tags spread like real AEAD tags. */
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static void
mk_tag(uint8_t tag[STATE_TAG_LEN], uint32_t n)
{
	uint64_t a = mix(n), b = mix(~(uint64_t)n);

	memcpy(tag, &a, 8);
	memcpy(tag + 8, &b, 8);
}

static void
mk_peer(uint8_t key[KEY_LEN], uint32_t n)
{
	memset(key, 0x5a, KEY_LEN);
	memcpy(key, &n, sizeof n);
}

static void
issue(struct state_server *st, uint32_t tag, uint32_t peer)
{
	uint8_t t[STATE_TAG_LEN], p[KEY_LEN];

	mk_tag(t, tag);
	mk_peer(p, peer);
	state_register_issue(st, t, p);
}

/* Spend `tag`; a fresh ticket must name `peer`. */
static enum state_ticket
spend(struct state_server *st, uint32_t tag, uint32_t peer)
{
	uint8_t t[STATE_TAG_LEN], p[KEY_LEN], got[KEY_LEN];
	enum state_ticket r;

	mk_tag(t, tag);
	mk_peer(p, peer);
	memset(got, 0, sizeof got);
	r = state_register_spend(st, t, got);
	if (r == STATE_TICKET_FRESH)
		assert_memory_equal(got, p, KEY_LEN);
	return r;
}

static struct state_register_info
reg_info(const struct state_server *st)
{
	struct state_register_info ri;

	state_register_info(st, &ri);
	return ri;
}

static void
test_register_single_use(void **state)
{
	struct tmp *t = *state;
	struct state_server *st = open_ok(t);
	struct state_register_info ri;

	issue(st, 1, 7);
	ri = reg_info(st);
	assert_int_equal(ri.live, 1);
	assert_int_equal(ri.peers, 1);
	assert_int_equal(ri.writes, 1);
	assert_int_equal(ri.bytes_written, 64);
	assert_int_equal(spend(st, 1, 7), STATE_TICKET_FRESH);
	/* Spending rewrites the record's type byte, nothing else. */
	ri = reg_info(st);
	assert_int_equal(ri.writes, 2);
	assert_int_equal(ri.bytes_written, 65);
	assert_int_equal(spend(st, 1, 7), STATE_TICKET_SPENT);
	assert_int_equal(spend(st, 2, 7), STATE_TICKET_UNKNOWN);
	assert_int_equal(reg_info(st).writes, 2);

	/* A ticket serves for its lifetime and not a second more. */
	issue(st, 3, 7);
	issue(st, 4, 7);
	wall = T0 + STATE_TICKET_LIFETIME_S - 1;
	assert_int_equal(spend(st, 3, 7), STATE_TICKET_FRESH);
	wall++;
	assert_int_equal(spend(st, 4, 7), STATE_TICKET_UNKNOWN);
	ri = reg_info(st);
	assert_int_equal(ri.expired, 1);
	assert_int_equal(ri.live, 2);
	state_server_free(st);
}

static void
test_register_quota(void **state)
{
	struct tmp *t = *state;
	struct state_server *st = open_ok(t);
	struct state_register_info ri;
	const uint32_t P = 1, Q = 2;

	issue(st, 100000, Q);
	for (uint32_t n = 0; n < STATE_REGISTER_PEER_MAX; n++)
		issue(st, n, P);
	ri = reg_info(st);
	assert_int_equal(ri.live, STATE_REGISTER_PEER_MAX + 1);
	assert_int_equal(ri.max_per_peer, STATE_REGISTER_PEER_MAX);
	assert_int_equal(ri.evicted_quota, 0);

	/* One more: P's oldest goes. */
	issue(st, 32, P);
	ri = reg_info(st);
	assert_int_equal(ri.evicted_quota, 1);
	assert_int_equal(ri.live, STATE_REGISTER_PEER_MAX + 1);
	assert_int_equal(spend(st, 0, P), STATE_TICKET_UNKNOWN);

	/* A spent ticket goes before any unspent one, however old. */
	assert_int_equal(spend(st, 5, P), STATE_TICKET_FRESH);
	issue(st, 33, P);
	assert_int_equal(reg_info(st).evicted_quota, 2);
	assert_int_equal(spend(st, 5, P), STATE_TICKET_UNKNOWN);
	assert_int_equal(spend(st, 1, P), STATE_TICKET_FRESH);

	/* A thousand more from P: Q's ticket stays, P keeps its newest. */
	for (uint32_t n = 34; n < 1034; n++)
		issue(st, n, P);
	ri = reg_info(st);
	assert_int_equal(ri.evicted_quota, 1002);
	assert_int_equal(ri.evicted_full, 0);
	assert_int_equal(ri.live, STATE_REGISTER_PEER_MAX + 1);
	assert_int_equal(ri.peers, 2);
	assert_int_equal(spend(st, 100000, Q), STATE_TICKET_FRESH);
	assert_int_equal(spend(st, 1034 - STATE_REGISTER_PEER_MAX - 1, P),
	    STATE_TICKET_UNKNOWN);
	for (uint32_t n = 1034 - STATE_REGISTER_PEER_MAX; n < 1034; n++)
		assert_int_equal(spend(st, n, P), STATE_TICKET_FRESH);
	state_server_free(st);
}

/* Peers 0..510 hold 32 tickets each (tag peer * 32 + k, k the age), a
 * small peer 5 and peer 511 the remaining 27: the register is full. */
#define SMALL_PEER 100000u
#define NFULL_PEERS 511u
#define FILL_TAG(peer, k) ((peer) * 32u + (k))

static void
fill_register(struct state_server *st)
{
	for (uint32_t k = 0; k < 5; k++)
		issue(st, 900000 + k, SMALL_PEER);
	for (uint32_t p = 0; p < NFULL_PEERS; p++) {
		for (uint32_t k = 0; k < STATE_REGISTER_PEER_MAX; k++)
			issue(st, FILL_TAG(p, k), p);
	}
	for (uint32_t k = 0; k < 27; k++)
		issue(st, FILL_TAG(NFULL_PEERS, k), NFULL_PEERS);
}

static void
test_register_full(void **state)
{
	struct tmp *t = *state;
	struct state_server *st = open_ok(t);
	struct state_register_info ri;
	uint32_t unknown = 0;

	fill_register(st);
	ri = reg_info(st);
	assert_int_equal(ri.live, STATE_REGISTER_MAX);
	assert_int_equal(ri.peers, NFULL_PEERS + 2);
	assert_int_equal(ri.max_per_peer, STATE_REGISTER_PEER_MAX);
	assert_int_equal(ri.evicted_quota + ri.evicted_full + ri.expired, 0);

	/* 100 newcomers: each takes the oldest ticket of a peer holding the
	 * most, never one of the peers holding less. */
	for (uint32_t n = 0; n < 100; n++)
		issue(st, 800000 + n, 200000 + n);
	ri = reg_info(st);
	assert_int_equal(ri.live, STATE_REGISTER_MAX);
	assert_int_equal(ri.evicted_full, 100);
	assert_int_equal(ri.evicted_quota, 0);
	for (uint32_t n = 0; n < 100; n++)
		assert_int_equal(spend(st, 800000 + n, 200000 + n),
		    STATE_TICKET_FRESH);
	for (uint32_t k = 0; k < 5; k++)
		assert_int_equal(spend(st, 900000 + k, SMALL_PEER),
		    STATE_TICKET_FRESH);
	for (uint32_t k = 0; k < 27; k++)
		assert_int_equal(spend(st, FILL_TAG(NFULL_PEERS, k), NFULL_PEERS),
		    STATE_TICKET_FRESH);
	for (uint32_t p = 0; p < NFULL_PEERS; p++) {
		if (spend(st, FILL_TAG(p, 0), p) == STATE_TICKET_UNKNOWN)
			unknown++;
		for (uint32_t k = 1; k < STATE_REGISTER_PEER_MAX; k++)
			assert_int_equal(spend(st, FILL_TAG(p, k), p),
			    STATE_TICKET_FRESH);
	}
	assert_int_equal(unknown, 100);

	/* Expired entries go before anything live: half the register
	 * expires, and newcomers push out nothing. */
	state_server_free(st);
	rm_rf(t->dir);
	wall = T0;
	st = open_ok(t);
	for (uint32_t p = 0; p < 256; p++) {
		for (uint32_t k = 0; k < STATE_REGISTER_PEER_MAX; k++)
			issue(st, FILL_TAG(p, k), p);
	}
	wall = T0 + 100;
	for (uint32_t p = 256; p < 512; p++) {
		for (uint32_t k = 0; k < STATE_REGISTER_PEER_MAX; k++)
			issue(st, FILL_TAG(p, k), p);
	}
	assert_int_equal(reg_info(st).live, STATE_REGISTER_MAX);
	wall = T0 + STATE_TICKET_LIFETIME_S;
	for (uint32_t n = 0; n < 2000; n++)
		issue(st, 800000 + n, 200000 + n);
	ri = reg_info(st);
	assert_int_equal(ri.evicted_full, 0);
	assert_int_equal(ri.evicted_quota, 0);
	/* Each issue forgets up to four expired entries on its way. */
	assert_int_equal(ri.expired, 4 * 2000);
	assert_int_equal(ri.live, STATE_REGISTER_MAX - 4 * 2000 + 2000);
	for (uint32_t p = 256; p < 512; p++) {
		for (uint32_t k = 0; k < STATE_REGISTER_PEER_MAX; k++)
			assert_int_equal(spend(st, FILL_TAG(p, k), p),
			    STATE_TICKET_FRESH);
	}
	state_server_free(st);
}

/* Slots look at by one failed lookup. */
static uint64_t
miss_probes(struct state_server *st, uint32_t tag)
{
	uint64_t before = reg_info(st).probes;

	assert_int_equal(spend(st, tag, 0), STATE_TICKET_UNKNOWN);
	return reg_info(st).probes - before;
}

static void
test_register_lookups_stay_short(void **state)
{
	struct tmp *t = *state;
	struct state_server *st = open_ok(t);
	struct state_register_info ri;
	uint64_t total = 0, worst = 0;
	uint32_t tag = 0;
	int ticks;

	/* A full register, half of it spent, then all of it expired: the
	 * timer forgets 1024 entries per tick and asks to come back in a
	 * second until none is left. */
	for (uint32_t p = 0; p < 512; p++) {
		for (uint32_t k = 0; k < STATE_REGISTER_PEER_MAX; k++, tag++) {
			issue(st, tag, p);
			if (k % 2 == 0)
				assert_int_equal(spend(st, tag, p), STATE_TICKET_FRESH);
		}
	}
	wall = T0 + STATE_TICKET_LIFETIME_S;
	for (ticks = 1; ticks <= 16; ticks++)
		assert_int_equal(state_server_tick(st), 1);
	assert_true(state_server_tick(st) > 1);
	ri = reg_info(st);
	assert_int_equal(ri.live, 0);
	assert_int_equal(ri.peers, 0);
	assert_int_equal(ri.expired, STATE_REGISTER_MAX);
	/* Nothing left behind: a failed lookup looks at one empty slot. */
	for (uint32_t n = 0; n < 100; n++)
		assert_int_equal(miss_probes(st, 5000000 + n), 1);

	/* Days of churn: the register refilled and emptied eight times over
	 * by expiry and by eviction; lookups stay as short as in a fresh
	 * table at the same load (about 2.5 slots for a miss at half full). */
	for (int day = 1; day <= 8; day++) {
		wall = T0 + (uint64_t)day * STATE_TICKET_LIFETIME_S + 1;
		for (uint32_t n = 0; n < STATE_REGISTER_MAX; n++, tag++)
			issue(st, tag, (tag / 7) % 700);
	}
	assert_int_equal(reg_info(st).live, STATE_REGISTER_MAX);
	for (uint32_t n = 0; n < 1000; n++) {
		uint64_t p = miss_probes(st, 6000000 + n);

		total += p;
		if (p > worst)
			worst = p;
	}
	print_message("failed lookups in a full register: %.2f slots on "
	    "average, %llu at most\n", (double)total / 1000,
	    (unsigned long long)worst);
	assert_true(total <= 3000);
	assert_true(worst <= 40);
	state_server_free(st);
}

static void
test_register_cost_bounded(void **state)
{
	struct tmp *t = *state;
	struct state_server *st = open_ok(t);
	struct state_register_info ri;
	uint64_t writes = 0, bytes = 0;
	char names[256];

	/* Three registers' worth from 1024 peers, some spent, through quota
	 * and full-register evictions: every issue writes one record, every
	 * spend one byte, and the file never grows. */
	for (uint32_t n = 0; n < 3 * STATE_REGISTER_MAX; n++) {
		issue(st, n, n % 1024);
		writes++;
		bytes += 64;
		if (n % 3 == 0) {
			assert_int_equal(spend(st, n, n % 1024), STATE_TICKET_FRESH);
			writes++;
			bytes++;
		}
		ri = reg_info(st);
		if (ri.writes != writes || ri.bytes_written != bytes)
			fail_msg("ticket %u: %llu writes, %llu bytes", n,
			    (unsigned long long)ri.writes,
			    (unsigned long long)ri.bytes_written);
	}
	assert_true(ri.evicted_full > 0);
	assert_int_equal(size_of(t->dir, "tickets"), REGISTER_FILE_SIZE);
	list_dir(t->dir, names, sizeof names);
	assert_string_equal(names, "reset.key ticket.key tickets token.key");
	state_server_free(st);
}

static void
test_register_persists(void **state)
{
	struct tmp *t = *state;
	struct state_server *st = open_ok(t);
	uint8_t old[4 * 64];
	const uint32_t P = 3, R = 4;

	issue(st, 1, P);
	issue(st, 2, P);
	issue(st, 3, P);
	assert_int_equal(spend(st, 2, P), STATE_TICKET_FRESH);
	for (uint32_t n = 100; n < 133; n++)
		issue(st, n, R);
	state_server_free(st);

	/* A restart: spent stays spent, pushed out stays out (its slot was
	 * rewritten), the rest is as it was. */
	wall = T0 + 10;
	st = open_ok(t);
	assert_int_equal(reg_info(st).live, 3 + STATE_REGISTER_PEER_MAX);
	assert_int_equal(reg_info(st).peers, 2);
	/* New tickets go around the slots that came back. */
	for (uint32_t n = 0; n < 100; n++)
		issue(st, 500 + n, 50 + n);
	assert_int_equal(spend(st, 2, P), STATE_TICKET_SPENT);
	assert_int_equal(spend(st, 1, P), STATE_TICKET_FRESH);
	assert_int_equal(spend(st, 3, P), STATE_TICKET_FRESH);
	assert_int_equal(spend(st, 100, R), STATE_TICKET_UNKNOWN);
	for (uint32_t n = 101; n < 133; n++)
		assert_int_equal(spend(st, n, R), STATE_TICKET_FRESH);
	for (uint32_t n = 0; n < 50; n++)
		assert_int_equal(spend(st, 500 + n, 50 + n), STATE_TICKET_FRESH);
	state_server_free(st);

	/* And all of that comes back too. */
	st = open_ok(t);
	assert_int_equal(reg_info(st).live, 3 + STATE_REGISTER_PEER_MAX + 100);
	assert_int_equal(reg_info(st).peers, 2 + 100);
	assert_int_equal(spend(st, 1, P), STATE_TICKET_SPENT);
	assert_int_equal(spend(st, 500, 50), STATE_TICKET_SPENT);
	assert_int_equal(spend(st, 599, 149), STATE_TICKET_FRESH);
	state_server_free(st);

	/* After a lifetime nothing comes back (the newest were issued ten
	 * seconds later). */
	wall = T0 + STATE_TICKET_LIFETIME_S;
	st = open_ok(t);
	assert_int_equal(reg_info(st).live, 100);
	state_server_free(st);
	wall = T0 + 10 + STATE_TICKET_LIFETIME_S;
	st = open_ok(t);
	assert_int_equal(reg_info(st).live, 0);
	state_server_free(st);

	/* A register of the earlier format (a log of records, no header)
	 * is replaced by an empty one of the full size. */
	memset(old, 0, sizeof old);
	old[0] = 1;
	put_file(t->dir, "tickets", old, sizeof old);
	st = open_ok(t);
	assert_int_equal(reg_info(st).live, 0);
	assert_int_equal(size_of(t->dir, "tickets"), REGISTER_FILE_SIZE);
	assert_int_equal(mode_of(t->dir, "tickets") & 07777, 0600);
	state_server_free(st);
}

/* --- StateDir safety -------------------------------------------------- */

/* state_server_open must refuse with exactly `want` (after the "StateDir
 * DIR: " prefix), with options `opts` (NULL: the defaults). */
static void
expect_refused(const struct tmp *t, const struct state_opts *opts,
    const char *want)
{
	const struct state_opts def = { .user = (uid_t)-1 };
	struct state_server *st;
	char full[512], *cause = NULL;

	st = state_server_open_opts(t->dir, opts != NULL ? opts : &def, &cause);
	if (st != NULL)
		fail_msg("StateDir accepted, expected: %s", want);
	assert_non_null(cause);
	snprintf(full, sizeof full, "StateDir %s: %s", t->dir, want);
	assert_string_equal(cause, full);
	free(cause);
}

static void
make_state(const struct tmp *t)
{
	state_server_free(open_ok(t));
}

static void
test_statedir_symlinks(void **state)
{
	struct tmp *t = *state;
	static const char *files[] = { "reset.key", "ticket.key", "tickets" };
	char real[256], target[256], path[512], want[128], names[256];
	uint8_t buf[16];

	/* StateDir itself a link to a directory: refused, nothing made there. */
	snprintf(real, sizeof real, "%s/real", t->root);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, t->dir), 0);
	expect_refused(t, NULL, "is a symbolic link");
	list_dir(real, names, sizeof names);
	assert_string_equal(names, "");
	assert_int_equal(unlink(t->dir), 0);

	/* Each file a link to a file elsewhere: refused, the target
	 * untouched. */
	snprintf(target, sizeof target, "%s/target", t->root);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		make_state(t);
		put_file(t->root, "target", "precious", 8);
		snprintf(path, sizeof path, "%s/%s", t->dir, files[i]);
		assert_int_equal(unlink(path), 0);
		assert_int_equal(symlink(target, path), 0);
		snprintf(want, sizeof want, "%s: is a symbolic link", files[i]);
		expect_refused(t, NULL, want);
		assert_int_equal(slurp(t->root, "target", buf, sizeof buf), 8);
		assert_memory_equal(buf, "precious", 8);
		assert_int_equal(mode_of(t->root, "target") & 07777, 0600);
		rm_rf(t->dir);
	}
}

static void
test_statedir_modes(void **state)
{
	struct tmp *t = *state;
	struct state_server *st;
	char path[512];

	/* Writable by group or others: refused, and left as it is. */
	make_state(t);
	assert_int_equal(chmod(t->dir, 0770), 0);
	expect_refused(t, NULL, "group or others can write it (mode 0770)");
	assert_int_equal(chmod(t->dir, 0703), 0);
	expect_refused(t, NULL, "group or others can write it (mode 0703)");
	assert_int_equal(mode_of(t->dir, NULL) & 07777, 0703);

	/* Only readable by others: ours, so made private again. */
	assert_int_equal(chmod(t->dir, 0755), 0);
	st = open_ok(t);
	assert_int_equal(mode_of(t->dir, NULL) & 07777, 0700);
	state_server_free(st);

	/* Files: none writable by others; keys not even readable; the
	 * register (tags and public keys) may be. */
	snprintf(path, sizeof path, "%s/ticket.key", t->dir);
	assert_int_equal(chmod(path, 0620), 0);
	expect_refused(t, NULL, "ticket.key: group or others can write it "
	    "(mode 0620)");
	assert_int_equal(chmod(path, 0604), 0);
	expect_refused(t, NULL, "ticket.key: group or others can read it "
	    "(mode 0604)");
	assert_int_equal(chmod(path, 0600), 0);
	snprintf(path, sizeof path, "%s/reset.key", t->dir);
	assert_int_equal(chmod(path, 0640), 0);
	expect_refused(t, NULL, "reset.key: group or others can read it "
	    "(mode 0640)");
	assert_int_equal(chmod(path, 0600), 0);
	snprintf(path, sizeof path, "%s/tickets", t->dir);
	assert_int_equal(chmod(path, 0602), 0);
	expect_refused(t, NULL, "tickets: group or others can write it "
	    "(mode 0602)");
	assert_int_equal(chmod(path, 0644), 0);
	make_state(t);

	/* Not a regular file (a FIFO must not block the open), or linked
	 * from elsewhere. */
	snprintf(path, sizeof path, "%s/reset.key", t->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	expect_refused(t, NULL, "reset.key: not a regular file");
	assert_int_equal(unlink(path), 0);
	make_state(t);
	snprintf(path, sizeof path, "%s/ticket.key", t->dir);
	{
		char other[256];

		snprintf(other, sizeof other, "%s/second-name", t->root);
		assert_int_equal(link(path, other), 0);
		expect_refused(t, NULL, "ticket.key: 2 links to it");
		assert_int_equal(unlink(other), 0);
	}
	make_state(t);
}

static void
test_statedir_owner(void **state)
{
	struct tmp *t = *state;
	const struct state_opts nobody = { .user = 65534 };
	const struct state_opts other = { .user = 12345 };
	struct state_server *st;
	char path[512], *cause = NULL;
	int fd;

	if (geteuid() != 0)
		skip();
	/* Another user's directory: refused unless that user is User. */
	make_state(t);
	assert_int_equal(chown(t->dir, 65534, 65534), 0);
	expect_refused(t, NULL, "owned by uid 65534, not by root");
	expect_refused(t, &other, "owned by uid 65534, not by root or uid "
	    "12345");
	st = state_server_open_opts(t->dir, &nobody, &cause);
	assert_non_null(st);
	state_server_free(st);

	/* The same for the files in it. */
	assert_int_equal(chown(t->dir, 0, 0), 0);
	snprintf(path, sizeof path, "%s/tickets", t->dir);
	assert_int_equal(chown(path, 65534, 65534), 0);
	expect_refused(t, NULL, "tickets: owned by uid 65534, not by root");
	st = state_server_open_opts(t->dir, &nobody, &cause);
	assert_non_null(st);
	state_server_free(st);

	/* The helper privdrop uses: the same checks, without creating. */
	assert_int_equal(chown(t->dir, 12345, 12345), 0);
	assert_int_equal(safedir_open("StateDir", t->dir, 65534, false, &cause), -1);
	snprintf(path, sizeof path, "StateDir %s: owned by uid 12345, not by "
	    "root or uid 65534", t->dir);
	assert_string_equal(cause, path);
	free(cause);
	cause = NULL;
	fd = safedir_open("StateDir", t->dir, 12345, false, &cause);
	assert_true(fd >= 0);
	close(fd);
	rm_rf(t->dir);
	assert_int_equal(safedir_open("StateDir", t->dir, 12345, false, &cause), -1);
	snprintf(path, sizeof path, "StateDir %s: No such file or directory",
	    t->dir);
	assert_string_equal(cause, path);
	free(cause);
}

static const uint8_t sess_a[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 255 };
static const uint8_t params_a[] = { 0x40, 0x41, 0x42 };

static void
test_client_save_take(void **state)
{
	struct tmp *t = *state;
	uint8_t *s = NULL, *p = NULL;
	size_t slen = 0, plen = 0;

	assert_int_equal(state_client_save(t->dir, "srv1", sess_a, sizeof sess_a,
	    params_a, sizeof params_a), 0);
	/* Created on demand, private, and exactly the record's size. */
	assert_int_equal(mode_of(t->dir, NULL) & 07777, 0700);
	assert_int_equal(mode_of(t->dir, "session-srv1") & 07777, 0600);
	assert_int_equal(size_of(t->dir, "session-srv1"),
	    4 + 4 + sizeof sess_a + 4 + sizeof params_a);

	assert_int_equal(state_client_take(t->dir, "srv1", &s, &slen, &p, &plen), 0);
	assert_int_equal(slen, sizeof sess_a);
	assert_memory_equal(s, sess_a, sizeof sess_a);
	assert_int_equal(plen, sizeof params_a);
	assert_memory_equal(p, params_a, sizeof params_a);
	free(s);
	free(p);
	assert_false(exists(t->dir, "session-srv1"));

	/* Single use: the second take finds nothing. */
	s = p = NULL;
	assert_int_equal(state_client_take(t->dir, "srv1", &s, &slen, &p, &plen), -1);
	assert_null(s);
	assert_null(p);
}

static void
test_client_ids_and_overwrite(void **state)
{
	struct tmp *t = *state;
	static const uint8_t sess_b[] = { 0xbb, 0xbb };
	uint8_t big[8000];
	uint8_t *s = NULL, *p = NULL;
	size_t slen = 0, plen = 0;

	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 31 + 3);
	assert_int_equal(state_client_save(t->dir, "one", sess_a, sizeof sess_a,
	    params_a, sizeof params_a), 0);
	/* No parameters at all (NULL is not promised to work: an empty
	 * buffer). */
	assert_int_equal(state_client_save(t->dir, "two", big, sizeof big,
	    params_a, 0), 0);
	/* The newer session for the same server replaces the older. */
	assert_int_equal(state_client_save(t->dir, "one", sess_b, sizeof sess_b,
	    params_a, 1), 0);

	assert_int_equal(state_client_take(t->dir, "unknown", &s, &slen, &p,
	    &plen), -1);
	assert_null(s);

	assert_int_equal(state_client_take(t->dir, "one", &s, &slen, &p, &plen), 0);
	assert_int_equal(slen, sizeof sess_b);
	assert_memory_equal(s, sess_b, sizeof sess_b);
	assert_int_equal(plen, 1);
	assert_int_equal(p[0], params_a[0]);
	free(s);
	free(p);

	s = p = NULL;
	assert_int_equal(state_client_take(t->dir, "two", &s, &slen, &p, &plen), 0);
	assert_int_equal(slen, sizeof big);
	assert_memory_equal(s, big, sizeof big);
	assert_int_equal(plen, 0);
	assert_non_null(p);
	free(s);
	free(p);
	assert_false(exists(t->dir, "session-one"));
	assert_false(exists(t->dir, "session-two"));
}

static size_t
mk_record(uint8_t *buf, const char magic[4], uint32_t l1, const void *s,
    size_t slen, uint32_t l2, const void *p, size_t plen)
{
	size_t n = 0;

	memcpy(buf + n, magic, 4);
	n += 4;
	memcpy(buf + n, &l1, 4);
	n += 4;
	memcpy(buf + n, s, slen);
	n += slen;
	memcpy(buf + n, &l2, 4);
	n += 4;
	memcpy(buf + n, p, plen);
	return n + plen;
}

static void
test_client_take_corrupt(void **state)
{
	struct tmp *t = *state;
	struct {
		const char *what;
		size_t len;
	} cases[12];
	uint8_t data[12][128], good[64], buf[128];
	size_t goodlen, n, ncases = 0;
	uint8_t *s, *p;
	size_t slen, plen;

	assert_int_equal(mkdir(t->dir, 0700), 0);
	goodlen = mk_record(good, "RVS1", sizeof sess_a, sess_a, sizeof sess_a,
	    sizeof params_a, params_a, sizeof params_a);

#define CASE(w, d, l) do {                                   \
	cases[ncases].what = (w);                            \
	cases[ncases].len = (l);                             \
	memcpy(data[ncases], (d), (l));                      \
	ncases++;                                            \
} while (0)
	CASE("empty", "", 0);
	CASE("magic only", "RVS1", 4);
	CASE("header without params length", good, 8 + sizeof sess_a);
	CASE("truncated by one byte", good, goodlen - 1);
	memcpy(buf, good, goodlen);
	buf[goodlen] = 0;
	CASE("one byte too many", buf, goodlen + 1);
	memcpy(buf, good, goodlen);
	buf[3] = '2';
	CASE("wrong magic", buf, goodlen);
	n = mk_record(buf, "RVS1", 0xffffffffu, sess_a, sizeof sess_a,
	    sizeof params_a, params_a, sizeof params_a);
	CASE("huge session length", buf, n);
	n = mk_record(buf, "RVS1", sizeof sess_a, sess_a, sizeof sess_a,
	    0xffffffffu, params_a, sizeof params_a);
	CASE("huge params length", buf, n);
	n = mk_record(buf, "RVS1", sizeof sess_a + 2, sess_a, sizeof sess_a,
	    sizeof params_a, params_a, sizeof params_a);
	CASE("session length past the params", buf, n);
	n = mk_record(buf, "RVS1", sizeof sess_a, sess_a, sizeof sess_a,
	    sizeof params_a - 1, params_a, sizeof params_a);
	CASE("params length short", buf, n);
#undef CASE

	for (size_t i = 0; i < ncases; i++) {
		put_file(t->dir, "session-x", data[i], cases[i].len);
		s = p = NULL;
		if (state_client_take(t->dir, "x", &s, &slen, &p, &plen) != -1)
			fail_msg("take accepted a file: %s", cases[i].what);
		assert_null(s);
		assert_null(p);
		/* A bad file is not read twice. */
		if (exists(t->dir, "session-x"))
			fail_msg("take left the file behind: %s", cases[i].what);
	}

	/* The good record, for contrast, is accepted. */
	put_file(t->dir, "session-x", good, goodlen);
	assert_int_equal(state_client_take(t->dir, "x", &s, &slen, &p, &plen), 0);
	assert_int_equal(slen, sizeof sess_a);
	assert_memory_equal(s, sess_a, sizeof sess_a);
	assert_int_equal(plen, sizeof params_a);
	assert_memory_equal(p, params_a, sizeof params_a);
	free(s);
	free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_server_creates_private_files,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_server_nested_dirs,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_server_persistence,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_server_damaged_secret,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_server_open_fails,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_rotation,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_rotation_retires,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_rotation_catches_up,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_rotation_unsaved,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_token_keys,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_group_keys,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_key_file_too_long,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_rotation_timer,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_register_single_use,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_register_quota,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_register_full,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_register_lookups_stay_short,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_register_cost_bounded,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_register_persists,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_statedir_symlinks,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_statedir_modes,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_statedir_owner,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_client_save_take,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_client_ids_and_overwrite,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_client_take_corrupt,
		    tmp_setup, tmp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

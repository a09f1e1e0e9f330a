/* Unit tests for common/state.c: the server's StateDir files and the
 * client's single-use session store. Tickets themselves are exercised
 * through real handshakes in test-quic.c. */
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

#include "state.h"

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
	*state = t;
	return 0;
}

static int
tmp_teardown(void **state)
{
	struct tmp *t = *state;

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
	assert_string_equal(names, "reset.key ticket.key tickets");

	/* The secret on disk is the one in use; the register starts empty. */
	assert_int_equal(size_of(t->dir, "reset.key"), STATE_RESET_SECRET_LEN);
	assert_int_equal(slurp(t->dir, "reset.key", secret, sizeof secret),
	    STATE_RESET_SECRET_LEN);
	assert_memory_equal(secret, state_reset_secret(st), STATE_RESET_SECRET_LEN);
	assert_true(size_of(t->dir, "ticket.key") > 0);
	assert_int_equal(size_of(t->dir, "tickets"), 0);

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
	snprintf(want, sizeof want, "%s: Not a directory", path);
	assert_string_equal(cause, want);
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
		cmocka_unit_test_setup_teardown(test_client_save_take,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_client_ids_and_overwrite,
		    tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_client_take_corrupt,
		    tmp_setup, tmp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

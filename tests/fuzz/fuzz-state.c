/* libFuzzer harness for common/transport/state.c, state-register.c and
 * state-client.c: StateDir's files as a crash, a full disk, an older
 * version or someone with write access may leave them, read back through
 * the loaders (state_server_open, state_client_take).
 *
 * Input: one byte of flags, then up to four files, each a 16-bit
 * little-endian length and that many bytes: reset.key, ticket.key,
 * tickets (the register) and session-fuzz (a client's saved session).
 * Flag bit N writes file N; bit N + 4 makes it a directory instead, or a
 * symbolic link to a file outside when bit N is set too. */
#include <sys/stat.h>

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/state.h"

int LLVMFuzzerInitialize(int *, char ***);
int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define NFILES 4
#define SESSION_ID "fuzz"

static const char *const names[NFILES] = {
	"reset.key", "ticket.key", "tickets", ("session-" SESSION_ID),
};

/* The state directory, and a file outside it that links point at. */
static char top[64], dir[96], outside[96];

static void
remove_all(void)
{
	char path[256];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (unlink(path) != 0)
			assert(rmdir(path) == 0);
	}
	closedir(d);
}

static void
cleanup(void)
{
	remove_all();
	rmdir(dir);
	unlink(outside);
	rmdir(top);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	FILE *f;

	(void)argc;
	(void)argv;
	/* tmpfs where there is one: the loaders fsync what they rewrite. */
	snprintf(top, sizeof top, "%s/rove-fuzz-state.XXXXXX", base);
	assert(mkdtemp(top) != NULL);
	snprintf(dir, sizeof dir, "%s/state", top);
	snprintf(outside, sizeof outside, "%s/outside", top);
	assert(mkdir(dir, 0700) == 0);
	f = fopen(outside, "w");
	assert(f != NULL);
	fputs("not for rove\n", f);
	assert(fclose(f) == 0);
	atexit(cleanup);
	return 0;
}

static void
write_file(const char *name, const uint8_t *data, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert(fd != -1);
	assert(len == 0 || write(fd, data, len) == (ssize_t)len);
	assert(close(fd) == 0);
}

/* The whole of a small file, or -1. */
static ssize_t
read_file(const char *name, uint8_t *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, len);
	close(fd);
	return n;
}

/* A loaded session re-saves to a file that loads back the same. */
static void
check_session(const uint8_t *file, size_t filelen)
{
	uint8_t *s = NULL, *p = NULL, *s2 = NULL, *p2 = NULL;
	size_t sl = 0, pl = 0, sl2 = 0, pl2 = 0;
	struct stat sb;
	char path[256];

	snprintf(path, sizeof path, "%s/%s", dir, names[3]);
	if (state_client_take(dir, SESSION_ID, &s, &sl, &p, &pl) != 0)
		return;
	/* "RVS1", two 32-bit lengths, and exactly the bytes they count. */
	assert(file != NULL);
	assert(filelen == 4 + 4 + sl + 4 + pl);
	assert(memcmp(file, "RVS1", 4) == 0);
	assert(sl == 0 || memcmp(file + 8, s, sl) == 0);
	assert(pl == 0 || memcmp(file + 12 + sl, p, pl) == 0);
	/* Taken means gone: a ticket serves once. */
	assert(lstat(path, &sb) == -1 && errno == ENOENT);

	assert(state_client_save(dir, SESSION_ID, s, sl, p, pl) == 0);
	assert(state_client_take(dir, SESSION_ID, &s2, &sl2, &p2, &pl2) == 0);
	assert(sl2 == sl && pl2 == pl);
	assert(sl == 0 || memcmp(s, s2, sl) == 0);
	assert(pl == 0 || memcmp(p, p2, pl) == 0);
	free(s);
	free(p);
	free(s2);
	free(p2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *file[NFILES] = { NULL };
	size_t filelen[NFILES] = { 0 };
	uint8_t secret[STATE_RESET_SECRET_LEN], again[STATE_RESET_SECRET_LEN + 1];
	struct state_server *st;
	struct state_stats stats;
	bool odd = false;
	char path[256], *cause = NULL;
	uint8_t flags;
	size_t off = 1;

	if (size == 0)
		return 0;
	flags = data[0];
	for (size_t i = 0; i < NFILES && off + 2 <= size; i++) {
		size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;

		off += 2;
		if (len > size - off)
			len = size - off;
		file[i] = data + off;
		filelen[i] = len;
		off += len;
	}
	for (size_t i = 0; i < NFILES; i++) {
		bool present = flags & (1u << i), other = flags & (0x10u << i);

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		if (present && other) {
			assert(symlink(outside, path) == 0);
			odd = true;
		} else if (other) {
			assert(mkdir(path, 0700) == 0);
			odd = true;
		} else if (present && file[i] != NULL)
			write_file(names[i], file[i], filelen[i]);
	}

	st = state_server_open(dir, &cause);
	if (st == NULL) {
		/* Only a directory or a link where a key belongs can make the
		 * loaders give up: anything else is replaced. */
		assert(odd && cause != NULL);
		free(cause);
		goto session;
	}
	assert(cause == NULL);
	memcpy(secret, state_reset_secret(st), sizeof secret);
	if ((flags & 0x11) == 0x01 && filelen[0] == STATE_RESET_SECRET_LEN)
		assert(memcmp(secret, file[0], sizeof secret) == 0);
	/* Whatever was there, a usable reset key is there now, so a restart
	 * reads back the same one (clients recognise our stateless resets
	 * across it). */
	if ((flags & 0x10) == 0) {
		assert(read_file(names[0], again, sizeof again) >=
		    STATE_RESET_SECRET_LEN);
		assert(memcmp(again, secret, sizeof secret) == 0);
	}
	state_server_stats(st, &stats);
	assert(stats.issued == 0 && stats.resumed == 0 && stats.replayed == 0 &&
	    stats.unknown == 0);
	state_server_free(st);

session:
	/* Only a regular file can load; a link or directory must not. */
	check_session(file[3] != NULL && (flags & 0x88) == 0x08 ? file[3] :
	    NULL, filelen[3]);
	remove_all();
	return 0;
}

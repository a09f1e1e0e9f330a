/* rove's side of StateDir: the session ticket and transport parameters
 * remembered per server (for 0-RTT), and small notes kept across runs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/safedir.h"
#include "base/xmalloc.h"
#include "state-int.h"

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

	if ((dirfd = state_open_private_dir(dir, (uid_t)-1, true, &cause)) == -1) {
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
	ret = state_write_file(dirfd, name, buf, len);
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

	if ((dirfd = state_open_private_dir(dir, user, true, cause)) == -1)
		return -1;
	if ((ret = state_write_file(dirfd, name, data, len)) != 0)
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
	/* StateDir is User's too: a note another user wrote (any process
	 * running as User) is not ours to act on, least of all as root. */
	else if (sb.st_uid != geteuid())
		xasprintf(cause, "StateDir %s: %s: written by uid %u, not by us: "
		    "ignored", dir, name, (unsigned)sb.st_uid);
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

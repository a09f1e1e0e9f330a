/* Checked service directories: see safedir.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safedir.h"
#include "xmalloc.h"

/* mkdir -p, each new level private to us. */
int
safedir_make(const char *what, const char *dir, char **cause)
{
	char *copy = xstrdup(dir);

	for (char *p = copy + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(copy, 0700) == -1 && errno != EEXIST) {
				const char *hint = errno == EACCES ?
				    " (as root, or a directory this user may "
				    "create)" : "";

				if (strcmp(copy, dir) == 0)
					xasprintf(cause, "%s %s: %s%s", what, dir,
					    strerror(errno), hint);
				else
					xasprintf(cause, "%s %s: %s: %s%s", what,
					    dir, copy, strerror(errno), hint);
				free(copy);
				return -1;
			}
			*p = c;
			if (c == '\0')
				break;
		}
	}
	free(copy);
	return 0;
}

bool
safedir_owner_ok(uid_t uid, uid_t user, char *text, size_t len)
{
	uid_t self = geteuid(), other = user != (uid_t)-1 ? user : self;

	if (other == 0)
		snprintf(text, len, "root");
	else if (self != 0 && self != other)
		snprintf(text, len, "root, uid %u or uid %u", (unsigned)self,
		    (unsigned)other);
	else
		snprintf(text, len, "root or uid %u", (unsigned)other);
	return uid == 0 || uid == self || uid == other;
}

int
safedir_open(const char *what, const char *dir, uid_t user, bool create,
    char **cause)
{
	struct stat sb;
	char owners[64];
	int fd;

	if (create && safedir_make(what, dir, cause) != 0)
		return -1;
	/* Only the last level is ours to judge: the levels above are the
	 * system's (and /var/run, say, is a link). */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		if (errno == ELOOP || (errno == ENOTDIR &&
		    lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode)))
			xasprintf(cause, "%s %s: is a symbolic link", what, dir);
		else
			xasprintf(cause, "%s %s: %s", what, dir, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) == -1) {
		xasprintf(cause, "%s %s: %s", what, dir, strerror(errno));
		close(fd);
		return -1;
	}
	if (!safedir_owner_ok(sb.st_uid, user, owners, sizeof owners)) {
		xasprintf(cause, "%s %s: owned by uid %u, not by %s", what, dir,
		    (unsigned)sb.st_uid, owners);
		close(fd);
		return -1;
	}
	/* Someone else who can write here could have swapped our files. */
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		xasprintf(cause, "%s %s: group or others can write it "
		    "(mode %04o)", what, dir, (unsigned)(sb.st_mode & 07777));
		close(fd);
		return -1;
	}
	return fd;
}

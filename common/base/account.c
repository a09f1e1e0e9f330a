/* User and group lookups with a buffer that grows as NSS asks. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>

#include "account.h"
#include "xmalloc.h"

/* getpwnam_r and getgrnam_r grow their buffer up to this (a group with
 * many members needs a large one). */
#define LOOKUP_BUF_MIN 1024
#define LOOKUP_BUF_MAX (1024 * 1024)

/* The glibc manual lists these as "not found" from some NSS modules. */
static bool
not_found(int rv)
{
	return rv == 0 || rv == ENOENT || rv == ESRCH || rv == EBADF ||
	    rv == EPERM;
}

/* One lookup in the passwd database (`group` false: uid and primary gid)
 * or the group database (gid only); both _r calls take the same buffer
 * and say ERANGE when it is too small. */
static int
lookup(const char *name, bool group, uid_t *uid, gid_t *gid)
{
	struct passwd pw, *pwres = NULL;
	struct group gr, *grres = NULL;
	size_t len = LOOKUP_BUF_MIN;
	char *buf = NULL;
	bool found;
	int rv;

	for (;;) {
		buf = xrealloc(buf, len);
		rv = group ? getgrnam_r(name, &gr, buf, len, &grres) :
		    getpwnam_r(name, &pw, buf, len, &pwres);
		if (rv != ERANGE || len >= LOOKUP_BUF_MAX)
			break;
		len *= 2;
	}
	found = group ? grres != NULL : pwres != NULL;
	if (found && group)
		*gid = gr.gr_gid;
	else if (found) {
		*uid = pw.pw_uid;
		*gid = pw.pw_gid;
	}
	free(buf);
	if (!found)
		return not_found(rv) ? -ENOENT : -rv;
	return 0;
}

int
account_lookup_user(const char *name, uid_t *uid, gid_t *gid)
{
	return lookup(name, false, uid, gid);
}

int
account_lookup_group(const char *name, gid_t *gid)
{
	return lookup(name, true, NULL, gid);
}

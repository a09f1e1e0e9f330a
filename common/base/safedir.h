/* Directories root hands to a service, checked so that nobody else can
 * plant or swap files in them: opened without following a link at the
 * last level, owned by root, the running user or the service's user,
 * writable by nobody else. */
#ifndef ROVE_SAFEDIR_H
#define ROVE_SAFEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Open directory `dir` (creating missing levels 0700 when `create`) and
 * check it as above; `user` is the service's user ((uid_t)-1: none).
 * Messages start with `what` and the path ("StateDir /var/lib/rove: ...").
 * Returns the directory's descriptor, or -1 with *cause set.
 */
int safedir_open(const char *what, const char *dir, uid_t user, bool create,
    char **cause);
/* Create the missing levels of `dir`, mode 0700 (under the umask), with
 * no check: 0, or -1 with *cause ("`what` DIR: LEVEL: error"). */
int safedir_make(const char *what, const char *dir, char **cause);
/* Whether `uid` may own such a directory or a file in it: root, the
 * running user or `user`. `text` receives the allowed owners, for a
 * message. */
bool safedir_owner_ok(uid_t uid, uid_t user, char *text, size_t len);

#endif

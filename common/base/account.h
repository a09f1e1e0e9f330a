/* Users and groups by name, through NSS (the passwd and group databases,
 * LDAP or whatever the system's nsswitch.conf names). */
#ifndef ROVE_ACCOUNT_H
#define ROVE_ACCOUNT_H

#include <sys/types.h>

/* Look a user up by name: its uid and primary group. Returns 0, -ENOENT if
 * there is no such user, or -errno if the lookup itself failed; the
 * outputs are left alone unless it returns 0. */
int account_lookup_user(const char *name, uid_t *uid, gid_t *gid);
/* Look a group up by name. Returns as account_lookup_user. */
int account_lookup_group(const char *name, gid_t *gid);

#endif

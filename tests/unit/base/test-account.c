/* base/account.c: users and groups by name, and what a missing one
 * returns. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>

#include "base/account.h"

static void
test_lookup(void **state)
{
	struct passwd *pw;
	struct group *gr;
	uid_t uid = 1;
	gid_t gid = 1;

	(void)state;
	assert_int_equal(account_lookup_user("root", &uid, &gid), 0);
	assert_int_equal(uid, 0);
	assert_int_equal(gid, 0);
	pw = getpwnam("nobody");
	assert_non_null(pw);
	assert_int_equal(account_lookup_user("nobody", &uid, &gid), 0);
	assert_int_equal(uid, pw->pw_uid);
	assert_int_equal(gid, pw->pw_gid);

	uid = 7;
	gid = 7;
	assert_int_equal(account_lookup_user("no-such-user-rove", &uid, &gid),
	    -ENOENT);
	assert_int_equal(account_lookup_user("", &uid, &gid), -ENOENT);
	assert_int_equal(uid, 7);
	assert_int_equal(gid, 7);

	assert_int_equal(account_lookup_group("root", &gid), 0);
	assert_int_equal(gid, 0);
	gr = getgrgid(pw->pw_gid);
	assert_non_null(gr);
	assert_int_equal(account_lookup_group(gr->gr_name, &gid), 0);
	assert_int_equal(gid, pw->pw_gid);
	gid = 7;
	assert_int_equal(account_lookup_group("no-such-group-rove", &gid),
	    -ENOENT);
	assert_int_equal(gid, 7);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for tun_held_by (tun/tun.c): which process holds a TUN
 * device. In a network namespace of its own (a user namespace too when
 * not root), a child makes a device and must be seen holding it, and
 * neither holding another device nor its parent holding this one. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tun/tun.h"

static void
test_held_by(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tun t;
		char *cause = NULL;
		int flags = CLONE_NEWNET | (geteuid() == 0 ? 0 : CLONE_NEWUSER);

		if (unshare(flags) != 0)
			_exit(10);
		if (tun_open(&t, "rovet0", false, &cause) != 0)
			_exit(11);
		if (!tun_held_by(getpid(), "rovet0"))
			_exit(12);
		if (tun_held_by(getpid(), "rovet1") || tun_held_by(getpid(), "rovet"))
			_exit(13);
		if (tun_held_by(getppid(), "rovet0"))
			_exit(14);
		tun_close(&t);
		if (tun_held_by(getpid(), "rovet0"))
			_exit(15);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* No such process: nobody holds anything. */
	assert_false(tun_held_by(0, "rovet0"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_held_by),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

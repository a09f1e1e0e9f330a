/* base/random.c: a forked child draws bytes of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/random.h"

/* A child forked after the parent drew random numbers draws its own:
 * roved's workers and rove-load's processes would otherwise issue the
 * same CIDs, tokens and key shares as their parent. */
static void
test_random_after_fork(void **state)
{
	uint8_t before[16], parent[32], child[32];
	int fds[2], status = 0;
	pid_t pid;

	(void)state;
	random_bytes(before, sizeof before);
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		random_bytes(child, sizeof child);
		_exit(write(fds[1], child, sizeof child) == sizeof child ? 0 : 1);
	}
	close(fds[1]);
	random_bytes(parent, sizeof parent);
	assert_int_equal(read(fds[0], child, sizeof child), sizeof child);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_memory_not_equal(parent, child, sizeof parent);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_after_fork),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

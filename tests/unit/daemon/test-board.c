/* Unit tests for daemon/board.c: which worker's session of a peer shows,
 * and that what one process puts another reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/board.h"

static const uint8_t key_a[BOARD_KEY] = { 'a' }, key_b[BOARD_KEY] = { 'b' };

static struct board_peer
peer(const uint8_t key[BOARD_KEY], unsigned worker, uint64_t since)
{
	struct board_peer bp = { .worker = worker, .since = since };

	memcpy(bp.key, key, BOARD_KEY);
	bp.counters.rx_bytes = 1000 * worker + since;
	return bp;
}

/* Who shows: the newest session; a worker's drop ends only its own. */
static void
test_newest_session_shows(void **state)
{
	struct board *b = board_create(4, 3, 4096);
	struct board_peer bp, got;

	(void)state;
	assert_non_null(b);
	assert_false(board_get(b, 0, key_a, 0, 0, &got));
	bp = peer(key_a, 1, 10);
	assert_true(board_put(b, 0, &bp));
	assert_true(board_get(b, 0, key_a, 0, 0, &got));
	assert_int_equal(got.worker, 1);
	assert_int_equal(got.counters.rx_bytes, 1010);
	/* Not for the worker that holds it, nor over a newer own session,
	 * nor under another key (the workers disagree after a reload). */
	assert_false(board_get(b, 0, key_a, 1, 0, &got));
	assert_false(board_get(b, 0, key_a, 0, 10, &got));
	assert_false(board_get(b, 0, key_b, 0, 0, &got));
	/* An older session elsewhere does not take it over; a newer does. */
	bp = peer(key_a, 2, 5);
	assert_false(board_put(b, 0, &bp));
	bp = peer(key_a, 2, 20);
	assert_true(board_put(b, 0, &bp));
	assert_true(board_get(b, 0, key_a, 0, 0, &got));
	assert_int_equal(got.worker, 2);
	/* Worker 1's old session ending leaves worker 2's. */
	board_drop(b, 0, 1, 10);
	assert_true(board_get(b, 0, key_a, 0, 0, &got));
	assert_int_equal(got.worker, 2);
	board_drop(b, 0, 2, 19);
	assert_true(board_get(b, 0, key_a, 0, 0, &got));
	board_drop(b, 0, 2, 20);
	assert_false(board_get(b, 0, key_a, 0, 0, &got));
	/* Beyond the slots: nothing. */
	bp = peer(key_a, 1, 30);
	assert_false(board_put(b, 4, &bp));
	assert_false(board_get(b, 4, key_a, 0, 0, &got));
	board_free(b);
}

/* A slot's strings are terminated on the way out, whatever the writer
 * left there (the memory is shared with every worker). */
static void
test_unterminated_connection_id(void **state)
{
	struct board *b = board_create(1, 2, 4096);
	struct board_peer bp = peer(key_a, 1, 10), got;

	(void)state;
	assert_non_null(b);
	memset(bp.connection_id, 'x', sizeof bp.connection_id);
	assert_true(board_put(b, 0, &bp));
	assert_true(board_get(b, 0, key_a, 0, 0, &got));
	assert_int_equal(strnlen(got.connection_id, sizeof got.connection_id),
	    sizeof got.connection_id - 1);
	board_free(b);
}

/* A worker's totals, put in a child process, read in the parent. */
static void
test_shared_across_fork(void **state)
{
	struct board *b = board_create(2, 2, 4096);
	struct board_worker bw = { 0 }, got;
	struct board_peer gotp;
	int status;
	pid_t pid;

	(void)state;
	assert_false(board_get_worker(b, 1, &got));
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		struct board_peer bp = peer(key_b, 1, 7);

		bw.counters.tx_packets = 42;
		bw.admission.accepted = 3;
		board_put_worker(b, 1, &bw);
		_exit(board_put(b, 1, &bp) ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(board_get_worker(b, 1, &got));
	assert_int_equal(got.counters.tx_packets, 42);
	assert_int_equal(got.admission.accepted, 3);
	assert_false(board_get_worker(b, 0, &got));
	assert_false(board_get_worker(b, 2, &got));
	assert_true(board_get(b, 1, key_b, 0, 0, &gotp));
	assert_int_equal(gotp.counters.rx_bytes, 1007);
	board_free(b);
}

/* The configuration worker 0 put (in the parent, after the fork) is what
 * a worker reads, bytes and generation; none before; none too long. */
static void
test_config_across_fork(void **state)
{
	static const char text[] = "[Server]\nListen = 198.18.0.1:4433\n\0tail";
	struct board *b = board_create(2, 2, 64);
	char big[65] = { 0 };
	int pipefd[2], status;
	uint64_t gen;
	size_t len;
	char *buf, c;
	pid_t pid;

	(void)state;
	assert_false(board_get_config(b, &gen, &buf, &len));
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		bool ok;

		if (read(pipefd[0], &c, 1) != 1)
			_exit(2);
		ok = board_get_config(b, &gen, &buf, &len) && gen == 3 &&
		    len == sizeof text - 1 && memcmp(buf, text, len) == 0 &&
		    buf[len] == '\0';
		_exit(ok ? 0 : 1);
	}
	assert_true(board_put_config(b, 3, text, sizeof text - 1));
	assert_false(board_put_config(b, 4, big, sizeof big));
	assert_int_equal(write(pipefd[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pipefd[0]);
	close(pipefd[1]);
	board_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_newest_session_shows),
		cmocka_unit_test(test_shared_across_fork),
		cmocka_unit_test(test_config_across_fork),
		cmocka_unit_test(test_unterminated_connection_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for common/base/accept.c: a listener whose process has run
 * out of descriptors must not spin. The waiting connection is taken with
 * the reserve descriptor and closed (its client sees the close), the
 * listener's event is paused, and after the pause it accepts again. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/accept.h"

#define FILLERS 256

static void
never_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

static int
connect_to(const struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (const struct sockaddr *)sin, sizeof *sin), 0);
	return fd;
}

static void
test_out_of_descriptors(void **state)
{
	struct event_base *base = event_base_new();
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof sin;
	struct accept_guard g;
	struct event *ev;
	struct rlimit old, low;
	int lfd, c1, c2, got, fill[FILLERS], nfill = 0;
	struct timeval wait = { 1, 300000 };
	char byte;

	(void)state;
	assert_non_null(base);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(lfd, 8), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	ev = event_new(base, lfd, EV_READ | EV_PERSIST, never_cb, NULL);
	assert_non_null(ev);
	assert_int_equal(accept_guard_init(&g, base, ev, "test"), 0);
	event_add(ev, NULL);
	c1 = connect_to(&sin);
	c2 = connect_to(&sin);

	/* Every descriptor below a low limit taken. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)c2 + 16;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nfill < FILLERS &&
	    (fill[nfill] = open("/dev/null", O_RDONLY | O_CLOEXEC)) != -1)
		nfill++;
	assert_true(nfill < FILLERS);
	assert_int_equal(errno, EMFILE);

	/* The first waiting connection is refused (closed), the listener
	 * paused: no spinning on a socket that stays readable. */
	assert_int_equal(accept_guarded(&g, lfd, NULL, NULL), -1);
	assert_int_equal(errno, EMFILE);
	assert_int_equal(g.refused, 1);
	assert_int_equal(g.pauses, 1);
	assert_false(event_pending(ev, EV_READ, NULL));
	assert_int_equal(recv(c1, &byte, 1, 0), 0);

	/* Descriptors come back; after the pause the next one is taken. */
	while (nfill > 0)
		close(fill[--nfill]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	event_base_loopexit(base, &wait);
	event_base_dispatch(base);
	assert_true(event_pending(ev, EV_READ, NULL));
	got = accept_guarded(&g, lfd, NULL, NULL);
	assert_true(got >= 0);
	/* Nothing more waiting: -1, and no pause for that. */
	assert_int_equal(accept_guarded(&g, lfd, NULL, NULL), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(g.pauses, 1);

	close(got);
	close(c1);
	close(c2);
	accept_guard_free(&g);
	event_free(ev);
	close(lfd);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_out_of_descriptors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

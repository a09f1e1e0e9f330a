/* Unit tests for dial: a real event loop and real sockets on loopback. */
#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "dial.h"
#include "proto-fwd.h"

struct fixture {
	struct event_base *base;
	struct evdns_base *dns;
	int lfd;            /* a listener on 127.0.0.1:port */
	uint16_t port;
	uint16_t closed_port; /* a port nothing listens on */
	/* what the callbacks saw */
	unsigned calls, checks;
	int fd;
	uint64_t err;
	uint64_t check_answer;
	char checked[64];
};

static uint16_t
bound_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	return ntohs(sin.sin_port);
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char *cause = NULL;
	int probe;

	assert_non_null(fx);
	fx->base = event_base_new();
	assert_non_null(fx->base);
	fx->dns = dial_resolver_new(fx->base, &cause);
	assert_non_null(fx->dns);
	fx->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_int_equal(bind(fx->lfd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(fx->lfd, 8), 0);
	fx->port = bound_port(fx->lfd);
	/* A port that was free a moment ago and has no listener. */
	probe = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(probe, (struct sockaddr *)&sin, sizeof sin), 0);
	fx->closed_port = bound_port(probe);
	close(probe);
	fx->fd = -2;
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	if (fx->fd >= 0)
		close(fx->fd);
	close(fx->lfd);
	evdns_base_free(fx->dns, 0);
	event_base_free(fx->base);
	free(fx);
	return 0;
}

static void
done_cb(int fd, uint64_t err, void *arg)
{
	struct fixture *fx = arg;

	fx->calls++;
	fx->fd = fd;
	fx->err = err;
	event_base_loopbreak(fx->base);
}

static uint64_t
check_cb(const struct sockaddr *sa, void *arg)
{
	struct fixture *fx = arg;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

	fx->checks++;
	assert_int_equal(sa->sa_family, AF_INET);
	snprintf(fx->checked, sizeof fx->checked, "%08x:%u",
	    ntohl(sin->sin_addr.s_addr), ntohs(sin->sin_port));
	return fx->check_answer;
}

/* Run the loop until the dial ends; bounded, so a lost callback fails. */
static void
run(struct fixture *fx)
{
	struct timeval tv = { 5, 0 };

	event_base_loopexit(fx->base, &tv);
	event_base_dispatch(fx->base);
}

static void
test_literal_connects(void **state)
{
	struct fixture *fx = *state;
	char want[64];

	assert_non_null(dial_start(fx->base, fx->dns, "127.0.0.1", fx->port,
	    check_cb, done_cb, fx));
	/* Never from inside dial_start. */
	assert_int_equal(fx->calls, 0);
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_true(fx->fd >= 0);
	assert_int_equal(fx->checks, 1);
	snprintf(want, sizeof want, "7f000001:%u", fx->port);
	assert_string_equal(fx->checked, want);
}

static void
test_hosts_name_connects(void **state)
{
	struct fixture *fx = *state;

	/* "localhost" comes from /etc/hosts, no name server needed. */
	assert_non_null(dial_start(fx->base, fx->dns, "localhost", fx->port,
	    NULL, done_cb, fx));
	assert_int_equal(fx->calls, 0);
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_true(fx->fd >= 0);
}

static void
test_refused(void **state)
{
	struct fixture *fx = *state;

	assert_non_null(dial_start(fx->base, fx->dns, "127.0.0.1", fx->closed_port,
	    NULL, done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_int_equal(fx->fd, -1);
	assert_int_equal(fx->err, PROTO_FWD_ERR_REFUSED);
}

static void
test_check_denies(void **state)
{
	struct fixture *fx = *state;
	int cfd;

	fx->check_answer = PROTO_FWD_ERR_DENIED;
	assert_non_null(dial_start(fx->base, fx->dns, "127.0.0.1", fx->port,
	    check_cb, done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_int_equal(fx->checks, 1);
	assert_int_equal(fx->fd, -1);
	assert_int_equal(fx->err, PROTO_FWD_ERR_DENIED);
	/* Nothing connected to the listener. */
	cfd = accept(fx->lfd, NULL, NULL);
	assert_int_equal(cfd, -1);
	assert_int_equal(errno, EAGAIN);
}

static void
test_cancel_before_start(void **state)
{
	struct fixture *fx = *state;
	struct timeval tv = { 0, 200000 };

	dial_cancel(dial_start(fx->base, fx->dns, "127.0.0.1", fx->port,
	    check_cb, done_cb, fx));
	event_base_loopexit(fx->base, &tv);
	event_base_dispatch(fx->base);
	assert_int_equal(fx->calls, 0);
	assert_int_equal(fx->checks, 0);
	dial_cancel(NULL);
}

/* Cancelled while connecting: the connect attempt is abandoned, the
 * callback never runs. */
static void
test_cancel_while_connecting(void **state)
{
	struct fixture *fx = *state;
	struct timeval tv = { 0, 200000 };
	struct dial *d;

	d = dial_start(fx->base, fx->dns, "127.0.0.1", fx->port, check_cb, done_cb, fx);
	/* One pass of the loop runs the deferred start, which checks the
	 * address and begins the connect. */
	event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_int_equal(fx->checks, 1);
	dial_cancel(d);
	event_base_loopexit(fx->base, &tv);
	event_base_dispatch(fx->base);
	assert_int_equal(fx->calls, 0);
}

/* A resolver whose only name server is a UDP socket of ours that never
 * answers: a lookup stays pending until it times out. */
static struct evdns_base *
silent_resolver(struct fixture *fx, int *ufd)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct evdns_base *dns;
	char ns[32];

	*ufd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(bind(*ufd, (struct sockaddr *)&sin, sizeof sin), 0);
	snprintf(ns, sizeof ns, "127.0.0.1:%u", bound_port(*ufd));
	dns = evdns_base_new(fx->base, 0);
	assert_non_null(dns);
	assert_int_equal(evdns_base_nameserver_ip_add(dns, ns), 0);
	assert_int_equal(evdns_base_set_option(dns, "timeout:", "0.2"), 0);
	assert_int_equal(evdns_base_set_option(dns, "attempts:", "1"), 0);
	return dns;
}

static void
test_lookup_fails(void **state)
{
	struct fixture *fx = *state;
	struct evdns_base *dns;
	int ufd;

	dns = silent_resolver(fx, &ufd);
	assert_non_null(dial_start(fx->base, dns, "target.rove.invalid", fx->port,
	    check_cb, done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_int_equal(fx->checks, 0);
	assert_int_equal(fx->fd, -1);
	assert_int_equal(fx->err, PROTO_FWD_ERR_NAME);
	evdns_base_free(dns, 0);
	close(ufd);
}

static void
test_cancel_during_lookup(void **state)
{
	struct fixture *fx = *state;
	struct timeval tv = { 0, 500000 };
	struct evdns_base *dns;
	struct dial *d;
	int ufd;

	dns = silent_resolver(fx, &ufd);
	d = dial_start(fx->base, dns, "target.rove.invalid", fx->port,
	    check_cb, done_cb, fx);
	event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	dial_cancel(d);
	/* Past the resolver's timeout: nothing may arrive late. */
	event_base_loopexit(fx->base, &tv);
	event_base_dispatch(fx->base);
	assert_int_equal(fx->calls, 0);
	assert_int_equal(fx->checks, 0);
	evdns_base_free(dns, 0);
	close(ufd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_literal_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hosts_name_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_denies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_before_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_while_connecting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookup_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_during_lookup, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for dial (and tcp.c's connect): a real event loop and real
 * sockets on loopback. */
#include <arpa/inet.h>
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

#include "forward/dial.h"
#include "forward/tcp.h"
#include "wire/proto-fwd.h"

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
	uint32_t deny_only;  /* if set, the check denies this address only */
	char checked[64];   /* the last address checked */
	char hosts[64];     /* a hosts file of the test's, removed at teardown */
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
	if (fx->hosts[0] != '\0')
		unlink(fx->hosts);
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
	if (fx->deny_only != 0)
		return ntohl(sin->sin_addr.s_addr) == fx->deny_only ?
		    PROTO_FWD_ERR_DENIED : 0;
	return fx->check_answer;
}

/* Nothing has connected to the listener. */
static void
assert_no_connection(struct fixture *fx)
{
	int cfd = accept(fx->lfd, NULL, NULL);

	assert_int_equal(cfd, -1);
	assert_int_equal(errno, EAGAIN);
}


/* Run the loop until the dial ends; bounded, so a lost callback fails. */
static void
run(struct fixture *fx)
{
	struct timeval tv = { 5, 0 };

	event_base_loopexit(fx->base, &tv);
	event_base_dispatch(fx->base);
}

/* One connection has reached the listener; both ends are closed again. */
static void
assert_one_connection(struct fixture *fx)
{
	int cfd = accept(fx->lfd, NULL, NULL);

	assert_true(cfd >= 0);
	close(cfd);
	assert_no_connection(fx);
	assert_true(fx->fd >= 0);
	close(fx->fd);
	fx->fd = -2;
}

/* Dial `host` on the listener's port through `dns` and run the loop until
 * the dial has ended, once. */
static void
dial_run(struct fixture *fx, struct evdns_base *dns, const char *host,
    dial_check_cb check)
{
	fx->calls = fx->checks = 0;
	fx->fd = -2;
	assert_non_null(dial_start(fx->base, dns, host, fx->port, check,
	    done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
}

/* The dial failed with `err` after `checks` checks; nothing connected. */
static void
assert_failed(struct fixture *fx, uint64_t err, unsigned checks)
{
	assert_int_equal(fx->checks, checks);
	assert_int_equal(fx->fd, -1);
	assert_int_equal(fx->err, err);
	assert_no_connection(fx);
}

/* The check saw 127.0.0.1 and the listener's port last. */
static void
assert_checked_loopback(struct fixture *fx)
{
	char want[64];

	snprintf(want, sizeof want, "7f000001:%u", fx->port);
	assert_string_equal(fx->checked, want);
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

	fx->check_answer = PROTO_FWD_ERR_DENIED;
	dial_run(fx, fx->dns, "127.0.0.1", check_cb);
	assert_failed(fx, PROTO_FWD_ERR_DENIED, 1);
}

/* The IPv4-mapped spelling of 127.0.0.1 is checked, and connected to, as
 * 127.0.0.1 (check_cb fails on anything but AF_INET). */
static void
test_mapped_literal_is_ipv4(void **state)
{
	struct fixture *fx = *state;

	dial_run(fx, fx->dns, "::ffff:127.0.0.1", check_cb);
	assert_int_equal(fx->checks, 1);
	assert_checked_loopback(fx);
	assert_one_connection(fx);

	/* ... and denied when 127.0.0.1 is. */
	fx->check_answer = PROTO_FWD_ERR_DENIED;
	dial_run(fx, fx->dns, "::ffff:127.0.0.1", check_cb);
	assert_failed(fx, PROTO_FWD_ERR_DENIED, 1);
	assert_checked_loopback(fx);
}

/* Addresses that are never a target: refused before any check, with or
 * without one (the client's -R dials have none). */
static void
test_unusable_literals(void **state)
{
	static const char *const bad[] = {
		"0.0.0.0", "0.1.2.3", "::", "::ffff:0.0.0.0", "224.0.0.1",
		"::ffff:224.0.0.1", "ff02::1", "255.255.255.255", "::127.0.0.1",
		"::0.0.0.2",
	};
	struct fixture *fx = *state;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		dial_run(fx, fx->dns, bad[i], check_cb);
		assert_failed(fx, PROTO_FWD_ERR_DENIED, 0);
		dial_run(fx, fx->dns, bad[i], NULL);
		assert_failed(fx, PROTO_FWD_ERR_DENIED, 0);
	}
}

/* A resolver that knows only the names in `hosts` (no name server). */
static struct evdns_base *
hosts_resolver(struct fixture *fx, const char *hosts)
{
	struct evdns_base *dns;
	int fd;

	snprintf(fx->hosts, sizeof fx->hosts, "/tmp/rove-test-hosts.XXXXXX");
	fd = mkstemp(fx->hosts);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, hosts, strlen(hosts)), (ssize_t)strlen(hosts));
	close(fd);
	dns = evdns_base_new(fx->base, 0);
	assert_non_null(dns);
	assert_int_equal(evdns_base_load_hosts(dns, fx->hosts), 0);
	return dns;
}

/* A name's addresses are each vetted: unusable ones and those the check
 * denies are skipped, the first that passes is connected to. */
static void
test_name_first_allowed(void **state)
{
	struct fixture *fx = *state;
	struct evdns_base *dns;

	dns = hosts_resolver(fx,
	    "0.0.0.0 t.rove.test\n"
	    "224.0.0.1 t.rove.test\n"
	    "127.0.0.2 t.rove.test\n"
	    "127.0.0.1 t.rove.test\n"
	    "127.0.0.3 t.rove.test\n");
	fx->deny_only = 0x7f000002;
	dial_run(fx, dns, "t.rove.test", check_cb);
	/* 127.0.0.2 denied, 127.0.0.1 taken, 127.0.0.3 never looked at */
	assert_int_equal(fx->checks, 2);
	assert_checked_loopback(fx);
	assert_one_connection(fx);
	evdns_base_free(dns, 0);
}

/* No address passes: the first refusal ends the dial, nothing connects. */
static void
test_name_all_denied(void **state)
{
	struct fixture *fx = *state;
	struct evdns_base *dns;

	dns = hosts_resolver(fx,
	    "0.0.0.0 t.rove.test\n"
	    "127.0.0.1 t.rove.test\n"
	    "127.0.0.1 u.rove.test\n");
	fx->check_answer = PROTO_FWD_ERR_DENIED;
	dial_run(fx, dns, "t.rove.test", check_cb);
	assert_failed(fx, PROTO_FWD_ERR_DENIED, 1);

	/* A check that fails otherwise: its code is the dial's. */
	fx->check_answer = PROTO_FWD_ERR_UNREACHABLE;
	dial_run(fx, dns, "u.rove.test", check_cb);
	assert_failed(fx, PROTO_FWD_ERR_UNREACHABLE, 1);
	evdns_base_free(dns, 0);
}

/* Outgoing IPv6 sockets are V6ONLY: handed an IPv4-mapped address
 * directly, a connect does not reach the IPv4 listener. */
static void
test_tcp_v6only(void **state)
{
	struct fixture *fx = *state;
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
		.sin6_port = htons(fx->port) };
	uint64_t err = 0;

	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6.sin6_addr), 1);
	assert_non_null(tcp_connect_start(fx->base, (struct sockaddr *)&sin6,
	    sizeof sin6, 2000, done_cb, fx, &err));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_failed(fx, PROTO_FWD_ERR_UNREACHABLE, 0);
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

/* A UDP socket bound on 127.0.0.1 (and its port). */
static int
udp_target(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	*port = bound_port(fd);
	return fd;
}

/* A UDP dial ends with a UDP socket connected to the target: what it
 * sends arrives there, from no other address does it take anything. */
static void
test_udp_literal_connects(void **state)
{
	struct fixture *fx = *state;
	struct sockaddr_in peer, from;
	socklen_t len = sizeof peer;
	char want[64], buf[16];
	int tfd, type = 0;
	uint16_t tport;

	tfd = udp_target(&tport);
	assert_non_null(dial_start_udp(fx->base, fx->dns, "127.0.0.1", tport,
	    check_cb, done_cb, fx));
	/* Never from inside dial_start_udp. */
	assert_int_equal(fx->calls, 0);
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_int_equal(fx->checks, 1);
	snprintf(want, sizeof want, "7f000001:%u", tport);
	assert_string_equal(fx->checked, want);
	assert_true(fx->fd >= 0);
	len = sizeof type;
	assert_int_equal(getsockopt(fx->fd, SOL_SOCKET, SO_TYPE, &type, &len), 0);
	assert_int_equal(type, SOCK_DGRAM);
	len = sizeof peer;
	assert_int_equal(getpeername(fx->fd, (struct sockaddr *)&peer, &len), 0);
	assert_int_equal(ntohl(peer.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(peer.sin_port), tport);

	/* One datagram there and one back. */
	assert_int_equal(send(fx->fd, "query", 5, 0), 5);
	len = sizeof from;
	assert_int_equal(recvfrom(tfd, buf, sizeof buf, 0,
	    (struct sockaddr *)&from, &len), 5);
	assert_memory_equal(buf, "query", 5);
	assert_int_equal(sendto(tfd, "answer", 6, 0, (struct sockaddr *)&from,
	    len), 6);
	assert_int_equal(recv(fx->fd, buf, sizeof buf, 0), 6);
	assert_memory_equal(buf, "answer", 6);
	close(tfd);
}

/* By name too, and the TCP listener on another port sees nothing. */
static void
test_udp_hosts_name_connects(void **state)
{
	struct fixture *fx = *state;
	int tfd, type = 0;
	socklen_t len = sizeof type;
	uint16_t tport;

	tfd = udp_target(&tport);
	assert_non_null(dial_start_udp(fx->base, fx->dns, "localhost", tport,
	    NULL, done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_true(fx->fd >= 0);
	assert_int_equal(getsockopt(fx->fd, SOL_SOCKET, SO_TYPE, &type, &len), 0);
	assert_int_equal(type, SOCK_DGRAM);
	assert_no_connection(fx);
	close(tfd);
}

/* The policy check runs on UDP targets as on TCP ones. */
static void
test_udp_check_denies(void **state)
{
	struct fixture *fx = *state;

	fx->check_answer = PROTO_FWD_ERR_DENIED;
	fx->calls = fx->checks = 0;
	assert_non_null(dial_start_udp(fx->base, fx->dns, "127.0.0.1", 53,
	    check_cb, done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_failed(fx, PROTO_FWD_ERR_DENIED, 1);
	/* Unusable addresses never reach the check. */
	fx->calls = fx->checks = 0;
	assert_non_null(dial_start_udp(fx->base, fx->dns, "224.0.0.251", 5353,
	    check_cb, done_cb, fx));
	run(fx);
	assert_int_equal(fx->calls, 1);
	assert_failed(fx, PROTO_FWD_ERR_DENIED, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_literal_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hosts_name_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_denies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mapped_literal_is_ipv4, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unusable_literals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_first_allowed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_all_denied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_v6only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_before_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_while_connecting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookup_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_during_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_literal_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_hosts_name_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_check_denies, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

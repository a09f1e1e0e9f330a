/* Unit tests for common/forward/udpflow.c: UDP flow contexts, lookups,
 * counters, limits and idle expiry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "forward/udpflow.h"

static struct ipaddr
ip(const char *s)
{
	struct ipaddr a;

	assert_int_equal(addr_parse_ip(s, &a), 0);
	return a;
}

static unsigned released;

static void
count_release(struct udp_flow *f, void *arg)
{
	(void)f;
	assert_ptr_equal(arg, &released);
	released++;
}

/* The client's flows: even contexts from 4, one per source, found by
 * source and by context. */
static void
test_open_lookup(void **state)
{
	struct udp_flow_counters c = { 0 };
	struct udp_flow_set set;
	struct udp_flow *a, *b, *d;
	struct ipaddr s1 = ip("127.0.0.1"), s2 = ip("::1");

	(void)state;
	udp_flows_init(&set, PROTO_UDP_BY_CLIENT, 8, 60000, &c);
	a = udp_flow_open(&set, &s1, 40000, "dns.example:53", 1000);
	b = udp_flow_open(&set, &s1, 40001, "dns.example:53", 1000);
	d = udp_flow_open(&set, &s2, 40000, "dns.example:53", 1000);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	assert_true(a->ctx == 4 && b->ctx == 6 && d->ctx == 8);
	assert_string_equal(a->target, "dns.example:53");
	assert_int_equal(set.n, 3);
	assert_true(c.opened == 3);
	assert_ptr_equal(udp_flow_by_src(&set, &s1, 40000), a);
	assert_ptr_equal(udp_flow_by_src(&set, &s1, 40001), b);
	assert_ptr_equal(udp_flow_by_src(&set, &s2, 40000), d);
	assert_null(udp_flow_by_src(&set, &s2, 40001));
	assert_ptr_equal(udp_flow_by_ctx(&set, 6), b);
	assert_null(udp_flow_by_ctx(&set, 5));
	/* A context is not reused once its flow is gone. */
	udp_flow_close(&set, b, NULL, NULL);
	assert_null(udp_flow_by_ctx(&set, 6));
	b = udp_flow_open(&set, &s1, 40001, "dns.example:53", 2000);
	assert_true(b->ctx == 10);
	released = 0;
	udp_flows_clear(&set, count_release, &released);
	assert_int_equal(released, 3);
	assert_int_equal(set.n, 0);
}

/* roved's own flows (-R) are odd; what it accepts must be even, new, and
 * within the limit, else it is refused and counted. */
static void
test_accept(void **state)
{
	struct udp_flow_counters c = { 0 };
	struct udp_flow_set set;
	struct udp_flow *f;
	struct ipaddr s = ip("198.18.0.7");
	uint64_t err = 0;

	(void)state;
	udp_flows_init(&set, PROTO_UDP_BY_SERVER, 2, 60000, &c);
	f = udp_flow_open(&set, &s, 5353, "127.0.0.1:53", 0);
	assert_true(f->ctx == 5);
	f = udp_flow_accept(&set, 4, "dns.example:53", 0, &err);
	assert_non_null(f);
	assert_true(f->ctx == 4);
	/* Full now. */
	assert_null(udp_flow_accept(&set, 6, "dns.example:53", 0, &err));
	assert_true(err == PROTO_FWD_ERR_LIMIT);
	udp_flow_close(&set, f, NULL, NULL);
	/* In use, odd, a tunnel context. */
	assert_null(udp_flow_accept(&set, 5, "x:1", 0, &err));
	assert_true(err == PROTO_FWD_ERR_PROTOCOL);
	assert_null(udp_flow_accept(&set, 7, "x:1", 0, &err));
	assert_true(err == PROTO_FWD_ERR_PROTOCOL);
	assert_null(udp_flow_accept(&set, 0, "x:1", 0, &err));
	assert_true(err == PROTO_FWD_ERR_PROTOCOL);
	assert_non_null(f = udp_flow_accept(&set, 6, "x:1", 0, &err));
	assert_null(udp_flow_accept(&set, 6, "x:1", 0, &err));
	assert_true(err == PROTO_FWD_ERR_PROTOCOL);
	assert_true(c.refused == 5);
	assert_true(c.opened == 3);
	udp_flows_clear(&set, NULL, NULL);
}

/* Opening past the limit drops the datagram and counts it. */
static void
test_limit(void **state)
{
	struct udp_flow_counters c = { 0 };
	struct udp_flow_set set;
	struct ipaddr s = ip("127.0.0.1");

	(void)state;
	udp_flows_init(&set, PROTO_UDP_BY_CLIENT, 2, 60000, &c);
	assert_non_null(udp_flow_open(&set, &s, 1, "t:1", 0));
	assert_non_null(udp_flow_open(&set, &s, 2, "t:1", 0));
	assert_null(udp_flow_open(&set, &s, 3, "t:1", 0));
	assert_null(udp_flow_open(&set, &s, 4, "t:1", 0));
	assert_true(c.drops[UDP_DROP_LIMIT] == 2);
	assert_true(c.opened == 2);
	assert_int_equal(set.n, 2);
	udp_flows_clear(&set, NULL, NULL);
}

/* Counters per flow and per set; a refusal counts once. */
static void
test_counters(void **state)
{
	struct udp_flow_counters c = { 0 };
	struct udp_flow_set set;
	struct udp_flow *f;
	struct ipaddr s = ip("127.0.0.1");

	(void)state;
	udp_flows_init(&set, PROTO_UDP_BY_CLIENT, 4, 60000, &c);
	f = udp_flow_open(&set, &s, 1, "t:1", 0);
	udp_flow_tx(&set, f, 100, 10);
	udp_flow_tx(&set, f, 1200, 20);
	udp_flow_rx(&set, f, 300, 30);
	assert_true(f->tx_dgrams == 2 && f->tx_bytes == 1300);
	assert_true(f->rx_dgrams == 1 && f->rx_bytes == 300);
	assert_true(f->last_ms == 30 && f->created_ms == 0);
	udp_flow_drop(&set, f, UDP_DROP_TOO_BIG);
	udp_flow_drop(&set, NULL, UDP_DROP_NO_FLOW);
	udp_flow_drop(&set, f, UDP_DROP_COUNT); /* ignored */
	assert_true(f->drops[UDP_DROP_TOO_BIG] == 1);
	assert_true(f->drops[UDP_DROP_NO_FLOW] == 0);
	assert_true(c.drops[UDP_DROP_TOO_BIG] == 1);
	assert_true(c.drops[UDP_DROP_NO_FLOW] == 1);
	udp_flow_refused(&set, f);
	udp_flow_refused(&set, f);
	assert_true(f->refused);
	assert_true(c.refused == 1);
	assert_string_equal(udp_drop_name(UDP_DROP_TOO_BIG), "too_big");
	assert_string_equal(udp_drop_name(UDP_DROP_QUEUE), "queue");
	assert_string_equal(udp_drop_name(UDP_DROP_COUNT), "unknown");
	udp_flows_clear(&set, NULL, NULL);
}

/* Idle flows end after the timeout from their last datagram, either way;
 * the answer is how long until the next one would. */
static void
test_expire(void **state)
{
	struct udp_flow_counters c = { 0 };
	struct udp_flow_set set;
	struct udp_flow *a, *b;
	struct ipaddr s = ip("127.0.0.1");

	(void)state;
	udp_flows_init(&set, PROTO_UDP_BY_CLIENT, 4, 1000, &c);
	assert_true(udp_flows_expire(&set, 0, NULL, NULL) == UINT64_MAX);
	a = udp_flow_open(&set, &s, 1, "t:1", 0);
	b = udp_flow_open(&set, &s, 2, "t:1", 100);
	assert_true(udp_flows_expire(&set, 500, NULL, NULL) == 500);
	/* a's reply keeps it: b is now the older. */
	udp_flow_rx(&set, a, 10, 600);
	assert_true(udp_flows_expire(&set, 700, NULL, NULL) == 400);
	released = 0;
	assert_true(udp_flows_expire(&set, 1100, count_release,
	    &released) == 500);
	assert_int_equal(released, 1);
	assert_null(udp_flow_by_ctx(&set, 6));
	assert_ptr_equal(udp_flow_by_ctx(&set, 4), a);
	assert_true(c.expired == 1);
	assert_true(udp_flows_expire(&set, 1600, count_release,
	    &released) == UINT64_MAX);
	assert_int_equal(released, 2);
	assert_true(c.expired == 2);
	assert_int_equal(set.n, 0);
	(void)b;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_lookup),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_counters),
		cmocka_unit_test(test_expire),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

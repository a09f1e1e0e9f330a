/* Unit tests for common/forward/udprelay.c without a connection: what
 * it does with DATAGRAMs that name no flow, and with sources while there
 * is no connection (dropped and counted, nothing else). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <event2/event.h>
#include <netinet/in.h>

#include "forward/udprelay.h"

static void
test_unknown_context(void **state)
{
	static const uint8_t flow6[] = { 0x06, 'h', 'i' };
	static const uint8_t flow2byte[] = { 0x40, 0x44, 'x' };
	static const uint8_t truncated[] = { 0x40 };
	struct udp_flow_counters c;
	struct event_base *base = event_base_new();
	struct udp_relay r;

	(void)state;
	assert_non_null(base);
	memset(&c, 0, sizeof c);
	udp_relay_init(&r, base, PROTO_UDP_BY_SERVER, &c, NULL, NULL, NULL,
	    "test");
	udp_relay_datagram(&r, flow6, sizeof flow6);
	udp_relay_datagram(&r, flow2byte, sizeof flow2byte);
	udp_relay_datagram(&r, truncated, sizeof truncated);
	udp_relay_datagram(&r, truncated, 0);
	assert_true(c.drops[UDP_DROP_NO_FLOW] == 4);
	assert_true(c.opened == 0 && c.refused == 0);
	udp_relay_clear(&r);
	udp_relay_clear(&r); /* twice is harmless */
	event_base_free(base);
}

static void
test_no_connection(void **state)
{
	static const uint8_t payload[] = { 1, 2, 3 };
	struct udp_flow_counters c;
	struct event_base *base = event_base_new();
	struct sockaddr_in src = { .sin_family = AF_INET,
	    .sin_port = htons(40000), .sin_addr.s_addr = htonl(0x7f000001) };
	struct udp_relay r;

	(void)state;
	assert_non_null(base);
	memset(&c, 0, sizeof c);
	udp_relay_init(&r, base, PROTO_UDP_BY_CLIENT, &c, NULL, NULL, NULL,
	    "test");
	udp_relay_from_source(&r, -1, (struct sockaddr *)&src, "dns.example",
	    53, payload, sizeof payload);
	assert_true(c.drops[UDP_DROP_NO_FLOW] == 1);
	assert_true(c.opened == 0);
	assert_int_equal(r.set.n, 0);
	/* Likewise a SOCKS relay's datagram. */
	udp_relay_from_socks(&r, -1, (struct sockaddr *)&src, "dns.example",
	    53, payload, sizeof payload, payload, sizeof payload);
	assert_true(c.drops[UDP_DROP_NO_FLOW] == 2);
	assert_true(c.opened == 0);
	assert_int_equal(r.set.n, 0);
	/* Not a flow's stream, with no connection: left to the forwards. */
	assert_false(udp_relay_stream_data(&r, 4, NULL, payload,
	    sizeof payload, false));
	assert_false(udp_relay_stream_gone(&r, 4, &c, 0));
	udp_relay_clear(&r);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_context),
		cmocka_unit_test(test_no_connection),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

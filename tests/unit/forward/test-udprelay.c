/* Unit tests for common/forward/udprelay.c: what it does with DATAGRAMs
 * that name no flow, and with sources while there is no connection
 * (dropped and counted, nothing else); and, on a connection, what a flow
 * in set-up holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <event2/event.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "forward/udprelay.h"
#include "transport/quic-int.h"
#include "transport/quic-pair.h"

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
	/* Read from a listening socket: a datagram longer than any path's
	 * DATAGRAM frames is cut by the read and counted as too big, the
	 * next one goes on (and, with no connection, nowhere). */
	{
		static uint8_t huge[3000];
		struct sockaddr_in lo = { .sin_family = AF_INET,
		    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t lolen = sizeof lo;
		int rfd = socket(AF_INET, SOCK_DGRAM, 0);
		int sfd = socket(AF_INET, SOCK_DGRAM, 0);

		assert_true(rfd >= 0 && sfd >= 0);
		assert_int_equal(bind(rfd, (struct sockaddr *)&lo, sizeof lo), 0);
		assert_int_equal(getsockname(rfd, (struct sockaddr *)&lo,
		    &lolen), 0);
		assert_int_equal(sendto(sfd, huge, sizeof huge, 0,
		    (struct sockaddr *)&lo, lolen), (ssize_t)sizeof huge);
		assert_int_equal(sendto(sfd, payload, sizeof payload, 0,
		    (struct sockaddr *)&lo, lolen), (ssize_t)sizeof payload);
		udp_relay_read(&r, rfd, "dns.example", 53, false);
		assert_true(c.drops[UDP_DROP_TOO_BIG] == 1);
		assert_true(c.drops[UDP_DROP_NO_FLOW] == 3);
		close(sfd);
		close(rfd);
	}
	/* Not a flow's stream, with no connection: left to the forwards. */
	assert_false(udp_relay_stream_data(&r, 4, NULL, payload,
	    sizeof payload, false));
	assert_false(udp_relay_stream_gone(&r, 4, &c, 0));
	udp_relay_clear(&r);
	event_base_free(base);
}

/* A new flow holds its source's datagrams until the far side answers,
 * LINK_QUEUE of them; one larger than the path's DATAGRAM frames could
 * never go, and is dropped at once rather than held (a sender must not
 * make a flow in set-up hold 64 KiB datagrams). */
static void
test_flow_setup_and_detach(void **state)
{
	static uint8_t big[4000], small[100];
	struct sockaddr_in src = { .sin_family = AF_INET,
	    .sin_port = htons(40000), .sin_addr.s_addr = htonl(0x7f000001) };
	struct udp_flow_counters c;
	struct udp_relay r;
	struct pair *p = pair_new_plain();

	(void)state;
	pair_connect(p, NULL);
	assert_true(pair_run(p, 400) > 0);
	assert_int_equal(quic_conn_state(p->c.qc), QUIC_STATE_ESTABLISHED);
	assert_true(sizeof big > quic_conn_dgram_max(p->c.qc));
	memset(&c, 0, sizeof c);
	udp_relay_init(&r, pair_base, PROTO_UDP_BY_CLIENT, &c, NULL, NULL, NULL,
	    "test");
	udp_relay_attach(&r, p->c.qc);
	udp_relay_from_source(&r, -1, (struct sockaddr *)&src, "dns.example",
	    53, small, sizeof small);
	assert_int_equal(r.set.n, 1);
	udp_relay_from_source(&r, -1, (struct sockaddr *)&src, "dns.example",
	    53, big, sizeof big);
	assert_true(c.drops[UDP_DROP_TOO_BIG] == 1);
	/* The queue is the small ones': 7 more fit, the next does not. */
	for (int i = 0; i < 7; i++)
		udp_relay_from_source(&r, -1, (struct sockaddr *)&src,
		    "dns.example", 53, small, sizeof small);
	assert_true(c.drops[UDP_DROP_QUEUE] == 0);
	udp_relay_from_source(&r, -1, (struct sockaddr *)&src, "dns.example",
	    53, small, sizeof small);
	assert_true(c.drops[UDP_DROP_QUEUE] == 1);
	assert_true(c.drops[UDP_DROP_TOO_BIG] == 1);
	assert_int_equal(r.set.n, 1);
	/* The flow's stream (the client's first) names its link until the
	 * connection goes; then, the connection still there (closing, or
	 * given up for TCP), the stream forgets it rather than keep a
	 * freed link for its next event. */
	struct quic_stream *st = quic_stream_find(p->c.qc, 0);
	assert_non_null(st);
	assert_non_null(st->arg);
	udp_relay_attach(&r, NULL);
	assert_int_equal(r.set.n, 0);
	st = quic_stream_find(p->c.qc, 0);
	assert_true(st == NULL || st->arg == NULL);
	udp_relay_clear(&r);
	pair_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_context),
		cmocka_unit_test(test_no_connection),
		cmocka_unit_test_teardown(test_flow_setup_and_detach, pair_free_all),
	};

	return cmocka_run_group_tests(tests, pair_group_setup,
	    pair_group_teardown);
}

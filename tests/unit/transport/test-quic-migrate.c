/* Unit tests for connection migration between two live uplinks
 * (transport/quic-udp.c over ngtcp2): a client with two sockets, the way
 * rove holds its old and new socket while it moves, and a server, in one
 * process on a virtual clock. A link that goes down is a socket whose
 * packets vanish both ways. The session must survive every move, however
 * fast they come, and keep carrying datagrams both ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "quic-pair.h"

#define FLIPS 20

static struct pair *
established_pair(void)
{
	struct pair *p = pair_new_plain();

	pair_connect(p, NULL);
	assert_true(pair_run(p, 400) > 0);
	assert_int_equal(quic_conn_state(p->c.qc), QUIC_STATE_ESTABLISHED);
	assert_int_equal(quic_conn_state(p->s.qc), QUIC_STATE_ESTABLISHED);
	return p;
}

static void
clear_datagrams(struct endpoint *e)
{
	for (size_t i = 0; i < e->ndgrams; i++)
		free(e->dgram[i]);
	e->ndgrams = 0;
}

/* One datagram each way must arrive within `rounds` rounds. */
static void
assert_datagrams_flow(struct pair *p, int rounds)
{
	static const uint8_t up[] = "up", down[] = "down";

	clear_datagrams(&p->c);
	clear_datagrams(&p->s);
	assert_int_equal(quic_conn_send_datagram(p->c.qc, up, sizeof up), 0);
	assert_int_equal(quic_conn_send_datagram(p->s.qc, down, sizeof down), 0);
	pair_write(p);
	for (int i = 0; i < rounds && (p->s.ndgrams == 0 || p->c.ndgrams == 0); i++)
		pair_round(p);
	assert_int_equal(p->s.ndgrams, 1);
	assert_int_equal(p->c.ndgrams, 1);
	assert_memory_equal(p->s.dgram[0], up, sizeof up);
	assert_memory_equal(p->c.dgram[0], down, sizeof down);
}

static void
assert_alive(const struct pair *p)
{
	if (p->c.closed || p->s.closed)
		fprintf(stderr, "closed by %s: code %llu\n",
		    p->s.closed && p->s.close_info.remote ? "client" : "server",
		    (unsigned long long)(p->s.closed ? p->s.close_info.code :
		    p->c.close_info.code));
	assert_int_equal(p->c.closed, 0);
	assert_int_equal(p->s.closed, 0);
	assert_int_equal(quic_conn_state(p->c.qc), QUIC_STATE_ESTABLISHED);
	assert_int_equal(quic_conn_state(p->s.qc), QUIC_STATE_ESTABLISHED);
}

/* What rove does when the route to the server moves to the other uplink
 * (client_path_check): a fresh socket and a migration to it, immediate
 * when the old address is gone. With `old_dies` the link the session
 * was on is down from that moment. `settle` rounds (ms) pass before the
 * next move, with a datagram each way every round (a ping through the
 * tunnel); few rounds is a flapping link. */
static void
flip_between_uplinks(bool old_dies, bool immediate, int settle)
{
	struct pair *p = established_pair();
	static const uint8_t ping[] = "ping";

	for (int i = 0; i < FLIPS; i++) {
		struct udp_batch *to = pair_open_move(p);

		if (old_dies)
			pair_kill_all_but(p, to);
		/* A move may have to wait for the server's next connection
		 * ID (ERR_CONN_ID_BLOCKED) while the last one settles; it
		 * never may once the last one has. */
		if (quic_conn_migrate(p->c.qc, to, immediate) != 0)
			assert_true(settle < 100);
		for (int r = 0; r < settle; r++) {
			clear_datagrams(&p->c);
			clear_datagrams(&p->s);
			quic_conn_send_datagram(p->c.qc, ping, sizeof ping);
			quic_conn_send_datagram(p->s.qc, ping, sizeof ping);
			pair_round(p);
		}
		assert_alive(p);
	}
	/* Every link up again: the session must settle on one. */
	pair_kill_all_but(p, NULL);
	pair_run(p, 2000);
	assert_alive(p);
	assert_datagrams_flow(p, 100);
	pair_free(p);
}

/* Both links stay up; each move completes before the next. */
static void
test_flip_live_uplinks(void **state)
{
	(void)state;
	flip_between_uplinks(false, false, 200);
}

/* The link the session is on goes down, the route moves to the other
 * one: rove's ordinary Wi-Fi to LTE failover, and back, 20 times. */
static void
test_flip_link_down(void **state)
{
	(void)state;
	flip_between_uplinks(true, false, 200);
}

/* The same with the old address gone (immediate migration). */
static void
test_flip_link_down_immediate(void **state)
{
	(void)state;
	flip_between_uplinks(true, true, 200);
}

/* Moves closer together than a path validation takes, 1 to 34 ms apart
 * (round trip 2 ms): some must wait for connection IDs, none may cost the
 * session. */
static void
test_flip_fast(void **state)
{
	static const int settle[] = { 1, 2, 3, 5, 8, 13, 21, 34 };

	(void)state;
	for (size_t i = 0; i < sizeof settle / sizeof settle[0]; i++)
		flip_between_uplinks(true, false, settle[i]);
}

/* The client's NAT rebinds (the server starts validating the new address,
 * keeping the connection ID) and the client migrates to a new socket with
 * a new connection ID before that validation ends: a laptop waking up
 * behind a NAT that forgot it. The server must neither retire the ID it
 * still holds as its fallback nor count it, and so must not close with
 * CONNECTION_ID_LIMIT when the client replaces the ID it retired
 * (scripts/patches/ngtcp2-rebind-fallback-retire.patch). */
static void
test_rebind_then_migrate(void **state)
{
	static const uint8_t ping[] = "ping";

	(void)state;
	for (int lag = 0; lag < 4; lag++) {
		struct pair *p = established_pair();

		pair_nat_rebind(p);
		quic_conn_send_datagram(p->c.qc, ping, sizeof ping);
		pair_write(p);
		for (int r = 0; r < lag; r++)
			pair_round(p);
		assert_int_equal(quic_conn_migrate(p->c.qc, pair_open_move(p),
		    false), 0);
		for (int r = 0; r < 300; r++) {
			clear_datagrams(&p->c);
			clear_datagrams(&p->s);
			quic_conn_send_datagram(p->c.qc, ping, sizeof ping);
			quic_conn_send_datagram(p->s.qc, ping, sizeof ping);
			pair_round(p);
		}
		assert_alive(p);
		pair_run(p, 2000);
		assert_alive(p);
		assert_datagrams_flow(p, 100);
		pair_free(p);
	}
}

/* A path gone silent long enough for the congestion window to be full
 * of unacknowledged bytes and for the PTO to have backed off to seconds
 * (rove's silent uplink): the move rove then makes must put its
 * PATH_CHALLENGE on the wire at once, not at the next PTO. ngtcp2 1.24.0
 * held it behind the full window
 * (scripts/patches/ngtcp2-path-probe-cwnd.patch): the probe left
 * only at the next PTO, seconds later. */
static void
test_probe_through_full_window(void **state)
{
	static uint8_t bulk[PAIR_STREAM_WINDOW];
	struct udp_batch *to;
	int64_t id;
	int r;

	(void)state;
	struct pair *p = established_pair();

	p->c1_dead = true;
	assert_true((id = quic_conn_open_stream(p->c.qc, NULL)) >= 0);
	assert_int_equal(quic_conn_stream_send(p->c.qc, id, bulk, sizeof bulk,
	    false), 0);
	for (r = 0; r < 6000; r++) /* 6 s of silence */
		pair_round(p);
	to = pair_open_move(p);
	pair_kill_all_but(p, to);
	assert_int_equal(quic_conn_migrate(p->c.qc, to, false), 0);
	for (r = 0; r < 5 && to->sent_packets == 0; r++)
		pair_round(p);
	assert_int_not_equal(to->sent_packets, 0);
	/* Validated, and the stream's bytes then go the new way. */
	for (r = 0; r < 3000 && p->s.stream_len < sizeof bulk; r++)
		pair_round(p);
	assert_int_equal(p->s.stream_len, sizeof bulk);
	assert_alive(p);
	pair_free(p);
}

/* The ack silence that sends a client to a new port (1 s) and races TCP
 * (2 s) counts from the oldest packet still unacknowledged. The first
 * packet after a quiet spell starts it afresh: the quiet, when nothing
 * was in flight, is no silence, and a round trip's wait for the first
 * ack must not read as seconds of it. */
static void
test_silence_after_quiet(void **state)
{
	static const uint8_t ping[] = "ping";

	(void)state;
	struct pair *p = established_pair();

	assert_int_equal(quic_conn_ack_silence_ms(p->c.qc), 0);
	pair_now += 5 * NGTCP2_SECONDS;
	assert_int_equal(quic_conn_send_datagram(p->c.qc, ping, sizeof ping), 0);
	pair_write(p);
	assert_int_not_equal(p->cbatch.sent_packets, 0);
	pair_now += 40 * NGTCP2_MILLISECONDS;  /* not answered yet */
	assert_int_equal(quic_conn_ack_silence_ms(p->c.qc), 40);
	/* Answered: nothing in flight, no silence. */
	assert_true(pair_run(p, 400) > 0);
	assert_int_equal(quic_conn_ack_silence_ms(p->c.qc), 0);
	/* Unanswered from then on (a cut flow): the silence grows from the
	 * packet that went first. */
	p->c1_dead = true;
	pair_now += 3 * NGTCP2_SECONDS;
	assert_int_equal(quic_conn_send_datagram(p->c.qc, ping, sizeof ping), 0);
	pair_write(p);
	for (int r = 0; r < 1000; r++)
		pair_round(p);
	assert_int_equal(quic_conn_ack_silence_ms(p->c.qc), 1000);
	/* A move to a new port (as after 1 s of silence), on a link as dead:
	 * ngtcp2 counts nothing in flight on the new path, but nothing has
	 * been answered either, and the silence goes on from where it was
	 * (it is what races TCP at 2 s). */
	struct udp_batch *to = pair_open_move(p);
	p->mdead[p->nmoves - 1] = true;
	assert_int_equal(quic_conn_migrate(p->c.qc, to, true), 0);
	pair_write(p);
	assert_int_equal(quic_conn_send_datagram(p->c.qc, ping, sizeof ping), 0);
	pair_write(p);
	for (int r = 0; r < 500; r++)
		pair_round(p);
	assert_int_equal(quic_conn_ack_silence_ms(p->c.qc), 1500);
	pair_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_flip_live_uplinks, pair_free_all),
		cmocka_unit_test_teardown(test_flip_link_down, pair_free_all),
		cmocka_unit_test_teardown(test_flip_link_down_immediate,
		    pair_free_all),
		cmocka_unit_test_teardown(test_flip_fast, pair_free_all),
		cmocka_unit_test_teardown(test_rebind_then_migrate, pair_free_all),
		cmocka_unit_test_teardown(test_probe_through_full_window,
		    pair_free_all),
		cmocka_unit_test_teardown(test_silence_after_quiet, pair_free_all),
	};

	return cmocka_run_group_tests(tests, pair_group_setup, pair_group_teardown);
}

/* Unit tests for how well the session (transport/quic.c over quic-udp.c)
 * fills a wide-area path: a client and a server quic_conn in one process,
 * their packets carried over a simulated path (a rate-limited bottleneck
 * with a drop-tail queue, then a fixed delay) on a virtual clock, so that
 * a 50 ms round trip costs no real time and every run is the same. The
 * client sends one bulk stream, kept topped up the way relay.c keeps a
 * forward's stream; the test checks that the congestion window is used
 * and the bottleneck kept busy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/event.h>

#include "config/cfg.h"
#include "ops/daemon.h"
#include "quic-pair.h"
#include "transport/quic-int.h"

#define SIM_MTU 1500             /* outer packet: IP + UDP + QUIC */
#define SIM_IP_UDP 28            /* IPv4 + UDP header, on the wire */
#define SIM_MAX_PKTS 16384       /* per direction, in flight on the path */
#define SIM_CAP CFG_DEFAULT_FORWARD_BUFFER /* the forward's buffer */
#define SIM_CHUNK 65536          /* one relay read */


struct sim_pkt {
	uint64_t at;             /* virtual time it reaches the far end */
	size_t len;
	uint8_t ecn;
	uint8_t data[SIM_MTU];
};

/* One direction of the path: packets queue for the bottleneck (rate 0:
 * none), leave it one at a time, and arrive `delay` later. */
struct sim_link {
	struct sim_pkt *pkt;
	size_t head, count;
	uint64_t rate_bps;
	uint64_t delay;
	uint64_t busy_until;     /* when the bottleneck finishes its queue */
	uint64_t queue_ns;       /* most queueing delay before a drop */
	uint64_t captured;       /* packets taken off the loopback socket */
	uint64_t forwarded, dropped, bytes;
	struct sockaddr_storage from;
	socklen_t fromlen;
};

struct sim {
	struct pair *p;
	struct sim_link up, down;  /* client -> server, server -> client */
	int64_t sid;
	uint64_t sent;             /* bytes the client queued on the stream */
	uint64_t start;            /* virtual time of the first stream byte */
	uint8_t chunk[SIM_CHUNK];
	/* how ngtcp2 saw it: the most in flight, when in flight first
	 * reached `fill_target`, and cwnd samples over the steady part */
	uint64_t max_inflight, fill_target, filled_at;
	uint64_t cwnd_sum, inflight_sum, samples;
};

static void
link_init(struct sim_link *l, uint64_t rate_bps, uint64_t delay,
    uint64_t queue_ns)
{
	memset(l, 0, sizeof *l);
	l->pkt = calloc(SIM_MAX_PKTS, sizeof *l->pkt);
	assert_non_null(l->pkt);
	l->rate_bps = rate_bps;
	l->delay = delay;
	l->queue_ns = queue_ns;
}

/* A packet the sender has just sent (at pair_now) enters the path. */
static void
link_send(struct sim_link *l, const uint8_t *data, size_t len, uint8_t ecn)
{
	uint64_t leave = pair_now;
	struct sim_pkt *pk;

	if (l->rate_bps != 0) {
		uint64_t start = l->busy_until > pair_now ? l->busy_until : pair_now;

		/* Drop-tail: a packet that would wait longer than the
		 * queue holds is lost. */
		if (start - pair_now > l->queue_ns || l->count == SIM_MAX_PKTS) {
			l->dropped++;
			return;
		}
		leave = start + (len + SIM_IP_UDP) * 8 * NGTCP2_SECONDS / l->rate_bps;
		l->busy_until = leave;
	}
	assert_true(l->count < SIM_MAX_PKTS);
	assert_true(len <= SIM_MTU);
	pk = &l->pkt[(l->head + l->count) % SIM_MAX_PKTS];
	pk->at = leave + l->delay;
	pk->len = len;
	pk->ecn = ecn;
	memcpy(pk->data, data, len);
	l->count++;
}

/* Take what a socket has received (everything one side sent, loopback
 * being immediate) onto the path. */
static void
link_capture(struct sim_link *l, struct udp_socket *sock, uint64_t sent)
{
	static struct udp_recv r;

	for (int i = 0; i < 2000 && l->captured < sent; i++) {
		struct pollfd pfd = { .fd = sock->fd, .events = POLLIN };

		if (poll(&pfd, 1, 1) < 0)
			break;
		while (udp_recv(sock, &r) == 1) {
			memcpy(&l->from, &r.peer, r.peerlen);
			l->fromlen = r.peerlen;
			for (size_t off = 0; off < r.len; off += r.segsize) {
				size_t seg = r.len - off < r.segsize ?
				    r.len - off : r.segsize;

				link_send(l, r.buf + off, seg, r.ecn);
				l->captured++;
			}
		}
	}
	assert_true(l->captured == sent);
}

static uint64_t
link_next(const struct sim_link *l)
{
	return l->count > 0 ? l->pkt[l->head].at : UINT64_MAX;
}

/* Hand every packet due by now to its receiver. */
static void
link_deliver(struct sim *sm, struct sim_link *l, bool to_server)
{
	struct pair *p = sm->p;

	while (l->count > 0 && l->pkt[l->head].at <= pair_now) {
		struct sim_pkt *pk = &l->pkt[l->head];

		if (to_server)
			pair_server_input(p, pk->data, pk->len,
			    (const struct sockaddr *)&l->from, l->fromlen, pk->ecn);
		else if (p->c.qc != NULL)
			quic_conn_read(p->c.qc, &p->csock,
			    (const struct sockaddr *)&l->from, l->fromlen,
			    pk->data, pk->len, pk->ecn);
		l->forwarded++;
		l->bytes += pk->len;
		l->head = (l->head + 1) % SIM_MAX_PKTS;
		l->count--;
	}
}

/* When the connection's timer is due, as quic.c armed it; UINT64_MAX for
 * none. The event loop runs it then (see test_timer_precision for the
 * real loop). */
static uint64_t
timer_due(struct quic_conn *qc)
{
	if (qc == NULL || quic_conn_state(qc) == QUIC_STATE_CLOSED)
		return UINT64_MAX;
	return ngtcp2_conn_get_expiry(qc->conn);
}

/* Run the connection's timer callback, as the event loop would when it
 * fires (the loop itself keeps real time, so it is never run here). */
static void
timer_fire(struct quic_conn *qc)
{
	event_callback_fn fn = event_get_callback(qc->timer);

	evtimer_del(qc->timer);
	fn(-1, EV_TIMEOUT, event_get_callback_arg(qc->timer));
}

/* Keep the stream topped up to the forward's buffer, as relay.c does. */
static void
top_up(struct sim *sm)
{
	struct quic_conn *qc = sm->p->c.qc;

	if (sm->sid < 0)
		return;
	while (quic_conn_stream_unacked(qc, sm->sid) + SIM_CHUNK <= SIM_CAP) {
		assert_int_equal(quic_conn_stream_send(qc, sm->sid, sm->chunk,
		    SIM_CHUNK, false), 0);
		sm->sent += SIM_CHUNK;
	}
}

/* Everything either side sent goes onto the path. */
static void
flush_all(struct sim *sm)
{
	struct pair *p = sm->p;

	udp_batch_flush(&p->cbatch);
	udp_batch_flush(&p->sbatch);
	link_capture(&sm->up, &p->ssock, p->cbatch.sent_packets);
	link_capture(&sm->down, &p->csock, p->sbatch.sent_packets);
}

/* Move the virtual clock from event to event (a packet arriving, a timer
 * falling due) until `until`. */
static void
sim_run(struct sim *sm, uint64_t until)
{
	struct pair *p = sm->p;

	for (;;) {
		uint64_t t = link_next(&sm->up), x;
		struct quic_conn_stats st;

		if ((x = link_next(&sm->down)) < t)
			t = x;
		if ((x = timer_due(p->c.qc)) < t)
			t = x;
		if ((x = timer_due(p->s.qc)) < t)
			t = x;
		if (t > until) {
			pair_now = until;
			return;
		}
		if (t > pair_now)
			pair_now = t;
		link_deliver(sm, &sm->up, true);
		link_deliver(sm, &sm->down, false);
		top_up(sm);
		quic_write_dirty();
		flush_all(sm);
		if (timer_due(p->c.qc) <= pair_now)
			timer_fire(p->c.qc);
		if (timer_due(p->s.qc) <= pair_now)
			timer_fire(p->s.qc);
		flush_all(sm);
		if (sm->sid >= 0) {
			quic_conn_get_stats(p->c.qc, &st);
			if (st.bytes_in_flight > sm->max_inflight)
				sm->max_inflight = st.bytes_in_flight;
			if (sm->filled_at == 0 && sm->fill_target != 0 &&
			    st.bytes_in_flight >= sm->fill_target)
				sm->filled_at = pair_now;
		}
	}
}

static void
sim_sample(struct sim *sm)
{
	struct quic_conn_stats st;

	quic_conn_get_stats(sm->p->c.qc, &st);
	sm->cwnd_sum += st.cwnd;
	sm->inflight_sum += st.bytes_in_flight;
	sm->samples++;
}

/* A stream's bytes reaching the server are counted, not kept. */
static int
count_stream_data(struct quic_conn *qc, int64_t id, const uint8_t *data,
    size_t len, bool fin, void *sarg, void *arg)
{
	struct endpoint *e = arg;

	(void)data;
	(void)fin;
	(void)sarg;
	e->stream_len += len;
	e->stream_id = id;
	quic_conn_stream_consume(qc, id, len);
	return 0;
}

static const struct quic_conn_cbs count_cbs = {
	.stream_data = count_stream_data,
};

/* One bulk stream from client to server over `rate_bps` with a round trip
 * of `rtt`: its goodput over `secs` seconds of virtual time that begin
 * `warm_rtts` round trips after the stream's first byte (0: from that
 * byte, start-up included, as iperf3 counts). */
static void
bulk_transfer(ngtcp2_cc_algo cc, uint64_t rate_bps, uint64_t rtt,
    unsigned warm_rtts, int secs, double *goodput_share, uint64_t *fill_rtts)
{
	static struct sim sm;
	struct pair *p = pair_new_plain();
	uint64_t bdp = rate_bps / 8 * rtt / NGTCP2_SECONDS;
	uint64_t t0, steady, end, bytes0, wire0;
	double goodput, wire;

	memset(&sm, 0, sizeof sm);

	sm.p = p;
	sm.sid = -1;
	/* A bottleneck queue of one BDP in the upload direction, as a
	 * router's; acknowledgements come back without a limit. */
	link_init(&sm.up, rate_bps, rtt / 2, rtt);
	link_init(&sm.down, 0, rtt / 2, 0);
	p->cqs.cc = p->sqs.cc = cc;
	p->cqs.stream_window = p->sqs.stream_window = SIM_CAP;
	p->cqs.idle_timeout_s = p->sqs.idle_timeout_s = 120;
	pair_connect(p, NULL);
	/* The handshake, on the same path. */
	quic_conn_write(p->c.qc);
	flush_all(&sm);
	sim_run(&sm, pair_now + 4 * rtt);
	assert_int_equal(quic_conn_state(p->c.qc), QUIC_STATE_ESTABLISHED);
	assert_non_null(p->s.qc);
	p->s.qc->cbs = &count_cbs;

	sm.sid = quic_conn_open_stream(p->c.qc, NULL);
	assert_true(sm.sid >= 0);
	sm.fill_target = bdp;
	t0 = sm.start = pair_now;
	top_up(&sm);
	quic_write_dirty();
	flush_all(&sm);
	steady = t0 + warm_rtts * rtt;
	sim_run(&sm, steady);
	bytes0 = p->s.stream_len;
	wire0 = sm.up.bytes + sm.up.forwarded * SIM_IP_UDP;
	end = steady + (uint64_t)secs * NGTCP2_SECONDS;
	while (pair_now < end) {
		sim_run(&sm, pair_now + rtt / 4);
		sim_sample(&sm);
	}
	goodput = (double)(p->s.stream_len - bytes0) * 8 /
	    ((double)(end - steady) / NGTCP2_SECONDS);
	wire = (double)(sm.up.bytes + sm.up.forwarded * SIM_IP_UDP - wire0) * 8 /
	    ((double)(end - steady) / NGTCP2_SECONDS);
	*goodput_share = goodput / (double)rate_bps;
	*fill_rtts = sm.filled_at != 0 ? (sm.filled_at - t0 + rtt - 1) / rtt :
	    UINT64_MAX;
	print_message("%s, %.0f Mbit/s, %.0f ms RTT, %s: stream %.1f Mbit/s "
	    "(%.1f%% of the bottleneck; on the wire %.1f Mbit/s), "
	    "in flight reached the BDP (%llu bytes) after %lld RTTs, most in "
	    "flight %llu, average in flight %llu of cwnd %llu, "
	    "bottleneck drops %llu\n",
	    cc == NGTCP2_CC_ALGO_BBR ? "bbr" : "cubic", (double)rate_bps / 1e6,
	    (double)rtt / 1e6, warm_rtts == 0 ? "from the first byte" :
	    "after start-up", goodput / 1e6, 100 * *goodput_share, wire / 1e6,
	    (unsigned long long)bdp,
	    sm.filled_at != 0 ? (long long)*fill_rtts : -1LL,
	    (unsigned long long)sm.max_inflight,
	    (unsigned long long)(sm.inflight_sum / sm.samples),
	    (unsigned long long)(sm.cwnd_sum / sm.samples),
	    (unsigned long long)sm.up.dropped);
	free(sm.up.pkt);
	free(sm.down.pkt);
	pair_free(p);
}

/* The event loop roved and rove run on: a timer set for half a
 * millisecond, as QUIC's pacer sets them, runs within a millisecond of
 * its time. libevent's default base reads a clock that moves once a jiffy
 * and runs such timers some 3 ms late (4 ms jiffies), and the pacer, which
 * sends a millisecond's worth each time, then keeps a fraction of its rate
 * (rove -L over 50 ms and 200 Mbit/s: 57 Mbit/s instead of 171). Real
 * time, so the median of many, against a bound far from both. */
static struct timespec armed;
static uint64_t lateness[41];
static size_t nlate;
static struct event *late_ev;

static uint64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void
late_cb(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval half_ms = { 0, 500 };
	uint64_t due = (uint64_t)armed.tv_sec * 1000000 +
	    (uint64_t)armed.tv_nsec / 1000 + 500, now = mono_us();

	(void)fd;
	(void)what;
	(void)arg;
	lateness[nlate++] = now > due ? now - due : 0;
	if (nlate < sizeof lateness / sizeof lateness[0]) {
		clock_gettime(CLOCK_MONOTONIC, &armed);
		evtimer_add(late_ev, &half_ms);
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
test_timer_precision(void **state)
{
	static const struct timeval half_ms = { 0, 500 };
	struct event_base *base = daemon_base_new();
	uint64_t median;

	(void)state;
	assert_non_null(base);
	late_ev = evtimer_new(base, late_cb, NULL);
	assert_non_null(late_ev);
	nlate = 0;
	clock_gettime(CLOCK_MONOTONIC, &armed);
	evtimer_add(late_ev, &half_ms);
	/* Bounded: the timer stops re-arming after the last sample. */
	event_base_dispatch(base);
	event_free(late_ev);
	event_base_free(base);
	assert_int_equal(nlate, sizeof lateness / sizeof lateness[0]);
	qsort(lateness, nlate, sizeof lateness[0], cmp_u64);
	median = lateness[nlate / 2];
	print_message("a 500 us timer ran %llu us late (median of %zu), "
	    "%llu us at most\n", (unsigned long long)median, nlate,
	    (unsigned long long)lateness[nlate - 1]);
	assert_true(median < 1000);
}

/* 100 Mbit/s over 50 ms, Cubic: a forward's one stream keeps the
 * bottleneck busy. */
static void
test_bulk_cubic_50ms(void **state)
{
	double share;
	uint64_t rtts;

	(void)state;
	/* Start-up and the first drain take a dozen round trips or so;
	 * throughput is what comes after them. */
	bulk_transfer(NGTCP2_CC_ALGO_CUBIC, 100 * 1000 * 1000,
	    50 * NGTCP2_MILLISECONDS, 30, 4, &share, &rtts);
	assert_true(rtts <= 10);
	assert_true(share >= 0.90);
}

/* The same with BBR, rove's default: in flight reaches the BDP as soon.
 * ngtcp2's BBRv3 (1.24) advances its max-bandwidth filter (2 cycles
 * long) at the start of every round while ack_phase is
 * ACKS_PROBE_STOPPING, and nothing left that phase until the next REFILL,
 * so it advanced every round of DOWN and CRUISE: two rounds after a probe
 * the probe's sample aged out, the estimate sank to what DOWN (paced at
 * 90%) and CRUISE deliver, and the sender kept 80-89% of the bottleneck.
 * scripts/patches/ngtcp2-bbr-max-bw-filter.patch sets the phase back once
 * the filter has advanced, as Linux's BBRv3 does; with it 91-92% here
 * (on the wire 96%). The bound fails on an ngtcp2 without the fix, and on
 * a sender that falls behind its pacer. */
static void
test_bulk_bbr_50ms(void **state)
{
	double share;
	uint64_t rtts;

	(void)state;
	bulk_transfer(NGTCP2_CC_ALGO_BBR, 100 * 1000 * 1000,
	    50 * NGTCP2_MILLISECONDS, 30, 4, &share, &rtts);
	assert_true(rtts <= 10);
	assert_true(share >= 0.89);
}

/* 200 Mbit/s over 150 ms, a BDP of 3.75 MB, with as much again queued at
 * the bottleneck: the forward's buffer, its stream's window and the
 * connection's window (ForwardBuffer and 16 MiB, auto-tuned) let Cubic
 * keep 6-7 MB in flight and the bottleneck busy, so on long paths too
 * the windows are not what holds BBR back. */
static void
test_bulk_cubic_150ms(void **state)
{
	double share;
	uint64_t rtts;

	(void)state;
	bulk_transfer(NGTCP2_CC_ALGO_CUBIC, 200 * 1000 * 1000,
	    150 * NGTCP2_MILLISECONDS, 30, 4, &share, &rtts);
	assert_true(rtts <= 12);
	assert_true(share >= 0.90);
}

/* BBR there, after start-up: 91% with the filter fixed, as at 50 ms. */
static void
test_bulk_bbr_150ms(void **state)
{
	double share;
	uint64_t rtts;

	(void)state;
	bulk_transfer(NGTCP2_CC_ALGO_BBR, 200 * 1000 * 1000,
	    150 * NGTCP2_MILLISECONDS, 30, 4, &share, &rtts);
	assert_true(rtts <= 12);
	assert_true(share >= 0.89);
}

/* The same counted from the stream's first byte over 8 s, as iperf3
 * counts, start-up included. Start-up ends once in flight stops raising
 * the delivery rate, but only on samples that were not app-limited:
 * with a forward's buffer (ForwardBuffer) of 8 MiB, under what this path
 * holds and BBR's start-up sends, the samples were app-limited, start-up
 * ran on for 5 s and ended by loss, 64-69% of the bottleneck; with
 * 16 MiB it ends after some 3 s, 75-78%. */
static void
test_bulk_bbr_150ms_startup(void **state)
{
	double share;
	uint64_t rtts;

	(void)state;
	bulk_transfer(NGTCP2_CC_ALGO_BBR, 200 * 1000 * 1000,
	    150 * NGTCP2_MILLISECONDS, 0, 8, &share, &rtts);
	assert_true(rtts <= 12);
	assert_true(share >= 0.74);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timer_precision),
		cmocka_unit_test_teardown(test_bulk_cubic_50ms, pair_free_all),
		cmocka_unit_test_teardown(test_bulk_bbr_50ms, pair_free_all),
		cmocka_unit_test_teardown(test_bulk_cubic_150ms, pair_free_all),
		cmocka_unit_test_teardown(test_bulk_bbr_150ms, pair_free_all),
		cmocka_unit_test_teardown(test_bulk_bbr_150ms_startup,
		    pair_free_all),
	};

	return cmocka_run_group_tests(tests, pair_group_setup, pair_group_teardown);
}

/* Transport = auto against a UDP policer: a middlebox that lets QUIC
 * through at a trickle while TCP runs free, so that the session "works"
 * and is useless. throttle.h watches QUIC for the signature (heavy loss
 * under load at a steady round trip, ours or the server's LOSS_REPORT);
 * then TLS over TCP races and takes the session, for a trial: after
 * THROTTLE_TRIAL_MS its rate is set against QUIC's in the window that
 * raised the alarm, and the session goes back to QUIC unless TCP did
 * clearly better or was never pushed to its limit. On TCP, QUIC is
 * tried again only after a hold. At its end a rate probe (throttle.h)
 * asks whether QUIC would carry the load, without moving the session:
 * only a probe that gets three quarters of its offer back lets the
 * session return. One that does not doubles the hold, as does a policer
 * found again soon after a return: a steady policer costs one switch,
 * not a pair per hold. */
#include <inttypes.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "client-int.h"
#include "wire/proto.h"

/* TLS over TCP's trial: its rate over this long after the move, which
 * keeps the session if it is THROTTLE_TCP_GAIN times QUIC's. */
#define THROTTLE_TRIAL_MS 4000
#define THROTTLE_TCP_GAIN 2
/* On TCP because of a policer, QUIC is tried again after the hold:
 * THROTTLE_HOLD_MIN_MS, doubling to THROTTLE_HOLD_MAX_MS while the
 * policer is found again within THROTTLE_RETURN_WATCH_MS of a return. */
#define THROTTLE_HOLD_MIN_MS 60000
#define THROTTLE_HOLD_MAX_MS (16 * 60000)
#define THROTTLE_RETURN_WATCH_MS 60000

static void
mbit(uint64_t bps, char *buf, size_t len)
{
	snprintf(buf, len, "%.2f Mbit/s", (double)bps / 1e6);
}

static uint64_t
hold_double(uint64_t hold)
{
	return hold * 2 < THROTTLE_HOLD_MAX_MS ? hold * 2 : THROTTLE_HOLD_MAX_MS;
}

/* On QUIC: a tick of the watch; a verdict starts the race. */
static void
watch(struct client *c, uint64_t now)
{
	struct quic_conn_stats st;
	char rate[32];

	quic_conn_get_stats(c->qc, &st);
	if (!throttle_tick(&c->throttle, now, st.pkt_sent, st.pkt_lost,
	    st.rx_dgram_bytes + st.tx_dgram_bytes, st.rtt_ms, st.min_rtt_ms) ||
	    now < c->throttle_watch_from_ms)
		return;
	if (c->throttle_hold_kept)
		c->throttle_hold_kept = false;   /* doubled by a lost trial */
	else if (c->throttle_back_ms != 0 &&
	    now - c->throttle_back_ms < THROTTLE_RETURN_WATCH_MS)
		c->throttle_hold_ms = hold_double(c->throttle_hold_ms);
	else
		c->throttle_hold_ms = THROTTLE_HOLD_MIN_MS;
	c->throttle_quic_bps = throttle_rate_bps(&c->throttle);
	mbit(c->throttle_quic_bps, rate, sizeof rate);
	log_info("QUIC looks throttled: %.0f%% of %s packets lost at a steady "
	    "round trip (%.1f ms), %s through it", c->throttle.loss * 100,
	    c->throttle.peer_worse ? "the server's" : "our", st.rtt_ms, rate);
	client_start_alt(c, "QUIC looks throttled");
	c->alt_for_throttle = c->alt != NULL;
}

/* On TCP for a trial: when it is over, is TCP the faster? */
static void
judge(struct client *c, uint64_t now)
{
	struct quic_conn_stats st;
	uint64_t bps;
	char tcp[32], quic[32];
	bool pushed;

	if (c->throttle_trial_end_ms == 0 || now < c->throttle_trial_end_ms)
		return;
	c->throttle_trial_end_ms = 0;
	quic_conn_get_stats(c->qc, &st);
	bps = (st.rx_dgram_bytes + st.tx_dgram_bytes) * 8 * 1000 /
	    THROTTLE_TRIAL_MS;
	/* The connection is the trial's own: any IP packet it dropped in
	 * front of TCP means TCP was the limit. */
	pushed = st.dgram_queue_full + st.dgram_stale > 0;
	mbit(bps, tcp, sizeof tcp);
	mbit(c->throttle_quic_bps, quic, sizeof quic);
	/* QUIC's figure counts what it sent, lost or not, and TCP must do
	 * twice as well: a doubtful case stays with QUIC, which loses no
	 * packet to head-of-line blocking. But a host's TCP inside the
	 * tunnel that the policer drove into retransmission back-off may
	 * send next to nothing for seconds: a TCP that was never full
	 * has shown no limit, and keeps the session. */
	if (bps >= THROTTLE_TCP_GAIN * c->throttle_quic_bps || !pushed) {
		log_info("TLS over TCP carries %s%s where QUIC carried %s: "
		    "staying on TCP, QUIC is tried again in %" PRIu64 " s", tcp,
		    pushed ? "" : " (not its limit)", quic,
		    c->throttle_hold_ms / 1000);
		return;
	}
	log_info("TLS over TCP carries %s at its limit, not twice QUIC's %s: "
	    "back to QUIC, which is not suspected again for %" PRIu64 " s",
	    tcp, quic, c->throttle_hold_ms / 1000);
	c->throttled = false;
	c->throttle_watch_from_ms = now + c->throttle_hold_ms;
	/* A path that looks policed and is not (a slow server dropping at
	 * its socket, a shallow buffer at a bottleneck) costs two moves per
	 * hold, each hold twice as long. */
	c->throttle_hold_ms = hold_double(c->throttle_hold_ms);
	c->throttle_hold_kept = true;
	client_probe_now(c);
}

void
client_throttle_check(struct client *c, uint64_t now)
{
	if (c->qc == NULL)
		return;
	if (quic_conn_is_tcp(c->qc)) {
		if (c->throttled)
			judge(c, now);
	} else if (quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED &&
	    c->alt == NULL) {
		watch(c, now);
	}
}

void
client_throttle_moved(struct client *c, bool to_tcp, uint64_t now)
{
	throttle_init(&c->throttle);
	c->rate_passed = false;
	if (to_tcp) {
		c->throttled = c->alt_for_throttle;
		c->alt_for_throttle = false;
		if (!c->throttled)
			return;
		c->roam.throttle_moves++;
		c->throttle_moved_ms = now;
		c->throttle_trial_end_ms = now + THROTTLE_TRIAL_MS;
		c->throttle_hold_until_ms = now + c->throttle_hold_ms;
		return;
	}
	if (c->throttled)
		c->throttle_back_ms = now;
	c->throttled = false;
	c->throttle_trial_end_ms = 0;
}

uint64_t
client_throttle_probe_at(const struct client *c)
{
	return c->throttled ? c->throttle_hold_until_ms : 0;
}

void
client_throttle_report(struct client *c, const uint8_t *body, size_t len)
{
	struct proto_loss_report lr;

	if (proto_decode_loss_report(body, len, &lr) != 0) {
		log_debug("malformed LOSS_REPORT ignored");
		return;
	}
	throttle_peer_report(&c->throttle, clock_now_ms(), lr.sent, lr.lost);
}

bool
client_throttle_rate_probe(const struct client *c)
{
	return c->throttled && c->rate_probe_ok && !c->rate_passed;
}

/* QUIC is still no good: the session stays on TCP for a longer hold. */
static void
still_throttled(struct client *c, uint64_t now)
{
	c->roam.throttle_probes_failed++;
	c->throttle_hold_ms = hold_double(c->throttle_hold_ms);
	c->throttle_hold_until_ms = now + c->throttle_hold_ms;
}

/* The probe's datagrams: the send time in milliseconds (big-endian),
 * then padding, which the server echoes as they came. */
#define STAMP_LEN 8

static void
verdict(struct client *c, uint64_t now)
{
	char offer[32];
	double share = throttle_probe_share(&c->rate) * 100;

	mbit(c->rate.offer_bps, offer, sizeof offer);
	if (throttle_probe_passed(&c->rate)) {
		log_info("QUIC carried %.0f%% of %s each way: the policer is "
		    "gone, the session moves back", share, offer);
		c->rate_passed = true;
		client_probe_end(c, true);
		return;
	}
	still_throttled(c, now);
	log_info("QUIC carried %.0f%% of %s each way: still throttled, "
	    "staying on TCP, QUIC is tried again in %" PRIu64 " s", share,
	    offer, c->throttle_hold_ms / 1000);
	client_probe_end(c, false);
}

/* Every THROTTLE_PROBE_TICK_MS: what the offer has due goes out, in
 * DATAGRAMs as large as the path takes (at most THROTTLE_PROBE_DGRAM). */
static void
rate_tick(evutil_socket_t fd, short what, void *arg)
{
	static uint8_t d[THROTTLE_PROBE_DGRAM];
	struct client *c = arg;
	uint64_t now = clock_now_ms(), due;
	size_t len;

	(void)fd;
	(void)what;
	if (c->probe == NULL || !c->probe_rate)
		return;
	if (throttle_probe_over(&c->rate, now)) {
		verdict(c, now);
		return;
	}
	len = quic_conn_dgram_max(c->probe);
	if (len > sizeof d)
		len = sizeof d;
	if (len < STAMP_LEN)
		return;
	for (int i = 0; i < STAMP_LEN; i++)
		d[i] = (uint8_t)(now >> (8 * (STAMP_LEN - 1 - i)));
	for (due = throttle_probe_due(&c->rate, now); due >= len; due -= len) {
		/* A full queue drops its oldest: sent, and never echoed. */
		if (quic_conn_send_datagram(c->probe, d, len) < 0)
			break;
		throttle_probe_sent(&c->rate, now, len);
	}
}

void
client_throttle_probe_up(struct client *c, uint64_t now)
{
	struct timeval tv = { 0, THROTTLE_PROBE_TICK_MS * 1000 };
	struct quic_conn_stats st;
	char offer[32];

	if (c->rate_ev == NULL)
		c->rate_ev = event_new(c->base, -1, EV_PERSIST, rate_tick, c);
	quic_conn_get_stats(c->probe, &st);
	throttle_probe_start(&c->rate, now,
	    throttle_probe_offer(c->throttle_quic_bps), st.rtt_ms);
	mbit(c->rate.offer_bps, offer, sizeof offer);
	log_info("the hold is over: probing whether QUIC carries %s each way "
	    "(the session stays on TCP meanwhile)", offer);
	event_add(c->rate_ev, &tv);
	rate_tick(-1, 0, c);
}

void
client_throttle_probe_echo(struct client *c, const uint8_t *data, size_t len)
{
	uint64_t stamp = 0;

	if (len < STAMP_LEN)
		return;
	for (int i = 0; i < STAMP_LEN; i++)
		stamp = stamp << 8 | data[i];
	throttle_probe_echo(&c->rate, stamp, len);
}

void
client_throttle_probe_lost(struct client *c)
{
	still_throttled(c, clock_now_ms());
	log_info("the rate probe ended before its verdict: staying on TCP, "
	    "QUIC is tried again in %" PRIu64 " s", c->throttle_hold_ms / 1000);
}

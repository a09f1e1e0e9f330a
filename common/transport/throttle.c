/* Transport = auto's watch for a UDP policer (throttle.h). */
#include "throttle.h"

#include <string.h>

void
throttle_init(struct throttle_watch *t)
{
	memset(t, 0, sizeof *t);
}

void
throttle_peer_report(struct throttle_watch *t, uint64_t now_ms,
    uint64_t sent, uint64_t lost)
{
	if (lost > sent)
		return;
	if (t->npeer > 0 && (sent < t->peer_sent[1] || lost < t->peer_lost[1]))
		t->npeer = 0;
	if (t->npeer > 0 && lost > t->peer_lost[1])
		t->peer_lossy++;
	t->peer_sent[0] = t->peer_sent[1];
	t->peer_lost[0] = t->peer_lost[1];
	t->peer_at_ms[0] = t->peer_at_ms[1];
	t->peer_sent[1] = sent;
	t->peer_lost[1] = lost;
	t->peer_at_ms[1] = now_ms;
	if (t->npeer < 2)
		t->npeer++;
}

/* Lost share of `sent` packets, or -1 when too few were sent to tell. */
static double
share(uint64_t sent, uint64_t lost, uint64_t min_sent)
{
	if (sent < min_sent || sent == 0)
		return -1;
	return (double)lost / (double)sent;
}

/* The peer's loss between its last two reports, if they are fresh and
 * close enough together to describe the window. */
static double
peer_loss(const struct throttle_watch *t, uint64_t now_ms)
{
	uint64_t span;

	if (t->npeer < 2 || now_ms < t->peer_at_ms[1] ||
	    now_ms - t->peer_at_ms[1] > THROTTLE_REPORT_FRESH_MS)
		return -1;
	span = t->peer_at_ms[1] - t->peer_at_ms[0];
	if (span > THROTTLE_REPORT_FRESH_MS)
		return -1;
	/* Scaled to the window: a report a second apart needs half the
	 * packets of two seconds' window. */
	return share(t->peer_sent[1] - t->peer_sent[0],
	    t->peer_lost[1] - t->peer_lost[0],
	    THROTTLE_MIN_PKTS * (span > 0 ? span : 1) /
	    (THROTTLE_WINDOW * THROTTLE_TICK_MS));
}

bool
throttle_tick(struct throttle_watch *t, uint64_t now_ms, uint64_t sent,
    uint64_t lost, uint64_t bytes, double rtt_ms, double min_rtt_ms)
{
	unsigned oldest, last = (t->head + THROTTLE_WINDOW) % (THROTTLE_WINDOW + 1);
	unsigned fresh;
	double own = -1, peer;
	bool steady;

	/* Counters only grow; a new connection starts them over. */
	if (t->n > 0 && (sent < t->sent[last] || lost < t->lost[last]))
		t->n = 0;
	fresh = t->n > 0 && lost > t->lost[last];
	fresh += (unsigned)(t->peer_lossy - t->peer_counted);
	t->peer_counted = t->peer_lossy;
	t->sent[t->head] = sent;
	t->lost[t->head] = lost;
	t->bytes[t->head] = bytes;
	t->head = (t->head + 1) % (THROTTLE_WINDOW + 1);
	if (t->n < THROTTLE_WINDOW + 1)
		t->n++;
	if (t->n == THROTTLE_WINDOW + 1) {
		oldest = t->head;   /* the slot written THROTTLE_WINDOW ticks ago */
		own = share(sent - t->sent[oldest], lost - t->lost[oldest],
		    THROTTLE_MIN_PKTS);
	}
	peer = peer_loss(t, now_ms);
	t->peer_worse = peer > own;
	t->loss = t->peer_worse ? peer : own;
	steady = min_rtt_ms > 0 && rtt_ms <= min_rtt_ms *
	    (1 + THROTTLE_QUEUE_SHARE) + THROTTLE_QUEUE_SLACK_MS;
	if (!steady || t->loss < THROTTLE_LOSS)
		t->streak = 0;
	else
		t->streak += fresh;
	if (t->streak < THROTTLE_SUSTAIN)
		return false;
	t->streak = 0;
	return true;
}

uint64_t
throttle_rate_bps(const struct throttle_watch *t)
{
	unsigned newest = (t->head + THROTTLE_WINDOW) % (THROTTLE_WINDOW + 1);

	if (t->n < THROTTLE_WINDOW + 1 || t->bytes[newest] < t->bytes[t->head])
		return 0;
	return (t->bytes[newest] - t->bytes[t->head]) * 8 * 1000 /
	    (THROTTLE_WINDOW * THROTTLE_TICK_MS);
}

uint64_t
throttle_probe_offer(uint64_t quic_bps)
{
	if (quic_bps >= THROTTLE_PROBE_MAX_BPS / 2)
		return THROTTLE_PROBE_MAX_BPS;
	return quic_bps * 2 < THROTTLE_PROBE_MIN_BPS ? THROTTLE_PROBE_MIN_BPS :
	    quic_bps * 2;
}

static uint64_t
clamp_ms(double v, uint64_t lo, uint64_t hi)
{
	if (!(v > (double)lo))
		return lo;
	return v > (double)hi ? hi : (uint64_t)v;
}

void
throttle_probe_start(struct throttle_probe *p, uint64_t now_ms,
    uint64_t offer_bps, double rtt_ms)
{
	memset(p, 0, sizeof *p);
	p->offer_bps = offer_bps;
	p->start_ms = now_ms;
	p->measure_from_ms = now_ms + clamp_ms(THROTTLE_PROBE_WARM_RTTS * rtt_ms,
	    THROTTLE_PROBE_WARM_MIN_MS, THROTTLE_PROBE_WARM_MAX_MS);
	p->measure_to_ms = p->measure_from_ms + THROTTLE_PROBE_MEASURE_MS;
	p->end_ms = p->measure_to_ms + clamp_ms(THROTTLE_PROBE_TAIL_RTTS * rtt_ms,
	    THROTTLE_PROBE_TAIL_MIN_MS, UINT64_MAX);
}

uint64_t
throttle_probe_due(const struct throttle_probe *p, uint64_t now_ms)
{
	uint64_t t, due;

	if (now_ms < p->start_ms || now_ms >= p->measure_to_ms)
		return 0;
	t = now_ms - p->start_ms;
	due = p->offer_bps / 8 * t / 1000;
	return due > p->sent ? due - p->sent : 0;
}

static bool
measured(const struct throttle_probe *p, uint64_t stamp_ms)
{
	return stamp_ms >= p->measure_from_ms && stamp_ms < p->measure_to_ms;
}

void
throttle_probe_sent(struct throttle_probe *p, uint64_t stamp_ms, size_t len)
{
	p->sent += len;
	if (measured(p, stamp_ms))
		p->measured_sent += len;
}

void
throttle_probe_echo(struct throttle_probe *p, uint64_t stamp_ms, size_t len)
{
	/* Stamps are our own, but an echo never counts twice for more
	 * than was sent. */
	if (measured(p, stamp_ms) && p->measured_back + len <= p->measured_sent)
		p->measured_back += len;
}

bool
throttle_probe_over(const struct throttle_probe *p, uint64_t now_ms)
{
	return now_ms >= p->end_ms;
}

double
throttle_probe_share(const struct throttle_probe *p)
{
	if (p->measured_sent == 0)
		return 0;
	return (double)p->measured_back / (double)p->measured_sent;
}

bool
throttle_probe_passed(const struct throttle_probe *p)
{
	return p->measured_sent > 0 && p->measured_back *
	    THROTTLE_PROBE_PASS_DEN >= p->measured_sent * THROTTLE_PROBE_PASS_NUM;
}

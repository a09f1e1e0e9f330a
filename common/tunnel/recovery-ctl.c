/* The loss recovery's redundancy controller (recovery-ctl.h). */
#include <math.h>

#include "recovery-ctl.h"
#include "tunnel/fec.h"

/* Each tick keeps this much of the past: a time constant of about a
 * second at RECOVERY_TICK_MS, long enough to hold a loss rate of 0.1%
 * steady, short enough to stop sending repairs soon after the loss ends. */
#define DECAY 0.9
/* The round trip above its minimum that says "a queue is building":
 * a quarter of the minimum (BBR's own probing queues less) plus a few ms
 * of scheduling noise. */
#define QUEUE_SHARE 0.25
#define QUEUE_SLACK_MS 5.0
/* The boost grows by this while groups fail, and falls back while none
 * do, within [1, BOOST_MAX]. */
#define BOOST_UP 1.5
#define BOOST_DOWN 0.9
#define BOOST_MAX 8.0
/* Originals a report must cover before its failures move the boost. */
#define REPORT_MIN 500

void
recovery_ctl_init(struct recovery_ctl *c)
{
	*c = (struct recovery_ctl){ .boost = 1.0 };
}

void
recovery_ctl_tick(struct recovery_ctl *c, uint64_t sent, uint64_t lost,
    double rtt_ms, double min_rtt_ms)
{
	/* Counters only grow; a new connection starts them over. */
	uint64_t ds = sent >= c->last_sent ? sent - c->last_sent : sent;
	uint64_t dl = lost >= c->last_lost ? lost - c->last_lost : lost;

	c->last_sent = sent;
	c->last_lost = lost;
	c->total += ds;
	c->sent = c->sent * DECAY + (double)ds;
	c->lost = c->lost * DECAY + (double)dl;
	c->congested = min_rtt_ms > 0 &&
	    rtt_ms > min_rtt_ms * (1 + QUEUE_SHARE) + QUEUE_SLACK_MS;
}

void
recovery_ctl_report(struct recovery_ctl *c, uint64_t received,
    uint64_t rebuilt, uint64_t unrepaired, uint64_t overwhelmed)
{
	uint64_t dr, db, du, dov, total;

	if (received < c->rep_received || rebuilt < c->rep_rebuilt ||
	    unrepaired < c->rep_unrepaired ||
	    overwhelmed < c->rep_overwhelmed || overwhelmed > unrepaired) {
		/* The peer's decoder started over (a new connection). */
		c->rep_received = received;
		c->rep_rebuilt = rebuilt;
		c->rep_unrepaired = unrepaired;
		c->rep_overwhelmed = overwhelmed <= unrepaired ? overwhelmed : 0;
		return;
	}
	dr = received - c->rep_received;
	db = rebuilt - c->rep_rebuilt;
	du = unrepaired - c->rep_unrepaired;
	dov = overwhelmed - c->rep_overwhelmed;
	if (dov > du)
		dov = du;
	total = dr + db + du;
	if (total < REPORT_MIN && du == 0)
		return;   /* too few to tell; wait for the next report */
	c->rep_received = received;
	c->rep_rebuilt = rebuilt;
	c->rep_unrepaired = unrepaired;
	c->rep_overwhelmed = overwhelmed;
	/* Runs of losses (a queue overflowing: the "0%" path that is really
	 * CPU-bound) beat any redundancy and are the inner TCP's to see;
	 * only failures of the kind more repairs would fix raise the plan. */
	c->overrun = dov > 0 && dov >= du - dov;
	du -= dov;
	if ((double)du > RECOVERY_TARGET * (double)total)
		c->boost = fmin(c->boost * BOOST_UP, BOOST_MAX);
	else
		c->boost = fmax(c->boost * BOOST_DOWN, 1.0);
}

double
recovery_ctl_loss(const struct recovery_ctl *c)
{
	double p;

	if (c->total < RECOVERY_MIN_SAMPLES)
		p = fmax(RECOVERY_PRIOR, c->lost / RECOVERY_MIN_SAMPLES);
	else
		p = c->sent > 0 ? c->lost / c->sent : 0;
	return fmin(p * c->boost, 1.0);
}

double
recovery_fail_rate(unsigned n, unsigned m, double p)
{
	/* P(X > m) for X ~ Binomial(n, p), summed from the top term down,
	 * which keeps tiny tails exact where 1 - P(X <= m) would cancel. */
	double term, sum = 0;

	if (m >= n || p <= 0)
		return 0;
	if (p >= 1)
		return 1;
	/* term(i) = C(n, i) p^i (1-p)^(n-i), starting at i = m + 1 */
	term = exp(lgamma(n + 1.0) - lgamma(m + 2.0) - lgamma((double)(n - m)) +
	    (m + 1) * log(p) + (n - m - 1) * log1p(-p));
	for (unsigned i = m + 1; i <= n; i++) {
		sum += term;
		term *= (double)(n - i) / (i + 1) * p / (1 - p);
	}
	return sum;
}

unsigned
recovery_ctl_repairs(const struct recovery_ctl *c, unsigned k)
{
	double p = recovery_ctl_loss(c);
	unsigned cap, m;

	if (k == 0 || p < RECOVERY_MIN_LOSS)
		return 0;
	if (k > FEC_MAX_K)
		k = FEC_MAX_K;
	cap = (unsigned)(k * RECOVERY_MAX_SHARE);
	if (cap < 1)
		cap = 1;
	/* Congestive loss: repairs would feed the queue that drops, and the
	 * inner TCP should see that loss and slow down. Keep a little for
	 * the random loss underneath. */
	if (c->congested || c->overrun)
		cap = cap / 4 > 0 ? cap / 4 : 1;
	if (cap > FEC_MAX_M)
		cap = FEC_MAX_M;
	for (m = 1; m < cap; m++)
		if (recovery_fail_rate(k + m, m, p) < RECOVERY_TARGET)
			break;
	return m;
}

/* How much redundancy the tunnel's loss recovery sends: a pure function of
 * the loss the path shows, the receiver's reports of what it could not
 * rebuild, and whether the round trip says the losses are congestive. Fed
 * counters, it answers "how many repairs for a group of k"; no clock, no
 * I/O, so its decisions are unit-tested from loss histories. */
#ifndef ROVE_RECOVERY_CTL_H
#define ROVE_RECOVERY_CTL_H

#include <stdbool.h>
#include <stdint.h>

/* The residual loss aimed at: a group of k originals and m repairs fails
 * when more than m of its k + m datagrams are lost, and m is chosen so that
 * this happens less often than this. */
#define RECOVERY_TARGET 1e-4
/* Below this loss rate nothing is sent: the inner TCP does not notice it. */
#define RECOVERY_MIN_LOSS 1e-4
/* At most this share of a full group in repairs (a group closed early by
 * time, at a low packet rate, still gets one). */
#define RECOVERY_MAX_SHARE 0.25
/* Datagrams a connection sends before its own loss figure is trusted.
 * Until then the plan assumes RECOVERY_PRIOR (or what it saw, if more):
 * a host's TCP starts in slow start, and one loss there, before a loss
 * rate could be measured, costs it seconds of slow growth afterwards;
 * the repairs of 200 datagrams cost nothing on a clean path. */
#define RECOVERY_MIN_SAMPLES 200
#define RECOVERY_PRIOR 0.005

struct recovery_ctl {
	/* Decayed sums of the DATAGRAMs sent and declared lost: the loss
	 * estimate is lost / sent, remembering the last few seconds. */
	double sent, lost;
	uint64_t last_sent, last_lost;       /* the counters at the last tick */
	uint64_t total;                      /* datagrams counted in all */
	/* The receiver's last report (cumulative), and the factor the loss
	 * estimate is raised by while groups still fail (loss that comes in
	 * bursts defeats a code sized for random loss). */
	uint64_t rep_received, rep_rebuilt, rep_unrepaired, rep_overwhelmed;
	double boost;
	/* The last report's failures were mostly runs (groups overwhelmed):
	 * overflow, not noise, and repairs would feed it. */
	bool overrun;
	/* The round trip rose with the loss: the losses are the queue's, and
	 * repairs would only add to it. */
	bool congested;
};

void recovery_ctl_init(struct recovery_ctl *);

/* A tick (RECOVERY_TICK_MS apart): the connection's cumulative DATAGRAMs
 * sent and lost, and its smoothed and minimum round trip. */
void recovery_ctl_tick(struct recovery_ctl *, uint64_t sent, uint64_t lost,
    double rtt_ms, double min_rtt_ms);
#define RECOVERY_TICK_MS 100

/* The receiver's cumulative counts: originals that arrived, originals it
 * rebuilt, originals it could not, and of those the ones lost in runs
 * (fec.h's overwhelmed; 0 from a peer that does not count them). Failures
 * of the random kind raise the plan's loss; failures in runs cut the
 * repairs as congestion does. */
void recovery_ctl_report(struct recovery_ctl *, uint64_t received,
    uint64_t rebuilt, uint64_t unrepaired, uint64_t overwhelmed);

/* The loss rate the plan is made for (the estimate times the boost). */
double recovery_ctl_loss(const struct recovery_ctl *);

/* Repairs for a group of k originals (1..RECOVERY_MAX_M); 0 sends none. */
unsigned recovery_ctl_repairs(const struct recovery_ctl *, unsigned k);

/* The chance that more than m of n datagrams, each lost with probability
 * p, are lost: the group's failure rate. */
double recovery_fail_rate(unsigned n, unsigned m, double p);

#endif

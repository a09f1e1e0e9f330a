/* Transport = auto's watch for a UDP policer: a middlebox that lets UDP
 * through at a trickle while TCP runs free. Its signature is heavy loss
 * under load at a round trip that does not grow (a policer drops at once,
 * where a congested queue first delays). Fed counters every tick, in
 * either direction (our own packets, and the peer's LOSS_REPORT of its
 * own), it answers "does the path look policed"; no clock, no I/O, so its
 * verdicts are unit-tested from loss histories. Whether TCP then does
 * better is the client's trial to judge (client.c). */
#ifndef ROVE_THROTTLE_H
#define ROVE_THROTTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The window a verdict looks at: this many ticks of THROTTLE_TICK_MS. */
#define THROTTLE_TICK_MS 250
#define THROTTLE_WINDOW 8
/* Packets sent in the window (either direction) before its loss counts:
 * a few lost of a trickle say nothing. */
#define THROTTLE_MIN_PKTS 100
/* Lost share that looks like a policer. Random loss on a poor radio link
 * stays well below; TCP would suffer from such loss more than QUIC does. */
#define THROTTLE_LOSS 0.15
/* Fresh losses (a tick with ours, or a peer's report with its own) the
 * path must show while it keeps looking policed: one burst (a radio's
 * hiccup, an inner TCP's slow start overshooting once) stays in the
 * window for a while but is one tick of loss, not a policer. */
#define THROTTLE_SUSTAIN 4
/* The round trip is "steady" while the smoothed one stays below the
 * minimum times (1 + share) plus slack: a queue that fills pushes it
 * above, a policer does not. */
#define THROTTLE_QUEUE_SHARE 0.5
#define THROTTLE_QUEUE_SLACK_MS 10.0
/* The peer's report is used for this long after it arrived; the peer
 * reports about once a second while it loses packets. */
#define THROTTLE_REPORT_FRESH_MS 2500

struct throttle_watch {
	/* Our counters at each of the last THROTTLE_WINDOW + 1 ticks. */
	uint64_t sent[THROTTLE_WINDOW + 1], lost[THROTTLE_WINDOW + 1];
	uint64_t bytes[THROTTLE_WINDOW + 1];
	unsigned head, n;
	/* The peer's last two reports (cumulative) and when they came. */
	uint64_t peer_sent[2], peer_lost[2], peer_at_ms[2];
	unsigned npeer;
	/* Reports that brought fresh loss, and how many of them the ticks
	 * have counted: under heavy loss the peer's reports (on a stream)
	 * arrive late and together, and each still counts. */
	uint64_t peer_lossy, peer_counted;
	unsigned streak;   /* fresh losses since it looked policed */
	double loss;       /* the worse direction's loss at the last tick */
	bool peer_worse;   /* ... and it was the peer's sending */
};

void throttle_init(struct throttle_watch *);

/* The peer's cumulative packets sent and declared lost, at now_ms. A
 * report with counters that went back starts over (a new connection). */
void throttle_peer_report(struct throttle_watch *, uint64_t now_ms,
    uint64_t sent, uint64_t lost);

/* A tick: our connection's cumulative packets sent and lost, bytes it
 * carried (the rate throttle_rate_bps reports) and its smoothed and
 * minimum round trip. True when the path has looked policed
 * without a break through THROTTLE_SUSTAIN ticks of fresh loss (the
 * streak then starts over). */
bool throttle_tick(struct throttle_watch *, uint64_t now_ms, uint64_t sent,
    uint64_t lost, uint64_t bytes, double rtt_ms, double min_rtt_ms);

/* The bytes of the last window, in bits per second (0 until the window
 * is full). */
uint64_t throttle_rate_bps(const struct throttle_watch *);

/* The rate probe: on TCP because QUIC looked policed, the client learns
 * whether QUIC would carry its load again before it moves the session
 * back (a move resets every forward, and a policer still there sends it
 * away again seconds later). On a QUIC connection that the server never
 * adopts (ALPN PROTO_ALPN_PROBE), it sends DATAGRAMs at an offered rate,
 * each stamped with its send time, and the server echoes them. A warm-up
 * lets the congestion window grow; what comes back of what was sent in
 * the measured span after it is the verdict. Pure, like the watch. */
/* The offer, each way: twice what QUIC carried when it looked policed,
 * within these bounds (a policer lets through what it did before, half
 * or less; the offer stays small beside the session's own TCP). */
#define THROTTLE_PROBE_MIN_BPS UINT64_C(4000000)
#define THROTTLE_PROBE_MAX_BPS UINT64_C(200000000)
#define THROTTLE_PROBE_DGRAM 1200
#define THROTTLE_PROBE_TICK_MS 5
/* Warm-up: this many round trips for slow start, within bounds. Eight
 * double the initial window 256 times, to about 3 MB: the most the offer
 * needs (200 Mbit/s) up to a 120 ms round trip, and an offer of 40 Mbit/s
 * (a policer at 20) up to 500 ms, where the bound cuts in. */
#define THROTTLE_PROBE_WARM_RTTS 8
#define THROTTLE_PROBE_WARM_MIN_MS 500
#define THROTTLE_PROBE_WARM_MAX_MS 4000
#define THROTTLE_PROBE_MEASURE_MS 2000
/* After the measured span, echoes are awaited this many round trips. */
#define THROTTLE_PROBE_TAIL_RTTS 2
#define THROTTLE_PROBE_TAIL_MIN_MS 300
/* Share of the measured bytes that must come back: 3/4. */
#define THROTTLE_PROBE_PASS_NUM 3
#define THROTTLE_PROBE_PASS_DEN 4

struct throttle_probe {
	uint64_t offer_bps;
	uint64_t start_ms, measure_from_ms, measure_to_ms, end_ms;
	uint64_t sent;            /* bytes sent since start */
	uint64_t measured_sent;   /* ... of them stamped in the measured span */
	uint64_t measured_back;   /* echoes of those that came back */
};

/* The offer for a QUIC that carried `quic_bps` when it looked policed. */
uint64_t throttle_probe_offer(uint64_t quic_bps);

/* Start at now_ms on a connection with round trip `rtt_ms`. */
void throttle_probe_start(struct throttle_probe *, uint64_t now_ms,
    uint64_t offer_bps, double rtt_ms);

/* Bytes the offer has due by now_ms and not yet sent (none after the
 * measured span). */
uint64_t throttle_probe_due(const struct throttle_probe *, uint64_t now_ms);

/* `len` bytes sent at stamp_ms; an echo of `len` bytes stamped stamp_ms
 * came back. */
void throttle_probe_sent(struct throttle_probe *, uint64_t stamp_ms,
    size_t len);
void throttle_probe_echo(struct throttle_probe *, uint64_t stamp_ms,
    size_t len);

/* The verdict is due. */
bool throttle_probe_over(const struct throttle_probe *, uint64_t now_ms);

/* The share of the measured bytes that came back, and whether that is
 * enough to go back to QUIC. */
double throttle_probe_share(const struct throttle_probe *);
bool throttle_probe_passed(const struct throttle_probe *);

#endif

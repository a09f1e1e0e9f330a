/* Loss recovery for the IP tunnel, one connection's worth: while the path
 * loses DATAGRAMs, the packets read from the TUN go out in groups
 * (context PROTO_CTX_IP_FEC) followed by repairs (PROTO_CTX_FEC_REPAIR)
 * that let the peer rebuild lost ones within a few ms instead of the inner
 * TCP noticing the loss a round trip later; how many repairs is
 * recovery-ctl.c's decision. Received groups are decoded here both ways
 * (fec.c), and the receiver's reports (PROTO_CTX_FEC_REPORT) of what it
 * could not rebuild go back to the sender's controller. */
#ifndef ROVE_RECOVERY_H
#define ROVE_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct quic_conn;

/* Originals per group (SPREAD_DEPTH groups are open at once, spread.h):
 * closed early after RECOVERY_HOLD_MAX_MS (or a quarter of the round
 * trip, if shorter) so that a rebuilt packet is late by no more than the
 * inner TCP's reordering tolerance. */
#define RECOVERY_GROUP 32
#define RECOVERY_HOLD_MAX_MS 5

struct recovery_stats {
	bool sending;            /* the peer decodes and we may send repairs */
	bool active;             /* groups and repairs going out now */
	uint64_t protected_sent; /* IP packets sent in groups */
	uint64_t protected_bytes;
	uint64_t repairs_sent;
	uint64_t repair_bytes;
	unsigned group_k, group_m; /* the last group closed: size, repairs */
	double loss;             /* the loss rate the plan is made for */
	bool overrun;            /* the peer's failures come in runs: cut */
	/* receiving */
	uint64_t received;       /* originals that arrived in groups */
	uint64_t rebuilt;        /* originals rebuilt from repairs */
	uint64_t unrepaired;     /* lost originals a repair could not rebuild */
	uint64_t overwhelmed;    /* of those, lost in runs (fec.h) */
	uint64_t malformed;      /* group and repair frames refused */
	uint64_t late;           /* frames of a group already given up */
	uint64_t duplicates;
	uint64_t reports_sent, reports_received;
};

struct recovery;

/* A recovery for `qc` (which it sends its DATAGRAMs on and reads the
 * loss of); it only decodes until recovery_set_sending. */
struct recovery *recovery_create(struct event_base *, struct quic_conn *qc);
void recovery_free(struct recovery *);

/* The peer decodes groups (it announced the feature) and our
 * configuration allows repairs (LossRecovery = auto). */
void recovery_set_sending(struct recovery *, bool);

/* Send IP packet `pkt` (len bytes) in a group, if loss makes it worth it
 * and the packet leaves room for its repairs in a DATAGRAM. Returns 1
 * when it did not (the caller sends it as PROTO_CTX_IP), else what
 * quic_conn_send_datagram returned for it. */
int recovery_send(struct recovery *, const uint8_t *pkt, size_t len);

/* A DATAGRAM of one of recovery's contexts (`ctx`, body after the context
 * ID): every IP packet it yields (the original, or packets a repair
 * rebuilt) goes to `deliver`, which must not call back into this
 * recovery. Returns -1 for a malformed frame (counted in the stats). */
int recovery_input(struct recovery *, uint64_t ctx, const uint8_t *body,
    size_t len, void (*deliver)(const uint8_t *pkt, size_t len, void *arg),
    void *arg);

void recovery_get_stats(const struct recovery *, struct recovery_stats *);

#endif

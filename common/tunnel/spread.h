/* Interleaved groups for loss recovery: consecutive IP packets go to
 * SPREAD_DEPTH groups in turn, and when the groups close their repairs go
 * out row by row across them (the first repair of each group, then the
 * second of each, ...). A burst of up to SPREAD_DEPTH consecutive lost
 * DATAGRAMs then costs each group at most one of its frames, which one
 * repair rebuilds; with a single group, a burst takes an original and the
 * repairs sent right after it together, and the inner TCP sees the loss
 * all the same. Real links lose in bursts (a Wi-Fi fade, a queue that
 * overflows for a moment), so this is the default layout, not an option.
 *
 * A pure layer over fec.c's encoder: the caller sends the frames, and
 * decides when the groups close and how many repairs each gets. Nothing
 * changes on the wire: each group is an ordinary fec.c group with its own
 * id (ids are handed out in the order groups open), so a receiver neither
 * knows nor cares. */
#ifndef ROVE_SPREAD_H
#define ROVE_SPREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fec.h"

#define SPREAD_DEPTH 4

struct spread;

/* Groups of up to k originals each (1..FEC_MAX_K). Aborts on
 * out-of-memory, as xmalloc does; encoders are made as groups first fill. */
struct spread *spread_create(unsigned k);
void spread_free(struct spread *);

/* Frame `pkt` as an original of the next group in turn, as fec_enc_add
 * does (same return values; never -ENOSPC: a full group must be closed
 * first, see spread_full). */
ssize_t spread_add(struct spread *, const uint8_t *pkt, size_t len,
    uint8_t *out, size_t outlen);

/* Originals in the open groups. */
unsigned spread_count(const struct spread *);

/* A group holds k originals: close them all now. */
bool spread_full(const struct spread *);

/* The length of the longest repair frame spread_close would emit now, or
 * 0 when every group is empty. */
size_t spread_repair_len(const struct spread *);

/* What a close did, for status. */
struct spread_close_info {
	unsigned groups;  /* groups closed */
	unsigned k, m;    /* the largest group closed, and its repairs */
	unsigned repairs; /* repairs emitted */
};

/* Close every open group, giving each repairs(k, arg) repairs (0 ..
 * FEC_MAX_M), and hand the repair frames to `emit` row by row across the
 * groups, starting with the group that got an original longest ago, so
 * that no SPREAD_DEPTH consecutive frames (the last originals and the
 * first repairs included) hold two of one group when every group is
 * used. Frames are valid only during the call. */
void spread_close(struct spread *, unsigned (*repairs)(unsigned k, void *arg),
    void (*emit)(const uint8_t *frame, size_t len, void *arg), void *arg,
    struct spread_close_info *info);

#endif

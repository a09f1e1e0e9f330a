/* Forward error correction for the tunnel's DATAGRAMs: a systematic erasure
 * code (Reed-Solomon over a Cauchy matrix, computed by ISA-L) over groups
 * of IP packets, so that a receiver rebuilds lost packets without waiting
 * a round trip. A pure codec over byte buffers: the caller owns the QUIC
 * side, writes the DATAGRAM context byte, and decides when a group closes
 * and how many repairs it gets.
 *
 * Wire format, after the context byte, integers big-endian:
 *   protected original (context 2)  group u32 | index u8 | IP packet
 *   repair (context 3)              group u32 | k u8 | m u8 | row u8 | symbol
 * A group has k originals (1..FEC_MAX_K), indexed 0..k-1, and m repairs
 * (1..FEC_MAX_M), rows 0..m-1. Each original is coded as the symbol
 * `len u16 | packet | zeros`, all symbols of a group as long as the
 * longest (2 + its longest packet), so a rebuilt packet knows its length;
 * every repair of a group carries a symbol of that length. Group ids count
 * up by one per group and wrap at 2^32. */
#ifndef ROVE_FEC_H
#define ROVE_FEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FEC_ORIG_OVERHEAD 5   /* group, index */
#define FEC_REPAIR_OVERHEAD 7 /* group, k, m, row */
#define FEC_SYMBOL_OVERHEAD 2 /* the length in front of the packet */
/* A repair frame is FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD bytes
 * longer than its group's longest packet, 4 more than its longest
 * protected original frame. */
#define FEC_MAX_K 32
#define FEC_MAX_M 8
/* The longest packet a group takes: more than any QUIC DATAGRAM on a
 * real path (< 1500), room for jumbo and loopback paths. A longer packet
 * is refused (-EMSGSIZE) and the caller sends it unprotected. */
#define FEC_MAX_PACKET 9000
#define FEC_MAX_SYMBOL (FEC_SYMBOL_OVERHEAD + FEC_MAX_PACKET)
/* Groups a decoder keeps: a frame of a group this many or more behind
 * the newest seen is late. */
#define FEC_DEC_WINDOW 16

/* --- Sender */

/* The sender's open group: a copy of each original's symbol until the
 * group closes, its repair frames, and the encode tables of each k used.
 * Buffers grow to the longest packet seen and are kept, so a steady flow
 * allocates nothing: at most FEC_MAX_K + FEC_MAX_M symbols (about 60 KB
 * for 1500-byte packets, 360 KB for FEC_MAX_PACKET) plus 256 * k bytes of
 * tables per k used. Owned by the caller; fec_enc_free releases it all. */
struct fec_enc;

/* A new encoder whose first group is 0 and whose groups take up to
 * FEC_MAX_K originals. Aborts on out-of-memory, as xmalloc does. */
struct fec_enc *fec_enc_create(void);

/* Free the encoder (NULL is fine). */
void fec_enc_free(struct fec_enc *);

/* Limit the open group and later ones to k originals (1..FEC_MAX_K), so
 * that fec_enc_add says -ENOSPC when a group of that size is full: the
 * caller's cue to close it. Returns 0, or -EINVAL for a k out of range. */
int fec_enc_set_k(struct fec_enc *, unsigned k);

/* Number the open group `group`, for a sender that must not reuse ids and
 * for tests of the wrap at 2^32. Returns 0, or -EBUSY when the open group
 * already has originals (they went out with its old id). */
int fec_enc_set_group(struct fec_enc *, uint32_t group);

/* The id of the open group, which the next original will carry. */
uint32_t fec_enc_group(const struct fec_enc *);

/* Frame the IP packet `pkt` (len bytes) as a protected original of the
 * open group into `out` (FEC_ORIG_OVERHEAD + len bytes), and keep its
 * symbol for the group's repairs: the one copy the encoder makes. The
 * packet may already sit at out + FEC_ORIG_OVERHEAD (a caller that keeps
 * headroom in its buffer), and is then not moved. Returns the frame
 * length; -EMSGSIZE when len > FEC_MAX_PACKET or outlen is too small (the
 * caller sends the packet unprotected), -EINVAL for an empty packet, and
 * -ENOSPC when the open group is full (FEC_MAX_K, or the k of
 * fec_enc_set_k): close it first, then add again. */
ssize_t fec_enc_add(struct fec_enc *, const uint8_t *pkt, size_t len,
    uint8_t *out, size_t outlen);

/* Originals in the open group. */
unsigned fec_enc_count(const struct fec_enc *);

/* The length of each repair frame fec_enc_close would emit now
 * (FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD + the longest packet), or 0
 * for an empty group: so that the caller can check the repairs fit its
 * DATAGRAMs before it closes. */
size_t fec_enc_repair_len(const struct fec_enc *);

/* Close the open group: compute m repairs (0..FEC_MAX_M) and hand each
 * frame, rows 0..m-1 in order, to `emit`; the frame lives in the encoder
 * and is valid only during the call. The next group has the next id. With
 * m = 0 nothing is emitted but the group still ends (its originals go
 * unprotected); an empty group emits nothing and keeps its id, since no
 * frame carried it. Returns the number of repairs emitted, or -EINVAL for
 * m > FEC_MAX_M (the group stays open). */
int fec_enc_close(struct fec_enc *, unsigned m,
    void (*emit)(const uint8_t *frame, size_t len, void *arg), void *arg);

/* --- Receiver */

/* The receiver's window of the FEC_DEC_WINDOW most recent groups: per
 * group, what its repairs announced (k, m, the symbol length) and the
 * symbols that arrived, kept until the group is whole or leaves the
 * window. Symbol buffers come from a pool of the decoder's, so memory
 * stays bounded: at most FEC_DEC_WINDOW * (FEC_MAX_K + FEC_MAX_M)
 * buffers of at most FEC_MAX_SYMBOL bytes (5.8 MB; 1 MB when no packet
 * exceeds 1500 bytes), and in practice the symbols of the groups still
 * open. Owned by the caller; fec_dec_free releases everything. */
struct fec_dec;

/* What the decoder saw, for status and metrics. */
struct fec_dec_counters {
	uint64_t rebuilt;    /* originals rebuilt from repairs, delivered */
	uint64_t unrepaired; /* originals a repair announced that neither
	                      * arrived nor were rebuilt before their group
	                      * left the window */
	uint64_t overwhelmed; /* of those, the ones in groups that lost more
	                      * than twice as many frames as they had
	                      * repairs: a run of losses (a queue that
	                      * overflowed), which no redundancy sized for
	                      * random loss would have covered */
	uint64_t duplicates; /* originals and repairs that arrived twice */
	uint64_t malformed;  /* frames refused (-EINVAL), among them those
	                      * that contradict their group, and rebuilt
	                      * symbols with an impossible length */
	uint64_t late;       /* frames of a group already out of the window */
};

/* A new decoder with an empty window. Aborts on out-of-memory. */
struct fec_dec *fec_dec_create(void);

/* Free the decoder and its buffers (NULL is fine). */
void fec_dec_free(struct fec_dec *);

/* A protected original `frame` (flen bytes, after the context byte)
 * arrived. Returns 0 with its IP packet in *pkt and *len, pointing into
 * `frame`: deliver it at once, FEC adds no latency to what arrives. The
 * decoder keeps a copy of its symbol while its group may still need it,
 * and when this original completes what a group needs (repairs came
 * first), rebuilds the missing ones and hands each to `deliver` before
 * returning. An original of a group already out of the window is still
 * returned (counted late; it cannot be checked for a duplicate). Returns
 * 1 for a duplicate (*pkt is not set: nothing to deliver), -EINVAL for a
 * malformed frame (short, empty packet, index >= FEC_MAX_K, or beyond the
 * k or symbol length its group's repairs announced), counted. */
int fec_dec_original(struct fec_dec *, const uint8_t *frame, size_t flen,
    const uint8_t **pkt, size_t *len,
    void (*deliver)(const uint8_t *pkt, size_t len, void *arg), void *arg);

/* A repair `frame` (flen bytes, after the context byte) arrived. When its
 * group then has k of its k + m symbols, rebuilds every missing original
 * and hands each to `deliver` (the packet lives in the decoder, valid
 * during the call). Returns the number rebuilt; 0 when not yet possible,
 * nothing is missing, the repair is a duplicate or late; -EINVAL for a
 * malformed frame (short; k, m or row out of range; a symbol too short or
 * too long; k, m or the symbol length unlike an earlier repair of the
 * group's, or k not above an original's index already seen), counted. */
int fec_dec_repair(struct fec_dec *, const uint8_t *frame, size_t flen,
    void (*deliver)(const uint8_t *pkt, size_t len, void *arg), void *arg);

/* Both take a `deliver` that must not call back into the same decoder:
 * the group it rebuilt is still being finished. */

/* The decoder's counters, updated in place (valid until fec_dec_free). */
const struct fec_dec_counters *fec_dec_counters(const struct fec_dec *);

/* Bytes of symbol buffers the decoder holds (in use and pooled), for
 * tests and status: never more than the bound given above. */
size_t fec_dec_memory(const struct fec_dec *);

#endif

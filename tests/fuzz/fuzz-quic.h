/* The input format of fuzz-quic.c, shared with make-seeds.c, which writes
 * its seeds. */
#ifndef ROVE_FUZZ_QUIC_H
#define ROVE_FUZZ_QUIC_H

#include <stdint.h>

#include "transport/quic.h"

/*
 * Each operation is one byte (taken modulo OP_COUNT), then its arguments;
 * len16 is little-endian, and an input that ends early ends the operation.
 * OP_PACKET's fate byte: bit 0 picks the direction (0: toward the server;
 * the other queue when that one is empty), bits 1-3 what happens to the
 * packet: 0 delivered, 1 lost, 2 duplicated, 3 one byte changed (two
 * more bytes: where, and what to XOR in), 4 cut short (two more bytes:
 * the first gives the length), 5 sent to the back of its queue, 6 from
 * the NAT's other address this once, 7 replayed by the forger. OP_TIME's
 * amount: below 200 that many milliseconds, else (amount - 199) seconds.
 * OP_STREAM's flags: bit 0 the server sends (else the client), bit 1
 * FIN, bits 2-3 which of the sender's streams (a new one past the last).
 * OP_CLOSE's flags: bit 0 the server closes (else the client).
 * OP_LOAD's level, modulo 3: 0 the server counts its real half-open
 * handshakes, 1 as many as make it ask for a Retry, 2 so many that it
 * drops new Initials.
 */
enum fuzz_quic_op {
	OP_FORGED_INITIAL,  /* len16, frames: an Initial from the forger */
	OP_FORGED_RAW,      /* len16, bytes: a datagram from the forger */
	OP_CLIENT_START,    /* flags: start the client (bit 0: resume) */
	OP_PACKET,          /* fate[, 2 bytes]: the next queued packet */
	OP_FLUSH,           /* deliver everything until quiet */
	OP_TIME,            /* amount: advance the clock, fire the timers */
	OP_NAT,             /* the client's address changes (or back) */
	OP_STREAM,          /* flags, len8, bytes: stream data, either way */
	OP_DATAGRAM,        /* len8, bytes: a DATAGRAM from the client */
	OP_CLOSE,           /* flags, code: one end closes */
	OP_LOAD,            /* level: how busy the server says it is */
	OP_FORGED_TOKEN,    /* len8, bytes: the token of forged Initials */
	OP_COUNT
};

/* The forger's Initials: RFC 9001 appendix A's connection ID (so that the
 * key derivation can be checked against the RFC), and a source connection
 * ID as long as a rove client's, which the seeds' ClientHello names in its
 * transport parameters too. */
static const uint8_t forged_dcid[8] = {
	0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08,
};
static const uint8_t forged_scid[QUIC_SCID_LEN] = {
	0xf0, 0x0f, 0xf0, 0x0f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
};

#endif

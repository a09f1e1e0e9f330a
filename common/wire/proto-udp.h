/* rove wire protocol v1: UDP forwards (PROTO_FEATURE_UDP_FORWARD). A UDP
 * flow (one client source address and port, one target) is set up once on
 * a forward stream whose header names the target and the DATAGRAM context
 * that will carry the flow; its datagrams then travel as QUIC DATAGRAM
 * frames under that context, never on the stream, so that a lost one never
 * holds up the next. The stream stays open, empty, as long as the flow
 * does. Pure functions; decoders never read past their input. See
 * docs/PROTOCOL.md section 5. */
#ifndef ROVE_PROTO_UDP_H
#define ROVE_PROTO_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto-fwd.h"

/* Stream header types, in the space of proto-fwd.h's. */
enum proto_udp_type {
	/* client -> roved: relay the flow to host:port (-L udp/) */
	PROTO_FWD_UDP_CONNECT = 6,
	/* roved -> client: a new source reached the UDP remote-forward
	 * listener of port `port` (-R udp/) */
	PROTO_FWD_UDP_REMOTE = 7,
};

/* Flow contexts start above the tunnel's (PROTO_CTX_IP .. 3). The side
 * that opens a flow picks its context, the client an even one, roved an
 * odd one, so that neither can pick one the other already uses (the idea
 * of RFC 9298's context IDs). A context names one flow for the life of
 * the connection it was set up on; a flow set up again on a later
 * connection may get another. */
#define PROTO_CTX_UDP_BASE 4
#define PROTO_CTX_UDP_MAX ((UINT64_C(1) << 62) - 1)

enum proto_udp_opener {
	PROTO_UDP_BY_CLIENT = 0,
	PROTO_UDP_BY_SERVER = 1,
};

/* Whether `ctx` is a flow context that `opener` may pick. */
bool proto_udp_ctx_valid(uint64_t ctx, enum proto_udp_opener opener);
/* The first flow context of `opener` after `prev` (0: the first of all);
 * 0 once they run out. */
uint64_t proto_udp_ctx_next(uint64_t prev, enum proto_udp_opener opener);

struct proto_udp_header {
	uint64_t type; /* PROTO_FWD_UDP_* */
	uint64_t ctx;  /* the flow's DATAGRAM context */
	char host[PROTO_FWD_MAX_HOST + 1]; /* NUL-terminated; empty for REMOTE */
	uint16_t port; /* CONNECT: the target's; REMOTE: the listener's */
};

/* Wire form: varint type, varint context, then for CONNECT a varint host
 * length (1..255) and the host bytes (proto_fwd_host_valid), and for both
 * a 2-byte port (big-endian, never 0). CONNECT's context is the client's
 * (even), REMOTE's roved's (odd). The acceptor answers as for a TCP
 * forward: PROTO_FWD_OK, or RESET_STREAM with a proto_fwd_error code; it
 * sends nothing more on the stream, and a FIN or a reset from either side
 * ends the flow. The encoder returns the header's length, or 0 if it does
 * not fit or the decoder would refuse it. */
size_t proto_udp_encode(uint8_t *out, size_t outlen,
    const struct proto_udp_header *);
/* Returns the header's length when complete, 0 if more bytes are needed,
 * -1 if malformed (a type that is not UDP, a context the opener may not
 * pick, a bad host, port 0). */
long proto_udp_decode(const uint8_t *in, size_t inlen,
    struct proto_udp_header *);
/* Whether a forward stream's first bytes are a UDP header: 1 if so, 0 if
 * another type (proto_fwd_decode's), -1 if more bytes are needed. */
int proto_udp_is_udp(const uint8_t *in, size_t inlen);

/* One datagram of the flow of `ctx`: the context varint, then `len` bytes
 * of payload, never split. Returns the DATAGRAM payload's length, or 0 if
 * it does not fit in `outlen` (the caller drops and counts it). */
size_t proto_udp_dgram_encode(uint8_t *out, size_t outlen, uint64_t ctx,
    const uint8_t *payload, size_t len);
/* The largest payload that fits a DATAGRAM payload of `room` bytes under
 * `ctx` (0 if none does). */
size_t proto_udp_dgram_room(size_t room, uint64_t ctx);


#endif

/* rove wire protocol v1: forward streams (TCP connections over QUIC
 * streams) and the control messages of remote forwards. Pure functions;
 * decoders never read past their input. See docs/PROTOCOL.md. */
#ifndef ROVE_PROTO_FWD_H
#define ROVE_PROTO_FWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Forward streams: every bidirectional stream but the control stream
 * carries one TCP connection. The opener sends a header naming the target;
 * the acceptor answers with one status byte (PROTO_FWD_OK) once its TCP
 * connection is up, then raw bytes flow both ways. A failure is a
 * RESET_STREAM (and STOP_SENDING) with one of these codes. */
enum proto_fwd_error {
	PROTO_FWD_OK = 0,
	PROTO_FWD_ERR_RESET = 1,       /* the TCP connection was reset */
	PROTO_FWD_ERR_REFUSED = 2,     /* the target refused the connection */
	PROTO_FWD_ERR_UNREACHABLE = 3, /* no route to the target */
	PROTO_FWD_ERR_DENIED = 4,      /* policy forbids this target */
	PROTO_FWD_ERR_TIMEOUT = 5,     /* the target did not answer in time */
	PROTO_FWD_ERR_LIMIT = 6,       /* too many forwards at once */
	PROTO_FWD_ERR_PROTOCOL = 7,    /* malformed header */
	PROTO_FWD_ERR_NAME = 8,        /* the target name does not resolve */
	PROTO_FWD_ERR_GONE = 9,        /* no such forward to resume (it ended,
	                                  or waited longer than allowed) */
	PROTO_FWD_ERR_COUNT
};

/* Header types. */
enum proto_fwd_type {
	PROTO_FWD_CONNECT = 1, /* client -> roved: connect to host:port (-L, -D) */
	PROTO_FWD_REMOTE = 2,  /* roved -> client: a connection arrived on the
				  remote-forward listener of port `port` (-R) */
	/* Either way (PROTO_FEATURE_FWD_RESUME): the forward `id` that this
	 * side opened on an earlier connection carries on on this stream;
	 * `rx` is how many of the acceptor's bytes this side has taken. */
	PROTO_FWD_RESUME = 5,
};

/* A forward's ID for resumption: 1 .. 2^62 - 1, chosen by its opener at
 * random (0: the forward cannot be resumed). */
#define PROTO_FWD_ID_MAX ((UINT64_C(1) << 62) - 1)

#define PROTO_FWD_MAX_HOST 255

struct proto_fwd_header {
	uint64_t type;
	char host[PROTO_FWD_MAX_HOST + 1]; /* NUL-terminated; empty for REMOTE */
	uint16_t port;
	/* CONNECT, REMOTE: the forward's ID when it may be resumed, else 0.
	 * RESUME: the forward resumed, and the bytes taken (`rx`). */
	uint64_t id;
	uint64_t rx;
};

/* Header wire form: varint type, varint host length (0..255), host bytes
 * (a DNS name or a literal address; no NUL), 2-byte port (big-endian).
 * CONNECT needs a valid host (proto_fwd_host_valid), REMOTE an empty one.
 * With an ID, CONNECT is sent as type 3 and REMOTE as type 4, the same
 * fields followed by a varint ID. RESUME: varint type, varint ID, varint
 * rx. The encoder returns the header's length, or 0 if it does not fit or
 * the decoder would refuse it. */
size_t proto_fwd_encode(uint8_t *out, size_t outlen, const struct proto_fwd_header *);
/* Returns the header's length when complete, 0 if more bytes are needed,
 * -1 if malformed (unknown type, host too long or with a NUL, port 0). */
long proto_fwd_decode(const uint8_t *in, size_t inlen, struct proto_fwd_header *);
/* Whether `len` bytes at `host` can name a target: 1..255 bytes, each one
 * of A-Z a-z 0-9 . - : _ (enough for DNS names and IPv4/IPv6 literals;
 * no brackets, no "%zone", no spaces or control bytes). Added for socks5.c
 * and for checking configured targets before they reach the wire. */
bool proto_fwd_host_valid(const char *host, size_t len);
/* The acceptor's answer to RESUME: PROTO_FWD_OK, then a varint, the bytes
 * of the opener's it has taken. (Any other header is answered by the
 * status byte alone.) The decoder returns the answer's length, 0 if more
 * bytes are needed, -1 if malformed (a status that is not OK). */
size_t proto_fwd_resumed_encode(uint8_t *out, size_t outlen, uint64_t rx);
long proto_fwd_resumed_decode(const uint8_t *in, size_t inlen, uint64_t *rx);
/* The name of an error code for logs and status ("refused", ...). */
const char *proto_fwd_error_name(uint64_t code);

/* Control messages for remote forwards (-R). */
#define PROTO_MSG_REMOTE_FORWARD 4       /* client asks: listen on port */
#define PROTO_MSG_REMOTE_FORWARD_REPLY 5 /* server answers: ok or error */
/* client takes one back: stop listening on port (PROTO_FEATURE_CANCEL_REMOTE) */
#define PROTO_MSG_REMOTE_FORWARD_CANCEL 6

/* Where the server is to listen (field 3, PROTO_FEATURE_REMOTE_BIND):
 * absent, the server's default, its loopback addresses (a roved without
 * the feature listens on 0.0.0.0 instead); empty, all its addresses,
 * IPv4 and IPv6; 4 or 16 bytes, that IPv4 or IPv6 address. */
enum proto_remote_bind {
	PROTO_RBIND_DEFAULT = 0,
	PROTO_RBIND_ALL = 1,
	PROTO_RBIND_ADDR = 2,
};

struct proto_remote_forward {
	uint16_t port;     /* field 1 */
	uint64_t status;   /* field 2, in replies: PROTO_FWD_OK or an error */
	enum proto_remote_bind bind; /* field 3 */
	struct ipaddr bind_addr;     /* when bind is PROTO_RBIND_ADDR */
	/* field 4, empty (PROTO_FEATURE_UDP_FORWARD): a UDP listener, whose
	 * sources become UDP flows (proto-udp.h); absent, TCP. Sent only to
	 * a roved that announced the feature: an older one skips the field
	 * and would listen on TCP. */
	bool udp;
};
/* Encode a whole control message of `type` (REMOTE_FORWARD, its reply, or
 * REMOTE_FORWARD_CANCEL, which carries what a request does); returns its
 * length or 0 if it does not fit. The body decoder returns 0, or -1 if
 * malformed (port 0 or missing, truncated field, a bind address of another
 * length than 0, 4 or 16). Bodies use the field encoding of proto.h;
 * unknown fields are skipped. A request carries the port and the bind
 * address (none for the default), a reply also the status, the bind
 * address echoing the request's so that (bind, port) names the forward; a
 * missing status decodes as PROTO_FWD_OK, a missing bind address as
 * PROTO_RBIND_DEFAULT, a repeated field overrides the earlier one. The
 * encoder also returns 0 for another type, port 0, a status >= 2^62, or
 * an unknown bind or address family. */
size_t proto_fwd_remote_encode(uint8_t *out, size_t outlen, uint64_t type,
    const struct proto_remote_forward *);
int proto_fwd_remote_decode(const uint8_t *body, size_t len,
    struct proto_remote_forward *);
/* Whether two messages name the same forward: port, bind address and
 * protocol. */
bool proto_fwd_remote_same(const struct proto_remote_forward *,
    const struct proto_remote_forward *);
/* The forward's bind address and port for logs and status, as the
 * configuration writes them: "localhost:2222" (the default), "*:2222",
 * "198.18.0.1:2222", "[fd00::1]:2222", with "udp/" in front for a UDP
 * one. Returns `buf`. */
#define PROTO_FWD_REMOTE_STRLEN (ADDR_STRLEN + 12)
const char *proto_fwd_remote_str(const struct proto_remote_forward *,
    char buf[static PROTO_FWD_REMOTE_STRLEN]);


#endif

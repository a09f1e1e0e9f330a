/* rove wire protocol v1 (ALPN "rove/1"): DATAGRAM context prefix and the
 * control stream messages. Pure encode/decode over byte buffers; decoders
 * never trust lengths and never read past the buffer. See docs/PROTOCOL.md. */
#ifndef ROVE_PROTO_H
#define ROVE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "varint.h"

#define PROTO_ALPN "rove/1"
/* A client's rate probe (PROTO_FEATURE_RATE_PROBE): authenticated like a
 * session, never adopted as one; the server echoes its DATAGRAMs. */
#define PROTO_ALPN_PROBE "rove-probe/1"
#define PROTO_VERSION 1

/* DATAGRAM payload = varint context ID, then the payload. */
#define PROTO_CTX_IP 0 /* one whole IPv4 or IPv6 packet */
/* Loss recovery (PROTO_FEATURE_LOSS_RECOVERY; common/tunnel/fec.h has the
 * frames): an IP packet in a group, a group's repair, and the receiver's
 * report of what it rebuilt. */
#define PROTO_CTX_IP_FEC 1
#define PROTO_CTX_FEC_REPAIR 2
#define PROTO_CTX_FEC_REPORT 3

/* Split a DATAGRAM payload into context ID and body. Returns 0 or -1 if
 * the varint is truncated. */
int proto_dgram_decode(const uint8_t *in, size_t inlen, uint64_t *ctx,
    const uint8_t **body, size_t *bodylen);

/* Control stream: the client's first bidirectional stream (ID 0). Each
 * message is: varint type, varint length, then `length` bytes of body. The
 * body is a sequence of fields, each: varint field ID, varint length, value.
 * Unknown field IDs are skipped, so either side may add fields. */
enum proto_msg_type {
	PROTO_MSG_CLIENT_HELLO = 1,
	PROTO_MSG_SERVER_CONFIG = 2,
	PROTO_MSG_ERROR = 3,
	/* 4-6: forwards (proto-fwd.h) */
	PROTO_MSG_PATH_NOTICE = 7,
	PROTO_MSG_LOSS_REPORT = 8,
};

#define PROTO_MAX_MSG 4096   /* longest control message body accepted */
#define PROTO_MAX_ROUTES 64
#define PROTO_MAX_DNS 8        /* DNS server addresses in a SERVER_CONFIG */
#define PROTO_MAX_DNS_SEARCH 8 /* search domains in a SERVER_CONFIG */

/* Feature bits: a client announces those it has in CLIENT_HELLO, and the
 * server's SERVER_CONFIG lists those of them it takes up. */
#define PROTO_FEATURE_CANCEL_REMOTE (UINT64_C(1) << 0) /* REMOTE_FORWARD_CANCEL */
/* decodes DATAGRAM contexts 1-3 (loss recovery) */
#define PROTO_FEATURE_LOSS_RECOVERY (UINT64_C(1) << 1)
/* takes PATH_NOTICE */
#define PROTO_FEATURE_PATH_NOTICE (UINT64_C(1) << 2)
/* forward IDs and RESUME (proto-fwd.h): forwards outlive a connection */
#define PROTO_FEATURE_FWD_RESUME (UINT64_C(1) << 3)
/* takes a bind address in REMOTE_FORWARD (proto-fwd.h) and listens on
 * loopback when there is none */
#define PROTO_FEATURE_REMOTE_BIND (UINT64_C(1) << 4)
/* takes LOSS_REPORT */
#define PROTO_FEATURE_LOSS_REPORT (UINT64_C(1) << 5)
/* UDP forwards (proto-udp.h): flow headers on forward streams, their
 * datagrams under contexts from PROTO_CTX_UDP_BASE up (roved relays the
 * client's -L udp/ flows) */
#define PROTO_FEATURE_UDP_FORWARD (UINT64_C(1) << 6)
/* serves rate probes: a QUIC connection with ALPN PROTO_ALPN_PROBE that
 * does not take the session and has its DATAGRAMs echoed */
#define PROTO_FEATURE_RATE_PROBE (UINT64_C(1) << 7)
/* all this version has */
#define PROTO_FEATURES (PROTO_FEATURE_CANCEL_REMOTE | \
	PROTO_FEATURE_LOSS_RECOVERY | PROTO_FEATURE_PATH_NOTICE | \
	PROTO_FEATURE_FWD_RESUME | PROTO_FEATURE_REMOTE_BIND | \
	PROTO_FEATURE_LOSS_REPORT | PROTO_FEATURE_UDP_FORWARD | \
	PROTO_FEATURE_RATE_PROBE)

/* Application close codes. A client that ends its connection because the
 * session moves to another (a transport switch) says so: the server keeps
 * the forwards for the next; code 0 (no error) means the client is going
 * away, and its forwards with it. */
#define PROTO_CLOSE_MOVED 0x10

struct proto_client_hello {
	uint64_t version;  /* PROTO_VERSION */
	uint64_t features; /* PROTO_FEATURE_* */
};

struct proto_server_config {
	uint64_t version;
	struct prefix addrs[2]; /* client tunnel addresses (prefix = its subnet) */
	size_t naddrs;
	struct prefix routes[PROTO_MAX_ROUTES]; /* prefixes to route into the tunnel */
	size_t nroutes;
	uint32_t mtu;        /* inner MTU */
	uint32_t keepalive;  /* seconds */
	/* DNS for the client's resolver while the tunnel is up: servers
	 * (AF_INET or AF_INET6 addresses) and search domains (valid DNS
	 * names, addr_dns_name_valid; NUL-terminated). Older servers send
	 * neither, older clients skip both. */
	struct ipaddr dns[PROTO_MAX_DNS];
	size_t ndns;
	char dns_search[PROTO_MAX_DNS_SEARCH][ADDR_DNS_NAME_MAX + 1];
	size_t ndns_search;
	uint64_t features;   /* PROTO_FEATURE_* of the client's the server
	                      * takes up; sent only when not 0 */
};

struct proto_error {
	uint64_t code;
	char text[256]; /* NUL-terminated, may be truncated */
};

/* Server to client: the client's packets now come from a new address,
 * after `quiet_ms` in which none came at all. After a quiet spell that is
 * the client's NAT having forgotten its mapping: its keepalive is too
 * long for that NAT (docs/PROTOCOL.md). */
struct proto_path_notice {
	uint64_t quiet_ms;
};

/* Server to client: the server's QUIC packets to the client so far, and
 * how many of them were declared lost (cumulative). Sent while it loses
 * some, at most twice a second: the client's auto transport judges the
 * path by the loss both ways (throttle.h), and sees only its own. */
struct proto_loss_report {
	uint64_t sent, lost;
};

/* Encoders append one whole message to `out` (capacity `outlen`) and return
 * its length, or 0 if it does not fit. */
size_t proto_encode_client_hello(uint8_t *out, size_t outlen,
    const struct proto_client_hello *);
size_t proto_encode_server_config(uint8_t *out, size_t outlen,
    const struct proto_server_config *);
size_t proto_encode_error(uint8_t *out, size_t outlen, const struct proto_error *);
size_t proto_encode_path_notice(uint8_t *out, size_t outlen,
    const struct proto_path_notice *);
size_t proto_encode_loss_report(uint8_t *out, size_t outlen,
    const struct proto_loss_report *);

/* Frame parsing for a byte stream: if `in` starts with a whole message,
 * set *type, *body, *bodylen and return the total bytes it occupies; return
 * 0 if more bytes are needed; -1 if malformed (length > PROTO_MAX_MSG or a
 * varint that cannot be valid). */
long proto_msg_next(const uint8_t *in, size_t inlen, uint64_t *type,
    const uint8_t **body, size_t *bodylen);

/* Body decoders: 0 on success, -1 if malformed (truncated field, bad
 * prefix, too many entries). Unknown fields are ignored. */
int proto_decode_client_hello(const uint8_t *body, size_t len,
    struct proto_client_hello *);
int proto_decode_server_config(const uint8_t *body, size_t len,
    struct proto_server_config *);
int proto_decode_error(const uint8_t *body, size_t len, struct proto_error *);
int proto_decode_path_notice(const uint8_t *body, size_t len,
    struct proto_path_notice *);
/* Also -1 when lost > sent. */
int proto_decode_loss_report(const uint8_t *body, size_t len,
    struct proto_loss_report *);


#endif

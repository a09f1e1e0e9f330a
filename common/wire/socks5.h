/* SOCKS5 (RFC 1928) server side for DynamicForward: parse a client's
 * greeting and request, build the replies. Pure functions over byte
 * buffers, no I/O; parsers never read past their input. Only the "no
 * authentication" method and the CONNECT and UDP ASSOCIATE commands are
 * supported; the UDP relay's datagram header (section 7) is parsed and
 * built here too. */
#ifndef ROVE_SOCKS5_H
#define ROVE_SOCKS5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SOCKS5_VERSION 5

#define SOCKS5_METHOD_NO_AUTH 0x00
#define SOCKS5_METHOD_NONE 0xff /* "no acceptable methods" */

#define SOCKS5_CMD_CONNECT 1
#define SOCKS5_CMD_UDP_ASSOCIATE 3

#define SOCKS5_ATYP_IPV4 1
#define SOCKS5_ATYP_DOMAIN 3
#define SOCKS5_ATYP_IPV6 4

/* REP field of a reply. */
enum socks5_rep {
	SOCKS5_REP_SUCCEEDED = 0,
	SOCKS5_REP_GENERAL_FAILURE = 1,
	SOCKS5_REP_NOT_ALLOWED = 2,
	SOCKS5_REP_NET_UNREACHABLE = 3,
	SOCKS5_REP_HOST_UNREACHABLE = 4,
	SOCKS5_REP_REFUSED = 5,
	SOCKS5_REP_TTL_EXPIRED = 6,
	SOCKS5_REP_CMD_NOT_SUPPORTED = 7,
	SOCKS5_REP_ATYP_NOT_SUPPORTED = 8,
};

/* Negative results of socks5_parse_request. */
#define SOCKS5_MALFORMED (-1)        /* reply GENERAL_FAILURE, close */
#define SOCKS5_ATYP_UNSUPPORTED (-2) /* reply ATYP_NOT_SUPPORTED, close */
#define SOCKS5_CMD_UNSUPPORTED (-3)  /* reply CMD_NOT_SUPPORTED, close */

/* Longest reply: an IPv6 bound address. */
#define SOCKS5_REPLY_MAX 22

/* Method selection: VER (5), NMETHODS (1..255), METHODS. Returns the bytes
 * consumed when complete, 0 if more are needed, -1 if malformed (another
 * version, NMETHODS 0). On success *no_auth tells whether method 0x00 was
 * offered; it is not touched otherwise. */
long socks5_parse_greeting(const uint8_t *in, size_t len, bool *no_auth);
/* Method selection reply: 05 00 (accept, no authentication) or 05 FF (no
 * acceptable method). Returns 2. */
size_t socks5_method_reply(uint8_t out[static 2], bool accept);

struct socks5_request {
	uint8_t cmd;
	char host[256]; /* NUL-terminated: a domain name as sent, or the
			   address as text (inet_ntop) */
	uint16_t port;
};

/* Request: VER (5), CMD, RSV (0), ATYP, DST.ADDR, DST.PORT. ATYP 1 gives a
 * dotted IPv4 address, ATYP 4 inet_ntop's IPv6 text, ATYP 3 the domain
 * itself, which must be 1..255 bytes valid for proto_fwd_host_valid (so it
 * can go into a forward header as is). Returns the bytes consumed when
 * complete and CMD is CONNECT or UDP ASSOCIATE; 0 if more are needed;
 * SOCKS5_MALFORMED for another version, RSV not 0, a bad domain or a
 * DST.PORT 0 in a CONNECT (UDP ASSOCIATE's DST names where the client will
 * send from, and 0 says it does not know yet);
 * SOCKS5_ATYP_UNSUPPORTED for another ATYP, as soon as that byte arrives
 * (the address length is then unknown); SOCKS5_CMD_UNSUPPORTED once a whole
 * well-formed request with another CMD has arrived (*req is then filled,
 * for the log). Bytes are checked as they arrive, so a bad request is
 * refused without waiting for the rest. *req is written only when the
 * whole request is there. */
long socks5_parse_request(const uint8_t *in, size_t len, struct socks5_request *req);
/* The REP code to answer a negative socks5_parse_request result with. */
uint8_t socks5_rep_from_parse_error(long r);

/* Reply: VER (5), REP, RSV (0), ATYP, BND.ADDR, BND.PORT. `bound` is an
 * AF_INET (sockaddr_in) or AF_INET6 (sockaddr_in6) address; NULL or any
 * other family is sent as 0.0.0.0:0. Returns the length (10 or 22), or 0 if
 * it does not fit in outlen. */
size_t socks5_reply(uint8_t *out, size_t outlen, uint8_t rep,
    const struct sockaddr *bound);

/* The REP code for a forward stream's error code (PROTO_FWD_*, proto-fwd.h):
 * ok -> SUCCEEDED, refused -> REFUSED, unreachable and name ->
 * HOST_UNREACHABLE, denied -> NOT_ALLOWED, timeout -> TTL_EXPIRED, anything
 * else -> GENERAL_FAILURE. */
uint8_t socks5_rep_from_fwd_error(uint64_t code);

/* The header in front of each datagram between a UDP ASSOCIATE's client
 * and its relay (RFC 1928 section 7): RSV (2 bytes, 0), FRAG, ATYP,
 * DST.ADDR, DST.PORT, then the payload. */
struct socks5_udp_header {
	uint8_t frag;   /* 0: a whole datagram; else a fragment's number */
	uint8_t atyp;   /* SOCKS5_ATYP_*: how the address is written */
	char host[256]; /* NUL-terminated, as in struct socks5_request */
	uint16_t port;
};

/* The longest header: a 255-byte domain. */
#define SOCKS5_UDP_HEADER_MAX (4 + 1 + 255 + 2)

/* A datagram's header, the datagram being whole: returns the header's
 * length (the payload follows it), or SOCKS5_MALFORMED when it is cut
 * short, RSV is not 0, ATYP is unknown, the domain is bad (as for a
 * request) or DST.PORT is 0. FRAG is reported, not judged: the relay
 * drops fragments. *h is written only on success. */
long socks5_udp_decode(const uint8_t *in, size_t len,
    struct socks5_udp_header *h);
/* The header for `h` (RSV 0): its ATYP says how host is written (IPv4 or
 * IPv6 text, or a domain valid as for a request). Returns its length, or
 * 0 if it does not fit in outlen or socks5_udp_decode would refuse it. */
size_t socks5_udp_encode(uint8_t *out, size_t outlen,
    const struct socks5_udp_header *h);

#endif

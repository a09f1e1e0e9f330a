/* IP packets as carried through the tunnel: header checks and ICMP/ICMPv6
 * "packet too big" generation. Pure functions over byte buffers. */
#ifndef ROVE_IPPKT_H
#define ROVE_IPPKT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"

#define IPPKT_MIN_MTU6 1280
#define IPPKT_MIN_MTU4 576

struct ippkt_info {
	int family; /* AF_INET or AF_INET6 */
	struct ipaddr src;
	struct ipaddr dst;
	uint8_t proto;  /* IPv4 protocol or IPv6 next header */
	size_t len;     /* total length from the header (<= buffer length) */
	bool df;        /* IPv4 don't-fragment bit; always true for IPv6 */
};

enum ippkt_error {
	IPPKT_OK = 0,
	IPPKT_ERR_SHORT = -1,    /* shorter than the fixed header */
	IPPKT_ERR_VERSION = -2,  /* not 4 or 6 */
	IPPKT_ERR_HEADER = -3,   /* IPv4 IHL < 5 or beyond the buffer */
	IPPKT_ERR_LENGTH = -4,   /* total/payload length beyond the buffer */
};

/* Validate the IP header of `pkt` and fill `info`. Trailing bytes after
 * the length the header states are tolerated (info->len excludes them). */
enum ippkt_error ippkt_parse(const uint8_t *pkt, size_t len, struct ippkt_info *info);

/* Build an ICMPv4 "fragmentation needed" (type 3 code 4) or ICMPv6 "packet
 * too big" (type 2) answering `pkt`, from `from` to pkt's source, carrying
 * `mtu`. It quotes as much of `pkt` as fits in 576 (v4) or 1280 (v6) bytes.
 * Checksums are filled in. Returns the length written to `out`, or 0 when
 * no answer is due (an ICMP error, a non-first fragment, a multicast or
 * unspecified source) or `outlen` is too small. */
size_t ippkt_make_ptb(const uint8_t *pkt, size_t len, const struct ipaddr *from,
    uint32_t mtu, uint8_t *out, size_t outlen);

/* The Internet checksum (RFC 1071) of `len` bytes, continuing from
 * `partial` (0 to start); returns the folded, complemented sum. */
uint16_t ippkt_checksum(const void *data, size_t len, uint32_t partial);
/* The pieces of it, for sums over several parts (a pseudo-header, then
 * headers, then payload): add `len` bytes of 16-bit big-endian words to
 * `sum` (only the last part may have an odd length); fold the sum to 16
 * bits, not complemented. */
uint64_t ippkt_csum_add(uint64_t sum, const void *data, size_t len);
uint16_t ippkt_csum_fold(uint64_t sum);

#endif

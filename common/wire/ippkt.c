/* IP header checks and ICMP/ICMPv6 "packet too big" answers for the TUN path. */
#include <string.h>
#include <sys/socket.h>

#include "base/bytes.h"
#include "ippkt.h"

#define IP4_HDRLEN 20
#define IP6_HDRLEN 40
#define ICMP_HDRLEN 8

#define IP4_PROTO_ICMP 1
#define IP6_NH_HOPOPTS 0
#define IP6_NH_ROUTING 43
#define IP6_NH_FRAGMENT 44
#define IP6_NH_AH 51
#define IP6_NH_ICMP6 58
#define IP6_NH_DSTOPTS 60

/*
 * The smallest MTU each family allows (RFC 791: every IPv4 module must pass
 * 68 bytes unfragmented; RFC 8200: IPv6 links carry 1280). A "packet too
 * big" never advertises less, or the sender would be asked for the
 * impossible.
 */
#define IP4_LINK_MIN_MTU 68

/*
 * The one's complement sum does not depend on byte order (RFC 1071, 2(B)),
 * so the bulk is summed as the 32-bit halves of native 64-bit loads, whose
 * carries collect in the accumulator's upper half, and the folded result is
 * swapped into the big-endian words the callers chain, once. Word by word
 * this was the tunnel's hottest function: every segment split from a TUN
 * super-packet and every one coalesced for the TUN is summed in full.
 */
uint64_t
ippkt_csum_add(uint64_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t acc = 0;
	uint64_t w[4];

	while (len >= sizeof w) {
		memcpy(w, p, sizeof w);
		acc += (w[0] & 0xffffffff) + (w[0] >> 32) +
		    (w[1] & 0xffffffff) + (w[1] >> 32) +
		    (w[2] & 0xffffffff) + (w[2] >> 32) +
		    (w[3] & 0xffffffff) + (w[3] >> 32);
		p += sizeof w;
		len -= sizeof w;
	}
	while (len >= sizeof w[0]) {
		memcpy(w, p, sizeof w[0]);
		acc += (w[0] & 0xffffffff) + (w[0] >> 32);
		p += sizeof w[0];
		len -= sizeof w[0];
	}
	if (acc != 0) {
		uint16_t folded = ippkt_csum_fold(acc);

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		folded = __builtin_bswap16(folded);
#endif
		sum += folded;
	}
	/* An odd final byte is the high half of a word padded with zero
	 * (RFC 1071). */
	while (len >= 2) {
		sum += be16_get(p);
		p += 2;
		len -= 2;
	}
	if (len == 1)
		sum += (uint64_t)p[0] << 8;
	return sum;
}

uint16_t
ippkt_csum_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/*
 * `partial` is an uncomplemented running sum of 16-bit words, for example
 * the pseudo-header's, or the complement of an earlier call's result. Every
 * chunk but the last must have an even length for the chain to be correct.
 */
uint16_t
ippkt_checksum(const void *data, size_t len, uint32_t partial)
{
	return (uint16_t)~ippkt_csum_fold(ippkt_csum_add(partial, data, len));
}

enum ippkt_error
ippkt_parse(const uint8_t *pkt, size_t len, struct ippkt_info *info)
{
	size_t hlen, total;

	memset(info, 0, sizeof *info);
	if (len < 1)
		return IPPKT_ERR_SHORT;

	switch (pkt[0] >> 4) {
	case 4:
		if (len < IP4_HDRLEN)
			return IPPKT_ERR_SHORT;
		hlen = (size_t)(pkt[0] & 0x0f) * 4;
		if (hlen < IP4_HDRLEN || hlen > len)
			return IPPKT_ERR_HEADER;
		total = be16_get(pkt + 2);
		/* A total length shorter than the header is as wrong as one
		 * running past the buffer: either way the length lies. */
		if (total < hlen || total > len)
			return IPPKT_ERR_LENGTH;
		info->family = AF_INET;
		info->src.family = AF_INET;
		memcpy(info->src.b, pkt + 12, 4);
		info->dst.family = AF_INET;
		memcpy(info->dst.b, pkt + 16, 4);
		info->proto = pkt[9];
		info->len = total;
		info->df = (be16_get(pkt + 6) & 0x4000) != 0;
		return IPPKT_OK;
	case 6:
		if (len < IP6_HDRLEN)
			return IPPKT_ERR_SHORT;
		/* A payload length of 0 would mean a jumbogram (RFC 2675),
		 * which a TUN MTU never allows; it is read as an empty
		 * payload. */
		total = IP6_HDRLEN + (size_t)be16_get(pkt + 4);
		if (total > len)
			return IPPKT_ERR_LENGTH;
		info->family = AF_INET6;
		info->src.family = AF_INET6;
		memcpy(info->src.b, pkt + 8, 16);
		info->dst.family = AF_INET6;
		memcpy(info->dst.b, pkt + 24, 16);
		info->proto = pkt[6];
		info->len = total;
		info->df = true;
		return IPPKT_OK;
	default:
		return IPPKT_ERR_VERSION;
	}
}

/* Whether an IPv4 packet must not be answered with an ICMP error (RFC 1122
 * 3.2.2, RFC 1812 4.3.2.7). */
static bool
ip4_no_answer(const uint8_t *pkt, const struct ippkt_info *info)
{
	static const uint8_t bcast[4] = { 255, 255, 255, 255 };
	size_t hlen = (size_t)(pkt[0] & 0x0f) * 4;
	const uint8_t *src = info->src.b, *dst = info->dst.b;
	uint8_t type;

	/* Only the first fragment carries the upper-layer header, so only
	 * it can be told apart from an ICMP error. */
	if ((be16_get(pkt + 6) & 0x1fff) != 0)
		return true;
	/* The source must name one host we can answer. */
	if (memcmp(src, "\0\0\0\0", 4) == 0 || (src[0] & 0xf0) == 0xe0 ||
	    memcmp(src, bcast, 4) == 0)
		return true;
	/* Nor is a datagram sent to a group or to everyone answered. */
	if ((dst[0] & 0xf0) == 0xe0 || memcmp(dst, bcast, 4) == 0)
		return true;
	if (info->proto != IP4_PROTO_ICMP)
		return false;
	/* Without its type byte an ICMP message might be an error. */
	if (info->len <= hlen)
		return true;
	type = pkt[hlen];
	return type == 3 || type == 4 || type == 5 || type == 11 || type == 12;
}

/*
 * Whether an IPv6 packet must not be answered (RFC 4443 2.4 (e)). The
 * extension header chain is walked to find the upper layer, so an ICMPv6
 * error behind hop-by-hop, routing, destination options or AH headers is
 * still recognised. A chain that runs past the packet is not answered.
 * Fragments are answered, even non-first ones: an ICMPv6 error is never
 * fragmented (it fits in 1280 bytes), and the sender needs the MTU.
 * Multicast destinations are answered too: RFC 4443 makes "packet too big"
 * the exception so that path MTU discovery works for multicast.
 */
static bool
ip6_no_answer(const uint8_t *pkt, const struct ippkt_info *info)
{
	static const uint8_t zero[16];
	size_t off = IP6_HDRLEN, hlen;
	uint8_t nh = info->proto;

	if (memcmp(info->src.b, zero, 16) == 0 || info->src.b[0] == 0xff)
		return true;

	for (;;) {
		switch (nh) {
		case IP6_NH_HOPOPTS:
		case IP6_NH_ROUTING:
		case IP6_NH_DSTOPTS:
			if (info->len - off < 2)
				return true;
			hlen = ((size_t)pkt[off + 1] + 1) * 8;
			break;
		case IP6_NH_AH:
			if (info->len - off < 2)
				return true;
			hlen = ((size_t)pkt[off + 1] + 2) * 4;
			break;
		case IP6_NH_FRAGMENT:
			if (info->len - off < 8)
				return true;
			/* A later fragment holds no upper-layer header. */
			if ((be16_get(pkt + off + 2) & 0xfff8) != 0)
				return false;
			hlen = 8;
			break;
		case IP6_NH_ICMP6:
			/* Types below 128 are errors; a missing type byte
			 * might be one. */
			if (info->len - off < 1)
				return true;
			return pkt[off] < 128;
		default:
			/* An upper layer other than ICMPv6, or one we cannot
			 * look into (ESP, no next header). */
			return false;
		}
		if (hlen > info->len - off)
			return true;
		nh = pkt[off];
		off += hlen;
	}
}

static size_t
ptb4(const uint8_t *pkt, const struct ippkt_info *info,
    const struct ipaddr *from, uint32_t mtu, uint8_t *out, size_t outlen)
{
	size_t quote, total;
	uint8_t *icmp;

	quote = info->len;
	if (quote > IPPKT_MIN_MTU4 - IP4_HDRLEN - ICMP_HDRLEN)
		quote = IPPKT_MIN_MTU4 - IP4_HDRLEN - ICMP_HDRLEN;
	total = IP4_HDRLEN + ICMP_HDRLEN + quote;
	if (outlen < total)
		return 0;
	if (mtu < IP4_LINK_MIN_MTU)
		mtu = IP4_LINK_MIN_MTU;
	if (mtu > 0xffff)
		mtu = 0xffff;

	/* The quote moves first, so `out` may be the packet's own buffer. */
	memmove(out + IP4_HDRLEN + ICMP_HDRLEN, pkt, quote);
	memset(out, 0, IP4_HDRLEN + ICMP_HDRLEN);
	out[0] = 0x45;
	be16_put(out + 2, (uint16_t)total);
	/* Identification 0 and DF clear: the answer is at most 576 bytes,
	 * which every IPv4 path carries. */
	out[8] = 64;
	out[9] = IP4_PROTO_ICMP;
	memcpy(out + 12, from->b, 4);
	memcpy(out + 16, info->src.b, 4);
	be16_put(out + 10, ippkt_checksum(out, IP4_HDRLEN, 0));

	icmp = out + IP4_HDRLEN;
	icmp[0] = 3;
	icmp[1] = 4;
	be16_put(icmp + 6, (uint16_t)mtu);
	be16_put(icmp + 2, ippkt_checksum(icmp, ICMP_HDRLEN + quote, 0));
	return total;
}

static size_t
ptb6(const uint8_t *pkt, const struct ippkt_info *info,
    const struct ipaddr *from, uint32_t mtu, uint8_t *out, size_t outlen)
{
	uint8_t pseudo[IP6_HDRLEN];
	size_t quote, total, icmplen;
	uint8_t *icmp;
	uint16_t sum;

	quote = info->len;
	if (quote > IPPKT_MIN_MTU6 - IP6_HDRLEN - ICMP_HDRLEN)
		quote = IPPKT_MIN_MTU6 - IP6_HDRLEN - ICMP_HDRLEN;
	icmplen = ICMP_HDRLEN + quote;
	total = IP6_HDRLEN + icmplen;
	if (outlen < total)
		return 0;
	if (mtu < IPPKT_MIN_MTU6)
		mtu = IPPKT_MIN_MTU6;

	memmove(out + IP6_HDRLEN + ICMP_HDRLEN, pkt, quote);
	memset(out, 0, IP6_HDRLEN + ICMP_HDRLEN);
	out[0] = 0x60;
	be16_put(out + 4, (uint16_t)icmplen);
	out[6] = IP6_NH_ICMP6;
	out[7] = 64;
	memcpy(out + 8, from->b, 16);
	memcpy(out + 24, info->src.b, 16);

	icmp = out + IP6_HDRLEN;
	icmp[0] = 2;
	icmp[1] = 0;
	be32_put(icmp + 4, mtu);

	/* RFC 8200 8.1: source, destination, upper-layer length (32 bits),
	 * three zero bytes, next header. */
	memset(pseudo, 0, sizeof pseudo);
	memcpy(pseudo, out + 8, 32);
	be32_put(pseudo + 32, (uint32_t)icmplen);
	pseudo[39] = IP6_NH_ICMP6;
	sum = ippkt_checksum(pseudo, sizeof pseudo, 0);
	be16_put(icmp + 2, ippkt_checksum(icmp, icmplen, (uint16_t)~sum));
	return total;
}

size_t
ippkt_make_ptb(const uint8_t *pkt, size_t len, const struct ipaddr *from,
    uint32_t mtu, uint8_t *out, size_t outlen)
{
	struct ippkt_info info;

	if (pkt == NULL || from == NULL || out == NULL)
		return 0;
	if (ippkt_parse(pkt, len, &info) != IPPKT_OK)
		return 0;
	/* The answer leaves from our own address in the packet's family. */
	if (from->family != info.family)
		return 0;
	if (info.family == AF_INET) {
		if (ip4_no_answer(pkt, &info))
			return 0;
		return ptb4(pkt, &info, from, mtu, out, outlen);
	}
	if (ip6_no_answer(pkt, &info))
		return 0;
	return ptb6(pkt, &info, from, mtu, out, outlen);
}

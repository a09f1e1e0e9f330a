/* Unit tests for tun/offload.c: splitting TSO/USO super-packets and
 * coalescing segments, against hand-built packets whose checksums are
 * verified by an independent computation. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "tun/offload.h"

#define FIN 0x01
#define SYN 0x02
#define RST 0x04
#define PSH 0x08
#define ACK 0x10
#define URG 0x20
#define ECE 0x40
#define CWR 0x80

static uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
wr16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* RFC 1071 written out plainly over a contiguous buffer: the reference
 * for every checksum the module produces. */
static uint16_t
ref_sum(const uint8_t *p, size_t len)
{
	uint32_t s = 0;

	for (size_t i = 0; i < len; i++)
		s += (i % 2 == 0) ? (uint32_t)p[i] << 8 : p[i];
	while (s > 0xffff)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* Pseudo-header followed by the transport segment, in one buffer. */
static size_t
ref_pseudo(uint8_t *out, const uint8_t *ip)
{
	size_t iphl, l4len, n = 0;
	uint8_t proto;

	if (ip[0] >> 4 == 4) {
		iphl = (size_t)(ip[0] & 15) * 4;
		l4len = rd16(ip + 2) - iphl;
		proto = ip[9];
		memcpy(out, ip + 12, 8);
		n = 8;
		out[n++] = 0;
		out[n++] = proto;
		wr16(out + n, (uint32_t)l4len);
		n += 2;
	} else {
		iphl = 40;
		l4len = rd16(ip + 4);
		proto = ip[6];
		memcpy(out, ip + 8, 32);
		n = 32;
		wr32(out + n, (uint32_t)l4len);
		n += 4;
		memset(out + n, 0, 3);
		out[n + 3] = proto;
		n += 4;
	}
	memcpy(out + n, ip + iphl, l4len);
	return n + l4len;
}

static uint8_t scratch[70000];

/* True when the packet's transport checksum verifies. */
static bool
l4_ok(const uint8_t *ip)
{
	return ref_sum(scratch, ref_pseudo(scratch, ip)) == 0xffff;
}

static bool
ip4_ok(const uint8_t *ip)
{
	return ref_sum(ip, (size_t)(ip[0] & 15) * 4) == 0xffff;
}

struct pk {
	int v6;
	uint8_t proto;      /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP */
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t win, id;
	uint8_t ttl, tos;
	uint32_t flow;      /* IPv6 flow label */
	const uint8_t *opt; /* TCP options, a multiple of 4 bytes */
	size_t optlen;
	size_t plen;
	uint8_t fill;       /* payload byte i is fill + i */
	size_t ipopt;       /* IPv4 option bytes (multiple of 4) */
	uint16_t frag;      /* IPv4 flags+offset; DF by default */
	bool nodf;          /* IPv4: no DF, no fragment */
	bool nocsum;        /* UDP: leave the checksum zero */
};

static const uint8_t ts1[12] = { 1, 1, 8, 10, 0, 0, 0, 100, 0, 0, 0, 50 };
static const uint8_t ts2[12] = { 1, 1, 8, 10, 0, 0, 0, 101, 0, 0, 0, 50 };
static const uint8_t sack[12] = { 1, 1, 5, 10, 0, 0, 0x10, 0, 0, 0, 0x20, 0 };

/* Build a packet with valid checksums; returns its length. */
static size_t
build(uint8_t *b, const struct pk *k)
{
	size_t iphl = k->v6 ? 40 : 20 + k->ipopt;
	size_t l4h = k->proto == IPPROTO_TCP ? 20 + k->optlen : 8;
	size_t len = iphl + l4h + k->plen;
	uint8_t *l4 = b + iphl;

	memset(b, 0, iphl + l4h);
	if (k->v6) {
		wr32(b, 6u << 28 | (uint32_t)k->tos << 20 | k->flow);
		wr16(b + 4, (uint32_t)(len - 40));
		b[6] = k->proto;
		b[7] = k->ttl ? k->ttl : 64;
		inet_pton(AF_INET6, "fd00:77::2", b + 8);
		inet_pton(AF_INET6, "fd00:77::1", b + 24);
	} else {
		b[0] = (uint8_t)(0x40 | iphl / 4);
		b[1] = k->tos;
		wr16(b + 2, (uint32_t)len);
		wr16(b + 4, k->id);
		wr16(b + 6, k->nodf ? 0 : k->frag ? k->frag : 0x4000);
		b[8] = k->ttl ? k->ttl : 64;
		b[9] = k->proto;
		inet_pton(AF_INET, "198.19.77.2", b + 12);
		inet_pton(AF_INET, "198.19.10.2", b + 16);
		memset(b + 20, 1, k->ipopt); /* NOPs */
		wr16(b + 10, (uint16_t)~ref_sum(b, iphl));
	}
	wr16(l4, k->sport ? k->sport : 40000);
	wr16(l4 + 2, k->dport ? k->dport : 5201);
	for (size_t i = 0; i < k->plen; i++)
		l4[l4h + i] = (uint8_t)(k->fill + i);
	if (k->proto == IPPROTO_TCP) {
		wr32(l4 + 4, k->seq);
		wr32(l4 + 8, k->ack);
		l4[12] = (uint8_t)(l4h / 4 << 4);
		l4[13] = k->flags;
		wr16(l4 + 14, k->win ? k->win : 512);
		if (k->optlen > 0)
			memcpy(l4 + 20, k->opt, k->optlen);
		wr16(l4 + 16, (uint16_t)~ref_sum(scratch, ref_pseudo(scratch, b)));
	} else if (k->proto == IPPROTO_UDP) {
		uint16_t c;

		wr16(l4 + 4, (uint32_t)(l4h + k->plen));
		c = (uint16_t)~ref_sum(scratch, ref_pseudo(scratch, b));
		if (!k->nocsum)
			wr16(l4 + 6, c == 0 ? 0xffff : c);
	} else {
		l4[0] = 8; /* ICMP echo request */
	}
	return len;
}

/* A packet in a malloc'd buffer of exactly 1 + len bytes (the headroom
 * byte first), so ASan catches any access outside it. */
static uint8_t *
alloc_pkt(const struct pk *k, size_t *len)
{
	static uint8_t tmp[70000];
	uint8_t *b;

	*len = build(tmp, k);
	b = malloc(1 + *len);
	assert_non_null(b);
	memcpy(b + 1, tmp, *len);
	return b;
}

static struct virtio_net_hdr
vhdr(uint8_t type, uint16_t gso, uint16_t start, uint16_t off)
{
	struct virtio_net_hdr h;

	memset(&h, 0, sizeof h);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h.gso_type = type;
	h.gso_size = gso;
	h.csum_start = start;
	h.csum_offset = off;
	return h;
}

/* Split and compare with the packets `want` describes (each built the
 * same way); also write the headroom byte as tunnel_send would. */
static void
split_expect(uint8_t *pkt, size_t len, const struct virtio_net_hdr *h,
    size_t max, const struct pk *want, size_t nwant)
{
	static uint8_t exp[70000];
	struct offload_seg s;
	size_t n, i = 0;
	uint8_t *p;

	assert_int_equal(offload_seg_init(&s, h, pkt, len, max), 0);
	while ((p = offload_seg_next(&s, &n)) != NULL) {
		assert_true(i < nwant);
		p[-1] = 0;
		assert_int_equal(n, build(exp, &want[i]));
		assert_memory_equal(p, exp, n);
		if (p[0] >> 4 == 4)
			assert_true(ip4_ok(p));
		assert_true(l4_ok(p));
		i++;
	}
	assert_int_equal(i, nwant);
}

static void
test_seg_tcp4(void **state)
{
	struct pk k = { .proto = IPPROTO_TCP, .seq = 1000, .ack = 77,
	    .flags = ACK | PSH | FIN | CWR | ECE, .id = 0xfffe, .opt = ts1,
	    .optlen = 12, .plen = 2500 };
	struct pk w[3];
	struct virtio_net_hdr h;
	uint8_t *b;
	size_t len;

	(void)state;
	b = alloc_pkt(&k, &len);
	/* The kernel leaves the pseudo-header sum there; we never rely on it. */
	wr16(b + 1 + 20 + 16, 0x1234);
	h = vhdr(VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN, 1000, 20, 16);
	h.hdr_len = 52;
	for (int i = 0; i < 3; i++) {
		w[i] = k;
		w[i].seq = 1000 + 1000u * (unsigned)i;
		w[i].id = (uint16_t)(0xfffe + i);   /* wraps to 0 */
		w[i].plen = i < 2 ? 1000 : 500;
		w[i].fill = (uint8_t)(1000 * i);
	}
	/* CWR on the first only, FIN and PSH on the last only, ECE on all. */
	w[0].flags = ACK | CWR | ECE;
	w[1].flags = ACK | ECE;
	w[2].flags = ACK | ECE | PSH | FIN;
	split_expect(b + 1, len, &h, 1380, w, 3);
	free(b);
}

static void
test_seg_tcp6_sack(void **state)
{
	struct pk k = { .v6 = 1, .proto = IPPROTO_TCP, .seq = 0xfffffc00,
	    .ack = 5, .flags = ACK | PSH, .opt = sack, .optlen = 12, .plen = 2400,
	    .flow = 0x12345 };
	struct pk w[2];
	struct virtio_net_hdr h = vhdr(VIRTIO_NET_HDR_GSO_TCPV6, 1200, 40, 16);
	uint8_t *b;
	size_t len;

	(void)state;
	b = alloc_pkt(&k, &len);
	for (int i = 0; i < 2; i++) {
		w[i] = k;
		w[i].seq = 0xfffffc00 + 1200u * (unsigned)i; /* wraps */
		w[i].plen = 1200;
		w[i].fill = (uint8_t)(1200 * i);
		w[i].flags = i == 1 ? ACK | PSH : ACK;
	}
	split_expect(b + 1, len, &h, 1380, w, 2);
	free(b);
}

/* Headers 52 bytes: gso_size 1328 fills a 1380-byte packet exactly; at a
 * 1379-byte maximum the same packet is cut into 1327-byte segments. */
static void
test_seg_max_edges(void **state)
{
	struct pk k = { .proto = IPPROTO_TCP, .seq = 1, .flags = ACK,
	    .opt = ts1, .optlen = 12, .plen = 2656, .id = 9 };
	struct pk w[3];
	struct virtio_net_hdr h = vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1328, 20, 16);
	uint8_t *b;
	size_t len;

	(void)state;
	for (int i = 0; i < 2; i++) {
		w[i] = k;
		w[i].seq = 1 + 1328u * (unsigned)i;
		w[i].id = (uint16_t)(9 + i);
		w[i].plen = 1328;
		w[i].fill = (uint8_t)(1328 * i);
	}
	b = alloc_pkt(&k, &len);
	split_expect(b + 1, len, &h, 1380, w, 2);
	free(b);

	for (int i = 0; i < 3; i++) {
		w[i] = k;
		w[i].seq = 1 + 1327u * (unsigned)i;
		w[i].id = (uint16_t)(9 + i);
		w[i].plen = i < 2 ? 1327 : 2;
		w[i].fill = (uint8_t)(1327 * i);
	}
	b = alloc_pkt(&k, &len);
	split_expect(b + 1, len, &h, 1379, w, 3);
	free(b);
}

/* A 64 KB super-packet whose gso_size the DATAGRAM cannot carry. */
static void
test_seg_resegment(void **state)
{
	struct pk k = { .proto = IPPROTO_TCP, .seq = 7, .flags = ACK | PSH,
	    .plen = 65495, .id = 1 };
	static struct pk w[49];
	struct virtio_net_hdr h = vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1448, 20, 16);
	uint8_t *b;
	size_t len;

	(void)state;
	for (int i = 0; i < 49; i++) {
		w[i] = k;
		w[i].seq = 7 + 1340u * (unsigned)i;
		w[i].id = (uint16_t)(1 + i);
		w[i].plen = i < 48 ? 1340 : 1175;
		w[i].fill = (uint8_t)(1340 * i);
		w[i].flags = i < 48 ? ACK : ACK | PSH;
	}
	b = alloc_pkt(&k, &len);
	assert_int_equal(len, 65535);
	split_expect(b + 1, len, &h, 1380, w, 49);
	free(b);
}

static void
test_seg_uso(void **state)
{
	struct pk k = { .proto = IPPROTO_UDP, .plen = 2500, .id = 40 };
	struct pk w[3];
	struct virtio_net_hdr h = vhdr(VIRTIO_NET_HDR_GSO_UDP_L4, 1000, 20, 6);
	uint8_t *b;
	size_t len;

	(void)state;
	for (int v6 = 0; v6 < 2; v6++) {
		k.v6 = v6;
		h.csum_start = v6 ? 40 : 20;
		for (int i = 0; i < 3; i++) {
			w[i] = k;
			w[i].id = (uint16_t)(40 + i);
			w[i].plen = i < 2 ? 1000 : 500;
			w[i].fill = (uint8_t)(1000 * i);
		}
		b = alloc_pkt(&k, &len);
		/* USO datagrams keep their size even over the maximum. */
		split_expect(b + 1, len, &h, 900, w, 3);
		free(b);
	}
}

/* A UDP datagram whose checksum computes to zero goes out as 0xffff. */
static void
test_seg_udp_zero_csum(void **state)
{
	struct pk k = { .proto = IPPROTO_UDP, .plen = 100, .id = 3 };
	static uint8_t b[1 + 200];
	struct virtio_net_hdr h = vhdr(VIRTIO_NET_HDR_GSO_UDP_L4, 100, 20, 6);
	struct offload_seg s;
	uint8_t *p, *pay;
	size_t len, n;

	(void)state;
	len = build(b + 1, &k);
	pay = b + 1 + 28;
	/* Make the last two payload bytes cancel the sum exactly. */
	pay[98] = pay[99] = 0;
	wr16(b + 1 + 26, 0);
	wr16(pay + 98, (uint16_t)~ref_sum(scratch, ref_pseudo(scratch, b + 1)));
	assert_int_equal(ref_sum(scratch, ref_pseudo(scratch, b + 1)), 0xffff);
	assert_int_equal(offload_seg_init(&s, &h, b + 1, len, 1380), 0);
	p = offload_seg_next(&s, &n);
	assert_non_null(p);
	assert_int_equal(n, len);
	assert_int_equal(rd16(p + 26), 0xffff);
	assert_null(offload_seg_next(&s, &n));
}

/* GSO_NONE with NEEDS_CSUM: the checksum is completed in place. */
static void
test_seg_csum_only(void **state)
{
	struct pk t4 = { .proto = IPPROTO_TCP, .seq = 5, .flags = ACK, .plen = 301 };
	struct pk u6 = { .v6 = 1, .proto = IPPROTO_UDP, .plen = 77 };
	static uint8_t b[1 + 2000], want[2000];
	struct virtio_net_hdr h;
	struct offload_seg s;
	size_t len, n;
	uint8_t *p;

	(void)state;
	len = build(want, &t4);
	memcpy(b + 1, want, len);
	/* What the kernel leaves: the folded pseudo-header sum. */
	wr16(b + 1 + 36, 0);
	{
		uint8_t ph[12];

		memcpy(ph, b + 1 + 12, 8);
		ph[8] = 0;
		ph[9] = 6;
		wr16(ph + 10, (uint32_t)(len - 20));
		wr16(b + 1 + 36, ref_sum(ph, 12));
	}
	h = vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 20, 16);
	assert_int_equal(offload_seg_init(&s, &h, b + 1, len, 1380), 0);
	p = offload_seg_next(&s, &n);
	assert_ptr_equal(p, b + 1);
	assert_int_equal(n, len);
	assert_memory_equal(p, want, len);
	assert_null(offload_seg_next(&s, &n));

	len = build(want, &u6);
	memcpy(b + 1, want, len);
	{
		uint8_t ph[40];

		memcpy(ph, b + 1 + 8, 32);
		wr32(ph + 32, (uint32_t)(len - 40));
		wr32(ph + 36, 17);
		wr16(b + 1 + 46, ref_sum(ph, 40));
	}
	h = vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 40, 6);
	assert_int_equal(offload_seg_init(&s, &h, b + 1, len, 1380), 0);
	p = offload_seg_next(&s, &n);
	assert_int_equal(n, len);
	assert_memory_equal(p, want, len);
	assert_true(l4_ok(p));

	/* No flags: passed on untouched, even a non-IP packet. */
	memset(&h, 0, sizeof h);
	memset(b + 1, 0xee, 50);
	assert_int_equal(offload_seg_init(&s, &h, b + 1, 50, 1380), 0);
	p = offload_seg_next(&s, &n);
	assert_ptr_equal(p, b + 1);
	assert_int_equal(n, 50);
	assert_null(offload_seg_next(&s, &n));
}

/* Headers the packet does not bear out are refused, never acted on. */
static void
test_seg_malformed(void **state)
{
	struct pk t4 = { .proto = IPPROTO_TCP, .flags = ACK, .plen = 3000 };
	struct pk t6 = { .v6 = 1, .proto = IPPROTO_TCP, .flags = ACK, .plen = 3000 };
	struct pk u4 = { .proto = IPPROTO_UDP, .plen = 3000 };
	struct pk ic = { .proto = IPPROTO_ICMP, .plen = 100 };
	static uint8_t b4[4000], b6[4000], bu[4000], bi[400];
	size_t l4 = build(b4, &t4), l6 = build(b6, &t6), lu = build(bu, &u4),
	    li = build(bi, &ic);
	struct offload_seg s;
	struct {
		uint8_t *pkt;
		size_t len;
		struct virtio_net_hdr h;
	} bad[] = {
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_TCPV6, 1000, 20, 16) },
		{ b6, l6, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 40, 16) },
		{ bu, lu, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 20, 16) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_UDP_L4, 1000, 20, 6) },
		{ bu, lu, vhdr(VIRTIO_NET_HDR_GSO_UDP_L4 | VIRTIO_NET_HDR_GSO_ECN, 1000, 20, 6) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_UDP, 1000, 20, 6) },   /* UFO */
		{ b4, l4, vhdr(2, 1000, 20, 16) },                      /* unknown */
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 0, 20, 16) },  /* gso_size 0 */
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 19, 16) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 21, 16) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 20, 6) },
		{ b6, l6, vhdr(VIRTIO_NET_HDR_GSO_TCPV6, 1000, 20, 16) },
		{ b4, l4 - 1, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 20, 16) },
		{ b4, 39, vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 20, 16) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_NONE | VIRTIO_NET_HDR_GSO_ECN, 0, 20, 16) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 20, 6) },
		{ b4, l4, vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 16, 16) },
		{ bi, li, vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 20, 0xffff) },
		{ bi, li, vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 0xffff, 2) },
		{ bi, li, vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 10, 2) },
		{ bi, 10, vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 20, 2) },
	};
	struct virtio_net_hdr h;

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (offload_seg_init(&s, &bad[i].h, bad[i].pkt, bad[i].len, 1380) != -1)
			fail_msg("case %zu accepted", i);
	}
	/* GSO without NEEDS_CSUM, unknown flags, hdr_len beyond the packet. */
	h = vhdr(VIRTIO_NET_HDR_GSO_TCPV4, 1000, 20, 16);
	h.flags = 0;
	assert_int_equal(offload_seg_init(&s, &h, b4, l4, 1380), -1);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM | 4;
	assert_int_equal(offload_seg_init(&s, &h, b4, l4, 1380), -1);
	h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h.hdr_len = (uint16_t)(l4 + 1);
	assert_int_equal(offload_seg_init(&s, &h, b4, l4, 1380), -1);
	/* TCP data offset beyond the packet. */
	b4[20 + 12] = 0xf0;
	h.hdr_len = 0;
	wr16(b4 + 2, 60);
	assert_int_equal(offload_seg_init(&s, &h, b4, 60, 1380), -1);
	/* A USO length field that is not the super-packet's. */
	wr16(bu + 24, 1008);
	h = vhdr(VIRTIO_NET_HDR_GSO_UDP_L4, 1000, 20, 6);
	assert_int_equal(offload_seg_init(&s, &h, bu, lu, 1380), -1);
	/* An ICMP packet with a checksum to complete inside its bounds is
	 * fine (generic checksum offload). */
	h = vhdr(VIRTIO_NET_HDR_GSO_NONE, 0, 20, 2);
	assert_int_equal(offload_seg_init(&s, &h, bi, li, 1380), 0);
}

/* Coalescing: a record of every write. */
struct wrec {
	struct virtio_net_hdr h;
	uint8_t b[70000];
	size_t len, nsegs, seg_bytes;
	void *tag;
};

static struct wrec recs[8];
static size_t nrecs;

static void
capture(void *arg, const struct offload_write *w)
{
	struct wrec *r;
	size_t off = 0;

	(void)arg;
	assert_true(nrecs < sizeof recs / sizeof recs[0]);
	r = &recs[nrecs++];
	assert_int_equal(w->iov[0].iov_len, sizeof r->h);
	memcpy(&r->h, w->iov[0].iov_base, sizeof r->h);
	for (int i = 1; i < w->iovcnt; i++) {
		memcpy(r->b + off, w->iov[i].iov_base, w->iov[i].iov_len);
		off += w->iov[i].iov_len;
	}
	assert_int_equal(off, w->len);
	r->len = off;
	r->nsegs = w->nsegs;
	r->seg_bytes = w->seg_bytes;
	r->tag = w->tag;
}

static struct offload_coal *
coal(unsigned flags)
{
	nrecs = 0;
	return offload_coal_create(flags, capture, NULL);
}

static void
add(struct offload_coal *c, const struct pk *k, void *tag)
{
	static uint8_t b[70000];

	offload_coal_add(c, b, build(b, k), tag);
}

static bool
zero_hdr(const struct virtio_net_hdr *h)
{
	static const struct virtio_net_hdr z;

	return memcmp(h, &z, sizeof z) == 0;
}

/* Record r is exactly packet k, written as it came. */
static void
expect_plain(size_t r, const struct pk *k)
{
	static uint8_t b[70000];
	size_t n = build(b, k);

	assert_true(r < nrecs);
	assert_true(zero_hdr(&recs[r].h));
	assert_int_equal(recs[r].len, n);
	assert_memory_equal(recs[r].b, b, n);
	assert_int_equal(recs[r].nsegs, 1);
}

/* Record r is a super-packet of the packets `segs`: check its virtio
 * header and partial checksum, then split it again and expect exactly
 * the original packets back. */
static void
expect_super(size_t r, uint8_t type, const struct pk *segs, size_t n)
{
	static uint8_t b[70000], ph[70000];
	struct wrec *w = &recs[r];
	size_t iphl = segs[0].v6 ? 40 : 20, hl, bytes = 0, plen, phl;
	bool tcp = segs[0].proto == IPPROTO_TCP;
	uint16_t partial;

	assert_true(r < nrecs);
	assert_int_equal(w->nsegs, n);
	for (size_t i = 0; i < n; i++)
		bytes += build(b, &segs[i]);
	hl = iphl + (tcp ? 20 + segs[0].optlen : 8);
	assert_int_equal(w->seg_bytes, bytes);
	assert_int_equal(w->len, bytes - (n - 1) * hl);
	assert_int_equal(w->h.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
	assert_int_equal(w->h.gso_type, type);
	assert_int_equal(w->h.gso_size, segs[0].plen);
	assert_int_equal(w->h.hdr_len, hl);
	assert_int_equal(w->h.csum_start, iphl);
	assert_int_equal(w->h.csum_offset, tcp ? 16 : 6);
	if (!segs[0].v6) {
		assert_int_equal(rd16(w->b + 2), w->len);
		assert_true(ip4_ok(w->b));
	} else {
		assert_int_equal(rd16(w->b + 4), w->len - 40);
	}
	/* The partial checksum is the folded pseudo-header sum. */
	partial = rd16(w->b + iphl + (tcp ? 16 : 6));
	memcpy(b, w->b, w->len);
	phl = ref_pseudo(ph, b) - (w->len - iphl);
	assert_int_equal(partial, ref_sum(ph, phl));
	if (!tcp)
		assert_int_equal(rd16(w->b + iphl + 4), w->len - iphl);
	/* Round trip through the segmenter. */
	{
		struct pk want[OFFLOAD_MAX_SEGS];
		uint8_t *buf = malloc(1 + w->len);

		assert_non_null(buf);
		memcpy(buf + 1, w->b, w->len);
		plen = 0;
		for (size_t i = 0; i < n; i++) {
			want[i] = segs[i];
			plen += segs[i].plen;
		}
		(void)plen;
		split_expect(buf + 1, w->len, &w->h, 65535, want, n);
		free(buf);
	}
}

static struct pk
tseg(int v6, uint32_t seq, size_t plen, uint16_t id)
{
	struct pk k = { .v6 = v6, .proto = IPPROTO_TCP, .seq = seq, .ack = 99,
	    .flags = ACK, .opt = ts1, .optlen = 12, .plen = plen, .id = id,
	    .fill = (uint8_t)seq, .flow = 0xabcde };

	return k;
}

static void
test_coal_tcp4(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO | OFFLOAD_F_CSUM);
	struct pk s[4];
	int tag;

	(void)state;
	for (int i = 0; i < 4; i++)
		s[i] = tseg(0, 5000 + 1000u * (unsigned)i, 1000, (uint16_t)(0xffff + i));
	s[3].flags = ACK | PSH;
	for (int i = 0; i < 4; i++)
		add(c, &s[i], &tag);
	assert_int_equal(nrecs, 0);
	assert_int_equal(offload_coal_pending(c), 4);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 1);
	assert_ptr_equal(recs[0].tag, &tag);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV4, s, 4);
	assert_int_equal(recs[0].b[20 + 13], ACK | PSH);
	assert_int_equal(offload_coal_pending(c), 0);
	offload_coal_free(c);
}

static void
test_coal_tcp6_short_last(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk s[4];

	(void)state;
	s[0] = tseg(1, 1, 1200, 0);
	s[1] = tseg(1, 1201, 1200, 0);
	s[2] = tseg(1, 2401, 700, 0);
	s[3] = tseg(1, 3101, 1200, 0);
	for (int i = 0; i < 4; i++)
		add(c, &s[i], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 2);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV6, s, 3);
	expect_plain(1, &s[3]);
	offload_coal_free(c);
}

static void
test_coal_out_of_order(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk s[3] = { tseg(0, 1, 1000, 1), tseg(0, 2001, 1000, 3),
	    tseg(0, 1001, 1000, 2) };

	(void)state;
	for (int i = 0; i < 3; i++)
		add(c, &s[i], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 3);
	for (int i = 0; i < 3; i++)
		expect_plain((size_t)i, &s[i]);
	offload_coal_free(c);
}

static void
test_coal_interleaved(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk a[3], b[3];
	int ta, tb;

	(void)state;
	for (int i = 0; i < 3; i++) {
		a[i] = tseg(0, 1 + 1000u * (unsigned)i, 1000, (uint16_t)(10 + i));
		b[i] = tseg(1, 1 + 800u * (unsigned)i, 800, 0);
		b[i].sport = 40001;
	}
	for (int i = 0; i < 3; i++) {
		add(c, &a[i], &ta);
		add(c, &b[i], &tb);
	}
	offload_coal_flush(c);
	assert_int_equal(nrecs, 2);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV4, a, 3);
	assert_ptr_equal(recs[0].tag, &ta);
	expect_super(1, VIRTIO_NET_HDR_GSO_TCPV6, b, 3);
	assert_ptr_equal(recs[1].tag, &tb);
	offload_coal_free(c);
}

static void
test_coal_tcp_flags(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk s[3];

	(void)state;
	/* FIN ends a chain: it is the last segment. */
	for (int i = 0; i < 3; i++)
		s[i] = tseg(0, 1 + 100u * (unsigned)i, 100, (uint16_t)i);
	s[1].flags = ACK | FIN;
	for (int i = 0; i < 3; i++)
		add(c, &s[i], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 2);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV4, s, 2);
	assert_int_equal(recs[0].b[20 + 13], ACK | FIN);
	expect_plain(1, &s[2]);

	/* CWR ends a chain and starts one, marked GSO_ECN. */
	nrecs = 0;
	s[1].flags = ACK | CWR | ECE;
	s[2].flags = ACK | ECE;
	for (int i = 0; i < 3; i++)
		add(c, &s[i], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 2);
	expect_plain(0, &s[0]);
	expect_super(1, VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN, &s[1], 2);

	/* ECE differing, SYN, RST and URG: never merged. */
	static const uint8_t odd[] = { ACK | ECE, ACK | SYN, ACK | RST, ACK | URG };
	for (size_t f = 0; f < sizeof odd; f++) {
		nrecs = 0;
		s[0].flags = ACK;
		s[1].flags = odd[f];
		s[2].flags = ACK;
		for (int i = 0; i < 3; i++)
			add(c, &s[i], NULL);
		offload_coal_flush(c);
		assert_int_equal(nrecs, 3);
		for (int i = 0; i < 3; i++)
			expect_plain((size_t)i, &s[i]);
	}
	offload_coal_free(c);
}

static void
test_coal_tcp_options(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk s[2] = { tseg(0, 1, 500, 1), tseg(0, 501, 500, 2) };

	(void)state;
	/* A newer TSval: kept apart, as tcp_gro_receive does. */
	s[1].opt = ts2;
	add(c, &s[0], NULL);
	add(c, &s[1], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 2);
	expect_plain(0, &s[0]);
	expect_plain(1, &s[1]);

	/* Equal SACK blocks merge. */
	nrecs = 0;
	s[0].opt = s[1].opt = sack;
	add(c, &s[0], NULL);
	add(c, &s[1], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 1);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV4, s, 2);
	offload_coal_free(c);
}

/* Header rules of inet_gro_receive and ipv6_gro_receive. */
static void
test_coal_ip_rules(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk s[2];
	static uint8_t b[2000];
	size_t n;

	(void)state;
	for (int v = 0; v < 9; v++) {
		nrecs = 0;
		s[0] = tseg(v >= 6, 1, 500, 1);
		s[1] = tseg(v >= 6, 501, 500, 2);
		switch (v) {
		case 0: s[1].id = 3; break;           /* ID not incrementing */
		case 1: s[1].ttl = 63; break;
		case 2: s[1].tos = 4; break;
		case 3: s[1].nodf = true; break;      /* DF differs */
		case 4: s[0].ipopt = s[1].ipopt = 4; break;
		case 5: s[1].ack = 100; break;
		case 6: s[1].flow = 1; break;
		case 7: s[1].ttl = 1; break;          /* hop limit */
		case 8: s[1].win = 100; break;
		}
		add(c, &s[0], NULL);
		add(c, &s[1], NULL);
		offload_coal_flush(c);
		if (nrecs != 2)
			fail_msg("case %d: %zu writes", v, nrecs);
		expect_plain(0, &s[0]);
		expect_plain(1, &s[1]);
	}

	/* A fragment and a bad TCP checksum stay as they are. */
	nrecs = 0;
	s[0] = tseg(0, 1, 500, 1);
	s[0].frag = 0x2000;  /* MF */
	s[1] = tseg(0, 501, 500, 2);
	add(c, &s[0], NULL);
	n = build(b, &s[1]);
	b[n - 1] ^= 1;
	offload_coal_add(c, b, n, NULL);
	s[1] = tseg(0, 1001, 500, 3);
	add(c, &s[1], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 3);
	expect_plain(0, &s[0]);
	assert_true(zero_hdr(&recs[1].h));
	assert_memory_equal(recs[1].b, b, n);
	expect_plain(2, &s[1]);
	offload_coal_free(c);
}

/* A super-packet stays within 65535 bytes. */
static void
test_coal_max_total(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	static struct pk s[48];

	(void)state;
	for (int i = 0; i < 48; i++) {
		s[i] = tseg(0, 1 + 1400u * (unsigned)i, 1400, (uint16_t)i);
		s[i].opt = NULL;
		s[i].optlen = 0;
		add(c, &s[i], NULL);
	}
	offload_coal_flush(c);
	assert_int_equal(nrecs, 2);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV4, s, 46);
	assert_int_equal(recs[0].len, 40 + 46 * 1400);
	expect_super(1, VIRTIO_NET_HDR_GSO_TCPV4, &s[46], 2);
	offload_coal_free(c);
}

/* The batch holds OFFLOAD_BATCH packets; the next add writes them. */
static void
test_coal_batch_bound(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	static struct pk s[130];

	(void)state;
	for (int i = 0; i < 130; i++)
		s[i] = tseg(0, 1 + 100u * (unsigned)i, 100, (uint16_t)i);
	for (int i = 0; i < OFFLOAD_BATCH; i++)
		add(c, &s[i], NULL);
	assert_int_equal(nrecs, 0);
	add(c, &s[128], NULL);
	assert_int_equal(nrecs, 2);
	expect_super(0, VIRTIO_NET_HDR_GSO_TCPV4, s, 64);
	expect_super(1, VIRTIO_NET_HDR_GSO_TCPV4, &s[64], 64);
	add(c, &s[129], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 3);
	expect_super(2, VIRTIO_NET_HDR_GSO_TCPV4, &s[128], 2);
	offload_coal_free(c);
}

static void
test_coal_udp_and_others(void **state)
{
	struct offload_coal *c = coal(OFFLOAD_F_TSO);
	struct pk u[3], icmp = { .proto = IPPROTO_ICMP, .plen = 56 },
	    nocs = { .proto = IPPROTO_UDP, .plen = 100, .nocsum = true, .id = 7 };

	(void)state;
	for (int i = 0; i < 3; i++) {
		u[i] = (struct pk){ .proto = IPPROTO_UDP, .plen = i < 2 ? 1000 : 300,
		    .id = (uint16_t)(20 + i), .fill = (uint8_t)i };
	}
	/* Without USO: UDP and ICMP pass untouched. */
	add(c, &icmp, NULL);
	for (int i = 0; i < 3; i++)
		add(c, &u[i], NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 4);
	expect_plain(0, &icmp);
	for (int i = 0; i < 3; i++)
		expect_plain((size_t)i + 1, &u[i]);

	/* With USO: equal datagrams and a shorter last one merge. */
	nrecs = 0;
	offload_coal_set_flags(c, OFFLOAD_F_TSO | OFFLOAD_F_USO);
	for (int i = 0; i < 3; i++)
		add(c, &u[i], NULL);
	add(c, &icmp, NULL);
	add(c, &nocs, NULL);
	offload_coal_flush(c);
	assert_int_equal(nrecs, 3);
	expect_super(0, VIRTIO_NET_HDR_GSO_UDP_L4, u, 3);
	expect_plain(1, &icmp);
	expect_plain(2, &nocs);

	/* IPv6 too. */
	nrecs = 0;
	for (int i = 0; i < 3; i++) {
		u[i].v6 = 1;
		add(c, &u[i], NULL);
	}
	offload_coal_flush(c);
	assert_int_equal(nrecs, 1);
	expect_super(0, VIRTIO_NET_HDR_GSO_UDP_L4, u, 3);
	offload_coal_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seg_tcp4),
		cmocka_unit_test(test_seg_tcp6_sack),
		cmocka_unit_test(test_seg_max_edges),
		cmocka_unit_test(test_seg_resegment),
		cmocka_unit_test(test_seg_uso),
		cmocka_unit_test(test_seg_udp_zero_csum),
		cmocka_unit_test(test_seg_csum_only),
		cmocka_unit_test(test_seg_malformed),
		cmocka_unit_test(test_coal_tcp4),
		cmocka_unit_test(test_coal_tcp6_short_last),
		cmocka_unit_test(test_coal_out_of_order),
		cmocka_unit_test(test_coal_interleaved),
		cmocka_unit_test(test_coal_tcp_flags),
		cmocka_unit_test(test_coal_tcp_options),
		cmocka_unit_test(test_coal_ip_rules),
		cmocka_unit_test(test_coal_max_total),
		cmocka_unit_test(test_coal_batch_bound),
		cmocka_unit_test(test_coal_udp_and_others),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

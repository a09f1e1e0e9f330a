/* Unit tests for common/tunnel/tunnel.c: DATAGRAM decoding, drop counters, and
 * sending IP packets over a real connection pair (quic-pair.h). */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "transport/quic-pair.h"
#include "tunnel/tunnel.h"

#define ROUNDS 4000

/* An IPv4 packet of `total` bytes: UDP, DF set, 10.77.0.2 -> 10.77.0.1. */
static void
mk4(uint8_t *p, size_t total)
{
	static const uint8_t src[4] = { 10, 77, 0, 2 }, dst[4] = { 10, 77, 0, 1 };

	for (size_t i = 0; i < total; i++)
		p[i] = (uint8_t)(i * 3);
	p[0] = 0x45;
	p[1] = 0;
	p[2] = (uint8_t)(total >> 8);
	p[3] = (uint8_t)total;
	p[6] = 0x40;
	p[7] = 0;
	p[8] = 64;
	p[9] = 17;
	memcpy(p + 12, src, 4);
	memcpy(p + 16, dst, 4);
}

/* An IPv6 packet of `total` bytes (>= 40), next header TCP,
 * fd00::2 -> fd00::1. */
static void
mk6(uint8_t *p, size_t total)
{
	for (size_t i = 0; i < total; i++)
		p[i] = (uint8_t)(i * 5);
	p[0] = 0x60;
	p[1] = p[2] = p[3] = 0;
	p[4] = (uint8_t)((total - 40) >> 8);
	p[5] = (uint8_t)(total - 40);
	p[6] = 6;
	p[7] = 64;
	memset(p + 8, 0, 32);
	p[8] = 0xfd;
	p[23] = 2;
	p[24] = 0xfd;
	p[39] = 1;
}

static void
assert_counters_zero_but(const struct tunnel_counters *c, int which, uint64_t n)
{
	assert_int_equal(c->rx_packets, 0);
	assert_int_equal(c->rx_bytes, 0);
	assert_int_equal(c->tx_packets, 0);
	assert_int_equal(c->tx_bytes, 0);
	for (int i = 0; i < TUNNEL_DROP_COUNT; i++) {
		if (i == which)
			assert_int_equal(c->drops[i], n);
		else
			assert_int_equal(c->drops[i], 0);
	}
}

static void
test_drop_names(void **state)
{
	(void)state;
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_SPOOFED_SOURCE],
	    "spoofed_source");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_NO_ROUTE], "no_route");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_TOO_BIG], "too_big");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_INVALID_PACKET],
	    "invalid_packet");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_UNKNOWN_CONTEXT],
	    "unknown_context");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_QUEUE_FULL], "queue_full");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_UNKNOWN_PEER],
	    "unknown_peer");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_BAD_OFFLOAD],
	    "bad_offload");
	assert_string_equal(tunnel_drop_names[TUNNEL_DROP_MULTICAST], "multicast");
	assert_int_equal(TUNNEL_DROP_COUNT, 9);
}

static void
test_drop_counts(void **state)
{
	struct tunnel_counters peer, other, global;

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&other, 0, sizeof other);
	memset(&global, 0, sizeof global);

	tunnel_drop(TUNNEL_DROP_SPOOFED_SOURCE, &peer, &global);
	tunnel_drop(TUNNEL_DROP_SPOOFED_SOURCE, &peer, &global);
	tunnel_drop(TUNNEL_DROP_NO_ROUTE, &other, &global);
	tunnel_drop(TUNNEL_DROP_UNKNOWN_PEER, NULL, &global);
	tunnel_drop(TUNNEL_DROP_QUEUE_FULL, &peer, NULL);
	tunnel_drop(TUNNEL_DROP_TOO_BIG, NULL, NULL);

	assert_int_equal(peer.drops[TUNNEL_DROP_SPOOFED_SOURCE], 2);
	assert_int_equal(peer.drops[TUNNEL_DROP_QUEUE_FULL], 1);
	assert_int_equal(peer.drops[TUNNEL_DROP_NO_ROUTE], 0);
	assert_int_equal(peer.drops[TUNNEL_DROP_UNKNOWN_PEER], 0);
	assert_int_equal(peer.drops[TUNNEL_DROP_TOO_BIG], 0);
	assert_counters_zero_but(&other, TUNNEL_DROP_NO_ROUTE, 1);
	assert_int_equal(global.drops[TUNNEL_DROP_SPOOFED_SOURCE], 2);
	assert_int_equal(global.drops[TUNNEL_DROP_NO_ROUTE], 1);
	assert_int_equal(global.drops[TUNNEL_DROP_UNKNOWN_PEER], 1);
	assert_int_equal(global.drops[TUNNEL_DROP_QUEUE_FULL], 0);
	assert_int_equal(global.drops[TUNNEL_DROP_TOO_BIG], 0);
	assert_int_equal(global.drops[TUNNEL_DROP_INVALID_PACKET], 0);
	assert_int_equal(global.drops[TUNNEL_DROP_UNKNOWN_CONTEXT], 0);
	assert_int_equal(global.rx_packets + global.tx_packets, 0);
}

static void
test_decode_ipv4(void **state)
{
	struct tunnel_counters peer, global;
	struct ippkt_info info;
	uint8_t dgram[1 + 100 + 7];
	const uint8_t *pkt = NULL;
	size_t len = 0;

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	dgram[0] = 0x00; /* context 0 */
	mk4(dgram + 1, 100);
	assert_int_equal(tunnel_decode(dgram, 1 + 100, &pkt, &len, &info, &peer,
	    &global), 0);
	assert_ptr_equal(pkt, dgram + 1);
	assert_int_equal(len, 100);
	assert_int_equal(info.family, AF_INET);
	assert_int_equal(info.src.family, AF_INET);
	assert_int_equal(info.dst.family, AF_INET);
	assert_memory_equal(info.src.b, ((uint8_t[]){ 10, 77, 0, 2 }), 4);
	assert_memory_equal(info.dst.b, ((uint8_t[]){ 10, 77, 0, 1 }), 4);
	assert_int_equal(info.proto, 17);
	assert_int_equal(info.len, 100);
	assert_true(info.df);
	/* Decoding counts nothing: delivery does. */
	assert_counters_zero_but(&peer, -1, 0);
	assert_counters_zero_but(&global, -1, 0);

	/* Trailing bytes after the IP length are cut off. */
	assert_int_equal(tunnel_decode(dgram, sizeof dgram, &pkt, &len, &info,
	    &peer, &global), 0);
	assert_ptr_equal(pkt, dgram + 1);
	assert_int_equal(len, 100);
	assert_int_equal(info.len, 100);
	assert_counters_zero_but(&global, -1, 0);
}

static void
test_decode_ipv6(void **state)
{
	struct tunnel_counters peer, global;
	struct ippkt_info info;
	uint8_t dgram[2 + 1280], want_src[16], want_dst[16];
	const uint8_t *pkt = NULL;
	size_t len = 0;

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	/* Context 0 written as a two-byte varint is still context 0. */
	dgram[0] = 0x40;
	dgram[1] = 0x00;
	mk6(dgram + 2, 1280);
	assert_int_equal(tunnel_decode(dgram, sizeof dgram, &pkt, &len, &info,
	    &peer, &global), 0);
	assert_ptr_equal(pkt, dgram + 2);
	assert_int_equal(len, 1280);
	assert_int_equal(info.family, AF_INET6);
	memset(want_src, 0, 16);
	want_src[0] = 0xfd;
	want_src[15] = 2;
	memset(want_dst, 0, 16);
	want_dst[0] = 0xfd;
	want_dst[15] = 1;
	assert_memory_equal(info.src.b, want_src, 16);
	assert_memory_equal(info.dst.b, want_dst, 16);
	assert_int_equal(info.proto, 6);
	assert_int_equal(info.len, 1280);
	assert_counters_zero_but(&global, -1, 0);
}

static void
test_decode_unknown_context(void **state)
{
	struct tunnel_counters peer, global;
	struct ippkt_info info;
	uint8_t dgram[3 + 60];
	const uint8_t *pkt;
	size_t len;

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	/* Context 1, one byte. */
	dgram[0] = 0x01;
	mk4(dgram + 1, 60);
	assert_int_equal(tunnel_decode(dgram, 61, &pkt, &len, &info, &peer,
	    &global), -1);
	assert_counters_zero_but(&peer, TUNNEL_DROP_UNKNOWN_CONTEXT, 1);
	assert_counters_zero_but(&global, TUNNEL_DROP_UNKNOWN_CONTEXT, 1);

	/* Context 1 as a two-byte varint, and a large context (0x3f, 63). */
	dgram[0] = 0x40;
	dgram[1] = 0x01;
	mk4(dgram + 2, 60);
	assert_int_equal(tunnel_decode(dgram, 62, &pkt, &len, &info, &peer,
	    &global), -1);
	dgram[0] = 0x3f;
	mk4(dgram + 1, 60);
	assert_int_equal(tunnel_decode(dgram, 61, &pkt, &len, &info, &peer,
	    &global), -1);
	/* An unknown context with no body at all. */
	dgram[0] = 0x02;
	assert_int_equal(tunnel_decode(dgram, 1, &pkt, &len, &info, &peer,
	    &global), -1);
	assert_counters_zero_but(&peer, TUNNEL_DROP_UNKNOWN_CONTEXT, 4);
	assert_counters_zero_but(&global, TUNNEL_DROP_UNKNOWN_CONTEXT, 4);

	/* Counting into the global counters only. */
	assert_int_equal(tunnel_decode(dgram, 1, &pkt, &len, &info, NULL,
	    &global), -1);
	assert_counters_zero_but(&peer, TUNNEL_DROP_UNKNOWN_CONTEXT, 4);
	assert_counters_zero_but(&global, TUNNEL_DROP_UNKNOWN_CONTEXT, 5);
}

/* What tunnel_input does with each context: decoded once, an IP packet
 * to `packet` (also with its context written in two bytes), a UDP flow's
 * datagram whole to `flow`, or, with no flow handler or no loss
 * recovery, counted as an unknown context. */
struct got {
	unsigned packets, flows;
	size_t last_len;
	const uint8_t *last;
};

static void
got_packet(const uint8_t *pkt, size_t len, const struct ippkt_info *info,
    void *arg)
{
	struct got *g = arg;

	(void)info;
	g->packets++;
	g->last = pkt;
	g->last_len = len;
}

static void
got_flow(const uint8_t *dgram, size_t len, void *arg)
{
	struct got *g = arg;

	g->flows++;
	g->last = dgram;
	g->last_len = len;
}

static void
test_input_dispatch(void **state)
{
	struct tunnel_counters peer, global;
	struct got g;
	struct tunnel_sink sink = {
		.packet = got_packet, .flow = got_flow, .arg = &g,
		.peer = &peer, .global = &global,
	};
	uint8_t dgram[2 + 100];

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	memset(&g, 0, sizeof g);

	dgram[0] = 0;
	mk4(dgram + 1, 100);
	tunnel_input(NULL, dgram, 1 + 100, &sink);
	assert_int_equal(g.packets, 1);
	assert_ptr_equal(g.last, dgram + 1);
	assert_int_equal(g.last_len, 100);
	/* Context 0 in two bytes (0x40 0x00). */
	dgram[0] = 0x40;
	dgram[1] = 0;
	mk4(dgram + 2, 100);
	tunnel_input(NULL, dgram, 2 + 100, &sink);
	assert_int_equal(g.packets, 2);
	assert_ptr_equal(g.last, dgram + 2);
	/* A UDP flow's context (4, and 300 in two bytes): the whole
	 * DATAGRAM, context and all, to the flow handler. */
	dgram[0] = 4;
	tunnel_input(NULL, dgram, 10, &sink);
	assert_int_equal(g.flows, 1);
	assert_ptr_equal(g.last, dgram);
	assert_int_equal(g.last_len, 10);
	dgram[0] = 0x41;
	dgram[1] = 0x2c;
	tunnel_input(NULL, dgram, 10, &sink);
	assert_int_equal(g.flows, 2);
	assert_int_equal(peer.drops[TUNNEL_DROP_UNKNOWN_CONTEXT], 0);
	/* No flow handler (not the session's connection): dropped. */
	sink.flow = NULL;
	dgram[0] = 4;
	tunnel_input(NULL, dgram, 10, &sink);
	assert_int_equal(g.flows, 2);
	assert_int_equal(peer.drops[TUNNEL_DROP_UNKNOWN_CONTEXT], 1);
	/* Loss recovery's contexts without loss recovery: dropped too. */
	for (uint8_t ctx = 1; ctx <= 3; ctx++) {
		dgram[0] = ctx;
		tunnel_input(NULL, dgram, 10, &sink);
	}
	assert_int_equal(peer.drops[TUNNEL_DROP_UNKNOWN_CONTEXT], 4);
	assert_int_equal(global.drops[TUNNEL_DROP_UNKNOWN_CONTEXT], 4);
	/* A context cut short. */
	dgram[0] = 0x40;
	tunnel_input(NULL, dgram, 1, &sink);
	assert_int_equal(peer.drops[TUNNEL_DROP_INVALID_PACKET], 1);
	assert_int_equal(g.packets, 2);
	assert_int_equal(g.flows, 2);
}

static void
test_decode_invalid(void **state)
{
	struct tunnel_counters peer, global;
	struct ippkt_info info;
	uint8_t dgram[1 + 100];
	const uint8_t *pkt;
	size_t len;
	uint64_t n = 0;

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	memset(dgram, 0, sizeof dgram);

#define BAD(buf, l) do {                                                    \
	assert_int_equal(tunnel_decode((buf), (l), &pkt, &len, &info, &peer, \
	    &global), -1);                                                  \
	n++;                                                                \
	assert_counters_zero_but(&peer, TUNNEL_DROP_INVALID_PACKET, n);     \
	assert_counters_zero_but(&global, TUNNEL_DROP_INVALID_PACKET, n);   \
} while (0)

	/* Empty, and truncated varints of 2, 4 and 8 bytes. */
	BAD(dgram, 0);
	dgram[0] = 0x40;
	BAD(dgram, 1);
	dgram[0] = 0x80;
	dgram[1] = dgram[2] = 0;
	BAD(dgram, 3);
	dgram[0] = 0xc0;
	memset(dgram + 1, 0, 6);
	BAD(dgram, 7);

	/* Context 0 with no packet, or a packet too short for a header. */
	dgram[0] = 0;
	BAD(dgram, 1);
	mk4(dgram + 1, 100);
	BAD(dgram, 1 + 19);

	/* Not IPv4 or IPv6. */
	mk4(dgram + 1, 100);
	dgram[1] = 0x55;
	BAD(dgram, 1 + 100);

	/* IHL below 5, and a header running past the buffer. */
	mk4(dgram + 1, 100);
	dgram[1] = 0x44;
	BAD(dgram, 1 + 100);
	mk4(dgram + 1, 100);
	dgram[1] = 0x4f; /* 60-byte header in a 30-byte packet */
	BAD(dgram, 1 + 30);

	/* Total length past the buffer, and shorter than the header. */
	mk4(dgram + 1, 100);
	BAD(dgram, 1 + 99);
	mk4(dgram + 1, 100);
	dgram[3] = 0;
	dgram[4] = 19;
	BAD(dgram, 1 + 100);

	/* IPv6: short header, payload length past the buffer. */
	mk6(dgram + 1, 100);
	BAD(dgram, 1 + 39);
	mk6(dgram + 1, 100);
	BAD(dgram, 1 + 99);
#undef BAD

	/* With no counters at all, still refused, nothing touched. */
	dgram[0] = 0x40;
	assert_int_equal(tunnel_decode(dgram, 1, &pkt, &len, &info, NULL, NULL), -1);
	assert_counters_zero_but(&global, TUNNEL_DROP_INVALID_PACKET, n);
}


/* An IPv4 packet of `total` bytes at buf + TUNNEL_HEADROOM, parsed. */
static void
mk_send(uint8_t *buf, size_t total, struct ippkt_info *info)
{
	mk4(buf + TUNNEL_HEADROOM, total);
	buf[0] = 0xee; /* tunnel_send owns the headroom */
	assert_int_equal(ippkt_parse(buf + TUNNEL_HEADROOM, total, info), IPPKT_OK);
}

static void
test_send(void **state)
{
	struct pair *p = pair_new_plain();
	struct tunnel_counters peer, global;
	struct quic_conn_stats cs;
	struct ippkt_info info, rinfo;
	static uint8_t buf[TUNNEL_BUF];
	const uint8_t *pkt;
	size_t len;

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	pair_connect(p, NULL);

	/* Before the handshake there is no route through this peer. */
	assert_int_equal(tunnel_inner_mtu(p->c.qc), 0);
	mk_send(buf, 100, &info);
	tunnel_send(p->c.qc, NULL, buf, &info, NULL, &peer, &global);
	assert_counters_zero_but(&peer, TUNNEL_DROP_NO_ROUTE, 1);
	assert_counters_zero_but(&global, TUNNEL_DROP_NO_ROUTE, 1);

	assert_true(pair_run(p, ROUNDS) > 0);
	assert_int_equal(quic_conn_state(p->c.qc), QUIC_STATE_ESTABLISHED);
	/* The DATAGRAM maximum less the one-byte context ID. */
	assert_int_equal(tunnel_inner_mtu(p->c.qc), 1431);
	assert_int_equal(tunnel_inner_mtu(p->s.qc), 1431);

	/* The largest packet that fits goes, counted; one byte more does
	 * not (no TUN here for the "packet too big" answer). */
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	mk_send(buf, 1431, &info);
	tunnel_send(p->c.qc, NULL, buf, &info, NULL, &peer, &global);
	assert_int_equal(peer.tx_packets, 1);
	assert_int_equal(peer.tx_bytes, 1431);
	assert_int_equal(global.tx_packets, 1);
	assert_int_equal(global.tx_bytes, 1431);
	mk_send(buf, 1432, &info);
	tunnel_send(p->c.qc, NULL, buf, &info, NULL, &peer, NULL);
	assert_int_equal(peer.drops[TUNNEL_DROP_TOO_BIG], 1);
	assert_int_equal(global.drops[TUNNEL_DROP_TOO_BIG], 0);
	assert_int_equal(peer.tx_packets, 1);
	quic_conn_get_stats(p->c.qc, &cs);
	assert_int_equal(cs.dgram_too_big, 1);
	assert_true(pair_run(p, ROUNDS) > 0);

	/* What arrives is context 0 and the packet, which decodes back. */
	assert_int_equal(p->s.ndgrams, 1);
	assert_int_equal(p->s.dgram_len[0], 1 + 1431);
	assert_int_equal(p->s.dgram[0][0], 0);
	mk4(buf, 1431);
	assert_memory_equal(p->s.dgram[0] + 1, buf, 1431);
	assert_int_equal(tunnel_decode(p->s.dgram[0], p->s.dgram_len[0], &pkt,
	    &len, &rinfo, NULL, NULL), 0);
	assert_int_equal(len, 1431);
	assert_int_equal(rinfo.len, 1431);
	assert_memory_equal(rinfo.src.b, ((uint8_t[]){ 10, 77, 0, 2 }), 4);
	pair_free(p);
}

static void
test_send_queue_full(void **state)
{
	struct pair *p = pair_new_plain();
	struct tunnel_counters peer, global;
	struct quic_conn_stats cs;
	struct ippkt_info info;
	static uint8_t buf[TUNNEL_BUF];

	(void)state;
	memset(&peer, 0, sizeof peer);
	memset(&global, 0, sizeof global);
	pair_connect(p, NULL);
	assert_true(pair_run(p, ROUNDS) > 0);

	/* A burst beyond the DATAGRAM queue before the write loop runs:
	 * every packet is taken, the oldest are dropped as a router would,
	 * and counted. */
	for (unsigned i = 0; i < QUIC_DGRAM_QUEUE + 3; i++) {
		mk_send(buf, 60, &info);
		tunnel_send(p->s.qc, NULL, buf, &info, NULL, &peer, &global);
	}
	assert_int_equal(peer.tx_packets, QUIC_DGRAM_QUEUE + 3);
	assert_int_equal(peer.tx_bytes, (QUIC_DGRAM_QUEUE + 3) * 60);
	assert_int_equal(peer.drops[TUNNEL_DROP_QUEUE_FULL], 3);
	assert_int_equal(global.drops[TUNNEL_DROP_QUEUE_FULL], 3);
	assert_true(pair_run(p, ROUNDS) > 0);
	/* Delivered, or dropped for waiting too long for the congestion
	 * window: nothing is held back. */
	quic_conn_get_stats(p->s.qc, &cs);
	assert_int_equal(p->c.ndgrams + cs.dgram_stale, QUIC_DGRAM_QUEUE);
	assert_int_equal(cs.dgram_queue_full, 3);
	pair_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drop_names),
		cmocka_unit_test(test_drop_counts),
		cmocka_unit_test(test_decode_ipv4),
		cmocka_unit_test(test_decode_ipv6),
		cmocka_unit_test(test_decode_unknown_context),
		cmocka_unit_test(test_decode_invalid),
		cmocka_unit_test(test_input_dispatch),
		cmocka_unit_test(test_send),
		cmocka_unit_test(test_send_queue_full),
	};

	return cmocka_run_group_tests(tests, pair_group_setup, pair_group_teardown);
}

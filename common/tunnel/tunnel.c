/* The shared IP data path: TUN packet <-> DATAGRAM, PTB answers, counters. */
#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "recovery.h"
#include "tunnel.h"
#include "wire/proto.h"
#include "wire/proto-udp.h"

const char *const tunnel_drop_names[TUNNEL_DROP_COUNT] = {
	[TUNNEL_DROP_SPOOFED_SOURCE] = "spoofed_source",
	[TUNNEL_DROP_NO_ROUTE] = "no_route",
	[TUNNEL_DROP_TOO_BIG] = "too_big",
	[TUNNEL_DROP_INVALID_PACKET] = "invalid_packet",
	[TUNNEL_DROP_UNKNOWN_CONTEXT] = "unknown_context",
	[TUNNEL_DROP_QUEUE_FULL] = "queue_full",
	[TUNNEL_DROP_UNKNOWN_PEER] = "unknown_peer",
	[TUNNEL_DROP_BAD_OFFLOAD] = "bad_offload",
	[TUNNEL_DROP_MULTICAST] = "multicast",
};

void
tunnel_drop(enum tunnel_drop why, struct tunnel_counters *peer,
    struct tunnel_counters *global)
{
	if (peer != NULL)
		peer->drops[why]++;
	if (global != NULL)
		global->drops[why]++;
}

size_t
tunnel_inner_mtu(struct quic_conn *qc)
{
	size_t max = quic_conn_dgram_max(qc);

	/* One byte of context ID (context 0). */
	return max > 1 ? max - 1 : 0;
}

static void
answer_too_big(struct quic_conn *qc, const uint8_t *pkt, size_t len,
    struct tun *tun, const struct ipaddr *from)
{
	uint8_t out[IPPKT_MIN_MTU6];
	size_t n;

	if (from == NULL || tun == NULL)
		return;
	n = ippkt_make_ptb(pkt, len, from, (uint32_t)tunnel_inner_mtu(qc), out,
	    sizeof out);
	if (n > 0)
		(void)tun_write(tun, out, n);
}

void
tunnel_send(struct quic_conn *qc, struct recovery *rec, uint8_t *buf,
    const struct ippkt_info *info, struct tun *tun,
    struct tunnel_counters *peer, struct tunnel_counters *global)
{
	size_t len = info->len;
	int rv = 1;

	if (rec != NULL)
		rv = recovery_send(rec, buf + TUNNEL_HEADROOM, len);
	if (rv == 1) {
		buf[0] = PROTO_CTX_IP;
		rv = quic_conn_send_datagram(qc, buf, len + TUNNEL_HEADROOM);
	}
	/* Queued, perhaps pushing an older packet out of the full queue. */
	for (int i = 0; i < rv; i++)
		tunnel_drop(TUNNEL_DROP_QUEUE_FULL, peer, global);
	if (rv > 0)
		rv = 0;
	switch (rv) {
	case 0:
		if (peer != NULL) {
			peer->tx_packets++;
			peer->tx_bytes += len;
		}
		if (global != NULL) {
			global->tx_packets++;
			global->tx_bytes += len;
		}
		break;
	case -EMSGSIZE:
		/* Never a silent drop: the sender learns the usable MTU. The
		 * answer comes "from" the destination: a source address of our
		 * own, arriving on the TUN, would be dropped as a martian. */
		answer_too_big(qc, buf + TUNNEL_HEADROOM, len, tun, &info->dst);
		tunnel_drop(TUNNEL_DROP_TOO_BIG, peer, global);
		break;
	default:
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, peer, global);
		break;
	}
}

void
tunnel_send_read(struct quic_conn *qc, struct recovery *rec,
    const struct virtio_net_hdr *vh,
    uint8_t *buf, size_t n, const struct ippkt_info *info, struct tun *tun,
    struct tunnel_counters *peer, struct tunnel_counters *global)
{
	struct offload_seg s;
	struct ippkt_info si;
	uint8_t *p;
	size_t len;

	/* The common case without offloads: nothing to split or finish. */
	if (vh->gso_type == VIRTIO_NET_HDR_GSO_NONE &&
	    !(vh->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM)) {
		tunnel_send(qc, rec, buf, info, tun, peer, global);
		return;
	}
	if (offload_seg_init(&s, vh, buf + TUNNEL_HEADROOM, n,
	    tunnel_inner_mtu(qc)) != 0) {
		tunnel_drop(TUNNEL_DROP_BAD_OFFLOAD, peer, global);
		return;
	}
	if (s.gso) {
		if (peer != NULL)
			peer->gso_read++;
		if (global != NULL)
			global->gso_read++;
	}
	/* Each segment has its headroom byte before it (offload.h), and
	 * tunnel_send copies it into the DATAGRAM queue before the next
	 * segment's headers overwrite its tail. */
	while ((p = offload_seg_next(&s, &len)) != NULL) {
		if (ippkt_parse(p, len, &si) != IPPKT_OK) {
			tunnel_drop(TUNNEL_DROP_INVALID_PACKET, peer, global);
			continue;
		}
		tunnel_send(qc, rec, p - TUNNEL_HEADROOM, &si, tun, peer, global);
	}
}

void
tunnel_read(struct tun *tun, struct tunnel_counters *global,
    tunnel_read_cb cb, void *arg)
{
	/* One process reads one TUN, and cb is done with the packet (it
	 * has been split and queued) before the next read. */
	static uint8_t buf[TUNNEL_BUF];
	struct virtio_net_hdr vh;
	struct ippkt_info info;
	ssize_t n;

	for (int i = 0; i < TUNNEL_READ_BURST; i++) {
		n = tun_read_vnet(tun, &vh, buf + TUNNEL_HEADROOM,
		    sizeof buf - TUNNEL_HEADROOM);
		/* EINVAL lost one packet and turned the offloads off. */
		if (n == -EINVAL)
			continue;
		if (n <= 0)
			break;
		if (ippkt_parse(buf + TUNNEL_HEADROOM, (size_t)n, &info) != IPPKT_OK) {
			tunnel_drop(TUNNEL_DROP_INVALID_PACKET, NULL, global);
			continue;
		}
		cb(buf, (size_t)n, &vh, &info, arg);
	}
}

int
tunnel_decode(const uint8_t *dgram, size_t dlen, const uint8_t **pkt,
    size_t *len, struct ippkt_info *info, struct tunnel_counters *peer,
    struct tunnel_counters *global)
{
	uint64_t ctx;

	if (proto_dgram_decode(dgram, dlen, &ctx, pkt, len) != 0) {
		tunnel_drop(TUNNEL_DROP_INVALID_PACKET, peer, global);
		return -1;
	}
	if (ctx != PROTO_CTX_IP) {
		tunnel_drop(TUNNEL_DROP_UNKNOWN_CONTEXT, peer, global);
		return -1;
	}
	if (ippkt_parse(*pkt, *len, info) != IPPKT_OK) {
		tunnel_drop(TUNNEL_DROP_INVALID_PACKET, peer, global);
		return -1;
	}
	*len = info->len;
	return 0;
}

static void
input_packet(const uint8_t *pkt, size_t len, void *arg)
{
	const struct tunnel_sink *sink = arg;
	struct ippkt_info info;

	if (ippkt_parse(pkt, len, &info) != IPPKT_OK) {
		tunnel_drop(TUNNEL_DROP_INVALID_PACKET, sink->peer, sink->global);
		return;
	}
	sink->packet(pkt, info.len, &info, sink->arg);
}

void
tunnel_input(struct recovery *rec, const uint8_t *dgram, size_t dlen,
    struct tunnel_sink *sink)
{
	struct ippkt_info info;
	const uint8_t *body;
	size_t blen;
	uint64_t ctx;

	/* The common case, a plain packet: one-byte context 0. */
	if (dlen > 0 && dgram[0] == PROTO_CTX_IP) {
		if (tunnel_decode(dgram, dlen, &body, &blen, &info, sink->peer,
		    sink->global) == 0)
			sink->packet(body, blen, &info, sink->arg);
		return;
	}
	if (proto_dgram_decode(dgram, dlen, &ctx, &body, &blen) != 0) {
		tunnel_drop(TUNNEL_DROP_INVALID_PACKET, sink->peer, sink->global);
		return;
	}
	switch (ctx) {
	case PROTO_CTX_IP:
		/* context 0 written in more bytes than it needs */
		input_packet(body, blen, sink);
		return;
	case PROTO_CTX_IP_FEC:
	case PROTO_CTX_FEC_REPAIR:
	case PROTO_CTX_FEC_REPORT:
		if (rec == NULL)
			break;
		if (recovery_input(rec, ctx, body, blen, input_packet,
		    sink) != 0)
			tunnel_drop(TUNNEL_DROP_INVALID_PACKET, sink->peer,
			    sink->global);
		return;
	default:
		if (ctx >= PROTO_CTX_UDP_BASE && sink->flow != NULL) {
			sink->flow(dgram, dlen, sink->arg);
			return;
		}
		break;
	}
	tunnel_drop(TUNNEL_DROP_UNKNOWN_CONTEXT, sink->peer, sink->global);
}

static void
count_rx(struct tunnel_counters *c, size_t npkts, size_t bytes, bool super)
{
	if (c == NULL)
		return;
	c->rx_packets += npkts;
	c->rx_bytes += bytes;
	if (super)
		c->gso_written++;
}

/* The coalescer's write callback. */
static void
out_write(void *arg, const struct offload_write *w)
{
	struct tunnel_out *o = arg;
	struct tunnel_counters *peer = w->tag;
	int rv;

	rv = tun_writev(o->tun, w->iov, w->iovcnt);
	if (rv == -EINVAL && w->nsegs > 1 && o->tun->offloads == 0) {
		/* The kernel refused the super-packet and the offloads are
		 * off now: its segments still go, one by one. */
		for (size_t i = 0; i < w->nsegs; i++) {
			if (tun_write(o->tun, w->segs[i].iov_base, w->segs[i].iov_len) != 0) {
				tunnel_drop(TUNNEL_DROP_QUEUE_FULL, peer, o->global);
				continue;
			}
			count_rx(peer, 1, w->segs[i].iov_len, false);
			count_rx(o->global, 1, w->segs[i].iov_len, false);
		}
		return;
	}
	if (rv != 0) {
		for (size_t i = 0; i < w->nsegs; i++)
			tunnel_drop(TUNNEL_DROP_QUEUE_FULL, peer, o->global);
		return;
	}
	count_rx(peer, w->nsegs, w->seg_bytes, w->nsegs > 1);
	count_rx(o->global, w->nsegs, w->seg_bytes, w->nsegs > 1);
}

void
tunnel_out_init(struct tunnel_out *o, struct tun *tun,
    struct tunnel_counters *global)
{
	memset(o, 0, sizeof *o);
	o->tun = tun;
	o->global = global;
}

void
tunnel_out_clear(struct tunnel_out *o)
{
	if (o == NULL)
		return;
	offload_coal_free(o->coal);
	o->coal = NULL;
}

void
tunnel_flush(struct tunnel_out *o)
{
	if (o->coal != NULL && offload_coal_pending(o->coal) > 0)
		offload_coal_flush(o->coal);
}

void
tunnel_deliver(struct tunnel_out *o, const uint8_t *pkt, size_t len,
    struct tunnel_counters *peer)
{
	unsigned flags = o->tun->offloads & (OFFLOAD_F_TSO | OFFLOAD_F_USO);
	struct offload_write w;
	struct virtio_net_hdr vh;
	struct iovec iov[2];

	if (flags != o->flags) {
		/* Offloads went off at run time: what waits goes first. */
		tunnel_flush(o);
		if (o->coal != NULL)
			offload_coal_set_flags(o->coal, flags);
		o->flags = flags;
	}
	if (flags != 0) {
		if (o->coal == NULL)
			o->coal = offload_coal_create(flags, out_write, o);
		offload_coal_add(o->coal, pkt, len, peer);
		return;
	}
	memset(&vh, 0, sizeof vh);
	iov[0].iov_base = &vh;
	iov[0].iov_len = sizeof vh;
	iov[1].iov_base = (void *)(uintptr_t)pkt;
	iov[1].iov_len = len;
	memset(&w, 0, sizeof w);
	w.iov = iov;
	w.iovcnt = 2;
	w.len = len;
	w.segs = &iov[1];
	w.nsegs = 1;
	w.seg_bytes = len;
	w.tag = peer;
	out_write(o, &w);
}

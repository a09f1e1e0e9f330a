/* The shared IP data path: TUN packet <-> DATAGRAM, PTB answers, counters. */
#include <errno.h>

#include "log.h"
#include "proto.h"
#include "tunnel.h"

const char *const tunnel_drop_names[TUNNEL_DROP_COUNT] = {
	[TUNNEL_DROP_SPOOFED_SOURCE] = "spoofed_source",
	[TUNNEL_DROP_NO_ROUTE] = "no_route",
	[TUNNEL_DROP_TOO_BIG] = "too_big",
	[TUNNEL_DROP_INVALID_PACKET] = "invalid_packet",
	[TUNNEL_DROP_UNKNOWN_CONTEXT] = "unknown_context",
	[TUNNEL_DROP_QUEUE_FULL] = "queue_full",
	[TUNNEL_DROP_UNKNOWN_PEER] = "unknown_peer",
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
tunnel_send(struct quic_conn *qc, uint8_t *buf, const struct ippkt_info *info,
    struct tun *tun, struct tunnel_counters *peer, struct tunnel_counters *global)
{
	size_t len = info->len;
	int rv;

	buf[0] = PROTO_CTX_IP;
	rv = quic_conn_send_datagram(qc, buf, len + TUNNEL_HEADROOM);
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

void
tunnel_deliver(struct tun *tun, const uint8_t *pkt, size_t len,
    struct tunnel_counters *peer, struct tunnel_counters *global)
{
	if (tun_write(tun, pkt, len) != 0) {
		tunnel_drop(TUNNEL_DROP_QUEUE_FULL, peer, global);
		return;
	}
	if (peer != NULL) {
		peer->rx_packets++;
		peer->rx_bytes += len;
	}
	if (global != NULL) {
		global->rx_packets++;
		global->rx_bytes += len;
	}
}

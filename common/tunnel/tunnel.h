/* The IP data path both programs share: a TUN packet into a DATAGRAM
 * (context 0), a DATAGRAM back into an IP packet, the "packet too big"
 * answer, and the counters with their drop reasons. */
#ifndef ROVE_TUNNEL_H
#define ROVE_TUNNEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "transport/quic.h"
#include "tun/tun.h"
#include "wire/ippkt.h"

struct recovery;

enum tunnel_drop {
	TUNNEL_DROP_SPOOFED_SOURCE,
	TUNNEL_DROP_NO_ROUTE,
	TUNNEL_DROP_TOO_BIG,
	TUNNEL_DROP_INVALID_PACKET,
	TUNNEL_DROP_UNKNOWN_CONTEXT,
	TUNNEL_DROP_QUEUE_FULL,
	TUNNEL_DROP_UNKNOWN_PEER,
	TUNNEL_DROP_BAD_OFFLOAD,   /* a virtio_net_hdr its packet belies */
	TUNNEL_DROP_MULTICAST,     /* from the TUN to a multicast address */
	TUNNEL_DROP_COUNT
};

/* Names as they appear in status output. */
extern const char *const tunnel_drop_names[TUNNEL_DROP_COUNT];

struct tunnel_counters {
	uint64_t rx_packets, rx_bytes; /* from the peer, written to the TUN */
	uint64_t tx_packets, tx_bytes; /* read from the TUN, sent to the peer */
	/* Offloads: super-packets read from the TUN (and split) and written
	 * to it (coalesced); the packet counters count their segments. */
	uint64_t gso_read, gso_written;
	uint64_t drops[TUNNEL_DROP_COUNT];
};

/* Headroom a TUN read buffer keeps before the packet for the context ID. */
#define TUNNEL_HEADROOM 1
#define TUNNEL_BUF (TUNNEL_HEADROOM + 65535)

/* Count a drop in both the peer's and the global counters (either NULL). */
void tunnel_drop(enum tunnel_drop, struct tunnel_counters *peer,
    struct tunnel_counters *global);

/* Send the IP packet at buf[TUNNEL_HEADROOM..], described by `info`, over
 * `qc`, in a loss recovery group of `rec` if it has one going (`rec` may
 * be NULL). When it is too big for a DATAGRAM, a "packet too big" goes back into
 * `tun` instead. Counts into `peer` and `global` (may be NULL); an older
 * packet pushed out of a full DATAGRAM queue counts as a queue_full drop. */
void tunnel_send(struct quic_conn *qc, struct recovery *rec, uint8_t *buf,
    const struct ippkt_info *info, struct tun *tun,
    struct tunnel_counters *peer, struct tunnel_counters *global);

/* Send what one TUN read returned: the packet at buf[TUNNEL_HEADROOM..]
 * (n bytes, `info` from its IP header) with its virtio_net_hdr `vh`. A
 * super-packet is split (in place) into packets that fit `qc`'s DATAGRAMs
 * and a partial checksum completed; a header that does not match the
 * packet is counted as a bad_offload drop. Then as tunnel_send. */
void tunnel_send_read(struct quic_conn *qc, struct recovery *rec,
    const struct virtio_net_hdr *vh,
    uint8_t *buf, size_t n, const struct ippkt_info *info, struct tun *tun,
    struct tunnel_counters *peer, struct tunnel_counters *global);

/* Reads one TUN event takes at most, so that a busy TUN does not starve
 * the network side of the loop. */
#define TUNNEL_READ_BURST 64

/* Where a packet read from the TUN goes (usually tunnel_send_read, or a
 * drop): at buf[TUNNEL_HEADROOM..], n bytes, with its virtio_net_hdr `vh`
 * and `info` from its IP header, which is sane. */
typedef void (*tunnel_read_cb)(uint8_t *buf, size_t n,
    const struct virtio_net_hdr *vh, const struct ippkt_info *info,
    void *arg);

/* Read up to TUNNEL_READ_BURST packets from `tun` (fewer if it runs dry)
 * and hand each to `cb`; one whose IP header is not sane is counted as an
 * invalid_packet drop into `global` instead. */
void tunnel_read(struct tun *, struct tunnel_counters *global,
    tunnel_read_cb cb, void *arg);

/* Decode a received DATAGRAM. Returns 0 with the IP packet in *pkt, *len and
 * its header in *info, or counts the drop and returns -1. */
int tunnel_decode(const uint8_t *dgram, size_t dlen, const uint8_t **pkt,
    size_t *len, struct ippkt_info *info, struct tunnel_counters *peer,
    struct tunnel_counters *global);

/* Where each IP packet a received DATAGRAM yields goes: `len` is the
 * packet's own (info->len), its header checked. */
typedef void (*tunnel_packet_cb)(const uint8_t *pkt, size_t len,
    const struct ippkt_info *info, void *arg);

/* Where the parts of a received DATAGRAM go. */
struct tunnel_sink {
	tunnel_packet_cb packet;     /* each IP packet it yields */
	/* A UDP flow's DATAGRAM (a context from PROTO_CTX_UDP_BASE on),
	 * whole; NULL: counted as an unknown context. */
	void (*flow)(const uint8_t *dgram, size_t len, void *arg);
	void *arg;                   /* theirs */
	struct tunnel_counters *peer, *global;
};

/* Decode a received DATAGRAM's context, once, and hand it on: an IP
 * packet (context 0), loss recovery's frames, given to `rec` (NULL:
 * counted as unknown contexts), which yield the packet in a group and
 * any that a repair rebuilt, or a UDP flow's datagram. What cannot be
 * decoded is counted as a drop. */
void tunnel_input(struct recovery *rec, const uint8_t *dgram, size_t dlen,
    struct tunnel_sink *);

/* The TUN's write side: decoded packets wait here until the end of the
 * receive batch, when the coalescer turns runs of TCP segments (and UDP
 * datagrams) into super-packets. Without TSO/USO on the device each
 * packet is written at once, as it came. */
struct tunnel_out {
	struct tun *tun;
	struct offload_coal *coal;         /* created on first use */
	struct tunnel_counters *global;
	unsigned flags;                    /* offloads the coalescer uses */
};

void tunnel_out_init(struct tunnel_out *, struct tun *,
    struct tunnel_counters *global);
void tunnel_out_clear(struct tunnel_out *);

/* Write (or queue) a decoded packet to the TUN, counted into `peer` and
 * the global counters once written. */
void tunnel_deliver(struct tunnel_out *, const uint8_t *pkt, size_t len,
    struct tunnel_counters *peer);
/* Write everything queued; at the end of each receive batch. */
void tunnel_flush(struct tunnel_out *);

/* The largest inner IP packet `qc` can carry now (0 before the handshake). */
size_t tunnel_inner_mtu(struct quic_conn *qc);

#endif

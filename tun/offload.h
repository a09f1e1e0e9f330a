/* TUN offloads without I/O: splitting the super-packets a TUN read returns
 * (TSO, USO, partial checksums) into packets that fit one DATAGRAM each,
 * and coalescing the packets of one receive batch into super-packets for
 * the TUN write side, by the rules of the kernel's own GRO. */
#ifndef ROVE_OFFLOAD_H
#define ROVE_OFFLOAD_H

#include <linux/virtio_net.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Linux 6.2 added USO; older uapi headers lack its constant. */
#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#endif

/* Offloads the TUN device has enabled (TUNSETOFFLOAD). */
#define OFFLOAD_F_CSUM (1u << 0)  /* TUN_F_CSUM */
#define OFFLOAD_F_TSO (1u << 1)   /* TUN_F_TSO4 | TUN_F_TSO6 */
#define OFFLOAD_F_USO (1u << 2)   /* TUN_F_USO4 | TUN_F_USO6 */

#define OFFLOAD_VNET_HDR_LEN sizeof(struct virtio_net_hdr)
/* The largest IP plus TCP header: 60 + 60 bytes. */
#define OFFLOAD_MAX_HDR 120

/*
 * Segmentation. A TUN read gives a virtio_net_hdr and a packet of up to
 * 64 KB. offload_seg_init checks the header against the packet's own IP and
 * TCP/UDP headers (the kernel's values are never used unchecked) and, for a
 * packet that needs no splitting, completes a partial checksum in place.
 * offload_seg_next then returns one packet at a time, built in place in
 * the caller's buffer: segment k's headers are written just before its
 * payload, over the tail of segment k-1, so no payload byte is copied.
 * Hence the caller must be done with a segment before asking for the next.
 * Each returned pointer p has one writable byte at p[-1] (the DATAGRAM's
 * context ID, TUNNEL_HEADROOM); for the first segment that is pkt[-1],
 * which the caller must provide.
 */
struct offload_seg {
	uint8_t *pkt;
	size_t len;
	uint8_t hdr[OFFLOAD_MAX_HDR]; /* IP + TCP/UDP header template */
	size_t iphlen, hlen;          /* IP header; IP + transport header */
	int family;                   /* AF_INET or AF_INET6 */
	uint8_t proto;                /* IPPROTO_TCP or IPPROTO_UDP when gso */
	bool gso;
	size_t mss;                   /* payload bytes per segment */
	size_t off;                   /* next payload byte in pkt */
	unsigned n;                   /* segments returned so far */
};

/* Check `hdr` against `pkt` (len bytes, as read) and prepare to split it
 * into packets of at most `max_pkt` bytes: TCP segments get smaller than
 * hdr->gso_size when the headers plus gso_size would not fit (a max_pkt no
 * larger than the headers is ignored; the caller then meets each segment's
 * size itself). USO datagrams keep their size: UDP messages cannot be cut.
 * Returns 0, or -1 when the header does not describe the packet (the
 * caller drops and counts it). */
int offload_seg_init(struct offload_seg *, const struct virtio_net_hdr *hdr,
    uint8_t *pkt, size_t len, size_t max_pkt);
/* The next packet and its length in *len, or NULL after the last. */
uint8_t *offload_seg_next(struct offload_seg *, size_t *len);

/*
 * Coalescing. Packets are added one by one (copied: the caller's buffer
 * may be gone after the call) and written in order at offload_coal_flush,
 * or earlier when the batch is full. Consecutive in-order TCP segments of
 * one flow become one GSO_TCPV4/6 super-packet, UDP datagrams of one flow
 * one GSO_UDP_L4 super-packet (when OFFLOAD_F_USO); everything else is
 * written as it came. Writes go through the callback given at creation.
 */
#define OFFLOAD_BATCH 128      /* packets held at most */
#define OFFLOAD_CHAINS 16      /* flows coalesced at once */
#define OFFLOAD_MAX_SEGS 64    /* segments in one super-packet */

/* One write: iov[0] is the virtio_net_hdr (zero unless coalesced), then
 * the packet. `segs` are the original packets, for a caller that has to
 * write them one by one after all (offloads turned off at run time). */
struct offload_write {
	const struct iovec *iov;
	int iovcnt;
	size_t len;                  /* bytes after the virtio_net_hdr */
	const struct iovec *segs;
	size_t nsegs;
	size_t seg_bytes;            /* sum of the segments' lengths */
	void *tag;                   /* as given to offload_coal_add */
};

typedef void (*offload_write_fn)(void *arg, const struct offload_write *);

struct offload_coal;

/* Create an empty batch that coalesces what `flags` allows. */
struct offload_coal *offload_coal_create(unsigned flags, offload_write_fn,
    void *arg);
void offload_coal_free(struct offload_coal *);
/* Change what may be coalesced from the next packet on. */
void offload_coal_set_flags(struct offload_coal *, unsigned flags);
/* Add a copy of IP packet `pkt` (len bytes, its header already checked by
 * ippkt_parse). Packets only merge with packets of the same `tag` (the
 * server passes the peer, whose counters the write then goes to). */
void offload_coal_add(struct offload_coal *, const uint8_t *pkt, size_t len,
    void *tag);
/* Write everything held, in order; the batch is empty afterwards. */
void offload_coal_flush(struct offload_coal *);
/* Packets held now. */
size_t offload_coal_pending(const struct offload_coal *);

#endif

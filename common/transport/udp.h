/* UDP sockets for QUIC: large forced buffers, GRO on receive, and a send
 * batch that hands runs of equal-sized packets to the kernel as one GSO
 * super-packet (the per-packet cost is the kernel's, so batching matters). */
#ifndef ROVE_UDP_H
#define ROVE_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define UDP_MAX_PAYLOAD 1472  /* 1500-byte outer path, IPv4 */
#define UDP_MAX_PAYLOAD6 1452 /* the same path over IPv6 */
#define UDP_BATCH_MAX 64      /* packets per send batch */
#define UDP_GRO_BUF 65536     /* one receive may hold many coalesced packets */
#define UDP_RECV_BATCH 8      /* receives per recvmmsg call */

struct udp_socket {
	int fd;
	int family;
	bool gso;   /* kernel accepts UDP_SEGMENT */
	struct sockaddr_storage local;
	socklen_t locallen;
};

/* Open a nonblocking UDP socket bound to `bind` (NULL: an ephemeral port
 * on the wildcard address of `family`). Returns 0 or -1 with *cause set. */
int udp_open(struct udp_socket *, int family, const struct sockaddr *bind,
    socklen_t bindlen, char **cause);
/* Two sockets sharing one address (SO_REUSEPORT), between which the kernel
 * steers each datagram by its first byte: QUIC long headers (handshakes)
 * to `hs`, the rest (established connections) to `est`. A flood of
 * Initials then fills only `hs`'s queue, and the owner can serve `est`
 * first. Returns 0, or -1 with *cause set (the caller may fall back to
 * udp_open). */
int udp_open_split(struct udp_socket *est, struct udp_socket *hs, int family,
    const struct sockaddr *bind, socklen_t bindlen, char **cause);
/*
 * The same for `n` worker processes: est[w] and hs[w] are worker w's pair,
 * bound in that order, so the group's sockets are est[0], hs[0], est[1],
 * hs[1], ... The kernel reads the worker octet of each datagram's
 * destination CID (cid.h: the CIDs whose first octet is `first`, with the
 * worker at `worker_off`) and delivers it to that worker's socket; a
 * client's first flight, whose CID is its own, goes to the hs socket of
 * the worker its CID's last octet picks (modulo n), so that its Initials
 * and 0-RTT packets all reach one worker. Returns 0, or -1 with *cause set
 * and nothing left open.
 */
int udp_open_workers(struct udp_socket *est, struct udp_socket *hs, size_t n,
    int family, const struct sockaddr *bind, socklen_t bindlen,
    uint8_t first, size_t worker_off, char **cause);
void udp_close(struct udp_socket *);

/* One receive: `buf` holds packets back to back, each `segsize` bytes but
 * the last (GRO), all from `peer`. */
struct udp_recv {
	uint8_t buf[UDP_GRO_BUF];
	size_t len;
	size_t segsize;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	uint8_t ecn;
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(int)) * 4]; /* UDP_GRO, IP_TOS, ... */
	} ctl;
};
/* Up to `n` receives in one recvmmsg call. Returns how many (fewer than
 * `n`: the socket was drained, no need to ask again), 0 on EAGAIN, or
 * -errno. */
int udp_recv_many(struct udp_socket *, struct udp_recv *, size_t n);
/* One receive: 1 when something was read, 0 on EAGAIN, -errno. */
int udp_recv(struct udp_socket *, struct udp_recv *);

/* Outgoing packets of one socket, flushed together. Packets are written
 * straight into the batch's buffer (udp_batch_slot) to avoid a copy. */
struct udp_batch {
	struct udp_socket *sock;
	uint8_t buf[UDP_BATCH_MAX * UDP_MAX_PAYLOAD];
	size_t len[UDP_BATCH_MAX];
	struct sockaddr_storage dst[UDP_BATCH_MAX];
	socklen_t dstlen[UDP_BATCH_MAX];
	uint8_t ecn[UDP_BATCH_MAX];  /* ECN codepoint for the IP header */
	size_t n;
	uint64_t sent_packets, send_errors;
};

void udp_batch_init(struct udp_batch *, struct udp_socket *);
/* Space for the next packet (UDP_MAX_PAYLOAD bytes); flushes first if full. */
uint8_t *udp_batch_slot(struct udp_batch *);
/* Commit `len` bytes written into the last slot, destined for `dst`, with
 * ECN codepoint `ecn` (the low two bits of IP_TOS / IPV6_TCLASS). */
void udp_batch_commit(struct udp_batch *, size_t len, const struct sockaddr *dst,
    socklen_t dstlen, uint8_t ecn);
/* Send everything queued. Packets the kernel refuses are dropped and
 * counted (QUIC recovers them like any loss). */
void udp_batch_flush(struct udp_batch *);

#endif

/* UDP sockets: forced buffers, GRO receive, GSO batched send. */
#include <linux/filter.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "udp.h"
#include "wire/cid.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* Big enough to absorb a burst at several Gbit/s. The net.core limits cannot
 * be raised inside a namespace, so use the FORCE variants when root. */
#define UDP_SOCKBUF (8 * 1024 * 1024)

/* The handshake socket's queue: a restart storm's first flights arrive
 * all at once, one datagram per buffer (no GRO there), and what the queue
 * cannot hold is only sent again a probe timeout later. 10,000 clients
 * with the hybrid key share send two Initials each. */
#define UDP_HS_RCVBUF (32 * 1024 * 1024)

static void
set_rcvbuf(int fd, int size)
{
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) == -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

static void
set_buffers(int fd)
{
	int size = UDP_SOCKBUF;

	set_rcvbuf(fd, size);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) == -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

static int
open_socket(struct udp_socket *s, int family, const struct sockaddr *bind_addr,
    socklen_t bindlen, bool reuseport, char **cause)
{
	char buf[ADDR_STRLEN];
	int one = 1, fd;

	memset(s, 0, sizeof *s);
	s->fd = -1;
	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (fd == -1) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	if (family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	set_buffers(fd);
	/* ECN bits of received packets, for ngtcp2's congestion control. */
	if (family == AF_INET)
		(void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
	else
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
	/* Fragmentation would hide a too-small path; QUIC sizes packets itself. */
	if (family == AF_INET) {
		int pmtu = IP_PMTUDISC_PROBE;
		(void)setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
	} else {
		int pmtu = IPV6_PMTUDISC_PROBE;
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
	}
	(void)setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
	    sizeof one) == -1) {
		xasprintf(cause, "SO_REUSEPORT: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (bind_addr != NULL && bind(fd, bind_addr, bindlen) == -1) {
		xasprintf(cause, "bind %s: %s", addr_sockaddr_str(bind_addr, buf),
		    strerror(errno));
		close(fd);
		return -1;
	}
	s->fd = fd;
	s->family = family;
	s->locallen = sizeof s->local;
	if (getsockname(fd, (struct sockaddr *)&s->local, &s->locallen) == -1)
		s->locallen = 0;
	/* GSO needs a kernel that knows UDP_SEGMENT; probe it once. */
	{
		int seg = 0;
		s->gso = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg) == 0;
	}
	return 0;
}

int
udp_open(struct udp_socket *s, int family, const struct sockaddr *bind_addr,
    socklen_t bindlen, char **cause)
{
	return open_socket(s, family, bind_addr, bindlen, false, cause);
}

/*
 * The kernel picks the socket of a SO_REUSEPORT group for each datagram by
 * running this classic BPF program on its UDP payload: a QUIC long header
 * (first bit set: Initial, 0-RTT, Handshake, Retry) goes to the group's
 * second socket, anything else to the first. The return value indexes the
 * group in the order its sockets were bound.
 */
static const struct sock_filter steer_long_headers[] = {
	BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
	BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, 0),
	BPF_STMT(BPF_RET | BPF_K, 1),
};

/* A group of SO_REUSEPORT sockets admits any socket of the same user
 * that sets the option too: a second roved (another config) would join
 * this one's port, take a share of its datagrams and answer them with
 * "unknown peer". Before the group is made, a plain bind to the address
 * says whether anyone holds it already. */
static int
address_free(int family, const struct sockaddr *bind_addr, socklen_t bindlen,
    char **cause)
{
	char buf[ADDR_STRLEN];
	int one = 1, fd, err;

	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (fd == -1)
		return 0; /* the real open will say why */
	if (family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	err = bind(fd, bind_addr, bindlen) == -1 ? errno : 0;
	close(fd);
	if (err == EADDRINUSE) {
		xasprintf(cause, "bind %s: address already in use by another "
		    "program (another roved?)", addr_sockaddr_str(bind_addr, buf));
		return -1;
	}
	return 0;
}

int
udp_open_split(struct udp_socket *est, struct udp_socket *hs, int family,
    const struct sockaddr *bind_addr, socklen_t bindlen, char **cause)
{
	struct sock_fprog prog = {
		.len = sizeof steer_long_headers / sizeof steer_long_headers[0],
		.filter = (struct sock_filter *)steer_long_headers,
	};
	int zero = 0;

	hs->fd = -1;
	if (address_free(family, bind_addr, bindlen, cause) != 0 ||
	    open_socket(est, family, bind_addr, bindlen, true, cause) != 0)
		return -1;
	/* Bound to what the first one got (its port, if bind_addr had 0). */
	if (open_socket(hs, family, (const struct sockaddr *)&est->local,
	    est->locallen, true, cause) != 0) {
		udp_close(est);
		return -1;
	}
	if (setsockopt(est->fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
	    sizeof prog) == -1) {
		xasprintf(cause, "SO_ATTACH_REUSEPORT_CBPF: %s", strerror(errno));
		udp_close(hs);
		udp_close(est);
		return -1;
	}
	/* Long headers are handshakes: one datagram per read keeps the work
	 * of one read small and bounded, whatever a flood coalesces. */
	(void)setsockopt(hs->fd, SOL_UDP, UDP_GRO, &zero, sizeof zero);
	set_rcvbuf(hs->fd, UDP_HS_RCVBUF);
	return 0;
}

/* Offsets in the UDP payload: the DCID of a short header starts at 1; a
 * long header has the DCID's length at 5 and the DCID from 6. */
#define SHORT_DCID 1
#define LONG_DCID_LEN 5
#define LONG_DCID 6

int
udp_open_workers(struct udp_socket *est, struct udp_socket *hs, size_t n,
    int family, const struct sockaddr *bind_addr, socklen_t bindlen,
    uint8_t first, size_t worker_off, char **cause)
{
	/* The return value indexes the group: 2w for worker w's est socket,
	 * 2w + 1 for its hs socket. A datagram too short for a load ends
	 * the program with 0 (worker 0), which drops or resets it. */
	const struct sock_filter steer[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 7, 0),
		/* Short header: ours, then the worker octet. */
		/* 2 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SHORT_DCID),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, first, 0, 4),
		/* 4 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS,
		    (uint32_t)(SHORT_DCID + worker_off)),
		/* 5 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)n, 2, 0),
		/* 6 */ BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 1),
		/* 7 */ BPF_STMT(BPF_RET | BPF_A, 0),
		/* 8 */ BPF_STMT(BPF_RET | BPF_K, 0),
		/* Long header with our CID (Handshake, an Initial after our
		 * Retry): the worker octet. */
		/* 9 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, LONG_DCID_LEN),
		/* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CID_LEN, 0, 5),
		/* 11 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, LONG_DCID),
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, first, 0, 3),
		/* 13 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS,
		    (uint32_t)(LONG_DCID + worker_off)),
		/* 14 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)n, 1, 0),
		/* 15 */ BPF_JUMP(BPF_JMP | BPF_JA, 4, 0, 0),
		/* A client's own CID: its last octet, modulo n. X = length,
		 * so [X + 5] is the DCID's last octet. */
		/* 16 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, LONG_DCID_LEN),
		/* 17 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
		/* 18 */ BPF_STMT(BPF_LD | BPF_B | BPF_IND, LONG_DCID_LEN),
		/* 19 */ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, (uint32_t)n),
		/* 20 */ BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 1),
		/* 21 */ BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 1),
		/* 22 */ BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct sock_fprog prog = {
		.len = sizeof steer / sizeof steer[0],
		.filter = (struct sock_filter *)steer,
	};
	int zero = 0;
	size_t w;

	for (w = 0; w < n; w++)
		est[w].fd = hs[w].fd = -1;
	if (address_free(family, bind_addr, bindlen, cause) != 0)
		return -1;
	for (w = 0; w < n; w++) {
		const struct sockaddr *at = w == 0 ? bind_addr :
		    (const struct sockaddr *)&est[0].local;
		socklen_t atlen = w == 0 ? bindlen : est[0].locallen;

		if (open_socket(&est[w], family, at, atlen, true, cause) != 0 ||
		    open_socket(&hs[w], family, (const struct sockaddr *)&est[0].local,
		    est[0].locallen, true, cause) != 0)
			goto fail;
		(void)setsockopt(hs[w].fd, SOL_UDP, UDP_GRO, &zero, sizeof zero);
		set_rcvbuf(hs[w].fd, UDP_HS_RCVBUF);
	}
	if (setsockopt(est[0].fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
	    sizeof prog) == -1) {
		xasprintf(cause, "SO_ATTACH_REUSEPORT_CBPF: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	for (w = 0; w < n; w++) {
		udp_close(&est[w]);
		udp_close(&hs[w]);
	}
	return -1;
}

void
udp_close(struct udp_socket *s)
{
	if (s->fd != -1)
		close(s->fd);
	s->fd = -1;
}

/* The GRO segment size and the ECN bits of one receive. */
static void
parse_cmsgs(struct udp_recv *r, struct msghdr *msg)
{
	r->segsize = r->len;
	r->ecn = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
		int v;
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			memcpy(&v, CMSG_DATA(c), sizeof v);
			if (v > 0)
				r->segsize = (size_t)v;
		} else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
		    (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
			uint8_t tos;
			if (c->cmsg_level == IPPROTO_IP)
				memcpy(&tos, CMSG_DATA(c), 1);
			else {
				memcpy(&v, CMSG_DATA(c), sizeof v);
				tos = (uint8_t)v;
			}
			r->ecn = tos & 0x3;
		}
	}
}

int
udp_recv_many(struct udp_socket *s, struct udp_recv *r, size_t n)
{
	struct mmsghdr mm[UDP_RECV_BATCH];
	struct iovec iov[UDP_RECV_BATCH];
	int got;

	if (n > UDP_RECV_BATCH)
		n = UDP_RECV_BATCH;
	for (size_t i = 0; i < n; i++) {
		iov[i].iov_base = r[i].buf;
		iov[i].iov_len = sizeof r[i].buf;
		memset(&mm[i], 0, sizeof mm[i]);
		mm[i].msg_hdr.msg_name = &r[i].peer;
		mm[i].msg_hdr.msg_namelen = sizeof r[i].peer;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_control = r[i].ctl.buf;
		mm[i].msg_hdr.msg_controllen = sizeof r[i].ctl.buf;
	}
	do {
		got = recvmmsg(s->fd, mm, (unsigned int)n, MSG_DONTWAIT, NULL);
	} while (got == -1 && errno == EINTR);
	if (got == -1)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	for (int i = 0; i < got; i++) {
		r[i].len = mm[i].msg_len;
		r[i].peerlen = mm[i].msg_hdr.msg_namelen;
		parse_cmsgs(&r[i], &mm[i].msg_hdr);
	}
	return got;
}

int
udp_recv(struct udp_socket *s, struct udp_recv *r)
{
	return udp_recv_many(s, r, 1);
}

void
udp_batch_init(struct udp_batch *b, struct udp_socket *s)
{
	b->sock = s;
	b->n = 0;
	b->sent_packets = 0;
	b->send_errors = 0;
}

uint8_t *
udp_batch_slot(struct udp_batch *b)
{
	if (b->n == UDP_BATCH_MAX)
		udp_batch_flush(b);
	return b->buf + b->n * UDP_MAX_PAYLOAD;
}

void
udp_batch_commit(struct udp_batch *b, size_t len, const struct sockaddr *dst,
    socklen_t dstlen, uint8_t ecn)
{
	b->len[b->n] = len;
	b->ecn[b->n] = ecn & 0x3;
	memcpy(&b->dst[b->n], dst, dstlen);
	b->dstlen[b->n] = dstlen;
	b->n++;
}

/* Send packets [first, first+count) as one GSO super-packet: they share a
 * destination and an ECN codepoint, and all but the last have the same
 * size. */
static void
send_run(struct udp_batch *b, size_t first, size_t count)
{
	struct iovec iov[UDP_BATCH_MAX];
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int))];
	} ctl;
	struct cmsghdr *c = NULL;
	size_t ctllen = 0;
	struct msghdr msg = {
		.msg_name = &b->dst[first],
		.msg_namelen = b->dstlen[first],
		.msg_iov = iov,
		.msg_iovlen = count,
	};
	ssize_t n;

	for (size_t i = 0; i < count; i++) {
		iov[i].iov_base = b->buf + (first + i) * UDP_MAX_PAYLOAD;
		iov[i].iov_len = b->len[first + i];
	}
	memset(&ctl, 0, sizeof ctl);
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof ctl.buf;
	if (count > 1) {
		uint16_t seg = (uint16_t)b->len[first];

		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof seg);
		memcpy(CMSG_DATA(c), &seg, sizeof seg);
		ctllen += CMSG_SPACE(sizeof seg);
	}
	if (b->ecn[first] != 0) {
		/* Per packet (run), not per socket: ngtcp2 decides, and
		 * marks only once ECN has been validated on the path. */
		int tos = b->ecn[first];

		c = c == NULL ? CMSG_FIRSTHDR(&msg) : CMSG_NXTHDR(&msg, c);
		c->cmsg_level = b->sock->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
		c->cmsg_type = b->sock->family == AF_INET ? IP_TOS : IPV6_TCLASS;
		c->cmsg_len = CMSG_LEN(sizeof tos);
		memcpy(CMSG_DATA(c), &tos, sizeof tos);
		ctllen += CMSG_SPACE(sizeof tos);
	}
	msg.msg_controllen = ctllen;
	if (ctllen == 0)
		msg.msg_control = NULL;
	do {
		n = sendmsg(b->sock->fd, &msg, 0);
	} while (n == -1 && errno == EINTR);
	if (n == -1) {
		/* A full socket buffer or a vanished route: the packets are lost
		 * and QUIC's loss recovery resends what matters. */
		static struct log_ratelimit rl = LOG_RATELIMIT_INIT(1000, 1);

		b->send_errors += count;
		if (log_get_level() >= LOG_LEVEL_DEBUG &&
		    log_ratelimit_ok(&rl, clock_now_ms()))
			log_debug("%s: sendmsg of %zu packets: %s", __func__, count,
			    strerror(errno));
	} else
		b->sent_packets += count;
}

void
udp_batch_flush(struct udp_batch *b)
{
	size_t i = 0;

	while (i < b->n) {
		size_t run = 1;

		if (b->sock->gso) {
			/* Extend the run while sizes match and the destination is
			 * the same; a shorter packet may end it. GSO caps a run at
			 * 64 segments and 64 KiB. */
			size_t total = b->len[i];
			while (i + run < b->n && run < 64 &&
			    b->ecn[i + run] == b->ecn[i] &&
			    b->dstlen[i + run] == b->dstlen[i] &&
			    memcmp(&b->dst[i + run], &b->dst[i], b->dstlen[i]) == 0 &&
			    b->len[i + run] <= b->len[i] &&
			    total + b->len[i + run] <= 65000) {
				total += b->len[i + run];
				run++;
				if (b->len[i + run - 1] < b->len[i])
					break;
			}
		}
		send_run(b, i, run);
		i += run;
	}
	b->n = 0;
}

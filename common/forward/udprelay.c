/* UDP flows at work: streams that set them up, DATAGRAMs that carry them,
 * sockets at either end (docs/PROTOCOL.md section 5). */
#include "forward/udprelay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "forward/stream-tag.h"
#include "wire/varint.h"

/* Opener: datagrams of a new flow held until the acceptor answers; a
 * DNS client's retry or two, not a stream of them. */
#define LINK_QUEUE 8
/* Datagrams read from one socket per readiness, so that one busy flow
 * or listener does not hold up the rest of the loop. */
#define READ_BURST 16
/* The largest UDP payload, and room for the context in front. */
#define DGRAM_BUF (65535 + 8)

struct held_dgram {
	uint8_t *data;
	size_t len;
};

struct udp_link {
	struct stream_tag tag;  /* first: the stream argument's kind */
	struct udp_relay *r;
	struct udp_flow *flow;
	int64_t sid;          /* -1: the stream is over */
	uint64_t reset_code;  /* what our reset of the stream says */
	int fd;               /* acceptor: the connected socket (ours);
	                       * opener: the forward's listening socket */
	struct sockaddr_storage src; /* opener: where answers go */
	socklen_t srclen;
	struct event *ev;     /* acceptor: fd is readable */
	void *work;           /* acceptor: the owner's check and dial */
	bool opener;          /* this side set the flow up */
	bool ready;           /* answered (opener) / connected (acceptor) */
	uint8_t *prefix;      /* opener, SOCKS: put in front of answers */
	size_t prefixlen;
	struct held_dgram q[LINK_QUEUE];
	size_t nq;
};

static struct log_ratelimit refuse_rl = LOG_RATELIMIT_INIT(10000, 5);
static uint8_t dgram_buf[DGRAM_BUF];

static void
link_release(struct udp_flow *flow, void *arg)
{
	struct udp_link *l = flow->arg;
	struct udp_relay *r = arg;

	if (l == NULL)
		return;
	if (l->sid >= 0 && r->qc != NULL) {
		quic_conn_stream_set_arg(r->qc, l->sid, NULL);
		quic_conn_stream_reset(r->qc, l->sid, l->reset_code);
	}
	if (l->work != NULL && r->cancel != NULL)
		r->cancel(l->work);
	if (l->ev != NULL)
		event_free(l->ev);
	if (!l->opener && l->fd >= 0)
		close(l->fd);
	for (size_t i = 0; i < l->nq; i++)
		free(l->q[i].data);
	free(l->prefix);
	free(l);
	flow->arg = NULL;
}

static void
expire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct udp_relay *r = arg;
	uint64_t next;

	(void)fd;
	(void)what;
	next = udp_flows_expire(&r->set, clock_now_ms(), link_release, r);
	if (next != UINT64_MAX) {
		struct timeval tv = { (time_t)(next / 1000),
		    (suseconds_t)(next % 1000) * 1000 };

		evtimer_add(r->expire_ev, &tv);
	}
}

static void
arm_expiry(struct udp_relay *r)
{
	if (!evtimer_pending(r->expire_ev, NULL)) {
		struct timeval tv = { (time_t)(r->set.idle_ms / 1000),
		    (suseconds_t)(r->set.idle_ms % 1000) * 1000 };

		evtimer_add(r->expire_ev, &tv);
	}
}

void
udp_relay_init(struct udp_relay *r, struct event_base *base,
    enum proto_udp_opener self, struct udp_flow_counters *counters,
    udp_request_cb request, udp_cancel_cb cancel, void *arg,
    const char *log_name)
{
	memset(r, 0, sizeof *r);
	r->base = base;
	udp_flows_init(&r->set, self, UDP_FLOW_MAX, UDP_FLOW_IDLE_MS, counters);
	r->request = request;
	r->cancel = cancel;
	r->arg = arg;
	r->log_name = log_name;
	if ((r->expire_ev = evtimer_new(base, expire_cb, r)) == NULL)
		fatalx("out of memory");
}

/* The old connection's streams go with it: nothing to reset there. */
void
udp_relay_attach(struct udp_relay *r, struct quic_conn *qc)
{
	/* The connection they were on may live on a while (closing, or
	 * given up for another transport): their streams there forget
	 * them, or its next event would hand the owner a freed link. */
	udp_flows_clear(&r->set, link_release, r);
	r->qc = qc;
}

void
udp_relay_clear(struct udp_relay *r)
{
	if (r->expire_ev == NULL)
		return;
	r->qc = NULL;
	udp_flows_clear(&r->set, link_release, r);
	event_free(r->expire_ev);
	r->expire_ev = NULL;
}

/* One datagram of the flow to the peer, whole or not at all. */
static void
send_dgram(struct udp_link *l, const uint8_t *data, size_t len)
{
	struct udp_relay *r = l->r;
	size_t max = quic_conn_dgram_max(r->qc), n;
	int rc;

	if (max > sizeof dgram_buf)
		max = sizeof dgram_buf;
	n = proto_udp_dgram_encode(dgram_buf, max, l->flow->ctx, data, len);
	if (n == 0) {
		udp_flow_drop(&r->set, l->flow, UDP_DROP_TOO_BIG);
		return;
	}
	if ((rc = quic_conn_send_datagram(r->qc, dgram_buf, n)) < 0) {
		udp_flow_drop(&r->set, l->flow, rc == -EMSGSIZE ?
		    UDP_DROP_TOO_BIG : UDP_DROP_QUEUE);
		return;
	}
	udp_flow_tx(&r->set, l->flow, len, clock_now_ms());
}

static void
flush_held(struct udp_link *l)
{
	for (size_t i = 0; i < l->nq; i++) {
		send_dgram(l, l->q[i].data, l->q[i].len);
		free(l->q[i].data);
	}
	l->nq = 0;
}

/* Opener: the flow was refused (an answer other than 0, or a reset). */
static void
link_refused(struct udp_link *l, uint64_t code)
{
	struct udp_relay *r = l->r;

	if (log_ratelimit_ok(&refuse_rl, clock_now_ms()))
		log_warn("UDP flow to %s refused by %s: %s", l->flow->target,
		    r->log_name, proto_fwd_error_name(code));
	for (size_t i = 0; i < l->nq; i++) {
		free(l->q[i].data);
		udp_flow_drop(&r->set, l->flow, UDP_DROP_REFUSED);
	}
	l->nq = 0;
	udp_flow_refused(&r->set, l->flow);
}

/* The source's flow on this socket: for a SOCKS relay (`socks`), the
 * one to this target; for a LocalForward's or a remote forward's socket,
 * its only one. A program may send from one port to both kinds, or to two
 * forwards: their flows stay apart. */
static struct udp_flow *
source_flow(struct udp_relay *r, int fd, const struct ipaddr *a,
    uint16_t port, bool socks, const char *target)
{
	struct udp_flow *flow;

	TAILQ_FOREACH(flow, &r->set.list, link) {
		const struct udp_link *l = flow->arg;

		if (l != NULL && l->opener && l->fd == fd &&
		    (l->prefix != NULL) == socks &&
		    flow->src_port == port && addr_equal(&flow->src, a) &&
		    (!socks || strcmp(flow->target, target) == 0))
			return flow;
	}
	return NULL;
}

static void
from_source(struct udp_relay *r, int fd, const struct sockaddr *src,
    const char *host, uint16_t port, const uint8_t *prefix, size_t prefixlen,
    const uint8_t *data, size_t len)
{
	/* The client names the target; roved names its listener's port,
	 * whose target only the client knows. */
	struct proto_udp_header hdr = { .type = r->set.self ==
	    PROTO_UDP_BY_CLIENT ? PROTO_FWD_UDP_CONNECT : PROTO_FWD_UDP_REMOTE };
	uint8_t hbuf[PROTO_FWD_MAX_HOST + 32];
	char target[PROTO_FWD_MAX_HOST + 8];
	struct udp_flow *flow;
	struct udp_link *l;
	struct ipaddr a;
	uint16_t sport;
	size_t n;

	if (addr_from_sockaddr(src, &a, &sport) != 0)
		return;
	if (hdr.type == PROTO_FWD_UDP_REMOTE)
		snprintf(target, sizeof target, "remote port %u",
		    (unsigned)port);
	else
		addr_hostport_str(target, sizeof target, host, port);
	if ((flow = source_flow(r, fd, &a, sport, prefix != NULL,
	    target)) == NULL) {
		if (r->qc == NULL) {
			udp_flow_drop(&r->set, NULL, UDP_DROP_NO_FLOW);
			return;
		}
		if ((flow = udp_flow_open(&r->set, &a, sport, target,
		    clock_now_ms())) == NULL)
			return;
		l = xcalloc(1, sizeof *l);
		l->tag.kind = STREAM_UDP_FLOW;
		l->r = r;
		l->flow = flow;
		l->fd = fd;
		l->sid = -1;
		l->opener = true;
		l->srclen = src->sa_family == AF_INET6 ?
		    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
		memcpy(&l->src, src, l->srclen);
		if (prefix != NULL) {
			l->prefix = xmalloc(prefixlen > 0 ? prefixlen : 1);
			memcpy(l->prefix, prefix, prefixlen);
			l->prefixlen = prefixlen;
		}
		flow->arg = l;
		hdr.ctx = flow->ctx;
		if (hdr.type == PROTO_FWD_UDP_CONNECT)
			snprintf(hdr.host, sizeof hdr.host, "%s", host);
		hdr.port = port;
		if ((n = proto_udp_encode(hbuf, sizeof hbuf, &hdr)) == 0 ||
		    (l->sid = quic_conn_open_stream(r->qc, l)) < 0) {
			udp_flow_drop(&r->set, flow, UDP_DROP_LIMIT);
			udp_flow_close(&r->set, flow, link_release, r);
			return;
		}
		(void)quic_conn_stream_send(r->qc, l->sid, hbuf, n, false);
		arm_expiry(r);
	}
	l = flow->arg;
	if (flow->refused || l == NULL) {
		udp_flow_drop(&r->set, flow, UDP_DROP_REFUSED);
		return;
	}
	if (l->ready) {
		send_dgram(l, data, len);
		return;
	}
	/* Held only if it could ever go: what a sender can make a flow in
	 * set-up hold is LINK_QUEUE packets of the path's size, not of
	 * 64 KiB each (flows x LINK_QUEUE x 64 KiB would be 128 MiB). */
	if (varint_len(flow->ctx) + len > quic_conn_dgram_max(r->qc)) {
		udp_flow_drop(&r->set, flow, UDP_DROP_TOO_BIG);
		return;
	}
	if (l->nq == LINK_QUEUE) {
		udp_flow_drop(&r->set, flow, UDP_DROP_QUEUE);
		return;
	}
	l->q[l->nq].data = xmalloc(len > 0 ? len : 1);
	memcpy(l->q[l->nq].data, data, len);
	l->q[l->nq++].len = len;
}

/* A burst read in one system call. No path's DATAGRAM frames carry more
 * than READ_DGRAM_MAX bytes (quic_conn_dgram_max: a 1500-byte path's, on
 * either transport): a longer datagram is cut, and dropped as too big. */
#define READ_DGRAM_MAX 2048

void
udp_relay_read(struct udp_relay *r, int fd, const char *host, uint16_t port,
    bool refuse)
{
	static uint8_t buf[READ_BURST][READ_DGRAM_MAX];
	static struct sockaddr_storage src[READ_BURST];
	static struct iovec iov[READ_BURST];
	static struct mmsghdr msg[READ_BURST];
	int n;

	for (int i = 0; i < READ_BURST; i++) {
		iov[i] = (struct iovec){ buf[i], sizeof buf[i] };
		msg[i].msg_hdr = (struct msghdr){
			.msg_name = &src[i], .msg_namelen = sizeof src[i],
			.msg_iov = &iov[i], .msg_iovlen = 1,
		};
	}
	/* A burst, so that one busy source does not hold up the loop. */
	if ((n = recvmmsg(fd, msg, READ_BURST, MSG_DONTWAIT, NULL)) <= 0)
		return;
	for (int i = 0; i < n; i++) {
		if (refuse) {
			udp_flow_drop(&r->set, NULL, UDP_DROP_REFUSED);
			continue;
		}
		if (msg[i].msg_hdr.msg_flags & MSG_TRUNC) {
			udp_flow_drop(&r->set, NULL, UDP_DROP_TOO_BIG);
			continue;
		}
		udp_relay_from_source(r, fd, (struct sockaddr *)&src[i], host,
		    port, buf[i], msg[i].msg_len);
	}
}

void
udp_relay_from_source(struct udp_relay *r, int fd, const struct sockaddr *src,
    const char *host, uint16_t port, const uint8_t *data, size_t len)
{
	from_source(r, fd, src, host, port, NULL, 0, data, len);
}

void
udp_relay_from_socks(struct udp_relay *r, int fd, const struct sockaddr *src,
    const char *host, uint16_t port, const uint8_t *prefix, size_t prefixlen,
    const uint8_t *data, size_t len)
{
	from_source(r, fd, src, host, port, prefix, prefixlen, data, len);
}

void
udp_relay_forget_fd(struct udp_relay *r, int fd)
{
	struct udp_flow *flow, *next;

	for (flow = TAILQ_FIRST(&r->set.list); flow != NULL; flow = next) {
		struct udp_link *l = flow->arg;

		next = TAILQ_NEXT(flow, link);
		if (l != NULL && l->opener && l->fd == fd)
			udp_flow_close(&r->set, flow, link_release, r);
	}
}

void
udp_relay_datagram(struct udp_relay *r, const uint8_t *data, size_t len)
{
	struct udp_flow *flow;
	struct udp_link *l;
	uint64_t ctx;
	size_t used;
	ssize_t n;

	if ((used = varint_get(data, len, &ctx)) == 0 ||
	    (flow = udp_flow_by_ctx(&r->set, ctx)) == NULL ||
	    (l = flow->arg) == NULL || !l->ready) {
		udp_flow_drop(&r->set, NULL, UDP_DROP_NO_FLOW);
		return;
	}
	data += used;
	len -= used;
	if (l->opener && l->prefix != NULL) {
		/* The SOCKS header, then the payload, as one datagram. */
		struct iovec iov[2] = {
			{ l->prefix, l->prefixlen },
			{ (void *)(uintptr_t)data, len },
		};
		struct msghdr mh = {
			.msg_name = &l->src,
			.msg_namelen = l->srclen,
			.msg_iov = iov,
			.msg_iovlen = 2,
		};

		n = sendmsg(l->fd, &mh, MSG_DONTWAIT);
	} else if (l->opener) {
		n = sendto(l->fd, data, len, MSG_DONTWAIT,
		    (const struct sockaddr *)&l->src, l->srclen);
	} else
		n = send(l->fd, data, len, MSG_DONTWAIT);
	if (n < 0) {
		udp_flow_drop(&r->set, flow, UDP_DROP_QUEUE);
		return;
	}
	udp_flow_rx(&r->set, flow, len, clock_now_ms());
}

/* Acceptor: the target's datagrams, back to the peer. */
static void
target_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct udp_link *l = arg;

	(void)what;
	for (int i = 0; i < READ_BURST; i++) {
		ssize_t n = recv(fd, dgram_buf + 8, sizeof dgram_buf - 8,
		    MSG_DONTWAIT);
		uint8_t *copy;

		if (n < 0)
			return;
		/* send_dgram encodes into dgram_buf: move the payload out. */
		copy = xmalloc((size_t)n + 1);
		memcpy(copy, dgram_buf + 8, (size_t)n);
		send_dgram(l, copy, (size_t)n);
		free(copy);
	}
}

void
udp_link_dialed(struct udp_link *l, int fd, uint64_t err)
{
	struct udp_relay *r = l->r;
	static const uint8_t ok = PROTO_FWD_OK;

	l->work = NULL;
	if (fd < 0) {
		r->set.counters->refused++;
		l->reset_code = err;
		udp_flow_close(&r->set, l->flow, link_release, r);
		return;
	}
	l->fd = fd;
	l->ev = event_new(r->base, fd, EV_READ | EV_PERSIST, target_read_cb, l);
	if (l->ev == NULL)
		fatalx("out of memory");
	event_add(l->ev, NULL);
	l->ready = true;
	(void)quic_conn_stream_send(r->qc, l->sid, &ok, 1, false);
}

static struct udp_link *
link_of(struct udp_relay *r, void *stream_arg)
{
	struct udp_link *l = stream_arg;

	return stream_kind_of(stream_arg) == STREAM_UDP_FLOW && l->r == r ?
	    l : NULL;
}

/* Acceptor: a new stream from the peer that begins with a UDP header. */
static void
accept_stream(struct udp_relay *r, int64_t sid, const uint8_t *data,
    size_t len)
{
	struct proto_udp_header hdr;
	char target[PROTO_FWD_MAX_HOST + 8];
	struct udp_flow *flow;
	struct udp_link *l;
	uint64_t err = PROTO_FWD_ERR_PROTOCOL;
	/* roved takes the client's flows to a target, the client roved's
	 * from a remote-forward listener. */
	uint64_t want = r->set.self == PROTO_UDP_BY_SERVER ?
	    PROTO_FWD_UDP_CONNECT : PROTO_FWD_UDP_REMOTE;
	long used;

	quic_conn_stream_consume(r->qc, sid, len);
	/* The opener writes its header at once: it comes whole. */
	used = proto_udp_decode(data, len, &hdr);
	if (used <= 0 || hdr.type != want || r->request == NULL) {
		r->set.counters->refused++;
		quic_conn_stream_reset(r->qc, sid, PROTO_FWD_ERR_PROTOCOL);
		return;
	}
	if (hdr.type == PROTO_FWD_UDP_REMOTE)
		snprintf(target, sizeof target, "remote port %u",
		    (unsigned)hdr.port);
	else
		addr_hostport_str(target, sizeof target, hdr.host, hdr.port);
	if ((flow = udp_flow_accept(&r->set, hdr.ctx, target, clock_now_ms(),
	    &err)) == NULL) {
		if (log_ratelimit_ok(&refuse_rl, clock_now_ms()))
			log_warn("peer %s: UDP flow to %s refused: %s",
			    r->log_name, target, proto_fwd_error_name(err));
		quic_conn_stream_reset(r->qc, sid, err);
		return;
	}
	l = xcalloc(1, sizeof *l);
	l->tag.kind = STREAM_UDP_FLOW;
	l->r = r;
	l->flow = flow;
	l->sid = sid;
	l->fd = -1;
	flow->arg = l;
	quic_conn_stream_set_arg(r->qc, sid, l);
	arm_expiry(r);
	err = PROTO_FWD_OK;
	l->work = r->request(l, hdr.host, hdr.port, r->arg, &err);
	if (l->work == NULL && err != PROTO_FWD_OK)
		udp_link_dialed(l, -1, err);
}

bool
udp_relay_stream_data(struct udp_relay *r, int64_t sid, void *stream_arg,
    const uint8_t *data, size_t len, bool fin)
{
	struct udp_link *l;

	if (r->qc == NULL)
		return false;
	if (stream_arg == NULL) {
		if (quic_conn_stream_is_local(r->qc, sid) ||
		    len == 0 || proto_udp_is_udp(data, len) != 1)
			return false;
		accept_stream(r, sid, data, len);
		return true;
	}
	if ((l = link_of(r, stream_arg)) == NULL)
		return false;
	quic_conn_stream_consume(r->qc, sid, len);
	if (l->opener && !l->ready && !l->flow->refused && len > 0) {
		if (data[0] == PROTO_FWD_OK) {
			l->ready = true;
			flush_held(l);
		} else {
			link_refused(l, PROTO_FWD_ERR_PROTOCOL);
		}
	}
	if (fin) {
		l->sid = -1;
		quic_conn_stream_set_arg(r->qc, sid, NULL);
		udp_flow_close(&r->set, l->flow, link_release, r);
	}
	return true;
}

bool
udp_relay_stream_gone(struct udp_relay *r, int64_t sid, void *stream_arg,
    uint64_t code)
{
	struct udp_link *l = link_of(r, stream_arg);

	if (l == NULL)
		return false;
	if (r->qc != NULL)
		quic_conn_stream_set_arg(r->qc, sid, NULL);
	l->sid = -1;
	/* A refused flow stays, dropping its source's datagrams until it
	 * expires, rather than asking again for each one. */
	if (l->opener && !l->ready) {
		link_refused(l, code);
		return true;
	}
	udp_flow_close(&r->set, l->flow, link_release, r);
	return true;
}

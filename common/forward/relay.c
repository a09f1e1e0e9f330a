/* TCP <-> QUIC stream relay with bounded buffers and per-direction close. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "relay.h"
#include "wire/proto-fwd.h"

#define RELAY_READ_CHUNK 65536

struct relay {
	struct event_base *base;
	struct quic_conn *qc;
	int64_t sid;
	int fd;
	size_t cap;
	struct event *rd_ev, *wr_ev, *done_ev;

	struct evbuffer *out;    /* stream bytes waiting for TCP */
	bool tcp_rd_open;        /* still reading TCP (no EOF yet) */
	bool fin_rcvd;           /* the stream's FIN arrived */
	bool tcp_wr_shut;        /* FIN passed on to TCP */
	bool stream_gone;        /* ngtcp2 closed the stream */
	bool rd_armed, wr_armed, cl_armed;
	bool wr_blocked;         /* TCP's send buffer was full at the last write */
	bool wr_sched;           /* write_cb made active without being armed */
	bool eof_seen;           /* the TCP peer's FIN, seen while paused */
	bool finished;
	uint64_t err;
	relay_done_cb done;
	void *arg;
	struct relay_stats stats;

	/* Moving to another connection (relay_park, _attach, _resume). Our
	 * bytes are numbered from the first read from TCP (stats.tcp_to_quic
	 * is the next number); on the current stream they start at offset
	 * `tx_base`, after the header or the answer. */
	uint64_t tx_base;
	uint64_t rx_total;     /* the peer's bytes taken, over every stream */
	/* Parked (set while there is no stream to send on, and TCP reading
	 * waits): our bytes the peer may lack ... */
	struct evbuffer *kept;
	uint64_t kept_from;    /* ... starting with this one */
	/* Bytes in `out` that came on an earlier stream: their credit went
	 * with it, and is not given on the new one. */
	size_t out_old;
};

static void update(struct relay *);
static void closed_cb(struct relay *);
static void unwatch(struct relay *);

/* While reading is paused by backpressure, nothing would notice the TCP
 * peer resetting. libevent cannot watch for that alone (it reports a
 * reset as read/write readiness, which a paused relay must not ask for),
 * so paused sockets sit in an epoll set of their own that reports only
 * hang-ups and errors; the set's descriptor is one libevent read event. */
static int watch_ep = -1;
static struct event *watch_ev;
/* Relays alive. The set lives as long as any of them: a relay at its cap
 * pauses and resumes many times a second, and a set made and closed each
 * time costs more syscalls than the pause itself. */
static size_t relay_count;

static void
watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct epoll_event evs[64];
	int n;

	(void)what;
	(void)arg;
	n = epoll_wait(fd, evs, 64, 0);
	for (int i = 0; i < n; i++)
		closed_cb(evs[i].data.ptr);
}

static void
watch(struct relay *r, bool on)
{
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = r };

	if (on && watch_ep == -1) {
		if ((watch_ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
			return;
		watch_ev = event_new(r->base, watch_ep, EV_READ | EV_PERSIST,
		    watch_cb, NULL);
		event_add(watch_ev, NULL);
	}
	if (watch_ep == -1)
		return;
	/* A closed descriptor has left the set by itself; EBADF is fine. */
	(void)epoll_ctl(watch_ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, r->fd, &ev);
}

/* Close the TCP connection with a reset, as the peer's TCP end did. */
static void
tcp_reset(struct relay *r)
{
	struct linger l = { 1, 0 };

	if (r->fd == -1)
		return;
	(void)setsockopt(r->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	close(r->fd);
	r->fd = -1;
}

/* `n` bytes of `out` are gone: the stream's credit for them goes back,
 * unless they came on a stream before this one. */
static void
consumed(struct relay *r, size_t n)
{
	size_t old = n < r->out_old ? n : r->out_old;

	r->out_old -= old;
	if (n > old && r->qc != NULL)
		quic_conn_stream_consume(r->qc, r->sid, n - old);
}

/* Bytes the peer sent that TCP will never take still hold the
 * connection's flow-control credit: give it back, or a few reset
 * forwards with full buffers would leave the connection no window for
 * any other stream. */
static void
return_credit(struct relay *r)
{
	size_t n = evbuffer_get_length(r->out);

	if (n == 0)
		return;
	evbuffer_drain(r->out, n);
	consumed(r, n);
}

/* Report the end from a fresh event, never from inside ngtcp2's callbacks,
 * since the owner frees the relay in `done`. */
static void
finish(struct relay *r, uint64_t err)
{
	struct timeval now = { 0, 0 };

	if (r->finished)
		return;
	r->finished = true;
	return_credit(r);
	r->err = err;
	if (r->rd_armed)
		event_del(r->rd_ev);
	if (r->wr_armed || r->wr_sched)
		event_del(r->wr_ev);
	r->wr_sched = false;
	unwatch(r);
	r->rd_armed = r->wr_armed = false;
	evtimer_add(r->done_ev, &now);
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;

	(void)fd;
	(void)what;
	r->done(r, r->err, r->arg);
}

/* Abort both ways: RESET_STREAM + STOP_SENDING to the peer, RST to TCP. */
static void
abort_both(struct relay *r, uint64_t code)
{
	if (!r->stream_gone && r->qc != NULL)
		quic_conn_stream_reset(r->qc, r->sid, code);
	tcp_reset(r);
	finish(r, code);
}

/* The relay has a connection that still sends. */
static bool
conn_open(const struct relay *r)
{
	return r->qc != NULL && quic_conn_state(r->qc) != QUIC_STATE_CLOSED;
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	ssize_t n;

	(void)what;
	while (r->tcp_rd_open) {
		size_t room = quic_conn_stream_room(r->qc, r->sid, r->cap);

		if (room == 0)
			break;
		n = quic_conn_stream_read_fd(r->qc, r->sid, fd,
		    room < RELAY_READ_CHUNK ? room : RELAY_READ_CHUNK);
		if (n > 0) {
			r->stats.tcp_to_quic += (uint64_t)n;
			continue;
		}
		if (n == 0) {
			/* EOF: our half is done; the other may go on. */
			r->tcp_rd_open = false;
			(void)quic_conn_stream_send(r->qc, r->sid, NULL, 0, true);
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		/* The connection has just ended, and its owner has yet to
		 * hear: the forward may carry on over the next (fwd.c,
		 * parking), so TCP is left alone. */
		if (errno == EPIPE && !conn_open(r))
			break;
		abort_both(r, PROTO_FWD_ERR_RESET);
		return;
	}
	update(r);
	quic_write_dirty();
}

/* A paused relay's TCP peer hung up: a reset travels on at once rather
 * than after the slow side has drained everything; a plain FIN waits for
 * its turn behind the data. */
static void
closed_cb(struct relay *r)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (r->finished || !r->cl_armed)
		return;
	if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
		abort_both(r, PROTO_FWD_ERR_RESET);
		return;
	}
	r->eof_seen = true;
	update(r);
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	int n;

	(void)what;
	r->wr_sched = false;
	r->wr_blocked = false;
	while (evbuffer_get_length(r->out) > 0) {
		n = evbuffer_write(r->out, fd);
		if (n > 0) {
			r->stats.quic_to_tcp += (uint64_t)n;
			consumed(r, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			r->wr_blocked = true;
			break;
		}
		abort_both(r, PROTO_FWD_ERR_RESET);
		return;
	}
	update(r);
	quic_write_dirty();
}

/* Arm or disarm the events, pass a FIN on, and notice the end. */
static void
update(struct relay *r)
{
	bool want_rd, want_wr, want_cl;
	size_t unacked;

	if (r->finished)
		return;
	if (r->fin_rcvd && !r->tcp_wr_shut && evbuffer_get_length(r->out) == 0) {
		(void)shutdown(r->fd, SHUT_WR);
		r->tcp_wr_shut = true;
	}
	/* Reading stops at the cap and resumes only once a quarter of it is
	 * acknowledged, not at every acknowledgement: pausing costs syscalls.
	 * A parked relay has nowhere to send. */
	unacked = r->qc == NULL ? 0 : quic_conn_stream_unacked(r->qc, r->sid);
	want_rd = r->tcp_rd_open && !r->stream_gone && r->kept == NULL && conn_open(r) &&
	    (r->rd_armed ? unacked < r->cap : unacked <= r->cap - r->cap / 4) &&
	    quic_conn_stream_room(r->qc, r->sid, r->cap) > 0;
	/* Bytes for TCP are written from an event made active by hand, after
	 * the burst of packets that brought them; only a full socket buffer
	 * makes us wait for writability (arming costs syscalls every time). */
	want_wr = evbuffer_get_length(r->out) > 0 && r->wr_blocked;
	if (evbuffer_get_length(r->out) > 0 && !want_wr && !r->wr_sched) {
		event_active(r->wr_ev, EV_WRITE, 1);
		r->wr_sched = true;
	}
	want_cl = r->tcp_rd_open && !want_rd && !r->eof_seen && r->kept == NULL;
	if (want_rd != r->rd_armed) {
		if (want_rd)
			event_add(r->rd_ev, NULL);
		else
			event_del(r->rd_ev);
		r->rd_armed = want_rd;
	}
	if (want_cl != r->cl_armed) {
		watch(r, want_cl);
		r->cl_armed = want_cl;
	}
	if (want_wr != r->wr_armed) {
		if (want_wr)
			event_add(r->wr_ev, NULL);
		else
			event_del(r->wr_ev);
		r->wr_armed = want_wr;
	}
	/* Done when the stream is closed (both FINs exchanged and ours
	 * acknowledged) and TCP has everything. */
	if (r->stream_gone && r->tcp_wr_shut && !r->tcp_rd_open) {
		close(r->fd);
		r->fd = -1;
		finish(r, 0);
	}
}

struct relay *
relay_create(struct event_base *base, struct quic_conn *qc, int64_t sid, int fd,
    size_t cap, relay_done_cb done, void *arg)
{
	struct relay *r = xcalloc(1, sizeof *r);

	r->base = base;
	r->qc = qc;
	r->sid = sid;
	r->fd = fd;
	r->cap = cap;
	r->done = done;
	r->arg = arg;
	r->tcp_rd_open = true;
	r->out = evbuffer_new();
	r->rd_ev = event_new(base, fd, EV_READ | EV_PERSIST, read_cb, r);
	r->wr_ev = event_new(base, fd, EV_WRITE | EV_PERSIST, write_cb, r);
	r->done_ev = evtimer_new(base, done_cb, r);
	r->tx_base = quic_conn_stream_queued(qc, sid);
	relay_count++;

	update(r);
	return r;
}

void
relay_on_data(struct relay *r, const uint8_t *data, size_t len, bool fin)
{
	if (r->finished) {
		quic_conn_stream_consume(r->qc, r->sid, len);
		return;
	}
	r->rx_total += len;
	/* Gather what a burst of packets brings and write it to TCP in one
	 * call from the write event: one syscall per packet would cost more
	 * than the copy. */
	if (len > 0)
		evbuffer_add(r->out, data, len);
	if (fin)
		r->fin_rcvd = true;
	update(r);
}

void
relay_on_reset(struct relay *r, uint64_t code)
{
	/* The peer's TCP end was reset (or its target failed): do the same. */
	abort_both(r, code);
}

void
relay_on_acked(struct relay *r)
{
	update(r);
}

void
relay_on_close(struct relay *r, uint64_t code)
{
	r->stream_gone = true;
	if (code != 0 && !r->finished) {
		tcp_reset(r);
		finish(r, code);
		return;
	}
	update(r);
}

static void
unwatch(struct relay *r)
{
	if (r->cl_armed) {
		watch(r, false);
		r->cl_armed = false;
	}
}

void
relay_abort(struct relay *r)
{
	unwatch(r);
	r->stream_gone = true;
	tcp_reset(r);
	r->finished = true;
}

bool
relay_parkable(const struct relay *r)
{
	return !r->finished && !r->stream_gone && r->kept == NULL;
}

void
relay_park(struct relay *r)
{
	uint64_t from;

	r->kept = evbuffer_new();
	from = r->stats.tcp_to_quic - quic_conn_stream_copy_unacked(r->qc,
	    r->sid, r->tx_base, r->kept);
	r->kept_from = from;
	r->out_old = evbuffer_get_length(r->out);
	r->qc = NULL;
	r->sid = -1;
	update(r);
}

void
relay_attach(struct relay *r, struct quic_conn *qc, int64_t sid)
{
	r->qc = qc;
	r->sid = sid;
}

int
relay_resume(struct relay *r, uint64_t peer_rx)
{
	size_t len;

	/* The peer cannot lack bytes we no longer have, nor have more than
	 * we ever sent: either means the two ends are not the same forward. */
	if (peer_rx < r->kept_from || peer_rx > r->stats.tcp_to_quic)
		return -1;
	evbuffer_drain(r->kept, (size_t)(peer_rx - r->kept_from));
	r->tx_base = quic_conn_stream_queued(r->qc, r->sid);
	len = evbuffer_get_length(r->kept);
	if (len > 0 || !r->tcp_rd_open) {
		if (quic_conn_stream_send(r->qc, r->sid,
		    evbuffer_pullup(r->kept, -1), len, !r->tcp_rd_open) != 0)
			return -1;
	}
	evbuffer_free(r->kept);
	r->kept = NULL;
	update(r);
	quic_write_dirty();
	return 0;
}

uint64_t
relay_rx_total(const struct relay *r)
{
	return r->rx_total;
}

int
relay_get_fd(const struct relay *r)
{
	return r->fd;
}

void
relay_get_stats(const struct relay *r, struct relay_stats *st)
{
	*st = r->stats;
}

void
relay_free(struct relay *r)
{
	if (r == NULL)
		return;
	unwatch(r);
	if (!r->stream_gone && !r->finished && r->qc != NULL)
		quic_conn_stream_reset(r->qc, r->sid, PROTO_FWD_ERR_RESET);
	if (r->kept != NULL)
		evbuffer_free(r->kept);
	if (r->fd != -1)
		tcp_reset(r);
	event_free(r->rd_ev);
	event_free(r->wr_ev);
	event_free(r->done_ev);

	evbuffer_free(r->out);
	free(r);
	if (--relay_count == 0 && watch_ep != -1) {
		event_free(watch_ev);
		watch_ev = NULL;
		close(watch_ep);
		watch_ep = -1;
	}
}

/* A session over TLS 1.3 on TCP, for networks that drop UDP: QUIC's frames
 * (qmux.h) on the TLS byte stream, with QUIC's stream states and flow
 * control kept here since no ngtcp2 keeps them. The owner sees the same
 * struct quic_conn, callbacks and calls as over QUIC (quic.h). */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "quic-int.h"
#include "tcp-proxy.h"
#include "wire/proto.h"
#include "wire/qmux.h"

/* Plaintext gathered per wolfSSL_write: four full TLS records. */
#define OBUF_SIZE (64 * 1024)
/* One whole frame at most, and a read's worth behind it. */
#define RBUF_SIZE (2 * QMUX_MAX_PAYLOAD + 2 * QMUX_MAX_HEADER)
/* Stream bytes per STREAM frame: streams with data take turns in slices
 * this large, so one bulk transfer cannot hold the others back long. */
#define STREAM_SLICE (16 * 1024)
/* The kernel takes more only when less than this is waiting unsent: a
 * socket buffer grown to megabytes would otherwise queue seconds of
 * packets in front of every DATAGRAM (bufferbloat inside the tunnel). */
#define NOTSENT_LOWAT (128 * 1024)
/* DATAGRAMs wait for the socket at most this many, and this long: a queue
 * behind TCP only adds delay to traffic whose senders have their own
 * retransmission, so it stays short, and the TCP socket is the queue. */
#define DGRAM_QUEUE 128
#define DGRAM_MAX_AGE (50 * 1000 * 1000ull)
/* Connection-level window we grant, as QUIC's initial_max_data. */
#define CONN_WINDOW (16 * 1024 * 1024)
/* Bidirectional streams the peer may have open at once. */
#define PEER_STREAMS 256
/* Control frames (resets, credit) waiting because the peer does not read
 * its socket: past this, it is not going to, and the session ends. */
#define CTL_MAX (1024 * 1024)
/* Input handled per event before the loop serves others. */
#define READ_ROUNDS 64
#define WRITE_ROUNDS 64
#define CLIENT_HANDSHAKE_TIMEOUT (10 * 1000 * 1000 * 1000ull)
/* A finished session's socket is closed only once the peer has closed its
 * side too, or after LINGER_MS: closing with the peer's bytes unread makes
 * the kernel send a reset, which can overtake and destroy our last words
 * (the alert that refuses a key, CONNECTION_CLOSE). At most LINGER_MAX
 * sockets wait so at once; beyond that they close at once. */
#define LINGER_MS 2000
#define LINGER_MAX 256
/* A dead path, noticed in seconds rather than at IdleTimeout. Bytes
 * sent and followed by PROBE_MS of silence bring a PING, which a peer
 * that announced answers_ping answers at once, and another every
 * PROBE_MS while none is answered; when no byte has come back DEAD_MS
 * after the first and the kernel has taken no TCP acknowledgement for
 * DEAD_MS either, the path is dead. The acknowledgements count: a peer
 * whose kernel still takes our bytes (each PING draws one) is alive, only
 * slow (a PING stuck behind a long queue on a slow link, a peer busy
 * elsewhere). Idle sessions ask only with their keepalive PINGs, so an
 * idle dead path shows within KeepAlive + DEAD_MS.
 * The kernel's TCP_USER_TIMEOUT backs this up (and is all there is with
 * a peer that does not answer PINGs): data left unacknowledged this long
 * errors the socket. It is longer than PROBE_MS + DEAD_MS so that the
 * rule above, with its clearer report, comes first. */
#define PROBE_MS 1000
#define DEAD_MS 4000
#define USER_TIMEOUT_MS 8000

struct lingering {
	LIST_ENTRY(lingering) entry;
	int fd;
	uint64_t deadline;
	struct event *ev;
};

static LIST_HEAD(, lingering) lingering = LIST_HEAD_INITIALIZER(lingering);
static unsigned nlinger;

struct quic_tcp {
	int fd;
	struct event *ev;      /* readable (persistent) */
	struct event *wev;     /* writable, armed when something waits */
	struct event *again;   /* more input may be buffered in wolfSSL */
	bool connected;        /* the TCP connect finished */
	/* Client through a proxy: the exchange that makes the connection a
	 * tunnel (NULL once done, or without a proxy). Direct first: until
	 * `direct_until` (0 when not, or no longer, direct) the socket goes
	 * to the server, and the proxy is the way if that fails. */
	struct tcp_proxy_hs *px;
	bool via_proxy;
	uint64_t direct_until;
	struct sockaddr_storage proxy_addr;
	socklen_t proxy_addrlen;
	uint32_t fwmark;
	ngtcp2_cc_algo cc;
	bool tls_done;         /* TLS handshake complete */
	bool params_rcvd;      /* the peer's TRANSPORT_PARAMETERS */
	uint64_t deadline;     /* the handshake's (clock_now) */
	uint64_t last_tx;
	uint64_t idle_ns, keepalive_ns;
	/* The dead-path rule (DEAD_MS): the peer answers PINGs; we owe it
	 * an answer; the first of our PINGs waiting for any byte back went
	 * at ping_at (0: none), the last at probe_at; something other than
	 * an answer went since the last byte came in. */
	bool peer_answers, answer_due, sent_since_rx, sent_real;
	uint64_t ping_at, probe_at;

	uint8_t *rbuf;
	size_t rlen;
	uint8_t *obuf;
	size_t olen;           /* written again as is after WANT_WRITE */
	struct evbuffer *ctl;  /* control frames to go first */

	/* Flow control: our bytes the peer allows and how many went; the
	 * credit we gave, what arrived and what the owner consumed. */
	uint64_t tx_max_data, tx_data;
	uint64_t rx_max_data, rx_data, rx_consumed;
	bool send_max_data, send_max_streams, conn_blocked;
	uint64_t stream_window;      /* what we give each stream */
	uint64_t peer_window_ours;   /* what the peer gives streams we open */
	uint64_t peer_window_theirs; /* ... streams it opens */
	/* Streams: the next we open (index), how many the peer lets us open;
	 * the next it opens, how many we let it. */
	uint64_t local_next, local_max;
	uint64_t peer_next, peer_max;
	size_t dgram_max_peer;       /* its max_datagram_frame_size */
	/* The peer asked to hear, at least every this many bytes, what we
	 * consumed of its streams (qmux.h, consumed_step; 0: it did not);
	 * asking, it promised the same, so our bytes are freed when its
	 * reader has them rather than when they are written. */
	uint64_t consumed_step;
};

static void io_cb(evutil_socket_t, short, void *);
static void again_cb(evutil_socket_t, short, void *);
static void timer_cb(evutil_socket_t, short, void *);
static void flush(struct quic_conn *);
static void rearm(struct quic_conn *);
static void set_sockopts(int, ngtcp2_cc_algo);
static const struct quic_transport tcp_transport;

static bool
is_local_id(const struct quic_conn *qc, int64_t id)
{
	/* Bit 0 is the opener: 0 the client, 1 the server (RFC 9000 2.1). */
	return ((id & 1) == 1) == (qc->role == QUIC_ROLE_SERVER);
}

static int64_t
stream_id(const struct quic_conn *qc, uint64_t index, bool local)
{
	uint64_t opener = (qc->role == QUIC_ROLE_SERVER) == local ? 1 : 0;

	return (int64_t)(index << 2 | opener);
}

static void
want_write(struct quic_conn *qc)
{
	if (!event_pending(qc->tcp->wev, EV_WRITE, NULL))
		event_add(qc->tcp->wev, NULL);
}

/* The owner's close information is set; stop all I/O and report. */
static void
end(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	event_del(t->ev);
	event_del(t->wev);
	event_del(t->again);
	quic_finish(qc);
}

/* The TCP connection or TLS failed under us: no close can be sent. */
static void
lost(struct quic_conn *qc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
lost(struct quic_conn *qc, const char *fmt, ...)
{
	va_list ap;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	if (qc->close_info.reason[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(qc->close_info.reason, sizeof qc->close_info.reason, fmt, ap);
		va_end(ap);
	}
	end(qc);
}

/* A TLS alert from the peer ends the session like QUIC's CRYPTO_ERROR
 * (0x100 + alert), so the owner tells a refused key from a lost path. */
static bool
peer_alert(struct quic_conn *qc)
{
	WOLFSSL_ALERT_HISTORY h;

	if (wolfSSL_get_alert_history(qc->ssl, &h) != WOLFSSL_SUCCESS ||
	    h.last_rx.level != alert_fatal || h.last_rx.code <= 0)
		return false;
	qc->close_info.remote = true;
	qc->close_info.transport = true;
	qc->close_info.code = 0x100u + (unsigned)h.last_rx.code;
	snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
	    "TLS alert %d", h.last_rx.code);
	return true;
}

/* A fatal alert we sent in the handshake: recorded as QUIC's fail()
 * records one, so that the owner can tell why (a key exchange without a
 * group in common: handshake_failure). */
static bool
own_alert(struct quic_conn *qc)
{
	WOLFSSL_ALERT_HISTORY h;

	if (wolfSSL_get_alert_history(qc->ssl, &h) != WOLFSSL_SUCCESS ||
	    h.last_tx.level != alert_fatal || h.last_tx.code <= 0)
		return false;
	qc->close_info.transport = true;
	qc->close_info.code = 0x100u + (unsigned)h.last_tx.code;
	snprintf(qc->close_info.reason, sizeof qc->close_info.reason,
	    "TLS alert %d sent", h.last_tx.code);
	return true;
}

/* Write what is in obuf and, once it is out, `extra` (a closing frame);
 * one try each, for a session about to end. */
static void
write_last(struct quic_conn *qc, const uint8_t *extra, size_t extralen)
{
	struct quic_tcp *t = qc->tcp;

	if (!t->tls_done)
		return;
	if (t->olen > 0 && wolfSSL_write(qc->ssl, t->obuf, (int)t->olen) <= 0)
		return;
	t->olen = 0;
	if (extralen > 0 && wolfSSL_write(qc->ssl, extra, (int)extralen) > 0)
		(void)wolfSSL_shutdown(qc->ssl);
	(void)shutdown(t->fd, SHUT_WR);
}

/* A protocol error by the peer: CONNECTION_CLOSE with a transport code. */
static void
fail(struct quic_conn *qc, uint64_t code, const char *reason)
{
	uint8_t buf[512];
	size_t n;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	log_debug("%s: %s", __func__, reason);
	qc->close_info.transport = true;
	qc->close_info.code = code;
	snprintf(qc->close_info.reason, sizeof qc->close_info.reason, "%s", reason);
	n = qmux_encode_close(buf, sizeof buf, false, code, reason);
	write_last(qc, buf, n);
	end(qc);
}

static void
quic_tcp_close(struct quic_conn *qc, uint64_t app_error, const char *reason)
{
	uint8_t buf[512];
	size_t n;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	qc->close_info.code = app_error;
	snprintf(qc->close_info.reason, sizeof qc->close_info.reason, "%s",
	    reason != NULL ? reason : "");
	n = qmux_encode_close(buf, sizeof buf, true, app_error, reason);
	write_last(qc, buf, n);
	end(qc);
}

static void
ctl_add(struct quic_conn *qc, const uint8_t *frame, size_t len)
{
	if (len == 0)
		return;
	evbuffer_add(qc->tcp->ctl, frame, len);
	quic_mark_dirty(qc);
}

static void
established(struct quic_conn *qc)
{
	if (qc->state != QUIC_STATE_HANDSHAKING || !qc->tcp->tls_done ||
	    !qc->tcp->params_rcvd)
		return;
	qc->state = QUIC_STATE_ESTABLISHED;
	if (qc->cbs->handshake_done != NULL)
		qc->cbs->handshake_done(qc, qc->arg);
}

static void
send_params(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	struct qmux_params p = {
		.max_idle_timeout_ms = t->idle_ns / 1000000u,
		.initial_max_data = t->rx_max_data,
		.max_stream_data_bidi_local = t->stream_window,
		.max_stream_data_bidi_remote = t->stream_window,
		.initial_max_streams_bidi = t->peer_max,
		.max_datagram_frame_size = 65535,
		/* A relay resumes reading at 3/4 of its cap, its cap being
		 * this window: reports this frequent always get it there. */
		.consumed_step = t->stream_window / 8,
		.answers_ping = 1,
	};
	uint8_t buf[160];

	ctl_add(qc, buf, qmux_encode_params(buf, sizeof buf, &p));
}

/* The idle timeout both ends keep: the shorter of ours and the peer's
 * (0: it has none). Compared in milliseconds, so that a peer's huge value
 * cannot overflow into a tiny one. */
uint64_t
quic_tcp_idle_ns(uint64_t ours_ns, uint64_t peer_ms)
{
	if (peer_ms == 0 || peer_ms >= ours_ns / 1000000u)
		return ours_ns;
	return peer_ms * 1000000u;
}

static int
got_params(struct quic_conn *qc, const struct qmux_frame *f)
{
	struct quic_tcp *t = qc->tcp;
	struct qmux_params p;

	if (qmux_decode_params(f->data, f->len, &p) != 0 ||
	    p.initial_max_streams_bidi > (1ull << 60)) {
		fail(qc, QMUX_ERR_PROTOCOL_VIOLATION, "bad transport parameters");
		return -1;
	}
	t->params_rcvd = true;
	t->tx_max_data = p.initial_max_data;
	t->local_max = p.initial_max_streams_bidi;
	/* Its "local" streams are the ones it opens. */
	t->peer_window_theirs = p.max_stream_data_bidi_local;
	t->peer_window_ours = p.max_stream_data_bidi_remote;
	t->dgram_max_peer = (size_t)(p.max_datagram_frame_size < 65535 ?
	    p.max_datagram_frame_size : 65535);
	t->idle_ns = quic_tcp_idle_ns(t->idle_ns, p.max_idle_timeout_ms);
	t->consumed_step = p.consumed_step;
	t->peer_answers = p.answers_ping != 0;
	established(qc);
	return 0;
}

static struct quic_stream *
stream_new(struct quic_conn *qc, int64_t id, bool local)
{
	struct quic_tcp *t = qc->tcp;
	struct quic_stream *s = quic_stream_get(qc, id);

	s->tx_max = local ? t->peer_window_ours : t->peer_window_theirs;
	s->tx_window = s->tx_max;
	s->rx_max = t->stream_window;
	return s;
}

/* The stream a frame from the peer names: *sp is NULL for one that was
 * closed already (the frame is then moot). Returns -1 (and closes) for
 * an ID the peer may not use. */
static int
rx_stream(struct quic_conn *qc, uint64_t id, struct quic_stream **sp)
{
	struct quic_tcp *t = qc->tcp;
	uint64_t index = id >> 2;

	*sp = NULL;
	if ((id & 2) != 0) {
		/* We allow no unidirectional streams. */
		fail(qc, QMUX_ERR_STREAM_STATE, "unidirectional stream");
		return -1;
	}
	if (is_local_id(qc, (int64_t)id)) {
		if (index >= t->local_next) {
			fail(qc, QMUX_ERR_STREAM_STATE, "stream not opened");
			return -1;
		}
	} else {
		if (index >= t->peer_max) {
			fail(qc, QMUX_ERR_STREAM_LIMIT, "stream limit exceeded");
			return -1;
		}
		/* Opening a stream opens those before it (RFC 9000 3.2). */
		for (; t->peer_next <= index; t->peer_next++)
			(void)stream_new(qc, stream_id(qc, t->peer_next, false), false);
	}
	*sp = quic_stream_find(qc, (int64_t)id);
	return 0;
}

/* `n` received bytes will never reach the owner: their credit returns. */
static void
conn_consumed(struct quic_conn *qc, uint64_t n)
{
	struct quic_tcp *t = qc->tcp;

	t->rx_consumed += n;
	if (t->rx_max_data - t->rx_consumed < CONN_WINDOW / 2) {
		t->rx_max_data = t->rx_consumed + CONN_WINDOW;
		t->send_max_data = true;
		quic_mark_dirty(qc);
	}
}

static int
conn_received(struct quic_conn *qc, uint64_t n)
{
	struct quic_tcp *t = qc->tcp;

	t->rx_data += n;
	if (t->rx_data > t->rx_max_data) {
		fail(qc, QMUX_ERR_FLOW_CONTROL, "connection flow control exceeded");
		return -1;
	}
	return 0;
}

static int
got_stream(struct quic_conn *qc, const struct qmux_frame *f)
{
	struct quic_stream *s;

	if (rx_stream(qc, f->stream_id, &s) != 0)
		return -1;
	if (s != NULL && !s->rx_done && f->offset != s->rx_off) {
		/* A byte stream neither loses nor reorders. */
		fail(qc, QMUX_ERR_PROTOCOL_VIOLATION, "stream offset out of order");
		return -1;
	}
	if (conn_received(qc, f->len) != 0)
		return -1;
	if (s == NULL || s->rx_done) {
		conn_consumed(qc, f->len);
		return 0;
	}
	if (f->offset + f->len > s->rx_max) {
		fail(qc, QMUX_ERR_FLOW_CONTROL, "stream flow control exceeded");
		return -1;
	}
	s->rx_off += f->len;
	if (f->fin)
		s->rx_done = true;
	if (qc->cbs->stream_data != NULL &&
	    qc->cbs->stream_data(qc, s->id, f->data, f->len, f->fin, s->arg,
	    qc->arg) != 0) {
		fail(qc, QMUX_ERR_INTERNAL, "stream data refused");
		return -1;
	}
	return 0;
}

/* Our sending side is over: what was not sent never will be. */
static void
tx_abort(struct quic_conn *qc, struct quic_stream *s, uint64_t code)
{
	uint8_t buf[32];

	if (s->tx_done)
		return;
	s->reset = true;
	s->reset_code = code;
	s->tx_done = true;
	s->close_code = code;
	quic_stream_set_pending(qc, s);
	ctl_add(qc, buf, qmux_encode_reset_stream(buf, sizeof buf,
	    (uint64_t)s->id, code, s->send_off));
}

static int
got_reset(struct quic_conn *qc, const struct qmux_frame *f)
{
	struct quic_stream *s;

	if (rx_stream(qc, f->stream_id, &s) != 0)
		return -1;
	if (s == NULL || s->rx_done)
		return 0;
	if (f->final_size < s->rx_off || f->final_size > s->rx_max) {
		fail(qc, QMUX_ERR_FINAL_SIZE, "bad final size");
		return -1;
	}
	/* Bytes it never sent still count against the connection. */
	if (conn_received(qc, f->final_size - s->rx_off) != 0)
		return -1;
	conn_consumed(qc, f->final_size - s->rx_off);
	s->rx_off = f->final_size;
	s->rx_done = true;
	s->close_code = f->code;
	if (qc->cbs->stream_reset != NULL)
		qc->cbs->stream_reset(qc, s->id, f->code, s->arg, qc->arg);
	quic_mark_dirty(qc);
	return 0;
}

static int
got_stop(struct quic_conn *qc, const struct qmux_frame *f)
{
	struct quic_stream *s;

	if (rx_stream(qc, f->stream_id, &s) != 0)
		return -1;
	/* Answered with RESET_STREAM, as ngtcp2 does; the owner learns it
	 * when its next send fails. */
	if (s != NULL)
		tx_abort(qc, s, f->code);
	return 0;
}

static int
got_max_stream_data(struct quic_conn *qc, const struct qmux_frame *f)
{
	struct quic_stream *s;

	if (rx_stream(qc, f->stream_id, &s) != 0)
		return -1;
	if (s != NULL && f->max > s->tx_max) {
		/* The peer's reader has everything up to its new limit less
		 * its window; never more than we sent, whatever it says. */
		if (qc->tcp->consumed_step != 0) {
			uint64_t consumed = f->max - s->tx_window;

			quic_stream_acked_to(qc, s, consumed < s->send_off ?
			    consumed : s->send_off);
		}
		s->tx_max = f->max;
		s->blocked = false;
		quic_stream_set_pending(qc, s);
		quic_mark_dirty(qc);
	}
	return 0;
}

static int
got_close(struct quic_conn *qc, const struct qmux_frame *f)
{
	qc->close_info.remote = true;
	qc->close_info.transport = f->type == QMUX_CONNECTION_CLOSE;
	qc->close_info.code = f->code;
	log_escape(qc->close_info.reason, sizeof qc->close_info.reason,
	    (const char *)f->data, f->len);
	end(qc);
	return -1;
}

/* Act on one frame. Returns -1 once the session is over. */
static int
frame(struct quic_conn *qc, const struct qmux_frame *f)
{
	struct quic_tcp *t = qc->tcp;

	if (!t->params_rcvd && f->type != QMUX_TRANSPORT_PARAMETERS &&
	    f->type != QMUX_CONNECTION_CLOSE && f->type != QMUX_CONNECTION_CLOSE_APP) {
		fail(qc, QMUX_ERR_PROTOCOL_VIOLATION, "frames before the parameters");
		return -1;
	}
	switch (f->type) {
	case QMUX_PADDING:
		return 0;
	case QMUX_PING:
		/* One PADDING byte back: any byte proves the path. */
		t->answer_due = true;
		quic_mark_dirty(qc);
		return 0;
	case QMUX_TRANSPORT_PARAMETERS:
		if (t->params_rcvd) {
			fail(qc, QMUX_ERR_PROTOCOL_VIOLATION, "parameters twice");
			return -1;
		}
		return got_params(qc, f);
	case QMUX_STREAM:
		return got_stream(qc, f);
	case QMUX_RESET_STREAM:
		return got_reset(qc, f);
	case QMUX_STOP_SENDING:
		return got_stop(qc, f);
	case QMUX_MAX_DATA:
		if (f->max > t->tx_max_data) {
			t->tx_max_data = f->max;
			t->conn_blocked = false;
			quic_mark_dirty(qc);
		}
		return 0;
	case QMUX_MAX_STREAM_DATA:
		return got_max_stream_data(qc, f);
	case QMUX_MAX_STREAMS_BIDI:
		if (f->max > (1ull << 60)) {
			fail(qc, QMUX_ERR_FRAME_ENCODING, "MAX_STREAMS over 2^60");
			return -1;
		}
		if (f->max > t->local_max)
			t->local_max = f->max;
		return 0;
	case QMUX_DATAGRAM:
		qc->stats.rx_dgrams++;
		qc->stats.rx_dgram_bytes += f->len;
		if (qc->cbs->datagram != NULL)
			qc->cbs->datagram(qc, f->data, f->len, qc->arg);
		return 0;
	case QMUX_CONNECTION_CLOSE:
	case QMUX_CONNECTION_CLOSE_APP:
		return got_close(qc, f);
	}
	fail(qc, QMUX_ERR_FRAME_ENCODING, "unknown frame");
	return -1;
}

/* Every whole frame in rbuf. */
static void
parse(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	struct qmux_frame f;
	size_t off = 0;
	long n;

	while (off < t->rlen && qc->state != QUIC_STATE_CLOSED) {
		n = qmux_frame_decode(t->rbuf + off, t->rlen - off, &f);
		if (n == 0)
			break;
		if (n < 0) {
			fail(qc, QMUX_ERR_FRAME_ENCODING, "malformed frame");
			return;
		}
		if (frame(qc, &f) != 0)
			return;
		off += (size_t)n;
	}
	if (off > 0) {
		memmove(t->rbuf, t->rbuf + off, t->rlen - off);
		t->rlen -= off;
	}
}

static void
tls_read(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	int n, err, rounds, sock_err;

	for (rounds = 0; rounds < READ_ROUNDS; rounds++) {
		errno = 0;
		n = wolfSSL_read(qc->ssl, t->rbuf + t->rlen,
		    (int)(RBUF_SIZE - t->rlen));
		sock_err = errno;
		if (n > 0) {
			t->rlen += (size_t)n;
			qc->last_rx = clock_now();
			t->ping_at = 0;
			t->sent_since_rx = false;
			parse(qc);
			if (qc->state == QUIC_STATE_CLOSED)
				return;
			continue;
		}
		err = wolfSSL_get_error(qc->ssl, n);
		if (err == WOLFSSL_ERROR_WANT_READ)
			return;
		if (err == WOLFSSL_ERROR_WANT_WRITE) {
			want_write(qc);
			return;
		}
		if (!peer_alert(qc) && sock_err == ETIMEDOUT)
			lost(qc, "TCP connection lost: data unacknowledged for "
			    "%u ms", (unsigned)USER_TIMEOUT_MS);
		else if (!peer_alert(qc))
			lost(qc, "%s", err == WOLFSSL_ERROR_ZERO_RETURN ||
			    n == 0 ? "TCP connection closed" : "TCP connection lost");
		end(qc);
		return;
	}
	/* wolfSSL may hold decrypted bytes the socket no longer signals. */
	event_active(t->again, EV_TIMEOUT, 0);
}

static void
tls_handshake(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	int rv, err;

	rv = qc->role == QUIC_ROLE_CLIENT ? wolfSSL_connect(qc->ssl) :
	    wolfSSL_accept(qc->ssl);
	if (rv != WOLFSSL_SUCCESS) {
		err = wolfSSL_get_error(qc->ssl, rv);
		if (err == WOLFSSL_ERROR_WANT_READ)
			return;
		if (err == WOLFSSL_ERROR_WANT_WRITE) {
			want_write(qc);
			return;
		}
		if (!peer_alert(qc) && !own_alert(qc))
			lost(qc, "TLS handshake failed (wolfSSL error %d)", err);
		end(qc);
		return;
	}
	if (!tls_alpn_is(qc->ssl, PROTO_ALPN)) {
		lost(qc, "the peer does not speak %s", PROTO_ALPN);
		return;
	}
	/* The buffers come only now: a connection that has not proved its
	 * key costs no more than wolfSSL's handshake state. */
	t->rbuf = xmalloc(RBUF_SIZE);
	t->obuf = xmalloc(OBUF_SIZE);
	t->tls_done = true;
	qc->stats.kex_group = tls_group_name(qc->ssl);
	send_params(qc);
}

static int
open_socket(const struct sockaddr *to, socklen_t tolen, uint32_t fwmark,
    char **cause)
{
	int fd;

	fd = socket(to->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    IPPROTO_TCP);
	if (fd == -1) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	if (fwmark != 0 && setsockopt(fd, SOL_SOCKET, SO_MARK, &fwmark,
	    sizeof fwmark) == -1)
		log_warn("TCP socket: cannot set its mark: %s", strerror(errno));
	if (connect(fd, to, tolen) == -1 && errno != EINPROGRESS) {
		xasprintf(cause, "connect: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Direct TCP to the server failed (`why`): the same connection starts
 * again on a socket to the proxy, with a handshake deadline of its own. */
static void
to_proxy(struct quic_conn *qc, const char *why)
{
	struct quic_tcp *t = qc->tcp;
	char a[ADDR_STRLEN], *cause = NULL;
	int fd;

	addr_sockaddr_str((const struct sockaddr *)&qc->remote, a);
	log_info("TCP to %s: %s; trying through %s", a, why,
	    tcp_proxy_hs_name(t->px));
	t->direct_until = 0;
	t->via_proxy = true;
	fd = open_socket((const struct sockaddr *)&t->proxy_addr,
	    t->proxy_addrlen, t->fwmark, &cause);
	if (fd == -1) {
		qc->close_info.proxy = true;
		lost(qc, "%s: %s", tcp_proxy_hs_name(t->px), cause);
		free(cause);
		return;
	}
	event_free(t->ev);
	event_free(t->wev);
	close(t->fd);
	t->fd = fd;
	set_sockopts(fd, t->cc);
	wolfSSL_set_fd(qc->ssl, fd);
	t->ev = event_new(qc->base, fd, EV_READ | EV_PERSIST, io_cb, qc);
	t->wev = event_new(qc->base, fd, EV_WRITE, io_cb, qc);
	event_add(t->ev, NULL);
	event_add(t->wev, NULL);
	t->deadline = clock_now() + CLIENT_HANDSHAKE_TIMEOUT;
	rearm(qc);
}

/* The proxy's part, as far as the socket allows: true once the tunnel is
 * up (TLS may start), false to wait or when it failed (and closed). */
static bool
proxy_step(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	char reason[sizeof qc->close_info.reason];
	bool ww, refused;
	int r;

	r = tcp_proxy_hs_step(t->px, t->fd, &ww, reason, sizeof reason, &refused);
	if (r == 0) {
		if (ww)
			want_write(qc);
		return false;
	}
	if (r < 0) {
		qc->close_info.proxy = true;
		qc->close_info.proxy_refused = refused;
		lost(qc, "%s", reason);
		return false;
	}
	log_debug("%s: the tunnel to the server is up", tcp_proxy_hs_name(t->px));
	tcp_proxy_hs_free(t->px);
	t->px = NULL;
	return true;
}

static void
io(struct quic_conn *qc, short what)
{
	struct quic_tcp *t = qc->tcp;
	socklen_t len = sizeof(int);
	int err = 0;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	if (!t->connected) {
		if (!(what & EV_WRITE))
			return;
		if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
			err = errno;
		if (err != 0 && t->direct_until != 0) {
			to_proxy(qc, strerror(err));
			return;
		}
		if (err != 0) {
			qc->close_info.proxy = t->via_proxy;
			if (t->via_proxy)
				lost(qc, "cannot connect to %s: %s",
				    tcp_proxy_hs_name(t->px), strerror(err));
			else
				lost(qc, "connect: %s", strerror(err));
			return;
		}
		t->connected = true;
		len = sizeof qc->local;
		if (getsockname(t->fd, (struct sockaddr *)&qc->local, &len) == 0)
			qc->path.local.addrlen = len;
		if (t->direct_until != 0) {
			/* Direct works: the proxy is not needed. */
			t->direct_until = 0;
			tcp_proxy_hs_free(t->px);
			t->px = NULL;
		}
	}
	if (t->px != NULL && !proxy_step(qc))
		return;
	if (!t->tls_done)
		tls_handshake(qc);
	if (t->tls_done && qc->state != QUIC_STATE_CLOSED)
		tls_read(qc);
	if (qc->state != QUIC_STATE_CLOSED) {
		quic_mark_dirty(qc);
		if (qc->cbs->input_done != NULL)
			qc->cbs->input_done(qc, qc->arg);
	}
	quic_write_dirty();
}

static void
io_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	io(arg, what);
}

static void
again_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	io(arg, EV_READ);
}

/* Streams whose both directions are over go, and the peer may open one
 * more in place of each of its own. */
static void
sweep(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	struct quic_stream *s, *next;

	for (s = LIST_FIRST(&qc->streams); s != NULL; s = next) {
		next = LIST_NEXT(s, entry);
		if (!s->tx_done || !s->rx_done)
			continue;
		if (!is_local_id(qc, s->id)) {
			t->peer_max++;
			t->send_max_streams = true;
		}
		if (qc->cbs->stream_close != NULL)
			qc->cbs->stream_close(qc, s->id, s->close_code, s->arg, qc->arg);
		/* The owner may have closed the session from its callback. */
		next = LIST_NEXT(s, entry);
		quic_stream_free(qc, s);
		if (qc->state == QUIC_STATE_CLOSED)
			return;
	}
}

/* Copy `n` bytes of `s` from send_off on into `dst`. */
static void
copy_out(struct quic_stream *s, uint8_t *dst, size_t n)
{
	while (n > 0 && s->cur != NULL) {
		struct stream_chunk *c = s->cur;
		size_t skip = (size_t)(s->send_off - c->off);
		size_t k = c->len - skip < n ? c->len - skip : n;

		memcpy(dst, c->data + skip, k);
		dst += k;
		n -= k;
		s->send_off += k;
		if (s->send_off == c->off + c->len)
			s->cur = c->next;
	}
}

/* One STREAM frame of `s` into obuf, if flow control and room allow.
 * Returns false when obuf is full. */
static bool
fill_stream(struct quic_conn *qc, struct quic_stream *s)
{
	struct quic_tcp *t = qc->tcp;
	size_t room = OBUF_SIZE - t->olen, hdr;
	uint64_t n = s->end - s->send_off;
	bool fin;

	if (room <= QMUX_MAX_HEADER)
		return false;
	if (n > s->tx_max - s->send_off)
		n = s->tx_max - s->send_off;
	if (n > t->tx_max_data - t->tx_data)
		n = t->tx_max_data - t->tx_data;
	if (n > STREAM_SLICE)
		n = STREAM_SLICE;
	if (n > room - QMUX_MAX_HEADER)
		n = room - QMUX_MAX_HEADER;
	fin = s->fin && s->send_off + n == s->end;
	if (n == 0 && !fin) {
		if (s->send_off == s->tx_max)
			s->blocked = true;        /* MAX_STREAM_DATA unblocks it */
		else
			t->conn_blocked = true;   /* MAX_DATA unblocks them all */
		quic_stream_set_pending(qc, s);
		return true;
	}
	hdr = qmux_encode_stream_header(t->obuf + t->olen, room, (uint64_t)s->id,
	    s->send_off, (size_t)n, fin);
	if (hdr == 0)
		return false;
	t->olen += hdr;
	copy_out(s, t->obuf + t->olen, (size_t)n);
	t->olen += (size_t)n;
	t->tx_data += n;
	if (fin) {
		s->fin_sent = true;
		s->tx_done = true;
	}
	/* Round robin: the next frame serves the next stream. */
	TAILQ_REMOVE(&qc->pending_streams, s, pending_entry);
	s->pending = false;
	quic_stream_set_pending(qc, s);
	/* Handed on: with a peer that reports what its reader consumed the
	 * bytes are kept until it does (got_max_stream_data); else this is
	 * as good as acknowledged, and the writer may read more. */
	if (t->consumed_step == 0)
		quic_stream_acked_to(qc, s, s->send_off);
	return true;
}

/* Gather control frames, DATAGRAMs and stream data into obuf. */
static void
fill(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	const struct dgramq_item *d;
	struct quic_stream *s;
	uint64_t now = clock_now();
	uint8_t buf[32];
	size_t n, answer;

	if (t->send_max_data) {
		t->send_max_data = false;
		ctl_add(qc, buf, qmux_encode_max(buf, sizeof buf, QMUX_MAX_DATA, 0,
		    t->rx_max_data));
	}
	if (t->send_max_streams) {
		t->send_max_streams = false;
		ctl_add(qc, buf, qmux_encode_max(buf, sizeof buf,
		    QMUX_MAX_STREAMS_BIDI, 0, t->peer_max));
	}
	if (t->answer_due) {
		t->answer_due = false;
		t->obuf[t->olen++] = QMUX_PADDING;
	}
	answer = t->olen;
	n = (size_t)evbuffer_remove(t->ctl, t->obuf + t->olen, OBUF_SIZE - t->olen);
	t->olen += n;
	t->sent_real = t->olen > answer;
	if (qc->state != QUIC_STATE_ESTABLISHED)
		return;
	qc->stats.dgram_stale += dgramq_expire(&qc->dq, now, DGRAM_MAX_AGE);
	while ((d = dgramq_peek(&qc->dq)) != NULL) {
		if (d->len > t->dgram_max_peer) {
			qc->stats.dgram_too_big++;
			dgramq_pop(&qc->dq);
			continue;
		}
		if (OBUF_SIZE - t->olen < d->len + QMUX_MAX_HEADER)
			break;
		t->olen += qmux_encode_datagram_header(t->obuf + t->olen,
		    OBUF_SIZE - t->olen, d->len);
		memcpy(t->obuf + t->olen, d->data, d->len);
		t->olen += d->len;
		qc->stats.tx_dgrams++;
		qc->stats.tx_dgram_bytes += d->len;
		dgramq_pop(&qc->dq);
	}
	while (!t->conn_blocked && (s = TAILQ_FIRST(&qc->pending_streams)) != NULL) {
		if (!fill_stream(qc, s) || qc->state == QUIC_STATE_CLOSED)
			break;
	}
	if (t->olen == 0 && t->keepalive_ns != 0 && now - t->last_tx >= t->keepalive_ns) {
		t->olen += qmux_encode_ping(t->obuf, OBUF_SIZE);
		t->probe_at = now;
		if (t->ping_at == 0)
			t->ping_at = now;
	}
	/* Sent, and silence since: ask, and again each PROBE_MS. */
	if (t->peer_answers && t->sent_since_rx &&
	    now - qc->last_rx >= PROBE_MS * 1000000ull &&
	    now - t->probe_at >= PROBE_MS * 1000000ull &&
	    OBUF_SIZE - t->olen >= QMUX_MAX_HEADER) {
		t->olen += qmux_encode_ping(t->obuf + t->olen, OBUF_SIZE - t->olen);
		t->probe_at = now;
		if (t->ping_at == 0)
			t->ping_at = now;
	}
	t->sent_real = t->sent_real || t->olen > answer;
}

/* Milliseconds since the kernel last took an acknowledgement from the
 * peer; 0 if it cannot tell. */
static uint64_t
ack_silence_ms(const struct quic_tcp *t)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;

	if (getsockopt(t->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return 0;
	return ti.tcpi_last_ack_recv;
}

/* The dead-path rule (DEAD_MS): true once the session is over. */
static bool
path_dead(struct quic_conn *qc, uint64_t now)
{
	struct quic_tcp *t = qc->tcp;
	uint64_t silence_ms;

	if (!t->peer_answers || t->ping_at == 0 ||
	    now - t->ping_at < DEAD_MS * 1000000ull)
		return false;
	/* An acknowledgement lately: alive, just slow. */
	if ((silence_ms = ack_silence_ms(t)) < DEAD_MS)
		return false;
	lost(qc, "no answer to a PING for %llu ms and no TCP acknowledgement "
	    "for %llu ms", (unsigned long long)((now - t->ping_at) / 1000000u),
	    (unsigned long long)silence_ms);
	return true;
}

static void
rearm(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	uint64_t now = clock_now(), at, d;
	struct timeval tv;

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	if (qc->state != QUIC_STATE_ESTABLISHED) {
		at = t->deadline;
		if (t->direct_until != 0 && t->direct_until < at)
			at = t->direct_until;
	} else {
		at = qc->last_rx + t->idle_ns;
		if (t->keepalive_ns != 0 && t->last_tx + t->keepalive_ns < at)
			at = t->last_tx + t->keepalive_ns;
		if (t->peer_answers && t->sent_since_rx) {
			d = qc->last_rx > t->probe_at ? qc->last_rx : t->probe_at;
			d += PROBE_MS * 1000000ull;
			/* Due, but not sent (the socket is full): soon. */
			if (d <= now)
				d = now + PROBE_MS * 1000000ull / 4;
			if (d < at)
				at = d;
		}
		/* Past DEAD_MS with acknowledgements still coming: look
		 * again now and then. */
		if (t->peer_answers && t->ping_at != 0) {
			d = t->ping_at + DEAD_MS * 1000000ull;
			if (d <= now)
				d = now + PROBE_MS * 1000000ull / 4;
			if (d < at)
				at = d;
		}
	}
	d = at > now ? (at - now + 999) / 1000 : 0;
	tv.tv_sec = (time_t)(d / 1000000);
	tv.tv_usec = (suseconds_t)(d % 1000000);
	evtimer_add(qc->timer, &tv);
}

static void
flush(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;
	int n, err;

	for (int rounds = 0; rounds < WRITE_ROUNDS; rounds++) {
		if (t->olen == 0)
			fill(qc);
		if (t->olen == 0 || qc->state == QUIC_STATE_CLOSED)
			break;
		n = wolfSSL_write(qc->ssl, t->obuf, (int)t->olen);
		if (n > 0) {
			t->olen = 0;
			t->last_tx = clock_now();
			if (t->sent_real)
				t->sent_since_rx = true;
			continue;
		}
		err = wolfSSL_get_error(qc->ssl, n);
		if (err == WOLFSSL_ERROR_WANT_WRITE || err == WOLFSSL_ERROR_WANT_READ) {
			/* The same bytes go again when the socket drains. */
			want_write(qc);
			break;
		}
		if (!peer_alert(qc))
			lost(qc, "TCP connection lost (write)");
		end(qc);
		return;
	}
	if (evbuffer_get_length(t->ctl) > CTL_MAX) {
		fail(qc, QMUX_ERR_INTERNAL, "peer does not read");
		return;
	}
	/* Out of rounds with more to send: continue on the next pass. */
	if (t->olen == 0 && (evbuffer_get_length(t->ctl) > 0 ||
	    (qc->state == QUIC_STATE_ESTABLISHED && (dgramq_len(&qc->dq) > 0 ||
	    (!t->conn_blocked && !TAILQ_EMPTY(&qc->pending_streams))))))
		quic_mark_dirty(qc);
}

static void
quic_tcp_write(struct quic_conn *qc)
{
	if (qc->state == QUIC_STATE_CLOSED || !qc->tcp->tls_done)
		return;
	sweep(qc);
	if (qc->state == QUIC_STATE_CLOSED)
		return;
	flush(qc);
	/* A FIN just written may have finished a stream. */
	sweep(qc);
	rearm(qc);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quic_conn *qc = arg;
	struct quic_tcp *t = qc->tcp;
	uint64_t now = clock_now();

	(void)fd;
	(void)what;
	if (qc->state == QUIC_STATE_HANDSHAKING && t->direct_until != 0 &&
	    now >= t->direct_until && !t->connected) {
		to_proxy(qc, "no answer");
		return;
	}
	if (qc->state == QUIC_STATE_HANDSHAKING && now >= t->deadline) {
		qc->close_info.idle = true;
		if (t->px != NULL) {
			qc->close_info.proxy = true;
			lost(qc, "%s: %s within %llu s", tcp_proxy_hs_name(t->px),
			    t->connected ? "no answer" : "no TCP connection",
			    (unsigned long long)(CLIENT_HANDSHAKE_TIMEOUT /
			    1000000000u));
		} else
			lost(qc, "handshake timeout");
		return;
	}
	/* Early: libevent counts a timeout from the time it cached when
	 * its loop last woke, which lags clock_now by what the callbacks
	 * since then took (much, under a flood). Writing re-arms only once
	 * TLS is done, so a handshake must re-arm here, or it would never
	 * time out. */
	if (qc->state == QUIC_STATE_HANDSHAKING) {
		rearm(qc);
		return;
	}
	if (qc->state == QUIC_STATE_ESTABLISHED && now - qc->last_rx >= t->idle_ns) {
		qc->close_info.idle = true;
		lost(qc, "idle timeout");
		return;
	}
	if (qc->state == QUIC_STATE_ESTABLISHED && path_dead(qc, now))
		return;
	quic_mark_dirty(qc);
	quic_write_dirty();
}

static void
set_sockopts(int fd, ngtcp2_cc_algo cc)
{
	const char *ca = cc == NGTCP2_CC_ALGO_BBR ? "bbr" : "cubic";
	int one = 1, lowat = NOTSENT_LOWAT;
	unsigned user_timeout = USER_TIMEOUT_MS;

	/* Frames are gathered into records already; Nagle would only add
	 * a round trip's delay to a lone DATAGRAM or acknowledgement. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
	/* Bytes unacknowledged this long: the path is dead (PROBE_MS). */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
	    sizeof user_timeout);
	/* Congestion applies to the kernel's TCP here. BBR keeps the queue
	 * it builds near one round trip's worth, where loss-based control
	 * fills every buffer on the path, and the IP packets inside wait in
	 * that queue. A kernel without it (or a process not allowed to pick
	 * it) keeps its default. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, ca, (socklen_t)strlen(ca)) != 0)
		log_debug("TCP_CONGESTION %s: %s", ca, strerror(errno));
}

static struct quic_conn *
tcp_create(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, WOLFSSL_CTX *ctx, int fd,
    const struct sockaddr *remote, socklen_t remotelen, bool connected)
{
	struct quic_conn *qc = quic_conn_alloc(base, qs, cbs, arg, remote,
	    remotelen, &tcp_transport);
	struct quic_tcp *t = xcalloc(1, sizeof *t);
	socklen_t len = sizeof qc->local;

	qc->tcp = t;
	t->fd = fd;
	t->fwmark = qs->fwmark;
	t->cc = qs->cc;
	t->connected = connected;
	t->ctl = evbuffer_new();
	t->idle_ns = (uint64_t)qs->idle_timeout_s * 1000000000u;
	t->keepalive_ns = (uint64_t)qs->keepalive_s * 1000000000u;
	t->stream_window = qs->stream_window;
	t->rx_max_data = CONN_WINDOW;
	t->peer_max = PEER_STREAMS;
	t->last_tx = clock_now();
	t->deadline = t->last_tx + (qs->role == QUIC_ROLE_SERVER ?
	    QUIC_SERVER_HANDSHAKE_TIMEOUT : CLIENT_HANDSHAKE_TIMEOUT);
	if (getsockname(fd, (struct sockaddr *)&qc->local, &len) == 0)
		qc->path.local.addrlen = len;
	dgramq_init(&qc->dq, DGRAM_QUEUE, qs->max_udp_payload);
	set_sockopts(fd, qs->cc);
	t->ev = event_new(base, fd, EV_READ | EV_PERSIST, io_cb, qc);
	t->wev = event_new(base, fd, EV_WRITE, io_cb, qc);
	t->again = event_new(base, -1, 0, again_cb, qc);
	qc->timer = evtimer_new(base, timer_cb, qc);
	/* Rate probes are QUIC's alone: TCP speaks rove/1. */
	qc->ssl = tls_session_create(ctx, qs->role == QUIC_ROLE_SERVER ?
	    TLS_ROLE_SERVER : TLS_ROLE_CLIENT, &qc->conn_ref, PROTO_ALPN);
	wolfSSL_set_fd(qc->ssl, fd);
	event_add(t->ev, NULL);
	/* The first step (connect finished, or a ClientHello to answer)
	 * comes with writability. */
	event_add(t->wev, NULL);
	rearm(qc);
	return qc;
}

struct quic_conn *
quic_tcp_client_create(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, WOLFSSL_CTX *ctx,
    const struct sockaddr *remote, socklen_t remotelen,
    enum quic_tcp_route route, const struct quic_tcp_proxy *proxy,
    char **cause)
{
	struct quic_conn *qc;
	struct quic_tcp *t;
	int fd;

	if (route == QUIC_TCP_PROXY)
		fd = open_socket(proxy->addr, proxy->addrlen, qs->fwmark, cause);
	else
		fd = open_socket(remote, remotelen, qs->fwmark, cause);
	if (fd == -1) {
		if (route != QUIC_TCP_DIRECT_THEN_PROXY)
			return NULL;
		/* Not even a socket for the server (no route to it, say):
		 * the proxy may yet reach it. */
		free(*cause);
		*cause = NULL;
		if ((fd = open_socket(proxy->addr, proxy->addrlen, qs->fwmark,
		    cause)) == -1)
			return NULL;
		route = QUIC_TCP_PROXY;
	}
	qc = tcp_create(base, qs, cbs, arg, ctx, fd, remote, remotelen, false);
	t = qc->tcp;
	if (route == QUIC_TCP_DIRECT)
		return qc;
	t->px = tcp_proxy_hs_new(proxy);
	memcpy(&t->proxy_addr, proxy->addr, proxy->addrlen);
	t->proxy_addrlen = proxy->addrlen;
	t->via_proxy = route == QUIC_TCP_PROXY;
	if (route == QUIC_TCP_DIRECT_THEN_PROXY) {
		t->direct_until = clock_now() + proxy->direct_wait_ns;
		rearm(qc);
	}
	return qc;
}

bool
quic_tcp_via_proxy(const struct quic_conn *qc)
{
	return qc->tcp != NULL && qc->tcp->via_proxy;
}

bool
quic_tcp_proxy_reached(const struct quic_conn *qc)
{
	return quic_tcp_via_proxy(qc) && qc->tcp->connected;
}

struct quic_conn *
quic_tcp_server_create(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, WOLFSSL_CTX *ctx, int fd,
    const struct sockaddr *remote, socklen_t remotelen)
{
	return tcp_create(base, qs, cbs, arg, ctx, fd, remote, remotelen, true);
}

void
quic_tcp_hurry(struct quic_conn *qc, uint64_t within_ns)
{
	struct quic_tcp *t = qc->tcp;
	uint64_t at = clock_now() + within_ns;

	if (t == NULL || qc->state != QUIC_STATE_HANDSHAKING || t->deadline <= at)
		return;
	t->deadline = at;
	rearm(qc);
}

static void
linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lingering *l = arg;
	uint8_t buf[4096];
	ssize_t n = -1;

	(void)what;
	if (clock_now() < l->deadline) {
		/* Read and drop until the peer's FIN (0) or an error. */
		for (int i = 0; i < 16 && (n = read(fd, buf, sizeof buf)) > 0; i++)
			;
		if (n > 0 || (n == -1 && (errno == EAGAIN || errno == EINTR)))
			return;
	}
	LIST_REMOVE(l, entry);
	event_free(l->ev);
	close(l->fd);
	free(l);
	nlinger--;
}

bool
quic_tcp_lingering(void)
{
	return nlinger > 0;
}

void
quic_tcp_linger_clear(void)
{
	struct lingering *l;

	while ((l = LIST_FIRST(&lingering)) != NULL) {
		LIST_REMOVE(l, entry);
		event_free(l->ev);
		close(l->fd);
		free(l);
		nlinger--;
	}
}

static void
linger_close(struct event_base *base, int fd)
{
	struct timeval tv = { LINGER_MS / 1000, (LINGER_MS % 1000) * 1000 };
	struct lingering *l;

	(void)shutdown(fd, SHUT_WR);
	if (nlinger >= LINGER_MAX) {
		close(fd);
		return;
	}
	l = xcalloc(1, sizeof *l);
	l->fd = fd;
	l->deadline = clock_now() + LINGER_MS * 1000000ull;
	l->ev = event_new(base, fd, EV_READ | EV_PERSIST, linger_cb, l);
	event_add(l->ev, &tv);
	LIST_INSERT_HEAD(&lingering, l, entry);
	nlinger++;
}

static void
quic_tcp_free(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;

	event_free(t->ev);
	event_free(t->wev);
	event_free(t->again);
	evbuffer_free(t->ctl);
	tcp_proxy_hs_free(t->px);
	free(t->rbuf);
	free(t->obuf);
	linger_close(qc->base, t->fd);
	free(t);
	qc->tcp = NULL;
}

static void
quic_tcp_stream_consume(struct quic_conn *qc, int64_t id, size_t n)
{
	struct quic_tcp *t = qc->tcp;
	struct quic_stream *s;
	uint8_t buf[32];

	if (qc->state == QUIC_STATE_CLOSED || n == 0)
		return;
	conn_consumed(qc, n);
	if ((s = quic_stream_find(qc, id)) == NULL || s->rx_done)
		return;
	s->rx_consumed += n;
	if (s->rx_max - s->rx_consumed < t->stream_window / 2 ||
	    (t->consumed_step != 0 &&
	    s->rx_consumed - s->rx_reported >= t->consumed_step)) {
		s->rx_max = s->rx_consumed + t->stream_window;
		s->rx_reported = s->rx_consumed;
		ctl_add(qc, buf, qmux_encode_max(buf, sizeof buf,
		    QMUX_MAX_STREAM_DATA, (uint64_t)id, s->rx_max));
	}
}

static void
quic_tcp_stream_stop_reading(struct quic_conn *qc, int64_t id, uint64_t code)
{
	struct quic_stream *s = quic_stream_find(qc, id);
	uint8_t buf[32];

	if (qc->state == QUIC_STATE_CLOSED || s == NULL || s->rx_done)
		return;
	s->rx_done = true;
	if (s->close_code == 0)
		s->close_code = code;
	ctl_add(qc, buf, qmux_encode_stop_sending(buf, sizeof buf,
	    (uint64_t)id, code));
}

static void
quic_tcp_stream_reset(struct quic_conn *qc, int64_t id, uint64_t code)
{
	struct quic_stream *s = quic_stream_find(qc, id);

	if (qc->state == QUIC_STATE_CLOSED || s == NULL)
		return;
	tx_abort(qc, s, code);
	quic_tcp_stream_stop_reading(qc, id, code);
	quic_mark_dirty(qc);
}

static int64_t
quic_tcp_open_stream(struct quic_conn *qc, void *arg)
{
	struct quic_tcp *t = qc->tcp;
	struct quic_stream *s;

	if (qc->state != QUIC_STATE_ESTABLISHED || t->local_next >= t->local_max)
		return -1;
	s = stream_new(qc, stream_id(qc, t->local_next++, true), true);
	s->arg = arg;
	return s->id;
}

static uint64_t
quic_tcp_streams_left(struct quic_conn *qc)
{
	struct quic_tcp *t = qc->tcp;

	return t->local_max - t->local_next;
}

static bool
quic_tcp_stream_is_local(struct quic_conn *qc, int64_t id)
{
	return is_local_id(qc, id);
}

static size_t
quic_tcp_dgram_max(struct quic_conn *qc)
{
	/* What one QUIC packet on a 1500-byte path would carry (short
	 * header with a 16-byte connection ID, AEAD tag, frame header):
	 * the inner MTU stays the same on either transport. */
	size_t overhead = 1 + QUIC_SCID_LEN + 4 + 16 + 1 + 2;

	if (qc->max_udp_payload <= overhead)
		return 0;
	return qc->max_udp_payload - overhead;
}

static bool
quic_tcp_stalled(struct quic_conn *qc)
{
	(void)qc;
	/* TCP retransmits by itself; a dead path shows as an error. */
	return false;
}

static void
quic_tcp_get_stats(struct quic_conn *qc, struct quic_conn_stats *st)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;

	*st = qc->stats;
	st->tcp = true;
	st->stream_unacked = qc->unacked;
	if (getsockopt(qc->tcp->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return;
	st->rtt_ms = ti.tcpi_rtt / 1000.0;
	st->cwnd = (uint64_t)ti.tcpi_snd_cwnd * ti.tcpi_snd_mss;
	st->bytes_in_flight = (uint64_t)ti.tcpi_unacked * ti.tcpi_snd_mss;
}

static const struct sockaddr *
quic_tcp_local(const struct quic_conn *qc, socklen_t *len)
{
	*len = qc->path.local.addrlen;
	return (const struct sockaddr *)&qc->local;
}

static const struct sockaddr *
quic_tcp_remote(const struct quic_conn *qc, socklen_t *len)
{
	*len = qc->path.remote.addrlen;
	return (const struct sockaddr *)&qc->remote;
}

static const struct quic_transport tcp_transport = {
	.free = quic_tcp_free,
	.write = quic_tcp_write,
	.close = quic_tcp_close,
	.dgram_max = quic_tcp_dgram_max,
	.stream_consume = quic_tcp_stream_consume,
	.stream_reset = quic_tcp_stream_reset,
	.stream_stop_reading = quic_tcp_stream_stop_reading,
	.open_stream = quic_tcp_open_stream,
	.stream_is_local = quic_tcp_stream_is_local,
	.streams_left = quic_tcp_streams_left,
	.stalled = quic_tcp_stalled,
	.get_stats = quic_tcp_get_stats,
	.local = quic_tcp_local,
	.remote = quic_tcp_remote,
};

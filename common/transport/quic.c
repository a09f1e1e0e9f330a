/* The session behind quic.h, whichever transport carries it: the owner's
 * callbacks, stream send queues kept until acknowledged, the limits on
 * unacknowledged bytes, the DATAGRAM queue, the process's list of
 * connections with work to write, and the pin check. Each call that
 * depends on how bytes reach the peer goes to the session's transport
 * (struct quic_transport, quic-int.h): QUIC over UDP through ngtcp2
 * (quic-udp.c) or QUIC's frames over TLS on TCP (quic-tcp.c). Neither
 * transport calls the other. */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <event2/buffer.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "quic-int.h"
#include "quic.h"

static void flush_cb(evutil_socket_t, short, void *);
static void closed_event_cb(evutil_socket_t, short, void *);

static bool (*pin_check)(struct quic_conn *, const uint8_t *, void *);
static TAILQ_HEAD(, quic_conn) dirty_conns = TAILQ_HEAD_INITIALIZER(dirty_conns);
/* Every connection, for waking writers when process-wide room returns. */
static LIST_HEAD(, quic_conn) all_conns = LIST_HEAD_INITIALIZER(all_conns);
/* Unacknowledged stream bytes of the whole process, and their limit. */
static size_t unacked_all, unacked_all_limit;
static bool unacked_all_blocked;
/* Runs the write loop for work queued outside any I/O callback (a timer,
 * a TCP connect finishing): one event for the process, made active when
 * the first connection becomes dirty. */
static struct event *flush_ev;

void
quic_set_pin_check(bool (*check)(struct quic_conn *, const uint8_t *, void *))
{
	pin_check = check;
}

bool
quic_tls_resumed(WOLFSSL *ssl, const uint8_t pubkey[static KEY_LEN])
{
	/* The key was pinned when the ticket was issued; check it is still
	 * configured, exactly as for a full handshake. */
	return quic_tls_pin(ssl, pubkey);
}

bool
quic_tls_pin(WOLFSSL *ssl, const uint8_t pubkey[static KEY_LEN])
{
	ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);
	struct quic_conn *qc;

	if (ref == NULL)
		return false;
	qc = ref->user_data;
	if (pin_check == NULL || !pin_check(qc, pubkey, qc->arg)) {
		qc->close_info.pin_mismatch = true;
		return false;
	}
	memcpy(qc->peer_key, pubkey, KEY_LEN);
	qc->peer_key_set = true;
	return true;
}

struct quic_stream *
quic_stream_find(struct quic_conn *qc, int64_t id)
{
	struct quic_stream *s;

	LIST_FOREACH(s, &qc->streams, entry) {
		if (s->id == id)
			return s;
	}
	return NULL;
}

struct quic_stream *
quic_stream_get(struct quic_conn *qc, int64_t id)
{
	struct quic_stream *s = quic_stream_find(qc, id);

	if (s == NULL) {
		s = xcalloc(1, sizeof *s);
		s->id = id;
		LIST_INSERT_HEAD(&qc->streams, s, entry);
	}
	return s;
}

void
quic_stream_set_pending(struct quic_conn *qc, struct quic_stream *s)
{
	bool want = !s->blocked && !s->reset &&
	    (s->send_off < s->end || (s->fin && !s->fin_sent));

	if (want && !s->pending)
		TAILQ_INSERT_TAIL(&qc->pending_streams, s, pending_entry);
	else if (!want && s->pending)
		TAILQ_REMOVE(&qc->pending_streams, s, pending_entry);
	s->pending = want;
}

/* `n` queued stream bytes are gone (acknowledged or discarded). */
void
quic_unacked_sub(struct quic_conn *qc, size_t n)
{
	qc->unacked -= n;
	unacked_all -= n;
}

void
quic_stream_free(struct quic_conn *qc, struct quic_stream *s)
{
	struct stream_chunk *c, *next;

	quic_unacked_sub(qc, (size_t)(s->end - s->acked));
	for (c = s->head; c != NULL; c = next) {
		next = c->next;
		free(c);
	}
	if (s->pending)
		TAILQ_REMOVE(&qc->pending_streams, s, pending_entry);
	LIST_REMOVE(s, entry);
	free(s);
}

void
quic_stream_acked_to(struct quic_conn *qc, struct quic_stream *s, uint64_t upto)
{
	struct stream_chunk *c;

	/* Acknowledged prefixes only grow. */
	if (upto > s->acked) {
		quic_unacked_sub(qc, (size_t)(upto - s->acked));
		s->acked = upto;
	}
	while ((c = s->head) != NULL && c->off + c->len <= s->acked) {
		s->head = c->next;
		if (s->head == NULL)
			s->tail = NULL;
		free(c);
	}
	if (qc->cbs->stream_acked != NULL)
		qc->cbs->stream_acked(qc, s->id, s->arg, qc->arg);
	quic_wake_blocked(qc);
}

/* Tell the writers of streams that found no room (a limit was reached)
 * once acknowledgements made some: every stream of this connection, or of
 * every connection when the process-wide limit was the one reached. */
void
quic_wake_blocked(struct quic_conn *qc)
{
	struct quic_conn *c, *next;
	struct quic_stream *s, *snext;

	if (unacked_all_blocked && unacked_all < unacked_all_limit) {
		unacked_all_blocked = false;
		for (c = LIST_FIRST(&all_conns); c != NULL; c = next) {
			next = LIST_NEXT(c, all_entry);
			c->unacked_blocked = true;
			if (c != qc)
				quic_wake_blocked(c);
		}
	}
	if (!qc->unacked_blocked ||
	    (qc->unacked_limit != 0 && qc->unacked >= qc->unacked_limit) ||
	    qc->cbs->stream_acked == NULL)
		return;
	qc->unacked_blocked = false;
	for (s = LIST_FIRST(&qc->streams); s != NULL; s = snext) {
		snext = LIST_NEXT(s, entry);
		if (s->arg != NULL)
			qc->cbs->stream_acked(qc, s->id, s->arg, qc->arg);
	}
}

struct quic_conn *
quic_conn_alloc(struct event_base *base, const struct quic_settings *qs,
    const struct quic_conn_cbs *cbs, void *arg, const struct sockaddr *remote,
    socklen_t remotelen, const struct quic_transport *tr)
{
	struct quic_conn *qc = xcalloc(1, sizeof *qc);

	qc->tr = tr;
	qc->role = qs->role;
	qc->state = QUIC_STATE_HANDSHAKING;
	qc->base = base;
	qc->cbs = cbs;
	qc->arg = arg;
	qc->reset_secret = qs->reset_secret;
	qc->server_id = qs->server_id;
	qc->max_udp_payload = qs->max_udp_payload;
	qc->last_rx = clock_now();
	qc->last_ack = qc->last_rx;
	qc->conn_ref.user_data = qc;
	qc->qlog_fd = -1;
	memcpy(&qc->remote, remote, remotelen);
	qc->path.local.addr = (ngtcp2_sockaddr *)&qc->local;
	qc->path.remote.addr = (ngtcp2_sockaddr *)&qc->remote;
	qc->path.remote.addrlen = remotelen;
	LIST_INIT(&qc->streams);
	TAILQ_INIT(&qc->pending_streams);
	LIST_INSERT_HEAD(&all_conns, qc, all_entry);
	if (flush_ev == NULL)
		flush_ev = event_new(base, -1, 0, flush_cb, NULL);
	qc->closed_ev = evtimer_new(base, closed_event_cb, qc);
	return qc;
}

void
quic_conn_free(struct quic_conn *qc)
{
	struct quic_stream *s;

	if (qc == NULL)
		return;
	qc->tr->free(qc);
	if (qc->dirty)
		TAILQ_REMOVE(&dirty_conns, qc, dirty_entry);
	while ((s = LIST_FIRST(&qc->streams)) != NULL)
		quic_stream_free(qc, s);
	LIST_REMOVE(qc, all_entry);
	dgramq_clear(&qc->dq);
	if (qc->timer != NULL)
		event_free(qc->timer);
	if (qc->closed_ev != NULL)
		event_free(qc->closed_ev);
	if (qc->ssl != NULL)
		wolfSSL_free(qc->ssl);
	if (qc->qlog_fd != -1)
		close(qc->qlog_fd);
	free(qc);
}

/* Report the end to the owner from a fresh event, so that no ngtcp2 call
 * is on the stack when the owner frees the connection. */
void
quic_finish(struct quic_conn *qc)
{
	struct timeval now = { 0, 0 };

	if (qc->state == QUIC_STATE_CLOSED)
		return;
	qc->state = QUIC_STATE_CLOSED;
	evtimer_del(qc->timer);
	evtimer_add(qc->closed_ev, &now);
}

static void
closed_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quic_conn *qc = arg;

	(void)fd;
	(void)what;
	qc->cbs->closed(qc, &qc->close_info, qc->arg);
}

void
quic_mark_dirty(struct quic_conn *qc)
{
	if (!qc->dirty) {
		qc->dirty = true;
		TAILQ_INSERT_TAIL(&dirty_conns, qc, dirty_entry);
		if (flush_ev != NULL)
			event_active(flush_ev, EV_TIMEOUT, 0);
	}
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	quic_write_dirty();
}

void
quic_conn_write(struct quic_conn *qc)
{
	if (qc->dirty) {
		qc->dirty = false;
		TAILQ_REMOVE(&dirty_conns, qc, dirty_entry);
	}
	qc->tr->write(qc);
}

void
quic_write_dirty(void)
{
	struct udp_batch *batches[16];
	size_t nbatches = 0;
	struct quic_conn *qc;

	while ((qc = TAILQ_FIRST(&dirty_conns)) != NULL) {
		struct udp_batch *b = qc->batch;
		size_t i;

		quic_conn_write(qc);
		if (b == NULL)
			continue; /* TLS over TCP: written already */
		for (i = 0; i < nbatches && batches[i] != b; i++)
			;
		if (i == nbatches) {
			if (nbatches == sizeof batches / sizeof batches[0]) {
				udp_batch_flush(b);
				continue;
			}
			batches[nbatches++] = b;
		}
	}
	for (size_t i = 0; i < nbatches; i++)
		udp_batch_flush(batches[i]);
}

int
quic_conn_send_datagram(struct quic_conn *qc, const uint8_t *data, size_t len)
{
	size_t dropped;

	if (qc->state != QUIC_STATE_ESTABLISHED && !qc->early_ready)
		return -ENOTCONN;
	if (len == 0)
		return -EINVAL;
	if (len > quic_conn_dgram_max(qc)) {
		qc->stats.dgram_too_big++;
		return -EMSGSIZE;
	}
	dropped = dgramq_push(&qc->dq, data, len, clock_now());
	qc->stats.dgram_queue_full += dropped;
	quic_mark_dirty(qc);
	return (int)dropped;
}

size_t
quic_conn_dgram_max(struct quic_conn *qc)
{
	return qc->tr->dgram_max(qc);
}

/* Queue `c`, holding `len` new bytes, at the end of the stream's send
 * queue; they count as unacknowledged until the peer acknowledges them. */
static void
stream_append(struct quic_conn *qc, struct quic_stream *s,
    struct stream_chunk *c, size_t len)
{
	c->next = NULL;
	c->off = s->end;
	c->len = len;
	if (s->tail != NULL)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	if (s->cur == NULL)
		s->cur = c;
	s->end += len;
	qc->unacked += len;
	unacked_all += len;
}

int
quic_conn_stream_send(struct quic_conn *qc, int64_t id, const uint8_t *data,
    size_t len, bool fin)
{
	struct quic_stream *s;
	struct stream_chunk *c;

	if (qc->state == QUIC_STATE_CLOSED)
		return -1;
	s = quic_stream_find(qc, id);
	if (s == NULL || s->fin || s->reset)
		return -1;
	if (len > 0) {
		c = xmalloc(sizeof *c + len);
		memcpy(c->data, data, len);
		stream_append(qc, s, c, len);
	}
	s->fin = fin;
	quic_stream_set_pending(qc, s);
	quic_mark_dirty(qc);
	return 0;
}

ssize_t
quic_conn_stream_read_fd(struct quic_conn *qc, int64_t id, int fd, size_t max)
{
	struct quic_stream *s;
	struct stream_chunk *c, *shrunk;
	ssize_t n;
	int saved;

	s = quic_stream_find(qc, id);
	if (qc->state == QUIC_STATE_CLOSED || s == NULL || s->fin || s->reset) {
		errno = EPIPE;
		return -1;
	}
	if (max == 0)
		return 0;
	/* The chunk is what ngtcp2 sends from, so read straight into it. */
	c = xmalloc(sizeof *c + max);
	n = read(fd, c->data, max);
	if (n <= 0) {
		saved = errno;
		free(c);
		errno = saved;
		return n;
	}
	/* A short read keeps only what it holds: the queue may be bounded by
	 * bytes, but its memory must be too. Shrinking a heap block splits
	 * it in place. */
	if ((size_t)n < max && (shrunk = realloc(c, sizeof *c + (size_t)n)) != NULL)
		c = shrunk;
	stream_append(qc, s, c, (size_t)n);
	quic_stream_set_pending(qc, s);
	quic_mark_dirty(qc);
	return n;
}

size_t
quic_conn_stream_room(struct quic_conn *qc, int64_t id, size_t cap)
{
	size_t unacked = quic_conn_stream_unacked(qc, id), room;

	room = unacked < cap ? cap - unacked : 0;
	if (qc->unacked_limit != 0) {
		size_t left = qc->unacked < qc->unacked_limit ?
		    qc->unacked_limit - qc->unacked : 0;
		if (left < room) {
			room = left;
			/* Cleared only by the wake-up: another writer that
			 * still found room does not unblock this one. */
			if (room == 0)
				qc->unacked_blocked = true;
		}
	}
	if (unacked_all_limit != 0) {
		size_t left = unacked_all < unacked_all_limit ?
		    unacked_all_limit - unacked_all : 0;
		if (left < room) {
			room = left;
			if (room == 0)
				unacked_all_blocked = true;
		}
	}
	return room;
}

void
quic_conn_set_send_limit(struct quic_conn *qc, size_t limit)
{
	qc->unacked_limit = limit;
}

void
quic_set_send_limit_all(size_t limit)
{
	unacked_all_limit = limit;
}

size_t
quic_conn_unacked(const struct quic_conn *qc)
{
	return qc->unacked;
}

size_t
quic_unacked_all(void)
{
	return unacked_all;
}

size_t
quic_conn_stream_unacked(struct quic_conn *qc, int64_t id)
{
	struct quic_stream *s = quic_stream_find(qc, id);

	return s != NULL ? (size_t)(s->end - s->acked) : 0;
}

uint64_t
quic_conn_stream_queued(struct quic_conn *qc, int64_t id)
{
	struct quic_stream *s = quic_stream_find(qc, id);

	return s != NULL ? s->end : 0;
}

size_t
quic_conn_stream_copy_unacked(struct quic_conn *qc, int64_t id, uint64_t from,
    struct evbuffer *out)
{
	struct quic_stream *s = quic_stream_find(qc, id);
	struct stream_chunk *c;
	size_t n = 0;

	if (s == NULL)
		return 0;
	if (from < s->acked)
		from = s->acked;
	for (c = s->head; c != NULL; c = c->next) {
		uint64_t skip;

		if (c->off + c->len <= from)
			continue;
		skip = from > c->off ? from - c->off : 0;
		evbuffer_add(out, c->data + skip, c->len - (size_t)skip);
		n += c->len - (size_t)skip;
	}
	return n;
}

void
quic_conn_stream_consume(struct quic_conn *qc, int64_t id, size_t n)
{
	qc->tr->stream_consume(qc, id, n);
}

void
quic_conn_stream_set_arg(struct quic_conn *qc, int64_t id, void *arg)
{
	quic_stream_get(qc, id)->arg = arg;
}

void
quic_conn_stream_reset(struct quic_conn *qc, int64_t id, uint64_t code)
{
	qc->tr->stream_reset(qc, id, code);
}

void
quic_conn_stream_stop_reading(struct quic_conn *qc, int64_t id, uint64_t code)
{
	qc->tr->stream_stop_reading(qc, id, code);
}

int64_t
quic_conn_open_stream(struct quic_conn *qc, void *arg)
{
	return qc->tr->open_stream(qc, arg);
}

bool
quic_conn_stream_is_local(struct quic_conn *qc, int64_t id)
{
	return qc->tr->stream_is_local(qc, id);
}

uint64_t
quic_conn_streams_left(struct quic_conn *qc)
{
	return qc->tr->streams_left(qc);
}

void
quic_conn_close(struct quic_conn *qc, uint64_t app_error, const char *reason)
{
	qc->tr->close(qc, app_error, reason);
}

enum quic_state
quic_conn_state(const struct quic_conn *qc)
{
	return qc->state;
}

uint64_t
quic_conn_rx_idle_ms(const struct quic_conn *qc)
{
	return (clock_now() - qc->last_rx) / 1000000u;
}

bool
quic_conn_stalled(struct quic_conn *qc)
{
	return qc->tr->stalled(qc);
}

bool
quic_conn_early_ready(const struct quic_conn *qc)
{
	return qc->early_ready && qc->state == QUIC_STATE_HANDSHAKING;
}

bool
quic_conn_early_rx(const struct quic_conn *qc)
{
	return qc->role == QUIC_ROLE_SERVER && qc->early_rx &&
	    qc->state == QUIC_STATE_HANDSHAKING;
}

WOLFSSL *
quic_conn_tls(const struct quic_conn *qc)
{
	return qc->ssl;
}

const struct sockaddr *
quic_conn_local(const struct quic_conn *qc, socklen_t *len)
{
	return qc->tr->local(qc, len);
}

const struct sockaddr *
quic_conn_remote(const struct quic_conn *qc, socklen_t *len)
{
	return qc->tr->remote(qc, len);
}

void
quic_conn_get_stats(struct quic_conn *qc, struct quic_conn_stats *st)
{
	qc->tr->get_stats(qc, st);
}

const char *
quic_conn_id(const struct quic_conn *qc)
{
	return qc->id;
}

const uint8_t *
quic_conn_peer_key(const struct quic_conn *qc)
{
	return qc->peer_key_set ? qc->peer_key : NULL;
}

bool
quic_conn_is_tcp(const struct quic_conn *qc)
{
	return qc->tcp != NULL;
}

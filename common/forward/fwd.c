/* Forward streams of one connection: open, accept, relay, account. */
#include <event2/buffer.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "fwd.h"
#include "relay.h"
#include "stream-tag.h"

enum fwd_state {
	FWD_S_WAIT_STATUS, /* opener: header sent and relaying, the answer's
	                    * status byte not yet in */
	FWD_S_HEADER,      /* acceptor: reading the header */
	FWD_S_CONNECTING,  /* acceptor: the owner is connecting */
	FWD_S_RELAY,
	FWD_S_DEAD,        /* failed or done; waiting for the stream to close */
	FWD_S_PARKED,      /* relaying, its connection gone: waits for one */
	FWD_S_RESUMING,    /* opener: RESUME sent on a new stream, the
	                    * acceptor's answer not yet in */
};

struct fwd {
	struct stream_tag tag;      /* first: the stream argument's kind */
	LIST_ENTRY(fwd) entry;
	struct fwd_set *set;
	enum fwd_kind kind;
	bool opener;
	enum fwd_state state;
	int64_t sid;
	int fd;                     /* the socket before the relay owns it */
	struct relay *relay;
	uint64_t id;                /* for resumption; 0: none */
	uint64_t parked_ms;
	bool in_0rtt;               /* opener: opened in 0-RTT */
	bool stream_closed;
	bool relay_done;
	void *arg;
	char target[PROTO_FWD_MAX_HOST + 16];
	uint8_t hdr[PROTO_FWD_MAX_HOST + 32];
	size_t hdrlen;
	struct evbuffer *early;     /* acceptor: bytes after the header */
	bool early_fin;
	uint64_t started_ms;
	struct relay_stats last;    /* final relay figures */
};

static const char *const kind_names[] = { "local", "remote", "dynamic" };

void
fwd_set_init(struct fwd_set *set, struct event_base *base, struct quic_conn *qc,
    size_t cap, size_t max, const struct fwd_ops *ops, void *arg,
    struct fwd_counters *counters, const char *log_name)
{
	memset(set, 0, sizeof *set);
	set->base = base;
	set->qc = qc;
	set->cap = cap;
	set->max = max;
	set->ops = ops;
	set->arg = arg;
	set->counters = counters;
	set->log_name = log_name;
	LIST_INIT(&set->list);
}

static void
reset_fd(int fd)
{
	struct linger l = { 1, 0 };

	if (fd == -1)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	close(fd);
}

static void
fwd_free(struct fwd *f)
{
	struct fwd_set *set = f->set;

	if (f->arg != NULL && set->ops->release != NULL)
		set->ops->release(f, f->arg);
	LIST_REMOVE(f, entry);
	set->n--;
	if (f->relay != NULL)
		relay_free(f->relay);
	reset_fd(f->fd);
	if (f->early != NULL)
		evbuffer_free(f->early);
	free(f);
}

/* Free once nothing refers to the forward any more. */
static void
maybe_free(struct fwd *f)
{
	if (f->stream_closed && (f->relay == NULL || f->relay_done))
		fwd_free(f);
}

static void
count_failure(struct fwd *f, uint64_t code)
{
	struct fwd_set *set = f->set;
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(10000, 10);
	bool hint = code == PROTO_FWD_ERR_DENIED && set->deny_hint != NULL;

	if (code >= PROTO_FWD_ERR_COUNT)
		code = PROTO_FWD_ERR_PROTOCOL;
	set->counters->failed[code]++;
	if (log_ratelimit_ok(&rl, clock_now_ms()))
		log_info("%s forward to %s for %s failed: %s%s%s%s",
		    f->opener ? kind_names[f->kind] : "requested",
		    f->target[0] ? f->target : "?", set->log_name,
		    proto_fwd_error_name(code), hint ? " (" : "",
		    hint ? set->deny_hint : "", hint ? ")" : "");
}

/* Stop using the stream with `code`; the forward lives on until the
 * stream has closed. */
static void
kill_stream(struct fwd *f, uint64_t code)
{
	if (f->state == FWD_S_DEAD)
		return;
	f->state = FWD_S_DEAD;
	if (!f->stream_closed && f->set->qc != NULL)
		quic_conn_stream_reset(f->set->qc, f->sid, code);
	/* Early bytes no target will take: their credit goes back to the
	 * connection (see relay.c, return_credit). */
	if (f->early != NULL && evbuffer_get_length(f->early) > 0) {
		size_t n = evbuffer_get_length(f->early);

		evbuffer_drain(f->early, n);
		quic_conn_stream_consume(f->set->qc, f->sid, n);
	}
	reset_fd(f->fd);
	f->fd = -1;
}

static struct fwd *
fwd_new(struct fwd_set *set, enum fwd_kind kind, bool opener)
{
	struct fwd *f = xcalloc(1, sizeof *f);

	f->tag.kind = STREAM_FWD;
	f->set = set;
	f->kind = kind;
	f->opener = opener;
	f->fd = -1;
	f->sid = -1;
	f->started_ms = clock_now_ms();
	LIST_INSERT_HEAD(&set->list, f, entry);
	set->n++;
	return f;
}

/* Random, so that the IDs of one peer's forwards never meet, whichever
 * process or connection made them. */
static uint64_t
new_id(void)
{
	uint64_t id;

	random_bytes((uint8_t *)&id, sizeof id);
	id &= PROTO_FWD_ID_MAX;
	return id != 0 ? id : 1;
}

static void
on_relay_done(struct relay *r, uint64_t err, void *arg)
{
	struct fwd *f = arg;

	relay_get_stats(r, &f->last);
	f->relay_done = true;
	if (err == 0)
		f->set->counters->completed++;
	else
		count_failure(f, err);
	f->state = FWD_S_DEAD;
	relay_free(r);
	f->relay = NULL;
	maybe_free(f);
}

static void
start_relay(struct fwd *f, int fd)
{
	f->state = FWD_S_RELAY;
	f->relay = relay_create(f->set->base, f->set->qc, f->sid, fd, f->set->cap,
	    on_relay_done, f);
}

struct fwd *
fwd_open(struct fwd_set *set, enum fwd_kind kind, int fd,
    const struct proto_fwd_header *hdr, void *arg, uint64_t *err)
{
	uint8_t buf[PROTO_FWD_MAX_HOST + 32];
	struct proto_fwd_header h = *hdr;
	struct fwd *f;
	size_t n;

	if (set->n >= set->max || quic_conn_streams_left(set->qc) == 0) {
		*err = PROTO_FWD_ERR_LIMIT;
		set->counters->failed[PROTO_FWD_ERR_LIMIT]++;
		reset_fd(fd);
		return NULL;
	}
	if (set->resumable)
		h.id = new_id();
	n = proto_fwd_encode(buf, sizeof buf, &h);
	f = fwd_new(set, kind, true);
	f->arg = arg;
	f->id = h.id;
	if (hdr->type == PROTO_FWD_CONNECT)
		snprintf(f->target, sizeof f->target, "%s:%u", hdr->host, hdr->port);
	else
		snprintf(f->target, sizeof f->target, "port %u", hdr->port);
	f->sid = quic_conn_open_stream(set->qc, f);
	if (f->sid < 0) {
		*err = PROTO_FWD_ERR_LIMIT;
		set->counters->failed[*err]++;
		reset_fd(fd);
		f->stream_closed = true;
		fwd_free(f);
		return NULL;
	}
	f->fd = fd;
	if (n == 0 || quic_conn_stream_send(set->qc, f->sid, buf, n, false) != 0) {
		*err = PROTO_FWD_ERR_PROTOCOL;
		set->counters->failed[*err]++;
		kill_stream(f, *err); /* freed when the stream closes */
		return NULL;
	}
	/* No round trip for the answer: the bytes go now, and the acceptor
	 * holds them (within the stream window) until its connect is done.
	 * A refused connect still comes back as a reset with its code. */
	f->in_0rtt = quic_conn_state(set->qc) != QUIC_STATE_ESTABLISHED;
	f->fd = -1;
	start_relay(f, fd);
	f->state = FWD_S_WAIT_STATUS;
	return f;
}

void
fwd_set_handshake_done(struct fwd_set *set, bool early_accepted)
{
	struct fwd *f;

	LIST_FOREACH(f, &set->list, entry) {
		if (f->in_0rtt && early_accepted)
			set->counters->opened_0rtt++;
		f->in_0rtt = false;
	}
}

void
fwd_connected(struct fwd *f, int fd)
{
	uint8_t ok = PROTO_FWD_OK;
	size_t len;

	if (f->state != FWD_S_CONNECTING) {
		reset_fd(fd);
		return;
	}
	if (quic_conn_stream_send(f->set->qc, f->sid, &ok, 1, false) != 0) {
		reset_fd(fd);
		kill_stream(f, PROTO_FWD_ERR_RESET);
		return;
	}
	start_relay(f, fd);
	f->set->counters->opened++;
	/* Bytes the opener sent early go out first. */
	if ((len = evbuffer_get_length(f->early)) > 0 || f->early_fin) {
		uint8_t *p = evbuffer_pullup(f->early, -1);
		relay_on_data(f->relay, p, len, f->early_fin);
		evbuffer_drain(f->early, len);
	}
}

void
fwd_fail(struct fwd *f, uint64_t code)
{
	if (f->state != FWD_S_CONNECTING && f->state != FWD_S_HEADER)
		return;
	count_failure(f, code);
	kill_stream(f, code);
	maybe_free(f);
}

void
fwd_dialed(int fd, uint64_t err, void *arg)
{
	struct fwd *f = arg;

	f->arg = NULL;
	if (fd != -1)
		fwd_connected(f, fd);
	else
		fwd_fail(f, err);
}

void *
fwd_get_arg(const struct fwd *f)
{
	return f->arg;
}

void
fwd_set_arg(struct fwd *f, void *arg)
{
	f->arg = arg;
}

int
fwd_get_fd(const struct fwd *f)
{
	if (f->relay != NULL && !f->relay_done)
		return relay_get_fd(f->relay);
	return f->fd;
}

enum fwd_kind
fwd_kind_of(const struct fwd *f)
{
	return f->kind;
}

void
fwd_set_target(struct fwd *f, const char *s)
{
	snprintf(f->target, sizeof f->target, "%s", s);
}

/* Move `f` to `to`, another set (or the same). */
static void
move(struct fwd *f, struct fwd_set *to)
{
	if (f->set == to)
		return;
	LIST_REMOVE(f, entry);
	f->set->n--;
	f->set = to;
	LIST_INSERT_HEAD(&to->list, f, entry);
	to->n++;
}

static struct fwd *
find_parked(struct fwd_set *park, uint64_t id)
{
	struct fwd *f;

	if (park == NULL)
		return NULL;
	LIST_FOREACH(f, &park->list, entry) {
		if (f->state == FWD_S_PARKED && !f->opener && f->id == id)
			return f;
	}
	return NULL;
}

/* A parked forward that cannot carry on: its TCP connection is reset
 * and the stream, if it has one, too. */
static void
resume_lost(struct fwd *f, uint64_t code)
{
	f->set->counters->resume_lost++;
	f->state = FWD_S_RELAY;
	relay_on_reset(f->relay, code);
}

/* Acceptor: the peer's RESUME on a new stream (`f`, a placeholder): the
 * parked forward it names takes the stream, answers with what it has
 * taken and sends again what the peer lacks. Never in 0-RTT, which anyone
 * could replay. */
static int
resume_accept(struct fwd_set *set, struct fwd *f,
    const struct proto_fwd_header *hdr, const uint8_t *rest, size_t restlen,
    bool fin)
{
	struct fwd *p = find_parked(set->park, hdr->id);
	uint8_t buf[16];
	int64_t sid = f->sid;
	size_t n;

	if (p == NULL || quic_conn_state(set->qc) != QUIC_STATE_ESTABLISHED) {
		quic_conn_stream_consume(set->qc, sid, restlen);
		fwd_fail(f, PROTO_FWD_ERR_GONE);
		return 0;
	}
	f->stream_closed = true;
	fwd_free(f);
	move(p, set);
	p->sid = sid;
	p->state = FWD_S_RELAY;
	quic_conn_stream_set_arg(set->qc, sid, p);
	relay_attach(p->relay, set->qc, sid);
	n = proto_fwd_resumed_encode(buf, sizeof buf, relay_rx_total(p->relay));
	if (n == 0 || quic_conn_stream_send(set->qc, sid, buf, n, false) != 0 ||
	    relay_resume(p->relay, hdr->rx) != 0) {
		quic_conn_stream_consume(set->qc, sid, restlen);
		resume_lost(p, PROTO_FWD_ERR_GONE);
		return 0;
	}
	set->counters->resumed++;
	if (restlen > 0 || fin)
		relay_on_data(p->relay, rest, restlen, fin);
	return 0;
}

/* Opener: the acceptor's answer to RESUME, maybe in pieces. */
static int
resume_answer(struct fwd_set *set, struct fwd *f, const uint8_t *data,
    size_t len, bool fin)
{
	size_t take = len < sizeof f->hdr - f->hdrlen ? len :
	    sizeof f->hdr - f->hdrlen;
	size_t from_data;
	uint64_t rx = 0;
	long used;

	memcpy(f->hdr + f->hdrlen, data, take);
	used = proto_fwd_resumed_decode(f->hdr, f->hdrlen + take, &rx);
	if (used == 0 && !fin) {
		f->hdrlen += take;
		quic_conn_stream_consume(set->qc, f->sid, len);
		return 0;
	}
	if (used <= 0) {
		quic_conn_stream_consume(set->qc, f->sid, len);
		resume_lost(f, PROTO_FWD_ERR_PROTOCOL);
		return 0;
	}
	from_data = (size_t)used - f->hdrlen;
	quic_conn_stream_consume(set->qc, f->sid, from_data);
	if (relay_resume(f->relay, rx) != 0) {
		quic_conn_stream_consume(set->qc, f->sid, len - from_data);
		resume_lost(f, PROTO_FWD_ERR_GONE);
		return 0;
	}
	f->state = FWD_S_RELAY;
	set->counters->resumed++;
	if (len > from_data || fin)
		relay_on_data(f->relay, data + from_data, len - from_data, fin);
	return 0;
}

/* Acceptor: a header arriving on a new stream. */
static int
accept_data(struct fwd_set *set, struct fwd *f, const uint8_t *data, size_t len,
    bool fin)
{
	struct proto_fwd_header hdr;
	size_t take = len;
	long used;

	if (take > sizeof f->hdr - f->hdrlen)
		take = sizeof f->hdr - f->hdrlen;
	memcpy(f->hdr + f->hdrlen, data, take);
	used = proto_fwd_decode(f->hdr, f->hdrlen + take, &hdr);
	if (used < 0 || (used == 0 && (fin || f->hdrlen + take == sizeof f->hdr))) {
		quic_conn_stream_consume(set->qc, f->sid, len);
		fwd_fail(f, PROTO_FWD_ERR_PROTOCOL);
		return 0;
	}
	if (used == 0) {
		f->hdrlen += take;
		quic_conn_stream_consume(set->qc, f->sid, len);
		return 0;
	}
	/* `used` bytes of hdr[] were the header; the rest is early data. */
	{
		size_t hdr_from_data = (size_t)used - f->hdrlen;

		quic_conn_stream_consume(set->qc, f->sid, hdr_from_data);
		if (hdr.type == PROTO_FWD_RESUME)
			return resume_accept(set, f, &hdr, data + hdr_from_data,
			    len - hdr_from_data, fin);
		f->early = evbuffer_new();
		evbuffer_add(f->early, data + hdr_from_data, len - hdr_from_data);
		f->early_fin = fin;
	}
	if (hdr.type == PROTO_FWD_CONNECT)
		snprintf(f->target, sizeof f->target, "%s:%u", hdr.host, hdr.port);
	else
		snprintf(f->target, sizeof f->target, "port %u", hdr.port);
	f->id = hdr.id;
	/* The owner let this in only from a fresh ticket (daemon/session.c). */
	if (quic_conn_early_rx(set->qc))
		set->counters->opened_0rtt++;
	f->state = FWD_S_CONNECTING;
	set->ops->request(set, f, &hdr);
	return 0;
}

/* Opener: the forward failed before the answer said the target was up.
 * The owner hears the code first (a SOCKS5 reply), then the relay resets
 * both ends and its end is counted as a failure with `code`. */
static void
opener_fail(struct fwd *f, uint64_t code)
{
	f->state = FWD_S_DEAD;
	if (f->set->ops->answered != NULL)
		f->set->ops->answered(f, code, f->arg);
	if (f->relay != NULL && !f->relay_done)
		relay_on_reset(f->relay, code);
}

int
fwd_on_data(struct fwd_set *set, int64_t sid, void *stream_arg,
    const uint8_t *data, size_t len, bool fin)
{
	struct fwd *f = stream_arg;

	/* A connection whose forwards were parked (or reset) has no more to
	 * say about them, nor may it open new ones while it closes. */
	if (set->qc == NULL)
		return 0;
	if (f == NULL && quic_conn_stream_is_local(set->qc, sid)) {
		/* Ours, but already forgotten: nothing to do but give credit. */
		quic_conn_stream_consume(set->qc, sid, len);
		return 0;
	}
	if (f == NULL) {
		/* A stream the peer opened: a new forward. */
		f = fwd_new(set, FWD_LOCAL, false);
		f->sid = sid;
		f->state = FWD_S_HEADER;
		quic_conn_stream_set_arg(set->qc, sid, f);
		if (set->n > set->max) {
			quic_conn_stream_consume(set->qc, sid, len);
			fwd_fail(f, PROTO_FWD_ERR_LIMIT);
			return 0;
		}
	}
	switch (f->state) {
	case FWD_S_HEADER:
		return accept_data(set, f, data, len, fin);
	case FWD_S_CONNECTING:
		/* Held until connected; bounded by the stream window. */
		evbuffer_add(f->early, data, len);
		f->early_fin |= fin;
		return 0;
	case FWD_S_WAIT_STATUS:
		if (len == 0) {
			if (fin)
				opener_fail(f, PROTO_FWD_ERR_PROTOCOL);
			return 0;
		}
		quic_conn_stream_consume(set->qc, sid, 1);
		if (data[0] != PROTO_FWD_OK) {
			quic_conn_stream_consume(set->qc, sid, len - 1);
			opener_fail(f, PROTO_FWD_ERR_PROTOCOL);
			return 0;
		}
		f->state = FWD_S_RELAY;
		set->counters->opened++;
		if (set->ops->answered != NULL)
			set->ops->answered(f, PROTO_FWD_OK, f->arg);
		if (len > 1 || fin)
			relay_on_data(f->relay, data + 1, len - 1, fin);
		return 0;
	case FWD_S_RELAY:
		relay_on_data(f->relay, data, len, fin);
		return 0;
	case FWD_S_RESUMING:
		return resume_answer(set, f, data, len, fin);
	case FWD_S_DEAD:
	case FWD_S_PARKED:
		quic_conn_stream_consume(set->qc, sid, len);
		return 0;
	}
	return 0;
}

/* The peer gave up on the stream with `code`. */
static void
peer_abort(struct fwd *f, uint64_t code)
{
	switch (f->state) {
	case FWD_S_WAIT_STATUS:
		/* The acceptor could not connect: refused, denied, ... */
		opener_fail(f, code);
		break;
	case FWD_S_RELAY:
		relay_on_reset(f->relay, code);
		break;
	case FWD_S_RESUMING:
		/* The acceptor no longer has it (GONE), or cannot go on. */
		resume_lost(f, code);
		break;
	case FWD_S_HEADER:
	case FWD_S_CONNECTING:
		/* The owner may still be connecting; fwd_connected will see
		 * the state and drop the socket. */
		kill_stream(f, code);
		break;
	case FWD_S_DEAD:
	case FWD_S_PARKED:
		break;
	}
}

void
fwd_stream_reset(struct quic_conn *qc, int64_t sid, uint64_t code,
    void *stream_arg, void *arg)
{
	(void)qc;
	(void)sid;
	(void)arg;
	if (stream_arg != NULL)
		peer_abort(stream_arg, code);
}

void
fwd_stream_acked(struct quic_conn *qc, int64_t sid, void *stream_arg, void *arg)
{
	struct fwd *f = stream_arg;

	(void)qc;
	(void)sid;
	(void)arg;
	if (f != NULL && f->relay != NULL && !f->relay_done)
		relay_on_acked(f->relay);
}

void
fwd_stream_close(struct quic_conn *qc, int64_t sid, uint64_t code,
    void *stream_arg, void *arg)
{
	struct fwd *f = stream_arg;

	(void)qc;
	(void)sid;
	(void)arg;
	if (f == NULL)
		return;
	f->stream_closed = true;
	if (f->relay != NULL && !f->relay_done)
		relay_on_close(f->relay, code);
	else if (f->state != FWD_S_DEAD && code != 0)
		peer_abort(f, code);
	maybe_free(f);
}

/* Reset one forward's TCP connection and free it, its connection gone. */
static void
drop(struct fwd *f)
{
	if (f->relay != NULL) {
		relay_abort(f->relay);
		relay_free(f->relay);
		f->relay = NULL;
	}
	fwd_free(f);
}

void
fwd_set_clear(struct fwd_set *set)
{
	struct fwd *f;

	while ((f = LIST_FIRST(&set->list)) != NULL)
		drop(f);
	if (set->park_ev != NULL) {
		event_free(set->park_ev);
		set->park_ev = NULL;
	}
}

static void park_arm(struct fwd_set *);

/* Parked forwards whose wait is over are reset. */
static void
park_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fwd_set *set = arg;
	struct fwd *f, *next;
	uint64_t now = clock_now_ms();

	(void)fd;
	(void)what;
	for (f = LIST_FIRST(&set->list); f != NULL; f = next) {
		next = LIST_NEXT(f, entry);
		if (f->state != FWD_S_PARKED || now - f->parked_ms < set->park_ms)
			continue;
		set->counters->resume_lost++;
		log_info("forward to %s for %s: no new connection within %llu s, "
		    "closed", f->target[0] ? f->target : "?", set->log_name,
		    (unsigned long long)(set->park_ms / 1000));
		drop(f);
	}
	park_arm(set);
}

/* The timer for the first parked forward's deadline. */
static void
park_arm(struct fwd_set *set)
{
	const struct fwd *f;
	uint64_t first = UINT64_MAX, now = clock_now_ms(), left;
	struct timeval tv;

	LIST_FOREACH(f, &set->list, entry) {
		if (f->state == FWD_S_PARKED && f->parked_ms < first)
			first = f->parked_ms;
	}
	if (first == UINT64_MAX) {
		if (set->park_ev != NULL)
			evtimer_del(set->park_ev);
		return;
	}
	if (set->park_ev == NULL)
		set->park_ev = evtimer_new(set->base, park_cb, set);
	left = first + set->park_ms > now ? first + set->park_ms - now : 0;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
	evtimer_add(set->park_ev, &tv);
}

void
fwd_set_park(struct fwd_set *set, struct fwd_set *park)
{
	struct fwd *f, *next;
	uint64_t now = clock_now_ms();
	size_t parked = 0;

	for (f = LIST_FIRST(&set->list); f != NULL; f = next) {
		next = LIST_NEXT(f, entry);
		if (f->state == FWD_S_PARKED) {
			move(f, park);
			continue;
		}
		/* Asked to resume, and the connection went before the
		 * answer: it waits again, with what it kept. */
		if (f->state == FWD_S_RESUMING) {
			quic_conn_stream_set_arg(set->qc, f->sid, NULL);
			relay_attach(f->relay, NULL, -1);
			f->state = FWD_S_PARKED;
			f->sid = -1;
			move(f, park);
			parked++;
			continue;
		}
		/* Its stream is over, both ways, but TCP has yet to take all
		 * that it brought: that needs no connection. */
		if (f->relay != NULL && !f->relay_done && f->stream_closed) {
			relay_attach(f->relay, NULL, -1);
			move(f, park);
			continue;
		}
		/* A peer that reconnects over and over must not pile up
		 * parked forwards: no more wait than could be live. */
		if (f->id == 0 || f->state != FWD_S_RELAY || f->relay == NULL ||
		    f->relay_done || f->stream_closed || park->park_ms == 0 ||
		    !relay_parkable(f->relay) ||
		    (park != set && park->n >= park->max)) {
			drop(f);
			continue;
		}
		/* The old stream's events, if any still come, find nobody. */
		quic_conn_stream_set_arg(set->qc, f->sid, NULL);
		relay_park(f->relay);
		f->state = FWD_S_PARKED;
		f->parked_ms = now;
		f->sid = -1;
		move(f, park);
		parked++;
	}
	set->qc = NULL;
	if (parked > 0)
		log_info("%zu forward%s for %s wait%s for a new connection",
		    parked, parked == 1 ? "" : "s", park->log_name,
		    parked == 1 ? "s" : "");
	park_arm(park);
}

void
fwd_set_attach(struct fwd_set *set, struct quic_conn *qc)
{
	set->qc = qc;
}

void
fwd_set_resume(struct fwd_set *park, struct fwd_set *set)
{
	struct proto_fwd_header hdr;
	struct fwd *f, *next;
	uint8_t buf[32];
	size_t n;

	for (f = LIST_FIRST(&park->list); f != NULL; f = next) {
		next = LIST_NEXT(f, entry);
		if (f->state != FWD_S_PARKED || !f->opener)
			continue;
		memset(&hdr, 0, sizeof hdr);
		hdr.type = PROTO_FWD_RESUME;
		hdr.id = f->id;
		hdr.rx = relay_rx_total(f->relay);
		n = proto_fwd_encode(buf, sizeof buf, &hdr);
		if (n == 0 || (f->sid = quic_conn_open_stream(set->qc, f)) < 0) {
			park->counters->resume_lost++;
			drop(f);
			continue;
		}
		move(f, set);
		relay_attach(f->relay, set->qc, f->sid);
		f->state = FWD_S_RESUMING;
		f->hdrlen = 0;
		if (quic_conn_stream_send(set->qc, f->sid, buf, n, false) != 0)
			resume_lost(f, PROTO_FWD_ERR_RESET);
	}
	park_arm(park);
}

static const char *
state_name(const struct fwd *f)
{
	switch (f->state) {
	case FWD_S_WAIT_STATUS:
	case FWD_S_HEADER:
	case FWD_S_CONNECTING:
		return "connecting";
	case FWD_S_RELAY:
		return "open";
	case FWD_S_PARKED:
		return "parked";
	case FWD_S_RESUMING:
		return "resuming";
	case FWD_S_DEAD:
		break;
	}
	return "closing";
}

static void
stats_of(const struct fwd *f, struct relay_stats *st)
{
	if (f->relay != NULL)
		relay_get_stats(f->relay, st);
	else
		*st = f->last;
}

void
fwd_status_json(const struct fwd_set *set, const struct fwd_counters *c,
    struct json *j)
{
	const struct fwd *f;
	uint64_t now = clock_now_ms();

	json_key(j, "forwards");
	json_begin_array(j);
	if (set != NULL) {
		LIST_FOREACH(f, &set->list, entry) {
			struct relay_stats st;

			stats_of(f, &st);
			json_begin_object(j);
			json_key(j, "kind");
			json_string(j, kind_names[f->kind]);
			json_key(j, "direction");
			json_string(j, f->opener ? "outbound" : "inbound");
			json_key(j, "target");
			json_string(j, f->target);
			json_key(j, "state");
			json_string(j, state_name(f));
			json_key(j, "stream");
			json_int(j, f->sid);
			/* Bytes as seen from this side's TCP socket. */
			json_key(j, "tx_bytes");
			json_uint(j, st.tcp_to_quic);
			json_key(j, "rx_bytes");
			json_uint(j, st.quic_to_tcp);
			json_key(j, "age_ms");
			json_uint(j, now - f->started_ms);
			json_end_object(j);
		}
	}
	json_end_array(j);
	json_key(j, "forward_counters");
	json_begin_object(j);
	json_key(j, "opened");
	json_uint(j, c->opened);
	json_key(j, "completed");
	json_uint(j, c->completed);
	json_key(j, "opened_0rtt");
	json_uint(j, c->opened_0rtt);
	json_key(j, "held");
	json_uint(j, c->held);
	json_key(j, "held_expired");
	json_uint(j, c->held_expired);
	json_key(j, "held_full");
	json_uint(j, c->held_full);
	json_key(j, "resumed");
	json_uint(j, c->resumed);
	json_key(j, "resume_lost");
	json_uint(j, c->resume_lost);
	for (int i = 1; i < PROTO_FWD_ERR_COUNT; i++) {
		json_key(j, proto_fwd_error_name((uint64_t)i));
		json_uint(j, c->failed[i]);
	}
	json_end_object(j);
}

void
fwd_status_text(const struct fwd_set *set, const struct fwd_counters *c,
    struct evbuffer *out)
{
	const struct fwd *f;
	uint64_t now = clock_now_ms();

	evbuffer_add_printf(out, "  forwards: %llu opened, %llu completed",
	    (unsigned long long)c->opened, (unsigned long long)c->completed);
	if (c->opened_0rtt != 0)
		evbuffer_add_printf(out, ", %llu in 0-RTT",
		    (unsigned long long)c->opened_0rtt);
	if (c->held != 0)
		evbuffer_add_printf(out, ", %llu held (%llu expired, %llu over "
		    "the cap)", (unsigned long long)c->held,
		    (unsigned long long)c->held_expired,
		    (unsigned long long)c->held_full);
	if (c->resumed != 0 || c->resume_lost != 0)
		evbuffer_add_printf(out, ", %llu resumed on a new connection "
		    "(%llu lost)", (unsigned long long)c->resumed,
		    (unsigned long long)c->resume_lost);
	for (int i = 1; i < PROTO_FWD_ERR_COUNT; i++) {
		if (c->failed[i] != 0)
			evbuffer_add_printf(out, ", %llu %s",
			    (unsigned long long)c->failed[i],
			    proto_fwd_error_name((uint64_t)i));
	}
	evbuffer_add_printf(out, "\n");
	if (set == NULL)
		return;
	LIST_FOREACH(f, &set->list, entry) {
		/* Text status goes to a terminal: escaped, as in status.c. */
		char target[4 * sizeof f->target];
		struct relay_stats st;

		stats_of(f, &st);
		log_escape(target, sizeof target, f->target, strlen(f->target));
		evbuffer_add_printf(out, "    %s %s %s: %s, %llu B out, %llu B in, "
		    "%llu s\n", kind_names[f->kind], f->opener ? "to" : "from peer to",
		    target, state_name(f), (unsigned long long)st.tcp_to_quic,
		    (unsigned long long)st.quic_to_tcp,
		    (unsigned long long)((now - f->started_ms) / 1000));
	}
}

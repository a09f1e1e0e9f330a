/* Loss recovery for the IP tunnel (recovery.h): groups, repairs and
 * reports on one connection. */
#include <string.h>

#include <event2/event.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "fec.h"
#include "recovery-ctl.h"
#include "recovery.h"
#include "spread.h"
#include "transport/quic.h"
#include "wire/proto.h"
#include "wire/varint.h"

/* The receiver reports at most this often, and only when it received
 * groups since its last report. */
#define REPORT_MS 100
#define RECOVERY_BUF (1 + FEC_REPAIR_OVERHEAD + FEC_MAX_SYMBOL)

struct recovery {
	struct quic_conn *qc;
	bool sending;
	bool active;              /* the open group (if any) goes out in groups */
	/* Made when first needed, so that the many connections that never
	 * see loss carry none of their buffers. */
	struct spread *sp;
	struct fec_dec *dec;
	struct recovery_ctl ctl;
	uint64_t next_tick_ms;
	uint64_t hold_us;         /* how long a group may stay open */
	struct event *close_ev;   /* closes a group that fills too slowly */
	bool close_armed;
	/* one DATAGRAM: the context byte and a frame (with enc) */
	uint8_t *buf;

	uint64_t next_report_ms;
	uint64_t reported;        /* `received` at the last report */
	struct recovery_stats st;
};

static void close_group(struct recovery *);

static void
close_cb(evutil_socket_t fd, short what, void *arg)
{
	struct recovery *r = arg;

	(void)fd;
	(void)what;
	r->close_armed = false;
	close_group(r);
	quic_write_dirty();
}

struct recovery *
recovery_create(struct event_base *base, struct quic_conn *qc)
{
	struct recovery *r = xcalloc(1, sizeof *r);

	r->qc = qc;
	recovery_ctl_init(&r->ctl);
	r->close_ev = evtimer_new(base, close_cb, r);
	if (r->close_ev == NULL)
		fatalx("out of memory");
	r->hold_us = RECOVERY_HOLD_MAX_MS * 1000;
	return r;
}

void
recovery_free(struct recovery *r)
{
	if (r == NULL)
		return;
	event_free(r->close_ev);
	spread_free(r->sp);
	fec_dec_free(r->dec);
	free(r->buf);
	free(r);
}

void
recovery_set_sending(struct recovery *r, bool on)
{
	r->sending = on;
	if (!on)
		close_group(r);
}

static void
emit_repair(const uint8_t *frame, size_t len, void *arg)
{
	struct recovery *r = arg;

	r->buf[0] = PROTO_CTX_FEC_REPAIR;
	memcpy(r->buf + 1, frame, len);
	/* A repair dropped from a full queue costs only redundancy. */
	if (quic_conn_send_datagram(r->qc, r->buf, 1 + len) >= 0) {
		r->st.repairs_sent++;
		r->st.repair_bytes += len + 1;
	}
}

static unsigned
repairs_for(unsigned k, void *arg)
{
	struct recovery *r = arg;

	return recovery_ctl_repairs(&r->ctl, k);
}

/* Close the open groups (spread.c interleaves them) and send their
 * repairs. */
static void
close_group(struct recovery *r)
{
	struct spread_close_info ci;

	if (r->close_armed) {
		event_del(r->close_ev);
		r->close_armed = false;
	}
	if (r->sp == NULL || spread_count(r->sp) == 0)
		return;
	spread_close(r->sp, repairs_for, emit_repair, r, &ci);
	r->st.group_k = ci.k;
	r->st.group_m = ci.m;
}

/* Feed the controller the connection's loss and round trip every
 * RECOVERY_TICK_MS while packets flow (an idle connection needs no
 * plan), and size the time a group may wait for more originals. */
static void
tick(struct recovery *r, uint64_t now_ms)
{
	struct quic_conn_stats qs;
	uint64_t hold;

	r->next_tick_ms = now_ms + RECOVERY_TICK_MS;
	quic_conn_get_stats(r->qc, &qs);
	recovery_ctl_tick(&r->ctl, qs.tx_dgrams, qs.dgram_lost, qs.rtt_ms,
	    qs.min_rtt_ms);
	hold = (uint64_t)(qs.rtt_ms * 1000 / 4);
	if (hold > RECOVERY_HOLD_MAX_MS * 1000 || hold == 0)
		hold = RECOVERY_HOLD_MAX_MS * 1000;
	r->hold_us = hold;
	r->active = recovery_ctl_repairs(&r->ctl, RECOVERY_GROUP) > 0;
	r->st.loss = recovery_ctl_loss(&r->ctl);
}

int
recovery_send(struct recovery *r, const uint8_t *pkt, size_t len)
{
	uint64_t now_ms;
	ssize_t n;
	int rv;

	if (!r->sending)
		return 1;
	now_ms = clock_now_ms();
	if (now_ms >= r->next_tick_ms) {
		tick(r, now_ms);
		if (!r->active)
			close_group(r);
	}
	/* Without loss a packet goes as it is: no copy, no bytes added. A
	 * packet too long for its repair to fit a DATAGRAM goes so too. */
	if (!r->active || len + 1 + FEC_REPAIR_OVERHEAD + FEC_SYMBOL_OVERHEAD >
	    quic_conn_dgram_max(r->qc))
		return 1;
	if (r->sp == NULL) {
		r->sp = spread_create(RECOVERY_GROUP);
		r->buf = xmalloc(RECOVERY_BUF);
	}
	if ((n = spread_add(r->sp, pkt, len, r->buf + 1, RECOVERY_BUF - 1)) < 0)
		return 1;
	r->buf[0] = PROTO_CTX_IP_FEC;
	rv = quic_conn_send_datagram(r->qc, r->buf, 1 + (size_t)n);
	if (rv >= 0) {
		r->st.protected_sent++;
		r->st.protected_bytes += len;
	}
	if (spread_full(r->sp)) {
		close_group(r);
	} else if (!r->close_armed) {
		struct timeval tv = { 0, (suseconds_t)r->hold_us };

		evtimer_add(r->close_ev, &tv);
		r->close_armed = true;
	}
	return rv;
}

/* Tell the sender what this side received, could and could not rebuild
 * (cumulative, so a lost report costs nothing but time). */
static void
maybe_report(struct recovery *r)
{
	const struct fec_dec_counters *dc = fec_dec_counters(r->dec);
	uint8_t out[1 + 4 * 8];
	size_t n = 0;
	uint64_t now_ms;

	/* Nothing new to tell: no clock read on this per-packet path. */
	if (r->st.received == r->reported)
		return;
	if ((now_ms = clock_now_ms()) < r->next_report_ms)
		return;
	r->next_report_ms = now_ms + REPORT_MS;
	r->reported = r->st.received;
	out[n++] = PROTO_CTX_FEC_REPORT;
	n += varint_put(out + n, sizeof out - n, r->st.received);
	n += varint_put(out + n, sizeof out - n, dc->rebuilt);
	n += varint_put(out + n, sizeof out - n, dc->unrepaired);
	n += varint_put(out + n, sizeof out - n, dc->overwhelmed);
	if (quic_conn_send_datagram(r->qc, out, n) >= 0)
		r->st.reports_sent++;
}

static int
report_input(struct recovery *r, const uint8_t *body, size_t len)
{
	uint64_t v[4] = { 0 };
	size_t off = 0, used;

	/* Three fields, then `overwhelmed` (absent from an older peer's);
	 * fields after it are a newer version's: skipped. */
	for (int i = 0; i < 4 && (i < 3 || off < len); i++) {
		used = varint_get(body + off, len - off, &v[i]);
		if (used == 0)
			return -1;
		off += used;
	}
	r->st.reports_received++;
	recovery_ctl_report(&r->ctl, v[0], v[1], v[2], v[3]);
	return 0;
}

int
recovery_input(struct recovery *r, uint64_t ctx, const uint8_t *body,
    size_t len, void (*deliver)(const uint8_t *pkt, size_t len, void *arg),
    void *arg)
{
	const uint8_t *pkt;
	size_t plen;
	int rv;

	if (r->dec == NULL && ctx != PROTO_CTX_FEC_REPORT)
		r->dec = fec_dec_create();
	switch (ctx) {
	case PROTO_CTX_IP_FEC:
		rv = fec_dec_original(r->dec, body, len, &pkt, &plen, deliver, arg);
		if (rv < 0)
			return -1;
		if (rv == 0) {
			r->st.received++;
			deliver(pkt, plen, arg);
		}
		maybe_report(r);
		return 0;
	case PROTO_CTX_FEC_REPAIR:
		rv = fec_dec_repair(r->dec, body, len, deliver, arg);
		maybe_report(r);
		return rv < 0 ? -1 : 0;
	case PROTO_CTX_FEC_REPORT:
		if (report_input(r, body, len) != 0) {
			r->st.malformed++;
			return -1;
		}
		return 0;
	}
	return -1;
}

void
recovery_get_stats(const struct recovery *r, struct recovery_stats *st)
{
	static const struct fec_dec_counters none;
	const struct fec_dec_counters *dc =
	    r->dec != NULL ? fec_dec_counters(r->dec) : &none;

	*st = r->st;
	st->sending = r->sending;
	st->active = r->sending && r->active;
	st->overrun = r->ctl.overrun;
	st->rebuilt = dc->rebuilt;
	st->unrepaired = dc->unrepaired;
	st->overwhelmed = dc->overwhelmed;
	st->malformed += dc->malformed;
	st->late = dc->late;
	st->duplicates = dc->duplicates;
}

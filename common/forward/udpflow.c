/* UDP flow bookkeeping: contexts, sources, counters, idle expiry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "udpflow.h"

static const char *const drop_names[UDP_DROP_COUNT] = {
	[UDP_DROP_TOO_BIG] = "too_big",
	[UDP_DROP_REFUSED] = "refused",
	[UDP_DROP_NO_FLOW] = "no_flow",
	[UDP_DROP_LIMIT] = "limit",
	[UDP_DROP_QUEUE] = "queue",
	[UDP_DROP_FRAG] = "frag",
	[UDP_DROP_FOREIGN] = "foreign_source",
	[UDP_DROP_HEADER] = "bad_header",
};

const char *
udp_drop_name(enum udp_drop d)
{
	return (unsigned)d < UDP_DROP_COUNT ? drop_names[d] : "unknown";
}

void
udp_flows_init(struct udp_flow_set *set, enum proto_udp_opener self,
    size_t max, uint64_t idle_ms, struct udp_flow_counters *counters)
{
	memset(set, 0, sizeof *set);
	set->self = self;
	set->max = max;
	set->idle_ms = idle_ms;
	set->counters = counters;
	TAILQ_INIT(&set->list);
}

static struct udp_flow *
flow_new(struct udp_flow_set *set, uint64_t ctx, const char *target,
    uint64_t now_ms)
{
	struct udp_flow *f = xcalloc(1, sizeof *f);

	f->ctx = ctx;
	snprintf(f->target, sizeof f->target, "%s", target);
	f->created_ms = f->last_ms = now_ms;
	TAILQ_INSERT_TAIL(&set->list, f, link);
	set->n++;
	set->counters->opened++;
	return f;
}

struct udp_flow *
udp_flow_open(struct udp_flow_set *set, const struct ipaddr *src,
    uint16_t port, const char *target, uint64_t now_ms)
{
	struct udp_flow *f;
	uint64_t ctx;

	if (set->n >= set->max) {
		udp_flow_drop(set, NULL, UDP_DROP_LIMIT);
		return NULL;
	}
	/* A context is never given to a second flow of the connection. */
	if ((ctx = proto_udp_ctx_next(set->last_ctx, set->self)) == 0)
		return NULL;
	set->last_ctx = ctx;
	f = flow_new(set, ctx, target, now_ms);
	f->src = *src;
	f->src_port = port;
	return f;
}

struct udp_flow *
udp_flow_accept(struct udp_flow_set *set, uint64_t ctx, const char *target,
    uint64_t now_ms, uint64_t *err)
{
	enum proto_udp_opener peer = set->self == PROTO_UDP_BY_CLIENT ?
	    PROTO_UDP_BY_SERVER : PROTO_UDP_BY_CLIENT;

	if (!proto_udp_ctx_valid(ctx, peer) ||
	    udp_flow_by_ctx(set, ctx) != NULL) {
		set->counters->refused++;
		*err = PROTO_FWD_ERR_PROTOCOL;
		return NULL;
	}
	if (set->n >= set->max) {
		set->counters->refused++;
		*err = PROTO_FWD_ERR_LIMIT;
		return NULL;
	}
	return flow_new(set, ctx, target, now_ms);
}

/* A linear walk: the set holds at most `max` flows (UDP_FLOW_MAX). */
struct udp_flow *
udp_flow_by_src(struct udp_flow_set *set, const struct ipaddr *a,
    uint16_t port)
{
	struct udp_flow *f;

	TAILQ_FOREACH(f, &set->list, link) {
		if (f->src_port == port && addr_equal(&f->src, a))
			return f;
	}
	return NULL;
}

struct udp_flow *
udp_flow_by_ctx(struct udp_flow_set *set, uint64_t ctx)
{
	struct udp_flow *f;

	TAILQ_FOREACH(f, &set->list, link) {
		if (f->ctx == ctx)
			return f;
	}
	return NULL;
}

/* Activity moves a flow to the tail, so the list stays in order of last
 * activity and expiry looks at its head only. */
static void
touch(struct udp_flow_set *set, struct udp_flow *f, uint64_t now_ms)
{
	if (now_ms > f->last_ms)
		f->last_ms = now_ms;
	TAILQ_REMOVE(&set->list, f, link);
	TAILQ_INSERT_TAIL(&set->list, f, link);
}

void
udp_flow_tx(struct udp_flow_set *set, struct udp_flow *f, size_t len,
    uint64_t now_ms)
{
	f->tx_dgrams++;
	f->tx_bytes += len;
	touch(set, f, now_ms);
}

void
udp_flow_rx(struct udp_flow_set *set, struct udp_flow *f, size_t len,
    uint64_t now_ms)
{
	f->rx_dgrams++;
	f->rx_bytes += len;
	touch(set, f, now_ms);
}

void
udp_flow_drop(struct udp_flow_set *set, struct udp_flow *f, enum udp_drop d)
{
	if ((unsigned)d >= UDP_DROP_COUNT)
		return;
	set->counters->drops[d]++;
	if (f != NULL)
		f->drops[d]++;
}

void
udp_flow_refused(struct udp_flow_set *set, struct udp_flow *f)
{
	if (f->refused)
		return;
	f->refused = true;
	set->counters->refused++;
}

void
udp_flow_close(struct udp_flow_set *set, struct udp_flow *f,
    void (*release)(struct udp_flow *, void *), void *arg)
{
	if (release != NULL)
		release(f, arg);
	TAILQ_REMOVE(&set->list, f, link);
	set->n--;
	free(f);
}

uint64_t
udp_flows_expire(struct udp_flow_set *set, uint64_t now_ms,
    void (*release)(struct udp_flow *, void *), void *arg)
{
	struct udp_flow *f;

	while ((f = TAILQ_FIRST(&set->list)) != NULL) {
		if (now_ms < f->last_ms + set->idle_ms)
			return f->last_ms + set->idle_ms - now_ms;
		set->counters->expired++;
		udp_flow_close(set, f, release, arg);
	}
	return UINT64_MAX;
}

void
udp_flows_clear(struct udp_flow_set *set,
    void (*release)(struct udp_flow *, void *), void *arg)
{
	struct udp_flow *f;

	while ((f = TAILQ_FIRST(&set->list)) != NULL)
		udp_flow_close(set, f, release, arg);
}

/* UDP flow bookkeeping: contexts, sources, counters, idle expiry. */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json.h"
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

/* The listening side's source of a flow as "address:port", or "" on the
 * acceptor, which never sees it. */
static const char *
flow_source(const struct udp_flow *f, char buf[static ADDR_STRLEN])
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (f->src_port == 0) {
		buf[0] = '\0';
		return buf;
	}
	addr_to_sockaddr(&f->src, f->src_port, &ss, &len);
	return addr_sockaddr_str((const struct sockaddr *)&ss, buf);
}

static void
json_drops(struct json *j, const char *prefix, const uint64_t *drops)
{
	for (int i = 0; i < UDP_DROP_COUNT; i++) {
		char name[32];

		snprintf(name, sizeof name, "%s%s", prefix,
		    udp_drop_name((enum udp_drop)i));
		json_key(j, name);
		json_uint(j, drops[i]);
	}
}

void
udp_flows_status_json(const struct udp_flow_set *set,
    const struct udp_flow_counters *c, struct json *j)
{
	const struct udp_flow *f;
	uint64_t now = clock_now_ms();
	char src[ADDR_STRLEN];

	json_key(j, "udp_flows");
	json_begin_array(j);
	if (set != NULL) {
		TAILQ_FOREACH(f, &set->list, link) {
			json_begin_object(j);
			json_key(j, "context");
			json_uint(j, f->ctx);
			json_key(j, "source");
			json_string(j, flow_source(f, src));
			json_key(j, "target");
			json_string(j, f->target);
			json_key(j, "refused");
			json_bool(j, f->refused);
			json_key(j, "age_ms");
			json_uint(j, now - f->created_ms);
			json_key(j, "idle_ms");
			json_uint(j, now - f->last_ms);
			/* tx: through the tunnel to the peer; rx: from it. */
			json_key(j, "tx_datagrams");
			json_uint(j, f->tx_dgrams);
			json_key(j, "tx_bytes");
			json_uint(j, f->tx_bytes);
			json_key(j, "rx_datagrams");
			json_uint(j, f->rx_dgrams);
			json_key(j, "rx_bytes");
			json_uint(j, f->rx_bytes);
			json_key(j, "drops");
			json_begin_object(j);
			json_drops(j, "", f->drops);
			json_end_object(j);
			json_end_object(j);
		}
	}
	json_end_array(j);
	json_key(j, "udp_counters");
	json_begin_object(j);
	json_key(j, "opened");
	json_uint(j, c->opened);
	json_key(j, "refused");
	json_uint(j, c->refused);
	json_key(j, "expired");
	json_uint(j, c->expired);
	json_drops(j, "dropped_", c->drops);
	json_end_object(j);
}

/* Flows listed one a line in the text status; the rest are counted. */
#define UDP_FLOWS_TEXT_MAX 16

static void
text_drops(struct evbuffer *out, const uint64_t *drops)
{
	bool any = false;

	for (int i = 0; i < UDP_DROP_COUNT; i++) {
		if (drops[i] == 0)
			continue;
		evbuffer_add_printf(out, " %s=%llu",
		    udp_drop_name((enum udp_drop)i),
		    (unsigned long long)drops[i]);
		any = true;
	}
	evbuffer_add_printf(out, "%s\n", any ? "" : " none");
}

void
udp_flows_status_text(const struct udp_flow_set *set,
    const struct udp_flow_counters *c, struct evbuffer *out)
{
	const struct udp_flow *f;
	uint64_t now = clock_now_ms();
	char src[ADDR_STRLEN];
	bool any = c->opened != 0 || c->refused != 0 || c->expired != 0;
	size_t shown = 0;

	for (int i = 0; i < UDP_DROP_COUNT; i++)
		any |= c->drops[i] != 0;
	if (!any)
		return;
	evbuffer_add_printf(out, "  udp flows: %zu open, %llu opened, "
	    "%llu refused, %llu expired; dropped:", set != NULL ? set->n : 0,
	    (unsigned long long)c->opened, (unsigned long long)c->refused,
	    (unsigned long long)c->expired);
	text_drops(out, c->drops);
	if (set == NULL)
		return;
	TAILQ_FOREACH(f, &set->list, link) {
		if (shown++ == UDP_FLOWS_TEXT_MAX) {
			evbuffer_add_printf(out, "    and %zu more\n",
			    set->n - UDP_FLOWS_TEXT_MAX);
			break;
		}
		flow_source(f, src);
		evbuffer_add_printf(out, "    %s%s%s%s: %llu s, idle %llu s, "
		    "sent %llu (%llu B), received %llu (%llu B)\n", src,
		    src[0] != '\0' ? " -> " : "", f->target,
		    f->refused ? " (refused)" : "",
		    (unsigned long long)((now - f->created_ms) / 1000),
		    (unsigned long long)((now - f->last_ms) / 1000),
		    (unsigned long long)f->tx_dgrams,
		    (unsigned long long)f->tx_bytes,
		    (unsigned long long)f->rx_dgrams,
		    (unsigned long long)f->rx_bytes);
	}
}

/* Prometheus text exposition of the status, over evhttp (metrics.h). */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/accept.h"
#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "forward/fwd.h"
#include "metrics.h"
#include "tunnel/tunnel.h"
#include "wire/proto-fwd.h"

/* A scrape is a few KiB per peer; a request is one line and some headers,
 * and one that stalls is dropped rather than held. */
#define METRICS_MAX_HEADERS 8192
#define METRICS_TIMEOUT_S 10
/* Scrapes being sent at once; each holds a copy of every peer's figures
 * (about 600 bytes a peer). More are answered 503. */
#define METRICS_MAX_SCRAPES 4
/* Peers' lines of one family in one part of a scrape. */
#define METRICS_PAGE 256

/* One peer's figures, by value: a scrape of thousands of peers is sent in
 * parts, between which the peers may change, go, or be reloaded away. */
struct metrics_peer {
	char name[STATUS_NAME_MAX + 1];
	bool connected;
	struct tunnel_counters counters;
	bool has_quic;
	struct quic_conn_stats quic;
	struct recovery_stats recovery;   /* zero without loss recovery */
	uint64_t handshakes;
	struct status_roam roam;
	size_t fwd_open;
	bool has_fwd;
	struct fwd_counters fwd;
};

struct metrics_scrape {
	struct evbuffer *head;       /* the figures that are not per peer */
	struct metrics_peer *peers;
	size_t npeers;
	size_t family;               /* the per-peer family being sent */
	size_t next;                 /* its next peer */
};

struct metrics {
	struct evhttp *http;
	struct evconnlistener *lev;  /* evhttp's listener */
	struct event *resume_ev;     /* re-enables it after EMFILE */
	uint64_t accept_log_ms;
	struct metrics_scrape *(*scrape)(void *);
	void *arg;
	unsigned sending;            /* scrapes under way */
};

static void
family(struct evbuffer *out, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

/* Label values are peer names (a restricted charset) and fixed reason
 * names; escaped anyway as the format asks. */
static void
label_value(struct evbuffer *out, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(out, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, v, 1);
	}
}

static void
peer_u64(struct evbuffer *out, const char *name, const char *peer,
    uint64_t v)
{
	evbuffer_add_printf(out, "%s{peer=\"", name);
	label_value(out, peer);
	evbuffer_add_printf(out, "\"} %llu\n", (unsigned long long)v);
}

#define GETTER(fn, expr) \
	static uint64_t fn(const struct metrics_peer *p) { return (expr); }
GETTER(get_rx_bytes, p->counters.rx_bytes)
GETTER(get_tx_bytes, p->counters.tx_bytes)
GETTER(get_rx_packets, p->counters.rx_packets)
GETTER(get_tx_packets, p->counters.tx_packets)
GETTER(get_connected, p->connected)
GETTER(get_cwnd, p->has_quic ? p->quic.cwnd : 0)
GETTER(get_inflight, p->has_quic ? p->quic.bytes_in_flight : 0)
GETTER(get_unacked, p->has_quic ? p->quic.stream_unacked : 0)
GETTER(get_lost, p->has_quic ? p->quic.dgram_lost : 0)
GETTER(get_queue_full, p->has_quic ? p->quic.dgram_queue_full : 0)
GETTER(get_stale, p->has_quic ? p->quic.dgram_stale : 0)
GETTER(get_handshakes, p->handshakes)
GETTER(get_fec_repairs, p->recovery.repairs_sent)
GETTER(get_fec_rebuilt, p->recovery.rebuilt)
GETTER(get_fec_unrepaired, p->recovery.unrepaired)
GETTER(get_migrations, p->roam.migrations)
GETTER(get_rebinds, p->roam.rebinds)
GETTER(get_reconnects, p->roam.reconnects)
GETTER(get_resets, p->roam.stateless_resets)
GETTER(get_0rtt_attempted, p->roam.zero_rtt_attempted)
GETTER(get_0rtt_accepted, p->roam.zero_rtt_accepted)
GETTER(get_0rtt_rejected, p->roam.zero_rtt_rejected)
GETTER(get_fwd_open, p->fwd_open)
#undef GETTER

/* The families that are not one integer a peer: their lines for one. */
static void
lines_rtt(struct evbuffer *out, const struct metrics_peer *p)
{
	evbuffer_add_printf(out, "rove_peer_rtt_seconds{peer=\"");
	label_value(out, p->name);
	evbuffer_add_printf(out, "\"} %.6f\n",
	    p->has_quic ? p->quic.rtt_ms / 1000.0 : 0.0);
}

static void
lines_drops(struct evbuffer *out, const struct metrics_peer *p)
{
	for (int r = 0; r < TUNNEL_DROP_COUNT; r++) {
		evbuffer_add_printf(out, "rove_peer_drops_total{peer=\"");
		label_value(out, p->name);
		evbuffer_add_printf(out, "\",reason=\"%s\"} %llu\n",
		    tunnel_drop_names[r], (unsigned long long)p->counters.drops[r]);
	}
}

static void
lines_forwards(struct evbuffer *out, const struct metrics_peer *p)
{
	if (!p->has_fwd)
		return;
	evbuffer_add_printf(out, "rove_peer_forwards_total{peer=\"");
	label_value(out, p->name);
	evbuffer_add_printf(out, "\",outcome=\"completed\"} %llu\n",
	    (unsigned long long)p->fwd.completed);
	for (uint64_t e = 1; e < PROTO_FWD_ERR_COUNT; e++) {
		evbuffer_add_printf(out, "rove_peer_forwards_total{peer=\"");
		label_value(out, p->name);
		evbuffer_add_printf(out, "\",outcome=\"%s\"} %llu\n",
		    proto_fwd_error_name(e), (unsigned long long)p->fwd.failed[e]);
	}
}

/* The per-peer families, in the order sent: one integer a peer from
 * `get`, or the peer's lines from `lines`. */
struct peer_family {
	const char *name, *type, *help;
	uint64_t (*get)(const struct metrics_peer *);
	void (*lines)(struct evbuffer *, const struct metrics_peer *);
};
static const struct peer_family peer_families[] = {
	{ "rove_peer_connected", "gauge",
	    "1 while the peer's connection is established.", get_connected, NULL },
	{ "rove_peer_rx_bytes_total", "counter",
	    "IP bytes received from the peer and written to the TUN.", get_rx_bytes, NULL },
	{ "rove_peer_tx_bytes_total", "counter",
	    "IP bytes read from the TUN and sent to the peer.", get_tx_bytes, NULL },
	{ "rove_peer_rx_packets_total", "counter",
	    "IP packets received from the peer.", get_rx_packets, NULL },
	{ "rove_peer_tx_packets_total", "counter",
	    "IP packets sent to the peer.", get_tx_packets, NULL },
	{ "rove_peer_rtt_seconds", "gauge",
	    "Smoothed round-trip time of the peer's connection.", NULL, lines_rtt },
	{ "rove_peer_cwnd_bytes", "gauge",
	    "Congestion window of the peer's connection.", get_cwnd, NULL },
	{ "rove_peer_bytes_in_flight", "gauge",
	    "Bytes sent and not yet acknowledged or lost.", get_inflight, NULL },
	{ "rove_peer_stream_unacked_bytes", "gauge",
	    "Forwarded bytes held until the peer acknowledges them.", get_unacked, NULL },
	{ "rove_peer_datagrams_lost_total", "counter",
	    "DATAGRAM frames (IP packets) declared lost.", get_lost, NULL },
	{ "rove_peer_datagrams_queue_full_total", "counter",
	    "IP packets dropped before sending: the queue was full.", get_queue_full, NULL },
	{ "rove_peer_datagrams_stale_total", "counter",
	    "IP packets dropped before sending: they waited too long.", get_stale, NULL },
	{ "rove_peer_repairs_sent_total", "counter",
	    "Loss recovery: repair datagrams sent.", get_fec_repairs, NULL },
	{ "rove_peer_packets_rebuilt_total", "counter",
	    "Loss recovery: lost IP packets rebuilt from repairs.", get_fec_rebuilt, NULL },
	{ "rove_peer_packets_unrepaired_total", "counter",
	    "Loss recovery: lost IP packets the repairs could not rebuild.",
	    get_fec_unrepaired, NULL },
	{ "rove_peer_handshakes_total", "counter",
	    "Connections established.", get_handshakes, NULL },
	{ "rove_peer_migrations_total", "counter",
	    "Client: migrations to a new local address.", get_migrations, NULL },
	{ "rove_peer_rebinds_total", "counter",
	    "Server: new peer addresses validated (NAT rebinding, roaming).", get_rebinds, NULL },
	{ "rove_peer_reconnects_total", "counter",
	    "Client: new connections after one was lost.", get_reconnects, NULL },
	{ "rove_peer_stateless_resets_total", "counter",
	    "Client: stateless resets received.", get_resets, NULL },
	{ "rove_peer_zero_rtt_attempted_total", "counter",
	    "Connections that tried 0-RTT.", get_0rtt_attempted, NULL },
	{ "rove_peer_zero_rtt_accepted_total", "counter",
	    "Connections whose 0-RTT was accepted.", get_0rtt_accepted, NULL },
	{ "rove_peer_zero_rtt_rejected_total", "counter",
	    "Connections whose 0-RTT was rejected.", get_0rtt_rejected, NULL },
	{ "rove_peer_drops_total", "counter",
	    "IP packets of the peer dropped, by reason.", NULL, lines_drops },
	{ "rove_peer_forwards_open", "gauge",
	    "Forwarded TCP connections open now.", get_fwd_open, NULL },
	{ "rove_peer_forwards_total", "counter",
	    "Forwarded TCP connections that ended, by outcome.", NULL, lines_forwards },
};
#define PEER_FAMILIES (sizeof peer_families / sizeof peer_families[0])

static void
process_figures(struct evbuffer *out)
{
	struct rusage ru;
	unsigned long long pages = 0;
	long pagesize = sysconf(_SC_PAGESIZE);
	size_t fds = 0;
	struct dirent *d;
	FILE *f;
	DIR *dir;

	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		family(out, "process_cpu_seconds_total", "counter",
		    "User and system CPU time spent in seconds.");
		evbuffer_add_printf(out, "process_cpu_seconds_total %.6f\n",
		    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	}
	if ((f = fopen("/proc/self/statm", "r")) != NULL) {
		if (fscanf(f, "%*u %llu", &pages) == 1 && pagesize > 0) {
			family(out, "process_resident_memory_bytes", "gauge",
			    "Resident memory size in bytes.");
			evbuffer_add_printf(out, "process_resident_memory_bytes "
			    "%llu\n", pages * (unsigned long long)pagesize);
		}
		fclose(f);
	}
	if ((dir = opendir("/proc/self/fd")) != NULL) {
		while ((d = readdir(dir)) != NULL)
			fds += d->d_name[0] != '.';
		closedir(dir);
		/* Less the one opendir itself holds. */
		family(out, "process_open_fds", "gauge",
		    "Number of open file descriptors.");
		evbuffer_add_printf(out, "process_open_fds %zu\n",
		    fds > 0 ? fds - 1 : 0);
	}
}

/* The figures that are not per peer. */
static void
render_head(struct evbuffer *out, const struct status *st)
{
	family(out, "rove_info", "gauge", "Which program this is.");
	evbuffer_add_printf(out, "rove_info{role=\"%s\"} 1\n", st->role);
	family(out, "rove_drops_total", "counter",
	    "IP packets dropped, by reason, for all peers.");
	for (int i = 0; i < TUNNEL_DROP_COUNT; i++)
		evbuffer_add_printf(out, "rove_drops_total{reason=\"%s\"} %llu\n",
		    tunnel_drop_names[i], (unsigned long long)st->counters->drops[i]);
	family(out, "rove_reloads_total", "counter",
	    "SIGHUP reloads of the configuration, applied or refused.");
	evbuffer_add_printf(out, "rove_reloads_total{result=\"applied\"} %llu\n"
	    "rove_reloads_total{result=\"refused\"} %llu\n",
	    (unsigned long long)st->reloads,
	    (unsigned long long)st->reloads_refused);
	if (st->admission != NULL) {
		const struct status_admission *a = st->admission;

		family(out, "rove_handshakes_half_open", "gauge",
		    "Handshakes under way now.");
		evbuffer_add_printf(out, "rove_handshakes_half_open %llu\n",
		    (unsigned long long)a->half_open);
		family(out, "rove_handshakes_half_open_tcp", "gauge",
		    "Handshakes under way now over TLS on TCP.");
		evbuffer_add_printf(out, "rove_handshakes_half_open_tcp %llu\n",
		    (unsigned long long)a->half_open_tcp);
		family(out, "rove_admission_total", "counter",
		    "New connections by what admission did with them.");
		evbuffer_add_printf(out, "rove_admission_total{result=\"accepted\"} %llu\n"
		    "rove_admission_total{result=\"retry\"} %llu\n"
		    "rove_admission_total{result=\"bad_token\"} %llu\n"
		    "rove_admission_total{result=\"rate_limited\"} %llu\n"
		    "rove_admission_total{result=\"half_open_full\"} %llu\n"
		    "rove_admission_total{result=\"tcp_full\"} %llu\n",
		    (unsigned long long)a->accepted, (unsigned long long)a->retries,
		    (unsigned long long)a->bad_tokens,
		    (unsigned long long)a->rate_limited,
		    (unsigned long long)a->half_open_full,
		    (unsigned long long)a->tcp_full);
		family(out, "rove_admission_tcp_evicted_total", "counter",
		    "TCP handshakes from unknown sources ended to make room for "
		    "a known one.");
		evbuffer_add_printf(out, "rove_admission_tcp_evicted_total %llu\n",
		    (unsigned long long)a->tcp_evicted);
		family(out, "rove_admission_tcp_hurried_total", "counter",
		    "TCP handshakes given the short deadline under pressure.");
		evbuffer_add_printf(out, "rove_admission_tcp_hurried_total %llu\n",
		    (unsigned long long)a->tcp_hurried);
	}
}

struct metrics_scrape *
metrics_scrape_new(const struct status *st)
{
	struct metrics_scrape *ms = xcalloc(1, sizeof *ms);

	if ((ms->head = evbuffer_new()) == NULL)
		fatalx("%s: out of memory", __func__);
	render_head(ms->head, st);
	ms->npeers = st->npeers;
	ms->peers = xcalloc(st->npeers ? st->npeers : 1, sizeof *ms->peers);
	for (size_t i = 0; i < st->npeers; i++) {
		const struct status_peer *sp = &st->peers[i];
		struct metrics_peer *p = &ms->peers[i];

		snprintf(p->name, sizeof p->name, "%s", sp->name);
		p->connected = strcmp(sp->state, "established") == 0;
		p->counters = *sp->counters;
		p->has_quic = sp->has_quic;
		p->quic = sp->quic;
		if (sp->has_recovery)
			p->recovery = sp->recovery;
		p->handshakes = sp->handshakes;
		p->roam = sp->roam;
		p->fwd_open = sp->fwds != NULL ? sp->fwds->n : 0;
		p->has_fwd = sp->fwd_counters != NULL;
		if (p->has_fwd)
			p->fwd = *sp->fwd_counters;
	}
	return ms;
}

bool
metrics_scrape_next(struct metrics_scrape *ms, struct evbuffer *out)
{
	const struct peer_family *f;
	size_t end;

	if (ms->head != NULL) {
		evbuffer_add_buffer(out, ms->head);
		evbuffer_free(ms->head);
		ms->head = NULL;
		return true;
	}
	if (ms->family == PEER_FAMILIES) {
		process_figures(out);
		return false;
	}
	f = &peer_families[ms->family];
	if (ms->next == 0)
		family(out, f->name, f->type, f->help);
	end = ms->npeers - ms->next < METRICS_PAGE ? ms->npeers :
	    ms->next + METRICS_PAGE;
	for (; ms->next < end; ms->next++) {
		const struct metrics_peer *p = &ms->peers[ms->next];

		if (f->get != NULL)
			peer_u64(out, f->name, p->name, f->get(p));
		else
			f->lines(out, p);
	}
	if (ms->next == ms->npeers) {
		ms->family++;
		ms->next = 0;
	}
	return true;
}

void
metrics_scrape_free(struct metrics_scrape *ms)
{
	if (ms == NULL)
		return;
	if (ms->head != NULL)
		evbuffer_free(ms->head);
	free(ms->peers);
	free(ms);
}

void
metrics_render(struct evbuffer *out, const struct status *st)
{
	struct metrics_scrape *ms = metrics_scrape_new(st);

	while (metrics_scrape_next(ms, out))
		;
	metrics_scrape_free(ms);
}

/* A scrape under way over HTTP: a chunk at a time, the next made when
 * the last is written. */
struct metrics_send {
	struct metrics *m;
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	struct metrics_scrape *ms;
};

static void
send_free(struct metrics_send *s)
{
	s->m->sending--;
	metrics_scrape_free(s->ms);
	free(s);
}

static void send_chunk_cb(struct evhttp_connection *, void *);

static void
send_next(struct metrics_send *s)
{
	struct evbuffer *part = evbuffer_new();
	bool more;

	if (part == NULL)
		fatalx("%s: out of memory", __func__);
	/* An empty chunk would end the body: a part with no lines (a
	 * family no peer has) goes on to the next. */
	do
		more = metrics_scrape_next(s->ms, part);
	while (more && evbuffer_get_length(part) == 0);
	if (!more) {
		if (evbuffer_get_length(part) > 0)
			evhttp_send_reply_chunk(s->req, part);
		evbuffer_free(part);
		evhttp_connection_set_closecb(s->evcon, NULL, NULL);
		evhttp_send_reply_end(s->req);
		send_free(s);
		return;
	}
	evhttp_send_reply_chunk_with_cb(s->req, part, send_chunk_cb, s);
	evbuffer_free(part);
}

static void
send_chunk_cb(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	send_next(arg);
}

/* The connection went (the scraper left, timed out, or the server is
 * being freed) before the last chunk. A request the connection gave up
 * is ours to free; one it still holds, it frees. */
static void
send_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct metrics_send *s = arg;

	(void)evcon;
	if (evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	send_free(s);
}

static void
request_cb(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	struct metrics_send *s;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, NULL);
		return;
	}
	if (m->sending >= METRICS_MAX_SCRAPES) {
		evhttp_send_error(req, 503, NULL);
		return;
	}
	s = xcalloc(1, sizeof *s);
	s->m = m;
	s->req = req;
	s->evcon = evhttp_request_get_connection(req);
	s->ms = m->scrape(m->arg);
	m->sending++;
	evhttp_connection_set_closecb(s->evcon, send_close_cb, s);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply_start(req, 200, "OK");
	send_next(s);
}

/* The process's metrics server (roved has at most one). */
static struct metrics *the_metrics;

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics *m = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(m->lev);
}

/* evhttp's listener keeps a readable socket that accept4 cannot serve
 * when descriptors run out, and would spin; pause it (as accept.h does
 * for rove's own listeners) and say so at most every 10 s. */
static void
accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct metrics *m = the_metrics;
	struct timeval tv = { ACCEPT_PAUSE_MS / 1000, (ACCEPT_PAUSE_MS % 1000) * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	uint64_t now = clock_now_ms();

	/* The listener's argument is evhttp's own (the evhttp); ours is
	 * found as the one metrics server a process has. */
	if (m == NULL || m->lev != lev || m->http != arg)
		return;
	evconnlistener_disable(lev);
	evtimer_add(m->resume_ev, &tv);
	if (m->accept_log_ms == 0 || now - m->accept_log_ms >= 10000) {
		log_warn("MetricsListen: accept: %s: listener paused %d ms",
		    evutil_socket_error_to_string(err), ACCEPT_PAUSE_MS);
		m->accept_log_ms = now;
	}
}

struct metrics *
metrics_create(struct event_base *base, const struct sockaddr *addr,
    socklen_t addrlen, struct metrics_scrape *(*scrape)(void *), void *arg,
    char **cause)
{
	struct metrics *m = xcalloc(1, sizeof *m);
	struct evhttp_bound_socket *bound;
	char host[ADDR_STRLEN];
	struct ipaddr ip;
	uint16_t port;

	(void)addrlen;
	m->scrape = scrape;
	m->arg = arg;
	if (addr_from_sockaddr(addr, &ip, &port) != 0) {
		xasprintf(cause, "MetricsListen: not an IP address");
		free(m);
		return NULL;
	}
	addr_ip_str(&ip, host);
	if ((m->http = evhttp_new(base)) == NULL) {
		xasprintf(cause, "MetricsListen: cannot make an HTTP server");
		free(m);
		return NULL;
	}
	evhttp_set_max_headers_size(m->http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(m->http, 0);
	evhttp_set_timeout(m->http, METRICS_TIMEOUT_S);
	evhttp_set_cb(m->http, "/metrics", request_cb, m);
	if ((bound = evhttp_bind_socket_with_handle(m->http, host, port)) == NULL) {
		xasprintf(cause, "MetricsListen %s: cannot listen: %s",
		    addr_sockaddr_str(addr, host), strerror(errno));
		metrics_free(m);
		return NULL;
	}
	m->lev = evhttp_bound_socket_get_listener(bound);
	if ((m->resume_ev = evtimer_new(base, resume_cb, m)) == NULL) {
		xasprintf(cause, "MetricsListen: out of memory");
		metrics_free(m);
		return NULL;
	}
	evconnlistener_set_error_cb(m->lev, accept_error_cb);
	the_metrics = m;
	return m;
}

void
metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	if (m->http != NULL)
		evhttp_free(m->http);
	if (m->resume_ev != NULL)
		event_free(m->resume_ev);
	if (the_metrics == m)
		the_metrics = NULL;
	free(m);
}

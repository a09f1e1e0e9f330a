/* Prometheus text exposition of the status, over evhttp (metrics.h). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
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
 * (about 600 bytes a peer). More are answered 503, unless one of those
 * under way has not moved for METRICS_STALL_MS: its scraper is not
 * reading (or cannot), and a newcomer takes its place, so that a few
 * scrapers that ask and never read cannot keep everyone else out. */
#define METRICS_MAX_SCRAPES 4
#define METRICS_STALL_MS 1000
/* At most one line a period about connections refused over the cap. */
#define METRICS_REFUSE_LOG_MS 10000
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
	size_t udp_open;
	bool has_udp;
	struct udp_flow_counters udp;
};

struct metrics_scrape {
	struct evbuffer *head;       /* the figures that are not per peer */
	struct metrics_peer *peers;
	size_t npeers;
	size_t family;               /* the per-peer family being sent */
	size_t next;                 /* its next peer */
};

/* One HTTP connection: evhttp has no cap on them and no hook that sees a
 * connection both come and go, so metrics makes each one's bufferevent
 * itself (evhttp_set_bevcb), which counts it, and takes the connection
 * made on it (its callbacks' argument) in the same turn of the loop to
 * watch it close. Beyond the cap it is closed there instead. */
struct metrics_conn {
	LIST_ENTRY(metrics_conn) entry;
	struct metrics *m;
	struct bufferevent *bev;          /* a reference held until adopted */
	struct evhttp_connection *evcon;  /* NULL until adopted */
	struct metrics_send *send;        /* the scrape it is sending */
	bool refused;                     /* over the cap: to be closed */
};
LIST_HEAD(metrics_conns, metrics_conn);

struct metrics {
	struct evhttp *http;
	struct evconnlistener *lev;  /* evhttp's listener */
	struct event *resume_ev;     /* re-enables it after EMFILE */
	uint64_t accept_log_ms;
	struct metrics_scrape *(*scrape)(void *);
	void *arg;
	unsigned sending;            /* scrapes under way */
	struct metrics_conns pending; /* made this turn, not adopted yet */
	struct metrics_conns conns;  /* adopted, open */
	struct event *adopt_ev;      /* adopts the pending ones */
	unsigned nconns;             /* pending (but not refused) and open */
	unsigned max_conns;
	uint64_t conns_refused;
	uint64_t refuse_log_ms;      /* when refusals were last logged */
	uint64_t refused_logged;     /* conns_refused then */
	uint64_t scrapes_completed, scrapes_busy, scrapes_stalled;
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
GETTER(get_port_moves, p->roam.port_moves)
GETTER(get_rebinds, p->roam.rebinds)
GETTER(get_reconnects, p->roam.reconnects)
GETTER(get_resets, p->roam.stateless_resets)
GETTER(get_0rtt_attempted, p->roam.zero_rtt_attempted)
GETTER(get_0rtt_accepted, p->roam.zero_rtt_accepted)
GETTER(get_0rtt_rejected, p->roam.zero_rtt_rejected)
GETTER(get_fwd_open, p->fwd_open)
GETTER(get_tcp_fallbacks, p->roam.tcp_fallbacks)
GETTER(get_throttle_moves, p->roam.throttle_moves)
GETTER(get_throttle_probes_failed, p->roam.throttle_probes_failed)
GETTER(get_quic_returns, p->roam.quic_returns)
GETTER(get_fwd_resumed, p->has_fwd ? p->fwd.resumed : 0)
GETTER(get_fwd_resume_lost, p->has_fwd ? p->fwd.resume_lost : 0)
GETTER(get_udp_open, p->udp_open)
GETTER(get_udp_opened, p->has_udp ? p->udp.opened : 0)
GETTER(get_udp_refused, p->has_udp ? p->udp.refused : 0)
GETTER(get_udp_expired, p->has_udp ? p->udp.expired : 0)
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

/* Which transport the session runs on: 1 for the one in use, 0 for the
 * other, both 0 without a session (status "transport"). */
static void
lines_transport(struct evbuffer *out, const struct metrics_peer *p)
{
	static const char *const names[] = { "quic", "tcp" };

	for (int t = 0; t < 2; t++) {
		evbuffer_add_printf(out, "rove_peer_transport{peer=\"");
		label_value(out, p->name);
		evbuffer_add_printf(out, "\",transport=\"%s\"} %d\n", names[t],
		    p->has_quic && p->quic.tcp == (t == 1));
	}
}

/* The key exchange group of the session's handshake, as a label: one
 * line with value 1 while there is a session (status "key_exchange"). */
static void
lines_key_exchange(struct evbuffer *out, const struct metrics_peer *p)
{
	if (!p->has_quic || p->quic.kex_group == NULL)
		return;
	evbuffer_add_printf(out, "rove_peer_key_exchange{peer=\"");
	label_value(out, p->name);
	evbuffer_add_printf(out, "\",group=\"%s\",pq=\"%s\"} 1\n",
	    p->quic.kex_group, tls_group_is_pq(p->quic.kex_group) ? "yes" : "no");
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

static void
lines_udp_drops(struct evbuffer *out, const struct metrics_peer *p)
{
	if (!p->has_udp)
		return;
	for (int i = 0; i < UDP_DROP_COUNT; i++) {
		evbuffer_add_printf(out, "rove_peer_udp_dropped_total{peer=\"");
		label_value(out, p->name);
		evbuffer_add_printf(out, "\",cause=\"%s\"} %llu\n",
		    udp_drop_name((enum udp_drop)i),
		    (unsigned long long)p->udp.drops[i]);
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
	{ "rove_peer_transport", "gauge",
	    "1 for the transport the peer's session runs on: QUIC, or TLS over TCP.",
	    NULL, lines_transport },
	{ "rove_peer_key_exchange", "gauge",
	    "1 for the TLS key exchange group of the peer's session (pq: "
	    "post-quantum hybrid or not).", NULL, lines_key_exchange },
	{ "rove_peer_tcp_fallbacks_total", "counter",
	    "Client: moves of the session to TLS over TCP.", get_tcp_fallbacks, NULL },
	{ "rove_peer_throttle_moves_total", "counter",
	    "Client: moves to TLS over TCP because QUIC looked policed.",
	    get_throttle_moves, NULL },
	{ "rove_peer_throttle_probes_failed_total", "counter",
	    "Client: rate probes that found QUIC still policed (the session "
	    "stayed on TLS over TCP).", get_throttle_probes_failed, NULL },
	{ "rove_peer_quic_returns_total", "counter",
	    "Client: moves of the session back to QUIC.", get_quic_returns, NULL },
	{ "rove_peer_migrations_total", "counter",
	    "Client: migrations to a new local address.", get_migrations, NULL },
	{ "rove_peer_port_moves_total", "counter",
	    "Client: moves to a new local port because the path went silent.",
	    get_port_moves, NULL },
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
	{ "rove_peer_forwards_resumed_total", "counter",
	    "Forwarded TCP connections carried on over a new session.",
	    get_fwd_resumed, NULL },
	{ "rove_peer_forwards_resume_lost_total", "counter",
	    "Forwarded TCP connections that waited for a new session in vain.",
	    get_fwd_resume_lost, NULL },
	{ "rove_peer_udp_flows_open", "gauge",
	    "UDP forward flows open now.", get_udp_open, NULL },
	{ "rove_peer_udp_flows_opened_total", "counter",
	    "UDP forward flows set up.", get_udp_opened, NULL },
	{ "rove_peer_udp_flows_refused_total", "counter",
	    "UDP forward flows refused (policy, limit or target).",
	    get_udp_refused, NULL },
	{ "rove_peer_udp_flows_expired_total", "counter",
	    "UDP forward flows ended by their idle timeout.", get_udp_expired,
	    NULL },
	{ "rove_peer_udp_dropped_total", "counter",
	    "Datagrams of UDP forwards dropped, by cause.", NULL,
	    lines_udp_drops },
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
	if (strcmp(st->role, "server") == 0) {
		family(out, "rove_reload_generation", "gauge",
		    "The configuration running: 0 as started, 1 after the "
		    "first reload applied, ...");
		evbuffer_add_printf(out, "rove_reload_generation %llu\n",
		    (unsigned long long)st->reload_generation);
	}
	if (st->nworker_reloads > 0) {
		family(out, "rove_worker_reload_generation", "gauge",
		    "The configuration each other worker runs (worker 0's is "
		    "rove_reload_generation).");
		for (size_t i = 0; i < st->nworker_reloads; i++)
			evbuffer_add_printf(out, "rove_worker_reload_generation"
			    "{worker=\"%u\"} %llu\n", st->worker_reloads[i].worker,
			    (unsigned long long)st->worker_reloads[i].generation);
	}
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
		p->udp_open = sp->udp_flows != NULL ? sp->udp_flows->n : 0;
		p->has_udp = sp->udp_counters != NULL;
		if (p->has_udp)
			p->udp = *sp->udp_counters;
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
	struct metrics_conn *c;
	struct evhttp_request *req;
	struct metrics_scrape *ms;
	uint64_t moved_ms;           /* when a chunk was last written out */
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
		/* Ending the reply may close the connection at once. */
		s->c->send = NULL;
		s->m->scrapes_completed++;
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
	struct metrics_send *s = arg;

	(void)evcon;
	s->moved_ms = clock_now_ms();
	send_next(s);
}

/* The connection went: the scraper left, timed out, was cut off as
 * stalled, or the server is being freed. A scrape it was sending goes
 * too: a request the connection gave up is ours to free; one it still
 * holds, it frees. */
static void
conn_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct metrics_conn *c = arg;
	struct metrics_send *s = c->send;

	(void)evcon;
	if (s != NULL) {
		if (evhttp_request_get_connection(s->req) == NULL)
			evhttp_request_free(s->req);
		send_free(s);
	}
	LIST_REMOVE(c, entry);
	c->m->nconns--;
	free(c);
}

static struct bufferevent *
conn_bev_cb(struct event_base *base, void *arg)
{
	struct metrics *m = arg;
	struct metrics_conn *c = xcalloc(1, sizeof *c);

	c->m = m;
	if ((c->bev = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		fatalx("%s: out of memory", __func__);
	/* Kept until adopted, even should evhttp free it meanwhile. */
	bufferevent_incref(c->bev);
	c->refused = m->nconns >= m->max_conns;
	if (!c->refused)
		m->nconns++;
	LIST_INSERT_HEAD(&m->pending, c, entry);
	event_active(m->adopt_ev, EV_TIMEOUT, 1);
	return c->bev;
}

static void
log_refused(struct metrics *m, uint64_t now)
{
	if (m->refuse_log_ms != 0 && now - m->refuse_log_ms < METRICS_REFUSE_LOG_MS)
		return;
	log_warn("MetricsListen: %llu connection(s) closed at once: %u open "
	    "already (MetricsConnections)",
	    (unsigned long long)(m->conns_refused - m->refused_logged),
	    m->max_conns);
	m->refused_logged = m->conns_refused;
	m->refuse_log_ms = now;
}

/* The connections evhttp made on this turn's bufferevents: watched to
 * their close, or closed now if over the cap. */
static void
adopt_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics *m = arg;
	struct metrics_conn *c;
	uint64_t refused = m->conns_refused;

	(void)fd;
	(void)what;
	while ((c = LIST_FIRST(&m->pending)) != NULL) {
		void *cbarg = NULL;

		LIST_REMOVE(c, entry);
		bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
		c->evcon = cbarg;
		if (c->evcon == NULL ||
		    evhttp_connection_get_bufferevent(c->evcon) != c->bev) {
			/* evhttp dropped it already (out of memory). */
			if (!c->refused)
				m->nconns--;
			bufferevent_decref(c->bev);
			free(c);
			continue;
		}
		bufferevent_decref(c->bev);
		if (c->refused) {
			m->conns_refused++;
			free(c);
			evhttp_connection_free(cbarg);
			continue;
		}
		LIST_INSERT_HEAD(&m->conns, c, entry);
		evhttp_connection_set_closecb(c->evcon, conn_close_cb, c);
	}
	/* Those refused while the line waits are counted in the next. */
	if (m->conns_refused != refused)
		log_refused(m, clock_now_ms());
}

/* The scrape under way that has not moved for longest, if it has been
 * stalled long enough to give its place up. */
static struct metrics_conn *
stalled_conn(struct metrics *m, uint64_t now)
{
	struct metrics_conn *c, *worst = NULL;

	LIST_FOREACH(c, &m->conns, entry)
		if (c->send != NULL && now - c->send->moved_ms >= METRICS_STALL_MS &&
		    (worst == NULL || c->send->moved_ms < worst->send->moved_ms))
			worst = c;
	return worst;
}

/* The metrics server's own figures, in the scrape's head. */
static void
render_server(struct evbuffer *out, const struct metrics *m)
{
	family(out, "rove_metrics_connections_open", "gauge",
	    "HTTP connections open to MetricsListen.");
	evbuffer_add_printf(out, "rove_metrics_connections_open %u\n",
	    m->nconns);
	family(out, "rove_metrics_connections_refused_total", "counter",
	    "HTTP connections closed at once: MetricsConnections were open.");
	evbuffer_add_printf(out, "rove_metrics_connections_refused_total %llu\n",
	    (unsigned long long)m->conns_refused);
	family(out, "rove_metrics_scrapes_total", "counter",
	    "Scrapes by outcome: completed, busy (503), stalled (cut off "
	    "for a newcomer while its scraper read nothing).");
	evbuffer_add_printf(out, "rove_metrics_scrapes_total{result=\"completed\"} %llu\n"
	    "rove_metrics_scrapes_total{result=\"busy\"} %llu\n"
	    "rove_metrics_scrapes_total{result=\"stalled\"} %llu\n",
	    (unsigned long long)m->scrapes_completed,
	    (unsigned long long)m->scrapes_busy,
	    (unsigned long long)m->scrapes_stalled);
}

static void
request_cb(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct metrics_conn *c, *stalled;
	struct metrics_send *s;
	uint64_t now = clock_now_ms();

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, NULL);
		return;
	}
	LIST_FOREACH(c, &m->conns, entry)
		if (c->evcon == evcon)
			break;
	if (c != NULL && m->sending >= METRICS_MAX_SCRAPES &&
	    (stalled = stalled_conn(m, now)) != NULL && stalled != c) {
		m->scrapes_stalled++;
		evhttp_connection_free(stalled->evcon);
	}
	/* Not adopted: cannot be (a request comes on a later turn). */
	if (c == NULL || c->send != NULL || m->sending >= METRICS_MAX_SCRAPES) {
		m->scrapes_busy++;
		evhttp_send_error(req, 503, NULL);
		return;
	}
	s = xcalloc(1, sizeof *s);
	s->m = m;
	s->c = c;
	s->req = req;
	s->ms = m->scrape(m->arg);
	s->moved_ms = now;
	render_server(s->ms->head, m);
	m->sending++;
	c->send = s;
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
    socklen_t addrlen, unsigned max_conns,
    struct metrics_scrape *(*scrape)(void *), void *arg, char **cause)
{
	struct metrics *m = xcalloc(1, sizeof *m);
	struct evhttp_bound_socket *bound;
	char host[ADDR_STRLEN];
	struct ipaddr ip;
	uint16_t port;

	(void)addrlen;
	m->scrape = scrape;
	m->arg = arg;
	m->max_conns = max_conns;
	LIST_INIT(&m->pending);
	LIST_INIT(&m->conns);
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
	if ((m->adopt_ev = event_new(base, -1, 0, adopt_cb, m)) == NULL) {
		xasprintf(cause, "MetricsListen: out of memory");
		metrics_free(m);
		return NULL;
	}
	evhttp_set_bevcb(m->http, conn_bev_cb, m);
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
	struct metrics_conn *c;

	if (m == NULL)
		return;
	/* Closes the open connections (conn_close_cb frees each). */
	if (m->http != NULL)
		evhttp_free(m->http);
	while ((c = LIST_FIRST(&m->pending)) != NULL) {
		LIST_REMOVE(c, entry);
		bufferevent_decref(c->bev);
		free(c);
	}
	if (m->adopt_ev != NULL)
		event_free(m->adopt_ev);
	if (m->resume_ev != NULL)
		event_free(m->resume_ev);
	if (the_metrics == m)
		the_metrics = NULL;
	free(m);
}

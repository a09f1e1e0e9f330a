/* Rendering of status as JSON or text. */
#include <event2/buffer.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/key.h"
#include "base/log.h"
#include "status.h"
#include "transport/state.h"

const char *
status_state_name(const struct quic_conn *qc)
{
	if (qc == NULL)
		return "closed";
	switch (quic_conn_state(qc)) {
	case QUIC_STATE_HANDSHAKING:
		return "handshaking";
	case QUIC_STATE_ESTABLISHED:
		return "established";
	case QUIC_STATE_CLOSED:
		break;
	}
	return "closed";
}

void
status_request_parse(const char *request, struct status_request *rq)
{
	const char *p = request;

	memset(rq, 0, sizeof *rq);
	while (*p != '\0') {
		size_t n;

		while (*p == ' ')
			p++;
		n = strcspn(p, " ");
		if (n == 0)
			break;
		if (n == 7 && strncmp(p, "metrics", n) == 0 && p == request)
			rq->metrics = true;
		else if (n == 4 && strncmp(p, "json", n) == 0)
			rq->json = true;
		else if (n == 7 && strncmp(p, "summary", n) == 0)
			rq->summary = true;
		else if (n == 4 && strncmp(p, "peer", n) == 0) {
			p += n;
			while (*p == ' ')
				p++;
			n = strcspn(p, " ");
			/* Longer than any name: it names no peer. */
			if (n > STATUS_NAME_MAX)
				n = STATUS_NAME_MAX;
			memcpy(rq->peer, p, n);
			rq->peer[n] = '\0';
			if (n == 0)
				break;
		}
		p += n;
	}
}

bool
status_request_wants(const struct status_request *rq, const char *name)
{
	if (rq->summary)
		return false;
	return rq->peer[0] == '\0' || strcmp(rq->peer, name) == 0;
}

static void
json_prefixes(struct json *j, const char *key, const struct prefix *p, size_t n)
{
	char buf[ADDR_STRLEN];

	json_key(j, key);
	json_begin_array(j);
	for (size_t i = 0; i < n; i++)
		json_string(j, addr_prefix_str(&p[i], buf));
	json_end_array(j);
}

/* Loss recovery: what went out in groups and repairs, and what the
 * peer's groups gave us. */
static void
json_recovery(struct json *j, const struct recovery_stats *r)
{
	static const struct {
		const char *key;
		size_t off;
	} u64[] = {
		{ "protected_sent", offsetof(struct recovery_stats, protected_sent) },
		{ "protected_bytes", offsetof(struct recovery_stats, protected_bytes) },
		{ "repairs_sent", offsetof(struct recovery_stats, repairs_sent) },
		{ "repair_bytes", offsetof(struct recovery_stats, repair_bytes) },
		{ "received", offsetof(struct recovery_stats, received) },
		{ "rebuilt", offsetof(struct recovery_stats, rebuilt) },
		{ "unrepaired", offsetof(struct recovery_stats, unrepaired) },
		{ "overwhelmed", offsetof(struct recovery_stats, overwhelmed) },
		{ "malformed", offsetof(struct recovery_stats, malformed) },
		{ "late", offsetof(struct recovery_stats, late) },
		{ "duplicates", offsetof(struct recovery_stats, duplicates) },
		{ "reports_sent", offsetof(struct recovery_stats, reports_sent) },
		{ "reports_received", offsetof(struct recovery_stats, reports_received) },
	};

	json_key(j, "loss_recovery");
	json_begin_object(j);
	json_key(j, "sending");
	json_bool(j, r->sending);
	json_key(j, "active");
	json_bool(j, r->active);
	/* the plan: the loss it is made for, and the last group */
	json_key(j, "loss");
	json_double(j, r->loss, 5);
	json_key(j, "group");
	json_uint(j, r->group_k);
	json_key(j, "repairs_per_group");
	json_uint(j, r->group_m);
	json_key(j, "overrun");
	json_bool(j, r->overrun);
	for (size_t i = 0; i < sizeof u64 / sizeof u64[0]; i++) {
		json_key(j, u64[i].key);
		json_uint(j, *(const uint64_t *)(const void *)
		    ((const char *)r + u64[i].off));
	}
	json_end_object(j);
}

static void
json_drops(struct json *j, const struct tunnel_counters *c)
{
	json_key(j, "drops");
	json_begin_object(j);
	for (int i = 0; i < TUNNEL_DROP_COUNT; i++) {
		json_key(j, tunnel_drop_names[i]);
		json_uint(j, c->drops[i]);
	}
	json_end_object(j);
}

static void
json_dns(struct json *j, const struct status_dns *d)
{
	char buf[ADDR_STRLEN];

	json_key(j, "dns");
	json_begin_object(j);
	json_key(j, "state");
	json_string(j, d->state);
	json_key(j, "backend");
	json_string(j, d->backend);
	json_key(j, "servers");
	json_begin_array(j);
	for (size_t i = 0; i < d->nservers; i++)
		json_string(j, addr_ip_str(&d->servers[i], buf));
	json_end_array(j);
	json_key(j, "search");
	json_begin_array(j);
	for (size_t i = 0; i < d->nsearch; i++)
		json_string(j, d->search[i]);
	json_end_array(j);
	json_key(j, "error");
	json_string(j, d->error);
	json_end_object(j);
}

static void
json_head(struct json *j, const struct status *st)
{
	json_begin_object(j);
	json_key(j, "role");
	json_string(j, st->role);
	json_key(j, "tun");
	json_string(j, st->tun);
	json_key(j, "mtu");
	json_uint(j, st->mtu);
	json_key(j, "datagram_mtu");
	json_uint(j, st->datagram_mtu);
	if (st->addrs != NULL)
		json_prefixes(j, "address", st->addrs, st->naddrs);
	json_key(j, "rx_packets");
	json_uint(j, st->counters->rx_packets);
	json_key(j, "tx_packets");
	json_uint(j, st->counters->tx_packets);
	json_key(j, "offload");
	json_begin_object(j);
	json_key(j, "csum");
	json_bool(j, (st->offloads & OFFLOAD_F_CSUM) != 0);
	json_key(j, "tso");
	json_bool(j, (st->offloads & OFFLOAD_F_TSO) != 0);
	json_key(j, "uso");
	json_bool(j, (st->offloads & OFFLOAD_F_USO) != 0);
	/* Super-packets: read from the TUN and split, coalesced and
	 * written; rx/tx_packets count their segments. */
	json_key(j, "gso_read");
	json_uint(j, st->counters->gso_read);
	json_key(j, "gso_written");
	json_uint(j, st->counters->gso_written);
	json_end_object(j);
	json_drops(j, st->counters);
	if (st->dns != NULL)
		json_dns(j, st->dns);
	json_key(j, "reloads");
	json_begin_object(j);
	json_key(j, "applied");
	json_uint(j, st->reloads);
	json_key(j, "refused");
	json_uint(j, st->reloads_refused);
	if (strcmp(st->role, "server") == 0) {
		json_key(j, "generation");
		json_uint(j, st->reload_generation);
	}
	if (st->nworker_reloads > 0) {
		json_key(j, "workers");
		json_begin_array(j);
		for (size_t i = 0; i < st->nworker_reloads; i++) {
			const struct status_worker_reload *w = &st->worker_reloads[i];

			json_begin_object(j);
			json_key(j, "worker");
			json_uint(j, w->worker);
			json_key(j, "generation");
			json_uint(j, w->generation);
			json_key(j, "applied");
			json_uint(j, w->applied);
			json_key(j, "refused");
			json_uint(j, w->refused);
			json_end_object(j);
		}
		json_end_array(j);
	}
	json_end_object(j);
	if (st->tickets != NULL) {
		json_key(j, "tickets");
		json_begin_object(j);
		json_key(j, "issued");
		json_uint(j, st->tickets->issued);
		json_key(j, "resumed");
		json_uint(j, st->tickets->resumed);
		json_key(j, "replayed");
		json_uint(j, st->tickets->replayed);
		json_key(j, "group_resumed");
		json_uint(j, st->tickets->group_resumed);
		json_key(j, "unknown");
		json_uint(j, st->tickets->unknown);
		json_end_object(j);
	}
	if (st->admission != NULL) {
		const struct status_admission *a = st->admission;

		json_key(j, "admission");
		json_begin_object(j);
		json_key(j, "half_open");
		json_uint(j, a->half_open);
		json_key(j, "accepted");
		json_uint(j, a->accepted);
		json_key(j, "validated");
		json_uint(j, a->validated);
		json_key(j, "retries");
		json_uint(j, a->retries);
		json_key(j, "bad_tokens");
		json_uint(j, a->bad_tokens);
		json_key(j, "rate_limited");
		json_uint(j, a->rate_limited);
		json_key(j, "half_open_full");
		json_uint(j, a->half_open_full);
		json_key(j, "waiting");
		json_uint(j, a->waiting);
		json_key(j, "waited");
		json_uint(j, a->waited);
		json_key(j, "wait_dups");
		json_uint(j, a->wait_dups);
		json_key(j, "wait_expired");
		json_uint(j, a->wait_expired);
		json_key(j, "half_open_tcp");
		json_uint(j, a->half_open_tcp);
		json_key(j, "tcp_full");
		json_uint(j, a->tcp_full);
		json_key(j, "tcp_evicted");
		json_uint(j, a->tcp_evicted);
		json_key(j, "tcp_hurried");
		json_uint(j, a->tcp_hurried);
		json_end_object(j);
	}
	if (st->peer_counts != NULL) {
		const struct status_peer_counts *c = st->peer_counts;

		json_key(j, "peer_states");
		json_begin_object(j);
		json_key(j, "configured");
		json_uint(j, c->configured);
		json_key(j, "established");
		json_uint(j, c->established);
		json_key(j, "handshaking");
		json_uint(j, c->handshaking);
		json_key(j, "closed");
		json_uint(j, c->closed);
		json_end_object(j);
	}
	if (!st->summary) {
		json_key(j, "peers");
		json_begin_array(j);
	}
}

static void
json_peer(struct json *j, const struct status_peer *p)
{
	char buf[ADDR_STRLEN], key[KEY_B64_LEN + 1];

	json_begin_object(j);
	json_key(j, "name");
	json_string(j, p->name);
	json_key(j, "public_key");
	key_encode(p->public_key, key);
	json_string(j, key);
	json_key(j, "state");
	json_string(j, p->state);
	/* wall-clock seconds; 0: never */
	json_key(j, "latest_handshake");
	json_uint(j, p->latest_handshake);
	json_key(j, "last_received_ms_ago");
	if (p->has_rx_idle)
		json_uint(j, p->rx_idle_ms);
	else
		json_string(j, NULL);
	/* quic or tcp (TLS over TCP); null without a session */
	json_key(j, "transport");
	json_string(j, !p->has_quic ? NULL : p->quic.tcp ? "tcp" : "quic");
	/* the client's Proxy without credentials; null: none */
	json_key(j, "proxy");
	json_string(j, p->proxy);
	json_key(j, "via_proxy");
	json_bool(j, p->via_proxy);
	/* the TLS group of the session's handshake (X25519MLKEM768,
	 * x25519, ...); null without a session */
	json_key(j, "key_exchange");
	json_string(j, p->has_quic ? p->quic.kex_group : NULL);
	json_key(j, "connection_id");
	json_string(j, p->connection_id);
	json_prefixes(j, "addresses", p->addrs, p->naddrs);
	json_prefixes(j, "allowed_ips", p->allowed, p->nallowed);
	json_key(j, "remote");
	json_string(j, p->remote != NULL ? addr_sockaddr_str(p->remote, buf) : NULL);
	json_key(j, "local");
	json_string(j, p->local != NULL ? addr_sockaddr_str(p->local, buf) : NULL);
	json_key(j, "path_validations");
	json_uint(j, p->has_quic ? p->quic.path_validated : 0);
	json_key(j, "path_validation_failures");
	json_uint(j, p->has_quic ? p->quic.path_failed : 0);
	json_key(j, "path_validations_aborted");
	json_uint(j, p->has_quic ? p->quic.path_aborted : 0);
	json_key(j, "migrations");
	json_uint(j, p->roam.migrations);
	json_key(j, "rebinds");
	json_uint(j, p->roam.rebinds);
	json_key(j, "reconnects");
	json_uint(j, p->roam.reconnects);
	json_key(j, "stateless_resets");
	json_uint(j, p->roam.stateless_resets);
	json_key(j, "zero_rtt");
	json_begin_object(j);
	json_key(j, "attempted");
	json_uint(j, p->roam.zero_rtt_attempted);
	json_key(j, "accepted");
	json_uint(j, p->roam.zero_rtt_accepted);
	json_key(j, "rejected");
	json_uint(j, p->roam.zero_rtt_rejected);
	json_end_object(j);
	json_key(j, "tcp_fallbacks");
	json_uint(j, p->roam.tcp_fallbacks);
	json_key(j, "quic_returns");
	json_uint(j, p->roam.quic_returns);
	json_key(j, "throttle_moves");
	json_uint(j, p->roam.throttle_moves);
	json_key(j, "throttle_probes_failed");
	json_uint(j, p->roam.throttle_probes_failed);
	json_key(j, "uplink_moves");
	json_uint(j, p->roam.uplink_moves);
	json_key(j, "port_moves");
	json_uint(j, p->roam.port_moves);
	json_key(j, "keepalive_ms");
	json_uint(j, p->roam.keepalive_ms);
	json_key(j, "rx_bytes");
	json_uint(j, p->counters->rx_bytes);
	json_key(j, "tx_bytes");
	json_uint(j, p->counters->tx_bytes);
	json_key(j, "rx_packets");
	json_uint(j, p->counters->rx_packets);
	json_key(j, "tx_packets");
	json_uint(j, p->counters->tx_packets);
	json_key(j, "rtt_ms");
	if (p->has_quic)
		json_double(j, p->quic.rtt_ms, 3);
	else
		json_null(j);
	json_key(j, "min_rtt_ms");
	if (p->has_quic)
		json_double(j, p->quic.min_rtt_ms, 3);
	else
		json_null(j);
	json_key(j, "cwnd");
	json_uint(j, p->has_quic ? p->quic.cwnd : 0);
	json_key(j, "bytes_in_flight");
	json_uint(j, p->has_quic ? p->quic.bytes_in_flight : 0);
	json_key(j, "stream_unacked");
	json_uint(j, p->has_quic ? p->quic.stream_unacked : 0);
	json_key(j, "datagrams_lost");
	json_uint(j, p->has_quic ? p->quic.dgram_lost : 0);
	/* Dropped before sending: the queue was full, or they waited
	 * longer than a round trip for the congestion window. */
	json_key(j, "datagrams_queue_full");
	json_uint(j, p->has_quic ? p->quic.dgram_queue_full : 0);
	json_key(j, "datagrams_stale");
	json_uint(j, p->has_quic ? p->quic.dgram_stale : 0);
	json_key(j, "handshakes");
	json_uint(j, p->handshakes);
	if (p->has_recovery)
		json_recovery(j, &p->recovery);
	if (p->has_worker) {
		json_key(j, "worker");
		json_uint(j, p->worker);
	}
	json_drops(j, p->counters);
	if (p->fwd_counters != NULL)
		fwd_status_json(p->fwds, p->fwd_counters, j);
	if (p->udp_counters != NULL)
		udp_flows_status_json(p->udp_flows, p->udp_counters, j);
	json_key(j, "listeners");
	json_begin_array(j);
	for (size_t i = 0; i < p->nlisteners; i++) {
		const struct status_listener *l = &p->listeners[i];

		json_begin_object(j);
		json_key(j, "kind");
		json_string(j, l->kind);
		json_key(j, "bind");
		json_string(j, l->bind);
		json_key(j, "target");
		json_string(j, l->target[0] ? l->target : NULL);
		json_key(j, "state");
		json_string(j, l->state);
		json_end_object(j);
	}
	json_end_array(j);
	json_end_object(j);
}

/* Text output is for a terminal: every string in it goes through
 * log_escape, so none can carry a control character or an escape
 * sequence, whatever was let into a name upstream. Returns `buf`. */
#define TEXT_STRLEN (4 * 64 + 1)
static const char *
text_str(char buf[static TEXT_STRLEN], const char *s)
{
	log_escape(buf, TEXT_STRLEN, s, strlen(s));
	return buf;
}

static void
text_prefixes(struct evbuffer *out, const struct prefix *p, size_t n)
{
	char buf[ADDR_STRLEN];

	if (n == 0)
		evbuffer_add_printf(out, "(none)");
	for (size_t i = 0; i < n; i++)
		evbuffer_add_printf(out, "%s%s", i ? ", " : "", addr_prefix_str(&p[i], buf));
}

static void
text_drops(struct evbuffer *out, const char *indent, const struct tunnel_counters *c)
{
	bool any = false;

	evbuffer_add_printf(out, "%sdrops:", indent);
	for (int i = 0; i < TUNNEL_DROP_COUNT; i++) {
		if (c->drops[i] == 0)
			continue;
		evbuffer_add_printf(out, " %s=%llu", tunnel_drop_names[i],
		    (unsigned long long)c->drops[i]);
		any = true;
	}
	evbuffer_add_printf(out, "%s\n", any ? "" : " none");
}

static void
text_head(struct evbuffer *out, const struct status *st)
{
	char buf[ADDR_STRLEN], role[TEXT_STRLEN], tun[TEXT_STRLEN];

	if (st->tun == NULL && st->tun_pending != NULL)
		evbuffer_add_printf(out, "%s: interface %s (not up yet: it comes "
		    "with the server's configuration)\n", text_str(role, st->role),
		    text_str(tun, st->tun_pending));
	else
		evbuffer_add_printf(out, "%s: interface %s, mtu %u (datagram "
		    "fits %zu)\n", text_str(role, st->role), st->tun != NULL ?
		    text_str(tun, st->tun) : "none (forward-only)", st->mtu,
		    st->datagram_mtu);
	if (st->addrs != NULL) {
		evbuffer_add_printf(out, "  address: ");
		text_prefixes(out, st->addrs, st->naddrs);
		evbuffer_add_printf(out, "\n");
	}
	if (st->tun != NULL)
		evbuffer_add_printf(out, "  offloads: %s%s%s%s; super-packets "
		    "read %llu, written %llu\n",
		    st->offloads == 0 ? "off" : "",
		    st->offloads & OFFLOAD_F_CSUM ? "checksum" : "",
		    st->offloads & OFFLOAD_F_TSO ? " tso" : "",
		    st->offloads & OFFLOAD_F_USO ? " uso" : "",
		    (unsigned long long)st->counters->gso_read,
		    (unsigned long long)st->counters->gso_written);
	if (st->dns != NULL) {
		const struct status_dns *d = st->dns;
		char err[TEXT_STRLEN];

		evbuffer_add_printf(out, "  dns: %s", d->state);
		if (d->backend != NULL)
			evbuffer_add_printf(out, " (%s)", d->backend);
		for (size_t i = 0; i < d->nservers; i++)
			evbuffer_add_printf(out, "%s%s", i ? ", " : ": ",
			    addr_ip_str(&d->servers[i], buf));
		if (d->nsearch > 0)
			evbuffer_add_printf(out, "; search");
		for (size_t i = 0; i < d->nsearch; i++)
			evbuffer_add_printf(out, " %s", d->search[i]);
		if (d->error != NULL)
			evbuffer_add_printf(out, "; %s", text_str(err, d->error));
		evbuffer_add_printf(out, "\n");
	}
	text_drops(out, "  ", st->counters);
	if (st->reloads != 0 || st->reloads_refused != 0) {
		evbuffer_add_printf(out, "  reloads: %llu applied, %llu refused",
		    (unsigned long long)st->reloads,
		    (unsigned long long)st->reloads_refused);
		if (strcmp(st->role, "server") == 0)
			evbuffer_add_printf(out, " (generation %llu)",
			    (unsigned long long)st->reload_generation);
		for (size_t i = 0; i < st->nworker_reloads; i++)
			evbuffer_add_printf(out, "; worker %u: generation %llu, "
			    "%llu refused", st->worker_reloads[i].worker,
			    (unsigned long long)st->worker_reloads[i].generation,
			    (unsigned long long)st->worker_reloads[i].refused);
		evbuffer_add_printf(out, "\n");
	}
	if (st->peer_counts != NULL)
		evbuffer_add_printf(out, "  peers: %zu configured, %zu established, "
		    "%zu handshaking, %zu closed\n", st->peer_counts->configured,
		    st->peer_counts->established, st->peer_counts->handshaking,
		    st->peer_counts->closed);
}

/* "4 s", "3 min 12 s", "2 h 5 min", "3 d 4 h": an age at a glance. */
static void
text_age(struct evbuffer *out, uint64_t s)
{
	if (s < 60)
		evbuffer_add_printf(out, "%llu s", (unsigned long long)s);
	else if (s < 3600)
		evbuffer_add_printf(out, "%llu min %llu s", (unsigned long long)
		    (s / 60), (unsigned long long)(s % 60));
	else if (s < 86400)
		evbuffer_add_printf(out, "%llu h %llu min", (unsigned long long)
		    (s / 3600), (unsigned long long)(s % 3600 / 60));
	else
		evbuffer_add_printf(out, "%llu d %llu h", (unsigned long long)
		    (s / 86400), (unsigned long long)(s % 86400 / 3600));
}

static void
text_handshake(struct evbuffer *out, const struct status_peer *p)
{
	uint64_t now = clock_wall();
	time_t t = (time_t)p->latest_handshake;
	struct tm tm;
	char when[32];

	evbuffer_add_printf(out, "  latest handshake: ");
	if (p->latest_handshake == 0) {
		evbuffer_add_printf(out, "never\n");
		return;
	}
	localtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
	evbuffer_add_printf(out, "%s (", when);
	text_age(out, now > p->latest_handshake ? now - p->latest_handshake : 0);
	evbuffer_add_printf(out, " ago)\n");
	if (p->has_rx_idle)
		evbuffer_add_printf(out, "  last packet received: %llu.%llu s "
		    "ago\n", (unsigned long long)(p->rx_idle_ms / 1000),
		    (unsigned long long)(p->rx_idle_ms % 1000 / 100));
}

static void
text_peer(struct evbuffer *out, const struct status_peer *p, bool server)
{
	char buf[ADDR_STRLEN], key[KEY_B64_LEN + 1], name[TEXT_STRLEN];
	char state[TEXT_STRLEN];

	key_encode(p->public_key, key);
	evbuffer_add_printf(out, "\npeer %s (%s)\n  state: %s%s\n",
	    text_str(name, p->name), key, text_str(state, p->state),
	    p->latest_handshake == 0 && strcmp(p->state, "closed") == 0 ?
	    " (never connected)" : "");
	text_handshake(out, p);
	if (p->connection_id != NULL)
		evbuffer_add_printf(out, "  connection: %s\n",
		    p->connection_id);
	if (p->remote != NULL)
		evbuffer_add_printf(out, "  endpoint: %s\n",
		    addr_sockaddr_str(p->remote, buf));
	if (p->has_quic)
		evbuffer_add_printf(out, "  transport: %s (%llu moves to "
		    "TCP, %llu of them from a throttled QUIC, %llu back to "
		    "QUIC, %llu rate probes still throttled)\n",
		    p->quic.tcp ? "TLS over TCP" : "QUIC",
		    (unsigned long long)p->roam.tcp_fallbacks,
		    (unsigned long long)p->roam.throttle_moves,
		    (unsigned long long)p->roam.quic_returns,
		    (unsigned long long)p->roam.throttle_probes_failed);
	if (p->proxy != NULL)
		evbuffer_add_printf(out, "  proxy: %s (%s)\n", p->proxy,
		    p->via_proxy ? "the session goes through it" :
		    "not in use");
	if (p->has_quic && p->quic.kex_group != NULL)
		evbuffer_add_printf(out, "  key exchange: %s (%s)\n",
		    p->quic.kex_group, tls_group_is_pq(p->quic.kex_group) ?
		    "post-quantum hybrid" : "classic");
	if (p->local != NULL)
		evbuffer_add_printf(out, "  local: %s\n",
		    addr_sockaddr_str(p->local, buf));
	evbuffer_add_printf(out, "  roaming: %llu migrations, %llu rebinds, "
	    "%llu reconnects, ", (unsigned long long)p->roam.migrations,
	    (unsigned long long)p->roam.rebinds,
	    (unsigned long long)p->roam.reconnects);
	/* A server sees the 0-RTT it accepted, not what a client tried. */
	if (server)
		evbuffer_add_printf(out, "0-RTT accepted %llu times\n",
		    (unsigned long long)p->roam.zero_rtt_accepted);
	else
		evbuffer_add_printf(out, "0-RTT %llu/%llu accepted\n",
		    (unsigned long long)p->roam.zero_rtt_accepted,
		    (unsigned long long)p->roam.zero_rtt_attempted);
	evbuffer_add_printf(out, "  addresses: ");
	text_prefixes(out, p->addrs, p->naddrs);
	evbuffer_add_printf(out, "\n  allowed ips: ");
	text_prefixes(out, p->allowed, p->nallowed);
	evbuffer_add_printf(out, "\n  transfer: %llu B (%llu packets) received, "
	    "%llu B (%llu packets) sent\n",
	    (unsigned long long)p->counters->rx_bytes,
	    (unsigned long long)p->counters->rx_packets,
	    (unsigned long long)p->counters->tx_bytes,
	    (unsigned long long)p->counters->tx_packets);
	if (p->has_quic) {
		evbuffer_add_printf(out, "  rtt: %.3f ms, cwnd: %llu B, "
		    "in flight: %llu B, stream data unacknowledged: "
		    "%llu B\n", p->quic.rtt_ms,
		    (unsigned long long)p->quic.cwnd,
		    (unsigned long long)p->quic.bytes_in_flight,
		    (unsigned long long)p->quic.stream_unacked);
		evbuffer_add_printf(out, "  datagrams: %llu lost, %llu dropped "
		    "(queue full), %llu dropped (stale)\n",
		    (unsigned long long)p->quic.dgram_lost,
		    (unsigned long long)p->quic.dgram_queue_full,
		    (unsigned long long)p->quic.dgram_stale);
	}
	evbuffer_add_printf(out, "  handshakes: %llu\n",
	    (unsigned long long)p->handshakes);
	if (p->has_worker)
		evbuffer_add_printf(out, "  worker: %u\n", p->worker);
	text_drops(out, "  ", p->counters);
	if (p->fwd_counters != NULL)
		fwd_status_text(p->fwds, p->fwd_counters, out);
	if (p->udp_counters != NULL)
		udp_flows_status_text(p->udp_flows, p->udp_counters, out);
	if (p->nlisteners > 0)
		evbuffer_add_printf(out, "  listeners:\n");
	for (size_t i = 0; i < p->nlisteners; i++) {
		const struct status_listener *l = &p->listeners[i];
		char bind[TEXT_STRLEN], target[TEXT_STRLEN];

		evbuffer_add_printf(out, "    %s %s%s%s: %s\n", l->kind,
		    text_str(bind, l->bind), l->target[0] ? " -> " : "",
		    text_str(target, l->target), l->state);
	}
}

void
status_render_head(struct status_renderer *r, struct evbuffer *out,
    const struct status *st, bool json)
{
	r->json = json;
	r->summary = st->summary;
	r->server = strcmp(st->role, "server") == 0;
	if (json) {
		json_init(&r->j, out);
		json_head(&r->j, st);
	} else
		text_head(out, st);
}

void
status_render_peers(struct status_renderer *r, struct evbuffer *out,
    const struct status_peer *peers, size_t n)
{
	if (r->summary)
		return;
	r->j.out = out;
	for (size_t i = 0; i < n; i++) {
		if (r->json)
			json_peer(&r->j, &peers[i]);
		else
			text_peer(out, &peers[i], r->server);
	}
}

void
status_render_end(struct status_renderer *r, struct evbuffer *out)
{
	if (!r->json)
		return;
	r->j.out = out;
	if (!r->summary)
		json_end_array(&r->j);
	json_end_object(&r->j);
	evbuffer_add(out, "\n", 1);
}

void
status_render(struct evbuffer *out, const struct status *st, bool json)
{
	struct status_renderer r;

	status_render_head(&r, out, st, json);
	status_render_peers(&r, out, st->peers, st->npeers);
	status_render_end(&r, out);
}

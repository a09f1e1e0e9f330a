/* What roved shows of itself (server-int.h): the status answer on the
 * control socket, a page of peers at a time; the metrics scrape; and,
 * with workers, the board both ways: workers 1..N-1 put their peers and
 * totals on it, and worker 0 adds them to its own. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/xmalloc.h"
#include "ops/notify.h"
#include "ops/status.h"
#include "server-int.h"

void
server_status_show_peer(struct server *srv, const struct peer *p)
{
	struct board_peer bp = {
		.worker = srv->worker,
		.since = p->sess->since,
		.counters = p->counters,
		.handshakes = p->handshakes,
		.rebinds = p->rebinds,
		.zero_rtt = p->zero_rtt,
		.fwd = p->fwd_counters,
		.fwd_open = p->sess->fwds.n,
	};
	const struct sockaddr *sa;
	socklen_t len;

	if (srv->board == NULL || srv->worker == 0)
		return;
	memcpy(bp.key, p->cfg->pubkey, BOARD_KEY);
	quic_conn_get_stats(p->sess->qc, &bp.quic);
	if ((sa = quic_conn_remote(p->sess->qc, &len)) != NULL &&
	    len <= sizeof bp.remote)
		memcpy(&bp.remote, sa, len);
	if ((sa = quic_conn_local(p->sess->qc, &len)) != NULL &&
	    len <= sizeof bp.local)
		memcpy(&bp.local, sa, len);
	snprintf(bp.connection_id, sizeof bp.connection_id, "%s",
	    quic_conn_id(p->sess->qc));
	board_put(srv->board, p->idx, &bp);
}

/* How this worker admitted new connections, for status. */
static void
admission_now(const struct server *srv, struct status_admission *a)
{
	const struct admit_stats *as = &srv->admit.stats;

	*a = (struct status_admission){
		.half_open = srv->half_open + srv->half_open_tcp,
		.half_open_tcp = srv->half_open_tcp,
		.accepted = as->accepted,
		.validated = as->validated,
		.retries = as->retries,
		.bad_tokens = as->bad_tokens,
		.rate_limited = as->rate_limited,
		.half_open_full = as->half_open_full,
		.waiting = srv->admit.nwaiting,
		.waited = as->waited,
		.wait_dups = as->wait_dups,
		.wait_expired = as->wait_expired,
		.tcp_full = as->tcp_full,
		.tcp_evicted = as->tcp_evicted,
		.tcp_hurried = as->tcp_hurried,
	};
}

/* All this worker holds, and its totals. */
void
server_status_board_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct board_worker bw = {
		.counters = srv->counters,
		.reload_gen = srv->reload_gen,
		.reloads = srv->reloads,
		.reloads_refused = srv->reloads_refused,
	};

	(void)fd;
	(void)what;
	admission_now(srv, &bw.admission);
	for (size_t k = 0; k < srv->npeers; k++) {
		if (srv->peers[k]->sess != NULL)
			server_status_show_peer(srv, srv->peers[k]);
	}
	state_server_stats(srv->state, &bw.tickets);
	board_put_worker(srv->board, srv->worker, &bw);
	/* A SIGHUP from worker 0 that came before this worker took SIGHUP
	 * (while it was starting) is caught up with here. */
	if (srv->worker > 0) {
		uint64_t gen = board_config_gen(srv->board);

		if (gen > srv->reload_gen && gen != srv->reload_loading) {
			log_info("worker %u: worker 0 applied a configuration "
			    "(generation %llu) this worker has not: reloading",
			    srv->worker, (unsigned long long)gen);
			srv->reload_loading = gen;
			raise(SIGHUP);
		}
	}
}

/* One peer as status and metrics show it: from `bp` when another worker
 * holds its session (bp points into what the caller keeps). */
static void
status_peer_fill(const struct server *srv, struct status_peer *sp,
    const struct peer *p, const char *state, const struct board_peer *bp,
    struct status_listener *listeners)
{
	struct quic_conn *qc = p->sess != NULL ? p->sess->qc : NULL;
	socklen_t len;

	*sp = (struct status_peer){
		.name = p->cfg->name,
		.public_key = p->cfg->pubkey,
		.state = state,
		.addrs = p->addrs,
		.naddrs = p->naddrs,
		.allowed = p->cfg->allowed_ips.v,
		.nallowed = p->cfg->allowed_ips.n,
		.has_worker = srv->board != NULL && (qc != NULL || bp != NULL),
		.worker = bp != NULL ? bp->worker : srv->worker,
	};
	if (bp != NULL) {
		uint64_t age = clock_now() - bp->since;

		sp->counters = &bp->counters;
		sp->handshakes = bp->handshakes;
		sp->latest_handshake = clock_wall() - age / 1000000000u;
		sp->connection_id = bp->connection_id;
		sp->fwd_counters = &bp->fwd;
		sp->roam.rebinds = bp->rebinds;
		sp->roam.zero_rtt_accepted = bp->zero_rtt;
		sp->remote = (const struct sockaddr *)&bp->remote;
		sp->local = (const struct sockaddr *)&bp->local;
		sp->has_quic = true;
		sp->quic = bp->quic;
		return;
	}
	sp->counters = &p->counters;
	sp->handshakes = p->handshakes;
	sp->latest_handshake = p->latest_handshake;
	sp->connection_id = qc != NULL ? quic_conn_id(qc) : NULL;
	sp->fwd_counters = &p->fwd_counters;
	sp->udp_counters = &p->udp_counters;
	sp->udp_flows = p->sess != NULL && p->sess->fwd_peer == p ?
	    &p->sess->udp.set : NULL;
	sp->fwds = p->sess != NULL ? &p->sess->fwds : NULL;
	sp->roam.rebinds = p->rebinds;
	sp->roam.zero_rtt_accepted = p->zero_rtt;
	if (qc != NULL) {
		sp->remote = quic_conn_remote(qc, &len);
		sp->local = quic_conn_local(qc, &len);
		sp->has_quic = true;
		quic_conn_get_stats(qc, &sp->quic);
		if (quic_conn_state(qc) == QUIC_STATE_ESTABLISHED) {
			sp->has_rx_idle = true;
			sp->rx_idle_ms = quic_conn_rx_idle_ms(qc);
		}
		if (p->sess->rec != NULL) {
			sp->has_recovery = true;
			recovery_get_stats(p->sess->rec, &sp->recovery);
		}
	}
	if (listeners != NULL && p->sess != NULL) {
		for (size_t i = 0; i < p->sess->nrlisteners; i++) {
			struct status_listener *l = &listeners[i];

			l->kind = egress_listener_request(
			    p->sess->rlisteners[i])->udp ? "remote udp" :
			    "remote";
			snprintf(l->bind, sizeof l->bind, "%s",
			    egress_listener_where(p->sess->rlisteners[i]));
			l->target[0] = '\0';
			l->state = "listening";
		}
		for (size_t i = 0; i < p->sess->nrrefused; i++) {
			struct status_listener *l =
			    &listeners[p->sess->nrlisteners + i];
			/* The protocol is the kind's, as for a listener. */
			struct proto_remote_forward rf = p->sess->rrefused[i];
			char rs[PROTO_FWD_REMOTE_STRLEN];

			l->kind = rf.udp ? "remote udp" : "remote";
			rf.udp = false;
			snprintf(l->bind, sizeof l->bind, "%s",
			    proto_fwd_remote_str(&rf, rs));
			l->target[0] = '\0';
			l->state = proto_fwd_error_name(p->sess->rrefused[i].status);
		}
		sp->listeners = listeners;
		sp->nlisteners = p->sess->nrlisteners + p->sess->nrrefused;
	}
}

struct server_status {
	struct status st;
	struct tunnel_counters counters;
	struct status_admission adm;
	struct status_peer_counts counts;
	struct state_stats tickets;
	struct board_peer other;   /* room for a peer another worker holds */
	struct status_worker_reload wreload[CID_WORKERS_MAX];
};

/* Worker 0 with workers: add the others' totals (as of their last
 * refresh) to its own. */
static void
server_status_add_workers(struct server *srv, struct server_status *now)
{
	struct board_worker bw;

	for (unsigned w = 1; srv->board != NULL && w < srv->cfg->workers; w++) {
		if (!board_get_worker(srv->board, w, &bw))
			continue;
		if (srv->worker == 0 && now->st.nworker_reloads < CID_WORKERS_MAX)
			now->wreload[now->st.nworker_reloads++] =
			    (struct status_worker_reload){ .worker = w,
			    .generation = bw.reload_gen, .applied = bw.reloads,
			    .refused = bw.reloads_refused };
		now->counters.rx_packets += bw.counters.rx_packets;
		now->counters.rx_bytes += bw.counters.rx_bytes;
		now->counters.tx_packets += bw.counters.tx_packets;
		now->counters.tx_bytes += bw.counters.tx_bytes;
		now->counters.gso_read += bw.counters.gso_read;
		now->counters.gso_written += bw.counters.gso_written;
		for (int i = 0; i < TUNNEL_DROP_COUNT; i++)
			now->counters.drops[i] += bw.counters.drops[i];
		now->adm.half_open += bw.admission.half_open;
		now->adm.accepted += bw.admission.accepted;
		now->adm.validated += bw.admission.validated;
		now->adm.retries += bw.admission.retries;
		now->adm.bad_tokens += bw.admission.bad_tokens;
		now->adm.rate_limited += bw.admission.rate_limited;
		now->adm.half_open_full += bw.admission.half_open_full;
		now->adm.waiting += bw.admission.waiting;
		now->adm.waited += bw.admission.waited;
		now->adm.wait_dups += bw.admission.wait_dups;
		now->adm.wait_expired += bw.admission.wait_expired;
		now->adm.half_open_tcp += bw.admission.half_open_tcp;
		now->adm.tcp_full += bw.admission.tcp_full;
		now->adm.tcp_evicted += bw.admission.tcp_evicted;
		now->adm.tcp_hurried += bw.admission.tcp_hurried;
		now->tickets.issued += bw.tickets.issued;
		now->tickets.resumed += bw.tickets.resumed;
		now->tickets.replayed += bw.tickets.replayed;
		now->tickets.unknown += bw.tickets.unknown;
		now->tickets.group_resumed += bw.tickets.group_resumed;
	}
}

/* Worker 0 with workers: is `p`'s live session in another worker (newer
 * than one here, if any)? Then `bp` holds it as that worker showed it. */
static bool
peer_elsewhere(struct server *srv, const struct peer *p, struct board_peer *bp)
{
	if (srv->board == NULL || srv->worker != 0)
		return false;
	return board_get(srv->board, p->idx, p->cfg->pubkey, 0,
	    p->sess != NULL ? p->sess->since : 0, bp);
}

/* `p`'s state for status; *bp stays pointing at its figures when another
 * worker holds its session, else it is set to NULL. */
static const char *
peer_state(struct server *srv, const struct peer *p, struct board_peer **bp)
{
	if (peer_elsewhere(srv, p, *bp))
		return "established";
	*bp = NULL;
	return status_state_name(p->sess != NULL ? p->sess->qc : NULL);
}

/* A status answer's list of peers, STATUS_PAGE at a time (control_more):
 * with thousands of peers the whole list would keep the loop from the
 * tunnels for a tenth of a second. Each part reads the peers as they are
 * then; after a reload the list goes on from the same position in the
 * new configuration. */
#define STATUS_PAGE 64
struct status_stream {
	struct server *srv;
	struct status_request rq;
	struct status_renderer r;
	size_t next;          /* index in srv->peers of the next to look at */
	struct board_peer other[STATUS_PAGE]; /* peers other workers hold */
	/* Their -R listeners and refusals (CFG_MAX_REMOTE_FORWARDS each). */
	struct status_listener listeners[STATUS_PAGE][2 * CFG_MAX_REMOTE_FORWARDS];
};

static bool
status_more(struct evbuffer *out, void *arg)
{
	struct status_stream *ss = arg;
	struct server *srv = ss->srv;
	struct status_peer sp[STATUS_PAGE];
	size_t n = 0, looked = 0;

	/* A filter that matches few peers still looks at a bounded number
	 * of them a part. */
	while (ss->next < srv->npeers && n < STATUS_PAGE &&
	    looked++ < 16 * STATUS_PAGE) {
		const struct peer *p = srv->peers[ss->next++];
		struct board_peer *bp = &ss->other[n];
		const char *state;

		if (!status_request_wants(&ss->rq, p->cfg->name))
			continue;
		state = peer_state(srv, p, &bp);
		status_peer_fill(srv, &sp[n], p, state, bp, ss->listeners[n]);
		n++;
	}
	status_render_peers(&ss->r, out, sp, n);
	if (ss->next < srv->npeers)
		return true;
	status_render_end(&ss->r, out);
	return false;
}

/* The server's status now; `now` holds every part `now->st` points to.
 * With `peers` (room for srv->npeers), every peer is in it too. */
static void
server_status(struct server *srv, struct server_status *now,
    struct status_peer *peers, struct board_peer *others)
{
	now->counters = srv->counters;
	admission_now(srv, &now->adm);
	now->st = (struct status){
		.role = "server",
		.tun = srv->has_tun ? srv->tun.name : NULL,
		.mtu = srv->cfg->mtu,
		.offloads = srv->has_tun ? srv->tun.offloads : 0,
		.counters = &now->counters,
		.peers = peers,
		.reloads = srv->reloads,
		.reloads_refused = srv->reloads_refused,
		.reload_generation = srv->reload_gen,
		.worker_reloads = now->wreload,
		.tickets = &now->tickets,
		.admission = &now->adm,
		.peer_counts = &now->counts,
	};
	now->counts = (struct status_peer_counts){ .configured = srv->npeers };
	state_server_stats(srv->state, &now->tickets);
	server_status_add_workers(srv, now);
	for (size_t k = 0; k < srv->npeers; k++) {
		struct peer *p = srv->peers[k];
		struct quic_conn *qc = p->sess != NULL ? p->sess->qc : NULL;
		struct board_peer *bp = others != NULL ? &others[k] : &now->other;
		const char *state = peer_state(srv, p, &bp);

		if (strcmp(state, "established") == 0)
			now->counts.established++;
		else if (strcmp(state, "handshaking") == 0)
			now->counts.handshaking++;
		else
			now->counts.closed++;
		if (qc != NULL && bp == NULL && (now->st.datagram_mtu == 0 ||
		    tunnel_inner_mtu(qc) < now->st.datagram_mtu))
			now->st.datagram_mtu = tunnel_inner_mtu(qc);
		if (peers != NULL)
			status_peer_fill(srv, &peers[now->st.npeers++], p, state, bp,
			    NULL);
	}
}

/* Metrics (MetricsListen, and "metrics" on the control socket): every
 * peer's figures copied now, sent in parts. */
struct metrics_scrape *
server_status_scrape(void *arg)
{
	struct server *srv = arg;
	struct status_peer *sp = xcalloc(srv->npeers ? srv->npeers : 1, sizeof *sp);
	struct board_peer *others = srv->board == NULL || srv->worker != 0 ? NULL :
	    xcalloc(srv->npeers ? srv->npeers : 1, sizeof *others);
	struct server_status now;
	struct metrics_scrape *ms;

	server_status(srv, &now, sp, others);
	ms = metrics_scrape_new(&now.st);
	free(others);
	free(sp);
	return ms;
}

static bool
scrape_more(struct evbuffer *out, void *arg)
{
	return metrics_scrape_next(arg, out);
}

static void
scrape_done(void *arg)
{
	metrics_scrape_free(arg);
}

/* Status (the control socket): the figures of the server and the counts
 * of peers by state now, then the peers by status_more. */
void
server_status_control_cb(struct evbuffer *out, const char *request, void *arg,
    struct control_more *more)
{
	struct server *srv = arg;
	struct server_status now;
	struct status_request rq;
	struct status_stream *ss;

	status_request_parse(request, &rq);
	if (rq.metrics) {
		*more = (struct control_more){ scrape_more, scrape_done,
		    server_status_scrape(srv) };
		return;
	}
	server_status(srv, &now, NULL, NULL);
	now.st.summary = rq.summary;
	ss = xcalloc(1, sizeof *ss);
	ss->srv = srv;
	ss->rq = rq;
	status_render_head(&ss->r, out, &now.st, rq.json);
	if (rq.summary) {
		status_render_end(&ss->r, out);
		free(ss);
		return;
	}
	*more = (struct control_more){ status_more, free, ss };
}

/* The status line a service manager shows (sd_notify STATUS=). */
void
server_notify(struct server *srv)
{
	char buf[ADDR_STRLEN], status[200];

	if (srv->shutting_down)
		return;
	snprintf(status, sizeof status, "%zu of %zu peers connected; "
	    "listening on %s%s", srv->nconnected, srv->npeers,
	    srv->nlisteners > 0 ?
	    addr_sockaddr_str((const struct sockaddr *)
	    &srv->listeners[0].sock.local, buf) : "-",
	    srv->nlisteners > 1 ? " and more" : "");
	notify_ready(status);
}

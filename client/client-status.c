/* rove's status: the control socket's answer (one peer, the server) and
 * the same figures for MetricsListen. */
#include <string.h>

#include "client-int.h"
#include "dns.h"
#include "forward.h"
#include "forward/udprelay.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "ops/status.h"
#include "transport/quic.h"
#include "tunnel/tunnel.h"

/* The client's status now; `cs` holds every part `cs->st` points to. */
struct client_status {
	struct status st;
	struct status_peer sp;
	struct status_listener listeners[STATUS_LISTENERS_MAX];
	struct status_dns sd;
	struct dns_status ds;
};

static void
client_status(struct client *c, struct client_status *cs)
{
	cs->sp = (struct status_peer){
		.name = "server",
		.public_key = c->cfg->server_pubkey,
		.state = c->qc != NULL && !c->configured &&
		    quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED ? "handshaking" :
		    c->qc != NULL ? status_state_name(c->qc) : "connecting",
		.allowed = c->routes,
		.nallowed = c->nroutes,
		/* Before a session: where the next one goes. */
		.remote = (struct sockaddr *)(c->cfg->transport ==
		    CFG_TRANSPORT_TCP ? &c->server_tcp : &c->server),
		.counters = &c->counters,
		.handshakes = c->handshakes,
		.latest_handshake = c->latest_handshake,
		.connection_id = c->qc != NULL ? quic_conn_id(c->qc) : NULL,
		.fwd_counters = forward_counters(c->fwd),
		.udp_counters = forward_udp(c->fwd)->set.counters,
		.udp_flows = c->qc != NULL ? &forward_udp(c->fwd)->set : NULL,
		.roam = c->roam,
		.fwds = forward_set(c->fwd),
	};
	if (c->proxy.kind != PROXY_NONE)
		cs->sp.proxy = c->proxy_str;
	cs->sp.listeners = cs->listeners;
	cs->sp.nlisteners = forward_listeners(c->fwd, c->configured,
	    cs->listeners, STATUS_LISTENERS_MAX);
	cs->sp.roam.keepalive_ms = c->keepalive_ms != 0 ? c->keepalive_ms :
	    (uint64_t)c->cfg->keepalive * 1000;
	cs->st = (struct status){
		.role = "client",
		.tun = c->tun_open ? c->tun.name : NULL,
		.tun_pending = c->tun_open ? NULL : c->cfg->tun,
		.addrs = c->addrs,
		.naddrs = c->naddrs,
		.counters = &c->counters,
		.peers = &cs->sp,
		.npeers = 1,
		.reloads = c->reloads,
		.reloads_refused = c->reloads_refused,
		.dns = &cs->sd,
	};
	dns_get_status(c->dns, &cs->ds);
	cs->sd = (struct status_dns){
		.state = dns_state_name(cs->ds.state),
		.backend = cs->ds.state == DNS_STATE_APPLIED ?
		    dns_backend_name(cs->ds.backend) : NULL,
		.servers = cs->ds.conf != NULL ? cs->ds.conf->servers : NULL,
		.nservers = cs->ds.conf != NULL ? cs->ds.conf->nservers : 0,
		.search = cs->ds.conf != NULL ? cs->ds.conf->search : NULL,
		.nsearch = cs->ds.conf != NULL ? cs->ds.conf->nsearch : 0,
		.error = cs->ds.error,
	};
	if (c->qc != NULL) {
		socklen_t len;

		cs->sp.remote = quic_conn_remote(c->qc, &len);
		cs->sp.local = quic_conn_local(c->qc, &len);
		if (quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED) {
			cs->sp.has_rx_idle = true;
			cs->sp.rx_idle_ms = quic_conn_rx_idle_ms(c->qc);
		}
		cs->sp.has_quic = true;
		cs->sp.via_proxy = quic_conn_is_tcp(c->qc) &&
		    quic_tcp_via_proxy(c->qc);
		quic_conn_get_stats(c->qc, &cs->sp.quic);
		if (c->rec != NULL) {
			cs->sp.has_recovery = true;
			recovery_get_stats(c->rec, &cs->sp.recovery);
		}
		cs->st.datagram_mtu = tunnel_inner_mtu(c->qc);
	}
	if (c->tun_open) {
		/* The MTU the server gave, as configured on the device. */
		cs->st.mtu = (unsigned)c->tun_mtu;
		cs->st.offloads = c->tun.offloads;
	}
}

/* One peer (the server): every answer is short enough to make at once. */
void
client_status_control_cb(struct evbuffer *out, const char *request, void *arg,
    struct control_more *more)
{
	struct client_status cs;
	struct status_request rq;

	(void)more;
	client_status(arg, &cs);
	status_request_parse(request, &rq);
	if (!rq.metrics && !status_request_wants(&rq, cs.sp.name))
		cs.st.npeers = 0;
	cs.st.summary = rq.summary;
	/* "metrics": the same figures for Prometheus (MetricsListen). */
	if (rq.metrics)
		metrics_render(out, &cs.st);
	else
		status_render(out, &cs.st, rq.json);
}

struct metrics_scrape *
client_status_scrape(void *arg)
{
	struct client_status cs;

	client_status(arg, &cs);
	return metrics_scrape_new(&cs.st);
}

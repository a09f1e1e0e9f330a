/* roved: accept QUIC connections, authenticate peers by pinned key, give
 * them addresses, and route IP packets between the TUN device and them.
 * This file makes the server and takes it down, and owns the TUN device;
 * server-int.h says which file owns the rest. */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "config/cfg-table.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "server-int.h"
#include "tun/tun-netlink.h"

/* A packet from the TUN goes to the peer that owns its destination. */
static void
route_read(uint8_t *buf, size_t n, const struct virtio_net_hdr *vh,
    const struct ippkt_info *info, void *arg)
{
	struct server *srv = arg;
	struct peer *peer;

	/* The kernel's own multicast on the TUN (MLD, solicitations) has
	 * nobody to reach: counted apart from packets with no route. */
	if (addr_is_multicast(&info->dst)) {
		tunnel_drop(TUNNEL_DROP_MULTICAST, NULL, &srv->counters);
		return;
	}
	peer = route_lookup(srv->routes, &info->dst);
	if (peer == NULL || peer->sess == NULL) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, peer != NULL ? &peer->counters :
		    NULL, &srv->counters);
		return;
	}
	/* A super-packet has one destination: route it once. */
	tunnel_send_read(peer->sess->qc, peer->sess->rec, vh, buf, n, info, &srv->tun,
	    &peer->counters, &srv->counters);
}

static void
tun_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;

	(void)fd;
	(void)what;
	tunnel_read(&srv->tun, &srv->counters, route_read, srv);
	server_flush(srv);
}

static int
setup_tun(struct server *srv, char **cause)
{
	char *name;
	int rv;

	if (srv->cfg->tun == NULL)
		return 0;
	/* Each worker has a TUN device of its own; the kernel's routes to
	 * each peer (peer_routes) pick the worker that owns its session. */
	if ((name = workers_name(srv->cfg->tun, "w", srv->worker,
	    IFNAMSIZ - 1)) == NULL) {
		xasprintf(cause, "Tun %s: too long for worker %u's device "
		    "(%sw%u)", srv->cfg->tun, srv->worker, srv->cfg->tun,
		    srv->worker);
		return -1;
	}
	rv = tun_open(&srv->tun, name, srv->cfg->offload == CFG_AUTO,
	    cause);
	free(name);
	if (rv != 0)
		return -1;
	srv->has_tun = true;
	tunnel_out_init(&srv->tun_out, &srv->tun, &srv->counters);
	/* The server's addresses (and its subnet's route) on worker 0's. */
	for (size_t i = 0; srv->worker == 0 && i < srv->cfg->naddrs; i++) {
		if (tun_netlink_add_address(srv->tun.ifindex, &srv->cfg->addrs[i], cause) != 0)
			return -1;
	}
	if (tun_netlink_set_mtu_up(srv->tun.ifindex, srv->cfg->mtu, cause) != 0)
		return -1;
	/* Site-to-site: the prefixes behind each peer go into the TUN; with
	 * workers, into the owner's when the peer connects. */
	for (size_t i = 0; srv->workers == NULL && i < srv->npeers; i++) {
		const struct cfg_peer *cp = srv->peers[i]->cfg;
		for (size_t k = 0; k < cp->allowed_ips.n; k++) {
			if (tun_netlink_add_route(srv->tun.ifindex, &cp->allowed_ips.v[k],
			    cause) != 0)
				return -1;
		}
	}
	srv->tun_ev = event_new(srv->base, srv->tun.fd, EV_READ | EV_PERSIST,
	    tun_read_cb, srv);
	event_add(srv->tun_ev, NULL);
	return 0;
}

/* Worker 0: another worker died; the kernel's steering no longer matches
 * the CIDs, so all stop (a service manager starts them again). */
static void
worker_died(void *arg)
{
	struct server *srv = arg;

	log_error("stopping every worker");
	server_shutdown(srv);
}

int
server_exit_status(const struct server *srv)
{
	return workers_failed(srv->workers) ? 1 : 0;
}

struct server *
server_create(struct event_base *base, const struct cfg *cfg, int verbose,
    char **cause)
{
	struct server *srv = xcalloc(1, sizeof *srv);
	struct udp_socket listen_est[CFG_MAX_LISTEN], listen_hs[CFG_MAX_LISTEN];
	static char logname[32];
	uint8_t priv[KEY_LEN];

	srv->base = base;
	srv->cfg = cfg;
	srv->sid = cfg->server_id;
	if (cfg->workers > 1) {
		int w;

		srv->sid.workers = (uint8_t)cfg->workers;
		/* Shared by all workers, so made before they fork; room for
		 * peers a reload adds. */
		if ((srv->board = board_create(2 * cfg->npeers + 64,
		    cfg->workers, CFG_MAX_FILE)) == NULL) {
			*cause = xstrdup("cannot make the workers' board");
			goto fail;
		}
		if ((w = workers_start(base, cfg, &srv->sid, listen_est,
		    listen_hs, &srv->workers, cause)) == -1)
			goto fail;
		srv->worker = (unsigned)w;
		srv->sid.worker = (uint8_t)w;
		for (size_t i = 0; i < cfg->nlisten; i++) {
			srv->listeners[i].sock = listen_est[i];
			srv->listeners[i].hs = listen_hs[i];
		}
		if (w > 0) {
			snprintf(logname, sizeof logname, "roved[w%d]", w);
			log_open(logname, verbose);
		}
		log_info("worker %u of %u", srv->worker, (unsigned)cfg->workers);
	}
	LIST_INIT(&srv->sessions);
	TAILQ_INIT(&srv->tcp_evictable);
	srv->cid_buckets = CID_BUCKETS_MIN;
	srv->cid_map = xcalloc(srv->cid_buckets, sizeof *srv->cid_map);
	session_set_server(srv);
	random_bytes((uint8_t *)&srv->cid_seed, sizeof srv->cid_seed);
	quic_set_send_limit_all(cfg->forward_memory_total);
	/* Kept in StateDir, so that after a restart clients still recognise
	 * our stateless resets and resume their sessions with 0-RTT. */
	/* Workers share their keys like the members of a group, through
	 * StateDir when there is no KeyDir; each keeps its own register. */
	srv->state = state_server_open_opts(cfg->state_dir, &(struct state_opts){
	    .base = base, .user = cfg->user != NULL ? cfg->uid : (uid_t)-1,
	    .key_dir = cfg->key_dir != NULL ? cfg->key_dir :
	    srv->workers != NULL ? cfg->state_dir : NULL,
	    .server_id = &srv->sid,
	    .peer_key = peer_key_by_prefix, .peer_key_arg = srv }, cause);
	if (srv->state == NULL)
		goto fail;
	admit_init(&srv->admit, cfg->retry_threshold, clock_now(), srv->state);
	srv->admit.server_id = &srv->sid;
	srv->wait_ev = event_new(srv->base, -1, 0, listener_wait_cb, srv);
	if (srv->board != NULL && srv->worker > 0) {
		srv->board_ev = event_new(srv->base, -1, EV_PERSIST,
		    server_status_board_cb, srv);
		event_add(srv->board_ev, &(struct timeval){
		    BOARD_REFRESH_MS / 1000, BOARD_REFRESH_MS % 1000 * 1000 });
	}
	srv->reset_rl = (struct log_ratelimit)LOG_RATELIMIT_INIT(1000, 200);
	srv->qs = (struct quic_settings){
		.role = QUIC_ROLE_SERVER,
		.cc = cfg->congestion == CFG_CC_BBR ? NGTCP2_CC_ALGO_BBR : NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = cfg->idle_timeout,
		.keepalive_s = cfg->keepalive,
		.max_udp_payload = UDP_MAX_PAYLOAD,
		.reset_secret = state_reset_secret(srv->state),
		.server_id = &srv->sid,
		.stream_window = cfg->forward_buffer,
		.early_data = cfg->zero_rtt,
		.verbose = verbose > 1,
		.qlog_dir = cfg->qlog_dir,
	};
	srv->routes = route_create();
	if ((srv->egress = egress_create(base, cause)) == NULL)
		goto fail;
	quic_set_pin_check(session_pin_check);
	if (tls_set_kex(cfg->key_exchange == CFG_KEX_CLASSIC ? TLS_KEX_CLASSIC :
	    cfg->key_exchange == CFG_KEX_PQ_REQUIRED ? TLS_KEX_PQ_REQUIRED :
	    TLS_KEX_HYBRID, cause) != 0)
		goto fail;
	if (key_load_private(cfg->private_key_file, priv, cause) != 0)
		goto fail;
	srv->tls = tls_ctx_create(TLS_ROLE_SERVER, priv, quic_tls_pin, cause);
	explicit_bzero(priv, sizeof priv);
	if (srv->tls == NULL)
		goto fail;
	tls_ctx_enable_resumption(srv->tls, TLS_ROLE_SERVER, cfg->zero_rtt);
	if (cfg->keylog_file != NULL &&
	    tls_ctx_set_keylog(srv->tls, cfg->keylog_file, cause) != 0)
		goto fail;
	if (cfg->qlog_dir != NULL)
		log_info("QlogDir: a qlog file per connection goes to %s",
		    cfg->qlog_dir);
	state_server_attach(srv->state, srv->tls);
	if (cfg->nlisten_tcp > 0) {
		if (key_load_private(cfg->private_key_file, priv, cause) != 0)
			goto fail;
		srv->tls_tcp = tls_ctx_create_tcp(TLS_ROLE_SERVER, priv,
		    quic_tls_pin, cause);
		explicit_bzero(priv, sizeof priv);
		if (srv->tls_tcp == NULL)
			goto fail;
		if (cfg->keylog_file != NULL &&
		    tls_ctx_set_keylog(srv->tls_tcp, cfg->keylog_file, cause) != 0)
			goto fail;
	}
	if (peer_setup(srv, cause) != 0 || listener_setup(srv, cause) != 0 ||
	    listener_setup_tcp(srv, cause) != 0 || setup_tun(srv, cause) != 0)
		goto fail;
	srv->control_path = workers_name(cfg->control_socket, ".", srv->worker,
	    SIZE_MAX);
	srv->control = control_create(base, srv->control_path,
	    server_status_control_cb, srv, cause);
	if (srv->control == NULL)
		goto fail;
	workers_watch(srv->workers, base, worker_died, srv);
	/* One process serves metrics: worker 0's (its own figures). */
	if (srv->worker == 0 && cfg->metrics_listen_len != 0 &&
	    (srv->metrics = metrics_create(base,
	    (const struct sockaddr *)&cfg->metrics_listen,
	    cfg->metrics_listen_len, cfg->metrics_connections,
	    server_status_scrape, srv, cause)) == NULL)
		goto fail;
	return srv;
fail:
	server_free(srv);
	return NULL;
}

int
server_reload_source(struct server *srv, char **buf, size_t *len)
{
	uint64_t gen;

	if (srv->worker == 0)
		return 0;
	if (!board_get_config(srv->board, &gen, buf, len)) {
		log_warn("SIGHUP: worker %u reloads what worker 0 applied, and "
		    "it applied nothing yet (send SIGHUP to worker 0)",
		    srv->worker);
		return -1;
	}
	if (gen == srv->reload_gen) {
		log_info("SIGHUP: worker %u has worker 0's configuration "
		    "already (generation %llu)", srv->worker,
		    (unsigned long long)gen);
		free(*buf);
		*buf = NULL;
		return -1;
	}
	log_info("SIGHUP: worker %u reloading worker 0's configuration "
	    "(generation %llu)", srv->worker, (unsigned long long)gen);
	srv->reload_loading = gen;
	return 1;
}

int
server_reload(struct server *srv, const struct cfg *next, const char *buf,
    size_t len)
{
	if (next == NULL || reload_apply(srv, next) != 0) {
		srv->reloads_refused++;
		if (srv->board != NULL)
			server_status_board_cb(-1, 0, srv);
		if (srv->worker > 0) {
			log_error("worker %u refused the configuration worker 0 "
			    "applied (generation %llu): stopping, so that no "
			    "worker keeps peers the others removed", srv->worker,
			    (unsigned long long)srv->reload_loading);
			server_shutdown(srv);
		}
		return -1;
	}
	srv->reloads++;
	if (srv->worker > 0) {
		srv->reload_gen = srv->reload_loading;
	} else if (srv->board != NULL) {
		/* Only what worker 0 applied goes to the others. */
		srv->reload_gen++;
		if (!board_put_config(srv->board, srv->reload_gen, buf, len))
			log_error("reload: the configuration is too large to "
			    "pass to the workers");
		workers_signal(srv->workers, SIGHUP);
	} else {
		srv->reload_gen++;
	}
	if (srv->board != NULL)
		server_status_board_cb(-1, 0, srv);
	server_notify(srv);
	server_flush(srv);
	return 0;
}

void
server_shutdown(struct server *srv)
{
	struct timeval grace = { 0, 100000 };
	struct session *sess, *next;
	bool tcp = false;

	srv->shutting_down = true;
	workers_signal(srv->workers, SIGTERM);
	for (sess = LIST_FIRST(&srv->sessions); sess != NULL; sess = next) {
		next = LIST_NEXT(sess, entry);
		tcp |= quic_conn_is_tcp(sess->qc);
		quic_conn_close(sess->qc, 0, "server shutting down");
	}
	server_flush(srv);
	/* The UDP closes have left (sent synchronously); a TCP-transport
	 * close may still sit in a socket the loop drains. Without one, exit
	 * at once: after a restart, clients come back only once the new
	 * roved has the port, so every millisecond here is theirs. */
	event_base_loopexit(srv->base, tcp || quic_tcp_lingering() ? &grace : NULL);
}

void
server_exit(struct server *srv)
{
	/* Freeing 10,000 sessions one by one takes a fifth of a second, and
	 * a restarting server's clients wait for the port through all of
	 * it. What outlives the process is undone here: the worker
	 * processes, the control socket's path, packets still bound for the
	 * TUN; the kernel takes the rest (descriptors, memory). The server
	 * stays reachable from the pin check (session_set_server). */
	workers_free(srv->workers);
	srv->workers = NULL;
	control_free(srv->control);
	srv->control = NULL;
	if (srv->has_tun)
		tunnel_flush(&srv->tun_out);
}

void
server_free(struct server *srv)
{
	struct session *sess;

	if (srv == NULL)
		return;
	workers_free(srv->workers);
	while ((sess = LIST_FIRST(&srv->sessions)) != NULL)
		session_free(sess);
	quic_tcp_linger_clear();
	if (srv->wait_ev != NULL)
		event_free(srv->wait_ev);
	if (srv->board_ev != NULL)
		event_free(srv->board_ev);
	board_free(srv->board);
	admit_clear(&srv->admit);
	control_free(srv->control);
	free(srv->control_path);
	metrics_free(srv->metrics);
	for (size_t i = 0; i < srv->nlisteners; i++) {
		if (srv->listeners[i].ev != NULL)
			event_free(srv->listeners[i].ev);
		if (srv->listeners[i].hs_ev != NULL)
			event_free(srv->listeners[i].hs_ev);
		udp_close(&srv->listeners[i].sock);
		udp_close(&srv->listeners[i].hs);
	}
	for (size_t i = 0; i < srv->ntcp_listeners; i++) {
		accept_guard_free(&srv->tcp_listeners[i].guard);
		event_free(srv->tcp_listeners[i].ev);
		close(srv->tcp_listeners[i].fd);
	}
	if (srv->tls_tcp != NULL)
		wolfSSL_CTX_free(srv->tls_tcp);
	if (srv->tun_ev != NULL)
		event_free(srv->tun_ev);
	if (srv->has_tun) {
		tunnel_flush(&srv->tun_out);
		tunnel_out_clear(&srv->tun_out);
		tun_close(&srv->tun);
	}
	route_free(srv->routes);
	egress_free(srv->egress);
	state_server_free(srv->state);
	if (srv->tls != NULL)
		wolfSSL_CTX_free(srv->tls);
	for (size_t i = 0; i < srv->npeers; i++)
		peer_free(srv->peers[i]);
	free(srv->peers);
	keyidx_clear(&srv->keys);
	free(srv->cid_map);
	session_set_server(NULL);
	free(srv);
}

/* rove: one QUIC connection to roved, the TUN device it configures, and
 * reconnection with exponential back-off and jitter. */
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/hash.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "client.h"
#include "dns.h"
#include "forward.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "ops/notify.h"
#include "ops/status.h"
#include "transport/quic.h"
#include "transport/state.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "tun/tun-monitor.h"
#include "tun/tun-netlink.h"
#include "tun/tun.h"
#include "tunnel/tunnel.h"
#include "wire/proto.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000
#define MAX_ROUTES (PROTO_MAX_ROUTES + 64)
/* Transport = auto. TLS over TCP joins the race when QUIC's handshake has
 * heard nothing for RACE_AFTER_MS, or when an established QUIC session's
 * packets have gone unacknowledged for STALL_MS. While on TCP, a QUIC
 * handshake probes UDP, PROBE_WAIT_MS each, PROBE_MIN_MS apart at first,
 * doubling to PROBE_MAX_MS. */
#define TRANSPORT_CHECK_MS 250
#define RACE_AFTER_MS 1000
#define STALL_MS 2000
#define PROBE_WAIT_MS 3000
#define PROBE_MIN_MS 2000
#define PROBE_MAX_MS 16000

/* Application close codes of the protocol (docs/PROTOCOL.md). */
#define APP_ERR_NOT_ALLOWED 3

/* One UDP socket, connected to the server: one local end of a path. */
struct csock {
	struct client *c;
	struct udp_socket sock;
	struct udp_batch batch;
	struct event *ev;
	uint64_t opened_ms;
};

struct client {
	struct event_base *base;
	const struct cfg *cfg;
	WOLFSSL_CTX *tls;
	WOLFSSL_CTX *tls_tcp;    /* TLS over TCP (Transport = tcp or auto) */
	struct quic_settings qs;
	uint8_t reset_secret[QUIC_RESET_SECRET_LEN];
	/* The server's NEW_TOKEN token: the next connection presents it, so
	 * a server under load admits it without a Retry round trip. Kept in
	 * memory: reconnects are what it is for. */
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	size_t tokenlen;

	struct sockaddr_storage server;
	socklen_t serverlen;
	struct ipaddr server_ip;
	struct sockaddr_storage server_tcp;  /* ServerTCP, resolved */
	socklen_t server_tcplen;

	struct csock *sock;      /* the socket of the current path */
	struct csock *old_sock;  /* the previous one, while migrating */
	struct quic_conn *qc;    /* the session */
	/* Transport = auto: TLS over TCP racing QUIC or taking over from a
	 * stalled one; and, while on TCP, a QUIC handshake probing UDP with
	 * its own socket. Either becomes `qc` when it completes. */
	struct quic_conn *alt;
	struct quic_conn *probe;
	struct csock *probe_sock;
	struct event *transport_ev;
	struct event *probe_ev;
	unsigned probes;         /* since the move to TCP, for the back-off */
	unsigned alt_failures;   /* TLS over TCP attempts failed in a row */
	uint64_t alt_not_before; /* clock_now_ms(): no attempt before */
	uint8_t ctl[PROTO_MAX_MSG + 16];
	size_t ctllen;
	bool configured;     /* the server's configuration arrived */
	bool ctl_open;       /* stream 0, the control stream, is opened */

	struct tun tun;
	struct tunnel_out tun_out; /* the TUN's write side, coalescing */
	int tun_clone;     /* /dev/net/tun, opened at start; -1 once attached */
	bool tun_open;
	struct event *tun_ev;
	struct prefix addrs[2];
	size_t naddrs;
	uint32_t tun_mtu;
	struct prefix routes[MAX_ROUTES]; /* installed through the TUN */
	size_t nroutes;
	bool host_route;
	struct tun_netlink_path host_path;

	struct tunnel_counters counters;
	uint64_t handshakes;
	uint64_t reloads, reloads_refused;
	unsigned failures;   /* consecutive, for the back-off */
	struct event *reconnect_ev;
	struct control *control;
	struct metrics *metrics;    /* MetricsListen; NULL: off */
	struct forward *fwd;
	struct dns *dns;            /* the server's DNS on the resolver */
	bool stopping;
	int exit_status;
	uint8_t presented_key[KEY_LEN];
	bool have_presented_key;

	char session_id[17];     /* names this server's remembered session */
	struct tun_monitor *monitor;
	struct event *path_ev;   /* debounced path check after netlink news */
	bool link_event;         /* a link changed since the last check */
	bool path_down;          /* at the last check: no route to the server,
	                          * or its link down or without carrier */
	struct status_roam roam;
};

static void connect_server(struct client *);
static void schedule_probe(struct client *);
static void start_alt(struct client *, const char *why);
static void csock_free(struct csock *);

/* `next`, established, becomes the session in place of the current one,
 * which closes. Forwards cannot move with it: they are reset, as on a
 * reconnect, and new ones open on `next`. The TUN stays. */
static void
switch_session(struct client *c, struct quic_conn *next)
{
	struct quic_conn *old = c->qc;

	forward_detach(c->fwd);
	c->qc = next;
	c->configured = false;
	c->ctl_open = false;
	c->ctllen = 0;
	if (old != NULL)
		quic_conn_close(old, 0, "the session moved to another transport");
}

/* A session that completed its handshake: the one in use, or one of the
 * auto transport's candidates, which takes over. False: `qc` is not to
 * be used (it is closing). */
static bool
take_session(struct client *c, struct quic_conn *qc)
{
	if (qc == c->probe) {
		struct csock *ps = c->probe_sock;

		log_info("UDP gets through again: the session moves back to QUIC");
		c->roam.quic_returns++;
		c->probe = NULL;
		c->probe_sock = NULL;
		evtimer_del(c->probe_ev);
		switch_session(c, qc);
		csock_free(c->old_sock);
		c->old_sock = NULL;
		csock_free(c->sock);
		c->sock = ps;
		return true;
	}
	if (qc == c->alt) {
		c->alt = NULL;
		/* QUIC came through meanwhile, and works: it is preferred. */
		if (c->qc != NULL && !quic_conn_is_tcp(c->qc) &&
		    quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED &&
		    quic_conn_ack_silence_ms(c->qc) < STALL_MS) {
			quic_conn_close(qc, 0, "QUIC works");
			return false;
		}
		log_info("the session moves to TLS over TCP (%s:%u)",
		    c->cfg->server_tcp_host, (unsigned)c->cfg->server_tcp_port);
		c->roam.tcp_fallbacks++;
		c->alt_failures = 0;
		switch_session(c, qc);
		c->probes = 0;
		schedule_probe(c);
		return true;
	}
	/* QUIC answered while TCP was still connecting: QUIC wins. */
	if (c->alt != NULL) {
		struct quic_conn *alt = c->alt;

		c->alt = NULL;
		quic_conn_close(alt, 0, "QUIC works");
	}
	return true;
}

static bool
pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct client *c = arg;

	(void)qc;
	memcpy(c->presented_key, pub, KEY_LEN);
	c->have_presented_key = true;
	return memcmp(pub, c->cfg->server_pubkey, KEY_LEN) == 0;
}

/* Streams may be opened now (0-RTT keys are in place, or the handshake
 * completed): forwards need not wait for the server's configuration.
 * The control stream must be stream 0, so it is opened first, even
 * though its CLIENT_HELLO waits for the handshake. */
static int
open_streams(struct client *c)
{
	if (!c->ctl_open) {
		if (quic_conn_open_stream(c->qc, NULL) != 0)
			return -1;
		c->ctl_open = true;
	}
	if (forward_set(c->fwd) == NULL)
		forward_attach(c->fwd, c->qc);
	return 0;
}

static void
handshake_done_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;
	struct proto_client_hello hello = { PROTO_VERSION, PROTO_FEATURES };
	struct quic_conn_stats st;
	uint8_t buf[64];
	size_t n;

	if (!take_session(c, qc))
		return;
	c->handshakes++;
	quic_conn_get_stats(qc, &st);
	if (st.early_attempted) {
		c->roam.zero_rtt_attempted++;
		if (st.early_accepted)
			c->roam.zero_rtt_accepted++;
		else
			c->roam.zero_rtt_rejected++;
	}
	n = proto_encode_client_hello(buf, sizeof buf, &hello);
	if (open_streams(c) != 0 || n == 0 ||
	    quic_conn_stream_send(qc, 0, buf, n, false) != 0) {
		quic_conn_close(qc, 1, "cannot open the control stream");
		return;
	}
	fwd_set_handshake_done(forward_set(c->fwd), st.early_accepted);
}

static bool
prefix_equal(const struct prefix *a, const struct prefix *b)
{
	return a->len == b->len && addr_equal(&a->addr, &b->addr);
}

/* Install one route through the TUN unless an address already implies it
 * or it is installed. */
static void
add_route(struct client *c, const struct prefix *p)
{
	struct prefix net = *p;
	char buf[ADDR_STRLEN];
	char *cause = NULL;

	addr_prefix_mask(&net);
	for (size_t i = 0; i < c->naddrs; i++) {
		struct prefix own = c->addrs[i];
		addr_prefix_mask(&own);
		if (prefix_equal(&own, &net))
			return;
	}
	for (size_t i = 0; i < c->nroutes; i++) {
		if (prefix_equal(&c->routes[i], &net))
			return;
	}
	if (c->nroutes == MAX_ROUTES)
		return;
	if (tun_netlink_add_route(c->tun.ifindex, &net, &cause) != 0) {
		log_warn("route %s: %s", addr_prefix_str(&net, buf), cause);
		free(cause);
		return;
	}
	c->routes[c->nroutes++] = net;
}

/* When a tunnel route would capture the path to the server itself, pin the
 * server's address to the path it has now. */
static void
protect_server_path(struct client *c, const struct prefix *routes, size_t n)
{
	char *cause = NULL;
	bool covered = false;

	for (size_t i = 0; i < n; i++)
		covered |= addr_prefix_contains(&routes[i], &c->server_ip);
	if (!covered || c->host_route)
		return;
	if (tun_netlink_get_route(&c->server_ip, &c->host_path, &cause) != 0 ||
	    tun_netlink_add_host_route(&c->server_ip, &c->host_path, &cause) != 0) {
		log_warn("cannot keep the server reachable outside the tunnel: %s", cause);
		free(cause);
		return;
	}
	c->host_route = true;
}

static void tun_read_cb(evutil_socket_t, short, void *);

static int
bring_up(struct client *c, const struct proto_server_config *sc, char **cause)
{
	struct prefix all[PROTO_MAX_ROUTES + 64];
	size_t nall = 0;
	char buf[ADDR_STRLEN];
	int fd;

	for (size_t i = 0; i < sc->nroutes; i++)
		all[nall++] = sc->routes[i];
	for (size_t i = 0; i < c->cfg->routes.n && nall < sizeof all / sizeof all[0]; i++)
		all[nall++] = c->cfg->routes.v[i];
	protect_server_path(c, all, nall);
	/* tun_attach owns the clone fd from here, whatever happens. */
	fd = c->tun_clone;
	c->tun_clone = -1;
	if (tun_attach(&c->tun, fd, c->cfg->tun,
	    c->cfg->offload == CFG_OFFLOAD_AUTO, cause) != 0)
		return -1;
	c->tun_open = true;
	c->tun_mtu = sc->mtu;
	c->naddrs = sc->naddrs;
	memcpy(c->addrs, sc->addrs, sizeof c->addrs);
	for (size_t i = 0; i < c->naddrs; i++) {
		if (tun_netlink_add_address(c->tun.ifindex, &c->addrs[i], cause) != 0)
			return -1;
	}
	if (tun_netlink_set_mtu_up(c->tun.ifindex, sc->mtu, cause) != 0)
		return -1;
	for (size_t i = 0; i < nall; i++)
		add_route(c, &all[i]);
	c->tun_ev = event_new(c->base, c->tun.fd, EV_READ | EV_PERSIST, tun_read_cb, c);
	event_add(c->tun_ev, NULL);
	log_info("tunnel up on %s: address %s%s, mtu %u", c->tun.name,
	    c->naddrs ? addr_prefix_str(&c->addrs[0], buf) : "none",
	    c->naddrs > 1 ? " (and IPv6)" : "", (unsigned)sc->mtu);
	return 0;
}

/* The service manager learns we are up (READY, the first time) and over
 * which path; `what` says how far the session is. */
static void
client_notify(struct client *c, const char *what)
{
	char local[ADDR_STRLEN], status[256];

	snprintf(status, sizeof status, "%s: %s:%u from %s%s%s", what,
	    c->cfg->server_host, (unsigned)c->cfg->server_port,
	    c->sock != NULL ? addr_sockaddr_str((const struct sockaddr *)
	    &c->sock->sock.local, local) : "-", c->tun_open ? ", tunnel on " : "",
	    c->tun_open ? c->tun.name : "");
	notify_ready(status);
}

/* The server's DNS servers and search domains, for the TUN device. */
static void
client_dns(struct client *c, const struct proto_server_config *sc)
{
	struct dns_config dc;

	memset(&dc, 0, sizeof dc);
	dc.nservers = sc->ndns;
	memcpy(dc.servers, sc->dns, sc->ndns * sizeof dc.servers[0]);
	dc.nsearch = sc->ndns_search;
	memcpy(dc.search, sc->dns_search, sc->ndns_search * sizeof dc.search[0]);
	dns_apply(c->dns, c->tun.name, c->tun.ifindex, &dc);
}

static bool
addr_listed(const struct prefix *a, const struct prefix *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (prefix_equal(a, &l[i]))
			return true;
	}
	return false;
}

/* The server gave other addresses (a reload there changed them, seen on
 * the live connection or on a reconnect): the TUN takes them in place of
 * the old, which go first so that an IPv4 address never becomes the
 * secondary of one about to be removed. The routes through the TUN are
 * restored after. */
static void
change_addresses(struct client *c, const struct proto_server_config *sc)
{
	char buf[ADDR_STRLEN], *cause = NULL;

	for (size_t i = 0; i < c->naddrs; i++) {
		if (addr_listed(&c->addrs[i], sc->addrs, sc->naddrs))
			continue;
		if (tun_netlink_del_address(c->tun.ifindex, &c->addrs[i], &cause) != 0) {
			log_warn("%s", cause);
			free(cause);
			cause = NULL;
		}
	}
	for (size_t i = 0; i < sc->naddrs; i++) {
		if (addr_listed(&sc->addrs[i], c->addrs, c->naddrs))
			continue;
		if (tun_netlink_add_address(c->tun.ifindex, &sc->addrs[i], &cause) != 0) {
			log_warn("%s", cause);
			free(cause);
			cause = NULL;
		}
	}
	/* Removing a family's last address took that family's routes
	 * through the TUN with it: put ours back (those still there answer
	 * "exists"). */
	for (size_t i = 0; i < c->nroutes; i++) {
		if (tun_netlink_add_route(c->tun.ifindex, &c->routes[i], &cause) != 0) {
			log_debug("%s", cause);
			free(cause);
			cause = NULL;
		}
	}
	c->naddrs = sc->naddrs;
	memcpy(c->addrs, sc->addrs, sizeof c->addrs);
	log_info("the server changed this client's address: now %s%s",
	    c->naddrs ? addr_prefix_str(&c->addrs[0], buf) : "none",
	    c->naddrs > 1 ? " (and IPv6)" : "");
}

static int
apply_config(struct client *c, const uint8_t *body, size_t len)
{
	struct proto_server_config sc;
	char *cause = NULL;
	/* Another one on the same connection: the server's configuration
	 * was reloaded and our addresses changed. */
	bool update = c->configured;
	bool same;

	if (proto_decode_server_config(body, len, &sc) != 0)
		return -1;
	if (sc.mtu < IPPKT_MIN_MTU4 || sc.mtu > 65535) {
		log_error("the server sent an impossible MTU %u", (unsigned)sc.mtu);
		return -1;
	}
	for (size_t i = 0; i < sc.naddrs; i++) {
		if (sc.addrs[i].addr.family == AF_INET6 && sc.mtu < IPPKT_MIN_MTU6) {
			log_error("the server sent MTU %u, below IPv6's minimum",
			    (unsigned)sc.mtu);
			return -1;
		}
	}
	c->configured = true;
	c->failures = 0;
	if (!update) {
		forward_server_features(c->fwd, sc.features);
		forward_remote_request(c->fwd, c->qc);
	}
	if (c->cfg->tun == NULL) {
		if (update)
			return 0;
		log_info("connected (forward-only mode)");
		client_notify(c, "connected (forward-only)");
		return 0;
	}
	if (c->tun_open) {
		/* A reconnect: the TUN and its routes stay as they were, so
		 * applications never see the interface go away; only
		 * addresses the server changed are replaced. */
		same = sc.naddrs == c->naddrs;
		for (size_t i = 0; same && i < sc.naddrs; i++)
			same = addr_listed(&sc.addrs[i], c->addrs, c->naddrs);
		if (!same)
			change_addresses(c, &sc);
		if (update)
			return 0;
		/* Its DNS may have changed meanwhile (the same does nothing). */
		client_dns(c, &sc);
		log_info("connection re-established");
		client_notify(c, "connected");
		return 0;
	}
	if (bring_up(c, &sc, &cause) != 0) {
		log_error("cannot bring the tunnel up: %s", cause);
		free(cause);
		c->exit_status = 1;
		client_shutdown(c);
		return 0;
	}
	/* Before READY: once the unit is up, so are its names. */
	client_dns(c, &sc);
	client_notify(c, "connected");
	return 0;
}

static int
stream_data_cb(struct quic_conn *qc, int64_t stream_id, const uint8_t *data,
    size_t len, bool fin, void *stream_arg, void *arg)
{
	struct client *c = arg;
	const uint8_t *body;
	uint64_t type;
	size_t bodylen;
	long used;

	if (stream_id != 0) {
		struct fwd_set *set = forward_set(c->fwd);

		if (set == NULL) {
			quic_conn_stream_consume(qc, stream_id, len);
			quic_conn_stream_reset(qc, stream_id, PROTO_FWD_ERR_UNREACHABLE);
			return 0;
		}
		return fwd_on_data(set, stream_id, stream_arg, data, len, fin);
	}
	if (len > sizeof c->ctl - c->ctllen)
		return -1;
	memcpy(c->ctl + c->ctllen, data, len);
	c->ctllen += len;
	quic_conn_stream_consume(qc, stream_id, len);
	while ((used = proto_msg_next(c->ctl, c->ctllen, &type, &body, &bodylen)) > 0) {
		if (type == PROTO_MSG_SERVER_CONFIG) {
			if (apply_config(c, body, bodylen) != 0)
				return -1;
		} else if (type == PROTO_MSG_REMOTE_FORWARD_REPLY) {
			if (forward_control(c->fwd, type, body, bodylen) != 0)
				return -1;
		} else if (type == PROTO_MSG_ERROR) {
			struct proto_error e;
			char text[4 * sizeof e.text];

			/* The text is the server's to choose: escaped, it
			 * can neither drive the terminal nor forge lines.
			 * The code goes first so a long text cannot cut
			 * it off the line. */
			if (proto_decode_error(body, bodylen, &e) == 0) {
				log_escape(text, sizeof text, e.text, strlen(e.text));
				log_error("server error %llu: %s",
				    (unsigned long long)e.code, text);
			}
		}
		memmove(c->ctl, c->ctl + used, c->ctllen - (size_t)used);
		c->ctllen -= (size_t)used;
	}
	return used < 0 ? -1 : 0;
}

static void
datagram_cb(struct quic_conn *qc, const uint8_t *data, size_t len, void *arg)
{
	struct client *c = arg;
	struct ippkt_info info;
	const uint8_t *pkt;
	size_t pktlen;

	(void)qc;
	if (tunnel_decode(data, len, &pkt, &pktlen, &info, NULL, &c->counters) != 0)
		return;
	if (!c->tun_open) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, NULL, &c->counters);
		return;
	}
	tunnel_deliver(&c->tun_out, pkt, pktlen, NULL);
}

static void
reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	connect_server(arg);
}

/* Exponential back-off with jitter: 250 ms doubling to 30 s, each delay
 * drawn from [d/2, d] so that clients of a restarted server spread out. */
static void
schedule_reconnect(struct client *c)
{
	uint64_t d = BACKOFF_MIN_MS;
	uint32_t r;
	struct timeval tv;

	for (unsigned i = 0; i < c->failures && d < BACKOFF_MAX_MS; i++)
		d *= 2;
	if (d > BACKOFF_MAX_MS)
		d = BACKOFF_MAX_MS;
	random_bytes((uint8_t *)&r, sizeof r);
	d = d / 2 + r % (d / 2 + 1);
	c->failures++;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	log_info("reconnecting in %llu ms", (unsigned long long)d);
	notify_status("reconnecting to %s:%u (attempt %u)", c->cfg->server_host,
	    (unsigned)c->cfg->server_port, c->failures);
	evtimer_add(c->reconnect_ev, &tv);
}

/* A TLS alert (CRYPTO_ERROR 0x100 + alert) that says the server refused
 * our certificate, i.e. our key: retrying cannot help, so rove stops.
 * Any other alert (internal_error, or none at all) may be transient and
 * is retried like a lost connection. */
static bool
refusal_alert(uint64_t code)
{
	if (code < 0x100 || code >= 0x200)
		return false;
	switch (code - 0x100) {
	case 42:        /* bad_certificate */
	case 43:        /* unsupported_certificate */
	case 44:        /* certificate_revoked */
	case 45:        /* certificate_expired */
	case 46:        /* certificate_unknown */
	case 48:        /* unknown_ca: wolfSSL's answer to a refused pin */
	case 49:        /* access_denied */
	case 116:       /* certificate_required */
		return true;
	}
	return false;
}

/* Our key refused: retrying cannot help, on either transport. */
static bool
refused(const struct quic_close_info *ci)
{
	return ci->remote && ((ci->transport && refusal_alert(ci->code)) ||
	    (!ci->transport && ci->code == APP_ERR_NOT_ALLOWED));
}

/* A connection that is not the session ended: a candidate of the auto
 * transport that failed, or the session one replaced. Returns true when
 * that is all (false: a refusal, handled as for the session). */
static bool
other_closed(struct client *c, struct quic_conn *qc,
    const struct quic_close_info *ci)
{
	bool alt = qc == c->alt, probe = qc == c->probe;
	bool tcp = quic_conn_is_tcp(qc);

	if (alt)
		c->alt = NULL;
	if (probe) {
		c->probe = NULL;
		csock_free(c->probe_sock);
		c->probe_sock = NULL;
		evtimer_del(c->probe_ev);
	}
	quic_conn_free(qc);
	if (!alt && !probe) {
		/* A QUIC session left behind: its UDP socket goes too. */
		if (!tcp && c->qc != NULL && quic_conn_is_tcp(c->qc)) {
			csock_free(c->old_sock);
			c->old_sock = NULL;
			csock_free(c->sock);
			c->sock = NULL;
		}
		return true;
	}
	if (c->stopping) {
		if (c->qc == NULL && c->alt == NULL)
			event_base_loopexit(c->base, NULL);
		return true;
	}
	if (ci->pin_mismatch || refused(ci))
		return false;
	log_info("%s failed: %s", probe ? "QUIC probe" : "TLS over TCP",
	    ci->reason[0] ? ci->reason : "unknown reason");
	/* A server without ListenTCP refuses at once: do not ask again
	 * every TRANSPORT_CHECK_MS, but after 2 s, doubling to a minute. */
	if (alt) {
		uint64_t d = 2000;

		for (unsigned i = 0; i < c->alt_failures && d < 60000; i++)
			d *= 2;
		c->alt_failures++;
		c->alt_not_before = clock_now_ms() + (d < 60000 ? d : 60000);
	}
	if (c->qc == NULL)
		schedule_reconnect(c);   /* QUIC had given up already */
	else if (quic_conn_is_tcp(c->qc) && !evtimer_pending(c->probe_ev, NULL))
		schedule_probe(c);
	return true;
}

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	struct client *c = arg;
	char want[KEY_B64_LEN + 1], got[KEY_B64_LEN + 1];
	struct quic_close_info copy = *info; /* it lives in the connection */
	const struct quic_close_info *ci = &copy;

	if (qc != c->qc) {
		if (other_closed(c, qc, ci))
			return;
	} else {
		/* The next connection paces its first flight by this path's
		 * RTT. */
		struct quic_conn_stats st;

		quic_conn_get_stats(qc, &st);
		if (st.rtt_ms > 0 && !st.tcp)
			c->qs.initial_rtt_ns = (uint64_t)(st.rtt_ms * 1e6);
		/* Forwarded connections cannot survive their session. */
		forward_detach(c->fwd);
		quic_conn_free(c->qc);
		c->qc = NULL;
		c->configured = false;
		c->ctl_open = false;
		c->ctllen = 0;
		/* A probe belongs to the session over TCP. */
		if (c->probe != NULL) {
			quic_conn_free(c->probe);
			c->probe = NULL;
			csock_free(c->probe_sock);
			c->probe_sock = NULL;
		}
		evtimer_del(c->probe_ev);
	}
	if (c->stopping) {
		if (c->alt == NULL)
			event_base_loopexit(c->base, NULL);
		return;
	}
	if (ci->pin_mismatch) {
		key_encode(c->cfg->server_pubkey, want);
		key_encode(c->presented_key, got);
		log_error("server public key mismatch: expected %s, the server "
		    "presented %s; refusing to connect", want,
		    c->have_presented_key ? got : "none");
		c->exit_status = 1;
		event_base_loopexit(c->base, NULL);
		return;
	}
	if (refused(ci)) {
		log_error("rejected by the server (%s %llu): is this client's "
		    "public key configured there?", ci->transport ? "TLS alert" :
		    "error", (unsigned long long)(ci->transport ? ci->code - 0x100 :
		    ci->code));
		c->exit_status = 1;
		event_base_loopexit(c->base, NULL);
		return;
	}
	/* TLS over TCP is still trying: it decides what comes next. */
	if (c->alt != NULL) {
		log_info("QUIC gave up (%s); waiting for TLS over TCP",
		    ci->reason[0] ? ci->reason : "unknown reason");
		return;
	}
	log_warn("connection lost: %s%s", ci->remote ? "closed by server: " : "",
	    ci->reason[0] ? ci->reason : "unknown reason");
	c->roam.reconnects++;
	if (ci->stateless_reset) {
		/* The server restarted and told us so: come back at once
		 * (with 0-RTT); back off only if it is not there yet. */
		c->roam.stateless_resets++;
		c->failures = 0;
		connect_server(c);
		return;
	}
	schedule_reconnect(c);
}

static void path_validated_cb(struct quic_conn *, enum quic_path_result, const struct sockaddr *,
    const struct sockaddr *, void *);
static void new_session_cb(struct quic_conn *, const uint8_t *, size_t,
    const uint8_t *, size_t, void *);
static void ticket_spent_cb(struct quic_conn *, void *);
static struct udp_batch *batch_for_cb(struct quic_conn *, const ngtcp2_path *,
    void *);

static void
new_token_cb(struct quic_conn *qc, const uint8_t *token, size_t len, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (len == 0 || len > sizeof c->token)
		return;
	memcpy(c->token, token, len);
	c->tokenlen = len;
	c->qs.token = c->token;
	c->qs.tokenlen = c->tokenlen;
}

/* A burst over TCP brought packets: out to the TUN, coalesced. */
static void
input_done_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (c->tun_open)
		tunnel_flush(&c->tun_out);
}

static const struct quic_conn_cbs client_cbs = {
	.handshake_done = handshake_done_cb,
	.datagram = datagram_cb,
	.stream_data = stream_data_cb,
	.stream_reset = fwd_stream_reset,
	.stream_acked = fwd_stream_acked,
	.stream_close = fwd_stream_close,
	.closed = closed_cb,
	.path_validated = path_validated_cb,
	.new_session = new_session_cb,
	.ticket_spent = ticket_spent_cb,
	.new_token = new_token_cb,
	.batch_for = batch_for_cb,
	.input_done = input_done_cb,
};

static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static struct udp_recv r[UDP_RECV_BATCH];
	struct csock *cs = arg;
	struct client *c = cs->c;
	int got, rounds = 0;

	(void)fd;
	(void)what;
	/* Bounded so the TUN side gets its turn under load; a short batch
	 * means the socket is empty, so no call is spent learning that. */
	do {
		/* The probe's own socket feeds the probe. */
		struct quic_conn *qc = cs == c->probe_sock ? c->probe : c->qc;

		if (qc == NULL)
			break;
		got = udp_recv_many(&cs->sock, r, UDP_RECV_BATCH);
		/* An ICMP error says at once what a second of silence would:
		 * with Transport = auto, TCP need not wait for the race. */
		if ((got == -ECONNREFUSED || got == -EHOSTUNREACH ||
		    got == -ENETUNREACH) && cs == c->sock && qc == c->qc &&
		    c->cfg->transport == CFG_TRANSPORT_AUTO &&
		    quic_conn_state(qc) == QUIC_STATE_HANDSHAKING)
			start_alt(c, "UDP unreachable (ICMP)");
		for (int i = 0; i < got; i++) {
			for (size_t off = 0; off < r[i].len; off += r[i].segsize) {
				size_t seg = r[i].len - off < r[i].segsize ?
				    r[i].len - off : r[i].segsize;
				quic_conn_read(qc, &cs->sock,
				    (const struct sockaddr *)&r[i].peer, r[i].peerlen,
				    r[i].buf + off, seg, r[i].ecn);
			}
		}
	} while (got == UDP_RECV_BATCH && ++rounds < 8);
	/* The packets this batch delivered go to the TUN, coalesced. */
	if (c->tun_open)
		tunnel_flush(&c->tun_out);
	quic_write_dirty();
}

/* A new socket connected to the server: the kernel picks the local
 * address and port of today's path. */
static struct csock *
csock_open(struct client *c, char **cause)
{
	struct csock *cs = xcalloc(1, sizeof *cs);

	cs->c = c;
	if (udp_open(&cs->sock, c->server.ss_family, NULL, 0, cause) != 0) {
		free(cs);
		return NULL;
	}
	if (connect(cs->sock.fd, (struct sockaddr *)&c->server, c->serverlen) == -1) {
		xasprintf(cause, "connect: %s", strerror(errno));
		udp_close(&cs->sock);
		free(cs);
		return NULL;
	}
	cs->sock.locallen = sizeof cs->sock.local;
	getsockname(cs->sock.fd, (struct sockaddr *)&cs->sock.local, &cs->sock.locallen);
	udp_batch_init(&cs->batch, &cs->sock);
	cs->ev = event_new(c->base, cs->sock.fd, EV_READ | EV_PERSIST, udp_read_cb, cs);
	event_add(cs->ev, NULL);
	cs->opened_ms = clock_now_ms();
	return cs;
}

static void
csock_free(struct csock *cs)
{
	if (cs == NULL)
		return;
	event_free(cs->ev);
	udp_close(&cs->sock);
	free(cs);
}

static struct udp_batch *
batch_for_cb(struct quic_conn *qc, const ngtcp2_path *path, void *arg)
{
	struct client *c = arg;

	if (qc == c->probe && c->probe_sock != NULL)
		return &c->probe_sock->batch;
	if (c->old_sock != NULL && path->local.addrlen == c->old_sock->sock.locallen &&
	    memcmp(path->local.addr, &c->old_sock->sock.local, path->local.addrlen) == 0)
		return &c->old_sock->batch;
	return c->sock != NULL ? &c->sock->batch : NULL;
}

static void
new_session_cb(struct quic_conn *qc, const uint8_t *der, size_t derlen,
    const uint8_t *params, size_t paramslen, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (c->cfg->state_dir == NULL ||
	    state_client_save(c->cfg->state_dir, c->session_id, der, derlen, params,
	    paramslen) != 0)
		log_debug("cannot remember the session ticket in %s",
		    c->cfg->state_dir != NULL ? c->cfg->state_dir : "(none)");
}

static void
ticket_spent_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;

	(void)qc;
	if (c->cfg->state_dir != NULL)
		state_client_forget(c->cfg->state_dir, c->session_id);
}

static void
path_validated_cb(struct quic_conn *qc, enum quic_path_result res,
    const struct sockaddr *local, const struct sockaddr *remote, void *arg)
{
	struct client *c = arg;
	char buf[ADDR_STRLEN];

	(void)qc;
	(void)remote;
	if (res == QUIC_PATH_ABORTED) {
		log_debug("validation of the path from %s superseded",
		    addr_sockaddr_str(local, buf));
		return;
	}
	if (res == QUIC_PATH_FAILED) {
		log_warn("path from %s failed validation; staying on the old path",
		    addr_sockaddr_str(local, buf));
		/* ngtcp2 kept (or went back to) the old path, so its socket is
		 * the current one again. The failed socket stays as old_sock
		 * until the next move: a packet may still be in its batch. */
		if (c->old_sock != NULL && c->sock != NULL &&
		    memcmp(local, &c->sock->sock.local, c->sock->sock.locallen) == 0) {
			struct csock *failed = c->sock;
			c->sock = c->old_sock;
			c->old_sock = failed;
			quic_conn_set_batch(c->qc, &c->sock->batch);
		}
		return;
	}
	log_info("path from %s validated", addr_sockaddr_str(local, buf));
	if (c->configured)
		client_notify(c, "connected");
	/* The new path works: the old socket has served its purpose. */
	if (c->old_sock != NULL && (c->sock == NULL ||
	    memcmp(local, &c->old_sock->sock.local, c->old_sock->sock.locallen) != 0)) {
		csock_free(c->old_sock);
		c->old_sock = NULL;
	}
}

/* Packets may go once the server configured us, or, on a reconnect (the
 * TUN is up already), as soon as 0-RTT or 1-RTT keys allow. */
static bool
can_send(struct client *c)
{
	if (c->configured)
		return true;
	return c->tun_open && (quic_conn_early_ready(c->qc) ||
	    quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED);
}

static bool
is_multicast(const struct ipaddr *a)
{
	if (a->family == AF_INET)
		return (a->b[0] & 0xf0) == 0xe0 || (a->b[0] == 255 && a->b[1] == 255 &&
		    a->b[2] == 255 && a->b[3] == 255);
	return a->b[0] == 0xff;
}

/* A packet from the TUN goes to the server, if it may go now. */
static void
send_read(uint8_t *buf, size_t n, const struct virtio_net_hdr *vh,
    const struct ippkt_info *info, void *arg)
{
	struct client *c = arg;

	/* The tunnel is point-to-point: the kernel's own multicast
	 * (neighbour and router solicitations) has nobody to reach. */
	/* While reconnecting with 0-RTT, packets go in the first flight
	 * (DATAGRAMs only: replaying one is like a network duplicate). */
	if (c->qc == NULL || is_multicast(&info->dst) || !can_send(c)) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, NULL, &c->counters);
		return;
	}
	tunnel_send_read(c->qc, vh, buf, n, info, &c->tun, NULL, &c->counters);
}

static void
tun_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;

	(void)fd;
	(void)what;
	tunnel_read(&c->tun, &c->counters, send_read, c);
	quic_write_dirty();
}

static int
resolve(const char *host, uint16_t port, int socktype,
    struct sockaddr_storage *ss, socklen_t *len, char **cause)
{
	struct addrinfo hints = { .ai_socktype = socktype }, *res;
	char pbuf[8];
	int rv;

	snprintf(pbuf, sizeof pbuf, "%u", port);
	if ((rv = getaddrinfo(host, pbuf, &hints, &res)) != 0) {
		xasprintf(cause, "%s: %s", host, gai_strerror(rv));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int
resolve_server(struct client *c, char **cause)
{
	const struct cfg *cfg = c->cfg;
	uint16_t p;

	if (cfg->transport != CFG_TRANSPORT_TCP && resolve(cfg->server_host,
	    cfg->server_port, SOCK_DGRAM, &c->server, &c->serverlen, cause) != 0)
		return -1;
	if (cfg->transport != CFG_TRANSPORT_QUIC && resolve(cfg->server_tcp_host,
	    cfg->server_tcp_port, SOCK_STREAM, &c->server_tcp, &c->server_tcplen,
	    cause) != 0)
		return -1;
	/* Over TCP only, the TCP server is the one whose path to keep out
	 * of the tunnel. */
	if (cfg->transport == CFG_TRANSPORT_TCP) {
		memcpy(&c->server, &c->server_tcp, c->server_tcplen);
		c->serverlen = c->server_tcplen;
	}
	return addr_from_sockaddr((struct sockaddr *)&c->server, &c->server_ip, &p);
}

/* Transport = auto: TLS over TCP next to QUIC. */
static void
start_alt(struct client *c, const char *why)
{
	char *cause = NULL;

	if (c->alt != NULL || c->stopping || clock_now_ms() < c->alt_not_before)
		return;
	log_info("%s: trying TLS over TCP to %s:%u", why, c->cfg->server_tcp_host,
	    (unsigned)c->cfg->server_tcp_port);
	c->alt = quic_tcp_client_create(c->base, &c->qs, &client_cbs, c,
	    c->tls_tcp, (struct sockaddr *)&c->server_tcp, c->server_tcplen,
	    &cause);
	if (c->alt == NULL) {
		log_warn("TLS over TCP: %s", cause);
		free(cause);
		return;
	}
	quic_conn_set_send_limit(c->alt, c->cfg->forward_memory);
}

/* Transport = auto, every TRANSPORT_CHECK_MS: is QUIC getting through? */
static void
transport_check(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;

	(void)fd;
	(void)what;
	if (c->qc == NULL || quic_conn_is_tcp(c->qc) || c->alt != NULL)
		return;
	/* Happy eyeballs: no packet back yet, so TCP races QUIC. */
	if (quic_conn_state(c->qc) == QUIC_STATE_HANDSHAKING &&
	    quic_conn_rx_idle_ms(c->qc) >= RACE_AFTER_MS)
		start_alt(c, "no answer over UDP");
	/* UDP dropped mid-session: our packets go unacknowledged. */
	else if (quic_conn_state(c->qc) == QUIC_STATE_ESTABLISHED &&
	    quic_conn_ack_silence_ms(c->qc) >= STALL_MS)
		start_alt(c, "QUIC packets go unacknowledged");
}

/* While on TCP: a QUIC handshake on a socket of its own tells whether
 * UDP works again; one that gets no answer in PROBE_WAIT_MS is dropped
 * (it sent a few Initials), and the next waits twice as long. */
static void
probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { PROBE_WAIT_MS / 1000, (PROBE_WAIT_MS % 1000) * 1000 };
	struct client *c = arg;
	char *cause = NULL;

	(void)fd;
	(void)what;
	if (c->probe != NULL) {
		quic_conn_free(c->probe);
		c->probe = NULL;
		csock_free(c->probe_sock);
		c->probe_sock = NULL;
		schedule_probe(c);
		return;
	}
	if (c->qc == NULL || !quic_conn_is_tcp(c->qc) || c->stopping)
		return;
	if ((c->probe_sock = csock_open(c, &cause)) == NULL) {
		log_debug("QUIC probe: %s", cause);
		free(cause);
		schedule_probe(c);
		return;
	}
	c->probe = quic_conn_client_create(c->base, &c->qs, &client_cbs, c, c->tls,
	    &c->probe_sock->batch, (struct sockaddr *)&c->server, c->serverlen,
	    NULL, &cause);
	if (c->probe == NULL) {
		log_debug("QUIC probe: %s", cause);
		free(cause);
		csock_free(c->probe_sock);
		c->probe_sock = NULL;
		schedule_probe(c);
		return;
	}
	log_debug("probing QUIC (attempt %u)", c->probes);
	quic_conn_set_send_limit(c->probe, c->cfg->forward_memory);
	quic_conn_write(c->probe);
	udp_batch_flush(&c->probe_sock->batch);
	evtimer_add(c->probe_ev, &tv);
}

static void
schedule_probe(struct client *c)
{
	uint64_t d = PROBE_MIN_MS;
	struct timeval tv;

	if (c->cfg->transport != CFG_TRANSPORT_AUTO || c->stopping)
		return;
	for (unsigned i = 0; i < c->probes && d < PROBE_MAX_MS; i++)
		d *= 2;
	if (d > PROBE_MAX_MS)
		d = PROBE_MAX_MS;
	c->probes++;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	evtimer_add(c->probe_ev, &tv);
}

/* Transport = tcp: the session over TLS on TCP. */
static void
connect_tcp(struct client *c)
{
	char *cause = NULL;

	csock_free(c->old_sock);
	c->old_sock = NULL;
	csock_free(c->sock);
	c->sock = NULL;
	c->qc = quic_tcp_client_create(c->base, &c->qs, &client_cbs, c,
	    c->tls_tcp, (struct sockaddr *)&c->server_tcp, c->server_tcplen,
	    &cause);
	if (c->qc == NULL) {
		log_warn("cannot reach the server over TCP: %s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	quic_conn_set_send_limit(c->qc, c->cfg->forward_memory);
}

static void
connect_server(struct client *c)
{
	struct quic_resume resume = { .early_data = c->cfg->zero_rtt };
	uint8_t *session = NULL, *params = NULL;
	char *cause = NULL;

	if (c->cfg->transport == CFG_TRANSPORT_TCP) {
		connect_tcp(c);
		return;
	}
	csock_free(c->old_sock);
	c->old_sock = NULL;
	csock_free(c->sock);
	/* A fresh socket (and port) per attempt: a NAT that lost our old
	 * mapping treats us as new anyway. */
	if ((c->sock = csock_open(c, &cause)) == NULL) {
		log_warn("cannot reach the server: %s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	if (c->cfg->state_dir != NULL &&
	    state_client_load(c->cfg->state_dir, c->session_id, &session,
	    &resume.sessionlen, &params, &resume.paramslen) == 0) {
		resume.session = session;
		resume.params = params;
	}
	c->qc = quic_conn_client_create(c->base, &c->qs, &client_cbs, c, c->tls,
	    &c->sock->batch, (struct sockaddr *)&c->server, c->serverlen,
	    resume.session != NULL ? &resume : NULL, &cause);
	free(session);
	free(params);
	if (c->qc == NULL) {
		log_warn("%s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	quic_conn_set_send_limit(c->qc, c->cfg->forward_memory);
	quic_conn_write(c->qc);
	/* Writing the ClientHello installed the 0-RTT keys, if the ticket
	 * allows early data: held connections go in the first flight. */
	if (quic_conn_early_ready(c->qc) && open_streams(c) == 0)
		quic_conn_write(c->qc);
	udp_batch_flush(&c->sock->batch);
}

/* Has `a` (an address of ours) gone from the host? A socket cannot bind
 * to an address the host no longer has. */
static bool
local_address_gone(const struct sockaddr_storage *a, socklen_t len)
{
	struct sockaddr_storage probe;
	int fd, rv;

	memcpy(&probe, a, len);
	if (probe.ss_family == AF_INET)
		((struct sockaddr_in *)&probe)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&probe)->sin6_port = 0;
	if ((fd = socket(probe.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return false;
	rv = bind(fd, (struct sockaddr *)&probe, len);
	close(fd);
	return rv == -1 && errno == EADDRNOTAVAIL;
}

/* Netlink said something changed. If the way to the server now leaves
 * from another address, move the connection there. If the path came back
 * after an outage (the route was gone, or a link changed and our packets
 * go unanswered), move anyway, to a fresh socket: that probes at once
 * instead of waiting out the retransmission back-off. */
static void
check_path(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval path_retry = { 0, 500000 };
	struct client *c = arg;
	struct tun_netlink_path path;
	struct ipaddr cur;
	struct csock *cs;
	char *cause = NULL, buf[ADDR_STRLEN];
	bool probe, gone;
	uint16_t port;

	(void)fd;
	(void)what;
	if (c->qc == NULL) {
		c->link_event = false;
		c->path_down = false;
		/* Waiting to reconnect: a change may be the way back. */
		if (evtimer_pending(c->reconnect_ev, NULL) && !c->stopping) {
			evtimer_del(c->reconnect_ev);
			connect_server(c);
		}
		return;
	}
	if (quic_conn_state(c->qc) != QUIC_STATE_ESTABLISHED || c->sock == NULL)
		return;
	if (tun_netlink_get_route(&c->server_ip, &path, &cause) != 0 ||
	    tun_netlink_link_running(path.ifindex, &cause) != 1) {
		/* When the path comes back the connection needs its probe.
		 * The link's or route's own event should bring us here
		 * again; looking now and then as well means a missed or
		 * merged notification cannot leave the connection stranded. */
		if (!c->path_down)
			log_debug("no way to the server now: %s",
			    cause != NULL ? cause : "its link is down");
		free(cause);
		c->path_down = true;
		evtimer_add(c->path_ev, &path_retry);
		return;
	}
	/* Packets arriving prove little here: after an outage the server's
	 * may get through before our own route is back. */
	probe = c->path_down || (c->link_event && quic_conn_stalled(c->qc));
	c->link_event = false;
	c->path_down = false;
	if (addr_from_sockaddr((struct sockaddr *)&c->sock->sock.local, &cur, &port) != 0)
		return;
	gone = local_address_gone(&c->sock->sock.local, c->sock->sock.locallen);
	if (path.has_src && addr_equal(&path.src, &cur) && !gone && !probe) {
		log_debug("path to the server unchanged, from %s",
		    addr_sockaddr_str((struct sockaddr *)&c->sock->sock.local, buf));
		return;
	}
	if ((cs = csock_open(c, &cause)) == NULL) {
		log_warn("migration: %s", cause);
		free(cause);
		return;
	}
	/* Without the old address the old path is dead: switch now and
	 * validate on the way; else keep it until the new one proves itself. */
	if (quic_conn_migrate(c->qc, &cs->batch, gone || probe) != 0) {
		csock_free(cs);
		return;
	}
	c->roam.migrations++;
	log_info("migrating to %s%s", addr_sockaddr_str((struct sockaddr *)&cs->sock.local,
	    buf), gone ? " (old address gone)" : probe ? " (path back after an outage)" : "");
	csock_free(c->old_sock);
	c->old_sock = gone ? NULL : c->sock;
	if (gone)
		csock_free(c->sock);
	c->sock = cs;
	quic_write_dirty();
}

static void
monitor_cb(enum tun_monitor_event ev, void *arg)
{
	struct client *c = arg;
	struct timeval settle = { 0, 20000 };

	log_debug("netlink: %s change", tun_monitor_event_name(ev));
	/* Let a burst of changes (address, then route) settle first. */
	if (ev == TUN_MONITOR_LINK)
		c->link_event = true;
	evtimer_add(c->path_ev, &settle);
}

/* The client's status now; `cs` holds every part `cs->st` points to. */
struct client_status {
	struct status st;
	struct status_peer sp;
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
		.remote = (struct sockaddr *)&c->server,
		.counters = &c->counters,
		.handshakes = c->handshakes,
		.connection_id = c->qc != NULL ? quic_conn_id(c->qc) : NULL,
		.fwd_counters = forward_counters(c->fwd),
		.roam = c->roam,
		.fwds = forward_set(c->fwd),
	};
	cs->st = (struct status){
		.role = "client",
		.tun = c->tun_open ? c->tun.name : NULL,
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

		cs->sp.local = quic_conn_local(c->qc, &len);
		cs->sp.has_quic = true;
		quic_conn_get_stats(c->qc, &cs->sp.quic);
		cs->st.datagram_mtu = tunnel_inner_mtu(c->qc);
	}
	if (c->tun_open) {
		/* The MTU the server gave, as configured on the device. */
		cs->st.mtu = (unsigned)c->tun_mtu;
		cs->st.offloads = c->tun.offloads;
	}
}

/* One peer (the server): every answer is short enough to make at once. */
static void
status_cb(struct evbuffer *out, const char *request, void *arg,
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

static struct metrics_scrape *
metrics_cb(void *arg)
{
	struct client_status cs;

	client_status(arg, &cs);
	return metrics_scrape_new(&cs.st);
}

/* Sessions are remembered per server address and key. */
static void
session_id(struct client *c)
{
	uint8_t h[32];
	char *s;

	xasprintf(&s, "%s|%u|", c->cfg->server_host, c->cfg->server_port);
	{
		size_t n = strlen(s);
		uint8_t *buf = xmalloc(n + KEY_LEN);
		memcpy(buf, s, n);
		memcpy(buf + n, c->cfg->server_pubkey, KEY_LEN);
		wc_Sha256Hash(buf, (word32)(n + KEY_LEN), h);
		free(buf);
	}
	free(s);
	for (size_t i = 0; i < 8; i++)
		snprintf(c->session_id + 2 * i, 3, "%02x", h[i]);
}

struct client *
client_create(struct event_base *base, const struct cfg *cfg, int verbose,
    char **cause)
{
	struct client *c = xcalloc(1, sizeof *c);
	uint8_t priv[KEY_LEN];

	c->base = base;
	c->cfg = cfg;
	c->tun_clone = -1;
	tunnel_out_init(&c->tun_out, &c->tun, &c->counters);
	random_bytes(c->reset_secret, sizeof c->reset_secret);
	c->qs = (struct quic_settings){
		.role = QUIC_ROLE_CLIENT,
		.cc = cfg->congestion == CFG_CC_BBR ? NGTCP2_CC_ALGO_BBR : NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = cfg->idle_timeout,
		.keepalive_s = cfg->keepalive,
		.reset_secret = c->reset_secret,
		.stream_window = cfg->forward_buffer,
		.verbose = verbose > 1,
		.qlog_dir = cfg->qlog_dir,
	};
	quic_set_pin_check(pin_check);
	c->reconnect_ev = evtimer_new(base, reconnect_cb, c);
	c->probe_ev = evtimer_new(base, probe_cb, c);
	if (cfg->transport == CFG_TRANSPORT_AUTO) {
		struct timeval tv = { 0, TRANSPORT_CHECK_MS * 1000 };

		c->transport_ev = event_new(base, -1, EV_PERSIST, transport_check, c);
		event_add(c->transport_ev, &tv);
	}
	c->path_ev = evtimer_new(base, check_path, c);
	/* The TUN device itself comes up with the server's configuration,
	 * but its clone device may be root's alone: open it now, before
	 * daemon_main drops root (attaching needs only CAP_NET_ADMIN). */
	if (cfg->tun != NULL && (c->tun_clone = tun_clone_open(cause)) == -1)
		goto fail;
	if (key_load_private(cfg->private_key_file, priv, cause) != 0)
		goto fail;
	c->tls = tls_ctx_create(TLS_ROLE_CLIENT, priv, quic_tls_pin, cause);
	if (c->tls != NULL && cfg->transport != CFG_TRANSPORT_QUIC)
		c->tls_tcp = tls_ctx_create_tcp(TLS_ROLE_CLIENT, priv, quic_tls_pin,
		    cause);
	explicit_bzero(priv, sizeof priv);
	if (c->tls == NULL || (cfg->transport != CFG_TRANSPORT_QUIC &&
	    c->tls_tcp == NULL) || resolve_server(c, cause) != 0)
		goto fail;
	tls_ctx_enable_resumption(c->tls, TLS_ROLE_CLIENT, cfg->zero_rtt);
	if (cfg->keylog_file != NULL &&
	    (tls_ctx_set_keylog(c->tls, cfg->keylog_file, cause) != 0 ||
	    (c->tls_tcp != NULL &&
	    tls_ctx_set_keylog(c->tls_tcp, cfg->keylog_file, cause) != 0)))
		goto fail;
	if (cfg->qlog_dir != NULL)
		log_info("QlogDir: a qlog file per connection goes to %s",
		    cfg->qlog_dir);
	if ((c->fwd = forward_create(base, cfg, cause)) == NULL)
		goto fail;
	session_id(c);
	/* Roaming needs to hear about address, route and link changes; without
	 * a monitor the connection still works, it just cannot migrate. */
	if ((c->monitor = tun_monitor_create(base, monitor_cb, c, cause)) == NULL) {
		log_warn("no network monitor, no migration: %s", *cause);
		free(*cause);
		*cause = NULL;
	}
	/* A 1500-byte outer path less the IP and UDP headers. */
	c->qs.max_udp_payload = c->server.ss_family == AF_INET6 ? UDP_MAX_PAYLOAD6 :
	    UDP_MAX_PAYLOAD;
	c->control = control_create(base, cfg->control_socket, status_cb, c, cause);
	if (c->control == NULL)
		goto fail;
	if (cfg->metrics_listen_len != 0 && (c->metrics = metrics_create(base,
	    (const struct sockaddr *)&cfg->metrics_listen,
	    cfg->metrics_listen_len, metrics_cb, c, cause)) == NULL)
		goto fail;
	/* Before root is dropped: it undoes a crashed run's resolver
	 * changes and may fork the helper that makes new ones. */
	if ((c->dns = dns_create(cfg, cause)) == NULL)
		goto fail;
	connect_server(c);
	return c;
fail:
	client_free(c);
	return NULL;
}

void
client_shutdown(struct client *c)
{
	c->stopping = true;
	evtimer_del(c->reconnect_ev);
	evtimer_del(c->probe_ev);
	if (c->transport_ev != NULL)
		event_del(c->transport_ev);
	if (c->probe != NULL) {
		quic_conn_free(c->probe);
		c->probe = NULL;
	}
	if (c->alt != NULL)
		quic_conn_close(c->alt, 0, "client shutting down");
	if (c->qc == NULL) {
		if (c->alt == NULL)
			event_base_loopexit(c->base, NULL);
		return;
	}
	quic_conn_close(c->qc, 0, "client shutting down");
	quic_write_dirty();
}

void
client_free(struct client *c)
{
	char *cause = NULL;

	if (c == NULL)
		return;
	if (c->qc != NULL)
		quic_conn_free(c->qc);
	quic_conn_free(c->alt);
	quic_conn_free(c->probe);
	quic_tcp_linger_clear();
	csock_free(c->probe_sock);
	if (c->probe_ev != NULL)
		event_free(c->probe_ev);
	if (c->transport_ev != NULL)
		event_free(c->transport_ev);
	if (c->host_route &&
	    tun_netlink_del_host_route(&c->server_ip, &c->host_path, &cause) != 0) {
		log_warn("removing the host route to the server: %s", cause);
		free(cause);
	}
	if (c->tun_ev != NULL)
		event_free(c->tun_ev);
	/* While the device is there: resolved's link still has it. */
	dns_free(c->dns);
	/* Routes through the TUN vanish with the device. */
	if (c->tun_open) {
		tunnel_flush(&c->tun_out);
		tun_close(&c->tun);
	}
	tunnel_out_clear(&c->tun_out);
	if (c->tun_clone != -1)
		close(c->tun_clone);
	csock_free(c->sock);
	csock_free(c->old_sock);
	tun_monitor_free(c->monitor);
	if (c->path_ev != NULL)
		event_free(c->path_ev);
	if (c->reconnect_ev != NULL)
		event_free(c->reconnect_ev);
	control_free(c->control);
	metrics_free(c->metrics);
	forward_free(c->fwd);
	if (c->tls != NULL)
		wolfSSL_CTX_free(c->tls);
	if (c->tls_tcp != NULL)
		wolfSSL_CTX_free(c->tls_tcp);
	free(c);
}

int
client_reload(struct client *c, const struct cfg *next)
{
	if (next == NULL || forward_reload(c->fwd, next,
	    c->qc != NULL && c->configured ? c->qc : NULL) != 0) {
		c->reloads_refused++;
		return -1;
	}
	c->reloads++;
	if (c->qc != NULL)
		quic_write_dirty();
	return 0;
}

int
client_exit_status(const struct client *c)
{
	return c->exit_status;
}

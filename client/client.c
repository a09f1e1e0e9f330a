/* rove: one QUIC connection to roved, the TUN device it configures, and
 * reconnection with exponential back-off and jitter. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "control.h"
#include "forward.h"
#include "key.h"
#include "log.h"
#include "proto.h"
#include "quic.h"
#include "status.h"
#include "tls.h"
#include "tun-netlink.h"
#include "tun.h"
#include "tunnel.h"
#include "udp.h"
#include "xmalloc.h"

#define TUN_BURST 64
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000
#define MAX_ROUTES (PROTO_MAX_ROUTES + 64)

/* Application close codes of the protocol (docs/PROTOCOL.md). */
#define APP_ERR_NOT_ALLOWED 3

struct client {
	struct event_base *base;
	const struct cfg *cfg;
	WOLFSSL_CTX *tls;
	struct quic_settings qs;
	uint8_t reset_secret[QUIC_RESET_SECRET_LEN];

	struct sockaddr_storage server;
	socklen_t serverlen;
	struct ipaddr server_ip;

	struct udp_socket sock;
	struct udp_batch batch;
	struct event *udp_ev;
	struct quic_conn *qc;
	uint8_t ctl[PROTO_MAX_MSG + 16];
	size_t ctllen;
	bool configured;     /* the server's configuration arrived */

	struct tun tun;
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
	unsigned failures;   /* consecutive, for the back-off */
	struct event *reconnect_ev;
	struct control *control;
	struct forward *fwd;
	bool stopping;
	int exit_status;
	uint8_t presented_key[KEY_LEN];
	bool have_presented_key;
};

static void connect_server(struct client *);

static bool
pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct client *c = arg;

	(void)qc;
	memcpy(c->presented_key, pub, KEY_LEN);
	c->have_presented_key = true;
	return memcmp(pub, c->cfg->server_pubkey, KEY_LEN) == 0;
}

static void
handshake_done_cb(struct quic_conn *qc, void *arg)
{
	struct client *c = arg;
	struct proto_client_hello hello = { PROTO_VERSION, 0 };
	uint8_t buf[64];
	size_t n;
	int64_t sid;

	c->handshakes++;
	/* The control stream is the first bidirectional stream. */
	sid = quic_conn_open_stream(qc, NULL);
	n = proto_encode_client_hello(buf, sizeof buf, &hello);
	if (sid != 0 || n == 0 || quic_conn_stream_send(qc, sid, buf, n, false) != 0)
		quic_conn_close(qc, 1, "cannot open the control stream");
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

	for (size_t i = 0; i < sc->nroutes; i++)
		all[nall++] = sc->routes[i];
	for (size_t i = 0; i < c->cfg->routes.n && nall < sizeof all / sizeof all[0]; i++)
		all[nall++] = c->cfg->routes.v[i];
	protect_server_path(c, all, nall);
	if (tun_open(&c->tun, c->cfg->tun, cause) != 0)
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

static int
apply_config(struct client *c, const uint8_t *body, size_t len)
{
	struct proto_server_config sc;
	char *cause = NULL;

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
	forward_attach(c->fwd, c->qc);
	if (c->cfg->tun == NULL) {
		log_info("connected (forward-only mode)");
		return 0;
	}
	if (c->tun_open) {
		/* A reconnect: the TUN and its routes stay as they were, so
		 * applications never see the interface go away. */
		if (c->tun_open && (sc.naddrs != c->naddrs ||
		    memcmp(sc.addrs, c->addrs, sizeof sc.addrs[0] * sc.naddrs) != 0))
			log_warn("the server assigned different addresses; restart "
			    "rove to use them");
		log_info("connection re-established");
		return 0;
	}
	if (bring_up(c, &sc, &cause) != 0) {
		log_error("cannot bring the tunnel up: %s", cause);
		free(cause);
		c->exit_status = 1;
		client_shutdown(c);
		return 0;
	}
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
			if (proto_decode_error(body, bodylen, &e) == 0)
				log_error("server: %s (code %llu)", e.text,
				    (unsigned long long)e.code);
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
	tunnel_deliver(&c->tun, pkt, pktlen, NULL, &c->counters);
}

static void
stream_reset_cb(struct quic_conn *qc, int64_t sid, uint64_t code, void *sarg,
    void *arg)
{
	struct client *c = arg;

	(void)qc;
	(void)sid;
	if (forward_set(c->fwd) != NULL)
		fwd_on_reset(forward_set(c->fwd), sarg, code);
}

static void
stream_stop_cb(struct quic_conn *qc, int64_t sid, uint64_t code, void *sarg,
    void *arg)
{
	struct client *c = arg;

	(void)qc;
	(void)sid;
	if (forward_set(c->fwd) != NULL)
		fwd_on_stop(forward_set(c->fwd), sarg, code);
}

static void
stream_acked_cb(struct quic_conn *qc, int64_t sid, void *sarg, void *arg)
{
	struct client *c = arg;

	(void)qc;
	(void)sid;
	if (forward_set(c->fwd) != NULL)
		fwd_on_acked(forward_set(c->fwd), sarg);
}

static void
stream_close_cb(struct quic_conn *qc, int64_t sid, uint64_t code, void *sarg,
    void *arg)
{
	struct client *c = arg;

	(void)qc;
	(void)sid;
	if (forward_set(c->fwd) != NULL)
		fwd_on_close(forward_set(c->fwd), sarg, code);
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
	quic_random((uint8_t *)&r, sizeof r);
	d = d / 2 + r % (d / 2 + 1);
	c->failures++;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	log_info("reconnecting in %llu ms", (unsigned long long)d);
	evtimer_add(c->reconnect_ev, &tv);
}

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	struct client *c = arg;
	char want[KEY_B64_LEN + 1], got[KEY_B64_LEN + 1];
	struct quic_close_info copy = *info; /* it lives in the connection */
	const struct quic_close_info *ci = &copy;

	(void)qc;
	/* Forwarded connections cannot survive their QUIC connection. */
	forward_detach(c->fwd);
	quic_conn_free(c->qc);
	c->qc = NULL;
	c->configured = false;
	c->ctllen = 0;
	if (c->stopping) {
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
	if (ci->remote && ((ci->transport && ci->code >= 0x100 && ci->code < 0x200) ||
	    (!ci->transport && ci->code == APP_ERR_NOT_ALLOWED))) {
		log_error("rejected by the server (%s %llu): is this client's "
		    "public key configured there?", ci->transport ? "TLS alert" :
		    "error", (unsigned long long)(ci->transport ? ci->code - 0x100 :
		    ci->code));
		c->exit_status = 1;
		event_base_loopexit(c->base, NULL);
		return;
	}
	log_warn("connection lost: %s%s", ci->remote ? "closed by server: " : "",
	    ci->reason[0] ? ci->reason : "unknown reason");
	schedule_reconnect(c);
}

static const struct quic_conn_cbs client_cbs = {
	.handshake_done = handshake_done_cb,
	.datagram = datagram_cb,
	.stream_data = stream_data_cb,
	.stream_reset = stream_reset_cb,
	.stream_stop = stream_stop_cb,
	.stream_acked = stream_acked_cb,
	.stream_close = stream_close_cb,
	.closed = closed_cb,
};

static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static struct udp_recv r;
	struct client *c = arg;
	int rounds = 0;

	(void)fd;
	(void)what;
	while (rounds++ < 64 && c->qc != NULL && udp_recv(&c->sock, &r) == 1) {
		for (size_t off = 0; off < r.len && c->qc != NULL; off += r.segsize) {
			size_t seg = r.len - off < r.segsize ? r.len - off : r.segsize;
			quic_conn_read(c->qc, (const struct sockaddr *)&r.peer,
			    r.peerlen, r.buf + off, seg, r.ecn);
		}
	}
	quic_write_dirty();
	udp_batch_flush(&c->batch);
}

static bool
is_multicast(const struct ipaddr *a)
{
	if (a->family == AF_INET)
		return (a->b[0] & 0xf0) == 0xe0 || (a->b[0] == 255 && a->b[1] == 255 &&
		    a->b[2] == 255 && a->b[3] == 255);
	return a->b[0] == 0xff;
}

static void
tun_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static uint8_t buf[TUNNEL_BUF];
	struct client *c = arg;
	struct ippkt_info info;
	ssize_t n;

	(void)fd;
	(void)what;
	for (int i = 0; i < TUN_BURST; i++) {
		n = tun_read(&c->tun, buf + TUNNEL_HEADROOM, sizeof buf - TUNNEL_HEADROOM);
		if (n <= 0)
			break;
		if (ippkt_parse(buf + TUNNEL_HEADROOM, (size_t)n, &info) != IPPKT_OK) {
			tunnel_drop(TUNNEL_DROP_INVALID_PACKET, NULL, &c->counters);
			continue;
		}
		/* The tunnel is point-to-point: the kernel's own multicast
		 * (neighbour and router solicitations) has nobody to reach. */
		if (c->qc == NULL || !c->configured || is_multicast(&info.dst)) {
			tunnel_drop(TUNNEL_DROP_NO_ROUTE, NULL, &c->counters);
			continue;
		}
		tunnel_send(c->qc, buf, &info, &c->tun, NULL, &c->counters);
	}
	quic_write_dirty();
	udp_batch_flush(&c->batch);
}

static int
resolve_server(struct client *c, char **cause)
{
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *res;
	char port[8];
	uint16_t p;
	int rv;

	snprintf(port, sizeof port, "%u", c->cfg->server_port);
	if ((rv = getaddrinfo(c->cfg->server_host, port, &hints, &res)) != 0) {
		xasprintf(cause, "%s: %s", c->cfg->server_host, gai_strerror(rv));
		return -1;
	}
	memcpy(&c->server, res->ai_addr, res->ai_addrlen);
	c->serverlen = res->ai_addrlen;
	freeaddrinfo(res);
	return addr_from_sockaddr((struct sockaddr *)&c->server, &c->server_ip, &p);
}

static void
connect_server(struct client *c)
{
	char *cause = NULL;

	if (c->udp_ev != NULL) {
		event_free(c->udp_ev);
		c->udp_ev = NULL;
		udp_close(&c->sock);
	}
	/* A fresh socket (and port) per attempt: a NAT that lost our old
	 * mapping treats us as new anyway. Connecting it fixes the local
	 * address the kernel chose, which is the path's local end. */
	if (udp_open(&c->sock, c->server.ss_family, NULL, 0, &cause) != 0 ||
	    connect(c->sock.fd, (struct sockaddr *)&c->server, c->serverlen) == -1) {
		log_warn("cannot reach the server: %s", cause != NULL ? cause :
		    strerror(errno));
		free(cause);
		udp_close(&c->sock);
		schedule_reconnect(c);
		return;
	}
	c->sock.locallen = sizeof c->sock.local;
	getsockname(c->sock.fd, (struct sockaddr *)&c->sock.local, &c->sock.locallen);
	udp_batch_init(&c->batch, &c->sock);
	c->udp_ev = event_new(c->base, c->sock.fd, EV_READ | EV_PERSIST, udp_read_cb, c);
	event_add(c->udp_ev, NULL);
	c->qc = quic_conn_client_create(c->base, &c->qs, &client_cbs, c, c->tls,
	    &c->batch, (struct sockaddr *)&c->server, c->serverlen, &cause);
	if (c->qc == NULL) {
		log_warn("%s", cause);
		free(cause);
		schedule_reconnect(c);
		return;
	}
	quic_conn_write(c->qc);
	udp_batch_flush(&c->batch);
}

static void
status_cb(struct evbuffer *out, const char *request, void *arg)
{
	struct client *c = arg;
	struct status_peer sp = {
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
	};
	struct status st = {
		.role = "client",
		.tun = c->tun_open ? c->tun.name : NULL,
		.addrs = c->addrs,
		.naddrs = c->naddrs,
		.counters = &c->counters,
		.peers = &sp,
		.npeers = 1,
	};

	sp.fwd_counters = forward_counters(c->fwd);
	sp.fwds = forward_set(c->fwd);
	if (c->qc != NULL) {
		sp.has_quic = true;
		quic_conn_get_stats(c->qc, &sp.quic);
		st.datagram_mtu = tunnel_inner_mtu(c->qc);
	}
	if (c->tun_open) {
		/* The MTU the server gave, as configured on the device. */
		st.mtu = (unsigned)c->tun_mtu;
	}
	status_render(out, &st, strstr(request, "json") != NULL);
}

struct client *
client_create(struct event_base *base, const struct cfg *cfg, int verbose,
    char **cause)
{
	struct client *c = xcalloc(1, sizeof *c);
	uint8_t priv[KEY_LEN];

	c->base = base;
	c->cfg = cfg;
	quic_random(c->reset_secret, sizeof c->reset_secret);
	c->qs = (struct quic_settings){
		.role = QUIC_ROLE_CLIENT,
		.cc = cfg->congestion == CFG_CC_BBR ? NGTCP2_CC_ALGO_BBR : NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = cfg->idle_timeout,
		.keepalive_s = cfg->keepalive,
		.reset_secret = c->reset_secret,
		.stream_window = cfg->forward_buffer,
		.verbose = verbose > 1,
	};
	quic_set_pin_check(pin_check);
	c->reconnect_ev = evtimer_new(base, reconnect_cb, c);
	if (key_load_private(cfg->private_key_file, priv, cause) != 0)
		goto fail;
	c->tls = tls_ctx_create(TLS_ROLE_CLIENT, priv, quic_tls_pin, cause);
	explicit_bzero(priv, sizeof priv);
	if (c->tls == NULL || resolve_server(c, cause) != 0)
		goto fail;
	if ((c->fwd = forward_create(base, cfg, cause)) == NULL)
		goto fail;
	/* A 1500-byte outer path less the IP and UDP headers. */
	c->qs.max_udp_payload = c->server.ss_family == AF_INET6 ? 1452 : 1472;
	c->control = control_create(base, cfg->control_socket, status_cb, c, cause);
	if (c->control == NULL)
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
	if (c->qc == NULL) {
		event_base_loopexit(c->base, NULL);
		return;
	}
	quic_conn_close(c->qc, 0, "client shutting down");
	udp_batch_flush(&c->batch);
}

void
client_free(struct client *c)
{
	char *cause = NULL;

	if (c == NULL)
		return;
	if (c->qc != NULL)
		quic_conn_free(c->qc);
	if (c->host_route &&
	    tun_netlink_del_host_route(&c->server_ip, &c->host_path, &cause) != 0) {
		log_warn("removing the host route to the server: %s", cause);
		free(cause);
	}
	if (c->tun_ev != NULL)
		event_free(c->tun_ev);
	/* Routes through the TUN vanish with the device. */
	if (c->tun_open)
		tun_close(&c->tun);
	if (c->udp_ev != NULL)
		event_free(c->udp_ev);
	udp_close(&c->sock);
	if (c->reconnect_ev != NULL)
		event_free(c->reconnect_ev);
	control_free(c->control);
	forward_free(c->fwd);
	if (c->tls != NULL)
		wolfSSL_CTX_free(c->tls);
	free(c);
}

int
client_exit_status(const struct client *c)
{
	return c->exit_status;
}

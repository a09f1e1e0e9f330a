/* The TUN side of rove: the device the server's configuration (SERVER_CONFIG)
 * brings up, with its addresses, routes and DNS, changed in place on a
 * reconnect; and the IP packets between it and the session's DATAGRAMs. */
#include <stdlib.h>
#include <string.h>

#include "base/addr.h"
#include "base/log.h"
#include "client-int.h"
#include "dns.h"
#include "forward.h"
#include "forward/udprelay.h"
#include "transport/quic.h"
#include "tun/tun-netlink.h"
#include "tun/tun.h"
#include "tunnel/recovery.h"
#include "tunnel/tunnel.h"
#include "wire/ippkt.h"
#include "wire/proto.h"

/* A packet from the tunnel for an address not this client's: the
 * server routes a LAN through it (AllowedIPs), and the kernel drops such
 * packets unless this host forwards. Said once per family, the first
 * time it matters (the sysctl read then, not per packet). */
static void
check_forwarding(struct client *c, const struct ipaddr *dst)
{
	bool v6 = dst->family == AF_INET6;
	const char *path = v6 ? "/proc/sys/net/ipv6/conf/all/forwarding" :
	    "/proc/sys/net/ipv4/ip_forward";
	char ip[ADDR_STRLEN], v = '1';
	FILE *f;

	if (c->forwarding_checked[v6])
		return;
	for (size_t i = 0; i < c->naddrs; i++) {
		if (addr_equal(&c->addrs[i].addr, dst))
			return;
	}
	if (addr_is_multicast(dst))
		return;
	c->forwarding_checked[v6] = true;
	if ((f = fopen(path, "re")) != NULL) {
		v = (char)fgetc(f);
		fclose(f);
	}
	if (v == '0')
		log_warn("packets for %s come through the tunnel (the server "
		    "routes a network to this host), but this host does not "
		    "forward %s: they are dropped; sysctl -w %s=1",
		    addr_ip_str(dst, ip), v6 ? "IPv6" : "IPv4", v6 ?
		    "net.ipv6.conf.all.forwarding" : "net.ipv4.ip_forward");
}

static void
packet_cb(const uint8_t *pkt, size_t len, const struct ippkt_info *info,
    void *arg)
{
	struct client *c = arg;

	if (!c->tun_open) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, NULL, &c->counters);
		return;
	}
	check_forwarding(c, &info->dst);
	tunnel_deliver(&c->tun_out, pkt, len, NULL);
}

/* A UDP flow's datagram from the server. */
static void
flow_dgram(const uint8_t *data, size_t len, void *arg)
{
	struct client *c = arg;

	udp_relay_datagram(forward_udp(c->fwd), data, len);
}

/* A DATAGRAM from the server: its IP packets go to the TUN, a UDP flow's
 * datagrams to the flow. */
void
client_tun_datagram_cb(struct quic_conn *qc, const uint8_t *data, size_t len,
    void *arg)
{
	struct client *c = arg;
	struct tunnel_sink sink = {
		.packet = packet_cb,
		/* Flows are the session's alone. */
		.flow = qc == c->qc ? flow_dgram : NULL,
		.arg = c,
		.global = &c->counters,
	};

	if (qc == c->probe && c->probe_rate) {
		client_throttle_probe_echo(c, data, len);
		return;
	}
	/* Only the session's own groups; another (a probe, a racing
	 * handshake) sends nothing but plain packets. */
	tunnel_input(qc == c->qc ? c->rec : NULL, data, len, &sink);
}

void
client_tun_session_gone(struct client *c)
{
	recovery_free(c->rec);
	c->rec = NULL;
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


/* A packet from the TUN goes to the server, if it may go now. */
static void
send_read(uint8_t *buf, size_t n, const struct virtio_net_hdr *vh,
    const struct ippkt_info *info, void *arg)
{
	struct client *c = arg;

	/* The tunnel is point-to-point: the kernel's own multicast
	 * (neighbour and router solicitations, MLD) has nobody to reach. */
	if (addr_is_multicast(&info->dst)) {
		tunnel_drop(TUNNEL_DROP_MULTICAST, NULL, &c->counters);
		return;
	}
	/* While reconnecting with 0-RTT, packets go in the first flight
	 * (DATAGRAMs only: replaying one is like a network duplicate). */
	if (c->qc == NULL || !can_send(c)) {
		tunnel_drop(TUNNEL_DROP_NO_ROUTE, NULL, &c->counters);
		return;
	}
	tunnel_send_read(c->qc, c->rec, vh, buf, n, info, &c->tun, NULL,
	    &c->counters);
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

static bool
prefix_equal(const struct prefix *a, const struct prefix *b)
{
	return a->len == b->len && addr_equal(&a->addr, &b->addr);
}

/* The table for a route through the TUN: a route that would capture our
 * own packets to the server (a full tunnel's 0.0.0.0/0, or any prefix
 * holding the server) goes to the policy table, which only unmarked
 * packets consult (tun_netlink_policy); the rules go in with the first
 * such route. Without a mark (SO_MARK refused) there is no policy, and
 * client_path_check refuses a path into the tunnel instead. */
static uint32_t
route_table(struct client *c, const struct prefix *net)
{
	char *cause = NULL;

	if (c->fwmark == 0 || !addr_prefix_contains(net, &c->server_ip))
		return 0;
	if (!c->policy_on) {
		if (tun_netlink_policy(true, c->server_ip.family, c->fwmark,
		    &cause) != 0) {
			log_warn("cannot keep the tunnel's own packets out of it: %s",
			    cause);
			free(cause);
			return 0;
		}
		c->policy_on = true;
		c->policy_family = c->server_ip.family;
		log_info("the tunnel covers the server: its routes go to table "
		    "%u, for packets without firewall mark 0x%x",
		    (unsigned)c->fwmark, (unsigned)c->fwmark);
	}
	return c->fwmark;
}

/* Install one route through the TUN unless an address already implies it
 * or it is installed. */
static void
add_route(struct client *c, const struct prefix *p)
{
	struct prefix net = *p;
	char buf[ADDR_STRLEN];
	char *cause = NULL;
	uint32_t table;

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
	table = route_table(c, &net);
	if (tun_netlink_add_route_table(c->tun.ifindex, &net, table, &cause) != 0) {
		log_warn("route %s: %s", addr_prefix_str(&net, buf), cause);
		free(cause);
		return;
	}
	c->route_table[c->nroutes] = table;
	c->routes[c->nroutes++] = net;
}

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
	/* tun_attach owns the clone fd from here, whatever happens. */
	fd = c->tun_clone;
	c->tun_clone = -1;
	if (tun_attach(&c->tun, fd, c->cfg->tun,
	    c->cfg->offload == CFG_AUTO, cause) != 0)
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
		if (tun_netlink_add_route_table(c->tun.ifindex, &c->routes[i],
		    c->route_table[i], &cause) != 0) {
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

int
client_tun_apply_config(struct client *c, const uint8_t *body, size_t len)
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
		/* A server that decodes repairs gets them if our configuration
		 * allows; it may send us its own either way. */
		client_tun_session_gone(c);
		if (sc.features & PROTO_FEATURE_LOSS_RECOVERY) {
			c->rec = recovery_create(c->base, c->qc);
			recovery_set_sending(c->rec,
			    c->cfg->loss_recovery == CFG_AUTO);
		}
		forward_server_features(c->fwd, sc.features);
		c->rate_probe_ok = (sc.features & PROTO_FEATURE_RATE_PROBE) != 0;
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

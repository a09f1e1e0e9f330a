/* rove's paths: the UDP sockets connected to the server, each one local
 * end of a path, the packets they read, and moving the session to a new
 * one when netlink says the way to the server changed (migration) or
 * came back after an outage, or when the uplink in use goes silent. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "client-int.h"
#include "transport/quic.h"
#include "transport/udp.h"
#include "tun/tun-monitor.h"
#include "tun/tun-netlink.h"
#include "tunnel/tunnel.h"
#include "wire/proto.h"

/* A path whose packets have gone unacknowledged this long, its link and
 * route up all the while (Wi-Fi that passes nothing, or a middlebox that
 * cut this one UDP flow), sends the session looking for another uplink,
 * one every ESCAPE_EVERY_MS, or with none to a new local port of its own:
 * well before Transport = auto's TCP race (STALL_MS), which goes the same
 * dead way. */
#define SILENT_MS 1000
#define ESCAPE_EVERY_MS 1000
#define REPROBE_MAX_MS 8000
/* On another uplink than the routing table's, the preferred one is tried
 * again (a path validation, the session staying where it is meanwhile)
 * this long after the move, doubling while it stays silent. */
#define PREFER_MIN_MS 5000
#define PREFER_MAX_MS 60000
/* The server saw our packets come from a new address after a quiet spell
 * (PATH_NOTICE): our NAT forgot its mapping in less than that, so the
 * keepalive goes down to half of it, never below KEEPALIVE_MIN_MS. A spell
 * shorter than NAT_QUIET_MIN_MS, or a move of our own just before, says
 * nothing about the NAT's timeout. */
#define KEEPALIVE_MIN_MS 2000
#define NAT_QUIET_MIN_MS 1500
#define OWN_MOVE_MS 3000

static void escape_silent_uplink(struct client *, const char *why);

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
			client_start_alt(c, got == -ECONNREFUSED ?
			    "nothing listens on the server's UDP port "
			    "(ICMP port unreachable)" : "the server is "
			    "unreachable over UDP (ICMP)");
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

/* A new socket connected to the server at `remote`: the kernel picks
 * the local address and port of today's path, or with `up` the socket is
 * bound to that uplink's address and sends out of its interface whatever
 * the routing table prefers (IP_UNICAST_IF, which needs no privilege). */
static struct csock *
sock_open(struct client *c, const struct tun_netlink_uplink *up,
    const struct sockaddr *remote, socklen_t remotelen, char **cause)
{
	struct csock *cs = xcalloc(1, sizeof *cs);
	struct sockaddr_storage src;
	socklen_t srclen = 0;

	cs->c = c;
	if (up != NULL)
		addr_to_sockaddr(&up->src, 0, &src, &srclen);
	if (udp_open(&cs->sock, c->server.ss_family, up != NULL ?
	    (struct sockaddr *)&src : NULL, srclen, cause) != 0) {
		free(cs);
		return NULL;
	}
	if (up != NULL) {
		uint32_t v4 = htonl((uint32_t)up->ifindex);
		int v6 = up->ifindex, rv;

		rv = c->server.ss_family == AF_INET ?
		    setsockopt(cs->sock.fd, IPPROTO_IP, IP_UNICAST_IF, &v4, sizeof v4) :
		    setsockopt(cs->sock.fd, IPPROTO_IPV6, IPV6_UNICAST_IF, &v6, sizeof v6);
		if (rv == -1) {
			xasprintf(cause, "sending by interface %d: %s", up->ifindex,
			    strerror(errno));
			udp_close(&cs->sock);
			free(cs);
			return NULL;
		}
		cs->pinned_ifindex = up->ifindex;
	}
	/* Marked before connect picks the route: a full tunnel's policy
	 * sends only marked packets by the uplinks. */
	if (c->fwmark != 0 && setsockopt(cs->sock.fd, SOL_SOCKET, SO_MARK,
	    &c->fwmark, sizeof c->fwmark) == -1)
		log_warn("UDP socket: cannot set its mark: %s", strerror(errno));
	if (remotelen > sizeof cs->remote ||
	    connect(cs->sock.fd, remote, remotelen) == -1) {
		xasprintf(cause, "connect: %s", strerror(errno));
		udp_close(&cs->sock);
		free(cs);
		return NULL;
	}
	memcpy(&cs->remote, remote, remotelen);
	cs->remotelen = remotelen;
	cs->sock.locallen = sizeof cs->sock.local;
	getsockname(cs->sock.fd, (struct sockaddr *)&cs->sock.local, &cs->sock.locallen);
	udp_batch_init(&cs->batch, &cs->sock);
	cs->ev = event_new(c->base, cs->sock.fd, EV_READ | EV_PERSIST, udp_read_cb, cs);
	event_add(cs->ev, NULL);
	cs->opened_ms = clock_now_ms();
	return cs;
}

struct csock *
client_path_sock_open(struct client *c, char **cause)
{
	return sock_open(c, NULL, (struct sockaddr *)&c->server, c->serverlen,
	    cause);
}

/* Where a move goes: the server's end of the session's path (after a
 * move among ServerPorts not Server's port, which a middlebox may have
 * cut), or with `other_port` another of ServerPorts, at random. Server
 * itself while there is no QUIC path. */
static socklen_t
move_target(struct client *c, bool other_port, struct sockaddr_storage *to)
{
	uint16_t first = c->cfg->server_ports_first, last = c->cfg->server_ports_last;
	const struct sockaddr *cur = NULL;
	socklen_t len = 0;
	struct ipaddr a;
	uint16_t port, next;
	uint32_t r;

	if (c->qc != NULL && !quic_conn_is_tcp(c->qc))
		cur = quic_conn_remote(c->qc, &len);
	if (cur == NULL || len > sizeof *to) {
		memcpy(to, &c->server, c->serverlen);
		return c->serverlen;
	}
	memcpy(to, cur, len);
	if (!other_port || first == last || addr_from_sockaddr(cur, &a, &port) != 0)
		return len;
	random_bytes((uint8_t *)&r, sizeof r);
	/* One of the range's others: the current port, if in it, skipped. */
	if (port >= first && port <= last) {
		next = (uint16_t)(first + r % (uint32_t)(last - first));
		if (next >= port)
			next++;
	} else {
		next = (uint16_t)(first + r % ((uint32_t)(last - first) + 1));
	}
	addr_to_sockaddr(&a, next, to, &len);
	return len;
}

/* A socket for the session to move to (move_target). */
static struct csock *
move_sock_open(struct client *c, const struct tun_netlink_uplink *up,
    bool other_port, char **cause)
{
	struct sockaddr_storage to;
	socklen_t len = move_target(c, other_port, &to);

	return sock_open(c, up, (struct sockaddr *)&to, len, cause);
}

void
client_path_sock_free(struct csock *cs)
{
	if (cs == NULL)
		return;
	event_free(cs->ev);
	udp_close(&cs->sock);
	free(cs);
}

struct udp_batch *
client_path_batch_for(struct quic_conn *qc, const ngtcp2_path *path, void *arg)
{
	struct client *c = arg;

	if (qc == c->probe && c->probe_sock != NULL)
		return &c->probe_sock->batch;
	if (c->old_sock != NULL && path->local.addrlen == c->old_sock->sock.locallen &&
	    memcmp(path->local.addr, &c->old_sock->sock.local, path->local.addrlen) == 0)
		return &c->old_sock->batch;
	return c->sock != NULL ? &c->sock->batch : NULL;
}

void
client_path_validated(struct quic_conn *qc, enum quic_path_result res,
    const struct sockaddr *local, const struct sockaddr *remote, void *arg)
{
	struct client *c = arg;
	char buf[ADDR_STRLEN];

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
	/* On another uplink than the routing table's: look back at the
	 * preferred one now and then (client_path_watch). */
	c->prefer_wait_ms = PREFER_MIN_MS;
	c->prefer_next_ms = clock_now_ms() + c->prefer_wait_ms;
	/* The server has just answered on it: whatever went unacknowledged
	 * before the move is no reason to race TCP. */
	c->quic_grace_until_ms = clock_now_ms() + STALL_MS;
	if (c->configured)
		client_notify(c, "connected");
	/* TLS over TCP was racing the silence this path has just ended. */
	if (qc == c->qc)
		client_alt_drop(c);
	/* The new path works: the old socket has served its purpose. */
	if (c->old_sock != NULL && (c->sock == NULL ||
	    memcmp(local, &c->old_sock->sock.local, c->old_sock->sock.locallen) != 0)) {
		client_path_sock_free(c->old_sock);
		c->old_sock = NULL;
	}
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
void
client_path_check(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval path_retry = { 0, 500000 };
	struct client *c = arg;
	struct tun_netlink_path path;
	struct ipaddr cur;
	struct csock *cs;
	char *cause = NULL, buf[ADDR_STRLEN];
	bool probe, gone, down, link_down = false;
	uint16_t port;

	(void)fd;
	(void)what;
	if (c->qc == NULL) {
		c->link_event = false;
		c->path_down = false;
		/* Waiting to reconnect: a change may be the way back. */
		if (evtimer_pending(c->reconnect_ev, NULL) && !c->stopping) {
			evtimer_del(c->reconnect_ev);
			client_connect(c);
		}
		return;
	}
	if (quic_conn_is_tcp(c->qc)) {
		client_probe_now(c);
		return;
	}
	if (quic_conn_state(c->qc) != QUIC_STATE_ESTABLISHED || c->sock == NULL)
		return;
	/* The way our own (marked) packets take. One into the tunnel is no
	 * way at all: only a full tunnel without its policy rules can show
	 * one, and a socket on the tunnel's address would be dead. */
	down = tun_netlink_get_route_marked(&c->server_ip, c->fwmark, &path,
	    &cause) != 0;
	if (!down && c->tun_open && path.ifindex == c->tun.ifindex) {
		xasprintf(&cause, "its route leads into the tunnel");
		down = true;
	}
	if (!down) {
		int running = tun_netlink_link_running(path.ifindex, &cause);

		down = running != 1;
		link_down = running == 0;
	}
	if (down) {
		/* When the path comes back the connection needs its probe.
		 * The link's or route's own event should bring us here
		 * again; looking now and then as well means a missed or
		 * merged notification cannot leave the connection stranded. */
		if (!c->path_down)
			log_debug("no way to the server now: %s",
			    cause != NULL ? cause : "its link is down");
		free(cause);
		/* A link that lost its carrier keeps its routes: leave by
		 * another uplink now, not after a second of silence. */
		if (link_down && !c->path_down && c->sock->pinned_ifindex == 0)
			escape_silent_uplink(c, "its link lost carrier");
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
	if ((cs = move_sock_open(c, NULL, false, &cause)) == NULL) {
		log_warn("migration: %s", cause);
		free(cause);
		return;
	}
	/* Without the old address the old path is dead: switch now and
	 * validate on the way; else keep it until the new one proves itself. */
	if (quic_conn_migrate(c->qc, &cs->batch, gone || probe) != 0) {
		/* Most often the server's next connection ID has yet to
		 * arrive (moves quicker than a round trip): try again soon
		 * rather than stay on a path that may be dead. */
		static const struct timeval id_retry = { 0, 100000 };

		client_path_sock_free(cs);
		if (++c->move_retries <= 20) {
			c->path_down = probe;
			evtimer_add(c->path_ev, &id_retry);
		}
		return;
	}
	c->move_retries = 0;
	c->roam.migrations++;
	c->last_move_ms = clock_now_ms();
	log_info("migrating to %s%s", addr_sockaddr_str((struct sockaddr *)&cs->sock.local,
	    buf), gone ? " (old address gone)" : probe ? " (path back after an outage)" : "");
	client_path_sock_free(c->old_sock);
	c->old_sock = gone ? NULL : c->sock;
	if (gone)
		client_path_sock_free(c->sock);
	c->sock = cs;
	quic_write_dirty();
}

void
client_path_monitor_cb(enum tun_monitor_event ev, void *arg)
{
	struct client *c = arg;
	struct timeval settle = { 0, 20000 };

	log_debug("netlink: %s change", tun_monitor_event_name(ev));
	/* Let a burst of changes (address, then route) settle first. */
	if (ev == TUN_MONITOR_LINK)
		c->link_event = true;
	evtimer_add(c->path_ev, &settle);
}

/* The interface the session's path leaves by now. */
static int
current_ifindex(struct client *c)
{
	struct tun_netlink_path path;
	char *cause = NULL;

	if (c->sock->pinned_ifindex != 0)
		return c->sock->pinned_ifindex;
	if (tun_netlink_get_route_marked(&c->server_ip, c->fwmark, &path,
	    &cause) != 0) {
		free(cause);
		return 0;
	}
	return path.ifindex;
}

static bool
escape_tried(const struct client *c, int ifindex)
{
	for (size_t i = 0; i < c->nescape_tried; i++) {
		if (c->escape_tried[i] == ifindex)
			return true;
	}
	return false;
}

static bool
sock_has_addr(const struct csock *cs, const struct sockaddr *a, socklen_t len)
{
	return cs != NULL && a != NULL && cs->sock.locallen == len &&
	    memcmp(&cs->sock.local, a, len) == 0;
}

/* A move to `cs` has begun (validation first). Of the two sockets held,
 * the one the session still sends on stays, as old_sock, until the new
 * path validates; the other (an earlier probe that got no answer) goes. */
static void
adopt_sock(struct client *c, struct csock *cs)
{
	socklen_t len = 0;
	const struct sockaddr *cur = quic_conn_path_local(c->qc, &len);

	if (sock_has_addr(c->old_sock, cur, len)) {
		client_path_sock_free(c->sock);
	} else {
		client_path_sock_free(c->old_sock);
		c->old_sock = c->sock;
	}
	c->sock = cs;
	quic_write_dirty();
}

/* The path in use has gone silent: move (validating first, so nothing
 * is lost if this one is dead too) to the best uplink not yet tried in
 * this silence, from a socket pinned to it. */
static void
escape_silent_uplink(struct client *c, const char *why)
{
	struct tun_netlink_uplink up[8];
	char *cause = NULL, buf[ADDR_STRLEN], ifname[IF_NAMESIZE];
	struct csock *cs;
	uint64_t now = clock_now_ms();
	int cur = current_ifindex(c), n;

	n = tun_netlink_uplinks(c->server_ip.family, cur, up,
	    sizeof up / sizeof up[0], &cause);
	if (n < 0) {
		log_debug("no other uplink: %s", cause);
		free(cause);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (!up[i].running || escape_tried(c, up[i].ifindex) ||
		    (c->tun_open && up[i].ifindex == c->tun.ifindex))
			continue;
		if (c->nescape_tried < sizeof c->escape_tried / sizeof c->escape_tried[0])
			c->escape_tried[c->nescape_tried++] = up[i].ifindex;
		if ((cs = move_sock_open(c, &up[i], false, &cause)) == NULL) {
			log_warn("uplink %s: %s", if_indextoname((unsigned)up[i].ifindex,
			    ifname) != NULL ? ifname : "?", cause);
			free(cause);
			continue;
		}
		if (quic_conn_migrate(c->qc, &cs->batch, false) != 0) {
			client_path_sock_free(cs);
			return;
		}
		c->roam.migrations++;
		c->last_move_ms = clock_now_ms();
		c->roam.uplink_moves++;
		log_info("%s: trying uplink %s, from %s", why,
		    if_indextoname((unsigned)up[i].ifindex, ifname) != NULL ?
		    ifname : "?", addr_sockaddr_str((struct sockaddr *)&cs->sock.local,
		    buf));
		adopt_sock(c, cs);
		return;
	}
	/* No other way out: ask the way we have, from a fresh socket
	 * (client_path_reprobe). A new local port is a new flow to every
	 * middlebox on the way, so one that cut this flow (after so many
	 * bytes or minutes) lets the new one through, and the path
	 * validation answers within a round trip. Each ask waits twice as
	 * long as the last, up to REPROBE_MAX_MS: each costs one of the
	 * server's connection IDs, which come back only once the path
	 * does. */
	if (now < c->reprobe_next_ms)
		return;
	bool first = c->reprobe_wait_ms == 0;
	c->reprobe_wait_ms = first ? ESCAPE_EVERY_MS :
	    c->reprobe_wait_ms * 2 < REPROBE_MAX_MS ? c->reprobe_wait_ms * 2 :
	    REPROBE_MAX_MS;
	c->reprobe_next_ms = now + c->reprobe_wait_ms;
	if (!client_path_reprobe(c))
		return;
	char to[ADDR_STRLEN + 8] = "";

	if (c->cfg->server_ports_first != 0) {
		strcpy(to, ", to ");
		addr_sockaddr_str((struct sockaddr *)&c->sock->remote, to + 5);
	}
	if (first)
		log_info("%s: the path went silent: moving to a new local port, %s%s",
		    why, addr_sockaddr_str((struct sockaddr *)&c->sock->sock.local,
		    buf), to);
	else
		log_debug("%s: asking again from a new local port, %s%s", why,
		    addr_sockaddr_str((struct sockaddr *)&c->sock->sock.local, buf),
		    to);
}

bool
client_path_reprobe(struct client *c)
{
	struct csock *cs;
	char *cause = NULL;

	if (c->qc == NULL || quic_conn_is_tcp(c->qc) || c->sock == NULL ||
	    quic_conn_state(c->qc) != QUIC_STATE_ESTABLISHED)
		return false;
	/* A new local port, and with ServerPorts a new server port too: a
	 * middlebox may single out every flow to the one in use. */
	if ((cs = move_sock_open(c, NULL, true, &cause)) == NULL) {
		log_debug("probing the path: %s", cause);
		free(cause);
		return false;
	}
	if (quic_conn_migrate_to(c->qc, &cs->batch,
	    (struct sockaddr *)&cs->remote, cs->remotelen, false) != 0) {
		client_path_sock_free(cs);
		return false;
	}
	c->roam.migrations++;
	c->roam.port_moves++;
	c->last_move_ms = clock_now_ms();
	adopt_sock(c, cs);
	return true;
}

void
client_path_watch(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	uint64_t now = clock_now_ms(), silence;

	(void)fd;
	(void)what;
	if (c->qc == NULL || quic_conn_is_tcp(c->qc) || c->sock == NULL ||
	    quic_conn_state(c->qc) != QUIC_STATE_ESTABLISHED)
		return;
	silence = quic_conn_ack_silence_ms(c->qc);
	if (silence < SILENT_MS) {
		c->nescape_tried = 0;
		c->escape_next_ms = 0;
		c->reprobe_next_ms = 0;
		c->reprobe_wait_ms = 0;
		/* The limit falls before the next tick: look again the
		 * moment it is up, not up to a tick late (a cut flow's gap
		 * is this wait and a round trip). */
		if (silence > 0 && SILENT_MS - silence < UPLINK_CHECK_MS) {
			uint64_t left = SILENT_MS - silence;
			struct timeval tv = { 0, (suseconds_t)(left * 1000) };

			evtimer_add(c->silent_ev, &tv);
		}
	} else if (now >= c->escape_next_ms) {
		char why[48];

		c->escape_next_ms = now + ESCAPE_EVERY_MS;
		snprintf(why, sizeof why, "no answer for %llu ms",
		    (unsigned long long)silence);
		escape_silent_uplink(c, why);
		return;
	}
	/* On an uplink of our choosing: the routing table's own choice may
	 * answer again. client_path_check moves there if it validates. */
	if (c->sock->pinned_ifindex != 0 && c->prefer_next_ms != 0 &&
	    now >= c->prefer_next_ms) {
		c->prefer_wait_ms = c->prefer_wait_ms * 2 < PREFER_MAX_MS ?
		    c->prefer_wait_ms * 2 : PREFER_MAX_MS;
		c->prefer_next_ms = now + c->prefer_wait_ms;
		client_path_check(-1, 0, c);
	}
}

void
client_path_notice(struct client *c, const uint8_t *body, size_t len)
{
	struct proto_path_notice pn;
	uint64_t now = clock_now_ms(), ka, cur;

	if (proto_decode_path_notice(body, len, &pn) != 0) {
		log_debug("malformed PATH_NOTICE ignored");
		return;
	}
	cur = c->keepalive_ms != 0 ? c->keepalive_ms :
	    (uint64_t)c->cfg->keepalive * 1000;
	if (cur == 0 || pn.quiet_ms < NAT_QUIET_MIN_MS ||
	    (c->last_move_ms != 0 && now - c->last_move_ms < OWN_MOVE_MS))
		return;
	ka = pn.quiet_ms / 2 > KEEPALIVE_MIN_MS ? pn.quiet_ms / 2 : KEEPALIVE_MIN_MS;
	if (ka >= cur)
		return;
	c->keepalive_ms = ka;
	log_info("the NAT forgot this client after at most %llu ms of quiet: "
	    "keepalive now every %llu ms", (unsigned long long)pn.quiet_ms,
	    (unsigned long long)ka);
	if (c->qc != NULL)
		quic_conn_set_keepalive_ms(c->qc, ka);
}

/* rove's paths: the UDP sockets connected to the server, each one local
 * end of a path, the packets they read, and moving the session to a new
 * one when netlink says the way to the server changed (migration) or
 * came back after an outage. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "client-int.h"
#include "transport/quic.h"
#include "transport/udp.h"
#include "tun/tun-monitor.h"
#include "tun/tun-netlink.h"
#include "tunnel/tunnel.h"

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
			client_start_alt(c, "UDP unreachable (ICMP)");
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
struct csock *
client_path_sock_open(struct client *c, char **cause)
{
	struct csock *cs = xcalloc(1, sizeof *cs);

	cs->c = c;
	if (udp_open(&cs->sock, c->server.ss_family, NULL, 0, cause) != 0) {
		free(cs);
		return NULL;
	}
	/* Marked before connect picks the route: a full tunnel's policy
	 * sends only marked packets by the uplinks. */
	if (c->fwmark != 0 && setsockopt(cs->sock.fd, SOL_SOCKET, SO_MARK,
	    &c->fwmark, sizeof c->fwmark) == -1)
		log_warn("UDP socket: cannot set its mark: %s", strerror(errno));
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
	/* The server has just answered on it: whatever went unacknowledged
	 * before the move is no reason to race TCP. */
	c->quic_grace_until_ms = clock_now_ms() + STALL_MS;
	if (c->configured)
		client_notify(c, "connected");
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
	bool probe, gone, down;
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
	if (!down)
		down = tun_netlink_link_running(path.ifindex, &cause) != 1;
	if (down) {
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
	if ((cs = client_path_sock_open(c, &cause)) == NULL) {
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

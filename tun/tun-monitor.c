/* Netlink monitor: link, address and route notifications as loop events. */
#include <sys/socket.h>

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "tun-monitor.h"

/* Datagrams read per readable callback: enough for a burst (an interface
 * going down takes its addresses and routes with it), small enough that
 * one busy socket cannot starve the rest of the loop. */
#define MONITOR_READ_BUDGET 256
/* Ask for a large receive buffer so a burst does not overrun it. */
#define MONITOR_RCVBUF (1 << 20)

#define MONITOR_F_LINK (1U << TUN_MONITOR_LINK)
#define MONITOR_F_ADDRESS (1U << TUN_MONITOR_ADDRESS)
#define MONITOR_F_ROUTE (1U << TUN_MONITOR_ROUTE)
#define MONITOR_F_ALL (MONITOR_F_LINK | MONITOR_F_ADDRESS | MONITOR_F_ROUTE)

struct tun_monitor {
	struct nl_sock *sk;
	struct event *ev_read;
	struct event *ev_report;        /* activated to deliver `pending` */
	unsigned pending;               /* MONITOR_F_* not yet reported */
	tun_monitor_cb cb;
	void *arg;
	bool *freed;                    /* set while cb runs, see report_cb */
};

const char *
tun_monitor_event_name(enum tun_monitor_event ev)
{
	switch (ev) {
	case TUN_MONITOR_LINK:
		return "link";
	case TUN_MONITOR_ADDRESS:
		return "address";
	case TUN_MONITOR_ROUTE:
		return "route";
	}
	return "unknown";
}

/* Classify one notification; everything else on the socket is ignored. */
static int
monitor_msg_cb(struct nl_msg *msg, void *arg)
{
	struct tun_monitor *m = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct rtmsg *rtm;

	switch (h->nlmsg_type) {
	case RTM_NEWLINK:
	case RTM_DELLINK:
		m->pending |= MONITOR_F_LINK;
		break;
	case RTM_NEWADDR:
	case RTM_DELADDR:
		m->pending |= MONITOR_F_ADDRESS;
		break;
	case RTM_NEWROUTE:
	case RTM_DELROUTE:
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof *rtm))
			break;
		/* Cloned entries are the kernel's per-destination cache (a
		 * learned path MTU, for instance), not a change of route. */
		rtm = nlmsg_data(h);
		if (rtm->rtm_flags & RTM_F_CLONED)
			break;
		m->pending |= MONITOR_F_ROUTE;
		break;
	default:
		break;
	}
	return NL_OK;
}

/* Deliver each pending kind once. */
static void
report_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tun_monitor *m = arg;
	unsigned pending = m->pending;
	bool freed = false;

	(void)fd;
	(void)what;
	m->pending = 0;
	/* The callback may free the monitor; `freed` tells us to stop. */
	m->freed = &freed;
	for (unsigned i = TUN_MONITOR_LINK; i <= TUN_MONITOR_ROUTE; i++) {
		if (!(pending & (1U << i)))
			continue;
		m->cb((enum tun_monitor_event)i, m->arg);
		if (freed)
			return;
	}
	m->freed = NULL;
}

/* Drain the socket, then schedule one report for whatever changed. */
static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tun_monitor *m = arg;
	int err;

	(void)fd;
	(void)what;
	for (int i = 0; i < MONITOR_READ_BUDGET; i++) {
		err = nl_recvmsgs_default(m->sk);
		if (err == -NLE_AGAIN)
			break;
		if (err < 0) {
			/* Most likely ENOBUFS: notifications were lost, so
			 * any state may have changed. */
			log_debug("%s: %s", __func__, nl_geterror(err));
			m->pending |= MONITOR_F_ALL;
			if (err != -NLE_NOMEM && err != -NLE_INTR)
				break;
		}
	}
	if (m->pending != 0)
		event_active(m->ev_report, EV_TIMEOUT, 0);
}

struct tun_monitor *
tun_monitor_create(struct event_base *base, tun_monitor_cb cb, void *arg,
    char **cause)
{
	struct tun_monitor *m;
	int err, fd, size = MONITOR_RCVBUF;

	if (base == NULL || cb == NULL) {
		xasprintf(cause, "netlink monitor: no event base or callback");
		return NULL;
	}
	m = xcalloc(1, sizeof *m);
	m->cb = cb;
	m->arg = arg;

	m->sk = nl_socket_alloc();
	if (m->sk == NULL) {
		xasprintf(cause, "netlink monitor: cannot allocate socket");
		goto fail;
	}
	/* Notifications carry no sequence numbers we asked for. */
	nl_socket_disable_seq_check(m->sk);
	nl_socket_modify_cb(m->sk, NL_CB_VALID, NL_CB_CUSTOM, monitor_msg_cb, m);
	if ((err = nl_connect(m->sk, NETLINK_ROUTE)) < 0) {
		xasprintf(cause, "netlink monitor: connecting: %s",
		    nl_geterror(err));
		goto fail;
	}
	err = nl_socket_add_memberships(m->sk, RTNLGRP_LINK,
	    RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV4_ROUTE,
	    RTNLGRP_IPV6_ROUTE, 0);
	if (err < 0) {
		xasprintf(cause, "netlink monitor: joining groups: %s",
		    nl_geterror(err));
		goto fail;
	}
	if ((err = nl_socket_set_nonblocking(m->sk)) < 0) {
		xasprintf(cause, "netlink monitor: %s", nl_geterror(err));
		goto fail;
	}
	fd = nl_socket_get_fd(m->sk);
	/* As root the limit of net.core.rmem_max does not apply; otherwise
	 * take what the system allows. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);

	m->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, read_cb, m);
	m->ev_report = event_new(base, -1, 0, report_cb, m);
	if (m->ev_read == NULL || m->ev_report == NULL) {
		xasprintf(cause, "netlink monitor: cannot create events");
		goto fail;
	}
	if (event_add(m->ev_read, NULL) != 0) {
		xasprintf(cause, "netlink monitor: cannot add read event");
		goto fail;
	}
	return m;

fail:
	tun_monitor_free(m);
	return NULL;
}

void
tun_monitor_free(struct tun_monitor *m)
{
	if (m == NULL)
		return;
	if (m->freed != NULL)
		*m->freed = true;
	if (m->ev_read != NULL)
		event_free(m->ev_read);
	if (m->ev_report != NULL)
		event_free(m->ev_report);
	if (m->sk != NULL)
		nl_socket_free(m->sk);
	free(m);
}

/* Netlink monitor: reports link, address and route changes to the event loop,
 * so the client can roam when its path to the server changes. */
#ifndef ROVE_TUN_MONITOR_H
#define ROVE_TUN_MONITOR_H

struct event_base;

/* What changed; the callback then asks the kernel for the new state (for
 * example with tun_netlink_get_route). The monitor never says what changed
 * in detail: after a burst of changes only the end state matters. */
enum tun_monitor_event {
	TUN_MONITOR_LINK,       /* a link appeared, vanished, went up or down */
	TUN_MONITOR_ADDRESS,    /* an IPv4 or IPv6 address was added or removed */
	TUN_MONITOR_ROUTE,      /* an IPv4 or IPv6 route was added or removed */
};

typedef void (*tun_monitor_cb)(enum tun_monitor_event, void *arg);

struct tun_monitor;

/*
 * Subscribe to RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR,
 * RTNLGRP_IPV4_ROUTE and RTNLGRP_IPV6_ROUTE and watch the socket on `base`.
 * Events are coalesced: `cb` runs at most once per kind per pass of the
 * event loop, however many notifications arrived. If the kernel dropped
 * notifications (socket overrun), every kind is reported, since anything
 * may have changed. `cb` may call tun_monitor_free.
 * Returns the monitor (caller owns it), or NULL with *cause set (caller
 * frees).
 */
struct tun_monitor *tun_monitor_create(struct event_base *base,
    tun_monitor_cb cb, void *arg, char **cause);
/* Stop watching and free; accepts NULL. */
void tun_monitor_free(struct tun_monitor *);

/* "link", "address" or "route". */
const char *tun_monitor_event_name(enum tun_monitor_event);

#endif

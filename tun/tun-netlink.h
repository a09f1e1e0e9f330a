/* Netlink through libnl-route: addresses, MTU, link state and routes of the
 * TUN device, and the route towards a remote endpoint. */
#ifndef ROVE_TUN_NETLINK_H
#define ROVE_TUN_NETLINK_H

#include <stdbool.h>

#include "base/addr.h"

/* All functions return 0 or -1 with *cause set (caller frees). */

/* Add `addr` (address with its prefix length) to interface `ifindex`. */
int tun_netlink_add_address(int ifindex, const struct prefix *addr, char **cause);
int tun_netlink_del_address(int ifindex, const struct prefix *addr, char **cause);
/* Set the MTU and bring the link up. */
int tun_netlink_set_mtu_up(int ifindex, unsigned mtu, char **cause);
/* Route `dst` through interface `ifindex` (no gateway). */
int tun_netlink_add_route(int ifindex, const struct prefix *dst, char **cause);
int tun_netlink_del_route(int ifindex, const struct prefix *dst, char **cause);
/* The same route, taking the prefix over from whichever device had it
 * (NLM_F_REPLACE): roved's workers hand a peer's routes between them. */
int tun_netlink_replace_route(int ifindex, const struct prefix *dst,
    char **cause);

/* The path the kernel would use now to reach `dst`: gateway (if any),
 * output interface and preferred source address. */
struct tun_netlink_path {
	bool has_gateway;
	struct ipaddr gateway;
	int ifindex;
	bool has_src;
	struct ipaddr src;
};
int tun_netlink_get_route(const struct ipaddr *dst, struct tun_netlink_path *,
    char **cause);

/* 1 if the link is up and has a carrier, 0 if not, -1 with *cause if its
 * state cannot be read. */
int tun_netlink_link_running(int ifindex, char **cause);

/* A host route to `dst` along `path` (gateway and interface), so that a
 * broader route through the tunnel does not capture the tunnel's own
 * packets. Removed with tun_netlink_del_host_route. */
int tun_netlink_add_host_route(const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause);
int tun_netlink_del_host_route(const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause);

#endif

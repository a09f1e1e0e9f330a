/* Netlink through libnl-route: addresses, MTU, link state and routes of the
 * TUN device, and the route towards a remote endpoint. */
#ifndef ROVE_TUN_NETLINK_H
#define ROVE_TUN_NETLINK_H

#include <stdbool.h>
#include <stdint.h>

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
/* The same in routing table `table` (0: main). */
int tun_netlink_add_route_table(int ifindex, const struct prefix *dst,
    uint32_t table, char **cause);
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
/* The same for a packet carrying firewall mark `mark` (0: none), which
 * policy rules may route elsewhere. */
int tun_netlink_get_route_marked(const struct ipaddr *dst, uint32_t mark,
    struct tun_netlink_path *, char **cause);

/* Policy routing for a full tunnel, as wg-quick sets it up: routes that
 * would capture the tunnel's own packets live in table `mark`, consulted
 * for every packet of `family` without firewall mark `mark` (the tunnel's
 * own sockets carry it) once the main table has nothing more specific than
 * a default route:
 *	not fwmark MARK lookup MARK
 *	lookup main suppress_prefixlength 0
 * Whatever the uplinks do, the tunnel's packets then follow the main
 * table's default route. `add` false removes both rules. */
int tun_netlink_policy(bool add, int family, uint32_t mark, char **cause);

/* 1 if the link is up and has a carrier, 0 if not, -1 with *cause if its
 * state cannot be read. */
int tun_netlink_link_running(int ifindex, char **cause);

/* An uplink: a default route of the main table, the way out it names,
 * and an address of ours on that interface to send from. */
struct tun_netlink_uplink {
	int ifindex;
	uint32_t metric;
	bool has_gateway;
	struct ipaddr gateway;
	struct ipaddr src;
	bool running;            /* link up with a carrier */
};
/* The uplinks of `family` (default routes through an interface that has
 * a global address of that family, other than `skip_ifindex`), best
 * metric first; at most `max`. Returns how many, or -1 with *cause. */
int tun_netlink_uplinks(int family, int skip_ifindex,
    struct tun_netlink_uplink *, size_t max, char **cause);

/* A host route to `dst` along `path` (gateway and interface), so that a
 * broader route through the tunnel does not capture the tunnel's own
 * packets. Removed with tun_netlink_del_host_route. */
int tun_netlink_add_host_route(const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause);
int tun_netlink_del_host_route(const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause);

#endif

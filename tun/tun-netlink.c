/* Netlink through libnl-route: TUN addresses, MTU, link state and routes. */
#include <sys/socket.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/addr.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet6.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/cache.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "tun-netlink.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* How long one request may wait for the kernel's answer. */
#define NL_TIMEOUT_SEC 5

/*
 * Each call opens its own netlink socket and closes it before returning.
 * These calls happen at startup and on the rare roaming event, so the cost
 * of a socket is nothing, and no state survives between calls: no stray
 * replies or notifications queued on a long-lived socket, no sequence
 * numbers to resynchronise, and nothing to get wrong if the process
 * changes network namespace or drops privileges in between.
 */
struct nl_req {
	struct nl_sock *sk;
	int kernel_errno;       /* errno from the kernel's NLMSG_ERROR */
	char extack[160];       /* its extended-ack text, if any */
};

struct route_spec {
	int family;
	const uint8_t *dst;
	unsigned dst_len;
	int ifindex;
	const struct ipaddr *gateway;   /* NULL for a direct route */
	uint32_t table;                 /* 0: the main table */
};

/* What can be wrong with the kernel's answer to RTM_GETROUTE. */
#define GET_BAD_REPLY 1         /* malformed */
#define GET_BAD_TYPE 2          /* unreachable, blackhole, ... */
#define GET_NO_OIF 3            /* no output interface */
#define GET_VIA 4               /* gateway of the other family (RTA_VIA) */

struct get_reply {
	int family;
	bool done;
	int error;              /* 0, or one of GET_* */
	unsigned char type;
	struct tun_netlink_path *path;
};

static size_t
family_bytes(int family)
{
	return family == AF_INET ? 4 : 16;
}

static unsigned
family_bits(int family)
{
	return family == AF_INET ? 32 : 128;
}

static const char *
ip_str(int family, const uint8_t *b, char *buf, size_t len)
{
	if (inet_ntop(family, b, buf, (socklen_t)len) == NULL)
		snprintf(buf, len, "?");
	return buf;
}

static const char *
if_str(int ifindex, char buf[static IF_NAMESIZE + 16])
{
	char name[IF_NAMESIZE];

	if (ifindex > 0 && if_indextoname((unsigned)ifindex, name) != NULL)
		snprintf(buf, IF_NAMESIZE + 16, "%s", name);
	else
		snprintf(buf, IF_NAMESIZE + 16, "ifindex %d", ifindex);
	return buf;
}

static bool
valid_family(int family)
{
	return family == AF_INET || family == AF_INET6;
}

/* True if no bit beyond `len` is set in `b`. */
static bool
no_host_bits(const uint8_t *b, unsigned len, unsigned bits)
{
	for (unsigned i = len; i < bits; i++) {
		if (b[i / 8] & (0x80 >> (i % 8)))
			return false;
	}
	return true;
}

/* Remember the kernel's own errno and message: nl_geterror() would turn
 * EEXIST into "Object exists", which is not what `ip` users know. */
static int
nl_error_cb(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	struct nl_req *req = arg;
	struct nlmsghdr *h = (struct nlmsghdr *)((char *)e - NLMSG_HDRLEN);
	size_t payload, off;
	struct nlattr *a;

	(void)who;
	req->kernel_errno = -e->error;
	req->extack[0] = '\0';
	if (!(h->nlmsg_flags & NLM_F_ACK_TLVS))
		return NL_STOP;

	/* The TLVs follow the error and, unless capped, the echoed request. */
	payload = h->nlmsg_len - NLMSG_HDRLEN;
	off = sizeof *e;
	if (!(h->nlmsg_flags & NLM_F_CAPPED)) {
		if (e->msg.nlmsg_len < NLMSG_HDRLEN)
			return NL_STOP;
		off += e->msg.nlmsg_len - NLMSG_HDRLEN;
	}
	off = NLMSG_ALIGN(off);
	if (off >= payload)
		return NL_STOP;
	a = nla_find((struct nlattr *)((char *)e + off), (int)(payload - off),
	    NLMSGERR_ATTR_MSG);
	if (a != NULL && nla_len(a) > 0) {
		size_t n = strnlen(nla_data(a), (size_t)nla_len(a));

		if (n >= sizeof req->extack)
			n = sizeof req->extack - 1;
		memcpy(req->extack, nla_data(a), n);
		req->extack[n] = '\0';
	}
	return NL_STOP;
}

static int
nl_req_open(struct nl_req *req, char **cause)
{
	struct timeval tv = { .tv_sec = NL_TIMEOUT_SEC };
	int one = 1, err, fd;

	memset(req, 0, sizeof *req);
	req->sk = nl_socket_alloc();
	if (req->sk == NULL) {
		xasprintf(cause, "netlink: cannot allocate socket");
		return -1;
	}
	err = nl_connect(req->sk, NETLINK_ROUTE);
	if (err < 0) {
		xasprintf(cause, "netlink: connecting: %s", nl_geterror(err));
		nl_socket_free(req->sk);
		req->sk = NULL;
		return -1;
	}
	nl_socket_modify_err_cb(req->sk, NL_CB_CUSTOM, nl_error_cb, req);
	fd = nl_socket_get_fd(req->sk);
	/* Both are best effort: old kernels lack extended acks, and the
	 * timeout only guards against a kernel that never answers. */
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	return 0;
}

static void
nl_req_close(struct nl_req *req)
{
	if (req->sk != NULL)
		nl_socket_free(req->sk);
	req->sk = NULL;
}

/* Set *cause to "<what>: <reason>", the reason from the kernel if it gave
 * one, else from libnl's code `err`. */
static void
nl_req_cause(struct nl_req *req, int err, char **cause, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (req->kernel_errno > 0 && req->extack[0] != '\0')
		xasprintf(cause, "%s: %s (%s)", what,
		    strerror(req->kernel_errno), req->extack);
	else if (req->kernel_errno > 0)
		xasprintf(cause, "%s: %s", what, strerror(req->kernel_errno));
	else
		xasprintf(cause, "%s: %s", what, nl_geterror(err));
}

static struct nl_addr *
make_nl_addr(int family, const uint8_t *b, unsigned prefixlen)
{
	struct nl_addr *a;

	a = nl_addr_build(family, b, family_bytes(family));
	if (a == NULL)
		fatalx("%s: out of memory", __func__);
	nl_addr_set_prefixlen(a, (int)prefixlen);
	return a;
}

static int
check_prefix(const struct prefix *p, const char *what, char **cause)
{
	if (p == NULL) {
		xasprintf(cause, "%s: no prefix given", what);
		return -1;
	}
	if (!valid_family(p->addr.family)) {
		xasprintf(cause, "%s: unsupported address family %d", what,
		    p->addr.family);
		return -1;
	}
	if (p->len > family_bits(p->addr.family)) {
		xasprintf(cause, "%s: invalid prefix length %u", what,
		    (unsigned)p->len);
		return -1;
	}
	return 0;
}

static int
check_ifindex(int ifindex, const char *what, char **cause)
{
	if (ifindex <= 0) {
		xasprintf(cause, "%s: invalid interface index %d", what, ifindex);
		return -1;
	}
	return 0;
}

/* Add (or with `del`, remove) `addr` on interface `ifindex`. */
static int
change_address(int ifindex, const struct prefix *addr, bool del, char **cause)
{
	const char *what = del ? "removing address" : "adding address";
	struct nl_req req;
	struct rtnl_addr *ra = NULL;
	struct nl_addr *local = NULL;
	char ip[INET6_ADDRSTRLEN], ifs[IF_NAMESIZE + 16];
	int err, ret = -1;

	if (check_prefix(addr, what, cause) != 0 ||
	    check_ifindex(ifindex, what, cause) != 0)
		return -1;
	if (nl_req_open(&req, cause) != 0)
		return -1;

	ra = rtnl_addr_alloc();
	if (ra == NULL)
		fatalx("%s: out of memory", __func__);
	local = make_nl_addr(addr->addr.family, addr->addr.b, addr->len);
	rtnl_addr_set_ifindex(ra, ifindex);
	rtnl_addr_set_family(ra, addr->addr.family);
	if ((err = rtnl_addr_set_local(ra, local)) < 0)
		goto fail;
	rtnl_addr_set_prefixlen(ra, addr->len);
	if ((err = del ? rtnl_addr_delete(req.sk, ra, 0) :
	    rtnl_addr_add(req.sk, ra, NLM_F_EXCL)) < 0)
		goto fail;
	ret = 0;
	goto out;

fail:
	nl_req_cause(&req, err, cause, "%s %s/%u %s %s", what,
	    ip_str(addr->addr.family, addr->addr.b, ip, sizeof ip),
	    (unsigned)addr->len, del ? "from" : "to", if_str(ifindex, ifs));
out:
	nl_addr_put(local);
	rtnl_addr_put(ra);
	nl_req_close(&req);
	return ret;
}

int
tun_netlink_add_address(int ifindex, const struct prefix *addr, char **cause)
{
	return change_address(ifindex, addr, false, cause);
}

int
tun_netlink_del_address(int ifindex, const struct prefix *addr, char **cause)
{
	return change_address(ifindex, addr, true, cause);
}

int
tun_netlink_set_mtu_up(int ifindex, unsigned mtu, char **cause)
{
	struct nl_req req;
	struct rtnl_link *orig = NULL, *change = NULL;
	char ifs[IF_NAMESIZE + 16];
	int err, ret = -1;

	if (check_ifindex(ifindex, "setting MTU", cause) != 0)
		return -1;
	if (nl_req_open(&req, cause) != 0)
		return -1;

	orig = rtnl_link_alloc();
	change = rtnl_link_alloc();
	if (orig == NULL || change == NULL)
		fatalx("%s: out of memory", __func__);
	rtnl_link_set_ifindex(orig, ifindex);
	/* No IPv6 link-local address (as WireGuard's devices have none): the
	 * kernel then sends no router solicitations into the tunnel, which
	 * nobody could answer and rove would count as dropped. Before the
	 * link comes up, when the kernel would make one; a kernel without
	 * IPv6 refuses it, which is no matter. */
	if (rtnl_link_inet6_set_addr_gen_mode(change, IN6_ADDR_GEN_MODE_NONE) == 0 &&
	    (err = rtnl_link_change(req.sk, orig, change, 0)) < 0)
		log_debug("%s: no IPv6 address generation mode: %s",
		    if_str(ifindex, ifs), nl_geterror(err));
	rtnl_link_put(change);
	if ((change = rtnl_link_alloc()) == NULL)
		fatalx("%s: out of memory", __func__);
	/* One message: the kernel applies the MTU before the flags, so the
	 * link never comes up with the wrong MTU. */
	rtnl_link_set_mtu(change, mtu);
	rtnl_link_set_flags(change, IFF_UP);
	/* The tunnel routes by unicast destination: without multicast the
	 * kernel sends no MLD or IGMP reports into it, which nobody could
	 * route and rove would count as dropped. */
	rtnl_link_unset_flags(change, IFF_MULTICAST);
	err = rtnl_link_change(req.sk, orig, change, 0);
	if (err < 0) {
		nl_req_cause(&req, err, cause, "setting MTU %u and link up on %s",
		    mtu, if_str(ifindex, ifs));
		goto out;
	}
	ret = 0;
out:
	rtnl_link_put(change);
	rtnl_link_put(orig);
	nl_req_close(&req);
	return ret;
}

int
tun_netlink_link_running(int ifindex, char **cause)
{
	struct nl_req req;
	struct rtnl_link *link = NULL;
	char ifs[IF_NAMESIZE + 16];
	unsigned flags, carrier;
	int err;

	if (check_ifindex(ifindex, "reading link state", cause) != 0)
		return -1;
	if (nl_req_open(&req, cause) != 0)
		return -1;
	if ((err = rtnl_link_get_kernel(req.sk, ifindex, NULL, &link)) < 0) {
		nl_req_cause(&req, err, cause, "reading the state of %s",
		    if_str(ifindex, ifs));
		nl_req_close(&req);
		return -1;
	}
	flags = rtnl_link_get_flags(link);
	carrier = rtnl_link_get_carrier(link);
	rtnl_link_put(link);
	nl_req_close(&req);
	return (flags & IFF_UP) && carrier != 0 ? 1 : 0;
}

/* Describe a route for messages: "10.0.0.0/8 via 192.0.2.1 dev eth0". */
static void
route_str(const struct route_spec *rs, char *buf, size_t len)
{
	char dst[INET6_ADDRSTRLEN], gw[INET6_ADDRSTRLEN], ifs[IF_NAMESIZE + 16];

	ip_str(rs->family, rs->dst, dst, sizeof dst);
	if_str(rs->ifindex, ifs);
	if (rs->gateway != NULL)
		snprintf(buf, len, "%s/%u via %s dev %s", dst, rs->dst_len,
		    ip_str(rs->gateway->family, rs->gateway->b, gw, sizeof gw),
		    ifs);
	else
		snprintf(buf, len, "%s/%u dev %s", dst, rs->dst_len, ifs);
}

/* The socket route_change keeps: a server with workers changes a route
 * for every connection that comes and goes, and a socket of its own per
 * change (made, bound, closed) cost more than the change itself. Kept
 * per process: a forked worker opens its own, so that no answer goes to
 * the wrong process. */
static struct nl_req route_req;
static pid_t route_req_pid;

static int
route_req_get(char **cause)
{
	if (route_req.sk != NULL && route_req_pid != getpid())
		nl_req_close(&route_req);   /* the parent's: closed here only */
	if (route_req.sk == NULL) {
		if (nl_req_open(&route_req, cause) != 0)
			return -1;
		route_req_pid = getpid();
	}
	route_req.kernel_errno = 0;
	route_req.extack[0] = '\0';
	return 0;
}

/* Add (with `nlflags`) or delete one route (in the main table unless
 * `rs` names another). */
static int
route_change(bool add, const struct route_spec *rs, int nlflags,
    const char *what, char **cause)
{
	struct nl_req *req = &route_req;
	struct rtnl_route *route = NULL;
	struct rtnl_nexthop *nh;
	struct nl_addr *dst = NULL, *gw = NULL;
	char desc[256];
	int err, ret = -1;

	if (route_req_get(cause) != 0)
		return -1;

	route = rtnl_route_alloc();
	nh = rtnl_route_nh_alloc();
	if (route == NULL || nh == NULL)
		fatalx("%s: out of memory", __func__);
	dst = make_nl_addr(rs->family, rs->dst, rs->dst_len);
	rtnl_route_set_family(route, (uint8_t)rs->family);
	rtnl_route_set_table(route, rs->table != 0 ? rs->table : RT_TABLE_MAIN);
	rtnl_route_set_protocol(route, RTPROT_STATIC);
	rtnl_route_set_type(route, RTN_UNICAST);
	/* A route through a gateway reaches beyond the link; a direct one
	 * does not. Deletion matches on the scope too, so set it both ways. */
	rtnl_route_set_scope(route, rs->gateway != NULL ? RT_SCOPE_UNIVERSE :
	    RT_SCOPE_LINK);
	rtnl_route_nh_set_ifindex(nh, rs->ifindex);
	if (rs->gateway != NULL) {
		gw = make_nl_addr(rs->gateway->family, rs->gateway->b,
		    family_bits(rs->gateway->family));
		rtnl_route_nh_set_gateway(nh, gw);
	}
	rtnl_route_add_nexthop(route, nh);      /* the route owns nh now */
	if ((err = rtnl_route_set_dst(route, dst)) < 0)
		goto fail;

	if (add)
		err = rtnl_route_add(req->sk, route, nlflags);
	else
		err = rtnl_route_delete(req->sk, route, 0);
	if (err < 0)
		goto fail;
	ret = 0;
	goto out;

fail:
	route_str(rs, desc, sizeof desc);
	nl_req_cause(req, err, cause, "%s %s", what, desc);
	/* Without the kernel's refusal, the socket itself failed (or timed
	 * out, an answer perhaps still to come): the next change gets a new
	 * one. */
	if (req->kernel_errno <= 0)
		nl_req_close(req);
out:
	nl_addr_put(gw);
	nl_addr_put(dst);
	rtnl_route_put(route);
	return ret;
}

static int
prefix_route(bool add, int ifindex, const struct prefix *dst, uint32_t table,
    int nlflags, char **cause)
{
	const char *what = add ? "adding route" : "deleting route";
	struct route_spec rs;
	char ip[INET6_ADDRSTRLEN];

	if (check_prefix(dst, what, cause) != 0 ||
	    check_ifindex(ifindex, what, cause) != 0)
		return -1;
	if (!no_host_bits(dst->addr.b, dst->len, family_bits(dst->addr.family))) {
		xasprintf(cause, "%s %s/%u: host bits set", what,
		    ip_str(dst->addr.family, dst->addr.b, ip, sizeof ip),
		    (unsigned)dst->len);
		return -1;
	}
	rs.family = dst->addr.family;
	rs.dst = dst->addr.b;
	rs.dst_len = dst->len;
	rs.ifindex = ifindex;
	rs.gateway = NULL;
	rs.table = table;
	return route_change(add, &rs, nlflags, what, cause);
}

int
tun_netlink_add_route(int ifindex, const struct prefix *dst, char **cause)
{
	return tun_netlink_add_route_table(ifindex, dst, 0, cause);
}

int
tun_netlink_add_route_table(int ifindex, const struct prefix *dst,
    uint32_t table, char **cause)
{
	/* NLM_F_EXCL: an existing route to the same prefix belongs to someone
	 * else; replacing it and deleting ours later would lose theirs. */
	return prefix_route(true, ifindex, dst, table, NLM_F_EXCL, cause);
}

int
tun_netlink_replace_route(int ifindex, const struct prefix *dst, char **cause)
{
	return prefix_route(true, ifindex, dst, 0, NLM_F_REPLACE, cause);
}

int
tun_netlink_del_route(int ifindex, const struct prefix *dst, char **cause)
{
	return prefix_route(false, ifindex, dst, 0, 0, cause);
}

/* One policy rule: `[not] fwmark MARK lookup TABLE`, or with `suppress`
 * `lookup TABLE suppress_prefixlength 0`. libnl's rule object has neither
 * the inversion nor suppress_prefixlength, so the message is built here,
 * as `ip rule` builds it. The kernel picks the priority, just above the
 * main table's rule, as `ip rule add` without `pref` does. */
static int
policy_rule(bool add, int family, uint32_t mark, bool invert, bool suppress,
    uint32_t table, char **cause)
{
	struct nl_req *req = &route_req;
	struct nl_msg *msg;
	struct fib_rule_hdr frh;
	char desc[96];
	int err;

	if (route_req_get(cause) != 0)
		return -1;
	msg = nlmsg_alloc_simple(add ? RTM_NEWRULE : RTM_DELRULE,
	    add ? NLM_F_CREATE | NLM_F_EXCL : 0);
	if (msg == NULL)
		fatalx("%s: out of memory", __func__);
	memset(&frh, 0, sizeof frh);
	frh.family = (uint8_t)family;
	frh.action = FR_ACT_TO_TBL;
	frh.flags = invert ? FIB_RULE_INVERT : 0;
	frh.table = table < 256 ? (uint8_t)table : RT_TABLE_UNSPEC;
	if ((err = nlmsg_append(msg, &frh, sizeof frh, NLMSG_ALIGNTO)) < 0 ||
	    (err = nla_put_u32(msg, FRA_TABLE, table)) < 0 ||
	    (mark != 0 && (err = nla_put_u32(msg, FRA_FWMARK, mark)) < 0) ||
	    (mark != 0 && (err = nla_put_u32(msg, FRA_FWMASK, UINT32_MAX)) < 0) ||
	    (suppress && (err = nla_put_u32(msg, FRA_SUPPRESS_PREFIXLEN, 0)) < 0))
		goto fail;
	if ((err = nl_send_sync(req->sk, msg)) < 0) {
		msg = NULL;     /* nl_send_sync frees it, even on failure */
		goto fail;
	}
	return 0;

fail:
	nlmsg_free(msg);
	if (mark != 0)
		snprintf(desc, sizeof desc, "%sfwmark 0x%x lookup %u",
		    invert ? "not " : "", (unsigned)mark, (unsigned)table);
	else
		snprintf(desc, sizeof desc, "lookup %u%s", (unsigned)table,
		    suppress ? " suppress_prefixlength 0" : "");
	nl_req_cause(req, err, cause, "%s the policy rule \"%s\"",
	    add ? "adding" : "deleting", desc);
	if (req->kernel_errno <= 0)
		nl_req_close(req);
	return -1;
}

int
tun_netlink_policy(bool add, int family, uint32_t mark, char **cause)
{
	int rv;

	if (family != AF_INET && family != AF_INET6) {
		xasprintf(cause, "policy routing: unsupported address family %d",
		    family);
		return -1;
	}
	if (!add) {
		/* Both go, even when the first is gone already. */
		char *second = NULL;

		rv = policy_rule(false, family, 0, false, true, RT_TABLE_MAIN, cause);
		if (policy_rule(false, family, mark, true, false, mark, &second) != 0) {
			if (rv == 0) {
				*cause = second;
				return -1;
			}
			free(second);
		}
		return rv;
	}
	/* Added in this order, the kernel puts the second before the first:
	 * main's own routes (but not its default) first, then our table for
	 * every packet without our mark. */
	if (policy_rule(true, family, mark, true, false, mark, cause) != 0)
		return -1;
	if (policy_rule(true, family, 0, false, true, RT_TABLE_MAIN, cause) != 0) {
		char *ignored = NULL;

		policy_rule(false, family, mark, true, false, mark, &ignored);
		free(ignored);
		return -1;
	}
	return 0;
}

static int
host_route(bool add, const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause)
{
	const char *what = add ? "adding host route" : "deleting host route";
	struct route_spec rs;

	if (dst == NULL || path == NULL) {
		xasprintf(cause, "%s: no destination or path given", what);
		return -1;
	}
	if (!valid_family(dst->family)) {
		xasprintf(cause, "%s: unsupported address family %d", what,
		    dst->family);
		return -1;
	}
	if (check_ifindex(path->ifindex, what, cause) != 0)
		return -1;
	if (path->has_gateway && path->gateway.family != dst->family) {
		xasprintf(cause, "%s: gateway address family %d differs from "
		    "destination's %d", what, path->gateway.family, dst->family);
		return -1;
	}
	rs.family = dst->family;
	rs.dst = dst->b;
	rs.dst_len = family_bits(dst->family);
	rs.ifindex = path->ifindex;
	rs.gateway = path->has_gateway ? &path->gateway : NULL;
	/* NLM_F_REPLACE: after roaming the same host route is installed again
	 * along the new path, and it must win over the old one. */
	return route_change(add, &rs, NLM_F_REPLACE, what, cause);
}

int
tun_netlink_add_host_route(const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause)
{
	return host_route(true, dst, path, cause);
}

int
tun_netlink_del_host_route(const struct ipaddr *dst,
    const struct tun_netlink_path *path, char **cause)
{
	return host_route(false, dst, path, cause);
}

static const char *
route_type_str(unsigned char type)
{
	switch (type) {
	case RTN_BLACKHOLE:
		return "blackhole";
	case RTN_UNREACHABLE:
		return "unreachable";
	case RTN_PROHIBIT:
		return "prohibit";
	case RTN_THROW:
		return "throw";
	case RTN_BROADCAST:
		return "broadcast";
	case RTN_MULTICAST:
		return "multicast";
	default:
		return "unusable";
	}
}

/* Copy an address attribute of exactly the family's size. */
static bool
attr_ip(struct nlattr *a, int family, struct ipaddr *out)
{
	size_t n = family_bytes(family);

	if (a == NULL || (size_t)nla_len(a) != n)
		return false;
	memset(out, 0, sizeof *out);
	out->family = family;
	memcpy(out->b, nla_data(a), n);
	return true;
}

/* Parse the RTM_NEWROUTE answer to our RTM_GETROUTE. */
static int
get_route_cb(struct nl_msg *msg, void *arg)
{
	struct get_reply *r = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct nlattr *tb[RTA_MAX + 1];
	struct rtmsg *rtm;

	if (h->nlmsg_type != RTM_NEWROUTE)
		return NL_SKIP;
	r->done = true;
	if (nlmsg_parse(h, sizeof *rtm, tb, RTA_MAX, NULL) < 0) {
		r->error = GET_BAD_REPLY;
		return NL_STOP;
	}
	rtm = nlmsg_data(h);
	if (rtm->rtm_family != r->family) {
		r->error = GET_BAD_REPLY;
		return NL_STOP;
	}
	r->type = rtm->rtm_type;
	if (rtm->rtm_type != RTN_UNICAST && rtm->rtm_type != RTN_LOCAL) {
		r->error = GET_BAD_TYPE;
		return NL_STOP;
	}
	if (tb[RTA_VIA] != NULL) {
		r->error = GET_VIA;
		return NL_STOP;
	}
	if (tb[RTA_OIF] == NULL || nla_len(tb[RTA_OIF]) != sizeof(uint32_t) ||
	    nla_get_u32(tb[RTA_OIF]) == 0 ||
	    nla_get_u32(tb[RTA_OIF]) > (uint32_t)INT32_MAX) {
		r->error = GET_NO_OIF;
		return NL_STOP;
	}
	r->path->ifindex = (int)nla_get_u32(tb[RTA_OIF]);
	r->path->has_gateway = attr_ip(tb[RTA_GATEWAY], r->family,
	    &r->path->gateway);
	r->path->has_src = attr_ip(tb[RTA_PREFSRC], r->family, &r->path->src);
	return NL_STOP;
}

int
tun_netlink_get_route(const struct ipaddr *dst, struct tun_netlink_path *path,
    char **cause)
{
	return tun_netlink_get_route_marked(dst, 0, path, cause);
}

int
tun_netlink_get_route_marked(const struct ipaddr *dst, uint32_t mark,
    struct tun_netlink_path *path, char **cause)
{
	struct nl_req req;
	struct nl_msg *msg = NULL;
	struct rtmsg rtm;
	struct get_reply r;
	char ip[INET6_ADDRSTRLEN];
	int err, ret = -1;

	if (dst == NULL || path == NULL) {
		xasprintf(cause, "getting route: no destination given");
		return -1;
	}
	if (!valid_family(dst->family)) {
		xasprintf(cause, "getting route: unsupported address family %d",
		    dst->family);
		return -1;
	}
	ip_str(dst->family, dst->b, ip, sizeof ip);
	memset(path, 0, sizeof *path);
	if (nl_req_open(&req, cause) != 0)
		return -1;

	/* What `ip route get` sends: an rtmsg with a full-length RTA_DST. */
	msg = nlmsg_alloc_simple(RTM_GETROUTE, 0);
	if (msg == NULL)
		fatalx("%s: out of memory", __func__);
	memset(&rtm, 0, sizeof rtm);
	rtm.rtm_family = (unsigned char)dst->family;
	rtm.rtm_dst_len = (unsigned char)family_bits(dst->family);
	if ((err = nlmsg_append(msg, &rtm, sizeof rtm, NLMSG_ALIGNTO)) < 0 ||
	    (err = nla_put(msg, RTA_DST, (int)family_bytes(dst->family),
	    dst->b)) < 0 ||
	    (mark != 0 && (err = nla_put_u32(msg, RTA_MARK, mark)) < 0))
		goto fail;

	memset(&r, 0, sizeof r);
	r.family = dst->family;
	r.path = path;
	nl_socket_modify_cb(req.sk, NL_CB_VALID, NL_CB_CUSTOM, get_route_cb, &r);
	if ((err = nl_send_auto(req.sk, msg)) < 0)
		goto fail;
	if ((err = nl_recvmsgs_default(req.sk)) < 0)
		goto fail;

	if (!r.done) {
		xasprintf(cause, "getting route to %s: no answer from the kernel",
		    ip);
		goto out;
	}
	switch (r.error) {
	case 0:
		ret = 0;
		break;
	case GET_BAD_TYPE:
		xasprintf(cause, "getting route to %s: %s route", ip,
		    route_type_str(r.type));
		break;
	case GET_NO_OIF:
		xasprintf(cause, "getting route to %s: no output interface", ip);
		break;
	case GET_VIA:
		xasprintf(cause, "getting route to %s: gateway of another "
		    "address family is not supported", ip);
		break;
	default:
		xasprintf(cause, "getting route to %s: malformed answer", ip);
		break;
	}
	goto out;

fail:
	nl_req_cause(&req, err, cause, "getting route to %s", ip);
out:
	if (ret != 0)
		memset(path, 0, sizeof *path);
	nlmsg_free(msg);
	nl_req_close(&req);
	return ret;
}

/* An address of `family` to send from on `ifindex`: a global one that is
 * not tentative or deprecated (IPv6 duplicate detection, a prefix being
 * retired). */
static bool
uplink_src(struct nl_cache *addrs, int family, int ifindex, struct ipaddr *out)
{
	for (struct nl_object *o = nl_cache_get_first(addrs); o != NULL;
	    o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		struct nl_addr *l = rtnl_addr_get_local(a);

		if (rtnl_addr_get_ifindex(a) != ifindex ||
		    rtnl_addr_get_family(a) != family || l == NULL ||
		    rtnl_addr_get_scope(a) != RT_SCOPE_UNIVERSE ||
		    (rtnl_addr_get_flags(a) & (IFA_F_TENTATIVE | IFA_F_DEPRECATED |
		    IFA_F_DADFAILED)) != 0 ||
		    nl_addr_get_len(l) != family_bytes(family))
			continue;
		memset(out, 0, sizeof *out);
		out->family = family;
		memcpy(out->b, nl_addr_get_binary_addr(l), family_bytes(family));
		return true;
	}
	return false;
}

int
tun_netlink_uplinks(int family, int skip_ifindex,
    struct tun_netlink_uplink *out, size_t max, char **cause)
{
	struct nl_req req;
	struct nl_cache *routes = NULL, *addrs = NULL, *links = NULL;
	size_t n = 0;
	int err;

	if (!valid_family(family)) {
		xasprintf(cause, "listing uplinks: unsupported address family %d",
		    family);
		return -1;
	}
	if (nl_req_open(&req, cause) != 0)
		return -1;
	if ((err = rtnl_route_alloc_cache(req.sk, family, 0, &routes)) < 0 ||
	    (err = rtnl_addr_alloc_cache(req.sk, &addrs)) < 0 ||
	    (err = rtnl_link_alloc_cache(req.sk, AF_UNSPEC, &links)) < 0) {
		nl_req_cause(&req, err, cause, "listing uplinks");
		n = SIZE_MAX;
		goto out;
	}
	for (struct nl_object *o = nl_cache_get_first(routes); o != NULL && n < max;
	    o = nl_cache_get_next(o)) {
		struct rtnl_route *r = (struct rtnl_route *)o;
		struct rtnl_nexthop *nh;
		struct rtnl_link *link;
		struct tun_netlink_uplink u;
		struct nl_addr *gw;
		size_t at;

		if (rtnl_route_get_table(r) != RT_TABLE_MAIN ||
		    rtnl_route_get_type(r) != RTN_UNICAST ||
		    nl_addr_get_prefixlen(rtnl_route_get_dst(r)) != 0 ||
		    rtnl_route_get_nnexthops(r) < 1 ||
		    (nh = rtnl_route_nexthop_n(r, 0)) == NULL)
			continue;
		memset(&u, 0, sizeof u);
		u.ifindex = rtnl_route_nh_get_ifindex(nh);
		u.metric = rtnl_route_get_priority(r);
		if (u.ifindex <= 0 || u.ifindex == skip_ifindex ||
		    !uplink_src(addrs, family, u.ifindex, &u.src))
			continue;
		if ((gw = rtnl_route_nh_get_gateway(nh)) != NULL &&
		    nl_addr_get_family(gw) == family &&
		    nl_addr_get_len(gw) == family_bytes(family)) {
			u.has_gateway = true;
			u.gateway.family = family;
			memcpy(u.gateway.b, nl_addr_get_binary_addr(gw),
			    family_bytes(family));
		}
		if ((link = rtnl_link_get(links, u.ifindex)) != NULL) {
			u.running = (rtnl_link_get_flags(link) & IFF_UP) &&
			    rtnl_link_get_carrier(link) != 0;
			rtnl_link_put(link);
		}
		/* Insertion sort by metric: a handful of routes at most. */
		for (at = n; at > 0 && out[at - 1].metric > u.metric; at--)
			out[at] = out[at - 1];
		out[at] = u;
		n++;
	}
out:
	nl_cache_free(links);
	nl_cache_free(addrs);
	nl_cache_free(routes);
	nl_req_close(&req);
	return n == SIZE_MAX ? -1 : (int)n;
}

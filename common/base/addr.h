/* Addresses, prefixes and endpoints: parsing, formatting, matching. */
#ifndef ROVE_ADDR_H
#define ROVE_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 address. IPv4 is stored in the first 4 bytes of `b`. */
struct ipaddr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t b[16];
};

/* An address with a prefix length (0..32 or 0..128). */
struct prefix {
	struct ipaddr addr;
	uint8_t len;
};

#define ADDR_STRLEN 64 /* enough for "[v6%scope]:port" and "v6/128" */

/* Parse "192.0.2.1" or "2001:db8::1". Returns 0, or -1 if malformed. */
int addr_parse_ip(const char *, struct ipaddr *);
/* Parse "192.0.2.0/24" or "fd00::/64"; a bare address gets /32 or /128.
 * Host bits beyond the length are allowed when `allow_host_bits` (an
 * interface address such as 10.77.0.1/24), else rejected. -1 if malformed. */
int addr_parse_prefix(const char *, struct prefix *, bool allow_host_bits);
/* Parse a port: plain digits, 1..65535. -1 otherwise. */
int addr_parse_port(const char *, uint16_t *);
/* Parse "host:port", "[v6]:port" or, when `default_port` > 0, a bare host.
 * `host` receives the host part (no brackets), NUL-terminated, at most
 * `hostlen` - 1 bytes. Port must be 1..65535. -1 if malformed. */
int addr_split_hostport(const char *, char *host, size_t hostlen,
    uint16_t *port, int default_port);
/* Parse a numeric endpoint ("192.0.2.1:4433", "[fd00::1]:4433") into a
 * sockaddr_storage. -1 if malformed or not numeric. */
int addr_parse_sockaddr(const char *, struct sockaddr_storage *, socklen_t *);

/* True if `a` lies inside `p`. Different families never match. */
bool addr_prefix_contains(const struct prefix *p, const struct ipaddr *a);
/* Zero the host bits of `p` so it names its network. */
void addr_prefix_mask(struct prefix *p);
bool addr_equal(const struct ipaddr *, const struct ipaddr *);
/* IPv4 multicast or limited broadcast, IPv6 multicast. */
bool addr_is_multicast(const struct ipaddr *);

/* Prepare an address a forward is about to connect to. An IPv4-mapped
 * address (::ffff:a.b.c.d) becomes plain IPv4, since that is the host a
 * connection to it reaches. Returns NULL if the result is a usable target,
 * else why not: "unspecified" (0.0.0.0/8, ::; Linux connects them to the
 * local host), "multicast", "broadcast" (255.255.255.255) or
 * "IPv4-compatible" (::a.b.c.d, deprecated, and whether it reaches the IPv4
 * host through an automatic tunnel depends on the host's modules). */
const char *addr_target_normalise(struct ipaddr *);
/* A prefix written in IPv4-mapped form (::ffff:a.b.c.d/96+n) becomes the
 * IPv4 prefix a.b.c.d/n, so it matches what addr_target_normalise makes of
 * the addresses inside it. Any other prefix is left as it is. */
void addr_prefix_normalise(struct prefix *);

/* A DNS name: labels of 1..63 letters, digits, '-' or '_', not starting
 * or ending with '-', at most 253 bytes, no trailing dot; a last label of
 * digits only (a mistyped IPv4 address) is refused. */
#define ADDR_DNS_NAME_MAX 253
bool addr_dns_name_valid(const char *);

/* Formatting into caller buffers of ADDR_STRLEN; return `buf`. */
const char *addr_ip_str(const struct ipaddr *, char buf[static ADDR_STRLEN]);
const char *addr_prefix_str(const struct prefix *, char buf[static ADDR_STRLEN]);
const char *addr_sockaddr_str(const struct sockaddr *, char buf[static ADDR_STRLEN]);

/* "host:port", with brackets around a host holding ':' (an IPv6
 * literal), cut to fit `len` bytes; returns `buf`. */
const char *addr_hostport_str(char *buf, size_t len, const char *host,
    uint16_t port);

/* Convert between struct ipaddr (+port) and sockaddr. */
void addr_to_sockaddr(const struct ipaddr *, uint16_t port,
    struct sockaddr_storage *, socklen_t *);
int addr_from_sockaddr(const struct sockaddr *, struct ipaddr *, uint16_t *port);

#endif

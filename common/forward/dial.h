/* Reaching a forward's target by name or address: an asynchronous DNS
 * lookup (libevent's evdns), a policy check on the address, a connect. */
#ifndef ROVE_DIAL_H
#define ROVE_DIAL_H

#include <event2/dns.h>
#include <event2/event.h>
#include <stdint.h>
#include <sys/socket.h>

struct dial;

/* The outcome: `fd` >= 0 connected (now the callee's), or -1 with `err` a
 * PROTO_FWD_ERR_* code (NAME when the lookup failed). */
typedef void (*dial_cb)(int fd, uint64_t err, void *arg);
/* Before connecting to an address the target resolved to (IPv4-mapped
 * already made IPv4; unspecified, multicast, broadcast and IPv4-compatible
 * addresses already refused): 0 to connect to it, else an error code
 * (DENIED for a policy refusal), and the dial moves on to the next address.
 * The dial ends with the first such code if no address passes. */
typedef uint64_t (*dial_check_cb)(const struct sockaddr *, void *arg);

/* A resolver reading /etc/resolv.conf and /etc/hosts, with short
 * timeouts, since a forward waits on it. NULL with *cause on failure. */
struct evdns_base *dial_resolver_new(struct event_base *, char **cause);

/* Resolve `host` (an address literal needs no lookup) and connect to the
 * first of its addresses that is a usable target and passes `check` (may
 * be NULL); the rest are not tried. `cb` runs exactly once,
 * from the event loop, never inside this call; the dial is then gone. */
struct dial *dial_start(struct event_base *, struct evdns_base *, const char *host,
    uint16_t port, dial_check_cb check, dial_cb cb, void *arg);
/* The same for a UDP flow: the socket is a UDP one connected to the
 * first address that passes (a connect that sends nothing, so it ends at
 * once; the kernel then takes datagrams from that address alone);
 * UNREACHABLE when the kernel has no route to it. */
struct dial *dial_start_udp(struct event_base *, struct evdns_base *,
    const char *host, uint16_t port, dial_check_cb check, dial_cb cb,
    void *arg);
/* Give up: `cb` will not run. NULL is fine. */
void dial_cancel(struct dial *);

#endif

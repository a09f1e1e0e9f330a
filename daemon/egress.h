/* Connections leaving roved on a peer's behalf: the AllowForward policy,
 * asynchronous name resolution, connecting to targets (-L, -D), and the
 * listeners of remote forwards (-R) with their AllowRemoteForward check. */
#ifndef ROVE_EGRESS_H
#define ROVE_EGRESS_H

#include <sys/queue.h>

#include <event2/event.h>
#include <stdint.h>

#include "config/cfg.h"
#include "forward/fwd.h"

struct egress;
struct egress_listener;
struct egress_req;

/* Requests held back until the owner says go (egress_hold_release): the
 * forwards of a 0-RTT flight that another member of a KeyDir group (or
 * another worker) issued the ticket for. Only the issuer's register can
 * tell a fresh flight from a replayed one; elsewhere a recorded first
 * flight would be taken once per member, so its targets are dialed only
 * once the handshake completes, which a replay never does. */
struct egress_hold {
	TAILQ_HEAD(, egress_req) reqs;
};

struct egress *egress_create(struct event_base *, char **cause);
void egress_free(struct egress *);

/* Acceptor side of a forward stream from `peer` asking for `hdr`: check
 * policy, resolve, connect, and finish with fwd_connected or fwd_fail.
 * With `hold`, nothing is resolved or dialed until egress_hold_release
 * (the stream's bytes wait, bounded by its flow-control window). */
void egress_request(struct egress *, const struct cfg_peer *peer,
    struct fwd *, const struct proto_fwd_header *hdr, struct egress_hold *hold);
void egress_hold_init(struct egress_hold *);
/* Dial everything held (the handshake completed). */
void egress_hold_release(struct egress *, struct egress_hold *);
/* fwd_ops.release: the forward died while we were working for it. */
void egress_release(struct fwd *, void *fwd_arg);
/* A UDP flow to `host`:`port` for `peer`: its AllowForward udp/ rules
 * checked, a UDP socket connected (udp_link_dialed gets the outcome).
 * Returns the work, for egress_udp_cancel if the flow ends first. */
struct udp_link;
void *egress_udp_request(struct egress *, const struct cfg_peer *peer,
    struct udp_link *, const char *host, uint16_t port);
void egress_udp_cancel(void *work);

/* Listen where `want` asks (its port, bind address and protocol) for
 * `peer` if AllowRemoteForward permits: no bind address is the loopback
 * addresses (127.0.0.1, and ::1 where the host has IPv6), "all" is
 * 0.0.0.0 and :: (IPv6 where the host has it). Each accepted connection
 * is opened as a forward through `set`; for a UDP one, each source that
 * sends to it is a flow of `udp`. Returns the listener, or NULL with
 * *code PROTO_FWD_ERR_DENIED or another error. */
struct udp_relay;
struct egress_listener *egress_listen(struct egress *, const struct cfg_peer *peer,
    struct fwd_set *set, struct udp_relay *udp,
    const struct proto_remote_forward *want, uint64_t *code);
void egress_listener_free(struct egress_listener *);
/* The request it was made for (port and bind address, as asked). */
const struct proto_remote_forward *egress_listener_request(
    const struct egress_listener *);
/* The addresses it listens on: "127.0.0.1:2222 and [::1]:2222" (a udp/
 * one's too, without the prefix). */
const char *egress_listener_where(const struct egress_listener *);

#endif

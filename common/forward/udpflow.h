/* The UDP flows of one connection (docs/PROTOCOL.md section 5, UDP flows):
 * which source address and port on the listening side, which target and
 * which DATAGRAM context make each one, their counters, the limit on how
 * many there are, and their idle expiry. Bookkeeping only: the sockets,
 * streams and timers belong to the owner. */
#ifndef ROVE_UDPFLOW_H
#define ROVE_UDPFLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "base/addr.h"
#include "wire/proto-udp.h"

/* Why a datagram was dropped. */
enum udp_drop {
	UDP_DROP_TOO_BIG,  /* larger than the path's DATAGRAM frames carry */
	UDP_DROP_REFUSED,  /* its flow was refused (policy, limit, target) */
	UDP_DROP_NO_FLOW,  /* a context that names no flow (yet) */
	UDP_DROP_LIMIT,    /* a new source while the flows are all taken */
	UDP_DROP_QUEUE,    /* the DATAGRAM queue or the socket was full */
	/* SOCKS5 UDP ASSOCIATE relays (DynamicForward): */
	UDP_DROP_FRAG,     /* a SOCKS fragment (FRAG not 0): not reassembled */
	UDP_DROP_FOREIGN,  /* from a source other than the association's client */
	UDP_DROP_HEADER,   /* a SOCKS UDP header that does not parse */
	UDP_DROP_COUNT
};

/* Lifetime counters, kept by the owner across connections. */
struct udp_flow_counters {
	uint64_t opened;   /* flows set up */
	uint64_t refused;  /* flows the far side refused, or this side did */
	uint64_t expired;  /* flows ended by their idle timeout */
	uint64_t drops[UDP_DROP_COUNT];
};

struct udp_flow {
	uint64_t ctx;
	/* The listening side's source of the flow (the opener's), as an
	 * address and port; all zero on the acceptor. */
	struct ipaddr src;
	uint16_t src_port;
	char target[PROTO_FWD_MAX_HOST + 8]; /* "host:port", for status */
	uint64_t created_ms, last_ms;
	uint64_t tx_dgrams, tx_bytes, rx_dgrams, rx_bytes;
	uint64_t drops[UDP_DROP_COUNT];
	/* The far side refused it: the source's datagrams are dropped (and
	 * counted) until the flow expires, rather than asking again for
	 * each one. */
	bool refused;
	void *arg; /* the owner's */
	TAILQ_ENTRY(udp_flow) link;
};

struct udp_flow_set {
	enum proto_udp_opener self; /* which contexts this side picks */
	uint64_t last_ctx;          /* the last one it picked (0: none) */
	size_t max;                 /* flows at once */
	uint64_t idle_ms;           /* a flow with no datagram for this long ends */
	struct udp_flow_counters *counters;
	TAILQ_HEAD(, udp_flow) list; /* oldest activity first */
	size_t n;
};

/* The idle timeout of a flow: a minute, as long as common NATs keep a UDP
 * mapping without traffic, and long enough for a DNS or a game client's
 * next packet. */
#define UDP_FLOW_IDLE_MS 60000
/* Flows per connection (per peer on roved). */
#define UDP_FLOW_MAX 256

void udp_flows_init(struct udp_flow_set *, enum proto_udp_opener self,
    size_t max, uint64_t idle_ms, struct udp_flow_counters *);
/* Free every flow, calling `release` (may be NULL) on each first. */
void udp_flows_clear(struct udp_flow_set *,
    void (*release)(struct udp_flow *, void *), void *arg);

/* Opener: a new flow for the source `src`:`port` to `target` (for
 * status), under the next context of this side. NULL when the set is full
 * (counted as a LIMIT drop) or this side's contexts have run out. */
struct udp_flow *udp_flow_open(struct udp_flow_set *, const struct ipaddr *src,
    uint16_t port, const char *target, uint64_t now_ms);
/* Acceptor: the peer set up a flow under `ctx`. NULL with *err set:
 * PROTOCOL for a context the peer may not pick or that is in use, LIMIT
 * when the set is full; either is counted as a refused flow. */
struct udp_flow *udp_flow_accept(struct udp_flow_set *, uint64_t ctx,
    const char *target, uint64_t now_ms, uint64_t *err);
/* Lookups (NULL: none). */
struct udp_flow *udp_flow_by_src(struct udp_flow_set *, const struct ipaddr *,
    uint16_t port);
struct udp_flow *udp_flow_by_ctx(struct udp_flow_set *, uint64_t ctx);

/* A datagram of `len` bytes went out to the peer (tx) or came from it
 * (rx); either keeps the flow alive. */
void udp_flow_tx(struct udp_flow_set *, struct udp_flow *, size_t len,
    uint64_t now_ms);
void udp_flow_rx(struct udp_flow_set *, struct udp_flow *, size_t len,
    uint64_t now_ms);
/* A datagram was dropped, for `flow` (may be NULL) and in the set. */
void udp_flow_drop(struct udp_flow_set *, struct udp_flow *, enum udp_drop);
/* The far side refused the flow: counted once; its source's datagrams
 * are dropped until it expires. */
void udp_flow_refused(struct udp_flow_set *, struct udp_flow *);
/* End one flow (its stream ended), or every flow idle for the set's
 * timeout by `now_ms` (counted as expired), calling `release` (may be
 * NULL) before each is freed. udp_flows_expire returns the milliseconds
 * until the next flow would expire, or UINT64_MAX when there is none. */
void udp_flow_close(struct udp_flow_set *, struct udp_flow *,
    void (*release)(struct udp_flow *, void *), void *arg);
uint64_t udp_flows_expire(struct udp_flow_set *, uint64_t now_ms,
    void (*release)(struct udp_flow *, void *), void *arg);
/* The name of a drop cause for status and metrics ("too_big", ...). */
const char *udp_drop_name(enum udp_drop);

#endif

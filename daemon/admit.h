/* Admission of new QUIC connections under load: address validation with
 * Retry and NEW_TOKEN tokens, a cap on half-open handshakes, and a rate
 * limit per source prefix. A flood of Initials then costs roved a header
 * parse and, at most, a stateless Retry each, and no handshake state that
 * it did not choose to keep. An Initial from a proven address that finds
 * every half-open slot taken waits in a bounded line instead of being
 * dropped (a dropped one costs its client a retransmission back-off):
 * returning clients (a NEW_TOKEN token) first, each class in arrival
 * order. Time is passed in (nanoseconds, clock.h). */
#ifndef ROVE_ADMIT_H
#define ROVE_ADMIT_H

#include <ngtcp2/ngtcp2.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "base/addr.h"
#include "wire/cid.h"

/* Half-open handshakes beyond which no new one starts at all. */
#define ADMIT_MAX_HALF_OPEN 256
/* TLS over TCP has a budget of its own, apart from QUIC's: a flood of
 * silent TCP connections (each address proven by TCP's handshake, so no
 * Retry stops it, and none waits in a line) cannot take QUIC's slots, nor
 * a flood of Initials TCP's. From ADMIT_TCP_PRESSURE under way on, a new
 * one from a source not known (see below) gets ADMIT_TCP_HURRY instead of
 * the usual handshake timeout, and so do those under way when the
 * pressure starts: a TLS handshake over TCP needs a few round trips and
 * no slow path, and a slot held for less time is a slot an attacker must
 * take again, at its prefix's rate. */
#define ADMIT_MAX_HALF_OPEN_TCP 128
#define ADMIT_TCP_PRESSURE (ADMIT_MAX_HALF_OPEN_TCP / 2)
#define ADMIT_TCP_HURRY (1 * NGTCP2_SECONDS)
/* Known sources: prefixes (as for the rate below) from which a peer
 * completed a handshake, or ended a session, within ADMIT_KNOWN_LIFETIME.
 * Only a configured peer's key can add one, so a flood cannot fill the
 * set; a slot taken by another prefix is lost to it (direct-mapped, keyed
 * hash). A known source over TCP keeps the usual timeout and, with the
 * budget full, takes the slot of the oldest handshake from a source that
 * is not known instead of being refused. */
#define ADMIT_KNOWN_SLOTS 2048
#define ADMIT_KNOWN_LIFETIME (24 * 3600 * NGTCP2_SECONDS)
/* New handshakes per source prefix (/32, /64): sustained rate and burst. */
#define ADMIT_PREFIX_RATE 10
#define ADMIT_PREFIX_BURST 20
#define ADMIT_PREFIX_SLOTS 1024
/* How long a Retry token is good for, and a NEW_TOKEN token (which is
 * also the period of key rotation: the previous key still verifies). With
 * a StateDir, its token.key holds the keys (STATE_TOKEN_ROTATE_S). */
#define ADMIT_RETRY_TOKEN_LIFETIME (10 * NGTCP2_SECONDS)
#define ADMIT_TOKEN_LIFETIME (3600 * NGTCP2_SECONDS)
#define ADMIT_SECRET_LEN 32
/* Initials waiting for a half-open slot, at most: enough for every peer
 * of a large server to come back at once after a restart (a waiter costs
 * its datagrams, 1.2-1.4 KiB each, against some 40 KiB for a session),
 * and bounded at about 24 MiB for one datagram each, 90 MiB for
 * ADMIT_WAIT_PKTS each. How long one may wait: its client gives up on
 * the attempt after 10 s (quic-udp.c), so one started later would only
 * hold a slot for nothing. The datagrams kept per waiter: its first
 * flight, in the order they came, which is the Initial and the 0-RTT
 * packets after it, or two Initials (0-RTT coalesced) when the
 * ClientHello carries a post-quantum key share; then, while there is
 * room, the client's retransmissions. */
#define ADMIT_WAIT_MAX 16384
/* Waiters started in one pass of the event loop (listener.c). */
#define ADMIT_WAIT_BATCH 16
#define ADMIT_WAIT_TIMEOUT (8 * NGTCP2_SECONDS)
#define ADMIT_WAIT_PKTS 4
#define ADMIT_WAIT_BUCKETS 8192

enum admit_verdict {
	ADMIT_ACCEPT,  /* start a handshake (see admit_result) */
	ADMIT_RETRY,   /* answer with the Retry packet admit_check wrote */
	ADMIT_DROP,    /* drop silently; the reason is counted */
	ADMIT_WAIT,    /* hand it to admit_wait_push: no slot free yet */
};

struct admit_stats {
	uint64_t accepted;       /* handshakes started */
	uint64_t validated;      /* ... of which with a valid token */
	uint64_t retries;        /* Retry packets sent */
	uint64_t bad_tokens;     /* Initials with a Retry token that failed */
	uint64_t rate_limited;   /* dropped: their prefix was over its rate */
	uint64_t half_open_full; /* dropped: too many handshakes under way
	                          * and the line of waiters full */
	uint64_t waited;         /* ... of the accepted: after a wait */
	uint64_t wait_dups;      /* datagrams of a waiter beyond
	                          * ADMIT_WAIT_PKTS: dropped */
	uint64_t wait_expired;   /* waiters whose client must have given up */
	/* TLS over TCP: connections closed at once, the budget being full
	 * and nothing to evict for them (or their source unknown); handshakes
	 * ended to make room for a known source; handshakes given
	 * ADMIT_TCP_HURRY (the caller counts those it hurries later). */
	uint64_t tcp_full;
	uint64_t tcp_evicted;
	uint64_t tcp_hurried;
};

struct admit_bucket {
	struct ipaddr prefix;
	uint64_t tokens_milli; /* thousandths of a handshake, for smooth refill */
	uint64_t last;         /* time of the last refill */
};

struct admit_known {
	struct ipaddr prefix;
	uint64_t seen;         /* 0: empty */
};

/* What an accepted TCP connection is to get. */
struct admit_tcp {
	bool known;            /* its source is known: never evicted */
	bool evict;            /* first end the oldest handshake of an unknown
	                        * source (the caller had one) */
	bool hurry_others;     /* the pressure starts: give the handshakes
	                        * under way from unknown sources
	                        * ADMIT_TCP_HURRY too */
	uint64_t timeout;      /* its handshake's, from now (ns) */
};

/* What an accepted Initial brings to quic_conn_server_create. */
struct admit_result {
	bool validated;          /* the address is proven (token) */
	bool retried;            /* it answered our Retry */
	ngtcp2_cid odcid;        /* retried: the DCID of its first Initial */
};

/* An admitted Initial waiting for a half-open slot, with the datagrams
 * for its DCID that came after it. Owned by the admit until popped, then
 * by the caller (admit_waiter_free). */
struct admit_waiter {
	TAILQ_ENTRY(admit_waiter) entry;
	struct admit_waiter *hnext;  /* the DCID index's chain */
	struct admit_result res;     /* admit_check's, when it arrived */
	ngtcp2_cid dcid;
	void *arg;                   /* the caller's: where it arrived */
	struct sockaddr_storage from;
	socklen_t fromlen;
	uint64_t since;
	size_t npkts;
	struct {
		uint8_t *data;
		size_t len;
		uint8_t ecn;
	} pkts[ADMIT_WAIT_PKTS];
};
TAILQ_HEAD(admit_waitq, admit_waiter);

struct admit {
	/* Half-open handshakes beyond which a new Initial must prove its
	 * address (answer a Retry, or bring a NEW_TOKEN token) before it
	 * gets a session (RetryThreshold; 0: always). */
	size_t retry_threshold;
	/* The token keys: StateDir's when `state` is set (they survive a
	 * restart, so a returning client's NEW_TOKEN token still counts),
	 * else these, made at start and rotated in memory. */
	struct state_server *state;
	uint8_t secret[2][ADMIT_SECRET_LEN]; /* [0] current, [1] previous */
	uint64_t rotated;                    /* when [0] became current */
	uint64_t wall_offset;   /* `now` + this: wall-clock ns, in tokens */
	uint64_t hash_key;
	/* The server's group ID, which a Retry's CID carries like every
	 * other CID it issues (NULL: none). */
	const struct cid_server_id *server_id;
	struct admit_bucket buckets[ADMIT_PREFIX_SLOTS];
	struct admit_known known[ADMIT_KNOWN_SLOTS];
	struct admit_stats stats;
	/* [0] returning clients (NEW_TOKEN token), [1] the others. */
	struct admit_waitq waitq[2];
	size_t nwaiting;
	struct admit_waiter *wait_index[ADMIT_WAIT_BUCKETS];
};

struct state_server;
/* `state` may be NULL (keys in memory only, for tests). */
void admit_init(struct admit *, size_t retry_threshold, uint64_t now,
    struct state_server *state);
/* Rotates the token key when it is older than ADMIT_TOKEN_LIFETIME. */
void admit_tick(struct admit *, uint64_t now);
/* Frees the waiters. */
void admit_clear(struct admit *);

/* The prefix a source address is held to: /32 for IPv4, /64 for IPv6 (what
 * one subscriber or host usually holds), in `p`; false for a sockaddr that
 * is neither. */
bool admit_source_prefix(const struct sockaddr *from, struct ipaddr *p);

/* Decide on the Initial `hd` (as ngtcp2_accept parsed it) from `from`,
 * with `half_open` handshakes under way. On ADMIT_RETRY the Retry packet
 * is in retry[0..*retrylen). ADMIT_WAIT: the address is proven and its
 * prefix within its rate, but ADMIT_MAX_HALF_OPEN are under way; the
 * caller passes it to admit_wait_push. */
enum admit_verdict admit_check(struct admit *, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *from, socklen_t fromlen, size_t half_open,
    uint64_t now, struct admit_result *, uint8_t *retry, size_t retrymax,
    size_t *retrylen);

/* The waiter for the Initial DCID `dcid`, or NULL. */
struct admit_waiter *admit_wait_find(struct admit *, const uint8_t *dcid,
    size_t dcidlen);
/* Queue the Initial `pkt` that admit_check answered ADMIT_WAIT (with
 * `res`); `arg` comes back with it. Copies the packet. */
void admit_wait_push(struct admit *, const ngtcp2_pkt_hd *hd,
    const struct admit_result *res, const uint8_t *pkt, size_t len,
    uint8_t ecn, const struct sockaddr *from, socklen_t fromlen, void *arg,
    uint64_t now);
/* Another datagram for waiter `w`'s DCID (an Initial or 0-RTT): kept
 * while there is room, else dropped (counted). */
void admit_wait_add(struct admit *, struct admit_waiter *w,
    const uint8_t *pkt, size_t len, uint8_t ecn);
/* The next waiter, returning clients first, oldest first; those waiting
 * longer than ADMIT_WAIT_TIMEOUT are freed on the way. NULL: none. Its
 * handshake counts as accepted; start it with w->res. */
struct admit_waiter *admit_wait_pop(struct admit *, uint64_t now);
void admit_waiter_free(struct admit_waiter *);

/* Decide on a TCP connection (TLS over TCP) from `from`, with
 * `half_open_tcp` TCP handshakes under way, `evictable` when one of them
 * is from an unknown source: ADMIT_ACCEPT (as `res` says) or ADMIT_DROP
 * (close it). Its address is proven, so no Retry applies: TCP's own
 * budget (ADMIT_MAX_HALF_OPEN_TCP) and the per-prefix rate, the latter
 * shared with QUIC's handshakes. */
enum admit_verdict admit_check_tcp(struct admit *, const struct sockaddr *from,
    size_t half_open_tcp, bool evictable, uint64_t now, struct admit_tcp *res);

/* A peer completed a handshake from `from`, or its session from there
 * ended: its prefix is known from `now` on. */
void admit_remember(struct admit *, const struct sockaddr *from, uint64_t now);
/* Whether `from`'s prefix is known. */
bool admit_known(struct admit *, const struct sockaddr *from, uint64_t now);

/* A NEW_TOKEN token for the peer at `to`, for its next connection. Returns
 * its length (at most NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN) or 0. */
size_t admit_new_token(struct admit *, const struct sockaddr *to,
    socklen_t tolen, uint64_t now, uint8_t *token, size_t max);

#endif

/* Admission of new QUIC connections under load: address validation with
 * Retry and NEW_TOKEN tokens, a cap on half-open handshakes, and a rate
 * limit per source prefix. A flood of Initials then costs roved a header
 * parse and, at most, a stateless Retry each, and no handshake state that
 * it did not choose to keep. Time is passed in (nanoseconds, clock.h). */
#ifndef ROVE_ADMIT_H
#define ROVE_ADMIT_H

#include <ngtcp2/ngtcp2.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "addr.h"
#include "cid.h"

/* Half-open handshakes beyond which no new one starts at all. */
#define ADMIT_MAX_HALF_OPEN 256
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

enum admit_verdict {
	ADMIT_ACCEPT,  /* start a handshake (see admit_result) */
	ADMIT_RETRY,   /* answer with the Retry packet admit_check wrote */
	ADMIT_DROP,    /* drop silently; the reason is counted */
};

struct admit_stats {
	uint64_t accepted;       /* handshakes started */
	uint64_t validated;      /* ... of which with a valid token */
	uint64_t retries;        /* Retry packets sent */
	uint64_t bad_tokens;     /* Initials with a Retry token that failed */
	uint64_t rate_limited;   /* dropped: their prefix was over its rate */
	uint64_t half_open_full; /* dropped: too many handshakes under way */
};

struct admit_bucket {
	struct ipaddr prefix;
	uint64_t tokens_milli; /* thousandths of a handshake, for smooth refill */
	uint64_t last;         /* time of the last refill */
};

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
	struct admit_stats stats;
};

/* What an accepted Initial brings to quic_conn_server_create. */
struct admit_result {
	bool validated;          /* the address is proven (token) */
	bool retried;            /* it answered our Retry */
	ngtcp2_cid odcid;        /* retried: the DCID of its first Initial */
};

struct state_server;
/* `state` may be NULL (keys in memory only, for tests). */
void admit_init(struct admit *, size_t retry_threshold, uint64_t now,
    struct state_server *state);
/* Rotates the token key when it is older than ADMIT_TOKEN_LIFETIME. */
void admit_tick(struct admit *, uint64_t now);

/* The prefix a source address is held to: /32 for IPv4, /64 for IPv6 (what
 * one subscriber or host usually holds), in `p`; false for a sockaddr that
 * is neither. */
bool admit_source_prefix(const struct sockaddr *from, struct ipaddr *p);

/* Decide on the Initial `hd` (as ngtcp2_accept parsed it) from `from`,
 * with `half_open` handshakes under way. On ADMIT_RETRY the Retry packet
 * is in retry[0..*retrylen). */
enum admit_verdict admit_check(struct admit *, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *from, socklen_t fromlen, size_t half_open,
    uint64_t now, struct admit_result *, uint8_t *retry, size_t retrymax,
    size_t *retrylen);

/* Decide on a TCP connection (TLS over TCP) from `from`: ADMIT_ACCEPT or
 * ADMIT_DROP (close it). Its address is proven, so only the half-open cap
 * and the per-prefix rate apply, shared with QUIC's handshakes. */
enum admit_verdict admit_check_tcp(struct admit *, const struct sockaddr *from,
    size_t half_open, uint64_t now);

/* A NEW_TOKEN token for the peer at `to`, for its next connection. Returns
 * its length (at most NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN) or 0. */
size_t admit_new_token(struct admit *, const struct sockaddr *to,
    socklen_t tolen, uint64_t now, uint8_t *token, size_t max);

#endif

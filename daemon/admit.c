/* Admission of new connections: tokens, Retry, half-open cap, per-prefix
 * rate limit, the line of Initials waiting for a slot (see admit.h). */
#include <ngtcp2/ngtcp2_crypto.h>

#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "transport/quic.h"
#include "transport/state.h"

void
admit_init(struct admit *a, size_t retry_threshold, uint64_t now,
    struct state_server *state)
{
	memset(a, 0, sizeof *a);
	a->retry_threshold = retry_threshold;
	a->state = state;
	/* Tokens carry the time they were made; wall-clock time means the
	 * same to the roved that reads them after a restart or a reboot. */
	a->wall_offset = clock_wall() * NGTCP2_SECONDS - now;
	random_bytes(a->secret[0], sizeof a->secret[0]);
	random_bytes(a->secret[1], sizeof a->secret[1]);
	random_bytes((uint8_t *)&a->hash_key, sizeof a->hash_key);
	a->rotated = now;
	TAILQ_INIT(&a->waitq[0]);
	TAILQ_INIT(&a->waitq[1]);
}

void
admit_clear(struct admit *a)
{
	struct admit_waiter *w;

	for (size_t q = 0; q < 2; q++) {
		while ((w = TAILQ_FIRST(&a->waitq[q])) != NULL) {
			TAILQ_REMOVE(&a->waitq[q], w, entry);
			admit_waiter_free(w);
		}
	}
	memset(a->wait_index, 0, sizeof a->wait_index);
	a->nwaiting = 0;
}

void
admit_tick(struct admit *a, uint64_t now)
{
	if (a->state != NULL)
		return; /* StateDir rotates its keys itself */
	if (now - a->rotated < ADMIT_TOKEN_LIFETIME)
		return;
	memcpy(a->secret[1], a->secret[0], sizeof a->secret[1]);
	random_bytes(a->secret[0], sizeof a->secret[0]);
	a->rotated = now;
}

bool
admit_source_prefix(const struct sockaddr *from, struct ipaddr *p)
{
	uint16_t port;

	if (addr_from_sockaddr(from, p, &port) != 0)
		return false;
	if (p->family == AF_INET6)
		memset(p->b + 8, 0, 8);
	return true;
}

/* Keyed: a source cannot pick another's slot. */
static uint64_t
prefix_hash(const struct admit *a, const struct ipaddr *p)
{
	uint64_t h = a->hash_key ^ 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < sizeof p->b; i++) {
		h ^= p->b[i];
		h *= 0x100000001b3ULL;
	}
	h ^= (uint64_t)p->family;
	h ^= h >> 31;
	return h;
}

static struct admit_bucket *
bucket_for(struct admit *a, const struct ipaddr *p, uint64_t now)
{
	struct admit_bucket *b;

	b = &a->buckets[prefix_hash(a, p) % ADMIT_PREFIX_SLOTS];
	/* A slot taken by another prefix is handed over full: sharing it
	 * could only make a legitimate source pay for a flooding one. */
	if (b->last == 0 || !addr_equal(&b->prefix, p)) {
		b->prefix = *p;
		b->tokens_milli = ADMIT_PREFIX_BURST * 1000u;
		b->last = now;
	}
	return b;
}

/* Takes one handshake from the source's bucket; false when it is empty. */
static bool
prefix_allows(struct admit *a, const struct sockaddr *from, uint64_t now)
{
	struct admit_bucket *b;
	struct ipaddr p;
	uint64_t elapsed;

	if (!admit_source_prefix(from, &p))
		return false;
	b = bucket_for(a, &p, now);
	elapsed = now > b->last ? now - b->last : 0;
	b->last = now;
	/* Refill: ADMIT_PREFIX_RATE per second, in thousandths. */
	if (elapsed > 0) {
		uint64_t add = elapsed / (NGTCP2_SECONDS / 1000) * ADMIT_PREFIX_RATE;

		b->tokens_milli += add;
		if (b->tokens_milli > ADMIT_PREFIX_BURST * 1000u)
			b->tokens_milli = ADMIT_PREFIX_BURST * 1000u;
	}
	if (b->tokens_milli < 1000)
		return false;
	b->tokens_milli -= 1000;
	return true;
}

/* The token keys: the newest first, then the previous one if it still
 * verifies. Returns how many. */
static size_t
token_keys(struct admit *a, const uint8_t *keys[2])
{
	_Static_assert(STATE_TOKEN_KEY_LEN == ADMIT_SECRET_LEN &&
	    STATE_TOKEN_KEYS == 2, "StateDir's token keys fit admit's");

	if (a->state != NULL)
		return state_token_keys(a->state, keys);
	keys[0] = a->secret[0];
	keys[1] = a->secret[1];
	return 2;
}

static bool
verify_regular(struct admit *a, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *from, socklen_t fromlen, uint64_t now)
{
	const uint8_t *keys[2];
	size_t n = token_keys(a, keys);

	for (size_t i = 0; i < n; i++) {
		if (ngtcp2_crypto_verify_regular_token(hd->token, hd->tokenlen,
		    keys[i], ADMIT_SECRET_LEN, (const ngtcp2_sockaddr *)from,
		    (ngtcp2_socklen)fromlen, ADMIT_TOKEN_LIFETIME,
		    now + a->wall_offset) == 0)
			return true;
	}
	return false;
}

static bool
verify_retry(struct admit *a, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *from, socklen_t fromlen, uint64_t now,
    ngtcp2_cid *odcid)
{
	const uint8_t *keys[2];
	size_t n = token_keys(a, keys);

	for (size_t i = 0; i < n; i++) {
		if (ngtcp2_crypto_verify_retry_token(odcid, hd->token, hd->tokenlen,
		    keys[i], ADMIT_SECRET_LEN, hd->version,
		    (const ngtcp2_sockaddr *)from, (ngtcp2_socklen)fromlen, &hd->dcid,
		    ADMIT_RETRY_TOKEN_LIFETIME, now + a->wall_offset) == 0)
			return true;
	}
	return false;
}

static size_t
write_retry(struct admit *a, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *from, socklen_t fromlen, uint64_t now,
    uint8_t *out, size_t max)
{
	uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
	ngtcp2_ssize tokenlen, n;
	const uint8_t *keys[2];
	ngtcp2_cid scid;

	(void)token_keys(a, keys);
	scid.datalen = QUIC_SCID_LEN;
	cid_make(a->server_id, scid.data);
	tokenlen = ngtcp2_crypto_generate_retry_token(token, keys[0],
	    ADMIT_SECRET_LEN, hd->version, (const ngtcp2_sockaddr *)from,
	    (ngtcp2_socklen)fromlen, &scid, &hd->dcid, now + a->wall_offset);
	if (tokenlen < 0)
		return 0;
	n = ngtcp2_crypto_write_retry(out, max, hd->version, &hd->scid, &scid,
	    &hd->dcid, token, (size_t)tokenlen);
	return n > 0 ? (size_t)n : 0;
}

enum admit_verdict
admit_check(struct admit *a, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *from, socklen_t fromlen, size_t half_open,
    uint64_t now, struct admit_result *res, uint8_t *retry, size_t retrymax,
    size_t *retrylen)
{
	memset(res, 0, sizeof *res);
	*retrylen = 0;
	admit_tick(a, now);
	if (hd->tokenlen > 0) {
		switch (hd->token[0]) {
		case NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY:
			/* Only an answer to our own Retry carries one; a bad
			 * one is forged or stale, and gets nothing. */
			if (!verify_retry(a, hd, from, fromlen, now, &res->odcid)) {
				a->stats.bad_tokens++;
				return ADMIT_DROP;
			}
			res->validated = res->retried = true;
			break;
		case NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR:
			/* One from an earlier connection; stale or from
			 * another address, it is as good as none. */
			res->validated = verify_regular(a, hd, from, fromlen, now);
			break;
		default:
			break;
		}
	}
	if (!res->validated && half_open >= a->retry_threshold) {
		*retrylen = write_retry(a, hd, from, fromlen, now, retry, retrymax);
		if (*retrylen == 0)
			return ADMIT_DROP;
		a->stats.retries++;
		return ADMIT_RETRY;
	}
	/* At the cap only a proven address waits (the line cannot be
	 * filled from spoofed ones), and only while there is room. */
	if (half_open >= ADMIT_MAX_HALF_OPEN &&
	    (!res->validated || a->nwaiting >= ADMIT_WAIT_MAX)) {
		a->stats.half_open_full++;
		return ADMIT_DROP;
	}
	/* The rate before the line: a waiter has paid for its handshake,
	 * and a prefix over its rate cannot fill the line. */
	if (!prefix_allows(a, from, now)) {
		a->stats.rate_limited++;
		return ADMIT_DROP;
	}
	/* Behind those already waiting too, while there is room: slots free
	 * up a batch at a time (listener.c), and the line is first come,
	 * first served. */
	if (half_open >= ADMIT_MAX_HALF_OPEN ||
	    (a->nwaiting > 0 && res->validated && a->nwaiting < ADMIT_WAIT_MAX))
		return ADMIT_WAIT;
	a->stats.accepted++;
	if (res->validated)
		a->stats.validated++;
	return ADMIT_ACCEPT;
}

static struct admit_waiter **
wait_slot(struct admit *a, const uint8_t *dcid, size_t dcidlen)
{
	/* Keyed, as the CID map is: the client chooses this DCID. */
	uint64_t h = a->hash_key ^ 0x84222325cbf29ce4ULL;

	for (size_t i = 0; i < dcidlen; i++) {
		h ^= dcid[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 29;
	return &a->wait_index[h % ADMIT_WAIT_BUCKETS];
}

struct admit_waiter *
admit_wait_find(struct admit *a, const uint8_t *dcid, size_t dcidlen)
{
	struct admit_waiter *w;

	if (a->nwaiting == 0)
		return NULL;
	for (w = *wait_slot(a, dcid, dcidlen); w != NULL; w = w->hnext) {
		if (w->dcid.datalen == dcidlen &&
		    memcmp(w->dcid.data, dcid, dcidlen) == 0)
			return w;
	}
	return NULL;
}

static void
wait_add_pkt(struct admit_waiter *w, const uint8_t *pkt, size_t len,
    uint8_t ecn)
{
	w->pkts[w->npkts].data = xmalloc(len);
	memcpy(w->pkts[w->npkts].data, pkt, len);
	w->pkts[w->npkts].len = len;
	w->pkts[w->npkts].ecn = ecn;
	w->npkts++;
}

/* Returning: it brought a NEW_TOKEN token (not a Retry's), so it was
 * connected before and most likely resumes with a ticket, which costs
 * a fraction of a full handshake. */
static size_t
wait_class(const struct admit_result *res)
{
	return res->validated && !res->retried ? 0 : 1;
}

void
admit_wait_push(struct admit *a, const ngtcp2_pkt_hd *hd,
    const struct admit_result *res, const uint8_t *pkt, size_t len,
    uint8_t ecn, const struct sockaddr *from, socklen_t fromlen, void *arg,
    uint64_t now)
{
	struct admit_waiter *w = xcalloc(1, sizeof *w), **slot;

	w->res = *res;
	w->dcid = hd->dcid;
	w->arg = arg;
	if (fromlen > sizeof w->from)
		fromlen = sizeof w->from;
	memcpy(&w->from, from, fromlen);
	w->fromlen = fromlen;
	w->since = now;
	wait_add_pkt(w, pkt, len, ecn);
	slot = wait_slot(a, hd->dcid.data, hd->dcid.datalen);
	w->hnext = *slot;
	*slot = w;
	TAILQ_INSERT_TAIL(&a->waitq[wait_class(res)], w, entry);
	a->nwaiting++;
}

void
admit_wait_add(struct admit *a, struct admit_waiter *w, const uint8_t *pkt,
    size_t len, uint8_t ecn)
{
	/* Whatever comes, the first Initial keeps the client's place in
	 * line. Each datagram is kept while there is room, in the order it
	 * came, Initials too: a ClientHello with a post-quantum key share
	 * spans two Initials, and a handshake started from the first alone
	 * would hold its half-open slot until the client's retransmission
	 * back-off (which a client does not reset on the server's ACK of an
	 * Initial) sent the rest. Retransmissions come a PTO after the first
	 * flight, so the flight and its 0-RTT packets are kept before them;
	 * one that is kept is only a duplicate to the handshake. */
	if (w->npkts == ADMIT_WAIT_PKTS) {
		a->stats.wait_dups++;
		return;
	}
	wait_add_pkt(w, pkt, len, ecn);
}

struct admit_waiter *
admit_wait_pop(struct admit *a, uint64_t now)
{
	struct admit_waiter *w, **pp;

	/* Bounded: each turn takes one waiter out of the line. */
	for (;;) {
		if ((w = TAILQ_FIRST(&a->waitq[0])) != NULL)
			TAILQ_REMOVE(&a->waitq[0], w, entry);
		else if ((w = TAILQ_FIRST(&a->waitq[1])) != NULL)
			TAILQ_REMOVE(&a->waitq[1], w, entry);
		else
			return NULL;
		a->nwaiting--;
		for (pp = wait_slot(a, w->dcid.data, w->dcid.datalen); *pp != w;
		    pp = &(*pp)->hnext)
			;
		*pp = w->hnext;
		w->hnext = NULL;
		if (now - w->since <= ADMIT_WAIT_TIMEOUT)
			break;
		a->stats.wait_expired++;
		admit_waiter_free(w);
	}
	a->stats.accepted++;
	a->stats.waited++;
	if (w->res.validated)
		a->stats.validated++;
	return w;
}

void
admit_waiter_free(struct admit_waiter *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < w->npkts; i++)
		free(w->pkts[i].data);
	free(w);
}

static struct admit_known *
known_slot(struct admit *a, const struct ipaddr *p)
{
	/* Another hash of the same key than the rate's buckets: the two
	 * tables do not collide alike. */
	return &a->known[(prefix_hash(a, p) >> 17) % ADMIT_KNOWN_SLOTS];
}

void
admit_remember(struct admit *a, const struct sockaddr *from, uint64_t now)
{
	struct admit_known *k;
	struct ipaddr p;

	if (!admit_source_prefix(from, &p))
		return;
	k = known_slot(a, &p);
	k->prefix = p;
	k->seen = now != 0 ? now : 1;
}

bool
admit_known(struct admit *a, const struct sockaddr *from, uint64_t now)
{
	struct admit_known *k;
	struct ipaddr p;

	if (!admit_source_prefix(from, &p))
		return false;
	k = known_slot(a, &p);
	return k->seen != 0 && now - k->seen < ADMIT_KNOWN_LIFETIME &&
	    addr_equal(&k->prefix, &p);
}

enum admit_verdict
admit_check_tcp(struct admit *a, const struct sockaddr *from,
    size_t half_open_tcp, bool evictable, uint64_t now, struct admit_tcp *res)
{
	memset(res, 0, sizeof *res);
	admit_tick(a, now);
	res->known = admit_known(a, from, now);
	/* TCP's own handshake proved the address: no Retry is needed, and
	 * none exists. With its budget full, only a known source gets in,
	 * in the place of one that is not. */
	if (half_open_tcp >= ADMIT_MAX_HALF_OPEN_TCP &&
	    (!res->known || !evictable)) {
		a->stats.tcp_full++;
		return ADMIT_DROP;
	}
	if (!prefix_allows(a, from, now)) {
		a->stats.rate_limited++;
		return ADMIT_DROP;
	}
	if (half_open_tcp >= ADMIT_MAX_HALF_OPEN_TCP) {
		res->evict = true;
		a->stats.tcp_evicted++;
	}
	res->timeout = QUIC_SERVER_HANDSHAKE_TIMEOUT;
	if (!res->known && half_open_tcp >= ADMIT_TCP_PRESSURE) {
		res->timeout = ADMIT_TCP_HURRY;
		a->stats.tcp_hurried++;
	}
	/* This one starts the pressure: those before it, from unknown
	 * sources, had the usual timeout, and a flood's first ones would
	 * hold their slots that long. */
	res->hurry_others = half_open_tcp == ADMIT_TCP_PRESSURE;
	a->stats.accepted++;
	a->stats.validated++;
	return ADMIT_ACCEPT;
}

size_t
admit_new_token(struct admit *a, const struct sockaddr *to, socklen_t tolen,
    uint64_t now, uint8_t *token, size_t max)
{
	const uint8_t *keys[2];
	ngtcp2_ssize n;

	if (max < NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN)
		return 0;
	admit_tick(a, now);
	(void)token_keys(a, keys);
	n = ngtcp2_crypto_generate_regular_token(token, keys[0],
	    ADMIT_SECRET_LEN, (const ngtcp2_sockaddr *)to, (ngtcp2_socklen)tolen,
	    now + a->wall_offset);
	return n > 0 ? (size_t)n : 0;
}

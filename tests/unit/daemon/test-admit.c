/* Admission of new connections: when a Retry is asked for, what a token
 * proves, the half-open cap and the per-prefix rate limit. */
#include <ngtcp2/ngtcp2_crypto.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/admit.h"
#include "transport/quic.h"
#include "transport/state.h"

#define T0 (1000 * NGTCP2_SECONDS)
#define RETRY_THRESHOLD 16

static struct admit adm;

static struct sockaddr_in
v4(const char *a, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

	assert_int_equal(inet_pton(AF_INET, a, &sin.sin_addr), 1);
	return sin;
}

static struct sockaddr_in6
v6(const char *a, uint16_t port)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
	    .sin6_port = htons(port) };

	assert_int_equal(inet_pton(AF_INET6, a, &sin6.sin6_addr), 1);
	return sin6;
}

/* A client Initial's header as ngtcp2_accept leaves it. */
static ngtcp2_pkt_hd
initial(uint8_t seed, const uint8_t *token, size_t tokenlen)
{
	ngtcp2_pkt_hd hd;

	memset(&hd, 0, sizeof hd);
	hd.type = NGTCP2_PKT_INITIAL;
	hd.flags = NGTCP2_PKT_FLAG_LONG_FORM;
	hd.version = NGTCP2_PROTO_VER_V1;
	hd.dcid.datalen = 16;
	memset(hd.dcid.data, seed, 16);
	hd.scid.datalen = 8;
	memset(hd.scid.data, seed ^ 0x55, 8);
	hd.token = token;
	hd.tokenlen = tokenlen;
	return hd;
}

static enum admit_verdict
check(const ngtcp2_pkt_hd *hd, const void *from, socklen_t len,
    size_t half_open, uint64_t now, struct admit_result *res)
{
	static uint8_t retry[1500];
	size_t retrylen;
	enum admit_verdict v;

	v = admit_check(&adm, hd, from, len, half_open, now, res, retry,
	    sizeof retry, &retrylen);
	assert_int_equal(retrylen > 0, v == ADMIT_RETRY);
	return v;
}

static int
setup(void **state)
{
	(void)state;
	admit_init(&adm, RETRY_THRESHOLD, T0, NULL);
	return 0;
}

/* Few handshakes under way: no proof asked, nothing validated. */
static void
test_accept_below_threshold(void **state)
{
	struct sockaddr_in a = v4("198.18.1.2", 4000);
	ngtcp2_pkt_hd hd = initial(1, NULL, 0);
	struct admit_result res;

	(void)state;
	assert_int_equal(check(&hd, &a, sizeof a, RETRY_THRESHOLD - 1, T0,
	    &res), ADMIT_ACCEPT);
	assert_false(res.validated);
	assert_false(res.retried);
	assert_int_equal(adm.stats.accepted, 1);
	assert_int_equal(adm.stats.validated, 0);
	assert_int_equal(adm.stats.retries, 0);
}

/* Past the threshold a Retry goes out; the Initial that answers it is
 * admitted with the original DCID; the token is bound to the address,
 * the Retry's new CID and a short lifetime. */
static void
test_retry_round_trip(void **state)
{
	struct sockaddr_in a = v4("198.18.1.2", 4000), b = v4("198.18.1.3", 4000);
	struct sockaddr_in a2 = v4("198.18.1.2", 4001);
	ngtcp2_pkt_hd hd = initial(2, NULL, 0), rhd, again;
	struct admit_result res;
	uint8_t retry[1500], token[256];
	size_t retrylen, tokenlen;
	ngtcp2_ssize hdlen;

	(void)state;
	assert_int_equal(admit_check(&adm, &hd, (struct sockaddr *)&a, sizeof a,
	    RETRY_THRESHOLD, T0, &res, retry, sizeof retry, &retrylen),
	    ADMIT_RETRY);
	assert_int_equal(adm.stats.retries, 1);
	assert_int_equal(adm.stats.accepted, 0);
	/* A real Retry packet: to the client's SCID, with a fresh SCID. */
	hdlen = ngtcp2_pkt_decode_hd_long(&rhd, retry, retrylen);
	assert_true(hdlen > 0);
	assert_int_equal(rhd.type, NGTCP2_PKT_RETRY);
	assert_true(ngtcp2_cid_eq(&rhd.dcid, &hd.scid));
	assert_int_equal(rhd.scid.datalen, 16);
	/* The token is what lies between the header and the 16-byte
	 * integrity tag (RFC 9000, 17.2.5). */
	tokenlen = retrylen - (size_t)hdlen - 16;
	assert_true(tokenlen > 0 && tokenlen <= sizeof token);
	memcpy(token, retry + hdlen, tokenlen);
	assert_int_equal(token[0], NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY);

	again = initial(3, token, tokenlen);
	again.dcid = rhd.scid;
	assert_int_equal(check(&again, &a, sizeof a, RETRY_THRESHOLD + 5,
	    T0 + NGTCP2_SECONDS, &res), ADMIT_ACCEPT);
	assert_true(res.validated);
	assert_true(res.retried);
	assert_true(ngtcp2_cid_eq(&res.odcid, &hd.dcid));
	assert_int_equal(adm.stats.validated, 1);

	/* The same token from another address, or port, or after its
	 * lifetime, or for another DCID: dropped and counted. */
	assert_int_equal(check(&again, &b, sizeof b, 0, T0, &res), ADMIT_DROP);
	assert_int_equal(check(&again, &a2, sizeof a2, 0, T0, &res), ADMIT_DROP);
	assert_int_equal(check(&again, &a, sizeof a, 0,
	    T0 + ADMIT_RETRY_TOKEN_LIFETIME + NGTCP2_SECONDS, &res), ADMIT_DROP);
	again.dcid.data[0] ^= 1;
	assert_int_equal(check(&again, &a, sizeof a, 0, T0, &res), ADMIT_DROP);
	assert_int_equal(adm.stats.bad_tokens, 4);
	assert_int_equal(adm.stats.accepted, 1);
}

/* A NEW_TOKEN token lets its address skip the Retry, from any port, for
 * as long as the key that made it is current or previous. */
static void
test_new_token(void **state)
{
	struct sockaddr_in a = v4("198.18.1.2", 4000), a2 = v4("198.18.1.2", 5000);
	struct sockaddr_in b = v4("198.18.1.9", 4000);
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	uint8_t late[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	struct admit_result res;
	ngtcp2_pkt_hd hd;
	size_t len, late_len;

	(void)state;
	len = admit_new_token(&adm, (struct sockaddr *)&a, sizeof a, T0, token,
	    sizeof token);
	assert_true(len > 0);
	assert_int_equal(token[0], NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR);
	assert_int_equal(admit_new_token(&adm, (struct sockaddr *)&a, sizeof a,
	    T0, token, len - 1), 0);
	hd = initial(4, token, len);
	assert_int_equal(check(&hd, &a2, sizeof a2, RETRY_THRESHOLD, T0 + 1,
	    &res), ADMIT_ACCEPT);
	assert_true(res.validated);
	assert_false(res.retried);
	/* Another address: as good as no token, so a Retry. */
	assert_int_equal(check(&hd, &b, sizeof b, RETRY_THRESHOLD, T0 + 1,
	    &res), ADMIT_RETRY);
	assert_int_equal(adm.stats.bad_tokens, 0);
	/* One made just before the key rotates... */
	late_len = admit_new_token(&adm, (struct sockaddr *)&a, sizeof a,
	    T0 + ADMIT_TOKEN_LIFETIME - NGTCP2_SECONDS, late, sizeof late);
	/* ...while the first one's lifetime ends (and the key rotates)... */
	assert_int_equal(check(&hd, &a, sizeof a, RETRY_THRESHOLD,
	    T0 + ADMIT_TOKEN_LIFETIME, &res), ADMIT_RETRY);
	/* ...still verifies under the previous key. */
	hd = initial(4, late, late_len);
	assert_int_equal(check(&hd, &a, sizeof a, RETRY_THRESHOLD,
	    T0 + ADMIT_TOKEN_LIFETIME + 1, &res), ADMIT_ACCEPT);
	assert_true(res.validated);
	/* After the next rotation neither key made it. */
	admit_tick(&adm, T0 + 2 * ADMIT_TOKEN_LIFETIME);
	assert_int_equal(check(&hd, &a, sizeof a, RETRY_THRESHOLD,
	    T0 + 2 * ADMIT_TOKEN_LIFETIME, &res), ADMIT_RETRY);
}

/* With a StateDir the token keys are its token.key: a NEW_TOKEN token
 * made before a restart still proves the address after it (to a roved
 * whose monotonic clock starts somewhere else), and one from another
 * server's StateDir proves nothing. */
static void
test_tokens_survive_restart(void **state)
{
	char dir[] = "/tmp/rove-test-admit.XXXXXX", other[] = "/tmp/rove-test-admit.XXXXXX";
	char sub[64], osub[64], *cause = NULL;
	struct sockaddr_in a = v4("198.18.1.2", 4000);
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	struct state_server *st;
	struct admit_result res;
	ngtcp2_pkt_hd hd;
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_non_null(mkdtemp(other));
	snprintf(sub, sizeof sub, "%s/state", dir);
	snprintf(osub, sizeof osub, "%s/state", other);
	st = state_server_open(sub, &cause);
	assert_non_null(st);
	admit_init(&adm, RETRY_THRESHOLD, T0, st);
	len = admit_new_token(&adm, (struct sockaddr *)&a, sizeof a, T0, token,
	    sizeof token);
	assert_true(len > 0);
	state_server_free(st);

	st = state_server_open(sub, &cause);
	assert_non_null(st);
	admit_init(&adm, RETRY_THRESHOLD, 7 * T0, st);
	hd = initial(6, token, len);
	assert_int_equal(check(&hd, &a, sizeof a, RETRY_THRESHOLD, 7 * T0,
	    &res), ADMIT_ACCEPT);
	assert_true(res.validated);
	assert_false(res.retried);
	state_server_free(st);

	st = state_server_open(osub, &cause);
	assert_non_null(st);
	admit_init(&adm, RETRY_THRESHOLD, 7 * T0, st);
	assert_int_equal(check(&hd, &a, sizeof a, RETRY_THRESHOLD, 7 * T0,
	    &res), ADMIT_RETRY);
	assert_false(res.validated);
	state_server_free(st);

	for (int i = 0; i < 2; i++) {
		const char *d = i == 0 ? sub : osub;
		const char *files[] = { "reset.key", "ticket.key", "token.key",
		    "tickets" };
		char path[128];

		for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
			snprintf(path, sizeof path, "%s/%s", d, files[f]);
			assert_int_equal(unlink(path), 0);
		}
		assert_int_equal(rmdir(d), 0);
	}
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rmdir(other), 0);
}

/* At the cap, a proven address waits for a slot; one that is not gets
 * a Retry (the threshold lies below the cap), or nothing past the line's
 * room. */
static void
test_half_open_cap(void **state)
{
	struct sockaddr_in a = v4("198.18.1.2", 4000);
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	struct admit_result res;
	ngtcp2_pkt_hd hd, none = initial(6, NULL, 0);
	size_t len;

	(void)state;
	len = admit_new_token(&adm, (struct sockaddr *)&a, sizeof a, T0, token,
	    sizeof token);
	hd = initial(5, token, len);
	assert_int_equal(check(&hd, &a, sizeof a, ADMIT_MAX_HALF_OPEN - 1, T0,
	    &res), ADMIT_ACCEPT);
	assert_int_equal(check(&hd, &a, sizeof a, ADMIT_MAX_HALF_OPEN, T0, &res),
	    ADMIT_WAIT);
	assert_true(res.validated);
	assert_int_equal(check(&none, &a, sizeof a, ADMIT_MAX_HALF_OPEN, T0,
	    &res), ADMIT_RETRY);
	adm.nwaiting = ADMIT_WAIT_MAX; /* as if the line were full */
	assert_int_equal(check(&hd, &a, sizeof a, ADMIT_MAX_HALF_OPEN, T0, &res),
	    ADMIT_DROP);
	adm.nwaiting = 0;
	assert_int_equal(adm.stats.half_open_full, 1);
	assert_int_equal(adm.stats.accepted, 1);
}

static int
teardown(void **state)
{
	(void)state;
	admit_clear(&adm);
	return 0;
}

/* Queue an Initial with DCID `seed` from `from`, returning (a NEW_TOKEN
 * token) or having answered a Retry. */
static void
wait_one(uint8_t seed, const struct sockaddr_in *from, bool returning,
    uint64_t now)
{
	struct admit_result res = { .validated = true, .retried = !returning };
	ngtcp2_pkt_hd hd = initial(seed, NULL, 0);
	uint8_t pkt[1200];

	memset(pkt, 0xc0, sizeof pkt); /* a long header, type Initial */
	pkt[1] = seed;
	admit_wait_push(&adm, &hd, &res, pkt, sizeof pkt, 0,
	    (const struct sockaddr *)from, sizeof *from, NULL, now);
}

/* The line: returning clients first, then the others, each in arrival
 * order; a waiter keeps its first Initial and the datagrams after
 * it; one that waited too long is dropped on the way out. */
static void
test_wait_line(void **state)
{
	struct sockaddr_in a = v4("198.18.1.2", 4000);
	const uint8_t order[] = { 11, 13, 10, 12 };
	uint64_t now = T0 + 1 + ADMIT_WAIT_TIMEOUT;
	struct admit_waiter *w;
	ngtcp2_cid dcid;
	uint8_t zrtt[100], again[1200];

	(void)state;
	wait_one(14, &a, true, T0);
	wait_one(10, &a, false, T0 + 1);
	wait_one(11, &a, true, T0 + 2);
	wait_one(12, &a, false, T0 + 3);
	wait_one(13, &a, true, T0 + 4);
	assert_int_equal(adm.nwaiting, 5);

	dcid = initial(11, NULL, 0).dcid;
	w = admit_wait_find(&adm, dcid.data, dcid.datalen);
	assert_non_null(w);
	assert_true(ngtcp2_cid_eq(&w->dcid, &dcid));
	dcid.data[0] ^= 1;
	assert_null(admit_wait_find(&adm, dcid.data, dcid.datalen));
	/* The datagrams after the first are kept in the order they came,
	 * 0-RTT packets and Initials alike, up to ADMIT_WAIT_PKTS in all;
	 * the rest are dropped and counted. */
	memset(zrtt, 0xd0, sizeof zrtt);
	for (int i = 0; i < ADMIT_WAIT_PKTS; i++)
		admit_wait_add(&adm, w, zrtt, sizeof zrtt, 0);
	memset(again, 0xc0, sizeof again);
	admit_wait_add(&adm, w, again, sizeof again, 0);
	assert_int_equal(w->npkts, ADMIT_WAIT_PKTS);
	assert_int_equal(w->pkts[1].len, sizeof zrtt);
	assert_int_equal(w->pkts[ADMIT_WAIT_PKTS - 1].len, sizeof zrtt);
	assert_int_equal(adm.stats.wait_dups, 2);

	/* 14 came first but has waited past ADMIT_WAIT_TIMEOUT. */
	for (size_t i = 0; i < sizeof order; i++) {
		w = admit_wait_pop(&adm, now);
		assert_non_null(w);
		assert_int_equal(w->dcid.data[0], order[i]);
		assert_int_equal(w->pkts[0].data[1], order[i]);
		assert_null(admit_wait_find(&adm, w->dcid.data, w->dcid.datalen));
		admit_waiter_free(w);
	}
	assert_null(admit_wait_pop(&adm, now));
	assert_int_equal(adm.nwaiting, 0);
	assert_int_equal(adm.stats.waited, 4);
	assert_int_equal(adm.stats.accepted, 4);
	assert_int_equal(adm.stats.wait_expired, 1);
}

/* A ClientHello with a post-quantum key share (X25519MLKEM768) spans two
 * Initials. A waiter keeps both, so the handshake that starts from the
 * line has the whole ClientHello, and not half of it until the client's
 * retransmission back-off sends the rest; retransmissions that come
 * after the flight are kept while there is room, then counted. */
static void
test_wait_split_client_hello(void **state)
{
	struct sockaddr_in a = v4("198.18.1.3", 4000);
	struct admit_waiter *w;
	ngtcp2_cid dcid;
	uint8_t second[1200], zrtt[300], rexmit[1200];

	(void)state;
	wait_one(21, &a, true, T0);
	dcid = initial(21, NULL, 0).dcid;
	w = admit_wait_find(&adm, dcid.data, dcid.datalen);
	assert_non_null(w);
	/* The flight's second Initial, with 0-RTT coalesced after it; then
	 * a 0-RTT datagram of its own. */
	memset(second, 0xc3, sizeof second);
	second[1] = 0x02;
	admit_wait_add(&adm, w, second, sizeof second, 0);
	memset(zrtt, 0xd1, sizeof zrtt);
	admit_wait_add(&adm, w, zrtt, sizeof zrtt, 0);
	assert_int_equal(w->npkts, 3);
	assert_int_equal(adm.stats.wait_dups, 0);
	/* The client's retransmissions while it waits: one more fits. */
	memset(rexmit, 0xc5, sizeof rexmit);
	for (int i = 0; i < 3; i++)
		admit_wait_add(&adm, w, rexmit, sizeof rexmit, 0);
	assert_int_equal(w->npkts, ADMIT_WAIT_PKTS);
	assert_int_equal(adm.stats.wait_dups, 2);

	w = admit_wait_pop(&adm, T0 + NGTCP2_SECONDS);
	assert_non_null(w);
	assert_int_equal(w->pkts[0].data[1], 21);
	assert_int_equal(w->pkts[1].len, sizeof second);
	assert_memory_equal(w->pkts[1].data, second, sizeof second);
	assert_int_equal(w->pkts[2].len, sizeof zrtt);
	assert_int_equal(w->pkts[3].data[0], 0xc5);
	admit_waiter_free(w);
	assert_int_equal(adm.nwaiting, 0);
}

/* ADMIT_PREFIX_BURST at once, then ADMIT_PREFIX_RATE a second, per /32
 * or /64; other prefixes are not affected. */
static void
test_prefix_rate(void **state)
{
	struct sockaddr_in a = v4("198.18.7.1", 1), a_other_port = v4("198.18.7.1", 2);
	struct sockaddr_in c = v4("198.18.7.2", 1);
	struct sockaddr_in6 x = v6("fd00:1:2:3::1", 1), x2 = v6("fd00:1:2:3:ffff::9", 1);
	struct sockaddr_in6 y = v6("fd00:1:2:4::1", 1);
	ngtcp2_pkt_hd hd = initial(6, NULL, 0);
	struct admit_result res;

	(void)state;
	for (int i = 0; i < ADMIT_PREFIX_BURST; i++)
		assert_int_equal(check(&hd, i % 2 ? &a : &a_other_port, sizeof a, 0,
		    T0, &res), ADMIT_ACCEPT);
	assert_int_equal(check(&hd, &a, sizeof a, 0, T0, &res), ADMIT_DROP);
	assert_int_equal(adm.stats.rate_limited, 1);
	assert_int_equal(check(&hd, &c, sizeof c, 0, T0, &res), ADMIT_ACCEPT);
	/* A second later, ADMIT_PREFIX_RATE more. */
	for (int i = 0; i < ADMIT_PREFIX_RATE; i++)
		assert_int_equal(check(&hd, &a, sizeof a, 0, T0 + NGTCP2_SECONDS,
		    &res), ADMIT_ACCEPT);
	assert_int_equal(check(&hd, &a, sizeof a, 0, T0 + NGTCP2_SECONDS, &res),
	    ADMIT_DROP);
	/* IPv6: one /64 shares a bucket, the next /64 has its own. */
	for (int i = 0; i < ADMIT_PREFIX_BURST; i++)
		assert_int_equal(check(&hd, i % 2 ? &x : &x2, sizeof x, 0, T0, &res),
		    ADMIT_ACCEPT);
	assert_int_equal(check(&hd, &x2, sizeof x2, 0, T0, &res), ADMIT_DROP);
	assert_int_equal(check(&hd, &y, sizeof y, 0, T0, &res), ADMIT_ACCEPT);
	assert_int_equal(adm.stats.rate_limited, 3);
}

/* TLS over TCP: a budget of its own, whatever QUIC holds; the short
 * deadline under pressure for unknown sources; with the budget full, a
 * known source evicts one that is not, and nobody else gets in. */
static void
test_tcp_budget(void **state)
{
	struct sockaddr_in peer = v4("198.18.1.2", 4000),
	    other = v4("198.18.1.2", 4001), stranger = v4("198.19.201.10", 5000);
	struct sockaddr_in6 peer6 = v6("fd00:1:2:3::1", 443),
	    near6 = v6("fd00:1:2:3::2", 443), far6 = v6("fd00:1:2:4::1", 443);
	struct admit_tcp res;

	(void)state;
	/* Nothing known yet: the usual timeout below the pressure. */
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&stranger,
	    0, false, T0, &res), ADMIT_ACCEPT);
	assert_false(res.known);
	assert_false(res.evict);
	assert_false(res.hurry_others);
	assert_true(res.timeout == QUIC_SERVER_HANDSHAKE_TIMEOUT);
	/* Under pressure: the short one; the first under it hurries the rest. */
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&stranger,
	    ADMIT_TCP_PRESSURE, true, T0, &res), ADMIT_ACCEPT);
	assert_true(res.timeout == ADMIT_TCP_HURRY);
	assert_true(res.hurry_others);
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&stranger,
	    ADMIT_TCP_PRESSURE + 1, true, T0, &res), ADMIT_ACCEPT);
	assert_false(res.hurry_others);
	assert_int_equal(adm.stats.tcp_hurried, 2);
	/* Full: refused, however many QUIC handshakes are under way (TCP's
	 * count is its own, and QUIC's cap is not consulted). */
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&stranger,
	    ADMIT_MAX_HALF_OPEN_TCP, true, T0, &res), ADMIT_DROP);
	assert_int_equal(adm.stats.tcp_full, 1);

	/* A peer connected from there: any port of that address is known
	 * (IPv6: its /64), and keeps the usual timeout under pressure. */
	admit_remember(&adm, (struct sockaddr *)&peer, T0);
	admit_remember(&adm, (struct sockaddr *)&peer6, T0);
	assert_true(admit_known(&adm, (struct sockaddr *)&other, T0 + 1));
	assert_true(admit_known(&adm, (struct sockaddr *)&near6, T0 + 1));
	assert_false(admit_known(&adm, (struct sockaddr *)&far6, T0 + 1));
	assert_false(admit_known(&adm, (struct sockaddr *)&stranger, T0 + 1));
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&other,
	    ADMIT_TCP_PRESSURE + 5, true, T0, &res), ADMIT_ACCEPT);
	assert_true(res.known);
	assert_true(res.timeout == QUIC_SERVER_HANDSHAKE_TIMEOUT);
	/* Full: it takes an unknown one's place, if there is one. */
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&other,
	    ADMIT_MAX_HALF_OPEN_TCP, true, T0, &res), ADMIT_ACCEPT);
	assert_true(res.evict);
	assert_int_equal(adm.stats.tcp_evicted, 1);
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&other,
	    ADMIT_MAX_HALF_OPEN_TCP, false, T0, &res), ADMIT_DROP);
	assert_int_equal(adm.stats.tcp_full, 2);
	/* Its own prefix's rate still holds: 2 taken of 20 above. */
	for (int i = 0; i < ADMIT_PREFIX_BURST - 2; i++)
		assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&peer,
		    0, false, T0, &res), ADMIT_ACCEPT);
	assert_int_equal(admit_check_tcp(&adm, (struct sockaddr *)&peer,
	    ADMIT_MAX_HALF_OPEN_TCP, true, T0, &res), ADMIT_DROP);
	assert_int_equal(adm.stats.rate_limited, 1);
	assert_int_equal(adm.stats.tcp_evicted, 1);
	/* Forgotten after ADMIT_KNOWN_LIFETIME. */
	assert_false(admit_known(&adm, (struct sockaddr *)&peer,
	    T0 + ADMIT_KNOWN_LIFETIME));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_accept_below_threshold, setup),
		cmocka_unit_test_setup(test_retry_round_trip, setup),
		cmocka_unit_test_setup(test_new_token, setup),
		cmocka_unit_test_setup(test_half_open_cap, setup),
		cmocka_unit_test_setup_teardown(test_wait_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_split_client_hello, setup,
		    teardown),
		cmocka_unit_test(test_tokens_survive_restart),
		cmocka_unit_test_setup(test_prefix_rate, setup),
		cmocka_unit_test_setup(test_tcp_budget, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Session tickets: sealing and opening them under the ticket keyring,
 * and wolfSSL's ticket callback, which records each ticket issued in the
 * register and lets each be resumed once (in a group, once per member). */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/chacha20_poly1305.h>

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/random.h"
#include "quic.h"
#include "state-int.h"

/* Per-handshake notes on the WOLFSSL object: the serial of the register
 * entry this handshake spent, and whether it was counted already. */
static int ex_spent = -1, ex_counted = -1, ex_foreign = -1;

/*
 * What a group member's ticket says besides wolfSSL's sealed session: who
 * issued it and for which peer key, so that another member, which has no
 * register entry for it, can still resume it once (see ticket_cb). It
 * rides in the bytes of wolfSSL's IV and MAC fields that the nonce and
 * the tag leave free (20 octets: the peer is named by its key's prefix,
 * which the server looks up), and is authenticated with them.
 */
#define EXTRA_IV_OFF CHACHA20_POLY1305_AEAD_IV_SIZE
#define EXTRA_MAC_OFF STATE_TAG_LEN
#define EXTRA_LEN (WOLFSSL_TICKET_IV_SZ - EXTRA_IV_OFF + \
	WOLFSSL_TICKET_MAC_SZ - EXTRA_MAC_OFF)
struct ticket_extra {
	/* Bits 0-1: the issuer's ServerID length; bits 2-7: its worker + 1
	 * when its server has workers. 0: a lone server's ticket, no extra. */
	uint8_t issuer_tag;
	uint8_t issuer[CID_SERVER_ID_MAX];
	uint8_t peer[STATE_PEER_PREFIX_LEN]; /* its key's first octets */
};
_Static_assert(sizeof(struct ticket_extra) == EXTRA_LEN,
    "the extra fills the free bytes of IV and MAC exactly");

/* A server shares its keys with others (a KeyDir group, or workers). */
_Static_assert(CID_WORKERS_MAX + 1 < 1 << 6, "a worker fits the tag");
static bool
shares_keys(const struct cid_server_id *sid)
{
	return sid->len > 0 || sid->workers > 1;
}

static uint8_t
issuer_tag(const struct cid_server_id *sid)
{
	return (uint8_t)(sid->len |
	    (sid->workers > 1 ? (sid->worker + 1) << 2 : 0));
}

static void
extra_put(const struct ticket_extra *x, uint8_t *iv, uint8_t *mac)
{
	const uint8_t *p = (const uint8_t *)x;
	size_t n = WOLFSSL_TICKET_IV_SZ - EXTRA_IV_OFF;

	memcpy(iv + EXTRA_IV_OFF, p, n);
	memcpy(mac + EXTRA_MAC_OFF, p + n, EXTRA_LEN - n);
}

static void
extra_get(struct ticket_extra *x, const uint8_t *iv, const uint8_t *mac)
{
	uint8_t *p = (uint8_t *)x;
	size_t n = WOLFSSL_TICKET_IV_SZ - EXTRA_IV_OFF;

	memcpy(p, iv + EXTRA_IV_OFF, n);
	memcpy(p + n, mac + EXTRA_MAC_OFF, EXTRA_LEN - n);
}

/* ChaCha20-Poly1305 with the key name, the nonce and (when there is one)
 * the extra as associated data. A lone server's tickets have no extra
 * and the associated data they always had. Returns its length. */
static size_t
ticket_aad(uint8_t *aad, const uint8_t *name, const uint8_t *iv,
    const uint8_t *mac)
{
	struct ticket_extra x;
	size_t n = WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE;

	memcpy(aad, name, WOLFSSL_TICKET_NAME_SZ);
	memcpy(aad + WOLFSSL_TICKET_NAME_SZ, iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
	extra_get(&x, iv, mac);
	if (x.issuer_tag == 0)
		return n;
	memcpy(aad + n, &x, sizeof x);
	return n + sizeof x;
}

static int
ticket_seal(struct state_server *st, const uint8_t *peer,
    uint8_t name[WOLFSSL_TICKET_NAME_SZ], uint8_t iv[WOLFSSL_TICKET_IV_SZ],
    uint8_t mac[WOLFSSL_TICKET_MAC_SZ], uint8_t *buf, size_t len)
{
	uint8_t aad[WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE +
	    EXTRA_LEN];
	struct ticket_extra x;
	const struct ticket_key *k;
	size_t aadlen;

	/* Should the timer be late (or the clock jump), no ticket is sealed
	 * under a key older than the rotation interval. */
	if (state_keyring_due(&st->tickets, clock_wall()))
		state_server_tick(st);
	k = &st->tickets.keys[0];
	if (len > UINT32_MAX)
		return -1;
	memcpy(name, k->name, WOLFSSL_TICKET_NAME_SZ);
	random_bytes(iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
	memset(&x, 0, sizeof x);
	if (peer != NULL && shares_keys(&st->issuer)) {
		x.issuer_tag = issuer_tag(&st->issuer);
		memcpy(x.issuer, st->issuer.id, st->issuer.len);
		memcpy(x.peer, peer, sizeof x.peer);
	}
	memset(mac, 0, WOLFSSL_TICKET_MAC_SZ);
	extra_put(&x, iv, mac);
	aadlen = ticket_aad(aad, name, iv, mac);
	/* The tag goes into the MAC field's first bytes, before the extra. */
	return wc_ChaCha20Poly1305_Encrypt(k->key, iv, aad, (word32)aadlen, buf,
	    (word32)len, buf, mac) == 0 ? 0 : -1;
}

int
state_ticket_seal(struct state_server *st, uint8_t name[WOLFSSL_TICKET_NAME_SZ],
    uint8_t iv[WOLFSSL_TICKET_IV_SZ], uint8_t mac[WOLFSSL_TICKET_MAC_SZ],
    uint8_t *buf, size_t len)
{
	return ticket_seal(st, NULL, name, iv, mac, buf, len);
}

int
state_ticket_open(struct state_server *st,
    const uint8_t name[WOLFSSL_TICKET_NAME_SZ],
    const uint8_t iv[WOLFSSL_TICKET_IV_SZ],
    const uint8_t mac[WOLFSSL_TICKET_MAC_SZ], uint8_t *buf, size_t len)
{
	uint8_t aad[WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE +
	    EXTRA_LEN];
	const struct ticket_key *k = state_key_named(st, name, clock_wall());
	size_t aadlen;

	if (k == NULL || len > UINT32_MAX)
		return -1;
	aadlen = ticket_aad(aad, name, iv, mac);
	return wc_ChaCha20Poly1305_Decrypt(k->key, iv, aad, (word32)aadlen, buf,
	    (word32)len, mac, buf) == 0 ? 0 : -1;
}

static const uint8_t *
peer_key_of(WOLFSSL *ssl)
{
	ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);

	return ref != NULL ? quic_conn_peer_key(ref->user_data) : NULL;
}

/* Count a rejected ticket once per handshake, however many times wolfSSL
 * asks about it (once per cipher suite it tries). */
static void
count_once(WOLFSSL *ssl, struct state_server *st, uint64_t *counter)
{
	if (wolfSSL_get_ex_data(ssl, ex_counted) == NULL) {
		(*counter)++;
		wolfSSL_set_ex_data(ssl, ex_counted, st);
	}
}

/*
 * A ticket our register does not know. If another member of our group
 * issued it, resume it here once: it goes into our register as spent, so
 * a replay of it here finds it so. A replayed 0-RTT flight can therefore
 * be taken once by each member (by its issuer too), never more: the
 * handshake is marked foreign (state_ticket_foreign), and roved then
 * dials its 0-RTT forwards only once the handshake completes, which a
 * replay cannot do; its IP packets are a network duplicate at worst. Our
 * own tickets that the register forgot (expired, pushed out) stay
 * refused, as on a lone server.
 */
static int
group_ticket(WOLFSSL *ssl, struct state_server *st,
    const uint8_t *key_name, const uint8_t *iv, const uint8_t *mac,
    uint8_t *ticket, int inlen, int *outlen)
{
	struct ticket_extra x;
	uint8_t peer[KEY_LEN];
	uint32_t i;

	extra_get(&x, iv, mac);
	if (x.issuer_tag == 0 || !shares_keys(&st->issuer) ||
	    (x.issuer_tag == issuer_tag(&st->issuer) &&
	    memcmp(x.issuer, st->issuer.id, st->issuer.len) == 0) ||
	    st->peer_key == NULL ||
	    state_ticket_open(st, key_name, iv, mac, ticket,
	    (size_t)inlen) != 0 ||
	    !st->peer_key(x.peer, sizeof x.peer, peer, st->peer_key_arg)) {
		count_once(ssl, st, &st->stats.unknown);
		return WOLFSSL_TICKET_RET_REJECT;
	}
	*outlen = inlen;
	wolfSSL_set_ex_data(ssl, ex_foreign, st);
	i = state_register_taken(st, mac, peer);
	wolfSSL_set_ex_data(ssl, ex_spent, (void *)(uintptr_t)st->reg.e[i].serial);
	if (!quic_tls_resumed(ssl, peer))
		return WOLFSSL_TICKET_RET_REJECT;
	st->stats.resumed++;
	st->stats.group_resumed++;
	return WOLFSSL_TICKET_RET_OK;
}

/* wolfSSL's ticket callback: seal and record, or look up, open and spend.
 * The tag (first bytes of `mac`) names the ticket in the register. */
static int
ticket_cb(WOLFSSL *ssl, unsigned char key_name[WOLFSSL_TICKET_NAME_SZ],
    unsigned char iv[WOLFSSL_TICKET_IV_SZ],
    unsigned char mac[WOLFSSL_TICKET_MAC_SZ], int enc, unsigned char *ticket, int inlen, int *outlen, void *arg)
{
	struct state_server *st = arg;
	struct reg *r = &st->reg;
	const uint8_t *peer;
	uint32_t i;

	if (inlen < 0)
		return WOLFSSL_TICKET_RET_FATAL;
	if (enc) {
		if ((peer = peer_key_of(ssl)) == NULL)
			return WOLFSSL_TICKET_RET_FATAL; /* no ticket: not fatal */
		if (ticket_seal(st, peer, key_name, iv, mac, ticket,
		    (size_t)inlen) != 0)
			return WOLFSSL_TICKET_RET_FATAL;
		*outlen = inlen;
		state_register_issue(st, mac, peer);
		st->stats.issued++;
		return WOLFSSL_TICKET_RET_OK;
	}
	/* Not one of our keys (another server's, or retired): say nothing.
	 * In a group, another member may have just made a new key. */
	if (state_key_named(st, key_name, clock_wall()) == NULL &&
	    (!state_keyring_reread(st, &st->tickets) ||
	    state_key_named(st, key_name, clock_wall()) == NULL))
		return WOLFSSL_TICKET_RET_REJECT;
	if ((i = state_register_find(r, mac, clock_wall())) == NONE)
		return group_ticket(ssl, st, key_name, iv, mac, ticket, inlen,
		    outlen);
	/* Single use: a second ClientHello with this ticket is a replay (or
	 * a client retrying); no resumption, no 0-RTT. The handshake that
	 * spent it may ask again for another suite. */
	if (r->e[i].state == REG_USED &&
	    (uintptr_t)wolfSSL_get_ex_data(ssl, ex_spent) != r->e[i].serial) {
		count_once(ssl, st, &st->stats.replayed);
		return WOLFSSL_TICKET_RET_REJECT;
	}
	if (state_ticket_open(st, key_name, iv, mac, ticket, (size_t)inlen) != 0)
		return WOLFSSL_TICKET_RET_REJECT;
	*outlen = inlen;
	if (r->e[i].state == REG_USED)
		return WOLFSSL_TICKET_RET_OK; /* this handshake, another suite */
	state_register_use(st, i);
	wolfSSL_set_ex_data(ssl, ex_spent, (void *)(uintptr_t)r->e[i].serial);
	if (!quic_tls_resumed(ssl, r->p[r->e[i].peer].key))
		return WOLFSSL_TICKET_RET_REJECT;
	st->stats.resumed++;
	return WOLFSSL_TICKET_RET_OK;
}

bool
state_ticket_spent_here(WOLFSSL *ssl)
{
	/* Serials start at 1; the note is made only where state_register_use ran. */
	return ex_spent >= 0 && wolfSSL_get_ex_data(ssl, ex_spent) != NULL;
}

bool
state_ticket_foreign(WOLFSSL *ssl)
{
	return ex_foreign >= 0 && wolfSSL_get_ex_data(ssl, ex_foreign) != NULL;
}

void
state_server_attach(struct state_server *st, WOLFSSL_CTX *ctx)
{
	if (ex_spent < 0) {
#if defined(HAVE_EX_DATA_CRYPTO) || LIBWOLFSSL_VERSION_HEX < 0x05008000
		/* Index 0 is the app data (our ngtcp2_crypto_conn_ref), which
		 * wolfSSL's counter hands out first: skip it. */
		ex_spent = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		if (ex_spent == 0)
			ex_spent = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		ex_counted = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		ex_foreign = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
#else
		/* wolfSSL >= 5.8 hands out indices only with its OpenSSL
		 * ex data API (HAVE_EX_DATA_CRYPTO), which this build lacks;
		 * then nothing else takes one, and index 0 is the app data.
		 * MAX_EX_DATA (5) leaves room. */
		ex_spent = 1;
		ex_counted = 2;
		ex_foreign = 3;
#endif
	}
	wolfSSL_CTX_set_TicketEncCb(ctx, ticket_cb);
	wolfSSL_CTX_set_TicketEncCtx(ctx, st);
	wolfSSL_CTX_set_TicketHint(ctx, (int)st->lifetime_s);
}

/* wolfSSL contexts for QUIC: self-signed Ed25519 certificate, ALPN, pins. */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/openssl/evp.h>
#include <wolfssl/quic.h>
#include <wolfssl/wolfcrypt/asn_public.h>
#include <wolfssl/wolfcrypt/ed25519.h>
#include <wolfssl/wolfcrypt/hmac.h>
#include <wolfssl/wolfcrypt/random.h>

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "quic.h"
#include "tls.h"
#include "wire/proto.h"

/* DER SubjectPublicKeyInfo of an Ed25519 key: this prefix, then the key. */
static const uint8_t ed25519_spki_prefix[12] = {
	0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
};

/* One pin callback per process: both programs hold one context. */
static tls_pin_cb tls_pin;

/* X25519MLKEM768 is an enum constant in wolfSSL's ssl.h, not a macro:
 * what tells is the ML-KEM and PQ/T hybrid support in options.h. */
#if defined(WOLFSSL_HAVE_MLKEM) && defined(WOLFSSL_PQC_HYBRIDS) && \
    defined(HAVE_CURVE25519) && !defined(WOLFSSL_NO_ML_KEM_768)
#define TLS_HAVE_PQ 1
#define TLS_GROUP_PQ WOLFSSL_X25519MLKEM768
#else
#define TLS_HAVE_PQ 0
#endif

static enum tls_kex kex = TLS_HAVE_PQ ? TLS_KEX_HYBRID : TLS_KEX_CLASSIC;

bool
tls_have_pq(void)
{
	return TLS_HAVE_PQ;
}

int
tls_set_kex(enum tls_kex want, char **cause)
{
	if (!TLS_HAVE_PQ && want == TLS_KEX_PQ_REQUIRED) {
		*cause = xstrdup("KeyExchange = pq-required, but this build's "
		    "wolfSSL (" LIBWOLFSSL_VERSION_STRING ") has no "
		    "X25519MLKEM768; build with wolfSSL 5.9.2 or set "
		    "KeyExchange = hybrid");
		return -1;
	}
	if (!TLS_HAVE_PQ && want == TLS_KEX_HYBRID) {
		log_warn("KeyExchange = hybrid: this build's wolfSSL ("
		    LIBWOLFSSL_VERSION_STRING ") has no X25519MLKEM768; "
		    "using X25519 alone (no post-quantum key exchange)");
		want = TLS_KEX_CLASSIC;
	}
	kex = want;
	return 0;
}

enum tls_kex
tls_kex(void)
{
	return kex;
}

const char *
tls_group_name(WOLFSSL *ssl)
{
	const char *n = ssl != NULL ? wolfSSL_get_curve_name(ssl) : NULL;

	/* wolfSSL's spellings, as IANA's TLS registry writes them. */
	if (n == NULL)
		return NULL;
	if (strcasecmp(n, "X25519") == 0)
		return "x25519";
	if (strcasecmp(n, "SECP256R1") == 0)
		return "secp256r1";
	if (strcasecmp(n, "X25519MLKEM768") == 0)
		return "X25519MLKEM768";
	return n;
}

bool
tls_group_is_pq(const char *name)
{
	return name != NULL && strstr(name, "MLKEM") != NULL;
}

bool
tls_kex_alert(uint64_t code)
{
	/* handshake_failure (40): a TLS 1.3 server's answer when the
	 * client's groups and its own have nothing in common. Or wolfSSL's
	 * server asks (HelloRetryRequest) for a group of its own that the
	 * client never offered, and the client answers illegal_parameter
	 * (47). QUIC's CRYPTO_ERROR is 0x100 + alert. */
	return code == 0x100 + 40 || code == 0x100 + 47;
}

const char *
tls_kex_hint(int alert, bool server)
{
	if (!tls_kex_alert(0x100u + (unsigned)alert))
		return "";
	if (kex == TLS_KEX_PQ_REQUIRED)
		return server ? ": the peer offers no post-quantum key exchange "
		    "(X25519MLKEM768), which KeyExchange = pq-required requires" :
		    ": the server has no post-quantum key exchange "
		    "(X25519MLKEM768), which KeyExchange = pq-required requires";
	return server ? "" : ": no key exchange in common; does the server "
	    "require a post-quantum one (KeyExchange = pq-required)?";
}

/* The certificate carries no identity: the peer checks our key against its
 * pin. It only has to be well-formed and signed by the key it carries. */
static int
make_certificate(ed25519_key *key, uint8_t *der, int derlen)
{
	WC_RNG rng;
	Cert cert;
	int n = -1;

	if (wc_InitRng(&rng) != 0)
		return -1;
	if (wc_InitCert(&cert) != 0)
		goto out;
	strncpy(cert.subject.commonName, "rove", CTC_NAME_SIZE - 1);
	cert.sigType = CTC_ED25519;
	cert.daysValid = 3650;
	cert.isCA = 0;
	n = wc_MakeCert_ex(&cert, der, (word32)derlen, ED25519_TYPE, key, &rng);
	if (n < 0)
		goto out;
	n = wc_SignCert_ex(cert.bodySz, cert.sigType, der, (word32)derlen,
	    ED25519_TYPE, key, &rng);
out:
	wc_FreeRng(&rng);
	return n;
}

static int
verify_cb(int preverify, WOLFSSL_X509_STORE_CTX *store)
{
	unsigned char spki[128];
	int spkilen = sizeof spki;
	WOLFSSL_X509 *x509;
	WOLFSSL *ssl;

	(void)preverify; /* self-signed: the chain never verifies; the pin decides */
	ssl = wolfSSL_X509_STORE_CTX_get_ex_data(store,
	    wolfSSL_get_ex_data_X509_STORE_CTX_idx());
	x509 = wolfSSL_X509_STORE_CTX_get_current_cert(store);
	if (ssl == NULL || x509 == NULL)
		return 0;
	/* Only the leaf certificate counts; we never send chains. */
	if (wolfSSL_X509_STORE_CTX_get_error_depth(store) != 0)
		return 0;
	if (wolfSSL_X509_get_pubkey_buffer(x509, spki, &spkilen) != WOLFSSL_SUCCESS ||
	    spkilen != (int)sizeof ed25519_spki_prefix + KEY_LEN ||
	    memcmp(spki, ed25519_spki_prefix, sizeof ed25519_spki_prefix) != 0)
		return 0;
	if (!tls_pin(ssl, spki + sizeof ed25519_spki_prefix))
		return 0;
	wolfSSL_X509_STORE_CTX_set_error(store, 0);
	return 1;
}

static WOLFSSL_CTX *
ctx_create(enum tls_role role, const uint8_t priv[static KEY_LEN],
    tls_pin_cb pin, bool quic, char **cause)
{
	uint8_t pub[KEY_LEN], certder[1024], keyder[256];
	int classic[] = { WOLFSSL_ECC_X25519, WOLFSSL_ECC_SECP256R1 };
#if TLS_HAVE_PQ
	int hybrid[] = { TLS_GROUP_PQ, WOLFSSL_ECC_X25519, WOLFSSL_ECC_SECP256R1 };
	int pq[] = { TLS_GROUP_PQ };
#endif
	int *groups = classic, ngroups = 2;
	WOLFSSL_CTX *ctx = NULL;
	ed25519_key key;
	int certlen, keylen;
	bool ok = false;

	tls_pin = pin;
	if (wc_ed25519_init(&key) != 0) {
		*cause = xstrdup("ed25519 init failed");
		return NULL;
	}
	if (key_public(priv, pub) != 0 ||
	    wc_ed25519_import_private_key(priv, KEY_LEN, pub, KEY_LEN, &key) != 0) {
		*cause = xstrdup("cannot import private key");
		goto out;
	}
	if ((certlen = make_certificate(&key, certder, sizeof certder)) < 0) {
		xasprintf(cause, "cannot make certificate (wolfSSL error %d)", certlen);
		goto out;
	}
	if ((keylen = wc_Ed25519PrivateKeyToDer(&key, keyder, sizeof keyder)) < 0) {
		*cause = xstrdup("cannot encode private key");
		goto out;
	}
	ctx = wolfSSL_CTX_new(role == TLS_ROLE_SERVER ? wolfTLSv1_3_server_method() :
	    wolfTLSv1_3_client_method());
	if (ctx == NULL) {
		*cause = xstrdup("wolfSSL_CTX_new failed");
		goto out;
	}
	if (quic && (role == TLS_ROLE_SERVER ?
	    ngtcp2_crypto_wolfssl_configure_server_context(ctx) :
	    ngtcp2_crypto_wolfssl_configure_client_context(ctx)) != 0) {
		*cause = xstrdup("cannot configure wolfSSL for QUIC");
		goto out;
	}
	if (wolfSSL_CTX_use_certificate_buffer(ctx, certder, certlen,
	    WOLFSSL_FILETYPE_ASN1) != WOLFSSL_SUCCESS ||
	    wolfSSL_CTX_use_PrivateKey_buffer(ctx, keyder, keylen,
	    WOLFSSL_FILETYPE_ASN1) != WOLFSSL_SUCCESS) {
		*cause = xstrdup("cannot load certificate into wolfSSL");
		goto out;
	}
	/* X25519MLKEM768, then X25519: the client sends key shares for both
	 * (tls_session_create) and the server takes the first of its own
	 * list that the client shared, so neither a hybrid nor a classic
	 * server asks again (a HelloRetryRequest costs a round trip and the
	 * 0-RTT data). X25519 costs less CPU than P-256, which every
	 * resumption pays too (psk_dhe_ke); P-256 stays for older peers. */
#if TLS_HAVE_PQ
	if (kex == TLS_KEX_HYBRID) {
		groups = hybrid;
		ngroups = 3;
	} else if (kex == TLS_KEX_PQ_REQUIRED) {
		groups = pq;
		ngroups = 1;
	}
#endif
	if (wolfSSL_CTX_set_groups(ctx, groups, ngroups) != WOLFSSL_SUCCESS) {
		*cause = xstrdup("cannot set the key exchange groups");
		goto out;
	}
#ifdef SINGLE_THREADED
	/* One DRBG for all of the context's sessions (we run one thread),
	 * instead of one seeded and health-tested per handshake. */
	if (wolfSSL_CTX_new_rng(ctx) != WOLFSSL_SUCCESS) {
		*cause = xstrdup("cannot make the context's RNG");
		goto out;
	}
#endif
	wolfSSL_CTX_set_verify(ctx, WOLFSSL_VERIFY_PEER |
	    WOLFSSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_cb);
	/* Over TCP the server issues no tickets and takes no early data (both
	 * return 0 on success, a negative error otherwise): a
	 * resumption would skip the pin check (a peer a reload removed
	 * could come back on its ticket) under wolfSSL's own ticket key,
	 * outside rove's single-use register. A TCP session is the
	 * fallback; one more round trip is its whole cost. */
	if (!quic && role == TLS_ROLE_SERVER &&
	    (wolfSSL_CTX_no_ticket_TLSv13(ctx) < 0 ||
	    wolfSSL_CTX_set_max_early_data(ctx, 0) < 0)) {
		*cause = xstrdup("cannot turn off session tickets on TCP");
		goto out;
	}
	ok = true;
out:
	explicit_bzero(keyder, sizeof keyder);
	wc_ed25519_free(&key);
	if (!ok && ctx != NULL) {
		wolfSSL_CTX_free(ctx);
		ctx = NULL;
	}
	return ctx;
}

WOLFSSL_CTX *
tls_ctx_create(enum tls_role role, const uint8_t priv[static KEY_LEN],
    tls_pin_cb pin, char **cause)
{
	return ctx_create(role, priv, pin, true, cause);
}

WOLFSSL_CTX *
tls_ctx_create_tcp(enum tls_role role, const uint8_t priv[static KEY_LEN],
    tls_pin_cb pin, char **cause)
{
	return ctx_create(role, priv, pin, false, cause);
}

static void
session_removed_cb(WOLFSSL_CTX *ctx, WOLFSSL_SESSION *sess)
{
	(void)ctx;
	(void)sess;
}

void
tls_ctx_enable_resumption(WOLFSSL_CTX *ctx, enum tls_role role, bool early_data)
{
	if (role == TLS_ROLE_CLIENT) {
		wolfSSL_CTX_UseSessionTicket(ctx);
		wolfSSL_CTX_sess_set_new_cb(ctx, quic_tls_new_session);
	} else {
		/* QUIC requires the value 0xffffffff when 0-RTT is on. */
		wolfSSL_CTX_set_max_early_data(ctx, early_data ? UINT32_MAX : 0);
		/* wolfSSL >= 5.9 takes 0-RTT only when it can evict the
		 * ticket's session from its own in-memory cache (RFC 8446
		 * section 8, single use): a restarted roved, or another
		 * member of a KeyDir group, never has it there. Single use is
		 * rove's own register's (state-register.c), which outlives a
		 * restart and spans the group; with a remove callback wolfSSL
		 * takes the eviction as done by that "external cache". */
		wolfSSL_CTX_sess_set_remove_cb(ctx, session_removed_cb);
	}
}

WOLFSSL *
tls_session_create(WOLFSSL_CTX *ctx, enum tls_role role, void *conn_ref,
    const char *alpn)
{
	WOLFSSL *ssl = wolfSSL_new(ctx);

	if (ssl == NULL)
		fatalx("wolfSSL_new failed");
	wolfSSL_set_app_data(ssl, conn_ref);
	/* The server's choice comes from its own list: this wolfSSL build
	 * never calls an ALPN select callback, so a context's callback
	 * would leave QUIC's handshakes without ALPN (RFC 9001, 8.1 wants
	 * one). A client that offers none of the list gets an alert. */
	if (wolfSSL_UseALPN(ssl, (char *)(uintptr_t)alpn, (unsigned)strlen(alpn),
	    role == TLS_ROLE_SERVER ? WOLFSSL_ALPN_FAILED_ON_MISMATCH :
	    WOLFSSL_ALPN_CONTINUE_ON_MISMATCH) != WOLFSSL_SUCCESS)
		fatalx("cannot set the ALPN %s", alpn);
	if (role == TLS_ROLE_CLIENT) {
		wolfSSL_set_connect_state(ssl);
#if TLS_HAVE_PQ
		/* The key shares are always ours: left to itself, wolfSSL
		 * >= 5.9 offers on resumption the share of the group the
		 * ticket's session used, whatever KeyExchange now says.
		 * Hybrid: a share for X25519 too, which a server without
		 * ML-KEM takes at once instead of asking again; 32 bytes
		 * beside ML-KEM's 1,216. */
		if ((kex != TLS_KEX_CLASSIC &&
		    wolfSSL_UseKeyShare(ssl, TLS_GROUP_PQ) != WOLFSSL_SUCCESS) ||
		    (kex != TLS_KEX_PQ_REQUIRED &&
		    wolfSSL_UseKeyShare(ssl, WOLFSSL_ECC_X25519) != WOLFSSL_SUCCESS))
			fatalx("cannot make the TLS key shares");
#endif
	} else {
		wolfSSL_set_accept_state(ssl);
	}
	return ssl;
}

bool
tls_alpn_is(WOLFSSL *ssl, const char *proto)
{
	unsigned short len = 0;
	char *got = NULL;

	return ssl != NULL &&
	    wolfSSL_ALPN_GetProtocol(ssl, &got, &len) == WOLFSSL_SUCCESS &&
	    len == strlen(proto) && memcmp(got, proto, len) == 0;
}

/* One process, one key log: both programs make one context. */
static int keylog_fd = -1;

static void
keylog_cb(const WOLFSSL *ssl, const char *line)
{
	struct iovec iov[2] = { { (void *)(uintptr_t)line, strlen(line) },
	    { (void *)(uintptr_t)"\n", 1 } };

	(void)ssl;
	/* One writev per line: O_APPEND keeps lines whole even when two
	 * programs share the file. A failed write loses a line, no more. */
	if (keylog_fd != -1 && writev(keylog_fd, iov, 2) == -1)
		log_debug("KeyLogFile: %s", strerror(errno));
}

int
tls_ctx_set_keylog(WOLFSSL_CTX *ctx, const char *path, char **cause)
{
	int fd;

	/* The second context of a program (TLS over TCP) shares the file. */
	if (keylog_fd != -1) {
		wolfSSL_CTX_set_keylog_callback(ctx, keylog_cb);
		return 0;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd == -1) {
		xasprintf(cause, "KeyLogFile %s: %s", path, strerror(errno));
		return -1;
	}
	keylog_fd = fd;
	wolfSSL_CTX_set_keylog_callback(ctx, keylog_cb);
	log_warn("KeyLogFile: the TLS secrets of every connection go to %s; "
	    "with it, anyone holding a capture can decrypt all traffic. Turn "
	    "it off after debugging", path);
	return 0;
}

/*
 * ngtcp2's wolfSSL backend derives every QUIC key (packet protection,
 * header protection, tokens) through the three wolfSSL_quic_hkdf*
 * functions, and wolfSSL's own go through an EVP_PKEY, each of which
 * seeds and health-tests a DRBG that HKDF never uses: some 25 DRBGs per
 * handshake, the larger part of roved's CPU in a reconnect storm. The
 * linker sends ngtcp2's calls here (-Wl,--wrap in the Makefile), which
 * compute the same RFC 5869 HKDF with wolfCrypt directly; a digest other
 * than TLS 1.3's two goes to wolfSSL's own.
 */

/* wolfCrypt's hash type for `md`, or -1. */
static int
hkdf_hash(const WOLFSSL_EVP_MD *md)
{
	int nid = md != NULL ? wolfSSL_EVP_MD_type(md) : 0;

	if (nid == NID_sha256)
		return WC_SHA256;
	if (nid == NID_sha384)
		return WC_SHA384;
	return -1;
}

int
__wrap_wolfSSL_quic_hkdf_extract(uint8_t *dest, const WOLFSSL_EVP_MD *md,
    const uint8_t *secret, size_t secretlen, const uint8_t *salt,
    size_t saltlen)
{
	int type = hkdf_hash(md);

	if (type < 0)
		return __real_wolfSSL_quic_hkdf_extract(dest, md, secret,
		    secretlen, salt, saltlen);
	return wc_HKDF_Extract(type, salt, (word32)saltlen, secret,
	    (word32)secretlen, dest) == 0 ? WOLFSSL_SUCCESS : WOLFSSL_FAILURE;
}

int
__wrap_wolfSSL_quic_hkdf_expand(uint8_t *dest, size_t destlen,
    const WOLFSSL_EVP_MD *md, const uint8_t *secret, size_t secretlen,
    const uint8_t *info, size_t infolen)
{
	int type = hkdf_hash(md);

	if (type < 0)
		return __real_wolfSSL_quic_hkdf_expand(dest, destlen, md, secret,
		    secretlen, info, infolen);
	return wc_HKDF_Expand(type, secret, (word32)secretlen, info,
	    (word32)infolen, dest, (word32)destlen) == 0 ? WOLFSSL_SUCCESS :
	    WOLFSSL_FAILURE;
}

int
__wrap_wolfSSL_quic_hkdf(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
    const uint8_t *secret, size_t secretlen, const uint8_t *salt,
    size_t saltlen, const uint8_t *info, size_t infolen)
{
	int type = hkdf_hash(md);

	if (type < 0)
		return __real_wolfSSL_quic_hkdf(dest, destlen, md, secret,
		    secretlen, salt, saltlen, info, infolen);
	return wc_HKDF(type, secret, (word32)secretlen, salt, (word32)saltlen,
	    info, (word32)infolen, dest, (word32)destlen) == 0 ?
	    WOLFSSL_SUCCESS : WOLFSSL_FAILURE;
}

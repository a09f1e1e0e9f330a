/* TLS 1.3 for QUIC through wolfSSL: a context with a self-signed certificate
 * made from our Ed25519 key at startup, ALPN rove/1, and peer verification
 * by pinned public key instead of a CA. */
#ifndef ROVE_TLS_H
#define ROVE_TLS_H

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <stdbool.h>
#include <stdint.h>

#include "base/key.h"

enum tls_role { TLS_ROLE_SERVER, TLS_ROLE_CLIENT };

/* The key exchange groups offered and accepted. HYBRID: X25519MLKEM768
 * (post-quantum ML-KEM-768 with X25519, TLS group 0x11EC) first, X25519
 * and P-256 for peers without it; a client sends key shares for both
 * X25519MLKEM768 and X25519, so that neither kind of server needs a
 * HelloRetryRequest. CLASSIC: X25519, P-256. PQ_REQUIRED: X25519MLKEM768
 * alone; a peer without it fails the handshake (handshake_failure). */
enum tls_kex { TLS_KEX_HYBRID, TLS_KEX_CLASSIC, TLS_KEX_PQ_REQUIRED };

/* Does this wolfSSL build have X25519MLKEM768? */
bool tls_have_pq(void);

/* The key exchange of the contexts created after this call (one setting
 * per process, as the pin callback). Without X25519MLKEM768 in this
 * build, HYBRID becomes CLASSIC with one warning and PQ_REQUIRED fails
 * (-1 with *cause set). Before any call: HYBRID where available. */
int tls_set_kex(enum tls_kex, char **cause);

/* The key exchange in force (after the fallback above). */
enum tls_kex tls_kex(void);

/* The group the handshake of `ssl` agreed on, by its IANA name
 * ("X25519MLKEM768", "x25519", "secp256r1"), or NULL before that. A
 * static string. */
const char *tls_group_name(WOLFSSL *ssl);

/* Is `name` (tls_group_name's) a post-quantum group? */
bool tls_group_is_pq(const char *name);

/* Is CRYPTO_ERROR `code` (0x100 + TLS alert) what a handshake without a
 * key exchange group in common ends with (handshake_failure, 40, from a
 * server; illegal_parameter, 47, from a client asked for a group it did
 * not offer)? */
bool tls_kex_alert(uint64_t code);

/* The log line's hint for a handshake that failed with TLS alert `alert`,
 * on the server's side (`server`) or the client's: "" when the alert
 * says nothing of the key exchange. */
const char *tls_kex_hint(int alert, bool server);

/* Decides whether a peer presenting `pubkey` is accepted; `ssl` is the
 * connection (its app data is the owner's ngtcp2_crypto_conn_ref). Runs
 * inside the handshake: returning false aborts it with a TLS alert. */
typedef bool (*tls_pin_cb)(WOLFSSL *ssl, const uint8_t pubkey[static KEY_LEN]);

/* Create a context for `role` with the certificate for `priv`. The context
 * requires and checks the peer's certificate through `pin`. Returns NULL
 * with *cause set on failure. */
WOLFSSL_CTX *tls_ctx_create(enum tls_role role, const uint8_t priv[static KEY_LEN],
    tls_pin_cb pin, char **cause);

/* The same for TLS 1.3 on TCP (quic-tcp.c): same certificate, pin check
 * and ALPN, without QUIC's TLS interface. */
WOLFSSL_CTX *tls_ctx_create_tcp(enum tls_role role,
    const uint8_t priv[static KEY_LEN], tls_pin_cb pin, char **cause);

/* Session resumption. Client: ask for tickets and hand each new session to
 * quic_tls_new_session. Server: accept 0-RTT when `early_data` (the ticket
 * keys come from state_server_attach). */
void tls_ctx_enable_resumption(WOLFSSL_CTX *, enum tls_role, bool early_data);

/* Append the TLS secrets of every connection of `ctx` to `path` in the NSS
 * key log format (what SSLKEYLOGFILE files hold), so that Wireshark can
 * decrypt a capture. For debugging only: whoever reads the file and a
 * capture reads the traffic. The file is created 0600 if missing, never
 * followed through a link. Returns 0, or -1 with *cause set. */
int tls_ctx_set_keylog(WOLFSSL_CTX *, const char *path, char **cause);

/* A new WOLFSSL object for one connection (client side: the connect
 * state entered). `alpn`: a client's one protocol, or the comma-separated
 * list of those a server takes (a client offering none of them gets an
 * alert). `conn_ref` becomes its app data. */
WOLFSSL *tls_session_create(WOLFSSL_CTX *, enum tls_role, void *conn_ref,
    const char *alpn);

/* Whether the handshake agreed on ALPN `proto` (false without `ssl`: a
 * server frees it once the handshake is over). */
bool tls_alpn_is(WOLFSSL *, const char *proto);

/* QUIC's HKDF: the linker sends ngtcp2's calls of wolfSSL_quic_hkdf*
 * to the __wrap_ versions in tls.c (-Wl,--wrap in the Makefile), which
 * use wolfCrypt's HKDF directly and leave other digests to wolfSSL's own
 * (__real_). Same arguments and returns as wolfSSL's <wolfssl/quic.h>. */
int __real_wolfSSL_quic_hkdf_extract(uint8_t *, const WOLFSSL_EVP_MD *,
    const uint8_t *, size_t, const uint8_t *, size_t);
int __real_wolfSSL_quic_hkdf_expand(uint8_t *, size_t, const WOLFSSL_EVP_MD *,
    const uint8_t *, size_t, const uint8_t *, size_t);
int __real_wolfSSL_quic_hkdf(uint8_t *, size_t, const WOLFSSL_EVP_MD *,
    const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, size_t);
int __wrap_wolfSSL_quic_hkdf_extract(uint8_t *, const WOLFSSL_EVP_MD *,
    const uint8_t *, size_t, const uint8_t *, size_t);
int __wrap_wolfSSL_quic_hkdf_expand(uint8_t *, size_t, const WOLFSSL_EVP_MD *,
    const uint8_t *, size_t, const uint8_t *, size_t);
int __wrap_wolfSSL_quic_hkdf(uint8_t *, size_t, const WOLFSSL_EVP_MD *,
    const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, size_t);

#endif

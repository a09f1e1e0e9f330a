/* QUIC packet protection's fast path: AES-GCM and AES header protection
 * straight through wolfCrypt on the contexts ngtcp2's wolfSSL glue keys,
 * with ngtcp2's generic callbacks for everything else. The functions are
 * ngtcp2 callbacks (encrypt, decrypt, hp_mask) with their contracts. */
#ifndef ROVE_QUIC_CRYPTO_H
#define ROVE_QUIC_CRYPTO_H

#include <ngtcp2/ngtcp2.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every cipher QUIC v1 negotiates (AES-GCM, ChaCha20-Poly1305) has a
 * 16-byte tag. */
#define QUIC_AEAD_TAG_LEN 16

int quic_crypto_encrypt(uint8_t *dest, const ngtcp2_crypto_aead *,
    const ngtcp2_crypto_aead_ctx *, const uint8_t *plaintext,
    size_t plaintextlen, const uint8_t *nonce, size_t noncelen,
    const uint8_t *aad, size_t aadlen);
int quic_crypto_decrypt(uint8_t *dest, const ngtcp2_crypto_aead *,
    const ngtcp2_crypto_aead_ctx *, const uint8_t *ciphertext,
    size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
    const uint8_t *aad, size_t aadlen);
int quic_crypto_hp_mask(uint8_t *dest, const ngtcp2_crypto_cipher *,
    const ngtcp2_crypto_cipher_ctx *, const uint8_t *sample);

/* Whether a context takes the fast path (tests check that it does for
 * the contexts ngtcp2 makes, or the fast path silently stops applying). */
bool quic_crypto_aead_fast(const ngtcp2_crypto_aead_ctx *);
bool quic_crypto_hp_fast(const ngtcp2_crypto_cipher_ctx *);

#endif

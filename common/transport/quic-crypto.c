/* QUIC packet protection's fast path (see quic-crypto.h). */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/openssl/evp.h>
#include <wolfssl/wolfcrypt/aes.h>

#include <ngtcp2/ngtcp2_crypto.h>

#include "quic-crypto.h"

/*
 * Packet protection, the per-packet cost of every byte. ngtcp2's wolfSSL
 * glue goes through the EVP layer, which (without wolfSSL's streaming GCM)
 * copies the header and the payload into freshly allocated buffers for
 * every packet before one wc_AesGcmEncrypt call. The contexts it keys are
 * ordinary AES contexts: for AES-GCM (and AES header protection) call
 * wolfCrypt on them directly, in place; anything else takes the generic
 * path.
 */
static bool
ctx_is_gcm(const WOLFSSL_EVP_CIPHER_CTX *ctx)
{
	return ctx->cipherType == AES_128_GCM_TYPE ||
	    ctx->cipherType == AES_256_GCM_TYPE;
}

int
quic_crypto_encrypt(uint8_t *dest, const ngtcp2_crypto_aead *aead,
    const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *plaintext,
    size_t plaintextlen, const uint8_t *nonce, size_t noncelen,
    const uint8_t *aad, size_t aadlen)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = aead_ctx->native_handle;

	if (!ctx_is_gcm(ctx) || plaintextlen > UINT32_MAX || aadlen > UINT32_MAX)
		return ngtcp2_crypto_encrypt_cb(dest, aead, aead_ctx, plaintext,
		    plaintextlen, nonce, noncelen, aad, aadlen);
	if (wc_AesGcmEncrypt(&ctx->cipher.aes, dest, plaintext,
	    (word32)plaintextlen, nonce, (word32)noncelen, dest + plaintextlen,
	    QUIC_AEAD_TAG_LEN, aad, (word32)aadlen) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

int
quic_crypto_decrypt(uint8_t *dest, const ngtcp2_crypto_aead *aead,
    const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *ciphertext,
    size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
    const uint8_t *aad, size_t aadlen)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = aead_ctx->native_handle;
	size_t len;

	if (!ctx_is_gcm(ctx) || ciphertextlen > UINT32_MAX || aadlen > UINT32_MAX)
		return ngtcp2_crypto_decrypt_cb(dest, aead, aead_ctx, ciphertext,
		    ciphertextlen, nonce, noncelen, aad, aadlen);
	if (ciphertextlen < QUIC_AEAD_TAG_LEN)
		return NGTCP2_ERR_DECRYPT;
	len = ciphertextlen - QUIC_AEAD_TAG_LEN;
	if (wc_AesGcmDecrypt(&ctx->cipher.aes, dest, ciphertext, (word32)len,
	    nonce, (word32)noncelen, ciphertext + len, QUIC_AEAD_TAG_LEN, aad,
	    (word32)aadlen) != 0)
		return NGTCP2_ERR_DECRYPT;
	return 0;
}

/* AES header protection: the mask is the sample encrypted as one block.
 * ngtcp2 keys it as AES-ECB (1.22 and later) or as AES-CTR with the sample
 * as counter (before), whose first block is the same thing; both contexts
 * hold an encryption key schedule. */
static bool
ctx_is_aes_hp(const WOLFSSL_EVP_CIPHER_CTX *ctx)
{
	switch (ctx->cipherType) {
	case AES_128_ECB_TYPE:
	case AES_256_ECB_TYPE:
	case AES_128_CTR_TYPE:
	case AES_256_CTR_TYPE:
		return true;
	default:
		return false;
	}
}

int
quic_crypto_hp_mask(uint8_t *dest, const ngtcp2_crypto_cipher *hp,
    const ngtcp2_crypto_cipher_ctx *hp_ctx, const uint8_t *sample)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = hp_ctx->native_handle;

	if (!ctx_is_aes_hp(ctx))
		return ngtcp2_crypto_hp_mask_cb(dest, hp, hp_ctx, sample);
	if (wc_AesEncryptDirect(&ctx->cipher.aes, dest, sample) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

bool
quic_crypto_aead_fast(const ngtcp2_crypto_aead_ctx *aead_ctx)
{
	return ctx_is_gcm(aead_ctx->native_handle);
}

bool
quic_crypto_hp_fast(const ngtcp2_crypto_cipher_ctx *hp_ctx)
{
	return ctx_is_aes_hp(hp_ctx->native_handle);
}

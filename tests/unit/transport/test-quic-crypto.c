/* The packet protection fast path against wolfSSL's own EVP functions on
 * the same keys, and tls.c's HKDF (which the linker puts in place of
 * wolfSSL's for ngtcp2) against wolfSSL's: every other test has the fast
 * path at both ends, so a cipher or a key derivation that was
 * consistently wrong would pass them all. */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/quic.h>
#include <wolfssl/openssl/evp.h>

#include <ngtcp2/ngtcp2_crypto.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "transport/quic-crypto.h"
#include "transport/tls.h"

#define NONCE_LEN 12

/* Deterministic bytes, different per seed. */
static void
pattern(uint8_t *buf, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)x;
	}
}

/* AES-GCM by the book through EVP: ciphertext then the 16-byte tag.
 * (Without wolfSSL's streaming GCM, the update only gathers the input and
 * the final call produces the ciphertext.) */
static void
evp_gcm_seal(const WOLFSSL_EVP_CIPHER *cipher, const uint8_t *key,
    const uint8_t *nonce, const uint8_t *aad, size_t aadlen,
    const uint8_t *pt, size_t ptlen, uint8_t *out)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = wolfSSL_EVP_CIPHER_CTX_new();
	int n = 0, fin = 0;

	assert_non_null(ctx);
	assert_int_equal(wolfSSL_EVP_EncryptInit_ex(ctx, cipher, NULL, NULL,
	    NULL), WOLFSSL_SUCCESS);
	assert_int_equal(wolfSSL_EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN,
	    NONCE_LEN, NULL), WOLFSSL_SUCCESS);
	assert_int_equal(wolfSSL_EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce),
	    WOLFSSL_SUCCESS);
	assert_int_equal(wolfSSL_EVP_CipherUpdate(ctx, NULL, &n, aad, (int)aadlen),
	    WOLFSSL_SUCCESS);
	n = 0;
	if (ptlen > 0)
		assert_int_equal(wolfSSL_EVP_CipherUpdate(ctx, out, &n, pt,
		    (int)ptlen), WOLFSSL_SUCCESS);
	assert_int_equal(wolfSSL_EVP_EncryptFinal_ex(ctx, out + n, &fin),
	    WOLFSSL_SUCCESS);
	assert_int_equal((size_t)(n + fin), ptlen);
	assert_int_equal(wolfSSL_EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG,
	    QUIC_AEAD_TAG_LEN, out + ptlen), WOLFSSL_SUCCESS);
	wolfSSL_EVP_CIPHER_CTX_free(ctx);
}

static void
check_gcm(const WOLFSSL_EVP_CIPHER *cipher, size_t keylen)
{
	static const size_t lens[] = { 0, 1, 15, 16, 17, 100, 1200, 1452 };
	uint8_t key[32], nonce[NONCE_LEN], aad[64];
	uint8_t pt[1500], want[1500 + QUIC_AEAD_TAG_LEN];
	uint8_t got[1500 + QUIC_AEAD_TAG_LEN], back[1500];
	ngtcp2_crypto_aead aead = { .native_handle = (void *)(uintptr_t)cipher,
	    .max_overhead = QUIC_AEAD_TAG_LEN };
	ngtcp2_crypto_aead_ctx enc, dec;

	pattern(key, keylen, (uint32_t)keylen);
	assert_int_equal(ngtcp2_crypto_aead_ctx_encrypt_init(&enc, &aead, key,
	    NONCE_LEN), 0);
	assert_int_equal(ngtcp2_crypto_aead_ctx_decrypt_init(&dec, &aead, key,
	    NONCE_LEN), 0);
	assert_true(quic_crypto_aead_fast(&enc));
	assert_true(quic_crypto_aead_fast(&dec));
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		size_t len = lens[i], aadlen = 1 + i * 7;

		pattern(nonce, sizeof nonce, (uint32_t)(100 + i));
		pattern(aad, aadlen, (uint32_t)(200 + i));
		pattern(pt, len, (uint32_t)(300 + i));
		evp_gcm_seal(cipher, key, nonce, aad, aadlen, pt, len, want);
		memset(got, 0, sizeof got);
		assert_int_equal(quic_crypto_encrypt(got, &aead, &enc, pt, len,
		    nonce, NONCE_LEN, aad, aadlen), 0);
		assert_memory_equal(got, want, len + QUIC_AEAD_TAG_LEN);

		/* Opens what EVP sealed; a flipped bit anywhere is refused. */
		assert_int_equal(quic_crypto_decrypt(back, &aead, &dec, want,
		    len + QUIC_AEAD_TAG_LEN, nonce, NONCE_LEN, aad, aadlen), 0);
		if (len > 0)
			assert_memory_equal(back, pt, len);
		want[len / 2] ^= 0x01;
		assert_int_equal(quic_crypto_decrypt(back, &aead, &dec, want,
		    len + QUIC_AEAD_TAG_LEN, nonce, NONCE_LEN, aad, aadlen),
		    NGTCP2_ERR_DECRYPT);
		want[len / 2] ^= 0x01;
		aad[0] ^= 0x80;
		assert_int_equal(quic_crypto_decrypt(back, &aead, &dec, want,
		    len + QUIC_AEAD_TAG_LEN, nonce, NONCE_LEN, aad, aadlen),
		    NGTCP2_ERR_DECRYPT);
	}
	/* Shorter than a tag: refused, not read past. */
	assert_int_equal(quic_crypto_decrypt(back, &aead, &dec, want,
	    QUIC_AEAD_TAG_LEN - 1, nonce, NONCE_LEN, aad, 1), NGTCP2_ERR_DECRYPT);
	ngtcp2_crypto_aead_ctx_free(&enc);
	ngtcp2_crypto_aead_ctx_free(&dec);
}

static void
test_aes128_gcm(void **state)
{
	(void)state;
	check_gcm(wolfSSL_EVP_aes_128_gcm(), 16);
}

static void
test_aes256_gcm(void **state)
{
	(void)state;
	check_gcm(wolfSSL_EVP_aes_256_gcm(), 32);
}

/* Header protection's mask (RFC 9001, 5.4.3) is AES-ECB of the sample;
 * ngtcp2 keys the context as ECB (1.22 and later) or CTR (before), as
 * wolfSSL_quic_crypt_new does for it. Both must give the reference mask. */
static void
check_hp(const WOLFSSL_EVP_CIPHER *ctx_cipher, const WOLFSSL_EVP_CIPHER *ecb,
    size_t keylen)
{
	uint8_t key[32], sample[16], want[32], got[32];
	ngtcp2_crypto_cipher hp = { .native_handle = (void *)(uintptr_t)ctx_cipher };
	ngtcp2_crypto_cipher_ctx hp_ctx;
	WOLFSSL_EVP_CIPHER_CTX *ref;
	int n;

	pattern(key, keylen, (uint32_t)(keylen + 7));
	hp_ctx.native_handle = wolfSSL_quic_crypt_new(ctx_cipher, key, NULL, 1);
	assert_non_null(hp_ctx.native_handle);
	assert_true(quic_crypto_hp_fast(&hp_ctx));
	ref = wolfSSL_EVP_CIPHER_CTX_new();
	assert_non_null(ref);
	assert_int_equal(wolfSSL_EVP_EncryptInit_ex(ref, ecb, NULL, key, NULL),
	    WOLFSSL_SUCCESS);
	assert_int_equal(wolfSSL_EVP_CIPHER_CTX_set_padding(ref, 0),
	    WOLFSSL_SUCCESS);
	for (uint32_t i = 0; i < 16; i++) {
		pattern(sample, sizeof sample, 500 + i);
		n = 0;
		assert_int_equal(wolfSSL_EVP_CipherUpdate(ref, want, &n, sample,
		    sizeof sample), WOLFSSL_SUCCESS);
		assert_int_equal(n, 16);
		memset(got, 0, sizeof got);
		assert_int_equal(quic_crypto_hp_mask(got, &hp, &hp_ctx, sample), 0);
		assert_memory_equal(got, want, NGTCP2_HP_MASKLEN);
	}
	wolfSSL_EVP_CIPHER_CTX_free(ref);
	wolfSSL_EVP_CIPHER_CTX_free(hp_ctx.native_handle);
}

static void
test_hp_ecb(void **state)
{
	(void)state;
	check_hp(wolfSSL_EVP_aes_128_ecb(), wolfSSL_EVP_aes_128_ecb(), 16);
	check_hp(wolfSSL_EVP_aes_256_ecb(), wolfSSL_EVP_aes_256_ecb(), 32);
}

static void
test_hp_ctr(void **state)
{
	(void)state;
	check_hp(wolfSSL_EVP_aes_128_ctr(), wolfSSL_EVP_aes_128_ecb(), 16);
	check_hp(wolfSSL_EVP_aes_256_ctr(), wolfSSL_EVP_aes_256_ecb(), 32);
}

/* ChaCha20 is not on the fast path: it must be left to ngtcp2. */
static void
test_chacha_not_fast(void **state)
{
	uint8_t key[32];
	ngtcp2_crypto_cipher_ctx hp_ctx;

	(void)state;
	pattern(key, sizeof key, 9);
	hp_ctx.native_handle = wolfSSL_quic_crypt_new(wolfSSL_EVP_chacha20(),
	    key, NULL, 1);
	assert_non_null(hp_ctx.native_handle);
	assert_false(quic_crypto_hp_fast(&hp_ctx));
	wolfSSL_EVP_CIPHER_CTX_free(hp_ctx.native_handle);
}

/* Extract, expand and both, for SHA-256 and SHA-384, with and without a
 * salt, at lengths up to a few blocks: the same bytes as wolfSSL's. */
static void
test_hkdf_as_wolfssl(void **state)
{
	const WOLFSSL_EVP_MD *mds[] = { wolfSSL_EVP_sha256(), wolfSSL_EVP_sha384() };
	uint8_t secret[48], salt[20], info[40], a[160], b[160];
	const size_t lens[] = { 1, 12, 16, 32, 48, 100, 160 };

	(void)state;
	pattern(secret, sizeof secret, 1);
	pattern(salt, sizeof salt, 2);
	pattern(info, sizeof info, 3);
	for (size_t m = 0; m < 2; m++) {
		const WOLFSSL_EVP_MD *md = mds[m];
		size_t hlen = (size_t)wolfSSL_EVP_MD_size(md);

		for (size_t saltlen = 0; saltlen <= sizeof salt; saltlen += 20) {
			memset(a, 0, sizeof a);
			memset(b, 1, sizeof b);
			assert_int_equal(wolfSSL_quic_hkdf_extract(a, md, secret,
			    sizeof secret, salt, saltlen), WOLFSSL_SUCCESS);
			assert_int_equal(__real_wolfSSL_quic_hkdf_extract(b, md,
			    secret, sizeof secret, salt, saltlen), WOLFSSL_SUCCESS);
			assert_memory_equal(a, b, hlen);
		}
		for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
			size_t n = lens[i];

			memset(a, 0, sizeof a);
			memset(b, 1, sizeof b);
			assert_int_equal(wolfSSL_quic_hkdf_expand(a, n, md, secret,
			    hlen, info, sizeof info), WOLFSSL_SUCCESS);
			assert_int_equal(__real_wolfSSL_quic_hkdf_expand(b, n, md,
			    secret, hlen, info, sizeof info), WOLFSSL_SUCCESS);
			assert_memory_equal(a, b, n);
			memset(a, 0, sizeof a);
			memset(b, 1, sizeof b);
			assert_int_equal(wolfSSL_quic_hkdf(a, n, md, secret,
			    sizeof secret, salt, sizeof salt, info, i), WOLFSSL_SUCCESS);
			assert_int_equal(__real_wolfSSL_quic_hkdf(b, n, md, secret,
			    sizeof secret, salt, sizeof salt, info, i), WOLFSSL_SUCCESS);
			assert_memory_equal(a, b, n);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hkdf_as_wolfssl),
		cmocka_unit_test(test_aes128_gcm),
		cmocka_unit_test(test_aes256_gcm),
		cmocka_unit_test(test_hp_ecb),
		cmocka_unit_test(test_hp_ctr),
		cmocka_unit_test(test_chacha_not_fast),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

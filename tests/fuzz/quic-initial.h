/* Fuzzing helper: QUIC v1 Initial packet protection (RFC 9001 5.2 and
 * 5.4), which anyone can apply because its keys come from the client's
 * Destination Connection ID. The harness forges client Initials with it;
 * the seed generator opens a real client's first packet with it. Built
 * from wolfCrypt's HKDF, AES-GCM and AES-ECB. Header-only, like
 * tests/unit/transport/quic-pair.h. */
#ifndef ROVE_FUZZ_QUIC_INITIAL_H
#define ROVE_FUZZ_QUIC_INITIAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/aes.h>
#include <wolfssl/wolfcrypt/hmac.h>

#define INITIAL_MIN_DATAGRAM 1200 /* a client's Initial, at least */
#define INITIAL_TAG 16
#define INITIAL_PN_LEN 4          /* what initial_protect writes */
#define INITIAL_MAX_CID 20
#define INITIAL_MAX_TOKEN 255

struct initial_keys {
	uint8_t key[16], iv[12], hp[16];
};

/* HKDF-Expand-Label of TLS 1.3 (RFC 8446 7.1), empty context. */
static inline int
initial_expand_label(const uint8_t secret[32], const char *label,
    uint8_t *out, size_t outlen)
{
	uint8_t info[64];
	size_t n = 0, l = strlen(label);

	info[n++] = (uint8_t)(outlen >> 8);
	info[n++] = (uint8_t)outlen;
	info[n++] = (uint8_t)(6 + l);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, l);
	n += l;
	info[n++] = 0;
	return wc_HKDF_Expand(WC_SHA256, secret, 32, info, (word32)n, out,
	    (word32)outlen);
}

/* The client's Initial keys for `dcid`. Returns 0 or -1. */
static inline int
initial_keys_derive(const uint8_t *dcid, size_t dcidlen,
    struct initial_keys *k)
{
	static const uint8_t salt[20] = {
		0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
		0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a,
	};
	uint8_t secret[32], client[32];

	if (wc_HKDF_Extract(WC_SHA256, salt, sizeof salt, dcid, (word32)dcidlen,
	    secret) != 0 ||
	    initial_expand_label(secret, "client in", client, sizeof client) ||
	    initial_expand_label(client, "quic key", k->key, sizeof k->key) ||
	    initial_expand_label(client, "quic iv", k->iv, sizeof k->iv) ||
	    initial_expand_label(client, "quic hp", k->hp, sizeof k->hp))
		return -1;
	return 0;
}

/* The header protection mask for the 16-byte `sample`. */
static inline int
initial_mask(const struct initial_keys *k, const uint8_t *sample,
    uint8_t mask[16])
{
	Aes aes;
	int r;

	if (wc_AesInit(&aes, NULL, INVALID_DEVID) != 0)
		return -1;
	r = wc_AesSetKey(&aes, k->hp, sizeof k->hp, NULL, AES_ENCRYPTION) ||
	    wc_AesEcbEncrypt(&aes, mask, sample, 16);
	wc_AesFree(&aes);
	return r == 0 ? 0 : -1;
}

/* AES-128-GCM over `len` bytes at `p` in place, tag after them. */
static inline int
initial_aead(const struct initial_keys *k, uint64_t pn, const uint8_t *aad,
    size_t aadlen, uint8_t *p, size_t len, int encrypt)
{
	uint8_t nonce[12];
	Aes aes;
	int r;

	memcpy(nonce, k->iv, sizeof nonce);
	for (size_t i = 0; i < 8; i++)
		nonce[4 + i] ^= (uint8_t)(pn >> (56 - 8 * i));
	if (wc_AesInit(&aes, NULL, INVALID_DEVID) != 0)
		return -1;
	r = wc_AesGcmSetKey(&aes, k->key, sizeof k->key);
	if (r == 0 && encrypt)
		r = wc_AesGcmEncrypt(&aes, p, p, (word32)len, nonce,
		    sizeof nonce, p + len, INITIAL_TAG, aad, (word32)aadlen);
	else if (r == 0)
		r = wc_AesGcmDecrypt(&aes, p, p, (word32)len, nonce,
		    sizeof nonce, p + len, INITIAL_TAG, aad, (word32)aadlen);
	wc_AesFree(&aes);
	return r == 0 ? 0 : -1;
}

/*
 * A client Initial (QUIC v1, packet number `pn` in 4 bytes) carrying
 * `token` (at most INITIAL_MAX_TOKEN bytes) and `frames`, padded with
 * PADDING to a full datagram, into `out` (room for INITIAL_MIN_DATAGRAM +
 * INITIAL_MAX_TOKEN + 64 bytes; `len` at most INITIAL_MIN_DATAGRAM).
 * Returns its length.
 */
static inline size_t
initial_protect(const struct initial_keys *k, const uint8_t *dcid,
    size_t dcidlen, const uint8_t *scid, size_t scidlen,
    const uint8_t *token, size_t tokenlen, uint32_t pn,
    const uint8_t *frames, size_t len, uint8_t *out)
{
	uint8_t mask[16], *p = out, *pnp;
	size_t payload, hdrlen, field;

	*p++ = 0xc0 | (INITIAL_PN_LEN - 1);
	memcpy(p, "\x00\x00\x00\x01", 4);
	p += 4;
	*p++ = (uint8_t)dcidlen;
	memcpy(p, dcid, dcidlen);
	p += dcidlen;
	*p++ = (uint8_t)scidlen;
	memcpy(p, scid, scidlen);
	p += scidlen;
	/* The token length as a 1- or 2-byte varint. */
	if (tokenlen < 64)
		*p++ = (uint8_t)tokenlen;
	else {
		*p++ = (uint8_t)(0x40 | tokenlen >> 8);
		*p++ = (uint8_t)tokenlen;
	}
	memcpy(p, token, tokenlen);
	p += tokenlen;
	hdrlen = (size_t)(p - out) + 2 + INITIAL_PN_LEN;
	payload = len;
	if (hdrlen + payload + INITIAL_TAG < INITIAL_MIN_DATAGRAM)
		payload = INITIAL_MIN_DATAGRAM - hdrlen - INITIAL_TAG;
	field = INITIAL_PN_LEN + payload + INITIAL_TAG;
	*p++ = (uint8_t)(0x40 | field >> 8);        /* 2-byte varint */
	*p++ = (uint8_t)field;
	pnp = p;
	for (size_t i = 0; i < INITIAL_PN_LEN; i++)
		*p++ = (uint8_t)(pn >> (8 * (INITIAL_PN_LEN - 1 - i)));
	memset(p, 0, payload);
	memcpy(p, frames, len);
	if (initial_aead(k, pn, out, hdrlen, p, payload, 1) != 0 ||
	    initial_mask(k, pnp + 4, mask) != 0)
		return 0;
	out[0] ^= mask[0] & 0x0f;
	for (size_t i = 0; i < INITIAL_PN_LEN; i++)
		pnp[i] ^= mask[1 + i];
	return hdrlen + payload + INITIAL_TAG;
}

/* The payload of a client Initial at the start of `pkt`, unprotected in
 * place: *frames and *frameslen point at it, and *scid at the packet's
 * Source Connection ID. Returns 0, or -1 if it is not one. */
static inline int
initial_unprotect(uint8_t *pkt, size_t len, uint8_t **frames,
    size_t *frameslen, const uint8_t **scid, size_t *scidlen)
{
	struct initial_keys k;
	uint8_t mask[16], *p = pkt, *end = pkt + len;
	size_t dcidlen, toklen, vlen, plen, pnlen;
	uint64_t pn = 0;

	if (len < 7 || (pkt[0] & 0xf0) != 0xc0 ||
	    memcmp(pkt + 1, "\x00\x00\x00\x01", 4) != 0)
		return -1;
	p += 5;
	dcidlen = *p++;
	if (dcidlen > INITIAL_MAX_CID || end - p < (ptrdiff_t)dcidlen + 1 ||
	    initial_keys_derive(p, dcidlen, &k) != 0)
		return -1;
	p += dcidlen;
	*scidlen = *p++;
	*scid = p;
	if (*scidlen > INITIAL_MAX_CID || end - p < (ptrdiff_t)*scidlen + 1)
		return -1;
	p += *scidlen;
	/* No token (a one-byte zero, as a client writes it), then the
	 * Length varint. */
	toklen = *p++;
	if (toklen != 0 || end - p < 1)
		return -1;
	vlen = (size_t)1 << (p[0] >> 6);
	if (end - p < (ptrdiff_t)vlen)
		return -1;
	plen = p[0] & 0x3f;
	for (size_t i = 1; i < vlen; i++)
		plen = plen << 8 | p[i];
	p += vlen;
	if (plen > (size_t)(end - p) || plen < 4 + 16 + INITIAL_TAG ||
	    initial_mask(&k, p + 4, mask) != 0)
		return -1;
	pkt[0] ^= mask[0] & 0x0f;
	pnlen = (size_t)(pkt[0] & 3) + 1;
	for (size_t i = 0; i < pnlen; i++) {
		p[i] ^= mask[1 + i];
		pn = pn << 8 | p[i];
	}
	if (initial_aead(&k, pn, pkt, (size_t)(p - pkt) + pnlen, p + pnlen,
	    plen - pnlen - INITIAL_TAG, 0) != 0)
		return -1;
	*frames = p + pnlen;
	*frameslen = plen - pnlen - INITIAL_TAG;
	return 0;
}

#endif

/* Ed25519 keys: generation, the base64 text form, private key files, and
 * pins (the peer public keys a side accepts). */
#ifndef ROVE_KEY_H
#define ROVE_KEY_H

#include <stddef.h>
#include <stdint.h>

#define KEY_LEN 32     /* Ed25519 private seed and public key */
#define KEY_B64_LEN 44 /* base64 of 32 bytes, with padding */

/* Base64 text of a 32-byte key into `out` (KEY_B64_LEN + 1 bytes, NUL
 * terminated). */
void key_encode(const uint8_t key[static KEY_LEN], char out[static KEY_B64_LEN + 1]);
/* Decode base64 text (surrounding whitespace ignored) of exactly 32 bytes,
 * in the canonical form key_encode writes. Returns 0, or -1 if malformed,
 * non-canonical or of another length. */
int key_decode(const char *text, uint8_t key[static KEY_LEN]);

/* A fresh private key from the system CSPRNG. Returns 0 or -1. */
int key_generate(uint8_t priv[static KEY_LEN]);
/* The public key of a private key. Returns 0 or -1. */
int key_public(const uint8_t priv[static KEY_LEN], uint8_t pub[static KEY_LEN]);

/* Read a private key file (base64 text). The file must not be readable by
 * group or others. Returns 0, or -1 with *cause set (caller frees). */
int key_load_private(const char *path, uint8_t priv[static KEY_LEN], char **cause);

#endif

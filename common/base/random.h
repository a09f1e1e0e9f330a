/* Random bytes for everything rove makes up: connection IDs, tokens,
 * secrets, jitter. One generator per process, reseeded in a forked child
 * so that parent and child never draw the same bytes. */
#ifndef ROVE_RANDOM_H
#define ROVE_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* Fill `buf` from wolfCrypt's DRBG; fatal if the generator fails (no
 * caller could go on safely without randomness). */
void random_bytes(uint8_t *buf, size_t len);

#endif

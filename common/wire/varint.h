/* QUIC variable-length integers (RFC 9000 section 16): the numbers of
 * every rove message, field and DATAGRAM context. Pure functions. */
#ifndef ROVE_VARINT_H
#define ROVE_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* 1, 2, 4 or 8; 0 if v >= 2^62. */
size_t varint_len(uint64_t v);
/* Write v at out; returns bytes written or 0 if it does not fit. */
size_t varint_put(uint8_t *out, size_t outlen, uint64_t v);
/* Read a varint; returns bytes consumed, or 0 if truncated. */
size_t varint_get(const uint8_t *in, size_t inlen, uint64_t *v);

#endif

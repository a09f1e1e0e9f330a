/* QUIC varints: the two top bits of the first byte give the length. */
#include "varint.h"

#define VARINT_MAX ((UINT64_C(1) << 62) - 1)

size_t
varint_len(uint64_t v)
{
	if (v < 64)
		return 1;
	if (v < 16384)
		return 2;
	if (v < (UINT64_C(1) << 30))
		return 4;
	if (v <= VARINT_MAX)
		return 8;
	return 0;
}

size_t
varint_put(uint8_t *out, size_t outlen, uint64_t v)
{
	size_t n = varint_len(v);
	uint8_t prefix;

	if (n == 0 || outlen < n)
		return 0;
	/* The top two bits of the first byte give log2 of the length. */
	prefix = n == 1 ? 0x00 : n == 2 ? 0x40 : n == 4 ? 0x80 : 0xc0;
	for (size_t i = n; i > 0; i--) {
		out[i - 1] = (uint8_t)v;
		v >>= 8;
	}
	out[0] |= prefix;
	return n;
}

size_t
varint_get(const uint8_t *in, size_t inlen, uint64_t *v)
{
	size_t n;
	uint64_t x;

	if (inlen < 1)
		return 0;
	n = (size_t)1 << (in[0] >> 6);
	if (inlen < n)
		return 0;
	x = in[0] & 0x3f;
	for (size_t i = 1; i < n; i++)
		x = x << 8 | in[i];
	*v = x;
	return n;
}

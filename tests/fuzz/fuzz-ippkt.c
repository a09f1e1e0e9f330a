/* libFuzzer harness for common/wire/ippkt.c: header checks and PTB answers. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/ippkt.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define OUT_SLACK 64

/* Everything a produced answer must satisfy, whatever the input was. */
static void
check_answer(const struct ippkt_info *in, const struct ipaddr *from,
    const uint8_t *pkt, const uint8_t *out, size_t n)
{
	struct ippkt_info info;
	size_t hdr, quote, limit;
	uint8_t again[1400];
	uint16_t sum;

	hdr = in->family == AF_INET ? 28 : 48;
	limit = in->family == AF_INET ? IPPKT_MIN_MTU4 : IPPKT_MIN_MTU6;
	quote = in->len < limit - hdr ? in->len : limit - hdr;
	assert(n == hdr + quote);
	assert(n <= limit);
	assert(memcmp(out + hdr, pkt, quote) == 0);

	/* The answer is itself a well-formed packet... */
	assert(ippkt_parse(out, n, &info) == IPPKT_OK);
	assert(info.family == in->family);
	assert(info.len == n);
	assert(memcmp(info.src.b, from->b, 16) == 0);
	assert(memcmp(info.dst.b, in->src.b, 16) == 0);
	if (in->family == AF_INET) {
		assert(info.proto == 1);
		assert(!info.df);
		assert(out[20] == 3 && out[21] == 4);
		assert(ippkt_checksum(out, 20, 0) == 0);
		assert(ippkt_checksum(out + 20, n - 20, 0) == 0);
		assert(((out[26] << 8) | out[27]) >= 68);
	} else {
		uint8_t pseudo[40] = { 0 };

		assert(info.proto == 58);
		assert(out[40] == 2 && out[41] == 0);
		memcpy(pseudo, out + 8, 32);
		pseudo[34] = (uint8_t)((n - 40) >> 8);
		pseudo[35] = (uint8_t)(n - 40);
		pseudo[39] = 58;
		sum = ippkt_checksum(pseudo, sizeof pseudo, 0);
		assert(ippkt_checksum(out + 40, n - 40, (uint16_t)~sum) == 0);
		assert(((uint32_t)out[44] << 24 | (uint32_t)out[45] << 16 |
		    (uint32_t)out[46] << 8 | out[47]) >= IPPKT_MIN_MTU6);
	}

	/* ...and an ICMP error, which is never answered in turn. */
	assert(ippkt_make_ptb(out, n, from, 1280, again, sizeof again) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ippkt_info info;
	struct ipaddr from, other;
	uint8_t out[IPPKT_MIN_MTU6 + OUT_SLACK];
	enum ippkt_error e;
	uint8_t *inplace;
	uint32_t mtu;
	size_t n;

	e = ippkt_parse(data, size, &info);
	assert(e == IPPKT_OK || e == IPPKT_ERR_SHORT || e == IPPKT_ERR_VERSION ||
	    e == IPPKT_ERR_HEADER || e == IPPKT_ERR_LENGTH);

	memset(&from, 0, sizeof from);
	memset(&other, 0, sizeof other);
	from.family = AF_INET6;
	other.family = AF_INET;
	if (size > 0 && data[0] >> 4 == 4) {
		from.family = AF_INET;
		other.family = AF_INET6;
	}
	from.b[0] = 198;
	from.b[1] = 18;
	from.b[3] = 1;
	mtu = size > 1 ? (uint32_t)data[size - 1] * 300 : 0;

	memset(out, 0xa5, sizeof out);
	n = ippkt_make_ptb(data, size, &from, mtu, out, IPPKT_MIN_MTU6);
	/* Nothing is written past outlen. */
	for (size_t i = IPPKT_MIN_MTU6; i < sizeof out; i++)
		assert(out[i] == 0xa5);
	if (e != IPPKT_OK) {
		assert(n == 0);
		return 0;
	}
	assert(info.len <= size);
	assert(info.len >= (info.family == AF_INET ? 20u : 40u));
	assert(info.family == AF_INET || info.family == AF_INET6);
	if (n == 0)
		return 0;
	check_answer(&info, &from, data, out, n);

	/* Answering in place, over the packet itself, gives the same bytes. */
	inplace = malloc(size > n ? size : n);
	assert(inplace != NULL);
	memcpy(inplace, data, size);
	assert(ippkt_make_ptb(inplace, size, &from, mtu, inplace,
	    size > n ? size : n) == n);
	assert(memcmp(inplace, out, n) == 0);
	free(inplace);

	/* The same with one byte less room: nothing. */
	assert(ippkt_make_ptb(data, size, &from, mtu, out, n - 1) == 0);
	/* From the other family: nothing. */
	assert(ippkt_make_ptb(data, size, &other, mtu, out, sizeof out) == 0);
	return 0;
}

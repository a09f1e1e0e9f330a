/* libFuzzer harness for the SOCKS5 UDP datagram header in
 * common/wire/socks5.c (RFC 1928 section 7): the decoder on any bytes, the
 * encoder on any fields, each the other's inverse. */
#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/proto-fwd.h"
#include "wire/socks5.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A decoded header agrees with its bytes, and encodes back to them. */
static void
check_decode(const uint8_t *data, size_t size)
{
	struct socks5_udp_header h, p;
	uint8_t addr[16], out[SOCKS5_UDP_HEADER_MAX + 1];
	size_t used, hostlen;
	long r;

	memset(&h, 0x5a, sizeof h);
	memset(&p, 0x5a, sizeof p);
	r = socks5_udp_decode(data, size, &h);
	if (r < 0) {
		assert(r == SOCKS5_MALFORMED);
		assert(memcmp(&h, &p, sizeof h) == 0);
		return;
	}
	assert(r >= 8 && (size_t)r <= size && r <= SOCKS5_UDP_HEADER_MAX);
	used = (size_t)r;
	assert(data[0] == 0 && data[1] == 0);
	assert(h.frag == data[2] && h.atyp == data[3]);
	assert(h.port != 0 && h.port == (data[used - 2] << 8 | data[used - 1]));
	hostlen = strnlen(h.host, sizeof h.host);
	assert(hostlen > 0 && hostlen < sizeof h.host);
	switch (h.atyp) {
	case SOCKS5_ATYP_IPV4:
		assert(used == 10);
		assert(inet_pton(AF_INET, h.host, addr) == 1);
		assert(memcmp(addr, data + 4, 4) == 0);
		break;
	case SOCKS5_ATYP_IPV6:
		assert(used == 22);
		assert(inet_pton(AF_INET6, h.host, addr) == 1);
		assert(memcmp(addr, data + 4, 16) == 0);
		break;
	case SOCKS5_ATYP_DOMAIN:
		assert(used == 5 + (size_t)data[4] + 2 && hostlen == data[4]);
		assert(memcmp(h.host, data + 5, hostlen) == 0);
		assert(proto_fwd_host_valid(h.host, hostlen));
		break;
	default:
		assert(0);
	}
	/* The datagram must be whole: any shorter is cut short. */
	for (size_t i = 0; i < used; i++)
		assert(socks5_udp_decode(data, i, &p) == SOCKS5_MALFORMED);
	memset(out, 0xee, sizeof out);
	assert(socks5_udp_encode(out, sizeof out, &h) == used);
	assert(memcmp(out, data, used) == 0);
	assert(socks5_udp_encode(out, used - 1, &h) == 0);
}

/* Fields from the input: what the encoder takes decodes to the same
 * header (an address as the same bytes, whatever its text). */
static void
check_encode(const uint8_t *data, size_t size)
{
	struct socks5_udp_header h, back;
	uint8_t out[SOCKS5_UDP_HEADER_MAX + 1], a1[16], a2[16];
	size_t n, outlen, hostlen;
	int af;

	if (size < 5)
		return;
	memset(&h, 0, sizeof h);
	h.atyp = data[0] % 6;
	h.frag = data[1];
	h.port = (uint16_t)(data[2] << 8 | data[3]);
	outlen = data[4] % (sizeof out + 1);
	hostlen = size - 5 < sizeof h.host - 1 ? size - 5 : sizeof h.host - 1;
	memcpy(h.host, data + 5, hostlen);
	memset(out, 0xee, sizeof out);
	n = socks5_udp_encode(out, outlen, &h);
	for (size_t i = n; i < sizeof out; i++)
		assert(out[i] == 0xee);
	if (n == 0)
		return;
	assert(n <= outlen);
	assert(socks5_udp_decode(out, n, &back) == (long)n);
	assert(back.frag == h.frag && back.atyp == h.atyp && back.port == h.port);
	if (h.atyp == SOCKS5_ATYP_DOMAIN) {
		assert(strcmp(back.host, h.host) == 0);
		return;
	}
	af = h.atyp == SOCKS5_ATYP_IPV4 ? AF_INET : AF_INET6;
	assert(h.atyp == SOCKS5_ATYP_IPV4 || h.atyp == SOCKS5_ATYP_IPV6);
	assert(inet_pton(af, h.host, a1) == 1);
	assert(inet_pton(af, back.host, a2) == 1);
	assert(memcmp(a1, a2, af == AF_INET ? 4 : 16) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_decode(data, size);
	check_encode(data, size);
	return 0;
}

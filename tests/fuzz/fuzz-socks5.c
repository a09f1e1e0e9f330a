/* libFuzzer harness for common/wire/socks5.c: greeting, request and replies. */
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

#define GREETING_MAX (2 + 255)
#define REQUEST_MAX (5 + 255 + 2)

/* The greeting over every prefix: "need more" until the bytes decide,
 * then the same verdict whatever follows. */
static void
check_greeting(const uint8_t *data, size_t size)
{
	size_t lim = size < GREETING_MAX + 1 ? size : GREETING_MAX + 1;
	bool no_auth, first = false;
	long r, verdict = 0;

	for (size_t i = 0; i <= lim; i++) {
		no_auth = false;
		r = socks5_parse_greeting(data, i, &no_auth);
		assert(r >= -1 && r <= (long)i);
		if (r <= 0)
			assert(!no_auth);
		if (verdict == 0) {
			verdict = r;
			if (r > 0) {
				assert((size_t)r == i);
				assert(data[0] == 5 && data[1] > 0);
				assert(r == 2 + data[1]);
				assert(no_auth ==
				    (memchr(data + 2, 0, data[1]) != NULL));
				first = no_auth;
			}
		} else {
			assert(r == verdict);
			if (r > 0)
				assert(no_auth == first);
		}
	}
	assert(socks5_parse_greeting(data, size, &no_auth) == verdict);
}

/* A parsed request's text agrees with its bytes and can become a forward
 * header as is. */
static void
check_parsed(const uint8_t *data, long r, const struct socks5_request *req)
{
	struct proto_fwd_header h, h2;
	uint8_t addr[16], enc[300];
	size_t hostlen, used, n;

	hostlen = strnlen(req->host, sizeof req->host);
	assert(hostlen > 0 && hostlen < sizeof req->host);
	assert(proto_fwd_host_valid(req->host, hostlen));
	assert(req->port != 0 || req->cmd == SOCKS5_CMD_UDP_ASSOCIATE);
	assert(req->cmd == data[1]);
	switch (data[3]) {
	case 1:
		used = 4 + 4 + 2;
		assert(inet_pton(AF_INET, req->host, addr) == 1);
		assert(memcmp(addr, data + 4, 4) == 0);
		break;
	case 4:
		used = 4 + 16 + 2;
		assert(inet_pton(AF_INET6, req->host, addr) == 1);
		assert(memcmp(addr, data + 4, 16) == 0);
		break;
	case 3:
		used = 5 + data[4] + 2;
		assert(hostlen == data[4]);
		assert(memcmp(req->host, data + 5, hostlen) == 0);
		break;
	default:
		assert(0);
		return;
	}
	assert(req->port == (data[used - 2] << 8 | data[used - 1]));
	if (r > 0)
		assert((size_t)r == used && (req->cmd == SOCKS5_CMD_CONNECT ||
		    req->cmd == SOCKS5_CMD_UDP_ASSOCIATE));
	else
		assert(r == SOCKS5_CMD_UNSUPPORTED &&
		    req->cmd != SOCKS5_CMD_CONNECT &&
		    req->cmd != SOCKS5_CMD_UDP_ASSOCIATE);
	/* UDP ASSOCIATE's port 0 ("not known yet") names no target. */
	if (req->port == 0)
		return;

	memset(&h, 0, sizeof h);
	h.type = PROTO_FWD_CONNECT;
	memcpy(h.host, req->host, sizeof h.host);
	h.port = req->port;
	n = proto_fwd_encode(enc, sizeof enc, &h);
	assert(n > 0);
	assert(proto_fwd_decode(enc, n, &h2) == (long)n);
	assert(memcmp(&h, &h2, sizeof h) == 0);
}

static void
check_request(const uint8_t *data, size_t size)
{
	struct socks5_request req, first;
	size_t lim = size < REQUEST_MAX + 1 ? size : REQUEST_MAX + 1;
	long r, verdict = 0;

	memset(&first, 0, sizeof first);
	for (size_t i = 0; i <= lim; i++) {
		memset(&req, 0x5a, sizeof req);
		r = socks5_parse_request(data, i, &req);
		assert(r >= SOCKS5_CMD_UNSUPPORTED && r <= (long)i);
		if (verdict == 0) {
			verdict = r;
			if (r > 0 || r == SOCKS5_CMD_UNSUPPORTED) {
				check_parsed(data, r, &req);
				first = req;
			}
			assert(socks5_rep_from_parse_error(r) <=
			    SOCKS5_REP_ATYP_NOT_SUPPORTED);
		} else {
			assert(r == verdict);
			if (r > 0 || r == SOCKS5_CMD_UNSUPPORTED)
				assert(memcmp(&req, &first, sizeof req) == 0);
		}
	}
	assert(socks5_parse_request(data, size, &req) == verdict);
}

/* A reply for an address built from the input. */
static void
check_reply(const uint8_t *data, size_t size)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	uint8_t out[SOCKS5_REPLY_MAX + 1], rep;
	size_t n, outlen;

	if (size < 3 + 16 + 2)
		return;
	rep = data[0];
	outlen = data[1] % (sizeof out + 1);
	memset(&ss, 0, sizeof ss);
	memset(out, 0xee, sizeof out);
	switch (data[2] % 4) {
	case 0:
		n = socks5_reply(out, outlen, rep, NULL);
		assert(n == (outlen >= 10 ? 10 : 0));
		if (n > 0)
			assert(memcmp(out + 3, "\x01\0\0\0\0\0\0", 7) == 0);
		break;
	case 1:
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, data + 3, 4);
		memcpy(&sin->sin_port, data + 19, 2);
		n = socks5_reply(out, outlen, rep, (struct sockaddr *)&ss);
		assert(n == (outlen >= 10 ? 10 : 0));
		if (n > 0) {
			assert(out[3] == SOCKS5_ATYP_IPV4);
			assert(memcmp(out + 4, data + 3, 4) == 0);
			assert(memcmp(out + 8, data + 19, 2) == 0);
		}
		break;
	case 2:
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, data + 3, 16);
		memcpy(&sin6->sin6_port, data + 19, 2);
		n = socks5_reply(out, outlen, rep, (struct sockaddr *)&ss);
		assert(n == (outlen >= 22 ? 22 : 0));
		if (n > 0) {
			assert(out[3] == SOCKS5_ATYP_IPV6);
			assert(memcmp(out + 4, data + 3, 16) == 0);
			assert(memcmp(out + 20, data + 19, 2) == 0);
		}
		break;
	default:
		/* Any other family, even with address bytes behind it. */
		memcpy(&ss, data + 3, 16);
		ss.ss_family = (sa_family_t)(data[3] | data[4] << 8);
		if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
			return;
		n = socks5_reply(out, outlen, rep, (struct sockaddr *)&ss);
		assert(n == (outlen >= 10 ? 10 : 0));
		if (n > 0)
			assert(memcmp(out + 3, "\x01\0\0\0\0\0\0", 7) == 0);
		break;
	}
	if (n > 0)
		assert(out[0] == 5 && out[1] == rep && out[2] == 0);
	for (size_t i = n; i < sizeof out; i++)
		assert(out[i] == 0xee);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t code = 0;
	uint8_t rep;

	check_greeting(data, size);
	check_request(data, size);
	check_reply(data, size);

	for (size_t i = 0; i < size && i < 8; i++)
		code = code << 8 | data[i];
	rep = socks5_rep_from_fwd_error(code);
	assert(rep <= SOCKS5_REP_TTL_EXPIRED && rep != SOCKS5_REP_NET_UNREACHABLE);
	if (code >= PROTO_FWD_ERR_COUNT)
		assert(rep == SOCKS5_REP_GENERAL_FAILURE);
	return 0;
}

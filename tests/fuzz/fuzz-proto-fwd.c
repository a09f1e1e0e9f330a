/* libFuzzer harness for common/wire/proto-fwd.c: forward headers and the
 * remote-forward control messages. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/proto-fwd.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Longest header: 8-byte type and length varints, 255 host bytes, port,
 * an 8-byte ID. */
#define HEADER_MAX (8 + 8 + PROTO_FWD_MAX_HOST + 2 + 8)

static bool
host_byte(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':' ||
	    c == '_';
}

/* What a decoded header must satisfy, and that it survives re-encoding. */
static void
check_decoded(const uint8_t *data, long r, const struct proto_fwd_header *h)
{
	struct proto_fwd_header h2;
	uint8_t enc[HEADER_MAX];
	size_t hostlen, n;

	assert(r > 0 && r <= HEADER_MAX);
	hostlen = strnlen(h->host, sizeof h->host);
	assert(hostlen < sizeof h->host);
	if (h->type == PROTO_FWD_RESUME) {
		assert(h->id != 0 && h->id <= PROTO_FWD_ID_MAX);
		assert(hostlen == 0 && h->port == 0);
	} else {
		assert(h->port != 0 && h->rx == 0);
		assert(h->type == PROTO_FWD_CONNECT || h->type == PROTO_FWD_REMOTE);
		if (h->type == PROTO_FWD_CONNECT)
			assert(proto_fwd_host_valid(h->host, hostlen));
		else
			assert(hostlen == 0);
	}
	/* Without an ID, the host and port are the header's last bytes. */
	if (h->type != PROTO_FWD_RESUME && h->id == 0) {
		assert(memcmp(data + r - 2 - hostlen, h->host, hostlen) == 0);
		assert(h->port == (data[r - 2] << 8 | data[r - 1]));
	}

	/* Re-encoding uses minimal varints, so it may only be shorter. */
	n = proto_fwd_encode(enc, sizeof enc, h);
	assert(n > 0 && n <= (size_t)r);
	if (h->type == PROTO_FWD_RESUME)
		assert(n == 1 + varint_len(h->id) + varint_len(h->rx));
	else
		assert(n == 1 + varint_len(hostlen) + hostlen + 2 +
		    (h->id != 0 ? varint_len(h->id) : 0));
	assert(proto_fwd_decode(enc, n, &h2) == (long)n);
	assert(memcmp(h, &h2, sizeof h2) == 0);
}

/* The decoder over every prefix: "need more" until the bytes decide, then
 * the same verdict however many more arrive. */
static void
check_header(const uint8_t *data, size_t size)
{
	struct proto_fwd_header h, first;
	size_t lim = size < HEADER_MAX + 1 ? size : HEADER_MAX + 1;
	long r, verdict = 0;

	memset(&first, 0, sizeof first);
	for (size_t i = 0; i <= lim; i++) {
		memset(&h, 0x5a, sizeof h);
		r = proto_fwd_decode(data, i, &h);
		assert(r >= -1 && r <= (long)i);
		if (verdict == 0) {
			verdict = r;
			if (r > 0) {
				assert((size_t)r == i);
				check_decoded(data, r, &h);
				first = h;
			}
		} else {
			assert(r == verdict);
			if (r > 0)
				assert(memcmp(&h, &first, sizeof h) == 0);
		}
	}
	/* Beyond the longest header nothing changes. */
	r = proto_fwd_decode(data, size, &h);
	assert(r == verdict);
	if (r > 0)
		assert(memcmp(&h, &first, sizeof h) == 0);
}

/* A body that decodes re-encodes, as a reply and as a request, into
 * messages that frame and decode back. */
static void
check_remote_body(const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf, rf2;
	uint8_t enc[64];
	const uint8_t *b;
	size_t n, blen;
	uint64_t type;

	if (proto_fwd_remote_decode(body, len, &rf) != 0)
		return;
	assert(rf.port != 0);
	assert(rf.status < UINT64_C(1) << 62);

	n = proto_fwd_remote_encode(enc, sizeof enc,
	    PROTO_MSG_REMOTE_FORWARD_REPLY, &rf);
	assert(n > 0);
	assert(proto_msg_next(enc, n, &type, &b, &blen) == (long)n);
	assert(type == PROTO_MSG_REMOTE_FORWARD_REPLY);
	assert(proto_fwd_remote_decode(b, blen, &rf2) == 0);
	assert(rf2.port == rf.port && rf2.status == rf.status);
	assert(proto_fwd_remote_same(&rf2, &rf));

	n = proto_fwd_remote_encode(enc, sizeof enc, PROTO_MSG_REMOTE_FORWARD,
	    &rf);
	assert(n > 0);
	assert(proto_msg_next(enc, n, &type, &b, &blen) == (long)n);
	assert(type == PROTO_MSG_REMOTE_FORWARD);
	assert(proto_fwd_remote_decode(b, blen, &rf2) == 0);
	assert(rf2.port == rf.port && rf2.status == PROTO_FWD_OK);
	assert(proto_fwd_remote_same(&rf2, &rf));
	assert(rf.bind != PROTO_RBIND_ADDR || rf.bind_addr.family == AF_INET ||
	    rf.bind_addr.family == AF_INET6);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *body, *p = data;
	size_t left = size, bodylen;
	uint64_t type, code;
	const char *name;
	bool valid;
	long r;

	check_header(data, size);

	/* RESUME's answer: OK and a varint, which re-encode no longer. */
	{
		uint8_t enc[16];
		uint64_t rx = 0;

		r = proto_fwd_resumed_decode(data, size, &rx);
		assert(r >= -1 && r <= (long)size && r <= 9);
		if (r > 0) {
			size_t n = proto_fwd_resumed_encode(enc, sizeof enc, rx);

			assert(n > 0 && n <= (size_t)r && enc[0] == data[0]);
		}
	}

	/* The host check against a plain reading of its rule. */
	valid = size >= 1 && size <= PROTO_FWD_MAX_HOST;
	for (size_t i = 0; valid && i < size; i++)
		valid = host_byte(data[i]);
	assert(proto_fwd_host_valid((const char *)data, size) == valid);

	if (varint_get(data, size, &code) > 0) {
		name = proto_fwd_error_name(code);
		assert(name != NULL && name[0] != '\0');
		assert((strcmp(name, "unknown") == 0) ==
		    (code >= PROTO_FWD_ERR_COUNT));
	}

	/* The input as a control stream, every message read as a remote
	 * forward; then the whole input as one body. */
	while ((r = proto_msg_next(p, left, &type, &body, &bodylen)) > 0) {
		check_remote_body(body, bodylen);
		p += r;
		left -= (size_t)r;
	}
	check_remote_body(data, size);
	return 0;
}

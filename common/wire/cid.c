/* Server-chosen connection IDs in the QUIC-LB plaintext layout (cid.h). */
#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "base/random.h"
#include "cid.h"

/* The first octet: config rotation in bits 7-5, then the length of the
 * rest of the CID (QUIC-LB's self-encoded length), which lets a balancer
 * tell our CIDs from a client's random ones of another length. */
static uint8_t
first_octet(unsigned config)
{
	return (uint8_t)(config << 5 | (CID_LEN - 1));
}

uint8_t
cid_first_octet(const struct cid_server_id *sid)
{
	return first_octet(sid->len > 0 ? sid->config : CID_CONFIG_UNROUTABLE);
}

size_t
cid_worker_offset(const struct cid_server_id *sid)
{
	return 1 + (size_t)sid->len;
}

void
cid_make(const struct cid_server_id *sid, uint8_t cid[static CID_LEN])
{
	random_bytes(cid, CID_LEN);
	if (sid != NULL && sid->workers > 1) {
		/* A fixed first octet, so that the steering program can tell
		 * our CIDs from anything else before it reads the worker. */
		cid[0] = cid_first_octet(sid);
		cid[cid_worker_offset(sid)] = sid->worker;
	}
	if (sid == NULL || sid->len == 0) {
		/* Unroutable: a balancer must fall back to its 4-tuple hash
		 * rather than read a server ID out of random octets. */
		cid[0] = (uint8_t)(CID_CONFIG_UNROUTABLE << 5 | (cid[0] & 0x1f));
		return;
	}
	cid[0] = first_octet(sid->config);
	memcpy(cid + 1, sid->id, sid->len);
}

bool
cid_server_id(const uint8_t *cid, size_t len,
    const struct cid_server_id *layout, struct cid_server_id *out)
{
	if (len != CID_LEN || layout->len == 0 ||
	    layout->len > CID_SERVER_ID_MAX || layout->config > CID_CONFIG_MAX ||
	    cid[0] != first_octet(layout->config))
		return false;
	memcpy(out->id, cid + 1, layout->len);
	out->len = layout->len;
	out->config = layout->config;
	out->workers = layout->workers;
	out->worker = layout->workers > 1 ? cid[cid_worker_offset(layout)] : 0;
	return true;
}

int
cid_server_id_parse(const char *s, struct cid_server_id *out)
{
	size_t n;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	n = strlen(s);
	if (n == 0 || n % 2 != 0 || n / 2 > CID_SERVER_ID_MAX)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out->id[i] = (uint8_t)(hi << 4 | lo);
	}
	out->len = (uint8_t)(n / 2);
	return 0;
}

const char *
cid_server_id_str(const struct cid_server_id *sid, char *buf)
{
	buf[0] = '\0';
	for (size_t i = 0; i < sid->len; i++)
		snprintf(buf + 2 * i, 3, "%02x", sid->id[i]);
	return buf;
}

bool
cid_server_id_equal(const struct cid_server_id *a,
    const struct cid_server_id *b)
{
	return a->len == b->len && a->config == b->config &&
	    a->worker == b->worker && memcmp(a->id, b->id, a->len) == 0;
}

/* The body of a control message: a run of (id, length, value) fields, id
 * and length as QUIC varints (docs/PROTOCOL.md), and the framing of a whole
 * message as (type, length, body). Written through a bounded writer that
 * remembers overflow, so an encoder writes every field and checks once;
 * read through a cursor that refuses a field running past the body. The
 * codec of proto.c's messages and proto-fwd.c's remote forwards alike.
 * Pure functions. */
#ifndef ROVE_TLV_H
#define ROVE_TLV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tlv_writer {
	uint8_t *p;
	size_t len;
	size_t cap;
	bool full; /* something did not fit: the result is void */
};

#define TLV_WRITER(buf) { (buf), 0, sizeof (buf), false }

void tlv_put_bytes(struct tlv_writer *, const void *, size_t);
void tlv_put_varint(struct tlv_writer *, uint64_t);
/* A field whose value is `len` bytes at `v`. */
void tlv_put_field(struct tlv_writer *, uint64_t id, const void *v,
    size_t len);
/* A scalar field: its value is one varint and nothing else. */
void tlv_put_field_varint(struct tlv_writer *, uint64_t id, uint64_t v);
/* Frame a finished body as type, length, body into `out`: the message's
 * length, or 0 (and `out` untouched) if the body overflowed or `out` is
 * too small. */
size_t tlv_put_message(uint8_t *out, size_t outlen, uint64_t type,
    const struct tlv_writer *body);

struct tlv_field {
	uint64_t id;
	const uint8_t *v;
	size_t len;
};

/* Returns 1 with the next field, 0 at the end of the body, -1 if its
 * header is truncated or its length runs past the body. */
int tlv_next(const uint8_t **p, size_t *left, struct tlv_field *);
/* A scalar field's value: 0, or -1 unless it is exactly one varint. */
int tlv_field_varint(const struct tlv_field *, uint64_t *);
/* Hand every field of a body to `take` in order: 0 when all were taken,
 * -1 at a malformed field or the first that `take` refuses (-1). */
int tlv_decode(const uint8_t *body, size_t len,
    int (*take)(const struct tlv_field *, void *arg), void *arg);

#endif

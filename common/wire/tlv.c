/* (id, length, value) fields and whole messages (tlv.h). */
#include <string.h>

#include "tlv.h"
#include "varint.h"

void
tlv_put_bytes(struct tlv_writer *w, const void *data, size_t len)
{
	if (w->full || w->cap - w->len < len) {
		w->full = true;
		return;
	}
	if (len > 0)
		memcpy(w->p + w->len, data, len);
	w->len += len;
}

void
tlv_put_varint(struct tlv_writer *w, uint64_t v)
{
	size_t n;

	if (w->full)
		return;
	n = varint_put(w->p + w->len, w->cap - w->len, v);
	if (n == 0)
		w->full = true;
	w->len += n;
}

void
tlv_put_field(struct tlv_writer *w, uint64_t id, const void *v, size_t len)
{
	tlv_put_varint(w, id);
	tlv_put_varint(w, len);
	tlv_put_bytes(w, v, len);
}

void
tlv_put_field_varint(struct tlv_writer *w, uint64_t id, uint64_t v)
{
	tlv_put_varint(w, id);
	tlv_put_varint(w, varint_len(v));
	tlv_put_varint(w, v);
}

size_t
tlv_put_message(uint8_t *out, size_t outlen, uint64_t type,
    const struct tlv_writer *body)
{
	struct tlv_writer w = { out, 0, outlen, false };
	size_t n = varint_len(type) + varint_len(body->len) + body->len;

	/* Measured first: a message that does not fit leaves `out` as it
	 * was, not half written. */
	if (body->full || varint_len(type) == 0 || n > outlen)
		return 0;
	tlv_put_field(&w, type, body->p, body->len);
	return w.len;
}

int
tlv_next(const uint8_t **p, size_t *left, struct tlv_field *f)
{
	uint64_t len;
	size_t n;

	if (*left == 0)
		return 0;
	if ((n = varint_get(*p, *left, &f->id)) == 0)
		return -1;
	*p += n;
	*left -= n;
	if ((n = varint_get(*p, *left, &len)) == 0)
		return -1;
	*p += n;
	*left -= n;
	if (len > *left)
		return -1;
	f->v = *p;
	f->len = (size_t)len;
	*p += len;
	*left -= (size_t)len;
	return 1;
}

int
tlv_field_varint(const struct tlv_field *f, uint64_t *v)
{
	if (f->len == 0 || varint_get(f->v, f->len, v) != f->len)
		return -1;
	return 0;
}

int
tlv_decode(const uint8_t *body, size_t len,
    int (*take)(const struct tlv_field *, void *arg), void *arg)
{
	struct tlv_field f;
	int r;

	while ((r = tlv_next(&body, &len, &f)) == 1) {
		if (take(&f, arg) != 0)
			return -1;
	}
	return r;
}

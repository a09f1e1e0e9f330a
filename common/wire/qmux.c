/* QUIC frames on a byte stream: encoders and the decoder (see qmux.h). */
#include <string.h>

#include "proto.h"
#include "qmux.h"

#define MAX_VARINT ((1ull << 62) - 1)
#define MAX_REASON 256

/* A cursor over the input: every read checks what is left. */
struct rd {
	const uint8_t *p;
	size_t left;
	bool short_input; /* ran out: more bytes may complete the frame */
};

static bool
get_varint(struct rd *r, uint64_t *v)
{
	size_t n = varint_get(r->p, r->left, v);

	if (n == 0) {
		r->short_input = true;
		return false;
	}
	r->p += n;
	r->left -= n;
	return true;
}

/* A length, then that many bytes. */
static bool
get_bytes(struct rd *r, const uint8_t **data, size_t *len, bool *too_long)
{
	uint64_t n;

	if (!get_varint(r, &n))
		return false;
	if (n > QMUX_MAX_PAYLOAD) {
		*too_long = true;
		return false;
	}
	if (n > r->left) {
		r->short_input = true;
		return false;
	}
	*data = r->p;
	*len = (size_t)n;
	r->p += n;
	r->left -= (size_t)n;
	return true;
}

long
qmux_frame_decode(const uint8_t *in, size_t inlen, struct qmux_frame *f)
{
	struct rd r = { in, inlen, false };
	bool too_long = false, ok;
	uint64_t type;

	memset(f, 0, sizeof *f);
	if (!get_varint(&r, &type))
		return 0;
	f->type = type;
	switch (type) {
	case QMUX_PADDING:
	case QMUX_PING:
		ok = true;
		break;
	case QMUX_RESET_STREAM:
		ok = get_varint(&r, &f->stream_id) && get_varint(&r, &f->code) &&
		    get_varint(&r, &f->final_size);
		break;
	case QMUX_STOP_SENDING:
		ok = get_varint(&r, &f->stream_id) && get_varint(&r, &f->code);
		break;
	case QMUX_MAX_DATA:
	case QMUX_MAX_STREAMS_BIDI:
		ok = get_varint(&r, &f->max);
		break;
	case QMUX_MAX_STREAM_DATA:
		ok = get_varint(&r, &f->stream_id) && get_varint(&r, &f->max);
		break;
	case QMUX_CONNECTION_CLOSE:
	case QMUX_CONNECTION_CLOSE_APP:
		ok = get_varint(&r, &f->code) &&
		    (type == QMUX_CONNECTION_CLOSE_APP ||
		    get_varint(&r, &f->frame_type)) &&
		    get_bytes(&r, &f->data, &f->len, &too_long);
		break;
	case QMUX_DATAGRAM:
	case QMUX_TRANSPORT_PARAMETERS:
		ok = get_bytes(&r, &f->data, &f->len, &too_long);
		break;
	default:
		if (type < QMUX_STREAM || type > (QMUX_STREAM | 0x07) ||
		    (type & QMUX_STREAM_LEN) == 0)
			return -1;
		f->type = QMUX_STREAM;
		f->fin = (type & QMUX_STREAM_FIN) != 0;
		ok = get_varint(&r, &f->stream_id) &&
		    ((type & QMUX_STREAM_OFF) == 0 || get_varint(&r, &f->offset)) &&
		    get_bytes(&r, &f->data, &f->len, &too_long);
		/* RFC 9000 19.8: the end may not pass 2^62 - 1. */
		if (ok && f->offset + f->len > MAX_VARINT)
			return -1;
		break;
	}
	if (too_long)
		return -1;
	if (!ok)
		return r.short_input ? 0 : -1;
	return (long)(inlen - r.left);
}

/* A cursor for writing: the first failure sticks. */
struct wr {
	uint8_t *p;
	size_t left;
	bool bad;
};

static void
put_varint(struct wr *w, uint64_t v)
{
	size_t n;

	if (w->bad)
		return;
	if (v > MAX_VARINT || (n = varint_put(w->p, w->left, v)) == 0) {
		w->bad = true;
		return;
	}
	w->p += n;
	w->left -= n;
}

static void
put_bytes(struct wr *w, const void *data, size_t len)
{
	if (w->bad || len > w->left) {
		w->bad = true;
		return;
	}
	if (len > 0)
		memcpy(w->p, data, len);
	w->p += len;
	w->left -= len;
}

static size_t
done(const struct wr *w, size_t outlen)
{
	return w->bad ? 0 : outlen - w->left;
}

size_t
qmux_encode_stream_header(uint8_t *out, size_t outlen, uint64_t id,
    uint64_t offset, size_t len, bool fin)
{
	struct wr w = { out, outlen, false };
	uint64_t type = QMUX_STREAM | QMUX_STREAM_LEN;

	if (len > QMUX_MAX_PAYLOAD || offset + len > MAX_VARINT)
		return 0;
	if (offset != 0)
		type |= QMUX_STREAM_OFF;
	if (fin)
		type |= QMUX_STREAM_FIN;
	put_varint(&w, type);
	put_varint(&w, id);
	if (offset != 0)
		put_varint(&w, offset);
	put_varint(&w, len);
	return done(&w, outlen);
}

size_t
qmux_encode_datagram_header(uint8_t *out, size_t outlen, size_t len)
{
	struct wr w = { out, outlen, false };

	if (len > QMUX_MAX_PAYLOAD)
		return 0;
	put_varint(&w, QMUX_DATAGRAM);
	put_varint(&w, len);
	return done(&w, outlen);
}

size_t
qmux_encode_reset_stream(uint8_t *out, size_t outlen, uint64_t id,
    uint64_t code, uint64_t final_size)
{
	struct wr w = { out, outlen, false };

	put_varint(&w, QMUX_RESET_STREAM);
	put_varint(&w, id);
	put_varint(&w, code);
	put_varint(&w, final_size);
	return done(&w, outlen);
}

size_t
qmux_encode_stop_sending(uint8_t *out, size_t outlen, uint64_t id,
    uint64_t code)
{
	struct wr w = { out, outlen, false };

	put_varint(&w, QMUX_STOP_SENDING);
	put_varint(&w, id);
	put_varint(&w, code);
	return done(&w, outlen);
}

size_t
qmux_encode_max(uint8_t *out, size_t outlen, uint64_t type, uint64_t id,
    uint64_t max)
{
	struct wr w = { out, outlen, false };

	if (type != QMUX_MAX_DATA && type != QMUX_MAX_STREAM_DATA &&
	    type != QMUX_MAX_STREAMS_BIDI)
		return 0;
	put_varint(&w, type);
	if (type == QMUX_MAX_STREAM_DATA)
		put_varint(&w, id);
	put_varint(&w, max);
	return done(&w, outlen);
}

size_t
qmux_encode_ping(uint8_t *out, size_t outlen)
{
	struct wr w = { out, outlen, false };

	put_varint(&w, QMUX_PING);
	return done(&w, outlen);
}

size_t
qmux_encode_close(uint8_t *out, size_t outlen, bool app, uint64_t code,
    const char *reason)
{
	struct wr w = { out, outlen, false };
	size_t rlen = reason != NULL ? strlen(reason) : 0;

	if (rlen > MAX_REASON)
		rlen = MAX_REASON;
	put_varint(&w, app ? QMUX_CONNECTION_CLOSE_APP : QMUX_CONNECTION_CLOSE);
	put_varint(&w, code);
	if (!app)
		put_varint(&w, 0);
	put_varint(&w, rlen);
	put_bytes(&w, reason, rlen);
	return done(&w, outlen);
}

/* Parameter IDs (RFC 9000 section 18.2; 0x20 from RFC 9221). */
#define TP_IDLE 0x01
#define TP_MAX_DATA 0x04
#define TP_STREAM_LOCAL 0x05
#define TP_STREAM_REMOTE 0x06
#define TP_STREAMS_BIDI 0x08
#define TP_DATAGRAM 0x20
#define TP_CONSUMED_STEP 0x7276
#define TP_ANSWERS_PING 0x7277

static void
put_param(struct wr *w, uint64_t id, uint64_t v)
{
	put_varint(w, id);
	put_varint(w, varint_len(v));
	put_varint(w, v);
}

size_t
qmux_encode_params(uint8_t *out, size_t outlen, const struct qmux_params *p)
{
	uint8_t body[128];
	struct wr b = { body, sizeof body, false };
	struct wr w = { out, outlen, false };

	put_param(&b, TP_IDLE, p->max_idle_timeout_ms);
	put_param(&b, TP_MAX_DATA, p->initial_max_data);
	put_param(&b, TP_STREAM_LOCAL, p->max_stream_data_bidi_local);
	put_param(&b, TP_STREAM_REMOTE, p->max_stream_data_bidi_remote);
	put_param(&b, TP_STREAMS_BIDI, p->initial_max_streams_bidi);
	put_param(&b, TP_DATAGRAM, p->max_datagram_frame_size);
	if (p->consumed_step != 0)
		put_param(&b, TP_CONSUMED_STEP, p->consumed_step);
	if (p->answers_ping != 0)
		put_param(&b, TP_ANSWERS_PING, p->answers_ping);
	if (b.bad)
		return 0;
	put_varint(&w, QMUX_TRANSPORT_PARAMETERS);
	put_varint(&w, sizeof body - b.left);
	put_bytes(&w, body, sizeof body - b.left);
	return done(&w, outlen);
}

int
qmux_decode_params(const uint8_t *in, size_t len, struct qmux_params *p)
{
	struct rd r = { in, len, false };
	bool seen[TP_DATAGRAM + 1] = { false }, seen_step = false, seen_answers = false;

	memset(p, 0, sizeof *p);
	while (r.left > 0) {
		struct rd v;
		uint64_t id, n, val;
		uint64_t *dst = NULL;

		if (!get_varint(&r, &id) || !get_varint(&r, &n) || n > r.left)
			return -1;
		v = (struct rd){ r.p, (size_t)n, false };
		r.p += n;
		r.left -= (size_t)n;
		switch (id) {
		case TP_IDLE: dst = &p->max_idle_timeout_ms; break;
		case TP_MAX_DATA: dst = &p->initial_max_data; break;
		case TP_STREAM_LOCAL: dst = &p->max_stream_data_bidi_local; break;
		case TP_STREAM_REMOTE: dst = &p->max_stream_data_bidi_remote; break;
		case TP_STREAMS_BIDI: dst = &p->initial_max_streams_bidi; break;
		case TP_DATAGRAM: dst = &p->max_datagram_frame_size; break;
		case TP_CONSUMED_STEP: dst = &p->consumed_step; break;
		case TP_ANSWERS_PING: dst = &p->answers_ping; break;
		default: continue; /* unknown: skipped, as in QUIC */
		}
		/* RFC 9000 7.4: a parameter given twice is an error. */
		if ((id == TP_CONSUMED_STEP ? seen_step : id == TP_ANSWERS_PING ?
		    seen_answers : seen[id]) || !get_varint(&v, &val) || v.left != 0)
			return -1;
		if (id == TP_CONSUMED_STEP)
			seen_step = true;
		else if (id == TP_ANSWERS_PING)
			seen_answers = true;
		else
			seen[id] = true;
		*dst = val;
	}
	return 0;
}

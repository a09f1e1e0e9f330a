/* libFuzzer harness for common/wire/qmux.c: the input is a TLS byte stream's
 * worth of frames, decoded one after another as quic-tcp.c does; every
 * frame that decodes must re-encode to a frame that decodes the same. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/qmux.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static uint8_t enc[QMUX_MAX_PAYLOAD + QMUX_MAX_HEADER];

/* Re-encode `f`; 0 for the types that have no encoder of their own. */
static size_t
reencode(const struct qmux_frame *f)
{
	size_t n;

	switch (f->type) {
	case QMUX_STREAM:
		n = qmux_encode_stream_header(enc, sizeof enc, f->stream_id,
		    f->offset, f->len, f->fin);
		assert(n > 0);
		memcpy(enc + n, f->data, f->len);
		return n + f->len;
	case QMUX_DATAGRAM:
		n = qmux_encode_datagram_header(enc, sizeof enc, f->len);
		assert(n > 0);
		memcpy(enc + n, f->data, f->len);
		return n + f->len;
	case QMUX_RESET_STREAM:
		return qmux_encode_reset_stream(enc, sizeof enc, f->stream_id,
		    f->code, f->final_size);
	case QMUX_STOP_SENDING:
		return qmux_encode_stop_sending(enc, sizeof enc, f->stream_id,
		    f->code);
	case QMUX_MAX_DATA:
	case QMUX_MAX_STREAM_DATA:
	case QMUX_MAX_STREAMS_BIDI:
		return qmux_encode_max(enc, sizeof enc, f->type, f->stream_id,
		    f->max);
	case QMUX_PING:
		return qmux_encode_ping(enc, sizeof enc);
	}
	return 0;
}

static void
check_params(const struct qmux_frame *f)
{
	struct qmux_params p, q;
	struct qmux_frame g;
	size_t n;

	if (qmux_decode_params(f->data, f->len, &p) != 0)
		return;
	n = qmux_encode_params(enc, sizeof enc, &p);
	assert(n > 0);
	assert(qmux_frame_decode(enc, n, &g) == (long)n);
	assert(g.type == QMUX_TRANSPORT_PARAMETERS);
	assert(qmux_decode_params(g.data, g.len, &q) == 0);
	assert(memcmp(&p, &q, sizeof p) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qmux_frame f, g;
	size_t off = 0, n;
	long used;

	while (off < size) {
		used = qmux_frame_decode(data + off, size - off, &f);
		if (used <= 0)
			break;
		assert((size_t)used <= size - off);
		assert(f.len <= QMUX_MAX_PAYLOAD);
		if (f.len > 0)
			assert(f.data >= data + off && f.data + f.len <= data + off + used);
		if (f.type == QMUX_TRANSPORT_PARAMETERS)
			check_params(&f);
		if ((n = reencode(&f)) > 0) {
			assert(qmux_frame_decode(enc, n, &g) == (long)n);
			assert(g.type == f.type && g.stream_id == f.stream_id &&
			    g.offset == f.offset && g.code == f.code &&
			    g.final_size == f.final_size && g.max == f.max &&
			    g.fin == f.fin && g.len == f.len);
			assert(f.len == 0 || memcmp(g.data, f.data, f.len) == 0);
			/* No prefix of a whole frame is taken for one. */
			assert(qmux_frame_decode(enc, n - 1, &g) == 0);
		}
		off += (size_t)used;
	}
	return 0;
}

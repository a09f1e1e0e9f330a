/* The frames of rove's TLS-over-TCP transport: QUIC v1 frames (RFC 9000
 * section 19, DATAGRAM from RFC 9221) written back to back on the TLS byte
 * stream, as QMux does (draft-opik-quic-qmux, now draft-ietf-quic-qmux).
 * Only the frames a reliable, ordered byte stream still needs exist here:
 * no ACK, CRYPTO, connection IDs, paths or tokens. Pure encoders and one
 * decoder over byte buffers, so a fuzzer can drive them; the decoder never
 * trusts a length and never reads past its input. See docs/PROTOCOL.md. */
#ifndef ROVE_QMUX_H
#define ROVE_QMUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Frame types, as in QUIC v1. STREAM is 0x08..0x0f (OFF 0x04, LEN 0x02,
 * FIN 0x01); only forms with LEN are valid here, since a frame on a byte
 * stream has no packet end to run to. */
#define QMUX_PADDING 0x00
#define QMUX_PING 0x01
#define QMUX_RESET_STREAM 0x04
#define QMUX_STOP_SENDING 0x05
#define QMUX_STREAM 0x08
#define QMUX_STREAM_OFF 0x04
#define QMUX_STREAM_LEN 0x02
#define QMUX_STREAM_FIN 0x01
#define QMUX_MAX_DATA 0x10
#define QMUX_MAX_STREAM_DATA 0x11
#define QMUX_MAX_STREAMS_BIDI 0x12
#define QMUX_CONNECTION_CLOSE 0x1c     /* transport error */
#define QMUX_CONNECTION_CLOSE_APP 0x1d /* application error */
#define QMUX_DATAGRAM 0x31             /* with a length */
/* Our own: the transport parameters, each side's first frame. QMux has a
 * frame of its own for them too; this is rove's, in a range QUIC v1 does
 * not use. */
#define QMUX_TRANSPORT_PARAMETERS 0x3f

/* Transport error codes (RFC 9000 section 20.1) the transport sends. */
#define QMUX_ERR_INTERNAL 0x01
#define QMUX_ERR_FLOW_CONTROL 0x03
#define QMUX_ERR_STREAM_LIMIT 0x04
#define QMUX_ERR_STREAM_STATE 0x05
#define QMUX_ERR_FINAL_SIZE 0x06
#define QMUX_ERR_FRAME_ENCODING 0x07
#define QMUX_ERR_PROTOCOL_VIOLATION 0x0a

/* The longest payload one frame may carry (STREAM data, a DATAGRAM, a
 * close reason, the parameters): a receiver buffers one whole frame before
 * it acts on it, so this bounds its input buffer. */
#define QMUX_MAX_PAYLOAD 65536
/* The longest frame header: type, stream ID, offset and length. */
#define QMUX_MAX_HEADER 32

/* One decoded frame. Only the fields of its type are set; `data` points
 * into the decoder's input. */
struct qmux_frame {
	uint64_t type;        /* STREAM frames: QMUX_STREAM, `fin` holds the bit */
	uint64_t stream_id;   /* STREAM, RESET_STREAM, STOP_SENDING, MAX_STREAM_DATA */
	uint64_t offset;      /* STREAM */
	uint64_t code;        /* RESET_STREAM, STOP_SENDING, CONNECTION_CLOSE */
	uint64_t final_size;  /* RESET_STREAM */
	uint64_t max;         /* MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS */
	uint64_t frame_type;  /* CONNECTION_CLOSE (transport): the culprit */
	bool fin;             /* STREAM */
	const uint8_t *data;  /* STREAM, DATAGRAM, reason, parameters */
	size_t len;
};

/* If `in` starts with a whole frame, fill `f` and return the bytes it
 * takes; 0 if more bytes are needed; -1 if it is malformed or of a type
 * this transport does not know (the connection must close with
 * QMUX_ERR_FRAME_ENCODING). */
long qmux_frame_decode(const uint8_t *in, size_t inlen, struct qmux_frame *f);

/* Encoders write one frame, or a frame's header when the payload follows
 * it, and return its length, or 0 if `outlen` is too short or a value out
 * of range (a payload over QMUX_MAX_PAYLOAD, a number of 2^62 or more). */
size_t qmux_encode_stream_header(uint8_t *out, size_t outlen, uint64_t id,
    uint64_t offset, size_t len, bool fin);
size_t qmux_encode_datagram_header(uint8_t *out, size_t outlen, size_t len);
size_t qmux_encode_reset_stream(uint8_t *out, size_t outlen, uint64_t id,
    uint64_t code, uint64_t final_size);
size_t qmux_encode_stop_sending(uint8_t *out, size_t outlen, uint64_t id,
    uint64_t code);
/* MAX_DATA and MAX_STREAMS (no stream ID), MAX_STREAM_DATA (with one). */
size_t qmux_encode_max(uint8_t *out, size_t outlen, uint64_t type,
    uint64_t id, uint64_t max);
size_t qmux_encode_ping(uint8_t *out, size_t outlen);
/* CONNECTION_CLOSE: the application form when `app`, else the transport
 * form (frame type 0). The reason is cut to fit 256 bytes. */
size_t qmux_encode_close(uint8_t *out, size_t outlen, bool app,
    uint64_t code, const char *reason);

/* The transport parameters, with QUIC's meaning and IDs (RFC 9000 section
 * 18.2, RFC 9221): what the sender lets its peer send. */
struct qmux_params {
	uint64_t max_idle_timeout_ms;       /* 0x01 */
	uint64_t initial_max_data;          /* 0x04 */
	uint64_t max_stream_data_bidi_local;  /* 0x05: streams the sender opens */
	uint64_t max_stream_data_bidi_remote; /* 0x06: streams the receiver opens */
	uint64_t initial_max_streams_bidi;  /* 0x08 */
	uint64_t max_datagram_frame_size;   /* 0x20 */
	/* rove's own (0x7276; 0: absent): "tell me what you consumed of each
	 * stream of mine, in MAX_STREAM_DATA, at least every this many
	 * bytes". A sender that asked and whose peer asked too (so knows the
	 * rule) frees its stream bytes only once the peer's reader has them,
	 * as a QUIC ACK would, so that a forward can move to another
	 * connection without losing what was in flight (docs/PROTOCOL.md). */
	uint64_t consumed_step;
	/* rove's own (0x7277; 0: absent, 1: present): "I answer each PING
	 * with a PADDING frame". A sender whose peer said so may take a
	 * PING left without any byte back as a sign of a dead path. */
	uint64_t answers_ping;
};

/* A whole TRANSPORT_PARAMETERS frame. */
size_t qmux_encode_params(uint8_t *out, size_t outlen, const struct qmux_params *);
/* The body of one (struct qmux_frame data/len): 0, or -1 if malformed.
 * Unknown parameters are skipped; absent ones are 0. */
int qmux_decode_params(const uint8_t *in, size_t len, struct qmux_params *);

#endif

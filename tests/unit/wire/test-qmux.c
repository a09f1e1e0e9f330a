/* Unit tests for common/wire/qmux.c: QUIC frames on a byte stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/qmux.h"

/* Every proper prefix of a whole frame asks for more bytes. */
static void
assert_prefixes_short(const uint8_t *buf, size_t n)
{
	struct qmux_frame f;

	for (size_t i = 0; i < n; i++)
		assert_int_equal(qmux_frame_decode(buf, i, &f), 0);
}

static void
test_stream(void **state)
{
	uint8_t buf[64];
	struct qmux_frame f;
	size_t n;

	(void)state;
	/* Offset 0 leaves the OFF bit out. */
	n = qmux_encode_stream_header(buf, sizeof buf, 4, 0, 3, false);
	assert_int_equal(n, 3);
	assert_int_equal(buf[0], QMUX_STREAM | QMUX_STREAM_LEN);
	memcpy(buf + n, "abc", 3);
	assert_int_equal(qmux_frame_decode(buf, n + 3, &f), (long)n + 3);
	assert_int_equal(f.type, QMUX_STREAM);
	assert_int_equal(f.stream_id, 4);
	assert_int_equal(f.offset, 0);
	assert_false(f.fin);
	assert_int_equal(f.len, 3);
	assert_memory_equal(f.data, "abc", 3);
	assert_prefixes_short(buf, n + 3);

	n = qmux_encode_stream_header(buf, sizeof buf, 1, 70000, 0, true);
	assert_int_equal(buf[0], QMUX_STREAM | QMUX_STREAM_OFF |
	    QMUX_STREAM_LEN | QMUX_STREAM_FIN);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.stream_id, 1);
	assert_int_equal(f.offset, 70000);
	assert_true(f.fin);
	assert_int_equal(f.len, 0);

	/* Two frames back to back: the first is taken alone. */
	n = qmux_encode_stream_header(buf, sizeof buf, 8, 0, 1, false);
	buf[n] = 'x';
	buf[n + 1] = QMUX_PING;
	assert_int_equal(qmux_frame_decode(buf, n + 2, &f), (long)n + 1);
	assert_int_equal(qmux_frame_decode(buf + n + 1, 1, &f), 1);
	assert_int_equal(f.type, QMUX_PING);
}

static void
test_stream_malformed(void **state)
{
	uint8_t buf[32];
	struct qmux_frame f;

	(void)state;
	/* Without a length a frame on a byte stream has no end. */
	buf[0] = QMUX_STREAM;
	buf[1] = 0;
	buf[2] = 'x';
	assert_int_equal(qmux_frame_decode(buf, 3, &f), -1);
	buf[0] = QMUX_STREAM | QMUX_STREAM_OFF | QMUX_STREAM_FIN;
	assert_int_equal(qmux_frame_decode(buf, 3, &f), -1);
	/* A length past QMUX_MAX_PAYLOAD is refused before its bytes come. */
	buf[0] = QMUX_STREAM | QMUX_STREAM_LEN;
	buf[1] = 0;
	buf[2] = 0x80;  /* 4-byte varint: 65537 */
	buf[3] = 0x01;
	buf[4] = 0x00;
	buf[5] = 0x01;
	assert_int_equal(qmux_frame_decode(buf, 6, &f), -1);
	/* Exactly QMUX_MAX_PAYLOAD is fine, and waits for its bytes. */
	buf[5] = 0x00;
	assert_int_equal(qmux_frame_decode(buf, 6, &f), 0);
	/* The end of the stream may not pass 2^62 - 1. */
	buf[0] = QMUX_STREAM | QMUX_STREAM_OFF | QMUX_STREAM_LEN;
	buf[1] = 0;
	memcpy(buf + 2, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
	buf[10] = 1;
	buf[11] = 'x';
	assert_int_equal(qmux_frame_decode(buf, 12, &f), -1);
	/* The encoder refuses the same. */
	assert_int_equal(qmux_encode_stream_header(buf, sizeof buf, 0,
	    (1ull << 62) - 1, 1, false), 0);
	assert_int_equal(qmux_encode_stream_header(buf, sizeof buf, 0, 0,
	    QMUX_MAX_PAYLOAD + 1, false), 0);
}

static void
test_control_frames(void **state)
{
	uint8_t buf[64];
	struct qmux_frame f;
	size_t n;

	(void)state;
	n = qmux_encode_reset_stream(buf, sizeof buf, 5, 0x103, 1u << 20);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_RESET_STREAM);
	assert_int_equal(f.stream_id, 5);
	assert_int_equal(f.code, 0x103);
	assert_int_equal(f.final_size, 1u << 20);
	assert_prefixes_short(buf, n);

	n = qmux_encode_stop_sending(buf, sizeof buf, 9, 7);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_STOP_SENDING);
	assert_int_equal(f.stream_id, 9);
	assert_int_equal(f.code, 7);

	n = qmux_encode_max(buf, sizeof buf, QMUX_MAX_DATA, 0, 1ull << 40);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_MAX_DATA);
	assert_int_equal(f.max, 1ull << 40);
	n = qmux_encode_max(buf, sizeof buf, QMUX_MAX_STREAM_DATA, 12, 99);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_MAX_STREAM_DATA);
	assert_int_equal(f.stream_id, 12);
	assert_int_equal(f.max, 99);
	n = qmux_encode_max(buf, sizeof buf, QMUX_MAX_STREAMS_BIDI, 0, 257);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_MAX_STREAMS_BIDI);
	assert_int_equal(f.max, 257);
	assert_int_equal(qmux_encode_max(buf, sizeof buf, QMUX_PING, 0, 1), 0);

	assert_int_equal(qmux_encode_ping(buf, sizeof buf), 1);
	assert_int_equal(qmux_frame_decode(buf, 1, &f), 1);
	assert_int_equal(f.type, QMUX_PING);
	buf[0] = QMUX_PADDING;
	assert_int_equal(qmux_frame_decode(buf, 1, &f), 1);
	assert_int_equal(f.type, QMUX_PADDING);

	/* Too small a buffer: nothing written. */
	assert_int_equal(qmux_encode_reset_stream(buf, 3, 5, 0x103, 1u << 20), 0);
	assert_int_equal(qmux_encode_ping(buf, 0), 0);
}

static void
test_datagram_and_close(void **state)
{
	uint8_t buf[600];
	char longreason[300];
	struct qmux_frame f;
	size_t n;

	(void)state;
	n = qmux_encode_datagram_header(buf, sizeof buf, 2);
	memcpy(buf + n, "\x00\x45", 2);
	assert_int_equal(qmux_frame_decode(buf, n + 2, &f), (long)n + 2);
	assert_int_equal(f.type, QMUX_DATAGRAM);
	assert_int_equal(f.len, 2);
	assert_memory_equal(f.data, "\x00\x45", 2);
	assert_prefixes_short(buf, n + 2);

	n = qmux_encode_close(buf, sizeof buf, true, 3, "unknown peer");
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_CONNECTION_CLOSE_APP);
	assert_int_equal(f.code, 3);
	assert_int_equal(f.len, strlen("unknown peer"));
	assert_memory_equal(f.data, "unknown peer", f.len);

	n = qmux_encode_close(buf, sizeof buf, false, QMUX_ERR_FLOW_CONTROL, NULL);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_CONNECTION_CLOSE);
	assert_int_equal(f.code, QMUX_ERR_FLOW_CONTROL);
	assert_int_equal(f.frame_type, 0);
	assert_int_equal(f.len, 0);
	assert_prefixes_short(buf, n);

	/* A long reason is cut to 256 bytes. */
	memset(longreason, 'r', sizeof longreason - 1);
	longreason[sizeof longreason - 1] = '\0';
	n = qmux_encode_close(buf, sizeof buf, true, 0, longreason);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.len, 256);
}

static void
test_unknown_types(void **state)
{
	/* ACK, CRYPTO, NEW_TOKEN, NEW_CONNECTION_ID, HANDSHAKE_DONE, a
	 * DATAGRAM without length: QUIC frames with no place here. */
	static const uint8_t types[] = { 0x02, 0x06, 0x07, 0x18, 0x1e, 0x30 };
	uint8_t buf[8];
	struct qmux_frame f;

	(void)state;
	for (size_t i = 0; i < sizeof types; i++) {
		memset(buf, 0, sizeof buf);
		buf[0] = types[i];
		assert_int_equal(qmux_frame_decode(buf, sizeof buf, &f), -1);
	}
	assert_int_equal(qmux_frame_decode(buf, 0, &f), 0);
}

static void
test_params(void **state)
{
	struct qmux_params p = {
		.max_idle_timeout_ms = 120000,
		.initial_max_data = 16u << 20,
		.max_stream_data_bidi_local = 8u << 20,
		.max_stream_data_bidi_remote = 4u << 20,
		.initial_max_streams_bidi = 256,
		.max_datagram_frame_size = 65535,
		.consumed_step = 1u << 17,
		.answers_ping = 1,
	}, q;
	uint8_t buf[200];
	struct qmux_frame f;
	size_t n;

	(void)state;
	n = qmux_encode_params(buf, sizeof buf, &p);
	assert_true(n > 0);
	assert_int_equal(qmux_frame_decode(buf, n, &f), (long)n);
	assert_int_equal(f.type, QMUX_TRANSPORT_PARAMETERS);
	assert_int_equal(qmux_decode_params(f.data, f.len, &q), 0);
	assert_memory_equal(&p, &q, sizeof p);
	assert_prefixes_short(buf, n);

	/* Unknown IDs are skipped; absent ones are 0. */
	{
		static const uint8_t body[] = { 0x21, 0x02, 0xaa, 0xbb,
		    0x04, 0x02, 0x44, 0x00 };

		assert_int_equal(qmux_decode_params(body, sizeof body, &q), 0);
		assert_int_equal(q.initial_max_data, 0x400);
		assert_int_equal(q.initial_max_streams_bidi, 0);
	}
	/* Twice the same, a value that overruns its length, a truncated
	 * length: errors. */
	{
		static const uint8_t twice[] = { 0x04, 0x01, 0x01, 0x04, 0x01, 0x02 };
		static const uint8_t overrun[] = { 0x04, 0x01, 0x44, 0x00 };
		static const uint8_t longer[] = { 0x04, 0x02, 0x01, 0x00 };
		static const uint8_t cut[] = { 0x04, 0x05, 0x01 };

		assert_int_equal(qmux_decode_params(twice, sizeof twice, &q), -1);
		assert_int_equal(qmux_decode_params(overrun, sizeof overrun, &q), -1);
		assert_int_equal(qmux_decode_params(longer, sizeof longer, &q), -1);
		assert_int_equal(qmux_decode_params(cut, sizeof cut, &q), -1);
	}
	/* rove's answers_ping (0x7277, a four-byte varint ID): once only. */
	{
		static const uint8_t once[] = { 0x80, 0x00, 0x72, 0x77, 0x01, 0x01 };
		static const uint8_t twice[] = { 0x80, 0x00, 0x72, 0x77, 0x01, 0x01,
		    0x80, 0x00, 0x72, 0x77, 0x01, 0x01 };

		assert_int_equal(qmux_decode_params(once, sizeof once, &q), 0);
		assert_int_equal(q.answers_ping, 1);
		assert_int_equal(qmux_decode_params(twice, sizeof twice, &q), -1);
	}
	assert_int_equal(qmux_encode_params(buf, 10, &p), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_stream_malformed),
		cmocka_unit_test(test_control_frames),
		cmocka_unit_test(test_datagram_and_close),
		cmocka_unit_test(test_unknown_types),
		cmocka_unit_test(test_params),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

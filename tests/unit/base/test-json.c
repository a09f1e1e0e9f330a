/* Unit tests for the JSON writer: exact output, escaping, misuse. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "base/json.h"

struct fixture {
	struct evbuffer *buf;
	struct json j;
	char *text;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	assert_non_null(f);
	f->buf = evbuffer_new();
	assert_non_null(f->buf);
	json_init(&f->j, f->buf);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	evbuffer_free(f->buf);
	free(f->text);
	free(f);
	return 0;
}

/* The buffer's contents as a NUL-terminated string (owned by the fixture). */
static const char *
text(struct fixture *f)
{
	size_t len = evbuffer_get_length(f->buf);

	free(f->text);
	f->text = malloc(len + 1);
	assert_non_null(f->text);
	evbuffer_copyout(f->buf, f->text, len);
	f->text[len] = '\0';
	return f->text;
}

static void
test_empty_containers(void **state)
{
	struct fixture *f = *state;

	json_begin_array(&f->j);
	json_begin_object(&f->j);
	json_end_object(&f->j);
	json_begin_array(&f->j);
	json_end_array(&f->j);
	json_end_array(&f->j);
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f), "[{},[]]");
}

static void
test_status_like_object(void **state)
{
	struct fixture *f = *state;
	struct json *j = &f->j;

	json_begin_object(j);
	json_key(j, "name");
	json_string(j, "laptop");
	json_key(j, "rx");
	json_uint(j, 18446744073709551615ULL);
	json_key(j, "delta");
	json_int(j, INT64_MIN);
	json_key(j, "rtt_ms");
	json_double(j, 12.3456, 2);
	json_key(j, "up");
	json_bool(j, true);
	json_key(j, "down");
	json_bool(j, false);
	json_key(j, "gone");
	json_null(j);
	json_key(j, "addrs");
	json_begin_array(j);
	json_string(j, "10.77.0.2");
	json_string(j, "fd00::2");
	json_end_array(j);
	json_end_object(j);
	assert_int_equal(json_finish(j), 0);
	assert_string_equal(text(f),
	    "{\"name\":\"laptop\",\"rx\":18446744073709551615,"
	    "\"delta\":-9223372036854775808,\"rtt_ms\":12.35,\"up\":true,"
	    "\"down\":false,\"gone\":null,"
	    "\"addrs\":[\"10.77.0.2\",\"fd00::2\"]}");
}

static void
test_top_level_scalars(void **state)
{
	struct fixture *f = *state;

	json_uint(&f->j, 0);
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f), "0");
	/* A second top-level value is an error and writes nothing. */
	json_uint(&f->j, 1);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "0");
}

static void
test_doubles(void **state)
{
	struct fixture *f = *state;
	struct json *j = &f->j;

	json_begin_array(j);
	json_double(j, 1.5, 0);
	json_double(j, -0.125, 3);
	json_double(j, 2.0, 1);
	json_double(j, NAN, 2);
	json_double(j, INFINITY, 2);
	json_double(j, -INFINITY, 2);
	json_double(j, 0.1, 17);
	json_end_array(j);
	assert_int_equal(json_finish(j), 0);
	assert_string_equal(text(f),
	    "[2,-0.125,2.0,null,null,null,0.10000000000000001]");
}

static void
test_double_bad_precision(void **state)
{
	struct fixture *f = *state;

	json_begin_array(&f->j);
	json_double(&f->j, 1.0, 18);
	json_end_array(&f->j);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "[");

	evbuffer_drain(f->buf, evbuffer_get_length(f->buf));
	json_init(&f->j, f->buf);
	json_double(&f->j, 1.0, -1);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "");
}

static void
test_escapes(void **state)
{
	struct fixture *f = *state;

	json_string(&f->j, "a\"b\\c/d\n\t\r\b\f\x01\x1f\x7f end");
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f),
	    "\"a\\\"b\\\\c/d\\u000a\\u0009\\u000d\\u0008\\u000c\\u0001"
	    "\\u001f\\u007f end\"");
}

static void
test_embedded_nul(void **state)
{
	struct fixture *f = *state;

	json_string_len(&f->j, "a\0b", 3);
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f), "\"a\\u0000b\"");
}

static void
test_valid_utf8(void **state)
{
	struct fixture *f = *state;
	/* U+00E9, U+20AC, U+1F600, and the extremes U+0080, U+07FF, U+0800,
	 * U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF. */
	const char *s = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "
	    "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"
	    "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
	char want[128];

	snprintf(want, sizeof want, "\"%s\"", s);
	json_string(&f->j, s);
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f), want);
}

static void
test_invalid_utf8(void **state)
{
	struct fixture *f = *state;
	struct json *j = &f->j;

	json_begin_array(j);
	json_string(j, "\xff");                 /* never valid */
	json_string(j, "\xc0\xaf");             /* overlong '/' */
	json_string(j, "\xe0\x80\xaf");         /* overlong, 3 bytes */
	json_string(j, "\xed\xa0\x80");         /* surrogate U+D800 */
	json_string(j, "\xf4\x90\x80\x80");     /* above U+10FFFF */
	json_string(j, "\xf5\x80\x80\x80");     /* lead byte out of range */
	json_string(j, "x\xe2\x82");            /* truncated at the end */
	json_string(j, "\xe2\x82y");            /* truncated mid-string */
	json_string(j, "\x80\xc3\xa9");         /* stray continuation */
	json_end_array(j);
	assert_int_equal(json_finish(j), 0);
	assert_string_equal(text(f),
	    "[\"\\u00ff\",\"\\u00c0\\u00af\",\"\\u00e0\\u0080\\u00af\","
	    "\"\\u00ed\\u00a0\\u0080\",\"\\u00f4\\u0090\\u0080\\u0080\","
	    "\"\\u00f5\\u0080\\u0080\\u0080\",\"x\\u00e2\\u0082\","
	    "\"\\u00e2\\u0082y\",\"\\u0080\xc3\xa9\"]");
}

static void
test_key_escaped(void **state)
{
	struct fixture *f = *state;

	json_begin_object(&f->j);
	json_key(&f->j, "a\"\n");
	json_uint(&f->j, 1);
	json_end_object(&f->j);
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f), "{\"a\\\"\\u000a\":1}");
}

static void
test_null_string(void **state)
{
	struct fixture *f = *state;

	json_begin_array(&f->j);
	json_string(&f->j, NULL);
	json_string_len(&f->j, NULL, 0);
	json_end_array(&f->j);
	assert_int_equal(json_finish(&f->j), 0);
	assert_string_equal(text(f), "[null,\"\"]");

	evbuffer_drain(f->buf, evbuffer_get_length(f->buf));
	json_init(&f->j, f->buf);
	json_string_len(&f->j, NULL, 3);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "");
}

static void
test_max_depth(void **state)
{
	struct fixture *f = *state;
	char want[2 * JSON_MAX_DEPTH + 1];

	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		json_begin_array(&f->j);
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		json_end_array(&f->j);
	assert_int_equal(json_finish(&f->j), 0);
	memset(want, '[', JSON_MAX_DEPTH);
	memset(want + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
	want[2 * JSON_MAX_DEPTH] = '\0';
	assert_string_equal(text(f), want);
}

static void
test_too_deep(void **state)
{
	struct fixture *f = *state;
	char want[JSON_MAX_DEPTH + 1];

	for (int i = 0; i < JSON_MAX_DEPTH + 1; i++)
		json_begin_array(&f->j);
	assert_true(f->j.error);
	/* Everything after the error is ignored. */
	json_uint(&f->j, 5);
	for (int i = 0; i < JSON_MAX_DEPTH + 1; i++)
		json_end_array(&f->j);
	assert_int_equal(json_finish(&f->j), -1);
	memset(want, '[', JSON_MAX_DEPTH);
	want[JSON_MAX_DEPTH] = '\0';
	assert_string_equal(text(f), want);
}

static void
test_value_without_key(void **state)
{
	struct fixture *f = *state;

	json_begin_object(&f->j);
	json_uint(&f->j, 1);
	assert_true(f->j.error);
	json_end_object(&f->j);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "{");
}

static void
test_key_outside_object(void **state)
{
	struct fixture *f = *state;

	json_key(&f->j, "a");
	assert_int_equal(json_finish(&f->j), -1);

	evbuffer_drain(f->buf, evbuffer_get_length(f->buf));
	json_init(&f->j, f->buf);
	json_begin_array(&f->j);
	json_key(&f->j, "a");
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "[");
}

static void
test_two_keys(void **state)
{
	struct fixture *f = *state;

	json_begin_object(&f->j);
	json_key(&f->j, "a");
	json_key(&f->j, "b");
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "{\"a\":");
}

static void
test_key_without_value(void **state)
{
	struct fixture *f = *state;

	json_begin_object(&f->j);
	json_key(&f->j, "a");
	json_end_object(&f->j);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "{\"a\":");
}

static void
test_mismatched_end(void **state)
{
	struct fixture *f = *state;

	json_begin_object(&f->j);
	json_end_array(&f->j);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "{");

	evbuffer_drain(f->buf, evbuffer_get_length(f->buf));
	json_init(&f->j, f->buf);
	json_end_object(&f->j);
	assert_int_equal(json_finish(&f->j), -1);
	assert_string_equal(text(f), "");
}

static void
test_unfinished(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(json_finish(&f->j), -1);   /* nothing written */
	json_begin_object(&f->j);
	assert_int_equal(json_finish(&f->j), -1);   /* still open */
	json_end_object(&f->j);
	assert_int_equal(json_finish(&f->j), 0);
}

static void
test_null_buffer(void **state)
{
	struct json j;

	(void)state;
	json_init(&j, NULL);
	json_begin_object(&j);
	json_end_object(&j);
	assert_int_equal(json_finish(&j), -1);
}

static void
test_nested_commas(void **state)
{
	struct fixture *f = *state;
	struct json *j = &f->j;

	json_begin_array(j);
	json_begin_object(j);
	json_key(j, "a");
	json_begin_array(j);
	json_int(j, -1);
	json_begin_array(j);
	json_end_array(j);
	json_int(j, 2);
	json_end_array(j);
	json_key(j, "b");
	json_begin_object(j);
	json_end_object(j);
	json_end_object(j);
	json_begin_object(j);
	json_end_object(j);
	json_end_array(j);
	assert_int_equal(json_finish(j), 0);
	assert_string_equal(text(f), "[{\"a\":[-1,[],2],\"b\":{}},{}]");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty_containers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_like_object, setup, teardown),
		cmocka_unit_test_setup_teardown(test_top_level_scalars, setup, teardown),
		cmocka_unit_test_setup_teardown(test_doubles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_double_bad_precision, setup, teardown),
		cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_embedded_nul, setup, teardown),
		cmocka_unit_test_setup_teardown(test_valid_utf8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_utf8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_escaped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_null_string, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_depth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_deep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_value_without_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_outside_object, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_without_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mismatched_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unfinished, setup, teardown),
		cmocka_unit_test(test_null_buffer),
		cmocka_unit_test_setup_teardown(test_nested_commas, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

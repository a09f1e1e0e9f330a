/* A small JSON writer onto an evbuffer, for status output. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "json.h"

void
json_init(struct json *j, struct evbuffer *out)
{
	memset(j, 0, sizeof *j);
	j->out = out;
	if (out == NULL)
		j->error = true;
}

/* Place the separator a new value needs; false if no value may go here. */
static bool
json_before_value(struct json *j)
{
	if (j->error)
		return false;
	if (j->depth == 0) {
		if (j->done) {
			j->error = true;
			return false;
		}
		return true;
	}
	if (j->stack[j->depth - 1].object) {
		/* json_key wrote the comma and colon already. */
		if (!j->have_key) {
			j->error = true;
			return false;
		}
		j->have_key = false;
		return true;
	}
	if (!j->stack[j->depth - 1].first)
		evbuffer_add(j->out, ",", 1);
	j->stack[j->depth - 1].first = false;
	return true;
}

static void
json_after_value(struct json *j)
{
	if (j->depth == 0)
		j->done = true;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t
utf8_sequence(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;
		else if (s[0] == 0xed)
			hi = 0x9f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		if (s[0] == 0xf0)
			lo = 0x90;
		else if (s[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < len)
		return 0;
	/* Only the second byte has a narrowed range. */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++) {
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	}
	return len;
}

/* Write `len` bytes as a quoted, escaped JSON string. */
static void
json_put_string(struct json *j, const unsigned char *s, size_t len)
{
	size_t i = 0, run = 0, seq;

	evbuffer_add(j->out, "\"", 1);
	while (i < len) {
		unsigned char c = s[i];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			i++;
			continue;
		}
		if (c >= 0x80 && (seq = utf8_sequence(s + i, len - i)) != 0) {
			i += seq;
			continue;
		}
		/* Flush the plain bytes before this one, then escape it. */
		evbuffer_add(j->out, s + run, i - run);
		if (c == '"')
			evbuffer_add(j->out, "\\\"", 2);
		else if (c == '\\')
			evbuffer_add(j->out, "\\\\", 2);
		else
			evbuffer_add_printf(j->out, "\\u%04x", (unsigned)c);
		run = ++i;
	}
	evbuffer_add(j->out, s + run, i - run);
	evbuffer_add(j->out, "\"", 1);
}

static void
json_begin(struct json *j, bool object)
{
	if (!json_before_value(j))
		return;
	if (j->depth == JSON_MAX_DEPTH) {
		j->error = true;
		return;
	}
	j->stack[j->depth].object = object;
	j->stack[j->depth].first = true;
	j->depth++;
	evbuffer_add(j->out, object ? "{" : "[", 1);
}

static void
json_end(struct json *j, bool object)
{
	if (j->error)
		return;
	if (j->depth == 0 || j->stack[j->depth - 1].object != object ||
	    j->have_key) {
		j->error = true;
		return;
	}
	j->depth--;
	evbuffer_add(j->out, object ? "}" : "]", 1);
	json_after_value(j);
}

void
json_begin_object(struct json *j)
{
	json_begin(j, true);
}

void
json_end_object(struct json *j)
{
	json_end(j, true);
}

void
json_begin_array(struct json *j)
{
	json_begin(j, false);
}

void
json_end_array(struct json *j)
{
	json_end(j, false);
}

void
json_key(struct json *j, const char *key)
{
	if (j->error)
		return;
	if (key == NULL || j->depth == 0 || !j->stack[j->depth - 1].object ||
	    j->have_key) {
		j->error = true;
		return;
	}
	if (!j->stack[j->depth - 1].first)
		evbuffer_add(j->out, ",", 1);
	j->stack[j->depth - 1].first = false;
	json_put_string(j, (const unsigned char *)key, strlen(key));
	evbuffer_add(j->out, ":", 1);
	j->have_key = true;
}

void
json_string_len(struct json *j, const void *s, size_t len)
{
	if (s == NULL && len != 0) {
		j->error = true;
		return;
	}
	if (s == NULL)
		s = "";
	if (!json_before_value(j))
		return;
	json_put_string(j, s, len);
	json_after_value(j);
}

void
json_string(struct json *j, const char *s)
{
	if (s == NULL)
		json_null(j);
	else
		json_string_len(j, s, strlen(s));
}

void
json_uint(struct json *j, uint64_t v)
{
	if (!json_before_value(j))
		return;
	evbuffer_add_printf(j->out, "%" PRIu64, v);
	json_after_value(j);
}

void
json_int(struct json *j, int64_t v)
{
	if (!json_before_value(j))
		return;
	evbuffer_add_printf(j->out, "%" PRId64, v);
	json_after_value(j);
}

void
json_double(struct json *j, double v, int precision)
{
	if (j->error)
		return;
	if (precision < 0 || precision > 17) {
		j->error = true;
		return;
	}
	if (!isfinite(v)) {
		json_null(j);
		return;
	}
	if (!json_before_value(j))
		return;
	evbuffer_add_printf(j->out, "%.*f", precision, v);
	json_after_value(j);
}

void
json_bool(struct json *j, bool v)
{
	if (!json_before_value(j))
		return;
	if (v)
		evbuffer_add(j->out, "true", 4);
	else
		evbuffer_add(j->out, "false", 5);
	json_after_value(j);
}

void
json_null(struct json *j)
{
	if (!json_before_value(j))
		return;
	evbuffer_add(j->out, "null", 4);
	json_after_value(j);
}

int
json_finish(const struct json *j)
{
	if (j->error || !j->done || j->depth != 0)
		return -1;
	return 0;
}

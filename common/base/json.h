/* A small JSON writer onto an evbuffer, for status output. */
#ifndef ROVE_JSON_H
#define ROVE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/* Deepest nesting of objects and arrays; one more level is an error. */
#define JSON_MAX_DEPTH 16

/*
 * Output is compact (no whitespace) and the writer places commas and colons
 * itself. Misuse (a value in an object without a key, a key outside an
 * object, an end that does not match its begin, nesting deeper than
 * JSON_MAX_DEPTH, a second top-level value, a precision outside 0..17) sets
 * the error flag; from then on every call is a no-op, so callers check once
 * at the end with json_finish. The writer never allocates.
 *
 *	json_init(&j, buf);
 *	json_begin_object(&j);
 *	json_key(&j, "peers"); json_begin_array(&j); ... json_end_array(&j);
 *	json_end_object(&j);
 *	if (json_finish(&j) != 0) ...
 */
struct json {
	struct evbuffer *out;           /* not owned */
	bool error;
	bool done;                      /* the top-level value is complete */
	bool have_key;                  /* a key waits for its value */
	unsigned depth;
	struct {
		bool object;            /* else array */
		bool first;             /* nothing written at this level yet */
	} stack[JSON_MAX_DEPTH];
};

void json_init(struct json *, struct evbuffer *out);

void json_begin_object(struct json *);
void json_end_object(struct json *);
void json_begin_array(struct json *);
void json_end_array(struct json *);

/* A key inside an object, NUL-terminated, escaped like a string. */
void json_key(struct json *, const char *);

/* Strings are escaped: '"' and '\\' with a backslash, control characters
 * (and DEL) as \u00XX, valid UTF-8 passed through, and each byte of an
 * invalid UTF-8 sequence as \u00XX of that byte. NULL writes null. */
void json_string(struct json *, const char *);
void json_string_len(struct json *, const void *, size_t);
void json_uint(struct json *, uint64_t);
void json_int(struct json *, int64_t);
/* Fixed-point with `precision` digits after the point (0..17); NaN and
 * infinities, which JSON cannot express, are written as null. */
void json_double(struct json *, double, int precision);
void json_bool(struct json *, bool);
void json_null(struct json *);

/* 0 if exactly one complete value was written without error, else -1. */
int json_finish(const struct json *);

#endif

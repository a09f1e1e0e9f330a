/* Logging: levels, rate limiting, and fatal exits for startup errors. */
#ifndef ROVE_LOG_H
#define ROVE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

/* Set the program name and verbosity (0 = info, 1+ = debug). Logs go to
 * stderr; each line is "name: message", preceded by its syslog priority
 * ("<3>") when stderr is the journal (JOURNAL_STREAM), which then files
 * each line at its level. */
void log_open(const char *name, int verbose);
/* From now on, send log lines to syslog(3) (facility daemon) instead. */
void log_to_syslog(void);
enum log_level log_get_level(void);

void log_msg(enum log_level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level, const char *fmt, va_list)
	__attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                   \
	do {                                                             \
		if (log_get_level() >= LOG_LEVEL_DEBUG)                  \
			log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__);           \
	} while (0)

/* Print and exit(1): for startup errors and broken invariants only. */
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* As fatalx, with ": strerror(errno)" appended. */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A token bucket for per-event warnings: log_ratelimit_ok() is true at most
 * `burst` times per `interval_ms`; suppressed events are counted and reported
 * on the next allowed line by the caller via `suppressed`. */
struct log_ratelimit {
	uint64_t window_start_ms;
	uint32_t interval_ms;
	uint32_t burst;
	uint32_t used;
	uint32_t suppressed;
};
#define LOG_RATELIMIT_INIT(interval, n) { 0, (interval), (n), 0, 0 }
int log_ratelimit_ok(struct log_ratelimit *, uint64_t now_ms);

/* Copy `len` bytes of untrusted text into `dst` (size `dstlen`), escaping
 * anything that is not printable ASCII as \xNN. Always NUL-terminates. */
void log_escape(char *dst, size_t dstlen, const void *src, size_t len);

#endif

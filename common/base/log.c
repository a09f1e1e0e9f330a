/* Logging to stderr (or syslog) with levels, rate limits and escaping of
 * peer strings. */
#include <sys/stat.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "log.h"

static const char *log_name = "rove";
static enum log_level log_level = LOG_LEVEL_INFO;
static bool log_syslog;         /* lines go to syslog(3) */
static bool log_journal;        /* stderr is journald's: "<N>" prefixes */

static const int log_priority[] = {
	[LOG_LEVEL_ERROR] = LOG_ERR,
	[LOG_LEVEL_WARN] = LOG_WARNING,
	[LOG_LEVEL_INFO] = LOG_INFO,
	[LOG_LEVEL_DEBUG] = LOG_DEBUG,
};

/* systemd sets JOURNAL_STREAM to "DEVICE:INODE" of the stream it connected
 * to stderr; only if stderr is still that stream do prefixes belong. */
static bool
stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(2, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

void
log_to_syslog(void)
{
	openlog(log_name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = true;
}

void
log_open(const char *name, int verbose)
{
	log_name = name;
	log_level = verbose > 0 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO;
	log_journal = stderr_is_journal();
}

enum log_level
log_get_level(void)
{
	return log_level;
}

/* "2026-12-06 14:40:01.123", local time: a foreground log (a terminal,
 * a file) says when; the journal and syslog stamp lines themselves. */
static const char *
timestamp(char buf[static 32])
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, 24, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, 32 - n, ".%03ld", ts.tv_nsec / 1000000);
	return buf;
}

void
log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	static const char *const prefix[] = { "error: ", "warning: ", "", "debug: " };
	char line[1024], stamp[32];

	if (level > log_level)
		return;
	vsnprintf(line, sizeof line, fmt, ap);
	if (log_syslog)
		syslog(log_priority[level], "%s%s", prefix[level], line);
	else if (log_journal)
		fprintf(stderr, "<%d>%s: %s%s\n", log_priority[level], log_name,
		    prefix[level], line);
	else
		fprintf(stderr, "%s %s: %s%s\n", timestamp(stamp), log_name,
		    prefix[level], line);
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_LEVEL_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatal(const char *fmt, ...)
{
	char msg[768];
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_msg(LOG_LEVEL_ERROR, "%s: %s", msg, strerror(saved));
	exit(1);
}

int
log_ratelimit_ok(struct log_ratelimit *rl, uint64_t now_ms)
{
	if (now_ms - rl->window_start_ms >= rl->interval_ms || rl->window_start_ms == 0) {
		rl->window_start_ms = now_ms ? now_ms : 1;
		rl->used = 0;
	}
	if (rl->used < rl->burst) {
		rl->used++;
		return 1;
	}
	rl->suppressed++;
	return 0;
}

void
log_escape(char *dst, size_t dstlen, const void *src, size_t len)
{
	const unsigned char *s = src;
	size_t o = 0;

	if (dstlen == 0)
		return;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			if (o + 1 >= dstlen)
				break;
			dst[o++] = (char)c;
		} else {
			if (o + 4 >= dstlen)
				break;
			snprintf(dst + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	dst[o] = '\0';
}

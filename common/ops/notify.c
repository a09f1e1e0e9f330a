/* sd_notify(3) for Type=notify units (see notify.h). */
#include <systemd/sd-daemon.h>

#include <event2/event.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "notify.h"

static struct event *watchdog_ev;
static bool ready;
static char last_status[256];

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	(void)sd_notify(0, "WATCHDOG=1");
}

void
notify_init(struct event_base *base)
{
	uint64_t usec = 0;
	struct timeval tv;

	/* A loop that stops turning stops the pings: the watchdog timer
	 * runs on the event loop itself. */
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return;
	usec /= 2;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	watchdog_ev = event_new(base, -1, EV_PERSIST, watchdog_cb, NULL);
	if (watchdog_ev == NULL || event_add(watchdog_ev, &tv) != 0)
		log_warn("systemd watchdog: cannot arm the timer");
	else
		(void)sd_notify(0, "WATCHDOG=1");
}

void
notify_free(void)
{
	if (watchdog_ev != NULL)
		event_free(watchdog_ev);
	watchdog_ev = NULL;
}

static void
send_status(const char *status, bool first_ready)
{
	if (status == NULL)
		status = "";
	if (!first_ready && strcmp(status, last_status) == 0)
		return;
	snprintf(last_status, sizeof last_status, "%s", status);
	(void)sd_notifyf(0, "%sSTATUS=%s", first_ready ? "READY=1\n" : "",
	    last_status);
}

void
notify_ready(const char *status)
{
	send_status(status, !ready);
	ready = true;
}

void
notify_status(const char *fmt, ...)
{
	char buf[sizeof last_status];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	send_status(buf, false);
}

void
notify_stopping(void)
{
	(void)sd_notify(0, "STOPPING=1");
}

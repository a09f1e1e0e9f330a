/* Telling the service manager how we are (sd_notify(3)): ready, a one-line
 * status, stopping, and the watchdog's keep-alive. Without
 * NOTIFY_SOCKET in the environment (not started by systemd) every call
 * does nothing. */
#ifndef ROVE_NOTIFY_H
#define ROVE_NOTIFY_H

struct event_base;

/* Start pinging the watchdog at half its interval when the unit has
 * WatchdogSec (WATCHDOG_USEC set for this process). */
void notify_init(struct event_base *);
void notify_free(void);

/* READY=1 with STATUS=`status`, the first time; later calls only update
 * the status. */
void notify_ready(const char *status);
/* STATUS=... (shown by systemctl status); repeated text is not resent. */
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void notify_stopping(void);

#endif

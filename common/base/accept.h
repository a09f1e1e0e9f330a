/* Accepting TCP connections when descriptors run out. A listening socket
 * with connections waiting stays readable; when accept4 fails for want of
 * descriptors (EMFILE, ENFILE) or memory, a loop that simply returns is
 * called again at once and spins at 100% CPU, logging every try. The
 * accept guard instead takes the waiting connection with a descriptor
 * held in reserve (one for the whole process) and closes it (the client
 * hears a close, not silence),
 * pauses the listener's event for a second, and logs at most a few lines
 * a minute with a count of the connections refused. */
#ifndef ROVE_ACCEPT_H
#define ROVE_ACCEPT_H

#include <stdint.h>
#include <sys/socket.h>

struct event;
struct event_base;

#define ACCEPT_PAUSE_MS 1000

struct accept_guard {
	struct event *listen_ev;  /* the listener's read event (the caller's) */
	struct event *resume_ev;  /* re-adds it after the pause */
	const char *what;         /* for the log: "ListenTCP", ... */
	uint64_t refused;         /* connections closed for want of descriptors */
	uint64_t pauses;
	uint64_t logged_refused;  /* `refused` when the last line was logged */
	uint64_t log_ms;          /* when it was */
};

/* Guard `listen_ev` (a persistent read event on a listening socket, added
 * by the caller). `what` names the listener in log lines and must outlive
 * the guard. Returns 0, or -1 if the timer cannot be had. */
int accept_guard_init(struct accept_guard *, struct event_base *,
    struct event *listen_ev, const char *what);
void accept_guard_free(struct accept_guard *);

/* accept4(lfd, from, fromlen, SOCK_NONBLOCK | SOCK_CLOEXEC), guarded:
 * the new descriptor, or -1 when the caller's accept loop should stop for
 * now (nothing waiting, or descriptors ran out and the listener is
 * paused). */
int accept_guarded(struct accept_guard *, int lfd, struct sockaddr *from,
    socklen_t *fromlen);

#endif

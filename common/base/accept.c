/* Accepting without spinning when descriptors run out (accept.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "accept.h"
#include "clock.h"
#include "log.h"

/* At most one line per this long; the next one says how many were
 * refused meanwhile. */
#define ACCEPT_LOG_MS 10000

/* One descriptor held back for the whole process: every guard's. */
static int reserve = -1;

static void
reserve_open(void)
{
	if (reserve == -1)
		reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct accept_guard *g = arg;

	(void)fd;
	(void)what;
	reserve_open();
	event_add(g->listen_ev, NULL);
}

int
accept_guard_init(struct accept_guard *g, struct event_base *base,
    struct event *listen_ev, const char *what)
{
	*g = (struct accept_guard){ .listen_ev = listen_ev, .what = what };
	g->resume_ev = evtimer_new(base, resume_cb, g);
	if (g->resume_ev == NULL)
		return -1;
	/* Without it (already out of descriptors) the guard still pauses. */
	reserve_open();
	return 0;
}

void
accept_guard_free(struct accept_guard *g)
{
	if (g->resume_ev != NULL)
		event_free(g->resume_ev);
	g->resume_ev = NULL;
}

static void
out_of_descriptors(struct accept_guard *g, int lfd, int err)
{
	struct timeval tv = { ACCEPT_PAUSE_MS / 1000, (ACCEPT_PAUSE_MS % 1000) * 1000 };
	uint64_t now = clock_now_ms();
	int c;

	/* The classic trick: give back the reserve, take the connection
	 * with it and close it, so that it does not wait in the backlog
	 * for a descriptor that will not come. */
	if (reserve != -1) {
		close(reserve);
		reserve = -1;
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c != -1) {
			close(c);
			g->refused++;
		}
		reserve_open();
	}
	g->pauses++;
	event_del(g->listen_ev);
	evtimer_add(g->resume_ev, &tv);
	if (g->log_ms == 0 || now - g->log_ms >= ACCEPT_LOG_MS) {
		log_warn("%s: accept: %s: %llu connection(s) refused, listener "
		    "paused %d ms at a time", g->what, strerror(err),
		    (unsigned long long)(g->refused - g->logged_refused),
		    ACCEPT_PAUSE_MS);
		g->log_ms = now;
		g->logged_refused = g->refused;
	}
}

int
accept_guarded(struct accept_guard *g, int lfd, struct sockaddr *from,
    socklen_t *fromlen)
{
	int c, err;

	for (;;) {
		c = accept4(lfd, from, fromlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c != -1)
			return c;
		err = errno;
		switch (err) {
		case EINTR:
		case ECONNABORTED:
		/* A connection that failed while it waited (accept(2)):
		 * taken off the queue, so the next one may be fine. */
		case EPROTO:
		case ENETDOWN:
		case ENETUNREACH:
		case EHOSTUNREACH:
		case EHOSTDOWN:
		case ENONET:
			continue;
		case EMFILE:
		case ENFILE:
		case ENOBUFS:
		case ENOMEM:
			out_of_descriptors(g, lfd, err);
			break;
		default:
			break;
		}
		errno = err;
		return -1;
	}
}

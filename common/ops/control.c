/* The control socket: one request line in, one answer out, then close. */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "base/safedir.h"
#include "base/xmalloc.h"
#include "control.h"

/* After EMFILE and friends, wait this long before accepting again. */
#define CONTROL_BACKOFF_SEC 1
/* Bytes of unread input discarded before closing; see client_free. */
#define CONTROL_DRAIN_MAX 65536

struct control_client {
	struct control *ctl;
	struct bufferevent *bev;
	bool answered;          /* answer begun; close once it is written */
	struct control_more more; /* the rest of the answer, if any */
	TAILQ_ENTRY(control_client) entry;
};

struct control {
	struct event_base *base;
	char *path;
	dev_t dev;              /* identity of our socket file, so that */
	ino_t ino;              /* control_free never removes another's */
	int fd;
	struct event *ev_accept;
	struct event *ev_backoff;
	bool backing_off;
	struct timeval timeout;
	control_cb cb;
	void *arg;
	unsigned nclients;
	TAILQ_HEAD(, control_client) clients;
};

static void control_accept_cb(evutil_socket_t, short, void *);

/* Accept only while below the client limit and not backing off. */
static void
control_update_accept(struct control *ctl)
{
	if (!ctl->backing_off && ctl->nclients < CONTROL_MAX_CLIENTS)
		event_add(ctl->ev_accept, NULL);
	else
		event_del(ctl->ev_accept);
}

static void
control_client_free(struct control_client *c)
{
	struct control *ctl = c->ctl;
	char junk[4096];
	size_t drained = 0;
	ssize_t n;
	int fd;

	/*
	 * Closing a Unix stream socket with unread input makes the peer's
	 * next read fail with ECONNRESET instead of seeing EOF, so discard
	 * what the client sent beyond its request first (bounded: a client
	 * that keeps writing just gets the reset).
	 */
	fd = bufferevent_getfd(c->bev);
	while (fd != -1 && drained < CONTROL_DRAIN_MAX) {
		n = recv(fd, junk, sizeof junk, MSG_DONTWAIT);
		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	if (c->more.done != NULL)
		c->more.done(c->more.arg);
	/* The socket is ours, not the bufferevent's: libevent would close it
	 * only when the loop next runs, and control_free must close now. */
	bufferevent_free(c->bev);
	if (fd != -1)
		close(fd);
	TAILQ_REMOVE(&ctl->clients, c, entry);
	ctl->nclients--;
	free(c);
	control_update_accept(ctl);
}

/* The next part of a long answer, while the output is short of
 * CONTROL_MORE_LOW: one part per call, so that the loop runs between
 * parts. Each is made in a buffer of its own and moved over whole:
 * every addition to the bufferevent's own output runs its callbacks, and
 * a server's answer about thousands of peers is millions of them. */
static void
control_client_more(struct control_client *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev), *part;
	bool go;

	if (c->more.next == NULL || evbuffer_get_length(out) > CONTROL_MORE_LOW)
		return;
	if ((part = evbuffer_new()) == NULL)
		fatalx("%s: out of memory", __func__);
	go = c->more.next(part, c->more.arg);
	evbuffer_add_buffer(out, part);
	evbuffer_free(part);
	if (!go) {
		if (c->more.done != NULL)
			c->more.done(c->more.arg);
		c->more = (struct control_more){ NULL, NULL, NULL };
	}
}

/* The answer (or error) is begun: stop reading, close once written. */
static void
control_client_finish(struct control_client *c)
{
	c->answered = true;
	bufferevent_disable(c->bev, EV_READ);
	/* Nothing to write would mean no write callback to go on from. */
	while (c->more.next != NULL &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		control_client_more(c);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		control_client_free(c);
}

static void
control_client_bad(struct control_client *c)
{
	log_debug("%s: bad request on control socket", __func__);
	evbuffer_add_printf(bufferevent_get_output(c->bev),
	    "error: bad request\n");
	control_client_finish(c);
}

/* Check one request line (without its "\n") and answer it. */
static void
control_client_line(struct control_client *c, char *line, size_t len)
{
	struct evbuffer *answer;

	if (len > 0 && line[len - 1] == '\r')
		line[--len] = '\0';
	if (len == 0 || len > CONTROL_MAX_REQUEST) {
		control_client_bad(c);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		if (line[i] < 0x20 || line[i] > 0x7e) {
			control_client_bad(c);
			return;
		}
	}
	/* Made in a buffer of its own, as control_client_more's parts. */
	if ((answer = evbuffer_new()) == NULL)
		fatalx("%s: out of memory", __func__);
	c->ctl->cb(answer, line, c->ctl->arg, &c->more);
	evbuffer_add_buffer(bufferevent_get_output(c->bev), answer);
	evbuffer_free(answer);
	control_client_finish(c);
}

static void
control_read_cb(struct bufferevent *bev, void *arg)
{
	struct control_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr eol;
	size_t eol_len, len;
	char *line;

	if (c->answered)
		return;
	eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_LF);
	if (eol.pos == -1) {
		/* Room for the longest request and its "\r", no more. */
		if (evbuffer_get_length(in) > CONTROL_MAX_REQUEST + 1)
			control_client_bad(c);
		return;
	}
	if ((size_t)eol.pos > CONTROL_MAX_REQUEST + 1) {
		control_client_bad(c);
		return;
	}
	line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
	if (line == NULL) {
		control_client_bad(c);
		return;
	}
	control_client_line(c, line, len);
	free(line);
}

static void
control_write_cb(struct bufferevent *bev, void *arg)
{
	struct control_client *c = arg;

	control_client_more(c);
	if (c->answered && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		control_client_free(c);
}

static void
control_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct control_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;
	char *line;

	/* A request ended by EOF instead of a newline is still a request. */
	if ((what & BEV_EVENT_EOF) && !c->answered &&
	    (len = evbuffer_get_length(in)) > 0) {
		if (len > CONTROL_MAX_REQUEST + 1) {
			control_client_bad(c);
			return;
		}
		line = xmalloc(len + 1);
		evbuffer_remove(in, line, len);
		line[len] = '\0';
		control_client_line(c, line, len);
		free(line);
		return;
	}
	/* EOF before a request, a timeout, or an error: nothing to answer. */
	control_client_free(c);
}

static void
control_client_new(struct control *ctl, int fd)
{
	struct control_client *c;

	c = xcalloc(1, sizeof *c);
	c->ctl = ctl;
	c->bev = bufferevent_socket_new(ctl->base, fd, 0);
	if (c->bev == NULL) {
		log_warn("%s: cannot create bufferevent", __func__);
		close(fd);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&ctl->clients, c, entry);
	ctl->nclients++;
	bufferevent_setcb(c->bev, control_read_cb, control_write_cb,
	    control_event_cb, c);
	/* Stop reading once a request cannot be valid any more. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, CONTROL_MAX_REQUEST + 2);
	/* Called back for a long answer's next part at this, not at 0, so
	 * that the socket need not wait for it. */
	bufferevent_setwatermark(c->bev, EV_WRITE, CONTROL_MORE_LOW, 0);
	bufferevent_set_timeouts(c->bev, &ctl->timeout, &ctl->timeout);
	bufferevent_enable(c->bev, EV_READ);
}

static void
control_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct control *ctl = arg;

	(void)fd;
	(void)what;
	ctl->backing_off = false;
	control_update_accept(ctl);
}

static void
control_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct control *ctl = arg;
	struct timeval tv = { .tv_sec = CONTROL_BACKOFF_SEC };
	int fd;

	(void)what;
	while (ctl->nclients < CONTROL_MAX_CLIENTS) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd != -1) {
			control_client_new(ctl, fd);
			continue;
		}
		switch (errno) {
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
		case EINTR:
		case ECONNABORTED:
			break;
		case EMFILE:
		case ENFILE:
		case ENOBUFS:
		case ENOMEM:
			/* Out of descriptors: the listener would stay readable
			 * and spin the loop, so pause it for a while. */
			log_warn("%s: accept: %s", __func__, strerror(errno));
			ctl->backing_off = true;
			evtimer_add(ctl->ev_backoff, &tv);
			break;
		default:
			log_warn("%s: accept: %s", __func__, strerror(errno));
			break;
		}
		break;
	}
	control_update_accept(ctl);
}

static int
control_fill_sun(struct sockaddr_un *sun, const char *path, char **cause)
{
	size_t len;

	if (path == NULL || *path == '\0') {
		xasprintf(cause, "control socket path is empty");
		return -1;
	}
	len = strlen(path);
	memset(sun, 0, sizeof *sun);
	if (len >= sizeof sun->sun_path) {
		xasprintf(cause, "control socket path too long (at most %zu "
		    "bytes): %s", sizeof sun->sun_path - 1, path);
		return -1;
	}
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, len + 1);
	return 0;
}

/* Besides the effective user, the one uid that may own the socket's
 * directory (see control_allow_owner); -1 when there is none. */
static uid_t control_owner = (uid_t)-1;

void
control_allow_owner(uid_t uid)
{
	control_owner = uid;
}

/*
 * The directory holding `path` must be ours: whoever can write to it can
 * replace the socket, answer "rove status" in our name or have us remove
 * a file of theirs. It is created (mode 0700, and any missing level above
 * it) when missing, and never followed if it is a symbolic link.
 */
static int
control_check_dir(const char *path, char **cause)
{
	char *dir, *slash;
	struct stat sb;
	int fd, ret = -1;

	dir = xstrdup(path);
	slash = strrchr(dir, '/');
	if (slash == NULL) {
		free(dir);
		dir = xstrdup(".");
	} else
		*(slash == dir ? slash + 1 : slash) = '\0';

	if (lstat(dir, &sb) != 0 && errno == ENOENT) {
		char *up = xstrdup(dir), *cut = strrchr(up, '/');

		/* The levels above, as StateDir's are made. */
		if (cut != NULL && cut != up) {
			*cut = '\0';
			if (safedir_make("control socket directory", up,
			    cause) != 0) {
				free(up);
				goto out;
			}
		}
		free(up);
		if (mkdir(dir, 0700) == 0) {
			/* mkdir honours the umask; the mode is meant exactly.
			 * Through a descriptor, so that a link put in its
			 * place meanwhile is neither followed nor changed. */
			fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
			if (fd == -1 || fchmod(fd, 0700) != 0) {
				xasprintf(cause, "setting mode of %s: %s", dir,
				    strerror(errno));
				if (fd != -1)
					close(fd);
				goto out;
			}
			close(fd);
		} else if (errno != EEXIST) {
			xasprintf(cause, "creating directory %s: %s", dir,
			    strerror(errno));
			goto out;
		}
	}
	if (lstat(dir, &sb) != 0) {
		xasprintf(cause, "checking directory %s: %s", dir,
		    strerror(errno));
		goto out;
	}
	if (S_ISLNK(sb.st_mode)) {
		xasprintf(cause, "control socket directory %s is a symbolic "
		    "link", dir);
		goto out;
	}
	if (!S_ISDIR(sb.st_mode)) {
		xasprintf(cause, "%s is not a directory", dir);
		goto out;
	}
	if (sb.st_uid != geteuid() && sb.st_uid != control_owner) {
		if (control_owner == (uid_t)-1)
			xasprintf(cause, "control socket directory %s belongs "
			    "to uid %u, not to this user (uid %u)", dir,
			    (unsigned)sb.st_uid, (unsigned)geteuid());
		else
			xasprintf(cause, "control socket directory %s belongs "
			    "to uid %u, neither to this user (uid %u) nor to "
			    "User (uid %u)", dir, (unsigned)sb.st_uid,
			    (unsigned)geteuid(), (unsigned)control_owner);
		goto out;
	}
	if ((sb.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
		xasprintf(cause, "control socket directory %s is writable by "
		    "%s (mode %04o)", dir, (sb.st_mode & S_IWOTH) != 0 ?
		    "others" : "its group", (unsigned)(sb.st_mode & 07777));
		goto out;
	}
	ret = 0;
out:
	free(dir);
	return ret;
}

/* Remove a socket file nobody listens on; refuse anything else. */
static int
control_remove_stale(const struct sockaddr_un *sun, char **cause)
{
	const char *path = sun->sun_path;
	struct stat sb;
	int fd, ret = -1;

	if (lstat(path, &sb) != 0) {
		if (errno == ENOENT)
			return 0;
		xasprintf(cause, "checking %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(sb.st_mode)) {
		xasprintf(cause, "%s exists and is not a socket", path);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0) {
		xasprintf(cause, "control socket %s is in use by another "
		    "process", path);
		goto out;
	}
	if (errno != ECONNREFUSED) {
		xasprintf(cause, "checking %s: %s", path, strerror(errno));
		goto out;
	}
	if (unlink(path) != 0 && errno != ENOENT) {
		xasprintf(cause, "removing stale %s: %s", path, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	close(fd);
	return ret;
}

struct control *
control_create(struct event_base *base, const char *path, control_cb cb,
    void *arg, char **cause)
{
	struct control *ctl = NULL;
	struct sockaddr_un sun;
	struct stat sb;
	mode_t mask;
	int fd = -1;

	if (base == NULL || cb == NULL) {
		xasprintf(cause, "control socket: no event base or callback");
		return NULL;
	}
	if (control_fill_sun(&sun, path, cause) != 0 ||
	    control_check_dir(path, cause) != 0 ||
	    control_remove_stale(&sun, cause) != 0)
		return NULL;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return NULL;
	}
	/* The socket file takes its mode from the umask at bind time; this
	 * way it is never more open than 0660, not even for a moment. */
	mask = umask(0117);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		umask(mask);
		xasprintf(cause, "binding %s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	umask(mask);

	ctl = xcalloc(1, sizeof *ctl);
	ctl->base = base;
	ctl->path = xstrdup(path);
	ctl->fd = fd;
	ctl->cb = cb;
	ctl->arg = arg;
	TAILQ_INIT(&ctl->clients);
	control_set_timeout(ctl, CONTROL_TIMEOUT_MS);
	if (stat(path, &sb) == 0) {
		ctl->dev = sb.st_dev;
		ctl->ino = sb.st_ino;
	}
	if (listen(fd, CONTROL_MAX_CLIENTS) != 0) {
		xasprintf(cause, "listening on %s: %s", path, strerror(errno));
		goto fail;
	}
	ctl->ev_accept = event_new(base, fd, EV_READ | EV_PERSIST,
	    control_accept_cb, ctl);
	ctl->ev_backoff = evtimer_new(base, control_backoff_cb, ctl);
	if (ctl->ev_accept == NULL || ctl->ev_backoff == NULL) {
		xasprintf(cause, "control socket: cannot create events");
		goto fail;
	}
	if (event_add(ctl->ev_accept, NULL) != 0) {
		xasprintf(cause, "control socket: cannot add accept event");
		goto fail;
	}
	return ctl;

fail:
	control_free(ctl);
	return NULL;
}

void
control_set_timeout(struct control *ctl, unsigned timeout_ms)
{
	ctl->timeout.tv_sec = timeout_ms / 1000;
	ctl->timeout.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
}

void
control_free(struct control *ctl)
{
	struct control_client *c;
	struct stat sb;

	if (ctl == NULL)
		return;
	while ((c = TAILQ_FIRST(&ctl->clients)) != NULL)
		control_client_free(c);
	if (ctl->ev_accept != NULL)
		event_free(ctl->ev_accept);
	if (ctl->ev_backoff != NULL)
		event_free(ctl->ev_backoff);
	if (ctl->fd != -1)
		close(ctl->fd);
	/* Another instance may have replaced the file since; leave it. */
	if (stat(ctl->path, &sb) == 0 && sb.st_dev == ctl->dev &&
	    sb.st_ino == ctl->ino)
		unlink(ctl->path);
	free(ctl->path);
	free(ctl);
}

static int64_t
control_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait up to `timeout_ms` for `events` on fd: 1 ready, 0 timeout, -1 error. */
static int
control_wait(int fd, short events, unsigned timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int64_t deadline = control_now_ms() + timeout_ms, left;
	int n;

	for (;;) {
		left = deadline - control_now_ms();
		if (left < 0)
			left = 0;
		if (left > INT_MAX)
			left = INT_MAX;
		n = poll(&pfd, 1, (int)left);
		if (n >= 0)
			return n > 0 ? 1 : 0;
		if (errno != EINTR)
			return -1;
	}
}

int
control_request_timeout(const char *path, const char *request, FILE *out,
    unsigned timeout_ms, char **cause)
{
	struct sockaddr_un sun;
	struct timeval tv;
	char line[CONTROL_MAX_REQUEST + 1], buf[16384];
	size_t len, off;
	ssize_t n;
	int fd = -1, ret = -1, r;

	if (request == NULL || out == NULL) {
		xasprintf(cause, "invalid request");
		return -1;
	}
	len = strlen(request);
	if (len > CONTROL_MAX_REQUEST) {
		xasprintf(cause, "request too long (at most %d bytes)",
		    CONTROL_MAX_REQUEST);
		return -1;
	}
	if (len == 0) {
		xasprintf(cause, "invalid request");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (request[i] < 0x20 || request[i] > 0x7e) {
			xasprintf(cause, "invalid request");
			return -1;
		}
	}
	if (control_fill_sun(&sun, path, cause) != 0)
		return -1;
	memcpy(line, request, len);
	line[len++] = '\n';

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		xasprintf(cause, "socket: %s", strerror(errno));
		return -1;
	}
	/* A Unix connect blocks only while the server's backlog is full; the
	 * send timeout bounds that wait too. */
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		if (errno == EAGAIN || errno == EINPROGRESS)
			xasprintf(cause, "connecting to %s: timed out", path);
		else
			xasprintf(cause, "connecting to %s: %s", path,
			    strerror(errno));
		goto out;
	}
	for (off = 0; off < len; off += (size_t)n) {
		n = send(fd, line + off, len - off, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n == -1) {
			xasprintf(cause, "sending to %s: %s", path,
			    strerror(errno));
			goto out;
		}
	}

	for (;;) {
		r = control_wait(fd, POLLIN, timeout_ms);
		if (r == 0) {
			xasprintf(cause, "reading from %s: timed out", path);
			goto out;
		}
		if (r < 0) {
			xasprintf(cause, "reading from %s: %s", path,
			    strerror(errno));
			goto out;
		}
		n = read(fd, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		/* The server closes as soon as its answer is written; all of
		 * it is read before a reset shows, so a reset is the end. */
		if (n == 0 || (n == -1 && errno == ECONNRESET))
			break;
		if (n == -1) {
			xasprintf(cause, "reading from %s: %s", path,
			    strerror(errno));
			goto out;
		}
		if (fwrite(buf, 1, (size_t)n, out) != (size_t)n) {
			xasprintf(cause, "writing answer: %s", strerror(errno));
			goto out;
		}
	}
	if (fflush(out) != 0) {
		xasprintf(cause, "writing answer: %s", strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (fd != -1)
		close(fd);
	return ret;
}

int
control_request(const char *path, const char *request, FILE *out,
    char **cause)
{
	return control_request_timeout(path, request, out, CONTROL_TIMEOUT_MS,
	    cause);
}

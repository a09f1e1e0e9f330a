/* TCP helpers: nonblocking connect with timeout, listening sockets. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/xmalloc.h"
#include "tcp.h"
#include "wire/proto-fwd.h"

struct tcp_connect {
	int fd;
	struct event *ev;
	tcp_connect_cb cb;
	void *arg;
	uint64_t err; /* set when failing before the first event */
};

uint64_t
tcp_errno_to_fwd(int err)
{
	switch (err) {
	case ECONNREFUSED:
		return PROTO_FWD_ERR_REFUSED;
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EADDRNOTAVAIL:
	case EACCES:  /* a "prohibit" route, a firewall's reject */
	case EPERM:
	case EINVAL:  /* a "blackhole" route */
		return PROTO_FWD_ERR_UNREACHABLE;
	case ETIMEDOUT:
		return PROTO_FWD_ERR_TIMEOUT;
	default:
		return PROTO_FWD_ERR_RESET;
	}
}

static void
tune(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void
connect_event(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_connect *tc = arg;
	tcp_connect_cb cb = tc->cb;
	void *cbarg = tc->arg;
	socklen_t len = sizeof(int);
	int err = 0, outfd = -1;
	uint64_t code = 0;

	if (tc->err != 0)
		code = tc->err;
	else if (what & EV_TIMEOUT)
		code = PROTO_FWD_ERR_TIMEOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0)
		code = tcp_errno_to_fwd(err != 0 ? err : errno);
	else {
		outfd = tc->fd;
		tc->fd = -1;
	}
	tcp_connect_cancel(tc);
	cb(outfd, code, cbarg);
}

struct tcp_connect *
tcp_connect_start(struct event_base *base, const struct sockaddr *sa,
    socklen_t salen, unsigned timeout_ms, tcp_connect_cb cb, void *arg,
    uint64_t *err)
{
	struct tcp_connect *tc;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int fd, one = 1;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		*err = PROTO_FWD_ERR_RESET;
		return NULL;
	}
	/* An IPv6 socket that is not V6ONLY connects to ::ffff:a.b.c.d over
	 * IPv4: targets arrive already checked, and must reach exactly the
	 * family they were checked in. */
	if (sa->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == -1) {
		close(fd);
		*err = PROTO_FWD_ERR_RESET;
		return NULL;
	}
	tune(fd);
	tc = xcalloc(1, sizeof *tc);
	tc->fd = fd;
	tc->cb = cb;
	tc->arg = arg;
	if (connect(fd, sa, salen) == -1 && errno != EINPROGRESS) {
		/* Report asynchronously like every other outcome. */
		tc->err = tcp_errno_to_fwd(errno);
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		tc->ev = evtimer_new(base, connect_event, tc);
		evtimer_add(tc->ev, &tv);
		return tc;
	}
	tc->ev = event_new(base, fd, EV_WRITE, connect_event, tc);
	event_add(tc->ev, &tv);
	return tc;
}

void
tcp_connect_cancel(struct tcp_connect *tc)
{
	if (tc == NULL)
		return;
	if (tc->ev != NULL)
		event_free(tc->ev);
	if (tc->fd != -1)
		close(tc->fd);
	free(tc);
}

/* A nonblocking socket of `type` bound to `sa`, listening if a stream. */
static int
bound_socket(const struct sockaddr *sa, socklen_t salen, int type,
    char **cause)
{
	char buf[ADDR_STRLEN];
	int fd, one = 1, err;

	fd = socket(sa->sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		err = errno;
		xasprintf(cause, "socket: %s", strerror(err));
		errno = err;
		return -1;
	}
	if (type == SOCK_STREAM)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (sa->sa_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, sa, salen) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 128) == -1)) {
		/* Kept for the caller, which may take some errors as "this
		 * address family is not here" (egress.c). */
		err = errno;
		xasprintf(cause, "listen on %s%s: %s", type == SOCK_DGRAM ?
		    "udp/" : "", addr_sockaddr_str(sa, buf), strerror(err));
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int
tcp_listen(const struct sockaddr *sa, socklen_t salen, char **cause)
{
	return bound_socket(sa, salen, SOCK_STREAM, cause);
}

int
udp_listen(const struct sockaddr *sa, socklen_t salen, char **cause)
{
	int fd = bound_socket(sa, salen, SOCK_DGRAM, cause);

	if (fd != -1)
		udp_buffers(fd, UDP_LISTEN_BUF);
	return fd;
}

void
udp_buffers(int fd, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) == -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) == -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

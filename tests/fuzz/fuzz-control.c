/* libFuzzer harness for common/ops/control.c: whatever a local client sends to
 * the control socket, in whatever pieces, and the request check of the
 * client side.
 *
 * Input: one byte choosing how the rest is cut into writes (1 to 16 bytes
 * at a time, or all at once), then the bytes a client sends before it
 * half-closes. The answer must be exactly what the contract in control.h
 * says for the first line. */
#include <sys/socket.h>
#include <sys/un.h>

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "ops/control.h"

int LLVMFuzzerInitialize(int *, char ***);
int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Loop turns allowed for one exchange; a few are enough. */
#define MAX_TURNS 10000

static struct event_base *base;
static struct control *ctl;
static char dir[64], path[96], absent[96];
static unsigned calls;
static char last[CONTROL_MAX_REQUEST + 1];

static void
answer_cb(struct evbuffer *out, const char *request, void *arg,
    struct control_more *more)
{
	(void)arg;
	(void)more;
	calls++;
	assert(strlen(request) <= CONTROL_MAX_REQUEST);
	snprintf(last, sizeof last, "%s", request);
	evbuffer_add_printf(out, "you said: %s\n", request);
}

static void
cleanup(void)
{
	control_free(ctl);
	event_base_free(base);
	rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *cause = NULL;

	(void)argc;
	(void)argv;
	/* The server writes to clients that may have gone. */
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof dir, "/tmp/rove-fuzz-control.XXXXXX");
	assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/ctl.sock", dir);
	snprintf(absent, sizeof absent, "%s/absent.sock", dir);
	assert((base = event_base_new()) != NULL);
	ctl = control_create(base, path, answer_cb, NULL, &cause);
	if (ctl == NULL) {
		fprintf(stderr, "control_create: %s\n", cause);
		abort();
	}
	atexit(cleanup);
	return 0;
}

static bool
printable(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] < 0x20 || p[i] > 0x7e)
			return false;
	}
	return true;
}

/*
 * What the server must answer to `in`, sent whole and then half-closed:
 * its first line (up to "\n", or everything at EOF), less one "\r" at the
 * end, is the request if it holds 1 to CONTROL_MAX_REQUEST printable
 * characters. Nothing at all gets no answer. Sets *request (in `buf`).
 */
static const char *
expected(const uint8_t *in, size_t n, char *buf, size_t buflen,
    const char **request)
{
	const uint8_t *nl = memchr(in, '\n', n);
	size_t len = nl != NULL ? (size_t)(nl - in) : n;

	*request = NULL;
	if (nl == NULL && n == 0)
		return "";
	/* The server never buffers more than the longest line and its
	 * "\r\n"; beyond that the line is bad whatever follows. */
	if (len > CONTROL_MAX_REQUEST + 1)
		return "error: bad request\n";
	if (len > 0 && in[len - 1] == '\r')
		len--;
	if (len == 0 || len > CONTROL_MAX_REQUEST || !printable(in, len))
		return "error: bad request\n";
	assert(len < buflen);
	memcpy(buf, in, len);
	buf[len] = '\0';
	*request = buf;
	return NULL;
}

static void
turn(void)
{
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* The client-side check: invalid requests never leave the process. */
static void
check_request(const uint8_t *data, size_t size)
{
	char req[CONTROL_MAX_REQUEST + 8], want[160], *cause = NULL;
	size_t len = size < sizeof req - 1 ? size : sizeof req - 1;
	FILE *devnull;
	int r;

	memcpy(req, data, len);
	req[len] = '\0';
	len = strlen(req);
	assert((devnull = fopen("/dev/null", "w")) != NULL);
	r = control_request_timeout(absent, req, devnull, 100, &cause);
	fclose(devnull);
	assert(r == -1 && cause != NULL);
	if (len > CONTROL_MAX_REQUEST)
		snprintf(want, sizeof want, "request too long (at most %d bytes)",
		    CONTROL_MAX_REQUEST);
	else if (len == 0 || !printable((const uint8_t *)req, len))
		snprintf(want, sizeof want, "invalid request");
	else
		snprintf(want, sizeof want,
		    "connecting to %s: No such file or directory", absent);
	assert(strcmp(cause, want) == 0);
	free(cause);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_un sun;
	const uint8_t *in;
	char reqbuf[CONTROL_MAX_REQUEST + 2], want[CONTROL_MAX_REQUEST + 16];
	char got[4096];
	const char *answer, *request;
	size_t n, chunk, off, gotlen = 0;
	unsigned calls0 = calls;
	bool eof = false;
	ssize_t r;
	int fd, turns;

	if (size == 0)
		return 0;
	chunk = data[0] % 17;   /* 0: all at once */
	in = data + 1;
	n = size - 1;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert(fd != -1);
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	assert(connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0);
	turn();
	for (off = 0; off < n; ) {
		size_t len = chunk == 0 || n - off < chunk ? n - off : chunk;

		/* Once the server has answered it closes: the rest may be
		 * refused, which is fine. */
		r = send(fd, in + off, len, MSG_NOSIGNAL);
		if (r <= 0)
			break;
		off += (size_t)r;
		turn();
	}
	shutdown(fd, SHUT_WR);
	for (turns = 0; turns < MAX_TURNS && !eof; turns++) {
		turn();
		while ((r = recv(fd, got + gotlen, sizeof got - gotlen,
		    MSG_DONTWAIT)) > 0)
			gotlen += (size_t)r;
		if (r == 0 || (r == -1 && errno == ECONNRESET))
			eof = true;
		else
			assert(r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
	close(fd);
	/* The server closes every connection, answered or not. */
	assert(eof);

	answer = expected(in, n, reqbuf, sizeof reqbuf, &request);
	if (answer == NULL) {
		snprintf(want, sizeof want, "you said: %s\n", request);
		answer = want;
		assert(calls == calls0 + 1);
		assert(strcmp(last, request) == 0);
	} else
		assert(calls == calls0);
	if (gotlen != strlen(answer) || memcmp(got, answer, gotlen) != 0) {
		fprintf(stderr, "expected '%s', got '%.*s'\n", answer,
		    (int)gotlen, got);
		abort();
	}

	check_request(in, n);
	return 0;
}

/* Unit tests for the control socket: a real event loop, clients in threads. */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "ops/control.h"

#define BIG_ANSWER (1024 * 1024 + 7)

struct fixture {
	char dir[64];
	char path[128];
	struct event_base *base;
	struct control *ctl;
	unsigned calls;
	char last[CONTROL_MAX_REQUEST + 1];
	unsigned parts, dones;  /* "parts": made after the first, finished */
};

/* One client, run in its own thread while the main thread runs the loop. */
struct job {
	const char *path;
	/* control_request mode */
	const char *request;
	unsigned timeout_ms;
	/* raw mode: send these bytes, optionally half-close, read to EOF */
	bool raw;
	const char *bytes;
	size_t nbytes;
	bool shut_wr;
	int raw_fd;             /* if >= 0, an already connected socket */
	/* results */
	int rc;
	char *cause;
	char *output;
	size_t output_len;
	int64_t elapsed_ms;
	int notify_fd;
	pthread_t thread;
};

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "parts": PARTS parts after the first, each a line "part N" padded
 * with dots to PART_LEN bytes. */
#define PARTS 400
#define PART_LEN 4000

static void
part_line(struct evbuffer *out, unsigned n)
{
	char line[PART_LEN];
	int len = snprintf(line, sizeof line, "part %u ", n);

	memset(line + len, '.', sizeof line - (size_t)len - 1);
	line[sizeof line - 1] = '\n';
	evbuffer_add(out, line, sizeof line);
}

static bool
parts_next(struct evbuffer *out, void *arg)
{
	struct fixture *f = arg;

	part_line(out, ++f->parts);
	return f->parts < PARTS;
}

static void
parts_done(void *arg)
{
	struct fixture *f = arg;

	f->dones++;
}

/* Answer "you said: <request>", a large answer for "big", or one in
 * parts for "parts". */
static void
echo_cb(struct evbuffer *out, const char *request, void *arg,
    struct control_more *more)
{
	struct fixture *f = arg;

	f->calls++;
	snprintf(f->last, sizeof f->last, "%s", request);
	if (strcmp(request, "big") == 0) {
		char chunk[4096];

		for (size_t i = 0; i < sizeof chunk; i++)
			chunk[i] = "0123456789abcdef"[i % 16];
		for (size_t n = 0; n < BIG_ANSWER; n += sizeof chunk) {
			evbuffer_add(out, chunk, BIG_ANSWER - n < sizeof chunk ?
			    BIG_ANSWER - n : sizeof chunk);
		}
		return;
	}
	if (strcmp(request, "parts") == 0) {
		part_line(out, 0);
		*more = (struct control_more){ parts_next, parts_done, f };
		return;
	}
	evbuffer_add_printf(out, "you said: %s\n", request);
}

/* Connect or abort: also used in client threads, where cmocka's
 * assertions must not run. */
static int
connect_path(const char *path)
{
	struct sockaddr_un sun;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		abort();
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0)
		abort();
	return fd;
}

/* A socket bound at `path`, not listening. */
static int
bind_path(const char *path)
{
	struct sockaddr_un sun;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	assert_true(strlen(path) < sizeof sun.sun_path);
	memcpy(sun.sun_path, path, strlen(path));
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
	return fd;
}

static void *
job_main(void *arg)
{
	struct job *j = arg;
	FILE *mem;
	int64_t start = now_ms();
	char buf[4096];
	ssize_t n;
	int fd;

	mem = open_memstream(&j->output, &j->output_len);
	if (mem == NULL)
		abort();
	if (!j->raw) {
		j->rc = control_request_timeout(j->path, j->request, mem,
		    j->timeout_ms ? j->timeout_ms : CONTROL_TIMEOUT_MS,
		    &j->cause);
	} else {
		fd = j->raw_fd >= 0 ? j->raw_fd : connect_path(j->path);
		if (j->nbytes > 0 &&
		    send(fd, j->bytes, j->nbytes, MSG_NOSIGNAL) !=
		    (ssize_t)j->nbytes)
			abort();
		if (j->shut_wr)
			shutdown(fd, SHUT_WR);
		j->rc = 0;
		while ((n = read(fd, buf, sizeof buf)) != 0) {
			if (n < 0) {
				j->rc = -errno;
				break;
			}
			fwrite(buf, 1, (size_t)n, mem);
		}
		close(fd);
	}
	fclose(mem);
	j->elapsed_ms = now_ms() - start;
	if (write(j->notify_fd, "x", 1) != 1)
		abort();
	return NULL;
}

struct waiter {
	struct event_base *base;
	int fd;
	size_t left;
};

static void
notify_cb(evutil_socket_t fd, short what, void *arg)
{
	struct waiter *w = arg;
	char c[32];
	ssize_t n;

	(void)what;
	n = read(fd, c, sizeof c);
	if (n > 0)
		w->left -= (size_t)n < w->left ? (size_t)n : w->left;
	if (w->left == 0)
		event_base_loopbreak(w->base);
}

static void
give_up_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	fail_msg("clients did not finish in time");
}

/* Run `n` jobs in threads and the event loop here until all are done. */
static void
run_jobs(struct fixture *f, struct job *jobs, size_t n)
{
	struct waiter w = { f->base, -1, n };
	struct timeval limit = { 20, 0 };
	struct event *ev, *timer;
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	w.fd = p[0];
	ev = event_new(f->base, p[0], EV_READ | EV_PERSIST, notify_cb, &w);
	timer = evtimer_new(f->base, give_up_cb, NULL);
	event_add(ev, NULL);
	evtimer_add(timer, &limit);
	for (size_t i = 0; i < n; i++) {
		jobs[i].notify_fd = p[1];
		if (jobs[i].path == NULL)
			jobs[i].path = f->path;
		assert_int_equal(pthread_create(&jobs[i].thread, NULL, job_main,
		    &jobs[i]), 0);
	}
	event_base_dispatch(f->base);
	for (size_t i = 0; i < n; i++)
		pthread_join(jobs[i].thread, NULL);
	event_free(timer);
	event_free(ev);
	close(p[0]);
	close(p[1]);
}

static void
job_clear(struct job *j)
{
	free(j->cause);
	free(j->output);
	j->cause = NULL;
	j->output = NULL;
}

static struct job
request_job(const char *request)
{
	struct job j;

	memset(&j, 0, sizeof j);
	j.request = request;
	j.raw_fd = -1;
	return j;
}

static struct job
raw_job(const char *bytes, size_t nbytes, bool shut_wr)
{
	struct job j;

	memset(&j, 0, sizeof j);
	j.raw = true;
	j.bytes = bytes;
	j.nbytes = nbytes;
	j.shut_wr = shut_wr;
	j.raw_fd = -1;
	return j;
}

static int
setup_paths(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/rove-test-control.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof f->path, "%s/ctl.sock", f->dir);
	f->base = event_base_new();
	assert_non_null(f->base);
	*state = f;
	return 0;
}

static int
setup(void **state)
{
	struct fixture *f;
	char *cause = NULL;

	setup_paths(state);
	f = *state;
	f->ctl = control_create(f->base, f->path, echo_cb, f, &cause);
	if (f->ctl == NULL)
		fail_msg("control_create: %s", cause);
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[256];

	control_free(f->ctl);
	event_base_free(f->base);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static void
test_status(void **state)
{
	struct fixture *f = *state;
	struct job j = request_job("status");

	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_null(j.cause);
	assert_string_equal(j.output, "you said: status\n");
	assert_int_equal(f->calls, 1);
	assert_string_equal(f->last, "status");
	job_clear(&j);
}

static void
test_status_json(void **state)
{
	struct fixture *f = *state;
	struct job j = request_job("status json");

	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_string_equal(j.output, "you said: status json\n");
	job_clear(&j);
}

static void
test_crlf_and_eof(void **state)
{
	struct fixture *f = *state;
	struct job j[2] = {
		raw_job("status\r\n", 8, false),
		raw_job("status", 6, true),     /* no newline, then EOF */
	};

	run_jobs(f, j, 2);
	assert_int_equal(j[0].rc, 0);
	assert_string_equal(j[0].output, "you said: status\n");
	assert_int_equal(j[1].rc, 0);
	assert_string_equal(j[1].output, "you said: status\n");
	assert_int_equal(f->calls, 2);
	job_clear(&j[0]);
	job_clear(&j[1]);
}

static void
test_only_first_line(void **state)
{
	struct fixture *f = *state;
	struct job j = raw_job("status\nstatus json\n", 19, false);

	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_string_equal(j.output, "you said: status\n");
	assert_int_equal(f->calls, 1);
	job_clear(&j);
}

static void
test_bad_requests(void **state)
{
	struct fixture *f = *state;
	static char long_line[CONTROL_MAX_REQUEST + 2];
	static char no_newline[300];
	struct job j[7];

	memset(long_line, 'a', CONTROL_MAX_REQUEST + 1);
	long_line[CONTROL_MAX_REQUEST + 1] = '\n';
	memset(no_newline, 'b', sizeof no_newline);
	j[0] = raw_job("sta\x01tus\n", 8, false);
	j[1] = raw_job("st\0atus\n", 8, false);
	j[2] = raw_job("\n", 1, false);
	j[3] = raw_job("\r\n", 2, false);
	j[4] = raw_job(long_line, sizeof long_line, false);
	j[5] = raw_job(no_newline, sizeof no_newline, false);
	j[6] = raw_job("caf\xc3\xa9\n", 6, false);
	run_jobs(f, j, 7);
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(j[i].rc, 0);
		assert_string_equal(j[i].output, "error: bad request\n");
		job_clear(&j[i]);
	}
	assert_int_equal(f->calls, 0);
}

static void
test_longest_request(void **state)
{
	struct fixture *f = *state;
	static char raw[CONTROL_MAX_REQUEST + 2], line[CONTROL_MAX_REQUEST + 1];
	char want[CONTROL_MAX_REQUEST + 16];
	struct job j[2];

	memset(raw, 'a', CONTROL_MAX_REQUEST);
	raw[CONTROL_MAX_REQUEST] = '\r';
	raw[CONTROL_MAX_REQUEST + 1] = '\n';
	j[0] = raw_job(raw, sizeof raw, false);
	memset(line, 'a', CONTROL_MAX_REQUEST);
	line[CONTROL_MAX_REQUEST] = '\0';
	j[1] = request_job(line);
	run_jobs(f, j, 2);
	snprintf(want, sizeof want, "you said: %s\n", line);
	assert_int_equal(j[0].rc, 0);
	assert_string_equal(j[0].output, want);
	assert_int_equal(j[1].rc, 0);
	assert_string_equal(j[1].output, want);
	job_clear(&j[0]);
	job_clear(&j[1]);
}

static void
test_big_answer(void **state)
{
	struct fixture *f = *state;
	struct job j = request_job("big");

	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_int_equal(j.output_len, BIG_ANSWER);
	for (size_t i = 0; i < BIG_ANSWER; i++) {
		if (j.output[i] != "0123456789abcdef"[i % 16])
			fail_msg("byte %zu differs", i);
	}
	job_clear(&j);
}

/* An answer in parts arrives whole and in order, each part made once,
 * and the answer's state is freed once. */
static void
test_answer_in_parts(void **state)
{
	struct fixture *f = *state;
	struct job j = request_job("parts");
	struct evbuffer *want = evbuffer_new();

	for (unsigned n = 0; n <= PARTS; n++)
		part_line(want, n);
	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_int_equal(j.output_len, evbuffer_get_length(want));
	assert_memory_equal(j.output, evbuffer_pullup(want, -1), j.output_len);
	assert_int_equal(f->parts, PARTS);
	assert_int_equal(f->dones, 1);
	evbuffer_free(want);
	job_clear(&j);
}

/* A client that leaves in the middle of an answer in parts: no more
 * parts are made, the answer's state is freed once, and the next client
 * is answered. */
static void
test_answer_in_parts_abandoned(void **state)
{
	struct fixture *f = *state;
	struct timeval tick = { 0, 20000 };
	struct job j = request_job("status");
	char buf[PART_LEN];
	int fd = connect_path(f->path);

	assert_int_equal(write(fd, "parts\n", 6), 6);
	/* Read a little of it, then go. */
	for (int i = 0; i < 100 && f->parts == 0; i++) {
		event_base_loopexit(f->base, &tick);
		event_base_dispatch(f->base);
	}
	assert_true(read(fd, buf, sizeof buf) > 0);
	close(fd);
	for (int i = 0; i < 100 && f->dones == 0; i++) {
		event_base_loopexit(f->base, &tick);
		event_base_dispatch(f->base);
	}
	assert_int_equal(f->dones, 1);
	assert_true(f->parts > 0 && f->parts < PARTS);
	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_string_equal(j.output, "you said: status\n");
	assert_int_equal(f->dones, 1);
	job_clear(&j);
}

/* Freeing the control in the middle of an answer in parts frees the
 * answer's state too. */
static void
test_free_in_parts(void **state)
{
	struct fixture *f = *state;
	struct timeval tick = { 0, 20000 };
	int fd = connect_path(f->path);

	assert_int_equal(write(fd, "parts\n", 6), 6);
	for (int i = 0; i < 100 && f->parts == 0; i++) {
		event_base_loopexit(f->base, &tick);
		event_base_dispatch(f->base);
	}
	assert_true(f->parts > 0 && f->parts < PARTS);
	control_free(f->ctl);
	f->ctl = NULL;
	assert_int_equal(f->dones, 1);
	close(fd);
}

static void
test_many_clients(void **state)
{
	struct fixture *f = *state;
	enum { N = 3 * CONTROL_MAX_CLIENTS };
	static char req[N][32];
	struct job j[N];
	char want[64];

	for (size_t i = 0; i < N; i++) {
		snprintf(req[i], sizeof req[i], "status %zu", i);
		j[i] = request_job(req[i]);
	}
	run_jobs(f, j, N);
	for (size_t i = 0; i < N; i++) {
		snprintf(want, sizeof want, "you said: status %zu\n", i);
		if (j[i].rc != 0)
			fail_msg("client %zu: %s", i, j[i].cause);
		assert_string_equal(j[i].output, want);
		job_clear(&j[i]);
	}
	assert_int_equal(f->calls, N);
}

/* Idle clients time out, and the one beyond the limit waits for a slot. */
static void
test_idle_clients_limit(void **state)
{
	struct fixture *f = *state;
	enum { IDLE = CONTROL_MAX_CLIENTS };
	struct job j[IDLE + 1];

	control_set_timeout(f->ctl, 300);
	/* Connect the idle ones first, from here: they queue in the backlog
	 * in this order, ahead of the client that asks for status. */
	for (size_t i = 0; i < IDLE; i++) {
		j[i] = raw_job(NULL, 0, false);
		j[i].raw_fd = connect_path(f->path);
	}
	j[IDLE] = request_job("status");
	run_jobs(f, j, IDLE + 1);
	for (size_t i = 0; i < IDLE; i++) {
		assert_int_equal(j[i].rc, 0);
		assert_int_equal(j[i].output_len, 0);
		assert_true(j[i].elapsed_ms >= 250);
		job_clear(&j[i]);
	}
	assert_int_equal(j[IDLE].rc, 0);
	assert_string_equal(j[IDLE].output, "you said: status\n");
	assert_true(j[IDLE].elapsed_ms >= 250);
	assert_int_equal(f->calls, 1);
	job_clear(&j[IDLE]);
}

/* A partial line and then silence: closed without an answer. */
static void
test_server_timeout(void **state)
{
	struct fixture *f = *state;
	struct job j = raw_job("stat", 4, false);

	control_set_timeout(f->ctl, 100);
	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_int_equal(j.output_len, 0);
	assert_true(j.elapsed_ms >= 80);
	assert_int_equal(f->calls, 0);
	job_clear(&j);
}

static void
test_socket_mode_and_free(void **state)
{
	struct fixture *f = *state;
	struct stat sb;

	assert_int_equal(stat(f->path, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0660);
	control_free(f->ctl);
	f->ctl = NULL;
	assert_int_equal(stat(f->path, &sb), -1);
	assert_int_equal(errno, ENOENT);
}

static void
test_parent_created(void **state)
{
	struct fixture *f = *state;
	char path[192], dir[160], *cause = NULL;
	struct stat sb;
	mode_t mask;

	snprintf(dir, sizeof dir, "%s/sub", f->dir);
	snprintf(path, sizeof path, "%s/ctl.sock", dir);
	mask = umask(077);      /* the mode must not depend on the umask */
	f->ctl = control_create(f->base, path, echo_cb, f, &cause);
	umask(mask);
	if (f->ctl == NULL)
		fail_msg("control_create: %s", cause);
	assert_int_equal(stat(dir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(sb.st_uid, geteuid());
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0660);
}

/* Missing levels above the socket's directory are made too, as StateDir's
 * are; one that cannot be made says which. */
static void
test_parents_created(void **state)
{
	struct fixture *f = *state;
	char path[192], dir[160], want[256], *cause = NULL;
	struct stat sb;
	FILE *fp;

	snprintf(path, sizeof path, "%s/a/b/ctl.sock", f->dir);
	f->ctl = control_create(f->base, path, echo_cb, f, &cause);
	if (f->ctl == NULL)
		fail_msg("control_create: %s", cause);
	snprintf(dir, sizeof dir, "%s/a", f->dir);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	snprintf(dir, sizeof dir, "%s/a/b", f->dir);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(stat(path, &sb), 0);

	snprintf(dir, sizeof dir, "%s/file", f->dir);
	fp = fopen(dir, "w");
	assert_non_null(fp);
	fclose(fp);
	snprintf(path, sizeof path, "%s/file/x/ctl.sock", f->dir);
	assert_null(control_create(f->base, path, echo_cb, f, &cause));
	snprintf(want, sizeof want, "checking directory %s/file/x: Not a "
	    "directory", f->dir);
	assert_string_equal(cause, want);
	free(cause);
}

static void
test_parent_not_directory(void **state)
{
	struct fixture *f = *state;
	char path[192], file[160], want[256], *cause = NULL;
	FILE *fp;

	snprintf(file, sizeof file, "%s/file", f->dir);
	fp = fopen(file, "w");
	assert_non_null(fp);
	fclose(fp);
	snprintf(path, sizeof path, "%s/ctl.sock", file);
	assert_null(control_create(f->base, path, echo_cb, f, &cause));
	snprintf(want, sizeof want, "%s is not a directory", file);
	assert_string_equal(cause, want);
	free(cause);
}

/* control_create on `sub`/ctl.sock in the fixture's directory, which must
 * fail with exactly "control socket directory DIR `why`" and leave no
 * socket behind. */
static void
refused_in(struct fixture *f, const char *sub, const char *why)
{
	char dir[160], path[192], want[512], *cause = NULL;
	struct stat sb;

	snprintf(dir, sizeof dir, "%s/%s", f->dir, sub);
	snprintf(path, sizeof path, "%s/ctl.sock", dir);
	f->ctl = control_create(f->base, path, echo_cb, f, &cause);
	assert_null(f->ctl);
	snprintf(want, sizeof want, "control socket directory %s %s", dir, why);
	assert_non_null(cause);
	assert_string_equal(cause, want);
	free(cause);
	assert_int_equal(lstat(path, &sb), -1);
}

/* A directory anyone (or the group) can write to: the socket in it could
 * be replaced under us. The mode is left as it was. */
static void
test_dir_writable(void **state)
{
	static const struct {
		mode_t mode;
		const char *want;
	} cases[] = {
		{ 0777, "is writable by others (mode 0777)" },
		{ 01777, "is writable by others (mode 1777)" },
		{ 0703, "is writable by others (mode 0703)" },
		{ 0770, "is writable by its group (mode 0770)" },
		{ 0720, "is writable by its group (mode 0720)" },
	};
	struct fixture *f = *state;
	char dir[160];
	struct stat sb;

	snprintf(dir, sizeof dir, "%s/sub", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(chmod(dir, cases[i].mode), 0);
		refused_in(f, "sub", cases[i].want);
		assert_int_equal(stat(dir, &sb), 0);
		assert_int_equal(sb.st_mode & 07777, cases[i].mode);
	}
}

/* Directories made beforehand that only we can write to are used as they
 * are: a group may be let in to ask for status. */
static void
test_dir_existing_ok(void **state)
{
	static const mode_t modes[] = { 0700, 0750, 0755, 0711, 0500 };
	struct fixture *f = *state;
	char dir[160], path[192], *cause = NULL;
	struct stat sb;

	snprintf(dir, sizeof dir, "%s/sub", f->dir);
	snprintf(path, sizeof path, "%s/ctl.sock", dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		assert_int_equal(chmod(dir, modes[i]), 0);
		f->ctl = control_create(f->base, path, echo_cb, f, &cause);
		/* 0500: ours and safe, but bind itself needs write access
		 * (which root has anyway). */
		if (modes[i] == 0500 && geteuid() != 0) {
			assert_null(f->ctl);
			free(cause);
			cause = NULL;
			continue;
		}
		if (f->ctl == NULL)
			fail_msg("mode %04o: %s", (unsigned)modes[i], cause);
		control_free(f->ctl);
		f->ctl = NULL;
		assert_int_equal(stat(dir, &sb), 0);
		assert_int_equal(sb.st_mode & 07777, modes[i]);
	}
}

/* A symbolic link to a good directory is still refused: it is never
 * followed. So is a dangling one, which mkdir must not create through. */
static void
test_dir_symlink(void **state)
{
	struct fixture *f = *state;
	char link[160], target[160];
	struct stat sb;

	snprintf(target, sizeof target, "%s/real", f->dir);
	snprintf(link, sizeof link, "%s/sub", f->dir);
	assert_int_equal(mkdir(target, 0700), 0);
	assert_int_equal(symlink(target, link), 0);
	refused_in(f, "sub", "is a symbolic link");
	snprintf(target, sizeof target, "%s/real/ctl.sock", f->dir);
	assert_int_equal(lstat(target, &sb), -1);

	snprintf(target, sizeof target, "%s/nowhere", f->dir);
	snprintf(link, sizeof link, "%s/dangling", f->dir);
	assert_int_equal(symlink(target, link), 0);
	refused_in(f, "dangling", "is a symbolic link");
	assert_int_equal(lstat(target, &sb), -1);
}

/* A socket path without a directory lives in the current one, which is
 * checked like any other. */
static void
test_dir_current(void **state)
{
	struct fixture *f = *state;
	char dir[160], *cause = NULL, *cwd;
	int ok;

	snprintf(dir, sizeof dir, "%s/sub", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	cwd = getcwd(NULL, 0);
	assert_non_null(cwd);
	assert_int_equal(chdir(dir), 0);
	f->ctl = control_create(f->base, "ctl.sock", echo_cb, f, &cause);
	ok = chdir(cwd);
	free(cwd);
	assert_int_equal(ok, 0);
	assert_null(f->ctl);
	assert_string_equal(cause,
	    "control socket directory . is writable by others (mode 0777)");
	free(cause);
}

/* Someone else's directory (as root: nobody's), whatever its mode, unless
 * it belongs to the user the program is about to become. */
static void
test_dir_other_owner(void **state)
{
	struct fixture *f = *state;
	char dir[160], path[192], *cause = NULL;
	const uid_t other = 65534;

	if (geteuid() != 0)
		skip();
	snprintf(dir, sizeof dir, "%s/sub", f->dir);
	snprintf(path, sizeof path, "%s/ctl.sock", dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chown(dir, other, other), 0);
	refused_in(f, "sub", "belongs to uid 65534, "
	    "not to this user (uid 0)");
	/* What the issue found: another user's 0777 directory. */
	assert_int_equal(chmod(dir, 0777), 0);
	refused_in(f, "sub", "belongs to uid 65534, "
	    "not to this user (uid 0)");

	/* Root that will run as uid 65534 accepts it, once safe. */
	control_allow_owner(other);
	refused_in(f, "sub", "is writable by "
	    "others (mode 0777)");
	assert_int_equal(chmod(dir, 0700), 0);
	f->ctl = control_create(f->base, path, echo_cb, f, &cause);
	if (f->ctl == NULL)
		fail_msg("control_create: %s", cause);
	control_free(f->ctl);
	f->ctl = NULL;
	assert_int_equal(chown(dir, 1, 1), 0);
	refused_in(f, "sub", "belongs to uid 1, neither to this user (uid 0) "
	    "nor to User (uid 65534)");
	control_allow_owner((uid_t)-1);
}

static void
test_stale_socket(void **state)
{
	struct fixture *f = *state;
	struct job j = request_job("status");
	char *cause = NULL;
	int fd;

	/* A socket file whose listener is gone, as after a crash. */
	fd = bind_path(f->path);
	close(fd);

	f->ctl = control_create(f->base, f->path, echo_cb, f, &cause);
	if (f->ctl == NULL)
		fail_msg("control_create: %s", cause);
	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_string_equal(j.output, "you said: status\n");
	job_clear(&j);
}

static void
test_in_use(void **state)
{
	struct fixture *f = *state;
	struct job j = request_job("status");
	char want[256], *cause = NULL;

	assert_null(control_create(f->base, f->path, echo_cb, f, &cause));
	snprintf(want, sizeof want,
	    "control socket %s is in use by another process", f->path);
	assert_string_equal(cause, want);
	free(cause);
	/* The first one still answers: nothing was removed. */
	run_jobs(f, &j, 1);
	assert_int_equal(j.rc, 0);
	assert_string_equal(j.output, "you said: status\n");
	job_clear(&j);
}

static void
test_not_socket(void **state)
{
	struct fixture *f = *state;
	char want[256], *cause = NULL;
	struct stat sb;
	FILE *fp;

	fp = fopen(f->path, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_null(control_create(f->base, f->path, echo_cb, f, &cause));
	snprintf(want, sizeof want, "%s exists and is not a socket", f->path);
	assert_string_equal(cause, want);
	free(cause);
	assert_int_equal(stat(f->path, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
}

static void
test_bad_paths(void **state)
{
	struct fixture *f = *state;
	char path[200], want[300], *cause = NULL;

	memset(path, 'p', sizeof path - 1);
	path[0] = '/';
	path[sizeof path - 1] = '\0';
	assert_null(control_create(f->base, path, echo_cb, f, &cause));
	snprintf(want, sizeof want,
	    "control socket path too long (at most 107 bytes): %s", path);
	assert_string_equal(cause, want);
	free(cause);

	assert_null(control_create(f->base, "", echo_cb, f, &cause));
	assert_string_equal(cause, "control socket path is empty");
	free(cause);

	assert_null(control_create(f->base, NULL, echo_cb, f, &cause));
	assert_string_equal(cause, "control socket path is empty");
	free(cause);

	assert_null(control_create(f->base, f->path, NULL, f, &cause));
	assert_string_equal(cause, "control socket: no event base or callback");
	free(cause);
}

static void
test_request_errors(void **state)
{
	struct fixture *f = *state;
	char want[256], *cause = NULL, *out = NULL, big[CONTROL_MAX_REQUEST + 2];
	size_t outlen;
	FILE *mem;

	mem = open_memstream(&out, &outlen);
	assert_non_null(mem);

	assert_int_equal(control_request(f->path, "status", mem, &cause), -1);
	snprintf(want, sizeof want,
	    "connecting to %s: No such file or directory", f->path);
	assert_string_equal(cause, want);
	free(cause);

	assert_int_equal(control_request(f->path, "sta\ntus", mem, &cause), -1);
	assert_string_equal(cause, "invalid request");
	free(cause);

	assert_int_equal(control_request(f->path, "", mem, &cause), -1);
	assert_string_equal(cause, "invalid request");
	free(cause);

	assert_int_equal(control_request(f->path, NULL, mem, &cause), -1);
	assert_string_equal(cause, "invalid request");
	free(cause);

	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(control_request(f->path, big, mem, &cause), -1);
	assert_string_equal(cause, "request too long (at most 256 bytes)");
	free(cause);

	assert_int_equal(control_request("", "status", mem, &cause), -1);
	assert_string_equal(cause, "control socket path is empty");
	free(cause);

	fclose(mem);
	assert_int_equal(outlen, 0);
	free(out);
}

/* A server that accepts (via the backlog) but never answers. */
static void
test_client_timeout(void **state)
{
	struct fixture *f = *state;
	char want[256], *cause = NULL, *out = NULL;
	size_t outlen;
	int64_t start;
	FILE *mem;
	int fd;

	fd = bind_path(f->path);
	assert_int_equal(listen(fd, 4), 0);

	mem = open_memstream(&out, &outlen);
	assert_non_null(mem);
	start = now_ms();
	assert_int_equal(control_request_timeout(f->path, "status", mem, 150,
	    &cause), -1);
	assert_true(now_ms() - start >= 140);
	snprintf(want, sizeof want, "reading from %s: timed out", f->path);
	assert_string_equal(cause, want);
	free(cause);
	fclose(mem);
	free(out);
	close(fd);
}

/* Freeing with connected clients releases them (ASan checks leaks). */
static void
test_free_with_clients(void **state)
{
	struct fixture *f = *state;
	struct timeval tv = { 0, 50000 };
	char buf[16];
	int fd[3];

	for (size_t i = 0; i < 3; i++)
		fd[i] = connect_path(f->path);
	event_base_loopexit(f->base, &tv);
	event_base_dispatch(f->base);
	control_free(f->ctl);
	f->ctl = NULL;
	/* Closed at once, without running the loop again. */
	for (size_t i = 0; i < 3; i++) {
		struct pollfd pfd = { .fd = fd[i], .events = POLLIN };

		assert_int_equal(poll(&pfd, 1, 2000), 1);
		assert_int_equal(read(fd[i], buf, sizeof buf), 0);
		close(fd[i]);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crlf_and_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_only_first_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_longest_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_answer_in_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_answer_in_parts_abandoned,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_in_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_clients, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_clients_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_server_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_socket_mode_and_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parent_created, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_parents_created, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_parent_not_directory, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_dir_writable, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_dir_existing_ok, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_dir_symlink, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_dir_current, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_dir_other_owner, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_stale_socket, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_in_use, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_socket, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_bad_paths, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_request_errors, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_client_timeout, setup_paths, teardown),
		cmocka_unit_test_setup_teardown(test_free_with_clients, setup, teardown),
	};

	/* The server's writes may hit a closed peer; the daemons ignore
	 * SIGPIPE too. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

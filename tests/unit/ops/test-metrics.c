/* Unit tests for common/ops/metrics.c: a scrape sent in parts is the same
 * exposition as one made at once, and a scraper that leaves early, or a
 * server freed in the middle of a scrape, leaves nothing behind (ASan). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "base/key.h"
#include "ops/metrics.h"

/* Enough peers that a scrape (about 1.5 KiB a peer) is many times what
 * the socket buffers hold: it is sent in many chunks while the scraper
 * reads, and one whose scraper does not read stays under way. */
#define NPEERS 8000

struct fixture {
	struct event_base *base;
	struct metrics *m;
	uint16_t port;
	struct status st;
	struct status_peer peers[NPEERS];
	char names[NPEERS][16];
	struct tunnel_counters counters[NPEERS], global;
	unsigned scrapes;
};

static const uint8_t pub[KEY_LEN];

static struct metrics_scrape *
scrape_cb(void *arg)
{
	struct fixture *f = arg;

	f->scrapes++;
	return metrics_scrape_new(&f->st);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	char *cause = NULL;

	assert_non_null(f);
	for (size_t i = 0; i < NPEERS; i++) {
		snprintf(f->names[i], sizeof f->names[i], "peer-%zu", i);
		f->counters[i] = (struct tunnel_counters){
			.rx_bytes = 1000 * i, .tx_packets = i,
		};
		f->counters[i].drops[i % TUNNEL_DROP_COUNT] = i;
		f->peers[i] = (struct status_peer){
			.name = f->names[i], .public_key = pub,
			.state = i % 2 ? "established" : "closed",
			.counters = &f->counters[i], .handshakes = i,
		};
	}
	f->st = (struct status){
		.role = "server", .counters = &f->global, .peers = f->peers,
		.npeers = NPEERS,
	};
	f->base = event_base_new();
	assert_non_null(f->base);
	/* A free port: bind may find one taken. */
	for (unsigned i = 0; i < 20 && f->m == NULL; i++) {
		struct sockaddr_in sin = { .sin_family = AF_INET };

		f->port = (uint16_t)(20000 + (getpid() * 7 + i * 131) % 40000);
		sin.sin_port = htons(f->port);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		f->m = metrics_create(f->base, (struct sockaddr *)&sin,
		    sizeof sin, 64, scrape_cb, f, &cause);
		free(cause);
		cause = NULL;
	}
	assert_non_null(f->m);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	metrics_free(f->m);
	event_base_free(f->base);
	free(f);
	return 0;
}

/* A scraper in a thread of its own: GET /metrics, read `limit` bytes at
 * most (0: to the end), then close; with `hold_fd`, read nothing until a
 * byte arrives there. */
struct scraper {
	uint16_t port;
	size_t limit;
	int hold_fd;
	struct evbuffer *got;
	int notify_fd;
	pthread_t thread;
};

static void *
scraper_main(void *arg)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";
	struct scraper *sc = arg;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char buf[8192];
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_port = htons(sc->port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
	    write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
		abort();
	if (sc->hold_fd > 0 && read(sc->hold_fd, buf, 1) != 1)
		abort();
	while (sc->hold_fd <= 0 && (sc->limit == 0 || evbuffer_get_length(sc->got) < sc->limit) &&
	    (n = read(fd, buf, sizeof buf)) > 0) {
		size_t len;
		struct evbuffer_ptr end;
		char tail[7];

		evbuffer_add(sc->got, buf, (size_t)n);
		/* It ends with the last chunk: the server keeps the
		 * connection open for the next request. */
		len = evbuffer_get_length(sc->got);
		if (len >= sizeof tail &&
		    evbuffer_ptr_set(sc->got, &end, len - sizeof tail,
		    EVBUFFER_PTR_SET) == 0 &&
		    evbuffer_copyout_from(sc->got, &end, tail, sizeof tail) ==
		    (ev_ssize_t)sizeof tail &&
		    memcmp(tail, "\r\n0\r\n\r\n", sizeof tail) == 0)
			break;
	}
	close(fd);
	if (write(sc->notify_fd, "x", 1) != 1)
		abort();
	return NULL;
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	char c;

	(void)what;
	if (read(fd, &c, 1) == 1)
		event_base_loopbreak(arg);
}

/* Run scrapers until they are all done (each closes when it is). */
static void
run_scrapers(struct fixture *f, struct scraper *sc, size_t n)
{
	struct event *ev;
	int p[2];

	assert_int_equal(pipe(p), 0);
	ev = event_new(f->base, p[0], EV_READ | EV_PERSIST, done_cb, f->base);
	event_add(ev, NULL);
	for (size_t i = 0; i < n; i++) {
		sc[i].port = f->port;
		sc[i].notify_fd = p[1];
		sc[i].got = evbuffer_new();
		assert_int_equal(pthread_create(&sc[i].thread, NULL,
		    scraper_main, &sc[i]), 0);
	}
	for (size_t left = n; left > 0; left--)
		event_base_dispatch(f->base);
	for (size_t i = 0; i < n; i++)
		pthread_join(sc[i].thread, NULL);
	event_free(ev);
	close(p[0]);
	close(p[1]);
}

/* Let the loop run a while (the server notices closed connections). */
static void
run_for(struct fixture *f, long ms)
{
	struct timeval tv = { 0, ms * 1000 };

	event_base_loopexit(f->base, &tv);
	event_base_dispatch(f->base);
}

/* The body of a chunked HTTP response, or NULL if it is not one. */
static char *
unchunk(struct evbuffer *resp, size_t *len)
{
	struct evbuffer *body = evbuffer_new();
	struct evbuffer_ptr p = evbuffer_search(resp, "\r\n\r\n", 4, NULL);
	char *line, *out;

	if (p.pos == -1)
		return NULL;
	evbuffer_drain(resp, (size_t)p.pos + 4);
	while ((line = evbuffer_readln(resp, NULL, EVBUFFER_EOL_CRLF)) != NULL) {
		size_t n = strtoul(line, NULL, 16);

		free(line);
		if (n == 0)
			break;
		if (evbuffer_remove_buffer(resp, body, n) != (int)n)
			return NULL;
		free(evbuffer_readln(resp, NULL, EVBUFFER_EOL_CRLF));
	}
	*len = evbuffer_get_length(body);
	out = malloc(*len + 1);
	evbuffer_remove(body, out, *len);
	out[*len] = '\0';
	evbuffer_free(body);
	return out;
}

/* What a scrape over HTTP, in many chunks, receives is what
 * metrics_render makes at once; and so for the next scrape. */
static void
test_scrape_in_chunks(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *want = evbuffer_new();
	struct scraper sc[2] = { { .limit = 0 }, { .limit = 0 } };

	metrics_render(want, &f->st);
	assert_true(evbuffer_get_length(want) > 4 * 1024 * 1024);
	for (size_t i = 0; i < 2; i++) {
		size_t len = 0;
		char *body;

		run_scrapers(f, &sc[i], 1);
		assert_non_null(evbuffer_pullup(sc[i].got, 17));
		assert_memory_equal(evbuffer_pullup(sc[i].got, 17),
		    "HTTP/1.1 200 OK\r\n", 17);
		body = unchunk(sc[i].got, &len);
		assert_non_null(body);
		/* The HTTP server's own figures come after the head: not
		 * in metrics_render's. */
		{
			char *from = strstr(body, "# HELP rove_metrics_");
			char *to = strstr(body, "# HELP rove_peer_");

			assert_non_null(from);
			assert_non_null(to);
			assert_true(from < to);
			memmove(from, to, strlen(to) + 1);
		}
		/* process_* figures differ from one moment to the next. */
		{
			const char *tail = strstr(body, "# HELP process_");
			const char *w = (const char *)evbuffer_pullup(want, -1);
			const char *wtail = strstr(w, "# HELP process_");

			assert_non_null(tail);
			assert_non_null(wtail);
			assert_int_equal(tail - body, wtail - w);
			assert_memory_equal(body, w, (size_t)(tail - body));
		}
		free(body);
		evbuffer_free(sc[i].got);
	}
	assert_int_equal(f->scrapes, 2);
	evbuffer_free(want);
}

/* A scraper that leaves after 64 KiB: the scrape is dropped (ASan checks
 * that nothing is left), and the next one is served whole. */
static void
test_scraper_leaves(void **state)
{
	struct fixture *f = *state;
	struct scraper early = { .limit = 65536 }, whole = { .limit = 0 };
	size_t len = 0;
	char *body;

	run_scrapers(f, &early, 1);
	assert_true(evbuffer_get_length(early.got) >= 65536);
	evbuffer_free(early.got);
	run_for(f, 200);
	run_scrapers(f, &whole, 1);
	body = unchunk(whole.got, &len);
	assert_non_null(body);
	assert_non_null(strstr(body, "rove_peer_forwards_total"));
	assert_non_null(strstr(body, "process_open_fds"));
	free(body);
	evbuffer_free(whole.got);
	assert_int_equal(f->scrapes, 2);
}

/* At most METRICS_MAX_SCRAPES (4) scrapes are sent at once: a fifth
 * scraper gets 503 while four stall; once they leave, scrapes are served
 * again. */
static void
test_scrapes_at_once(void **state)
{
	struct fixture *f = *state;
	struct scraper held[4], fifth = { .limit = 12 }, after = { .limit = 0 };
	struct event *ev;
	size_t len = 0;
	char *body;
	int release[2], done[2];

	assert_int_equal(pipe(release), 0);
	assert_int_equal(pipe(done), 0);
	ev = event_new(f->base, done[0], EV_READ | EV_PERSIST, done_cb, f->base);
	event_add(ev, NULL);
	for (size_t i = 0; i < 4; i++) {
		held[i] = (struct scraper){ .port = f->port, .hold_fd = release[0],
		    .notify_fd = done[1], .got = evbuffer_new() };
		assert_int_equal(pthread_create(&held[i].thread, NULL,
		    scraper_main, &held[i]), 0);
	}
	for (int i = 0; i < 200 && f->scrapes < 4; i++)
		run_for(f, 10);
	assert_int_equal(f->scrapes, 4);
	run_for(f, 100);
	run_scrapers(f, &fifth, 1);
	assert_memory_equal(evbuffer_pullup(fifth.got, 12), "HTTP/1.1 503", 12);
	assert_int_equal(f->scrapes, 4);
	assert_int_equal(write(release[1], "xxxx", 4), 4);
	for (size_t left = 4; left > 0; left--)
		event_base_dispatch(f->base);
	for (size_t i = 0; i < 4; i++) {
		pthread_join(held[i].thread, NULL);
		evbuffer_free(held[i].got);
	}
	run_for(f, 200);
	run_scrapers(f, &after, 1);
	body = unchunk(after.got, &len);
	assert_non_null(body);
	assert_non_null(strstr(body, "process_open_fds"));
	assert_int_equal(f->scrapes, 5);
	free(body);
	evbuffer_free(fifth.got);
	evbuffer_free(after.got);
	event_free(ev);
	close(release[0]);
	close(release[1]);
	close(done[0]);
	close(done[1]);
}

/* metrics_free while a scrape is being sent frees it. */
static void
test_free_while_sending(void **state)
{
	struct fixture *f = *state;
	struct scraper sc = { .limit = 0 };
	struct event *ev;
	int p[2];

	/* The scraper reads to the end, which never comes. */
	assert_int_equal(pipe(p), 0);
	sc.port = f->port;
	sc.notify_fd = p[1];
	sc.got = evbuffer_new();
	ev = event_new(f->base, p[0], EV_READ | EV_PERSIST, done_cb, f->base);
	event_add(ev, NULL);
	assert_int_equal(pthread_create(&sc.thread, NULL, scraper_main, &sc), 0);
	for (int i = 0; i < 100 && f->scrapes == 0; i++)
		run_for(f, 10);
	assert_int_equal(f->scrapes, 1);
	metrics_free(f->m);
	f->m = NULL;
	pthread_join(sc.thread, NULL);
	/* It got part of the exposition, not its end. */
	assert_true(evbuffer_get_length(sc.got) > 0);
	assert_int_equal(evbuffer_search(sc.got, "\r\n0\r\n\r\n", 7, NULL).pos, -1);
	evbuffer_free(sc.got);
	event_free(ev);
	close(p[0]);
	close(p[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_scrape_in_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scraper_leaves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scrapes_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_while_sending, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

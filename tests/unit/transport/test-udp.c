/* Unit tests for common/transport/udp.c over 127.0.0.1: batched receive (recvmmsg),
 * and the send batch's grouping into GSO runs as the receiver sees it
 * through GRO. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "transport/udp.h"

/* Big: a receive batch is half a megabyte. */
static struct udp_recv rs[UDP_RECV_BATCH];

struct pair {
	struct udp_socket rx, tx;
};

static void
pair_open(struct pair *p)
{
	struct sockaddr_in lo = { .sin_family = AF_INET };
	char *cause = NULL;

	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(udp_open(&p->rx, AF_INET, (struct sockaddr *)&lo,
	    sizeof lo, &cause), 0);
	assert_int_equal(udp_open(&p->tx, AF_INET, (struct sockaddr *)&lo,
	    sizeof lo, &cause), 0);
}

static void
pair_close(struct pair *p)
{
	udp_close(&p->rx);
	udp_close(&p->tx);
}

/* Waits until the receiver has something. */
static void
wait_readable(struct pair *p)
{
	struct pollfd pfd = { .fd = p->rx.fd, .events = POLLIN };

	assert_int_equal(poll(&pfd, 1, 2000), 1);
}

static void
fill(uint8_t *buf, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i);
}

/* Separate datagrams of different sizes: one call returns each as its
 * own receive, in order, with the sender's address; fewer than asked for
 * means the socket is empty, and the next call says EAGAIN. */
static void
test_recv_many(void **state)
{
	static const size_t sizes[] = { 100, 1200, 7, 1472, 300 };
	struct pair p;
	uint8_t buf[1500];

	(void)state;
	pair_open(&p);
	for (size_t i = 0; i < 5; i++) {
		fill(buf, sizes[i], (uint8_t)i);
		assert_int_equal(sendto(p.tx.fd, buf, sizes[i], 0,
		    (struct sockaddr *)&p.rx.local, p.rx.locallen), (ssize_t)sizes[i]);
	}
	wait_readable(&p);
	assert_int_equal(udp_recv_many(&p.rx, rs, UDP_RECV_BATCH), 5);
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(rs[i].len, sizes[i]);
		assert_int_equal(rs[i].segsize, sizes[i]);
		assert_int_equal(rs[i].ecn, 0);
		fill(buf, sizes[i], (uint8_t)i);
		assert_memory_equal(rs[i].buf, buf, sizes[i]);
		assert_int_equal(rs[i].peerlen, p.tx.locallen);
		assert_memory_equal(&rs[i].peer, &p.tx.local, p.tx.locallen);
	}
	assert_int_equal(udp_recv_many(&p.rx, rs, UDP_RECV_BATCH), 0);
	pair_close(&p);
}

/* More waiting than one batch holds: a full batch, then the rest; and a
 * request beyond UDP_RECV_BATCH is clamped to it. */
static void
test_recv_many_full(void **state)
{
	struct pair p;
	uint8_t buf[64];

	(void)state;
	pair_open(&p);
	for (int i = 0; i < UDP_RECV_BATCH + 3; i++) {
		fill(buf, sizeof buf, (uint8_t)i);
		assert_int_equal(sendto(p.tx.fd, buf, (size_t)(10 + i), 0,
		    (struct sockaddr *)&p.rx.local, p.rx.locallen), 10 + i);
	}
	wait_readable(&p);
	assert_int_equal(udp_recv_many(&p.rx, rs, 1000), UDP_RECV_BATCH);
	for (int i = 0; i < UDP_RECV_BATCH; i++)
		assert_int_equal(rs[i].len, 10 + i);
	assert_int_equal(udp_recv_many(&p.rx, rs, UDP_RECV_BATCH), 3);
	assert_int_equal(rs[2].len, 10 + UDP_RECV_BATCH + 2);
	assert_int_equal(udp_recv(&p.rx, &rs[0]), 0);
	pair_close(&p);
}

/* The batch sends runs of equal-sized packets as one GSO super-packet,
 * and loopback hands a GRO socket each run whole: 4 x 1000 + 600 (a
 * shorter packet ends a run), then 2 x 1200 (a larger one starts a new
 * run), then 300 with ECN ECT(0) (another codepoint: a run of its own). */
static void
test_batch_runs(void **state)
{
	static const size_t lens[] = { 1000, 1000, 1000, 1000, 600, 1200, 1200, 300 };
	struct udp_batch *b = malloc(sizeof *b);
	struct pair p;
	uint8_t *slot;
	int got;

	(void)state;
	assert_non_null(b);
	pair_open(&p);
	if (!p.tx.gso) {
		pair_close(&p);
		free(b);
		skip();
	}
	udp_batch_init(b, &p.tx);
	for (size_t i = 0; i < 8; i++) {
		slot = udp_batch_slot(b);
		fill(slot, lens[i], (uint8_t)i);
		udp_batch_commit(b, lens[i], (struct sockaddr *)&p.rx.local,
		    p.rx.locallen, i == 7 ? 2 : 0);
	}
	udp_batch_flush(b);
	assert_int_equal(b->n, 0);
	assert_int_equal(b->sent_packets, 8);
	assert_int_equal(b->send_errors, 0);
	wait_readable(&p);
	/* Three sends; they may not all be queued at the first wake-up. */
	got = 0;
	for (int tries = 0; got < 3 && tries < 100; tries++) {
		int n = udp_recv_many(&p.rx, rs + got, (size_t)(3 - got));
		assert_true(n >= 0);
		got += n;
		if (got < 3)
			usleep(10000);
	}
	assert_int_equal(got, 3);
	assert_int_equal(rs[0].len, 4600);
	assert_int_equal(rs[0].segsize, 1000);
	assert_int_equal(rs[1].len, 2400);
	assert_int_equal(rs[1].segsize, 1200);
	assert_int_equal(rs[2].len, 300);
	assert_int_equal(rs[2].ecn, 2);
	/* Every packet's bytes arrive where its segment says. */
	{
		uint8_t want[1200];
		size_t off = 0;
		for (size_t i = 0; i < 5; i++) {
			fill(want, lens[i], (uint8_t)i);
			assert_memory_equal(rs[0].buf + off, want, lens[i]);
			off += lens[i];
		}
		fill(want, 1200, 6);
		assert_memory_equal(rs[1].buf + 1200, want, 1200);
	}
	pair_close(&p);
	free(b);
}

/* Which of the 2n sockets of a worker group `dgram` arrives on: 2w for
 * worker w's est socket, 2w + 1 for its hs socket. */
static int
steered_to(struct udp_socket *est, struct udp_socket *hs, size_t n,
    struct udp_socket *tx, const uint8_t *dgram, size_t len)
{
	struct pollfd pfd[8];
	uint8_t buf[64];
	int at = -1;

	assert_true(n <= 4);
	assert_int_equal(sendto(tx->fd, dgram, len, 0,
	    (const struct sockaddr *)&est[0].local, est[0].locallen), (ssize_t)len);
	for (size_t w = 0; w < n; w++) {
		pfd[2 * w] = (struct pollfd){ .fd = est[w].fd, .events = POLLIN };
		pfd[2 * w + 1] = (struct pollfd){ .fd = hs[w].fd, .events = POLLIN };
	}
	assert_int_equal(poll(pfd, (nfds_t)(2 * n), 2000), 1);
	for (size_t i = 0; i < 2 * n; i++) {
		if (pfd[i].revents & POLLIN) {
			at = (int)i;
			assert_int_equal(recv(pfd[i].fd, buf, sizeof buf, 0),
			    (ssize_t)len);
		}
	}
	return at;
}

/* The kernel runs the group's program on each datagram: our CIDs go to
 * the worker their worker octet names (short headers to its est socket,
 * long ones to its hs socket), a client's own CID by its last octet. */
static void
test_workers_steering(void **state)
{
	struct sockaddr_in lo = { .sin_family = AF_INET };
	struct udp_socket est[3], hs[3], tx;
	const uint8_t F = 0xef; /* config 7, length 15: no ServerID */
	uint8_t d[40];
	char *cause = NULL;

	(void)state;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(udp_open_workers(est, hs, 3, AF_INET,
	    (struct sockaddr *)&lo, sizeof lo, F, 1, &cause), 0);
	assert_int_equal(udp_open(&tx, AF_INET, (struct sockaddr *)&lo,
	    sizeof lo, &cause), 0);

	/* Short header: 0x40, then the DCID: F, worker, nonce. */
	memset(d, 0x55, sizeof d);
	d[0] = 0x40;
	d[1] = F;
	for (uint8_t w = 0; w < 3; w++) {
		d[2] = w;
		assert_int_equal(steered_to(est, hs, 3, &tx, d, sizeof d), 2 * w);
	}
	d[2] = 3;       /* no such worker */
	assert_int_equal(steered_to(est, hs, 3, &tx, d, sizeof d), 0);
	d[1] = 0x0f;    /* not one of ours */
	d[2] = 2;
	assert_int_equal(steered_to(est, hs, 3, &tx, d, sizeof d), 0);

	/* Long header with our CID: 0xc0, version, length 16, F, worker. */
	memset(d, 0x55, sizeof d);
	d[0] = 0xe0;
	d[5] = 16;
	d[6] = F;
	d[7] = 2;
	assert_int_equal(steered_to(est, hs, 3, &tx, d, sizeof d), 5);
	/* A client's own 8-octet CID: its last octet (d[13]) modulo 3. */
	d[0] = 0xc0;
	d[5] = 8;
	d[6] = 0x12;
	d[13] = 7;
	assert_int_equal(steered_to(est, hs, 3, &tx, d, sizeof d), 2 * 1 + 1);
	d[13] = 9;
	assert_int_equal(steered_to(est, hs, 3, &tx, d, sizeof d), 1);
	/* Too short to read: worker 0. */
	assert_int_equal(steered_to(est, hs, 3, &tx, d, 1), 0);
	for (size_t w = 0; w < 3; w++) {
		udp_close(&est[w]);
		udp_close(&hs[w]);
	}
	udp_close(&tx);
}

/* A port another program holds is refused, not joined: a second server
 * with SO_REUSEPORT would otherwise share the first one's datagrams. */
static void
test_port_held(void **state)
{
	struct sockaddr_in lo = { .sin_family = AF_INET };
	struct udp_socket est[2], hs[2], est2, hs2, plain;
	char *cause = NULL;

	(void)state;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(udp_open_split(&est[0], &hs[0], AF_INET,
	    (struct sockaddr *)&lo, sizeof lo, &cause), 0);
	lo.sin_port = ((struct sockaddr_in *)&est[0].local)->sin_port;
	/* A second split group, a worker group: refused, with a reason. */
	assert_int_equal(udp_open_split(&est2, &hs2, AF_INET,
	    (struct sockaddr *)&lo, sizeof lo, &cause), -1);
	assert_non_null(strstr(cause, "already in use by another program"));
	free(cause);
	cause = NULL;
	assert_int_equal(udp_open_workers(est + 1, hs + 1, 1, AF_INET,
	    (struct sockaddr *)&lo, sizeof lo, 0xef, 1, &cause), -1);
	assert_non_null(strstr(cause, "already in use by another program"));
	free(cause);
	cause = NULL;
	udp_close(&est[0]);
	udp_close(&hs[0]);
	/* Free again: the group can be made anew. */
	assert_int_equal(udp_open_split(&est2, &hs2, AF_INET,
	    (struct sockaddr *)&lo, sizeof lo, &cause), 0);
	udp_close(&est2);
	udp_close(&hs2);
	/* And a plain holder is seen as well. */
	assert_int_equal(udp_open(&plain, AF_INET, (struct sockaddr *)&lo,
	    sizeof lo, &cause), 0);
	assert_int_equal(udp_open_split(&est2, &hs2, AF_INET,
	    (struct sockaddr *)&lo, sizeof lo, &cause), -1);
	free(cause);
	udp_close(&plain);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recv_many),
		cmocka_unit_test(test_recv_many_full),
		cmocka_unit_test(test_batch_runs),
		cmocka_unit_test(test_workers_steering),
		cmocka_unit_test(test_port_held),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

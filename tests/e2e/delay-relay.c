/* delay-relay: holds every packet between two TUN devices for a fixed time,
 * and optionally loses some at random, which gives the roaming and lossy
 * tests and the benchmark a wide-area path.
 *
 * usage: delay-relay [-l PERCENT] [-s SEED] [-q SLOTS] [-t SECONDS]
 *                    TUN_A TUN_B DELAY_MS
 *
 * Creates TUN_A and TUN_B (IFF_TUN, no packet information) and brings both
 * up. Whatever the kernel routes into TUN_A comes out of TUN_B DELAY_MS
 * later, as if received there, and the other way round; the kernel then
 * forwards it on by its routing tables. Policy routing in the namespace
 * decides which packets take the detour (tests/e2e/roam-lib.sh).
 *
 * Prints "ready TUN_A TUN_B" on stdout once both devices are up. Each
 * direction queues at most SLOTS packets (default 8192); more are dropped
 * and counted, as a router would. Exits 0 on SIGTERM, SIGINT or after
 * SECONDS (default 3600), printing its counters on stderr.
 *
 * -l PERCENT drops each packet with that probability (a decimal from 0 to
 * 100, such as 1 or 0.5), decided independently per packet and applied to
 * each direction on its own; these losses are counted apart from the
 * queue-full drops. The decisions come from a PRNG seeded with SEED (an
 * unsigned 64-bit decimal), or from the clock and PID without -s; the
 * seed in use is printed on stderr, so a run can be repeated. Each
 * direction draws from its own stream, so the fate of its Nth packet
 * depends only on the seed, not on how the two directions interleave.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOT_SIZE 2048    /* above the 1500-byte MTU of the test links */
#define READ_BURST 64     /* packets per device per loop, so neither starves */
#define LOSS_BITS 53      /* resolution of the loss draw: a double's mantissa */

/* One direction: a FIFO of packets; with one fixed delay, arrival order
 * is also the order in which they fall due. */
struct queue {
	const char *name;
	int in, out;
	uint8_t *buf;
	uint16_t *len;
	uint64_t *due;
	size_t slots, head, count;
	uint64_t rng;        /* splitmix64 state of this direction */
	uint64_t loss_below; /* drop when a LOSS_BITS-bit draw is below this */
	uint64_t forwarded, dropped, lost, write_errors;
};

static volatile sig_atomic_t stopping;

static void
on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64 (Steele, Lea, Flood): every seed, 0 included, gives a
 * well-mixed stream, and the state is a single word. */
static uint64_t
splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static void
usage(void)
{
	fprintf(stderr, "usage: delay-relay [-l PERCENT] [-s SEED] [-q SLOTS] "
	    "[-t SECONDS] TUN_A TUN_B DELAY_MS\n");
	exit(2);
}

/* A number in [min, max], or exit with a message. */
static unsigned long
number(const char *s, unsigned long min, unsigned long max, const char *what)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min ||
	    v > max) {
		fprintf(stderr, "delay-relay: %s must be %lu to %lu: %s\n", what, min,
		    max, s);
		exit(2);
	}
	return v;
}

/* A percentage from 0 to 100 in plain decimal notation, or exit with a
 * message. The digits are checked first because strtod also takes
 * "inf", "nan", hex and exponents, none of which belong on this command
 * line. */
static double
percent(const char *s)
{
	size_t digits = 0, dots = 0, others = 0;
	double v;
	char *end;

	for (const char *p = s; *p != '\0'; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.')
			dots++;
		else
			others++;
	}
	errno = 0;
	v = strtod(s, &end);
	if (digits == 0 || dots > 1 || others > 0 || errno != 0 || *end != '\0' ||
	    v > 100.0) {
		fprintf(stderr, "delay-relay: PERCENT must be a decimal from 0 to "
		    "100: %s\n", s);
		exit(2);
	}
	return v;
}

/* Create the TUN device `name` and bring it up; returns its fd. */
static int
tun_create(const char *name)
{
	struct ifreq ifr;
	int fd, s;

	if (strlen(name) >= IFNAMSIZ) {
		fprintf(stderr, "delay-relay: interface name too long: %s\n", name);
		exit(1);
	}
	if ((fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)) == -1) {
		fprintf(stderr, "delay-relay: /dev/net/tun: %s\n", strerror(errno));
		exit(1);
	}
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		fprintf(stderr, "delay-relay: TUNSETIFF %s: %s\n", name, strerror(errno));
		exit(1);
	}
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1 ||
	    ioctl(s, SIOCGIFFLAGS, &ifr) == -1) {
		fprintf(stderr, "delay-relay: %s flags: %s\n", name, strerror(errno));
		exit(1);
	}
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1) {
		fprintf(stderr, "delay-relay: %s up: %s\n", name, strerror(errno));
		exit(1);
	}
	close(s);
	return fd;
}

static void
queue_init(struct queue *q, const char *name, int in, int out, size_t slots)
{
	memset(q, 0, sizeof *q);
	q->name = name;
	q->in = in;
	q->out = out;
	q->slots = slots;
	q->buf = malloc(slots * SLOT_SIZE);
	q->len = calloc(slots, sizeof *q->len);
	q->due = calloc(slots, sizeof *q->due);
	if (q->buf == NULL || q->len == NULL || q->due == NULL) {
		fprintf(stderr, "delay-relay: out of memory\n");
		exit(1);
	}
}

static void
queue_clear(struct queue *q)
{
	free(q->buf);
	free(q->len);
	free(q->due);
}

/* Take what the kernel routed into q->in, stamped with its due time. */
static void
queue_read(struct queue *q, uint64_t due)
{
	static uint8_t spill[65536];

	for (int i = 0; i < READ_BURST; i++) {
		size_t tail = (q->head + q->count) % q->slots;
		bool full = q->count == q->slots;
		uint8_t *dst = full ? spill : q->buf + tail * SLOT_SIZE;
		size_t room = full ? sizeof spill : SLOT_SIZE;
		ssize_t n = read(q->in, dst, room);

		if (n < 0)
			break;   /* EAGAIN: drained; anything else: try later */
		if (n == 0 || (size_t)n > SLOT_SIZE) {
			q->dropped++;
			continue;
		}
		/* Drawn for every packet, before the queue-full check, so that
		 * a full queue does not shift the sequence of decisions. */
		if ((splitmix64(&q->rng) >> (64 - LOSS_BITS)) < q->loss_below) {
			q->lost++;
			continue;
		}
		if (full) {
			q->dropped++;
			continue;
		}
		q->len[tail] = (uint16_t)n;
		q->due[tail] = due;
		q->count++;
	}
}

/* Write every packet that has served its time into q->out. */
static void
queue_flush(struct queue *q, uint64_t now)
{
	while (q->count > 0 && q->due[q->head] <= now) {
		if (write(q->out, q->buf + q->head * SLOT_SIZE, q->len[q->head]) ==
		    (ssize_t)q->len[q->head])
			q->forwarded++;
		else
			q->write_errors++;
		q->head = (q->head + 1) % q->slots;
		q->count--;
	}
}

int
main(int argc, char **argv)
{
	struct queue q[2];
	struct sigaction sa;
	sigset_t block, orig;
	unsigned long slots = 8192, max_s = 3600, delay_ms;
	uint64_t delay, deadline, seed = 0, loss_below;
	double loss = 0.0;
	const char *loss_arg = "0";
	bool seeded = false;
	int fa, fb, ch;

	while ((ch = getopt(argc, argv, "l:q:s:t:")) != -1) {
		switch (ch) {
		case 'l':
			loss = percent(optarg);
			loss_arg = optarg;
			break;
		case 's':
			seed = number(optarg, 0, ULONG_MAX, "SEED");
			seeded = true;
			break;
		case 'q':
			slots = number(optarg, 1, 1u << 20, "SLOTS");
			break;
		case 't':
			max_s = number(optarg, 1, 86400, "SECONDS");
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 3)
		usage();
	delay_ms = number(argv[2], 0, 10000, "DELAY_MS");
	delay = (uint64_t)delay_ms * 1000000u;
	/* 100% maps to 2^LOSS_BITS, above every draw, so all packets go. */
	loss_below = (uint64_t)(loss / 100.0 * (double)(UINT64_C(1) << LOSS_BITS));
	if (!seeded)
		seed = now_ns() ^ ((uint64_t)getpid() << 32);

	/* Signals stay blocked except inside ppoll, so none is missed
	 * between the check of `stopping` and the wait. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &orig);

	fa = tun_create(argv[0]);
	fb = tun_create(argv[1]);
	queue_init(&q[0], "a->b", fa, fb, slots);
	queue_init(&q[1], "b->a", fb, fa, slots);
	/* Two states taken from one seeding stream give the directions
	 * separate sequences. */
	{
		uint64_t g = seed;

		for (int i = 0; i < 2; i++) {
			q[i].rng = splitmix64(&g);
			q[i].loss_below = loss_below;
		}
	}
	fprintf(stderr, "delay-relay: delay %lu ms, loss %s%% per direction, "
	    "seed %llu\n", delay_ms, loss_arg, (unsigned long long)seed);
	printf("ready %s %s\n", argv[0], argv[1]);
	fflush(stdout);

	deadline = now_ns() + (uint64_t)max_s * 1000000000u;
	while (!stopping) {
		struct pollfd pfd[2] = { { fa, POLLIN, 0 }, { fb, POLLIN, 0 } };
		struct timespec ts;
		uint64_t now = now_ns(), next = deadline;

		if (now >= deadline)
			break;
		for (int i = 0; i < 2; i++) {
			queue_flush(&q[i], now);
			if (q[i].count > 0 && q[i].due[q[i].head] < next)
				next = q[i].due[q[i].head];
		}
		ts.tv_sec = (time_t)((next - now) / 1000000000u);
		ts.tv_nsec = (long)((next - now) % 1000000000u);
		if (ppoll(pfd, 2, &ts, &orig) == -1) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "delay-relay: poll: %s\n", strerror(errno));
			break;
		}
		now = now_ns();
		for (int i = 0; i < 2; i++) {
			if (pfd[i].revents & POLLIN)
				queue_read(&q[i], now + delay);
		}
	}
	for (int i = 0; i < 2; i++) {
		fprintf(stderr, "delay-relay: %s: %llu forwarded, %llu lost, "
		    "%llu dropped, %llu write errors, %zu still queued\n", q[i].name,
		    (unsigned long long)q[i].forwarded, (unsigned long long)q[i].lost,
		    (unsigned long long)q[i].dropped,
		    (unsigned long long)q[i].write_errors, q[i].count);
		queue_clear(&q[i]);
	}
	close(fa);
	close(fb);
	return 0;
}

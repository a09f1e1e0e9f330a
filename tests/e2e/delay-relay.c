/* delay-relay: holds every packet between two TUN devices for a fixed time,
 * optionally loses some, at random or in bursts, and optionally limits the
 * rate, which gives the roaming and lossy tests and the benchmark a
 * wide-area path.
 *
 * usage: delay-relay [-l PERCENT [-b MEAN_BURST]] [-r MBIT [-Q BYTES]]
 *                    [-s SEED] [-q SLOTS] [-t SECONDS] TUN_A TUN_B DELAY_MS
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
 *
 * -b MEAN_BURST (a decimal of at least 1, with -l) makes those losses come
 * in bursts, as on a radio link or a congested path, rather than one by
 * one: the simple Gilbert model (Gilbert-Elliott with no loss in the Good
 * state and every packet lost in the Bad state), a two-state Markov chain
 * stepped once per packet of the direction, each direction with its own.
 * A packet is lost when its state is Bad; then the chain moves on, from
 * Good to Bad with probability p and from Bad to Good with probability r.
 * A burst (a run of Bad) is then geometric, P(length k) = (1-r)^(k-1) r,
 * with mean 1/r, and in the long run a fraction p/(p+r) of the packets
 * is lost, so with L = PERCENT/100 and B = MEAN_BURST:
 *	r = 1/B,  p = L r / (1 - L) = L / (B (1 - L))
 * which needs p <= 1, i.e. L <= B/(B+1) (B = 1: at most 50%). The gaps
 * between bursts are geometric with mean 1/p. The first state is drawn
 * from the stationary distribution (Bad with probability L), so the rate
 * holds from the first packet. The chain draws from the direction's seeded
 * stream, one draw per packet, in place of the independent draw.
 *
 * -r MBIT (a decimal from 0.001 to 100000, such as 50 or 0.5, taken to the
 * nearest kbit/s) makes each direction a bottleneck link of that rate: a
 * token bucket filling at MBIT Mbit/s and holding at most BURST_BYTES (32 KiB, the burst of bench/wan.sh's
 * tc tbf), so that after a pause that much passes at once, behind a FIFO
 * that tail-drops every packet that would take it over -Q BYTES. BYTES
 * defaults to the rate times the round trip 2 * DELAY_MS, the one
 * bandwidth-delay product that routers are traditionally sized to, but at
 * least 64 packets of 1500 bytes (as wan.sh's tbf). The relay's own queue
 * (SLOTS) holds both the bottleneck's queue and the packets past it still
 * being delayed, so high rates with long delays may need a larger -q.
 *
 * The bottleneck comes before the delay, as on a real path, where a router
 * queues a packet, sends it at the link's rate and then it propagates. For
 * a fixed delay the order changes no departure time (a FIFO is
 * time-invariant, so a constant delay commutes with it), but this order
 * keeps one FIFO per direction whose due times only grow: each packet's
 * departure from the bottleneck is computed exactly, in integer
 * arithmetic, when it arrives, and it falls due DELAY_MS after that, so
 * the loop's one timer serves the rate limit too, and a late wakeup delays
 * packets without costing the link any of its rate. Losses (-l, -b) are
 * decided first and take neither room nor tokens, as if lost before the
 * bottleneck; that keeps the loss draws independent of the queue.
 *
 * The final counters of each direction: packets forwarded, lost at random
 * (-l alone), lost in bursts (-b; and how many bursts, so that lost /
 * bursts is the mean length seen), dropped by the rate limit's queue (-r),
 * dropped for a full relay queue (SLOTS) or a bad length, write errors and
 * still queued. Every packet read lands in exactly one of them.
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
#define BURST_BYTES 32768 /* the rate limit's token bucket (-r) */
#define MIN_LIMIT 96000   /* the least default -Q: 64 packets of 1500 bytes */

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
	/* The Gilbert chain (-b): Good to Bad when a draw is below p_below,
	 * Bad to Good when below r_below. */
	bool gilbert, bad, prev_bad;
	uint64_t p_below, r_below;
	/* The bottleneck (-r), in micro-bits, so that a rate in kbit/s adds
	 * exactly rate_kbit of them per nanosecond: tokens is the bucket at
	 * time tb_time, which is the last departure and may lie ahead. The
	 * first `sent` packets of the FIFO have left the bottleneck (their due
	 * time less the delay has passed); the rest, `backlog` bytes, wait in
	 * its queue. */
	uint64_t rate_kbit, limit, tokens, tb_time, backlog, delay;
	size_t sent;
	uint64_t forwarded, dropped, lost, burst_lost, bursts, rate_dropped,
	    write_errors;
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
	fprintf(stderr, "usage: delay-relay [-l PERCENT [-b MEAN_BURST]] "
	    "[-r MBIT [-Q BYTES]]\n"
	    "                   [-s SEED] [-q SLOTS] [-t SECONDS] "
	    "TUN_A TUN_B DELAY_MS\n");
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

/* A number in [min, max] in plain decimal notation, or exit with a
 * message. The digits are checked first because strtod also takes
 * "inf", "nan", hex and exponents, none of which belong on this command
 * line. */
static double
decimal(const char *s, double min, double max, const char *what)
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
	    v < min || v > max) {
		fprintf(stderr, "delay-relay: %s must be a decimal from %g to %g: "
		    "%s\n", what, min, max, s);
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

/* Whether the packet the Gilbert chain is at now is lost (its state is
 * Bad), stepping the chain on to the next packet with the draw u. */
static bool
gilbert_lost(struct queue *q, uint64_t u)
{
	bool bad = q->bad;

	q->bad = bad ? u >= q->r_below : u < q->p_below;
	if (bad) {
		q->burst_lost++;
		if (!q->prev_bad)
			q->bursts++;
	}
	q->prev_bad = bad;
	return bad;
}

/* Count out of the bottleneck's queue the packets that have left it by
 * `now`: those whose due time, less the delay, has passed. */
static void
bottleneck_advance(struct queue *q, uint64_t now)
{
	while (q->sent < q->count) {
		size_t i = (q->head + q->sent) % q->slots;

		if (q->due[i] - q->delay > now)
			break;
		q->backlog -= q->len[i];
		q->sent++;
	}
}

/* When a packet of n bytes arriving at `now` leaves the bottleneck, with
 * *tokens what the bucket then holds; UINT64_MAX if the queue has no room
 * for it. Nothing changes until the caller commits, since the relay's own
 * queue may still turn the packet away. */
static uint64_t
bottleneck_depart(const struct queue *q, size_t n, uint64_t now,
    uint64_t *tokens)
{
	const uint64_t full = (uint64_t)BURST_BYTES * 8000000u;
	uint64_t start = now > q->tb_time ? now : q->tb_time;
	uint64_t have = q->tokens, need = (uint64_t)n * 8000000u, wait;

	if (q->backlog + n > q->limit)
		return UINT64_MAX;
	/* Past the time that fills the bucket, the product would only risk
	 * overflowing. */
	if (start - q->tb_time > (full - have) / q->rate_kbit)
		have = full;
	else
		have += (start - q->tb_time) * q->rate_kbit;
	if (have >= need) {
		*tokens = have - need;
		return start;
	}
	/* Rounded up to the next nanosecond; the bucket keeps the excess, so
	 * the rounding does not add up over packets. */
	wait = (need - have + q->rate_kbit - 1) / q->rate_kbit;
	*tokens = have + wait * q->rate_kbit - need;
	return start + wait;
}

/* Take what the kernel routed into q->in, stamped with its due time: its
 * arrival plus the delay, or its departure from the bottleneck plus the
 * delay. */
static void
queue_read(struct queue *q)
{
	static uint8_t spill[65536];

	for (int i = 0; i < READ_BURST; i++) {
		size_t tail = (q->head + q->count) % q->slots;
		bool full = q->count == q->slots;
		uint8_t *dst = full ? spill : q->buf + tail * SLOT_SIZE;
		size_t room = full ? sizeof spill : SLOT_SIZE;
		ssize_t n = read(q->in, dst, room);
		uint64_t now, draw, depart, tokens = 0;

		if (n < 0)
			break;   /* EAGAIN: drained; anything else: try later */
		/* Read after the packet is: a time taken before the reads
		 * (when the relay is slow to get the CPU, a packet may come
		 * in well after it) would hold the packet short of the delay
		 * and let the bottleneck count it in before it came. */
		now = depart = now_ns();
		if (n == 0 || (size_t)n > SLOT_SIZE) {
			q->dropped++;
			continue;
		}
		/* Drawn for every packet, before the queue checks, so that
		 * neither a full queue nor the rate limit shifts the sequence
		 * of decisions. */
		draw = splitmix64(&q->rng) >> (64 - LOSS_BITS);
		if (q->gilbert) {
			if (gilbert_lost(q, draw))
				continue;
		} else if (draw < q->loss_below) {
			q->lost++;
			continue;
		}
		if (q->rate_kbit > 0) {
			/* Those that left within this burst of reads no longer
			 * take room. */
			bottleneck_advance(q, now);
			depart = bottleneck_depart(q, (size_t)n, now, &tokens);
			if (depart == UINT64_MAX) {
				q->rate_dropped++;
				continue;
			}
		}
		if (full) {
			q->dropped++;
			continue;
		}
		if (q->rate_kbit > 0) {
			q->tb_time = depart;
			q->tokens = tokens;
		}
		q->len[tail] = (uint16_t)n;
		q->due[tail] = depart + q->delay;
		q->backlog += (size_t)n;
		q->count++;
	}
}

/* Write every packet that has served its time into q->out. */
static void
queue_flush(struct queue *q, uint64_t now)
{
	/* A packet due has left the bottleneck, so this puts the head among
	 * the `sent` ones before it goes. */
	bottleneck_advance(q, now);
	while (q->count > 0 && q->due[q->head] <= now) {
		if (write(q->out, q->buf + q->head * SLOT_SIZE, q->len[q->head]) ==
		    (ssize_t)q->len[q->head])
			q->forwarded++;
		else
			q->write_errors++;
		q->head = (q->head + 1) % q->slots;
		q->count--;
		q->sent--;
	}
}

int
main(int argc, char **argv)
{
	struct queue q[2];
	struct sigaction sa;
	sigset_t block, orig;
	unsigned long slots = 8192, max_s = 3600, delay_ms, limit = 0;
	uint64_t delay, deadline, seed = 0, loss_below, p_below = 0, r_below = 0;
	uint64_t rate_kbit = 0;
	double loss = 0.0, burst = 0.0, p = 0.0, r = 0.0;
	const char *loss_arg = "0", *burst_arg = NULL, *rate_arg = NULL;
	bool seeded = false, lossy = false;
	int fa, fb, ch;

	while ((ch = getopt(argc, argv, "b:l:q:Q:r:s:t:")) != -1) {
		switch (ch) {
		case 'b':
			burst = decimal(optarg, 1.0, 10000.0, "MEAN_BURST");
			burst_arg = optarg;
			break;
		case 'l':
			loss = decimal(optarg, 0.0, 100.0, "PERCENT");
			loss_arg = optarg;
			lossy = true;
			break;
		case 'Q':
			limit = number(optarg, SLOT_SIZE, 1ul << 30, "BYTES");
			break;
		case 'r':
			/* To whole kbit/s, which the bottleneck counts in. */
			rate_kbit = (uint64_t)(decimal(optarg, 0.001, 100000.0, "MBIT") *
			    1000.0 + 0.5);
			rate_arg = optarg;
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
	if (burst_arg != NULL && !lossy) {
		fprintf(stderr, "delay-relay: -b needs -l, the loss rate\n");
		exit(2);
	}
	if (limit != 0 && rate_arg == NULL) {
		fprintf(stderr, "delay-relay: -Q needs -r, the rate\n");
		exit(2);
	}
	/* 100% maps to 2^LOSS_BITS, above every draw, so all packets go. */
	loss_below = (uint64_t)(loss / 100.0 * (double)(UINT64_C(1) << LOSS_BITS));
	if (burst_arg != NULL) {
		/* The Gilbert chain's steps (see the top of the file): with
		 * r = 1/B and p = L/(B(1-L)), bursts average B packets and
		 * p/(p+r) = L of them are lost. */
		double l = loss / 100.0;

		r = 1.0 / burst;
		p = l < 1.0 ? l * r / (1.0 - l) : 2.0;
		if (p > 1.0) {
			fprintf(stderr, "delay-relay: bursts of %s packets on average "
			    "cannot lose %s%%: at most %.6g%%\n", burst_arg, loss_arg,
			    100.0 * burst / (burst + 1.0));
			exit(2);
		}
		p_below = (uint64_t)(p * (double)(UINT64_C(1) << LOSS_BITS));
		r_below = (uint64_t)(r * (double)(UINT64_C(1) << LOSS_BITS));
	}
	/* One round trip's worth at the rate (kbit/s * 2 * ms / 8 = bytes),
	 * the bandwidth-delay product routers are sized to. */
	if (rate_arg != NULL && limit == 0) {
		limit = (unsigned long)(rate_kbit * delay_ms / 4);
		if (limit < MIN_LIMIT)
			limit = MIN_LIMIT;
	}
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
			q[i].delay = delay;
			if (burst_arg != NULL) {
				q[i].gilbert = true;
				q[i].p_below = p_below;
				q[i].r_below = r_below;
				/* Started in its stationary distribution, so that
				 * the rate holds from the first packet. */
				q[i].bad = (splitmix64(&q[i].rng) >> (64 - LOSS_BITS)) <
				    loss_below;
			}
			if (rate_arg != NULL) {
				q[i].rate_kbit = rate_kbit;
				q[i].limit = limit;
				q[i].tokens = (uint64_t)BURST_BYTES * 8000000u;
			}
		}
	}
	/* Without -b and -r the same line as ever. */
	fprintf(stderr, "delay-relay: delay %lu ms, loss %s%% per direction",
	    delay_ms, loss_arg);
	if (burst_arg != NULL)
		fprintf(stderr, " in bursts of %s packets on average (p %.6g, "
		    "r %.6g)", burst_arg, p, r);
	if (rate_arg != NULL)
		fprintf(stderr, ", rate %s Mbit/s per direction (bucket %d bytes, "
		    "queue %lu bytes)", rate_arg, BURST_BYTES, limit);
	fprintf(stderr, ", seed %llu\n", (unsigned long long)seed);
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
		for (int i = 0; i < 2; i++) {
			if (pfd[i].revents & POLLIN)
				queue_read(&q[i]);
		}
	}
	for (int i = 0; i < 2; i++) {
		fprintf(stderr, "delay-relay: %s: %llu forwarded, %llu lost at "
		    "random, %llu lost in %llu bursts, %llu dropped by the rate "
		    "limit, %llu dropped, %llu write errors, %zu still queued\n",
		    q[i].name, (unsigned long long)q[i].forwarded,
		    (unsigned long long)q[i].lost,
		    (unsigned long long)q[i].burst_lost,
		    (unsigned long long)q[i].bursts,
		    (unsigned long long)q[i].rate_dropped,
		    (unsigned long long)q[i].dropped,
		    (unsigned long long)q[i].write_errors, q[i].count);
		queue_clear(&q[i]);
	}
	close(fa);
	close(fb);
	return 0;
}

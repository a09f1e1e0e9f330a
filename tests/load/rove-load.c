/* rove-load: many rove peers in one program (one process, or a few: -j),
 * for measuring roved at scale.
 *
 * usage: rove-load gen -n N -k KEYS -p PEERS [-a RULE]
 *        rove-load run -s ADDR:PORT -P PUBKEY -k KEYS [-n N] [options]
 *
 * `gen` writes N fresh private keys to KEYS (one base64 key a line, mode
 * 0600) and the N matching [Peer] sections to PEERS (Name load-00000 and
 * up, PublicKey; with -a, an AllowForward = RULE line each), for appending
 * to a roved.conf whose [Server] section the caller writes.
 *
 * `run` connects N sessions, one per key of KEYS (the first N), to the
 * roved at ADDR:PORT whose public key is PUBKEY (base64). Each session is
 * a rove client in all that the server sees: its own key and certificate
 * (tls.c's context), its own UDP socket, a QUIC connection made by
 * quic-udp.c's quic_conn_client_create, the control stream's CLIENT_HELLO and
 * SERVER_CONFIG (proto.c), session tickets and NEW_TOKEN tokens kept for
 * 0-RTT reconnects, and the client's reconnect back-off. It has no TUN
 * device and no forwards. Options:
 *
 *   -b ADDR    the first source address; session i binds to ADDR + i / B
 *              (it must be local: a prefix on lo does; default: any)
 *   -B B       sessions per source address (default 8; roved admits 20
 *              handshakes at once from one address, then 10 a second)
 *   -C C       handshakes under way at once while connecting (default 128),
 *              each begun as soon as one finishes
 *   -c SECS    time allowed for connecting all N (default 120)
 *   -i SECS    idle time after connecting, before roved's memory and CPU
 *              are read (default 2)
 *   -j J       run as J processes (default 1), each with every J-th
 *              session, so that the clients' half of the handshakes uses
 *              J CPUs as real clients would use their own; the first
 *              process ends the phases and prints every figure, its CPU
 *              time being that of all J
 *   -R PID     roved's PID: report its RSS before and after (per session)
 *              and its CPU time while connecting and idle (/proc/PID)
 *   -m M       datagram mode: M sessions send ICMP echo requests from their
 *              tunnel address to -t ADDR through the tunnel, -w at a time
 *              each, for -T seconds; the replies are counted
 *   -t ADDR    the server's tunnel address (IPv4) for -m
 *   -w W       echo requests outstanding per active session (default 8)
 *   -S BYTES   IP packet size of the echo requests (default 1200)
 *   -T SECS    duration of the datagram phase (default 5)
 *   -F ADDR:PORT  forward mode (IPv4): instead of echoes, the M sessions of -m
 *              each open a forward to HOST:PORT (roved's AllowForward must
 *              allow it: `gen -a`) and keep its stream full of bytes for
 *              -T seconds; what roved acknowledged is counted (its window
 *              opens only as the target takes the bytes, so this is what
 *              the target received, give or take one window)
 *   -r SECS    then wait up to SECS for a restart of roved: print "waiting
 *              for a server restart" and measure how long until every
 *              session that lost its connection is back, and how many
 *              came back with 0-RTT
 *   -H SECS    at the end, keep the sessions up for SECS more (print
 *              "holding the sessions"), so a script can look at roved
 *   -K KEX     the clients' KeyExchange: hybrid (the default, as rove's:
 *              X25519MLKEM768, a ClientHello of two Initials) or classic
 *              (X25519 alone, one Initial)
 *   -v         log more (twice: QUIC internals too)
 *
 * It prints a line per phase and, at the end, "RESULT key=value ..." lines
 * for scripts. Exits 0 when every phase reached its goal (all connected,
 * all back after the restart), 1 otherwise, 2 on a usage error. So that it
 * can load only test networks, ADDR must lie in 198.18.0.0/15, fd00::/8 or
 * loopback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/addr.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/random.h"
#include "base/xmalloc.h"
#include "transport/quic.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "wire/ippkt.h"
#include "wire/proto-fwd.h"
#include "wire/proto.h"

#define MAX_SESSIONS 20000
#define MAX_PROCS 16
/* The client's back-off (client/client.c): 250 ms doubling to 30 s, each
 * delay drawn from [d/2, d]. */
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000
#define KEEPALIVE_S 15
#define IDLE_TIMEOUT_S 120
#define ECHO_LOST_MS 500     /* an echo unanswered this long is lost */
#define TICK_MS 100
#define FOLLOW_MS 5          /* how often a process looks for a new phase */

/* PH_PREPARE: making keys and sockets. PH_TRAFFIC_END: the traffic
 * stops and each process takes its sessions' figures. */
enum phase {
	PH_PREPARE, PH_CONNECT, PH_IDLE, PH_TRAFFIC, PH_TRAFFIC_END,
	PH_RESTART, PH_HOLD, PH_DONE
};

struct sess {
	struct load *ld;
	size_t idx;
	WOLFSSL_CTX *tls;
	struct udp_socket sock;
	struct udp_batch *batch;
	struct event *ev, *retry_ev;
	struct quic_conn *qc;
	struct quic_settings qs;
	uint8_t ctl[PROTO_MAX_MSG + 16];
	size_t ctllen;
	bool started;       /* its first connection was begun */
	bool configured;    /* the server's configuration arrived */
	bool refused;       /* the server refused its key: never again */
	struct ipaddr addr; /* its IPv4 tunnel address */
	bool has_addr;
	unsigned failures;  /* consecutive, for the back-off */
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	size_t tokenlen;
	uint8_t *session, *params;
	size_t sessionlen, paramslen;
	uint64_t t_start;   /* this connection attempt began (ns) */
	uint64_t t_up;      /* first configured (ns) */
	uint64_t t_lost;    /* lost its connection in the restart phase */
	uint64_t t_back;    /* configured again after t_lost */
	uint16_t seq;
	unsigned outstanding;
	uint64_t echo_replies;
	uint64_t last_echo;  /* the last reply, or when the window was filled */
	int64_t fwd_stream;  /* forward mode: its stream, or -1 */
	uint64_t fwd_queued; /* bytes queued on it */
	uint64_t fwd_bytes;  /* what roved acknowledged, at the end */
	bool fwd_failed;     /* reset or closed before the end */
	uint64_t zrtt_attempted, zrtt_accepted, zrtt_rejected;
	uint64_t handshakes;
	unsigned restart_attempts; /* connections begun after t_lost */
	char failed[96];           /* why the last attempt that failed did */
};

/* With -j, rove-load runs as several processes, each owning the sessions
 * whose index it is modulo their number (wolfSSL is built without locks:
 * no threads). The sessions and these figures are in memory they share
 * (MAP_SHARED); each process writes only its own sessions and its own
 * `counts`, and the first process, which reads them all, decides when a
 * phase ends (`shared.phase`) and prints every report. */
struct counts {
	atomic_int pid;
	atomic_int seen;           /* the phase this process has entered */
	atomic_bool ready;         /* its sessions are prepared */
	atomic_bool all_started;   /* connect phase: it began every session */
	atomic_size_t in_flight;   /* connect phase: begun, not yet up */
	atomic_size_t up;          /* configured now */
	atomic_size_t ever_up;     /* configured at least once */
	atomic_size_t lost, back;  /* restart phase */
	atomic_uint_least64_t t_first_lost;
	atomic_uint_least64_t cpu_first_lost_us; /* its CPU then */
	atomic_uint_least64_t echo_sent, echo_recv, echo_lost, echo_bytes;
};

struct shared {
	atomic_int phase;
	atomic_uint_least64_t phase_start;
	struct counts c[MAX_PROCS];
};

/* The sum of every process's counts. */
struct totals {
	size_t in_flight, up, ever_up, lost, back;
	uint64_t t_first_lost, echo_sent, echo_recv, echo_lost, echo_bytes;
	bool all_started;
};

struct load {
	struct event_base *base;
	struct sess *s;
	unsigned procs, me;  /* -j, and which of them this process is */
	struct shared *sh;
	struct counts *c;    /* this process's, in sh */
	size_t n;
	uint8_t server_pub[KEY_LEN];
	/* For the stateless-reset tokens of the connection IDs we issue. */
	uint8_t reset_secret[QUIC_RESET_SECRET_LEN];
	struct sockaddr_storage server;
	socklen_t serverlen;
	bool has_src;
	struct ipaddr src;
	size_t per_src;
	size_t conc;
	unsigned connect_s, idle_s, traffic_s, restart_s, hold_s;
	pid_t roved;
	size_t active;       /* -m */
	struct ipaddr target;
	bool has_target;
	unsigned window;
	size_t pktsize;
	struct proto_fwd_header fwd; /* -F; port 0: echoes */
	int verbose;

	enum phase phase;    /* the phase this process is in */
	uint64_t phase_start;
	struct event *tick_ev, *follow_ev, *more_ev;
	size_t next_start;   /* connect phase: its next session to begin */
	size_t conc_own;     /* its share of -C */
	bool announced;      /* the first process printed the phase's line */
	uint64_t t_all_up, traffic_ns, t_all_back;
	bool ok;
};

static struct load the_load;
/* roved's RSS (KiB) before, with half the sessions up, with all up. */
static long rss_before = -1, rss_half = -1, rss_after = -1;
static size_t up_at_half;

static void sess_connect(struct sess *);

/* Only the networks tests may use: 198.18.0.0/15, fd00::/8, loopback. */
static bool
test_network(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const uint8_t *a = (const uint8_t *)
		    &((const struct sockaddr_in *)sa)->sin_addr;
		return (a[0] == 198 && (a[1] & 0xfe) == 18) || a[0] == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return a->s6_addr[0] == 0xfd || IN6_IS_ADDR_LOOPBACK(a);
	}
	return false;
}

static double
secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

/* The value at fraction q of sorted v[0..n). */
static double
quantile(const double *v, size_t n, double q)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)ceil(q * (double)n);
	if (i > 0)
		i--;
	return v[i < n ? i : n - 1];
}

static int
double_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
print_dist(const char *what, double *v, size_t n)
{
	qsort(v, n, sizeof *v, double_cmp);
	printf("  %s: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
	    what, quantile(v, n, 0.5), quantile(v, n, 0.9),
	    quantile(v, n, 0.99), n > 0 ? v[n - 1] : 0.0);
}

/* roved's resident memory in KiB and its CPU time in seconds, from /proc;
 * -1 when it cannot be read. */
static long
proc_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

static double
proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* The name in parentheses may hold spaces: count from its end. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
	    &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double
self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static bool
pin_check(struct quic_conn *qc, const uint8_t *pub, void *arg)
{
	struct sess *s = arg;

	(void)qc;
	return memcmp(pub, s->ld->server_pub, KEY_LEN) == 0;
}

static void
sess_up(struct sess *s)
{
	struct load *ld = s->ld;
	uint64_t now = clock_now();

	s->configured = true;
	s->failures = 0;
	ld->c->up++;
	if (s->t_up == 0) {
		s->t_up = now;
		ld->c->ever_up++;
		if (ld->phase == PH_CONNECT) {
			ld->c->in_flight--;
			event_active(ld->more_ev, 0, 0);
		}
	}
	if (ld->phase == PH_RESTART && s->t_lost != 0 && s->t_back == 0) {
		s->t_back = now;
		ld->c->back++;
	}
}

static int
stream_data_cb(struct quic_conn *qc, int64_t stream_id, const uint8_t *data,
    size_t len, bool fin, void *stream_arg, void *arg)
{
	struct sess *s = arg;
	struct proto_server_config sc;
	const uint8_t *body;
	uint64_t type;
	size_t bodylen;
	long used;

	(void)fin;
	(void)stream_arg;
	if (stream_id != 0) {
		/* A forward's answer (the target sends nothing back) or its
		 * FIN: taken and dropped. Any other stream is refused. */
		quic_conn_stream_consume(qc, stream_id, len);
		if (stream_id != s->fwd_stream)
			quic_conn_stream_reset(qc, stream_id, 0);
		return 0;
	}
	if (len > sizeof s->ctl - s->ctllen)
		return -1;
	memcpy(s->ctl + s->ctllen, data, len);
	s->ctllen += len;
	quic_conn_stream_consume(qc, stream_id, len);
	while ((used = proto_msg_next(s->ctl, s->ctllen, &type, &body,
	    &bodylen)) > 0) {
		if (type == PROTO_MSG_SERVER_CONFIG) {
			if (proto_decode_server_config(body, bodylen, &sc) != 0)
				return -1;
			for (size_t i = 0; i < sc.naddrs; i++) {
				if (sc.addrs[i].addr.family == AF_INET) {
					s->addr = sc.addrs[i].addr;
					s->has_addr = true;
				}
			}
			if (!s->configured)
				sess_up(s);
		}
		memmove(s->ctl, s->ctl + used, s->ctllen - (size_t)used);
		s->ctllen -= (size_t)used;
	}
	return used < 0 ? -1 : 0;
}

static void
handshake_done_cb(struct quic_conn *qc, void *arg)
{
	struct sess *s = arg;
	struct proto_client_hello hello = { PROTO_VERSION, 0 };
	struct quic_conn_stats st;
	uint8_t buf[64];
	size_t n;

	s->handshakes++;
	quic_conn_get_stats(qc, &st);
	if (st.early_attempted) {
		s->zrtt_attempted++;
		if (st.early_accepted)
			s->zrtt_accepted++;
		else
			s->zrtt_rejected++;
	}
	n = proto_encode_client_hello(buf, sizeof buf, &hello);
	if (quic_conn_open_stream(qc, NULL) != 0 || n == 0 ||
	    quic_conn_stream_send(qc, 0, buf, n, false) != 0)
		quic_conn_close(qc, 1, "cannot open the control stream");
}

/* One ICMP echo request from the session's tunnel address to the target,
 * as a DATAGRAM (context 0). */
static void
send_echo(struct sess *s)
{
	struct load *ld = s->ld;
	uint8_t buf[1 + 65535], *ip = buf + 1, *icmp = ip + 20;
	size_t len = ld->pktsize;

	buf[0] = PROTO_CTX_IP;
	memset(ip, 0, len);
	ip[0] = 0x45;
	be16_put(ip + 2, (uint16_t)len);
	be16_put(ip + 4, s->seq);
	ip[6] = 0x40; /* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_ICMP;
	memcpy(ip + 12, s->addr.b, 4);
	memcpy(ip + 16, ld->target.b, 4);
	be16_put(ip + 10, ippkt_checksum(ip, 20, 0));
	icmp[0] = 8;
	be16_put(icmp + 4, (uint16_t)s->idx);
	be16_put(icmp + 6, s->seq++);
	be16_put(icmp + 2, ippkt_checksum(icmp, len - 20, 0));
	if (quic_conn_send_datagram(s->qc, buf, len + 1) >= 0) {
		s->outstanding++;
		ld->c->echo_sent++;
	}
}

static bool
sess_active(const struct sess *s)
{
	return s->ld->phase == PH_TRAFFIC && s->idx < s->ld->active &&
	    s->qc != NULL && s->configured &&
	    (s->has_addr || s->ld->fwd.port != 0);
}

static void
fill_window(struct sess *s)
{
	while (sess_active(s) && s->outstanding < s->ld->window)
		send_echo(s);
	s->last_echo = clock_now();
}

/* Forward mode: keep the stream's queue at its room (the window, the
 * send limits), in 16 KiB writes of zeros. */
#define FWD_CHUNK 16384
#define FWD_CAP (1024 * 1024)
static void
fwd_fill(struct sess *s)
{
	static const uint8_t zeros[FWD_CHUNK];
	size_t room;

	if (!sess_active(s) || s->fwd_stream < 0 || s->fwd_failed)
		return;
	while ((room = quic_conn_stream_room(s->qc, s->fwd_stream,
	    FWD_CAP)) > 0) {
		size_t n = room < sizeof zeros ? room : sizeof zeros;

		if (quic_conn_stream_send(s->qc, s->fwd_stream, zeros, n,
		    false) != 0) {
			s->fwd_failed = true;
			return;
		}
		s->fwd_queued += n;
	}
}

/* Forward mode: open the stream and send the forward's header. */
static void
fwd_open(struct sess *s)
{
	uint8_t hdr[PROTO_FWD_MAX_HOST + 16];
	size_t n = proto_fwd_encode(hdr, sizeof hdr, &s->ld->fwd);

	s->fwd_stream = -1;
	s->fwd_queued = 0;
	s->fwd_failed = false;
	if (!sess_active(s) || n == 0 ||
	    (s->fwd_stream = quic_conn_open_stream(s->qc, NULL)) < 0 ||
	    quic_conn_stream_send(s->qc, s->fwd_stream, hdr, n, false) != 0) {
		s->fwd_failed = true;
		return;
	}
	fwd_fill(s);
}

/* Bytes of the forward roved has acknowledged (header included). */
static uint64_t
fwd_acked(struct sess *s)
{
	if (s->fwd_stream < 0 || s->qc == NULL)
		return 0;
	return s->fwd_queued - quic_conn_stream_unacked(s->qc, s->fwd_stream);
}

static void
stream_acked_cb(struct quic_conn *qc, int64_t stream_id, void *stream_arg,
    void *arg)
{
	struct sess *s = arg;

	(void)qc;
	(void)stream_arg;
	if (stream_id == s->fwd_stream)
		fwd_fill(s);
}

static void
stream_reset_cb(struct quic_conn *qc, int64_t stream_id, uint64_t code,
    void *stream_arg, void *arg)
{
	struct sess *s = arg;

	(void)qc;
	(void)stream_arg;
	if (stream_id == s->fwd_stream && !s->fwd_failed) {
		s->fwd_failed = true;
		snprintf(s->failed, sizeof s->failed, "forward reset: %s",
		    proto_fwd_error_name(code));
	}
}

static void
datagram_cb(struct quic_conn *qc, const uint8_t *data, size_t len, void *arg)
{
	struct sess *s = arg;
	struct load *ld = s->ld;
	const uint8_t *pkt;
	size_t pktlen;
	uint64_t ctx;

	(void)qc;
	/* An ICMP echo reply (type 0), nothing else. */
	if (proto_dgram_decode(data, len, &ctx, &pkt, &pktlen) != 0 ||
	    ctx != PROTO_CTX_IP || pktlen < 28 || (pkt[0] >> 4) != 4 ||
	    pkt[9] != IPPROTO_ICMP || pktlen <= (size_t)(pkt[0] & 15) * 4 ||
	    pkt[(pkt[0] & 15) * 4] != 0)
		return;
	ld->c->echo_recv++;
	ld->c->echo_bytes += pktlen;
	s->echo_replies++;
	if (s->outstanding > 0)
		s->outstanding--;
	s->last_echo = clock_now();
	if (sess_active(s))
		send_echo(s);
}

static void
new_session_cb(struct quic_conn *qc, const uint8_t *der, size_t derlen,
    const uint8_t *params, size_t paramslen, void *arg)
{
	struct sess *s = arg;

	(void)qc;
	free(s->session);
	free(s->params);
	s->session = xmalloc(derlen);
	memcpy(s->session, der, derlen);
	s->sessionlen = derlen;
	s->params = xmalloc(paramslen);
	memcpy(s->params, params, paramslen);
	s->paramslen = paramslen;
}

static void
ticket_spent_cb(struct quic_conn *qc, void *arg)
{
	struct sess *s = arg;

	(void)qc;
	free(s->session);
	free(s->params);
	s->session = s->params = NULL;
	s->sessionlen = s->paramslen = 0;
}

static void
new_token_cb(struct quic_conn *qc, const uint8_t *token, size_t len, void *arg)
{
	struct sess *s = arg;

	(void)qc;
	if (len == 0 || len > sizeof s->token)
		return;
	memcpy(s->token, token, len);
	s->tokenlen = len;
}

static void
schedule_retry(struct sess *s, bool at_once)
{
	uint64_t d = BACKOFF_MIN_MS;
	struct timeval tv;
	uint32_t r;

	if (!at_once) {
		for (unsigned i = 0; i < s->failures && d < BACKOFF_MAX_MS; i++)
			d *= 2;
		if (d > BACKOFF_MAX_MS)
			d = BACKOFF_MAX_MS;
		random_bytes((uint8_t *)&r, sizeof r);
		d = d / 2 + r % (d / 2 + 1);
		s->failures++;
	} else
		d = 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	evtimer_add(s->retry_ev, &tv);
}

static void
closed_cb(struct quic_conn *qc, const struct quic_close_info *info, void *arg)
{
	struct quic_close_info copy = *info; /* it lives in the connection */
	const struct quic_close_info *ci = &copy;
	struct sess *s = arg;
	struct load *ld = s->ld;
	struct quic_conn_stats st;

	quic_conn_get_stats(qc, &st);
	/* The next connection paces its first flight by this RTT, as rove's. */
	if (st.rtt_ms > 0)
		s->qs.initial_rtt_ns = (uint64_t)(st.rtt_ms * 1e6);
	quic_conn_free(s->qc);
	s->qc = NULL;
	s->ctllen = 0;
	s->outstanding = 0;
	if (s->configured) {
		s->configured = false;
		ld->c->up--;
		if (ld->phase == PH_RESTART && s->t_lost == 0) {
			s->t_lost = clock_now();
			if (ld->c->lost == 0) {
				ld->c->t_first_lost = s->t_lost;
				ld->c->cpu_first_lost_us =
				    (uint64_t)(self_cpu_s() * 1e6);
			}
			ld->c->lost++;
		}
	}
	if (ld->phase == PH_DONE)
		return;
	if (ci->pin_mismatch || (ci->remote && !ci->transport && ci->code == 3) ||
	    (ci->remote && ci->transport && ci->code >= 0x100 + 42 &&
	    ci->code <= 0x100 + 49)) {
		log_warn("session %zu: refused by the server (%s); not retrying",
		    s->idx, ci->reason);
		s->refused = true;
		if (ld->phase == PH_CONNECT && s->t_up == 0)
			ld->c->in_flight--;
		return;
	}
	log_debug("session %zu: connection lost: %s", s->idx, ci->reason);
	if (s->t_lost != 0 && s->t_back == 0 && s->restart_attempts > 0)
		snprintf(s->failed, sizeof s->failed, "%s %s code 0x%llx%s%.40s",
		    ci->idle ? "idle" : ci->remote ? "closed by the server," :
		    "closed here,", ci->transport ? "transport" : "application",
		    (unsigned long long)ci->code, ci->reason[0] != '\0' ? ": " : "",
		    ci->reason);
	schedule_retry(s, ci->stateless_reset);
}

static const struct quic_conn_cbs sess_cbs = {
	.handshake_done = handshake_done_cb,
	.datagram = datagram_cb,
	.stream_data = stream_data_cb,
	.stream_reset = stream_reset_cb,
	.stream_acked = stream_acked_cb,
	.closed = closed_cb,
	.new_session = new_session_cb,
	.ticket_spent = ticket_spent_cb,
	.new_token = new_token_cb,
};

static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static struct udp_recv r[UDP_RECV_BATCH];
	struct sess *s = arg;
	int got, rounds = 0;

	(void)fd;
	(void)what;
	do {
		got = udp_recv_many(&s->sock, r, UDP_RECV_BATCH);
		for (int i = 0; i < got; i++) {
			for (size_t off = 0; off < r[i].len && s->qc != NULL;
			    off += r[i].segsize) {
				size_t seg = r[i].len - off < r[i].segsize ?
				    r[i].len - off : r[i].segsize;
				quic_conn_read(s->qc, &s->sock,
				    (const struct sockaddr *)&r[i].peer,
				    r[i].peerlen, r[i].buf + off, seg, r[i].ecn);
			}
		}
	} while (got == UDP_RECV_BATCH && ++rounds < 8 && s->qc != NULL);
	quic_write_dirty();
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sess_connect(arg);
}

/* The session's socket, key and certificate: made once, before any
 * connection, so the timed phases measure the handshakes alone. */
static int
sess_prepare(struct load *ld, struct sess *s, const uint8_t priv[static KEY_LEN],
    char **cause)
{
	struct sockaddr_storage src;
	socklen_t srclen = 0;

	s->ld = ld;
	s->fwd_stream = -1;
	s->tls = tls_ctx_create(TLS_ROLE_CLIENT, priv, quic_tls_pin, cause);
	if (s->tls == NULL)
		return -1;
	tls_ctx_enable_resumption(s->tls, TLS_ROLE_CLIENT, true);
	if (ld->has_src) {
		struct ipaddr a = ld->src;
		size_t add = s->idx / ld->per_src;
		int k = a.family == AF_INET ? 3 : 15;

		/* Add as a big-endian integer. */
		for (; k >= 0 && add > 0; k--) {
			size_t v = a.b[k] + (add & 0xff);
			a.b[k] = (uint8_t)v;
			add = (add >> 8) + (v >> 8);
		}
		addr_to_sockaddr(&a, 0, &src, &srclen);
	}
	if (udp_open(&s->sock, ld->server.ss_family, srclen > 0 ?
	    (struct sockaddr *)&src : NULL, srclen, cause) != 0)
		return -1;
	if (connect(s->sock.fd, (struct sockaddr *)&ld->server, ld->serverlen) == -1) {
		xasprintf(cause, "connect: %s", strerror(errno));
		return -1;
	}
	s->sock.locallen = sizeof s->sock.local;
	getsockname(s->sock.fd, (struct sockaddr *)&s->sock.local, &s->sock.locallen);
	s->batch = xcalloc(1, sizeof *s->batch);
	udp_batch_init(s->batch, &s->sock);
	s->ev = event_new(ld->base, s->sock.fd, EV_READ | EV_PERSIST, udp_read_cb, s);
	event_add(s->ev, NULL);
	s->retry_ev = evtimer_new(ld->base, retry_cb, s);
	s->qs = (struct quic_settings){
		.role = QUIC_ROLE_CLIENT,
		.cc = NGTCP2_CC_ALGO_CUBIC,
		.idle_timeout_s = IDLE_TIMEOUT_S,
		.keepalive_s = KEEPALIVE_S,
		.max_udp_payload = ld->server.ss_family == AF_INET6 ?
		    UDP_MAX_PAYLOAD6 : UDP_MAX_PAYLOAD,
		.stream_window = 65536,
		.reset_secret = ld->reset_secret,
		.verbose = ld->verbose > 1,
	};
	return 0;
}

static void
sess_connect(struct sess *s)
{
	struct load *ld = s->ld;
	struct quic_resume resume = {
		.session = s->session, .sessionlen = s->sessionlen,
		.params = s->params, .paramslen = s->paramslen,
		.early_data = true,
	};
	char *cause = NULL;

	if (s->qc != NULL || s->refused || ld->phase == PH_DONE)
		return;
	s->started = true;
	s->fwd_stream = -1;
	s->t_start = clock_now();
	if (s->t_lost != 0 && s->t_back == 0)
		s->restart_attempts++;
	s->qs.token = s->tokenlen > 0 ? s->token : NULL;
	s->qs.tokenlen = s->tokenlen;
	s->qc = quic_conn_client_create(ld->base, &s->qs, &sess_cbs, s, s->tls,
	    s->batch, (struct sockaddr *)&ld->server, ld->serverlen,
	    s->session != NULL ? &resume : NULL, &cause);
	/* The ticket stays until the server answers (ticket_spent_cb), as
	 * rove keeps it in its StateDir: an attempt the server never saw
	 * does not cost the next one its 0-RTT. */
	if (s->qc == NULL) {
		log_warn("session %zu: %s", s->idx, cause);
		free(cause);
		schedule_retry(s, false);
		return;
	}
	quic_conn_write(s->qc);
	udp_batch_flush(s->batch);
}

/* Connect phase: keep this process's share of `conc` handshakes under
 * way, topped up as each finishes (sess_up), not only at the tick. */
static void
start_more(struct load *ld)
{
	while (ld->phase == PH_CONNECT && ld->next_start < ld->n &&
	    ld->c->in_flight < ld->conc_own) {
		struct sess *s = &ld->s[ld->next_start];

		ld->next_start += ld->procs;
		ld->c->in_flight++;
		sess_connect(s);
	}
	if (ld->next_start >= ld->n)
		ld->c->all_started = true;
}

static void
more_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	start_more(arg);
}

static void
totals(const struct load *ld, struct totals *t)
{
	memset(t, 0, sizeof *t);
	t->all_started = true;
	for (unsigned p = 0; p < ld->procs; p++) {
		const struct counts *c = &ld->sh->c[p];
		uint64_t fl = c->t_first_lost;

		t->in_flight += c->in_flight;
		t->up += c->up;
		t->ever_up += c->ever_up;
		t->lost += c->lost;
		t->back += c->back;
		t->echo_sent += c->echo_sent;
		t->echo_recv += c->echo_recv;
		t->echo_lost += c->echo_lost;
		t->echo_bytes += c->echo_bytes;
		if (fl != 0 && (t->t_first_lost == 0 || fl < t->t_first_lost))
			t->t_first_lost = fl;
		t->all_started = t->all_started && c->all_started;
	}
}

/* Every process has entered the phase the first one set. */
static bool
all_seen(const struct load *ld)
{
	for (unsigned p = 0; p < ld->procs; p++) {
		if (ld->sh->c[p].seen != (int)ld->phase)
			return false;
	}
	return true;
}

/* The CPU time of every process of rove-load, in seconds. */
static double
load_cpu_s(const struct load *ld)
{
	double sum = self_cpu_s();

	for (unsigned p = 1; p < ld->procs; p++) {
		double v = proc_cpu_s(ld->sh->c[p].pid);

		if (v > 0)
			sum += v;
	}
	return sum;
}

/* What every process does on entering a phase, to its own sessions. */
static void
enter_phase(struct load *ld, enum phase ph)
{
	ld->phase = ph;
	ld->phase_start = ld->sh->phase_start;
	switch (ph) {
	case PH_CONNECT:
		start_more(ld);
		break;
	case PH_TRAFFIC:
		ld->c->echo_sent = ld->c->echo_recv = 0;
		ld->c->echo_lost = ld->c->echo_bytes = 0;
		for (size_t i = ld->me; i < ld->active && i < ld->n;
		    i += ld->procs) {
			ld->s[i].echo_replies = 0;
			if (ld->fwd.port != 0)
				fwd_open(&ld->s[i]);
			else
				fill_window(&ld->s[i]);
		}
		quic_write_dirty();
		break;
	case PH_TRAFFIC_END:
		/* Forward mode: what roved took of each forward; then the
		 * forwards are reset (the target sees its connection end). */
		for (size_t i = ld->me; ld->fwd.port != 0 && i < ld->active &&
		    i < ld->n; i += ld->procs) {
			struct sess *s = &ld->s[i];

			s->fwd_bytes = fwd_acked(s);
			if (s->fwd_stream >= 0 && s->qc != NULL)
				quic_conn_stream_reset(s->qc, s->fwd_stream,
				    PROTO_FWD_ERR_RESET);
			s->fwd_stream = -1;
		}
		quic_write_dirty();
		break;
	case PH_RESTART:
		for (size_t i = ld->me; i < ld->n; i += ld->procs) {
			struct sess *s = &ld->s[i];

			s->t_lost = s->t_back = 0;
			s->zrtt_attempted = s->zrtt_accepted = 0;
			s->zrtt_rejected = 0;
			s->handshakes = 0;
		}
		ld->c->lost = ld->c->back = 0;
		ld->c->t_first_lost = 0;
		break;
	case PH_DONE:
		event_base_loopexit(ld->base, NULL);
		break;
	case PH_PREPARE:
	case PH_IDLE:
	case PH_HOLD:
		break;
	}
	ld->c->seen = (int)ph;
}

/* The first process: every process moves to phase ph. */
static void
set_phase(struct load *ld, enum phase ph)
{
	ld->sh->phase_start = clock_now();
	ld->sh->phase = (int)ph;
	ld->announced = false;
	enter_phase(ld, ph);
}

/* The other processes: follow the first one's phase. */
static void
follow_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load *ld = arg;
	int ph = ld->sh->phase;

	(void)fd;
	(void)what;
	if (ph != (int)ld->phase)
		enter_phase(ld, (enum phase)ph);
}

static void report_connect(struct load *, const struct totals *);
static void report_traffic(struct load *, const struct totals *);
static void report_forwards(struct load *);
static void report_restart(struct load *, const struct totals *);

static double cpu_connect_start, cpu_connect, cpu_idle_start, cpu_idle;
static double self_cpu_connect_start, self_cpu_connect;
static uint64_t idle_ns;

static void
finish_or_hold(struct load *ld)
{
	set_phase(ld, ld->hold_s > 0 ? PH_HOLD : PH_DONE);
}

static void
restart_or_done(struct load *ld)
{
	if (ld->restart_s > 0)
		set_phase(ld, PH_RESTART);
	else
		finish_or_hold(ld);
}

/* A process other than the first ended before the run did. */
static bool
lost_a_process(struct load *ld)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (unsigned p = 1; p < ld->procs; p++) {
			if (ld->sh->c[p].pid == pid) {
				fprintf(stderr, "rove-load: process %u (PID %d) "
				    "ended during the run\n", p, (int)pid);
				ld->sh->c[p].pid = 0;
				ld->ok = false;
				return true;
			}
		}
	}
	return false;
}

/* The first process: the end of each phase, and its report. One
 * transition a tick, once every process is in the current phase. */
static void
coordinate(struct load *ld, uint64_t now, uint64_t el)
{
	struct totals t;

	if (ld->procs > 1 && lost_a_process(ld)) {
		set_phase(ld, PH_DONE);
		return;
	}
	if (!all_seen(ld))
		return;
	totals(ld, &t);
	switch (ld->phase) {
	case PH_PREPARE:
		break;
	case PH_CONNECT:
		/* The second half's growth is the cost of a session alone:
		 * the first may fill heap that roved's start freed. */
		if (rss_half < 0 && ld->roved > 0 && ld->n >= 2 &&
		    t.ever_up >= ld->n / 2) {
			rss_half = proc_rss_kb(ld->roved);
			up_at_half = t.up;
		}
		if (t.ever_up == ld->n || (t.all_started && t.in_flight == 0) ||
		    el >= ld->connect_s * NGTCP2_SECONDS) {
			ld->t_all_up = now;
			if (ld->roved > 0)
				cpu_connect = proc_cpu_s(ld->roved) - cpu_connect_start;
			self_cpu_connect = load_cpu_s(ld) - self_cpu_connect_start;
			report_connect(ld, &t);
			set_phase(ld, PH_IDLE);
			if (ld->roved > 0)
				cpu_idle_start = proc_cpu_s(ld->roved);
		}
		break;
	case PH_IDLE:
		if (el < ld->idle_s * NGTCP2_SECONDS)
			break;
		idle_ns = el;
		if (ld->roved > 0) {
			cpu_idle = proc_cpu_s(ld->roved) - cpu_idle_start;
			rss_after = proc_rss_kb(ld->roved);
			double per = t.up > 0 ? (double)(rss_after -
			    rss_before) / (double)t.up : 0;
			double half = rss_half >= 0 && t.up > up_at_half ?
			    (double)(rss_after - rss_half) /
			    (double)(t.up - up_at_half) : 0;

			printf("roved: RSS %.1f MiB before, %.1f MiB with %zu "
			    "sessions up: %.1f KiB per session (%.1f KiB each "
			    "for the second half); CPU %.2f s while connecting "
			    "(%.2f ms per session), %.2f%% of a core idle over "
			    "%.1f s\n", rss_before / 1024.0, rss_after / 1024.0,
			    t.up, per, half, cpu_connect, t.ever_up > 0 ?
			    cpu_connect * 1000 / (double)t.ever_up : 0,
			    100 * cpu_idle / secs(idle_ns), secs(idle_ns));
			printf("RESULT rss_before_kb=%ld rss_after_kb=%ld "
			    "rss_per_session_kb=%.1f rss_per_session_half_kb=%.1f "
			    "cpu_per_handshake_ms=%.2f idle_cpu_pct=%.2f\n",
			    rss_before, rss_after, per, half, t.ever_up > 0 ?
			    cpu_connect * 1000 / (double)t.ever_up : 0,
			    100 * cpu_idle / secs(idle_ns));
			fflush(stdout);
		}
		if (ld->active > 0)
			set_phase(ld, PH_TRAFFIC);
		else
			restart_or_done(ld);
		break;
	case PH_TRAFFIC:
		if (el >= ld->traffic_s * NGTCP2_SECONDS) {
			ld->traffic_ns = el;
			set_phase(ld, PH_TRAFFIC_END);
		}
		break;
	case PH_TRAFFIC_END:
		if (ld->fwd.port != 0)
			report_forwards(ld);
		else
			report_traffic(ld, &t);
		restart_or_done(ld);
		break;
	case PH_RESTART:
		if (!ld->announced) {
			printf("waiting for a server restart (up to %u s)\n",
			    ld->restart_s);
			fflush(stdout);
			ld->announced = true;
		}
		if ((t.lost > 0 && t.back == t.lost && t.up == t.ever_up) ||
		    el >= ld->restart_s * NGTCP2_SECONDS) {
			ld->t_all_back = now;
			report_restart(ld, &t);
			finish_or_hold(ld);
		}
		break;
	case PH_HOLD:
		if (!ld->announced) {
			printf("holding the sessions for %u s\n", ld->hold_s);
			fflush(stdout);
			ld->announced = true;
		}
		if (el >= ld->hold_s * NGTCP2_SECONDS)
			set_phase(ld, PH_DONE);
		break;
	case PH_DONE:
		break;
	}
}

/* Every process: its own sessions' work of the phase; the first process
 * also ends phases. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load *ld = arg;
	uint64_t now = clock_now(), el = now - ld->phase_start;

	(void)fd;
	(void)what;
	if (ld->phase == PH_CONNECT)
		start_more(ld);
	if (ld->phase == PH_TRAFFIC && ld->fwd.port == 0) {
		for (size_t i = ld->me; i < ld->active && i < ld->n;
		    i += ld->procs) {
			struct sess *s = &ld->s[i];

			if (s->outstanding > 0 &&
			    now - s->last_echo > ECHO_LOST_MS * NGTCP2_MILLISECONDS) {
				ld->c->echo_lost += s->outstanding;
				s->outstanding = 0;
			}
			if (s->outstanding == 0)
				fill_window(s);
		}
		quic_write_dirty();
	}
	if (ld->me == 0)
		coordinate(ld, now, el);
}

/* Forward mode's figures (each process took its sessions' at
 * PH_TRAFFIC_END). */
static void
report_forwards(struct load *ld)
{
	double el = secs(ld->traffic_ns);
	size_t active = ld->active < ld->n ? ld->active : ld->n;
	size_t moved = 0, failed = 0;
	uint64_t bytes = 0;

	for (size_t i = 0; i < active; i++) {
		struct sess *s = &ld->s[i];

		bytes += s->fwd_bytes;
		moved += s->fwd_bytes > FWD_CHUNK;
		failed += s->fwd_failed;
	}
	printf("forwards: %zu sessions, one forward each to %s:%u, %.1f s: "
	    "%.1f MB taken by roved, %.1f Mbit/s in all; %zu moved data, "
	    "%zu failed\n", active, ld->fwd.host, (unsigned)ld->fwd.port, el,
	    (double)bytes / 1e6, el > 0 ? (double)bytes * 8 / el / 1e6 : 0,
	    moved, failed);
	printf("RESULT fwd_bytes=%" PRIu64 " fwd_mbit=%.1f fwd_sessions=%zu "
	    "fwd_failed=%zu\n", bytes, el > 0 ? (double)bytes * 8 / el / 1e6 :
	    0, moved, failed);
	fflush(stdout);
	if (moved != active || failed != 0)
		ld->ok = false;
}

static void
report_connect(struct load *ld, const struct totals *t)
{
	double *v = xcalloc(ld->n + 1, sizeof *v), el = secs(ld->t_all_up -
	    ld->phase_start);
	size_t k = 0, refused = 0;

	for (size_t i = 0; i < ld->n; i++) {
		if (ld->s[i].t_up != 0)
			v[k++] = (double)(ld->s[i].t_up - ld->s[i].t_start) / 1e6;
		refused += ld->s[i].refused;
	}
	printf("connect: %zu of %zu sessions up in %.3f s: %.0f handshakes/s "
	    "(at most %zu at once; rove-load's own CPU %.2f s in %u "
	    "process%s)\n", t->ever_up, ld->n, el, el > 0 ?
	    (double)t->ever_up / el : 0, ld->conc, self_cpu_connect, ld->procs,
	    ld->procs > 1 ? "es" : "");
	print_dist("time to connect (last attempt)", v, k);
	if (refused > 0)
		printf("  refused by the server: %zu\n", refused);
	printf("RESULT connected=%zu sessions=%zu refused=%zu connect_s=%.3f "
	    "handshakes_per_s=%.0f\n", t->ever_up, ld->n, refused, el,
	    el > 0 ? (double)t->ever_up / el : 0);
	fflush(stdout);
	free(v);
	if (t->ever_up != ld->n)
		ld->ok = false;
}

static void
report_traffic(struct load *ld, const struct totals *t)
{
	double el = secs(ld->traffic_ns);
	double mbit = el > 0 ? (double)t->echo_bytes * 8 / el / 1e6 : 0;
	size_t answered = 0, active = ld->active < ld->n ? ld->active : ld->n;

	for (size_t i = 0; i < active; i++)
		answered += ld->s[i].echo_replies > 0;

	printf("datagrams: %zu sessions, %u echo requests of %zu bytes "
	    "outstanding each, %.1f s: %" PRIu64 " sent, %" PRIu64 " answered "
	    "(%.0f/s, %.1f Mbit/s each way), %" PRIu64 " lost\n",
	    ld->active < ld->n ? ld->active : ld->n, ld->window, ld->pktsize,
	    el, t->echo_sent, t->echo_recv, el > 0 ?
	    (double)t->echo_recv / el : 0, mbit, t->echo_lost);
	printf("RESULT echo_sent=%" PRIu64 " echo_answered=%" PRIu64
	    " echo_lost=%" PRIu64 " echo_mbit=%.1f echo_sessions=%zu\n",
	    t->echo_sent, t->echo_recv, t->echo_lost, mbit, answered);
	fflush(stdout);
	if (answered != active)
		ld->ok = false;
}

/* How many sessions were back by each half second after the first loss:
 * the shape of the storm (when the server answered, then its rate). */
static void
print_back_timeline(const struct load *ld, const struct totals *t)
{
	enum { STEP_MS = 100, STEPS = 200 };
	size_t by[STEPS] = { 0 }, last = 0;

	for (size_t i = 0; i < ld->n; i++) {
		const struct sess *s = &ld->s[i];
		uint64_t ms;

		if (s->t_lost == 0 || s->t_back == 0)
			continue;
		ms = (s->t_back - t->t_first_lost) / 1000000;
		for (size_t j = ms / STEP_MS; j < STEPS; j++)
			by[j]++;
	}
	printf("  back by 0.1 s step:");
	for (size_t j = 0; j < STEPS && last < t->back; j++) {
		printf(" %zu", by[j]);
		last = by[j];
	}
	printf("\n");
}

/* CPU of every process of rove-load since its first lost session. */
static double
load_cpu_since_lost(const struct load *ld)
{
	double sum = 0;

	for (unsigned p = 0; p < ld->procs; p++) {
		const struct counts *c = &ld->sh->c[p];
		double now = p == 0 ? self_cpu_s() : proc_cpu_s(c->pid);

		if (c->lost > 0 && now > 0)
			sum += now - (double)c->cpu_first_lost_us / 1e6;
	}
	return sum;
}

static void
report_restart(struct load *ld, const struct totals *t)
{
	double *v = xcalloc(ld->n + 1, sizeof *v);
	uint64_t att = 0, acc = 0, rej = 0, hs = 0, tries = 0;
	unsigned most_tries = 0;
	struct sess *slowest = NULL;
	size_t k = 0;

	for (size_t i = 0; i < ld->n; i++) {
		struct sess *s = &ld->s[i];

		att += s->zrtt_attempted;
		acc += s->zrtt_accepted;
		rej += s->zrtt_rejected;
		hs += s->handshakes;
		tries += s->restart_attempts;
		if (s->restart_attempts > most_tries)
			most_tries = s->restart_attempts;
		if (s->t_lost != 0 && s->t_back != 0) {
			v[k++] = (double)(s->t_back - s->t_lost) / 1e6;
			if (slowest == NULL || s->t_back - s->t_lost >
			    slowest->t_back - slowest->t_lost)
				slowest = s;
		}
	}
	if (t->lost == 0) {
		printf("restart: no session lost its connection within %u s\n",
		    ld->restart_s);
		ld->ok = false;
	} else {
		double el = secs(ld->t_all_back - t->t_first_lost);

		printf("restart: %zu of %zu lost sessions back %.3f s after the "
		    "first loss; %" PRIu64 " handshakes, 0-RTT accepted %" PRIu64
		    " of %" PRIu64 " attempted (%" PRIu64 " rejected)\n",
		    t->back, t->lost, el, hs, acc, att, rej);
		print_dist("time without a session", v, k);
		print_back_timeline(ld, t);
		printf("  rove-load's own CPU from the first loss: %.2f s\n",
		    load_cpu_since_lost(ld));
		printf("  connection attempts: %" PRIu64 " in all, at most %u for "
		    "one session\n", tries, most_tries);
		if (slowest != NULL)
			printf("  slowest: session %zu, %.1f ms, %u attempts%s%s\n",
			    slowest->idx, (double)(slowest->t_back - slowest->t_lost) /
			    1e6, slowest->restart_attempts, slowest->failed[0] != '\0' ?
			    "; the last failed one: " : "", slowest->failed);
		printf("RESULT lost=%zu back=%zu back_s=%.3f handshakes=%" PRIu64
		    " zero_rtt_attempted=%" PRIu64 " zero_rtt_accepted=%" PRIu64
		    " zero_rtt_rejected=%" PRIu64 " attempts=%" PRIu64
		    " max_attempts=%u\n", t->lost, t->back, el, hs,
		    att, acc, rej, tries, most_tries);
		if (t->back != t->lost || t->up != t->ever_up)
			ld->ok = false;
	}
	fflush(stdout);
	free(v);
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: rove-load gen -n N -k KEYS -p PEERS [-a RULE]\n"
	    "       rove-load run -s ADDR:PORT -P PUBKEY -k KEYS [-n N] [-b ADDR] "
	    "[-B B] [-C C]\n"
	    "                 [-c SECS] [-i SECS] [-j J] [-R PID] [-m M (-t ADDR [-w W] "
	    "[-S BYTES] | -F ADDR:PORT) [-T SECS]]\n"
	    "                 [-r SECS] [-H SECS] [-K hybrid|classic] [-v]\n");
	exit(2);
}

static unsigned long
num(const char *s, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "rove-load: %s: expected a number from %lu to %lu\n",
		    s, min, max);
		exit(2);
	}
	return v;
}

static int
cmd_gen(int argc, char **argv)
{
	const char *keys = NULL, *peers = NULL, *rule = NULL;
	size_t n = 0;
	FILE *kf, *pf;
	int fd, ch;

	while ((ch = getopt(argc, argv, "n:k:p:a:")) != -1) {
		switch (ch) {
		case 'n': n = num(optarg, 1, MAX_SESSIONS); break;
		case 'k': keys = optarg; break;
		case 'p': peers = optarg; break;
		case 'a': rule = optarg; break;
		default: usage();
		}
	}
	if (n == 0 || keys == NULL || peers == NULL || optind != argc)
		usage();
	if ((fd = open(keys, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	    0600)) == -1 || (kf = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "rove-load: %s: %s\n", keys, strerror(errno));
		return 1;
	}
	if ((pf = fopen(peers, "w")) == NULL) {
		fprintf(stderr, "rove-load: %s: %s\n", peers, strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t priv[KEY_LEN], pub[KEY_LEN];
		char text[KEY_B64_LEN + 1];

		if (key_generate(priv) != 0 || key_public(priv, pub) != 0) {
			fprintf(stderr, "rove-load: cannot generate a key\n");
			return 1;
		}
		key_encode(priv, text);
		fprintf(kf, "%s\n", text);
		key_encode(pub, text);
		fprintf(pf, "\n[Peer]\nName = load-%05zu\nPublicKey = %s\n", i, text);
		if (rule != NULL)
			fprintf(pf, "AllowForward = %s\n", rule);
		explicit_bzero(priv, sizeof priv);
	}
	if (fclose(kf) != 0 || fclose(pf) != 0) {
		fprintf(stderr, "rove-load: write: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/* The first `n` keys of KEYS (all when n is 0), decoded. */
static uint8_t (*read_keys(const char *path, size_t *n))[KEY_LEN]
{
	uint8_t (*v)[KEY_LEN] = NULL;
	size_t k = 0, cap = 0;
	char line[256];
	FILE *f;

	if ((f = fopen(path, "r")) == NULL) {
		fprintf(stderr, "rove-load: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	while ((*n == 0 || k < *n) && fgets(line, sizeof line, f) != NULL) {
		if (k == MAX_SESSIONS)
			break;
		if (k == cap) {
			cap = cap ? cap * 2 : 1024;
			v = xrealloc(v, cap * sizeof *v);
		}
		if (key_decode(line, v[k]) != 0) {
			fprintf(stderr, "rove-load: %s:%zu: not a key\n", path, k + 1);
			exit(1);
		}
		k++;
	}
	fclose(f);
	explicit_bzero(line, sizeof line);
	if (k == 0 || (*n != 0 && k < *n)) {
		fprintf(stderr, "rove-load: %s: %zu keys, %zu wanted\n", path, k, *n);
		exit(1);
	}
	*n = k;
	return v;
}

/* -j: processes 1 .. procs-1, each of which returns here as itself. */
static int
start_procs(struct load *ld)
{
	pid_t parent = getpid();

	ld->me = 0;
	for (unsigned p = 1; p < ld->procs; p++) {
		pid_t pid = fork();

		if (pid == -1) {
			fprintf(stderr, "rove-load: fork: %s\n", strerror(errno));
			return -1;
		}
		if (pid == 0) {
			ld->me = p;
			(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
			/* The first process may have ended before that. */
			if (getppid() != parent)
				_exit(1);
			break;
		}
		ld->sh->c[p].pid = pid;
	}
	ld->c = &ld->sh->c[ld->me];
	ld->c->pid = getpid();
	return 0;
}

/* The first process: until every other one has its sessions prepared
 * (it runs its loop, in PH_PREPARE), or one of them failed to. */
static int
wait_procs_ready(struct load *ld)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (unsigned p = 1; p < ld->procs; p++) {
		while (!ld->sh->c[p].ready) {
			if (lost_a_process(ld))
				return -1;
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

/* The first process: wait for the others to end; false if one failed. */
static bool
wait_procs(struct load *ld)
{
	bool ok = true;

	for (unsigned p = 1; p < ld->procs; p++) {
		int status;
		pid_t pid = ld->sh->c[p].pid;

		if (pid <= 0) {
			ok = false;
			continue;
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			ok = false;
	}
	return ok;
}

/* Leave nothing behind on the server: close every connection of the
 * process's own sessions. */
static void
sessions_close(struct load *ld)
{
	for (size_t i = ld->me; i < ld->n; i += ld->procs) {
		struct sess *s = &ld->s[i];

		if (s->qc != NULL)
			quic_conn_close(s->qc, 0, "load generator done");
		quic_conn_free(s->qc);
		event_free(s->ev);
		event_free(s->retry_ev);
		udp_close(&s->sock);
		free(s->batch);
		free(s->session);
		free(s->params);
		wolfSSL_CTX_free(s->tls);
	}
	event_free(ld->tick_ev);
	event_free(ld->more_ev);
	if (ld->follow_ev != NULL)
		event_free(ld->follow_ev);
	event_base_free(ld->base);
}

static int
cmd_run(int argc, char **argv)
{
	struct load *ld = &the_load;
	const char *server = NULL, *pub = NULL, *keys = NULL;
	uint8_t (*privs)[KEY_LEN];
	struct rlimit rl;
	char *cause = NULL;
	uint64_t t0;
	enum tls_kex kex = TLS_KEX_HYBRID;
	int ch;

	ld->per_src = 8;
	ld->conc = 128;
	ld->connect_s = 120;
	ld->idle_s = 2;
	ld->window = 8;
	ld->pktsize = 1200;
	ld->traffic_s = 5;
	ld->ok = true;
	ld->procs = 1;
	while ((ch = getopt(argc, argv, "s:P:k:n:b:B:C:c:i:j:R:m:t:w:S:T:F:r:H:K:v")) != -1) {
		switch (ch) {
		case 's': server = optarg; break;
		case 'P': pub = optarg; break;
		case 'k': keys = optarg; break;
		case 'n': ld->n = num(optarg, 1, MAX_SESSIONS); break;
		case 'b':
			if (addr_parse_ip(optarg, &ld->src) != 0) {
				fprintf(stderr, "rove-load: -b %s: not an address\n", optarg);
				exit(2);
			}
			ld->has_src = true;
			break;
		case 'B': ld->per_src = num(optarg, 1, MAX_SESSIONS); break;
		case 'C': ld->conc = num(optarg, 1, MAX_SESSIONS); break;
		case 'c': ld->connect_s = (unsigned)num(optarg, 1, 3600); break;
		case 'i': ld->idle_s = (unsigned)num(optarg, 0, 3600); break;
		case 'j': ld->procs = (unsigned)num(optarg, 1, MAX_PROCS); break;
		case 'R': ld->roved = (pid_t)num(optarg, 1, INT32_MAX); break;
		case 'm': ld->active = num(optarg, 0, MAX_SESSIONS); break;
		case 't':
			if (addr_parse_ip(optarg, &ld->target) != 0 ||
			    ld->target.family != AF_INET) {
				fprintf(stderr, "rove-load: -t %s: not an IPv4 address\n",
				    optarg);
				exit(2);
			}
			ld->has_target = true;
			break;
		case 'w': ld->window = (unsigned)num(optarg, 1, 1024); break;
		case 'S': ld->pktsize = num(optarg, 28, 1380); break;
		case 'T': ld->traffic_s = (unsigned)num(optarg, 1, 3600); break;
		case 'F': {
			struct sockaddr_storage ss;
			socklen_t sslen;
			char *colon = strrchr(optarg, ':');

			if (addr_parse_sockaddr(optarg, &ss, &sslen) != 0 ||
			    !test_network((struct sockaddr *)&ss) || colon == NULL ||
			    (size_t)(colon - optarg) > PROTO_FWD_MAX_HOST) {
				fprintf(stderr, "rove-load: -F %s: not a numeric "
				    "ADDR:PORT of a test network\n", optarg);
				exit(2);
			}
			ld->fwd.type = PROTO_FWD_CONNECT;
			memcpy(ld->fwd.host, optarg, (size_t)(colon - optarg));
			ld->fwd.port = (uint16_t)num(colon + 1, 1, 65535);
			break;
		}
		case 'r': ld->restart_s = (unsigned)num(optarg, 1, 3600); break;
		case 'H': ld->hold_s = (unsigned)num(optarg, 1, 3600); break;
		case 'K':
			if (strcmp(optarg, "hybrid") == 0)
				kex = TLS_KEX_HYBRID;
			else if (strcmp(optarg, "classic") == 0)
				kex = TLS_KEX_CLASSIC;
			else
				usage();
			break;
		case 'v': ld->verbose++; break;
		default: usage();
		}
	}
	if (server == NULL || pub == NULL || keys == NULL || optind != argc ||
	    (ld->active > 0 && !ld->has_target && ld->fwd.port == 0))
		usage();
	if (key_decode(pub, ld->server_pub) != 0) {
		fprintf(stderr, "rove-load: -P: not a public key\n");
		exit(2);
	}
	if (addr_parse_sockaddr(server, &ld->server, &ld->serverlen) != 0) {
		fprintf(stderr, "rove-load: -s %s: not a numeric ADDR:PORT\n", server);
		exit(2);
	}
	if (!test_network((struct sockaddr *)&ld->server)) {
		fprintf(stderr, "rove-load: -s %s: only 198.18.0.0/15, fd00::/8 "
		    "and loopback may be loaded\n", server);
		exit(2);
	}
	if (ld->has_src && ld->src.family != ld->server.ss_family) {
		fprintf(stderr, "rove-load: -b: not of the server's family\n");
		exit(2);
	}
	log_open("rove-load", ld->verbose);
	signal(SIGPIPE, SIG_IGN);
	privs = read_keys(keys, &ld->n);
	/* A socket per session, and a few more. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < ld->n + 64) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < ld->n + 64) {
			fprintf(stderr, "rove-load: %zu sessions need %zu file "
			    "descriptors; the limit is %llu\n", ld->n, ld->n + 64,
			    (unsigned long long)rl.rlim_cur);
			exit(1);
		}
	}
	if (ld->procs > ld->n)
		ld->procs = (unsigned)ld->n;
	ld->sh = mmap(NULL, sizeof *ld->sh, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ld->s = mmap(NULL, ld->n * sizeof *ld->s, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ld->sh == MAP_FAILED || ld->s == MAP_FAILED)
		fatal("mmap");
	/* Fork before anything draws random numbers: each process seeds
	 * its own generators (random_bytes, every TLS context's). */
	if (start_procs(ld) != 0)
		exit(1);
	if ((ld->base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	quic_set_pin_check(pin_check);
	if (tls_set_kex(kex, &cause) != 0)
		fatalx("-K: %s", cause);
	random_bytes(ld->reset_secret, sizeof ld->reset_secret);
	t0 = clock_now();
	for (size_t i = ld->me; i < ld->n; i += ld->procs) {
		ld->s[i].idx = i;
		if (sess_prepare(ld, &ld->s[i], privs[i], &cause) != 0) {
			fprintf(stderr, "rove-load: session %zu: %s\n", i, cause);
			exit(1);
		}
	}
	explicit_bzero(privs, ld->n * sizeof *privs);
	free(privs);
	ld->conc_own = (ld->conc + ld->procs - 1 - ld->me) / ld->procs;
	ld->next_start = ld->me;
	ld->more_ev = event_new(ld->base, -1, 0, more_cb, ld);
	ld->tick_ev = event_new(ld->base, -1, EV_PERSIST, tick_cb, ld);
	event_add(ld->tick_ev, &(struct timeval){ 0, TICK_MS * 1000 });
	ld->c->seen = PH_PREPARE;
	if (ld->me > 0) {
		ld->follow_ev = event_new(ld->base, -1, EV_PERSIST, follow_cb, ld);
		event_add(ld->follow_ev, &(struct timeval){ 0, FOLLOW_MS * 1000 });
		ld->c->ready = true;
		event_base_dispatch(ld->base);
		sessions_close(ld);
		_exit(0);
	}
	if (wait_procs_ready(ld) != 0)
		exit(1);
	printf("rove-load: %zu sessions to %s (%zu per source address%s), at "
	    "most %zu handshakes at once; keys and sockets ready in %.2f s\n",
	    ld->n, server, ld->per_src, ld->has_src ? "" : " (any)", ld->conc,
	    secs(clock_now() - t0));
	fflush(stdout);

	if (ld->roved > 0) {
		rss_before = proc_rss_kb(ld->roved);
		cpu_connect_start = proc_cpu_s(ld->roved);
		if (rss_before < 0) {
			fprintf(stderr, "rove-load: cannot read /proc/%d\n",
			    (int)ld->roved);
			exit(1);
		}
	}
	self_cpu_connect_start = load_cpu_s(ld);
	set_phase(ld, PH_CONNECT);
	event_base_dispatch(ld->base);
	sessions_close(ld);
	ld->ok = wait_procs(ld) && ld->ok;
	munmap(ld->s, ld->n * sizeof *ld->s);
	munmap(ld->sh, sizeof *ld->sh);
	return ld->ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "gen") == 0)
		return cmd_gen(argc - 1, argv + 1);
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	usage();
}

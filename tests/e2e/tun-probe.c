/* tun-probe: drives tun.c, tun-netlink.c and tun-monitor.c for test-tun.sh.
 *
 * Reads one command per line on stdin and answers one line on stdout:
 * "ok ..." or "error <cause>". The TUN device lives as long as the probe,
 * so the script checks the kernel's state with `ip` between commands.
 *
 *	open NAME               ok NAME IFINDEX
 *	read                    ok LEN (0: nothing waiting)
 *	write HEX               ok | error <strerror>
 *	addr PREFIX             tun_netlink_add_address on the TUN
 *	addr-on IFINDEX PREFIX  the same on another interface
 *	mtu N                   tun_netlink_set_mtu_up
 *	route PREFIX            tun_netlink_add_route via the TUN
 *	routes PREFIX N         N consecutive /24 (or /64) routes from PREFIX
 *	delroute PREFIX         tun_netlink_del_route
 *	get IP                  ok gw=IP|- dev=NAME src=IP|- (kept as the path)
 *	host IP / delhost IP    add / delete a host route along the kept path
 *	ping SRC DST            ICMP(v6) echo written to the TUN; ok reply
 *	monitor                 start a tun_monitor
 *	oneshot                 start a second monitor whose callback counts
 *	                        and frees it on the first event
 *	oneshot-count           ok N: how often that callback ran
 *	events                  one nonblocking loop pass; the callback counts
 *	                        since the last "events": ok link=N address=N
 *	                        route=N
 *	wait-events KINDS MS    run the loop until each kind in KINDS
 *	                        ("link,route") was seen, at most MS ms;
 *	                        counts as for "events"
 *	close                   tun_close
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "base/addr.h"
#include "tun/tun-monitor.h"
#include "tun/tun-netlink.h"
#include "tun/tun.h"
#include "wire/ippkt.h"

static struct tun tun = { .fd = -1 };
static struct tun_netlink_path path;
static bool have_path;
static struct event_base *base;
static struct tun_monitor *monitor;
static unsigned counts[3];
static struct tun_monitor *oneshot;
static unsigned oneshot_calls;

static void
reply_cause(char *cause)
{
	printf("error %s\n", cause);
	free(cause);
}

static const char *
ip_str(const struct ipaddr *a, char *buf, size_t len)
{
	return inet_ntop(a->family, a->b, buf, (socklen_t)len);
}

/* Build an echo request from src to dst; returns its length. */
static size_t
build_echo(const struct ipaddr *src, const struct ipaddr *dst, uint8_t *pkt)
{
	static const uint8_t payload[16] = "rove-tun-probe!";
	uint8_t *icmp;
	size_t hlen, ilen = 8 + sizeof payload;
	uint16_t sum;

	if (src->family == AF_INET) {
		hlen = 20;
		memset(pkt, 0, hlen);
		pkt[0] = 0x45;
		pkt[2] = (uint8_t)((hlen + ilen) >> 8);
		pkt[3] = (uint8_t)(hlen + ilen);
		pkt[6] = 0x40;                          /* DF */
		pkt[8] = 64;
		pkt[9] = 1;                             /* ICMP */
		memcpy(pkt + 12, src->b, 4);
		memcpy(pkt + 16, dst->b, 4);
		sum = ippkt_checksum(pkt, hlen, 0);
		pkt[10] = (uint8_t)(sum >> 8);
		pkt[11] = (uint8_t)sum;
	} else {
		hlen = 40;
		memset(pkt, 0, hlen);
		pkt[0] = 0x60;
		pkt[4] = (uint8_t)(ilen >> 8);
		pkt[5] = (uint8_t)ilen;
		pkt[6] = 58;                            /* ICMPv6 */
		pkt[7] = 64;
		memcpy(pkt + 8, src->b, 16);
		memcpy(pkt + 24, dst->b, 16);
	}
	icmp = pkt + hlen;
	memset(icmp, 0, 8);
	icmp[0] = src->family == AF_INET ? 8 : 128;
	icmp[4] = 0x12;                                 /* identifier */
	icmp[5] = 0x34;
	icmp[7] = 1;                                    /* sequence */
	memcpy(icmp + 8, payload, sizeof payload);
	if (src->family == AF_INET)
		sum = ippkt_checksum(icmp, ilen, 0);
	else {
		uint8_t pseudo[40];

		memcpy(pseudo, pkt + 8, 32);
		memset(pseudo + 32, 0, 8);
		pseudo[35] = (uint8_t)ilen;
		pseudo[39] = 58;
		sum = ippkt_checksum(icmp, ilen,
		    (uint16_t)~ippkt_checksum(pseudo, sizeof pseudo, 0));
	}
	icmp[2] = (uint8_t)(sum >> 8);
	icmp[3] = (uint8_t)sum;
	return hlen + ilen;
}

/* True if pkt is the echo reply from dst to src that build_echo asks for. */
static bool
is_reply(const uint8_t *pkt, size_t len, const struct ipaddr *src,
    const struct ipaddr *dst)
{
	size_t hlen;

	if (src->family == AF_INET) {
		if (len < 28 || pkt[0] != 0x45 || pkt[9] != 1 ||
		    memcmp(pkt + 12, dst->b, 4) != 0 ||
		    memcmp(pkt + 16, src->b, 4) != 0)
			return false;
		hlen = 20;
		return pkt[hlen] == 0 && pkt[hlen + 4] == 0x12 &&
		    pkt[hlen + 5] == 0x34 && pkt[hlen + 7] == 1;
	}
	if (len < 48 || (pkt[0] >> 4) != 6 || pkt[6] != 58 ||
	    memcmp(pkt + 8, dst->b, 16) != 0 ||
	    memcmp(pkt + 24, src->b, 16) != 0)
		return false;
	hlen = 40;
	return pkt[hlen] == 129 && pkt[hlen + 4] == 0x12 &&
	    pkt[hlen + 5] == 0x34 && pkt[hlen + 7] == 1;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
cmd_ping(const char *s, const char *d)
{
	struct ipaddr src, dst;
	uint8_t pkt[2048];
	size_t len;
	ssize_t n;
	int64_t deadline = now_ms() + 3000;
	int err;

	if (s == NULL || d == NULL || addr_parse_ip(s, &src) != 0 ||
	    addr_parse_ip(d, &dst) != 0 || src.family != dst.family) {
		printf("error usage: ping SRC DST\n");
		return;
	}
	len = build_echo(&src, &dst, pkt);
	if ((err = tun_write(&tun, pkt, len)) != 0) {
		printf("error %s\n", strerror(-err));
		return;
	}
	/* Other packets (MLD, router solicitations) may come first. */
	while (now_ms() < deadline) {
		struct pollfd pfd = { .fd = tun.fd, .events = POLLIN };

		if (poll(&pfd, 1, (int)(deadline - now_ms())) <= 0)
			continue;
		n = tun_read(&tun, pkt, sizeof pkt);
		if (n < 0) {
			printf("error %s\n", strerror((int)-n));
			return;
		}
		if (n > 0 && is_reply(pkt, (size_t)n, &src, &dst)) {
			printf("ok reply\n");
			return;
		}
	}
	printf("error no reply\n");
}

static void
cmd_write(const char *hex)
{
	uint8_t pkt[2048];
	size_t len = 0;
	unsigned byte;
	int err;

	if (hex == NULL || strlen(hex) % 2 != 0 || strlen(hex) / 2 > sizeof pkt) {
		printf("error usage: write HEX\n");
		return;
	}
	for (; hex[0] != '\0'; hex += 2) {
		if (sscanf(hex, "%2x", &byte) != 1) {
			printf("error usage: write HEX\n");
			return;
		}
		pkt[len++] = (uint8_t)byte;
	}
	if ((err = tun_write(&tun, pkt, len)) != 0)
		printf("error %s\n", strerror(-err));
	else
		printf("ok\n");
}

static void
monitor_cb(enum tun_monitor_event ev, void *arg)
{
	(void)arg;
	counts[ev]++;
}

/* Frees its own monitor: later kinds pending in the same pass must not
 * be delivered to a freed monitor. */
static void
oneshot_cb(enum tun_monitor_event ev, void *arg)
{
	(void)ev;
	(void)arg;
	oneshot_calls++;
	tun_monitor_free(oneshot);
	oneshot = NULL;
}

static void
print_counts(void)
{
	printf("ok %s=%u %s=%u %s=%u\n",
	    tun_monitor_event_name(TUN_MONITOR_LINK), counts[0],
	    tun_monitor_event_name(TUN_MONITOR_ADDRESS), counts[1],
	    tun_monitor_event_name(TUN_MONITOR_ROUTE), counts[2]);
	memset(counts, 0, sizeof counts);
}

/* Run the loop until each kind named in `kinds` ("link,route") was seen,
 * for at most `ms` milliseconds. */
static void
cmd_wait_events(const char *kinds, const char *ms)
{
	int64_t deadline = now_ms() + (ms != NULL ? atoi(ms) : 0);
	bool want[3];

	for (unsigned i = 0; i < 3; i++) {
		want[i] = kinds != NULL &&
		    strstr(kinds, tun_monitor_event_name(i)) != NULL;
	}
	while (now_ms() < deadline && ((want[0] && counts[0] == 0) ||
	    (want[1] && counts[1] == 0) || (want[2] && counts[2] == 0))) {
		struct timeval tv = { 0, 20000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	print_counts();
}

static int
parse_prefix(const char *s, struct prefix *p)
{
	if (s == NULL || addr_parse_prefix(s, p, true) != 0) {
		printf("error bad prefix\n");
		return -1;
	}
	return 0;
}

static void
cmd_routes(const char *first, const char *count)
{
	struct prefix p;
	char *cause = NULL;
	int n = count != NULL ? atoi(count) : 0;

	if (parse_prefix(first, &p) != 0)
		return;
	for (int i = 0; i < n; i++) {
		if (tun_netlink_add_route(tun.ifindex, &p, &cause) != 0) {
			reply_cause(cause);
			return;
		}
		/* Next /24 or /64: bump the byte just above the prefix. */
		p.addr.b[p.len / 8 - 1]++;
	}
	printf("ok\n");
}

static void
command(char *line)
{
	char *argv[4] = { NULL }, *cause = NULL, *save = NULL;
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN], ifn[IF_NAMESIZE];
	struct prefix p;
	struct ipaddr ip;
	int argc = 0, rc = 0;
	ssize_t n;
	uint8_t buf[2048];

	for (char *t = strtok_r(line, " \t\n", &save); t != NULL && argc < 4;
	    t = strtok_r(NULL, " \t\n", &save))
		argv[argc++] = t;
	if (argc == 0)
		return;

	if (strcmp(argv[0], "open") == 0) {
		if (tun_open(&tun, argv[1], false, &cause) != 0)
			reply_cause(cause);
		else
			printf("ok %s %d\n", tun.name, tun.ifindex);
	} else if (strcmp(argv[0], "close") == 0) {
		tun_close(&tun);
		printf("ok\n");
	} else if (strcmp(argv[0], "read") == 0) {
		n = tun_read(&tun, buf, sizeof buf);
		if (n < 0)
			printf("error %s\n", strerror((int)-n));
		else
			printf("ok %zd\n", n);
	} else if (strcmp(argv[0], "write") == 0) {
		cmd_write(argv[1]);
	} else if (strcmp(argv[0], "addr") == 0) {
		if (parse_prefix(argv[1], &p) == 0) {
			rc = tun_netlink_add_address(tun.ifindex, &p, &cause);
			goto done;
		}
	} else if (strcmp(argv[0], "addr-on") == 0) {
		if (parse_prefix(argv[2], &p) == 0) {
			rc = tun_netlink_add_address(atoi(argv[1]), &p, &cause);
			goto done;
		}
	} else if (strcmp(argv[0], "mtu") == 0) {
		rc = tun_netlink_set_mtu_up(tun.ifindex,
		    (unsigned)strtoul(argv[1] != NULL ? argv[1] : "0", NULL, 10),
		    &cause);
		goto done;
	} else if (strcmp(argv[0], "route") == 0) {
		if (parse_prefix(argv[1], &p) == 0) {
			rc = tun_netlink_add_route(tun.ifindex, &p, &cause);
			goto done;
		}
	} else if (strcmp(argv[0], "routes") == 0) {
		cmd_routes(argv[1], argv[2]);
	} else if (strcmp(argv[0], "delroute") == 0) {
		if (parse_prefix(argv[1], &p) == 0) {
			rc = tun_netlink_del_route(tun.ifindex, &p, &cause);
			goto done;
		}
	} else if (strcmp(argv[0], "get") == 0) {
		if (argv[1] == NULL || addr_parse_ip(argv[1], &ip) != 0) {
			printf("error bad address\n");
		} else if (tun_netlink_get_route(&ip, &path, &cause) != 0) {
			have_path = false;
			reply_cause(cause);
		} else {
			have_path = true;
			if (if_indextoname((unsigned)path.ifindex, ifn) == NULL)
				snprintf(ifn, sizeof ifn, "?");
			printf("ok gw=%s dev=%s src=%s\n",
			    path.has_gateway ? ip_str(&path.gateway, a, sizeof a) :
			    "-", ifn,
			    path.has_src ? ip_str(&path.src, b, sizeof b) : "-");
		}
	} else if (strcmp(argv[0], "host") == 0 ||
	    strcmp(argv[0], "delhost") == 0) {
		if (argv[1] == NULL || addr_parse_ip(argv[1], &ip) != 0 ||
		    !have_path) {
			printf("error bad address or no path\n");
		} else {
			if (argv[0][0] == 'h')
				rc = tun_netlink_add_host_route(&ip, &path, &cause);
			else
				rc = tun_netlink_del_host_route(&ip, &path, &cause);
			goto done;
		}
	} else if (strcmp(argv[0], "ping") == 0) {
		cmd_ping(argv[1], argv[2]);
	} else if (strcmp(argv[0], "monitor") == 0) {
		monitor = tun_monitor_create(base, monitor_cb, NULL, &cause);
		if (monitor == NULL)
			reply_cause(cause);
		else
			printf("ok\n");
	} else if (strcmp(argv[0], "oneshot") == 0) {
		oneshot = tun_monitor_create(base, oneshot_cb, NULL, &cause);
		if (oneshot == NULL)
			reply_cause(cause);
		else
			printf("ok\n");
	} else if (strcmp(argv[0], "oneshot-count") == 0) {
		printf("ok %u\n", oneshot_calls);
	} else if (strcmp(argv[0], "events") == 0) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		print_counts();
	} else if (strcmp(argv[0], "wait-events") == 0) {
		cmd_wait_events(argv[1], argv[2]);
	} else
		printf("error unknown command %s\n", argv[0]);
	return;

done:
	if (rc != 0)
		reply_cause(cause);
	else
		printf("ok\n");
}

int
main(void)
{
	char line[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	base = event_base_new();
	if (base == NULL)
		return 1;
	while (fgets(line, sizeof line, stdin) != NULL)
		command(line);
	tun_monitor_free(oneshot);
	tun_monitor_free(monitor);
	tun_close(&tun);
	event_base_free(base);
	return 0;
}

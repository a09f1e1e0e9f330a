/* Resolve a forward's target, check it, connect to it. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "dial.h"
#include "tcp.h"
#include "wire/proto-fwd.h"

struct dial {
	struct event_base *base;
	struct evdns_base *dns;
	struct event *start;     /* defers the work out of dial_start */
	struct evdns_getaddrinfo_request *lookup;
	struct tcp_connect *conn;
	bool cancelled;
	bool udp;          /* a UDP flow's socket, not a TCP connection */
	char *host;
	uint16_t port;
	dial_check_cb check;
	dial_cb cb;
	void *arg;
};

struct evdns_base *
dial_resolver_new(struct event_base *base, char **cause)
{
	struct evdns_base *dns;

	dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	/* No resolv.conf: names from /etc/hosts still work. */
	if (dns == NULL && (dns = evdns_base_new(base, 0)) != NULL)
		evdns_base_load_hosts(dns, NULL);
	if (dns == NULL) {
		*cause = xstrdup("cannot set up the DNS resolver");
		return NULL;
	}
	/* Fail within seconds, not minutes. */
	evdns_base_set_option(dns, "timeout:", "2");
	evdns_base_set_option(dns, "attempts:", "2");
	return dns;
}

static void
dial_free(struct dial *d)
{
	tcp_connect_cancel(d->conn);
	event_free(d->start);
	free(d->host);
	free(d);
}

static void
finish(struct dial *d, int fd, uint64_t err)
{
	dial_cb cb = d->cb;
	void *arg = d->arg;

	dial_free(d);
	cb(fd, err, arg);
}

static void
connected_cb(int fd, uint64_t err, void *arg)
{
	struct dial *d = arg;

	d->conn = NULL; /* tcp.c has freed it */
	finish(d, fd, err);
}

static void
connect_to(struct dial *d, const struct sockaddr *sa, socklen_t salen)
{
	uint64_t err;
	int fd, one = 1;

	if (d->udp) {
		/* Out of descriptors is what LIMIT says. */
		fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, IPPROTO_UDP);
		if (fd == -1) {
			finish(d, -1, PROTO_FWD_ERR_LIMIT);
			return;
		}
		/* As for TCP (tcp.c): the address checked is the family
		 * reached, never IPv4 through an IPv6 socket. Nothing to wait
		 * for then: connect only sets the peer. */
		if ((sa->sa_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6,
		    IPV6_V6ONLY, &one, sizeof one) == -1) ||
		    connect(fd, sa, salen) == -1) {
			err = tcp_errno_to_fwd(errno);
			close(fd);
			finish(d, -1, err);
			return;
		}
		udp_buffers(fd, UDP_FLOW_BUF);
		finish(d, fd, 0);
		return;
	}
	d->conn = tcp_connect_start(d->base, sa, salen, TCP_CONNECT_TIMEOUT_MS,
	    connected_cb, d, &err);
	if (d->conn == NULL)
		finish(d, -1, err);
}

/* Whether the dial may connect to `sa`: 0 with the address to use in
 * `out` (IPv4-mapped made IPv4, so the check and the socket see the host
 * the connection would really reach), else the code that ends the dial if
 * no other address passes. */
static uint64_t
vet(struct dial *d, const struct sockaddr *sa, struct sockaddr_storage *out,
    socklen_t *outlen)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(10000, 5);
	char buf[ADDR_STRLEN], target[PROTO_FWD_MAX_HOST + 16];
	const char *why;
	struct ipaddr a, orig;
	uint16_t port;

	if (addr_from_sockaddr(sa, &a, &port) != 0)
		return PROTO_FWD_ERR_UNREACHABLE;
	orig = a;
	if ((why = addr_target_normalise(&a)) != NULL) {
		if (log_ratelimit_ok(&rl, clock_now_ms()))
			log_warn("forward to %s: %s address %s refused",
			    addr_hostport_str(target, sizeof target, d->host,
			    d->port), why, addr_ip_str(&orig, buf));
		return PROTO_FWD_ERR_DENIED;
	}
	addr_to_sockaddr(&a, port, out, outlen);
	return d->check != NULL ? d->check((struct sockaddr *)out, d->arg) : 0;
}

/*
 * Connect to the first address of the list that passes vet; the others
 * are never tried. A name may resolve to addresses the policy allows and
 * others it refuses (a dual-stack name where the rules list one family, or
 * records the peer controls): skipping the refused ones keeps the name
 * usable and still reaches only allowed hosts, since every address is
 * vetted after resolution and the one vetted is the one connected to.
 */
static void
connect_first(struct dial *d, const struct evutil_addrinfo *ai)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	uint64_t err = 0, e;

	for (; ai != NULL; ai = ai->ai_next) {
		if ((e = vet(d, ai->ai_addr, &ss, &sslen)) == 0) {
			connect_to(d, (struct sockaddr *)&ss, sslen);
			return;
		}
		if (err == 0)
			err = e;
	}
	finish(d, -1, err != 0 ? err : PROTO_FWD_ERR_NAME);
}

static void
lookup_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct dial *d = arg;

	d->lookup = NULL;
	if (d->cancelled) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		dial_free(d);
		return;
	}
	if (result != 0 || res == NULL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		finish(d, -1, PROTO_FWD_ERR_NAME);
		return;
	}
	connect_first(d, res);
	evutil_freeaddrinfo(res);
}

static void
start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dial *d = arg;
	struct evutil_addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = d->udp ? SOCK_DGRAM : SOCK_STREAM,
		.ai_protocol = d->udp ? IPPROTO_UDP : IPPROTO_TCP,
		.ai_flags = EVUTIL_AI_ADDRCONFIG,
	};
	struct evdns_getaddrinfo_request *r;
	struct sockaddr_storage ss;
	struct ipaddr a;
	socklen_t sslen;
	char port[8];

	(void)fd;
	(void)what;
	if (addr_parse_ip(d->host, &a) == 0) {
		struct evutil_addrinfo literal = { 0 };

		addr_to_sockaddr(&a, d->port, &ss, &sslen);
		literal.ai_addr = (struct sockaddr *)&ss;
		literal.ai_addrlen = sslen;
		connect_first(d, &literal);
		return;
	}
	snprintf(port, sizeof port, "%u", d->port);
	/* NULL: the answer came at once (/etc/hosts, a cached name) and
	 * lookup_cb has already run and freed d. */
	r = evdns_getaddrinfo(d->dns, d->host, port, &hints, lookup_cb, d);
	if (r != NULL)
		d->lookup = r;
}

static struct dial *
start(struct event_base *base, struct evdns_base *dns, const char *host,
    uint16_t port, bool udp, dial_check_cb check, dial_cb cb, void *arg)
{
	struct dial *d = xcalloc(1, sizeof *d);

	d->udp = udp;
	d->base = base;
	d->dns = dns;
	d->host = xstrdup(host);
	d->port = port;
	d->check = check;
	d->cb = cb;
	d->arg = arg;
	d->start = evtimer_new(base, start_cb, d);
	if (d->start == NULL)
		fatalx("out of memory");
	event_active(d->start, EV_TIMEOUT, 1);
	return d;
}

struct dial *
dial_start(struct event_base *base, struct evdns_base *dns, const char *host,
    uint16_t port, dial_check_cb check, dial_cb cb, void *arg)
{
	return start(base, dns, host, port, false, check, cb, arg);
}

struct dial *
dial_start_udp(struct event_base *base, struct evdns_base *dns,
    const char *host, uint16_t port, dial_check_cb check, dial_cb cb,
    void *arg)
{
	return start(base, dns, host, port, true, check, cb, arg);
}

void
dial_cancel(struct dial *d)
{
	if (d == NULL)
		return;
	if (d->lookup != NULL) {
		/* lookup_cb runs (now or later) with EVUTIL_EAI_CANCEL and frees d. */
		d->cancelled = true;
		evdns_getaddrinfo_cancel(d->lookup);
		return;
	}
	dial_free(d);
}

/* Resolve a forward's target, check it, connect to it. */
#include <stdio.h>
#include <stdlib.h>

#include "addr.h"
#include "dial.h"
#include "log.h"
#include "proto-fwd.h"
#include "tcp.h"
#include "xmalloc.h"

struct dial {
	struct event_base *base;
	struct evdns_base *dns;
	struct event *start;     /* defers the work out of dial_start */
	struct evdns_getaddrinfo_request *lookup;
	struct tcp_connect *conn;
	bool cancelled;
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

	if (d->check != NULL && (err = d->check(sa, d->arg)) != 0) {
		finish(d, -1, err);
		return;
	}
	d->conn = tcp_connect_start(d->base, sa, salen, TCP_CONNECT_TIMEOUT_MS,
	    connected_cb, d, &err);
	if (d->conn == NULL)
		finish(d, -1, err);
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
	connect_to(d, res->ai_addr, (socklen_t)res->ai_addrlen);
	evutil_freeaddrinfo(res);
}

static void
start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dial *d = arg;
	struct evutil_addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_protocol = IPPROTO_TCP,
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
		addr_to_sockaddr(&a, d->port, &ss, &sslen);
		connect_to(d, (struct sockaddr *)&ss, sslen);
		return;
	}
	snprintf(port, sizeof port, "%u", d->port);
	/* NULL: the answer came at once (/etc/hosts, a cached name) and
	 * lookup_cb has already run and freed d. */
	r = evdns_getaddrinfo(d->dns, d->host, port, &hints, lookup_cb, d);
	if (r != NULL)
		d->lookup = r;
}

struct dial *
dial_start(struct event_base *base, struct evdns_base *dns, const char *host,
    uint16_t port, dial_check_cb check, dial_cb cb, void *arg)
{
	struct dial *d = xcalloc(1, sizeof *d);

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

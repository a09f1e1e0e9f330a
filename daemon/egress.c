/* Forward targets reached from roved: policy, DNS, connect, -R listeners. */
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "clock.h"
#include "egress.h"
#include "log.h"
#include "tcp.h"
#include "xmalloc.h"

struct egress {
	struct event_base *base;
	struct evdns_base *dns;
};

/* Work in progress for one forward: a name lookup, then a connect. */
struct egress_req {
	struct egress *eg;
	struct fwd *fwd;          /* NULL once the forward is gone */
	const struct cfg_peer *peer;
	bool name_allowed;        /* a name rule matched: any address is fine */
	uint16_t port;
	struct evdns_getaddrinfo_request *dns;
	struct tcp_connect *conn;
};

struct egress_listener {
	struct fwd_set *set;
	uint16_t port;
	int fd;
	struct event *ev;
};

static struct log_ratelimit deny_rl = LOG_RATELIMIT_INIT(10000, 5);

struct egress *
egress_create(struct event_base *base, char **cause)
{
	struct egress *eg = xcalloc(1, sizeof *eg);

	eg->base = base;
	/* /etc/resolv.conf and /etc/hosts, looked up without blocking. */
	eg->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (eg->dns == NULL) {
		/* No resolv.conf: names from /etc/hosts still work. */
		eg->dns = evdns_base_new(base, 0);
		if (eg->dns == NULL) {
			*cause = xstrdup("cannot set up the DNS resolver");
			free(eg);
			return NULL;
		}
		evdns_base_load_hosts(eg->dns, NULL);
	}
	/* A forward waits on the lookup: fail within seconds, not minutes. */
	evdns_base_set_option(eg->dns, "timeout:", "2");
	evdns_base_set_option(eg->dns, "attempts:", "2");
	return eg;
}

void
egress_free(struct egress *eg)
{
	if (eg == NULL)
		return;
	evdns_base_free(eg->dns, 0);
	free(eg);
}

static bool
port_ok(uint16_t rule, uint16_t port)
{
	return rule == 0 || rule == port;
}

static bool
address_allowed(const struct cfg_peer *peer, const struct ipaddr *a, uint16_t port)
{
	for (size_t i = 0; i < peer->nallow_forward; i++) {
		const struct cfg_forward_rule *r = &peer->allow_forward[i];
		if (!r->is_name && port_ok(r->port, port) &&
		    addr_prefix_contains(&r->prefix, a))
			return true;
	}
	return false;
}

static bool
name_allowed(const struct cfg_peer *peer, const char *name, uint16_t port)
{
	for (size_t i = 0; i < peer->nallow_forward; i++) {
		const struct cfg_forward_rule *r = &peer->allow_forward[i];
		if (r->is_name && port_ok(r->port, port) &&
		    strcasecmp(r->name, name) == 0)
			return true;
	}
	return false;
}

static void
req_free(struct egress_req *req)
{
	if (req->fwd != NULL)
		fwd_set_arg(req->fwd, NULL);
	tcp_connect_cancel(req->conn);
	free(req);
}

static void
finish(struct egress_req *req, int fd, uint64_t code)
{
	struct fwd *f = req->fwd;

	req->conn = NULL; /* tcp.c has freed it */
	req_free(req);
	if (f == NULL) {
		if (fd != -1)
			close(fd);
		return;
	}
	if (fd != -1)
		fwd_connected(f, fd);
	else
		fwd_fail(f, code);
}

static void
connected_cb(int fd, uint64_t err, void *arg)
{
	finish(arg, fd, err);
}

static void
deny(struct egress_req *req, const char *what)
{
	if (log_ratelimit_ok(&deny_rl, clock_now_ms()))
		log_warn("peer %s: forward to %s denied by AllowForward",
		    req->peer->name, what);
	finish(req, -1, PROTO_FWD_ERR_DENIED);
}

static void
connect_to(struct egress_req *req, const struct sockaddr *sa, socklen_t salen)
{
	struct ipaddr a;
	uint16_t port;
	uint64_t err;

	if (addr_from_sockaddr(sa, &a, &port) != 0) {
		finish(req, -1, PROTO_FWD_ERR_UNREACHABLE);
		return;
	}
	if (!req->name_allowed && !address_allowed(req->peer, &a, req->port)) {
		char buf[ADDR_STRLEN];
		deny(req, addr_sockaddr_str(sa, buf));
		return;
	}
	req->conn = tcp_connect_start(req->eg->base, sa, salen,
	    TCP_CONNECT_TIMEOUT_MS, connected_cb, req, &err);
	if (req->conn == NULL)
		finish(req, -1, err);
}

static void
dns_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct egress_req *req = arg;

	req->dns = NULL;
	if (result == EVUTIL_EAI_CANCEL) {
		/* The forward went away (egress_release); nothing to report. */
		req_free(req);
		return;
	}
	if (result != 0 || res == NULL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		finish(req, -1, PROTO_FWD_ERR_NAME);
		return;
	}
	connect_to(req, res->ai_addr, (socklen_t)res->ai_addrlen);
	evutil_freeaddrinfo(res);
}

void
egress_request(struct egress *eg, const struct cfg_peer *peer, struct fwd *f,
    const struct proto_fwd_header *hdr)
{
	struct egress_req *req;
	struct sockaddr_storage ss;
	struct ipaddr a;
	socklen_t sslen;

	if (hdr->type != PROTO_FWD_CONNECT) {
		fwd_fail(f, PROTO_FWD_ERR_PROTOCOL);
		return;
	}
	req = xcalloc(1, sizeof *req);
	req->eg = eg;
	req->fwd = f;
	req->peer = peer;
	req->port = hdr->port;
	fwd_set_arg(f, req);
	if (addr_parse_ip(hdr->host, &a) == 0) {
		addr_to_sockaddr(&a, hdr->port, &ss, &sslen);
		connect_to(req, (struct sockaddr *)&ss, sslen);
		return;
	}
	req->name_allowed = name_allowed(peer, hdr->host, hdr->port);
	{
		struct evutil_addrinfo hints = {
			.ai_family = AF_UNSPEC,
			.ai_socktype = SOCK_STREAM,
			.ai_protocol = IPPROTO_TCP,
			.ai_flags = EVUTIL_AI_ADDRCONFIG,
		};
		char port[8];
		struct evdns_getaddrinfo_request *r;

		snprintf(port, sizeof port, "%u", hdr->port);
		/* NULL: the answer came at once (/etc/hosts, a cached name) and
		 * dns_cb has already run, perhaps freeing req. */
		r = evdns_getaddrinfo(eg->dns, hdr->host, port, &hints, dns_cb, req);
		if (r != NULL)
			req->dns = r;
	}
}

void
egress_release(struct fwd *f, void *arg)
{
	struct egress_req *req = arg;

	(void)f;
	req->fwd = NULL;
	if (req->dns != NULL) {
		/* dns_cb runs with EVUTIL_EAI_CANCEL and frees req. */
		evdns_getaddrinfo_cancel(req->dns);
		return;
	}
	req_free(req);
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct egress_listener *l = arg;
	struct proto_fwd_header hdr = { .type = PROTO_FWD_REMOTE, .port = l->port };
	uint64_t err;
	int fd;

	(void)what;
	/* Accept what is waiting, bounded so one listener cannot hog the loop. */
	for (int i = 0; i < 16; i++) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE)
				log_warn("remote forward port %u: %s", l->port,
				    strerror(errno));
			return;
		}
		(void)fwd_open(l->set, FWD_REMOTE, fd, &hdr, NULL, &err);
	}
}

struct egress_listener *
egress_listen(struct egress *eg, const struct cfg_peer *peer, struct fwd_set *set,
    uint16_t port, uint64_t *code)
{
	struct egress_listener *l;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	char *cause = NULL;
	bool allowed = false;
	int fd;

	for (size_t i = 0; i < peer->nallow_remote_forward; i++)
		allowed |= peer->allow_remote_forward[i] == port;
	if (!allowed) {
		if (log_ratelimit_ok(&deny_rl, clock_now_ms()))
			log_warn("peer %s: remote forward on port %u denied by "
			    "AllowRemoteForward", peer->name, port);
		*code = PROTO_FWD_ERR_DENIED;
		return NULL;
	}
	if ((fd = tcp_listen((struct sockaddr *)&sin, sizeof sin, &cause)) == -1) {
		log_warn("peer %s: remote forward: %s", peer->name, cause);
		free(cause);
		*code = PROTO_FWD_ERR_UNREACHABLE;
		return NULL;
	}
	l = xcalloc(1, sizeof *l);
	l->set = set;
	l->port = port;
	l->fd = fd;
	l->ev = event_new(eg->base, fd, EV_READ | EV_PERSIST, accept_cb, l);
	event_add(l->ev, NULL);
	log_info("peer %s: remote forward listening on port %u", peer->name, port);
	return l;
}

void
egress_listener_free(struct egress_listener *l)
{
	if (l == NULL)
		return;
	event_free(l->ev);
	close(l->fd);
	free(l);
}

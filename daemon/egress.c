/* Forward targets reached from roved: policy, DNS, connect, -R listeners. */
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/accept.h"
#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "egress.h"
#include "forward/dial.h"
#include "forward/tcp.h"

struct egress {
	struct event_base *base;
	struct evdns_base *dns;
};

/* Work in progress for one forward: the dial, and what its policy check
 * needs. Freed when the dial ends or the forward goes away first. */
struct egress_req {
	struct fwd *fwd;
	struct egress_hold *hold;   /* held on it, not dialed yet */
	TAILQ_ENTRY(egress_req) held;
	const struct cfg_peer *peer;
	bool name_allowed;        /* a name rule matched: any address is fine */
	uint16_t port;
	struct dial *dial;
	char host[PROTO_FWD_MAX_HOST + 1];
	char denied[ADDR_STRLEN]; /* the first address the rules refused */
};

struct egress_listener {
	struct fwd_set *set;
	uint16_t port;
	int fd;
	struct event *ev;
	struct accept_guard guard;
};

static struct log_ratelimit deny_rl = LOG_RATELIMIT_INIT(10000, 5);

struct egress *
egress_create(struct event_base *base, char **cause)
{
	struct egress *eg = xcalloc(1, sizeof *eg);

	eg->base = base;
	if ((eg->dns = dial_resolver_new(base, cause)) == NULL) {
		free(eg);
		return NULL;
	}
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
		struct prefix p = r->prefix;

		/* Targets are matched with IPv4-mapped made IPv4; so are
		 * rules written that way. */
		addr_prefix_normalise(&p);
		if (!r->is_name && port_ok(r->port, port) &&
		    addr_prefix_contains(&p, a))
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

/* Each address the target resolved to (or the literal asked for), already
 * normalised by dial.c, must be allowed, unless a rule allowed the name
 * itself. A refusal is logged once the dial has ended, and only if no
 * address passed. */
static uint64_t
check_target(const struct sockaddr *sa, void *arg)
{
	struct egress_req *req = arg;
	struct ipaddr a;
	uint16_t port;

	if (addr_from_sockaddr(sa, &a, &port) != 0)
		return PROTO_FWD_ERR_UNREACHABLE;
	if (req->name_allowed || address_allowed(req->peer, &a, req->port))
		return 0;
	if (req->denied[0] == '\0')
		addr_ip_str(&a, req->denied);
	return PROTO_FWD_ERR_DENIED;
}

static void
dialed_cb(int fd, uint64_t err, void *arg)
{
	struct egress_req *req = arg;
	struct fwd *f = req->fwd;

	if (err == PROTO_FWD_ERR_DENIED && req->denied[0] != '\0' &&
	    log_ratelimit_ok(&deny_rl, clock_now_ms())) {
		char target[PROTO_FWD_MAX_HOST + 16];
		/* A name (or another spelling) shows the address refused. */
		bool other = strcmp(req->host, req->denied) != 0;

		log_warn("peer %s: forward to %s%s%s%s denied by AllowForward",
		    req->peer->name, addr_hostport_str(target, sizeof target,
		    req->host, req->port), other ? " (" : "",
		    other ? req->denied : "", other ? ")" : "");
	}
	free(req);
	fwd_dialed(fd, err, f);
}

void
egress_request(struct egress *eg, const struct cfg_peer *peer, struct fwd *f,
    const struct proto_fwd_header *hdr, struct egress_hold *hold)
{
	struct egress_req *req;

	if (hdr->type != PROTO_FWD_CONNECT) {
		fwd_fail(f, PROTO_FWD_ERR_PROTOCOL);
		return;
	}
	req = xcalloc(1, sizeof *req);
	req->fwd = f;
	req->peer = peer;
	req->port = hdr->port;
	req->name_allowed = name_allowed(peer, hdr->host, hdr->port);
	snprintf(req->host, sizeof req->host, "%s", hdr->host);
	fwd_set_arg(f, req);
	if (hold != NULL) {
		req->hold = hold;
		TAILQ_INSERT_TAIL(&hold->reqs, req, held);
		return;
	}
	req->dial = dial_start(eg->base, eg->dns, hdr->host, hdr->port,
	    check_target, dialed_cb, req);
}

void
egress_hold_init(struct egress_hold *hold)
{
	TAILQ_INIT(&hold->reqs);
}

void
egress_hold_release(struct egress *eg, struct egress_hold *hold)
{
	struct egress_req *req;

	while ((req = TAILQ_FIRST(&hold->reqs)) != NULL) {
		TAILQ_REMOVE(&hold->reqs, req, held);
		req->hold = NULL;
		req->dial = dial_start(eg->base, eg->dns, req->host, req->port,
		    check_target, dialed_cb, req);
	}
}

void
egress_release(struct fwd *f, void *arg)
{
	struct egress_req *req = arg;

	(void)f;
	if (req->hold != NULL)
		TAILQ_REMOVE(&req->hold->reqs, req, held);
	dial_cancel(req->dial);
	free(req);
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
		if ((fd = accept_guarded(&l->guard, lfd, NULL, NULL)) == -1)
			return;
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
	if (l->ev == NULL || accept_guard_init(&l->guard, eg->base, l->ev,
	    "remote forward") != 0)
		fatalx("out of memory");
	event_add(l->ev, NULL);
	log_info("peer %s: remote forward listening on port %u", peer->name, port);
	return l;
}

uint16_t
egress_listener_port(const struct egress_listener *l)
{
	return l->port;
}

void
egress_listener_free(struct egress_listener *l)
{
	if (l == NULL)
		return;
	accept_guard_free(&l->guard);
	event_free(l->ev);
	close(l->fd);
	free(l);
}

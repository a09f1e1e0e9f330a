/* Forward targets reached from roved: policy, DNS, connect, -R listeners. */
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <errno.h>
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
#include "forward/udprelay.h"

struct egress {
	struct event_base *base;
	struct evdns_base *dns;
};

/* Work in progress for one forward: the dial, and what its policy check
 * needs. Freed when the dial ends or the forward goes away first. */
struct egress_req {
	struct fwd *fwd;
	struct udp_link *link;      /* a UDP flow's instead (fwd NULL) */
	bool udp;
	struct egress_hold *hold;   /* held on it, not dialed yet */
	TAILQ_ENTRY(egress_req) held;
	const struct cfg_peer *peer;
	bool name_allowed;        /* a name rule matched: any address is fine */
	uint16_t port;
	struct dial *dial;
	char host[PROTO_FWD_MAX_HOST + 1];
	char denied[ADDR_STRLEN]; /* the first address the rules refused */
};

/* A remote forward's sockets: one, or two for loopback and "all" (IPv4
 * and IPv6). */
#define LISTENER_FDS 2

struct egress_listener {
	struct fwd_set *set;
	struct udp_relay *udp;           /* a udp/ one's flows */
	struct proto_remote_forward rf;  /* as asked */
	size_t nfd;
	int fd[LISTENER_FDS];
	struct event *ev[LISTENER_FDS];
	struct accept_guard guard[LISTENER_FDS];
	char where[2 * ADDR_STRLEN + 8];
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
	if (req->name_allowed ||
	    cfg_forward_addr_allowed(req->peer, req->udp, &a, req->port))
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

		log_warn("peer %s: %sforward to %s%s%s%s denied by "
		    "AllowForward", req->peer->name, req->udp ? "UDP " : "",
		    addr_hostport_str(target, sizeof target,
		    req->host, req->port), other ? " (" : "",
		    other ? req->denied : "", other ? ")" : "");
	}
	if (req->link != NULL) {
		struct udp_link *l = req->link;

		free(req);
		udp_link_dialed(l, fd, err);
		return;
	}
	free(req);
	fwd_dialed(fd, err, f);
}

void *
egress_udp_request(struct egress *eg, const struct cfg_peer *peer,
    struct udp_link *l, const char *host, uint16_t port)
{
	struct egress_req *req = xcalloc(1, sizeof *req);

	req->link = l;
	req->udp = true;
	req->peer = peer;
	req->port = port;
	req->name_allowed = cfg_forward_name_allowed(peer, true, host, port);
	snprintf(req->host, sizeof req->host, "%s", host);
	req->dial = dial_start_udp(eg->base, eg->dns, host, port,
	    check_target, dialed_cb, req);
	return req;
}

void
egress_udp_cancel(void *work)
{
	struct egress_req *req = work;

	dial_cancel(req->dial);
	free(req);
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
	req->name_allowed = cfg_forward_name_allowed(peer, false, hdr->host,
	    hdr->port);
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
	struct proto_fwd_header hdr = { .type = PROTO_FWD_REMOTE,
		.port = l->rf.port };
	struct accept_guard *guard = &l->guard[0];
	uint64_t err;
	int fd;

	(void)what;
	for (size_t i = 0; i < l->nfd; i++) {
		if (l->fd[i] == lfd)
			guard = &l->guard[i];
	}
	/* Accept what is waiting, bounded so one listener cannot hog the loop. */
	for (int i = 0; i < 16; i++) {
		if ((fd = accept_guarded(guard, lfd, NULL, NULL)) == -1)
			return;
		(void)fwd_open(l->set, FWD_REMOTE, fd, &hdr, NULL, &err);
	}
}

/* A udp/ remote forward: each source is a flow to the client. */
static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egress_listener *l = arg;

	(void)what;
	udp_relay_read(l->udp, fd, "", l->rf.port, false);
}

/* Where a request listens: its addresses, the first required, the second
 * (IPv6 beside IPv4) only where the host has that family. */
static size_t
listen_addrs(const struct proto_remote_forward *rf, struct ipaddr *a,
    bool *optional)
{
	memset(a, 0, LISTENER_FDS * sizeof *a);
	optional[0] = false;
	optional[1] = true;
	switch (rf->bind) {
	case PROTO_RBIND_DEFAULT:
		a[0].family = AF_INET;
		a[0].b[0] = 127;
		a[0].b[3] = 1;
		a[1].family = AF_INET6;
		a[1].b[15] = 1;
		return 2;
	case PROTO_RBIND_ALL:
		a[0].family = AF_INET;
		a[1].family = AF_INET6;
		return 2;
	default: {
		/* An IPv4-mapped address listens as the IPv4 one. */
		struct prefix p = { rf->bind_addr, 128 };

		addr_prefix_normalise(&p);
		a[0] = p.addr;
		return 1;
	}
	}
}

/* The host has no such address family (IPv6 off) or no such address
 * (no ::1): the optional socket is left out. */
static bool
family_missing(int err)
{
	return err == EAFNOSUPPORT || err == EADDRNOTAVAIL;
}

static const char *
deny_hint(const struct cfg_peer *peer, const struct proto_remote_forward *rf,
    char *buf, size_t len)
{
	struct proto_remote_forward lo = { .port = rf->port, .udp = rf->udp };
	char s[PROTO_FWD_REMOTE_STRLEN];

	/* The port is listed (loopback is allowed): the bind address is
	 * what is missing, and the entry that would allow it is worth
	 * naming. */
	if (!cfg_remote_allowed(peer, &lo))
		return "";
	if (rf->bind == PROTO_RBIND_ALL)
		snprintf(buf, len, " (port %u is listed, but not for all "
		    "addresses: that takes *:%u)", (unsigned)rf->port,
		    (unsigned)rf->port);
	else
		snprintf(buf, len, " (port %u is listed, but not for this "
		    "address: list %s, or *:%u for any address)",
		    (unsigned)rf->port, proto_fwd_remote_str(rf, s),
		    (unsigned)rf->port);
	return buf;
}

struct egress_listener *
egress_listen(struct egress *eg, const struct cfg_peer *peer, struct fwd_set *set,
    struct udp_relay *udp, const struct proto_remote_forward *want,
    uint64_t *code)
{
	struct egress_listener *l;
	struct ipaddr addrs[LISTENER_FDS];
	bool optional[LISTENER_FDS];
	char s[PROTO_FWD_REMOTE_STRLEN], hint[2 * PROTO_FWD_REMOTE_STRLEN + 96];
	size_t n;

	if (!cfg_remote_allowed(peer, want)) {
		if (log_ratelimit_ok(&deny_rl, clock_now_ms()))
			log_warn("peer %s: remote forward on %s denied by "
			    "AllowRemoteForward%s", peer->name,
			    proto_fwd_remote_str(want, s),
			    deny_hint(peer, want, hint, sizeof hint));
		*code = PROTO_FWD_ERR_DENIED;
		return NULL;
	}
	l = xcalloc(1, sizeof *l);
	l->set = set;
	l->udp = udp;
	l->rf = *want;
	n = listen_addrs(want, addrs, optional);
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t sslen;
		char *cause = NULL, a[ADDR_STRLEN], hp[ADDR_STRLEN + 8];
		int fd;

		addr_to_sockaddr(&addrs[i], want->port, &ss, &sslen);
		if ((fd = want->udp ? udp_listen((struct sockaddr *)&ss, sslen,
		    &cause) : tcp_listen((struct sockaddr *)&ss, sslen,
		    &cause)) == -1) {
			if (optional[i] && family_missing(errno)) {
				free(cause);
				continue;
			}
			log_warn("peer %s: remote forward on %s: %s", peer->name,
			    proto_fwd_remote_str(want, s), cause);
			free(cause);
			egress_listener_free(l);
			*code = PROTO_FWD_ERR_UNREACHABLE;
			return NULL;
		}
		l->fd[l->nfd] = fd;
		l->ev[l->nfd] = event_new(eg->base, fd, EV_READ | EV_PERSIST,
		    want->udp ? udp_read_cb : accept_cb, l);
		if (l->ev[l->nfd] == NULL || (!want->udp && accept_guard_init(
		    &l->guard[l->nfd], eg->base, l->ev[l->nfd],
		    "remote forward") != 0))
			fatalx("out of memory");
		l->nfd++;
		addr_hostport_str(hp, sizeof hp, addr_ip_str(&addrs[i], a),
		    want->port);
		snprintf(l->where + strlen(l->where), sizeof l->where -
		    strlen(l->where), "%s%s", l->nfd > 1 ? " and " : "", hp);
	}
	for (size_t i = 0; i < l->nfd; i++)
		event_add(l->ev[i], NULL);
	log_info("peer %s: remote forward listening on %s%s", peer->name,
	    want->udp ? "udp/" : "", l->where);
	return l;
}

const struct proto_remote_forward *
egress_listener_request(const struct egress_listener *l)
{
	return &l->rf;
}

const char *
egress_listener_where(const struct egress_listener *l)
{
	return l->where;
}

void
egress_listener_free(struct egress_listener *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->nfd; i++) {
		/* Its flows answer through its sockets. */
		if (l->rf.udp)
			udp_relay_forget_fd(l->udp, l->fd[i]);
		else
			accept_guard_free(&l->guard[i]);
		event_free(l->ev[i]);
		close(l->fd[i]);
	}
	free(l);
}

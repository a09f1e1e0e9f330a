/* Local (-L), dynamic (-D, SOCKS5) and remote (-R) forwards of rove. */
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "clock.h"
#include "dial.h"
#include "forward.h"
#include "log.h"
#include "proto-fwd.h"
#include "socks5.h"
#include "tcp.h"
#include "xmalloc.h"

#define SOCKS_TIMEOUT_S 10
#define MAX_LISTENERS 64

struct listener {
	struct forward *fw;
	const struct cfg_forward *cfg;
	enum fwd_kind kind;
	int fd;
	struct event *ev;
};

/* A connection accepted while no session could carry it (start-up, a
 * reconnect): held, unread, until there is one, for ForwardWait seconds
 * at most. */
struct held {
	TAILQ_ENTRY(held) entry;
	struct forward *fw;
	enum fwd_kind kind;
	int fd;
	char host[PROTO_FWD_MAX_HOST + 1];
	uint16_t port;
	struct event *ev;     /* the wait limit */
};

/* A SOCKS5 client in its negotiation, before it becomes a forward. */
struct socks {
	LIST_ENTRY(socks) entry;
	struct forward *fw;
	int fd;
	struct event *ev;
	uint8_t buf[600];
	size_t len;
	bool greeted;
};

struct forward {
	struct event_base *base;
	const struct cfg *cfg;
	struct evdns_base *dns;
	struct listener listeners[MAX_LISTENERS];
	size_t nlisteners;
	LIST_HEAD(, socks) socks;
	TAILQ_HEAD(, held) held;  /* oldest first */
	size_t nheld;
	struct fwd_set set;
	bool attached;
	struct fwd_counters counters;
	bool *remote_ok;      /* per RemoteForward: the server accepted it */
};

static void
reset_close(int fd)
{
	struct linger l = { 1, 0 };

	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	close(fd);
}

/* SOCKS5 replies are a few bytes on a fresh socket: they always fit in
 * its buffer, and if the client is gone there is nobody to tell. */
static void
send_reply(int fd, const uint8_t *buf, size_t len)
{
	ssize_t n = write(fd, buf, len);

	(void)n;
}

/* A connection that cannot be forwarded now or later: a SOCKS5 client
 * hears "network unreachable" first, as before the session was up. */
static void
close_unforwarded(enum fwd_kind kind, int fd)
{
	if (kind == FWD_DYNAMIC) {
		uint8_t out[SOCKS5_REPLY_MAX];

		send_reply(fd, out, socks5_reply(out, sizeof out,
		    SOCKS5_REP_NET_UNREACHABLE, NULL));
	}
	reset_close(fd);
}

static void
held_free(struct held *h, bool close_fd)
{
	TAILQ_REMOVE(&h->fw->held, h, entry);
	h->fw->nheld--;
	event_free(h->ev);
	if (close_fd)
		close_unforwarded(h->kind, h->fd);
	free(h);
}

static void
held_expired_cb(evutil_socket_t fd, short what, void *arg)
{
	struct held *h = arg;
	struct forward *fw = h->fw;
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(10000, 10);

	(void)fd;
	(void)what;
	fw->counters.held_expired++;
	if (log_ratelimit_ok(&rl, clock_now_ms()))
		log_warn("forward to %s:%u closed: no session to the server "
		    "within ForwardWait (%u s)", h->host, h->port,
		    (unsigned)fw->cfg->forward_wait);
	held_free(h, true);
}

/* No session now: keep the connection until there is one. */
static void
hold(struct forward *fw, enum fwd_kind kind, int fd, const char *host,
    uint16_t port)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(10000, 10);
	struct timeval tv = { (time_t)fw->cfg->forward_wait, 0 };
	struct held *h;

	if (fw->cfg->forward_wait == 0) {
		fw->counters.failed[PROTO_FWD_ERR_UNREACHABLE]++;
		close_unforwarded(kind, fd);
		return;
	}
	if (fw->nheld >= fw->cfg->forward_wait_max) {
		fw->counters.held_full++;
		if (log_ratelimit_ok(&rl, clock_now_ms()))
			log_warn("forward to %s:%u closed: %u connections wait "
			    "for the session already (ForwardWaitMax)", host, port,
			    (unsigned)fw->cfg->forward_wait_max);
		close_unforwarded(kind, fd);
		return;
	}
	h = xcalloc(1, sizeof *h);
	h->fw = fw;
	h->kind = kind;
	h->fd = fd;
	snprintf(h->host, sizeof h->host, "%s", host);
	h->port = port;
	h->ev = evtimer_new(fw->base, held_expired_cb, h);
	evtimer_add(h->ev, &tv);
	TAILQ_INSERT_TAIL(&fw->held, h, entry);
	fw->nheld++;
	fw->counters.held++;
	log_debug("forward to %s:%u waits for the session", host, port);
}

static void
open_forward(struct forward *fw, enum fwd_kind kind, int fd, const char *host,
    uint16_t port, void *arg)
{
	struct proto_fwd_header hdr = { .type = PROTO_FWD_CONNECT, .port = port };
	uint64_t err;

	if (!fw->attached) {
		hold(fw, kind, fd, host, port);
		return;
	}
	snprintf(hdr.host, sizeof hdr.host, "%s", host);
	if (fwd_open(&fw->set, kind, fd, &hdr, arg, &err) == NULL)
		log_debug("forward to %s:%u: %s", host, port, proto_fwd_error_name(err));
}

static void
socks_free(struct socks *sk, bool close_fd)
{
	LIST_REMOVE(sk, entry);
	event_free(sk->ev);
	if (close_fd)
		close(sk->fd);
	free(sk);
}

static void
socks_fail(struct socks *sk, uint8_t rep)
{
	uint8_t out[SOCKS5_REPLY_MAX];
	size_t n = socks5_reply(out, sizeof out, rep, NULL);

	send_reply(sk->fd, out, n);
	socks_free(sk, true);
}

/* The server answered a SOCKS5 CONNECT: tell the SOCKS client. */
static void
socks_answered(struct fwd *f, uint64_t code, void *arg)
{
	uint8_t out[SOCKS5_REPLY_MAX];
	size_t n;

	(void)arg;
	n = socks5_reply(out, sizeof out, code == PROTO_FWD_OK ?
	    SOCKS5_REP_SUCCEEDED : socks5_rep_from_fwd_error(code), NULL);
	send_reply(fwd_get_fd(f), out, n);
	if (code != PROTO_FWD_OK)
		(void)shutdown(fwd_get_fd(f), SHUT_WR);
}

static void
socks_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct socks *sk = arg;
	struct socks5_request req;
	ssize_t n;
	long used;

	if (what & EV_TIMEOUT) {
		socks_free(sk, true);
		return;
	}
	n = read(fd, sk->buf + sk->len, sizeof sk->buf - sk->len);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		socks_free(sk, true);
		return;
	}
	sk->len += (size_t)n;
	if (!sk->greeted) {
		bool no_auth = false;
		uint8_t reply[2];

		used = socks5_parse_greeting(sk->buf, sk->len, &no_auth);
		if (used == 0)
			return;
		if (used < 0 || !no_auth) {
			send_reply(fd, reply, socks5_method_reply(reply, false));
			socks_free(sk, true);
			return;
		}
		send_reply(fd, reply, socks5_method_reply(reply, true));
		memmove(sk->buf, sk->buf + used, sk->len - (size_t)used);
		sk->len -= (size_t)used;
		sk->greeted = true;
	}
	used = socks5_parse_request(sk->buf, sk->len, &req);
	if (used == 0)
		return;
	if (used < 0) {
		socks_fail(sk, socks5_rep_from_parse_error(used));
		return;
	}
	/* The forward (or the wait for the session) owns the socket from
	 * here. */
	{
		struct forward *fw = sk->fw;
		int sfd = sk->fd;

		socks_free(sk, false);
		open_forward(fw, FWD_DYNAMIC, sfd, req.host, req.port, NULL);
	}
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct listener *l = arg;
	struct forward *fw = l->fw;
	int fd;

	(void)what;
	for (int i = 0; i < 16; i++) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE)
				log_warn("forward listener: %s", strerror(errno));
			return;
		}
		if (l->kind == FWD_LOCAL) {
			open_forward(fw, FWD_LOCAL, fd, l->cfg->target_host,
			    l->cfg->target_port, NULL);
		} else {
			struct socks *sk = xcalloc(1, sizeof *sk);
			struct timeval tv = { SOCKS_TIMEOUT_S, 0 };

			sk->fw = fw;
			sk->fd = fd;
			sk->ev = event_new(fw->base, fd, EV_READ | EV_PERSIST,
			    socks_read_cb, sk);
			event_add(sk->ev, &tv);
			LIST_INSERT_HEAD(&fw->socks, sk, entry);
		}
	}
}

static int
add_listener(struct forward *fw, const struct cfg_forward *cf, enum fwd_kind kind,
    char **cause)
{
	struct sockaddr_storage ss;
	struct listener *l;
	struct ipaddr a;
	socklen_t sslen;

	if (fw->nlisteners == MAX_LISTENERS) {
		*cause = xstrdup("too many forward listeners");
		return -1;
	}
	/* Like ssh: loopback unless an address is given. */
	if (addr_parse_ip(cf->bind_host != NULL ? cf->bind_host : "127.0.0.1", &a) != 0) {
		xasprintf(cause, "bad bind address %s", cf->bind_host);
		return -1;
	}
	addr_to_sockaddr(&a, cf->bind_port, &ss, &sslen);
	l = &fw->listeners[fw->nlisteners];
	if ((l->fd = tcp_listen((struct sockaddr *)&ss, sslen, cause)) == -1)
		return -1;
	l->fw = fw;
	l->cfg = cf;
	l->kind = kind;
	l->ev = event_new(fw->base, l->fd, EV_READ | EV_PERSIST, accept_cb, l);
	event_add(l->ev, NULL);
	fw->nlisteners++;
	return 0;
}

/* -R: the server accepted a connection on one of our remote ports; the
 * forward's argument is our dial to the configured target. */
static void
remote_request(struct fwd_set *set, struct fwd *f, const struct proto_fwd_header *hdr)
{
	struct forward *fw = set->arg;
	const struct cfg_forward *cf = NULL;
	char target[PROTO_FWD_MAX_HOST + 16];

	/* Only the targets we configured, never one the server names. */
	for (size_t i = 0; i < fw->cfg->nremote_forward && hdr->type == PROTO_FWD_REMOTE; i++) {
		if (fw->cfg->remote_forward[i].bind_port == hdr->port)
			cf = &fw->cfg->remote_forward[i];
	}
	if (cf == NULL) {
		fwd_fail(f, PROTO_FWD_ERR_DENIED);
		return;
	}
	snprintf(target, sizeof target, "%s:%u", cf->target_host, cf->target_port);
	fwd_set_target(f, target);
	fwd_set_arg(f, dial_start(fw->base, fw->dns, cf->target_host, cf->target_port,
	    NULL, fwd_dialed, f));
}

static void
remote_release(struct fwd *f, void *arg)
{
	(void)f;
	dial_cancel(arg);
}

static void
answered(struct fwd *f, uint64_t code, void *arg)
{
	(void)arg;
	if (fwd_get_fd(f) != -1 && fwd_kind_of(f) == FWD_DYNAMIC)
		socks_answered(f, code, arg);
}

static const struct fwd_ops client_fwd_ops = {
	.request = remote_request,
	.answered = answered,
	.release = remote_release,
};

struct forward *
forward_create(struct event_base *base, const struct cfg *cfg, char **cause)
{
	struct forward *fw = xcalloc(1, sizeof *fw);

	fw->base = base;
	fw->cfg = cfg;
	LIST_INIT(&fw->socks);
	TAILQ_INIT(&fw->held);
	fw->remote_ok = xcalloc(cfg->nremote_forward + 1, sizeof *fw->remote_ok);
	if ((fw->dns = dial_resolver_new(base, cause)) == NULL)
		goto fail;
	for (size_t i = 0; i < cfg->nlocal_forward; i++) {
		if (add_listener(fw, &cfg->local_forward[i], FWD_LOCAL, cause) != 0)
			goto fail;
	}
	for (size_t i = 0; i < cfg->ndynamic_forward; i++) {
		if (add_listener(fw, &cfg->dynamic_forward[i], FWD_DYNAMIC, cause) != 0)
			goto fail;
	}
	return fw;
fail:
	forward_free(fw);
	return NULL;
}

void
forward_free(struct forward *fw)
{
	struct socks *sk;

	if (fw == NULL)
		return;
	forward_detach(fw);
	while ((sk = LIST_FIRST(&fw->socks)) != NULL)
		socks_free(sk, true);
	while (!TAILQ_EMPTY(&fw->held))
		held_free(TAILQ_FIRST(&fw->held), true);
	for (size_t i = 0; i < fw->nlisteners; i++) {
		event_free(fw->listeners[i].ev);
		close(fw->listeners[i].fd);
	}
	if (fw->dns != NULL)
		evdns_base_free(fw->dns, 0);
	free(fw->remote_ok);
	free(fw);
}

void
forward_attach(struct forward *fw, struct quic_conn *qc)
{
	struct held *h;

	forward_detach(fw);
	fwd_set_init(&fw->set, fw->base, qc, fw->cfg->forward_buffer,
	    fw->cfg->max_forwards, &client_fwd_ops, fw, &fw->counters, "server");
	fw->attached = true;
	/* Oldest first, so they reach the server in the order accepted. */
	while ((h = TAILQ_FIRST(&fw->held)) != NULL) {
		enum fwd_kind kind = h->kind;
		char host[sizeof h->host];
		uint16_t port = h->port;
		int fd = h->fd;

		memcpy(host, h->host, sizeof host);
		held_free(h, false);
		open_forward(fw, kind, fd, host, port, NULL);
	}
}

void
forward_remote_request(struct forward *fw, struct quic_conn *qc)
{
	for (size_t i = 0; i < fw->cfg->nremote_forward; i++) {
		struct proto_remote_forward rf = {
			.port = fw->cfg->remote_forward[i].bind_port,
		};
		uint8_t buf[64];
		size_t n;

		fw->remote_ok[i] = false;
		n = proto_fwd_remote_encode(buf, sizeof buf, PROTO_MSG_REMOTE_FORWARD, &rf);
		if (n > 0)
			(void)quic_conn_stream_send(qc, 0, buf, n, false);
	}
}

void
forward_detach(struct forward *fw)
{
	if (!fw->attached)
		return;
	fwd_set_clear(&fw->set);
	fw->attached = false;
}

struct fwd_set *
forward_set(struct forward *fw)
{
	return fw->attached ? &fw->set : NULL;
}

int
forward_control(struct forward *fw, uint64_t type, const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf;

	if (type != PROTO_MSG_REMOTE_FORWARD_REPLY ||
	    proto_fwd_remote_decode(body, len, &rf) != 0)
		return -1;
	for (size_t i = 0; i < fw->cfg->nremote_forward; i++) {
		if (fw->cfg->remote_forward[i].bind_port != rf.port)
			continue;
		fw->remote_ok[i] = rf.status == PROTO_FWD_OK;
		if (rf.status == PROTO_FWD_OK)
			log_info("remote forward: the server listens on port %u for "
			    "%s:%u", rf.port, fw->cfg->remote_forward[i].target_host,
			    fw->cfg->remote_forward[i].target_port);
		else
			log_error("remote forward on port %u refused by the server: %s",
			    rf.port, proto_fwd_error_name(rf.status));
	}
	return 0;
}

const struct fwd_counters *
forward_counters(const struct forward *fw)
{
	return &fw->counters;
}

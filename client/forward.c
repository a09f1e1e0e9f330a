/* Local (-L), dynamic (-D, SOCKS5) and remote (-R) forwards of rove. */
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/accept.h"
#include "base/addr.h"
#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "config/cfg-diff.h"
#include "forward.h"
#include "forward/dial.h"
#include "forward/tcp.h"
#include "forward/udprelay.h"
#include "wire/proto.h"
#include "wire/proto-fwd.h"
#include "wire/socks5.h"

/* SOCKS negotiations in progress: each holds a descriptor before any
 * forward exists, so a local program that opens connections and says
 * nothing must not take them all. Past the cap the oldest goes (a real
 * client's negotiation takes a round trip on loopback). */
#define SOCKS_TIMEOUT_S 5
#define SOCKS_MAX_PENDING 256
#define MAX_LISTENERS 64

struct listener {
	struct forward *fw;
	struct cfg_forward cf;  /* its own copy: a reload may change it */
	enum fwd_kind kind;
	int fd;
	struct event *ev;
	struct accept_guard guard;
};

/* A RemoteForward, and whether the server listens for it. */
struct remote {
	struct cfg_forward cf;
	bool ok;
	bool denied;   /* the server said no: a reload asks again */
	bool asked;    /* requested on the current connection */
	bool replied;  /* and answered, with `status` */
	bool unsupported; /* not asked: the server cannot listen where it
	                   * names (an older roved, without a bind address) */
	uint64_t status;
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
	TAILQ_ENTRY(socks) entry;
	struct forward *fw;
	int fd;
	struct event *ev;
	uint8_t buf[600];
	size_t len;
	bool greeted;
};

/* A SOCKS5 UDP ASSOCIATE: a relay socket of its own, which lives as long
 * as the TCP connection that asked for it, and answers only the client at
 * the other end of that connection. */
struct assoc {
	TAILQ_ENTRY(assoc) entry;
	struct forward *fw;
	int tcp_fd;
	struct event *tcp_ev;   /* the control connection ends */
	int udp_fd;
	struct event *udp_ev;
	struct ipaddr client;   /* the TCP peer's address */
	uint16_t client_port;   /* the port it named, 0: any */
};

/* Associations at once: each holds two descriptors and a socket. */
#define SOCKS_MAX_ASSOCS 64

static struct log_ratelimit socks_rl = LOG_RATELIMIT_INIT(10000, 1);

struct forward {
	struct event_base *base;
	const struct cfg *cfg;
	struct evdns_base *dns;
	struct listener *listeners[MAX_LISTENERS];
	size_t nlisteners;
	struct remote *remotes;
	size_t nremotes;
	TAILQ_HEAD(, socks) socks;  /* oldest first */
	size_t nsocks;
	uint64_t socks_evicted;
	TAILQ_HEAD(, assoc) assocs;
	size_t nassocs;
	TAILQ_HEAD(, held) held;  /* oldest first */
	size_t nheld;
	struct fwd_set set;
	bool attached;
	struct udp_relay udp;       /* udp/ Local and RemoteForwards' flows */
	struct udp_flow_counters udp_counters;
	bool udp_ok;          /* the server takes UDP flows */
	bool udp_warned;      /* said once that it does not */
	struct fwd_counters counters;
	bool cancel_ok;       /* the server takes REMOTE_FORWARD_CANCEL */
	bool bind_ok;         /* and a bind address (PROTO_FEATURE_REMOTE_BIND) */
	bool features_known;  /* a server has said which it takes */
	char key[KEY_B64_LEN + 1];   /* ours, which the server's rules name */
	char deny_hint[KEY_B64_LEN + 64];
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
	TAILQ_REMOVE(&sk->fw->socks, sk, entry);
	sk->fw->nsocks--;
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
assoc_free(struct assoc *as)
{
	struct forward *fw = as->fw;

	TAILQ_REMOVE(&fw->assocs, as, entry);
	fw->nassocs--;
	/* Its flows answer through its socket. */
	udp_relay_forget_fd(&fw->udp, as->udp_fd);
	event_free(as->udp_ev);
	event_free(as->tcp_ev);
	close(as->udp_fd);
	close(as->tcp_fd);
	free(as);
}

/* The control connection says nothing more after the reply: anything it
 * sends is read and ignored, and its end ends the association. */
static void
assoc_tcp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct assoc *as = arg;
	uint8_t buf[512];
	ssize_t n;

	(void)what;
	n = read(fd, buf, sizeof buf);
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	log_debug("SOCKS5 UDP association closed by its client");
	assoc_free(as);
}

/* A datagram for the relay: from the association's client, whole, with a
 * header that names its target; it goes on as a flow of its own for
 * each (source, target). */
static void
assoc_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	static uint8_t buf[65535];
	struct assoc *as = arg;
	struct forward *fw = as->fw;

	(void)what;
	for (int i = 0; i < 16; i++) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof ss;
		struct socks5_udp_header h;
		uint8_t prefix[SOCKS5_UDP_HEADER_MAX];
		struct ipaddr a;
		uint16_t port;
		size_t plen;
		ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT,
		    (struct sockaddr *)&ss, &sslen);
		long used;

		if (n < 0)
			return;
		if (addr_from_sockaddr((struct sockaddr *)&ss, &a, &port) != 0 ||
		    !addr_equal(&a, &as->client) ||
		    (as->client_port != 0 && port != as->client_port)) {
			udp_flow_drop(&fw->udp.set, NULL, UDP_DROP_FOREIGN);
			continue;
		}
		if ((used = socks5_udp_decode(buf, (size_t)n, &h)) < 0) {
			udp_flow_drop(&fw->udp.set, NULL, UDP_DROP_HEADER);
			continue;
		}
		if (h.frag != 0) {
			udp_flow_drop(&fw->udp.set, NULL, UDP_DROP_FRAG);
			continue;
		}
		if (fw->features_known && !fw->udp_ok) {
			udp_flow_drop(&fw->udp.set, NULL, UDP_DROP_REFUSED);
			continue;
		}
		/* Answers name their target as the client wrote it. */
		if ((plen = socks5_udp_encode(prefix, sizeof prefix, &h)) == 0) {
			udp_flow_drop(&fw->udp.set, NULL, UDP_DROP_HEADER);
			continue;
		}
		udp_relay_from_socks(&fw->udp, fd, (struct sockaddr *)&ss,
		    h.host, h.port, prefix, plen, buf + used,
		    (size_t)n - (size_t)used);
	}
}

/* UDP ASSOCIATE: a relay socket on the address the client reached, an
 * ephemeral port, named in the reply. */
static void
assoc_start(struct forward *fw, int fd, const struct socks5_request *req)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(10000, 5);
	struct sockaddr_storage local, peer;
	socklen_t llen = sizeof local, plen = sizeof peer;
	uint8_t out[SOCKS5_REPLY_MAX];
	struct assoc *as;
	struct ipaddr a, la;
	uint16_t port;
	char *cause = NULL;
	char abuf[ADDR_STRLEN];
	int ufd;
	uint8_t rep = SOCKS5_REP_GENERAL_FAILURE;

	if (fw->features_known && !fw->udp_ok) {
		if (log_ratelimit_ok(&rl, clock_now_ms()))
			log_warn("DynamicForward: UDP ASSOCIATE refused: the "
			    "server does not take UDP forwards (an older roved)");
		rep = SOCKS5_REP_CMD_NOT_SUPPORTED;
		goto fail;
	}
	if (fw->nassocs >= SOCKS_MAX_ASSOCS) {
		if (log_ratelimit_ok(&rl, clock_now_ms()))
			log_warn("DynamicForward: UDP ASSOCIATE refused: %d "
			    "associations at once", SOCKS_MAX_ASSOCS);
		goto fail;
	}
	if (getsockname(fd, (struct sockaddr *)&local, &llen) != 0 ||
	    getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
	    addr_from_sockaddr((struct sockaddr *)&local, &la, &port) != 0 ||
	    addr_from_sockaddr((struct sockaddr *)&peer, &a, &port) != 0)
		goto fail;
	addr_to_sockaddr(&la, 0, &local, &llen);
	if ((ufd = udp_listen((struct sockaddr *)&local, llen, &cause)) == -1) {
		log_warn("DynamicForward: UDP ASSOCIATE: %s", cause);
		free(cause);
		goto fail;
	}
	llen = sizeof local;
	if (getsockname(ufd, (struct sockaddr *)&local, &llen) != 0) {
		close(ufd);
		goto fail;
	}
	as = xcalloc(1, sizeof *as);
	as->fw = fw;
	as->tcp_fd = fd;
	as->udp_fd = ufd;
	as->client = a;
	as->client_port = req->port;
	as->tcp_ev = event_new(fw->base, fd, EV_READ | EV_PERSIST,
	    assoc_tcp_cb, as);
	as->udp_ev = event_new(fw->base, ufd, EV_READ | EV_PERSIST,
	    assoc_udp_cb, as);
	if (as->tcp_ev == NULL || as->udp_ev == NULL)
		fatalx("out of memory");
	event_add(as->tcp_ev, NULL);
	event_add(as->udp_ev, NULL);
	TAILQ_INSERT_TAIL(&fw->assocs, as, entry);
	fw->nassocs++;
	send_reply(fd, out, socks5_reply(out, sizeof out, SOCKS5_REP_SUCCEEDED,
	    (struct sockaddr *)&local));
	log_debug("SOCKS5 UDP association: relay %s",
	    addr_sockaddr_str((struct sockaddr *)&local, abuf));
	return;
fail:
	send_reply(fd, out, socks5_reply(out, sizeof out, rep, NULL));
	reset_close(fd);
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
	/* The forward (or the wait for the session), or the association,
	 * owns the socket from here. */
	{
		struct forward *fw = sk->fw;
		int sfd = sk->fd;

		socks_free(sk, false);
		if (req.cmd == SOCKS5_CMD_UDP_ASSOCIATE)
			assoc_start(fw, sfd, &req);
		else
			open_forward(fw, FWD_DYNAMIC, sfd, req.host, req.port,
			    NULL);
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
		if ((fd = accept_guarded(&l->guard, lfd, NULL, NULL)) == -1)
			return;
		if (l->kind == FWD_LOCAL) {
			open_forward(fw, FWD_LOCAL, fd, l->cf.target_host,
			    l->cf.target_port, NULL);
		} else {
			struct socks *sk = xcalloc(1, sizeof *sk);
			struct timeval tv = { SOCKS_TIMEOUT_S, 0 };

			sk->fw = fw;
			sk->fd = fd;
			sk->ev = event_new(fw->base, fd, EV_READ | EV_PERSIST,
			    socks_read_cb, sk);
			event_add(sk->ev, &tv);
			if (fw->nsocks == SOCKS_MAX_PENDING) {
				fw->socks_evicted++;
				if (log_ratelimit_ok(&socks_rl, clock_now_ms()))
					log_warn("DynamicForward: %d SOCKS "
					    "negotiations at once: the oldest "
					    "closed (%llu so far)", SOCKS_MAX_PENDING,
					    (unsigned long long)fw->socks_evicted);
				socks_free(TAILQ_FIRST(&fw->socks), true);
			}
			TAILQ_INSERT_TAIL(&fw->socks, sk, entry);
			fw->nsocks++;
		}
	}
}

/* "LocalForward 127.0.0.1:8080", for messages. */
static const char *
listener_str(const struct cfg_forward *cf, enum fwd_kind kind, char *buf,
    size_t len)
{
	char bind[PROTO_FWD_MAX_HOST + 16];

	snprintf(buf, len, "%s %s%s", kind == FWD_LOCAL ? "LocalForward" :
	    "DynamicForward", cf->udp ? "udp/" : "",
	    addr_hostport_str(bind, sizeof bind,
	    cf->bind_host != NULL ? cf->bind_host : "127.0.0.1", cf->bind_port));
	return buf;
}

/* A udp/ LocalForward's datagrams: each source is a flow to the target. */
static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	struct forward *fw = l->fw;

	(void)what;
	udp_relay_read(&fw->udp, fd, l->cf.target_host, l->cf.target_port,
	    fw->features_known && !fw->udp_ok);
}

static struct listener *
listener_open(struct forward *fw, const struct cfg_forward *cf,
    enum fwd_kind kind, char **cause)
{
	struct sockaddr_storage ss;
	struct listener *l;
	struct ipaddr a;
	socklen_t sslen;
	int fd;

	/* Like ssh: loopback unless an address is given. */
	if (addr_parse_ip(cf->bind_host != NULL ? cf->bind_host : "127.0.0.1", &a) != 0) {
		xasprintf(cause, "bad bind address %s", cf->bind_host);
		return NULL;
	}
	addr_to_sockaddr(&a, cf->bind_port, &ss, &sslen);
	if (cf->udp) {
		if ((fd = udp_listen((struct sockaddr *)&ss, sslen, cause)) == -1)
			return NULL;
	} else if ((fd = tcp_listen((struct sockaddr *)&ss, sslen, cause)) == -1) {
		return NULL;
	}
	l = xcalloc(1, sizeof *l);
	l->fw = fw;
	cfg_forward_copy(&l->cf, cf);
	l->kind = kind;
	l->fd = fd;
	if (cf->udp) {
		l->ev = event_new(fw->base, fd, EV_READ | EV_PERSIST,
		    udp_read_cb, l);
		if (l->ev == NULL)
			fatalx("out of memory");
		event_add(l->ev, NULL);
		return l;
	}
	l->ev = event_new(fw->base, l->fd, EV_READ | EV_PERSIST, accept_cb, l);
	if (l->ev == NULL || accept_guard_init(&l->guard, fw->base, l->ev,
	    kind == FWD_LOCAL ? "LocalForward" : "DynamicForward") != 0)
		fatalx("out of memory");
	event_add(l->ev, NULL);
	return l;
}

/* Connections accepted through it are their own: they carry on. */
static void
listener_free(struct listener *l)
{
	if (l == NULL)
		return;
	/* Its flows answer through its socket. */
	if (l->cf.udp)
		udp_relay_forget_fd(&l->fw->udp, l->fd);
	accept_guard_free(&l->guard);
	event_free(l->ev);
	close(l->fd);
	cfg_forward_clear(&l->cf);
	free(l);
}

static int
add_listener(struct forward *fw, const struct cfg_forward *cf, enum fwd_kind kind,
    char **cause)
{
	struct listener *l;

	if (fw->nlisteners == MAX_LISTENERS) {
		*cause = xstrdup("too many forward listeners");
		return -1;
	}
	if ((l = listener_open(fw, cf, kind, cause)) == NULL)
		return -1;
	fw->listeners[fw->nlisteners++] = l;
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
	for (size_t i = 0; i < fw->nremotes && hdr->type == PROTO_FWD_REMOTE; i++) {
		if (!fw->remotes[i].cf.udp && fw->remotes[i].cf.bind_port == hdr->port)
			cf = &fw->remotes[i].cf;
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

/* -R udp/: roved set up a flow for a source of our remote forward of port
 * `port`; it goes to the target we configured, never one the server
 * names. */
static void
udp_remote_dialed(int fd, uint64_t err, void *arg)
{
	udp_link_dialed(arg, fd, err);
}

static void *
udp_remote_request(struct udp_link *l, const char *host, uint16_t port,
    void *arg, uint64_t *err)
{
	struct forward *fw = arg;
	const struct cfg_forward *cf = NULL;

	(void)host;
	for (size_t i = 0; i < fw->nremotes; i++) {
		if (fw->remotes[i].cf.udp && fw->remotes[i].cf.bind_port == port)
			cf = &fw->remotes[i].cf;
	}
	if (cf == NULL) {
		*err = PROTO_FWD_ERR_DENIED;
		return NULL;
	}
	return dial_start_udp(fw->base, fw->dns, cf->target_host,
	    cf->target_port, NULL, udp_remote_dialed, l);
}

static void
udp_remote_cancel(void *work)
{
	dial_cancel(work);
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
	/* One set for the process: forwards parked when a connection ends
	 * wait in it for the next one (fwd_set_park). */
	fwd_set_init(&fw->set, base, NULL, cfg->forward_buffer,
	    cfg->max_forwards, &client_fwd_ops, fw, &fw->counters, "server");
	fw->set.deny_hint = fw->deny_hint;
	fw->set.park = &fw->set;
	fw->set.park_ms = (uint64_t)cfg->idle_timeout * 1000;
	TAILQ_INIT(&fw->socks);
	TAILQ_INIT(&fw->held);
	TAILQ_INIT(&fw->assocs);
	udp_relay_init(&fw->udp, base, PROTO_UDP_BY_CLIENT, &fw->udp_counters,
	    udp_remote_request, udp_remote_cancel, fw, "the server");
	fw->remotes = xcalloc(cfg->nremote_forward + 1, sizeof *fw->remotes);
	for (size_t i = 0; i < cfg->nremote_forward; i++)
		cfg_forward_copy(&fw->remotes[fw->nremotes++].cf,
		    &cfg->remote_forward[i]);
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
	/* Going away: nothing waits for a next connection. */
	fwd_set_clear(&fw->set);
	fw->attached = false;
	while ((sk = TAILQ_FIRST(&fw->socks)) != NULL)
		socks_free(sk, true);
	while (!TAILQ_EMPTY(&fw->held))
		held_free(TAILQ_FIRST(&fw->held), true);
	while (!TAILQ_EMPTY(&fw->assocs))
		assoc_free(TAILQ_FIRST(&fw->assocs));
	udp_relay_clear(&fw->udp);
	for (size_t i = 0; i < fw->nlisteners; i++)
		listener_free(fw->listeners[i]);
	if (fw->dns != NULL)
		evdns_base_free(fw->dns, 0);
	for (size_t i = 0; i < fw->nremotes; i++)
		cfg_forward_clear(&fw->remotes[i].cf);
	free(fw->remotes);
	free(fw);
}

void
forward_set_key(struct forward *fw, const uint8_t pub[static KEY_LEN])
{
	key_encode(pub, fw->key);
	snprintf(fw->deny_hint, sizeof fw->deny_hint, "not in the server's "
	    "AllowForward for this client's key %s", fw->key);
}

void
forward_attach(struct forward *fw, struct quic_conn *qc)
{
	struct held *h;

	forward_detach(fw, true);
	/* A reload may have changed these. */
	fw->set.cap = fw->cfg->forward_buffer;
	fw->set.max = fw->cfg->max_forwards;
	fw->set.park_ms = (uint64_t)fw->cfg->idle_timeout * 1000;
	fwd_set_attach(&fw->set, qc);
	fw->attached = true;
	/* Flows are set up again as their sources send. */
	udp_relay_attach(&fw->udp, qc);
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

/* An older roved ignores the bind address and listens on 0.0.0.0: fine
 * for the default (what it always did) and for "*" and 0.0.0.0 (no more
 * than asked), but a forward bound to one address must not be opened to
 * all of them. */
static bool
old_server_may(const struct proto_remote_forward *rf)
{
	static const uint8_t zero[4];

	return rf->bind != PROTO_RBIND_ADDR ||
	    (rf->bind_addr.family == AF_INET &&
	    memcmp(rf->bind_addr.b, zero, sizeof zero) == 0);
}

/* Where the server listens for a RemoteForward, for messages: its bind
 * address and port as written ("localhost:2222" for the default), or, on
 * an older roved that takes no bind address, the 0.0.0.0 it listens on
 * (not known before a server has answered; a forward not asked for keeps
 * its own). */
static const char *
remote_where(const struct forward *fw, const struct cfg_forward *cf,
    char buf[static PROTO_FWD_REMOTE_STRLEN])
{
	struct proto_remote_forward rf;

	cfg_forward_remote(cf, &rf);
	if (fw->features_known && !fw->bind_ok && old_server_may(&rf)) {
		rf.bind = PROTO_RBIND_ADDR;
		memset(&rf.bind_addr, 0, sizeof rf.bind_addr);
		rf.bind_addr.family = AF_INET;
	}
	return proto_fwd_remote_str(&rf, buf);
}

static void
remote_request_one(struct forward *fw, struct remote *r, struct quic_conn *qc)
{
	struct proto_remote_forward rf;
	char s[PROTO_FWD_REMOTE_STRLEN];
	uint8_t buf[64];
	size_t n;

	cfg_forward_remote(&r->cf, &rf);
	r->ok = false;
	r->asked = true;
	r->replied = false;
	r->unsupported = false;
	/* An older roved would skip the protocol and listen on TCP. */
	if (rf.udp && !fw->udp_ok) {
		r->unsupported = true;
		log_error("remote forward on %s not asked for: the server does "
		    "not take UDP forwards (an older roved)",
		    proto_fwd_remote_str(&rf, s));
		return;
	}
	if (!fw->bind_ok && !old_server_may(&rf)) {
		r->unsupported = true;
		log_error("remote forward on %s not asked for: the server is "
		    "an older roved, which would listen on all its IPv4 "
		    "addresses (0.0.0.0:%u) instead; upgrade it, or give "
		    "the forward no bind address", proto_fwd_remote_str(&rf, s),
		    (unsigned)rf.port);
		return;
	}
	n = proto_fwd_remote_encode(buf, sizeof buf, PROTO_MSG_REMOTE_FORWARD, &rf);
	if (n > 0)
		(void)quic_conn_stream_send(qc, 0, buf, n, false);
}

void
forward_server_features(struct forward *fw, uint64_t features)
{
	fw->cancel_ok = (features & PROTO_FEATURE_CANCEL_REMOTE) != 0;
	fw->set.resumable = (features & PROTO_FEATURE_FWD_RESUME) != 0;
	fw->bind_ok = (features & PROTO_FEATURE_REMOTE_BIND) != 0;
	fw->udp_ok = (features & PROTO_FEATURE_UDP_FORWARD) != 0;
	fw->features_known = true;
	for (size_t i = 0; i < fw->nlisteners && !fw->udp_ok && !fw->udp_warned;
	    i++) {
		char what[PROTO_FWD_MAX_HOST + 32];

		if (!fw->listeners[i]->cf.udp)
			continue;
		log_error("%s: the server does not take UDP forwards (an older "
		    "roved): its datagrams are dropped", listener_str(
		    &fw->listeners[i]->cf, FWD_LOCAL, what, sizeof what));
		fw->udp_warned = true;
	}
}

void
forward_resume(struct forward *fw)
{
	if (fw->attached)
		fwd_set_resume(&fw->set, &fw->set);
}

void
forward_remote_request(struct forward *fw, struct quic_conn *qc)
{
	for (size_t i = 0; i < fw->nremotes; i++)
		remote_request_one(fw, &fw->remotes[i], qc);
}

void
forward_detach(struct forward *fw, bool keep)
{
	if (!fw->attached)
		return;
	/* Forwards that can carry on over the next connection wait for it;
	 * the rest are reset. */
	if (keep)
		fwd_set_park(&fw->set, &fw->set);
	else
		fwd_set_clear(&fw->set);
	udp_relay_attach(&fw->udp, NULL);
	fw->attached = false;
}

struct udp_relay *
forward_udp(struct forward *fw)
{
	return &fw->udp;
}

struct fwd_set *
forward_set(struct forward *fw)
{
	return fw->attached ? &fw->set : NULL;
}

int
forward_control(struct forward *fw, uint64_t type, const uint8_t *body, size_t len)
{
	struct proto_remote_forward rf, mine;
	char s[PROTO_FWD_REMOTE_STRLEN];

	if (type != PROTO_MSG_REMOTE_FORWARD_REPLY ||
	    proto_fwd_remote_decode(body, len, &rf) != 0)
		return -1;
	for (size_t i = 0; i < fw->nremotes; i++) {
		const struct cfg_forward *cf = &fw->remotes[i].cf;

		/* A server that takes bind addresses echoes ours; an older
		 * one names the port alone (one RemoteForward per port). */
		cfg_forward_remote(cf, &mine);
		if (cf->bind_port != rf.port || cf->udp != rf.udp ||
		    (fw->bind_ok && !proto_fwd_remote_same(&mine, &rf)))
			continue;
		fw->remotes[i].ok = rf.status == PROTO_FWD_OK;
		fw->remotes[i].denied = rf.status == PROTO_FWD_ERR_DENIED;
		fw->remotes[i].replied = true;
		fw->remotes[i].status = rf.status;
		remote_where(fw, cf, s);
		if (rf.status == PROTO_FWD_OK && !fw->bind_ok)
			log_warn("remote forward: the server listens on %s for "
			    "%s:%u: on all its IPv4 addresses, not loopback "
			    "alone (an older roved, which takes no bind "
			    "address)", s, cf->target_host, cf->target_port);
		else if (rf.status == PROTO_FWD_OK)
			log_info("remote forward: the server listens on %s for "
			    "%s:%u", s, cf->target_host, cf->target_port);
		else if (rf.status == PROTO_FWD_ERR_DENIED)
			log_error("remote forward on %s refused by the server: "
			    "denied (not in its AllowRemoteForward for this "
			    "client's key %s)", s, fw->key);
		else
			log_error("remote forward on %s refused by the server: %s",
			    s, proto_fwd_error_name(rf.status));
	}
	return 0;
}

size_t
forward_listeners(const struct forward *fw, bool connected,
    struct status_listener *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < fw->nlisteners && n < max; i++) {
		const struct listener *l = fw->listeners[i];
		struct status_listener *sl = &out[n++];

		sl->kind = l->kind == FWD_DYNAMIC ? "dynamic" :
		    l->cf.udp ? "local udp" : "local";
		addr_hostport_str(sl->bind, sizeof sl->bind, l->cf.bind_host != NULL ?
		    l->cf.bind_host : "127.0.0.1", l->cf.bind_port);
		sl->target[0] = '\0';
		if (l->kind != FWD_DYNAMIC)
			addr_hostport_str(sl->target, sizeof sl->target,
			    l->cf.target_host, l->cf.target_port);
		sl->state = l->cf.udp && fw->features_known && !fw->udp_ok ?
		    "not supported by the server" : "listening";
	}
	for (size_t i = 0; i < fw->nremotes && n < max; i++) {
		const struct remote *r = &fw->remotes[i];
		struct status_listener *sl = &out[n++];
		char s[PROTO_FWD_REMOTE_STRLEN];

		/* The protocol is the kind's, as for a local one. */
		sl->kind = r->cf.udp ? "remote udp" : "remote";
		remote_where(fw, &r->cf, s);
		snprintf(sl->bind, sizeof sl->bind, "server %s",
		    r->cf.udp ? s + strlen("udp/") : s);
		addr_hostport_str(sl->target, sizeof sl->target,
		    r->cf.target_host, r->cf.target_port);
		sl->state = !connected || !r->asked ? "waiting for a session" :
		    r->unsupported ? "not supported by the server" :
		    !r->replied ? "requested" : r->status == PROTO_FWD_OK ?
		    "listening" : proto_fwd_error_name(r->status);
	}
	return n;
}

const struct fwd_counters *
forward_counters(const struct forward *fw)
{
	return &fw->counters;
}

/* One listener the new configuration asks for. */
struct wanted {
	const struct cfg_forward *cf;
	enum fwd_kind kind;
	struct listener *l;     /* kept (same address) or opened for it */
	bool opened;
};

int
forward_reload(struct forward *fw, const struct cfg *next, struct quic_conn *qc)
{
	size_t nwant = next->nlocal_forward + next->ndynamic_forward, n = 0;
	struct wanted *w = xcalloc(nwant + 1, sizeof *w);
	bool *kept = xcalloc(fw->nlisteners + 1, sizeof *kept);
	struct remote *remotes;
	char *cause = NULL, what[PROTO_FWD_MAX_HOST + 32];
	char target[PROTO_FWD_MAX_HOST + 16];
	int ret = -1;

	for (size_t i = 0; i < next->nlocal_forward; i++)
		w[n++] = (struct wanted){ &next->local_forward[i], FWD_LOCAL, NULL, false };
	for (size_t i = 0; i < next->ndynamic_forward; i++)
		w[n++] = (struct wanted){ &next->dynamic_forward[i], FWD_DYNAMIC, NULL, false };
	if (nwant > MAX_LISTENERS) {
		log_error("%s: more than %d LocalForward and DynamicForward",
		    next->path, MAX_LISTENERS);
		goto out;
	}
	/* A listener on an address that stays keeps its socket (its target
	 * or kind may change); new addresses are bound before anything else
	 * changes, so a busy port refuses the reload as a whole. */
	for (size_t i = 0; i < nwant; i++) {
		for (size_t j = 0; j < fw->nlisteners && w[i].l == NULL; j++) {
			if (!kept[j] && cfg_forward_same_bind(&fw->listeners[j]->cf,
			    w[i].cf)) {
				kept[j] = true;
				w[i].l = fw->listeners[j];
			}
		}
		if (w[i].l != NULL)
			continue;
		if ((w[i].l = listener_open(fw, w[i].cf, w[i].kind, &cause)) == NULL) {
			log_error("%s:%u: %s: %s", next->path, w[i].cf->line,
			    w[i].kind == FWD_LOCAL ? "LocalForward" :
			    "DynamicForward", cause);
			free(cause);
			for (size_t k = 0; k < i; k++) {
				if (w[k].opened)
					listener_free(w[k].l);
			}
			goto out;
		}
		w[i].opened = true;
	}

	for (size_t j = 0; j < fw->nlisteners; j++) {
		if (kept[j])
			continue;
		log_info("reload: %s closed (connections made through it carry "
		    "on)", listener_str(&fw->listeners[j]->cf,
		    fw->listeners[j]->kind, what, sizeof what));
		listener_free(fw->listeners[j]);
	}
	for (size_t i = 0; i < nwant; i++) {
		struct listener *l = w[i].l;
		bool changed = l->kind != w[i].kind ||
		    (w[i].kind == FWD_LOCAL && !cfg_forward_same_target(&l->cf, w[i].cf));

		if (!w[i].opened && changed) {
			cfg_forward_clear(&l->cf);
			cfg_forward_copy(&l->cf, w[i].cf);
			l->kind = w[i].kind;
		} else if (!w[i].opened) {
			continue;
		}
		if (w[i].kind == FWD_LOCAL)
			addr_hostport_str(target, sizeof target,
			    w[i].cf->target_host, w[i].cf->target_port);
		log_info("reload: %s %s%s%s", listener_str(w[i].cf, w[i].kind,
		    what, sizeof what), w[i].opened ? "listening" : "changed",
		    w[i].kind == FWD_LOCAL ? ", to " : " (SOCKS)",
		    w[i].kind == FWD_LOCAL ? target : "");
	}
	for (size_t i = 0; i < nwant; i++)
		fw->listeners[i] = w[i].l;
	fw->nlisteners = nwant;

	/* RemoteForward: the server listens while the connection lives, so
	 * a new one is asked for now (or with the next connection), and one
	 * removed is taken back (a server too old for that listens until the
	 * connection ends; what it accepts there is refused). One whose bind
	 * address changed is both, taken back first so that its port is
	 * free for the new one. */
	for (size_t j = 0; j < fw->nremotes; j++) {
		const struct cfg_forward *ocf = &fw->remotes[j].cf;
		bool stays = false;
		char s[PROTO_FWD_REMOTE_STRLEN];

		for (size_t i = 0; i < next->nremote_forward; i++)
			stays |= cfg_forward_same_bind(&next->remote_forward[i],
			    ocf);
		if (stays)
			continue;
		remote_where(fw, ocf, s);
		if (qc != NULL && fw->cancel_ok && !fw->remotes[j].unsupported) {
			struct proto_remote_forward rf;
			uint8_t buf[64];
			size_t len;

			cfg_forward_remote(ocf, &rf);
			len = proto_fwd_remote_encode(buf, sizeof buf,
			    PROTO_MSG_REMOTE_FORWARD_CANCEL, &rf);
			if (len > 0)
				(void)quic_conn_stream_send(qc, 0, buf, len, false);
			log_info("reload: RemoteForward %s removed: the server "
			    "stops listening there", s);
		} else {
			log_info("reload: RemoteForward %s removed%s", s,
			    fw->remotes[j].ok ? ": connections to it are "
			    "refused; the server listens there until this "
			    "connection ends" : "");
		}
	}
	remotes = xcalloc(next->nremote_forward + 1, sizeof *remotes);
	for (size_t i = 0; i < next->nremote_forward; i++) {
		const struct cfg_forward *cf = &next->remote_forward[i];
		struct remote *old = NULL;
		char s[PROTO_FWD_REMOTE_STRLEN];

		cfg_forward_copy(&remotes[i].cf, cf);
		for (size_t j = 0; j < fw->nremotes && old == NULL; j++) {
			if (cfg_forward_same_bind(&fw->remotes[j].cf, cf))
				old = &fw->remotes[j];
		}
		addr_hostport_str(target, sizeof target, cf->target_host,
		    cf->target_port);
		remote_where(fw, cf, s);
		if (old != NULL && old->denied && qc != NULL) {
			/* The server's reload may allow it now. */
			log_info("reload: RemoteForward %s asked for again "
			    "(the server denied it before)", s);
			remote_request_one(fw, &remotes[i], qc);
			continue;
		}
		if (old != NULL) {
			remotes[i].ok = old->ok;
			remotes[i].denied = old->denied;
			remotes[i].asked = old->asked;
			remotes[i].replied = old->replied;
			remotes[i].unsupported = old->unsupported;
			remotes[i].status = old->status;
			if (!cfg_forward_same_target(&old->cf, cf))
				log_info("reload: RemoteForward %s now to %s",
				    s, target);
			continue;
		}
		log_info("reload: RemoteForward %s added, to %s", s, target);
		if (qc != NULL)
			remote_request_one(fw, &remotes[i], qc);
	}
	for (size_t j = 0; j < fw->nremotes; j++)
		cfg_forward_clear(&fw->remotes[j].cf);
	free(fw->remotes);
	fw->remotes = remotes;
	fw->nremotes = next->nremote_forward;
	ret = 0;
out:
	free(w);
	free(kept);
	return ret;
}

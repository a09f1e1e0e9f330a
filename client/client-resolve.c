/* The server's address: its name resolved at start, and again before
 * each reconnect, so that a server on a dynamic address is followed and
 * a name that does not resolve yet (no network at boot) is waited for
 * instead of ending rove. Lookups on reconnect are asynchronous (evdns,
 * seconds at most): in a full tunnel the resolver may sit behind the very
 * session that is down, and the loop must not stall on it; a failed
 * lookup keeps the last good address. */
#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "client-int.h"
#include "forward/dial.h"

static bool
is_literal(const char *host)
{
	uint8_t b[16];

	return inet_pton(AF_INET, host, b) == 1 || inet_pton(AF_INET6, host, b) == 1;
}

/* Over TCP only, the TCP server is the one whose path to keep out of the
 * tunnel; the IP of the QUIC server (or that one) is what routes and
 * path checks follow. */
static void
settle(struct client *c)
{
	uint16_t port;

	if (c->cfg->transport == CFG_TRANSPORT_TCP) {
		memcpy(&c->server, &c->server_tcp, c->server_tcplen);
		c->serverlen = c->server_tcplen;
	}
	addr_from_sockaddr((struct sockaddr *)&c->server, &c->server_ip, &port);
}

/* Of a lookup's answers, the one in the family of the address in use (a
 * new one for a server that moved), else the first. */
static const struct evutil_addrinfo *
choose(const struct evutil_addrinfo *res, int family)
{
	for (const struct evutil_addrinfo *a = res; a != NULL; a = a->ai_next) {
		if (a->ai_family == family)
			return a;
	}
	return res;
}

static void
adopt(struct client *c, bool tcp, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage *ss = tcp ? &c->server_tcp : &c->server;
	socklen_t *sslen = tcp ? &c->server_tcplen : &c->serverlen;
	char was[ADDR_STRLEN], now[ADDR_STRLEN];

	if (c->resolved && (len != *sslen || memcmp(ss, sa, len) != 0))
		log_info("%s now resolves to %s (was %s)", tcp ?
		    c->cfg->server_tcp_host : c->cfg->server_host,
		    addr_sockaddr_str(sa, now), addr_sockaddr_str(
		    (const struct sockaddr *)ss, was));
	memcpy(ss, sa, len);
	*sslen = len;
}

static int
resolve_now(struct client *c, bool tcp, char **cause, int *gai)
{
	const char *host = tcp ? c->cfg->server_tcp_host : c->cfg->server_host;
	struct addrinfo hints = { .ai_socktype = tcp ? SOCK_STREAM : SOCK_DGRAM };
	struct addrinfo *res;
	char pbuf[8];

	snprintf(pbuf, sizeof pbuf, "%u", (unsigned)(tcp ?
	    c->cfg->server_tcp_port : c->cfg->server_port));
	if ((*gai = getaddrinfo(host, pbuf, &hints, &res)) != 0) {
		xasprintf(cause, "%s: %s", host, gai_strerror(*gai));
		return -1;
	}
	adopt(c, tcp, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int
client_resolve_init(struct client *c, char **cause)
{
	const struct cfg *cfg = c->cfg;
	int gai = 0;

	if ((cfg->transport != CFG_TRANSPORT_TCP &&
	    resolve_now(c, false, cause, &gai) != 0) ||
	    (cfg->transport != CFG_TRANSPORT_QUIC &&
	    resolve_now(c, true, cause, &gai) != 0)) {
		/* A name that does not exist is a mistake in the config; no
		 * network yet, or a resolver that does not answer, passes. */
		if (gai != EAI_AGAIN && gai != EAI_FAIL)
			return -1;
		log_warn("%s; trying again", *cause);
		free(*cause);
		*cause = NULL;
		return 0;
	}
	c->resolved = true;
	settle(c);
	return 0;
}

static void
lookup_done(struct client *c)
{
	if (--c->lookups > 0)
		return;
	c->lookup_failed = c->lookup_failed && !c->resolved;
	if (c->lookup_failed) {
		c->lookup_failed = false;
		client_connect_failed(c);
		return;
	}
	c->resolved = true;
	settle(c);
	c->looked_up = true;
	client_connect(c);
}

static void
lookup_cb(int err, struct evutil_addrinfo *res, void *arg)
{
	struct client_lookup *l = arg;
	struct client *c = l->c;
	bool tcp = l == &c->lookup[1];
	const char *host = tcp ? c->cfg->server_tcp_host : c->cfg->server_host;

	l->req = NULL;
	if (err == EVUTIL_EAI_CANCEL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	if (err != 0 || res == NULL) {
		log_warn("%s: %s%s", host, evutil_gai_strerror(err), c->resolved ?
		    "; keeping its last address" : "");
		c->lookup_failed = true;
	} else {
		const struct evutil_addrinfo *a = choose(res, (tcp ?
		    &c->server_tcp : &c->server)->ss_family);

		adopt(c, tcp, a->ai_addr, (socklen_t)a->ai_addrlen);
		evutil_freeaddrinfo(res);
	}
	lookup_done(c);
}

static void
lookup_start(struct client *c, bool tcp)
{
	const char *host = tcp ? c->cfg->server_tcp_host : c->cfg->server_host;
	struct evutil_addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = tcp ? SOCK_STREAM : SOCK_DGRAM,
	};
	struct client_lookup *l = &c->lookup[tcp];
	struct evdns_getaddrinfo_request *req;
	char port[8];

	snprintf(port, sizeof port, "%u", (unsigned)(tcp ?
	    c->cfg->server_tcp_port : c->cfg->server_port));
	l->c = c;
	c->lookups++;
	/* An answer from /etc/hosts comes inside the call (lookup_cb has
	 * then run, and the request is gone: NULL). */
	req = evdns_getaddrinfo(c->resolver, host, port, &hints, lookup_cb, l);
	if (req != NULL)
		l->req = req;
}

bool
client_resolve_again(struct client *c)
{
	const struct cfg *cfg = c->cfg;
	bool quic = cfg->transport != CFG_TRANSPORT_TCP &&
	    !is_literal(cfg->server_host);
	bool tcp = cfg->transport != CFG_TRANSPORT_QUIC &&
	    !is_literal(cfg->server_tcp_host);

	if (c->looked_up) {
		c->looked_up = false;
		return false;
	}
	if (c->lookups > 0)
		return true;
	/* The first attempt uses what start resolved; a reconnect asks
	 * again. */
	if ((c->resolved && c->failures == 0) || (!quic && !tcp))
		return false;
	if (c->resolver == NULL) {
		char *cause = NULL;

		if ((c->resolver = dial_resolver_new(c->base, &cause)) == NULL) {
			log_warn("%s", cause);
			free(cause);
			return false;
		}
	}
	/* One count for the whole round, so that an answer given inside
	 * evdns_getaddrinfo (from /etc/hosts) cannot finish it early. */
	c->lookups = 1;
	if (quic)
		lookup_start(c, false);
	if (tcp)
		lookup_start(c, true);
	lookup_done(c);
	return true;
}

/* The proxy's name, looked up in the loop's thread: a proxy is named in
 * the local network's own resolver (or /etc/hosts, or is an address),
 * which answers at once, and a failed lookup is tried again before the
 * next attempt over TCP. */
bool
client_proxy_resolved(struct client *c)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	char pbuf[8];
	int gai;

	if (c->proxy_addrlen != 0)
		return true;
	snprintf(pbuf, sizeof pbuf, "%u", (unsigned)c->proxy.port);
	if ((gai = getaddrinfo(c->proxy.host, pbuf, &hints, &res)) != 0) {
		log_warn("proxy %s: %s", c->proxy.host, gai_strerror(gai));
		return false;
	}
	memcpy(&c->proxy_addr, res->ai_addr, res->ai_addrlen);
	c->proxy_addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return true;
}

int
client_proxy_init(struct client *c, char **cause)
{
	const struct cfg *cfg = c->cfg;

	c->proxy = cfg->proxy;
	if (cfg->proxy.kind == PROXY_ENV) {
		const struct proxy_env env = {
			getenv("https_proxy"), getenv("HTTPS_PROXY"),
			getenv("all_proxy"), getenv("ALL_PROXY"),
			getenv("no_proxy"), getenv("NO_PROXY"),
		};
		const char *var = NULL, *why = NULL;

		if (proxy_env_resolve(&env, cfg->server_tcp_host, &c->proxy,
		    &var, &why) != 0) {
			xasprintf(cause, "Proxy = env: %s: %s", var, why);
			return -1;
		}
		if (c->proxy.kind != PROXY_NONE)
			log_info("Proxy = env: %s from %s", proxy_url_str(&c->proxy,
			    c->proxy_str), var);
		else if (var != NULL)
			log_info("Proxy = env: %s exempts %s", var,
			    cfg->server_tcp_host);
		else
			log_info("Proxy = env: none set (https_proxy, "
			    "HTTPS_PROXY, all_proxy, ALL_PROXY)");
	}
	if (cfg->transport == CFG_TRANSPORT_QUIC)
		c->proxy.kind = PROXY_NONE;
	proxy_url_str(&c->proxy, c->proxy_str);
	if (c->proxy.kind != PROXY_NONE)
		(void)client_proxy_resolved(c);
	return 0;
}

void
client_resolve_free(struct client *c)
{
	/* The loop does not run again: a cancelled lookup's callback never
	 * comes, and the lookups live in the client. */
	for (int i = 0; i < 2; i++) {
		if (c->lookup[i].req != NULL)
			evdns_getaddrinfo_cancel(c->lookup[i].req);
		c->lookup[i].req = NULL;
	}
	if (c->resolver != NULL)
		evdns_base_free(c->resolver, 0);
	c->resolver = NULL;
}

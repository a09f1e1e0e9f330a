/* HTTP CONNECT and SOCKS5 CONNECT on a non-blocking socket: one message
 * out, one answer in, until the proxy has made the connection a tunnel
 * (tcp-proxy.h). Buffers are fixed: an answer longer than the largest
 * legitimate one ends the attempt. */
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/coding.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/xmalloc.h"
#include "tcp-proxy.h"
#include "wire/proxy.h"

enum step {
	STEP_HTTP,          /* CONNECT sent, the reply's header awaited */
	STEP_S5_METHOD,     /* greeting sent, the method awaited */
	STEP_S5_AUTH,       /* user name and password sent */
	STEP_S5_CONNECT,    /* CONNECT sent */
};

struct tcp_proxy_hs {
	enum step step;
	bool http;
	uint8_t out[2048];
	size_t outlen, outoff;
	uint8_t in[PROXY_HTTP_REPLY_MAX];
	size_t inlen;
	char name[PROXY_HOST_MAX + 32];   /* "proxy host:port" */
	char target[PROXY_HOST_MAX];
	uint16_t target_port;
	bool has_cred;
	char user[PROXY_CRED_MAX + 1], pass[PROXY_CRED_MAX + 1];
};

/* "Basic" credentials: base64 of "user:password", by wolfCrypt. */
static bool
basic_auth(const char *user, const char *pass, char *out, size_t outlen)
{
	char plain[2 * PROXY_CRED_MAX + 2];
	word32 n = (word32)(outlen - 1);
	int len = snprintf(plain, sizeof plain, "%s:%s", user, pass);
	bool ok = len > 0 && (size_t)len < sizeof plain &&
	    Base64_Encode_NoNl((const byte *)plain, (word32)len, (byte *)out,
	    &n) == 0;

	explicit_bzero(plain, sizeof plain);
	if (!ok)
		return false;
	out[n] = '\0';
	return true;
}

struct tcp_proxy_hs *
tcp_proxy_hs_new(const struct quic_tcp_proxy *p)
{
	struct tcp_proxy_hs *hs = xcalloc(1, sizeof *hs);
	const struct proxy_url *u = p->url;
	char hp[PROXY_HOST_MAX + 8];

	addr_hostport_str(hp, sizeof hp, u->host, u->port);
	snprintf(hs->name, sizeof hs->name, "proxy %s", hp);
	snprintf(hs->target, sizeof hs->target, "%s", p->target_host);
	hs->target_port = p->target_port;
	hs->http = u->kind == PROXY_HTTP;
	hs->has_cred = u->has_cred;
	if (hs->http) {
		char b64[4 * ((2 * PROXY_CRED_MAX + 1) / 3 + 1) + 1];
		bool cred = u->has_cred && basic_auth(u->user, u->pass, b64,
		    sizeof b64);

		hs->step = STEP_HTTP;
		hs->outlen = proxy_http_request((char *)hs->out, sizeof hs->out,
		    hs->target, hs->target_port, cred ? b64 : NULL);
		explicit_bzero(b64, sizeof b64);
	} else {
		memcpy(hs->user, u->user, sizeof hs->user);
		memcpy(hs->pass, u->pass, sizeof hs->pass);
		hs->step = STEP_S5_METHOD;
		hs->outlen = proxy_socks5_greeting(hs->out, u->has_cred);
	}
	return hs;
}

const char *
tcp_proxy_hs_name(const struct tcp_proxy_hs *hs)
{
	return hs->name;
}

void
tcp_proxy_hs_free(struct tcp_proxy_hs *hs)
{
	if (hs == NULL)
		return;
	explicit_bzero(hs, sizeof *hs);
	free(hs);
}

static void
next_message(struct tcp_proxy_hs *hs, enum step step, size_t len)
{
	hs->step = step;
	hs->outlen = len;
	hs->outoff = 0;
	hs->inlen = 0;
}

/* The answer in hs->in, whole, is taken (`used` bytes of it): 1 done, 0
 * next message queued, -1 failed. */
static int
answered(struct tcp_proxy_hs *hs, long used, const struct proxy_http_reply *hr,
    uint8_t code, char *reason, size_t len, bool *refused)
{
	/* A refusal may come with a body, which is of no interest. */
	if ((size_t)used != hs->inlen &&
	    (hs->step != STEP_HTTP || (hr->status >= 200 && hr->status < 300))) {
		/* The server speaks only after our ClientHello: bytes past
		 * the answer are not the server's. */
		snprintf(reason, len, "%s sent more than its answer", hs->name);
		return -1;
	}
	switch (hs->step) {
	case STEP_HTTP:
		if (hr->status >= 200 && hr->status < 300)
			return 1;
		*refused = hr->status == 403 || hr->status == 407;
		snprintf(reason, len, "%s refused CONNECT: %s%s", hs->name,
		    hr->line, hr->status == 407 ? (hs->has_cred ?
		    " (wrong user name or password?)" :
		    " (it wants a user name and password)") : "");
		return -1;
	case STEP_S5_METHOD:
		if (code == PROXY_SOCKS5_METHOD_USERPASS && hs->has_cred) {
			size_t n = proxy_socks5_auth_request(hs->out,
			    sizeof hs->out, hs->user, hs->pass);

			explicit_bzero(hs->pass, sizeof hs->pass);
			next_message(hs, STEP_S5_AUTH, n);
			return n > 0 ? 0 : -1;
		}
		if (code != 0x00) {
			*refused = true;
			snprintf(reason, len, "%s (SOCKS5) accepts none of our "
			    "authentication methods (%s)", hs->name, hs->has_cred ?
			    "none, user name and password" : "none");
			return -1;
		}
		break;
	case STEP_S5_AUTH:
		if (code != 0) {
			*refused = true;
			snprintf(reason, len, "%s (SOCKS5) refused the user name "
			    "and password (status %u)", hs->name, (unsigned)code);
			return -1;
		}
		break;
	case STEP_S5_CONNECT:
		if (code == 0)
			return 1;
		*refused = code == 2;
		snprintf(reason, len, "%s (SOCKS5) refused CONNECT: %s (reply %u)",
		    hs->name, proxy_socks5_rep_str(code), (unsigned)code);
		return -1;
	}
	/* Method or authentication done: the request. */
	next_message(hs, STEP_S5_CONNECT, proxy_socks5_connect(hs->out,
	    sizeof hs->out, hs->target, hs->target_port));
	if (hs->outlen == 0) {
		snprintf(reason, len, "%s: the server's name is too long for SOCKS5",
		    hs->name);
		return -1;
	}
	return 0;
}

/* What has arrived, parsed: 1, 0 or -1 as tcp_proxy_hs_step, and 2 for
 * "incomplete, read more". */
static int
parse(struct tcp_proxy_hs *hs, char *reason, size_t len, bool *refused)
{
	struct proxy_http_reply hr = { 0 };
	uint8_t code = 0;
	long r = 0;

	switch (hs->step) {
	case STEP_HTTP:
		r = proxy_http_parse_reply(hs->in, hs->inlen, &hr);
		break;
	case STEP_S5_METHOD:
		r = proxy_socks5_parse_method(hs->in, hs->inlen, &code);
		break;
	case STEP_S5_AUTH:
		r = proxy_socks5_parse_auth(hs->in, hs->inlen, &code);
		break;
	case STEP_S5_CONNECT:
		r = proxy_socks5_parse_reply(hs->in, hs->inlen, &code);
		break;
	}
	if (r == 0)
		return 2;
	if (r == PROXY_TOO_LONG) {
		snprintf(reason, len, "%s: an answer to CONNECT longer than %d "
		    "bytes (%s)", hs->name, PROXY_HTTP_REPLY_MAX, hr.line);
		return -1;
	}
	if (r < 0) {
		snprintf(reason, len, "%s: not a%s proxy's answer", hs->name,
		    hs->http ? "n HTTP" : " SOCKS5");
		return -1;
	}
	return answered(hs, r, &hr, code, reason, len, refused);
}

int
tcp_proxy_hs_step(struct tcp_proxy_hs *hs, int fd, bool *want_write,
    char *reason, size_t len, bool *refused)
{
	ssize_t n;
	int r;

	*want_write = false;
	*refused = false;
	/* Bounded: every round either sends a message or takes an answer. */
	for (int round = 0; round < 8; round++) {
		while (hs->outoff < hs->outlen) {
			n = send(fd, hs->out + hs->outoff, hs->outlen - hs->outoff,
			    MSG_NOSIGNAL);
			if (n > 0) {
				hs->outoff += (size_t)n;
				continue;
			}
			if (n == -1 && errno == EINTR)
				continue;
			if (n == -1 && errno == EAGAIN) {
				*want_write = true;
				return 0;
			}
			snprintf(reason, len, "%s: %s", hs->name, strerror(errno));
			return -1;
		}
		if (hs->outlen > 0) {
			/* Sent: the credentials need not stay. */
			explicit_bzero(hs->out, hs->outlen);
			hs->outlen = hs->outoff = 0;
		}
		if (hs->inlen == sizeof hs->in) {
			snprintf(reason, len, "%s: an answer too long", hs->name);
			return -1;
		}
		n = recv(fd, hs->in + hs->inlen, sizeof hs->in - hs->inlen, 0);
		if (n == 0) {
			snprintf(reason, len, "%s closed the connection before "
			    "answering", hs->name);
			return -1;
		}
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			snprintf(reason, len, "%s: %s", hs->name, strerror(errno));
			return -1;
		}
		hs->inlen += (size_t)n;
		if ((r = parse(hs, reason, len, refused)) != 2 && r != 0)
			return r;
		if (r == 2)
			round--;   /* the same answer, more of it */
	}
	return 0;
}

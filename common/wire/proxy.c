/* Proxies on the way out: URL, environment, and the CONNECT exchanges of
 * HTTP and SOCKS5 (proxy.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/addr.h"
#include "base/bytes.h"
#include "proxy.h"

/* Percent-decode `n` bytes of `s` into `dst` (PROXY_CRED_MAX + 1 bytes);
 * a NUL or control byte, decoded or not, is refused. */
static int
decode_cred(const char *s, size_t n, char *dst)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return -1;
			if ((hi = hexval(s[i + 1])) < 0 ||
			    (lo = hexval(s[i + 2])) < 0)
				return -1;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || o >= PROXY_CRED_MAX)
			return -1;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	return 0;
}

int
proxy_url_parse(const char *s, struct proxy_url *u, const char **why)
{
	const char *rest, *at, *hostpart, *end, *colon;
	char hp[PROXY_HOST_MAX + 8];
	struct ipaddr ip;
	size_t n;

	memset(u, 0, sizeof *u);
	if (strcasecmp(s, "none") == 0) {
		u->kind = PROXY_NONE;
		return 0;
	}
	if (strcasecmp(s, "env") == 0) {
		u->kind = PROXY_ENV;
		return 0;
	}
	if (strncasecmp(s, "http://", 7) == 0) {
		u->kind = PROXY_HTTP;
		rest = s + 7;
	} else if (strncasecmp(s, "socks5://", 9) == 0) {
		u->kind = PROXY_SOCKS5;
		rest = s + 9;
	} else if (strncasecmp(s, "socks5h://", 10) == 0) {
		u->kind = PROXY_SOCKS5;
		rest = s + 10;
	} else if (strstr(s, "://") != NULL) {
		*why = "the scheme is not http:// or socks5://";
		return -1;
	} else {
		u->kind = PROXY_HTTP;
		rest = s;
	}
	/* The authority ends at the first '/'; only a lone one may follow. */
	end = strchr(rest, '/');
	if (end != NULL && end[1] != '\0') {
		*why = "a proxy URL has no path";
		return -1;
	}
	if (end == NULL)
		end = rest + strlen(rest);
	/* The last '@' ends the credentials (a password may hold '@'
	 * unescaped, as curl allows). */
	at = NULL;
	for (const char *p = rest; p < end; p++) {
		if (*p == '@')
			at = p;
	}
	hostpart = rest;
	if (at != NULL) {
		colon = memchr(rest, ':', (size_t)(at - rest));
		if (colon == NULL || colon == rest) {
			*why = "credentials must be user:password";
			return -1;
		}
		if (decode_cred(rest, (size_t)(colon - rest), u->user) != 0 ||
		    decode_cred(colon + 1, (size_t)(at - colon - 1), u->pass) != 0) {
			*why = "the user name or password is too long or holds "
			    "a control character or a bad %-escape";
			return -1;
		}
		if (strchr(u->user, ':') != NULL) {
			*why = "the user name may not hold ':'";
			return -1;
		}
		u->has_cred = true;
		hostpart = at + 1;
	}
	n = (size_t)(end - hostpart);
	if (n == 0 || n >= sizeof hp) {
		*why = "no host, or a host too long";
		return -1;
	}
	memcpy(hp, hostpart, n);
	hp[n] = '\0';
	if (addr_split_hostport(hp, u->host, sizeof u->host, &u->port,
	    PROXY_DEFAULT_PORT) != 0 || (addr_parse_ip(u->host, &ip) != 0 &&
	    !addr_dns_name_valid(u->host))) {
		*why = "the host is not a name or address, or the port not "
		    "1..65535";
		return -1;
	}
	return 0;
}

static const char *
scheme(enum proxy_kind k)
{
	return k == PROXY_SOCKS5 ? "socks5" : "http";
}

static void
hostport(char *buf, size_t len, const struct proxy_url *u)
{
	addr_hostport_str(buf, len, u->host, u->port);
}

const char *
proxy_url_str(const struct proxy_url *u, char buf[static PROXY_URL_STRLEN])
{
	char hp[PROXY_HOST_MAX + 8];

	if (u->kind == PROXY_NONE || u->kind == PROXY_ENV) {
		snprintf(buf, PROXY_URL_STRLEN, "%s", u->kind == PROXY_NONE ?
		    "none" : "env");
		return buf;
	}
	hostport(hp, sizeof hp, u);
	snprintf(buf, PROXY_URL_STRLEN, "%s://%s", scheme(u->kind), hp);
	return buf;
}

/* The user name escaped again where the URL syntax needs it. */
static void
encode_user(char *dst, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s != '\0' && o + 4 < len; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '%' || c == '@' || c == '/' || c == ':' || c > 0x7e)
			o += (size_t)snprintf(dst + o, len - o, "%%%02X", c);
		else
			dst[o++] = (char)c;
	}
	dst[o] = '\0';
}

const char *
proxy_url_masked(const struct proxy_url *u,
    char buf[static PROXY_URL_MASKED_STRLEN])
{
	char hp[PROXY_HOST_MAX + 8], user[3 * PROXY_CRED_MAX + 4];

	if (!u->has_cred || u->kind == PROXY_NONE || u->kind == PROXY_ENV) {
		char plain[PROXY_URL_STRLEN];

		snprintf(buf, PROXY_URL_MASKED_STRLEN, "%s", proxy_url_str(u, plain));
		return buf;
	}
	hostport(hp, sizeof hp, u);
	encode_user(user, sizeof user, u->user);
	snprintf(buf, PROXY_URL_MASKED_STRLEN, "%s://%s:***@%s", scheme(u->kind),
	    user, hp);
	return buf;
}

/* One no_proxy entry (`e`, `n` bytes, no blanks) against `host`. */
static bool
entry_match(const char *e, size_t n, const char *host)
{
	char buf[PROXY_HOST_MAX + 8];
	struct ipaddr hip;
	struct prefix p;
	size_t hl = strlen(host);
	char *colon;

	if (n == 1 && e[0] == '*')
		return true;
	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, e, n);
	buf[n] = '\0';
	if (addr_parse_ip(host, &hip) == 0) {
		/* "[v6]" and "[v6]:port" lose their brackets and port. */
		if (buf[0] == '[') {
			char *close = strchr(buf, ']');

			if (close == NULL)
				return false;
			*close = '\0';
			memmove(buf, buf + 1, strlen(buf + 1) + 1);
		} else if ((colon = strchr(buf, ':')) != NULL &&
		    strchr(colon + 1, ':') == NULL)
			*colon = '\0';   /* v4:port */
		return addr_parse_prefix(buf, &p, true) == 0 &&
		    addr_prefix_contains(&p, &hip);
	}
	if ((colon = strchr(buf, ':')) != NULL)
		*colon = '\0';
	e = buf[0] == '.' ? buf + 1 : buf;
	n = strlen(e);
	if (n == 0 || n > hl)
		return false;
	if (strcasecmp(host + hl - n, e) != 0)
		return false;
	return n == hl || host[hl - n - 1] == '.';
}

bool
proxy_no_proxy_match(const char *list, const char *host)
{
	const char *p = list;

	if (list == NULL)
		return false;
	while (*p != '\0') {
		size_t n;

		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		n = strcspn(p, ", \t");
		if (n > 0 && entry_match(p, n, host))
			return true;
		p += n;
	}
	return false;
}

static const char *
set(const char *v)
{
	return v != NULL && v[0] != '\0' ? v : NULL;
}

int
proxy_env_resolve(const struct proxy_env *env, const char *host,
    struct proxy_url *out, const char **var, const char **why)
{
	const struct {
		const char *name, *value;
	} order[] = {
		{ "https_proxy", env->https_proxy },
		{ "HTTPS_PROXY", env->HTTPS_PROXY },
		{ "all_proxy", env->all_proxy },
		{ "ALL_PROXY", env->ALL_PROXY },
	};
	const char *no = set(env->no_proxy) != NULL ? env->no_proxy :
	    set(env->NO_PROXY);

	memset(out, 0, sizeof *out);
	out->kind = PROXY_NONE;
	*var = NULL;
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		if (set(order[i].value) == NULL)
			continue;
		if (no != NULL && proxy_no_proxy_match(no, host)) {
			*var = no == env->no_proxy ? "no_proxy" : "NO_PROXY";
			return 0;
		}
		*var = order[i].name;
		if (proxy_url_parse(order[i].value, out, why) != 0)
			return -1;
		if (out->kind == PROXY_ENV) {
			*why = "env is not a proxy";
			return -1;
		}
		return 0;
	}
	return 0;
}

size_t
proxy_http_request(char *out, size_t outlen, const char *host, uint16_t port,
    const char *basic)
{
	char hp[PROXY_HOST_MAX + 8];
	int n;

	addr_hostport_str(hp, sizeof hp, host, port);
	if (basic != NULL)
		n = snprintf(out, outlen, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n"
		    "Proxy-Authorization: Basic %s\r\n\r\n", hp, hp, basic);
	else
		n = snprintf(out, outlen, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
		    hp, hp);
	return n > 0 && (size_t)n < outlen ? (size_t)n : 0;
}

/* Whether the first `len` bytes of `in` can still begin "HTTP/". */
static bool
http_prefix_ok(const uint8_t *in, size_t len)
{
	static const char want[] = "HTTP/";

	for (size_t i = 0; i < len && i < 5; i++) {
		if (in[i] != (uint8_t)want[i])
			return false;
	}
	return true;
}

/* "HTTP/1.x NNN[ reason]", `n` bytes without the line end. */
static int
status_line(const uint8_t *in, size_t n, struct proxy_http_reply *r)
{
	size_t o = 0;

	if (n < 12 || memcmp(in, "HTTP/1.", 7) != 0 || in[7] < '0' ||
	    in[7] > '9' || in[8] != ' ')
		return -1;
	for (int i = 9; i < 12; i++) {
		if (in[i] < '0' || in[i] > '9')
			return -1;
	}
	if (in[9] == '0' || (n > 12 && in[12] != ' '))
		return -1;
	r->status = (unsigned)((in[9] - '0') * 100 + (in[10] - '0') * 10 +
	    (in[11] - '0'));
	/* Kept for a message: printable bytes only, the rest as '?'. */
	for (size_t i = 0; i < n && o < PROXY_STATUS_LINE_MAX; i++)
		r->line[o++] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : '?';
	r->line[o] = '\0';
	return 0;
}

long
proxy_http_parse_reply(const uint8_t *in, size_t len,
    struct proxy_http_reply *r)
{
	size_t lim = len < PROXY_HTTP_REPLY_MAX ? len : PROXY_HTTP_REPLY_MAX;
	const uint8_t *nl;
	size_t first, start;

	if (!http_prefix_ok(in, lim))
		return PROXY_MALFORMED;
	nl = memchr(in, '\n', lim);
	if (nl == NULL)
		return lim == PROXY_HTTP_REPLY_MAX ? PROXY_TOO_LONG : 0;
	first = (size_t)(nl - in);
	if (status_line(in, first > 0 && in[first - 1] == '\r' ? first - 1 :
	    first, r) != 0)
		return PROXY_MALFORMED;
	/* Header lines up to an empty one ("\r\n" or "\n"). */
	start = first + 1;
	while (start < lim) {
		nl = memchr(in + start, '\n', lim - start);
		if (nl == NULL)
			break;
		if ((size_t)(nl - in) == start ||
		    ((size_t)(nl - in) == start + 1 && in[start] == '\r'))
			return (long)(nl - in) + 1;
		start = (size_t)(nl - in) + 1;
	}
	return lim == PROXY_HTTP_REPLY_MAX ? PROXY_TOO_LONG : 0;
}

size_t
proxy_socks5_greeting(uint8_t out[static 4], bool userpass)
{
	out[0] = 5;
	if (!userpass) {
		out[1] = 1;
		out[2] = 0x00;
		return 3;
	}
	out[1] = 2;
	out[2] = 0x00;
	out[3] = PROXY_SOCKS5_METHOD_USERPASS;
	return 4;
}

long
proxy_socks5_parse_method(const uint8_t *in, size_t len, uint8_t *method)
{
	if (len >= 1 && in[0] != 5)
		return PROXY_MALFORMED;
	if (len < 2)
		return 0;
	*method = in[1];
	return 2;
}

size_t
proxy_socks5_auth_request(uint8_t *out, size_t outlen, const char *user,
    const char *pass)
{
	size_t ul = strlen(user), pl = strlen(pass);

	if (ul == 0 || ul > 255 || pl == 0 || pl > 255 || outlen < 3 + ul + pl)
		return 0;
	out[0] = 1;
	out[1] = (uint8_t)ul;
	memcpy(out + 2, user, ul);
	out[2 + ul] = (uint8_t)pl;
	memcpy(out + 3 + ul, pass, pl);
	return 3 + ul + pl;
}

long
proxy_socks5_parse_auth(const uint8_t *in, size_t len, uint8_t *status)
{
	if (len >= 1 && in[0] != 1 && in[0] != 5)
		return PROXY_MALFORMED;
	if (len < 2)
		return 0;
	*status = in[1];
	return 2;
}

size_t
proxy_socks5_connect(uint8_t *out, size_t outlen, const char *host,
    uint16_t port)
{
	uint8_t a[16];
	size_t n;

	if (outlen < 4)
		return 0;
	out[0] = 5;
	out[1] = 1;     /* CONNECT */
	out[2] = 0;
	if (inet_pton(AF_INET, host, a) == 1) {
		if (outlen < 4 + 4 + 2)
			return 0;
		out[3] = 1;
		memcpy(out + 4, a, 4);
		n = 8;
	} else if (inet_pton(AF_INET6, host, a) == 1) {
		if (outlen < 4 + 16 + 2)
			return 0;
		out[3] = 4;
		memcpy(out + 4, a, 16);
		n = 20;
	} else {
		size_t hl = strlen(host);

		if (hl == 0 || hl > 255 || outlen < 5 + hl + 2)
			return 0;
		out[3] = 3;
		out[4] = (uint8_t)hl;
		memcpy(out + 5, host, hl);
		n = 5 + hl;
	}
	out[n] = (uint8_t)(port >> 8);
	out[n + 1] = (uint8_t)port;
	return n + 2;
}

long
proxy_socks5_parse_reply(const uint8_t *in, size_t len, uint8_t *rep)
{
	size_t need;

	if ((len >= 1 && in[0] != 5) || (len >= 3 && in[2] != 0))
		return PROXY_MALFORMED;
	if (len < 4)
		return 0;
	switch (in[3]) {
	case 1:
		need = 4 + 4 + 2;
		break;
	case 4:
		need = 4 + 16 + 2;
		break;
	case 3:
		if (len < 5)
			return 0;
		need = 5 + (size_t)in[4] + 2;
		break;
	default:
		return PROXY_MALFORMED;
	}
	if (len < need)
		return 0;
	*rep = in[1];
	return (long)need;
}

const char *
proxy_socks5_rep_str(uint8_t rep)
{
	static const char *const words[] = {
		"succeeded",
		"general SOCKS server failure",
		"connection not allowed by ruleset",
		"network unreachable",
		"host unreachable",
		"connection refused by destination host",
		"TTL expired",
		"command not supported",
		"address type not supported",
	};

	return rep < sizeof words / sizeof words[0] ? words[rep] : "unknown reply";
}

/* The client side of the proxies the TLS-over-TCP transport may go
 * through: Proxy's URL, curl's environment variables (https_proxy,
 * all_proxy, no_proxy), and the bytes of an HTTP CONNECT and a SOCKS5
 * CONNECT (RFC 1928, with RFC 1929's user name and password) with their
 * replies. Pure functions over byte buffers and strings, no I/O; parsers
 * never read past their input. */
#ifndef ROVE_PROXY_H
#define ROVE_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum proxy_kind {
	PROXY_NONE,
	PROXY_HTTP,
	PROXY_SOCKS5,
	PROXY_ENV,  /* Proxy = env: chosen from the environment at start */
};

/* RFC 1929 caps both at 255 bytes; HTTP takes them too. */
#define PROXY_CRED_MAX 255
#define PROXY_HOST_MAX 256
/* curl's default port for either kind. */
#define PROXY_DEFAULT_PORT 1080

struct proxy_url {
	enum proxy_kind kind;
	char host[PROXY_HOST_MAX];       /* a name or an IP literal, no [] */
	uint16_t port;
	bool has_cred;
	char user[PROXY_CRED_MAX + 1];   /* percent-decoded */
	char pass[PROXY_CRED_MAX + 1];
};

/* "http://[user:password@]host[:port][/]", "socks5://..." ("socks5h://"
 * too: rove always lets the proxy resolve a name), "none" or "env"; no
 * scheme means http, as in curl. Percent-escapes in the user name and
 * password are decoded. Returns 0, or -1 with `why` set to a static
 * reason that holds no part of the URL. */
int proxy_url_parse(const char *, struct proxy_url *, const char **why);
/* "http://host:port", "socks5://[v6]:port", "none" or "env": never the
 * credentials. Returns `buf`. */
#define PROXY_URL_STRLEN (16 + PROXY_HOST_MAX + 8)
const char *proxy_url_str(const struct proxy_url *, char buf[static PROXY_URL_STRLEN]);
/* As written back into a configuration file: proxy_url_str with
 * "user:***@" when there are credentials (the password masked). */
#define PROXY_URL_MASKED_STRLEN (PROXY_URL_STRLEN + 3 * PROXY_CRED_MAX + 8)
const char *proxy_url_masked(const struct proxy_url *,
    char buf[static PROXY_URL_MASKED_STRLEN]);

/* Whether `host` (a name or an IP literal) is exempt by a no_proxy
 * value: entries separated by commas or blanks, each "*" (all), a name
 * that matches itself and its subdomains (a leading dot is the same),
 * an IP address, or an IP prefix ("10.0.0.0/8"). Names compare without
 * regard to case; a ":port" after an entry is ignored, as curl does. */
bool proxy_no_proxy_match(const char *no_proxy, const char *host);

/* The environment as curl reads it, for a TLS destination. */
struct proxy_env {
	const char *https_proxy, *HTTPS_PROXY; /* lower case first */
	const char *all_proxy, *ALL_PROXY;
	const char *no_proxy, *NO_PROXY;
};
/* Proxy = env for a server at `host`: the first set (non-empty) of
 * https_proxy, HTTPS_PROXY, all_proxy, ALL_PROXY, unless no_proxy (else
 * NO_PROXY) exempts `host`. *out is PROXY_NONE when none applies; *var
 * names the variable used (or the no_proxy that exempted, or NULL).
 * Returns -1 with `why` when the chosen variable does not parse (or says
 * "env"). */
int proxy_env_resolve(const struct proxy_env *, const char *host,
    struct proxy_url *out, const char **var, const char **why);

/* HTTP CONNECT */

/* The request for `host`:`port` (a name or an IP literal), with a
 * Proxy-Authorization line when `basic` (the base64 of "user:password")
 * is not NULL. Returns its length, or 0 if it does not fit. */
size_t proxy_http_request(char *out, size_t outlen, const char *host,
    uint16_t port, const char *basic);

#define PROXY_HTTP_REPLY_MAX 4096 /* the whole header, at most */
#define PROXY_STATUS_LINE_MAX 96  /* kept for messages */

struct proxy_http_reply {
	unsigned status;                          /* 100..999 */
	char line[PROXY_STATUS_LINE_MAX + 1];     /* printable ASCII */
};

/* Negative results of proxy_http_parse_reply. */
#define PROXY_MALFORMED (-1)
#define PROXY_TOO_LONG (-2)

/* The proxy's answer: a status line "HTTP/1.x NNN reason", header lines,
 * an empty line (CRLF or bare LF line ends). Returns the bytes of the
 * whole header when complete, 0 if more are needed, PROXY_MALFORMED as
 * soon as the bytes cannot start a status line (or the line is not one),
 * PROXY_TOO_LONG when PROXY_HTTP_REPLY_MAX bytes hold no end of header.
 * *r is written when the status line is complete, so a reply with an
 * endless header still names its status. */
long proxy_http_parse_reply(const uint8_t *in, size_t len,
    struct proxy_http_reply *r);

/* SOCKS5 */

#define PROXY_SOCKS5_METHOD_USERPASS 0x02

/* Method selection: 05 01 00, or 05 02 00 02 when `userpass`. Returns 3
 * or 4. */
size_t proxy_socks5_greeting(uint8_t out[static 4], bool userpass);
/* The proxy's choice: 05 METHOD. Returns 2 when complete (*method set), 0
 * if more are needed, PROXY_MALFORMED for another version. */
long proxy_socks5_parse_method(const uint8_t *in, size_t len, uint8_t *method);
/* RFC 1929: 01 ULEN USER PLEN PASS. Returns the length, 0 if either is
 * empty or too long or `out` too short. */
size_t proxy_socks5_auth_request(uint8_t *out, size_t outlen,
    const char *user, const char *pass);
/* RFC 1929's answer: VER STATUS (0 = success). Returns 2 when complete
 * (*status set), 0 if more are needed, PROXY_MALFORMED for a version not
 * 1 (5 is taken too: some servers answer so). */
long proxy_socks5_parse_auth(const uint8_t *in, size_t len, uint8_t *status);
/* CONNECT to `host`:`port`: ATYP 1 or 4 for an IP literal, else 3 (the
 * name, 1..255 bytes). Returns the length, 0 if it does not fit. */
size_t proxy_socks5_connect(uint8_t *out, size_t outlen, const char *host,
    uint16_t port);
/* The CONNECT reply: 05 REP 00 ATYP BND.ADDR BND.PORT. Returns the bytes
 * of the whole reply when complete (*rep set), 0 if more are needed,
 * PROXY_MALFORMED for another version, RSV not 0, or an unknown ATYP. */
long proxy_socks5_parse_reply(const uint8_t *in, size_t len, uint8_t *rep);
/* RFC 1928's words for a REP code ("connection refused by destination
 * host"); "unknown reply" for codes past 8. */
const char *proxy_socks5_rep_str(uint8_t rep);

#endif

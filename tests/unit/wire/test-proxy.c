/* Unit tests for common/wire/proxy.c: Proxy's URL, curl's environment,
 * the HTTP CONNECT request and reply, and SOCKS5's client side, the
 * parsers fed their input byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/proxy.h"

static void
url_ok(const char *s, enum proxy_kind kind, const char *host, uint16_t port,
    const char *user, const char *pass, const char *str, const char *masked)
{
	struct proxy_url u;
	char b[PROXY_URL_STRLEN], m[PROXY_URL_MASKED_STRLEN];
	const char *why = NULL;

	assert_int_equal(proxy_url_parse(s, &u, &why), 0);
	assert_int_equal(u.kind, kind);
	assert_string_equal(u.host, host);
	assert_int_equal(u.port, port);
	assert_int_equal(u.has_cred, user != NULL);
	if (user != NULL) {
		assert_string_equal(u.user, user);
		assert_string_equal(u.pass, pass);
	}
	assert_string_equal(proxy_url_str(&u, b), str);
	assert_string_equal(proxy_url_masked(&u, m), masked);
	if (user != NULL && strlen(pass) > 2)
		assert_null(strstr(m, pass));
}

static void
test_url(void **state)
{
	(void)state;
	url_ok("http://proxy.example:3128", PROXY_HTTP, "proxy.example", 3128,
	    NULL, NULL, "http://proxy.example:3128", "http://proxy.example:3128");
	url_ok("HTTP://u:p@10.0.0.1:8080/", PROXY_HTTP, "10.0.0.1", 8080, "u",
	    "p", "http://10.0.0.1:8080", "http://u:***@10.0.0.1:8080");
	url_ok("proxy.example", PROXY_HTTP, "proxy.example", 1080, NULL, NULL,
	    "http://proxy.example:1080", "http://proxy.example:1080");
	url_ok("socks5://[fd00::1]:1081", PROXY_SOCKS5, "fd00::1", 1081, NULL,
	    NULL, "socks5://[fd00::1]:1081", "socks5://[fd00::1]:1081");
	url_ok("socks5h://bob:x%40y@px:1", PROXY_SOCKS5, "px", 1, "bob", "x@y",
	    "socks5://px:1", "socks5://bob:***@px:1");
	/* Escapes in the user name come back in the masked form. */
	url_ok("http://a%40b:p@px:2", PROXY_HTTP, "px", 2, "a@b", "p",
	    "http://px:2", "http://a%40b:***@px:2");
}

static void
test_url_user_colon(void **state)
{
	struct proxy_url u;
	const char *why = NULL;

	(void)state;
	/* "a:b" decoded from a%3Ab holds ':', which Basic cannot carry. */
	assert_int_equal(proxy_url_parse("http://a%3Ab:p@ss@px:2", &u, &why), -1);
	assert_string_equal(why, "the user name may not hold ':'");
	assert_int_equal(proxy_url_parse("http://u:p@ss@px:2", &u, &why), 0);
	assert_string_equal(u.user, "u");
	assert_string_equal(u.pass, "p@ss");
}

static void
test_url_bad(void **state)
{
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "ftp://px:21", "the scheme is not http:// or socks5://" },
		{ "http://px:3128/path", "a proxy URL has no path" },
		{ "http://user@px:3128", "credentials must be user:password" },
		{ "http://:pw@px:3128", "credentials must be user:password" },
		{ "http://u:%zz@px:1", "the user name or password is too long or "
		    "holds a control character or a bad %-escape" },
		{ "http://u:a%0ab@px:1", "the user name or password is too long or "
		    "holds a control character or a bad %-escape" },
		{ "http://u:a%4@px:1", "the user name or password is too long or "
		    "holds a control character or a bad %-escape" },
		{ "http://", "no host, or a host too long" },
		{ "http://px:0", "the host is not a name or address, or the port "
		    "not 1..65535" },
		{ "http://px:65536", "the host is not a name or address, or the "
		    "port not 1..65535" },
		{ "http://bad host:1", "the host is not a name or address, or the "
		    "port not 1..65535" },
	};
	struct proxy_url u;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		if (proxy_url_parse(bad[i].s, &u, &why) != -1)
			fail_msg("accepted: %s", bad[i].s);
		assert_string_equal(why, bad[i].why);
	}
}

static void
test_url_none_env(void **state)
{
	struct proxy_url u;
	const char *why = NULL;
	char b[PROXY_URL_STRLEN];

	(void)state;
	assert_int_equal(proxy_url_parse("NONE", &u, &why), 0);
	assert_int_equal(u.kind, PROXY_NONE);
	assert_string_equal(proxy_url_str(&u, b), "none");
	assert_int_equal(proxy_url_parse("env", &u, &why), 0);
	assert_int_equal(u.kind, PROXY_ENV);
	assert_string_equal(proxy_url_str(&u, b), "env");
}

static void
test_no_proxy(void **state)
{
	(void)state;
	assert_true(proxy_no_proxy_match("*", "vpn.example"));
	assert_true(proxy_no_proxy_match("example.com", "vpn.example.com"));
	assert_true(proxy_no_proxy_match(".example.com", "vpn.example.com"));
	assert_true(proxy_no_proxy_match("Example.COM", "example.com"));
	assert_true(proxy_no_proxy_match("a, b ,vpn.example.com:443", "vpn.example.com"));
	assert_false(proxy_no_proxy_match("ample.com", "vpn.example.com"));
	assert_false(proxy_no_proxy_match("vpn.example.com.au", "vpn.example.com"));
	assert_false(proxy_no_proxy_match("", "vpn.example.com"));
	assert_false(proxy_no_proxy_match(NULL, "vpn.example.com"));
	assert_true(proxy_no_proxy_match("localhost,198.18.1.1", "198.18.1.1"));
	assert_true(proxy_no_proxy_match("198.18.0.0/15", "198.19.2.3"));
	assert_true(proxy_no_proxy_match("198.18.1.1:443", "198.18.1.1"));
	assert_false(proxy_no_proxy_match("198.18.1.10", "198.18.1.1"));
	assert_true(proxy_no_proxy_match("[fd00::1]", "fd00::1"));
	assert_true(proxy_no_proxy_match("fd00::/8", "fd00::1"));
	assert_false(proxy_no_proxy_match("fd00::/8", "fe80::1"));
	/* A name never matches an address, and *.domain is not a pattern. */
	assert_false(proxy_no_proxy_match("example.com", "198.18.1.1"));
	assert_false(proxy_no_proxy_match("*.example.com", "a.example.com"));
}

static void
test_env(void **state)
{
	struct proxy_env env = { 0 };
	struct proxy_url u;
	const char *var, *why = NULL;

	(void)state;
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_int_equal(u.kind, PROXY_NONE);
	assert_null(var);

	env.ALL_PROXY = "socks5://s:1";
	env.all_proxy = "";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_int_equal(u.kind, PROXY_SOCKS5);
	assert_string_equal(var, "ALL_PROXY");

	env.HTTPS_PROXY = "http://H:2";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_string_equal(var, "HTTPS_PROXY");
	assert_string_equal(u.host, "H");

	env.https_proxy = "http://u:p@h:3/";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_string_equal(var, "https_proxy");
	assert_string_equal(u.host, "h");
	assert_int_equal(u.port, 3);
	assert_string_equal(u.pass, "p");

	/* no_proxy before NO_PROXY; either exempts the server. */
	env.NO_PROXY = "example";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_int_equal(u.kind, PROXY_NONE);
	assert_string_equal(var, "NO_PROXY");
	env.no_proxy = "other.example";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_int_equal(u.kind, PROXY_HTTP);
	env.no_proxy = "*";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), 0);
	assert_int_equal(u.kind, PROXY_NONE);
	assert_string_equal(var, "no_proxy");

	env.no_proxy = NULL;
	env.NO_PROXY = NULL;
	env.https_proxy = "gopher://x";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), -1);
	assert_string_equal(var, "https_proxy");
	assert_string_equal(why, "the scheme is not http:// or socks5://");
	env.https_proxy = "env";
	assert_int_equal(proxy_env_resolve(&env, "vpn.example", &u, &var, &why), -1);
	assert_string_equal(why, "env is not a proxy");
}

static void
test_http_request(void **state)
{
	char out[256];

	(void)state;
	assert_int_equal(proxy_http_request(out, sizeof out, "198.18.1.1", 443,
	    NULL), 57);
	assert_string_equal(out, "CONNECT 198.18.1.1:443 HTTP/1.1\r\n"
	    "Host: 198.18.1.1:443\r\n\r\n");
	assert_true(proxy_http_request(out, sizeof out, "fd00::1", 8443,
	    "YWxpY2U6cHc=") > 0);
	assert_string_equal(out, "CONNECT [fd00::1]:8443 HTTP/1.1\r\n"
	    "Host: [fd00::1]:8443\r\nProxy-Authorization: Basic YWxpY2U6cHc=\r\n\r\n");
	assert_int_equal(proxy_http_request(out, 20, "198.18.1.1", 443, NULL), 0);
}

/* Fed byte by byte: "more" until `used`, then `used` whatever follows. */
static void
http_reply(const char *in, long used, unsigned status, const char *line)
{
	struct proxy_http_reply r;
	size_t len = strlen(in);

	for (size_t i = 0; i < (size_t)used; i++)
		assert_int_equal(proxy_http_parse_reply((const uint8_t *)in, i, &r), 0);
	memset(&r, 0, sizeof r);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)in, len, &r), used);
	assert_int_equal(r.status, status);
	assert_string_equal(r.line, line);
}

static void
test_http_reply(void **state)
{
	struct proxy_http_reply r;
	static const char e407[] = "HTTP/1.1 407 Proxy Authentication Required\r\n"
	    "Server: squid\r\nProxy-Authenticate: Basic realm=\"x\"\r\n"
	    "Content-Length: 5\r\n\r\nhello";
	char big[PROXY_HTTP_REPLY_MAX + 10];

	(void)state;
	http_reply("HTTP/1.1 200 Connection established\r\n\r\n", 39, 200,
	    "HTTP/1.1 200 Connection established");
	http_reply("HTTP/1.0 200\n\n", 14, 200, "HTTP/1.0 200");
	http_reply(e407, (long)strlen(e407) - 5, 407,
	    "HTTP/1.1 407 Proxy Authentication Required");
	http_reply("HTTP/1.1 502 Bad\x01Gateway\r\nX: y\r\n\r\n", 34, 502,
	    "HTTP/1.1 502 Bad?Gateway");

	assert_int_equal(proxy_http_parse_reply((const uint8_t *)"HTTX", 4, &r),
	    PROXY_MALFORMED);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)"\x05\x00", 2, &r),
	    PROXY_MALFORMED);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)
	    "HTTP/2 200 OK\r\n\r\n", 17, &r), PROXY_MALFORMED);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)
	    "HTTP/1.1 20x OK\r\n\r\n", 19, &r), PROXY_MALFORMED);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)
	    "HTTP/1.1 2000\r\n\r\n", 17, &r), PROXY_MALFORMED);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)
	    "HTTP/1.1 099 x\r\n\r\n", 18, &r), PROXY_MALFORMED);
	/* A header without end: too long, the status still known. */
	memset(big, 'a', sizeof big);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(&r, 0, sizeof r);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)big, sizeof big,
	    &r), PROXY_TOO_LONG);
	assert_int_equal(r.status, 200);
	assert_int_equal(proxy_http_parse_reply((const uint8_t *)big,
	    PROXY_HTTP_REPLY_MAX - 1, &r), 0);
}

static void
test_socks5_greeting_auth(void **state)
{
	uint8_t out[600], m = 0xee, st = 0xee;

	(void)state;
	assert_int_equal(proxy_socks5_greeting(out, false), 3);
	assert_memory_equal(out, "\x05\x01\x00", 3);
	assert_int_equal(proxy_socks5_greeting(out, true), 4);
	assert_memory_equal(out, "\x05\x02\x00\x02", 4);

	assert_int_equal(proxy_socks5_parse_method((const uint8_t *)"", 0, &m), 0);
	assert_int_equal(proxy_socks5_parse_method((const uint8_t *)"\x05", 1, &m), 0);
	assert_int_equal(m, 0xee);
	assert_int_equal(proxy_socks5_parse_method((const uint8_t *)"\x05\xff", 2, &m), 2);
	assert_int_equal(m, 0xff);
	assert_int_equal(proxy_socks5_parse_method((const uint8_t *)"\x04", 1, &m),
	    PROXY_MALFORMED);

	assert_int_equal(proxy_socks5_auth_request(out, sizeof out, "bob", "pw"), 8);
	assert_memory_equal(out, "\x01\x03" "bob" "\x02" "pw", 8);
	assert_int_equal(proxy_socks5_auth_request(out, 7, "bob", "pw"), 0);
	assert_int_equal(proxy_socks5_auth_request(out, sizeof out, "", "pw"), 0);

	assert_int_equal(proxy_socks5_parse_auth((const uint8_t *)"\x01", 1, &st), 0);
	assert_int_equal(proxy_socks5_parse_auth((const uint8_t *)"\x01\x01", 2, &st), 2);
	assert_int_equal(st, 1);
	assert_int_equal(proxy_socks5_parse_auth((const uint8_t *)"\x02\x00", 2, &st),
	    PROXY_MALFORMED);
}

static void
test_socks5_connect(void **state)
{
	uint8_t out[300];

	(void)state;
	assert_int_equal(proxy_socks5_connect(out, sizeof out, "198.18.1.1", 443), 10);
	assert_memory_equal(out, "\x05\x01\x00\x01\xc6\x12\x01\x01\x01\xbb", 10);
	assert_int_equal(proxy_socks5_connect(out, sizeof out, "fd00::1", 443), 22);
	assert_memory_equal(out, "\x05\x01\x00\x04\xfd\x00", 6);
	assert_memory_equal(out + 19, "\x01\x01\xbb", 3);
	assert_int_equal(proxy_socks5_connect(out, sizeof out, "vpn.example", 8443), 18);
	assert_memory_equal(out, "\x05\x01\x00\x03\x0bvpn.example\x20\xfb", 18);
	assert_int_equal(proxy_socks5_connect(out, 17, "vpn.example", 8443), 0);
}

static void
socks5_reply(const uint8_t *in, size_t len, uint8_t want_rep)
{
	uint8_t rep = 0xee;

	for (size_t i = 0; i < len; i++)
		assert_int_equal(proxy_socks5_parse_reply(in, i, &rep), 0);
	assert_int_equal(rep, 0xee);
	assert_int_equal(proxy_socks5_parse_reply(in, len, &rep), (long)len);
	assert_int_equal(rep, want_rep);
}

static void
test_socks5_reply(void **state)
{
	uint8_t rep;

	(void)state;
	socks5_reply((const uint8_t *)"\x05\x00\x00\x01\x01\x02\x03\x04\x00\x50", 10, 0);
	socks5_reply((const uint8_t *)"\x05\x05\x00\x04" "0123456789abcdef" "\x00\x50",
	    22, 5);
	socks5_reply((const uint8_t *)"\x05\x02\x00\x03\x02px\x00\x50", 9, 2);
	assert_int_equal(proxy_socks5_parse_reply((const uint8_t *)"\x04", 1, &rep),
	    PROXY_MALFORMED);
	assert_int_equal(proxy_socks5_parse_reply((const uint8_t *)"\x05\x00\x01", 3,
	    &rep), PROXY_MALFORMED);
	assert_int_equal(proxy_socks5_parse_reply((const uint8_t *)"\x05\x00\x00\x02",
	    4, &rep), PROXY_MALFORMED);
	assert_string_equal(proxy_socks5_rep_str(5),
	    "connection refused by destination host");
	assert_string_equal(proxy_socks5_rep_str(2),
	    "connection not allowed by ruleset");
	assert_string_equal(proxy_socks5_rep_str(9), "unknown reply");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_url_user_colon),
		cmocka_unit_test(test_url_bad),
		cmocka_unit_test(test_url_none_env),
		cmocka_unit_test(test_no_proxy),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_http_request),
		cmocka_unit_test(test_http_reply),
		cmocka_unit_test(test_socks5_greeting_auth),
		cmocka_unit_test(test_socks5_connect),
		cmocka_unit_test(test_socks5_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

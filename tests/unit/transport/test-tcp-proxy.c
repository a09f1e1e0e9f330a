/* Unit tests for common/transport/tcp-proxy.c: the HTTP CONNECT and
 * SOCKS5 exchanges on a non-blocking socket pair, the proxy's side
 * played here byte for byte, with the exact reasons of each failure. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "transport/tcp-proxy.h"
#include "wire/proxy.h"

struct pair {
	int ours, proxy;
	struct tcp_proxy_hs *hs;
	struct proxy_url url;
	char reason[256];
	bool ww, refused;
};

static void
pair_open(struct pair *p, const char *url)
{
	int sv[2];
	const char *why = NULL;
	struct quic_tcp_proxy px = {
		.url = &p->url,
		.target_host = "198.18.1.1",
		.target_port = 443,
	};

	memset(p, 0, sizeof *p);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p->ours = sv[0];
	p->proxy = sv[1];
	assert_int_equal(fcntl(p->ours, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(proxy_url_parse(url, &p->url, &why), 0);
	p->hs = tcp_proxy_hs_new(&px);
}

static void
pair_close(struct pair *p)
{
	tcp_proxy_hs_free(p->hs);
	if (p->ours != -1)
		close(p->ours);
	if (p->proxy != -1)
		close(p->proxy);
}

static int
step(struct pair *p)
{
	p->reason[0] = '\0';
	return tcp_proxy_hs_step(p->hs, p->ours, &p->ww, p->reason,
	    sizeof p->reason, &p->refused);
}

/* What the client sent since the last call, as the proxy reads it. */
static size_t
proxy_read(struct pair *p, uint8_t *buf, size_t len)
{
	ssize_t n = recv(p->proxy, buf, len, MSG_DONTWAIT);

	return n > 0 ? (size_t)n : 0;
}

static void
proxy_send(struct pair *p, const void *b, size_t n)
{
	assert_int_equal(send(p->proxy, b, n, 0), (ssize_t)n);
}

static void
test_http_ok_with_auth(void **state)
{
	struct pair p;
	char req[1024] = "";
	static const char want[] = "CONNECT 198.18.1.1:443 HTTP/1.1\r\n"
	    "Host: 198.18.1.1:443\r\n"
	    "Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n";

	(void)state;
	pair_open(&p, "http://alice:s3cret@198.18.1.5:3128");
	assert_string_equal(tcp_proxy_hs_name(p.hs), "proxy 198.18.1.5:3128");
	assert_int_equal(step(&p), 0);
	assert_false(p.ww);
	assert_int_equal(proxy_read(&p, (uint8_t *)req, sizeof req - 1), strlen(want));
	assert_string_equal(req, want);
	/* The answer in two pieces. */
	proxy_send(&p, "HTTP/1.1 200 Connection", 23);
	assert_int_equal(step(&p), 0);
	proxy_send(&p, " established\r\n\r\n", 16);
	assert_int_equal(step(&p), 1);
	pair_close(&p);
}

static void
http_fails(const char *answer, bool cred, const char *reason, bool refused)
{
	struct pair p;
	uint8_t buf[1024];

	pair_open(&p, cred ? "http://alice:pw@198.18.1.5:3128" :
	    "198.18.1.5:3128");
	assert_int_equal(step(&p), 0);
	assert_true(proxy_read(&p, buf, sizeof buf) > 0);
	proxy_send(&p, answer, strlen(answer));
	assert_int_equal(step(&p), -1);
	assert_string_equal(p.reason, reason);
	assert_int_equal(p.refused, refused);
	pair_close(&p);
}

static void
test_http_refusals(void **state)
{
	(void)state;
	http_fails("HTTP/1.1 407 Proxy Authentication Required\r\n"
	    "Content-Length: 4\r\n\r\nbody", true, "proxy 198.18.1.5:3128 "
	    "refused CONNECT: HTTP/1.1 407 Proxy Authentication Required "
	    "(wrong user name or password?)", true);
	http_fails("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", false,
	    "proxy 198.18.1.5:3128 refused CONNECT: HTTP/1.1 407 Proxy "
	    "Authentication Required (it wants a user name and password)", true);
	http_fails("HTTP/1.1 403 Forbidden\r\n\r\n", false, "proxy "
	    "198.18.1.5:3128 refused CONNECT: HTTP/1.1 403 Forbidden", true);
	http_fails("HTTP/1.1 502 Bad Gateway\r\n\r\n", false, "proxy "
	    "198.18.1.5:3128 refused CONNECT: HTTP/1.1 502 Bad Gateway", false);
	http_fails("HTTP/1.1 200 OK\r\n\r\n\x16\x03", false, "proxy "
	    "198.18.1.5:3128 sent more than its answer", false);
	http_fails("\x05\x00", false, "proxy 198.18.1.5:3128: not an HTTP "
	    "proxy's answer", false);
}

static void
test_http_closed(void **state)
{
	struct pair p;
	uint8_t buf[256];

	(void)state;
	pair_open(&p, "http://198.18.1.5:3128");
	assert_int_equal(step(&p), 0);
	assert_true(proxy_read(&p, buf, sizeof buf) > 0);
	proxy_send(&p, "HTTP/1.1 2", 10);
	close(p.proxy);
	p.proxy = -1;
	assert_int_equal(step(&p), -1);
	assert_string_equal(p.reason, "proxy 198.18.1.5:3128 closed the "
	    "connection before answering");
	pair_close(&p);
}

static void
test_socks5_userpass(void **state)
{
	struct pair p;
	uint8_t buf[256];

	(void)state;
	pair_open(&p, "socks5://bob:s3cret@198.18.1.5:1080");
	assert_int_equal(step(&p), 0);
	assert_int_equal(proxy_read(&p, buf, sizeof buf), 4);
	assert_memory_equal(buf, "\x05\x02\x00\x02", 4);
	proxy_send(&p, "\x05\x02", 2);
	assert_int_equal(step(&p), 0);
	assert_int_equal(proxy_read(&p, buf, sizeof buf), 12);
	assert_memory_equal(buf, "\x01\x03" "bob" "\x06" "s3cret", 12);
	proxy_send(&p, "\x01\x00", 2);
	assert_int_equal(step(&p), 0);
	assert_int_equal(proxy_read(&p, buf, sizeof buf), 10);
	assert_memory_equal(buf, "\x05\x01\x00\x01\xc6\x12\x01\x01\x01\xbb", 10);
	proxy_send(&p, "\x05\x00\x00\x01\xc6\x12\x01\x05", 8);
	assert_int_equal(step(&p), 0);
	proxy_send(&p, "\x9c\x40", 2);
	assert_int_equal(step(&p), 1);
	pair_close(&p);
}

static void
test_socks5_failures(void **state)
{
	struct pair p;
	uint8_t buf[256];

	(void)state;
	/* No authentication offered, none acceptable. */
	pair_open(&p, "socks5://198.18.1.5:1080");
	assert_int_equal(step(&p), 0);
	assert_int_equal(proxy_read(&p, buf, sizeof buf), 3);
	proxy_send(&p, "\x05\xff", 2);
	assert_int_equal(step(&p), -1);
	assert_string_equal(p.reason, "proxy 198.18.1.5:1080 (SOCKS5) accepts "
	    "none of our authentication methods (none)");
	assert_true(p.refused);
	pair_close(&p);

	/* Credentials refused. */
	pair_open(&p, "socks5://bob:bad@198.18.1.5:1080");
	assert_int_equal(step(&p), 0);
	(void)proxy_read(&p, buf, sizeof buf);
	proxy_send(&p, "\x05\x02", 2);
	assert_int_equal(step(&p), 0);
	(void)proxy_read(&p, buf, sizeof buf);
	proxy_send(&p, "\x01\x01", 2);
	assert_int_equal(step(&p), -1);
	assert_string_equal(p.reason, "proxy 198.18.1.5:1080 (SOCKS5) refused "
	    "the user name and password (status 1)");
	assert_true(p.refused);
	pair_close(&p);

	/* The destination refuses: a passing fault. */
	pair_open(&p, "socks5://198.18.1.5:1080");
	assert_int_equal(step(&p), 0);
	(void)proxy_read(&p, buf, sizeof buf);
	proxy_send(&p, "\x05\x00", 2);
	assert_int_equal(step(&p), 0);
	assert_int_equal(proxy_read(&p, buf, sizeof buf), 10);
	proxy_send(&p, "\x05\x05\x00\x01\0\0\0\0\0\0", 10);
	assert_int_equal(step(&p), -1);
	assert_string_equal(p.reason, "proxy 198.18.1.5:1080 (SOCKS5) refused "
	    "CONNECT: connection refused by destination host (reply 5)");
	assert_false(p.refused);
	pair_close(&p);

	/* Its rules forbid: that stays so. */
	pair_open(&p, "socks5://198.18.1.5:1080");
	assert_int_equal(step(&p), 0);
	(void)proxy_read(&p, buf, sizeof buf);
	proxy_send(&p, "\x05\x00", 2);
	assert_int_equal(step(&p), 0);
	(void)proxy_read(&p, buf, sizeof buf);
	proxy_send(&p, "\x05\x02\x00\x01\0\0\0\0\0\0", 10);
	assert_int_equal(step(&p), -1);
	assert_string_equal(p.reason, "proxy 198.18.1.5:1080 (SOCKS5) refused "
	    "CONNECT: connection not allowed by ruleset (reply 2)");
	assert_true(p.refused);
	pair_close(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http_ok_with_auth),
		cmocka_unit_test(test_http_refusals),
		cmocka_unit_test(test_http_closed),
		cmocka_unit_test(test_socks5_userpass),
		cmocka_unit_test(test_socks5_failures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

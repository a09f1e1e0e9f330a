/* Unit tests for common/base/addr.c: parsing, formatting and matching. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "base/addr.h"

/* Parse `in` as a prefix and format it back. */
static const char *
prefix_roundtrip(const char *in, bool host_bits, char buf[static ADDR_STRLEN])
{
	struct prefix p;

	if (addr_parse_prefix(in, &p, host_bits) != 0)
		return "ERR";
	return addr_prefix_str(&p, buf);
}

static void
test_parse_ip(void **state)
{
	static const char *const bad[] = {
		"", " 10.0.0.1", "10.0.0.1 ", "10.0.0", "10.0.0.256", "10.1",
		"010.0.0.1", "10.0.0.1/32", "fd00::1%eth0", "fd00:::1",
		"[fd00::1]", "1.2.3.4.5", "::g", "hello", "0x0a000001",
	};
	struct ipaddr a;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_ip("192.0.2.1", &a), 0);
	assert_int_equal(a.family, AF_INET);
	assert_memory_equal(a.b, ((uint8_t[16]){ 192, 0, 2, 1 }), 16);
	assert_string_equal(addr_ip_str(&a, buf), "192.0.2.1");

	assert_int_equal(addr_parse_ip("2001:DB8:0:0::1", &a), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_memory_equal(a.b, ((uint8_t[16]){ 0x20, 0x01, 0x0d, 0xb8,
	    [15] = 1 }), 16);
	assert_string_equal(addr_ip_str(&a, buf), "2001:db8::1");

	assert_int_equal(addr_parse_ip("::ffff:10.0.0.1", &a), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_string_equal(addr_ip_str(&a, buf), "::ffff:10.0.0.1");

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		a.family = 99;
		assert_int_equal(addr_parse_ip(bad[i], &a), -1);
		assert_int_equal(a.family, 0);
	}

	a.family = 77;
	assert_string_equal(addr_ip_str(&a, buf), "(family 77)");
}

static void
test_parse_prefix(void **state)
{
	static const char *const bad[] = {
		"", "/24", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1",
		"10.0.0.0/+8", "10.0.0.0/8/8", "10.0.0.0/1000", "fd00::/129",
		"10.0.0.0 /8", "10.0.0.0/ 8", "10.0.0.0/8 ", "x/8",
		"10.0.0.0/a",
		"1111:2222:3333:4444:5555:6666:7777:8888:9999/64",
	};
	struct prefix p;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_string_equal(prefix_roundtrip("192.0.2.0/24", false, buf),
	    "192.0.2.0/24");
	assert_string_equal(prefix_roundtrip("192.0.2.1", false, buf),
	    "192.0.2.1/32");
	assert_string_equal(prefix_roundtrip("fd00::1", false, buf),
	    "fd00::1/128");
	assert_string_equal(prefix_roundtrip("0.0.0.0/0", false, buf),
	    "0.0.0.0/0");
	assert_string_equal(prefix_roundtrip("::/0", false, buf), "::/0");
	assert_string_equal(prefix_roundtrip("fd00:77::/64", false, buf),
	    "fd00:77::/64");
	assert_string_equal(prefix_roundtrip("10.0.0.0/08", false, buf),
	    "10.0.0.0/8");

	/* Host bits: only when allowed. */
	assert_string_equal(prefix_roundtrip("10.77.0.1/24", false, buf),
	    "ERR");
	assert_string_equal(prefix_roundtrip("10.77.0.1/24", true, buf),
	    "10.77.0.1/24");
	assert_string_equal(prefix_roundtrip("10.77.0.128/25", false, buf),
	    "10.77.0.128/25");
	assert_string_equal(prefix_roundtrip("10.77.0.129/25", false, buf),
	    "ERR");
	assert_string_equal(prefix_roundtrip("10.77.1.0/23", false, buf),
	    "ERR");
	assert_string_equal(prefix_roundtrip("fd00:77::1/64", false, buf),
	    "ERR");
	assert_string_equal(prefix_roundtrip("fd00:77::1/64", true, buf),
	    "fd00:77::1/64");
	assert_string_equal(prefix_roundtrip("fd00:77:0:0:8000::/65", false,
	    buf),
	    "fd00:77:0:0:8000::/65");
	assert_string_equal(prefix_roundtrip("128.0.0.0/1", false, buf),
	    "128.0.0.0/1");
	assert_string_equal(prefix_roundtrip("192.0.0.0/1", false, buf), "ERR");

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		p.len = 99;
		assert_int_equal(addr_parse_prefix(bad[i], &p, true), -1);
		assert_int_equal(p.len, 0);
	}
}

static void
test_split_hostport(void **state)
{
	char host[64];
	uint16_t port = 0;

	(void)state;
	assert_int_equal(addr_split_hostport("vpn.example.org:443", host,
	    sizeof host, &port, 4433), 0);
	assert_string_equal(host, "vpn.example.org");
	assert_int_equal(port, 443);

	assert_int_equal(addr_split_hostport("vpn.example.org", host,
	    sizeof host, &port, 4433), 0);
	assert_string_equal(host, "vpn.example.org");
	assert_int_equal(port, 4433);

	assert_int_equal(addr_split_hostport("[fd00::1]:65535", host,
	    sizeof host, &port, 0), 0);
	assert_string_equal(host, "fd00::1");
	assert_int_equal(port, 65535);

	assert_int_equal(addr_split_hostport("[::]", host, sizeof host, &port,
	    1), 0);
	assert_string_equal(host, "::");
	assert_int_equal(port, 1);

	assert_int_equal(addr_split_hostport("10.0.0.1:1", host, sizeof host,
	    &port, 0), 0);
	assert_string_equal(host, "10.0.0.1");
	assert_int_equal(port, 1);

	/* Exactly fits, then one byte too long. */
	assert_int_equal(addr_split_hostport("abcd:1", host, 5, &port, 0), 0);
	assert_string_equal(host, "abcd");
	assert_int_equal(addr_split_hostport("abcde:1", host, 5, &port, 0), -1);
	assert_int_equal(addr_split_hostport("abcd", host, 0, &port, 9), -1);

	static const char *const bad[] = {
		"", ":80", "host:", "host:0", "host:65536", "host:123456",
		"host:-1", "host:+1", "host:8o", "host: 80", " host:80",
		"ho st:80", "fd00::1", "fd00::1:80", "[fd00::1", "[fd00::1]80",
		"[fd00::1]:", "[]:80", "[10.0.0.1]:80", "[vpn.example]:80",
		"host", "[fd00::1]", "a/b:80", "h\xc3\xa9:80",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(addr_split_hostport(bad[i], host, sizeof host,
		    &port, 0), -1);
	/* Bare hosts need a default port; a nonsense default is refused. */
	assert_int_equal(addr_split_hostport("host", host, sizeof host, &port,
	    65536), -1);
	assert_int_equal(addr_split_hostport("host:", host, sizeof host, &port,
	    4433), -1);
}

static void
test_parse_sockaddr(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (void *)&ss;
	struct sockaddr_in6 *sin6 = (void *)&ss;
	socklen_t len = 0;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_sockaddr("198.18.1.1:4433", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohs(sin->sin_port), 4433);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), 0xc6120101);
	assert_string_equal(addr_sockaddr_str((struct sockaddr *)&ss, buf),
	    "198.18.1.1:4433");

	assert_int_equal(addr_parse_sockaddr("[fd00::1]:443", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(sin6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(sin6->sin6_port), 443);
	assert_int_equal(sin6->sin6_addr.s6_addr[0], 0xfd);
	assert_int_equal(sin6->sin6_addr.s6_addr[15], 1);
	assert_string_equal(addr_sockaddr_str((struct sockaddr *)&ss, buf),
	    "[fd00::1]:443");
	sin6->sin6_scope_id = 3;
	assert_string_equal(addr_sockaddr_str((struct sockaddr *)&ss, buf),
	    "[fd00::1%3]:443");

	static const char *const bad[] = {
		"198.18.1.1", "localhost:80", "[fd00::1]", "fd00::1:80",
		"198.18.1:80", "198.18.1.1:0", "",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(addr_parse_sockaddr(bad[i], &ss, &len), -1);

	memset(&ss, 0, sizeof ss);
	ss.ss_family = AF_UNIX;
	assert_string_equal(addr_sockaddr_str((struct sockaddr *)&ss, buf),
	    "(family 1)");
}

static void
test_contains(void **state)
{
	struct prefix p;
	struct ipaddr a;

	(void)state;
	assert_int_equal(addr_parse_prefix("10.77.0.0/24", &p, false), 0);
	assert_int_equal(addr_parse_ip("10.77.0.255", &a), 0);
	assert_true(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("10.77.1.0", &a), 0);
	assert_false(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("::ffff:10.77.0.1", &a), 0);
	assert_false(addr_prefix_contains(&p, &a));

	/* Prefix boundaries not on a byte. */
	assert_int_equal(addr_parse_prefix("10.77.0.64/26", &p, false), 0);
	assert_int_equal(addr_parse_ip("10.77.0.127", &a), 0);
	assert_true(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("10.77.0.128", &a), 0);
	assert_false(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("10.77.0.63", &a), 0);
	assert_false(addr_prefix_contains(&p, &a));

	assert_int_equal(addr_parse_prefix("0.0.0.0/0", &p, false), 0);
	assert_true(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_prefix("::/0", &p, false), 0);
	assert_false(addr_prefix_contains(&p, &a));

	assert_int_equal(addr_parse_prefix("fd00:77::/63", &p, false), 0);
	assert_int_equal(addr_parse_ip("fd00:77:0:1:ffff::1", &a), 0);
	assert_true(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("fd00:77:0:2::", &a), 0);
	assert_false(addr_prefix_contains(&p, &a));

	assert_int_equal(addr_parse_prefix("fd00::1", &p, false), 0);
	assert_int_equal(addr_parse_ip("fd00::1", &a), 0);
	assert_true(addr_prefix_contains(&p, &a));
	a.b[15] = 2;
	assert_false(addr_prefix_contains(&p, &a));

	/* A corrupt prefix length never matches. */
	p.len = 129;
	a.b[15] = 1;
	assert_false(addr_prefix_contains(&p, &a));
}

static void
test_mask_equal(void **state)
{
	struct prefix p;
	struct ipaddr a, b;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_prefix("10.77.5.131/22", &p, true), 0);
	addr_prefix_mask(&p);
	assert_string_equal(addr_prefix_str(&p, buf), "10.77.4.0/22");
	assert_int_equal(addr_parse_prefix("fd00:77:1:2:3:4:5:6/67", &p, true),
	    0);
	addr_prefix_mask(&p);
	assert_string_equal(addr_prefix_str(&p, buf), "fd00:77:1:2::/67");
	assert_int_equal(addr_parse_prefix("255.255.255.255/0", &p, true), 0);
	addr_prefix_mask(&p);
	assert_string_equal(addr_prefix_str(&p, buf), "0.0.0.0/0");
	assert_int_equal(addr_parse_prefix("10.1.2.3/32", &p, true), 0);
	addr_prefix_mask(&p);
	assert_string_equal(addr_prefix_str(&p, buf), "10.1.2.3/32");

	assert_int_equal(addr_parse_ip("10.0.0.1", &a), 0);
	b = a;
	b.b[9] = 0x55; /* bytes beyond an IPv4 address are ignored */
	assert_true(addr_equal(&a, &b));
	b.b[3] = 2;
	assert_false(addr_equal(&a, &b));
	assert_int_equal(addr_parse_ip("::a00:1", &b), 0);
	assert_false(addr_equal(&a, &b));
}

static void
test_sockaddr_convert(void **state)
{
	struct sockaddr_storage ss;
	struct ipaddr a, back;
	socklen_t len;
	uint16_t port;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_ip("fd00:77::2", &a), 0);
	addr_to_sockaddr(&a, 51820, &ss, &len);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_string_equal(addr_sockaddr_str((struct sockaddr *)&ss, buf),
	    "[fd00:77::2]:51820");
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, &back,
	    &port), 0);
	assert_true(addr_equal(&a, &back));
	assert_int_equal(port, 51820);

	assert_int_equal(addr_parse_ip("10.77.0.9", &a), 0);
	addr_to_sockaddr(&a, 1, &ss, &len);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, &back,
	    NULL), 0);
	assert_true(addr_equal(&a, &back));
	assert_string_equal(addr_sockaddr_str((struct sockaddr *)&ss, buf),
	    "10.77.0.9:1");

	a.family = AF_UNIX;
	addr_to_sockaddr(&a, 1, &ss, &len);
	assert_int_equal(len, 0);
	assert_int_equal(ss.ss_family, AF_UNSPEC);
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, &back,
	    &port), -1);
}

/* A forward target as addr_target_normalise leaves it: "IP" if usable,
 * "refused: WHY" otherwise. */
static const char *
target(const char *in, char buf[static 2 * ADDR_STRLEN])
{
	char ip[ADDR_STRLEN];
	const char *why;
	struct ipaddr a;

	if (addr_parse_ip(in, &a) != 0)
		return "ERR";
	if ((why = addr_target_normalise(&a)) != NULL)
		snprintf(buf, 2 * ADDR_STRLEN, "refused: %s", why);
	else
		snprintf(buf, 2 * ADDR_STRLEN, "%s%s", addr_ip_str(&a, ip),
		    a.family == AF_INET ? " (v4)" : " (v6)");
	return buf;
}

static void
test_target_normalise(void **state)
{
	static const char *const cases[][2] = {
		/* ordinary targets pass as they are */
		{ "192.0.2.1", "192.0.2.1 (v4)" },
		{ "127.0.0.1", "127.0.0.1 (v4)" },
		{ "1.0.0.0", "1.0.0.0 (v4)" },
		{ "223.255.255.255", "223.255.255.255 (v4)" },
		{ "255.255.255.254", "255.255.255.254 (v4)" },
		{ "2001:db8::1", "2001:db8::1 (v6)" },
		{ "::1", "::1 (v6)" },
		{ "fe80::1", "fe80::1 (v6)" },
		{ "64:ff9b::7f00:1", "64:ff9b::7f00:1 (v6)" },
		{ "::1:0:0:1", "::1:0:0:1 (v6)" },
		{ "::fffe:7f00:1", "::fffe:7f00:1 (v6)" },
		{ "::ffff:0:7f00:1", "::ffff:0:7f00:1 (v6)" },
		/* IPv4-mapped: the IPv4 host it reaches */
		{ "::ffff:127.0.0.1", "127.0.0.1 (v4)" },
		{ "::FFFF:7f00:0001", "127.0.0.1 (v4)" },
		{ "::ffff:192.0.2.1", "192.0.2.1 (v4)" },
		{ "::ffff:0.0.0.0", "refused: unspecified" },
		{ "::ffff:0.1.2.3", "refused: unspecified" },
		{ "::ffff:224.0.0.1", "refused: multicast" },
		{ "::ffff:255.255.255.255", "refused: broadcast" },
		/* unspecified, "this network" */
		{ "0.0.0.0", "refused: unspecified" },
		{ "0.255.255.255", "refused: unspecified" },
		{ "::", "refused: unspecified" },
		/* multicast, broadcast */
		{ "224.0.0.1", "refused: multicast" },
		{ "239.255.255.255", "refused: multicast" },
		{ "ff02::1", "refused: multicast" },
		{ "ff0e::1", "refused: multicast" },
		{ "255.255.255.255", "refused: broadcast" },
		/* IPv4-compatible (deprecated) */
		{ "::127.0.0.1", "refused: IPv4-compatible" },
		{ "::0.0.0.2", "refused: IPv4-compatible" },
		{ "::1.0.0.1", "refused: IPv4-compatible" },
		{ "::255.255.255.255", "refused: IPv4-compatible" },
	};
	char buf[2 * ADDR_STRLEN];
	struct ipaddr a = { .family = AF_UNIX };

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (strcmp(target(cases[i][0], buf), cases[i][1]) != 0)
			print_message("target %s\n", cases[i][0]);
		assert_string_equal(target(cases[i][0], buf), cases[i][1]);
	}
	assert_string_equal(addr_target_normalise(&a), "not IP");
}

static void
test_prefix_normalise(void **state)
{
	static const char *const cases[][2] = {
		{ "::ffff:10.0.0.0/104", "10.0.0.0/8" },
		{ "::ffff:127.0.0.1/128", "127.0.0.1/32" },
		{ "::ffff:0.0.0.0/96", "0.0.0.0/0" },
		/* wider than the mapped range, or not in it: left alone */
		{ "::ffff:0.0.0.0/95", "::ffff:0.0.0.0/95" },
		{ "::/0", "::/0" },
		{ "::/96", "::/96" },
		{ "10.0.0.0/8", "10.0.0.0/8" },
		{ "fd00::/8", "fd00::/8" },
	};
	char buf[ADDR_STRLEN];
	struct prefix p;
	struct ipaddr a;

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(addr_parse_prefix(cases[i][0], &p, true), 0);
		addr_prefix_normalise(&p);
		assert_string_equal(addr_prefix_str(&p, buf), cases[i][1]);
	}
	/* A rule in mapped form matches the targets inside it once both are
	 * normalised, and the IPv4 spelling of the same targets. */
	assert_int_equal(addr_parse_prefix("::ffff:10.0.0.0/104", &p, false), 0);
	addr_prefix_normalise(&p);
	assert_int_equal(addr_parse_ip("::ffff:10.1.2.3", &a), 0);
	assert_null(addr_target_normalise(&a));
	assert_true(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("10.1.2.3", &a), 0);
	assert_true(addr_prefix_contains(&p, &a));
	assert_int_equal(addr_parse_ip("11.1.2.3", &a), 0);
	assert_false(addr_prefix_contains(&p, &a));
}

static void
test_hostport_str(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(addr_hostport_str(buf, sizeof buf, "example.org", 80),
	    "example.org:80");
	assert_string_equal(addr_hostport_str(buf, sizeof buf, "192.0.2.1", 1),
	    "192.0.2.1:1");
	assert_string_equal(addr_hostport_str(buf, sizeof buf, "::1", 65535),
	    "[::1]:65535");
	assert_string_equal(addr_hostport_str(buf, 8, "example.org", 80),
	    "example");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ip),
		cmocka_unit_test(test_parse_prefix),
		cmocka_unit_test(test_split_hostport),
		cmocka_unit_test(test_parse_sockaddr),
		cmocka_unit_test(test_contains),
		cmocka_unit_test(test_mask_equal),
		cmocka_unit_test(test_sockaddr_convert),
		cmocka_unit_test(test_target_normalise),
		cmocka_unit_test(test_prefix_normalise),
		cmocka_unit_test(test_hostport_str),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

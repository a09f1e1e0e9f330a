/* Unit tests for common/config/cfg-diff.c: which peers a reload keeps, adds and
 * removes, what changed in those it keeps, the keys that need a restart,
 * the copies a program keeps, and forward matching. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg-diff.h"
#include "config/cfg.h"

#define PK_SERVER "SMvS1tvZi8uPn0QkZSpUW9Iw04vBC7c++p7vqBenT2k="
#define PK_A "6l+PLBXyFcMTXgpCJJYGkH7w2vYS5UeWe97Xfnl7AyI="
#define PK_B "CCDb5JgSgXRLeheR6+5gspPKbv7gRzSDdR0/TUEuw9I="

#define SRV "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/24\n"
#define PEER_A "[Peer]\nName = a\nPublicKey = " PK_A "\n"
#define PEER_B "[Peer]\nName = b\nPublicKey = " PK_B "\n"
#define CLI "[Client]\nServer = vpn.example\nServerPublicKey = " PK_SERVER \
	"\nPrivateKeyFile = k\n"

static void
load_ok(const char *text, enum cfg_role role, struct cfg *cfg)
{
	struct cfg_errors errs = { 0 };
	int rc = cfg_load_buffer("t.conf", text, strlen(text), role, cfg,
	    &errs);

	for (size_t i = 0; i < errs.n; i++)
		print_error("unexpected: %s\n", errs.msg[i]);
	assert_int_equal(rc, 0);
	cfg_errors_clear(&errs);
}

/* match[] of `next` against `old`'s peers. */
static void
diff(const struct cfg *old, const struct cfg *next, size_t *match)
{
	const struct cfg_peer *o[8];

	assert_true(old->npeers <= 8);
	for (size_t i = 0; i < old->npeers; i++)
		o[i] = &old->peers[i];
	cfg_diff_peers(o, old->npeers, next->peers, next->npeers, match);
}

static void
test_peers_matched(void **state)
{
	struct cfg a, b;
	size_t m[8];

	(void)state;
	load_ok(SRV PEER_A PEER_B, CFG_ROLE_SERVER, &a);

	/* The same file: each peer continues itself. */
	load_ok(SRV PEER_A PEER_B, CFG_ROLE_SERVER, &b);
	diff(&a, &b, m);
	assert_int_equal(m[0], 0);
	assert_int_equal(m[1], 1);
	cfg_clear(&b);

	/* Reordered, one removed, one added. */
	load_ok(SRV PEER_B "[Peer]\nName = c\nPublicKey = " PK_SERVER "\n",
	    CFG_ROLE_SERVER, &b);
	diff(&a, &b, m);
	assert_int_equal(m[0], 1);
	assert_int_equal(m[1], CFG_DIFF_NONE);
	cfg_clear(&b);

	/* A's key changed: a new peer named a; the old a matches nothing. */
	load_ok(SRV "[Peer]\nName = a\nPublicKey = " PK_SERVER "\n" PEER_B,
	    CFG_ROLE_SERVER, &b);
	diff(&a, &b, m);
	assert_int_equal(m[0], CFG_DIFF_NONE);
	assert_int_equal(m[1], 1);
	cfg_clear(&b);

	/* A renamed, same key: also removed and added. */
	load_ok(SRV "[Peer]\nName = a2\nPublicKey = " PK_A "\n" PEER_B,
	    CFG_ROLE_SERVER, &b);
	diff(&a, &b, m);
	assert_int_equal(m[0], CFG_DIFF_NONE);
	assert_int_equal(m[1], 1);
	cfg_clear(&b);
	cfg_clear(&a);
}

static unsigned
changes(const char *pa, const char *pb)
{
	struct cfg a, b;
	char *ta, *tb;
	unsigned c;

	assert_true(asprintf(&ta, SRV PEER_A "%s", pa) > 0);
	assert_true(asprintf(&tb, SRV PEER_A "%s", pb) > 0);
	load_ok(ta, CFG_ROLE_SERVER, &a);
	load_ok(tb, CFG_ROLE_SERVER, &b);
	c = cfg_diff_peer(&a.peers[0], &b.peers[0]);
	cfg_clear(&a);
	cfg_clear(&b);
	free(ta);
	free(tb);
	return c;
}

static void
test_peer_changes(void **state)
{
	(void)state;
	assert_int_equal(changes("", ""), 0);
	assert_int_equal(changes("Address = 10.77.0.5/32\n",
	    "Address = 10.77.0.5/32\n"), 0);
	assert_int_equal(changes("Address = 10.77.0.5/32\n",
	    "Address = 10.77.0.6/32\n"), CFG_DIFF_ADDRESS);
	assert_int_equal(changes("", "Address = 10.77.0.6/32\n"),
	    CFG_DIFF_ADDRESS);
	/* Lists compare as sets. */
	assert_int_equal(changes("AllowedIPs = 10.1.0.0/16, 10.2.0.0/16\n",
	    "AllowedIPs = 10.2.0.0/16, 10.1.0.0/16\n"), 0);
	assert_int_equal(changes("AllowedIPs = 10.1.0.0/16\n",
	    "AllowedIPs = 10.1.0.0/16, 10.2.0.0/16\n"), CFG_DIFF_ALLOWED_IPS);
	assert_int_equal(changes("AllowedIPs = 10.1.0.0/16\n",
	    "AllowedIPs = 10.1.0.0/17\n"), CFG_DIFF_ALLOWED_IPS);
	assert_int_equal(changes("AllowedIPs = 10.1.0.0/16\n", "AllowedIPs =\n"),
	    CFG_DIFF_ALLOWED_IPS);
	assert_int_equal(changes("AllowForward = 10.0.0.0/8:22, db.example:5432\n",
	    "AllowForward = DB.example:5432, 10.0.0.0/8:22\n"), 0);
	assert_int_equal(changes("AllowForward = 10.0.0.0/8:22\n",
	    "AllowForward = 10.0.0.0/8:*\n"), CFG_DIFF_ALLOW_FORWARD);
	assert_int_equal(changes("AllowForward = db.example:22\n",
	    "AllowForward = db2.example:22\n"), CFG_DIFF_ALLOW_FORWARD);
	assert_int_equal(changes("AllowRemoteForward = 2222, 80\n",
	    "AllowRemoteForward = 80, 2222\n"), 0);
	assert_int_equal(changes("AllowRemoteForward = 2222\n",
	    "AllowRemoteForward = 2222, 2223\n"), CFG_DIFF_ALLOW_REMOTE_FORWARD);
	assert_int_equal(changes("AllowedIPs = 10.1.0.0/16\nAllowRemoteForward = 1\n",
	    "Address = 10.77.0.9/32\nAllowForward = 10.0.0.0/8:*\n"),
	    CFG_DIFF_ADDRESS | CFG_DIFF_ALLOWED_IPS | CFG_DIFF_ALLOW_FORWARD |
	    CFG_DIFF_ALLOW_REMOTE_FORWARD);
}

/* The messages cfg_diff_restart gives for two files of `role`. */
static struct cfg_errors
restart(const char *ta, const char *tb, enum cfg_role role)
{
	struct cfg a, b;
	struct cfg_errors out = { 0 };
	size_t n;

	load_ok(ta, role, &a);
	load_ok(tb, role, &b);
	n = cfg_diff_restart(&a, &b, &out);
	assert_int_equal(n, out.n);
	cfg_clear(&a);
	cfg_clear(&b);
	return out;
}

static void
test_restart_keys(void **state)
{
	struct cfg_errors e;

	(void)state;
	/* Peers are not restart keys, and defaults spelled out change
	 * nothing. */
	e = restart(SRV PEER_A, SRV "KeepAlive = 15\n" PEER_A PEER_B,
	    CFG_ROLE_SERVER);
	assert_int_equal(e.n, 0);
	cfg_errors_clear(&e);

	e = restart(SRV PEER_A, SRV "KeepAlive = 20\nListen = 127.0.0.1:4444\n"
	    "Listen = [::1]:4444\nTun = none\n" PEER_A, CFG_ROLE_SERVER);
	assert_int_equal(e.n, 3);
	/* In the order of the key table. */
	assert_string_equal(e.msg[0], "Listen: needs a restart (running: "
	    "0.0.0.0:4433; file: 127.0.0.1:4444, [::1]:4444)");
	assert_string_equal(e.msg[1], "Tun: needs a restart (running: rove0; "
	    "file: none)");
	assert_string_equal(e.msg[2], "KeepAlive: needs a restart (running: "
	    "15; file: 20)");
	cfg_errors_clear(&e);

	e = restart(SRV PEER_A, SRV "MetricsListen = 127.0.0.1:9100\n" PEER_A,
	    CFG_ROLE_SERVER);
	assert_int_equal(e.n, 1);
	assert_string_equal(e.msg[0], "MetricsListen: needs a restart (running: "
	    "(none); file: 127.0.0.1:9100)");
	cfg_errors_clear(&e);

	/* The client's forwards change live; its other keys do not. */
	e = restart(CLI "LocalForward = 8080 = db:80\n",
	    CLI "LocalForward = 8081 = db:80\nDynamicForward = 1080\n"
	    "RemoteForward = 2222 = localhost:22\n", CFG_ROLE_CLIENT);
	assert_int_equal(e.n, 0);
	cfg_errors_clear(&e);
	e = restart(CLI, CLI "Routes = 10.0.0.0/8\nZeroRTT = no\n",
	    CFG_ROLE_CLIENT);
	assert_int_equal(e.n, 2);
	assert_string_equal(e.msg[0], "Routes: needs a restart (running: "
	    "(none); file: 10.0.0.0/8)");
	assert_string_equal(e.msg[1], "ZeroRTT: needs a restart (running: "
	    "yes; file: no)");
	cfg_errors_clear(&e);
}

static void
test_copies(void **state)
{
	struct cfg a;
	struct cfg_peer p;
	struct cfg_forward f;

	(void)state;
	load_ok(SRV PEER_A "Address = 10.77.0.5/32\nAllowedIPs = 10.1.0.0/16, "
	    "10.2.0.0/16\nAllowForward = db.example:5432, 10.0.0.0/8:*\n"
	    "AllowRemoteForward = 2222, 80\n", CFG_ROLE_SERVER, &a);
	cfg_peer_copy(&p, &a.peers[0]);
	/* Equal, and none of it shared with the original. */
	assert_int_equal(cfg_diff_peer(&p, &a.peers[0]), 0);
	assert_string_equal(p.name, "a");
	assert_ptr_not_equal(p.name, a.peers[0].name);
	assert_ptr_not_equal(p.allowed_ips.v, a.peers[0].allowed_ips.v);
	assert_ptr_not_equal(p.allow_forward, a.peers[0].allow_forward);
	assert_ptr_not_equal(p.allow_forward[0].name, a.peers[0].allow_forward[0].name);
	assert_ptr_not_equal(p.allow_remote_forward, a.peers[0].allow_remote_forward);
	cfg_clear(&a);
	/* Still whole once the configuration is gone (ASan checks). */
	assert_string_equal(p.allow_forward[0].name, "db.example");
	assert_int_equal(p.allowed_ips.n, 2);
	assert_int_equal(p.allow_remote_forward[1].port, 80);
	cfg_peer_clear(&p);
	assert_null(p.name);
	cfg_peer_clear(&p);

	load_ok(CLI "LocalForward = 127.0.0.2:8080 = db.example:80\n",
	    CFG_ROLE_CLIENT, &a);
	cfg_forward_copy(&f, &a.local_forward[0]);
	cfg_clear(&a);
	assert_string_equal(f.bind_host, "127.0.0.2");
	assert_string_equal(f.target_host, "db.example");
	assert_int_equal(f.bind_port, 8080);
	cfg_forward_clear(&f);
}

static void
test_forwards(void **state)
{
	struct cfg a;
	const struct cfg_forward *f;

	(void)state;
	load_ok(CLI "LocalForward = 8080 = db:80\nLocalForward = 127.0.0.1:8081 = db:80\n"
	    "LocalForward = 8082 = db:81\nDynamicForward = 8083\n"
	    "LocalForward = 8084 = db:80\n", CFG_ROLE_CLIENT, &a);
	f = a.local_forward;
	/* No host is loopback, but written apart from 127.0.0.1. */
	assert_true(cfg_forward_same_bind(&f[0], &f[0]));
	assert_false(cfg_forward_same_bind(&f[0], &f[1]));
	assert_false(cfg_forward_same_bind(&f[0], &f[2]));
	assert_true(cfg_forward_same_target(&f[0], &f[1]));
	assert_false(cfg_forward_same_target(&f[0], &f[2]));
	assert_true(cfg_forward_same_target(&f[0], &f[3]));
	/* A SOCKS listener has no target. */
	assert_false(cfg_forward_same_target(&f[0], &a.dynamic_forward[0]));
	assert_true(cfg_forward_same_target(&a.dynamic_forward[0],
	    &a.dynamic_forward[0]));
	cfg_clear(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peers_matched),
		cmocka_unit_test(test_peer_changes),
		cmocka_unit_test(test_restart_keys),
		cmocka_unit_test(test_copies),
		cmocka_unit_test(test_forwards),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

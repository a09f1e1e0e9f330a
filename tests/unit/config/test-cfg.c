/* Unit tests for common/config/cfg.c: valid files field by field, defaults, path
 * resolution, the cfg_print round trip, and exact error messages. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/key.h"
#include "config/cfg-table.h"
#include "config/cfg.h"

#define PK_SERVER "SMvS1tvZi8uPn0QkZSpUW9Iw04vBC7c++p7vqBenT2k="
#define PK_A "6l+PLBXyFcMTXgpCJJYGkH7w2vYS5UeWe97Xfnl7AyI="
#define PK_B "CCDb5JgSgXRLeheR6+5gspPKbv7gRzSDdR0/TUEuw9I="

/* Three lines each: a minimal valid server section and peer. */
#define SRV "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/24\n"
#define PEER_A "[Peer]\nName = a\nPublicKey = " PK_A "\n"
#define PEER_B "[Peer]\nName = b\nPublicKey = " PK_B "\n"
/* Four lines: a minimal valid client section. */
#define CLI "[Client]\nServer = vpn.example\nServerPublicKey = " PK_SERVER \
	"\nPrivateKeyFile = k\n"

static int
load(const char *path, const char *text, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs)
{
	return cfg_load_buffer(path, text, strlen(text), role, cfg, errs);
}

/* Parse text that must be valid; fail with its errors otherwise. */
static void
load_ok(const char *path, const char *text, enum cfg_role role,
    struct cfg *cfg)
{
	struct cfg_errors errs = { 0 };
	int rc = load(path, text, role, cfg, &errs);

	for (size_t i = 0; i < errs.n; i++)
		print_error("unexpected: %s\n", errs.msg[i]);
	assert_int_equal(rc, 0);
	assert_int_equal(errs.n, 0);
	cfg_errors_clear(&errs);
}

static char *
print_to_string(const struct cfg *cfg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	cfg_print(cfg, f);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void
assert_prefix(const struct prefix *p, const char *want)
{
	char buf[ADDR_STRLEN];

	assert_string_equal(addr_prefix_str(p, buf), want);
}

static void
assert_key(const uint8_t *key, const char *b64)
{
	uint8_t want[KEY_LEN];

	assert_int_equal(key_decode(b64, want), 0);
	assert_memory_equal(key, want, KEY_LEN);
}

static char *
expected_socket(const char *file)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *s;

	if (geteuid() == 0)
		assert_true(asprintf(&s, "/run/rove/%s", file) > 0);
	else if (xdg != NULL && xdg[0] == '/')
		assert_true(asprintf(&s, "%s/rove/%s", xdg, file) > 0);
	else
		assert_true(asprintf(&s, "/tmp/rove-%u/%s", (unsigned)geteuid(),
		    file) > 0);
	return s;
}

static const char server_full[] =
    "# A server with every key set.\n"
    "; semicolons start comments too\n"
    "\n"
    "[server]   # section names are case-insensitive\n"
    "listen = 198.18.1.1:4433\t# trailing comment after a tab\n"
    "LISTEN=[fd00:1::1]:443\n"
    "  Listen   =   0.0.0.0  \n"
    "ListenTCP = 198.18.1.1:443\n"
    "ListenTCP = [fd00:1::1]\n"
    "PrivateKeyFile = keys/server.key\n"
    "Tun = tun%d\n"
    "Address = 10.77.0.1/24 , fd00:77::1/64\n"
    "MTU = 1280\n"
    "StateDir = /var/lib/rove-test\n"
    "ControlSocket = run/roved.sock\r\n"
    "KeepAlive = 0\n"
    "IdleTimeout = 30\n"
    "Congestion = BBR\n"
    "keyexchange = PQ-Required\n"
    "\n"
    "[Peer]\n"
    "Name = laptop\n"
    "PublicKey = " PK_A "\n"
    "Address = 10.77.0.2/32, fd00:77::2\n"
    "AllowedIPs =\n"
    "\n"
    "[Peer]\n"
    "Name = branch.office-1_B\n"
    "PublicKey = " PK_B "\n"
    "AllowedIPs = 198.19.20.0/24, 2001:db8:20::/48, 192.0.2.7\n"
    "AllowForward = 198.19.10.0/24:*, [fd00:10::/64]:22, "
    "Intranet.Example:80, tcp/10.0.0.5:443, udp/198.19.53.0/24:53, "
    "udp/[fd00:53::/64]:*, udp/UDP.Example:5353\n"
    "AllowRemoteForward = 2222, 8080\n";

static const char server_full_printed[] =
    "[Server]\n"
    "Listen = 198.18.1.1:4433\n"
    "Listen = [fd00:1::1]:443\n"
    "Listen = 0.0.0.0:4433\n"
    "ListenTCP = 198.18.1.1:443\n"
    "ListenTCP = [fd00:1::1]:443\n"
    "PrivateKeyFile = /etc/rove/keys/server.key\n"
    "Tun = tun%d\n"
    "Address = 10.77.0.1/24, fd00:77::1/64\n"
    "MTU = 1280\n"
    "StateDir = /var/lib/rove-test\n"
    "ControlSocket = /etc/rove/run/roved.sock\n"
    "KeepAlive = 0\n"
    "IdleTimeout = 30\n"
    "Congestion = bbr\n"
    "KeyExchange = pq-required\n"
    "Offload = auto\n"
    "LossRecovery = auto\n"
    "ForwardBuffer = 16777216\n"
    "MaxForwards = 256\n"
    "ZeroRTT = yes\n"
    "RetryThreshold = 16\n"
    "Workers = 1\n"
    "ServerIDConfig = 0\n"
    "ForwardMemory = 67108864\n"
    "ForwardMemoryTotal = 536870912\n"
    "Syslog = no\n"
    "MetricsConnections = 32\n"
    "\n"
    "[Peer]\n"
    "Name = laptop\n"
    "PublicKey = " PK_A "\n"
    "Address = 10.77.0.2/32, fd00:77::2/128\n"
    "\n"
    "[Peer]\n"
    "Name = branch.office-1_B\n"
    "PublicKey = " PK_B "\n"
    "AllowedIPs = 198.19.20.0/24, 2001:db8:20::/48, 192.0.2.7/32\n"
    "AllowForward = 198.19.10.0/24:*, [fd00:10::/64]:22, "
    "intranet.example:80, 10.0.0.5/32:443, udp/198.19.53.0/24:53, "
    "udp/[fd00:53::/64]:*, udp/udp.example:5353\n"
    "AllowRemoteForward = 2222, 8080\n";

static void
test_server_full(void **state)
{
	struct cfg cfg;
	struct cfg_peer *p;
	char buf[ADDR_STRLEN];

	(void)state;
	load_ok("/etc/rove/roved.conf", server_full, CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.role, CFG_ROLE_SERVER);
	assert_string_equal(cfg.path, "/etc/rove/roved.conf");

	assert_int_equal(cfg.nlisten, 3);
	assert_string_equal(addr_sockaddr_str((void *)&cfg.listen[0], buf),
	    "198.18.1.1:4433");
	assert_int_equal(cfg.listen_len[0], sizeof(struct sockaddr_in));
	assert_string_equal(addr_sockaddr_str((void *)&cfg.listen[1], buf),
	    "[fd00:1::1]:443");
	assert_int_equal(cfg.listen_len[1], sizeof(struct sockaddr_in6));
	assert_string_equal(addr_sockaddr_str((void *)&cfg.listen[2], buf),
	    "0.0.0.0:4433");
	assert_int_equal(cfg.nlisten_tcp, 2);
	assert_string_equal(addr_sockaddr_str((void *)&cfg.listen_tcp[0], buf),
	    "198.18.1.1:443");
	assert_string_equal(addr_sockaddr_str((void *)&cfg.listen_tcp[1], buf),
	    "[fd00:1::1]:443");

	assert_string_equal(cfg.private_key_file, "/etc/rove/keys/server.key");
	assert_string_equal(cfg.tun, "tun%d");
	assert_int_equal(cfg.naddrs, 2);
	assert_prefix(&cfg.addrs[0], "10.77.0.1/24");
	assert_prefix(&cfg.addrs[1], "fd00:77::1/64");
	assert_int_equal(cfg.mtu, 1280);
	assert_string_equal(cfg.state_dir, "/var/lib/rove-test");
	assert_string_equal(cfg.control_socket, "/etc/rove/run/roved.sock");
	assert_int_equal(cfg.keepalive, 0);
	assert_int_equal(cfg.idle_timeout, 30);
	assert_int_equal(cfg.congestion, CFG_CC_BBR);
	assert_int_equal(cfg.offload, CFG_AUTO);

	/* Client keys stay empty. */
	assert_null(cfg.server_host);
	assert_int_equal(cfg.routes.n, 0);
	assert_int_equal(cfg.nlocal_forward + cfg.nremote_forward +
	    cfg.ndynamic_forward, 0);

	assert_int_equal(cfg.npeers, 2);
	p = &cfg.peers[0];
	assert_string_equal(p->name, "laptop");
	assert_key(p->pubkey, PK_A);
	assert_int_equal(p->naddrs, 2);
	assert_prefix(&p->addrs[0], "10.77.0.2/32");
	assert_prefix(&p->addrs[1], "fd00:77::2/128");
	assert_int_equal(p->allowed_ips.n, 0);
	assert_int_equal(p->nallow_forward, 0);
	assert_int_equal(p->nallow_remote_forward, 0);
	assert_int_equal(p->line, 21);

	p = &cfg.peers[1];
	assert_string_equal(p->name, "branch.office-1_B");
	assert_key(p->pubkey, PK_B);
	assert_int_equal(p->naddrs, 0);
	assert_int_equal(p->allowed_ips.n, 3);
	assert_prefix(&p->allowed_ips.v[0], "198.19.20.0/24");
	assert_prefix(&p->allowed_ips.v[1], "2001:db8:20::/48");
	assert_prefix(&p->allowed_ips.v[2], "192.0.2.7/32");
	assert_int_equal(p->nallow_forward, 7);
	assert_false(p->allow_forward[0].is_name);
	assert_prefix(&p->allow_forward[0].prefix, "198.19.10.0/24");
	assert_int_equal(p->allow_forward[0].port, 0);
	assert_false(p->allow_forward[1].is_name);
	assert_prefix(&p->allow_forward[1].prefix, "fd00:10::/64");
	assert_int_equal(p->allow_forward[1].port, 22);
	assert_true(p->allow_forward[2].is_name);
	assert_string_equal(p->allow_forward[2].name, "intranet.example");
	assert_int_equal(p->allow_forward[2].port, 80);
	assert_false(p->allow_forward[3].is_name);
	assert_null(p->allow_forward[3].name);
	assert_prefix(&p->allow_forward[3].prefix, "10.0.0.5/32");
	assert_int_equal(p->allow_forward[3].port, 443);
	/* tcp/ is what no prefix means; udp/ rules are UDP's alone. */
	for (size_t i = 0; i < 4; i++)
		assert_false(p->allow_forward[i].udp);
	assert_true(p->allow_forward[4].udp);
	assert_false(p->allow_forward[4].is_name);
	assert_prefix(&p->allow_forward[4].prefix, "198.19.53.0/24");
	assert_int_equal(p->allow_forward[4].port, 53);
	assert_true(p->allow_forward[5].udp);
	assert_prefix(&p->allow_forward[5].prefix, "fd00:53::/64");
	assert_int_equal(p->allow_forward[5].port, 0);
	assert_true(p->allow_forward[6].udp);
	assert_true(p->allow_forward[6].is_name);
	assert_string_equal(p->allow_forward[6].name, "udp.example");
	assert_int_equal(p->allow_forward[6].port, 5353);
	assert_int_equal(p->nallow_remote_forward, 2);
	assert_int_equal(p->allow_remote_forward[0].port, 2222);
	assert_int_equal(p->allow_remote_forward[1].port, 8080);
	assert_int_equal(p->allow_remote_forward[1].bind, PROTO_RBIND_DEFAULT);
	assert_int_equal(p->line, 27);

	cfg_clear(&cfg);
	assert_null(cfg.path);
	assert_null(cfg.peers);
	assert_int_equal(cfg.npeers, 0);
	cfg_clear(&cfg); /* twice is harmless */
}

static const char client_full[] =
    "[CLIENT]\n"
    "Server = [2001:db8::1]\n"
    "ServerPublicKey = " PK_SERVER "\n"
    "PrivateKeyFile = /etc/rove/client.key\n"
    "Tun = NONE\n"
    "StateDir = state\n"
    "ControlSocket = /tmp/x.sock\n"
    "KeepAlive = 25\n"
    "IdleTimeout = 3600\n"
    "Congestion = cubic\n"
    "LocalForward = 8080 = Intranet.example:80\n"
    "LocalForward = [::1]:8081=10.0.0.1:8443\n"
    "RemoteForward = 0.0.0.0:2222 = 127.0.0.1:22\n"
    "RemoteForward = 2223 = [fd00::5]:22\n"
    "DynamicForward = 127.0.0.1:1080\n"
    "DynamicForward = 1081\n"
    "DynamicForward = localhost:1082\n"
    "Offload = OFF\n"
    "ServerTCP = tcp.example\n"
    "ServerName = Rove.Example\n"
    "transport = TCP\n"
    "KeyExchange = classic\n";

static const char client_full_printed[] =
    "[Client]\n"
    "Server = [2001:db8::1]:4433\n"
    "ServerTCP = tcp.example:443\n"
    "ServerName = rove.example\n"
    "Transport = tcp\n"
    "Proxy = none\n"
    "ServerPublicKey = " PK_SERVER "\n"
    "PrivateKeyFile = /etc/rove/client.key\n"
    "Tun = none\n"
    "DNS = yes\n"
    "StateDir = /home/u/state\n"
    "ControlSocket = /tmp/x.sock\n"
    "KeepAlive = 25\n"
    "IdleTimeout = 3600\n"
    "Congestion = cubic\n"
    "KeyExchange = classic\n"
    "Offload = off\n"
    "LossRecovery = auto\n"
    "LocalForward = 8080 = Intranet.example:80\n"
    "LocalForward = [::1]:8081 = 10.0.0.1:8443\n"
    "RemoteForward = 0.0.0.0:2222 = 127.0.0.1:22\n"
    "RemoteForward = 2223 = [fd00::5]:22\n"
    "DynamicForward = 127.0.0.1:1080\n"
    "DynamicForward = 1081\n"
    "DynamicForward = 127.0.0.1:1082\n"
    "ForwardBuffer = 16777216\n"
    "MaxForwards = 256\n"
    "ForwardWait = 10\n"
    "ForwardWaitMax = 128\n"
    "ZeroRTT = yes\n"
    "ForwardMemory = 67108864\n"
    "Syslog = no\n"
    "MetricsConnections = 32\n";

static void
assert_forward(const struct cfg_forward *f, const char *bind, uint16_t bport,
    const char *target, uint16_t tport, unsigned line)
{
	if (bind == NULL)
		assert_null(f->bind_host);
	else
		assert_string_equal(f->bind_host, bind);
	assert_int_equal(f->bind_port, bport);
	if (target == NULL)
		assert_null(f->target_host);
	else
		assert_string_equal(f->target_host, target);
	assert_int_equal(f->target_port, tport);
	assert_int_equal(f->line, line);
}

static void
test_client_full(void **state)
{
	struct cfg cfg;

	(void)state;
	load_ok("/home/u/rove.conf", client_full, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.role, CFG_ROLE_CLIENT);
	assert_string_equal(cfg.server_host, "2001:db8::1");
	assert_int_equal(cfg.server_port, 4433);
	assert_string_equal(cfg.server_tcp_host, "tcp.example");
	assert_int_equal(cfg.server_tcp_port, 443);
	assert_int_equal(cfg.transport, CFG_TRANSPORT_TCP);
	assert_key(cfg.server_pubkey, PK_SERVER);
	assert_string_equal(cfg.private_key_file, "/etc/rove/client.key");
	assert_null(cfg.tun);
	assert_string_equal(cfg.state_dir, "/home/u/state");
	assert_string_equal(cfg.control_socket, "/tmp/x.sock");
	assert_int_equal(cfg.keepalive, 25);
	assert_int_equal(cfg.idle_timeout, 3600);
	assert_int_equal(cfg.congestion, CFG_CC_CUBIC);
	assert_int_equal(cfg.offload, CFG_OFF);
	assert_int_equal(cfg.routes.n, 0);

	assert_int_equal(cfg.nlocal_forward, 2);
	assert_forward(&cfg.local_forward[0], NULL, 8080, "Intranet.example",
	    80, 11);
	assert_forward(&cfg.local_forward[1], "::1", 8081, "10.0.0.1", 8443,
	    12);
	assert_int_equal(cfg.nremote_forward, 2);
	assert_forward(&cfg.remote_forward[0], "0.0.0.0", 2222, "127.0.0.1",
	    22, 13);
	assert_forward(&cfg.remote_forward[1], NULL, 2223, "fd00::5", 22, 14);
	assert_int_equal(cfg.ndynamic_forward, 3);
	assert_forward(&cfg.dynamic_forward[0], "127.0.0.1", 1080, NULL, 0, 15);
	assert_forward(&cfg.dynamic_forward[1], NULL, 1081, NULL, 0, 16);
	/* localhost, as ssh takes it: the loopback address. */
	assert_forward(&cfg.dynamic_forward[2], "127.0.0.1", 1082, NULL, 0, 17);

	/* Server keys stay empty. */
	assert_int_equal(cfg.nlisten, 0);
	assert_int_equal(cfg.naddrs, 0);
	assert_int_equal(cfg.mtu, 0);
	assert_int_equal(cfg.npeers, 0);
	cfg_clear(&cfg);

	load_ok("/c.conf", CLI "Routes = 10.77.0.0/24, fd00:77::/64\n",
	    CFG_ROLE_CLIENT, &cfg);
	assert_string_equal(cfg.server_host, "vpn.example");
	assert_int_equal(cfg.server_port, 4433);
	assert_int_equal(cfg.routes.n, 2);
	assert_prefix(&cfg.routes.v[0], "10.77.0.0/24");
	assert_prefix(&cfg.routes.v[1], "fd00:77::/64");
	assert_string_equal(cfg.private_key_file, "/k");
	cfg_clear(&cfg);
}

static void
test_defaults(void **state)
{
	struct cfg cfg;
	char buf[ADDR_STRLEN], *sock;

	(void)state;
	load_ok("/etc/rove/roved.conf", SRV PEER_A, CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(addr_sockaddr_str((void *)&cfg.listen[0], buf),
	    "0.0.0.0:4433");
	assert_int_equal(cfg.nlisten_tcp, 0);
	assert_string_equal(cfg.tun, "rove0");
	assert_int_equal(cfg.mtu, CFG_DEFAULT_MTU);
	assert_string_equal(cfg.state_dir, "/var/lib/rove");
	sock = expected_socket("roved.sock");
	assert_string_equal(cfg.control_socket, sock);
	free(sock);
	assert_int_equal(cfg.keepalive, CFG_DEFAULT_KEEPALIVE);
	assert_int_equal(cfg.idle_timeout, CFG_DEFAULT_IDLE_TIMEOUT);
	assert_int_equal(cfg.congestion, CFG_CC_BBR);
	assert_int_equal(cfg.key_exchange, CFG_KEX_HYBRID);
	assert_int_equal(cfg.peers[0].naddrs, 0);
	assert_int_equal(cfg.peers[0].allowed_ips.n, 0);
	cfg_clear(&cfg);

	load_ok("/etc/rove/rove.conf", "[Client]\nServer = 192.0.2.1:443\n"
	    "ServerPublicKey = " PK_SERVER "\nPrivateKeyFile = k\n",
	    CFG_ROLE_CLIENT, &cfg);
	assert_string_equal(cfg.server_host, "192.0.2.1");
	assert_int_equal(cfg.server_port, 443);
	cfg_clear(&cfg);

	load_ok("/etc/rove/rove.conf", CLI, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.server_port, CFG_DEFAULT_PORT);
	/* TLS over TCP: the same host, HTTPS's port; QUIC first. */
	assert_string_equal(cfg.server_tcp_host, "vpn.example");
	assert_int_equal(cfg.server_tcp_port, 443);
	assert_int_equal(cfg.transport, CFG_TRANSPORT_AUTO);
	assert_string_equal(cfg.tun, "rove0");
	assert_string_equal(cfg.state_dir, "/var/lib/rove");
	sock = expected_socket("rove.sock");
	assert_string_equal(cfg.control_socket, sock);
	free(sock);
	assert_int_equal(cfg.keepalive, 15);
	assert_int_equal(cfg.idle_timeout, 120);
	assert_int_equal(cfg.congestion, CFG_CC_BBR);
	assert_int_equal(cfg.key_exchange, CFG_KEX_HYBRID);
	assert_int_equal(cfg.nlocal_forward, 0);
	assert_int_equal(cfg.mtu, 0); /* a server key */
	cfg_clear(&cfg);

	/* Tun = none on a server: no Address needed. */
	load_ok("/s.conf", "[Server]\nPrivateKeyFile = k\nTun = none\n" PEER_A,
	    CFG_ROLE_SERVER, &cfg);
	assert_null(cfg.tun);
	assert_int_equal(cfg.naddrs, 0);
	cfg_clear(&cfg);
}

static void
test_default_socket_user(void **state)
{
	struct cfg cfg;
	char *old = getenv("XDG_RUNTIME_DIR");

	(void)state;
	old = old != NULL ? strdup(old) : NULL;
	if (geteuid() == 0) {
		/* Root ignores XDG_RUNTIME_DIR. */
		setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
		load_ok("/c.conf", CLI, CFG_ROLE_CLIENT, &cfg);
		assert_string_equal(cfg.control_socket, "/run/rove/rove.sock");
		cfg_clear(&cfg);
	} else {
		char want[64];

		setenv("XDG_RUNTIME_DIR", "/run/user/x", 1);
		load_ok("/c.conf", CLI, CFG_ROLE_CLIENT, &cfg);
		assert_string_equal(cfg.control_socket,
		    "/run/user/x/rove/rove.sock");
		cfg_clear(&cfg);
		unsetenv("XDG_RUNTIME_DIR");
		load_ok("/c.conf", CLI, CFG_ROLE_CLIENT, &cfg);
		snprintf(want, sizeof want, "/tmp/rove-%u/rove.sock",
		    (unsigned)geteuid());
		assert_string_equal(cfg.control_socket, want);
		cfg_clear(&cfg);
	}
	if (old != NULL)
		setenv("XDG_RUNTIME_DIR", old, 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
	free(old);
}

/* Load a client whose PrivateKeyFile is `value`, from a file at `path`. */
static void
assert_resolved(const char *path, const char *value, const char *want)
{
	struct cfg cfg;
	char *text;

	assert_true(asprintf(&text, "[Client]\nServer = h\nServerPublicKey = "
	    PK_SERVER "\nPrivateKeyFile = %s\n", value) > 0);
	load_ok(path, text, CFG_ROLE_CLIENT, &cfg);
	assert_string_equal(cfg.private_key_file, want);
	cfg_clear(&cfg);
	free(text);
}

static void
test_relative_paths(void **state)
{
	char cwd[PATH_MAX], want[PATH_MAX + 64];

	(void)state;
	assert_resolved("/etc/rove/rove.conf", "keys/a.key",
	    "/etc/rove/keys/a.key");
	assert_resolved("/etc/rove/rove.conf", "./keys/a.key",
	    "/etc/rove/keys/a.key");
	assert_resolved("/etc/rove/rove.conf", ".//./a.key",
	    "/etc/rove/a.key");
	assert_resolved("/etc/rove/rove.conf", "../a.key",
	    "/etc/rove/../a.key");
	assert_resolved("/etc/rove/rove.conf", "/abs/a.key", "/abs/a.key");
	assert_resolved("/etc/rove/rove.conf", ".", "/etc/rove");
	assert_resolved("/rove.conf", "a.key", "/a.key");
	assert_resolved("/etc/rove//rove.conf", "a.key", "/etc/rove/a.key");

	/* A relative config path is taken from the working directory. */
	assert_non_null(getcwd(cwd, sizeof cwd));
	snprintf(want, sizeof want, "%s/a.key", cwd);
	assert_resolved("rove.conf", "a.key", want);
	assert_resolved("./rove.conf", "a.key", want);
	snprintf(want, sizeof want, "%s/configs/keys/a.key", cwd);
	assert_resolved("configs/rove.conf", "keys/a.key", want);
	assert_resolved("./configs/rove.conf", "keys/a.key", want);
}

static void
roundtrip(const char *path, const char *text, enum cfg_role role,
    const char *golden)
{
	struct cfg cfg;
	char *once, *twice;

	load_ok(path, text, role, &cfg);
	once = print_to_string(&cfg);
	cfg_clear(&cfg);
	if (golden != NULL)
		assert_string_equal(once, golden);
	/* Printed paths are absolute, so any file name reparses the same. */
	load_ok("/elsewhere/x.conf", once, role, &cfg);
	twice = print_to_string(&cfg);
	cfg_clear(&cfg);
	assert_string_equal(once, twice);
	free(once);
	free(twice);
}

static void
test_print_roundtrip(void **state)
{
	(void)state;
	roundtrip("/etc/rove/roved.conf", server_full, CFG_ROLE_SERVER,
	    server_full_printed);
	roundtrip("/home/u/rove.conf", client_full, CFG_ROLE_CLIENT,
	    client_full_printed);
	roundtrip("/etc/rove/roved.conf", SRV PEER_A, CFG_ROLE_SERVER, NULL);
	roundtrip("/c.conf", CLI "Routes = 10.0.0.0/8, ::/0\n",
	    CFG_ROLE_CLIENT, NULL);
	/* Group is printed only when given: its default follows User. */
	roundtrip("/c.conf", CLI "User = nobody\n", CFG_ROLE_CLIENT, NULL);
	roundtrip("/etc/rove/roved.conf", SRV "user = root\ngroup = nogroup\n"
	    PEER_A, CFG_ROLE_SERVER, NULL);
}

/* Proxy: the URL's parts, a password that no print and no error shows,
 * and no proxy for QUIC alone. */
static void
test_proxy(void **state)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	char *out;
	static const char bad[] = CLI "Proxy = ftp://u:top%secret@px:1\n";
	static const char quic[] = CLI "Transport = quic\n"
	    "Proxy = socks5://px.example\n";

	(void)state;
	load_ok("/c.conf", CLI "Proxy = http://al%40ice:pa%3Ass@Proxy.example:3128/\n",
	    CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.proxy.kind, PROXY_HTTP);
	assert_string_equal(cfg.proxy.host, "Proxy.example");
	assert_int_equal(cfg.proxy.port, 3128);
	assert_true(cfg.proxy.has_cred);
	assert_string_equal(cfg.proxy.user, "al@ice");
	assert_string_equal(cfg.proxy.pass, "pa:ss");
	out = print_to_string(&cfg);
	cfg_clear(&cfg);
	assert_non_null(strstr(out, "\nProxy = http://al%40ice:***@Proxy.example:3128\n"));
	assert_null(strstr(out, "pa:ss"));
	assert_null(strstr(out, "pa%3Ass"));
	free(out);

	load_ok("/c.conf", CLI "Proxy = socks5://[fd00::5]\n", CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.proxy.kind, PROXY_SOCKS5);
	assert_int_equal(cfg.proxy.port, 1080);
	out = print_to_string(&cfg);
	cfg_clear(&cfg);
	assert_non_null(strstr(out, "\nProxy = socks5://[fd00::5]:1080\n"));
	free(out);

	load_ok("/c.conf", CLI "Proxy = env\n", CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.proxy.kind, PROXY_ENV);
	cfg_clear(&cfg);

	assert_int_equal(cfg_load_buffer("t.conf", bad, strlen(bad),
	    CFG_ROLE_CLIENT, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msg[0], "t.conf:5: Proxy: not "
	    "http://[user:password@]host[:port], socks5://[user:password@]"
	    "host[:port], none or env: the scheme is not http:// or socks5://");
	assert_null(strstr(errs.msg[0], "secret"));
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);

	assert_int_equal(cfg_load_buffer("t.conf", quic, strlen(quic),
	    CFG_ROLE_CLIENT, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msg[0], "t.conf:6: Proxy: has no effect with "
	    "Transport = quic (only TLS over TCP goes through a proxy)");
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
}

/* ServerPorts: a range holding Server's port, for QUIC only. */
static void
test_server_ports(void **state)
{
	static const struct {
		const char *text, *err;
	} bad[] = {
		{ CLI "ServerPorts = 4434-4440\n", "t.conf:5: ServerPorts: "
		    "4434-4440 does not hold Server's port 4433" },
		{ CLI "Transport = tcp\nServerPorts = 4433-4440\n", "t.conf:6: "
		    "ServerPorts: has no effect with Transport = tcp (the ports "
		    "are UDP's)" },
		{ CLI "ServerPorts = 4440-4433\n", NULL },
		{ CLI "ServerPorts = 4433\n", NULL },
		{ CLI "ServerPorts = 0-4440\n", NULL },
		{ CLI "ServerPorts = 4433-65536\n", NULL },
		{ CLI "ServerPorts = 4433-44x0\n", NULL },
		{ CLI "ServerPorts = -4433-4440\n", NULL },
	};
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	char *out, want[160];

	(void)state;
	load_ok("/c.conf", CLI "ServerPorts = 4433-4440\n", CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.server_ports_first, 4433);
	assert_int_equal(cfg.server_ports_last, 4440);
	out = print_to_string(&cfg);
	cfg_clear(&cfg);
	assert_non_null(strstr(out, "\nServerPorts = 4433-4440\n"));
	free(out);
	load_ok("/c.conf", CLI, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.server_ports_first, 0);
	out = print_to_string(&cfg);
	cfg_clear(&cfg);
	assert_null(strstr(out, "ServerPorts"));
	free(out);

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *v = strstr(bad[i].text, "ServerPorts = ") + 14;

		assert_int_equal(cfg_load_buffer("t.conf", bad[i].text,
		    strlen(bad[i].text), CFG_ROLE_CLIENT, &cfg, &errs), -1);
		assert_int_equal(errs.n, 1);
		snprintf(want, sizeof want, "t.conf:5: ServerPorts: '%.*s' is "
		    "not first-last (ports 1-65535, the first not above the "
		    "last)", (int)(strchr(v, '\n') - v), v);
		assert_string_equal(errs.msg[0], bad[i].err != NULL ?
		    bad[i].err : want);
		cfg_clear(&cfg);
		cfg_errors_clear(&errs);
	}
}

/* DNS and DNSSearch (server), DNS (client): lists that add up over
 * lines, names lower-cased, printed as one line each. */
/* A RemoteForward's bind address is the server's: none and localhost are
 * its loopback addresses, "*" all of them, else one address; on the wire
 * that is no field, an empty one, or the address (IPv4-mapped made IPv4). */
static void
test_remote_bind(void **state)
{
	static const struct {
		const char *line;
		const char *bind;      /* bind_host as parsed */
		enum proto_remote_bind wire;
		const char *str;       /* the request, as logs name it */
		const char *printed;
	} cases[] = {
		{ "2222 = h:22", NULL, PROTO_RBIND_DEFAULT, "localhost:2222",
		  "2222 = h:22" },
		{ "localhost:2222 = h:22", NULL, PROTO_RBIND_DEFAULT,
		  "localhost:2222", "2222 = h:22" },
		{ "*:2222 = h:22", "*", PROTO_RBIND_ALL, "*:2222",
		  "*:2222 = h:22" },
		{ "0.0.0.0:2222 = h:22", "0.0.0.0", PROTO_RBIND_ADDR,
		  "0.0.0.0:2222", "0.0.0.0:2222 = h:22" },
		{ "198.18.1.1:2222 = h:22", "198.18.1.1", PROTO_RBIND_ADDR,
		  "198.18.1.1:2222", "198.18.1.1:2222 = h:22" },
		{ "127.0.0.1:2222 = h:22", "127.0.0.1", PROTO_RBIND_ADDR,
		  "127.0.0.1:2222", "127.0.0.1:2222 = h:22" },
		{ "[::]:2222 = h:22", "::", PROTO_RBIND_ADDR, "[::]:2222",
		  "[::]:2222 = h:22" },
		{ "[fd00::1]:2222 = h:22", "fd00::1", PROTO_RBIND_ADDR,
		  "[fd00::1]:2222", "[fd00::1]:2222 = h:22" },
		{ "[::ffff:198.18.1.1]:2222 = h:22", "::ffff:198.18.1.1",
		  PROTO_RBIND_ADDR, "198.18.1.1:2222",
		  "[::ffff:198.18.1.1]:2222 = h:22" },
	};
	char text[512], want[128], s[PROTO_FWD_REMOTE_STRLEN], *printed;
	struct proto_remote_forward rf;
	struct cfg cfg;

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text, CLI "RemoteForward = %s\n",
		    cases[i].line);
		load_ok("/c.conf", text, CFG_ROLE_CLIENT, &cfg);
		assert_int_equal(cfg.nremote_forward, 1);
		if (cases[i].bind == NULL)
			assert_null(cfg.remote_forward[0].bind_host);
		else
			assert_string_equal(cfg.remote_forward[0].bind_host,
			    cases[i].bind);
		cfg_forward_remote(&cfg.remote_forward[0], &rf);
		assert_int_equal(rf.port, 2222);
		assert_int_equal(rf.bind, cases[i].wire);
		assert_string_equal(proto_fwd_remote_str(&rf, s), cases[i].str);
		printed = print_to_string(&cfg);
		snprintf(want, sizeof want, "\nRemoteForward = %s\n",
		    cases[i].printed);
		assert_non_null(strstr(printed, want));
		free(printed);
		cfg_clear(&cfg);
	}

	/* -R takes the same, ssh's way round. */
	{
		const struct cfg_option opts[] = {
			{ 'R', "*:2222:h:22" },
			{ 'R', "[fd00::1]:2223:h:22" },
			{ 'R', "localhost:2224:h:22" },
			{ 'R', "198.18.1.1:2225:[fd00::5]:22" },
		};
		struct cfg_errors errs = { 0 };

		assert_int_equal(cfg_load_text_options("-", CLI, CFG_ROLE_CLIENT,
		    &cfg, &errs, opts, sizeof opts / sizeof opts[0]), 0);
		assert_int_equal(errs.n, 0);
		assert_int_equal(cfg.nremote_forward, 4);
		assert_string_equal(cfg.remote_forward[0].bind_host, "*");
		assert_string_equal(cfg.remote_forward[1].bind_host, "fd00::1");
		assert_int_equal(cfg.remote_forward[1].bind_port, 2223);
		assert_null(cfg.remote_forward[2].bind_host);
		assert_string_equal(cfg.remote_forward[3].bind_host,
		    "198.18.1.1");
		assert_string_equal(cfg.remote_forward[3].target_host, "fd00::5");
		cfg_clear(&cfg);
	}
}

/* AllowRemoteForward: a port alone is loopback; ADDR:PORT, [v6]:PORT
 * and *:PORT open other addresses, 0.0.0.0 and :: any of their family. */
static void
test_allow_remote_forward(void **state)
{
	static const struct {
		enum proto_remote_bind bind;
		const char *addr;
		uint16_t port;
		bool allowed;
	} want[] = {
		/* 2222: loopback only. */
		{ PROTO_RBIND_DEFAULT, NULL, 2222, true },
		{ PROTO_RBIND_ADDR, "127.0.0.1", 2222, true },
		{ PROTO_RBIND_ADDR, "127.3.2.1", 2222, true },
		{ PROTO_RBIND_ADDR, "::1", 2222, true },
		{ PROTO_RBIND_ADDR, "::ffff:127.0.0.1", 2222, true },
		{ PROTO_RBIND_ADDR, "0.0.0.0", 2222, false },
		{ PROTO_RBIND_ADDR, "198.18.1.1", 2222, false },
		{ PROTO_RBIND_ADDR, "::", 2222, false },
		{ PROTO_RBIND_ALL, NULL, 2222, false },
		/* A port not listed at all, even on loopback. */
		{ PROTO_RBIND_DEFAULT, NULL, 2229, false },
		{ PROTO_RBIND_ADDR, "127.0.0.1", 2229, false },
		/* 2223: one address (written IPv4-mapped here). */
		{ PROTO_RBIND_DEFAULT, NULL, 2223, true },
		{ PROTO_RBIND_ADDR, "198.18.1.1", 2223, true },
		{ PROTO_RBIND_ADDR, "::ffff:198.18.1.1", 2223, true },
		{ PROTO_RBIND_ADDR, "198.18.1.2", 2223, false },
		{ PROTO_RBIND_ADDR, "0.0.0.0", 2223, false },
		{ PROTO_RBIND_ALL, NULL, 2223, false },
		/* 2224: an IPv6 address. */
		{ PROTO_RBIND_ADDR, "fd00::1", 2224, true },
		{ PROTO_RBIND_ADDR, "fd00::2", 2224, false },
		{ PROTO_RBIND_ADDR, "::", 2224, false },
		/* 2225: anywhere. */
		{ PROTO_RBIND_ALL, NULL, 2225, true },
		{ PROTO_RBIND_ADDR, "0.0.0.0", 2225, true },
		{ PROTO_RBIND_ADDR, "::", 2225, true },
		{ PROTO_RBIND_ADDR, "fd00::9", 2225, true },
		{ PROTO_RBIND_DEFAULT, NULL, 2225, true },
		/* 2226: 0.0.0.0 is any IPv4 address, not IPv6, not "*". */
		{ PROTO_RBIND_ADDR, "0.0.0.0", 2226, true },
		{ PROTO_RBIND_ADDR, "198.18.7.7", 2226, true },
		{ PROTO_RBIND_ADDR, "fd00::1", 2226, false },
		{ PROTO_RBIND_ADDR, "::", 2226, false },
		{ PROTO_RBIND_ALL, NULL, 2226, false },
		/* 2227: :: is any IPv6 address. */
		{ PROTO_RBIND_ADDR, "::", 2227, true },
		{ PROTO_RBIND_ADDR, "fd00::7", 2227, true },
		{ PROTO_RBIND_ADDR, "198.18.1.1", 2227, false },
		{ PROTO_RBIND_ALL, NULL, 2227, false },
	};
	struct proto_remote_forward rf;
	struct cfg cfg;
	char *printed;

	(void)state;
	load_ok("/s.conf", SRV PEER_A "AllowRemoteForward = 2222, "
	    "[::ffff:198.18.1.1]:2223, [fd00::1]:2224, *:2225, "
	    "0.0.0.0:2226, [::]:2227\n", CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.peers[0].nallow_remote_forward, 6);
	assert_int_equal(cfg.peers[0].allow_remote_forward[1].bind,
	    PROTO_RBIND_ADDR);
	assert_int_equal(cfg.peers[0].allow_remote_forward[1].addr.family,
	    AF_INET);
	assert_int_equal(cfg.peers[0].allow_remote_forward[3].bind,
	    PROTO_RBIND_ALL);
	printed = print_to_string(&cfg);
	assert_non_null(strstr(printed, "\nAllowRemoteForward = 2222, "
	    "198.18.1.1:2223, [fd00::1]:2224, *:2225, 0.0.0.0:2226, "
	    "[::]:2227\n"));
	free(printed);
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		memset(&rf, 0, sizeof rf);
		rf.port = want[i].port;
		rf.bind = want[i].bind;
		if (want[i].addr != NULL)
			assert_int_equal(addr_parse_ip(want[i].addr,
			    &rf.bind_addr), 0);
		if (cfg_remote_allowed(&cfg.peers[0], &rf) != want[i].allowed)
			fail_msg("case %zu: %s port %u: want %s", i,
			    want[i].addr ? want[i].addr : "(no address)",
			    (unsigned)want[i].port,
			    want[i].allowed ? "allowed" : "denied");
	}
	cfg_clear(&cfg);
	roundtrip("/s.conf", SRV PEER_A "AllowRemoteForward = 22, localhost:23, "
	    "*:24, 198.18.1.1:25, [fd00::1]:26\n", CFG_ROLE_SERVER, NULL);

	/* udp/ entries admit UDP remote forwards alone, and the others TCP
	 * alone, on the same port and address. */
	load_ok("/s.conf", SRV PEER_A "AllowRemoteForward = tcp/5000, "
	    "udp/*:5001, udp/5000, 5001\n", CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.peers[0].nallow_remote_forward, 4);
	printed = print_to_string(&cfg);
	assert_non_null(strstr(printed, "\nAllowRemoteForward = 5000, "
	    "udp/*:5001, udp/5000, 5001\n"));
	free(printed);
	memset(&rf, 0, sizeof rf);
	rf.port = 5001;
	rf.bind = PROTO_RBIND_ALL;
	assert_false(cfg_remote_allowed(&cfg.peers[0], &rf));
	rf.udp = true;
	assert_true(cfg_remote_allowed(&cfg.peers[0], &rf));
	rf.port = 5000;
	assert_false(cfg_remote_allowed(&cfg.peers[0], &rf));
	rf.bind = PROTO_RBIND_DEFAULT;
	assert_true(cfg_remote_allowed(&cfg.peers[0], &rf));
	cfg_clear(&cfg);
	load_ok("/s.conf", SRV PEER_A "AllowRemoteForward = udp/5002\n",
	    CFG_ROLE_SERVER, &cfg);
	memset(&rf, 0, sizeof rf);
	rf.port = 5002;
	assert_false(cfg_remote_allowed(&cfg.peers[0], &rf));
	cfg_clear(&cfg);

	/* No list: nothing, loopback included. */
	load_ok("/s.conf", SRV PEER_A, CFG_ROLE_SERVER, &cfg);
	memset(&rf, 0, sizeof rf);
	rf.port = 22;
	assert_false(cfg_remote_allowed(&cfg.peers[0], &rf));
	cfg_clear(&cfg);
}

/* udp/ LocalForwards: parsed as UDP; a TCP and a UDP forward may share
 * a port, two UDP ones may not. */
static void
test_local_forward_udp(void **state)
{
	struct cfg cfg;
	char *text;

	(void)state;
	load_ok("/c.conf", CLI "LocalForward = udp/5353 = dns.example:53\n"
	    "LocalForward = tcp/5353 = dns.example:53\n"
	    "LocalForward = udp/[::1]:5354 = 10.0.0.53:53\n", CFG_ROLE_CLIENT,
	    &cfg);
	assert_int_equal(cfg.nlocal_forward, 3);
	assert_forward(&cfg.local_forward[0], NULL, 5353, "dns.example", 53, 5);
	assert_true(cfg.local_forward[0].udp);
	assert_false(cfg.local_forward[1].udp);
	assert_forward(&cfg.local_forward[2], "::1", 5354, "10.0.0.53", 53, 7);
	assert_true(cfg.local_forward[2].udp);
	/* The printed form keeps the prefix. */
	text = print_to_string(&cfg);
	assert_non_null(strstr(text, "LocalForward = udp/5353 = "
	    "dns.example:53\nLocalForward = 5353 = dns.example:53\n"
	    "LocalForward = udp/[::1]:5354 = 10.0.0.53:53\n"));
	free(text);
	cfg_clear(&cfg);

	/* RemoteForward alike, and a UDP one names its protocol on the
	 * wire. */
	load_ok("/c.conf", CLI "RemoteForward = udp/*:5353 = 127.0.0.1:53\n"
	    "RemoteForward = 5353 = 127.0.0.1:53\n", CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(cfg.nremote_forward, 2);
	assert_true(cfg.remote_forward[0].udp);
	assert_false(cfg.remote_forward[1].udp);
	{
		struct proto_remote_forward rf;
		char s[PROTO_FWD_REMOTE_STRLEN];

		cfg_forward_remote(&cfg.remote_forward[0], &rf);
		assert_true(rf.udp);
		assert_string_equal(proto_fwd_remote_str(&rf, s),
		    "udp/*:5353");
	}
	text = print_to_string(&cfg);
	assert_non_null(strstr(text, "RemoteForward = udp/*:5353 = "
	    "127.0.0.1:53\nRemoteForward = 5353 = 127.0.0.1:53\n"));
	free(text);
	cfg_clear(&cfg);
}

/* AllowForward's protocols: a rule admits its own protocol only, TCP
 * without a prefix or with tcp/, UDP with udp/; by address and by name. */
static void
test_allow_forward_proto(void **state)
{
	static const struct {
		const char *addr; /* NULL: by name */
		const char *name;
		uint16_t port;
		bool tcp, udp;
	} want[] = {
		{ "198.19.10.5", NULL, 22, true, false },
		{ "198.19.10.5", NULL, 53, false, true },
		{ "198.19.10.5", NULL, 80, true, false },
		{ "198.19.10.5", NULL, 81, false, false },
		{ "198.19.53.1", NULL, 53, false, true },
		{ "198.19.53.1", NULL, 54, false, false },
		{ "::ffff:198.19.53.1", NULL, 53, false, false },
		{ "fd00:53::1", NULL, 9, false, true },
		{ "fd00:54::1", NULL, 9, false, false },
		{ NULL, "DNS.example", 53, false, true },
		{ NULL, "dns.example", 853, true, false },
		{ NULL, "dns.example", 5353, false, false },
		{ NULL, "www.example", 443, true, true },
	};
	struct cfg cfg;
	struct ipaddr a;

	(void)state;
	load_ok("/s.conf", SRV PEER_A "AllowForward = 198.19.10.0/24:22, "
	    "udp/198.19.10.0/24:53, tcp/198.19.10.5:80, udp/198.19.53.0/24:53, "
	    "udp/[fd00:53::/64]:*, udp/dns.example:53, dns.example:853, "
	    "www.example:443, udp/www.example:443\n", CFG_ROLE_SERVER, &cfg);
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		bool tcp, udp;

		if (want[i].addr != NULL) {
			assert_int_equal(addr_parse_ip(want[i].addr, &a), 0);
			tcp = cfg_forward_addr_allowed(&cfg.peers[0], false, &a,
			    want[i].port);
			udp = cfg_forward_addr_allowed(&cfg.peers[0], true, &a,
			    want[i].port);
			/* No name rule ever matches an address. */
		} else {
			tcp = cfg_forward_name_allowed(&cfg.peers[0], false,
			    want[i].name, want[i].port);
			udp = cfg_forward_name_allowed(&cfg.peers[0], true,
			    want[i].name, want[i].port);
		}
		if (tcp != want[i].tcp || udp != want[i].udp)
			fail_msg("case %zu: %s port %u: tcp %d udp %d, want "
			    "tcp %d udp %d", i, want[i].addr ? want[i].addr :
			    want[i].name, (unsigned)want[i].port, tcp, udp,
			    want[i].tcp, want[i].udp);
	}
	cfg_clear(&cfg);
}

static void
test_dns(void **state)
{
	struct cfg cfg;
	char buf[ADDR_STRLEN];
	char *printed;

	(void)state;
	load_ok("/etc/rove/roved.conf", SRV "DNS = 198.19.77.1, fd00:77::1\n"
	    "DNSSearch = Corp.Example\nDNS = ::ffff:192.0.2.53\n"
	    "dnssearch = example.org, a-b.c_d.example\n" PEER_A,
	    CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.ndns_servers, 3);
	assert_string_equal(addr_ip_str(&cfg.dns_servers[0], buf), "198.19.77.1");
	assert_string_equal(addr_ip_str(&cfg.dns_servers[1], buf), "fd00:77::1");
	/* An IPv4-mapped address is the IPv4 server it reaches. */
	assert_int_equal(cfg.dns_servers[2].family, AF_INET);
	assert_string_equal(addr_ip_str(&cfg.dns_servers[2], buf), "192.0.2.53");
	assert_int_equal(cfg.ndns_search, 3);
	assert_string_equal(cfg.dns_search[0], "corp.example");
	assert_string_equal(cfg.dns_search[1], "example.org");
	assert_string_equal(cfg.dns_search[2], "a-b.c_d.example");
	printed = print_to_string(&cfg);
	assert_non_null(strstr(printed, "\nDNS = 198.19.77.1, fd00:77::1, "
	    "192.0.2.53\nDNSSearch = corp.example, example.org, "
	    "a-b.c_d.example\n"));
	free(printed);
	cfg_clear(&cfg);
	roundtrip("/etc/rove/roved.conf", SRV "DNS = 10.0.0.53\nDNS = 10.0.0.54, "
	    "2001:db8::53\nDNSSearch = x.example\n" PEER_A, CFG_ROLE_SERVER,
	    NULL);

	/* Eight of each is the most. */
	load_ok("/s.conf", SRV "DNS = 10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4\n"
	    "DNS = 10.0.0.5, 10.0.0.6, 10.0.0.7, 10.0.0.8\n"
	    "DNSSearch = a.x, b.x, c.x, d.x, e.x, f.x, g.x, h.x\n" PEER_A,
	    CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.ndns_servers, CFG_MAX_DNS);
	assert_int_equal(cfg.ndns_search, CFG_MAX_DNS_SEARCH);
	cfg_clear(&cfg);

	/* Client: DNS is yes unless said otherwise; no server keys. */
	load_ok("/c.conf", CLI, CFG_ROLE_CLIENT, &cfg);
	assert_true(cfg.dns);
	assert_int_equal(cfg.ndns_servers, 0);
	cfg_clear(&cfg);
	load_ok("/c.conf", CLI "DNS = no\n", CFG_ROLE_CLIENT, &cfg);
	assert_false(cfg.dns);
	printed = print_to_string(&cfg);
	assert_non_null(strstr(printed, "\nDNS = no\n"));
	free(printed);
	cfg_clear(&cfg);
	roundtrip("/c.conf", CLI "DNS = off\n", CFG_ROLE_CLIENT, NULL);
}

/* A malformed input and every error it must produce, in order. */
struct bad_case {
	enum cfg_role role;
	const char *text;
	size_t len; /* 0: strlen(text) */
	const char *want[8];
};

/* 107 characters: with the leading '/', one more than sun_path holds. */
#define LONG_NAME "0123456789012345678901234567890123456789" \
	"0123456789012345678901234567890123456789" \
	"012345678901234567890123456"

#define LONG_NAME_OK "0123456789012345678901234567890123456789" \
	"0123456789012345678901234567890123456789" \
	"01234567890123456789012345"

#define S CFG_ROLE_SERVER
#define C CFG_ROLE_CLIENT

static const struct bad_case bad_cases[] = {
	/* Numbers. */
	{ S, SRV "MTU = 70000\n" PEER_A, 0,
	    { "t.conf:4: MTU: 70000 is out of range (576..65535)" } },
	{ S, SRV "MTU = 575\n" PEER_A, 0,
	    { "t.conf:4: MTU: 575 is out of range (576..65535)" } },
	{ S, SRV "MTU = 1400b\n" PEER_A, 0,
	    { "t.conf:4: MTU: '1400b' is not a number" } },
	{ S, SRV "MTU = 0x500\n" PEER_A, 0,
	    { "t.conf:4: MTU: '0x500' is not a number" } },
	{ S, SRV "KeepAlive = -1\n" PEER_A, 0,
	    { "t.conf:4: KeepAlive: -1 is out of range (0..3600)" } },
	{ S, SRV "KeepAlive = -\n" PEER_A, 0,
	    { "t.conf:4: KeepAlive: '-' is not a number" } },
	{ S, SRV "IdleTimeout = 0\n" PEER_A, 0,
	    { "t.conf:4: IdleTimeout: 0 is out of range (1..86400)" } },
	{ S, SRV "IdleTimeout = 99999999999999999999999\n" PEER_A, 0,
	    { "t.conf:4: IdleTimeout: 99999999999999999999999 is out of "
	      "range (1..86400)" } },
	{ C, CLI "KeepAlive = 30\nIdleTimeout = 30\n", 0,
	    { "t.conf:6: IdleTimeout: 30 must be greater than KeepAlive "
	      "(30)" } },
	/* The TCP transport's keys. */
	{ C, CLI "Transport = udp\n", 0,
	    { "t.conf:5: Transport: 'udp' is not auto, quic or tcp" } },
	{ C, CLI "ServerTCP = bad/host:443\n", 0,
	    { "t.conf:5: ServerTCP: 'bad/host:443' is not host[:port]" } },
	{ C, CLI "ServerName = 198.18.1.1\n", 0,
	    { "t.conf:5: ServerName: '198.18.1.1' is not a DNS name" } },
	{ C, CLI "ServerName = [fd00::1]\n", 0,
	    { "t.conf:5: ServerName: '[fd00::1]' is not a DNS name" } },
	{ S, SRV "ServerName = rove.example\n" PEER_A, 0,
	    { "t.conf:4: ServerName: is a [Client] key, not valid in a server "
	      "config" } },
	{ S, SRV "ListenTCP = vpn.example:443\n" PEER_A, 0,
	    { "t.conf:4: ListenTCP: 'vpn.example:443' is not a numeric "
	      "address[:port]" } },
	{ S, SRV "ListenTCP = 0.0.0.0:443\nListenTCP = 0.0.0.0:443\n" PEER_A, 0,
	    { "t.conf:5: ListenTCP: 0.0.0.0:443 is listed twice (first on "
	      "line 4)" } },
	{ C, CLI "ListenTCP = 0.0.0.0:443\n", 0,
	    { "t.conf:5: ListenTCP: is a [Server] key, not valid in a client "
	      "config" } },
	{ C, CLI "KeepAlive = 200\n", 0,
	    { "t.conf:5: KeepAlive: 200 must be less than IdleTimeout "
	      "(120)" } },
	{ S, SRV "MTU = 1000\nAddress = fd00::1/64\n" PEER_A, 0,
	    { "t.conf:5: Address: duplicate key (first on line 3)" } },
	{ S, "[Server]\nPrivateKeyFile = k\nMTU = 1000\n"
	    "Address = 10.77.0.1/24, fd00::1/64\n" PEER_A, 0,
	    { "t.conf:3: MTU: 1000 is below 1280, the minimum with an IPv6 "
	      "Address" } },

	/* Line syntax. */
	{ S, SRV "Foo = 1\n" PEER_A, 0,
	    { "t.conf:4: unknown key 'Foo' in [Server]" } },
	{ S, SRV "Private Key = 1\n" PEER_A, 0,
	    { "t.conf:4: unknown key 'Private Key' in [Server]" } },
	{ S, SRV "Name = x\n" PEER_A "mtu = 1400\n", 0,
	    { "t.conf:4: Name: belongs in [Peer], not [Server]",
	      "t.conf:8: MTU: belongs in [Server], not [Peer]" } },
	{ S, SRV PEER_A "Routes = 10.0.0.0/8\nKEEPALIVE = 5\n", 0,
	    { "t.conf:7: Routes: is a [Client] key, not valid in a server "
	      "config",
	      "t.conf:8: KeepAlive: belongs in [Server], not [Peer]" } },
	{ C, CLI "Listen = 0.0.0.0:1\naddress = 10.0.0.1/24\n", 0,
	    { "t.conf:5: Listen: is a [Server] key, not valid in a client "
	      "config",
	      "t.conf:6: Address: is a [Server] key, not valid in a client "
	      "config" } },
	{ S, SRV "MTU = 1400\nmtu = 1500\n" PEER_A, 0,
	    { "t.conf:5: MTU: duplicate key (first on line 4)" } },
	{ S, SRV "MTU 1400\n" PEER_A, 0,
	    { "t.conf:4: missing '=' in \"MTU 1400\"" } },
	{ S, SRV "= 1400\n" PEER_A, 0,
	    { "t.conf:4: missing key name before '='" } },
	{ S, "MTU = 1400\nBogus = 1\n" SRV PEER_A, 0,
	    { "t.conf:1: MTU: key outside any section",
	      "t.conf:2: Bogus: key outside any section" } },
	{ S, SRV "MTU =\n" PEER_A, 0,
	    { "t.conf:4: MTU: missing value" } },
	{ S, "[Server]\nPrivateKeyFile = # nothing\nAddress = 10.77.0.1/24\n"
	    PEER_A, 0,
	    { "t.conf:2: PrivateKeyFile: missing value" } },
	{ S, SRV "[Foo]\nMTU = 1\n" PEER_A, 0,
	    { "t.conf:4: unknown section [Foo]" } },
	{ S, SRV "[Client]\nServer = x\n" PEER_A, 0,
	    { "t.conf:4: [Client] is not valid in a server config" } },
	{ C, CLI "[Peer]\nName = x\n", 0,
	    { "t.conf:5: [Peer] is not valid in a client config" } },
	{ S, SRV "[Peer\nName = x\n" PEER_A, 0,
	    { "t.conf:4: missing ']' in section header" } },
	{ S, "[Server] x\nPrivateKeyFile = k\nAddress = 10.77.0.1/24\n" PEER_A,
	    0, { "t.conf:1: unexpected text after section header" } },
	{ S, SRV "[Server]\nMTU = 1400\n" PEER_A, 0,
	    { "t.conf:4: duplicate [Server] section (first on line 1)" } },
	{ S, SRV "MTU = 1400\x01\n" PEER_A, 0,
	    { "t.conf:4: line contains control character 0x01" } },
	{ S, SRV "MTU = 1400\0\n" PEER_A,
	    sizeof(SRV "MTU = 1400\0\n" PEER_A) - 1,
	    { "t.conf:4: line contains a NUL byte" } },
	{ S, SRV "MTU = 14\xc3\xa9\n" PEER_A, 0,
	    { "t.conf:4: MTU: '14\\xc3\\xa9' is not a number" } },

	/* Missing things. */
	{ S, "[Server]\nAddress = 10.77.0.1/24\n" PEER_A, 0,
	    { "t.conf:1: missing required key PrivateKeyFile" } },
	{ S, "[Server]\nPrivateKeyFile = k\n" PEER_A, 0,
	    { "t.conf:1: missing required key Address (or set Tun = none)" } },
	{ S, SRV, 0,
	    { "t.conf:1: at least one [Peer] section is required" } },
	{ S, "\n" PEER_A "\n", 0,
	    { "t.conf:5: missing [Server] section" } },
	{ S, "", 0,
	    { "t.conf:1: missing [Server] section",
	      "t.conf:1: at least one [Peer] section is required" } },
	{ C, "# nothing\n", 0,
	    { "t.conf:1: missing [Client] section" } },
	{ S, SRV "[Peer]\n[peer]\nName = b\n", 0,
	    { "t.conf:4: missing required key Name",
	      "t.conf:4: missing required key PublicKey",
	      "t.conf:5: missing required key PublicKey" } },
	{ C, "[Client]\n", 0,
	    { "t.conf:1: missing required key Server",
	      "t.conf:1: missing required key ServerPublicKey",
	      "t.conf:1: missing required key PrivateKeyFile" } },

	/* Peers. */
	{ S, SRV PEER_A "[Peer]\nName = a\nPublicKey = " PK_B "\n", 0,
	    { "t.conf:8: Name: 'a' is already used by the peer on line 4" } },
	{ S, SRV PEER_A "[Peer]\nName = b\nPublicKey = " PK_A "\n", 0,
	    { "t.conf:9: PublicKey: already used by peer 'a' on line 4" } },
	{ S, SRV "[Peer]\nPublicKey = " PK_A "\n" PEER_B
	    "[Peer]\nPublicKey = " PK_A "\nName = c\n", 0,
	    { "t.conf:4: missing required key Name",
	      "t.conf:10: PublicKey: already used by the peer on line 4" } },
	{ S, SRV PEER_A "PublicKey = x\n", 0,
	    { "t.conf:7: PublicKey: duplicate key (first on line 6)" } },
	{ S, SRV "[Peer]\nName = a\nPublicKey = " PK_A "x\n", 0,
	    { "t.conf:6: PublicKey: '" PK_A "x' is not a base64 32-byte "
	      "key" } },
	{ S, SRV "[Peer]\nName = my laptop\nPublicKey = " PK_A "\n", 0,
	    { "t.conf:5: Name: 'my laptop' is not a valid peer name "
	      "(1..32 of A-Z a-z 0-9 . _ -)" } },
	{ S, SRV "[Peer]\nName = 123456789012345678901234567890123\n"
	    "PublicKey = " PK_A "\n", 0,
	    { "t.conf:5: Name: '123456789012345678901234567890123' is not a "
	      "valid peer name (1..32 of A-Z a-z 0-9 . _ -)" } },
	{ S, SRV PEER_A "Address = 10.78.0.2\n", 0,
	    { "t.conf:7: Address: 10.78.0.2 is outside the server's subnet "
	      "10.77.0.0/24" } },
	{ S, SRV PEER_A "Address = 10.77.0.1\n", 0,
	    { "t.conf:7: Address: 10.77.0.1 is the server's own address" } },
	{ S, SRV PEER_A "Address = 10.77.0.0\n", 0,
	    { "t.conf:7: Address: 10.77.0.0 is the network address of "
	      "10.77.0.0/24" } },
	{ S, SRV PEER_A "Address = 10.77.0.255/32\n", 0,
	    { "t.conf:7: Address: 10.77.0.255 is the broadcast address of "
	      "10.77.0.0/24" } },
	{ S, SRV PEER_A "Address = 10.77.0.2/24\n", 0,
	    { "t.conf:7: Address: 10.77.0.2/24 is not a single address "
	      "(use /32)" } },
	{ S, SRV PEER_A "Address = fd00::2/64\n", 0,
	    { "t.conf:7: Address: fd00::2/64 is not a single address "
	      "(use /128)" } },
	{ S, SRV PEER_A "Address = 10.77.0.2, 10.77.0.3\n", 0,
	    { "t.conf:7: Address: more than one IPv4 address" } },
	{ S, SRV PEER_A "Address = fd00:77::2\n", 0,
	    { "t.conf:7: Address: fd00:77::2 needs an IPv6 Address in "
	      "[Server]" } },
	{ S, SRV PEER_A "Address = host\n", 0,
	    { "t.conf:7: Address: 'host' is not an address" } },
	{ S, SRV PEER_A "Address = 10.77.0.2\n" PEER_B "Address = 10.77.0.2\n",
	    0, { "t.conf:11: Address: 10.77.0.2/32 is already used by peer 'a' "
	      "on line 4" } },
	{ S, SRV PEER_A "AllowedIPs = 198.19.20.0/24\n" PEER_B
	    "AllowedIPs = 198.19.0.0/16, 198.19.20.0/24\n", 0,
	    { "t.conf:11: AllowedIPs: 198.19.20.0/24 is already used by peer "
	      "'a' on line 4" } },
	{ S, SRV PEER_A "Address = 10.77.0.9\n" PEER_B
	    "AllowedIPs = 10.77.0.9/32\n", 0,
	    { "t.conf:11: AllowedIPs: 10.77.0.9/32 is already used by peer 'a' "
	      "on line 4" } },
	{ S, SRV PEER_A "AllowedIPs = 198.19.20.1/24\n", 0,
	    { "t.conf:7: AllowedIPs: 198.19.20.1/24 has host bits set; did you "
	      "mean 198.19.20.0/24?" } },
	{ S, SRV PEER_A "AllowedIPs = 198.19.20.0/24, 198.19.20.0/24\n", 0,
	    { "t.conf:7: AllowedIPs: 198.19.20.0/24 is listed twice" } },
	{ S, SRV PEER_A "AllowedIPs = 10.0.0.0/8,,\n", 0,
	    { "t.conf:7: AllowedIPs: empty item in list" } },
	{ S, SRV PEER_A "AllowedIPs = 10.0.0.0/33\n", 0,
	    { "t.conf:7: AllowedIPs: '10.0.0.0/33' is not an address or "
	      "prefix" } },
	{ S, "[Server]\nPrivateKeyFile = k\nTun = none\n" PEER_A
	    "AllowedIPs = 10.9.0.0/16\nAddress = 10.77.0.2\n", 0,
	    { "t.conf:7: AllowedIPs: has no effect with Tun = none",
	      "t.conf:8: Address: 10.77.0.2 needs an IPv4 Address in "
	      "[Server]" } },
	{ S, SRV PEER_A "AllowForward = 10.0.0.0/8\n", 0,
	    { "t.conf:7: AllowForward: '10.0.0.0/8' is not [udp/]prefix:port, "
	      "[udp/][IPv6-prefix]:port or [udp/]name:port" } },
	{ S, SRV PEER_A "AllowForward = udp/10.0.0.0/8, sctp/10.0.0.0/8:1\n", 0,
	    { "t.conf:7: AllowForward: 'udp/10.0.0.0/8' is not "
	      "[udp/]prefix:port, [udp/][IPv6-prefix]:port or "
	      "[udp/]name:port" } },
	{ S, SRV PEER_A "AllowForward = sctp/10.0.0.0/8:1\n", 0,
	    { "t.conf:7: AllowForward: 'sctp/10.0.0.0/8:1' is not "
	      "[udp/]prefix:port, [udp/][IPv6-prefix]:port or "
	      "[udp/]name:port" } },
	{ S, SRV PEER_A "AllowForward = fd00::/64:22\n", 0,
	    { "t.conf:7: AllowForward: 'fd00::/64:22' needs brackets around "
	      "the IPv6 prefix, e.g. [fd00::/64]:22" } },
	{ S, SRV PEER_A "AllowForward = 10.0.0.0/8:22, 10.1.0.0/16:http\n", 0,
	    { "t.conf:7: AllowForward: 'http' is not a port "
	      "(1..65535 or *)" } },
	{ S, SRV PEER_A "AllowForward = 10.0.0.1/8:22\n", 0,
	    { "t.conf:7: AllowForward: 10.0.0.1/8 has host bits set; did you "
	      "mean 10.0.0.0/8?" } },
	{ S, SRV PEER_A "AllowForward = [10.0.0.0/8]:22\n", 0,
	    { "t.conf:7: AllowForward: '[10.0.0.0/8]:22' is not "
	      "[udp/]prefix:port, [udp/][IPv6-prefix]:port or "
	      "[udp/]name:port" } },
	{ S, SRV PEER_A "AllowForward = 10.0.0.300:22\n", 0,
	    { "t.conf:7: AllowForward: '10.0.0.300:22' is not "
	      "[udp/]prefix:port, [udp/][IPv6-prefix]:port or "
	      "[udp/]name:port" } },
	{ S, SRV PEER_A "AllowRemoteForward = 22, 0\n", 0,
	    { "t.conf:7: AllowRemoteForward: '0' is not a port (1..65535), "
	      "ADDR:PORT, [IPv6-ADDR]:PORT or *:PORT" } },
	{ S, SRV PEER_A "AllowRemoteForward = 22, 22\n", 0,
	    { "t.conf:7: AllowRemoteForward: localhost:22 is listed twice" } },
	{ S, SRV PEER_A "AllowRemoteForward = 22, localhost:22\n", 0,
	    { "t.conf:7: AllowRemoteForward: localhost:22 is listed twice" } },
	{ S, SRV PEER_A "AllowRemoteForward = *:22, 22, *:22\n", 0,
	    { "t.conf:7: AllowRemoteForward: *:22 is listed twice" } },
	{ S, SRV PEER_A "AllowRemoteForward = [::ffff:198.18.1.1]:22, "
	    "198.18.1.1:22\n", 0,
	    { "t.conf:7: AllowRemoteForward: 198.18.1.1:22 is listed twice" } },
	{ S, SRV PEER_A "AllowRemoteForward = gw.example:22\n", 0,
	    { "t.conf:7: AllowRemoteForward: 'gw.example:22' is not a port "
	      "(1..65535), ADDR:PORT, [IPv6-ADDR]:PORT or *:PORT" } },
	{ S, SRV PEER_A "AllowRemoteForward = 198.18.1.1:0\n", 0,
	    { "t.conf:7: AllowRemoteForward: '198.18.1.1:0' is not a port "
	      "(1..65535), ADDR:PORT, [IPv6-ADDR]:PORT or *:PORT" } },
	{ S, SRV PEER_A "AllowRemoteForward = fd00::1:22\n", 0,
	    { "t.conf:7: AllowRemoteForward: 'fd00::1:22' is not a port "
	      "(1..65535), ADDR:PORT, [IPv6-ADDR]:PORT or *:PORT" } },

	/* Server keys. */
	{ S, SRV "Listen = vpn.example:4433\n" PEER_A, 0,
	    { "t.conf:4: Listen: 'vpn.example:4433' is not a numeric "
	      "address[:port]" } },
	{ S, SRV "Listen = fd00::1:4433\n" PEER_A, 0,
	    { "t.conf:4: Listen: 'fd00::1:4433' is not a numeric "
	      "address[:port]" } },
	{ S, SRV "Listen = 0.0.0.0:4433\nListen = 0.0.0.0\n" PEER_A, 0,
	    { "t.conf:5: Listen: 0.0.0.0:4433 is listed twice (first on "
	      "line 4)" } },
	{ S, SRV "Listen = 10.0.0.1\nListen = 10.0.0.2\nListen = 10.0.0.3\n"
	    "Listen = 10.0.0.4\nListen = 10.0.0.5\nListen = 10.0.0.6\n"
	    "Listen = 10.0.0.7\nListen = 10.0.0.8\nListen = 10.0.0.9\n"
	    "Listen = 10.0.0.10\n" PEER_A, 0,
	    { "t.conf:12: Listen: more than 8 addresses",
	      "t.conf:13: Listen: more than 8 addresses" } },
	{ S, SRV "Tun = averyveryverylong\n" PEER_A, 0,
	    { "t.conf:4: Tun: 'averyveryverylong' is longer than 15 "
	      "characters" } },
	{ S, SRV "Tun = tun/0\n" PEER_A, 0,
	    { "t.conf:4: Tun: 'tun/0' is not a valid interface name" } },
	{ S, SRV "Tun = t%d%d\n" PEER_A, 0,
	    { "t.conf:4: Tun: 't%d%d' is not a valid interface name" } },
	{ S, SRV "Tun = ..\n" PEER_A, 0,
	    { "t.conf:4: Tun: '..' is not a valid interface name" } },
	{ S, SRV "Congestion = cubic#x\n" PEER_A, 0,
	    { "t.conf:4: Congestion: 'cubic#x' is not cubic or bbr" } },
	{ S, SRV "Congestion = reno\n" PEER_A, 0,
	    { "t.conf:4: Congestion: 'reno' is not cubic or bbr" } },
	{ S, SRV "KeyExchange = mlkem\n" PEER_A, 0,
	    { "t.conf:4: KeyExchange: 'mlkem' is not hybrid, classic or "
	      "pq-required" } },
	{ S, SRV "KeyExchange = pq\n" PEER_A, 0,
	    { "t.conf:4: KeyExchange: 'pq' is not hybrid, classic or "
	      "pq-required" } },
	{ S, SRV "Offload = on\n" PEER_A, 0,
	    { "t.conf:4: Offload: 'on' is not auto or off" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1\n" PEER_A, 0,
	    { "t.conf:3: Address: 10.77.0.1 needs a prefix length, e.g. "
	      "10.77.0.1/24" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.0/24\n" PEER_A, 0,
	    { "t.conf:3: Address: 10.77.0.0/24 is the network address, not a "
	      "host address" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.255/24\n" PEER_A,
	    0, { "t.conf:3: Address: 10.77.0.255/24 is the broadcast address, "
	      "not a host address" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/31\n" PEER_A, 0,
	    { "t.conf:3: Address: 10.77.0.1/31: prefix length must be 8..30 "
	      "for IPv4" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = fd00::1/127\n" PEER_A, 0,
	    { "t.conf:3: Address: fd00::1/127: prefix length must be 16..126 "
	      "for IPv6" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/24, "
	    "10.78.0.1/24\n" PEER_A, 0,
	    { "t.conf:3: Address: more than one IPv4 address" } },
	{ S, "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/24 10.78.0.1\n"
	    PEER_A, 0,
	    { "t.conf:3: Address: '10.77.0.1/24 10.78.0.1' is not an "
	      "address/prefix-length" } },
	{ S, SRV "ControlSocket = /" LONG_NAME "\n" PEER_A, 0,
	    { "t.conf:4: ControlSocket: /" LONG_NAME " is longer than 107 "
	      "bytes, too long for a unix socket" } },

	/* Client keys. */
	{ C, "[Client]\nServer = vpn.example:0\nServerPublicKey = " PK_SERVER
	    "\nPrivateKeyFile = k\n", 0,
	    { "t.conf:2: Server: 'vpn.example:0' is not host[:port]" } },
	{ C, "[Client]\nServer = 300.1.1.1\nServerPublicKey = " PK_SERVER
	    "\nPrivateKeyFile = k\n", 0,
	    { "t.conf:2: Server: '300.1.1.1' is not host[:port]" } },
	{ C, "[Client]\nServer = -bad.example\nServerPublicKey = short\n"
	    "PrivateKeyFile = k\n", 0,
	    { "t.conf:2: Server: '-bad.example' is not host[:port]",
	      "t.conf:3: ServerPublicKey: 'short' is not a base64 32-byte "
	      "key" } },
	{ C, CLI "Tun = none\nRoutes = 10.0.0.0/8\n", 0,
	    { "t.conf:6: Routes: has no effect with Tun = none" } },
	{ C, CLI "RemoteForward = udp/5353 = a.example:53\n"
	    "RemoteForward = udp/5353 = b.example:53\n", 0,
	    { "t.conf:6: RemoteForward: port 5353 is already used by "
	      "RemoteForward on line 5" } },
	{ C, CLI "LocalForward = udp/5353 = a.example:53\n"
	    "LocalForward = udp/5353 = b.example:53\n", 0,
	    { "t.conf:6: LocalForward: port 5353 is already used by "
	      "LocalForward on line 5" } },
	{ C, CLI "LocalForward = sctp/8080 = intranet:80\n", 0,
	    { "t.conf:5: LocalForward: 'sctp/8080 = intranet:80' is not "
	      "[bind:]port = host:port" } },
	{ C, CLI "LocalForward = tcp/8080 = intranet\n", 0,
	    { "t.conf:5: LocalForward: 'tcp/8080 = intranet' is not "
	      "[bind:]port = host:port" } },
	{ C, CLI "DynamicForward = tcp/1080\n", 0,
	    { "t.conf:5: DynamicForward: 'tcp/1080' is not [bind:]port" } },
	{ C, CLI "LocalForward = 8080\n", 0,
	    { "t.conf:5: LocalForward: '8080' is not [bind:]port = "
	      "host:port" } },
	{ C, CLI "LocalForward = 8080 = intranet\n", 0,
	    { "t.conf:5: LocalForward: '8080 = intranet' is not [bind:]port = "
	      "host:port" } },
	{ C, CLI "LocalForward = gateway:8080 = intranet:80\n", 0,
	    { "t.conf:5: LocalForward: bind address 'gateway' is not a "
	      "numeric IP address (or localhost)" } },
	/* "*" is the server's all addresses, for a RemoteForward only. */
	{ C, CLI "LocalForward = *:8080 = intranet:80\n", 0,
	    { "t.conf:5: LocalForward: bind address '*' is not a "
	      "numeric IP address (or localhost)" } },
	{ C, CLI "DynamicForward = *:1080\n", 0,
	    { "t.conf:5: DynamicForward: bind address '*' is not a "
	      "numeric IP address (or localhost)" } },
	{ C, CLI "RemoteForward = gw:2222 = h:22\n", 0,
	    { "t.conf:5: RemoteForward: bind address 'gw' is not a "
	      "numeric IP address (or localhost or *)" } },
	/* One RemoteForward per port, whatever the bind addresses: a
	 * connection reaches rove named by its port. */
	{ C, CLI "RemoteForward = 198.18.1.1:22 = c:22\n"
	    "RemoteForward = 127.0.0.1:22 = c:22\n", 0,
	    { "t.conf:6: RemoteForward: 127.0.0.1:22 is already used by "
	      "RemoteForward on line 5" } },
	{ C, CLI "RemoteForward = 70000 = h:22\n", 0,
	    { "t.conf:5: RemoteForward: '70000 = h:22' is not [bind:]port = "
	      "host:port" } },
	{ C, CLI "DynamicForward = 1080 = x:1\n", 0,
	    { "t.conf:5: DynamicForward: '1080 = x:1' is not [bind:]port" } },
	{ C, CLI "LocalForward = 8080 = a:80\nDynamicForward = 1080\n"
	    "DynamicForward = 8080\nLocalForward = 127.0.0.1:1080 = b:1\n"
	    "RemoteForward = 22 = c:22\nRemoteForward = 22 = d:22\n", 0,
	    { "t.conf:7: DynamicForward: port 8080 is already used by "
	      "LocalForward on line 5",
	      "t.conf:10: RemoteForward: port 22 is already used by "
	      "RemoteForward on line 9" } },

	/* User and Group: looked up while parsing, so -n shows a typo. */
	{ S, SRV "User = no-such-user-rove\n" PEER_A, 0,
	    { "t.conf:4: User: unknown user 'no-such-user-rove'" } },
	{ C, CLI "User = nobody\nGroup = no-such-group-rove\n", 0,
	    { "t.conf:6: Group: unknown group 'no-such-group-rove'" } },
	{ C, CLI "Group = root\n", 0,
	    { "t.conf:5: Group: has no effect without User" } },
	{ S, SRV "Group = no-such-group-rove\n" PEER_A, 0,
	    { "t.conf:4: Group: unknown group 'no-such-group-rove'" } },
	{ C, CLI "User = nob\xc3\xb6" "dy\n", 0,
	    { "t.conf:5: User: unknown user 'nob\\xc3\\xb6dy'" } },
	{ C, CLI "User =\n", 0, { "t.conf:5: User: missing value" } },
	{ C, CLI "User = root\nuser = nobody\n", 0,
	    { "t.conf:6: User: duplicate key (first on line 5)" } },
	{ S, SRV PEER_A "User = root\n", 0,
	    { "t.conf:7: User: belongs in [Server], not [Peer]" } },
	/* DNS servers and search domains. */
	{ S, SRV "DNS = 198.19.77.1, dns.example\n" PEER_A, 0,
	    { "t.conf:4: DNS: 'dns.example' is not an IP address" } },
	{ S, SRV "DNS = 0.0.0.0\n" PEER_A, 0,
	    { "t.conf:4: DNS: 0.0.0.0 is unspecified, not a DNS server's "
	      "address" } },
	{ S, SRV "DNS = ff02::fb\n" PEER_A, 0,
	    { "t.conf:4: DNS: ff02::fb is multicast, not a DNS server's "
	      "address" } },
	{ S, SRV "DNS = 10.0.0.53\nDNS = 10.0.0.053, 10.0.0.53\n" PEER_A, 0,
	    { "t.conf:5: DNS: '10.0.0.053' is not an IP address" } },
	{ S, SRV "DNS = 10.0.0.53\nDNS = 10.0.0.54, 10.0.0.53\n" PEER_A, 0,
	    { "t.conf:5: DNS: 10.0.0.53 is listed twice" } },
	{ S, SRV "DNS = 10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5\n"
	    "DNS = 10.0.0.6, 10.0.0.7, 10.0.0.8, 10.0.0.9\n" PEER_A, 0,
	    { "t.conf:5: DNS: more than 8 servers" } },
	{ S, SRV "DNS = 10.0.0.1,\n" PEER_A, 0,
	    { "t.conf:4: DNS: empty item in list" } },
	{ S, SRV "DNS =\n" PEER_A, 0, { "t.conf:4: DNS: missing value" } },
	{ S, SRV "DNSSearch = corp example\n" PEER_A, 0,
	    { "t.conf:4: DNSSearch: 'corp example' is not a domain name" } },
	{ S, SRV "DNSSearch = corp.example.\n" PEER_A, 0,
	    { "t.conf:4: DNSSearch: 'corp.example.' is not a domain name" } },
	{ S, SRV "DNSSearch = 10.0.0\n" PEER_A, 0,
	    { "t.conf:4: DNSSearch: '10.0.0' is not a domain name" } },
	{ S, SRV "DNSSearch = -x.example\n" PEER_A, 0,
	    { "t.conf:4: DNSSearch: '-x.example' is not a domain name" } },
	{ S, SRV "DNSSearch = Corp.example\nDNSSearch = corp.EXAMPLE\n" PEER_A, 0,
	    { "t.conf:5: DNSSearch: corp.example is listed twice" } },
	{ S, SRV "DNSSearch = a.x, b.x, c.x, d.x, e.x, f.x, g.x, h.x, i.x\n"
	    PEER_A, 0, { "t.conf:4: DNSSearch: more than 8 domains" } },
	{ S, SRV "DNSSearch = caf\xc3\xa9.example\n" PEER_A, 0,
	    { "t.conf:4: DNSSearch: 'caf\\xc3\\xa9.example' is not a domain "
	      "name" } },
	{ S, SRV PEER_A "DNS = 10.0.0.53\n", 0,
	    { "t.conf:7: DNS: belongs in [Server], not [Peer]" } },
	{ C, CLI "DNS = 10.0.0.53\n", 0,
	    { "t.conf:5: DNS: '10.0.0.53' is not yes or no" } },
	{ C, CLI "DNSSearch = corp.example\n", 0,
	    { "t.conf:5: DNSSearch: is a [Server] key, not valid in a client "
	      "config" } },
};

static void
check_bad_case(size_t idx, const struct bad_case *bc)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	size_t len = bc->len ? bc->len : strlen(bc->text), nwant = 0;
	bool ok;
	int rc;

	while (nwant < 8 && bc->want[nwant] != NULL)
		nwant++;
	rc = cfg_load_buffer("t.conf", bc->text, len, bc->role, &cfg, &errs);
	ok = rc == -1 && errs.n == nwant;
	for (size_t i = 0; ok && i < nwant; i++)
		ok = strcmp(errs.msg[i], bc->want[i]) == 0;
	if (!ok) {
		print_error("bad case %zu: rc %d\n", idx, rc);
		for (size_t i = 0; i < errs.n; i++)
			print_error("  got:  %s\n", errs.msg[i]);
		for (size_t i = 0; i < nwant; i++)
			print_error("  want: %s\n", bc->want[i]);
	}
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	assert_true(ok);
}

static void
test_bad_cases(void **state)
{
	(void)state;
	assert_true(sizeof bad_cases / sizeof bad_cases[0] >= 25);
	for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++)
		check_bad_case(i, &bad_cases[i]);
}

/* Lines of more than 1024 characters are refused; 1024 is fine. */
static void
test_long_line(void **state)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	char *text, *p;
	size_t len = strlen(SRV) + 1026 + 1025 + strlen(PEER_A);

	(void)state;
	text = malloc(len + 1);
	assert_non_null(text);
	p = stpcpy(text, SRV);
	*p++ = '#';
	memset(p, 'x', 1023);
	p += 1023;
	*p++ = '\n';
	memset(p, ' ', 1025);
	p += 1025;
	*p++ = '\n';
	p = stpcpy(p, PEER_A);
	assert_int_equal((size_t)(p - text), len);
	assert_int_equal(cfg_load_buffer("t.conf", text, len, CFG_ROLE_SERVER,
	    &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msg[0],
	    "t.conf:5: line is longer than 1024 characters");
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	free(text);
}

/* Values exactly at their limits are accepted. */
static void
test_boundaries(void **state)
{
	struct cfg cfg;

	(void)state;
	load_ok("/s.conf", "[Server]\nPrivateKeyFile = k\n"
	    "Address = 10.0.0.1/8, fd00::1/16\nMTU = 65535\n"
	    "KeepAlive = 3600\nIdleTimeout = 86400\n"
	    "Tun = abcdefghijklmno\nControlSocket = /" LONG_NAME_OK "\n"
	    "[Peer]\nName = 12345678901234567890123456789012\n"
	    "PublicKey = " PK_A "\nAddress = 10.255.255.254, fd00:ffff:ffff:"
	    "ffff:ffff:ffff:ffff:fffe\nAllowRemoteForward = 1, 65535\n"
	    "AllowForward = [::/0]:65535, 0.0.0.0/0:1\n", CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.mtu, 65535);
	assert_int_equal(cfg.keepalive, 3600);
	assert_int_equal(cfg.idle_timeout, 86400);
	assert_string_equal(cfg.tun, "abcdefghijklmno");
	assert_int_equal(strlen(cfg.control_socket), 107);
	assert_int_equal(strlen(cfg.peers[0].name), 32);
	assert_prefix(&cfg.peers[0].addrs[1],
	    "fd00:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128");
	assert_int_equal(cfg.peers[0].allow_remote_forward[1].port, 65535);
	assert_prefix(&cfg.peers[0].allow_forward[0].prefix, "::/0");
	assert_int_equal(cfg.peers[0].allow_forward[0].port, 65535);
	cfg_clear(&cfg);

	load_ok("/s.conf", "[Server]\nPrivateKeyFile = k\n"
	    "Address = 10.0.0.1/30\nMTU = 576\nKeepAlive = 0\n"
	    "IdleTimeout = 1\n" PEER_A "Address = 10.0.0.2\n",
	    CFG_ROLE_SERVER, &cfg);
	assert_int_equal(cfg.mtu, 576);
	assert_int_equal(cfg.keepalive, 0);
	assert_int_equal(cfg.idle_timeout, 1);
	cfg_clear(&cfg);
}

/* Errors from lines and from the final checks come out in line order. */
static void
test_error_order(void **state)
{
	static const char text[] =
	    "[Server]\n"                           /* 1: no PrivateKeyFile */
	    "MTU = big\n"                          /* 2 */
	    "Address = 10.77.0.1/24\n"             /* 3 */
	    "KeepAlive = 50\n"                     /* 4 */
	    "IdleTimeout = 40\n"                   /* 5: <= KeepAlive */
	    "[Peer]\n"                             /* 6 */
	    "Name = a\n"                           /* 7 */
	    "PublicKey = " PK_A "\n"               /* 8 */
	    "Address = 10.99.0.1\n"                /* 9: outside */
	    "Oops\n"                               /* 10 */
	    "[Peer]\n"                             /* 11 */
	    "Name = a\n"                           /* 12: duplicate */
	    "PublicKey = " PK_A "\n"               /* 13: duplicate */
	    "Zap = 1\n";                           /* 14 */
	static const char *const want[] = {
		"t.conf:1: missing required key PrivateKeyFile",
		"t.conf:2: MTU: 'big' is not a number",
		"t.conf:5: IdleTimeout: 40 must be greater than KeepAlive (50)",
		"t.conf:9: Address: 10.99.0.1 is outside the server's subnet "
		"10.77.0.0/24",
		"t.conf:10: missing '=' in \"Oops\"",
		"t.conf:12: Name: 'a' is already used by the peer on line 6",
		"t.conf:13: PublicKey: already used by peer 'a' on line 6",
		"t.conf:14: unknown key 'Zap' in [Peer]",
	};
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	(void)state;
	assert_int_equal(load("t.conf", text, CFG_ROLE_SERVER, &cfg, &errs),
	    -1);
	assert_int_equal(errs.n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < errs.n; i++)
		assert_string_equal(errs.msg[i], want[i]);

	/* A second parse appends to the same list, ordered on its own. */
	cfg_clear(&cfg);
	assert_int_equal(load("u.conf", "[Client]\n", CFG_ROLE_CLIENT, &cfg,
	    &errs), -1);
	assert_int_equal(errs.n, sizeof want / sizeof want[0] + 3);
	assert_string_equal(errs.msg[0], want[0]);
	assert_string_equal(errs.msg[8],
	    "u.conf:1: missing required key Server");
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	assert_int_equal(errs.n, 0);
	assert_null(errs.msg);
}

static void
write_file(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

/* rove up -L/-R/-D: ssh's syntax on top of the file's forwards. */
static void
test_options(void **state)
{
	char dir[] = "/tmp/test-cfg.XXXXXX", path[64], want[256];
	const char text[] = CLI "LocalForward = 8080 = db.example:5432\n";
	const struct cfg_option good[] = {
		{ 'L', "9000:intranet.example:80" },
		{ 'L', "127.0.0.2:9001:10.0.0.5:22" },
		{ 'L', "tcp/[::1]:9002:[fd00::5]:443" },
		{ 'R', "tcp/2222:127.0.0.1:22" },
		{ 'D', "1080" },
		{ 'D', "[::1]:1081" },
	};
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/rove.conf", dir);
	write_file(path, text, strlen(text));
	assert_int_equal(cfg_load_options(path, CFG_ROLE_CLIENT, &cfg, &errs,
	    good, sizeof good / sizeof good[0]), 0);
	assert_int_equal(errs.n, 0);
	assert_int_equal(cfg.nlocal_forward, 4);
	/* The file's first, then the options in their order. */
	assert_null(cfg.local_forward[0].bind_host);
	assert_int_equal(cfg.local_forward[0].bind_port, 8080);
	assert_string_equal(cfg.local_forward[0].target_host, "db.example");
	assert_null(cfg.local_forward[1].bind_host);
	assert_int_equal(cfg.local_forward[1].bind_port, 9000);
	assert_string_equal(cfg.local_forward[1].target_host, "intranet.example");
	assert_int_equal(cfg.local_forward[1].target_port, 80);
	assert_string_equal(cfg.local_forward[2].bind_host, "127.0.0.2");
	assert_int_equal(cfg.local_forward[2].bind_port, 9001);
	assert_string_equal(cfg.local_forward[2].target_host, "10.0.0.5");
	assert_int_equal(cfg.local_forward[2].target_port, 22);
	assert_string_equal(cfg.local_forward[3].bind_host, "::1");
	assert_int_equal(cfg.local_forward[3].bind_port, 9002);
	assert_string_equal(cfg.local_forward[3].target_host, "fd00::5");
	assert_int_equal(cfg.local_forward[3].target_port, 443);
	assert_int_equal(cfg.nremote_forward, 1);
	assert_int_equal(cfg.remote_forward[0].bind_port, 2222);
	assert_string_equal(cfg.remote_forward[0].target_host, "127.0.0.1");
	assert_int_equal(cfg.remote_forward[0].target_port, 22);
	assert_int_equal(cfg.ndynamic_forward, 2);
	assert_int_equal(cfg.dynamic_forward[0].bind_port, 1080);
	assert_string_equal(cfg.dynamic_forward[1].bind_host, "::1");
	assert_int_equal(cfg.dynamic_forward[1].bind_port, 1081);
	cfg_clear(&cfg);

	/* Every bad option is reported, after the file's own errors, by
	 * its flag and text; a clash with the file names the file's line. */
	{
		const struct cfg_option bad[] = {
			{ 'L', "8080" },
			{ 'L', "1:2:3:4:5" },
			{ 'L', "9000:host" },
			{ 'R', "x:host:22" },
			{ 'D', "99999" },
			{ 'R', "gw.example:2222:h:22" },
			{ 'L', "8080:other.example:80" },
			{ 'R', "udp/5353:127.0.0.1" },
		};
		const char *const msgs[] = {
			NULL, /* the file's error, named by its path */
			"-L 8080: not [bind:]port:host:hostport",
			"-L 1:2:3:4:5: not [bind:]port:host:hostport",
			"-L 9000:host: not [bind:]port:host:hostport",
			"-R x:host:22: RemoteForward: 'x = host:22' is not "
			    "[bind:]port = host:port",
			"-D 99999: DynamicForward: '99999' is not [bind:]port",
			"-R gw.example:2222:h:22: RemoteForward: bind address "
			    "'gw.example' is not a numeric IP address (or "
			    "localhost or *)",
			"-L 8080:other.example:80: LocalForward: port 8080 is "
			    "already used by LocalForward on line 6",
			"-R udp/5353:127.0.0.1: not [bind:]port:host:hostport",
		};
		const char bad_text[] = CLI "KeepAlive = 5000\nLocalForward = 8080 = db:1\n";

		write_file(path, bad_text, strlen(bad_text));
		assert_int_equal(cfg_load_options(path, CFG_ROLE_CLIENT, &cfg,
		    &errs, bad, sizeof bad / sizeof bad[0]), -1);
		assert_int_equal(errs.n, sizeof msgs / sizeof msgs[0]);
		snprintf(want, sizeof want,
		    "%s:5: KeepAlive: 5000 is out of range (0..3600)", path);
		assert_string_equal(errs.msg[0], want);
		for (size_t i = 1; i < errs.n; i++)
			assert_string_equal(errs.msg[i], msgs[i]);
		cfg_clear(&cfg);
		cfg_errors_clear(&errs);
	}

	/* roved keeps 16 remote-forward listeners per client: the 17th is
	 * refused here, not silently at run time. */
	{
		struct cfg_option many[CFG_MAX_REMOTE_FORWARDS + 1];
		char specs[CFG_MAX_REMOTE_FORWARDS + 1][32];

		for (size_t i = 0; i <= CFG_MAX_REMOTE_FORWARDS; i++) {
			snprintf(specs[i], sizeof specs[i], "%zu:h:22", 3000 + i);
			many[i] = (struct cfg_option){ 'R', specs[i] };
		}
		write_file(path, CLI, strlen(CLI));
		assert_int_equal(cfg_load_options(path, CFG_ROLE_CLIENT, &cfg,
		    &errs, many, CFG_MAX_REMOTE_FORWARDS), 0);
		cfg_clear(&cfg);
		assert_int_equal(cfg_load_options(path, CFG_ROLE_CLIENT, &cfg,
		    &errs, many, CFG_MAX_REMOTE_FORWARDS + 1), -1);
		assert_int_equal(errs.n, 1);
		assert_string_equal(errs.msg[0],
		    "-R 3016:h:22: RemoteForward: more than 16");
		cfg_clear(&cfg);
		cfg_errors_clear(&errs);
	}
	unlink(path);
	rmdir(dir);
}

static void
test_load_file(void **state)
{
	char dir[] = "/tmp/test-cfg.XXXXXX", path[64], want[128];
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	char *big;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/roved.conf", dir);
	write_file(path, SRV PEER_A, strlen(SRV PEER_A));
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), 0);
	assert_int_equal(errs.n, 0);
	snprintf(want, sizeof want, "%s/k", dir);
	assert_string_equal(cfg.private_key_file, want);
	assert_string_equal(cfg.path, path);
	cfg_clear(&cfg);

	/* No trailing newline, CRLF line ends. */
	write_file(path, "[Server]\r\nPrivateKeyFile = k\r\nTun = none\r\n"
	    "[Peer]\r\nName = a\r\nPublicKey = " PK_A,
	    strlen("[Server]\r\nPrivateKeyFile = k\r\nTun = none\r\n"
	    "[Peer]\r\nName = a\r\nPublicKey = " PK_A));
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), 0);
	assert_string_equal(cfg.peers[0].name, "a");
	cfg_clear(&cfg);

	write_file(path, SRV "MTU = 1\n" PEER_A,
	    strlen(SRV "MTU = 1\n" PEER_A));
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	snprintf(want, sizeof want, "%s:4: MTU: 1 is out of range (576..65535)",
	    path);
	assert_string_equal(errs.msg[0], want);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);

	/* Too large: refused before parsing. */
	big = malloc(CFG_MAX_FILE + 1);
	assert_non_null(big);
	memset(big, '\n', CFG_MAX_FILE + 1);
	write_file(path, big, CFG_MAX_FILE + 1);
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	snprintf(want, sizeof want, "%s: file is larger than %d bytes",
	    path, CFG_MAX_FILE);
	assert_string_equal(errs.msg[0], want);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	/* Exactly the limit is read and parsed. */
	write_file(path, big, CFG_MAX_FILE);
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), -1);
	assert_int_equal(errs.n, 2);
	snprintf(want, sizeof want, "%s:%d: missing [Server] section",
	    path, CFG_MAX_FILE);
	assert_string_equal(errs.msg[0], want);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	free(big);

	assert_int_equal(unlink(path), 0);
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	snprintf(want, sizeof want, "%s: No such file or directory", path);
	assert_string_equal(errs.msg[0], want);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);

	assert_int_equal(cfg_load(dir, CFG_ROLE_SERVER, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	snprintf(want, sizeof want, "%s: Is a directory", dir);
	assert_string_equal(errs.msg[0], want);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);

	/* A FIFO nobody writes to: refused at once, not waited on. */
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(cfg_load(path, CFG_ROLE_SERVER, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	snprintf(want, sizeof want, "%s: not a regular file", path);
	assert_string_equal(errs.msg[0], want);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

/* The example configs in configs/ parse, when the tests run from the
 * top of the tree (make does that); skipped otherwise. */
static void
test_example_configs(void **state)
{
	static const struct {
		const char *path;
		enum cfg_role role;
	} files[] = {
		{ "configs/roved.conf", CFG_ROLE_SERVER },
		{ "configs/rove.conf", CFG_ROLE_CLIENT },
		{ "configs/rove2.conf", CFG_ROLE_CLIENT },
	};
	char cwd[PATH_MAX], want[PATH_MAX + 64];

	(void)state;
	if (access("configs/roved.conf", R_OK) != 0)
		skip();
	assert_non_null(getcwd(cwd, sizeof cwd));
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		struct cfg cfg;
		struct cfg_errors errs = { 0 };
		char *once, *twice;

		assert_int_equal(cfg_load(files[i].path, files[i].role, &cfg,
		    &errs), 0);
		assert_int_equal(errs.n, 0);
		once = print_to_string(&cfg);
		if (i == 0) {
			snprintf(want, sizeof want,
			    "%s/configs/keys/server.key", cwd);
			assert_string_equal(cfg.private_key_file, want);
			snprintf(want, sizeof want, "%s/configs/run/roved.sock",
			    cwd);
			assert_string_equal(cfg.control_socket, want);
			assert_int_equal(cfg.npeers, 2);
			assert_int_equal(cfg.peers[0].naddrs, 2);
			assert_int_equal(cfg.peers[1].allowed_ips.n, 1);
		}
		cfg_clear(&cfg);
		assert_int_equal(load(files[i].path, once, files[i].role, &cfg,
		    &errs), 0);
		twice = print_to_string(&cfg);
		assert_string_equal(once, twice);
		cfg_clear(&cfg);
		free(once);
		free(twice);
	}
}

static void
test_table(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	/* Every key has a name, a section, help, and a consistent default. */
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		const struct cfg_key *k = &cfg_table[i];

		assert_non_null(k->name);
		assert_non_null(k->help);
		assert_true(k->sections != 0);
		assert_false((k->flags & CFG_F_REQUIRED) && k->dflt != NULL);
		if (k->type == CFG_T_NUMBER)
			assert_true(k->min <= k->max);
	}
	assert_ptr_equal(cfg_table_find("mtu", CFG_SEC_SERVER, false),
	    &cfg_table[CFG_KEY_MTU]);
	assert_null(cfg_table_find("mtu", CFG_SEC_CLIENT, false));
	assert_ptr_equal(cfg_table_find("ADDRESS", CFG_SEC_PEER, false),
	    &cfg_table[CFG_KEY_PEER_ADDRESS]);
	assert_ptr_equal(cfg_table_find("address", 0, true),
	    &cfg_table[CFG_KEY_ADDRESS]);
	assert_null(cfg_table_find("nope", 0, true));

	f = open_memstream(&buf, &len);
	assert_non_null(f);
	cfg_table_help(CFG_ROLE_CLIENT, f);
	assert_int_equal(fclose(f), 0);
	assert_non_null(strstr(buf, "[Client]\n"));
	assert_non_null(strstr(buf, "  MTU") == NULL ? buf : NULL);
	assert_non_null(strstr(buf, "  KeepAlive           seconds between "
	    "PINGs on an idle connection, 0 = off (default 15)\n"));
	assert_non_null(strstr(buf, "  ServerPublicKey     the server's public "
	    "key (base64), as printed by 'rove pubkey' (required)\n"));
	assert_null(strstr(buf, "[Peer]"));
	free(buf);
}

/* Deterministic garbage and every truncation of a valid file: each must
 * parse to 0 or -1 with errors, never crash (run under SAN=1 too). */
static void
test_robustness(void **state)
{
	static const char alphabet[] = "[]=#;,:/*.% \t\n\r\x01\xff"
	    "ServerPeerClientListenAddressMTUTunName0123456789abcdef";
	uint32_t seed = 12345;
	char buf[512];

	(void)state;
	for (size_t len = 0; len <= sizeof server_full - 1; len++) {
		struct cfg cfg;
		struct cfg_errors errs = { 0 };
		int rc = cfg_load_buffer("t", server_full, len, CFG_ROLE_SERVER,
		    &cfg, &errs);

		assert_true(rc == 0 || rc == -1);
		assert_true((rc == 0) == (errs.n == 0));
		cfg_clear(&cfg);
		cfg_errors_clear(&errs);
	}
	for (int round = 0; round < 3000; round++) {
		struct cfg cfg;
		struct cfg_errors errs = { 0 };
		size_t len;
		int rc;

		seed = seed * 1103515245 + 12345;
		len = (seed >> 8) % sizeof buf;
		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245 + 12345;
			buf[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
		}
		rc = cfg_load_buffer("t", buf, len,
		    round % 2 ? CFG_ROLE_SERVER : CFG_ROLE_CLIENT, &cfg, &errs);
		assert_true(rc == -1 || rc == 0);
		for (size_t i = 0; i < errs.n; i++)
			assert_true(strncmp(errs.msg[i], "t:", 2) == 0);
		cfg_clear(&cfg);
		cfg_errors_clear(&errs);
	}
}

/* Thousands of peers, with duplicates among them far apart: the same
 * errors, in line order, as for two peers. Each peer is four lines (its
 * header on line 4 + 4i): p100, p200 and p300 are all named "dup", p1500
 * has p7's key, p2000 p1000's address, p2500 p10's name and address, and
 * p2999 p5's name. */
static void
test_many_peers(void **state)
{
	enum { N = 3000 };
	size_t cap = 64 + N * 128, len = 0;
	char *text = malloc(cap), name[32], key[KEY_B64_LEN + 1];
	struct cfg_errors errs = { 0 };
	struct cfg cfg;
	const char *want[] = {
		"t:805: Name: 'dup' is already used by the peer on line 404",
		"t:1205: Name: 'dup' is already used by the peer on line 404",
		"t:6006: PublicKey: already used by peer 'p7' on line 32",
		"t:8007: Address: 10.77.5.1/32 is already used by peer 'p1000' "
		    "on line 4004",
		"t:10005: Name: 'p10' is already used by the peer on line 44",
		"t:10007: Address: 10.77.1.11/32 is already used by peer 'p10' "
		    "on line 44",
		"t:12001: Name: 'p5' is already used by the peer on line 24",
	};

	(void)state;
	assert_non_null(text);
	len += (size_t)snprintf(text + len, cap - len,
	    "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/16\n");
	for (int i = 0; i < N; i++) {
		uint8_t k[KEY_LEN] = { 0 };
		int a = i == 2000 ? 1000 : i == 2500 ? 10 : i;
		int kn = i == 1500 ? 7 : i;

		if (i == 100 || i == 200 || i == 300)
			snprintf(name, sizeof name, "dup");
		else
			snprintf(name, sizeof name, "p%d", i == 2500 ? 10 :
			    i == 2999 ? 5 : i);
		k[0] = (uint8_t)(kn >> 8);
		k[1] = (uint8_t)kn;
		k[31] = 0x5a;
		key_encode(k, key);
		len += (size_t)snprintf(text + len, cap - len, "[Peer]\n"
		    "Name = %s\nPublicKey = %s\nAddress = 10.77.%d.%d/32\n",
		    name, key, 1 + a / 250, 1 + a % 250);
		assert_true(len < cap);
	}
	assert_int_equal(cfg_load_buffer("t", text, len, CFG_ROLE_SERVER, &cfg,
	    &errs), -1);
	assert_int_equal(errs.n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < errs.n; i++)
		assert_string_equal(errs.msg[i], want[i]);
	cfg_clear(&cfg);
	cfg_errors_clear(&errs);
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_full),
		cmocka_unit_test(test_client_full),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_default_socket_user),
		cmocka_unit_test(test_relative_paths),
		cmocka_unit_test(test_print_roundtrip),
		cmocka_unit_test(test_proxy),
		cmocka_unit_test(test_server_ports),
		cmocka_unit_test(test_dns),
		cmocka_unit_test(test_remote_bind),
		cmocka_unit_test(test_allow_remote_forward),
		cmocka_unit_test(test_local_forward_udp),
		cmocka_unit_test(test_allow_forward_proto),
		cmocka_unit_test(test_bad_cases),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_error_order),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_example_configs),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_robustness),
		cmocka_unit_test(test_many_peers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

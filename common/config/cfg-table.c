/* The one table of configuration keys: section, type, range, default, help. */
#include <stddef.h>
#include <stdio.h>
#include <strings.h>

#include "cfg-table.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define SEC_MAIN (CFG_SEC_SERVER | CFG_SEC_CLIENT)
#define CFG(f) offsetof(struct cfg, f)
#define PEER(f) offsetof(struct cfg_peer, f)

const struct cfg_key cfg_table[CFG_KEY_COUNT] = {
	[CFG_KEY_LISTEN] = {
		"Listen", CFG_SEC_SERVER, CFG_T_LISTEN, CFG_F_REPEAT, 0, 0,
		CFG(listen), CFG(nlisten), "0.0.0.0:" STR(CFG_DEFAULT_PORT),
		"UDP address:port to listen on (numeric; [v6]:port); "
		"repeatable",
	},
	[CFG_KEY_LISTEN_TCP] = {
		"ListenTCP", CFG_SEC_SERVER, CFG_T_LISTEN, CFG_F_REPEAT, 0, 0,
		CFG(listen_tcp), CFG(nlisten_tcp), NULL,
		"TCP address[:port] (443 if none) for clients whose UDP is "
		"blocked (TLS over TCP); repeatable; unset: none",
	},
	[CFG_KEY_SERVER] = {
		"Server", CFG_SEC_CLIENT, CFG_T_ENDPOINT, CFG_F_REQUIRED, 0, 0,
		CFG(server_host), CFG(server_port), NULL,
		"the roved to connect to: host[:port], host a name or address",
	},
	[CFG_KEY_SERVER_PORTS] = {
		"ServerPorts", CFG_SEC_CLIENT, CFG_T_PORTS, 0, 0, 0,
		CFG(server_ports_first), CFG(server_ports_last), NULL,
		"first-last: UDP ports that all reach roved (an nftables "
		"redirect there), Server's among them; a move away from a "
		"silent path goes to another; unset: Server's port only",
	},
	[CFG_KEY_SERVER_TCP] = {
		"ServerTCP", CFG_SEC_CLIENT, CFG_T_ENDPOINT, 0, 0, 0,
		CFG(server_tcp_host), CFG(server_tcp_port), NULL,
		"the server's ListenTCP: host[:port] (port 443 if none); "
		"default: Server's host on port 443",
	},
	[CFG_KEY_SERVER_NAME] = {
		"ServerName", CFG_SEC_CLIENT, CFG_T_HOSTNAME, 0, 0, 0,
		CFG(server_name), 0, NULL,
		"the name sent as SNI over TLS on TCP (for a proxy that routes "
		"by it); default: ServerTCP's host, when a name",
	},
	[CFG_KEY_TRANSPORT] = {
		"Transport", CFG_SEC_CLIENT, CFG_T_TRANSPORT, 0, 0, 0,
		CFG(transport), 0, "auto",
		"auto (QUIC, TLS over TCP while UDP is blocked), quic or tcp",
	},
	[CFG_KEY_PROXY] = {
		"Proxy", CFG_SEC_CLIENT, CFG_T_PROXY, 0, 0, 0,
		CFG(proxy), 0, "none",
		"TLS over TCP through a proxy: http://[user:password@]host:port, "
		"socks5://[user:password@]host:port, none, or env (https_proxy, "
		"all_proxy and no_proxy as curl reads them)",
	},
	[CFG_KEY_SERVER_PUBLIC_KEY] = {
		"ServerPublicKey", CFG_SEC_CLIENT, CFG_T_PUBKEY, CFG_F_REQUIRED,
		0, 0, CFG(server_pubkey), 0, NULL,
		"the server's public key (base64), as printed by 'rove pubkey'",
	},
	[CFG_KEY_PRIVATE_KEY_FILE] = {
		"PrivateKeyFile", SEC_MAIN, CFG_T_PATH, CFG_F_REQUIRED, 0, 0,
		CFG(private_key_file), 0, NULL,
		"file holding this side's private key (mode 0600)",
	},
	[CFG_KEY_TUN] = {
		"Tun", SEC_MAIN, CFG_T_TUN, 0, 0, 0, CFG(tun), 0, "rove0",
		"TUN interface name, or none for forwarding only",
	},
	[CFG_KEY_ADDRESS] = {
		"Address", CFG_SEC_SERVER, CFG_T_IFADDRS, 0, 0, 0, CFG(addrs),
		CFG(naddrs), NULL,
		"server tunnel addresses with prefix length (one IPv4, one "
		"IPv6); the rest of each subnet is the peers' pool",
	},
	[CFG_KEY_MTU] = {
		"MTU", CFG_SEC_SERVER, CFG_T_NUMBER, 0, 576, 65535, CFG(mtu), 0,
		STR(CFG_DEFAULT_MTU),
		"inner (TUN) MTU; at least 1280 with an IPv6 Address",
	},
	[CFG_KEY_ROUTES] = {
		"Routes", CFG_SEC_CLIENT, CFG_T_PREFIXES, CFG_F_EMPTY, 0, 0,
		CFG(routes), 0, NULL,
		"prefixes sent through the tunnel",
	},
	[CFG_KEY_DNS] = {
		"DNS", CFG_SEC_SERVER, CFG_T_DNSADDRS, CFG_F_REPEAT, 0, 0,
		CFG(dns_servers), CFG(ndns_servers), NULL,
		"DNS server addresses the clients use while connected (at "
		"most " STR(CFG_MAX_DNS) "); repeatable",
	},
	[CFG_KEY_DNS_SEARCH] = {
		"DNSSearch", CFG_SEC_SERVER, CFG_T_DOMAINS, CFG_F_REPEAT, 0, 0,
		CFG(dns_search), CFG(ndns_search), NULL,
		"search domains the clients use while connected (at most "
		STR(CFG_MAX_DNS_SEARCH) "); repeatable",
	},
	[CFG_KEY_CLIENT_DNS] = {
		"DNS", CFG_SEC_CLIENT, CFG_T_BOOL, 0, 0, 0, CFG(dns), 0, "yes",
		"use the server's DNS servers and search domains while the "
		"tunnel is up (systemd-resolved, else resolvconf)",
	},
	[CFG_KEY_STATE_DIR] = {
		"StateDir", SEC_MAIN, CFG_T_PATH, 0, 0, 0, CFG(state_dir), 0,
		"/var/lib/rove",
		"directory for session tickets and persistent keys",
	},
	[CFG_KEY_CONTROL_SOCKET] = {
		"ControlSocket", SEC_MAIN, CFG_T_PATH, CFG_F_SOCKET, 0, 0,
		CFG(control_socket), 0, NULL,
		"unix socket for 'rove status' (default /run/rove/NAME.sock "
		"as root, else under $XDG_RUNTIME_DIR/rove or /tmp/rove-UID)",
	},
	[CFG_KEY_USER] = {
		"User", SEC_MAIN, CFG_T_USER, 0, 0, 0, CFG(user), 0, NULL,
		"when started as root: the user to run as once set up, with "
		"only the capabilities still needed",
	},
	[CFG_KEY_GROUP] = {
		"Group", SEC_MAIN, CFG_T_GROUP, 0, 0, 0, CFG(group), 0, NULL,
		"the group to run as with User (default: the user's primary "
		"group)",
	},
	[CFG_KEY_KEEPALIVE] = {
		"KeepAlive", SEC_MAIN, CFG_T_NUMBER, 0, 0, 3600,
		CFG(keepalive), 0, STR(CFG_DEFAULT_KEEPALIVE),
		"seconds between PINGs on an idle connection, 0 = off",
	},
	[CFG_KEY_IDLE_TIMEOUT] = {
		"IdleTimeout", SEC_MAIN, CFG_T_NUMBER, 0, 1, 86400,
		CFG(idle_timeout), 0, STR(CFG_DEFAULT_IDLE_TIMEOUT),
		"seconds of silence before a connection is dropped; more than "
		"KeepAlive",
	},
	[CFG_KEY_CONGESTION] = {
		"Congestion", SEC_MAIN, CFG_T_CONGESTION, 0, 0, 0,
		CFG(congestion), 0, "bbr",
		"congestion controller: cubic or bbr",
	},
	[CFG_KEY_KEY_EXCHANGE] = {
		"KeyExchange", SEC_MAIN, CFG_T_KEY_EXCHANGE, 0, 0, 0,
		CFG(key_exchange), 0, "hybrid",
		"TLS key exchange: hybrid (X25519MLKEM768, X25519 for peers "
		"without it), classic (X25519) or pq-required "
		"(X25519MLKEM768 only)",
	},
	[CFG_KEY_OFFLOAD] = {
		"Offload", SEC_MAIN, CFG_T_AUTO_OFF, 0, 0, 0,
		CFG(offload), 0, "auto",
		"TUN checksum and segmentation offloads: auto or off",
	},
	[CFG_KEY_LOSS_RECOVERY] = {
		"LossRecovery", SEC_MAIN, CFG_T_AUTO_OFF, 0, 0, 0,
		CFG(loss_recovery), 0, "auto",
		"repair packets the IP tunnel loses on the path (forward "
		"error correction, sized to the loss): auto or off",
	},
	[CFG_KEY_LOCAL_FORWARD] = {
		"LocalForward", CFG_SEC_CLIENT, CFG_T_FORWARD, CFG_F_REPEAT, 0,
		0, CFG(local_forward), CFG(nlocal_forward), NULL,
		"[bind:]port = host:port: listen here, connect from the server",
	},
	[CFG_KEY_REMOTE_FORWARD] = {
		"RemoteForward", CFG_SEC_CLIENT, CFG_T_FORWARD, CFG_F_REPEAT, 0,
		0, CFG(remote_forward), CFG(nremote_forward), NULL,
		"[bind:]port = host:port: the server listens, we connect",
	},
	[CFG_KEY_DYNAMIC_FORWARD] = {
		"DynamicForward", CFG_SEC_CLIENT, CFG_T_DYNAMIC, CFG_F_REPEAT,
		0, 0, CFG(dynamic_forward), CFG(ndynamic_forward), NULL,
		"[bind:]port: a SOCKS5 proxy whose connections leave the "
		"server",
	},
	[CFG_KEY_FORWARD_BUFFER] = {
		"ForwardBuffer", SEC_MAIN, CFG_T_NUMBER, 0, 16384, 67108864,
		CFG(forward_buffer), 0, STR(CFG_DEFAULT_FORWARD_BUFFER),
		"bytes each forwarded connection may hold in each direction "
		"(also its stream's flow-control window)",
	},
	[CFG_KEY_MAX_FORWARDS] = {
		"MaxForwards", SEC_MAIN, CFG_T_NUMBER, 0, 1, 65535,
		CFG(max_forwards), 0, STR(CFG_DEFAULT_MAX_FORWARDS),
		"concurrent forwarded connections per peer; more are refused",
	},
	[CFG_KEY_FORWARD_WAIT] = {
		"ForwardWait", CFG_SEC_CLIENT, CFG_T_NUMBER, 0, 0, 3600,
		CFG(forward_wait), 0, STR(CFG_DEFAULT_FORWARD_WAIT),
		"seconds a connection to a LocalForward or DynamicForward may "
		"wait for the session (start-up, reconnect) before it is "
		"closed; 0 = close at once",
	},
	[CFG_KEY_FORWARD_WAIT_MAX] = {
		"ForwardWaitMax", CFG_SEC_CLIENT, CFG_T_NUMBER, 0, 1, 65535,
		CFG(forward_wait_max), 0, STR(CFG_DEFAULT_FORWARD_WAIT_MAX),
		"connections that may wait for the session at once; more are "
		"closed",
	},
	[CFG_KEY_ZERO_RTT] = {
		"ZeroRTT", SEC_MAIN, CFG_T_BOOL, 0, 0, 0, CFG(zero_rtt), 0, "yes",
		"resume with 0-RTT: a reconnecting client's IP packets and the "
		"opening bytes of its forwards travel in its first flight "
		"(server: accept it)",
	},
	[CFG_KEY_RETRY_THRESHOLD] = {
		"RetryThreshold", CFG_SEC_SERVER, CFG_T_NUMBER, 0, 0,
		CFG_MAX_RETRY_THRESHOLD, CFG(retry_threshold), 0,
		STR(CFG_DEFAULT_RETRY_THRESHOLD),
		"handshakes under way beyond which a new client must first "
		"answer a Retry (prove its address); 0 = always",
	},
	[CFG_KEY_WORKERS] = {
		"Workers", CFG_SEC_SERVER, CFG_T_NUMBER, 0, 1, CID_WORKERS_MAX,
		CFG(workers), 0, "1",
		"processes serving the listeners, each owning its connections "
		"(the kernel steers each datagram to its owner by connection "
		"ID); 1 = one process",
	},
	[CFG_KEY_SERVER_ID] = {
		"ServerID", CFG_SEC_SERVER, CFG_T_SERVER_ID, 0, 0, 0,
		CFG(server_id), 0, NULL,
		"this server's ID in its group (1 to 3 octets in hex): it "
		"goes into every connection ID, where a load balancer reads "
		"it (QUIC-LB layout); unset: no group",
	},
	[CFG_KEY_SERVER_ID_CONFIG] = {
		"ServerIDConfig", CFG_SEC_SERVER, CFG_T_NUMBER, 0, 0,
		CID_CONFIG_MAX, CFG(server_id_config), 0, "0",
		"the QUIC-LB config rotation codepoint of the connection IDs "
		"(top 3 bits of the first octet); 4 with a 3-octet ServerID "
		"is also Katran's CID version 2",
	},
	[CFG_KEY_KEY_DIR] = {
		"KeyDir", CFG_SEC_SERVER, CFG_T_PATH, 0, 0, 0, CFG(key_dir), 0,
		NULL,
		"directory of the ticket, token and stateless-reset keys, "
		"shared by a group of servers (each with its own ServerID) "
		"so that a client resumes with 0-RTT on any of them; unset: "
		"StateDir",
	},
	[CFG_KEY_FORWARD_MEMORY] = {
		"ForwardMemory", SEC_MAIN, CFG_T_NUMBER, 0, 65536, 2147483647,
		CFG(forward_memory), 0, STR(CFG_DEFAULT_FORWARD_MEMORY),
		"bytes all forwards of one connection may hold until the peer "
		"acknowledges them",
	},
	[CFG_KEY_FORWARD_MEMORY_TOTAL] = {
		"ForwardMemoryTotal", CFG_SEC_SERVER, CFG_T_NUMBER, 0, 65536,
		2147483647, CFG(forward_memory_total), 0,
		STR(CFG_DEFAULT_FORWARD_MEMORY_TOTAL),
		"bytes the forwards of all peers together may hold until "
		"acknowledged",
	},
	[CFG_KEY_SYSLOG] = {
		"Syslog", SEC_MAIN, CFG_T_BOOL, 0, 0, 0, CFG(syslog), 0, "no",
		"log through syslog(3) (facility daemon) instead of stderr, "
		"as -s does; configuration errors still go to stderr",
	},
	[CFG_KEY_METRICS_LISTEN] = {
		"MetricsListen", SEC_MAIN, CFG_T_ADDRPORT, 0, 0, 0,
		CFG(metrics_listen), CFG(metrics_listen_len), NULL,
		"numeric ADDR:PORT to serve Prometheus metrics on at /metrics "
		"(HTTP); unset: off",
	},
	[CFG_KEY_METRICS_CONNECTIONS] = {
		"MetricsConnections", SEC_MAIN, CFG_T_NUMBER, 0, 1, 65536,
		CFG(metrics_connections), 0,
		STR(CFG_DEFAULT_METRICS_CONNECTIONS),
		"HTTP connections MetricsListen holds open at once; more are "
		"closed as they come",
	},
	[CFG_KEY_KEYLOG_FILE] = {
		"KeyLogFile", SEC_MAIN, CFG_T_PATH, 0, 0, 0, CFG(keylog_file), 0,
		NULL, "debugging: append every connection's TLS secrets here "
		"(NSS key log format, for Wireshark); unset: off",
	},
	[CFG_KEY_QLOG_DIR] = {
		"QlogDir", SEC_MAIN, CFG_T_PATH, 0, 0, 0, CFG(qlog_dir), 0, NULL,
		"debugging: write a qlog file per connection into this "
		"directory (at most 16 MiB each); unset: off",
	},
	[CFG_KEY_PEER_NAME] = {
		"Name", CFG_SEC_PEER, CFG_T_NAME, CFG_F_REQUIRED, 0, 0,
		PEER(name), 0, NULL,
		"unique peer name: 1..32 of A-Z a-z 0-9 . _ -",
	},
	[CFG_KEY_PEER_PUBLIC_KEY] = {
		"PublicKey", CFG_SEC_PEER, CFG_T_PUBKEY, CFG_F_REQUIRED, 0, 0,
		PEER(pubkey), 0, NULL,
		"the peer's public key (base64); unique",
	},
	[CFG_KEY_PEER_ADDRESS] = {
		"Address", CFG_SEC_PEER, CFG_T_HOSTADDRS, 0, 0, 0, PEER(addrs),
		PEER(naddrs), NULL,
		"static tunnel addresses (/32, /128) inside the server's "
		"subnets; default: from the pool",
	},
	[CFG_KEY_PEER_ALLOWED_IPS] = {
		"AllowedIPs", CFG_SEC_PEER, CFG_T_PREFIXES, CFG_F_EMPTY, 0, 0,
		PEER(allowed_ips), 0, NULL,
		"further prefixes routed to this peer (a site behind it)",
	},
	[CFG_KEY_PEER_ALLOW_FORWARD] = {
		"AllowForward", CFG_SEC_PEER, CFG_T_FWDRULES, CFG_F_EMPTY, 0, 0,
		PEER(allow_forward), PEER(nallow_forward), NULL,
		"targets the peer may reach by forwarding: prefix:port, "
		"[v6prefix]:port or name:port; port * = any",
	},
	[CFG_KEY_PEER_ALLOW_REMOTE_FORWARD] = {
		"AllowRemoteForward", CFG_SEC_PEER, CFG_T_REMOTE_RULES,
		CFG_F_EMPTY, 0, 0, PEER(allow_remote_forward),
		PEER(nallow_remote_forward), NULL,
		"ports the peer may ask the server to listen on, on its "
		"loopback addresses: PORT; elsewhere too: ADDR:PORT, "
		"[v6]:PORT (0.0.0.0, :: any of that family) or *:PORT",
	},
};

const struct cfg_key *
cfg_table_find(const char *name, unsigned section, bool any)
{
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		const struct cfg_key *k = &cfg_table[i];

		if (strcasecmp(k->name, name) == 0 &&
		    (any || (k->sections & section)))
			return k;
	}
	return NULL;
}

void
cfg_table_help(enum cfg_role role, FILE *f)
{
	static const struct {
		unsigned sec;
		const char *name;
	} secs[] = {
		{ CFG_SEC_SERVER, "Server" },
		{ CFG_SEC_PEER, "Peer" },
		{ CFG_SEC_CLIENT, "Client" },
	};
	unsigned want = role == CFG_ROLE_SERVER ?
	    CFG_SEC_SERVER | CFG_SEC_PEER : CFG_SEC_CLIENT;

	for (size_t s = 0; s < sizeof secs / sizeof secs[0]; s++) {
		if (!(secs[s].sec & want))
			continue;
		fprintf(f, "[%s]\n", secs[s].name);
		for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
			const struct cfg_key *k = &cfg_table[i];

			if (!(k->sections & secs[s].sec))
				continue;
			fprintf(f, "  %-19s %s", k->name, k->help);
			if (k->flags & CFG_F_REQUIRED)
				fprintf(f, " (required)");
			else if (k->dflt != NULL)
				fprintf(f, " (default %s)", k->dflt);
			fputc('\n', f);
		}
	}
}

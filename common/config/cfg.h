/* Configuration: the INI-style files of roved ([Server], [Peer]) and rove
 * ([Client]). Keys start unset; defaults are filled in after parsing
 * (cfg_parse_finish in cfg-table.h), e.g. Listen = 0.0.0.0:4433. */
#ifndef ROVE_CFG_H
#define ROVE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/addr.h"
#include "wire/cid.h"
#include "wire/proto-fwd.h"
#include "wire/proxy.h"

enum cfg_role { CFG_ROLE_SERVER, CFG_ROLE_CLIENT };
enum cfg_congestion { CFG_CC_CUBIC, CFG_CC_BBR };
/* A feature used where it helps (TUN offloads: whatever the kernel
 * accepts; loss recovery: while the path loses packets), or never. */
enum cfg_auto_off { CFG_AUTO, CFG_OFF };
/* Client: how to reach the server, QUIC or TLS over TCP (or each as the
 * network allows). */
enum cfg_transport { CFG_TRANSPORT_AUTO, CFG_TRANSPORT_QUIC, CFG_TRANSPORT_TCP };
/* The TLS key exchange: X25519MLKEM768 first with X25519 for peers that
 * lack it, X25519 alone, or X25519MLKEM768 alone. */
enum cfg_key_exchange { CFG_KEX_HYBRID, CFG_KEX_CLASSIC, CFG_KEX_PQ_REQUIRED };

#define CFG_DEFAULT_PORT 4433
/* ServerTCP's port when it names none, or when it is not set at all. */
#define CFG_DEFAULT_TCP_PORT 443
#define CFG_DEFAULT_MTU 1380
#define CFG_DEFAULT_KEEPALIVE 15
#define CFG_DEFAULT_IDLE_TIMEOUT 120
/* A forward's buffer bounds what its stream has unacknowledged. BBR's
 * start-up keeps going until in flight stops raising the delivery rate,
 * which takes some 2-3 times the path's BDP: 200 Mbit/s over 150 ms with
 * a BDP of queue fills 7.5 MB, and at 8 MiB start-up was held back by the
 * buffer (its samples app-limited, so never ending on the plateau) for
 * 5 s, with loss (test-quic-path). */
#define CFG_DEFAULT_FORWARD_BUFFER 16777216
#define CFG_DEFAULT_MAX_FORWARDS 256
#define CFG_DEFAULT_FORWARD_WAIT 10
#define CFG_DEFAULT_FORWARD_WAIT_MAX 128
/* Half-open handshakes beyond which clients must first answer a Retry. */
#define CFG_DEFAULT_RETRY_THRESHOLD 16
#define CFG_MAX_RETRY_THRESHOLD 256
/* Forwarded bytes one peer may hold unacknowledged, and all peers. */
#define CFG_DEFAULT_FORWARD_MEMORY 67108864
#define CFG_DEFAULT_FORWARD_MEMORY_TOTAL 536870912
/* HTTP connections MetricsListen holds open at once. */
#define CFG_DEFAULT_METRICS_CONNECTIONS 32
#define CFG_MAX_LISTEN 8
#define CFG_MAX_REMOTE_FORWARDS 16 /* listeners roved keeps per session */
#define CFG_MAX_ADDRS 2 /* at most one IPv4 and one IPv6 */
#define CFG_MAX_DNS 8        /* DNS servers pushed to clients */
#define CFG_MAX_DNS_SEARCH 8 /* search domains pushed to clients */

struct cfg_prefix_list {
	struct prefix *v;
	size_t n;
};

/* An AllowForward rule: a prefix or a DNS name, and a port (0 = any), for
 * TCP forwards, or with a "udp/" prefix for UDP flows only ("tcp/" is
 * accepted and means no prefix): a rule never admits the other protocol. */
struct cfg_forward_rule {
	bool udp;
	bool is_name;
	struct prefix prefix; /* when !is_name */
	char *name;           /* when is_name, lower-case */
	uint16_t port;
};

struct cfg_peer;

/* An AllowRemoteForward entry: a port, and where on the server a remote
 * forward may listen on it. "PORT": its loopback addresses only
 * (PROTO_RBIND_DEFAULT); "*:PORT": any address (PROTO_RBIND_ALL);
 * "ADDR:PORT" or "[v6]:PORT": that address, where 0.0.0.0 stands for any
 * IPv4 address and :: for any IPv6 one (PROTO_RBIND_ADDR). Loopback is
 * allowed on every port listed. TCP remote forwards, or with a "udp/"
 * prefix UDP ones only ("tcp/" means no prefix): an entry never admits
 * the other protocol. */
struct cfg_remote_rule {
	bool udp;
	enum proto_remote_bind bind;
	struct ipaddr addr; /* when bind is PROTO_RBIND_ADDR */
	uint16_t port;
};

/* LocalForward / RemoteForward: "[bind:]port = host:port". */
struct cfg_forward {
	char *bind_host; /* NULL = loopback (RemoteForward: the server's
	                  * loopback; "*" there: all its addresses) */
	uint16_t bind_port;
	char *target_host;
	uint16_t target_port;
	bool udp;      /* udp/: a UDP LocalForward or RemoteForward */
	unsigned line; /* in the config file, for messages */
};

/* Forwards listening on the same address and port (NULL host: loopback),
 * and forwards reaching the same target. */
bool cfg_forward_same_bind(const struct cfg_forward *, const struct cfg_forward *);
bool cfg_forward_same_target(const struct cfg_forward *, const struct cfg_forward *);
/* Whether `peer`'s AllowForward admits a target of protocol `udp` (false:
 * TCP): address `a` (IPv4-mapped made IPv4 by the caller) on `port`, by a
 * prefix rule; or, by a name rule, the name `name` as asked (any case)
 * whatever it resolves to. Only rules of that protocol count. */
bool cfg_forward_addr_allowed(const struct cfg_peer *peer, bool udp,
    const struct ipaddr *a, uint16_t port);
bool cfg_forward_name_allowed(const struct cfg_peer *peer, bool udp,
    const char *name, uint16_t port);
/* A RemoteForward as a request names it on the wire: its port, bind
 * address (none, "*", or an address, IPv4-mapped made IPv4) and
 * protocol. */
void cfg_forward_remote(const struct cfg_forward *, struct proto_remote_forward *);
/* Whether `peer`'s AllowRemoteForward lets the server listen where `want`
 * asks (its port, bind address and protocol: only entries of that
 * protocol count; the status is not looked at). */
bool cfg_remote_allowed(const struct cfg_peer *peer,
    const struct proto_remote_forward *want);
/* 127.0.0.0/8 and ::1 (IPv4-mapped made IPv4 first). */
bool cfg_addr_loopback(const struct ipaddr *);
/* KeyExchange's spelling of `kex`: hybrid, classic or pq-required. */
const char *cfg_key_exchange_name(enum cfg_key_exchange kex);

struct cfg_peer {
	char *name;
	uint8_t pubkey[32];
	struct prefix addrs[CFG_MAX_ADDRS]; /* static tunnel addresses, /32 or /128 */
	size_t naddrs;
	struct cfg_prefix_list allowed_ips;
	struct cfg_forward_rule *allow_forward;
	size_t nallow_forward;
	struct cfg_remote_rule *allow_remote_forward;
	size_t nallow_remote_forward;
	unsigned line; /* of its [Peer] header, for messages */
};

struct cfg {
	enum cfg_role role;
	char *path;

	/* Both roles. */
	char *private_key_file;
	char *tun;             /* interface name; NULL when "none" */
	char *state_dir;
	char *control_socket;
	uint32_t keepalive;    /* seconds, 0 = off */
	uint32_t idle_timeout; /* seconds */
	enum cfg_congestion congestion;
	enum cfg_key_exchange key_exchange;
	enum cfg_auto_off offload;
	enum cfg_auto_off loss_recovery; /* repairs for the IP tunnel */
	uint32_t forward_buffer; /* bytes per direction per forward */
	uint32_t max_forwards;   /* concurrent forwards per peer */
	uint32_t forward_wait;   /* client: seconds a connection waits for
	                          * the session, 0 = none */
	uint32_t forward_wait_max; /* client: connections waiting at once */
	uint32_t retry_threshold; /* server: see CFG_DEFAULT_RETRY_THRESHOLD */
	struct cid_server_id server_id; /* server: ServerID; len 0: none;
	                          * .config from ServerIDConfig */
	uint32_t server_id_config;
	uint32_t workers;        /* server: Workers */
	char *key_dir;           /* server: KeyDir; NULL: state_dir */
	uint32_t forward_memory;  /* bytes per connection, see above */
	uint32_t forward_memory_total; /* server: bytes in all */
	bool zero_rtt;           /* send / accept 0-RTT on resumption */
	bool syslog;             /* log to syslog(3), not stderr */
	struct sockaddr_storage metrics_listen; /* MetricsListen */
	socklen_t metrics_listen_len;           /* 0: no metrics */
	uint32_t metrics_connections;  /* MetricsConnections */
	char *keylog_file;       /* KeyLogFile; NULL: none */
	char *qlog_dir;          /* QlogDir; NULL: none */
	bool dns;                /* client: apply the server's DNS (DNS) */
	char *user;              /* User: run as this after setup; NULL = stay */
	char *group;             /* Group as given; NULL = User's primary group */
	uid_t uid;               /* User's, looked up while parsing */
	gid_t gid;               /* Group's, else User's primary group */
	unsigned user_line;      /* lines of User and Group, for messages */
	unsigned group_line;

	/* [Server] */
	struct sockaddr_storage listen[CFG_MAX_LISTEN];
	socklen_t listen_len[CFG_MAX_LISTEN];
	size_t nlisten;
	struct sockaddr_storage listen_tcp[CFG_MAX_LISTEN]; /* ListenTCP */
	socklen_t listen_tcp_len[CFG_MAX_LISTEN];
	size_t nlisten_tcp;
	/* The line of each (0: the default), for a bind error at start. */
	unsigned listen_line[CFG_MAX_LISTEN];
	unsigned listen_tcp_line[CFG_MAX_LISTEN];
	struct prefix addrs[CFG_MAX_ADDRS]; /* server tunnel addresses with pool length */
	size_t naddrs;
	uint32_t mtu;
	struct ipaddr dns_servers[CFG_MAX_DNS]; /* DNS: pushed to clients */
	size_t ndns_servers;
	char *dns_search[CFG_MAX_DNS_SEARCH];   /* DNSSearch, lower-case */
	size_t ndns_search;
	struct cfg_peer *peers;
	size_t npeers;

	/* [Client] */
	char *server_host; /* name or address, no brackets */
	uint16_t server_port;
	/* ServerPorts: UDP ports that all reach roved (0: none), among
	 * them server_port; a move from a silent path takes another. */
	uint16_t server_ports_first, server_ports_last;
	char *server_tcp_host; /* ServerTCP; default: server_host */
	uint16_t server_tcp_port;
	char *server_name; /* ServerName: SNI over TCP; NULL: none set */
	enum cfg_transport transport;
	/* Proxy: how TLS over TCP goes out (PROXY_ENV: chosen at start). The
	 * password is only ever printed masked (proxy_url_masked). */
	struct proxy_url proxy;
	uint8_t server_pubkey[32];
	struct cfg_prefix_list routes;
	struct cfg_forward *local_forward;
	size_t nlocal_forward;
	struct cfg_forward *remote_forward;
	size_t nremote_forward;
	struct cfg_forward *dynamic_forward; /* target unused */
	size_t ndynamic_forward;
};

/* Errors collected while parsing: each one "FILE:LINE: message". */
struct cfg_errors {
	char **msg;
	size_t n;
};

/* Parse the file at `path` for `role` into `cfg`. Every problem found is
 * appended to `errs`. Returns 0 when the file is valid, -1 otherwise (the
 * caller prints each of errs->msg, then exits non-zero). On -1, `cfg` holds
 * whatever parsed and must still be released with cfg_clear. */
int cfg_load(const char *path, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs);

/* The same over a buffer, for tests and fuzzing; `path` names it in errors. */
int cfg_load_buffer(const char *path, const char *buf, size_t len,
    enum cfg_role role, struct cfg *cfg, struct cfg_errors *errs);

/* A forward given on rove's command line, in ssh's syntax: -L and -R take
 * "[bind:]port:host:hostport", -D "[bind:]port" (IPv6 addresses in
 * brackets). They add to the config file's forwards; an error reads
 * "-L SPEC: message". */
struct cfg_option {
	char flag;         /* 'L', 'R' or 'D' */
	const char *spec;
};

/* cfg_load, then the options (client role only). */
int cfg_load_options(const char *path, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs, const struct cfg_option *opts, size_t nopts);
/* The file's bytes as cfg_load_options reads them (a regular file, not
 * writable by everyone, at most CFG_MAX_FILE bytes): 0 with *buf
 * malloc'd, or -1 with the reason in errs. */
int cfg_read_file(const char *path, char **buf, size_t *len,
    struct cfg_errors *errs);
/* cfg_load_options over bytes already read (cfg_read_file); `path`
 * names them in errors. */
int cfg_load_buffer_options(const char *path, const char *buf, size_t len,
    enum cfg_role role, struct cfg *cfg, struct cfg_errors *errs,
    const struct cfg_option *opts, size_t nopts);
/* The same over `text` made from the command line (rove up --server);
 * `name` stands for the file in errors. */
int cfg_load_text_options(const char *name, const char *text,
    enum cfg_role role, struct cfg *cfg, struct cfg_errors *errs,
    const struct cfg_option *opts, size_t nopts);

/* The ControlSocket used when a config names none (malloc'd): under /run
 * as root, else under $XDG_RUNTIME_DIR or /tmp, per user. */
char *cfg_default_socket(enum cfg_role role);

void cfg_clear(struct cfg *);
/* Deep copies of one [Peer] and one forward, owned by the caller (which
 * frees them with the matching _clear), for a program that keeps them
 * past the struct cfg they came from. */
void cfg_peer_copy(struct cfg_peer *dst, const struct cfg_peer *src);
void cfg_peer_clear(struct cfg_peer *);
void cfg_forward_copy(struct cfg_forward *dst, const struct cfg_forward *src);
void cfg_forward_clear(struct cfg_forward *);
void cfg_errors_clear(struct cfg_errors *);

/* Write the effective configuration (defaults filled in) in config syntax;
 * the output parses back to the same configuration. */
void cfg_print(const struct cfg *, FILE *);

#endif

/* The configuration key table and the line parser's context: private to
 * the parser's files (cfg.c, cfg-value.c, cfg-check.c, cfg-print.c and
 * cfg-table.c, which share more through cfg-int.h), and to harnesses
 * (fuzzers) that drive the parser line by line. Other modules use cfg.h. */
#ifndef ROVE_CFG_TABLE_H
#define ROVE_CFG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cfg.h"

#define CFG_MAX_LINE 1024 /* bytes per line, without the newline */
/* A server's file holds a [Peer] section per client: 16 MiB leaves room
 * for 10,000 peers with addresses, rules and comments many times over. */
#define CFG_MAX_FILE (16 * 1024 * 1024)

/* Sections, as a bit set so one key can live in several. */
#define CFG_SEC_SERVER (1u << 0)
#define CFG_SEC_PEER (1u << 1)
#define CFG_SEC_CLIENT (1u << 2)

/* Value types; each names the C field(s) the key's offsets point at. */
enum cfg_type {
	CFG_T_PATH,       /* char *: absolute, from the file's directory */
	CFG_T_TUN,        /* char *: interface name, NULL for "none" */
	CFG_T_NUMBER,     /* uint32_t in min..max */
	CFG_T_CONGESTION, /* enum cfg_congestion */
	CFG_T_AUTO_OFF,    /* enum cfg_auto_off */
	CFG_T_TRANSPORT,  /* enum cfg_transport */
	CFG_T_PROXY,      /* struct proxy_url */
	CFG_T_KEY_EXCHANGE, /* enum cfg_key_exchange */
	CFG_T_BOOL,       /* bool: yes/no, true/false, on/off, 1/0 */
	CFG_T_LISTEN,     /* struct cfg listen[], listen_len[], nlisten (or
	                   * the listen_tcp ones for ListenTCP) */
	CFG_T_ADDRPORT,   /* struct sockaddr_storage + socklen_t (0: unset) */
	CFG_T_IFADDRS,    /* struct prefix[CFG_MAX_ADDRS] + size_t: addr/len */
	CFG_T_HOSTADDRS,  /* struct prefix[CFG_MAX_ADDRS] + size_t: /32, /128 */
	CFG_T_PREFIXES,   /* struct cfg_prefix_list, host bits must be zero */
	CFG_T_PUBKEY,     /* uint8_t[KEY_LEN] */
	CFG_T_NAME,       /* char *: peer name */
	CFG_T_FWDRULES,   /* struct cfg_forward_rule * + size_t */
	CFG_T_REMOTE_RULES, /* struct cfg_remote_rule * + size_t */
	CFG_T_ENDPOINT,   /* char * host + uint16_t port */
	CFG_T_FORWARD,    /* struct cfg_forward * + size_t: bind = target */
	CFG_T_DYNAMIC,    /* struct cfg_forward * + size_t: "[bind:]port" */
	CFG_T_USER,       /* char *: a user name, looked up (struct cfg uid) */
	CFG_T_GROUP,      /* char *: a group name, looked up (struct cfg gid) */
	CFG_T_DNSADDRS,   /* struct ipaddr[CFG_MAX_DNS] + size_t */
	CFG_T_DOMAINS,    /* char *[CFG_MAX_DNS_SEARCH] + size_t */
	CFG_T_SERVER_ID,  /* struct cid_server_id */
	CFG_T_HOSTNAME,   /* char *: a DNS name, not an address */
	CFG_T_PORTS,      /* uint16_t first + uint16_t last: "first-last" */
};

#define CFG_F_REPEAT (1u << 0)   /* may appear more than once; entries add up */
#define CFG_F_REQUIRED (1u << 1) /* an error when absent from its section */
#define CFG_F_EMPTY (1u << 2)    /* "Key =" is allowed: an empty list */
#define CFG_F_SOCKET (1u << 3)   /* a unix socket path: length limit, and a
				    default that depends on the user */

/* Keys, in the order cfg_print writes them. */
enum cfg_key_id {
	CFG_KEY_LISTEN,
	CFG_KEY_LISTEN_TCP,
	CFG_KEY_SERVER,
	CFG_KEY_SERVER_PORTS,
	CFG_KEY_SERVER_TCP,
	CFG_KEY_SERVER_NAME,
	CFG_KEY_TRANSPORT,
	CFG_KEY_PROXY,
	CFG_KEY_SERVER_PUBLIC_KEY,
	CFG_KEY_PRIVATE_KEY_FILE,
	CFG_KEY_TUN,
	CFG_KEY_ADDRESS,
	CFG_KEY_MTU,
	CFG_KEY_ROUTES,
	CFG_KEY_DNS,
	CFG_KEY_DNS_SEARCH,
	CFG_KEY_CLIENT_DNS,
	CFG_KEY_STATE_DIR,
	CFG_KEY_CONTROL_SOCKET,
	CFG_KEY_USER,
	CFG_KEY_GROUP,
	CFG_KEY_KEEPALIVE,
	CFG_KEY_IDLE_TIMEOUT,
	CFG_KEY_CONGESTION,
	CFG_KEY_KEY_EXCHANGE,
	CFG_KEY_OFFLOAD,
	CFG_KEY_LOSS_RECOVERY,
	CFG_KEY_LOCAL_FORWARD,
	CFG_KEY_REMOTE_FORWARD,
	CFG_KEY_DYNAMIC_FORWARD,
	CFG_KEY_FORWARD_BUFFER,
	CFG_KEY_MAX_FORWARDS,
	CFG_KEY_FORWARD_WAIT,
	CFG_KEY_FORWARD_WAIT_MAX,
	CFG_KEY_ZERO_RTT,
	CFG_KEY_RETRY_THRESHOLD,
	CFG_KEY_WORKERS,
	CFG_KEY_SERVER_ID,
	CFG_KEY_SERVER_ID_CONFIG,
	CFG_KEY_KEY_DIR,
	CFG_KEY_FORWARD_MEMORY,
	CFG_KEY_FORWARD_MEMORY_TOTAL,
	CFG_KEY_SYSLOG,
	CFG_KEY_METRICS_LISTEN,
	CFG_KEY_METRICS_CONNECTIONS,
	CFG_KEY_KEYLOG_FILE,
	CFG_KEY_QLOG_DIR,
	CFG_KEY_PEER_NAME,
	CFG_KEY_PEER_PUBLIC_KEY,
	CFG_KEY_PEER_ADDRESS,
	CFG_KEY_PEER_ALLOWED_IPS,
	CFG_KEY_PEER_ALLOW_FORWARD,
	CFG_KEY_PEER_ALLOW_REMOTE_FORWARD,
	CFG_KEY_COUNT
};

struct cfg_key {
	const char *name;  /* canonical spelling; matched case-insensitively */
	unsigned sections; /* CFG_SEC_* */
	enum cfg_type type;
	unsigned flags;    /* CFG_F_* */
	uint32_t min, max; /* CFG_T_NUMBER */
	size_t off;        /* in struct cfg, or struct cfg_peer for [Peer] */
	size_t off_n;      /* the entry count (or port) field, for lists */
	const char *dflt;  /* value text used when the key is absent, or NULL */
	const char *help;
};

extern const struct cfg_key cfg_table[CFG_KEY_COUNT];

/* Where each key of one section was set: line 0 means absent; `bad` marks
 * a key whose value was rejected, so cross-field checks skip it. */
struct cfg_seen {
	unsigned line[CFG_KEY_COUNT];
	bool bad[CFG_KEY_COUNT];
};

/* Parser state between cfg_parse_init and cfg_parse_finish. */
struct cfg_parse {
	struct cfg *cfg;
	struct cfg_errors *errs;
	const char *path;       /* as given, for messages (cfg->path) */
	char *dir;              /* absolute directory for relative paths */
	size_t errs_start;      /* errs->n when this parse began */
	unsigned *err_lines;    /* line of each error since errs_start */
	unsigned line;          /* current line, 1-based */
	unsigned section;       /* CFG_SEC_* now open, 0 before any header */
	bool skipping;          /* inside an unknown or misplaced section */
	unsigned main_line;     /* line of [Server] / [Client], 0 if none */
	struct cfg_seen main;   /* keys of [Server] / [Client] */
	struct cfg_seen *peers; /* one per cfg->peers entry */
	size_t peers_cap;       /* room in both arrays */
	/* Lines past the file's last are command-line options; each has
	 * its own name for messages ("-L 8080:db:5432"). */
	unsigned file_lines;
	char **option_names;
	size_t noptions;
	gid_t user_gid;         /* User's primary group, the default Group */
};

/* Start parsing `path` (used for messages and to resolve relative paths)
 * into `cfg`, which is overwritten. Errors are appended to `errs`. */
void cfg_parse_init(struct cfg_parse *, const char *path, enum cfg_role,
    struct cfg *, struct cfg_errors *);
/* Feed one line without its '\n' (it may hold any bytes). */
void cfg_parse_line(struct cfg_parse *, const char *line, size_t len);
/* Fill defaults, run cross-field checks, order this parse's errors by line
 * and release the context. Returns 0 if no error was found, else -1. */
int cfg_parse_finish(struct cfg_parse *);

/* What cfg_print writes for key `id` of `obj` (a struct cfg, or a struct
 * cfg_peer for [Peer] keys): "Key = value" lines, or "" when unset.
 * Malloc'd. */
char *cfg_key_text(const void *obj, enum cfg_key_id id);

/* The key with this name (any case) allowed in `section`, or NULL; with
 * `any` set, the first key of that name in any section. */
const struct cfg_key *cfg_table_find(const char *name, unsigned section,
    bool any);
/* One line per key of `role`'s sections: name, section, default and help. */
void cfg_table_help(enum cfg_role, FILE *);

#endif

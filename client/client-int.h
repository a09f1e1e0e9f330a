/* The inside of rove's client (struct client and its path sockets),
 * shared by the files that make it up and private to them: client.c (the
 * session's life: connecting, the control stream, the auto transport,
 * closing and reconnecting), client-tun.c (the TUN device the server's
 * configuration brings up, and the IP packets through it), client-path.c
 * (the UDP sockets of a path, and moving the session between them),
 * client-throttle.c (auto's answer to a UDP policer) and client-status.c
 * (status and metrics). Nothing else includes it: the
 * rest of rove sees client.h. */
#ifndef ROVE_CLIENT_INT_H
#define ROVE_CLIENT_INT_H

#include <event2/dns.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/addr.h"
#include "base/key.h"
#include "client.h"
#include "config/cfg.h"
#include "ops/control.h"
#include "ops/metrics.h"
#include "ops/status.h"
#include "transport/quic.h"
#include "transport/throttle.h"
#include "transport/tls.h"
#include "transport/udp.h"
#include "tun/tun-monitor.h"
#include "tun/tun-netlink.h"
#include "tun/tun.h"
#include "tunnel/tunnel.h"
#include "wire/proto.h"

#define MAX_ROUTES (PROTO_MAX_ROUTES + 64)

/* One UDP socket, connected to the server: one local end of a path. */
struct csock {
	struct client *c;
	struct udp_socket sock;
	struct udp_batch batch;
	struct event *ev;
	uint64_t opened_ms;
	struct sockaddr_storage remote;  /* the server's end it is connected to */
	socklen_t remotelen;
	/* Pinned to this uplink's interface (IP_UNICAST_IF), whatever the
	 * routing table prefers; 0: it follows the table. */
	int pinned_ifindex;
};

struct client {
	struct event_base *base;
	const struct cfg *cfg;
	WOLFSSL_CTX *tls;
	WOLFSSL_CTX *tls_tcp;    /* TLS over TCP (Transport = tcp or auto) */
	struct quic_settings qs;
	uint8_t reset_secret[QUIC_RESET_SECRET_LEN];
	/* The server's NEW_TOKEN token: the next connection presents it, so
	 * a server under load admits it without a Retry round trip. Kept in
	 * memory: reconnects are what it is for. */
	uint8_t token[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	size_t tokenlen;

	struct sockaddr_storage server;
	socklen_t serverlen;
	struct ipaddr server_ip;
	struct sockaddr_storage server_tcp;  /* ServerTCP, resolved */
	socklen_t server_tcplen;
	/* Proxy, with env resolved at start (PROXY_NONE: none), its address
	 * (looked up at start, else before a TCP attempt until it is), its
	 * URL without credentials for logs and status. Transport = auto:
	 * `proxy_worked` from a session through it until an attempt cannot
	 * reach it (TLS over TCP goes through it at once meanwhile),
	 * `proxy_next` after an attempt that went direct failed (the next
	 * one tries the proxy alone). */
	struct proxy_url proxy;
	struct sockaddr_storage proxy_addr;
	socklen_t proxy_addrlen;
	char proxy_str[PROXY_URL_STRLEN];
	bool proxy_worked;
	bool proxy_next;

	struct csock *sock;      /* the socket of the current path */
	struct csock *old_sock;  /* the previous one, while migrating */
	struct quic_conn *qc;    /* the session */
	/* Loss recovery on `qc`, once its SERVER_CONFIG said the server
	 * decodes it; freed with the session (client_tun_session_gone). */
	struct recovery *rec;
	/* Transport = auto: TLS over TCP racing QUIC or taking over from a
	 * stalled one; and, while on TCP, a QUIC handshake probing UDP with
	 * its own socket. Either becomes `qc` when it completes. */
	struct quic_conn *alt;
	struct quic_conn *probe;
	struct csock *probe_sock;
	struct event *transport_ev;
	struct event *probe_ev;
	unsigned probes;         /* since the move to TCP, for the back-off */
	unsigned alt_failures;   /* TLS over TCP attempts failed in a row */
	uint64_t alt_not_before; /* clock_now_ms(): no attempt before */
	uint64_t alt_started_ms; /* when the attempt in c->alt began */
	uint8_t ctl[PROTO_MAX_MSG + 16];
	size_t ctllen;
	bool configured;     /* the server's configuration arrived */
	bool ctl_open;       /* stream 0, the control stream, is opened */

	struct tun tun;
	struct tunnel_out tun_out; /* the TUN's write side, coalescing */
	int tun_clone;     /* /dev/net/tun, opened at start; -1 once attached */
	bool tun_open;
	struct event *tun_ev;
	struct prefix addrs[2];
	size_t naddrs;
	/* [0] IPv4, [1] IPv6: a packet for another host came, and whether
	 * this host forwards was looked at (client-tun.c). */
	bool forwarding_checked[2];
	uint32_t tun_mtu;
	struct prefix routes[MAX_ROUTES]; /* installed through the TUN */
	uint32_t route_table[MAX_ROUTES]; /* each one's table (0: main) */
	size_t nroutes;
	/* Full tunnel: the firewall mark on every socket toward the server
	 * (0: none), which is also the table of the routes that would capture
	 * them, and whether the policy rules for it are in place. */
	uint32_t fwmark;
	bool policy_on;
	int policy_family;       /* of the rules (the server may move) */

	struct tunnel_counters counters;
	uint64_t handshakes;
	uint64_t reloads, reloads_refused;
	unsigned failures;   /* consecutive, for the back-off */
	bool session_up;     /* qc completed its handshake */
	uint64_t latest_handshake; /* wall-clock seconds; 0: never */
	/* The server's names, looked up again before a reconnect
	 * (client-resolve.c). */
	struct evdns_base *resolver;
	struct client_lookup {
		struct client *c;
		struct evdns_getaddrinfo_request *req;
	} lookup[2];             /* [0] Server's name, [1] ServerTCP's */
	unsigned lookups;        /* a round's answers still to come */
	bool lookup_failed;      /* one of them failed */
	bool looked_up;          /* the round ended: connect with it */
	bool resolved;           /* have an address (else: only a name) */
	struct event *reconnect_ev;
	struct control *control;
	struct metrics *metrics;    /* MetricsListen; NULL: off */
	struct forward *fwd;
	struct dns *dns;            /* the server's DNS on the resolver */
	bool stopping;
	int exit_status;
	uint8_t presented_key[KEY_LEN];
	bool have_presented_key;

	char session_id[17];     /* names this server's remembered session */
	struct tun_monitor *monitor;
	struct event *path_ev;   /* debounced path check after netlink news */
	bool link_event;         /* a link changed since the last check */
	bool path_down;          /* at the last check: no route to the server,
	                          * or its link down or without carrier */
	unsigned move_retries;   /* moves refused in a row (no connection ID) */
	uint64_t transport_checked_ms; /* the last transport_check */
	/* No TCP race before this: QUIC has just woken up or shown that its
	 * path works (a validated migration). */
	uint64_t quic_grace_until_ms;
	uint64_t probe_now_ms;   /* the last client_probe_now */
	/* TLS over TCP came up while QUIC was silent: QUIC's last chance. */
	struct event *alt_wait_ev;
	bool alt_waited;
	/* Transport = auto against a UDP policer (client-throttle.c): the
	 * watch on QUIC; `alt` racing because QUIC looked policed; on TCP
	 * for that reason (judged at trial_end_ms against QUIC's rate, held
	 * until hold_until_ms); and the hold, which doubles when the policer
	 * is found again soon after a return to QUIC (back_ms). */
	struct throttle_watch throttle;
	bool alt_for_throttle;
	bool throttled;
	uint64_t throttle_quic_bps;
	uint64_t throttle_moved_ms, throttle_trial_end_ms, throttle_hold_until_ms;
	uint64_t throttle_hold_ms, throttle_back_ms;
	uint64_t throttle_watch_from_ms; /* none before: TCP lost a trial */
	bool throttle_hold_kept;  /* ... and the hold it doubled stands */
	/* The rate probe (throttle.h): the server serves them (feature bit
	 * 7, from its SERVER_CONFIG); the probe in flight is one; its
	 * measure and the tick that paces it; one passed, so the next
	 * probe is an ordinary one, which takes the session back. */
	bool rate_probe_ok;
	bool probe_rate;
	struct throttle_probe rate;
	struct event *rate_ev;
	bool rate_passed;
	/* Leaving a silent uplink (client-path.c): a check every
	 * UPLINK_CHECK_MS, the uplinks tried in this silence, when the next
	 * may be, and when (and how long after) to try the preferred
	 * uplink again while on another. */
	struct event *uplink_ev;
	struct event *silent_ev; /* a check at the moment SILENT_MS is up */
	int escape_tried[8];
	size_t nescape_tried;
	uint64_t escape_next_ms;
	uint64_t reprobe_next_ms, reprobe_wait_ms; /* no other uplink */
	uint64_t prefer_next_ms, prefer_wait_ms;
	uint64_t last_move_ms;   /* our last migration */
	/* The keepalive in use when a NAT's short timeout made us shorten
	 * the configured one (client_path_notice); 0: the configured. */
	uint64_t keepalive_ms;
	struct status_roam roam;
};

/* --- client.c ----------------------------------------------------------- */

/* Transport = auto: an established QUIC session whose packets go
 * unacknowledged this long races TLS over TCP. */
#define STALL_MS 2000

/* Transport = auto on TCP: probe QUIC at once (a network change). */
void client_probe_now(struct client *);
/* The rate probe in flight has its verdict: it closes, and the next
 * probe goes at once (`now`: an ordinary one, to move back) or after the
 * back-off and hold. */
void client_probe_end(struct client *, bool now);

/* Connect (again) to the server: a new session over QUIC, with 0-RTT if
 * a ticket is remembered, or over TLS on TCP (Transport = tcp). */
void client_connect(struct client *);
/* An attempt to connect failed before it began: back off and retry. */
void client_connect_failed(struct client *);

/* client-resolve.c. At start: resolve the server's names; a temporary
 * failure is logged and left to the reconnects (0), a name that does not
 * exist is an error (-1, *cause). */
int client_resolve_init(struct client *, char **cause);
/* Before connecting: true when a lookup was started instead (it calls
 * client_connect, or client_connect_failed, when done). */
bool client_resolve_again(struct client *);
void client_resolve_free(struct client *);
/* At start: Proxy (env chosen now) and the proxy's address. -1 (*cause)
 * for a proxy variable that does not parse. */
int client_proxy_init(struct client *, char **cause);
/* The proxy's address is known (looked up now if it was not). */
bool client_proxy_resolved(struct client *);
/* The service manager learns we are up (READY, the first time) and over
 * which path; `what` says how far the session is. */
void client_notify(struct client *, const char *what);
/* Transport = auto: TLS over TCP next to QUIC, unless it is trying
 * already or may not yet; `why` goes into the log. */
void client_start_alt(struct client *, const char *why);
/* QUIC answers again: a TLS over TCP attempt still connecting goes
 * before it completes (completed, it would replace the QUIC session at
 * the server, a peer having one session there). */
void client_alt_drop(struct client *);

/* --- client-throttle.c -------------------------------------------------- */

/* Every TRANSPORT_CHECK_MS in auto: on QUIC, watch for a policer and
 * race TLS over TCP when it shows; on TCP because of one, judge the
 * trial. */
void client_throttle_check(struct client *, uint64_t now_ms);
/* The session moved: to TLS over TCP (`to_tcp`) or back to QUIC. */
void client_throttle_moved(struct client *, bool to_tcp, uint64_t now_ms);
/* While on TCP because of a policer: the earliest a QUIC probe may go. */
uint64_t client_throttle_probe_at(const struct client *);
/* LOSS_REPORT arrived on the control stream. */
void client_throttle_report(struct client *, const uint8_t *body, size_t len);
/* The next QUIC probe is a rate probe: on TCP for a policer, with a
 * server that serves them, and none passed since the session moved. */
bool client_throttle_rate_probe(const struct client *);
/* The rate probe's handshake completed: its measure starts. */
void client_throttle_probe_up(struct client *, uint64_t now_ms);
/* A DATAGRAM of the rate probe's came back. */
void client_throttle_probe_echo(struct client *, const uint8_t *data,
    size_t len);
/* The rate probe ended before its verdict (no handshake, or cut; the
 * caller dropped it): QUIC is no better, and the hold doubles as for a
 * verdict against it. */
void client_throttle_probe_lost(struct client *);

/* --- client-tun.c ------------------------------------------------------- */

/* SERVER_CONFIG arrived on the control stream: bring the TUN up with its
 * addresses, routes and DNS, or on a reconnect (or a reload there) change
 * only what the server changed. Returns -1 for a message that closes the
 * session. */
int client_tun_apply_config(struct client *, const uint8_t *body,
    size_t len);
/* The session's DATAGRAM callback: an IP packet for the TUN. */
void client_tun_datagram_cb(struct quic_conn *, const uint8_t *data,
    size_t len, void *client);
/* `qc` stops being the session (closed, freed or replaced): what
 * belonged to it goes too. */
void client_tun_session_gone(struct client *);

/* --- client-path.c ------------------------------------------------------ */

/* A new UDP socket connected to the server, reading into its session.
 * NULL with *cause. */
struct csock *client_path_sock_open(struct client *, char **cause);
void client_path_sock_free(struct csock *);
/* The session's batch_for callback: the socket batch of `path`. */
struct udp_batch *client_path_batch_for(struct quic_conn *,
    const ngtcp2_path *path, void *client);
/* The session's path_validated callback: keep the socket of the path
 * that works. */
void client_path_validated(struct quic_conn *, enum quic_path_result,
    const struct sockaddr *local, const struct sockaddr *remote,
    void *client);
/* The timer after netlink news: move the session if the way to the
 * server changed or came back. */
void client_path_check(evutil_socket_t, short, void *client);
/* Every UPLINK_CHECK_MS, and once more the moment a silence reaches its
 * limit: leave an uplink gone silent for another (or, with no other, the
 * socket for a new one: a middlebox may have cut that one flow), and go
 * back to the preferred uplink when it answers again. */
void client_path_watch(evutil_socket_t, short, void *client);
#define UPLINK_CHECK_MS 250
/* Ask the path in use again, from a fresh socket: a path validation
 * answers within a round trip of the path coming back, where the
 * retransmission timer, doubling through a long silence, could wait
 * seconds longer. False if no move could start (no connection ID left,
 * no socket). */
bool client_path_reprobe(struct client *);
/* PATH_NOTICE from the server: perhaps shorten the keepalive. */
void client_path_notice(struct client *, const uint8_t *body, size_t len);
/* The network monitor's callback: schedules client_path_check. */
void client_path_monitor_cb(enum tun_monitor_event, void *client);

/* --- client-status.c ---------------------------------------------------- */

/* The control socket's "status" (and "metrics") request. */
void client_status_control_cb(struct evbuffer *out, const char *request,
    void *client, struct control_more *more);
/* MetricsListen: the figures for one scrape. */
struct metrics_scrape *client_status_scrape(void *client);

#endif /* ROVE_CLIENT_INT_H */

/* One QUIC connection (ngtcp2 + wolfSSL) and its I/O: reading packets,
 * the write loop, the expiry timer, DATAGRAMs and stream bytes. Shared by
 * roved (many connections) and rove (one). */
#ifndef ROVE_QUIC_H
#define ROVE_QUIC_H

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls.h"
#include "udp.h"
#include "wire/cid.h"
#include "wire/proxy.h"

struct evbuffer;

#define QUIC_SCID_LEN CID_LEN
#define QUIC_RESET_SECRET_LEN 32
/* DATAGRAMs held while the congestion window is full: at most this many;
 * CoDel (dgramq.c) with an interval of one round trip (smoothed RTT + 4 x
 * RTT variation, QUIC_DGRAM_MIN_AGE at least) keeps a standing queue
 * short, and nothing waits more than QUIC_DGRAM_MAX_RTTS round trips; the
 * oldest are dropped beyond either bound. The count is sized so that at
 * the rates one connection reaches (up to ~1 Gbit/s, 1380-byte packets)
 * an inner TCP burst of a few hundred packets is absorbed, not cut; the
 * worst case is ~1.5 MB per connection. */
#define QUIC_DGRAM_QUEUE 1024
#define QUIC_DGRAM_MIN_AGE (10 * NGTCP2_MILLISECONDS)
#define QUIC_DGRAM_MAX_RTTS 4

enum quic_role { QUIC_ROLE_SERVER, QUIC_ROLE_CLIENT };

enum quic_path_result { QUIC_PATH_OK, QUIC_PATH_FAILED, QUIC_PATH_ABORTED };

enum quic_state {
	QUIC_STATE_HANDSHAKING,
	QUIC_STATE_ESTABLISHED, /* TLS handshake complete */
	QUIC_STATE_CLOSED,      /* closing, draining or dead: no more I/O */
};

/* Why a connection ended, for logs and for the client's decisions. */
struct quic_close_info {
	bool remote;          /* the peer closed it (else: local or idle) */
	bool idle;            /* idle timeout */
	bool transport;       /* transport error (else application) */
	uint64_t code;        /* error code as on the wire */
	bool pin_mismatch;    /* our pin check refused the peer's key */
	bool stateless_reset; /* the peer had forgotten us (a restart) */
	/* TLS over TCP through a proxy: the proxy ended the attempt (the
	 * reason names it); `proxy_refused` when its answer will not change
	 * soon (HTTP 403 or 407, SOCKS5 credentials or rules). */
	bool proxy;
	bool proxy_refused;
	char reason[256];     /* escaped reason phrase */
};

struct quic_conn;

/* What the owner hears from a connection. All are optional but `closed`. */
struct quic_conn_cbs {
	/* TLS finished (server: the peer's key passed the pin check). */
	void (*handshake_done)(struct quic_conn *, void *arg);
	void (*datagram)(struct quic_conn *, const uint8_t *, size_t, void *arg);
	/* Bytes arriving on a stream, in order; `stream_arg` is what the owner
	 * set for it (NULL the first time for a stream the peer opened). The
	 * owner returns the flow-control credit with quic_conn_stream_consume
	 * once it has passed the bytes on. Return -1 to close the connection
	 * with a protocol error. */
	int (*stream_data)(struct quic_conn *, int64_t stream_id,
	    const uint8_t *, size_t, bool fin, void *stream_arg, void *arg);
	/* The peer abandoned its sending side (RESET_STREAM) with its error
	 * code. (Its STOP_SENDING ends our sending side; ngtcp2 answers it
	 * with RESET_STREAM itself and the stream then closes.) */
	void (*stream_reset)(struct quic_conn *, int64_t stream_id, uint64_t code,
	    void *stream_arg, void *arg);
	/* Some of our bytes were acknowledged and freed: room to read more. */
	void (*stream_acked)(struct quic_conn *, int64_t stream_id,
	    void *stream_arg, void *arg);
	/* Both directions are finished; the stream and its ID are gone. */
	void (*stream_close)(struct quic_conn *, int64_t stream_id, uint64_t code,
	    void *stream_arg, void *arg);
	/* Connection IDs we issue / retire (the server's demultiplexer). */
	void (*cid_add)(struct quic_conn *, const ngtcp2_cid *, void *arg);
	void (*cid_remove)(struct quic_conn *, const ngtcp2_cid *, void *arg);
	/* The connection is over; the owner frees it (not from inside this
	 * callback's caller chain: quic.c calls it from a one-shot event). */
	void (*closed)(struct quic_conn *, const struct quic_close_info *, void *arg);
	/* Path validation of local -> remote finished: on QUIC_PATH_OK the
	 * connection moved there; on FAILED it stayed on (or fell back to) a
	 * working path; ABORTED means a newer path superseded it (a NAT that
	 * rebinds again mid-validation), which is no fault of either path. */
	void (*path_validated)(struct quic_conn *, enum quic_path_result,
	    const struct sockaddr *local, const struct sockaddr *remote, void *arg);
	/* Client: the server sent a session ticket, `der` its wolfSSL form;
	 * `params` the server's transport parameters (for 0-RTT). */
	void (*new_session)(struct quic_conn *, const uint8_t *der, size_t derlen,
	    const uint8_t *params, size_t paramslen, void *arg);
	/* Client: the server answered the first flight that offered the
	 * ticket of quic_resume (its ServerHello arrived), so the ticket is
	 * spent: the server's replay register now holds it. Until then the
	 * owner keeps it for the next attempt, since a first flight the
	 * server never saw did not spend it, and a re-offered ticket that
	 * it did see is refused as a replay, never accepted twice. */
	void (*ticket_spent)(struct quic_conn *, void *arg);
	/* Client: the server gave us a token for our next connection. */
	void (*new_token)(struct quic_conn *, const uint8_t *token, size_t len,
	    void *arg);
	/* Pick the batch (socket) for packets on `path`: the client may hold
	 * two sockets while it migrates. NULL: the connection's own batch. */
	struct udp_batch *(*batch_for)(struct quic_conn *, const ngtcp2_path *, void *arg);
	/* Over TCP: a burst of input has been handled (what its DATAGRAMs
	 * brought may be flushed to the TUN, as after a burst of UDP). */
	void (*input_done)(struct quic_conn *, void *arg);
	/* QUIC: packets of ours were declared lost since the last call
	 * (cumulative counts of our packets sent and lost), at most every
	 * QUIC_LOSS_NOTE_MS: the server tells its client (LOSS_REPORT). */
	void (*loss)(struct quic_conn *, uint64_t sent, uint64_t lost, void *arg);
};

#define QUIC_LOSS_NOTE_MS 500

struct quic_settings {
	enum quic_role role;
	ngtcp2_cc_algo cc;
	uint32_t idle_timeout_s;
	uint32_t keepalive_s;     /* 0 = off */
	size_t max_udp_payload;   /* outer path MTU - IP/UDP headers */
	size_t stream_window;     /* per-stream flow-control window */
	bool early_data;          /* server: accept 0-RTT */
	uint64_t initial_rtt_ns;  /* 0: ngtcp2's default */
	const uint8_t *reset_secret; /* QUIC_RESET_SECRET_LEN bytes */
	/* Server: the group member ID that the CIDs it issues carry, for a
	 * load balancer (cid.h); NULL or empty: none. */
	const struct cid_server_id *server_id;
	bool verbose;             /* route ngtcp2's own log to ours */
	/* QlogDir: one qlog file per connection here (NULL: none). */
	const char *qlog_dir;
	/* Client: a NEW_TOKEN token to present in the Initial. Server: the
	 * token the client's Initial carried, already verified (admit.c);
	 * `token_retry` when it answered our Retry, whose first Initial had
	 * DCID `odcid`. */
	const uint8_t *token;
	size_t tokenlen;
	bool token_retry;
	const ngtcp2_cid *odcid;
	/* Client: the firewall mark (SO_MARK) for the TCP transport's
	 * socket, which full-tunnel policy routing keeps out of the tunnel
	 * (0: none). */
	uint32_t fwmark;
	/* Client: a rate probe (ALPN PROTO_ALPN_PROBE), which the server
	 * authenticates and echoes but never makes the session. */
	bool probe;
};

/* A connection's qlog stops growing here (it says so in the log). */
#define QUIC_QLOG_MAX_BYTES (16 * 1024 * 1024)

/* How long a server gives a handshake: long enough for a lossy mobile
 * path, short enough that half-open connections do not pile up. */
#define QUIC_SERVER_HANDSHAKE_TIMEOUT (5 * NGTCP2_SECONDS)

/* Counters kept per connection. */
struct quic_conn_stats {
	uint64_t rx_dgrams, tx_dgrams, rx_dgram_bytes, tx_dgram_bytes;
	/* dropped from the queue: pushed out by newer ones (queue_full),
	 * waited too long (stale); refused as larger than a packet; sent and
	 * declared lost by ngtcp2 */
	uint64_t dgram_queue_full, dgram_stale, dgram_too_big, dgram_lost;
	/* QUIC packets sent and declared lost (not over TCP) */
	uint64_t pkt_sent, pkt_lost;
	uint64_t path_validated, path_failed, path_aborted;
	/* packets received with ECT(0) or ECT(1), and with CE (congestion
	 * experienced on the way) */
	uint64_t rx_ecn_ect, rx_ecn_ce;
	bool early_attempted, early_accepted;
	/* the TLS key exchange group (tls_group_name), once the handshake
	 * is over; NULL before */
	const char *kex_group;
	double rtt_ms;
	double min_rtt_ms;
	uint64_t cwnd;
	uint64_t bytes_in_flight;
	/* stream data held until the peer acknowledges it (what
	 * quic_conn_set_send_limit bounds) */
	uint64_t stream_unacked;
	bool tcp;  /* the session runs over TLS on TCP (rtt, cwnd: the kernel's) */
	/* Server: how long the peer had been quiet when its packets last
	 * started coming from a new address (0: never moved). */
	uint64_t rebind_quiet_ms;
};

/* A resumption for the client: the session (wolfSSL DER) and the server's
 * transport parameters remembered from an earlier connection. */
struct quic_resume {
	const uint8_t *session;
	size_t sessionlen;
	const uint8_t *params;
	size_t paramslen;
	bool early_data;  /* send 0-RTT (DATAGRAMs only) */
};

/* Client: connect over `sock` (the owner's) to `remote`, resuming `resume`
 * when not NULL. */
struct quic_conn *quic_conn_client_create(struct event_base *,
    const struct quic_settings *, const struct quic_conn_cbs *, void *arg,
    WOLFSSL_CTX *, struct udp_batch *, const struct sockaddr *remote,
    socklen_t remotelen, const struct quic_resume *resume, char **cause);

/* Server: a new connection from the first Initial `pkt` (already accepted
 * by ngtcp2_accept into `hd`). The owner then calls quic_conn_read with the
 * same packet. */
struct quic_conn *quic_conn_server_create(struct event_base *,
    const struct quic_settings *, const struct quic_conn_cbs *, void *arg,
    WOLFSSL_CTX *, struct udp_batch *, const ngtcp2_pkt_hd *hd,
    const struct sockaddr *remote, socklen_t remotelen, char **cause);

/* The same session over TLS 1.3 on TCP (quic-tcp.c), for paths that drop
 * UDP: QUIC's frames on the TLS byte stream (docs/PROTOCOL.md). Every call
 * below works on it alike, except those about UDP paths (read, migrate,
 * batches, tokens, 0-RTT), which do nothing. `ctx` comes from
 * tls_ctx_create_tcp. Client: connects to `remote` itself, without
 * blocking. Server: takes over `fd`, a connection accept(2) returned
 * (closed with the session). */
/* Client: how the TCP connection reaches the server. */
enum quic_tcp_route {
	QUIC_TCP_DIRECT,
	QUIC_TCP_PROXY,             /* through the proxy */
	QUIC_TCP_DIRECT_THEN_PROXY, /* direct; through the proxy if TCP to
	                             * the server fails or has not connected
	                             * within `direct_wait_ns` */
};
struct quic_tcp_proxy {
	const struct proxy_url *url;     /* HTTP or SOCKS5 (wire/proxy.h) */
	const struct sockaddr *addr;     /* the proxy, resolved */
	socklen_t addrlen;
	const char *target_host;         /* what the proxy connects to */
	uint16_t target_port;
	uint64_t direct_wait_ns;
};
/* `proxy` is read during the call only, and ignored with QUIC_TCP_DIRECT
 * (it may then be NULL). */
struct quic_conn *quic_tcp_client_create(struct event_base *,
    const struct quic_settings *, const struct quic_conn_cbs *, void *arg,
    WOLFSSL_CTX *, const struct sockaddr *remote, socklen_t remotelen,
    enum quic_tcp_route, const struct quic_tcp_proxy *proxy, char **cause);
/* Client: whether a TCP-transport connection goes through its proxy
 * (from the moment it connects to it). */
bool quic_tcp_via_proxy(const struct quic_conn *);
/* ... and whether its TCP connection to the proxy was made (so the proxy
 * is there, whatever it answered). */
bool quic_tcp_proxy_reached(const struct quic_conn *);
struct quic_conn *quic_tcp_server_create(struct event_base *,
    const struct quic_settings *, const struct quic_conn_cbs *, void *arg,
    WOLFSSL_CTX *, int fd, const struct sockaddr *remote, socklen_t remotelen);
/* Server: a TCP session still in its handshake must finish it within
 * `within_ns` from now (if that is sooner than its deadline). */
void quic_tcp_hurry(struct quic_conn *, uint64_t within_ns);
/* Close at once the sockets of finished TCP sessions that still wait
 * for their peer's FIN (at exit). */
void quic_tcp_linger_clear(void);
/* Whether a closed TCP-transport connection's socket is still draining
 * (lingering); the event loop must run for it to finish. */
bool quic_tcp_lingering(void);
/* The TCP transport's idle timeout after the peer's parameters: the
 * shorter of `ours_ns` and the peer's `peer_ms` (0: none), never an
 * overflow of a huge one. */
uint64_t quic_tcp_idle_ns(uint64_t ours_ns, uint64_t peer_ms);
/* True for a session over TCP. */
bool quic_conn_is_tcp(const struct quic_conn *);

/* Free at once (no CONNECTION_CLOSE is sent; see quic_conn_close). */
void quic_conn_free(struct quic_conn *);

/* Feed one packet received on `sock` from `remote`. Then the owner runs
 * quic_write_dirty. */
void quic_conn_read(struct quic_conn *, const struct udp_socket *sock,
    const struct sockaddr *remote, socklen_t remotelen, const uint8_t *pkt,
    size_t len, uint8_t ecn);
/* Our packets seem to go nowhere: packets have been in flight for a probe
 * timeout without the peer acknowledging any, or nothing at all arrived
 * for a second.
 * (Packets arriving alone prove little: after an outage the peer's probes
 * may get through before our own route is back.) */
bool quic_conn_stalled(struct quic_conn *);
/* Milliseconds that packets have been in flight without the peer
 * acknowledging any (0 when nothing is in flight, or over TCP): how long
 * the path has been eating what we send. */
uint64_t quic_conn_ack_silence_ms(struct quic_conn *);
/* Milliseconds since the last packet arrived. */
uint64_t quic_conn_rx_idle_ms(const struct quic_conn *);

/* The write loop: queued DATAGRAMs, stream data, ACKs and control frames
 * into the owner's batch, then re-arm the timer. Does not flush the batch. */
void quic_conn_write(struct quic_conn *);

/* Run the write loop of every connection that has work queued since the
 * last call (DATAGRAMs, stream data, packets read) and flush their batches.
 * Input handlers call it at the end of each burst; anything queued from
 * elsewhere is written by a deferred event on the next loop pass. */
void quic_write_dirty(void);

/* Queue one DATAGRAM for the next write loop (quic_write_dirty), which
 * sends it as the congestion window allows. Never blocks the caller: a
 * full queue drops its oldest packet (counted in dgram_queue_full), as a
 * router does. Returns how many older DATAGRAMs were dropped to make room
 * (0 or 1), -EMSGSIZE if it can never fit (see quic_conn_dgram_max),
 * -ENOTCONN before the handshake. */
int quic_conn_send_datagram(struct quic_conn *, const uint8_t *, size_t);

/* The largest DATAGRAM payload that fits in one packet on this path. */
size_t quic_conn_dgram_max(struct quic_conn *);

/* Queue bytes on a stream (copied and kept until acknowledged); `fin`
 * ends our side. Returns 0, or -1 if the stream's sending side is over. */
int quic_conn_stream_send(struct quic_conn *, int64_t stream_id,
    const uint8_t *, size_t, bool fin);
/* Read up to `max` bytes from `fd` straight into the stream's queue (no
 * copy in between). Returns what read(2) returned: the bytes queued, 0 at
 * EOF, or -1 with errno set (EPIPE when the stream's sending side is
 * over). */
ssize_t quic_conn_stream_read_fd(struct quic_conn *, int64_t stream_id, int fd,
    size_t max);
/* Bytes queued on the stream and not yet acknowledged (the owner's
 * backpressure measure). */
size_t quic_conn_stream_unacked(struct quic_conn *, int64_t stream_id);
/* What a writer of stream `id` may queue now: what its own `cap` leaves,
 * and no more than the connection's and the process's send limits leave.
 * A writer that gets 0 because of a limit hears stream_acked once
 * acknowledgements have made room again. */
size_t quic_conn_stream_room(struct quic_conn *, int64_t stream_id, size_t cap);
/* The most stream bytes this connection / the whole process may hold
 * unacknowledged (0: no limit): what one peer that never acknowledges can
 * pin, and all of them together. */
void quic_conn_set_send_limit(struct quic_conn *, size_t);
void quic_set_send_limit_all(size_t);
/* Stream bytes held until acknowledged: this connection's, everyone's. */
size_t quic_conn_unacked(const struct quic_conn *);
size_t quic_unacked_all(void);
/* The offset after the last byte queued on the stream. */
uint64_t quic_conn_stream_queued(struct quic_conn *, int64_t stream_id);
/* Append to `out` the stream's queued bytes from offset `from` on, less
 * those the peer has acknowledged (from the first it has not, if that is
 * later); returns how many. What a forward moving to another connection
 * must send again: the peer may not have them. */
size_t quic_conn_stream_copy_unacked(struct quic_conn *, int64_t stream_id,
    uint64_t from, struct evbuffer *out);
/* The owner has passed `n` received bytes on: widen the peer's window. */
void quic_conn_stream_consume(struct quic_conn *, int64_t stream_id, size_t n);
void quic_conn_stream_set_arg(struct quic_conn *, int64_t stream_id, void *);
/* Abort both directions (RESET_STREAM and STOP_SENDING) with `code`. */
void quic_conn_stream_reset(struct quic_conn *, int64_t stream_id, uint64_t code);
/* Abort only our reading side (STOP_SENDING). */
void quic_conn_stream_stop_reading(struct quic_conn *, int64_t stream_id,
    uint64_t code);
/* Open a bidirectional stream; returns its ID or -1 when the peer's stream
 * limit is reached or streams cannot be opened yet. A client may open
 * streams once 0-RTT keys are in place (quic_conn_early_ready); if the
 * server then rejects the 0-RTT, such streams are opened again with the
 * same IDs and their bytes sent again in 1-RTT, before handshake_done:
 * the owner sees nothing of it. */
int64_t quic_conn_open_stream(struct quic_conn *, void *stream_arg);
uint64_t quic_conn_streams_left(struct quic_conn *);
/* True for a stream this side opened. */
bool quic_conn_stream_is_local(struct quic_conn *, int64_t stream_id);

/* Server: send the client a NEW_TOKEN token for its next connection. */
void quic_conn_submit_new_token(struct quic_conn *, const uint8_t *token,
    size_t len);

/* Close with an application error code: sends CONNECTION_CLOSE now (into
 * the batch) and reports `closed` shortly after. */
void quic_conn_close(struct quic_conn *, uint64_t app_error, const char *reason);

enum quic_state quic_conn_state(const struct quic_conn *);
/* Client: 0-RTT keys are in place, DATAGRAMs may go and streams may be
 * opened before the handshake completes. */
bool quic_conn_early_ready(const struct quic_conn *);
/* Server: the handshake is still under way and the client's 0-RTT was
 * accepted (wolfSSL installed the 0-RTT keys, which it does only for a
 * resumption it accepted with early data): stream data arriving now came
 * in 0-RTT. */
bool quic_conn_early_rx(const struct quic_conn *);
/* The connection's TLS session; NULL on a server once the handshake is
 * over (the TLS object is freed then: an idle connection need not keep
 * it). */
WOLFSSL *quic_conn_tls(const struct quic_conn *);
/* Client: move to a new local socket. `immediate` when the old path is
 * dead (its address is gone); else the old path serves until the new one
 * is validated. Returns 0 or -1. */
int quic_conn_migrate(struct quic_conn *, struct udp_batch *, bool immediate);
/* The same to the server at `remote` (another of its ports that reach
 * it, ServerPorts); NULL: where the path goes now. */
int quic_conn_migrate_to(struct quic_conn *, struct udp_batch *,
    const struct sockaddr *remote, socklen_t remotelen, bool immediate);
/* Client: the local address of the path ngtcp2 sends on now (while a
 * new path validates, still the old one); NULL over TCP. */
const struct sockaddr *quic_conn_path_local(const struct quic_conn *,
    socklen_t *);
/* Send a PING after this long without sending anything (0: never), to
 * keep a NAT's mapping; UDP sessions only. */
void quic_conn_set_keepalive_ms(struct quic_conn *, uint64_t ms);
/* Client: the batch (socket) for packets of no other path, after a
 * migration's validation failed and ngtcp2 stayed on the old path. */
void quic_conn_set_batch(struct quic_conn *, struct udp_batch *);
/* The local address of the current path. */
const struct sockaddr *quic_conn_local(const struct quic_conn *, socklen_t *);
/* Server: tell the connection which peer a resumed session belongs to
 * (no certificate is sent on resumption). Runs the pin check. */
bool quic_tls_resumed(WOLFSSL *ssl, const uint8_t pubkey[static KEY_LEN]);
void quic_conn_get_stats(struct quic_conn *, struct quic_conn_stats *);
/* The connection's identifier: our first source connection ID, in hex.
 * It stays the same while the connection lives (whatever connection IDs
 * are in use later), and a new connection has a new one. */
#define QUIC_CONN_ID_STRLEN (2 * 20 + 1)
const char *quic_conn_id(const struct quic_conn *);
/* The peer's public key, valid once the pin check has passed. */
const uint8_t *quic_conn_peer_key(const struct quic_conn *);
/* The remote address of the current path. */
const struct sockaddr *quic_conn_remote(const struct quic_conn *, socklen_t *);

/* Pin check used by tls.c: ask the connection's owner. The owner sets
 * it once per process; it receives the connection's `arg`. */
void quic_set_pin_check(bool (*check)(struct quic_conn *, const uint8_t *pub,
    void *arg));
bool quic_tls_pin(WOLFSSL *ssl, const uint8_t pubkey[static KEY_LEN]);

/* wolfSSL's new-session callback (client): serialises the session and the
 * server's transport parameters for the connection's new_session. */
int quic_tls_new_session(WOLFSSL *ssl, WOLFSSL_SESSION *session);

#endif

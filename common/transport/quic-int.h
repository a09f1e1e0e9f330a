/* The inside of a session (struct quic_conn): the shared half (quic.c)
 * and the interface its two transports serve, QUIC through ngtcp2
 * (quic-udp.c) and QUIC's frames over TLS on TCP (quic-tcp.c). The stream
 * send queues, the limits on unacknowledged bytes and the owner's
 * callbacks are common; only how bytes reach the peer and how flow
 * control is kept differ. Private to those three files. */
#ifndef ROVE_QUIC_INT_H
#define ROVE_QUIC_INT_H

#include <sys/queue.h>

#include "dgramq.h"
#include "quic.h"

/* Stream bytes we sent, kept until the peer acknowledges them (ngtcp2 keeps
 * pointers into them until then). */
struct stream_chunk {
	struct stream_chunk *next;
	uint64_t off;
	size_t len;
	uint8_t data[];
};

struct quic_stream {
	LIST_ENTRY(quic_stream) entry;
	TAILQ_ENTRY(quic_stream) pending_entry; /* has bytes or FIN to send */
	bool pending;
	int64_t id;
	void *arg;                 /* the owner's, see quic_conn_stream_set_arg */
	struct stream_chunk *head, *tail;
	/* The first chunk not wholly handed to ngtcp2 (NULL when everything
	 * is), so a packet does not walk the chunks in flight. Never behind
	 * send_off: chunks behind it may be freed by an acknowledgement. */
	struct stream_chunk *cur;
	uint64_t end;      /* offset after the last queued byte */
	uint64_t send_off; /* next offset to hand to ngtcp2 */
	uint64_t acked;    /* bytes acknowledged (freed) */
	uint64_t reset_code; /* ours, when we reset it: sent again after a
	                      * rejected 0-RTT */
	bool fin, fin_sent, blocked, reset;
	/* Over TLS/TCP (quic-tcp.c), where the flow control and the stream
	 * states are ours, not ngtcp2's: the peer's limit for our bytes; what
	 * arrived, the limit we gave and what the owner consumed; whether
	 * each direction is over and the error code it ended with. */
	uint64_t tx_max;
	uint64_t tx_window;   /* the peer's window for it, to learn from a
	                       * MAX_STREAM_DATA what its reader consumed */
	uint64_t rx_off, rx_max, rx_consumed;
	uint64_t rx_reported; /* consumed, as the last MAX_STREAM_DATA said */
	bool tx_done, rx_done;
	uint64_t close_code;
};

struct quic_tcp;

/* What a transport does for the calls of quic.h that depend on it; quic.c
 * passes each call on. Every member is required. */
struct quic_transport {
	/* Free what the transport holds (not the session itself). */
	void (*free)(struct quic_conn *);
	/* The write loop (the session was taken off the dirty list). */
	void (*write)(struct quic_conn *);
	void (*close)(struct quic_conn *, uint64_t app_error, const char *reason);
	size_t (*dgram_max)(struct quic_conn *);
	void (*stream_consume)(struct quic_conn *, int64_t id, size_t n);
	void (*stream_reset)(struct quic_conn *, int64_t id, uint64_t code);
	void (*stream_stop_reading)(struct quic_conn *, int64_t id, uint64_t code);
	int64_t (*open_stream)(struct quic_conn *, void *stream_arg);
	bool (*stream_is_local)(struct quic_conn *, int64_t id);
	uint64_t (*streams_left)(struct quic_conn *);
	bool (*stalled)(struct quic_conn *);
	void (*get_stats)(struct quic_conn *, struct quic_conn_stats *);
	const struct sockaddr *(*local)(const struct quic_conn *, socklen_t *);
	const struct sockaddr *(*remote)(const struct quic_conn *, socklen_t *);
};

struct quic_conn {
	const struct quic_transport *tr;
	/* Set when the session runs over TLS on TCP: every transport call
	 * goes to quic-tcp.c, and `conn` and `batch` stay NULL. */
	struct quic_tcp *tcp;
	int qlog_fd;            /* QlogDir's file for it; -1: none */
	size_t qlog_bytes;
	ngtcp2_crypto_conn_ref conn_ref;
	ngtcp2_conn *conn;
	WOLFSSL *ssl;
	enum quic_role role;
	enum quic_state state;
	struct event_base *base;
	struct event *timer;
	struct event *closed_ev;
	struct udp_batch *batch;
	ngtcp2_path path;
	struct sockaddr_storage local, remote;
	const struct quic_conn_cbs *cbs;
	void *arg;
	const uint8_t *reset_secret;
	/* Server: the ID every CID we issue carries (NULL: none). */
	const struct cid_server_id *server_id;
	size_t max_udp_payload;
	size_t path_udp_best;  /* largest packet the current path has taken */

	uint8_t peer_key[KEY_LEN];
	bool peer_key_set;
	/* Our first source connection ID in hex: names the connection in
	 * status and its qlog file, for as long as it lives. */
	char id[QUIC_CONN_ID_STRLEN];
	bool early_ready;      /* client: 0-RTT keys installed */
	bool early_rx;         /* server: 0-RTT keys installed */
	bool early_refused;    /* server: TLS asked the client again
	                        * (HelloRetryRequest): the first
	                        * ClientHello's 0-RTT dropped */
	bool ticket_offered;   /* client: resuming, and the server has not
	                        * answered yet (cbs->ticket_spent) */
	uint64_t last_rx;      /* clock_now() of the last packet read */
	/* clock_now() when the peer last acknowledged something, or when
	 * nothing of ours was in flight: the stall detector's reference. */
	uint64_t last_ack;
	uint64_t inflight;     /* bytes in flight after the last read or write */
	bool all_acked;        /* a read left nothing in flight, and no
	                        * write has put anything there since */
	/* cbs->loss: when it may next be called, and the loss it last told */
	uint64_t loss_next, loss_told;
	size_t dgram_fit;      /* largest DATAGRAM the path takes, this loop */
	bool stateless_reset;
	struct quic_close_info close_info;

	struct dgramq dq;      /* DATAGRAMs waiting for the congestion window */

	LIST_HEAD(, quic_stream) streams;
	TAILQ_HEAD(, quic_stream) pending_streams;
	LIST_ENTRY(quic_conn) all_entry;
	/* Stream bytes queued and not yet acknowledged, over all streams, and
	 * the most they may reach (quic_conn_set_send_limit; 0: no limit). */
	size_t unacked, unacked_limit;
	bool unacked_blocked;  /* a writer found no room because of a limit */
	TAILQ_ENTRY(quic_conn) dirty_entry;
	bool dirty;
	struct quic_conn_stats stats;
};

/* quic.c, for both transports. */
void quic_mark_dirty(struct quic_conn *);
struct quic_stream *quic_stream_find(struct quic_conn *, int64_t id);
/* Find, or make an empty one. */
struct quic_stream *quic_stream_get(struct quic_conn *, int64_t id);
void quic_stream_set_pending(struct quic_conn *, struct quic_stream *);
void quic_stream_free(struct quic_conn *, struct quic_stream *);
/* Our bytes up to `upto` have left (QUIC: acknowledged; TCP: written):
 * free them and tell the owner there is room. */
void quic_stream_acked_to(struct quic_conn *, struct quic_stream *, uint64_t upto);
void quic_unacked_sub(struct quic_conn *, size_t);
void quic_wake_blocked(struct quic_conn *);
/* Mark closed and report `closed` from a fresh event. */
void quic_finish(struct quic_conn *);
/* A session on transport `tr`, which sets up its own part next: the
 * owner's callbacks, the queues. */
struct quic_conn *quic_conn_alloc(struct event_base *, const struct quic_settings *,
    const struct quic_conn_cbs *, void *arg, const struct sockaddr *remote,
    socklen_t remotelen, const struct quic_transport *tr);

#endif

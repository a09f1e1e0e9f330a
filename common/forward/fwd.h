/* The forwarded TCP connections of one QUIC connection: opening forward
 * streams (header, wait for the acceptor's status), accepting them (header,
 * then the owner connects), the relays, limits, counters and status. */
#ifndef ROVE_FWD_H
#define ROVE_FWD_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "transport/quic.h"
#include "wire/proto-fwd.h"

struct evbuffer;
struct json;
struct relay;

/* Named from the client's side, as ssh does: -L, -R, -D. */
enum fwd_kind { FWD_LOCAL, FWD_REMOTE, FWD_DYNAMIC };

/* Lifetime counters, kept by the owner across connections. */
struct fwd_counters {
	uint64_t opened;     /* relays started (opener: the target is up) */
	uint64_t completed;  /* relays that ended cleanly */
	uint64_t failed[PROTO_FWD_ERR_COUNT]; /* by error code (refused, ...) */
	/* Opener: streams whose header and first bytes went in 0-RTT that
	 * the server accepted. Acceptor: requests acted on from 0-RTT. */
	uint64_t opened_0rtt;
	/* rove: connections accepted while there was no session, held until
	 * there was one; of those, closed after waiting ForwardWait seconds,
	 * and closed at once because ForwardWaitMax were waiting already. */
	uint64_t held;
	uint64_t held_expired;
	uint64_t held_full;
	/* Forwards carried on over a new connection after theirs ended
	 * (PROTO_FEATURE_FWD_RESUME), and those that waited for one in vain
	 * (the wait ran out, or the peer no longer had them). */
	uint64_t resumed;
	uint64_t resume_lost;
};

struct fwd;
struct fwd_set;

struct fwd_ops {
	/* Acceptor side: the peer asks for `hdr`. The owner checks policy and
	 * connects, then calls fwd_connected or fwd_fail (now or later). */
	void (*request)(struct fwd_set *, struct fwd *, const struct proto_fwd_header *);
	/* Opener side: the acceptor answered (0: connected, else an error
	 * code). Called before the relay starts or the socket is closed. */
	void (*answered)(struct fwd *, uint64_t code, void *fwd_arg);
	/* The forward is being freed while its argument is still set: the
	 * owner drops whatever work it had pending for it. */
	void (*release)(struct fwd *, void *fwd_arg);
};

struct fwd_set {
	struct event_base *base;
	struct quic_conn *qc;
	size_t cap;  /* bytes per direction per forward */
	size_t max;  /* concurrent forwards */
	const struct fwd_ops *ops;
	void *arg;
	struct fwd_counters *counters;
	LIST_HEAD(, fwd) list;
	size_t n;
	const char *log_name; /* the peer, for messages */
	/* Said with a DENIED failure (may be NULL): who denied it, and
	 * where to allow it. */
	const char *deny_hint;
	/* Resumption: forwards opened now get an ID (the peer can resume
	 * them); where a peer's RESUME looks for the forward it names (NULL:
	 * nowhere); how long a parked forward waits for its new connection,
	 * and the timer that ends the wait. */
	bool resumable;
	struct fwd_set *park;
	uint64_t park_ms;
	struct event *park_ev;
};

/* `qc` may be NULL: a set that only parks forwards, or one whose first
 * connection comes later (fwd_set_attach). */
void fwd_set_init(struct fwd_set *, struct event_base *, struct quic_conn *,
    size_t cap, size_t max, const struct fwd_ops *, void *arg,
    struct fwd_counters *, const char *log_name);
/* The connection is gone: reset every TCP connection, free everything. */
void fwd_set_clear(struct fwd_set *);

/* Resumption (docs/PROTOCOL.md): a forward with an ID that is relaying
 * when its connection ends is parked, keeping its TCP connection and what
 * the peer may lack, for the `park_ms` of the set it is parked in; on the
 * next connection its opener sends RESUME and both ends send again what
 * the other lacks. */
/* The connection is going away: forwards that can carry on move to
 * `park` (which may be `set` itself), the rest are reset as by
 * fwd_set_clear; `set` no longer uses its connection. */
void fwd_set_park(struct fwd_set *set, struct fwd_set *park);
/* `set` has a new connection (established, not in 0-RTT: a RESUME must
 * not be replayable): the forwards this side opened that wait in `park`
 * move to it and ask the peer to carry on. */
void fwd_set_resume(struct fwd_set *park, struct fwd_set *set);


/* Opener: relay accepted TCP socket `fd` (ours from now on) through a new
 * stream asking for `hdr`. The relay starts at once: the socket's bytes
 * follow the header without waiting for the acceptor's answer (in 0-RTT
 * when the connection is still in it), and the answer's status byte is
 * taken off the front of what comes back. Returns NULL with *err set
 * (LIMIT when too many forwards or streams) after closing `fd` with a
 * reset. */
struct fwd *fwd_open(struct fwd_set *, enum fwd_kind, int fd,
    const struct proto_fwd_header *, void *fwd_arg, uint64_t *err);

/* Acceptor: the target is connected (fd is ours now) / could not be. */
void fwd_connected(struct fwd *, int fd);
void fwd_fail(struct fwd *, uint64_t code);
/* A dial's outcome (dial_cb shape, `arg` the forward): the owner's
 * argument is cleared, then fwd_connected or fwd_fail. */
void fwd_dialed(int fd, uint64_t err, void *arg);
/* The owner's per-forward pointer and a description of the target. */
void *fwd_get_arg(const struct fwd *);
void fwd_set_arg(struct fwd *, void *);
/* Opener: the accepted socket, still there while `answered` runs (for
 * replies such as SOCKS5's); -1 once it is closed. */
int fwd_get_fd(const struct fwd *);
enum fwd_kind fwd_kind_of(const struct fwd *);
void fwd_set_target(struct fwd *, const char *);

/* A parked set gets its new connection: forwards are opened on it again
 * (fwd_set_resume once it is established). */
void fwd_set_attach(struct fwd_set *, struct quic_conn *);

/* Opener: the handshake completed; forwards opened in 0-RTT are counted
 * in opened_0rtt if the server accepted it (else they were sent again in
 * 1-RTT, see quic_conn_open_stream). */
void fwd_set_handshake_done(struct fwd_set *, bool early_accepted);

/* Stream events, passed on from the owner's quic callbacks; they return
 * true when the stream was a forward stream and was handled. */
int fwd_on_data(struct fwd_set *, int64_t sid, void *stream_arg,
    const uint8_t *, size_t, bool fin);
/* Stream ends and acknowledgements of forward streams (streams.c passes
 * them on): the stream's argument is its forward (NULL: ignored). */
void fwd_stream_reset(struct quic_conn *, int64_t sid, uint64_t code,
    void *stream_arg, void *arg);
void fwd_stream_acked(struct quic_conn *, int64_t sid, void *stream_arg,
    void *arg);
void fwd_stream_close(struct quic_conn *, int64_t sid, uint64_t code,
    void *stream_arg, void *arg);

/* JSON: "forwards": [...] and "forward_counters": {...}. */
void fwd_status_json(const struct fwd_set *, const struct fwd_counters *,
    struct json *);
/* Text lines for people. */
void fwd_status_text(const struct fwd_set *, const struct fwd_counters *,
    struct evbuffer *);

#endif

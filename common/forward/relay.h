/* One TCP connection relayed over one QUIC stream, byte for byte: EOF and
 * FIN map to each other and each direction closes on its own; a TCP reset
 * and RESET_STREAM map to each other; buffering is bounded both ways. */
#ifndef ROVE_RELAY_H
#define ROVE_RELAY_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/quic.h"

struct relay;

/* Called once when the relay is finished (both directions done, or
 * aborted) and about to be freed by the caller through relay_free. `err`
 * is 0 for a clean end, else the stream error code seen or sent. */
typedef void (*relay_done_cb)(struct relay *, uint64_t err, void *arg);

struct relay_stats {
	uint64_t tcp_to_quic; /* bytes read from TCP and queued on the stream */
	uint64_t quic_to_tcp; /* bytes written to TCP */
};

/* Relay between connected TCP socket `fd` (nonblocking; the relay owns it)
 * and stream `sid` of `qc`. At most `cap` bytes are held in each direction:
 * TCP reading pauses once `cap` bytes are unacknowledged on the stream
 * (and resumes when no more than 3/4 `cap` are), and the stream's credit is returned only as TCP takes the bytes. The
 * forward header and status byte are the caller's business, done before. */
struct relay *relay_create(struct event_base *, struct quic_conn *qc, int64_t sid,
    int fd, size_t cap, relay_done_cb, void *arg);

/* Feed stream events from the owner's quic callbacks. */
void relay_on_data(struct relay *, const uint8_t *, size_t, bool fin);
void relay_on_reset(struct relay *, uint64_t code);
void relay_on_acked(struct relay *);
void relay_on_close(struct relay *, uint64_t code);

/* The connection died under the relay: reset the TCP connection. The done
 * callback is not called. */
void relay_abort(struct relay *);

/* Moving to another connection, for forwards that survive theirs: */
/* Whether the relay is still going both ways with a stream to move. */
bool relay_parkable(const struct relay *);
/* The connection is going away: keep the TCP connection, what TCP has not
 * taken yet, and our bytes the peer has not acknowledged (it may lack
 * them); stop reading TCP. The relay no longer touches the old stream. */
void relay_park(struct relay *);
/* A parked relay's new stream, whose header (or answer) is queued. Still
 * parked: only stream events and aborts work. With NULL: no connection
 * at all, for a relay that waits parked again, or whose stream closed
 * both ways and that only has TCP to finish (it ends as usual). */
void relay_attach(struct relay *, struct quic_conn *, int64_t sid);
/* The peer has taken `peer_rx` of our bytes: send it the rest of what was
 * kept (and our FIN again if we had sent it) and relay on. -1 when
 * `peer_rx` is not within what we kept (the forward cannot go on). */
int relay_resume(struct relay *, uint64_t peer_rx);
/* How many of the peer's bytes the relay has taken, over every stream. */
uint64_t relay_rx_total(const struct relay *);

/* The TCP socket, still the relay's; -1 once closed. */
int relay_get_fd(const struct relay *);
void relay_get_stats(const struct relay *, struct relay_stats *);
void relay_free(struct relay *);

#endif

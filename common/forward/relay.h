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

/* The TCP socket, still the relay's; -1 once closed. */
int relay_get_fd(const struct relay *);
void relay_get_stats(const struct relay *, struct relay_stats *);
void relay_free(struct relay *);

#endif

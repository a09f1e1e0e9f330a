/* Stream events of a connection whose streams carry forwarded TCP
 * connections (fwd.h) and UDP flows' set-ups (udprelay.h): each goes to
 * what its stream carries, told by the argument's kind (stream-tag.h).
 * `udp` is the owner's relay for this connection, or NULL when the
 * relay does not serve it (a connection given up, or a session before
 * its forwards): a flow's stream there is left alone. */
#ifndef ROVE_STREAMS_H
#define ROVE_STREAMS_H

#include <stdint.h>

#include "forward/udprelay.h"
#include "transport/quic.h"

void streams_reset(struct udp_relay *udp, struct quic_conn *, int64_t sid,
    uint64_t code, void *stream_arg);
/* Acknowledged data: only a forward's stream has a use for it (a flow's
 * sends its header or answer and no more). A quic_conn_cbs handler, to be
 * set directly (`arg` unused). */
void streams_acked(struct quic_conn *, int64_t sid, void *stream_arg,
    void *arg);
void streams_close(struct udp_relay *udp, struct quic_conn *, int64_t sid,
    uint64_t code, void *stream_arg);

#endif

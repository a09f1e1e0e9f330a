/* Stream events to forwards or UDP flows (streams.h). */
#include "forward/streams.h"

#include "forward/fwd.h"
#include "forward/stream-tag.h"

void
streams_reset(struct udp_relay *udp, struct quic_conn *qc, int64_t sid,
    uint64_t code, void *stream_arg)
{
	if (stream_kind_of(stream_arg) == STREAM_UDP_FLOW) {
		if (udp != NULL)
			(void)udp_relay_stream_gone(udp, sid, stream_arg, code);
		return;
	}
	fwd_stream_reset(qc, sid, code, stream_arg, NULL);
}

void
streams_acked(struct quic_conn *qc, int64_t sid, void *stream_arg,
    void *arg)
{
	(void)arg;
	if (stream_kind_of(stream_arg) == STREAM_UDP_FLOW)
		return;
	fwd_stream_acked(qc, sid, stream_arg, NULL);
}

void
streams_close(struct udp_relay *udp, struct quic_conn *qc, int64_t sid,
    uint64_t code, void *stream_arg)
{
	if (stream_kind_of(stream_arg) == STREAM_UDP_FLOW) {
		if (udp != NULL)
			(void)udp_relay_stream_gone(udp, sid, stream_arg, code);
		return;
	}
	fwd_stream_close(qc, sid, code, stream_arg, NULL);
}

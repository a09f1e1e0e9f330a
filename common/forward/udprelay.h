/* The UDP flows of one QUIC connection at work (docs/PROTOCOL.md section
 * 5, UDP flows): the opener sets a flow up on a stream for each new
 * source of its listening socket and passes that source's datagrams on
 * under the flow's context; the acceptor checks the target with its
 * owner, connects a UDP socket to it, answers, and passes the target's
 * datagrams back. Either side is both: rove opens the flows of its -L
 * udp/ listeners and accepts those of its -R udp/ forwards, roved the
 * other way round. udpflow.h keeps the books. */
#ifndef ROVE_UDPRELAY_H
#define ROVE_UDPRELAY_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "forward/udpflow.h"
#include "transport/quic.h"
#include "wire/proto-udp.h"

struct udp_link;
struct udp_relay;

/* Acceptor: the owner checks the target `host`:`port` (roved) or finds
 * the remote forward of port `port` (rove, `host` empty) and connects a
 * UDP socket to it (dial_start_udp), then calls udp_link_dialed with the
 * outcome, later, never from within the callback; it returns its handle
 * for the work, which udp_relay hands to `cancel` if the flow ends first.
 * NULL with *err set to a PROTO_FWD_ERR_* code: refused at once. */
typedef void *(*udp_request_cb)(struct udp_link *, const char *host,
    uint16_t port, void *arg, uint64_t *err);
typedef void (*udp_cancel_cb)(void *work);

struct udp_relay {
	struct event_base *base;
	struct quic_conn *qc;       /* NULL: no connection now */
	struct udp_flow_set set;
	struct event *expire_ev;
	udp_request_cb request;     /* acceptor only */
	udp_cancel_cb cancel;
	void *arg;
	const char *log_name;       /* the peer, for messages */
};

/* `self`: which side this is, which picks the contexts of the flows it
 * opens. `request` may be NULL: flows from the peer are refused. */
void udp_relay_init(struct udp_relay *, struct event_base *,
    enum proto_udp_opener self, struct udp_flow_counters *,
    udp_request_cb, udp_cancel_cb, void *arg, const char *log_name);
/* The connection is here / gone: every flow ends (a later connection sets
 * them up again as their sources send). The one before, if any, must
 * still be valid: its streams are reset and forget their flows. */
void udp_relay_attach(struct udp_relay *, struct quic_conn *);
void udp_relay_clear(struct udp_relay *);

/* Opener: datagram `data` from `src` reached the listening socket `fd`
 * of a forward to `host`:`port` (rove), or of the remote forward of port
 * `port` (roved, `host` ignored). */
void udp_relay_from_source(struct udp_relay *, int fd,
    const struct sockaddr *src, const char *host, uint16_t port,
    const uint8_t *data, size_t len);

/* Opener: the listening socket `fd` is readable: what it holds (a burst
 * at most) to udp_relay_from_source, or, with `refuse`, dropped and
 * counted as refused. */
void udp_relay_read(struct udp_relay *, int fd, const char *host,
    uint16_t port, bool refuse);

/* Opener, for a SOCKS5 UDP ASSOCIATE relay socket `fd`: as
 * udp_relay_from_source, but a flow is one source and one target (a
 * source may send to many), and the target's datagrams go back to the
 * source with `prefix` (the SOCKS UDP header naming the target, at most
 * SOCKS5_UDP_HEADER_MAX bytes) in front. */
void udp_relay_from_socks(struct udp_relay *, int fd,
    const struct sockaddr *src, const char *host, uint16_t port,
    const uint8_t *prefix, size_t prefixlen, const uint8_t *data, size_t len);

/* Opener: the listening socket `fd` is going away; its flows end. */
void udp_relay_forget_fd(struct udp_relay *, int fd);

/* A DATAGRAM frame's payload whose context is a flow's (>=
 * PROTO_CTX_UDP_BASE): to its flow, or dropped and counted. */
void udp_relay_datagram(struct udp_relay *, const uint8_t *, size_t);

/* Stream events: whether the stream (`stream_arg` its argument) is a UDP
 * flow's, or, for a new stream from the peer (NULL argument), begins
 * with a UDP header; if so the event was handled. */
bool udp_relay_stream_data(struct udp_relay *, int64_t sid, void *stream_arg,
    const uint8_t *, size_t, bool fin);
/* The stream was reset (with `code`) or closed. */
bool udp_relay_stream_gone(struct udp_relay *, int64_t sid, void *stream_arg,
    uint64_t code);

/* Acceptor: the owner's check and dial ended: `fd` a connected UDP
 * socket (now the relay's), or -1 with `err` a PROTO_FWD_ERR_* code. */
void udp_link_dialed(struct udp_link *, int fd, uint64_t err);

#endif

/* rove's port forwards: LocalForward (-L) and DynamicForward (-D, SOCKS5)
 * listeners, and RemoteForward (-R) requests and their connections. */
#ifndef ROVE_FORWARD_H
#define ROVE_FORWARD_H

#include <event2/event.h>
#include <stdbool.h>

#include "config/cfg.h"
#include "base/key.h"
#include "forward/fwd.h"
#include "ops/status.h"
#include "transport/quic.h"

struct forward;

/* Bind every LocalForward and DynamicForward listener now, so a busy port
 * is a startup error. Returns NULL with *cause set. */
struct forward *forward_create(struct event_base *, const struct cfg *, char **cause);
void forward_free(struct forward *);
/* This client's public key, which a denial names (the server's
 * AllowForward and AllowRemoteForward are per key). */
void forward_set_key(struct forward *, const uint8_t pub[static KEY_LEN]);
/* Its listeners for status: -L and -D here, -R as the server answered
 * (`connected`: there is a session to ask on). Returns how many. */
size_t forward_listeners(const struct forward *, bool connected,
    struct status_listener *out, size_t max);

/* Streams may be opened on the connection (in 0-RTT, or once the
 * handshake completed): connections held while there was none are opened
 * now, and new ones from here on. */
void forward_attach(struct forward *, struct quic_conn *);
/* The server's configuration arrived on a new connection, taking up
 * these PROTO_FEATURE_* bits of ours. */
void forward_server_features(struct forward *, uint64_t features);
/* The new connection is established: forwards that waited for it since
 * the last one ended ask the server to carry on (fwd_set_resume). */
void forward_resume(struct forward *);
/* The server's configuration arrived: send the RemoteForward requests. */
void forward_remote_request(struct forward *, struct quic_conn *);
/* The connection is gone. With `keep`, forwarded connections that can
 * carry on over the next one wait for it (fwd_set_park) and the rest are
 * reset; without, every one is reset. */
void forward_detach(struct forward *, bool keep);
/* The forward streams of the attached connection, or NULL (connections
 * accepted meanwhile wait, see ForwardWait). */
struct fwd_set *forward_set(struct forward *);
/* The flows of its udp/ LocalForwards. */
struct udp_relay *forward_udp(struct forward *);
/* A control message about remote forwards; -1 if malformed. */
int forward_control(struct forward *, uint64_t type, const uint8_t *, size_t);

/* SIGHUP: make the forwards those of `next`. A LocalForward or
 * DynamicForward on a new address starts listening, one gone stops
 * (connections made through it carry on), one whose target changed
 * keeps its socket. A new RemoteForward is asked for on `qc` (the
 * configured connection, or NULL: with the next one), and one removed is
 * taken back there (REMOTE_FORWARD_CANCEL, if the server takes it; else
 * what the server accepts on its port is refused). Returns -1,
 * changing nothing, with "FILE:LINE:" logged, when a new listener cannot
 * bind. */
int forward_reload(struct forward *, const struct cfg *next, struct quic_conn *qc);

/* Lifetime counters of forwarded connections, for status. */
const struct fwd_counters *forward_counters(const struct forward *);

#endif

/* What rove keeps in StateDir across restarts. roved: the stateless-reset
 * secret, the session-ticket keys (rotated) and the register of tickets it
 * issued, which makes each ticket single-use (a replayed 0-RTT flight finds
 * its ticket spent and gets a full handshake without early data). rove:
 * the last session ticket and transport parameters per server, for 0-RTT.
 * Every file is written mode 0600 into a 0700 directory. */
#ifndef ROVE_STATE_H
#define ROVE_STATE_H

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "key.h"

#define STATE_RESET_SECRET_LEN 32
#define STATE_TICKET_LIFETIME_S 86400   /* ticket lifetime, also rotation */
#define STATE_REGISTER_MAX 16384        /* tickets remembered at once */

struct state_server;

/* Open (creating as needed) the server state in `dir`. Returns NULL with
 * *cause set. */
struct state_server *state_server_open(const char *dir, char **cause);
void state_server_free(struct state_server *);

const uint8_t *state_reset_secret(const struct state_server *);

/* Make `ctx` encrypt its tickets with our keys and record them. Tickets
 * issued to a connection name the peer key it authenticated with
 * (quic_conn_peer_key through the connection); on resumption that key goes
 * back to the connection through quic_tls_resumed. */
void state_server_attach(struct state_server *, WOLFSSL_CTX *ctx);

struct state_stats {
	uint64_t issued, resumed, replayed, unknown;
};
void state_server_stats(const struct state_server *, struct state_stats *);

/* Client: the session remembered for the server `id` (a short string
 * naming server address and key). Load takes it out of the store, since
 * a ticket serves once. Returns 0 and malloc'd buffers, or -1. */
int state_client_take(const char *dir, const char *id, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen);
int state_client_save(const char *dir, const char *id, const uint8_t *session,
    size_t sessionlen, const uint8_t *params, size_t paramslen);

#endif

/* rove's connection lifecycle: connect, bring the tunnel up from the
 * server's configuration, carry packets, reconnect with back-off. */
#ifndef ROVE_CLIENT_H
#define ROVE_CLIENT_H

#include <event2/event.h>

#include "config/cfg.h"

struct client;

/* Start connecting. Returns NULL with *cause set. */
struct client *client_create(struct event_base *, const struct cfg *, int verbose,
    char **cause);
/* Close the connection cleanly, then stop the loop. */
void client_shutdown(struct client *);
/* Remove routes and the TUN device and release everything. */
void client_free(struct client *);
/* The exit status the program should end with (non-zero after a refusal). */
int client_exit_status(const struct client *);
/* SIGHUP: apply the forwards of `next` (forward_reload); every other
 * [Client] key needs a restart (daemon_main reports those). NULL counts
 * a refused reload. Returns 0 or -1. */
int client_reload(struct client *, const struct cfg *next);

#endif

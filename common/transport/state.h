/* What rove keeps in StateDir across restarts. roved: the stateless-reset
 * secret, the session-ticket keys and the address-validation token keys
 * (both rotated while it runs) and the register
 * of tickets it issued, which makes each ticket single-use (a replayed
 * 0-RTT flight finds its ticket spent and gets a full handshake without
 * early data). rove: the last session ticket and transport parameters per
 * server, for 0-RTT. Every file is written mode 0600 into a 0700
 * directory. */
#ifndef ROVE_STATE_H
#define ROVE_STATE_H

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/key.h"
#include "wire/cid.h"

struct event_base;

#define STATE_RESET_SECRET_LEN 32
#define STATE_TICKET_LIFETIME_S 86400   /* a ticket is good for a day */
#define STATE_ROTATE_S 86400            /* a new ticket key every day */
#define STATE_REGISTER_MAX 16384        /* tickets remembered at once */
/* Retry and NEW_TOKEN tokens: a new key every hour, the one before still
 * verifies for another hour (a NEW_TOKEN token's lifetime). */
#define STATE_TOKEN_ROTATE_S 3600
#define STATE_TOKEN_KEY_LEN 32
#define STATE_TOKEN_KEYS 2
/* Tickets remembered per peer key. A client keeps only the newest ticket
 * it was given, so a peer needs one unspent entry per device using its
 * key; spent entries only let a replay be told from an unknown ticket
 * (both get a full handshake). 32 leaves room for a few devices sharing
 * a key and for bursts of reconnects, and 512 peers fit at their quota
 * before the register's own limit applies. */
#define STATE_REGISTER_PEER_MAX 32
#define STATE_TAG_LEN 16                /* a ticket's name in the register */
#define STATE_PEER_PREFIX_LEN 16        /* names a peer in a group's ticket */

struct state_server;

struct state_opts {
	/* Arms the timer that rotates the ticket key; NULL: rotation happens
	 * only when state_server_tick is called or a ticket is issued. */
	struct event_base *base;
	/* Who may own StateDir and its files besides root and the running
	 * user: the configured User, or (uid_t)-1. */
	uid_t user;
	uint32_t rotate_s;      /* 0: STATE_ROTATE_S */
	uint32_t lifetime_s;    /* 0: STATE_TICKET_LIFETIME_S; at most rotate_s */
	uint32_t token_rotate_s; /* 0: STATE_TOKEN_ROTATE_S; also their lifetime */
	/* KeyDir: the stateless-reset, ticket and token keys live here,
	 * shared by a group of servers (NULL: in `dir`). It is checked as
	 * StateDir is; a member rotates a key under an flock(2) of
	 * keys.lock there, and the others read the new file. */
	const char *key_dir;
	/* This server's ID in the group, which its tickets name (cid.h);
	 * NULL or empty: a lone server. */
	const struct cid_server_id *server_id;
	/* A group member's ticket names its peer by the first
	 * STATE_PEER_PREFIX_LEN octets of its key: the configured peer key
	 * that begins so, into `key`; false if none. */
	bool (*peer_key)(const uint8_t *prefix, size_t len,
	    uint8_t key[KEY_LEN], void *arg);
	void *peer_key_arg;
};

/*
 * Open (creating as needed) the server state in `dir`. StateDir and its
 * files are opened without following symbolic links and refused unless
 * they belong to root, the running user or opts->user and no one else may
 * write them (keys: nor read them). Returns NULL with *cause set
 * ("StateDir DIR: ..."). state_server_open uses the defaults.
 */
struct state_server *state_server_open(const char *dir, char **cause);
struct state_server *state_server_open_opts(const char *dir,
    const struct state_opts *opts, char **cause);
void state_server_free(struct state_server *);

const uint8_t *state_reset_secret(const struct state_server *);

/* Make `ctx` encrypt its tickets with our keys and record them. Tickets
 * issued to a connection name the peer key it authenticated with
 * (quic_conn_peer_key through the connection); on resumption that key goes
 * back to the connection through quic_tls_resumed. */
void state_server_attach(struct state_server *, WOLFSSL_CTX *ctx);
/* This handshake resumed with a ticket that was unspent in the register
 * and spent it (wolfSSL may then accept its 0-RTT); false for a replayed,
 * unknown or absent ticket. roved acts on 0-RTT stream data only when
 * this holds. */
bool state_ticket_spent_here(WOLFSSL *ssl);
/* The ticket this handshake resumed was issued by another member of the
 * group (or another worker) and taken here once (state-ticket.c). Only
 * the issuer's register tells a fresh 0-RTT flight from a replay, so
 * roved dials 0-RTT forwards on such a ticket only once the handshake
 * completes. */
bool state_ticket_foreign(WOLFSSL *ssl);

/*
 * Ticket keys. The newest key encrypts; the one before it still decrypts
 * for one ticket lifetime after it was replaced, then it is erased. Both
 * are kept in StateDir (replaced atomically), so a restart keeps them.
 * state_server_tick rotates when the newest key has served rotate_s,
 * erases a retired key and forgets expired register entries (a bounded
 * number per call); it returns the seconds until it has work again. The
 * timer calls it; tests with a replaced wall clock call it themselves.
 */
unsigned state_server_tick(struct state_server *);

/* Token keys, kept in token.key and rotated the same way (every
 * token_rotate_s, the previous one still good for as long again), so that
 * a restart keeps NEW_TOKEN tokens valid. Sets keys[0] to the newest key
 * (which makes tokens) and keys[1] to the previous one while it verifies;
 * returns how many were set (1 or 2). Each is STATE_TOKEN_KEY_LEN bytes,
 * valid until the next call. */
size_t state_token_keys(struct state_server *,
    const uint8_t *keys[STATE_TOKEN_KEYS]);

/* Encrypt `len` bytes in place under the newest key, filling the key name,
 * the IV and the tag (the first STATE_TAG_LEN bytes of `mac`); open checks
 * and decrypts them under whichever key the name picks. 0 or -1. */
int state_ticket_seal(struct state_server *,
    uint8_t name[WOLFSSL_TICKET_NAME_SZ], uint8_t iv[WOLFSSL_TICKET_IV_SZ],
    uint8_t mac[WOLFSSL_TICKET_MAC_SZ], uint8_t *buf, size_t len);
int state_ticket_open(struct state_server *,
    const uint8_t name[WOLFSSL_TICKET_NAME_SZ],
    const uint8_t iv[WOLFSSL_TICKET_IV_SZ],
    const uint8_t mac[WOLFSSL_TICKET_MAC_SZ], uint8_t *buf, size_t len);

/*
 * The register, by ticket tag. Issue records a ticket for `peer`, making
 * room first if needed: the peer's own oldest spent entry, else its oldest
 * unspent one, once it holds STATE_REGISTER_PEER_MAX; when the whole
 * register is full, an expired entry, else the oldest of the peer holding
 * the most. So a peer never pushes out another's tickets while that one
 * holds no more than anyone else. Each call writes one 64-byte record in
 * place (spending: one byte) and looks at a bounded number of entries.
 * Spend marks an unspent ticket spent and gives its peer.
 */
enum state_ticket {
	STATE_TICKET_UNKNOWN,   /* never issued, expired or pushed out */
	STATE_TICKET_FRESH,     /* was unspent; now spent */
	STATE_TICKET_SPENT,     /* spent before: a replay */
};
void state_register_issue(struct state_server *,
    const uint8_t tag[STATE_TAG_LEN], const uint8_t peer[KEY_LEN]);
enum state_ticket state_register_spend(struct state_server *,
    const uint8_t tag[STATE_TAG_LEN], uint8_t peer[KEY_LEN]);

struct state_register_info {
	size_t live;            /* entries held */
	size_t peers;           /* distinct peers among them */
	size_t max_per_peer;    /* the most one peer holds */
	uint64_t evicted_quota; /* pushed out by the same peer's quota */
	uint64_t evicted_full;  /* pushed out because the register was full */
	uint64_t expired;       /* forgotten after their lifetime */
	uint64_t probes;        /* index slots looked at by lookups */
	uint64_t writes;        /* to the register file */
	uint64_t bytes_written;
};
void state_register_info(const struct state_server *,
    struct state_register_info *);

struct state_stats {
	uint64_t issued, resumed, replayed, unknown;
	uint64_t group_resumed; /* of resumed: issued by another member */
	uint64_t rotations;     /* ticket keys replaced while running */
	uint64_t token_rotations; /* token keys replaced while running */
};
void state_server_stats(const struct state_server *, struct state_stats *);

/* Client: the session remembered for the server `id` (a short string
 * naming server address and key). Load takes it out of the store, since
 * a ticket serves once. Returns 0 and malloc'd buffers, or -1. */
int state_client_take(const char *dir, const char *id, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen);
/* The same without taking it: the client offers it until the server has
 * answered an attempt (quic.h ticket_spent), then forgets it, so that a
 * first flight the server never saw does not cost the next one its
 * 0-RTT. */
int state_client_load(const char *dir, const char *id, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen);
void state_client_forget(const char *dir, const char *id);
int state_client_save(const char *dir, const char *id, const uint8_t *session,
    size_t sessionlen, const uint8_t *params, size_t paramslen);

/*
 * Client: a small record of its own in StateDir (dns.c's note of the
 * resolver settings it made, so that a later start can undo them after
 * a crash). The directory is checked as safedir_open does (`user`: the
 * configured User, or (uid_t)-1) and created if missing; the file is
 * written 0600 through a new file renamed over the old one, and read and
 * removed without following a link. Write and remove return 0 or -1 with
 * *cause set; read returns the bytes read (at most `cap`), 0 when there
 * is no such file, or -1 with *cause set.
 */
int state_note_write(const char *dir, uid_t user, const char *name,
    const void *data, size_t len, char **cause);
ssize_t state_note_read(const char *dir, uid_t user, const char *name,
    void *buf, size_t cap, char **cause);
int state_note_remove(const char *dir, uid_t user, const char *name,
    char **cause);

#endif

/* The inside of roved's StateDir (struct state_server: its files, its
 * rotated keys and its ticket register), shared by the files that make it
 * up and private to them: state.c (the directory, its files, the keyrings,
 * opening, closing and the timer), state-register.c (the single-use ticket
 * register and its file), state-ticket.c (sealing tickets and wolfSSL's
 * ticket callback) and state-client.c (rove's remembered sessions and
 * notes, which use only the file helpers). Nothing else includes it: the
 * rest of rove sees state.h. */
#ifndef ROVE_STATE_INT_H
#define ROVE_STATE_INT_H

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/chacha20_poly1305.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/key.h"
#include "state.h"
#include "wire/cid.h"

struct event;

/* No entry, no peer, no list link. */
#define NONE UINT32_MAX

struct ticket_key {
	uint8_t name[WOLFSSL_TICKET_NAME_SZ];
	uint8_t key[CHACHA20_POLY1305_AEAD_KEYSIZE];
	uint64_t created;  /* wall clock, seconds; 0: no key */
};
_Static_assert(CHACHA20_POLY1305_AEAD_KEYSIZE == STATE_TOKEN_KEY_LEN,
    "token keys share the ticket keys' layout");

/* A rotated pair of keys kept in one file: [0] makes (tickets, tokens) and
 * opens; [1], the key before it, still opens until one lifetime after it
 * stopped making, then it is erased. The file holds `keys` as is. */
struct keyring {
	const char *file;
	uint32_t rotate_s, lifetime_s;
	struct ticket_key keys[2];
	bool unsaved;           /* the file is behind: write it again */
	uint64_t rotations;     /* replaced while running */
	ino_t ino;              /* of the file last read or written */
};

enum reg_state { REG_EMPTY, REG_ISSUED, REG_USED };

/* Which pair of links of an entry a list uses. */
enum { L_ALL, L_PEER };

struct reg_list {
	uint32_t head, tail;
};

struct reg_entry {
	uint8_t tag[STATE_TAG_LEN];
	uint64_t expiry;
	uint64_t serial;        /* tells this ticket from a later one in the slot */
	uint32_t peer;
	/* [L_ALL]: every live entry in issue order, or the free list;
	 * [L_PEER]: the peer's unspent or spent entries, oldest first. */
	uint32_t link[2][2];    /* [list][0: previous, 1: next] */
	uint8_t state;
};

struct reg_peer {
	uint8_t key[KEY_LEN];
	uint32_t n;             /* entries it holds */
	struct reg_list issued, used;
	uint32_t bprev, bnext;  /* peers holding as many; the free list */
};

struct reg {
	struct reg_entry *e;    /* STATE_REGISTER_MAX */
	struct reg_peer *p;     /* STATE_REGISTER_MAX: never more peers than entries */
	uint32_t *index;        /* entry + 1 by tag; 0: empty */
	uint32_t *pindex;       /* peer + 1 by key */
	uint32_t bucket[STATE_REGISTER_PEER_MAX + 1]; /* peers by entries held */
	uint32_t maxn;          /* the most any peer holds */
	/* Slots freed since the start, and the first never used: memory is
	 * touched only as the register fills, not all at startup. */
	struct reg_list all, free;
	uint32_t efresh;
	uint32_t pfree, pfresh;
	size_t live, peers;
	uint64_t serial;
	uint64_t pseed;
	struct state_register_info info;
};

struct state_server {
	char *dir;
	int dirfd;
	/* Where the keys live: KeyDir, shared by a group of servers, or
	 * StateDir itself (keydir == dir, keyfd == dirfd). */
	char *keydir;
	int keyfd;
	int lockfd;             /* KEYS_LOCK_FILE in a KeyDir, else -1 */
	struct cid_server_id issuer; /* ours, named in our tickets */
	char *regname;          /* the register's file in StateDir */
	bool (*peer_key)(const uint8_t *, size_t, uint8_t *, void *);
	void *peer_key_arg;
	uid_t user;
	uint32_t lifetime_s;    /* of a ticket */
	struct event *timer;
	uint8_t reset_secret[STATE_RESET_SECRET_LEN];
	struct keyring tickets; /* session tickets (TLS) */
	struct keyring tokens;  /* Retry and NEW_TOKEN tokens (admit.c) */
	struct reg reg;
	int regfd;
	bool reg_failing;       /* a failed write was logged */
	struct state_stats stats;
};

/* --- state.c ----------------------------------------------------------- */

/* safedir_open, then private to us whatever the umask made it. */
int state_open_private_dir(const char *dir, uid_t user, bool create,
    char **cause);
/* Open one of our files in StateDir (KeyDir with `key`), never through a
 * link, and check it like the directory; a `secret` must not even be
 * readable by others. Returns the descriptor; -1 with errno ENOENT and no
 * cause if it does not exist (and O_CREAT is not given); -1 with *cause
 * otherwise. */
int state_open_file(struct state_server *, bool key, const char *name,
    int flags, bool secret, char **cause);
/* Replace a whole file in `dirfd` atomically, mode 0600. 0, or -1 with
 * errno. */
int state_write_file(int dirfd, const char *name, const void *data,
    size_t len);
/* Whether the keyring's newest key is due to be replaced at `now`. */
bool state_keyring_due(const struct keyring *, uint64_t now);
/* In a group, take the keys another member wrote if they are newer.
 * Returns whether the keys changed. */
bool state_keyring_reread(struct state_server *, struct keyring *);
/* The ticket key named `name`, if it may still be used; else NULL. */
const struct ticket_key *state_key_named(const struct state_server *,
    const uint8_t *name, uint64_t now);

/* --- state-register.c --------------------------------------------------- */

/* Storage for STATE_REGISTER_MAX entries, all empty; freed by
 * state_register_free. */
void state_register_init(struct reg *);
void state_register_free(struct reg *);
/* Open the register's file in StateDir and read back what is still valid.
 * 0, or -1 with *cause. */
int state_register_load(struct state_server *, char **cause);
/* Forget a bounded number of expired entries. Returns whether more may be
 * left (the caller comes back soon). */
bool state_register_sweep(struct state_server *, uint64_t now);
/* The live entry for `tag`, or NONE (an expired one is forgotten). */
uint32_t state_register_find(struct reg *, const uint8_t tag[STATE_TAG_LEN],
    uint64_t now);
/* Mark entry i spent, on disk too. */
void state_register_use(struct state_server *, uint32_t i);
/* Record another member's ticket, resumed here, as spent. Returns its
 * entry. */
uint32_t state_register_taken(struct state_server *,
    const uint8_t tag[STATE_TAG_LEN], const uint8_t peer[KEY_LEN]);

#endif /* ROVE_STATE_INT_H */

/* StateDir: reset secret, rotated ticket keys, single-use ticket register,
 * and the client's remembered sessions. */
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/chacha20_poly1305.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "quic.h"
#include "state.h"
#include "xmalloc.h"

#define TICKET_KEY_FILE "ticket.key"
#define RESET_KEY_FILE "reset.key"
#define REGISTER_FILE "tickets"
#define REGISTER_SLOTS (STATE_REGISTER_MAX * 2)

struct ticket_key {
	uint8_t name[WOLFSSL_TICKET_NAME_SZ];
	uint8_t key[CHACHA20_POLY1305_AEAD_KEYSIZE];
	uint64_t created;  /* wall clock, seconds */
};

enum reg_state { REG_EMPTY, REG_ISSUED, REG_USED, REG_DELETED };

struct reg_entry {
	uint8_t tag[16];
	uint8_t peer[KEY_LEN];
	uint64_t expiry;
	uint8_t state;
};

/* One record of the register's log on disk. */
struct reg_record {
	uint8_t type;      /* REG_ISSUED or REG_USED */
	uint8_t pad[7];
	uint64_t expiry;
	uint8_t tag[16];
	uint8_t peer[KEY_LEN];
};

struct state_server {
	char *dir;
	uint8_t reset_secret[STATE_RESET_SECRET_LEN];
	struct ticket_key keys[2]; /* [0] encrypts; both decrypt */
	struct reg_entry *reg;
	size_t nlive;
	int logfd;
	size_t logrecords;
	struct state_stats stats;
};

/* Per-handshake notes on the WOLFSSL object: the register entry this
 * handshake spent, and whether it was counted already. */
static int ex_spent = -1, ex_counted = -1;

static char *
path_in(const char *dir, const char *name)
{
	char *p;

	xasprintf(&p, "%s/%s", dir, name);
	return p;
}

static int
make_dir(const char *dir, char **cause)
{
	char *copy = xstrdup(dir);

	/* mkdir -p, each new level private to us. */
	for (char *p = copy + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(copy, 0700) == -1 && errno != EEXIST) {
				xasprintf(cause, "%s: %s", copy, strerror(errno));
				free(copy);
				return -1;
			}
			*p = c;
			if (c == '\0')
				break;
		}
	}
	free(copy);
	/* An existing directory too: it holds keys. */
	if (chmod(dir, 0700) == -1) {
		xasprintf(cause, "%s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Write a whole file atomically (temporary, then rename), mode 0600. The
 * temporary file is always a new one and no path here follows a symbolic
 * link: after User drops root the directory is that user's, and root must
 * not write or read through whatever it may have left there. */
static int
write_file(const char *path, const void *data, size_t len)
{
	char *tmp;
	int fd, ret = -1;

	xasprintf(&tmp, "%s.tmp", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd != -1) {
		if (write(fd, data, len) == (ssize_t)len && fsync(fd) == 0 &&
		    rename(tmp, path) == 0)
			ret = 0;
		close(fd);
	}
	if (ret != 0)
		unlink(tmp);
	free(tmp);
	return ret;
}

/* Read a whole small file; -1 if absent or not exactly `len` bytes. */
static int
read_exact(const char *path, void *data, size_t len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd == -1)
		return -1;
	n = read(fd, data, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

static uint64_t
wall_now(void)
{
	return (uint64_t)time(NULL);
}

static void
new_ticket_key(struct ticket_key *k)
{
	quic_random(k->name, sizeof k->name);
	quic_random(k->key, sizeof k->key);
	k->created = wall_now();
}

/* Load the keys, rotating once the current one has served a lifetime. */
static int
load_ticket_keys(struct state_server *st, char **cause)
{
	char *path = path_in(st->dir, TICKET_KEY_FILE);
	int ret = 0;

	if (read_exact(path, st->keys, sizeof st->keys) != 0) {
		new_ticket_key(&st->keys[0]);
		new_ticket_key(&st->keys[1]);
	} else if (wall_now() - st->keys[0].created >= STATE_TICKET_LIFETIME_S) {
		st->keys[1] = st->keys[0];
		new_ticket_key(&st->keys[0]);
	} else
		goto out;
	if (write_file(path, st->keys, sizeof st->keys) != 0) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		ret = -1;
	}
out:
	free(path);
	return ret;
}

static int
load_reset_secret(struct state_server *st, char **cause)
{
	char *path = path_in(st->dir, RESET_KEY_FILE);
	int ret = 0;

	if (read_exact(path, st->reset_secret, sizeof st->reset_secret) != 0) {
		quic_random(st->reset_secret, sizeof st->reset_secret);
		if (write_file(path, st->reset_secret, sizeof st->reset_secret) != 0) {
			xasprintf(cause, "%s: %s", path, strerror(errno));
			ret = -1;
		}
	}
	free(path);
	return ret;
}

static size_t
reg_slot(const uint8_t tag[16])
{
	size_t h;

	/* The tag is an AEAD tag: uniformly random already. */
	memcpy(&h, tag, sizeof h);
	return h % REGISTER_SLOTS;
}

static struct reg_entry *
reg_find(struct state_server *st, const uint8_t tag[16])
{
	for (size_t i = reg_slot(tag), n = 0; n < REGISTER_SLOTS;
	    i = (i + 1) % REGISTER_SLOTS, n++) {
		struct reg_entry *e = &st->reg[i];
		if (e->state == REG_EMPTY)
			return NULL;
		if (e->state != REG_DELETED && memcmp(e->tag, tag, 16) == 0)
			return e;
	}
	return NULL;
}

static void compact(struct state_server *);

static struct reg_entry *
reg_insert(struct state_server *st, const uint8_t tag[16])
{
	/* Full: drop what has expired; if still full, the new ticket goes
	 * unrecorded and so can never be used (never unsafe). */
	if (st->nlive >= STATE_REGISTER_MAX && st->logfd != -1)
		compact(st);
	if (st->nlive >= STATE_REGISTER_MAX)
		return NULL;
	for (size_t i = reg_slot(tag), n = 0; n < REGISTER_SLOTS;
	    i = (i + 1) % REGISTER_SLOTS, n++) {
		struct reg_entry *e = &st->reg[i];
		if (e->state == REG_EMPTY || e->state == REG_DELETED) {
			memcpy(e->tag, tag, 16);
			st->nlive++;
			return e;
		}
	}
	return NULL;
}

static void
log_append(struct state_server *st, uint8_t type, const struct reg_entry *e)
{
	struct reg_record r;

	if (st->logfd == -1)
		return;
	memset(&r, 0, sizeof r);
	r.type = type;
	r.expiry = e->expiry;
	memcpy(r.tag, e->tag, sizeof r.tag);
	memcpy(r.peer, e->peer, sizeof r.peer);
	/* Without the record, the ticket would be usable again after a
	 * restart; a failed write is logged and the ticket still spent. */
	if (write(st->logfd, &r, sizeof r) != (ssize_t)sizeof r)
		log_warn("ticket register: %s", strerror(errno));
	st->logrecords++;
}

/* Rewrite the log with the live entries only: bounded by time (expired
 * entries go) and by count (STATE_REGISTER_MAX). */
static void
compact(struct state_server *st)
{
	char *path = path_in(st->dir, REGISTER_FILE);
	size_t n = 0;
	uint64_t now = wall_now();
	struct reg_record *recs = xcalloc(st->nlive + 1, sizeof *recs);

	for (size_t i = 0; i < REGISTER_SLOTS; i++) {
		struct reg_entry *e = &st->reg[i];
		if (e->state != REG_ISSUED && e->state != REG_USED)
			continue;
		if (e->expiry <= now) {
			e->state = REG_DELETED;
			st->nlive--;
			continue;
		}
		recs[n].type = e->state;
		recs[n].expiry = e->expiry;
		memcpy(recs[n].tag, e->tag, 16);
		memcpy(recs[n].peer, e->peer, KEY_LEN);
		n++;
	}
	if (write_file(path, recs, n * sizeof *recs) != 0)
		log_warn("ticket register %s: %s", path, strerror(errno));
	free(recs);
	if (st->logfd != -1)
		close(st->logfd);
	st->logfd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	st->logrecords = n;
	free(path);
}

static void
load_register(struct state_server *st)
{
	char *path = path_in(st->dir, REGISTER_FILE);
	struct reg_record r;
	uint64_t now = wall_now();
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd != -1) {
		while (read(fd, &r, sizeof r) == (ssize_t)sizeof r) {
			struct reg_entry *e = reg_find(st, r.tag);
			if (r.expiry <= now)
				continue;
			if (e == NULL && (e = reg_insert(st, r.tag)) == NULL)
				continue;
			memcpy(e->peer, r.peer, KEY_LEN);
			e->expiry = r.expiry;
			if (e->state != REG_USED)
				e->state = r.type == REG_USED ? REG_USED : REG_ISSUED;
		}
		close(fd);
	}
	free(path);
	compact(st);
}

struct state_server *
state_server_open(const char *dir, char **cause)
{
	struct state_server *st = xcalloc(1, sizeof *st);

	st->dir = xstrdup(dir);
	st->logfd = -1;
	st->reg = xcalloc(REGISTER_SLOTS, sizeof *st->reg);
	if (make_dir(dir, cause) != 0 || load_reset_secret(st, cause) != 0 ||
	    load_ticket_keys(st, cause) != 0) {
		state_server_free(st);
		return NULL;
	}
	load_register(st);
	return st;
}

void
state_server_free(struct state_server *st)
{
	if (st == NULL)
		return;
	if (st->logfd != -1)
		close(st->logfd);
	explicit_bzero(st->keys, sizeof st->keys);
	explicit_bzero(st->reset_secret, sizeof st->reset_secret);
	free(st->reg);
	free(st->dir);
	free(st);
}

const uint8_t *
state_reset_secret(const struct state_server *st)
{
	return st->reset_secret;
}

void
state_server_stats(const struct state_server *st, struct state_stats *out)
{
	*out = st->stats;
}

static const uint8_t *
peer_key_of(WOLFSSL *ssl)
{
	ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);

	return ref != NULL ? quic_conn_peer_key(ref->user_data) : NULL;
}

/* wolfSSL's ticket callback: ChaCha20-Poly1305 under our key, the key
 * name and nonce as associated data; the tag (first 16 bytes of `mac`)
 * names the ticket in the register. */
static int
ticket_cb(WOLFSSL *ssl, unsigned char key_name[WOLFSSL_TICKET_NAME_SZ],
    unsigned char iv[WOLFSSL_TICKET_IV_SZ], unsigned char mac[WOLFSSL_TICKET_MAC_SZ],
    int enc, unsigned char *ticket, int inlen, int *outlen, void *arg)
{
	struct state_server *st = arg;
	uint8_t aad[WOLFSSL_TICKET_NAME_SZ + CHACHA20_POLY1305_AEAD_IV_SIZE];
	const struct ticket_key *k = NULL;
	struct reg_entry *e;
	const uint8_t *peer;

	if (inlen < 0)
		return WOLFSSL_TICKET_RET_FATAL;
	if (enc) {
		if ((peer = peer_key_of(ssl)) == NULL)
			return WOLFSSL_TICKET_RET_FATAL; /* no ticket: not fatal */
		k = &st->keys[0];
		memcpy(key_name, k->name, WOLFSSL_TICKET_NAME_SZ);
		quic_random(iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
		memset(iv + CHACHA20_POLY1305_AEAD_IV_SIZE, 0,
		    WOLFSSL_TICKET_IV_SZ - CHACHA20_POLY1305_AEAD_IV_SIZE);
		memcpy(aad, key_name, WOLFSSL_TICKET_NAME_SZ);
		memcpy(aad + WOLFSSL_TICKET_NAME_SZ, iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
		memset(mac, 0, WOLFSSL_TICKET_MAC_SZ);
		if (wc_ChaCha20Poly1305_Encrypt(k->key, iv, aad, sizeof aad, ticket,
		    (word32)inlen, ticket, mac) != 0)
			return WOLFSSL_TICKET_RET_FATAL;
		*outlen = inlen;
		if ((e = reg_insert(st, mac)) != NULL) {
			memcpy(e->peer, peer, KEY_LEN);
			e->expiry = wall_now() + STATE_TICKET_LIFETIME_S;
			e->state = REG_ISSUED;
			log_append(st, REG_ISSUED, e);
			if (st->logrecords > 2 * st->nlive + 1024)
				compact(st);
		}
		st->stats.issued++;
		return WOLFSSL_TICKET_RET_OK;
	}
	for (size_t i = 0; i < 2; i++) {
		if (memcmp(st->keys[i].name, key_name, WOLFSSL_TICKET_NAME_SZ) == 0)
			k = &st->keys[i];
	}
	if (k == NULL)
		return WOLFSSL_TICKET_RET_REJECT;
	memcpy(aad, key_name, WOLFSSL_TICKET_NAME_SZ);
	memcpy(aad + WOLFSSL_TICKET_NAME_SZ, iv, CHACHA20_POLY1305_AEAD_IV_SIZE);
	/* wolfSSL asks once per cipher suite it tries: count each handshake
	 * once, and let the handshake that spent the ticket retry it. */
	e = reg_find(st, mac);
	if (e == NULL || e->expiry <= wall_now()) {
		if (wolfSSL_get_ex_data(ssl, ex_counted) == NULL) {
			st->stats.unknown++;
			wolfSSL_set_ex_data(ssl, ex_counted, st);
		}
		return WOLFSSL_TICKET_RET_REJECT;
	}
	if (e->state == REG_USED && wolfSSL_get_ex_data(ssl, ex_spent) != e) {
		/* Single use: a second ClientHello with this ticket is a
		 * replay (or a client retrying); no resumption, no 0-RTT. */
		if (wolfSSL_get_ex_data(ssl, ex_counted) == NULL) {
			st->stats.replayed++;
			wolfSSL_set_ex_data(ssl, ex_counted, st);
		}
		return WOLFSSL_TICKET_RET_REJECT;
	}
	if (wc_ChaCha20Poly1305_Decrypt(k->key, iv, aad, sizeof aad, ticket,
	    (word32)inlen, mac, ticket) != 0)
		return WOLFSSL_TICKET_RET_REJECT;
	*outlen = inlen;
	if (e->state == REG_USED)
		return WOLFSSL_TICKET_RET_OK; /* this handshake, another suite */
	e->state = REG_USED;
	wolfSSL_set_ex_data(ssl, ex_spent, e);
	log_append(st, REG_USED, e);
	if (!quic_tls_resumed(ssl, e->peer))
		return WOLFSSL_TICKET_RET_REJECT;
	st->stats.resumed++;
	return WOLFSSL_TICKET_RET_OK;
}

void
state_server_attach(struct state_server *st, WOLFSSL_CTX *ctx)
{
	if (ex_spent < 0) {
		/* Index 0 is the app data (our ngtcp2_crypto_conn_ref), which
		 * wolfSSL's counter hands out first: skip it. */
		ex_spent = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		if (ex_spent == 0)
			ex_spent = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		ex_counted = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	}
	wolfSSL_CTX_set_TicketEncCb(ctx, ticket_cb);
	wolfSSL_CTX_set_TicketEncCtx(ctx, st);
	wolfSSL_CTX_set_TicketHint(ctx, STATE_TICKET_LIFETIME_S);
}

/* Client session files: "RVS1", then length-prefixed session and params. */
static const char session_magic[4] = { 'R', 'V', 'S', '1' };

int
state_client_save(const char *dir, const char *id, const uint8_t *session,
    size_t sessionlen, const uint8_t *params, size_t paramslen)
{
	size_t len = sizeof session_magic + 8 + sessionlen + paramslen;
	uint8_t *buf = xmalloc(len), *p = buf;
	uint32_t l;
	char *path, *cause = NULL;
	int ret;

	if (make_dir(dir, &cause) != 0) {
		log_warn("%s", cause);
		free(cause);
		free(buf);
		return -1;
	}
	memcpy(p, session_magic, sizeof session_magic);
	p += sizeof session_magic;
	l = (uint32_t)sessionlen;
	memcpy(p, &l, 4);
	if (sessionlen > 0)
		memcpy(p + 4, session, sessionlen);
	p += 4 + sessionlen;
	l = (uint32_t)paramslen;
	memcpy(p, &l, 4);
	if (paramslen > 0)
		memcpy(p + 4, params, paramslen);
	xasprintf(&path, "%s/session-%s", dir, id);
	ret = write_file(path, buf, len);
	free(path);
	free(buf);
	return ret;
}

int
state_client_take(const char *dir, const char *id, uint8_t **session,
    size_t *sessionlen, uint8_t **params, size_t *paramslen)
{
	uint8_t buf[16384];
	uint32_t l1, l2;
	ssize_t n;
	char *path;
	int fd;

	xasprintf(&path, "%s/session-%s", dir, id);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	/* A ticket serves once: whatever happens, it is gone now. */
	unlink(path);
	free(path);
	if (fd == -1)
		return -1;
	n = read(fd, buf, sizeof buf);
	close(fd);
	if (n < (ssize_t)sizeof session_magic + 8 ||
	    memcmp(buf, session_magic, sizeof session_magic) != 0)
		return -1;
	memcpy(&l1, buf + 4, 4);
	if ((size_t)n < 8 + (size_t)l1 + 4)
		return -1;
	memcpy(&l2, buf + 8 + l1, 4);
	if ((size_t)n != 12 + (size_t)l1 + l2)
		return -1;
	*session = xmalloc(l1);
	memcpy(*session, buf + 8, l1);
	*sessionlen = l1;
	*params = xmalloc(l2 ? l2 : 1);
	memcpy(*params, buf + 12 + l1, l2);
	*paramslen = l2;
	return 0;
}

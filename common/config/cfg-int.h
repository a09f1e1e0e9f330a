/* The inside of the configuration parser, shared by its parts: the line
 * parser and loader (cfg.c), the value parsers (cfg-value.c), the
 * cross-field checks of finish (cfg-check.c) and the printer
 * (cfg-print.c). Private to those four files; other modules use cfg.h,
 * and harnesses that drive the parser line by line use cfg-table.h. */
#ifndef ROVE_CFG_INT_H
#define ROVE_CFG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "base/addr.h"
#include "base/log.h"
#include "cfg-table.h"

/* Room to escape the longest line (every byte as \xNN). */
#define ESC_LEN (CFG_MAX_LINE * 4 + 1)
#define MAX_HOST 256 /* a DNS name is at most 253 bytes */

/* Append "PATH:LINE: message" to the parse's errors (for a line past the
 * file's last, "-L SPEC: message", naming the command-line option); the
 * line is kept so that finish can sort the errors by it. */
void cfg_error_at(struct cfg_parse *, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define error_at(cp, line, ...) cfg_error_at((cp), (line), __VA_ARGS__)
/* An error at the line being parsed. */
#define parse_error(cp, ...) cfg_error_at((cp), (cp)->line, __VA_ARGS__)

/* The name of section `sec` (one CFG_SEC_* bit), "?" for none. */
const char *cfg_section_name(unsigned sec);
/* CFG_SEC_* of a section's name, in any case; 0 if there is none. */
unsigned cfg_section_named(const char *name);
/* The section holding a role's own keys: [Server] or [Client]. */
unsigned cfg_main_section(enum cfg_role);

/* `rel` made absolute against `dir`; malloc'd. */
char *cfg_resolve(const char *dir, const char *rel);

/* Free `n` AllowForward rules and the array. */
void cfg_forward_rules_free(struct cfg_forward_rule *, size_t n);

/* Parse `v` (modified in place) as key `k` into `obj`, a struct cfg or a
 * struct cfg_peer. A rejected value is reported through parse_error and
 * leaves the field as it was; returns 0 or -1. */
int cfg_value_parse(struct cfg_parse *, const struct cfg_key *k, void *obj,
    char *v);

/* The arrays of Listen or of ListenTCP (`k` says which) in `cfg`, with the
 * line each entry came from (0: the default). */
struct listen_set {
	struct sockaddr_storage *ss;
	socklen_t *len;
	size_t *n;
	unsigned *line;
};
struct listen_set cfg_value_listen_set(const struct cfg_key *k,
    struct cfg *cfg);

/* The cross-field checks of finish, once defaults are filled in: required
 * keys, peers against the server's addresses and each other, forwards
 * against each other, timers, User and Group. It also sets the values that
 * follow from others: ServerID's config bits, ServerTCP's default from
 * Server, and Group's from User. `eof` is the line to blame for what is
 * missing from the whole file. Errors go to cp's list. */
void cfg_check(struct cfg_parse *, unsigned eof);

/* User text for a message: anything but printable ASCII becomes \xNN. */
static inline const char *
quote(char buf[static ESC_LEN], const char *s)
{
	log_escape(buf, ESC_LEN, s, strlen(s));
	return buf;
}

static inline bool
is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* `s` without leading and trailing blanks (cut in place). */
static inline char *
trim(char *s)
{
	size_t len;

	while (is_space(*s))
		s++;
	len = strlen(s);
	while (len > 0 && is_space(s[len - 1]))
		s[--len] = '\0';
	return s;
}

/* Address of the field at `off` in `obj`. */
static inline void *
field(void *obj, size_t off)
{
	return (char *)obj + off;
}

static inline const void *
cfield(const void *obj, size_t off)
{
	return (const char *)obj + off;
}

/* True if every host bit of `p` (beyond its length) equals `one`. */
static inline bool
host_bits_all(const struct prefix *p, bool one)
{
	unsigned bits = p->addr.family == AF_INET ? 32 : 128;

	for (unsigned i = p->len; i < bits; i++) {
		bool set = (p->addr.b[i / 8] >> (7 - i % 8)) & 1;
		if (set != one)
			return false;
	}
	return true;
}

static inline const char *
family_name(int family)
{
	return family == AF_INET ? "IPv4" : "IPv6";
}

static inline bool
prefix_equal(const struct prefix *a, const struct prefix *b)
{
	return a->len == b->len && addr_equal(&a->addr, &b->addr);
}

#endif

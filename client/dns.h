/* rove: the server's DNS servers and search domains on the host's
 * resolver while the tunnel is up, and undone when it goes down, after a
 * crash too. Through systemd-resolved's per-link DNS (D-Bus, sd-bus) when
 * it runs, else through resolvconf, else not at all (with a warning). */
#ifndef ROVE_DNS_H
#define ROVE_DNS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/cfg.h"
#include "wire/proto.h"

enum dns_backend {
	DNS_BACKEND_NONE,
	DNS_BACKEND_RESOLVED,   /* org.freedesktop.resolve1, per link */
	DNS_BACKEND_RESOLVCONF, /* resolvconf -a IFNAME / -d IFNAME */
};

enum dns_state {
	DNS_STATE_OFF,     /* DNS = no, or no TUN device (forward-only) */
	DNS_STATE_NONE,    /* the server sent no DNS: nothing to do */
	DNS_STATE_APPLIED, /* on the resolver now */
	DNS_STATE_FAILED,  /* the server sent some; none could be applied */
};

/* What the tunnel's resolver should be, as SERVER_CONFIG carries it. */
struct dns_config {
	struct ipaddr servers[PROTO_MAX_DNS];
	size_t nservers;
	char search[PROTO_MAX_DNS_SEARCH][ADDR_DNS_NAME_MAX + 1];
	size_t nsearch;
};

/* For rove status; the pointers live as long as the struct dns. */
struct dns_status {
	enum dns_state state;
	enum dns_backend backend;        /* DNS_STATE_APPLIED only */
	const struct dns_config *conf;   /* what the server sent */
	const char *error;               /* DNS_STATE_FAILED: why */
};

struct dns;

/*
 * Before setup, as the program starts (as root, before it drops root):
 * first undo what an earlier run that did not exit cleanly left on the
 * resolver (its note in StateDir), whatever DNS says. Then, when
 * `cfg->dns` holds and the process is about to drop root (User), fork a
 * helper that keeps root for this one job: it takes only "apply this to
 * the TUN device named like cfg->tun" and "restore", checks both, and
 * restores by itself when the main process goes away, even by SIGKILL.
 * Without User the process does the work itself. Returns NULL with
 * *cause set only when the helper cannot be started.
 */
struct dns *dns_create(const struct cfg *cfg, char **cause);

/* Put `conf` on the resolver for the TUN device `ifname` (`ifindex`).
 * The same configuration again does nothing; an empty one restores.
 * Failures are logged and kept for status; the tunnel works on. */
void dns_apply(struct dns *, const char *ifname, int ifindex,
    const struct dns_config *conf);
/* Undo what dns_apply did, if anything. */
void dns_restore(struct dns *);
/* Restore, end the helper (waiting for it) and release. NULL is fine. */
void dns_free(struct dns *);

/* The state for status; a NULL dns reads as DNS_STATE_OFF. */
void dns_get_status(const struct dns *, struct dns_status *);
const char *dns_backend_name(enum dns_backend);
const char *dns_state_name(enum dns_state);

#endif

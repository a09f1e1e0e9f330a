/* What roved and rove share around their event loop: loading the config
 * with every error reported, signal handling, and dropping root. */
#ifndef ROVE_DAEMON_H
#define ROVE_DAEMON_H

#include <event2/event.h>
#include <stdio.h>

#include "config/cfg.h"

/* Load `path` for `role`, plus command-line forwards (may be NULL, 0); on
 * failure print every "FILE:LINE: message" to stderr and return -1. */
int daemon_load_config(const char *path, enum cfg_role role, struct cfg *cfg,
    const struct cfg_option *opts, size_t nopts);
/* The same over `text` (NULL: read `path`), which `path` then names. */
int daemon_load_text(const char *path, const char *text, enum cfg_role role,
    struct cfg *cfg, const struct cfg_option *opts, size_t nopts);

/* Ignore SIGPIPE (and SIGHUP, until daemon_main sets up the reload);
 * call `stop(arg)` on the first SIGINT/SIGTERM and leave the loop at once
 * on a second. Fills evs[0] and evs[1] with the signal events to free;
 * evs[2] is left NULL for the caller's SIGHUP event. */
void daemon_signals(struct event_base *, void (*stop)(void *), void *arg,
    struct event *evs[3]);

/* Route libevent's own messages into our log. */
void daemon_log_libevent(void);
/* An event base whose timers run within tens of microseconds of their
 * time (QUIC's pacing needs it); NULL on failure. */
struct event_base *daemon_base_new(void);

/* What a program runs between loading its configuration and exiting. */
struct daemon_ops {
	const char *name;        /* for logs: "roved", "rove" */
	enum cfg_role role;
	/* The usage lines; to stdout (--help), every option described too. */
	void (*help)(FILE *);
	void *(*create)(struct event_base *, const struct cfg *, int verbose,
	    char **cause);
	void (*shutdown)(void *);  /* on SIGINT/SIGTERM */
	void (*free)(void *);
	/* At the end of a run (may be NULL: free): undo only what outlives
	 * the process and leave the memory to the kernel, still reachable
	 * from the program's own globals (so a leak checker stays quiet).
	 * The configuration is then kept too. */
	void (*exit)(void *);
	int (*exit_status)(const void *); /* NULL: 0 */
	/* Set up and unprivileged, about to run the loop (may be NULL): a
	 * server tells the service manager it is ready here; a client does
	 * so once its tunnel is up (notify.h). */
	void (*started)(void *);
	/* SIGHUP read the configuration again into `next`, without an
	 * error: apply what changed and can change while running, logging
	 * one line per change, and return 0; or change nothing and return
	 * -1 with every reason logged as "FILE:LINE: message". `next` is
	 * the caller's and freed after the call: keep copies. NULL: the file
	 * had errors (logged already); the program only counts the refusal.
	 * Keys that need a restart are reported by daemon_main afterwards
	 * (cfg_diff_restart). `buf` and `len` are the bytes `next` was
	 * loaded from (NULL with `next`). */
	int (*reload)(void *, const struct cfg *next, const char *buf,
	    size_t len);
	/* SIGHUP, before anything is read (may be NULL: the file): 0 to
	 * read the file; 1 to load *buf (len bytes, malloc'd; freed by the
	 * caller) instead, e.g. a server's worker taking what worker 0
	 * applied; -1 to do nothing (the reason logged). */
	int (*reload_source)(void *, char **buf, size_t *len);
};

/* The common main: parse -c FILE [-f] [-n] [-s] [-T] [-v] (and for the client
 * role, -L/-R/-D forwards as ssh writes them), load and check the
 * configuration (every error printed), then create, drop root when User
 * is set (privdrop.h), run the event loop until shutdown, and free.
 * SIGHUP reads the same file (and the same command-line forwards) again
 * and hands the result to ops->reload.
 * Returns the process exit status. */
int daemon_main(int argc, char **argv, const struct daemon_ops *);

#endif

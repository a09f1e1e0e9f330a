/* The control socket: one request line in, one answer out, over a Unix
 * stream socket ("rove status" talks to a running rove or roved). */
#ifndef ROVE_CONTROL_H
#define ROVE_CONTROL_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct event_base;
struct evbuffer;

/* Longest request line, not counting the "\n" (or "\r\n") that ends it. */
#define CONTROL_MAX_REQUEST 256
/* Connections served at once; more wait in the listen backlog. */
#define CONTROL_MAX_CLIENTS 16
/* Default inactivity timeout of either side, in milliseconds. */
#define CONTROL_TIMEOUT_MS 5000

/* A long answer is made in parts, so that no part keeps the event loop
 * from everything else for long: the next part is asked for each time
 * the connection has no more than this many bytes left to write. */
#define CONTROL_MORE_LOW 65536

/*
 * The rest of an answer: `next` adds its next part to `out` and returns
 * whether more will follow; `done` (may be NULL) frees `arg` once the
 * answer is complete or the connection ended first. `next` runs from the
 * event loop, so what it reads may have changed since the last part.
 */
struct control_more {
	bool (*next)(struct evbuffer *out, void *arg);
	void (*done)(void *arg);
	void *arg;
};

/*
 * Fill `out` with the answer to `request`: a NUL-terminated line of 1 to
 * CONTROL_MAX_REQUEST printable ASCII characters (0x20-0x7e), newline
 * removed, for example "status" or "status json". Unknown requests are the
 * callback's to answer. An answer that goes on sets `more` (zeroed before
 * the call); `out` is its first part. It must not free the control.
 */
typedef void (*control_cb)(struct evbuffer *out, const char *request,
    void *arg, struct control_more *more);

struct control;

/*
 * Listen on a Unix stream socket at `path`. Its directory is created with
 * mode 0700 if missing (only the last level). The directory must be owned
 * by the effective user (or the uid given to control_allow_owner), must
 * not be writable by group or others, and must not be a symbolic link;
 * otherwise creation fails with a cause naming the directory and what is
 * wrong with it. A stale socket file is removed first; if a process still
 * accepts on it, or `path` is something other than a socket, creation
 * fails and nothing is removed. The socket has mode 0660, so members of
 * the daemon's group may ask for status if the directory lets them in
 * (one made beforehand with mode 0750, say).
 *
 * Each connection sends one line; a line that is too long, empty or not
 * printable ASCII is answered "error: bad request\n". The answer is written
 * and the connection closed. Connections idle for longer than the timeout
 * are closed without an answer. Writes may raise SIGPIPE: the caller
 * ignores it (the daemons do).
 *
 * Returns the control (caller owns it), or NULL with *cause set (caller
 * frees).
 */
struct control *control_create(struct event_base *, const char *path,
    control_cb cb, void *arg, char **cause);
/* Also accept a socket directory owned by `uid`: a program started as
 * root gives it to User, whom it becomes after setup, so that it can still
 * remove its socket at exit. Process-wide; (uid_t)-1 undoes it. */
void control_allow_owner(uid_t uid);
/* Change the inactivity timeout for connections accepted from now on. */
void control_set_timeout(struct control *, unsigned timeout_ms);
/* Close every connection and the socket, and remove the socket file if it
 * is still ours. Accepts NULL. */
void control_free(struct control *);

/*
 * Client side: connect to `path`, send `request` (1 to CONTROL_MAX_REQUEST
 * printable ASCII characters, no newline) and copy the whole answer to
 * `out`, which is flushed. Blocks; fails if the server is silent for
 * CONTROL_TIMEOUT_MS (control_request_timeout: `timeout_ms`).
 * Returns 0, or -1 with *cause set (caller frees). On failure part of the
 * answer may already be in `out`.
 */
int control_request(const char *path, const char *request, FILE *out,
    char **cause);
int control_request_timeout(const char *path, const char *request, FILE *out,
    unsigned timeout_ms, char **cause);

#endif

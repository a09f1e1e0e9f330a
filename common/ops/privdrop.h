/* Dropping root after setup: which capabilities each program still
 * needs, the files handed to User, and the switch itself. */
#ifndef ROVE_PRIVDROP_H
#define ROVE_PRIVDROP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/cfg.h"

/* A capability set: bit N is capability N of <linux/capability.h>, as in
 * the CapEff line of /proc/PID/status. */
#define PRIVDROP_CAP(n) (UINT64_C(1) << (n))

/*
 * The capabilities a program configured by `cfg` needs once set up:
 * - rove with a TUN: CAP_NET_ADMIN. It brings the TUN device up (attach,
 *   addresses, MTU, routes) when the server's configuration arrives, pins
 *   a host route to the server, and opens new UDP sockets with
 *   SO_RCVBUFFORCE/SO_SNDBUFFORCE on reconnects and migrations.
 * - rove with Tun = none: nothing (no routes; new sockets get the
 *   ordinary buffer limits).
 * - roved with a TUN: CAP_NET_ADMIN, to route the AllowedIPs a reload
 *   (SIGHUP) adds into the TUN and remove those it drops; with Tun =
 *   none, not that.
 * - roved: also CAP_NET_BIND_SERVICE if some peer's AllowRemoteForward
 *   lists a port below 1024 (those listeners open when the peer asks).
 *   Its TUN, addresses and UDP sockets are all set up at start.
 */
uint64_t privdrop_caps(const struct cfg *cfg);

/* Not root but started with capabilities (a systemd unit's User= with
 * AmbientCapabilities=): once set up, give up those privdrop_caps does
 * not list. Returns 0 (also when there was nothing to drop), or -1 with
 * *cause set. */
int privdrop_trim(const struct cfg *cfg, char **cause);

/* "CAP_NET_ADMIN", "CAP_NET_ADMIN, CAP_NET_BIND_SERVICE", ... or "none"
 * for the empty set; unknown bits print as "cap_N". Always NUL-terminates
 * `buf` (truncating if `len` is too small) and returns it. */
const char *privdrop_caps_str(uint64_t caps, char *buf, size_t len);

/*
 * Whether a process running as `euid`/`egid` must switch identity for
 * `cfg`: 0 if there is nothing to do (no User, or the process is that
 * user and group already), 1 if it must (it is root), -1 with *cause set
 * (caller frees) if it cannot: a user other than root cannot become
 * another user.
 */
int privdrop_needed(const struct cfg *cfg, uid_t euid, gid_t egid,
    char **cause);

/*
 * Before setup (as root): create StateDir (each missing level 0700) and
 * the control socket's directory (the last level, 0700) if missing, and
 * give what was created here to User/Group, so the unprivileged process
 * can still write them (the caller then has control_create accept a
 * socket directory owned by User: control_allow_owner). Returns 0, or -1
 * with *cause set.
 */
int privdrop_prepare(const struct cfg *cfg, char **cause);

/*
 * After setup (as root): check StateDir as safedir_open does (not a
 * link, owned by root or User, writable by its owner only; else -1 with
 * "StateDir DIR: ..."), give it, the regular files in it and the
 * control socket to User/Group, switch to them with no supplementary
 * groups, keep only privdrop_caps(cfg) (effective and permitted; the
 * bounding and ambient sets are cleared), check that StateDir is still
 * writable, and log one line saying what the process runs as now.
 * Returns 0, or -1 with *cause set; after a failure the process may hold
 * part of its old privileges and should exit.
 */
int privdrop_apply(const struct cfg *cfg, char **cause);

#endif

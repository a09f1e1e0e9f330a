/* What a reload changes: the running configuration against the file read
 * again. Pure functions over struct cfg, so the rules are tested alone
 * (tests/unit/config/test-cfg-diff.c); roved and rove apply what they find. */
#ifndef ROVE_CFG_DIFF_H
#define ROVE_CFG_DIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "cfg.h"

#define CFG_DIFF_NONE ((size_t)-1)

/* The [Peer] keys a reload applies to a peer it keeps, as a bit set. */
#define CFG_DIFF_ADDRESS (1u << 0)
#define CFG_DIFF_ALLOWED_IPS (1u << 1)
#define CFG_DIFF_ALLOW_FORWARD (1u << 2)
#define CFG_DIFF_ALLOW_REMOTE_FORWARD (1u << 3)

/* Which of those keys differ between `a` and `b`. Lists compare as sets:
 * the same entries in another order are no change. */
unsigned cfg_diff_peer(const struct cfg_peer *a, const struct cfg_peer *b);

/* For each peer of `next` (nnext of them), into match[i]: the index in
 * `old` of the peer it continues, the one with the same Name and
 * PublicKey, or CFG_DIFF_NONE when it is new. An old peer that no entry
 * names is removed, so a peer whose key changed is removed and added. */
void cfg_diff_peers(const struct cfg_peer *const *old, size_t nold,
    const struct cfg_peer *next, size_t nnext, size_t *match);

/* The keys of `next`'s main section ([Server] or [Client]) that differ
 * from `running`'s and cannot change without a restart, one message each
 * appended to `out`: "Listen: needs a restart (running: ...; file:
 * ...)". Every [Server] key is such a key; of [Client], all but the
 * forwards (LocalForward, RemoteForward, DynamicForward), which rove
 * applies at once. Returns how many were added. */
size_t cfg_diff_restart(const struct cfg *running, const struct cfg *next,
    struct cfg_errors *out);

#endif

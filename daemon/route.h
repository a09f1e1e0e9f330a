/* The route table: destination address -> owner (a peer) by longest prefix. */
#ifndef ROVE_ROUTE_H
#define ROVE_ROUTE_H

#include <stddef.h>

#include "base/addr.h"

/* A table of prefixes, each owned by an opaque `owner`. Lookups are by
 * longest prefix match; IPv4 and IPv6 are kept apart. The table is small
 * (a few entries per peer) and changes rarely; lookups are on the per-packet
 * path and must not allocate. */
struct route_table;

struct route_table *route_create(void);
void route_free(struct route_table *);

/* Add `p` (host bits are masked off) for `owner`. Returns 0, or -1 if the
 * exact prefix is already owned by someone else (a configuration overlap). */
int route_add(struct route_table *, const struct prefix *p, void *owner);
/* Remove every prefix owned by `owner`. */
void route_remove_owner(struct route_table *, void *owner);
/* The owner of the longest prefix containing `a`, or NULL. */
void *route_lookup(const struct route_table *, const struct ipaddr *a);
size_t route_count(const struct route_table *);

#endif

/* The TLS-over-TCP transport's way through a proxy: on a connected,
 * non-blocking socket to the proxy, the HTTP CONNECT or SOCKS5 exchange
 * (wire/proxy.h) that makes it a tunnel to the server, before TLS starts.
 * Private to quic-tcp.c (and unit tests). */
#ifndef ROVE_TCP_PROXY_H
#define ROVE_TCP_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include "quic.h"

struct tcp_proxy_hs;

/* The exchange for `p` (HTTP or SOCKS5), its first message ready. */
struct tcp_proxy_hs *tcp_proxy_hs_new(const struct quic_tcp_proxy *p);
/* Go as far as the socket allows: 1 when the tunnel is up (nothing past
 * the proxy's reply has been read), 0 to wait (*want_write: for
 * writability, else for input), -1 when it failed, with `reason` (never
 * the credentials) and *refused for an answer that retrying will not
 * change soon (HTTP 403 or 407, SOCKS5 credentials or rules). */
int tcp_proxy_hs_step(struct tcp_proxy_hs *, int fd, bool *want_write,
    char *reason, size_t reasonlen, bool *refused);
/* "proxy 198.18.1.1:3128" for messages (host:port as configured). */
const char *tcp_proxy_hs_name(const struct tcp_proxy_hs *);
/* Wipes the credentials. NULL is fine. */
void tcp_proxy_hs_free(struct tcp_proxy_hs *);

#endif

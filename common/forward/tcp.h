/* Nonblocking TCP connect with a timeout, its failure named as a forward
 * error code, and listening sockets (TCP, and the bound UDP sockets of
 * udp/ forwards). */
#ifndef ROVE_TCP_H
#define ROVE_TCP_H

#include <event2/event.h>
#include <stdint.h>
#include <sys/socket.h>

#define TCP_CONNECT_TIMEOUT_MS 10000

struct tcp_connect;

/* Result: `fd` >= 0 connected (now the callee's), or -1 with `err` one of
 * PROTO_FWD_ERR_REFUSED / _UNREACHABLE / _TIMEOUT / _RESET. */
typedef void (*tcp_connect_cb)(int fd, uint64_t err, void *arg);

/* Start connecting; `cb` runs once, later, from the event loop (never from
 * inside this call). An IPv6 socket is V6ONLY, so an IPv4-mapped address
 * fails (UNREACHABLE) instead of reaching an IPv4 host. Returns NULL only
 * when no socket can be made, after which `cb` is not called (and *err
 * says why). */
struct tcp_connect *tcp_connect_start(struct event_base *, const struct sockaddr *,
    socklen_t, unsigned timeout_ms, tcp_connect_cb, void *arg, uint64_t *err);
/* Give up on a pending connect; `cb` is not called. */
void tcp_connect_cancel(struct tcp_connect *);

/* Translate a connect errno into a forward error code. */
uint64_t tcp_errno_to_fwd(int err);

/* A nonblocking listening socket on `sa`. Returns the fd or -1 with *cause
 * and errno as the call that failed left it. */
int tcp_listen(const struct sockaddr *, socklen_t, char **cause);
/* The same for UDP: a nonblocking socket bound to `sa` (IPv6 ones
 * V6ONLY), whose datagrams are a udp/ forward's. */
int udp_listen(const struct sockaddr *, socklen_t, char **cause);
/* A UDP forward's socket's kernel buffers, `bytes` each way (beyond the
 * system's limit when root): a udp/ listener takes the bursts of every
 * source at once (UDP_LISTEN_BUF), a flow's own socket to its target
 * one flow's (UDP_FLOW_BUF). */
#define UDP_LISTEN_BUF (4 * 1024 * 1024)
#define UDP_FLOW_BUF (1024 * 1024)
void udp_buffers(int fd, int bytes);

#endif

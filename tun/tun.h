/* The TUN device: open, configure through netlink, read and write packets. */
#ifndef ROVE_TUN_H
#define ROVE_TUN_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "addr.h"

struct tun {
	int fd;                 /* nonblocking, IFF_TUN | IFF_NO_PI */
	char name[IFNAMSIZ];
	int ifindex;
};

/* Create (or attach to) TUN device `name` ("rove%d" patterns allowed).
 * Returns 0, or -1 with *cause set (caller frees). */
int tun_open(struct tun *, const char *name, char **cause);
/* The two halves of tun_open, for a process that drops root in between:
 * /dev/net/tun is often root's alone (mode 0600), while attaching needs
 * only CAP_NET_ADMIN. tun_clone_open returns the clone device's fd, or -1
 * with *cause set; tun_attach takes the fd over (it is closed on failure)
 * and returns as tun_open. */
int tun_clone_open(char **cause);
int tun_attach(struct tun *, int fd, const char *name, char **cause);
/* Close the fd; a non-persistent TUN disappears with it. */
void tun_close(struct tun *);

/* Read one packet; returns its length, 0 if none is waiting (EAGAIN), or
 * -errno. Write one packet; returns 0 or -errno (EAGAIN means dropped). */
ssize_t tun_read(struct tun *, uint8_t *buf, size_t len);
int tun_write(struct tun *, const uint8_t *pkt, size_t len);

#endif

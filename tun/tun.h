/* The TUN device: open, configure through netlink, read and write packets. */
#ifndef ROVE_TUN_H
#define ROVE_TUN_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/addr.h"
#include "offload.h"

struct tun {
	int fd;                 /* nonblocking, IFF_TUN | IFF_NO_PI */
	char name[IFNAMSIZ];
	int ifindex;
	/* IFF_VNET_HDR: every read and write starts with a virtio_net_hdr.
	 * Stays on once set, even when the offloads are turned off. */
	bool vnet_hdr;
	bool persistent;        /* made beforehand (IFF_PERSIST): not ours */
	unsigned offloads;      /* OFFLOAD_F_* the kernel took; 0 = none */
	/* Test hook (ROVE_TEST_TUN_EINVAL): fail the first GSO read or
	 * write with EINVAL, as the kernel bugs this fallback is for do. */
	bool fail_read, fail_write;
};

/* Create (or attach to) TUN device `name` ("rove%d" patterns allowed),
 * with offloads when `offload` (whichever the kernel accepts; it logs
 * what it enabled). Returns 0, or -1 with *cause set (caller frees). */
int tun_open(struct tun *, const char *name, bool offload, char **cause);
/* The two halves of tun_open, for a process that drops root in between:
 * /dev/net/tun is often root's alone (mode 0600), while attaching needs
 * only CAP_NET_ADMIN. tun_clone_open returns the clone device's fd, or -1
 * with *cause set; tun_attach takes the fd over (it is closed on failure)
 * and returns as tun_open. */
int tun_clone_open(char **cause);
int tun_attach(struct tun *, int fd, const char *name, bool offload,
    char **cause);
/* Close the fd; a non-persistent TUN disappears with it. */
void tun_close(struct tun *);
/* Does process `pid` hold a descriptor attached to TUN device `name`?
 * (/proc/PID/fdinfo says "iff: NAME" for one.) For a privileged helper
 * that must act on its unprivileged parent's device and no other. */
bool tun_held_by(pid_t pid, const char *name);

/* Read one packet and its virtio_net_hdr into *hdr (zero without
 * IFF_VNET_HDR); returns its length, 0 if none is waiting (EAGAIN), or
 * -errno. With offloads the packet may be a 64 KB super-packet. */
ssize_t tun_read_vnet(struct tun *, struct virtio_net_hdr *hdr, uint8_t *buf,
    size_t len);
/* tun_read_vnet for a device without offloads: the header is dropped. */
ssize_t tun_read(struct tun *, uint8_t *buf, size_t len);
/* Write one packet as it is; returns 0 or -errno (EAGAIN means dropped). */
int tun_write(struct tun *, const uint8_t *pkt, size_t len);
/* Write iov[0], a virtio_net_hdr, and the packet in iov[1..]; without
 * IFF_VNET_HDR iov[0] must be a zero header and is left out. Returns as
 * tun_write. */
int tun_writev(struct tun *, const struct iovec *iov, int iovcnt);

/* A read or write failed with EINVAL at run time: some kernels reject
 * offload packets they themselves produced. Turn the offloads off
 * (logged once); the device keeps working one packet at a time. */
void tun_offload_off(struct tun *, const char *why);

#endif

/* The TUN device: open /dev/net/tun, nonblocking packet read and write. */
#include <sys/ioctl.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <string.h>
#include <unistd.h>

#include "tun.h"
#include "xmalloc.h"

#define TUN_CLONE_DEVICE "/dev/net/tun"

int
tun_clone_open(char **cause)
{
	int fd;

	fd = open(TUN_CLONE_DEVICE, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1)
		xasprintf(cause, "opening %s: %s", TUN_CLONE_DEVICE,
		    strerror(errno));
	return fd;
}

/* Attach the clone device `fd` to interface `name`. */
int
tun_attach(struct tun *t, int fd, const char *name, char **cause)
{
	struct ifreq ifr;
	size_t len;
	int ret = -1;
	unsigned ifindex;

	t->fd = -1;
	t->name[0] = '\0';
	t->ifindex = 0;

	if (name == NULL || *name == '\0') {
		xasprintf(cause, "TUN device name is empty");
		goto out;
	}
	len = strlen(name);
	if (len >= IFNAMSIZ) {
		xasprintf(cause, "TUN device name too long (at most %d "
		    "characters): %s", IFNAMSIZ - 1, name);
		goto out;
	}

	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, name, len);
	/* No packet-information header: each read or write is exactly one
	 * IP packet, and the kernel tells v4 from v6 by the version nibble. */
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		xasprintf(cause, "creating TUN device %s: %s", name,
		    strerror(errno));
		goto out;
	}
	ifr.ifr_name[IFNAMSIZ - 1] = '\0';

	/* The kernel resolved any "%d" in the name; look up what it chose. */
	ifindex = if_nametoindex(ifr.ifr_name);
	if (ifindex == 0) {
		xasprintf(cause, "looking up TUN device %s: %s", ifr.ifr_name,
		    strerror(errno));
		goto out;
	}

	t->fd = fd;
	memcpy(t->name, ifr.ifr_name, sizeof t->name);
	t->ifindex = (int)ifindex;
	fd = -1;
	ret = 0;
out:
	if (fd != -1)
		close(fd);
	return ret;
}

int
tun_open(struct tun *t, const char *name, char **cause)
{
	int fd;

	t->fd = -1;
	t->name[0] = '\0';
	t->ifindex = 0;
	if (name == NULL || *name == '\0') {
		xasprintf(cause, "TUN device name is empty");
		return -1;
	}
	if (strlen(name) >= IFNAMSIZ) {
		xasprintf(cause, "TUN device name too long (at most %d "
		    "characters): %s", IFNAMSIZ - 1, name);
		return -1;
	}
	if ((fd = tun_clone_open(cause)) == -1)
		return -1;
	return tun_attach(t, fd, name, cause);
}

void
tun_close(struct tun *t)
{
	if (t == NULL)
		return;
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

ssize_t
tun_read(struct tun *t, uint8_t *buf, size_t len)
{
	ssize_t n;

	if (t == NULL || t->fd < 0)
		return -EBADF;
	if (buf == NULL || len == 0)
		return -EINVAL;
	for (;;) {
		n = read(t->fd, buf, len);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -errno;
	}
	/* A packet larger than the buffer is cut short by the kernel; never
	 * hand a truncated packet on as if it were whole. */
	if ((size_t)n > len)
		return -EMSGSIZE;
	return n;
}

int
tun_write(struct tun *t, const uint8_t *pkt, size_t len)
{
	ssize_t n;

	if (t == NULL || t->fd < 0)
		return -EBADF;
	if (pkt == NULL || len == 0)
		return -EINVAL;
	for (;;) {
		n = write(t->fd, pkt, len);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		return -errno;
	}
	/* The TUN driver takes whole packets or nothing. */
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

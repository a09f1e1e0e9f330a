/* The TUN device: open /dev/net/tun, nonblocking packet read and write. */
#include <sys/ioctl.h>
#include <sys/uio.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "tun.h"

#define TUN_CLONE_DEVICE "/dev/net/tun"

/* USO arrived in Linux 6.2; older uapi headers lack the flags. */
#ifndef TUN_F_USO4
#define TUN_F_USO4 0x20
#define TUN_F_USO6 0x40
#endif

/* Enable what the kernel accepts, most first: TSO needs checksum
 * offload, and a kernel before 6.2 refuses the USO bits with EINVAL. */
static void
enable_offloads(struct tun *t)
{
	static const struct {
		unsigned tun, ours;
		const char *names;
	} tries[] = {
		{ TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6,
		  OFFLOAD_F_CSUM | OFFLOAD_F_TSO | OFFLOAD_F_USO,
		  "checksum, TSO4, TSO6, USO4, USO6" },
		{ TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6,
		  OFFLOAD_F_CSUM | OFFLOAD_F_TSO, "checksum, TSO4, TSO6" },
		{ TUN_F_CSUM, OFFLOAD_F_CSUM, "checksum" },
	};
	const char *env = getenv("ROVE_TEST_TUN_EINVAL");

	for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
		if (ioctl(t->fd, TUNSETOFFLOAD, tries[i].tun) == 0) {
			t->offloads = tries[i].ours;
			log_info("%s: offloads on: %s", t->name, tries[i].names);
			break;
		}
	}
	if (t->offloads == 0)
		log_info("%s: the kernel accepts no offloads", t->name);
	/* An environment variable rather than a test-only build, so the
	 * e2e tests run the very binaries they test. It can do no more
	 * than Offload = off does. */
	if (env != NULL && t->offloads != 0) {
		t->fail_read = strcmp(env, "read") == 0;
		t->fail_write = strcmp(env, "write") == 0;
	}
}

void
tun_offload_off(struct tun *t, const char *why)
{
	if (t->offloads == 0)
		return;
	t->offloads = 0;
	t->fail_read = t->fail_write = false;
	if (ioctl(t->fd, TUNSETOFFLOAD, 0u) == -1)
		log_warn("%s: %s failed with EINVAL; turning offloads off "
		    "failed too: %s", t->name, why, strerror(errno));
	else
		log_warn("%s: %s failed with EINVAL; offloads turned off",
		    t->name, why);
}

int
tun_clone_open(char **cause)
{
	int fd;

	fd = open(TUN_CLONE_DEVICE, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1)
		xasprintf(cause, "opening %s: %s%s", TUN_CLONE_DEVICE,
		    strerror(errno), errno == EACCES || errno == EPERM ?
		    " (a TUN device needs root, or CAP_NET_ADMIN and access "
		    "to the device; Tun = none runs forwards only)" : "");
	return fd;
}

/* Attach the clone device `fd` to interface `name`. */
int
tun_attach(struct tun *t, int fd, const char *name, bool offload, char **cause)
{
	struct ifreq ifr;
	size_t len;
	int ret = -1, hdrsz = (int)sizeof(struct virtio_net_hdr);
	unsigned ifindex;

	memset(t, 0, sizeof *t);
	t->fd = -1;

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
	/* With offloads each packet also carries a virtio_net_hdr: its
	 * GSO type, segment size and partial checksum. */
	if (offload)
		ifr.ifr_flags |= IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		xasprintf(cause, "creating TUN device %s: %s%s", name,
		    strerror(errno), errno == EBUSY ? " (another process "
		    "holds it, such as a roved or rove on this host: give each "
		    "its own Tun name)" : errno == EPERM ? " (needs "
		    "CAP_NET_ADMIN)" : "");
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

	if (offload && ioctl(fd, TUNSETVNETHDRSZ, &hdrsz) == -1) {
		xasprintf(cause, "setting the virtio header size of %s: %s",
		    ifr.ifr_name, strerror(errno));
		goto out;
	}
	/* A device made beforehand (ip tuntap add ... user rove) is
	 * adopted: it lets a user without CAP_NET_ADMIN attach, and it is
	 * its maker's, so it outlives us. Say so rather than leave it
	 * silently. */
	if (ioctl(fd, TUNGETIFF, &ifr) == 0 && (ifr.ifr_flags & IFF_PERSIST)) {
		t->persistent = true;
		log_info("%s: a persistent TUN device made beforehand (ip "
		    "tuntap): used as it is, and left in place at exit",
		    ifr.ifr_name);
	}
	t->fd = fd;
	memcpy(t->name, ifr.ifr_name, sizeof t->name);
	t->ifindex = (int)ifindex;
	t->vnet_hdr = offload;
	if (offload)
		enable_offloads(t);
	fd = -1;
	ret = 0;
out:
	if (fd != -1)
		close(fd);
	return ret;
}

int
tun_open(struct tun *t, const char *name, bool offload, char **cause)
{
	int fd;

	memset(t, 0, sizeof *t);
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
	return tun_attach(t, fd, name, offload, cause);
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
tun_read_vnet(struct tun *t, struct virtio_net_hdr *hdr, uint8_t *buf, size_t len)
{
	struct iovec iov[2];
	ssize_t n;

	memset(hdr, 0, sizeof *hdr);
	if (t == NULL || t->fd < 0)
		return -EBADF;
	if (buf == NULL || len == 0)
		return -EINVAL;
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof *hdr;
	iov[1].iov_base = buf;
	iov[1].iov_len = len;
	for (;;) {
		if (t->vnet_hdr)
			n = readv(t->fd, iov, 2);
		else
			n = read(t->fd, buf, len);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINVAL)
			tun_offload_off(t, "reading");
		return -errno;
	}
	if (t->vnet_hdr) {
		if ((size_t)n < sizeof *hdr)
			return -EIO;
		n -= (ssize_t)sizeof *hdr;
		if (t->fail_read && hdr->gso_type != VIRTIO_NET_HDR_GSO_NONE) {
			/* The test hook: this super-packet is lost, as with
			 * a kernel that fails the read. */
			tun_offload_off(t, "reading");
			return -EINVAL;
		}
	}
	/* A packet larger than the buffer is cut short by the kernel; never
	 * hand a truncated packet on as if it were whole. */
	if ((size_t)n > len)
		return -EMSGSIZE;
	return n;
}

ssize_t
tun_read(struct tun *t, uint8_t *buf, size_t len)
{
	struct virtio_net_hdr hdr;

	return tun_read_vnet(t, &hdr, buf, len);
}

int
tun_write(struct tun *t, const uint8_t *pkt, size_t len)
{
	struct virtio_net_hdr hdr;
	struct iovec iov[2];

	if (pkt == NULL || len == 0)
		return -EINVAL;
	memset(&hdr, 0, sizeof hdr);
	iov[0].iov_base = &hdr;
	iov[0].iov_len = sizeof hdr;
	iov[1].iov_base = (void *)(uintptr_t)pkt;
	iov[1].iov_len = len;
	return tun_writev(t, iov, 2);
}

int
tun_writev(struct tun *t, const struct iovec *iov, int iovcnt)
{
	const struct virtio_net_hdr *hdr = iov[0].iov_base;
	size_t len = 0;
	ssize_t n;
	int skip = t != NULL && t->vnet_hdr ? 0 : 1;

	if (t == NULL || t->fd < 0)
		return -EBADF;
	for (int i = skip; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (iovcnt < 2 || len == 0)
		return -EINVAL;
	if (t->fail_write && hdr->gso_type != VIRTIO_NET_HDR_GSO_NONE) {
		tun_offload_off(t, "writing");
		return -EINVAL;
	}
	for (;;) {
		n = writev(t->fd, iov + skip, iovcnt - skip);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EINVAL)
			tun_offload_off(t, "writing");
		return -errno;
	}
	/* The TUN driver takes whole packets or nothing. */
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

bool
tun_held_by(pid_t pid, const char *name)
{
	char path[64], line[64 + IF_NAMESIZE];
	struct dirent *de;
	bool held = false;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%ld/fdinfo", (long)pid);
	if ((d = opendir(path)) == NULL)
		return false;
	while (!held && (de = readdir(d)) != NULL) {
		FILE *f;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if ((fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		if ((f = fdopen(fd, "re")) == NULL) {
			close(fd);
			continue;
		}
		while (fgets(line, sizeof line, f) != NULL) {
			size_t n = strcspn(line, "\n");

			line[n] = '\0';
			if (strncmp(line, "iff:\t", 5) == 0 &&
			    strcmp(line + 5, name) == 0) {
				held = true;
				break;
			}
		}
		fclose(f);
	}
	closedir(d);
	return held;
}

/* Dropping root after setup: switch to User/Group, keep only the
 * capabilities the running program still needs (libcap-ng). */
#include <cap-ng.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/safedir.h"
#include "base/xmalloc.h"
#include "privdrop.h"

/* Intermediate directories created for StateDir: root's, but passable, so
 * that the unprivileged process reaches its own directory at the end while
 * nobody but root can put anything in between. */
#define PASS_DIR_MODE 0711
#define STATE_DIR_MODE 0700
/* As control_create makes it: only the user may reach the socket, unless
 * the administrator made the directory beforehand for a group to pass. */
#define SOCKET_DIR_MODE 0700

uint64_t
privdrop_caps(const struct cfg *cfg)
{
	uint64_t caps = 0;

	/* rove sets routes and addresses when the server's configuration
	 * arrives; roved routes AllowedIPs into its TUN when a reload
	 * changes them. */
	if (cfg->tun != NULL)
		caps |= PRIVDROP_CAP(CAP_NET_ADMIN);
	if (cfg->role == CFG_ROLE_CLIENT)
		return caps;
	for (size_t i = 0; i < cfg->npeers; i++) {
		const struct cfg_peer *p = &cfg->peers[i];

		for (size_t j = 0; j < p->nallow_remote_forward; j++) {
			if (p->allow_remote_forward[j].port < 1024)
				caps |= PRIVDROP_CAP(CAP_NET_BIND_SERVICE);
		}
	}
	return caps;
}

const char *
privdrop_caps_str(uint64_t caps, char *buf, size_t len)
{
	static const struct {
		unsigned cap;
		const char *name;
	} names[] = {
		{ CAP_NET_ADMIN, "CAP_NET_ADMIN" },
		{ CAP_NET_BIND_SERVICE, "CAP_NET_BIND_SERVICE" },
	};
	size_t off = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (caps == 0) {
		snprintf(buf, len, "none");
		return buf;
	}
	for (unsigned bit = 0; bit < 64; bit++) {
		char other[16];
		const char *name = NULL;
		int n;

		if (!(caps & PRIVDROP_CAP(bit)))
			continue;
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
			if (names[i].cap == bit)
				name = names[i].name;
		}
		if (name == NULL) {
			snprintf(other, sizeof other, "cap_%u", bit);
			name = other;
		}
		n = snprintf(buf + off, len - off, "%s%s", off > 0 ? ", " : "",
		    name);
		if (n < 0 || (size_t)n >= len - off)
			break; /* truncated, and still terminated */
		off += (size_t)n;
	}
	return buf;
}

int
privdrop_needed(const struct cfg *cfg, uid_t euid, gid_t egid, char **cause)
{
	if (cfg->user == NULL)
		return 0;
	if (euid == 0)
		return 1;
	if (euid != cfg->uid) {
		xasprintf(cause, "%s:%u: User: running as uid %u, not root: "
		    "cannot switch to user '%s' (uid %u)", cfg->path,
		    cfg->user_line, (unsigned)euid, cfg->user,
		    (unsigned)cfg->uid);
		return -1;
	}
	if (egid != cfg->gid) {
		if (cfg->group != NULL)
			xasprintf(cause, "%s:%u: Group: running as gid %u, not "
			    "root: cannot switch to group '%s' (gid %u)",
			    cfg->path, cfg->group_line, (unsigned)egid,
			    cfg->group, (unsigned)cfg->gid);
		else
			xasprintf(cause, "%s:%u: User: running as gid %u, not "
			    "root: cannot switch to the primary group of '%s' "
			    "(gid %u)", cfg->path, cfg->user_line,
			    (unsigned)egid, cfg->user, (unsigned)cfg->gid);
		return -1;
	}
	return 0;
}

/* Give the directory just created at `path` to the user. It is opened
 * without following a symbolic link: the parent may belong to the user
 * already, and root must not chown whatever a link points at. */
static int
own_new_dir(const struct cfg *cfg, const char *path, mode_t mode,
    bool give, char **cause)
{
	int fd, ret = -1;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* mkdir honoured the umask; the mode is meant exactly. */
	if (fchmod(fd, mode) == -1 ||
	    (give && fchown(fd, cfg->uid, cfg->gid) == -1))
		xasprintf(cause, "%s: %s", path, strerror(errno));
	else
		ret = 0;
	close(fd);
	return ret;
}

/* mkdir -p for StateDir (or KeyDir): the missing levels above it stay
 * root's (mode 0711), the directory itself becomes the user's (0700). */
static int
make_state_dir(const struct cfg *cfg, const char *dir, char **cause)
{
	char *copy = xstrdup(dir);
	int ret = -1;

	for (char *p = copy + 1; ; p++) {
		bool last;
		char c;

		if (*p != '/' && *p != '\0')
			continue;
		c = *p;
		*p = '\0';
		last = c == '\0' || p[1] == '\0';
		if (mkdir(copy, last ? STATE_DIR_MODE : PASS_DIR_MODE) == 0) {
			if (own_new_dir(cfg, copy, last ? STATE_DIR_MODE :
			    PASS_DIR_MODE, last, cause) != 0)
				goto out;
		} else if (errno != EEXIST) {
			xasprintf(cause, "%s: %s", copy, strerror(errno));
			goto out;
		}
		*p = c;
		if (c == '\0' || last)
			break;
	}
	ret = 0;
out:
	free(copy);
	return ret;
}

/* The control socket's directory, when missing: only its last level, as
 * control_create would make it, but the user's, so that the socket can be
 * removed at exit. */
static int
make_socket_dir(const struct cfg *cfg, char **cause)
{
	char *dir = xstrdup(cfg->control_socket), *slash;
	int ret = 0;

	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, SOCKET_DIR_MODE) == 0)
			ret = own_new_dir(cfg, dir, SOCKET_DIR_MODE, true, cause);
		/* Anything else is control_create's to report. */
	}
	free(dir);
	return ret;
}

int
privdrop_prepare(const struct cfg *cfg, char **cause)
{
	if (cfg->state_dir != NULL && cfg->state_dir[0] == '/' &&
	    make_state_dir(cfg, cfg->state_dir, cause) != 0)
		return -1;
	if (cfg->key_dir != NULL && make_state_dir(cfg, cfg->key_dir, cause) != 0)
		return -1;
	if (cfg->control_socket != NULL && make_socket_dir(cfg, cause) != 0)
		return -1;
	return 0;
}

/* Give one entry of StateDir to the user if it is a regular file with a
 * single link: opened without following links and checked through the
 * descriptor, so a link planted in the directory changes nothing else. */
static void
own_state_file(const struct cfg *cfg, const char *dir, int dirfd,
    const char *name)
{
	struct stat st;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
	    !S_ISREG(st.st_mode))
		return;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
	    fchown(fd, cfg->uid, cfg->gid) == -1)
		log_warn("%s/%s: %s", dir, name, strerror(errno));
	close(fd);
}

/* StateDir (or KeyDir) itself and the files rove keeps in it (written as
 * root at startup) become the user's: key rotation and the ticket
 * register write there while running. */
static int
own_state_dir(const struct cfg *cfg, const char *what, const char *dir,
    char **cause)
{
	struct dirent *de;
	DIR *d;
	int fd;

	/* Not through a link, and only a directory root or User owns and
	 * no one else can write: root is about to give it away. */
	if ((fd = safedir_open(what, dir, cfg->uid, false, cause)) == -1)
		return -1;
	if (fchown(fd, cfg->uid, cfg->gid) == -1) {
		xasprintf(cause, "%s %s: %s", what, dir, strerror(errno));
		close(fd);
		return -1;
	}
	if ((d = fdopendir(fd)) == NULL) {
		xasprintf(cause, "%s %s: %s", what, dir, strerror(errno));
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			own_state_file(cfg, dir, dirfd(d), de->d_name);
	}
	closedir(d);
	return 0;
}

/* The control socket file: its mode (0660) then lets the group ask for
 * status. lchown never follows a link put in its place. */
static void
own_socket(const struct cfg *cfg)
{
	struct stat st;

	if (cfg->control_socket == NULL ||
	    lstat(cfg->control_socket, &st) == -1 || !S_ISSOCK(st.st_mode))
		return;
	if (lchown(cfg->control_socket, cfg->uid, cfg->gid) == -1)
		log_warn("control socket %s: %s", cfg->control_socket,
		    strerror(errno));
}

static const char *
change_id_error(int rc)
{
	switch (rc) {
	case -1:
		return "libcap-ng is not initialised";
	case -2:
		return "cannot keep capabilities across the change of user";
	case -3:
		return "cannot set the intermediate capabilities";
	case -4:
		return "cannot change the group";
	case -5:
		return "cannot drop the supplementary groups";
	case -6:
		return "cannot change the user";
	case -7:
		return "cannot stop keeping capabilities";
	case -8:
		return "cannot clear the bounding set";
	case -9:
		return "cannot drop CAP_SETPCAP or the ambient set";
	default:
		return "unknown error";
	}
}

static const char *
group_name(const struct cfg *cfg, char *buf, size_t len)
{
	struct group gr, *res = NULL;
	char tmp[4096];

	if (cfg->group != NULL)
		return cfg->group;
	if (getgrgid_r(cfg->gid, &gr, tmp, sizeof tmp, &res) == 0 && res != NULL)
		snprintf(buf, len, "%s", gr.gr_name);
	else
		snprintf(buf, len, "%u", (unsigned)cfg->gid);
	return buf;
}

/* The directory holding the control socket, which must be writable to
 * remove the socket at exit. */
static void
check_socket_dir(const struct cfg *cfg)
{
	char *dir, *slash;

	if (cfg->control_socket == NULL)
		return;
	dir = xstrdup(cfg->control_socket);
	slash = strrchr(dir, '/');
	if (slash != NULL) {
		*(slash == dir ? slash + 1 : slash) = '\0';
		if (access(dir, W_OK | X_OK) == -1)
			log_warn("%s: %s for user %s: the control socket will "
			    "be left behind at exit", dir, strerror(errno),
			    cfg->user);
	}
	free(dir);
}

int
privdrop_apply(const struct cfg *cfg, char **cause)
{
	uint64_t caps = privdrop_caps(cfg);
	char capstr[128], gname[64];
	int rc;

	if (cfg->state_dir != NULL &&
	    own_state_dir(cfg, "StateDir", cfg->state_dir, cause) != 0)
		return -1;
	if (cfg->key_dir != NULL &&
	    own_state_dir(cfg, "KeyDir", cfg->key_dir, cause) != 0)
		return -1;
	own_socket(cfg);
	group_name(cfg, gname, sizeof gname);

	capng_clear(CAPNG_SELECT_BOTH);
	for (unsigned bit = 0; bit < 64; bit++) {
		if ((caps & PRIVDROP_CAP(bit)) && capng_update(CAPNG_ADD,
		    CAPNG_EFFECTIVE | CAPNG_PERMITTED, bit) != 0) {
			xasprintf(cause, "cannot keep capability %u", bit);
			return -1;
		}
	}
	rc = capng_change_id((int)cfg->uid, (int)cfg->gid, CAPNG_DROP_SUPP_GRP |
	    CAPNG_CLEAR_BOUNDING | CAPNG_CLEAR_AMBIENT);
	if (rc != 0) {
		xasprintf(cause, "dropping privileges to user %s: %s (%s)",
		    cfg->user, change_id_error(rc), strerror(errno));
		return -1;
	}
	/* Make sure the way back is closed. */
	if (cfg->uid != 0 && (setuid(0) != -1 || seteuid(0) != -1)) {
		xasprintf(cause, "user %s could become root again", cfg->user);
		return -1;
	}
	/* Without a writable StateDir the ticket register would silently
	 * stop recording: a replayed ticket would work after a restart. */
	if (cfg->state_dir != NULL && access(cfg->state_dir, W_OK | X_OK) == -1) {
		xasprintf(cause, "StateDir %s: %s for user %s", cfg->state_dir,
		    strerror(errno), cfg->user);
		return -1;
	}
	check_socket_dir(cfg);
	log_info("dropped root: running as user %s (uid %u), group %s (gid %u), "
	    "no supplementary groups; capabilities kept: %s", cfg->user,
	    (unsigned)cfg->uid, gname, (unsigned)cfg->gid,
	    privdrop_caps_str(caps, capstr, sizeof capstr));
	return 0;
}

int
privdrop_trim(const struct cfg *cfg, char **cause)
{
	uint64_t keep = privdrop_caps(cfg), extra = 0;
	char capstr[128];

	if (capng_get_caps_process() != 0) {
		xasprintf(cause, "reading our capabilities: %s", strerror(errno));
		return -1;
	}
	for (unsigned bit = 0; bit <= CAP_LAST_CAP; bit++) {
		if (!(keep & PRIVDROP_CAP(bit)) &&
		    capng_have_capability(CAPNG_PERMITTED, bit))
			extra |= PRIVDROP_CAP(bit);
	}
	if (extra == 0)
		return 0;
	capng_clear(CAPNG_SELECT_CAPS);
	for (unsigned bit = 0; bit <= CAP_LAST_CAP; bit++) {
		if ((keep & PRIVDROP_CAP(bit)) && capng_update(CAPNG_ADD,
		    CAPNG_EFFECTIVE | CAPNG_PERMITTED, bit) != 0) {
			xasprintf(cause, "cannot keep capability %u", bit);
			return -1;
		}
	}
	/* Ambient capabilities not also permitted lapse by themselves. */
	if (capng_apply(CAPNG_SELECT_CAPS) != 0) {
		xasprintf(cause, "dropping capabilities %s: %s",
		    privdrop_caps_str(extra, capstr, sizeof capstr),
		    strerror(errno));
		return -1;
	}
	log_info("set up; capabilities dropped: %s",
	    privdrop_caps_str(extra, capstr, sizeof capstr));
	return 0;
}

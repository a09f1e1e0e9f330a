/* rove: the server's DNS on the host's resolver while the tunnel is up.
 *
 * Two ways in, tried in this order each time DNS is applied:
 * - systemd-resolved, when it owns org.freedesktop.resolve1 on the system
 *   bus: SetLinkDNS and SetLinkDomains on the TUN device, RevertLink to
 *   undo, as resolvectl does (sd-bus from libsystemd);
 * - resolvconf, found in PATH: "resolvconf -a NAME" reads nameserver and
 *   search lines on its standard input, "resolvconf -d NAME -f" undoes
 *   them, as wg-quick does (and with wg-quick's interface-order prefix).
 * Otherwise the tunnel runs without them and says so.
 *
 * Both need root (resolved grants these calls to root and asks polkit
 * for anyone else; resolvconf writes under /run and /etc), but the
 * server's configuration arrives after rove has dropped root. So when
 * it drops root, rove first forks a helper that stays root for this job
 * alone, like OpenVPN's down-root plugin: it closes every descriptor but
 * its socket, takes two fixed requests (apply to a TUN device named as
 * Tun says, restore), checks them, and restores on its own once the
 * main process is gone (end of file on the socket), so even a SIGKILL
 * leaves no stale resolver behind. Each change is noted in StateDir
 * (file "dns") until it is undone, so that a start after a crash of both
 * undoes it first.
 */
#include <systemd/sd-bus.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/xmalloc.h"
#include "dns.h"
#include "ops/privdrop.h"
#include "transport/state.h"
#include "tun/tun.h"

#define NOTE_FILE "dns"
#define RESOLVE1 "org.freedesktop.resolve1"
#define RESOLVE1_PATH "/org/freedesktop/resolve1"
#define RESOLVE1_MANAGER "org.freedesktop.resolve1.Manager"
#define BUS_TIMEOUT_US (5 * 1000 * 1000)
#define RUN_TIMEOUT_MS 5000  /* resolvconf's whole run */
#define RUN_OUTPUT_MAX 512   /* of its output, for the log */
#define ERROR_MAX 256
/* A resolvconf record: the interface-order prefix, then the device. */
#define RCNAME_MAX (IF_NAMESIZE + 32)
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* What one process (the helper, or rove itself) has applied. */
struct engine {
	const struct cfg *cfg;
	pid_t tun_holder;         /* the helper's: the process whose TUN
	                           * device it may touch (0: rove itself) */
	uid_t note_user;          /* who else may own StateDir */
	enum dns_backend applied; /* NONE: nothing */
	char name[RCNAME_MAX];    /* resolvconf's record, or the device */
	int ifindex;
};

/* The helper's fixed request table. */
enum helper_op { HELPER_APPLY = 1, HELPER_RESTORE = 2 };

struct helper_req {
	uint32_t op;
	int32_t ifindex;
	char ifname[IF_NAMESIZE];
	struct dns_config conf;
};

struct helper_reply {
	int32_t rv;
	uint32_t backend;
	char error[ERROR_MAX];
};

struct dns {
	const struct cfg *cfg;
	struct engine eng;      /* without a helper */
	int helper_fd;          /* -1: no helper */
	pid_t helper_pid;
	enum dns_state state;
	enum dns_backend backend;
	struct dns_config conf; /* as the server sent it last */
	bool have_conf;
	char error[ERROR_MAX];
};

const char *
dns_backend_name(enum dns_backend b)
{
	switch (b) {
	case DNS_BACKEND_RESOLVED:
		return "resolved";
	case DNS_BACKEND_RESOLVCONF:
		return "resolvconf";
	case DNS_BACKEND_NONE:
		break;
	}
	return "none";
}

const char *
dns_state_name(enum dns_state s)
{
	switch (s) {
	case DNS_STATE_NONE:
		return "none";
	case DNS_STATE_APPLIED:
		return "applied";
	case DNS_STATE_FAILED:
		return "failed";
	case DNS_STATE_OFF:
		break;
	}
	return "off";
}

static void __attribute__((format(printf, 2, 3)))
set_cause(char **cause, const char *fmt, ...)
{
	va_list ap;

	free(*cause);
	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
}

/* --- checks the helper makes of what it is asked --- */

/* An interface name as the kernel takes it, and as resolvconf and a
 * note in StateDir may carry it. */
static bool
safe_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n > 0 && n < max && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n &&
	    strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Does the device name `name` match Tun, which may hold one "%d" that
 * the kernel replaced with a number? */
static bool
tun_name_matches(const char *pattern, const char *name)
{
	const char *pct = strstr(pattern, "%d");
	size_t head, tail, n = strlen(name), digits;

	if (pct == NULL)
		return strcmp(pattern, name) == 0;
	head = (size_t)(pct - pattern);
	tail = strlen(pct + 2);
	if (n <= head + tail || strncmp(pattern, name, head) != 0 ||
	    strcmp(pct + 2, name + n - tail) != 0)
		return false;
	digits = n - head - tail;
	return strspn(name + head, "0123456789") >= digits;
}

static int
check_request(const struct cfg *cfg, pid_t holder, const char *ifname,
    int ifindex, const struct dns_config *conf, char **cause)
{
	char name[IF_NAMESIZE];

	if (conf->nservers > PROTO_MAX_DNS || conf->nsearch > PROTO_MAX_DNS_SEARCH) {
		set_cause(cause, "too many DNS entries");
		return -1;
	}
	for (size_t i = 0; i < conf->nservers; i++) {
		if (conf->servers[i].family != AF_INET &&
		    conf->servers[i].family != AF_INET6) {
			set_cause(cause, "a DNS server that is not IP");
			return -1;
		}
	}
	for (size_t i = 0; i < conf->nsearch; i++) {
		if (memchr(conf->search[i], '\0', sizeof conf->search[i]) == NULL ||
		    !addr_dns_name_valid(conf->search[i])) {
			set_cause(cause, "a search domain that is not a name");
			return -1;
		}
	}
	/* Only ever the TUN device this configuration names. */
	if (cfg->tun == NULL || !safe_name(ifname, IF_NAMESIZE) ||
	    !tun_name_matches(cfg->tun, ifname) || ifindex <= 0 ||
	    if_indextoname((unsigned)ifindex, name) == NULL ||
	    strcmp(name, ifname) != 0 ||
	    (holder != 0 && !tun_held_by(holder, ifname))) {
		set_cause(cause, "interface %d is not this tunnel's device", ifindex);
		return -1;
	}
	return 0;
}

/* --- systemd-resolved, through sd-bus --- */

/* The system bus, if resolved is on it; NULL otherwise (no bus, or no
 * owner of org.freedesktop.resolve1: then it is not running). */
static sd_bus *
resolved_bus(void)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	sd_bus *bus = NULL;
	int has = 0;

	if (sd_bus_open_system(&bus) < 0)
		return NULL;
	if (sd_bus_call_method(bus, "org.freedesktop.DBus",
	    "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
	    &err, &reply, "s", RESOLVE1) < 0 ||
	    sd_bus_message_read(reply, "b", &has) < 0)
		has = 0;
	sd_bus_error_free(&err);
	sd_bus_message_unref(reply);
	if (!has) {
		sd_bus_flush_close_unref(bus);
		return NULL;
	}
	return bus;
}

static int
bus_failed(const char *method, int r, const sd_bus_error *err, char **cause)
{
	const char *text = err != NULL && sd_bus_error_is_set(err) &&
	    err->message != NULL ? err->message : strerror(-r);
	char shown[ERROR_MAX];

	log_escape(shown, sizeof shown, text, strlen(text));
	set_cause(cause, "systemd-resolved: %s: %s", method, shown);
	return -1;
}

/* SetLinkDNS(i ifindex, a(iay) addresses) and SetLinkDomains(i ifindex,
 * a(sb) domains, each not routing-only): a search domain, as resolv.conf
 * means it. */
static int
resolved_apply(sd_bus *bus, int ifindex, const struct dns_config *conf,
    char **cause)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL;
	int r;

	r = sd_bus_message_new_method_call(bus, &m, RESOLVE1, RESOLVE1_PATH,
	    RESOLVE1_MANAGER, "SetLinkDNS");
	if (r >= 0)
		r = sd_bus_message_append(m, "i", (int32_t)ifindex);
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(iay)");
	for (size_t i = 0; r >= 0 && i < conf->nservers; i++) {
		const struct ipaddr *a = &conf->servers[i];

		r = sd_bus_message_open_container(m, 'r', "iay");
		if (r >= 0)
			r = sd_bus_message_append(m, "i", (int32_t)a->family);
		if (r >= 0)
			r = sd_bus_message_append_array(m, 'y', a->b,
			    a->family == AF_INET ? 4 : 16);
		if (r >= 0)
			r = sd_bus_message_close_container(m);
	}
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_call(bus, m, BUS_TIMEOUT_US, &err, NULL);
	m = sd_bus_message_unref(m);
	if (r < 0) {
		bus_failed("SetLinkDNS", r, &err, cause);
		sd_bus_error_free(&err);
		return -1;
	}
	r = sd_bus_message_new_method_call(bus, &m, RESOLVE1, RESOLVE1_PATH,
	    RESOLVE1_MANAGER, "SetLinkDomains");
	if (r >= 0)
		r = sd_bus_message_append(m, "i", (int32_t)ifindex);
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(sb)");
	for (size_t i = 0; r >= 0 && i < conf->nsearch; i++)
		r = sd_bus_message_append(m, "(sb)", conf->search[i], 0);
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_call(bus, m, BUS_TIMEOUT_US, &err, NULL);
	sd_bus_message_unref(m);
	if (r < 0) {
		bus_failed("SetLinkDomains", r, &err, cause);
		sd_bus_error_free(&err);
		return -1;
	}
	return 0;
}

static int
resolved_revert(sd_bus *bus, int ifindex, char **cause)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	int r;

	r = sd_bus_call_method(bus, RESOLVE1, RESOLVE1_PATH, RESOLVE1_MANAGER,
	    "RevertLink", &err, NULL, "i", (int32_t)ifindex);
	if (r < 0) {
		bus_failed("RevertLink", r, &err, cause);
		sd_bus_error_free(&err);
		return -1;
	}
	return 0;
}

/* --- resolvconf --- */

/* The program `name` in PATH (absolute directories only), or NULL. */
static char *
find_program(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL, *found = NULL;
	struct stat sb;

	copy = xstrdup(path != NULL && *path != '\0' ? path : DEFAULT_PATH);
	for (dir = strtok_r(copy, ":", &save); dir != NULL && found == NULL;
	    dir = strtok_r(NULL, ":", &save)) {
		char *p;

		if (dir[0] != '/')
			continue;
		xasprintf(&p, "%s/%s", dir, name);
		if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    access(p, X_OK) == 0)
			found = p;
		else
			free(p);
	}
	free(copy);
	return found;
}

/* wg-quick's prefix: the first "name*" line of resolvconf's
 * interface-order ("tun*" in Debian's), so that the tunnel's record
 * sorts where that file ranks tunnels, as "tun.rove0". */
static void
resolvconf_name(const char *ifname, char out[static RCNAME_MAX])
{
	char line[128], prefix[32] = "";
	FILE *f;

	if ((f = fopen("/etc/resolvconf/interface-order", "re")) != NULL) {
		while (fgets(line, sizeof line, f) != NULL) {
			size_t n = strspn(line, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-");

			if (n > 0 && n < sizeof prefix - 1 && line[n] == '*' &&
			    (line[n + 1] == '\n' || line[n + 1] == '\0')) {
				snprintf(prefix, sizeof prefix, "%.*s.", (int)n, line);
				break;
			}
		}
		fclose(f);
	}
	snprintf(out, RCNAME_MAX, "%s%s", prefix, ifname);
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run `path` with `argv` (no shell), `input` on its standard input; at
 * most RUN_TIMEOUT_MS, then it is killed. 0 if it exited 0, else -1
 * with *cause holding its status and the start of what it printed;
 * `what` names the command there. */
static int
run_program(const char *path, char *const argv[], const char *input,
    const char *what, char **cause)
{
	int in[2], out[2], status = 0, rv = -1;
	char output[RUN_OUTPUT_MAX], shown[4 * RUN_OUTPUT_MAX];
	size_t outlen = 0, inlen = strlen(input), inoff = 0;
	int64_t deadline = mono_ms() + RUN_TIMEOUT_MS;
	bool exited = false;
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) == -1)
		goto fail_errno;
	if (pipe2(out, O_CLOEXEC) == -1) {
		close(in[0]);
		close(in[1]);
		goto fail_errno;
	}
	if ((pid = fork()) == -1) {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		goto fail_errno;
	}
	if (pid == 0) {
		/* Only what the program needs: the pipes as 0, 1 and 2. */
		if (dup2(in[0], 0) == -1 || dup2(out[1], 1) == -1 ||
		    dup2(out[1], 2) == -1)
			_exit(126);
		close_range(3, ~0U, 0);
		signal(SIGPIPE, SIG_DFL);
		execve(path, argv, environ);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	if (inlen == 0) {
		close(in[1]);
		in[1] = -1;
	}
	/* Feed it and read what it says until it closes its output. */
	while (out[0] != -1) {
		struct pollfd p[2] = { { out[0], POLLIN, 0 }, { in[1], POLLOUT, 0 } };
		int64_t left = deadline - mono_ms();
		char buf[256];
		ssize_t n;

		if (left <= 0)
			break;
		if (poll(p, in[1] != -1 ? 2 : 1, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (in[1] != -1 && p[1].revents != 0) {
			n = write(in[1], input + inoff, inlen - inoff);
			if (n > 0)
				inoff += (size_t)n;
			if (n == -1 && errno != EAGAIN && errno != EINTR)
				inoff = inlen; /* it stopped reading: EPIPE */
			if (inoff == inlen) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[0].revents != 0) {
			n = read(out[0], buf, sizeof buf);
			if (n > 0) {
				size_t take = (size_t)n < sizeof output - outlen ?
				    (size_t)n : sizeof output - outlen;

				memcpy(output + outlen, buf, take);
				outlen += take;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				close(out[0]);
				out[0] = -1;
			}
		}
	}
	if (in[1] != -1)
		close(in[1]);
	if (out[0] != -1)
		close(out[0]);
	/* Its output closed (or time ran out): wait what is left. */
	while (!exited) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			exited = true;
		else if (w == -1 && errno != EINTR)
			break;
		else if (mono_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			set_cause(cause, "%s: killed after %d ms", what,
			    RUN_TIMEOUT_MS);
			return -1;
		} else if (w == 0)
			poll(NULL, 0, 10);
	}
	while (outlen > 0 && (output[outlen - 1] == '\n' || output[outlen - 1] == ' '))
		outlen--;
	log_escape(shown, sizeof shown, output, outlen);
	if (!exited)
		set_cause(cause, "%s: %s", what, strerror(errno));
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rv = 0;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && outlen == 0)
		set_cause(cause, "%s: cannot run %s", what, path);
	else if (WIFEXITED(status))
		set_cause(cause, "%s exited with %d%s%s", what,
		    WEXITSTATUS(status), outlen ? ": " : "", shown);
	else
		set_cause(cause, "%s killed by signal %d", what,
		    WTERMSIG(status));
	return rv;
fail_errno:
	set_cause(cause, "%s: %s", what, strerror(errno));
	return -1;
}

/* Debian's resolvconf and openresolv both read these lines. */
static void
resolvconf_input(const struct dns_config *conf, char *buf, size_t len)
{
	size_t off = 0;
	char s[ADDR_STRLEN];

	buf[0] = '\0';
	for (size_t i = 0; i < conf->nservers && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "nameserver %s\n",
		    addr_ip_str(&conf->servers[i], s));
	if (conf->nsearch > 0 && off < len) {
		off += (size_t)snprintf(buf + off, len - off, "search");
		for (size_t i = 0; i < conf->nsearch && off < len; i++)
			off += (size_t)snprintf(buf + off, len - off, " %s",
			    conf->search[i]);
		if (off < len)
			snprintf(buf + off, len - off, "\n");
	}
}

static int
resolvconf_run(const char *op, const char *name, const char *input,
    char **cause)
{
	char *path = find_program("resolvconf");
	char *argv[] = { (char *)"resolvconf", (char *)op, (char *)name,
	    (char *)"-f", NULL };
	char what[64 + RCNAME_MAX];
	int rv;

	if (path == NULL) {
		set_cause(cause, "resolvconf: not found in PATH");
		return -1;
	}
	/* -a takes no -f in Debian's resolvconf. */
	if (strcmp(op, "-a") == 0)
		argv[3] = NULL;
	snprintf(what, sizeof what, "resolvconf %s %s", op, name);
	rv = run_program(path, argv, input, what, cause);
	free(path);
	return rv;
}

/* --- the note in StateDir --- */

static void
note_write(struct engine *e)
{
	char buf[64 + RCNAME_MAX], *cause = NULL;
	int n;

	if (e->cfg->state_dir == NULL)
		return;
	n = snprintf(buf, sizeof buf, "%s %s\n", dns_backend_name(e->applied),
	    e->name);
	if (state_note_write(e->cfg->state_dir, e->note_user, NOTE_FILE, buf,
	    (size_t)n, &cause) != 0) {
		log_warn("DNS: cannot note what to undo after a crash: %s", cause);
		free(cause);
	}
}

static void
note_remove(struct engine *e)
{
	char *cause = NULL;

	if (e->cfg->state_dir != NULL &&
	    state_note_remove(e->cfg->state_dir, e->note_user, NOTE_FILE,
	    &cause) != 0) {
		log_warn("DNS: %s", cause);
		free(cause);
	}
}

/* --- one process's work: apply, restore, recover --- */

static void
engine_init(struct engine *e, const struct cfg *cfg)
{
	memset(e, 0, sizeof *e);
	e->cfg = cfg;
	e->note_user = cfg->user != NULL ? cfg->uid : (uid_t)-1;
}

/* Undo one change: a backend and the name it was made under. */
static int
undo(enum dns_backend b, const char *name, int ifindex, char **cause)
{
	sd_bus *bus;
	int rv;

	if (b == DNS_BACKEND_RESOLVCONF)
		return resolvconf_run("-d", name, "", cause);
	/* resolved forgets a link that is gone by itself. */
	if (ifindex <= 0 && (ifindex = (int)if_nametoindex(name)) == 0)
		return 0;
	if ((bus = resolved_bus()) == NULL)
		return 0;
	rv = resolved_revert(bus, ifindex, cause);
	sd_bus_flush_close_unref(bus);
	return rv;
}

static void
engine_restore(struct engine *e)
{
	char *cause = NULL;

	if (e->applied == DNS_BACKEND_NONE)
		return;
	if (undo(e->applied, e->name, e->ifindex, &cause) != 0) {
		log_warn("DNS: restoring: %s", cause);
		free(cause);
	} else
		log_info("DNS: restored (%s, %s)", dns_backend_name(e->applied),
		    e->name);
	e->applied = DNS_BACKEND_NONE;
	note_remove(e);
}

static int
engine_apply(struct engine *e, const char *ifname, int ifindex,
    const struct dns_config *conf, enum dns_backend *used, char **cause)
{
	char input[PROTO_MAX_DNS * 64 + PROTO_MAX_DNS_SEARCH * 256 + 16];
	sd_bus *bus;

	*used = DNS_BACKEND_NONE;
	if (check_request(e->cfg, e->tun_holder, ifname, ifindex, conf, cause) != 0)
		return -1;
	engine_restore(e);
	if (conf->nservers == 0 && conf->nsearch == 0)
		return 0;
	if ((bus = resolved_bus()) != NULL) {
		int rv = resolved_apply(bus, ifindex, conf, cause);
		char *ignored = NULL;

		/* SetLinkDNS may have worked where SetLinkDomains did not. */
		if (rv != 0 && resolved_revert(bus, ifindex, &ignored) != 0)
			free(ignored);
		sd_bus_flush_close_unref(bus);
		if (rv != 0)
			return -1;
		e->applied = DNS_BACKEND_RESOLVED;
		snprintf(e->name, sizeof e->name, "%s", ifname);
	} else {
		char name[RCNAME_MAX];
		char *path = find_program("resolvconf");

		if (path == NULL) {
			set_cause(cause, "neither systemd-resolved (on the system "
			    "bus) nor resolvconf (in PATH) is there to take them");
			return -1;
		}
		free(path);
		resolvconf_name(ifname, name);
		resolvconf_input(conf, input, sizeof input);
		if (resolvconf_run("-a", name, input, cause) != 0)
			return -1;
		e->applied = DNS_BACKEND_RESOLVCONF;
		snprintf(e->name, sizeof e->name, "%s", name);
	}
	e->ifindex = ifindex;
	*used = e->applied;
	note_write(e);
	return 0;
}

/* Does a note's `name` (a device, or resolvconf's record for one) name a
 * device that `Tun` could have made? */
static bool
note_names_our_tun(const struct cfg *cfg, enum dns_backend b, const char *name)
{
	char want[RCNAME_MAX];
	const char *dot;

	if (cfg->tun == NULL)
		return false;
	if (b == DNS_BACKEND_RESOLVED)
		return tun_name_matches(cfg->tun, name);
	/* resolvconf: "PREFIX.DEVICE" (resolvconf_name) or "DEVICE". */
	if (tun_name_matches(cfg->tun, name)) {
		resolvconf_name(name, want);
		if (strcmp(want, name) == 0)
			return true;
	}
	if ((dot = strchr(name, '.')) != NULL && tun_name_matches(cfg->tun, dot + 1)) {
		resolvconf_name(dot + 1, want);
		return strcmp(want, name) == 0;
	}
	return false;
}

/* A note left by a run that did not get to restore: undo it now. */
static void
engine_recover(struct engine *e)
{
	char buf[128], name[RCNAME_MAX], *cause = NULL, *sp;
	enum dns_backend b = DNS_BACKEND_NONE;
	ssize_t n;

	if (e->cfg->state_dir == NULL)
		return;
	n = state_note_read(e->cfg->state_dir, e->note_user, NOTE_FILE, buf,
	    sizeof buf - 1, &cause);
	if (n < 0) {
		log_warn("DNS: %s", cause);
		free(cause);
		return;
	}
	if (n == 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if ((sp = strchr(buf, ' ')) != NULL) {
		*sp = '\0';
		snprintf(name, sizeof name, "%s", sp + 1);
		if (strcmp(buf, "resolved") == 0)
			b = DNS_BACKEND_RESOLVED;
		else if (strcmp(buf, "resolvconf") == 0)
			b = DNS_BACKEND_RESOLVCONF;
	}
	/* The note is ours, but it names what a privileged helper will run
	 * on: only a plain name, and only one of our TUN devices (Tun), as
	 * the helper itself would apply it. */
	if (b == DNS_BACKEND_NONE || !safe_name(name, RCNAME_MAX) ||
	    !note_names_our_tun(e->cfg, b, name))
		log_warn("DNS: StateDir %s: ignoring a note that is not ours",
		    e->cfg->state_dir);
	else {
		log_info("DNS: undoing what an earlier run left (%s, %s)",
		    dns_backend_name(b), name);
		if (undo(b, name, 0, &cause) != 0) {
			log_warn("DNS: %s", cause);
			free(cause);
		}
	}
	note_remove(e);
}

/* --- the privileged helper --- */

static void __attribute__((noreturn))
helper_main(int fd, const struct cfg *cfg)
{
	struct engine e;
	struct helper_req req;
	struct helper_reply rep;
	ssize_t n;

	/* Stop only when rove does: a terminal's ^C or the service
	 * manager's SIGTERM reach the whole group, and restoring is the
	 * last thing this process is for. */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "rove-dns", 0, 0, 0);
	/* Nothing of rove's stays open here: a copy of the TUN device's
	 * descriptor would keep the device alive after rove exits. */
	if (fd != 3) {
		if (dup2(fd, 3) == -1)
			_exit(1);
		fd = 3;
	}
	close_range(4, ~0U, 0);
	engine_init(&e, cfg);
	/* rove, whose request this helper serves with root's powers: only
	 * the device rove itself holds, not another of the Tun pattern's
	 * (another rove's, or one a compromised rove made up). */
	e.tun_holder = getppid();
	for (;;) {
		n = recv(fd, &req, sizeof req, 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		memset(&rep, 0, sizeof rep);
		if (n == (ssize_t)sizeof req && req.op == HELPER_APPLY) {
			enum dns_backend used;
			char *cause = NULL;

			req.ifname[sizeof req.ifname - 1] = '\0';
			rep.rv = engine_apply(&e, req.ifname, req.ifindex, &req.conf,
			    &used, &cause);
			rep.backend = used;
			if (cause != NULL)
				snprintf(rep.error, sizeof rep.error, "%s", cause);
			free(cause);
		} else if (n == (ssize_t)sizeof req && req.op == HELPER_RESTORE)
			engine_restore(&e);
		else {
			rep.rv = -1;
			snprintf(rep.error, sizeof rep.error, "bad request");
		}
		if (send(fd, &rep, sizeof rep, MSG_NOSIGNAL) == -1)
			break;
	}
	/* rove is gone, cleanly or not. */
	engine_restore(&e);
	_exit(0);
}

static int
helper_start(struct dns *d, char **cause)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		xasprintf(cause, "DNS helper: socketpair: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		xasprintf(cause, "DNS helper: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		helper_main(sv[1], d->cfg);
	}
	close(sv[1]);
	d->helper_fd = sv[0];
	d->helper_pid = pid;
	return 0;
}

/* One request, one reply; a helper that is gone fails every request. */
static int
helper_call(struct dns *d, const struct helper_req *req,
    struct helper_reply *rep)
{
	ssize_t n;

	memset(rep, 0, sizeof *rep);
	if (send(d->helper_fd, req, sizeof *req, MSG_NOSIGNAL) != (ssize_t)sizeof *req)
		goto gone;
	do
		n = recv(d->helper_fd, rep, sizeof *rep, 0);
	while (n == -1 && errno == EINTR);
	if (n != (ssize_t)sizeof *rep)
		goto gone;
	rep->error[sizeof rep->error - 1] = '\0';
	return 0;
gone:
	rep->rv = -1;
	snprintf(rep->error, sizeof rep->error, "the DNS helper is gone");
	return -1;
}

/* --- the interface --- */

struct dns *
dns_create(const struct cfg *cfg, char **cause)
{
	struct dns *d = xcalloc(1, sizeof *d);
	char *why = NULL;

	d->cfg = cfg;
	d->helper_fd = -1;
	d->state = cfg->dns && cfg->tun != NULL ? DNS_STATE_NONE : DNS_STATE_OFF;
	engine_init(&d->eng, cfg);
	if (cfg->tun != NULL)
		engine_recover(&d->eng);
	if (d->state == DNS_STATE_OFF)
		return d;
	if (privdrop_needed(cfg, geteuid(), getegid(), &why) == 1 &&
	    helper_start(d, cause) != 0) {
		free(d);
		return NULL;
	}
	free(why);
	return d;
}

static bool
conf_equal(const struct dns_config *a, const struct dns_config *b)
{
	if (a->nservers != b->nservers || a->nsearch != b->nsearch)
		return false;
	for (size_t i = 0; i < a->nservers; i++) {
		if (!addr_equal(&a->servers[i], &b->servers[i]))
			return false;
	}
	for (size_t i = 0; i < a->nsearch; i++) {
		if (strcmp(a->search[i], b->search[i]) != 0)
			return false;
	}
	return true;
}

/* "198.19.77.1, fd00:77::1; search corp.example" for the log. */
static void
conf_str(const struct dns_config *conf, char *buf, size_t len)
{
	char s[ADDR_STRLEN];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < conf->nservers && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    i ? ", " : "", addr_ip_str(&conf->servers[i], s));
	if (conf->nsearch > 0 && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%ssearch",
		    conf->nservers ? "; " : "");
	for (size_t i = 0; i < conf->nsearch && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, " %s",
		    conf->search[i]);
}

void
dns_apply(struct dns *d, const char *ifname, int ifindex,
    const struct dns_config *conf)
{
	char raw[PROTO_MAX_DNS * 48 + PROTO_MAX_DNS_SEARCH * 256];
	char what[4 * sizeof raw];
	enum dns_backend used = DNS_BACKEND_NONE;
	char *cause = NULL;
	int rv;

	if (d == NULL || d->state == DNS_STATE_OFF)
		return;
	/* A reconnect brings the same lists again. */
	if (d->have_conf && conf_equal(&d->conf, conf))
		return;
	d->conf = *conf;
	d->have_conf = true;
	if (d->helper_fd != -1) {
		struct helper_req req = { .op = HELPER_APPLY, .ifindex = ifindex };
		struct helper_reply rep;

		snprintf(req.ifname, sizeof req.ifname, "%s", ifname);
		req.conf = *conf;
		helper_call(d, &req, &rep);
		rv = rep.rv;
		used = rep.backend == DNS_BACKEND_RESOLVED ||
		    rep.backend == DNS_BACKEND_RESOLVCONF ? rep.backend :
		    DNS_BACKEND_NONE;
		if (rv != 0)
			cause = xstrdup(rep.error);
	} else
		rv = engine_apply(&d->eng, ifname, ifindex, conf, &used, &cause);
	d->backend = used;
	/* The decoder takes plain names only, but the log must not depend
	 * on that: nothing here may start a line of its own. */
	conf_str(conf, raw, sizeof raw);
	log_escape(what, sizeof what, raw, strlen(raw));
	if (rv != 0) {
		d->state = DNS_STATE_FAILED;
		snprintf(d->error, sizeof d->error, "%s",
		    cause != NULL ? cause : "unknown error");
		log_warn("DNS: could not apply the server's DNS (%s): %s; the "
		    "tunnel works without it", what, d->error);
	} else if (used == DNS_BACKEND_NONE) {
		d->state = DNS_STATE_NONE;
	} else {
		d->state = DNS_STATE_APPLIED;
		d->error[0] = '\0';
		log_info("DNS: %s on %s through %s", what, ifname,
		    used == DNS_BACKEND_RESOLVED ? "systemd-resolved" : "resolvconf");
	}
	free(cause);
}

void
dns_restore(struct dns *d)
{
	if (d == NULL || d->state == DNS_STATE_OFF)
		return;
	if (d->helper_fd != -1) {
		struct helper_req req = { .op = HELPER_RESTORE };
		struct helper_reply rep;

		helper_call(d, &req, &rep);
	} else
		engine_restore(&d->eng);
	d->state = DNS_STATE_NONE;
	d->backend = DNS_BACKEND_NONE;
	d->have_conf = false;
}

void
dns_free(struct dns *d)
{
	int status;

	if (d == NULL)
		return;
	dns_restore(d);
	if (d->helper_fd != -1) {
		close(d->helper_fd);
		/* It exits once it has read the end of its socket. */
		while (waitpid(d->helper_pid, &status, 0) == -1 && errno == EINTR)
			;
	}
	free(d);
}

void
dns_get_status(const struct dns *d, struct dns_status *st)
{
	memset(st, 0, sizeof *st);
	st->state = d != NULL ? d->state : DNS_STATE_OFF;
	if (d == NULL)
		return;
	st->backend = d->backend;
	st->conf = d->have_conf ? &d->conf : NULL;
	st->error = d->state == DNS_STATE_FAILED ? d->error : NULL;
}

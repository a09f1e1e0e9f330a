/* Unit tests for common/ops/privdrop.c: which capabilities each configuration
 * keeps, their names, when a switch is needed
 * (with its exact error), and, as root, the directories and files handed
 * to the user and the switch itself (in a child process). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/cfg.h"
#include "ops/privdrop.h"

#define PK_SERVER "SMvS1tvZi8uPn0QkZSpUW9Iw04vBC7c++p7vqBenT2k="
#define PK_A "6l+PLBXyFcMTXgpCJJYGkH7w2vYS5UeWe97Xfnl7AyI="
#define PK_B "CCDb5JgSgXRLeheR6+5gspPKbv7gRzSDdR0/TUEuw9I="

/* Three lines each: a minimal valid server section and peer. */
#define SRV "[Server]\nPrivateKeyFile = k\nAddress = 10.77.0.1/24\n"
#define PEER_A "[Peer]\nName = a\nPublicKey = " PK_A "\n"
#define PEER_B "[Peer]\nName = b\nPublicKey = " PK_B "\n"
/* Four lines: a minimal valid client section. */
#define CLI "[Client]\nServer = vpn.example\nServerPublicKey = " PK_SERVER \
	"\nPrivateKeyFile = k\n"

#define NET_ADMIN PRIVDROP_CAP(CAP_NET_ADMIN)
#define BIND_SERVICE PRIVDROP_CAP(CAP_NET_BIND_SERVICE)

static void
load_ok(const char *text, enum cfg_role role, struct cfg *cfg)
{
	struct cfg_errors errs = { 0 };
	int rc = cfg_load_buffer("t.conf", text, strlen(text), role, cfg,
	    &errs);

	for (size_t i = 0; i < errs.n; i++)
		print_error("unexpected: %s\n", errs.msg[i]);
	assert_int_equal(rc, 0);
	cfg_errors_clear(&errs);
}

static uint64_t
caps_of(const char *text, enum cfg_role role)
{
	struct cfg cfg;
	uint64_t caps;

	load_ok(text, role, &cfg);
	caps = privdrop_caps(&cfg);
	cfg_clear(&cfg);
	return caps;
}

static void
test_caps(void **state)
{
	(void)state;
	/* The client with a TUN changes routes and addresses later. */
	assert_int_equal(caps_of(CLI, CFG_ROLE_CLIENT), NET_ADMIN);
	assert_int_equal(caps_of(CLI "Tun = rove7\nUser = nobody\n",
	    CFG_ROLE_CLIENT), NET_ADMIN);
	assert_int_equal(caps_of(CLI "Tun = none\n", CFG_ROLE_CLIENT), 0);
	assert_int_equal(caps_of(CLI "Tun = none\nRemoteForward = 80 = h:80\n"
	    "LocalForward = 22 = h:22\n", CFG_ROLE_CLIENT), 0);

	/* roved with a TUN routes the AllowedIPs a reload adds; a -R port
	 * below 1024 needs the right to bind it. */
	assert_int_equal(caps_of(SRV PEER_A, CFG_ROLE_SERVER), NET_ADMIN);
	assert_int_equal(caps_of(SRV PEER_A "AllowRemoteForward = 2222\n",
	    CFG_ROLE_SERVER), NET_ADMIN);
	assert_int_equal(caps_of(SRV PEER_A "AllowRemoteForward = 1024\n",
	    CFG_ROLE_SERVER), NET_ADMIN);
	assert_int_equal(caps_of(SRV PEER_A "AllowRemoteForward = 2222, 1023\n",
	    CFG_ROLE_SERVER), NET_ADMIN | BIND_SERVICE);
	assert_int_equal(caps_of(SRV PEER_A "AllowRemoteForward = 8080\n"
	    PEER_B "AllowRemoteForward = 1\n", CFG_ROLE_SERVER),
	    NET_ADMIN | BIND_SERVICE);
	assert_int_equal(caps_of(SRV "Tun = none\n" PEER_A
	    "AllowRemoteForward =\n", CFG_ROLE_SERVER), 0);
	assert_int_equal(caps_of(SRV "Tun = none\n" PEER_A
	    "AllowRemoteForward = 80\n", CFG_ROLE_SERVER), BIND_SERVICE);
	assert_int_equal(caps_of(SRV PEER_A "AllowForward = 10.0.0.0/8:22\n",
	    CFG_ROLE_SERVER), NET_ADMIN);
}

static void
test_caps_str(void **state)
{
	char buf[128], small[5];

	(void)state;
	assert_string_equal(privdrop_caps_str(0, buf, sizeof buf), "none");
	assert_string_equal(privdrop_caps_str(NET_ADMIN, buf, sizeof buf),
	    "CAP_NET_ADMIN");
	assert_string_equal(privdrop_caps_str(BIND_SERVICE, buf, sizeof buf),
	    "CAP_NET_BIND_SERVICE");
	assert_string_equal(privdrop_caps_str(NET_ADMIN | BIND_SERVICE, buf,
	    sizeof buf), "CAP_NET_BIND_SERVICE, CAP_NET_ADMIN");
	assert_string_equal(privdrop_caps_str(PRIVDROP_CAP(0) |
	    PRIVDROP_CAP(63), buf, sizeof buf), "cap_0, cap_63");
	/* Too small: cut short, still a string. */
	assert_ptr_equal(privdrop_caps_str(NET_ADMIN, small, sizeof small),
	    small);
	assert_string_equal(small, "CAP_");
	assert_string_equal(privdrop_caps_str(0, small, sizeof small), "none");
	small[0] = 'x';
	privdrop_caps_str(NET_ADMIN, small, 0);
	assert_int_equal(small[0], 'x');
	/* The CapEff bits of /proc/PID/status. */
	assert_int_equal(NET_ADMIN, 0x1000);
	assert_int_equal(BIND_SERVICE, 0x400);
}

/* What the parser keeps of User and Group. */
static void
test_config(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	struct cfg cfg;

	(void)state;
	assert_non_null(pw);
	load_ok(CLI "User = nobody\n", CFG_ROLE_CLIENT, &cfg);
	assert_string_equal(cfg.user, "nobody");
	assert_null(cfg.group);
	assert_int_equal(cfg.uid, pw->pw_uid);
	assert_int_equal(cfg.gid, pw->pw_gid);
	assert_int_equal(cfg.user_line, 5);
	assert_int_equal(cfg.group_line, 0);
	cfg_clear(&cfg);

	load_ok(SRV "Group = root\nUser = nobody\n" PEER_A, CFG_ROLE_SERVER,
	    &cfg);
	assert_string_equal(cfg.user, "nobody");
	assert_string_equal(cfg.group, "root");
	assert_int_equal(cfg.uid, pw->pw_uid);
	assert_int_equal(cfg.gid, 0);
	assert_int_equal(cfg.user_line, 5);
	assert_int_equal(cfg.group_line, 4);
	cfg_clear(&cfg);

	load_ok(CLI, CFG_ROLE_CLIENT, &cfg);
	assert_null(cfg.user);
	assert_null(cfg.group);
	assert_int_equal(cfg.uid, 0);
	assert_int_equal(cfg.gid, 0);
	cfg_clear(&cfg);
}

static void
expect_needed(const char *text, uid_t euid, gid_t egid, int want,
    const char *want_cause)
{
	struct cfg cfg;
	char *cause = NULL;

	load_ok(text, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(privdrop_needed(&cfg, euid, egid, &cause), want);
	if (want_cause == NULL)
		assert_null(cause);
	else {
		assert_non_null(cause);
		assert_string_equal(cause, want_cause);
	}
	free(cause);
	cfg_clear(&cfg);
}

static void
test_needed(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	char *want;
	uid_t nuid;
	gid_t ngid;

	(void)state;
	assert_non_null(pw);
	nuid = pw->pw_uid;
	ngid = pw->pw_gid;
	/* No User: whoever runs it stays. */
	expect_needed(CLI, 0, 0, 0, NULL);
	expect_needed(CLI, 1000, 1000, 0, NULL);
	/* Root switches, even to root. */
	expect_needed(CLI "User = nobody\n", 0, 0, 1, NULL);
	expect_needed(CLI "User = nobody\n", 0, 1234, 1, NULL);
	expect_needed(CLI "User = root\n", 0, 0, 1, NULL);
	/* Already that user and group: nothing to do. */
	expect_needed(CLI "User = nobody\n", nuid, ngid, 0, NULL);
	expect_needed(CLI "User = nobody\nGroup = root\n", nuid, 0, 0, NULL);
	/* Anyone else cannot. */
	assert_true(asprintf(&want, "t.conf:5: User: running as uid 1000, not "
	    "root: cannot switch to user 'nobody' (uid %u)",
	    (unsigned)nuid) > 0);
	expect_needed(CLI "User = nobody\n", 1000, 1000, -1, want);
	free(want);
	assert_true(asprintf(&want, "t.conf:5: User: running as gid 1000, not "
	    "root: cannot switch to the primary group of 'nobody' (gid %u)",
	    (unsigned)ngid) > 0);
	expect_needed(CLI "User = nobody\n", nuid, 1000, -1, want);
	free(want);
	assert_true(asprintf(&want, "t.conf:6: Group: running as gid %u, not "
	    "root: cannot switch to group 'root' (gid 0)", (unsigned)ngid) > 0);
	expect_needed(CLI "User = nobody\nGroup = root\n", nuid, ngid, -1, want);
	free(want);
	expect_needed(CLI "User = root\n", 1000, 1000, -1,
	    "t.conf:5: User: running as uid 1000, not root: cannot switch to "
	    "user 'root' (uid 0)");
}

/* Root only: a scratch directory and a config pointing into it. */
struct scratch {
	char dir[64];
	char state[128];
	char sock[128];
	uid_t uid;
	gid_t gid;
};

/* Creating files for another user and switching users take root. */
static void
need_root(void)
{
	if (geteuid() != 0)
		skip();
}

static void
scratch_init(struct scratch *s)
{
	struct passwd *pw = getpwnam("nobody");

	assert_non_null(pw);
	s->uid = pw->pw_uid;
	s->gid = pw->pw_gid;
	snprintf(s->dir, sizeof s->dir, "/tmp/rove-privdrop.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	/* Passable for the user, as the tests' work directories are. */
	assert_int_equal(chmod(s->dir, 0711), 0);
	snprintf(s->state, sizeof s->state, "%s/a/b/state", s->dir);
	snprintf(s->sock, sizeof s->sock, "%s/run/x.sock", s->dir);
}

static void
scratch_free(struct scratch *s)
{
	char *cmd;

	assert_true(asprintf(&cmd, "rm -rf '%s'", s->dir) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static void
assert_owner_mode(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_gid, gid);
	assert_int_equal(st.st_mode & 07777, mode);
}

static void
scratch_cfg(const struct scratch *s, enum cfg_role role, struct cfg *cfg)
{
	char *text;

	if (role == CFG_ROLE_CLIENT)
		assert_true(asprintf(&text, CLI "User = nobody\nStateDir = %s\n"
		    "ControlSocket = %s\n", s->state, s->sock) > 0);
	else
		assert_true(asprintf(&text, SRV "User = nobody\nStateDir = %s\n"
		    "ControlSocket = %s\n" PEER_A "AllowRemoteForward = 80\n",
		    s->state, s->sock) > 0);
	load_ok(text, role, cfg);
	free(text);
}

static void
test_prepare(void **state)
{
	struct scratch s;
	struct cfg cfg;
	char *cause = NULL, path[256];
	mode_t mask;

	(void)state;
	need_root();
	scratch_init(&s);
	scratch_cfg(&s, CFG_ROLE_CLIENT, &cfg);
	/* Modes are exact whatever the umask. */
	mask = umask(077);
	assert_int_equal(privdrop_prepare(&cfg, &cause), 0);
	umask(mask);
	assert_null(cause);
	snprintf(path, sizeof path, "%s/a", s.dir);
	assert_owner_mode(path, 0, 0, 0711);
	snprintf(path, sizeof path, "%s/a/b", s.dir);
	assert_owner_mode(path, 0, 0, 0711);
	assert_owner_mode(s.state, s.uid, s.gid, 0700);
	snprintf(path, sizeof path, "%s/run", s.dir);
	assert_owner_mode(path, s.uid, s.gid, 0700);
	assert_owner_mode(s.dir, 0, 0, 0711);

	/* What exists already is left alone. */
	assert_int_equal(chown(s.state, 0, 0), 0);
	assert_int_equal(chmod(path, 0750), 0);
	assert_int_equal(privdrop_prepare(&cfg, &cause), 0);
	assert_owner_mode(s.state, 0, 0, 0700);
	assert_owner_mode(path, s.uid, s.gid, 0750);
	cfg_clear(&cfg);

	/* A socket two missing levels down: control_create reports it. */
	snprintf(s.sock, sizeof s.sock, "%s/no/such/x.sock", s.dir);
	scratch_cfg(&s, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(privdrop_prepare(&cfg, &cause), 0);
	snprintf(path, sizeof path, "%s/no", s.dir);
	assert_int_equal(access(path, F_OK), -1);
	cfg_clear(&cfg);

	/* A StateDir below a file cannot be made. */
	snprintf(path, sizeof path, "%s/file", s.dir);
	assert_int_equal(close(open(path, O_CREAT | O_WRONLY, 0600)), 0);
	snprintf(s.state, sizeof s.state, "%s/file/state", s.dir);
	scratch_cfg(&s, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(privdrop_prepare(&cfg, &cause), -1);
	assert_non_null(cause);
	snprintf(path, sizeof path, "%s/file/state: Not a directory", s.dir);
	assert_string_equal(cause, path);
	free(cause);
	cfg_clear(&cfg);
	scratch_free(&s);
}

/* One line of /proc/self/status, e.g. "CapEff:\t0000000000001000". */
static bool
status_line(const char *want)
{
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return false;
	while (fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, want) == 0)
			found = true;
	}
	fclose(f);
	return found;
}

/* In a child: privdrop_apply, then what the process became. Exit codes
 * name the first check that failed. */
static void __attribute__((noreturn))
apply_child(const struct cfg *cfg, const char *capeff)
{
	char *cause = NULL, want[64];
	int fd;

	if (privdrop_apply(cfg, &cause) != 0) {
		fprintf(stderr, "privdrop_apply: %s\n", cause);
		_exit(10);
	}
	snprintf(want, sizeof want, "Uid:\t%u\t%u\t%u\t%u", (unsigned)cfg->uid,
	    (unsigned)cfg->uid, (unsigned)cfg->uid, (unsigned)cfg->uid);
	if (!status_line(want))
		_exit(11);
	snprintf(want, sizeof want, "Gid:\t%u\t%u\t%u\t%u", (unsigned)cfg->gid,
	    (unsigned)cfg->gid, (unsigned)cfg->gid, (unsigned)cfg->gid);
	if (!status_line(want))
		_exit(12);
	/* No supplementary groups: the kernel prints a tab and a space. */
	if (!status_line("Groups:\t "))
		_exit(13);
	snprintf(want, sizeof want, "CapEff:\t%s", capeff);
	if (!status_line(want))
		_exit(14);
	snprintf(want, sizeof want, "CapPrm:\t%s", capeff);
	if (!status_line(want))
		_exit(15);
	if (!status_line("CapBnd:\t0000000000000000") ||
	    !status_line("CapInh:\t0000000000000000") ||
	    !status_line("CapAmb:\t0000000000000000"))
		_exit(16);
	/* The way back is closed, StateDir is writable. */
	if (setuid(0) != -1)
		_exit(17);
	snprintf(want, sizeof want, "%s/new", cfg->state_dir);
	if ((fd = open(want, O_CREAT | O_WRONLY, 0600)) == -1)
		_exit(18);
	close(fd);
	_exit(0);
}

static int
run_apply(const struct cfg *cfg, const char *capeff)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0)
		apply_child(cfg, capeff);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void
test_apply(void **state)
{
	struct scratch s;
	struct cfg cfg;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	char *cause = NULL, path[256], other[256];
	int fd, sfd;

	(void)state;
	need_root();
	scratch_init(&s);
	scratch_cfg(&s, CFG_ROLE_SERVER, &cfg);
	assert_int_equal(privdrop_prepare(&cfg, &cause), 0);
	/* What setup leaves as root: files in StateDir, the socket. */
	snprintf(path, sizeof path, "%s/ticket.key", s.state);
	assert_true((fd = open(path, O_CREAT | O_WRONLY, 0600)) != -1);
	close(fd);
	/* Not rove's: a file elsewhere, linked in and symlinked to. */
	snprintf(other, sizeof other, "%s/elsewhere", s.dir);
	assert_true((fd = open(other, O_CREAT | O_WRONLY, 0600)) != -1);
	close(fd);
	snprintf(path, sizeof path, "%s/hardlink", s.state);
	assert_int_equal(link(other, path), 0);
	snprintf(path, sizeof path, "%s/symlink", s.state);
	assert_int_equal(symlink(other, path), 0);
	assert_true(strlen(s.sock) < sizeof sun.sun_path);
	memcpy(sun.sun_path, s.sock, strlen(s.sock) + 1);
	assert_true((sfd = socket(AF_UNIX, SOCK_STREAM, 0)) != -1);
	assert_int_equal(bind(sfd, (struct sockaddr *)&sun, sizeof sun), 0);
	assert_int_equal(chown(s.state, 0, 0), 0);

	/* roved with a -R port below 1024 keeps CAP_NET_BIND_SERVICE, and
	 * CAP_NET_ADMIN for its TUN. */
	assert_int_equal(run_apply(&cfg, "0000000000001400"), 0);
	assert_owner_mode(s.state, s.uid, s.gid, 0700);
	snprintf(path, sizeof path, "%s/ticket.key", s.state);
	assert_owner_mode(path, s.uid, s.gid, 0600);
	snprintf(path, sizeof path, "%s/new", s.state);
	assert_owner_mode(path, s.uid, s.gid, 0600);
	assert_owner_mode(other, 0, 0, 0600);
	snprintf(path, sizeof path, "%s/symlink", s.state);
	assert_owner_mode(path, 0, 0, 0777);
	assert_int_equal(lstat(s.sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_uid, s.uid);
	assert_int_equal(st.st_gid, s.gid);
	cfg_clear(&cfg);

	/* rove with a TUN keeps CAP_NET_ADMIN. */
	scratch_cfg(&s, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(run_apply(&cfg, "0000000000001000"), 0);
	cfg_clear(&cfg);

	/* A StateDir that is a link, or belongs to someone other than root
	 * and User, is refused before anything is given away. */
	snprintf(path, sizeof path, "%s.real", s.state);
	assert_int_equal(rename(s.state, path), 0);
	assert_int_equal(chown(path, 0, 0), 0);
	assert_int_equal(symlink(path, s.state), 0);
	scratch_cfg(&s, CFG_ROLE_SERVER, &cfg);
	assert_int_equal(run_apply(&cfg, "0000000000001400"), 10);
	assert_owner_mode(path, 0, 0, 0700);
	assert_int_equal(unlink(s.state), 0);
	assert_int_equal(rename(path, s.state), 0);
	assert_int_equal(chown(s.state, 12345, 12345), 0);
	assert_int_equal(run_apply(&cfg, "0000000000001400"), 10);
	assert_owner_mode(s.state, 12345, 12345, 0700);
	assert_int_equal(chown(s.state, 0, 0), 0);
	cfg_clear(&cfg);

	/* A StateDir the user cannot reach fails the start. */
	assert_int_equal(chmod(s.dir, 0700), 0);
	scratch_cfg(&s, CFG_ROLE_CLIENT, &cfg);
	assert_int_equal(run_apply(&cfg, "0000000000001000"), 10);
	cfg_clear(&cfg);
	close(sfd);
	scratch_free(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_caps_str),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_needed),
		cmocka_unit_test(test_prepare),
		cmocka_unit_test(test_apply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

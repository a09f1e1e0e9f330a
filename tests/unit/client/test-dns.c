/* Unit tests for client/dns.c without a helper (no User): a stand-in
 * resolvconf first in PATH logs its calls, on the loopback device (Tun =
 * lo), with no system bus (DBUS_SYSTEM_BUS_ADDRESS points nowhere), so
 * nothing outside the test's directory is touched. */
#include <arpa/inet.h>
#include <net/if.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "client/dns.h"
#include "config/cfg.h"

static char saved_path[4096];

struct fixture {
	char dir[64];
	char path[160];
	char bin[96];
	char state[96];
	char calls[96];
	char fail[96];
	struct cfg cfg;
	int lo;
};

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	char path[160];
	FILE *f;

	assert_non_null(fx);
	snprintf(fx->dir, sizeof fx->dir, "/tmp/rove-test-dns.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->bin, sizeof fx->bin, "%s/bin", fx->dir);
	snprintf(fx->state, sizeof fx->state, "%s/state", fx->dir);
	snprintf(fx->calls, sizeof fx->calls, "%s/calls", fx->dir);
	snprintf(fx->fail, sizeof fx->fail, "%s/fail", fx->dir);
	assert_int_equal(mkdir(fx->bin, 0755), 0);
	snprintf(path, sizeof path, "%s/resolvconf", fx->bin);
	assert_non_null(f = fopen(path, "w"));
	/* Logs "ARGS | INPUT" (newlines as ';'); fails while FAIL exists. */
	fprintf(f, "#!/bin/sh\n"
	    "if [ -e '%s' ]; then cat >/dev/null; echo 'cannot write'; exit 3; fi\n"
	    "if [ \"$1\" = -a ]; then in=$(tr '\\n' ';'); else in=; fi\n"
	    "printf '%%s | %%s\\n' \"$*\" \"$in\" >>'%s'\n", fx->fail, fx->calls);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0755), 0);
	/* The stand-in first; the tools it uses after it. */
	snprintf(fx->path, sizeof fx->path, "%s:/usr/bin:/bin", fx->bin);
	assert_int_equal(setenv("PATH", fx->path, 1), 0);
	assert_int_equal(setenv("DBUS_SYSTEM_BUS_ADDRESS",
	    "unix:path=/nonexistent/rove-test-dns", 1), 0);
	fx->cfg.role = CFG_ROLE_CLIENT;
	fx->cfg.tun = (char *)"lo";
	fx->cfg.dns = true;
	fx->cfg.state_dir = fx->state;
	fx->lo = (int)if_nametoindex("lo");
	assert_true(fx->lo > 0);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	assert_int_equal(setenv("PATH", saved_path, 1), 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
	assert_int_equal(system(cmd), 0);
	free(fx);
	return 0;
}

/* The calls the stand-in logged, and forget them. */
static char *
take_calls(struct fixture *fx)
{
	static char buf[4096];
	FILE *f = fopen(fx->calls, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (f != NULL) {
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		unlink(fx->calls);
	}
	buf[n] = '\0';
	return buf;
}

static char *
read_note(struct fixture *fx)
{
	static char buf[256];
	char path[160];
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "%s/dns", fx->state);
	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static void
write_note(struct fixture *fx, const char *text)
{
	char path[160];
	FILE *f;

	mkdir(fx->state, 0700);
	snprintf(path, sizeof path, "%s/dns", fx->state);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void
config(struct dns_config *c, const char *servers[], size_t ns,
    const char *search[], size_t nd)
{
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < ns; i++) {
		struct ipaddr *a = &c->servers[c->nservers++];

		a->family = strchr(servers[i], ':') != NULL ? AF_INET6 : AF_INET;
		assert_int_equal(inet_pton(a->family, servers[i], a->b), 1);
	}
	for (size_t i = 0; i < nd; i++)
		snprintf(c->search[c->nsearch++], sizeof c->search[0], "%s",
		    search[i]);
}

static void
test_apply_restore(void **state)
{
	static const char *servers[] = { "198.19.77.1", "fd00:77::1" };
	static const char *search[] = { "corp.example", "example.org" };
	struct fixture *fx = *state;
	struct dns_config c;
	struct dns_status st;
	struct dns *d;
	char *cause = NULL;

	d = dns_create(&fx->cfg, &cause);
	assert_non_null(d);
	assert_string_equal(take_calls(fx), "");
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_NONE);
	assert_null(st.conf);

	config(&c, servers, 2, search, 2);
	dns_apply(d, "lo", fx->lo, &c);
	assert_string_equal(take_calls(fx), "-a lo | nameserver 198.19.77.1;"
	    "nameserver fd00:77::1;search corp.example example.org;\n");
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_APPLIED);
	assert_int_equal(st.backend, DNS_BACKEND_RESOLVCONF);
	assert_string_equal(dns_backend_name(st.backend), "resolvconf");
	assert_string_equal(dns_state_name(st.state), "applied");
	assert_non_null(st.conf);
	assert_int_equal(st.conf->nservers, 2);
	assert_null(st.error);
	assert_string_equal(read_note(fx), "resolvconf lo\n");

	/* A reconnect brings the same: nothing to do. */
	dns_apply(d, "lo", fx->lo, &c);
	assert_string_equal(take_calls(fx), "");
	/* Another: the old one goes first. */
	config(&c, servers, 1, NULL, 0);
	dns_apply(d, "lo", fx->lo, &c);
	assert_string_equal(take_calls(fx), "-d lo -f | \n"
	    "-a lo | nameserver 198.19.77.1;\n");
	/* None: restored, nothing applied. */
	config(&c, NULL, 0, NULL, 0);
	dns_apply(d, "lo", fx->lo, &c);
	assert_string_equal(take_calls(fx), "-d lo -f | \n");
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_NONE);
	assert_null(read_note(fx));

	config(&c, NULL, 0, search, 1);
	dns_apply(d, "lo", fx->lo, &c);
	assert_string_equal(take_calls(fx), "-a lo | search corp.example;\n");
	dns_free(d);
	assert_string_equal(take_calls(fx), "-d lo -f | \n");
	assert_null(read_note(fx));
}

static void
test_failures(void **state)
{
	static const char *servers[] = { "192.0.2.53" };
	struct fixture *fx = *state;
	struct dns_config c;
	struct dns_status st;
	struct dns *d;
	char *cause = NULL;
	FILE *f;

	assert_non_null(d = dns_create(&fx->cfg, &cause));
	config(&c, servers, 1, NULL, 0);
	/* resolvconf fails: its status and first words are the reason. */
	assert_non_null(f = fopen(fx->fail, "w"));
	fclose(f);
	dns_apply(d, "lo", fx->lo, &c);
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_FAILED);
	assert_string_equal(st.error, "resolvconf -a lo exited with 3: cannot write");
	assert_null(read_note(fx));
	unlink(fx->fail);
	dns_restore(d);
	assert_string_equal(take_calls(fx), "");

	/* Only the device Tun names. */
	dns_apply(d, "eth0", fx->lo, &c);
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_FAILED);
	assert_non_null(strstr(st.error, "is not this tunnel's device"));
	dns_restore(d);
	config(&c, servers, 1, NULL, 0);
	snprintf(c.search[0], sizeof c.search[0], "a\nnameserver 6.6.6.6");
	c.nsearch = 1;
	dns_apply(d, "lo", fx->lo, &c);
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_FAILED);
	assert_string_equal(st.error, "a search domain that is not a name");
	assert_string_equal(take_calls(fx), "");
	dns_restore(d);

	/* No resolvconf in PATH (and no resolved): said so. */
	assert_int_equal(setenv("PATH", fx->state, 1), 0);
	config(&c, servers, 1, NULL, 0);
	dns_apply(d, "lo", fx->lo, &c);
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_FAILED);
	assert_string_equal(st.error, "neither systemd-resolved (on the system "
	    "bus) nor resolvconf (in PATH) is there to take them");
	assert_int_equal(setenv("PATH", fx->path, 1), 0);
	dns_free(d);
	assert_string_equal(take_calls(fx), "");

	/* DNS = no: nothing at all. */
	fx->cfg.dns = false;
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	dns_apply(d, "lo", fx->lo, &c);
	dns_get_status(d, &st);
	assert_int_equal(st.state, DNS_STATE_OFF);
	dns_free(d);
	assert_string_equal(take_calls(fx), "");
	fx->cfg.dns = true;
	dns_get_status(NULL, &st);
	assert_int_equal(st.state, DNS_STATE_OFF);
}

static void
test_recover(void **state)
{
	struct fixture *fx = *state;
	struct dns *d;
	char *cause = NULL;

	/* A run that crashed left its note: the next start undoes it. */
	write_note(fx, "resolvconf lo\n");
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	assert_string_equal(take_calls(fx), "-d lo -f | \n");
	assert_null(read_note(fx));
	dns_free(d);
	assert_string_equal(take_calls(fx), "");

	/* Also with DNS = no: undoing is never wrong. */
	fx->cfg.dns = false;
	write_note(fx, "resolvconf lo\n");
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	assert_string_equal(take_calls(fx), "-d lo -f | \n");
	dns_free(d);
	fx->cfg.dns = true;

	/* A note that names anything but a plain name is dropped unused. */
	write_note(fx, "resolvconf ../../x;rm\n");
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	assert_string_equal(take_calls(fx), "");
	assert_null(read_note(fx));
	dns_free(d);
	write_note(fx, "something else\n");
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	assert_string_equal(take_calls(fx), "");
	assert_null(read_note(fx));
	dns_free(d);
	/* A plain name, but not a device Tun (lo here) could have made. */
	write_note(fx, "resolvconf eth0\n");
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	assert_string_equal(take_calls(fx), "");
	assert_null(read_note(fx));
	dns_free(d);
	/* Written by another user (StateDir is User's too): not acted on.
	 * Only root can hand the file to another user. */
	if (geteuid() == 0) {
		char path[160];

		write_note(fx, "resolvconf lo\n");
		snprintf(path, sizeof path, "%s/dns", fx->state);
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_non_null(d = dns_create(&fx->cfg, &cause));
		assert_string_equal(take_calls(fx), "");
		dns_free(d);
		assert_int_equal(unlink(path), 0);
	}
	/* resolved, without a bus: nothing to revert (the link is gone
	 * with the device, and resolved with it forgets it). */
	write_note(fx, "resolved lo\n");
	assert_non_null(d = dns_create(&fx->cfg, &cause));
	assert_string_equal(take_calls(fx), "");
	assert_null(read_note(fx));
	dns_free(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_apply_restore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recover, setup, teardown),
	};

	snprintf(saved_path, sizeof saved_path, "%s",
	    getenv("PATH") != NULL ? getenv("PATH") : "/usr/bin:/bin");
	log_open("test-dns", 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* A stand-in for systemd-resolved on a private D-Bus bus, for test-dns.sh:
 * it owns org.freedesktop.resolve1 and answers the three methods of
 * org.freedesktop.resolve1.Manager that rove calls, writing one line per
 * call to LOG:
 *	SetLinkDNS uid=UID IFINDEX ADDR...
 *	SetLinkDomains uid=UID IFINDEX NAME:ROUTING_ONLY...
 *	RevertLink uid=UID IFINDEX
 * With FAIL naming one of them, that method answers AccessDenied (as
 * resolved does when polkit says no) after logging it.
 *
 * usage: fake-resolved BUS_ADDRESS LOG SECONDS [FAIL]
 * It exits after SECONDS, and prints "ready" on stdout once it owns the
 * name. */
#include <systemd/sd-bus.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static FILE *logf_;
static const char *fail_method;

/* "uid=N" of the caller, as the bus tells it (dbus-daemon's creds). */
static void
log_caller(sd_bus_message *m, const char *method)
{
	sd_bus_creds *creds = NULL;
	uid_t uid = (uid_t)-1;

	if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_UID | SD_BUS_CREDS_EUID,
	    &creds) >= 0 && sd_bus_creds_get_euid(creds, &uid) < 0)
		sd_bus_creds_get_uid(creds, &uid);
	sd_bus_creds_unref(creds);
	fprintf(logf_, "%s uid=%d", method, (int)uid);
}

static int
finish(sd_bus_message *m, const char *method, sd_bus_error *err, int r)
{
	fputc('\n', logf_);
	fflush(logf_);
	if (r < 0)
		return r;
	if (fail_method != NULL && strcmp(fail_method, method) == 0)
		return sd_bus_error_set(err, SD_BUS_ERROR_ACCESS_DENIED,
		    "fake-resolved: refused");
	return sd_bus_reply_method_return(m, NULL);
}

static int
set_link_dns(sd_bus_message *m, void *userdata, sd_bus_error *err)
{
	int32_t ifindex, family;
	const void *bytes;
	size_t len;
	char buf[INET6_ADDRSTRLEN];
	int r;

	(void)userdata;
	log_caller(m, "SetLinkDNS");
	if ((r = sd_bus_message_read(m, "i", &ifindex)) < 0)
		return finish(m, "SetLinkDNS", err, r);
	fprintf(logf_, " %d", (int)ifindex);
	if ((r = sd_bus_message_enter_container(m, 'a', "(iay)")) < 0)
		return finish(m, "SetLinkDNS", err, r);
	while ((r = sd_bus_message_enter_container(m, 'r', "iay")) > 0) {
		if ((r = sd_bus_message_read(m, "i", &family)) < 0 ||
		    (r = sd_bus_message_read_array(m, 'y', &bytes, &len)) < 0)
			return finish(m, "SetLinkDNS", err, r);
		if ((family == AF_INET && len == 4) ||
		    (family == AF_INET6 && len == 16))
			fprintf(logf_, " %s", inet_ntop(family, bytes, buf, sizeof buf));
		else
			fprintf(logf_, " bad(family %d, %zu bytes)", (int)family, len);
		if ((r = sd_bus_message_exit_container(m)) < 0)
			return finish(m, "SetLinkDNS", err, r);
	}
	if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
		return finish(m, "SetLinkDNS", err, r);
	return finish(m, "SetLinkDNS", err, 0);
}

static int
set_link_domains(sd_bus_message *m, void *userdata, sd_bus_error *err)
{
	int32_t ifindex;
	const char *name;
	int routing, r;

	(void)userdata;
	log_caller(m, "SetLinkDomains");
	if ((r = sd_bus_message_read(m, "i", &ifindex)) < 0)
		return finish(m, "SetLinkDomains", err, r);
	fprintf(logf_, " %d", (int)ifindex);
	if ((r = sd_bus_message_enter_container(m, 'a', "(sb)")) < 0)
		return finish(m, "SetLinkDomains", err, r);
	while ((r = sd_bus_message_read(m, "(sb)", &name, &routing)) > 0)
		fprintf(logf_, " %s:%d", name, routing);
	if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
		return finish(m, "SetLinkDomains", err, r);
	return finish(m, "SetLinkDomains", err, 0);
}

static int
revert_link(sd_bus_message *m, void *userdata, sd_bus_error *err)
{
	int32_t ifindex;
	int r;

	(void)userdata;
	log_caller(m, "RevertLink");
	if ((r = sd_bus_message_read(m, "i", &ifindex)) >= 0)
		fprintf(logf_, " %d", (int)ifindex);
	return finish(m, "RevertLink", err, r < 0 ? r : 0);
}

static const sd_bus_vtable manager_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("SetLinkDNS", "ia(iay)", "", set_link_dns,
	    SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD("SetLinkDomains", "ia(sb)", "", set_link_domains,
	    SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD("RevertLink", "i", "", revert_link,
	    SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_VTABLE_END,
};

int
main(int argc, char **argv)
{
	sd_bus *bus = NULL;
	sd_bus_slot *slot = NULL;
	struct timespec start, now;
	long secs;
	int r;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: fake-resolved BUS_ADDRESS LOG SECONDS [FAIL]\n");
		return 2;
	}
	secs = strtol(argv[3], NULL, 10);
	fail_method = argc == 5 ? argv[4] : NULL;
	if ((logf_ = fopen(argv[2], "a")) == NULL) {
		perror(argv[2]);
		return 1;
	}
	if ((r = sd_bus_new(&bus)) < 0 ||
	    (r = sd_bus_set_address(bus, argv[1])) < 0 ||
	    (r = sd_bus_set_bus_client(bus, 1)) < 0 ||
	    (r = sd_bus_start(bus)) < 0 ||
	    (r = sd_bus_add_object_vtable(bus, &slot, "/org/freedesktop/resolve1",
	    "org.freedesktop.resolve1.Manager", manager_vtable, NULL)) < 0 ||
	    (r = sd_bus_request_name(bus, "org.freedesktop.resolve1", 0)) < 0) {
		fprintf(stderr, "fake-resolved: %s\n", strerror(-r));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= secs)
			break;
		if ((r = sd_bus_process(bus, NULL)) < 0)
			break;
		if (r > 0)
			continue;
		if (sd_bus_wait(bus, 200 * 1000) < 0)
			break;
	}
	sd_bus_slot_unref(slot);
	sd_bus_flush_close_unref(bus);
	fclose(logf_);
	return 0;
}

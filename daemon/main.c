/* roved: command line, configuration check, and the event loop. */
#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cfg.h"
#include "daemon.h"
#include "log.h"
#include "server.h"

static void
usage(void)
{
	fprintf(stderr, "usage: roved -c FILE [-f] [-n] [-T] [-v]\n"
	    "  -c FILE  configuration file\n"
	    "  -f       stay in the foreground (roved always does)\n"
	    "  -n       check the configuration and exit\n"
	    "  -T       print the effective configuration and exit\n"
	    "  -v       more logging (twice: QUIC internals too)\n");
	exit(2);
}

static void
stop(void *arg)
{
	server_shutdown(arg);
}

int
main(int argc, char **argv)
{
	const char *path = NULL;
	int ch, verbose = 0, check = 0, print = 0, status = 0;
	struct event *sigs[2];
	struct event_base *base;
	struct server *srv;
	struct cfg cfg = { 0 };
	char *cause = NULL;

	while ((ch = getopt(argc, argv, "c:fnTvh")) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'f':
			break;
		case 'n':
			check = 1;
			break;
		case 'T':
			print = 1;
			break;
		case 'v':
			verbose++;
			break;
		default:
			usage();
		}
	}
	if (path == NULL || optind != argc)
		usage();
	log_open("roved", verbose);
	if (daemon_load_config(path, CFG_ROLE_SERVER, &cfg) != 0) {
		cfg_clear(&cfg);
		return 1;
	}
	if (check || print) {
		if (print)
			cfg_print(&cfg, stdout);
		cfg_clear(&cfg);
		return 0;
	}
	daemon_log_libevent();
	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((srv = server_create(base, &cfg, verbose, &cause)) == NULL) {
		log_error("%s", cause);
		free(cause);
		event_base_free(base);
		cfg_clear(&cfg);
		return 1;
	}
	daemon_signals(base, stop, srv, sigs);
	log_info("listening; %zu peer(s) configured", cfg.npeers);
	event_base_dispatch(base);
	server_free(srv);
	event_free(sigs[0]);
	event_free(sigs[1]);
	event_base_free(base);
	cfg_clear(&cfg);
	return status;
}

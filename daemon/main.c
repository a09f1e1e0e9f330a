/* roved: command line, configuration check, and the event loop. */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "config/cfg.h"
#include "ops/daemon.h"
#include "server.h"

static void
help(FILE *out)
{
	fprintf(out, "usage: roved -c FILE [-f] [-n] [-s] [-T] [-v]\n"
	    "       roved --help | --version\n");
	if (out == stderr)
		return;
	fprintf(out, "\n"
	    "Serve the peers in FILE: their tunnels and forwards.\n"
	    "  -c FILE  configuration file (roved.conf(5))\n"
	    "  -f       stay in the foreground (roved always does)\n"
	    "  -n       check the configuration (and the key, User) and exit\n"
	    "  -s       log to syslog instead of standard error\n"
	    "  -T       print the effective configuration and exit\n"
	    "  -v       more logging (twice: QUIC internals too)\n");
}

static void *
create(struct event_base *base, const struct cfg *cfg, int verbose, char **cause)
{
	struct server *srv = server_create(base, cfg, verbose, cause);

	if (srv != NULL)
		log_info("listening; %zu peer(s) configured", cfg->npeers);
	return srv;
}

static void
shutdown_server(void *arg)
{
	server_shutdown(arg);
}

static int
exit_status(const void *arg)
{
	return server_exit_status(arg);
}

static void
free_server(void *arg)
{
	server_free(arg);
}

static void
exit_server(void *arg)
{
	server_exit(arg);
}

static int
reload(void *arg, const struct cfg *next, const char *buf, size_t len)
{
	return server_reload(arg, next, buf, len);
}

static int
reload_source(void *arg, char **buf, size_t *len)
{
	return server_reload_source(arg, buf, len);
}

static void
started(void *arg)
{
	server_notify(arg);
}

int
main(int argc, char **argv)
{
	static const struct daemon_ops ops = {
		.name = "roved",
		.role = CFG_ROLE_SERVER,
		.help = help,
		.create = create,
		.shutdown = shutdown_server,
		.free = free_server,
		.exit = exit_server,
		.started = started,
		.reload = reload,
		.reload_source = reload_source,
		.exit_status = exit_status,
	};

	return daemon_main(argc, argv, &ops);
}

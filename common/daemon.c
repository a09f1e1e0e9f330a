/* Config loading and signal handling shared by roved and rove. */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>

#include "daemon.h"
#include "log.h"

int
daemon_load_config(const char *path, enum cfg_role role, struct cfg *cfg)
{
	struct cfg_errors errs = { 0 };
	int rv;

	rv = cfg_load(path, role, cfg, &errs);
	for (size_t i = 0; i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msg[i]);
	cfg_errors_clear(&errs);
	return rv;
}

struct stop_ctx {
	struct event_base *base;
	void (*stop)(void *);
	void *arg;
	int count;
};

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	static struct stop_ctx *ctx;

	(void)what;
	ctx = arg;
	log_info("%s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	if (ctx->count++ == 0)
		ctx->stop(ctx->arg);
	else
		event_base_loopbreak(ctx->base);
}

void
daemon_signals(struct event_base *base, void (*stop)(void *), void *arg,
    struct event *evs[2])
{
	static struct stop_ctx ctx;

	signal(SIGPIPE, SIG_IGN);
	ctx = (struct stop_ctx){ base, stop, arg, 0 };
	evs[0] = evsignal_new(base, SIGINT, signal_cb, &ctx);
	evs[1] = evsignal_new(base, SIGTERM, signal_cb, &ctx);
	event_add(evs[0], NULL);
	event_add(evs[1], NULL);
}

static void
libevent_log_cb(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_ERR)
		log_error("libevent: %s", msg);
	else if (severity == EVENT_LOG_WARN)
		log_warn("libevent: %s", msg);
	else
		log_debug("libevent: %s", msg);
}

void
daemon_log_libevent(void)
{
	event_set_log_callback(libevent_log_cb);
}

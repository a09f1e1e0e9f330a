/* Config loading, signal handling, dropping root and the main loop shared
 * by roved and rove. */
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/key.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "config/cfg-diff.h"
#include "control.h"
#include "daemon.h"
#include "notify.h"
#include "privdrop.h"

int
daemon_load_config(const char *path, enum cfg_role role, struct cfg *cfg,
    const struct cfg_option *opts, size_t nopts)
{
	return daemon_load_text(path, NULL, role, cfg, opts, nopts);
}

int
daemon_load_text(const char *path, const char *text, enum cfg_role role,
    struct cfg *cfg, const struct cfg_option *opts, size_t nopts)
{
	struct cfg_errors errs = { 0 };
	int rv;

	rv = text != NULL ? cfg_load_text_options(path, text, role, cfg, &errs,
	    opts, nopts) : cfg_load_options(path, role, cfg, &errs, opts, nopts);
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
	if (ctx->count++ == 0) {
		notify_stopping();
		ctx->stop(ctx->arg);
	}
	else
		event_base_loopbreak(ctx->base);
}

/* What SIGHUP needs to read the configuration again as it was read at
 * start: the same file and command-line forwards. */
struct reload_ctx {
	const struct daemon_ops *ops;
	void *prog;
	const char *path;
	const char *text;   /* the configuration made from the command line */
	const struct cfg_option *opts;
	size_t nopts;
	const struct cfg *running; /* as loaded at start */
};

/* SIGHUP (systemctl reload): read the file again and let the program
 * apply the difference. A file with any error changes nothing; neither
 * does a change the program cannot take (it says why). Keys that only a
 * restart can change are reported once the rest is applied. */
static void
hup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct reload_ctx *ctx = arg;
	struct cfg_errors errs = { 0 }, restart = { 0 };
	uint64_t t0 = clock_now();
	struct cfg next = { 0 };
	char *buf = NULL;
	const char *bytes;
	size_t len = 0;
	int src = 0, rv;

	(void)sig;
	(void)what;
	/* The bytes are read once and handed on with what they made, so
	 * that a server's workers apply the very same (daemon.h). */
	if (ctx->ops->reload_source != NULL &&
	    (src = ctx->ops->reload_source(ctx->prog, &buf, &len)) < 0)
		return;
	if (src == 0)
		log_info("SIGHUP: reloading %s", ctx->path);
	if (src == 0 && ctx->text != NULL) {
		bytes = ctx->text;
		len = strlen(ctx->text);
		rv = cfg_load_text_options(ctx->path, ctx->text,
		    ctx->running->role, &next, &errs, ctx->opts, ctx->nopts);
	} else if (src == 0 && cfg_read_file(ctx->path, &buf, &len, &errs) != 0) {
		bytes = NULL;
		rv = -1;
	} else {
		bytes = buf;
		rv = cfg_load_buffer_options(ctx->path, buf, len,
		    ctx->running->role, &next, &errs, ctx->opts, ctx->nopts);
	}
	if (rv != 0) {
		for (size_t i = 0; i < errs.n; i++)
			log_error("%s", errs.msg[i]);
		log_error("reload refused: %zu error(s) in %s; the running "
		    "configuration stays", errs.n, ctx->path);
		ctx->ops->reload(ctx->prog, NULL, NULL, 0);
		goto out;
	}
	if (ctx->ops->reload(ctx->prog, &next, bytes, len) != 0) {
		log_error("reload refused; the running configuration stays");
		goto out;
	}
	cfg_diff_restart(ctx->running, &next, &restart);
	for (size_t i = 0; i < restart.n; i++)
		log_warn("reload: %s", restart.msg[i]);
	log_info("reload done in %.1f ms", (double)(clock_now() - t0) / 1e6);
out:
	free(buf);
	cfg_errors_clear(&errs);
	cfg_errors_clear(&restart);
	cfg_clear(&next);
}

void
daemon_signals(struct event_base *base, void (*stop)(void *), void *arg,
    struct event *evs[3])
{
	static struct stop_ctx ctx;

	signal(SIGPIPE, SIG_IGN);
	/* Until the program sets up its reload, SIGHUP must not end it, as
	 * its default action would. */
	signal(SIGHUP, SIG_IGN);
	ctx = (struct stop_ctx){ base, stop, arg, 0 };
	evs[0] = evsignal_new(base, SIGINT, signal_cb, &ctx);
	evs[1] = evsignal_new(base, SIGTERM, signal_cb, &ctx);
	evs[2] = NULL;
	for (int i = 0; i < 2; i++)
		event_add(evs[i], NULL);
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

/* At a fast exit (ops->exit) the program's memory points into its
 * configuration: kept here, where a leak checker finds it. */
static volatile struct cfg kept_cfg; /* volatile: never read, kept */

/* The event base of roved and rove, with precise timers: by default
 * libevent reads CLOCK_MONOTONIC_COARSE, which moves once a jiffy (4 ms at
 * HZ=250), and rounds each epoll wait up to whole milliseconds, so a QUIC
 * pacing timer set for half a millisecond runs some 3 ms late. The pacer
 * then sends one send quantum (a millisecond's worth) every few
 * milliseconds whenever no acknowledgement happens to run the write loop
 * sooner: a fraction of its rate, and BBR takes what is delivered for
 * the path's bandwidth and slows down further. EVENT_BASE_FLAG_PRECISE_TIMER
 * makes libevent use CLOCK_MONOTONIC and a timerfd. */
struct event_base *
daemon_base_new(void)
{
	struct event_config *evcfg;
	struct event_base *base;

	if ((evcfg = event_config_new()) == NULL)
		return NULL;
	if (event_config_set_flag(evcfg, EVENT_BASE_FLAG_PRECISE_TIMER) != 0) {
		event_config_free(evcfg);
		return NULL;
	}
	base = event_base_new_with_config(evcfg);
	event_config_free(evcfg);
	return base;
}

/* Every session, forward and scrape is a descriptor, and the soft limit
 * is often 1024: take all the hard limit allows, so that running out
 * needs far more than an idle local user's connections. Returns the
 * limit in force. */
static rlim_t
daemon_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 &&
		    getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return 0;
	}
	return rl.rlim_cur;
}

/* rove up --server HOST[:PORT] --server-key KEY [-i KEYFILE], without a
 * file, as ssh -L needs none: forwards only (Tun = none), the private key
 * from the usual place unless -i names one. The configuration text, or
 * NULL after a message. */
static char *
command_line_config(const char *path, const char *server,
    const char *server_key, const char *identity)
{
	char *key = NULL, *state = NULL, *text, cwd[4096];
	const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
	const char *xdg_state = getenv("XDG_STATE_HOME");

	if (path != NULL || server == NULL || server_key == NULL) {
		fprintf(stderr, "rove: %s\n", path != NULL ? "--server, "
		    "--server-key and -i make a configuration of their own: "
		    "not with -c" : server == NULL ? "--server-key and -i "
		    "need --server HOST[:PORT]" : "--server needs --server-key "
		    "(the server's public key)");
		return NULL;
	}
	/* One value per line: nothing may start another. */
	if (strpbrk(server, "\n\r#;") != NULL || strpbrk(server_key,
	    "\n\r#;") != NULL || (identity != NULL &&
	    strpbrk(identity, "\n\r") != NULL)) {
		fprintf(stderr, "rove: --server, --server-key and -i take one "
		    "word each\n");
		return NULL;
	}
	if (identity != NULL && identity[0] != '/' &&
	    getcwd(cwd, sizeof cwd) != NULL)
		xasprintf(&key, "%s/%s", cwd, identity);
	else if (identity != NULL)
		key = xstrdup(identity);
	else if (geteuid() == 0)
		key = xstrdup("/etc/rove/private.key");
	else if (xdg != NULL && xdg[0] == '/')
		xasprintf(&key, "%s/rove/private.key", xdg);
	else
		xasprintf(&key, "%s/.config/rove/private.key",
		    home != NULL ? home : "");
	/* Tickets for 0-RTT: root's where the units keep them, a user's
	 * under the user's home. */
	if (geteuid() == 0)
		state = xstrdup("/var/lib/rove");
	else if (xdg_state != NULL && xdg_state[0] == '/')
		xasprintf(&state, "%s/rove", xdg_state);
	else
		xasprintf(&state, "%s/.local/state/rove", home != NULL ? home : "");
	xasprintf(&text, "[Client]\nServer = %s\nServerPublicKey = %s\n"
	    "PrivateKeyFile = %s\nTun = none\nStateDir = %s\n", server,
	    server_key, key, state);
	free(key);
	free(state);
	return text;
}

/* What start would refuse that needs neither root nor the network, for
 * -n (the units' ExecStartPre): the private key (present, private, a
 * key) and User when not root. */
static int
check_startable(const struct cfg *cfg)
{
	uint8_t priv[KEY_LEN];
	char *cause = NULL;

	if (privdrop_needed(cfg, geteuid(), getegid(), &cause) == -1 ||
	    key_load_private(cfg->private_key_file, priv, &cause) != 0) {
		explicit_bzero(priv, sizeof priv);
		fprintf(stderr, "%s\n", cause);
		free(cause);
		return -1;
	}
	explicit_bzero(priv, sizeof priv);
	return 0;
}

int
daemon_main(int argc, char **argv, const struct daemon_ops *ops)
{
	const char *path = NULL;
	int ch, verbose = 0, check = 0, print = 0, status = 0, drop;
	bool use_syslog = false;
	struct cfg_option *opts = NULL;
	size_t nopts = 0;
	int rv;
	struct event *sigs[3];
	struct event_base *base;
	struct cfg cfg = { 0 };
	struct reload_ctx reload;
	char *cause = NULL;
	void *prog;
	rlim_t nofile;

	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "server", required_argument, NULL, 'S' },
		{ "server-key", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	const char *server = NULL, *server_key = NULL, *identity = NULL;
	char *text = NULL;

	while ((ch = getopt_long(argc, argv, ops->role == CFG_ROLE_CLIENT ?
	    "c:fnsTvhi:L:R:D:" : "c:fnsTvh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S':
		case 'K':
			if (ops->role != CFG_ROLE_CLIENT) {
				ops->help(stderr);
				exit(2);
			}
			*(ch == 'S' ? &server : &server_key) = optarg;
			break;
		case 'i':
			identity = optarg;
			break;
		case 'h':
			ops->help(stdout);
			free(opts);
			free(text);
			return 0;
		case 'V':
			printf("%s %s\n", ops->name, ROVE_VERSION);
			free(opts);
			free(text);
			return 0;
		case 'L':
		case 'R':
		case 'D':
			opts = xrealloc(opts, (nopts + 1) * sizeof *opts);
			opts[nopts++] = (struct cfg_option){ (char)ch, optarg };
			break;
		case 'c':
			path = optarg;
			break;
		case 'f':
			break; /* both programs stay in the foreground */
		case 'n':
			check = 1;
			break;
		case 's':
			use_syslog = true;
			break;
		case 'T':
			print = 1;
			break;
		case 'v':
			verbose++;
			break;
		default:
			ops->help(stderr);
			exit(2);
		}
	}
	if (optind != argc || (path == NULL && server == NULL)) {
		ops->help(stderr);
		exit(2);
	}
	if (server != NULL || server_key != NULL || identity != NULL) {
		if ((text = command_line_config(path, server, server_key,
		    identity)) == NULL) {
			free(opts);
			free(text);
			return 2;
		}
		path = "command line";
	}
	log_open(ops->name, verbose);
	rv = daemon_load_text(path, text, ops->role, &cfg, opts, nopts);
	if (rv != 0) {
		free(opts);
		free(text);
		cfg_clear(&cfg);
		return 1;
	}
	if (check || print) {
		if (print)
			cfg_print(&cfg, stdout);
		else
			rv = check_startable(&cfg);
		free(opts);
		free(text);
		cfg_clear(&cfg);
		return rv == 0 ? 0 : 1;
	}
	/* Config errors went to stderr, to whoever ran us; from here on the
	 * log may go to syslog. */
	if (use_syslog || cfg.syslog)
		log_to_syslog();
	/* A user other than root cannot become User: say so before any
	 * setup, like a config error. */
	if ((drop = privdrop_needed(&cfg, geteuid(), getegid(), &cause)) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
		free(opts);
		free(text);
		cfg_clear(&cfg);
		return 1;
	}
	if (drop && privdrop_prepare(&cfg, &cause) != 0) {
		log_error("%s", cause);
		free(cause);
		free(opts);
		free(text);
		cfg_clear(&cfg);
		return 1;
	}
	/* The socket's directory is (or will be) User's: control_create,
	 * still run as root, must accept it. */
	if (drop)
		control_allow_owner(cfg.uid);
	daemon_log_libevent();
	nofile = daemon_raise_nofile();
	log_debug("descriptors: up to %llu", (unsigned long long)nofile);
	if ((base = daemon_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((prog = ops->create(base, &cfg, verbose, &cause)) == NULL) {
		log_error("%s", cause);
		free(cause);
		event_base_free(base);
		free(opts);
		free(text);
		cfg_clear(&cfg);
		return 1;
	}
	/* Everything that needs root is set up: the TUN device, the UDP
	 * sockets (with their forced buffer sizes), the control socket and
	 * the files in StateDir. */
	if ((drop ? privdrop_apply(&cfg, &cause) :
	    geteuid() != 0 ? privdrop_trim(&cfg, &cause) : 0) != 0) {
		log_error("%s", cause);
		free(cause);
		ops->free(prog);
		event_base_free(base);
		free(opts);
		free(text);
		cfg_clear(&cfg);
		return 1;
	}
	daemon_signals(base, ops->shutdown, prog, sigs);
	reload = (struct reload_ctx){ ops, prog, path, text, opts, nopts, &cfg };
	sigs[2] = evsignal_new(base, SIGHUP, hup_cb, &reload);
	event_add(sigs[2], NULL);
	notify_init(base);
	if (ops->started != NULL)
		ops->started(prog);
	event_base_dispatch(base);
	notify_free();
	if (ops->exit_status != NULL)
		status = ops->exit_status(prog);
	if (ops->exit != NULL) {
		ops->exit(prog);
		kept_cfg = cfg;
		free(opts);
		free(text);
		return status;
	}
	ops->free(prog);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	event_base_free(base);
	free(opts);
	free(text);
	cfg_clear(&cfg);
	return status;
}

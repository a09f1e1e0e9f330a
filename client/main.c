/* rove: subcommands up, genkey, pubkey and status. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/key.h"
#include "base/log.h"
#include "base/xmalloc.h"
#include "client.h"
#include "config/cfg.h"
#include "ops/control.h"
#include "ops/daemon.h"

#define DEFAULT_CONFIG "/etc/rove/rove.conf"
#define DEFAULT_SERVER_CONFIG "/etc/rove/roved.conf"

static void
help(FILE *out)
{
	fprintf(out, "usage: rove up -c FILE [-f] [-n] [-s] [-T] [-v] "
	    "[-L [bind:]port:host:hostport]\n"
	    "               [-R [bind:]port:host:hostport] [-D [bind:]port]\n"
	    "       rove up --server HOST[:PORT] --server-key KEY [-i KEYFILE] "
	    "[-L ...] [-R ...] [-D ...]\n"
	    "       rove genkey [-o FILE]\n"
	    "       rove pubkey < private.key\n"
	    "       rove status [-s SOCKET | -c FILE] [-j | --json] [--summary]\n"
	    "                   [--peer NAME]\n"
	    "       rove --help | --version\n");
	if (out == stderr)
		return;
	fprintf(out, "\n"
	    "rove up: connect to the server in FILE and carry its tunnel and "
	    "forwards\n"
	    "  -c FILE  configuration file (rove.conf(5))\n"
	    "  -f       stay in the foreground (rove always does)\n"
	    "  -n       check the configuration (and the key, User) and exit\n"
	    "  -s       log to syslog instead of standard error\n"
	    "  -T       print the effective configuration and exit\n"
	    "  -v       more logging (twice: QUIC internals too)\n"
	    "  -L [bind:]port:host:hostport\n"
	    "           listen on port here; the server connects to host:hostport\n"
	    "  -R [bind:]port:host:hostport\n"
	    "           the server listens on port; host:hostport is dialled here\n"
	    "  -D [bind:]port\n"
	    "           a SOCKS5 proxy on port; the server dials each request\n"
	    "  --server HOST[:PORT], --server-key KEY\n"
	    "           no file: forwards only, to this server (its public "
	    "key)\n"
	    "  -i KEYFILE\n"
	    "           with --server: this private key (default: "
	    "/etc/rove/private.key\n"
	    "           as root, else ~/.config/rove/private.key)\n"
	    "rove genkey: a new private key, to FILE (mode 0600) or standard "
	    "output\n"
	    "rove pubkey: the public key of the private key on standard input\n"
	    "rove status: the state of a running rove (or roved)\n"
	    "  -s SOCKET  its control socket\n"
	    "  -c FILE    its configuration (the socket it names)\n"
	    "  -j, --json      as JSON\n"
	    "  --summary       totals only, no per-peer lines\n"
	    "  --peer NAME     one peer only\n"
	    "Without -s or -c: %s, else roved's %s.\n",
	    DEFAULT_CONFIG, DEFAULT_SERVER_CONFIG);
}

static void __attribute__((noreturn))
usage(void)
{
	help(stderr);
	exit(2);
}

/* rove genkey [-o FILE]: with -o the key file is created 0600 whatever
 * the umask (and an existing file is not replaced); on standard output a
 * terminal, or a file others may read, is warned about, as wg genkey
 * does. */
static int
cmd_genkey(int argc, char **argv)
{
	uint8_t priv[KEY_LEN];
	char text[KEY_B64_LEN + 1];
	const char *out = NULL;
	struct stat st;
	int ch, fd = STDOUT_FILENO, rv = 1;

	while ((ch = getopt(argc, argv, "o:")) != -1) {
		if (ch != 'o')
			usage();
		out = optarg;
	}
	if (optind != argc)
		usage();
	if (out != NULL) {
		fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd == -1) {
			fprintf(stderr, "rove: %s: %s\n", out, strerror(errno));
			return 1;
		}
	} else if (isatty(STDOUT_FILENO)) {
		fprintf(stderr, "rove: writing a private key to a terminal; "
		    "use rove genkey -o FILE\n");
	} else if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
	    (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		fprintf(stderr, "rove: warning: the private key goes to a file "
		    "others can read (mode %04o); rove refuses such a key: "
		    "chmod 600 it, or use rove genkey -o FILE\n",
		    (unsigned)(st.st_mode & 07777));
	}
	if (key_generate(priv) != 0) {
		fprintf(stderr, "rove: cannot generate a key\n");
		goto out;
	}
	key_encode(priv, text);
	explicit_bzero(priv, sizeof priv);
	text[KEY_B64_LEN] = '\n';
	if (write(fd, text, KEY_B64_LEN + 1) != KEY_B64_LEN + 1) {
		fprintf(stderr, "rove: %s: %s\n", out != NULL ? out :
		    "standard output", strerror(errno));
		if (out != NULL)
			unlink(out);
		goto out;
	}
	rv = 0;
out:
	explicit_bzero(text, sizeof text);
	if (out != NULL && close(fd) != 0 && rv == 0) {
		fprintf(stderr, "rove: %s: %s\n", out, strerror(errno));
		unlink(out);
		rv = 1;
	}
	return rv;
}

static int
cmd_pubkey(void)
{
	uint8_t priv[KEY_LEN], pub[KEY_LEN];
	char line[256], text[KEY_B64_LEN + 1];

	if (fgets(line, sizeof line, stdin) == NULL || key_decode(line, priv) != 0) {
		fprintf(stderr, "rove: standard input is not a private key "
		    "(expected %d base64 characters)\n", KEY_B64_LEN);
		explicit_bzero(line, sizeof line);
		return 1;
	}
	explicit_bzero(line, sizeof line);
	if (key_public(priv, pub) != 0) {
		explicit_bzero(priv, sizeof priv);
		fprintf(stderr, "rove: cannot derive the public key\n");
		return 1;
	}
	explicit_bzero(priv, sizeof priv);
	key_encode(pub, text);
	printf("%s\n", text);
	return 0;
}

/* The control socket of either program's config: a client's, else a
 * server's. When neither parses, the errors of the closer one (fewer). */
static int
status_config(const char *path, struct cfg *cfg)
{
	struct cfg_errors ec = { 0 }, es = { 0 }, *show;
	int rv = 0;

	if (cfg_load(path, CFG_ROLE_CLIENT, cfg, &ec) == 0)
		goto out;
	cfg_clear(cfg);
	if (cfg_load(path, CFG_ROLE_SERVER, cfg, &es) == 0)
		goto out;
	show = es.n < ec.n ? &es : &ec;
	for (size_t i = 0; i < show->n; i++)
		fprintf(stderr, "%s\n", show->msg[i]);
	rv = -1;
out:
	cfg_errors_clear(&ec);
	cfg_errors_clear(&es);
	return rv;
}

/* status --peer NAME: the answer, and a clear error when it lists no
 * such peer (the daemon answers with the rest of its status either way). */
static int
status_peer(const char *sock, const char *request, const char *peer, int json,
    char **cause)
{
	char *buf = NULL, *want = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int rv;

	if (mem == NULL) {
		xasprintf(cause, "open_memstream: %s", strerror(errno));
		return -1;
	}
	rv = control_request(sock, request, mem, cause);
	fclose(mem);
	if (rv == 0) {
		/* Names are [A-Za-z0-9._-], so they appear as they are. */
		xasprintf(&want, json ? "\"name\":\"%s\"" : "\npeer %s (", peer);
		fwrite(buf, 1, len, stdout);
		if (strstr(buf, want) == NULL) {
			xasprintf(cause, "no peer named %s there (rove status "
			    "lists them all)", peer);
			rv = -1;
		}
	}
	free(want);
	free(buf);
	return rv;
}

static int
cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "summary", no_argument, NULL, 'S' },
		{ "peer", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *path = NULL, *peer = NULL;
	char *fallback = NULL, request[CONTROL_MAX_REQUEST + 1];
	struct cfg cfg = { 0 };
	char *cause = NULL;
	int ch, json = 0, summary = 0, rv;

	while ((ch = getopt_long(argc, argv, "s:c:j", opts, NULL)) != -1) {
		switch (ch) {
		case 'S':
			summary = 1;
			break;
		case 'p':
			peer = optarg;
			/* What a Name may hold (rove.conf(5)), so it is one
			 * word of the request. */
			if (*peer == '\0' || strlen(peer) > 32 ||
			    strspn(peer, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
			    "opqrstuvwxyz0123456789._-") != strlen(peer)) {
				fprintf(stderr, "rove: --peer %s: not a peer name\n",
				    peer);
				return 2;
			}
			break;
		case 's':
			sock = optarg;
			break;
		case 'c':
			path = optarg;
			break;
		case 'j':
			json = 1;
			break;
		default:
			usage();
		}
	}
	/* Without -s or -c: this host's client, else its server. */
	if (sock == NULL && path == NULL && access(DEFAULT_CONFIG, F_OK) == 0)
		path = DEFAULT_CONFIG;
	else if (sock == NULL && path == NULL &&
	    access(DEFAULT_SERVER_CONFIG, F_OK) == 0)
		path = DEFAULT_SERVER_CONFIG;
	if (sock == NULL && path != NULL) {
		if (status_config(path, &cfg) != 0) {
			cfg_clear(&cfg);
			return 1;
		}
		sock = cfg.control_socket;
	}
	if (sock == NULL) {
		char *server = cfg_default_socket(CFG_ROLE_SERVER);

		sock = fallback = cfg_default_socket(CFG_ROLE_CLIENT);
		if (access(sock, F_OK) != 0 && access(server, F_OK) == 0) {
			free(fallback);
			sock = fallback = server;
		} else {
			free(server);
		}
	}
	snprintf(request, sizeof request, "status%s%s%s%s", json ? " json" : "",
	    summary ? " summary" : "", peer != NULL ? " peer " : "",
	    peer != NULL ? peer : "");
	rv = peer != NULL ? status_peer(sock, request, peer, json, &cause) :
	    control_request(sock, request, stdout, &cause);
	if (rv != 0 && cause != NULL) {
		fprintf(stderr, "rove: %s\n", cause);
		free(cause);
	}
	free(fallback);
	cfg_clear(&cfg);
	return rv == 0 ? 0 : 1;
}

static void *
create(struct event_base *base, const struct cfg *cfg, int verbose, char **cause)
{
	return client_create(base, cfg, verbose, cause);
}

static void
shutdown_client(void *arg)
{
	client_shutdown(arg);
}

static void
free_client(void *arg)
{
	client_free(arg);
}

static int
exit_status(const void *arg)
{
	return client_exit_status(arg);
}

static int
reload(void *arg, const struct cfg *next, const char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return client_reload(arg, next);
}

static int
cmd_up(int argc, char **argv)
{
	static const struct daemon_ops ops = {
		.name = "rove",
		.role = CFG_ROLE_CLIENT,
		.help = help,
		.create = create,
		.shutdown = shutdown_client,
		.free = free_client,
		.exit_status = exit_status,
		.reload = reload,
	};

	return daemon_main(argc, argv, &ops);
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		help(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("rove %s\n", ROVE_VERSION);
		return 0;
	}
	/* Subcommand options start after the subcommand's name. */
	if (strcmp(argv[1], "up") == 0)
		return cmd_up(argc - 1, argv + 1);
	if (strcmp(argv[1], "genkey") == 0)
		return cmd_genkey(argc - 1, argv + 1);
	if (strcmp(argv[1], "pubkey") == 0 && argc == 2)
		return cmd_pubkey();
	if (strcmp(argv[1], "status") == 0)
		return cmd_status(argc - 1, argv + 1);
	usage();
}

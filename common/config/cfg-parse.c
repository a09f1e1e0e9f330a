/* Configuration parser: INI lines into struct cfg, driven by cfg-table.c:
 * sections, keys and their errors, finish, whole files and command-line
 * options. Each value is parsed by cfg-value.c and finish's cross-field
 * checks are cfg-check.c's; the struct itself is cfg.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "cfg-int.h"

/* The sections a file of this role may have. */
static unsigned
role_sections(enum cfg_role role)
{
	return role == CFG_ROLE_SERVER ?
	    CFG_SEC_SERVER | CFG_SEC_PEER : CFG_SEC_CLIENT;
}

/* The absolute directory holding the config file at `path`. */
static char *
config_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *d, *cwd, *out;

	if (slash == NULL)
		d = xstrdup(".");
	else if (slash == path)
		d = xstrdup("/");
	else
		d = xstrndup(path, (size_t)(slash - path));
	if (d[0] == '/')
		return d;
	if ((cwd = getcwd(NULL, 0)) == NULL)
		return d;
	out = cfg_resolve(cwd, d);
	free(cwd);
	free(d);
	return out;
}

/* --- lines --- */

void
cfg_parse_init(struct cfg_parse *cp, const char *path, enum cfg_role role,
    struct cfg *cfg, struct cfg_errors *errs)
{
	memset(cp, 0, sizeof *cp);
	memset(cfg, 0, sizeof *cfg);
	cfg->role = role;
	cfg->path = xstrdup(path);
	cp->cfg = cfg;
	cp->errs = errs;
	cp->errs_start = errs->n;
	cp->path = cfg->path;
	cp->dir = config_dir(path);
}

static void
parse_section(struct cfg_parse *cp, char *s)
{
	struct cfg *cfg = cp->cfg;
	unsigned sec = 0;
	char e[ESC_LEN], *close, *name;

	cp->skipping = true;
	if ((close = strchr(s, ']')) == NULL) {
		parse_error(cp, "missing ']' in section header");
		return;
	}
	if (close[1] != '\0')
		parse_error(cp, "unexpected text after section header");
	*close = '\0';
	name = trim(s + 1);
	if ((sec = cfg_section_named(name)) == 0) {
		parse_error(cp, "unknown section [%s]", quote(e, name));
		return;
	}
	if (!(sec & role_sections(cfg->role))) {
		parse_error(cp, "[%s] is not valid in a %s config",
		    cfg_section_name(sec),
		    cfg->role == CFG_ROLE_SERVER ? "server" : "client");
		return;
	}
	cp->skipping = false;
	cp->section = sec;
	if (sec == CFG_SEC_PEER) {
		struct cfg_peer *p;

		/* Doubling: a server may have thousands of peers. */
		if (cfg->npeers == cp->peers_cap) {
			cp->peers_cap = cp->peers_cap > 0 ? cp->peers_cap * 2 : 4;
			cfg->peers = xrealloc(cfg->peers,
			    cp->peers_cap * sizeof *cfg->peers);
			cp->peers = xrealloc(cp->peers,
			    cp->peers_cap * sizeof *cp->peers);
		}
		p = &cfg->peers[cfg->npeers];
		memset(p, 0, sizeof *p);
		memset(&cp->peers[cfg->npeers], 0, sizeof *cp->peers);
		p->line = cp->line;
		cfg->npeers++;
		return;
	}
	if (cp->main_line != 0) {
		parse_error(cp, "duplicate [%s] section (first on line %u)",
		    cfg_section_name(sec), cp->main_line);
		return;
	}
	cp->main_line = cp->line;
}

/* Explain a key that is not valid in the open section. */
static void
misplaced_key(struct cfg_parse *cp, const char *name)
{
	unsigned mine = role_sections(cp->cfg->role);
	const struct cfg_key *k = NULL;
	char e[ESC_LEN];

	/* Prefer a home in this program's sections ("Address" has two). */
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		if (strcasecmp(cfg_table[i].name, name) != 0)
			continue;
		if (k == NULL || (cfg_table[i].sections & mine))
			k = &cfg_table[i];
	}
	if (k == NULL)
		parse_error(cp, "unknown key '%s' in [%s]", quote(e, name),
		    cfg_section_name(cp->section));
	else if (k->sections & mine)
		parse_error(cp, "%s: belongs in [%s], not [%s]", k->name,
		    cfg_section_name(k->sections & mine),
		    cfg_section_name(cp->section));
	else
		parse_error(cp, "%s: is a [%s] key, not valid in a %s config",
		    k->name, cfg_section_name(k->sections & ~mine),
		    cp->cfg->role == CFG_ROLE_SERVER ? "server" : "client");
}

static void
parse_key(struct cfg_parse *cp, const char *name, char *value)
{
	const struct cfg_key *k;
	struct cfg_seen *seen;
	char e[ESC_LEN];
	void *obj;
	size_t id;

	if (cp->skipping)
		return;
	if (cp->section == 0) {
		k = cfg_table_find(name, 0, true);
		parse_error(cp, "%s: key outside any section",
		    k != NULL ? k->name : quote(e, name));
		return;
	}
	if ((k = cfg_table_find(name, cp->section, false)) == NULL) {
		misplaced_key(cp, name);
		return;
	}
	if (cp->section == CFG_SEC_PEER) {
		obj = &cp->cfg->peers[cp->cfg->npeers - 1];
		seen = &cp->peers[cp->cfg->npeers - 1];
	} else {
		obj = cp->cfg;
		seen = &cp->main;
	}
	id = (size_t)(k - cfg_table);
	if (seen->line[id] != 0 && !(k->flags & CFG_F_REPEAT)) {
		parse_error(cp, "%s: duplicate key (first on line %u)", k->name,
		    seen->line[id]);
		return;
	}
	if (seen->line[id] == 0)
		seen->line[id] = cp->line;
	if (*value == '\0' && !(k->flags & CFG_F_EMPTY)) {
		parse_error(cp, "%s: missing value", k->name);
		seen->bad[id] = true;
		return;
	}
	if (cfg_value_parse(cp, k, obj, value) != 0)
		seen->bad[id] = true;
}

void
cfg_parse_line(struct cfg_parse *cp, const char *line, size_t len)
{
	char buf[CFG_MAX_LINE + 1], e[ESC_LEN], *s, *eq;

	cp->line++;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len > CFG_MAX_LINE) {
		parse_error(cp, "line is longer than %d characters",
		    CFG_MAX_LINE);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c == '\0') {
			parse_error(cp, "line contains a NUL byte");
			return;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			parse_error(cp,
			    "line contains control character 0x%02x", c);
			return;
		}
	}
	memcpy(buf, line, len);
	buf[len] = '\0';

	/* A comment starts at '#' or ';' at the start or after blank space,
	 * so values such as "a#b" survive. */
	for (size_t i = 0; i < len; i++) {
		if ((buf[i] == '#' || buf[i] == ';') &&
		    (i == 0 || is_space(buf[i - 1]))) {
			buf[i] = '\0';
			break;
		}
	}
	s = trim(buf);
	if (*s == '\0')
		return;
	if (*s == '[') {
		parse_section(cp, s);
		return;
	}
	if ((eq = strchr(s, '=')) == NULL) {
		parse_error(cp, "missing '=' in \"%s\"", quote(e, s));
		return;
	}
	*eq = '\0';
	s = trim(s);
	if (*s == '\0') {
		parse_error(cp, "missing key name before '='");
		return;
	}
	parse_key(cp, s, trim(eq + 1));
}

/* --- finish: defaults, then the checks of cfg-check.c --- */

static void
fill_defaults(struct cfg_parse *cp, unsigned sec, void *obj,
    struct cfg_seen *seen)
{
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		const struct cfg_key *k = &cfg_table[i];
		char *v;

		if (!(k->sections & sec) || seen->line[i] != 0)
			continue;
		if (k->flags & CFG_F_SOCKET) {
			char **f = field(obj, k->off);

			free(*f);
			*f = cfg_default_socket(cp->cfg->role);
		} else if (k->dflt != NULL) {
			/* The table's defaults are valid values. */
			v = xstrdup(k->dflt);
			(void)cfg_value_parse(cp, k, obj, v);
			free(v);
		}
	}
}

struct sorted_error {
	unsigned line;
	size_t seq;
	char *msg;
};

static int
sorted_error_cmp(const void *va, const void *vb)
{
	const struct sorted_error *a = va, *b = vb;

	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Put this parse's errors in line order; ties keep the order found. */
static void
sort_errors(struct cfg_parse *cp)
{
	struct cfg_errors *e = cp->errs;
	size_t n = e->n - cp->errs_start;
	struct sorted_error *s;

	if (n < 2)
		return;
	s = xcalloc(n, sizeof *s);
	for (size_t i = 0; i < n; i++)
		s[i] = (struct sorted_error){ cp->err_lines[i], i,
		    e->msg[cp->errs_start + i] };
	qsort(s, n, sizeof *s, sorted_error_cmp);
	for (size_t i = 0; i < n; i++)
		e->msg[cp->errs_start + i] = s[i].msg;
	free(s);
}

int
cfg_parse_finish(struct cfg_parse *cp)
{
	struct cfg *cfg = cp->cfg;
	unsigned sec = cfg_main_section(cfg->role);
	unsigned last = cp->noptions > 0 ? cp->file_lines : cp->line;
	unsigned eof = last > 0 ? last : 1;
	int ret;

	if (cp->main_line == 0)
		error_at(cp, eof, "missing [%s] section",
		    cfg_section_name(sec));
	fill_defaults(cp, sec, cfg, &cp->main);
	cfg_check(cp, eof);
	sort_errors(cp);

	ret = cp->errs->n > cp->errs_start ? -1 : 0;
	free(cp->dir);
	free(cp->err_lines);
	free(cp->peers);
	for (size_t i = 0; i < cp->noptions; i++)
		free(cp->option_names[i]);
	free(cp->option_names);
	memset(cp, 0, sizeof *cp);
	return ret;
}

/* --- whole files --- */

/* Split ssh's "[bind:]port:host:hostport" at its colons, brackets kept
 * whole; the config's "[bind:]port = host:hostport" into `out`. */
static int
option_forward(const char *spec, char *out, size_t outlen)
{
	const char *f[4];
	size_t flen[4], nf = 0, depth = 0;
	const char *start = spec;

	for (const char *p = spec;; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']' && depth > 0)
			depth--;
		else if ((*p == ':' && depth == 0) || *p == '\0') {
			if (nf == 4)
				return -1;
			f[nf] = start;
			flen[nf++] = (size_t)(p - start);
			start = p + 1;
			if (*p == '\0')
				break;
		}
	}
	if (nf == 3)
		snprintf(out, outlen, "%.*s = %.*s:%.*s", (int)flen[0], f[0],
		    (int)flen[1], f[1], (int)flen[2], f[2]);
	else if (nf == 4)
		snprintf(out, outlen, "%.*s:%.*s = %.*s:%.*s", (int)flen[0], f[0],
		    (int)flen[1], f[1], (int)flen[2], f[2], (int)flen[3], f[3]);
	else
		return -1;
	return 0;
}

/* One command-line option, as a key of the main section. */
static void
parse_option(struct cfg_parse *cp, const struct cfg_option *o)
{
	char value[CFG_MAX_LINE + 1];
	const char *key;

	cp->option_names = xrealloc(cp->option_names,
	    (cp->noptions + 1) * sizeof *cp->option_names);
	xasprintf(&cp->option_names[cp->noptions++], "-%c %s", o->flag, o->spec);
	cp->line = cp->file_lines + (unsigned)cp->noptions;
	cp->section = cfg_main_section(cp->cfg->role);
	cp->skipping = false;
	if (strlen(o->spec) > CFG_MAX_LINE / 2) {
		parse_error(cp, "too long");
		return;
	}
	switch (o->flag) {
	case 'L':
	case 'R':
		key = o->flag == 'L' ? "LocalForward" : "RemoteForward";
		if (option_forward(o->spec, value, sizeof value) != 0) {
			parse_error(cp, "not [bind:]port:host:hostport");
			return;
		}
		break;
	case 'D':
		key = "DynamicForward";
		snprintf(value, sizeof value, "%s", o->spec);
		break;
	default:
		parse_error(cp, "not a forward option");
		return;
	}
	parse_key(cp, key, trim(value));
}

static int
load(const char *path, const char *buf, size_t len, enum cfg_role role,
    struct cfg *cfg, struct cfg_errors *errs, const struct cfg_option *opts,
    size_t nopts)
{
	struct cfg_parse cp;
	size_t off = 0;

	cfg_parse_init(&cp, path, role, cfg, errs);
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t n = nl != NULL ? (size_t)(nl - (buf + off)) : len - off;

		cfg_parse_line(&cp, buf + off, n);
		off += n + (nl != NULL);
	}
	cp.file_lines = cp.line;
	for (size_t i = 0; i < nopts; i++)
		parse_option(&cp, &opts[i]);
	return cfg_parse_finish(&cp);
}

int
cfg_load_buffer(const char *path, const char *buf, size_t len,
    enum cfg_role role, struct cfg *cfg, struct cfg_errors *errs)
{
	return load(path, buf, len, role, cfg, errs, NULL, 0);
}

static void
file_error(struct cfg_errors *errs, const char *path, const char *what)
{
	errs->msg = xrealloc(errs->msg, (errs->n + 1) * sizeof *errs->msg);
	xasprintf(&errs->msg[errs->n++], "%s: %s", path, what);
}

int
cfg_load(const char *path, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs)
{
	return cfg_load_options(path, role, cfg, errs, NULL, 0);
}

int
cfg_load_text_options(const char *name, const char *text, enum cfg_role role,
    struct cfg *cfg, struct cfg_errors *errs, const struct cfg_option *opts,
    size_t nopts)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->role = role;
	return load(name, text, strlen(text), role, cfg, errs, opts, nopts);
}

int
cfg_read_file(const char *path, char **out, size_t *outlen,
    struct cfg_errors *errs)
{
	struct stat st;
	char *buf = NULL, what[128];
	size_t len = 0;
	ssize_t n;
	int fd, ret = -1;

	/* O_NONBLOCK: a FIFO (or a device) at the path must not hold the
	 * caller, roved's event loop on SIGHUP among them; only a regular
	 * file is read. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1) {
		/* After dropping root (User), a reload reads as that user:
		 * a root-only file then fails here, and the bare errno does
		 * not say why. */
		if (errno == EACCES && geteuid() != 0) {
			snprintf(what, sizeof what, "%s (read as uid %u: make "
			    "the file readable by that user, e.g. chgrp and "
			    "chmod 640)", strerror(EACCES), (unsigned)geteuid());
			file_error(errs, path, what);
		} else {
			file_error(errs, path, strerror(errno));
		}
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		file_error(errs, path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		file_error(errs, path, strerror(EISDIR));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		file_error(errs, path, "not a regular file");
		goto out;
	}
	/* What the file says runs as root (Tun, routes, User, forwards):
	 * one anyone can write is refused, as sshd refuses such a key. */
	if (st.st_mode & S_IWOTH) {
		snprintf(what, sizeof what, "writable by everyone (mode %04o); "
		    "chmod o-w it", (unsigned)(st.st_mode & 07777));
		file_error(errs, path, what);
		goto out;
	}
	buf = xmalloc(CFG_MAX_FILE + 1);
	/* Read one byte past the limit to tell "too large" from "exactly". */
	while (len <= CFG_MAX_FILE) {
		n = read(fd, buf + len, CFG_MAX_FILE + 1 - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			file_error(errs, path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > CFG_MAX_FILE) {
		snprintf(what, sizeof what, "file is larger than %d bytes",
		    CFG_MAX_FILE);
		file_error(errs, path, what);
		goto out;
	}
	*out = buf;
	*outlen = len;
	buf = NULL;
	ret = 0;
out:
	free(buf);
	close(fd);
	return ret;
}

int
cfg_load_buffer_options(const char *path, const char *buf, size_t len,
    enum cfg_role role, struct cfg *cfg, struct cfg_errors *errs,
    const struct cfg_option *opts, size_t nopts)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->role = role;
	return load(path, buf, len, role, cfg, errs, opts, nopts);
}

int
cfg_load_options(const char *path, enum cfg_role role, struct cfg *cfg,
    struct cfg_errors *errs, const struct cfg_option *opts, size_t nopts)
{
	char *buf;
	size_t len;
	int ret;

	memset(cfg, 0, sizeof *cfg);
	cfg->role = role;
	if (cfg_read_file(path, &buf, &len, errs) != 0)
		return -1;
	ret = load(path, buf, len, role, cfg, errs, opts, nopts);
	free(buf);
	return ret;
}


/* The effective configuration written back in config syntax (roved -T,
 * rove -T), and one key's lines of it for a reload's comparison. The
 * public names (cfg_print in cfg.h, cfg_key_text in cfg-table.h) are kept
 * as they were before this file was split from cfg.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/key.h"
#include "base/log.h"
#include "cfg-int.h"

static void
print_prefixes(FILE *f, const char *name, const struct prefix *v, size_t n)
{
	char s[ADDR_STRLEN];

	if (n == 0)
		return;
	fprintf(f, "%s = ", name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ", " : "", addr_prefix_str(&v[i], s));
	fputc('\n', f);
}

/* "host:port", bracketing IPv6 literals. */
static void
print_hostport(FILE *f, const char *host, uint16_t port)
{
	if (strchr(host, ':') != NULL)
		fprintf(f, "[%s]:%u", host, (unsigned)port);
	else
		fprintf(f, "%s:%u", host, (unsigned)port);
}

static void
print_key(const struct cfg_key *k, const void *obj, FILE *f)
{
	const void *p = cfield(obj, k->off);
	char s[ADDR_STRLEN], b64[KEY_B64_LEN + 1];

	switch (k->type) {
	case CFG_T_PATH:
	case CFG_T_NAME:
	case CFG_T_HOSTNAME:
	case CFG_T_USER:
	case CFG_T_GROUP: {
		const char *v = *(char *const *)p;

		if (v != NULL)
			fprintf(f, "%s = %s\n", k->name, v);
		break;
	}
	case CFG_T_TUN: {
		const char *v = *(char *const *)p;

		fprintf(f, "%s = %s\n", k->name, v != NULL ? v : "none");
		break;
	}
	case CFG_T_NUMBER:
		fprintf(f, "%s = %u\n", k->name,
		    (unsigned)*(const uint32_t *)p);
		break;
	case CFG_T_BOOL:
		fprintf(f, "%s = %s\n", k->name, *(const bool *)p ? "yes" : "no");
		break;
	case CFG_T_CONGESTION:
		fprintf(f, "%s = %s\n", k->name,
		    *(const enum cfg_congestion *)p == CFG_CC_BBR ?
		    "bbr" : "cubic");
		break;
	case CFG_T_KEY_EXCHANGE:
		fprintf(f, "%s = %s\n", k->name, cfg_key_exchange_name(
		    *(const enum cfg_key_exchange *)p));
		break;
	case CFG_T_AUTO_OFF:
		fprintf(f, "%s = %s\n", k->name,
		    *(const enum cfg_auto_off *)p == CFG_OFF ? "off" : "auto");
		break;
	case CFG_T_TRANSPORT: {
		enum cfg_transport t = *(const enum cfg_transport *)p;

		fprintf(f, "%s = %s\n", k->name, t == CFG_TRANSPORT_QUIC ? "quic" :
		    t == CFG_TRANSPORT_TCP ? "tcp" : "auto");
		break;
	}
	case CFG_T_PROXY: {
		char u[PROXY_URL_MASKED_STRLEN];

		fprintf(f, "%s = %s\n", k->name, proxy_url_masked(p, u));
		break;
	}
	case CFG_T_LISTEN: {
		struct listen_set l = cfg_value_listen_set(k,
		    (struct cfg *)(uintptr_t)obj);

		for (size_t i = 0; i < *l.n; i++) {
			const void *sa = &l.ss[i];

			fprintf(f, "%s = %s\n", k->name,
			    addr_sockaddr_str(sa, s));
		}
		break;
	}
	case CFG_T_ADDRPORT:
		if (*(const socklen_t *)cfield(obj, k->off_n) != 0)
			fprintf(f, "%s = %s\n", k->name,
			    addr_sockaddr_str(p, s));
		break;
	case CFG_T_IFADDRS:
	case CFG_T_HOSTADDRS:
		print_prefixes(f, k->name, p,
		    *(const size_t *)cfield(obj, k->off_n));
		break;
	case CFG_T_PREFIXES: {
		const struct cfg_prefix_list *l = p;

		print_prefixes(f, k->name, l->v, l->n);
		break;
	}
	case CFG_T_DNSADDRS: {
		const struct ipaddr *v = p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%s", i ? ", " : "", addr_ip_str(&v[i], s));
		fputc('\n', f);
		break;
	}
	case CFG_T_DOMAINS: {
		char *const *v = p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%s", i ? ", " : "", v[i]);
		fputc('\n', f);
		break;
	}
	case CFG_T_SERVER_ID: {
		char hex[2 * CID_SERVER_ID_MAX + 1];
		const struct cid_server_id *sid = p;

		if (sid->len > 0)
			fprintf(f, "%s = %s\n", k->name, cid_server_id_str(sid, hex));
		break;
	}
	case CFG_T_PUBKEY:
		key_encode(p, b64);
		fprintf(f, "%s = %s\n", k->name, b64);
		break;
	case CFG_T_FWDRULES: {
		const struct cfg_forward_rule *r =
		    *(struct cfg_forward_rule *const *)p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++) {
			if (i > 0)
				fputs(", ", f);
			if (r[i].udp)
				fputs("udp/", f);
			if (r[i].is_name)
				fputs(r[i].name, f);
			else if (r[i].prefix.addr.family == AF_INET6)
				fprintf(f, "[%s]",
				    addr_prefix_str(&r[i].prefix, s));
			else
				fputs(addr_prefix_str(&r[i].prefix, s), f);
			if (r[i].port == 0)
				fputs(":*", f);
			else
				fprintf(f, ":%u", (unsigned)r[i].port);
		}
		fputc('\n', f);
		break;
	}
	case CFG_T_REMOTE_RULES: {
		const struct cfg_remote_rule *v =
		    *(struct cfg_remote_rule *const *)p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);
		char rs[PROTO_FWD_REMOTE_STRLEN];

		if (n == 0)
			break;
		fprintf(f, "%s = ", k->name);
		for (size_t i = 0; i < n; i++) {
			struct proto_remote_forward rf = {
				.port = v[i].port, .bind = v[i].bind,
				.bind_addr = v[i].addr, .udp = v[i].udp,
			};

			/* The plain port as written: loopback is the
			 * default. */
			if (v[i].bind == PROTO_RBIND_DEFAULT)
				fprintf(f, "%s%s%u", i ? ", " : "",
				    v[i].udp ? "udp/" : "", (unsigned)v[i].port);
			else
				fprintf(f, "%s%s", i ? ", " : "",
				    proto_fwd_remote_str(&rf, rs));
		}
		fputc('\n', f);
		break;
	}
	case CFG_T_PORTS: {
		uint16_t first = *(const uint16_t *)p;

		if (first != 0)
			fprintf(f, "%s = %u-%u\n", k->name, (unsigned)first,
			    (unsigned)*(const uint16_t *)cfield(obj, k->off_n));
		break;
	}
	case CFG_T_ENDPOINT: {
		const char *host = *(char *const *)p;

		if (host == NULL)
			break;
		fprintf(f, "%s = ", k->name);
		print_hostport(f, host,
		    *(const uint16_t *)cfield(obj, k->off_n));
		fputc('\n', f);
		break;
	}
	case CFG_T_FORWARD:
	case CFG_T_DYNAMIC: {
		const struct cfg_forward *v = *(struct cfg_forward *const *)p;
		size_t n = *(const size_t *)cfield(obj, k->off_n);

		for (size_t i = 0; i < n; i++) {
			fprintf(f, "%s = %s", k->name, v[i].udp ? "udp/" : "");
			if (v[i].bind_host != NULL)
				print_hostport(f, v[i].bind_host,
				    v[i].bind_port);
			else
				fprintf(f, "%u", (unsigned)v[i].bind_port);
			if (v[i].target_host != NULL) {
				fputs(" = ", f);
				print_hostport(f, v[i].target_host,
				    v[i].target_port);
			}
			fputc('\n', f);
		}
		break;
	}
	}
}

static void
print_section(const void *obj, unsigned sec, FILE *f)
{
	fprintf(f, "[%s]\n", cfg_section_name(sec));
	for (size_t i = 0; i < CFG_KEY_COUNT; i++) {
		if (cfg_table[i].sections & sec)
			print_key(&cfg_table[i], obj, f);
	}
}

void
cfg_print(const struct cfg *cfg, FILE *f)
{
	print_section(cfg, cfg_main_section(cfg->role), f);
	for (size_t i = 0; i < cfg->npeers; i++) {
		fputc('\n', f);
		print_section(&cfg->peers[i], CFG_SEC_PEER, f);
	}
}

char *
cfg_key_text(const void *obj, enum cfg_key_id id)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	print_key(&cfg_table[id], obj, f);
	if (fclose(f) != 0)
		fatal("open_memstream");
	return buf;
}


/* libFuzzer harness for common/wire/proxy.c: the answers of HTTP and
 * SOCKS5 proxies, Proxy's URL and no_proxy, all from the same input. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Every prefix: "more" (0) until the bytes decide, then the same verdict
 * whatever follows; a whole answer is never longer than its input. */
static void
check_http(const uint8_t *data, size_t size)
{
	size_t lim = size < PROXY_HTTP_REPLY_MAX + 1 ? size : PROXY_HTTP_REPLY_MAX + 1;
	struct proxy_http_reply r, first;
	long v, verdict = 0;

	memset(&first, 0, sizeof first);
	for (size_t i = 0; i <= lim; i++) {
		memset(&r, 0, sizeof r);
		v = proxy_http_parse_reply(data, i, &r);
		assert(v >= PROXY_TOO_LONG && v <= (long)i);
		if (verdict == 0) {
			verdict = v;
			if (v > 0) {
				assert(r.status >= 100 && r.status <= 999);
				assert(data[v - 1] == '\n');
				for (const char *p = r.line; *p != '\0'; p++)
					assert(*p >= 0x20 && *p < 0x7f);
				assert(strlen(r.line) <= PROXY_STATUS_LINE_MAX);
				first = r;
			}
		} else if (verdict > 0) {
			assert(v == verdict);
			assert(r.status == first.status);
			assert(strcmp(r.line, first.line) == 0);
		} else if (verdict == PROXY_MALFORMED) {
			assert(v == verdict);
		}
	}
}

static void
check_socks(const uint8_t *data, size_t size)
{
	size_t lim = size < 300 ? size : 300;
	long vm = 0, va = 0, vr = 0, v;
	uint8_t c;

	for (size_t i = 0; i <= lim; i++) {
		c = 0;
		v = proxy_socks5_parse_method(data, i, &c);
		assert(v == 0 || v == 2 || v == PROXY_MALFORMED);
		assert(vm == 0 || v == vm);
		vm = v;
		v = proxy_socks5_parse_auth(data, i, &c);
		assert(v == 0 || v == 2 || v == PROXY_MALFORMED);
		assert(va == 0 || v == va);
		va = v;
		v = proxy_socks5_parse_reply(data, i, &c);
		assert(v == PROXY_MALFORMED || (v >= 0 && v <= (long)i));
		assert(vr == 0 || v == vr);
		if (v > 0)
			assert(c == data[1] && v >= 4 + 1 + 2 && v <= 4 + 1 + 255 + 2);
		vr = v;
	}
	(void)proxy_socks5_rep_str(size > 0 ? data[0] : 0);
}

/* The input as text: a URL, and "list|host" for no_proxy. */
static void
check_text(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *bar;
	char b[PROXY_URL_STRLEN], m[PROXY_URL_MASKED_STRLEN];
	struct proxy_url u;
	const char *why = NULL;

	assert(s != NULL);
	memcpy(s, data, size);
	s[size] = '\0';
	if (proxy_url_parse(s, &u, &why) == 0) {
		assert(strlen(u.user) <= PROXY_CRED_MAX);
		assert(strlen(u.pass) <= PROXY_CRED_MAX);
		proxy_url_str(&u, b);
		proxy_url_masked(&u, m);
		if (u.has_cred && u.kind != PROXY_ENV && u.kind != PROXY_NONE) {
			assert(strstr(m, ":***@") != NULL);
			assert(strchr(u.user, ':') == NULL);
		}
	} else {
		assert(why != NULL);
	}
	if ((bar = strchr(s, '|')) != NULL) {
		*bar = '\0';
		(void)proxy_no_proxy_match(s, bar + 1);
	}
	free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_http(data, size);
	check_socks(data, size);
	check_text(data, size);
	return 0;
}

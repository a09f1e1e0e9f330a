/* Unit tests for common/status.c: what reaches a terminal is escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "key.h"
#include "status.h"

/* Render and return a malloc'd, NUL-terminated copy. */
static char *
render(const struct status *st, bool json)
{
	struct evbuffer *out = evbuffer_new();
	size_t len;
	char *s;

	assert_non_null(out);
	status_render(out, st, json);
	len = evbuffer_get_length(out);
	s = malloc(len + 1);
	assert_non_null(s);
	assert_int_equal(evbuffer_remove(out, s, len), (int)len);
	s[len] = '\0';
	evbuffer_free(out);
	return s;
}

/* Names that got past every check upstream still cannot move the cursor,
 * clear the screen or start a line of their own. */
static void
test_text_escapes_strings(void **state)
{
	static const uint8_t pub[KEY_LEN];
	struct tunnel_counters global = { 0 }, counters = { .rx_packets = 1 };
	struct status_peer peer = {
		.name = "lap\x1b[2Jtop\nfake: line\x7f",
		.public_key = pub,
		.state = "up\r",
		.counters = &counters,
	};
	struct status st = {
		.role = "server\a",
		.tun = "rove\x1b]0;title\x07",
		.mtu = 1380,
		.datagram_mtu = 1200,
		.counters = &global,
		.peers = &peer,
		.npeers = 1,
	};
	char *text, *json;

	(void)state;
	text = render(&st, false);
	assert_string_equal(text,
	    "server\\x07: interface rove\\x1b]0;title\\x07, mtu 1380 "
	    "(datagram fits 1200)\n"
	    "  offloads: off; super-packets read 0, written 0\n"
	    "  drops: none\n"
	    "\n"
	    "peer lap\\x1b[2Jtop\\x0afake: line\\x7f "
	    "(AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=)\n"
	    "  state: up\\x0d\n"
	    "  roaming: 0 migrations, 0 rebinds, 0 reconnects, 0-RTT 0/0 accepted\n"
	    "  addresses: (none)\n"
	    "  allowed ips: (none)\n"
	    "  transfer: 0 B (1 packets) received, 0 B (0 packets) sent\n"
	    "  handshakes: 0\n"
	    "  drops: none\n");
	for (const char *p = text; *p != '\0'; p++)
		assert_true(*p == '\n' || (*p >= 0x20 && *p < 0x7f));

	/* JSON escapes control characters itself, and keeps the text whole. */
	json = render(&st, true);
	assert_non_null(strstr(json,
	    "\"name\":\"lap\\u001b[2Jtop\\u000afake: line\\u007f\""));
	assert_non_null(strstr(json, "\"tun\":\"rove\\u001b]0;title\\u0007\""));
	free(text);
	free(json);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_escapes_strings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

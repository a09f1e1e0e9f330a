/* Unit tests for common/ops/status.c: what reaches a terminal is escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "base/clock.h"
#include "base/key.h"
#include <time.h>
#include "ops/status.h"

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
	    "  latest handshake: never\n"
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

/* Requests: words in any order, unknown ones ignored, "peer" takes the
 * next word (cut to STATUS_NAME_MAX, longer than any name), "metrics"
 * only as the request itself. */
static uint64_t
fixed_wall(void)
{
	return 1796567000;   /* 2026-12-06 14:23:20 UTC */
}

/* Since when, and is anything arriving: the latest handshake's time and
 * age, the last packet's age; a peer never connected says so; a server
 * shows the 0-RTT it accepted without attempts it cannot know. */
static void
test_text_handshake_age(void **state)
{
	static const uint8_t pub[KEY_LEN];
	struct tunnel_counters global = { 0 }, counters = { 0 };
	struct status_peer peers[2] = {
		{
			.name = "laptop",
			.public_key = pub,
			.state = "established",
			.counters = &counters,
			.latest_handshake = 1796567000 - 192,
			.has_rx_idle = true,
			.rx_idle_ms = 1234,
			.roam = { .zero_rtt_accepted = 2 },
		},
		{
			.name = "branch",
			.public_key = pub,
			.state = "closed",
			.counters = &counters,
		},
	};
	struct status st = {
		.role = "server",
		.mtu = 1380,
		.counters = &global,
		.peers = peers,
		.npeers = 2,
	};
	char *text, *json;

	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	clock_set_wall_source(fixed_wall);
	text = render(&st, false);
	assert_non_null(strstr(text, "\npeer laptop (AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=)\n"
	    "  state: established\n"
	    "  latest handshake: 2026-12-06 14:20:08 (3 min 12 s ago)\n"
	    "  last packet received: 1.2 s ago\n"));
	assert_non_null(strstr(text, "0 reconnects, 0-RTT accepted 2 times\n"));
	assert_non_null(strstr(text, "\npeer branch (AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=)\n"
	    "  state: closed (never connected)\n"
	    "  latest handshake: never\n"));
	assert_null(strstr(text, "0-RTT 2/0"));
	json = render(&st, true);
	assert_non_null(strstr(json, "\"latest_handshake\":1796566808,"
	    "\"last_received_ms_ago\":1234,"));
	assert_non_null(strstr(json, "\"latest_handshake\":0,"
	    "\"last_received_ms_ago\":null,"));
	clock_set_wall_source(NULL);
	free(text);
	free(json);
}

/* Listeners: each on a line of its own in text (escaped), an array in
 * JSON, a dynamic forward without a target. */
static void
test_listeners(void **state)
{
	static const uint8_t pub[KEY_LEN];
	struct tunnel_counters global = { 0 }, counters = { 0 };
	struct status_listener ls[3] = {
		{ "local", "127.0.0.1:8080", "db.internal:5432", "listening" },
		{ "dynamic", "127.0.0.1:1080", "", "listening" },
		{ "remote", "server port 2299", "127.0.0.1:22\x1b", "denied" },
	};
	struct status_peer peer = {
		.name = "server",
		.public_key = pub,
		.state = "established",
		.counters = &counters,
		.listeners = ls,
		.nlisteners = 3,
	};
	struct status st = {
		.role = "client",
		.counters = &global,
		.peers = &peer,
		.npeers = 1,
	};
	char *text, *json;

	(void)state;
	text = render(&st, false);
	assert_non_null(strstr(text, "  listeners:\n"
	    "    local 127.0.0.1:8080 -> db.internal:5432: listening\n"
	    "    dynamic 127.0.0.1:1080: listening\n"
	    "    remote server port 2299 -> 127.0.0.1:22\\x1b: denied\n"));
	json = render(&st, true);
	assert_non_null(strstr(json, "\"listeners\":[{\"kind\":\"local\","
	    "\"bind\":\"127.0.0.1:8080\",\"target\":\"db.internal:5432\","
	    "\"state\":\"listening\"},{\"kind\":\"dynamic\",\"bind\":"
	    "\"127.0.0.1:1080\",\"target\":null,\"state\":\"listening\"},"
	    "{\"kind\":\"remote\",\"bind\":\"server port 2299\",\"target\":"
	    "\"127.0.0.1:22\\u001b\",\"state\":\"denied\"}]"));
	free(text);
	free(json);
}

/* A client whose TUN comes with its first session is not forward-only. */
static void
test_text_tun_pending(void **state)
{
	struct tunnel_counters global = { 0 };
	struct status st = {
		.role = "client",
		.tun_pending = "rove0",
		.counters = &global,
	};
	char *text;

	(void)state;
	text = render(&st, false);
	assert_string_equal(text, "client: interface rove0 (not up yet: it comes "
	    "with the server's configuration)\n  drops: none\n");
	free(text);
}

static void
test_request_parse(void **state)
{
	char longname[200];
	struct status_request rq;

	(void)state;
	status_request_parse("status", &rq);
	assert_false(rq.json || rq.summary || rq.metrics);
	assert_string_equal(rq.peer, "");
	assert_true(status_request_wants(&rq, "laptop"));
	status_request_parse("status json", &rq);
	assert_true(rq.json);
	assert_false(rq.summary);
	status_request_parse("status summary json", &rq);
	assert_true(rq.json && rq.summary);
	assert_false(status_request_wants(&rq, "laptop"));
	status_request_parse("status  peer   lap-1.x  json ", &rq);
	assert_true(rq.json);
	assert_string_equal(rq.peer, "lap-1.x");
	assert_true(status_request_wants(&rq, "lap-1.x"));
	assert_false(status_request_wants(&rq, "lap-1"));
	assert_false(status_request_wants(&rq, "lap-1.xy"));
	status_request_parse("status peer", &rq);
	assert_string_equal(rq.peer, "");
	status_request_parse("status jsonx peers x", &rq);
	assert_false(rq.json);
	assert_string_equal(rq.peer, "");
	status_request_parse("metrics", &rq);
	assert_true(rq.metrics);
	status_request_parse("status metrics", &rq);
	assert_false(rq.metrics);
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	memcpy(longname, "peer ", 5);
	status_request_parse(longname, &rq);
	assert_int_equal(strlen(rq.peer), STATUS_NAME_MAX);
}

/* A summary: the counts of peers by state, and no list. */
static void
test_summary(void **state)
{
	static const uint8_t pub[KEY_LEN];
	struct tunnel_counters global = { 0 }, counters = { 0 };
	struct status_peer peer = {
		.name = "laptop",
		.public_key = pub,
		.state = "established",
		.counters = &counters,
	};
	struct status_peer_counts counts = { 3, 1, 0, 2 };
	struct status st = {
		.role = "server",
		.mtu = 1380,
		.counters = &global,
		.peers = &peer,
		.npeers = 1,
		.peer_counts = &counts,
	};
	char *text, *json;

	(void)state;
	text = render(&st, false);
	assert_non_null(strstr(text, "\n  peers: 3 configured, 1 established, "
	    "0 handshaking, 2 closed\n\npeer laptop "));
	json = render(&st, true);
	assert_non_null(strstr(json, "\"peer_states\":{\"configured\":3,"
	    "\"established\":1,\"handshaking\":0,\"closed\":2},\"peers\":["));
	free(text);
	free(json);
	st.summary = true;
	text = render(&st, false);
	assert_non_null(strstr(text, "\n  peers: 3 configured, 1 established, "
	    "0 handshaking, 2 closed\n"));
	assert_null(strstr(text, "laptop"));
	json = render(&st, true);
	assert_null(strstr(json, "\"peers\""));
	assert_null(strstr(json, "laptop"));
	assert_string_equal(json + strlen(json) - 2, "}\n");
	free(text);
	free(json);
}

/* The head, the peers in parts (each into a buffer of its own), then
 * the end: the same bytes as all at once, as JSON and as text, with and
 * without peers. */
static void
test_render_in_parts(void **state)
{
	static const uint8_t pub[KEY_LEN] = { 1, 2, 3 };
	struct tunnel_counters global = { .rx_packets = 7 }, counters[5];
	struct status_peer peers[5];
	struct status st = {
		.role = "server",
		.tun = "rove0",
		.mtu = 1380,
		.counters = &global,
		.peers = peers,
	};
	static const char *const names[5] = { "a", "b", "c", "d", "e" };

	(void)state;
	for (size_t i = 0; i < 5; i++) {
		counters[i] = (struct tunnel_counters){ .rx_bytes = 100 * i };
		peers[i] = (struct status_peer){
			.name = names[i], .public_key = pub, .state = "closed",
			.counters = &counters[i],
		};
	}
	for (size_t npeers = 0; npeers <= 5; npeers += 5) {
		for (int json = 0; json <= 1; json++) {
			struct status_renderer r;
			struct evbuffer *whole = evbuffer_new(), *parts = evbuffer_new();
			char *all;

			st.npeers = npeers;
			all = render(&st, json);
			status_render_head(&r, parts, &st, json);
			for (size_t i = 0; i < npeers; i += 2) {
				struct evbuffer *part = evbuffer_new();

				status_render_peers(&r, part, peers + i,
				    npeers - i < 2 ? npeers - i : 2);
				evbuffer_add_buffer(parts, part);
				evbuffer_free(part);
			}
			status_render_end(&r, whole);
			evbuffer_add_buffer(parts, whole);
			assert_int_equal(evbuffer_get_length(parts), strlen(all));
			assert_memory_equal(evbuffer_pullup(parts, -1), all,
			    strlen(all));
			free(all);
			evbuffer_free(whole);
			evbuffer_free(parts);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_escapes_strings),
		cmocka_unit_test(test_text_handshake_age),
		cmocka_unit_test(test_text_tun_pending),
		cmocka_unit_test(test_listeners),
		cmocka_unit_test(test_request_parse),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_render_in_parts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

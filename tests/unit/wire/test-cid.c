/* Unit tests for common/wire/cid.c: QUIC-LB connection IDs and server IDs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/cid.h"

/* A group member's CIDs: first octet 0x0f (config 0, 15 more octets),
 * then its ID, then octets that differ from CID to CID. */
static void
test_layout(void **state)
{
	struct cid_server_id sid, got;
	uint8_t a[CID_LEN], b[CID_LEN];

	(void)state;
	assert_int_equal(cid_server_id_parse("0a1b2c", &sid), 0);
	sid.config = 0;
	cid_make(&sid, a);
	cid_make(&sid, b);
	assert_int_equal(a[0], 0x0f);
	assert_int_equal(a[1], 0x0a);
	assert_int_equal(a[2], 0x1b);
	assert_int_equal(a[3], 0x2c);
	assert_memory_equal(a, b, 4);
	assert_memory_not_equal(a + 4, b + 4, CID_LEN - 4);
	assert_true(cid_server_id(a, sizeof a, &sid, &got));
	assert_true(cid_server_id_equal(&got, &sid));
	/* A CID of another length, or another config, is not ours. */
	assert_false(cid_server_id(a, sizeof a - 1, &sid, &got));
	sid.config = 4;
	assert_false(cid_server_id(a, sizeof a, &sid, &got));
	sid.len = 0;
	assert_false(cid_server_id(a, sizeof a, &sid, &got));
}

/* Config 4: the first octet is 0x8f, whose top bits 10 are Katran's "CID
 * version 2", which reads a 24-bit server ID from octets 1 to 3. */
static void
test_config(void **state)
{
	struct cid_server_id sid, got;
	uint8_t c[CID_LEN];

	(void)state;
	assert_int_equal(cid_server_id_parse("abcdef", &sid), 0);
	sid.config = 4;
	cid_make(&sid, c);
	assert_int_equal(c[0], 0x8f);
	assert_int_equal(c[0] >> 6, 2);
	assert_int_equal((uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3],
	    0xabcdef);
	assert_true(cid_server_id(c, sizeof c, &sid, &got));
	assert_true(cid_server_id_equal(&got, &sid));
}

/* Without a ServerID the CID says it cannot be routed (config 7), so no
 * balancer reads random octets as a server's ID. */
static void
test_unroutable(void **state)
{
	struct cid_server_id none = { .len = 0 }, one = { .id = { 1 }, .len = 1 }, got;
	uint8_t c[CID_LEN];

	(void)state;
	for (int i = 0; i < 64; i++) {
		cid_make(&none, c);
		assert_int_equal(c[0] >> 5, CID_CONFIG_UNROUTABLE);
		assert_false(cid_server_id(c, sizeof c, &one, &got));
		cid_make(NULL, c);
		assert_int_equal(c[0] >> 5, CID_CONFIG_UNROUTABLE);
	}
}

static void
test_parse(void **state)
{
	struct cid_server_id sid = { .len = 9 };
	char buf[2 * CID_SERVER_ID_MAX + 1];

	(void)state;
	assert_int_equal(cid_server_id_parse("0x01", &sid), 0);
	assert_int_equal(sid.len, 1);
	assert_int_equal(sid.id[0], 1);
	assert_string_equal(cid_server_id_str(&sid, buf), "01");
	assert_int_equal(cid_server_id_parse("FfEe", &sid), 0);
	assert_int_equal(sid.len, 2);
	assert_string_equal(cid_server_id_str(&sid, buf), "ffee");
	assert_int_equal(cid_server_id_parse("", &sid), -1);
	assert_int_equal(cid_server_id_parse("0x", &sid), -1);
	assert_int_equal(cid_server_id_parse("1", &sid), -1);
	assert_int_equal(cid_server_id_parse("0g", &sid), -1);
	assert_int_equal(cid_server_id_parse("01020304", &sid), -1);
	assert_int_equal(sid.len, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_unroutable),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for common/forward/streams.c: stream events go by their
 * argument's kind, and a UDP flow's stream on a connection its relay
 * does not serve is left alone (never handed to the forwards as if it
 * were one of theirs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "forward/stream-tag.h"
#include "forward/streams.h"

static void
test_kind_of(void **state)
{
	struct stream_tag fwd = { STREAM_FWD }, flow = { STREAM_UDP_FLOW };

	(void)state;
	assert_int_equal(stream_kind_of(NULL), STREAM_NONE);
	assert_int_equal(stream_kind_of(&fwd), STREAM_FWD);
	assert_int_equal(stream_kind_of(&flow), STREAM_UDP_FLOW);
}

/* A flow's stream without a relay: nothing is touched (the tag is all
 * there is behind the argument here; a forward's handler would read
 * past it). A stream without an argument: nothing either. */
static void
test_flow_without_relay(void **state)
{
	struct stream_tag flow = { STREAM_UDP_FLOW };

	(void)state;
	streams_reset(NULL, NULL, 4, 7, &flow);
	streams_acked(NULL, 4, &flow, NULL);
	streams_close(NULL, NULL, 4, 0, &flow);
	streams_reset(NULL, NULL, 4, 7, NULL);
	streams_acked(NULL, 4, NULL, NULL);
	streams_close(NULL, NULL, 4, 0, NULL);
	assert_int_equal(flow.kind, STREAM_UDP_FLOW);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kind_of),
		cmocka_unit_test(test_flow_without_relay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

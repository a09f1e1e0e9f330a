/* Monotonic and wall-clock time, both replaceable for tests. */
#include <time.h>

#include "clock.h"

static uint64_t (*clock_source)(void);
static uint64_t (*wall_source)(void);

uint64_t
clock_now(void)
{
	struct timespec ts;

	if (clock_source != NULL)
		return clock_source();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
clock_set_source(uint64_t (*fn)(void))
{
	clock_source = fn;
}

uint64_t
clock_wall(void)
{
	if (wall_source != NULL)
		return wall_source();
	return (uint64_t)time(NULL);
}

void
clock_set_wall_source(uint64_t (*fn)(void))
{
	wall_source = fn;
}

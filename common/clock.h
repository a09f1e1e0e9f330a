/* The single source of time. Everything that needs "now" asks here, so
 * tests can substitute a virtual clock. */
#ifndef ROVE_CLOCK_H
#define ROVE_CLOCK_H

#include <stdint.h>

/* Monotonic nanoseconds (the unit of ngtcp2_tstamp). */
uint64_t clock_now(void);
static inline uint64_t clock_now_ms(void) { return clock_now() / 1000000u; }

/* Replace the clock (NULL restores the system clock). */
void clock_set_source(uint64_t (*fn)(void));

#endif

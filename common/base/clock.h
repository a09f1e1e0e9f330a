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

/* Wall-clock seconds since the epoch, for times that must mean the same
 * after a restart (ticket expiry, the age of a ticket key). */
uint64_t clock_wall(void);
/* Replace the wall clock (NULL restores the system's). */
void clock_set_wall_source(uint64_t (*fn)(void));

#endif

/* pgcrew — the unit tests' clock: in a test linked with fakeclock.c and
 * FAKECLOCK_LINK_FLAGS (-Wl,--wrap=util_monotonic, test/unit/local.mk),
 * util_monotonic stands still until the test moves it, so the code under
 * test sees the intervals the test chose however slow the machine is. */
#ifndef PGCREW_TEST_FAKECLOCK_H
#define PGCREW_TEST_FAKECLOCK_H

#include "types.h"

/* Where the clock starts: a day of uptime, so that "now minus a timeout"
 * never goes below 0 and no time reads as 0 ("never" to much of the code). */
#define FAKECLOCK_START (86400 * USEC_PER_SEC)

/* What util_monotonic returns now in the program under test. */
usec_t fakeclock_now(void);
/* Move the clock forward by usec (>= 0: a monotonic clock never goes back). */
void fakeclock_advance(usec_t usec);
/* Back to FAKECLOCK_START, for a program that builds a new world per run
 * (fuzz_session: millions of inputs, each moving the clock up to hours,
 * would otherwise overflow it). Only between worlds: nothing may hold a
 * time from before. */
void fakeclock_reset(void);
/* The real CLOCK_MONOTONIC: for the bound on a wait for a real event (a
 * socket, a thread, c-ares), which only turns a hang into a failure. */
usec_t fakeclock_real(void);

#endif

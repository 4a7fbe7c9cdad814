/* pgcrew — the unit tests' clock (fakeclock.h): util_monotonic, wrapped at
 * link time, returns a time that moves only when the test moves it. */
#include "fakeclock.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>

static usec_t now = FAKECLOCK_START;

usec_t __real_util_monotonic(void);
usec_t __wrap_util_monotonic(void);

usec_t __wrap_util_monotonic(void)
{
	return now;
}

usec_t fakeclock_now(void)
{
	return now;
}

void fakeclock_advance(usec_t usec)
{
	if (usec < 0) {
		fprintf(stderr, "fakeclock: moved back by %lld us\n", (long long)-usec);
		abort();
	}
	now += usec;
}

void fakeclock_reset(void)
{
	now = FAKECLOCK_START;
}

usec_t fakeclock_real(void)
{
	return __real_util_monotonic();
}

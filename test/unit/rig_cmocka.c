/* pgcrew — the session rig (rig.h) under cmocka: a broken expectation of
 * the rig fails the running test, whose teardown (rig_teardown) then frees
 * the world. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "rig.h"

void rig_failed(const char *msg)
{
	fail_msg("%s", msg);
	abort();      /* not reached: fail_msg leaves the test */
}

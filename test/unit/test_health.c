/* pgcrew — unit tests for the probes' verdicts (metrics_healthy and
 * metrics_ready, behind GET /healthz and /readyz): worker heartbeats in a
 * real shared mapping (shm.h), a worker that starts, one that stops beating,
 * PAUSE and shutdown flags, and the supervisor's own view of its workers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "metrics.h"
#include "shm.h"
#include "util.h"

#define N_WORKERS 3

static bool sup_down;                   /* the supervisor's shutting_down */
static bool sup_ready[N_WORKERS];       /* and its worker_ready */

static bool src_down(void)
{
	return sup_down;
}

static bool src_ready(int slot)
{
	return slot >= 0 && slot < N_WORKERS && sup_ready[slot];
}

static const struct metrics_source src = { .shutting_down = src_down, .worker_ready = src_ready };

static int setup(void **state)
{
	(void)state;
	if (shm_create(N_WORKERS, 64) < 0)
		return -1;
	sup_down = false;
	for (int w = 0; w < N_WORKERS; w++)
		sup_ready[w] = true;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	shm_destroy();
	return 0;
}

/* Every worker's loop beats once, with flags for worker w_flags. */
static void beat_all(int w_flags, unsigned flags)
{
	for (int w = 0; w < N_WORKERS; w++) {
		shm_attach_worker(w);
		shm_health_beat(w == w_flags ? flags : 0);
	}
}

static void test_starting(void **state)
{
	char why[512];
	(void)state;
	/* No loop has run: nothing is hung, but nothing serves yet. */
	assert_true(metrics_healthy(&src, util_monotonic(), why, sizeof(why)));
	assert_string_equal(why, "");
	assert_false(metrics_ready(&src, util_monotonic(), why, sizeof(why)));
	assert_non_null(strstr(why, "worker 2: starting\n"));
}

static void test_all_well(void **state)
{
	char why[512];
	(void)state;
	beat_all(-1, 0);
	usec_t now = util_monotonic() + METRICS_STALE_USEC / 2;
	assert_true(metrics_healthy(&src, now, why, sizeof(why)));
	assert_true(metrics_ready(&src, now, why, sizeof(why)));
	assert_string_equal(why, "");
}

static void test_hung(void **state)
{
	char why[512];
	(void)state;
	beat_all(-1, 0);
	usec_t now = util_monotonic() + METRICS_STALE_USEC + USEC_PER_SEC;
	assert_false(metrics_healthy(&src, now, why, sizeof(why)));
	assert_non_null(strstr(why, "worker 0: no heartbeat for 3."));
	assert_non_null(strstr(why, "worker 2: no heartbeat"));
	assert_false(metrics_ready(&src, now, why, sizeof(why)));
	/* Worker 1 dies: the supervisor resets its cells; it is being
	 * restarted, not hung. */
	shm_worker_reset(1);
	assert_false(metrics_healthy(&src, now, why, sizeof(why)));
	assert_null(strstr(why, "worker 1"));
	shm_worker_reset(0);
	shm_worker_reset(2);
	assert_true(metrics_healthy(&src, now, why, sizeof(why)));
}

/* Table: one worker's flags, the supervisor's view, and the verdicts. */
static void test_flags(void **state)
{
	static const struct {
		unsigned flags;
		bool down, ready1;
		bool healthy, ready;
		const char *why;
	} cases[] = {
		{ 0, false, true, true, true, "" },
		{ SHM_HEALTH_PAUSED, false, true, true, false, "worker 1: paused\n" },
		{ SHM_HEALTH_SHUTDOWN, false, true, true, false, "shutting down\n" },
		{ 0, true, true, true, false, "shutting down\n" },
		{ 0, false, false, true, false, "worker 1: not running\n" },
		{ 0, true, false, true, false, "shutting down\n" },   /* gone as it shuts down */
	};
	char why[512];
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		beat_all(1, cases[i].flags);
		sup_down = cases[i].down;
		sup_ready[1] = cases[i].ready1;
		usec_t now = util_monotonic();
		assert_int_equal(metrics_healthy(&src, now, why, sizeof(why)), cases[i].healthy);
		assert_int_equal(metrics_ready(&src, now, why, sizeof(why)), cases[i].ready);
		assert_string_equal(why, cases[i].why);
	}
}

static void test_no_source_hooks(void **state)
{
	static const struct metrics_source bare = { 0 };
	char why[64];
	(void)state;
	beat_all(-1, 0);
	assert_true(metrics_ready(&bare, util_monotonic(), why, sizeof(why)));
	/* A short buffer truncates the reasons, never overflows. */
	assert_false(metrics_ready(&bare, util_monotonic() + 10 * USEC_PER_SEC, why, 16));
	assert_int_equal(strlen(why), 15);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_starting),
		T(test_all_well),
		T(test_hung),
		T(test_flags),
		T(test_no_source_hooks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for SHOW STATS' averages: before the first
 * stats_period they are PgBouncer's, over the time since the start counted
 * from one second before it; once a period's averages are set, those. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fakeclock.h"
#include "shm.h"
#include "stats.h"

enum { XACT, QUERY, IN, OUT, XACT_TIME, QUERY_TIME, WAIT_TIME, ASSIGN };

static int setup(void **state)
{
	(void)state;
	assert_int_equal(shm_create(1, 64), 0);
	shm_attach_worker(0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	shm_destroy();
	return 0;
}

static void test_averages_before_first_period(void **state)
{
	uint64_t d[SHM_STATS] = { 0 }, avg[SHM_STATS];
	int idx = shm_name_hold(SHM_DB, "db");
	(void)state;
	assert_true(idx >= 0);
	d[XACT] = 6;
	d[QUERY] = 12;
	d[IN] = 3000;
	d[OUT] = 9000;
	d[XACT_TIME] = 600;
	d[QUERY_TIME] = 1200;
	d[WAIT_TIME] = 90;
	d[ASSIGN] = 3;
	shm_stats_add(idx, d);
	fakeclock_advance(2 * USEC_PER_SEC);      /* 3 s with PgBouncer's extra second */
	stats_avg_get(idx, avg);
	assert_int_equal(avg[XACT], 2);
	assert_int_equal(avg[QUERY], 4);
	assert_int_equal(avg[IN], 1000);
	assert_int_equal(avg[OUT], 3000);
	assert_int_equal(avg[XACT_TIME], 100);   /* per transaction */
	assert_int_equal(avg[QUERY_TIME], 100);  /* per query */
	assert_int_equal(avg[WAIT_TIME], 30);    /* per assignment */
	assert_int_equal(avg[ASSIGN], 1);
}

static void test_period_averages_win(void **state)
{
	uint64_t d[SHM_STATS] = { 0 }, set[SHM_STATS] = { 0 }, avg[SHM_STATS];
	int idx = shm_name_hold(SHM_DB, "db");
	(void)state;
	d[IN] = 5000;
	shm_stats_add(idx, d);
	set[IN] = 7;
	shm_avg_set(idx, set);
	fakeclock_advance(USEC_PER_SEC);
	stats_avg_get(idx, avg);
	assert_int_equal(avg[IN], 7);
	assert_int_equal(avg[XACT], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_averages_before_first_period, setup, teardown),
		cmocka_unit_test_setup_teardown(test_period_averages_win, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for the supervisor's per-pool welcomes and failed
 * logins (welcome.c): kept and replaced by pool, found among thousands,
 * failures forgotten once older than server_login_retry, and everything
 * of a pool no worker holds swept away. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>

#include "welcome.h"

static void key_of(uint8_t *key, const char *db, const char *user)
{
	memset(key, 0, WELCOME_KEY);
	snprintf((char *)key, LEDGER_NAME, "%s", db);
	snprintf((char *)key + LEDGER_NAME, LEDGER_NAME, "%s", user);
}

static void put(const char *db, const char *user, const char *params)
{
	uint8_t data[WELCOME_KEY + 64];
	size_t n = strlen(params) + 1;
	key_of(data, db, user);
	memcpy(data + WELCOME_KEY, params, n);
	welcome_put(data, (uint32_t)(WELCOME_KEY + n));
}

static const char *found(const char *db, const char *user)
{
	uint8_t key[WELCOME_KEY];
	uint32_t len = 0;
	key_of(key, db, user);
	const uint8_t *w = welcome_find(key, &len);
	return w ? (const char *)w + WELCOME_KEY : NULL;
}

static int setup(void **state)
{
	(void)state;
	welcome_init();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	welcome_free_all();
	return 0;
}

static const char *held_user = "";

static bool held(const char *db, const char *user)
{
	(void)db;
	return strncmp(user, held_user, strlen(held_user)) == 0 && held_user[0];
}

static void test_put_find_replace(void **state)
{
	char user[32];
	(void)state;
	assert_null(found("db", "u"));
	put("db", "u", "TimeZone");
	put("db", "v", "DateStyle");
	assert_string_equal(found("db", "u"), "TimeZone");
	put("db", "u", "client_encoding");
	assert_string_equal(found("db", "u"), "client_encoding");
	assert_int_equal(welcome_count(), 2);
	for (int i = 0; i < 5000; i++) {
		snprintf(user, sizeof(user), "tenant%d", i);
		put("db", user, user);
	}
	assert_string_equal(found("db", "tenant4321"), "tenant4321");
	assert_int_equal(welcome_count(), 5002);
	/* Only the pools some worker holds stay. */
	held_user = "tenant1";
	assert_int_equal(welcome_sweep(held, 0, 1000), 5002 - 1111);
	assert_string_equal(found("db", "tenant1999"), "tenant1999");
	assert_null(found("db", "tenant2000"));
	assert_null(found("db", "u"));
	held_user = "";
	assert_int_equal(welcome_sweep(held, 0, 1000), 1111);
	assert_int_equal(welcome_count(), 0);
}

static void test_failures(void **state)
{
	struct login_failure f;
	uint8_t key[WELCOME_KEY];
	usec_t age = 0;
	(void)state;
	memset(&f, 0, sizeof(f));
	snprintf(f.pool.db, sizeof(f.pool.db), "db");
	snprintf(f.pool.user, sizeof(f.pool.user), "u");
	snprintf(f.msg, sizeof(f.msg), "password authentication failed");
	key_of(key, "db", "u");
	welcome_failure_put(&f, 100);
	const struct login_failure *x = welcome_failure_recent(key, 150, 60, &age);
	assert_non_null(x);
	assert_int_equal(age, 50);
	assert_string_equal(x->msg, "password authentication failed");
	/* Older than server_login_retry: forgotten. */
	assert_null(welcome_failure_recent(key, 160, 60, &age));
	assert_int_equal(welcome_count(), 0);
	welcome_failure_put(&f, 200);
	held_user = "u";
	assert_int_equal(welcome_sweep(held, 259, 60), 0);
	assert_int_equal(welcome_sweep(held, 260, 60), 1);
	welcome_failure_put(&f, 300);
	welcome_forget_failures();
	assert_null(welcome_failure_recent(key, 301, 60, &age));
	held_user = "";
}

/* Asks deferred until a welcome comes: taken by key in the order made,
 * by age for the time-out, dropped with their worker, freed at the end
 * (the teardown frees what is left: ASan sees a leak otherwise). */
static void test_deferred_asks(void **state)
{
	(void)state;
	uint8_t a[WELCOME_KEY], b[WELCOME_KEY], out[WELCOME_KEY];
	int worker = -1;
	key_of(a, "db", "ua");
	key_of(b, "db", "ub");
	assert_int_equal(welcome_oldest_deferred(), 0);
	welcome_defer(1, a, 100);
	welcome_defer(2, b, 110);
	welcome_defer(3, a, 120);
	welcome_defer(2, a, 130);
	assert_int_equal(welcome_oldest_deferred(), 100);

	/* The welcome of a came: its asks, oldest first. */
	assert_true(welcome_take_deferred(a, INT64_MAX, &worker, out));
	assert_int_equal(worker, 1);
	assert_memory_equal(out, a, WELCOME_KEY);
	assert_true(welcome_take_deferred(a, INT64_MAX, &worker, out));
	assert_int_equal(worker, 3);
	assert_int_equal(welcome_oldest_deferred(), 110);

	/* Time-out: only those asked before the cut. */
	assert_false(welcome_take_deferred(NULL, 110, &worker, out));
	assert_true(welcome_take_deferred(NULL, 111, &worker, out));
	assert_int_equal(worker, 2);
	assert_memory_equal(out, b, WELCOME_KEY);

	/* Worker 2 went: its ask goes unanswered. */
	welcome_defer(3, b, 140);
	welcome_drop_deferred(2);
	assert_false(welcome_take_deferred(a, INT64_MAX, &worker, out));
	assert_int_equal(welcome_oldest_deferred(), 140);
	welcome_defer(1, a, 150);        /* left for the teardown */
}

/* Fetches from the pool's holders: one per pool, over when the welcome
 * comes, when every holder asked said none (not before), or with its
 * asks; a "none" for no fetch is nothing. What is left is freed at the
 * end. */
static void test_fetches(void **state)
{
	(void)state;
	uint8_t a[WELCOME_KEY], b[WELCOME_KEY];
	key_of(a, "db", "ua");
	key_of(b, "db", "ub");
	assert_false(welcome_fetching(a));
	assert_false(welcome_fetch_none(a));

	welcome_fetch_start(a, 2, 100);
	welcome_fetch_start(b, 1, 110);
	assert_true(welcome_fetching(a) && welcome_fetching(b));
	assert_false(welcome_fetch_none(a));        /* one holder left */
	assert_true(welcome_fetching(a));
	assert_true(welcome_fetch_none(a));         /* the last: over */
	assert_false(welcome_fetching(a));
	assert_false(welcome_fetch_none(a));        /* a late one */

	/* The welcome came: over. */
	welcome_fetch_start(a, 3, 120);
	put("db", "ua", "server_version\0" "16\0");
	assert_false(welcome_fetching(a));
	assert_true(welcome_fetching(b));

	/* Time-out: only those started before the cut; by key. */
	welcome_fetch_start(a, 1, 130);
	welcome_fetch_end(NULL, 110);
	assert_true(welcome_fetching(b));
	welcome_fetch_end(NULL, 111);
	assert_false(welcome_fetching(b));
	assert_true(welcome_fetching(a));
	welcome_fetch_end(b, 0);
	assert_true(welcome_fetching(a));
	welcome_fetch_end(a, 0);
	assert_false(welcome_fetching(a));
	welcome_fetch_start(b, 2, 140);              /* left for the teardown */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_put_find_replace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deferred_asks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fetches, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for the slot ledger: grants up to pool, database and
 * user limits, queueing or refusing by the wait flag, FIFO grants after
 * releases, releases of slots not held, a worker going away, the want
 * notices sent to workers holding slots of a pool, bad worker indexes, and
 * where an idle server offered by a worker goes (first come, first served
 * across workers and pools), servers adopted from an old process,
 * replication clients' requests (closed for, never moved to; withdrawn),
 * closes that keep their freed slot for the request they were for, and
 * requests for the reuse order that only a move serves.
 * The ledger's clock is the tests' fake one (fakeclock.h): each rule that
 * waits is checked just before its time and at it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "fakeclock.h"
#include "ledger.h"
#include "util.h"

#define N_WORKERS 3
#define MAX_NOTICES 64

static struct slot_req mkreq(const char *db, const char *user, int pool_limit, int db_limit,
			     int user_limit, int wait)
{
	struct slot_req r;
	memset(&r, 0, sizeof(r));
	snprintf(r.db, sizeof(r.db), "%s", db);
	snprintf(r.user, sizeof(r.user), "%s", user);
	r.pool_limit = pool_limit;
	r.db_limit = db_limit;
	r.user_limit = user_limit;
	r.wait = (uint8_t)wait;
	return r;
}

static int setup(void **state)
{
	*state = ledger_new(N_WORKERS);
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	ledger_free(*state);       /* with whatever is still held or queued */
	return 0;
}

/* One grant from the queue, checked against what is expected. */
static void expect_grant(struct ledger *l, int want_worker, uint32_t want_reqid, const char *db,
			 const char *user)
{
	int w = -7;
	uint32_t id = 0;
	struct slot_req r;
	memset(&r, 0xa5, sizeof(r));
	assert_true(ledger_next_grant(l, &w, &id, &r));
	assert_int_equal(w, want_worker);
	assert_int_equal(id, want_reqid);
	assert_string_equal(r.db, db);
	assert_string_equal(r.user, user);
}

static void expect_no_grant(struct ledger *l)
{
	int w = -7;
	uint32_t id = 12345;
	struct slot_req r;
	assert_false(ledger_next_grant(l, &w, &id, &r));
}

/* ---- limits ---- */

static void test_pool_limit_then_queue_or_deny(void **state)
{
	struct ledger *l = *state;
	struct slot_req wait = mkreq("db1", "u1", 2, 0, 0, 1);
	struct slot_req nowait = mkreq("db1", "u1", 2, 0, 0, 0);

	assert_int_equal(ledger_pool_count(l, "db1", "u1", -1), 0);
	assert_int_equal(ledger_request(l, 0, 1, &wait), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &nowait), LEDGER_GRANTED);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", -1), 2);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", 0), 1);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", 1), 1);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", 2), 0);

	/* Full: a non-waiting request is refused and leaves no trace. */
	assert_int_equal(ledger_request(l, 2, 3, &nowait), LEDGER_DENIED);
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", -1), 2);
	/* A waiting one queues, and is not counted until granted. */
	assert_int_equal(ledger_request(l, 2, 4, &wait), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 0, 5, &wait), LEDGER_QUEUED);
	assert_int_equal(ledger_queued(l), 2);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", -1), 2);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", 2), 0);
	assert_int_equal(ledger_db_count(l, "db1"), 2);
	assert_int_equal(ledger_user_count(l, "u1"), 2);
	expect_no_grant(l);

	/* Names are exact: other spellings count nothing. */
	assert_int_equal(ledger_pool_count(l, "DB1", "u1", -1), 0);
	assert_int_equal(ledger_pool_count(l, "db1", "u2", -1), 0);
	assert_int_equal(ledger_db_count(l, "db2"), 0);
	assert_int_equal(ledger_user_count(l, "u"), 0);
}

static void test_db_limit_across_pools(void **state)
{
	struct ledger *l = *state;
	/* max_db_connections 3 on db "d"; pools themselves allow 10. */
	struct slot_req a = mkreq("d", "ua", 10, 3, 0, 0);
	struct slot_req b = mkreq("d", "ub", 10, 3, 0, 0);
	struct slot_req c = mkreq("d", "uc", 10, 3, 0, 0);
	struct slot_req other = mkreq("e", "ua", 10, 3, 0, 0);

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 3, &b), LEDGER_GRANTED);
	assert_int_equal(ledger_db_count(l, "d"), 3);
	assert_int_equal(ledger_request(l, 0, 4, &c), LEDGER_DENIED);
	assert_int_equal(ledger_request(l, 0, 5, &b), LEDGER_DENIED);
	assert_int_equal(ledger_pool_count(l, "d", "uc", -1), 0);
	/* Another database is not affected. */
	assert_int_equal(ledger_request(l, 0, 6, &other), LEDGER_GRANTED);
	assert_int_equal(ledger_db_count(l, "d"), 3);
	assert_int_equal(ledger_db_count(l, "e"), 1);
	assert_int_equal(ledger_user_count(l, "ua"), 3);

	/* A waiting request for a third pool of "d" queues; a release in "d"
	 * (of another pool) lets it in. */
	c.wait = 1;
	assert_int_equal(ledger_request(l, 1, 7, &c), LEDGER_QUEUED);
	expect_no_grant(l);
	assert_true(ledger_release(l, 2, "d", "ub"));
	assert_int_equal(ledger_db_count(l, "d"), 2);
	expect_grant(l, 1, 7, "d", "uc");
	assert_int_equal(ledger_db_count(l, "d"), 3);
	assert_int_equal(ledger_pool_count(l, "d", "uc", 1), 1);
	assert_int_equal(ledger_queued(l), 0);
}

static void test_user_limit_across_pools(void **state)
{
	struct ledger *l = *state;
	/* max_user_connections 2 for "u" over any database. */
	struct slot_req d1 = mkreq("d1", "u", 5, 0, 2, 0);
	struct slot_req d2 = mkreq("d2", "u", 5, 0, 2, 0);
	struct slot_req d3 = mkreq("d3", "u", 5, 0, 2, 0);
	struct slot_req v = mkreq("d3", "v", 5, 0, 2, 0);

	assert_int_equal(ledger_request(l, 0, 1, &d1), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &d2), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 3, &d3), LEDGER_DENIED);
	assert_int_equal(ledger_request(l, 2, 4, &d1), LEDGER_DENIED);
	assert_int_equal(ledger_request(l, 2, 5, &v), LEDGER_GRANTED);
	assert_int_equal(ledger_user_count(l, "u"), 2);
	assert_int_equal(ledger_user_count(l, "v"), 1);
	assert_int_equal(ledger_db_count(l, "d3"), 1);

	d3.wait = 1;
	assert_int_equal(ledger_request(l, 2, 6, &d3), LEDGER_QUEUED);
	expect_no_grant(l);
	assert_true(ledger_release(l, 0, "d1", "u"));
	expect_grant(l, 2, 6, "d3", "u");
	assert_int_equal(ledger_user_count(l, "u"), 2);
	assert_int_equal(ledger_pool_count(l, "d3", "u", 2), 1);
	assert_int_equal(ledger_pool_count(l, "d1", "u", -1), 0);
}

static void test_limits_zero_or_negative_mean_none(void **state)
{
	struct ledger *l = *state;
	struct slot_req zero = mkreq("d", "u", 0, 0, 0, 1);
	struct slot_req neg = mkreq("d", "u2", -1, -5, -1, 0);

	for (uint32_t i = 0; i < 200; i++) {
		assert_int_equal(ledger_request(l, (int)(i % N_WORKERS), i, &zero), LEDGER_GRANTED);
		assert_int_equal(ledger_request(l, (int)(i % N_WORKERS), 1000 + i, &neg), LEDGER_GRANTED);
	}
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 200);
	assert_int_equal(ledger_pool_count(l, "d", "u2", -1), 200);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 67);
	assert_int_equal(ledger_db_count(l, "d"), 400);
	assert_int_equal(ledger_user_count(l, "u"), 200);
	assert_int_equal(ledger_queued(l), 0);

	/* A zero limit next to a real one: only the real one binds. */
	struct slot_req dbcap = mkreq("d", "u3", 0, 401, 0, 0);
	assert_int_equal(ledger_request(l, 0, 9, &dbcap), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 10, &dbcap), LEDGER_DENIED);
}

/* ---- the queue ---- */

static void test_fifo_same_pool(void **state)
{
	struct ledger *l = *state;
	struct slot_req r = mkreq("d", "u", 1, 0, 0, 1);

	assert_int_equal(ledger_request(l, 0, 100, &r), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 101, &r), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 1, 102, &r), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 0, 103, &r), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 104, &r), LEDGER_QUEUED);
	assert_int_equal(ledger_queued(l), 4);

	static const struct { int w; uint32_t id; } order[] = {
		{ 2, 101 }, { 1, 102 }, { 0, 103 }, { 2, 104 },
	};
	int holder = 0;
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		expect_no_grant(l);         /* the single slot is taken */
		assert_true(ledger_release(l, holder, "d", "u"));
		assert_int_equal(ledger_pool_count(l, "d", "u", -1), 0);
		expect_grant(l, order[i].w, order[i].id, "d", "u");
		assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);
		assert_int_equal(ledger_pool_count(l, "d", "u", order[i].w), 1);
		assert_int_equal(ledger_queued(l), (int)(ARRAY_SIZE(order) - i - 1));
		holder = order[i].w;
	}
	expect_no_grant(l);
	assert_true(ledger_release(l, holder, "d", "u"));
	expect_no_grant(l);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 0);
}

static void test_fifo_across_pools(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("dp", "up", 1, 0, 0, 1);
	struct slot_req q = mkreq("dq", "uq", 1, 0, 0, 1);

	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &q), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 10, &p), LEDGER_QUEUED);   /* oldest */
	assert_int_equal(ledger_request(l, 2, 11, &q), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 12, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 0, 13, &q), LEDGER_QUEUED);

	/* Only q frees up: the oldest request that fits is q's, although an
	 * older p request still waits. */
	assert_true(ledger_release(l, 1, "dq", "uq"));
	expect_grant(l, 2, 11, "dq", "uq");
	expect_no_grant(l);
	assert_int_equal(ledger_queued(l), 3);

	/* Both free up at once: grants follow arrival order over pools. */
	assert_true(ledger_release(l, 0, "dp", "up"));
	assert_true(ledger_release(l, 2, "dq", "uq"));
	expect_grant(l, 1, 10, "dp", "up");
	expect_grant(l, 0, 13, "dq", "uq");
	expect_no_grant(l);
	assert_int_equal(ledger_queued(l), 1);
	assert_int_equal(ledger_pool_count(l, "dp", "up", 1), 1);
	assert_int_equal(ledger_pool_count(l, "dq", "uq", 0), 1);

	assert_true(ledger_release(l, 1, "dp", "up"));
	expect_grant(l, 2, 12, "dp", "up");
	assert_int_equal(ledger_queued(l), 0);
}

static void test_waiter_blocks_same_pool_db_user(void **state)
{
	struct ledger *l = *state;
	/* Pool (d,u1) is full, and a request waits for it. */
	struct slot_req full = mkreq("d", "u1", 1, 0, 0, 1);
	assert_int_equal(ledger_request(l, 0, 1, &full), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &full), LEDGER_QUEUED);

	/* Another pool of its database or user takes nothing it waits for
	 * (no db or user limit): served at once, as is an unrelated pool. */
	struct slot_req same_db = mkreq("d", "u2", 5, 0, 0, 1);
	struct slot_req same_user = mkreq("e", "u1", 5, 0, 0, 1);
	struct slot_req unrelated = mkreq("f", "u3", 5, 0, 0, 1);
	assert_int_equal(ledger_request(l, 2, 3, &same_db), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 4, &same_user), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 5, &unrelated), LEDGER_GRANTED);
	assert_int_equal(ledger_queued(l), 1);
	/* A second waiter for the full pool queues behind the first. */
	assert_int_equal(ledger_request(l, 2, 6, &full), LEDGER_QUEUED);
	assert_true(ledger_release(l, 0, "d", "u1"));
	expect_grant(l, 1, 2, "d", "u1");
	expect_no_grant(l);
	assert_int_equal(ledger_queued(l), 1);
}

/* With a database limit, a request waiting for it blocks newcomers of
 * other pools of that database once only one slot is left... */
static void test_waiter_blocks_through_db_and_user_limits(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "u1", 5, 2, 0, 1);
	struct slot_req b = mkreq("d", "u2", 5, 2, 0, 1);
	struct slot_req other_db = mkreq("x", "u2", 5, 2, 0, 1);
	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 2, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 3, &b), LEDGER_QUEUED);   /* db full */
	assert_true(ledger_release(l, 0, "d", "u1"));
	/* ...so the freed slot goes to the queued request, not a newcomer. */
	assert_int_equal(ledger_request(l, 2, 4, &a), LEDGER_QUEUED);
	expect_grant(l, 1, 3, "d", "u2");
	expect_no_grant(l);
	assert_int_equal(ledger_request(l, 2, 5, &other_db), LEDGER_GRANTED);

	/* The same through a user limit. */
	struct slot_req c = mkreq("p", "v", 5, 0, 1, 1);
	struct slot_req d = mkreq("q", "v", 5, 0, 1, 1);
	assert_int_equal(ledger_request(l, 0, 6, &c), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 7, &d), LEDGER_QUEUED);
	assert_true(ledger_release(l, 0, "p", "v"));
	assert_int_equal(ledger_request(l, 2, 8, &c), LEDGER_QUEUED);
	expect_grant(l, 1, 7, "q", "v");
	expect_no_grant(l);
}

static void test_nowait_uses_own_limit_past_queue(void **state)
{
	struct ledger *l = *state;
	struct slot_req waiter = mkreq("d", "u", 2, 0, 0, 1);
	struct slot_req plain = mkreq("d", "u", 2, 0, 0, 0);
	struct slot_req reserve = mkreq("d", "u", 3, 0, 0, 0);   /* pool_size + reserve 1 */

	assert_int_equal(ledger_request(l, 0, 1, &waiter), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 2, &waiter), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 3, &waiter), LEDGER_QUEUED);
	/* The queued request does not fit its limit of 2; a non-waiting one
	 * with room under its own, higher limit is answered now. */
	assert_int_equal(ledger_request(l, 1, 4, &plain), LEDGER_DENIED);
	assert_int_equal(ledger_request(l, 1, 5, &reserve), LEDGER_GRANTED);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 3);
	assert_int_equal(ledger_pool_count(l, "d", "u", 1), 1);
	assert_int_equal(ledger_request(l, 2, 6, &reserve), LEDGER_DENIED);
	assert_int_equal(ledger_queued(l), 1);

	/* The waiter needs the count below 2: one release is not enough. */
	assert_true(ledger_release(l, 1, "d", "u"));
	expect_no_grant(l);
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 1, 3, "d", "u");
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 2);
	assert_int_equal(ledger_queued(l), 0);

	/* A non-waiting request under its limit while others wait on another
	 * limit (the database's) is still answered by its own limits. */
	struct slot_req dbw = mkreq("x", "u9", 10, 1, 0, 1);
	struct slot_req dbn = mkreq("x", "u8", 10, 2, 0, 0);
	assert_int_equal(ledger_request(l, 0, 7, &dbw), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 8, &dbw), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 9, &dbn), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 10, &dbn), LEDGER_DENIED);
	assert_int_equal(ledger_db_count(l, "x"), 2);
}

/* ---- releases and workers going away ---- */

static void test_release_not_held(void **state)
{
	struct ledger *l = *state;
	struct slot_req r = mkreq("d", "u", 3, 0, 0, 1);

	assert_false(ledger_release(l, 0, "d", "u"));          /* no such pool yet */
	assert_int_equal(ledger_request(l, 0, 1, &r), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 2, &r), LEDGER_GRANTED);

	assert_false(ledger_release(l, 1, "d", "u"));          /* held by 0, not 1 */
	assert_false(ledger_release(l, 0, "d", "other"));
	assert_false(ledger_release(l, 0, "other", "u"));
	assert_false(ledger_release(l, -1, "d", "u"));
	assert_false(ledger_release(l, N_WORKERS, "d", "u"));
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 2);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 2);
	assert_int_equal(ledger_pool_count(l, "d", "u", 1), 0);
	assert_int_equal(ledger_db_count(l, "d"), 2);
	assert_int_equal(ledger_user_count(l, "u"), 2);

	assert_true(ledger_release(l, 0, "d", "u"));
	assert_true(ledger_release(l, 0, "d", "u"));
	assert_false(ledger_release(l, 0, "d", "u"));          /* none left */
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 0);
	assert_int_equal(ledger_db_count(l, "d"), 0);
	assert_int_equal(ledger_user_count(l, "u"), 0);
	/* Counts never went negative: the limit still admits exactly 3. */
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(ledger_request(l, 1, 10 + i, &r), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 13, &r), LEDGER_QUEUED);
}

static void test_worker_gone(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 2, 4, 0, 1);
	struct slot_req q = mkreq("d", "v", 5, 4, 0, 1);

	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 2, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 3, &q), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 4, &q), LEDGER_GRANTED);   /* db d: 4 of 4 */
	assert_int_equal(ledger_request(l, 2, 5, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 0, 6, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 1, 7, &q), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 0, 8, &q), LEDGER_QUEUED);
	assert_int_equal(ledger_queued(l), 4);

	ledger_worker_gone(l, 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 0);
	assert_int_equal(ledger_pool_count(l, "d", "v", -1), 1);
	assert_int_equal(ledger_pool_count(l, "d", "v", 1), 1);
	assert_int_equal(ledger_db_count(l, "d"), 1);
	assert_int_equal(ledger_user_count(l, "u"), 0);
	assert_int_equal(ledger_user_count(l, "v"), 1);
	assert_int_equal(ledger_queued(l), 2);                 /* 6 and 8 are gone */

	/* The others' queued requests now fit and are granted in order. */
	expect_grant(l, 2, 5, "d", "u");
	expect_grant(l, 1, 7, "d", "v");
	expect_no_grant(l);
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_db_count(l, "d"), 3);
	assert_false(ledger_release(l, 0, "d", "u"));

	/* The slot index may be reused by a new worker. */
	assert_int_equal(ledger_request(l, 0, 9, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 1);
	/* Gone twice, or a bad index: nothing changes. */
	ledger_worker_gone(l, -1);
	ledger_worker_gone(l, N_WORKERS);
	assert_int_equal(ledger_db_count(l, "d"), 4);
	ledger_worker_gone(l, 2);
	ledger_worker_gone(l, 2);
	assert_int_equal(ledger_db_count(l, "d"), 3);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);
}

/* ---- want notices ---- */

struct notice {
	int w;
	char db[LEDGER_NAME], user[LEDGER_NAME];
	int n, soon, over, same;
	int64_t other_since;
};

struct notices {
	struct notice v[MAX_NOTICES];
	int n;
};

static void on_want(int worker, const struct pool_want *w, void *arg)
{
	struct notices *ns = arg;
	assert_true(ns->n < MAX_NOTICES);
	struct notice *x = &ns->v[ns->n++];
	x->w = worker;
	snprintf(x->db, sizeof(x->db), "%s", w->pool.db);
	snprintf(x->user, sizeof(x->user), "%s", w->pool.user);
	x->n = w->n;
	x->soon = w->soon;
	x->over = w->over;
	x->same = w->same;
	x->other_since = w->other_since;
	assert_true(w->soon <= w->n);
}

static void collect(struct ledger *l, struct notices *ns)
{
	ns->n = 0;
	ledger_want_changes(l, on_want, ns);
}

struct want_log {
	struct pool_want *v;
	int *n;
};

static void keep_want(int worker, const struct pool_want *w, void *arg)
{
	struct want_log *log = arg;
	(void)worker;
	assert_true(*log->n < 2);
	log->v[(*log->n)++] = *w;
}

/* The notice to worker w about db/user in this batch, NULL when none. */
static const struct notice *notice_for(const struct notices *ns, int w, const char *db, const char *user)
{
	const struct notice *found = NULL;
	for (int i = 0; i < ns->n; i++) {
		if (ns->v[i].w == w && strcmp(ns->v[i].db, db) == 0 && strcmp(ns->v[i].user, user) == 0) {
			assert_null(found);    /* at most one notice per pool and worker */
			found = &ns->v[i];
		}
	}
	return found;
}

/* What was told to worker w about db/user in this batch; -1 in every count
 * when nothing was. */
static struct notice got(const struct notices *ns, int w, const char *db, const char *user)
{
	const struct notice *x = notice_for(ns, w, db, user);
	struct notice none = { .w = w, .n = -1, .soon = -1, .over = -1 };
	return x ? *x : none;
}

static void test_want_notices(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req p = mkreq("d", "u", 2, 0, 0, 1);
	struct slot_req q = mkreq("d2", "u2", 5, 0, 0, 1);

	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 3, &q), LEDGER_GRANTED);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);                             /* nobody waits */

	assert_int_equal(ledger_request(l, 2, 10, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 11, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 0, 12, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 2);
	/* Worker 0 could help 2 (not its own request), worker 1 all 3: each
	 * is asked for no more than the one server it holds. */
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);
	assert_int_equal(got(&ns, 1, "d", "u").n, 1);
	assert_int_equal(got(&ns, 2, "d", "u").n, -1);         /* holds none of p */
	assert_int_equal(got(&ns, 2, "d2", "u2").n, -1);       /* nobody waits for q */

	/* Once per change. */
	collect(l, &ns);
	assert_int_equal(ns.n, 0);

	/* Worker 1 gives one back; worker 2's first request takes it. */
	assert_true(ledger_release(l, 1, "d", "u"));
	expect_grant(l, 2, 10, "d", "u");
	collect(l, &ns);
	assert_int_equal(ns.n, 2);
	assert_int_equal(got(&ns, 0, "d", "u").n, -1);         /* still 1: worker 2's second */
	assert_int_equal(got(&ns, 1, "d", "u").n, 0);          /* holds none now: withdrawn */
	assert_int_equal(got(&ns, 2, "d", "u").n, 1);          /* worker 0's */
	collect(l, &ns);
	assert_int_equal(ns.n, 0);

	/* Worker 0 gives one back: its own request goes before worker 2's
	 * older second one, since worker 0 now holds none (below its share
	 * of 1) and worker 2 has its share: the slot does not hop. */
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 0, 12, "d", "u");
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 0, "d", "u").n, -1);         /* still worker 2's second */
	assert_int_equal(got(&ns, 2, "d", "u").n, 0);          /* only its own waits */
	assert_int_equal(got(&ns, 2, "d", "u").over, 0);

	/* Worker 2 gives one back: the queue empties, every ask is withdrawn. */
	assert_true(ledger_release(l, 2, "d", "u"));
	expect_grant(l, 2, 11, "d", "u");
	assert_int_equal(ledger_queued(l), 0);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 0, "d", "u").n, 0);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
}

/* Under steady load every worker keeps its share of the pool: only the
 * servers held beyond it are given up at once. */
static void test_want_fair_share(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req p = mkreq("d", "u", 4, 0, 0, 1);

	for (int i = 0; i < 3; i++)
		assert_int_equal(ledger_request(l, 0, (uint32_t)i, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 10, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 11, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 1, 12, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 0, "d", "u").n, 2);          /* both would help... */
	assert_int_equal(got(&ns, 0, "d", "u").over, 1);     /* ...one is beyond 4/2 */
	assert_int_equal(got(&ns, 1, "d", "u").n, -1);

	/* Worker 0 gives that one up; 2 each now: nobody is over its share. */
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 1, 11, "d", "u");
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);
	assert_int_equal(got(&ns, 0, "d", "u").over, 0);

	/* A third worker joins the queue: the share drops to 2 of 4 over 3
	 * workers (rounded up), so worker 0 and worker 1 keep theirs. */
	assert_int_equal(ledger_request(l, 2, 20, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 2);
	assert_int_equal(got(&ns, 0, "d", "u").over, 0);
	assert_int_equal(got(&ns, 1, "d", "u").n, 1);
	assert_int_equal(got(&ns, 1, "d", "u").over, 0);
}

/* A request from a worker that already has its fair share is not in a
 * hurry (a momentary lull on another worker must not move servers between
 * two busy workers); one from a worker below its share, or for another pool
 * of a full database, is. */
static void test_want_soon(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req p = mkreq("d", "u", 4, 0, 0, 1);

	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(ledger_request(l, (int)(i % 2), i, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 10, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);
	assert_int_equal(got(&ns, 0, "d", "u").soon, 0);      /* worker 1 has its 2 of 4 */
	assert_int_equal(got(&ns, 0, "d", "u").over, 0);

	/* Worker 2, holding none, joins: share 2 of 4 over 3 workers. */
	assert_int_equal(ledger_request(l, 2, 20, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 2);
	assert_int_equal(got(&ns, 0, "d", "u").soon, 1);
	assert_int_equal(got(&ns, 1, "d", "u").n, 1);           /* not its own request */
	assert_int_equal(got(&ns, 1, "d", "u").soon, 1);

	/* Worker 2, below its share, is served first although worker 1 asked
	 * earlier; then worker 1's patient request. */
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 2, 20, "d", "u");
	assert_true(ledger_release(l, 1, "d", "u"));
	expect_grant(l, 1, 10, "d", "u");
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_request(l, 1, 11, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);           /* 1 + 2 + 1: worker 1 has 2 */
	assert_int_equal(got(&ns, 0, "d", "u").soon, 0);
	assert_int_equal(got(&ns, 2, "d", "u").soon, 0);
}

/* Another pool of a database at max_db_connections waits: in a hurry. */
static void test_want_soon_other_pool(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req a = mkreq("d", "ua", 10, 2, 0, 1);
	struct slot_req b = mkreq("d", "ub", 10, 2, 0, 1);

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 2, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 3, &b), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "ua").n, 1);
	assert_int_equal(got(&ns, 0, "d", "ua").soon, 1);
}

/* Fewer servers than workers: holders are within their share, so only the
 * starvation rule moves a server, and only after LEDGER_STARVE_USEC. */
static void test_want_starving_worker(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req p = mkreq("d", "u", 2, 0, 0, 1);

	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 3, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").over, 0);
	assert_int_equal(got(&ns, 1, "d", "u").over, 0);

	fakeclock_advance(LEDGER_STARVE_USEC - 1);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);                           /* not starving yet */
	fakeclock_advance(1);
	collect(l, &ns);
	/* One starving worker: one holder (the first, on a tie) gives one up. */
	assert_int_equal(got(&ns, 0, "d", "u").over, 1);
	assert_int_equal(got(&ns, 1, "d", "u").over, -1);    /* unchanged: still 0 */

	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 2, 3, "d", "u");
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").over, 0);     /* holds none: asked for nothing */
	assert_int_equal(got(&ns, 1, "d", "u").over, 0);     /* nobody waits now */
}

static void test_want_requester_not_told(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req p = mkreq("d", "u", 1, 0, 0, 1);

	/* A worker that holds the pool and waits for it itself is not asked
	 * to give anything up. */
	assert_int_equal(ledger_request(l, 1, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 1, 3, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);

	/* Another worker asks: now worker 1 is told, about that one only. */
	assert_int_equal(ledger_request(l, 0, 4, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 1, "d", "u").n, 1);

	/* The other worker goes away: its request goes, the ask is withdrawn. */
	ledger_worker_gone(l, 0);
	assert_int_equal(ledger_queued(l), 2);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 1, "d", "u").n, 0);

	/* The holder goes away: no notice to a dead worker, and nothing when
	 * the index is reused. */
	assert_int_equal(ledger_request(l, 2, 5, &p), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 1, "d", "u").n, 1);
	ledger_worker_gone(l, 1);
	assert_int_equal(ledger_queued(l), 1);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	expect_grant(l, 2, 5, "d", "u");
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
}

/* ---- bad worker indexes ---- */

static void test_invalid_worker(void **state)
{
	struct ledger *l = *state;
	struct slot_req r = mkreq("d", "u", 0, 0, 0, 1);

	assert_int_equal(ledger_request(l, -1, 1, &r), LEDGER_DENIED);
	assert_int_equal(ledger_request(l, N_WORKERS, 2, &r), LEDGER_DENIED);
	assert_int_equal(ledger_request(l, 1000, 3, &r), LEDGER_DENIED);
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 0);
	assert_int_equal(ledger_db_count(l, "d"), 0);
	assert_int_equal(ledger_user_count(l, "u"), 0);

	assert_int_equal(ledger_request(l, N_WORKERS - 1, 4, &r), LEDGER_GRANTED);
	assert_int_equal(ledger_pool_count(l, "d", "u", N_WORKERS - 1), 1);
	assert_int_equal(ledger_pool_count(l, "d", "u", N_WORKERS), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);
	assert_false(ledger_release(l, N_WORKERS, "d", "u"));
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);
}

/* ---- servers moving between workers ---- */

/* The wait lines decide: the worker whose client waits longest gets the
 * server and its slot; its oldest queued request of the pool is answered. */
static void test_handover_to_longest_waiter(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 1, 0, 0, 1);
	usec_t waits[N_WORKERS] = { 0, 500, 300 };
	int to = -1;
	uint32_t id = 99;

	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 3, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 4, &p), LEDGER_QUEUED);
	assert_int_equal(ledger_handover(l, 0, "d", "u", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 2);
	assert_int_equal(id, 3);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", 2), 1);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);     /* one backend throughout */
	assert_int_equal(ledger_queued(l), 2);

	/* worker 1 waits longest now but has no request left: moved all the
	 * same (id 0), its queue untouched */
	waits[1] = 100;
	assert_int_equal(ledger_handover(l, 2, "d", "u", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 1);
	assert_int_equal(id, 2);
	waits[0] = 50;
	assert_int_equal(ledger_handover(l, 1, "d", "u", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 0);
	assert_int_equal(id, 0);
	assert_int_equal(ledger_queued(l), 1);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 1);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);
}

/* Without wait lines the queued requests stand in; nobody waiting: KEEP.
 * A giver that holds no slot of the pool is told to close (no move). */
static void test_handover_keep_and_fallback(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 1, 0, 0, 1);
	usec_t none[N_WORKERS] = { 0, 0, 0 };
	int to = -1;
	uint32_t id = 99;

	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_handover(l, 0, "d", "u", none, NULL, &to, &id), LEDGER_MOVE_KEEP);
	assert_int_equal(ledger_request(l, 1, 2, &p), LEDGER_QUEUED);
	/* a stale request with nobody in the wait lines: keep */
	assert_int_equal(ledger_handover(l, 0, "d", "u", none, NULL, &to, &id), LEDGER_MOVE_KEEP);
	assert_int_equal(ledger_handover(l, 0, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 1);
	assert_int_equal(id, 2);
	assert_int_equal(ledger_handover(l, 0, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_int_equal(ledger_handover(l, 0, "nope", "u", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_int_equal(ledger_handover(l, -1, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_int_equal(ledger_pool_count(l, "d", "u", 1), 1);
}

static bool nobody_waits(const char *db, const char *user, int worker)
{
	(void)db;
	(void)user;
	(void)worker;
	return false;
}

/* A full max_db_connections: another pool's request older than every
 * waiter of this pool gets the room (close); a younger one waits its turn. */
static void test_handover_other_pool_first_come(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "ua", 10, 1, 0, 1);
	struct slot_req b = mkreq("d", "ub", 10, 1, 0, 1);
	usec_t waits[N_WORKERS] = { 0, 0, 0 };
	struct notices ns;
	int to = -1;
	uint32_t id = 99;

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &b), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "ua").n, 1);
	fakeclock_advance(1);
	waits[2] = fakeclock_now();          /* ua's client on worker 2 came later */
	assert_int_equal(ledger_handover(l, 0, "d", "ua", waits, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_int_equal(ledger_pool_count(l, "d", "ua", 0), 1);      /* freed on close */
	/* ub's request has outlived its client: nothing is closed for it */
	assert_int_equal(ledger_handover(l, 0, "d", "ua", waits, nobody_waits, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 2);
	assert_int_equal(ledger_pool_count(l, "d", "ua", 2), 1);
	waits[2] = 0;
	waits[0] = 1;                        /* ua's waiter on worker 0 came first */
	assert_int_equal(ledger_handover(l, 2, "d", "ua", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 0);
}

/* Another worker has an idle server that can move: a waiter's request that
 * fits queues for it (no new backend) and is granted only if no move came
 * within LEDGER_MOVE_WAIT_USEC; a request that does not wait ignores it. */
static void test_request_waits_for_idle_server(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 5, 0, 0, 1);
	struct slot_req now = mkreq("d", "u", 5, 0, 0, 0);
	usec_t waits[N_WORKERS] = { 0, 100, 0 };
	int to = -1;
	uint32_t id = 0;

	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request_idle(l, 1, 2, &p, true), LEDGER_QUEUED);
	expect_no_grant(l);
	assert_int_equal(ledger_handover(l, 0, "d", "u", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 1);
	assert_int_equal(id, 2);
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 1);

	assert_int_equal(ledger_request_idle(l, 2, 3, &p, true), LEDGER_QUEUED);
	expect_no_grant(l);
	fakeclock_advance(LEDGER_MOVE_WAIT_USEC - 1);
	expect_no_grant(l);
	fakeclock_advance(1);
	expect_grant(l, 2, 3, "d", "u");
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 2);
	assert_int_equal(ledger_request_idle(l, 0, 4, &now, true), LEDGER_GRANTED);
}

/* Past LEDGER_MOVE_WAIT_USEC, a request waits on while the probe says the
 * idle server is still idle elsewhere (its worker has not run yet), up to
 * LEDGER_MOVE_WAIT_MAX_USEC; it is granted at once once none is. */
static bool still_idle;

static bool movable(const char *db, const char *user, int except)
{
	assert_string_equal(db, "d");
	assert_string_equal(user, "u");
	assert_int_equal(except, 1);
	return still_idle;
}

static void test_request_waits_on_while_idle_elsewhere(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 5, 0, 0, 1);

	ledger_set_movable_probe(l, movable);
	still_idle = true;
	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request_idle(l, 1, 2, &p, true), LEDGER_QUEUED);
	assert_true(ledger_awaiting_move(l));
	fakeclock_advance(LEDGER_MOVE_WAIT_USEC);
	expect_no_grant(l);
	fakeclock_advance(LEDGER_MOVE_WAIT_MAX_USEC - LEDGER_MOVE_WAIT_USEC - 1);
	expect_no_grant(l);
	fakeclock_advance(1);
	expect_grant(l, 1, 2, "d", "u");
	assert_false(ledger_awaiting_move(l));

	/* The idle server went (its worker's client took it): granted then. */
	assert_int_equal(ledger_request_idle(l, 1, 3, &p, true), LEDGER_QUEUED);
	fakeclock_advance(LEDGER_MOVE_WAIT_USEC);
	expect_no_grant(l);
	still_idle = false;
	expect_grant(l, 1, 3, "d", "u");
}

/* A request for the reuse order (move): only a move serves it. Denied at
 * once when no other worker has an idle server; else queued, never
 * granted (even where it fits), blocking no other request, answered by a
 * move, or handed back for a deny after LEDGER_MOVE_WAIT_USEC. Its holders
 * are asked, not in a hurry, and none is beyond its share for it. */
static void test_move_request(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 5, 0, 0, 1);
	struct slot_req mv = p;
	struct pool_want seen[4];
	usec_t waits[N_WORKERS] = { 100, 0, 0 };
	int n = 0, to = -1, w = -1;
	uint32_t id = 0;
	struct slot_req out;

	mv.move = 1;
	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request_idle(l, 0, 5, &mv, false), LEDGER_DENIED);
	assert_int_equal(ledger_request_idle(l, 0, 5, &mv, true), LEDGER_QUEUED);
	expect_no_grant(l);
	ledger_want_changes(l, keep_want, &(struct want_log){ seen, &n });
	assert_int_equal(n, 1);
	assert_int_equal(seen[0].n, 1);
	assert_int_equal(seen[0].soon, 0);
	assert_int_equal(seen[0].over, 0);
	/* Another worker's request that fits is not held back by it. */
	assert_int_equal(ledger_request(l, 2, 3, &p), LEDGER_GRANTED);
	/* Worker 1's idle server moves to worker 0 and answers it. */
	assert_int_equal(ledger_handover(l, 1, "d", "u", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 0);
	assert_int_equal(id, 5);
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", 0), 2);

	/* None comes: due for a deny after LEDGER_MOVE_WAIT_USEC. */
	assert_int_equal(ledger_request_idle(l, 2, 6, &mv, true), LEDGER_QUEUED);
	fakeclock_advance(LEDGER_MOVE_WAIT_USEC - 1);
	assert_false(ledger_next_expired(l, &w, &id, &out));
	expect_no_grant(l);
	fakeclock_advance(1);
	expect_no_grant(l);
	assert_true(ledger_next_expired(l, &w, &id, &out));
	assert_int_equal(w, 2);
	assert_int_equal(id, 6);
	assert_int_equal(out.move, 1);
	assert_int_equal(ledger_queued(l), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 3);
}

/* The want notice says since when the oldest other-pool request waits. */
static void test_want_other_since(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "ua", 10, 1, 0, 1);
	struct slot_req b = mkreq("d", "ub", 10, 1, 0, 1);
	struct pool_want seen[2];
	int n = 0;

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	usec_t queued = fakeclock_now();
	assert_int_equal(ledger_request(l, 1, 2, &b), LEDGER_QUEUED);
	fakeclock_advance(5000);
	ledger_want_changes(l, keep_want, &(struct want_log){ seen, &n });
	assert_int_equal(n, 1);
	assert_int_equal(seen[0].other_since, queued);
	assert_true(ledger_release(l, 0, "d", "ua"));
	expect_grant(l, 1, 2, "d", "ub");
	n = 0;
	ledger_want_changes(l, keep_want, &(struct want_log){ seen, &n });
	assert_int_equal(n, 1);
	assert_int_equal(seen[0].n, 0);
	assert_int_equal(seen[0].other_since, 0);
}

/* n tenants' requests: pools u0.. of one server each in database d,
 * limited to db_limit servers. */
static void tenant_reqs(struct slot_req *r, int n, int db_limit)
{
	char user[8];
	for (int i = 0; i < n; i++) {
		snprintf(user, sizeof(user), "u%d", i);
		r[i] = mkreq("d", user, 1, db_limit, 0, 1);
	}
}

/* The first n of them granted, to workers 0, 1, 0, ... (request ids 1..n). */
static void grant_tenants(struct ledger *l, const struct slot_req *r, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(ledger_request(l, i % 2, (uint32_t)(i + 1), &r[i]), LEDGER_GRANTED);
}

/* Tenants: one-server pools of one database at max_db_connections, a
 * queue of other tenants' requests. Every holder is asked for its one
 * server; as the oldest request is granted and the next takes its place,
 * a holder hears again only when its ask changes by more than the ledger's
 * slack (LEDGER_SINCE_SLACK_USEC, 2 ms), not at every grant. A full user
 * limit counts the same way for that user's pools of other databases. */
static void test_want_tenants(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	char user[8];
	struct slot_req r[6];

	tenant_reqs(r, 6, 3);
	grant_tenants(l, r, 3);
	usec_t t0 = fakeclock_now();
	assert_int_equal(ledger_request(l, 1, 4, &r[3]), LEDGER_QUEUED);
	fakeclock_advance(1000);
	assert_int_equal(ledger_request(l, 0, 5, &r[4]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 3);
	for (int i = 0; i < 3; i++) {
		snprintf(user, sizeof(user), "u%d", i);
		struct notice x = got(&ns, i == 1, "d", user);
		assert_int_equal(x.n, 1);                      /* 2 wait; it holds 1 */
		assert_int_equal(x.soon, 1);
		assert_int_equal(x.over, 0);
		assert_int_equal(x.other_since, t0);
	}

	/* u0's server goes, u3's request is granted: u4's, 1 ms younger, is
	 * the oldest now. u1's and u2's holders are not told again; u3's
	 * new holder is, and u0's holder hears "none". */
	assert_true(ledger_release(l, 0, "d", "u0"));
	expect_grant(l, 1, 4, "d", "u3");
	collect(l, &ns);
	assert_int_equal(ns.n, 2);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 0);
	assert_int_equal(got(&ns, 1, "d", "u3").n, 1);
	assert_int_equal(got(&ns, 1, "d", "u3").other_since, t0 + 1000);

	/* u5 queues 10 ms later and u4 is granted: the oldest is 9 ms younger
	 * than what u1's and u2's holders were told, so they hear it. */
	fakeclock_advance(10000);
	assert_int_equal(ledger_request(l, 1, 6, &r[5]), LEDGER_QUEUED);
	assert_true(ledger_release(l, 1, "d", "u1"));
	expect_grant(l, 0, 5, "d", "u4");
	collect(l, &ns);
	assert_int_equal(got(&ns, 1, "d", "u1").n, 0);
	assert_int_equal(got(&ns, 0, "d", "u2").other_since, t0 + 11000);
	assert_int_equal(got(&ns, 1, "d", "u3").other_since, t0 + 11000);
	assert_int_equal(got(&ns, 0, "d", "u4").other_since, t0 + 11000);
	assert_int_equal(got(&ns, 0, "d", "u4").n, 1);

	/* A user's limit: x's pool in database e waits while x holds its one
	 * connection in database f. */
	struct slot_req xf = mkreq("f", "x", 5, 0, 1, 1), xe = mkreq("e", "x", 5, 0, 1, 1);
	assert_int_equal(ledger_request(l, 1, 7, &xf), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 8, &xe), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 1, "f", "x").n, 1);
	assert_int_equal(got(&ns, 1, "f", "x").soon, 1);
	assert_int_equal(got(&ns, 1, "f", "x").other_since, fakeclock_now());
	assert_int_equal(got(&ns, 0, "d", "u2").n, -1);       /* unchanged */
}

/* Long waits: the oldest request has waited 400 ms when it is granted and
 * the next, 40 ms younger, takes its place. The holders are not told again
 * (40 ms is within half of its 360 ms wait: they believe it waited at
 * most 11 % longer than it has); a request of the moment, 360 ms younger
 * than the one told, is. */
static void test_want_slack_grows_with_the_wait(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[5];

	tenant_reqs(r, 5, 2);
	grant_tenants(l, r, 2);
	usec_t t0 = fakeclock_now();
	assert_int_equal(ledger_request(l, 0, 3, &r[2]), LEDGER_QUEUED);
	fakeclock_advance(40000);
	assert_int_equal(ledger_request(l, 1, 4, &r[3]), LEDGER_QUEUED);
	fakeclock_advance(360000);
	collect(l, &ns);
	assert_int_equal(ns.n, 2);
	assert_int_equal(got(&ns, 0, "d", "u0").other_since, t0);
	assert_int_equal(got(&ns, 1, "d", "u1").other_since, t0);

	assert_true(ledger_release(l, 0, "d", "u0"));
	expect_grant(l, 0, 3, "d", "u2");
	collect(l, &ns);
	assert_int_equal(ns.n, 2);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 0);
	assert_int_equal(got(&ns, 0, "d", "u2").other_since, t0 + 40000);
	assert_int_equal(got(&ns, 1, "d", "u1").n, -1);        /* not told again */

	assert_int_equal(ledger_request(l, 0, 5, &r[4]), LEDGER_QUEUED);
	assert_true(ledger_release(l, 1, "d", "u1"));
	expect_grant(l, 1, 4, "d", "u3");
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u2").other_since, fakeclock_now());
	assert_int_equal(got(&ns, 1, "d", "u3").other_since, fakeclock_now());
}

/* A pool with no request of its own queued is not told a new oldest wait
 * when the told one and the new one are both past 10 ms (its worker gives
 * to either at once); one with a request of its own is (its worker weighs
 * its clients' wait against that one). */
static void test_want_settled_since(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[5];

	tenant_reqs(r, 5, 3);
	grant_tenants(l, r, 3);                       /* u0, u2 on worker 0; u1 on 1 */
	usec_t t0 = fakeclock_now();
	assert_int_equal(ledger_request(l, 1, 4, &r[3]), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 1, 5, &r[2]), LEDGER_QUEUED);    /* u2's own */
	fakeclock_advance(60000);
	assert_int_equal(ledger_request(l, 1, 6, &r[4]), LEDGER_QUEUED);
	fakeclock_advance(20000);
	collect(l, &ns);
	assert_int_equal(got(&ns, 1, "d", "u1").other_since, t0);
	assert_int_equal(got(&ns, 0, "d", "u2").other_since, t0);

	/* u3 is granted; u4 (20 ms old, 60 ms younger) is the oldest now. */
	assert_true(ledger_release(l, 0, "d", "u0"));
	expect_grant(l, 1, 4, "d", "u3");
	collect(l, &ns);
	assert_int_equal(got(&ns, 1, "d", "u1").n, -1);
	assert_int_equal(got(&ns, 0, "d", "u2").other_since, t0 + 60000);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 0);
}

/* The idle probe's answers: idle servers of u<i> in every worker. */
static int probe_idle_of[8];

static int probe_calls;

static bool fake_probe(const char *db, const char *user, int64_t *hint, int *out, int n)
{
	(void)hint;
	probe_calls++;
	int i = user[0] == 'u' ? atoi(user + 1) : -1;
	if (strcmp(db, "d") != 0 || i < 0 || i >= 8)
		return false;
	for (int w = 0; w < n; w++)
		out[w] = probe_idle_of[i];
	return true;
}

/* n tenants' requests with limit `limit`, the first `granted` of them
 * granted (workers 0, 1, 0, ...), the fake idle probe set, no server idle. */
static void probed_tenants(struct ledger *l, struct slot_req *r, int n, int limit, int granted)
{
	ledger_set_idle_probe(l, fake_probe);
	tenant_reqs(r, n, limit);
	memset(probe_idle_of, 0, sizeof(probe_idle_of));
	grant_tenants(l, r, granted);
}

/* Eviction asks as many holders as requests wait, not every holder of the
 * database: those with an idle server first, then busy ones for what is
 * still missing; one asked keeps its ask while requests wait (no notice
 * at each use of its server); all hear "none" when nothing waits. */
static void test_want_rationed_by_idle_servers(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[7];

	probed_tenants(l, r, 7, 4, 4);
	probe_idle_of[1] = probe_idle_of[2] = 1;      /* u1's and u2's servers are idle */

	/* One request of u4: one holder with an idle server is asked (u1, the
	 * first such), nobody else. */
	assert_int_equal(ledger_request(l, 2, 5, &r[4]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 1, "d", "u1").n, 1);

	/* u1's server is in use now; u5 queues too: u1 keeps its ask (no
	 * notice), u2 (idle) is asked for the second request. */
	probe_idle_of[1] = 0;
	assert_int_equal(ledger_request(l, 2, 6, &r[5]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 0, "d", "u2").n, 1);

	/* A third request and no idle server left: one busy holder more is
	 * asked (u0, the first not asked yet); u3 is not. */
	probe_idle_of[2] = 0;
	assert_int_equal(ledger_request(l, 2, 7, &r[6]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 1);
	assert_int_equal(got(&ns, 1, "d", "u3").n, -1);

	/* Nothing waits any more: every holder asked hears "none". */
	assert_true(ledger_withdraw(l, 2, "d", "u4", 5));
	assert_true(ledger_withdraw(l, 2, "d", "u5", 6));
	assert_true(ledger_withdraw(l, 2, "d", "u6", 7));
	collect(l, &ns);
	assert_int_equal(ns.n, 3);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 0);
	assert_int_equal(got(&ns, 1, "d", "u1").n, 0);
	assert_int_equal(got(&ns, 0, "d", "u2").n, 0);
}

/* A pass with nothing queued and no want told tells nothing and reads no
 * idle counts; once a want was told, the pass after the queue emptied
 * still tells its "none" (a pass with nothing queued returns early only
 * when no pool has a want told: the ledger's count of those must hold). */
static void test_pass_after_queue_empties(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[3];

	probed_tenants(l, r, 3, 2, 2);
	probe_calls = 0;
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	assert_int_equal(probe_calls, 0);

	probe_idle_of[0] = 1;                          /* u0's server is idle */
	assert_int_equal(ledger_request(l, 1, 3, &r[2]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_true(probe_calls > 0);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 1);

	assert_true(ledger_withdraw(l, 1, "d", "u2", 3));
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 0);  /* taken back */
	probe_calls = 0;
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	assert_int_equal(probe_calls, 0);
}

/* The evictions told (ledger_set_evict), and the fake wait line. */
static struct evicted {
	int w;
	char user[8];
} evicted[16];
static int n_evicted;
static bool waiter_gone;

static void on_evict(int worker, const char *db, const char *user, bool for_db)
{
	assert_string_equal(db, "d");
	assert_true(for_db);                          /* the tenants' database limit */
	assert_true(n_evicted < 16);
	evicted[n_evicted].w = worker;
	snprintf(evicted[n_evicted].user, sizeof(evicted[n_evicted].user), "%s", user);
	n_evicted++;
}

static bool fake_waiting(const char *db, const char *user, int worker)
{
	(void)db;
	(void)user;
	(void)worker;
	return !waiter_gone;
}

/* Eviction across workers set up: n tenants' requests under a database
 * limit, the first `granted` of them granted (workers 0, 1, 0, ...), no
 * server idle yet, nothing evicted. */
static void evict_tenants(struct ledger *l, struct slot_req *r, int n, int limit, int granted)
{
	ledger_set_evict(l, on_evict, fake_waiting);
	n_evicted = 0;
	waiter_gone = false;
	probed_tenants(l, r, n, limit, granted);
}

/* u1 (worker 1) or u2 (worker 0): the idle holders of the test below. */
static bool is_idle_holder(const struct evicted *e)
{
	return (e->w == 1 && strcmp(e->user, "u1") == 0) || (e->w == 0 && strcmp(e->user, "u2") == 0);
}

/* Eviction across workers: a request held back by a full
 * max_db_connections has one holder with an idle server of another pool
 * told to close it, and no want goes anywhere; one close per request,
 * never two at one idle server; a holder that found none left is not asked
 * again for that request, which falls back to a busy holder's want; the
 * slot comes back at the release; nothing is closed at once for a request
 * whose client has left. */
static void test_evict_idle_at_once(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[7];

	evict_tenants(l, r, 7, 4, 4);                 /* u0, u2 on worker 0; u1, u3 on 1 */
	probe_idle_of[1] = probe_idle_of[2] = 1;

	assert_int_equal(ledger_request(l, 2, 5, &r[4]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	assert_int_equal(n_evicted, 1);
	assert_true(is_idle_holder(&evicted[0]));
	collect(l, &ns);                              /* under way: nothing more */
	assert_int_equal(ns.n, 0);
	assert_int_equal(n_evicted, 1);

	/* A second request: the other idle holder, though the first one's
	 * server still looks idle (its close not seen yet). */
	assert_int_equal(ledger_request(l, 2, 6, &r[5]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	assert_int_equal(n_evicted, 2);
	assert_true(is_idle_holder(&evicted[1]));
	assert_true(evicted[1].w != evicted[0].w);

	/* The first holder's client took its server meanwhile: u4's request
	 * waits for a busy holder (a want) once it has waited
	 * LEDGER_BUSY_ASK_USEC with no idle server come up, not for that
	 * holder again. */
	assert_true(ledger_evict_refused(l, evicted[0].w, "d", evicted[0].user));
	assert_false(ledger_evict_refused(l, evicted[0].w, "d", evicted[0].user));
	probe_idle_of[atoi(evicted[0].user + 1)] = 0;
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	fakeclock_advance(LEDGER_BUSY_ASK_USEC);
	collect(l, &ns);
	assert_int_equal(n_evicted, 2);
	assert_int_equal(ns.n, 1);
	assert_int_equal(ns.v[0].n, 1);
	assert_true(strcmp(ns.v[0].user, evicted[0].user) != 0 && strcmp(ns.v[0].user, evicted[1].user) != 0);

	/* The second close is done: the oldest request takes the slot. */
	assert_true(ledger_release(l, evicted[1].w, "d", evicted[1].user));
	expect_grant(l, 2, 5, "d", "u4");

	/* u5 is left; the busy holder not asked (u0 or u3) comes idle, but
	 * u5's client has gone: nothing is closed at once, the holder is told
	 * a want (its handover finds nobody waiting, as before). */
	int other = strcmp(ns.v[0].user, "u0") == 0 ? 3 : 0;
	char other_user[8];
	snprintf(other_user, sizeof(other_user), "u%d", other);
	waiter_gone = true;
	probe_idle_of[other] = 1;
	collect(l, &ns);
	assert_int_equal(n_evicted, 2);
	assert_int_equal(got(&ns, other % 2, "d", other_user).n, 1);
	waiter_gone = false;
	ledger_set_evict(l, NULL, NULL);
}

/* The idle servers' last use, by user u<i> (any worker). */
static int64_t probe_oldest_of[8];

static bool fake_oldest(const char *db, const char *user, int64_t *hint, int64_t *out, int n)
{
	(void)hint;
	int i = user[0] == 'u' ? atoi(user + 1) : -1;
	if (strcmp(db, "d") != 0 || i < 0 || i >= 8)
		return false;
	for (int w = 0; w < n; w++)
		out[w] = probe_oldest_of[i];
	return true;
}

/* As PgBouncer: of the idle servers in the way, the one unused longest is
 * closed, whichever holder and pool it is (not the first one found). */
static void test_evict_unused_longest(void **state)
{
	struct ledger *l = *state;
	struct slot_req r[6];

	evict_tenants(l, r, 6, 4, 4);                 /* u0, u2 on worker 0; u1, u3 on 1 */
	ledger_set_oldest_probe(l, fake_oldest);
	probe_idle_of[1] = probe_idle_of[2] = probe_idle_of[3] = 1;
	probe_oldest_of[1] = 3000;
	probe_oldest_of[2] = 1000;                    /* unused longest */
	probe_oldest_of[3] = 2000;
	assert_int_equal(ledger_request(l, 0, 5, &r[4]), LEDGER_QUEUED);
	collect(l, &(struct notices){ 0 });
	assert_int_equal(n_evicted, 1);
	assert_string_equal(evicted[0].user, "u2");
	assert_int_equal(evicted[0].w, 0);

	/* The next request: the oldest of those left (u2's close is on its
	 * way). */
	assert_int_equal(ledger_request(l, 0, 6, &r[5]), LEDGER_QUEUED);
	collect(l, &(struct notices){ 0 });
	assert_int_equal(n_evicted, 2);
	assert_string_equal(evicted[1].user, "u3");
	ledger_set_oldest_probe(l, NULL);
}

/* A worker told to evict an idle server that its client took meanwhile
 * closes another pool's of the database instead: that release is the
 * close the request waited for, so a request still queued after it may
 * have another close named, not wait on a close that went elsewhere. */
static void test_evict_substitute_counts(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[5];

	evict_tenants(l, r, 5, 3, 3);                 /* u0, u2 on worker 0; u1 on 1 */
	probe_idle_of[0] = probe_idle_of[1] = 1;
	assert_int_equal(ledger_request(l, 2, 4, &r[3]), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 5, &r[4]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(n_evicted, 2);               /* one idle server for each */
	int w0 = evicted[0].w == 0 ? 0 : 1;           /* the one told to worker 0 */
	assert_int_equal(evicted[w0].w, 0);
	assert_string_equal(evicted[w0].user, "u0");

	/* Worker 0 closed u2's server in place of u0's; the oldest request
	 * takes that slot. */
	assert_true(ledger_release(l, 0, "d", "u2"));
	int to = -1;
	uint32_t reqid = 0;
	struct slot_req got_req;
	assert_true(ledger_next_grant(l, &to, &reqid, &got_req));
	assert_int_equal(reqid, 4);
	/* Whichever request worker 0's close was named for, the other one
	 * (u4) waits on worker 1's now, still under way: no third close,
	 * though u0 looks idle again. */
	probe_idle_of[1] = 0;
	collect(l, &ns);
	assert_int_equal(n_evicted, 2);
	assert_true(ledger_release(l, 1, "d", "u1"));
	assert_true(ledger_next_grant(l, &to, &reqid, &got_req));
	assert_int_equal(reqid, 5);
	ledger_set_evict(l, NULL, NULL);
}

/* Eviction claims: what no idle server was found for is offered to every
 * worker at once, from the first pass (no LEDGER_BUSY_ASK_USEC wait), with
 * no want to any busy holder; a claimed close on its way serves the oldest
 * request (no idle server named for it, no second close offered); a
 * request leaving takes back what no queued request needs, before the
 * next pass. */
static int offered_db = -1, offered_user = -1, n_offers, on_way_db;
static uint32_t claims_base, offered_base;

static int fake_on_way(bool db, const char *name, uint32_t *base)
{
	*base = claims_base;
	return db && strcmp(name, "d") == 0 ? on_way_db : 0;
}

static void on_offer(bool db, const char *name, uint32_t base, int need)
{
	n_offers++;
	offered_base = base;
	if (db) {
		assert_string_equal(name, "d");
		offered_db = need;
	} else {
		offered_user = need;
	}
}

static void test_offer_claims(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[7];

	evict_tenants(l, r, 7, 4, 4);                 /* every server busy */
	ledger_set_offer(l, on_offer, fake_on_way);
	n_offers = on_way_db = 0;
	claims_base = 7;
	offered_db = offered_user = -1;

	collect(l, &ns);
	assert_int_equal(n_offers, 0);                 /* nothing queued, nothing offered */
	assert_int_equal(ledger_request(l, 2, 5, &r[4]), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 6, &r[5]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(offered_db, 2);
	assert_int_equal(offered_user, -1);            /* no user limit in the way */
	assert_int_equal(n_evicted, 0);
	assert_int_equal(ns.n, 0);                     /* no holder asked */
	fakeclock_advance(LEDGER_BUSY_ASK_USEC);
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
	assert_int_equal(offered_db, 2);

	assert_int_equal(offered_base, 7);

	/* Worker 1 claimed one for u1's server: it serves u4's request, the
	 * oldest; one more is offered, beyond the claims so far. */
	on_way_db = 1;
	claims_base = 8;
	collect(l, &ns);
	assert_int_equal(offered_db, 1);
	assert_int_equal(offered_base, 8);
	assert_int_equal(ns.n, 0);

	/* An idle server comes up: named for u5, nothing more offered. */
	probe_idle_of[3] = 1;
	collect(l, &ns);
	assert_int_equal(n_evicted, 1);
	assert_string_equal(evicted[0].user, "u3");
	assert_int_equal(offered_db, 0);
	probe_idle_of[3] = 0;

	/* The closes are done: u4 and u5 granted, nothing left on offer. */
	assert_true(ledger_release(l, 1, "d", "u1"));
	on_way_db = 0;
	expect_grant(l, 2, 5, "d", "u4");
	assert_true(ledger_release(l, 1, "d", "u3"));
	expect_grant(l, 2, 6, "d", "u5");
	int offers = n_offers;
	collect(l, &ns);
	assert_int_equal(n_offers, offers);            /* none told twice */

	/* Two more requests offered, then both withdrawn: taken back at
	 * once, not at the next pass. */
	assert_int_equal(ledger_request(l, 2, 7, &r[6]), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 8, &r[1]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(offered_db, 2);
	assert_true(ledger_withdraw(l, 2, "d", "u6", 7));
	assert_int_equal(offered_db, 1);
	assert_true(ledger_withdraw(l, 2, "d", "u1", 8));
	assert_int_equal(offered_db, 0);
	ledger_set_offer(l, NULL, NULL);
	ledger_set_evict(l, NULL, NULL);
}

/* A holder that offered its server counted it against its ask, as the
 * ledger does: with the request now helped by that close, the holder hears
 * nothing more (its ask is used up), the other holder hears "none". */
static void test_retell_counts_the_offer(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[3];
	int to = -1;
	uint32_t reqid = 0;

	tenant_reqs(r, 3, 2);
	grant_tenants(l, r, 2);                       /* u0 on worker 0, u1 on 1 */
	assert_int_equal(ledger_request(l, 2, 3, &r[2]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 1);
	assert_int_equal(got(&ns, 1, "d", "u1").n, 1);

	assert_int_equal(ledger_handover(l, 0, "d", "u0", NULL, NULL, &to, &reqid), LEDGER_MOVE_CLOSE);
	ledger_retell(l, 0, "d", "u0");
	collect(l, &ns);
	assert_int_equal(ns.n, 1);
	assert_int_equal(got(&ns, 1, "d", "u1").n, 0);

	/* The slot is back: u2 is granted; nothing more to tell anyone. */
	assert_true(ledger_release(l, 0, "d", "u0"));
	expect_grant(l, 2, 3, "d", "u2");
	collect(l, &ns);
	assert_int_equal(ns.n, 0);
}

/* A want says how much of it is the pool's own requests elsewhere (a
 * move serves them) and how much other pools' (only a close does). A
 * holder that closed its server for other pools' requests itself
 * (ledger_evict_done) marks the oldest of them, as a handover's close
 * does: nothing more is closed for it, nothing more told to the holder,
 * and the slot goes to it when it comes back. */
static void test_evict_done(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	struct slot_req r[3];
	struct slot_req e = mkreq("e", "v", 2, 0, 0, 1);

	tenant_reqs(r, 3, 2);
	grant_tenants(l, r, 2);                       /* u0 on worker 0, u1 on 1 */
	assert_int_equal(ledger_request(l, 0, 7, &e), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 8, &e), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 9, &e), LEDGER_QUEUED);
	assert_int_equal(ledger_request(l, 2, 3, &r[2]), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u0").n, 1);
	assert_int_equal(got(&ns, 0, "d", "u0").same, 0);
	assert_int_equal(got(&ns, 0, "e", "v").n, 1);
	assert_int_equal(got(&ns, 0, "e", "v").same, 1);

	assert_true(ledger_evict_done(l, 0, "d", "u0"));
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u0").n, -1);
	assert_int_equal(got(&ns, 1, "d", "u1").n, 0);     /* the request is served */
	assert_false(ledger_evict_done(l, 1, "d", "u1"));   /* nothing left to help */
	assert_false(ledger_evict_done(l, 2, "d", "u0"));   /* holds none */
	assert_true(ledger_release(l, 0, "d", "u0"));
	expect_grant(l, 2, 3, "d", "u2");
}

/* Servers arriving from an old process at an online restart count at
 * once, beyond the limits when need be; new requests wait until the count
 * is back under them. */
static void test_adopt_beyond_limits(void **state)
{
	struct ledger *l = *state;
	struct slot_req wait = mkreq("db1", "u1", 2, 3, 0, 1);

	ledger_adopt(l, 1, "db1", "u1");
	ledger_adopt(l, 1, "db1", "u1");
	ledger_adopt(l, 2, "db1", "u1");
	ledger_adopt(l, N_WORKERS, "db1", "u1");        /* no such worker: ignored */
	ledger_adopt(l, -1, "db1", "u1");
	assert_int_equal(ledger_pool_count(l, "db1", "u1", -1), 3);
	assert_int_equal(ledger_pool_count(l, "db1", "u1", 1), 2);
	assert_int_equal(ledger_db_count(l, "db1"), 3);
	assert_int_equal(ledger_user_count(l, "u1"), 3);
	assert_int_equal(ledger_request(l, 0, 1, &wait), LEDGER_QUEUED);
	assert_true(ledger_release(l, 1, "db1", "u1"));
	expect_no_grant(l);                               /* 2 of 2: still full */
	assert_true(ledger_release(l, 2, "db1", "u1"));
	expect_grant(l, 0, 1, "db1", "u1");
	assert_int_equal(ledger_pool_count(l, "db1", "u1", -1), 2);
}

/* A replication client's request (own): an idle server of its pool
 * elsewhere cannot serve it, so it never waits for a move; the holders,
 * its own worker included, are asked to close one (in a hurry), and the
 * one offered is closed for it, not moved. It is granted strictly first
 * come, first served, whatever the workers' shares. */
static void test_own_request_closes(void **state)
{
	struct ledger *l = *state;
	struct slot_req p = mkreq("d", "u", 2, 0, 0, 1);
	struct slot_req own = p;
	struct notices ns;
	int to = -1;
	uint32_t id = 0;

	own.own = 1;
	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 1, &p), LEDGER_GRANTED);
	assert_int_equal(ledger_request_idle(l, 1, 4, &own, true), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);
	assert_int_equal(got(&ns, 0, "d", "u").soon, 1);
	assert_true(got(&ns, 0, "d", "u").other_since > 0);
	assert_int_equal(ledger_handover(l, 0, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	/* A second offer is not closed for the same request. */
	assert_int_equal(ledger_handover(l, 0, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_KEEP);
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 1, 4, "d", "u");

	/* Its own worker holds the pool: it is asked too, and closes. */
	assert_int_equal(ledger_request(l, 1, 1, &p), LEDGER_QUEUED);     /* 2 of 2 */
	assert_int_equal(ledger_request(l, 0, 4, &own), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);          /* both; it holds one */
	assert_int_equal(ledger_handover(l, 0, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 1);             /* the pooled request: a move serves it */
	assert_int_equal(id, 1);
	assert_int_equal(ledger_handover(l, 1, "d", "u", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_true(ledger_release(l, 1, "d", "u"));
	expect_grant(l, 0, 4, "d", "u");
}

/* A request found room another way is withdrawn; once granted, it cannot be. */
static void test_withdraw(void **state)
{
	struct ledger *l = *state;
	struct slot_req own = mkreq("d", "u", 1, 0, 0, 1);

	own.own = 1;
	assert_int_equal(ledger_request(l, 0, 4, &own), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 4, &own), LEDGER_QUEUED);
	assert_false(ledger_withdraw(l, 2, "d", "u", 4));       /* not worker 2's */
	assert_false(ledger_withdraw(l, 1, "d", "u", 5));       /* not that id */
	assert_false(ledger_withdraw(l, 1, "d", "x", 4));
	assert_true(ledger_withdraw(l, 1, "d", "u", 4));
	assert_int_equal(ledger_queued(l), 0);
	assert_false(ledger_withdraw(l, 1, "d", "u", 4));
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_no_grant(l);
}

/* A server closed for another pool's request keeps the freed slot for it,
 * even when a server of its own pool moves to its worker meanwhile (one
 * PgBouncer opens the new server in the step that evicts): the move does
 * not take the request, and no second server is closed for it. */
static void test_close_pending_keeps_request(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "ua", 5, 3, 0, 1);
	struct slot_req b = mkreq("d", "ub", 5, 3, 0, 1);
	int to = -1;
	uint32_t id = 0;

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 1, &b), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 7, &b), LEDGER_QUEUED);      /* 3 of 3 */
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_KEEP);
	assert_int_equal(ledger_handover(l, 2, "d", "ub", NULL, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(to, 1);
	assert_int_equal(id, 0);              /* the request stays for the closed slot */
	assert_int_equal(ledger_queued(l), 1);
	assert_true(ledger_release(l, 0, "d", "ua"));
	expect_grant(l, 1, 7, "d", "ub");
	assert_int_equal(ledger_db_count(l, "d"), 3);
}

/* Nothing is closed for a request its own pool's limit holds back (or a
 * second limit another pool does not share): the freed slot would serve
 * nobody. */
static void test_close_only_where_it_fits(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "ua", 5, 2, 0, 1);
	struct slot_req b = mkreq("d", "ub", 1, 2, 0, 1);
	struct slot_req c = mkreq("d2", "ub", 5, 0, 1, 1);
	int to = -1;
	uint32_t id = 0;

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 2, 1, &b), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 7, &b), LEDGER_QUEUED);   /* pool ub full */
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_KEEP);
	assert_true(ledger_withdraw(l, 1, "d", "ub", 7));
	/* d2/ub waits on ub's user limit (1, held by d/ub): closing d/ua frees
	 * only database d, which is not in its way. */
	assert_int_equal(ledger_request(l, 1, 8, &c), LEDGER_QUEUED);
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_KEEP);
	assert_int_equal(ledger_handover(l, 2, "d", "ub", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
}

/* A close whose slot never comes back (the giver died, the slot went
 * elsewhere) stops counting after a second: the request may have another,
 * or it would wait for ever with every slot on idle servers. */
static void test_close_pending_expires(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "ua", 5, 2, 0, 1);
	struct slot_req b = mkreq("d", "ub", 5, 2, 0, 1);
	int to = -1;
	uint32_t id = 0;

	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 7, &b), LEDGER_QUEUED);
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_KEEP);
	fakeclock_advance(USEC_PER_SEC - 1);
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_KEEP);
	fakeclock_advance(1);
	assert_int_equal(ledger_handover(l, 0, "d", "ua", NULL, NULL, &to, &id), LEDGER_MOVE_CLOSE);
}

/* ---- published totals ----
 * Every change of a database's or user's slot total reaches the hook
 * (which writes shared memory for the workers' look before they ask). */
static int seen_db_d = -1, seen_user_ua = -1, seen_user_ub = -1, n_seen;

static void on_count(bool db, const char *name, int total)
{
	n_seen++;
	if (db && strcmp(name, "d") == 0)
		seen_db_d = total;
	else if (!db && strcmp(name, "ua") == 0)
		seen_user_ua = total;
	else if (!db && strcmp(name, "ub") == 0)
		seen_user_ub = total;
}

static void test_count_hook(void **state)
{
	struct ledger *l = *state;
	struct slot_req a = mkreq("d", "ua", 5, 2, 0, 1);
	struct slot_req b = mkreq("d", "ub", 5, 2, 0, 1);
	usec_t waits[N_WORKERS] = { 0, 0, 100 };
	int to = -1;
	uint32_t id = 0;

	ledger_set_count_hook(l, on_count);
	seen_db_d = seen_user_ua = seen_user_ub = -1;
	n_seen = 0;
	assert_int_equal(ledger_request(l, 0, 1, &a), LEDGER_GRANTED);
	assert_int_equal(seen_db_d, 1);
	assert_int_equal(seen_user_ua, 1);
	assert_int_equal(ledger_request(l, 1, 2, &b), LEDGER_GRANTED);
	assert_int_equal(seen_db_d, 2);
	assert_int_equal(seen_user_ub, 1);
	/* Full: queued, nothing counted, nothing told. */
	n_seen = 0;
	assert_int_equal(ledger_request(l, 2, 3, &a), LEDGER_QUEUED);
	assert_int_equal(n_seen, 0);
	/* A release and the grant it makes room for: each told. */
	assert_true(ledger_release(l, 1, "d", "ub"));
	assert_int_equal(seen_db_d, 1);
	assert_int_equal(seen_user_ub, 0);
	expect_grant(l, 2, 3, "d", "ua");
	assert_int_equal(seen_db_d, 2);
	assert_int_equal(seen_user_ua, 2);
	/* A server moving between workers changes no total. */
	assert_int_equal(ledger_request(l, 1, 4, &a), LEDGER_QUEUED);
	n_seen = 0;
	waits[1] = 50;
	assert_int_equal(ledger_handover(l, 0, "d", "ua", waits, NULL, &to, &id), LEDGER_MOVE_TO);
	assert_int_equal(n_seen, 0);
	assert_int_equal(ledger_db_count(l, "d"), 2);
	/* A dead worker's slots: the totals without them. */
	ledger_worker_gone(l, 2);
	assert_int_equal(seen_db_d, 1);
	assert_int_equal(seen_user_ua, 1);
	assert_true(ledger_release(l, 1, "d", "ua"));
	assert_int_equal(seen_db_d, 0);
	assert_int_equal(seen_user_ua, 0);
	assert_int_equal(ledger_entries(l), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* Tenants come and go: an entry lives while it counts a slot, a queued
 * request or a want told to a worker, and goes after; 10,000 pools one
 * after another leave nothing, and a pool coming back starts afresh. */
static void test_entries_freed(void **state)
{
	struct ledger *l = *state;
	struct notices ns;
	char user[32];
	for (int i = 0; i < 10000; i++) {
		snprintf(user, sizeof(user), "role%d", i);
		struct slot_req r = mkreq("tenants", user, 1, 0, 0, 1);
		assert_int_equal(ledger_request(l, i % N_WORKERS, 1, &r), LEDGER_GRANTED);
		assert_true(ledger_release(l, i % N_WORKERS, "tenants", user));
	}
	assert_int_equal(ledger_entries(l), 0);

	/* A refused request leaves nothing behind either. */
	struct slot_req full = mkreq("d", "u", 1, 0, 0, 0);
	assert_int_equal(ledger_request(l, 0, 1, &full), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 2, &full), LEDGER_DENIED);
	assert_int_equal(ledger_entries(l), 3);       /* the pool, "d", "u" */

	/* Queued, then withdrawn; queued, told as a want, granted, released:
	 * the entry stays until the "none" is told, then goes. */
	struct slot_req w = mkreq("d", "u", 1, 0, 0, 1);
	assert_int_equal(ledger_request(l, 1, 3, &w), LEDGER_QUEUED);
	assert_true(ledger_withdraw(l, 1, "d", "u", 3));
	assert_int_equal(ledger_request(l, 2, 4, &w), LEDGER_QUEUED);
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 1);
	assert_true(ledger_release(l, 0, "d", "u"));
	expect_grant(l, 2, 4, "d", "u");
	assert_true(ledger_release(l, 2, "d", "u"));
	assert_int_equal(ledger_entries(l), 3);       /* worker 0 still has a want told */
	collect(l, &ns);
	assert_int_equal(got(&ns, 0, "d", "u").n, 0);
	assert_int_equal(ledger_entries(l), 0);
	assert_int_equal(ledger_pool_count(l, "d", "u", -1), 0);

	/* A dead worker's slots and requests go, and their entries. */
	struct slot_req x = mkreq("x", "y", 1, 0, 0, 1);
	assert_int_equal(ledger_request(l, 1, 5, &x), LEDGER_GRANTED);
	assert_int_equal(ledger_request(l, 1, 6, &x), LEDGER_QUEUED);
	ledger_worker_gone(l, 1);
	assert_int_equal(ledger_entries(l), 0);
	assert_int_equal(ledger_queued(l), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_entries_freed, setup, teardown),
		T(test_pool_limit_then_queue_or_deny),
		T(test_count_hook),
		T(test_db_limit_across_pools),
		T(test_user_limit_across_pools),
		T(test_limits_zero_or_negative_mean_none),
		T(test_fifo_same_pool),
		T(test_fifo_across_pools),
		T(test_waiter_blocks_same_pool_db_user),
		T(test_waiter_blocks_through_db_and_user_limits),
		T(test_nowait_uses_own_limit_past_queue),
		T(test_release_not_held),
		T(test_worker_gone),
		T(test_want_notices),
		T(test_want_fair_share),
		T(test_want_soon),
		T(test_want_soon_other_pool),
		T(test_want_requester_not_told),
		T(test_want_starving_worker),
		T(test_invalid_worker),
		T(test_handover_to_longest_waiter),
		T(test_handover_keep_and_fallback),
		T(test_handover_other_pool_first_come),
		T(test_want_other_since),
		T(test_want_tenants),
		T(test_want_slack_grows_with_the_wait),
		T(test_want_settled_since),
		T(test_want_rationed_by_idle_servers),
		T(test_pass_after_queue_empties),
		T(test_evict_idle_at_once),
		T(test_evict_unused_longest),
		T(test_offer_claims),
		T(test_evict_substitute_counts),
		T(test_retell_counts_the_offer),
		T(test_evict_done),
		T(test_request_waits_for_idle_server),
		T(test_request_waits_on_while_idle_elsewhere),
		T(test_move_request),
		T(test_adopt_beyond_limits),
		T(test_own_request_closes),
		T(test_withdraw),
		T(test_close_pending_keeps_request),
		T(test_close_only_where_it_fits),
		T(test_close_pending_expires),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
		

/* pgcrew — unit tests for the latency histograms: bucket boundaries (a
 * value equal to a bound falls in that bucket), per-pool slots claimed by
 * name and stable, sums over workers including forked ones, the phase
 * histograms, the cells pool_idle_timeout reads, every worker's idle
 * servers by name, and a full pool table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hist.h"

#define N_WORKERS 3
#define MAX_POOLS 1024

static int setup(void **state)
{
	(void)state;
	if (hist_create(N_WORKERS, MAX_POOLS) < 0)
		return -1;
	hist_attach_worker(0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	hist_destroy();
	return 0;
}

static void test_buckets(void **state)
{
	(void)state;
	assert_int_equal(hist_bucket(0), 0);
	assert_int_equal(hist_bucket(50), 0);
	assert_int_equal(hist_bucket(51), 1);
	assert_int_equal(hist_bucket(1000), 4);
	assert_int_equal(hist_bucket(1001), 5);
	for (unsigned i = 0; i < HIST_BOUNDS; i++) {
		assert_int_equal(hist_bucket(hist_bounds_us[i]), i);
		assert_int_equal(hist_bucket(hist_bounds_us[i] + 1), i + 1);
		if (i)
			assert_true(hist_bounds_us[i] > hist_bounds_us[i - 1]);
	}
	assert_int_equal(hist_bucket(UINT64_MAX), HIST_BOUNDS);   /* +Inf */
}

static int slot_of(const char *db, const char *user)
{
	char d[64], u[64];
	for (int i = 0; i < (int)hist_pools_high(); i++)
		if (hist_pool_at(i, d, sizeof(d), u, sizeof(u)) && strcmp(d, db) == 0 && strcmp(u, user) == 0)
			return i;
	return -1;
}

static void test_pools_sum_over_workers(void **state)
{
	(void)state;
	struct hist_pool_cell *c = hist_pool_hold("db1", "alice", NULL);
	assert_non_null(c);
	assert_ptr_equal(hist_pool_hold("db1", "alice", NULL), c);            /* stable */
	assert_ptr_not_equal(hist_pool_hold("db1", "bob", NULL), c);
	assert_ptr_not_equal(hist_pool_hold("db1a", "lice", NULL), c);        /* not a concatenation */
	hist_pool_observe(c, HIST_XACT, 10);
	hist_pool_observe(c, HIST_XACT, 2000);
	hist_pool_observe(NULL, HIST_XACT, 5);                          /* table full: no-op */
	/* Two forked workers count into their own cells of the same pool. */
	for (int w = 1; w < N_WORKERS; w++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			hist_attach_worker(w);
			struct hist_pool_cell *mine = hist_pool_hold("db1", "alice", NULL);
			for (int i = 0; i < 1000; i++)
				hist_pool_observe(mine, HIST_XACT, 60000000);    /* +Inf */
			_exit(mine && mine != c ? 0 : 1);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	struct hist_total t;
	int idx = slot_of("db1", "alice");
	assert_true(idx >= 0);
	hist_pool_total(idx, HIST_XACT, &t);
	assert_int_equal(t.n[0], 1);
	assert_int_equal(t.n[hist_bucket(2000)], 1);
	assert_int_equal(t.n[HIST_BOUNDS], 2000);
	assert_int_equal(t.sum_us, 2010 + 2000ULL * 60000000);
	hist_pool_total(idx, HIST_QUERY, &t);
	assert_int_equal(t.n[0] + t.n[HIST_BOUNDS], 0);
}

static void test_phases(void **state)
{
	(void)state;
	struct hist_total t;
	hist_phase_observe(HIST_PHASE_TLS, 700);
	hist_phase_total(HIST_PHASE_TLS, &t);
	assert_int_equal(t.n[hist_bucket(700)], 1);
	assert_int_equal(t.sum_us, 700);
	assert_string_equal(hist_phase_name(HIST_PHASE_SERVER_LOGIN), "server_login");
}

/* pool_idle_timeout: a pool is used elsewhere while another worker has a
 * client or a server connection of it; else the latest time another
 * worker's last one came or went; a dead worker's are cleared with its
 * wait lines. */
static void test_pool_use_elsewhere(void **state)
{
	usec_t last;
	(void)state;
	struct hist_pool_cell *mine = hist_pool_hold("dbu", "carol", NULL);
	assert_non_null(mine);
	assert_false(hist_pool_used_elsewhere(mine, &last));
	assert_int_equal(last, 0);                          /* nobody else ever had it */
	hist_pool_set_use(mine, 3, 2, 500);
	assert_false(hist_pool_used_elsewhere(mine, &last));   /* ours do not count */
	assert_int_equal(last, 0);
	/* Workers 1 and 2 (the cells are written as theirs would be). */
	hist_attach_worker(1);
	struct hist_pool_cell *w1 = hist_pool_hold("dbu", "carol", NULL);
	hist_attach_worker(2);
	struct hist_pool_cell *w2 = hist_pool_hold("dbu", "carol", NULL);
	hist_attach_worker(0);
	hist_pool_set_use(w1, 0, 0, 700);
	hist_pool_set_use(w2, 0, 0, 900);
	assert_false(hist_pool_used_elsewhere(mine, &last));
	assert_int_equal(last, 900);
	hist_pool_set_use(w2, 0, 1, 950);                    /* a server connection only */
	assert_true(hist_pool_used_elsewhere(mine, &last));
	hist_pool_set_use(w2, 0, 0, 960);
	hist_pool_set_use(w1, 1, 0, 1000);
	assert_true(hist_pool_used_elsewhere(mine, &last));
	hist_worker_gone(1);                                 /* worker 1 died */
	assert_false(hist_pool_used_elsewhere(mine, &last));
	assert_int_equal(last, 1000);
	assert_false(hist_pool_used_elsewhere(NULL, &last));   /* table full: no cell */
	assert_int_equal(last, 0);
}

/* Every worker's idle servers of a pool, read by name (the supervisor's
 * ledger asks holders with one first); cleared when a worker lets go of
 * the pool or dies; unknown for a pool without cells. */
static void test_idle_any_by_name(void **state)
{
	int got[N_WORKERS];
	int64_t hint = -1;
	(void)state;
	assert_false(hist_pool_idle_any("dbi", "dave", &hint, got, N_WORKERS));
	assert_int_equal(hint, -1);
	struct hist_pool_cell *w0 = hist_pool_hold("dbi", "dave", NULL);
	hist_attach_worker(2);
	struct hist_pool_cell *w2 = hist_pool_hold("dbi", "dave", NULL);
	hist_attach_worker(0);
	hist_pool_set_idle_any(w0, 1);
	hist_pool_set_idle_any(w2, 3);
	hist_pool_set_idle(w2, 0);             /* none of them can move: still idle */
	assert_true(hist_pool_idle_any("dbi", "dave", &hint, got, N_WORKERS));
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 0);
	assert_int_equal(got[2], 3);
	int64_t kept = hint;
	assert_true(kept >= 0);
	hist_worker_gone(2);
	assert_true(hist_pool_idle_any("dbi", "dave", &hint, got, N_WORKERS));
	assert_int_equal(got[2], 0);
	hist_pool_release(w0);                 /* the last hold: the slot is free */
	assert_false(hist_pool_idle_any("dbi", "dave", &hint, got, N_WORKERS));
	/* Another pool takes a slot (the freed one, first on the free list):
	 * a hint kept from before is not followed into it. */
	struct hist_pool_cell *other = hist_pool_hold("dbx", "erin", NULL);
	hist_pool_set_idle_any(other, 5);
	hint = kept;
	assert_false(hist_pool_idle_any("dbi", "dave", &hint, got, N_WORKERS));
	hist_pool_release(other);
}

/* max_pools pools at once: the next one gets no cell (its clients are
 * refused, pool.c); a pool let go of by every worker frees its slot for
 * another, whose counts start from zero; names too long get none. */
static void test_table_full(void **state)
{
	(void)state;
	char db[32];
	struct hist_pool_cell *cells[MAX_POOLS];
	int made = 0;
	for (int i = 0; i < MAX_POOLS + 10; i++) {
		snprintf(db, sizeof(db), "full%d", i);
		struct hist_pool_cell *c = hist_pool_hold(db, "u", NULL);
		if (c)
			cells[made++] = c;
	}
	/* The other tests' pools are still held. */
	assert_int_equal(hist_pools_used(), MAX_POOLS);
	assert_true(hist_pool_full());
	assert_true(made < MAX_POOLS && made > MAX_POOLS - 10);
	assert_null(hist_pool_hold("one", "more", NULL));
	hist_pool_observe(cells[0], HIST_QUERY, 7);
	hist_pool_release(cells[0]);
	struct hist_pool_cell *fresh = hist_pool_hold("one", "more", NULL);
	assert_ptr_equal(fresh, cells[0]);
	struct hist_total t;
	hist_pool_total(slot_of("one", "more"), HIST_QUERY, &t);
	assert_int_equal(t.n[0], 0);
	assert_int_equal(slot_of("full0", "u"), -1);
	char longname[100];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	assert_null(hist_pool_hold(longname, "u", NULL));
	for (int i = 1; i < made; i++)
		hist_pool_release(cells[i]);
}

/* Held by two workers: one letting go leaves the other's counts, and
 * says "nothing here" for its part (its time stays); the last one frees
 * the slot and is told so. */
static void test_release_by_workers(void **state)
{
	(void)state;
	usec_t last;
	struct hist_pool_cell *mine = hist_pool_hold("rel", "u", NULL);
	hist_attach_worker(1);
	struct hist_pool_cell *w1 = hist_pool_hold("rel", "u", NULL);
	hist_pool_set_use(w1, 2, 1, 100);
	hist_pool_set_wait(w1, 50);
	hist_attach_worker(0);
	assert_true(hist_pool_used_elsewhere(mine, &last));
	assert_int_equal(hist_pool_wait_elsewhere(mine), 50);
	hist_attach_worker(1);
	assert_false(hist_pool_release(w1));                 /* worker 0 still holds it */
	hist_attach_worker(0);
	assert_false(hist_pool_used_elsewhere(mine, &last));
	assert_int_equal(last, 100);
	assert_int_equal(hist_pool_wait_elsewhere(mine), 0);
	assert_true(slot_of("rel", "u") >= 0);
	assert_true(hist_pool_release(mine));
	assert_int_equal(slot_of("rel", "u"), -1);
	assert_true(hist_pool_release(NULL));                 /* no cell: nobody else */
}

/* A hold says whether no worker held the pool before (its first login then
 * asks the supervisor for no welcome): the first holder's, and again once
 * every holder has let go; never a second worker's. */
static void test_fresh_hold(void **state)
{
	(void)state;
	bool fresh = false;
	struct hist_pool_cell *mine = hist_pool_hold("fr", "u", &fresh);
	assert_non_null(mine);
	assert_true(fresh);
	assert_ptr_equal(hist_pool_hold("fr", "u", &fresh), mine);
	assert_false(fresh);                                  /* ours already */
	hist_attach_worker(1);
	struct hist_pool_cell *w1 = hist_pool_hold("fr", "u", &fresh);
	assert_false(fresh);                                  /* worker 0 holds it */
	assert_false(hist_pool_release(w1));
	hist_attach_worker(0);
	assert_true(hist_pool_release(mine));
	hist_attach_worker(1);
	w1 = hist_pool_hold("fr", "u", &fresh);
	assert_true(fresh);                                   /* nobody held it */
	assert_true(hist_pool_release(w1));
	hist_attach_worker(0);
}

/* Whether another worker holds our pool (its welcome is then sent to the
 * supervisor at once), and every holder by name (the supervisor asks
 * them for a welcome it lacks). */
static void test_shared_and_holders(void **state)
{
	(void)state;
	bool held[N_WORKERS];
	struct hist_pool_cell *mine = hist_pool_hold("sh", "u", NULL);
	assert_false(hist_pool_shared(mine));
	assert_false(hist_pool_shared(NULL));
	hist_pool_holders("sh", "u", held, N_WORKERS);
	assert_true(held[0] && !held[1] && !held[2]);
	hist_attach_worker(2);
	struct hist_pool_cell *w2 = hist_pool_hold("sh", "u", NULL);
	assert_true(hist_pool_shared(w2));
	hist_attach_worker(0);
	assert_true(hist_pool_shared(mine));
	hist_pool_holders("sh", "u", held, N_WORKERS);
	assert_true(held[0] && !held[1] && held[2]);
	hist_attach_worker(2);
	assert_false(hist_pool_release(w2));
	hist_attach_worker(0);
	assert_false(hist_pool_shared(mine));
	assert_true(hist_pool_release(mine));
	hist_pool_holders("sh", "u", held, N_WORKERS);
	assert_false(held[0] || held[1] || held[2]);          /* no such pool */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_pools_sum_over_workers),
		cmocka_unit_test(test_phases),
		cmocka_unit_test(test_pool_use_elsewhere),
		cmocka_unit_test(test_idle_any_by_name),
		cmocka_unit_test(test_release_by_workers),
		cmocka_unit_test(test_fresh_hold),
		cmocka_unit_test(test_shared_and_holders),
		cmocka_unit_test(test_table_full),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* pgcrew — unit tests for the shared slot table (shtab.c): taking and
 * finding by key, holding by several workers, freeing on the last release
 * and on a worker's death, a full table, reuse with a new generation, long
 * churn (the index's tombstones), forked workers racing for the same keys,
 * and a process killed while it holds the table's lock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shtab.h"

#define CAP 64

struct fx {
	struct shtab *t;
	size_t len;
	int fresh[CAP];           /* on_fresh calls per slot */
};

static struct shtab *map_table(uint32_t cap, size_t *len)
{
	*len = shtab_size(cap);
	void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(shtab_init(p, cap), 0);
	return p;
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	fx->t = map_table(CAP, &fx->len);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;
	shtab_destroy(fx->t);
	munmap(fx->t, fx->len);
	free(fx);
	return 0;
}

static void on_fresh(int i, void *arg)
{
	struct fx *fx = arg;
	assert_true(i >= 0 && i < CAP);
	fx->fresh[i]++;
}

static int hold(struct shtab *t, int w, const char *key)
{
	return shtab_hold(t, w, key, strlen(key) + 1, NULL, NULL, NULL);
}

static int find(struct shtab *t, const char *key)
{
	return shtab_find(t, key, strlen(key) + 1);
}

static void test_hold_find_release(void **state)
{
	struct fx *fx = *state;
	uint32_t gen = 0;
	char key[SHTAB_KEY_MAX];

	assert_int_equal(find(fx->t, "db\0alice"), -1);
	int a = shtab_hold(fx->t, 0, "db\0alice", 9, &gen, on_fresh, fx);
	assert_true(a >= 0);
	assert_int_equal(gen, 1);
	assert_int_equal(shtab_find(fx->t, "db\0alice", 9), a);
	/* Another key with the same first bytes is another slot. */
	int b = shtab_hold(fx->t, 0, "db\0alicf", 9, NULL, on_fresh, fx);
	assert_true(b >= 0 && b != a);
	assert_int_equal(shtab_key_at(fx->t, a, key, sizeof(key), &gen), 9);
	assert_memory_equal(key, "db\0alice", 9);
	assert_int_equal(shtab_used(fx->t), 2);

	/* Two workers hold it; the slot goes with the last. */
	assert_int_equal(shtab_hold(fx->t, 3, "db\0alice", 9, NULL, on_fresh, fx), a);
	assert_int_equal(shtab_hold(fx->t, 3, "db\0alice", 9, NULL, on_fresh, fx), a);   /* twice is once */
	assert_true(shtab_held_by(fx->t, a, 0) && shtab_held_by(fx->t, a, 3));
	bool held[5];
	shtab_holders(fx->t, a, held, 5);
	assert_true(held[0] && !held[1] && !held[2] && held[3] && !held[4]);
	assert_false(shtab_release(fx->t, 0, a));
	shtab_holders(fx->t, a, held, 5);
	assert_true(!held[0] && held[3]);
	assert_int_equal(shtab_find(fx->t, "db\0alice", 9), a);
	assert_int_equal(fx->fresh[a], 1);
	assert_true(shtab_release(fx->t, 3, a));
	shtab_holders(fx->t, a, held, 5);
	assert_false(held[0] || held[3]);          /* free: nobody */
	assert_int_equal(shtab_find(fx->t, "db\0alice", 9), -1);
	assert_int_equal(shtab_key_at(fx->t, a, key, sizeof(key), NULL), -1);
	assert_int_equal(shtab_used(fx->t), 1);
	/* Releasing a free slot, or one not held, changes nothing. */
	assert_false(shtab_release(fx->t, 3, a));
	assert_false(shtab_release(fx->t, 5, b));
	assert_int_equal(shtab_find(fx->t, "db\0alicf", 9), b);

	/* Taken again: the freed slot, a new generation. */
	uint32_t gen2 = 0;
	int c = shtab_hold(fx->t, 1, "db\0carol", 9, &gen2, on_fresh, fx);
	assert_int_equal(c, a);
	assert_int_equal(fx->fresh[a], 2);
	assert_int_equal(gen2, 2);
	/* Keys too long are refused; bad workers too. */
	char big[SHTAB_KEY_MAX + 1] = { 0 };
	assert_int_equal(shtab_hold(fx->t, 0, big, sizeof(big), NULL, NULL, NULL), -1);
	assert_int_equal(shtab_hold(fx->t, SHTAB_WORKERS, "x", 2, NULL, NULL, NULL), -1);
	assert_int_equal(shtab_hold(fx->t, -1, "x", 2, NULL, NULL, NULL), -1);
}

static void test_full_then_freed(void **state)
{
	struct fx *fx = *state;
	char key[32];
	int idx[CAP];
	for (int i = 0; i < CAP; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		idx[i] = hold(fx->t, i % 4, key);
		assert_int_equal(idx[i], i);      /* handed out from the bottom */
	}
	assert_int_equal(shtab_used(fx->t), CAP);
	assert_int_equal(shtab_high_water(fx->t), CAP);
	assert_int_equal(hold(fx->t, 0, "one more"), -1);
	/* A key already there is still found and held. */
	assert_int_equal(hold(fx->t, 7, "k5"), 5);
	assert_true(shtab_release(fx->t, 2, idx[10]));
	assert_int_equal(hold(fx->t, 0, "one more"), 10);
	assert_int_equal(hold(fx->t, 0, "and another"), -1);
	for (int i = 0; i < CAP; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(find(fx->t, key), i == 10 ? -1 : i);
	}
}

/* A worker that dies lets go of what it held, alone. */
static void test_worker_gone(void **state)
{
	struct fx *fx = *state;
	int a = hold(fx->t, 1, "a"), b = hold(fx->t, 1, "b"), c = hold(fx->t, 2, "c");
	assert_int_equal(hold(fx->t, 2, "b"), b);
	assert_true(shtab_held_by(fx->t, a, 1));
	assert_int_equal(shtab_worker_gone(fx->t, 1), 1);   /* "a" only */
	assert_int_equal(find(fx->t, "a"), -1);
	assert_int_equal(find(fx->t, "b"), b);
	assert_int_equal(find(fx->t, "c"), c);
	assert_false(shtab_held_by(fx->t, b, 1));
	assert_int_equal(shtab_worker_gone(fx->t, 2), 2);
	assert_int_equal(shtab_used(fx->t), 0);
}

/* Far more keys than slots come and go (rotating roles): every lookup
 * stays right and the table never fills, whatever tombstones the index
 * collects. */
static void test_churn(void **state)
{
	struct fx *fx = *state;
	char key[32];
	int live[CAP / 2];
	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "tenant_%d", i);
		int s = hold(fx->t, i % 3, key);
		assert_true(s >= 0);
		int k = i % (CAP / 2);
		if (i >= CAP / 2) {
			snprintf(key, sizeof(key), "tenant_%d", i - CAP / 2);
			assert_int_equal(find(fx->t, key), live[k]);
			assert_true(shtab_release(fx->t, (i - CAP / 2) % 3, live[k]));
			assert_int_equal(find(fx->t, key), -1);
		}
		live[k] = s;
	}
	assert_int_equal(shtab_used(fx->t), CAP / 2);
	assert_true(shtab_high_water(fx->t) <= CAP / 2 + 1);
}

/* Forked workers take the same keys at once: one slot per key, every
 * worker a holder of it. */
static void test_race(void **state)
{
	struct fx *fx = *state;
	enum { KIDS = 4, KEYS = CAP - 8 };
	pid_t pid[KIDS];
	for (int k = 0; k < KIDS; k++) {
		pid[k] = fork();
		assert_true(pid[k] >= 0);
		if (pid[k] == 0) {
			char key[32];
			for (int round = 0; round < 200; round++)
				for (int i = 0; i < KEYS; i++) {
					snprintf(key, sizeof(key), "race%d", (i * 5 + k * 13) % KEYS);
					int s = hold(fx->t, k + 1, key);
					if (s < 0)
						_exit(2);
					if (round < 199 && i % 3 == k % 3)
						shtab_release(fx->t, k + 1, s);
				}
			_exit(0);
		}
	}
	for (int k = 0; k < KIDS; k++) {
		int st;
		assert_int_equal(waitpid(pid[k], &st, 0), pid[k]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(shtab_used(fx->t), KEYS);
	char key[32];
	for (int i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "race%d", i);
		int s = find(fx->t, key);
		assert_true(s >= 0);
		for (int k = 0; k < KIDS; k++)
			assert_true(shtab_held_by(fx->t, s, k + 1));
	}
}

/* A worker killed while it holds the table's lock: the next one in gets
 * the lock (robust), the index is rebuilt from the slots, and the dead
 * worker's slots go when the supervisor says it is gone. */
static void test_killed_holding_the_lock(void **state)
{
	struct fx *fx = *state;
	assert_true(hold(fx->t, 0, "mine") >= 0);
	for (int round = 0; round < 30; round++) {
		int ready[2];
		assert_int_equal(pipe(ready), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char key[32];
			close(ready[0]);
			(void)!write(ready[1], "x", 1);
			for (unsigned i = 0;; i++) {
				snprintf(key, sizeof(key), "kid%u", i % 40);
				int s = hold(fx->t, 1, key);
				if (s >= 0 && i % 2)
					shtab_release(fx->t, 1, s);
			}
		}
		close(ready[1]);
		char c;
		assert_int_equal(read(ready[0], &c, 1), 1);
		close(ready[0]);
		for (volatile int spin = 0; spin < 20000 * (round % 5 + 1); spin++)
			;
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, NULL, 0), pid);
		shtab_worker_gone(fx->t, 1);
		assert_int_equal(shtab_used(fx->t), 1);
		assert_true(find(fx->t, "mine") >= 0);
		assert_true(hold(fx->t, 0, "after") >= 0);
		assert_true(shtab_release(fx->t, 0, find(fx->t, "after")));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hold_find_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_then_freed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_worker_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_churn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_killed_holding_the_lock, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

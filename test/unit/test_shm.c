/* pgcrew — unit tests for the shared counters: mapping and sizes, connection
 * ids, per-worker client counts with limits, the named counter table (index,
 * limits, filling up), and forked workers racing on the same limits while the
 * parent watches that no more than the limit are ever held. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"

#define NAMES 4096               /* the name table's capacity (2 x max_pools) */
#define N_WORKERS 5
#define N_CHILDREN 4             /* workers 1..4; the parent is worker 0 */
#define CHILD_ITERS 100000
#define CLIENT_LIMIT 5
#define NAME_LIMIT 3
#define RACE_NAMES 256           /* names every child registers, in the same order */
#define OWN_NAMES 800            /* names only one child registers: the table fills to ~85% */
#define GO_SPINS 2000000         /* yields a child waits for the start signal */
#define WATCH_TURNS 20000000L    /* parent observation turns before it just waits */
#define SNAP_TRIES 64            /* attempts at one consistent look */

static int setup(void **state)
{
	(void)state;
	if (shm_create(N_WORKERS, NAMES) < 0)
		return -1;
	shm_attach_worker(0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	shm_destroy();
	shm_attach_worker(0);
	return 0;
}

/* ---- mapping ---- */

static void test_create_destroy(void **state)
{
	(void)state;
	/* Not mapped: the readers answer harmlessly. */
	assert_int_equal(shm_n_workers(), 1);
	assert_int_equal(shm_clients_total(), 0);
	assert_int_equal(shm_clients_of(0), 0);
	assert_int_equal(shm_name_hold(SHM_DB, "x"), -1);

	assert_int_equal(shm_create(0, NAMES), -1);
	assert_int_equal(shm_create(-3, NAMES), -1);
	assert_int_equal(shm_create(SHM_MAX_WORKERS + 1, NAMES), -1);
	assert_int_equal(shm_n_workers(), 1);

	assert_int_equal(shm_create(SHM_MAX_WORKERS, NAMES), 0);
	assert_int_equal(shm_n_workers(), SHM_MAX_WORKERS);
	shm_attach_worker(SHM_MAX_WORKERS - 1);
	assert_true(shm_client_take(1));
	assert_int_equal(shm_clients_of(SHM_MAX_WORKERS - 1), 1);
	assert_int_equal(shm_clients_total(), 1);
	int idx = shm_name_hold(SHM_USER, "last");
	assert_true(idx >= 0 && idx < NAMES);
	assert_true(shm_name_take(idx, 1));
	assert_int_equal(shm_name_total(idx), 1);
	shm_destroy();
	assert_int_equal(shm_n_workers(), 1);
	assert_int_equal(shm_clients_total(), 0);
	shm_destroy();                          /* twice is harmless */

	/* A new mapping starts from zero. */
	assert_int_equal(shm_create(1, NAMES), 0);
	assert_int_equal(shm_n_workers(), 1);
	shm_attach_worker(0);
	assert_int_equal(shm_clients_total(), 0);
	assert_int_equal(shm_next_id(), 1);
	idx = shm_name_hold(SHM_USER, "last");
	assert_true(idx >= 0);
	assert_int_equal(shm_name_total(idx), 0);
	shm_destroy();
}

/* ---- ids ---- */

static void test_ids_increase(void **state)
{
	(void)state;
	uint64_t prev = shm_next_id();
	assert_true(prev > 0);
	for (int i = 0; i < 1000; i++) {
		uint64_t id = shm_next_id();
		assert_true(id > prev);
		prev = id;
	}

	/* Instance-wide: a forked worker continues the same sequence. */
	uint64_t *got = mmap(NULL, 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(got != MAP_FAILED);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shm_attach_worker(1);
		got[0] = shm_next_id();
		got[1] = shm_next_id();
		_exit(0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(got[0] > prev);
	assert_true(got[1] > got[0]);
	assert_true(shm_next_id() > got[1]);
	munmap(got, 2 * sizeof(uint64_t));
}

/* ---- client counts ---- */

static void test_client_take_put(void **state)
{
	(void)state;
	assert_int_equal(shm_clients_total(), 0);
	for (int i = 0; i < 3; i++)
		assert_true(shm_client_take(3));
	assert_false(shm_client_take(3));
	assert_false(shm_client_take(3));
	assert_int_equal(shm_clients_of(0), 3);       /* a refusal counts nothing */
	assert_int_equal(shm_clients_total(), 3);
	assert_false(shm_client_take(2));             /* already over a lower limit */
	assert_int_equal(shm_clients_total(), 3);
	shm_client_put();
	assert_int_equal(shm_clients_total(), 2);
	assert_true(shm_client_take(3));
	assert_false(shm_client_take(3));

	/* No limit. */
	for (int i = 0; i < 50; i++) {
		assert_true(shm_client_take(0));
		assert_true(shm_client_take(-1));
	}
	assert_int_equal(shm_clients_total(), 103);
	for (int i = 0; i < 100; i++)
		shm_client_put();
	assert_int_equal(shm_clients_of(0), 3);
}

static void test_client_columns(void **state)
{
	(void)state;
	shm_attach_worker(1);
	assert_true(shm_client_take(10));
	assert_true(shm_client_take(10));
	shm_attach_worker(3);
	assert_true(shm_client_take(10));
	shm_attach_worker(4);
	for (int i = 0; i < 4; i++)
		assert_true(shm_client_take(0));
	assert_int_equal(shm_clients_of(0), 0);
	assert_int_equal(shm_clients_of(1), 2);
	assert_int_equal(shm_clients_of(2), 0);
	assert_int_equal(shm_clients_of(3), 1);
	assert_int_equal(shm_clients_of(4), 4);
	assert_int_equal(shm_clients_total(), 7);
	assert_int_equal(shm_clients_of(-1), 0);
	assert_int_equal(shm_clients_of(N_WORKERS), 0);

	/* The limit is over the sum of all columns. */
	shm_attach_worker(2);
	assert_false(shm_client_take(7));
	assert_int_equal(shm_clients_of(2), 0);
	assert_true(shm_client_take(8));
	assert_false(shm_client_take(8));
	assert_int_equal(shm_clients_total(), 8);

	/* A put only touches the caller's column. */
	shm_client_put();
	assert_int_equal(shm_clients_of(2), 0);
	assert_int_equal(shm_clients_of(4), 4);

	/* Worker 4 dies: its column goes, the others stay. */
	int idx = shm_name_hold(SHM_DB, "db");
	assert_true(idx >= 0);
	shm_attach_worker(4);
	assert_true(shm_name_take(idx, 0));
	assert_true(shm_name_take(idx, 0));
	shm_attach_worker(1);
	assert_true(shm_name_take(idx, 0));
	shm_worker_reset(4);
	assert_int_equal(shm_clients_of(4), 0);
	assert_int_equal(shm_clients_of(1), 2);
	assert_int_equal(shm_clients_of(3), 1);
	assert_int_equal(shm_clients_total(), 3);
	assert_int_equal(shm_name_total(idx), 1);
	shm_worker_reset(-1);                    /* bad indexes: nothing */
	shm_worker_reset(N_WORKERS);
	assert_int_equal(shm_clients_total(), 3);
	assert_int_equal(shm_name_total(idx), 1);
	/* Room freed by the reset is usable again. */
	shm_attach_worker(4);
	assert_true(shm_client_take(4));
	assert_false(shm_client_take(4));
}

/* ---- named counters ---- */

static void test_name_index(void **state)
{
	(void)state;
	char name[80];
	int a = shm_name_hold(SHM_DB, "alpha");
	int b = shm_name_hold(SHM_DB, "beta");
	int ua = shm_name_hold(SHM_USER, "alpha");
	assert_true(a >= 0 && a < NAMES);
	assert_true(b >= 0 && b < NAMES);
	assert_true(ua >= 0 && ua < NAMES);
	assert_int_not_equal(a, b);
	assert_int_not_equal(a, ua);
	assert_int_not_equal(b, ua);

	/* Stable, also after many other names arrived. */
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "other%d", i);
		int k = shm_name_hold(i % 2 ? SHM_DB : SHM_USER, name);
		assert_true(k >= 0);
		assert_int_not_equal(k, a);
		assert_int_not_equal(k, b);
		assert_int_not_equal(k, ua);
	}
	assert_int_equal(shm_name_hold(SHM_DB, "alpha"), a);
	assert_int_equal(shm_name_hold(SHM_DB, "beta"), b);
	assert_int_equal(shm_name_hold(SHM_USER, "alpha"), ua);
	assert_int_equal(shm_name_hold(SHM_USER, "other0"), shm_name_hold(SHM_USER, "other0"));
	assert_int_not_equal(shm_name_hold(SHM_USER, "other0"), shm_name_hold(SHM_DB, "other0"));
	/* Case matters. */
	assert_int_not_equal(shm_name_hold(SHM_DB, "Alpha"), a);

	/* 63 bytes fit, 64 do not. */
	memset(name, 'n', 63);
	name[63] = 0;
	int k63 = shm_name_hold(SHM_DB, name);
	assert_true(k63 >= 0);
	assert_int_equal(shm_name_hold(SHM_DB, name), k63);
	name[63] = 'n';
	name[64] = 0;
	assert_int_equal(shm_name_hold(SHM_DB, name), -1);
	assert_int_equal(shm_name_hold(SHM_USER, name), -1);
	memset(name, 'z', 79);
	name[79] = 0;
	assert_int_equal(shm_name_hold(SHM_USER, name), -1);
}

static void test_name_take_put(void **state)
{
	(void)state;
	int d = shm_name_hold(SHM_DB, "d");
	int u = shm_name_hold(SHM_USER, "d");
	assert_true(d >= 0 && u >= 0);

	assert_int_equal(shm_name_total(d), 0);
	assert_true(shm_name_take(d, 2));
	assert_true(shm_name_take(d, 2));
	assert_false(shm_name_take(d, 2));
	assert_int_equal(shm_name_total(d), 2);
	assert_int_equal(shm_name_total(u), 0);       /* another counter */
	assert_true(shm_name_take(u, 1));
	assert_false(shm_name_take(u, 1));
	assert_int_equal(shm_name_total(u), 1);

	/* Other workers' cells count against the same limit. */
	shm_attach_worker(2);
	assert_false(shm_name_take(d, 2));
	assert_true(shm_name_take(d, 3));
	assert_false(shm_name_take(d, 3));
	assert_int_equal(shm_name_total(d), 3);
	shm_name_put(d);
	assert_int_equal(shm_name_total(d), 2);
	assert_true(shm_name_take(d, 3));

	/* No limit. */
	for (int i = 0; i < 20; i++)
		assert_true(shm_name_take(d, i % 2 ? 0 : -1));
	assert_int_equal(shm_name_total(d), 23);
	for (int i = 0; i < 21; i++)
		shm_name_put(d);
	assert_int_equal(shm_name_total(d), 2);       /* worker 0's two */

	shm_attach_worker(0);
	shm_name_put(d);
	shm_name_put(d);
	shm_name_put(u);
	assert_int_equal(shm_name_total(d), 0);
	assert_int_equal(shm_name_total(u), 0);
	assert_int_equal(shm_clients_total(), 0);     /* separate from the clients */
}

static void test_names_fill_up(void **state)
{
	(void)state;
	static uint8_t used[NAMES];
	char name[32];
	memset(used, 0, sizeof(used));
	for (int i = 0; i < NAMES; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		int k = shm_name_hold(i % 3 ? SHM_DB : SHM_USER, name);
		assert_true(k >= 0 && k < NAMES);
		assert_int_equal(used[k], 0);
		used[k] = 1;
	}
	/* Full: any new name is refused, of either kind. */
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "late%d", i);
		assert_int_equal(shm_name_hold(SHM_DB, name), -1);
		assert_int_equal(shm_name_hold(SHM_USER, name), -1);
	}
	assert_int_equal(shm_name_hold(SHM_DB, "n0"), -1);   /* n0 is a user name */
	/* The names already in still resolve, and still count. */
	for (int i = 0; i < NAMES; i += 97) {
		snprintf(name, sizeof(name), "n%d", i);
		int k = shm_name_hold(i % 3 ? SHM_DB : SHM_USER, name);
		assert_true(k >= 0);
		assert_int_equal(used[k], 1);
		assert_true(shm_name_take(k, 1));
		assert_false(shm_name_take(k, 1));
		assert_int_equal(shm_name_total(k), 1);
	}
}

/* ---- forked workers racing ---- */

/* Shared between the parent and the children. Each child brackets every
 * shm call that changes its cells, and its own held counts, with seq[w]
 * (odd while inside), so an observer can take a snapshot of all workers at
 * one instant: every seq even and unchanged around the reads. A plain sum of
 * cells read one by one is no snapshot and may add up a slot put back with
 * one taken later. held[] counts takes that succeeded and were not put back. */
struct race {
	_Atomic int go;
	_Atomic unsigned seq[N_WORKERS];
	_Atomic int held[N_WORKERS];
	_Atomic int name_held[N_WORKERS];
	_Atomic int violations[N_WORKERS];
	_Atomic int taken[N_WORKERS];
	_Atomic int refused[N_WORKERS];
	_Atomic int name_refused[N_WORKERS];
	_Atomic int snaps[N_WORKERS];
	_Atomic int shared_idx[N_WORKERS];    /* -2 until known */
	int name_idx[N_WORKERS][RACE_NAMES];
	int own_idx[N_WORKERS][OWN_NAMES];
};

struct snap {
	int held, name_held;      /* as the children recorded them */
	int clients, names;       /* as shm counts them */
};

static int sum_of(_Atomic int *v)
{
	int n = 0;
	for (int w = 0; w < N_WORKERS; w++)
		n += atomic_load(&v[w]);
	return n;
}

/* One consistent look at every worker; false when none was had in
 * SNAP_TRIES attempts. idx < 0: names not looked at. */
static bool snapshot(struct race *r, int idx, struct snap *s)
{
	unsigned before[N_WORKERS];
	for (int t = 0; t < SNAP_TRIES; t++) {
		bool ok = true;
		for (int w = 0; w < N_WORKERS && ok; w++) {
			before[w] = atomic_load(&r->seq[w]);
			ok = (before[w] & 1) == 0;
		}
		if (!ok)
			continue;
		s->held = s->name_held = 0;
		for (int w = 0; w < N_WORKERS; w++) {
			s->held += atomic_load(&r->held[w]);
			s->name_held += atomic_load(&r->name_held[w]);
		}
		s->clients = shm_clients_total();
		s->names = idx >= 0 ? shm_name_total(idx) : 0;
		for (int w = 0; w < N_WORKERS && ok; w++)
			ok = atomic_load(&r->seq[w]) == before[w];
		if (ok)
			return true;
	}
	return false;
}

/* What must hold in any snapshot: nothing is half done, so shm counts
 * exactly what the children hold, and that is within the limits. */
static bool snap_ok(const struct snap *s, int idx)
{
	return s->held <= CLIENT_LIMIT && s->clients == s->held && s->name_held <= NAME_LIMIT &&
	       (idx < 0 || s->names == s->name_held);
}

static void race_name(char *buf, size_t len, int i)
{
	snprintf(buf, len, "race-%d", i);
}

static void own_name(char *buf, size_t len, int w, int i)
{
	snprintf(buf, len, "w%d-%d", w, i);
}

/* After a successful take: look at everyone, count what is wrong. */
static void child_check(struct race *r, int w, int idx)
{
	struct snap s;
	if (!snapshot(r, idx, &s))
		return;
	atomic_fetch_add(&r->snaps[w], 1);
	if (!snap_ok(&s, idx))
		atomic_fetch_add(&r->violations[w], 1);
}

/* A child: worker w. Returns its exit status; no cmocka calls here. */
static int race_child(struct race *r, int w)
{
	char name[32];
	unsigned x = 2463534242u + (unsigned)w * 7919u;
	int mine = 0, mine_names = 0;

	shm_attach_worker(w);
	for (int s = 0; s < GO_SPINS && !atomic_load(&r->go); s++)
		sched_yield();

	/* Every child registers the same names at the same time, then names
	 * of its own that race with the others' for free slots. */
	for (int j = 0; j < RACE_NAMES; j++) {
		race_name(name, sizeof(name), j);
		r->name_idx[w][j] = shm_name_hold(SHM_USER, name);
	}
	for (int j = 0; j < OWN_NAMES; j++) {
		own_name(name, sizeof(name), w, j);
		r->own_idx[w][j] = shm_name_hold(j % 2 ? SHM_DB : SHM_USER, name);
	}
	int idx = shm_name_hold(SHM_DB, "race-shared");
	atomic_store(&r->shared_idx[w], idx);
	if (idx < 0)
		return 3;

	for (int it = 0; it < CHILD_ITERS; it++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		/* Take twice as often as put, so the limits are hit. */
		if (x % 3 != 0 && mine < CLIENT_LIMIT + 2) {
			atomic_fetch_add(&r->seq[w], 1);
			bool ok = shm_client_take(CLIENT_LIMIT);
			if (ok)
				atomic_fetch_add(&r->held[w], 1);
			atomic_fetch_add(&r->seq[w], 1);
			if (ok) {
				mine++;
				atomic_fetch_add(&r->taken[w], 1);
				if (shm_clients_of(w) != mine)
					atomic_fetch_add(&r->violations[w], 1);
				child_check(r, w, idx);
			} else {
				atomic_fetch_add(&r->refused[w], 1);
			}
		} else if (mine > 0) {
			atomic_fetch_add(&r->seq[w], 1);
			atomic_fetch_sub(&r->held[w], 1);
			shm_client_put();
			atomic_fetch_add(&r->seq[w], 1);
			mine--;
		}
		if ((x >> 8) % 3 != 0 && mine_names < NAME_LIMIT + 2) {
			atomic_fetch_add(&r->seq[w], 1);
			bool ok = shm_name_take(idx, NAME_LIMIT);
			if (ok)
				atomic_fetch_add(&r->name_held[w], 1);
			atomic_fetch_add(&r->seq[w], 1);
			if (ok) {
				mine_names++;
				child_check(r, w, idx);
			} else {
				atomic_fetch_add(&r->name_refused[w], 1);
			}
		} else if (mine_names > 0) {
			atomic_fetch_add(&r->seq[w], 1);
			atomic_fetch_sub(&r->name_held[w], 1);
			shm_name_put(idx);
			atomic_fetch_add(&r->seq[w], 1);
			mine_names--;
		}
	}
	atomic_fetch_add(&r->seq[w], 1);
	for (; mine > 0; mine--) {
		atomic_fetch_sub(&r->held[w], 1);
		shm_client_put();
	}
	for (; mine_names > 0; mine_names--) {
		atomic_fetch_sub(&r->name_held[w], 1);
		shm_name_put(idx);
	}
	atomic_fetch_add(&r->seq[w], 1);
	return atomic_load(&r->violations[w]) ? 1 : 0;
}

static void test_race_limits(void **state)
{
	(void)state;
	struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(r != MAP_FAILED);
	pid_t pids[N_CHILDREN + 1] = { 0 };
	bool reaped[N_CHILDREN + 1] = { false };
	int status[N_CHILDREN + 1] = { 0 };
	int forked = 0;

	for (int w = 0; w < N_WORKERS; w++)
		atomic_store(&r->shared_idx[w], -2);
	fflush(stdout);
	fflush(stderr);
	for (int w = 1; w <= N_CHILDREN; w++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(race_child(r, w));
		if (pid < 0)
			break;
		pids[w] = pid;
		forked++;
	}
	atomic_store(&r->go, 1);

	/* Watch while they run. */
	int max_held = 0, max_name_held = 0, bad = 0;
	long looks = 0, busy = 0;
	int running = forked;
	int idx = -1;
	for (long turn = 0; turn < WATCH_TURNS && running > 0; turn++) {
		for (int w = 1; idx < 0 && w <= N_CHILDREN; w++)
			idx = atomic_load(&r->shared_idx[w]);
		struct snap s;
		if (snapshot(r, idx, &s)) {
			looks++;
			busy += s.held > 0;
			if (!snap_ok(&s, idx))
				bad++;
			if (s.held > max_held)
				max_held = s.held;
			if (s.name_held > max_name_held)
				max_name_held = s.name_held;
		}
		if (turn % 256 == 0) {
			for (int w = 1; w <= N_CHILDREN; w++) {
				if (pids[w] > 0 && !reaped[w] && waitpid(pids[w], &status[w], WNOHANG) == pids[w]) {
					reaped[w] = true;
					running--;
				}
			}
		}
	}
	for (int w = 1; w <= N_CHILDREN; w++) {
		if (pids[w] > 0 && !reaped[w]) {
			assert_int_equal(waitpid(pids[w], &status[w], 0), pids[w]);
			reaped[w] = true;
		}
	}
	print_message("parent: %ld snapshots, %ld busy, held max %d/%d, names held max %d/%d\n",
		      looks, busy, max_held, CLIENT_LIMIT, max_name_held, NAME_LIMIT);
	assert_int_equal(forked, N_CHILDREN);

	for (int w = 1; w <= N_CHILDREN; w++) {
		print_message("worker %d: taken %d refused %d name refused %d snapshots %d violations %d\n",
			      w, atomic_load(&r->taken[w]), atomic_load(&r->refused[w]),
			      atomic_load(&r->name_refused[w]), atomic_load(&r->snaps[w]),
			      atomic_load(&r->violations[w]));
		assert_true(WIFEXITED(status[w]));
		assert_int_equal(WEXITSTATUS(status[w]), 0);
		assert_int_equal(atomic_load(&r->violations[w]), 0);
		assert_true(atomic_load(&r->refused[w]) > 0);      /* the limit was reached */
		assert_true(atomic_load(&r->name_refused[w]) > 0);
		assert_int_equal(shm_clients_of(w), 0);              /* all put back */
	}
	assert_int_equal(bad, 0);
	assert_true(max_held <= CLIENT_LIMIT);
	assert_true(max_name_held <= NAME_LIMIT);
	/* One worker may be starved by the others, not all of them. */
	assert_true(sum_of(r->taken) > 0);
	assert_true(sum_of(r->snaps) > 0);
	assert_int_equal(shm_clients_total(), 0);

	/* Every child found the same index for every shared name, and so do
	 * we; no two names share an index. */
	char name[32];
	static uint8_t used[NAMES];
	memset(used, 0, sizeof(used));
	idx = shm_name_hold(SHM_DB, "race-shared");
	assert_true(idx >= 0);
	assert_int_equal(shm_name_total(idx), 0);
	used[idx] = 1;
	for (int j = 0; j < RACE_NAMES; j++) {
		race_name(name, sizeof(name), j);
		int k = shm_name_hold(SHM_USER, name);
		assert_true(k >= 0);
		assert_int_equal(used[k], 0);
		used[k] = 1;
		for (int w = 1; w <= N_CHILDREN; w++)
			assert_int_equal(r->name_idx[w][j], k);
	}
	for (int w = 1; w <= N_CHILDREN; w++) {
		for (int j = 0; j < OWN_NAMES; j++) {
			own_name(name, sizeof(name), w, j);
			int k = shm_name_hold(j % 2 ? SHM_DB : SHM_USER, name);
			assert_true(k >= 0);
			assert_int_equal(r->own_idx[w][j], k);
			assert_int_equal(used[k], 0);
			used[k] = 1;
		}
	}
	for (int w = 1; w <= N_CHILDREN; w++)
		assert_int_equal(atomic_load(&r->shared_idx[w]), idx);
	munmap(r, sizeof(*r));
}

/* A worker that dies holding clients: the supervisor zeroes its column. */
static void test_dead_worker_reset(void **state)
{
	(void)state;
	int idx = shm_name_hold(SHM_USER, "u");
	assert_true(idx >= 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shm_attach_worker(3);
		bool ok = shm_client_take(3) && shm_client_take(3) && shm_name_take(idx, 0);
		_exit(ok ? 0 : 1);          /* without putting anything back */
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(shm_clients_of(3), 2);
	assert_int_equal(shm_clients_total(), 2);
	assert_int_equal(shm_name_total(idx), 1);
	assert_true(shm_client_take(3));
	assert_false(shm_client_take(3));
	shm_worker_reset(3);
	assert_int_equal(shm_clients_of(3), 0);
	assert_int_equal(shm_clients_total(), 1);
	assert_int_equal(shm_name_total(idx), 0);
	assert_true(shm_client_take(3));
	assert_true(shm_client_take(3));
	assert_false(shm_client_take(3));
}

/* Names come and go (rotating roles): a name's slot is freed when the
 * last worker holding it lets go, or when that worker dies, and the next
 * name to take it starts from zero (counts, statistics, host state), with
 * another generation; readers see the new name. */
static void test_name_release_reuse(void **state)
{
	(void)state;
	char name[64];
	uint32_t gen1 = 0, gen2 = 0;
	uint64_t d[SHM_STATS] = { 5 }, t[SHM_STATS];
	int a = shm_name_hold(SHM_USER, "tenant_a");
	assert_true(shm_name_take(a, 0));
	shm_stats_add(a, d);
	shm_host_set(a, 3);
	assert_int_equal(shm_name_servers(a), 0);
	shm_name_servers_set(a, 40);                      /* the supervisor's count */
	assert_int_equal(shm_name_servers(a), 40);
	assert_true(shm_name_at(a, SHM_USER, name, sizeof(name), &gen1));
	assert_string_equal(name, "tenant_a");
	shm_attach_worker(2);
	assert_int_equal(shm_name_hold(SHM_USER, "tenant_a"), a);   /* another worker: the same */
	shm_attach_worker(0);
	shm_name_put(a);
	shm_name_release(a);
	assert_true(shm_name_at(a, SHM_USER, name, sizeof(name), NULL));   /* worker 2 holds it */
	assert_int_equal(shm_names_used(), 1);
	shm_worker_reset(2);                                          /* worker 2 dies */
	assert_false(shm_name_at(a, SHM_USER, name, sizeof(name), NULL));
	assert_int_equal(shm_names_used(), 0);

	int b = shm_name_hold(SHM_DB, "tenant_b");
	assert_int_equal(b, a);                                       /* the freed slot */
	assert_true(shm_name_at(b, SHM_DB, name, sizeof(name), &gen2));
	assert_string_equal(name, "tenant_b");
	assert_int_not_equal(gen2, gen1);
	assert_false(shm_name_at(b, SHM_USER, name, sizeof(name), NULL));
	assert_int_equal(shm_name_total(b), 0);
	shm_stats_total(b, t);
	assert_int_equal(t[0], 0);
	assert_int_equal(shm_host(b, 0), 0);
	assert_int_equal(shm_name_servers(b), 0);         /* not tenant_a's 40 */
	assert_int_equal(shm_name_servers(-1), 0);
	shm_name_servers_set(-1, 5);                      /* a name no worker holds: nothing */
	assert_int_equal(shm_names_high(), 1);

	/* 100,000 names through a table of NAMES: never full. */
	for (int i = 0; i < 100000; i++) {
		snprintf(name, sizeof(name), "rotating_%d", i);
		int k = shm_name_hold(SHM_USER, name);
		assert_true(k >= 0);
		shm_name_release(k);
	}
	assert_int_equal(shm_names_used(), 1);
	assert_true(shm_names_high() <= 2);
}

/* A host name's address cursor is one for all workers, per host. */
static void test_addr_next(void **state)
{
	(void)state;
	int idx = shm_name_hold(SHM_DB, "fleet");
	assert_true(idx >= 0);
	assert_int_equal(shm_addr_next(idx, 0, 1), 0);
	assert_int_equal(shm_addr_next(idx, 0, 1), 1);
	assert_int_equal(shm_addr_next(idx, 0, 0), 2);
	assert_int_equal(shm_addr_next(idx, 1, 0), 0);         /* another host's own */
	shm_addr_next_set(idx, 1, 5);
	assert_int_equal(shm_addr_next(idx, 1, 0), 5);
	assert_int_equal(shm_addr_next(idx, 0, 0), 2);
	assert_int_equal(shm_addr_next(idx, SHM_HOSTS, 1), -1);  /* past the kept hosts */
	assert_int_equal(shm_addr_next(-1, 0, 1), -1);
}

/* The console's database state (shm.h): KILL's choice of the databases
 * used since their last KILL, made once whatever worker asks; a pause
 * held per worker, seen by every worker, let go when the pausing worker's
 * copy goes or the worker dies. */
static void test_db_console_state(void **state)
{
	(void)state;
	int a = shm_name_hold(SHM_DB, "a"), b = shm_name_hold(SHM_DB, "b");
	int u = shm_name_hold(SHM_USER, "a");
	assert_true(a >= 0 && b >= 0 && u >= 0);
	shm_attach_worker(2);
	assert_int_equal(shm_name_hold(SHM_DB, "a"), a);
	shm_db_set_pooled(a);                  /* a client of worker 2 used a */
	shm_attach_worker(0);
	shm_db_mark_kill();                    /* KILL, asked in worker 0 */
	assert_true(shm_db_kill_marked(a));
	assert_false(shm_db_kill_marked(b));
	assert_false(shm_db_kill_marked(u));
	shm_db_mark_kill();                    /* KILL again: nothing used since */
	assert_false(shm_db_kill_marked(a));
	shm_db_set_pooled(b);
	shm_db_unpool("b");                    /* KILL b */
	shm_db_unpool("nosuch");
	shm_db_mark_kill();
	assert_false(shm_db_kill_marked(b));

	assert_int_equal(shm_db_count_paused(), 0);
	shm_attach_worker(2);
	shm_db_set_paused(a, true);
	shm_attach_worker(0);
	assert_true(shm_db_paused(a));         /* seen from worker 0, which lacks it */
	assert_int_equal(shm_db_count_paused(), 1);
	shm_db_set_paused(a, true);
	shm_db_set_paused(a, false);           /* worker 0's copy resumed or dropped */
	assert_true(shm_db_paused(a));
	shm_worker_reset(2);                   /* worker 2 dies */
	assert_false(shm_db_paused(a));
	assert_int_equal(shm_db_count_paused(), 0);
	shm_db_set_paused(b, true);
	assert_int_equal(shm_db_count_paused(), 1);
	shm_db_set_paused(b, false);
	assert_int_equal(shm_db_count_paused(), 0);
	shm_db_set_paused(-1, true);
	assert_false(shm_db_paused(-1));
}

/* ---- eviction claims ---- */

static void test_evict_claims(void **state)
{
	(void)state;
	uint32_t base;
	int d = shm_name_hold(SHM_DB, "d");
	int u = shm_name_hold(SHM_USER, "d");
	assert_true(d >= 0 && u >= 0);
	assert_false(shm_evict_claim(d));             /* nothing offered */
	assert_int_equal(shm_evict_on_way(d, &base), 0);
	shm_evict_offer(d, base, 3);
	assert_int_equal(shm_evict_open(d), 3);
	assert_int_equal(shm_evict_open(u), 0);       /* the user's slot is another */
	assert_false(shm_evict_claim(u));
	shm_attach_worker(2);                          /* any worker claims */
	assert_true(shm_evict_claim(d));
	shm_attach_worker(0);
	assert_true(shm_evict_claim(d));
	assert_true(shm_evict_claim(d));
	assert_false(shm_evict_claim(d));             /* three offered, three claimed */
	assert_int_equal(shm_evict_open(d), 0);

	/* Claimed closes are on their way until their slots come back. */
	assert_int_equal(shm_evict_on_way(d, &base), 3);
	shm_evict_heard(d);
	shm_evict_heard(d);
	assert_int_equal(shm_evict_on_way(d, &base), 1);
	shm_evict_offer(d, base, 2);
	assert_int_equal(shm_evict_open(d), 2);
	/* A claim between the supervisor's look and its offer counts
	 * against the offer. */
	assert_int_equal(shm_evict_on_way(d, &base), 1);
	assert_true(shm_evict_claim(d));
	shm_evict_offer(d, base, 2);
	assert_int_equal(shm_evict_open(d), 1);
	/* Taken back, claimed or not. */
	assert_int_equal(shm_evict_on_way(d, &base), 2);
	shm_evict_offer(d, base, 0);
	assert_int_equal(shm_evict_open(d), 0);
	assert_false(shm_evict_claim(d));
	shm_evict_offer(d, base - 1, 0);               /* an older look: nothing claimed undone */
	assert_int_equal(shm_evict_open(d), 0);
	assert_int_equal(shm_evict_on_way(d, &base), 2);

	/* A dead worker's claimed closes never come back: all count as done,
	 * and a live worker's heard afterwards is absorbed. */
	shm_worker_reset(3);
	assert_int_equal(shm_evict_on_way(d, &base), 0);
	shm_evict_heard(d);
	assert_int_equal(shm_evict_on_way(d, &base), 0);
	shm_evict_offer(d, base, 1);
	assert_true(shm_evict_claim(d));
	assert_int_equal(shm_evict_on_way(d, &base), 1);

	/* A slot let go of and taken by another name starts with none. */
	shm_evict_offer(d, base, 4);
	shm_name_release(d);
	int e = shm_name_hold(SHM_DB, "e");
	assert_int_equal(e, d);
	assert_int_equal(shm_evict_open(e), 0);
	assert_int_equal(shm_evict_on_way(e, &base), 0);
	assert_false(shm_evict_claim(e));

	/* No slot (the table full, no shared memory): nothing, no crash. */
	assert_int_equal(shm_evict_on_way(-1, &base), 0);
	shm_evict_offer(-1, 0, 5);
	shm_evict_heard(-1);
	assert_false(shm_evict_claim(-1));
	assert_int_equal(shm_evict_open(-1), 0);
}

/* Forked workers claim while the parent, as the supervisor, hears of
 * their claims and offers again and again: never more closes on their way
 * than the need, every offer claimed once. */
#define EVICT_NEED 3
#define EVICT_ROUNDS 200000L
/* Beside busy loops the children may not run at all in EVICT_ROUNDS: the
 * offers go on (yielding now and then) until one has claimed, bounded. */
#define EVICT_ROUNDS_MAX (50 * EVICT_ROUNDS)

struct claim_race {
	_Atomic int go, stop;
	_Atomic long claims[N_WORKERS];
};

static int claim_child(struct claim_race *r, int w)
{
	shm_attach_worker(w);
	int idx = shm_name_find(SHM_DB, "busy");
	for (long spin = 0; !atomic_load(&r->go) && spin < GO_SPINS; spin++)
		sched_yield();
	while (!atomic_load(&r->stop))
		if (shm_evict_claim(idx))
			atomic_fetch_add(&r->claims[w], 1);
	return 0;
}

static long claims_sum(struct claim_race *r)
{
	long n = 0;
	for (int w = 0; w < N_WORKERS; w++)
		n += atomic_load(&r->claims[w]);
	return n;
}

static void test_race_evict_claims(void **state)
{
	(void)state;
	struct claim_race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(r != MAP_FAILED);
	int idx = shm_name_hold(SHM_DB, "busy");
	assert_true(idx >= 0);
	pid_t pids[N_CHILDREN + 1] = { 0 };
	fflush(stdout);
	fflush(stderr);
	for (int w = 1; w <= N_CHILDREN; w++) {
		pids[w] = fork();
		assert_true(pids[w] >= 0);
		if (pids[w] == 0)
			_exit(claim_child(r, w));
	}
	atomic_store(&r->go, 1);
	long heard = 0, over = 0;
	uint32_t base;
	long i;
	for (i = 0; i < EVICT_ROUNDS || (claims_sum(r) == 0 && i < EVICT_ROUNDS_MAX); i++) {
		if (i % 1000 == 999)
			sched_yield();
		long seen = claims_sum(r);
		for (; heard < seen; heard++)
			shm_evict_heard(idx);
		int on_way = shm_evict_on_way(idx, &base);
		int need = i % 7 == 0 ? 0 : EVICT_NEED - on_way;
		shm_evict_offer(idx, base, need);
		/* Offered or on their way: the need at most, however the
		 * claims fall between the reads. */
		over += claims_sum(r) - heard > EVICT_NEED;
	}
	(void)shm_evict_on_way(idx, &base);
	shm_evict_offer(idx, base, 0);
	atomic_store(&r->stop, 1);
	for (int w = 1; w <= N_CHILDREN; w++) {
		int st = 0;
		assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	print_message("claims %ld in %ld offers\n", claims_sum(r), i);
	assert_int_equal(over, 0);
	assert_true(claims_sum(r) > 0);
	assert_int_equal(shm_evict_open(idx), 0);
	munmap(r, sizeof(*r));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_create_destroy, teardown),
		T(test_ids_increase),
		T(test_client_take_put),
		T(test_client_columns),
		T(test_name_index),
		T(test_name_take_put),
		T(test_names_fill_up),
		T(test_race_limits),
		T(test_dead_worker_reset),
		T(test_name_release_reuse),
		T(test_addr_next),
		T(test_db_console_state),
		T(test_evict_claims),
		T(test_race_evict_claims),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

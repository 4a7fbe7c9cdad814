/* pgcrew — latency histograms in one anonymous shared mapping made by the
 * supervisor before the first fork (see hist.h). Cells are laid out worker
 * by worker, so a worker's writes stay in its own cache lines; a pool's slot
 * is claimed by name with a CAS, as shm.c does for database names. */
#include "hist.h"
#include "log.h"
#include "util.h"

#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>

#define NAME_LEN 64

const uint64_t hist_bounds_us[HIST_BOUNDS] = {
	50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000,
};

static const char *const phase_names[] = {
	[HIST_PHASE_STARTUP] = "startup", [HIST_PHASE_TLS] = "tls",
	[HIST_PHASE_AUTH] = "auth", [HIST_PHASE_SERVER_LOGIN] = "server_login",
	[HIST_PHASE_SERVER_MOVE] = "server_move",
};
_Static_assert(ARRAY_SIZE(phase_names) == HIST_PHASES, "phase names");

enum { SLOT_EMPTY, SLOT_WRITING, SLOT_READY };

struct pool_slot {
	_Atomic int state;
	char db[NAME_LEN];
	char user[NAME_LEN];
};

struct worker_cells {               /* one worker's part of the mapping */
	struct hist phase[HIST_PHASES];
	struct hist_pool_cell pools[HIST_POOLS];
};

struct hist_head {
	int n_workers;
	struct pool_slot slots[HIST_POOLS];
	/* followed by struct worker_cells[n_workers] */
};

static struct hist_head *head;
static struct worker_cells *cells;
static size_t map_len;
static int self = -1;

int hist_create(int n_workers)
{
	if (n_workers < 1)
		return -1;
	size_t head_len = (sizeof(*head) + 127) & ~(size_t)127;
	map_len = head_len + sizeof(struct worker_cells) * (size_t)n_workers;
	void *p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	head = p;                   /* zeroed pages; untouched ones cost nothing */
	head->n_workers = n_workers;
	cells = (struct worker_cells *)((char *)p + head_len);
	return 0;
}

void hist_destroy(void)
{
	if (head)
		munmap(head, map_len);
	head = NULL;
	cells = NULL;
}

void hist_attach_worker(int w)
{
	self = head && w >= 0 && w < head->n_workers ? w : -1;
}

static uint32_t hash_pool(const char *db, const char *user)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)db; *p; p++)
		h = (h ^ *p) * 16777619u;
	h = (h ^ 0xff) * 16777619u;
	for (const unsigned char *p = (const unsigned char *)user; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

/* Claim or find the slot of (db, user); -1 when the table is full (or,
 * without claim, when the pool has none). */
static int pool_index(const char *db, const char *user, bool claim)
{
	uint32_t h = hash_pool(db, user);
	for (int probe = 0; probe < HIST_POOLS; probe++) {
		struct pool_slot *s = &head->slots[(h + (uint32_t)probe) % HIST_POOLS];
		int st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (st == SLOT_EMPTY && !claim)
			return -1;
		if (st == SLOT_EMPTY) {
			int expect = SLOT_EMPTY;
			if (atomic_compare_exchange_strong(&s->state, &expect, SLOT_WRITING)) {
				strcpy(s->db, db);
				strcpy(s->user, user);
				atomic_store_explicit(&s->state, SLOT_READY, memory_order_release);
				return (int)(s - head->slots);
			}
			st = expect;
		}
		/* Another process is writing the names: a few stores, wait. */
		while (st == SLOT_WRITING) {
			sched_yield();
			st = atomic_load_explicit(&s->state, memory_order_acquire);
		}
		if (strcmp(s->db, db) == 0 && strcmp(s->user, user) == 0)
			return (int)(s - head->slots);
	}
	return -1;
}

struct hist_pool_cell *hist_pool_cell(const char *db, const char *user)
{
	static bool warned;
	if (!head || self < 0 || strlen(db) >= NAME_LEN || strlen(user) >= NAME_LEN)
		return NULL;
	int idx = pool_index(db, user, true);
	if (idx < 0) {
		if (!warned)
			log_warning("histograms: more than %d pools, pool=%s/%s not counted", HIST_POOLS, db, user);
		warned = true;
		return NULL;
	}
	return &cells[self].pools[idx];
}

void hist_pool_set_wait(struct hist_pool_cell *cell, usec_t since)
{
	if (cell)
		atomic_store_explicit(&cell->wait_since, since, memory_order_relaxed);
}

/* The other workers' times of a pool (their wait lines, or their next
 * idle servers): the oldest or the newest, 0 for none. */
enum cell_time { CELL_WAIT_SINCE, CELL_IDLE_NEXT };

static usec_t elsewhere(const struct hist_pool_cell *cell, enum cell_time f, bool newest)
{
	usec_t best = 0;
	if (!cell || !head || self < 0)
		return 0;
	ptrdiff_t idx = cell - cells[self].pools;
	for (int w = 0; w < head->n_workers; w++) {
		const struct hist_pool_cell *o = &cells[w].pools[idx];
		usec_t t = w == self ? 0 : atomic_load_explicit(f == CELL_WAIT_SINCE ? &o->wait_since : &o->idle_next,
							       memory_order_relaxed);
		if (t && (!best || (newest ? t > best : t < best)))
			best = t;
	}
	return best;
}

usec_t hist_pool_wait_elsewhere(const struct hist_pool_cell *cell)
{
	return elsewhere(cell, CELL_WAIT_SINCE, false);
}

bool hist_pool_waits(const char *db, const char *user, usec_t *since, int n)
{
	int idx = head && strlen(db) < NAME_LEN && strlen(user) < NAME_LEN ? pool_index(db, user, false) : -1;
	for (int w = 0; w < n; w++)
		since[w] = idx >= 0 && w < head->n_workers ?
			atomic_load_explicit(&cells[w].pools[idx].wait_since, memory_order_relaxed) : 0;
	return idx >= 0;
}

usec_t hist_pool_wait_of(const char *db, const char *user, int w)
{
	int idx = head && strlen(db) < NAME_LEN && strlen(user) < NAME_LEN ? pool_index(db, user, false) : -1;
	if (idx < 0 || w < 0 || w >= head->n_workers)
		return 0;
	return atomic_load_explicit(&cells[w].pools[idx].wait_since, memory_order_relaxed);
}

void hist_clear_waits(int w)
{
	if (!head || w < 0 || w >= head->n_workers)
		return;
	for (int i = 0; i < HIST_POOLS; i++) {
		atomic_store_explicit(&cells[w].pools[i].wait_since, 0, memory_order_relaxed);
		atomic_store_explicit(&cells[w].pools[i].idle, 0, memory_order_relaxed);
		atomic_store_explicit(&cells[w].pools[i].clients, 0, memory_order_relaxed);
		atomic_store_explicit(&cells[w].pools[i].idle_next, 0, memory_order_relaxed);
	}
}

void hist_pool_set_idle(struct hist_pool_cell *cell, int n)
{
	if (cell)
		atomic_store_explicit(&cell->idle, n, memory_order_relaxed);
}

bool hist_pool_idle_elsewhere(const char *db, const char *user, int except)
{
	int idx = head && strlen(db) < NAME_LEN && strlen(user) < NAME_LEN ? pool_index(db, user, false) : -1;
	for (int w = 0; idx >= 0 && w < head->n_workers; w++)
		if (w != except && atomic_load_explicit(&cells[w].pools[idx].idle, memory_order_relaxed) > 0)
			return true;
	return false;
}

void hist_pool_set_use(struct hist_pool_cell *cell, int clients, usec_t last_used)
{
	if (!cell)
		return;
	atomic_store_explicit(&cell->clients, clients, memory_order_relaxed);
	atomic_store_explicit(&cell->last_used, last_used, memory_order_relaxed);
}

/* The other workers' clients of a pool (-1: no cell) and, in *last_used
 * when asked, the latest time one of them had a client come or go. */
static int others_use(const struct hist_pool_cell *cell, usec_t *last_used)
{
	int n = 0;
	if (last_used)
		*last_used = 0;
	if (!cell || !head || self < 0)
		return -1;
	ptrdiff_t idx = cell - cells[self].pools;
	for (int w = 0; w < head->n_workers; w++) {
		if (w == self)
			continue;
		const struct hist_pool_cell *o = &cells[w].pools[idx];
		n += atomic_load_explicit(&o->clients, memory_order_relaxed);
		usec_t t = atomic_load_explicit(&o->last_used, memory_order_relaxed);
		if (last_used && t > *last_used)
			*last_used = t;
	}
	return n;
}

bool hist_pool_used_elsewhere(const struct hist_pool_cell *cell, usec_t *last_used)
{
	return others_use(cell, last_used) > 0;
}

int hist_pool_clients_all(const struct hist_pool_cell *cell)
{
	int n = others_use(cell, NULL);
	return n < 0 ? -1 : n + atomic_load_explicit(&cell->clients, memory_order_relaxed);
}

void hist_pool_set_next(struct hist_pool_cell *cell, usec_t last_used)
{
	if (cell)
		atomic_store_explicit(&cell->idle_next, last_used, memory_order_relaxed);
}

usec_t hist_pool_next_elsewhere(const struct hist_pool_cell *cell, bool newest)
{
	return elsewhere(cell, CELL_IDLE_NEXT, newest);
}

void hist_phase_observe(enum hist_phase ph, uint64_t us)
{
	if (head && self >= 0)
		hist_observe(&cells[self].phase[ph], us);
}

static void add_total(const struct hist *h, struct hist_total *out)
{
	for (int i = 0; i <= HIST_BOUNDS; i++)
		out->n[i] += atomic_load_explicit(&h->n[i], memory_order_relaxed);
	out->sum_us += atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

void hist_pool_total(int idx, enum hist_pool_kind k, struct hist_total *out)
{
	memset(out, 0, sizeof(*out));
	if (!head || idx < 0 || idx >= HIST_POOLS)
		return;
	for (int w = 0; w < head->n_workers; w++)
		add_total(&cells[w].pools[idx].h[k], out);
}

void hist_phase_total(enum hist_phase ph, struct hist_total *out)
{
	memset(out, 0, sizeof(*out));
	if (!head)
		return;
	for (int w = 0; w < head->n_workers; w++)
		add_total(&cells[w].phase[ph], out);
}

bool hist_pool_at(int idx, char *db, size_t dblen, char *user, size_t userlen)
{
	if (!head || idx < 0 || idx >= HIST_POOLS)
		return false;
	struct pool_slot *s = &head->slots[idx];
	if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_READY)
		return false;
	snprintf(db, dblen, "%s", s->db);
	snprintf(user, userlen, "%s", s->user);
	return true;
}

const char *hist_phase_name(enum hist_phase ph)
{
	return (unsigned)ph < HIST_PHASES ? phase_names[ph] : "?";
}

/* pgcrew — latency histograms in one anonymous shared mapping made by the
 * supervisor before the first fork (see hist.h). Cells are laid out worker
 * by worker, so a worker's writes stay in its own cache lines; a pool's slot
 * comes from the shared table (shtab.h): held by every worker that has the
 * pool, freed and reused when none has it. */
#include "hist.h"
#include "log.h"
#include "shtab.h"
#include "util.h"

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
	[HIST_PHASE_SERVER_MOVE] = "server_move", [HIST_PHASE_SLOT_WAIT] = "slot_wait",
};
_Static_assert(ARRAY_SIZE(phase_names) == HIST_PHASES, "phase names");

struct hist_head {
	int n_workers;
	uint32_t max_pools;
	size_t tab_off, phase_off, pools_off;
	/* the pool table (shtab), then struct hist phase[n_workers][HIST_PHASES],
	 * then struct hist_pool_cell pools[n_workers][max_pools]: a worker's
	 * cells together, so its writes stay in its own cache lines */
};

static struct hist_head *head;
static size_t map_len;
static int self = -1;

static size_t round_up(size_t n)
{
	return (n + 127) & ~(size_t)127;
}

static struct shtab *tab(void)
{
	return (struct shtab *)((char *)head + head->tab_off);
}

static struct hist *phases(int w)
{
	return (struct hist *)((char *)head + head->phase_off) + (size_t)w * HIST_PHASES;
}

static struct hist_pool_cell *pool_cells(int w)
{
	return (struct hist_pool_cell *)((char *)head + head->pools_off) + (size_t)w * head->max_pools;
}

int hist_create(int n_workers, uint32_t max_pools)
{
	if (n_workers < 1 || max_pools < 1)
		return -1;
	size_t tab_off = round_up(sizeof(*head));
	size_t phase_off = tab_off + round_up(shtab_size(max_pools));
	size_t pools_off = phase_off + round_up(sizeof(struct hist) * HIST_PHASES * (size_t)n_workers);
	size_t len = pools_off + sizeof(struct hist_pool_cell) * max_pools * (size_t)n_workers;
	/* Pages no pool has touched cost nothing: reserve no swap for them. */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	head = p;                   /* zeroed pages */
	map_len = len;
	head->n_workers = n_workers;
	head->max_pools = max_pools;
	head->tab_off = tab_off;
	head->phase_off = phase_off;
	head->pools_off = pools_off;
	if (shtab_init(tab(), max_pools) < 0) {
		hist_destroy();
		return -1;
	}
	return 0;
}

void hist_destroy(void)
{
	if (head) {
		shtab_destroy(tab());
		munmap(head, map_len);
	}
	head = NULL;
}

void hist_attach_worker(int w)
{
	self = head && w >= 0 && w < head->n_workers ? w : -1;
}

/* "db\0user\0": no two pairs make the same key. */
static size_t pool_key(char *key, const char *db, const char *user)
{
	size_t dl = strlen(db), ul = strlen(user);
	if (dl >= NAME_LEN || ul >= NAME_LEN)
		return 0;
	memcpy(key, db, dl + 1);
	memcpy(key + dl + 1, user, ul + 1);
	return dl + ul + 2;
}

static int find_pool(const char *db, const char *user)
{
	char key[2 * NAME_LEN];
	size_t len = head ? pool_key(key, db, user) : 0;
	return len ? shtab_find(tab(), key, len) : -1;
}

/* A pool's slot taken afresh: every worker's cells start from zero (the
 * last holders' counts went with it). Under the table's lock. */
static void clear_slot(int i, void *arg)
{
	bool *fresh = arg;
	for (int w = 0; w < head->n_workers; w++)
		memset(&pool_cells(w)[i], 0, sizeof(struct hist_pool_cell));
	if (fresh)
		*fresh = true;
}

struct hist_pool_cell *hist_pool_hold(const char *db, const char *user, bool *fresh)
{
	char key[2 * NAME_LEN];
	if (fresh)
		*fresh = false;
	if (!head || self < 0)
		return NULL;
	size_t len = pool_key(key, db, user);
	int i = len ? shtab_hold(tab(), self, key, len, NULL, clear_slot, fresh) : -1;
	return i < 0 ? NULL : &pool_cells(self)[i];
}

bool hist_pool_release(struct hist_pool_cell *cell)
{
	if (!cell || !head || self < 0)
		return true;
	/* What others read of ours says "nothing here" from now on; the time
	 * stays, so that theirs still count from the latest use anywhere. */
	hist_pool_set_wait(cell, 0);
	hist_pool_set_idle(cell, 0);
	hist_pool_set_idle_any(cell, 0);
	hist_pool_set_oldest(cell, 0);
	hist_pool_set_next(cell, 0);
	atomic_store_explicit(&cell->clients, 0, memory_order_relaxed);
	atomic_store_explicit(&cell->servers, 0, memory_order_relaxed);
	return shtab_release(tab(), self, (int)(cell - pool_cells(self)));
}

bool hist_pool_held(const char *db, const char *user)
{
	return find_pool(db, user) >= 0;
}

void hist_pool_holders(const char *db, const char *user, bool *held, int n)
{
	int idx = find_pool(db, user);
	if (idx < 0) {
		for (int w = 0; w < n; w++)
			held[w] = false;
		return;
	}
	shtab_holders(tab(), idx, held, n);
}

bool hist_pool_shared(const struct hist_pool_cell *cell)
{
	if (!cell || !head || self < 0)
		return false;
	bool held[SHTAB_WORKERS];
	int n = head->n_workers < SHTAB_WORKERS ? head->n_workers : SHTAB_WORKERS;
	shtab_holders(tab(), (int)(cell - pool_cells(self)), held, n);
	for (int w = 0; w < n; w++)
		if (w != self && held[w])
			return true;
	return false;
}

bool hist_enabled(void)
{
	return head && self >= 0;
}

bool hist_pool_full(void)
{
	return head && shtab_used(tab()) >= head->max_pools;
}

uint32_t hist_pools_used(void)
{
	return head ? shtab_used(tab()) : 0;
}

uint32_t hist_pools_capacity(void)
{
	return head ? head->max_pools : 0;
}

uint32_t hist_pools_high(void)
{
	return head ? shtab_high_water(tab()) : 0;
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
	ptrdiff_t idx = cell - pool_cells(self);
	for (int w = 0; w < head->n_workers; w++) {
		const struct hist_pool_cell *o = &pool_cells(w)[idx];
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
	int idx = find_pool(db, user);
	for (int w = 0; w < n; w++)
		since[w] = idx >= 0 && w < head->n_workers ?
			atomic_load_explicit(&pool_cells(w)[idx].wait_since, memory_order_relaxed) : 0;
	return idx >= 0;
}

usec_t hist_pool_wait_of(const char *db, const char *user, int w)
{
	int idx = find_pool(db, user);
	if (idx < 0 || w < 0 || w >= head->n_workers)
		return 0;
	return atomic_load_explicit(&pool_cells(w)[idx].wait_since, memory_order_relaxed);
}

void hist_worker_gone(int w)
{
	if (!head || w < 0 || w >= head->n_workers)
		return;
	uint32_t high = shtab_high_water(tab());
	for (uint32_t i = 0; i < high; i++) {
		struct hist_pool_cell *c = &pool_cells(w)[i];
		atomic_store_explicit(&c->wait_since, 0, memory_order_relaxed);
		atomic_store_explicit(&c->idle, 0, memory_order_relaxed);
		atomic_store_explicit(&c->idle_any, 0, memory_order_relaxed);
		atomic_store_explicit(&c->clients, 0, memory_order_relaxed);
		atomic_store_explicit(&c->servers, 0, memory_order_relaxed);
		atomic_store_explicit(&c->idle_next, 0, memory_order_relaxed);
		atomic_store_explicit(&c->idle_oldest, 0, memory_order_relaxed);
	}
	(void)shtab_worker_gone(tab(), w);
}

void hist_pool_set_idle(struct hist_pool_cell *cell, int n)
{
	if (cell)
		atomic_store_explicit(&cell->idle, n, memory_order_relaxed);
}

void hist_pool_set_idle_any(struct hist_pool_cell *cell, int n)
{
	if (cell)
		atomic_store_explicit(&cell->idle_any, n, memory_order_relaxed);
}

void hist_pool_set_oldest(struct hist_pool_cell *cell, int64_t last_used)
{
	if (cell)
		atomic_store_explicit(&cell->idle_oldest, last_used, memory_order_relaxed);
}

/* The cell's index by the hint (its generation checked), else by name. */
static int cell_by_hint(const char *db, const char *user, int64_t *hint)
{
	int idx = -1;
	if (head && *hint >= 0 &&
	    shtab_gen_at(tab(), (int)(*hint & 0xffffffff)) == (uint32_t)((uint64_t)*hint >> 32))
		idx = (int)(*hint & 0xffffffff);
	if (idx < 0) {
		idx = find_pool(db, user);
		uint32_t gen = idx >= 0 ? shtab_gen_at(tab(), idx) : 0;
		*hint = idx >= 0 && gen ? (int64_t)(((uint64_t)gen << 32) | (uint32_t)idx) : -1;
	}
	return idx;
}

bool hist_pool_idle_any(const char *db, const char *user, int64_t *hint, int *out, int n)
{
	int idx = cell_by_hint(db, user, hint);
	if (idx < 0)
		return false;
	for (int w = 0; w < n; w++)
		out[w] = w < head->n_workers ?
			atomic_load_explicit(&pool_cells(w)[idx].idle_any, memory_order_relaxed) : 0;
	return true;
}

bool hist_pool_idle_oldest(const char *db, const char *user, int64_t *hint, int64_t *out, int n)
{
	int idx = cell_by_hint(db, user, hint);
	if (idx < 0)
		return false;
	for (int w = 0; w < n; w++)
		out[w] = w < head->n_workers ?
			atomic_load_explicit(&pool_cells(w)[idx].idle_oldest, memory_order_relaxed) : 0;
	return true;
}

bool hist_pool_idle_elsewhere(const char *db, const char *user, int except)
{
	int idx = find_pool(db, user);
	for (int w = 0; idx >= 0 && w < head->n_workers; w++)
		if (w != except && atomic_load_explicit(&pool_cells(w)[idx].idle, memory_order_relaxed) > 0)
			return true;
	return false;
}

void hist_pool_set_use(struct hist_pool_cell *cell, int clients, int servers, usec_t last_used)
{
	if (!cell)
		return;
	atomic_store_explicit(&cell->clients, clients, memory_order_relaxed);
	atomic_store_explicit(&cell->servers, servers, memory_order_relaxed);
	atomic_store_explicit(&cell->last_used, last_used, memory_order_relaxed);
}

/* The other workers' clients of a pool (-1: no cell), in *servers (when
 * asked) their server connections of it, and in *last_used (when asked)
 * the latest time one of them had a client or server come or go. */
static int others_use(const struct hist_pool_cell *cell, int *servers, usec_t *last_used)
{
	int n = 0;
	if (servers)
		*servers = 0;
	if (last_used)
		*last_used = 0;
	if (!cell || !head || self < 0)
		return -1;
	ptrdiff_t idx = cell - pool_cells(self);
	for (int w = 0; w < head->n_workers; w++) {
		if (w == self)
			continue;
		const struct hist_pool_cell *o = &pool_cells(w)[idx];
		n += atomic_load_explicit(&o->clients, memory_order_relaxed);
		if (servers)
			*servers += atomic_load_explicit(&o->servers, memory_order_relaxed);
		usec_t t = atomic_load_explicit(&o->last_used, memory_order_relaxed);
		if (last_used && t > *last_used)
			*last_used = t;
	}
	return n;
}

bool hist_pool_used_elsewhere(const struct hist_pool_cell *cell, usec_t *last_used)
{
	int servers;
	return others_use(cell, &servers, last_used) > 0 || servers > 0;
}

int hist_pool_clients_all(const struct hist_pool_cell *cell)
{
	int n = others_use(cell, NULL, NULL);
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
		hist_observe(&phases(self)[ph], us);
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
	if (!head || idx < 0 || (uint32_t)idx >= head->max_pools)
		return;
	for (int w = 0; w < head->n_workers; w++)
		add_total(&pool_cells(w)[idx].h[k], out);
}

void hist_phase_total(enum hist_phase ph, struct hist_total *out)
{
	memset(out, 0, sizeof(*out));
	if (!head)
		return;
	for (int w = 0; w < head->n_workers; w++)
		add_total(&phases(w)[ph], out);
}

bool hist_pool_at(int idx, char *db, size_t dblen, char *user, size_t userlen)
{
	char key[2 * NAME_LEN];
	if (!head || idx < 0)
		return false;
	int len = shtab_key_at(tab(), idx, key, sizeof(key), NULL);
	if (len < 2)
		return false;
	key[sizeof(key) - 1] = 0;
	snprintf(db, dblen, "%s", key);
	snprintf(user, userlen, "%s", key + strlen(key) + 1);
	return true;
}

const char *hist_phase_name(enum hist_phase ph)
{
	return (unsigned)ph < HIST_PHASES ? phase_names[ph] : "?";
}

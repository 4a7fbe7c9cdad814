/* pgcrew — instance-wide counters in one anonymous shared mapping, created
 * by the supervisor before the first fork so every process sees it at the
 * same address. Lock-free: a cell has one writer (its worker); limits are
 * checked by counting first and undoing when the sum is over the limit, so
 * racing workers may both refuse but can never both exceed. */
#include "shm.h"
#include "log.h"
#include "util.h"

#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define NAME_LEN 64

enum { SLOT_EMPTY, SLOT_WRITING, SLOT_READY };

struct name_slot {
	_Atomic int state;
	_Atomic int host;          /* SHM_DB: next host of its list to use */
	_Atomic uint8_t role[SHM_HOSTS];        /* SHM_DB: each host's last known role */
	_Atomic int64_t skip_until[SHM_HOSTS];  /* SHM_DB: a host that did not match, until */
	_Atomic uint8_t addr_next[SHM_HOSTS];   /* SHM_DB: which address of each host name next */
	uint8_t kind;
	char name[NAME_LEN];
};

struct shm_head {
	_Atomic uint64_t next_id;
	int n_workers;
	_Atomic int clients[SHM_MAX_WORKERS];
	_Atomic int restarts[SHM_MAX_WORKERS];
	_Atomic uint64_t logins[SHM_MAX_WORKERS][SHM_LOGIN_KINDS][SHM_PROTO_MINORS];
	struct name_slot names[SHM_NAMES];
	/* followed by _Atomic int counts[SHM_NAMES][n_workers]
	 * and _Atomic uint64_t stats[SHM_NAMES][n_workers][SHM_STATS] */
	_Atomic uint64_t avgs[SHM_NAMES][SHM_STATS];
	_Atomic bool avgs_set;     /* a stats_period has passed */
	usec_t created;
};

static struct shm_head *head;
static _Atomic int *counts;
static _Atomic uint64_t *stats;
static size_t map_len;
static int self = -1;

int shm_create(int n_workers)
{
	if (n_workers < 1 || n_workers > SHM_MAX_WORKERS)
		return -1;
	size_t cells = (size_t)SHM_NAMES * (size_t)n_workers;
	size_t counts_len = (sizeof(_Atomic int) * cells + 7) & ~(size_t)7;
	map_len = sizeof(*head) + counts_len + sizeof(_Atomic uint64_t) * cells * SHM_STATS;
	void *p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	head = p;           /* the kernel gives zeroed pages */
	head->n_workers = n_workers;
	head->created = util_monotonic();
	counts = (_Atomic int *)(head + 1);
	stats = (_Atomic uint64_t *)((char *)counts + counts_len);
	return 0;
}

void shm_destroy(void)
{
	if (head)
		munmap(head, map_len);
	head = NULL;
	counts = NULL;
	stats = NULL;
}

static _Atomic int *cell(int idx, int w)
{
	return &counts[(size_t)idx * (size_t)head->n_workers + (size_t)w];
}

void shm_worker_reset(int w)
{
	if (!head || w < 0 || w >= head->n_workers)
		return;
	atomic_store(&head->clients[w], 0);
	for (int i = 0; i < SHM_NAMES; i++)
		atomic_store(cell(i, w), 0);
}

void shm_attach_worker(int w)
{
	self = w;
}

int shm_n_workers(void)
{
	return head ? head->n_workers : 1;
}

uint64_t shm_next_id(void)
{
	static uint64_t local;     /* no shared memory (unit tests): this process only */
	if (!head)
		return ++local;
	return atomic_fetch_add(&head->next_id, 1) + 1;
}

/* Sequentially consistent loads: with the seq_cst add before them, two
 * racing takers cannot both miss each other's add (relaxed loads could, on
 * weakly ordered CPUs). */
static int sum_clients(void)
{
	int n = 0;
	for (int w = 0; w < head->n_workers; w++)
		n += atomic_load(&head->clients[w]);
	return n;
}

bool shm_client_take(int limit)
{
	if (!head || self < 0)
		return true;
	atomic_fetch_add(&head->clients[self], 1);
	if (limit > 0 && sum_clients() > limit) {
		atomic_fetch_sub(&head->clients[self], 1);
		return false;
	}
	return true;
}

void shm_client_put(void)
{
	if (!head || self < 0)
		return;
	atomic_fetch_sub(&head->clients[self], 1);
}

int shm_clients_of(int w)
{
	return head && w >= 0 && w < head->n_workers ? atomic_load(&head->clients[w]) : 0;
}

void shm_note_restart(int w)
{
	if (head && w >= 0 && w < head->n_workers)
		atomic_fetch_add(&head->restarts[w], 1);
}

void shm_note_login(enum shm_login_kind kind, int minor)
{
	if (!head || self < 0 || (unsigned)kind >= SHM_LOGIN_KINDS || minor < 0 || minor >= SHM_PROTO_MINORS)
		return;
	atomic_fetch_add_explicit(&head->logins[self][kind][minor], 1, memory_order_relaxed);
}

uint64_t shm_logins_total(enum shm_login_kind kind, int minor)
{
	uint64_t n = 0;
	if (!head || (unsigned)kind >= SHM_LOGIN_KINDS || minor < 0 || minor >= SHM_PROTO_MINORS)
		return 0;
	for (int w = 0; w < head->n_workers; w++)
		n += atomic_load_explicit(&head->logins[w][kind][minor], memory_order_relaxed);
	return n;
}

int shm_restarts(int w)
{
	return head && w >= 0 && w < head->n_workers ? atomic_load(&head->restarts[w]) : 0;
}

int shm_clients_total(void)
{
	return head ? sum_clients() : 0;
}

static uint32_t hash_name(enum shm_kind kind, const char *name)
{
	uint32_t h = 2166136261u ^ (uint32_t)kind;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

int shm_name_index(enum shm_kind kind, const char *name)
{
	if (!head || strlen(name) >= NAME_LEN)
		return -1;
	uint32_t h = hash_name(kind, name);
	for (int probe = 0; probe < SHM_NAMES; probe++) {
		int i = (int)((h + (uint32_t)probe) % SHM_NAMES);
		struct name_slot *s = &head->names[i];
		int st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (st == SLOT_EMPTY) {
			int expect = SLOT_EMPTY;
			if (atomic_compare_exchange_strong(&s->state, &expect, SLOT_WRITING)) {
				s->kind = (uint8_t)kind;
				strcpy(s->name, name);
				atomic_store_explicit(&s->state, SLOT_READY, memory_order_release);
				return i;
			}
			st = expect;
		}
		/* Another process is writing this slot: a few stores, wait them out. */
		while (st == SLOT_WRITING) {
			sched_yield();
			st = atomic_load_explicit(&s->state, memory_order_acquire);
		}
		if (s->kind == (uint8_t)kind && strcmp(s->name, name) == 0)
			return i;
	}
	return -1;
}

static bool valid_idx(int idx)
{
	return head && self >= 0 && idx >= 0 && idx < SHM_NAMES;
}

int shm_name_total(int idx)
{
	int n = 0;
	if (!head || idx < 0 || idx >= SHM_NAMES)
		return 0;
	for (int w = 0; w < head->n_workers; w++)
		n += atomic_load(cell(idx, w));
	return n;
}

bool shm_name_take(int idx, int limit)
{
	if (!valid_idx(idx))
		return true;
	atomic_fetch_add(cell(idx, self), 1);
	if (limit > 0 && shm_name_total(idx) > limit) {
		atomic_fetch_sub(cell(idx, self), 1);
		return false;
	}
	return true;
}

int shm_host(int idx, int advance)
{
	if (!head || idx < 0 || idx >= SHM_NAMES)
		return 0;
	return atomic_fetch_add(&head->names[idx].host, advance);
}

void shm_host_set(int idx, int value)
{
	if (head && idx >= 0 && idx < SHM_NAMES)
		atomic_store(&head->names[idx].host, value);
}

static bool host_cell_ok(int idx, int host)
{
	return head && idx >= 0 && idx < SHM_NAMES && host >= 0 && host < SHM_HOSTS;
}

int shm_host_role(int idx, int host)
{
	return host_cell_ok(idx, host) ? atomic_load(&head->names[idx].role[host]) : 0;
}

int shm_host_role_set(int idx, int host, int role)
{
	return host_cell_ok(idx, host) ? atomic_exchange(&head->names[idx].role[host], (uint8_t)role) : role;
}

int64_t shm_host_skip_until(int idx, int host)
{
	return host_cell_ok(idx, host) ? atomic_load(&head->names[idx].skip_until[host]) : 0;
}

void shm_host_skip(int idx, int host, int64_t until)
{
	if (host_cell_ok(idx, host))
		atomic_store(&head->names[idx].skip_until[host], until);
}

int shm_addr_next(int idx, int host, int advance)
{
	return host_cell_ok(idx, host) ? atomic_fetch_add(&head->names[idx].addr_next[host], (uint8_t)advance) : -1;
}

void shm_addr_next_set(int idx, int host, int value)
{
	if (host_cell_ok(idx, host))
		atomic_store(&head->names[idx].addr_next[host], (uint8_t)value);
}

static _Atomic uint64_t *stat_cell(int idx, int w)
{
	return &stats[((size_t)idx * (size_t)head->n_workers + (size_t)w) * SHM_STATS];
}

void shm_stats_add(int idx, const uint64_t delta[SHM_STATS])
{
	if (!valid_idx(idx))
		return;
	_Atomic uint64_t *c = stat_cell(idx, self);
	/* One writer per cell: a relaxed load and store, no locked add. */
	for (int i = 0; i < SHM_STATS; i++)
		if (delta[i])
			atomic_store_explicit(&c[i], atomic_load_explicit(&c[i], memory_order_relaxed) + delta[i],
					      memory_order_relaxed);
}

void shm_stats_total(int idx, uint64_t out[SHM_STATS])
{
	memset(out, 0, sizeof(uint64_t) * SHM_STATS);
	if (!head || idx < 0 || idx >= SHM_NAMES)
		return;
	for (int w = 0; w < head->n_workers; w++) {
		_Atomic uint64_t *c = stat_cell(idx, w);
		for (int i = 0; i < SHM_STATS; i++)
			out[i] += atomic_load_explicit(&c[i], memory_order_relaxed);
	}
}

void shm_avg_set(int idx, const uint64_t avg[SHM_STATS])
{
	if (!head || idx < 0 || idx >= SHM_NAMES)
		return;
	for (int i = 0; i < SHM_STATS; i++)
		atomic_store_explicit(&head->avgs[idx][i], avg[i], memory_order_relaxed);
	atomic_store(&head->avgs_set, true);
}

bool shm_avg_ready(void)
{
	return head && atomic_load(&head->avgs_set);
}

usec_t shm_created(void)
{
	return head ? head->created : 0;
}

void shm_avg_get(int idx, uint64_t avg[SHM_STATS])
{
	for (int i = 0; i < SHM_STATS; i++)
		avg[i] = head && idx >= 0 && idx < SHM_NAMES ?
			atomic_load_explicit(&head->avgs[idx][i], memory_order_relaxed) : 0;
}

bool shm_name_at(int i, enum shm_kind kind, char *name, size_t len)
{
	if (!head || i < 0 || i >= SHM_NAMES)
		return false;
	struct name_slot *s = &head->names[i];
	if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_READY || s->kind != (uint8_t)kind)
		return false;
	snprintf(name, len, "%s", s->name);
	return true;
}

void shm_name_put(int idx)
{
	if (!valid_idx(idx))
		return;
	atomic_fetch_sub(cell(idx, self), 1);
}

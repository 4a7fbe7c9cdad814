/* pgcrew — instance-wide counters in one anonymous shared mapping, created
 * by the supervisor before the first fork so every process sees it at the
 * same address. Lock-free: a cell has one writer (its worker); limits are
 * checked by counting first and undoing when the sum is over the limit, so
 * racing workers may both refuse but can never both exceed. */
#include "shm.h"
#include "log.h"
#include "shtab.h"
#include "util.h"

#include <stdio.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define NAME_LEN 64

struct name_data {                 /* what a database's slot keeps besides counts */
	_Atomic int host;          /* SHM_DB: next host of its list to use */
	_Atomic uint8_t role[SHM_HOSTS];        /* SHM_DB: each host's last known role */
	_Atomic int64_t skip_until[SHM_HOSTS];  /* SHM_DB: a host that did not match, until */
	_Atomic uint8_t addr_next[SHM_HOSTS];   /* SHM_DB: which address of each host name next */
	_Atomic bool pooled;       /* SHM_DB: a pool of it in use since the last KILL of it */
	_Atomic bool kill;         /* SHM_DB: it was pooled when the last KILL was checked */
	_Atomic uint64_t paused[SHM_MAX_WORKERS / 64];  /* SHM_DB: the workers where it is paused */
	_Atomic uint64_t evict;    /* closes offered (high half) and claimed (low) */
	_Atomic uint32_t evict_done;    /* claims the supervisor has heard of */
	_Atomic int servers;       /* the ledger's slots of the database (user), all workers */
};

struct shm_head {
	_Atomic uint64_t next_id;
	int n_workers;
	uint32_t n_names;          /* capacity of the name table */
	size_t tab_off, data_off, counts_off, stats_off, avgs_off;
	_Atomic int clients[SHM_MAX_WORKERS];
	_Atomic int restarts[SHM_MAX_WORKERS];
	_Atomic uint8_t pause_mode[SHM_MAX_WORKERS];    /* each worker's console pause mode */
	_Atomic uint64_t beat[SHM_MAX_WORKERS];     /* worker's last janitor pass (monotonic usec) */
	_Atomic unsigned health[SHM_MAX_WORKERS];   /* enum shm_health_flag, as of that pass */
	_Atomic uint64_t logins[SHM_MAX_WORKERS][SHM_LOGIN_KINDS][SHM_PROTO_MINORS];
	_Atomic bool avgs_set;     /* a stats_period has passed */
	usec_t created;
	/* then: the name table (shtab), struct name_data[n_names],
	 * _Atomic int counts[n_names][n_workers],
	 * _Atomic uint64_t stats[n_names][n_workers][SHM_STATS],
	 * _Atomic uint64_t avgs[n_names][SHM_STATS] */
};

static struct shm_head *head;
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

static struct name_data *name_data(int idx)
{
	return (struct name_data *)((char *)head + head->data_off) + idx;
}

static _Atomic int *cell(int idx, int w)
{
	return (_Atomic int *)((char *)head + head->counts_off) + (size_t)idx * (size_t)head->n_workers + (size_t)w;
}

static _Atomic uint64_t *stat_cell(int idx, int w)
{
	return (_Atomic uint64_t *)((char *)head + head->stats_off) +
	       ((size_t)idx * (size_t)head->n_workers + (size_t)w) * SHM_STATS;
}

static _Atomic uint64_t *avg_cell(int idx)
{
	return (_Atomic uint64_t *)((char *)head + head->avgs_off) + (size_t)idx * SHM_STATS;
}

int shm_create(int n_workers, uint32_t n_names)
{
	if (n_workers < 1 || n_workers > SHM_MAX_WORKERS || n_names < 1)
		return -1;
	size_t w = (size_t)n_workers, n = n_names;
	size_t tab_off = round_up(sizeof(*head));
	size_t data_off = tab_off + round_up(shtab_size(n_names));
	size_t counts_off = data_off + round_up(sizeof(struct name_data) * n);
	size_t stats_off = counts_off + round_up(sizeof(_Atomic int) * n * w);
	size_t avgs_off = stats_off + round_up(sizeof(_Atomic uint64_t) * n * w * SHM_STATS);
	size_t len = avgs_off + sizeof(_Atomic uint64_t) * n * SHM_STATS;
	/* Pages no name has touched cost nothing: reserve no swap for them. */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	head = p;           /* the kernel gives zeroed pages */
	map_len = len;
	head->n_workers = n_workers;
	head->n_names = n_names;
	head->tab_off = tab_off;
	head->data_off = data_off;
	head->counts_off = counts_off;
	head->stats_off = stats_off;
	head->avgs_off = avgs_off;
	head->created = util_monotonic();
	if (shtab_init(tab(), n_names) < 0) {
		shm_destroy();
		return -1;
	}
	return 0;
}

void shm_destroy(void)
{
	if (head) {
		shtab_destroy(tab());
		munmap(head, map_len);
	}
	head = NULL;
}

void shm_worker_reset(int w)
{
	if (!head || w < 0 || w >= head->n_workers)
		return;
	atomic_store(&head->clients[w], 0);
	atomic_store(&head->pause_mode[w], 0);
	atomic_store(&head->beat[w], 0);
	atomic_store(&head->health[w], 0);
	uint32_t high = shtab_high_water(tab());
	for (uint32_t i = 0; i < high; i++) {
		atomic_store(cell((int)i, w), 0);
		atomic_fetch_and(&name_data((int)i)->paused[w / 64], ~(UINT64_C(1) << (w % 64)));
		/* Its claimed closes will never be heard of: every close on its
		 * way counts as done (a live worker's that comes later is
		 * absorbed, shm_evict_heard), or the name would be offered fewer
		 * for as long as its slot lives. */
		atomic_store(&name_data((int)i)->evict_done, (uint32_t)atomic_load(&name_data((int)i)->evict));
	}
	(void)shtab_worker_gone(tab(), w);
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

void shm_set_pause_mode(int mode)
{
	if (head && self >= 0)
		atomic_store(&head->pause_mode[self], (uint8_t)mode);
}

int shm_pause_mode_of_others(void)
{
	int mode = 0;
	for (int w = 0; head && w < head->n_workers; w++) {
		int m = w == self ? 0 : atomic_load(&head->pause_mode[w]);
		mode = m > mode ? m : mode;
	}
	return mode;
}

void shm_health_beat(unsigned flags)
{
	if (!head || self < 0)
		return;
	atomic_store(&head->health[self], flags);
	atomic_store(&head->beat[self], (uint64_t)util_monotonic());
}

usec_t shm_health_of(int w, unsigned *flags)
{
	*flags = 0;
	if (!head || w < 0 || w >= head->n_workers)
		return 0;
	usec_t beat = (usec_t)atomic_load(&head->beat[w]);
	*flags = atomic_load(&head->health[w]);
	return beat;
}

int shm_restarts(int w)
{
	return head && w >= 0 && w < head->n_workers ? atomic_load(&head->restarts[w]) : 0;
}

int shm_clients_total(void)
{
	return head ? sum_clients() : 0;
}

/* A kind byte, then the name with its NUL: a database and a user of the
 * same name are two slots. */
static size_t name_key(char *key, enum shm_kind kind, const char *name)
{
	size_t len = strlen(name);
	if (len >= NAME_LEN)
		return 0;
	key[0] = (char)('0' + kind);
	memcpy(key + 1, name, len + 1);
	return len + 2;
}

/* A name's slot taken afresh: counts, statistics, averages and host state
 * start from zero. Under the table's lock, nobody else holding it. */
static void clear_name(int idx, void *arg)
{
	(void)arg;
	memset(name_data(idx), 0, sizeof(struct name_data));
	for (int w = 0; w < head->n_workers; w++) {
		atomic_store(cell(idx, w), 0);
		memset(stat_cell(idx, w), 0, sizeof(_Atomic uint64_t) * SHM_STATS);
	}
	memset(avg_cell(idx), 0, sizeof(_Atomic uint64_t) * SHM_STATS);
}

int shm_name_hold(enum shm_kind kind, const char *name)
{
	char key[NAME_LEN + 2];
	if (!head || self < 0)
		return -1;
	size_t len = name_key(key, kind, name);
	return len ? shtab_hold(tab(), self, key, len, NULL, clear_name, NULL) : -1;
}

int shm_name_find(enum shm_kind kind, const char *name)
{
	char key[NAME_LEN + 2];
	size_t len;
	if (!head || !(len = name_key(key, kind, name)))
		return -1;
	return shtab_find(tab(), key, len);
}

void shm_name_release(int idx)
{
	if (head && self >= 0 && idx >= 0)
		(void)shtab_release(tab(), self, idx);
}

bool shm_enabled(void)
{
	return head && self >= 0;
}

uint32_t shm_names_high(void)
{
	return head ? shtab_high_water(tab()) : 0;
}

uint32_t shm_names_used(void)
{
	return head ? shtab_used(tab()) : 0;
}

uint32_t shm_names_capacity(void)
{
	return head ? head->n_names : 0;
}

static bool valid_idx(int idx)
{
	return head && self >= 0 && idx >= 0 && (uint32_t)idx < head->n_names;
}

static bool known_idx(int idx)
{
	return head && idx >= 0 && (uint32_t)idx < head->n_names;
}

int shm_name_total(int idx)
{
	int n = 0;
	if (!known_idx(idx))
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

void shm_db_set_pooled(int idx)
{
	/* a load first: every login passes here, the store is rare */
	if (known_idx(idx) && !atomic_load_explicit(&name_data(idx)->pooled, memory_order_relaxed))
		atomic_store(&name_data(idx)->pooled, true);
}

/* Each database slot in use: fn(idx). Slots of users are skipped. */
static void for_each_db(void (*fn)(int idx, void *arg), void *arg)
{
	char key[NAME_LEN + 2];
	uint32_t high = shm_names_high();
	for (uint32_t i = 0; i < high; i++)
		if (shtab_key_at(tab(), (int)i, key, sizeof(key), NULL) > 0 && key[0] == '0' + SHM_DB)
			fn((int)i, arg);
}

static void mark_kill(int idx, void *arg)
{
	(void)arg;
	atomic_store(&name_data(idx)->kill, atomic_exchange(&name_data(idx)->pooled, false));
}

void shm_db_mark_kill(void)
{
	if (head)
		for_each_db(mark_kill, NULL);
}

bool shm_db_kill_marked(int idx)
{
	return known_idx(idx) && atomic_load(&name_data(idx)->kill);
}

void shm_db_unpool(const char *name)
{
	int idx = shm_name_find(SHM_DB, name);
	if (idx >= 0)
		atomic_store(&name_data(idx)->pooled, false);
}

void shm_db_set_paused(int idx, bool paused)
{
	if (!valid_idx(idx))
		return;
	_Atomic uint64_t *word = &name_data(idx)->paused[self / 64];
	uint64_t bit = UINT64_C(1) << (self % 64);
	if (paused)
		atomic_fetch_or(word, bit);
	else
		atomic_fetch_and(word, ~bit);
}

bool shm_db_paused(int idx)
{
	if (!known_idx(idx))
		return false;
	for (int i = 0; i < SHM_MAX_WORKERS / 64; i++)
		if (atomic_load(&name_data(idx)->paused[i]))
			return true;
	return false;
}

static void count_paused(int idx, void *arg)
{
	*(int *)arg += shm_db_paused(idx);
}

int shm_db_count_paused(void)
{
	int n = 0;
	if (head)
		for_each_db(count_paused, &n);
	return n;
}

int shm_host(int idx, int advance)
{
	if (!known_idx(idx))
		return 0;
	return atomic_fetch_add(&name_data(idx)->host, advance);
}

void shm_host_set(int idx, int value)
{
	if (known_idx(idx))
		atomic_store(&name_data(idx)->host, value);
}

static bool host_cell_ok(int idx, int host)
{
	return known_idx(idx) && host >= 0 && host < SHM_HOSTS;
}

int shm_host_role(int idx, int host)
{
	return host_cell_ok(idx, host) ? atomic_load(&name_data(idx)->role[host]) : 0;
}

int shm_host_role_set(int idx, int host, int role)
{
	return host_cell_ok(idx, host) ? atomic_exchange(&name_data(idx)->role[host], (uint8_t)role) : role;
}

int64_t shm_host_skip_until(int idx, int host)
{
	return host_cell_ok(idx, host) ? atomic_load(&name_data(idx)->skip_until[host]) : 0;
}

void shm_host_skip(int idx, int host, int64_t until)
{
	if (host_cell_ok(idx, host))
		atomic_store(&name_data(idx)->skip_until[host], until);
}

int shm_addr_next(int idx, int host, int advance)
{
	return host_cell_ok(idx, host) ? atomic_fetch_add(&name_data(idx)->addr_next[host], (uint8_t)advance) : -1;
}

void shm_addr_next_set(int idx, int host, int value)
{
	if (host_cell_ok(idx, host))
		atomic_store(&name_data(idx)->addr_next[host], (uint8_t)value);
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
	if (!known_idx(idx))
		return;
	for (int w = 0; w < head->n_workers; w++) {
		_Atomic uint64_t *c = stat_cell(idx, w);
		for (int i = 0; i < SHM_STATS; i++)
			out[i] += atomic_load_explicit(&c[i], memory_order_relaxed);
	}
}

void shm_avg_set(int idx, const uint64_t avg[SHM_STATS])
{
	if (!known_idx(idx))
		return;
	for (int i = 0; i < SHM_STATS; i++)
		atomic_store_explicit(&avg_cell(idx)[i], avg[i], memory_order_relaxed);
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
		avg[i] = known_idx(idx) ? atomic_load_explicit(&avg_cell(idx)[i], memory_order_relaxed) : 0;
}

bool shm_name_at(int i, enum shm_kind kind, char *name, size_t len, uint32_t *gen)
{
	char key[NAME_LEN + 2];
	if (!known_idx(i))
		return false;
	int n = shtab_key_at(tab(), i, key, sizeof(key), gen);
	if (n < 2 || key[0] != (char)('0' + kind))
		return false;
	key[sizeof(key) - 1] = 0;
	snprintf(name, len, "%s", key + 1);
	return true;
}

void shm_name_put(int idx)
{
	if (!valid_idx(idx))
		return;
	atomic_fetch_sub(cell(idx, self), 1);
}

/* ---- eviction claims ----
 * One word, so that an offer and a claim never cross: a claim moves the
 * low half up to the high one, an offer moves the high half anywhere at or
 * above the low one (counts wrap around together). evict_done is the
 * supervisor's alone. */
static uint64_t evict_word(uint32_t offered, uint32_t claimed)
{
	return (uint64_t)offered << 32 | claimed;
}

bool shm_evict_claim(int idx)
{
	if (!known_idx(idx))
		return false;
	_Atomic uint64_t *word = &name_data(idx)->evict;
	uint64_t v = atomic_load(word);
	for (;;) {
		uint32_t offered = (uint32_t)(v >> 32), claimed = (uint32_t)v;
		if (offered == claimed)
			return false;
		if (atomic_compare_exchange_weak(word, &v, evict_word(offered, claimed + 1)))
			return true;
	}
}

int shm_evict_on_way(int idx, uint32_t *base)
{
	*base = 0;
	if (!known_idx(idx))
		return 0;
	struct name_data *nd = name_data(idx);
	uint32_t claimed = (uint32_t)atomic_load(&nd->evict);
	uint32_t done = atomic_load(&nd->evict_done);
	*base = claimed;
	if ((int32_t)(claimed - done) < 0) {
		/* Reset on a worker's death while a live one's close was on
		 * its way: that one is done too. */
		atomic_store(&nd->evict_done, claimed);
		return 0;
	}
	return (int)(claimed - done);
}

void shm_evict_offer(int idx, uint32_t base, int need)
{
	if (!known_idx(idx))
		return;
	_Atomic uint64_t *word = &name_data(idx)->evict;
	uint32_t want = base + (uint32_t)(need > 0 ? need : 0);
	uint64_t v = atomic_load(word);
	for (;;) {
		uint32_t claimed = (uint32_t)v;
		/* Claimed since base: those were counted as needed. */
		uint64_t nv = evict_word((int32_t)(want - claimed) > 0 ? want : claimed, claimed);
		if (nv == v || atomic_compare_exchange_weak(word, &v, nv))
			return;
	}
}

void shm_evict_heard(int idx)
{
	if (!known_idx(idx))
		return;
	struct name_data *nd = name_data(idx);
	uint32_t claimed = (uint32_t)atomic_load(&nd->evict);
	if (atomic_load(&nd->evict_done) != claimed)
		atomic_fetch_add(&nd->evict_done, 1);
}

void shm_name_servers_set(int idx, int n)
{
	if (known_idx(idx))
		atomic_store_explicit(&name_data(idx)->servers, n, memory_order_relaxed);
}

int shm_name_servers(int idx)
{
	return known_idx(idx) ? atomic_load_explicit(&name_data(idx)->servers, memory_order_relaxed) : 0;
}

uint32_t shm_evict_open(int idx)
{
	if (!known_idx(idx))
		return 0;
	uint64_t v = atomic_load(&name_data(idx)->evict);
	return (uint32_t)(v >> 32) - (uint32_t)v;
}

/* pgcrew — latency histograms in shared memory: per pool (query, transaction,
 * client wait) and per connection-setup phase, with fixed buckets; and each
 * pool's wait line, the head of every worker's queue for it. Every
 * worker writes only its own cells (a relaxed load and store, no lock, no
 * locked add), readers such as the supervisor's /metrics sum the cells. */
#ifndef PGCREW_HIST_H
#define PGCREW_HIST_H

#include "types.h"

#include <stdatomic.h>

#define HIST_BOUNDS 18              /* finite upper bounds; one more bucket is +Inf */

enum hist_pool_kind { HIST_QUERY, HIST_XACT, HIST_WAIT, HIST_POOL_KINDS };
enum hist_phase {
	HIST_PHASE_STARTUP,         /* accept to StartupMessage, TLS time excluded */
	HIST_PHASE_TLS,             /* client TLS handshake */
	HIST_PHASE_AUTH,            /* StartupMessage to authentication done */
	HIST_PHASE_SERVER_LOGIN,    /* server connect to login complete */
	HIST_PHASE_SERVER_MOVE,     /* an idle server offered by one worker to taken by another */
	HIST_PHASE_SLOT_WAIT,       /* a server slot asked of the ledger to granted (several workers) */
	HIST_PHASES
};

struct hist {                       /* one worker's counts; bucket i is not cumulative */
	_Atomic uint64_t n[HIST_BOUNDS + 1];
	_Atomic uint64_t sum_us;
};

struct hist_pool_cell {             /* one pool, one worker */
	struct hist h[HIST_POOL_KINDS];
	/* What other workers read sits in a cache line of its own, apart from
	 * the counters written on every query. */
	/* The wait line: when this worker's oldest client waiting for a server
	 * of the pool started waiting (CLOCK_MONOTONIC), 0 when none waits.
	 * With several workers a server goes to the client that has waited
	 * longest in the whole instance (pool.c, the supervisor's routing). */
	_Alignas(64) _Atomic int64_t wait_since;
	/* Idle servers of the pool in this worker that could move to another. */
	_Atomic int32_t idle;
	/* All its idle servers (moving or not): the ledger asks a holder with
	 * one to close it for another pool first (eviction). */
	_Atomic int32_t idle_any;
	/* pool_idle_timeout: this worker's clients and server connections of
	 * the pool, and when one last came or went (CLOCK_MONOTONIC), so that
	 * a pool is unused only when no worker has had either for the time. */
	_Atomic int32_t clients;
	_Atomic int32_t servers;
	_Atomic int64_t last_used;
	/* The reuse order: when the idle server that could move and that this
	 * worker would hand out next (the head of its idle list: the most
	 * recently used, or with server_round_robin the least) was last used
	 * (CLOCK_MONOTONIC), 0 for none. A client takes another worker's idle
	 * server when that one is clearly next in the instance's order. */
	_Atomic int64_t idle_next;
	/* Eviction as PgBouncer's: when this worker's idle server of the pool
	 * that has been unused longest was last used (CLOCK_MONOTONIC), 0 for
	 * none; the ledger closes the instance's oldest one. */
	_Atomic int64_t idle_oldest;
};

struct hist_total {                 /* a sum over workers, for readers */
	uint64_t n[HIST_BOUNDS + 1];
	uint64_t sum_us;
};

/* Bucket upper bounds in microseconds (le labels). */
extern const uint64_t hist_bounds_us[HIST_BOUNDS];

/* Supervisor, before forking: room for n workers and max_pools pools
 * (the setting) at once. */
int hist_create(int n_workers, uint32_t max_pools) MUSTCHECK;
void hist_destroy(void);
/* Worker: which cells are ours. */
void hist_attach_worker(int w);

/* This worker's cell for a pool, held until hist_pool_release: every
 * worker that has the pool holds the same slot, and a slot no worker
 * holds is free for another pool (its counts start again from zero). NULL
 * when the table is full (max_pools pools held at once), the names are too
 * long or there is no shared memory. */
/* *fresh (when given) says whether no worker held the pool before. */
struct hist_pool_cell *hist_pool_hold(const char *db, const char *user, bool *fresh);
/* Let go of ours (the pool goes, or has nothing in this worker): what
 * other workers read of it says nothing is here from now on. True when no
 * worker holds the slot any more (ours was the last hold, or there was no
 * cell): pool_idle_timeout logs a pool's going once for the instance. */
bool hist_pool_release(struct hist_pool_cell *cell);
/* Slots held now, the capacity, and the highest slot ever used + 1. */
uint32_t hist_pools_used(void);
uint32_t hist_pools_capacity(void);
uint32_t hist_pools_high(void);
bool hist_pool_full(void);
/* Shared memory there and this process one of its workers. */
bool hist_enabled(void);
/* Some worker holds the pool's slot (the supervisor's sweep). */
bool hist_pool_held(const char *db, const char *user);
/* Which workers hold it, into held[0..n) (all false: none, or no table). */
void hist_pool_holders(const char *db, const char *user, bool *held, int n);
/* Worker: another worker holds our pool's slot too (it may want what we
 * learn of the pool, such as its welcome). */
bool hist_pool_shared(const struct hist_pool_cell *cell);

/* Hot path: the bucket index and two single-writer stores. The index is
 * the number of bounds below us (a value equal to a bound falls in its
 * bucket), counted without branches: with times spread over many buckets
 * a binary search mispredicts; this costs the same 18 compares every time
 * (about 9 ns per sample with the stores, measured on the test machine,
 * against 10 to 20 ns for a binary search). */
static inline unsigned hist_bucket(uint64_t us)
{
	unsigned n = 0;
	for (unsigned i = 0; i < HIST_BOUNDS; i++)
		n += us > hist_bounds_us[i];
	return n;
}

static inline void hist_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

static inline void hist_observe(struct hist *h, uint64_t us)
{
	hist_add(&h->n[hist_bucket(us)], 1);
	hist_add(&h->sum_us, us);
}

static inline void hist_pool_observe(struct hist_pool_cell *cell, enum hist_pool_kind k, uint64_t us)
{
	if (cell)
		hist_observe(&cell->h[k], us);
}

void hist_phase_observe(enum hist_phase ph, uint64_t us);

/* The wait line (see struct hist_pool_cell): set ours; the oldest of the
 * other workers' (0: nobody waits elsewhere); every worker's for a pool by
 * name (false, all 0, when the pool has no cells). */
void hist_pool_set_wait(struct hist_pool_cell *cell, usec_t since);
usec_t hist_pool_wait_elsewhere(const struct hist_pool_cell *cell);
bool hist_pool_waits(const char *db, const char *user, usec_t *since, int n);
usec_t hist_pool_wait_of(const char *db, const char *user, int w);
/* Supervisor: worker w died; its wait lines, idle counts and clients are
 * cleared and its slots let go of. */
void hist_worker_gone(int w);
/* Idle servers that could move (set ours; whether another worker than
 * `except` has any, by name). */
void hist_pool_set_idle(struct hist_pool_cell *cell, int n);
/* Every idle server, moving or not (set ours; supervisor: each worker's,
 * by name, into out[0..n), false when the pool has no cells). *hint (-1 at
 * first) keeps where the pool's cells were found: the next call looks
 * there first, without the table's lock. */
void hist_pool_set_idle_any(struct hist_pool_cell *cell, int n);
bool hist_pool_idle_any(const char *db, const char *user, int64_t *hint, int *out, int n);
/* Ours: when our idle server of the pool unused longest was last used (0:
 * none); supervisor: each worker's, by the hint hist_pool_idle_any left. */
void hist_pool_set_oldest(struct hist_pool_cell *cell, int64_t last_used);
bool hist_pool_idle_oldest(const char *db, const char *user, int64_t *hint, int64_t *out, int n);
/* pool_idle_timeout: publish ours; whether another worker has a client or
 * a server connection of the pool now, and if not when the last one of
 * another worker came or went (0: none ever had one) in *last_used. A dead
 * worker's are cleared with its wait lines (hist_worker_gone). */
void hist_pool_set_use(struct hist_pool_cell *cell, int clients, int servers, usec_t last_used);
bool hist_pool_used_elsewhere(const struct hist_pool_cell *cell, usec_t *last_used);
/* Clients of the pool in every worker, ours included (-1: no shared cell). */
int hist_pool_clients_all(const struct hist_pool_cell *cell);
bool hist_pool_idle_elsewhere(const char *db, const char *user, int except);
/* The reuse order (see struct hist_pool_cell): set ours; the other
 * workers' next idle server that comes first, the most recently used
 * (newest) or the least (0: no other worker has one). */
void hist_pool_set_next(struct hist_pool_cell *cell, usec_t last_used);
usec_t hist_pool_next_elsewhere(const struct hist_pool_cell *cell, bool newest);

/* Readers: sums over every worker (dead ones too: counts never go back). */
void hist_pool_total(int idx, enum hist_pool_kind k, struct hist_total *out);
void hist_phase_total(enum hist_phase ph, struct hist_total *out);
/* The idx-th pool slot, if used (readers scan [0, hist_pools_high())). */
bool hist_pool_at(int idx, char *db, size_t dblen, char *user, size_t userlen);
const char *hist_phase_name(enum hist_phase ph);

#endif

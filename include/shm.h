/* pgcrew — memory shared by the supervisor and every worker, mapped once
 * before the first fork. It holds what must be instance-wide and is touched
 * on every accept or login, so it cannot wait for a message round trip:
 * connection ids and client counts. Every count is kept per worker (one
 * writer per cell); a total is the sum of the cells, and a dead worker's
 * cells are zeroed by the supervisor. */
#ifndef PGCREW_SHM_H
#define PGCREW_SHM_H

#include "types.h"

#define SHM_MAX_WORKERS 128     /* the cancel key keeps 7 bits for the worker */

enum shm_kind { SHM_DB, SHM_USER };

/* Supervisor, before forking: room for n workers and n_names database and
 * user names held at once (2 x max_pools). */
int shm_create(int n_workers, uint32_t n_names) MUSTCHECK;
void shm_destroy(void);
/* Supervisor, when worker w is gone: its clients are gone too, and the
 * names it held are let go of. */
void shm_worker_reset(int w);
/* Worker: which column is ours. */
void shm_attach_worker(int w);
int shm_n_workers(void);

/* Instance-wide unique connection id (clients and servers). */
uint64_t shm_next_id(void);

/* Count one client of this worker against an instance-wide limit (<= 0:
 * none). False, with nothing counted, when that would exceed it. */
bool shm_client_take(int limit);
void shm_client_put(void);
int shm_clients_of(int w);
int shm_clients_total(void);
/* Supervisor: worker w was restarted; SHOW WORKERS reads the count. */
void shm_note_restart(int w);
int shm_restarts(int w);

/* The pooler's pause mode (control.h's enum ctl_pause) as each worker
 * holds it, so that a worker started again after a crash takes up the
 * others' PAUSE or SUSPEND: the highest of the other workers' cells. */
void shm_set_pause_mode(int mode);
int shm_pause_mode_of_others(void);

/* Worker health for the metrics endpoint's /healthz and /readyz: every
 * janitor pass of a worker stamps its cell with the time and its state, so
 * a probe reads shared memory and sends no message (a stopped or stuck
 * worker cannot answer one). shm_health_of: the worker's last stamp
 * (util_monotonic), 0 before its loop's first one (or after it died). */
enum shm_health_flag {
	SHM_HEALTH_PAUSED = 1 << 0,        /* PAUSE or SUSPEND of the whole instance */
	SHM_HEALTH_SHUTDOWN = 1 << 1,      /* shutting down */
};
void shm_health_beat(unsigned flags);
usec_t shm_health_of(int w, unsigned *flags);

/* Logins by protocol version (3.0 to 3.<SHM_PROTO_MINORS - 1>): clients
 * given their key, servers logged in. One cell per worker, never zeroed, so
 * a total never goes back (the metrics endpoint sums them). */
#define SHM_PROTO_MINORS 3
enum shm_login_kind { SHM_LOGIN_CLIENT, SHM_LOGIN_SERVER, SHM_LOGIN_KINDS };
void shm_note_login(enum shm_login_kind kind, int minor);
uint64_t shm_logins_total(enum shm_login_kind kind, int minor);

/* Named counters (clients per database and per user), and a database's
 * host-list state and traffic counters. A worker holds a name's slot while
 * it has the database or user (shtab.h): every worker that has it holds
 * the same slot, and a slot no worker holds is free for another name (its
 * counts start again from zero). -1 when the table is full or there is no
 * shared memory. */
int shm_name_hold(enum shm_kind kind, const char *name);
void shm_name_release(int idx);
/* The slot some worker holds for the name, or -1. */
int shm_name_find(enum shm_kind kind, const char *name);
/* Shared memory there and this process one of its workers. */
bool shm_enabled(void);
/* Names held now, the capacity, and the highest slot ever used + 1
 * (readers scan [0, shm_names_high())). */
uint32_t shm_names_used(void);
uint32_t shm_names_capacity(void);
uint32_t shm_names_high(void);
bool shm_name_take(int idx, int limit);
void shm_name_put(int idx);
int shm_name_total(int idx);
/* What PgBouncer keeps on its one database object and pgcrew on a
 * database's shared slot, so every worker reads the same:
 * - pooled: a client of some worker has used a pool of it since the last
 *   KILL of it (PgBouncer's KILL frees the pools it empties, and KILL
 *   without a database pauses only the databases it still has pools of).
 *   Set on every pool_get(); shm_db_unpool() is KILL db.
 * - kill: KILL without a database, checked in the asking worker, turns
 *   every database's pooled into kill (shm_db_mark_kill) before the
 *   command goes to the workers, which then pause and empty the databases
 *   marked: the choice is made once, whatever the order the workers run it.
 * - paused: one bit per worker, set and cleared by each worker that
 *   pauses or resumes it, cleared when its copy is dropped (a removed or
 *   idle auto-database) or the worker dies; paused if any bit is set. Read
 *   by a worker that makes the database later (an auto-database) and by
 *   SUSPEND's "cannot suspend with paused databases" in a worker that
 *   lacks it. */
void shm_db_set_pooled(int idx);
void shm_db_unpool(const char *name);
void shm_db_mark_kill(void);
bool shm_db_kill_marked(int idx);
void shm_db_set_paused(int idx, bool paused);
bool shm_db_paused(int idx);
int shm_db_count_paused(void);
/* A database's host-list position, shared so every worker round-robins
 * over one sequence and skips a host another worker found down. */
int shm_host(int idx, int advance);       /* returns the value before adding */

/* Traffic counters per database (SHOW STATS, the stats: log line), one cell
 * per worker. Not zeroed when a worker dies: totals keep counting. */
#define SHM_STATS 13
void shm_stats_add(int idx, const uint64_t delta[SHM_STATS]);
void shm_stats_total(int idx, uint64_t out[SHM_STATS]);
/* Per-database averages over the last stats_period (SHOW STATS avg_*),
 * written by worker 0's stats timer, read by any console. */
void shm_avg_set(int idx, const uint64_t avg[SHM_STATS]);
void shm_avg_get(int idx, uint64_t avg[SHM_STATS]);
/* Whether a stats_period has passed (some averages were set), and when the
 * instance's counters started (util_monotonic). */
bool shm_avg_ready(void);
usec_t shm_created(void);
/* The i-th name slot, if used and of that kind, with its generation (a
 * slot taken again by another name has another; gen may be NULL). */
bool shm_name_at(int i, enum shm_kind kind, char *name, size_t len, uint32_t *gen);
void shm_host_set(int idx, int value);
/* target_session_attrs: each host's last known role (enum host_role, 0 =
 * unknown) and until when a host that did not match is skipped, shared so
 * that one worker's finding serves all; hosts past SHM_HOSTS are not kept. */
#define SHM_HOSTS 8
int shm_host_role(int idx, int host);
int shm_host_role_set(int idx, int host, int role);      /* returns the old role */
int64_t shm_host_skip_until(int idx, int host);
void shm_host_skip(int idx, int host, int64_t until);
/* Which address of a host name with several to use next (hostrole.c);
 * shm_addr_next returns the value before adding, -1 without a row. */
int shm_addr_next(int idx, int host, int advance);
void shm_addr_next_set(int idx, int host, int value);

/* Eviction claims on a database's (user's) slot. Requests held back by its
 * full max_db_connections (max_user_connections) that found no idle server
 * to evict are offered to every worker at once: a worker whose server of
 * another pool of it comes free, with nobody of that pool waiting, claims
 * one and closes it, in place of the supervisor asking holders one by one
 * and taking the asks back when served (bench/tenants: two notices per
 * transaction). The close's slot release says it was a claim
 * (slot_req.claim), and the supervisor counts it done (shm_evict_heard):
 * until then it is on its way.
 * shm_evict_on_way (supervisor): claimed closes not done yet, and in *base
 * the claims so far; shm_evict_offer: `need` closes offered beyond *base
 * (claims made since count against it; may take offers back).
 * shm_evict_claim (worker): true when it got one. shm_evict_open: offers
 * not claimed. */
bool shm_evict_claim(int idx);
int shm_evict_on_way(int idx, uint32_t *base);
void shm_evict_offer(int idx, uint32_t base, int need);
void shm_evict_heard(int idx);
uint32_t shm_evict_open(int idx);

/* The ledger's server slots of a database (user) over the instance, as
 * the supervisor last counted them (granted, open or closing, not yet
 * released): a worker reads whether max_db_connections
 * (max_user_connections) is full before it asks, so that it closes an
 * idle server of its own in the way and sends the release with the
 * request, in place of the ledger asking a holder and waiting for it.
 * 0 for a slot taken afresh. */
void shm_name_servers_set(int idx, int n);
int shm_name_servers(int idx);
#endif

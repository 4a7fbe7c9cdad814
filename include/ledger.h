/* pgcrew — the slot ledger: the supervisor's count of server connections per
 * pool, database and user over all workers. A worker asks for a slot before
 * it opens a server connection and gives it back when that connection
 * closes, so pool_size, max_db_connections and max_user_connections hold for
 * the instance. Requests that must wait (a client is waiting) queue in
 * arrival order; the ledger also says which other workers hold slots that
 * could be given up for them. Pure bookkeeping: no I/O. */
#ifndef PGCREW_LEDGER_H
#define PGCREW_LEDGER_H

#include "types.h"
#include "ipc.h"

/* The payloads (struct slot_req, pool_want, login_failure) are IPC wire
 * formats: ipc.h. */

enum ledger_result { LEDGER_GRANTED, LEDGER_QUEUED, LEDGER_DENIED };

struct ledger;

/* A worker holding no server of a pool waits at most about this long before
 * a holder is asked to give one up (pools smaller than the worker count). */
#define LEDGER_STARVE_USEC (250 * 1000)

struct ledger *ledger_new(int n_workers);
void ledger_free(struct ledger *l);

enum ledger_result ledger_request(struct ledger *l, int worker, uint32_t reqid, const struct slot_req *req);
/* The same, told whether another worker has an idle server of the pool
 * that could move: then a waiter's request queues even where it fits, for
 * the idle server to move to it (no new backend, as in one PgBouncer);
 * ledger_next_grant grants it after LEDGER_MOVE_WAIT_USEC if none came.
 * A request with `move` set is never granted: it queues for a move while
 * another worker has an idle server (denied at once otherwise, and by
 * ledger_next_expired after LEDGER_MOVE_WAIT_USEC), and blocks no other. */
enum ledger_result ledger_request_idle(struct ledger *l, int worker, uint32_t reqid,
				       const struct slot_req *req, bool idle_elsewhere);
#define LEDGER_MOVE_WAIT_USEC (20 * 1000)
/* Past LEDGER_MOVE_WAIT_USEC such a request waits on, up to this, while
 * the probe says another worker still has an idle server of the pool that
 * could move (its worker has not run yet, on a busy machine: a move is
 * still cheaper there than a new backend). */
#define LEDGER_MOVE_WAIT_MAX_USEC (100 * 1000)
typedef bool (*ledger_movable_fn)(const char *db, const char *user, int except);
void ledger_set_movable_probe(struct ledger *l, ledger_movable_fn fn);
/* Some queued request still waits for an idle server to move. */
bool ledger_awaiting_move(const struct ledger *l);
/* Worker's oldest queued request of (db, user) with reqid is no longer
 * needed (it found room another way): false when none was queued (its
 * grant may be on its way). */
bool ledger_withdraw(struct ledger *l, int worker, const char *db, const char *user, uint32_t reqid);
/* A slot of worker's is free again. False if the worker held none there. */
bool ledger_release(struct ledger *l, int worker, const char *db, const char *user);
/* A server connection arrives from an old process (online restart): it
 * counts for worker, beyond the limits if need be, as it already exists. */
void ledger_adopt(struct ledger *l, int worker, const char *db, const char *user);
/* The oldest queued request that fits now, granted (counted) and removed
 * from the queue; false when none fits. Call after each release. */
bool ledger_next_grant(struct ledger *l, int *worker, uint32_t *reqid, struct slot_req *req);
/* Worker giver offers an idle server of (db, user) to the others; whoever
 * has waited longest decides. waits[w] (may be NULL): since when worker w's
 * oldest client waits for this pool, 0 for none (its wait line); without
 * any, the pool's queued requests stand in. MOVE_TO: a client of worker *to
 * (its slot is now *to's; *reqid is the id of its oldest queued request of
 * the pool, now answered, or 0 when it had none queued); CLOSE: a queued
 * request of another pool of the database or user whose limit is full,
 * whose client still waits (by `waiting`): closing the server makes room;
 * KEEP: nobody else needs it. */
enum ledger_move { LEDGER_MOVE_TO, LEDGER_MOVE_CLOSE, LEDGER_MOVE_KEEP };
/* Does worker still have a client waiting for pool (db, user)? (its wait
 * line); NULL: every queued request counts. */
typedef bool (*ledger_wait_fn)(const char *db, const char *user, int worker);
enum ledger_move ledger_handover(struct ledger *l, int giver, const char *db, const char *user,
				 const usec_t *waits, ledger_wait_fn waiting, int *to, uint32_t *reqid);
/* A request for the reuse order (slot_req.move) that no moved server
 * answered within LEDGER_MOVE_WAIT_USEC (the idle server was taken
 * meanwhile), removed from the queue: to deny, so its worker uses its own
 * idle server. False when none is due. */
bool ledger_next_expired(struct ledger *l, int *worker, uint32_t *reqid, struct slot_req *req);
/* A worker died: forget its slots and queued requests. */
void ledger_worker_gone(struct ledger *l, int worker);

/* Wants: for each pool, how many queued requests a worker could serve by
 * closing an idle server of it (same pool elsewhere, or another pool of the
 * database or user whose limit is full), how many of those are in a hurry,
 * and how many of its servers it holds beyond its fair share of the pool
 * (struct pool_want). ledger_want_changes() reports each change once, as a
 * notice to send: n > 0 asks the worker to give up to n idle servers of that
 * pool back, n == 0 withdraws the ask. */
typedef void (*ledger_want_fn)(int worker, const struct pool_want *w, void *arg);
void ledger_want_changes(struct ledger *l, ledger_want_fn fn, void *arg);
/* Each worker's idle servers of (db, user) now, into out[0..n); false when
 * unknown (every holder then counts as having one). *hint is the pool's to
 * keep between calls (-1 at first). With it, requests of
 * other pools (eviction) are told to as many holders as they need, those
 * with an idle server first, not to every holder of the database. */
typedef bool (*ledger_idle_fn)(const char *db, const char *user, int64_t *hint, int *out, int n);
void ledger_set_idle_probe(struct ledger *l, ledger_idle_fn fn);
/* Each worker's idle server of the pool unused longest: when it was last
 * used (0 none or unknown), for eviction's choice (hist_pool_idle_oldest);
 * without it the first holder found is chosen. */
typedef bool (*ledger_oldest_fn)(const char *db, const char *user, int64_t *hint, int64_t *out, int n);
void ledger_set_oldest_probe(struct ledger *l, ledger_oldest_fn fn);
/* Every change of a database's (db true) or user's slot total, with the
 * total after it (0 when the last slot went): the supervisor publishes
 * them in shared memory (shm_name_servers_set). */
typedef void (*ledger_count_fn)(bool db, const char *name, int total);
void ledger_set_count_hook(struct ledger *l, ledger_count_fn fn);

/* Eviction across workers: with an idle probe set, each
 * ledger_want_changes() first names, for each queued request held back by
 * a full database or user limit and with no close under way for it, one
 * holder with an idle server of another pool of that database or user
 * (whose client still waits, by `waiting`), to close it at once: fn(worker,
 * db, user). What finds none is left to the wants. */
typedef void (*ledger_evict_fn)(int worker, const char *db, const char *user, bool for_db);
/* Busy holders are asked (a want) only for requests that have waited this
 * long without an idle server to evict: a pass is due then (the caller
 * runs one LEDGER_BUSY_ASK_USEC after such a request queues). */
#define LEDGER_BUSY_ASK_USEC (5 * 1000)
void ledger_set_evict(struct ledger *l, ledger_evict_fn fn, ledger_wait_fn waiting);
/* Eviction claims: with an idle probe and an evict function set, the
 * closes each database (db true) or user still needs after the idle
 * servers named, less the claimed ones on their way, are offered at every
 * pass: offer(db, name, base, need), base being what on_way() gave in
 * *base; again when a request leaves with more offered than are queued.
 * This replaces asking busy holders by wants (shm.h's eviction claims). A
 * claimed close on its way serves the oldest queued request it helps: no
 * idle server is named for that one meanwhile. */
typedef int (*ledger_on_way_fn)(bool db, const char *name, uint32_t *base);
typedef void (*ledger_offer_fn)(bool db, const char *name, uint32_t base, int need);
void ledger_set_offer(struct ledger *l, ledger_offer_fn fn, ledger_on_way_fn on_way);
/* Worker closed a server of (db, user) for its want, which was other
 * pools' only (pool_want.same == 0), in place of offering it: as
 * ledger_handover's CLOSE, the oldest queued request it helps (whose
 * client still waits, by ledger_set_evict's `waiting`) is marked, and the ask counted as ledger_retell
 * does. False when no request is helped any more (the slot then goes to
 * whichever fits when it comes back). */
bool ledger_evict_done(struct ledger *l, int worker, const char *db, const char *user);
/* The worker told to evict a server of (db, user) had no idle one left
 * (taken meanwhile): the request it was for waits for another close, not
 * from that holder first. False when no such close was under way. */
bool ledger_evict_refused(struct ledger *l, int worker, const char *db, const char *user);
/* Worker offered a server of (db, user): it counted it against its ask (n,
 * soon and over one less, as pool.c's note_given), and so does the ledger;
 * the next ledger_want_changes() tells it its want where that differs (the
 * offer may have come back, or been taken without a request). */
void ledger_retell(struct ledger *l, int worker, const char *db, const char *user);

/* Counts, for SHOW and tests. */
int ledger_pool_count(const struct ledger *l, const char *db, const char *user, int worker);  /* worker -1: all */
int ledger_db_count(const struct ledger *l, const char *db);
int ledger_user_count(const struct ledger *l, const char *user);
int ledger_queued(const struct ledger *l);
/* Pools, databases and users it has entries for (each goes when it counts
 * nothing any more): memory tests. */
int ledger_entries(const struct ledger *l);

#endif

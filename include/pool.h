/* pgcrew — pool policy: databases and users known to the worker, one pool per
 * (database, user), handing idle servers to waiting clients first come first
 * served, launching servers within pool_size/reserve/max_*_connections and at
 * most server_login_concurrency logins at once. */
#ifndef PGCREW_POOL_H
#define PGCREW_POOL_H

#include "config.h"
#include "objects.h"
#include "world.h"

struct config;
struct db_def;
struct slot_req;
struct pool_want;
struct login_failure;

struct database *pool_find_db(struct world *w, const char *name);
/* Find, or create from the "*" template. NULL if neither. */
struct database *pool_get_db(struct world *w, const char *name);
/* The console's pseudo-database (never launches servers). */
struct database *pool_admin_db(struct world *w);
/* A user that exists for a login, as PgBouncer's user lookup: in auth_file,
 * or added by auth_query, PAM or LDAP. A user object made only as a forced
 * user (a database's user=, the console's "pgbouncer") is not one. */
struct puser *pool_find_user(struct world *w, const char *name);
/* A user not in auth_file (forced user, auth_type=any): created on demand. */
struct puser *pool_get_user(struct world *w, const char *name);
/* Only a user object this worker already has (no auth_file lookup). */
struct puser *pool_find_user_here(struct world *w, const char *name);
/* u as pool_get_user would make it, without keeping it (SHOW USERS);
 * pool_user_clear() it after use. */
void pool_user_defaults(struct world *w, struct puser *u, const char *name);
/* Replace u's secret (NULL: none) with a copy; the old one is wiped. */
void pool_user_set_secret(struct puser *u, const char *secret);
/* Wipe and free what u owns (its secret), before u itself goes. */
void pool_user_clear(struct puser *u);
struct pool *pool_get(struct database *db, struct puser *user);
/* A client points at p from now on / no more (freed): pool_idle_timeout
 * counts from the last client's or server connection's going. */
void pool_client_in(struct pool *p);
void pool_client_out(struct pool *p);
/* A server connection of p was made or has closed (server.c). */
void pool_servers_changed(struct pool *p);
/* Free p, which nothing points at any more (pool_idle.c makes sure): its
 * counts go to shared memory first and its shared cells are left clear.
 * True when no worker holds p's shared cell any more (pool_cell_release). */
bool pool_destroy(struct pool *p);
/* p's shared cell (hist.h), held while p has anything in this worker: true
 * when it is held (or p needs none: the console's, or no shared memory);
 * false when max_pools pools are held already. Released by pool_idle.c
 * when p has had nothing for a while, and when p goes. */
bool pool_cell_ready(struct pool *p);
/* True when no worker holds the cell any more (or p had none). */
bool pool_cell_release(struct pool *p);
/* The database's and user's shared names held (taken again if a full
 * table refused them before); false when the name table is full. */
bool pool_names_ready(struct database *db, struct puser *u);
/* Something other than a client points at p (a server, one just closed, an
 * auth_query lookup), or an answer for it is on its way (a request to the
 * supervisor, whose answer finds the pool by name). */
bool pool_in_use(const struct pool *p);
/* Free the pools of removed databases that have nothing, and removed
 * databases and users that nothing points at (the janitor, every few
 * seconds), with their shared names. */
void pool_sweep(struct world *w);

/* PAUSE of every database, of this one, or of this pool: its servers go to
 * no client (and none move to another worker's). */
static inline bool pool_paused(const struct pool *p)
{
	return p->db->world->paused || p->db->paused || p->paused;
}

/* Effective settings of a pool (db/user overrides, then globals). */
/* The [users] setting, else the [databases] one, else pool_mode. Inline:
 * every client message of a linked client may ask (psrelay). */
static inline int pool_mode_of(const struct pool *p)
{
	if (p->user->pool_mode >= 0)
		return p->user->pool_mode;
	if (p->db->pool_mode >= 0)
		return p->db->pool_mode;
	return p->db->world->cfg->pool_mode;
}
int pool_size_of(const struct pool *p);
int pool_reserve_of(const struct pool *p);
usec_t pool_server_lifetime(const struct pool *p);
/* query_wait_timeout of the pool's user in [users], else of its database,
 * else the global one: the most specific wins. */
usec_t pool_query_wait_timeout(const struct pool *p);

/* An idle server of p usable at once (not stale), or NULL; outdated ones
 * are closed. A client that gets none waits, and pool_launch_needed()
 * checks a stale one for it (it comes back via pool_server_ready()). */
struct server *pool_idle_server(struct pool *p);
/* A client needs a server: link one now (true), or queue the client. A
 * replication client's own server is launched when the pool, its database
 * and user have room (pool_launch_needed: also for one still waiting for
 * its welcome), or the client waits until they do. */
bool pool_request_server(struct client *c);
/* A replication server has logged in: link it to its owner. */
void pool_link_replication(struct server *sv);
/* A server became usable (login done, released, check done): hand it to the
 * first waiting client or park it idle. */
void pool_server_ready(struct server *sv);
/* The same for a server moved in from another worker or back unused: its
 * last use stays (the reuse order and the idle timeouts count from it). */
void pool_server_arrived(struct server *sv);
/* A client released sv without a reset query: as pool_server_ready(), and
 * with server_check_delay = 0 it is checked before its next client. */
void pool_server_released(struct server *sv);
/* An idle server to be checked with server_check_query before its next
 * client: PgBouncer's "used" (see pool.c for when). */
bool pool_server_stale(const struct server *sv);
/* Launch servers if waiting clients or min_pool_size need them. */
void pool_launch_needed(struct pool *p);

/* Several workers: answers of the supervisor's slot ledger (ledger.h). */
void pool_slot_answer(struct world *w, const struct slot_req *r, uint32_t why, bool granted);
/* The request `why` was answered (granted, denied, or by a server moved in). */
void pool_slot_taken(struct pool *p, uint32_t why);
struct pool *pool_find_names(struct world *w, const char *db, const char *user);
/* The same, made as a client's login would (NULL: no such database). */
struct pool *pool_get_names(struct world *w, const char *db, const char *user);
/* SHUTDOWN WAIT_FOR_SERVERS: every client queued for a server is told why
 * and closed. */
void pool_refuse_waiters(struct world *w, const char *why);
/* Online restart: a client and its session server linked as they were
 * in the old process, and unlinked there as they leave. */
void pool_link_taken(struct client *c, struct server *sv);
void pool_unlink_leaving(struct client *c, struct server *sv);
/* The head of the pool's waiting clients changed: publish its wait line. */
void pool_wait_line(struct pool *p);
/* Other workers' clients wait for n servers of this pool, `over` of ours
 * are beyond our fair share: give idle ones up (see pool.c). */
void pool_slot_wanted(struct world *w, const struct pool_want *want);
/* The ledger asks for an idle server of (r->db, r->user) to be closed for
 * another pool's client (IPC_POOL_EVICT): the longest idle goes at once,
 * as PgBouncer evicts; without one the supervisor hears IPC_EVICT_NONE. */
void pool_evict_asked(struct world *w, const struct slot_req *r);
/* Janitor: give up servers idle for a while that others want. */
void pool_give_idle(struct pool *p);
/* The reuse order over the instance: does an idle server last used at
 * `there` (another worker's) come before ours, last used at `here`, by
 * more than `slack`? With LIFO the most recently used comes first, with
 * round robin the least; 0 is no server. Pure: the verdict on which
 * pool_request_server waits for a server to move and a giver leaves a want
 * to the worker whose idle server comes first. */
bool pool_reuse_elsewhere(usec_t here, usec_t there, usec_t slack, bool round_robin);
/* Several workers: whether a worker holding `held` of a pool's servers
 * has no more than its clients' share of `size` (`mine` of `all` clients,
 * the share rounded up). Such a worker keeps a server it has just released
 * longer for its own clients while they contend (pool.c, stay_for_own). */
bool pool_within_share(int held, int size, int mine, int all);
/* Several workers: publish the last use of the idle server this worker
 * would hand out next (the idle list's head changed). */
void pool_publish_next_idle(struct pool *p);
void pool_slot_release(struct pool *p);
/* The same by names: the pool may not exist here (a server of a pool this
 * worker does not know, a connection lingering after its pool's reload). */
void pool_slot_release_names(struct world *w, const char *db, const char *user);
/* A server closed on an eviction claim (SLOT_CLAIM_*): its release says
 * so, and the supervisor counts the claim done then. */
struct slot_req;
void pool_slot_release_claim(struct pool *p, uint8_t claim);
void pool_slot_release_req(struct world *w, const struct slot_req *r);

/* Server parameters for the welcome of a pool's clients: one not tracked
 * in the varcache; the supervisor's copy for the other workers; its reply. */
void pool_welcome_param(struct pool *p, const char *k, const char *v);
/* The pool's welcome is known now (tracked parameters in vars, the others
 * given with pool_welcome_param): clients waiting for it log in. */
void pool_welcome_set(struct pool *p, const struct varcache *vars);
/* The same in two steps, for a server that joins its pool in between: the
 * welcome is kept; then the waiting clients log in and the supervisor gets
 * its copy if another worker holds the pool (else it asks for it when one
 * needs it: pool_welcome_fetched). */
void pool_welcome_store(struct pool *p, const struct varcache *vars);
void pool_welcome_release(struct pool *p);
void pool_welcome_answer(struct world *w, const void *payload, size_t len);
/* The supervisor asks for the pool's welcome (IPC_WELCOME_FETCH). */
void pool_welcome_fetched(struct world *w, const void *payload, size_t len);
/* A failed server login, told to the other workers; and their telling. */
void pool_login_failed_share(struct pool *p);
void pool_login_failed_heard(struct world *w, const struct login_failure *f);
/* Servers of db were opened with settings that no longer hold. */
void pool_reconnect_db(struct database *db, const char *why);
/* Apply a config generation: mark-and-sweep databases and users. */
void pool_apply_config(struct world *w, const struct config *cfg);
void pool_free_all(struct world *w);

/* The pool's login failed (here, or another worker's, heard): clients
 * waiting only for a login (none still under way) learn why at once. */
void pool_login_failed_tell(struct pool *p);
/* Drop every pool's cached login error (server TLS settings reloaded). */
void pool_forget_login_failures(struct world *w);
/* How an idle server is offered to another worker (server_give): true
 * when it left; false, and the pool closes it instead. */
void pool_set_mover(bool (*give)(struct server *sv));

#endif

/* pgcrew — pool policy. Databases and users are materialised from the config
 * generation (mark-and-sweep on reload); each (database, user) pool hands
 * idle servers to waiting clients in arrival order and launches new servers
 * within its limits, a few logins at a time so a burst of clients does not
 * become a burst of backend forks. */
#include "pool.h"
#include "hostrole.h"
#include "authquery.h"
#include "client.h"
#include "config.h"
#include "hist.h"
#include "config/userlist.h"
#include "link.h"
#include "log.h"
#include "proto/build.h"
#include "server.h"
#include "shm.h"
#include "stats.h"
#include "ledger.h"
#include "ipc.h"
#include "world.h"

#include <event2/event.h>
#include <openssl/crypto.h>
#include <stdio.h>

/* ---- databases ---- */


/* Hands an idle server to another worker (server_move.c's server_give,
 * registered by the worker loop: pool_set_mover). */
static bool (*mover)(struct server *sv);

void pool_set_mover(bool (*give)(struct server *sv))
{
	mover = give;
}
static void free_hosts(struct database *db)
{
	for (int i = 0; i < db->n_hosts; i++)
		free(db->hosts[i]);
	free(db->hosts);
	db->hosts = NULL;
	db->n_hosts = 0;
}

/* What a server connection of db was opened with: if a reload changes it,
 * the existing servers are from the old settings. */
static void conn_signature(const struct database *db, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < db->n_hosts && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s,", db->hosts[i] ? db->hosts[i] : "");
	if (n < len)
		snprintf(buf + n, len - n, "|%d|%s|%s|%s", db->port, db->dbname,
			 db->forced_user ? db->forced_user : "", db->forced_password ? db->forced_password : "");
}

/* Servers opened with old settings (a RELOAD changed the database, or the
 * console's RECONNECT): close idle ones now, the others when released; in
 * session mode with server_fast_close at the end of their transaction. */
void pool_reconnect_db(struct database *db, const char *why)
{
	struct list *it, *s, *t;
	list_for_each(it, &db->world->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (p->db != db)
			continue;
		list_for_each_safe(s, t, &p->idle_servers)
			server_close(container_of(s, struct server, node), why);
		list_for_each_safe(s, t, &p->active_servers) {
			struct server *sv = container_of(s, struct server, node);
			sv->close_needed = true;
			sv->close_reason = "close_needed";
			if (db->world->cfg->server_fast_close && pool_mode_of(p) == POOL_SESSION &&
			    sv->ready_status == 'I' && sv->expect_rfq == 0 && sv->link && !sv->link->query_running)
				server_close_with_client(sv, why);
		}
		list_for_each(s, &p->tested_servers) {
			struct server *sv = container_of(s, struct server, node);
			sv->close_needed = true;
			sv->close_reason = "close_needed";
		}
		list_for_each(s, &p->login_servers) {
			struct server *sv = container_of(s, struct server, node);
			sv->close_needed = true;
			sv->close_reason = "close_needed";
		}
	}
}

static void db_apply_def(struct database *db, const struct db_def *d, const char *dbname)
{
	const struct config *cfg = db->world->cfg;
	char before[1024], after[1024];
	bool existed = db->n_hosts > 0;

	conn_signature(db, before, sizeof(before));
	free_hosts(db);
	db->n_hosts = d->n_hosts > 0 ? d->n_hosts : 1;
	db->hosts = xcalloc((size_t)db->n_hosts, sizeof(char *));
	for (int i = 0; i < d->n_hosts; i++)
		db->hosts[i] = xstrdup(d->hosts[i]);
	db->port = d->port > 0 ? d->port : 5432;
	strlcpy_(db->dbname, d->dbname && d->dbname[0] ? d->dbname : dbname, sizeof(db->dbname));
	free(db->forced_user);
	free(db->forced_password);
	db->forced_user = d->user && d->user[0] ? xstrdup(d->user) : NULL;
	db->forced_password = d->password ? xstrdup(d->password) : NULL;
	db->pool_size = d->pool_size >= 0 ? d->pool_size : -1;
	db->min_pool_size = d->min_pool_size >= 0 ? d->min_pool_size : cfg->min_pool_size;
	db->reserve_pool_size = d->reserve_pool_size >= 0 ? d->reserve_pool_size : -1;
	db->max_db_connections = d->max_db_connections >= 0 ? d->max_db_connections : cfg->max_db_connections;
	db->max_db_client_connections = d->max_db_client_connections >= 0 ?
		d->max_db_client_connections : cfg->max_db_client_connections;
	db->pool_mode = d->pool_mode;
	free(db->connect_query);
	db->connect_query = d->connect_query && d->connect_query[0] ? xstrdup(d->connect_query) : NULL;
	varcache_clear(&db->startup_vars);
	if (d->client_encoding && d->client_encoding[0])
		varcache_set(&db->startup_vars, "client_encoding", d->client_encoding);
	if (d->datestyle && d->datestyle[0])
		varcache_set(&db->startup_vars, "DateStyle", d->datestyle);
	if (d->timezone && d->timezone[0])
		varcache_set(&db->startup_vars, "TimeZone", d->timezone);
	if (d->application_name && d->application_name[0])
		varcache_set(&db->startup_vars, "application_name", d->application_name);
	conn_signature(db, after, sizeof(after));
	if (existed && strcmp(before, after) != 0)
		pool_reconnect_db(db, "database configuration changed");
	db->load_balance = d->load_balance_hosts != 0;
	db->server_lifetime = d->server_lifetime;
	db->query_wait_timeout = d->query_wait_timeout;
	db->sslnegotiation = d->sslnegotiation;
	db->tsa = d->target_session_attrs;
	db->dead = false;
}

/* A database this worker makes (or an auto-database it brings back) while
 * another worker has it paused (PAUSE db, KILL: shm.h) is paused here too,
 * as PgBouncer's one database object would be. */
static void db_inherit_pause(struct database *db)
{
	if (shm_db_paused(db->shm_idx)) {
		db->paused = true;
		shm_db_set_paused(db->shm_idx, true);
	}
}

static struct database *db_new(struct world *w, const char *name)
{
	struct database *db = xcalloc(1, sizeof(*db));
	db->world = w;
	list_init(&db->idle_pools);
	strlcpy_(db->name, name, sizeof(db->name));
	varcache_init(&db->startup_vars);
	db->shm_idx = shm_name_hold(SHM_DB, name);
	db_inherit_pause(db);
	list_append(&w->databases, &db->node);
	hmap_add(&w->db_map, &db->hn, hmap_hash_str(db->name));
	db->last_used = util_monotonic();
	db->sslnegotiation = -1;
	db->tsa = -1;
	return db;
}

static void db_free(struct database *db)
{
	list_del(&db->node);
	hmap_del(&db->world->db_map, &db->hn);
	shm_db_set_paused(db->shm_idx, false);
	shm_name_release(db->shm_idx);
	free_hosts(db);
	free(db->forced_user);
	free(db->forced_password);
	free(db->connect_query);
	varcache_clear(&db->startup_vars);
	free(db);
}

struct database *pool_find_db(struct world *w, const char *name)
{
	for (struct hnode *n = hmap_first(&w->db_map, hmap_hash_str(name)); n; n = hmap_next(n)) {
		struct database *db = container_of(n, struct database, hn);
		if (strcmp(db->name, name) == 0)
			return db;
	}
	return NULL;
}

struct database *pool_get_db(struct world *w, const char *name)
{
	struct database *db = pool_find_db(w, name);
	if (db && !db->dead)
		return db;
	if (!w->cfg->autodb || strlen(name) >= NAME_MAX_LEN)
		return NULL;
	if (!db)
		db = db_new(w, name);
	db_apply_def(db, w->cfg->autodb, name);
	db->is_autodb = true;
	db_inherit_pause(db);
	log_info("registered new auto-database: %s", name);
	return db;
}

struct database *pool_admin_db(struct world *w)
{
	struct database *db = pool_find_db(w, "pgbouncer");
	if (db && db->admin)
		return db;
	if (!db)
		db = db_new(w, "pgbouncer");
	db->admin = true;
	db->dead = false;
	/* As PgBouncer's: one pool, (pgbouncer, pgbouncer), whoever logs in;
	 * SHOW DATABASES shows that forced user and a pool size of 2. */
	free(db->forced_user);
	db->forced_user = xstrdup("pgbouncer");
	db->pool_size = 2;
	db->pool_mode = POOL_STATEMENT;
	db->server_lifetime = -1;
	db->query_wait_timeout = -1;
	db->n_hosts = 1;
	db->hosts = xcalloc(1, sizeof(char *));
	strlcpy_(db->dbname, "pgbouncer", sizeof(db->dbname));
	return db;
}

/* ---- users ---- */

void pool_user_set_secret(struct puser *u, const char *secret)
{
	if (u->secret) {
		OPENSSL_cleanse(u->secret, strlen(u->secret));
		free(u->secret);
	}
	u->secret = xstrdup(secret ? secret : "");
}

void pool_user_clear(struct puser *u)
{
	pool_user_set_secret(u, NULL);
	free(u->secret);
	u->secret = NULL;
}

static void user_apply(struct world *w, struct puser *u)
{
	const struct config *cfg = w->cfg;
	const char *secret = cfg->userlist ? userlist_find(cfg->userlist, u->name) : NULL;
	const struct user_def *ud = config_find_user(cfg, u->name);

	/* A secret from auth_query stays for this user's servers; the next
	 * login (the cache is dropped) fetches it again. */
	if (secret || !u->authq_secret) {
		if (!secret || !u->secret || strcmp(secret, u->secret) != 0)
			u->has_scram_keys = false;   /* a new secret invalidates learned keys */
		pool_user_set_secret(u, secret);
		u->authq_secret = false;
	}
	u->pool_mode = ud ? ud->pool_mode : -1;
	u->pool_size = ud ? ud->pool_size : -1;
	u->reserve_pool_size = ud ? ud->reserve_pool_size : -1;
	u->max_user_connections = ud && ud->max_user_connections >= 0 ?
		ud->max_user_connections : cfg->max_user_connections;
	u->max_user_client_connections = ud && ud->max_user_client_connections >= 0 ?
		ud->max_user_client_connections : cfg->max_user_client_connections;
	u->query_timeout = ud ? ud->query_timeout : -1;
	u->idle_transaction_timeout = ud ? ud->idle_transaction_timeout : -1;
	u->client_idle_timeout = ud ? ud->client_idle_timeout : -1;
	u->transaction_timeout = ud ? ud->transaction_timeout : -1;
	u->query_wait_timeout = ud ? ud->query_wait_timeout : -1;
}

struct puser *pool_find_user_here(struct world *w, const char *name)
{
	for (struct hnode *n = hmap_first(&w->user_map, hmap_hash_str(name)); n; n = hmap_next(n)) {
		struct puser *u = container_of(n, struct puser, hn);
		if (strcmp(u->name, name) == 0)
			return u;
	}
	return NULL;
}

struct puser *pool_find_user(struct world *w, const char *name)
{
	struct puser *u = pool_find_user_here(w, name);
	if (u && (u->authq_secret || (u->secret && *u->secret)))
		return u;                 /* auth_query's, PAM's, LDAP's, or auth_file's */
	if (!w->cfg->userlist || !userlist_find(w->cfg->userlist, name))
		return NULL;
	return u ? u : pool_get_user(w, name);
}


void pool_user_defaults(struct world *w, struct puser *u, const char *name)
{
	memset(u, 0, sizeof(*u));
	strlcpy_(u->name, name, sizeof(u->name));
	u->shm_idx = -1;
	user_apply(w, u);
	if (!u->secret)
		pool_user_set_secret(u, NULL);
}

struct puser *pool_get_user(struct world *w, const char *name)
{
	struct puser *u = pool_find_user_here(w, name);
	if (u)
		return u;
	if (strlen(name) >= NAME_MAX_LEN)
		return NULL;
	u = xcalloc(1, sizeof(*u));
	list_init(&u->idle_pools);
	strlcpy_(u->name, name, sizeof(u->name));
	u->shm_idx = shm_name_hold(SHM_USER, name);
	user_apply(w, u);
	if (!u->secret)
		pool_user_set_secret(u, NULL);
	list_append(&w->users, &u->node);
	hmap_add(&w->user_map, &u->hn, hmap_hash_str(u->name));
	return u;
}

/* ---- pools ---- */

static uint32_t pool_hash(const struct database *db, const struct puser *user)
{
	return hmap_hash(hmap_hash(HMAP_SEED, &db, sizeof(db)), &user, sizeof(user));
}

static struct pool *pool_lookup(struct database *db, struct puser *user, uint32_t h)
{
	for (struct hnode *n = hmap_first(&db->world->pool_map, h); n; n = hmap_next(n)) {
		struct pool *p = container_of(n, struct pool, hn);
		if (p->db == db && p->user == user)
			return p;
	}
	return NULL;
}

struct pool *pool_get(struct database *db, struct puser *user)
{
	uint32_t h = pool_hash(db, user);
	if (!db->admin)          /* PgBouncer's get_pool: a pool again after a KILL */
		shm_db_set_pooled(db->shm_idx);
	struct pool *p = pool_lookup(db, user, h);
	if (p)
		return p;
	p = xcalloc(1, sizeof(*p));
	p->db = db;
	p->user = user;
	list_init(&p->active_clients);
	list_init(&p->waiting_clients);
	list_init(&p->idle_servers);
	list_init(&p->idle_db_node);
	list_init(&p->idle_user_node);
	list_init(&p->active_servers);
	list_init(&p->tested_servers);
	list_init(&p->login_servers);
	list_init(&p->canceled_servers);
	varcache_init(&p->welcome_vars);
	p->last_used = util_monotonic();
	(void)pool_cell_ready(p);
	list_append(&db->world->pools, &p->node);
	hmap_add(&db->world->pool_map, &p->hn, h);
	return p;
}

static int pool_total_servers(const struct pool *p);

/* pool_idle_timeout: what other workers read of our use of p. */
static void publish_use(struct pool *p)
{
	hist_pool_set_use(p->hist, p->n_clients, pool_total_servers(p), p->last_used);
}

/* The pool's shared cell (hist.h) carries its cross-worker rules: the
 * instance's wait line, reuse order, use for pool_idle_timeout. A pool
 * lets go of it when it has had nothing in this worker for a while
 * (pool_idle.c) and takes it again when something comes. */
bool pool_cell_ready(struct pool *p)
{
	bool fresh;
	if (p->hist || p->db->admin)
		return true;
	p->hist = hist_pool_hold(p->db->name, p->user->name, &fresh);
	if (!p->hist)
		return !hist_enabled();
	/* No worker held the pool: none has its welcome (the supervisor's copy
	 * of an earlier one is swept), and no server of it is counted: the
	 * first login opens a server without asking (one round trip less for
	 * every new tenant's first client). */
	if (fresh && !p->welcome_ready && p->welcome_asked == 0)
		p->welcome_asked = 2;
	publish_use(p);
	return true;
}

/* The shared name slots (shm.h) a login counts against: taken again if a
 * full table refused them when the database or user was made. */
bool pool_names_ready(struct database *db, struct puser *u)
{
	if (!shm_enabled())
		return true;
	if (db->shm_idx < 0)
		db->shm_idx = shm_name_hold(SHM_DB, db->name);
	if (u && u->shm_idx < 0)
		u->shm_idx = shm_name_hold(SHM_USER, u->name);
	return db->shm_idx >= 0 && (!u || u->shm_idx >= 0);
}

bool pool_cell_release(struct pool *p)
{
	bool last = hist_pool_release(p->hist);
	p->hist = NULL;
	return last;
}

/* ---- use (pool_idle_timeout, see pool_idle.c) ----
 * A client counts from the moment it points at the pool (before it has
 * logged in) to the moment it is freed; a server connection from its
 * creation to its close. Each coming and going is the pool's last use.
 * Published in the pool's shared cell: with several workers a pool is
 * unused only when no worker has a client or a server connection of it. */

void pool_client_in(struct pool *p)
{
	p->n_clients++;
	p->last_used = util_monotonic();
	/* Without a cell (the table full) the login is refused (client.c). */
	(void)pool_cell_ready(p);
	publish_use(p);
}

void pool_client_out(struct pool *p)
{
	p->n_clients--;
	p->last_used = util_monotonic();
	publish_use(p);
}

void pool_servers_changed(struct pool *p)
{
	p->last_used = util_monotonic();
	publish_use(p);
}

static void pool_free(struct pool *p)
{
	list_del(&p->idle_db_node);
	list_del(&p->idle_user_node);
	list_del(&p->node);
	hmap_del(&p->db->world->pool_map, &p->hn);
	varcache_clear(&p->welcome_vars);
	for (int i = 0; i < p->n_welcome_other * 2; i++)
		free(p->welcome_other[i]);
	free(p->welcome_other);
	free(p);
}

bool pool_destroy(struct pool *p)
{
	stats_flush_pool(p);
	bool last = pool_cell_release(p);
	pool_free(p);
	return last;
}

int pool_size_of(const struct pool *p)
{
	if (p->user->pool_size >= 0)
		return p->user->pool_size;
	if (p->db->pool_size >= 0)
		return p->db->pool_size;
	return p->db->world->cfg->default_pool_size;
}

int pool_reserve_of(const struct pool *p)
{
	if (p->user->reserve_pool_size >= 0)
		return p->user->reserve_pool_size;
	if (p->db->reserve_pool_size >= 0)
		return p->db->reserve_pool_size;
	return p->db->world->cfg->reserve_pool_size;
}

usec_t pool_server_lifetime(const struct pool *p)
{
	return p->db->server_lifetime >= 0 ? p->db->server_lifetime : p->db->world->cfg->server_lifetime;
}

usec_t pool_query_wait_timeout(const struct pool *p)
{
	if (p->user->query_wait_timeout >= 0)
		return p->user->query_wait_timeout;
	if (p->db->query_wait_timeout >= 0)
		return p->db->query_wait_timeout;
	return p->db->world->cfg->query_wait_timeout;
}

static int pool_total_servers(const struct pool *p)
{
	return p->n_idle + p->n_active + p->n_tested + p->n_login + p->n_canceled;
}

/* Who needs a pooled server: waiting clients and auth_query lookups (a
 * replication client waits for a server of its own). */
static int pool_waiters(const struct pool *p)
{
	return p->n_waiting_clients - p->n_repl_waiting + p->n_auth_waiting;
}

/* ---- server slots ----
 * With one worker, limits are counted here. With several, pool_size and
 * max_db/user_connections mean the instance: a worker asks the supervisor's
 * ledger for a slot before it opens a server (the request id says why), and
 * gives it back when the server closes. Local counts stay a pre-check. */

enum slot_why { SLOT_FOR_WAITER = 1, SLOT_FOR_RESERVE, SLOT_FOR_MIN, SLOT_FOR_REPL, SLOT_FOR_MOVE };

static bool shared_limits(void)
{
	return shm_n_workers() > 1;
}

/* The reuse order over the instance (below). */
static void serve_held(struct pool *p);
static void move_answer(struct world *w, struct pool *p, const struct slot_req *r, bool granted);
static bool reuse_elsewhere(struct pool *p, const struct server *sv, usec_t now);
static bool wait_for_move(struct client *c, struct server *sv, usec_t now);
static struct server *give_pick(const struct pool *p, usec_t now, usec_t *left);
static void server_ready(struct server *sv, bool released);
static bool check_idle(struct pool *p);

static void fill_req(const struct pool *p, struct slot_req *r)
{
	memset(r, 0, sizeof(*r));
	strlcpy_(r->db, p->db->name, sizeof(r->db));
	strlcpy_(r->user, p->user->name, sizeof(r->user));
	r->db_limit = p->db->max_db_connections;
	r->user_limit = p->user->max_user_connections;
}

static bool ask_slot(struct pool *p, enum slot_why why)
{
	struct slot_req r;
	int size = pool_size_of(p);

	fill_req(p, &r);
	r.pool_limit = size;
	if (why == SLOT_FOR_RESERVE)
		r.pool_limit = size + pool_reserve_of(p);
	else if (why == SLOT_FOR_MIN && p->db->min_pool_size < size)
		r.pool_limit = p->db->min_pool_size;
	r.wait = why == SLOT_FOR_WAITER;
	r.asked_at = util_monotonic();
	if (ipc_send_slot(p->db->world->sup, IPC_SLOT_REQ, why, &r) < 0)
		return false;
	p->n_slot_wait++;
	if (why == SLOT_FOR_RESERVE)
		p->reserve_asked = true;
	return true;
}

void pool_slot_release_req(struct world *w, const struct slot_req *r)
{
	if (ipc_send_slot(w->sup, IPC_SLOT_RELEASE, 0, r) < 0)
		log_warning("could not return a server slot of %s/%s to the supervisor", r->db, r->user);
}

void pool_slot_release_names(struct world *w, const char *db, const char *user)
{
	struct slot_req r;
	memset(&r, 0, sizeof(r));
	strlcpy_(r.db, db, sizeof(r.db));
	strlcpy_(r.user, user, sizeof(r.user));
	pool_slot_release_req(w, &r);
}

void pool_slot_release_claim(struct pool *p, uint8_t claim)
{
	struct slot_req r;
	fill_req(p, &r);
	r.claim = claim;
	pool_slot_release_req(p->db->world, &r);
}

void pool_slot_release(struct pool *p)
{
	pool_slot_release_claim(p, SLOT_CLAIM_NONE);
}

/* By the names' maps, then the pools' (a database and a user object are
 * in their maps for as long as they exist, one per name): the supervisor's
 * ledger asks this for every pool that waits, ten times a second, and a
 * walk over 10,000 pools made that the worker's main cost. */
struct pool *pool_find_names(struct world *w, const char *db, const char *user)
{
	struct database *d = pool_find_db(w, db);
	struct puser *u = d ? pool_find_user_here(w, user) : NULL;
	return u ? pool_lookup(d, u, pool_hash(d, u)) : NULL;
}

struct pool *pool_get_names(struct world *w, const char *db, const char *user)
{
	struct database *d = pool_get_db(w, db);
	struct puser *u = d && !d->admin ? pool_get_user(w, user) : NULL;
	return u ? pool_get(d, u) : NULL;
}

void pool_refuse_waiters(struct world *w, const char *why)
{
	struct list *it, *c, *tmp;
	list_for_each(it, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		list_for_each_safe(c, tmp, &p->waiting_clients)
			client_close(container_of(c, struct client, node), true, why);
	}
}

/* DISABLE only refuses new clients: existing ones still get servers.
 * While paused nothing is opened (PAUSE waits for servers to go). */
static bool launch_blocked(const struct pool *p)
{
	/* Handing over to a new process, the clients that stay (TLS, busy)
	 * still need servers. */
	const struct world *w = p->db->world;
	bool stopping = w->shutting_down && w->shutdown_mode != SHUTDOWN_HANDOVER;
	return p->db->dead || p->db->admin || stopping || w->suspended || pool_paused(p);
}

/* Under a full max_db_connections / max_user_connections a waiter's slot
 * is usually one another pool's server was closed for (PgBouncer's
 * eviction): PgBouncer evicts and opens in one step, so the backend is
 * opened even if the waiter was served meanwhile, or PostgreSQL would end
 * with fewer backends than one PgBouncer keeps. */
static bool slot_still_needed(const struct pool *p, enum slot_why why)
{
	if (launch_blocked(p))
		return false;
	if (why == SLOT_FOR_MIN)
		return pool_total_servers(p) < p->db->min_pool_size;
	if (why == SLOT_FOR_WAITER && (p->db->max_db_connections > 0 || p->user->max_user_connections > 0) &&
	    pool_total_servers(p) < pool_size_of(p))
		return true;
	return pool_waiters(p) > p->n_login + p->n_tested;
}

void pool_slot_taken(struct pool *p, uint32_t why)
{
	if (why == SLOT_FOR_REPL) {
		p->n_repl_slot_wait--;
		return;
	}
	if (why == SLOT_FOR_MOVE) {
		p->n_move_wait--;
		return;
	}
	p->n_slot_wait--;
	if (why == SLOT_FOR_RESERVE)
		p->reserve_asked = false;
}

static void repl_slot_answer(struct pool *p, const struct slot_req *r, bool granted);
static void repl_take_idle(struct pool *p);

void pool_slot_answer(struct world *w, const struct slot_req *r, uint32_t why, bool granted)
{
	struct pool *p = pool_find_names(w, r->db, r->user);

	if (why == IPC_SLOT_NOT_QUEUED) {
		if (p && p->n_repl_withdrawing > 0)
			p->n_repl_withdrawing--;
		return;
	}

	if (p)
		pool_slot_taken(p, why);
	/* The ledger echoes the request, with when it was asked. */
	if (granted && r->asked_at > 0)
		hist_phase_observe(HIST_PHASE_SLOT_WAIT, (uint64_t)(util_monotonic() - r->asked_at));
	if (why == SLOT_FOR_REPL) {
		if (p)
			repl_slot_answer(p, r, granted);
		return;
	}
	if (why == SLOT_FOR_MOVE) {
		move_answer(w, p, r, granted);
		return;
	}
	if (!granted)
		return;
	if (!p || !slot_still_needed(p, (enum slot_why)why)) {
		if (ipc_send_slot(w->sup, IPC_SLOT_RELEASE, 0, r) < 0)
			log_warning("could not return an unneeded server slot");
		return;
	}
	if (why == SLOT_FOR_RESERVE)
		log_info("taking connection from reserve_pool");
	(void)server_launch(p, true);
}

/* Other workers' clients wait for this pool while it is full. A server
 * that can move goes to them as below (first come, first served). One that
 * cannot (TLS) costs a new backend on the other side: it goes as soon as
 * it is idle when we hold more than our fair share, or once it has sat
 * idle for GIVE_IDLE_USEC when a worker below its rounded-down share
 * waits; a worker that has its share waits for its own servers, or every
 * change of load would cost backends. */
#define GIVE_IDLE_USEC (20 * USEC_PER_MSEC)

static struct event *give_timer;
static usec_t give_timer_at;          /* when the pending give_timer fires */

static void on_give_timer(evutil_socket_t fd, short what, void *arg)
{
	struct world *w = arg;
	struct list *it;
	give_timer_at = 0;
	list_for_each(it, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (p->wanted > 0)
			pool_give_idle(p);
	}
}

/* One server goes to another worker: count it against the asks. */
static void note_given(struct pool *p)
{
	if (p->give_up > 0)
		p->give_up--;
	if (p->wanted > 0)
		p->wanted--;
	if (p->wanted_soon > 0)
		p->wanted_soon--;
	if (p->wanted == 0)
		p->other_since = 0;
}

/* ---- first come, first served across workers ----
 * A server that can move (server_may_move) goes to whichever client has
 * waited longest in the instance: another worker's (the wait lines in
 * shared memory, hist.h) or another pool's held back by a full
 * max_db_connections / max_user_connections (the ledger's oldest such
 * request). Our own first waiter keeps it unless the other has waited
 * twice as long, and at least FIFO_SLACK_USEC longer: two workers whose
 * queues are about as old do not trade servers back and forth (each move
 * idles the server for a few hundred microseconds and costs three
 * processes a message), while a worker that gets no server at all is
 * served within about twice the wait of the others' clients. */
#define FIFO_SLACK_USEC (5 * USEC_PER_MSEC)
#define MOVE_MIN_USEC (1 * USEC_PER_MSEC)

/* A server a worker has just released stays for that worker's own clients
 * MOVE_MIN_USEC (below), or FIFO_SLACK_USEC while its clients contend for
 * the pool (one has waited within CONTENDED_USEC) and it holds no more
 * than its clients' share of the pool. Two busy workers each holding their
 * share would otherwise trade servers at every lull of a millisecond in
 * either (measured: 25-40 moves per 1,000 transactions of pgbench -S, 40
 * clients, pool 20, 2 workers, each costing the giver, the supervisor and
 * the taker a message and the server a few hundred microseconds idle),
 * while their clients ask again a moment later. Under light load nobody
 * waits and the 1 ms holds; a worker holding more than its share gives at
 * once as before. */
#define CONTENDED_USEC (20 * USEC_PER_MSEC)
#define POOL_WAITING_NOW INT64_MAX

bool pool_within_share(int held, int size, int mine, int all)
{
	if (all <= 0 || mine <= 0 || size <= 0)
		return false;
	/* held <= ceil(size * mine / all): rounded up, the shares add up to
	 * at least the pool, so two workers split 21/19 over 20 servers are
	 * both content with 11 and 10 rather than trading the twentieth. */
	return (int64_t)held * all < (int64_t)size * mine + all;
}

static usec_t stay_for_own(const struct pool *p, usec_t now)
{
	bool contended = p->waited_last == POOL_WAITING_NOW ||
		(p->waited_last && now - p->waited_last < CONTENDED_USEC);
	if (contended && pool_within_share(pool_total_servers(p), pool_size_of(p), p->n_clients,
					   hist_pool_clients_all(p->hist)))
		return FIFO_SLACK_USEC;
	return MOVE_MIN_USEC;
}

/* Since when the oldest client elsewhere that this pool's server could
 * serve has waited; 0 for none. Cheap when nobody asked (p->wanted). */
static usec_t waiting_elsewhere(const struct pool *p)
{
	if (p->wanted <= 0)
		return 0;
	usec_t other = hist_pool_wait_elsewhere(p->hist);
	if (p->other_since && (!other || p->other_since < other))
		other = p->other_since;
	return other;
}

/* The first client waiting for a server. One still waiting for the pool's
 * welcome parameters (CLIENT_WAITING_LOGIN) is not logged in yet: it is
 * served by client_pool_ready(), never linked to a server. */
static struct client *first_waiter(const struct pool *p)
{
	const struct list *it;
	list_for_each(it, &p->waiting_clients) {
		struct client *c = container_of(it, struct client, node);
		if (c->state == CLIENT_WAITING && c->repl == REPL_NONE)
			return c;
	}
	return NULL;
}

/* Our oldest waiter's start, 0 for none: a client, or an auth_query
 * lookup (those are served first). */
static usec_t waiting_here(const struct pool *p)
{
	const struct client *c = first_waiter(p);
	usec_t t = c ? c->request_time : 0, a = authquery_waiting_since(p);
	return a && (!t || a < t) ? a : t;
}

/* The same for the wait line, where a client that waits for the pool's
 * welcome counts too (it needs a server's login, or one moved here), and a
 * replication client (room for its own server: an idle one here is closed
 * for it). */
static usec_t line_head(const struct pool *p)
{
	struct list *it = list_first(&p->waiting_clients);
	usec_t t = waiting_here(p);
	if (!it)
		return t;
	const struct client *c = container_of(it, struct client, node);
	usec_t since = c->state == CLIENT_WAITING_LOGIN ? c->connect_time : c->request_time;
	if ((c->state == CLIENT_WAITING_LOGIN || c->repl != REPL_NONE) && (!t || since < t))
		return since;
	return t;
}

static bool first_in_line_elsewhere(const struct pool *p)
{
	if (pool_paused(p))
		return false;         /* PAUSE holds every worker: nothing to serve */
	usec_t other = waiting_elsewhere(p), mine = waiting_here(p);
	if (!other)
		return false;
	usec_t now = util_monotonic(), waited = now - mine;
	if (!mine)            /* none of ours waits: a real wait elsewhere takes it */
		return now - other >= stay_for_own(p, now);
	return now - other > waited + (waited > FIFO_SLACK_USEC ? waited : FIFO_SLACK_USEC);
}

void pool_wait_line(struct pool *p)
{
	if (!shared_limits() || !p->hist)
		return;
	usec_t head = line_head(p);
	if (head)
		p->waited_last = POOL_WAITING_NOW;
	else if (p->waited_last == POOL_WAITING_NOW)
		p->waited_last = util_monotonic();
	hist_pool_set_wait(p->hist, head);
}

/* Look at the idle servers again in `left` (one timer for all pools:
 * keep the earliest time). */
static void arm_give_timer(struct world *w, usec_t left)
{
	usec_t now = util_monotonic();
	struct timeval tv = { (time_t)(left / USEC_PER_SEC), (suseconds_t)(left % USEC_PER_SEC) };
	if (!give_timer)
		give_timer = event_new(w->base, -1, 0, on_give_timer, w);
	if (!event_pending(give_timer, EV_TIMEOUT, NULL) || now + left < give_timer_at) {
		event_add(give_timer, &tv);
		give_timer_at = now + left;
	}
}

/* Our servers are wanted by other pools' clients only (a full
 * max_db_connections / max_user_connections; pool_want.same == 0): only a
 * close serves them, so it is closed here ("evicted", as PgBouncer's
 * eviction) and the supervisor told, not offered to it to be sent back
 * for closing. The slot returns with the close. */
static bool close_for_others(struct pool *p, struct server *sv, bool soon)
{
	struct slot_req r;
	if (p->wanted_same > 0 || !shared_limits())
		return false;
	fill_req(p, &r);
	if (ipc_send_slot(p->db->world->sup, IPC_EVICT_DONE, 0, &r) < 0)
		return false;
	if (soon)
		server_close_soon(sv, "evicted");
	else
		server_close(sv, "evicted");
	return true;
}

/* Nobody of p waits, here or in another worker, and requests of other
 * pools of its database (user) wait for a close that no idle server was
 * found for: this server, come free, is closed for them instead of going
 * idle ("evicted"), if it is the first to claim the close (shm.h's
 * eviction claims); the supervisor hears of it as of any close for
 * others. */
static bool claim_for_others(struct pool *p, struct server *sv)
{
	/* Every release of a server comes here: the offers first (a load
	 * each, nearly always none), the other workers' wait lines after. */
	if (!shared_limits() || !sv->has_slot || p->n_waiting_clients > 0 || p->n_auth_waiting > 0 ||
	    (shm_evict_open(p->db->shm_idx) == 0 && shm_evict_open(p->user->shm_idx) == 0) ||
	    hist_pool_wait_elsewhere(p->hist))
		return false;
	if (shm_evict_claim(p->db->shm_idx))
		sv->claim = SLOT_CLAIM_DB;
	else if (shm_evict_claim(p->user->shm_idx))
		sv->claim = SLOT_CLAIM_USER;
	else
		return false;
	server_close_soon(sv, "evicted");
	return true;
}

/* How much longer an idle server stays before it moves to a client of
 * another worker (0: now). A move idles the server a few hundred
 * microseconds, and the client of ours that has just released it usually
 * asks again sooner than that: a server idle for less than MOVE_MIN_USEC
 * (FIFO_SLACK_USEC while our clients contend and we hold no more than our
 * share, stay_for_own) stays for it, unless the client elsewhere has
 * already waited that long.
 * A server idle for longer goes at once (a lone client elsewhere gets it
 * within a move, as from one PgBouncer's idle list). */
static usec_t move_delay(const struct pool *p, const struct server *sv, usec_t now)
{
	usec_t idle = now - sv->last_used, waited = now - waiting_elsewhere(p);
	usec_t stay = stay_for_own(p, now);
	if (idle >= stay || waited >= stay)
		return 0;
	return stay - (idle > waited ? idle : waited);
}

/* A server that cannot move costs a new backend on the other side: only
 * one beyond our share goes, or one that has sat idle a while when a
 * worker below its rounded-down share waits (a worker that has its share
 * waits for its own servers, or every change of load would cost
 * backends). False: keep it (the timer looks again when it may go). */
static bool may_give_unmovable(struct pool *p, const struct server *sv, usec_t now)
{
	if (p->give_up > 0)
		return true;
	if (p->wanted_soon <= 0)
		return false;
	if (now - sv->last_used < GIVE_IDLE_USEC) {
		arm_give_timer(p->db->world, GIVE_IDLE_USEC - (now - sv->last_used));
		return false;
	}
	return true;
}

void pool_give_idle(struct pool *p)
{
	usec_t now = util_monotonic(), left;
	struct list *it;
	while (p->wanted > 0 && (it = p->idle_servers.prev) != &p->idle_servers) {
		struct server *sv = container_of(it, struct server, node);   /* the longest idle */
		/* An ask with nobody waiting any more is stale: keep it. */
		if (!waiting_elsewhere(p))
			break;
		if (server_may_move(sv)) {
			if (pool_paused(p))
				break;        /* PAUSE holds every worker: nothing to serve */
			if ((sv = give_pick(p, now, &left)) == NULL) {
				if (left > 0)
					arm_give_timer(p->db->world, left);
				break;
			}
		} else if (!may_give_unmovable(p, sv, now)) {
			break;
		}
		note_given(p);
		if (close_for_others(p, sv, false))
			continue;
		if (!mover || !mover(sv))
			server_close(sv, "released to another worker");
	}
}

void pool_slot_wanted(struct world *w, const struct pool_want *want)
{
	struct pool *p = pool_find_names(w, want->pool.db, want->pool.user);
	if (!p)
		return;
	p->wanted = want->n;
	p->wanted_soon = want->soon < want->n ? want->soon : want->n;
	p->wanted_same = want->same < want->n ? want->same : want->n;
	p->give_up = want->over < want->n ? want->over : want->n;
	p->other_since = want->n > 0 ? (usec_t)want->other_since : 0;
	log_noise("pool %s/%s: wanted elsewhere %d (in a hurry %d), beyond our share %d (servers %d, idle %d)",
		  p->db->name, p->user->name, want->n, p->wanted_soon, want->over, pool_total_servers(p), p->n_idle);
	if (want->n > 0)
		repl_take_idle(p);
	pool_give_idle(p);
}

/* max_db_connections or max_user_connections is full: close an idle server
 * of another pool of the same database (or user) to make room, as
 * PgBouncer does. */
static bool retire_idle(struct pool *p, bool keep_slot);

/* The longest idle server of a pool on an idle-pool list (one
 * database's, or one user's), other than `except`. */
static bool evict_from(struct list *head, bool db_list, const struct pool *except)
{
	struct list *it;
	list_for_each(it, head) {
		struct pool *o = db_list ? container_of(it, struct pool, idle_db_node)
					 : container_of(it, struct pool, idle_user_node);
		if (o != except && retire_idle(o, false))
			return true;
	}
	return false;
}

static bool evict_idle(const struct pool *p, bool same_db)
{
	return evict_from(same_db ? &p->db->idle_pools : &p->user->idle_pools, same_db, p);
}

/* ---- replication clients ----
 * A replication client gets a server of its own (its walsender), never a
 * pooled one, but that server counts in pool_size, max_db_connections and
 * max_user_connections as in PgBouncer: where a limit is full an idle
 * server in the way is closed for it ("evicted"), and without one the
 * client waits in the pool's queue (cl_waiting, query_wait_timeout) until
 * a server closes. With several workers its slot comes from the ledger as
 * a request for a server of its own: the workers holding idle servers in
 * the way are asked to close them (a move cannot serve a walsender), and a
 * server closed here for it hands its slot straight to the new one. */

/* The first replication client still without a server of its own, after
 * `skip` of them. */
static struct client *repl_waiter(const struct pool *p, int skip)
{
	const struct list *it;
	list_for_each(it, &p->waiting_clients) {
		struct client *c = container_of(it, struct client, node);
		if (c->repl != REPL_NONE && !c->repl_server && skip-- <= 0)
			return c;
	}
	return NULL;
}

static int repl_unserved(const struct pool *p)
{
	int n = 0;
	while (repl_waiter(p, n))
		n++;
	return n;
}

/* Slot requests still standing for them (the first ones wait on those). */
static int repl_asked(const struct pool *p)
{
	return p->n_repl_slot_wait - p->n_repl_withdrawing;
}

/* The longest idle server of p closed to make room; keep_slot: its slot
 * is the caller's, for the new server. */
static bool retire_idle(struct pool *p, bool keep_slot)
{
	for (struct list *it = p->idle_servers.prev; it != &p->idle_servers; it = it->prev) {
		struct server *sv = container_of(it, struct server, node);
		if (sv->give_away)
			continue;         /* on its way to another worker */
		if (keep_slot)
			sv->has_slot = false;
		server_close(sv, "evicted");
		return true;
	}
	return false;
}

/* The named pool's idle server, or, when its client took it meanwhile,
 * another pool's of the database (user) whose limit is in the way
 * (slot_req.claim says which): any one frees the slot the request waits
 * for, and the supervisor counts its release as that close. */
void pool_evict_asked(struct world *w, const struct slot_req *r)
{
	struct pool *p = pool_find_names(w, r->db, r->user);
	if (p && retire_idle(p, false))
		return;
	struct database *d = r->claim == SLOT_CLAIM_DB ? pool_find_db(w, r->db) : NULL;
	struct puser *u = r->claim == SLOT_CLAIM_USER ? pool_find_user_here(w, r->user) : NULL;
	if ((d && evict_from(&d->idle_pools, true, NULL)) || (u && evict_from(&u->idle_pools, false, NULL)))
		return;
	if (ipc_send_slot(w->sup, IPC_EVICT_NONE, 0, r) < 0)
		log_warning("could not tell the supervisor that %s/%s has no idle server to evict", r->db, r->user);
}

/* One worker: room for one more server of p, once idle servers in the way
 * are closed (p's, or another pool's for a full database or user limit). */
static bool repl_room_here(struct pool *p)
{
	int size = pool_size_of(p);
	while (size > 0 && pool_total_servers(p) >= size)
		if (!retire_idle(p, false))
			return false;
	if (p->db->max_db_connections > 0 && p->db->n_servers >= p->db->max_db_connections &&
	    !retire_idle(p, false) && !evict_idle(p, true))
		return false;
	if (p->user->max_user_connections > 0 && p->user->n_servers >= p->user->max_user_connections &&
	    !retire_idle(p, false) && !evict_idle(p, false))
		return false;
	return true;
}

/* A waiting request the ledger treats apart: for a server of a client's
 * own (SLOT_FOR_REPL) or that only a move serves (SLOT_FOR_MOVE); *pending
 * counts it until answered. */
static bool ask_apart(struct pool *p, enum slot_why why, int *pending)
{
	struct slot_req r;
	fill_req(p, &r);
	r.pool_limit = pool_size_of(p);
	r.wait = 1;
	r.own = why == SLOT_FOR_REPL;
	r.move = why == SLOT_FOR_MOVE;
	r.asked_at = util_monotonic();
	if (ipc_send_slot(p->db->world->sup, IPC_SLOT_REQ, why, &r) < 0)
		return false;
	(*pending)++;
	return true;
}

static bool ask_repl_slot(struct pool *p)
{
	return ask_apart(p, SLOT_FOR_REPL, &p->n_repl_slot_wait);
}

/* More requests stand than clients wait (a client left, or one was served
 * by a server closed here): take the extra ones back, or the ledger would
 * have servers closed elsewhere for nobody. */
static void repl_trim_asks(struct pool *p)
{
	struct slot_req r;
	int extra = repl_asked(p) - repl_unserved(p);

	if (!shared_limits() || extra <= 0)
		return;
	fill_req(p, &r);
	while (extra-- > 0 && ipc_send_slot(p->db->world->sup, IPC_SLOT_WITHDRAW, SLOT_FOR_REPL, &r) == 0)
		p->n_repl_withdrawing++;
}

/* c's server takes the slot of a server just closed for it (or none, with
 * one worker). */
static void repl_launch(struct pool *p, struct client *c, bool with_slot)
{
	(void)server_launch_replication(c, with_slot);
	repl_trim_asks(p);
}

/* Launch for every waiting replication client that has room, ask the
 * ledger for the others. A failed launch closes its client, so the loop
 * always moves on. */
static void repl_serve(struct pool *p)
{
	struct client *c;

	repl_trim_asks(p);
	if (launch_blocked(p))
		return;
	while ((c = repl_waiter(p, repl_asked(p))) != NULL) {
		if (!shared_limits()) {
			if (!repl_room_here(p))
				return;
			repl_launch(p, c, false);
			continue;
		}
		/* This worker's servers alone fill the pool: one of them is in
		 * the way, whatever the others hold. */
		int size = pool_size_of(p);
		if (size > 0 && pool_total_servers(p) >= size && retire_idle(p, true)) {
			repl_launch(p, c, true);
			continue;
		}
		if (!ask_repl_slot(p))
			return;
	}
}

static void repl_slot_answer(struct pool *p, const struct slot_req *r, bool granted)
{
	if (!granted) {                   /* withdrawn */
		if (p->n_repl_withdrawing > 0)
			p->n_repl_withdrawing--;
		repl_serve(p);
		return;
	}
	struct client *c = launch_blocked(p) ? NULL : repl_waiter(p, 0);
	if (!c) {
		if (ipc_send_slot(p->db->world->sup, IPC_SLOT_RELEASE, 0, &r[0]) < 0)
			log_warning("could not return an unneeded server slot");
		return;
	}
	repl_launch(p, c, true);
}

/* Asked to give up idle servers while our own replication client waits
 * for room: ours are in its way first. */
static void repl_take_idle(struct pool *p)
{
	struct client *c;
	while (repl_asked(p) > 0 && !launch_blocked(p) && (c = repl_waiter(p, 0)) != NULL &&
	       retire_idle(p, true))
		repl_launch(p, c, true);
}

/* A server is free here while a replication client has waited longer than
 * any other client: it is in that client's way (or the client would not
 * wait). Closed, its slot goes to the client's own server. */
static bool repl_takes(struct pool *p, struct server *sv)
{
	struct client *c = repl_waiter(p, 0), *w = first_waiter(p);
	if (!c || (w && w->request_time < c->request_time) || launch_blocked(p))
		return false;
	bool slot = sv->has_slot;
	sv->has_slot = false;
	server_close_soon(sv, "evicted");
	repl_launch(p, c, slot);
	return true;
}

/* Several workers: the limit is full over the instance as the ledger last
 * published it (shm_name_servers), though not by this worker's servers
 * alone. */
static bool full_wide(int limit, int shm_idx)
{
	return limit > 0 && shm_name_servers(shm_idx) >= limit;
}

/* Several workers, max_db_connections (max_user_connections) full over
 * the instance: an idle server of another pool of the database (user)
 * here is closed before the slot is asked for, its release going in the
 * same batch as the request (pool_launch_needed corks the channel), which
 * the ledger then grants at once: in place of the ledger asking a holder
 * to close one and granting when its release comes, two more wake-ups of
 * each process. One close at most: its slot may serve both limits, and
 * the ledger still evicts elsewhere what is left. */
static void evict_for_wide(struct pool *p)
{
	if (!shared_limits())
		return;
	if (full_wide(p->db->max_db_connections, p->db->shm_idx) && evict_idle(p, true))
		return;
	if (full_wide(p->user->max_user_connections, p->user->shm_idx))
		(void)evict_idle(p, false);
}

/* May this pool open one more server connection now (by local counts)?
 * The answer says whether it would come from the reserve pool. */
enum launch_ok { LAUNCH_NO, LAUNCH_POOL, LAUNCH_RESERVE };

static enum launch_ok can_launch(struct pool *p, bool for_waiter)
{
	const struct config *cfg = p->db->world->cfg;
	usec_t now = util_monotonic();
	int total = pool_total_servers(p) + p->n_slot_wait;
	int size = pool_size_of(p);
	int logins = p->n_login + p->n_slot_wait;

	if (launch_blocked(p))
		return LAUNCH_NO;
	if (logins >= (cfg->server_login_concurrency > 0 ? cfg->server_login_concurrency : 1))
		return LAUNCH_NO;
	if (p->login_failed_at && now - p->login_failed_at < cfg->server_login_retry)
		return LAUNCH_NO;
	/* target_session_attrs: every host in its back-off (a failover under
	 * way): wait, the janitor asks again. */
	if (hostrole_tsa(p->db) != TSA_ANY && hostrole_pick(p->db, 0) < 0)
		return LAUNCH_NO;
	bool db_full = p->db->max_db_connections > 0 && p->db->n_servers >= p->db->max_db_connections;
	bool user_full = p->user->max_user_connections > 0 &&
			 p->user->n_servers >= p->user->max_user_connections;
	if (db_full && !evict_idle(p, true))
		return LAUNCH_NO;
	if (user_full && !evict_idle(p, false))
		return LAUNCH_NO;
	if (total < size) {
		/* A close just made here counts: the published total does not
		 * show it yet, and a second would be one too many. */
		if (!db_full && !user_full)
			evict_for_wide(p);
		return LAUNCH_POOL;
	}
	/* Reserve: only for clients that have waited reserve_pool_timeout. */
	if (!for_waiter || total >= size + pool_reserve_of(p) || list_empty(&p->waiting_clients))
		return LAUNCH_NO;
	struct client *first = container_of(p->waiting_clients.next, struct client, node);
	if (now - first->request_time < cfg->reserve_pool_timeout)
		return LAUNCH_NO;
	return LAUNCH_RESERVE;
}

/* Several workers: the ledger may be full although this worker is not. A
 * client waiting past reserve_pool_timeout asks once more, for the reserve. */
static void ask_reserve(struct pool *p)
{
	const struct config *cfg = p->db->world->cfg;
	if (p->reserve_asked || pool_reserve_of(p) <= 0 || launch_blocked(p))
		return;
	struct list *it = list_first(&p->waiting_clients);
	if (!it || p->n_waiting_clients - p->n_repl_waiting <= p->n_login)
		return;
	struct client *first = container_of(it, struct client, node);
	if (util_monotonic() - first->request_time >= cfg->reserve_pool_timeout)
		(void)ask_slot(p, SLOT_FOR_RESERVE);
}

static bool launch(struct pool *p, enum launch_ok ok, enum slot_why why)
{
	/* A server only for a pool whose cross-worker rules have a cell
	 * (min_pool_size may launch for a pool no client holds). */
	if (!pool_cell_ready(p))
		return false;
	if (shared_limits())
		return ask_slot(p, ok == LAUNCH_RESERVE ? SLOT_FOR_RESERVE : why);
	if (ok == LAUNCH_RESERVE)
		log_info("taking connection from reserve_pool");
	return server_launch(p, false);
}

/* ---- welcome parameters shared between workers ----
 * A pool's first server login gives its clients their welcome. With several
 * workers the supervisor keeps a copy, so a worker new to a pool answers
 * logins at once instead of needing a server (perhaps held elsewhere): sent
 * when another worker holds the pool, else fetched when one asks. */

static void welcome_share(struct pool *p);

void pool_welcome_param(struct pool *p, const char *k, const char *v)
{
	for (int i = 0; i < p->n_welcome_other; i++) {
		if (strcmp(p->welcome_other[2 * i], k) == 0) {
			free(p->welcome_other[2 * i + 1]);
			p->welcome_other[2 * i + 1] = xstrdup(v);
			return;
		}
	}
	p->welcome_other = xrealloc(p->welcome_other, sizeof(char *) * (size_t)(2 * p->n_welcome_other + 2));
	if (!p->welcome_other)
		fatal("out of memory");
	p->welcome_other[2 * p->n_welcome_other] = xstrdup(k);
	p->welcome_other[2 * p->n_welcome_other + 1] = xstrdup(v);
	p->n_welcome_other++;
}

void pool_welcome_store(struct pool *p, const struct varcache *vars)
{
	p->welcome_ready = true;
	varcache_copy(&p->welcome_vars, vars);
}

void pool_welcome_release(struct pool *p)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &p->waiting_clients) {
		struct client *c = container_of(it, struct client, node);
		if (c->state == CLIENT_WAITING_LOGIN)
			client_pool_ready(c);
	}
	/* The supervisor's copy is for the other workers: with none holding
	 * the pool (a new tenant's first login, every login in a rotation of
	 * roles) it is asked for if one comes, and one message less is sent
	 * now (a wake-up of the supervisor per new pool). */
	if (!p->hist || hist_pool_shared(p->hist))
		welcome_share(p);
}

void pool_welcome_set(struct pool *p, const struct varcache *vars)
{
	pool_welcome_store(p, vars);
	pool_welcome_release(p);
}

static bool put_pair(struct pktbuf *pb, const char *k, const char *v)
{
	pktbuf_put_string(pb, k);
	pktbuf_put_string(pb, v);
	return !pktbuf_failed(pb);
}

static void welcome_share(struct pool *p)
{
	struct slot_req names;
	struct pktbuf pb;

	if (!shared_limits())
		return;
	fill_req(p, &names);
	pktbuf_init(&pb, 1024);
	pktbuf_put_bytes(&pb, names.db, sizeof(names.db));
	pktbuf_put_bytes(&pb, names.user, sizeof(names.user));
	for (int i = 0; i < varcache_count(); i++)
		if (varcache_get(&p->welcome_vars, i))
			(void)put_pair(&pb, varcache_name(i), varcache_get(&p->welcome_vars, i));
	for (int i = 0; i < p->n_welcome_other; i++)
		(void)put_pair(&pb, p->welcome_other[2 * i], p->welcome_other[2 * i + 1]);
	if (pktbuf_failed(&pb) || pb.len > IPC_MAX_PAYLOAD ||
	    ipc_send(p->db->world->sup, IPC_WELCOME_PUT, 0, pb.buf, (uint32_t)pb.len, -1) < 0)
		log_warning("could not share the server parameters of %s/%s", p->db->name, p->user->name);
	pktbuf_free(&pb);
}

static void ask_welcome(struct pool *p)
{
	struct slot_req names;
	fill_req(p, &names);
	if (ipc_send(p->db->world->sup, IPC_WELCOME_GET, 0, &names, 2 * LEDGER_NAME, -1) < 0) {
		p->welcome_asked = 2;
		return;
	}
	p->welcome_asked = 1;
}

/* The pool names a welcome message starts with (LEDGER_NAME bytes each). */
static void welcome_names(const void *payload, struct slot_req *names)
{
	memset(names, 0, sizeof(*names));
	memcpy(names->db, payload, LEDGER_NAME);
	memcpy(names->user, (const char *)payload + LEDGER_NAME, LEDGER_NAME);
	names->db[LEDGER_NAME - 1] = names->user[LEDGER_NAME - 1] = 0;
}

void pool_welcome_answer(struct world *w, const void *payload, size_t len)
{
	const char *b = payload, *end = b + len;
	struct slot_req names;

	if (len < 2 * LEDGER_NAME || end[-1] != 0)
		return;
	welcome_names(payload, &names);
	struct pool *p = pool_find_names(w, names.db, names.user);
	if (!p || p->welcome_asked != 1)
		return;
	p->welcome_asked = 2;
	b += 2 * LEDGER_NAME;
	if (!p->welcome_ready && b < end) {
		while (b < end) {
			const char *k = b, *v = k + strlen(k) + 1;
			if (v >= end)
				break;
			b = v + strlen(v) + 1;
			if (!varcache_set(&p->welcome_vars, k, v))
				pool_welcome_param(p, k, v);
		}
		p->welcome_ready = true;
		struct list *it, *tmp;
		list_for_each_safe(it, tmp, &p->waiting_clients) {
			struct client *c = container_of(it, struct client, node);
			if (c->state == CLIENT_WAITING_LOGIN)
				client_pool_ready(c);
		}
	}
	pool_launch_needed(p);
}

/* The supervisor asks for the welcome another worker needs. With a server
 * login under way here (or a slot asked for a waiting client) it goes when
 * it comes, as the asker holds the pool by then; else "none here", so that
 * the asker is not kept waiting for it. */
void pool_welcome_fetched(struct world *w, const void *payload, size_t len)
{
	struct slot_req names;
	if (len < 2 * LEDGER_NAME)
		return;
	welcome_names(payload, &names);
	struct pool *p = pool_find_names(w, names.db, names.user);
	if (p && p->welcome_ready) {
		welcome_share(p);
		return;
	}
	if (p && (p->n_login > 0 || (p->n_slot_wait > 0 && pool_waiters(p) > 0)))
		return;
	if (ipc_send(w->sup, IPC_WELCOME_NONE, 0, &names, 2 * LEDGER_NAME, -1) < 0)
		log_warning("could not tell the supervisor %s/%s has no server parameters here",
			    names.db, names.user);
}

void pool_login_failed_share(struct pool *p)
{
	struct login_failure f;
	if (!shared_limits())
		return;
	memset(&f, 0, sizeof(f));
	fill_req(p, &f.pool);
	strlcpy_(f.code, p->login_error_code, sizeof(f.code));
	strlcpy_(f.msg, p->login_error, sizeof(f.msg));
	if (ipc_send_login_failure(p->db->world->sup, &f) < 0)
		log_warning("could not tell the other workers about a failed login");
}

void pool_login_failed_heard(struct world *w, const struct login_failure *f)
{
	struct pool *p = pool_find_names(w, f->pool.db, f->pool.user);
	if (!p)
		return;
	strlcpy_(p->login_error_code, f->code, sizeof(p->login_error_code));
	strlcpy_(p->login_error, f->msg, sizeof(p->login_error));
	p->login_failed_at = util_monotonic() - (f->age_usec > 0 ? (usec_t)f->age_usec : 0);
	pool_login_failed_tell(p);
}

void pool_login_failed_tell(struct pool *p)
{
	if (p->n_login > 0)
		return;
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &p->waiting_clients) {
		struct client *c = container_of(it, struct client, node);
		if (c->repl == REPL_NONE)    /* its own login is another matter */
			client_server_login_failed(c, p->login_error_code, p->login_error);
	}
	authquery_pool_failed(p, p->login_error_code, p->login_error, false);
}

void pool_forget_login_failures(struct world *w)
{
	struct list *it;
	list_for_each(it, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		p->login_failed_at = 0;
		p->login_error[0] = 0;
		p->login_error_code[0] = 0;
	}
}

static void launch_needed(struct pool *p);

/* With several workers what is sent meanwhile (an eviction's release, the
 * slot requests) goes to the supervisor in one batch. */
void pool_launch_needed(struct pool *p)
{
	struct ipc_chan *sup = shared_limits() ? p->db->world->sup : NULL;
	ipc_cork(sup);
	launch_needed(p);
	ipc_uncork(sup);
}

static void launch_needed(struct pool *p)
{
	enum launch_ok ok;

	if (p->n_repl_waiting > 0 || p->n_repl_slot_wait > 0)
		repl_serve(p);

	if (!p->welcome_ready && shared_limits() && p->welcome_asked != 2 && !p->db->admin) {
		if (p->welcome_asked == 0)
			ask_welcome(p);
		return;
	}
	if (p->reuse_held && p->n_move_wait == 0)
		serve_held(p);
	/* Waiters not yet covered by a login (or slot request) in progress,
	 * a server being tested (a check or reset running: PgBouncer's
	 * sv_tested, which its waiters wait for), or by our idle servers
	 * while one of them waits for another worker's. Then, as in
	 * PgBouncer, a stale idle server is checked before a new one is
	 * opened. */
	int held = p->reuse_held ? p->n_idle : 0;
	while (pool_waiters(p) > p->n_login + p->n_slot_wait + p->n_tested + held) {
		if (!held && !launch_blocked(p) && check_idle(p))
			continue;
		if ((ok = can_launch(p, true)) == LAUNCH_NO || !launch(p, ok, SLOT_FOR_WAITER))
			break;
	}
	if (shared_limits())
		ask_reserve(p);
	int min = p->db->min_pool_size;
	while (min > 0 && pool_total_servers(p) + p->n_slot_wait < min &&
	       pool_total_servers(p) + p->n_slot_wait < pool_size_of(p) &&
	       (ok = can_launch(p, false)) != LAUNCH_NO) {
		if (!launch(p, ok, SLOT_FOR_MIN))
			break;
	}
	/* Logins failing and retry not yet due: waiting clients get the error now. */
	if (p->login_failed_at && p->n_login == 0 && p->login_error[0] &&
	    util_monotonic() - p->login_failed_at < p->db->world->cfg->server_login_retry) {
		struct list *it, *tmp;
		list_for_each_safe(it, tmp, &p->waiting_clients) {
			struct client *c = container_of(it, struct client, node);
			if (c->repl == REPL_NONE)
				client_cached_login_error(c, p->login_error);
		}
		authquery_pool_failed(p, NULL, p->login_error, true);
	}
}

/* PgBouncer's maintenance pass, which marks idle servers "used", runs 3
 * times a second: with server_check_delay = 0 every idle server it meets
 * is marked, so one idle this long has surely met a pass. */
#define CHECK_PASS_USEC (USEC_PER_SEC / 3)

/* PgBouncer's "used": with server_check_delay > 0, a server (fresh from
 * login too) idle for that long, counted from its last answer as
 * PgBouncer's request_time; with 0, one a client released without a reset
 * query (check_due: PgBouncer puts it in "used" at release), or idle for
 * a whole maintenance period. Where PgBouncer's pass makes its checks
 * happen at random (a server idle less than a pass), pgcrew checks at
 * the end of the period, so the check is never left to chance. */
bool pool_server_stale(const struct server *sv)
{
	const struct config *cfg = server_world(sv)->cfg;
	if (!cfg->server_check_query[0] || cfg->server_check_delay < 0)
		return false;
	if (sv->check_due)
		return true;
	usec_t after = cfg->server_check_delay > 0 ? cfg->server_check_delay : CHECK_PASS_USEC;
	return util_monotonic() - sv->last_used >= after;
}

/* Send server_check_query on a stale server; false if that closed it. */
static bool run_check(struct server *sv)
{
	sv->check_due = false;
	return server_run_internal(sv, SI_CHECK, server_world(sv)->cfg->server_check_query);
}

void pool_server_released(struct server *sv)
{
	const struct config *cfg = server_world(sv)->cfg;
	if (cfg->server_check_delay == 0 && cfg->server_check_query[0])
		sv->check_due = true;
	server_ready(sv, true);
}

/* A client and its server that arrived together (online restart, session
 * pooling): linked as they were, no wait counted, no SET (their
 * parameters came along). */
void pool_link_taken(struct client *c, struct server *sv)
{
	link_attach(c, sv);
	server_set_state(sv, SERVER_ACTIVE);
}

/* The reverse, before both leave for the new process. */
void pool_unlink_leaving(struct client *c, struct server *sv)
{
	link_detach(c, sv, LINK_BOTH_GO);
}

/* Link c and sv; true when the client may proceed at once (no SET needed). */
static bool link_pair(struct client *c, struct server *sv, usec_t now)
{
	link_attach(c, sv);
	sv->check_due = false;
	server_set_state(sv, SERVER_ACTIVE);
	/* Every assignment is a wait sample, 0 when a server was ready. */
	hist_pool_observe(c->pool->hist, HIST_WAIT, c->request_time ? (uint64_t)(now - c->request_time) : 0);
	if (c->request_time) {
		c->pool->stats.wait_time += (uint64_t)(now - c->request_time);
		c->request_time = 0;
	}
	c->pool->stats.server_assignment_count++;
	/* A replication server got the client's parameters at startup. */
	size_t room = varcache_query_room(&c->vars);
	char *sql = sv->repl == REPL_NONE ? xmalloc(room) : NULL;
	if (sql && varcache_diff_query(&c->vars, &sv->vars, sql, room)) {
		for (int i = 0; i < varcache_count(); i++)
			if (varcache_get(&c->vars, i))
				sv->vars_set |= 1u << i;   /* auth_query resets them */
		/* The client resumes when the SET completes (or is closed
		 * with the server if sending fails). */
		server_debug(sv, "varcache_apply: %s", sql);
		(void)server_run_internal(sv, SI_SETVARS, sql);
		free(sql);
		return false;
	}
	free(sql);
	return true;
}

/* target_session_attrs: another worker (or this one, through another
 * server) may have found this server's host no longer serving. */
static bool host_still_serves(const struct server *sv)
{
	struct database *db = sv->pool->db;
	if (hostrole_tsa(db) == TSA_ANY)
		return true;
	enum host_role r = hostrole_get(db, sv->host_idx);
	return r == ROLE_UNKNOWN || hostrole_serves(db, sv->host_idx, r);
}

/* An idle server that may serve a client, with or without a check first;
 * an outdated one is closed. */
static bool idle_usable(struct server *sv)
{
	if (sv->give_away)
		return false;         /* promised to another worker (the reaper sends it) */
	if (sv->close_needed) {
		server_close(sv, sv->close_reason ? sv->close_reason : "server lifetime over");
		return false;
	}
	if (!host_still_serves(sv)) {
		server_close(sv, "server role changed");
		return false;
	}
	return true;
}

struct server *pool_idle_server(struct pool *p)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &p->idle_servers) {
		struct server *sv = container_of(it, struct server, node);
		if (idle_usable(sv) && !pool_server_stale(sv))
			return sv;
	}
	return NULL;
}

/* Start server_check_query on the first stale idle server, for a waiter
 * (PgBouncer's launch_recheck); false: none to check. */
static bool check_idle(struct pool *p)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &p->idle_servers) {
		struct server *sv = container_of(it, struct server, node);
		if (idle_usable(sv) && pool_server_stale(sv) && run_check(sv))
			return true;
	}
	return false;
}

/* ---- the reuse order over the instance ----
 * One PgBouncer hands out the idle server used last (server_round_robin:
 * the one used longest ago), so under light load one server does the work
 * and server_idle_timeout closes the rest (with round robin, the load
 * spreads over all). With several workers each worker's idle list keeps
 * that order, and each publishes the last use of the idle server it would
 * hand out next (hist.h, idle_next). A client whose worker has an idle
 * server waits for another worker's instead when that one comes first by
 * more than REUSE_SLACK_USEC; ours stays idle and ages. With LIFO only an
 * idle server of ours unused for longer than the slack can come second,
 * so under load (each worker releases servers every few hundred
 * microseconds) nothing is read and nothing moves that did not before.
 * 100 ms: a worker whose clients run ten transactions a second or more on
 * a pool keeps its own servers (a move costs about 0.3 ms and two
 * messages through the supervisor), while under lighter load the work
 * gathers on the most recently used server within a tenth of a second. A
 * server that cannot move (TLS without kTLS) is neither published nor
 * waited for: it keeps each worker's own order. */
#define REUSE_SLACK_USEC (100 * USEC_PER_MSEC)
/* The others' idle_next is read at most this often per pool (with round
 * robin every acquire that finds an idle server of ours would read it). */
#define REUSE_LOOK_USEC (1 * USEC_PER_MSEC)
/* A giver that left a want to a worker whose idle server comes first looks
 * again after this long, in case that one was taken meanwhile. */
#define REUSE_RECHECK_USEC (2 * USEC_PER_MSEC)

bool pool_reuse_elsewhere(usec_t here, usec_t there, usec_t slack, bool round_robin)
{
	if (!here || !there)
		return false;
	return round_robin ? there < here - slack : there > here + slack;
}

void pool_publish_next_idle(struct pool *p)
{
	usec_t t = 0;
	struct list *it;
	list_for_each(it, &p->idle_servers) {
		const struct server *sv = container_of(it, struct server, node);
		if (server_may_move(sv) && !sv->close_needed) {
			t = sv->last_used;
			break;
		}
	}
	if (t != p->next_published) {
		p->next_published = t;
		hist_pool_set_next(p->hist, t);
	}
}

static usec_t next_elsewhere(struct pool *p, bool newest, usec_t now)
{
	if (now - p->next_seen_at >= REUSE_LOOK_USEC) {
		p->next_seen = hist_pool_next_elsewhere(p->hist, newest);
		p->next_seen_at = now;
	}
	return p->next_seen;
}

/* Should a client of ours wait for another worker's idle server rather
 * than take sv, the head of our idle list? */
static bool reuse_elsewhere(struct pool *p, const struct server *sv, usec_t now)
{
	bool rr = p->db->world->cfg->server_round_robin;
	if (!rr && now - sv->last_used <= REUSE_SLACK_USEC)
		return false;         /* LIFO, ours used a moment ago: nothing can come first */
	if (!p->hist || p->reuse_held || !server_may_move(sv))
		return false;
	return pool_reuse_elsewhere(sv->last_used, next_elsewhere(p, !rr, now), REUSE_SLACK_USEC, rr);
}

/* Ask the ledger for another worker's idle server (only a move serves the
 * request: it is denied when none is idle any more, or none came within
 * LEDGER_MOVE_WAIT_USEC). */
static bool ask_move(struct pool *p)
{
	return ask_apart(p, SLOT_FOR_MOVE, &p->n_move_wait);
}

/* c waits for the idle server of another worker that comes first; ours
 * (sv) stays idle for it if none comes (serve_held). */
static bool wait_for_move(struct client *c, struct server *sv, usec_t now)
{
	struct pool *p = c->pool;
	log_debug("C-%llu: waits for another worker's idle server, used after ours (idle %lld ms)",
		  (unsigned long long)c->id, (long long)((now - sv->last_used) / USEC_PER_MSEC));
	c->request_time = now;
	client_set_state(c, CLIENT_WAITING);    /* the wait line first: the giver reads it */
	if (ask_move(p)) {
		p->reuse_held = true;
		return false;
	}
	client_set_state(c, CLIENT_ACTIVE);
	return link_pair(c, sv, now);
}

/* The move came (its client was served first) or will not: the clients
 * still waiting take our idle servers, in their order. */
static void serve_held(struct pool *p)
{
	struct client *c;
	struct server *sv;
	p->reuse_held = false;
	while (!pool_paused(p) && (c = first_waiter(p)) != NULL && (sv = pool_idle_server(p)) != NULL) {
		client_set_state(c, CLIENT_ACTIVE);
		if (link_pair(c, sv, util_monotonic()))
			client_server_linked(c);
	}
}

/* The ledger's answer to ask_move: denied (no server came). It grants no
 * slot for such a request; one granted all the same goes back. */
static void move_answer(struct world *w, struct pool *p, const struct slot_req *r, bool granted)
{
	if (granted && ipc_send_slot(w->sup, IPC_SLOT_RELEASE, 0, r) < 0)
		log_warning("could not return an unneeded server slot");
	if (p)
		pool_launch_needed(p);
}

/* Another worker's idle server comes clearly before sv in the reuse
 * order: that worker, asked too, gives it. */
static bool other_gives(const struct pool *p, const struct server *sv)
{
	bool rr = p->db->world->cfg->server_round_robin;
	return pool_reuse_elsewhere(sv->last_used, hist_pool_next_elsewhere(p->hist, !rr), REUSE_SLACK_USEC, rr);
}

/* The idle server to give another worker's client: the first in our reuse
 * order (the most recently used, or with round robin the least) that may
 * go now (move_delay), unless another worker's comes clearly first. NULL:
 * none now; *left: when to look again (0: never). */
static struct server *give_pick(const struct pool *p, usec_t now, usec_t *left)
{
	struct list *it;
	*left = 0;
	list_for_each(it, &p->idle_servers) {
		struct server *sv = container_of(it, struct server, node);
		if (!server_may_move(sv) || (sv->close_needed && !sv->give_away))
			continue;
		usec_t d = move_delay(p, sv, now);
		if (d == 0 && other_gives(p, sv)) {
			log_noise("pool %s/%s: another worker's idle server comes before S-%llu",
				  p->db->name, p->user->name, (unsigned long long)sv->id);
			*left = REUSE_RECHECK_USEC;
			return NULL;
		}
		if (d == 0)
			return sv;
		if (!*left || d < *left)
			*left = d;
	}
	return NULL;
}

void pool_link_replication(struct server *sv)
{
	struct client *c = sv->repl_owner;
	if (link_pair(c, sv, util_monotonic()))
		client_server_linked(c);
}

bool pool_request_server(struct client *c)
{
	struct pool *p = c->pool;

	/* A replication client never takes a pooled server: it waits (paused,
	 * active) for its own. */
	if (c->repl != REPL_NONE) {
		if (!c->repl_server) {
			c->request_time = util_monotonic();
			client_set_state(c, CLIENT_WAITING);
			repl_serve(p);
		}
		return false;
	}

	if (!pool_paused(p) && !first_waiter(p)) {
		struct server *sv = pool_idle_server(p);
		if (sv) {
			usec_t now = util_monotonic();
			if (!reuse_elsewhere(p, sv, now))
				return link_pair(c, sv, now);
			return wait_for_move(c, sv, now);
		}
	}
	if (c->state != CLIENT_WAITING) {
		c->request_time = util_monotonic();
		client_set_state(c, CLIENT_WAITING);
	}
	pool_launch_needed(p);
	return false;
}

void pool_server_ready(struct server *sv)
{
	server_ready(sv, true);
}

/* A server that arrived from another worker, or came back unused, keeps
 * its last use: the reuse order, server_idle_timeout and
 * server_check_delay count from when a client last had it. */
void pool_server_arrived(struct server *sv)
{
	server_ready(sv, false);
}

static void server_ready(struct server *sv, bool released)
{
	struct pool *p = sv->pool;
	usec_t now = util_monotonic();
	usec_t life = pool_server_lifetime(p);

	link_assert_free(sv);
	/* An answer to a query of ours still owed would reach the next
	 * client as its own: a server is ready only at a message boundary. */
	if (sv->internal != SI_NONE)
		fatal("S-%llu: ready with an internal query in flight", (unsigned long long)sv->id);
	sv->s.peer = NULL;
	if (sv->close_needed || (life > 0 && now - sv->connect_time >= life)) {
		server_close_soon(sv, sv->close_reason ? sv->close_reason : "server lifetime over");
		return;
	}
	if (p->db->dead) {
		server_close_soon(sv, "database removed");
		return;
	}
	if (released)
		sv->last_used = now;
	/* The supervisor asked for servers back (this worker holds more than
	 * its share, or another worker's clients starve): that comes before
	 * this worker's own queue, or under steady load it never would. */
	if (server_may_move(sv) ? first_in_line_elsewhere(p) : p->give_up > 0 && waiting_elsewhere(p)) {
		note_given(p);
		if (close_for_others(p, sv, true))
			return;
		server_close_soon(sv, "released to another worker");
		sv->give_away = true;     /* the reaper moves it if it can */
		return;
	}
	if (!pool_paused(p)) {
		if (p->n_repl_waiting > 0 && repl_takes(p, sv))
			return;
		struct client *c = first_waiter(p);
		/* Due for server_check_query (server_check_delay = 0 and
		 * released by a client): checked before it serves a waiter, as
		 * PgBouncer's release puts it in "used" and its waiters have it
		 * checked; it comes back here when the check has answered. */
		if ((c || p->n_auth_waiting > 0) && pool_server_stale(sv)) {
			(void)run_check(sv);
			return;
		}
		if (p->n_auth_waiting > 0 && authquery_server_ready(sv))
			return;
		if (c) {
			client_set_state(c, CLIENT_ACTIVE);
			if (link_pair(c, sv, now))
				client_server_linked(c);
			return;
		}
	}
	/* PAUSE (of all, or of this database) closes servers as they come
	 * back, as PgBouncer's does. */
	if (server_world(sv)->paused || p->db->paused) {
		server_close_soon(sv, "pause mode");
		return;
	}
	if (claim_for_others(p, sv))
		return;
	server_set_state(sv, SERVER_IDLE);
	/* Someone elsewhere waits: unless our own client takes it back at
	 * once, the server goes in a moment. */
	if (server_may_move(sv) && waiting_elsewhere(p))
		arm_give_timer(p->db->world, move_delay(p, sv, util_monotonic()));
	world_check_shutdown(p->db->world);
}

/* ---- what nothing holds any more ----
 * Ever new tenants (roles, databases of "*") must not pile up objects
 * until a restart: pools of a removed database, removed databases and
 * users that no pool and no client points at are freed, with their shared
 * names. A user of auth_file is made again at its next login (SHOW USERS
 * lists it from auth_file meanwhile). */

bool pool_in_use(const struct pool *p)
{
	struct list *it;
	if (p->n_idle + p->n_active + p->n_tested + p->n_login + p->n_canceled > 0)
		return true;
	if (p->n_auth_waiting > 0 || p->n_slot_wait > 0 || p->n_repl_slot_wait > 0 ||
	    p->n_repl_withdrawing > 0 || p->welcome_asked == 1)
		return true;
	/* A server closed in this loop turn waits on the justfree list. */
	list_for_each(it, &p->db->world->justfree_servers) {
		if (container_of(it, struct server, node)->pool == p)
			return true;
	}
	return false;
}

static void user_free(struct world *w, struct puser *u)
{
	list_del(&u->node);
	hmap_del(&w->user_map, &u->hn);
	shm_name_release(u->shm_idx);
	pool_user_clear(u);
	OPENSSL_cleanse(&u->scram_keys, sizeof(u->scram_keys));
	free(u);
}

/* Marks on every user and database something points at. */
static void mark_held(struct world *w)
{
	struct list *it;
	list_for_each(it, &w->users)
		container_of(it, struct puser, node)->held = false;
	list_for_each(it, &w->databases)
		container_of(it, struct database, node)->held = false;
	list_for_each(it, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		p->user->held = true;
		p->db->held = true;
	}
	list_for_each(it, &w->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->login_user)
			c->login_user->held = true;
		if (c->db)
			c->db->held = true;
	}
}

void pool_sweep(struct world *w)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (p->db->dead && p->n_clients == 0 && !pool_in_use(p))
			pool_destroy(p);
	}
	mark_held(w);
	list_for_each_safe(it, tmp, &w->users) {
		struct puser *u = container_of(it, struct puser, node);
		if (!u->held && u->n_servers == 0 && u->n_clients == 0)
			user_free(w, u);
	}
	list_for_each_safe(it, tmp, &w->databases) {
		struct database *db = container_of(it, struct database, node);
		if (db->dead && !db->held && !db->admin && db->n_servers == 0 && db->n_clients == 0)
			db_free(db);
	}
}

/* ---- reload ---- */

void pool_apply_config(struct world *w, const struct config *cfg)
{
	struct list *it, *tmp;

	list_for_each(it, &w->databases) {
		struct database *db = container_of(it, struct database, node);
		db->mark = true;
	}
	for (int i = 0; i < cfg->n_dbs; i++) {
		const struct db_def *d = &cfg->dbs[i];
		struct database *db = pool_find_db(w, d->name);
		if (!db)
			db = db_new(w, d->name);
		db_apply_def(db, d, d->name);
		db->is_autodb = false;
		db->mark = false;
	}
	list_for_each_safe(it, tmp, &w->databases) {
		struct database *db = container_of(it, struct database, node);
		if (!db->mark || db->admin)
			continue;
		if (db->is_autodb && cfg->autodb) {
			db_apply_def(db, cfg->autodb, db->name);
			continue;
		}
		db->dead = true;
		db->paused = false;        /* PgBouncer frees it: nothing left paused */
		shm_db_set_paused(db->shm_idx, false);
	}
	list_for_each(it, &w->users) {
		struct puser *u = container_of(it, struct puser, node);
		user_apply(w, u);
	}
	/* Close idle servers of removed databases now; busy ones on release. */
	list_for_each(it, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (!p->db->dead)
			continue;
		struct list *s, *t;
		list_for_each_safe(s, t, &p->idle_servers)
			server_close(container_of(s, struct server, node), "database removed");
	}
}

/* Used at worker exit; every connection is already closed and reaped. */
void pool_free_all(struct world *w)
{
	if (give_timer)
		event_free(give_timer);
	give_timer = NULL;
	struct list *it;
	while ((it = list_first(&w->pools)) != NULL)
		pool_free(container_of(it, struct pool, node));
	while ((it = list_first(&w->databases)) != NULL)
		db_free(container_of(it, struct database, node));
	while ((it = list_first(&w->users)) != NULL)
		user_free(w, container_of(it, struct puser, node));
	hmap_free(&w->db_map);
	hmap_free(&w->user_map);
	hmap_free(&w->pool_map);
}

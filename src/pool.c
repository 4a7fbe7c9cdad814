/* pgcrew — pool policy. Databases and users are materialised from the config
 * generation (mark-and-sweep on reload); each (database, user) pool hands
 * idle servers to waiting clients in arrival order and launches new servers
 * within its limits, a few logins at a time so a burst of clients does not
 * become a burst of backend forks. */
#include "pool.h"
#include "client.h"
#include "config.h"
#include "config/userlist.h"
#include "log.h"
#include "server.h"
#include "worker.h"

#include <stdio.h>

/* ---- databases ---- */

static void free_hosts(struct database *db)
{
	for (int i = 0; i < db->n_hosts; i++)
		free(db->hosts[i]);
	free(db->hosts);
	db->hosts = NULL;
	db->n_hosts = 0;
}

static void db_apply_def(struct database *db, const struct db_def *d, const char *dbname)
{
	const struct config *cfg = W->cfg;

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
	db->load_balance = d->load_balance_hosts != 0;
	db->server_lifetime = d->server_lifetime;
	db->dead = false;
}

static struct database *db_new(const char *name)
{
	struct database *db = xcalloc(1, sizeof(*db));
	strlcpy_(db->name, name, sizeof(db->name));
	varcache_init(&db->startup_vars);
	list_append(&W->databases, &db->node);
	db->last_used = util_monotonic();
	return db;
}

static void db_free(struct database *db)
{
	list_del(&db->node);
	free_hosts(db);
	free(db->forced_user);
	free(db->forced_password);
	free(db->connect_query);
	varcache_clear(&db->startup_vars);
	free(db);
}

struct database *pool_find_db(const char *name)
{
	struct list *it;
	list_for_each(it, &W->databases) {
		struct database *db = container_of(it, struct database, node);
		if (strcmp(db->name, name) == 0)
			return db;
	}
	return NULL;
}

struct database *pool_get_db(const char *name)
{
	struct database *db = pool_find_db(name);
	if (db && !db->dead)
		return db;
	if (!W->cfg->autodb || strlen(name) >= NAME_MAX_LEN)
		return NULL;
	if (!db)
		db = db_new(name);
	db_apply_def(db, W->cfg->autodb, name);
	db->is_autodb = true;
	log_info("registered new auto-database: %s", name);
	return db;
}

struct database *pool_admin_db(void)
{
	struct database *db = pool_find_db("pgbouncer");
	if (db && db->admin)
		return db;
	if (!db)
		db = db_new("pgbouncer");
	db->admin = true;
	db->dead = false;
	db->pool_size = 0;
	db->pool_mode = POOL_STATEMENT;
	db->server_lifetime = -1;
	db->n_hosts = 1;
	db->hosts = xcalloc(1, sizeof(char *));
	strlcpy_(db->dbname, "pgbouncer", sizeof(db->dbname));
	return db;
}

/* ---- users ---- */

static void user_apply(struct puser *u)
{
	const struct config *cfg = W->cfg;
	const char *secret = cfg->userlist ? userlist_find(cfg->userlist, u->name) : NULL;
	const struct user_def *ud = config_find_user(cfg, u->name);

	if (!secret || strcmp(secret, u->secret) != 0)
		u->has_scram_keys = false;   /* a new secret invalidates learned keys */
	strlcpy_(u->secret, secret ? secret : "", sizeof(u->secret));
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
}

struct puser *pool_find_user(const char *name)
{
	struct list *it;
	list_for_each(it, &W->users) {
		struct puser *u = container_of(it, struct puser, node);
		if (strcmp(u->name, name) == 0)
			return u;
	}
	if (!W->cfg->userlist || !userlist_find(W->cfg->userlist, name))
		return NULL;
	return pool_get_user(name);
}

struct puser *pool_get_user(const char *name)
{
	struct list *it;
	list_for_each(it, &W->users) {
		struct puser *u = container_of(it, struct puser, node);
		if (strcmp(u->name, name) == 0)
			return u;
	}
	if (strlen(name) >= NAME_MAX_LEN)
		return NULL;
	struct puser *u = xcalloc(1, sizeof(*u));
	strlcpy_(u->name, name, sizeof(u->name));
	user_apply(u);
	list_append(&W->users, &u->node);
	return u;
}

/* ---- pools ---- */

struct pool *pool_get(struct database *db, struct puser *user)
{
	struct list *it;
	list_for_each(it, &W->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (p->db == db && p->user == user)
			return p;
	}
	struct pool *p = xcalloc(1, sizeof(*p));
	p->db = db;
	p->user = user;
	list_init(&p->active_clients);
	list_init(&p->waiting_clients);
	list_init(&p->idle_servers);
	list_init(&p->active_servers);
	list_init(&p->tested_servers);
	list_init(&p->login_servers);
	list_init(&p->canceled_servers);
	varcache_init(&p->welcome_vars);
	list_append(&W->pools, &p->node);
	return p;
}

static void pool_free(struct pool *p)
{
	list_del(&p->node);
	varcache_clear(&p->welcome_vars);
	for (int i = 0; i < p->n_welcome_other * 2; i++)
		free(p->welcome_other[i]);
	free(p->welcome_other);
	free(p);
}

int pool_mode_of(const struct pool *p)
{
	if (p->user->pool_mode >= 0)
		return p->user->pool_mode;
	if (p->db->pool_mode >= 0)
		return p->db->pool_mode;
	return W->cfg->pool_mode;
}

int pool_size_of(const struct pool *p)
{
	if (p->user->pool_size >= 0)
		return p->user->pool_size;
	if (p->db->pool_size >= 0)
		return p->db->pool_size;
	return W->cfg->default_pool_size;
}

int pool_reserve_of(const struct pool *p)
{
	if (p->user->reserve_pool_size >= 0)
		return p->user->reserve_pool_size;
	if (p->db->reserve_pool_size >= 0)
		return p->db->reserve_pool_size;
	return W->cfg->reserve_pool_size;
}

usec_t pool_server_lifetime(const struct pool *p)
{
	return p->db->server_lifetime >= 0 ? p->db->server_lifetime : W->cfg->server_lifetime;
}

static int pool_total_servers(const struct pool *p)
{
	return p->n_idle + p->n_active + p->n_tested + p->n_login + p->n_canceled;
}

/* May this pool open one more server connection now? */
static bool can_launch(struct pool *p, bool for_waiter)
{
	const struct config *cfg = W->cfg;
	usec_t now = util_monotonic();
	int total = pool_total_servers(p);
	int size = pool_size_of(p);

	if (p->db->dead || p->db->disabled || p->db->admin || W->shutting_down)
		return false;
	if (p->n_login >= (cfg->server_login_concurrency > 0 ? cfg->server_login_concurrency : 1))
		return false;
	if (p->login_failed_at && now - p->login_failed_at < cfg->server_login_retry)
		return false;
	if (p->db->max_db_connections > 0 && p->db->n_servers >= p->db->max_db_connections)
		return false;
	if (p->user->max_user_connections > 0 && p->user->n_servers >= p->user->max_user_connections)
		return false;
	if (total < size)
		return true;
	/* Reserve: only for clients that have waited reserve_pool_timeout. */
	if (!for_waiter || total >= size + pool_reserve_of(p) || list_empty(&p->waiting_clients))
		return false;
	struct client *first = container_of(p->waiting_clients.next, struct client, node);
	if (now - first->request_time < cfg->reserve_pool_timeout)
		return false;
	log_info("taking connection from reserve_pool");
	return true;
}

void pool_launch_needed(struct pool *p)
{
	/* Waiters not yet covered by a login in progress. */
	while (p->n_waiting_clients > p->n_login && can_launch(p, true)) {
		if (!server_launch(p))
			break;
	}
	int min = p->db->min_pool_size;
	while (min > 0 && pool_total_servers(p) < min && pool_total_servers(p) < pool_size_of(p) &&
	       can_launch(p, false)) {
		if (!server_launch(p))
			break;
	}
	/* Logins failing and retry not yet due: waiting clients get the error now. */
	if (p->login_failed_at && p->n_login == 0 && p->login_error[0] &&
	    util_monotonic() - p->login_failed_at < W->cfg->server_login_retry) {
		struct list *it, *tmp;
		list_for_each_safe(it, tmp, &p->waiting_clients) {
			struct client *c = container_of(it, struct client, node);
			client_server_login_failed(c, p->login_error_code, p->login_error);
		}
	}
}

static bool check_needed(const struct server *sv)
{
	const struct config *cfg = W->cfg;
	if (!cfg->server_check_query[0] || cfg->server_check_delay < 0)
		return false;
	return util_monotonic() - sv->last_used >= cfg->server_check_delay;
}

/* Link c and sv; true when the client may proceed at once (no SET needed). */
static bool link_pair(struct client *c, struct server *sv)
{
	char sql[VARCACHE_SQL_MAX];
	usec_t now = util_monotonic();

	c->link = sv;
	sv->link = c;
	c->s.peer = &sv->s;
	sv->s.peer = &c->s;
	server_set_state(sv, SERVER_ACTIVE);
	if (c->request_time) {
		c->pool->stats.wait_time += (uint64_t)(now - c->request_time);
		c->request_time = 0;
	}
	c->pool->stats.server_assignment_count++;
	if (varcache_diff_query(&c->vars, &sv->vars, sql, sizeof(sql))) {
		/* The client resumes when the SET completes (or is closed
		 * with the server if sending fails). */
		(void)server_run_internal(sv, SI_SETVARS, sql);
		return false;
	}
	return true;
}

bool pool_request_server(struct client *c)
{
	struct pool *p = c->pool;
	struct list *it;

	if (!(W->paused || p->db->paused || p->paused) && list_empty(&p->waiting_clients)) {
		while ((it = list_first(&p->idle_servers)) != NULL) {
			struct server *sv = container_of(it, struct server, node);
			if (sv->close_needed) {
				server_close(sv, "server lifetime over");
				continue;
			}
			if (check_needed(sv)) {
				if (!server_run_internal(sv, SI_CHECK, W->cfg->server_check_query))
					continue;
				break;
			}
			return link_pair(c, sv);
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
	struct pool *p = sv->pool;
	usec_t now = util_monotonic();
	usec_t life = pool_server_lifetime(p);

	sv->link = NULL;
	sv->s.peer = NULL;
	if (sv->close_needed || (life > 0 && now - sv->connect_time >= life)) {
		server_close(sv, "server lifetime over");
		pool_launch_needed(p);
		return;
	}
	if (p->db->dead) {
		server_close(sv, "database removed");
		return;
	}
	sv->last_used = now;
	if (!(W->paused || p->db->paused || p->paused)) {
		struct list *it = list_first(&p->waiting_clients);
		if (it) {
			struct client *c = container_of(it, struct client, node);
			client_set_state(c, CLIENT_ACTIVE);
			if (link_pair(c, sv))
				client_server_linked(c);
			return;
		}
	}
	server_set_state(sv, SERVER_IDLE);
	worker_check_shutdown();
}

/* ---- reload ---- */

void pool_apply_config(const struct config *cfg)
{
	struct list *it, *tmp;

	list_for_each(it, &W->databases) {
		struct database *db = container_of(it, struct database, node);
		db->mark = true;
	}
	for (int i = 0; i < cfg->n_dbs; i++) {
		const struct db_def *d = &cfg->dbs[i];
		struct database *db = pool_find_db(d->name);
		if (!db)
			db = db_new(d->name);
		db_apply_def(db, d, d->name);
		db->is_autodb = false;
		db->mark = false;
	}
	list_for_each_safe(it, tmp, &W->databases) {
		struct database *db = container_of(it, struct database, node);
		if (!db->mark || db->admin)
			continue;
		if (db->is_autodb && cfg->autodb) {
			db_apply_def(db, cfg->autodb, db->name);
			continue;
		}
		db->dead = true;
	}
	list_for_each(it, &W->users) {
		struct puser *u = container_of(it, struct puser, node);
		user_apply(u);
	}
	/* Close idle servers of removed databases now; busy ones on release. */
	list_for_each(it, &W->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (!p->db->dead)
			continue;
		struct list *s, *t;
		list_for_each_safe(s, t, &p->idle_servers)
			server_close(container_of(s, struct server, node), "database removed");
	}
}

/* Used at worker exit; every connection is already closed and reaped. */
void pool_free_all(void)
{
	struct list *it;
	while ((it = list_first(&W->pools)) != NULL)
		pool_free(container_of(it, struct pool, node));
	while ((it = list_first(&W->databases)) != NULL)
		db_free(container_of(it, struct database, node));
	while ((it = list_first(&W->users)) != NULL) {
		struct puser *u = container_of(it, struct puser, node);
		list_del(&u->node);
		free(u);
	}
}

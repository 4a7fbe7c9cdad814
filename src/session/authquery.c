/* pgcrew — auth_query (see authquery.h). A lookup is a job: it waits for a
 * server of the (auth database, auth_user) pool, runs the query there and
 * hands the answer to every login waiting for that user. The logging-in
 * client is never linked to that server, so none of its startup parameters
 * (search_path, options) can reach the query (PgBouncer CVE-2025-12819). */
#include "authquery.h"
#include "auth/authcache.h"
#include "client.h"
#include "config.h"
#include "config/userlist.h"
#include "log.h"
#include "pool.h"
#include "proto/build.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "server.h"
#include "varcache.h"
#include "world.h"

#include <openssl/crypto.h>
#include <stdio.h>

#define AUTHQ_CACHE_MAX 10000        /* answers per worker */
/* A larger row or row description is refused: room for the longest secret
 * and a user name. */
#define AUTHQ_MAX_MSG (SECRET_MAX_LEN + 16384)

struct authq_job {
	struct list node;                /* jobs */
	struct pool *pool;               /* (auth database, auth_user) */
	struct server *sv;               /* running on it; NULL while queued */
	bool queued;                     /* counted in pool->n_auth_waiting */
	usec_t queued_at;                /* since then (the pool's wait line) */
	char key[AUTHCACHE_KEY_MAX];
	char user[NAME_MAX_LEN];
	char *sql;                       /* copied: a RELOAD may free the config */
	struct client **waiters;
	int n_waiters, cap;
	int rfq_left;                    /* ReadyForQuery still owed by the server */
	bool found, null_secret;
	char secret[SECRET_MAX_LEN];
};

static struct list jobs = LIST_INIT(jobs);
static struct authcache *cache;

/* ---- protocol pieces ---- */

int authquery_build(struct pktbuf *pb, const char *reset_sql, const char *query, const char *user)
{
	int rfq = 1;
	size_t ulen = strlen(user);

	if (reset_sql) {
		pkt_write_query(pb, reset_sql);
		rfq++;
	}
	pktbuf_begin(pb, 'P');
	pktbuf_put_string(pb, "");
	pktbuf_put_string(pb, query);
	pktbuf_put_u16(pb, 0);
	pktbuf_finish(pb);
	pktbuf_begin(pb, 'B');
	pktbuf_put_string(pb, "");
	pktbuf_put_string(pb, "");
	pktbuf_put_u16(pb, 0);           /* parameters in text */
	pktbuf_put_u16(pb, 1);
	pktbuf_put_u32(pb, (uint32_t)ulen);
	pktbuf_put_bytes(pb, user, ulen);
	pktbuf_put_u16(pb, 0);           /* results in text */
	pktbuf_finish(pb);
	pktbuf_begin(pb, 'D');
	pktbuf_put_u8(pb, 'P');
	pktbuf_put_string(pb, "");
	pktbuf_finish(pb);
	pktbuf_begin(pb, 'E');
	pktbuf_put_string(pb, "");
	pktbuf_put_u32(pb, 0);
	pktbuf_finish(pb);
	pktbuf_begin(pb, 'S');
	pktbuf_finish(pb);
	return pktbuf_failed(pb) ? -1 : rfq;
}

int authquery_parse_rowdesc(const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	uint16_t n = pkt_get_u16(&r);
	return r.failed ? -1 : n;
}

int authquery_parse_row(const uint8_t *body, size_t len, char *secret, size_t slen,
			bool *null_secret, char *errbuf, size_t errlen)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	uint16_t ncol = pkt_get_u16(&r);
	if (!r.failed && ncol != 2) {
		snprintf(errbuf, errlen, "expected 2 columns from auth_query, not %u", ncol);
		return -1;
	}
	int32_t ulen = pkt_get_i32(&r);
	if (ulen >= 0)
		(void)pkt_get_bytes(&r, (size_t)ulen);
	int32_t plen = pkt_get_i32(&r);
	const uint8_t *pw = plen >= 0 ? pkt_get_bytes(&r, (size_t)plen) : NULL;
	if (r.failed || ulen < -1 || plen < -1 || !pkt_get_end(&r)) {
		snprintf(errbuf, errlen, "bad packet");
		return -1;
	}
	/* A null user name says "no such user", like no row at all (as
	 * PgBouncer since its pull request 1569: the documented example
	 * function answers that way). */
	if (ulen == -1)
		return 1;
	/* NULL: the user exists but has no password, so only trust lets it in. */
	*null_secret = plen == -1;
	size_t n = pw ? (size_t)plen : 0;
	if (n >= slen) {
		snprintf(errbuf, errlen, "auth_query returned a password longer than %zu bytes", slen - 1);
		return -1;
	}
	if (n)
		memcpy(secret, pw, n);
	secret[n] = 0;
	return 0;
}

/* ---- where the query runs ---- */

static const struct db_def *def_of(const struct database *db)
{
	return db->is_autodb ? db->world->cfg->autodb : config_find_db(db->world->cfg, db->name);
}

/* A per-database value, else the global one ("" = not set). */
static const char *db_or_global(const struct database *db, size_t off, const char *global)
{
	const struct db_def *d = def_of(db);
	const char *v = d ? *(char *const *)((const char *)d + off) : NULL;
	return v && *v ? v : global;
}

#define AUTH_SETTING(db, f) db_or_global(db, offsetof(struct db_def, f), (db)->world->cfg->f)

bool authquery_applies(const struct client *c)
{
	const struct config *cfg = c->world->cfg;
	if (cfg->auth_type == AUTH_ANY || !c->db)
		return false;
	if (cfg->userlist && userlist_find(cfg->userlist, c->user_name))
		return false;
	/* The console, as in PgBouncer: through the global auth_user, in the
	 * global auth_dbname; without one the console itself would be the
	 * auth database (refused: auth_database). */
	if (c->db->admin)
		return cfg->auth_user[0] != 0;
	return AUTH_SETTING(c->db, auth_user)[0] != 0;
}

/* auth_dbname of the client's database, else the global one, else the
 * client's database; closed with PgBouncer's texts when unusable. */
static struct database *auth_database(struct client *c)
{
	const char *name = AUTH_SETTING(c->db, auth_dbname);
	char msg[160];

	if (!*name && c->db->admin)
		name = c->db->name;
	if (!*name)
		return c->db;
	if (config_is_console_db(name)) {
		log_client(c, LG_ERROR, "cannot use the reserved \"%s\" database as an auth_dbname", name);
		client_close(c, true, "bouncer config error");
		return NULL;
	}
	struct database *db = pool_get_db(c->world, name);
	if (!db) {
		log_client(c, LG_ERROR, "authentication database \"%s\" is not configured.", name);
		client_close(c, true, "bouncer config error");
		return NULL;
	}
	if (db->disabled) {
		snprintf(msg, sizeof(msg), "authentication database \"%s\" is disabled", name);
		client_close(c, true, msg);
		return NULL;
	}
	return db;
}

/* ---- answers ---- */

/* The puser of an auth_query login carries the fetched secret, which its
 * pools' server logins use too (md5 hash, or SCRAM pass-through). */
static struct puser *user_with_secret(struct world *w, const char *name, const char *secret)
{
	struct puser *u = pool_get_user(w, name);
	if (!u)
		return NULL;
	if (strcmp(u->secret, secret) != 0) {
		u->has_scram_keys = false;
		pool_user_set_secret(u, secret);
	}
	u->authq_secret = true;
	return u;
}

static void answer(struct client *c, const char *secret)
{
	if (!secret) {
		if (c->world->cfg->log_connections)
			log_client(c, LG_LOG, "login failed: db=%s", c->db_name);
		client_close(c, true, "no such user");
		return;
	}
	struct puser *u = user_with_secret(c->world, c->user_name, secret);
	if (!u) {
		client_close(c, true, "bouncer resources exhaustion");
		return;
	}
	client_login_found(c, u);
}

/* ---- jobs ---- */

static struct authq_job *job_by_key(const char *key)
{
	struct list *it;
	list_for_each(it, &jobs) {
		struct authq_job *j = container_of(it, struct authq_job, node);
		if (strcmp(j->key, key) == 0)
			return j;
	}
	return NULL;
}

static struct authq_job *job_of_server(const struct server *sv)
{
	struct list *it;
	list_for_each(it, &jobs) {
		struct authq_job *j = container_of(it, struct authq_job, node);
		if (j->sv == sv)
			return j;
	}
	return NULL;
}

static void unqueue(struct authq_job *j)
{
	bool was = j->queued;
	if (was)
		j->pool->n_auth_waiting--;
	j->queued = false;
	if (was)
		pool_wait_line(j->pool);
}

usec_t authquery_waiting_since(const struct pool *p)
{
	usec_t oldest = 0;
	struct list *it;
	if (p->n_auth_waiting <= 0)
		return 0;
	list_for_each(it, &jobs) {
		const struct authq_job *j = container_of(it, struct authq_job, node);
		if (j->queued && j->pool == p && (!oldest || j->queued_at < oldest))
			oldest = j->queued_at;
	}
	return oldest;
}

/* Unlinked from everything; the waiters are the caller's to answer. */
static void job_free(struct authq_job *j)
{
	unqueue(j);
	list_del(&j->node);
	for (int i = 0; i < j->n_waiters; i++)
		j->waiters[i]->authq = NULL;
	OPENSSL_cleanse(j->secret, sizeof(j->secret));
	free(j->waiters);
	free(j->sql);
	free(j);
}

static void add_waiter(struct authq_job *j, struct client *c)
{
	if (j->n_waiters == j->cap) {
		j->cap = j->cap ? 2 * j->cap : 4;
		j->waiters = xrealloc(j->waiters, sizeof(*j->waiters) * (size_t)j->cap);
		if (!j->waiters)
			fatal("out of memory");
	}
	j->waiters[j->n_waiters++] = c;
	c->authq = j;
}

/* The waiters, detached from j (answering one may close another). */
static struct client **take_waiters(struct authq_job *j, int *n)
{
	struct client **w = j->waiters;
	*n = j->n_waiters;
	for (int i = 0; i < *n; i++)
		w[i]->authq = NULL;
	j->waiters = NULL;
	j->n_waiters = j->cap = 0;
	return w;
}

static void fail_waiters(struct authq_job *j, const char *sqlstate, const char *msg, bool cached)
{
	int n;
	struct client **w = take_waiters(j, &n);
	job_free(j);
	for (int i = 0; i < n; i++) {
		if (cached)
			client_cached_login_error(w[i], msg);
		else
			client_close_sqlstate(w[i], sqlstate && *sqlstate ? sqlstate : "08P01", msg);
	}
	free(w);
}

/* Tracked parameters a client of the auth pool had SET on this server (a
 * search_path from its startup packet, say) go back to the session's own
 * values before the query reads anything. */
static bool reset_sql(struct server *sv, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < varcache_count() && i < 32; i++) {
		/* No GUC name holds a quote: such a name was never SET. */
		if (!(sv->vars_set & (1u << i)) || strchr(varcache_name(i), '"'))
			continue;
		int k = snprintf(buf + n, len - n, "RESET \"%s\";", varcache_name(i));
		if (k < 0 || (size_t)k >= len - n)
			return false;    /* cannot happen: buf holds every name */
		n += (size_t)k;
	}
	sv->vars_set = 0;
	return n > 0;
}

static void run(struct authq_job *j, struct server *sv)
{
	char reset[VAR_MAX * (VAR_NAME_MAX + 16)];
	struct pktbuf pb;

	unqueue(j);
	j->sv = sv;
	sv->internal = SI_AUTH_QUERY;
	if (sv->state != SERVER_TESTED)
		server_set_state(sv, SERVER_TESTED);
	server_debug(sv, "auth_query for user %s: %s", j->user, j->sql);
	pktbuf_init(&pb, 256 + strlen(j->sql));
	j->rfq_left = authquery_build(&pb, reset_sql(sv, reset, sizeof(reset)) ? reset : NULL,
				      j->sql, j->user);
	bool ok = j->rfq_left > 0 && stream_write(&sv->s, &pb);
	pktbuf_free(&pb);
	if (!ok)
		server_close(sv, "unable to send auth_query");
}

/* Run now on an idle server, or wait for one (launching it if needed). */
static void dispatch(struct authq_job *j)
{
	struct pool *p = j->pool;
	struct server *sv = NULL;

	if (!pool_paused(p))
		sv = pool_idle_server(p);
	if (sv) {
		run(j, sv);
		return;
	}
	j->queued = true;
	j->queued_at = util_monotonic();
	p->n_auth_waiting++;
	pool_wait_line(p);
	pool_launch_needed(p);
}

void authquery_start(struct client *c)
{
	char key[AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX];
	struct database *adb = auth_database(c);

	if (!adb)
		return;
	const char *auser = AUTH_SETTING(c->db, auth_user);
	const char *sql = AUTH_SETTING(c->db, auth_query);
	struct puser *au = pool_get_user(c->world, auser);
	if (!au || !authcache_key(key, sizeof(key), adb->name, auser, sql, c->user_name)) {
		client_close(c, true, "bouncer config error");
		return;
	}
	if (!cache)
		cache = authcache_new(AUTHQ_CACHE_MAX);
	switch (authcache_get(cache, key, util_monotonic(), c->world->cfg->auth_query_cache_ttl,
			      secret, sizeof(secret))) {
	case AUTHCACHE_FOUND:
		client_debug(c, "auth_query answer from the cache");
		answer(c, secret);
		OPENSSL_cleanse(secret, sizeof(secret));
		return;
	case AUTHCACHE_NO_USER:
		answer(c, NULL);
		return;
	default:
		break;
	}
	struct authq_job *j = job_by_key(key);
	if (j) {
		add_waiter(j, c);        /* the same lookup is already under way */
		return;
	}
	j = xcalloc(1, sizeof(*j));
	list_append(&jobs, &j->node);
	j->pool = pool_get(adb, au);
	strlcpy_(j->key, key, sizeof(j->key));
	strlcpy_(j->user, c->user_name, sizeof(j->user));
	j->sql = xstrdup(sql);
	add_waiter(j, c);
	dispatch(j);
}

/* ---- hooks ---- */

bool authquery_server_ready(struct server *sv)
{
	struct list *it;
	list_for_each(it, &jobs) {
		struct authq_job *j = container_of(it, struct authq_job, node);
		if (j->queued && j->pool == sv->pool) {
			run(j, sv);
			return true;
		}
	}
	return false;
}

static void finish(struct authq_job *j, struct server *sv, char status)
{
	const char *secret = j->found ? (j->null_secret ? "" : j->secret) : NULL;
	int n;

	j->sv = NULL;
	sv->internal = SI_NONE;
	sv->ready_status = status;
	if (server_world(sv)->cfg->auth_query_cache_ttl > 0 && cache)
		authcache_put(cache, j->key, secret, util_monotonic());
	struct client **w = take_waiters(j, &n);
	list_del(&j->node);
	list_init(&j->node);
	if (status == 'I')
		pool_server_ready(sv);
	else
		server_close(sv, "auth_query left a transaction open");
	for (int i = 0; i < n; i++)
		answer(w[i], secret);
	free(w);
	job_free(j);
}

static void note_param(struct server *sv, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	const char *k = pkt_get_string(&r);
	const char *v = pkt_get_string(&r);
	if (!r.failed)
		(void)varcache_set(&sv->vars, k, v);
}

static void server_error(struct server *sv, const uint8_t *body, size_t len)
{
	struct pg_error e;
	if (pkt_parse_error(body, len, &e))
		log_server(sv, LG_WARNING, "auth_query failed: sqlstate=%s message=%s", e.sqlstate, e.message);
	server_close(sv, "error response from auth_query");
}

/* One message of the answer; false when the server was closed. */
static bool on_message(struct authq_job *j, struct server *sv, uint8_t type,
		       const uint8_t *body, size_t len)
{
	char err[96];
	int n;

	switch (type) {
	case 'T':
		if ((n = authquery_parse_rowdesc(body, len)) != 2) {
			if (n < 0)
				snprintf(err, sizeof(err), "bad packet");
			else
				snprintf(err, sizeof(err), "expected 2 columns from auth_query, not %d", n);
			server_close(sv, err);
			return false;
		}
		return true;
	case 'D':
		n = authquery_parse_row(body, len, j->secret, sizeof(j->secret), &j->null_secret,
					err, sizeof(err));
		if (n < 0) {
			server_close(sv, err);
			return false;
		}
		if (n == 0)
			j->found = true;
		return true;
	case 'S':
		note_param(sv, body, len);
		return true;
	case 'E':
		server_error(sv, body, len);
		return false;
	case 'Z':
		if (len != 1) {
			server_close(sv, "bad packet");
			return false;
		}
		if (--j->rfq_left == 0)
			finish(j, sv, (char)body[0]);
		return true;
	default:
		server_close(sv, "unexpected response from auth_query");
		return false;
	}
}

enum stream_action authquery_server_pkt(struct server *sv, const struct pkt_hdr *h,
					const uint8_t *data, size_t avail)
{
	struct authq_job *j = job_of_server(sv);

	if (!j) {
		server_close(sv, "unexpected response from auth_query");
		return SA_STOP;
	}
	/* Notices and completions are passed over unread, so a RAISE NOTICE
	 * of any size in a lookup function is harmless; an error or a
	 * ParameterStatus is read whole, however large PostgreSQL made it. */
	if (h->type == 'N' || h->type == 'C' || h->type == '1' || h->type == '2')
		return SA_SKIP;
	if ((h->type == 'T' || h->type == 'D') && h->len > AUTHQ_MAX_MSG) {
		server_close(sv, "bad packet");
		return SA_STOP;
	}
	if (avail < h->len)
		return SA_NEED_FULL;
	if (!on_message(j, sv, h->type, data + 5, h->len - 5))
		return SA_STOP;
	return sv->s.closed ? SA_STOP : SA_CONSUMED;
}

void authquery_server_closed(struct server *sv)
{
	struct authq_job *j = job_of_server(sv);
	if (!j)
		return;
	j->sv = NULL;
	sv->internal = SI_NONE;
	/* PgBouncer's word to a client still logging in when its server goes. */
	fail_waiters(j, "08P01", "bouncer config error", false);
}

void authquery_client_closed(struct client *c)
{
	struct authq_job *j = c->authq;
	c->authq = NULL;
	if (!j)
		return;
	for (int i = 0; i < j->n_waiters; i++) {
		if (j->waiters[i] == c) {
			j->waiters[i] = j->waiters[--j->n_waiters];
			break;
		}
	}
	if (j->n_waiters > 0)
		return;
	/* Nobody waits any more: as PgBouncer, a query in flight is not left
	 * running on a server that would then go back to the pool. */
	struct server *sv = j->sv;
	job_free(j);
	if (sv) {
		sv->internal = SI_NONE;
		server_close(sv, "client disconnect while server was not ready");
	}
}

void authquery_pool_failed(struct pool *p, const char *sqlstate, const char *msg, bool cached)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &jobs) {
		struct authq_job *j = container_of(it, struct authq_job, node);
		if (j->queued && j->pool == p) {
			fail_waiters(j, sqlstate, msg, cached);
			tmp = jobs.next;   /* answering may have ended other jobs */
		}
	}
}

void authquery_reload(void)
{
	if (!cache)
		return;
	size_t n = authcache_clear(cache);
	log_info("auth_query cache cleared on reload: entries=%zu", n);
}

void authquery_free_all(void)
{
	struct list *it;
	while ((it = list_first(&jobs)) != NULL)
		job_free(container_of(it, struct authq_job, node));
	authcache_free(cache);
	cache = NULL;
}

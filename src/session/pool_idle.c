/* pgcrew — pool_idle_timeout, as PgBouncer's development branch has it: a
 * pool that has had no client and no server connection for that long is
 * freed (its servers go by server_idle_timeout, never by this setting; a
 * pool with min_pool_size is kept), so that deployments with ever new users
 * do not pile up pools until a restart; and a pool that has had nothing in
 * this worker for a while gives its shared cell back. Run by the janitor;
 * nothing in the session core calls it, it only reads the pool's use
 * (pool.c: clients, server connections, when one last came or went). */
#include "pool_idle.h"
#include "config.h"
#include "hist.h"
#include "log.h"
#include "pool.h"
#include "world.h"

/* Since when the pool has had nothing, or 0 while it has a client, a
 * server connection or anything on its way (an auth_query lookup, a slot
 * request). With several workers: nothing in any worker (their shared
 * cells), and the time is the latest any worker's last client or server
 * went, so every worker frees its copy at about the same moment. */
static usec_t unused_since(const struct pool *p)
{
	usec_t elsewhere;
	if (p->n_clients > 0 || pool_in_use(p) || hist_pool_used_elsewhere(p->hist, &elsewhere))
		return 0;
	return elsewhere > p->last_used ? elsewhere : p->last_used;
}

/* PgBouncer's line, once for the instance: by the worker whose copy was
 * the last to hold the pool's shared cell (each worker frees its own). Its
 * age is how long the pool had nothing, in whole seconds as PgBouncer
 * prints ages. */
static void clean_up(struct pool *p, usec_t idle)
{
	const char *db = p->db->name, *user = p->user->name;   /* they outlive p */
	if (pool_destroy(p))
		log_info("cleaning up idle pool for user %s on db %s because: pool idle timeout (age=%llds)",
			 user, db, (long long)(idle / USEC_PER_SEC));
}

/* A pool with nothing in this worker (no client, no server, nothing on its
 * way) lets go of its shared cell after this long, or after
 * pool_idle_timeout when that is longer (its last use must stay visible to
 * the other workers until then): a pool that stays, as PgBouncer keeps
 * them without pool_idle_timeout, holds no slot of max_pools for ever.
 * The next client takes one again. */
#define CELL_KEEP_USEC (60 * USEC_PER_SEC)

static void release_unused_cell(struct pool *p, usec_t now, usec_t timeout)
{
	usec_t keep = timeout > CELL_KEEP_USEC ? timeout : CELL_KEEP_USEC;
	if (p->hist && p->n_clients == 0 && !pool_in_use(p) && now - p->last_used >= keep)
		(void)pool_cell_release(p);
}

void pool_idle_clean_up(struct world *w, usec_t now)
{
	usec_t t = w->cfg->pool_idle_timeout;
	struct list *it, *tmp;

	if (w->shutting_down || w->suspended)
		return;
	list_for_each_safe(it, tmp, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		/* The console's pool is not a pool of servers; a paused pool
		 * would lose its PAUSE. */
		if (p->db->admin || p->paused)
			continue;
		/* min_pool_size keeps a pool, as in PgBouncer. */
		usec_t since = p->db->min_pool_size > 0 ? 0 : unused_since(p);
		if (t > 0 && since && now - since > t) {
			clean_up(p, now - since);
			continue;
		}
		release_unused_cell(p, now, t);
	}
}

/* pgcrew — pool_idle_timeout. A pool that no client has used for that long
 * has its servers closed (min_pool_size notwithstanding) and is freed once
 * they are gone, so that deployments with ever new users do not pile up
 * pools until a restart; and a pool that has had nothing in this worker for
 * a while gives its shared cell back. Run by the janitor; nothing in the
 * session core calls it, it only reads the pool's use counts (pool.c). */
#include "pool_idle.h"
#include "config.h"
#include "hist.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "world.h"

#define DROP_REASON "pool idle timeout"

/* Since when no client has used the pool, or 0 while one is connected.
 * With several workers: no client in any worker (their shared cells), and
 * the time is the latest any worker's last client went, so every worker
 * drops its copy at about the same moment. */
static usec_t unused_since(const struct pool *p)
{
	usec_t elsewhere;
	if (p->n_clients > 0 || hist_pool_used_elsewhere(p->hist, &elsewhere))
		return 0;
	return elsewhere > p->last_used ? elsewhere : p->last_used;
}

static void close_list(struct list *servers)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, servers)
		server_close(container_of(it, struct server, node), DROP_REASON);
}

/* Idle servers and logins in progress close now; busy ones (a reset or
 * check query, a cancel) come back idle and close on a later pass, as no
 * client can take them: none is connected. */
static void drop(struct pool *p, usec_t unused)
{
	if (!p->dropping) {
		char age[32];
		util_format_age(unused, age, sizeof(age));
		log_info("dropping pool %s/%s as it has had no client for %s", p->db->name, p->user->name, age);
		p->dropping = true;
		/* The janitor opens a forced user's pool for min_pool_size
		 * before any client asks: not this one again. */
		if (p->db->forced_user)
			p->db->forced_pool_dropped = true;
	}
	close_list(&p->idle_servers);
	close_list(&p->login_servers);
	if (!pool_in_use(p))
		pool_destroy(p);
}

/* A pool with nothing in this worker (no client, no server, nothing on
 * its way) lets go of its shared cell after this long, or after
 * pool_idle_timeout when that is longer (its last use must stay visible to
 * the other workers until then): a pool that stays, as PgBouncer keeps
 * them without pool_idle_timeout, holds no slot of max_pools for ever.
 * The next client takes one again. */
#define CELL_KEEP_USEC (60 * USEC_PER_SEC)

static void release_unused_cell(struct pool *p, usec_t now, usec_t timeout)
{
	usec_t keep = timeout > CELL_KEEP_USEC ? timeout : CELL_KEEP_USEC;
	if (p->hist && p->n_clients == 0 && !pool_in_use(p) && now - p->last_used >= keep)
		pool_cell_release(p);
}

void pool_idle_drop(struct world *w, usec_t now)
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
		usec_t since = unused_since(p);
		if (t > 0 && since && now - since > t) {
			drop(p, now - since);
			continue;
		}
		p->dropping = false;   /* pool_idle_timeout raised or a client came elsewhere */
		release_unused_cell(p, now, t);
	}
}

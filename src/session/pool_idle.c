/* pgcrew — pool_idle_timeout. A pool that no client has used for that long
 * has its servers closed (min_pool_size notwithstanding) and is freed once
 * they are gone, so that deployments with ever new users do not pile up
 * pools until a restart. Run by the janitor; nothing in the session core
 * calls it, it only reads the pool's use counts (pool.c). */
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

/* Something other than a client still points at p, or an answer for it is
 * on its way: a server (one closed in this loop turn waits on the justfree
 * list until the reaper), an auth_query lookup, a request to the
 * supervisor (answers find the pool by name and would count against a
 * new one). */
static bool pool_held(const struct pool *p)
{
	struct list *it;
	if (p->n_idle + p->n_active + p->n_tested + p->n_login + p->n_canceled > 0)
		return true;
	if (p->n_auth_waiting > 0 || p->n_slot_wait > 0 || p->n_repl_slot_wait > 0 ||
	    p->n_repl_withdrawing > 0 || p->welcome_asked == 1)
		return true;
	list_for_each(it, &p->db->world->justfree_servers) {
		if (container_of(it, struct server, node)->pool == p)
			return true;
	}
	return false;
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
	if (!pool_held(p))
		pool_destroy(p);
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
		if (t > 0 && since && now - since > t)
			drop(p, now - since);
		else
			p->dropping = false;   /* pool_idle_timeout raised or a client came elsewhere */
	}
}

/* pgcrew — the world of a worker's sessions (world.h): setting one up, and
 * the hooks by which the session layer tells the loop that runs it, so it
 * never calls up into worker.c. */
#include "world.h"

void world_init(struct world *w, int id, const struct world_hooks *hooks)
{
	*w = (struct world){ .id = id, .hooks = hooks };
	list_init(&w->databases);
	list_init(&w->users);
	list_init(&w->pools);
	hmap_init(&w->db_map);
	hmap_init(&w->user_map);
	hmap_init(&w->pool_map);
	list_init(&w->login_clients);
	list_init(&w->cancel_clients);
	list_init(&w->justfree_clients);
	list_init(&w->justfree_servers);
	list_init(&w->all_clients);
	list_init(&w->all_servers);
	list_init(&w->closing_servers);
}

void world_schedule_reap(struct world *w)
{
	if (w->hooks && w->hooks->schedule_reap)
		w->hooks->schedule_reap(w);
}

void world_check_shutdown(struct world *w)
{
	if (w->hooks && w->hooks->check_shutdown)
		w->hooks->check_shutdown(w);
}

void world_refresh_config(struct world *w)
{
	if (w->hooks && w->hooks->refresh_config)
		w->hooks->refresh_config(w);
}

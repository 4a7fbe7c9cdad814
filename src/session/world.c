/* pgcrew — the world of a worker's sessions (world.h): the one `W` and
 * the hooks by which the session layer tells the loop that runs it, so it
 * never calls up into worker.c. */
#include "world.h"

struct world *W;

static const struct world_hooks *hooks;

void world_init(struct world *w, int id)
{
	*w = (struct world){ .id = id };
	list_init(&w->databases);
	list_init(&w->users);
	list_init(&w->pools);
	list_init(&w->login_clients);
	list_init(&w->cancel_clients);
	list_init(&w->justfree_clients);
	list_init(&w->justfree_servers);
	list_init(&w->all_clients);
	list_init(&w->all_servers);
	list_init(&w->closing_servers);
}

void world_set_hooks(const struct world_hooks *h)
{
	hooks = h;
}

void world_schedule_reap(void)
{
	if (hooks && hooks->schedule_reap)
		hooks->schedule_reap();
}

void world_check_shutdown(void)
{
	if (hooks && hooks->check_shutdown)
		hooks->check_shutdown();
}

void world_refresh_config(void)
{
	if (hooks && hooks->refresh_config)
		hooks->refresh_config();
}

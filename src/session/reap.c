/* pgcrew — the end of a loop iteration: servers released inside a callback
 * are closed (or given to another worker), and clients and servers closed
 * during the iteration are freed, once nothing on the stack can still
 * point at them. Run by the worker's reaper event, and by unit tests. */
#include "reap.h"
#include "client.h"
#include "pool.h"
#include "server.h"
#include "server_move.h"
#include "world.h"

void session_reap(struct world *w)
{
	struct list *it;
	while ((it = list_first(&w->closing_servers)) != NULL) {
		struct server *sv = container_of(it, struct server, close_node);
		struct pool *p = sv->pool;
		list_del(it);
		if (!sv->give_away || !server_give(sv))
			server_close(sv, sv->close_reason);
		pool_launch_needed(p);
	}
	while ((it = list_first(&w->justfree_clients)) != NULL)
		client_free(container_of(it, struct client, node));
	while ((it = list_first(&w->justfree_servers)) != NULL)
		server_free(container_of(it, struct server, node));
}

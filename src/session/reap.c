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
	while ((it = list_first(&w->justfree_servers)) != NULL) {
		struct server *sv = container_of(it, struct server, node);
		struct pool *p = sv->pool;
		bool counted_on = sv->internal == SI_CHECK || sv->internal == SI_RESET;
		server_free(sv);
		/* Closed during its check or reset, which waiters wait for
		 * (pool_launch_needed): they need another now, not at the
		 * janitor's next pass. */
		if (counted_on && (p->n_waiting_clients > 0 || p->n_auth_waiting > 0))
			pool_launch_needed(p);
	}
}

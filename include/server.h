/* pgcrew — server connections: connect, startup and authentication toward
 * PostgreSQL, the relay of responses back to the linked client, internal
 * queries (reset, check, SET, connect_query), closing. */
#ifndef PGCREW_SERVER_H
#define PGCREW_SERVER_H

#include "connlog.h"
#include "objects.h"
#include "log.h"

/* The world a server lives in: its pool's database's (one owner). */
static inline struct world *server_world(const struct server *sv)
{
	return sv->pool->db->world;
}

/* Open one more server connection for the pool; with_slot: the ledger
 * counted it for us. False if it could not even start. */
bool server_launch(struct pool *pool, bool with_slot);
/* A dedicated server for a replication client (c->repl): opened with its
 * replication= and parameters, outside the ledger, linked to c once logged
 * in and closed with it. False when it failed at once (c is then closed). */
bool server_launch_replication(struct client *c, bool with_slot);
/* A server object of the pool in SERVER_LOGIN, counted in its pool,
 * database and user, its stream on fd (-1: not connected yet). For
 * launch, and for a connection that arrives from another worker (which
 * brings its id: none is taken then). */
struct server *server_new(struct pool *p, bool with_slot, int fd);
/* Close after the current loop iteration (see server.c). */
void server_close_soon(struct server *sv, const char *reason);
void server_close_with_client(struct server *sv, const char *reason);
void server_set_state(struct server *sv, enum server_state st);
const char *server_state_name(enum server_state st);
void server_close(struct server *sv, const char *reason);
/* Send a query whose responses the pooler swallows until ReadyForQuery. */
bool server_run_internal(struct server *sv, enum server_internal why, const char *sql);
/* The linked client is done (transaction end, or client gone). */
void server_release(struct server *sv);
/* The linked client vanished while the server may be busy. */
void server_client_gone(struct server *sv);
/* Every cancel for sv has been answered: back to the pool if it waited
 * for them, or its client's held request goes out. */
void server_cancels_done(struct server *sv);
void server_free(struct server *sv);             /* reaper only */
/* Could sv move to another worker at all (several workers, a plain socket
 * or kTLS, a pooled server counted in the ledger)? Whether it can right
 * now is server_give's call (server_move.h). */
bool server_may_move(const struct server *sv);
/* Nothing in flight either way, nothing owed, nothing pending here: the
 * socket can change hands (plain, pooled). */
bool server_at_rest(const struct server *sv);


#endif

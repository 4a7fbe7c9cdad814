/* pgcrew — the worker's side of an online restart that takes connections
 * over: the old process hands each idle client (with its server, in session
 * pooling) and each idle server to the new one, socket and state, as
 * PgBouncer's -R does; the new process takes them in. */
#ifndef PGCREW_CONN_TAKEOVER_H
#define PGCREW_CONN_TAKEOVER_H

#include "types.h"

struct world;

/* Old process (SHUTDOWN_HANDOVER): start handing over now and whenever a
 * client comes to rest, until none is left. */
void conn_takeover_start(struct world *w);
/* Old process, no client left: hand over the idle servers. False while a
 * hand-over pass runs (it checks again at its end). */
bool conn_takeover_last_servers(struct world *w);
/* Clients and servers this worker handed over to the new process. */
void conn_takeover_counts(uint64_t *clients, uint64_t *servers);

/* New process: IPC_TAKEN_CLIENT / IPC_TAKEN_SERVER arrived. */
void conn_takeover_client(struct world *w, uint32_t reqid, const void *payload, size_t len, int fd);
void conn_takeover_server(struct world *w, uint32_t reqid, const void *payload, size_t len, int fd);

#endif

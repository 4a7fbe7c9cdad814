/* pgcrew — moving an idle server connection to another worker: the socket
 * (SCM_RIGHTS through the supervisor) and its state, so the backend stays
 * the same: no new PostgreSQL process, no login, its prepared statements
 * kept. Only plain sockets move, and TLS ones whose keys are in the kernel
 * (kTLS): OpenSSL's own state cannot cross processes. */
#ifndef PGCREW_SERVER_MOVE_H
#define PGCREW_SERVER_MOVE_H

struct world;

#include "ipc.h"
#include "objects.h"

/* Offer sv to the supervisor for another worker's waiting client. True:
 * it has left this worker (sv is freed by the reaper); false: it cannot
 * move (TLS, busy, replies owed...) and stays, for the caller to close. */
bool server_give(struct server *sv);
/* Encode sv, send it with its socket as `type` and forget it here (no
 * Terminate, no slot release); owner: the client it stays linked to, which
 * went just before it (online restart). False: nothing changed. */
bool server_send(struct server *sv, enum ipc_type type, uint32_t reqid, const struct client *owner);
/* A server arriving with its record: a fresh server object of this
 * worker, idle and reading, in its pool (created when new_pool, as for a
 * new process). NULL when it cannot be taken (closed; slot given back). */
struct handover_rec;
struct server *server_received(struct world *w, const void *payload, size_t len, int fd, bool new_pool,
			       struct handover_rec *h);
/* Servers this worker took over from others, and gave to others. */
void server_moves(uint64_t *in, uint64_t *out);
/* IPC_SERVER_FD: a server arrives (from another worker, or back from the
 * supervisor with IPC_SERVER_BACK_*); reqid is the slot request it answers. */
void server_arrived(struct world *w, uint32_t reqid, const void *payload, size_t len, int fd);

#endif

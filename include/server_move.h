/* pgcrew — moving an idle server connection to another worker: the socket
 * (SCM_RIGHTS through the supervisor) and its state, so the backend stays
 * the same: no new PostgreSQL process, no login, its prepared statements
 * kept. Only plain sockets move: OpenSSL's state cannot cross processes. */
#ifndef PGCREW_SERVER_MOVE_H
#define PGCREW_SERVER_MOVE_H

#include "objects.h"

/* Could sv move at all (several workers, a plain socket, a pooled server
 * counted in the ledger)? Whether it can right now is server_give's call. */
bool server_may_move(const struct server *sv);
/* Offer sv to the supervisor for another worker's waiting client. True:
 * it has left this worker (sv is freed by the reaper); false: it cannot
 * move (TLS, busy, replies owed...) and stays, for the caller to close. */
bool server_give(struct server *sv);
/* Servers this worker took over from others, and gave to others. */
void server_moves(uint64_t *in, uint64_t *out);
/* IPC_SERVER_FD: a server arrives (from another worker, or back from the
 * supervisor with IPC_SERVER_BACK_*); reqid is the slot request it answers. */
void server_arrived(uint32_t reqid, const void *payload, size_t len, int fd);

#endif

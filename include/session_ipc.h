/* pgcrew — the supervisor's messages meant for the session layer
 * (session_ipc.c): sockets arriving (clients, servers, an online
 * restart's connections), ledger answers, other workers' wants, shared
 * welcomes and login failures, forwarded cancels. */
#ifndef PGCREW_SESSION_IPC_H
#define PGCREW_SESSION_IPC_H

#include <stdbool.h>

#include "ipc.h"

struct world;

/* Handle one message if it is one of those (true; a socket it carries is
 * taken or closed); false: not a session message, fd untouched. */
bool session_ipc(struct world *w, const struct ipc_hdr *hdr, const void *payload, int fd);

#endif

/* pgcrew — one worker process: its libevent loop, listeners, reaper,
 * janitor and shutdown, around the world (world.h) its sessions live in.
 * Single-threaded (only the LDAP/PAM checks of auth/authpool.h run in
 * threads, on copies). */
#ifndef PGCREW_WORKER_H
#define PGCREW_WORKER_H

#include "types.h"
#include "ipc.h"
#include "listen.h"
#include "util.h"

#include "world.h"

/* This process's world: read by the worker loop only; everything below
 * is given it (world.h). */
extern struct world *W;

/* Runs the worker in the current (forked) process; never returns. */
void worker_main(int id, struct config *cfg, int ipc_fd, struct listen_set *ls) NORETURN;

/* Apply a config generation (reload); takes ownership of cfg. */
void worker_apply_config(struct config *cfg);
/* The server_tls_* settings of a and b differ (the supervisor asks too). */
bool worker_server_tls_changed(const struct config *a, const struct config *b);
/* 0, or -1 with err: the TLS contexts of cfg cannot be built (bad files). */
int worker_check_tls(const struct config *cfg, char *err, size_t errlen) MUSTCHECK;

#endif

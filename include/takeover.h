/* pgcrew — online restart (`pgcrew -R`): a new pgcrew, perhaps a new binary,
 * takes the listening sockets of the running one over a control socket
 * (SCM_RIGHTS), so the sockets are never closed and no connection is
 * refused; the old one stops accepting, hands its idle clients and servers
 * over on the same socket (conn_takeover.h) and exits once no client is
 * left. The control socket is an abstract Unix socket
 * named after listen_port, reachable by the same user only. */
#ifndef PGCREW_TAKEOVER_H
#define PGCREW_TAKEOVER_H

#include "ipc.h"
#include "types.h"
#include <sys/types.h>

struct event_base;
struct listen_set;

/* Running side: answer takeover requests for ls. on_done runs when the new
 * process has its workers up and the old one must go: handing its
 * connections over when the new one reads our records (takes_conns),
 * draining them otherwise. -1 when another
 * process holds the control socket. */
typedef void (*takeover_done_fn)(pid_t new_pid, bool takes_conns);
int takeover_serve(struct event_base *base, int port, struct listen_set *ls, takeover_done_fn on_done) MUSTCHECK;
void takeover_serve_stop(void);
/* Running side, once taken over: pass a connection (IPC_TAKEN_*) to the
 * new process; -1 when there is none to pass it to. */
int takeover_pass(enum ipc_type type, uint32_t reqid, const void *payload, uint32_t len, int fd) MUSTCHECK;
/* Supervisor exit: stop serving and drop the control connection (after
 * sending what is queued for the new process). */
void takeover_free(void);
/* In a freshly forked worker: the control socket is the supervisor's. */
void takeover_close_in_child(void);

/* New side: fetch the sockets for n_slots workers (blocking, bounded);
 * then, once the workers run, tell the old process to go. */
int takeover_fetch(int port, int n_slots, struct listen_set *ls) MUSTCHECK;
/* Every worker runs: tell the old process to hand over and go; on_conn
 * gets the connections it sends (IPC_TAKEN_*). */
void takeover_release_old(struct event_base *base, ipc_handler_fn on_conn);

#endif

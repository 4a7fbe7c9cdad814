/* pgcrew — online restart (`pgcrew -R`): a new pgcrew, perhaps a new binary,
 * takes the listening sockets of the running one over a control socket
 * (SCM_RIGHTS), so the sockets are never closed and no connection is
 * refused; the old one stops accepting and exits once its clients have left
 * (SHUTDOWN WAIT_FOR_CLIENTS). The control socket is an abstract Unix socket
 * named after listen_port, reachable by the same user only. */
#ifndef PGCREW_TAKEOVER_H
#define PGCREW_TAKEOVER_H

#include "types.h"
#include <sys/types.h>

struct event_base;
struct listen_set;

/* Running side: answer takeover requests for ls. on_done runs when the new
 * process has its workers up and the old one must drain. -1 when another
 * process holds the control socket. */
typedef void (*takeover_done_fn)(pid_t new_pid);
int takeover_serve(struct event_base *base, int port, struct listen_set *ls, takeover_done_fn on_done) MUSTCHECK;
void takeover_serve_stop(void);
/* Supervisor exit: stop serving and drop the control connection. */
void takeover_free(void);
/* In a freshly forked worker: the control socket is the supervisor's. */
void takeover_close_in_child(void);

/* New side: fetch the sockets for n_slots workers (blocking, bounded);
 * then, once the workers run, tell the old process to go. */
int takeover_fetch(int port, int n_slots, struct listen_set *ls) MUSTCHECK;
void takeover_release_old(void);

#endif

/* pgcrew — freeing what a loop iteration closed (reap.c). */
#ifndef PGCREW_REAP_H
#define PGCREW_REAP_H

struct world;

/* Close the servers queued on closing_servers and free the clients and
 * servers in JUSTFREE: after the iteration that closed them. */
void session_reap(struct world *w);

#endif

/* pgcrew — freeing what a loop iteration closed (reap.c). */
#ifndef PGCREW_REAP_H
#define PGCREW_REAP_H

/* Close the servers queued on closing_servers and free the clients and
 * servers in JUSTFREE: after the iteration that closed them. */
void session_reap(void);

#endif

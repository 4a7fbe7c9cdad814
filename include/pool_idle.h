/* pgcrew — pool_idle_timeout: pools that have had no client and no server
 * connection for that long are freed (PgBouncer's development branch,
 * "cleaning up idle pool"), and pools with nothing in this worker give
 * their shared cell back. */
#ifndef PGCREW_POOL_IDLE_H
#define PGCREW_POOL_IDLE_H

#include "util.h"

struct world;

/* Janitor, every pass: free the pools unused for pool_idle_timeout. */
void pool_idle_clean_up(struct world *w, usec_t now);

#endif

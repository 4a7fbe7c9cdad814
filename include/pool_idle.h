/* pgcrew — pool_idle_timeout: pools that no client has used for that long
 * are dropped, their servers closed whatever min_pool_size says, and
 * freed (PgBouncer's development branch, cleanup_inactive_pools). */
#ifndef PGCREW_POOL_IDLE_H
#define PGCREW_POOL_IDLE_H

#include "util.h"

struct world;

/* Janitor, every pass: start dropping the pools unused for
 * pool_idle_timeout, and free those whose servers have gone. */
void pool_idle_drop(struct world *w, usec_t now);

#endif

/* pgcrew — per-worker statistics: the periodic `stats:` log line in
 * PgBouncer's format, computed from the pools' counters over stats_period. */
#ifndef PGCREW_STATS_H
#define PGCREW_STATS_H

#include "shm.h"

struct pool_stats;

void stats_start(void);
void stats_stop(void);
/* Pools' new counts into shared memory (the janitor, SHOW STATS). */
void stats_flush(void);
void stats_free(void);
void stats_to_array(const struct pool_stats *s, uint64_t a[SHM_STATS]);

#endif

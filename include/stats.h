/* pgcrew — per-worker statistics: the periodic `stats:` log line in
 * PgBouncer's format, computed from the pools' counters over stats_period. */
#ifndef PGCREW_STATS_H
#define PGCREW_STATS_H

#include "shm.h"

struct pool;
struct pool_stats;
struct world;

/* The counters' places in the arrays of SHM_STATS (stats_to_array). */
enum stats_col { ST_XACT, ST_QUERY, ST_IN, ST_OUT, ST_XACT_TIME, ST_QUERY_TIME, ST_WAIT_TIME, ST_ASSIGN,
		 ST_ERRORS, ST_CLIENT_PARSE, ST_SERVER_PARSE, ST_BIND, ST_CLIENT_LOGIN };

void stats_start(struct world *w);
void stats_stop(struct world *w);
/* Pools' new counts into shared memory (the janitor, SHOW STATS). */
void stats_flush(struct world *w);
/* One pool's, before it is freed (pool_idle_timeout). */
void stats_flush_pool(struct pool *p);
void stats_free(void);
/* A database's averages for SHOW STATS (shm index idx). */
void stats_avg_get(int idx, uint64_t avg[SHM_STATS]);
/* Averages of totals tot since the start (before the first stats_period). */
void stats_avg_since_start(const uint64_t tot[SHM_STATS], uint64_t avg[SHM_STATS]);
void stats_to_array(const struct pool_stats *s, uint64_t a[SHM_STATS]);

#endif

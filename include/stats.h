/* pgcrew — per-worker statistics: the periodic `stats:` log line in
 * PgBouncer's format, computed from the pools' counters over stats_period. */
#ifndef PGCREW_STATS_H
#define PGCREW_STATS_H

void stats_start(void);
void stats_stop(void);

#endif

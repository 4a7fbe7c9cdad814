/* pgcrew — periodic maintenance in each worker: every timeout, min_pool_size,
 * reserve-pool and login-retry decisions, autodb expiry, the stats log line. */
#ifndef PGCREW_JANITOR_H
#define PGCREW_JANITOR_H

struct world;

void janitor_start(struct world *w);
void janitor_stop(struct world *w);
/* One walk of the lists, as the timer makes every JANITOR_PERIOD_USEC. */
void janitor_pass(struct world *w);

#endif

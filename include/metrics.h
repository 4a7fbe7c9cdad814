/* pgcrew — the Prometheus endpoint (metrics_listen): an evhttp server in the
 * supervisor answering GET /metrics in text format 0.0.4 for the whole
 * instance. Counters and histograms come from shared memory, pool, server and
 * database gauges from a console fan-out over every worker. */
#ifndef PGCREW_METRICS_H
#define PGCREW_METRICS_H

#include "types.h"

struct event_base;
struct config;

/* Bind metrics_listen (nothing when empty). -1 when it cannot be bound;
 * with retry (online restart: the old process still has it), a taken port
 * is tried again every 100 ms for 10 s instead. */
int metrics_start(struct event_base *base, const struct config *cfg, bool retry) MUSTCHECK;
/* Online restart: stop accepting; scrapes under way still finish. */
void metrics_close_listener(void);
/* At exit: close everything, drop scrapes still waiting for workers. */
void metrics_stop(void);
/* In a freshly forked worker: close the supervisor's HTTP sockets (listener
 * and connections) without touching its event_base. */
void metrics_close_in_child(void);

#endif

/* pgcrew — the Prometheus endpoint (metrics_listen): an evhttp server in the
 * supervisor answering GET /metrics in text format 0.0.4 for the whole
 * instance, and the probes GET /healthz and /readyz (doc/metrics.md). Counters and histograms come from shared memory, pool, server and
 * database gauges from a console fan-out over every worker. */
#ifndef PGCREW_METRICS_H
#define PGCREW_METRICS_H

#include "types.h"

struct event_base;
struct config;

/* What the endpoint needs from its process (the supervisor registers it,
 * so this module never calls up): the configuration in force, and a
 * console command run by every worker, whose result messages go to on_part
 * as they come, then on_done once with "" or the first error. */
typedef void (*metrics_part_fn)(void *arg, const void *data, size_t len);
typedef void (*metrics_done_fn)(void *arg, const char *err);
struct metrics_source {
	const struct config *(*config)(void);
	void (*fanout)(const char *cmd, metrics_part_fn on_part, metrics_done_fn on_done, void *arg);
	int (*ledger_entries)(void);        /* may be NULL */
	/* For /readyz; NULL: not shutting down, every worker ready. */
	bool (*shutting_down)(void);
	bool (*worker_ready)(int slot);     /* running and listening */
};

/* Bind metrics_listen (nothing when empty). -1 when it cannot be bound;
 * with retry (online restart: the old process still has it), a taken port
 * is tried again every 100 ms for 10 s instead. */
int metrics_start(struct event_base *base, const struct config *cfg, const struct metrics_source *src,
		  bool retry) MUSTCHECK;
/* Online restart: stop accepting; scrapes under way still finish. */
void metrics_close_listener(void);
/* At exit: close everything, drop scrapes still waiting for workers. */
void metrics_stop(void);
/* In a freshly forked worker: close the supervisor's HTTP sockets (listener
 * and connections) without touching its event_base. */
void metrics_close_in_child(void);

/* The probes' verdicts, without HTTP (unit tests): true when healthy /
 * ready; why gets one line per reason otherwise ("" when true). A worker
 * is hung when its heartbeat (shm_health_of) is older than stale_usec. */
#define METRICS_STALE_USEC (2 * USEC_PER_SEC)
bool metrics_healthy(const struct metrics_source *src, usec_t now, char *why, size_t len);
bool metrics_ready(const struct metrics_source *src, usec_t now, char *why, size_t len);

#endif

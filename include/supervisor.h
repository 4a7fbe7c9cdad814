/* pgcrew — the supervisor process: owns the config generation, the listening
 * sockets of every worker slot, and process life (fork, reap, respawn,
 * signals turned into orders). It never touches client traffic. */
#ifndef PGCREW_SUPERVISOR_H
#define PGCREW_SUPERVISOR_H

#include "types.h"

struct config;

struct run_options {
	const char *config_path;
	bool daemon;               /* -d */
	bool quiet;                /* -q */
	int verbose;               /* -v count */
	const char *user;          /* -u */
	bool takeover;             /* -R: online restart, take the running pgcrew's sockets */
};

/* Runs until shutdown; returns the process exit code. Takes ownership of cfg. */
int supervisor_run(const struct run_options *opt, struct config *cfg);

/* A console command run by every worker for the supervisor itself (the
 * metrics endpoint): each worker's result messages go to on_part as they
 * come, then on_done once, with "" or the first error. */
typedef void (*supervisor_part_fn)(void *arg, const void *data, size_t len);
typedef void (*supervisor_done_fn)(void *arg, const char *err);
void supervisor_fanout(const char *cmd, supervisor_part_fn on_part, supervisor_done_fn on_done, void *arg);
/* The configuration in force (it changes on RELOAD). */
const struct config *supervisor_config(void);

#endif

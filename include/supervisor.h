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

#endif

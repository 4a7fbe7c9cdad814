/* pgcrew — the console's control commands as each worker carries them out:
 * PAUSE, RESUME, DISABLE, ENABLE, KILL, KILL_CLIENT, RECONNECT, WAIT_CLOSE,
 * SUSPEND.
 * The console fans a command out to every worker (admin.c); each answers
 * done, "not here" (a client id or auto-database it does not have), an
 * error, or later: PAUSE and WAIT_CLOSE answer once their servers are gone,
 * SUSPEND once every socket's output is flushed. */
#ifndef PGCREW_CONTROL_H
#define PGCREW_CONTROL_H

#include "types.h"

struct server;
struct world;

enum ctl_cmd {
	CTL_PAUSE, CTL_RESUME, CTL_DISABLE, CTL_ENABLE, CTL_KILL, CTL_KILL_CLIENT,
	CTL_RECONNECT, CTL_WAIT_CLOSE, CTL_SUSPEND, CTL_COUNT
};

enum ctl_result { CTL_DONE, CTL_NOT_HERE, CTL_ERROR, CTL_LATER };

const char *ctl_name(enum ctl_cmd cmd);        /* "PAUSE", ... (the command tag) */
/* The command named name (any case); false if it is not a control command. */
bool ctl_lookup(const char *name, enum ctl_cmd *cmd);
/* Before a command goes to every worker, in the asking one: PgBouncer's
 * checks of the instance's state in its order ("already suspended/
 * paused", "pooler is not paused/suspended", "cannot suspend with paused
 * databases", "a database is required", ...; every worker holds the same
 * state, as every change of it reaches them all) and its "... command
 * issued" log line. false: err is the error to answer. Admin rights are
 * checked before. */
bool control_check(struct world *world, enum ctl_cmd cmd, const char *arg, char *err, size_t len);
/* Carry it out here. CTL_LATER: the answer (IPC_ADMIN_DONE for fanid)
 * follows from control_janitor(). err gets the text for ERROR/NOT_HERE:
 * a NOT_HERE text starts with "?" (this worker lacks the database or
 * client) or "??" (it has it, but the command does not apply: RESUME of a
 * database not paused); the supervisor answers the strongest of them
 * only when no worker carried the command out. */
enum ctl_result control_apply(struct world *world, enum ctl_cmd cmd, const char *arg, uint32_t fanid, char *err, size_t len);
/* Janitor tick: answer PAUSE/WAIT_CLOSE whose servers are gone, SUSPEND
 * once flushed (closing what is not after suspend_timeout). */
void control_janitor(struct world *world);
void control_free(void);
/* KILL_CLIENT's argument as PgBouncer's sscanf("%llu") reads it: blanks,
 * a sign, digits, and whatever follows ignored ("12abc" is 12, "-1" wraps
 * around, one too large is the largest). false: no digit. */
bool ctl_client_id(const char *arg, unsigned long long *id);
/* PgBouncer's cf_pause_mode, which its checks and SHOW STATE read:
 * paused by PAUSE, SIGUSR1 or a SHUTDOWN WAIT_FOR_SERVERS (ordered, or
 * asked by this worker's console), or suspended. */
enum ctl_pause { CTL_RUNNING, CTL_PAUSED, CTL_SUSPENDED };
enum ctl_pause control_pause_mode(const struct world *world);
/* RESUME without a database (also SIGUSR2): undo PAUSE and SUSPEND. */
void control_resume_all(struct world *world);
/* SIGUSR1: pause as PAUSE does, without waiting for anything. */
void control_pause_all(struct world *world);
/* A worker starting (again, after a crash) takes up the other workers'
 * PAUSE or SUSPEND (shm.h), once its listener is made. */
void control_adopt_mode(struct world *world);

/* The console's SET key = value (cmdparse.h reads it). The supervisor
 * applies it to its own copy first (and refuses it for every worker on an
 * error), then each worker to its current configuration. 0: applied; 1: a
 * key that needs a restart, which PgBouncer accepts and leaves as it runs
 * (nothing changed); -1: an unknown key (logged as PgBouncer's cf_set does) or a value the
 * setting refuses (logged with the reason), err gets PgBouncer's "SET
 * failed". The key is taken as typed: PgBouncer's names are lower case. */
struct config;
int ctl_apply_set(struct config *cfg, const char *key, const char *val, char *err, size_t len);

/* PgBouncer's fake parameters, which drivers set or read on connect: SHOW
 * gives the value, SET is answered "SET ignored". NULL when name (any
 * case) is not one. */
struct ctl_fake {
	const char *name;              /* as PgBouncer names the SHOW column */
	const char *value;
};
const struct ctl_fake *ctl_fake_param(const char *name);

#endif

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
/* Parse "<name> [arg]"; false if text is not a control command. */
bool ctl_parse(const char *text, enum ctl_cmd *cmd, const char **arg);
/* Carry it out here. CTL_LATER: the answer (IPC_ADMIN_DONE for fanid)
 * follows from control_janitor(). err gets the text for ERROR/NOT_HERE. */
enum ctl_result control_apply(struct world *world, enum ctl_cmd cmd, const char *arg, uint32_t fanid, char *err, size_t len);
/* Janitor tick: answer PAUSE/WAIT_CLOSE whose servers are gone, SUSPEND
 * once flushed (closing what is not after suspend_timeout). */
void control_janitor(struct world *world);
void control_free(void);
/* RESUME without a database (also SIGUSR2): undo PAUSE and SUSPEND. */
void control_resume_all(struct world *world);

/* The console's SET key = value / SET key TO 'value'. Parse; then apply to
 * a config (reloadable keys only), err naming the reason. The supervisor
 * applies it to its own copy first (and refuses it for every worker on an
 * error), then each worker to its current configuration. */
bool ctl_parse_set(const char *text, char *key, size_t klen, char *val, size_t vlen);
struct config;
int ctl_apply_set(struct config *cfg, const char *key, const char *val, char *err, size_t len);
/* Parameters drivers set on connect that the console accepts and ignores
 * (PgBouncer's "SET ignored"). */
bool ctl_fake_param(const char *key);

#endif

/* pgcrew — console control commands, carried out in one worker (see
 * control.h). PgBouncer's wording for errors and logs; PAUSE disconnects
 * servers as they are released and answers when none is left, as
 * PgBouncer's PAUSE "will not return before all server connections have
 * been disconnected". */
#include "control.h"
#include "client.h"
#include "config.h"
#include "config/settings.h"
#include "ipc.h"
#include "listen.h"
#include "log.h"
#include "pool.h"
#include "shm.h"
#include "server.h"
#include "stream.h"
#include "util.h"
#include "world.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static const char *const names[CTL_COUNT] = {
	[CTL_PAUSE] = "PAUSE", [CTL_RESUME] = "RESUME", [CTL_DISABLE] = "DISABLE",
	[CTL_ENABLE] = "ENABLE", [CTL_KILL] = "KILL", [CTL_KILL_CLIENT] = "KILL_CLIENT",
	[CTL_RECONNECT] = "RECONNECT", [CTL_WAIT_CLOSE] = "WAIT_CLOSE", [CTL_SUSPEND] = "SUSPEND",
};

/* A PAUSE or WAIT_CLOSE waiting for servers to go, a SUSPEND for buffers
 * to drain. */
struct waiting {
	struct list node;
	uint32_t fanid;
	enum ctl_cmd cmd;
	char db[64];               /* "" = every database */
	usec_t since;
};

static struct list waits = LIST_INIT(waits);

static void resume_sockets(struct world *world);

const char *ctl_name(enum ctl_cmd cmd)
{
	return cmd < CTL_COUNT ? names[cmd] : "?";
}

bool ctl_lookup(const char *name, enum ctl_cmd *cmd)
{
	for (int i = 0; i < CTL_COUNT; i++) {
		if (strcasecmp(name, names[i]) == 0) {
			*cmd = (enum ctl_cmd)i;
			return true;
		}
	}
	return false;
}

static bool in_scope(const struct database *db, const char *name)
{
	return !db->admin && (!*name || strcmp(db->name, name) == 0);
}

static int unflushed(struct world *world, bool close_them);

/* Servers PAUSE (all) or WAIT_CLOSE (close_needed ones) still waits for;
 * SUSPEND: sockets with output still queued. */
static int remaining(struct world *world, const struct waiting *w)
{
	int n = 0;
	struct list *it;
	if (w->cmd == CTL_SUSPEND)
		return unflushed(world, false);
	list_for_each(it, &world->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		if (sv->state == SERVER_JUSTFREE || !in_scope(sv->pool->db, w->db))
			continue;
		n += w->cmd == CTL_PAUSE || sv->close_needed;
	}
	return n;
}

static void answer(struct world *world, uint32_t fanid, const char *err)
{
	if (ipc_send_text(world->sup, IPC_ADMIN_DONE, fanid, err) < 0)
		log_warning("could not answer a console command");
}

static bool suspend_pending(void)
{
	struct list *it;
	list_for_each(it, &waits)
		if (container_of(it, struct waiting, node)->cmd == CTL_SUSPEND)
			return true;
	return false;
}

/* PgBouncer resumes by itself once suspended (and flushed) with no console
 * connection left: nobody could RESUME, since new ones cannot log in.
 * Console clients are counted on the console database's shared slot, so
 * each worker sees when the last one of any worker has gone; worker 0
 * logs it, once, as PgBouncer does. */
static void resume_if_no_console(struct world *world)
{
	if (!world->suspended || world->shutting_down || suspend_pending())
		return;
	struct database *adb = pool_find_db(world, "pgbouncer");
	int idx = shm_name_find(SHM_DB, "pgbouncer");    /* a worker that never had one lacks adb */
	if ((idx >= 0 ? shm_name_total(idx) : adb ? adb->n_clients : 0) > 0)
		return;
	if (world->id == 0)
		log_info("admin disappeared when suspended, doing RESUME");
	control_resume_all(world);
}

void control_janitor(struct world *world)
{
	struct list *it, *tmp;
	resume_if_no_console(world);
	list_for_each_safe(it, tmp, &waits) {
		struct waiting *w = container_of(it, struct waiting, node);
		/* PgBouncer's suspend_timeout: drop what would not flush. */
		if (w->cmd == CTL_SUSPEND && world->cfg->suspend_timeout > 0 &&
		    util_monotonic() - w->since > world->cfg->suspend_timeout)
			unflushed(world, true);
		if (remaining(world, w) > 0)
			continue;
		answer(world, w->fanid, "");
		list_del(&w->node);
		free(w);
	}
}

static enum ctl_result later(struct world *world, enum ctl_cmd cmd, const char *db, uint32_t fanid)
{
	struct waiting *w = xcalloc(1, sizeof(*w));
	w->cmd = cmd;
	w->fanid = fanid;
	w->since = util_monotonic();
	strlcpy_(w->db, db, sizeof(w->db));
	if (remaining(world, w) == 0) {
		free(w);
		return CTL_DONE;
	}
	list_append(&waits, &w->node);
	return CTL_LATER;
}

/* The named database, or an error/"not here" text. Auto-databases exist
 * only in the workers whose clients made them, unless the command
 * registers one as PgBouncer's find_or_register_database does (PAUSE,
 * KILL, DISABLE, RECONNECT, WAIT_CLOSE: then in every worker; RESUME and
 * ENABLE only look). */
static struct database *find_db(struct world *world, const char *arg, bool reg, char *err, size_t len, enum ctl_result *why)
{
	struct database *db = reg ? pool_get_db(world, arg) : pool_find_db(world, arg);
	if (db && !db->dead)
		return db;
	snprintf(err, len, "?no such database: %s", arg);
	*why = CTL_NOT_HERE;
	return NULL;
}

static void close_idle(struct world *world, struct database *only, const char *reason)
{
	struct list *it, *s, *t;
	list_for_each(it, &world->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (p->db->admin || (only && p->db != only))
			continue;
		list_for_each_safe(s, t, &p->idle_servers)
			server_close(container_of(s, struct server, node), reason);
	}
}

/* db->paused and its shared copy (shm.h), which a worker making the
 * database later and SUSPEND's check read. */
static void set_paused(struct database *db, bool paused)
{
	db->paused = paused;
	shm_db_set_paused(db->shm_idx, paused);
}

static void relaunch_all(struct world *world)
{
	struct list *it;
	list_for_each(it, &world->pools)
		pool_launch_needed(container_of(it, struct pool, node));
}

static enum ctl_result do_pause(struct world *world, const char *arg, uint32_t fanid, char *err, size_t len)
{
	enum ctl_result r = CTL_ERROR;
	struct database *db = NULL;

	if (*arg && !(db = find_db(world, arg, true, err, len, &r)))
		return r;
	if (db && db->admin) {
		snprintf(err, len, "cannot pause admin db: %s", arg);
		return CTL_ERROR;
	}
	if (db) {
		set_paused(db, true);
	} else {
		world->paused = true;
		shm_set_pause_mode((int)control_pause_mode(world));
	}
	close_idle(world, db, "pause mode");
	return later(world, CTL_PAUSE, db ? db->name : "", fanid);
}

/* RESUME db: only where it is paused; "not paused" outranks "no such
 * database" from the workers that lack it (an auto-database). */
static enum ctl_result do_resume(struct world *world, const char *arg, char *err, size_t len)
{
	enum ctl_result r = CTL_ERROR;
	struct database *db;

	if (!*arg) {
		control_resume_all(world);
		return CTL_DONE;
	}
	if (!(db = find_db(world, arg, false, err, len, &r)))
		return r;
	if (!db->paused) {
		snprintf(err, len, "??database %s is not paused", arg);
		return CTL_NOT_HERE;
	}
	set_paused(db, false);
	relaunch_all(world);
	return CTL_DONE;
}

/* ---- SUSPEND ----
 * Every socket but the console's stops reading and the listeners stop
 * accepting; queued output keeps draining, and the command answers once it
 * has. RESUME reads again. */

static bool console_client(const struct client *c)
{
	return c->admin || (c->db && c->db->admin);
}

/* Sockets with output queued; with close_them, close them. */
static int unflushed(struct world *world, bool close_them)
{
	int n = 0;
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &world->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->state == CLIENT_JUSTFREE || console_client(c) || stream_flushed(&c->s))
			continue;
		n++;
		if (close_them)
			client_close(c, false, "suspend_timeout");
	}
	list_for_each_safe(it, tmp, &world->all_servers) {
		struct server *sv = container_of(it, struct server, all_node);
		if (sv->state == SERVER_JUSTFREE || stream_flushed(&sv->s))
			continue;
		n++;
		if (close_them)
			server_close(sv, "suspend_timeout");
	}
	return n;
}

static enum ctl_result do_suspend(struct world *world, uint32_t fanid)
{
	struct list *it;
	world->suspended = true;
	shm_set_pause_mode((int)control_pause_mode(world));
	listener_pause(world->listener, true);
	list_for_each(it, &world->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->state != CLIENT_JUSTFREE && !console_client(c))
			stream_suspend(&c->s);
	}
	list_for_each(it, &world->all_servers) {
		struct server *sv = container_of(it, struct server, all_node);
		if (sv->state != SERVER_JUSTFREE)
			stream_suspend(&sv->s);
	}
	log_debug("SUSPEND: sockets suspended, waiting for buffers to flush");
	return later(world, CTL_SUSPEND, "", fanid);
}

static void resume_sockets(struct world *world)
{
	struct list *it;
	if (!world->suspended)
		return;
	world->suspended = false;
	if (!world->shutting_down)
		listener_pause(world->listener, false);
	list_for_each(it, &world->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->state != CLIENT_JUSTFREE)
			stream_unsuspend(&c->s);
	}
	list_for_each(it, &world->all_servers) {
		struct server *sv = container_of(it, struct server, all_node);
		if (sv->state != SERVER_JUSTFREE)
			stream_unsuspend(&sv->s);
	}
}

void control_resume_all(struct world *world)
{
	world->paused = false;
	resume_sockets(world);
	shm_set_pause_mode((int)control_pause_mode(world));
	relaunch_all(world);
}

void control_pause_all(struct world *world)
{
	world->paused = true;
	shm_set_pause_mode((int)control_pause_mode(world));
}

void control_adopt_mode(struct world *world)
{
	int mode = shm_pause_mode_of_others();
	if (mode == CTL_SUSPENDED) {
		world->suspended = true;
		listener_pause(world->listener, true);
	} else if (mode == CTL_PAUSED) {
		world->paused = true;
	}
	if (mode != CTL_RUNNING)
		log_info("worker %d starts %s, as the other workers are",
			 world->id, mode == CTL_SUSPENDED ? "suspended" : "paused");
	shm_set_pause_mode(mode);
}

static void kill_db(struct database *db)
{
	struct list *it, *tmp;
	set_paused(db, true);  /* new clients wait until RESUME, as in PgBouncer */
	list_for_each_safe(it, tmp, &db->world->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->state != CLIENT_JUSTFREE && c->db == db && !c->admin)
			client_close_sqlstate(c, "08P01", "database removed");
	}
	list_for_each_safe(it, tmp, &db->world->all_servers) {
		struct server *sv = container_of(it, struct server, all_node);
		if (sv->state != SERVER_JUSTFREE && sv->pool->db == db)
			server_close(sv, "database removed");
	}
}

/* KILL without a database: PgBouncer pauses and empties the databases it
 * has pools of. Which those are was decided once, in the asking worker,
 * from every worker's use (shm_db_mark_kill in control_check); without
 * shared memory (one process) from this worker's pools. */
static bool kill_marked(struct world *world, const struct database *db)
{
	struct list *it;
	if (shm_enabled())
		return shm_db_kill_marked(db->shm_idx);
	list_for_each(it, &world->pools)
		if (container_of(it, struct pool, node)->db == db)
			return true;
	return false;
}

static enum ctl_result do_kill(struct world *world, const char *arg, char *err, size_t len)
{
	enum ctl_result r = CTL_ERROR;
	struct database *db;
	struct list *it;

	if (!*arg) {
		list_for_each(it, &world->databases) {
			db = container_of(it, struct database, node);
			if (!db->admin && !db->dead && kill_marked(world, db))
				kill_db(db);
		}
		return CTL_DONE;
	}
	if (!(db = find_db(world, arg, true, err, len, &r)))
		return r;
	if (db->admin) {
		snprintf(err, len, "cannot kill admin db: %s", arg);
		return CTL_ERROR;
	}
	kill_db(db);
	return CTL_DONE;
}

bool ctl_client_id(const char *arg, unsigned long long *id)
{
	const char *p = arg;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '+' || *p == '-')
		p++;
	if (!isdigit((unsigned char)*p))
		return false;
	*id = strtoull(arg, NULL, 10);
	return true;
}

static enum ctl_result do_kill_client(struct world *world, const char *arg, char *err, size_t len)
{
	unsigned long long id;
	struct list *it;

	if (!ctl_client_id(arg, &id)) {
		snprintf(err, len, "invalid client pointer supplied");      /* PgBouncer's words */
		return CTL_ERROR;
	}
	list_for_each(it, &world->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->id != id || c->state == CLIENT_JUSTFREE)
			continue;
		client_close_sqlstate(c, "08P01", "admin forced disconnect");
		return CTL_DONE;
	}
	snprintf(err, len, "?client not found");
	return CTL_NOT_HERE;
}

static enum ctl_result do_able(struct world *world, const char *arg, char *err, size_t len, bool disable)
{
	enum ctl_result r = CTL_ERROR;
	struct database *db;
	if (!*arg) {
		snprintf(err, len, "a database is required");
		return CTL_ERROR;
	}
	if (!(db = find_db(world, arg, disable, err, len, &r)))
		return r;
	if (db->admin) {     /* ENABLE's words too, in PgBouncer 1.25 */
		snprintf(err, len, "cannot disable admin db: %s", arg);
		return CTL_ERROR;
	}
	db->disabled = disable;
	return CTL_DONE;
}

static enum ctl_result do_reconnect(struct world *world, const char *arg, uint32_t fanid, char *err, size_t len, bool wait)
{
	enum ctl_result r = CTL_ERROR;
	struct database *db = NULL;
	struct list *it;

	if (*arg && !(db = find_db(world, arg, true, err, len, &r)))
		return r;
	if (db && db->admin) {
		snprintf(err, len, wait ? "cannot wait in admin db: %s" : "cannot reconnect admin db: %s", arg);
		return CTL_ERROR;
	}
	if (wait)
		return later(world, CTL_WAIT_CLOSE, db ? db->name : "", fanid);
	list_for_each(it, &world->databases) {
		struct database *d = container_of(it, struct database, node);
		if (in_scope(d, db ? db->name : "") && !d->dead)
			pool_reconnect_db(d, "database configuration changed");
	}
	return CTL_DONE;
}

enum ctl_result control_apply(struct world *world, enum ctl_cmd cmd, const char *arg, uint32_t fanid, char *err, size_t len)
{
	err[0] = 0;
	switch (cmd) {
	case CTL_PAUSE:
		return do_pause(world, arg, fanid, err, len);
	case CTL_RESUME:
		return do_resume(world, arg, err, len);
	case CTL_DISABLE:
	case CTL_ENABLE:
		return do_able(world, arg, err, len, cmd == CTL_DISABLE);
	case CTL_KILL:
		return do_kill(world, arg, err, len);
	case CTL_KILL_CLIENT:
		return do_kill_client(world, arg, err, len);
	case CTL_RECONNECT:
	case CTL_WAIT_CLOSE:
		return do_reconnect(world, arg, fanid, err, len, cmd == CTL_WAIT_CLOSE);
	case CTL_SUSPEND:
		return do_suspend(world, fanid);
	default:
		snprintf(err, len, "unknown command");
		return CTL_ERROR;
	}
}

/* PgBouncer's cf_shutdown: a shutdown that waits, ordered or asked here. */
static bool shutting_down(const struct world *world)
{
	return world->shutting_down || world->shutdown_asked;
}

enum ctl_pause control_pause_mode(const struct world *world)
{
	if ((world->shutting_down && world->shutdown_mode == SHUTDOWN_WAIT_SERVERS) ||
	    (world->shutdown_asked && world->asked_mode == SHUTDOWN_WAIT_SERVERS))
		return CTL_PAUSED;       /* PgBouncer's SHUTDOWN WAIT_FOR_SERVERS sets P_PAUSE */
	if (world->suspended)
		return CTL_SUSPENDED;
	return world->paused ? CTL_PAUSED : CTL_RUNNING;
}

static bool pause_mode(const struct world *world)
{
	return control_pause_mode(world) != CTL_RUNNING;
}

/* Paused databases, in any worker (an auto-database another worker has):
 * PgBouncer's count_paused_databases. */
static bool any_db_paused(struct world *world)
{
	struct list *it;
	if (shm_enabled())
		return shm_db_count_paused() > 0;
	list_for_each(it, &world->databases) {
		const struct database *db = container_of(it, struct database, node);
		if (db->paused && !db->dead)
			return true;
	}
	return false;
}

static void log_issued(enum ctl_cmd cmd, const char *arg)
{
	if (*arg)
		log_info("%s '%s' command issued", ctl_name(cmd), arg);
	else
		log_info("%s command issued", ctl_name(cmd));
}

/* Where PgBouncer logs "... command issued": RESUME before its checks,
 * KILL_CLIENT never, the others once their checks passed. */
bool control_check(struct world *world, enum ctl_cmd cmd, const char *arg, char *err, size_t len)
{
	unsigned long long id;
	const char *why = NULL;

	if (cmd == CTL_RESUME)
		log_issued(cmd, arg);
	switch (cmd) {
	case CTL_PAUSE:
	case CTL_KILL:
	case CTL_SUSPEND:
		if (pause_mode(world))
			why = "already suspended/paused";
		else if (cmd == CTL_SUSPEND && any_db_paused(world))
			why = "cannot suspend with paused databases";   /* SUSPEND must flush */
		break;
	case CTL_RESUME:
		if (!*arg && shutting_down(world))
			why = "pooler is shutting down";
		else if (!*arg && !world->paused && !world->suspended)
			why = "pooler is not paused/suspended";
		break;
	case CTL_DISABLE:
	case CTL_ENABLE:
		if (!*arg)
			why = "a database is required";
		break;
	case CTL_KILL_CLIENT:
		if (!ctl_client_id(arg, &id))
			why = "invalid client pointer supplied";
		break;
	default:
		break;
	}
	snprintf(err, len, "%s", why ? why : "");
	if (why)
		return false;
	if (cmd != CTL_RESUME && cmd != CTL_KILL_CLIENT)
		log_issued(cmd, arg);
	if (cmd == CTL_KILL && *arg)
		shm_db_unpool(arg);        /* its pools are emptied: none left */
	else if (cmd == CTL_KILL)
		shm_db_mark_kill();
	return true;
}

const struct ctl_fake *ctl_fake_param(const char *name)
{
	static const struct ctl_fake fake[] = {     /* PgBouncer's fake_param_list */
		{ "client_encoding", "UTF-8" },
		{ "default_transaction_isolation", "read committed" },
		{ "standard_conforming_strings", "on" },
		{ "datestyle", "ISO" },
		{ "timezone", "GMT" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(fake); i++)
		if (strcasecmp(name, fake[i].name) == 0)
			return &fake[i];
	return NULL;
}

int ctl_apply_set(struct config *cfg, const char *key, const char *val, char *err, size_t len)
{
	const struct setting *s = setting_find(key);
	char msg[256];

	snprintf(err, len, "SET failed");
	if (!s) {
		log_error("unknown parameter: pgbouncer/%s", key);      /* cf_set's words */
		return -1;
	}
	if (!setting_reloadable(s)) {
		err[0] = 0;
		return 1;        /* PgBouncer's cf_set: ignored once loaded, whatever the value */
	}
	if (setting_parse(cfg, s, val, msg, sizeof(msg)) < 0) {
		log_error("invalid value \"%s\" for parameter %s: %s", val, key, msg);
		return -1;
	}
	err[0] = 0;
	return 0;
}

void control_free(void)
{
	struct list *it;
	while ((it = list_first(&waits)) != NULL) {
		list_del(it);
		free(container_of(it, struct waiting, node));
	}
}

/* pgcrew — the world a worker's sessions live in: the registry of
 * databases, users, pools and connections, the configuration in force, TLS
 * and HBA, the flags, the event base and the channel to the supervisor.
 * Passed in: every session object points to its world, and entry points
 * take it. The worker loop (worker.c) builds one per process and registers
 * the hooks below; a unit test builds its own. */
#ifndef PGCREW_WORLD_H
#define PGCREW_WORLD_H

#include "hmap.h"
#include "types.h"
#include "ipc.h"
#include "listen.h"
#include "util.h"

struct config;
struct event_base;
struct world_hooks;
struct tls_ctx;

struct world {
	int id;                          /* slot number, 0..workers-1 */
	struct event_base *base;
	struct config *cfg;              /* current generation, owned */
	struct config *staged;           /* reload phase one: checked, not applied */
	struct ipc_chan *sup;            /* channel to the supervisor */
	struct listen_set *lset;         /* this process's copy of the supervisor's */
	struct listener *listener;
	struct list databases;           /* struct database */
	struct list users;               /* struct puser */
	struct list pools;               /* struct pool */
	struct hmap db_map, user_map, pool_map;   /* the same, found by name */
	struct list login_clients;       /* CLIENT_LOGIN */
	struct list cancel_clients;      /* CLIENT_CANCEL */
	struct list justfree_clients;    /* CLIENT_JUSTFREE: freed after this iteration */
	struct list justfree_servers;
	struct list all_clients, all_servers;
	struct list closing_servers;     /* released inside a callback: closed by the reaper */
	int n_clients;                   /* max_client_conn */
	bool paused;                     /* PAUSE / SIGUSR1 */
	bool suspended;                  /* SUSPEND: sockets do not read, listeners do not accept */
	bool shutting_down;
	enum shutdown_mode shutdown_mode;
	/* The console's SHUTDOWN WAIT_FOR_SERVERS/CLIENTS in this worker,
	 * before the supervisor's order (IPC_SHUTDOWN) comes back: the same
	 * console's next command finds the pooler shutting down (and paused),
	 * as PgBouncer's does (control_check). */
	bool shutdown_asked;
	enum shutdown_mode asked_mode;
	bool shutdown_ready_told;        /* WAIT_FOR_SERVERS: told the supervisor none is in use */
	struct event *reaper;            /* frees justfree objects */
	struct event *janitor;           /* periodic timeouts and maintenance */
	usec_t last_sweep;               /* pool_sweep, by the janitor */
	struct event *stats_timer;       /* log_stats */
	struct tls_ctx *client_tls;      /* NULL when client TLS is disabled */
	struct tls_ctx *server_tls;
	struct hba *hba;                 /* auth_type = hba: the rules, NULL = reject all */
	struct hba_ident *hba_ident;
	uint8_t secret[32];              /* per-process random: cancel keys, mock salts */
	const struct world_hooks *hooks;
};

/* What the session layer asks of the loop that runs it, registered by
 * worker.c (world_set_hooks); without a hook (unit tests) each does
 * nothing. */
struct world_hooks {
	void (*schedule_reap)(struct world *w);   /* free justfree objects after this iteration */
	void (*check_shutdown)(struct world *w);  /* clients or servers went away */
	void (*refresh_config)(struct world *w);  /* w->cfg changed in place (console SET) */
};

/* An empty world of slot id: no config, base, TLS or channel yet. */
void world_init(struct world *w, int id, const struct world_hooks *hooks);
void world_schedule_reap(struct world *w);
void world_check_shutdown(struct world *w);
void world_refresh_config(struct world *w);

#endif

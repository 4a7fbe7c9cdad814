/* pgcrew — one worker process: its libevent loop, listeners, databases,
 * users, pools and connections. Single-threaded (only the LDAP/PAM checks of
 * auth/authpool.h run in threads, on copies); the one `W` per process is
 * the root every module reaches its state through. */
#ifndef PGCREW_WORKER_H
#define PGCREW_WORKER_H

#include "types.h"
#include "ipc.h"
#include "listen.h"
#include "util.h"

struct config;
struct event_base;
struct tls_ctx;

struct worker {
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
	bool shutdown_ready_told;        /* WAIT_FOR_SERVERS: told the supervisor none is in use */
	struct event *reaper;            /* frees justfree objects */
	struct event *janitor;           /* periodic timeouts and maintenance */
	struct event *stats_timer;       /* log_stats */
	struct tls_ctx *client_tls;      /* NULL when client TLS is disabled */
	struct tls_ctx *server_tls;
	struct hba *hba;                 /* auth_type = hba: the rules, NULL = reject all */
	struct hba_ident *hba_ident;
	uint8_t secret[32];              /* per-process random: cancel keys, mock salts */
};

extern struct worker *W;

/* Runs the worker in the current (forked) process; never returns. */
void worker_main(int id, struct config *cfg, int ipc_fd, struct listen_set *ls) NORETURN;

void worker_schedule_reap(void);
/* Shutdown progress: called when clients or servers go away. */
void worker_check_shutdown(void);
/* Apply a config generation (reload); takes ownership of cfg. */
void worker_apply_config(struct config *cfg);
/* 0, or -1 with err: the TLS contexts of cfg cannot be built (bad files). */
int worker_check_tls(const struct config *cfg, char *err, size_t errlen) MUSTCHECK;
void worker_refresh_config(void);

#endif

/* pgcrew — the worker's objects: databases, users, pools, clients, servers.
 * Struct layouts only (STYLE rule 2); behaviour lives in client.c, server.c,
 * pool.c. Every client and server sits on exactly one list matching its
 * state, so "who is waiting" is a list walk, not a scan. */
#ifndef PGCREW_OBJECTS_H
#define PGCREW_OBJECTS_H

#include "hmap.h"
#include "types.h"
#include "util.h"
#include "stream.h"
#include "varcache.h"
#include "prepared.h"
#include "auth/scram.h"
#include "shm.h"
#include "proto/cancelkey.h"

#include <netinet/in.h>
#include <sys/socket.h>

#define HOST_ADDRS 8                      /* addresses of one host name remembered (dns.h's DNS_MAX_ADDRS) */

#define NAME_MAX_LEN 64         /* NAMEDATALEN */
#define CLIENT_ADDR_LEN 48      /* a numeric IPv6 address (INET6_ADDRSTRLEN) */

enum client_state {
	CLIENT_LOGIN,           /* startup packet and authentication */
	CLIENT_WAITING_LOGIN,   /* authenticated; pool has no server parameters yet */
	CLIENT_ACTIVE,          /* logged in; linked to a server or idle */
	CLIENT_WAITING,         /* has a request queued for a server */
	CLIENT_CANCEL,          /* a CancelRequest connection being forwarded */
	CLIENT_JUSTFREE,        /* closed; freed at the end of the loop iteration */
	CLIENT_STATE_COUNT
};

enum server_state {
	SERVER_LOGIN,           /* connecting, authenticating, startup */
	SERVER_IDLE,            /* in the pool, ready */
	SERVER_ACTIVE,          /* linked to a client */
	SERVER_TESTED,          /* running reset/check/connect query */
	SERVER_BEING_CANCELED,  /* released while a cancel for it is in flight */
	SERVER_JUSTFREE,
	SERVER_STATE_COUNT
};

/* Why a server runs an internal query; responses are swallowed until 'Z'. */
enum server_internal {
	SI_NONE,
	SI_CONNECT_QUERY,
	SI_RESET,               /* server_reset_query, then idle */
	SI_CHECK,               /* server_check_query, then give to the waiter */
	SI_SETVARS,             /* SET for the linked client, then resume it */
	SI_AUTH_QUERY,          /* auth_query for logins (auth/authquery.c) */
	SI_ROLE_QUERY,          /* target_session_attrs on PostgreSQL < 14, then login goes on */
};

struct world;

struct database {
	struct list node;                 /* worker.databases */
	struct hnode hn;                  /* worker.db_map, by name */
	struct world *world;              /* the registry it is in (its pools' and servers' too) */
	char name[NAME_MAX_LEN];
	char dbname[NAME_MAX_LEN];        /* name on the server */
	char **hosts; int n_hosts;        /* host list (NULL entry = default unix dir) */
	int host_rr;                      /* next host for round-robin */
	int port;
	char *forced_user;                /* user= in [databases], or NULL */
	char *forced_password;
	int pool_size, min_pool_size, reserve_pool_size;  /* resolved with globals */
	int max_db_connections, max_db_client_connections;
	int pool_mode;                    /* -1 = use user/global */
	char *connect_query;
	struct varcache startup_vars;     /* client_encoding/datestyle/timezone/application_name from the entry */
	bool load_balance;
	usec_t server_lifetime;           /* -1 = global */
	usec_t query_wait_timeout;        /* -1 = global (or the user's) */
	int sslnegotiation;               /* -1 = server_tls_sslnegotiation (pgcrew) */
	int tsa;                          /* -1 = target_session_attrs (pgcrew), else enum tsa */
	int8_t host_role[SHM_HOSTS];      /* without a shm row: hostrole.c's local copy */
	usec_t host_skip[SHM_HOSTS];
	/* Per host name with several addresses (this worker's own): which
	 * one its servers use, and the ones that failed a moment ago. */
	struct host_addrs {
		uint8_t next, n;
		usec_t skip_until[HOST_ADDRS];
	} host_addrs[SHM_HOSTS];
	bool is_autodb;                   /* created from the "*" template */
	bool dead;                        /* removed by reload: no new servers or logins */
	bool mark;                        /* reload mark-and-sweep */
	bool held;                        /* a pool or a client points at it (pool_sweep) */
	bool paused, disabled;
	bool admin;                       /* the "pgbouncer" console */
	int n_servers;                    /* this worker's, for max_db_connections */
	int n_clients;                    /* this worker's, for max_db_client_connections */
	struct list idle_pools;           /* its pools with an idle server (eviction) */
	int shm_idx;                      /* instance-wide client count (shm.h), -1 = none */
	usec_t last_used;                 /* autodb_idle_timeout */
};

struct puser {                            /* a user known to this worker */
	struct list node;                 /* worker.users */
	struct hnode hn;                  /* worker.user_map, by name */
	char name[NAME_MAX_LEN];
	char *secret;                     /* userlist secret or "": pool_user_set_secret() */
	bool has_scram_keys;              /* pass-through: learned from a client's proof */
	bool authq_secret;                /* secret fetched by auth_query: kept over RELOAD */
	struct scram_secret scram_keys;
	int pool_mode;                    /* -1 = not set */
	int pool_size, reserve_pool_size, max_user_connections, max_user_client_connections;
	usec_t query_timeout, idle_transaction_timeout, client_idle_timeout, transaction_timeout;
	usec_t query_wait_timeout;        /* -1 = not set */
	int n_servers, n_clients;         /* this worker's */
	struct list idle_pools;           /* its pools with an idle server (eviction) */
	int shm_idx;                      /* instance-wide client count (shm.h), -1 = none */
	bool mark;
	bool held;                        /* a pool or a client points at it (pool_sweep) */
};

struct pool_stats {
	uint64_t xact_count, query_count, bytes_in, bytes_out;
	uint64_t xact_time, query_time, wait_time;   /* microseconds */
	uint64_t server_assignment_count, errors;
	uint64_t client_login_count;      /* clients through authentication */
	struct ps_counters ps;            /* prepared statements: parses, binds */
};

struct pool {
	struct list node;                 /* worker.pools */
	struct hnode hn;                  /* worker.pool_map, by (db, user) */
	struct database *db;
	struct puser *user;               /* the server-side user */
	struct list active_clients;       /* CLIENT_ACTIVE */
	struct list waiting_clients;      /* CLIENT_WAITING and CLIENT_WAITING_LOGIN, FIFO */
	struct list idle_servers;         /* SERVER_IDLE; by last use, newest first (oldest
	                                     first with server_round_robin) */
	struct list idle_db_node;         /* in db->idle_pools and user->idle_pools while */
	struct list idle_user_node;       /* n_idle > 0 (self-linked otherwise) */
	struct list active_servers;       /* SERVER_ACTIVE */
	struct list tested_servers;       /* SERVER_TESTED */
	struct list login_servers;        /* SERVER_LOGIN */
	struct list canceled_servers;     /* SERVER_BEING_CANCELED */
	int n_active_clients, n_waiting_clients;
	int n_repl_waiting;               /* of those, replication clients (own servers) */
	int n_auth_waiting;               /* auth_query lookups waiting for a server */
	int n_idle, n_active, n_tested, n_login, n_canceled;
	bool welcome_ready;               /* server parameters known */
	uint8_t welcome_asked;            /* several workers: 1 asked the supervisor, 2 it had none */
	struct varcache welcome_vars;     /* tracked parameters of the first login */
	char **welcome_other;             /* other ParameterStatus: name,value,... NULL */
	int n_welcome_other;
	char login_error[512];            /* last server login failure, for server_login_retry */
	char login_error_code[6];
	usec_t login_failed_at;
	usec_t reserve_since;             /* oldest wait that may use the reserve pool */
	struct pool_stats stats;
	struct pool_stats flushed;        /* part of stats already in shared memory */
	struct hist_pool_cell *hist;      /* this worker's latency histograms (hist.h), or NULL */
	bool paused;
	/* pool_idle_timeout (pool_idle.c): clients pointing at the pool, in
	 * any state until freed (a client logging in has c->pool before it is
	 * on a list of the pool); when a client or a server connection last
	 * came or went. */
	int n_clients;
	usec_t last_used;
	/* several workers: slots asked of the supervisor's ledger */
	int n_slot_wait;                  /* requests not answered yet */
	int n_repl_slot_wait;             /* the same for replication clients' servers */
	int n_repl_withdrawing;           /* of those, taken back (answer pending) */
	bool reserve_asked;               /* a reserve request is among them */
	int give_up;                      /* servers beyond our fair share: give up when idle */
	int wanted;                       /* other workers' waiters: give up servers idle a while */
	usec_t waited_last;               /* several workers: a client of ours last waited (POOL_WAITING_NOW: one does) */
	int wanted_soon;                  /* of those, ones in a hurry (below their fair share) */
	int wanted_same;                  /* of those, of this pool (0: only a close serves them) */
	usec_t other_since;               /* of those, the oldest for another pool: queued since, or 0 */
	/* several workers: the reuse order over the instance (pool.c) */
	int n_move_wait;                  /* requests for another worker's idle server pending */
	bool reuse_held;                  /* a client waits for one while ours stay idle */
	usec_t next_published;            /* our idle_next in shared memory (hist.h) */
	usec_t next_seen, next_seen_at;   /* the others' best idle_next, when read */
};

/* replication= in a client's startup packet (PgBouncer 1.23+): such a client
 * gets a server connection of its own, opened with the same parameter. */
enum replication { REPL_NONE, REPL_LOGICAL, REPL_PHYSICAL };

/* Fields are ordered to pack without holes: thousands of idle clients each
 * cost sizeof(struct client) (bench/idle). */
struct client {
	struct list node;                 /* the list of its state */
	struct list all_node;             /* worker.all_clients */
	enum client_state state;
	enum replication repl;            /* replication= of its startup packet */
	struct world *world;
	uint64_t id;
	struct stream s;
	struct pool *pool;
	struct server *link;
	struct database *db;
	struct puser *login_user;         /* the user the client authenticated as */
	struct server *repl_server;       /* its own server (replication), linked or logging in */
	char *repl_options;               /* replication: its `options`, for its server as sent */
	const char *user_name;            /* as the client sent them, pooled (strpool.h); "" */
	const char *db_name;              /* until the startup packet (client_set_names) */
	char addr[CLIENT_ADDR_LEN];       /* peer */
	char laddr[CLIENT_ADDR_LEN];      /* local */
	int port, lport;
	struct varcache vars;             /* what this client expects */
	struct cancelkey_own key;         /* the BackendKeyData we gave it (proto/cancelkey.h) */
	struct client *cancel_next;       /* cancel hash chain */
	/* authentication */
	int auth_step;                    /* enum in client.c */
	uint8_t md5_salt[4];
	struct scram_server *scram;       /* heap during login only */
	struct authq_job *authq;          /* waiting for an auth_query answer */
	struct authpool_job *auth_job;    /* LDAP/PAM check being prepared or running */
	/* timing */
	usec_t connect_time, request_time, query_start, xact_start, last_activity;
	usec_t wait_notified;
	usec_t phase_start, tls_usec;     /* connection-setup histograms (hist.h) */
	const char *close_reason;
	uint64_t counted_in, counted_out;  /* stream bytes already added to pool stats */
	struct admin_fanout *fanout;      /* console command waiting for every worker */
	struct admin_ext *admin_ext;      /* console extended-protocol state */
	struct ps_client *ps;             /* its prepared statement names, or NULL */
	struct proxy_wait *proxy;         /* reading a PROXY header (proxy_accept.c) */
	struct sockaddr_storage proxied_addr;   /* the PROXY header's client, when proxied */
	bool proxied;
	bool is_unix;
	bool passthrough_ok;              /* client proof gave us the ClientKey */
	bool in_xact;                     /* last ReadyForQuery said T/E */
	bool xact_start_set;              /* xact_start belongs to the current transaction */
	bool query_running;               /* request sent, ReadyForQuery not yet seen */
	bool cancel_wanted;               /* a cancel came while it waited for a server */
	bool held_for_cancel;             /* its next request waits for its server's cancels */
	bool admin;                       /* talking to the console */
	bool stats_only;                  /* console user from stats_users only */
	bool console_refused;             /* console user in neither list: refused once known */
	bool console_counted;             /* its one console transaction is in the stats */
	bool local_admin;                 /* "pgbouncer" over the Unix socket, our UID: no password */
	bool counted_db, counted_user;    /* holds a client slot of db/user */
	bool counted_conn;                /* holds an instance-wide max_client_conn slot */
	bool no_such_db;                  /* authenticating for a database we do not have */
	uint8_t proto_minor;              /* it speaks protocol 3.<minor> (0 to PROTO_MINOR_LATEST) */
};

struct server {
	struct list node;
	struct list all_node;             /* worker.all_servers */
	enum server_state state;
	uint64_t id;
	struct stream s;
	struct pool *pool;
	struct client *link;
	enum server_internal internal;
	struct varcache vars;             /* parameters as the server reports them */
	struct cancelkey be;              /* its BackendKeyData: the key our cancels carry */
	uint8_t proto_minor;              /* we speak protocol 3.<minor> with it */
	char addr[64]; int port;          /* where we connected */
	char laddr[64]; int lport;
	int auth_step;
	struct scram_client *scram;       /* heap during login only */
	usec_t connect_time, request_time, last_used, query_start;
	char ready_status;                /* last ReadyForQuery status, 0 before any */
	int expect_rfq;                   /* requests forwarded that still owe ReadyForQuery */
	bool unsynced;                    /* extended-protocol messages forwarded since the last Sync */
	bool close_needed;                /* lifetime over or reconnect: close on release */
	bool welcome_src;                 /* first login of its pool: capture parameters */
	int cancels_pending;              /* CancelRequests in flight for it */
	void *cancel_reqs;                /* struct cancel_req chain (cancel.c) */
	struct dns_req *dns;              /* pending host name lookup */
	bool dns_pending;                 /* resolving; no socket yet */
	int host_idx;
	int8_t addr_idx, n_addrs;         /* which of its host name's addresses (n_addrs 0: a literal) */
	int8_t hot_standby, read_only;    /* in_hot_standby, default_transaction_read_only
	                                     as reported (-1: not reported, PostgreSQL < 14) */
	bool has_slot;                    /* counted in the supervisor's ledger */
	uint8_t claim;                    /* closed on an eviction claim (SLOT_CLAIM_*,
	                                     shm.h): its slot's release says so */
	struct event *ssl_ev;             /* waiting for the answer to SSLRequest */
	bool check_due;                   /* released with server_check_delay = 0: checked
	                                     before its next client (pool_server_stale) */
	uint32_t vars_set;                /* bit i: a client's value of tracked parameter i was SET here */
	struct list close_node;           /* worker.closing_servers */
	const char *close_reason;         /* set with close_node */
	bool give_away;                   /* on close_node: move to another worker if it can */
	struct ps_server *ps;             /* statements prepared on it, or NULL */
	/* A replication server belongs to one client from launch to close:
	 * never idle in its pool, never linked to another client. */
	enum replication repl;
	struct client *repl_owner;
};

#endif

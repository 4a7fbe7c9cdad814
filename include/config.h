/* pgcrew — configuration: one immutable generation of pgbouncer.ini.
 * config_load() reads the main file (with %include), the [pgbouncer]/[pgcrew]
 * settings, [databases], [users], [peers] and the auth_file, and validates
 * it all; the settings table (settings.c) drives parsing, SHOW CONFIG and SET. */
#ifndef PGCREW_CONFIG_H
#define PGCREW_CONFIG_H

#include "types.h"

enum pool_mode { POOL_SESSION, POOL_TRANSACTION, POOL_STATEMENT, POOL_MODE_COUNT };
enum auth_type {
	AUTH_ANY, AUTH_TRUST, AUTH_PLAIN, AUTH_MD5, AUTH_SCRAM, AUTH_CERT, AUTH_HBA,
	AUTH_PAM, AUTH_LDAP, AUTH_TYPE_COUNT
};
enum sslmode {
	SSLMODE_DISABLE, SSLMODE_ALLOW, SSLMODE_PREFER, SSLMODE_REQUIRE,
	SSLMODE_VERIFY_CA, SSLMODE_VERIFY_FULL, SSLMODE_COUNT
};
enum sslnegotiation { SSLNEG_POSTGRES, SSLNEG_DIRECT, SSLNEG_COUNT };   /* pgcrew */
/* target_session_attrs, libpq's values (pgcrew) */
enum tsa { TSA_ANY, TSA_READ_WRITE, TSA_READ_ONLY, TSA_PRIMARY, TSA_STANDBY, TSA_PREFER_STANDBY,
	   TSA_COUNT };
enum load_balance { LB_DISABLE, LB_ROUND_ROBIN, LB_COUNT };
/* server_max_protocol_version: the newest protocol asked of servers (pgcrew) */
enum protover { PROTOVER_3_0, PROTOVER_3_2, PROTOVER_COUNT };

const char *pool_mode_name(enum pool_mode m);      /* "session", ... */
const char *auth_type_name(enum auth_type t);      /* "scram-sha-256", ... */
const char *sslmode_name(enum sslmode m);          /* "verify-full", ... */
const char *sslnegotiation_name(enum sslnegotiation n);   /* "postgres", "direct" */
const char *tsa_name(enum tsa t);                   /* "any", "read-write", ... */
const char *load_balance_name(enum load_balance lb);     /* "disable", "round-robin" */
const char *protover_name(enum protover v);         /* "3.0", "3.2" */
int protover_minor(enum protover v);                /* 0, 2 */

/* Per-entry overrides use -1 for "not set": the global setting applies. */
struct db_def {                 /* one [databases] entry */
	char *name;                 /* key; "*" is the auto-database template */
	char *host;                 /* as written (comma list) or NULL: unix socket in the default dir */
	char **hosts;               /* host split on ',' (n_hosts entries, NULL when host is NULL) */
	int n_hosts;
	int port;                   /* 5432 default */
	char *dbname;               /* NULL = same as name */
	char *user, *password;      /* forced user, or NULL */
	char *auth_user, *auth_query, *auth_dbname;
	int pool_size, min_pool_size, reserve_pool_size;                 /* -1 = not set */
	int max_db_connections, max_db_client_connections;              /* -1 = not set */
	int pool_mode;              /* -1 = not set, else enum pool_mode */
	char *connect_query, *client_encoding, *datestyle, *timezone, *application_name;
	int load_balance_hosts;     /* enum load_balance: 1 = round-robin (default), 0 = disable */
	usec_t server_lifetime;     /* -1 = not set */
	usec_t query_wait_timeout;  /* -1 = not set */
	int sslnegotiation;         /* -1 = not set, else enum sslnegotiation (pgcrew) */
	int target_session_attrs;   /* -1 = not set, else enum tsa (pgcrew) */
	char *file;                 /* where it was defined */
	int line;
};

struct user_def {               /* one [users] entry */
	char *name;
	int pool_mode, pool_size, reserve_pool_size;                       /* -1 = not set */
	int max_user_connections, max_user_client_connections;            /* -1 = not set */
	usec_t query_timeout, idle_transaction_timeout, client_idle_timeout; /* -1 = not set */
	usec_t transaction_timeout, query_wait_timeout;                     /* -1 = not set */
};

struct peer_def {               /* one [peers] entry */
	int peer_id;                /* 1..16383 */
	char *host;                 /* never NULL */
	int port;                   /* 6432 default */
	int pool_size;              /* -1 = not set: default_pool_size */
};

struct userlist;

/* One field per [pgbouncer] key, named exactly like the key. Strings are
 * never NULL ("" when empty), bools are bool, counts int, byte sizes int64_t,
 * times usec_t, enums their enum. Fields marked pgcrew are extensions. */
struct config {
	char *path;                         /* the main file, as given to config_load */

	char *admin_users;
	bool application_name_add_host;
	char *auth_dbname;
	char *auth_file;
	char *auth_hba_file;
	char *auth_ident_file;
	char *auth_ldap_options;
	char *auth_query;
	usec_t auth_query_cache_ttl;        /* pgcrew */
	enum auth_type auth_type;
	char *auth_user;
	usec_t autodb_idle_timeout;
	usec_t pool_idle_timeout;        /* drop pools without a client this long (0 = never) */
	usec_t cancel_wait_timeout;
	usec_t client_idle_timeout;
	usec_t client_login_timeout;
	char *client_tls13_ciphers;
	char *client_tls_ca_file;
	char *client_tls_cert_file;
	char *client_tls_ciphers;
	char *client_tls_dheparams;
	char *client_tls_ecdhcurve;
	char *client_tls_key_file;
	char *client_tls_protocols;
	enum sslmode client_tls_sslmode;
	char *conffile;                     /* "" in the file = the main file's path */
	int default_pool_size;
	bool disable_pqexec;
	usec_t dns_max_ttl;
	usec_t dns_nxdomain_ttl;
	usec_t dns_zone_check_period;
	usec_t idle_transaction_timeout;
	char *ignore_startup_parameters;
	bool io_uring;                      /* pgcrew: batch socket I/O with io_uring */
	char *job_name;                     /* service_name is an alias */
	char *listen_addr;
	int listen_backlog;
	int listen_port;
	bool log_connections;
	bool log_disconnections;
	bool log_pooler_errors;
	bool log_stats;
	char *logfile;
	char *login_notify_message;         /* NOTICE after each login; "" = none */
	int max_client_conn;
	int max_db_client_connections;
	int max_db_connections;
	int64_t max_packet_size;
	int max_pools;                      /* pgcrew: shm pool rows */
	int max_prepared_statements;
	int max_user_client_connections;
	int max_user_connections;
	char *metrics_listen;               /* pgcrew: "" = no metrics listener */
	int min_pool_size;
	int peer_id;
	char *pidfile;
	int64_t pkt_buf;
	enum pool_mode pool_mode;
	bool proxy_protocol;                /* pgcrew: PROXY headers on TCP listeners */
	char *proxy_protocol_sources;       /* pgcrew: who may send one (addresses, CIDR) */
	usec_t query_timeout;
	usec_t query_wait_notify;
	usec_t query_wait_timeout;
	int reserve_pool_size;
	usec_t reserve_pool_timeout;
	char *resolv_conf;
	int sbuf_loopcnt;
	int scram_iterations;
	usec_t server_check_delay;
	char *server_check_query;           /* "<empty>" = send an empty query; "" = no check */
	usec_t server_connect_timeout;
	bool server_fast_close;
	usec_t server_idle_timeout;
	usec_t server_lifetime;
	int server_login_concurrency;       /* pgcrew: simultaneous server logins per pool */
	usec_t server_login_retry;
	enum protover server_max_protocol_version;      /* pgcrew */
	char *server_reset_query;
	bool server_reset_query_always;
	bool server_round_robin;
	char *server_tls13_ciphers;
	char *server_tls_ca_file;
	char *server_tls_cert_file;
	char *server_tls_ciphers;
	char *server_tls_key_file;
	char *server_tls_protocols;
	enum sslnegotiation server_tls_sslnegotiation;  /* pgcrew */
	enum tsa target_session_attrs;      /* pgcrew: default of [databases] entries */
	enum sslmode server_tls_sslmode;
	bool so_reuseport;
	bool sql_prepared_statements;       /* pgcrew: SQL PREPARE/EXECUTE in transaction mode */
	usec_t stats_period;
	char *stats_users;
	bool supervisor_sched_batch;         /* pgcrew: SCHED_BATCH supervisor (Linux) */
	usec_t suspend_timeout;
	bool syslog;
	char *syslog_facility;
	char *syslog_ident;
	bool tcp_defer_accept;
	bool tcp_keepalive;
	int tcp_keepcnt;
	int tcp_keepidle;                   /* seconds, as the socket option */
	int tcp_keepintvl;                  /* seconds, as the socket option */
	int64_t tcp_socket_buffer;
	int tcp_user_timeout;               /* milliseconds, as the socket option */
	char *track_extra_parameters;
	usec_t transaction_timeout;
	char *unix_socket_dir;
	char *unix_socket_group;
	int unix_socket_mode;
	bool unnamed_statement_cache;       /* pgcrew: PgDoorman's cache for unnamed Parse */
	char *user;
	int verbose;
	usec_t worker_sched_slice;          /* pgcrew: 0 = the kernel's default */
	int workers;                        /* pgcrew: 0 = auto (online CPUs) */

	struct db_def *dbs;                 /* without the "*" entry, in file order */
	int n_dbs;
	struct db_def *autodb;              /* the "*" entry or NULL */
	struct user_def *users;
	int n_users;
	struct peer_def *peers;
	int n_peers;
	struct userlist *userlist;          /* auth_file loaded, or an empty list when auth_file is "" */
};

struct config_error { char msg[512]; };   /* e.g. "/etc/x.ini:12: unknown key 'foo' in [pgbouncer]" */

/* Parse and validate a whole generation. 0 and *out set, or -1 with err
 * filled and nothing allocated. Relative %include and auth_file paths are
 * taken relative to the directory of the file that names them. */
int config_load(const char *path, struct config **out, struct config_error *err) MUSTCHECK;
void config_free(struct config *cfg);
/* The admin console's database names, "pgbouncer" and its alias "pgcrew". */
bool config_is_console_db(const char *name);
const struct db_def *config_find_db(const struct config *cfg, const char *name);   /* not the autodb */
const struct user_def *config_find_user(const struct config *cfg, const char *name);
const struct peer_def *config_find_peer(const struct config *cfg, int peer_id);

/* A relative path from the config (auth_hba_file, ...) joined to the main
 * file's directory, in buf; absolute paths, "" and paths of a main file
 * without a directory come back unchanged; NULL if buf is too small. */
const char *config_resolve_path(const struct config *cfg, const char *path, char *buf, size_t len);

/* Fill err (may be NULL) with a formatted message. */
void config_error_set(struct config_error *err, const char *fmt, ...) PRINTF(2, 3);

/* Settings table, for SHOW CONFIG and SET. Rows are in alphabetical order. */
struct setting;
size_t settings_count(void);
const struct setting *settings_get(size_t i);
const struct setting *setting_find(const char *name);   /* also resolves aliases; NULL if unknown */
const char *setting_name(const struct setting *s);
bool setting_reloadable(const struct setting *s);
bool setting_is_extension(const struct setting *s);     /* a pgcrew key PgBouncer lacks */
const char *setting_default(const struct setting *s);   /* default as SHOW CONFIG prints it */
const char *setting_description(const struct setting *s);
/* The value as PgBouncer's SHOW CONFIG prints it: bools 0/1, times in
 * seconds ("%g"), sizes in bytes, enums by name. */
void setting_format(const struct config *cfg, const struct setting *s, char *buf, size_t len);
/* SET key = value: parse and store one [pgbouncer] key; -1 on an unknown
 * key, a bad value or a key that needs a restart. */
int config_set(struct config *cfg, const char *key, const char *value, struct config_error *err) MUSTCHECK;
/* RELOAD: a key that needs a restart (CF_NO_RELOAD) and differs in the new
 * file keeps its running value in newc, as PgBouncer does; returns how many
 * were kept, their names in names. */
int config_keep_restart_keys(const struct config *oldc, struct config *newc, char *names, size_t len);

#endif

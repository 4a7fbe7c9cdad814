/* pgcrew — the settings table: every [pgbouncer] key of PgBouncer 1.25 plus
 * pgcrew's extensions, with type, field, default, bounds and flags; and the
 * code that parses, prints, SETs and reload-checks values through it. */
#include "config/settings.h"
#include "config/value.h"
#include "proto/proxyproto.h"
#include "log.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- enum names ---- */

static const char *const pool_mode_names[] = {
	[POOL_SESSION] = "session", [POOL_TRANSACTION] = "transaction", [POOL_STATEMENT] = "statement",
};
_Static_assert(ARRAY_SIZE(pool_mode_names) == POOL_MODE_COUNT, "pool_mode_names");

static const char *const auth_type_names[] = {
	[AUTH_ANY] = "any", [AUTH_TRUST] = "trust", [AUTH_PLAIN] = "plain", [AUTH_MD5] = "md5",
	[AUTH_SCRAM] = "scram-sha-256", [AUTH_CERT] = "cert", [AUTH_HBA] = "hba",
	[AUTH_PAM] = "pam", [AUTH_LDAP] = "ldap",
};
_Static_assert(ARRAY_SIZE(auth_type_names) == AUTH_TYPE_COUNT, "auth_type_names");

static const char *const sslmode_names[] = {
	[SSLMODE_DISABLE] = "disable", [SSLMODE_ALLOW] = "allow", [SSLMODE_PREFER] = "prefer",
	[SSLMODE_REQUIRE] = "require", [SSLMODE_VERIFY_CA] = "verify-ca",
	[SSLMODE_VERIFY_FULL] = "verify-full",
};
_Static_assert(ARRAY_SIZE(sslmode_names) == SSLMODE_COUNT, "sslmode_names");

static const char *const sslneg_names[] = {
	[SSLNEG_POSTGRES] = "postgres", [SSLNEG_DIRECT] = "direct",
};
_Static_assert(ARRAY_SIZE(sslneg_names) == SSLNEG_COUNT, "sslneg_names");

static const char *const tsa_names[] = {
	[TSA_ANY] = "any", [TSA_READ_WRITE] = "read-write", [TSA_READ_ONLY] = "read-only",
	[TSA_PRIMARY] = "primary", [TSA_STANDBY] = "standby", [TSA_PREFER_STANDBY] = "prefer-standby",
};
_Static_assert(ARRAY_SIZE(tsa_names) == TSA_COUNT, "tsa_names");

const char *tsa_name(enum tsa t)
{
	return (unsigned)t < TSA_COUNT ? tsa_names[t] : "?";
}

static const char *const lb_names[] = {
	[LB_DISABLE] = "disable", [LB_ROUND_ROBIN] = "round-robin",
};
_Static_assert(ARRAY_SIZE(lb_names) == LB_COUNT, "lb_names");

const char *pool_mode_name(enum pool_mode m)
{
	return (unsigned)m < POOL_MODE_COUNT ? pool_mode_names[m] : "?";
}

const char *auth_type_name(enum auth_type t)
{
	return (unsigned)t < AUTH_TYPE_COUNT ? auth_type_names[t] : "?";
}

const char *sslmode_name(enum sslmode m)
{
	return (unsigned)m < SSLMODE_COUNT ? sslmode_names[m] : "?";
}

const char *sslnegotiation_name(enum sslnegotiation n)
{
	return (unsigned)n < SSLNEG_COUNT ? sslneg_names[n] : "?";
}

const char *load_balance_name(enum load_balance lb)
{
	return (unsigned)lb < LB_COUNT ? lb_names[lb] : "?";
}

static const char *const protover_names[] = {
	[PROTOVER_3_0] = "3.0", [PROTOVER_3_2] = "3.2",
};
_Static_assert(ARRAY_SIZE(protover_names) == PROTOVER_COUNT, "protover_names");

const char *protover_name(enum protover v)
{
	return (unsigned)v < PROTOVER_COUNT ? protover_names[v] : "?";
}

int protover_minor(enum protover v)
{
	return v == PROTOVER_3_2 ? 2 : 0;
}

static const char *pool_mode_i(int v) { return pool_mode_name((enum pool_mode)v); }
static const char *auth_type_i(int v) { return auth_type_name((enum auth_type)v); }
static const char *sslmode_i(int v) { return sslmode_name((enum sslmode)v); }
static const char *sslneg_i(int v) { return sslnegotiation_name((enum sslnegotiation)v); }
static const char *tsa_i(int v) { return tsa_name((enum tsa)v); }
static const char *protover_i(int v) { return protover_name((enum protover)v); }

static const char *const type_names[] = {
	[SETTING_BOOL] = "bool", [SETTING_INT] = "int", [SETTING_SIZE] = "size",
	[SETTING_TIME] = "time", [SETTING_STRING] = "string", [SETTING_ENUM] = "enum",
};
_Static_assert(ARRAY_SIZE(type_names) == SETTING_TYPE_COUNT, "type_names");

const char *setting_type_name(enum setting_type t)
{
	return (unsigned)t < SETTING_TYPE_COUNT ? type_names[t] : "?";
}

/* ---- value checks ---- */

static int check_listen_addr(const char *value, char *msg, size_t msglen)
{
	char host[256];
	int port;

	if (!*value || value_parse_hostport(value, host, sizeof(host), &port) == 0)
		return 0;
	snprintf(msg, msglen, "must be address:port (e.g. 127.0.0.1:9127, *:9127, [::1]:9127) or empty");
	return -1;
}

static int check_proxy_sources(const char *value, char *msg, size_t msglen)
{
	struct proxy_sources *ps;
	if (!proxy_sources_parse(value, &ps, msg, msglen))
		return -1;
	proxy_sources_free(ps);
	return 0;
}

/* ---- the table ---- */

/* The field is named by the key (#f), and a row whose type does not match
 * the field's C type does not compile (the _Generic has no match). */
#define OFF(f, T) (offsetof(struct config, f) + \
		   0 * sizeof(char[_Generic(((struct config *)0)->f, T: 1)]))
#define ENUM_OFF(f) (offsetof(struct config, f) + \
		     0 * sizeof(char[sizeof(((struct config *)0)->f) == sizeof(int) ? 1 : -1]))

#define S_BOOL(f, def, fl, d)            { #f, SETTING_BOOL, OFF(f, bool), def, 0, 1, fl, NULL, 0, d, NULL }
#define S_INT(f, def, lo, hi, fl, d)     { #f, SETTING_INT, OFF(f, int), def, lo, hi, fl, NULL, 0, d, NULL }
#define S_SIZE(f, def, lo, hi, fl, d)    { #f, SETTING_SIZE, OFF(f, int64_t), def, lo, hi, fl, NULL, 0, d, NULL }
#define S_TIME(f, def, lo, fl, d)        { #f, SETTING_TIME, OFF(f, usec_t), def, lo, INT64_MAX, fl, NULL, 0, d, NULL }
#define S_TIME_RANGE(f, def, lo, hi, fl, d) { #f, SETTING_TIME, OFF(f, usec_t), def, lo, hi, fl, NULL, 0, d, NULL }
#define S_STR(f, def, fl, d)             { #f, SETTING_STRING, OFF(f, char *), def, 0, 0, fl, NULL, 0, d, NULL }
#define S_STRC(f, def, chk, fl, d)       { #f, SETTING_STRING, OFF(f, char *), def, 0, 0, fl, NULL, 0, d, chk }
#define S_ENUM(f, def, fn, n, fl, d)     { #f, SETTING_ENUM, ENUM_OFF(f), def, 0, (n) - 1, fl, fn, n, d, NULL }

#define NR CF_NO_RELOAD
#define EXT CF_EXTENSION
#define DEFAULT_AUTH_QUERY "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END " \
	"FROM pg_authid WHERE rolname=$1 AND rolcanlogin"

/* Alphabetical, as PgBouncer's SHOW CONFIG lists them. */
static const struct setting table[] = {
	S_STR(admin_users, "", 0, "comma-separated users allowed to run every console command"),
	S_BOOL(application_name_add_host, "0", 0, "append the client address and port to application_name at login"),
	S_STR(auth_dbname, "", 0, "database ([databases] name) in which auth_query runs"),
	S_STR(auth_file, "", 0, "userlist.txt with user names and secrets; relative to the config file's directory"),
	S_STR(auth_hba_file, "", 0, "pg_hba.conf-style file used when auth_type is hba"),
	S_STR(auth_ident_file, "", 0, "ident map file used with auth_hba_file"),
	S_STR(auth_ldap_options, "", 0, "LDAP options used when auth_type is ldap"),
	S_STR(auth_query, DEFAULT_AUTH_QUERY, 0, "query that fetches a user's secret through auth_user"),
	S_TIME(auth_query_cache_ttl, "0", 0, EXT, "how long a secret fetched by auth_query is reused"),
	S_ENUM(auth_type, "md5", auth_type_i, AUTH_TYPE_COUNT, 0, "how clients are authenticated"),
	S_STR(auth_user, "", 0, "user that runs auth_query for users missing from auth_file"),
	S_TIME(autodb_idle_timeout, "3600", 0, 0, "free pools of databases made from \"*\" after this long unused"),
	S_TIME(cancel_wait_timeout, "10", 0, 0, "drop a cancel request not forwarded within this time (0 = never)"),
	S_TIME(client_idle_timeout, "0", 0, 0, "close client connections idle this long (0 = never)"),
	S_TIME(client_login_timeout, "60", 0, 0, "close clients that have not logged in within this time"),
	S_STR(client_tls13_ciphers, "", 0, "TLS 1.3 cipher suites for clients (empty = client_tls_ciphers)"),
	S_STR(client_tls_ca_file, "", 0, "CA file to validate client certificates"),
	S_STR(client_tls_cert_file, "", 0, "certificate presented to clients"),
	S_STR(client_tls_ciphers, "default", 0, "TLS 1.2 and older cipher list for clients"),
	S_STR(client_tls_dheparams, "auto", 0, "DHE parameters for clients: none, auto, legacy"),
	S_STR(client_tls_ecdhcurve, "auto", 0, "ECDH curve for clients: none, auto or a curve name"),
	S_STR(client_tls_key_file, "", 0, "private key for client_tls_cert_file"),
	S_STR(client_tls_protocols, "secure", 0, "TLS versions allowed for clients"),
	S_ENUM(client_tls_sslmode, "disable", sslmode_i, SSLMODE_COUNT, 0, "TLS mode for client connections"),
	S_STR(conffile, "", 0, "config file read on the next RELOAD (empty = the file given at start)"),
	S_INT(default_pool_size, "20", 0, INT_MAX, 0, "server connections per user/database pool"),
	S_BOOL(disable_pqexec, "0", NR, "refuse the simple query protocol"),
	S_TIME(dns_max_ttl, "15", 0, 0, "how long DNS answers are cached"),
	S_TIME(dns_nxdomain_ttl, "15", 0, 0, "how long DNS errors and NXDOMAIN are cached"),
	S_TIME(dns_zone_check_period, "0", 0, 0, "period of DNS zone serial checks (0 = off)"),
	S_TIME(idle_transaction_timeout, "0", 0, 0, "close clients idle in a transaction this long (0 = never)"),
	S_STR(ignore_startup_parameters, "", 0, "startup parameters accepted and ignored"),
	S_BOOL(io_uring, "1", EXT, "batch each worker's socket receives and sends of a loop turn into one io_uring call each (Linux)"),
	S_STR(job_name, "pgbouncer", NR, "service name (alias: service_name)"),
	S_STR(listen_addr, "", NR, "comma-separated TCP addresses to listen on (* = all, empty = unix socket only)"),
	S_INT(listen_backlog, "128", 0, INT_MAX, NR, "listen(2) backlog"),
	S_INT(listen_port, "6432", 1, 65535, NR, "TCP port, also the unix socket name"),
	S_BOOL(log_connections, "1", 0, "log successful logins"),
	S_BOOL(log_disconnections, "1", 0, "log disconnections with their reason"),
	S_BOOL(log_pooler_errors, "1", 0, "log errors the pooler sends to clients"),
	S_BOOL(log_stats, "1", 0, "log aggregated statistics every stats_period"),
	S_STR(logfile, "", 0, "log file (empty = none)"),
	S_STR(login_notify_message, "", 0, "NOTICE sent to each client after its login (empty = none)"),
	S_INT(max_client_conn, "100", 0, INT_MAX, 0, "maximum client connections"),
	S_INT(max_db_client_connections, "0", 0, INT_MAX, 0, "client connections per database (0 = unlimited)"),
	S_INT(max_db_connections, "0", 0, INT_MAX, 0, "server connections per database (0 = unlimited)"),
	S_SIZE(max_packet_size, "2147483647", 1, INT32_MAX, 0, "largest protocol packet let through"),
	S_INT(max_pools, "16384", 1, 1 << 20, NR | EXT, "pools in use at once over all workers (shared memory; twice as many database and user names)"),
	S_INT(max_prepared_statements, "200", 0, INT_MAX, 0, "prepared statements tracked per server connection (0 = off)"),
	S_INT(max_user_client_connections, "0", 0, INT_MAX, 0, "client connections per user (0 = unlimited)"),
	S_INT(max_user_connections, "0", 0, INT_MAX, 0, "server connections per user (0 = unlimited)"),
	S_STRC(metrics_listen, "", check_listen_addr, NR | EXT, "address:port of the Prometheus metrics listener (empty = off); see doc/metrics.md"),
	S_INT(min_pool_size, "0", 0, INT_MAX, 0, "keep at least this many server connections per pool"),
	S_INT(peer_id, "0", 0, 16383, 0, "this instance's id among [peers] (0 = peering off)"),
	S_STR(pidfile, "", NR, "PID file"),
	S_SIZE(pkt_buf, "4096", 1, 1 << 26, NR, "internal packet buffer size (pgcrew buffers at least 16 kB whatever it says)"),
	S_TIME(pool_idle_timeout, "0", 0, 0, "free a pool that has had no client and no server connection for this long; min_pool_size keeps a pool (0 = never)"),
	S_ENUM(pool_mode, "session", pool_mode_i, POOL_MODE_COUNT, 0, "when a server goes back to the pool"),
	S_BOOL(proxy_protocol, "0", EXT, "read a PROXY protocol v1/v2 header on TCP connections from proxy_protocol_sources"),
	S_STRC(proxy_protocol_sources, "", check_proxy_sources, EXT,
	       "addresses and CIDR ranges of the load balancers that send PROXY headers"),
	S_TIME(query_timeout, "0", 0, 0, "cancel queries running longer (0 = never)"),
	S_TIME(query_wait_notify, "5", 0, 0, "notify a queued client after this wait (0 = never)"),
	S_TIME(query_wait_timeout, "120", 0, 0, "drop clients waiting longer for a server (0 = never)"),
	S_INT(reserve_pool_size, "0", 0, INT_MAX, 0, "extra server connections per pool for slow queues"),
	S_TIME(reserve_pool_timeout, "5", 0, 0, "queue wait after which the reserve pool is used"),
	S_STR(resolv_conf, "", NR, "custom resolv.conf for the DNS resolver"),
	S_INT(sbuf_loopcnt, "5", 0, INT_MAX, 0, "packets processed per connection before yielding (0 = no limit)"),
	S_INT(scram_iterations, "4096", 1, INT_MAX, 0, "PBKDF2 iterations for SCRAM secrets pgcrew makes"),
	S_TIME(server_check_delay, "30", 0, 0, "idle time after which server_check_query runs before reuse"),
	S_STR(server_check_query, "<empty>", 0, "liveness query (<empty> = empty query, empty = no check)"),
	S_TIME(server_connect_timeout, "15", 0, 0, "limit on connecting and logging in to a server"),
	S_BOOL(server_fast_close, "0", 0, "close servers marked for reconnect at the end of a transaction"),
	S_TIME(server_idle_timeout, "600", 0, 0, "close servers idle this long (0 = never)"),
	S_TIME(server_lifetime, "3600", 0, 0, "close unused servers connected longer than this"),
	S_INT(server_login_concurrency, "2", 1, INT_MAX, EXT, "simultaneous server logins per pool"),
	S_TIME(server_login_retry, "15", 0, 0, "wait after a failed server login before trying again"),
	S_ENUM(server_max_protocol_version, "3.2", protover_i, PROTOVER_COUNT, EXT,
	       "newest protocol asked of servers: 3.2 (PostgreSQL 18: long cancel keys) or 3.0"),
	S_STR(server_reset_query, "DISCARD ALL", 0, "query run when a session-mode server is released"),
	S_BOOL(server_reset_query_always, "0", 0, "run server_reset_query in every pool mode"),
	S_BOOL(server_round_robin, "0", 0, "reuse servers round-robin instead of LIFO"),
	S_STR(server_tls13_ciphers, "", 0, "TLS 1.3 cipher suites for servers (empty = server_tls_ciphers)"),
	S_STR(server_tls_ca_file, "", 0, "CA file to validate server certificates"),
	S_STR(server_tls_cert_file, "", 0, "client certificate presented to servers"),
	S_STR(server_tls_ciphers, "default", 0, "TLS 1.2 and older cipher list for servers"),
	S_STR(server_tls_key_file, "", 0, "private key for server_tls_cert_file"),
	S_STR(server_tls_protocols, "secure", 0, "TLS versions allowed for servers"),
	S_ENUM(server_tls_sslmode, "prefer", sslmode_i, SSLMODE_COUNT, 0, "TLS mode for server connections"),
	S_ENUM(server_tls_sslnegotiation, "postgres", sslneg_i, SSLNEG_COUNT, EXT,
	       "TLS start toward servers: postgres (SSLRequest) or direct (PostgreSQL 17+)"),
	S_BOOL(so_reuseport, "0", NR, "set SO_REUSEPORT on TCP listeners"),
	S_BOOL(sql_prepared_statements, "0", EXT, "track SQL PREPARE/EXECUTE/DEALLOCATE like protocol-level statements"),
	S_TIME(stats_period, "60", USEC_PER_SEC, 0, "period of averages and stats log lines"),
	S_STR(stats_users, "", 0, "comma-separated users allowed read-only console commands"),
	S_BOOL(supervisor_sched_batch, "1", EXT, "run the supervisor as SCHED_BATCH, so that its wake-ups do not preempt the workers (Linux)"),
	S_TIME(suspend_timeout, "10", 0, 0, "wait for buffers to flush on SUSPEND or reboot"),
	S_BOOL(syslog, "0", 0, "log to syslog"),
	S_STR(syslog_facility, "daemon", 0, "syslog facility"),
	S_STR(syslog_ident, "pgbouncer", 0, "syslog program name"),
	S_ENUM(target_session_attrs, "any", tsa_i, TSA_COUNT, EXT,
	       "which hosts of a database's host list serve it: any, read-write, read-only, primary, standby, prefer-standby"),
	S_BOOL(tcp_defer_accept, "1", 0, "set TCP_DEFER_ACCEPT on listeners"),
	S_BOOL(tcp_keepalive, "1", 0, "enable TCP keepalive"),
	S_INT(tcp_keepcnt, "0", 0, INT_MAX, 0, "TCP_KEEPCNT (0 = OS default)"),
	S_INT(tcp_keepidle, "0", 0, INT_MAX, 0, "TCP_KEEPIDLE in seconds (0 = OS default)"),
	S_INT(tcp_keepintvl, "0", 0, INT_MAX, 0, "TCP_KEEPINTVL in seconds (0 = OS default)"),
	S_SIZE(tcp_socket_buffer, "0", 0, INT32_MAX, 0, "socket send/receive buffer size (0 = OS default)"),
	S_INT(tcp_user_timeout, "0", 0, INT_MAX, 0, "TCP_USER_TIMEOUT in milliseconds (0 = OS default)"),
	S_STR(track_extra_parameters, "IntervalStyle", NR, "extra reported parameters tracked per client"),
	S_TIME(transaction_timeout, "0", 0, 0, "close clients in a transaction this long (0 = never)"),
	S_STR(unix_socket_dir, "/tmp", NR, "directory of the unix socket (empty = none)"),
	S_STR(unix_socket_group, "", NR, "group owning the unix socket"),
	S_INT(unix_socket_mode, "0777", 0, 07777, NR, "file mode of the unix socket"),
	S_BOOL(unnamed_statement_cache, "0", EXT, "serve an unnamed Parse of a statement the server has prepared from it"),
	S_STR(user, "", NR, "unix user to switch to after start"),
	S_INT(verbose, "0", 0, INT_MAX, 0, "log verbosity, as -v"),
	S_TIME_RANGE(worker_sched_slice, "0.0003", 100, 100000, EXT | CF_ZERO_OFF,
		"CPU slice each worker asks the Linux scheduler for, so it runs soon after a wake-up (0 = the kernel's default)"),
	S_INT(workers, "auto", 0, 128, NR | EXT | CF_AUTO, "worker processes (auto = online CPUs)"),
};

/* Other names PgBouncer accepts for a row. */
static const struct { const char *alias, *name; } aliases[] = {
	{ "service_name", "job_name" },
};

size_t settings_count(void)
{
	return ARRAY_SIZE(table);
}

const struct setting *settings_get(size_t i)
{
	return i < ARRAY_SIZE(table) ? &table[i] : NULL;
}

const struct setting *setting_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(aliases); i++) {
		if (strcmp(name, aliases[i].alias) == 0)
			name = aliases[i].name;
	}
	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		if (strcmp(name, table[i].name) == 0)
			return &table[i];
	}
	return NULL;
}

const char *setting_name(const struct setting *s) { return s->name; }
bool setting_reloadable(const struct setting *s) { return !(s->flags & CF_NO_RELOAD); }
bool setting_is_extension(const struct setting *s) { return s->flags & CF_EXTENSION; }
const char *setting_default(const struct setting *s) { return s->def; }
const char *setting_description(const struct setting *s) { return s->desc; }

/* ---- parsing ---- */

static void *field(const struct config *cfg, const struct setting *s)
{
	return (char *)cfg + s->offset;
}

static int int_in_range(const struct setting *s, int64_t v, char *msg, size_t msglen)
{
	if (v >= s->min && v <= s->max)
		return 0;
	snprintf(msg, msglen, "must be %s%s from %lld to %lld", s->flags & CF_AUTO ? "\"auto\" or " : "",
		 s->type == SETTING_SIZE ? "a size in bytes (units B, kB, MB, GB, TB allowed)" : "an integer",
		 (long long)s->min, (long long)s->max);
	return -1;
}

static int parse_int(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	int64_t v = 0;

	if ((s->flags & CF_AUTO) && strcasecmp(value, "auto") == 0)
		v = 0;
	else if (value_parse_int(value, &v) < 0)
		v = s->min - 1;         /* reported as out of range */
	if (int_in_range(s, v, msg, msglen) < 0)
		return -1;
	*(int *)field(cfg, s) = (int)v;
	return 0;
}

static int parse_size(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	int64_t v;

	if (value_parse_size(value, &v) < 0)
		v = s->min - 1;
	if (int_in_range(s, v, msg, msglen) < 0)
		return -1;
	*(int64_t *)field(cfg, s) = v;
	return 0;
}

static int parse_time(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	usec_t v;
	char min[32], max[32];
	bool zero_ok = s->flags & CF_ZERO_OFF;

	if (value_parse_time(value, &v) == 0 && ((v >= s->min && v <= s->max) || (zero_ok && v == 0))) {
		*(usec_t *)field(cfg, s) = v;
		return 0;
	}
	value_format_time(s->min, min, sizeof(min));
	value_format_time(s->max, max, sizeof(max));
	if (s->max == INT64_MAX)
		snprintf(msg, msglen, "must be a time of at least %s s (seconds, or a number with unit us, ms, s, min, h, d)", min);
	else
		snprintf(msg, msglen, "must be %sa time from %s s to %s s (seconds, or a number with unit us, ms, s, min, h, d)",
			 zero_ok ? "0 or " : "", min, max);
	return -1;
}

static int parse_enum(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	size_t used;

	for (int i = 0; i < s->enum_count; i++) {
		if (strcasecmp(value, s->enum_name(i)) == 0) {
			*(int *)field(cfg, s) = i;
			return 0;
		}
	}
	used = (size_t)snprintf(msg, msglen, "must be one of:");
	for (int i = 0; i < s->enum_count && used < msglen; i++)
		used += (size_t)snprintf(msg + used, msglen - used, "%s %s", i ? "," : "", s->enum_name(i));
	return -1;
}

static int parse_bool(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	bool v;

	if (value_parse_bool(value, &v) < 0) {
		snprintf(msg, msglen, "must be a boolean (1/0, yes/no, on/off, true/false)");
		return -1;
	}
	*(bool *)field(cfg, s) = v;
	return 0;
}

static int parse_string(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	char **dst = field(cfg, s);

	if (s->check && s->check(value, msg, msglen) < 0)
		return -1;
	char *copy = strdup(value);
	if (!copy)
		fatal("out of memory");
	free(*dst);
	*dst = copy;
	return 0;
}

int setting_parse(struct config *cfg, const struct setting *s, const char *value, char *msg, size_t msglen)
{
	switch (s->type) {
	case SETTING_BOOL:
		return parse_bool(cfg, s, value, msg, msglen);
	case SETTING_INT:
		return parse_int(cfg, s, value, msg, msglen);
	case SETTING_SIZE:
		return parse_size(cfg, s, value, msg, msglen);
	case SETTING_TIME:
		return parse_time(cfg, s, value, msg, msglen);
	case SETTING_STRING:
		return parse_string(cfg, s, value, msg, msglen);
	case SETTING_ENUM:
		return parse_enum(cfg, s, value, msg, msglen);
	case SETTING_TYPE_COUNT:
		break;
	}
	fatal("setting %s: bad type %d", s->name, (int)s->type);
}

void settings_init_defaults(struct config *cfg)
{
	char msg[256];

	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		if (setting_parse(cfg, &table[i], table[i].def, msg, sizeof(msg)) < 0)
			fatal("bad default for %s: %s", table[i].name, msg);
	}
}

void settings_free_values(struct config *cfg)
{
	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		if (table[i].type == SETTING_STRING) {
			char **p = field(cfg, &table[i]);

			free(*p);
			*p = NULL;
		}
	}
}

/* ---- printing, SET, reload ---- */

void setting_format(const struct config *cfg, const struct setting *s, char *buf, size_t len)
{
	const void *p = field(cfg, s);

	switch (s->type) {
	case SETTING_BOOL:
		snprintf(buf, len, "%d", *(const bool *)p ? 1 : 0);
		return;
	case SETTING_INT:
		if ((s->flags & CF_AUTO) && *(const int *)p == 0)
			snprintf(buf, len, "auto");
		else
			snprintf(buf, len, "%d", *(const int *)p);
		return;
	case SETTING_SIZE:
		snprintf(buf, len, "%lld", (long long)*(const int64_t *)p);
		return;
	case SETTING_TIME:
		value_format_time(*(const usec_t *)p, buf, len);
		return;
	case SETTING_STRING:
		snprintf(buf, len, "%s", *(char *const *)p);
		return;
	case SETTING_ENUM:
		snprintf(buf, len, "%s", s->enum_name(*(const int *)p));
		return;
	case SETTING_TYPE_COUNT:
		break;
	}
	fatal("setting %s: bad type %d", s->name, (int)s->type);
}

int config_set(struct config *cfg, const char *key, const char *value, struct config_error *err)
{
	const struct setting *s = setting_find(key);
	char msg[300];

	if (!s) {
		config_error_set(err, "unknown configuration parameter '%s'", key);
		return -1;
	}
	if (s->flags & CF_NO_RELOAD) {
		config_error_set(err, "parameter '%s' cannot be changed at runtime; restart needed", s->name);
		return -1;
	}
	if (setting_parse(cfg, s, value, msg, sizeof(msg)) < 0) {
		config_error_set(err, "bad value '%s' for key '%s': %s", value, s->name, msg);
		return -1;
	}
	return 0;
}

int config_keep_restart_keys(const struct config *oldc, struct config *newc, char *names, size_t len)
{
	char a[512], b[512], msg[300];
	size_t used = 0;
	int kept = 0;

	if (len)
		names[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		if (!(table[i].flags & CF_NO_RELOAD))
			continue;
		setting_format(oldc, &table[i], a, sizeof(a));
		setting_format(newc, &table[i], b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		if (setting_parse(newc, &table[i], a, msg, sizeof(msg)) < 0)
			fatal("setting %s: its own value '%s' does not parse back: %s", table[i].name, a, msg);
		kept++;
		if (used < len)
			used += (size_t)snprintf(names + used, len - used, "%s%s", used ? ", " : "",
						 table[i].name);
	}
	return kept;
}

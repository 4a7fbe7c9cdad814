/* pgcrew — unit tests for config_load and the settings table: defaults equal
 * PgBouncer's, value syntax (times, sizes, bools, enums, ints), whole files
 * with every section, load errors with file/line/key, SET, the reload check,
 * the sample etc/pgcrew.ini and doc/config.md against the table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "build-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config/settings.h"
#include "config/userlist.h"

#ifndef DATADIR
#define DATADIR "test/unit/data"
#endif
#ifndef TOP_SRCDIR
#define TOP_SRCDIR "."
#endif

static char tmpdir[64];
static char ini_path[128];
static char ul_path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pgcrew-config-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(ini_path, sizeof(ini_path), "%s/t.ini", tmpdir);
	snprintf(ul_path, sizeof(ul_path), "%s/users.txt", tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(ini_path);
	unlink(ul_path);
	return rmdir(tmpdir);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Load text as t.ini (with a users.txt next to it); NULL on error. */
static struct config *load_text(const char *text, struct config_error *err)
{
	struct config *cfg;

	write_file(ul_path, "\"admin\" \"pw\"\n");
	write_file(ini_path, text);
	if (config_load(ini_path, &cfg, err) < 0)
		return NULL;
	return cfg;
}

static struct config *load_ok(const char *text)
{
	struct config_error err = { "" };
	struct config *cfg = load_text(text, &err);

	if (!cfg)
		fail_msg("load failed: %s", err.msg);
	return cfg;
}

static const char *fmt(const struct config *cfg, const char *key)
{
	static char buf[512];
	const struct setting *s = setting_find(key);

	assert_non_null(s);
	setting_format(cfg, s, buf, sizeof(buf));
	return buf;
}

/* PgBouncer 1.25's documented defaults as its SHOW CONFIG prints them,
 * plus pgcrew's extensions. Every table row must be listed here. */
static const struct {
	const char *name, *value, *def;
} expected_defaults[] = {
	{ "admin_users", "", "" },
	{ "application_name_add_host", "0", "0" },
	{ "auth_dbname", "", "" },
	{ "auth_file", "", "" },
	{ "auth_hba_file", "", "" },
	{ "auth_ident_file", "", "" },
	{ "auth_ldap_options", "", "" },
	{ "auth_query", "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END "
	  "FROM pg_authid WHERE rolname=$1 AND rolcanlogin", NULL },
	{ "auth_query_cache_ttl", "0", "0" },
	{ "auth_type", "md5", "md5" },
	{ "auth_user", "", "" },
	{ "autodb_idle_timeout", "3600", "3600" },
	{ "cancel_wait_timeout", "10", "10" },
	{ "client_idle_timeout", "0", "0" },
	{ "client_login_timeout", "60", "60" },
	{ "client_tls13_ciphers", "", "" },
	{ "client_tls_ca_file", "", "" },
	{ "client_tls_cert_file", "", "" },
	{ "client_tls_ciphers", "default", "default" },
	{ "client_tls_dheparams", "auto", "auto" },
	{ "client_tls_ecdhcurve", "auto", "auto" },
	{ "client_tls_key_file", "", "" },
	{ "client_tls_protocols", "secure", "secure" },
	{ "client_tls_sslmode", "disable", "disable" },
	{ "conffile", "", "" },
	{ "default_pool_size", "20", "20" },
	{ "disable_pqexec", "0", "0" },
	{ "dns_max_ttl", "15", "15" },
	{ "dns_nxdomain_ttl", "15", "15" },
	{ "dns_zone_check_period", "0", "0" },
	{ "idle_transaction_timeout", "0", "0" },
	{ "ignore_startup_parameters", "", "" },
	{ "io_uring", "1", "1" },                   /* pgcrew */
	{ "job_name", "pgbouncer", "pgbouncer" },
	{ "listen_addr", "", "" },
	{ "listen_backlog", "128", "128" },
	{ "listen_port", "6432", "6432" },
	{ "log_connections", "1", "1" },
	{ "log_disconnections", "1", "1" },
	{ "log_pooler_errors", "1", "1" },
	{ "log_stats", "1", "1" },
	{ "logfile", "", "" },
	{ "login_notify_message", "", "" },
	{ "max_client_conn", "100", "100" },
	{ "max_db_client_connections", "0", "0" },
	{ "max_db_connections", "0", "0" },
	{ "max_packet_size", "2147483647", "2147483647" },
	{ "max_pools", "16384", "16384" },
	{ "max_prepared_statements", "200", "200" },
	{ "max_user_client_connections", "0", "0" },
	{ "max_user_connections", "0", "0" },
	{ "metrics_listen", "", "" },
	{ "min_pool_size", "0", "0" },
	{ "peer_id", "0", "0" },
	{ "pidfile", "", "" },
	{ "pkt_buf", "4096", "4096" },
	{ "pool_idle_timeout", "0", "0" },         /* PgBouncer's development branch */
	{ "pool_mode", "session", "session" },
	{ "proxy_protocol", "0", "0" },               /* pgcrew */
	{ "proxy_protocol_sources", "", "" },         /* pgcrew */
	{ "query_timeout", "0", "0" },
	{ "query_wait_notify", "5", "5" },
	{ "query_wait_timeout", "120", "120" },
	{ "reserve_pool_size", "0", "0" },
	{ "reserve_pool_timeout", "5", "5" },
	{ "resolv_conf", "", "" },
	{ "sbuf_loopcnt", "5", "5" },
	{ "scram_iterations", "4096", "4096" },
	{ "server_check_delay", "30", "30" },
	{ "server_check_query", "<empty>", "<empty>" },
	{ "server_connect_timeout", "15", "15" },
	{ "server_fast_close", "0", "0" },
	{ "server_idle_timeout", "600", "600" },
	{ "server_lifetime", "3600", "3600" },
	{ "server_login_concurrency", "2", "2" },
	{ "server_login_retry", "15", "15" },
	{ "server_max_protocol_version", "3.2", "3.2" },  /* pgcrew */
	{ "server_reset_query", "DISCARD ALL", "DISCARD ALL" },
	{ "server_reset_query_always", "0", "0" },
	{ "server_round_robin", "0", "0" },
	{ "server_tls13_ciphers", "", "" },
	{ "server_tls_ca_file", "", "" },
	{ "server_tls_cert_file", "", "" },
	{ "server_tls_ciphers", "default", "default" },
	{ "server_tls_key_file", "", "" },
	{ "server_tls_protocols", "secure", "secure" },
	{ "server_tls_sslmode", "prefer", "prefer" },
	{ "server_tls_sslnegotiation", "postgres", "postgres" },
	{ "so_reuseport", "0", "0" },
	{ "sql_prepared_statements", "0", "0" },    /* pgcrew */
	{ "stats_period", "60", "60" },
	{ "stats_users", "", "" },
	{ "supervisor_sched_batch", "1", "1" },    /* pgcrew */
	{ "suspend_timeout", "10", "10" },
	{ "syslog", "0", "0" },
	{ "syslog_facility", "daemon", "daemon" },
	{ "syslog_ident", "pgbouncer", "pgbouncer" },
	{ "target_session_attrs", "any", "any" },     /* pgcrew */
	{ "tcp_defer_accept", "1", "1" },
	{ "tcp_keepalive", "1", "1" },
	{ "tcp_keepcnt", "0", "0" },
	{ "tcp_keepidle", "0", "0" },
	{ "tcp_keepintvl", "0", "0" },
	{ "tcp_socket_buffer", "0", "0" },
	{ "tcp_user_timeout", "0", "0" },
	{ "track_extra_parameters", "IntervalStyle", "IntervalStyle" },
	{ "transaction_timeout", "0", "0" },
	{ "unix_socket_dir", "/tmp", "/tmp" },
	{ "unix_socket_group", "", "" },
	{ "unix_socket_mode", "511", "0777" },      /* printed in decimal, as PgBouncer */
	{ "unnamed_statement_cache", "0", "0" },    /* pgcrew */
	{ "user", "", "" },
	{ "verbose", "0", "0" },
	{ "worker_sched_slice", "0.0003", "0.0003" }, /* pgcrew */
	{ "workers", "auto", "auto" },
};

static void test_defaults_equal_pgbouncer(void **state)
{
	struct config cfg;
	size_t n = sizeof(expected_defaults) / sizeof(expected_defaults[0]);

	(void)state;
	memset(&cfg, 0, sizeof(cfg));
	settings_init_defaults(&cfg);
	assert_int_equal(settings_count(), n);
	for (size_t i = 0; i < n; i++) {
		const struct setting *s = settings_get(i);
		const char *want_def = expected_defaults[i].def ? expected_defaults[i].def : expected_defaults[i].value;

		if (strcmp(setting_name(s), expected_defaults[i].name) != 0)
			fail_msg("row %zu is %s, expected %s", i, setting_name(s), expected_defaults[i].name);
		if (strcmp(fmt(&cfg, expected_defaults[i].name), expected_defaults[i].value) != 0)
			fail_msg("%s: value '%s' want '%s'", setting_name(s), fmt(&cfg, setting_name(s)),
				 expected_defaults[i].value);
		if (strcmp(setting_default(s), want_def) != 0)
			fail_msg("%s: default '%s' want '%s'", setting_name(s), setting_default(s), want_def);
	}
	settings_free_values(&cfg);
}

static void test_default_fields(void **state)
{
	struct config *cfg = load_ok("[pgbouncer]\nauth_file = users.txt\n");

	(void)state;
	assert_int_equal(cfg->listen_port, 6432);
	assert_string_equal(cfg->listen_addr, "");
	assert_string_equal(cfg->unix_socket_dir, "/tmp");
	assert_int_equal(cfg->unix_socket_mode, 0777);
	assert_int_equal(cfg->auth_type, AUTH_MD5);
	assert_int_equal(cfg->pool_mode, POOL_SESSION);
	assert_int_equal(cfg->client_tls_sslmode, SSLMODE_DISABLE);
	assert_int_equal(cfg->server_tls_sslmode, SSLMODE_PREFER);
	assert_int_equal(cfg->server_tls_sslnegotiation, SSLNEG_POSTGRES);
	assert_int_equal(cfg->server_lifetime, 3600 * USEC_PER_SEC);
	assert_int_equal(cfg->query_wait_timeout, 120 * USEC_PER_SEC);
	assert_int_equal(cfg->reserve_pool_timeout, 5 * USEC_PER_SEC);
	assert_int_equal(cfg->auth_query_cache_ttl, 0);
	assert_int_equal(cfg->pkt_buf, 4096);
	assert_int_equal(cfg->max_packet_size, 2147483647);
	assert_true(cfg->tcp_keepalive);
	assert_true(cfg->log_connections);
	assert_false(cfg->so_reuseport);
	assert_int_equal(cfg->workers, 0);
	assert_int_equal(cfg->server_login_concurrency, 2);
	assert_int_equal(cfg->max_pools, 16384);
	assert_string_equal(cfg->metrics_listen, "");
	assert_string_equal(cfg->conffile, ini_path);       /* "" becomes the main file */
	assert_string_equal(cfg->path, ini_path);
	assert_int_equal(cfg->n_dbs, 0);
	assert_null(cfg->autodb);
	assert_int_equal(userlist_count(cfg->userlist), 1);
	assert_string_equal(userlist_find(cfg->userlist, "admin"), "pw");
	config_free(cfg);
}

static void test_table_rules(void **state)
{
	static const char *const no_reload[] = {
		"disable_pqexec", "job_name", "listen_addr", "listen_backlog", "listen_port", "max_pools",
		"metrics_listen", "pidfile", "pkt_buf", "resolv_conf", "so_reuseport",
		"track_extra_parameters", "unix_socket_dir", "unix_socket_group", "unix_socket_mode",
		"user", "workers",
	};
	static const char *const extensions[] = {
		"auth_query_cache_ttl", "max_pools", "metrics_listen", "server_login_concurrency",
		"server_max_protocol_version", "server_tls_sslnegotiation", "sql_prepared_statements", "unnamed_statement_cache",
		"proxy_protocol", "proxy_protocol_sources", "target_session_attrs",
		"worker_sched_slice", "workers", "io_uring", "supervisor_sched_batch",
	};
	size_t n_nr = 0, n_ext = 0;

	(void)state;
	for (size_t i = 0; i < settings_count(); i++) {
		const struct setting *s = settings_get(i);

		if (i > 0 && strcmp(setting_name(settings_get(i - 1)), setting_name(s)) >= 0)
			fail_msg("%s is out of alphabetical order", setting_name(s));
		assert_ptr_equal(setting_find(setting_name(s)), s);
		assert_non_null(setting_description(s));
		assert_true(strlen(setting_description(s)) > 5);
		n_nr += !setting_reloadable(s);
		n_ext += setting_is_extension(s);
	}
	assert_null(settings_get(settings_count()));
	assert_int_equal(n_nr, sizeof(no_reload) / sizeof(no_reload[0]));
	for (size_t i = 0; i < sizeof(no_reload) / sizeof(no_reload[0]); i++)
		assert_false(setting_reloadable(setting_find(no_reload[i])));
	assert_int_equal(n_ext, sizeof(extensions) / sizeof(extensions[0]));
	for (size_t i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++)
		assert_true(setting_is_extension(setting_find(extensions[i])));
	assert_true(setting_reloadable(setting_find("auth_file")));
	assert_true(setting_reloadable(setting_find("logfile")));
	assert_true(setting_reloadable(setting_find("pool_idle_timeout")));
	assert_ptr_equal(setting_find("service_name"), setting_find("job_name"));
	assert_null(setting_find("bogus"));
	assert_null(setting_find("Listen_Port"));
}

/* key, value, then the SHOW CONFIG text it must give or NULL if rejected */
static const struct {
	const char *key, *value, *shown;
} value_cases[] = {
	/* metrics_listen: address:port or empty */
	{ "metrics_listen", "127.0.0.1:9127", "127.0.0.1:9127" },
	{ "metrics_listen", "*:9127", "*:9127" },
	{ "metrics_listen", "[::1]:9127", "[::1]:9127" },
	{ "metrics_listen", "localhost:1", "localhost:1" },
	{ "metrics_listen", "", "" },
	{ "metrics_listen", "9127", NULL },
	{ "metrics_listen", ":9127", NULL },
	{ "metrics_listen", "127.0.0.1:", NULL },
	{ "metrics_listen", "127.0.0.1:0", NULL },
	{ "metrics_listen", "127.0.0.1:65536", NULL },
	{ "metrics_listen", "127.0.0.1:9x", NULL },
	{ "metrics_listen", "::1:9127", NULL },
	{ "metrics_listen", "[::1:9127", NULL },
	{ "metrics_listen", "a b:9127", NULL },
	/* times: bare seconds with fractions, or units */
	{ "server_lifetime", "0.5", "0.5" },
	{ "server_lifetime", "3600", "3600" },
	{ "server_lifetime", "1.5s", "1.5" },
	{ "server_lifetime", "250ms", "0.25" },
	{ "server_lifetime", "100us", "0.0001" },
	{ "server_lifetime", "2min", "120" },
	{ "server_lifetime", "5 min", "300" },
	{ "server_lifetime", "1h", "3600" },
	{ "server_lifetime", "1d", "86400" },
	{ "server_lifetime", ".25", "0.25" },
	{ "server_lifetime", "1e2", "100" },
	{ "server_lifetime", "0", "0" },
	{ "server_lifetime", "-1", NULL },
	{ "server_lifetime", "abc", NULL },
	{ "server_lifetime", "5 weeks", NULL },
	{ "server_lifetime", "1x", NULL },
	{ "server_lifetime", "", NULL },
	{ "server_lifetime", "nan", NULL },
	{ "server_lifetime", "inf", NULL },
	{ "server_lifetime", "0x10", NULL },
	{ "server_lifetime", "1e300", NULL },
	{ "stats_period", "0.5", NULL },            /* at least one second */
	{ "stats_period", "1", "1" },
	/* sizes */
	{ "pkt_buf", "8kB", "8192" },
	{ "pkt_buf", "8 KB", "8192" },
	{ "pkt_buf", "1MB", "1048576" },
	{ "pkt_buf", "4096", "4096" },
	{ "pkt_buf", "512B", "512" },
	{ "pkt_buf", "75", "75" },                  /* PgBouncer's tests use it */
	{ "pkt_buf", "0", NULL },                   /* below the minimum */
	{ "pkt_buf", "4096x", NULL },
	{ "pkt_buf", "-1", NULL },
	{ "pkt_buf", "1.5kB", NULL },
	{ "tcp_socket_buffer", "1GB", "1073741824" },
	{ "tcp_socket_buffer", "2GB", NULL },
	{ "max_packet_size", "16MB", "16777216" },
	{ "max_packet_size", "99999999999TB", NULL },
	/* bools */
	{ "so_reuseport", "yes", "1" }, { "so_reuseport", "no", "0" },
	{ "so_reuseport", "on", "1" }, { "so_reuseport", "off", "0" },
	{ "so_reuseport", "true", "1" }, { "so_reuseport", "FALSE", "0" },
	{ "so_reuseport", "1", "1" }, { "so_reuseport", "0", "0" },
	{ "so_reuseport", "maybe", NULL }, { "so_reuseport", "", NULL },
	/* enums */
	{ "auth_type", "any", "any" }, { "auth_type", "trust", "trust" },
	{ "auth_type", "plain", "plain" }, { "auth_type", "md5", "md5" },
	{ "auth_type", "scram-sha-256", "scram-sha-256" }, { "auth_type", "cert", "cert" },
	{ "auth_type", "hba", "hba" }, { "auth_type", "pam", "pam" }, { "auth_type", "ldap", "ldap" },
	{ "auth_type", "MD5", "md5" }, { "auth_type", "password", NULL },
	{ "pool_mode", "transaction", "transaction" }, { "pool_mode", "statement", "statement" },
	{ "pool_mode", "txn", NULL },
	{ "client_tls_sslmode", "verify-full", "verify-full" },
	{ "server_tls_sslmode", "verify-ca", "verify-ca" }, { "server_tls_sslmode", "allow", "allow" },
	{ "server_tls_sslmode", "require", "require" }, { "server_tls_sslmode", "on", NULL },
	{ "server_tls_sslnegotiation", "direct", "direct" }, { "server_tls_sslnegotiation", "tls", NULL },
	{ "server_max_protocol_version", "3.0", "3.0" }, { "server_max_protocol_version", "3.1", NULL },
	{ "server_max_protocol_version", "3.2", "3.2" },
	/* ints */
	{ "listen_port", "0", NULL }, { "listen_port", "65536", NULL }, { "listen_port", "1", "1" },
	{ "listen_port", "0x1F90", "8080" }, { "listen_port", "64 32", NULL }, { "listen_port", "6432.0", NULL },
	{ "unix_socket_mode", "0700", "448" },
	{ "workers", "auto", "auto" }, { "workers", "AUTO", "auto" }, { "workers", "4", "4" },
	{ "workers", "0", "auto" }, { "workers", "-1", NULL }, { "workers", "many", NULL },
	{ "default_pool_size", "-5", NULL }, { "default_pool_size", "0", "0" },
	{ "max_pools", "0", NULL }, { "max_pools", "1", "1" },
	{ "server_login_concurrency", "0", NULL },
	{ "peer_id", "16383", "16383" }, { "peer_id", "16384", NULL },
	{ "max_client_conn", "99999999999", NULL },
	/* pool_idle_timeout: a time like the other timeouts, 0 = never */
	{ "pool_idle_timeout", "1", "1" }, { "pool_idle_timeout", "500ms", "0.5" },
	{ "pool_idle_timeout", "2min", "120" }, { "pool_idle_timeout", "0", "0" },
	{ "pool_idle_timeout", "-1", NULL }, { "pool_idle_timeout", "soon", NULL },
	/* a time within a range, 0 being "off" */
	{ "worker_sched_slice", "0", "0" }, { "worker_sched_slice", "100us", "0.0001" },
	{ "worker_sched_slice", "2ms", "0.002" }, { "worker_sched_slice", "0.1", "0.1" },
	{ "worker_sched_slice", "99us", NULL }, { "worker_sched_slice", "101ms", NULL },
	{ "worker_sched_slice", "-1", NULL },
	/* strings are kept verbatim */
	{ "server_reset_query", "DEALLOCATE ALL", "DEALLOCATE ALL" },
	{ "admin_users", "", "" },
};

static void test_values(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(value_cases) / sizeof(value_cases[0]); i++) {
		struct config cfg;
		const struct setting *s = setting_find(value_cases[i].key);
		char msg[300] = "", before[512];
		int rc;

		memset(&cfg, 0, sizeof(cfg));
		settings_init_defaults(&cfg);
		setting_format(&cfg, s, before, sizeof(before));
		rc = setting_parse(&cfg, s, value_cases[i].value, msg, sizeof(msg));
		if (value_cases[i].shown) {
			if (rc != 0)
				fail_msg("%s = '%s' rejected: %s", value_cases[i].key, value_cases[i].value, msg);
			if (strcmp(fmt(&cfg, value_cases[i].key), value_cases[i].shown) != 0)
				fail_msg("%s = '%s' shows '%s' want '%s'", value_cases[i].key, value_cases[i].value,
					 fmt(&cfg, value_cases[i].key), value_cases[i].shown);
		} else {
			if (rc != -1 || msg[0] == '\0')
				fail_msg("%s = '%s' accepted", value_cases[i].key, value_cases[i].value);
			assert_string_equal(fmt(&cfg, value_cases[i].key), before);   /* unchanged */
		}
		settings_free_values(&cfg);
	}
}

static void test_value_messages(void **state)
{
	struct config cfg;
	char msg[300];

	(void)state;
	memset(&cfg, 0, sizeof(cfg));
	settings_init_defaults(&cfg);
	assert_int_equal(setting_parse(&cfg, setting_find("pool_mode"), "txn", msg, sizeof(msg)), -1);
	assert_string_equal(msg, "must be one of: session, transaction, statement");
	assert_int_equal(setting_parse(&cfg, setting_find("listen_port"), "x", msg, sizeof(msg)), -1);
	assert_string_equal(msg, "must be an integer from 1 to 65535");
	assert_int_equal(setting_parse(&cfg, setting_find("workers"), "x", msg, sizeof(msg)), -1);
	assert_string_equal(msg, "must be \"auto\" or an integer from 0 to 128");
	assert_int_equal(setting_parse(&cfg, setting_find("worker_sched_slice"), "50us", msg, sizeof(msg)), -1);
	assert_string_equal(msg, "must be 0 or a time from 0.0001 s to 0.1 s "
			    "(seconds, or a number with unit us, ms, s, min, h, d)");
	assert_int_equal(setting_parse(&cfg, setting_find("so_reuseport"), "x", msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "boolean"));
	settings_free_values(&cfg);
}

static void test_full_file(void **state)
{
	struct config *cfg;
	struct config_error err = { "" };
	const struct db_def *db;
	const struct user_def *u;
	const struct peer_def *p;

	(void)state;
	if (config_load(DATADIR "/config/full.ini", &cfg, &err) < 0)
		fail_msg("%s", err.msg);
	/* [pgcrew] is [pgbouncer]; the included file stays in it */
	assert_string_equal(cfg->listen_addr, "127.0.0.1, ::1");
	assert_int_equal(cfg->listen_port, 7432);
	assert_int_equal(cfg->auth_type, AUTH_SCRAM);
	assert_int_equal(cfg->server_lifetime, 1800 * USEC_PER_SEC);
	assert_int_equal(cfg->query_timeout, 500 * USEC_PER_MSEC);
	assert_int_equal(cfg->pkt_buf, 8192);
	assert_int_equal(cfg->workers, 3);
	assert_int_equal(cfg->server_tls_sslnegotiation, SSLNEG_DIRECT);
	assert_true(cfg->so_reuseport);
	assert_string_equal(cfg->admin_users, "admin, ops");
	assert_false(cfg->log_connections);
	assert_string_equal(cfg->server_reset_query, "DEALLOCATE ALL");
	/* auth_file is relative to the config file's directory */
	assert_int_equal(userlist_count(cfg->userlist), 7);
	assert_string_equal(fmt(cfg, "auth_file"), "userlist_good.txt");

	assert_int_equal(cfg->n_dbs, 4);
	db = config_find_db(cfg, "main");
	assert_non_null(db);
	assert_int_equal(db->n_hosts, 2);
	assert_string_equal(db->hosts[1], "db2");
	assert_int_equal(db->port, 6000);
	assert_string_equal(db->dbname, "maindb");
	assert_int_equal(db->pool_size, 7);
	assert_int_equal(db->pool_mode, POOL_TRANSACTION);
	assert_int_equal(db->line, 3);
	assert_non_null(strstr(db->file, "full.ini"));
	db = config_find_db(cfg, "weird name");
	assert_non_null(db);
	assert_string_equal(db->host, "/var/run/postgresql");
	assert_string_equal(db->password, "it's secret");
	db = config_find_db(cfg, "dup");
	assert_string_equal(db->host, "second");
	assert_int_equal(db->line, 7);
	assert_non_null(config_find_db(cfg, "empty"));
	assert_null(config_find_db(cfg, "*"));
	assert_null(config_find_db(cfg, "nope"));
	assert_non_null(cfg->autodb);
	assert_string_equal(cfg->autodb->name, "*");
	assert_string_equal(cfg->autodb->host, "fallback");
	assert_int_equal(cfg->autodb->port, 5433);

	assert_int_equal(cfg->n_users, 1);
	u = config_find_user(cfg, "alice");
	assert_non_null(u);
	assert_int_equal(u->pool_mode, POOL_STATEMENT);
	assert_int_equal(u->max_user_connections, 3);
	assert_int_equal(u->query_timeout, 2500 * USEC_PER_MSEC);
	assert_null(config_find_user(cfg, "bob"));

	assert_int_equal(cfg->n_peers, 2);
	p = config_find_peer(cfg, 2);
	assert_non_null(p);
	assert_string_equal(p->host, "peer2");
	assert_int_equal(p->port, 7432);
	assert_int_equal(p->pool_size, 4);
	assert_int_equal(config_find_peer(cfg, 1)->port, 6432);
	assert_null(config_find_peer(cfg, 3));
	config_free(cfg);
}

static const struct {
	const char *text, *error;   /* error: after "<ini_path>" unless it starts with '!' */
} load_errors[] = {
	{ "[pgbouncer]\nauth_file = users.txt\nbogus = 1\n", ":3: unknown key 'bogus' in [pgbouncer]" },
	{ "[pgcrew]\nauth_file = users.txt\n\nlisten_ports = 1\n", ":4: unknown key 'listen_ports' in [pgcrew]" },
	{ "[pgbouncer]\nlisten_port = abc\n", "!invalid value \"abc\" for parameter listen_port in configuration (" },
	{ "[pgbouncer]\nlisten_port = 70000\n", "!invalid value \"70000\" for parameter listen_port in configuration (" },
	{ "[pgbouncer]\ndefault_pool_size = -1\n", "!invalid value \"-1\" for parameter default_pool_size in configuration (" },
	{ "[pgbouncer]\nmax_pools = 0\n", "!invalid value \"0\" for parameter max_pools in configuration (" },
	{ "[pgbouncer]\nserver_lifetime = soon\n", "!invalid value \"soon\" for parameter server_lifetime in configuration (" },
	{ "[pgbouncer]\npool_mode = txn\n", "!invalid value \"txn\" for parameter pool_mode in configuration (" },
	{ "[pgbouncer]\nauth_file = users.txt\n[database]\n", ":3: unknown section [database]" },
	{ "[databases]\npgbouncer = host=x\n", ":2: database name 'pgbouncer' is reserved" },
	{ "[databases]\nx = host=a bogus=1\n", ":2: database 'x': unknown parameter 'bogus'" },
	{ "[databases]\nx = pool_mode=txn\n", ":2: database 'x': bad value 'txn' for 'pool_mode'" },
	{ "[databases]\nx = pool_size=-3\n", ":2: database 'x': bad value '-3' for 'pool_size'" },
	{ "[users]\nu = bogus=1\n", ":2: user 'u': unknown parameter 'bogus'" },
	{ "[peers]\n0 = host=a\n", ":2: peer '0': peer id must be a number" },
	{ "[pgbouncer]\nauth_type = md5\n", "!auth_file must be set when auth_type is md5" },
	{ "[pgbouncer]\nauth_type = scram-sha-256\n", "!auth_file must be set when auth_type is scram-sha-256" },
	{ "[pgbouncer]\nauth_type = plain\n", "!auth_file must be set when auth_type is plain" },
	{ "[pgbouncer]\nauth_file = missing.txt\n", "!could not open auth_file" },
	{ "[pgbouncer]\nauth_file = t.ini\n", "/t.ini:1: expected a double-quoted user name" },
	{ "[pgbouncer]\n%include nope.ini\n", ":2: %include: could not open" },
	{ "[pgbouncer]\nlisten_port 6432\n", ":2: syntax error: missing '=' for key 'listen_port'" },
};

static void test_load_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(load_errors) / sizeof(load_errors[0]); i++) {
		struct config_error err = { "" };
		char want[300];
		const char *e = load_errors[i].error;
		struct config *cfg = load_text(load_errors[i].text, &err);

		if (e[0] == '!')
			snprintf(want, sizeof(want), "%s", e + 1);
		else if (e[0] == '/')
			snprintf(want, sizeof(want), "%s%s", tmpdir, e);
		else
			snprintf(want, sizeof(want), "%s%s", ini_path, e);
		if (cfg)
			fail_msg("case %zu loaded", i);
		if (!strstr(err.msg, want))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, want);
	}
}

/* The bad-value message has PgBouncer's wording and names file and line. */
static void test_bad_value_wording(void **state)
{
	struct config_error err = { "" };
	char want[600];
	(void)state;
	struct config *cfg = load_text("[pgbouncer]\n\npool_mode = txn\n", &err);
	assert_null(cfg);
	snprintf(want, sizeof(want), "invalid value \"txn\" for parameter pool_mode in configuration (%s:3)", ini_path);
	if (!strstr(err.msg, want))
		fail_msg("'%s' lacks '%s'", err.msg, want);
}

static void test_auth_type_without_file(void **state)
{
	static const char *const ok[] = {
		"trust", "any", "cert", "hba",
#ifdef HAVE_PAM
		"pam",
#endif
#ifdef HAVE_LDAP
		"ldap\nauth_ldap_options = ldapserver=h ldapprefix=cn=",
#endif
	};
	char text[200];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct config *cfg;

		snprintf(text, sizeof(text), "[pgbouncer]\nauth_type = %s\n", ok[i]);
		cfg = load_ok(text);
		assert_int_equal(userlist_count(cfg->userlist), 0);
		config_free(cfg);
	}
	/* auth_query through auth_user needs no auth_file either */
	config_free(load_ok("[pgbouncer]\nauth_type = md5\nauth_user = lookup\n"));

	/* auth_type = ldap: auth_ldap_options is checked when loading. */
	struct config_error err = { "" };
	assert_null(load_text("[pgbouncer]\nauth_type = ldap\nauth_ldap_options = ldapserver=h\n", &err));
#ifdef HAVE_LDAP
	assert_non_null(strstr(err.msg, "auth_ldap_options: authentication method \"ldap\" requires argument"));
#else
	assert_non_null(strstr(err.msg, "auth_type = ldap: pgcrew was built without LDAP"));
#endif
}

static void test_sample_config(void **state)
{
	struct config *cfg;
	struct config_error err = { "" };
	const char *secret;

	(void)state;
	if (config_load(TOP_SRCDIR "/etc/pgcrew.ini", &cfg, &err) < 0)
		fail_msg("etc/pgcrew.ini: %s", err.msg);
	assert_string_equal(cfg->listen_addr, "127.0.0.1");
	assert_int_equal(cfg->listen_port, 6432);
	assert_int_equal(cfg->auth_type, AUTH_SCRAM);
	assert_string_equal(cfg->admin_users, "pgcrew_admin");
	secret = userlist_find(cfg->userlist, "pgcrew_admin");
	assert_non_null(secret);
	assert_int_equal(userlist_secret_kind(secret), USERLIST_SCRAM);
	assert_non_null(config_find_db(cfg, "postgres"));
	config_free(cfg);
}

static void test_config_set(void **state)
{
	struct config *cfg = load_ok("[pgbouncer]\nauth_file = users.txt\n");
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(config_set(cfg, "default_pool_size", "50", &err), 0);
	assert_int_equal(cfg->default_pool_size, 50);
	assert_int_equal(config_set(cfg, "admin_users", "a, b", &err), 0);
	assert_string_equal(cfg->admin_users, "a, b");
	assert_int_equal(config_set(cfg, "query_timeout", "1.5", &err), 0);
	assert_int_equal(cfg->query_timeout, 1500 * USEC_PER_MSEC);
	assert_int_equal(config_set(cfg, "pool_mode", "transaction", &err), 0);
	assert_int_equal(cfg->pool_mode, POOL_TRANSACTION);

	assert_int_equal(config_set(cfg, "listen_port", "7000", &err), -1);
	assert_non_null(strstr(err.msg, "'listen_port' cannot be changed at runtime"));
	assert_int_equal(cfg->listen_port, 6432);
	assert_int_equal(config_set(cfg, "service_name", "x", &err), -1);
	assert_non_null(strstr(err.msg, "'job_name'"));
	assert_int_equal(config_set(cfg, "default_pool_size", "lots", &err), -1);
	assert_non_null(strstr(err.msg, "bad value 'lots' for key 'default_pool_size'"));
	assert_int_equal(cfg->default_pool_size, 50);
	assert_int_equal(config_set(cfg, "bogus", "1", &err), -1);
	assert_non_null(strstr(err.msg, "unknown configuration parameter 'bogus'"));
	config_free(cfg);
}

static void test_check_reload(void **state)
{
	struct config *a = load_ok("[pgbouncer]\nauth_file = users.txt\nlisten_port = 6432\n");
	struct config *b = load_ok("[pgbouncer]\nauth_file = users.txt\nlisten_port = 6432\n"
				   "default_pool_size = 5\nlogfile = /tmp/x.log\n");
	struct config *c = load_ok("[pgbouncer]\nauth_file = users.txt\nlisten_port = 7000\n"
				   "unix_socket_dir = /run\nworkers = 2\ndefault_pool_size = 5\n");
	struct config_error err = { "" };

	char names[200], v[64];

	(void)state;
	(void)err;
	assert_int_equal(config_keep_restart_keys(a, b, names, sizeof(names)), 0);  /* only reloadable keys differ */
	assert_string_equal(names, "");
	assert_int_equal(config_keep_restart_keys(a, c, names, sizeof(names)), 3);
	assert_string_equal(names, "listen_port, unix_socket_dir, workers");
	/* the running values stay; the reloadable one is the new file's */
	assert_int_equal(c->listen_port, 6432);
	setting_format(c, setting_find("unix_socket_dir"), v, sizeof(v));
	assert_string_equal(v, "/tmp");
	setting_format(c, setting_find("workers"), v, sizeof(v));
	assert_string_equal(v, "auto");
	assert_int_equal(c->default_pool_size, 5);
	assert_int_equal(config_keep_restart_keys(a, c, names, sizeof(names)), 0);
	config_free(a);
	config_free(b);
	config_free(c);
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* doc/config.md has one table row per setting: name, type, default,
 * reloadable, and "pgcrew" on extensions. */
static void test_doc_matches_table(void **state)
{
	char *doc = read_all(TOP_SRCDIR "/doc/config.md");

	(void)state;
	for (size_t i = 0; i < settings_count(); i++) {
		const struct setting *s = settings_get(i);
		const char *def = setting_default(s);
		char row[512];
		const char *at;

		snprintf(row, sizeof(row), "| `%s` | %s | %s%s%s | %s |", setting_name(s),
			 setting_type_name(s->type), def[0] ? "`" : "", def[0] ? def : "(empty)",
			 def[0] ? "`" : "", setting_reloadable(s) ? "yes" : "no");
		at = strstr(doc, row);
		if (!at)
			fail_msg("doc/config.md lacks the row '%s'", row);
		if (setting_is_extension(s) != (strstr(at, "**pgcrew**") && strstr(at, "**pgcrew**") < strchr(at, '\n')))
			fail_msg("doc/config.md: %s extension mark is wrong", setting_name(s));
	}
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_equal_pgbouncer),
		cmocka_unit_test(test_default_fields),
		cmocka_unit_test(test_table_rules),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_value_messages),
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_bad_value_wording),
		cmocka_unit_test(test_auth_type_without_file),
		cmocka_unit_test(test_sample_config),
		cmocka_unit_test(test_config_set),
		cmocka_unit_test(test_check_reload),
		cmocka_unit_test(test_doc_matches_table),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

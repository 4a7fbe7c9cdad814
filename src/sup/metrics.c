/* pgcrew — the Prometheus endpoint, served by the supervisor (metrics.h).
 * A scrape asks every worker for SHOW POOLS, DATABASES, LISTS and SERVERS through the
 * console fan-out, merges the rows as the console does, and adds what shared
 * memory holds: per-database counters, latency histograms, worker restarts.
 * Names follow the community pgbouncer_exporter; pgcrew's own are pgcrew_*. */
#include "metrics.h"
#include "welcome.h"
#include "admin.h"
#include "build-config.h"
#include "config.h"
#include "config/value.h"
#include "hist.h"
#include "log.h"
#include "rowmerge.h"
#include "shm.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define SCRAPE_TIMEOUT_SEC 5
#define RETRY_USEC 100000
#define RETRY_TRIES 100            /* -R: the old process lets the port go within 10 s */

enum { V_POOLS, V_DATABASES, V_LISTS, V_SERVERS, N_VIEWS };
static const char *const view_cmd[N_VIEWS] = { "SHOW POOLS", "SHOW DATABASES", "SHOW LISTS", "SHOW SERVERS" };
static const char *const view_name[N_VIEWS] = { "pools", "databases", "lists", "servers" };

struct scrape;

struct scrape_part {                /* one view, fanned out */
	struct scrape *s;
	struct rowset rows;
	bool bad;                   /* a worker's rows did not parse */
};

struct scrape {
	struct list node;           /* metrics.scrapes */
	struct evhttp_request *req; /* NULL once answered */
	struct scrape_part parts[N_VIEWS];
	int pending;                /* views still out */
	bool failed;
	struct event *timer;
};

static struct {
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	int port;
	char host[256];
	struct list scrapes;
	bool started;
	struct event *retry;
	int tries;
	const struct metrics_source *src;
} m;

/* ---- text format helpers ---- */

/* Microseconds as exact decimal seconds: 2500 -> "0.0025". */
static void fmt_seconds(uint64_t us, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%llu.%06llu", (unsigned long long)(us / 1000000),
			 (unsigned long long)(us % 1000000));
	while (n > 0 && (size_t)n < len && buf[n - 1] == '0')
		buf[--n] = 0;
	if (n > 0 && buf[n - 1] == '.')
		buf[n - 1] = 0;
}

/* A label value with \, " and newline escaped. */
static void esc(const char *v, char *out, size_t len)
{
	size_t o = 0;
	for (; v && *v && o + 3 < len; v++) {
		if (*v == '\\' || *v == '"') {
			out[o++] = '\\';
			out[o++] = *v;
		} else if (*v == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *v;
		}
	}
	out[o] = 0;
}

static void family(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- shared memory: counters, histograms, workers ---- */

/* Columns of stats_to_array(): xact, query, in, out, xact_time, query_time,
 * wait_time, assignments, errors. */
static const struct {
	const char *name;
	int col;
	bool usec;
	const char *help;
} stat_counters[] = {
	{ "pgbouncer_stats_queries_pooled_total", 1, false, "Total number of SQL queries pooled" },
	{ "pgbouncer_stats_queries_duration_seconds_total", 5, true,
	  "Total number of seconds spent by pgbouncer when actively connected to PostgreSQL, executing queries" },
	{ "pgbouncer_stats_received_bytes_total", 2, false,
	  "Total volume in bytes of network traffic received by pgbouncer, shown as bytes" },
	{ "pgbouncer_stats_sent_bytes_total", 3, false,
	  "Total volume in bytes of network traffic sent by pgbouncer, shown as bytes" },
	{ "pgbouncer_stats_client_wait_seconds_total", 6, true, "Time spent by clients waiting for a server in seconds" },
	{ "pgbouncer_stats_sql_transactions_pooled_total", 0, false, "Total number of SQL transactions pooled" },
	{ "pgbouncer_stats_server_in_transaction_seconds_total", 4, true,
	  "Total number of seconds spent by pgbouncer when connected to PostgreSQL in a transaction, "
	  "either idle in transaction or executing queries" },
	{ "pgcrew_stats_server_assignments_total", 7, false, "Times a server was assigned to a client" },
	{ "pgcrew_stats_errors_total", 8, false, "Errors sent to clients" },
};

static void render_stats(struct evbuffer *b)
{
	char name[64], lname[160], num[32];
	uint64_t t[SHM_STATS];
	for (size_t k = 0; k < ARRAY_SIZE(stat_counters); k++) {
		family(b, stat_counters[k].name, "counter", stat_counters[k].help);
		uint32_t high = shm_names_high();
		for (uint32_t i = 0; i < high; i++) {
			if (!shm_name_at((int)i, SHM_DB, name, sizeof(name), NULL))
				continue;
			shm_stats_total((int)i, t);
			uint64_t v = t[stat_counters[k].col];
			esc(name, lname, sizeof(lname));
			if (stat_counters[k].usec)
				fmt_seconds(v, num, sizeof(num));
			else
				snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
			evbuffer_add_printf(b, "%s{database=\"%s\"} %s\n", stat_counters[k].name, lname, num);
		}
	}
}

static void histogram(struct evbuffer *b, const char *name, const char *labels, const struct hist_total *h)
{
	char le[32], sum[32];
	uint64_t cum = 0;
	for (int i = 0; i < HIST_BOUNDS; i++) {
		cum += h->n[i];
		fmt_seconds(hist_bounds_us[i], le, sizeof(le));
		evbuffer_add_printf(b, "%s_bucket{%sle=\"%s\"} %llu\n", name, labels, le, (unsigned long long)cum);
	}
	cum += h->n[HIST_BOUNDS];
	fmt_seconds(h->sum_us, sum, sizeof(sum));
	evbuffer_add_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
	evbuffer_add_printf(b, "%s_sum{%.*s} %s\n", name, (int)(strlen(labels) ? strlen(labels) - 1 : 0), labels, sum);
	evbuffer_add_printf(b, "%s_count{%.*s} %llu\n", name, (int)(strlen(labels) ? strlen(labels) - 1 : 0), labels,
			    (unsigned long long)cum);
}

static const struct {
	const char *name;
	const char *help;
} pool_hists[HIST_POOL_KINDS] = {
	[HIST_QUERY] = { "pgcrew_query_duration_seconds", "Query time per pool: request to ReadyForQuery" },
	[HIST_XACT] = { "pgcrew_transaction_duration_seconds", "Transaction time per pool: first request to idle" },
	[HIST_WAIT] = { "pgcrew_client_wait_seconds", "Time a client waited for a server, per assignment (0 when one was ready)" },
};

static void render_histograms(struct evbuffer *b)
{
	char db[64], user[64], edb[160], euser[160], labels[400];
	struct hist_total h;
	for (int k = 0; k < HIST_POOL_KINDS; k++) {
		family(b, pool_hists[k].name, "histogram", pool_hists[k].help);
		uint32_t high = hist_pools_high();
		for (uint32_t i = 0; i < high; i++) {
			if (!hist_pool_at((int)i, db, sizeof(db), user, sizeof(user)))
				continue;
			esc(db, edb, sizeof(edb));
			esc(user, euser, sizeof(euser));
			snprintf(labels, sizeof(labels), "database=\"%s\",user=\"%s\",", edb, euser);
			hist_pool_total((int)i, (enum hist_pool_kind)k, &h);
			histogram(b, pool_hists[k].name, labels, &h);
		}
	}
	family(b, "pgcrew_connection_setup_seconds", "histogram",
	       "Connection setup time by phase: startup (accept to StartupMessage, TLS excluded), tls, auth, server_login, server_move (an idle server moving to another worker)");
	for (int ph = 0; ph < HIST_PHASES; ph++) {
		snprintf(labels, sizeof(labels), "phase=\"%s\",", hist_phase_name((enum hist_phase)ph));
		hist_phase_total((enum hist_phase)ph, &h);
		histogram(b, "pgcrew_connection_setup_seconds", labels, &h);
	}
}

static void render_workers(struct evbuffer *b)
{
	int n = shm_n_workers();
	family(b, "pgcrew_workers", "gauge", "Worker processes");
	evbuffer_add_printf(b, "pgcrew_workers %d\n", n);
	family(b, "pgcrew_worker_restarts_total", "counter", "Times the supervisor restarted the worker after it died");
	for (int w = 0; w < n; w++)
		evbuffer_add_printf(b, "pgcrew_worker_restarts_total{worker=\"%d\"} %d\n", w, shm_restarts(w));
	family(b, "pgcrew_worker_clients", "gauge", "Client connections held by the worker");
	for (int w = 0; w < n; w++)
		evbuffer_add_printf(b, "pgcrew_worker_clients{worker=\"%d\"} %d\n", w, shm_clients_of(w));
}

/* Logins by the protocol version they speak: clients given their key (3.2:
 * a long one), servers logged in (3.0: a PostgreSQL before 18, or
 * server_max_protocol_version = 3.0). */
static void render_logins(struct evbuffer *b)
{
	static const struct {
		enum shm_login_kind kind;
		const char *name, *help;
	} fams[] = {
		{ SHM_LOGIN_CLIENT, "pgcrew_client_logins_total", "Client logins by the protocol version they speak" },
		{ SHM_LOGIN_SERVER, "pgcrew_server_logins_total", "Server logins by the protocol version spoken with them" },
	};
	for (size_t f = 0; f < ARRAY_SIZE(fams); f++) {
		family(b, fams[f].name, "counter", fams[f].help);
		for (int minor = 0; minor < SHM_PROTO_MINORS; minor++)
			evbuffer_add_printf(b, "%s{protocol=\"3.%d\"} %llu\n", fams[f].name, minor,
					    (unsigned long long)shm_logins_total(fams[f].kind, minor));
	}
}

/* The instance-wide tables' use: they grow and shrink with the tenants
 * (doc/config.md, "Thousands of tenants"). */
static void render_tables(struct evbuffer *b)
{
	const struct {
		const char *name, *help;
		long long v;
	} g[] = {
		{ "pgcrew_shared_pools_used", "Pools some worker holds a shared slot for", hist_pools_used() },
		{ "pgcrew_shared_pools_max", "Shared pool slots (max_pools)", hist_pools_capacity() },
		{ "pgcrew_shared_names_used", "Database and user names some worker holds a shared slot for",
		  shm_names_used() },
		{ "pgcrew_shared_names_max", "Shared name slots (2 x max_pools)", shm_names_capacity() },
		{ "pgcrew_ledger_entries", "Pools, databases and users the slot ledger counts for",
		  m.src->ledger_entries ? m.src->ledger_entries() : 0 },
		{ "pgcrew_supervisor_pool_entries", "Welcome parameters and failed logins the supervisor keeps",
		  (long long)welcome_count() },
	};
	for (size_t i = 0; i < ARRAY_SIZE(g); i++) {
		family(b, g[i].name, "gauge", g[i].help);
		evbuffer_add_printf(b, "%s %lld\n", g[i].name, g[i].v);
	}
}

/* ---- merged console views ---- */

struct gauge_col {
	int col;
	const char *name;
	const char *help;
};

static const struct gauge_col pool_gauges[] = {
	{ 2, "pgbouncer_pools_client_active_connections",
	  "Client connections linked to server connection and able to process queries, shown as connection" },
	{ 4, "pgbouncer_pools_client_active_cancel_connections",
	  "Client connections that have forwarded query cancellations to the server and are waiting for the server response" },
	{ 3, "pgbouncer_pools_client_waiting_connections", "Client connections waiting on a server connection, shown as connection" },
	{ 5, "pgbouncer_pools_client_waiting_cancel_connections",
	  "Client connections that have not forwarded query cancellations to the server yet" },
	{ 6, "pgbouncer_pools_server_active_connections", "Server connections linked to a client connection, shown as connection" },
	{ 7, "pgbouncer_pools_server_active_cancel_connections", "Server connections that are currently forwarding a cancel request" },
	{ 8, "pgbouncer_pools_server_being_canceled_connections",
	  "Servers that could become idle but wait for in-flight cancel requests to complete" },
	{ 9, "pgbouncer_pools_server_idle_connections", "Server connections idle and ready for a client query, shown as connection" },
	{ 10, "pgbouncer_pools_server_used_connections",
	  "Server connections idle more than server_check_delay, needing server_check_query, shown as connection" },
	{ 11, "pgbouncer_pools_server_testing_connections",
	  "Server connections currently running either server_reset_query or server_check_query, shown as connection" },
	{ 12, "pgbouncer_pools_server_login_connections", "Server connections currently in the process of logging in, shown as connection" },
};

static const struct gauge_col db_gauges[] = {
	{ 5, "pgbouncer_databases_pool_size", "Maximum number of server connections" },
	{ 7, "pgbouncer_databases_reserve_pool", "Maximum number of additional connections for this database" },
	{ 11, "pgbouncer_databases_max_connections", "Maximum number of allowed connections for this database" },
	{ 12, "pgbouncer_databases_current_connections", "Current number of connections for this database" },
	{ 15, "pgbouncer_databases_paused", "1 if this database is currently paused, else 0" },
	{ 16, "pgbouncer_databases_disabled", "1 if this database is currently disabled, else 0" },
};

static const struct {
	const char *list, *name, *help;
} list_gauges[] = {
	{ "databases", "pgbouncer_databases", "Count of databases" },
	{ "users", "pgbouncer_users", "Count of users" },
	{ "pools", "pgbouncer_pools", "Count of pools" },
	{ "free_clients", "pgbouncer_free_clients", "Count of free clients" },
	{ "used_clients", "pgbouncer_used_clients", "Count of used clients" },
	{ "login_clients", "pgbouncer_login_clients", "Count of clients in login state" },
	{ "free_servers", "pgbouncer_free_servers", "Count of free servers" },
	{ "used_servers", "pgbouncer_used_servers", "Count of used servers" },
	{ "dns_names", "pgbouncer_cached_dns_names", "Count of DNS names in the cache" },
	{ "dns_zones", "pgbouncer_cached_dns_zones", "Count of DNS zones in the cache" },
	{ "dns_queries", "pgbouncer_in_flight_dns_queries", "Count of in-flight DNS queries" },
};

static const char *cell(const struct rowset *rs, int row, int col)
{
	if (col >= rs->ncols || !rs->rows[row][col])
		return "";
	return rs->rows[row][col];
}

/* A gauge's value column must be an integer; anything else is skipped. */
static bool is_int(const char *v)
{
	if (*v == '-')
		v++;
	if (!*v)
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

static void pool_labels(const struct rowset *rs, int r, char *out, size_t len)
{
	char db[160], user[160];
	esc(cell(rs, r, 0), db, sizeof(db));
	esc(cell(rs, r, 1), user, sizeof(user));
	snprintf(out, len, "database=\"%s\",user=\"%s\"", db, user);
}

static void db_labels(const struct rowset *rs, int r, char *out, size_t len)
{
	static const struct { int col; const char *label; } cols[] = {
		{ 0, "name" }, { 1, "host" }, { 2, "port" }, { 3, "database" }, { 4, "force_user" }, { 9, "pool_mode" },
	};
	size_t o = 0;
	char v[160];
	out[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(cols) && o < len; i++) {
		esc(cell(rs, r, cols[i].col), v, sizeof(v));
		o += (size_t)snprintf(out + o, len - o, "%s%s=\"%s\"", i ? "," : "", cols[i].label, v);
	}
}

static void render_gauges(struct evbuffer *b, const struct rowset *rs, const struct gauge_col *g, size_t n,
			  void (*labels)(const struct rowset *, int, char *, size_t))
{
	char l[1024];
	for (size_t k = 0; k < n; k++) {
		family(b, g[k].name, "gauge", g[k].help);
		for (int r = 0; r < rs->nrows; r++) {
			const char *v = cell(rs, r, g[k].col);
			if (!is_int(v))
				continue;
			labels(rs, r, l, sizeof(l));
			evbuffer_add_printf(b, "%s{%s} %s\n", g[k].name, l, v);
		}
	}
}

/* SHOW POOLS maxwait + maxwait_us, in seconds. */
static void render_maxwait(struct evbuffer *b, const struct rowset *rs)
{
	char l[512], secs[32];
	family(b, "pgbouncer_pools_client_maxwait_seconds", "gauge", "Age of oldest unserved client connection, shown as second");
	for (int r = 0; r < rs->nrows; r++) {
		uint64_t us = strtoull(cell(rs, r, 13), NULL, 10) * 1000000 + strtoull(cell(rs, r, 14), NULL, 10);
		pool_labels(rs, r, l, sizeof(l));
		fmt_seconds(us, secs, sizeof(secs));
		evbuffer_add_printf(b, "pgbouncer_pools_client_maxwait_seconds{%s} %s\n", l, secs);
	}
}

static void render_lists(struct evbuffer *b, const struct rowset *rs)
{
	for (size_t k = 0; k < ARRAY_SIZE(list_gauges); k++) {
		for (int r = 0; r < rs->nrows; r++) {
			if (strcmp(cell(rs, r, 0), list_gauges[k].list) != 0 || !is_int(cell(rs, r, 1)))
				continue;
			family(b, list_gauges[k].name, "gauge", list_gauges[k].help);
			evbuffer_add_printf(b, "%s %s\n", list_gauges[k].name, cell(rs, r, 1));
			break;
		}
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The exporter's server count: SHOW SERVERS rows grouped by user,
 * database, state, addr_port and close_needed. */
static void render_servers(struct evbuffer *b, const struct rowset *rs)
{
	char u[160], d[160], st[64], a[160], l[640];
	char **keys = xcalloc((size_t)(rs->nrows ? rs->nrows : 1), sizeof(char *));
	for (int r = 0; r < rs->nrows; r++) {
		esc(cell(rs, r, 1), u, sizeof(u));
		esc(cell(rs, r, 2), d, sizeof(d));
		esc(cell(rs, r, 4), st, sizeof(st));
		esc(cell(rs, r, 5), a, sizeof(a));
		snprintf(l, sizeof(l), "user=\"%s\",database=\"%s\",state=\"%s\",addr=\"%s_%s\",close_needed=\"%s\"",
			 u, d, st, a, cell(rs, r, 6), strcmp(cell(rs, r, 13), "1") == 0 ? "true" : "false");
		keys[r] = xstrdup(l);
	}
	qsort(keys, (size_t)rs->nrows, sizeof(char *), cmp_str);
	family(b, "pgbouncer_server_connections", "gauge", "Server connections with state information");
	for (int r = 0, n = 1; r < rs->nrows; r++, n++) {
		if (r + 1 < rs->nrows && strcmp(keys[r], keys[r + 1]) == 0)
			continue;
		evbuffer_add_printf(b, "pgbouncer_server_connections{%s} %d\n", keys[r], n);
		n = 0;
	}
	for (int r = 0; r < rs->nrows; r++)
		free(keys[r]);
	free(keys);
}

static void render(struct evbuffer *b, const struct scrape *s)
{
	const struct config *cfg = m.src->config();
	family(b, "pgbouncer_up", "gauge", "The pgbouncer scrape succeeded");
	evbuffer_add_printf(b, "pgbouncer_up %d\n", s->failed ? 0 : 1);
	family(b, "pgbouncer_version_info", "gauge", "The pgbouncer version info");
	evbuffer_add_printf(b, "pgbouncer_version_info{version=\"%s\"} 1\n", PACKAGE_NAME " " PACKAGE_VERSION);
	family(b, "pgbouncer_config_max_client_connections", "gauge", "Config maximum number of client connections");
	evbuffer_add_printf(b, "pgbouncer_config_max_client_connections %d\n", cfg->max_client_conn);
	family(b, "pgbouncer_config_max_user_connections", "gauge", "Config maximum number of server connections per user");
	evbuffer_add_printf(b, "pgbouncer_config_max_user_connections %d\n", cfg->max_user_connections);
	if (!s->failed) {
		render_gauges(b, &s->parts[V_POOLS].rows, pool_gauges, ARRAY_SIZE(pool_gauges), pool_labels);
		render_maxwait(b, &s->parts[V_POOLS].rows);
		render_gauges(b, &s->parts[V_DATABASES].rows, db_gauges, ARRAY_SIZE(db_gauges), db_labels);
		render_lists(b, &s->parts[V_LISTS].rows);
		render_servers(b, &s->parts[V_SERVERS].rows);
	}
	render_stats(b);
	render_histograms(b);
	render_workers(b);
	render_logins(b);
	render_tables(b);
}

/* ---- scrapes ---- */

static void scrape_reply(struct scrape *s)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		fatal("out of memory");
	render(b, s);
	struct evkeyvalq *h = evhttp_request_get_output_headers(s->req);
	evhttp_add_header(h, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(s->req, HTTP_OK, "OK", b);
	evbuffer_free(b);
	s->req = NULL;
}

static void scrape_free(struct scrape *s)
{
	list_del(&s->node);
	for (int v = 0; v < N_VIEWS; v++)
		rowset_free(&s->parts[v].rows);
	if (s->timer)
		event_free(s->timer);
	free(s);
}

static void on_part(void *arg, const void *data, size_t len)
{
	struct scrape_part *p = arg;
	if (!rowset_add(&p->rows, data, len))
		p->bad = true;
}

static void on_done(void *arg, const char *err)
{
	struct scrape_part *p = arg;
	struct scrape *s = p->s;
	if (err[0] || p->bad) {
		log_warning("metrics: %s from the workers failed: %s", view_cmd[p - s->parts],
			    err[0] ? err : "unreadable rows");
		s->failed = true;
	}
	if (--s->pending > 0)
		return;
	if (s->req)
		scrape_reply(s);
	scrape_free(s);
}

/* A worker that does not answer must not hold the scraper forever. */
static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct scrape *s = arg;
	if (!s->req)
		return;
	log_warning("metrics: workers did not answer within %d s", SCRAPE_TIMEOUT_SEC);
	evhttp_send_error(s->req, HTTP_SERVUNAVAIL, "workers did not answer");
	s->req = NULL;
}

static void scrape_start(struct evhttp_request *req)
{
	struct timeval tv = { SCRAPE_TIMEOUT_SEC, 0 };
	struct scrape *s = xcalloc(1, sizeof(*s));
	s->req = req;
	s->pending = N_VIEWS;
	s->timer = evtimer_new(m.base, on_timeout, s);
	evtimer_add(s->timer, &tv);
	list_append(&m.scrapes, &s->node);
	for (int v = 0; v < N_VIEWS; v++) {
		s->parts[v].s = s;
		rowset_init(&s->parts[v].rows, admin_view_rule(view_name[v]));
	}
	/* on_done may finish (and free) the scrape inside the last call. */
	for (int v = 0; v < N_VIEWS; v++)
		m.src->fanout(view_cmd[v], on_part, on_done, &s->parts[v]);
}

/* ---- probes: /healthz and /readyz ----
 * Answered from shared memory and the supervisor's own state, with no
 * message to a worker: a probe every second costs a few loads, and a
 * stopped worker cannot hold it up (it is what the probe must find). */

static void whyf(char *why, size_t len, const char *fmt, ...) PRINTF(3, 4);
static void whyf(char *why, size_t len, const char *fmt, ...)
{
	size_t o = strlen(why);
	va_list ap;
	if (o >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(why + o, len - o, fmt, ap);
	va_end(ap);
}

/* A worker whose loop ran (it stamped its cell) and has not since within
 * stale_usec is hung: stopped, spinning or blocked. One that has not
 * stamped yet is starting (or being restarted): not a hang. */
static bool worker_hung(int w, usec_t now, char *why, size_t len, unsigned *flags)
{
	usec_t beat = shm_health_of(w, flags);
	if (beat == 0 || now - beat <= METRICS_STALE_USEC)
		return false;
	whyf(why, len, "worker %d: no heartbeat for %.1f s\n", w, (double)(now - beat) / USEC_PER_SEC);
	return true;
}

bool metrics_healthy(const struct metrics_source *src, usec_t now, char *why, size_t len)
{
	bool ok = true;
	unsigned flags;
	(void)src;
	why[0] = 0;
	for (int w = 0; w < shm_n_workers(); w++)
		if (worker_hung(w, now, why, len, &flags))
			ok = false;
	return ok;
}

bool metrics_ready(const struct metrics_source *src, usec_t now, char *why, size_t len)
{
	bool ok = true, down = src->shutting_down && src->shutting_down();
	unsigned flags;
	why[0] = 0;
	for (int w = 0; w < shm_n_workers(); w++) {
		if (worker_hung(w, now, why, len, &flags)) {
			ok = false;
		} else if (src->worker_ready && !src->worker_ready(w)) {
			if (!down)
				whyf(why, len, "worker %d: not running\n", w);
			ok = false;
		} else if (shm_health_of(w, &flags) == 0) {
			whyf(why, len, "worker %d: starting\n", w);
			ok = false;
		}
		down |= (flags & SHM_HEALTH_SHUTDOWN) != 0;
		if (flags & SHM_HEALTH_PAUSED) {
			whyf(why, len, "worker %d: paused\n", w);
			ok = false;
		}
	}
	if (down) {
		whyf(why, len, "shutting down\n");
		ok = false;
	}
	return ok;
}

static void probe_reply(struct evhttp_request *req, bool ok, const char *why)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		fatal("out of memory");
	evbuffer_add_printf(b, "%s", ok ? "ok\n" : why);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; charset=utf-8");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, ok ? HTTP_OK : HTTP_SERVUNAVAIL, ok ? "OK" : "Service Unavailable", b);
	evbuffer_free(b);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	char why[1024];
	bool health = path && strcmp(path, "/healthz") == 0, ready = path && strcmp(path, "/readyz") == 0;
	if (!path || (strcmp(path, "/metrics") != 0 && !health && !ready)) {
		evhttp_send_error(req, HTTP_NOTFOUND, NULL);
		return;
	}
	if (cmd != EVHTTP_REQ_GET && !((health || ready) && cmd == EVHTTP_REQ_HEAD)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", health || ready ? "GET, HEAD" : "GET");
		evhttp_send_error(req, 405, "Method Not Allowed");
		return;
	}
	if (health)
		probe_reply(req, metrics_healthy(m.src, util_monotonic(), why, sizeof(why)), why);
	else if (ready)
		probe_reply(req, metrics_ready(m.src, util_monotonic(), why, sizeof(why)), why);
	else
		scrape_start(req);
}

/* ---- listener ---- */

static int bind_listener(void)
{
	const char *addr = strcmp(m.host, "*") == 0 ? "0.0.0.0" : m.host;
	m.sock = evhttp_bind_socket_with_handle(m.http, addr, (uint16_t)m.port);
	if (!m.sock)
		return -1;
	log_info("metrics: listening on %s:%d (GET /metrics, /healthz, /readyz)", m.host, m.port);
	return 0;
}

/* -R: the old process lets go of the port once our workers run. */
static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, RETRY_USEC };
	if (bind_listener() == 0)
		return;
	if (++m.tries < RETRY_TRIES)
		event_add(m.retry, &tv);
	else
		log_msg_errno(LG_ERROR, "metrics: could not bind %s:%d; no metrics endpoint", m.host, m.port);
}

int metrics_start(struct event_base *base, const struct config *cfg, const struct metrics_source *src,
		  bool retry)
{
	if (!cfg->metrics_listen[0])
		return 0;
	m.src = src;
	if (value_parse_hostport(cfg->metrics_listen, m.host, sizeof(m.host), &m.port) < 0)
		return -1;              /* the config check refused it already */
	m.base = base;
	list_init(&m.scrapes);
	m.http = evhttp_new(base);
	if (!m.http)
		fatal("evhttp_new failed");
	m.started = true;
	evhttp_set_timeout(m.http, 10);
	evhttp_set_max_headers_size(m.http, 8192);
	evhttp_set_max_body_size(m.http, 4096);
	evhttp_set_gencb(m.http, on_request, NULL);
	if (bind_listener() == 0)
		return 0;
	if (retry && errno == EADDRINUSE) {
		struct timeval tv = { 0, RETRY_USEC };
		m.retry = evtimer_new(base, on_retry, NULL);
		event_add(m.retry, &tv);
		return 0;
	}
	log_msg_errno(LG_ERROR, "metrics: could not bind metrics_listen %s", cfg->metrics_listen);
	return -1;
}

void metrics_close_listener(void)
{
	if (m.sock)
		evhttp_del_accept_socket(m.http, m.sock);
	m.sock = NULL;
	if (m.retry)
		event_del(m.retry);
}

void metrics_stop(void)
{
	if (!m.started)
		return;
	struct list *it;
	while ((it = list_first(&m.scrapes)) != NULL)
		scrape_free(container_of(it, struct scrape, node));
	if (m.retry)
		event_free(m.retry);
	evhttp_free(m.http);
	memset(&m, 0, sizeof(m));
}

/* Every inherited socket whose local port is the metrics port: the listener
 * and any scrape connection open at fork time. */
void metrics_close_in_child(void)
{
	if (!m.started)
		return;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	int dfd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name);
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		if (fd <= 2 || fd == dfd || getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
			continue;
		int port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port) :
			   ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) : -1;
		if (port == m.port)
			close(fd);
	}
	closedir(d);
}

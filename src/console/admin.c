/* pgcrew — the admin console (database "pgbouncer", alias "pgcrew"): login
 * checks against admin_users/stats_users, a simple-query command parser and
 * PgBouncer's SHOW views. With several workers a view or PAUSE/RESUME is
 * fanned out through the supervisor: every worker answers for itself and the
 * asking worker merges the rows (rowmerge.h) into the instance's view. */
#include "admin.h"
#include "hostrole.h"
#include "build-config.h"
#include "client.h"
#include "config.h"
#include "config/settings.h"
#include "admin_ext.h"
#include "admin_result.h"
#include "admin_sockets.h"
#include "control.h"
#include "dns.h"
#include "peer.h"
#include "authquery.h"
#include "config/userlist.h"
#include "cmdparse.h"
#include "connlog.h"
#include "pool.h"
#include "proto/build.h"
#include "proto/error.h"
#include "server.h"
#include "server_move.h"
#include "shm.h"
#include "stats.h"
#include "stream.h"
#include "ipc.h"
#include "log.h"
#include "rowmerge.h"
#include "tls.h"
#include "world.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>



static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		size_t k = strcspn(p, ", \t");
		if (k == n && strncmp(p, name, k) == 0)
			return true;
		p += k;
	}
	return false;
}

/* PgBouncer's rule: user "pgbouncer" connecting over the Unix socket from
 * the UID the pooler runs as gets the console without a password. */
static bool local_admin(const struct client *c)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	return c->is_unix && strcmp(c->user_name, "pgbouncer") == 0 &&
	       getsockopt(c->s.fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == geteuid();
}

/* Every console client shares PgBouncer's one console pool, listed in SHOW
 * POOLS as (pgbouncer, pgbouncer); NULL only when no user object is left. */
static struct pool *console_pool(struct client *c)
{
	struct puser *u = pool_get_user(c->world, c->db->forced_user);
	return u ? pool_get(c->db, u) : NULL;
}

void admin_client_login(struct client *c, const struct startup_msg *m)
{
	const struct config *cfg = c->world->cfg;
	c->local_admin = local_admin(c);
	bool admin = c->local_admin || in_list(cfg->admin_users, c->user_name);
	bool stats = in_list(cfg->stats_users, c->user_name);

	(void)m;
	/* PgBouncer's order: the user is looked up first (auth_file, else
	 * auth_query), and only a user that exists is told "not allowed";
	 * an unknown one fails authentication as anywhere else. */
	c->console_refused = !admin && !stats && cfg->auth_type != AUTH_ANY;   /* any: stats access */
	c->db = pool_admin_db(c->world);
	if (!c->db) {
		client_close(c, true, "no such database: pgbouncer");
		return;
	}
	c->login_user = pool_find_user(c->world, c->user_name);
	if (!c->login_user && (cfg->auth_type == AUTH_ANY || c->local_admin))
		c->login_user = pool_get_user(c->world, c->user_name);
	c->stats_only = !admin;
	if (!c->login_user && authquery_applies(c)) {
		authquery_start(c);       /* client_login_found counts and authenticates */
		return;
	}
	if (c->login_user && c->console_refused) {
		client_close_sqlstate(c, "08P01", "not allowed");
		return;
	}
	if (c->login_user)
		client_set_pool(c, console_pool(c));
	if (!client_count_console(c, admin))
		return;
	client_start_auth(c);
}

void admin_welcome(struct client *c)
{
	struct pktbuf pb;
	if (!c->pool) {
		client_close_sqlstate(c, "28P01", "password authentication failed");
		return;
	}
	if (c->console_refused) {
		client_close_sqlstate(c, "08P01", "not allowed");
		return;
	}
	pktbuf_init(&pb, 512);
	pkt_write_auth_ok(&pb);
	pkt_write_parameter_status(&pb, "server_version", PACKAGE_VERSION "/pgcrew");
	pkt_write_parameter_status(&pb, "server_encoding", "UTF8");
	pkt_write_parameter_status(&pb, "client_encoding", "UTF8");
	pkt_write_parameter_status(&pb, "DateStyle", "ISO");
	pkt_write_parameter_status(&pb, "TimeZone", "GMT");
	pkt_write_parameter_status(&pb, "standard_conforming_strings", "on");
	pkt_write_parameter_status(&pb, "integer_datetimes", "on");
	pkt_write_parameter_status(&pb, "application_name", "pgcrew");
	struct cancelkey k;
	cancelkey_from_own(&k, &c->key);
	pkt_write_backend_key(&pb, &k);
	client_put_login_notice(c, &pb);
	pkt_write_ready(&pb, 'I');
	bool ok = stream_write(&c->s, &pb);
	pktbuf_free(&pb);
	if (!ok) {
		client_close(c, false, "send failed");
		return;
	}
	c->admin = true;
	c->s.startup = false;
	client_set_state(c, CLIENT_ACTIVE);
	stream_resume(&c->s);
}

/* ---- result building (admin_result.h) ---- */

void res_begin(struct result *r, const char *const *names, const int *types, int n)
{
	pktbuf_init(&r->pb, 1024);
	r->ncols = n;
	r->nrows = 0;
	pktbuf_begin(&r->pb, 'T');
	pktbuf_put_u16(&r->pb, (uint16_t)n);
	for (int i = 0; i < n; i++) {
		pktbuf_put_string(&r->pb, names[i]);
		pktbuf_put_u32(&r->pb, 0);
		pktbuf_put_u16(&r->pb, 0);
		pktbuf_put_u32(&r->pb, (uint32_t)types[i]);
		pktbuf_put_u16(&r->pb, types[i] == OID_INT8 ? 8 : types[i] == OID_INT4 ? 4 : 0xffff);
		pktbuf_put_u32(&r->pb, 0xffffffff);
		pktbuf_put_u16(&r->pb, 0);
	}
	pktbuf_finish(&r->pb);
}

/* fmt: one char per column: s = string (NULL = SQL NULL), i = int, q = uint64 */
void res_row(struct result *r, const char *fmt, ...)
{
	va_list ap;
	char num[32];
	va_start(ap, fmt);
	pktbuf_begin(&r->pb, 'D');
	pktbuf_put_u16(&r->pb, (uint16_t)strlen(fmt));
	for (const char *f = fmt; *f; f++) {
		const char *v = num;
		if (*f == 's')
			v = va_arg(ap, const char *);
		else if (*f == 'i')
			snprintf(num, sizeof(num), "%d", va_arg(ap, int));
		else
			snprintf(num, sizeof(num), "%llu", (unsigned long long)va_arg(ap, uint64_t));
		if (!v) {
			pktbuf_put_u32(&r->pb, 0xffffffff);
			continue;
		}
		pktbuf_put_u32(&r->pb, (uint32_t)strlen(v));
		pktbuf_put_bytes(&r->pb, v, strlen(v));
	}
	pktbuf_finish(&r->pb);
	va_end(ap);
	r->nrows++;
}

static void send_command_complete(struct client *c, const char *tag)
{
	struct pktbuf pb;
	pktbuf_init(&pb, 64);
	pktbuf_begin(&pb, 'C');
	pktbuf_put_string(&pb, tag);
	pktbuf_finish(&pb);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

/* Set by every console error: the extended protocol then skips to Sync. */
static bool cmd_failed;

/* An ErrorResponse as PgBouncer's send_pooler_error writes it (logged as
 * a pooler error of c with log_pooler_errors). */
static void send_admin_error_code(struct client *c, const char *sqlstate, const char *msg)
{
	struct pktbuf pb;
	cmd_failed = true;
	if (c->world->cfg->log_pooler_errors)
		log_client(c, LG_WARNING, "pooler error: %s", msg);
	pktbuf_init(&pb, 128 + strlen(msg));
	pkt_write_error(&pb, "ERROR", sqlstate, "%s", msg);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

/* PgBouncer's admin_error: the text is logged, then sent (08P01). Never
 * cut short: a syntax error quotes the whole query. */
static void PRINTF(2, 3) send_admin_error(struct client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *msg = xmalloc((size_t)(n > 0 ? n : 0) + 1);
	va_start(ap, fmt);
	vsnprintf(msg, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	send_admin_error_code(c, "08P01", msg);
	free(msg);
}

/* A NoticeResponse with PgBouncer's fields: S, C, M and, if given, D. */
static void send_notice(struct client *c, const char *msg, const char *detail)
{
	struct pktbuf pb;
	pktbuf_init(&pb, 128 + (detail ? strlen(detail) : 0));
	pktbuf_begin(&pb, 'N');
	pktbuf_put_u8(&pb, 'S');
	pktbuf_put_string(&pb, "NOTICE");
	pktbuf_put_u8(&pb, 'C');
	pktbuf_put_string(&pb, "00000");
	pktbuf_put_u8(&pb, 'M');
	pktbuf_put_string(&pb, msg);
	if (detail) {
		pktbuf_put_u8(&pb, 'D');
		pktbuf_put_string(&pb, detail);
	}
	pktbuf_put_u8(&pb, 0);
	pktbuf_finish(&pb);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

/* ---- SHOW views ---- */

static void view_version(struct result *r)
{
	res_begin(r, COLS("version"), TYPES(OID_TEXT), 1);
	res_row(r, "s", PACKAGE_NAME " " PACKAGE_VERSION);
}

/* PgBouncer's text, word for word (pgcrew's own views, WORKERS, HOSTS and
 * PROTOCOLS, are in doc/admin.md). */
static void show_help(struct client *c)
{
	send_notice(c, "Console usage",
		    "\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION\n"
		    "\tSHOW PEERS|PEER_POOLS\n"
		    "\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE\n"
		    "\tSHOW DNS_HOSTS|DNS_ZONES\n"
		    "\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS\n"
		    "\tSET key = arg\n"
		    "\tRELOAD\n"
		    "\tPAUSE [<db>]\n"
		    "\tRESUME [<db>]\n"
		    "\tDISABLE <db>\n"
		    "\tENABLE <db>\n"
		    "\tRECONNECT [<db>]\n"
		    "\tKILL [<db>]\n"
		    "\tKILL_CLIENT <client_id>\n"
		    "\tSUSPEND\n"
		    "\tSHUTDOWN\n"
		    "\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS\n"
		    "\tWAIT_CLOSE [<db>]");
	send_command_complete(c, "SHOW");
}

static int maxwait_us(const struct pool *p, usec_t now)
{
	struct list *it = list_first(&p->waiting_clients);
	if (!it)
		return 0;
	const struct client *c = container_of(it, struct client, node);
	return (int)(now - c->request_time);
}

/* Idle servers due for server_check_query count as sv_used, as in
 * PgBouncer, until checked. */
static int n_stale(const struct pool *p)
{
	int n = 0;
	const struct list *it;
	list_for_each(it, &p->idle_servers)
		n += pool_server_stale(container_of(it, struct server, node));
	return n;
}

static void view_pools(struct result *r)
{
	usec_t now = util_monotonic();
	struct list *it;
	res_begin(r, COLS("database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req",
			   "cl_waiting_cancel_req", "sv_active", "sv_active_cancel", "sv_being_canceled",
			   "sv_idle", "sv_used", "sv_tested", "sv_login", "maxwait", "maxwait_us",
			   "pool_mode", "load_balance_hosts"),
		  TYPES(OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4,
			OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_TEXT, OID_TEXT), 17);
	list_for_each(it, &r->world->pools) {
		struct pool *p = container_of(it, struct pool, node);
		int mw = maxwait_us(p, now), used = n_stale(p);
		res_row(r, "ssiiiiiiiiiiiiiss", p->db->name, p->user->name, p->n_active_clients,
			p->n_waiting_clients, 0, 0, p->n_active, 0, p->n_canceled, p->n_idle - used, used,
			p->n_tested,
			p->n_login, mw / 1000000, mw % 1000000,
			pool_mode_name((enum pool_mode)pool_mode_of(p)),
			p->db->n_hosts > 1 ? (p->db->load_balance ? "round-robin" : "disable") : NULL);
	}
}

void admin_fmt_time(char *buf, size_t len, usec_t mono)
{
	time_t t = (time_t)((util_realtime() - (util_monotonic() - mono)) / USEC_PER_SEC);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm);
}

static void view_databases(struct result *r)
{
	struct list *it;
	res_begin(r, COLS("name", "host", "port", "database", "force_user", "pool_size", "min_pool_size",
			   "reserve_pool_size", "server_lifetime", "pool_mode", "load_balance_hosts",
			   "max_connections", "current_connections", "max_client_connections",
			   "current_client_connections", "paused", "disabled"),
		  TYPES(OID_TEXT, OID_TEXT, OID_INT4, OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_INT4,
			OID_INT4, OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4), 17);
	list_for_each(it, &r->world->databases) {
		const struct database *db = container_of(it, struct database, node);
		if (db->dead)
			continue;
		usec_t life = db->server_lifetime >= 0 ? db->server_lifetime : r->world->cfg->server_lifetime;
		res_row(r, "ssissiiiissiiiiii", db->name,
			db->admin ? NULL : (db->hosts[0] ? db->hosts[0] : NULL), db->admin ? r->world->cfg->listen_port : db->port,
			db->admin ? "pgbouncer" : db->dbname, db->forced_user,
			db->pool_size >= 0 ? db->pool_size : r->world->cfg->default_pool_size, db->min_pool_size,
			db->reserve_pool_size >= 0 ? db->reserve_pool_size : r->world->cfg->reserve_pool_size,
			(int)(life / USEC_PER_SEC), db->pool_mode >= 0 ? pool_mode_name((enum pool_mode)db->pool_mode) : NULL,
			db->n_hosts > 1 ? (db->load_balance ? "round-robin" : "disable") : NULL,
			db->max_db_connections, db->n_servers,
			db->admin ? r->world->cfg->max_db_client_connections : db->max_db_client_connections, db->n_clients,
			db->paused ? 1 : 0, db->disabled ? 1 : 0);
	}
}

/* PgBouncer's SHOW USERS gives a user's own pool sizes as text, right
 * aligned in nine characters, and "" when the user has none. */
static const char *size_text(char *buf, size_t len, int size)
{
	if (size < 0)
		return "";
	snprintf(buf, len, "%9d", size);
	return buf;
}

static void user_row(struct result *r, const struct puser *u)
{
	char ps[16], rps[16];
	res_row(r, "ssssiiii", u->name, size_text(ps, sizeof(ps), u->pool_size),
		size_text(rps, sizeof(rps), u->reserve_pool_size),
		u->pool_mode >= 0 ? pool_mode_name((enum pool_mode)u->pool_mode) : NULL,
		u->max_user_connections, u->n_servers, u->max_user_client_connections, u->n_clients);
}

/* A user of auth_file or [users] this worker has not met yet: its row as
 * it would be (PgBouncer lists every user it has loaded). */
static void unmet_user_row(struct result *r, const char *name)
{
	struct puser u;
	if (pool_find_user_here(r->world, name))
		return;
	pool_user_defaults(r->world, &u, name);
	user_row(r, &u);
	pool_user_clear(&u);
}

static void view_users(struct result *r)
{
	struct list *it;
	size_t pos = 0;
	const char *name;
	res_begin(r, COLS("name", "pool_size", "reserve_pool_size", "pool_mode", "max_user_connections",
			   "current_connections", "max_user_client_connections", "current_client_connections"),
		  TYPES(OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_INT4, OID_INT4), 8);
	list_for_each(it, &r->world->users)
		user_row(r, container_of(it, struct puser, node));
	while ((name = userlist_name_at(r->world->cfg->userlist, &pos)) != NULL)
		unmet_user_row(r, name);
	for (int i = 0; i < r->world->cfg->n_users; i++)
		if (!r->world->cfg->userlist || !userlist_find(r->world->cfg->userlist, r->world->cfg->users[i].name))
			unmet_user_row(r, r->world->cfg->users[i].name);
}

static void view_config(struct result *r)
{
	char val[1024];
	res_begin(r, COLS("key", "value", "default", "changeable"),
		  TYPES(OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT), 4);
	for (size_t i = 0; i < settings_count(); i++) {
		const struct setting *s = settings_get(i);
		setting_format(r->world->cfg, s, val, sizeof(val));
		res_row(r, "ssss", setting_name(s), val, setting_default(s), setting_reloadable(s) ? "yes" : "no");
	}
}

static void view_lists(struct result *r)
{
	int n_db = 0, n_users = 0, n_pools = 0, free_cl = 0, used_cl = 0, login = 0, used_sv = 0;
	struct list *it;
	list_for_each(it, &r->world->databases) n_db++;
	list_for_each(it, &r->world->users) n_users++;
	list_for_each(it, &r->world->pools) n_pools++;
	list_for_each(it, &r->world->all_clients) used_cl++;
	list_for_each(it, &r->world->login_clients) login++;
	list_for_each(it, &r->world->all_servers) used_sv++;
	res_begin(r, COLS("list", "items"), TYPES(OID_TEXT, OID_INT4), 2);
	res_row(r, "si", "databases", n_db);
	res_row(r, "si", "users", n_users);
	res_row(r, "si", "peers", r->world->cfg->n_peers);
	res_row(r, "si", "pools", n_pools);
	res_row(r, "si", "peer_pools", r->world->cfg->n_peers);
	res_row(r, "si", "free_clients", free_cl);
	res_row(r, "si", "used_clients", used_cl);
	res_row(r, "si", "login_clients", login);
	res_row(r, "si", "free_servers", 0);
	res_row(r, "si", "used_servers", used_sv);
	res_row(r, "si", "dns_names", (int)dns_cache_count());
	res_row(r, "si", "dns_zones", 0);
	res_row(r, "si", "dns_queries", (int)dns_pending_count());
	res_row(r, "si", "dns_pending", 0);
}

/* Statistics views. Arrays are in stats_to_array order: xact, query, in,
 * out, xact_time, query_time, wait_time, assignments, errors, client
 * parses, server parses, binds, client logins. */
enum stats_view { SV_STATS, SV_TOTALS, SV_AVERAGES };

static const int stats_order[] = { 7, 0, 1, 2, 3, 4, 5, 6 };  /* PgBouncer's column order */

static void stats_header(struct result *r, enum stats_view v)
{
	static const char *const base[] = {
		"server_assignment_count", "xact_count", "query_count", "received", "sent",
		"xact_time", "query_time", "wait_time", "client_parse_count",
		"server_parse_count", "bind_count", "client_login_count",
	};
	const char *names[1 + 2 * ARRAY_SIZE(base)];
	char buf[2 * ARRAY_SIZE(base)][48];
	int types[1 + 2 * ARRAY_SIZE(base)];
	int n = 0;

	names[n] = "database";
	types[n++] = OID_TEXT;
	for (int pass = 0; pass < 2; pass++) {
		bool avg = pass == 1;
		if ((v == SV_TOTALS && avg) || (v == SV_AVERAGES && !avg))
			continue;
		for (size_t k = 0; k < ARRAY_SIZE(base); k++) {
			const char *b = base[k];
			char *out = buf[pass * ARRAY_SIZE(base) + k];
			if (v == SV_STATS && avg && strcmp(b, "received") == 0)
				b = "recv";
			if (v == SV_STATS)
				snprintf(out, 48, "%s_%s", avg ? "avg" : "total", b);
			else if (strcmp(b, "received") == 0 || strcmp(b, "sent") == 0)
				snprintf(out, 48, "bytes_%s", b);
			else
				snprintf(out, 48, "%s", b);
			names[n] = out;
			types[n++] = OID_INT8;
		}
	}
	res_begin(r, names, types, n);
}

static void stats_values(struct result *r, enum stats_view v, const char *name,
			 const uint64_t tot[SHM_STATS], const uint64_t avg[SHM_STATS])
{
	char fmt[32];
	uint64_t vals[24];
	int n = 0;
	for (int pass = 0; pass < 2; pass++) {
		const uint64_t *src = pass ? avg : tot;
		if ((v == SV_TOTALS && pass) || (v == SV_AVERAGES && !pass))
			continue;
		for (size_t k = 0; k < ARRAY_SIZE(stats_order); k++)
			vals[n++] = src[stats_order[k]];
		for (int k = 9; k < 13; k++)      /* client/server parses, binds, logins */
			vals[n++] = src[k];
	}
	/* res_row takes varargs: one row of 1 + n columns. */
	fmt[0] = 's';
	memset(fmt + 1, 'q', (size_t)n);
	fmt[1 + n] = 0;
	if (n == 12)
		res_row(r, fmt, name, vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6],
			vals[7], vals[8], vals[9], vals[10], vals[11]);
	else
		res_row(r, fmt, name, vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6],
			vals[7], vals[8], vals[9], vals[10], vals[11], vals[12], vals[13], vals[14],
			vals[15], vals[16], vals[17], vals[18], vals[19], vals[20], vals[21], vals[22],
			vals[23]);
}

/* Every database's totals (shared memory: every worker, dead ones too). */
static void stats_rows(struct result *r, enum stats_view v)
{
	char name[NAME_MAX_LEN];
	uint64_t t[SHM_STATS], a[SHM_STATS];

	stats_flush(r->world);
	stats_header(r, v);
	uint32_t high = shm_names_high();
	for (uint32_t j = 0; j < high; j++) {
		int i = (int)j;
		if (!shm_name_at(i, SHM_DB, name, sizeof(name), NULL))
			continue;
		shm_stats_total(i, t);
		stats_avg_get(i, a);
		struct database *db = pool_find_db(r->world, name);
		bool any = false;
		for (int k = 0; k < SHM_STATS; k++)
			any |= t[k] != 0;
		if (any || (db && !db->dead))
			stats_values(r, v, name, t, a);
	}
}

static void view_stats(struct result *r) { stats_rows(r, SV_STATS); }
static void view_stats_totals(struct result *r) { stats_rows(r, SV_TOTALS); }
static void view_stats_averages(struct result *r) { stats_rows(r, SV_AVERAGES); }

/* SHOW TOTALS: SHOW STATS summed over databases, as name/value rows. */
static void view_totals(struct result *r)
{
	static const char *const names[] = {
		"server_assignment_count", "xact_count", "query_count", "received", "sent",
		"xact_time", "query_time", "wait_time",
	};
	char name[NAME_MAX_LEN], key[64];
	uint64_t t[SHM_STATS], a[SHM_STATS], tot[SHM_STATS] = { 0 }, avg[SHM_STATS] = { 0 };
	uint64_t weight[SHM_STATS] = { 0 };

	stats_flush(r->world);
	uint32_t high = shm_names_high();
	for (uint32_t j = 0; j < high; j++) {
		int i = (int)j;
		if (!shm_name_at(i, SHM_DB, name, sizeof(name), NULL))
			continue;
		shm_stats_total(i, t);
		stats_avg_get(i, a);
		for (int k = 0; k < SHM_STATS; k++)
			tot[k] += t[k];
		/* Rates add up; per-event times are weighted by their event rate. */
		for (int k = 0; k < SHM_STATS; k++)
			avg[k] += a[k];
		weight[4] += a[4] * a[0];
		weight[5] += a[5] * a[1];
		weight[6] += a[6] * a[7];
	}
	avg[4] = avg[0] ? weight[4] / avg[0] : 0;
	avg[5] = avg[1] ? weight[5] / avg[1] : 0;
	avg[6] = avg[7] ? weight[6] / avg[7] : 0;
	if (!shm_avg_ready())
		stats_avg_since_start(tot, avg);
	res_begin(r, COLS("name", "value"), TYPES(OID_TEXT, OID_INT8), 2);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
			const char *b = names[k];
			if (pass && strcmp(b, "received") == 0)
				b = "recv";
			snprintf(key, sizeof(key), "%s_%s", pass ? "avg" : "total", b);
			res_row(r, "sq", key, (pass ? avg : tot)[stats_order[k]]);
		}
		/* PgBouncer's development branch: every login, the console's
		 * included, as in SHOW STATS summed over the databases. */
		res_row(r, "sq", pass ? "avg_client_login_count" : "total_client_login_count",
			(pass ? avg : tot)[ST_CLIENT_LOGIN]);
	}
}

static void view_state(struct result *r)
{
	res_begin(r, COLS("key", "value"), TYPES(OID_TEXT, OID_TEXT), 2);
	enum ctl_pause mode = control_pause_mode(r->world);
	res_row(r, "ss", "active", mode == CTL_RUNNING ? "yes" : "no");
	res_row(r, "ss", "paused", mode == CTL_PAUSED ? "yes" : "no");
	res_row(r, "ss", "suspended", mode == CTL_SUSPENDED ? "yes" : "no");
}

static void dns_row(void *arg, const char *host, int64_t ttl_left_usec, const char *addrs)
{
	res_row(arg, "sqs", host, (uint64_t)(ttl_left_usec > 0 ? ttl_left_usec / USEC_PER_SEC : 0), addrs);
}

static void view_dns_hosts(struct result *r)
{
	res_begin(r, COLS("hostname", "ttl", "addrs"), TYPES(OID_TEXT, OID_INT8, OID_TEXT), 3);
	(void)dns_cache_foreach(dns_row, r);
}

static void view_dns_zones(struct result *r)
{
	/* dns_zone_check_period is not used: c-ares has no SOA polling here. */
	res_begin(r, COLS("zonename", "serial", "count"), TYPES(OID_TEXT, OID_INT8, OID_INT4), 3);
}

static void view_peers(struct result *r)
{
	const struct config *cfg = r->world->cfg;
	res_begin(r, COLS("peer_id", "host", "port", "pool_size"),
		  TYPES(OID_INT4, OID_TEXT, OID_INT4, OID_INT4), 4);
	for (int i = 0; i < cfg->n_peers; i++) {
		const struct peer_def *p = &cfg->peers[i];
		res_row(r, "isii", p->peer_id, p->host, p->port,
			p->pool_size >= 0 ? p->pool_size : cfg->default_pool_size);
	}
}

/* pgcrew: each database's hosts with their last known role (as its
 * servers reported it) and target_session_attrs; SHOW DATABASES and SHOW
 * SERVERS keep PgBouncer's columns. */
static void view_hosts(struct result *r)
{
	struct list *it;
	usec_t now = util_monotonic();
	res_begin(r, COLS("database", "host", "port", "target_session_attrs", "role", "skipped_ms"),
		  TYPES(OID_TEXT, OID_TEXT, OID_INT4, OID_TEXT, OID_TEXT, OID_INT8), 6);
	list_for_each(it, &r->world->databases) {
		struct database *db = container_of(it, struct database, node);
		if (db->admin || db->dead)
			continue;
		for (int h = 0; h < db->n_hosts; h++) {
			usec_t until = hostrole_skipped_until(db, h);
			res_row(r, "ssissq", db->name, db->hosts[h] ? db->hosts[h] : "", db->port,
				tsa_name(hostrole_tsa(db)), host_role_name(hostrole_get(db, h)),
				(uint64_t)(until > now ? (until - now) / USEC_PER_MSEC : 0));
		}
	}
}

static void view_peer_pools(struct result *r)
{
	const struct config *cfg = r->world->cfg;
	res_begin(r, COLS("peer_id", "cl_active_cancel_req", "cl_waiting_cancel_req", "sv_active_cancel",
			  "sv_login"),
		  TYPES(OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4), 5);
	for (int i = 0; i < cfg->n_peers; i++) {
		int connecting, active;
		peer_counts(cfg->peers[i].peer_id, &connecting, &active);
		res_row(r, "iiiii", cfg->peers[i].peer_id, connecting + active, 0, active, connecting);
	}
}

static void view_workers(struct result *r)
{
	struct rusage ru;
	int n_servers = 0, n_pools = 0;
	struct list *it;
	list_for_each(it, &r->world->all_servers) n_servers++;
	list_for_each(it, &r->world->pools) n_pools++;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t in, out, batches, ops;
	server_moves(&in, &out);
	stream_batch_counts(&batches, &ops);
	res_begin(r, COLS("worker", "pid", "clients", "servers", "pools", "cpu_user_ms", "cpu_system_ms",
			  "restarts", "servers_moved_in", "servers_moved_out", "io_uring", "io_batches",
			  "io_batched_ops"),
		  TYPES(OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT8, OID_INT8, OID_INT4,
			OID_INT8, OID_INT8, OID_TEXT, OID_INT8, OID_INT8), 13);
	res_row(r, "iiiiiqqiqqsqq", r->world->id, (int)getpid(), r->world->n_clients, n_servers, n_pools,
		(uint64_t)ru.ru_utime.tv_sec * 1000 + (uint64_t)ru.ru_utime.tv_usec / 1000,
		(uint64_t)ru.ru_stime.tv_sec * 1000 + (uint64_t)ru.ru_stime.tv_usec / 1000,
		shm_restarts(r->world->id), in, out, stream_batching() ? "on" : "off", batches, ops);
}

/* ---- commands ---- */

struct view {
	const char *name;
	void (*fn)(struct result *r);
	const char *rule;          /* how rows of several workers merge (rowmerge.h) */
	bool per_worker;           /* every worker has rows of its own */
	bool flush_all;            /* read from shared memory once every worker has
				      flushed its counts (current when read) */
};

static const struct view views[] = {
	{ "version", view_version, NULL, false, false },
	{ "config", view_config, NULL, false, false },
	{ "pools", view_pools, "ss+++++++++++Wwff", true, false },
	{ "clients", admin_view_clients, NULL, true, false },
	{ "servers", admin_view_servers, NULL, true, false },
	{ "databases", view_databases, "sfffffffffff+f+MM", true, false },
	{ "users", view_users, "sffff+f+", true, false },
	{ "lists", view_lists, "kL", true, false },
	{ "stats", view_stats, "s", false, true },      /* shared memory has all */
	{ "stats_totals", view_stats_totals, "s", false, true },
	{ "stats_averages", view_stats_averages, "s", false, false },  /* per stats_period */
	{ "totals", view_totals, NULL, false, true },
	{ "state", view_state, NULL, false, false },
	{ "dns_hosts", view_dns_hosts, "kMf", true, false },
	{ "dns_zones", view_dns_zones, NULL, true, false },
	{ "workers", view_workers, "nfffffffff", true, false },
	{ "peers", view_peers, "nfff", false, false },
	{ "hosts", view_hosts, NULL, false, false },
	{ "peer_pools", view_peer_pools, "n++++", true, false },
	{ "fds", admin_view_fds, NULL, true, false },
	{ "protocols", admin_view_protocols, NULL, true, false },
	{ "sockets", admin_view_sockets, NULL, true, false },
	{ "active_sockets", admin_view_active_sockets, NULL, true, false },
	{ "mem", admin_view_mem, "kf+++", true, false },
};

const char *admin_view_rule(const char *view)
{
	for (size_t i = 0; i < ARRAY_SIZE(views); i++)
		if (strcasecmp(views[i].name, view) == 0)
			return views[i].rule;
	return NULL;
}

static const struct view *find_view(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(views); i++)
		if (strcasecmp(views[i].name, name) == 0)
			return &views[i];
	return NULL;
}

/* What a command is: a view, a control command for every worker
 * (control.h), something the supervisor does (SET, RELOAD, signals), or
 * what PgBouncer refuses before looking further. */
enum cmd_kind {
	CMD_VIEW, CMD_HELP, CMD_FAKE_SHOW, CMD_CONTROL, CMD_SET, CMD_SET_IGNORED, CMD_RELOAD,
	CMD_SHUTDOWN, CMD_SHUTDOWN_SERVERS, CMD_SHUTDOWN_CLIENTS, CMD_SYNTAX, CMD_BAD_ARGS
};

struct command {
	enum cmd_kind kind;
	const struct view *view;           /* CMD_VIEW */
	const struct ctl_fake *fake;       /* CMD_FAKE_SHOW */
	enum ctl_cmd ctl;                  /* CMD_CONTROL */
	struct cmdparse words;             /* arg: the argument (SET: the key); val: SET's value */
};

/* PgBouncer's exec_cmd over its cmd_list and show_map: SELECT is SHOW,
 * the fake parameters come before the views, and an argument a command
 * does not take, or any name it does not know, is a syntax error. */
static enum cmd_kind classify_words(struct command *cmd)
{
	const char *name = cmd->words.cmd, *arg = cmd->words.arg;

	if (strcasecmp(name, "show") == 0 || strcasecmp(name, "select") == 0) {
		if ((cmd->fake = ctl_fake_param(arg)) != NULL)
			return CMD_FAKE_SHOW;
		if (strcasecmp(arg, "help") == 0)
			return CMD_HELP;
		cmd->view = find_view(arg);
		return cmd->view ? CMD_VIEW : CMD_SYNTAX;
	}
	if (strcasecmp(name, "reload") == 0)
		return *arg ? CMD_SYNTAX : CMD_RELOAD;
	if (strcasecmp(name, "shutdown") == 0) {
		if (!*arg)
			return CMD_SHUTDOWN;
		if (strcasecmp(arg, "wait_for_servers") == 0)
			return CMD_SHUTDOWN_SERVERS;
		if (strcasecmp(arg, "wait_for_clients") == 0)
			return CMD_SHUTDOWN_CLIENTS;
		return CMD_SYNTAX;
	}
	if (!ctl_lookup(name, &cmd->ctl))
		return CMD_SYNTAX;
	return cmd->ctl == CTL_SUSPEND && *arg ? CMD_SYNTAX : CMD_CONTROL;
}

static void classify(const char *sql, struct command *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->ctl = CTL_COUNT;
	switch (cmdparse(sql, &cmd->words)) {
	case CMDPARSE_COMMAND:
		cmd->kind = classify_words(cmd);
		break;
	case CMDPARSE_SET:
		cmd->kind = ctl_fake_param(cmd->words.arg) ? CMD_SET_IGNORED : CMD_SET;
		break;
	case CMDPARSE_BAD_ARGS:
		cmd->kind = CMD_BAD_ARGS;
		break;
	default:
		cmd->kind = CMD_SYNTAX;
	}
}

/* PgBouncer's order: a query that does not parse is refused to anyone;
 * the views but FDS (it shows cancel keys), SHOW HELP and the ignored
 * SETs are for stats users too. */
static bool needs_admin(const struct command *cmd)
{
	switch (cmd->kind) {
	case CMD_SYNTAX:
	case CMD_BAD_ARGS:
	case CMD_HELP:
	case CMD_FAKE_SHOW:
	case CMD_SET_IGNORED:
		return false;
	case CMD_VIEW:
		return cmd->view->fn == admin_view_fds;
	default:
		return true;
	}
}

/* SHOW of a fake parameter: one text column named after it. */
static void fake_result(struct result *r, const struct ctl_fake *fake)
{
	res_begin(r, COLS(fake->name), TYPES(OID_TEXT), 1);
	res_row(r, "s", fake->value);
}

/* How the result of the command being run is sent: with its
 * RowDescription (simple query) or without, after an Execute, and with the
 * result formats a Bind asked for. */
static struct out_mode { bool header; const int16_t *formats; int n_formats; } out = { true, NULL, 0 };

/* Send T (if wanted) + D... messages of buf, then CommandComplete. */
static void send_rows(struct client *c, const uint8_t *buf, size_t len, const char *tag)
{
	struct pktbuf pb;
	pktbuf_init(&pb, len + 64);
	admin_ext_encode_rows(&pb, buf, len, out.header, out.formats, out.n_formats);
	pktbuf_begin(&pb, 'C');
	pktbuf_put_string(&pb, tag);
	pktbuf_finish(&pb);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

/* A view whose rule sorts (rowmerge.h: PgBouncer's order of databases,
 * users and pools) has its rows put in that order here too: one worker's
 * rows come in the order of its lists. */
static void sort_rows(struct result *r, const char *rule)
{
	struct pkt_hdr h;
	struct rowset rs;
	if (!rule || !strpbrk(rule, "sn") ||
	    pkt_parse_header(r->pb.buf, r->pb.len, false, 1u << 30, &h, NULL) != PKT_OK || h.type != 'T')
		return;
	rowset_init(&rs, rule);
	if (rowset_add(&rs, r->pb.buf + h.len, r->pb.len - h.len)) {
		struct pktbuf pb;
		pktbuf_init(&pb, r->pb.len + 64);
		pktbuf_put_bytes(&pb, r->pb.buf, h.len);
		rowset_write(&rs, &pb);
		pktbuf_free(&r->pb);
		r->pb = pb;
	}
	rowset_free(&rs);
}

static void write_result(struct client *c, struct result *r, const struct view *v)
{
	sort_rows(r, v ? v->rule : NULL);
	send_rows(c, r->pb.buf, r->pb.len, "SHOW");
	pktbuf_free(&r->pb);
}

/* ---- fan-out over the workers ---- */

struct admin_fanout {
	enum cmd_kind kind;
	enum ctl_cmd ctl;
	char tag[CMDPARSE_ARG_MAX + CMDPARSE_VAL_MAX + 8];  /* a SET's CommandComplete: "SET key=value" */
	const struct view *view;
	struct pktbuf header;      /* the first RowDescription seen */
	struct rowset rows;
	char err[256];
	bool done;
	bool bad;                  /* a worker's answer did not parse */
};

/* PgBouncer's SHUTDOWN modes as the supervisor's signals: now, once
 * servers are released, once clients have left. The immediate one is not
 * answered: the console connection ends with the process, as in PgBouncer. */
static void run_shutdown(struct client *c, enum cmd_kind k)
{
	if (k == CMD_SHUTDOWN) {
		log_info("SHUTDOWN command issued");
		c->fanout = xcalloc(1, sizeof(*c->fanout));     /* never done: no answer */
		c->fanout->kind = k;
		pktbuf_init(&c->fanout->header, 16);
		rowset_init(&c->fanout->rows, NULL);
	} else {
		log_info("SHUTDOWN %s command issued",
			 k == CMD_SHUTDOWN_SERVERS ? "WAIT_FOR_SERVERS" : "WAIT_FOR_CLIENTS");
		c->world->shutdown_asked = true;
		c->world->asked_mode = k == CMD_SHUTDOWN_SERVERS ? SHUTDOWN_WAIT_SERVERS : SHUTDOWN_WAIT_CLIENTS;
		send_command_complete(c, "SHUTDOWN");
	}
	kill(getppid(), k == CMD_SHUTDOWN ? SIGQUIT : k == CMD_SHUTDOWN_SERVERS ? SIGINT : SIGTERM);
}

/* Run a command with this worker's view only (one worker, or a view that is
 * the same everywhere). */
static void run_local(struct client *c, const struct command *cmd, const char *sql)
{
	struct result r = { .world = c->world };

	switch (cmd->kind) {
	case CMD_HELP:
		show_help(c);
		break;
	case CMD_VIEW:
		cmd->view->fn(&r);
		write_result(c, &r, cmd->view);
		break;
	case CMD_FAKE_SHOW:
		fake_result(&r, cmd->fake);
		write_result(c, &r, NULL);
		break;
	case CMD_RELOAD:
		/* Answered by the fan-out (start_fanout) once every worker has
		 * applied the file, or with PgBouncer's error. */
		break;
	case CMD_SHUTDOWN:
	case CMD_SHUTDOWN_SERVERS:
	case CMD_SHUTDOWN_CLIENTS:
		run_shutdown(c, cmd->kind);
		break;
	case CMD_SET_IGNORED:
		/* What drivers send on connect: accepted, as PgBouncer does. */
		send_notice(c, "SET ignored", NULL);
		send_command_complete(c, "SET");
		break;
	case CMD_BAD_ARGS:
		send_admin_error(c, "bad arguments");
		break;
	default:
		send_admin_error(c, "invalid command '%s', use SHOW HELP;", sql);
	}
}

/* Control commands always go through the supervisor (one worker too): it
 * collects every worker's answer, deferred ones included. */
static bool wants_fanout(const struct command *cmd)
{
	if (cmd->kind == CMD_CONTROL || cmd->kind == CMD_SET || cmd->kind == CMD_RELOAD)
		return true;
	return shm_n_workers() > 1 && cmd->kind == CMD_VIEW &&
	       (cmd->view->per_worker || cmd->view->flush_all);
}

static bool start_fanout(struct client *c, const struct command *cmd, const char *sql)
{
	struct admin_fanout *f = xcalloc(1, sizeof(*f));
	f->kind = cmd->kind;
	f->ctl = cmd->ctl;
	f->view = cmd->view;
	if (cmd->kind == CMD_SET)          /* PgBouncer's "SET %s=%s": as typed, unquoted */
		snprintf(f->tag, sizeof(f->tag), "SET %s=%s", cmd->words.arg, cmd->words.val);
	pktbuf_init(&f->header, 256);
	rowset_init(&f->rows, cmd->view ? cmd->view->rule : NULL);
	c->fanout = f;
	if (cmd->kind == CMD_RELOAD)
		sql = ADMIN_RELOAD_REQ;
	if (ipc_send_text(c->world->sup, IPC_ADMIN_REQ, (uint32_t)c->id, sql) < 0) {
		admin_fanout_free(c);
		return false;
	}
	return true;
}

void admin_fanout_free(struct client *c)
{
	struct admin_fanout *f = c->fanout;
	if (!f)
		return;
	pktbuf_free(&f->header);
	rowset_free(&f->rows);
	free(f);
	c->fanout = NULL;
}

static void finish_fanout(struct client *c)
{
	struct admin_fanout *f = c->fanout;
	struct pktbuf pb;

	if (f->bad)
		send_admin_error(c, "a worker's answer could not be read");
	else if (f->kind == CMD_RELOAD && f->err[0])
		send_admin_error_code(c, "F0000", f->err);    /* config_file_error, not logged again */
	else if (f->kind == CMD_RELOAD)
		send_command_complete(c, "RELOAD");
	else if (f->err[0])
		send_admin_error(c, "%s", f->err);
	else if (f->kind == CMD_CONTROL)
		send_command_complete(c, ctl_name(f->ctl));
	else if (f->kind == CMD_SET)
		send_command_complete(c, f->tag);
	else if (f->view && f->view->flush_all) {
		/* Every worker has flushed: shared memory is current now. */
		struct result r = { .world = c->world };
		f->view->fn(&r);
		write_result(c, &r, f->view);
	} else {
		pktbuf_init(&pb, f->header.len + 1024);
		pktbuf_put_bytes(&pb, f->header.buf, f->header.len);
		rowset_write(&f->rows, &pb);
		send_rows(c, pb.buf, pb.len, "SHOW");
		pktbuf_free(&pb);
	}
	admin_fanout_free(c);
}

static struct client *fanout_client(struct world *w, uint32_t reqid)
{
	struct list *it;
	list_for_each(it, &w->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->fanout && (uint32_t)c->id == reqid && c->state != CLIENT_JUSTFREE)
			return c;
	}
	return NULL;
}

void admin_fanout_part(struct world *w, uint32_t reqid, const uint8_t *data, size_t len)
{
	struct client *c = fanout_client(w, reqid);
	if (!c)
		return;
	struct admin_fanout *f = c->fanout;
	struct pkt_hdr h;
	/* A part opens with the worker's RowDescription; keep the first. */
	if (len >= 5 && data[0] == 'T' &&
	    pkt_parse_header(data, len, false, 1u << 30, &h, NULL) == PKT_OK && h.len <= len) {
		if (f->header.len == 0)
			pktbuf_put_bytes(&f->header, data, h.len);
		data += h.len;
		len -= h.len;
	}
	if (!rowset_add(&f->rows, data, len))
		f->bad = true;
}

void admin_fanout_done(struct world *w, uint32_t reqid, const char *err, size_t len)
{
	struct client *c = fanout_client(w, reqid);
	if (!c)
		return;
	if (len > 1 && err[len - 1] == 0)
		snprintf(c->fanout->err, sizeof(c->fanout->err), "%s", err);
	c->fanout->done = true;
	stream_resume(&c->s);
}

static void send_part(struct world *w, uint32_t fanid, const uint8_t *p, size_t len)
{
	if (ipc_send(w->sup, IPC_ADMIN_PART, fanid, p, (uint32_t)len, -1) < 0)
		log_warning("could not send console rows to the supervisor");
}

/* One worker's rows of a view for the asker, in parts that end on message
 * boundaries and fit one IPC message. */
static void send_view_parts(struct world *w, uint32_t fanid, const struct view *v)
{
	struct result r = { .world = w };
	size_t off = 0, start = 0;
	v->fn(&r);
	while (off < r.pb.len) {
		struct pkt_hdr h;
		if (pkt_parse_header(r.pb.buf + off, r.pb.len - off, false, 1u << 30, &h, NULL) != PKT_OK)
			break;
		if (off + h.len - start > IPC_MAX_PAYLOAD && off > start) {
			send_part(w, fanid, r.pb.buf + start, off - start);
			start = off;
		}
		off += h.len;
	}
	if (off > start)
		send_part(w, fanid, r.pb.buf + start, off - start);
	pktbuf_free(&r.pb);
}

/* Another worker's console client asks: answer for this worker. */
void admin_remote_run(struct world *w, uint32_t fanid, const char *text, size_t len)
{
	char err[256] = "";
	struct command cmd;

	if (len == 0 || text[len - 1] != 0) {
		snprintf(err, sizeof(err), "malformed console command");
	} else {
		classify(text, &cmd);
		if (cmd.kind == CMD_VIEW && cmd.view->flush_all) {
			stats_flush(w);      /* the asking worker reads shared memory */
		} else if (cmd.kind == CMD_VIEW) {
			send_view_parts(w, fanid, cmd.view);
		} else if (cmd.kind == CMD_CONTROL) {
			if (control_apply(w, cmd.ctl, cmd.words.arg, fanid, err, sizeof(err)) == CTL_LATER)
				return;     /* answered by control_janitor() */
		} else if (cmd.kind == CMD_SET) {
			if (ctl_apply_set(w->cfg, cmd.words.arg, cmd.words.val, err, sizeof(err)) == 0)
				world_refresh_config(w);
		} else {
			snprintf(err, sizeof(err), "not a command for every worker");
		}
	}
	if (ipc_send_text(w->sup, IPC_ADMIN_DONE, fanid, err) < 0)
		log_warning("could not answer a console command of another worker");
}

/*
 * Run one console command for c. SA_PAUSE: it went to every worker and
 * the same message is offered again once they answered; SA_CONSUMED: the
 * answer (without ReadyForQuery) is written. *failed tells whether it was an
 * error. header/formats say how rows are sent (admin_ext.c for Execute).
 */
enum stream_action admin_run_text(struct client *c, const char *sql, bool header, const int16_t *formats,
				  int n_formats, bool *failed)
{
	out = (struct out_mode){ header, formats, n_formats };
	cmd_failed = false;
	c->last_activity = util_monotonic();
	if (c->fanout) {
		/* Resumed: every worker has answered this very query. */
		if (!c->fanout->done)
			return SA_PAUSE;
		finish_fanout(c);
	} else {
		struct command cmd;
		char err[128];
		log_debug("got admin query: %s", sql);
		classify(sql, &cmd);
		if (c->stats_only && needs_admin(&cmd)) {
			send_admin_error(c, "admin access needed");
		} else if (cmd.kind == CMD_CONTROL &&
			   !control_check(c->world, cmd.ctl, cmd.words.arg, err, sizeof(err))) {
			send_admin_error(c, "%s", err);
		} else if (wants_fanout(&cmd)) {
			if (cmd.kind == CMD_RELOAD)
				log_info("RELOAD command issued");
			if (start_fanout(c, &cmd, sql))
				return SA_PAUSE;
			send_admin_error(c, "could not reach the other workers");
		} else {
			run_local(c, &cmd, sql);
			if (cmd.kind == CMD_SHUTDOWN)
				return SA_PAUSE;       /* no answer; the process ends */
		}
	}
	out = (struct out_mode){ true, NULL, 0 };
	*failed = cmd_failed;
	return SA_CONSUMED;
}

/* RowDescription of the view a command shows, for Describe; false: the
 * command returns no rows (NoData). */
bool admin_describe(struct world *w, const char *text, struct pktbuf *pb)
{
	struct command cmd;
	struct result r = { .world = w };
	struct pkt_hdr h;

	classify(text, &cmd);
	if (cmd.kind == CMD_FAKE_SHOW)
		fake_result(&r, cmd.fake);
	else if (cmd.kind == CMD_VIEW)
		cmd.view->fn(&r);     /* cheap; the rows are dropped, the header is the same everywhere */
	else
		return false;
	bool ok = r.pb.len >= 5 && r.pb.buf[0] == 'T' &&
		  pkt_parse_header(r.pb.buf, r.pb.len, false, 1u << 30, &h, NULL) == PKT_OK;
	if (ok)
		pktbuf_put_bytes(pb, r.pb.buf, h.len);
	pktbuf_free(&r.pb);
	return ok;
}

/* PgBouncer starts a console client's transaction and query at its first
 * message and, there being no server to end them, never again: one
 * transaction and one query per console connection in SHOW STATS. */
static void count_console_xact(struct client *c)
{
	if (c->console_counted || !c->pool)
		return;
	c->console_counted = true;
	c->pool->stats.xact_count++;
	c->pool->stats.query_count++;
}

enum stream_action admin_on_pkt(struct client *c, const struct pkt_hdr *h,
				const uint8_t *data, size_t avail)
{
	struct pktbuf pb;
	bool failed;

	if (h->type == 'X') {
		client_close(c, false, "client close request");
		return SA_STOP;
	}
	count_console_xact(c);
	/* PgBouncer reads a console message whole into its pkt_buf buffer and
	 * ends the connection when it does not fit. */
	if (h->len > (size_t)c->world->cfg->pkt_buf) {
		client_close(c, true, "incomplete pkt");
		return SA_STOP;
	}
	if (avail < h->len)
		return SA_NEED_FULL;
	if (h->type != 'Q')
		return admin_ext_message(c, h->type, data + 5, h->len - 5);
	/* The query is the message's first string, as PgBouncer reads it. */
	if (!memchr(data + 5, 0, h->len - 5)) {
		client_close(c, true, "incomplete query");
		return SA_STOP;
	}
	/* It stays in the stream's buffer while it is offered again
	 * (SA_PAUSE). */
	if (admin_run_text(c, (const char *)data + 5, true, NULL, 0, &failed) == SA_PAUSE)
		return SA_PAUSE;
	pktbuf_init(&pb, 8);
	pkt_write_ready(&pb, 'I');
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
	return SA_CONSUMED;
}

/* A console client goes: its fan-out wait and its extended-protocol state. */
static void console_client_freed(struct client *c)
{
	admin_fanout_free(c);
	admin_ext_free(c);
}

void admin_register(void)
{
	static const struct client_console_ops ops = {
		.login = admin_client_login,
		.welcome = admin_welcome,
		.on_pkt = admin_on_pkt,
		.freed = console_client_freed,
	};
	client_set_console(&ops);
}

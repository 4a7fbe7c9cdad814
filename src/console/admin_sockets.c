/* pgcrew — the console's low-level views of one worker: SHOW SOCKETS and
 * ACTIVE_SOCKETS (every client and server socket with its buffer positions),
 * SHOW CLIENTS and SERVERS (the same columns without the buffer positions),
 * SHOW FDS (the rows PgBouncer lists for an online restart, and the whole
 * cancel key), SHOW PROTOCOLS (pgcrew's: each connection's protocol
 * version) and SHOW MEM (pgcrew's object caches), with PgBouncer 1.25's
 * columns. With several
 * workers admin.c fans them out and concatenates (MEM: sums) the rows. */
#include "admin_sockets.h"
#include "admin_result.h"
#include "client.h"
#include "config.h"
#include "objects.h"
#include "pool.h"
#include "prepared.h"
#include "server.h"
#include "stream.h"
#include "tls.h"
#include "world.h"

#include <stdio.h>
#include <sys/socket.h>

/* ---- SHOW CLIENTS, SERVERS, SOCKETS, ACTIVE_SOCKETS ---- */

/* PgBouncer's socket columns; SOCKETS and ACTIVE_SOCKETS add the buffer
 * positions ("debug"). */
static void socket_header(struct result *r, bool debug)
{
	res_begin(r, COLS("type", "user", "database", "replication", "state", "addr", "port",
			  "local_addr", "local_port", "connect_time", "request_time", "wait", "wait_us",
			  "close_needed", "ptr", "link", "remote_pid", "tls", "application_name",
			  "prepared_statements", "id",
			  "recv_pos", "pkt_pos", "pkt_remain", "send_pos", "send_remain", "pkt_avail", "send_avail"),
		  TYPES(OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_INT4, OID_TEXT,
			OID_INT4, OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_INT4, OID_TEXT, OID_TEXT,
			OID_INT4, OID_TEXT, OID_TEXT, OID_INT4, OID_INT8,
			OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4, OID_INT4),
		  debug ? 28 : 21);
}

/* What one socket shows, whether it is a client or a server. */
struct sock_info {
	char type;                  /* 'C' or 'S' */
	const char *user, *db, *state, *addr, *laddr, *appname;
	enum replication repl;
	int port, lport, remote_pid, close_needed, prepared;
	usec_t connect_time, request_time, wait;
	const void *ptr, *link;
	const struct stream *s;
	uint64_t id;
};

/* Nothing received that is not yet sent on or consumed, nothing of ours
 * queued: PgBouncer's "buffer empty". */
static bool stream_idle(const struct stream *s)
{
	return (!s->buf || s->buf->done == s->buf->recv) && s->out.len == s->out_sent;
}

static const char *repl_name(enum replication repl)
{
	return repl == REPL_LOGICAL ? "logical" : repl == REPL_PHYSICAL ? "physical" : "none";
}

static void socket_row(struct result *r, const struct sock_info *k, bool debug)
{
	char ct[64], rt[64], ptr[32], link[32], tls[96];
	const struct iobuf *b = k->s->buf;
	admin_fmt_time(ct, sizeof(ct), k->connect_time);
	admin_fmt_time(rt, sizeof(rt), k->request_time ? k->request_time : k->connect_time);
	snprintf(ptr, sizeof(ptr), "%p", k->ptr);
	snprintf(link, sizeof(link), "%p", k->link);
	res_row(r, debug ? "ssssssisissiiississiqiiiiiii" : "ssssssisissiiississiq",
		k->type == 'C' ? "C" : "S", k->user, k->db, repl_name(k->repl),
		k->state, k->addr, k->port, k->laddr, k->lport, ct, rt, (int)(k->wait / USEC_PER_SEC),
		(int)(k->wait % USEC_PER_SEC), k->close_needed, ptr, k->link ? link : "", k->remote_pid,
		k->s->tls ? tls_conn_info(k->s->tls, tls, sizeof(tls)) : "", k->appname ? k->appname : "",
		k->prepared, k->id,
		b ? (int)b->recv : 0, b ? (int)b->parse : 0, (int)k->s->pkt_remain, b ? (int)b->done : 0,
		(int)(k->s->out.len - k->s->out_sent), b ? (int)(b->recv - b->parse) : 0,
		b ? (int)(b->parse - b->done) : 0);
}

/* Each state's name in SHOW SOCKETS ("cl_"/"sv_" + its list) and in SHOW
 * CLIENTS / SERVERS; NULL: not listed there (PgBouncer omits clients
 * logging in from SHOW CLIENTS, and closing or being-canceled servers from
 * SHOW SOCKETS). */
struct state_names {
	const char *sock, *show;
};

static const struct state_names client_states[CLIENT_STATE_COUNT] = {
	[CLIENT_LOGIN] = { "cl_login", NULL },
	[CLIENT_WAITING_LOGIN] = { "cl_waiting", "waiting" },
	[CLIENT_ACTIVE] = { "cl_active", "active" },
	[CLIENT_WAITING] = { "cl_waiting", "waiting" },
};

static const struct state_names server_states[SERVER_STATE_COUNT] = {
	[SERVER_LOGIN] = { "sv_login", "new" },
	[SERVER_IDLE] = { "sv_idle", "idle" },
	[SERVER_ACTIVE] = { "sv_active", "active" },
	[SERVER_TESTED] = { "sv_tested", "tested" },
	[SERVER_BEING_CANCELED] = { NULL, "being_canceled" },
};

static const char *state_name(const struct state_names *n, bool debug)
{
	return debug ? n->sock : n->show;
}

/* SHOW CLIENTS calls an active client without a server "idle", as PgBouncer. */
static const char *client_state(const struct client *c, bool debug)
{
	const char *name = state_name(&client_states[c->state], debug);
	return !debug && c->state == CLIENT_ACTIVE && !c->link ? "idle" : name;
}

/* How long the client's current request has waited or run. */
static usec_t client_wait(const struct client *c, usec_t now)
{
	if (c->state == CLIENT_WAITING)
		return c->request_time ? now - c->request_time : 0;
	return c->query_running ? now - c->query_start : 0;
}

static void client_socket(struct result *r, const struct client *c, usec_t now, const char *state,
			  bool debug)
{
	struct sock_info k = {
		.type = 'C', .user = c->user_name[0] ? c->user_name : "(nouser)",
		.db = c->pool ? c->pool->db->name : "(nodb)", .state = state, .addr = c->addr,
		.laddr = c->laddr, .port = c->port, .lport = c->lport, .repl = c->repl,
		.appname = varcache_get(&c->vars, varcache_lookup("application_name")),
		.connect_time = c->connect_time, .request_time = c->request_time,
		.wait = client_wait(c, now), .prepared = (int)ps_client_count(c->ps),
		.ptr = c, .link = c->link, .s = &c->s, .id = c->id,
	};
	socket_row(r, &k, debug);
}

static void server_socket(struct result *r, const struct server *sv, usec_t now, const char *state,
			  bool debug)
{
	bool running = sv->link && sv->link->query_running;
	struct sock_info k = {
		.type = 'S', .user = sv->pool->user->name, .db = sv->pool->db->name, .state = state,
		.addr = sv->addr, .laddr = sv->laddr, .port = sv->port, .lport = sv->lport,
		.repl = sv->repl,
		.appname = varcache_get(&sv->vars, varcache_lookup("application_name")),
		.remote_pid = (int)sv->be.pid, .close_needed = sv->close_needed ? 1 : 0,
		.connect_time = sv->connect_time, .request_time = sv->request_time,
		.wait = running ? now - sv->query_start : 0, .prepared = (int)ps_server_count(sv->ps),
		.ptr = sv, .link = sv->link, .s = &sv->s, .id = sv->id,
	};
	socket_row(r, &k, debug);
}

/* The rows of one list; debug: SOCKETS names and columns, active_only:
 * only sockets with buffered bytes (ACTIVE_SOCKETS). */
struct list_view {
	usec_t now;
	bool debug, active_only;
};

static void client_list(struct result *r, const struct list *l, const struct list_view *v)
{
	const struct list *it;
	list_for_each(it, l) {
		const struct client *c = container_of(it, struct client, node);
		const char *state = client_state(c, v->debug);
		if (state && !(v->active_only && stream_idle(&c->s)))
			client_socket(r, c, v->now, state, v->debug);
	}
}

static void server_list(struct result *r, const struct list *l, const struct list_view *v)
{
	const struct list *it;
	list_for_each(it, l) {
		const struct server *sv = container_of(it, struct server, node);
		const char *state = state_name(&server_states[sv->state], v->debug);
		if (sv->state == SERVER_IDLE && pool_server_stale(sv))
			state = v->debug ? "sv_used" : "used";
		if (state && !(v->active_only && stream_idle(&sv->s)))
			server_socket(r, sv, v->now, state, v->debug);
	}
}

/* PgBouncer's order: per pool its clients then its servers, then the
 * clients still logging in. */
static void sockets(struct result *r, bool active_only)
{
	struct list_view v = { .now = util_monotonic(), .debug = true, .active_only = active_only };
	struct list *it;
	socket_header(r, true);
	list_for_each(it, &r->world->pools) {
		const struct pool *p = container_of(it, struct pool, node);
		client_list(r, &p->active_clients, &v);
		client_list(r, &p->waiting_clients, &v);
		server_list(r, &p->active_servers, &v);
		server_list(r, &p->idle_servers, &v);
		server_list(r, &p->tested_servers, &v);
		server_list(r, &p->login_servers, &v);
	}
	client_list(r, &r->world->login_clients, &v);
}

void admin_view_sockets(struct result *r)
{
	sockets(r, false);
}

void admin_view_active_sockets(struct result *r)
{
	sockets(r, true);
}

/* SHOW CLIENTS: per pool, the active (and idle) clients, then the waiting
 * ones; clients still logging in belong to no pool and are not listed. */
void admin_view_clients(struct result *r)
{
	struct list_view v = { .now = util_monotonic() };
	struct list *it;
	socket_header(r, false);
	list_for_each(it, &r->world->pools) {
		const struct pool *p = container_of(it, struct pool, node);
		client_list(r, &p->active_clients, &v);
		client_list(r, &p->waiting_clients, &v);
	}
}

void admin_view_servers(struct result *r)
{
	struct list_view v = { .now = util_monotonic() };
	struct list *it;
	socket_header(r, false);
	list_for_each(it, &r->world->pools) {
		const struct pool *p = container_of(it, struct pool, node);
		server_list(r, &p->active_servers, &v);
		server_list(r, &p->idle_servers, &v);
		server_list(r, &p->tested_servers, &v);
		server_list(r, &p->login_servers, &v);
		server_list(r, &p->canceled_servers, &v);
	}
}

/* ---- SHOW FDS ---- */

static void fds_header(struct result *r)
{
	res_begin(r, COLS("fd", "task", "user", "database", "addr", "port", "cancel", "link",
			  "client_encoding", "std_strings", "datestyle", "timezone", "password",
			  "scram_client_key", "scram_server_key", "cancel_key"),
		  TYPES(OID_INT4, OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_INT4, OID_INT8, OID_INT4,
			OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA, OID_BYTEA, OID_BYTEA), 16);
}

static const char *var(const struct varcache *vc, const char *name)
{
	return varcache_get(vc, varcache_lookup(name));
}

/* A cancel key as SHOW FDS gives it: PgBouncer's int8 `cancel` (pid in the
 * top half, then the secret's first 4 bytes: all of a protocol 3.0 key),
 * and pgcrew's `cancel_key`, the whole secret (4 to 256 bytes) as bytea. */
struct fd_key {
	uint64_t cancel;
	char hex[3 + 2 * CANCELKEY_MAX];
};

static const char *fd_key(struct fd_key *out, const struct cancelkey *k)
{
	static const char digits[] = "0123456789abcdef";
	uint32_t head = 0;
	for (size_t i = 0; i < 4 && i < k->len; i++)
		head |= (uint32_t)k->secret[i] << (24 - 8 * i);
	out->cancel = (uint64_t)k->pid << 32 | head;
	if (!k->len)
		return NULL;
	memcpy(out->hex, "\\x", 2);
	for (size_t i = 0; i < k->len; i++) {
		out->hex[2 + 2 * i] = digits[k->secret[i] >> 4];
		out->hex[3 + 2 * i] = digits[k->secret[i] & 15];
	}
	out->hex[2 + 2 * k->len] = 0;
	return out->hex;
}

/* pgcrew's online restart passes listening sockets only (takeover.c), so no
 * password or SCRAM keys are ever listed: those columns stay NULL. */
static void fd_row(struct result *r, int fd, const char *task, const char *user, const char *db,
		   const char *addr, int port, const struct cancelkey *key, int link, const struct varcache *vc)
{
	struct fd_key k = { 0 };
	const char *hex = key ? fd_key(&k, key) : NULL;
	res_row(r, "issssiqissssssss", fd, task, user, db, addr, port, k.cancel, link,
		vc ? var(vc, "client_encoding") : NULL, vc ? var(vc, "standard_conforming_strings") : NULL,
		vc ? var(vc, "DateStyle") : NULL, vc ? var(vc, "TimeZone") : NULL, NULL, NULL, NULL, hex);
}

static void listen_row(struct result *r, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[64] = "unix";
	int port = r->world->cfg->listen_port;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family != AF_UNIX)
		util_format_addr((struct sockaddr *)&ss, addr, sizeof(addr), &port);
	fd_row(r, fd, "pooler", NULL, NULL, addr, port, NULL, 0, NULL);
}

static void fd_client(struct result *r, const struct client *c)
{
	struct cancelkey k;
	if (c->s.tls || (c->link && c->link->s.tls) || c->state == CLIENT_JUSTFREE || c->state == CLIENT_CANCEL)
		return;
	cancelkey_from_own(&k, &c->key);
	fd_row(r, c->s.fd, "client", c->user_name[0] ? c->user_name : NULL, c->pool ? c->pool->db->name : NULL,
	       c->addr, c->port, &k, c->link ? c->link->s.fd : 0, &c->vars);
}

static void fd_server(struct result *r, const struct server *sv)
{
	if (sv->s.tls || (sv->link && sv->link->s.tls) || sv->s.fd < 0)
		return;
	fd_row(r, sv->s.fd, "server", sv->pool->user->name, sv->pool->db->name, sv->addr, sv->port,
	       &sv->be, sv->link ? sv->link->s.fd : 0, &sv->vars);
}

static void fd_clients(struct result *r, const struct list *l)
{
	const struct list *it;
	list_for_each(it, l)
		fd_client(r, container_of(it, struct client, node));
}

static void fd_servers(struct result *r, const struct list *l)
{
	const struct list *it;
	list_for_each(it, l)
		fd_server(r, container_of(it, struct server, node));
}

/* A listening socket every slot shares (the Unix socket, sockets systemd
 * passed) is listed by worker 0 only. */
static bool shared_listener(struct world *world, int fd)
{
	const struct listen_slot *first = &world->lset->slots[0];
	if (fd == world->lset->unix_fd)
		return true;
	for (int i = 0; i < first->n_fds; i++)
		if (first->fds[i] == fd)
			return true;
	return false;
}

/* This worker's listening sockets; none in a world without a listen set
 * (the unit tests' and fuzzers' rig). */
static void fd_listeners(struct result *r)
{
	if (!r->world->lset)
		return;
	const struct listen_slot *slot = &r->world->lset->slots[r->world->id];
	for (int i = 0; i < slot->n_fds; i++)
		if (r->world->id == 0 || !shared_listener(r->world, slot->fds[i]))
			listen_row(r, slot->fds[i]);
	if (r->world->id == 0 && r->world->lset->unix_fd >= 0)      /* shared by every worker: list it once */
		listen_row(r, r->world->lset->unix_fd);
}

void admin_view_fds(struct result *r)
{
	struct list *it;
	fds_header(r);
	fd_listeners(r);
	fd_clients(r, &r->world->login_clients);
	list_for_each(it, &r->world->pools) {
		const struct pool *p = container_of(it, struct pool, node);
		if (p->db->admin)
			continue;
		fd_clients(r, &p->active_clients);
		fd_clients(r, &p->waiting_clients);
		fd_servers(r, &p->active_servers);
		fd_servers(r, &p->idle_servers);
		fd_servers(r, &p->tested_servers);
		fd_servers(r, &p->login_servers);
	}
}

/* ---- SHOW PROTOCOLS (pgcrew) ---- */

static void protocol_row(struct result *r, char type, uint64_t id, const char *user, const char *db,
			 int minor, int key_bytes)
{
	char proto[16];
	snprintf(proto, sizeof(proto), "3.%d", minor);
	res_row(r, "sqssisi", type == 'C' ? "C" : "S", id, user, db, r->world->id, proto, key_bytes);
}

/* Which protocol version each connection of this worker speaks, and how
 * long the secret of its cancel key is: a client's is pgcrew's (4 bytes
 * for 3.0, 32 for 3.2), a server's is PostgreSQL's. The id is SHOW
 * CLIENTS' and SERVERS'. Connections still logging in are left out. */
void admin_view_protocols(struct result *r)
{
	struct list *it;
	res_begin(r, COLS("type", "id", "user", "database", "worker", "protocol", "key_bytes"),
		  TYPES(OID_TEXT, OID_INT8, OID_TEXT, OID_TEXT, OID_INT4, OID_TEXT, OID_INT4), 7);
	list_for_each(it, &r->world->all_clients) {
		const struct client *c = container_of(it, struct client, all_node);
		if (!c->key.len || c->state == CLIENT_LOGIN || c->state == CLIENT_JUSTFREE)
			continue;
		protocol_row(r, 'C', c->id, c->user_name[0] ? c->user_name : "(nouser)",
			     c->pool ? c->pool->db->name : "(nodb)", c->proto_minor, c->key.len);
	}
	list_for_each(it, &r->world->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		if (sv->state == SERVER_JUSTFREE || sv->state == SERVER_LOGIN)
			continue;        /* its version is not settled before ReadyForQuery */
		protocol_row(r, 'S', sv->id, sv->pool->user->name, sv->pool->db->name, sv->proto_minor,
			     sv->be.len);
	}
}

/* ---- SHOW MEM ---- */

static int count(const struct list *l)
{
	int n = 0;
	const struct list *it;
	list_for_each(it, l)
		n++;
	return n;
}

/* Clients, servers, pools, databases and users are allocated one by one
 * (no free list: free is 0); packet buffers come from the stream cache. */
void admin_view_mem(struct result *r)
{
	int n_bufs = (int)stream_cache_used(), n_free = (int)stream_cache_free_count();
	int bufsize = (int)(sizeof(struct iobuf) + stream_bufsize());
	const struct {
		const char *name;
		int size, used, free;
	} rows[] = {
		{ "user_cache", (int)sizeof(struct puser), count(&r->world->users), 0 },
		{ "db_cache", (int)sizeof(struct database), count(&r->world->databases), 0 },
		{ "pool_cache", (int)sizeof(struct pool), count(&r->world->pools), 0 },
		{ "server_cache", (int)sizeof(struct server), count(&r->world->all_servers), 0 },
		{ "client_cache", (int)sizeof(struct client), count(&r->world->all_clients), 0 },
		{ "iobuf_cache", bufsize, n_bufs, n_free },
	};
	res_begin(r, COLS("name", "size", "used", "free", "memtotal"),
		  TYPES(OID_TEXT, OID_INT4, OID_INT4, OID_INT4, OID_INT4), 5);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		res_row(r, "siiii", rows[i].name, rows[i].size, rows[i].used, rows[i].free,
			rows[i].size * (rows[i].used + rows[i].free));
}

/* pgcrew — server connections toward PostgreSQL: connect, StartupMessage,
 * authentication (cleartext, md5, SCRAM-SHA-256 incl. pass-through), the
 * relay of results to the linked client, and internal queries whose results
 * the pooler swallows until ReadyForQuery. */
#include "server.h"
#include "hostrole.h"
#include "authquery.h"
#include "shm.h"
#include "ledger.h"
#include "ipc.h"
#include "auth/md5.h"
#include "auth/scram.h"
#include "cancel.h"
#include "client.h"
#include "config.h"
#include "hist.h"
#include "link.h"
#include "config/userlist.h"
#include "dns.h"
#include "pool.h"
#include "proto/build.h"
#include "proto/cancelkey.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "psrelay.h"
#include "tls.h"
#include "world.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/un.h>
#include <unistd.h>

static const char *const state_names[] = {
	[SERVER_LOGIN] = "login", [SERVER_IDLE] = "idle", [SERVER_ACTIVE] = "active",
	[SERVER_TESTED] = "tested", [SERVER_BEING_CANCELED] = "being_canceled",
	[SERVER_JUSTFREE] = "justfree",
};
_Static_assert(ARRAY_SIZE(state_names) == SERVER_STATE_COUNT, "server state names");

const char *server_state_name(enum server_state st)
{
	return st < SERVER_STATE_COUNT ? state_names[st] : "?";
}


/* ---- can it move between workers (server_move.c moves it) ---- */

/* Plain, or TLS with both directions' keys in the kernel (kTLS): the
 * receiver reads and writes the socket as a plain one. */
static bool socket_movable(const struct server *sv)
{
	return !sv->s.tls || tls_conn_in_kernel(sv->s.tls);
}

bool server_may_move(const struct server *sv)
{
	return shm_n_workers() > 1 && sv->has_slot && sv->repl == REPL_NONE && socket_movable(sv) &&
	       !server_world(sv)->shutting_down;
}

bool server_at_rest(const struct server *sv)
{
	return sv->repl == REPL_NONE && socket_movable(sv) && sv->s.fd >= 0 && !sv->s.closed && !sv->dns && !sv->ssl_ev &&
	       sv->internal == SI_NONE && sv->cancels_pending == 0 && sv->ready_status == 'I' &&
	       stream_flushed(&sv->s) && stream_unprocessed(&sv->s) == 0 &&
	       ps_server_movable(sv->ps);
}

/* ---- state bookkeeping ---- */

static int *state_counter(struct pool *p, enum server_state st)
{
	switch (st) {
	case SERVER_LOGIN: return &p->n_login;
	case SERVER_IDLE: return &p->n_idle;
	case SERVER_ACTIVE: return &p->n_active;
	case SERVER_TESTED: return &p->n_tested;
	case SERVER_BEING_CANCELED: return &p->n_canceled;
	default: return NULL;
	}
}

static struct list *state_list(struct pool *p, enum server_state st)
{
	switch (st) {
	case SERVER_LOGIN: return &p->login_servers;
	case SERVER_IDLE: return &p->idle_servers;
	case SERVER_ACTIVE: return &p->active_servers;
	case SERVER_TESTED: return &p->tested_servers;
	case SERVER_BEING_CANCELED: return &p->canceled_servers;
	case SERVER_JUSTFREE: return &p->db->world->justfree_servers;
	default: return NULL;
	}
}

/* The idle list is in reuse order, by last use: newest first (LIFO: the
 * most recently used server is the warmest) or, with server_round_robin,
 * oldest first (load spread evenly). A server just released is the newest:
 * one comparison puts it at the front (or the back). One moved in unused
 * from another worker finds its place, so the order holds over the
 * instance. */
static void idle_insert(struct pool *p, struct server *sv, bool round_robin)
{
	struct list *head = &p->idle_servers, *it;
	if (round_robin) {
		for (it = head->prev; it != head; it = it->prev)
			if (container_of(it, struct server, node)->last_used <= sv->last_used)
				break;
		list_prepend(it, &sv->node);          /* after it */
		return;
	}
	for (it = head->next; it != head; it = it->next)
		if (container_of(it, struct server, node)->last_used <= sv->last_used)
			break;
	list_append(it, &sv->node);                   /* before it */
}

/* When the idle server unused longest was last used, 0 for none: the list
 * is in order of last use, newest first (oldest first with round robin). */
static usec_t oldest_idle(const struct pool *p)
{
	const struct list *head = &p->idle_servers;
	if (list_empty(head))
		return 0;
	usec_t a = container_of(head->next, struct server, node)->last_used;
	usec_t b = container_of(head->prev, struct server, node)->last_used;
	return a < b ? a : b;
}

/* A pool is in its database's and its user's lists of pools with an idle
 * server while it has one: eviction takes one from there instead of
 * walking every pool (10,000 pools of one database: most of a worker's
 * time went to that walk). */
static void note_idle_pools(struct pool *p)
{
	bool listed = !list_empty(&p->idle_db_node);
	if (p->n_idle > 0 && !listed) {
		list_append(&p->db->idle_pools, &p->idle_db_node);
		list_append(&p->user->idle_pools, &p->idle_user_node);
	} else if (p->n_idle == 0 && listed) {
		list_del(&p->idle_db_node);
		list_del(&p->idle_user_node);
	}
}

void server_set_state(struct server *sv, enum server_state st)
{
	struct pool *p = sv->pool;
	int *cnt = state_counter(p, sv->state);
	bool was_idle = sv->state == SERVER_IDLE;

	if (sv->state == SERVER_JUSTFREE)
		fatal("server %llu: transition out of justfree", (unsigned long long)sv->id);
	log_noise("S-%llu: %s -> %s", (unsigned long long)sv->id,
		  server_state_name(sv->state), server_state_name(st));
	if (cnt)
		(*cnt)--;
	list_del(&sv->node);
	sv->state = st;
	if ((cnt = state_counter(p, st)) != NULL)
		(*cnt)++;
	if (st == SERVER_IDLE)
		idle_insert(p, sv, server_world(sv)->cfg->server_round_robin);
	else
		list_append(state_list(p, st), &sv->node);
	if (st == SERVER_JUSTFREE)
		pool_servers_changed(p);     /* pool_idle_timeout counts from here */
	/* Several workers: others see idle servers that could move here, and
	 * which of ours would go next (the reuse order, pool.c). */
	if (st == SERVER_IDLE || was_idle) {
		note_idle_pools(p);
		if (server_may_move(sv))
			hist_pool_set_idle(p->hist, p->n_idle);
		hist_pool_set_idle_any(p->hist, p->n_idle);
		if (p->hist && shm_n_workers() > 1) {
			/* Read only by the ledger, which one worker has not. */
			hist_pool_set_oldest(p->hist, oldest_idle(p));
			pool_publish_next_idle(p);
		}
	}
}

/* ---- closing ---- */

/* The owner of a replication server that goes before it was linked learns
 * why; a linked one is closed with the link, as any client. */
static void drop_repl_owner(struct server *sv, const char *sqlstate, const char *reason)
{
	struct client *c = sv->repl_owner;
	if (!c)
		return;
	sv->repl_owner = NULL;
	c->repl_server = NULL;
	if (sv->link != c)
		client_close_sqlstate(c, sqlstate, reason);
}

void server_close(struct server *sv, const char *reason)
{
	struct pool *p = sv->pool;
	char age[32];

	if (sv->state == SERVER_JUSTFREE)
		return;
	if (sv->internal == SI_AUTH_QUERY)
		authquery_server_closed(sv);
	list_del(&sv->close_node);
	if (sv->ssl_ev) {
		event_free(sv->ssl_ev);
		sv->ssl_ev = NULL;
	}
	if (sv->dns) {
		dns_cancel(sv->dns);
		sv->dns = NULL;
	}
	util_format_age(util_monotonic() - sv->connect_time, age, sizeof(age));
	if (server_world(sv)->cfg->log_disconnections)
		log_server(sv, LG_LOG, "closing because: %s (age=%s)", reason, age);
	drop_repl_owner(sv, "08P01", reason);
	struct client *c = link_detach_server(sv, LINK_SERVER_GONE);
	if (c)
		client_close_sqlstate(c, "08P01", "server conn crashed?");
	if (sv->state == SERVER_ACTIVE || sv->state == SERVER_IDLE || sv->state == SERVER_TESTED)
		(void)stream_write_raw(&sv->s, "X\0\0\0\4", 5);   /* polite Terminate */
	/* The slot goes back with the close, as PgBouncer counts a server gone
	 * when it closes it: the next server may open while this backend exits. */
	if (sv->has_slot)
		pool_slot_release_claim(p, sv->claim);
	stream_close(&sv->s);
	p->db->n_servers--;
	p->user->n_servers--;
	server_set_state(sv, SERVER_JUSTFREE);
	free(sv->scram);
	sv->scram = NULL;
	world_schedule_reap(server_world(sv));
	world_check_shutdown(server_world(sv));
}

void server_free(struct server *sv)
{
	cancel_server_gone(sv);
	list_del(&sv->node);
	list_del(&sv->all_node);
	varcache_clear(&sv->vars);
	ps_server_free(sv->ps);
	free(sv);
}

/* ---- launching ---- */

static int build_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (!host || host[0] == '/' || host[0] == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		const char *dir = host && host[0] ? host : "/tmp";
		un->sun_family = AF_UNIX;
		int n = snprintf(un->sun_path, sizeof(un->sun_path), "%s/.s.PGSQL.%d", dir, port);
		if (n < 0 || (size_t)n >= sizeof(un->sun_path))
			return -1;
		*len = sizeof(*un);
		return 0;
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return -2;   /* a host name: resolve it asynchronously */
}

static enum stream_action server_on_pkt(struct stream *s, const struct pkt_hdr *h,
					const uint8_t *data, size_t avail);
static void server_on_event(struct stream *s, enum stream_event ev);

static socklen_t addr_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void tune_tcp(int fd, const void *cfg)
{
	util_tune_tcp(fd, cfg);
}

/* TCP settings go on the socket before connect(), as in PgBouncer: a
 * tcp_socket_buffer set after the handshake leaves the window scaled for
 * the default buffer, and a 4 kB buffer then drops what the server sends
 * into the window it was offered, one retransmission timeout at a time
 * (pg_basebackup: 40 kB/s). */
static int connect_to(struct server *sv, const struct sockaddr *sa, socklen_t len)
{
	return stream_connect(&sv->s, sa, len, sa->sa_family == AF_UNIX ? NULL : tune_tcp,
			      server_world(sv)->cfg);
}

/* load_balance_hosts = disable: a host that failed before the login
 * completed, in any way (name lookup, connect, TLS, authentication, an
 * error from PostgreSQL), is left for the next one in the list, as in
 * PgBouncer. */
static void host_failed(struct server *sv)
{
	struct database *db = sv->pool->db;
	if (db->load_balance || db->n_hosts < 2 || sv->host_idx + 1 == db->host_rr)
		return;
	db->host_rr = sv->host_idx + 1;
	shm_host_set(db->shm_idx, sv->host_idx + 1);
}

/* target_session_attrs over several hosts: a host that failed is skipped a
 * moment (HOSTROLE_SKIP_USEC) and the next one tried at once, instead of
 * holding the pool for server_login_retry: a failover is over as soon as a
 * host serves (the old primary refusing or shutting down, the new one
 * still promoting). */
static bool host_skipped_instead(struct server *sv)
{
	struct database *db = sv->pool->db;
	if (hostrole_tsa(db) == TSA_ANY || db->n_hosts < 2)
		return false;
	hostrole_skip(db, sv->host_idx);
	return true;
}

/* sv's address failed: with another address of its host name left, the
 * next server tries that one at once (true), as libpq does; otherwise the
 * host itself failed (false). */
static bool next_address_left(struct server *sv)
{
	return hostrole_addr_failed(sv->pool->db, sv->host_idx, sv->addr_idx, sv->n_addrs);
}

/* load_balance_hosts = disable, a host name that does not resolve and a
 * host after it in the list: the next server tries that host at once (the
 * pool does not wait server_login_retry), and later ones stay there. The
 * last host's failure waits as any other, so a list of names that all fail
 * is not tried in a loop. */
static bool next_host_at_once(struct server *sv)
{
	struct database *db = sv->pool->db;
	if (db->load_balance || sv->host_idx + 1 >= db->n_hosts || hostrole_tsa(db) != TSA_ANY)
		return false;
	host_failed(sv);
	return true;
}

/* A login begun under settings a reload has since replaced (the reload
 * marked the pool's logins close_needed): its failure says nothing about
 * the new settings, so it is neither cached nor shared, and the janitor
 * launches the next login under the new ones. */
static bool login_outdated(const struct server *sv)
{
	return sv->state == SERVER_LOGIN && sv->close_needed;
}

/* A login that did not complete: the pool waits server_login_retry before
 * the next one, on the next host when hosts are not balanced (on the next
 * address of the host's name at once). */
static void login_phase_failed(struct server *sv)
{
	if (login_outdated(sv))
		return;
	if (next_address_left(sv))
		return;
	host_failed(sv);
	if (host_skipped_instead(sv))
		return;
	sv->pool->login_failed_at = util_monotonic();
}

/* c-ares answered (or the cache did, synchronously from dns_resolve). */
static void on_resolved(void *arg, enum dns_status st, const struct sockaddr_storage *addrs,
			int n_addrs, const char *errmsg __attribute__((unused)))
{
	struct server *sv = arg;
	sv->dns = NULL;
	sv->dns_pending = false;
	if (st == DNS_CANCELLED)
		return;
	if (st != DNS_OK || n_addrs < 1) {
		if (!next_host_at_once(sv))
			login_phase_failed(sv);
		server_close(sv, "server DNS lookup failed");
		return;
	}
	int a = hostrole_pick_addr(sv->pool->db, sv->host_idx, n_addrs);
	sv->addr_idx = (int8_t)a;
	sv->n_addrs = (int8_t)n_addrs;
	if (connect_to(sv, (const struct sockaddr *)&addrs[a], addr_len(&addrs[a])) < 0) {
		log_msg_errno(LG_WARNING, "S-%llu: %s/%s connect failed", (unsigned long long)sv->id,
			      sv->pool->db->name, sv->pool->user->name);
		login_phase_failed(sv);
		server_close(sv, "connect failed");
	}
}

struct server *server_new(struct pool *p, bool with_slot, int fd)
{
	struct database *db = p->db;
	struct server *sv = xcalloc(1, sizeof(*sv));

	sv->has_slot = with_slot;
	list_init(&sv->close_node);
	/* One counter for every socket, as PgBouncer's; a server that arrives
	 * connected is numbered by its record: from another worker it keeps
	 * its id (server_move.c), so the numbering has no gaps; from the old
	 * process at an online restart it takes a new one (conn_takeover.c). */
	sv->id = fd < 0 ? shm_next_id() : 0;
	sv->pool = p;
	sv->connect_time = sv->last_used = util_monotonic();
	sv->hot_standby = sv->read_only = -1;
	varcache_init(&sv->vars);
	list_init(&sv->node);
	list_append(&p->db->world->all_servers, &sv->all_node);
	sv->state = SERVER_JUSTFREE;   /* not counted until set below */
	list_append(&p->db->world->justfree_servers, &sv->node);
	sv->state = SERVER_LOGIN;
	list_del(&sv->node);
	list_append(&p->login_servers, &sv->node);
	p->n_login++;
	db->n_servers++;
	p->user->n_servers++;
	pool_servers_changed(p);
	sv->welcome_src = !p->welcome_ready;
	stream_init(&sv->s, fd, sv, server_on_pkt, server_on_event);
	sv->s.max_pkt = p->db->world->cfg->max_packet_size > 0 ? (uint32_t)p->db->world->cfg->max_packet_size : 0x7fffffff;
	return sv;
}

static bool launch(struct pool *p, bool with_slot, struct client *owner)
{
	struct database *db = p->db;
	int idx = 0;

	/* round-robin: each launch takes the next host; disable: stay on one
	 * host and move on only when it fails (see connect_failed()). */
	if (db->n_hosts > 1)
		idx = (db->shm_idx >= 0 ? shm_host(db->shm_idx, db->load_balance ? 1 : 0)
		       : (db->load_balance ? db->host_rr++ : db->host_rr)) % db->n_hosts;
	/* target_session_attrs: a host that may serve, none while every one
	 * is in its back-off (the janitor asks again). */
	if (hostrole_tsa(db) != TSA_ANY && owner == NULL && (idx = hostrole_pick(db, idx)) < 0) {
		if (with_slot)
			pool_slot_release(p);
		return false;
	}
	struct server *sv = server_new(p, with_slot, -1);

	if (owner) {
		sv->repl = owner->repl;
		sv->repl_owner = owner;
		owner->repl_server = sv;
	}

	sv->host_idx = idx;
	const char *host = db->hosts[idx];
	struct sockaddr_storage ss;
	socklen_t sslen;
	snprintf(sv->addr, sizeof(sv->addr), "%s", host ? host : "unix");
	sv->port = db->port;
	int rc = build_addr(host, db->port, &ss, &sslen);
	if (rc == -2) {
		sv->dns_pending = true;
		sv->dns = dns_resolve(host, db->port, on_resolved, sv);
		return sv->state != SERVER_JUSTFREE;
	}
	if (rc < 0 || connect_to(sv, (struct sockaddr *)&ss, sslen) < 0) {
		log_msg_errno(LG_WARNING, "S-%llu: %s/%s connect failed", (unsigned long long)sv->id,
			      db->name, p->user->name);
		login_phase_failed(sv);
		server_close(sv, "connect failed");
		return false;
	}
	return true;
}

bool server_launch(struct pool *p, bool with_slot)
{
	return launch(p, with_slot, NULL);
}

bool server_launch_replication(struct client *c, bool with_slot)
{
	return launch(c->pool, with_slot, c);
}


static void send_startup(struct server *sv)
{
	struct pool *p = sv->pool;
	const char *kv[2 * VAR_MAX + 8];
	int n = 0;

	kv[n++] = "user";
	kv[n++] = p->user->name;
	kv[n++] = "database";
	kv[n++] = p->db->dbname;
	/* A walsender takes no SET (physical), so a replication server gets
	 * its client's parameters at startup. */
	const struct varcache *own = sv->repl_owner ? &sv->repl_owner->vars : NULL;
	if (sv->repl != REPL_NONE) {
		kv[n++] = "replication";
		kv[n++] = sv->repl == REPL_LOGICAL ? "database" : "true";
	}
	if (sv->repl_owner && sv->repl_owner->repl_options) {
		kv[n++] = "options";
		kv[n++] = sv->repl_owner->repl_options;
	}
	for (int i = 0; i < varcache_count(); i++) {
		const char *v = own && varcache_get(own, i) ? varcache_get(own, i)
							    : varcache_get(&p->db->startup_vars, i);
		if (v) {
			kv[n++] = varcache_name(i);
			kv[n++] = v;
		}
	}
	kv[n] = NULL;
	/* Until a NegotiateProtocolVersion says less (PostgreSQL before 18). */
	sv->proto_minor = (uint8_t)protover_minor(server_world(sv)->cfg->server_max_protocol_version);
	struct pktbuf pb;
	pktbuf_init(&pb, 256);
	pkt_write_startup(&pb, sv->proto_minor, kv);
	if (!stream_write(&sv->s, &pb)) {
		pktbuf_free(&pb);
		server_close(sv, "could not send startup packet");
		return;
	}
	pktbuf_free(&pb);
}

/* ---- TLS toward the server (server_tls_sslmode, PgBouncer's default
 * "prefer") ---- */

static bool start_server_tls(struct server *sv)
{
	struct tls_conn *t = tls_conn_connect(server_world(sv)->server_tls, sv->s.fd, sv->addr);
	if (!t) {
		server_close(sv, "TLS setup failed");
		return false;
	}
	stream_start_tls(&sv->s, t);
	return true;
}

/* The one-byte answer to SSLRequest: 'S' TLS follows, 'N' plain or give up. */
static void on_ssl_answer(evutil_socket_t fd, short what, void *arg)
{
	struct server *sv = arg;
	char answer = 0;
	ssize_t n = recv(fd, &answer, 1, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		event_add(sv->ssl_ev, NULL);
		return;
	}
	event_free(sv->ssl_ev);
	sv->ssl_ev = NULL;
	if (n == 1 && answer == 'S') {
		(void)start_server_tls(sv);
		return;
	}
	if (n == 1 && answer == 'N' && server_world(sv)->cfg->server_tls_sslmode < SSLMODE_REQUIRE) {
		stream_start_reading(&sv->s);
		send_startup(sv);
		return;
	}
	login_phase_failed(sv);
	server_close(sv, n == 1 && answer == 'N' ? "server refused SSL" : "bad SSL response from server");
}

static void ask_for_tls(struct server *sv)
{
	static const uint8_t ssl_request[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
	int neg = sv->pool->db->sslnegotiation;
	if (neg < 0)
		neg = (int)server_world(sv)->cfg->server_tls_sslnegotiation;
	if (neg == SSLNEG_DIRECT) {
		(void)start_server_tls(sv);     /* PostgreSQL 17+: TLS from the first byte */
		return;
	}
	if (send(sv->s.fd, ssl_request, sizeof(ssl_request), MSG_NOSIGNAL) != (ssize_t)sizeof(ssl_request)) {
		server_close(sv, "could not send SSLRequest");
		return;
	}
	sv->ssl_ev = event_new(server_world(sv)->base, sv->s.fd, EV_READ, on_ssl_answer, sv);
	event_add(sv->ssl_ev, NULL);
}

static void on_connected(struct server *sv)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(sv->s.fd, (struct sockaddr *)&ss, &len) == 0)
		util_format_addr((struct sockaddr *)&ss, sv->laddr, sizeof(sv->laddr), &sv->lport);
	const struct world *w = server_world(sv);
	if (w->cfg->log_connections) {
		char from[sizeof(sv->laddr) + 16];
		log_server(sv, LG_LOG, "new connection to server (from %s)",
			   util_addr_port(from, sizeof(from), sv->laddr, sv->lport));
	}
	/* As PgBouncer: no TLS over Unix sockets; none without a context. */
	if (ss.ss_family != AF_UNIX && w->server_tls && w->cfg->server_tls_sslmode != SSLMODE_DISABLE) {
		ask_for_tls(sv);
		return;
	}
	if (w->cfg->server_tls_sslmode >= SSLMODE_REQUIRE && ss.ss_family != AF_UNIX) {
		server_close(sv, "server TLS required but not configured");
		return;
	}
	stream_start_reading(&sv->s);
	send_startup(sv);
}

/* ---- authentication toward the server ---- */

/* The credential for this pool's server login. */
static const char *server_password(const struct server *sv)
{
	const struct database *db = sv->pool->db;
	if (db->forced_user && db->forced_password)
		return db->forced_password;
	return sv->pool->user->secret;
}

/* PostgreSQL starting up or shutting down (57P03): as in PgBouncer the
 * next login waits server_login_retry, and waiting clients keep waiting
 * (query_wait_timeout) instead of failing with a cached error. */
static void login_refused_for_now(struct server *sv, const char *sqlstate, const char *msg)
{
	sv->pool->login_error[0] = 0;
	login_phase_failed(sv);
	drop_repl_owner(sv, sqlstate, msg);
	server_close(sv, msg);
}

/* As PgBouncer: "server login failed: FATAL <message>" (no connection
 * prefix) for PostgreSQL's own error (severity given), and the server
 * closes with the message. */
static void login_failed_tell(struct server *sv, const char *sqlstate, const char *msg);

static void login_failed_sev(struct server *sv, const char *severity, const char *sqlstate,
			     const char *msg)
{
	if (severity)
		log_warning("server login failed: %s %s", severity, msg);
	else
		log_server(sv, LG_WARNING, "server login failed: %s", msg);
	login_failed_tell(sv, sqlstate, msg);
}

/* The login failed with msg: the pool's waiters are told, later logins
 * within server_login_retry get the cached error. */
static void login_failed_tell(struct server *sv, const char *sqlstate, const char *msg)
{
	struct pool *p = sv->pool;
	if (sqlstate && strcmp(sqlstate, "57P03") == 0) {
		login_refused_for_now(sv, sqlstate, msg);
		return;
	}
	if (login_outdated(sv) && sv->repl == REPL_NONE) {
		server_close(sv, msg);
		return;
	}
	host_failed(sv);
	if (sv->repl != REPL_NONE) {
		/* Only its own client is told (PostgreSQL's words): a failed
		 * walsender login says nothing about the pool's other logins. */
		drop_repl_owner(sv, sqlstate && *sqlstate ? sqlstate : "08P01", msg);
		server_close(sv, msg);
		return;
	}
	snprintf(p->login_error, sizeof(p->login_error), "%s", msg);
	snprintf(p->login_error_code, sizeof(p->login_error_code), "%s", sqlstate && *sqlstate ? sqlstate : "08P01");
	p->login_failed_at = util_monotonic();
	pool_login_failed_share(p);
	drop_repl_owner(sv, p->login_error_code, p->login_error);
	server_close(sv, p->login_error);
	pool_login_failed_tell(p);
}

static void login_failed(struct server *sv, const char *sqlstate, const char *msg)
{
	login_failed_sev(sv, NULL, sqlstate, msg);
}

/* The secret cannot answer what the server asks: PgBouncer's log line
 * (why) and its error for the pool's waiters. */
static void login_wrong_password_type(struct server *sv, const char *why)
{
	log_server(sv, LG_ERROR, "%s", why);
	login_failed_tell(sv, "08P01", "server login failed: wrong password type");
}

static bool send_pb(struct server *sv, struct pktbuf *pb)
{
	bool ok = stream_write(&sv->s, pb);
	pktbuf_free(pb);
	if (!ok)
		server_close(sv, "send failed");
	return ok;
}

static bool auth_md5(struct server *sv, const uint8_t *salt)
{
	const char *pw = server_password(sv);
	char hash[36], resp[36];
	struct pktbuf pb;

	switch (userlist_secret_kind(pw)) {
	case USERLIST_PLAIN:
		md5_password_hash(sv->pool->user->name, pw, hash);
		break;
	case USERLIST_MD5:
		strlcpy_(hash, pw, sizeof(hash));
		break;
	default:
		login_wrong_password_type(sv, "cannot do MD5 authentication: wrong password type");
		return false;
	}
	md5_salted(hash, salt, resp);
	pktbuf_init(&pb, 64);
	pkt_write_password(&pb, resp);
	return send_pb(sv, &pb);
}

static bool auth_cleartext(struct server *sv)
{
	const char *pw = server_password(sv);
	struct pktbuf pb;
	if (userlist_secret_kind(pw) != USERLIST_PLAIN) {
		login_failed(sv, "28000", "cannot do cleartext authentication: the password is not plaintext");
		return false;
	}
	pktbuf_init(&pb, 64);
	pkt_write_password(&pb, pw);
	return send_pb(sv, &pb);
}

static bool sasl_mech_offered(struct pkt_reader *r, const char *mech)
{
	bool found = false;
	for (int i = 0; i < 16 && !r->failed; i++) {
		const char *m = pkt_get_string(r);
		if (!*m)
			break;
		if (strcmp(m, mech) == 0)
			found = true;
	}
	return found;
}

/* What answers the server's SCRAM: a plain password (*pw) or the keys
 * learned from the client's proof (*keys); false (login failed, as
 * PgBouncer) when the secret can do neither. */
static bool scram_credentials(struct server *sv, const char **pw, const struct scram_secret **keys)
{
	const struct puser *u = sv->pool->user;

	*pw = server_password(sv);
	*keys = NULL;
	switch (userlist_secret_kind(*pw)) {
	case USERLIST_PLAIN:
		return true;
	case USERLIST_SCRAM:
		if (!(sv->pool->db->forced_user && sv->pool->db->forced_password) && u->has_scram_keys) {
			*keys = &u->scram_keys;
			*pw = NULL;
			return true;
		}
		login_wrong_password_type(sv, "cannot do SCRAM authentication: password is SCRAM secret "
					  "but client authentication did not provide SCRAM keys");
		return false;
	default:
		login_wrong_password_type(sv, "cannot do SCRAM authentication: wrong password type");
		return false;
	}
}

static bool auth_sasl_start(struct server *sv, struct pkt_reader *r)
{
	char out[512];
	size_t n = 0;
	struct pktbuf pb;

	struct pkt_reader again = *r;
	bool plus = sv->s.tls && sasl_mech_offered(&again, "SCRAM-SHA-256-PLUS");
	if (!sasl_mech_offered(r, "SCRAM-SHA-256")) {
		login_failed(sv, "28000", "server offered no supported SASL mechanism");
		return false;
	}
	const char *pw;
	const struct scram_secret *keys;
	if (!scram_credentials(sv, &pw, &keys))
		return false;
	free(sv->scram);
	sv->scram = xcalloc(1, sizeof(*sv->scram));
	/* Over TLS, channel binding when the server offers it (as libpq's
	 * default channel_binding=prefer); a certificate whose hash we cannot
	 * take falls back to plain SCRAM. */
	uint8_t cbind[64];
	size_t cbind_len = sizeof(cbind);
	plus = plus && tls_conn_server_end_point(sv->s.tls, cbind, &cbind_len);
	int rc = plus ? scram_client_first_plus(sv->scram, cbind, cbind_len, out, sizeof(out), &n)
		      : scram_client_first(sv->scram, out, sizeof(out), &n);
	if (rc < 0) {
		login_failed(sv, "28000", "SCRAM: could not build client-first-message");
		return false;
	}
	if (log_verbose >= 1)
		log_server(sv, LG_DEBUG, "SASL mechanism=%s", plus ? "SCRAM-SHA-256-PLUS" : "SCRAM-SHA-256");
	pktbuf_init(&pb, 128);
	pkt_write_sasl_initial(&pb, plus ? "SCRAM-SHA-256-PLUS" : "SCRAM-SHA-256", out, n);
	return send_pb(sv, &pb);
}

static bool auth_sasl_continue(struct server *sv, const uint8_t *msg, size_t len)
{
	const char *pw = NULL;
	const struct scram_secret *keys = NULL;
	const char *err = NULL;
	char out[1024];
	size_t n = 0;
	struct pktbuf pb;

	if (!sv->scram) {
		login_failed(sv, "08P01", "SCRAM: unexpected SASLContinue");
		return false;
	}
	if (!scram_credentials(sv, &pw, &keys))
		return false;
	if (scram_client_final(sv->scram, (const char *)msg, len, pw, keys, out, sizeof(out), &n, &err) < 0) {
		login_failed(sv, "28000", err ? err : "SCRAM: bad server-first-message");
		return false;
	}
	pktbuf_init(&pb, n + 16);
	pkt_write_sasl_response(&pb, out, n);
	return send_pb(sv, &pb);
}

static bool auth_sasl_final(struct server *sv, const uint8_t *msg, size_t len)
{
	const char *err = NULL;
	if (!sv->scram || scram_client_verify(sv->scram, (const char *)msg, len, &err) < 0) {
		login_failed(sv, "28000", err ? err : "SCRAM: server signature mismatch");
		return false;
	}
	free(sv->scram);
	sv->scram = NULL;
	return true;
}

static void handle_auth(struct server *sv, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	uint32_t code = pkt_get_u32(&r);

	switch (code) {
	case 0:
		/* In: the SCRAM state is heap during login only, also when the
		 * server did not finish the exchange (libpq accepts that). */
		free(sv->scram);
		sv->scram = NULL;
		break;
	case 3:
		auth_cleartext(sv);
		break;
	case 5: {
		const uint8_t *salt = pkt_get_bytes(&r, 4);
		if (!salt || r.failed)
			login_failed(sv, "08P01", "bad md5 authentication request");
		else
			auth_md5(sv, salt);
		break;
	}
	case 10:
		auth_sasl_start(sv, &r);
		break;
	case 11:
		auth_sasl_continue(sv, body + 4, len - 4);
		break;
	case 12:
		auth_sasl_final(sv, body + 4, len - 4);
		break;
	default:
		login_failed(sv, "08P01", "unsupported authentication method requested by server");
	}
}

/* ---- ParameterStatus ---- */

/* target_session_attrs: does sv's host, with the role sv reports, still
 * serve its pool's database? The role is remembered (every worker reads
 * it); a host that does not serve is skipped a moment and, with
 * load_balance_hosts = disable, left for the next one. Replication
 * servers, `any` and a server reporting no role (PostgreSQL < 14) serve. */
static bool host_serves(struct server *sv)
{
	struct database *db = sv->pool->db;
	enum host_role r = hostrole_of_server(sv);
	if (hostrole_tsa(db) == TSA_ANY || sv->repl != REPL_NONE || r == ROLE_UNKNOWN)
		return true;
	if (hostrole_serves(db, sv->host_idx, r)) {
		hostrole_note(db, sv->host_idx, r);
		return true;
	}
	if (next_address_left(sv))
		return false;           /* the host's role is the one its next address reports */
	hostrole_note(db, sv->host_idx, r);
	hostrole_skip(db, sv->host_idx);
	host_failed(sv);
	return false;
}

/* A server reporting a role that no longer serves (a promotion, a
 * demotion, read-only by default now) is not handed out again; a busy one
 * finishes its transaction first. */
static void role_changed(struct server *sv)
{
	if (host_serves(sv))
		return;
	sv->close_needed = true;
	sv->close_reason = "server role changed";
}

/* in_hot_standby and default_transaction_read_only (reported by
 * PostgreSQL 14+): the server's role, checked at login and on change. */
static void note_role_param(struct server *sv, const char *k, const char *v)
{
	int8_t *f = strcmp(k, "in_hot_standby") == 0 ? &sv->hot_standby
		    : strcmp(k, "default_transaction_read_only") == 0 ? &sv->read_only : NULL;
	if (!f)
		return;
	int8_t on = strcmp(v, "on") == 0;
	bool changed = *f != on;
	*f = on;
	if (changed && sv->state != SERVER_LOGIN)
		role_changed(sv);
}

static void handle_param(struct server *sv, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	const char *k = pkt_get_string(&r);
	const char *v = pkt_get_string(&r);
	if (r.failed)
		return;
	note_role_param(sv, k, v);
	bool tracked = varcache_set(&sv->vars, k, v);
	if (sv->state == SERVER_LOGIN && sv->welcome_src && !tracked)
		pool_welcome_param(sv->pool, k, v);
	if (sv->link && tracked)
		varcache_set(&sv->link->vars, k, v);
}

/* ---- login phase ---- */

/* target_session_attrs at login: a server whose host does not serve the
 * database is closed before anyone sees it (the janitor opens the next). */
static bool role_at_login(struct server *sv)
{
	if (host_serves(sv))
		return true;
	log_server(sv, LG_LOG, "server does not match target_session_attrs=%s (role=%s)",
		   tsa_name(hostrole_tsa(sv->pool->db)), host_role_name(hostrole_of_server(sv)));
	server_close(sv, "target_session_attrs mismatch");
	return false;
}

/* PostgreSQL < 14 reported no role at login: a pool that asks for one
 * asks the server (HOSTROLE_QUERY) before anyone gets it. */
static bool role_query_needed(const struct server *sv)
{
	return hostrole_tsa(sv->pool->db) != TSA_ANY && sv->repl == REPL_NONE &&
	       hostrole_of_server(sv) == ROLE_UNKNOWN;
}

/* The login is over and the role known: the server is checked against
 * target_session_attrs, then runs connect_query or joins its pool. */
static void role_known(struct server *sv)
{
	struct pool *p = sv->pool;

	if (!role_at_login(sv))
		return;
	p->login_failed_at = 0;
	p->login_error[0] = 0;
	hist_phase_observe(HIST_PHASE_SERVER_LOGIN, (uint64_t)(util_monotonic() - sv->connect_time));
	sv->welcome_src = false;
	bool welcome = !p->welcome_ready;
	if (welcome)
		pool_welcome_store(p, &sv->vars);
	if (!sv->repl_owner && !p->db->connect_query) {
		/* It joins its pool before the clients hear the welcome: once a
		 * client has it, the other workers see this server idle here (to
		 * move) and the supervisor has the copy, so the next client
		 * elsewhere opens no second server. */
		pool_server_ready(sv);
		if (welcome)
			pool_welcome_release(p);
		return;
	}
	if (welcome) {
		pool_welcome_release(p);
		/* Welcoming may close a client, and a replication client takes
		 * its own server with it: this one may be gone now. */
		if (sv->state == SERVER_JUSTFREE)
			return;
	}
	if (sv->repl_owner) {
		pool_link_replication(sv);
		return;
	}
	server_run_internal(sv, SI_CONNECT_QUERY, p->db->connect_query);
}

static void login_complete(struct server *sv)
{
	shm_note_login(SHM_LOGIN_SERVER, sv->proto_minor);
	if (role_query_needed(sv)) {
		server_run_internal(sv, SI_ROLE_QUERY, HOSTROLE_QUERY);
		return;
	}
	role_known(sv);
}

/* HOSTROLE_QUERY answered (its DataRow set hot_standby and read_only). A
 * server that could not say is treated as a failed login. */
static void role_answered(struct server *sv)
{
	if (hostrole_of_server(sv) == ROLE_UNKNOWN) {
		log_server(sv, LG_WARNING, "target_session_attrs: no answer to the role query");
		login_phase_failed(sv);
		server_close(sv, "role query failed");
		return;
	}
	role_known(sv);
}

/* BackendKeyData: the pid, then the secret to the end of the message (4
 * bytes before protocol 3.2; 4 to 256 from 3.2, 32 from PostgreSQL 18). */
static bool backend_key(struct server *sv, const uint8_t *body, size_t blen)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, blen);
	uint32_t pid = pkt_get_u32(&r);
	return !r.failed && cancelkey_set(&sv->be, sv->proto_minor, pid, body + r.pos, blen - r.pos);
}

/* NegotiateProtocolVersion: the server speaks an older minor version (a
 * PostgreSQL before 18 answers 3.0 to our 3.2); the options it lists are
 * none of ours, since we send none. A version above the one asked, or of
 * another major, is a protocol violation. */
static bool negotiated(struct server *sv, const uint8_t *body, size_t blen)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, blen);
	uint32_t version = pkt_get_u32(&r);
	uint32_t n = pkt_get_u32(&r);
	for (uint32_t i = 0; i < n && !r.failed; i++)
		(void)pkt_get_string(&r);
	if (!pkt_get_end(&r) || PROTO_MAJOR(version) != 3 || PROTO_MINOR(version) > sv->proto_minor)
		return false;
	sv->proto_minor = (uint8_t)PROTO_MINOR(version);
	server_debug(sv, "server speaks protocol 3.%u", PROTO_MINOR(version));
	return true;
}

static enum stream_action login_pkt(struct server *sv, const struct pkt_hdr *h,
				    const uint8_t *data, size_t avail)
{
	if (h->type == 'N')
		return SA_SKIP;     /* a notice at login reaches nobody: never read whole */
	if (avail < h->len)
		return SA_NEED_FULL;
	const uint8_t *body = data + 5;
	size_t blen = h->len - 5;

	switch (h->type) {
	case 'R':
		handle_auth(sv, body, blen);
		break;
	case 'S':
		handle_param(sv, body, blen);
		break;
	case 'K':
		if (!backend_key(sv, body, blen)) {
			login_failed(sv, "08P01", "invalid BackendKeyData from server");
			return SA_STOP;
		}
		break;
	case 'v':
		if (!negotiated(sv, body, blen)) {
			login_failed(sv, "08P01", "invalid NegotiateProtocolVersion from server");
			return SA_STOP;
		}
		break;
	case 'E': {
		struct pg_error e;
		if (!pkt_parse_error(body, blen, &e))
			login_failed(sv, "08P01", "malformed ErrorResponse from server");
		else {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", e.message);
			login_failed_sev(sv, e.severity && *e.severity ? e.severity : "FATAL", e.sqlstate, msg);
		}
		return SA_STOP;
	}
	case 'Z':
		sv->ready_status = blen >= 1 ? (char)body[0] : 'I';
		login_complete(sv);
		break;
	default:
		login_failed(sv, "08P01", "unexpected message from server during login");
		return SA_STOP;
	}
	return sv->s.closed ? SA_STOP : SA_CONSUMED;
}

/* ---- internal queries ---- */

bool server_run_internal(struct server *sv, enum server_internal why, const char *sql)
{
	struct pktbuf pb;
	/* PgBouncer's spelling for "send an empty query". */
	if (strcmp(sql, "<empty>") == 0)
		sql = "";
	pktbuf_init(&pb, strlen(sql) + 8);
	pkt_write_query(&pb, sql);
	sv->internal = why;
	psrelay_server_sql(sv, sql);
	/* A server that no client holds counts as tested while it runs one
	 * (connect_query or role query after login, check, reset after
	 * release or after its cancels were answered), as in PgBouncer
	 * (sv_tested); one running SET for its client stays active. */
	if (!sv->link && sv->state != SERVER_TESTED)
		server_set_state(sv, SERVER_TESTED);
	server_debug(sv, "internal query: %s", sql);
	return send_pb(sv, &pb);
}

/* After our SET: the server's spelling of each value the client set
 * replaces the client's (utf-8 -> UTF8, ISO -> ISO, MDY), as PgBouncer's
 * varcache_set_canonical does. PostgreSQL reports a parameter only when its
 * value changes, so an equal value in another spelling would otherwise be
 * SET again on every server the client meets. */
static void set_canonical(struct server *sv, struct client *c)
{
	for (int i = 0; i < varcache_count(); i++) {
		const char *want = varcache_get(&c->vars, i), *have = varcache_get(&sv->vars, i);
		if (!want || !have || strcmp(want, have) == 0)
			continue;
		if (log_verbose >= 1)
			log_client(c, LG_DEBUG, "varcache_set_canonical: setting %s to its canonical version %s -> %s",
				   varcache_name(i), want, have);
		varcache_set(&c->vars, varcache_name(i), have);
	}
}

static void internal_done(struct server *sv, char status)
{
	enum server_internal why = sv->internal;
	sv->expect_rfq = 0;
	sv->unsynced = false;
	sv->internal = SI_NONE;
	sv->ready_status = status;

	if (status != 'I' && why != SI_SETVARS) {
		server_close(sv, "internal query left a transaction open");
		return;
	}
	switch (why) {
	case SI_SETVARS:
		if (sv->link) {
			set_canonical(sv, sv->link);
			client_server_linked(sv->link);
		} else if (status == 'I') {
			pool_server_ready(sv);      /* its client left meanwhile */
		} else {
			server_close(sv, "client disconnect while server was not ready");
		}
		break;
	case SI_ROLE_QUERY:
		role_answered(sv);
		break;
	default:
		pool_server_ready(sv);
	}
}

static enum stream_action internal_pkt(struct server *sv, const struct pkt_hdr *h,
				       const uint8_t *data, size_t avail)
{
	bool role_row = h->type == 'D' && sv->internal == SI_ROLE_QUERY;
	if (h->type != 'Z' && h->type != 'E' && h->type != 'S' && !role_row)
		return SA_SKIP;
	if (avail < h->len)
		return SA_NEED_FULL;
	const uint8_t *body = data + 5;
	size_t blen = h->len - 5;
	if (role_row) {
		(void)hostrole_parse_row(body, blen, &sv->hot_standby, &sv->read_only);
	} else if (h->type == 'S') {
		handle_param(sv, body, blen);
	} else if (h->type == 'E') {
		struct pg_error e;
		if (pkt_parse_error(body, blen, &e))
			log_server(sv, LG_WARNING, "pooler query failed: %s", e.message);
	} else {
		if (h->len < 6)
			return SA_STOP;
		internal_done(sv, (char)body[0]);
	}
	return sv->s.closed ? SA_STOP : SA_CONSUMED;
}

/* ---- relay ---- */

static void ready_for_query(struct server *sv, char status)
{
	struct client *c = sv->link;
	struct pool *p = sv->pool;
	usec_t now = util_monotonic();

	sv->ready_status = status;
	if (sv->expect_rfq > 0)
		sv->expect_rfq--;
	if (!c)
		return;
	if (c->query_running && sv->expect_rfq == 0) {
		p->stats.query_time += (uint64_t)(now - c->query_start);
		hist_pool_observe(p->hist, HIST_QUERY, (uint64_t)(now - c->query_start));
		c->query_running = false;
	}
	bool was_xact = c->in_xact;
	c->in_xact = status != 'I';
	if (!c->in_xact && c->xact_start_set) {
		p->stats.xact_count++;
		p->stats.xact_time += (uint64_t)(now - c->xact_start);
		hist_pool_observe(p->hist, HIST_XACT, (uint64_t)(now - c->xact_start));
		c->xact_start_set = false;
	}
	(void)was_xact;
	c->last_activity = now;
	client_account_bytes(c);
	int mode = pool_mode_of(p);
	if (mode == POOL_STATEMENT && status != 'I') {
		client_close(c, true, "transaction blocks not allowed in statement pooling mode");
		return;
	}
	/* Pipelined requests still owe ReadyForQuery: keep the link. A session
	 * keeps its server, unless server_fast_close retires an outdated one
	 * at the end of its transaction. */
	if (mode == POOL_SESSION && sv->close_needed && server_world(sv)->cfg->server_fast_close &&
	    status == 'I' && sv->expect_rfq == 0) {
		server_close_with_client(sv, "database configuration changed");
		return;
	}
	/* Nor while the client's next message is still coming in for this
	 * server (a CopyData, say, which owes no answer): the rest of it
	 * would go to whatever the server does next. The next
	 * ReadyForQuery releases it. */
	if (mode != POOL_SESSION && status == 'I' && sv->expect_rfq == 0 && !sv->unsynced &&
	    sv->repl == REPL_NONE && !stream_forwarding_to(&c->s, &sv->s))
		server_release(sv);
}

/* A read-write database's server answering 25006 (read-only transaction)
 * is on a host that stopped taking writes, or the client asked for a
 * read-only transaction: either way it is not handed out again. Only the
 * SQLSTATE is read: the error may be far larger than the buffer. */
static enum stream_action read_only_error(struct server *sv, const struct pkt_hdr *h,
					  const uint8_t *data, size_t avail)
{
	if (hostrole_tsa(sv->pool->db) != TSA_READ_WRITE)
		return SA_FORWARD;
	switch (pkt_error_is(data + 5, avail - 5, h->len - 5, "25006", NULL)) {
	case PKT_MATCH_NEED_MORE:
		return SA_NEED_MORE;
	case PKT_MATCH_YES:
		sv->close_needed = true;
		sv->close_reason = "server is read-only";
		break;
	case PKT_MATCH_NO:
		break;
	}
	return SA_FORWARD;
}

static enum stream_action active_pkt(struct server *sv, const struct pkt_hdr *h,
				     const uint8_t *data, size_t avail)
{
	if (psrelay_server_watch(sv, h->type)) {
		const char *why = NULL;
		enum stream_action act = psrelay_server_pkt(sv, h, data, avail, &why);
		if (why) {
			client_close(sv->link, false, why);
			return SA_STOP;
		}
		if (act != SA_FORWARD)
			return act;
	}
	switch (h->type) {
	case 'Z':
		if (avail < h->len)
			return SA_NEED_FULL;
		if (h->len != 6) {
			server_close(sv, "bad ReadyForQuery");
			return SA_STOP;
		}
		ready_for_query(sv, (char)data[5]);
		return sv->s.closed ? SA_STOP : SA_FORWARD;
	case 'S':
		if (avail < h->len)
			return SA_NEED_FULL;
		handle_param(sv, data + 5, h->len - 5);
		return SA_FORWARD;
	case 'E':
		return read_only_error(sv, h, data, avail);
	default:
		return SA_FORWARD;
	}
}

static enum stream_action server_on_pkt(struct stream *s, const struct pkt_hdr *h,
					const uint8_t *data, size_t avail)
{
	struct server *sv = s->owner;

	if (sv->state == SERVER_LOGIN)
		return login_pkt(sv, h, data, avail);
	if (sv->internal == SI_AUTH_QUERY)
		return authquery_server_pkt(sv, h, data, avail);
	if (sv->internal != SI_NONE)
		return internal_pkt(sv, h, data, avail);
	if (sv->link)
		return active_pkt(sv, h, data, avail);
	/* Idle: only asynchronous messages are acceptable. */
	if (h->type == 'N' || h->type == 'S' || h->type == 'A')
		return SA_SKIP;
	server_close(sv, "idle server got unexpected data");
	return SA_STOP;
}

static void server_on_event(struct stream *s, enum stream_event ev)
{
	struct server *sv = s->owner;

	switch (ev) {
	case SE_CONNECTED:
		on_connected(sv);
		break;
	case SE_CONNECT_FAILED:
		log_msg_errno(LG_WARNING, "S-%llu: %s/%s@%s:%d connect failed", (unsigned long long)sv->id,
			      sv->pool->db->name, sv->pool->user->name, sv->addr, sv->port);
		login_phase_failed(sv);
		server_close(sv, "connect failed");
		break;
	case SE_EOF:
		if (sv->state == SERVER_LOGIN)
			login_phase_failed(sv);
		server_close(sv, sv->state == SERVER_IDLE ? "server closed connection" : "server conn crashed?");
		break;
	case SE_ERROR:
		if (sv->state == SERVER_LOGIN)
			login_phase_failed(sv);
		server_close(sv, s->errmsg ? s->errmsg : "server connection error");
		break;
	case SE_TLS_READY:
		stream_start_reading(&sv->s);
		send_startup(sv);
		break;
	default:
		break;
	}
}

/* ---- release ---- */

void server_release(struct server *sv)
{
	(void)link_detach_server(sv, LINK_RELEASE);
	if (sv->cancels_pending > 0) {
		server_set_state(sv, SERVER_BEING_CANCELED);
		return;
	}
	const struct config *cfg = server_world(sv)->cfg;
	if (cfg->server_reset_query_always && cfg->server_reset_query[0]) {
		server_run_internal(sv, SI_RESET, cfg->server_reset_query);
		return;
	}
	pool_server_released(sv);
}

/* Every cancel for sv has been answered (cancel_set_server_done). */
void server_cancels_done(struct server *sv)
{
	if (sv->state == SERVER_BEING_CANCELED) {
		server_client_gone(sv);
		return;
	}
	struct client *c = sv->link;
	if (c && c->held_for_cancel) {
		c->held_for_cancel = false;
		stream_resume(&c->s);
	}
}

/* server_fast_close: the server and its session client go together, the
 * client told why (PgBouncer's behaviour: the session's state is gone). */
void server_close_with_client(struct server *sv, const char *reason)
{
	struct client *c = link_detach_server(sv, LINK_BOTH_GO);
	server_close(sv, reason);
	if (c)
		client_close_sqlstate(c, "08P01", reason);
}

/* Released from inside its own message callback: closing now would lose the
 * ReadyForQuery being forwarded, so park it (unusable) and close it from
 * the reaper, after this loop iteration has sent what it routed. */
void server_close_soon(struct server *sv, const char *reason)
{
	sv->close_needed = true;
	sv->close_reason = reason;
	server_set_state(sv, SERVER_IDLE);
	list_del(&sv->close_node);
	list_append(&server_world(sv)->closing_servers, &sv->close_node);
	world_schedule_reap(server_world(sv));
}

void server_client_gone(struct server *sv)
{
	struct client *c = sv->link;
	/* A pipeline without its Sync yet leaves the backend mid-request too. */
	bool busy = c && (c->query_running || sv->unsynced);

	(void)link_detach_server(sv, LINK_CLIENT_GONE);
	psrelay_client_gone(sv);
	if (sv->repl != REPL_NONE) {
		/* Never pooled: a walsender goes with its client. */
		sv->repl_owner = NULL;
		if (c)
			c->repl_server = NULL;
		server_close(sv, "replication client gone");
		return;
	}
	if (c && stream_forwarding_to(&c->s, &sv->s)) {
		/* The server has part of a message of the client's (a header
		 * announced more than came) or bytes of it are still queued: it
		 * would read the next client's bytes as the rest. */
		server_close(sv, "client disconnect before everything was sent to the server");
		return;
	}
	if (sv->internal == SI_SETVARS) {
		/* The answer to the SET made for this client is still to come:
		 * given to the next client now, it would answer that client's
		 * query. The server is ready once it has come (internal_done). */
		server_set_state(sv, SERVER_TESTED);
		return;
	}
	if (busy) {
		/* Do not leave the query running: cancel it, then drop the server. */
		(void)cancel_send(sv, NULL);
		server_close(sv, "client disconnect while server was not ready");
		return;
	}
	if (sv->ready_status != 'I' && sv->ready_status != 0) {
		server_close(sv, "client disconnect while server was not ready");
		return;
	}
	if (sv->cancels_pending > 0) {
		server_set_state(sv, SERVER_BEING_CANCELED);
		return;
	}
	const struct config *cfg = server_world(sv)->cfg;
	if (cfg->server_reset_query[0] &&
	    (pool_mode_of(sv->pool) == POOL_SESSION || cfg->server_reset_query_always)) {
		server_run_internal(sv, SI_RESET, cfg->server_reset_query);
		return;
	}
	pool_server_released(sv);
}

/* pgcrew — online restart, the worker's side (conn_takeover.h). The old
 * process sends each client that is at rest (logged in, no query or
 * transaction open, nothing buffered) through its supervisor to the new
 * one, followed by its server when they are linked; idle servers follow
 * when their pool has no client left here. Busy ones finish first. */
#include "conn_takeover.h"
#include "auth/scram.h"
#include "cancel.h"
#include "client.h"
#include "handover.h"
#include "ipc.h"
#include "log.h"
#include "pool.h"
#include "prepared.h"
#include "proto/build.h"
#include "server.h"
#include "server_move.h"
#include "shm.h"
#include "stream.h"
#include "util.h"
#include "varcache.h"
#include "world.h"

#include <event2/event.h>
#include <unistd.h>

#define SWEEP_USEC (10 * 1000)
/* A client that arrived linked waits this long for its server. */
#define PAIR_WAIT_USEC (1000 * 1000)

static struct event *sweep_ev;
static bool sweeping;
static uint64_t clients_given, servers_given;

void conn_takeover_counts(uint64_t *clients, uint64_t *servers)
{
	*clients = clients_given;
	*servers = servers_given;
}

/* ---- old process: giving ---- */

static bool client_at_rest(const struct client *c)
{
	/* A proxied client's address is the PROXY header's: the record does
	 * not carry it, so it stays (as a TLS one does). */
	if (c->state != CLIENT_ACTIVE || c->repl != REPL_NONE || c->s.tls || c->proxied || !c->pool ||
	    c->s.fd < 0 || c->s.closed || c->query_running || c->in_xact || c->fanout ||
	    c->admin_ext || c->authq || c->auth_job || c->scram)
		return false;
	if (!stream_flushed(&c->s) || stream_unprocessed(&c->s) || !ps_client_movable(c->ps))
		return false;
	return !c->link || (c->link->state == SERVER_ACTIVE && server_at_rest(c->link));
}

static void fill_client(const struct client *c, struct handover_client *h)
{
	const struct puser *u = c->login_user;
	memset(h, 0, sizeof(*h));
	strlcpy_(h->db, c->pool->db->name, sizeof(h->db));
	strlcpy_(h->user, c->pool->user->name, sizeof(h->user));
	strlcpy_(h->login_user, u ? u->name : "", sizeof(h->login_user));
	strlcpy_(h->db_name, c->db_name, sizeof(h->db_name));
	strlcpy_(h->user_name, c->user_name, sizeof(h->user_name));
	cancelkey_from_own(&h->key, &c->key);
	h->proto_minor = c->proto_minor;
	h->connect_time = c->connect_time;
	h->last_activity = c->last_activity;
	h->sent_at = util_monotonic();
	h->is_unix = c->is_unix;
	h->linked = c->link != NULL;
	h->passthrough_ok = c->passthrough_ok;
	h->admin = c->admin;
	h->stats_only = c->stats_only;
	h->local_admin = c->local_admin;
	/* The new process may not know a user found by auth_query or LDAP/PAM,
	 * nor a ClientKey learned from a proof: it keeps its own if it has one. */
	h->has_secret = u && u->secret[0];
	if (h->has_secret)
		strlcpy_(h->secret, u->secret, sizeof(h->secret));
	h->has_keys = u && u->has_scram_keys;
}

static bool give_client(struct client *c)
{
	struct handover_client h;
	struct pktbuf pb;
	struct server *sv = c->link;

	fill_client(c, &h);
	pktbuf_init(&pb, 512);
	bool sent = handover_client_encode(&pb, &h, h.has_keys ? &c->login_user->scram_keys : NULL,
					   &c->vars, c->ps) &&
		    ipc_send(c->world->sup, IPC_TAKEN_CLIENT, (uint32_t)c->world->id, pb.buf, (uint32_t)pb.len,
			     c->s.fd) == 0;
	pktbuf_free(&pb);
	if (!sent)
		return false;
	log_client(c, LG_DEBUG, "handed over to the new process");
	if (sv) {
		pool_unlink_leaving(c, sv);
		if (server_send(sv, IPC_TAKEN_SERVER, (uint32_t)c->world->id | IPC_TAKEN_PAIRED, c))
			servers_given++;
		else
			server_close(sv, "could not hand over to the new process");
	}
	clients_given++;
	client_forget(c);
	return true;
}

/* An idle server goes once its pool has no client here: the clients that
 * stay (TLS, busy) keep using the pool's servers. */
static bool server_idle_here(const struct server *sv)
{
	return sv->state == SERVER_IDLE && !sv->link && !sv->close_needed && server_at_rest(sv) &&
	       sv->pool->n_waiting_clients == 0 && sv->pool->n_active_clients == 0;
}

static void give_idle_servers(struct world *w)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &w->all_servers) {
		struct server *sv = container_of(it, struct server, all_node);
		if (!server_idle_here(sv))
			continue;
		if (server_send(sv, IPC_TAKEN_SERVER, (uint32_t)w->id, NULL))
			servers_given++;
	}
}

static void sweep(struct world *w)
{
	struct list *it, *tmp;
	sweeping = true;
	list_for_each_safe(it, tmp, &w->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (client_at_rest(c))
			(void)give_client(c);
	}
	give_idle_servers(w);
	sweeping = false;
	world_check_shutdown(w);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	sweep(arg);
}

void conn_takeover_start(struct world *w)
{
	struct timeval tv = { 0, SWEEP_USEC };
	if (sweep_ev)
		return;
	log_info("online restart: handing idle clients and servers to the new process");
	sweep_ev = event_new(w->base, -1, EV_PERSIST, on_sweep, w);
	event_add(sweep_ev, &tv);
	sweep(w);
}

bool conn_takeover_last_servers(struct world *w)
{
	if (sweeping)
		return false;
	sweeping = true;
	give_idle_servers(w);
	sweeping = false;
	if (sweep_ev) {
		event_free(sweep_ev);
		sweep_ev = NULL;
		log_info("online restart: handed %llu clients and %llu servers to the new process",
			 (unsigned long long)clients_given, (unsigned long long)servers_given);
	}
	return true;
}

/* ---- new process: taking ---- */

/* Clients that arrived linked, until their server comes: as many as
 * arrive (a session-mode instance hands every client over linked); the
 * array goes when the last one is paired. */
static struct pending {
	struct cancelkey_own key;
	usec_t since;
} *pending;
static int n_pending, cap_pending;
static struct event *pending_ev;

static void on_pending_check(evutil_socket_t fd, short what, void *arg)
{
	usec_t now = util_monotonic();
	int kept = 0;
	for (int i = 0; i < n_pending; i++) {
		struct client *c = cancel_find_own(&pending[i].key);
		if (!c || c->link)
			continue;
		if (now - pending[i].since < PAIR_WAIT_USEC) {
			pending[kept++] = pending[i];
			continue;
		}
		/* Its session's server never came: the session state is gone. */
		client_close(c, true, "server conn crashed?");
	}
	n_pending = kept;
	if (n_pending > 0) {
		struct timeval tv = { 0, 100 * 1000 };
		event_add(pending_ev, &tv);
		return;
	}
	free(pending);
	pending = NULL;
	cap_pending = 0;
}

static void await_server(struct client *c)
{
	struct timeval tv = { 0, 100 * 1000 };
	if (n_pending == cap_pending) {
		cap_pending = cap_pending ? 2 * cap_pending : 16;
		pending = xrealloc(pending, (size_t)cap_pending * sizeof(*pending));
	}
	pending[n_pending++] = (struct pending){ c->key, util_monotonic() };
	if (!pending_ev)
		pending_ev = event_new(c->world->base, -1, 0, on_pending_check, NULL);
	if (!event_pending(pending_ev, EV_TIMEOUT, NULL))
		event_add(pending_ev, &tv);
}

/* What the old process knew of the login user and this process does not. */
static void learn_user(struct puser *u, const struct handover_client *h, const struct scram_secret *keys)
{
	if (h->has_secret && !u->secret[0]) {
		pool_user_set_secret(u, h->secret);
		u->authq_secret = true;
	}
	if (h->has_keys && !u->has_scram_keys) {
		u->scram_keys = *keys;
		u->has_scram_keys = true;
	}
}

/* A console client goes to the console's pool of its user. */
static struct pool *pool_of(struct world *w, const struct handover_client *h)
{
	if (!h->admin)
		return pool_get_names(w, h->db, h->user);
	struct puser *u = h->login_user[0] ? pool_get_user(w, h->login_user) : NULL;
	return u ? pool_get(pool_admin_db(w), u) : NULL;
}

static void take_client(struct world *w, const struct handover_client *h, const struct scram_secret *keys,
			struct varcache *vars, struct ps_client *ps, int fd)
{
	struct pool *p = pool_of(w, h);
	if (!p) {
		log_warning("online restart: client of unknown database %s: closing it", h->db);
		close(fd);
		varcache_clear(vars);
		ps_client_free(ps);
		return;
	}
	struct puser *u = h->login_user[0] ? pool_get_user(w, h->login_user) : NULL;
	if (u)
		learn_user(u, h, keys);
	struct client *c = client_taken(fd, h, p, u);
	c->admin = h->admin;
	c->stats_only = h->stats_only;
	c->local_admin = h->local_admin;
	c->vars = *vars;
	c->ps = ps;
	log_client(c, LG_DEBUG, "taken over from the old process (%.3f ms)",
		   (double)(util_monotonic() - h->sent_at) / 1000.0);
	if (h->linked)
		await_server(c);
	else
		stream_start_reading(&c->s);
}

void conn_takeover_client(struct world *w, uint32_t reqid, const void *payload, size_t len, int fd)
{
	struct handover_client h;
	struct scram_secret keys;
	struct varcache vars;
	struct ps_client *ps = NULL;

	varcache_init(&vars);
	if (fd < 0 || !handover_client_decode(payload, len, &h, &keys, &vars, &ps)) {
		log_error("online restart: bad client from the old process (worker %d): closing it",
			  IPC_TAKEN_WORKER(reqid));
		if (fd >= 0)
			close(fd);
		varcache_clear(&vars);
		ps_client_free(ps);
		return;
	}
	take_client(w, &h, &keys, &vars, ps, fd);
}

void conn_takeover_server(struct world *w, uint32_t reqid, const void *payload, size_t len, int fd)
{
	struct handover_rec h;
	struct server *sv = server_received(w, payload, len, fd, true, &h);
	if (!sv)
		return;
	/* A new process numbers what it takes over anew, as PgBouncer's does
	 * (its clients too, client_taken): the old process's ids would
	 * collide with the new counter's. */
	sv->id = shm_next_id();
	struct client *c = (reqid & IPC_TAKEN_PAIRED) && h.owner.len ? cancel_find(&h.owner) : NULL;
	if (c && !c->link && c->pool == sv->pool && c->state == CLIENT_ACTIVE) {
		pool_link_taken(c, sv);
		server_debug(sv, "taken over from the old process with its client");
		stream_start_reading(&c->s);
		return;
	}
	server_debug(sv, "taken over from the old process");
	pool_server_ready(sv);
	pool_launch_needed(sv->pool);
}

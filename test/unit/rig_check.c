/* pgcrew — the session core's invariants, as the rig (rig.h) checks them:
 * every client and server on the one list of its state, the counters equal
 * to the lists, links paired both ways, the per-database and per-user
 * counts equal to the connections that hold them, every stream's buffer
 * offsets inside its buffer and one cached buffer lent per stream holding
 * one; once everything is closed, every count is zero. The fuzz target
 * checks them after every action, rig_stop at the end of every test. */
#include "rig.h"

#include <stdarg.h>
#include <stdio.h>

#include "client.h"
#include "server.h"
#include "shm.h"
#include "stream.h"
#include "world.h"

struct verdict {
	char *why;
	size_t len;
	bool bad;
};

static PRINTF(2, 3) void bad(struct verdict *v, const char *fmt, ...)
{
	va_list ap;
	if (v->bad)
		return;          /* the first one found is the one told */
	v->bad = true;
	va_start(ap, fmt);
	vsnprintf(v->why, v->len, fmt, ap);
	va_end(ap);
}

static int list_count(const struct list *l)
{
	int n = 0;
	const struct list *it;
	list_for_each(it, l)
		n++;
	return n;
}

static const char *pool_name(const struct pool *p)
{
	return p->db->name;
}

/* A pool's client lists: each client in a state that list holds, pointing
 * back to the pool; the counters equal to the lists. */
static void check_pool_clients(struct verdict *v, const struct pool *p)
{
	const struct list *it;
	int repl = 0;
	list_for_each(it, &p->waiting_clients) {
		const struct client *c = container_of(it, struct client, node);
		if ((c->state != CLIENT_WAITING && c->state != CLIENT_WAITING_LOGIN) || c->pool != p)
			bad(v, "pool %s: C-%llu (%s) on its waiting list", pool_name(p),
			    (unsigned long long)c->id, client_state_name(c->state));
		repl += c->repl != REPL_NONE;
	}
	list_for_each(it, &p->active_clients) {
		const struct client *c = container_of(it, struct client, node);
		if (c->state != CLIENT_ACTIVE || c->pool != p)
			bad(v, "pool %s: C-%llu (%s) on its active list", pool_name(p),
			    (unsigned long long)c->id, client_state_name(c->state));
	}
	if (p->n_waiting_clients != list_count(&p->waiting_clients))
		bad(v, "pool %s: n_waiting_clients %d, %d on the list", pool_name(p),
		    p->n_waiting_clients, list_count(&p->waiting_clients));
	if (p->n_active_clients != list_count(&p->active_clients))
		bad(v, "pool %s: n_active_clients %d, %d on the list", pool_name(p),
		    p->n_active_clients, list_count(&p->active_clients));
	if (p->n_repl_waiting != repl)
		bad(v, "pool %s: n_repl_waiting %d, %d waiting", pool_name(p), p->n_repl_waiting, repl);
}

static void check_server_list(struct verdict *v, const struct pool *p, const struct list *l,
			      enum server_state st, int n)
{
	const struct list *it;
	list_for_each(it, l) {
		const struct server *sv = container_of(it, struct server, node);
		if (sv->state != st || sv->pool != p)
			bad(v, "pool %s: S-%llu (%s) on its %s list", pool_name(p), (unsigned long long)sv->id,
			    server_state_name(sv->state), server_state_name(st));
	}
	if (n != list_count(l))
		bad(v, "pool %s: %d %s servers counted, %d on the list", pool_name(p), n,
		    server_state_name(st), list_count(l));
}

static void check_pool_servers(struct verdict *v, const struct pool *p)
{
	check_server_list(v, p, &p->login_servers, SERVER_LOGIN, p->n_login);
	check_server_list(v, p, &p->idle_servers, SERVER_IDLE, p->n_idle);
	check_server_list(v, p, &p->active_servers, SERVER_ACTIVE, p->n_active);
	check_server_list(v, p, &p->tested_servers, SERVER_TESTED, p->n_tested);
	check_server_list(v, p, &p->canceled_servers, SERVER_BEING_CANCELED, p->n_canceled);
}

/* Clients: the world's count, the lists outside any pool, links. */
static void check_clients(struct verdict *v, const struct world *w)
{
	const struct list *it;
	int live = 0;
	list_for_each(it, &w->all_clients) {
		const struct client *c = container_of(it, struct client, all_node);
		if (c->state == CLIENT_JUSTFREE)
			continue;
		live++;
		if (client_in_pool(c) && !c->pool)
			bad(v, "C-%llu: %s without a pool", (unsigned long long)c->id, client_state_name(c->state));
		if (c->link && (c->link->link != c || c->link->state == SERVER_JUSTFREE))
			bad(v, "C-%llu: linked to S-%llu, which is not linked back", (unsigned long long)c->id,
			    (unsigned long long)c->link->id);
	}
	if (w->n_clients != live)
		bad(v, "world: n_clients %d, %d live clients", w->n_clients, live);
	list_for_each(it, &w->login_clients)
		if (container_of(it, struct client, node)->state != CLIENT_LOGIN)
			bad(v, "a client not logging in on the login list");
	list_for_each(it, &w->cancel_clients)
		if (container_of(it, struct client, node)->state != CLIENT_CANCEL)
			bad(v, "a client not cancelling on the cancel list");
}

static void check_servers(struct verdict *v, const struct world *w)
{
	const struct list *it;
	list_for_each(it, &w->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		if (sv->state == SERVER_JUSTFREE || !sv->link)
			continue;
		if (sv->link->link != sv || sv->link->state == CLIENT_JUSTFREE)
			bad(v, "S-%llu: linked to C-%llu, which is not linked back", (unsigned long long)sv->id,
			    (unsigned long long)sv->link->id);
	}
}

/* A count of this worker's against what holds it; the shared table's
 * cell (this worker's only: the rig plays no other) agrees too. */
static void check_count(struct verdict *v, const char *what, const char *name, int count,
			int shm_idx, int held)
{
	if (count != held)
		bad(v, "%s %s: counted %d, held by %d", what, name, count, held);
	else if (shm_idx >= 0 && shm_name_total(shm_idx) != held)
		bad(v, "%s %s: %d in shared memory, held by %d", what, name, shm_name_total(shm_idx), held);
}

/* Connections of db (or of u): servers open, clients holding a slot. */
static int servers_of(const struct world *w, const struct database *db, const struct puser *u)
{
	const struct list *it;
	int n = 0;
	list_for_each(it, &w->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		n += sv->state != SERVER_JUSTFREE && (sv->pool->db == db || sv->pool->user == u);
	}
	return n;
}

static int clients_of(const struct world *w, const struct database *db, const struct puser *u)
{
	const struct list *it;
	int n = 0;
	list_for_each(it, &w->all_clients) {
		const struct client *c = container_of(it, struct client, all_node);
		n += (c->counted_db && db && c->db == db) || (c->counted_user && u && c->login_user == u);
	}
	return n;
}

/* Every client's and server's pool is a live one, and a pool counts the
 * clients pointing at it (freed or not: pool_idle_timeout). */
static void check_pool_refs(struct verdict *v, const struct world *w)
{
	const struct list *it, *pit;
	list_for_each(pit, &w->pools) {
		const struct pool *p = container_of(pit, struct pool, node);
		int n = 0;
		list_for_each(it, &w->all_clients)
			n += container_of(it, struct client, all_node)->pool == p;
		if (p->n_clients != n)
			bad(v, "pool %s/%s: n_clients %d, %d clients point at it", p->db->name, p->user->name,
			    p->n_clients, n);
	}
	list_for_each(it, &w->all_clients) {
		const struct client *c = container_of(it, struct client, all_node);
		bool found = !c->pool;
		list_for_each(pit, &w->pools)
			found |= container_of(pit, struct pool, node) == c->pool;
		if (!found)
			bad(v, "C-%llu: its pool is not in the world", (unsigned long long)c->id);
	}
	list_for_each(it, &w->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		bool found = false;
		list_for_each(pit, &w->pools)
			found |= container_of(pit, struct pool, node) == sv->pool;
		if (!found)
			bad(v, "S-%llu: its pool is not in the world", (unsigned long long)sv->id);
	}
}

/* Per database and user: client slots held, servers open; max_client_conn. */
static void check_counts(struct verdict *v, const struct world *w)
{
	const struct list *it;
	int conns = 0;
	list_for_each(it, &w->all_clients)
		conns += container_of(it, struct client, all_node)->counted_conn;
	if (shm_clients_of(0) != conns)
		bad(v, "max_client_conn: %d in shared memory, held by %d", shm_clients_of(0), conns);
	list_for_each(it, &w->databases) {
		const struct database *db = container_of(it, struct database, node);
		check_count(v, "database clients", db->name, db->n_clients, db->shm_idx, clients_of(w, db, NULL));
		check_count(v, "database servers", db->name, db->n_servers, -1, servers_of(w, db, NULL));
	}
	list_for_each(it, &w->users) {
		const struct puser *u = container_of(it, struct puser, node);
		check_count(v, "user clients", u->name, u->n_clients, u->shm_idx, clients_of(w, NULL, u));
		check_count(v, "user servers", u->name, u->n_servers, -1, servers_of(w, NULL, u));
	}
}

/* A connection's stream: its buffer's offsets in order and inside it (a
 * rewritten head may put done and parse in the headroom, never below
 * its start), its output queue's offsets inside the queue, nothing held
 * once closed. Returns whether it holds a buffer. */
static bool check_stream(struct verdict *v, const struct stream *s, char kind, unsigned long long id)
{
	const struct iobuf *b = s->buf;
	if (s->out_sent > s->out.len || s->out_mark > s->out.len)
		bad(v, "%c-%llu: output offsets %u and %u past its %zu bytes", kind, id, s->out_sent,
		    s->out_mark, s->out.len);
	if (s->closed && b)
		bad(v, "%c-%llu: closed with a buffer", kind, id);
	if (b && (b->done > b->parse || b->parse > b->recv || b->recv > STREAM_HEADROOM + b->cap))
		bad(v, "%c-%llu: buffer offsets done %u parse %u recv %u past %d + %u", kind, id, b->done,
		    b->parse, b->recv, STREAM_HEADROOM, b->cap);
	return b != NULL;
}

static void check_streams(struct verdict *v, const struct world *w)
{
	const struct list *it;
	size_t held = 0;
	list_for_each(it, &w->all_clients) {
		const struct client *c = container_of(it, struct client, all_node);
		held += check_stream(v, &c->s, 'C', (unsigned long long)c->id);
	}
	list_for_each(it, &w->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		held += check_stream(v, &sv->s, 'S', (unsigned long long)sv->id);
	}
	if (stream_cache_used() != held)
		bad(v, "streams: %zu buffers lent, %zu held by connections", stream_cache_used(), held);
}

bool rig_consistent(char *why, size_t len)
{
	struct verdict v = { .why = why, .len = len };
	const struct list *it;
	why[0] = 0;
	list_for_each(it, &rig_w->pools) {
		const struct pool *p = container_of(it, struct pool, node);
		check_pool_clients(&v, p);
		check_pool_servers(&v, p);
	}
	check_clients(&v, rig_w);
	check_servers(&v, rig_w);
	check_counts(&v, rig_w);
	check_pool_refs(&v, rig_w);
	check_streams(&v, rig_w);
	return !v.bad;
}

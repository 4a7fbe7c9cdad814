/* pgcrew — the worker's side of moving idle server connections between
 * workers (server_move.h). The giver encodes the server (handover.c) and
 * forgets it without a Terminate; the supervisor's ledger moves its slot to
 * the oldest waiting request of its pool elsewhere, or sends it back. */
#include "server_move.h"
#include "handover.h"
#include "hist.h"
#include "ipc.h"
#include "log.h"
#include "pool.h"
#include "prepared.h"
#include "proto/build.h"
#include "server.h"
#include "shm.h"
#include "tls.h"
#include "world.h"

#include <unistd.h>

/* This worker's moves, for SHOW WORKERS. */
static uint64_t moved_in, moved_out;

void server_moves(uint64_t *in, uint64_t *out)
{
	*in = moved_in;
	*out = moved_out;
}

/* Between workers: idle, in the pool, not due to close (unless it is
 * closed for another worker's sake). */
static bool movable(const struct server *sv)
{
	return server_may_move(sv) && (!sv->close_needed || sv->give_away) &&
	       sv->state == SERVER_IDLE && !sv->link && server_at_rest(sv);
}

static void fill_rec(const struct server *sv, struct handover_rec *h)
{
	memset(h, 0, sizeof(*h));
	strlcpy_(h->db, sv->pool->db->name, sizeof(h->db));
	strlcpy_(h->user, sv->pool->user->name, sizeof(h->user));
	h->id = sv->id;
	h->be = sv->be;
	h->proto_minor = sv->proto_minor;
	strlcpy_(h->addr, sv->addr, sizeof(h->addr));
	strlcpy_(h->laddr, sv->laddr, sizeof(h->laddr));
	h->port = sv->port;
	h->lport = sv->lport;
	h->host_idx = sv->host_idx;
	h->connect_time = sv->connect_time;
	h->request_time = sv->request_time;
	h->last_used = sv->last_used;
	h->vars_set = sv->vars_set;
	h->check_due = sv->check_due;
	h->sent_at = util_monotonic();
}

/* It lives on elsewhere: no Terminate, no slot release (the ledger moves
 * the slot), only our copy of the socket closes. */
static void forget(struct server *sv)
{
	struct pool *p = sv->pool;
	int fd = stream_take_fd(&sv->s);
	if (fd >= 0)
		close(fd);
	list_del(&sv->close_node);
	stream_close(&sv->s);
	p->db->n_servers--;
	p->user->n_servers--;
	server_set_state(sv, SERVER_JUSTFREE);
	world_schedule_reap(server_world(sv));
	world_check_shutdown(server_world(sv));
}

bool server_send(struct server *sv, enum ipc_type type, uint32_t reqid, const struct client *owner)
{
	struct handover_rec h;
	struct pktbuf pb;
	bool sent;

	if (sv->link)
		fatal("S-%llu: sent away while linked", (unsigned long long)sv->id);
	fill_rec(sv, &h);
	if (owner)
		cancelkey_from_own(&h.owner, &owner->key);
	pktbuf_init(&pb, 512);
	sent = handover_encode(&pb, &h, &sv->vars, sv->pool->welcome_other, sv->pool->n_welcome_other,
			       sv->ps) &&
	       ipc_send(server_world(sv)->sup, type, reqid, pb.buf, (uint32_t)pb.len, sv->s.fd) == 0;
	pktbuf_free(&pb);
	if (sent)
		forget(sv);
	return sent;
}

bool server_give(struct server *sv)
{
	stream_flush_deferred(&sv->s);     /* its last forward goes out first */
	if (!movable(sv))
		return false;
	server_debug(sv, "offered to another worker");
	if (!server_send(sv, IPC_SERVER_FD, 0, NULL))
		return false;
	moved_out++;
	return true;
}

/* The record's state onto a fresh server object of this worker. */
static void apply_rec(struct server *sv, const struct handover_rec *h)
{
	sv->id = h->id;
	sv->be = h->be;
	sv->proto_minor = h->proto_minor;
	strlcpy_(sv->addr, h->addr, sizeof(sv->addr));
	strlcpy_(sv->laddr, h->laddr, sizeof(sv->laddr));
	sv->port = h->port;
	sv->lport = h->lport;
	sv->host_idx = h->host_idx;
	sv->connect_time = h->connect_time;
	sv->request_time = h->request_time;
	sv->last_used = h->last_used;
	sv->vars_set = h->vars_set;
	sv->check_due = h->check_due != 0;
	sv->ready_status = 'I';
	sv->welcome_src = false;
}

static void welcome_param(void *pool, const char *k, const char *v)
{
	pool_welcome_param(pool, k, v);
}

struct server *server_received(struct world *w, const void *payload, size_t len, int fd, bool new_pool,
			       struct handover_rec *h)
{
	char db[LEDGER_NAME], user[LEDGER_NAME];

	if (fd < 0 || !handover_names(payload, len, db, user)) {
		log_error("ipc: bad server connection message");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	struct pool *p = new_pool ? pool_get_names(w, db, user) : pool_find_names(w, db, user);
	if (!p) {
		/* The backend ends on EOF; the slot we were given goes back. */
		log_warning("server connection of unknown pool %s/%s from another process or worker: closing it",
			    db, user);
		close(fd);
		pool_slot_release_names(w, db, user);
		return NULL;
	}
	struct server *sv = server_new(p, true, fd);
	if (!handover_decode(payload, len, h, &sv->vars, p->welcome_ready ? NULL : welcome_param, p,
			     &sv->ps)) {
		log_error("ipc: bad server state from another process or worker: closing it");
		server_close(sv, "bad hand-over");
		return NULL;
	}
	apply_rec(sv, h);
	if (!p->welcome_ready)
		pool_welcome_set(p, &sv->vars);
	server_set_state(sv, SERVER_IDLE);
	stream_start_reading(&sv->s);
	return sv;
}

void server_arrived(struct world *w, uint32_t reqid, const void *payload, size_t len, int fd)
{
	struct handover_rec h;
	struct server *sv = server_received(w, payload, len, fd, false, &h);
	if (!sv)
		return;
	struct pool *p = sv->pool;
	if (reqid > 0 && reqid < IPC_SERVER_UNASKED)
		pool_slot_taken(p, reqid);
	if (reqid == IPC_SERVER_BACK_CLOSE) {
		moved_out--;
		server_close(sv, "released to another worker");
		return;
	}
	if (reqid == IPC_SERVER_BACK_KEEP) {
		moved_out--;          /* it never left */
		server_debug(sv, "not needed elsewhere, kept");
	} else {
		moved_in++;
		hist_phase_observe(HIST_PHASE_SERVER_MOVE, (uint64_t)(util_monotonic() - h.sent_at));
		server_debug(sv, "taken over from another worker");
	}
	pool_server_arrived(sv);
	/* A move answers one of our requests, or none: clients still
	 * waiting need theirs asked again, or nobody would know of them. */
	pool_launch_needed(p);
}

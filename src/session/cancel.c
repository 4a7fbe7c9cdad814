/* pgcrew — cancellation. Clients get a random BackendKeyData of our own
 * (never the server's, which changes with every server they are given); a
 * CancelRequest is matched against it and, when the client is running a
 * query, a CancelRequest with the real backend key goes to PostgreSQL on a
 * new connection. The server is held back from reuse until that completes. */
#include "cancel.h"
#include "connlog.h"
#include "config.h"
#include "auth/crypto.h"
#include "proto/cancelkey.h"
#include "ipc.h"
#include "log.h"
#include "peer.h"
#include "proto/build.h"
#include "proto/packet.h"
#include "shm.h"
#include "world.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <event2/event.h>
#include <sys/socket.h>
#include <unistd.h>

#define CANCEL_BUCKETS 4096

struct cancel_req {
	struct list node;               /* live requests */
	struct server *server;          /* NULL once the server is gone */
	struct cancel_req *next_of_server;
	struct world *world;
	struct cancel_waiter waiter;    /* the client's cancel connection, told when done */
	int fd;
	struct event *ev;
	usec_t started;
	uint8_t pkt[CANCELKEY_REQUEST_MAX];
	size_t len, sent;
};

/* Clients by their key's pid; the pid is no secret (the secret is compared
 * in constant time along the chain), and unique in this worker but for a
 * client an online restart brought with its old key. */
static struct client *buckets[CANCEL_BUCKETS];
static struct list live = LIST_INIT(live);

static unsigned bucket_of(uint32_t pid)
{
	return (pid * 2654435761u) >> 20 & (CANCEL_BUCKETS - 1);
}

static bool pid_taken(uint32_t pid)
{
	for (struct client *c = buckets[bucket_of(pid)]; c; c = c->cancel_next)
		if (c->key.pid == pid)
			return true;
	return false;
}

static void add_key(struct client *c)
{
	unsigned b = bucket_of(c->key.pid);
	c->cancel_next = buckets[b];
	buckets[b] = c;
}

/* The key's length and layout follow the client's protocol version
 * (proto/cancelkey.c); its random part comes from the CSPRNG. */
void cancel_register(struct client *c)
{
	uint8_t rnd[CANCELKEY_RANDOM];
	do {
		if (!crypto_random(rnd, sizeof(rnd)))
			fatal("no randomness for cancel keys");
		cancelkey_make(&c->key, c->proto_minor, c->world->id, c->world->cfg->peer_id, rnd);
	} while (pid_taken(c->key.pid));
	OPENSSL_cleanse(rnd, sizeof(rnd));
	add_key(c);
	shm_note_login(SHM_LOGIN_CLIENT, c->proto_minor);
}

void cancel_register_key(struct client *c, const struct cancelkey_own *key)
{
	c->key = *key;
	if (c->key.len)
		add_key(c);
}

void cancel_unregister(struct client *c)
{
	if (!c->key.len)
		return;
	unsigned b = bucket_of(c->key.pid);
	for (struct client **pp = &buckets[b]; *pp; pp = &(*pp)->cancel_next) {
		if (*pp == c) {
			*pp = c->cancel_next;
			break;
		}
	}
	OPENSSL_cleanse(&c->key, sizeof(c->key));
}

struct client *cancel_find(const struct cancelkey *k)
{
	for (struct client *c = buckets[bucket_of(k->pid)]; c; c = c->cancel_next)
		if (cancelkey_matches(&c->key, k))
			return c;
	return NULL;
}

struct client *cancel_find_own(const struct cancelkey_own *key)
{
	struct cancelkey k;
	cancelkey_from_own(&k, key);
	return cancel_find(&k);
}

/* The server code's "your cancels are answered" (cancel_set_server_done). */
static void (*on_server_done)(struct server *sv);

void cancel_set_server_done(void (*fn)(struct server *sv))
{
	on_server_done = fn;
}

static const char *const outcome_texts[] = {
	[CANCEL_PENDING] = "cancel request pending",
	[CANCEL_SENT] = "successfully sent cancel request",
	[CANCEL_UNKNOWN_KEY] = "failed cancel request",
	[CANCEL_IDLE] = "cancel request for idle client",
	[CANCEL_SETTING_VARS] = "ignoring cancel request for server that is setting vars",
	[CANCEL_CONSOLE] = "cancel request for console client",
	[CANCEL_SEND_FAILED] = "failed to send cancel request",
	[CANCEL_TIMED_OUT] = "cancel_wait_timeout",
	[CANCEL_NO_ROUTE] = "failed to forward cancel request",
	[CANCEL_DEFERRED] = "cancel request for client waiting for a server: sent once it has one",
};
_Static_assert(ARRAY_SIZE(outcome_texts) == CANCEL_OUTCOMES, "cancel outcome texts");

const char *cancel_outcome_text(enum cancel_outcome o)
{
	return (unsigned)o < CANCEL_OUTCOMES ? outcome_texts[o] : "cancel request handled";
}

/* The client code's "close that cancel connection" (cancel_set_waiter_done). */
static cancel_waiter_fn on_waiter_done;

void cancel_set_waiter_done(cancel_waiter_fn fn)
{
	on_waiter_done = fn;
}

static const struct cancel_waiter no_waiter = { .worker = -1 };

void cancel_waiter_done(struct world *w, const struct cancel_waiter *wt, enum cancel_outcome o)
{
	if (!wt || wt->worker < 0)
		return;
	if (wt->worker == w->id) {
		if (on_waiter_done)
			on_waiter_done(w, wt->client, o);
		return;
	}
	struct cancel_waiter done = *wt;
	done.outcome = (int32_t)o;
	if (ipc_send_cancel_done(w->sup, &done) < 0)
		log_warning("could not tell worker %d how a cancel request ended", wt->worker);
}

/* What a cancel for this worker's client with key k does now: sent on
 * (PENDING: wt is told when it is done), waits with the client's request
 * (PENDING), or ends at once. */
static enum cancel_outcome start(struct world *w, const struct cancelkey *k, const struct cancel_waiter *wt)
{
	struct client *target = cancel_find(k);

	if (!target)
		return CANCEL_UNKNOWN_KEY;
	if (target->db && target->db->admin)
		return CANCEL_CONSOLE;
	if (target->state == CLIENT_WAITING) {
		/* Sent once its request reaches a server (PgBouncer drops it).
		 * Its connection closes now: the client's next request cannot
		 * come before this one has ended, and if the cancel is still
		 * on its way then, the next request waits for it (client.c). */
		target->cancel_wanted = true;
		return CANCEL_DEFERRED;
	}
	/* Linked, it has something on the server: a query, or a batch of
	 * extended-protocol messages whose Sync has not come yet (PgBouncer
	 * forwards these too). */
	if (!target->link)
		return CANCEL_IDLE;
	if (target->link->internal == SI_SETVARS)
		return CANCEL_SETTING_VARS;
	return cancel_send(target->link, wt) ? CANCEL_PENDING : CANCEL_SEND_FAILED;
}

/* A cancel for a client of this worker, from another worker. */
void cancel_local(struct world *w, const struct cancelkey *k, const struct cancel_waiter *wt)
{
	enum cancel_outcome o = start(w, k, wt);
	if (o != CANCEL_PENDING) {
		log_debug("cancel request: %s", cancel_outcome_text(o));
		cancel_waiter_done(w, wt, o);
	}
}

/* A forward to a peer ended: its waiter (this worker's client) is told. */
static void peer_done(struct world *w, const struct cancel_waiter *wt, bool ok)
{
	cancel_waiter_done(w, wt, ok ? CANCEL_SENT : CANCEL_SEND_FAILED);
}

enum cancel_outcome cancel_handle_request(struct world *w, const struct cancelkey *k,
					  const struct cancel_waiter *wt)
{
	int owner, peer;

	if (!cancelkey_route(k, &owner, &peer)) {
		log_debug("cancel request with a key pgcrew never gives (%u bytes): dropped", k->len);
		return CANCEL_UNKNOWN_KEY;
	}
	if (w->cfg->peer_id > 0 && peer != w->cfg->peer_id) {
		/* Another pgcrew host's client: pass it on, as PgBouncer does,
		 * and keep the connection until the peer is done with it. */
		const struct peer_def *pd = config_find_peer(w->cfg, peer);
		if (!pd) {
			log_debug("cancel request for unknown peer %d: dropped", peer);
			return CANCEL_NO_ROUTE;
		}
		return peer_forward_cancel(w, pd, k, wt, peer_done) ? CANCEL_PENDING : CANCEL_SEND_FAILED;
	}

	/* After an online restart to fewer workers, old worker o's clients
	 * live in worker o % n. */
	int n = shm_n_workers();
	if ((n > 0 ? owner % n : owner) != w->id) {
		/* The kernel picked this worker; the client lives in another,
		 * which tells us (IPC_CANCEL_DONE) when its cancel is done. */
		if (ipc_send_cancel(w->sup, k, wt) < 0) {
			log_warning("could not forward a cancel request to worker %d", owner);
			return CANCEL_NO_ROUTE;
		}
		return CANCEL_PENDING;
	}
	return start(w, k, wt);
}

static void req_free(struct cancel_req *r, enum cancel_outcome o)
{
	struct server *sv = r->server;
	cancel_waiter_done(r->world, &r->waiter, o);
	if (sv) {
		for (struct cancel_req **pp = (struct cancel_req **)&sv->cancel_reqs; *pp; pp = &(*pp)->next_of_server)
			if (*pp == r) {
				*pp = r->next_of_server;
				break;
			}
		sv->cancels_pending--;
		/* A server released while its cancel was in flight may go back
		 * now, or its client's next request go out. */
		if (sv->cancels_pending == 0 && on_server_done)
			on_server_done(sv);
	}
	list_del(&r->node);
	event_free(r->ev);
	close(r->fd);
	free(r);
}

static void req_io(evutil_socket_t fd, short what, void *arg)
{
	struct cancel_req *r = arg;
	uint8_t junk[64];

	if (r->sent < r->len) {
		ssize_t n = send(fd, r->pkt + r->sent, r->len - r->sent, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINPROGRESS || errno == EINTR)) {
			event_add(r->ev, NULL);
			return;
		}
		if (n <= 0) {
			req_free(r, CANCEL_SEND_FAILED);
			return;
		}
		r->sent += (size_t)n;
		if (r->sent < r->len) {
			event_add(r->ev, NULL);
			return;
		}
		event_del(r->ev);
		event_assign(r->ev, stream_base, fd, EV_READ, req_io, r);
		event_add(r->ev, NULL);
		return;
	}
	/* PostgreSQL closes the connection once the cancel is processed. */
	ssize_t n = recv(fd, junk, sizeof(junk), 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		event_add(r->ev, NULL);
		return;
	}
	req_free(r, CANCEL_SENT);
}

bool cancel_send(struct server *sv, const struct cancel_waiter *wt)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!sv->be.len)
		return false;         /* it never sent a BackendKeyData: nothing to cancel with */
	if (getpeername(sv->s.fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	/* A client's CancelRequest: PgBouncer opens a server connection for
	 * it, which takes the next socket id, so this one does too (even if
	 * the connect fails: PgBouncer's id is taken first). pgcrew's own
	 * cancels (query_timeout, a client gone mid-query) have no PgBouncer
	 * counterpart and take none. */
	uint64_t id = wt ? shm_next_id() : 0;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		close(fd);
		return false;
	}
	struct cancel_req *r = xcalloc(1, sizeof(*r));
	r->fd = fd;
	r->server = sv;
	r->world = sv->pool->db->world;
	r->waiter = wt ? *wt : no_waiter;
	r->started = util_monotonic();
	struct pktbuf pb;
	pktbuf_init_fixed(&pb, r->pkt, sizeof(r->pkt));
	pkt_write_cancel_request(&pb, &sv->be);
	r->len = pb.len;
	r->next_of_server = sv->cancel_reqs;
	sv->cancel_reqs = r;
	sv->cancels_pending++;
	list_append(&live, &r->node);
	r->ev = event_new(stream_base, fd, EV_WRITE, req_io, r);
	event_add(r->ev, NULL);
	server_debug(sv, "forwarding cancel request (connection id %llu)", (unsigned long long)id);
	return true;
}

void cancel_server_gone(struct server *sv)
{
	for (struct cancel_req *r = sv->cancel_reqs; r; r = r->next_of_server)
		r->server = NULL;
	sv->cancel_reqs = NULL;
	sv->cancels_pending = 0;
}

void cancel_janitor(struct world *w, usec_t now)
{
	struct list *it, *tmp;
	usec_t limit = w->cfg->cancel_wait_timeout;
	if (limit <= 0)
		return;
	list_for_each_safe(it, tmp, &live) {
		struct cancel_req *r = container_of(it, struct cancel_req, node);
		if (now - r->started > limit) {
			log_warning("cancel request timed out (cancel_wait_timeout)");
			req_free(r, CANCEL_TIMED_OUT);
		}
	}
}

/* A cancel that waited with its request for a server: sent a moment after
 * the request went to the server, so that PostgreSQL is running it (a
 * cancel that reaches a backend still reading the query is ignored). */
struct deferred {
	struct list node;
	struct event *ev;
	struct world *world;
	struct cancelkey_own key;
};
static struct list deferred_list = LIST_INIT(deferred_list);

#define DEFER_USEC (20 * 1000)

static void deferred_free(struct deferred *d)
{
	list_del(&d->node);
	event_free(d->ev);
	free(d);
}

static void on_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct deferred *d = arg;
	struct client *c = cancel_find_own(&d->key);
	deferred_free(d);
	/* Its request may have ended meanwhile: a cancel now would hit the
	 * next one. */
	if (!c || !c->link || !(c->query_running || c->link->unsynced)) {
		log_debug("deferred cancel request: %s", cancel_outcome_text(CANCEL_IDLE));
		return;
	}
	if (!cancel_send(c->link, NULL))
		log_debug("deferred cancel request: %s", cancel_outcome_text(CANCEL_SEND_FAILED));
}

size_t cancel_deferred_count(void)
{
	size_t n = 0;
	struct list *it;
	list_for_each(it, &deferred_list)
		n++;
	return n;
}

void cancel_after_send(struct client *c)
{
	struct timeval tv = { 0, DEFER_USEC };
	struct deferred *d = xcalloc(1, sizeof(*d));
	d->key = c->key;
	d->world = c->world;
	d->ev = event_new(c->world->base, -1, 0, on_deferred, d);
	list_append(&deferred_list, &d->node);
	event_add(d->ev, &tv);
}

void cancel_free_all(void)
{
	struct list *it;
	while ((it = list_first(&live)) != NULL) {
		struct cancel_req *r = container_of(it, struct cancel_req, node);
		r->server = NULL;
		r->waiter = no_waiter;        /* the worker is going: nobody to tell */
		req_free(r, CANCEL_SENT);
	}
	while ((it = list_first(&deferred_list)) != NULL)
		deferred_free(container_of(it, struct deferred, node));
}

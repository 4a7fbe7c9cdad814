/* pgcrew — cancellation. Clients get a random BackendKeyData of our own
 * (never the server's, which changes with every server they are given); a
 * CancelRequest is matched against it and, when the client is running a
 * query, a CancelRequest with the real backend key goes to PostgreSQL on a
 * new connection. The server is held back from reuse until that completes. */
#include "cancel.h"
#include "connlog.h"
#include "config.h"
#include "auth/crypto.h"
#include "ipc.h"
#include "log.h"
#include "peer.h"
#include "config.h"
#include "proto/build.h"
#include "proto/packet.h"
#include "shm.h"
#include "world.h"

#include <errno.h>
#include <event2/event.h>
#include <sys/socket.h>
#include <unistd.h>

#define CANCEL_BUCKETS 4096

struct cancel_req {
	struct list node;               /* live requests */
	struct server *server;          /* NULL once the server is gone */
	struct cancel_req *next_of_server;
	int fd;
	struct event *ev;
	usec_t started;
	uint8_t pkt[16];
	size_t sent;
};

static struct client *buckets[CANCEL_BUCKETS];
static struct list live = LIST_INIT(live);

static unsigned bucket_of(uint32_t pid, uint32_t key)
{
	return (pid * 2654435761u ^ key) % CANCEL_BUCKETS;
}

void cancel_register(struct client *c)
{
	uint32_t v[2];
	do {
		if (!crypto_random(v, sizeof(v)))
			fatal("no randomness for cancel keys");
		/* Worker id in the top bits so keys never collide across workers. */
		c->cancel_pid = (v[0] & 0x00ffffffu) | ((uint32_t)(c->world->id & 0x7f) << 24);
		c->cancel_key = v[1];
		/* With peering, the key names this host for the other peers. */
		if (c->world->cfg->peer_id > 0)
			c->cancel_key = (v[1] & ((1u << PEER_KEY_SHIFT) - 1)) |
					((uint32_t)c->world->cfg->peer_id << PEER_KEY_SHIFT);
	} while (cancel_find(c->cancel_pid, c->cancel_key));
	cancel_register_key(c, c->cancel_pid, c->cancel_key);
}

void cancel_register_key(struct client *c, uint32_t pid, uint32_t key)
{
	c->cancel_pid = pid;
	c->cancel_key = key;
	unsigned b = bucket_of(pid, key);
	c->cancel_next = buckets[b];
	buckets[b] = c;
}

void cancel_unregister(struct client *c)
{
	if (!c->cancel_pid && !c->cancel_key)
		return;
	unsigned b = bucket_of(c->cancel_pid, c->cancel_key);
	for (struct client **pp = &buckets[b]; *pp; pp = &(*pp)->cancel_next) {
		if (*pp == c) {
			*pp = c->cancel_next;
			break;
		}
	}
	c->cancel_pid = c->cancel_key = 0;
}

struct client *cancel_find(uint32_t pid, uint32_t key)
{
	for (struct client *c = buckets[bucket_of(pid, key)]; c; c = c->cancel_next)
		if (c->cancel_pid == pid && c->cancel_key == key)
			return c;
	return NULL;
}

/* A cancel for a client of this worker, however it arrived. */
/* The server code's "your cancels are answered" (cancel_set_server_done). */
static void (*on_server_done)(struct server *sv);

void cancel_set_server_done(void (*fn)(struct server *sv))
{
	on_server_done = fn;
}

void cancel_local(uint32_t pid, uint32_t key)
{
	struct client *target = cancel_find(pid, key);

	if (!target)
		log_debug("cancel request for unknown key: dropped");
	else if (target->state == CLIENT_WAITING)
		target->cancel_wanted = true;      /* sent once its query reaches a server */
	else if (!target->link || !target->query_running)
		log_debug("cancel request for a client with no running query: dropped");
	else
		cancel_send(target->link);
}

void cancel_handle_request(struct world *w, uint32_t pid, uint32_t key)
{
	int owner = (int)((pid >> 24) & 0x7f);
	int peer = peer_of_key(key);

	if (w->cfg->peer_id > 0 && peer != w->cfg->peer_id) {
		/* Another pgcrew host's client: pass it on, as PgBouncer does. */
		const struct peer_def *pd = config_find_peer(w->cfg, peer);
		if (pd)
			peer_forward_cancel(pd, pid, key);
		else
			log_debug("cancel request for unknown peer %d: dropped", peer);
		return;
	}

	/* After an online restart to fewer workers, old worker o's clients
	 * live in worker o % n. */
	int n = shm_n_workers();
	if ((n > 0 ? owner % n : owner) != w->id) {
		/* The kernel picked this worker; the client lives in another. */
		if (ipc_send_cancel(w->sup, pid, key) < 0)
			log_warning("could not forward a cancel request to worker %d", owner);
		return;
	}
	cancel_local(pid, key);
}

static void req_free(struct cancel_req *r)
{
	struct server *sv = r->server;
	if (sv) {
		for (struct cancel_req **pp = (struct cancel_req **)&sv->cancel_reqs; *pp; pp = &(*pp)->next_of_server)
			if (*pp == r) {
				*pp = r->next_of_server;
				break;
			}
		sv->cancels_pending--;
		/* A server released while its cancel was in flight may go back now. */
		if (sv->cancels_pending == 0 && sv->state == SERVER_BEING_CANCELED && on_server_done)
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

	if (r->sent < sizeof(r->pkt)) {
		ssize_t n = send(fd, r->pkt + r->sent, sizeof(r->pkt) - r->sent, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINPROGRESS || errno == EINTR)) {
			event_add(r->ev, NULL);
			return;
		}
		if (n <= 0) {
			req_free(r);
			return;
		}
		r->sent += (size_t)n;
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
	req_free(r);
}

bool cancel_send(struct server *sv)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(sv->s.fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
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
	r->started = util_monotonic();
	struct pktbuf pb;
	pktbuf_init_fixed(&pb, r->pkt, sizeof(r->pkt));
	pkt_write_cancel_request(&pb, sv->be_pid, sv->be_key);
	r->next_of_server = sv->cancel_reqs;
	sv->cancel_reqs = r;
	sv->cancels_pending++;
	list_append(&live, &r->node);
	r->ev = event_new(stream_base, fd, EV_WRITE, req_io, r);
	event_add(r->ev, NULL);
	server_debug(sv, "forwarding cancel request");
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
			req_free(r);
		}
	}
}

/* A cancel that waited with its request for a server: sent a moment after
 * the request went to the server, so that PostgreSQL is running it (a
 * cancel that reaches a backend still reading the query is ignored). */
struct deferred {
	struct list node;
	struct event *ev;
	uint32_t pid, key;
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
	struct client *c = cancel_find(d->pid, d->key);
	deferred_free(d);
	if (c && c->link && c->query_running)
		(void)cancel_send(c->link);
}

void cancel_after_send(struct client *c)
{
	struct timeval tv = { 0, DEFER_USEC };
	struct deferred *d = xcalloc(1, sizeof(*d));
	d->pid = c->cancel_pid;
	d->key = c->cancel_key;
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
		req_free(r);
	}
	while ((it = list_first(&deferred_list)) != NULL)
		deferred_free(container_of(it, struct deferred, node));
}

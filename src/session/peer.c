/* pgcrew — forwarding CancelRequests to peers (see peer.h). Each forward is
 * a short connection: resolve (c-ares), connect, send the request as it
 * came (16 bytes, or up to 268 with a protocol 3.2 key), wait for the peer
 * to close. Bounded by PEER_TIMEOUT_SEC. */
#include "peer.h"
#include "config.h"
#include "dns.h"
#include "log.h"
#include "proto/build.h"
#include "proto/cancelkey.h"
#include "shm.h"
#include "stream.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PEER_TIMEOUT_SEC 5

struct forward {
	struct list node;
	int peer_id;
	int fd;
	struct event *ev;
	struct dns_req *dns;
	struct world *world;
	struct cancel_waiter waiter;    /* the client's cancel connection, told when done */
	peer_done_fn done;
	bool *alive;                    /* while peer_forward_cancel runs: cleared on free */
	uint8_t pkt[CANCELKEY_REQUEST_MAX];
	size_t len, sent;
};

static struct list forwards = LIST_INIT(forwards);

/* The peer closed after taking the whole request (ok), or the forward
 * failed or timed out. Its waiter is told, but not from inside
 * peer_forward_cancel: that one returns false instead. */
static void fw_end(struct forward *f, bool ok)
{
	if (f->alive)
		*f->alive = false;
	else if (f->done)
		f->done(f->world, &f->waiter, ok);
	f->done = NULL;
}

static void fw_free(struct forward *f)
{
	fw_end(f, false);
	list_del(&f->node);
	if (f->dns)
		dns_cancel(f->dns);
	if (f->ev)
		event_free(f->ev);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

static void fw_io(evutil_socket_t fd, short what, void *arg)
{
	struct forward *f = arg;
	uint8_t junk[64];

	if (what & EV_TIMEOUT) {
		log_warning("cancel request to peer %d timed out", f->peer_id);
		fw_free(f);
		return;
	}
	if (f->sent < f->len) {
		ssize_t n = send(fd, f->pkt + f->sent, f->len - f->sent, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINPROGRESS || errno == EINTR))
			return;
		if (n <= 0) {
			log_warning("cancel request to peer %d failed: %s", f->peer_id, strerror(errno));
			fw_free(f);
			return;
		}
		f->sent += (size_t)n;
		if (f->sent == f->len) {
			struct timeval tv = { PEER_TIMEOUT_SEC, 0 };
			event_del(f->ev);
			event_assign(f->ev, stream_base, fd, EV_READ | EV_PERSIST | EV_TIMEOUT, fw_io, f);
			event_add(f->ev, &tv);
		}
		return;
	}
	ssize_t n = recv(fd, junk, sizeof(junk), 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	fw_end(f, true);       /* the peer closed: done */
	fw_free(f);
}

static void fw_connect(struct forward *f, const struct sockaddr *sa, socklen_t len)
{
	struct timeval tv = { PEER_TIMEOUT_SEC, 0 };
	f->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->fd < 0 || (connect(f->fd, sa, len) < 0 && errno != EINPROGRESS)) {
		log_warning("cancel request to peer %d: connect failed: %s", f->peer_id, strerror(errno));
		fw_free(f);
		return;
	}
	f->ev = event_new(stream_base, f->fd, EV_WRITE | EV_PERSIST | EV_TIMEOUT, fw_io, f);
	event_add(f->ev, &tv);
}

static void fw_resolved(void *arg, enum dns_status st, const struct sockaddr_storage *addrs,
			int n_addrs, const char *errmsg)
{
	struct forward *f = arg;
	f->dns = NULL;
	if (st != DNS_OK || n_addrs < 1) {
		log_warning("cancel request to peer %d: %s", f->peer_id, errmsg ? errmsg : "no address");
		fw_free(f);
		return;
	}
	socklen_t len = addrs[0].ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	fw_connect(f, (const struct sockaddr *)&addrs[0], len);
}

bool peer_forward_cancel(struct world *w, const struct peer_def *p, const struct cancelkey *k,
			 const struct cancel_waiter *wt, peer_done_fn done)
{
	struct forward *f = xcalloc(1, sizeof(*f));
	struct pktbuf pb;
	bool alive = true;

	f->peer_id = p->peer_id;
	f->fd = -1;
	f->world = w;
	f->waiter = *wt;
	f->done = done;
	f->alive = &alive;
	pktbuf_init_fixed(&pb, f->pkt, sizeof(f->pkt));
	pkt_write_cancel_request(&pb, k);
	f->len = pb.len;
	list_append(&forwards, &f->node);
	/* PgBouncer forwards on a server connection of the peer's pool, which
	 * takes the next socket id: so does this one. */
	uint64_t id = shm_next_id();
	log_debug("cancel request passed to peer %d (%s:%d, connection id %llu)", p->peer_id, p->host, p->port,
		  (unsigned long long)id);
	if (p->host[0] == '/') {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.s.PGSQL.%d", p->host, p->port);
		fw_connect(f, (const struct sockaddr *)&sa, sizeof(sa));
	} else {
		/* A literal or cached name answers before dns_resolve returns,
		 * and may free f: only a pending lookup's handle is kept. */
		struct dns_req *r = dns_resolve(p->host, p->port, fw_resolved, f);
		if (r && alive)
			f->dns = r;
	}
	if (!alive)
		return false;
	f->alive = NULL;
	return true;
}

void peer_counts(int peer_id, int *connecting, int *active)
{
	struct list *it;
	*connecting = *active = 0;
	list_for_each(it, &forwards) {
		const struct forward *f = container_of(it, struct forward, node);
		if (f->peer_id != peer_id)
			continue;
		if (f->sent < f->len)
			(*connecting)++;
		else
			(*active)++;
	}
}

void peer_free_all(void)
{
	struct list *it;
	while ((it = list_first(&forwards)) != NULL) {
		struct forward *f = container_of(it, struct forward, node);
		f->done = NULL;           /* the worker is going: nobody to tell */
		fw_free(f);
	}
}

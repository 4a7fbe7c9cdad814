/* pgcrew — a new TCP client's PROXY protocol phase (see proxy_accept.h).
 * Only the header's bytes are taken off the socket, peeked first: what
 * follows (an SSLRequest, a TLS ClientHello, a startup packet) stays there
 * for the client's stream, so TLS on top of PROXY needs nothing else. */
#include "proxy_accept.h"
#include "config.h"
#include "log.h"
#include "proto/proxyproto.h"
#include "util.h"
#include "world.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct proxy_wait {
	struct event *ev;
	void (*done)(struct client *c);
	void (*failed)(struct client *c, const char *why, bool warn);
	size_t have;                      /* header bytes taken off the socket */
	uint8_t buf[PROXY_V2_MAX];
};

static struct proxy_sources *sources;

bool proxy_accept_configure(const struct config *cfg)
{
	struct proxy_sources *s;
	char err[256];
	if (!proxy_sources_parse(cfg->proxy_protocol_sources, &s, err, sizeof(err))) {
		log_error("proxy_protocol_sources: %s", err);
		return false;
	}
	proxy_sources_free(sources);
	sources = s;
	return true;
}

void proxy_accept_free_all(void)
{
	proxy_sources_free(sources);
	sources = NULL;
}

bool proxy_accept_wanted(const struct client *c)
{
	return !c->is_unix && c->world->cfg->proxy_protocol;
}

/* The connection's own peer is a listed load balancer. */
static bool from_balancer(const struct client *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	return getpeername(c->s.fd, (struct sockaddr *)&ss, &len) == 0 &&
	       proxy_sources_match(sources, (const struct sockaddr *)&ss);
}

void proxy_accept_cancel(struct client *c)
{
	if (!c->proxy)
		return;
	event_free(c->proxy->ev);
	free(c->proxy);
	c->proxy = NULL;
}

static void finish(struct client *c)
{
	void (*done)(struct client *) = c->proxy->done;
	proxy_accept_cancel(c);
	done(c);
}

/* The header's addresses are the client's from now on (LOCAL, a health
 * check, keeps the connection's own). */
static void apply(struct client *c, const struct proxy_header *h)
{
	if (h->local)
		return;
	c->proxied = true;
	memcpy(&c->proxied_addr, &h->src, sizeof(h->src));
	util_format_addr((const struct sockaddr *)&h->src, c->addr, sizeof(c->addr), &c->port);
	util_format_addr((const struct sockaddr *)&h->dst, c->laddr, sizeof(c->laddr), &c->lport);
}

/* n bytes already peeked become the header's. */
static bool take(struct client *c, size_t n)
{
	struct proxy_wait *w = c->proxy;
	ssize_t k = n ? recv(c->s.fd, w->buf + w->have, n, 0) : 0;
	if (k != (ssize_t)n)
		return false;
	w->have += n;
	return true;
}

/* A header from anyone but a listed balancer, none from a listed one, or
 * a malformed one: the connection ends without a word (it may not even be
 * PostgreSQL's protocol), the reason logged. */
static void refuse(struct client *c, const char *why)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "PROXY protocol: %s", why);
	c->proxy->failed(c, msg, true);
}

/* The socket failed: no header, no client. */
static void lost(struct client *c, const char *why)
{
	c->proxy->failed(c, why, false);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	struct proxy_wait *w = c->proxy;
	struct proxy_header h;
	const char *why = NULL;
	(void)what;

	ssize_t k = recv(fd, w->buf + w->have, sizeof(w->buf) - w->have, MSG_PEEK);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (k <= 0) {
		lost(c, k == 0 ? "client unexpected eof" : "client connection error");
		return;
	}
	switch (proxy_parse(w->buf, w->have + (size_t)k, &h, &why)) {
	case PROXY_NEED_MORE:
		/* Every byte so far is the header's: take them, or a level-
		 * triggered read event would fire again at once. */
		if (!take(c, (size_t)k))
			lost(c, "client connection error");
		return;
	case PROXY_OK:
		if (!from_balancer(c)) {
			refuse(c, "header from an address not in proxy_protocol_sources");
			return;
		}
		if (!take(c, h.len - w->have)) {
			lost(c, "client connection error");
			return;
		}
		apply(c, &h);
		finish(c);
		return;
	case PROXY_NONE:
		if (w->have == 0 && !from_balancer(c)) {
			finish(c);
			return;
		}
		refuse(c, w->have ? "malformed header" : "no header from a proxy_protocol_sources address");
		return;
	case PROXY_BAD:
		refuse(c, why ? why : "malformed header");
		return;
	}
}

void proxy_accept_start(struct client *c, void (*done)(struct client *c),
			void (*failed)(struct client *c, const char *why, bool warn))
{
	struct proxy_wait *w = xcalloc(1, sizeof(*w));
	w->done = done;
	w->failed = failed;
	w->ev = event_new(c->world->base, c->s.fd, EV_READ | EV_PERSIST, on_readable, c);
	c->proxy = w;
	event_add(w->ev, NULL);
	/* With TCP_DEFER_ACCEPT the header is usually here already. */
	if (c->world->cfg->tcp_defer_accept)
		on_readable(c->s.fd, EV_READ, c);
}

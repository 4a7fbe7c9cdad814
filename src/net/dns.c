/* pgcrew — asynchronous DNS: a c-ares channel per worker whose sockets and
 * timeout are watched by the worker's libevent base, a per-name cache with
 * PgBouncer's TTL rules, and one shared lookup per name however many server
 * connections wait for it. IP literals never reach c-ares. */
#include "dns.h"
#include "log.h"
#include "util.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ares.h>
#include <event2/event.h>

/* What a lookup produced; copied into each waiting request so that a later
 * lookup of the same name cannot change an answer not yet delivered. */
struct dns_answer {
	enum dns_status status;
	int n_addrs;
	struct sockaddr_storage addrs[DNS_MAX_ADDRS];   /* port 0 until delivery */
	char errmsg[160];                               /* "" on DNS_OK */
};

/* One cache entry per host name. It is never freed while a lookup is in
 * flight, because the c-ares callback carries a pointer to it. */
struct dns_host {
	struct list node;               /* in dns.hosts */
	struct list waiters;            /* struct dns_req; non-empty only while pending */
	char *name;
	bool pending;                   /* a c-ares lookup is in flight */
	bool restart;                   /* its channel was replaced; look up again */
	bool has_answer;                /* answer/done_at describe a finished lookup */
	usec_t done_at;                 /* monotonic time the answer arrived */
	struct dns_answer answer;
};

struct dns_req {
	struct list node;               /* host->waiters, then dns.ready once answered */
	dns_cb_fn cb;
	void *arg;
	int port;
	struct dns_answer answer;       /* valid once on dns.ready */
};

/* A socket c-ares asked us to watch. */
struct dns_sock {
	struct list node;               /* in dns.socks */
	ares_socket_t fd;
	struct event *ev;
};

/*
 * User callbacks never run inside c-ares callbacks: a callback may start a
 * lookup, reload or shut the resolver down, and c-ares forbids ares_destroy()
 * from its own callbacks. Answered requests go to `ready`, which is drained
 * once c-ares has returned control to us.
 */
static struct {
	struct event_base *base;
	ares_channel channel;           /* NULL when not running */
	struct event *timer;            /* fires at ares_timeout() */
	struct list socks;              /* struct dns_sock */
	struct list hosts;              /* struct dns_host, the cache */
	struct list ready;              /* struct dns_req waiting for dns_drain() */
	usec_t max_ttl;
	usec_t nxdomain_ttl;
	char *resolv_conf;              /* NULL = system default */
	size_t n_pending;               /* hosts with a lookup in flight */
	bool replacing;                 /* destroying a channel that a new one replaces */
	bool stopping;                  /* inside dns_shutdown() */
} dns = {
	.socks = LIST_INIT(dns.socks),
	.hosts = LIST_INIT(dns.hosts),
	.ready = LIST_INIT(dns.ready),
};

static const char *const dns_status_names[] = {
	[DNS_OK] = "ok",
	[DNS_NOTFOUND] = "not found",
	[DNS_FAILED] = "failed",
	[DNS_CANCELLED] = "cancelled",
};
_Static_assert(ARRAY_SIZE(dns_status_names) == DNS_STATUS_COUNT, "dns_status_names");

const char *dns_status_name(enum dns_status st)
{
	if ((unsigned)st >= DNS_STATUS_COUNT)
		return "?";
	return dns_status_names[st];
}

static void dns_answer_error(struct dns_answer *a, enum dns_status st, const char *msg)
{
	a->status = st;
	a->n_addrs = 0;
	strlcpy_(a->errmsg, msg, sizeof(a->errmsg));
}

/* Fills in the port and calls cb. `a` is the caller's private copy: the
 * callback may free whatever the answer came from. */
static void dns_deliver(dns_cb_fn cb, void *arg, int port, struct dns_answer *a)
{
	for (int i = 0; i < a->n_addrs; i++) {
		struct sockaddr_storage *ss = &a->addrs[i];
		if (ss->ss_family == AF_INET)
			((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
		else
			((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	}
	cb(arg, a->status, a->n_addrs ? a->addrs : NULL, a->n_addrs,
	   a->status == DNS_OK ? NULL : a->errmsg);
}

static void dns_drain(void)
{
	struct list *l;

	while ((l = list_first(&dns.ready)) != NULL) {
		struct dns_req *req = container_of(l, struct dns_req, node);
		struct dns_answer a = req->answer;
		dns_cb_fn cb = req->cb;
		void *arg = req->arg;
		int port = req->port;

		list_del(l);
		free(req);
		dns_deliver(cb, arg, port, &a);
	}
}

static void dns_waiters_to_ready(struct dns_host *h, const struct dns_answer *a)
{
	struct list *l, *tmp;

	list_for_each_safe(l, tmp, &h->waiters) {
		struct dns_req *req = container_of(l, struct dns_req, node);
		req->answer = *a;
		list_del(l);
		list_append(&dns.ready, l);
	}
}

/* ---- IP literals ---- */

static unsigned dns_scope_id(const char *scope)
{
	char *end;
	unsigned long v = strtoul(scope, &end, 10);

	if (*scope && *end == 0 && v <= UINT32_MAX)
		return (unsigned)v;
	return if_nametoindex(scope);
}

/* 1: `host` is an IPv4/IPv6 literal and `a` holds its answer (an IPv6
 * literal with an unknown %scope gives DNS_FAILED); 0: a name. */
static int dns_literal(const char *host, struct dns_answer *a)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&a->addrs[0];
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->addrs[0];
	char buf[INET6_ADDRSTRLEN];
	const char *pct = strchr(host, '%');
	size_t len = pct ? (size_t)(pct - host) : strlen(host);

	memset(a, 0, sizeof(*a));
	a->status = DNS_OK;
	a->n_addrs = 1;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		return 1;
	}
	if (len >= sizeof(buf))
		return 0;
	memcpy(buf, host, len);
	buf[len] = 0;
	if (inet_pton(AF_INET6, buf, &in6->sin6_addr) != 1)
		return 0;
	in6->sin6_family = AF_INET6;
	if (pct && (in6->sin6_scope_id = dns_scope_id(pct + 1)) == 0)
		dns_answer_error(a, DNS_FAILED, "unknown IPv6 scope");
	return 1;
}

/* ---- cache ---- */

static usec_t dns_host_ttl(const struct dns_host *h)
{
	return h->answer.status == DNS_OK ? dns.max_ttl : dns.nxdomain_ttl;
}

/* TTLs are read at use, so a reload shortens or lengthens cached entries. */
static bool dns_host_fresh(const struct dns_host *h, usec_t now)
{
	return h->has_answer && !h->pending && now - h->done_at < dns_host_ttl(h);
}

static struct dns_host *dns_host_find(const char *name)
{
	struct list *l;

	list_for_each(l, &dns.hosts) {
		struct dns_host *h = container_of(l, struct dns_host, node);
		if (strcasecmp(h->name, name) == 0)
			return h;
	}
	return NULL;
}

static struct dns_host *dns_host_new(const char *name)
{
	struct dns_host *h = xcalloc(1, sizeof(*h));

	h->name = xstrdup(name);
	list_init(&h->waiters);
	list_append(&dns.hosts, &h->node);
	return h;
}

static void dns_host_free(struct dns_host *h)
{
	list_del(&h->node);
	free(h->name);
	free(h);
}

/* Expired entries go, unless a lookup or a request still needs them. */
static void dns_purge(usec_t now)
{
	struct list *l, *tmp;

	list_for_each_safe(l, tmp, &dns.hosts) {
		struct dns_host *h = container_of(l, struct dns_host, node);
		if (!h->pending && list_empty(&h->waiters) && !dns_host_fresh(h, now))
			dns_host_free(h);
	}
}

/* ---- c-ares results ---- */

static bool dns_answer_has(const struct dns_answer *a, const struct sockaddr *sa, size_t len)
{
	for (int i = 0; i < a->n_addrs; i++) {
		if (memcmp(&a->addrs[i], sa, len) == 0)
			return true;
	}
	return false;
}

/* IPv4 first: a server reachable both ways is usually configured for IPv4,
 * and PgBouncer tries IPv4 answers first too. Ports are zeroed so that equal
 * addresses compare equal. */
static void dns_collect(struct dns_answer *a, const struct ares_addrinfo *res, int family)
{
	for (const struct ares_addrinfo_node *n = res ? res->nodes : NULL; n; n = n->ai_next) {
		struct sockaddr_storage ss;
		size_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);

		if (n->ai_family != family || (size_t)n->ai_addrlen < len || a->n_addrs >= DNS_MAX_ADDRS)
			continue;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, n->ai_addr, len);
		if (family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = 0;
		if (!dns_answer_has(a, (struct sockaddr *)&ss, len))
			a->addrs[a->n_addrs++] = ss;
	}
}

static enum dns_status dns_status_from_ares(int status)
{
	switch (status) {
	case ARES_SUCCESS:
		return DNS_OK;
	case ARES_ENOTFOUND:
	case ARES_ENODATA:
	case ARES_ENONAME:
		return DNS_NOTFOUND;
	default:
		return DNS_FAILED;
	}
}

static void dns_format_addrs(const struct dns_answer *a, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; i < a->n_addrs && used + INET6_ADDRSTRLEN + 2 <= size; i++) {
		const struct sockaddr_storage *ss = &a->addrs[i];
		const void *ip = ss->ss_family == AF_INET
			? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
			: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;

		if (i > 0)
			buf[used++] = ',';
		if (!inet_ntop(ss->ss_family, ip, buf + used, (socklen_t)(size - used)))
			buf[used] = 0;
		used += strlen(buf + used);
	}
}

static void dns_host_record(struct dns_host *h, int status, const struct ares_addrinfo *res)
{
	struct dns_answer *a = &h->answer;
	char addrs[DNS_MAX_ADDRS * (INET6_ADDRSTRLEN + 1)];

	memset(a, 0, sizeof(*a));
	a->status = dns_status_from_ares(status);
	if (a->status == DNS_OK) {
		dns_collect(a, res, AF_INET);
		dns_collect(a, res, AF_INET6);
		if (a->n_addrs == 0)
			a->status = DNS_NOTFOUND;
	}
	h->has_answer = true;
	h->done_at = util_monotonic();
	if (a->status == DNS_OK) {
		dns_format_addrs(a, addrs, sizeof(addrs));
		log_debug("DNS: %s is %s", h->name, addrs);
		return;
	}
	dns_answer_error(a, a->status, status == ARES_SUCCESS ? "no usable address"
								 : ares_strerror(status));
	log_warning("DNS lookup failed: %s: %s", h->name, a->errmsg);
}

/* A lookup ended because its channel went away: on reload the request is
 * asked again on the new channel; on shutdown the waiters are told. */
static void dns_host_aborted(struct dns_host *h)
{
	struct dns_answer a;

	if (dns.replacing) {
		h->restart = true;
		return;
	}
	dns_answer_error(&a, DNS_CANCELLED, "DNS lookup cancelled");
	dns_waiters_to_ready(h, &a);
}

static void dns_on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct dns_host *h = arg;

	h->pending = false;
	dns.n_pending--;
	if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED)
		dns_host_aborted(h);
	else {
		dns_host_record(h, status, res);
		dns_waiters_to_ready(h, &h->answer);
	}
	if (res)
		ares_freeaddrinfo(res);
}

/* ---- libevent glue ---- */

static void dns_arm_timer(void)
{
	struct timeval tv, *tvp;

	if (!dns.channel)
		return;
	tvp = ares_timeout(dns.channel, NULL, &tv);
	if (tvp)
		evtimer_add(dns.timer, tvp);
	else
		evtimer_del(dns.timer);
}

static void dns_on_timer(evutil_socket_t fd, short what, void *arg)
{
	ares_process_fd(dns.channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_arm_timer();
	dns_drain();
}

static void dns_on_sock_ready(evutil_socket_t fd, short what, void *arg)
{
	ares_socket_t rfd = (what & EV_READ) ? fd : ARES_SOCKET_BAD;
	ares_socket_t wfd = (what & EV_WRITE) ? fd : ARES_SOCKET_BAD;

	/* May free this event (via dns_on_sock_state): nothing below touches it. */
	ares_process_fd(dns.channel, rfd, wfd);
	dns_arm_timer();
	dns_drain();
}

static struct dns_sock *dns_sock_find(ares_socket_t fd)
{
	struct list *l;

	list_for_each(l, &dns.socks) {
		struct dns_sock *ds = container_of(l, struct dns_sock, node);
		if (ds->fd == fd)
			return ds;
	}
	return NULL;
}

static void dns_sock_free(struct dns_sock *ds)
{
	if (ds->ev)
		event_free(ds->ev);
	list_del(&ds->node);
	free(ds);
}

/* c-ares tells us which of its sockets to watch for what; (0, 0) means it
 * is closing the socket. */
static void dns_on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct dns_sock *ds = dns_sock_find(fd);
	short what = (short)((readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));

	if (!what) {
		if (ds)
			dns_sock_free(ds);
		return;
	}
	if (!ds) {
		ds = xcalloc(1, sizeof(*ds));
		ds->fd = fd;
		list_append(&dns.socks, &ds->node);
	} else if (ds->ev) {
		event_free(ds->ev);
	}
	ds->ev = event_new(dns.base, fd, what | EV_PERSIST, dns_on_sock_ready, NULL);
	if (!ds->ev || event_add(ds->ev, NULL) < 0) {
		/* The query then ends by its timeout instead of its answer. */
		log_error("DNS: cannot watch socket %d", (int)fd);
		dns_sock_free(ds);
	}
}

/* ---- lookups ---- */

/* May answer before returning (hosts file, malformed name): the waiters are
 * then on dns.ready and h->pending is false again. */
static void dns_lookup_start(struct dns_host *h)
{
	struct ares_addrinfo_hints hints;

	memset(&hints, 0, sizeof(hints));
	/* NOSORT: we order IPv4 first ourselves; RFC 6724 sorting would cost a
	 * connect() per address. ENVHOSTS: CARES_HOSTS may name another hosts
	 * file, as c-ares documents (the unit tests rely on it). */
	hints.ai_flags = ARES_AI_NOSORT | ARES_AI_ENVHOSTS;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	h->pending = true;
	h->restart = false;
	dns.n_pending++;
	log_debug("DNS: looking up %s", h->name);
	ares_getaddrinfo(dns.channel, h->name, NULL, &hints, dns_on_addrinfo, h);
	dns_arm_timer();
}

/* ---- channel ---- */

static int dns_channel_new(ares_channel *out)
{
	struct ares_options o;
	int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_LOOKUPS;
	int rc;

	memset(&o, 0, sizeof(o));
	o.sock_state_cb = dns_on_sock_state;
	/* "f" first: names from /etc/hosts (localhost above all) must work
	 * whatever nsswitch or host.conf say. */
	o.lookups = (char *)"fb";
	if (dns.resolv_conf) {
		if (access(dns.resolv_conf, R_OK) < 0)
			log_warning("DNS: cannot read resolv_conf %s: c-ares falls back to its defaults",
				    dns.resolv_conf);
		o.resolvconf_path = dns.resolv_conf;
		mask |= ARES_OPT_RESOLVCONF;
	}
	rc = ares_init_options(out, &o, mask);
	if (rc != ARES_SUCCESS) {
		log_error("DNS: c-ares initialisation failed: %s", ares_strerror(rc));
		return -1;
	}
	return 0;
}

/* Destroying the old channel ends its lookups with ARES_EDESTRUCTION, which
 * marks their hosts for restart; their waiters stay and are asked again. */
static void dns_replace_channel(ares_channel fresh)
{
	struct list *l;

	dns.replacing = true;
	ares_destroy(dns.channel);
	dns.replacing = false;
	dns.channel = fresh;
	list_for_each(l, &dns.hosts) {
		struct dns_host *h = container_of(l, struct dns_host, node);
		if (!h->restart)
			continue;
		h->restart = false;
		if (!list_empty(&h->waiters))
			dns_lookup_start(h);
	}
	dns_arm_timer();
	dns_drain();
}

/* ---- public API ---- */

static void dns_copy_settings(const struct dns_settings *s)
{
	dns.max_ttl = s->max_ttl_usec > 0 ? s->max_ttl_usec : 0;
	dns.nxdomain_ttl = s->nxdomain_ttl_usec > 0 ? s->nxdomain_ttl_usec : 0;
	free(dns.resolv_conf);
	dns.resolv_conf = s->resolv_conf && s->resolv_conf[0] ? xstrdup(s->resolv_conf) : NULL;
}

int dns_init(struct event_base *base, const struct dns_settings *s)
{
	int rc;

	if (dns.channel) {
		log_error("DNS: resolver already running");
		return -1;
	}
	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		log_error("DNS: c-ares library initialisation failed: %s", ares_strerror(rc));
		return -1;
	}
	dns.base = base;
	dns_copy_settings(s);
	dns.timer = evtimer_new(base, dns_on_timer, NULL);
	if (!dns.timer) {
		log_error("DNS: cannot create the timeout event");
		goto fail;
	}
	if (dns_channel_new(&dns.channel) < 0)
		goto fail;
	return 0;
fail:
	if (dns.timer)
		event_free(dns.timer);
	dns.timer = NULL;
	free(dns.resolv_conf);
	dns.resolv_conf = NULL;
	ares_library_cleanup();
	return -1;
}

void dns_shutdown(void)
{
	struct list *l;

	if (!dns.channel)
		return;
	dns.stopping = true;
	/* Ends every lookup with ARES_EDESTRUCTION (waiters -> ready, cancelled)
	 * and closes its sockets through dns_on_sock_state. */
	ares_destroy(dns.channel);
	dns.channel = NULL;
	event_free(dns.timer);
	dns.timer = NULL;
	while ((l = list_first(&dns.socks)) != NULL)
		dns_sock_free(container_of(l, struct dns_sock, node));
	while ((l = list_first(&dns.hosts)) != NULL)
		dns_host_free(container_of(l, struct dns_host, node));
	free(dns.resolv_conf);
	dns.resolv_conf = NULL;
	ares_library_cleanup();
	dns_drain();
	dns.stopping = false;
}

static bool dns_same_path(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

void dns_apply_settings(const struct dns_settings *s)
{
	char *old_conf = dns.resolv_conf ? xstrdup(dns.resolv_conf) : NULL;
	ares_channel fresh;

	dns_copy_settings(s);
	if (!dns.channel || dns_same_path(old_conf, dns.resolv_conf)) {
		free(old_conf);
		return;
	}
	log_info("DNS: resolv_conf changed to %s", dns.resolv_conf ? dns.resolv_conf : "(system default)");
	if (dns_channel_new(&fresh) < 0) {
		log_warning("DNS: keeping the previous resolver configuration");
		free(dns.resolv_conf);
		dns.resolv_conf = old_conf;
		return;
	}
	free(old_conf);
	dns_replace_channel(fresh);
}

static void dns_fail_now(dns_cb_fn cb, void *arg, enum dns_status st, const char *msg)
{
	struct dns_answer a;

	dns_answer_error(&a, st, msg);
	dns_deliver(cb, arg, 0, &a);
}

struct dns_req *dns_resolve(const char *host, int port, dns_cb_fn cb, void *arg)
{
	struct dns_answer a;
	struct dns_host *h;
	struct dns_req *req;
	usec_t now;

	if (!host || !host[0]) {
		dns_fail_now(cb, arg, DNS_FAILED, "empty host name");
		return NULL;
	}
	if (dns_literal(host, &a)) {
		dns_deliver(cb, arg, port, &a);
		return NULL;
	}
	if (!dns.channel) {
		dns_fail_now(cb, arg, dns.stopping ? DNS_CANCELLED : DNS_FAILED,
			     "DNS resolver is not running");
		return NULL;
	}
	now = util_monotonic();
	dns_purge(now);
	h = dns_host_find(host);
	if (h && dns_host_fresh(h, now)) {
		log_noise("DNS: %s answered from cache", h->name);
		a = h->answer;
		dns_deliver(cb, arg, port, &a);
		return NULL;
	}
	if (!h)
		h = dns_host_new(host);
	req = xcalloc(1, sizeof(*req));
	req->cb = cb;
	req->arg = arg;
	req->port = port;
	list_append(&h->waiters, &req->node);
	if (h->pending)
		return req;
	dns_lookup_start(h);
	if (h->pending)
		return req;
	dns_drain();            /* answered at once; req was delivered and freed */
	return NULL;
}

void dns_cancel(struct dns_req *req)
{
	if (!req)
		return;
	/* Unlinks from host->waiters or dns.ready alike. A lookup left without
	 * waiters runs on: its answer is cached for the next request. */
	list_del(&req->node);
	free(req);
}

int dns_cache_foreach(void (*fn)(void *arg, const char *host, int64_t ttl_left_usec,
				 const char *addrs),
		      void *arg)
{
	char addrs[DNS_MAX_ADDRS * (INET6_ADDRSTRLEN + 1)];
	usec_t now = util_monotonic();
	struct list *l;
	int n = 0;

	dns_purge(now);
	list_for_each(l, &dns.hosts) {
		struct dns_host *h = container_of(l, struct dns_host, node);
		if (!dns_host_fresh(h, now))
			continue;
		dns_format_addrs(&h->answer, addrs, sizeof(addrs));
		fn(arg, h->name, h->done_at + dns_host_ttl(h) - now, addrs);
		n++;
	}
	return n;
}

size_t dns_cache_count(void)
{
	usec_t now = util_monotonic();
	struct list *l;
	size_t n = 0;

	list_for_each(l, &dns.hosts) {
		if (dns_host_fresh(container_of(l, struct dns_host, node), now))
			n++;
	}
	return n;
}

size_t dns_pending_count(void)
{
	return dns.n_pending;
}

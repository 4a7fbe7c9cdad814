/* pgcrew — asynchronous host name resolution for server connections: one
 * c-ares channel per worker driven by the worker's libevent loop, with a
 * per-name cache that follows PgBouncer's dns_max_ttl / dns_nxdomain_ttl. */
#ifndef PGCREW_DNS_H
#define PGCREW_DNS_H

#include "types.h"

#include <sys/socket.h>

struct event_base;

#define DNS_MAX_ADDRS 8                  /* addresses handed to one callback */

struct dns_settings {
	int64_t max_ttl_usec;            /* positive answers are cached this long (0 = never) */
	int64_t nxdomain_ttl_usec;       /* failures and NXDOMAIN are cached this long (0 = never) */
	const char *resolv_conf;         /* alternative resolv.conf; NULL or "" = system default */
};

enum dns_status {
	DNS_OK,
	DNS_NOTFOUND,                    /* the name does not exist or has no address */
	DNS_FAILED,                      /* resolver error: timeout, refused, bad name ... */
	DNS_CANCELLED,                   /* dns_shutdown() while the lookup was pending */
	DNS_STATUS_COUNT
};

const char *dns_status_name(enum dns_status st);

/*
 * Result callback.  On DNS_OK, addrs holds 1..DNS_MAX_ADDRS addresses with
 * the requested port filled in, IPv4 before IPv6, and errmsg is NULL;
 * otherwise addrs is NULL, n_addrs is 0 and errmsg says why.  Both are
 * valid only during the call.  The request handle is already gone when the
 * callback runs: do not cancel it.
 */
typedef void (*dns_cb_fn)(void *arg, enum dns_status st, const struct sockaddr_storage *addrs,
			  int n_addrs, const char *errmsg);

struct dns_req;

/* Per worker, after fork.  Returns 0, or -1 when c-ares cannot start. */
int dns_init(struct event_base *base, const struct dns_settings *s) MUSTCHECK;

/* Fails every pending request with DNS_CANCELLED (callbacks run before it
 * returns) and frees the channel, events and cache.  dns_init may follow. */
void dns_shutdown(void);

/* Reload: new TTLs apply to cached entries at once; a changed resolv_conf
 * builds a new channel and re-issues the lookups that were in flight. */
void dns_apply_settings(const struct dns_settings *s);

/*
 * Resolve host (a name or an IPv4/IPv6 literal) for port.  IP literals, cache
 * hits and answers c-ares can give without the network (/etc/hosts) call cb
 * before returning, and then NULL is returned.  Otherwise the callback runs
 * later from the event loop and the returned handle may be passed to
 * dns_cancel() until then.  Concurrent requests for one name share a lookup.
 */
struct dns_req *dns_resolve(const char *host, int port, dns_cb_fn cb, void *arg);

/* The callback of req will not be called.  NULL is ignored. */
void dns_cancel(struct dns_req *req);

/* SHOW DNS_HOSTS: calls fn for every name with an unexpired answer; addrs is
 * "a,b,c" (empty for a cached failure).  fn must not call other dns_*
 * functions.  Returns the number of calls. */
int dns_cache_foreach(void (*fn)(void *arg, const char *host, int64_t ttl_left_usec,
				 const char *addrs),
		      void *arg);

/* SHOW LISTS: names with an unexpired cached answer (dns_names). */
size_t dns_cache_count(void);

/* SHOW LISTS: lookups in flight (dns_queries): one per name, however many
 * requests wait for it. */
size_t dns_pending_count(void);

#endif

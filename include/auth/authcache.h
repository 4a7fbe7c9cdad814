/* pgcrew — the per-worker cache of auth_query answers: a user's secret, or
 * "no such user", kept for auth_query_cache_ttl (a pgcrew extension) so a
 * burst of logins does not become a burst of queries. Pure data structure:
 * the caller passes the clock, so it is unit-tested without a worker. */
#ifndef PGCREW_AUTH_AUTHCACHE_H
#define PGCREW_AUTH_AUTHCACHE_H

#include "types.h"

#define AUTHCACHE_KEY_MAX 256
#define AUTHCACHE_SECRET_MAX SECRET_MAX_LEN

enum authcache_result {
	AUTHCACHE_MISS,          /* never asked, expired or evicted */
	AUTHCACHE_FOUND,         /* the user exists; secret filled ("" = NULL password) */
	AUTHCACHE_NO_USER,       /* the query said: no such user */
};

struct authcache;

/* A cache holding at most max_entries answers (the oldest go first). */
struct authcache *authcache_new(size_t max_entries);
void authcache_free(struct authcache *ac);
/* Forget everything (RELOAD); returns how many answers were dropped. */
size_t authcache_clear(struct authcache *ac);
size_t authcache_count(const struct authcache *ac);

/* The key of one answer: where the query ran (auth database and user), which
 * query, and for whom. False if it does not fit in len. */
bool authcache_key(char *buf, size_t len, const char *auth_db, const char *auth_user,
		   const char *query, const char *user) MUSTCHECK;

/* An answer younger than ttl, or AUTHCACHE_MISS (an expired one is dropped). */
enum authcache_result authcache_get(struct authcache *ac, const char *key, usec_t now, usec_t ttl,
				    char *secret, size_t len);
/* Remember an answer: secret NULL means "no such user". Replaces an older one. */
void authcache_put(struct authcache *ac, const char *key, const char *secret, usec_t now);

#endif

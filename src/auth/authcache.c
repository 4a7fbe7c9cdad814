/* pgcrew — the per-worker cache of auth_query answers (see authcache.h).
 * A chained hash table for lookups plus an age list for eviction: when full,
 * the oldest answer goes, so memory stays bounded whatever names clients
 * try. Entries are allocated on a cache miss, which already costs a query. */
#include "auth/authcache.h"
#include "util.h"

#include <openssl/crypto.h>
#include <stdio.h>

struct entry {
	struct entry *next;              /* bucket chain */
	struct list age;                 /* authcache.by_age, oldest first */
	usec_t at;                       /* when the answer arrived */
	bool no_user;
	char key[AUTHCACHE_KEY_MAX];
	size_t secret_len;
	char secret[];                   /* secret_len bytes and a NUL */
};

struct authcache {
	struct entry **buckets;
	size_t n_buckets;                /* a power of two */
	size_t count, max;
	struct list by_age;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ULL;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

struct authcache *authcache_new(size_t max_entries)
{
	struct authcache *ac = xcalloc(1, sizeof(*ac));
	ac->max = max_entries > 0 ? max_entries : 1;
	ac->n_buckets = 16;
	while (ac->n_buckets < ac->max && ac->n_buckets < (1u << 20))
		ac->n_buckets <<= 1;
	ac->buckets = xcalloc(ac->n_buckets, sizeof(*ac->buckets));
	list_init(&ac->by_age);
	return ac;
}

static struct entry **slot_of(struct authcache *ac, const char *key)
{
	struct entry **pp = &ac->buckets[fnv1a(key) & (ac->n_buckets - 1)];
	while (*pp && strcmp((*pp)->key, key) != 0)
		pp = &(*pp)->next;
	return pp;
}

static void drop(struct authcache *ac, struct entry **pp)
{
	struct entry *e = *pp;
	*pp = e->next;
	list_del(&e->age);
	OPENSSL_cleanse(e->secret, e->secret_len);
	free(e);
	ac->count--;
}

size_t authcache_clear(struct authcache *ac)
{
	size_t n = ac->count;
	for (size_t i = 0; i < ac->n_buckets; i++)
		while (ac->buckets[i])
			drop(ac, &ac->buckets[i]);
	return n;
}

void authcache_free(struct authcache *ac)
{
	if (!ac)
		return;
	authcache_clear(ac);
	free(ac->buckets);
	free(ac);
}

size_t authcache_count(const struct authcache *ac)
{
	return ac->count;
}

bool authcache_key(char *buf, size_t len, const char *auth_db, const char *auth_user,
		   const char *query, const char *user)
{
	/* The query by hash: keys stay short, and two configured queries
	 * colliding in 64 bits is not a practical concern. The client's name
	 * comes last, so it cannot reshape the fields before it. */
	int n = snprintf(buf, len, "%s\x1f%s\x1f%016llx\x1f%s", auth_db, auth_user,
			 (unsigned long long)fnv1a(query), user);
	return n >= 0 && (size_t)n < len;
}

enum authcache_result authcache_get(struct authcache *ac, const char *key, usec_t now, usec_t ttl,
				    char *secret, size_t len)
{
	struct entry **pp = slot_of(ac, key);
	struct entry *e = *pp;

	if (!e)
		return AUTHCACHE_MISS;
	if (ttl <= 0 || now - e->at >= ttl || now < e->at) {
		drop(ac, pp);
		return AUTHCACHE_MISS;
	}
	if (e->no_user)
		return AUTHCACHE_NO_USER;
	strlcpy_(secret, e->secret, len);
	return AUTHCACHE_FOUND;
}

void authcache_put(struct authcache *ac, const char *key, const char *secret, usec_t now)
{
	struct entry **pp = slot_of(ac, key);

	if (strlen(key) >= AUTHCACHE_KEY_MAX)
		return;
	if (*pp)
		drop(ac, pp);
	if (ac->count >= ac->max) {
		struct entry *old = container_of(ac->by_age.next, struct entry, age);
		drop(ac, slot_of(ac, old->key));
	}
	size_t slen = secret ? strnlen(secret, AUTHCACHE_SECRET_MAX - 1) : 0;
	struct entry *e = xcalloc(1, sizeof(*e) + slen + 1);
	strlcpy_(e->key, key, sizeof(e->key));
	e->no_user = secret == NULL;
	e->secret_len = slen;
	memcpy(e->secret, secret ? secret : "", slen);
	e->at = now;
	/* New answers are the youngest: appended, so by_age stays sorted. */
	list_append(&ac->by_age, &e->age);
	pp = slot_of(ac, key);
	e->next = *pp;
	*pp = e;
	ac->count++;
}

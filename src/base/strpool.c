/* pgcrew — interned strings (see strpool.h): entries indexed by id, found
 * by value through a chained hash of ids; released ids are reused. All the
 * tables go when the last string does, so a process that ends with every
 * connection closed leaves nothing behind. */
#include "strpool.h"
#include "util.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint32_t next;       /* next id in the hash chain, 0 = end */
	uint32_t hash;
	uint32_t refs;
	uint32_t id;
	char s[];
};

static struct {
	struct entry **by_id;    /* [0] unused */
	uint32_t n_ids;          /* ids handed out so far + 1 */
	uint32_t cap_ids;
	uint32_t *free_ids;      /* released ids, reused first */
	uint32_t n_free;
	uint32_t *buckets;       /* head id of each chain */
	uint32_t mask;           /* buckets - 1 */
	size_t n;                /* live strings */
} T;

static uint32_t hash_str(const char *s, size_t *len)
{
	uint32_t h = 2166136261u;           /* FNV-1a */
	const char *p = s;
	for (; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	*len = (size_t)(p - s);
	return h;
}

static void rehash(void)
{
	uint32_t nb = T.buckets ? (T.mask + 1) * 2 : 64;
	free(T.buckets);
	T.buckets = xcalloc(nb, sizeof(*T.buckets));
	T.mask = nb - 1;
	for (uint32_t id = 1; id < T.n_ids; id++) {
		struct entry *e = T.by_id[id];
		if (!e)
			continue;
		e->next = T.buckets[e->hash & T.mask];
		T.buckets[e->hash & T.mask] = id;
	}
}

static uint32_t new_id(void)
{
	if (T.n_free)
		return T.free_ids[--T.n_free];
	if (T.n_ids == T.cap_ids) {
		T.cap_ids = T.cap_ids ? T.cap_ids * 2 : 64;
		T.by_id = xrealloc(T.by_id, T.cap_ids * sizeof(*T.by_id));
		T.free_ids = xrealloc(T.free_ids, T.cap_ids * sizeof(*T.free_ids));
	}
	if (T.n_ids == 0)
		T.by_id[T.n_ids++] = NULL;      /* id 0 means "no string" */
	return T.n_ids++;
}

uint32_t strpool_intern(const char *s)
{
	size_t len;
	uint32_t h = hash_str(s, &len);
	for (uint32_t id = T.buckets ? T.buckets[h & T.mask] : 0; id; id = T.by_id[id]->next) {
		struct entry *e = T.by_id[id];
		if (e->hash == h && strcmp(e->s, s) == 0) {
			e->refs++;
			return id;
		}
	}
	if (!T.buckets || T.n > T.mask)
		rehash();
	uint32_t id = new_id();
	struct entry *e = xmalloc(sizeof(*e) + len + 1);
	memcpy(e->s, s, len + 1);
	e->hash = h;
	e->refs = 1;
	e->id = id;
	e->next = T.buckets[h & T.mask];
	T.buckets[h & T.mask] = id;
	T.by_id[id] = e;
	T.n++;
	return id;
}

void strpool_retain(uint32_t id)
{
	if (id)
		T.by_id[id]->refs++;
}

static void free_all(void)
{
	free(T.by_id);
	free(T.free_ids);
	free(T.buckets);
	memset(&T, 0, sizeof(T));
}

void strpool_release(uint32_t id)
{
	if (!id)
		return;
	struct entry *e = T.by_id[id];
	if (--e->refs > 0)
		return;
	uint32_t *pp = &T.buckets[e->hash & T.mask];
	while (*pp != id)
		pp = &T.by_id[*pp]->next;
	*pp = e->next;
	free(e);
	T.by_id[id] = NULL;
	T.free_ids[T.n_free++] = id;
	if (--T.n == 0)
		free_all();
}

const char *strpool_str(uint32_t id)
{
	return id ? T.by_id[id]->s : NULL;
}

const char *strpool_get(const char *s)
{
	return strpool_str(strpool_intern(s));
}

void strpool_put(const char *p)
{
	if (p)
		strpool_release(((const struct entry *)(const void *)(p - offsetof(struct entry, s)))->id);
}

size_t strpool_count(void)
{
	return T.n;
}

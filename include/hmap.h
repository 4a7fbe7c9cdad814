/* pgcrew — an intrusive hash table: objects keyed by name (databases, users,
 * pools, the ledger's counts) are found in constant time however many
 * tenants an instance has. The object embeds a struct hnode; the caller
 * hashes its key and compares keys while walking a bucket. */
#ifndef PGCREW_HMAP_H
#define PGCREW_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hnode {
	struct hnode *next;
	uint32_t hash;
};

struct hmap {
	struct hnode **b;
	uint32_t mask;             /* buckets - 1; 0 with no buckets yet */
	size_t n;
};

void hmap_init(struct hmap *m);
/* The buckets only: the objects are the caller's. */
void hmap_free(struct hmap *m);
void hmap_add(struct hmap *m, struct hnode *node, uint32_t hash);
void hmap_del(struct hmap *m, struct hnode *node);
/* The first node of that hash, then the next ones (other keys may share a
 * hash: the caller compares). */
struct hnode *hmap_first(const struct hmap *m, uint32_t hash);
struct hnode *hmap_next(const struct hnode *node);

/* FNV-1a, continued from h (start with HMAP_SEED). */
#define HMAP_SEED 2166136261u
uint32_t hmap_hash(uint32_t h, const void *p, size_t len);
static inline uint32_t hmap_hash_str(const char *s)
{
	uint32_t h = HMAP_SEED;
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		h = (h ^ *c) * 16777619u;
	return h;
}

#endif

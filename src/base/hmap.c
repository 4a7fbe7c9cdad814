/* pgcrew — an intrusive chained hash table (hmap.h). It doubles when it
 * holds as many nodes as buckets, and never shrinks: a table sized for the
 * most tenants at once costs 8 bytes a bucket. */
#include "hmap.h"
#include "util.h"

void hmap_init(struct hmap *m)
{
	m->b = NULL;
	m->mask = 0;
	m->n = 0;
}

void hmap_free(struct hmap *m)
{
	free(m->b);
	hmap_init(m);
}

static void grow(struct hmap *m)
{
	uint32_t nb = m->b ? (m->mask + 1) * 2 : 16;
	struct hnode **b = xcalloc(nb, sizeof(*b));
	for (uint32_t i = 0; m->b && i <= m->mask; i++) {
		struct hnode *n = m->b[i];
		while (n) {
			struct hnode *next = n->next;
			n->next = b[n->hash & (nb - 1)];
			b[n->hash & (nb - 1)] = n;
			n = next;
		}
	}
	free(m->b);
	m->b = b;
	m->mask = nb - 1;
}

void hmap_add(struct hmap *m, struct hnode *node, uint32_t hash)
{
	if (!m->b || m->n > m->mask)
		grow(m);
	node->hash = hash;
	node->next = m->b[hash & m->mask];
	m->b[hash & m->mask] = node;
	m->n++;
}

void hmap_del(struct hmap *m, struct hnode *node)
{
	if (!m->b)
		return;
	for (struct hnode **at = &m->b[node->hash & m->mask]; *at; at = &(*at)->next) {
		if (*at == node) {
			*at = node->next;
			node->next = NULL;
			m->n--;
			return;
		}
	}
}

static struct hnode *same_hash(struct hnode *n, uint32_t hash)
{
	while (n && n->hash != hash)
		n = n->next;
	return n;
}

struct hnode *hmap_first(const struct hmap *m, uint32_t hash)
{
	return m->b ? same_hash(m->b[hash & m->mask], hash) : NULL;
}

struct hnode *hmap_next(const struct hnode *node)
{
	return same_hash(node->next, node->hash);
}

uint32_t hmap_hash(uint32_t h, const void *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 16777619u;
	return h;
}

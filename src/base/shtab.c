/* pgcrew — named slots in shared memory (see shtab.h): an open-addressed
 * index from key to slot, the slots with their holders, and a free list,
 * all under one robust process-shared mutex. Taking and letting go of a
 * slot happens when a pool, database or user appears or goes, never per
 * query, so a lock costs nothing that matters; a process that dies with
 * the lock held leaves the slots as the truth, and the next locker
 * rebuilds the index and the free list from them. */
#include "shtab.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define WORDS (SHTAB_WORKERS / 64)
#define EMPTY 0u
#define TOMB UINT32_MAX
#define NO_SLOT UINT32_MAX

struct slot {
	uint32_t gen;              /* bumped each time the slot is taken */
	uint32_t hash;
	uint32_t next_free;        /* free list link while free */
	uint16_t len;
	uint8_t used;              /* set last when taken, cleared first when freed */
	uint64_t holders[WORDS];   /* bit w: worker w holds the slot */
	uint8_t key[SHTAB_KEY_MAX];
};

struct shtab {
	pthread_mutex_t lock;
	uint32_t cap;              /* slots */
	uint32_t mask;             /* buckets - 1 (a power of two, >= 2 * cap) */
	uint32_t used, tombs;
	uint32_t high;             /* slots [0, high) have been handed out */
	uint32_t free_head;        /* a freed slot to reuse, NO_SLOT for none */
	/* followed by uint32_t buckets[mask + 1] (EMPTY, TOMB or slot + 1),
	 * then struct slot slots[cap] */
};

static uint32_t n_buckets(uint32_t cap)
{
	uint32_t n = 16;
	while (n < 2 * (uint64_t)cap)
		n *= 2;
	return n;
}

static size_t head_len(void)
{
	return (sizeof(struct shtab) + 63) & ~(size_t)63;
}

static uint32_t *buckets(struct shtab *t)
{
	return (uint32_t *)((char *)t + head_len());
}

static struct slot *slots(struct shtab *t)
{
	size_t off = head_len() + (((size_t)t->mask + 1) * sizeof(uint32_t) + 63) / 64 * 64;
	return (struct slot *)((char *)t + off);
}

size_t shtab_size(uint32_t capacity)
{
	size_t b = ((size_t)n_buckets(capacity) * sizeof(uint32_t) + 63) / 64 * 64;
	return head_len() + b + (size_t)capacity * sizeof(struct slot);
}

int shtab_init(struct shtab *t, uint32_t capacity)
{
	pthread_mutexattr_t a;
	if (pthread_mutexattr_init(&a) != 0)
		return -1;
	int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
		 pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) ||
		 pthread_mutex_init(&t->lock, &a);
	pthread_mutexattr_destroy(&a);
	if (rc)
		return -1;
	t->cap = capacity;
	t->mask = n_buckets(capacity) - 1;
	t->free_head = NO_SLOT;
	return 0;
}

void shtab_destroy(struct shtab *t)
{
	pthread_mutex_destroy(&t->lock);
}

static uint32_t hash_key(const void *key, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const uint8_t *)key)[i]) * 16777619u;
	return h;
}

static void bucket_put(struct shtab *t, uint32_t i)
{
	uint32_t *b = buckets(t);
	for (uint32_t k = slots(t)[i].hash;; k++) {
		uint32_t *at = &b[k & t->mask];
		if (*at == EMPTY || *at == TOMB) {
			t->tombs -= *at == TOMB;
			*at = i + 1;
			return;
		}
	}
}

static bool any_holder(const struct slot *s);

/* The index and the free list again from the slots alone: after a holder
 * of the lock died mid-way, and when tombstones make probes long. */
static void rebuild(struct shtab *t)
{
	struct slot *s = slots(t);
	memset(buckets(t), 0, ((size_t)t->mask + 1) * sizeof(uint32_t));
	t->tombs = 0;
	t->used = 0;
	t->free_head = NO_SLOT;
	for (uint32_t i = t->high; i-- > 0;) {
		if (s[i].used && !any_holder(&s[i]))     /* its last holder died letting go of it */
			__atomic_store_n(&s[i].used, 0, __ATOMIC_RELAXED);
		if (s[i].used) {
			bucket_put(t, i);
			t->used++;
		} else {
			s[i].next_free = t->free_head;
			t->free_head = i;
		}
	}
}

static void lock(struct shtab *t)
{
	int rc = pthread_mutex_lock(&t->lock);
	if (rc == EOWNERDEAD) {
		log_warning("shared table: a process died holding its lock; rebuilding the index");
		rebuild(t);
		pthread_mutex_consistent(&t->lock);
	} else if (rc != 0) {
		fatal("shared table: lock failed (%d)", rc);
	}
}

static void unlock(struct shtab *t)
{
	pthread_mutex_unlock(&t->lock);
}

/* The bucket holding key, or (-1, with *insert_at the first bucket a new
 * entry may take). */
static int64_t find_bucket(struct shtab *t, const void *key, size_t len, uint32_t h, uint32_t *insert_at)
{
	uint32_t *b = buckets(t);
	struct slot *s = slots(t);
	*insert_at = NO_SLOT;
	for (uint32_t k = h, n = 0; n <= t->mask; k++, n++) {
		uint32_t pos = k & t->mask, v = b[pos];
		if (v == EMPTY) {
			if (*insert_at == NO_SLOT)
				*insert_at = pos;
			return -1;
		}
		if (v == TOMB) {
			if (*insert_at == NO_SLOT)
				*insert_at = pos;
			continue;
		}
		const struct slot *e = &s[v - 1];
		if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
			return pos;
	}
	return -1;
}

static void set_holder(struct slot *s, int w, bool on)
{
	uint64_t bit = 1ull << (w % 64);
	if (on)
		s->holders[w / 64] |= bit;
	else
		s->holders[w / 64] &= ~bit;
}

static bool any_holder(const struct slot *s)
{
	for (int i = 0; i < WORDS; i++)
		if (s->holders[i])
			return true;
	return false;
}

static uint32_t take_free(struct shtab *t)
{
	uint32_t i = t->free_head;
	if (i != NO_SLOT) {
		t->free_head = slots(t)[i].next_free;
		return i;
	}
	return t->high < t->cap ? t->high++ : NO_SLOT;
}

int shtab_hold(struct shtab *t, int w, const void *key, size_t len, uint32_t *gen,
	       shtab_fresh_fn fn, void *arg)
{
	if (w < 0 || w >= SHTAB_WORKERS || len > SHTAB_KEY_MAX)
		return -1;
	uint32_t h = hash_key(key, len), at;
	lock(t);
	int64_t pos = find_bucket(t, key, len, h, &at);
	uint32_t i = NO_SLOT;
	if (pos >= 0)
		i = buckets(t)[pos] - 1;
	else if (at != NO_SLOT)
		i = take_free(t);
	if (i == NO_SLOT) {
		unlock(t);
		return -1;
	}
	struct slot *s = &slots(t)[i];
	if (pos < 0) {
		/* In this order: a process that dies in between leaves a slot
		 * that is either free or used with its holder (see rebuild). */
		/* gen and used are read without the lock (shtab_gen_at) */
		__atomic_store_n(&s->gen, s->gen + 1, __ATOMIC_RELAXED);
		s->hash = h;
		s->len = (uint16_t)len;
		memcpy(s->key, key, len);
		memset(s->holders, 0, sizeof(s->holders));
		set_holder(s, w, true);
		__atomic_store_n(&s->used, 1, __ATOMIC_RELEASE);
		t->tombs -= buckets(t)[at] == TOMB;
		buckets(t)[at] = i + 1;
		t->used++;
		if (fn)
			fn((int)i, arg);
	}
	set_holder(s, w, true);
	if (gen)
		*gen = s->gen;
	unlock(t);
	return (int)i;
}

/* Slot i leaves the index and goes on the free list (lock held). */
static void free_slot(struct shtab *t, uint32_t i)
{
	struct slot *s = &slots(t)[i];
	uint32_t at;
	int64_t pos = find_bucket(t, s->key, s->len, s->hash, &at);
	__atomic_store_n(&s->used, 0, __ATOMIC_RELAXED);
	if (pos >= 0) {
		buckets(t)[pos] = TOMB;
		t->tombs++;
	}
	t->used--;
	s->next_free = t->free_head;
	t->free_head = i;
	if (t->tombs > (t->mask + 1) / 4)
		rebuild(t);
}

bool shtab_release(struct shtab *t, int w, int i)
{
	bool freed = false;
	if (i < 0 || (uint32_t)i >= t->cap || w < 0 || w >= SHTAB_WORKERS)
		return false;
	lock(t);
	struct slot *s = &slots(t)[i];
	if (s->used) {
		set_holder(s, w, false);
		if (!any_holder(s)) {
			free_slot(t, (uint32_t)i);
			freed = true;
		}
	}
	unlock(t);
	return freed;
}

int shtab_worker_gone(struct shtab *t, int w)
{
	int freed = 0;
	if (w < 0 || w >= SHTAB_WORKERS)
		return 0;
	lock(t);
	for (uint32_t i = 0; i < t->high; i++) {
		struct slot *s = &slots(t)[i];
		if (!s->used || !(s->holders[w / 64] & (1ull << (w % 64))))
			continue;
		set_holder(s, w, false);
		if (!any_holder(s)) {
			free_slot(t, i);
			freed++;
		}
	}
	unlock(t);
	return freed;
}

int shtab_find(struct shtab *t, const void *key, size_t len)
{
	uint32_t at;
	if (len > SHTAB_KEY_MAX)
		return -1;
	lock(t);
	int64_t pos = find_bucket(t, key, len, hash_key(key, len), &at);
	int i = pos >= 0 ? (int)buckets(t)[pos] - 1 : -1;
	unlock(t);
	return i;
}

uint32_t shtab_gen_at(struct shtab *t, int i)
{
	if (i < 0 || (uint32_t)i >= t->cap)
		return 0;
	const struct slot *s = &slots(t)[i];
	if (!__atomic_load_n(&s->used, __ATOMIC_ACQUIRE))
		return 0;
	return __atomic_load_n(&s->gen, __ATOMIC_RELAXED);
}

int shtab_key_at(struct shtab *t, int i, void *key, size_t cap, uint32_t *gen)
{
	int len = -1;
	if (i < 0 || (uint32_t)i >= t->cap)
		return -1;
	lock(t);
	const struct slot *s = &slots(t)[i];
	if ((uint32_t)i < t->high && s->used) {
		len = s->len;
		memcpy(key, s->key, (size_t)len < cap ? (size_t)len : cap);
		if (gen)
			*gen = s->gen;
	}
	unlock(t);
	return len;
}

bool shtab_held_by(struct shtab *t, int i, int w)
{
	bool held = false;
	if (i < 0 || (uint32_t)i >= t->cap || w < 0 || w >= SHTAB_WORKERS)
		return false;
	lock(t);
	const struct slot *s = &slots(t)[i];
	held = s->used && (s->holders[w / 64] & (1ull << (w % 64)));
	unlock(t);
	return held;
}

void shtab_holders(struct shtab *t, int i, bool *held, int n)
{
	for (int w = 0; w < n; w++)
		held[w] = false;
	if (i < 0 || (uint32_t)i >= t->cap)
		return;
	lock(t);
	const struct slot *s = &slots(t)[i];
	for (int w = 0; s->used && w < n && w < SHTAB_WORKERS; w++)
		held[w] = (s->holders[w / 64] >> (w % 64)) & 1;
	unlock(t);
}

uint32_t shtab_capacity(const struct shtab *t)
{
	return t->cap;
}

uint32_t shtab_used(struct shtab *t)
{
	lock(t);
	uint32_t n = t->used;
	unlock(t);
	return n;
}

uint32_t shtab_high_water(const struct shtab *t)
{
	return __atomic_load_n(&t->high, __ATOMIC_ACQUIRE);
}

/* pgcrew — named slots in shared memory that workers hold and give back: the
 * one module behind every instance-wide table keyed by database, user or
 * pool (shm.c's names, hist.c's pools). A slot is taken by name, held by
 * each worker that uses it, and freed when the last holder lets go (or dies);
 * a freed slot is reused, with a new generation, so nothing keyed by the
 * old name is mistaken for the new one. The capacity is fixed when the
 * table is made (from a setting); a full table says so and claims nothing. */
#ifndef PGCREW_SHTAB_H
#define PGCREW_SHTAB_H

#include "types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A key: up to this many bytes (a kind byte, a database and a user name
 * with their terminators). */
#define SHTAB_KEY_MAX 136
#define SHTAB_WORKERS 128          /* SHM_MAX_WORKERS */

struct shtab;

/* Bytes a table of `capacity` slots takes in a shared mapping. */
size_t shtab_size(uint32_t capacity);
/* Make the table in mem (zeroed, shared, before the first fork). -1 if
 * the process-shared lock cannot be made. */
int shtab_init(struct shtab *t, uint32_t capacity) MUSTCHECK;
void shtab_destroy(struct shtab *t);

/* Called, under the table's lock, for a slot that is taken afresh: its
 * users clear what they keep for it (nobody else holds it yet, so nobody
 * writes there meanwhile). */
typedef void (*shtab_fresh_fn)(int i, void *arg);
/* Worker w holds the slot of key (taking a free one when no slot has the
 * key, fn called for it). Returns the slot, or -1 when the table is full
 * (nothing held); *gen (may be NULL) is its generation. Holding twice is
 * holding once. */
int shtab_hold(struct shtab *t, int w, const void *key, size_t len, uint32_t *gen,
	       shtab_fresh_fn fn, void *arg);
/* Worker w lets go of slot i; the last holder frees it. True when freed. */
bool shtab_release(struct shtab *t, int w, int i);
/* Worker w is gone: every slot it held is let go (the supervisor).
 * Returns how many slots that freed. */
int shtab_worker_gone(struct shtab *t, int w);

/* The slot of key, or -1 (nothing held by this). */
int shtab_find(struct shtab *t, const void *key, size_t len);
/* Slot i's key (copied, up to cap bytes; its length returned) and
 * generation, or -1 when the slot is free. */
int shtab_key_at(struct shtab *t, int i, void *key, size_t cap, uint32_t *gen);
bool shtab_held_by(struct shtab *t, int i, int w);
/* Every holder of slot i into held[0..n) (all false when it is free). */
void shtab_holders(struct shtab *t, int i, bool *held, int n);
/* Slot i's generation without the lock (0: free): a reader that found a
 * key's slot before checks that it still is that key's (it is, while the
 * generation is the same). */
uint32_t shtab_gen_at(struct shtab *t, int i);
uint32_t shtab_capacity(const struct shtab *t);
uint32_t shtab_used(struct shtab *t);
/* The highest slot index ever handed out, + 1: readers scan [0, n). */
uint32_t shtab_high_water(const struct shtab *t);

#endif

/* pgcrew — the supervisor's per-pool welcome parameters and last failed
 * server logins (welcome.h): two hash tables keyed by the pool's names,
 * swept of pools no worker holds. */
#include "welcome.h"
#include "hmap.h"
#include "util.h"

struct welcome {
	struct list node;
	struct hnode hn;
	uint32_t len;
	uint8_t data[];            /* db[64] user[64] then name\0value\0 pairs */
};

struct failure {
	struct list node;
	struct hnode hn;
	usec_t at;
	struct login_failure f;
};

struct fetch {
	struct list node;
	usec_t since;
	int left;                  /* holders asked, not heard "none" from */
	uint8_t key[WELCOME_KEY];
};

struct deferred {
	struct list node;
	int worker;
	usec_t since;
	uint8_t key[WELCOME_KEY];
};

static struct {
	struct list welcomes, failures;
	struct hmap welcome_map, failure_map;
	struct list deferred;      /* oldest first; a handful at most */
	struct list fetches;       /* oldest first; as many */
} wc;

void welcome_init(void)
{
	list_init(&wc.welcomes);
	list_init(&wc.failures);
	list_init(&wc.deferred);
	list_init(&wc.fetches);
	hmap_init(&wc.welcome_map);
	hmap_init(&wc.failure_map);
}

static uint32_t key_hash(const void *key)
{
	return hmap_hash(HMAP_SEED, key, WELCOME_KEY);
}

static struct welcome *find_welcome(const void *key)
{
	for (struct hnode *n = hmap_first(&wc.welcome_map, key_hash(key)); n; n = hmap_next(n)) {
		struct welcome *w = container_of(n, struct welcome, hn);
		if (memcmp(w->data, key, WELCOME_KEY) == 0)
			return w;
	}
	return NULL;
}

static struct failure *find_failure(const void *key)
{
	for (struct hnode *n = hmap_first(&wc.failure_map, key_hash(key)); n; n = hmap_next(n)) {
		struct failure *x = container_of(n, struct failure, hn);
		if (memcmp(&x->f.pool, key, WELCOME_KEY) == 0)
			return x;
	}
	return NULL;
}

static void drop_welcome(struct welcome *w)
{
	list_del(&w->node);
	hmap_del(&wc.welcome_map, &w->hn);
	free(w);
}

static void drop_failure(struct failure *x)
{
	list_del(&x->node);
	hmap_del(&wc.failure_map, &x->hn);
	free(x);
}

void welcome_put(const void *data, uint32_t len)
{
	if (len < WELCOME_KEY)
		return;
	struct welcome *w = find_welcome(data);
	if (w)
		drop_welcome(w);
	w = xmalloc(sizeof(*w) + len);
	w->len = len;
	memcpy(w->data, data, len);
	list_append(&wc.welcomes, &w->node);
	hmap_add(&wc.welcome_map, &w->hn, key_hash(w->data));
	welcome_fetch_end(data, 0);
}

const void *welcome_find(const void *key, uint32_t *len)
{
	struct welcome *w = find_welcome(key);
	if (!w)
		return NULL;
	*len = w->len;
	return w->data;
}

void welcome_failure_put(const struct login_failure *f, usec_t now)
{
	struct failure *x = find_failure(&f->pool);
	if (!x) {
		x = xcalloc(1, sizeof(*x));
		x->f = *f;
		list_append(&wc.failures, &x->node);
		hmap_add(&wc.failure_map, &x->hn, key_hash(&x->f.pool));
	}
	x->f = *f;
	x->at = now;
}

const struct login_failure *welcome_failure_recent(const void *key, usec_t now, usec_t retry, usec_t *age)
{
	struct failure *x = find_failure(key);
	if (!x)
		return NULL;
	*age = now - x->at;
	if (*age >= retry) {
		drop_failure(x);
		return NULL;
	}
	return &x->f;
}

void welcome_forget_failures(void)
{
	struct list *it;
	while ((it = list_first(&wc.failures)) != NULL)
		drop_failure(container_of(it, struct failure, node));
}

void welcome_defer(int worker, const void *key, usec_t now)
{
	struct deferred *d = xcalloc(1, sizeof(*d));
	d->worker = worker;
	d->since = now;
	memcpy(d->key, key, WELCOME_KEY);
	list_append(&wc.deferred, &d->node);
}

bool welcome_take_deferred(const void *key, usec_t before, int *worker, void *key_out)
{
	struct list *it;
	list_for_each(it, &wc.deferred) {
		struct deferred *d = container_of(it, struct deferred, node);
		if (d->since >= before)
			break;
		if (key && memcmp(d->key, key, WELCOME_KEY) != 0)
			continue;
		*worker = d->worker;
		memcpy(key_out, d->key, WELCOME_KEY);
		list_del(&d->node);
		free(d);
		return true;
	}
	return false;
}

usec_t welcome_oldest_deferred(void)
{
	struct list *it = list_first(&wc.deferred);
	return it ? container_of(it, struct deferred, node)->since : 0;
}

void welcome_drop_deferred(int worker)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &wc.deferred) {
		struct deferred *d = container_of(it, struct deferred, node);
		if (d->worker == worker) {
			list_del(&d->node);
			free(d);
		}
	}
}

static void drop_fetch(struct fetch *f)
{
	list_del(&f->node);
	free(f);
}

static struct fetch *find_fetch(const void *key)
{
	struct list *it;
	list_for_each(it, &wc.fetches) {
		struct fetch *f = container_of(it, struct fetch, node);
		if (memcmp(f->key, key, WELCOME_KEY) == 0)
			return f;
	}
	return NULL;
}

void welcome_fetch_start(const void *key, int asked, usec_t now)
{
	struct fetch *f = find_fetch(key);
	if (!f) {
		f = xcalloc(1, sizeof(*f));
		memcpy(f->key, key, WELCOME_KEY);
		list_append(&wc.fetches, &f->node);
	}
	f->since = now;
	f->left = asked;
}

bool welcome_fetching(const void *key)
{
	return find_fetch(key) != NULL;
}

bool welcome_fetch_none(const void *key)
{
	struct fetch *f = find_fetch(key);
	if (!f || --f->left > 0)
		return false;
	drop_fetch(f);
	return true;
}

void welcome_fetch_end(const void *key, usec_t before)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &wc.fetches) {
		struct fetch *f = container_of(it, struct fetch, node);
		if (key ? memcmp(f->key, key, WELCOME_KEY) != 0 : f->since >= before)
			continue;
		drop_fetch(f);
	}
}

int welcome_sweep(welcome_held_fn held, usec_t now, usec_t retry)
{
	struct list *it, *tmp;
	int gone = 0;
	list_for_each_safe(it, tmp, &wc.welcomes) {
		struct welcome *w = container_of(it, struct welcome, node);
		if (!held((const char *)w->data, (const char *)w->data + LEDGER_NAME)) {
			drop_welcome(w);
			gone++;
		}
	}
	list_for_each_safe(it, tmp, &wc.failures) {
		struct failure *x = container_of(it, struct failure, node);
		if (now - x->at >= retry || !held(x->f.pool.db, x->f.pool.user)) {
			drop_failure(x);
			gone++;
		}
	}
	return gone;
}

size_t welcome_count(void)
{
	return wc.welcome_map.n + wc.failure_map.n;
}

void welcome_free_all(void)
{
	struct list *it;
	while ((it = list_first(&wc.welcomes)) != NULL)
		drop_welcome(container_of(it, struct welcome, node));
	welcome_forget_failures();
	while ((it = list_first(&wc.deferred)) != NULL) {
		list_del(it);
		free(container_of(it, struct deferred, node));
	}
	welcome_fetch_end(NULL, INT64_MAX);
	hmap_free(&wc.welcome_map);
	hmap_free(&wc.failure_map);
}

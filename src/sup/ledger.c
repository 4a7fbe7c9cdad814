/* pgcrew — the supervisor's slot ledger (see ledger.h). It changes only
 * when a server connection opens, closes or moves; an entry for a pool, a
 * database or a user lives while it counts a slot, a queued request or a
 * want told to a worker, and is found by name in constant time, so ever
 * new tenants neither pile up entries nor slow it down. */
#include "ledger.h"
#include "hmap.h"
#include "shm.h"
#include "util.h"

/* What closing one server would do for queued requests (wanted_from). */
struct want_sum {
	int n, soon;
	int old;                   /* of them, waiting LEDGER_BUSY_ASK_USEC or longer */
	usec_t since;              /* the oldest of them for another pool, 0: none */
};

struct lcount {
	struct list node;
	struct hnode hn;
	char name[LEDGER_NAME];
	int total;
	int n_pools;               /* lpools pointing here */
	int n_queued;              /* queued requests of its pools */
	struct want_sum others;    /* this pass: what a server of a pool sharing only
	                              this database (user) with the queued requests
	                              would do for them (ledger_want_changes) */
	int idle_left, busy_left;  /* this pass: how many more holders with an
	                              idle server, and without, to ask for them */
	int asked_idle, asked_busy, idle_new;   /* this pass, while counting (count_rations) */
	struct lpool *cands;       /* this pass: pools summed here with an idle server
	                              somewhere (probe_idle), for evict_for_queue */
	int claim_need;            /* this pass: closes still wanted, for the claims */
	int offered;               /* the last need offered (ledger_set_offer) */
	uint64_t offer_pass;       /* the pass that offered it (ledger.passes) */
	uint64_t way_pass;         /* the pass that read on_way */
	uint32_t claim_base;       /* claims made when on_way was read */
	int on_way;                /* this pass: claimed closes whose slot is not back */
	int on_way_left;           /* ... not yet matched to a request (sum_others) */
};

struct lpool {
	struct list node;
	struct hnode hn;
	char db[LEDGER_NAME], user[LEDGER_NAME];
	struct lcount *dbc, *userc;
	int total;
	int n_queued;              /* requests in the queue for it */
	bool told_any;             /* some worker's last want is not "none" */
	int *count;                /* per worker */
	struct pool_want *told;    /* per worker: the last want sent (counts only) */
	int *idle;                 /* per worker, this pass: idle servers, -1 unknown */
	int64_t *oldest;           /* per worker, this pass: its oldest idle server's last use */
	int64_t idle_hint;         /* the probe's, between passes */
	struct lpool *next_cand;   /* in its lcount's cands, this pass */
	usec_t probed_at;          /* the pass that probed idle[] */
	int limit;                 /* pool_limit of the latest request (fair share) */
};

struct lreq {
	struct list node;
	int worker;
	uint32_t reqid;
	struct slot_req req;
	struct lpool *pool;
	usec_t since;              /* queued at (util_monotonic) */
	bool await_move;           /* fits, but an idle server elsewhere is to move to it */
	struct lpool *close_from;  /* a server of this pool is being closed for
	                              it (its slot not back yet): no other is
	                              closed for it meanwhile */
	usec_t close_at;
	int close_worker;          /* ... in this worker */
	const struct lpool *refused;      /* the last holder told to evict for it that */
	int refused_worker;               /* had no idle server left: not told again */
	bool claimed;              /* this pass: a claimed close is on its way for it */
};

/* A close whose slot has not come back by then is taken as lost (the
 * giver died, or the slot went elsewhere): the request may have another,
 * or it could wait for ever with every slot on idle servers. */
#define CLOSE_PENDING_USEC (1000 * 1000)

static bool close_pending_at(const struct lreq *q, usec_t now)
{
	return q->close_from && now - q->close_at < CLOSE_PENDING_USEC;
}

static bool close_pending(const struct lreq *q)
{
	return close_pending_at(q, util_monotonic());
}

/* A server of p in worker w is being closed for q from now. */
static void mark_close(struct lreq *q, struct lpool *p, int w, usec_t now)
{
	q->close_from = p;
	q->close_worker = w;
	q->close_at = now;
}

struct ledger {
	int n;
	struct list pools, dbs, users, queue;
	struct hmap pool_map, db_map, user_map;
	usec_t pass_now;           /* the clock when ledger_want_changes began: one
				    * read for a pass over every pool and request */
	ledger_idle_fn idle_probe;
	ledger_oldest_fn oldest_probe;
	ledger_movable_fn movable;
	ledger_evict_fn evict;
	ledger_wait_fn waiting;
	ledger_offer_fn offer;
	ledger_on_way_fn on_way;
	ledger_count_fn on_count;
	uint64_t passes;           /* ledger_want_changes() so far */
	int n_told;                /* pools with told_any */
};

/* told_any changes only here, so that a pass knows without a walk whether
 * any pool has a want to take back. */
static void set_told_any(struct ledger *l, struct lpool *p, bool any)
{
	if (p->told_any == any)
		return;
	p->told_any = any;
	l->n_told += any ? 1 : -1;
}

struct ledger *ledger_new(int n_workers)
{
	struct ledger *l = xcalloc(1, sizeof(*l));
	l->n = n_workers;
	list_init(&l->pools);
	list_init(&l->dbs);
	list_init(&l->users);
	list_init(&l->queue);
	hmap_init(&l->pool_map);
	hmap_init(&l->db_map);
	hmap_init(&l->user_map);
	return l;
}

static void free_list(struct list *head, size_t node_off)
{
	struct list *it;
	while ((it = list_first(head)) != NULL) {
		list_del(it);
		free((char *)it - node_off);
	}
}

void ledger_free(struct ledger *l)
{
	struct list *it;
	if (!l)
		return;
	while ((it = list_first(&l->pools)) != NULL) {
		struct lpool *p = container_of(it, struct lpool, node);
		list_del(it);
		free(p->count);
		free(p->told);
		free(p->idle);
		free(p->oldest);
		free(p);
	}
	free_list(&l->dbs, offsetof(struct lcount, node));
	free_list(&l->users, offsetof(struct lcount, node));
	free_list(&l->queue, offsetof(struct lreq, node));
	hmap_free(&l->pool_map);
	hmap_free(&l->db_map);
	hmap_free(&l->user_map);
	free(l);
}

static struct lcount *find_count(const struct hmap *map, const char *name)
{
	for (struct hnode *n = hmap_first(map, hmap_hash_str(name)); n; n = hmap_next(n)) {
		struct lcount *c = container_of(n, struct lcount, hn);
		if (strcmp(c->name, name) == 0)
			return c;
	}
	return NULL;
}

static struct lcount *get_count(struct list *head, struct hmap *map, const char *name)
{
	struct lcount *c = find_count(map, name);
	if (c)
		return c;
	c = xcalloc(1, sizeof(*c));
	strlcpy_(c->name, name, sizeof(c->name));
	list_append(head, &c->node);
	hmap_add(map, &c->hn, hmap_hash_str(c->name));
	return c;
}

static void put_count(struct hmap *map, struct lcount *c)
{
	if (--c->n_pools > 0 || c->total != 0)
		return;
	list_del(&c->node);
	hmap_del(map, &c->hn);
	free(c);
}

static uint32_t pool_hash(const char *db, const char *user)
{
	return hmap_hash(hmap_hash_str(db), user, strlen(user));
}

static struct lpool *find_pool(const struct ledger *l, const char *db, const char *user)
{
	for (struct hnode *n = hmap_first(&l->pool_map, pool_hash(db, user)); n; n = hmap_next(n)) {
		struct lpool *p = container_of(n, struct lpool, hn);
		if (strcmp(p->db, db) == 0 && strcmp(p->user, user) == 0)
			return p;
	}
	return NULL;
}

static struct lpool *get_pool(struct ledger *l, const char *db, const char *user)
{
	struct lpool *p = find_pool(l, db, user);
	if (p)
		return p;
	p = xcalloc(1, sizeof(*p));
	strlcpy_(p->db, db, sizeof(p->db));
	strlcpy_(p->user, user, sizeof(p->user));
	p->dbc = get_count(&l->dbs, &l->db_map, db);
	p->userc = get_count(&l->users, &l->user_map, user);
	p->dbc->n_pools++;
	p->userc->n_pools++;
	p->count = xcalloc((size_t)l->n, sizeof(int));
	p->told = xcalloc((size_t)l->n, sizeof(*p->told));
	p->idle = xcalloc((size_t)l->n, sizeof(int));
	p->oldest = xcalloc((size_t)l->n, sizeof(int64_t));
	p->idle_hint = -1;
	list_append(&l->pools, &p->node);
	hmap_add(&l->pool_map, &p->hn, pool_hash(p->db, p->user));
	return p;
}

/* p counts nothing any more (no slot, no queued request, no want told):
 * it goes, and its database's and user's counts with it when they are
 * left with nothing. A request being helped by closing one of p's servers
 * forgets that (the slot came back or went with its worker). */
static void maybe_free(struct ledger *l, struct lpool *p)
{
	struct list *it;
	if (p->total != 0 || p->n_queued > 0 || p->told_any)
		return;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->close_from == p)
			q->close_from = NULL;
		if (q->refused == p)
			q->refused = NULL;
	}
	list_del(&p->node);
	hmap_del(&l->pool_map, &p->hn);
	put_count(&l->db_map, p->dbc);
	put_count(&l->user_map, p->userc);
	free(p->count);
	free(p->told);
	free(p->idle);
	free(p->oldest);
	free(p);
}

static void count_queued(struct lpool *p, int delta)
{
	p->n_queued += delta;
	p->dbc->n_queued += delta;
	p->userc->n_queued += delta;
}

/* Closes offered for more requests than are queued now would close
 * servers nobody waits for: taken back as the request leaves, not at the
 * next pass (the slot it got may have come from elsewhere). */
static void cap_offer(struct ledger *l, struct lcount *c, bool db)
{
	if (!l->offer || c->offered <= c->n_queued)
		return;
	c->offered = c->n_queued;
	l->offer(db, c->name, c->claim_base, c->offered);
}

/* A queued request leaves the queue (granted, denied, withdrawn, its
 * worker gone); its pool may go with it. */
static void dequeue(struct ledger *l, struct lreq *q)
{
	struct lpool *p = q->pool;
	list_del(&q->node);
	free(q);
	count_queued(p, -1);
	cap_offer(l, p->dbc, true);
	cap_offer(l, p->userc, false);
	maybe_free(l, p);
}

static bool under(int have, int32_t limit)
{
	return limit <= 0 || have < limit;
}

static bool fits(const struct lpool *p, const struct slot_req *r)
{
	return under(p->total, r->pool_limit) && under(p->dbc->total, r->db_limit) &&
	       under(p->userc->total, r->user_limit);
}

static void take(struct ledger *l, struct lpool *p, int worker, int delta)
{
	p->total += delta;
	p->count[worker] += delta;
	p->dbc->total += delta;
	p->userc->total += delta;
	if (l->on_count && delta != 0) {
		l->on_count(true, p->dbc->name, p->dbc->total);
		l->on_count(false, p->userc->name, p->userc->total);
	}
}

/* Would a slot for p take what queued request q waits for? The same pool;
 * or the same database (user) when that limit is what holds q back. */
static bool competes(const struct lreq *q, const struct lpool *p)
{
	if (q->req.move)
		return false;         /* takes no slot: a move brings its own */
	if (q->pool == p)
		return true;
	if (q->pool->dbc == p->dbc && q->req.db_limit > 0 && p->dbc->total >= q->req.db_limit - 1)
		return true;
	return q->pool->userc == p->userc && q->req.user_limit > 0 &&
	       p->userc->total >= q->req.user_limit - 1;
}

/* Then a newcomer queues behind it: first come, first served. */
static bool someone_waits(const struct ledger *l, const struct lpool *p)
{
	struct list *it;
	list_for_each(it, &l->queue) {
		const struct lreq *q = container_of(it, struct lreq, node);
		if (competes(q, p))
			return true;
	}
	return false;
}

enum ledger_result ledger_request(struct ledger *l, int worker, uint32_t reqid, const struct slot_req *req)
{
	return ledger_request_idle(l, worker, reqid, req, false);
}

enum ledger_result ledger_request_idle(struct ledger *l, int worker, uint32_t reqid,
				       const struct slot_req *req, bool idle_elsewhere)
{
	if (worker < 0 || worker >= l->n)
		return LEDGER_DENIED;
	struct lpool *p = get_pool(l, req->db, req->user);
	if (req->wait && req->pool_limit > 0)
		p->limit = req->pool_limit;
	bool await_move = req->wait && idle_elsewhere && !req->own;
	/* Only a move serves a request for the reuse order: with no idle
	 * server elsewhere any more, the worker uses its own at once. */
	if (req->move && !await_move) {
		maybe_free(l, p);
		return LEDGER_DENIED;
	}
	/* A request that would not wait (min_pool_size, the reserve) is
	 * answered now; it cannot take a slot a queued one fits in, as
	 * those are granted the moment they fit. A waiter's request waits
	 * a moment when another worker has an idle server of the pool: one
	 * PgBouncer would use that one, not open another. */
	if (!await_move && (!req->wait || !someone_waits(l, p)) && fits(p, req)) {
		take(l, p, worker, 1);
		return LEDGER_GRANTED;
	}
	if (!req->wait) {
		maybe_free(l, p);
		return LEDGER_DENIED;
	}
	struct lreq *q = xcalloc(1, sizeof(*q));
	q->worker = worker;
	q->reqid = reqid;
	q->req = *req;
	q->pool = p;
	q->since = util_monotonic();
	q->await_move = await_move;
	list_append(&l->queue, &q->node);
	count_queued(p, 1);
	return LEDGER_QUEUED;
}

bool ledger_withdraw(struct ledger *l, int worker, const char *db, const char *user, uint32_t reqid)
{
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->worker == worker && q->reqid == reqid && strcmp(q->pool->db, db) == 0 &&
		    strcmp(q->pool->user, user) == 0) {
			dequeue(l, q);
			return true;
		}
	}
	return false;
}

void ledger_adopt(struct ledger *l, int worker, const char *db, const char *user)
{
	if (worker >= 0 && worker < l->n)
		take(l, get_pool(l, db, user), worker, 1);
}

static bool helps(const struct lreq *q, const struct lpool *p);

/* Closing a server of p makes room for a request of another pool (or a
 * server of a client's own), not a move. */
static bool closed_for(const struct lreq *q, const struct lpool *p)
{
	return (q->pool != p || q->req.own) && helps(q, p);
}

bool ledger_release(struct ledger *l, int worker, const char *db, const char *user)
{
	struct lpool *p = find_pool(l, db, user);
	struct list *it;
	if (worker < 0 || worker >= l->n || !p || p->count[worker] <= 0)
		return false;
	/* The slot of a server closed for a request is back: that close is
	 * done (the request is granted next, or waits for another). */
	/* Or, with none of p's, the worker told to evict may have closed
	 * another pool's idle server of the same database (user) when the
	 * named one was taken: that close is done too. */
	struct lreq *done = NULL, *other = NULL;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->close_from == p && (!done || q->close_worker == worker))
			done = q;
		else if (!other && q->close_from && q->close_worker == worker && closed_for(q, p))
			other = q;
		if (done && done->close_worker == worker)
			break;
	}
	if (!done)
		done = other;
	if (done)
		done->close_from = NULL;
	take(l, p, worker, -1);
	maybe_free(l, p);
	return true;
}

static int fair_share(const struct ledger *l, const struct lpool *p, int *least);

/* The idle server another worker has for q may still come. */
static bool move_may_come(const struct ledger *l, const struct lreq *q, usec_t now)
{
	usec_t waited = now - q->since;
	if (waited < LEDGER_MOVE_WAIT_USEC)
		return true;
	return waited < LEDGER_MOVE_WAIT_MAX_USEC && l->movable &&
	       l->movable(q->pool->db, q->pool->user, q->worker);
}

/* The oldest queued request that may be granted now (of pool p only, and
 * from a worker below its rounded-down share of p, when p is given), or
 * NULL. */
static struct lreq *grantable(struct ledger *l, const struct lpool *p, int least)
{
	usec_t now = util_monotonic();
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->req.move || !fits(q->pool, &q->req))
			continue;
		if (q->await_move && move_may_come(l, q, now))
			continue;
		if (p && (q->pool != p || q->req.own || p->count[q->worker] >= least))
			continue;
		return q;
	}
	return NULL;
}

/* q is granted another slot than the one a close under way frees for it
 * (first come, first served: another close came back first): that close
 * now serves the next request it helps that has none, or it would have a
 * second server closed for it while the first one's slot is on its way. */
static void pass_close_on(struct ledger *l, const struct lreq *q)
{
	struct list *it;
	if (!close_pending(q))
		return;
	for (it = q->node.next; it != &l->queue; it = it->next) {
		struct lreq *r = container_of(it, struct lreq, node);
		if (!close_pending(r) && closed_for(r, q->close_from)) {
			mark_close(r, q->close_from, q->close_worker, q->close_at);
			return;
		}
	}
}

/* First come, first served over pools; within the pool whose turn it is,
 * a worker below its share goes first (among pooled servers' requests): a server given up for it (one that
 * cannot move) must not open again for a worker that has its share, or
 * servers would hop from worker to worker, each hop a new backend. */
bool ledger_next_grant(struct ledger *l, int *worker, uint32_t *reqid, struct slot_req *req)
{
	struct lreq *q = grantable(l, NULL, 0), *first;
	int least;
	/* A server of a client's own is no worker's share: strictly FIFO. */
	if (q && !q->req.own) {
		(void)fair_share(l, q->pool, &least);
		if ((first = grantable(l, q->pool, least)) != NULL)
			q = first;
	}
	if (q) {
		take(l, q->pool, q->worker, 1);
		pass_close_on(l, q);        /* with the limits as they are now */
		*worker = q->worker;
		*reqid = q->reqid;
		*req = q->req;
		dequeue(l, q);
		return true;
	}
	return false;
}

bool ledger_next_expired(struct ledger *l, int *worker, uint32_t *reqid, struct slot_req *req)
{
	usec_t now = util_monotonic();
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (!q->req.move || now - q->since < LEDGER_MOVE_WAIT_USEC)
			continue;
		*worker = q->worker;
		*reqid = q->reqid;
		*req = q->req;
		dequeue(l, q);
		return true;
	}
	return false;
}

void ledger_worker_gone(struct ledger *l, int worker)
{
	struct list *it, *tmp;
	if (worker < 0 || worker >= l->n)
		return;
	list_for_each(it, &l->pools) {
		struct lpool *p = container_of(it, struct lpool, node);
		take(l, p, worker, -p->count[worker]);
		memset(&p->told[worker], 0, sizeof(p->told[worker]));
		bool any = false;
		for (int w = 0; w < l->n; w++)
			any |= p->told[w].n != 0;
		set_told_any(l, p, any);
	}
	list_for_each_safe(it, tmp, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->worker == worker) {
			list_del(&q->node);
			count_queued(q->pool, -1);
			free(q);
		}
	}
	list_for_each_safe(it, tmp, &l->pools)
		maybe_free(l, container_of(it, struct lpool, node));
}

/* Would closing a server of p help queued request q? Yes for its own pool,
 * and for another pool of its database or user when that limit is the one
 * in the way (PgBouncer evicts idle servers of other pools for the same)
 * and q fits once it is closed: with q's own pool full (its servers busy
 * on other workers), or both limits full and p sharing only one, the slot
 * freed would serve nobody and PostgreSQL would keep a backend fewer than
 * one PgBouncer, which opens the new server in the same step. */
static bool helps_sharing(const struct lreq *q, bool same_db, bool same_user)
{
	const struct lpool *qp = q->pool;
	bool db_way = same_db && q->req.db_limit > 0 && qp->dbc->total >= q->req.db_limit;
	bool user_way = same_user && q->req.user_limit > 0 && qp->userc->total >= q->req.user_limit;
	if (!db_way && !user_way)
		return false;
	return under(qp->total, q->req.pool_limit) &&
	       under(qp->dbc->total - same_db, q->req.db_limit) &&
	       under(qp->userc->total - same_user, q->req.user_limit);
}

static bool helps(const struct lreq *q, const struct lpool *p)
{
	return q->pool == p || helps_sharing(q, q->pool->dbc == p->dbc, q->pool->userc == p->userc);
}

/* The oldest waiter of p on a worker other than giver, by the workers'
 * wait lines, or by p's queued requests without them; -1: none. */
static int oldest_waiter(const struct ledger *l, const struct lpool *p, int giver,
			 const usec_t *waits, usec_t *since)
{
	const struct list *it;
	int best = -1;

	for (int w = 0; waits && w < l->n; w++) {
		if (w != giver && waits[w] && (best < 0 || waits[w] < *since)) {
			best = w;
			*since = waits[w];
		}
	}
	if (waits)
		return best;
	list_for_each(it, &l->queue) {
		const struct lreq *q = container_of(it, struct lreq, node);
		if (q->pool == p && q->worker != giver && !q->req.own) {
			*since = q->since;
			return q->worker;
		}
	}
	return -1;
}

/* The oldest queued request of another pool that closing p's server helps,
 * or of p for a server of a client's own (replication), whose worker still
 * has a client waiting for that pool (a request
 * can outlive its client: closing a server for it would leave PostgreSQL
 * with fewer backends than one PgBouncer keeps). */
static struct lreq *oldest_other_pool(const struct ledger *l, const struct lpool *p,
				      ledger_wait_fn waiting)
{
	const struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (!close_pending(q) && closed_for(q, p) &&
		    (!waiting || waiting(q->pool->db, q->pool->user, q->worker)))
			return q;
	}
	return NULL;
}

/* Take worker w's oldest queued request of p out of the queue: its id. One
 * that a server is being closed for stays: the slot coming back is its
 * (PgBouncer opens the new server in the step that evicts), or PostgreSQL
 * would end with a backend fewer. */
static uint32_t take_request(struct ledger *l, struct lpool *p, int w)
{
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->pool == p && q->worker == w && !close_pending(q)) {
			uint32_t id = q->reqid;
			dequeue(l, q);
			return id;
		}
	}
	return 0;
}

enum ledger_move ledger_handover(struct ledger *l, int giver, const char *db, const char *user,
				 const usec_t *waits, ledger_wait_fn waiting, int *to, uint32_t *reqid)
{
	struct lpool *p = find_pool(l, db, user);
	usec_t since = 0;

	*reqid = 0;
	if (giver < 0 || giver >= l->n || !p || p->count[giver] <= 0)
		return LEDGER_MOVE_CLOSE;
	int w = oldest_waiter(l, p, giver, waits, &since);
	struct lreq *other = oldest_other_pool(l, p, waiting);
	/* First come, first served, whichever pool waits longest. */
	if (other && (w < 0 || other->since < since)) {
		mark_close(other, p, giver, util_monotonic());
		return LEDGER_MOVE_CLOSE;
	}
	if (w < 0)
		return LEDGER_MOVE_KEEP;
	/* The slot changes hands: the backend is counted once throughout
	 * (no total changes). */
	p->count[giver]--;
	p->count[w]++;
	*to = w;
	*reqid = take_request(l, p, w);
	return LEDGER_MOVE_TO;
}

/*
 * The fair share of p: its limit divided among the workers that hold or
 * want its servers, rounded up (*least: rounded down). Under steady load
 * every worker keeps its share instead of servers moving back and forth
 * (for servers that cannot move, each hop costs PostgreSQL a new backend).
 */
static int fair_share(const struct ledger *l, const struct lpool *p, int *least)
{
	bool seen[SHM_MAX_WORKERS];
	int demand = 0;
	struct list *it;

	for (int v = 0; v < l->n; v++)
		seen[v] = p->count[v] > 0;
	/* Most pools a pass weighs have no request of their own queued (they
	 * hold servers others wait for): no walk over the queue for those. */
	if (p->n_queued > 0) {
		list_for_each(it, &l->queue) {
			const struct lreq *q = container_of(it, struct lreq, node);
			if (q->pool == p)
				seen[q->worker] = true;
		}
	}
	for (int v = 0; v < l->n; v++)
		demand += seen[v];
	*least = demand > 0 ? p->limit / demand : p->limit;
	return demand > 0 ? (p->limit + demand - 1) / demand : p->limit;
}

/* p is weighed against the queue itself: it has a request of its own, or
 * requests share both its database and its user. */
static bool weighed_alone(const struct lpool *p)
{
	return p->n_queued > 0 || (p->dbc->n_queued > 0 && p->userc->n_queued > 0);
}

/* Otherwise the database or user count whose sum its wants come from, if
 * requests are queued there (NULL: nothing waits that p could help). */
static struct lcount *summed_by(const struct lpool *p)
{
	if (weighed_alone(p))
		return NULL;
	struct lcount *c = p->dbc->n_queued ? p->dbc : p->userc;
	return c->n_queued > 0 ? c : NULL;
}

/* Queued requests that worker w could help by giving up a server of p (a
 * worker is not asked to give up a server of the very pool it waits for,
 * unless for a server of a client's own: then its idle one is in the way),
 * and how many of them are in a hurry: from a worker below the rounded-down
 * fair share of p (5 servers over 4 workers: one holding none, not one
 * holding 1 while another holds 2, or the servers would rotate for ever),
 * or for another pool. A request from a worker that already has its share
 * is served only by a server that has really stopped being used: a
 * momentary lull (a client process descheduled for a few milliseconds)
 * must not move servers between two busy workers. */
static void wanted_from(const struct ledger *l, const struct lpool *p, int w, int least,
			struct pool_want *out)
{
	struct list *it;

	/* No request of p's own, nor of both its database and its user: every
	 * one it could help shares only one of them with it, and what it would
	 * do for those is the same for every such pool (sum_others). */
	if (!weighed_alone(p)) {
		const struct lcount *c = summed_by(p);
		if (!c)
			return;
		const struct want_sum *o = &c->others;
		out->n = o->n;
		out->soon = o->soon;
		out->other_since = (int64_t)o->since;
		return;
	}
	list_for_each(it, &l->queue) {
		const struct lreq *q = container_of(it, struct lreq, node);
		bool closes = q->pool != p || q->req.own;   /* a move cannot serve it */
		if (!helps(q, p) || (q->worker == w && q->pool == p && !q->req.own) ||
		    (closes && close_pending_at(q, l->pass_now)))
			continue;
		out->n++;
		out->same += !closes;
		/* A request for the reuse order holds servers already: no hurry
		 * (one that cannot move is never closed for it). */
		out->soon += !q->req.move && (closes || p->count[q->worker] < least);
		if (closes && (!out->other_since || q->since < out->other_since))
			out->other_since = q->since;
	}
}

/*
 * With fewer servers than workers that want them, every holder is within
 * its share and a worker holding none would wait until query_wait_timeout.
 * Once such a worker has waited LEDGER_STARVE_USEC, the holders with the
 * most servers (one per starving worker) give one up at its next release.
 */
static bool starve_rank(const struct ledger *l, const struct lpool *p, int w)
{
	usec_t now = l->pass_now;
	int starving = 0, ahead = 0;
	bool counted[SHM_MAX_WORKERS] = { false };
	struct list *it;

	list_for_each(it, &l->queue) {
		const struct lreq *q = container_of(it, struct lreq, node);
		if (q->pool == p && !q->req.move && p->count[q->worker] == 0 && !counted[q->worker] &&
		    now - q->since >= LEDGER_STARVE_USEC) {
			counted[q->worker] = true;
			starving++;
		}
	}
	if (starving == 0 || p->count[w] == 0)
		return false;
	for (int v = 0; v < l->n; v++)
		ahead += p->count[v] > p->count[w] || (p->count[v] == p->count[w] && v < w);
	return ahead < starving;
}

/* How many servers of p worker w holds beyond its fair share, while other
 * workers' clients queue for p. */
static int over_share(const struct ledger *l, const struct lpool *p, int w, int share)
{
	int queued_elsewhere = 0;
	struct list *it;

	if (p->limit <= 0 || p->count[w] == 0 || p->n_queued == 0)
		return 0;           /* nobody queues for p: nothing to give back */
	list_for_each(it, &l->queue) {
		const struct lreq *q = container_of(it, struct lreq, node);
		queued_elsewhere += q->pool == p && q->worker != w && !q->req.move;
	}
	int over = p->count[w] - share;
	if (over <= 0 && starve_rank(l, p, w))
		over = 1;
	return over <= 0 ? 0 : (over < queued_elsewhere ? over : queued_elsewhere);
}

/* A worker gives at most the servers it holds: asking for more would only
 * change the notice at every request that comes or goes (a tenant's pool
 * of one server, wanted by a queue of 200 other tenants' requests). */
static void clamp_want(struct pool_want *w, int held)
{
	if (w->n > held)
		w->n = held;
	if (w->soon > w->n)
		w->soon = w->n;
	if (w->over > w->n)
		w->over = w->n;
	if (w->same > w->n)
		w->same = w->n;
}

/* Worth no new notice: the counts are the same and the oldest other-pool
 * request is younger than the one told by at most LEDGER_SINCE_SLACK_USEC
 * or a quarter of its wait, whichever is more: the worker then believes it
 * has waited at most that much longer than it has. Under a full
 * max_db_connections the oldest is granted and the next takes its place
 * many times a second, each a few milliseconds younger (bench/tenants:
 * 94 % of the notices, to every holder, with a fixed 2 ms); the worker
 * weighs waits with a slack of milliseconds against its own clients' (a
 * short wait is told precisely), and the handover decides with the exact
 * queue. */
#define LEDGER_SINCE_SLACK_USEC (2 * 1000)
/* A worker with no client of its own waiting for the pool gives an idle
 * server to a request elsewhere that has waited FIFO_SLACK_USEC (5 ms,
 * pool.c) or more, however much more: for a pool with no request of its
 * own queued, two ages past this one are the same to it. */
#define LEDGER_SINCE_SETTLED_USEC (10 * 1000)

static bool same_want(const struct pool_want *a, const struct pool_want *told, usec_t now, bool alone)
{
	if (a->n != told->n || a->soon != told->soon || a->over != told->over || a->same != told->same)
		return false;
	if (a->other_since == told->other_since)
		return true;
	if (!alone && a->other_since && told->other_since &&
	    now - (usec_t)a->other_since >= LEDGER_SINCE_SETTLED_USEC &&
	    now - (usec_t)told->other_since >= LEDGER_SINCE_SETTLED_USEC)
		return true;
	if (!a->other_since || !told->other_since || a->other_since < told->other_since)
		return false;
	usec_t waited = now > (usec_t)a->other_since ? now - (usec_t)a->other_since : 0;
	usec_t slack = waited / 2 > LEDGER_SINCE_SLACK_USEC ? waited / 2 : LEDGER_SINCE_SLACK_USEC;
	return (usec_t)(a->other_since - told->other_since) <= slack;
}

/*
 * Requests of other pools (eviction) are told to as many holders as they
 * need, not to every holder of the database or user: first to holders
 * with an idle server (closed at once, as PgBouncer evicts), then to as
 * many busy ones as are still missing (each gives its server when its
 * client is done). With thousands of one-server tenant pools every queued
 * request used to reach every holder twice, once when it came and once
 * when a server was being closed for it (bench/tenants: about 36 notices
 * per transaction). A holder asked before keeps its ask while the requests
 * wait, idle or not: its server's every use would flip it otherwise.
 * Without an idle probe (unit tests, no shared memory) all are asked.
 */
static void ration(const struct ledger *l, const struct lpool *p, int w, struct lcount *c,
		   struct pool_want *want)
{
	if (!l->idle_probe || p->told[w].n > 0)
		return;               /* asked before: counted by probe_idle */
	int *left = p->idle[w] != 0 ? &c->idle_left : &c->busy_left;
	if (*left > 0) {
		*left -= want->n < *left ? want->n : *left;
		return;
	}
	memset(want, 0, sizeof(*want));
}

static void reset_ration(struct lcount *c)
{
	c->idle_left = c->busy_left = c->asked_idle = c->asked_busy = c->idle_new = 0;
}

/* The requests a sum stands for, less the holders asked before that have
 * an idle server: to holders with one first; the rest to busy ones, less
 * the busy ones asked before (a busy holder asked before does not hold a
 * request back from an idle server elsewhere), and only for the requests
 * that have waited LEDGER_BUSY_ASK_USEC (eviction serves most before:
 * a busy holder asked gives its server by handover, sent back to it to be
 * closed, where an idle one found by the next passes is closed on one
 * notice). From the counts alone: the same however often it runs before
 * the pass. */
static void settle_ration(struct lcount *c, bool claims)
{
	int need = c->others.n > c->asked_idle ? c->others.n - c->asked_idle : 0;
	c->idle_left = c->idle_new < need ? c->idle_new : need;
	if (claims) {
		/* Offered to all at once (offer_claims), no busy holder asked. */
		int rest = need - c->idle_left - c->asked_busy;
		c->claim_need = rest > 0 ? rest : 0;
		c->busy_left = 0;
		return;
	}
	int busy = (need < c->others.old ? need : c->others.old) - c->idle_left - c->asked_busy;
	c->busy_left = busy > 0 ? busy : 0;
}

/* Before a pass: each holder's idle servers, for the pools whose wants
 * come from a sum (ration); those with one somewhere are the sum's
 * candidates for eviction (evict_for_queue). */
static void probe_idle(struct ledger *l)
{
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		q->pool->dbc->cands = q->pool->userc->cands = NULL;
	}
	list_for_each(it, &l->pools) {
		struct lpool *p = container_of(it, struct lpool, node);
		struct lcount *c = p->total > 0 ? summed_by(p) : NULL;
		if (!c || c->others.n == 0)
			continue;
		bool any = false;
		p->probed_at = l->pass_now;
		if (!l->idle_probe(p->db, p->user, &p->idle_hint, p->idle, l->n))
			for (int w = 0; w < l->n; w++)
				p->idle[w] = -1;
		for (int w = 0; w < l->n; w++)
			any |= p->count[w] > 0 && p->idle[w] > 0;
		if (any && (!l->oldest_probe || !l->oldest_probe(p->db, p->user, &p->idle_hint, p->oldest, l->n)))
			memset(p->oldest, 0, (size_t)l->n * sizeof(int64_t));
		if (any) {
			p->next_cand = c->cands;
			c->cands = p;
		}
	}
}

/* For each sum, how many more holders with an idle server and without are
 * to be asked (ration), from the idle servers probe_idle found. */
static void count_rations(struct ledger *l)
{
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		reset_ration(q->pool->dbc);
		reset_ration(q->pool->userc);
	}
	list_for_each(it, &l->pools) {
		struct lpool *p = container_of(it, struct lpool, node);
		struct lcount *c = p->total > 0 ? summed_by(p) : NULL;
		if (!c || c->others.n == 0)
			continue;
		for (int w = 0; w < l->n; w++) {
			if (p->count[w] <= 0)
				continue;
			if (p->told[w].n > 0 && p->idle[w] != 0)
				c->asked_idle++;
			else if (p->told[w].n > 0)
				c->asked_busy++;
			else if (p->idle[w] != 0)
				c->idle_new++;
		}
	}
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		settle_ration(q->pool->dbc, l->offer != NULL);
		settle_ration(q->pool->userc, l->offer != NULL);
	}
}

/* The closes no idle server was found for, offered to every worker at
 * once (ledger_set_offer): the first server of another pool to come free
 * with nobody of its pool waiting closes, whichever worker holds it, with
 * no notice to ask it and none to take the ask back. At once, not after
 * LEDGER_BUSY_ASK_USEC as the asks were: a claim costs no message. */
static void offer_one(struct ledger *l, struct lcount *c, bool db)
{
	if (c->offer_pass == l->passes)
		return;
	c->offer_pass = l->passes;
	if (c->claim_need == 0 && c->offered == 0)
		return;
	c->offered = c->claim_need;
	l->offer(db, c->name, c->claim_base, c->claim_need);
}

/* The claimed closes whose slot has not come back, for a database or user
 * with requests queued that was offered some: they serve the oldest
 * requests they help (claim_on_way). */
static void read_one(struct ledger *l, struct lcount *c, bool db)
{
	if (c->way_pass == l->passes)
		return;
	c->way_pass = l->passes;
	if (c->offered == 0 && c->on_way == 0)
		return;               /* nothing offered: nothing claimed */
	c->on_way = l->on_way(db, c->name, &c->claim_base);
}

/* fn once for each database and user with requests queued (its own
 * stamp, in fn, keeps it to once a pass). */
static void each_queued_count(struct ledger *l, void (*fn)(struct ledger *, struct lcount *, bool))
{
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		fn(l, q->pool->dbc, true);
		fn(l, q->pool->userc, false);
	}
}

/* An idle server of another pool summed in c closed for q: the first
 * candidate holding one, known idle by the probe (not one that has just
 * said it had none left for q, nor one already asked by a want). */
static bool evict_one(struct ledger *l, struct lreq *q, struct lcount *c)
{
	struct lpool *best = NULL;
	int best_w = -1;
	for (struct lpool *p = c->cands; p; p = p->next_cand) {
		if (p == q->pool)
			continue;
		for (int w = 0; w < l->n; w++) {
			/* A holder asked before gives its server by handover as it
			 * comes idle: it may be on its way already. */
			if (p->count[w] <= 0 || p->idle[w] <= 0 || p->told[w].n > 0 ||
			    (q->refused == p && q->refused_worker == w))
				continue;
			/* PgBouncer closes the server unused longest (a new one
			 * unused yet is its client's in a moment). */
			if (!best || p->oldest[w] < best->oldest[best_w]) {
				best = p;
				best_w = w;
			}
		}
	}
	if (!best || (l->waiting && !l->waiting(q->pool->db, q->pool->user, q->worker)))
		return false;
	best->idle[best_w]--;
	mark_close(q, best, best_w, l->pass_now);
	l->evict(best_w, best->db, best->user, c == q->pool->dbc);
	return true;
}

/*
 * Eviction as one PgBouncer does it, across workers: each queued request
 * held back by a full max_db_connections / max_user_connections, with no
 * server being closed for it yet, has a holder with an idle server of
 * another pool of that database (user) close it at once: one notice, no
 * want to take back later and no handover of the server to be sent back
 * for closing (bench/tenants: about 8 notices and a handover round trip
 * per transaction at 1,000 pools). The slot comes back with the close
 * (ledger_release) and the request is granted then. What finds
 * no idle server is left to the wants (busy holders give theirs when
 * done). True when one was told.
 */
static bool evict_for_queue(struct ledger *l)
{
	bool told = false;
	struct list *it;
	/* An idle server told to close a moment ago may still look idle. */
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		struct lpool *p = q->close_from;
		if (p && close_pending_at(q, l->pass_now) && p->probed_at == l->pass_now &&
		    p->idle[q->close_worker] > 0)
			p->idle[q->close_worker]--;
	}
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->req.move || close_pending_at(q, l->pass_now) || q->claimed)
			continue;
		if (helps_sharing(q, true, false) && q->pool->dbc->cands)
			told |= evict_one(l, q, q->pool->dbc);
		else if (helps_sharing(q, false, true) && q->pool->userc->cands)
			told |= evict_one(l, q, q->pool->userc);
	}
	return told;
}

bool ledger_awaiting_move(const struct ledger *l)
{
	const struct list *it;
	list_for_each(it, &l->queue)
		if (container_of(it, struct lreq, node)->await_move)
			return true;
	return false;
}

void ledger_set_movable_probe(struct ledger *l, ledger_movable_fn fn)
{
	l->movable = fn;
}

void ledger_set_count_hook(struct ledger *l, ledger_count_fn fn)
{
	l->on_count = fn;
}

void ledger_set_oldest_probe(struct ledger *l, ledger_oldest_fn fn)
{
	l->oldest_probe = fn;
}

void ledger_set_idle_probe(struct ledger *l, ledger_idle_fn fn)
{
	l->idle_probe = fn;
}

void ledger_set_evict(struct ledger *l, ledger_evict_fn fn, ledger_wait_fn waiting)
{
	l->evict = fn;
	l->waiting = waiting;
}

void ledger_set_offer(struct ledger *l, ledger_offer_fn fn, ledger_on_way_fn on_way)
{
	l->offer = fn;
	l->on_way = on_way;
}

bool ledger_evict_refused(struct ledger *l, int worker, const char *db, const char *user)
{
	const struct lpool *p = find_pool(l, db, user);
	struct list *it;
	if (!p)
		return false;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		if (q->close_from == p && q->close_worker == worker) {
			q->close_from = NULL;
			q->refused = p;
			q->refused_worker = worker;
			return true;
		}
	}
	return false;
}

/* One pool's wants, told where they changed; true when some worker's is
 * not "none". */
static bool tell_wants(struct ledger *l, struct lpool *p, ledger_want_fn fn, void *arg)
{
	/* The share matters only to a pool with requests of its own queued
	 * (wanted_from, over_share): not to the many that hold servers others
	 * wait for. */
	int least = 0, share = p->n_queued > 0 ? fair_share(l, p, &least) : 0;
	struct lcount *c = summed_by(p);
	bool any = false;
	for (int w = 0; w < l->n; w++) {
		struct pool_want want;
		memset(&want, 0, sizeof(want));
		if (p->count[w] > 0)
			wanted_from(l, p, w, least, &want);
		if (want.n > 0)
			want.over = over_share(l, p, w, share);
		clamp_want(&want, p->count[w]);
		if (c && want.n > 0)
			ration(l, p, w, c, &want);
		struct pool_want *told = &p->told[w];
		any |= want.n != 0;
		if (same_want(&want, told, l->pass_now, p->n_queued > 0))
			continue;
		*told = want;
		strlcpy_(want.pool.db, p->db, sizeof(want.pool.db));
		strlcpy_(want.pool.user, p->user, sizeof(want.pool.user));
		fn(w, &want, arg);
	}
	return any;
}

static void sum_add(struct want_sum *o, const struct lreq *q, usec_t now, usec_t min_age)
{
	o->n++;
	o->soon += !q->req.move;
	o->old += now - q->since >= min_age;
	if (!o->since || q->since < o->since)
		o->since = q->since;
}

/* A close claimed (shm.h) and not back yet serves q, the oldest request
 * it helps without a close of its own under way. */
static bool claim_on_way(const struct lreq *q)
{
	struct lcount *c = helps_sharing(q, true, false) ? q->pool->dbc :
			   helps_sharing(q, false, true) ? q->pool->userc : NULL;
	if (!c || c->on_way_left <= 0)
		return false;
	c->on_way_left--;
	return true;
}

/* For each database and user with queued requests: what closing a server
 * of a pool that shares only that database (user) with them would do, as
 * wanted_from() counts it (helps_sharing() with one of them). */
static void sum_others(struct ledger *l)
{
	/* With eviction, a busy holder is asked only for a request that no
	 * idle server was found for in LEDGER_BUSY_ASK_USEC. */
	usec_t busy_age = l->evict ? LEDGER_BUSY_ASK_USEC : 0;
	struct list *it;
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		memset(&q->pool->dbc->others, 0, sizeof(struct want_sum));
		memset(&q->pool->userc->others, 0, sizeof(struct want_sum));
		q->pool->dbc->on_way_left = q->pool->dbc->on_way;
		q->pool->userc->on_way_left = q->pool->userc->on_way;
	}
	list_for_each(it, &l->queue) {
		struct lreq *q = container_of(it, struct lreq, node);
		bool pending = close_pending_at(q, l->pass_now);
		q->claimed = !pending && claim_on_way(q);
		if (pending || q->claimed)
			continue;
		if (helps_sharing(q, true, false))
			sum_add(&q->pool->dbc->others, q, l->pass_now, busy_age);
		if (helps_sharing(q, false, true))
			sum_add(&q->pool->userc->others, q, l->pass_now, busy_age);
	}
}

/* A pool told nothing so far whose wants would come from a sum with no
 * holder left to ask this pass (ration) is told nothing again: with the
 * eviction claims, which ask no busy holder, that is nearly every pool
 * holding servers of a database under a full limit (bench/tenants: the
 * supervisor weighed 150 such pools at every pass for nothing). */
static bool nothing_to_ask(const struct ledger *l, const struct lpool *p)
{
	if (!l->idle_probe || weighed_alone(p))
		return false;
	const struct lcount *c = summed_by(p);
	return !c || (c->idle_left == 0 && c->busy_left == 0);
}

/* Only a pool holding servers, of a queued request's database or user, can
 * be wanted, and only one told a want before can need a "none": the others
 * are skipped, and the queue is weighed once per database and user, not per
 * pool, so a pass costs little however many pools there are (10,000
 * tenants' pools of one database, 150 of them with a server, made every
 * pass weigh each pool against every queued request). A pass with nothing
 * queued and nothing told walks nothing. */
void ledger_want_changes(struct ledger *l, ledger_want_fn fn, void *arg)
{
	struct list *it, *tmp;
	l->pass_now = util_monotonic();
	l->passes++;
	/* Nothing queued and no want to take back: nothing to weigh (with
	 * the eviction in the worker this is most passes, and each walk is
	 * over every pool holding servers). */
	if (list_empty(&l->queue) && l->n_told == 0)
		return;
	if (l->offer)
		each_queued_count(l, read_one);
	sum_others(l);
	if (l->idle_probe) {
		probe_idle(l);
		/* The requests a close is now under way for want nothing more. */
		if (l->evict && evict_for_queue(l))
			sum_others(l);
		count_rations(l);
		if (l->offer)
			each_queued_count(l, offer_one);
	}
	list_for_each_safe(it, tmp, &l->pools) {
		struct lpool *p = container_of(it, struct lpool, node);
		if (!p->told_any && !p->dbc->n_queued && !p->userc->n_queued)
			continue;
		if (p->told_any || (p->total > 0 && !nothing_to_ask(l, p)))
			set_told_any(l, p, tell_wants(l, p, fn, arg));
		maybe_free(l, p);
	}
}

static void one_less(int32_t *v)
{
	if (*v > 0)
		(*v)--;
}

/* The worker counted the server it gave up against its ask (pool.c's
 * note_given): so does what we believe it was told. The next pass tells
 * it only where that differs from its want now (a holder that gave its
 * only server for another pool's request needs no "none" after it). */
static void count_given(struct ledger *l, struct lpool *p, int worker)
{
	struct pool_want *t = &p->told[worker];
	one_less(&t->over);
	one_less(&t->n);
	one_less(&t->soon);
	if (t->n == 0)
		t->other_since = 0;
	set_told_any(l, p, true);
}

void ledger_retell(struct ledger *l, int worker, const char *db, const char *user)
{
	struct lpool *p = find_pool(l, db, user);
	if (p && worker >= 0 && worker < l->n)
		count_given(l, p, worker);
}

bool ledger_evict_done(struct ledger *l, int worker, const char *db, const char *user)
{
	struct lpool *p = find_pool(l, db, user);
	if (!p || worker < 0 || worker >= l->n || p->count[worker] <= 0)
		return false;
	count_given(l, p, worker);
	struct lreq *other = oldest_other_pool(l, p, l->waiting);
	if (!other)
		return false;
	mark_close(other, p, worker, util_monotonic());
	return true;
}

int ledger_pool_count(const struct ledger *l, const char *db, const char *user, int worker)
{
	const struct lpool *p = find_pool(l, db, user);
	if (!p)
		return 0;
	return worker < 0 ? p->total : (worker < l->n ? p->count[worker] : 0);
}

static int count_of(const struct hmap *map, const char *name)
{
	const struct lcount *c = find_count(map, name);
	return c ? c->total : 0;
}

int ledger_db_count(const struct ledger *l, const char *db) { return count_of(&l->db_map, db); }
int ledger_user_count(const struct ledger *l, const char *user) { return count_of(&l->user_map, user); }

int ledger_entries(const struct ledger *l)
{
	return (int)(l->pool_map.n + l->db_map.n + l->user_map.n);
}

int ledger_queued(const struct ledger *l)
{
	int n = 0;
	const struct list *it;
	list_for_each(it, &l->queue)
		n++;
	return n;
}

/* pgcrew — statistics. Pools count in their worker; the janitor moves the
 * counts into shared memory per database (one cell per worker), where SHOW
 * STATS and the periodic `stats:` line (worker 0 writes it for the whole
 * instance, in PgBouncer's format) read them; a dead worker's counts stay. */
#include "stats.h"
#include "config.h"
#include "log.h"
#include "objects.h"
#include "shm.h"
#include "util.h"
#include "world.h"

#include <event2/event.h>

static uint64_t last[SHM_STATS];
static usec_t last_time;

_Static_assert(ST_CLIENT_LOGIN + 1 == SHM_STATS, "stats columns");

void stats_to_array(const struct pool_stats *s, uint64_t a[SHM_STATS])
{
	a[ST_XACT] = s->xact_count;
	a[ST_QUERY] = s->query_count;
	a[ST_IN] = s->bytes_in;
	a[ST_OUT] = s->bytes_out;
	a[ST_XACT_TIME] = s->xact_time;
	a[ST_QUERY_TIME] = s->query_time;
	a[ST_WAIT_TIME] = s->wait_time;
	a[ST_ASSIGN] = s->server_assignment_count;
	a[ST_ERRORS] = s->errors;
	a[ST_CLIENT_PARSE] = s->ps.client_parse;
	a[ST_SERVER_PARSE] = s->ps.server_parse;
	a[ST_BIND] = s->ps.bind;
	a[ST_CLIENT_LOGIN] = s->client_login_count;
}

void stats_flush_pool(struct pool *p)
{
	uint64_t now[SHM_STATS], before[SHM_STATS], delta[SHM_STATS];
	if (p->db->shm_idx < 0)
		return;
	stats_to_array(&p->stats, now);
	stats_to_array(&p->flushed, before);
	for (int i = 0; i < SHM_STATS; i++)
		delta[i] = now[i] - before[i];
	shm_stats_add(p->db->shm_idx, delta);
	p->flushed = p->stats;
}

/* Move what the pools counted since the last flush into shared memory. */
void stats_flush(struct world *w)
{
	struct list *it;
	list_for_each(it, &w->pools)
		stats_flush_pool(container_of(it, struct pool, node));
}

static uint64_t per(uint64_t v, uint64_t n);

/* Worker 0, every stats_period: per-database averages over the period, as
 * PgBouncer computes them (rates per second; times per transaction, query,
 * assignment). The totals at the last period's end, per name slot; a slot
 * another database took since (another generation) starts from zero. */
struct db_snap {
	uint32_t gen;
	uint64_t v[SHM_STATS];
};
static struct db_snap *db_last;

static struct db_snap *last_of(int i, uint32_t gen)
{
	if (!db_last)
		db_last = xcalloc(shm_names_capacity() ? shm_names_capacity() : 1, sizeof(*db_last));
	if (db_last[i].gen != gen) {
		memset(&db_last[i], 0, sizeof(db_last[i]));
		db_last[i].gen = gen;
	}
	return &db_last[i];
}

/* Averages of the counts d over dur microseconds: rates per second; times
 * per transaction, query and assignment. */
static void averages(const uint64_t d[SHM_STATS], usec_t dur, uint64_t avg[SHM_STATS])
{
	uint64_t us = dur > 0 ? (uint64_t)dur : 1, sec = (uint64_t)USEC_PER_SEC;
	for (int k = 0; k < SHM_STATS; k++)      /* d * sec / us without overflow */
		avg[k] = d[k] / us * sec + d[k] % us * sec / us;
	avg[ST_XACT_TIME] = per(d[ST_XACT_TIME], d[ST_XACT]);
	avg[ST_QUERY_TIME] = per(d[ST_QUERY_TIME], d[ST_QUERY]);
	avg[ST_WAIT_TIME] = per(d[ST_WAIT_TIME], d[ST_ASSIGN]);
}

static void per_db_averages(usec_t dur)
{
	char name[64];
	uint32_t gen, high = shm_names_high();
	uint64_t now[SHM_STATS], avg[SHM_STATS];
	for (uint32_t i = 0; i < high; i++) {
		if (!shm_name_at((int)i, SHM_DB, name, sizeof(name), &gen))
			continue;
		struct db_snap *prev = last_of((int)i, gen);
		shm_stats_total((int)i, now);
		uint64_t d[SHM_STATS];
		for (int k = 0; k < SHM_STATS; k++)
			d[k] = now[k] - prev->v[k];
		averages(d, dur, avg);
		shm_avg_set((int)i, avg);
		memcpy(prev->v, now, sizeof(now));
	}
}

/* SHOW STATS' averages: those of the last stats_period; before the first
 * one has passed, PgBouncer's over the time since the start, which it
 * counts from one second before. */
void stats_avg_get(int idx, uint64_t avg[SHM_STATS])
{
	uint64_t tot[SHM_STATS];
	if (shm_avg_ready()) {
		shm_avg_get(idx, avg);
		return;
	}
	shm_stats_total(idx, tot);
	stats_avg_since_start(tot, avg);
}

void stats_avg_since_start(const uint64_t tot[SHM_STATS], uint64_t avg[SHM_STATS])
{
	averages(tot, util_monotonic() - shm_created() + USEC_PER_SEC, avg);
}

/* A restarted worker 0 starts its first period from the current totals. */
static void snapshot_db_last(void)
{
	char name[64];
	uint32_t gen, high = shm_names_high();
	for (uint32_t i = 0; i < high; i++)
		if (shm_name_at((int)i, SHM_DB, name, sizeof(name), &gen))
			shm_stats_total((int)i, last_of((int)i, gen)->v);
}

void stats_free(void)
{
	free(db_last);
	db_last = NULL;
}

/* The instance's totals: every database's counters over every worker. */
static void sum(uint64_t t[SHM_STATS])
{
	char name[64];
	uint32_t high = shm_names_high();
	uint64_t one[SHM_STATS];
	memset(t, 0, sizeof(uint64_t) * SHM_STATS);
	for (uint32_t i = 0; i < high; i++) {
		if (!shm_name_at((int)i, SHM_DB, name, sizeof(name), NULL))
			continue;
		shm_stats_total((int)i, one);
		for (int k = 0; k < SHM_STATS; k++)
			t[k] += one[k];
	}
}

static uint64_t per(uint64_t v, uint64_t n)
{
	return n ? v / n : 0;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	struct world *world = arg;
	uint64_t now[SHM_STATS];
	usec_t t = util_monotonic();
	uint64_t secs = (uint64_t)((t - last_time) / USEC_PER_SEC);

	stats_flush(world);
	/* One line for the instance, as PgBouncer writes one. */
	if (world->id != 0)
		return;
	sum(now);
	if (!secs)
		secs = 1;
	per_db_averages(t - last_time);
	if (world->cfg->log_stats) {
		uint64_t x = now[ST_XACT] - last[ST_XACT], q = now[ST_QUERY] - last[ST_QUERY];
		uint64_t w = now[ST_ASSIGN] - last[ST_ASSIGN];
		log_info("stats: %llu xacts/s, %llu queries/s, %llu client parses/s, %llu server parses/s, "
			 "%llu binds/s, in %llu B/s, out %llu B/s, xact %llu us, query %llu us, wait %llu us",
			 (unsigned long long)(x / secs), (unsigned long long)(q / secs), 0ULL, 0ULL, 0ULL,
			 (unsigned long long)((now[ST_IN] - last[ST_IN]) / secs),
			 (unsigned long long)((now[ST_OUT] - last[ST_OUT]) / secs),
			 (unsigned long long)per(now[ST_XACT_TIME] - last[ST_XACT_TIME], x),
			 (unsigned long long)per(now[ST_QUERY_TIME] - last[ST_QUERY_TIME], q),
			 (unsigned long long)per(now[ST_WAIT_TIME] - last[ST_WAIT_TIME], w));
	}
	memcpy(last, now, sizeof(last));
	last_time = t;
}

void stats_start(struct world *w)
{
	usec_t p = w->cfg->stats_period > 0 ? w->cfg->stats_period : 60 * USEC_PER_SEC;
	struct timeval tv = { (time_t)(p / USEC_PER_SEC), (suseconds_t)(p % USEC_PER_SEC) };
	last_time = util_monotonic();
	if (w->id == 0) {
		sum(last);
		snapshot_db_last();
	}
	w->stats_timer = event_new(w->base, -1, EV_PERSIST, tick, w);
	event_add(w->stats_timer, &tv);
}

void stats_stop(struct world *w)
{
	if (w->stats_timer)
		event_free(w->stats_timer);
	w->stats_timer = NULL;
}

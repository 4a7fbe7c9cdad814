/* pgcrew — the periodic statistics line. Counters live in each pool; every
 * stats_period the deltas are summed and logged the way PgBouncer logs them,
 * so existing log parsers keep working. */
#include "stats.h"
#include "config.h"
#include "log.h"
#include "objects.h"
#include "worker.h"

#include <event2/event.h>

static struct pool_stats last;
static usec_t last_time;

static void sum(struct pool_stats *t)
{
	struct list *it;
	memset(t, 0, sizeof(*t));
	list_for_each(it, &W->pools) {
		const struct pool_stats *s = &container_of(it, struct pool, node)->stats;
		t->xact_count += s->xact_count;
		t->query_count += s->query_count;
		t->bytes_in += s->bytes_in;
		t->bytes_out += s->bytes_out;
		t->xact_time += s->xact_time;
		t->query_time += s->query_time;
		t->wait_time += s->wait_time;
		t->server_assignment_count += s->server_assignment_count;
	}
}

static uint64_t per(uint64_t v, uint64_t n)
{
	return n ? v / n : 0;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	struct pool_stats now;
	usec_t t = util_monotonic();
	uint64_t secs = (uint64_t)((t - last_time) / USEC_PER_SEC);

	sum(&now);
	if (!secs)
		secs = 1;
	if (W->cfg->log_stats) {
		uint64_t x = now.xact_count - last.xact_count, q = now.query_count - last.query_count;
		uint64_t w = now.server_assignment_count - last.server_assignment_count;
		log_info("stats: %llu xacts/s, %llu queries/s, %llu client parses/s, %llu server parses/s, "
			 "%llu binds/s, in %llu B/s, out %llu B/s, xact %llu us, query %llu us, wait %llu us",
			 (unsigned long long)(x / secs), (unsigned long long)(q / secs), 0ULL, 0ULL, 0ULL,
			 (unsigned long long)((now.bytes_in - last.bytes_in) / secs),
			 (unsigned long long)((now.bytes_out - last.bytes_out) / secs),
			 (unsigned long long)per(now.xact_time - last.xact_time, x),
			 (unsigned long long)per(now.query_time - last.query_time, q),
			 (unsigned long long)per(now.wait_time - last.wait_time, w));
	}
	last = now;
	last_time = t;
}

void stats_start(void)
{
	usec_t p = W->cfg->stats_period > 0 ? W->cfg->stats_period : 60 * USEC_PER_SEC;
	struct timeval tv = { (time_t)(p / USEC_PER_SEC), (suseconds_t)(p % USEC_PER_SEC) };
	last_time = util_monotonic();
	W->stats_timer = event_new(W->base, -1, EV_PERSIST, tick, NULL);
	event_add(W->stats_timer, &tv);
}

void stats_stop(void)
{
	if (W->stats_timer)
		event_free(W->stats_timer);
	W->stats_timer = NULL;
}

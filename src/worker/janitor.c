/* pgcrew — the janitor: a timer that walks the state lists a few times a
 * second and fires PgBouncer's timeouts with PgBouncer's texts. Per-connection
 * timers would cost an event_add per message; a scan of the lists is cheaper. */
#include "janitor.h"
#include "cancel.h"
#include "heaptrim.h"
#include "client.h"
#include "config.h"
#include "control.h"
#include "pool.h"
#include "pool_idle.h"
#include "server.h"
#include "shm.h"
#include "stats.h"
#include "world.h"

#include <event2/event.h>
#include <stdio.h>

#define JANITOR_PERIOD_USEC 200000

static usec_t eff(usec_t user_value, usec_t global)
{
	return user_value >= 0 ? user_value : global;
}

static void check_login_clients(struct world *w, usec_t now)
{
	struct list *it, *tmp;
	usec_t t = w->cfg->client_login_timeout;
	if (t <= 0)
		return;
	list_for_each_safe(it, tmp, &w->login_clients) {
		struct client *c = container_of(it, struct client, node);
		if (now - c->connect_time > t)
			client_close(c, true, "client_login_timeout");
	}
}

/* A cancel connection waits while its cancel is on its way (cancel.h);
 * one whose answer was lost (the worker holding its target died) goes
 * after cancel_wait_timeout, or 10 s when that is off, and a second. */
#define CANCEL_WAIT_DEFAULT (10 * USEC_PER_SEC)

static void check_cancel_clients(struct world *w, usec_t now)
{
	struct list *it, *tmp;
	usec_t t = w->cfg->cancel_wait_timeout > 0 ? w->cfg->cancel_wait_timeout : CANCEL_WAIT_DEFAULT;
	list_for_each_safe(it, tmp, &w->cancel_clients) {
		struct client *c = container_of(it, struct client, node);
		if (now - c->connect_time > t + USEC_PER_SEC)
			client_close(c, false, "cancel_wait_timeout");
	}
}

/* Waiting for a server (a first login's welcome included): query_timeout
 * counts too, before query_wait_timeout, as in PgBouncer. */
static void check_waiting(struct pool *p, usec_t now)
{
	const struct config *cfg = p->db->world->cfg;
	usec_t qt = eff(p->user->query_timeout, cfg->query_timeout);
	usec_t qwt = pool_query_wait_timeout(p);
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &p->waiting_clients) {
		struct client *c = container_of(it, struct client, node);
		usec_t waited = now - c->request_time;
		if (qt > 0 && waited > qt) {
			client_close(c, true, "query_timeout");
			continue;
		}
		if (qwt > 0 && waited > qwt) {
			client_close(c, true, "query_wait_timeout");
			continue;
		}
		if (cfg->query_wait_notify > 0 && waited > cfg->query_wait_notify && !c->wait_notified &&
		    c->state == CLIENT_WAITING) {
			char msg[256];
			snprintf(msg, sizeof(msg), "No server connection available in postgres backend, client being queued");
			client_send_notice(c, msg);
			c->wait_notified = now;
		}
	}
}

static void check_active(struct pool *p, usec_t now)
{
	const struct config *cfg = p->db->world->cfg;
	const struct puser *u = p->user;
	usec_t idle = eff(u->client_idle_timeout, cfg->client_idle_timeout);
	usec_t itx = eff(u->idle_transaction_timeout, cfg->idle_transaction_timeout);
	usec_t qt = eff(u->query_timeout, cfg->query_timeout);
	usec_t xt = eff(u->transaction_timeout, cfg->transaction_timeout);
	struct list *it, *tmp;

	list_for_each_safe(it, tmp, &p->active_clients) {
		struct client *c = container_of(it, struct client, node);
		if (!c->link) {
			if (idle > 0 && now - c->last_activity > idle)
				client_close(c, true, "client_idle_timeout");
			continue;
		}
		if (c->query_running && qt > 0 && now - c->query_start > qt) {
			struct server *sv = c->link;
			(void)cancel_send(sv, NULL);
			client_close(c, true, "query timeout");
			continue;
		}
		if (!c->query_running && c->in_xact && itx > 0 && now - c->last_activity > itx) {
			client_close(c, true, "idle transaction timeout");
			continue;
		}
		if (c->in_xact && xt > 0 && c->xact_start_set && now - c->xact_start > xt) {
			client_close(c, true, "transaction timeout");
			continue;
		}
		if (!c->in_xact && !c->query_running && idle > 0 && now - c->last_activity > idle)
			client_close(c, true, "client_idle_timeout");
	}
}

static void check_servers(struct pool *p, usec_t now)
{
	const struct config *cfg = p->db->world->cfg;
	usec_t life = pool_server_lifetime(p);
	struct list *it, *tmp;

	list_for_each_safe(it, tmp, &p->idle_servers) {
		struct server *sv = container_of(it, struct server, node);
		bool above_min = p->n_idle + p->n_active > p->db->min_pool_size;
		if (life > 0 && now - sv->connect_time > life)
			server_close(sv, "server lifetime over");
		else if (cfg->server_idle_timeout > 0 && now - sv->last_used > cfg->server_idle_timeout && above_min)
			server_close(sv, "server idle timeout");
	}
	if (cfg->server_connect_timeout > 0) {
		list_for_each_safe(it, tmp, &p->login_servers) {
			struct server *sv = container_of(it, struct server, node);
			if (now - sv->connect_time > cfg->server_connect_timeout) {
				p->login_failed_at = now;
				server_close(sv, "connect timeout");
			}
		}
	}
	/* Busy servers past their lifetime close when released. */
	if (life > 0) {
		list_for_each(it, &p->active_servers) {
			struct server *sv = container_of(it, struct server, node);
			if (now - sv->connect_time > life)
				sv->close_needed = true;
		}
	}
}

static void check_autodb(struct world *w, usec_t now)
{
	usec_t t = w->cfg->autodb_idle_timeout;
	struct list *it;
	if (t <= 0)
		return;
	list_for_each(it, &w->databases) {
		struct database *db = container_of(it, struct database, node);
		if (db->is_autodb && !db->dead && db->n_clients == 0 && db->n_servers == 0 &&
		    now - db->last_used > t) {
			log_warning("dropping database '%s' as it does not exist anymore or inactive auto-database",
				    db->name);
			db->dead = true;
			db->paused = false;      /* this worker's copy is gone (shm.h) */
			shm_db_set_paused(db->shm_idx, false);
		}
	}
}

/* A database with a forced user and min_pool_size has its pool opened
 * before any client asks, as PgBouncer does (pool_idle_timeout never frees
 * a pool with min_pool_size). */
static void open_forced_pools(struct world *w)
{
	struct list *it;
	list_for_each(it, &w->databases) {
		struct database *db = container_of(it, struct database, node);
		if (!db->forced_user || db->min_pool_size <= 0 || db->dead || db->admin)
			continue;
		struct puser *u = pool_get_user(w, db->forced_user);
		if (u)
			(void)pool_get(db, u);
	}
}

/* What nothing holds any more goes every few seconds (pool.c). */
#define SWEEP_USEC (5 * USEC_PER_SEC)

static void sweep(struct world *w, usec_t now)
{
	if (now - w->last_sweep < SWEEP_USEC)
		return;
	w->last_sweep = now;
	pool_sweep(w);
}

/* The worker's heartbeat for /healthz and /readyz (shm.h). */
static void beat(const struct world *w)
{
	unsigned flags = (w->paused || w->suspended ? SHM_HEALTH_PAUSED : 0) |
			 (w->shutting_down ? SHM_HEALTH_SHUTDOWN : 0);
	shm_health_beat(flags);
}

void janitor_pass(struct world *w)
{
	usec_t now = util_monotonic();
	struct list *it;

	beat(w);

	check_login_clients(w, now);
	check_cancel_clients(w, now);
	pool_idle_clean_up(w, now);
	sweep(w, now);
	open_forced_pools(w);
	list_for_each(it, &w->pools) {
		struct pool *p = container_of(it, struct pool, node);
		check_waiting(p, now);
		check_active(p, now);
		check_servers(p, now);
		if (p->wanted > 0)
			pool_give_idle(p);
		pool_launch_needed(p);
	}
	check_autodb(w, now);
	stats_flush(w);
	control_janitor(w);
	cancel_janitor(w, now);
	(void)heaptrim_run();
}

static void janitor_run(evutil_socket_t fd, short what, void *arg)
{
	janitor_pass(arg);
}

void janitor_start(struct world *w)
{
	struct timeval tv = { 0, JANITOR_PERIOD_USEC };
	w->janitor = event_new(w->base, -1, EV_PERSIST, janitor_run, w);
	event_add(w->janitor, &tv);
	beat(w);
}

void janitor_stop(struct world *w)
{
	if (w->janitor)
		event_free(w->janitor);
	w->janitor = NULL;
}

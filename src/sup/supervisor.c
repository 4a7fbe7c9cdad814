/* pgcrew — the supervisor: validates the config, owns every listening
 * socket, forks one worker per slot and respawns a worker that dies, and
 * turns signals into orders for the workers. It never touches client
 * traffic, so a crash of one worker costs only that worker's clients. */
#include "supervisor.h"
#include "welcome.h"
#include "tls.h"
#include "build-config.h"
#include "config.h"
#include "ipc.h"
#include "listen.h"
#include "log.h"
#include "util.h"
#include "worker.h"
#include "shm.h"
#include "ledger.h"
#include "handover.h"
#include "takeover.h"
#include "sdnotify.h"
#include "sched_slice.h"
#include "cmdparse.h"
#include "control.h"
#include "hist.h"
#include "metrics.h"
#include "proto/cancelkey.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct slot {
	pid_t pid;                 /* 0 when not running */
	struct ipc_chan *ch;
	int restarts;              /* quick successive restarts, for backoff */
	usec_t started;
	struct event *respawn;     /* delayed respawn after a crash loop */
	bool reload_asked;         /* owes a RELOAD_DONE for the running reload */
	bool reload_missed;        /* started during a reload: gets it after */
	bool shutdown_ready;       /* WAIT_FOR_SERVERS: no server in use there */
	bool apply_owed;           /* owes a RELOAD_APPLIED */
	bool ready;                /* told IPC_WORKER_READY and not dead since: listening */
};

static struct {
	struct event_base *base;
	struct config *cfg;
	struct listen_set ls;
	struct slot *slots;
	int n_slots;
	bool shutting_down;
	enum shutdown_mode mode;
	struct event *sig[8];
	int n_sig;
	struct ledger *ledger;
	struct event *sweep;       /* welcome_sweep */
	struct list fans;          /* struct fan: console commands out to every worker */
	uint32_t next_fan;
	/* two-phase reload: every worker stages the new config, then all apply */
	struct config *staged;
	int reload_pending;
	bool reload_failed;
	int apply_pending;         /* workers yet to apply the reload's COMMIT / ABORT */
	bool apply_failed;
	struct reload_asker { int slot; uint32_t reqid; } askers[16];   /* console RELOADs waiting */
	int n_askers;
	/* online restart */
	bool takeover;             /* -R: release the old process once all workers run */
	int n_ready;
	struct event *ctl_retry;
	struct event *ledger_tick;       /* re-asks while slot requests queue */
	struct event *welcome_wait;      /* answers welcome asks deferred too long */
	struct event *want_pass;         /* the wants, weighed once per loop turn */
	struct event *busy_ask;          /* a pass LEDGER_BUSY_ASK_USEC after a request queued */
	bool want_pass_due;
	usec_t want_pass_at;             /* the last pass began */
	int ctl_tries;
} sup;

/* Shutting down, a worker that has finished reads nothing more: that is
 * no news (its exit is logged when reaped). */
static void send_failed(enum ipc_type type, int slot)
{
	log_msg(sup.shutting_down ? LG_DEBUG : LG_WARNING, "could not send %s to worker %d",
		ipc_type_name(type), slot);
}

static void broadcast(enum ipc_type type, const void *payload, uint32_t len)
{
	for (int i = 0; i < sup.n_slots; i++)
		if (sup.slots[i].ch && ipc_send(sup.slots[i].ch, type, 0, payload, len, -1) < 0)
			send_failed(type, i);
}

static int running_workers(void)
{
	int n = 0;
	for (int i = 0; i < sup.n_slots; i++)
		n += sup.slots[i].pid != 0;
	return n;
}

static void send_to(int slot, enum ipc_type type, uint32_t reqid, const void *payload, uint32_t len)
{
	struct ipc_chan *ch = slot >= 0 && slot < sup.n_slots ? sup.slots[slot].ch : NULL;
	if (ch && ipc_send(ch, type, reqid, payload, len, -1) < 0)
		send_failed(type, slot);
}

/* Queues fd (a dup) for the worker; false when its channel is gone or
 * dead (a worker that has exited, its end not yet seen). fd stays ours. */
static bool send_fd(int slot, const struct client_fd *m, int fd)
{
	struct client_fd out = *m;
	struct ipc_chan *ch = sup.slots[slot].ch;
	out.target = slot;
	return ch && ipc_send_client_fd(ch, &out, fd) == 0;
}

/* ---- slot ledger ---- */

static void send_want(int worker, const struct pool_want *w, void *arg)
{
	(void)arg;
	send_to(worker, IPC_POOL_WANT, 0, w, sizeof(*w));
}

static void send_evict(int worker, const char *db, const char *user, bool for_db)
{
	struct slot_req r;
	memset(&r, 0, sizeof(r));
	strlcpy_(r.db, db, sizeof(r.db));
	strlcpy_(r.user, user, sizeof(r.user));
	r.claim = for_db ? SLOT_CLAIM_DB : SLOT_CLAIM_USER;
	send_to(worker, IPC_POOL_EVICT, 0, &r, sizeof(r));
}

/* Eviction claims live on the name's shared slot, which every worker with
 * a pool of it holds (none holding it: nobody could claim). */
static int claim_slot(bool db, const char *name)
{
	return shm_name_find(db ? SHM_DB : SHM_USER, name);
}

static void offer_evict(bool db, const char *name, uint32_t base, int need)
{
	shm_evict_offer(claim_slot(db, name), base, need);
}

static int evict_on_way(bool db, const char *name, uint32_t *base)
{
	return shm_evict_on_way(claim_slot(db, name), base);
}

/* Workers read a full database (user) limit there before they ask
 * (pool.c's evict_for_wide). */
static void publish_count(bool db, const char *name, int total)
{
	shm_name_servers_set(claim_slot(db, name), total);
}

/* A server closed on a claim is done when its slot comes back. */
static void claim_done(const struct slot_req *r)
{
	if (r->claim != SLOT_CLAIM_NONE)
		shm_evict_heard(r->claim == SLOT_CLAIM_DB ? claim_slot(true, r->db) : claim_slot(false, r->user));
}

/* While requests queue, the asks are refreshed every 100 ms even without
 * ledger traffic: a worker that starves under steady load (fewer servers
 * than workers) is noticed by time, not by an event. One-shot, so an idle
 * supervisor holds no timer. */
static void ledger_settle(void);

/* Also grants a request that waited for an idle server to move in vain (or
 * denies one for the reuse order, which only a move serves). */
static void on_ledger_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	ledger_settle();
	if (ledger_queued(sup.ledger) > 0) {
		/* A request waiting on past LEDGER_MOVE_WAIT_USEC for an idle
		 * server still idle elsewhere is looked at as often. */
		struct timeval tv = { 0, ledger_awaiting_move(sup.ledger) ? LEDGER_MOVE_WAIT_USEC : 100000 };
		event_add(sup.ledger_tick, &tv);
	}
}

/* The tick within 100 ms; soon: within LEDGER_MOVE_WAIT_USEC (a request
 * that waits for an idle server to move is granted then if none came). */
static void arm_ledger_tick(bool soon)
{
	struct timeval tv = { 0, soon ? LEDGER_MOVE_WAIT_USEC : 100000 };
	if (!sup.ledger_tick)
		sup.ledger_tick = event_new(sup.base, -1, 0, on_ledger_tick, NULL);
	if (soon || !event_pending(sup.ledger_tick, EV_TIMEOUT, NULL))
		event_add(sup.ledger_tick, &tv);
}

/* At most one pass per WANT_PASS_USEC: under eviction load the loop turns
 * thousands of times a second, and a pass weighs every pool holding
 * servers; a want told a millisecond later changes nothing a worker
 * would do (it holds its servers for its own clients that long anyway). */
#define WANT_PASS_USEC 1000

static void on_want_pass(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sup.want_pass_due = false;
	sup.want_pass_at = util_monotonic();
	ledger_want_changes(sup.ledger, send_want, NULL);
}

/* The wants are weighed once the messages read in this turn of the loop
 * are handled, not after each: under a full max_db_connections every
 * eviction is a request, a release and a grant, and each pass weighs every
 * pool holding servers and may tell each holder a want it retracts a
 * message later (bench/tenants: a third of the supervisor's time). */
static void want_pass_soon(void)
{
	if (sup.want_pass_due)
		return;
	if (!sup.want_pass)
		sup.want_pass = event_new(sup.base, -1, 0, on_want_pass, NULL);
	sup.want_pass_due = true;
	usec_t since = util_monotonic() - sup.want_pass_at;
	if (since >= WANT_PASS_USEC) {
		event_active(sup.want_pass, EV_TIMEOUT, 0);
		return;
	}
	struct timeval tv = { 0, (suseconds_t)(WANT_PASS_USEC - since) };
	event_add(sup.want_pass, &tv);
}

/* A request that has just queued is weighed in this turn of the loop, not
 * up to WANT_PASS_USEC later: the idle server named for it (or the close
 * offered) goes at once, as one PgBouncer evicts in the step its client
 * asks (bench/tenants: most of the first-login gap to workers = 1). A pass
 * costs little now that pools it would tell nothing are skipped. */
static void want_pass_now(void)
{
	if (!sup.want_pass)
		sup.want_pass = event_new(sup.base, -1, 0, on_want_pass, NULL);
	sup.want_pass_due = true;
	event_del(sup.want_pass);
	event_active(sup.want_pass, EV_TIMEOUT, 0);
}

/* A pass when a request just queued may be due to busy holders (no idle
 * server to evict came up meanwhile, and nothing else ran a pass): every
 * LEDGER_BUSY_ASK_USEC while requests queue. */
static void arm_busy_ask(void);

static void on_busy_ask(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	want_pass_soon();
	if (ledger_queued(sup.ledger) > 0)
		arm_busy_ask();
}

static void arm_busy_ask(void)
{
	struct timeval tv = { 0, LEDGER_BUSY_ASK_USEC };
	if (!sup.busy_ask)
		sup.busy_ask = event_new(sup.base, -1, 0, on_busy_ask, NULL);
	if (!event_pending(sup.busy_ask, EV_TIMEOUT, NULL))
		event_add(sup.busy_ask, &tv);
}

static void welcome_pool_gone(const char *db, const char *user);

/* After slots were freed: grant what now fits, refresh the asks. */
static void ledger_settle(void)
{
	struct slot_req r;
	uint32_t reqid;
	int w;
	while (ledger_next_grant(sup.ledger, &w, &reqid, &r))
		send_to(w, IPC_SLOT_GRANT, reqid, &r, sizeof(r));
	while (ledger_next_expired(sup.ledger, &w, &reqid, &r))
		send_to(w, IPC_SLOT_DENY, reqid, &r, sizeof(r));
	want_pass_soon();
}

static void on_slot_msg(int slot, const struct ipc_hdr *hdr, const void *payload)
{
	struct slot_req r;
	if (!ipc_get_slot(hdr, payload, &r))
		return;
	if (hdr->type == IPC_SLOT_RELEASE) {
		claim_done(&r);
		if (!ledger_release(sup.ledger, slot, r.db, r.user))
			log_warning("worker %d returned a slot of %s/%s it did not hold", slot, r.db, r.user);
		welcome_pool_gone(r.db, r.user);
		ledger_settle();
		return;
	}
	if (hdr->type == IPC_EVICT_DONE) {
		(void)ledger_evict_done(sup.ledger, slot, r.db, r.user);
		want_pass_soon();
		return;
	}
	if (hdr->type == IPC_EVICT_NONE) {
		(void)ledger_evict_refused(sup.ledger, slot, r.db, r.user);
		want_pass_soon();
		return;
	}
	if (hdr->type == IPC_SLOT_WITHDRAW) {
		bool queued = ledger_withdraw(sup.ledger, slot, r.db, r.user, hdr->reqid);
		send_to(slot, IPC_SLOT_DENY, queued ? hdr->reqid : IPC_SLOT_NOT_QUEUED, &r, sizeof(r));
		ledger_settle();
		return;
	}
	bool idle = r.wait && !r.own && hist_pool_idle_elsewhere(r.db, r.user, slot);
	switch (ledger_request_idle(sup.ledger, slot, hdr->reqid, &r, idle)) {
	case LEDGER_GRANTED:
		send_to(slot, IPC_SLOT_GRANT, hdr->reqid, &r, sizeof(r));
		break;
	case LEDGER_DENIED:
		send_to(slot, IPC_SLOT_DENY, hdr->reqid, &r, sizeof(r));
		break;
	case LEDGER_QUEUED:
		log_noise("slot request queued: pool=%s/%s worker=%d%s", r.db, r.user, slot,
			  idle ? " (an idle server elsewhere is to move)" : "");
		want_pass_now();
		arm_ledger_tick(idle);
		arm_busy_ask();
		break;
	}
}

static bool pool_has_waiter(const char *db, const char *user, int worker)
{
	return hist_pool_wait_of(db, user, worker) != 0;
}

/* An idle server offered by a worker: to the oldest request of its pool on
 * another worker, or back to its sender. The asks are refreshed before it
 * goes back, so the sender does not offer it again on a stale ask. */
static void route_server(int from, const struct ipc_hdr *hdr, const void *payload, int fd)
{
	char db[LEDGER_NAME], user[LEDGER_NAME];
	uint32_t reqid = IPC_SERVER_BACK_CLOSE;
	int to = from;

	if (fd < 0)
		return;
	if (!handover_names(payload, hdr->len, db, user)) {
		log_error("ipc: bad SERVER_FD payload from worker %d", from);
		close(fd);
		return;
	}
	usec_t *waits = xcalloc((size_t)sup.n_slots, sizeof(*waits));
	bool known = hist_pool_waits(db, user, waits, sup.n_slots);
	enum ledger_move m = ledger_handover(sup.ledger, from, db, user, known ? waits : NULL,
					     pool_has_waiter, &to, &reqid);
	free(waits);
	switch (m) {
	case LEDGER_MOVE_TO:
		log_noise("server of %s/%s: worker %d -> worker %d", db, user, from, to);
		if (reqid == 0)
			reqid = IPC_SERVER_UNASKED;
		break;
	case LEDGER_MOVE_CLOSE:
		reqid = IPC_SERVER_BACK_CLOSE;
		break;
	case LEDGER_MOVE_KEEP:
		reqid = IPC_SERVER_BACK_KEEP;
		break;
	}
	ledger_retell(sup.ledger, from, db, user);
	want_pass_soon();
	struct ipc_chan *ch = sup.slots[to].ch;
	if (!ch || ipc_send(ch, IPC_SERVER_FD, reqid, payload, hdr->len, fd) < 0) {
		/* The backend ends on EOF; its slot goes with the worker's. */
		log_warning("could not pass a server connection to worker %d: closing it", to);
		(void)ledger_release(sup.ledger, to, db, user);
		ledger_settle();
	}
	close(fd);
}

/* The cancel key names the worker that owns the client (proto/cancelkey.h);
 * after an online restart to fewer workers, old worker o's clients are in
 * o % n. */
static void forward_cancel(int from, const struct ipc_hdr *hdr, const void *payload)
{
	struct cancelkey k;
	struct cancel_waiter wt;
	int owner, peer;
	if (!ipc_get_cancel(hdr, payload, &k, &wt))
		return;
	if (!cancelkey_route(&k, &owner, &peer)) {
		log_debug("cancel request (from worker %d) with a key of no pgcrew layout: dropped", from);
		return;
	}
	owner %= sup.n_slots;
	if (!sup.slots[owner].ch) {
		log_debug("cancel request for worker %d (from worker %d): no such worker, dropped", owner, from);
		return;
	}
	if (ipc_send_cancel(sup.slots[owner].ch, &k, &wt) < 0)
		log_warning("could not forward a cancel request to worker %d", owner);
}

/* How a forwarded cancel ended, for the worker that holds its connection. */
static void cancel_done(const struct ipc_hdr *hdr, const void *payload)
{
	struct cancel_waiter wt;
	if (!ipc_get_cancel_done(hdr, payload, &wt))
		return;
	if (wt.worker < 0 || wt.worker >= sup.n_slots || !sup.slots[wt.worker].ch)
		return;          /* that worker died: its connections went with it */
	if (ipc_send_cancel_done(sup.slots[wt.worker].ch, &wt) < 0)
		log_warning("could not tell worker %d how a cancel request ended", wt.worker);
}

/* ---- welcome parameters and failed server logins (welcome.c) ---- */

static void tell_recent_failure(int slot, const void *key);
static void arm_sweep(void);

/* A deferred ask is answered without a welcome after this long: the
 * worker then logs in a server of its own, as with none counted. */
#define WELCOME_WAIT_USEC (1 * USEC_PER_SEC)

static void answer_welcome(int slot, const void *key)
{
	uint32_t len;
	const void *w = welcome_find(key, &len);
	if (w)
		send_to(slot, IPC_WELCOME, 0, w, len);
	else
		send_to(slot, IPC_WELCOME, 0, key, WELCOME_KEY);
}

/* The asks deferred for key (NULL: any) made before `before`, answered
 * with what is known now; `late`: their wait ran out (a debug line each). */
static void answer_deferred(const void *key, usec_t before, bool late)
{
	uint8_t k[WELCOME_KEY];
	int worker;
	while (welcome_take_deferred(key, before, &worker, k)) {
		if (late)
			log_debug("welcome of %.*s/%.*s for worker %d: none came in time", LEDGER_NAME,
				  (const char *)k, LEDGER_NAME, (const char *)k + LEDGER_NAME, worker);
		answer_welcome(worker, k);
	}
	welcome_fetch_end(key, before);
}

/* Due when the oldest deferred ask has waited WELCOME_WAIT_USEC. */
static void arm_welcome_wait(void)
{
	usec_t oldest = welcome_oldest_deferred();
	if (!oldest || event_pending(sup.welcome_wait, EV_TIMEOUT, NULL))
		return;
	usec_t left = oldest + WELCOME_WAIT_USEC - util_monotonic();
	if (left < 0)
		left = 0;
	struct timeval tv = { (time_t)(left / USEC_PER_SEC), (suseconds_t)(left % USEC_PER_SEC) };
	event_add(sup.welcome_wait, &tv);
}

static void on_welcome_wait(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	answer_deferred(NULL, util_monotonic() - WELCOME_WAIT_USEC + 1, true);
	arm_welcome_wait();
}

/* A worker sends its pool's welcome only when another worker holds the
 * pool (pool.c): for an ask that finds none here, the pool's other holders
 * are asked for it. How many were. */
static int fetch_welcome(int asker, const char *db, const char *user, const void *key)
{
	bool held[SHM_MAX_WORKERS];
	int n = sup.n_slots < SHM_MAX_WORKERS ? sup.n_slots : SHM_MAX_WORKERS, asked = 0;
	hist_pool_holders(db, user, held, n);
	for (int w = 0; w < n; w++) {
		if (w == asker || !held[w] || !sup.slots[w].ch)
			continue;
		send_to(w, IPC_WELCOME_FETCH, 0, key, WELCOME_KEY);
		asked++;
	}
	if (asked > 0)
		welcome_fetch_start(key, asked, util_monotonic());
	return asked;
}

static void on_welcome_msg(int slot, const struct ipc_hdr *hdr, const void *payload)
{
	if (hdr->len < WELCOME_KEY)
		return;
	if (hdr->type == IPC_WELCOME_PUT) {
		welcome_put(payload, hdr->len);
		answer_deferred(payload, INT64_MAX, false);
		arm_sweep();
		return;
	}
	uint32_t len;
	char db[LEDGER_NAME], user[LEDGER_NAME];
	memcpy(db, payload, LEDGER_NAME);
	memcpy(user, (const char *)payload + LEDGER_NAME, LEDGER_NAME);
	db[LEDGER_NAME - 1] = user[LEDGER_NAME - 1] = 0;
	if (hdr->type == IPC_WELCOME_NONE) {
		/* Every holder asked has none, and no server of the pool is
		 * counted whose login could bring it: the asks are answered
		 * (the workers log in servers of their own). */
		if (welcome_fetch_none(payload) && ledger_pool_count(sup.ledger, db, user, -1) == 0)
			answer_deferred(payload, INT64_MAX, false);
		return;
	}
	tell_recent_failure(slot, payload);
	if (!welcome_find(payload, &len) &&
	    (welcome_fetching(payload) || fetch_welcome(slot, db, user, payload) > 0 ||
	     ledger_pool_count(sup.ledger, db, user, -1) > 0)) {
		welcome_defer(slot, payload, util_monotonic());
		arm_welcome_wait();
		return;
	}
	answer_welcome(slot, payload);
}

/* A slot of the pool came back: with no server of it counted any more
 * (its login failed, or it closed before its welcome came) the deferred
 * asks are answered. Every release passes here: nearly always nothing is
 * deferred, one load. */
static void welcome_pool_gone(const char *db, const char *user)
{
	uint8_t key[WELCOME_KEY] = { 0 };
	if (!welcome_oldest_deferred() || ledger_pool_count(sup.ledger, db, user, -1) > 0)
		return;
	strlcpy_((char *)key, db, LEDGER_NAME);
	strlcpy_((char *)key + LEDGER_NAME, user, LEDGER_NAME);
	answer_deferred(key, INT64_MAX, false);
}

/* Told to every worker at once; kept so a worker that meets the pool later
 * (its first client comes after the failure) also waits server_login_retry. */
static void on_login_failed(int slot, const struct ipc_hdr *hdr, const void *payload)
{
	struct login_failure f;
	if (!ipc_get_login_failure(hdr, payload, &f))
		return;
	for (int i = 0; i < sup.n_slots; i++)
		if (i != slot)
			send_to(i, IPC_LOGIN_FAILED, 0, &f, sizeof(f));
	welcome_failure_put(&f, util_monotonic());
	arm_sweep();
}

/* Before answering a WELCOME_GET: a recent failure goes first. */
static void tell_recent_failure(int slot, const void *key)
{
	usec_t age;
	const struct login_failure *x = welcome_failure_recent(key, util_monotonic(),
							       sup.cfg->server_login_retry, &age);
	if (!x)
		return;
	struct login_failure f = *x;
	f.age_usec = (int64_t)age;
	send_to(slot, IPC_LOGIN_FAILED, 0, &f, sizeof(f));
}

/* Every few seconds while it keeps any: what the supervisor keeps for
 * pools that no worker holds any more goes (their shared slots are free).
 * One-shot, so an idle supervisor holds no timer. */
#define SWEEP_SECS 5

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	(void)welcome_sweep(hist_pool_held, util_monotonic(), sup.cfg->server_login_retry);
	if (welcome_count() > 0)
		arm_sweep();
}

static void arm_sweep(void)
{
	struct timeval tv = { SWEEP_SECS, 0 };
	if (!event_pending(sup.sweep, EV_TIMEOUT, NULL))
		event_add(sup.sweep, &tv);
}

/* ---- console fan-out ----
 * A worker's console client asks for every worker's rows (or a PAUSE in
 * each): the command goes to all workers, their parts are passed on to the
 * asker as they come, and the asker hears DONE once every worker answered
 * (or died). */

struct fan {
	struct list node;
	uint32_t id;
	int origin;                /* -1 once the asking worker is gone, FAN_HERE: ours */
	uint32_t origin_req;
	metrics_part_fn on_part;       /* FAN_HERE: where the rows go */
	metrics_done_fn on_done;
	void *arg;
	int pending;
	bool *owed;
	int n_ok;                  /* workers that carried it out */
	char err[256];             /* the first error */
	char not_here[256];        /* "?..." answers: an error only if nobody did it */
	int not_here_rank;         /* its '?' marks: "??" (has it, not applicable) outranks "?" */
};

#define FAN_HERE (-2)              /* asked by the supervisor itself (metrics.c) */

static struct fan *find_fan(uint32_t id)
{
	struct list *it;
	list_for_each(it, &sup.fans) {
		struct fan *f = container_of(it, struct fan, node);
		if (f->id == id)
			return f;
	}
	return NULL;
}

static void fan_free(struct fan *f)
{
	list_del(&f->node);
	free(f->owed);
	free(f);
}

static void fan_finish(struct fan *f)
{
	if (!f->err[0] && f->n_ok == 0 && f->not_here[0])
		snprintf(f->err, sizeof(f->err), "%s", f->not_here);
	if (f->origin == FAN_HERE)
		f->on_done(f->arg, f->err);
	else if (f->origin >= 0)
		send_to(f->origin, IPC_ADMIN_DONE, f->origin_req, f->err, (uint32_t)strlen(f->err) + 1);
	fan_free(f);
}

static void fan_answered(struct fan *f, int slot, const char *err)
{
	if (!f->owed[slot])
		return;
	f->owed[slot] = false;
	int rank = err && *err == '?' ? (err[1] == '?' ? 2 : 1) : 0;
	if (err && rank > 0 && rank > f->not_here_rank) {
		snprintf(f->not_here, sizeof(f->not_here), "%s", err + rank);
		f->not_here_rank = rank;
	} else if (err && *err && *err != '?' && !f->err[0]) {
		snprintf(f->err, sizeof(f->err), "%s", err);
	} else if (err && !*err) {
		f->n_ok++;
	}
	if (--f->pending > 0)
		return;
	fan_finish(f);
}

/* supervisor_sched_batch: at start, after every RELOAD and SET. A worker
 * gives the policy back right after its fork (spawn). */
static void apply_sched_batch(void)
{
	switch (sched_batch_set(sup.cfg->supervisor_sched_batch)) {
	case SLICE_SET:
		break;
	case SLICE_UNSUPPORTED:
		log_debug("supervisor_sched_batch: this system has no sched_setattr");
		break;
	case SLICE_OTHER_POLICY:
		log_debug("supervisor_sched_batch: not applied, the supervisor runs under another scheduling policy");
		break;
	case SLICE_FAILED:
		log_msg_errno(LG_WARNING, "supervisor_sched_batch: sched_setattr failed");
		break;
	}
}

/* SET: the supervisor's copy first, so a bad value or an unknown key
 * reaches no worker, and respawned workers keep the value (a key that needs
 * a restart is accepted and changes nothing, as in PgBouncer). False when
 * it answered the asker itself. */
static bool admin_set_here(int slot, const struct ipc_hdr *hdr, const char *text)
{
	struct cmdparse p;
	char err[256];
	if (cmdparse(text, &p) != CMDPARSE_SET)
		return true;
	int r = ctl_apply_set(sup.cfg, p.arg, p.val, err, sizeof(err));
	if (r == 0) {
		log_info("SET %s = %s", p.arg, p.val);
		apply_sched_batch();
	}
	if (r >= 0)
		return true;
	send_to(slot, IPC_ADMIN_DONE, hdr->reqid, err, (uint32_t)strlen(err) + 1);
	return false;
}

static struct fan *fan_new(int origin, uint32_t origin_req)
{
	struct fan *f = xcalloc(1, sizeof(*f));
	f->id = ++sup.next_fan;
	f->origin = origin;
	f->origin_req = origin_req;
	f->owed = xcalloc((size_t)sup.n_slots, sizeof(bool));
	list_append(&sup.fans, &f->node);
	return f;
}

/* The command to every running worker; with none, done at once. */
static void fan_send(struct fan *f, const void *cmd, uint32_t len)
{
	for (int i = 0; i < sup.n_slots; i++) {
		if (!sup.slots[i].ch)
			continue;
		f->owed[i] = true;
		f->pending++;
		send_to(i, IPC_ADMIN_RUN, f->id, cmd, len);
	}
	if (f->pending == 0) {
		snprintf(f->err, sizeof(f->err), "no worker is running");
		fan_finish(f);
	}
}

/* The metrics endpoint's console command, run by every worker. */
static void supervisor_fanout(const char *cmd, metrics_part_fn on_part, metrics_done_fn on_done, void *arg)
{
	struct fan *f = fan_new(FAN_HERE, 0);
	f->on_part = on_part;
	f->on_done = on_done;
	f->arg = arg;
	fan_send(f, cmd, (uint32_t)strlen(cmd) + 1);
}

static int supervisor_ledger_entries(void)
{
	return sup.ledger ? ledger_entries(sup.ledger) : 0;
}

/* /readyz (metrics.c): a worker that is running and has said it listens. */
static bool supervisor_worker_ready(int slot)
{
	return slot >= 0 && slot < sup.n_slots && sup.slots && sup.slots[slot].pid > 0 && sup.slots[slot].ready;
}

static bool supervisor_shutting_down(void)
{
	return sup.shutting_down;
}

static const struct config *supervisor_config(void)
{
	return sup.cfg;
}

static void do_reload(bool from_console);

/* The console's RELOAD: the reload runs here, as for SIGHUP, and the
 * console answers once every worker has applied it (or it failed). */
static bool admin_reload_here(int slot, const struct ipc_hdr *hdr, const char *text)
{
	if (strcmp(text, ADMIN_RELOAD_REQ) != 0)
		return false;
	if (sup.n_askers == (int)ARRAY_SIZE(sup.askers)) {
		static const char busy[] = "too many RELOAD commands at once";
		send_to(slot, IPC_ADMIN_DONE, hdr->reqid, busy, sizeof(busy));
		return true;
	}
	sup.askers[sup.n_askers++] = (struct reload_asker){ slot, hdr->reqid };
	do_reload(true);
	return true;
}

static void on_admin_msg(int slot, const struct ipc_hdr *hdr, const void *payload)
{
	struct fan *f;
	const char *text;
	switch (hdr->type) {
	case IPC_ADMIN_REQ:
		if (!ipc_get_text(hdr, payload, &text) || admin_reload_here(slot, hdr, text))
			break;
		if (!admin_set_here(slot, hdr, text))
			break;
		f = fan_new(slot, hdr->reqid);
		fan_send(f, payload, hdr->len);
		break;
	case IPC_ADMIN_PART:
		f = find_fan(hdr->reqid);
		if (f && f->origin == FAN_HERE)
			f->on_part(f->arg, payload, hdr->len);
		else if (f && f->origin >= 0)
			send_to(f->origin, IPC_ADMIN_PART, f->origin_req, payload, hdr->len);
		break;
	case IPC_ADMIN_DONE:
		f = find_fan(hdr->reqid);
		if (f)
			fan_answered(f, slot, hdr->len > 0 && ((const char *)payload)[hdr->len - 1] == 0
				     ? payload : NULL);
		break;
	}
}

/* A worker died: it answers nothing more and asks nothing more. */
static void fans_worker_gone(int slot)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &sup.fans) {
		struct fan *f = container_of(it, struct fan, node);
		if (f->origin == slot)
			f->origin = -1;
		fan_answered(f, slot, NULL);
	}
}

/* ---- balance ----
 * A worker above its share hands a just-accepted client socket (no byte
 * read yet) to the least loaded worker, through us. */

static void pass_client(int from, const struct ipc_hdr *hdr, const void *payload, int fd)
{
	struct client_fd m;
	if (fd < 0)
		return;
	bool ok = ipc_get_client_fd(hdr, payload, &m);
	if (!ok)
		memset(&m, 0, sizeof(m));    /* id 0: the worker keeping it numbers it */
	int target = m.target;
	/* Handing over to a new process: a socket on its way to a lighter
	 * worker goes to the new process, as one still in the listen queue
	 * does; the target may have handed its clients over and finished
	 * before it would read it, and the socket would close with it. */
	if (sup.shutting_down && sup.mode == SHUTDOWN_HANDOVER &&
	    takeover_pass(IPC_CLIENT_FD, (uint32_t)from, payload, hdr->len, fd) == 0) {
		log_debug("C-%llu: client socket on its way to worker %d passed to the new process",
			  (unsigned long long)m.id, target);
		close(fd);
		return;
	}
	bool sent = ok && target >= 0 && target < sup.n_slots && target != from &&
		    send_fd(target, &m, fd);
	/* The target is gone (in an online restart, a worker that has handed
	 * its clients over and exited): the sender keeps the client after all. */
	if (!sent && !send_fd(from, &m, fd))
		log_warning("could not pass a client connection to worker %d: closing it",
			    target >= 0 ? target : from);
	close(fd);
}

/* ---- reload ---- */

/* The console's RELOAD answers once the reload is over everywhere: an
 * empty text, or PgBouncer's error for a refused file. */
static void answer_askers(bool failed)
{
	static const char fail_text[] = "RELOAD failed, see logs for additional details";
	for (int i = 0; i < sup.n_askers; i++) {
		if (!sup.slots[sup.askers[i].slot].ch)
			continue;
		send_to(sup.askers[i].slot, IPC_ADMIN_DONE, sup.askers[i].reqid, failed ? fail_text : "",
			failed ? (uint32_t)sizeof(fail_text) : 1);
	}
	sup.n_askers = 0;
}

static void reload_applied(int slot)
{
	struct slot *s = &sup.slots[slot];
	if (!s->apply_owed)
		return;
	s->apply_owed = false;
	if (--sup.apply_pending == 0)
		answer_askers(sup.apply_failed);
}

/* Phase two sent: wait for every running worker to apply it. */
static void await_applied(bool failed)
{
	sup.apply_failed = failed;
	sup.apply_pending = 0;
	for (int i = 0; i < sup.n_slots; i++) {
		sup.slots[i].apply_owed = sup.slots[i].ch != NULL;
		sup.apply_pending += sup.slots[i].apply_owed;
	}
	if (sup.apply_pending == 0)
		answer_askers(failed);
}

static void reload_finish(void)
{
	sdnotify("READY=1\nSTATUS=%s", sup.reload_failed ? "reload failed" : "reloaded");
	await_applied(sup.reload_failed);
	if (sup.reload_failed) {
		log_error("config reload failed in a worker, keeping the old configuration everywhere");
		broadcast(IPC_RELOAD_ABORT, NULL, 0);
		config_free(sup.staged);
	} else {
		broadcast(IPC_RELOAD_COMMIT, NULL, 0);
		if (worker_server_tls_changed(sup.cfg, sup.staged))
			welcome_forget_failures();
		config_free(sup.cfg);
		sup.cfg = sup.staged;
		apply_sched_batch();
		/* Workers started meanwhile run the old config: bring them along. */
		for (int i = 0; i < sup.n_slots; i++) {
			if (!sup.slots[i].reload_missed)
				continue;
			sup.slots[i].reload_missed = false;
			send_to(i, IPC_RELOAD, 0, NULL, 0);
			send_to(i, IPC_RELOAD_COMMIT, 0, NULL, 0);
		}
	}
	sup.staged = NULL;
}

static void reload_answered(int slot, bool ok)
{
	struct slot *s = &sup.slots[slot];
	if (!sup.staged || !s->reload_asked)
		return;
	s->reload_asked = false;
	if (!ok)
		sup.reload_failed = true;
	if (--sup.reload_pending == 0)
		reload_finish();
}

/* ---- online restart ---- */

static void shutdown_all(enum shutdown_mode mode);
static void check_all_ready(void);

static void on_taken_over(pid_t new_pid, bool takes_conns)
{
	if (takes_conns)
		log_info("online restart: pid %d took over the listening sockets; "
			 "handing idle clients and servers over, the others finish here", (int)new_pid);
	else
		log_info("online restart: pid %d took over the listening sockets; it cannot take "
			 "connections, waiting for clients to leave (SHUTDOWN WAIT_FOR_CLIENTS)", (int)new_pid);
	sup.ls.keep_path = true;
	metrics_close_listener();
	shutdown_all(takes_conns ? SHUTDOWN_HANDOVER : SHUTDOWN_WAIT_CLIENTS);
}

/* Old process: a worker hands a connection to the new process. A server's
 * slot leaves our ledger with it. */
static void pass_taken(int slot, const struct ipc_hdr *hdr, const void *payload, int fd)
{
	char db[LEDGER_NAME], user[LEDGER_NAME];
	if (fd < 0)
		return;
	if (hdr->type == IPC_TAKEN_SERVER && handover_names(payload, hdr->len, db, user)) {
		(void)ledger_release(sup.ledger, slot, db, user);
		ledger_settle();
	}
	uint32_t reqid = (hdr->reqid & IPC_TAKEN_PAIRED) | (uint32_t)slot;
	if (takeover_pass((enum ipc_type)hdr->type, reqid, payload, hdr->len, fd) < 0)
		log_warning("online restart: could not pass a connection of worker %d to the new process: closing it",
			    slot);
	close(fd);
}

/* New process: a socket the old one accepted but had not begun to serve
 * (it was on its way between two of its workers); numbered here. */
static void take_fresh_client(int to, int fd)
{
	struct client_fd m = { .target = to, .id = 0 };
	if (!send_fd(to, &m, fd))
		log_warning("online restart: could not pass a new client connection to worker %d: closing it", to);
	close(fd);
}

/* New process: a connection from the old one goes to the worker its
 * client's cancel key now names (old worker % our workers), or the next
 * one running. A server brings its slot. */
static void on_taken_conn(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
			  int fd, void *arg)
{
	char db[LEDGER_NAME], user[LEDGER_NAME];
	int want = IPC_TAKEN_WORKER(hdr->reqid) % sup.n_slots, to = -1;

	for (int i = 0; i < sup.n_slots && to < 0; i++)
		if (sup.slots[(want + i) % sup.n_slots].ch)
			to = (want + i) % sup.n_slots;
	bool server = hdr->type == IPC_TAKEN_SERVER;
	if (hdr->type == IPC_CLIENT_FD && fd >= 0 && to >= 0) {
		take_fresh_client(to, fd);
		return;
	}
	if (fd < 0 || (hdr->type != IPC_TAKEN_CLIENT && !server) ||
	    (server && !handover_names(payload, hdr->len, db, user)) || to < 0) {
		log_warning("online restart: unexpected %s from the old process", ipc_type_name(hdr->type));
		if (fd >= 0)
			close(fd);
		return;
	}
	if (server)
		ledger_adopt(sup.ledger, to, db, user);
	if (ipc_send(sup.slots[to].ch, (enum ipc_type)hdr->type, hdr->reqid, payload, hdr->len, fd) < 0 &&
	    server) {
		(void)ledger_release(sup.ledger, to, db, user);
		ledger_settle();
	}
	close(fd);
}

/* Serve our sockets to a future `pgcrew -R`. */
static bool serve_control(void)
{
	return takeover_serve(sup.base, sup.cfg->listen_port, &sup.ls, on_taken_over) == 0;
}

static void on_ctl_retry(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, 100000 };
	if (serve_control())
		return;
	if (++sup.ctl_tries < 50)
		event_add(sup.ctl_retry, &tv);
	else
		log_warning("online restart: control socket still taken; a later -R cannot reach this process");
}

/* Every worker runs: the old process may stop accepting and drain; its
 * control socket frees up and becomes ours. */
static void takeover_ready(void)
{
	struct timeval tv = { 0, 50000 };
	sup.takeover = false;
	takeover_release_old(sup.base, on_taken_conn);
	sup.ctl_retry = event_new(sup.base, -1, 0, on_ctl_retry, NULL);
	event_add(sup.ctl_retry, &tv);
}

/* ---- worker messages ---- */

static void on_worker_msg(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
			  int fd, void *arg)
{
	int slot = (int)(intptr_t)arg;
	int32_t status;
	if (hdr->type == IPC_CLIENT_FD) {
		pass_client(slot, hdr, payload, fd);
		return;
	}
	if (hdr->type == IPC_SERVER_FD && hdr->worker == slot) {
		route_server(slot, hdr, payload, fd);
		return;
	}
	if ((hdr->type == IPC_TAKEN_CLIENT || hdr->type == IPC_TAKEN_SERVER) && hdr->worker == slot) {
		pass_taken(slot, hdr, payload, fd);
		return;
	}
	if (fd >= 0)
		close(fd);
	if (hdr->worker != slot)
		fatal("ipc: message claims worker %d on slot %d", hdr->worker, slot);
	switch (hdr->type) {
	case IPC_WORKER_READY:
		log_debug("worker %d ready (pid %d)", slot, (int)sup.slots[slot].pid);
		sup.slots[slot].ready = true;
		if (++sup.n_ready == sup.n_slots) {
			sdnotify("READY=1\nSTATUS=%d workers, accepting connections\nMAINPID=%d",
				 sup.n_slots, (int)getpid());
			if (sup.takeover)
				takeover_ready();
		}
		break;
	case IPC_RELOAD_DONE:
		if (ipc_get_i32(hdr, payload, &status))
			reload_answered(slot, status == 0);
		break;
	case IPC_SLOT_REQ:
	case IPC_SLOT_RELEASE:
	case IPC_SLOT_WITHDRAW:
	case IPC_EVICT_NONE:
	case IPC_EVICT_DONE:
		on_slot_msg(slot, hdr, payload);
		break;
	case IPC_CANCEL_FWD:
		forward_cancel(slot, hdr, payload);
		break;
	case IPC_CANCEL_DONE:
		cancel_done(hdr, payload);
		break;
	case IPC_WELCOME_PUT:
	case IPC_WELCOME_GET:
	case IPC_WELCOME_NONE:
		on_welcome_msg(slot, hdr, payload);
		break;
	case IPC_LOGIN_FAILED:
		on_login_failed(slot, hdr, payload);
		break;
	case IPC_ADMIN_REQ:
	case IPC_ADMIN_PART:
	case IPC_ADMIN_DONE:
		on_admin_msg(slot, hdr, payload);
		break;
	case IPC_SHUTDOWN_READY:
		sup.slots[slot].shutdown_ready = true;
		check_all_ready();
		break;
	case IPC_RELOAD_APPLIED:
		reload_applied(slot);
		break;
	default:
		fatal("ipc: unexpected %s from worker %d", ipc_type_name(hdr->type), slot);
	}
}

static void on_worker_eof(struct ipc_chan *ch, void *arg)
{
	/* The SIGCHLD handler does the bookkeeping. */
}

/* ---- process life ---- */

static void spawn(int slot);

static void on_respawn(evutil_socket_t fd, short what, void *arg)
{
	if (!sup.shutting_down)
		spawn((int)(intptr_t)arg);
}

/* The signals the supervisor handles (on_signal). */
static const int handled_sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };

static void child_reset_signals(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(handled_sigs); i++)
		signal(handled_sigs[i], SIG_DFL);
}

/* From the moment the port is open a client, a test or systemd may take
 * the pooler as up and signal it: until the handlers are in place those
 * signals wait (blocked) instead of ending the process (a SIGHUP then is
 * a reload, as any later one). */
static void hold_signals(bool hold)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < ARRAY_SIZE(handled_sigs); i++)
		sigaddset(&set, handled_sigs[i]);
	sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

static void spawn(int slot)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		log_msg_errno(LG_ERROR, "socketpair for worker %d", slot);
		return;
	}
	pid_t pid = fork();
	if (pid < 0) {
		log_msg_errno(LG_ERROR, "fork for worker %d", slot);
		close(sp[0]);
		close(sp[1]);
		return;
	}
	if (pid == 0) {
		/* Do not touch the supervisor's event_base: its epoll set is
		 * shared with the parent. Close the raw fds only. */
		child_reset_signals();
		close(sp[0]);
		for (int i = 0; i < sup.n_slots; i++)
			if (sup.slots[i].ch)
				close(ipc_chan_fd(sup.slots[i].ch));
		takeover_close_in_child();
		metrics_close_in_child();
		sdnotify_forget();
		/* supervisor_sched_batch is the supervisor's alone */
		if (sched_batch_set(false) == SLICE_FAILED)
			log_msg_errno(LG_WARNING, "worker %d: cannot leave the supervisor's SCHED_BATCH", slot);
		worker_main(slot, sup.cfg, sp[1], &sup.ls);
	}
	close(sp[1]);
	struct slot *s = &sup.slots[slot];
	s->pid = pid;
	s->started = util_monotonic();
	s->reload_missed = sup.staged != NULL;
	s->ch = ipc_chan_new(sup.base, sp[0], -1, on_worker_msg, on_worker_eof, (void *)(intptr_t)slot);
	log_debug("started worker %d, pid %d", slot, (int)pid);
}

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "stopped");
}

static void worker_died(int slot, int status)
{
	struct slot *s = &sup.slots[slot];
	char why[128];

	describe_status(status, why, sizeof(why));
	/* Connections it handed over just before it exited are still in the
	 * channel: pass them on before the channel goes. */
	if (sup.shutting_down && sup.mode == SHUTDOWN_HANDOVER)
		ipc_chan_read_rest(s->ch);
	shm_worker_reset(slot);
	hist_worker_gone(slot);
	ledger_worker_gone(sup.ledger, slot);
	welcome_drop_deferred(slot);
	answer_deferred(NULL, INT64_MAX, false);   /* its servers are gone: the others' asks now */
	ipc_chan_free(s->ch);
	s->ch = NULL;
	pid_t old_pid = s->pid;
	s->pid = 0;
	s->ready = false;
	reload_answered(slot, true);    /* a dead worker does not hold a reload up */
	reload_applied(slot);
	fans_worker_gone(slot);
	if (!sup.shutting_down)
		ledger_settle();
	if (sup.shutting_down) {
		log_debug("worker %d %s", slot, why);
		if (running_workers() == 0)
			event_base_loopexit(sup.base, NULL);
		else
			check_all_ready();
		return;
	}
	log_warning("worker %d (pid %d) %s; restarting it", slot, (int)old_pid, why);
	shm_note_restart(slot);
	/* Back off if it keeps dying right after start. */
	usec_t up = util_monotonic() - s->started;
	s->restarts = up < USEC_PER_SEC ? s->restarts + 1 : 0;
	if (s->restarts >= 3) {
		struct timeval tv = { 1, 0 };
		if (!s->respawn)
			s->respawn = event_new(sup.base, -1, 0, on_respawn, (void *)(intptr_t)slot);
		event_add(s->respawn, &tv);
		return;
	}
	spawn(slot);
}

static void reap_children(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int i = 0; i < sup.n_slots; i++)
			if (sup.slots[i].pid == pid)
				worker_died(i, status);
	}
}

/* ---- signals ---- */

static void do_reload(bool from_console)
{
	struct config *cfg = NULL;
	struct config_error err;

	if (!from_console)
		log_info("got SIGHUP, re-reading config");
	log_reopen();
	if (sup.staged || sup.apply_pending > 0) {
		log_warning("config reload already in progress, SIGHUP ignored");
		return;
	}
	sdnotify("RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)util_monotonic());
	if (config_load(sup.cfg->conffile, &cfg, &err) < 0) {
		log_error("config reload failed, keeping the old configuration: %s", err.msg);
		sdnotify("READY=1\nSTATUS=reload failed: %s", err.msg);
		answer_askers(true);
		return;
	}
	char kept[400];
	if (config_keep_restart_keys(sup.cfg, cfg, kept, sizeof(kept)) > 0)
		log_warning("config reload: these settings need a restart and keep their running values: %s",
			    kept);
	/* Phase one: every worker loads and checks the file itself and
	 * answers; only when all succeed do they apply it (reload_finish). */
	sup.staged = cfg;
	sup.reload_failed = false;
	sup.reload_pending = 0;
	for (int i = 0; i < sup.n_slots; i++) {
		struct slot *s = &sup.slots[i];
		s->reload_asked = s->ch != NULL;
		s->reload_missed = false;
		sup.reload_pending += s->reload_asked;
	}
	broadcast(IPC_RELOAD, NULL, 0);
	if (sup.reload_pending == 0)
		reload_finish();
}

/* WAIT_FOR_SERVERS ends when no worker has a server in use: then all go
 * together, as one PgBouncer process would. */
static void check_all_ready(void)
{
	int32_t v = SHUTDOWN_IMMEDIATE;
	if (!sup.shutting_down || sup.mode != SHUTDOWN_WAIT_SERVERS)
		return;
	for (int i = 0; i < sup.n_slots; i++)
		if (sup.slots[i].ch && !sup.slots[i].shutdown_ready)
			return;
	sup.mode = SHUTDOWN_IMMEDIATE;
	broadcast(IPC_SHUTDOWN, &v, sizeof(v));
}

static void shutdown_all(enum shutdown_mode mode)
{
	/* A second SIGINT/SIGTERM escalates to immediate, as in PgBouncer. */
	if (sup.shutting_down)
		mode = SHUTDOWN_IMMEDIATE;
	sup.shutting_down = true;
	sup.mode = mode;
	sdnotify("STOPPING=1");
	/* New TCP clients are refused from now (or reach the instances that
	 * share the port); the workers close their copies too. */
	listen_close_tcp(&sup.ls);
	int32_t v = (int32_t)mode;
	broadcast(IPC_SHUTDOWN, &v, sizeof(v));
	if (running_workers() == 0)
		event_base_loopexit(sup.base, NULL);
}

static void on_signal(evutil_socket_t signo, short what, void *arg)
{
	switch (signo) {
	case SIGHUP:
		do_reload(false);
		break;
	case SIGINT:
		log_info("got SIGINT, shutting down, waiting for all servers connections to be released");
		shutdown_all(SHUTDOWN_WAIT_SERVERS);
		break;
	case SIGTERM:
		log_info("got SIGTERM, shutting down, waiting for all clients disconnect");
		shutdown_all(SHUTDOWN_WAIT_CLIENTS);
		break;
	case SIGQUIT:
		log_info("got SIGQUIT, fast exit");
		shutdown_all(SHUTDOWN_IMMEDIATE);
		break;
	case SIGUSR1:
		log_info("got SIGUSR1, pausing all activity");
		broadcast(IPC_PAUSE, NULL, 0);
		break;
	case SIGUSR2:
		if (sup.shutting_down) {
			log_info("got SIGUSR2 while shutting down, ignoring");
			break;
		}
		log_info("got SIGUSR2, continuing");
		broadcast(IPC_RESUME, NULL, 0);
		break;
	case SIGCHLD:
		reap_children();
		break;
	}
}

static void add_signal(int signo)
{
	struct event *ev = evsignal_new(sup.base, signo, on_signal, NULL);
	evsignal_add(ev, NULL);
	sup.sig[sup.n_sig++] = ev;
}

static int worker_count(const struct config *cfg)
{
	if (cfg->workers > 0)
		return cfg->workers;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > SHM_MAX_WORKERS ? SHM_MAX_WORKERS : (int)n;
}

int supervisor_run(const struct run_options *opt, struct config *cfg)
{
	sup.cfg = cfg;
	sup.n_slots = worker_count(cfg);
	char tls_err[512];
	if (worker_check_tls(cfg, tls_err, sizeof(tls_err)) < 0) {
		log_error("TLS setup failed: %s", tls_err);
		config_free(cfg);
		return 1;
	}
	if (shm_create(sup.n_slots, 2 * (uint32_t)cfg->max_pools) < 0 ||
	    hist_create(sup.n_slots, (uint32_t)cfg->max_pools) < 0) {
		log_error("cannot map shared memory for %d workers", sup.n_slots);
		goto fail_shm;
	}
	if (!tls_ticket_keys_init())
		log_warning("TLS session tickets: no shared keys (no random bytes); a client resumes only on the worker that issued its ticket");
	sup.takeover = opt->takeover;
	hold_signals(true);
	int lrc = sup.takeover ? takeover_fetch(cfg->listen_port, sup.n_slots, &sup.ls)
			       : listen_open(&sup.ls, cfg, sup.n_slots);
	if (lrc < 0)
		goto fail_shm;
	signal(SIGPIPE, SIG_IGN);
	sup.base = event_base_new();
	if (!sup.base)
		fatal("event_base_new failed");
	if (!sup.takeover && !serve_control()) {
		/* Like a taken port: another pgcrew serves this listen_port. */
		if (!cfg->so_reuseport) {
			log_error("another pgcrew is running for port %d (pgcrew -R takes it over)", cfg->listen_port);
			goto fail_listen;
		}
		log_warning("so_reuseport: sharing port %d with another pgcrew; -R cannot reach this one",
			    cfg->listen_port);
	}
	static const struct metrics_source metrics_src = {
		.config = supervisor_config, .fanout = supervisor_fanout,
		.ledger_entries = supervisor_ledger_entries,
		.shutting_down = supervisor_shutting_down, .worker_ready = supervisor_worker_ready,
	};
	if (metrics_start(sup.base, cfg, &metrics_src, sup.takeover) < 0)
		goto fail_metrics;
	for (size_t i = 0; i < ARRAY_SIZE(handled_sigs); i++)
		add_signal(handled_sigs[i]);
	hold_signals(false);
	sup.slots = xcalloc((size_t)sup.n_slots, sizeof(*sup.slots));
	sup.ledger = ledger_new(sup.n_slots);
	ledger_set_idle_probe(sup.ledger, hist_pool_idle_any);
	ledger_set_oldest_probe(sup.ledger, hist_pool_idle_oldest);
	ledger_set_movable_probe(sup.ledger, hist_pool_idle_elsewhere);
	ledger_set_evict(sup.ledger, send_evict, pool_has_waiter);
	ledger_set_offer(sup.ledger, offer_evict, evict_on_way);
	ledger_set_count_hook(sup.ledger, publish_count);
	welcome_init();
	sup.sweep = event_new(sup.base, -1, 0, on_sweep, NULL);
	sup.welcome_wait = event_new(sup.base, -1, 0, on_welcome_wait, NULL);
	if (!sup.sweep || !sup.welcome_wait)
		fatal("supervisor: out of memory for its sweep timer");
	list_init(&sup.fans);
	log_info("process up: %s, libevent %s, c-ares, workers=%d", PACKAGE_STRING, event_get_version(), sup.n_slots);
	apply_sched_batch();
	for (int i = 0; i < sup.n_slots; i++)
		spawn(i);
	event_base_dispatch(sup.base);
	reap_children();
	metrics_stop();
	for (int i = 0; i < sup.n_slots; i++) {
		ipc_chan_free(sup.slots[i].ch);
		if (sup.slots[i].respawn)
			event_free(sup.slots[i].respawn);
	}
	for (int i = 0; i < sup.n_sig; i++)
		event_free(sup.sig[i]);
	free(sup.slots);
	takeover_free();
	if (sup.ctl_retry)
		event_free(sup.ctl_retry);
	if (sup.ledger_tick)
		event_free(sup.ledger_tick);
	if (sup.want_pass)
		event_free(sup.want_pass);
	if (sup.busy_ask)
		event_free(sup.busy_ask);
	ledger_free(sup.ledger);
	struct list *it;
	event_free(sup.sweep);
	event_free(sup.welcome_wait);
	welcome_free_all();
	while ((it = list_first(&sup.fans)) != NULL)
		fan_free(container_of(it, struct fan, node));
	config_free(sup.staged);
	listen_close(&sup.ls);
	event_base_free(sup.base);
	config_free(sup.cfg);
	shm_destroy();
	hist_destroy();
	log_info("shutdown complete");
	return 0;

fail_metrics:
	metrics_stop();
	takeover_free();
fail_listen:
	listen_close(&sup.ls);
	event_base_free(sup.base);
fail_shm:
	hold_signals(false);
	shm_destroy();
	hist_destroy();
	config_free(cfg);
	return 1;
}

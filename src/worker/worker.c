/* pgcrew — a worker process: one libevent loop serving clients accepted on
 * its slot's listeners. Orders come from the supervisor over the IPC
 * channel; when that channel closes the supervisor is gone and the worker
 * shuts down rather than run unsupervised. */
#include "worker.h"
#include "proxy_accept.h"
#include "sched_slice.h"
#include "uring.h"
#include "shm.h"
#include "ledger.h"
#include "admin.h"
#include "auth/crypto.h"
#include "auth/authpool.h"
#include "authquery.h"
#include "auth/hba.h"
#include "auth/scram.h"
#include "cancel.h"
#include "client.h"
#include "config.h"
#include "conn_takeover.h"
#include "control.h"
#include "dns.h"
#include "hist.h"
#include "janitor.h"
#include "log.h"
#include "peer.h"
#include "psrelay.h"
#include "reap.h"
#include "pool.h"
#include "server.h"
#include "prepared.h"
#include "server_move.h"
#include "session_ipc.h"
#include "stats.h"
#include "tls.h"
#include "varcache.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static struct world the_worker;
struct world *W;

static void worker_schedule_reap(struct world *w);
static void worker_check_shutdown(struct world *w);
static void worker_refresh_config(struct world *w);

static void reap(evutil_socket_t fd, short what, void *arg)
{
	session_reap(W);
}

static void worker_schedule_reap(struct world *w)
{
	if (w->reaper)
		event_active(w->reaper, EV_TIMEOUT, 0);
}

static void dns_settings_of(const struct config *cfg, struct dns_settings *ds)
{
	*ds = (struct dns_settings){ .max_ttl_usec = cfg->dns_max_ttl,
				     .nxdomain_ttl_usec = cfg->dns_nxdomain_ttl,
				     .resolv_conf = cfg->resolv_conf };
}

/* ---- TLS contexts ---- */

static void tls_settings_client(const struct config *cfg, struct tls_settings *ts)
{
	*ts = (struct tls_settings){
		.sslmode = cfg->client_tls_sslmode, .key_file = cfg->client_tls_key_file,
		.cert_file = cfg->client_tls_cert_file, .ca_file = cfg->client_tls_ca_file,
		.protocols = cfg->client_tls_protocols, .ciphers = cfg->client_tls_ciphers,
		.tls13_ciphers = cfg->client_tls13_ciphers, .ecdhcurve = cfg->client_tls_ecdhcurve,
		.dheparams = cfg->client_tls_dheparams,
		.ask_client_cert = cfg->auth_type == AUTH_CERT || cfg->auth_type == AUTH_HBA,
	};
}

static void tls_settings_server(const struct config *cfg, struct tls_settings *ts)
{
	*ts = (struct tls_settings){
		.sslmode = cfg->server_tls_sslmode, .key_file = cfg->server_tls_key_file,
		.cert_file = cfg->server_tls_cert_file, .ca_file = cfg->server_tls_ca_file,
		.protocols = cfg->server_tls_protocols, .ciphers = cfg->server_tls_ciphers,
		.tls13_ciphers = cfg->server_tls13_ciphers,
	};
}

/* The server-facing context (pgcrew as TLS client); on error keep the old
 * one and say why. */
static void setup_server_tls(const struct config *cfg)
{
	char err[512] = "";
	struct tls_settings ts;

	if (cfg->server_tls_sslmode == SSLMODE_DISABLE) {
		tls_ctx_free(W->server_tls);
		W->server_tls = NULL;
		return;
	}
	tls_settings_server(cfg, &ts);
	struct tls_ctx *ctx = tls_ctx_new_client(&ts, err, sizeof(err));
	if (!ctx) {
		log_error("server TLS setup failed: %s", err);
		return;
	}
	tls_ctx_free(W->server_tls);
	W->server_tls = ctx;
}

/* Start-up check, run by the supervisor before the first fork: both
 * contexts can be built from the configured files. A failure here would
 * otherwise make every worker exit at start, over and over, while the
 * listening sockets queue connections nobody serves. */
int worker_check_tls(const struct config *cfg, char *err, size_t errlen)
{
	struct tls_settings ts;
	struct tls_ctx *ctx;

	if (cfg->client_tls_sslmode != SSLMODE_DISABLE) {
		tls_settings_client(cfg, &ts);
		if (!(ctx = tls_ctx_new_server(&ts, err, errlen)))
			return -1;
		tls_ctx_free(ctx);
	}
	if (cfg->server_tls_sslmode != SSLMODE_DISABLE) {
		tls_settings_server(cfg, &ts);
		if (!(ctx = tls_ctx_new_client(&ts, err, errlen)))
			return -1;
		tls_ctx_free(ctx);
	}
	return 0;
}

/* Build the client-facing context; on error keep the old one (reload). */
static int setup_tls(const struct config *cfg)
{
	char err[512] = "";
	struct tls_settings ts;

	setup_server_tls(cfg);

	if (cfg->client_tls_sslmode == SSLMODE_DISABLE) {
		tls_ctx_free(W->client_tls);
		W->client_tls = NULL;
		return 0;
	}
	tls_settings_client(cfg, &ts);
	struct tls_ctx *ctx = tls_ctx_new_server(&ts, err, sizeof(err));
	if (!ctx) {
		log_error("TLS setup failed: %s", err);
		return -1;
	}
	tls_ctx_free(W->client_tls);
	W->client_tls = ctx;
	if (!tls_ctx_warm_up(ctx))
		log_debug("worker %d: TLS warm-up skipped", W->id);
	return 0;
}

/* ---- shutdown ---- */

static bool servers_busy(void)
{
	struct list *it;
	list_for_each(it, &W->pools) {
		struct pool *p = container_of(it, struct pool, node);
		if (p->n_active || p->n_tested || p->n_canceled)
			return true;
	}
	return false;
}

static void close_everything(void)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &W->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->state != CLIENT_JUSTFREE)
			client_close(c, true, "pooler is shutting down");
	}
	list_for_each_safe(it, tmp, &W->all_servers) {
		struct server *sv = container_of(it, struct server, all_node);
		if (sv->state != SERVER_JUSTFREE)
			server_close(sv, "pooler is shutting down");
	}
}

static void finish(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	/* The Unix socket is one queue for every worker: a connection this
	 * turn would accept after the loop's exit is asked for would die
	 * with the process, unanswered, while a staying worker could serve it. */
	listener_pause(W->listener, true);
	close_everything();
	event_base_loopexit(W->base, NULL);
}

static void worker_check_shutdown(struct world *w)
{
	if (!w->shutting_down)
		return;
	switch (w->shutdown_mode) {
	case SHUTDOWN_IMMEDIATE:
		finish();
		break;
	case SHUTDOWN_WAIT_SERVERS:
		/* Instance-wide, as one PgBouncer: the supervisor ends every
		 * worker once none has a server in use. */
		if (!servers_busy() && !w->shutdown_ready_told) {
			w->shutdown_ready_told = true;
			if (ipc_send_empty(w->sup, IPC_SHUTDOWN_READY) < 0)
				finish();
		}
		break;
	case SHUTDOWN_WAIT_CLIENTS:
		if (w->n_clients == 0)
			finish();
		break;
	case SHUTDOWN_HANDOVER:
		if (w->n_clients == 0 && conn_takeover_last_servers(w))
			finish();
		break;
	}
}

static void start_shutdown(enum shutdown_mode mode)
{
	if (W->shutting_down && mode >= W->shutdown_mode && mode != SHUTDOWN_IMMEDIATE)
		return;
	W->shutting_down = true;
	W->shutdown_mode = mode;
	/* As PgBouncer: TCP listeners close at once, so new clients are
	 * refused (or reach the other instances sharing the port); the Unix
	 * socket stays for the console, unless a new process took it over. */
	listener_stop_tcp(W->listener);
	listen_close_tcp(W->lset);
	if (mode == SHUTDOWN_HANDOVER)
		listener_pause(W->listener, true);
	if (mode == SHUTDOWN_WAIT_SERVERS)
		pool_refuse_waiters(W, "server shutting down");
	if (mode == SHUTDOWN_HANDOVER)
		conn_takeover_start(W);
	worker_check_shutdown(W);
}

/* ---- reload ---- */

/* auth_type = hba: load auth_hba_file (and auth_ident_file) in this worker.
 * Bad lines are skipped with a warning naming file and line, as PgBouncer
 * does; an unreadable file leaves no rules, so every login is refused. */
static void load_hba(const struct config *cfg)
{
	char path[4096], ipath[4096], err[512];
	hba_free(W->hba);
	hba_ident_free(W->hba_ident);
	proxy_accept_free_all();
	W->hba = NULL;
	W->hba_ident = NULL;
	if (cfg->auth_type != AUTH_HBA)
		return;
	if (cfg->auth_ident_file[0]) {
		const char *ip = config_resolve_path(cfg, cfg->auth_ident_file, ipath, sizeof(ipath));
		if (hba_ident_load(ip, &W->hba_ident, err, sizeof(err)) < 0)
			log_warning("%s", err);
		for (size_t i = 0; W->hba_ident && i < hba_ident_problem_count(W->hba_ident); i++)
			log_warning("%s", hba_ident_problem(W->hba_ident, i));
	}
	const char *p = config_resolve_path(cfg, cfg->auth_hba_file, path, sizeof(path));
	if (hba_load(p, W->hba_ident, &W->hba, err, sizeof(err)) < 0) {
		log_error("%s: every login is refused until it can be read", err);
		return;
	}
	for (size_t i = 0; i < hba_problem_count(W->hba); i++)
		log_warning("%s", hba_problem(W->hba, i));
}

/* worker_sched_slice: at start and after every RELOAD or SET. */
static void apply_sched_slice(const struct config *cfg)
{
	switch (sched_slice_set(cfg->worker_sched_slice)) {
	case SLICE_SET:
		break;
	case SLICE_UNSUPPORTED:
		log_debug("worker_sched_slice: this kernel keeps its own slice (custom slices need Linux 6.12)");
		break;
	case SLICE_OTHER_POLICY:
		log_debug("worker_sched_slice: not applied, the worker runs under another scheduling policy");
		break;
	case SLICE_FAILED:
		log_msg_errno(LG_WARNING, "worker_sched_slice: sched_setattr failed");
		break;
	}
}

/* io_uring: the ring is made on first need. A kernel that refuses it
 * leaves the worker on recv/send, said once (by every worker) as a LOG
 * line, not a warning: the setting is on by default, and containers
 * commonly refuse io_uring (Docker's default seccomp profile). */
static void apply_io_uring(const struct config *cfg)
{
	static bool warned;

	if (!cfg->io_uring) {
		stream_set_batching(false);
		return;
	}
	enum uring_verdict v = uring_init();
	if (v == URING_READY) {
		stream_set_batching(true);
		return;
	}
	if (warned)
		return;
	warned = true;
	if (v == URING_NOT_BUILT)
		log_info("io_uring: this pgcrew was built without liburing; using recv/send");
	else if (v == URING_REFUSED)
		log_msg_errno(LG_LOG, "io_uring: the kernel refused a ring (io_uring_disabled, seccomp "
			      "or a kernel before 5.6); using recv/send");
	else
		log_info("io_uring: this kernel's non-blocking receives wait in the ring; using recv/send");
}

/* The loop, with the stream layer's batches at the end of every turn. */
static void run_loop(struct event_base *base)
{
	while (event_base_loop(base, EVLOOP_ONCE) == 0 && !event_base_got_exit(base) &&
	       !event_base_got_break(base))
		stream_turn_end();
	stream_turn_end();
}

/* The current generation changed in place (the console's SET). */
static void retire_servers_for_tls(void);
static bool server_tls_changed_here(const struct config *cfg);

static void worker_refresh_config(struct world *w)
{
	struct config *cfg = w->cfg;
	bool tls_changed = server_tls_changed_here(cfg);
	apply_sched_slice(cfg);
	apply_io_uring(cfg);
	load_hba(cfg);
	(void)proxy_accept_configure(cfg);
	log_verbose = cfg->verbose > log_verbose ? cfg->verbose : log_verbose;
	(void)setup_tls(cfg);
	struct dns_settings ds;
	dns_settings_of(cfg, &ds);
	dns_apply_settings(&ds);
	pool_apply_config(w, cfg);
	authquery_reload();
	if (tls_changed)
		retire_servers_for_tls();
}

static bool same_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool worker_server_tls_changed(const struct config *a, const struct config *b)
{
	struct tls_settings x, y;
	tls_settings_server(a, &x);
	tls_settings_server(b, &y);
	return x.sslmode != y.sslmode || !same_str(x.key_file, y.key_file) ||
	       !same_str(x.cert_file, y.cert_file) || !same_str(x.ca_file, y.ca_file) ||
	       !same_str(x.protocols, y.protocols) || !same_str(x.ciphers, y.ciphers) ||
	       !same_str(x.tls13_ciphers, y.tls13_ciphers);
}

/* The server TLS settings the servers were opened with, as one string:
 * a RELOAD and a console SET (which changes the configuration in place)
 * are compared against it alike. */
static char *applied_server_tls;

static bool server_tls_changed_here(const struct config *cfg)
{
	struct tls_settings t;
	char *now;
	tls_settings_server(cfg, &t);
	if (asprintf(&now, "%d\n%s\n%s\n%s\n%s\n%s\n%s", t.sslmode, t.key_file ? t.key_file : "",
		     t.cert_file ? t.cert_file : "", t.ca_file ? t.ca_file : "",
		     t.protocols ? t.protocols : "", t.ciphers ? t.ciphers : "",
		     t.tls13_ciphers ? t.tls13_ciphers : "") < 0)
		fatal("out of memory");
	bool changed = applied_server_tls && strcmp(applied_server_tls, now) != 0;
	free(applied_server_tls);
	applied_server_tls = now;
	return changed;
}

/* Servers opened under other server TLS settings must not live on with
 * them (a server in plain text after TLS became required): every pool's
 * are retired, as PgBouncer does. A login error cached under the old
 * settings says nothing about the new ones: it goes too. */
static void retire_servers_for_tls(void)
{
	struct list *it;
	log_info("server TLS settings changed: closing server connections made with the old ones");
	list_for_each(it, &W->databases) {
		struct database *db = container_of(it, struct database, node);
		if (!db->admin && !db->dead)
			pool_reconnect_db(db, "database configuration changed");
	}
	pool_forget_login_failures(W);
}

void worker_apply_config(struct config *cfg)
{
	struct config *old = W->cfg;
	W->cfg = cfg;
	worker_refresh_config(W);
	config_free(old);
}

/* Reload, phase one: load and check, keep it staged, tell the supervisor.
 * Phase two (COMMIT or ABORT) comes once every worker has answered, so
 * all workers apply the new file or none does. */
static void stage_reload(void)
{
	struct config *cfg = NULL;
	struct config_error err;
	int32_t status = 0;

	log_reopen();   /* SIGHUP also serves logrotate */
	config_free(W->staged);
	W->staged = NULL;
	if (config_load(W->cfg->conffile, &cfg, &err) < 0) {
		log_error("config reload failed: %s", err.msg);
		status = -1;
	} else {
		char kept[400];     /* the supervisor logs them, once */
		(void)config_keep_restart_keys(W->cfg, cfg, kept, sizeof(kept));
		W->staged = cfg;
	}
	if (ipc_send_i32(W->sup, IPC_RELOAD_DONE, 0, status, -1) < 0)
		log_warning("could not acknowledge reload");
}

static void finish_reload(bool commit)
{
	struct config *cfg = W->staged;
	W->staged = NULL;
	if (commit && cfg)
		worker_apply_config(cfg);
	else
		config_free(cfg);
	if (ipc_send_empty(W->sup, IPC_RELOAD_APPLIED) < 0)
		log_warning("could not tell the supervisor the reload is applied");
}

/* ---- IPC ---- */

static void on_ipc(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload, int fd, void *arg)
{
	int32_t v = 0;
	if (session_ipc(W, hdr, payload, fd))
		return;
	if (fd >= 0)
		close(fd);
	switch (hdr->type) {
	case IPC_RELOAD:
		stage_reload();
		break;
	case IPC_RELOAD_COMMIT:
	case IPC_RELOAD_ABORT:
		finish_reload(hdr->type == IPC_RELOAD_COMMIT);
		break;
	case IPC_ADMIN_RUN:
		admin_remote_run(W, hdr->reqid, payload, hdr->len);
		break;
	case IPC_ADMIN_PART:
		admin_fanout_part(W, hdr->reqid, payload, hdr->len);
		break;
	case IPC_ADMIN_DONE:
		admin_fanout_done(W, hdr->reqid, payload, hdr->len);
		break;
	case IPC_SHUTDOWN:
		if (ipc_get_i32(hdr, payload, &v))
			start_shutdown((enum shutdown_mode)v);
		break;
	case IPC_PAUSE:
		control_pause_all(W);       /* SIGUSR1 */
		break;
	case IPC_RESUME:
		control_resume_all(W);      /* SIGUSR2: after PAUSE or SUSPEND, as in PgBouncer */
		break;
	case IPC_LOG_REOPEN:
		log_reopen();
		break;
	default:
		fatal("ipc: unexpected message %s in worker", ipc_type_name(hdr->type));
	}
}

static void on_ipc_eof(struct ipc_chan *ch, void *arg)
{
	log_warning("supervisor is gone, worker %d shutting down", W->id);
	start_shutdown(SHUTDOWN_IMMEDIATE);
}

/* Live clients of the workers drift apart when they disconnect unevenly
 * (the kernel hashes each connection once). A worker above its share by
 * more than BALANCE_SLACK hands the new socket to the least loaded one. */
#define BALANCE_PERCENT 105
#define BALANCE_SLACK 2

static int pick_lighter_worker(void)
{
	int n = shm_n_workers();
	if (n <= 1 || W->shutting_down)
		return -1;
	int mine = shm_clients_of(W->id), total = 0, least = -1, least_n = 0;
	for (int w = 0; w < n; w++) {
		int k = shm_clients_of(w);
		total += k;
		if (w != W->id && (least < 0 || k < least_n)) {
			least = w;
			least_n = k;
		}
	}
	/* mine/total > share * BALANCE_PERCENT%, compared in integers */
	if ((long)mine * n * 100 <= (long)total * BALANCE_PERCENT + (long)BALANCE_SLACK * n * 100)
		return -1;
	return least_n + BALANCE_SLACK < mine ? least : -1;
}

static void on_accept(int fd, bool is_unix, const struct accepted *how, void *arg)
{
	/* Numbered here, at accept, as PgBouncer numbers its sockets, even
	 * when another worker is to serve it. */
	struct client_fd m = { .target = is_unix ? -1 : pick_lighter_worker(), .id = shm_next_id() };
	if (m.target >= 0) {
		if (ipc_send_client_fd(W->sup, &m, fd) == 0) {
			log_noise("C-%llu: client socket handed to worker %d", (unsigned long long)m.id,
				  (int)m.target);
			close(fd);
			return;
		}
	}
	client_accept(W, fd, is_unix, how, m.id);
}

static void reset_signals(void)
{
	/* Orders arrive over IPC; a terminal's Ctrl-C reaches the whole process
	 * group and must not kill workers behind the supervisor's back. */
	static const int ignored[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE };
	for (size_t i = 0; i < ARRAY_SIZE(ignored); i++)
		signal(ignored[i], SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static void worker_cleanup(void)
{
	reap(-1, 0, NULL);
	peer_free_all();
	dns_shutdown();
	reap(-1, 0, NULL);
	janitor_stop(W);
	stats_stop(W);
	stats_free();
	cancel_free_all();
	control_free();
	authquery_free_all();
	pool_free_all(W);
	authpool_free();
	listener_free(W->listener);
	ipc_chan_free(W->sup);
	event_free(W->reaper);
	tls_ctx_free(W->client_tls);
	tls_ctx_free(W->server_tls);
	free(applied_server_tls);
	applied_server_tls = NULL;
	hba_free(W->hba);
	hba_ident_free(W->hba_ident);
	proxy_accept_free_all();
	stream_cache_free();
	tls_buffers_free();
	uring_free();
	psrelay_free();
	varcache_set_tracked(NULL);
	event_base_free(W->base);
	config_free(W->staged);
	config_free(W->cfg);
	crypto_shutdown();
}

void worker_main(int id, struct config *cfg, int ipc_fd, struct listen_set *ls)
{
	static const struct world_hooks hooks = {
		.schedule_reap = worker_schedule_reap,
		.check_shutdown = worker_check_shutdown,
		.refresh_config = worker_refresh_config,
	};
	W = &the_worker;
	world_init(W, id, &hooks);
	W->cfg = cfg;
	W->lset = ls;
	reset_signals();
	log_set_worker(id);
	apply_sched_slice(cfg);
	shm_attach_worker(id);
	hist_attach_worker(id);
	/* Statement names unique across workers and across respawns of this
	 * slot: a server moves between workers with its statements. */
	ps_set_num_base((uint64_t)id << 40 | (uint64_t)(shm_restarts(id) & 0xff) << 32);
	if (crypto_init() < 0)
		fatal("worker %d: crypto initialisation failed", id);
	if (!crypto_random(W->secret, sizeof(W->secret)))
		fatal("worker %d: no randomness", id);
	if (!scram_warm_up())
		log_warning("worker %d: SCRAM self-check failed", id);
	W->base = event_base_new();
	if (!W->base)
		fatal("worker %d: event_base_new failed", id);
	stream_base = W->base;
	stream_cache_init((uint32_t)cfg->pkt_buf);
	varcache_set_tracked(cfg->track_extra_parameters);
	if (setup_tls(cfg) < 0)
		exit(1);
	(void)server_tls_changed_here(cfg);     /* the settings its servers start with */
	struct dns_settings ds;
	dns_settings_of(cfg, &ds);
	if (dns_init(W->base, &ds) < 0)
		fatal("worker %d: DNS resolver initialisation failed", id);
	admin_register();
	cancel_set_server_done(server_cancels_done);
	cancel_set_waiter_done(client_cancel_done);
	pool_set_mover(server_give);
	pool_apply_config(W, cfg);
	load_hba(cfg);
	(void)proxy_accept_configure(cfg);
	W->reaper = event_new(W->base, -1, 0, reap, NULL);
	W->sup = ipc_chan_new(W->base, ipc_fd, id, on_ipc, on_ipc_eof, NULL);
	W->listener = listener_start(W->base, ls, id, on_accept, NULL);
	control_adopt_mode(W);
	janitor_start(W);
	stats_start(W);
	if (ipc_send_empty(W->sup, IPC_WORKER_READY) < 0)
		fatal("worker %d: cannot talk to the supervisor", id);
	apply_io_uring(cfg);
	log_debug("worker %d started, pid %d", id, (int)getpid());
	run_loop(W->base);
	log_debug("worker %d exiting", id);
	if (!ipc_chan_drain(W->sup, 5000))
		log_warning("worker %d: messages to the supervisor lost at exit", id);
	if (!authpool_stop()) {
		log_info("worker %d: authentication threads still busy, exiting without cleanup", id);
		_exit(0);
	}
	worker_cleanup();
	exit(0);
}

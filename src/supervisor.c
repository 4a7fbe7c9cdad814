/* pgcrew — the supervisor: validates the config, owns every listening
 * socket, forks one worker per slot and respawns a worker that dies, and
 * turns signals into orders for the workers. It never touches client
 * traffic, so a crash of one worker costs only that worker's clients. */
#include "supervisor.h"
#include "build-config.h"
#include "config.h"
#include "ipc.h"
#include "listen.h"
#include "log.h"
#include "util.h"
#include "worker.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct slot {
	pid_t pid;                 /* 0 when not running */
	struct ipc_chan *ch;
	int restarts;              /* quick successive restarts, for backoff */
	usec_t started;
	struct event *respawn;     /* delayed respawn after a crash loop */
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
} sup;

static void broadcast(enum ipc_type type, const void *payload, uint32_t len)
{
	for (int i = 0; i < sup.n_slots; i++)
		if (sup.slots[i].ch && ipc_send(sup.slots[i].ch, type, 0, payload, len, -1) < 0)
			log_warning("could not send %s to worker %d", ipc_type_name(type), i);
}

static int running_workers(void)
{
	int n = 0;
	for (int i = 0; i < sup.n_slots; i++)
		n += sup.slots[i].pid != 0;
	return n;
}

/* ---- worker messages ---- */

static void on_worker_msg(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
			  int fd, void *arg)
{
	int slot = (int)(intptr_t)arg;
	if (fd >= 0)
		close(fd);
	if (hdr->worker != slot)
		fatal("ipc: message claims worker %d on slot %d", hdr->worker, slot);
	switch (hdr->type) {
	case IPC_WORKER_READY:
		log_debug("worker %d ready (pid %d)", slot, (int)sup.slots[slot].pid);
		break;
	case IPC_RELOAD_DONE:
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

static void child_reset_signals(void)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		signal(sigs[i], SIG_DFL);
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
		worker_main(slot, sup.cfg, sp[1], &sup.ls);
	}
	close(sp[1]);
	struct slot *s = &sup.slots[slot];
	s->pid = pid;
	s->started = util_monotonic();
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
	ipc_chan_free(s->ch);
	s->ch = NULL;
	s->pid = 0;
	if (sup.shutting_down) {
		log_debug("worker %d %s", slot, why);
		if (running_workers() == 0)
			event_base_loopexit(sup.base, NULL);
		return;
	}
	log_warning("worker %d (pid %d) %s; restarting it", slot, (int)(s->pid), why);
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

static void do_reload(void)
{
	struct config *cfg = NULL;
	struct config_error err;

	log_info("got SIGHUP, re-reading config");
	log_reopen();
	if (config_load(sup.cfg->conffile, &cfg, &err) < 0) {
		log_error("config reload failed, keeping the old configuration: %s", err.msg);
		return;
	}
	if (config_check_reload(sup.cfg, cfg, &err) < 0) {
		log_error("config reload failed, keeping the old configuration: %s", err.msg);
		config_free(cfg);
		return;
	}
	config_free(sup.cfg);
	sup.cfg = cfg;
	broadcast(IPC_RELOAD, NULL, 0);
}

static void shutdown_all(enum shutdown_mode mode)
{
	/* A second SIGINT/SIGTERM escalates to immediate, as in PgBouncer. */
	if (sup.shutting_down)
		mode = SHUTDOWN_IMMEDIATE;
	sup.shutting_down = true;
	sup.mode = mode;
	int32_t v = (int32_t)mode;
	broadcast(IPC_SHUTDOWN, &v, sizeof(v));
	if (running_workers() == 0)
		event_base_loopexit(sup.base, NULL);
}

static void on_signal(evutil_socket_t signo, short what, void *arg)
{
	switch (signo) {
	case SIGHUP:
		do_reload();
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
	/* Instance-wide limits (pool_size, max_*_connections) need the slot
	 * ledger of the multi-worker design. Until it exists, "auto" means one
	 * worker (PgBouncer's semantics exactly) and an explicit N is honoured
	 * with limits applying per worker. */
	if (cfg->workers <= 0)
		return 1;
	if (cfg->workers > 1)
		log_warning("workers=%d: pool and connection limits currently apply per worker, not instance-wide",
			    cfg->workers);
	return cfg->workers;
}

int supervisor_run(const struct run_options *opt, struct config *cfg)
{
	sup.cfg = cfg;
	sup.n_slots = worker_count(cfg);
	if (listen_open(&sup.ls, cfg, sup.n_slots) < 0) {
		config_free(cfg);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	sup.base = event_base_new();
	if (!sup.base)
		fatal("event_base_new failed");
	static const int sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		add_signal(sigs[i]);
	sup.slots = xcalloc((size_t)sup.n_slots, sizeof(*sup.slots));
	log_info("process up: %s, libevent %s, c-ares, workers=%d", PACKAGE_STRING, event_get_version(), sup.n_slots);
	for (int i = 0; i < sup.n_slots; i++)
		spawn(i);
	event_base_dispatch(sup.base);
	reap_children();
	for (int i = 0; i < sup.n_slots; i++) {
		ipc_chan_free(sup.slots[i].ch);
		if (sup.slots[i].respawn)
			event_free(sup.slots[i].respawn);
	}
	for (int i = 0; i < sup.n_sig; i++)
		event_free(sup.sig[i]);
	free(sup.slots);
	listen_close(&sup.ls);
	event_base_free(sup.base);
	config_free(sup.cfg);
	log_info("shutdown complete");
	return 0;
}

/* pgcrew — the session-core test rig (rig.h): builds a world as worker.c
 * does, minus the supervisor, listeners and DNS (client TLS and the
 * console when the test asks); plays PostgreSQL on a Unix socket and
 * clients on socketpairs; the clock is the tests' fake one (fakeclock.c),
 * which only the test moves. */
#include "rig.h"

#include <errno.h>
#include <stdarg.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "admin.h"
#include "auth/crypto.h"
#include "auth/hba.h"
#include "authquery.h"
#include "cancel.h"
#include "ipc.h"
#include "client.h"
#include "config.h"
#include "control.h"
#include "fakeclock.h"
#include "janitor.h"
#include "log.h"
#include "peer.h"
#include "pool.h"
#include "psrelay.h"
#include "reap.h"
#include "server.h"
#include "server_move.h"
#include "session_ipc.h"
#include "shm.h"
#include "stream.h"
#include "varcache.h"
#include "world.h"

#define RIG_PORT 5432
/* A bound on waits for the pooler's answer, on the real clock: it only
 * turns a hang into a failure (a busy machine may take its time). */
#define WAIT_USEC (10 * USEC_PER_SEC)

static struct world world;
struct world *rig_w;
static char dir[80];
static int pg_listen = -1;
static int tcp_listen = -1;        /* rig_client_tcp's, on 127.0.0.1 */
static struct event *reaper;

/* The supervisor's end of rig_w->sup: what the worker told it. */
#define SUP_LOG 64
static struct ipc_chan *sup_end;
static struct sup_msg {
	int type;
	uint32_t reqid;
	int fd;
	size_t len;
	uint8_t payload[1024];
} sup_log[SUP_LOG];
static int n_sup;
static rig_sup_fn sup_handler;     /* instead of sup_log, when set */

/* The console (rig_setup.console): its fan-outs in flight, by the id the
 * supervisor gave them, with the asking client's request id. */
#define MAX_FANS 16
static bool console;
static struct fan {
	uint32_t id, origin_req;
} fans[MAX_FANS];
static int n_fans;
static uint32_t next_fan;

/* A broken expectation: the message goes to the program's rig_failed(). */
static NORETURN PRINTF(1, 2) void fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rig_failed(msg);
}

#define REQUIRE(cond) do { \
		if (!(cond)) \
			fail("rig: %s:%d: %s (errno: %s)", __FILE__, __LINE__, #cond, strerror(errno)); \
	} while (0)
#define REQUIRE_EQ(a, b) do { \
		long long a_ = (long long)(a), b_ = (long long)(b); \
		if (a_ != b_) \
			fail("rig: %s:%d: %s is %lld, not %lld (errno: %s)", __FILE__, __LINE__, #a, \
			     a_, b_, strerror(errno)); \
	} while (0)

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* The databases text with @PG@ replaced by the fake server's address. */
static void expand(char *out, size_t len, const char *databases)
{
	char pg[128];
	snprintf(pg, sizeof(pg), "host=%s port=%d", dir, RIG_PORT);
	size_t o = 0;
	for (const char *s = databases; *s && o + 1 < len; ) {
		if (strncmp(s, "@PG@", 4) == 0) {
			o += (size_t)snprintf(out + o, len - o, "%s", pg);
			s += 4;
		} else {
			out[o++] = *s++;
		}
	}
	out[o < len ? o : len - 1] = 0;
}

static void listen_pg(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.s.PGSQL.%d", dir, RIG_PORT);
	pg_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	REQUIRE(pg_listen >= 0);
	REQUIRE_EQ(bind(pg_listen, (struct sockaddr *)&sa, sizeof(sa)), 0);
	REQUIRE_EQ(listen(pg_listen, 64), 0);
}

static void schedule_reap(struct world *w)
{
	(void)w;
	event_active(reaper, EV_TIMEOUT, 0);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	session_reap(rig_w);
}

/* A file of the world's directory: its path in path; removed by rig_stop. */
static void dir_file(char *path, size_t len, const char *name, const char *text)
{
	snprintf(path, len, "%s/%s", dir, name);
	if (text)
		write_file(path, text);
}

static struct config *load_config(const struct rig_setup *s)
{
	char ini[8192], dbs[4096], path[128], ul[128], hba[160] = "";
	struct config *cfg = NULL;
	struct config_error err;
	dir_file(ul, sizeof(ul), "userlist.txt",
		 s->userlist ? s->userlist : "\"alice\" \"secret\"\n\"bob\" \"hunter2\"\n");
	if (s->hba) {
		dir_file(path, sizeof(path), "hba.conf", s->hba);
		snprintf(hba, sizeof(hba), "auth_hba_file = %s\n", path);
	}
	expand(dbs, sizeof(dbs), s->databases);
	snprintf(ini, sizeof(ini),
		 "[databases]\n%s\n[pgbouncer]\nauth_type = trust\nauth_file = %s\n%s"
		 "server_tls_sslmode = disable\nlogfile =\n%s\n", dbs, ul, hba, s->settings);
	dir_file(path, sizeof(path), "rig.ini", ini);
	if (config_load(path, &cfg, &err) < 0)
		fail("rig config: %s", err.msg);
	return cfg;
}

/* auth_type = hba: the rules, as the worker loads them (no ident map). */
static void load_hba(const struct rig_setup *s)
{
	char path[128], err[512];
	if (!s->hba)
		return;
	dir_file(path, sizeof(path), "hba.conf", NULL);
	if (hba_load(path, NULL, &rig_w->hba, err, sizeof(err)) < 0)
		fail("rig hba: %s", err);
}

static void on_sup_msg(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
		       int fd, void *arg)
{
	(void)ch;
	(void)arg;
	if (sup_handler) {
		sup_handler(hdr->type, hdr->reqid, payload, hdr->len, fd);
		return;
	}
	if (console && rig_sup_console(hdr->type, hdr->reqid, payload, hdr->len)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (n_sup == SUP_LOG) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct sup_msg *m = &sup_log[n_sup++];
	m->type = (int)hdr->type;
	m->reqid = hdr->reqid;
	m->fd = fd;
	m->len = hdr->len < sizeof(m->payload) ? hdr->len : sizeof(m->payload);
	if (m->len)
		memcpy(m->payload, payload, m->len);
}

/* The console's part of what the worker loop does with the supervisor's
 * messages (worker.c on_ipc); false for the others. */
static bool console_ipc(const struct ipc_hdr *hdr, const void *payload)
{
	if (!console)
		return false;
	switch (hdr->type) {
	case IPC_ADMIN_RUN:
		admin_remote_run(rig_w, hdr->reqid, payload, hdr->len);
		return true;
	case IPC_ADMIN_PART:
		admin_fanout_part(rig_w, hdr->reqid, payload, hdr->len);
		return true;
	case IPC_ADMIN_DONE:
		admin_fanout_done(rig_w, hdr->reqid, payload, hdr->len);
		return true;
	default:
		return false;
	}
}

/* What the worker loop does with the supervisor's messages, for those
 * the session layer takes and, with the console, the console's; the rest
 * (reload, shutdown) are not the rig's business. */
static void on_worker_msg(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
			  int fd, void *arg)
{
	(void)ch;
	(void)arg;
	if (session_ipc(rig_w, hdr, payload, fd))
		return;
	if (fd >= 0)
		close(fd);
	(void)console_ipc(hdr, payload);
}

static void open_sup_channel(void)
{
	int sv[2];
	/* Message boundaries kept, as the supervisor's channels have them. */
	REQUIRE_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	rig_w->sup = ipc_chan_new(rig_w->base, sv[0], 0, on_worker_msg, NULL, NULL);
	sup_end = ipc_chan_new(rig_w->base, sv[1], -1, on_sup_msg, NULL, NULL);
	REQUIRE(rig_w->sup != NULL);
	REQUIRE(sup_end != NULL);
	n_sup = 0;
}

int rig_sup_count(int type)
{
	rig_pump();
	int n = 0;
	for (int i = 0; i < n_sup; i++)
		n += sup_log[i].type == type;
	return n;
}

static const struct sup_msg *sup_last(int type)
{
	rig_pump();
	for (int i = n_sup - 1; i >= 0; i--)
		if (sup_log[i].type == type)
			return &sup_log[i];
	fail("rig: the worker sent no %s", ipc_type_name((enum ipc_type)type));
	return NULL;
}

size_t rig_sup_last(int type, uint32_t *reqid, void *payload, size_t len)
{
	const struct sup_msg *m = sup_last(type);
	if (reqid)
		*reqid = m->reqid;
	if (payload)
		memcpy(payload, m->payload, m->len < len ? m->len : len);
	return m->len;
}

int rig_sup_last_at(int type)
{
	rig_pump();
	for (int i = n_sup - 1; i >= 0; i--)
		if (sup_log[i].type == type)
			return i;
	return -1;
}

int rig_sup_last_fd(int type)
{
	return sup_last(type)->fd;
}

void rig_sup_send(int type, uint32_t reqid, const void *payload, size_t len)
{
	REQUIRE(rig_sup_post(type, reqid, payload, len, -1));
	rig_pump();
}

bool rig_sup_post(int type, uint32_t reqid, const void *payload, size_t len, int fd)
{
	return ipc_send(sup_end, (enum ipc_type)type, reqid, payload, (uint32_t)len, fd) == 0;
}

void rig_sup_handler(rig_sup_fn fn)
{
	sup_handler = fn;
}

static void console_done(uint32_t reqid, const char *err)
{
	(void)rig_sup_post(IPC_ADMIN_DONE, reqid, err, strlen(err) + 1, -1);
}

static struct fan *find_fan(uint32_t id)
{
	for (int i = 0; i < n_fans; i++)
		if (fans[i].id == id)
			return &fans[i];
	return NULL;
}

/* A command for every worker goes to worker 0 (the only one the rig
 * runs) under a fan-out id of its own. */
static void console_request(uint32_t reqid, const void *payload, size_t len)
{
	struct ipc_hdr h = { .type = IPC_ADMIN_REQ, .len = (uint32_t)len, .reqid = reqid };
	const char *text;
	if (!ipc_get_text(&h, payload, &text))
		return;
	if (strcmp(text, ADMIN_RELOAD_REQ) == 0 || n_fans == MAX_FANS) {
		console_done(reqid, n_fans == MAX_FANS ? "too many console commands at once" : "");
		return;
	}
	fans[n_fans] = (struct fan){ .id = ++next_fan, .origin_req = reqid };
	(void)rig_sup_post(IPC_ADMIN_RUN, fans[n_fans++].id, payload, len, -1);
}

/* Worker 0 answered: "?..." is "not here" (no such database in this
 * worker), an error only when no worker had it, as fan_finish() has it. */
static void console_answered(struct fan *f, const void *payload, size_t len)
{
	const char *err = len > 0 && ((const char *)payload)[len - 1] == 0 ? payload : "";
	if (*err == '?')         /* "?" or "??" (control.h) */
		err = shm_n_workers() > 1 ? "" : err + (err[1] == '?' ? 2 : 1);
	console_done(f->origin_req, err);
	*f = fans[--n_fans];
}

bool rig_sup_console(int type, uint32_t reqid, const void *payload, size_t len)
{
	struct fan *f;
	switch (type) {
	case IPC_ADMIN_REQ:
		console_request(reqid, payload, len);
		return true;
	case IPC_ADMIN_PART:
		if ((f = find_fan(reqid)) != NULL)
			(void)rig_sup_post(IPC_ADMIN_PART, f->origin_req, payload, len, -1);
		return true;
	case IPC_ADMIN_DONE:
		if ((f = find_fan(reqid)) != NULL)
			console_answered(f, payload, len);
		return true;
	default:
		return false;
	}
}

void rig_start(const char *settings, const char *databases)
{
	rig_start_workers(1, settings, databases);
}

void rig_start_workers(int n, const char *settings, const char *databases)
{
	struct rig_setup s = { .workers = n, .settings = settings, .databases = databases };
	rig_start_with(&s);
}

void rig_start_with(const struct rig_setup *s)
{
	static const struct world_hooks hooks = { .schedule_reap = schedule_reap };
	snprintf(dir, sizeof(dir), "%s/pgcrew-rig-XXXXXX", s->tmp ? s->tmp : "/tmp");
	REQUIRE(mkdtemp(dir) != NULL);
	rig_w = &world;
	world_init(rig_w, 0, &hooks);
	rig_w->cfg = load_config(s);
	load_hba(s);
	REQUIRE_EQ(shm_create(s->workers, 2 * (uint32_t)rig_w->cfg->max_pools), 0);
	shm_attach_worker(0);
	REQUIRE_EQ(crypto_init(), 0);
	REQUIRE(crypto_random(rig_w->secret, sizeof(rig_w->secret)));
	rig_w->base = event_base_new();
	REQUIRE(rig_w->base != NULL);
	rig_w->client_tls = s->client_tls;
	stream_base = rig_w->base;
	stream_cache_init((uint32_t)rig_w->cfg->pkt_buf);
	varcache_set_tracked(rig_w->cfg->track_extra_parameters);
	cancel_set_server_done(server_cancels_done);
	cancel_set_waiter_done(client_cancel_done);
	pool_set_mover(server_give);
	console = s->console;
	n_fans = 0;
	if (console)
		admin_register();
	pool_apply_config(rig_w, rig_w->cfg);
	reaper = event_new(rig_w->base, -1, 0, on_reap, NULL);
	open_sup_channel();
	listen_pg();
}

void rig_reload(const struct rig_setup *s)
{
	struct config *old = rig_w->cfg, *cfg = load_config(s);
	char kept[400];
	(void)config_keep_restart_keys(old, cfg, kept, sizeof(kept));
	rig_w->cfg = cfg;
	hba_free(rig_w->hba);
	rig_w->hba = NULL;
	load_hba(s);
	pool_apply_config(rig_w, cfg);
	authquery_reload();
	config_free(old);
}

/* Loop turns as the worker runs them, each followed by the stream layer's
 * end of turn. With io_uring batches on (a fuzz target's choice), a turn
 * is one round of callbacks as in worker.c's run_loop (EVLOOP_ONCE): a
 * readable socket's callback only gathers it for the turn's end, so a
 * loop that ran until nothing was ready would never end. */
void rig_pump(void)
{
	bool once = stream_batching();
	for (int i = 0; i < (once ? 16 : 4); i++) {
		event_base_loop(rig_w->base, once ? EVLOOP_ONCE | EVLOOP_NONBLOCK : EVLOOP_NONBLOCK);
		stream_turn_end();        /* the worker's loop does so after every turn */
	}
}

static void remove_dir(void)
{
	static const char *const names[] = { "userlist.txt", "hba.conf", "rig.ini" };
	char path[128];
	snprintf(path, sizeof(path), "%s/.s.PGSQL.%d", dir, RIG_PORT);
	unlink(path);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		dir_file(path, sizeof(path), names[i], NULL);
		unlink(path);
	}
	rmdir(dir);
}

/* Everything closed and reaped: nothing may still be counted anywhere. */
static void check_closed(void)
{
	char why[256];
	if (!rig_consistent(why, sizeof(why)))
		fail("rig: after closing everything: %s", why);
	if (rig_w->n_clients != 0 || shm_clients_of(0) != 0)
		fail("rig: after closing everything: %d clients counted", rig_w->n_clients);
}

void rig_stop(void)
{
	struct list *it, *tmp;
	list_for_each_safe(it, tmp, &rig_w->all_clients)
		client_close(container_of(it, struct client, all_node), false, "test over");
	list_for_each_safe(it, tmp, &rig_w->all_servers)
		server_close(container_of(it, struct server, all_node), "test over");
	session_reap(rig_w);
	peer_free_all();
	session_reap(rig_w);
	check_closed();
	if (console) {
		client_set_console(NULL);
		control_free();
		console = false;
	}
	rig_w->client_tls = NULL;        /* the test's */
	cancel_free_all();
	authquery_free_all();
	pool_free_all(rig_w);
	event_free(reaper);
	ipc_chan_free(rig_w->sup);
	ipc_chan_free(sup_end);
	for (int i = 0; i < n_sup; i++)
		if (sup_log[i].fd >= 0)
			close(sup_log[i].fd);
	n_sup = 0;
	stream_cache_free();
	psrelay_free();
	varcache_set_tracked(NULL);
	event_base_free(rig_w->base);
	config_free(rig_w->cfg);
	shm_destroy();
	crypto_shutdown();
	hba_free(rig_w->hba);
	close(pg_listen);
	if (tcp_listen >= 0)
		close(tcp_listen);
	tcp_listen = -1;
	sup_handler = NULL;
	remove_dir();
	rig_w = NULL;
}

int rig_teardown(void **state)
{
	(void)state;
	if (rig_w)
		rig_stop();
	return 0;
}

/* ---- waiting on the test's ends ---- */

static bool readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	return poll(&pfd, 1, 1) > 0;
}

static void wait_readable(int fd, const char *what)
{
	usec_t until = fakeclock_real() + WAIT_USEC;
	for (;;) {
		rig_pump();
		if (readable(fd))
			return;
		if (fakeclock_real() > until)
			fail("rig: nothing from %s within 10 s", what);
	}
}

bool rig_pg_try_accept(struct peer *p)
{
	/* poll first: a failing accept4 costs the kernel a whole socket. */
	struct pollfd pfd = { .fd = pg_listen, .events = POLLIN };
	if (poll(&pfd, 1, 0) != 1)
		return false;
	int fd = accept4(pg_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return false;
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->pooler_fd = -1;
	return true;
}

bool rig_pg_pending(void)
{
	rig_pump();
	return readable(pg_listen);
}

void rig_pg_accept(struct peer *p)
{
	wait_readable(pg_listen, "the pooler: no server connection");
	memset(p, 0, sizeof(*p));
	p->fd = accept4(pg_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	REQUIRE(p->fd >= 0);
	p->pooler_fd = -1;
}

/* Fill the buffer from the socket without blocking; false at EOF. */
static bool fill(struct peer *p)
{
	if (p->len == sizeof(p->buf))
		return true;
	ssize_t n = recv(p->fd, p->buf + p->len, sizeof(p->buf) - p->len, MSG_DONTWAIT);
	if (n > 0)
		p->len += (size_t)n;
	if (n >= 0)
		return n > 0;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

uint32_t rig_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* A whole message at the front of the buffer (typed or startup): moved to m. */
static bool take(struct peer *p, struct msg *m, bool typed)
{
	size_t hdr = typed ? 5 : 4;
	if (p->len < hdr)
		return false;
	uint32_t len = rig_be32(p->buf + hdr - 4);
	REQUIRE(len >= 4 && len - 4 <= sizeof(m->body));
	if (p->len < hdr + len - 4)
		return false;
	m->type = typed ? (char)p->buf[0] : 0;
	m->len = len - 4;
	memcpy(m->body, p->buf + hdr, m->len);
	p->len -= hdr + m->len;
	memmove(p->buf, p->buf + hdr + m->len, p->len);
	return true;
}

static void read_msg(struct peer *p, struct msg *m, bool typed)
{
	usec_t until = fakeclock_real() + WAIT_USEC;
	while (!take(p, m, typed)) {
		rig_pump();
		if (!fill(p))
			fail("rig: peer closed while a message was expected");
		if (take(p, m, typed))
			return;
		if (fakeclock_real() > until)
			fail("rig: no whole message within 10 s");
		(void)readable(p->fd);
	}
}

void rig_read(struct peer *p, struct msg *m)
{
	read_msg(p, m, true);
}

void rig_read_startup(struct peer *p, struct msg *m)
{
	read_msg(p, m, false);
}

void rig_expect(struct peer *p, char type, struct msg *m)
{
	struct msg local;
	if (!m)
		m = &local;
	rig_read(p, m);
	if (m->type != type)
		fail("rig: expected '%c', got '%c' (%s)", type, m->type,
			 m->type == 'E' ? rig_field(m, 'M') : "");
}

void rig_expect_nothing(struct peer *p)
{
	for (int i = 0; i < 5; i++) {
		rig_pump();
		REQUIRE(fill(p));
	}
	REQUIRE_EQ(p->len, 0);
}

void rig_expect_eof(struct peer *p, char *err, size_t errlen)
{
	usec_t until = fakeclock_real() + WAIT_USEC;
	struct msg m;
	if (err)
		err[0] = 0;
	for (;;) {
		rig_pump();
		while (take(p, &m, true))
			if (m.type == 'E' && err)
				snprintf(err, errlen, "%s", rig_field(&m, 'M'));
		if (!fill(p))
			return;      /* EOF; a partial message before it is dropped */
		if (fakeclock_real() > until)
			fail("rig: the pooler did not close within 10 s");
		(void)readable(p->fd);
	}
}

void rig_close(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	rig_pump();
}

const char *rig_field(const struct msg *m, char code)
{
	size_t i = 0;
	while (i < m->len && m->body[i]) {
		char c = (char)m->body[i++];
		const char *v = (const char *)m->body + i;
		size_t vl = strnlen(v, m->len - i);
		if (c == code)
			return v;
		i += vl + 1;
	}
	return "";
}

/* ---- sending ---- */

void rig_send(struct peer *p, char type, const void *body, size_t len)
{
	uint8_t buf[8192];
	size_t o = 0;
	REQUIRE(len + 5 <= sizeof(buf));
	if (type)
		buf[o++] = (uint8_t)type;
	uint32_t l = (uint32_t)len + 4;
	buf[o++] = (uint8_t)(l >> 24);
	buf[o++] = (uint8_t)(l >> 16);
	buf[o++] = (uint8_t)(l >> 8);
	buf[o++] = (uint8_t)l;
	if (len)
		memcpy(buf + o, body, len);
	REQUIRE_EQ(send(p->fd, buf, o + len, MSG_NOSIGNAL), (ssize_t)(o + len));
	rig_pump();
}

void rig_send_query(struct peer *p, const char *sql)
{
	rig_send(p, 'Q', sql, strlen(sql) + 1);
}

void rig_send_done(struct peer *p, const char *tag, char status)
{
	rig_send(p, 'C', tag, strlen(tag) + 1);
	rig_send(p, 'Z', &status, 1);
}

static size_t put_pair(uint8_t *b, size_t o, const char *k, const char *v)
{
	size_t kl = strlen(k) + 1, vl = strlen(v) + 1;
	memcpy(b + o, k, kl);
	memcpy(b + o + kl, v, vl);
	return o + kl + vl;
}

void rig_put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

/* The server's side of a login: the pooler asks for protocol 3.2 (our
 * default); a server of `minor` answers NegotiateProtocolVersion first
 * when it speaks less, as PostgreSQL before 18 does. */
static void pg_login(struct peer *p, int minor, const struct cancelkey *k)
{
	static const char *const params[][2] = {
		{ "server_version", "15.0" }, { "server_encoding", "UTF8" },
		{ "client_encoding", "UTF8" }, { "DateStyle", "ISO, MDY" },
		{ "TimeZone", "UTC" }, { "integer_datetimes", "on" },
		{ "standard_conforming_strings", "on" }, { "application_name", "" },
	};
	struct msg m;
	uint8_t b[8 + CANCELKEY_MAX];
	rig_read_startup(p, &m);
	REQUIRE_EQ(rig_be32(m.body) >> 16, 3);
	uint32_t asked = rig_be32(m.body) & 0xffff;
	if (asked > (uint32_t)minor) {
		rig_put32(b, 3u << 16 | (uint32_t)minor);
		rig_put32(b + 4, 0);
		rig_send(p, 'v', b, 8);
	}
	rig_put32(b, 0);
	rig_send(p, 'R', b, 4);
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		size_t n = put_pair(b, 0, params[i][0], params[i][1]);
		rig_send(p, 'S', b, n);
	}
	rig_put32(b, k->pid);
	memcpy(b + 4, k->secret, k->len);
	rig_send(p, 'K', b, 4 + k->len);
	rig_send(p, 'Z', "I", 1);
}

void rig_pg_login(struct peer *p, uint32_t pid, uint32_t key)
{
	struct cancelkey k = { .pid = pid, .len = 4 };
	rig_put32(k.secret, key);
	pg_login(p, 0, &k);
}

void rig_pg_login_key(struct peer *p, int minor, const struct cancelkey *k)
{
	pg_login(p, minor, k);
}

void rig_client_raw(struct peer *p)
{
	int sv[2];
	memset(p, 0, sizeof(*p));
	REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	REQUIRE_EQ(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	client_accept(rig_w, sv[0], true, NULL, 0);
	p->fd = sv[1];
	p->pooler_fd = sv[0];
}

static void listen_tcp(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	tcp_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(tcp_listen >= 0);
	REQUIRE_EQ(bind(tcp_listen, (struct sockaddr *)&sa, sizeof(sa)), 0);
	REQUIRE_EQ(listen(tcp_listen, 16), 0);
}

/* A blocking connect that a signal interrupts (libFuzzer's timers) goes on
 * by itself: wait for it. */
static bool connected(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t el = sizeof(err);
	if (connect(fd, sa, len) == 0)
		return true;
	if (errno != EINTR)
		return false;
	while (poll(&pfd, 1, -1) < 0)
		if (errno != EINTR)
			return false;
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0;
}

void rig_client_tcp(struct peer *p)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	if (tcp_listen < 0)
		listen_tcp();
	REQUIRE_EQ(getsockname(tcp_listen, (struct sockaddr *)&sa, &len), 0);
	/* Closed with a reset, so that no TIME_WAIT is left on either side: a
	 * fuzzer making thousands of these a second would run out of ports. */
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	memset(p, 0, sizeof(*p));
	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(p->fd >= 0);
	REQUIRE_EQ(setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	REQUIRE(connected(p->fd, (struct sockaddr *)&sa, len));
	do
		p->pooler_fd = accept4(tcp_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	while (p->pooler_fd < 0 && errno == EINTR);
	REQUIRE(p->pooler_fd >= 0);
	client_accept(rig_w, p->pooler_fd, false, NULL, 0);
}

void rig_send_startup(struct peer *p, const char *user, const char *db)
{
	rig_send_startup_with(p, user, db, NULL);
}

void rig_send_startup_with(struct peer *p, const char *user, const char *db,
			   const char *const *extra)
{
	rig_send_startup_v(p, 0, user, db, extra);
}

void rig_send_startup_v(struct peer *p, int minor, const char *user, const char *db,
			const char *const *extra)
{
	uint8_t b[1024];
	rig_put32(b, 196608u | (uint32_t)minor);
	size_t n = put_pair(b, 4, "user", user);
	n = put_pair(b, n, "database", db);
	for (size_t i = 0; extra && extra[i] && extra[i + 1]; i += 2) {
		REQUIRE(n + strlen(extra[i]) + strlen(extra[i + 1]) + 3 < sizeof(b));
		n = put_pair(b, n, extra[i], extra[i + 1]);
	}
	b[n++] = 0;
	rig_send(p, 0, b, n);
}

void rig_client(struct peer *p, const char *user, const char *db)
{
	rig_client_raw(p);
	rig_send_startup(p, user, db);
}

void rig_client_welcome_key(struct peer *p, struct cancelkey *k)
{
	struct msg m;
	rig_expect(p, 'R', &m);
	REQUIRE_EQ(rig_be32(m.body), 0);
	for (;;) {
		rig_read(p, &m);
		if (m.type == 'S')
			continue;
		if (m.type == 'K') {
			REQUIRE(m.len >= 8 && m.len <= 4 + CANCELKEY_MAX);
			if (k) {
				k->pid = rig_be32(m.body);
				k->len = (uint16_t)(m.len - 4);
				memcpy(k->secret, m.body + 4, k->len);
			}
			continue;
		}
		if (m.type != 'Z')
			fail("rig: welcome: unexpected '%c' %s", m.type, rig_field(&m, 'M'));
		return;
	}
}

void rig_client_welcome(struct peer *p, uint32_t *pid, uint32_t *key)
{
	struct cancelkey k = { 0 };
	rig_client_welcome_key(p, &k);
	if (pid)
		*pid = k.pid;
	if (key)
		*key = rig_be32(k.secret);
}

void rig_login(struct peer *c)
{
	rig_client(c, "alice", "db");
	rig_client_welcome(c, NULL, NULL);
}

void rig_login_first(struct peer *c, struct peer *pg, uint32_t pid)
{
	rig_client(c, "alice", "db");
	rig_pg_accept(pg);
	rig_pg_login(pg, pid, pid + 1);
	rig_client_welcome(c, NULL, NULL);
}

void rig_round_trip(struct peer *c, struct peer *pg, const char *sql, char status)
{
	struct msg m;
	rig_send_query(c, sql);
	rig_expect(pg, 'Q', &m);
	REQUIRE(strcmp((const char *)m.body, sql) == 0);
	rig_send_done(pg, "SELECT 1", status);
	rig_expect(c, 'C', NULL);
	rig_expect(c, 'Z', &m);
	REQUIRE_EQ(m.body[0], status);
}

struct client *rig_client_of(const struct peer *p)
{
	struct list *it;
	list_for_each(it, &rig_w->all_clients) {
		struct client *c = container_of(it, struct client, all_node);
		if (c->s.fd == p->pooler_fd && c->state != CLIENT_JUSTFREE)
			return c;
	}
	return NULL;
}

struct pool *rig_pool(const char *db, const char *user)
{
	struct pool *pl = pool_find_names(rig_w, db, user);
	REQUIRE(pl != NULL);
	return pl;
}

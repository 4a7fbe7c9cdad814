/* pgcrew — the session fuzz target's fake supervisor, for a world that is
 * worker 0 of 2: the real slot ledger (src/sup/ledger.c) decides on slot
 * requests, releases, withdrawals and offered idle servers as the
 * supervisor does; the pools' welcome parameters are kept and shared.
 * Worker 1 is a phantom the input moves: it asks for slots and gives them
 * back, reports failed logins and forwards cancels. Answers go at once, or
 * wait for the input to deliver them ("hold"). Console fan-outs go through
 * the rig's (rig_sup_console). */
#include "fuzz_session.h"
#include "rig.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "handover.h"
#include "ipc.h"
#include "ledger.h"
#include "util.h"
#include "varcache.h"
#include "config.h"
#include "world.h"

#define MAX_HELD 16
#define HELD_PAYLOAD 2048
#define MAX_WELCOMES 4

struct held {
	int type;
	uint32_t reqid;
	size_t len;
	int fd;
	uint8_t payload[HELD_PAYLOAD];
};

static struct ledger *ledger;
static bool hold;
static struct held held[MAX_HELD];
static int n_held;
static struct welcome {
	size_t len;
	uint8_t data[HELD_PAYLOAD];     /* names (2 * LEDGER_NAME), then parameters */
} welcomes[MAX_WELCOMES];
static int n_welcomes;
static uint32_t phantom_reqid;

/* ---- to worker 0 ---- */

static void post(int type, uint32_t reqid, const void *payload, size_t len, int fd)
{
	if (hold && n_held < MAX_HELD && len <= HELD_PAYLOAD) {
		struct held *h = &held[n_held++];
		h->type = type;
		h->reqid = reqid;
		h->len = len;
		h->fd = fd >= 0 ? dup(fd) : -1;
		memcpy(h->payload, payload, len);
		return;
	}
	(void)rig_sup_post(type, reqid, payload, len, fd);
}

static void deliver(int n)
{
	int i;
	for (i = 0; i < n && i < n_held; i++) {
		struct held *h = &held[i];
		(void)rig_sup_post(h->type, h->reqid, h->payload, h->len, h->fd);
		if (h->fd >= 0)
			close(h->fd);
	}
	n_held -= i;
	memmove(held, held + i, (size_t)n_held * sizeof(held[0]));
}

static void want_told(int worker, const struct pool_want *w, void *arg)
{
	(void)arg;
	if (worker == 0)
		post(IPC_POOL_WANT, 0, w, sizeof(*w), -1);
}

/* After anything that frees slots: grants that now fit, asks refreshed. */
static void settle(void)
{
	struct slot_req r;
	uint32_t reqid;
	int w;
	while (ledger_next_grant(ledger, &w, &reqid, &r))
		if (w == 0)
			post(IPC_SLOT_GRANT, reqid, &r, sizeof(r), -1);
	ledger_want_changes(ledger, want_told, NULL);
}

/* ---- from worker 0 ---- */

static void on_slot(int type, uint32_t reqid, const struct slot_req *r)
{
	if (type == IPC_SLOT_RELEASE) {
		(void)ledger_release(ledger, 0, r->db, r->user);
	} else if (type == IPC_SLOT_WITHDRAW) {
		bool queued = ledger_withdraw(ledger, 0, r->db, r->user, reqid);
		post(IPC_SLOT_DENY, queued ? reqid : IPC_SLOT_NOT_QUEUED, r, sizeof(*r), -1);
	} else {
		switch (ledger_request(ledger, 0, reqid, r)) {
		case LEDGER_GRANTED: post(IPC_SLOT_GRANT, reqid, r, sizeof(*r), -1); break;
		case LEDGER_DENIED: post(IPC_SLOT_DENY, reqid, r, sizeof(*r), -1); break;
		case LEDGER_QUEUED: break;
		}
	}
	settle();
}

static struct welcome *find_welcome(const void *key)
{
	for (int i = 0; i < n_welcomes; i++)
		if (memcmp(welcomes[i].data, key, 2 * LEDGER_NAME) == 0)
			return &welcomes[i];
	return NULL;
}

static void on_welcome(int type, const void *payload, size_t len)
{
	if (len < 2 * LEDGER_NAME)
		return;
	struct welcome *w = find_welcome(payload);
	if (type == IPC_WELCOME_GET) {
		if (w)
			post(IPC_WELCOME, 0, w->data, w->len, -1);
		else
			post(IPC_WELCOME, 0, payload, 2 * LEDGER_NAME, -1);
		return;
	}
	if (!w && n_welcomes < MAX_WELCOMES)
		w = &welcomes[n_welcomes++];
	if (w && len <= HELD_PAYLOAD) {
		w->len = len;
		memcpy(w->data, payload, len);
	}
}

/* An idle server offered: to the phantom (closed: it would serve its
 * clients there), or back to worker 0 to keep or close. */
static void on_server(uint32_t reqid, const void *payload, size_t len, int fd)
{
	char db[LEDGER_NAME], user[LEDGER_NAME];
	int to = 0;
	uint32_t back = 0;
	(void)reqid;
	if (fd < 0 || !handover_names(payload, len, db, user))
		goto done;
	switch (ledger_handover(ledger, 0, db, user, NULL, NULL, &to, &back)) {
	case LEDGER_MOVE_TO:
		if (to == 0)
			post(IPC_SERVER_FD, back ? back : IPC_SERVER_UNASKED, payload, len, fd);
		break;
	case LEDGER_MOVE_CLOSE:
		post(IPC_SERVER_FD, IPC_SERVER_BACK_CLOSE, payload, len, fd);
		break;
	case LEDGER_MOVE_KEEP:
		post(IPC_SERVER_FD, IPC_SERVER_BACK_KEEP, payload, len, fd);
		break;
	}
	ledger_retell(ledger, 0, db, user);
	ledger_want_changes(ledger, want_told, NULL);
done:
	if (fd >= 0)
		close(fd);
}

static void on_worker_msg(int type, uint32_t reqid, const void *payload, size_t len, int fd)
{
	struct ipc_hdr h = { .type = (uint16_t)type, .len = (uint32_t)len, .reqid = reqid };
	struct slot_req r;
	/* Console commands for every worker: the rig's fan-out, the phantom
	 * answering with no rows (a world without the console sends none). */
	if (rig_sup_console(type, reqid, payload, len)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	switch (type) {
	case IPC_SLOT_REQ:
	case IPC_SLOT_RELEASE:
	case IPC_SLOT_WITHDRAW:
		if (ipc_get_slot(&h, payload, &r))
			on_slot(type, reqid, &r);
		break;
	case IPC_WELCOME_GET:
	case IPC_WELCOME_PUT:
		on_welcome(type, payload, len);
		break;
	case IPC_SERVER_FD:
		on_server(reqid, payload, len, fd);
		return;
	default:                   /* login failures, cancels: for worker 1 */
		break;
	}
	if (fd >= 0)
		close(fd);
}

/* ---- the phantom worker 1 ---- */

static void phantom_pool(struct input *in, struct slot_req *r)
{
	static const char *const pools[][2] = {
		{ "db", "alice" }, { "db", "bob" }, { "forced", "bob" }, { "sess", "carol" },
	};
	size_t i = in_pick(in, sizeof(pools) / sizeof(pools[0]));
	memset(r, 0, sizeof(*r));
	strlcpy_(r->db, pools[i][0], sizeof(r->db));
	strlcpy_(r->user, pools[i][1], sizeof(r->user));
	r->pool_limit = rig_w->cfg->default_pool_size;
	r->db_limit = rig_w->cfg->max_db_connections;
	r->user_limit = rig_w->cfg->max_user_connections;
	r->wait = 1;
}

/* What the phantom's server of r's pool says about itself. */
static bool encode_server(struct pktbuf *pb, const struct slot_req *r)
{
	static char *other[] = { "server_version", "16.4", "integer_datetimes", "on" };
	static uint64_t id;
	struct handover_rec h;
	struct varcache vars;
	memset(&h, 0, sizeof(h));
	strlcpy_(h.db, r->db, sizeof(h.db));
	strlcpy_(h.user, r->user, sizeof(h.user));
	h.id = 1000000 + ++id;
	/* A PostgreSQL 18 server on 3.2 (32-byte key) or an older one on 3.0. */
	h.proto_minor = id & 1 ? 2 : 0;
	h.be.pid = 7000 + (uint32_t)id;
	h.be.len = id & 1 ? 32 : 4;
	for (uint16_t i = 0; i < h.be.len; i++)
		h.be.secret[i] = (uint8_t)(0x70 + id + i);
	strlcpy_(h.addr, "phantom", sizeof(h.addr));
	h.connect_time = h.request_time = h.last_used = h.sent_at = util_monotonic();
	varcache_init(&vars);
	(void)varcache_set(&vars, "client_encoding", "UTF8");
	(void)varcache_set(&vars, "TimeZone", "UTC");
	bool ok = handover_encode(pb, &h, &vars, other, 2, NULL);
	varcache_clear(&vars);
	return ok;
}

/* The phantom's idle server of a pool it holds a slot of goes where the
 * ledger says: to worker 0 (its oldest queued request, if any) on a
 * socket whose other end a fake server keeps, already logged in. */
static void phantom_gives(struct input *in)
{
	struct slot_req r;
	struct pktbuf pb;
	int to = -1, sv[2];
	uint32_t reqid = 0;
	phantom_pool(in, &r);
	if (ledger_pool_count(ledger, r.db, r.user, 1) == 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	if (!fz_server_adopt(sv[1])) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (ledger_handover(ledger, 1, r.db, r.user, NULL, NULL, &to, &reqid) == LEDGER_MOVE_TO && to == 0) {
		pktbuf_init(&pb, 512);
		if (encode_server(&pb, &r))
			post(IPC_SERVER_FD, reqid ? reqid : IPC_SERVER_UNASKED, pb.buf, pb.len, sv[0]);
		pktbuf_free(&pb);
	}
	close(sv[0]);           /* kept by the phantom: its fake server hears EOF */
	ledger_retell(ledger, 1, r.db, r.user);
	ledger_want_changes(ledger, want_told, NULL);
}

static void phantom_failed_login(struct input *in)
{
	struct login_failure f;
	memset(&f, 0, sizeof(f));
	phantom_pool(in, &f.pool);
	strlcpy_(f.code, "28P01", sizeof(f.code));
	strlcpy_(f.msg, "password authentication failed", sizeof(f.msg));
	post(IPC_LOGIN_FAILED, 0, &f, sizeof(f), -1);
}

static void phantom_cancel(struct input *in)
{
	struct cancelkey k;
	memset(&k, 0, sizeof(k));
	if (!fz_client_key(in_pick(in, FZ_CLIENTS), &k))
		k.len = CANCELKEY_SHORT;          /* a key no client has */
	post(IPC_CANCEL_FWD, 0, &k, sizeof(k), -1);
}

void fz_sup_op(struct input *in)
{
	struct slot_req r;
	uint8_t m = in_byte(in);
	if (!ledger)
		return;
	switch (m & 7) {
	case 0: deliver(MAX_HELD); break;
	case 1: deliver(1); break;
	case 2:
		phantom_pool(in, &r);
		(void)ledger_request(ledger, 1, ++phantom_reqid, &r);
		settle();
		break;
	case 3:
		phantom_pool(in, &r);
		(void)ledger_release(ledger, 1, r.db, r.user);
		settle();
		break;
	case 4: phantom_failed_login(in); break;
	case 5: phantom_cancel(in); break;
	case 6: hold = !hold; break;
	default: phantom_gives(in); break;
	}
}

void fz_sup_start(bool holds)
{
	ledger = ledger_new(2);
	hold = holds;
	n_held = n_welcomes = 0;
	phantom_reqid = 0;
	rig_sup_handler(on_worker_msg);
}

void fz_sup_stop(void)
{
	for (int i = 0; i < n_held; i++)
		if (held[i].fd >= 0)
			close(held[i].fd);
	n_held = 0;
	if (ledger)
		ledger_free(ledger);
	ledger = NULL;
}

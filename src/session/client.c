/* pgcrew — client connections: accept, startup packet (SSL/GSSENC/cancel
 * negotiation), authentication against auth_file, the welcome, and the relay
 * of requests to a linked server. A client's bad input costs that client its
 * connection and nobody else anything. */
#include "client.h"
#include "proxy_accept.h"
#include "authquery.h"
#include "auth/certauth.h"
#include "auth/peerauth.h"
#include "auth/authpool.h"
#include "auth/extauth.h"
#include "auth/crypto.h"
#include "auth/hba.h"
#include "auth/md5.h"
#include "auth/scram.h"
#include "cancel.h"
#include "config.h"
#include "handover.h"
#include "hist.h"
#include "config/userlist.h"
#include "pool.h"
#include "proto/build.h"
#include "proto/cancelkey.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "proto/startup.h"
#include "psrelay.h"
#include "server.h"
#include "shm.h"
#include "strpool.h"
#include "tls.h"
#include "world.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

enum auth_step {
	AS_NONE,
	AS_PASSWORD,        /* waiting for a cleartext password */
	AS_MD5,             /* waiting for an md5 response */
	AS_SASL_INIT,       /* waiting for SASLInitialResponse */
	AS_SASL_FINAL,      /* waiting for the client-final-message */
	AS_EXTERNAL,        /* waiting for a cleartext password for LDAP/PAM */
	AS_EXTERNAL_WAIT,   /* an authentication thread checks it */
};


/* The console's hooks (admin_register at the worker's start). */
static const struct client_console_ops *console;

void client_set_console(const struct client_console_ops *ops)
{
	console = ops;
}
static const char *const state_names[] = {
	[CLIENT_LOGIN] = "login", [CLIENT_WAITING_LOGIN] = "waiting_login",
	[CLIENT_ACTIVE] = "active", [CLIENT_WAITING] = "waiting",
	[CLIENT_CANCEL] = "cancel", [CLIENT_JUSTFREE] = "justfree",
};
_Static_assert(ARRAY_SIZE(state_names) == CLIENT_STATE_COUNT, "client state names");

const char *client_state_name(enum client_state st)
{
	return st < CLIENT_STATE_COUNT ? state_names[st] : "?";
}


/* ---- states ---- */

static struct list *state_list(struct client *c, enum client_state st)
{
	switch (st) {
	case CLIENT_LOGIN: return &c->world->login_clients;
	case CLIENT_WAITING_LOGIN:
	case CLIENT_WAITING: return &c->pool->waiting_clients;
	case CLIENT_ACTIVE: return &c->pool->active_clients;
	case CLIENT_CANCEL: return &c->world->cancel_clients;
	case CLIENT_JUSTFREE: return &c->world->justfree_clients;
	default: return NULL;
	}
}

/* A client is attached to its pool exactly in these states: it is on one
 * of the pool's lists and counted there. Before (login, cancel) and after
 * (justfree) it may have no pool at all, so the pool's counts are reached
 * only through the state, never through a non-NULL c->pool. */
static bool state_in_pool(enum client_state st)
{
	return st == CLIENT_WAITING_LOGIN || st == CLIENT_WAITING || st == CLIENT_ACTIVE;
}

static bool state_waits(enum client_state st)
{
	return st == CLIENT_WAITING_LOGIN || st == CLIENT_WAITING;
}

static int *state_counter(struct client *c, enum client_state st)
{
	if (!state_in_pool(st))
		return NULL;
	return state_waits(st) ? &c->pool->n_waiting_clients : &c->pool->n_active_clients;
}

bool client_in_pool(const struct client *c)
{
	return state_in_pool(c->state);
}

void client_set_state(struct client *c, enum client_state st)
{
	bool was_waiting = state_waits(c->state), now_waiting = state_waits(st);
	int *cnt = state_counter(c, c->state);

	if (c->state == CLIENT_JUSTFREE)
		fatal("client %llu: transition out of justfree", (unsigned long long)c->id);
	if (state_in_pool(st) && !c->pool)
		fatal("C-%llu: %s without a pool", (unsigned long long)c->id, client_state_name(st));
	log_noise("C-%llu: %s -> %s", (unsigned long long)c->id,
		  client_state_name(c->state), client_state_name(st));
	if (cnt)
		(*cnt)--;
	list_del(&c->node);
	if (now_waiting && !was_waiting)
		c->wait_notified = 0;     /* query_wait_notify: once per wait */
	c->state = st;
	if ((cnt = state_counter(c, st)) != NULL)
		(*cnt)++;
	list_append(state_list(c, st), &c->node);
	if (!was_waiting && !now_waiting)
		return;
	if (c->repl != REPL_NONE)
		c->pool->n_repl_waiting += (int)now_waiting - (int)was_waiting;
	pool_wait_line(c->pool);
}

/* ---- output helpers ---- */

static void send_error(struct client *c, const char *severity, const char *sqlstate, const char *msg)
{
	struct pktbuf pb;
	pktbuf_init(&pb, 128);
	pkt_write_error(&pb, severity, sqlstate, "%s", msg);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

void client_put_login_notice(const struct client *c, struct pktbuf *pb)
{
	const char *msg = c->world->cfg->login_notify_message;
	if (msg && *msg)
		pkt_write_notice(pb, "NOTICE", "00000", msg);
}

void client_send_notice(struct client *c, const char *msg)
{
	struct pktbuf pb;
	pktbuf_init(&pb, 128);
	pkt_write_notice(&pb, "NOTICE", "00000", msg);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

static bool send_pb(struct client *c, struct pktbuf *pb)
{
	bool ok = stream_write(&c->s, pb);
	pktbuf_free(pb);
	if (!ok)
		client_close(c, false, "send failed");
	return ok;
}

/* ---- closing ---- */

static void release_counts(struct client *c)
{
	if (c->counted_db && c->db) {
		c->db->n_clients--;
		if (c->db->shm_idx >= 0)
			shm_name_put(c->db->shm_idx);
		c->counted_db = false;
	}
	if (c->counted_user && c->login_user) {
		c->login_user->n_clients--;
		if (c->login_user->shm_idx >= 0)
			shm_name_put(c->login_user->shm_idx);
		c->counted_user = false;
	}
	if (c->counted_conn) {
		shm_client_put();
		c->counted_conn = false;
	}
}

void client_account_bytes(struct client *c)
{
	if (!c->pool)
		return;
	c->pool->stats.bytes_in += c->s.bytes_in - c->counted_in;
	c->pool->stats.bytes_out += c->s.bytes_out - c->counted_out;
	c->counted_in = c->s.bytes_in;
	c->counted_out = c->s.bytes_out;
}

void client_close_sqlstate(struct client *c, const char *sqlstate, const char *reason)
{
	char age[32];

	if (c->state == CLIENT_JUSTFREE)
		return;
	client_account_bytes(c);
	if (sqlstate && c->world->cfg->log_pooler_errors)
		log_client(c, LG_WARNING, "pooler error: %s", reason);
	if (c->world->cfg->log_disconnections) {
		util_format_age(util_monotonic() - c->connect_time, age, sizeof(age));
		log_client(c, LG_LOG, "closing because: %s (age=%s)", reason, age);
	}
	if (sqlstate)
		send_error(c, "FATAL", sqlstate, reason);
	proxy_accept_cancel(c);
	if (c->repl_server && c->repl_server != c->link) {
		/* Its own server was still logging in. */
		struct server *sv = c->repl_server;
		c->repl_server = NULL;
		sv->repl_owner = NULL;
		server_close(sv, "replication client gone");
	}
	if (c->link)
		server_client_gone(c->link);
	if (c->authq)
		authquery_client_closed(c);
	authpool_owner_gone(&c->auth_job);
	cancel_unregister(c);
	release_counts(c);
	c->world->n_clients--;
	free(c->scram);
	c->scram = NULL;
	client_set_state(c, CLIENT_JUSTFREE);
	stream_close(&c->s);
	world_schedule_reap(c->world);
	world_check_shutdown(c->world);
}

void client_close(struct client *c, bool send_err, const char *reason)
{
	client_close_sqlstate(c, send_err ? "08P01" : NULL, reason);
}

/* The names the client asked for, cut to NAMEDATALEN - 1 bytes as
 * PostgreSQL does; pooled, since thousands of clients share a few. */
static const char *pooled_name(const char *old, const char *name)
{
	char buf[NAME_MAX_LEN];
	strlcpy_(buf, name ? name : "", sizeof(buf));
	const char *p = buf[0] ? strpool_get(buf) : "";
	if (old[0])
		strpool_put(old);
	return p;
}

static void client_set_names(struct client *c, const char *user, const char *db)
{
	c->user_name = pooled_name(c->user_name, user);
	c->db_name = pooled_name(c->db_name, db);
}

void client_set_pool(struct client *c, struct pool *p)
{
	if (c->pool == p)
		return;
	if (c->pool)
		pool_client_out(c->pool);
	c->pool = p;
	if (p)
		pool_client_in(p);
}

void client_free(struct client *c)
{
	list_del(&c->node);
	list_del(&c->all_node);
	client_set_names(c, NULL, NULL);
	varcache_clear(&c->vars);
	if (console)
		console->freed(c);    /* a console client's waits and statements */
	client_set_pool(c, NULL);
	ps_client_free(c->ps);
	free(c->repl_options);
	free(c);
}

/* ---- accept ---- */

static enum stream_action client_on_pkt(struct stream *s, const struct pkt_hdr *h,
					const uint8_t *data, size_t avail);
static void client_on_event(struct stream *s, enum stream_event ev);

/* A direct-TLS client (PostgreSQL 17 sslnegotiation=direct) opens with a
 * ClientHello instead of a startup packet. */
static void start_direct_tls(struct client *c)
{
	if (!c->world->client_tls || c->is_unix) {
		client_close(c, false, "direct TLS connection but TLS is not configured");
		return;
	}
	struct tls_conn *t = tls_conn_accept(c->world->client_tls, c->s.fd, true);
	if (!t) {
		client_close(c, false, "TLS setup failed");
		return;
	}
	c->phase_start = util_monotonic();
	stream_start_tls(&c->s, t);
}

/* One end of the client's socket, as accept() or the listener told it, else
 * asked of the kernel (a socket passed from another worker comes without). */
static void format_end(const struct sockaddr *known, int fd, bool peer, char *buf, size_t len,
		       int *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (!known) {
		int rc = peer ? getpeername(fd, (struct sockaddr *)&ss, &sl) :
				getsockname(fd, (struct sockaddr *)&ss, &sl);
		if (rc < 0)
			return;
		known = (const struct sockaddr *)&ss;
	}
	util_format_addr(known, buf, len, port);
}

/* A client object for a connected socket, in CLIENT_LOGIN, not reading;
 * id 0: it takes the next one. */
static struct client *client_new(struct world *w, int fd, bool is_unix, const struct accepted *how,
				 uint64_t id)
{
	struct client *c = xcalloc(1, sizeof(*c));

	c->id = id ? id : shm_next_id();
	c->world = w;
	c->user_name = c->db_name = "";
	c->connect_time = c->last_activity = util_monotonic();
	c->is_unix = is_unix;
	varcache_init(&c->vars);
	list_init(&c->node);
	list_append(&w->all_clients, &c->all_node);
	c->state = CLIENT_LOGIN;
	list_append(&w->login_clients, &c->node);
	w->n_clients++;
	stream_init(&c->s, fd, c, client_on_pkt, client_on_event);
	if (w->cfg->max_packet_size > 0)
		c->s.max_pkt = (uint32_t)w->cfg->max_packet_size;
	c->s.max_whole = CLIENT_WHOLE_MAX;
	format_end(how ? how->peer : NULL, fd, true, c->addr, sizeof(c->addr), &c->port);
	format_end(how ? how->local : NULL, fd, false, c->laddr, sizeof(c->laddr), &c->lport);
	return c;
}

/* The PROXY phase refused the connection, or it broke: closed without a
 * word (it may not even speak PostgreSQL's protocol). */
static void proxy_failed(struct client *c, const char *why, bool warn)
{
	if (warn)
		log_client(c, LG_WARNING, "%s", why);
	client_close(c, false, why);
}

/* The client's own first bytes come next on its socket. */
static void start_reading(struct client *c)
{
	c->s.sniff_tls = true;
	c->s.suspended = c->world->suspended;    /* handed over from another worker during SUSPEND */
	stream_start_reading(&c->s);
	/* The startup packet is usually here already: one epoll turn saved per
	 * login (if not, a recv that finds nothing). */
	if (!c->is_unix && c->world->cfg->tcp_defer_accept)
		stream_read_now(&c->s);
}

void client_accept(struct world *w, int fd, bool is_unix, const struct accepted *how, uint64_t id)
{
	struct client *c = client_new(w, fd, is_unix, how, id);

	c->s.startup = true;
	if (!is_unix)
		util_tune_tcp(fd, w->cfg);
	/* Refused clients still get through SSL negotiation so that the
	 * reason reaches them as an ErrorResponse, as with PgBouncer. */
	c->counted_conn = shm_client_take(w->cfg->max_client_conn);
	if (!c->counted_conn)
		c->close_reason = "no more connections allowed (max_client_conn)";
	if (proxy_accept_wanted(c)) {
		proxy_accept_start(c, start_reading, proxy_failed);
		return;
	}
	start_reading(c);
}

/* ---- online restart ---- */

static bool take_client_slot(int shm_idx, int *local, int limit);

struct client *client_taken(int fd, const struct handover_client *h, struct pool *p,
			    struct puser *login_user)
{
	struct client *c = client_new(p->db->world, fd, h->is_unix != 0, NULL, 0);

	client_set_names(c, h->user_name, h->db_name);
	c->connect_time = h->connect_time;
	c->last_activity = h->last_activity;
	c->db = p->db;
	client_set_pool(c, p);
	c->login_user = login_user;
	c->passthrough_ok = h->passthrough_ok != 0;
	/* Already connected: counted even beyond a limit, as it was. */
	c->counted_conn = shm_client_take(0);
	if (!h->admin) {      /* console logins are not counted (client_login_found) */
		c->counted_db = take_client_slot(p->db->shm_idx, &p->db->n_clients, 0);
		c->counted_user = login_user &&
				  take_client_slot(login_user->shm_idx, &login_user->n_clients, 0);
	}
	struct cancelkey_own key;
	if (!cancelkey_to_own(&key, &h->key))
		memset(&key, 0, sizeof(key));    /* a length pgcrew never gives: no key */
	cancel_register_key(c, &key);
	c->proto_minor = h->proto_minor;
	client_set_state(c, CLIENT_ACTIVE);
	return c;
}

void client_forget(struct client *c)
{
	if (c->link)
		fatal("C-%llu: forgotten while linked", (unsigned long long)c->id);
	client_account_bytes(c);
	int fd = stream_take_fd(&c->s);
	if (fd >= 0)
		close(fd);
	cancel_unregister(c);
	release_counts(c);
	c->world->n_clients--;
	client_set_state(c, CLIENT_JUSTFREE);
	stream_close(&c->s);
	world_schedule_reap(c->world);
	world_check_shutdown(c->world);
}

/* ---- welcome ---- */

static void send_welcome(struct client *c)
{
	struct pool *p = c->pool;
	struct pktbuf pb;

	pktbuf_init(&pb, 512);
	pkt_write_auth_ok(&pb);
	varcache_write_status(&pb, &p->welcome_vars, &c->vars);
	for (int i = 0; i < p->n_welcome_other; i++)
		pkt_write_parameter_status(&pb, p->welcome_other[2 * i], p->welcome_other[2 * i + 1]);
	struct cancelkey k;
	cancelkey_from_own(&k, &c->key);
	pkt_write_backend_key(&pb, &k);
	client_put_login_notice(c, &pb);
	pkt_write_ready(&pb, 'I');
	if (!send_pb(c, &pb))
		return;
	/* The client's effective settings start as the pool's, overlaid by its own. */
	for (int i = 0; i < varcache_count(); i++)
		if (!varcache_get(&c->vars, i) && varcache_get(&p->welcome_vars, i))
			varcache_set(&c->vars, varcache_name(i), varcache_get(&p->welcome_vars, i));
	client_set_state(c, CLIENT_ACTIVE);
	c->s.startup = false;
	stream_resume(&c->s);
}

void client_pool_ready(struct client *c)
{
	send_welcome(c);
}

void client_server_login_failed(struct client *c, const char *sqlstate, const char *msg)
{
	client_close_sqlstate(c, sqlstate && *sqlstate ? sqlstate : "08P01", msg);
}

/* A later client within server_login_retry: PgBouncer's wording. */
void client_cached_login_error(struct client *c, const char *msg)
{
	char text[600];
	snprintf(text, sizeof(text), "server login has been failing, cached error: %s (server_login_retry)", msg);
	client_close_sqlstate(c, "08P01", text);
}

/* max_pools pools are held in shared memory already: the pool's cross-
 * worker rules have nowhere to live, so its client is refused rather
 * than served without them (said once a minute in the log). */
static void pools_full(struct client *c, const char *db, const char *user)
{
	static usec_t said;
	usec_t now = util_monotonic();
	if (!said || now - said >= 60 * USEC_PER_SEC) {
		said = now;
		log_warning("max_pools (%d) reached: refusing a client of %s/%s, which would have no shared cell",
			    c->world->cfg->max_pools, db, user);
	}
	client_close_sqlstate(c, "53300", "no more pools allowed (max_pools)");
}

static void finish_login(struct client *c)
{
	struct pool *p = c->pool;
	char msg[NAME_MAX_LEN + 32];

	if (c->no_such_db) {
		snprintf(msg, sizeof(msg), "no such database: %s", c->db_name);
		client_close(c, true, msg);
		return;
	}

	hist_phase_observe(HIST_PHASE_AUTH, (uint64_t)(util_monotonic() - c->phase_start));
	if (c->world->cfg->log_connections) {
		char tls[96];
		log_client(c, LG_LOG, "login attempt: db=%s user=%s tls=%s", c->db_name, c->user_name,
			   c->s.tls ? tls_conn_info(c->s.tls, tls, sizeof(tls)) : "no");
	}
	/* Console clients get a key too: it names their worker (SHOW WORKERS
	 * users and tests read it), and a cancel for them is simply dropped. */
	cancel_register(c);
	if (p)
		p->stats.client_login_count++;
	if (c->db->admin) {
		console->welcome(c);
		return;
	}
	if (!pool_cell_ready(p)) {
		pools_full(c, p->db->name, p->user->name);
		return;
	}
	if (p->welcome_ready) {
		send_welcome(c);
		return;
	}
	c->request_time = util_monotonic();
	client_set_state(c, CLIENT_WAITING_LOGIN);
	if (c->repl != REPL_NONE) {
		/* No ordinary login for a replication client (its database may
		 * be "replication", which takes none): its own walsender's
		 * parameters are the pool's welcome (server.c login_complete),
		 * unless another worker's login has shared them. */
		pool_launch_needed(p);
		return;
	}
	if (p->n_login == 0 && p->login_failed_at && p->login_error[0] &&
	    util_monotonic() - p->login_failed_at < c->world->cfg->server_login_retry) {
		client_cached_login_error(c, p->login_error);
		return;
	}
	pool_launch_needed(p);
}

/* ---- authentication ---- */

static void auth_failed(struct client *c)
{
	client_close_sqlstate(c, "28P01", "password authentication failed");
}

/* trust for a user auth_file does not list: PgBouncer's words. */
static void trust_failed(struct client *c)
{
	client_close(c, true, "\"trust\" authentication failed");
}

static const char *user_secret(const struct client *c)
{
	return c->login_user ? c->login_user->secret : NULL;
}

/* trust admits only users auth_file lists (or auth_query found): a user
 * object may also exist because a database entry forces that name. */
static bool trust_known(const struct client *c)
{
	const struct puser *u = c->login_user;
	return u && (u->authq_secret ||
		     (c->world->cfg->userlist && userlist_find(c->world->cfg->userlist, u->name)));
}

static void request_password(struct client *c, int step)
{
	struct pktbuf pb;
	pktbuf_init(&pb, 16);
	pkt_write_auth_cleartext(&pb);
	c->auth_step = step;
	send_pb(c, &pb);
}

static void request_md5(struct client *c)
{
	struct pktbuf pb;
	if (!crypto_random(c->md5_salt, sizeof(c->md5_salt))) {
		client_close(c, true, "internal error: no randomness");
		return;
	}
	pktbuf_init(&pb, 16);
	pkt_write_auth_md5(&pb, c->md5_salt);
	c->auth_step = AS_MD5;
	send_pb(c, &pb);
}

/* SCRAM-SHA-256-PLUS is offered to a TLS client when our certificate's
 * tls-server-end-point hash is known (not for e.g. an Ed25519 one). */
static bool channel_binding(struct client *c, struct scram_cbind *cb)
{
	memset(cb, 0, sizeof(*cb));
	cb->len = sizeof(cb->data);
	cb->offered = c->s.tls && tls_conn_server_end_point(c->s.tls, cb->data, &cb->len);
	if (!cb->offered)
		cb->len = 0;
	return cb->offered;
}

static void request_sasl(struct client *c)
{
	struct pktbuf pb;
	struct scram_cbind cb;
	pktbuf_init(&pb, 48);
	pkt_write_auth_sasl(&pb, channel_binding(c, &cb));
	c->auth_step = AS_SASL_INIT;
	send_pb(c, &pb);
}

/* Pick the exchange for auth_type and the kind of secret we hold. */
/* PostgreSQL's wording for a login no HBA line lets in. */
static void hba_refused(struct client *c, bool rejected)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "%s for host \"%s\", user \"%s\", database \"%s\", %s",
		 rejected ? "pg_hba.conf rejects connection" : "no pg_hba.conf entry",
		 c->is_unix ? "[local]" : c->addr, c->user_name, c->db_name,
		 c->s.tls ? "SSL encryption" : "no encryption");
	client_close_sqlstate(c, "28000", msg);
}

/* Methods only an HBA line can choose (PgBouncer's auth_type has no peer). */
enum { AUTH_PEER = AUTH_TYPE_COUNT };

/* auth_type = hba: the first matching line decides the method. */
static int hba_method_of(struct client *c, const char **map, const struct hba_rule **rule)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct hba_conn hc = {
		.kind = c->is_unix ? HBA_LOCAL : HBA_HOST, .tls = c->s.tls != NULL,
		.database = c->db_name, .user = c->user_name,
		.replication = c->repl == REPL_PHYSICAL,
	};
	if (c->proxied)
		hc.addr = (const struct sockaddr *)&c->proxied_addr;
	else if (!c->is_unix && getpeername(c->s.fd, (struct sockaddr *)&ss, &len) == 0)
		hc.addr = (const struct sockaddr *)&ss;
	const struct hba_rule *r = hba_match(c->world->hba, &hc);
	if (!r) {
		hba_refused(c, false);
		return -1;
	}
	const char *why = hba_rule_unusable(r);
	if (why) {
		log_client(c, LG_WARNING, "pg_hba line %d cannot be used: %s", hba_rule_line(r), why);
		hba_refused(c, true);
		return -1;
	}
	switch (hba_rule_method(r)) {
	case HBA_TRUST: return AUTH_TRUST;
	case HBA_REJECT: hba_refused(c, true); return -1;
	case HBA_MD5: return AUTH_MD5;
	case HBA_PASSWORD: return AUTH_PLAIN;
	case HBA_SCRAM_SHA_256: return AUTH_SCRAM;
	case HBA_CERT: *map = hba_rule_map(r); return AUTH_CERT;
	case HBA_PEER: *map = hba_rule_map(r); return AUTH_PEER;
	case HBA_LDAP: *rule = r; return AUTH_LDAP;
	case HBA_PAM: *rule = r; return AUTH_PAM;
	default:
		client_close_sqlstate(c, "28000", "authentication method not supported yet");
		return -1;
	}
}

/* An auth check's verdict: the client code alone logs, answers and
 * closes. True when the client may go on. */
static bool verdict_accepts(struct client *c, const struct auth_verdict *v)
{
	if (v->detail[0])
		client_debug(c, "%s", v->detail);
	if (v->outcome == AUTH_ACCEPT)
		return true;
	if (v->log[0])
		log_client(c, LG_ERROR, "%s", v->log);
	client_close_sqlstate(c, v->sqlstate, v->message);
	return false;
}

/* LDAP, PAM: the check is prepared now (a RELOAD may free the HBA rule
 * before the password arrives); false when c was refused. */
static bool ext_begin(struct client *c, enum extauth_method m, const struct hba_rule *rule)
{
	char why[512];
	struct authpool_job *j = extauth_prepare(m, rule, c->world->cfg->auth_ldap_options, c->user_name,
						 c->is_unix ? "[local]" : c->addr, why, sizeof(why));
	if (!j) {
		log_client(c, LG_WARNING, "%s", why);
		client_close(c, true, extauth_failure_text(m));
		return false;
	}
	c->auth_job = j;
	return true;
}

static void ext_accepted(struct client *c, const char *password);

/* The authentication thread answered (c is still there). */
static void ext_done(void *owner, struct authpool_job *j)
{
	struct client *c = owner;
	if (!j->ok) {
		if (j->why[0])
			log_client(c, LG_WARNING, "%s", j->why);
		client_close(c, true, extauth_job_failure_text(j));
		return;
	}
	ext_accepted(c, j->password);
}

/* The client's cleartext password for LDAP or PAM: the check is queued. */
static void ext_password(struct client *c, const char *password)
{
	struct authpool_job *j = c->auth_job;
	if (!j) {
		client_close(c, true, "unexpected password packet");
		return;
	}
	if (!extauth_set_password(j, password)) {
		client_close(c, true, "password too long");
		return;
	}
	j->done = ext_done;
	c->auth_job = NULL;      /* authpool_submit sets it again */
	if (!authpool_submit(c->world->base, j, c, &c->auth_job))
		client_close_sqlstate(c, "53300", "too many authentication requests in progress, try again");
}

/* cert: the CN of the certificate the handshake verified, if any. */
static bool cert_accepts(struct client *c, const char *map)
{
	struct auth_verdict v;
	char cn[256];
	bool has_cn = c->s.tls && tls_conn_peer_cn(c->s.tls, cn, sizeof(cn));
	(void)certauth_check(c->s.tls != NULL, has_cn ? cn : NULL, c->user_name, c->login_user != NULL,
			     c->world->hba_ident, map, &v);
	return verdict_accepts(c, &v);
}

void client_start_auth(struct client *c)
{
	struct auth_verdict v;
	const char *secret = user_secret(c);
	int kind = secret && *secret ? (int)userlist_secret_kind(secret) : -1;
	int method = c->world->cfg->auth_type;
	const char *map = NULL;
	const struct hba_rule *rule = NULL;

	if (c->local_admin) {
		finish_login(c);
		return;
	}
	if (method == AUTH_HBA && (method = hba_method_of(c, &map, &rule)) < 0)
		return;
	switch (method) {
	case AUTH_ANY:
		finish_login(c);
		return;
	case AUTH_TRUST:
		if (!trust_known(c))
			trust_failed(c);
		else
			finish_login(c);
		return;
	case AUTH_PLAIN:
		request_password(c, AS_PASSWORD);
		return;
	case AUTH_MD5:
		/* PgBouncer's rule: a SCRAM secret cannot answer md5, so use SCRAM. */
		if (kind == USERLIST_SCRAM)
			request_sasl(c);
		else
			request_md5(c);
		return;
	case AUTH_SCRAM:
		request_sasl(c);
		return;
	case AUTH_CERT:
		if (cert_accepts(c, map))
			finish_login(c);
		return;
	case AUTH_PEER:
		if (verdict_accepts(c, (peerauth_check(c->is_unix, c->s.fd, c->user_name,
							 c->login_user != NULL, c->world->hba_ident, map, &v), &v)))
			finish_login(c);
		return;
	case AUTH_LDAP:
	case AUTH_PAM:
		if (ext_begin(c, method == AUTH_LDAP ? EXTAUTH_LDAP : EXTAUTH_PAM, rule))
			request_password(c, AS_EXTERNAL);
		return;
	default:
		client_close_sqlstate(c, "28000", "authentication method not supported yet");
	}
}

/* Compare secrets in time independent of where they differ. */
static bool secret_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	return la == lb && CRYPTO_memcmp(a, b, la) == 0;
}

static bool check_plain_password(struct client *c, const char *pw)
{
	const char *secret = user_secret(c);
	char hash[36];
	struct scram_secret have, derived;

	if (!secret || !*secret)
		return false;
	switch (userlist_secret_kind(secret)) {
	case USERLIST_PLAIN:
		return secret_equal(secret, pw);
	case USERLIST_MD5:
		md5_password_hash(c->user_name, pw, hash);
		return secret_equal(hash, secret);
	case USERLIST_SCRAM:
		if (!scram_parse_verifier(secret, &have) ||
		    !scram_secret_from_password(pw, have.salt, have.salt_len, have.iterations, &derived))
			return false;
		return CRYPTO_memcmp(have.stored_key, derived.stored_key, SCRAM_KEY_LEN) == 0 &&
		       CRYPTO_memcmp(have.server_key, derived.server_key, SCRAM_KEY_LEN) == 0;
	default:
		return false;
	}
}

static void handle_password(struct client *c, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	const char *pw = pkt_get_string(&r);
	if (!pkt_get_end(&r)) {
		client_close(c, true, "malformed password packet");
		return;
	}
	if (c->auth_step == AS_EXTERNAL) {
		c->auth_step = AS_EXTERNAL_WAIT;
		ext_password(c, pw);
		return;
	}
	bool ok = false;
	if (c->auth_step == AS_PASSWORD)
		ok = check_plain_password(c, pw);
	else
		ok = user_secret(c) && md5_check_client(user_secret(c), c->user_name, c->md5_salt, pw);
	if (ok)
		finish_login(c);
	else
		auth_failed(c);
}

static void handle_sasl_init(struct client *c, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	struct scram_secret secret;
	struct scram_cbind cb;
	const char *err = NULL;
	char out[512];
	size_t n = 0;

	pkt_reader_init(&r, body, len);
	const char *mech = pkt_get_string(&r);
	int32_t dlen = pkt_get_i32(&r);
	if (r.failed || dlen < 0 || (size_t)dlen != len - r.pos) {
		client_close(c, true, "malformed SASLInitialResponse");
		return;
	}
	if (channel_binding(c, &cb) && strcmp(mech, "SCRAM-SHA-256-PLUS") == 0)
		cb.plus = true;
	else if (strcmp(mech, "SCRAM-SHA-256") != 0) {
		client_close_sqlstate(c, "28000", "client selected an invalid SASL authentication mechanism");
		return;
	}
	const char *sec = user_secret(c);
	bool mock = !sec || !*sec ||
		!scram_secret_for_user(c->user_name, sec, c->world->cfg->scram_iterations, &secret);
	if (mock)
		scram_mock_secret(c->user_name, c->world->cfg->scram_iterations, &secret);
	c->scram = xcalloc(1, sizeof(*c->scram));
	if (scram_server_first_cb(c->scram, &secret, mock, &cb, (const char *)body + r.pos, (size_t)dlen,
				  out, sizeof(out), &n, &err) < 0) {
		client_close_sqlstate(c, "08P01", err ? err : "malformed SCRAM message");
		return;
	}
	struct pktbuf pb;
	pktbuf_init(&pb, n + 16);
	pkt_write_auth_sasl_continue(&pb, out, n);
	c->auth_step = AS_SASL_FINAL;
	send_pb(c, &pb);
}

static void handle_sasl_final(struct client *c, const uint8_t *body, size_t len)
{
	const char *err = NULL;
	char out[256];
	size_t n = 0;

	int rc = scram_server_final(c->scram, (const char *)body, len, out, sizeof(out), &n, &err);
	if (rc == -2 || (rc == 0 && c->scram->mock)) {
		/* PgBouncer's wording for any failed SCRAM exchange. */
		client_close_sqlstate(c, "28P01", "SASL authentication failed");
		return;
	}
	if (rc < 0) {
		client_close_sqlstate(c, "08P01", err ? err : "malformed SCRAM message");
		return;
	}
	/* Pass-through: the proof gave us the ClientKey for the server login. */
	struct puser *u = c->login_user;
	if (c->scram->got_client_key && u && userlist_secret_kind(u->secret) == USERLIST_SCRAM) {
		u->scram_keys = c->scram->secret;
		memcpy(u->scram_keys.client_key, c->scram->client_key, SCRAM_KEY_LEN);
		u->scram_keys.has_client_key = true;
		u->has_scram_keys = true;
	}
	struct pktbuf pb;
	pktbuf_init(&pb, n + 16);
	pkt_write_auth_sasl_final(&pb, out, n);
	free(c->scram);
	c->scram = NULL;
	if (send_pb(c, &pb))
		finish_login(c);
}

/* The largest authentication packet: a PasswordMessage with the longest
 * password (SASL messages are far smaller). */
#define AUTH_PKT_MAX (1 + 4 + SECRET_MAX_LEN)

static enum stream_action auth_pkt(struct client *c, const struct pkt_hdr *h,
				   const uint8_t *data, size_t avail)
{
	if (h->type != 'p') {
		client_close(c, true, h->type == 'X' ? "client close request" : "bad packet during authentication");
		return SA_STOP;
	}
	if (h->len > AUTH_PKT_MAX) {
		client_close(c, true, "authentication packet too large");
		return SA_STOP;
	}
	if (avail < h->len)
		return SA_NEED_FULL;
	const uint8_t *body = data + 5;
	size_t blen = h->len - 5;
	switch (c->auth_step) {
	case AS_PASSWORD:
	case AS_MD5:
	case AS_EXTERNAL:
		handle_password(c, body, blen);
		break;
	case AS_SASL_INIT:
		handle_sasl_init(c, body, blen);
		break;
	case AS_SASL_FINAL:
		handle_sasl_final(c, body, blen);
		break;
	default:
		client_close(c, true, "unexpected password packet");
	}
	return c->state == CLIENT_JUSTFREE ? SA_STOP : SA_CONSUMED;
}

/* ---- startup packet ---- */

static bool param_ignored(const struct config *cfg, const char *key)
{
	const char *list = cfg->ignore_startup_parameters;
	size_t klen = strlen(key);
	for (const char *p = list; p && *p;) {
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		size_t n = strcspn(p, ", \t");
		if (n == klen && strncasecmp(p, key, n) == 0)
			return true;
		p += n;
	}
	return false;
}

/* A -c name=value of `options`: tracked, ignored (the name, or `options`
 * itself, in ignore_startup_parameters), or refused as PgBouncer does. */
static int option_cb(void *arg, const char *key, const char *val)
{
	struct client *c = arg;
	if (varcache_set(&c->vars, key, val) || param_ignored(c->world->cfg, key) || param_ignored(c->world->cfg, "options"))
		return 0;
	log_client(c, LG_WARNING, "unsupported startup parameter in options: %s=%s", key, val);
	return -1;
}

/* Apply the startup parameters; false (client closed) on an unsupported one. */
static bool apply_params(struct client *c, const struct startup_msg *m)
{
	char err[256], msg[320];

	for (int i = 0; i < m->n_params; i++) {
		const char *k = m->keys[i], *v = m->vals[i];
		/* replication: parsed in handle_startup, sent only to the
		 * client's own server. */
		if (!strcmp(k, "user") || !strcmp(k, "database") || !strcmp(k, "replication"))
			continue;
		if (!strcmp(k, "options") && c->repl != REPL_NONE) {
			/* Its own walsender gets them at startup, unchanged, as
			 * PgBouncer passes them through. */
			free(c->repl_options);
			c->repl_options = xstrdup(v);
			continue;
		}
		if (!strcmp(k, "options")) {
			if (startup_parse_options(v, option_cb, c, err, sizeof(err)) < 0) {
				client_close(c, true, err);
				return false;
			}
			continue;
		}
		if (!strncmp(k, "_pq_.", 5))
			continue;
		if (varcache_set(&c->vars, k, v) || param_ignored(c->world->cfg, k))
			continue;
		snprintf(msg, sizeof(msg), "unsupported startup parameter: %s", k);
		client_close(c, true, msg);
		return false;
	}
	return true;
}

/* application_name_add_host: "<name> - <addr>:<port>", as PgBouncer. */
static void add_host_to_appname(struct client *c)
{
	char *buf;
	const char *cur = varcache_get(&c->vars, varcache_lookup("application_name"));
	if (asprintf(&buf, "%s - %s:%d", cur ? cur : "", c->addr, c->port) < 0)
		fatal("out of memory");
	(void)varcache_set(&c->vars, "application_name", buf);
	free(buf);
}

/* As PostgreSQL 18: a client asking for a minor version up to ours gets it
 * without a word (3.1 was never used, and behaves as 3.0); a newer one is
 * told ours. _pq_.* options are always listed: pgcrew knows none. */
static void negotiate_version(struct client *c, const struct startup_msg *m)
{
	if (PROTO_MINOR(m->version) <= PROTO_MINOR_LATEST && m->n_unsupported == 0)
		return;
	struct pktbuf pb;
	pktbuf_init(&pb, 64);
	pkt_write_negotiate_version(&pb, c->proto_minor, m->unsupported, m->n_unsupported);
	send_pb(c, &pb);
}

/* Count one client against an instance-wide limit; a name the shared table
 * could not hold is limited per worker. */
static bool take_client_slot(int shm_idx, int *local, int limit)
{
	if (shm_idx >= 0) {
		if (!shm_name_take(shm_idx, limit))
			return false;
	} else if (limit > 0 && *local >= limit) {
		return false;
	}
	(*local)++;
	return true;
}

/* Count the login against its database and user (instance-wide); over a
 * limit it is refused, unless exempt (admin_users on the console). */
static bool count_client(struct client *c, bool exempt)
{
	struct database *db = c->db;
	struct puser *u = c->login_user;
	int db_limit = exempt ? 0 : db->admin ? c->world->cfg->max_db_client_connections : db->max_db_client_connections;

	if (!pool_names_ready(db, u)) {
		pools_full(c, db->name, u ? u->name : c->user_name);
		return false;
	}

	if (!take_client_slot(db->shm_idx, &db->n_clients, db_limit)) {
		client_close(c, true, "client connections exceeded (max_db_client_connections)");
		return false;
	}
	c->counted_db = true;
	if (u && !take_client_slot(u->shm_idx, &u->n_clients, exempt ? 0 : u->max_user_client_connections)) {
		client_close(c, true, "client connections exceeded (max_user_client_connections)");
		return false;
	}
	c->counted_user = u != NULL;
	return true;
}

static bool check_client_limits(struct client *c)
{
	return count_client(c, false);
}

bool client_count_console(struct client *c, bool exempt)
{
	return count_client(c, exempt);
}

/* PostgreSQL's values: "database" (logical), or a boolean (physical or
 * none). */
static bool parse_replication(const char *v, enum replication *out)
{
	static const char *const yes[] = { "true", "on", "yes", "1" };
	static const char *const no[] = { "false", "off", "no", "0" };
	if (strcmp(v, "database") == 0) {
		*out = REPL_LOGICAL;
		return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = REPL_PHYSICAL;
			return true;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = REPL_NONE;
			return true;
		}
	}
	return false;
}

static void handle_startup(struct client *c, const struct startup_msg *m)
{
	char msg[256];

	client_set_names(c, m->user, m->database);
	c->proto_minor = (uint8_t)(PROTO_MINOR(m->version) < PROTO_MINOR_LATEST ? PROTO_MINOR(m->version)
										  : PROTO_MINOR_LATEST);
	if (m->replication && !parse_replication(m->replication, &c->repl)) {
		snprintf(msg, sizeof(msg), "invalid value for parameter \"replication\": \"%.100s\"",
			 m->replication);
		client_close(c, true, msg);
		return;
	}
	if (config_is_console_db(c->db_name) && c->repl != REPL_NONE) {
		client_close(c, true, "replication connections are not supported by the admin console");
		return;
	}
	if (config_is_console_db(c->db_name)) {
		if (!console) {
			client_close(c, true, "no such database: pgbouncer");
			return;
		}
		console->login(c, m);
		return;
	}
	if (!apply_params(c, m))
		return;
	if (c->world->cfg->application_name_add_host)
		add_host_to_appname(c);
	c->db = pool_get_db(c->world, c->db_name);
	if (!c->db) {
		/* As PgBouncer: authenticate first (a mock exchange for an
		 * unknown user), so only valid credentials learn which
		 * databases exist; finish_login then refuses. */
		c->no_such_db = true;
		c->login_user = pool_find_user(c->world, c->user_name);
		negotiate_version(c, m);
		if (c->state != CLIENT_JUSTFREE)
			client_start_auth(c);
		return;
	}
	if (c->db->disabled) {
		snprintf(msg, sizeof(msg), "database \"%s\" is disabled", c->db_name);
		client_close(c, true, msg);
		return;
	}
	c->db->last_used = util_monotonic();
	if (authquery_applies(c)) {
		/* The HBA decides first: no lookup for a login it refuses anyway
		 * (a burst of such logins must not become a burst of queries). */
		const char *map = NULL;
		const struct hba_rule *rule = NULL;
		if (c->world->cfg->auth_type == AUTH_HBA && hba_method_of(c, &map, &rule) < 0)
			return;
		negotiate_version(c, m);
		if (c->state != CLIENT_JUSTFREE)
			authquery_start(c);
		return;
	}
	c->login_user = pool_find_user(c->world, c->user_name);
	/* Only "any" ignores who the client says it is; "trust" still needs
	 * the user in auth_file, forced user or not (as in PgBouncer). */
	if (!c->login_user && c->world->cfg->auth_type == AUTH_ANY && c->db->forced_user)
		c->login_user = pool_get_user(c->world, c->user_name);
	struct puser *srv_user = c->db->forced_user ? pool_get_user(c->world, c->db->forced_user) : c->login_user;
	if (!check_client_limits(c))
		return;
	negotiate_version(c, m);
	if (c->state == CLIENT_JUSTFREE)
		return;
	if (srv_user)
		client_set_pool(c, pool_get(c->db, srv_user));
	if (!c->pool && c->world->cfg->auth_type != AUTH_ANY && c->world->cfg->auth_type != AUTH_TRUST) {
		/* Unknown user: run the exchange anyway so names cannot be probed. */
		client_start_auth(c);
		return;
	}
	if (!c->pool) {
		if (c->world->cfg->auth_type == AUTH_TRUST)
			trust_failed(c);
		else
			auth_failed(c);
		return;
	}
	client_start_auth(c);
}

/* auth_query found the user (its secret is in u): count it, then
 * authenticate it as any other. */
void client_login_found(struct client *c, struct puser *u)
{
	c->login_user = u;
	if (c->db->admin && c->console_refused) {
		client_close_sqlstate(c, "08P01", "not allowed");
		return;
	}
	struct puser *srv_user = c->db->forced_user ? pool_get_user(c->world, c->db->forced_user) : u;
	if (!(c->db->admin ? count_client(c, !c->stats_only) : check_client_limits(c)))
		return;
	client_set_pool(c, pool_get(c->db, srv_user ? srv_user : u));
	client_start_auth(c);
}

/* An LDAP or PAM check said yes. As in PgBouncer, a user that is not in
 * auth_file exists from now on in this worker, with the password the
 * client gave as its secret for the pool's server logins. */
static void ext_accepted(struct client *c, const char *password)
{
	if (c->no_such_db) {
		/* Right credentials for a database we lack: finish_login says so.
		 * There is no database, so no user or pool to make here. */
		finish_login(c);
		return;
	}
	if (!c->login_user) {
		struct puser *u = pool_get_user(c->world, c->user_name);
		if (!u) {
			client_close(c, true, "bouncer resources exhaustion");
			return;
		}
		if (!take_client_slot(u->shm_idx, &u->n_clients, u->max_user_client_connections)) {
			client_close(c, true, "client connections exceeded (max_user_client_connections)");
			return;
		}
		c->login_user = u;
		c->counted_user = true;
	}
	struct puser *u = c->login_user;
	if (!u->authq_secret && (!c->world->cfg->userlist || !userlist_find(c->world->cfg->userlist, u->name)))
		pool_user_set_secret(u, password);
	if (!c->pool) {
		struct puser *srv_user = c->db->forced_user ? pool_get_user(c->world, c->db->forced_user) : u;
		client_set_pool(c, pool_get(c->db, srv_user ? srv_user : u));
	}
	finish_login(c);
}

static void handle_ssl_request(struct client *c)
{
	if (!c->world->client_tls || c->is_unix) {
		(void)stream_write_raw(&c->s, "N", 1);
		return;
	}
	/* Anything after the SSLRequest would be plaintext smuggled into the
	 * TLS session (CVE-2021-23222 class): refuse it. */
	if (stream_unprocessed(&c->s) > 0) {
		client_close(c, false, "data after SSLRequest");
		return;
	}
	if (!stream_write_raw(&c->s, "S", 1)) {
		client_close(c, false, "send failed");
		return;
	}
	struct tls_conn *t = tls_conn_accept(c->world->client_tls, c->s.fd, false);
	if (!t) {
		client_close(c, false, "TLS setup failed");
		return;
	}
	stream_stop_reading(&c->s);
	c->phase_start = util_monotonic();
	stream_start_tls(&c->s, t);
}

/* Connection-setup histograms: accept to StartupMessage (the TLS handshake
 * counted apart), then the authentication phase starts. */
static void note_startup_time(struct client *c)
{
	usec_t now = util_monotonic();
	hist_phase_observe(HIST_PHASE_STARTUP, (uint64_t)(now - c->connect_time - c->tls_usec));
	c->phase_start = now;
}

/* A CancelRequest: its connection stays open until PostgreSQL has acted
 * on the cancel (as PgBouncer 1.25 keeps it), so that a driver which sends
 * its next query once this connection closes never has that one canceled;
 * the cancel's outcome closes it (client_cancel_done). */
static void start_cancel(struct client *c, const struct cancelkey *k)
{
	struct cancel_waiter wt = { .worker = c->world->id, .client = c->id };
	enum cancel_outcome o = cancel_handle_request(c->world, k, &wt);
	if (o != CANCEL_PENDING)
		client_close(c, false, cancel_outcome_text(o));
}

void client_cancel_done(struct world *w, uint64_t id, enum cancel_outcome o)
{
	struct list *it;
	list_for_each(it, &w->cancel_clients) {
		struct client *c = container_of(it, struct client, node);
		if (c->id == id) {
			client_close(c, false, cancel_outcome_text(o));
			return;
		}
	}
}

static enum stream_action startup_pkt(struct client *c, const struct pkt_hdr *h,
				      const uint8_t *data, size_t avail)
{
	struct startup_msg m;
	char err[256];

	const char *refused = avail >= PKT_STARTUP_MIN ? startup_length_refused(data, h->len) : NULL;
	if (refused) {
		client_close(c, true, refused);
		return SA_STOP;
	}
	if (avail < h->len)
		return SA_NEED_FULL;
	switch (startup_parse(data, h->len, &m, err, sizeof(err))) {
	case STARTUP_SSL:
		if (c->s.tls) {
			client_close(c, true, "SSLRequest inside TLS");
			return SA_STOP;
		}
		/* Consume the 8 bytes first: the handshake reads the socket next. */
		stream_consume(&c->s, h->len);
		handle_ssl_request(c);
		return SA_STOP;
	case STARTUP_GSSENC:
		(void)stream_write_raw(&c->s, "N", 1);
		return SA_CONSUMED;
	case STARTUP_CANCEL:
		client_set_state(c, CLIENT_CANCEL);
		stream_consume(&c->s, h->len);
		start_cancel(c, &m.cancel);
		return SA_STOP;
	case STARTUP_V3:
		client_set_names(c, m.user, m.database);
		/* Shutting down, the Unix socket stays open for the console only;
		 * handing over to a new process, a login under way completes
		 * (the client then moves). */
		if (!c->close_reason && c->world->shutting_down && c->world->shutdown_mode != SHUTDOWN_HANDOVER &&
		    !config_is_console_db(c->db_name))
			c->close_reason = "pooler is shutting down";
		if (c->close_reason) {
			client_close(c, true, c->close_reason);
			return SA_STOP;
		}
		if (c->world->cfg->client_tls_sslmode >= SSLMODE_REQUIRE && !c->s.tls && !c->is_unix) {
			client_close_sqlstate(c, "28000", "SSL required");
			return SA_STOP;
		}
		c->s.startup = false;
		note_startup_time(c);
		handle_startup(c, &m);
		return c->state == CLIENT_JUSTFREE ? SA_STOP : SA_CONSUMED;
	default:
		client_close(c, true, err[0] ? err : "bad startup packet");
		return SA_STOP;
	}
}

/* ---- relay ---- */

static void note_request(struct client *c, uint8_t type)
{
	struct server *sv = c->link;
	struct pool *p = c->pool;
	usec_t now = util_monotonic();

	/* Extended-protocol messages sent after the last Sync keep the server:
	 * its answers (and the Sync that ends them) are still to come. */
	if (type == 'P' || type == 'B' || type == 'D' || type == 'E' || type == 'C')
		sv->unsynced = true;
	/* A cancel that came while this request waited for a server follows
	 * it: the request goes out in this same turn, the cancel on a new
	 * connection after it (never to a later request). */
	if (c->cancel_wanted) {
		c->cancel_wanted = false;
		cancel_after_send(c);
	}
	if (type != 'Q' && type != 'S' && type != 'F')
		return;
	sv->unsynced = false;
	sv->expect_rfq++;
	if (!c->query_running) {
		c->query_running = true;
		c->query_start = now;
		sv->query_start = now;
	}
	if (!c->in_xact && !c->xact_start_set) {
		c->xact_start = now;
		c->xact_start_set = true;
	}
	p->stats.query_count++;
	c->last_activity = now;
	/* A cancel that came while this request waited for a server follows
	 * it: the request goes out in this same turn, the cancel on a new
	 * connection after it (never to a later request). */
}

static enum stream_action active_pkt(struct client *c, const struct pkt_hdr *h,
				     const uint8_t *data, size_t avail)
{
	if (h->type == 'X') {
		client_close(c, false, "client close request");
		return SA_STOP;
	}
	if (h->type == 'Q' && c->world->cfg->disable_pqexec) {
		/* PgBouncer's rule: only the extended protocol, so one message
		 * can never carry several statements. */
		client_close(c, true, "PQexec disallowed");
		return SA_STOP;
	}
	if (c->state == CLIENT_WAITING || c->state == CLIENT_WAITING_LOGIN)
		return SA_PAUSE;
	if (!c->link && h->type == 'H')
		return SA_SKIP;     /* Flush after the Sync (libpq pipelines): no server holds output for us */
	if (!c->link) {
		/* The previous server's last bytes are still on their way to
		 * us: a new server's replies must not overtake them. */
		if (stream_has_pending_out(&c->s)) {
			log_noise("C-%llu: waits for its output to drain (out=%u/%u blocked=%p hold=%p)",
				  (unsigned long long)c->id, c->s.out_sent, (unsigned)c->s.out.len,
				  (void *)c->s.blocked_src, (void *)c->s.hold_src);
			return SA_PAUSE;
		}
		if (c->world->shutting_down && c->world->shutdown_mode == SHUTDOWN_WAIT_SERVERS) {
			client_close(c, true, "server shutting down");
			return SA_STOP;
		}
		if (!pool_request_server(c))
			return c->state == CLIENT_JUSTFREE ? SA_STOP : SA_PAUSE;
	}
	if (c->link->internal == SI_SETVARS)
		return SA_PAUSE;
	if (c->link->cancels_pending > 0 && !c->query_running && !c->link->unsynced) {
		/* A cancel for its server is still on its way to PostgreSQL:
		 * a request sent now could be the one it cancels. */
		c->held_for_cancel = true;
		return SA_PAUSE;
	}
	if (psrelay_client_watch(c, h->type)) {
		const char *why = NULL;
		enum stream_action act = psrelay_client_pkt(c, h, data, avail, &why);
		if (why) {
			client_close(c, true, why);
			return SA_STOP;
		}
		if (act == SA_SKIP)
			note_request(c, h->type);    /* what psrelay sent stands in for it */
		if (act != SA_FORWARD)
			return act;
	}
	note_request(c, h->type);
	return SA_FORWARD;
}

static enum stream_action client_on_pkt(struct stream *s, const struct pkt_hdr *h,
					const uint8_t *data, size_t avail)
{
	struct client *c = s->owner;

	if (c->admin)
		return console->on_pkt(c, h, data, avail);
	switch (c->state) {
	case CLIENT_LOGIN:
		if (s->startup)
			return startup_pkt(c, h, data, avail);
		return auth_pkt(c, h, data, avail);
	case CLIENT_ACTIVE:
	case CLIENT_WAITING:
	case CLIENT_WAITING_LOGIN:
		return active_pkt(c, h, data, avail);
	default:
		return SA_PAUSE;
	}
}

void client_server_linked(struct client *c)
{
	if (c->state != CLIENT_ACTIVE)
		client_set_state(c, CLIENT_ACTIVE);
	stream_resume(&c->s);
}

static void client_on_event(struct stream *s, enum stream_event ev)
{
	struct client *c = s->owner;

	switch (ev) {
	case SE_EOF:
		client_close(c, false, "client unexpected eof");
		break;
	case SE_ERROR:
		/* A first packet that is no packet at all (node-postgres' early
		 * Terminate, an HTTP request): closed without a word, as
		 * PostgreSQL and PgBouncer do. */
		if (c->state == CLIENT_LOGIN && s->startup && s->bad_header) {
			log_debug("C-%llu: first packet: %s", (unsigned long long)c->id, s->errmsg);
			client_close(c, false, "bad packet");
			break;
		}
		client_close(c, c->state == CLIENT_LOGIN, s->errmsg ? s->errmsg : "client connection error");
		break;
	case SE_TLS_READY:
		c->tls_usec = util_monotonic() - c->phase_start;
		hist_phase_observe(HIST_PHASE_TLS, (uint64_t)c->tls_usec);
		c->s.startup = true;
		stream_start_reading(&c->s);
		break;
	case SE_TLS_HELLO:
		start_direct_tls(c);
		break;
	case SE_FLUSHED:
		/* Paused in active_pkt until our output drained. */
		if (c->state == CLIENT_ACTIVE && !c->link && c->s.paused)
			stream_resume(&c->s);
		break;
	default:
		break;
	}
}

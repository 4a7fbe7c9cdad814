/* pgcrew — unit tests for the server state machine (server.c) on the
 * session rig: login -> idle -> active -> tested (reset, check) -> idle,
 * the server's side of authentication, and the ways out: a refused login
 * (and the cached error for the next client; none for a login a RELOAD
 * outdated), a crash mid-query, data
 * from an idle server, a broken ReadyForQuery, an internal query that
 * leaves a transaction open; when server_check_query runs (PgBouncer's
 * rules, server_check_delay 0 and above) and what waits for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/md5.h"
#include "fakeclock.h"
#include "ipc.h"
#include "janitor.h"
#include "pool.h"
#include "rig.h"
#include "world.h"

static const char *const DBS = "db = @PG@ dbname=realdb\n";

/* The value of key in a startup packet's parameters, or NULL. */
static const char *startup_param(const struct msg *m, const char *key)
{
	size_t i = 4;
	while (i < m->len && m->body[i]) {
		const char *k = (const char *)m->body + i;
		const char *v = k + strlen(k) + 1;
		if (strcmp(k, key) == 0)
			return v;
		i = (size_t)(v + strlen(v) + 1 - (const char *)m->body);
	}
	return NULL;
}

static void send_auth(struct peer *pg, uint32_t code, const void *extra, size_t len)
{
	uint8_t b[64] = { 0, 0, 0, (uint8_t)code };
	if (len)
		memcpy(b + 4, extra, len);
	rig_send(pg, 'R', b, 4 + len);
}

/* alice's client comes; the pool's first server is taken (pg) and its
 * startup packet read into m; returns that server, logging in. */
static struct server *first_server(struct peer *c, struct peer *pg, struct msg *m)
{
	rig_start("", DBS);
	rig_client(c, "alice", "db");
	rig_pg_accept(pg);
	struct pool *p = rig_pool("db", "alice");
	struct server *sv = container_of(p->login_servers.next, struct server, node);
	assert_int_equal(p->n_login, 1);
	assert_int_equal(sv->state, SERVER_LOGIN);
	rig_read_startup(pg, m);
	return sv;
}

/* The pooler logs in as the pool's user to dbname, answering an MD5
 * challenge with auth_file's password; then the server is idle. */
static void test_login_md5(void **state)
{
	struct peer c, pg;
	struct msg m;
	static const uint8_t salt[4] = { 1, 2, 3, 4 };
	char hash[36], want[36];
	(void)state;
	struct server *sv = first_server(&c, &pg, &m);
	struct pool *p = sv->pool;
	assert_string_equal(startup_param(&m, "user"), "alice");
	assert_string_equal(startup_param(&m, "database"), "realdb");
	send_auth(&pg, 5, salt, 4);
	rig_expect(&pg, 'p', &m);
	md5_password_hash("alice", "secret", hash);
	md5_salted(hash, salt, want);
	assert_string_equal((const char *)m.body, want);
	send_auth(&pg, 0, NULL, 0);
	assert_int_equal(sv->state, SERVER_LOGIN);    /* until ReadyForQuery */
	rig_send(&pg, 'S', "TimeZone\0UTC", 13);
	rig_send(&pg, 'K', "\0\0\0\7\0\0\0\10", 8);
	rig_send(&pg, 'Z', "I", 1);
	rig_client_welcome(&c, NULL, NULL);
	assert_int_equal(sv->be.pid, 7);
	assert_int_equal(sv->be.len, 4);
	assert_int_equal(rig_be32(sv->be.secret), 8);
	assert_int_equal(sv->state, SERVER_IDLE);
	assert_int_equal(p->n_login, 0);
	assert_int_equal(p->n_idle, 1);
	rig_close(&c);
	rig_close(&pg);
}

/* A server that asks for SCRAM and then says AuthenticationOk without
 * finishing the exchange (libpq accepts that unless channel_binding is
 * required): logged in, and the SCRAM state, heap during login only, is
 * gone with the login. It leaked when such a server moved to another
 * worker (found by fuzz_session). */
static void test_login_sasl_cut_short(void **state)
{
	struct peer c, pg;
	struct msg m;
	(void)state;
	struct server *sv = first_server(&c, &pg, &m);
	send_auth(&pg, 10, "SCRAM-SHA-256\0", 15);
	rig_expect(&pg, 'p', &m);
	assert_string_equal((const char *)m.body, "SCRAM-SHA-256");
	assert_non_null(sv->scram);
	send_auth(&pg, 0, NULL, 0);
	rig_send(&pg, 'K', "\0\0\0\7\0\0\0\10", 8);
	rig_send(&pg, 'Z', "I", 1);
	rig_client_welcome(&c, NULL, NULL);
	assert_int_equal(sv->state, SERVER_IDLE);
	assert_null(sv->scram);
	rig_close(&c);
	rig_close(&pg);
}

/* A replication client hangs up while its own server logs in, and the
 * server's welcome is read before the client's hang-up: welcoming the
 * client fails, closing it closes its server, and the login's end must
 * not then treat that server as a pooled one (the worker stopped on
 * "transition out of justfree"; found by fuzz_session). */
static void test_replication_client_gone_at_login_end(void **state)
{
	static const char *const repl[] = { "replication", "true", NULL };
	struct peer c, pg;
	struct msg m;
	(void)state;
	rig_start("", DBS);
	rig_client_raw(&c);
	rig_send_startup_with(&c, "alice", "db", repl);
	rig_pg_accept(&pg);
	rig_read_startup(&pg, &m);
	/* The welcome, then the hang-up, with no turn of the loop between:
	 * the server's bytes are ready first. */
	static const uint8_t welcome[] = {
		'R', 0, 0, 0, 8, 0, 0, 0, 0,
		'S', 0, 0, 0, 24, 's', 'e', 'r', 'v', 'e', 'r', '_', 'v', 'e', 'r', 's', 'i', 'o', 'n', 0,
		'1', '5', '.', '0', 0,
		'K', 0, 0, 0, 12, 0, 0, 0, 7, 0, 0, 0, 8,
		'Z', 0, 0, 0, 5, 'I',
	};
	assert_int_equal(send(pg.fd, welcome, sizeof(welcome), MSG_NOSIGNAL), (ssize_t)sizeof(welcome));
	rig_close(&c);
	rig_expect_eof(&pg, NULL, 0);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_login + p->n_idle + p->n_active, 0);
	rig_close(&pg);
}

/* A new client of db gets the cached login error, and no server is tried. */
static void expect_cached_error(void)
{
	struct peer c;
	char err[512];
	rig_client(&c, "alice", "db");
	rig_expect_eof(&c, err, sizeof(err));
	assert_string_equal(err, "server login has been failing, cached error: password "
				 "authentication failed for user \"alice\" (server_login_retry)");
	assert_false(rig_pg_pending());
	rig_close(&c);
}

/* The pooler asks for protocol 3.2 (server_max_protocol_version): a
 * PostgreSQL 18 keeps it and sends a 32-byte key; an older one answers
 * NegotiateProtocolVersion 3.0 and a 4-byte key; with the setting at 3.0
 * nothing is negotiated. The key is kept whole for the cancels. */
static void test_protocol_versions(void **state)
{
	static const struct {
		const char *settings;
		int asked, server, key_len;
	} cases[] = {
		{ "", 2, 2, 32 },
		{ "", 2, 0, 4 },
		{ "", 2, 1, 4 },                  /* an old PgBouncer's 3.1 */
		{ "", 2, 2, 256 },                /* middleware in front of PostgreSQL */
		{ "server_max_protocol_version = 3.0", 0, 0, 4 },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct peer c, pg;
		struct msg m;
		struct cancelkey k = { .pid = 4321, .len = (uint16_t)cases[i].key_len };
		print_message("%s, server 3.%d\n", cases[i].settings, cases[i].server);
		for (int j = 0; j < k.len; j++)
			k.secret[j] = (uint8_t)(j + 100);
		rig_start(cases[i].settings, DBS);
		rig_client(&c, "alice", "db");
		rig_pg_accept(&pg);
		rig_read_startup(&pg, &m);
		assert_int_equal(rig_be32(m.body), 3u << 16 | (uint32_t)cases[i].asked);
		uint8_t npv[8];
		if (cases[i].server < cases[i].asked) {
			rig_put32(npv, 3u << 16 | (uint32_t)cases[i].server);
			rig_put32(npv + 4, 0);
			rig_send(&pg, 'v', npv, 8);
		}
		send_auth(&pg, 0, NULL, 0);
		uint8_t kb[4 + CANCELKEY_MAX];
		rig_put32(kb, k.pid);
		memcpy(kb + 4, k.secret, k.len);
		rig_send(&pg, 'K', kb, 4 + k.len);
		rig_send(&pg, 'Z', "I", 1);
		rig_client_welcome(&c, NULL, NULL);
		struct server *sv = container_of(rig_pool("db", "alice")->idle_servers.next, struct server, node);
		assert_int_equal(sv->proto_minor, cases[i].server);
		assert_int_equal(sv->be.pid, 4321);
		assert_int_equal(sv->be.len, k.len);
		assert_memory_equal(sv->be.secret, k.secret, k.len);
		rig_close(&c);
		rig_close(&pg);
		rig_stop();
	}
}

/* A server that breaks the protocol's rules on versions and keys is a
 * failed login: a long key after it negotiated 3.0, a key of 3 or 257
 * bytes, a NegotiateProtocolVersion for a newer or another major version,
 * or a cut one. */
static void test_bad_versions_and_keys(void **state)
{
	static const struct {
		const char *name;
		uint32_t npv;                 /* 0: none */
		size_t npv_len, key_len;
	} cases[] = {
		{ "32-byte key on 3.0", 3u << 16, 8, 32 },
		{ "3-byte key", 0, 0, 3 },
		{ "257-byte key", 0, 0, 257 },
		{ "no key at all", 0, 0, 0 },
		{ "negotiates 3.3", 3u << 16 | 3, 8, 4 },
		{ "negotiates 4.0", 4u << 16, 8, 4 },
		{ "cut NegotiateProtocolVersion", 3u << 16, 6, 4 },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct peer c, pg;
		struct msg m;
		char err[256];
		uint8_t b[8 + 300] = { 0 };
		print_message("%s\n", cases[i].name);
		rig_start("", DBS);
		rig_client(&c, "alice", "db");
		rig_pg_accept(&pg);
		rig_read_startup(&pg, &m);
		bool bad_npv = cases[i].npv_len && (cases[i].npv_len < 8 || cases[i].npv != 3u << 16);
		if (cases[i].npv_len) {
			rig_put32(b, cases[i].npv);
			rig_send(&pg, 'v', b, cases[i].npv_len);
		}
		if (!bad_npv) {
			send_auth(&pg, 0, NULL, 0);
			memset(b, 0, sizeof(b));
			rig_send(&pg, 'K', b, cases[i].key_len ? 4 + cases[i].key_len : 2);
		}
		rig_expect_eof(&c, err, sizeof(err));
		assert_non_null(strstr(err, "invalid"));
		rig_expect_eof(&pg, NULL, 0);
		rig_close(&c);
		rig_close(&pg);
		rig_stop();
	}
}

/* PostgreSQL refuses the login: the waiting client is told, the server
 * closed, and the next client within server_login_retry gets the cached
 * error without a new connection. */
/* alice's client (a) comes with server_login_retry = 30 and PostgreSQL
 * (pg) refuses the pool's first login: the client is told, the server
 * closed. */
static void refused_login(struct peer *a, struct peer *pg)
{
	char err[512];
	static const char fatal[] = "SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"alice\"\0";
	rig_start("server_login_retry = 30", DBS);
	rig_client(a, "alice", "db");
	rig_pg_accept(pg);
	struct msg m;
	rig_read_startup(pg, &m);
	rig_send(pg, 'E', fatal, sizeof(fatal));
	rig_expect_eof(a, err, sizeof(err));
	assert_string_equal(err, "password authentication failed for user \"alice\"");
	rig_expect_eof(pg, NULL, 0);
}

static void test_login_refused(void **state)
{
	struct peer a, b, pg;
	(void)state;
	refused_login(&a, &pg);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_login + p->n_idle, 0);
	assert_string_equal(p->login_error_code, "28P01");

	expect_cached_error();                  /* at once */
	fakeclock_advance(29 * USEC_PER_SEC);
	expect_cached_error();                  /* and until server_login_retry has passed */
	fakeclock_advance(2 * USEC_PER_SEC);
	rig_login_first(&b, &pg, 3);            /* then a login is tried again */
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

/* A RELOAD that changes the server TLS settings forgets the cached error
 * (worker.c retire_servers_for_tls): the next client's login is tried at
 * once, well inside server_login_retry. */
static void test_login_refused_forgotten(void **state)
{
	struct peer a, b, pg;
	(void)state;
	refused_login(&a, &pg);
	rig_close(&pg);
	expect_cached_error();
	struct pool *p = rig_pool("db", "alice");
	pool_forget_login_failures(rig_w);
	assert_int_equal(p->login_failed_at, 0);
	assert_string_equal(p->login_error, "");
	rig_login_first(&b, &pg, 3);            /* no cached error, no wait */
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

/* With two workers (the rig their supervisor): the pool's parameters are
 * unknown elsewhere, and the ledger grants the slot the login asks for. */
static void grant_login(int workers)
{
	struct slot_req r;
	uint32_t why;
	char names[2 * LEDGER_NAME];
	if (workers == 1)
		return;
	if (rig_sup_count(IPC_WELCOME_GET) == 1 && rig_sup_count(IPC_SLOT_REQ) == 0) {
		assert_int_equal(rig_sup_last(IPC_WELCOME_GET, NULL, names, sizeof(names)), sizeof(names));
		rig_sup_send(IPC_WELCOME, 0, names, sizeof(names));
	}
	assert_int_equal(rig_sup_last(IPC_SLOT_REQ, &why, &r, sizeof(r)), sizeof(r));
	rig_sup_send(IPC_SLOT_GRANT, why, &r, sizeof(r));
}

/* A login begun before a RELOAD that changed the pool's settings (the
 * reload marks the pool's logins close_needed) fails after it, refused by
 * PostgreSQL (refuse) or cut off (else): the failure is not cached for the
 * new settings, nor told to the other workers, the waiting client is not
 * told, and the janitor's next pass logs a new server in for it. */
static void outdated_login_fails(int workers, bool refuse)
{
	static const char fatal[] = "SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"alice\"\0";
	struct peer a, pg, pg2;
	struct msg m;
	rig_start_workers(workers, "server_login_retry = 30", DBS);
	rig_client(&a, "alice", "db");
	grant_login(workers);
	rig_pg_accept(&pg);
	rig_read_startup(&pg, &m);
	struct pool *p = rig_pool("db", "alice");
	pool_reconnect_db(p->db, "database configuration changed");
	if (refuse) {
		rig_send(&pg, 'E', fatal, sizeof(fatal));
		rig_expect_eof(&pg, NULL, 0);
	} else {
		rig_close(&pg);
	}
	rig_pump();
	assert_int_equal(p->n_login, 0);
	assert_int_equal(p->login_failed_at, 0);
	assert_string_equal(p->login_error, "");
	assert_int_equal(rig_sup_count(IPC_LOGIN_FAILED), 0);
	rig_expect_nothing(&a);                 /* still waiting, not refused */
	janitor_pass(rig_w);
	grant_login(workers);
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 3, 4);
	rig_client_welcome(&a, NULL, NULL);
	rig_round_trip(&a, &pg2, "SELECT 1", 'I');
	rig_close(&pg);                         /* already closed when cut off */
	rig_close(&a);
	rig_close(&pg2);
}

static void test_outdated_login_refused(void **state)
{
	(void)state;
	outdated_login_fails(1, true);
}

static void test_outdated_login_cut_off(void **state)
{
	(void)state;
	outdated_login_fails(1, false);
}

static void test_outdated_login_two_workers(void **state)
{
	(void)state;
	outdated_login_fails(2, true);
}

/* The server goes away mid-query: its client is told and closed. */
static void test_crash(void **state)
{
	struct peer c, pg;
	char err[256];
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&c, &pg, 9);
	rig_send_query(&c, "SELECT pg_sleep(10)");
	rig_expect(&pg, 'Q', NULL);
	rig_close(&pg);
	rig_expect_eof(&c, err, sizeof(err));
	assert_string_equal(err, "server conn crashed?");
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_active + p->n_idle, 0);
	assert_int_equal(rig_w->n_clients, 0);
	rig_close(&c);
}

/* An idle server may send notices and parameter changes; anything else
 * means it is broken and it is closed. */
static void test_idle_server_data(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&c, &pg, 9);
	struct pool *p = rig_pool("db", "alice");
	rig_send(&pg, 'N', "SNOTICE\0Mhello\0", 16);
	rig_send(&pg, 'S', "TimeZone\0UTC", 13);
	assert_int_equal(p->n_idle, 1);
	rig_send(&pg, 'C', "SELECT 1", 9);
	rig_expect(&pg, 'X', NULL);      /* polite Terminate */
	rig_expect_eof(&pg, NULL, 0);
	assert_int_equal(p->n_idle, 0);
	/* The client is not hurt: its next query gets a new server. */
	rig_send_query(&c, "SELECT 2");
	rig_pg_accept(&pg);
	rig_pg_login(&pg, 10, 10);
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_close(&c);
	rig_close(&pg);
}

static void test_bad_ready_for_query(void **state)
{
	struct peer c, pg;
	char err[256];
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&c, &pg, 9);
	rig_send_query(&c, "SELECT 1");
	rig_expect(&pg, 'Q', NULL);
	rig_send(&pg, 'Z', "II", 2);
	rig_expect_eof(&c, err, sizeof(err));
	assert_string_equal(err, "server conn crashed?");
	rig_close(&c);
	rig_close(&pg);
}

/* Session mode: the reset query after the client leaves; one that leaves a
 * transaction open costs the server. */
static void test_reset_left_open(void **state)
{
	struct peer c, pg;
	struct msg m;
	(void)state;
	rig_start("pool_mode = session\nserver_reset_query = ROLLBACK; DISCARD ALL", DBS);
	rig_login_first(&c, &pg, 9);
	rig_send_query(&c, "SELECT 1");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', NULL);
	struct server *sv = rig_client_of(&c)->link;
	rig_close(&c);
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "ROLLBACK; DISCARD ALL");
	assert_int_equal(sv->state, SERVER_TESTED);
	rig_send_done(&pg, "BEGIN", 'T');
	rig_expect_eof(&pg, NULL, 0);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle + p->n_tested, 0);
}

/* server_check_delay = 0: a server that has served a client is checked
 * with server_check_query before the next one gets it. */
static void test_check_query(void **state)
{
	struct peer c, pg;
	struct msg m;
	(void)state;
	rig_start("pool_mode = transaction\nserver_check_delay = 0\nserver_check_query = select 1", DBS);
	rig_login_first(&c, &pg, 9);
	rig_send_query(&c, "SELECT 'first'");
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 'first'");
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', NULL);
	rig_send_query(&c, "SELECT 'second'");
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "select 1");
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_tested, 1);
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING);
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 'second'");
	assert_int_equal(p->n_active, 1);
	rig_close(&c);
	rig_close(&pg);
}

/* The check server_check_query's default (<empty>) sends: an empty Query,
 * answered with EmptyQueryResponse and ReadyForQuery. */
static void expect_empty_check(struct peer *pg)
{
	struct msg m;
	rig_expect(pg, 'Q', &m);
	assert_int_equal(m.len, 1);
	assert_string_equal((const char *)m.body, "");
	rig_send(pg, 'I', NULL, 0);
	rig_send(pg, 'Z', "I", 1);
}

static void expect_query(struct peer *pg, const char *sql)
{
	struct msg m;
	rig_expect(pg, 'Q', &m);
	assert_string_equal((const char *)m.body, sql);
}

/* c's query sql reaches pg next, is answered, and c has the answer. */
static void expect_served(struct peer *pg, struct peer *c, const char *sql)
{
	expect_query(pg, sql);
	rig_send_done(pg, "SELECT 1", 'I');
	rig_expect(c, 'C', NULL);
}

/* server_check_delay = 0, server_check_query at its default (issue 43
 * item 2): the client waits for the check of the server it used, not for
 * a second server (PgBouncer's waiters wait for a server being tested),
 * and a server a transaction releases to a waiting client is checked
 * first (PgBouncer's release puts it in "used"). */
static void test_check_before_reuse(void **state)
{
	struct peer a, b, pg;
	(void)state;
	rig_start("pool_mode = transaction\nserver_check_delay = 0\ndefault_pool_size = 1", DBS);
	rig_login_first(&a, &pg, 9);
	struct pool *p = rig_pool("db", "alice");
	rig_round_trip(&a, &pg, "SELECT 1", 'I');     /* fresh from login: no check */
	rig_send_query(&a, "BEGIN");
	assert_int_equal(p->n_tested, 1);
	assert_int_equal(p->n_login + p->n_slot_wait, 0);
	assert_false(rig_pg_pending());
	expect_empty_check(&pg);
	expect_query(&pg, "BEGIN");
	rig_send_done(&pg, "BEGIN", 'T');
	rig_expect(&a, 'C', NULL);
	rig_expect(&a, 'Z', NULL);
	rig_login(&b);
	rig_send_query(&b, "SELECT 'b'");
	rig_pump();
	assert_int_equal(rig_client_of(&b)->state, CLIENT_WAITING);
	rig_round_trip(&a, &pg, "COMMIT", 'I');
	expect_empty_check(&pg);
	expect_served(&pg, &b, "SELECT 'b'");
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

/* Session pooling with server_check_delay = 0: a released server gets
 * server_reset_query, not a check, and a client that comes meanwhile
 * waits for it rather than open another; the server is checked only once
 * it has been idle for a maintenance period of PgBouncer's (a third of a
 * second, when PgBouncer's pass has surely marked it "used"). */
static void test_check_session_idle(void **state)
{
	struct peer a, b, c, pg;
	struct msg m;
	(void)state;
	rig_start("pool_mode = session\nserver_check_delay = 0", DBS);
	rig_login_first(&a, &pg, 9);
	struct pool *p = rig_pool("db", "alice");
	rig_round_trip(&a, &pg, "SELECT 1", 'I');
	rig_close(&a);
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "DISCARD ALL");
	rig_login(&b);
	rig_send_query(&b, "SELECT 'b'");
	rig_pump();
	assert_int_equal(p->n_login + p->n_slot_wait, 0);   /* waits for the reset */
	assert_false(rig_pg_pending());
	rig_send_done(&pg, "DISCARD ALL", 'I');
	expect_served(&pg, &b, "SELECT 'b'");
	rig_close(&b);
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "DISCARD ALL", 'I');
	rig_pump();
	struct server *sv = container_of(p->idle_servers.next, struct server, node);
	fakeclock_advance(USEC_PER_SEC / 3 - 1);
	assert_false(pool_server_stale(sv));
	fakeclock_advance(1);
	assert_true(pool_server_stale(sv));
	rig_login(&c);
	rig_send_query(&c, "SELECT 'c'");
	expect_empty_check(&pg);
	expect_served(&pg, &c, "SELECT 'c'");
	rig_close(&c);
	rig_close(&pg);
}

/* server_check_delay > 0: a server idle that long is checked, one fresh
 * from login too (PgBouncer's pass marks any idle server "used"). */
static void test_check_fresh_server(void **state)
{
	struct peer a, pg;
	(void)state;
	rig_start("pool_mode = transaction\nserver_check_delay = 1", DBS);
	rig_login_first(&a, &pg, 9);
	struct pool *p = rig_pool("db", "alice");
	struct server *sv = container_of(p->idle_servers.next, struct server, node);
	fakeclock_advance(USEC_PER_SEC - 1);
	assert_false(pool_server_stale(sv));
	fakeclock_advance(1);
	assert_true(pool_server_stale(sv));
	rig_send_query(&a, "SELECT 1");
	expect_empty_check(&pg);
	expect_served(&pg, &a, "SELECT 1");
	rig_close(&a);
	rig_close(&pg);
}

/* A client whose TimeZone differs from the server's gets a SET on the
 * server first (SI_SETVARS); the server stays active for it meanwhile. */
static void test_setvars(void **state)
{
	struct peer a, b, pg;
	struct msg m;
	static const char *const tz[] = { "TimeZone", "Europe/Paris", NULL };
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&a, &pg, 9);
	rig_client_raw(&b);
	rig_send_startup_with(&b, "alice", "db", tz);
	rig_client_welcome(&b, NULL, NULL);
	rig_send_query(&b, "SELECT now()");
	rig_expect(&pg, 'Q', &m);
	assert_non_null(strstr((const char *)m.body, "Europe/Paris"));
	struct server *sv = rig_client_of(&b)->link;
	assert_non_null(sv);
	assert_int_equal(sv->state, SERVER_ACTIVE);
	assert_int_equal(sv->internal, SI_SETVARS);
	rig_send(&pg, 'S', "TimeZone\0Europe/Paris", 22);
	rig_send_done(&pg, "SET", 'I');
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT now()");
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&b, 'C', NULL);
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

/* A client that leaves while the SET made for it runs: the server is not
 * at a message boundary until the SET's answer is in (issue 40 item 5).
 * Given to the next client at once, that client's own SET went out behind
 * the first; the first answer completed the first SET, the client's query
 * followed, and the second SET's answer (CommandComplete, ParameterStatus,
 * ReadyForQuery) reached the client as the answer to its query. */
static void test_client_gone_during_setvars(void **state)
{
	struct peer a, b, c, pg;
	struct msg m;
	static const char *const paris[] = { "TimeZone", "Europe/Paris", NULL };
	static const char *const tokyo[] = { "TimeZone", "Asia/Tokyo", NULL };
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1", DBS);
	rig_login_first(&a, &pg, 9);
	rig_client_raw(&b);
	rig_send_startup_with(&b, "alice", "db", paris);
	rig_client_welcome(&b, NULL, NULL);
	rig_client_raw(&c);
	rig_send_startup_with(&c, "alice", "db", tokyo);
	rig_client_welcome(&c, NULL, NULL);

	rig_send_query(&b, "SELECT 'b'");
	rig_expect(&pg, 'Q', &m);
	assert_non_null(strstr((const char *)m.body, "Europe/Paris"));
	rig_send_query(&c, "SELECT 'c'");
	rig_pump();
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING);
	struct server *sv = rig_client_of(&b)->link;
	rig_close(&b);
	rig_pump();
	/* Not handed out with the SET's answer owed, nor closed. */
	assert_int_equal(sv->state, SERVER_TESTED);
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING);
	rig_expect_nothing(&pg);

	rig_send(&pg, 'S', "TimeZone\0Europe/Paris", 22);
	rig_send_done(&pg, "SET", 'I');
	rig_expect(&pg, 'Q', &m);
	assert_non_null(strstr((const char *)m.body, "Asia/Tokyo"));
	rig_send(&pg, 'S', "TimeZone\0Asia/Tokyo", 20);
	rig_send_done(&pg, "SET", 'I');
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 'c'");
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', &m);
	assert_string_equal((const char *)m.body, "SELECT 1");
	rig_expect(&c, 'Z', NULL);
	rig_close(&a);
	rig_close(&c);
	rig_close(&pg);
}

/* The same with the SET left in a transaction (its client's options made
 * one fail inside BEGIN, say): the server is closed, not pooled. */
static void test_client_gone_during_setvars_not_idle(void **state)
{
	struct peer a, b, pg;
	struct msg m;
	static const char *const paris[] = { "TimeZone", "Europe/Paris", NULL };
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&a, &pg, 9);
	rig_client_raw(&b);
	rig_send_startup_with(&b, "alice", "db", paris);
	rig_client_welcome(&b, NULL, NULL);
	rig_send_query(&b, "SELECT 'b'");
	rig_expect(&pg, 'Q', &m);
	rig_close(&b);
	rig_pump();
	rig_send_done(&pg, "SET", 'E');
	rig_expect_eof(&pg, NULL, 0);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle + p->n_tested + p->n_active, 0);
	rig_close(&a);
}

/* A client that announced a message longer than what it sent, then left:
 * the server holds the start of it and would read the next client's
 * bytes as the rest (issue 40 item 3). It is closed, with PgBouncer's
 * reason, and the next query gets a new server. */
static void test_client_gone_mid_message(void **state)
{
	static const uint8_t half[] = { 'd', 0, 0, 0, 200, 'a', 'b', 'c' };
	struct peer a, b, pg, pg2;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1", DBS);
	rig_login_first(&a, &pg, 9);
	rig_client(&b, "alice", "db");
	rig_client_welcome(&b, NULL, NULL);
	assert_int_equal((int)write(b.fd, half, sizeof(half)), (int)sizeof(half));
	rig_pump();
	struct server *sv = rig_client_of(&b)->link;
	assert_non_null(sv);
	rig_close(&b);
	rig_pump();
	rig_expect_eof(&pg, NULL, 0);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle + p->n_active, 0);
	rig_send_query(&a, "SELECT 2");
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 10, 11);
	rig_expect(&pg2, 'Q', NULL);
	rig_send_done(&pg2, "SELECT 1", 'I');
	rig_expect(&a, 'C', NULL);
	rig_expect(&a, 'Z', NULL);
	rig_close(&a);
	rig_close(&pg);
	rig_close(&pg2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_login_md5, rig_teardown),
		cmocka_unit_test_teardown(test_login_sasl_cut_short, rig_teardown),
		cmocka_unit_test_teardown(test_login_refused, rig_teardown),
		cmocka_unit_test_teardown(test_login_refused_forgotten, rig_teardown),
		cmocka_unit_test_teardown(test_outdated_login_refused, rig_teardown),
		cmocka_unit_test_teardown(test_outdated_login_cut_off, rig_teardown),
		cmocka_unit_test_teardown(test_outdated_login_two_workers, rig_teardown),
		cmocka_unit_test_teardown(test_protocol_versions, rig_teardown),
		cmocka_unit_test_teardown(test_bad_versions_and_keys, rig_teardown),
		cmocka_unit_test_teardown(test_crash, rig_teardown),
		cmocka_unit_test_teardown(test_idle_server_data, rig_teardown),
		cmocka_unit_test_teardown(test_bad_ready_for_query, rig_teardown),
		cmocka_unit_test_teardown(test_reset_left_open, rig_teardown),
		cmocka_unit_test_teardown(test_check_query, rig_teardown),
		cmocka_unit_test_teardown(test_check_before_reuse, rig_teardown),
		cmocka_unit_test_teardown(test_check_session_idle, rig_teardown),
		cmocka_unit_test_teardown(test_check_fresh_server, rig_teardown),
		cmocka_unit_test_teardown(test_setvars, rig_teardown),
		cmocka_unit_test_teardown(test_client_gone_during_setvars, rig_teardown),
		cmocka_unit_test_teardown(test_client_gone_during_setvars_not_idle, rig_teardown),
		cmocka_unit_test_teardown(test_client_gone_mid_message, rig_teardown),
		cmocka_unit_test_teardown(test_replication_client_gone_at_login_end, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for the client state machine (client.c) on the
 * session rig: login -> waiting for the pool's welcome -> active -> waiting
 * for a server -> active -> gone, and the ways out of each state: unknown
 * database, wrong password, malformed packets, limits, EOF while queued;
 * a client socket handed from another worker keeps its id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/md5.h"
#include "ipc.h"
#include "pool.h"
#include "rig.h"
#include "shm.h"
#include "world.h"

static const char *const DBS = "db = @PG@ dbname=db\n";

static bool on_list(const struct list *l, const struct client *c)
{
	const struct list *it;
	list_for_each(it, l)
		if (it == &c->node)
			return true;
	return false;
}

static void test_states(void **state)
{
	struct peer c, pg;
	struct msg m;
	uint32_t pid = 0, key = 0;
	(void)state;
	rig_start("pool_mode = transaction", DBS);

	/* Accepted: logging in, on the login list, before any packet. */
	assert_int_equal(rig_w->n_clients, 0);
	rig_client_raw(&c);
	struct client *cl = rig_client_of(&c);
	assert_non_null(cl);
	assert_int_equal(cl->state, CLIENT_LOGIN);
	assert_true(on_list(&rig_w->login_clients, cl));
	assert_int_equal(rig_w->n_clients, 1);
	rig_send_startup(&c, "alice", "db");
	/* The pool has no welcome yet: the client waits for the first server's. */
	rig_pg_accept(&pg);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(cl->state, CLIENT_WAITING_LOGIN);
	assert_true(on_list(&p->waiting_clients, cl));
	assert_int_equal(p->n_login, 1);
	rig_expect_nothing(&c);
	rig_pg_login(&pg, 4242, 99);
	rig_client_welcome(&c, &pid, &key);
	assert_int_equal(cl->state, CLIENT_ACTIVE);
	assert_true(on_list(&p->active_clients, cl));
	/* The client's cancel key is its own, not the server's. */
	assert_int_equal(pid, cl->key.pid);
	assert_int_equal(cl->key.len, 4);            /* a protocol 3.0 client */
	assert_int_equal(key, rig_be32(cl->key.secret));
	assert_true(pid != 4242 || key != 99);

	/* A query with no idle server: waiting, then linked when one is. */
	rig_send_query(&c, "BEGIN");
	rig_expect(&pg, 'Q', NULL);
	assert_int_equal(cl->state, CLIENT_ACTIVE);
	assert_non_null(cl->link);
	assert_true(cl->query_running);
	rig_send_done(&pg, "BEGIN", 'T');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', &m);
	assert_false(cl->query_running);
	assert_true(cl->in_xact);

	/* Terminate inside a transaction: the client goes, its server is
	 * closed (not pooled mid-transaction), both are freed. */
	rig_send(&c, 'X', NULL, 0);
	rig_pump();
	assert_null(rig_client_of(&c));
	assert_int_equal(rig_w->n_clients, 0);
	assert_int_equal(p->n_active_clients, 0);
	assert_true(list_empty(&rig_w->justfree_clients));
	rig_expect_eof(&pg, NULL, 0);
	assert_int_equal(p->n_idle + p->n_active, 0);
	rig_close(&c);
	rig_close(&pg);
}

/* Once the pool knows its welcome, a login needs no server at all. */
static void test_second_login(void **state)
{
	struct peer a, b, pg;
	(void)state;
	rig_start("", DBS);
	rig_login_first(&a, &pg, 1);
	rig_login(&b);
	assert_int_equal(rig_client_of(&b)->state, CLIENT_ACTIVE);
	assert_false(rig_pg_pending());
	rig_expect_nothing(&pg);
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

static void test_no_such_database(void **state)
{
	struct peer c;
	char err[256];
	(void)state;
	rig_start("", DBS);
	rig_client(&c, "alice", "nope");
	rig_expect_eof(&c, err, sizeof(err));
	assert_string_equal(err, "no such database: nope");
	assert_int_equal(rig_w->n_clients, 0);
	assert_false(rig_pg_pending());
	rig_close(&c);
}

static void md5_answer(struct peer *c, const char *user, const char *password)
{
	struct msg m;
	char hash[36], salted[36];
	rig_expect(c, 'R', &m);
	assert_int_equal(m.len, 8);
	assert_int_equal(m.body[3], 5);          /* AuthenticationMD5Password */
	md5_password_hash(user, password, hash);
	md5_salted(hash, m.body + 4, salted);
	rig_send(c, 'p', salted, strlen(salted) + 1);
}

static void test_md5(void **state)
{
	struct peer good, bad, ghost, pg;
	char err[256];
	(void)state;
	rig_start("auth_type = md5", DBS);
	rig_client(&bad, "alice", "db");
	md5_answer(&bad, "alice", "wrong");
	rig_expect_eof(&bad, err, sizeof(err));
	assert_string_equal(err, "password authentication failed");
	/* A user not in auth_file gets the same answer, after the same steps. */
	rig_client(&ghost, "ghost", "db");
	md5_answer(&ghost, "ghost", "secret");
	rig_expect_eof(&ghost, err, sizeof(err));
	assert_string_equal(err, "password authentication failed");
	assert_false(rig_pg_pending());

	rig_client(&good, "alice", "db");
	md5_answer(&good, "alice", "secret");
	rig_pg_accept(&pg);
	rig_pg_login(&pg, 5, 6);
	rig_client_welcome(&good, NULL, NULL);
	assert_int_equal(rig_w->n_clients, 1);
	rig_close(&good);
	rig_close(&bad);
	rig_close(&ghost);
	rig_close(&pg);
}

/* A broken packet costs its sender the connection, nobody else anything. */
static void test_bad_packets(void **state)
{
	struct peer a, b, c, d, pg;
	static const uint8_t huge_startup[] = { 0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 0 };
	static const uint8_t short_msg[] = { 'Q', 0, 0, 0, 3 };
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&a, &pg, 1);

	/* A first packet that is no startup packet: closed without a word. */
	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	rig_client_raw(&b);
	assert_int_equal(send(b.fd, http, sizeof(http) - 1, 0), (ssize_t)sizeof(http) - 1);
	rig_expect_eof(&b, NULL, 0);
	assert_int_equal(b.len, 0);
	/* An oversized startup length. */
	rig_client_raw(&d);
	assert_int_equal(send(d.fd, huge_startup, sizeof(huge_startup), 0), (ssize_t)sizeof(huge_startup));
	rig_expect_eof(&d, NULL, 0);
	/* A logged-in client sends a length below 4. */
	rig_login(&c);
	assert_int_equal(send(c.fd, short_msg, sizeof(short_msg), 0), (ssize_t)sizeof(short_msg));
	rig_expect_eof(&c, NULL, 0);

	/* The first client and its server carry on. */
	rig_send_query(&a, "SELECT 1");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&a, 'C', NULL);
	rig_expect(&a, 'Z', NULL);
	assert_int_equal(rig_w->n_clients, 1);
	rig_close(&a);
	rig_close(&c);
	rig_close(&d);
	rig_close(&pg);
}

static void test_max_client_conn(void **state)
{
	struct peer a, b, pg;
	char err[256];
	(void)state;
	rig_start("max_client_conn = 1", DBS);
	rig_login_first(&a, &pg, 1);
	rig_client(&b, "alice", "db");
	rig_expect_eof(&b, err, sizeof(err));
	assert_string_equal(err, "no more connections allowed (max_client_conn)");
	/* The slot comes back when the first client leaves. */
	rig_close(&a);
	rig_close(&b);
	rig_login(&b);
	rig_close(&b);
	rig_close(&pg);
}

/* A client that leaves while queued for a server leaves the queue; the
 * server, when released, is parked idle rather than handed to it. */
static void test_eof_while_waiting(void **state)
{
	struct peer a, b, pg;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1", DBS);
	rig_login_first(&a, &pg, 1);
	rig_login(&b);
	struct pool *p = rig_pool("db", "alice");
	rig_send_query(&a, "BEGIN");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "BEGIN", 'T');
	rig_send_query(&b, "SELECT 1");
	assert_int_equal(p->n_waiting_clients, 1);
	rig_close(&b);
	assert_int_equal(p->n_waiting_clients, 0);
	assert_int_equal(rig_w->n_clients, 1);
	rig_send_query(&a, "COMMIT");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "COMMIT", 'I');
	rig_expect(&a, 'C', NULL);
	rig_expect(&a, 'Z', NULL);
	rig_expect(&a, 'C', NULL);
	rig_expect(&a, 'Z', NULL);
	rig_expect_nothing(&pg);
	assert_int_equal(p->n_idle, 1);
	rig_close(&a);
	rig_close(&pg);
}

/* A client socket another worker accepted and handed here (the balance,
 * IPC_CLIENT_FD) keeps the id taken at its accept, so ids follow the
 * order of accepts, as PgBouncer's; one whose message does not read takes
 * the next id here. */
static void test_handed_client_id(void **state)
{
	int sv[2];
	(void)state;
	rig_start_workers(2, "", DBS);
	for (int bad = 0; bad < 2; bad++) {
		struct client_fd m = { .target = 0, .id = 1000 };
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
		assert_true(rig_sup_post(IPC_CLIENT_FD, 0, &m, bad ? sizeof(m) - 1 : sizeof(m), sv[0]));
		close(sv[0]);
		uint64_t next = shm_next_id();
		rig_pump();
		struct list *last = rig_w->all_clients.prev;
		assert_true(last != &rig_w->all_clients);
		struct client *c = container_of(last, struct client, all_node);
		assert_int_equal(c->id, bad ? next + 1 : 1000);
		close(sv[1]);
		rig_pump();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_states, rig_teardown),
		cmocka_unit_test_teardown(test_second_login, rig_teardown),
		cmocka_unit_test_teardown(test_no_such_database, rig_teardown),
		cmocka_unit_test_teardown(test_md5, rig_teardown),
		cmocka_unit_test_teardown(test_bad_packets, rig_teardown),
		cmocka_unit_test_teardown(test_max_client_conn, rig_teardown),
		cmocka_unit_test_teardown(test_handed_client_id, rig_teardown),
		cmocka_unit_test_teardown(test_eof_while_waiting, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for cancel routing (cancel.c) on the session rig: a
 * CancelRequest with a client's key reaches PostgreSQL with the key of the
 * server running its query; unknown keys and idle clients cancel nothing;
 * a cancel for a queued client follows its query to the server; a server
 * released with a cancel in flight waits for it (being_canceled); a
 * client gone mid-query cancels the query; a key of another worker goes
 * to the supervisor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ipc.h"
#include "pool.h"
#include "proto/packet.h"
#include "rig.h"
#include "world.h"

static const char *const DBS = "db = @PG@ dbname=db\n";

/* A new connection sends CancelRequest(pid, key); the pooler closes it. */
static void send_cancel(uint32_t pid, uint32_t key)
{
	struct peer x;
	uint8_t b[12];
	rig_put32(b, PROTO_CANCEL_REQUEST);
	rig_put32(b + 4, pid);
	rig_put32(b + 8, key);
	rig_client_raw(&x);
	rig_send(&x, 0, b, sizeof(b));
	rig_expect_eof(&x, NULL, 0);
	assert_int_equal(x.len, 0);      /* no answer, as PostgreSQL */
	rig_close(&x);
}

/* The fake server receives a cancel connection for backend pid/key. */
static void expect_pg_cancel(uint32_t pid, uint32_t key)
{
	struct peer cx;
	struct msg m;
	rig_pg_accept(&cx);
	rig_read_startup(&cx, &m);
	assert_int_equal(m.len, 12);
	assert_int_equal(rig_be32(m.body), PROTO_CANCEL_REQUEST);
	assert_int_equal(rig_be32(m.body + 4), pid);
	assert_int_equal(rig_be32(m.body + 8), key);
	rig_close(&cx);          /* as PostgreSQL: done, connection closed */
}

static void login(struct peer *c, struct peer *pg, uint32_t *pid, uint32_t *key)
{
	rig_client(c, "alice", "db");
	rig_pg_accept(pg);
	rig_pg_login(pg, 700, 701);
	rig_client_welcome(c, pid, key);
}

static void test_running_query(void **state)
{
	struct peer c, pg;
	uint32_t pid, key;
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	login(&c, &pg, &pid, &key);
	/* Idle client: nothing to cancel. Wrong key: nothing either. */
	send_cancel(pid, key);
	assert_false(rig_pg_pending());
	rig_send_query(&c, "SELECT pg_sleep(100)");
	rig_expect(&pg, 'Q', NULL);
	send_cancel(pid, key + 1);
	assert_false(rig_pg_pending());
	/* The right key: the server's own key goes to PostgreSQL. */
	send_cancel(pid, key);
	expect_pg_cancel(700, 701);
	static const char err[] = "SERROR\0C57014\0Mcanceling statement due to user request\0";
	rig_send(&pg, 'E', err, sizeof(err));
	rig_send(&pg, 'Z', "I", 1);
	struct msg m;
	rig_expect(&c, 'E', &m);
	assert_string_equal(rig_field(&m, 'C'), "57014");
	rig_expect(&c, 'Z', NULL);
	rig_close(&c);
	rig_close(&pg);
}

/* Released while its cancel is still in flight, the server is not handed
 * out: the cancel could hit the next client's query. */
/* Client c's query runs on pg, its cancel reaches PostgreSQL on cx, and
 * the query ends before PostgreSQL has processed the cancel. */
static void cancel_in_flight(const char *settings, struct peer *c, struct peer *pg, struct peer *cx)
{
	uint32_t pid, key;
	struct msg m;
	rig_start(settings, DBS);
	login(c, pg, &pid, &key);
	rig_send_query(c, "SELECT 1");
	rig_expect(pg, 'Q', NULL);
	send_cancel(pid, key);
	rig_pg_accept(cx);
	rig_read_startup(cx, &m);
	rig_send_done(pg, "SELECT 1", 'I');
	rig_expect(c, 'C', NULL);
	rig_expect(c, 'Z', NULL);
}

static void test_being_canceled(void **state)
{
	struct peer c, pg, cx;
	(void)state;
	cancel_in_flight("pool_mode = transaction", &c, &pg, &cx);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_canceled, 1);
	assert_int_equal(p->n_idle, 0);
	rig_close(&cx);
	rig_pump();
	assert_int_equal(p->n_canceled, 0);
	assert_int_equal(p->n_idle, 1);
	rig_close(&c);
	rig_close(&pg);
}

/* Session mode: the client leaves while its cancel is in flight; the
 * server waits for the cancel, then runs its reset, counted as tested. */
static void test_reset_after_cancel(void **state)
{
	struct peer c, pg, cx;
	struct msg m;
	(void)state;
	cancel_in_flight("pool_mode = session", &c, &pg, &cx);
	struct server *sv = rig_client_of(&c)->link;
	rig_close(&c);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(sv->state, SERVER_BEING_CANCELED);
	rig_expect_nothing(&pg);
	rig_close(&cx);                     /* the cancel is answered */
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "DISCARD ALL");
	assert_int_equal(sv->state, SERVER_TESTED);
	assert_int_equal(p->n_tested, 1);
	rig_send_done(&pg, "DISCARD ALL", 'I');
	rig_pump();
	assert_int_equal(p->n_idle, 1);
	rig_close(&pg);
}

/* A cancel for a client still queued for a server is kept until its query
 * has reached one. */
static void test_waiting_client(void **state)
{
	struct peer a, b, pg;
	uint32_t pid, key;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1", DBS);
	login(&a, &pg, NULL, NULL);
	rig_client(&b, "alice", "db");
	rig_client_welcome(&b, &pid, &key);
	rig_send_query(&a, "BEGIN");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "BEGIN", 'T');
	rig_send_query(&b, "SELECT pg_sleep(100)");
	assert_int_equal(rig_client_of(&b)->state, CLIENT_WAITING);
	send_cancel(pid, key);
	assert_true(rig_client_of(&b)->cancel_wanted);
	assert_false(rig_pg_pending());
	rig_send_query(&a, "COMMIT");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "COMMIT", 'I');
	struct msg m;
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT pg_sleep(100)");
	expect_pg_cancel(700, 701);       /* sent a moment after the query */
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

/* The client goes while its query runs: the query is canceled and the
 * server closed (its state is unknown). */
static void test_client_gone_busy(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	login(&c, &pg, NULL, NULL);
	rig_send_query(&c, "SELECT pg_sleep(100)");
	rig_expect(&pg, 'Q', NULL);
	rig_close(&c);
	expect_pg_cancel(700, 701);
	rig_expect_eof(&pg, NULL, 0);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_active + p->n_idle + p->n_canceled, 0);
	rig_close(&pg);
}

/* Worker 0 of 2 gets a cancel whose key names worker 1: it goes to the
 * supervisor, which routes it there; nothing is sent to PostgreSQL here. */
static void test_other_worker(void **state)
{
	uint8_t payload[64];
	(void)state;
	rig_start_workers(2, "", DBS);
	uint32_t pid = 1u << 24 | 12345, key = 777;
	send_cancel(pid, key);
	assert_int_equal(rig_sup_count(IPC_CANCEL_FWD), 1);
	size_t n = rig_sup_last(IPC_CANCEL_FWD, NULL, payload, sizeof(payload));
	struct ipc_hdr h = { .type = IPC_CANCEL_FWD, .len = (uint32_t)n };
	uint32_t got_pid, got_key;
	assert_true(ipc_get_cancel(&h, payload, &got_pid, &got_key));
	assert_int_equal(got_pid, pid);
	assert_int_equal(got_key, key);
	/* A key of this worker stays here. */
	send_cancel(12345, key);
	assert_int_equal(rig_sup_count(IPC_CANCEL_FWD), 1);
	assert_false(rig_pg_pending());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_running_query, rig_teardown),
		cmocka_unit_test_teardown(test_being_canceled, rig_teardown),
		cmocka_unit_test_teardown(test_reset_after_cancel, rig_teardown),
		cmocka_unit_test_teardown(test_waiting_client, rig_teardown),
		cmocka_unit_test_teardown(test_client_gone_busy, rig_teardown),
		cmocka_unit_test_teardown(test_other_worker, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

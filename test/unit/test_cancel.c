/* pgcrew — unit tests for cancel routing (cancel.c) on the session rig: a
 * CancelRequest with a client's key reaches PostgreSQL with the key of the
 * server running its query; unknown keys and idle clients cancel nothing;
 * a cancel for a queued client follows its query to the server (and is
 * dropped if the query ended first); a linked client's next request waits
 * for a cancel in flight; an unsynced batch is canceled; a server
 * released with a cancel in flight waits for it (being_canceled); a
 * client gone mid-query cancels the query; a key of another worker goes
 * to the supervisor; a forwarded cancel takes a socket id for its
 * connection, as PgBouncer's does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <sys/socket.h>

#include "cancel.h"
#include "fakeclock.h"
#include "ipc.h"
#include "janitor.h"
#include "pool.h"
#include "proto/cancelkey.h"
#include "proto/packet.h"
#include "rig.h"
#include "shm.h"
#include "world.h"

static const char *const DBS = "db = @PG@ dbname=db\n";

/* A new connection x sends CancelRequest(pid, key); it stays open while
 * the cancel is on its way (PgBouncer 1.25's behaviour). */
static void cancel_open(struct peer *x, uint32_t pid, uint32_t key)
{
	uint8_t b[12];
	rig_put32(b, PROTO_CANCEL_REQUEST);
	rig_put32(b + 4, pid);
	rig_put32(b + 8, key);
	rig_client_raw(x);
	rig_send(x, 0, b, sizeof(b));
}

/* The pooler closes a cancel connection without a word, as PostgreSQL. */
static void expect_closed(struct peer *x)
{
	rig_expect_eof(x, NULL, 0);
	assert_int_equal(x->len, 0);
	rig_close(x);
}

/* A cancel that ends at once (nothing to cancel): closed. */
static void send_cancel(uint32_t pid, uint32_t key)
{
	struct peer x;
	cancel_open(&x, pid, key);
	expect_closed(&x);
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

/* The same with a key of any length. */
static void cancel_key_open(struct peer *x, const struct cancelkey *k)
{
	uint8_t b[8 + CANCELKEY_MAX];
	rig_put32(b, PROTO_CANCEL_REQUEST);
	rig_put32(b + 4, k->pid);
	memcpy(b + 8, k->secret, k->len);
	rig_client_raw(x);
	rig_send(x, 0, b, 8 + k->len);
}

static void send_cancel_key(const struct cancelkey *k)
{
	struct peer x;
	cancel_key_open(&x, k);
	rig_expect_eof(&x, NULL, 0);
	rig_close(&x);
}

static void expect_pg_cancel_key(const struct cancelkey *k)
{
	struct peer cx;
	struct msg m;
	rig_pg_accept(&cx);
	rig_read_startup(&cx, &m);
	assert_int_equal(m.len, 8 + k->len);
	assert_int_equal(rig_be32(m.body), PROTO_CANCEL_REQUEST);
	assert_int_equal(rig_be32(m.body + 4), k->pid);
	assert_memory_equal(m.body + 8, k->secret, k->len);
	rig_close(&cx);
}

/* Client c logs in with protocol 3.<minor> and gets its key; the pool's
 * first server speaks 3.<server_minor> with key sk. */
static void login_v(struct peer *c, struct peer *pg, int minor, int server_minor, const struct cancelkey *sk,
		    struct cancelkey *key)
{
	rig_client_raw(c);
	rig_send_startup_v(c, minor, "alice", "db", NULL);
	rig_pg_accept(pg);
	rig_pg_login_key(pg, server_minor, sk);
	rig_client_welcome_key(c, key);
}

static void canceled_reply(struct peer *c, struct peer *pg)
{
	static const char err[] = "SERROR\0C57014\0Mcanceling statement due to user request\0";
	struct msg m;
	rig_send(pg, 'E', err, sizeof(err));
	rig_send(pg, 'Z', "I", 1);
	rig_expect(c, 'E', &m);
	assert_string_equal(rig_field(&m, 'C'), "57014");
	rig_expect(c, 'Z', NULL);
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
	/* The right key: the server's own key goes to PostgreSQL, and the
	 * cancel connection stays open until PostgreSQL has dealt with it
	 * (a driver that sends its next query once it closes must not have
	 * that one canceled). */
	struct peer x;
	cancel_open(&x, pid, key);
	struct peer cx;
	struct msg cm;
	rig_pg_accept(&cx);
	rig_read_startup(&cx, &cm);
	assert_int_equal(rig_be32(cm.body + 4), 700);
	rig_expect_nothing(&x);
	rig_close(&cx);          /* as PostgreSQL: done, connection closed */
	expect_closed(&x);
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

/* Every pairing of client and server versions: a 3.2 client gets pgcrew's
 * 32-byte key (a 3.0 client 4 bytes) whatever the server speaks, and its
 * cancel reaches PostgreSQL with the server's own key (32 bytes from a
 * PostgreSQL 18, 4 from an older one). Only the exact key cancels: a byte
 * changed anywhere, the key cut to 4 bytes or grown by one, the pid of
 * another client, cancel nothing and reach no server. */
static void test_versions_and_exact_keys(void **state)
{
	static const int pairs[][2] = { { 0, 0 }, { 0, 2 }, { 2, 0 }, { 2, 2 } };
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
		struct peer c, pg;
		struct cancelkey key, sk = { .pid = 900 + (uint32_t)i }, bad;
		int minor = pairs[i][0], server = pairs[i][1];
		print_message("client 3.%d, server 3.%d\n", minor, server);
		sk.len = server == 2 ? 32 : 4;
		for (int j = 0; j < sk.len; j++)
			sk.secret[j] = (uint8_t)(0xa0 + j);
		rig_start("pool_mode = transaction", DBS);
		login_v(&c, &pg, minor, server, &sk, &key);
		assert_int_equal(key.len, minor == 2 ? CANCELKEY_LONG : CANCELKEY_SHORT);
		assert_int_equal(rig_client_of(&c)->proto_minor, minor);
		assert_false(key.pid == sk.pid && key.len == sk.len);      /* ours, never the server's */
		rig_send_query(&c, "SELECT pg_sleep(100)");
		rig_expect(&pg, 'Q', NULL);
		for (int j = 0; j < key.len; j++) {
			bad = key;
			bad.secret[j] ^= 0x80;
			send_cancel_key(&bad);
		}
		bad = key;
		bad.len = key.len == 4 ? 5 : 4;
		send_cancel_key(&bad);
		bad = key;
		bad.len = (uint16_t)(key.len + 1);
		send_cancel_key(&bad);
		bad = key;
		bad.pid ^= 1;
		send_cancel_key(&bad);
		assert_false(rig_pg_pending());
		struct peer x;
		cancel_key_open(&x, &key);
		expect_pg_cancel_key(&sk);
		expect_closed(&x);
		canceled_reply(&c, &pg);
		rig_close(&c);
		rig_close(&pg);
		rig_stop();
	}
}

/* A CancelRequest with a secret outside 4..256 bytes, or cut short, closes
 * that connection only; the client's query runs on. */
static void test_bad_cancel_packets(void **state)
{
	static const size_t bad_len[] = { 8, 9, 11, 12 + 257, 12 + 1000 };
	struct peer c, pg;
	uint32_t pid, key;
	uint8_t b[1100] = { 0 };
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	login(&c, &pg, &pid, &key);
	rig_send_query(&c, "SELECT pg_sleep(100)");
	rig_expect(&pg, 'Q', NULL);
	for (size_t i = 0; i < ARRAY_SIZE(bad_len); i++) {
		struct peer x;
		rig_put32(b, PROTO_CANCEL_REQUEST);
		rig_put32(b + 4, pid);
		rig_put32(b + 8, key);
		rig_client_raw(&x);
		rig_send(&x, 0, b, bad_len[i] - 4);
		rig_expect_eof(&x, NULL, 0);
		rig_close(&x);
	}
	/* Cut: the length word says 16, 12 bytes come, then the client goes. */
	struct peer x;
	uint8_t cut[12] = { 0, 0, 0, 16 };
	rig_put32(cut + 4, PROTO_CANCEL_REQUEST);
	rig_put32(cut + 8, pid);
	rig_client_raw(&x);
	assert_int_equal(send(x.fd, cut, sizeof(cut), MSG_NOSIGNAL), (ssize_t)sizeof(cut));
	rig_pump();
	rig_close(&x);
	/* Announcing 1012 bytes: closed at once, without waiting for them. */
	rig_put32(cut, 1012);
	rig_client_raw(&x);
	assert_int_equal(send(x.fd, cut, sizeof(cut), MSG_NOSIGNAL), (ssize_t)sizeof(cut));
	rig_expect_eof(&x, NULL, 0);
	rig_close(&x);
	assert_false(rig_pg_pending());
	assert_true(rig_client_of(&c)->query_running);
	cancel_open(&x, pid, key);
	expect_pg_cancel(700, 701);
	expect_closed(&x);
	canceled_reply(&c, &pg);
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
	struct peer x;
	cancel_open(&x, pid, key);
	rig_pg_accept(cx);
	rig_read_startup(cx, &m);
	rig_close(&x);           /* the client gives up waiting: the cancel goes on */
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
	/* Its connection closes at once (the query is not on a server, a
	 * driver waiting for the close would wait for a server); the cancel
	 * waits with the query it is for. */
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

/* A deferred cancel whose query ended before the moment came is dropped:
 * sent then, it could cancel the client's next query. */
static void test_waiting_client_query_ended(void **state)
{
	struct peer a, b, pg;
	uint32_t pid, key;
	(void)state;
	rig_start("pool_mode = session\ndefault_pool_size = 1", DBS);
	login(&a, &pg, NULL, NULL);
	rig_send_query(&a, "SELECT 0");   /* a's session holds the server */
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "SELECT 0", 'I');
	rig_expect(&a, 'C', NULL);
	rig_expect(&a, 'Z', NULL);
	rig_client(&b, "alice", "db");
	rig_client_welcome(&b, &pid, &key);
	rig_send_query(&b, "SELECT 1");
	rig_pump();
	assert_int_equal(rig_client_of(&b)->state, CLIENT_WAITING);
	send_cancel(pid, key);
	rig_close(&a);                    /* its session's server goes to b */
	struct msg m;
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "DISCARD ALL");
	rig_send_done(&pg, "DISCARD ALL", 'I');
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 1");
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&b, 'C', NULL);
	rig_expect(&b, 'Z', NULL);
	/* The moment comes (a real timer): nothing goes to PostgreSQL. */
	assert_int_equal(cancel_deferred_count(), 1);
	usec_t until = fakeclock_real() + 10 * USEC_PER_SEC;
	while (cancel_deferred_count() > 0 && fakeclock_real() < until)
		event_base_loop(rig_w->base, EVLOOP_ONCE);
	assert_int_equal(cancel_deferred_count(), 0);
	rig_pump();
	assert_false(rig_pg_pending());
	rig_close(&b);
	rig_close(&pg);
}

/* Session pooling keeps the server linked: a request that comes while a
 * cancel for that server is on its way waits until PostgreSQL has dealt
 * with the cancel (it would otherwise be the query canceled), even when
 * the client did not wait for its cancel connection to close. */
static void test_next_request_waits_for_cancel(void **state)
{
	struct peer c, pg, cx;
	struct msg m;
	(void)state;
	cancel_in_flight("pool_mode = session", &c, &pg, &cx);
	rig_send_query(&c, "SELECT 2");
	rig_expect_nothing(&pg);
	assert_true(rig_client_of(&c)->held_for_cancel);
	rig_close(&cx);                     /* the cancel is answered */
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 2");
	assert_false(rig_client_of(&c)->held_for_cancel);
	rig_send_done(&pg, "SELECT 2", 'I');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', NULL);
	rig_close(&c);
	rig_close(&pg);
}

/* An extended-protocol batch whose Sync has not come yet runs on its
 * server all the same: a cancel then is passed on (PgBouncer does). */
static void test_unsynced_batch(void **state)
{
	struct peer c, pg;
	uint32_t pid, key;
	static const char parse[] = "\0SELECT pg_sleep(100)\0\0";
	static const char bind[] = "\0\0\0\0\0\0\0";
	static const char exec[] = "\0\0\0\0";
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	login(&c, &pg, &pid, &key);
	rig_send(&c, 'P', parse, sizeof(parse) - 1);
	rig_send(&c, 'B', bind, sizeof(bind) - 1);
	rig_send(&c, 'E', exec, sizeof(exec));
	rig_expect(&pg, 'P', NULL);
	rig_expect(&pg, 'B', NULL);
	rig_expect(&pg, 'E', NULL);
	assert_false(rig_client_of(&c)->query_running);
	struct peer x;
	cancel_open(&x, pid, key);
	expect_pg_cancel(700, 701);
	expect_closed(&x);
	rig_close(&c);
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

/* Socket ids (issue 43 item 3): PgBouncer forwards a cancel on a server
 * connection of its own, which takes the next id; pgcrew's connection to
 * PostgreSQL takes one too. A cancel for a client with nothing on a
 * server takes only its own, and pgcrew's own cancel of a query whose
 * client went (PgBouncer sends none) takes none. */
static void test_cancel_ids(void **state)
{
	struct peer c, pg, x;
	uint32_t pid, key;
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	login(&c, &pg, &pid, &key);
	uint64_t n = shm_next_id();
	send_cancel(pid, key);                  /* n + 1 */
	assert_int_equal(shm_next_id(), n + 2);
	rig_send_query(&c, "SELECT pg_sleep(100)");
	rig_expect(&pg, 'Q', NULL);
	cancel_open(&x, pid, key);              /* n + 3, forwarded on n + 4 */
	expect_pg_cancel(700, 701);
	expect_closed(&x);
	assert_int_equal(shm_next_id(), n + 5);
	canceled_reply(&c, &pg);
	rig_send_query(&c, "SELECT pg_sleep(100)");
	rig_expect(&pg, 'Q', NULL);
	rig_close(&c);
	expect_pg_cancel(700, 701);
	assert_int_equal(shm_next_id(), n + 6);
	rig_expect_eof(&pg, NULL, 0);
	rig_close(&pg);
}

/* Worker 0 of 2 gets a cancel whose key names worker 1: it goes to the
 * supervisor, which routes it there; nothing is sent to PostgreSQL here. */
static void test_other_worker(void **state)
{
	uint8_t payload[sizeof(struct cancel_fwd)];
	struct cancel_waiter wt;
	(void)state;
	rig_start_workers(2, "", DBS);
	uint32_t pid = 1u << 24 | 12345, key = 777;
	struct peer x;
	cancel_open(&x, pid, key);
	assert_int_equal(rig_sup_count(IPC_CANCEL_FWD), 1);
	size_t n = rig_sup_last(IPC_CANCEL_FWD, NULL, payload, sizeof(payload));
	struct ipc_hdr h = { .type = IPC_CANCEL_FWD, .len = (uint32_t)n };
	struct cancelkey got;
	assert_true(ipc_get_cancel(&h, payload, &got, &wt));
	assert_int_equal(wt.worker, 0);                /* its connection waits here */
	assert_int_equal(got.pid, pid);
	assert_int_equal(got.len, 4);
	assert_int_equal(rig_be32(got.secret), key);
	/* Its connection stays until worker 1 says the cancel is done. */
	rig_expect_nothing(&x);
	wt.outcome = 1;    /* CANCEL_SENT */
	rig_sup_send(IPC_CANCEL_DONE, 0, &wt, sizeof(wt));
	expect_closed(&x);
	/* A key of this worker stays here. */
	send_cancel(12345, key);
	assert_int_equal(rig_sup_count(IPC_CANCEL_FWD), 1);
	assert_false(rig_pg_pending());

	/* A long key names its worker in the secret, and goes whole. */
	struct cancelkey_own own;
	struct cancelkey lk;
	uint8_t rnd[CANCELKEY_RANDOM];
	memset(rnd, 0x3c, sizeof(rnd));
	cancelkey_make(&own, 2, 1, 0, rnd);
	memset(&lk, 0, sizeof(lk));
	cancelkey_from_own(&lk, &own);
	cancel_key_open(&x, &lk);
	assert_int_equal(rig_sup_count(IPC_CANCEL_FWD), 2);
	n = rig_sup_last(IPC_CANCEL_FWD, NULL, payload, sizeof(payload));
	h.len = (uint32_t)n;
	assert_true(ipc_get_cancel(&h, payload, &got, &wt));
	assert_int_equal(got.pid, lk.pid);
	assert_int_equal(got.len, CANCELKEY_LONG);
	assert_memory_equal(got.secret, lk.secret, CANCELKEY_LONG);
	/* Worker 1 dies before it answers: the janitor ends the wait. */
	rig_expect_nothing(&x);
	fakeclock_advance(12 * USEC_PER_SEC);
	janitor_pass(rig_w);
	expect_closed(&x);
	/* A key of no pgcrew layout (here 20 bytes) goes nowhere. */
	lk.len = 20;
	send_cancel_key(&lk);
	assert_int_equal(rig_sup_count(IPC_CANCEL_FWD), 2);
	assert_false(rig_pg_pending());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_running_query, rig_teardown),
		cmocka_unit_test_teardown(test_versions_and_exact_keys, rig_teardown),
		cmocka_unit_test_teardown(test_bad_cancel_packets, rig_teardown),
		cmocka_unit_test_teardown(test_being_canceled, rig_teardown),
		cmocka_unit_test_teardown(test_reset_after_cancel, rig_teardown),
		cmocka_unit_test_teardown(test_waiting_client, rig_teardown),
		cmocka_unit_test_teardown(test_waiting_client_query_ended, rig_teardown),
		cmocka_unit_test_teardown(test_next_request_waits_for_cancel, rig_teardown),
		cmocka_unit_test_teardown(test_unsynced_batch, rig_teardown),
		cmocka_unit_test_teardown(test_client_gone_busy, rig_teardown),
		cmocka_unit_test_teardown(test_cancel_ids, rig_teardown),
		cmocka_unit_test_teardown(test_other_worker, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for the janitor's timeouts (janitor.c) on the session
 * rig with the fake clock: each of PgBouncer's client and server timeouts
 * fires with PgBouncer's text once its time has passed and not before (the
 * clock stands still between steps, so each is checked at its exact time
 * and one microsecond later), the reserve pool and min_pool_size open
 * servers when they should, and pool_idle_timeout frees pools that have
 * had no client and no server connection for that long. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <unistd.h>

#include "fakeclock.h"
#include "hist.h"
#include "janitor.h"
#include "log.h"
#include "pool.h"
#include "rig.h"
#include "world.h"

#define SEC USEC_PER_SEC

static const char *const DBS = "db = @PG@ dbname=db\n";

/* Move the clock by usec and run one janitor pass. */
static void after(usec_t usec)
{
	fakeclock_advance(usec);
	janitor_pass(rig_w);
	rig_pump();
}

static void expect_closed(struct peer *c, const char *text)
{
	char err[256];
	rig_expect_eof(c, err, sizeof(err));
	assert_string_equal(err, text);
}

static void test_client_idle_timeout(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("client_idle_timeout = 10", DBS);
	rig_login_first(&c, &pg, 1);
	after(10 * SEC);
	rig_expect_nothing(&c);
	after(1);
	expect_closed(&c, "client_idle_timeout");
	/* Its server stays pooled. */
	assert_int_equal(rig_pool("db", "alice")->n_idle, 1);
	rig_close(&c);
	rig_close(&pg);
}

static void test_query_wait_timeout(void **state)
{
	struct peer a, b, pg;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1\nquery_wait_timeout = 5", DBS);
	rig_login_first(&a, &pg, 1);
	rig_login(&b);
	rig_round_trip(&a, &pg, "BEGIN", 'T');
	rig_send_query(&b, "SELECT 1");
	after(5 * SEC);
	assert_int_equal(rig_client_of(&b)->state, CLIENT_WAITING);
	after(1);
	expect_closed(&b, "query_wait_timeout");
	/* The client holding the server in its transaction is not touched. */
	assert_non_null(rig_client_of(&a));
	assert_non_null(rig_client_of(&a)->link);
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

static void test_idle_transaction_timeout(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("pool_mode = transaction\nidle_transaction_timeout = 3", DBS);
	rig_login_first(&c, &pg, 1);
	rig_round_trip(&c, &pg, "BEGIN", 'T');
	after(3 * SEC);
	rig_expect_nothing(&c);
	after(1);
	expect_closed(&c, "idle transaction timeout");
	/* Its server was inside the transaction: closed, not pooled. */
	rig_expect(&pg, 'X', NULL);
	rig_expect_eof(&pg, NULL, 0);
	rig_close(&c);
}

static void test_query_timeout(void **state)
{
	struct peer c, pg, cx;
	struct msg m;
	(void)state;
	rig_start("pool_mode = transaction\nquery_timeout = 2", DBS);
	rig_login_first(&c, &pg, 1);
	rig_send_query(&c, "SELECT pg_sleep(100)");
	rig_expect(&pg, 'Q', NULL);
	after(2 * SEC);
	rig_expect_nothing(&c);
	after(1);
	expect_closed(&c, "query timeout");
	/* The query is canceled on the server. */
	rig_pg_accept(&cx);
	rig_read_startup(&cx, &m);
	assert_int_equal(m.len, 12);
	rig_close(&cx);
	rig_close(&c);
	rig_close(&pg);
}

static void test_transaction_timeout(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("pool_mode = transaction\ntransaction_timeout = 5", DBS);
	rig_login_first(&c, &pg, 1);
	rig_round_trip(&c, &pg, "BEGIN", 'T');
	after(3 * SEC);
	rig_round_trip(&c, &pg, "SELECT 1", 'T');     /* busy, but the transaction is old */
	after(2 * SEC);
	rig_expect_nothing(&c);
	after(1);
	expect_closed(&c, "transaction timeout");
	rig_close(&c);
	rig_close(&pg);
}

static void test_client_login_timeout(void **state)
{
	struct peer c;
	(void)state;
	rig_start("client_login_timeout = 5", DBS);
	rig_client_raw(&c);
	after(5 * SEC);
	assert_non_null(rig_client_of(&c));
	after(1);
	expect_closed(&c, "client_login_timeout");
	assert_int_equal(rig_w->n_clients, 0);
	rig_close(&c);
}

static void test_server_idle_timeout(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("server_idle_timeout = 60", DBS);
	rig_login_first(&c, &pg, 1);
	struct pool *p = rig_pool("db", "alice");
	after(60 * SEC);
	assert_int_equal(p->n_idle, 1);
	after(1);
	rig_expect(&pg, 'X', NULL);
	rig_expect_eof(&pg, NULL, 0);
	assert_int_equal(p->n_idle, 0);
	rig_close(&c);
	rig_close(&pg);
}

/* server_lifetime: an idle server past it is closed; a busy one closes
 * when its client releases it instead of going back to the pool. */
static void test_server_lifetime(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("pool_mode = transaction\nserver_lifetime = 100", DBS);
	rig_login_first(&c, &pg, 1);
	struct pool *p = rig_pool("db", "alice");
	rig_round_trip(&c, &pg, "BEGIN", 'T');
	after(100 * SEC);
	assert_false(rig_client_of(&c)->link->close_needed);
	after(1);
	assert_int_equal(p->n_active, 1);
	assert_true(rig_client_of(&c)->link->close_needed);
	rig_round_trip(&c, &pg, "COMMIT", 'I');
	rig_expect(&pg, 'X', NULL);
	rig_expect_eof(&pg, NULL, 0);
	assert_int_equal(p->n_idle + p->n_active, 0);
	rig_close(&c);
	rig_close(&pg);
}

static void test_server_connect_timeout(void **state)
{
	struct peer c, pg;
	struct msg m;
	(void)state;
	rig_start("server_connect_timeout = 3\nserver_login_retry = 60", DBS);
	rig_client(&c, "alice", "db");
	rig_pg_accept(&pg);          /* and never answers */
	rig_read_startup(&pg, &m);
	struct pool *p = rig_pool("db", "alice");
	after(3 * SEC);
	assert_int_equal(p->n_login, 1);
	after(1);
	rig_expect_eof(&pg, NULL, 0);
	assert_true(p->login_failed_at > 0);
	/* Its client keeps waiting (query_wait_timeout decides), as in PgBouncer. */
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING_LOGIN);
	rig_close(&c);
	rig_close(&pg);
}

/* pool_size 1, reserve 1: a client waiting longer than reserve_pool_timeout
 * gets a server from the reserve. */
static void test_reserve_pool(void **state)
{
	struct peer a, b, pg, pg2;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1\nreserve_pool_size = 1\n"
		  "reserve_pool_timeout = 2", DBS);
	rig_login_first(&a, &pg, 1);
	rig_login(&b);
	rig_round_trip(&a, &pg, "BEGIN", 'T');
	rig_send_query(&b, "SELECT 1");
	after(2 * SEC - 1);
	assert_false(rig_pg_pending());
	after(1);                                     /* reserve_pool_timeout reached */
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 3, 4);
	rig_expect(&pg2, 'Q', NULL);
	rig_send_done(&pg2, "SELECT 1", 'I');
	rig_expect(&b, 'C', NULL);
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
	rig_close(&pg2);
}

static void test_min_pool_size(void **state)
{
	struct peer c, pg, pg2;
	(void)state;
	rig_start("min_pool_size = 2", DBS);
	rig_login_first(&c, &pg, 1);
	after(SEC);
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 5, 6);
	rig_pump();
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle, 2);
	after(SEC);
	assert_false(rig_pg_pending());
	rig_close(&c);
	rig_close(&pg);
	rig_close(&pg2);
}

/* pool_idle_timeout's log line goes to a file of the test's own. */
static char idle_log[64];

static void log_to_file(void)
{
	snprintf(idle_log, sizeof(idle_log), "/tmp/pgcrew-janitor-%d.log", (int)getpid());
	unlink(idle_log);
	log_setup(&(struct log_settings){ .logfile = idle_log, .to_stderr = true });
}

/* How many lines of the log contain text; the log goes back to stderr. */
static int logged(const char *text, bool stop)
{
	char line[512];
	int n = 0;
	FILE *f = fopen(idle_log, "r");
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	if (f)
		fclose(f);
	if (stop) {
		log_setup(&(struct log_settings){ .to_stderr = true });
		unlink(idle_log);
	}
	return n;
}

#define IDLE_LINE "LOG cleaning up idle pool for user alice on db db because: pool idle timeout (age="

/* pool_idle_timeout: a pool with a client is kept however long, and so is
 * one with a server connection: servers go by server_idle_timeout, never
 * by this setting. Once the pool has had neither for longer than the
 * timeout it is freed with PgBouncer's line, its age the time it had
 * nothing; nothing opens it again, and a new client makes it anew. */
static void test_pool_idle_timeout(void **state)
{
	struct peer c, pg, c2, pg2;
	(void)state;
	log_to_file();
	rig_start("pool_mode = transaction\npool_idle_timeout = 10\n"
		  "server_idle_timeout = 100\nserver_lifetime = 0", DBS);
	rig_login_first(&c, &pg, 1);
	after(60 * SEC);
	assert_non_null(pool_find_names(rig_w, "db", "alice"));     /* a client: kept */
	rig_close(&c);
	rig_pump();
	after(40 * SEC);                                            /* the server's 100 s */
	assert_int_equal(rig_pool("db", "alice")->n_idle, 1);      /* a server: kept */
	after(1);
	rig_expect(&pg, 'X', NULL);                                 /* server idle timeout */
	rig_expect_eof(&pg, NULL, 0);
	assert_int_equal(rig_pool("db", "alice")->n_idle, 0);
	after(10 * SEC);
	assert_non_null(pool_find_names(rig_w, "db", "alice"));
	assert_int_equal(logged("cleaning up idle pool", false), 0);
	after(1);
	assert_null(pool_find_names(rig_w, "db", "alice"));
	assert_int_equal(logged(IDLE_LINE "10s)", false), 1);
	for (int i = 0; i < 5; i++) {
		after(SEC);
		assert_false(rig_pg_pending());
	}
	rig_login_first(&c2, &pg2, 3);
	assert_int_equal(rig_pool("db", "alice")->n_idle, 1);
	rig_close(&c2);
	rig_close(&pg);
	rig_close(&pg2);
	assert_int_equal(logged("cleaning up idle pool", true), 1);
}

/* A client logging in points at its pool before it is on the pool's
 * lists: the pool is not freed under it; the time counts from its going. */
static void test_pool_idle_timeout_login_client(void **state)
{
	struct peer c;
	(void)state;
	rig_start("pool_idle_timeout = 1\nclient_login_timeout = 0\nauth_type = md5", DBS);
	rig_client(&c, "alice", "db");                 /* asked for its password, never answers */
	rig_pump();
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_clients, 1);
	after(5 * SEC);
	assert_ptr_equal(pool_find_names(rig_w, "db", "alice"), p);
	rig_close(&c);
	rig_pump();
	after(SEC);
	assert_ptr_equal(pool_find_names(rig_w, "db", "alice"), p);
	after(1);
	assert_null(pool_find_names(rig_w, "db", "alice"));
}

/* min_pool_size keeps a pool: the pool of a forced user, opened by the
 * janitor before any client, and a pool whose client has gone, however
 * long they have had no client (their servers are kept or opened again
 * for min_pool_size when server_lifetime closes them). */
static void test_pool_idle_timeout_min_pool_size(void **state)
{
	struct peer pg, c, pg2, pg3, pg4;
	(void)state;
	log_to_file();
	rig_start("pool_mode = transaction\npool_idle_timeout = 5\nserver_lifetime = 20",
		  "db = @PG@ dbname=db user=alice min_pool_size=1\n"
		  "other = @PG@ dbname=db min_pool_size=1\n");
	after(0);
	rig_pg_accept(&pg);
	rig_pg_login(&pg, 1, 2);
	rig_pump();
	assert_int_equal(rig_pool("db", "alice")->n_idle, 1);
	rig_client(&c, "bob", "other");
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 3, 4);
	rig_client_welcome(&c, NULL, NULL);
	rig_close(&c);
	rig_pump();
	after(20 * SEC);
	assert_int_equal(rig_pool("db", "alice")->n_idle, 1);
	assert_int_equal(rig_pool("other", "bob")->n_idle, 1);
	after(1);                                        /* both servers' lifetime is over */
	rig_expect(&pg, 'X', NULL);
	rig_expect_eof(&pg, NULL, 0);
	rig_expect(&pg2, 'X', NULL);
	rig_expect_eof(&pg2, NULL, 0);
	rig_pg_accept(&pg3);
	rig_pg_login(&pg3, 5, 6);
	rig_pg_accept(&pg4);
	rig_pg_login(&pg4, 7, 8);
	rig_pump();
	for (int i = 0; i < 10; i++) {
		after(SEC);
		assert_int_equal(rig_pool("db", "alice")->n_idle, 1);
		assert_int_equal(rig_pool("other", "bob")->n_idle, 1);
		assert_false(rig_pg_pending());
	}
	assert_int_equal(logged("cleaning up idle pool", true), 0);
	rig_close(&pg);
	rig_close(&pg2);
	rig_close(&pg3);
	rig_close(&pg4);
}

/* Several workers (worker 1's shared cell written as it would write it):
 * a pool is kept while another worker has a server connection of it, and
 * counts from that one's going; a worker frees its copy without the line
 * while another still holds the pool, and the last to let go logs it. */
static void test_pool_idle_timeout_other_worker(void **state)
{
	struct peer c, pg, c2, pg2;
	(void)state;
	log_to_file();
	assert_int_equal(hist_create(2, 64), 0);
	hist_attach_worker(1);
	struct hist_pool_cell *other = hist_pool_hold("db", "alice", NULL);
	hist_pool_set_use(other, 0, 1, fakeclock_now());           /* a server there */
	hist_attach_worker(0);
	rig_start("pool_mode = transaction\npool_idle_timeout = 1\nserver_idle_timeout = 1", DBS);
	rig_login_first(&c, &pg, 1);
	rig_close(&c);
	rig_pump();
	after(SEC + 1);                                             /* ours goes */
	rig_expect(&pg, 'X', NULL);
	rig_expect_eof(&pg, NULL, 0);
	after(10 * SEC);
	assert_non_null(pool_find_names(rig_w, "db", "alice"));    /* theirs keeps it */
	hist_pool_set_use(other, 0, 0, fakeclock_now());           /* theirs goes */
	after(SEC);
	assert_non_null(pool_find_names(rig_w, "db", "alice"));
	after(1);
	assert_null(pool_find_names(rig_w, "db", "alice"));
	assert_int_equal(logged("cleaning up idle pool", false), 0);  /* worker 1 holds it */
	/* A client here makes it again; worker 1 lets go first: ours logs. */
	rig_login_first(&c2, &pg2, 3);
	rig_close(&c2);
	rig_pump();
	hist_attach_worker(1);
	assert_false(hist_pool_release(other));
	hist_attach_worker(0);
	after(SEC + 1);
	rig_expect(&pg2, 'X', NULL);
	rig_expect_eof(&pg2, NULL, 0);
	after(SEC);
	assert_non_null(pool_find_names(rig_w, "db", "alice"));
	after(1);
	assert_null(pool_find_names(rig_w, "db", "alice"));
	assert_int_equal(logged(IDLE_LINE "1s)", true), 1);
	rig_close(&pg);
	rig_close(&pg2);
	rig_stop();
	hist_destroy();
}

/* 0 never frees; a RELOAD that sets it takes effect from the pool's last
 * use (here its server's close), not from the reload. */
static void test_pool_idle_timeout_reload(void **state)
{
	struct peer c, pg;
	struct rig_setup s = { .workers = 1, .databases = DBS,
			       .settings = "pool_mode = transaction\nserver_idle_timeout = 1\n"
					   "server_lifetime = 0\npool_idle_timeout = 0" };
	(void)state;
	rig_start_with(&s);
	rig_login_first(&c, &pg, 1);
	rig_close(&c);
	rig_pump();
	after(2 * SEC);
	rig_expect(&pg, 'X', NULL);
	rig_expect_eof(&pg, NULL, 0);
	after(86400 * SEC);
	assert_non_null(pool_find_names(rig_w, "db", "alice"));
	s.settings = "pool_mode = transaction\nserver_idle_timeout = 1\nserver_lifetime = 0\npool_idle_timeout = 1h";
	rig_reload(&s);
	after(1);
	assert_null(pool_find_names(rig_w, "db", "alice"));
	rig_close(&pg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_client_idle_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_query_wait_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_idle_transaction_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_query_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_transaction_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_client_login_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_server_idle_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_server_lifetime, rig_teardown),
		cmocka_unit_test_teardown(test_server_connect_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_reserve_pool, rig_teardown),
		cmocka_unit_test_teardown(test_min_pool_size, rig_teardown),
		cmocka_unit_test_teardown(test_pool_idle_timeout, rig_teardown),
		cmocka_unit_test_teardown(test_pool_idle_timeout_login_client, rig_teardown),
		cmocka_unit_test_teardown(test_pool_idle_timeout_min_pool_size, rig_teardown),
		cmocka_unit_test_teardown(test_pool_idle_timeout_other_worker, rig_teardown),
		cmocka_unit_test_teardown(test_pool_idle_timeout_reload, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

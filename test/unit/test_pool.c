/* pgcrew — unit tests for pool policy (pool.c) on the session rig: when a
 * server goes back to the pool in each pool mode, the first-come
 * first-served queue of waiting clients, pool_size and the reserve pool,
 * idle servers reused newest first, the reuse order over several workers
 * (the verdict, and a client that waits for another worker's idle server
 * and takes its own when none comes), and the link invariant at each
 * step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "fakeclock.h"
#include "hist.h"
#include "ipc.h"
#include "ledger.h"
#include "link.h"
#include "pool.h"
#include "rig.h"
#include "shm.h"
#include "world.h"

static const char *const DBS = "db = @PG@ dbname=db\n";

static void assert_linked(struct client *c)
{
	assert_non_null(c->link);
	assert_ptr_equal(c->link->link, c);
	assert_int_equal(c->link->state, SERVER_ACTIVE);
	assert_int_equal(c->state, CLIENT_ACTIVE);
}

static void test_transaction_mode(void **state)
{
	struct peer c, pg;
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&c, &pg, 11);
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle, 1);
	struct client *cl = rig_client_of(&c);
	assert_null(cl->link);

	/* Inside a transaction the server stays with the client... */
	rig_round_trip(&c, &pg, "BEGIN", 'T');
	assert_linked(cl);
	assert_int_equal(p->n_active, 1);
	assert_int_equal(p->n_idle, 0);
	/* ...and goes back to the pool when it ends. */
	rig_round_trip(&c, &pg, "COMMIT", 'I');
	assert_null(cl->link);
	assert_int_equal(p->n_idle, 1);
	assert_int_equal(p->n_active, 0);
	/* A failed transaction ('E') still holds it. */
	rig_round_trip(&c, &pg, "BEGIN", 'T');
	rig_round_trip(&c, &pg, "SELECT broken", 'E');
	assert_linked(cl);
	rig_round_trip(&c, &pg, "ROLLBACK", 'I');
	assert_null(cl->link);
	assert_int_equal(p->stats.xact_count, 2);
	rig_close(&c);
	rig_close(&pg);
}

/* The client's next message is on its way to the server (its header
 * routed, its body not all here: a CopyData, which PostgreSQL ignores
 * outside COPY) when the server's ReadyForQuery for the query before it
 * comes: the server stays with the client, or the rest of the message
 * would go to a server another client now uses (or one already freed:
 * found by fuzz_session as a use after free). The next ReadyForQuery,
 * after the message is through, releases it. */
static void test_release_mid_message(void **state)
{
	struct peer c, pg;
	struct msg m;
	uint8_t b[64] = { 'Q', 0, 0, 0, 13, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0,
			  'd', 0, 0, 0, 4 + 40 };
	(void)state;
	rig_start("pool_mode = transaction", DBS);
	rig_login_first(&c, &pg, 11);
	struct pool *p = rig_pool("db", "alice");
	struct client *cl = rig_client_of(&c);
	assert_int_equal(send(c.fd, b, 19 + 10, 0), 19 + 10);   /* Q, then 10 of 40 */
	rig_expect(&pg, 'Q', &m);
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', NULL);
	assert_linked(cl);
	assert_int_equal(p->n_idle, 0);
	/* The other 30 bytes and a query: then it goes back. */
	assert_int_equal(send(c.fd, b + 19, 30, 0), 30);
	rig_expect(&pg, 'd', &m);
	assert_int_equal(m.len, 40);
	rig_round_trip(&c, &pg, "SELECT 2", 'I');
	assert_null(cl->link);
	assert_int_equal(p->n_idle, 1);
	rig_close(&c);
	rig_close(&pg);
}

static void test_session_mode(void **state)
{
	struct peer c, pg;
	struct msg m;
	(void)state;
	rig_start("pool_mode = session", DBS);
	rig_login_first(&c, &pg, 12);
	struct pool *p = rig_pool("db", "alice");
	struct client *cl = rig_client_of(&c);
	rig_round_trip(&c, &pg, "SELECT 1", 'I');
	/* The session keeps its server between transactions. */
	assert_linked(cl);
	struct server *sv = cl->link;
	rig_round_trip(&c, &pg, "SELECT 2", 'I');
	assert_ptr_equal(cl->link, sv);
	/* The client leaves: the server is reset before it is pooled again. */
	rig_send(&c, 'X', NULL, 0);
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "DISCARD ALL");
	assert_int_equal(sv->state, SERVER_TESTED);
	assert_null(sv->link);
	rig_send_done(&pg, "DISCARD ALL", 'I');
	rig_pump();
	assert_int_equal(sv->state, SERVER_IDLE);
	assert_int_equal(p->n_idle, 1);
	assert_int_equal(p->n_active_clients, 0);
	rig_close(&c);
	rig_close(&pg);
}

static void test_statement_mode(void **state)
{
	struct peer c, pg;
	char err[256];
	(void)state;
	rig_start("pool_mode = statement", DBS);
	rig_login_first(&c, &pg, 13);
	struct pool *p = rig_pool("db", "alice");
	struct client *cl = rig_client_of(&c);
	rig_round_trip(&c, &pg, "SELECT 1", 'I');
	assert_null(cl->link);
	assert_int_equal(p->n_idle, 1);
	/* A transaction block costs the client its connection. */
	rig_send_query(&c, "BEGIN");
	rig_expect(&pg, 'Q', NULL);
	rig_send_done(&pg, "BEGIN", 'T');
	rig_expect(&c, 'C', NULL);
	rig_expect_eof(&c, err, sizeof(err));
	assert_string_equal(err, "transaction blocks not allowed in statement pooling mode");
	rig_close(&c);
	rig_close(&pg);
}

/* pool_size = 1: three clients want the one server; they get it in the
 * order they asked, each when the one before it ends its transaction. */
static void test_fifo(void **state)
{
	struct peer a, b, c, pg;
	struct msg m;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 1", DBS);
	rig_login_first(&a, &pg, 14);
	rig_login(&b);
	rig_login(&c);
	struct pool *p = rig_pool("db", "alice");

	rig_round_trip(&a, &pg, "BEGIN", 'T');
	rig_send_query(&c, "SELECT 'c'");      /* c asks before b */
	rig_send_query(&b, "SELECT 'b'");
	rig_expect_nothing(&pg);
	assert_int_equal(p->n_waiting_clients, 2);
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING);
	assert_false(rig_pg_pending());        /* pool_size: no second server */

	rig_round_trip(&a, &pg, "COMMIT", 'I');
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 'c'");
	assert_linked(rig_client_of(&c));
	assert_int_equal(rig_client_of(&b)->state, CLIENT_WAITING);
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', NULL);
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 'b'");
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&b, 'C', NULL);
	rig_expect(&b, 'Z', NULL);
	assert_int_equal(p->n_waiting_clients, 0);
	assert_int_equal(p->n_idle, 1);
	assert_int_equal(p->stats.server_assignment_count, 3);
	rig_close(&a);
	rig_close(&b);
	rig_close(&c);
	rig_close(&pg);
}

/* A second concurrent transaction opens a second server (pool_size 2); a
 * third waits. Released servers are reused newest first. */
static void test_pool_size(void **state)
{
	struct peer a, b, c, pg1, pg2;
	(void)state;
	rig_start("pool_mode = transaction\ndefault_pool_size = 2", DBS);
	rig_login_first(&a, &pg1, 21);
	rig_login(&b);
	rig_login(&c);
	struct pool *p = rig_pool("db", "alice");

	rig_round_trip(&a, &pg1, "BEGIN", 'T');
	rig_send_query(&b, "BEGIN");
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 22, 1);
	rig_expect(&pg2, 'Q', NULL);
	rig_send_done(&pg2, "BEGIN", 'T');
	rig_expect(&b, 'C', NULL);
	rig_expect(&b, 'Z', NULL);
	assert_int_equal(p->n_active, 2);
	rig_send_query(&c, "SELECT 1");
	assert_false(rig_pg_pending());
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING);

	/* b's server comes back first and goes to c. */
	rig_send_query(&b, "COMMIT");
	rig_expect(&pg2, 'Q', NULL);
	rig_send_done(&pg2, "COMMIT", 'I');
	rig_expect(&pg2, 'Q', NULL);
	rig_send_done(&pg2, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_round_trip(&a, &pg1, "COMMIT", 'I');
	assert_int_equal(p->n_idle, 2);
	/* Newest first: the server a just released serves the next request. */
	rig_round_trip(&b, &pg1, "SELECT 3", 'I');
	rig_close(&a);
	rig_close(&b);
	rig_close(&c);
	rig_close(&pg1);
	rig_close(&pg2);
}

/* max_db_connections full with another pool's idle server: that one is
 * closed for the new pool's client ("evicted", as PgBouncer does) and a
 * server opened for it; the pools with an idle server are found from the
 * database's list, which follows the idle servers as they come and go. */
static void test_evict_idle_of_another_pool(void **state)
{
	struct peer a, b, pg1, pg2;
	(void)state;
	rig_start("pool_mode = transaction\nmax_db_connections = 1", DBS);
	rig_login_first(&a, &pg1, 21);
	rig_round_trip(&a, &pg1, "SELECT 1", 'I');
	struct pool *pa = rig_pool("db", "alice");
	assert_int_equal(pa->n_idle, 1);
	assert_false(list_empty(&pa->db->idle_pools));
	assert_false(list_empty(&pa->user->idle_pools));

	rig_client(&b, "bob", "db");
	rig_expect(&pg1, 'X', NULL);
	assert_int_equal(pa->n_idle, 0);
	assert_true(list_empty(&pa->db->idle_pools));
	assert_true(list_empty(&pa->user->idle_pools));
	rig_pg_accept(&pg2);
	rig_pg_login(&pg2, 22, 23);
	rig_client_welcome(&b, NULL, NULL);
	rig_round_trip(&b, &pg2, "SELECT 2", 'I');
	struct pool *pb = rig_pool("db", "bob");
	assert_int_equal(pb->n_idle, 1);
	assert_true(list_first(&pb->db->idle_pools) == &pb->idle_db_node);
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg1);
	rig_close(&pg2);
}

/* Worker 0 of 2: the pool asks the supervisor (the rig) for the pool's
 * welcome, then (none known) for a ledger slot, and opens a server only
 * once granted; alice's client has used it, it is idle. */
static struct pool *idle_server_with(struct peer *c, struct peer *pg, const char *settings)
{
	struct slot_req r;
	uint32_t why;
	char names[2 * LEDGER_NAME];
	rig_start_workers(2, settings, DBS);
	rig_client(c, "alice", "db");
	/* Another worker may know the pool's parameters: asked first. */
	assert_int_equal(rig_sup_count(IPC_WELCOME_GET), 1);
	assert_int_equal(rig_sup_count(IPC_SLOT_REQ), 0);
	assert_int_equal(rig_sup_last(IPC_WELCOME_GET, NULL, names, sizeof(names)), sizeof(names));
	rig_sup_send(IPC_WELCOME, 0, names, sizeof(names));     /* none has them */
	assert_int_equal(rig_client_of(c)->state, CLIENT_WAITING_LOGIN);
	assert_int_equal(rig_sup_count(IPC_SLOT_REQ), 1);
	assert_false(rig_pg_pending());                 /* not before the ledger says so */
	assert_int_equal(rig_sup_last(IPC_SLOT_REQ, &why, &r, sizeof(r)), sizeof(r));
	assert_string_equal(r.db, "db");
	assert_string_equal(r.user, "alice");
	assert_int_equal(r.pool_limit, 1);
	rig_sup_send(IPC_SLOT_GRANT, why, &r, sizeof(r));
	rig_pg_accept(pg);
	rig_pg_login(pg, 31, 32);
	rig_client_welcome(c, NULL, NULL);
	assert_int_equal(rig_sup_count(IPC_WELCOME_PUT), 1);  /* shared for the others */
	rig_round_trip(c, pg, "SELECT 1", 'I');
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle, 1);
	return p;
}

static struct pool *two_workers_idle_server(struct peer *c, struct peer *pg)
{
	return idle_server_with(c, pg, "pool_mode = transaction\ndefault_pool_size = 1");
}

/* A new pool's first client, max_db_connections = 2 over the instance:
 * asks the welcome (none known), and then what test_evict_* check. */
static void new_pool_client(struct peer *c, const char *user)
{
	char names[2 * LEDGER_NAME];
	rig_client(c, user, "db");
	assert_int_equal(rig_sup_last(IPC_WELCOME_GET, NULL, names, sizeof(names)), sizeof(names));
	rig_sup_send(IPC_WELCOME, 0, names, sizeof(names));
}

/* max_db_connections full over the instance (the ledger's count in shared
 * memory, `published`) though not here: the worker closes its idle server
 * of another pool of the database before it asks, and the release goes
 * ahead of the request (one batch), so the ledger grants at once; not
 * full, it asks and closes nothing (the ledger decides). */
static void bob_asks_with(int published)
{
	struct peer a, b, pg;
	struct slot_req r;
	struct pool *p = idle_server_with(&a, &pg, "pool_mode = transaction\ndefault_pool_size = 1\n"
						   "max_db_connections = 2");
	int idx = p->db->shm_idx;
	assert_true(idx >= 0);
	assert_int_equal(p->db->n_servers, 1);
	shm_name_servers_set(idx, published);
	new_pool_client(&b, "bob");
	assert_int_equal(rig_sup_count(IPC_SLOT_REQ), 2);
	assert_int_equal(rig_sup_last(IPC_SLOT_REQ, NULL, &r, sizeof(r)), sizeof(r));
	assert_string_equal(r.user, "bob");
	assert_int_equal(r.db_limit, 2);
	if (published < 2) {
		assert_int_equal(rig_sup_count(IPC_SLOT_RELEASE), 0);
		assert_int_equal(p->n_idle, 1);
		rig_expect_nothing(&pg);
	} else {
		assert_int_equal(rig_sup_count(IPC_SLOT_RELEASE), 1);
		assert_true(rig_sup_last_at(IPC_SLOT_RELEASE) < rig_sup_last_at(IPC_SLOT_REQ));
		assert_int_equal(rig_sup_last(IPC_SLOT_RELEASE, NULL, &r, sizeof(r)), sizeof(r));
		assert_string_equal(r.user, "alice");
		assert_int_equal(r.claim, SLOT_CLAIM_NONE);
		assert_int_equal(p->n_idle, 0);
		rig_expect(&pg, 'X', NULL);            /* evicted */
	}
	rig_close(&a);
	rig_close(&b);
	rig_close(&pg);
}

static void test_evict_here_when_full_elsewhere(void **state)
{
	(void)state;
	bob_asks_with(2);
}

static void test_no_evict_here_with_room(void **state)
{
	(void)state;
	bob_asks_with(1);
}

static struct pool_want want_of_alice(int same)
{
	struct pool_want want = { .n = 1, .soon = 1, .over = same, .same = same,
				  .other_since = fakeclock_now() - USEC_PER_SEC };
	strlcpy_(want.pool.db, "db", sizeof(want.pool.db));
	strlcpy_(want.pool.user, "alice", sizeof(want.pool.user));
	return want;
}

/* When another worker's clients want a server of the pool, the idle one
 * leaves with its socket (the same backend connection), no Terminate, no
 * slot release (the ledger moves the slot). */
static void test_two_workers(void **state)
{
	struct peer c, pg;
	(void)state;
	struct pool *p = two_workers_idle_server(&c, &pg);

	struct pool_want want = want_of_alice(1);
	rig_sup_send(IPC_POOL_WANT, 0, &want, sizeof(want));
	assert_int_equal(rig_sup_count(IPC_SERVER_FD), 1);
	assert_int_equal(p->n_idle, 0);
	assert_int_equal(rig_sup_count(IPC_SLOT_RELEASE), 0);
	int moved = rig_sup_last_fd(IPC_SERVER_FD);
	assert_true(moved >= 0);
	/* The backend did not hear a Terminate, and its socket is the one
	 * that left: what it sends arrives there. */
	rig_expect_nothing(&pg);
	assert_int_equal(send(pg.fd, "x", 1, 0), 1);
	char got;
	assert_int_equal(recv(moved, &got, 1, 0), 1);
	assert_int_equal(got, 'x');
	rig_close(&c);
	rig_close(&pg);
}

/* Wanted by other pools' clients only (a full max_db_connections): only
 * a close serves them, so the worker closes its idle server itself (a
 * Terminate) and tells the supervisor, with no handover of it. */
static void test_other_pools_want_closes_here(void **state)
{
	struct peer c, pg;
	(void)state;
	struct pool *p = two_workers_idle_server(&c, &pg);
	struct pool_want want = want_of_alice(0);
	rig_sup_send(IPC_POOL_WANT, 0, &want, sizeof(want));
	assert_int_equal(rig_sup_count(IPC_SERVER_FD), 0);
	assert_int_equal(rig_sup_count(IPC_EVICT_DONE), 1);
	assert_int_equal(p->n_idle, 0);
	rig_expect(&pg, 'X', NULL);
	rig_close(&c);
	rig_close(&pg);
}

/* An IPC_POOL_EVICT for db/user, for the limit `claim` names. */
static struct slot_req evict_of(const char *user, uint8_t claim)
{
	struct slot_req r;
	memset(&r, 0, sizeof(r));
	strlcpy_(r.db, "db", sizeof(r.db));
	strlcpy_(r.user, user, sizeof(r.user));
	r.claim = claim;
	return r;
}

/* The supervisor names the pool's idle server for eviction: closed at
 * once; asked again with none left, the worker says so. */
static void test_evict_asked(void **state)
{
	struct peer c, pg;
	(void)state;
	struct pool *p = two_workers_idle_server(&c, &pg);
	struct slot_req r = evict_of("alice", SLOT_CLAIM_NONE);
	rig_sup_send(IPC_POOL_EVICT, 0, &r, sizeof(r));
	assert_int_equal(p->n_idle, 0);
	rig_expect(&pg, 'X', NULL);
	assert_int_equal(rig_sup_count(IPC_EVICT_NONE), 0);
	rig_sup_send(IPC_POOL_EVICT, 0, &r, sizeof(r));
	assert_int_equal(rig_sup_count(IPC_EVICT_NONE), 1);
	assert_int_equal(rig_sup_count(IPC_SERVER_FD), 0);
	rig_close(&c);
	rig_close(&pg);
}

/* Told to evict a pool with no idle server here (its client took it):
 * another pool's idle server of the database in the way is closed
 * instead; of a user in the way, only that user's pools count. */
static void test_evict_asked_another_pool(void **state)
{
	struct peer c, pg;
	(void)state;
	struct pool *p = two_workers_idle_server(&c, &pg);
	struct slot_req r = evict_of("carol", SLOT_CLAIM_USER);   /* carol's limit: alice's is no help */
	rig_sup_send(IPC_POOL_EVICT, 0, &r, sizeof(r));
	assert_int_equal(rig_sup_count(IPC_EVICT_NONE), 1);
	assert_int_equal(p->n_idle, 1);
	r.claim = SLOT_CLAIM_DB;                       /* the database's: it is */
	rig_sup_send(IPC_POOL_EVICT, 0, &r, sizeof(r));
	assert_int_equal(rig_sup_count(IPC_EVICT_NONE), 1);
	assert_int_equal(p->n_idle, 0);
	rig_expect(&pg, 'X', NULL);
	rig_close(&c);
	rig_close(&pg);
}

/* Closes are offered on the database's shared slot (eviction claims):
 * the pool's server, come free with nobody of the pool waiting, is
 * claimed and closed instead of going idle, and its slot's release says
 * it was a claim; with nothing offered it goes idle as before. */
static void test_claim_closes_a_freed_server(void **state)
{
	struct peer c, pg;
	struct slot_req r;
	uint32_t base;
	(void)state;
	struct pool *p = two_workers_idle_server(&c, &pg);
	int idx = p->db->shm_idx;
	assert_true(idx >= 0);
	assert_int_equal(shm_evict_on_way(idx, &base), 0);
	shm_evict_offer(idx, base, 1);
	rig_round_trip(&c, &pg, "SELECT 2", 'I');      /* freed: claimed, closed */
	assert_int_equal(shm_evict_open(idx), 0);
	assert_int_equal(shm_evict_on_way(idx, &base), 1);
	assert_int_equal(p->n_idle, 0);
	rig_expect(&pg, 'X', NULL);
	assert_int_equal(rig_sup_count(IPC_EVICT_DONE), 0);   /* no notice for it */
	/* The slot went back with the close, the backend still there (as
	 * PgBouncer evicts and opens in one step). */
	assert_int_equal(rig_sup_count(IPC_SLOT_RELEASE), 1);
	rig_close(&pg);
	assert_int_equal(rig_sup_last(IPC_SLOT_RELEASE, NULL, &r, sizeof(r)), sizeof(r));
	assert_string_equal(r.user, "alice");
	assert_int_equal(r.claim, SLOT_CLAIM_DB);
	rig_close(&c);
}

static void test_no_claim_offered_goes_idle(void **state)
{
	struct peer c, pg;
	(void)state;
	struct pool *p = two_workers_idle_server(&c, &pg);
	rig_round_trip(&c, &pg, "SELECT 2", 'I');
	assert_int_equal(p->n_idle, 1);
	rig_expect_nothing(&pg);
	rig_close(&c);
	rig_close(&pg);
}

/* The verdict of the reuse order: does another worker's idle server
 * (last used at `there`) come before ours (`here`) by more than the
 * slack? LIFO: the most recently used first; round robin: the least. */
static void test_reuse_verdict(void **state)
{
	static const struct {
		usec_t here, there, slack;
		bool rr, verdict;
	} cases[] = {
		{ 1000, 1200, 100, false, true },    /* theirs newer by 200 */
		{ 1000, 1100, 100, false, false },   /* by the slack exactly: ours */
		{ 1000, 1101, 100, false, true },
		{ 1000, 900, 100, false, false },    /* theirs older */
		{ 1000, 0, 100, false, false },      /* none elsewhere */
		{ 0, 1000, 100, false, false },      /* none here: nothing to choose */
		{ 1000, 800, 100, true, true },      /* round robin: theirs older by 200 */
		{ 1000, 900, 100, true, false },     /* by the slack exactly: ours */
		{ 1000, 899, 100, true, true },
		{ 1000, 1200, 100, true, false },    /* theirs newer */
		{ 1000, 0, 100, true, false },
		{ 1000, 1001, 0, false, true },      /* no slack: strict order */
		{ 1000, 999, 0, true, true },
		{ 1000, 1000, 0, false, false },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool v = pool_reuse_elsewhere(cases[i].here, cases[i].there, cases[i].slack, cases[i].rr);
		if (v != cases[i].verdict)
			fail_msg("case %zu: here %lld there %lld slack %lld rr %d: got %d", i,
				 (long long)cases[i].here, (long long)cases[i].there,
				 (long long)cases[i].slack, cases[i].rr, v);
	}
}

/* A worker's share of a pool's servers by its clients, rounded up: a
 * worker within it keeps a server it has just released longer for its own
 * contending clients, so two busy workers do not trade servers. */
static void test_within_share(void **state)
{
	static const struct {
		int held, size, mine, all;
		bool verdict;
	} cases[] = {
		{ 10, 20, 20, 40, true },     /* an even split, each its half */
		{ 11, 20, 20, 40, false },    /* one more than half */
		{ 11, 20, 21, 40, true },     /* 21/19: ceil(10.5) = 11 */
		{ 10, 20, 19, 40, true },     /* and ceil(9.5) = 10 */
		{ 11, 20, 19, 40, false },
		{ 1, 1, 1, 2, true },         /* pool of 1, two workers: ceil(0.5) */
		{ 0, 5, 1, 20, true },        /* holding none */
		{ 2, 5, 1, 20, false },       /* 1 of 20 clients: ceil(0.25) = 1 */
		{ 20, 20, 40, 40, true },     /* every client here */
		{ 3, 20, 0, 40, false },      /* no client here */
		{ 3, 20, 2, 0, false },       /* no shared counts */
		{ 3, 0, 2, 4, false },        /* no pool size */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool v = pool_within_share(cases[i].held, cases[i].size, cases[i].mine, cases[i].all);
		if (v != cases[i].verdict)
			fail_msg("case %zu: held %d size %d mine %d all %d: got %d", i, cases[i].held,
				 cases[i].size, cases[i].mine, cases[i].all, v);
	}
}

/* Two workers, LIFO: worker 1 publishes an idle server used later than
 * ours. Within the slack (100 ms) our client takes ours at once; beyond
 * it the client waits for theirs (a move-only request to the ledger, our
 * server stays idle and PostgreSQL hears nothing), and when the ledger
 * denies it (none came) the client takes ours. */
static void test_reuse_order_two_workers(void **state)
{
	struct peer c, pg;
	struct slot_req r;
	uint32_t why;
	char names[2 * LEDGER_NAME];
	struct msg m;
	(void)state;
	assert_int_equal(hist_create(2, 64), 0);
	hist_attach_worker(1);
	struct hist_pool_cell *other = hist_pool_hold("db", "alice", NULL);
	hist_attach_worker(0);
	rig_start_workers(2, "pool_mode = transaction\ndefault_pool_size = 2", DBS);
	rig_client(&c, "alice", "db");
	assert_int_equal(rig_sup_last(IPC_WELCOME_GET, NULL, names, sizeof(names)), sizeof(names));
	rig_sup_send(IPC_WELCOME, 0, names, sizeof(names));
	assert_int_equal(rig_sup_last(IPC_SLOT_REQ, &why, &r, sizeof(r)), sizeof(r));
	rig_sup_send(IPC_SLOT_GRANT, why, &r, sizeof(r));
	rig_pg_accept(&pg);
	rig_pg_login(&pg, 31, 32);
	rig_client_welcome(&c, NULL, NULL);
	rig_round_trip(&c, &pg, "SELECT 1", 'I');
	struct pool *p = rig_pool("db", "alice");
	assert_int_equal(p->n_idle, 1);
	int asked = rig_sup_count(IPC_SLOT_REQ);

	/* Theirs is newer than ours, by less than the slack: ours. */
	fakeclock_advance(200 * USEC_PER_MSEC);
	hist_pool_set_next(other, fakeclock_now() - 150 * USEC_PER_MSEC);
	rig_round_trip(&c, &pg, "SELECT 2", 'I');
	assert_int_equal(rig_sup_count(IPC_SLOT_REQ), asked);

	/* By more than the slack: the client waits for theirs. */
	fakeclock_advance(200 * USEC_PER_MSEC);
	hist_pool_set_next(other, fakeclock_now() - 50 * USEC_PER_MSEC);
	rig_send_query(&c, "SELECT 3");
	rig_pump();
	assert_int_equal(rig_client_of(&c)->state, CLIENT_WAITING);
	assert_int_equal(p->n_idle, 1);
	assert_int_equal(rig_sup_count(IPC_SLOT_REQ), asked + 1);
	assert_int_equal(rig_sup_last(IPC_SLOT_REQ, &why, &r, sizeof(r)), sizeof(r));
	assert_int_equal(r.move, 1);
	assert_int_equal(r.wait, 1);
	rig_expect_nothing(&pg);
	/* None came: the ledger denies it and ours serves. */
	rig_sup_send(IPC_SLOT_DENY, why, &r, sizeof(r));
	rig_expect(&pg, 'Q', &m);
	assert_string_equal((const char *)m.body, "SELECT 3");
	rig_send_done(&pg, "SELECT 1", 'I');
	rig_expect(&c, 'C', NULL);
	rig_expect(&c, 'Z', NULL);
	assert_int_equal(p->n_move_wait, 0);
	assert_false(p->reuse_held);
	assert_false(rig_pg_pending());          /* no new backend either */
	rig_close(&c);
	rig_close(&pg);
	hist_destroy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_transaction_mode, rig_teardown),
		cmocka_unit_test_teardown(test_release_mid_message, rig_teardown),
		cmocka_unit_test_teardown(test_session_mode, rig_teardown),
		cmocka_unit_test_teardown(test_statement_mode, rig_teardown),
		cmocka_unit_test_teardown(test_fifo, rig_teardown),
		cmocka_unit_test_teardown(test_pool_size, rig_teardown),
		cmocka_unit_test_teardown(test_evict_idle_of_another_pool, rig_teardown),
		cmocka_unit_test_teardown(test_two_workers, rig_teardown),
		cmocka_unit_test_teardown(test_other_pools_want_closes_here, rig_teardown),
		cmocka_unit_test_teardown(test_evict_asked, rig_teardown),
		cmocka_unit_test_teardown(test_evict_asked_another_pool, rig_teardown),
		cmocka_unit_test_teardown(test_evict_here_when_full_elsewhere, rig_teardown),
		cmocka_unit_test_teardown(test_no_evict_here_with_room, rig_teardown),
		cmocka_unit_test_teardown(test_claim_closes_a_freed_server, rig_teardown),
		cmocka_unit_test_teardown(test_no_claim_offered_goes_idle, rig_teardown),
		cmocka_unit_test(test_reuse_verdict),
		cmocka_unit_test(test_within_share),
		cmocka_unit_test_teardown(test_reuse_order_two_workers, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for target_session_attrs over a host list: the role a
 * server's reported parameters give, which roles serve which setting
 * (libpq's meanings), prefer-standby's fallback, and the host picked next
 * around skipped hosts and known mismatches, the address of a host name
 * with several tried next, and the answer to the role query asked of
 * PostgreSQL < 14. A database without a shared
 * memory row keeps roles in its own arrays, which these tests use. The
 * skips last HOSTROLE_SKIP_USEC on the tests' fake clock (fakeclock.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "fakeclock.h"
#include "hostrole.h"

static char *host_names[] = { "h0", "h1", "h2" };

static void mkdb(struct database *db, enum tsa t)
{
	memset(db, 0, sizeof(*db));
	strcpy(db->name, "d");
	db->hosts = host_names;
	db->n_hosts = 3;
	db->port = 5432;
	db->shm_idx = -1;
	db->tsa = (int)t;
}

static enum host_role role_of(int hot_standby, int read_only)
{
	struct server sv;
	memset(&sv, 0, sizeof(sv));
	sv.hot_standby = (int8_t)hot_standby;
	sv.read_only = (int8_t)read_only;
	return hostrole_of_server(&sv);
}

static void test_role_of_server(void **state)
{
	(void)state;
	assert_int_equal(role_of(-1, -1), ROLE_UNKNOWN);     /* PostgreSQL < 14 */
	assert_int_equal(role_of(0, 0), ROLE_PRIMARY);
	assert_int_equal(role_of(0, 1), ROLE_READ_ONLY);
	assert_int_equal(role_of(1, 1), ROLE_STANDBY);       /* a standby reports both on */
	assert_int_equal(role_of(1, -1), ROLE_STANDBY);
	assert_string_equal(host_role_name(ROLE_READ_ONLY), "read-only");
}

static void test_serves(void **state)
{
	static const struct { enum tsa t; bool primary, read_only, standby; } want[] = {
		{ TSA_ANY, true, true, true },
		{ TSA_READ_WRITE, true, false, false },
		{ TSA_READ_ONLY, false, true, true },
		{ TSA_PRIMARY, true, true, false },
		{ TSA_STANDBY, false, false, true },
	};
	struct database db;
	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		mkdb(&db, want[i].t);
		assert_int_equal(hostrole_serves(&db, 0, ROLE_PRIMARY), want[i].primary);
		assert_int_equal(hostrole_serves(&db, 0, ROLE_READ_ONLY), want[i].read_only);
		assert_int_equal(hostrole_serves(&db, 0, ROLE_STANDBY), want[i].standby);
	}
}

/* prefer-standby takes a primary only while no other host may be a standby. */
static void test_prefer_standby(void **state)
{
	struct database db;
	(void)state;
	mkdb(&db, TSA_PREFER_STANDBY);
	assert_true(hostrole_serves(&db, 0, ROLE_STANDBY));
	assert_false(hostrole_serves(&db, 0, ROLE_PRIMARY));      /* h1, h2 unknown */
	hostrole_note(&db, 1, ROLE_PRIMARY);
	hostrole_note(&db, 2, ROLE_STANDBY);
	assert_false(hostrole_serves(&db, 0, ROLE_PRIMARY));
	hostrole_skip(&db, 2);                                   /* the standby is down */
	assert_true(hostrole_serves(&db, 0, ROLE_PRIMARY));
}

static void test_pick(void **state)
{
	struct database db;
	(void)state;
	mkdb(&db, TSA_READ_WRITE);
	assert_int_equal(hostrole_pick(&db, 0), 0);              /* all unknown: list order */
	assert_int_equal(hostrole_pick(&db, 2), 2);
	hostrole_note(&db, 0, ROLE_STANDBY);
	assert_int_equal(hostrole_get(&db, 0), ROLE_STANDBY);
	assert_int_equal(hostrole_pick(&db, 0), 1);              /* a known standby is passed over */
	hostrole_skip(&db, 1);
	assert_int_equal(hostrole_skipped_until(&db, 1), fakeclock_now() + HOSTROLE_SKIP_USEC);
	assert_int_equal(hostrole_pick(&db, 0), 2);
	hostrole_skip(&db, 2);
	/* Only the known standby is left: tried anyway, it may have been promoted. */
	assert_int_equal(hostrole_pick(&db, 1), 0);
	hostrole_skip(&db, 0);
	assert_int_equal(hostrole_pick(&db, 0), -1);             /* all skipped: wait */
	/* Until the skips are over. */
	fakeclock_advance(HOSTROLE_SKIP_USEC - 1);
	assert_int_equal(hostrole_pick(&db, 0), -1);
	fakeclock_advance(1);
	assert_int_equal(hostrole_pick(&db, 0), 1);
	hostrole_note(&db, 9, ROLE_PRIMARY);                      /* past the list: ignored */
	assert_int_equal(hostrole_get(&db, 9), ROLE_UNKNOWN);
}

static void test_addresses(void **state)
{
	struct database db;
	(void)state;
	mkdb(&db, TSA_READ_WRITE);
	/* One address (or a literal): nothing to choose, nothing left. */
	assert_int_equal(hostrole_pick_addr(&db, 0, 1), 0);
	assert_false(hostrole_addr_failed(&db, 0, 0, 1));
	assert_false(hostrole_addr_failed(&db, 0, 0, 0));
	/* Three: the first serves until it fails, then the next, in order. */
	assert_int_equal(hostrole_pick_addr(&db, 1, 3), 0);
	assert_int_equal(hostrole_pick_addr(&db, 1, 3), 0);
	assert_true(hostrole_addr_failed(&db, 1, 0, 3));
	assert_int_equal(hostrole_pick_addr(&db, 1, 3), 1);
	assert_int_equal(hostrole_pick_addr(&db, 1, 3), 1);     /* it stays */
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 0);     /* another host's own */
	assert_true(hostrole_addr_failed(&db, 1, 1, 3));
	assert_int_equal(hostrole_pick_addr(&db, 1, 3), 2);
	assert_false(hostrole_addr_failed(&db, 1, 2, 3));      /* none left: the host failed */
	/* After the back-off the first is tried again, from where it left off. */
	fakeclock_advance(HOSTROLE_SKIP_USEC - 1);
	assert_false(hostrole_addr_failed(&db, 1, 2, 3));      /* still none left */
	fakeclock_advance(1);
	assert_int_equal(hostrole_pick_addr(&db, 1, 3), 0);
	/* A different answer starts over; hosts past the kept ones take the first. */
	assert_true(hostrole_addr_failed(&db, 1, 0, 3));
	assert_int_equal(hostrole_pick_addr(&db, 1, 2), 0);
	assert_int_equal(hostrole_pick_addr(&db, SHM_HOSTS, 4), 0);
	assert_false(hostrole_addr_failed(&db, SHM_HOSTS, 0, 4));
	assert_false(hostrole_addr_failed(&db, 1, 5, 2));       /* not an address of the answer */
	/* `any`: each address in turn (PgBouncer's DNS round robin), past
	 * one that failed a moment ago. */
	mkdb(&db, TSA_ANY);
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 0);
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 1);
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 2);
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 0);
	assert_true(hostrole_addr_failed(&db, 0, 1, 3));
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 2);
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 0);
	assert_int_equal(hostrole_pick_addr(&db, 0, 3), 2);
}

/* A DataRow body of two text columns; NULL stands for SQL NULL. */
static size_t row(uint8_t *buf, int ncol, const char *a, const char *b)
{
	const char *col[2] = { a, b };
	size_t n = 0;
	buf[n++] = (uint8_t)(ncol >> 8);
	buf[n++] = (uint8_t)ncol;
	for (int i = 0; i < 2; i++) {
		int32_t len = col[i] ? (int32_t)strlen(col[i]) : -1;
		uint32_t be = (uint32_t)len;
		buf[n++] = (uint8_t)(be >> 24); buf[n++] = (uint8_t)(be >> 16);
		buf[n++] = (uint8_t)(be >> 8); buf[n++] = (uint8_t)be;
		if (len > 0)
			memcpy(buf + n, col[i], (size_t)len), n += (size_t)len;
	}
	return n;
}

static void test_parse_row(void **state)
{
	static const struct { const char *rec, *ro; int ncol; bool ok; int8_t want_rec, want_ro; } cases[] = {
		{ "f", "off", 2, true, 0, 0 },          /* primary */
		{ "f", "on", 2, true, 0, 1 },           /* default_transaction_read_only */
		{ "t", "on", 2, true, 1, 1 },           /* standby */
		{ "t", NULL, 2, false, 0, 0 },          /* NULL setting */
		{ "yes", "off", 2, false, 0, 0 },       /* not a boolean's text */
		{ "f", "off", 3, false, 0, 0 },         /* column count does not match */
		{ "", "off", 2, false, 0, 0 },
	};
	uint8_t buf[64];
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int8_t rec = -1, ro = -1;
		size_t n = row(buf, cases[i].ncol, cases[i].rec, cases[i].ro);
		assert_int_equal(hostrole_parse_row(buf, n, &rec, &ro), cases[i].ok);
		assert_int_equal(rec, cases[i].ok ? cases[i].want_rec : -1);
		assert_int_equal(ro, cases[i].ok ? cases[i].want_ro : -1);
	}
	/* Truncated and trailing bytes. */
	size_t n = row(buf, 2, "t", "on");
	int8_t rec = -1, ro = -1;
	for (size_t cut = 0; cut < n; cut++)
		assert_false(hostrole_parse_row(buf, cut, &rec, &ro));
	buf[n] = 0;
	assert_false(hostrole_parse_row(buf, n + 1, &rec, &ro));
	assert_int_equal(rec, -1);
	assert_true(hostrole_parse_row(buf, n, &rec, &ro));
	assert_int_equal(rec, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_role_of_server),
		cmocka_unit_test(test_serves),
		cmocka_unit_test(test_prefer_standby),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_parse_row),
		cmocka_unit_test(test_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

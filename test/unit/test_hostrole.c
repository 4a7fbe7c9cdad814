/* pgcrew — unit tests for target_session_attrs over a host list: the role a
 * server's reported parameters give, which roles serve which setting
 * (libpq's meanings), prefer-standby's fallback, and the host picked next
 * around skipped hosts and known mismatches. A database without a shared
 * memory row keeps roles in its own arrays, which these tests use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
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
	assert_true(hostrole_skipped_until(&db, 1) > 0);
	assert_int_equal(hostrole_pick(&db, 0), 2);
	hostrole_skip(&db, 2);
	/* Only the known standby is left: tried anyway, it may have been promoted. */
	assert_int_equal(hostrole_pick(&db, 1), 0);
	hostrole_skip(&db, 0);
	assert_int_equal(hostrole_pick(&db, 0), -1);             /* all skipped: wait */
	hostrole_note(&db, 9, ROLE_PRIMARY);                      /* past the list: ignored */
	assert_int_equal(hostrole_get(&db, 9), ROLE_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_role_of_server),
		cmocka_unit_test(test_serves),
		cmocka_unit_test(test_prefer_standby),
		cmocka_unit_test(test_pick),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

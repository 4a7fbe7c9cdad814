/* pgcrew — unit tests for connection strings (src/config/connstr.c): the
 * libpq-style tokenizer, every [databases]/[users]/[peers] key, and the
 * errors for bad keys and values with file, line and key. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connstr.h"

static const struct {
	const char *text;
	const char *pairs;          /* "k=<v>;" per pair, or NULL when it must fail */
	const char *error;          /* part of the message on failure */
} token_cases[] = {
	{ "", "", NULL },
	{ "   ", "", NULL },
	{ "host=a port=5", "host=<a>;port=<5>;", NULL },
	{ "  host = a \t port= 5 ", "host=<a>;port=<5>;", NULL },
	{ "password='a b'", "password=<a b>;", NULL },
	{ "password='it''s'", "password=<it's>;", NULL },
	{ "password='it\\'s'", "password=<it's>;", NULL },
	{ "x='a\\\\b' y=z", "x=<a\\b>;y=<z>;", NULL },
	{ "x=a\\ b", "x=<a b>;", NULL },
	{ "x=''", "x=<>;", NULL },
	{ "q='SELECT 1 WHERE a = ''x''' n=1", "q=<SELECT 1 WHERE a = 'x'>;n=<1>;", NULL },
	{ "host", NULL, "missing '=' after 'host'" },
	{ "a=1 host port=1", NULL, "missing '=' after 'host'" },
	{ "=a", NULL, "missing parameter name" },
	{ "x='abc", NULL, "unterminated quoted value for 'x'" },
	{ "x='it''s", NULL, "unterminated quoted value for 'x'" },
	{ "x='a'b", NULL, "unexpected text after quoted value for 'x'" },
	{ "x=", NULL, "missing value for 'x'" },
	{ "x= ", NULL, "missing value for 'x'" },
};

static void test_tokenizer(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(token_cases) / sizeof(token_cases[0]); i++) {
		struct connstr cs;
		char msg[200] = "", got[400] = "";
		int rc = connstr_parse(token_cases[i].text, &cs, msg, sizeof(msg));

		if (!token_cases[i].pairs) {
			if (rc != -1 || !strstr(msg, token_cases[i].error))
				fail_msg("'%s': rc %d msg '%s', want error '%s'", token_cases[i].text, rc, msg,
					 token_cases[i].error);
			assert_null(cs.pairs);
			continue;
		}
		if (rc != 0)
			fail_msg("'%s': unexpected error %s", token_cases[i].text, msg);
		for (int j = 0; j < cs.n; j++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s=<%s>;",
				 cs.pairs[j].key, cs.pairs[j].value);
		if (strcmp(got, token_cases[i].pairs) != 0)
			fail_msg("'%s': got %s want %s", token_cases[i].text, got, token_cases[i].pairs);
		connstr_clear(&cs);
	}
}

static void test_db_defaults(void **state)
{
	struct db_def db;
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(connstr_parse_db("foodb", "", "f.ini", 3, &db, &err), 0);
	assert_string_equal(db.name, "foodb");
	assert_null(db.host);
	assert_int_equal(db.n_hosts, 0);
	assert_int_equal(db.port, 5432);
	assert_null(db.dbname);
	assert_null(db.user);
	assert_null(db.password);
	assert_int_equal(db.pool_size, -1);
	assert_int_equal(db.min_pool_size, -1);
	assert_int_equal(db.reserve_pool_size, -1);
	assert_int_equal(db.max_db_connections, -1);
	assert_int_equal(db.max_db_client_connections, -1);
	assert_int_equal(db.pool_mode, -1);
	assert_int_equal(db.load_balance_hosts, LB_ROUND_ROBIN);
	assert_int_equal(db.server_lifetime, -1);
	assert_int_equal(db.query_wait_timeout, -1);
	assert_int_equal(db.sslnegotiation, -1);
	assert_int_equal(db.target_session_attrs, -1);
	assert_string_equal(db.file, "f.ini");
	assert_int_equal(db.line, 3);
	connstr_db_free(&db);
}

static void test_db_every_key(void **state)
{
	struct db_def db;
	struct config_error err = { "" };
	const char *text =
		"host=h1,/var/run/postgresql port=6000 dbname=real user=u password='p w' "
		"auth_user=au auth_query='SELECT p FROM t WHERE u=$1' auth_dbname=adb pool_size=5 "
		"min_pool_size=1 reserve_pool_size=2 max_db_connections=7 max_db_client_connections=9 "
		"pool_mode=transaction connect_query='SELECT 2' client_encoding=UTF8 datestyle=ISO "
		"timezone=UTC application_name=app load_balance_hosts=disable server_lifetime=30 "
		"query_wait_timeout=1.5 sslnegotiation=direct target_session_attrs=read-write";

	(void)state;
	if (connstr_parse_db("d", text, "f.ini", 1, &db, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(db.host, "h1,/var/run/postgresql");
	assert_int_equal(db.n_hosts, 2);
	assert_string_equal(db.hosts[0], "h1");
	assert_string_equal(db.hosts[1], "/var/run/postgresql");
	assert_int_equal(db.port, 6000);
	assert_string_equal(db.dbname, "real");
	assert_string_equal(db.user, "u");
	assert_string_equal(db.password, "p w");
	assert_string_equal(db.auth_user, "au");
	assert_string_equal(db.auth_query, "SELECT p FROM t WHERE u=$1");
	assert_string_equal(db.auth_dbname, "adb");
	assert_int_equal(db.pool_size, 5);
	assert_int_equal(db.min_pool_size, 1);
	assert_int_equal(db.reserve_pool_size, 2);
	assert_int_equal(db.max_db_connections, 7);
	assert_int_equal(db.max_db_client_connections, 9);
	assert_int_equal(db.pool_mode, POOL_TRANSACTION);
	assert_string_equal(db.connect_query, "SELECT 2");
	assert_string_equal(db.client_encoding, "UTF8");
	assert_string_equal(db.datestyle, "ISO");
	assert_string_equal(db.timezone, "UTC");
	assert_string_equal(db.application_name, "app");
	assert_int_equal(db.load_balance_hosts, LB_DISABLE);
	assert_int_equal(db.server_lifetime, 30 * USEC_PER_SEC);
	assert_int_equal(db.query_wait_timeout, 1500 * USEC_PER_MSEC);
	assert_int_equal(db.sslnegotiation, SSLNEG_DIRECT);
	assert_int_equal(db.target_session_attrs, TSA_READ_WRITE);
	connstr_db_free(&db);
}

static void test_db_aliases_and_repeats(void **state)
{
	struct db_def db;
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(connstr_parse_db("d", "reserve_pool=4 host=a host='b , c' pool_mode=Statement",
					  "f.ini", 1, &db, &err), 0);
	assert_int_equal(db.reserve_pool_size, 4);
	assert_string_equal(db.host, "b , c");            /* the last one wins */
	assert_int_equal(db.n_hosts, 2);
	assert_string_equal(db.hosts[0], "b");
	assert_string_equal(db.hosts[1], "c");
	assert_int_equal(db.pool_mode, POOL_STATEMENT);
	connstr_db_free(&db);
}

static const struct {
	const char *text, *error;
} bad_db_cases[] = {
	{ "bogus=1", "f.ini:7: database 'd': unknown parameter 'bogus'" },
	{ "host=a sslmode=require", "f.ini:7: database 'd': unknown parameter 'sslmode'" },
	{ "pool_size=abc", "f.ini:7: database 'd': bad value 'abc' for 'pool_size'" },
	{ "pool_size=-1", "bad value '-1' for 'pool_size'" },
	{ "min_pool_size=1.5", "bad value '1.5' for 'min_pool_size'" },
	{ "max_db_connections=99999999999", "bad value '99999999999' for 'max_db_connections'" },
	{ "port=0", "bad value '0' for 'port'" },
	{ "port=65536", "bad value '65536' for 'port'" },
	{ "pool_mode=bogus", "bad value 'bogus' for 'pool_mode'" },
	{ "load_balance_hosts=random", "bad value 'random' for 'load_balance_hosts'" },
	{ "sslnegotiation=tls", "bad value 'tls' for 'sslnegotiation'" },
	{ "target_session_attrs=writable", "bad value 'writable' for 'target_session_attrs'" },
	{ "server_lifetime=soon", "bad value 'soon' for 'server_lifetime'" },
	{ "host=a,,b", "f.ini:7: database 'd': empty entry in host list" },
	{ "host='x", "f.ini:7: database 'd': unterminated quoted value for 'host'" },
	{ "host", "f.ini:7: database 'd': missing '=' after 'host'" },
};

static void test_db_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_db_cases) / sizeof(bad_db_cases[0]); i++) {
		struct db_def db;
		struct config_error err = { "" };

		if (connstr_parse_db("d", bad_db_cases[i].text, "f.ini", 7, &db, &err) != -1)
			fail_msg("'%s' was accepted", bad_db_cases[i].text);
		if (!strstr(err.msg, bad_db_cases[i].error))
			fail_msg("'%s': message '%s' lacks '%s'", bad_db_cases[i].text, err.msg, bad_db_cases[i].error);
		assert_null(db.name);           /* nothing is left owned */
	}
}

/* password= up to 65,535 bytes is kept whole; longer is an error that does
 * not print it. */
static void test_db_long_password(void **state)
{
	char *text = malloc(SECRET_MAX_LEN + 32), *pw = malloc(SECRET_MAX_LEN + 1);
	struct db_def db;
	struct config_error err = { "" };

	(void)state;
	memset(pw, 's', SECRET_MAX_LEN - 1);
	pw[SECRET_MAX_LEN - 1] = 0;
	snprintf(text, SECRET_MAX_LEN + 32, "host=a password=%s", pw);
	assert_int_equal(connstr_parse_db("d", text, "f.ini", 4, &db, &err), 0);
	assert_int_equal(strlen(db.password), SECRET_MAX_LEN - 1);
	connstr_db_free(&db);
	memset(pw, 's', SECRET_MAX_LEN);
	pw[SECRET_MAX_LEN] = 0;
	snprintf(text, SECRET_MAX_LEN + 32, "host=a password=%s", pw);
	assert_int_equal(connstr_parse_db("d", text, "f.ini", 4, &db, &err), -1);
	assert_string_equal(err.msg, "f.ini:4: database 'd': 'password' is longer than 65535 bytes");
	assert_null(strstr(err.msg, "sss"));
	free(text);
	free(pw);
}

static void test_user_every_key(void **state)
{
	struct user_def u;
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(connstr_parse_user("alice", "pool_mode=session pool_size=3 reserve_pool_size=1 "
					    "max_user_connections=4 max_user_client_connections=40 "
					    "query_timeout=2min idle_transaction_timeout=500ms "
					    "client_idle_timeout=1h transaction_timeout=0.25 "
					    "query_wait_timeout=-1", "f.ini", 2, &u, &err), 0);
	assert_string_equal(u.name, "alice");
	assert_int_equal(u.pool_mode, POOL_SESSION);
	assert_int_equal(u.pool_size, 3);
	assert_int_equal(u.reserve_pool_size, 1);
	assert_int_equal(u.max_user_connections, 4);
	assert_int_equal(u.max_user_client_connections, 40);
	assert_int_equal(u.query_timeout, 120 * USEC_PER_SEC);
	assert_int_equal(u.idle_transaction_timeout, 500 * USEC_PER_MSEC);
	assert_int_equal(u.client_idle_timeout, 3600 * USEC_PER_SEC);
	assert_int_equal(u.transaction_timeout, 250 * USEC_PER_MSEC);
	assert_int_equal(u.query_wait_timeout, -1);
	connstr_user_free(&u);

	assert_int_equal(connstr_parse_user("bob", "", "f.ini", 3, &u, &err), 0);
	assert_int_equal(u.pool_mode, -1);
	assert_int_equal(u.pool_size, -1);
	assert_int_equal(u.max_user_connections, -1);
	assert_int_equal(u.query_timeout, -1);
	assert_int_equal(u.client_idle_timeout, -1);
	connstr_user_free(&u);
}

static void test_user_errors(void **state)
{
	struct user_def u;
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(connstr_parse_user("alice", "host=x", "f.ini", 9, &u, &err), -1);
	assert_non_null(strstr(err.msg, "f.ini:9: user 'alice': unknown parameter 'host'"));
	assert_int_equal(connstr_parse_user("alice", "query_timeout=forever", "f.ini", 9, &u, &err), -1);
	assert_non_null(strstr(err.msg, "bad value 'forever' for 'query_timeout'"));
	assert_int_equal(connstr_parse_user("alice", "pool_mode=txn", "f.ini", 9, &u, &err), -1);
	assert_non_null(strstr(err.msg, "bad value 'txn' for 'pool_mode'"));
}

static void test_peer(void **state)
{
	struct peer_def p;
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(connstr_parse_peer("2", "host=/tmp/pgcrew-2 port=7000 pool_size=3", "f.ini", 1, &p, &err), 0);
	assert_int_equal(p.peer_id, 2);
	assert_string_equal(p.host, "/tmp/pgcrew-2");
	assert_int_equal(p.port, 7000);
	assert_int_equal(p.pool_size, 3);
	connstr_peer_free(&p);

	assert_int_equal(connstr_parse_peer("16383", "host=a", "f.ini", 1, &p, &err), 0);
	assert_int_equal(p.port, 6432);
	assert_int_equal(p.pool_size, -1);
	connstr_peer_free(&p);

	static const struct { const char *id, *text, *error; } bad[] = {
		{ "0", "host=a", "f.ini:4: peer '0': peer id must be a number from 1 to 16383" },
		{ "16384", "host=a", "peer id must be a number" },
		{ "x", "host=a", "peer id must be a number" },
		{ "1", "port=1", "f.ini:4: peer '1': host is required" },
		{ "1", "host=a dbname=b", "unknown parameter 'dbname'" },
		{ "1", "host=a port=x", "bad value 'x' for 'port'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (connstr_parse_peer(bad[i].id, bad[i].text, "f.ini", 4, &p, &err) != -1)
			fail_msg("peer %s '%s' accepted", bad[i].id, bad[i].text);
		if (!strstr(err.msg, bad[i].error))
			fail_msg("peer %s: '%s' lacks '%s'", bad[i].id, err.msg, bad[i].error);
		assert_null(p.host);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tokenizer),
		cmocka_unit_test(test_db_defaults),
		cmocka_unit_test(test_db_every_key),
		cmocka_unit_test(test_db_aliases_and_repeats),
		cmocka_unit_test(test_db_errors),
		cmocka_unit_test(test_db_long_password),
		cmocka_unit_test(test_user_every_key),
		cmocka_unit_test(test_user_errors),
		cmocka_unit_test(test_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

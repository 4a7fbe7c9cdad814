/* pgcrew — unit tests for the console's pure parsers in control.c: control
 * command names and arguments (ctl_parse, ctl_name), SET key = value /
 * SET key TO 'value' (ctl_parse_set), the ignored driver parameters
 * (ctl_fake_param) and applying a SET to a config (ctl_apply_set). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "config/settings.h"
#include "control.h"

/* The callers' buffer sizes (admin.c, supervisor.c). */
#define KEYLEN 64
#define VALLEN 1024

/* ---- ctl_parse ---- */

static void expect_cmd(const char *text, enum ctl_cmd want, const char *want_arg)
{
	enum ctl_cmd cmd = CTL_COUNT;
	const char *arg = NULL;
	if (!ctl_parse(text, &cmd, &arg))
		fail_msg("'%s' not parsed", text);
	if (cmd != want)
		fail_msg("'%s' parsed as %s, expected %s", text, ctl_name(cmd), ctl_name(want));
	assert_non_null(arg);
	if (strcmp(arg, want_arg) != 0)
		fail_msg("'%s': argument '%s', expected '%s'", text, arg, want_arg);
}

static void expect_not_cmd(const char *text)
{
	enum ctl_cmd cmd = CTL_COUNT;
	const char *arg = "untouched";
	if (ctl_parse(text, &cmd, &arg))
		fail_msg("'%s' parsed as %s '%s'", text, ctl_name(cmd), arg);
}

static void test_ctl_name(void **state)
{
	(void)state;
	assert_string_equal(ctl_name(CTL_PAUSE), "PAUSE");
	assert_string_equal(ctl_name(CTL_RESUME), "RESUME");
	assert_string_equal(ctl_name(CTL_DISABLE), "DISABLE");
	assert_string_equal(ctl_name(CTL_ENABLE), "ENABLE");
	assert_string_equal(ctl_name(CTL_KILL), "KILL");
	assert_string_equal(ctl_name(CTL_KILL_CLIENT), "KILL_CLIENT");
	assert_string_equal(ctl_name(CTL_RECONNECT), "RECONNECT");
	assert_string_equal(ctl_name(CTL_WAIT_CLOSE), "WAIT_CLOSE");
	assert_string_equal(ctl_name(CTL_COUNT), "?");
	assert_string_equal(ctl_name((enum ctl_cmd)1000), "?");
}

static void test_ctl_parse_names(void **state)
{
	(void)state;
	/* every name, alone, with an empty argument; each name's own text */
	for (int i = 0; i < CTL_COUNT; i++)
		expect_cmd(ctl_name((enum ctl_cmd)i), (enum ctl_cmd)i, "");
	/* case does not matter */
	expect_cmd("pause", CTL_PAUSE, "");
	expect_cmd("Resume", CTL_RESUME, "");
	expect_cmd("wAiT_cLoSe", CTL_WAIT_CLOSE, "");
	expect_cmd("kill_client 7", CTL_KILL_CLIENT, "7");
}

static void test_ctl_parse_args(void **state)
{
	(void)state;
	expect_cmd("PAUSE db1", CTL_PAUSE, "db1");
	expect_cmd("PAUSE    db1", CTL_PAUSE, "db1");
	expect_cmd("PAUSE\tdb1", CTL_PAUSE, "db1");
	expect_cmd("KILL_CLIENT 5", CTL_KILL_CLIENT, "5");
	expect_cmd("KILL db1", CTL_KILL, "db1");
	expect_cmd("RECONNECT my_db", CTL_RECONNECT, "my_db");
	expect_cmd("DISABLE \"Quoted Db\"", CTL_DISABLE, "\"Quoted Db\"");
	/* spaces after the name alone: an empty argument */
	expect_cmd("RESUME   ", CTL_RESUME, "");
	expect_cmd("KILL \t ", CTL_KILL, "");
	/* spaces after the argument stay in it: the console trims the whole
	 * command (and a trailing ';') before ctl_parse sees it */
	expect_cmd("PAUSE db1  ", CTL_PAUSE, "db1  ");
}

static void test_ctl_parse_word_boundary(void **state)
{
	(void)state;
	expect_not_cmd("PAUSEX");
	expect_not_cmd("PAUSEX db1");
	expect_not_cmd("PAUSE_ALL");
	expect_not_cmd("KILLER");
	expect_not_cmd("KILL_CLIENTS 5");
	expect_not_cmd("KILL_CLIENTX");
	expect_not_cmd("KILL-CLIENT 5");
	expect_not_cmd("RESUME;");
	expect_not_cmd("PAUS");
	expect_not_cmd("KILL_");
	expect_not_cmd("");
	expect_not_cmd(" PAUSE");          /* leading blanks are trimmed by the caller */
	expect_not_cmd("SHOW POOLS");
	expect_not_cmd("SET a = 1");
	/* "KILL_CLIENT" is not taken for KILL with an argument "_CLIENT" */
	expect_cmd("KILL_CLIENT", CTL_KILL_CLIENT, "");
}

/* ---- ctl_parse_set ---- */

static bool parse_set(const char *text, char *key, char *val)
{
	memset(key, 0x5a, KEYLEN);
	memset(val, 0x5a, VALLEN);
	return ctl_parse_set(text, key, KEYLEN, val, VALLEN);
}

static void expect_set(const char *text, const char *want_key, const char *want_val)
{
	char key[KEYLEN], val[VALLEN];
	if (!parse_set(text, key, val))
		fail_msg("'%s' refused", text);
	if (strcmp(key, want_key) != 0)
		fail_msg("'%s': key '%s', expected '%s'", text, key, want_key);
	if (strcmp(val, want_val) != 0)
		fail_msg("'%s': value '%s', expected '%s'", text, val, want_val);
}

static void expect_bad_set(const char *text)
{
	char key[KEYLEN], val[VALLEN];
	if (parse_set(text, key, val))
		fail_msg("'%s' accepted: key '%.*s' value '%.*s'", text, KEYLEN - 1, key, 80, val);
}

static void test_set_forms(void **state)
{
	(void)state;
	expect_set("SET default_pool_size = 5", "default_pool_size", "5");
	expect_set("SET default_pool_size=5", "default_pool_size", "5");
	expect_set("set default_pool_size to 5", "default_pool_size", "5");
	expect_set("SET default_pool_size TO '5'", "default_pool_size", "5");
	expect_set("SET\tpool_mode\t=\t'transaction'\t", "pool_mode", "transaction");
	expect_set("SET pool_mode='session'", "pool_mode", "session");
	/* keys are folded to lower case, values are not */
	expect_set("SET Server_Reset_Query = 'DISCARD ALL'", "server_reset_query", "DISCARD ALL");
	expect_set("SET application_name TO MyApp", "application_name", "MyApp");
	/* trailing blanks are fine */
	expect_set("SET a = b   ", "a", "b");
	expect_set("SET a = 'b'   ", "a", "b");
	/* an empty quoted value */
	expect_set("SET server_reset_query = ''", "server_reset_query", "");
	expect_set("SET x TO ''", "x", "");
	/* an unquoted value runs to the next blank, whatever it holds */
	expect_set("SET a = it's", "a", "it's");
	expect_set("SET a = 1.5s", "a", "1.5s");
}

static void test_set_quotes(void **state)
{
	(void)state;
	expect_set("SET a = 'it''s'", "a", "it's");
	expect_set("SET a = ''''", "a", "'");
	expect_set("SET a = ''''''", "a", "''");
	expect_set("SET a = 'x''''y'", "a", "x''y");
	expect_set("SET a = 'with  spaces = and TO'", "a", "with  spaces = and TO");
	expect_set("SET a = 'semi;colon'", "a", "semi;colon");

	/* unterminated quotes */
	expect_bad_set("SET a = 'abc");
	expect_bad_set("SET a = '");
	expect_bad_set("SET a = 'abc''");
	expect_bad_set("SET a = 'it''s");
	/* something after the closing quote */
	expect_bad_set("SET a = 'x' y");
	expect_bad_set("SET a = 'x'y");
	expect_bad_set("SET a = 'x''");
}

static void test_set_malformed(void **state)
{
	(void)state;
	/* not a SET at all */
	expect_bad_set("");
	expect_bad_set("SET");
	expect_bad_set("SETa = 1");
	expect_bad_set("RESET a");
	expect_bad_set(" SET a = 1");
	/* missing '=' / TO */
	expect_bad_set("SET a 1");
	expect_bad_set("SET a");
	expect_bad_set("SET a TO5");
	expect_bad_set("SET a TO");
	expect_bad_set("SET a : 1");
	expect_bad_set("SET a TOO 1");
	/* no key */
	expect_bad_set("SET = 1");
	expect_bad_set("SET TO 1");          /* "to" is taken as the key, then no '=' */
	expect_bad_set("SET 'a' = 1");
	/* keys are identifiers */
	expect_bad_set("SET a-b = 1");
	expect_bad_set("SET a.b = 1");
	expect_bad_set("SET a b = 1");
	/* trailing garbage */
	expect_bad_set("SET a = 1 2");
	expect_bad_set("SET a = 1 ; SET b = 2");
	expect_bad_set("SET a == 1");
	expect_bad_set("SET a = = 1");
}

/* A missing value: PostgreSQL and PgBouncer both refuse "SET a =" (a value is
 * required; '' is the empty string). */
static void test_set_missing_value(void **state)
{
	(void)state;
	expect_bad_set("SET a =");
	expect_bad_set("SET server_reset_query =   ");
	expect_bad_set("SET server_reset_query TO ");
}

static void test_set_value_lengths(void **state)
{
	char text[VALLEN + 64], want[VALLEN + 1];
	(void)state;

	/* unquoted: up to VALLEN - 1 characters, one more is refused */
	memset(want, 'v', VALLEN - 1);
	want[VALLEN - 1] = 0;
	snprintf(text, sizeof(text), "SET a = %s", want);
	expect_set(text, "a", want);
	snprintf(text, sizeof(text), "SET a = %sv", want);
	expect_bad_set(text);

	/* quoted: the same limit on the unquoted content */
	snprintf(text, sizeof(text), "SET a = '%s'", want);
	expect_set(text, "a", want);
	snprintf(text, sizeof(text), "SET a = '%sv'", want);
	expect_bad_set(text);

	/* an escaped quote is one character of the value */
	memset(want, 'v', VALLEN - 2);
	want[VALLEN - 2] = '\'';
	want[VALLEN - 1] = 0;
	char body[VALLEN + 2];
	memset(body, 'v', VALLEN - 2);
	memcpy(body + VALLEN - 2, "''", 3);
	snprintf(text, sizeof(text), "SET a = '%s'", body);
	expect_set(text, "a", want);
	snprintf(text, sizeof(text), "SET a = 'v%s'", body);
	expect_bad_set(text);

	/* a tiny value buffer: what fits, or false, never past it */
	char key[8], val[4];
	memset(val, 0x5a, sizeof(val));
	assert_true(ctl_parse_set("SET k = abc", key, sizeof(key), val, sizeof(val)));
	assert_string_equal(val, "abc");
	assert_false(ctl_parse_set("SET k = abcd", key, sizeof(key), val, sizeof(val)));
	assert_false(ctl_parse_set("SET k = 'abcd'", key, sizeof(key), val, sizeof(val)));
	assert_true(ctl_parse_set("SET k = 'a''b'", key, sizeof(key), val, sizeof(val)));
	assert_string_equal(val, "a'b");
}

static void test_set_key_lengths(void **state)
{
	char key63[KEYLEN], text[KEYLEN + 64];
	(void)state;

	/* KEYLEN - 1 characters fit */
	memset(key63, 'k', KEYLEN - 1);
	key63[KEYLEN - 1] = 0;
	snprintf(text, sizeof(text), "SET %s = 1", key63);
	expect_set(text, key63, "1");
	snprintf(text, sizeof(text), "SET %s TO 1", key63);
	expect_set(text, key63, "1");

	/* one more: refused, not cut down to a shorter key */
	snprintf(text, sizeof(text), "SET %sk = 1", key63);
	expect_bad_set(text);
	snprintf(text, sizeof(text), "SET %sk TO 1", key63);
	expect_bad_set(text);

	/* the same with a small key buffer, on a real setting's name */
	char key[10], val[16];
	assert_true(ctl_parse_set("SET pool_mode = session", key, sizeof(key), val, sizeof(val)));
	assert_string_equal(key, "pool_mode");
	assert_false(ctl_parse_set("SET pool_modes = session", key, sizeof(key), val, sizeof(val)));
	assert_false(ctl_parse_set("SET pool_modex TO session", key, sizeof(key), val, sizeof(val)));
}

/* An overlong key is never cut down and accepted: when the characters past
 * the key buffer happen to be "to" and a blank, the rest must not be read
 * as the TO keyword ("SET <63 k>to 1" names the key "<63 k>to", too long,
 * with no '=' or TO after it). */
static void test_set_overlong_key_not_truncated(void **state)
{
	char key63[KEYLEN], text[KEYLEN + 64];
	(void)state;

	memset(key63, 'k', KEYLEN - 1);
	key63[KEYLEN - 1] = 0;
	snprintf(text, sizeof(text), "SET %sto 1", key63);
	expect_bad_set(text);
	snprintf(text, sizeof(text), "SET %sTO 'x'", key63);
	expect_bad_set(text);

	/* with a 10-byte key buffer: "pool_modeto" is not "pool_mode" TO */
	char key[10], val[16];
	assert_false(ctl_parse_set("SET pool_modeto session", key, sizeof(key), val, sizeof(val)));
}

/* ---- ctl_fake_param ---- */

static void test_fake_param(void **state)
{
	(void)state;
	assert_true(ctl_fake_param("client_encoding"));
	assert_true(ctl_fake_param("datestyle"));
	assert_true(ctl_fake_param("DateStyle"));
	assert_true(ctl_fake_param("TimeZone"));
	assert_true(ctl_fake_param("standard_conforming_strings"));
	assert_true(ctl_fake_param("application_name"));
	assert_true(ctl_fake_param("extra_float_digits"));
	assert_true(ctl_fake_param("DEFAULT_TRANSACTION_ISOLATION"));

	assert_false(ctl_fake_param(""));
	assert_false(ctl_fake_param("default_pool_size"));
	assert_false(ctl_fake_param("client_encodingx"));
	assert_false(ctl_fake_param("client"));
	assert_false(ctl_fake_param("search_path"));

	/* as the console uses it: parse, then ask */
	char key[KEYLEN], val[VALLEN];
	assert_true(parse_set("SET DateStyle TO 'ISO, MDY'", key, val));
	assert_true(ctl_fake_param(key));
	assert_string_equal(val, "ISO, MDY");
	assert_true(parse_set("SET extra_float_digits = 3", key, val));
	assert_true(ctl_fake_param(key));
}

/* ---- ctl_apply_set ---- */

static int cfg_setup(void **state)
{
	struct config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -1;
	settings_init_defaults(cfg);
	*state = cfg;
	return 0;
}

static int cfg_teardown(void **state)
{
	settings_free_values(*state);
	free(*state);
	return 0;
}

/* A refused SET: -1, err as given (prefix), and cfg not touched. */
static void expect_refused(struct config *cfg, const char *key, const char *val, const char *want_err)
{
	struct config before;
	char err[256];
	memcpy(&before, cfg, sizeof(before));
	memset(err, 0, sizeof(err));
	assert_int_equal(ctl_apply_set(cfg, key, val, err, sizeof(err)), -1);
	if (strncmp(err, want_err, strlen(want_err)) != 0)
		fail_msg("SET %s = '%s': error '%s', expected '%s...'", key, val, err, want_err);
	assert_memory_equal(cfg, &before, sizeof(before));
}

static void test_apply_unknown(void **state)
{
	struct config *cfg = *state;
	expect_refused(cfg, "nope", "1", "SET failed: unknown setting nope");
	expect_refused(cfg, "", "1", "SET failed: unknown setting ");
	expect_refused(cfg, "default_pool_sizes", "1", "SET failed: unknown setting default_pool_sizes");
	/* ignored driver parameters are not settings */
	expect_refused(cfg, "client_encoding", "UTF8", "SET failed: unknown setting client_encoding");
}

static void test_apply_not_reloadable(void **state)
{
	struct config *cfg = *state;
	expect_refused(cfg, "listen_port", "7000",
		       "SET failed: listen_port cannot be changed while running (restart needed)");
	assert_int_equal(cfg->listen_port, 6432);
	/* even a bad value: the restart reason comes first */
	expect_refused(cfg, "listen_port", "x", "SET failed: listen_port cannot be changed");
	expect_refused(cfg, "unix_socket_dir", "/run", "SET failed: unix_socket_dir cannot be changed");
	expect_refused(cfg, "workers", "2", "SET failed: workers cannot be changed");
	/* an alias of a restart-only key */
	expect_refused(cfg, "service_name", "x", "SET failed: service_name cannot be changed");
}

static void test_apply_bad_value(void **state)
{
	struct config *cfg = *state;
	expect_refused(cfg, "default_pool_size", "lots", "SET failed: default_pool_size: ");
	expect_refused(cfg, "default_pool_size", "-5", "SET failed: default_pool_size: ");
	expect_refused(cfg, "pool_mode", "txn",
		       "SET failed: pool_mode: must be one of: session, transaction, statement");
	expect_refused(cfg, "log_connections", "maybe", "SET failed: log_connections: ");
	expect_refused(cfg, "query_timeout", "soon", "SET failed: query_timeout: ");
	assert_int_equal(cfg->default_pool_size, 20);
	assert_int_equal(cfg->pool_mode, POOL_SESSION);

	/* a short err buffer gets a cut, terminated message */
	char err[12];
	memset(err, 0x5a, sizeof(err));
	assert_int_equal(ctl_apply_set(cfg, "pool_mode", "txn", err, sizeof(err)), -1);
	assert_string_equal(err, "SET failed:");
}

static void test_apply_good(void **state)
{
	struct config *cfg = *state;
	char err[256] = "";

	assert_int_equal(ctl_apply_set(cfg, "default_pool_size", "35", err, sizeof(err)), 0);
	assert_int_equal(cfg->default_pool_size, 35);
	assert_int_equal(ctl_apply_set(cfg, "pool_mode", "transaction", err, sizeof(err)), 0);
	assert_int_equal(cfg->pool_mode, POOL_TRANSACTION);
	assert_int_equal(ctl_apply_set(cfg, "query_timeout", "1.5", err, sizeof(err)), 0);
	assert_int_equal(cfg->query_timeout, 1500 * USEC_PER_MSEC);
	assert_int_equal(ctl_apply_set(cfg, "log_connections", "0", err, sizeof(err)), 0);
	assert_false(cfg->log_connections);
	/* strings replace the old value (the old one freed: LeakSanitizer) */
	assert_int_equal(ctl_apply_set(cfg, "server_reset_query", "DEALLOCATE ALL", err, sizeof(err)), 0);
	assert_string_equal(cfg->server_reset_query, "DEALLOCATE ALL");
	assert_int_equal(ctl_apply_set(cfg, "server_reset_query", "", err, sizeof(err)), 0);
	assert_string_equal(cfg->server_reset_query, "");

	/* and end to end from the console's text */
	char key[KEYLEN], val[VALLEN];
	assert_true(parse_set("SET Default_Pool_Size TO '40'", key, val));
	assert_int_equal(ctl_apply_set(cfg, key, val, err, sizeof(err)), 0);
	assert_int_equal(cfg->default_pool_size, 40);
	assert_true(parse_set("SET server_reset_query = 'SELECT ''x'''", key, val));
	assert_int_equal(ctl_apply_set(cfg, key, val, err, sizeof(err)), 0);
	assert_string_equal(cfg->server_reset_query, "SELECT 'x'");
}

#define T(f) cmocka_unit_test_setup_teardown(f, cfg_setup, cfg_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctl_name),
		cmocka_unit_test(test_ctl_parse_names),
		cmocka_unit_test(test_ctl_parse_args),
		cmocka_unit_test(test_ctl_parse_word_boundary),
		cmocka_unit_test(test_set_forms),
		cmocka_unit_test(test_set_quotes),
		cmocka_unit_test(test_set_malformed),
		cmocka_unit_test(test_set_missing_value),
		cmocka_unit_test(test_set_value_lengths),
		cmocka_unit_test(test_set_key_lengths),
		cmocka_unit_test(test_set_overlong_key_not_truncated),
		cmocka_unit_test(test_fake_param),
		T(test_apply_unknown),
		T(test_apply_not_reloadable),
		T(test_apply_bad_value),
		T(test_apply_good),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for the console's pure parsers: the grammar
 * (cmdparse.c: PgBouncer 1.25's three regular expressions and its
 * buffers), control command names (ctl_lookup, ctl_name), the fake driver
 * parameters (ctl_fake_param) and applying a SET to a config
 * (ctl_apply_set). The grammar's cases were checked query by query against
 * PgBouncer 1.25.2 (test/integration/test_console_texts.py does the same
 * through the console). */
#include <setjmp.h>
#include <stdarg.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "cmdparse.h"
#include "config.h"
#include "config/settings.h"
#include "control.h"

/* ---- cmdparse ---- */

#define C CMDPARSE_COMMAND
#define S CMDPARSE_SET
#define X CMDPARSE_SYNTAX
#define B CMDPARSE_BAD_ARGS

struct parse_case {
	const char *query;
	enum cmdparse_kind kind;
	const char *cmd;           /* COMMAND */
	const char *arg;           /* COMMAND: the argument; SET: the key */
	const char *val;           /* SET */
};

static const char *kind_name(enum cmdparse_kind k)
{
	static const char *const n[] = { "COMMAND", "SET", "SYNTAX", "BAD_ARGS" };
	return (unsigned)k < 4 ? n[k] : "?";
}

static void check(const char *query, enum cmdparse_kind kind, const char *cmd, const char *arg,
		  const char *val)
{
	struct cmdparse out;
	memset(&out, 0x5a, sizeof(out));
	enum cmdparse_kind k = cmdparse(query, &out);
	if (k != kind)
		fail_msg("'%s': %s, expected %s", query, kind_name(k), kind_name(kind));
	if (k == C && (strcmp(out.cmd, cmd) != 0 || strcmp(out.arg, arg) != 0))
		fail_msg("'%s': cmd '%s' arg '%s', expected '%s' '%s'", query, out.cmd, out.arg, cmd, arg);
	if (k == S && (strcmp(out.arg, arg) != 0 || strcmp(out.val, val) != 0))
		fail_msg("'%s': key '%s' value '%s', expected '%s' '%s'", query, out.arg, out.val, arg, val);
}

static void check_cases(const struct parse_case *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		check(t[i].query, t[i].kind, t[i].cmd, t[i].arg, t[i].val);
}

/* WORD [WORD]: the separators, the trailing ';', case kept as typed. */
static void test_command_form(void **state)
{
	static const struct parse_case t[] = {
		{ "SHOW POOLS", C, "SHOW", "POOLS", NULL },
		{ "show", C, "show", "", NULL },
		{ "pause db_1", C, "pause", "db_1", NULL },
		{ "  SHOW   pools  ", C, "SHOW", "pools", NULL },
		{ "\tshow\tversion", C, "show", "version", NULL },
		{ "\nSHOW\r\nVERSION\n;\n", C, "SHOW", "VERSION", NULL },
		{ "SHOW POOLS;", C, "SHOW", "POOLS", NULL },
		{ "SHOW POOLS ;", C, "SHOW", "POOLS", NULL },
		{ "SHOW POOLS ; \t", C, "SHOW", "POOLS", NULL },
		{ "show;", C, "show", "", NULL },
		{ "RELOAD;", C, "RELOAD", "", NULL },
		{ "SELECT 1", C, "SELECT", "1", NULL },
		{ "KILL_CLIENT 12abc", C, "KILL_CLIENT", "12abc", NULL },
		{ "set x", C, "set", "x", NULL },          /* the first form wins */
		{ "SET verbose;", C, "SET", "verbose", NULL },
		{ "SET abtocd", C, "SET", "abtocd", NULL },
		/* separators, and characters a word may not have */
		{ "SHOW POOLS;;", X, NULL, NULL, NULL },
		{ "SHOW POOLS; x", X, NULL, NULL, NULL },
		{ "PAUSE x y", X, NULL, NULL, NULL },
		{ "SHOW STATS x", X, NULL, NULL, NULL },
		{ "SHOW HELP x", X, NULL, NULL, NULL },
		{ "SHOW-POOLS", X, NULL, NULL, NULL },
		{ "SHOW pools\v", X, NULL, NULL, NULL },   /* \v and \f are not blanks */
		{ "\fSHOW pools", X, NULL, NULL, NULL },
		{ "SHOW p\xc3\xb6ols", X, NULL, NULL, NULL },   /* ASCII letters only */
		{ "SHOW 'pools'", X, NULL, NULL, NULL },
		{ "KILL_CLIENT -1", X, NULL, NULL, NULL },
		{ "SELECT * FROM x", X, NULL, NULL, NULL },
		{ "", X, NULL, NULL, NULL },
		{ ";", X, NULL, NULL, NULL },
		{ " ; ", X, NULL, NULL, NULL },
	};
	(void)state;
	check_cases(t, ARRAY_SIZE(t));
}

/* "..." words: "" inside is a quote; nothing may touch a word. */
static void test_quoted_words(void **state)
{
	static const struct parse_case t[] = {
		{ "\"show\" \"version\"", C, "show", "version", NULL },
		{ "\"SHOW\" version", C, "SHOW", "version", NULL },
		{ "PAUSE \"my db\"", C, "PAUSE", "my db", NULL },
		{ "PAUSE \"a\"\"b\"", C, "PAUSE", "a\"b", NULL },
		{ "PAUSE \"a\"\"\"", C, "PAUSE", "a\"", NULL },
		{ "PAUSE \"\"\"\"", C, "PAUSE", "\"", NULL },
		{ "PAUSE \"x;y\";", C, "PAUSE", "x;y", NULL },
		{ "PAUSE \"new\nline\"", C, "PAUSE", "new\nline", NULL },
		{ "show \"\"", C, "show", "", NULL },          /* an empty quoted word */
		{ "\"\" version", C, "", "version", NULL },
		{ "show \"ver\"\"sion\"", C, "show", "ver\"sion", NULL },
		{ "\"show\"\"pools\"", C, "show\"pools", "", NULL },   /* one word */
		/* unterminated, or touching another token */
		{ "PAUSE \"abc", X, NULL, NULL, NULL },
		{ "PAUSE \"abc\"\"", X, NULL, NULL, NULL },
		{ "PAUSE \"", X, NULL, NULL, NULL },
		{ "show\"pools\"", X, NULL, NULL, NULL },
		{ "\"show\"pools", X, NULL, NULL, NULL },
	};
	(void)state;
	check_cases(t, ARRAY_SIZE(t));
}

/* SET key =|TO value, the value a STRING or a WORD. */
static void test_set_form(void **state)
{
	static const struct parse_case t[] = {
		{ "SET default_pool_size = 5", S, NULL, "default_pool_size", "5" },
		{ "SET default_pool_size=5", S, NULL, "default_pool_size", "5" },
		{ "set pool_mode to session", S, NULL, "pool_mode", "session" },
		{ "SET pool_mode TO 'session'", S, NULL, "pool_mode", "session" },
		{ "SET pool_mode tO session", S, NULL, "pool_mode", "session" },
		{ "SET Default_Pool_Size = 21", S, NULL, "Default_Pool_Size", "21" },   /* as typed */
		{ "  SET\tpool_mode\n=\r'x' ; ", S, NULL, "pool_mode", "x" },
		{ "SET a=1;", S, NULL, "a", "1" },
		{ "SET a to'28'", S, NULL, "a", "28" },
		{ "SET a to1", S, NULL, "a", "1" },
		{ "SET a = to", S, NULL, "a", "to" },
		{ "SET a = 'it''s'", S, NULL, "a", "it's" },
		{ "SET a = ''''", S, NULL, "a", "'" },
		{ "SET a = ''", S, NULL, "a", "" },
		{ "SET a = 'semi;colon = TO'", S, NULL, "a", "semi;colon = TO" },
		{ "SET a = 'a\nb'", S, NULL, "a", "a\nb" },
		{ "SET a = ' 1'", S, NULL, "a", " 1" },
		{ "SET a = \"DISCARD ALL\"", S, NULL, "a", "DISCARD ALL" },
		{ "SET a = \"b\"\"c\"", S, NULL, "a", "b\"c" },
		{ "SET a = \"\"", S, NULL, "a", "" },
		{ "SET \"default_pool_size\" = 27", S, NULL, "default_pool_size", "27" },
		{ "SET \"a\"\"b\" = 1", S, NULL, "a\"b", "1" },
		{ "SET \"a\"to\"b\"", S, NULL, "a", "b" },
		{ "SET \"a\"to'b'", S, NULL, "a", "b" },
		/* not a value: a WORD is [0-9a-z_]+ */
		{ "SET default_pool_size = -5", X, NULL, NULL, NULL },
		{ "SET default_pool_size = 1.5", X, NULL, NULL, NULL },
		{ "SET a = it's", X, NULL, NULL, NULL },
		/* malformed */
		{ "SET", C, "SET", "", NULL },
		{ "SET a =", X, NULL, NULL, NULL },
		{ "SET a = ", X, NULL, NULL, NULL },
		{ "SET a TO", X, NULL, NULL, NULL },
		{ "SET = 1", X, NULL, NULL, NULL },
		{ "SET a 1", X, NULL, NULL, NULL },
		{ "SET a : 1", X, NULL, NULL, NULL },
		{ "SET a == 1", X, NULL, NULL, NULL },
		{ "SET a = = 1", X, NULL, NULL, NULL },
		{ "SET a = 1 2", X, NULL, NULL, NULL },
		{ "SET a = 1;;", X, NULL, NULL, NULL },
		{ "SET a = 1 ; SET b = 2", X, NULL, NULL, NULL },
		{ "SET a = 'a' 'b'", X, NULL, NULL, NULL },
		{ "SET a = 'x'y", X, NULL, NULL, NULL },
		{ "SET a = '1", X, NULL, NULL, NULL },
		{ "SET a = 'x''", X, NULL, NULL, NULL },
		{ "SET 'a' = 1", X, NULL, NULL, NULL },
		{ "SET a-b = 1", X, NULL, NULL, NULL },
		{ "SET a b = 1", X, NULL, NULL, NULL },
		{ "SETa = 1", X, NULL, NULL, NULL },
		{ "RESET a = 1", X, NULL, NULL, NULL },
		{ "\"SET\" a = 1", X, NULL, NULL, NULL },
		{ "SET \"a = 1", X, NULL, NULL, NULL },
	};
	(void)state;
	check_cases(t, ARRAY_SIZE(t));
}

/* An unquoted key is the longest that lets the rest match: "to" may end
 * it with no blank before, and a WORD value may follow "to" at once. */
static void test_set_key_split(void **state)
{
	static const struct parse_case t[] = {
		{ "SET default_pool_sizeto 25", S, NULL, "default_pool_size", "25" },
		{ "SET log_statsto 1", S, NULL, "log_stats", "1" },
		{ "SET abtocd = 1", S, NULL, "abtocd", "1" },      /* the whole run when it can */
		{ "SET atob 'x'", X, NULL, NULL, NULL },
		{ "SET atoto 'x'", S, NULL, "ato", "x" },
		{ "SET tototo 'x'", S, NULL, "toto", "x" },
		{ "SET atobto c", S, NULL, "atob", "c" },
		{ "SET toto = 1", S, NULL, "toto", "1" },
		{ "SET to to to", S, NULL, "to", "to" },
		{ "SET to = 1", S, NULL, "to", "1" },
		{ "SET TO 1", X, NULL, NULL, NULL },        /* "TO" is the key, then no = or to */
	};
	(void)state;
	check_cases(t, ARRAY_SIZE(t));
}

/* PgBouncer's buffers: cmd 16, arg and key 64, value 256 bytes, a word
 * counted as typed (quotes and doubled quotes included). One byte more is
 * "bad arguments", never a shorter word. */
static void test_buffers_words(void **state)
{
	char q[600], w[300];
	(void)state;

	memset(w, 'c', 15);
	w[15] = 0;
	check(w, C, w, "", NULL);
	strcat(w, "c");
	check(w, B, NULL, NULL, NULL);
	check("\"abcdefghijklmn\"", B, NULL, NULL, NULL);      /* 16 with its quotes */
	check("\"abcdefghijklm\"", C, "abcdefghijklm", "", NULL);

	memset(w, 'a', 63);
	w[63] = 0;
	snprintf(q, sizeof(q), "PAUSE %s", w);
	check(q, C, "PAUSE", w, NULL);
	snprintf(q, sizeof(q), "PAUSE %sa", w);
	check(q, B, NULL, NULL, NULL);
	snprintf(q, sizeof(q), "PAUSE \"%.61s\"", w);
	check(q, C, "PAUSE", w + 2, NULL);
	snprintf(q, sizeof(q), "PAUSE \"%.62s\"", w);
	check(q, B, NULL, NULL, NULL);
	snprintf(q, sizeof(q), "SELECT %s%s", w, w);
	check(q, B, NULL, NULL, NULL);
	/* the command word is copied first */
	snprintf(q, sizeof(q), "abcdefghijklmnop %s", w);
	check(q, B, NULL, NULL, NULL);
}

static void test_buffers_set(void **state)
{
	char q[600], w[260], want[300];
	(void)state;

	memset(w, 'a', 63);
	w[63] = 0;
	snprintf(q, sizeof(q), "SET %s = 1", w);
	check(q, S, NULL, w, "1");
	snprintf(q, sizeof(q), "SET %sa = 1", w);
	check(q, B, NULL, NULL, NULL);
	snprintf(q, sizeof(q), "SET %sa = '1'", w);
	check(q, B, NULL, NULL, NULL);
	snprintf(q, sizeof(q), "SET %sto 1", w);    /* a 63-byte key, then "to" */
	check(q, S, NULL, w, "1");
	check("SET \"\" = 1", B, NULL, NULL, NULL);  /* an empty key */
	check("SET \"\" = '1'", B, NULL, NULL, NULL);

	/* the value: a WORD of 255, a STRING of 255 with its quotes */
	memset(w, '1', 255);
	w[255] = 0;
	snprintf(q, sizeof(q), "SET k = %s", w);
	check(q, S, NULL, "k", w);
	snprintf(q, sizeof(q), "SET k = %s1", w);
	check(q, B, NULL, NULL, NULL);
	snprintf(q, sizeof(q), "SET k = '%.253s'", w);
	check(q, S, NULL, "k", w + 2);
	snprintf(q, sizeof(q), "SET k = '%.254s'", w);
	check(q, B, NULL, NULL, NULL);
	snprintf(q, sizeof(q), "SET k = \"%.254s\"", w);
	check(q, B, NULL, NULL, NULL);
	/* '' is two bytes as typed, one in the value */
	memset(w, 'v', 251);
	w[251] = 0;
	snprintf(want, sizeof(want), "%s'", w);
	snprintf(q, sizeof(q), "SET k = '%s'''", w);
	check(q, S, NULL, "k", want);
	snprintf(q, sizeof(q), "SET k = 'v%s'''", w);
	check(q, B, NULL, NULL, NULL);
}

/* A long run of "to": the key search ends, on the longest key. */
static void test_set_long_run(void **state)
{
	static char q[8300];
	(void)state;
	strcpy(q, "SET ");
	for (int i = 0; i < 2000; i++)
		strcat(q, "to");
	check(q, B, NULL, NULL, NULL);     /* two words, the second too long */
	strcat(q, " = ");
	check(q, X, NULL, NULL, NULL);
	strcat(q, "'x'");           /* a 4000-byte key: too long for its buffer */
	check(q, B, NULL, NULL, NULL);
}

/* ---- ctl_lookup, ctl_name ---- */

static void test_ctl_names(void **state)
{
	enum ctl_cmd cmd;
	(void)state;
	for (int i = 0; i < CTL_COUNT; i++) {
		assert_true(ctl_lookup(ctl_name((enum ctl_cmd)i), &cmd));
		assert_int_equal(cmd, i);
	}
	assert_true(ctl_lookup("wAiT_cLoSe", &cmd));
	assert_int_equal(cmd, CTL_WAIT_CLOSE);
	assert_true(ctl_lookup("kill_client", &cmd));
	assert_int_equal(cmd, CTL_KILL_CLIENT);
	assert_false(ctl_lookup("", &cmd));
	assert_false(ctl_lookup("PAUSEX", &cmd));
	assert_false(ctl_lookup("KILL_", &cmd));
	assert_false(ctl_lookup("show", &cmd));
	assert_false(ctl_lookup("reload", &cmd));
	assert_string_equal(ctl_name(CTL_SUSPEND), "SUSPEND");
	assert_string_equal(ctl_name(CTL_COUNT), "?");
	assert_string_equal(ctl_name((enum ctl_cmd)1000), "?");
}

/* ---- ctl_client_id: KILL_CLIENT's argument as sscanf("%llu") ---- */

static void test_client_id(void **state)
{
	static const struct {
		const char *arg;
		bool ok;
		unsigned long long id;
	} t[] = {
		{ "12", true, 12 }, { "0", true, 0 }, { "12abc", true, 12 }, { "0x10", true, 0 },
		{ " 5", true, 5 }, { "\t\n7", true, 7 }, { "+5", true, 5 }, { "007", true, 7 },
		{ "-1", true, ULLONG_MAX }, { "-2", true, ULLONG_MAX - 1 },
		{ "18446744073709551615", true, ULLONG_MAX },
		{ "99999999999999999999999", true, ULLONG_MAX },     /* one too large: the largest */
		{ "1 2", true, 1 }, { "5-", true, 5 },
		{ "", false, 0 }, { " ", false, 0 }, { "+", false, 0 }, { "-", false, 0 },
		{ "abc", false, 0 }, { "+ 5", false, 0 }, { "--1", false, 0 }, { "x1", false, 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		unsigned long long id = 4242, want = 4242;
		if (t[i].ok)
			want = t[i].id;
		bool ok = ctl_client_id(t[i].arg, &id);
		if (ok != t[i].ok || id != want)
			fail_msg("ctl_client_id(\"%s\"): %d %llu, expected %d %llu", t[i].arg, ok, id, t[i].ok, want);
		/* the same as the C library's own reading, which PgBouncer uses */
		unsigned long long lib = 0;
		assert_int_equal(sscanf(t[i].arg, "%llu", &lib) == 1, ok);
		if (ok)
			assert_true(lib == id);
	}
}

/* ---- ctl_fake_param ---- */

/* PgBouncer's five, any case; application_name and extra_float_digits
 * are not among them (PgBouncer: SET failed). */
static void test_fake_param(void **state)
{
	static const char *const fake[][2] = {
		{ "client_encoding", "UTF-8" }, { "default_transaction_isolation", "read committed" },
		{ "standard_conforming_strings", "on" }, { "datestyle", "ISO" }, { "timezone", "GMT" },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(fake); i++) {
		const struct ctl_fake *f = ctl_fake_param(fake[i][0]);
		assert_non_null(f);
		assert_string_equal(f->name, fake[i][0]);
		assert_string_equal(f->value, fake[i][1]);
	}
	assert_ptr_equal(ctl_fake_param("DateStyle"), ctl_fake_param("datestyle"));
	assert_non_null(ctl_fake_param("TimeZone"));
	assert_non_null(ctl_fake_param("DEFAULT_TRANSACTION_ISOLATION"));
	assert_null(ctl_fake_param(""));
	assert_null(ctl_fake_param("application_name"));
	assert_null(ctl_fake_param("extra_float_digits"));
	assert_null(ctl_fake_param("default_pool_size"));
	assert_null(ctl_fake_param("client_encodingx"));
	assert_null(ctl_fake_param("search_path"));
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

/* A SET that leaves cfg as it was: want (-1 refused, 1 ignored), and the
 * client's text PgBouncer's ("SET failed", or none). */
static void expect_unchanged(struct config *cfg, const char *key, const char *val, int want)
{
	struct config before;
	char err[256];
	memcpy(&before, cfg, sizeof(before));
	memset(err, 0x5a, sizeof(err));
	int r = ctl_apply_set(cfg, key, val, err, sizeof(err));
	if (r != want)
		fail_msg("SET %s = '%s': %d, expected %d", key, val, r, want);
	assert_string_equal(err, want < 0 ? "SET failed" : "");
	assert_memory_equal(cfg, &before, sizeof(before));
}

static void test_apply_unknown(void **state)
{
	struct config *cfg = *state;
	expect_unchanged(cfg, "nope", "1", -1);
	expect_unchanged(cfg, "", "1", -1);
	expect_unchanged(cfg, "default_pool_sizes", "1", -1);
	/* keys are PgBouncer's, case and all */
	expect_unchanged(cfg, "Default_Pool_Size", "1", -1);
	/* the fake driver parameters are not settings */
	expect_unchanged(cfg, "client_encoding", "UTF8", -1);
	expect_unchanged(cfg, "application_name", "psql", -1);
}

/* PgBouncer's cf_set: a key that needs a restart is accepted and changes
 * nothing, whatever the value. */
static void test_apply_not_reloadable(void **state)
{
	struct config *cfg = *state;
	expect_unchanged(cfg, "listen_port", "7000", 1);
	assert_int_equal(cfg->listen_port, 6432);
	expect_unchanged(cfg, "listen_port", "x", 1);
	expect_unchanged(cfg, "unix_socket_dir", "/run", 1);
	expect_unchanged(cfg, "workers", "2", 1);
	expect_unchanged(cfg, "service_name", "x", 1);     /* an alias of a restart-only key */
}

static void test_apply_bad_value(void **state)
{
	struct config *cfg = *state;
	expect_unchanged(cfg, "default_pool_size", "lots", -1);
	expect_unchanged(cfg, "default_pool_size", "-5", -1);
	expect_unchanged(cfg, "pool_mode", "txn", -1);
	expect_unchanged(cfg, "log_connections", "maybe", -1);
	expect_unchanged(cfg, "query_timeout", "soon", -1);
	assert_int_equal(cfg->default_pool_size, 20);
	assert_int_equal(cfg->pool_mode, POOL_SESSION);

	/* a short err buffer gets a cut, terminated text */
	char err[4];
	memset(err, 0x5a, sizeof(err));
	assert_int_equal(ctl_apply_set(cfg, "pool_mode", "txn", err, sizeof(err)), -1);
	assert_string_equal(err, "SET");
}

static void test_apply_good(void **state)
{
	struct config *cfg = *state;
	char err[256];

	memset(err, 0x5a, sizeof(err));
	assert_int_equal(ctl_apply_set(cfg, "default_pool_size", "35", err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(cfg->default_pool_size, 35);
	assert_int_equal(ctl_apply_set(cfg, "pool_mode", "transaction", err, sizeof(err)), 0);
	assert_int_equal(cfg->pool_mode, POOL_TRANSACTION);
	assert_int_equal(ctl_apply_set(cfg, "pool_mode", "Statement", err, sizeof(err)), 0);
	assert_int_equal(cfg->pool_mode, POOL_STATEMENT);
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
	struct cmdparse p;
	assert_int_equal(cmdparse("SET default_pool_size TO '40'", &p), CMDPARSE_SET);
	assert_int_equal(ctl_apply_set(cfg, p.arg, p.val, err, sizeof(err)), 0);
	assert_int_equal(cfg->default_pool_size, 40);
	assert_int_equal(cmdparse("SET server_reset_query = 'SELECT ''x'''", &p), CMDPARSE_SET);
	assert_int_equal(ctl_apply_set(cfg, p.arg, p.val, err, sizeof(err)), 0);
	assert_string_equal(cfg->server_reset_query, "SELECT 'x'");
}

#define T(f) cmocka_unit_test_setup_teardown(f, cfg_setup, cfg_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_command_form),
		cmocka_unit_test(test_quoted_words),
		cmocka_unit_test(test_set_form),
		cmocka_unit_test(test_set_key_split),
		cmocka_unit_test(test_buffers_words),
		cmocka_unit_test(test_buffers_set),
		cmocka_unit_test(test_set_long_run),
		cmocka_unit_test(test_ctl_names),
		cmocka_unit_test(test_fake_param),
		cmocka_unit_test(test_client_id),
		T(test_apply_unknown),
		T(test_apply_not_reloadable),
		T(test_apply_bad_value),
		T(test_apply_good),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

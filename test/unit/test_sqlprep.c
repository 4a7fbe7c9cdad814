/* pgcrew — unit tests for proto/sqlprep: each statement form, case, quoting,
 * comments, semicolons, type lists, bodies with AS, parentheses and quoted
 * ';', what is not ours, every truncation of valid input (read out of a
 * buffer of exactly its size, so ASan catches an overread), long input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/sqlprep.h"

struct want {
	const char *sql;
	enum sqlprep_kind kind;
	const char *name;
	const char *rest;     /* text from rest to end (PREPARE, EXECUTE) */
	const char *tail;     /* text from name_end to the end of the query */
};

/* Scans a copy of exactly strlen(sql) bytes (no NUL after it). */
static enum sqlprep_kind scan(const char *sql, struct sqlprep *sp)
{
	size_t n = strlen(sql);
	char *copy = malloc(n ? n : 1);
	memcpy(copy, sql, n);
	enum sqlprep_kind k = sqlprep_scan(copy, n, sp);
	assert_true(sp->end <= n && sp->rest <= n && sp->name_end <= n);
	free(copy);
	return k;
}

static const struct want cases[] = {
	{ "PREPARE foo AS SELECT 1", SQLPREP_PREPARE, "foo", "AS SELECT 1", " AS SELECT 1" },
	{ "prepare Foo as select 1;", SQLPREP_PREPARE, "foo", "as select 1", " as select 1;" },
	{ "  PrEpArE \"Foo Bar\"(int, text) AS SELECT $1, $2 ; ; ", SQLPREP_PREPARE, "Foo Bar",
	  "(int, text) AS SELECT $1, $2", "(int, text) AS SELECT $1, $2 ; ; " },
	{ "PREPARE \"a\"\"b\" AS SELECT 1", SQLPREP_PREPARE, "a\"b", "AS SELECT 1", NULL },
	{ "/* c /* nested */ */ PREPARE -- x\n q /**/ ( numeric(10,2), int[] ) AS\nSELECT 'a;b' AS x, \"c;\" FROM t WHERE (a) = ($1)",
	  SQLPREP_PREPARE, "q", "( numeric(10,2), int[] ) AS\nSELECT 'a;b' AS x, \"c;\" FROM t WHERE (a) = ($1)", NULL },
	{ "PREPARE p AS SELECT $$;$$, $tag$ $$ ; $tag$, E'\\';', 'it''s;' -- end;\n", SQLPREP_PREPARE, "p",
	  "AS SELECT $$;$$, $tag$ $$ ; $tag$, E'\\';', 'it''s;'", NULL },
	{ "PREPARE p AS SELECT a$b$c FROM t; -- trailing", SQLPREP_PREPARE, "p", "AS SELECT a$b$c FROM t", NULL },
	{ "PREPARE p(int)AS SELECT $1/*x*/", SQLPREP_PREPARE, "p", "(int)AS SELECT $1", NULL },
	{ "PREPARE ÄbC AS SELECT 1", SQLPREP_PREPARE, "Äbc", "AS SELECT 1", NULL },
	{ "EXECUTE foo", SQLPREP_EXECUTE, "foo", "", "" },
	{ "execute FOO(1, 'x);', (2+3), $$)$$);", SQLPREP_EXECUTE, "foo", "(1, 'x);', (2+3), $$)$$)",
	  "(1, 'x);', (2+3), $$)$$);" },
	{ "EXECUTE \"FOO\" ( 1 ) -- c", SQLPREP_EXECUTE, "FOO", "( 1 )", " ( 1 ) -- c" },
	{ "EXECUTE foo ;", SQLPREP_EXECUTE, "foo", "", " ;" },
	{ "DEALLOCATE foo", SQLPREP_DEALLOCATE, "foo", NULL, NULL },
	{ "deallocate prepare \"Foo\";", SQLPREP_DEALLOCATE, "Foo", NULL, NULL },
	{ "DEALLOCATE prepare", SQLPREP_DEALLOCATE, "prepare", NULL, NULL },
	{ "DEALLOCATE PREPARE/**/x", SQLPREP_DEALLOCATE, "x", NULL, NULL },
	{ "DEALLOCATE ALL", SQLPREP_DEALLOCATE_ALL, "", NULL, NULL },
	{ "dealloCATE PREPARE all ;", SQLPREP_DEALLOCATE_ALL, "", NULL, NULL },
	{ "DEALLOCATE \"ALL\"", SQLPREP_DEALLOCATE, "ALL", NULL, NULL },
	{ "DEALLOCATE \"all\"", SQLPREP_DEALLOCATE, "all", NULL, NULL },
	/* not ours */
	{ "", SQLPREP_NONE, NULL, NULL, NULL },
	{ "SELECT 1", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE TRANSACTION 'x'", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo AS SELECT 1; SELECT 2", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE foo; EXECUTE foo", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXPLAIN EXECUTE foo", SQLPREP_NONE, NULL, NULL, NULL },
	{ "CREATE TABLE t AS EXECUTE foo", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE foo INTO x", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE foo(1", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE foo(1))", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE foo('x", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE foo($$x)", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE u&\"foo\"", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE \"\"", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE \"foo", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE all", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTE", SQLPREP_NONE, NULL, NULL, NULL },
	{ "EXECUTEfoo", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo AS", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo AS ;", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo (int AS SELECT 1", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo (int) SELECT 1", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo AS SELECT 'x", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo AS SELECT E'x\\'", SQLPREP_NONE, NULL, NULL, NULL },
	{ "PREPARE foo AS SELECT 1 /* open", SQLPREP_NONE, NULL, NULL, NULL },
	{ "/* /* */ PREPARE foo AS SELECT 1", SQLPREP_NONE, NULL, NULL, NULL },
	{ "DEALLOCATE", SQLPREP_NONE, NULL, NULL, NULL },
	{ "DEALLOCATE foo bar", SQLPREP_NONE, NULL, NULL, NULL },
	{ "DEALLOCATE foo; SELECT 1", SQLPREP_NONE, NULL, NULL, NULL },
	{ "DEALLOCATE ;", SQLPREP_NONE, NULL, NULL, NULL },
};

static void test_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct want *w = &cases[i];
		struct sqlprep sp;
		enum sqlprep_kind k = scan(w->sql, &sp);
		if (k != w->kind)
			fail_msg("case %zu \"%s\": kind %d, want %d", i, w->sql, k, w->kind);
		assert_int_equal(sp.kind, k);
		if (k == SQLPREP_NONE)
			continue;
		assert_string_equal(sp.name, w->name);
		assert_int_equal(sp.name_len, strlen(w->name));
		if (w->rest) {
			size_t n = sp.end - sp.rest;
			if (n != strlen(w->rest) || memcmp(w->sql + sp.rest, w->rest, n) != 0)
				fail_msg("case %zu: rest \"%.*s\", want \"%s\"", i, (int)n, w->sql + sp.rest, w->rest);
		}
		if (w->tail)
			assert_string_equal(w->sql + sp.name_end, w->tail);
	}
}

/* Every prefix of every case: never a read past it (ASan), and a prefix
 * that cuts a quote or comment open is not ours. */
static void test_truncations(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *sql = cases[i].sql;
		for (size_t n = 0; n < strlen(sql); n++) {
			char *copy = malloc(n ? n : 1);
			struct sqlprep sp;
			memcpy(copy, sql, n);
			enum sqlprep_kind k = sqlprep_scan(copy, n, &sp);
			assert_true(k == SQLPREP_NONE || (sp.end <= n && sp.name_len <= SQLPREP_NAME_MAX));
			(void)sqlprep_maybe(copy, n);
			free(copy);
		}
	}
	struct sqlprep sp;
	assert_int_equal(scan("EXECUTE foo('a", &sp), SQLPREP_NONE);
}

static void test_maybe(void **state)
{
	(void)state;
	assert_true(sqlprep_maybe("EXECUTE x", 9));
	assert_true(sqlprep_maybe("  /* c */ prepare", 17));   /* word may go on */
	assert_true(sqlprep_maybe("deallocate ", 11));
	assert_true(sqlprep_maybe("EXEC", 4));
	assert_true(sqlprep_maybe("  -- comment", 12));
	assert_true(sqlprep_maybe("/* open", 7));
	assert_true(sqlprep_maybe("", 0));
	assert_false(sqlprep_maybe("SELECT 1", 8));
	assert_false(sqlprep_maybe("EXECUTEX ", 9));
	assert_false(sqlprep_maybe("(SELECT 1)", 10));
	assert_false(sqlprep_maybe("EXPLAIN EXECUTE x", 17));
	assert_false(sqlprep_maybe("\"prepare\"", 9));
}

/* Names are folded and cut as PostgreSQL does: 63 bytes, not inside a
 * UTF-8 character. */
static void test_long_names(void **state)
{
	(void)state;
	char sql[300];
	struct sqlprep sp;

	strcpy(sql, "EXECUTE ");
	for (int i = 0; i < 100; i++)
		strcat(sql, "A");
	assert_int_equal(scan(sql, &sp), SQLPREP_EXECUTE);
	assert_int_equal(sp.name_len, 63);
	assert_int_equal(strspn(sp.name, "a"), 63);

	strcpy(sql, "DEALLOCATE \"");
	for (int i = 0; i < 62; i++)
		strcat(sql, "b");
	strcat(sql, "\xc3\xa4\xc3\xa4\"");     /* "ää": the first straddles byte 63 */
	assert_int_equal(scan(sql, &sp), SQLPREP_DEALLOCATE);
	assert_int_equal(sp.name_len, 62);

	/* not UTF-8 (fuzz_sqlprep): cut at the limit, never to nothing */
	strcpy(sql, "DEALLOCATE \"F");
	for (int i = 0; i < 80; i++)
		strcat(sql, "\xb3");
	strcat(sql, "\"");
	assert_int_equal(scan(sql, &sp), SQLPREP_DEALLOCATE);
	assert_int_equal(sp.name_len, 63);
}

/* Bytes no query has (a NUL inside a quoted name) make it not ours;
 * found by fuzz_sqlprep. */
static void test_nul_in_name(void **state)
{
	(void)state;
	static const char sql[] = "DEALLOCATE \"a\0b\"";
	struct sqlprep sp;
	assert_int_equal(sqlprep_scan(sql, sizeof(sql) - 1, &sp), SQLPREP_NONE);
}

/* A long body (1 MiB) with many quotes and comments: found whole, and a
 * statement hidden after a ';' deep inside it makes it not ours. */
static void test_long_input(void **state)
{
	(void)state;
	size_t n = 1u << 20;
	char *sql = malloc(n + 64);
	struct sqlprep sp;
	size_t len = (size_t)sprintf(sql, "PREPARE big AS SELECT ");
	while (len < n) {
		memcpy(sql + len, "'x;' || /* ; */ $q$;$q$ || ", 27);
		len += 27;
	}
	memcpy(sql + len, "1", 1);
	len += 1;
	assert_int_equal(sqlprep_scan(sql, len, &sp), SQLPREP_PREPARE);
	assert_int_equal(sp.end, len);
	memcpy(sql + len, "; SELECT 2", 10);
	assert_int_equal(sqlprep_scan(sql, len + 10, &sp), SQLPREP_NONE);
	memset(sql, '(', n);
	memcpy(sql, "EXECUTE x", 9);
	assert_int_equal(sqlprep_scan(sql, n, &sp), SQLPREP_NONE);
	free(sql);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_maybe),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_nul_in_name),
		cmocka_unit_test(test_long_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

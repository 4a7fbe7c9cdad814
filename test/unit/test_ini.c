/* pgcrew — unit tests for the ini grammar (src/config/ini.c): every syntax
 * rule, every bad-line error with its file and line, and %include. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/ini.h"

#ifndef DATADIR
#define DATADIR "test/unit/data"
#endif

/* The callback writes one line per event into this buffer. */
struct events {
	char text[4096];
	const char *fail_key;       /* the callback fails on this key */
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int record(void *arg, const char *file, int line, const char *section,
		  const char *key, const char *value, struct config_error *err)
{
	struct events *ev = arg;
	size_t used = strlen(ev->text);

	if (ev->fail_key && key && strcmp(key, ev->fail_key) == 0) {
		config_error_set(err, "%s:%d: callback refused '%s'", file, line, key);
		return -1;
	}
	if (key)
		snprintf(ev->text + used, sizeof(ev->text) - used, "%s:%d %s.%s=<%s>\n",
			 base_name(file), line, section, key, value);
	else
		snprintf(ev->text + used, sizeof(ev->text) - used, "%s:%d [%s]\n",
			 base_name(file), line, section);
	return 0;
}

static char tmpdir[64];
static char tmpfile_path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pgcrew-ini-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(tmpfile_path, sizeof(tmpfile_path), "%s/t.ini", tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(tmpfile_path);
	return rmdir(tmpdir);
}

static void write_text(const char *text)
{
	FILE *f = fopen(tmpfile_path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int parse_text(const char *text, struct events *ev, struct config_error *err)
{
	write_text(text);
	return ini_parse_file(tmpfile_path, record, ev, err);
}

static const struct {
	const char *name, *text, *events;
} good_cases[] = {
	{ "section and pair", "[a]\nk = v\n", "t.ini:1 [a]\nt.ini:2 a.k=<v>\n" },
	{ "comments and blanks", "; one\n# two\n\n[a]\n   ; indented\n\t# tab\nk=v\n",
	  "t.ini:4 [a]\nt.ini:7 a.k=<v>\n" },
	{ "trimming", "  [ a b ]  \n\t key \t=\t  value with  spaces \t\n",
	  "t.ini:1 [a b]\nt.ini:2 a b.key=<value with  spaces>\n" },
	{ "comment chars later in line", "[a]\nk = x ; y # z\n", "t.ini:1 [a]\nt.ini:2 a.k=<x ; y # z>\n" },
	{ "quoted value keeps spaces", "[a]\nk = \"  in  side \"  \n", "t.ini:1 [a]\nt.ini:2 a.k=<  in  side >\n" },
	{ "doubled quote", "[a]\nk = \"say \"\"hi\"\"\"\n", "t.ini:1 [a]\nt.ini:2 a.k=<say \"hi\">\n" },
	{ "empty values", "[a]\nk =\nq = \"\"\n", "t.ini:1 [a]\nt.ini:2 a.k=<>\nt.ini:3 a.q=<>\n" },
	{ "quoted key", "[d]\n\"my \"\"db\"\"\" = host=x\n", "t.ini:1 [d]\nt.ini:2 d.my \"db\"=<host=x>\n" },
	{ "value with '='", "[d]\nfoo = host=x port=5\n", "t.ini:1 [d]\nt.ini:2 d.foo=<host=x port=5>\n" },
	{ "CRLF line ends", "[a]\r\nk = v\r\n", "t.ini:1 [a]\nt.ini:2 a.k=<v>\n" },
	{ "no line continuation", "[a]\nk = x \\\nb = c\n", "t.ini:1 [a]\nt.ini:2 a.k=<x \\>\nt.ini:3 a.b=<c>\n" },
	{ "last line without newline", "[a]\nk = v", "t.ini:1 [a]\nt.ini:2 a.k=<v>\n" },
	{ "section changes", "[a]\nx=1\n[b]\nx=2\n", "t.ini:1 [a]\nt.ini:2 a.x=<1>\nt.ini:3 [b]\nt.ini:4 b.x=<2>\n" },
};

static void test_good_syntax(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(good_cases) / sizeof(good_cases[0]); i++) {
		struct events ev = { .text = "" };
		struct config_error err = { "" };

		if (parse_text(good_cases[i].text, &ev, &err) != 0)
			fail_msg("case '%s': unexpected error: %s", good_cases[i].name, err.msg);
		if (strcmp(ev.text, good_cases[i].events) != 0)
			fail_msg("case '%s': got\n%s\nwant\n%s", good_cases[i].name, ev.text, good_cases[i].events);
	}
}

static const struct {
	const char *name, *text, *where, *what;
} bad_cases[] = {
	{ "unterminated section", "[a\nk=v\n", ":1:", "unterminated section header" },
	{ "junk after section", "[a] x\n", ":1:", "unexpected text after section header" },
	{ "empty section name", "[ ]\n", ":1:", "empty section name" },
	{ "missing '='", "[a]\nok = 1\nfoo bar\n", ":3:", "missing '=' for key 'foo'" },
	{ "missing key", "[a]\n= v\n", ":2:", "missing key before '='" },
	{ "unterminated quoted value", "[a]\nk = \"abc\n", ":2:", "unterminated quoted value for key 'k'" },
	{ "text after quoted value", "[a]\n\nk = \"a\" b\n", ":3:", "unexpected text after quoted value for key 'k'" },
	{ "unterminated quoted key", "[a]\n\"my db = x\n", ":2:", "unterminated quoted key" },
	{ "key outside section", "k = v\n", ":1:", "key 'k' outside of any section" },
	{ "unknown directive", "[a]\n%inclue x\n", ":2:", "unknown directive" },
	{ "include without name", "[a]\n%include   \n", ":2:", "%include needs a file name" },
	{ "include missing file", "[a]\n\n%include nope.ini\n", ":3:", "%include: could not open" },
	{ "include bad quoting", "[a]\n%include \"x.ini\n", ":2:", "bad quoting in %include" },
};

static void test_bad_syntax(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct events ev = { .text = "" };
		struct config_error err = { "" };
		char where[160];

		if (parse_text(bad_cases[i].text, &ev, &err) != -1)
			fail_msg("case '%s': parsed without error", bad_cases[i].name);
		snprintf(where, sizeof(where), "%s%s", tmpfile_path, bad_cases[i].where);
		if (!strstr(err.msg, where) || !strstr(err.msg, bad_cases[i].what))
			fail_msg("case '%s': message '%s' lacks '%s' or '%s'", bad_cases[i].name,
				 err.msg, where, bad_cases[i].what);
	}
}

static void test_callback_error_stops(void **state)
{
	struct events ev = { .text = "", .fail_key = "bad" };
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(parse_text("[a]\nx=1\nbad=2\ny=3\n", &ev, &err), -1);
	assert_non_null(strstr(err.msg, ":3: callback refused 'bad'"));
	assert_string_equal(ev.text, "t.ini:1 [a]\nt.ini:2 a.x=<1>\n");
}

static void test_missing_main_file(void **state)
{
	struct events ev = { .text = "" };
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(ini_parse_file(DATADIR "/config/does-not-exist.ini", record, &ev, &err), -1);
	assert_non_null(strstr(err.msg, "could not open configuration file"));
	assert_non_null(strstr(err.msg, "does-not-exist.ini"));
}

/* Relative names resolve against the including file; the section carries
 * into and out of included files; lines are counted per file. */
static void test_include(void **state)
{
	struct events ev = { .text = "" };
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(ini_parse_file(DATADIR "/config/include_main.ini", record, &ev, &err), 0);
	assert_string_equal(ev.text,
			    "include_main.ini:2 [pgbouncer]\n"
			    "include_main.ini:3 pgbouncer.first=<1>\n"
			    "include_child.ini:1 pgbouncer.child=<2>\n"
			    "include_grandchild.ini:2 pgbouncer.grandchild=<2.5>\n"
			    "include_child.ini:3 [databases]\n"
			    "include_main.ini:5 databases.after=<3>\n");
}

static void test_include_error_location(void **state)
{
	struct events ev = { .text = "" };
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(ini_parse_file(DATADIR "/config/include_bad_main.ini", record, &ev, &err), -1);
	assert_non_null(strstr(err.msg, "include_bad_child.ini:3: syntax error: missing '=' for key 'broken'"));
}

static void test_include_depth(void **state)
{
	struct events ev = { .text = "" };
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(ini_parse_file(DATADIR "/config/include_loop.ini", record, &ev, &err), -1);
	assert_non_null(strstr(err.msg, "include_loop.ini:2: %include nested too deeply (limit 10)"));
	/* the main file plus exactly 10 nested includes were read */
	assert_non_null(strstr(ev.text, "[pgbouncer]"));
	{
		int headers = 0;

		for (const char *p = ev.text; (p = strstr(p, "[pgbouncer]")); p++)
			headers++;
		assert_int_equal(headers, 1 + INI_MAX_INCLUDE_DEPTH);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_syntax),
		cmocka_unit_test(test_bad_syntax),
		cmocka_unit_test(test_callback_error_stops),
		cmocka_unit_test(test_missing_main_file),
		cmocka_unit_test(test_include),
		cmocka_unit_test(test_include_error_location),
		cmocka_unit_test(test_include_depth),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

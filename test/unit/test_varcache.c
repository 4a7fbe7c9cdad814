/* pgcrew — unit tests for varcache: the tracked-name table (built-ins,
 * extras, case-insensitive lookup, the VAR_MAX cap), per-connection values
 * (set/copy/clear, length limit), the SET query that brings a server in line,
 * and the ParameterStatus replay, parsed back with the proto reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "proto/build.h"
#include "proto/packet.h"
#include "varcache.h"

#define N_BUILTIN 5

static int teardown(void **state)
{
	(void)state;
	varcache_set_tracked(NULL);    /* frees the extras' names */
	return 0;
}

/* ---- the name table ---- */

static void test_builtin_names(void **state)
{
	(void)state;
	static const char *const want[N_BUILTIN] = {
		"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings",
		"application_name",
	};
	varcache_set_tracked(NULL);
	assert_int_equal(varcache_count(), N_BUILTIN);
	for (int i = 0; i < N_BUILTIN; i++) {
		assert_string_equal(varcache_name(i), want[i]);
		assert_int_equal(varcache_lookup(want[i]), i);
	}
}

struct lookup_case {
	const char *name;
	int want;
};

static const struct lookup_case lookup_cases[] = {
	{ "datestyle", 1 },
	{ "DATESTYLE", 1 },
	{ "DateStyle", 1 },
	{ "timezone", 2 },
	{ "Client_Encoding", 0 },
	{ "APPLICATION_NAME", 4 },
	{ "intervalstyle", 5 },
	{ "Search_Path", 6 },
	{ "work_mem", 7 },
	{ "search_path ", -1 },
	{ "date style", -1 },
	{ "", -1 },
	{ "application", -1 },
	{ "application_name_x", -1 },
	{ "user", -1 },
};

static void test_extras_and_lookup(void **state)
{
	(void)state;
	/* Separators: commas, spaces, tabs; duplicates and built-ins once. */
	varcache_set_tracked("IntervalStyle, search_path,\twork_mem,,  timezone, SEARCH_PATH");
	assert_int_equal(varcache_count(), N_BUILTIN + 3);
	assert_string_equal(varcache_name(5), "IntervalStyle");
	assert_string_equal(varcache_name(6), "search_path");
	assert_string_equal(varcache_name(7), "work_mem");
	for (size_t i = 0; i < ARRAY_SIZE(lookup_cases); i++) {
		print_message("lookup '%s'\n", lookup_cases[i].name);
		assert_int_equal(varcache_lookup(lookup_cases[i].name), lookup_cases[i].want);
	}

	/* Installing again replaces the extras (the old ones are freed). */
	varcache_set_tracked("extra_float_digits");
	assert_int_equal(varcache_count(), N_BUILTIN + 1);
	assert_int_equal(varcache_lookup("search_path"), -1);
	assert_int_equal(varcache_lookup("EXTRA_FLOAT_DIGITS"), 5);
	varcache_set_tracked("");
	assert_int_equal(varcache_count(), N_BUILTIN);
}

static void test_extras_capped(void **state)
{
	(void)state;
	char list[1024] = "";
	for (int i = 0; i < 40; i++) {
		char one[32];
		snprintf(one, sizeof(one), "%sp%02d", i ? "," : "", i);
		strcat(list, one);
	}
	varcache_set_tracked(list);
	assert_int_equal(varcache_count(), VAR_MAX);
	assert_string_equal(varcache_name(VAR_MAX - 1), "p10");
	assert_int_equal(varcache_lookup("p10"), VAR_MAX - 1);
	assert_int_equal(varcache_lookup("p11"), -1);
}

/* ---- values ---- */

static void test_set_get(void **state)
{
	(void)state;
	struct varcache vc;
	varcache_set_tracked("search_path");
	varcache_init(&vc);
	for (int i = 0; i < VAR_MAX; i++)
		assert_null(varcache_get(&vc, i));

	assert_true(varcache_set(&vc, "DATESTYLE", "ISO, MDY"));
	assert_string_equal(varcache_get(&vc, varcache_lookup("DateStyle")), "ISO, MDY");
	assert_true(varcache_set(&vc, "datestyle", "German"));
	assert_string_equal(varcache_get(&vc, 1), "German");
	assert_true(varcache_set(&vc, "Search_Path", "\"$user\", public"));
	assert_string_equal(varcache_get(&vc, 5), "\"$user\", public");
	assert_true(varcache_set(&vc, "application_name", ""));
	assert_string_equal(varcache_get(&vc, 4), "");

	assert_false(varcache_set(&vc, "work_mem", "64MB"));
	assert_false(varcache_set(&vc, "", "x"));
	assert_null(varcache_get(&vc, -1));
	assert_null(varcache_get(&vc, VAR_MAX));
	varcache_clear(&vc);
}

/* Values of any length are kept (PostgreSQL truncates application_name
 * itself; a 300-byte one was refused as an "unsupported startup
 * parameter"), and the query that sets them fits the room it says. */
static void test_long_values(void **state)
{
	(void)state;
	struct varcache want, have;
	static char v[100001];
	varcache_set_tracked(NULL);
	varcache_init(&want);
	varcache_init(&have);
	memset(v, '\'', sizeof(v) - 1);       /* every byte doubled in the literal */
	assert_true(varcache_set(&want, "application_name", v));
	assert_int_equal(strlen(varcache_get(&want, 4)), sizeof(v) - 1);
	assert_true(varcache_set(&want, "TimeZone", "UTC"));
	size_t room = varcache_query_room(&want);
	char *sql = malloc(room);
	assert_non_null(sql);
	assert_true(varcache_diff_query(&want, &have, sql, room));
	assert_true(strlen(sql) < room);
	assert_non_null(strstr(sql, "SET TimeZone='UTC';"));
	assert_false(varcache_diff_query(&want, &have, sql, 2 * (sizeof(v) - 1)));   /* one short */
	free(sql);
	varcache_clear(&want);
	varcache_clear(&have);
}

static void test_copy_clear(void **state)
{
	(void)state;
	struct varcache a, b;
	varcache_set_tracked("search_path");
	varcache_init(&a);
	varcache_init(&b);
	assert_true(varcache_set(&a, "client_encoding", "UTF8"));
	assert_true(varcache_set(&a, "search_path", "s1"));
	assert_true(varcache_set(&b, "TimeZone", "UTC"));
	assert_true(varcache_set(&b, "client_encoding", "LATIN1"));

	/* dst becomes exactly src: values copied, values src lacks removed. */
	varcache_copy(&b, &a);
	assert_string_equal(varcache_get(&b, 0), "UTF8");
	assert_string_equal(varcache_get(&b, 5), "s1");
	assert_null(varcache_get(&b, 2));
	/* Pooled storage: equal values are one string, and changing or
	 * clearing the source leaves the copy. */
	assert_ptr_equal(varcache_get(&b, 0), varcache_get(&a, 0));
	assert_true(varcache_set(&a, "client_encoding", "SQL_ASCII"));
	assert_string_equal(varcache_get(&b, 0), "UTF8");
	varcache_clear(&a);
	for (int i = 0; i < VAR_MAX; i++)
		assert_null(varcache_get(&a, i));
	assert_string_equal(varcache_get(&b, 5), "s1");
	/* Copying an empty cache empties; clearing twice is harmless. */
	varcache_copy(&b, &a);
	for (int i = 0; i < VAR_MAX; i++)
		assert_null(varcache_get(&b, i));
	varcache_clear(&b);
	varcache_clear(&b);
}

/* ---- SET query ---- */

struct diff_case {
	const char *name;
	const char *want[VAR_MAX];   /* by index; NULL = unset */
	const char *have[VAR_MAX];
	bool differs;
	const char *sql;
};

static const struct diff_case diff_cases[] = {
	{ "both empty", { 0 }, { 0 }, false, "" },
	{ "equal", { "UTF8", "ISO" }, { "UTF8", "ISO" }, false, "" },
	{ "server has more", { "UTF8" }, { "UTF8", "ISO", "UTC" }, false, "" },
	{ "one missing on server", { "UTF8" }, { 0 }, true, "SET client_encoding='UTF8';" },
	{ "one different", { [2] = "Europe/Paris" }, { [2] = "UTC" }, true,
	  "SET TimeZone='Europe/Paris';" },
	{ "case matters in values", { [2] = "utc" }, { [2] = "UTC" }, true, "SET TimeZone='utc';" },
	{ "several, table order", { [4] = "app", [0] = "UTF8", [1] = "ISO, DMY" },
	  { [1] = "ISO, MDY", [4] = "app" }, true,
	  "SET client_encoding='UTF8';SET DateStyle='ISO, DMY';" },
	{ "quote doubled", { [4] = "it's" }, { 0 }, true, "SET application_name='it''s';" },
	{ "only quotes", { [4] = "''" }, { [4] = "'" }, true, "SET application_name='''''';" },
	{ "backslash literal", { [4] = "a\\b" }, { 0 }, true, "SET application_name='a\\b';" },
	{ "empty value", { [4] = "" }, { [4] = "x" }, true, "SET application_name='';" },
	/* A list parameter through set_config: SET 'a, b' would be one schema. */
	{ "extra parameter", { [5] = "a, b" }, { 0 }, true,
	  "SELECT pg_catalog.set_config('search_path','a, b',false);" },
	{ "extra, quoted", { [5] = "\"it's\", public" }, { [5] = "public" }, true,
	  "SELECT pg_catalog.set_config('search_path','\"it''s\", public',false);" },
	{ "builtin and extra", { [2] = "UTC", [5] = "x" }, { 0 }, true,
	  "SET TimeZone='UTC';SELECT pg_catalog.set_config('search_path','x',false);" },
	/* The same meaning in the server's spelling: no SET (asyncpg, psycopg). */
	{ "encoding spelling", { [0] = "utf-8" }, { [0] = "UTF8" }, false, "" },
	{ "encoding alias", { [0] = "unicode" }, { [0] = "UTF8" }, false, "" },
	{ "encoding underscores", { [0] = "Utf_8" }, { [0] = "UTF8" }, false, "" },
	{ "other encoding", { [0] = "LATIN1" }, { [0] = "UTF8" }, true, "SET client_encoding='LATIN1';" },
	{ "encoding, none reported", { [0] = "utf-8" }, { 0 }, true, "SET client_encoding='utf-8';" },
	{ "datestyle format only", { [1] = "ISO" }, { [1] = "ISO, MDY" }, false, "" },
	{ "datestyle case, spaces", { [1] = "iso,mdy" }, { [1] = "ISO, MDY" }, false, "" },
	{ "datestyle other order", { [1] = "ISO, DMY" }, { [1] = "ISO, MDY" }, true,
	  "SET DateStyle='ISO, DMY';" },
	{ "datestyle other format", { [1] = "German" }, { [1] = "ISO, MDY" }, true,
	  "SET DateStyle='German';" },
	{ "datestyle two parts, one reported", { [1] = "ISO, MDY" }, { [1] = "ISO" }, true,
	  "SET DateStyle='ISO, MDY';" },
	{ "timezone is exact", { [2] = "utc" }, { [2] = "UTC" }, true, "SET TimeZone='utc';" },
};

static void fill(struct varcache *vc, const char *const *vals)
{
	varcache_init(vc);
	for (int i = 0; i < varcache_count(); i++)
		if (vals[i])
			assert_true(varcache_set(vc, varcache_name(i), vals[i]));
}

static void test_diff_query_table(void **state)
{
	(void)state;
	varcache_set_tracked("search_path");
	for (size_t k = 0; k < ARRAY_SIZE(diff_cases); k++) {
		const struct diff_case *c = &diff_cases[k];
		struct varcache want, have;
		char buf[1024];
		print_message("case: %s\n", c->name);
		fill(&want, c->want);
		fill(&have, c->have);
		memset(buf, 'X', sizeof(buf));
		assert_int_equal(varcache_diff_query(&want, &have, buf, sizeof(buf)), c->differs);
		assert_string_equal(buf, c->sql);
		varcache_clear(&want);
		varcache_clear(&have);
	}
}

static void test_diff_query_long_values(void **state)
{
	(void)state;
	/* Every tracked parameter at a 127-byte value of quotes: the
	 * statement needs ~4.5 KB and must come out whole. */
	enum { VLEN = 128 };
	char list[512] = "", v[VLEN];
	for (int i = 0; i < VAR_MAX - N_BUILTIN; i++) {
		char one[32];
		snprintf(one, sizeof(one), "%sx%02d", i ? "," : "", i);
		strcat(list, one);
	}
	varcache_set_tracked(list);
	memset(v, '\'', sizeof(v) - 1);
	v[sizeof(v) - 1] = 0;
	struct varcache want, have;
	varcache_init(&want);
	varcache_init(&have);
	for (int i = 0; i < VAR_MAX; i++)
		assert_true(varcache_set(&want, varcache_name(i), v));

	static char buf[8192];
	assert_true(varcache_query_room(&want) <= sizeof(buf));
	assert_true(varcache_diff_query(&want, &have, buf, sizeof(buf)));
	size_t off = 0;
	for (int i = 0; i < VAR_MAX; i++) {
		char head[64];
		const char *tail = i < N_BUILTIN ? "';" : "',false);";
		if (i < N_BUILTIN)
			snprintf(head, sizeof(head), "SET %s='", varcache_name(i));
		else
			snprintf(head, sizeof(head), "SELECT pg_catalog.set_config('%s','",
				 varcache_name(i));
		assert_memory_equal(buf + off, head, strlen(head));
		off += strlen(head);
		for (int j = 0; j < VLEN - 1; j++, off += 2)
			assert_memory_equal(buf + off, "''", 2);
		assert_memory_equal(buf + off, tail, strlen(tail));
		off += strlen(tail);
	}
	assert_int_equal(strlen(buf), off);
	varcache_clear(&want);
}

/*
 * Regression (varcache.c, fixed): when the SET text does not fit,
 * varcache_diff_query() returns what it has written so far, which can end
 * in a truncated statement ("...;SE", "...;SET applicati", or a value cut
 * short and closed with a quote), still returning true; when put_literal()
 * filled the buffer there is no terminating NUL at all.
 * pool.c passes a 2048-byte buffer; 16 tracked parameters with long or
 * quote-heavy values exceed it.
 */
static void test_diff_query_truncation(void **state)
{
	(void)state;
	varcache_set_tracked(NULL);
	struct varcache want, have;
	varcache_init(&want);
	varcache_init(&have);
	assert_true(varcache_set(&want, "client_encoding", "UTF8"));
	assert_true(varcache_set(&want, "application_name", "abcdefghijklmnopqrstuvwxyz"));
	static const char whole[] = "SET client_encoding='UTF8';";

	for (size_t len = sizeof(whole); len < 80; len++) {
		char buf[80];
		print_message("len %zu\n", len);
		assert_true(len <= sizeof(buf));
		memset(buf, 'X', sizeof(buf));
		bool any = varcache_diff_query(&want, &have, buf, len);
		if (!any)
			continue;
		/* Terminated inside len, and only whole statements. */
		assert_non_null(memchr(buf, 0, len));
		assert_true(strcmp(buf, whole) == 0 ||
			    strcmp(buf, "SET client_encoding='UTF8';"
				   "SET application_name='abcdefghijklmnopqrstuvwxyz';") == 0);
	}
	varcache_clear(&want);
}

/* ---- ParameterStatus replay ---- */

struct status {
	char key[64], val[128];         /* the values these tests use */
};

/* Reads back ParameterStatus messages; false on any framing error. */
static bool parse_status(const struct pktbuf *pb, struct status *out, size_t max, size_t *n)
{
	size_t off = 0;
	*n = 0;
	while (off < pb->len) {
		struct pkt_hdr h;
		struct pkt_reader r;
		if (pkt_parse_header(pb->buf + off, pb->len - off, false, 1 << 20, &h, NULL) != PKT_OK)
			return false;
		if (h.type != 'S' || h.len > pb->len - off || *n == max)
			return false;
		pkt_reader_init(&r, pb->buf + off + h.hdr_len, h.len - h.hdr_len);
		snprintf(out[*n].key, sizeof(out[*n].key), "%s", pkt_get_string(&r));
		snprintf(out[*n].val, sizeof(out[*n].val), "%s", pkt_get_string(&r));
		if (!pkt_get_end(&r))
			return false;
		(*n)++;
		off += h.len;
	}
	return true;
}

static void test_write_status(void **state)
{
	(void)state;
	struct varcache base, over;
	struct pktbuf pb;
	struct status st[VAR_MAX];
	size_t n;

	varcache_set_tracked("IntervalStyle");
	varcache_init(&base);
	varcache_init(&over);
	assert_true(varcache_set(&base, "client_encoding", "UTF8"));
	assert_true(varcache_set(&base, "DateStyle", "ISO, MDY"));
	assert_true(varcache_set(&base, "standard_conforming_strings", "on"));
	assert_true(varcache_set(&base, "IntervalStyle", "postgres"));
	assert_true(varcache_set(&over, "DateStyle", "German"));
	assert_true(varcache_set(&over, "application_name", "psql"));

	pktbuf_init(&pb, 64);
	varcache_write_status(&pb, &base, &over);
	assert_false(pktbuf_failed(&pb));
	assert_true(parse_status(&pb, st, ARRAY_SIZE(st), &n));
	static const char *const want[][2] = {
		{ "client_encoding", "UTF8" },
		{ "DateStyle", "German" },
		{ "standard_conforming_strings", "on" },
		{ "application_name", "psql" },
		{ "IntervalStyle", "postgres" },
	};
	assert_int_equal(n, ARRAY_SIZE(want));
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(st[i].key, want[i][0]);
		assert_string_equal(st[i].val, want[i][1]);
	}

	/* No override: base alone; appending keeps what was there. */
	size_t before = pb.len;
	varcache_write_status(&pb, &base, NULL);
	assert_true(parse_status(&pb, st, ARRAY_SIZE(st), &n));
	assert_int_equal(n, ARRAY_SIZE(want) + 4);
	assert_string_equal(st[6].key, "DateStyle");
	assert_string_equal(st[6].val, "ISO, MDY");
	assert_true(pb.len > before);

	/* Nothing set: nothing written. */
	varcache_clear(&base);
	varcache_clear(&over);
	pktbuf_reset(&pb);
	varcache_write_status(&pb, &base, &over);
	assert_int_equal(pb.len, 0);
	pktbuf_free(&pb);
}

#define T(f) cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_builtin_names),
		T(test_extras_and_lookup),
		T(test_extras_capped),
		T(test_set_get),
		T(test_long_values),
		T(test_copy_clear),
		T(test_diff_query_table),
		T(test_diff_query_long_values),
		T(test_write_status),
		T(test_diff_query_truncation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

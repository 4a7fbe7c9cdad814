/* pgcrew — unit tests for proto/error: ErrorResponse bytes, build/parse round
 * trip, bodies without SQLSTATE, garbage bodies, and fields read from the
 * buffered start of an error far larger than the buffer, in any order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdlib.h>

#include "proto/error.h"
#include "proto/packet.h"

static void test_write_bytes(void **state)
{
	(void)state;
	static const uint8_t want[] = {
		'E', 0, 0, 0, 34,
		'S', 'F', 'A', 'T', 'A', 'L', 0, 'V', 'F', 'A', 'T', 'A', 'L', 0,
		'C', '0', '8', 'P', '0', '1', 0, 'M', 'b', 'a', 'd', ' ', '4', '2', 0, 0,
	};
	struct pktbuf pb;
	pktbuf_init(&pb, 8);
	pkt_write_error(&pb, "FATAL", "08P01", "bad %d", 42);
	assert_false(pktbuf_failed(&pb));
	assert_int_equal(pb.len, sizeof(want));
	assert_memory_equal(pb.buf, want, sizeof(want));
	pktbuf_free(&pb);
}

static void test_round_trip(void **state)
{
	(void)state;
	struct pktbuf pb;
	struct pg_error e;
	struct pkt_hdr h;
	char long_name[3000];

	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	pktbuf_init(&pb, 16);
	pkt_write_error(&pb, "ERROR", "3D000", "no such database: %s", long_name);
	assert_false(pktbuf_failed(&pb));
	assert_int_equal(pkt_parse_header(pb.buf, pb.len, false, 1u << 20, &h, NULL), PKT_OK);
	assert_int_equal(h.type, 'E');
	assert_int_equal(h.len, pb.len);
	assert_true(pkt_parse_error(pb.buf + 5, pb.len - 5, &e));
	assert_string_equal(e.severity, "ERROR");
	assert_string_equal(e.sqlstate, "3D000");
	assert_int_equal(strlen(e.message), strlen("no such database: ") + strlen(long_name));
	assert_memory_equal(e.message + strlen("no such database: "), long_name, strlen(long_name));
	assert_string_equal(e.detail, "");
	assert_string_equal(e.hint, "");

	pktbuf_reset(&pb);
	pkt_write_notice(&pb, "NOTICE", NULL, "note");
	assert_true(pkt_parse_error(pb.buf + 5, pb.len - 5, &e));
	assert_string_equal(e.severity, "NOTICE");
	assert_string_equal(e.sqlstate, "00000");
	assert_string_equal(e.message, "note");
	pktbuf_free(&pb);
}

/* A body as a server sends it: localized S, unknown fields, D and H. */
static void test_parse_server_fields(void **state)
{
	(void)state;
	static const char body[] =
		"SFEHLER\0VERROR\0C42P01\0Mrelation \"t\" does not exist\0P15\0"
		"Dsome detail\0Hsome hint\0Fparse_relation.c\0L1392\0";
	struct pg_error e;

	assert_true(pkt_parse_error((const uint8_t *)body, sizeof(body), &e));
	assert_string_equal(e.severity, "ERROR");
	assert_string_equal(e.sqlstate, "42P01");
	assert_string_equal(e.message, "relation \"t\" does not exist");
	assert_string_equal(e.detail, "some detail");
	assert_string_equal(e.hint, "some hint");
}

/* PgBouncer once dereferenced a missing 'C' field: it must come back as "". */
static void test_parse_without_sqlstate(void **state)
{
	(void)state;
	static const char body[] = "SERROR\0Mno code here\0";
	struct pg_error e;

	assert_true(pkt_parse_error((const uint8_t *)body, sizeof(body), &e));
	assert_non_null(e.sqlstate);
	assert_string_equal(e.sqlstate, "");
	assert_string_equal(e.severity, "ERROR");
	assert_string_equal(e.message, "no code here");

	static const uint8_t empty_list[] = { 0 };
	assert_true(pkt_parse_error(empty_list, 1, &e));
	assert_string_equal(e.severity, "");
	assert_string_equal(e.sqlstate, "");
	assert_string_equal(e.message, "");
}

static void test_parse_garbage(void **state)
{
	(void)state;
	static const struct { const char *name; const char *b; size_t len; } cases[] = {
		{ "empty body", "", 0 },
		{ "no terminator", "SERROR\0", 7 },
		{ "unterminated value", "SERROR\0Mabc", 11 },
		{ "code with no value", "SERROR\0M", 8 },
		{ "bytes after terminator", "SERROR\0\0junk", 12 },
		{ "binary noise", "\xff\x01\x02", 3 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct pg_error e;
		print_message("case: %s\n", cases[i].name);
		assert_false(pkt_parse_error((const uint8_t *)cases[i].b, cases[i].len, &e));
		assert_string_equal(e.severity, "");   /* nothing half-parsed leaks out */
		assert_string_equal(e.sqlstate, "");
		assert_string_equal(e.message, "");
	}
}

/* One field: its code, then `v`, or `big` bytes of 'x' when v is NULL. */
static uint8_t *put_field(uint8_t *p, char code, const char *v, size_t big)
{
	size_t n = v ? strlen(v) : big;
	*p++ = (uint8_t)code;
	if (v)
		memcpy(p, v, n);
	else
		memset(p, 'x', n);
	p[n] = 0;
	return p + n + 1;
}

/* An error body: S, V, then fields c1 and c2 (a NULL value is `big` bytes
 * of 'x'), then the terminator. */
static uint8_t *error_body(char c1, const char *v1, char c2, const char *v2, size_t big, size_t *len)
{
	size_t n = 2 * sizeof("SERROR") + 2 + (v1 ? strlen(v1) : big) + 2 + (v2 ? strlen(v2) : big) + 1;
	uint8_t *b = malloc(n), *p;
	assert_non_null(b);
	p = put_field(b, 'S', "ERROR", 0);
	p = put_field(p, 'V', "ERROR", 0);
	p = put_field(p, c1, v1, big);
	p = put_field(p, c2, v2, big);
	*p++ = 0;
	assert_int_equal((size_t)(p - b), n);
	*len = n;
	return b;
}

/* pkt_error_field on the first `have` bytes: PostgreSQL's order (C before
 * a huge M) decides from the first bytes; C after a huge M needs them all. */
static void test_error_field_prefix(void **state)
{
	(void)state;
	size_t len_c_first, len_m_first;
	uint8_t *c_first = error_body('C', "22P02", 'M', NULL, 1000000, &len_c_first);
	uint8_t *m_first = error_body('M', NULL, 'C', "22P02", 1000000, &len_m_first);
	const struct {
		const char *name;
		const uint8_t *body;
		size_t len, have;
		uint8_t code;
		enum pkt_status st;
		const char *val;           /* NULL: absent (or not found yet) */
	} cases[] = {
		{ "C early, its value buffered", c_first, len_c_first, 21, 'C', PKT_OK, "22P02" },
		{ "C early, value cut", c_first, len_c_first, 19, 'C', PKT_NEED_MORE, NULL },
		{ "nothing buffered", c_first, len_c_first, 0, 'C', PKT_NEED_MORE, NULL },
		{ "S from the first bytes", c_first, len_c_first, 7, 'S', PKT_OK, "ERROR" },
		{ "M cut by the buffer", c_first, len_c_first, 16384, 'M', PKT_NEED_MORE, NULL },
		{ "absent, all buffered", c_first, len_c_first, len_c_first, 'D', PKT_OK, NULL },
		{ "absent, not all buffered", c_first, len_c_first, 16384, 'D', PKT_NEED_MORE, NULL },
		{ "C after a huge M: a buffer's worth", m_first, len_m_first, 16384, 'C', PKT_NEED_MORE, NULL },
		{ "C after a huge M: all of it", m_first, len_m_first, len_m_first, 'C', PKT_OK, "22P02" },
		{ "more buffered than the message", (const uint8_t *)"CXX000\0\0Z\0", 8, 11, 'M', PKT_OK, NULL },
		{ "empty body", (const uint8_t *)"", 0, 0, 'C', PKT_BAD, NULL },
		{ "no terminator", (const uint8_t *)"SERROR\0", 7, 7, 'C', PKT_BAD, NULL },
		{ "unterminated value", (const uint8_t *)"SERROR\0Cabc", 11, 11, 'C', PKT_BAD, NULL },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *val = "unset";
		print_message("case: %s\n", cases[i].name);
		assert_int_equal(pkt_error_field(cases[i].body, cases[i].have, cases[i].len, cases[i].code, &val),
				 cases[i].st);
		if (cases[i].val)
			assert_string_equal(val, cases[i].val);
		else
			assert_null(val);
	}
	free(c_first);
	free(m_first);
}

/* pkt_error_is: decided as soon as the SQLSTATE (and, when asked, the
 * message) is buffered; a malformed error is "no". */
static void test_error_is_prefix(void **state)
{
	(void)state;
	size_t len_big, len_plan, len_late;
	uint8_t *big = error_body('C', "22P02", 'M', NULL, 1000000, &len_big);
	uint8_t *plan = error_body('C', "0A000", 'M', "cached plan must not change result type", 0, &len_plan);
	uint8_t *late = error_body('M', NULL, 'C', "25006", 100000, &len_late);
	const struct {
		const char *name;
		const uint8_t *body;
		size_t len, have;
		const char *sqlstate, *text;
		enum pkt_match want;
	} cases[] = {
		{ "other SQLSTATE, from 21 bytes of 1 MB", big, len_big, 21, "0A000", "cached plan", PKT_MATCH_NO },
		{ "SQLSTATE not buffered yet", big, len_big, 16, "0A000", NULL, PKT_MATCH_NEED_MORE },
		{ "SQLSTATE only", big, len_big, 21, "22P02", NULL, PKT_MATCH_YES },
		{ "SQLSTATE matches, message cut", big, len_big, 16384, "22P02", "zzz", PKT_MATCH_NEED_MORE },
		{ "SQLSTATE matches, message lacks the text", big, len_big, len_big, "22P02", "zzz", PKT_MATCH_NO },
		{ "SQLSTATE and text", plan, len_plan, len_plan, "0A000", "must not change result", PKT_MATCH_YES },
		{ "text not buffered yet", plan, len_plan, 30, "0A000", "must not change result", PKT_MATCH_NEED_MORE },
		{ "SQLSTATE after 100 kB", late, len_late, 16384, "25006", NULL, PKT_MATCH_NEED_MORE },
		{ "SQLSTATE after 100 kB, all of it", late, len_late, len_late, "25006", NULL, PKT_MATCH_YES },
		{ "no SQLSTATE at all", (const uint8_t *)"SERROR\0Mx\0\0", 11, 11, "25006", NULL, PKT_MATCH_NO },
		{ "malformed", (const uint8_t *)"SERROR\0Cab", 10, 10, "25006", NULL, PKT_MATCH_NO },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		print_message("case: %s\n", cases[i].name);
		assert_int_equal(pkt_error_is(cases[i].body, cases[i].have, cases[i].len, cases[i].sqlstate,
					      cases[i].text), cases[i].want);
	}
	free(big);
	free(plan);
	free(late);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_bytes),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_parse_server_fields),
		cmocka_unit_test(test_parse_without_sqlstate),
		cmocka_unit_test(test_parse_garbage),
		cmocka_unit_test(test_error_field_prefix),
		cmocka_unit_test(test_error_is_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for proto/error: ErrorResponse bytes, build/parse round
 * trip, bodies without SQLSTATE, and garbage bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_bytes),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_parse_server_fields),
		cmocka_unit_test(test_parse_without_sqlstate),
		cmocka_unit_test(test_parse_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for admin_ext_encode_rows, the console's result
 * encoder for the extended protocol: text results passed through with or
 * without their RowDescription, int2/int4/int8 columns sent in binary
 * (big-endian, negatives), text columns and NULLs unchanged, one format
 * code for all columns or one per column, RowDescription codes rewritten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admin_ext.h"
#include "proto/build.h"

#define OID_TEXT 25
#define OID_INT2 21
#define OID_INT4 23
#define OID_INT8 20
#define OID_NUMERIC 1700

struct col {
	const char *name;
	uint32_t oid;
	int16_t typlen;
};

/* A RowDescription as the console writes it: table 0, attnum 0, typmod -1,
 * the given format code on every column. Distinct table oid and attnum per
 * column, so a rewrite that mixes fields up shows. */
static void put_desc(struct pktbuf *pb, int n, const struct col *cols, const int16_t *codes)
{
	pktbuf_begin(pb, 'T');
	pktbuf_put_u16(pb, (uint16_t)n);
	for (int i = 0; i < n; i++) {
		pktbuf_put_string(pb, cols[i].name);
		pktbuf_put_u32(pb, 1000u + (uint32_t)i);      /* table oid */
		pktbuf_put_u16(pb, (uint16_t)(i + 1));        /* attnum */
		pktbuf_put_u32(pb, cols[i].oid);
		pktbuf_put_u16(pb, (uint16_t)cols[i].typlen);
		pktbuf_put_u32(pb, 0xffffffff);               /* typmod -1 */
		pktbuf_put_u16(pb, (uint16_t)(codes ? codes[i] : 0));
	}
	pktbuf_finish(pb);
}

/* One DataRow; a NULL pointer is SQL NULL. */
static void put_row(struct pktbuf *pb, int n, const char *const *vals)
{
	pktbuf_begin(pb, 'D');
	pktbuf_put_u16(pb, (uint16_t)n);
	for (int j = 0; j < n; j++) {
		if (!vals[j]) {
			pktbuf_put_u32(pb, 0xffffffff);
			continue;
		}
		pktbuf_put_u32(pb, (uint32_t)strlen(vals[j]));
		pktbuf_put_bytes(pb, vals[j], strlen(vals[j]));
	}
	pktbuf_finish(pb);
}

#define ROW(pb, ...) do { \
	const char *const v_[] = { __VA_ARGS__ }; \
	put_row((pb), (int)(sizeof(v_) / sizeof(v_[0])), v_); \
} while (0)

static void put_complete(struct pktbuf *pb, const char *tag)
{
	pktbuf_begin(pb, 'C');
	pktbuf_put_string(pb, tag);
	pktbuf_finish(pb);
}

/* Expected cells of a binary DataRow, written by hand. */
static void cell_null(struct pktbuf *pb) { pktbuf_put_u32(pb, 0xffffffff); }
static void cell_text(struct pktbuf *pb, const char *s)
{
	pktbuf_put_u32(pb, (uint32_t)strlen(s));
	pktbuf_put_bytes(pb, s, strlen(s));
}
static void cell_raw(struct pktbuf *pb, const uint8_t *b, size_t n)
{
	pktbuf_put_u32(pb, (uint32_t)n);
	pktbuf_put_bytes(pb, b, n);
}

static void expect_same(const struct pktbuf *have, const struct pktbuf *want)
{
	assert_false(pktbuf_failed(have));
	assert_false(pktbuf_failed(want));
	assert_false(have->in_msg);
	if (have->len != want->len)
		fail_msg("output is %zu bytes, expected %zu", have->len, want->len);
	for (size_t i = 0; i < want->len; i++)
		if (have->buf[i] != want->buf[i])
			fail_msg("output differs at byte %zu: 0x%02x, expected 0x%02x", i, have->buf[i],
				 want->buf[i]);
}

struct bufs {
	struct pktbuf in, out, want;
};

static int setup(void **state)
{
	static struct bufs b;
	pktbuf_init(&b.in, 64);
	pktbuf_init(&b.out, 64);
	pktbuf_init(&b.want, 64);
	*state = &b;
	return 0;
}

static int teardown(void **state)
{
	struct bufs *b = *state;
	pktbuf_free(&b->in);
	pktbuf_free(&b->out);
	pktbuf_free(&b->want);
	return 0;
}

static const struct col mixed[] = {
	{ "database", OID_TEXT, -1 },
	{ "cl_active", OID_INT4, 4 },
	{ "maxwait_us", OID_INT8, 8 },
	{ "port", OID_INT2, 2 },
	{ "ratio", OID_NUMERIC, -1 },
};
#define NMIXED 5

/* A small result: T, two D, C. */
static void mixed_result(struct pktbuf *pb, const int16_t *codes)
{
	put_desc(pb, NMIXED, mixed, codes);
	ROW(pb, "db1", "3", "-2", "6432", "1.5");
	ROW(pb, NULL, NULL, "9223372036854775807", "-1", NULL);
	put_complete(pb, "SHOW");
	assert_false(pktbuf_failed(pb));
}

/* ---- text ---- */

static void test_text_with_header(void **state)
{
	struct bufs *b = *state;
	static const int16_t zero1[] = { 0 };
	static const int16_t zeros[] = { 0, 0, 0, 0, 0 };

	mixed_result(&b->in, NULL);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, NULL, 0);
	expect_same(&b->out, &b->in);

	/* format codes that are all text change nothing either */
	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, zero1, 1);
	expect_same(&b->out, &b->in);
	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, zeros, 5);
	expect_same(&b->out, &b->in);
}

static void test_text_without_header(void **state)
{
	struct bufs *b = *state;

	mixed_result(&b->in, NULL);
	/* everything but the RowDescription */
	ROW(&b->want, "db1", "3", "-2", "6432", "1.5");
	ROW(&b->want, NULL, NULL, "9223372036854775807", "-1", NULL);
	put_complete(&b->want, "SHOW");

	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, false, NULL, 0);
	expect_same(&b->out, &b->want);

	static const int16_t zero1[] = { 0 };
	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, false, zero1, 1);
	expect_same(&b->out, &b->want);
}

/* Output is appended to what pb already holds. */
static void test_appends(void **state)
{
	struct bufs *b = *state;
	static const int16_t one[] = { 1 };

	ROW(&b->in, "x");
	put_complete(&b->out, "FIRST");
	put_complete(&b->want, "FIRST");
	ROW(&b->want, "x");
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, NULL, 0);
	expect_same(&b->out, &b->want);

	/* binary, no RowDescription: no known types, the text bytes stay */
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, false, one, 1);
	ROW(&b->want, "x");
	expect_same(&b->out, &b->want);
}

/* ---- binary ---- */

static const uint8_t be_i4_3[] = { 0, 0, 0, 3 };
static const uint8_t be_i8_m2[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe };
static const uint8_t be_i2_6432[] = { 0x19, 0x20 };
static const uint8_t be_i8_max[] = { 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static const uint8_t be_i2_m1[] = { 0xff, 0xff };

static void test_binary_all_columns(void **state)
{
	struct bufs *b = *state;
	static const int16_t one[] = { 1 };
	static const int16_t ones[] = { 1, 1, 1, 1, 1 };

	mixed_result(&b->in, NULL);
	put_desc(&b->want, NMIXED, mixed, ones);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_text(&b->want, "db1");                 /* text: the same bytes */
	cell_raw(&b->want, be_i4_3, 4);
	cell_raw(&b->want, be_i8_m2, 8);
	cell_raw(&b->want, be_i2_6432, 2);
	cell_text(&b->want, "1.5");                 /* not an integer type */
	pktbuf_finish(&b->want);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_null(&b->want);
	cell_null(&b->want);
	cell_raw(&b->want, be_i8_max, 8);
	cell_raw(&b->want, be_i2_m1, 2);
	cell_null(&b->want);
	pktbuf_finish(&b->want);
	put_complete(&b->want, "SHOW");

	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, one, 1);
	expect_same(&b->out, &b->want);

	/* one code per column, all binary: the same */
	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, ones, 5);
	expect_same(&b->out, &b->want);
}

static void test_binary_without_header(void **state)
{
	struct bufs *b = *state;
	static const int16_t one[] = { 1 };

	mixed_result(&b->in, NULL);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_text(&b->want, "db1");
	cell_raw(&b->want, be_i4_3, 4);
	cell_raw(&b->want, be_i8_m2, 8);
	cell_raw(&b->want, be_i2_6432, 2);
	cell_text(&b->want, "1.5");
	pktbuf_finish(&b->want);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_null(&b->want);
	cell_null(&b->want);
	cell_raw(&b->want, be_i8_max, 8);
	cell_raw(&b->want, be_i2_m1, 2);
	cell_null(&b->want);
	pktbuf_finish(&b->want);
	put_complete(&b->want, "SHOW");

	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, false, one, 1);
	expect_same(&b->out, &b->want);
}

/* Integer edge values, each type, big-endian two's complement. */
static void test_binary_integer_values(void **state)
{
	struct bufs *b = *state;
	static const int16_t one[] = { 1 };
	static const struct col ints[] = {
		{ "a", OID_INT2, 2 }, { "b", OID_INT4, 4 }, { "c", OID_INT8, 8 },
	};
	static const struct {
		const char *i2, *i4, *i8;
		uint8_t b2[2], b4[4], b8[8];
	} cases[] = {
		{ "0", "0", "0", { 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0, 0, 0 } },
		{ "1", "1", "1", { 0, 1 }, { 0, 0, 0, 1 }, { 0, 0, 0, 0, 0, 0, 0, 1 } },
		{ "-1", "-1", "-1", { 0xff, 0xff }, { 0xff, 0xff, 0xff, 0xff },
		  { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
		{ "32767", "2147483647", "9223372036854775807", { 0x7f, 0xff }, { 0x7f, 0xff, 0xff, 0xff },
		  { 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
		{ "-32768", "-2147483648", "-9223372036854775808", { 0x80, 0x00 }, { 0x80, 0, 0, 0 },
		  { 0x80, 0, 0, 0, 0, 0, 0, 0 } },
		{ "258", "16909060", "72623859790382856", { 0x01, 0x02 }, { 0x01, 0x02, 0x03, 0x04 },
		  { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08 } },
		{ "-300", "-70000", "-4294967296", { 0xfe, 0xd4 }, { 0xff, 0xfe, 0xee, 0x90 },
		  { 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00 } },
		{ "-2", "-2", "4294967296", { 0xff, 0xfe }, { 0xff, 0xff, 0xff, 0xfe },
		  { 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00 } },
	};
	const size_t n = sizeof(cases) / sizeof(cases[0]);

	put_desc(&b->in, 3, ints, NULL);
	for (size_t i = 0; i < n; i++)
		ROW(&b->in, cases[i].i2, cases[i].i4, cases[i].i8);

	for (size_t i = 0; i < n; i++) {
		pktbuf_begin(&b->want, 'D');
		pktbuf_put_u16(&b->want, 3);
		cell_raw(&b->want, cases[i].b2, 2);
		cell_raw(&b->want, cases[i].b4, 4);
		cell_raw(&b->want, cases[i].b8, 8);
		pktbuf_finish(&b->want);
	}
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, false, one, 1);
	expect_same(&b->out, &b->want);
}

/* One code per column: only the binary ones change, in the rows and in the
 * RowDescription; codes missing for the last columns mean text. */
static void test_per_column_formats(void **state)
{
	struct bufs *b = *state;
	static const int16_t codes[] = { 0, 1, 0, 1, 0 };
	static const int16_t short_codes[] = { 1, 0, 1 };

	mixed_result(&b->in, NULL);
	put_desc(&b->want, NMIXED, mixed, codes);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_text(&b->want, "db1");
	cell_raw(&b->want, be_i4_3, 4);
	cell_text(&b->want, "-2");                  /* int8 asked as text */
	cell_raw(&b->want, be_i2_6432, 2);
	cell_text(&b->want, "1.5");
	pktbuf_finish(&b->want);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_null(&b->want);
	cell_null(&b->want);
	cell_text(&b->want, "9223372036854775807");
	cell_raw(&b->want, be_i2_m1, 2);
	cell_null(&b->want);
	pktbuf_finish(&b->want);
	put_complete(&b->want, "SHOW");

	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, codes, 5);
	expect_same(&b->out, &b->want);

	/* three codes for five columns: columns 3 and 4 are text */
	static const int16_t short_header[] = { 1, 0, 1, 0, 0 };
	pktbuf_reset(&b->want);
	put_desc(&b->want, NMIXED, mixed, short_header);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_text(&b->want, "db1");
	cell_text(&b->want, "3");
	cell_raw(&b->want, be_i8_m2, 8);
	cell_text(&b->want, "6432");
	cell_text(&b->want, "1.5");
	pktbuf_finish(&b->want);
	pktbuf_begin(&b->want, 'D');
	pktbuf_put_u16(&b->want, NMIXED);
	cell_null(&b->want);
	cell_null(&b->want);
	cell_raw(&b->want, be_i8_max, 8);
	cell_text(&b->want, "-1");
	cell_null(&b->want);
	pktbuf_finish(&b->want);
	put_complete(&b->want, "SHOW");

	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, short_codes, 3);
	expect_same(&b->out, &b->want);
}

/* The rewritten RowDescription keeps every other field byte for byte; a
 * text-only column set asked in binary keeps its rows unchanged. */
static void test_header_rewrite_only_codes(void **state)
{
	struct bufs *b = *state;
	static const struct col texts[] = {
		{ "key", OID_TEXT, -1 }, { "value", OID_TEXT, -1 }, { "", 1043, -1 },
	};
	static const int16_t in_codes[] = { 0, 0, 0 };
	static const int16_t one[] = { 1 };
	static const int16_t out_codes[] = { 1, 1, 1 };

	put_desc(&b->in, 3, texts, in_codes);
	ROW(&b->in, "listen_port", "6432", "");
	ROW(&b->in, "x", NULL, "yz");
	put_desc(&b->want, 3, texts, out_codes);
	ROW(&b->want, "listen_port", "6432", "");
	ROW(&b->want, "x", NULL, "yz");

	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, one, 1);
	expect_same(&b->out, &b->want);

	/* and a header alone (Describe of a portal) */
	pktbuf_reset(&b->in);
	pktbuf_reset(&b->want);
	pktbuf_reset(&b->out);
	put_desc(&b->in, NMIXED, mixed, NULL);
	static const int16_t codes[] = { 1, 0, 1, 0, 1 };
	put_desc(&b->want, NMIXED, mixed, codes);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, codes, 5);
	expect_same(&b->out, &b->want);

	/* a zero-column RowDescription and an empty input */
	pktbuf_reset(&b->in);
	pktbuf_reset(&b->want);
	pktbuf_reset(&b->out);
	put_desc(&b->in, 0, NULL, NULL);
	put_desc(&b->want, 0, NULL, NULL);
	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len, true, one, 1);
	expect_same(&b->out, &b->want);
	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, 0, true, one, 1);
	assert_int_equal(b->out.len, 0);
}

/* An incomplete trailing message is dropped; what came before is kept. */
static void test_truncated_input(void **state)
{
	struct bufs *b = *state;
	static const int16_t one[] = { 1 };

	put_desc(&b->in, NMIXED, mixed, NULL);
	size_t desc_len = b->in.len;
	ROW(&b->in, "db1", "3", "-2", "6432", "1.5");
	put_desc(&b->want, NMIXED, mixed, (const int16_t[]){ 1, 1, 1, 1, 1 });

	admin_ext_encode_rows(&b->out, b->in.buf, b->in.len - 1, true, one, 1);
	expect_same(&b->out, &b->want);
	pktbuf_reset(&b->out);
	admin_ext_encode_rows(&b->out, b->in.buf, desc_len + 3, true, one, 1);
	expect_same(&b->out, &b->want);
}

/* ---- robustness, each run in a child so that a crash is a failure here ---- */

typedef bool (*child_fn)(void);

static void run_in_child(child_fn fn, const char *what)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn() ? 0 : 1);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("%s: killed by signal %d", what, WTERMSIG(st));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("%s: exit status %d", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

#define WIDE 130

/* A result wider than the encoder's 128-entry type table: every int4
 * column, the last ones included, is sent in binary. */
static bool wide_result(void)
{
	struct col cols[WIDE];
	const char *vals[WIDE];
	char names[WIDE][8];
	struct pktbuf in, out;
	static const int16_t one[] = { 1 };

	for (int i = 0; i < WIDE; i++) {
		snprintf(names[i], sizeof(names[i]), "c%d", i);
		cols[i] = (struct col){ names[i], OID_INT4, 4 };
		vals[i] = "7";
	}
	pktbuf_init(&in, 4096);
	pktbuf_init(&out, 4096);
	put_desc(&in, WIDE, cols, NULL);
	size_t desc_len = in.len;
	put_row(&in, WIDE, vals);
	admin_ext_encode_rows(&out, in.buf, in.len, false, one, 1);

	/* D, length, count, then WIDE cells of { 0,0,0,4, 0,0,0,7 } */
	if (pktbuf_failed(&out) || out.len != 7 + (size_t)WIDE * 8 || out.buf[0] != 'D')
		return false;
	for (int i = 0; i < WIDE; i++) {
		const uint8_t *c = out.buf + 7 + i * 8;
		static const uint8_t want[8] = { 0, 0, 0, 4, 0, 0, 0, 7 };
		if (memcmp(c, want, 8) != 0) {
			fprintf(stderr, "column %d not sent as binary int4\n", i);
			return false;
		}
	}
	(void)desc_len;
	return true;
}

static void test_wide_result(void **state)
{
	(void)state;
	run_in_child(wide_result, "130-column binary result");
}

/* A DataRow whose field length runs past its message: no crash (the
 * message framing around it is intact). */
static bool bad_field_length(void)
{
	struct pktbuf in, out;
	static const int16_t one[] = { 1 };
	static const struct col c1[] = { { "a", OID_TEXT, -1 }, { "b", OID_INT4, 4 } };

	pktbuf_init(&in, 256);
	pktbuf_init(&out, 256);
	put_desc(&in, 2, c1, NULL);
	pktbuf_begin(&in, 'D');
	pktbuf_put_u16(&in, 2);
	pktbuf_put_u32(&in, 50);            /* 50 bytes announced, 2 there */
	pktbuf_put_bytes(&in, "ab", 2);
	pktbuf_finish(&in);
	admin_ext_encode_rows(&out, in.buf, in.len, true, one, 1);
	return !pktbuf_failed(&out);
}

static void test_bad_field_length(void **state)
{
	(void)state;
	run_in_child(bad_field_length, "DataRow with a field past its end");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_text_with_header),
		T(test_text_without_header),
		T(test_appends),
		T(test_binary_all_columns),
		T(test_binary_without_header),
		T(test_binary_integer_values),
		T(test_per_column_formats),
		T(test_header_rewrite_only_codes),
		T(test_truncated_input),
		T(test_wide_result),
		T(test_bad_field_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

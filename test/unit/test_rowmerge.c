/* pgcrew — unit tests for rowmerge: SHOW rows from several workers
 * concatenated (NULL rule) or merged by key with sum, max, first and the
 * SHOW LISTS rule; NULL values; malformed DataRow input refused without
 * leaks; rowset_write read back by a separate decoder; and 5000-row timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proto/build.h"
#include "rowmerge.h"

/* ---- building worker answers ---- */

/* One DataRow of n values; a NULL pointer is SQL NULL. */
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
	assert_false(pktbuf_failed(pb));
}

#define ROW(pb, ...) do { \
	const char *const v_[] = { __VA_ARGS__ }; \
	put_row((pb), (int)(sizeof(v_) / sizeof(v_[0])), v_); \
} while (0)

/* One worker's answer, given as a pktbuf, added to rs. */
static bool add_pb(struct rowset *rs, const struct pktbuf *pb)
{
	return rowset_add(rs, pb->buf, pb->len);
}

/* The rowset's cell, compared with want (NULL = SQL NULL). */
static void expect_cell(const struct rowset *rs, int i, int j, const char *want)
{
	assert_true(i < rs->nrows);
	assert_true(j < rs->ncols);
	const char *have = rs->rows[i][j];
	if (!want) {
		if (have)
			fail_msg("row %d col %d: '%s', expected NULL", i, j, have);
		return;
	}
	if (!have)
		fail_msg("row %d col %d: NULL, expected '%s'", i, j, want);
	if (strcmp(have, want) != 0)
		fail_msg("row %d col %d: '%s', expected '%s'", i, j, have, want);
}

#define EXPECT_ROW(rs, i, ...) do { \
	const char *const w_[] = { __VA_ARGS__ }; \
	int n_ = (int)(sizeof(w_) / sizeof(w_[0])); \
	assert_int_equal((rs)->ncols, n_); \
	for (int j_ = 0; j_ < n_; j_++) \
		expect_cell((rs), (i), j_, w_[j_]); \
} while (0)

/* ---- decoding rowset_write's output, independently of rowmerge.c ---- */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct cell {
	bool null;
	size_t len;
	const uint8_t *p;
};

/* Decode *off's DataRow into cells (at most max); returns the column count
 * and advances *off; fails the test on anything not well-formed. */
static int decode_row(const struct pktbuf *pb, size_t *off, struct cell *cells, int max)
{
	const uint8_t *m = pb->buf + *off;
	assert_true(pb->len - *off >= 7);
	assert_int_equal(m[0], 'D');
	uint32_t word = be32(m + 1);
	assert_true(word >= 6);
	assert_true((size_t)word + 1 <= pb->len - *off);
	const uint8_t *p = m + 5, *end = m + 1 + word;
	int n = p[0] << 8 | p[1];
	p += 2;
	assert_true(n <= max);
	for (int j = 0; j < n; j++) {
		assert_true(end - p >= 4);
		uint32_t l = be32(p);
		p += 4;
		if (l == 0xffffffff) {
			cells[j].null = true;
			cells[j].len = 0;
			cells[j].p = NULL;
			continue;
		}
		assert_true((size_t)(end - p) >= l);
		cells[j].null = false;
		cells[j].len = l;
		cells[j].p = p;
		p += l;
	}
	assert_ptr_equal(p, end);           /* nothing left over in the message */
	*off += (size_t)word + 1;
	return n;
}

static void expect_decoded(const struct cell *c, const char *want)
{
	if (!want) {
		assert_true(c->null);
		return;
	}
	assert_false(c->null);
	assert_int_equal(c->len, strlen(want));
	assert_memory_equal(c->p, want, c->len);
}

/* ---- NULL rule: concatenation ---- */

static void test_concat_null_rule(void **state)
{
	struct rowset rs;
	struct pktbuf w1, w2;
	(void)state;

	rowset_init(&rs, NULL);
	pktbuf_init(&w1, 64);
	pktbuf_init(&w2, 64);
	ROW(&w1, "c1", "db", "5");
	ROW(&w1, "c2", "db", "6");
	/* identical rows are not merged without a rule */
	ROW(&w2, "c1", "db", "5");
	ROW(&w2, "c3", NULL, "7");

	assert_true(add_pb(&rs, &w1));
	assert_true(add_pb(&rs, &w2));
	assert_int_equal(rs.nrows, 4);
	EXPECT_ROW(&rs, 0, "c1", "db", "5");
	EXPECT_ROW(&rs, 1, "c2", "db", "6");
	EXPECT_ROW(&rs, 2, "c1", "db", "5");
	EXPECT_ROW(&rs, 3, "c3", NULL, "7");

	rowset_free(&rs);
	assert_int_equal(rs.nrows, 0);
	pktbuf_free(&w1);
	pktbuf_free(&w2);
}

/* Messages other than DataRow in a worker's answer are skipped. */
static void test_other_messages_skipped(void **state)
{
	struct rowset rs;
	struct pktbuf pb;
	(void)state;

	rowset_init(&rs, NULL);
	pktbuf_init(&pb, 64);
	pktbuf_begin(&pb, 'T');             /* a RowDescription-ish message */
	pktbuf_put_u16(&pb, 1);
	pktbuf_put_string(&pb, "x");
	pktbuf_finish(&pb);
	ROW(&pb, "a", "1");
	pktbuf_begin(&pb, 'C');
	pktbuf_put_string(&pb, "SHOW");
	pktbuf_finish(&pb);
	ROW(&pb, "b", "2");
	pkt_write_notice(&pb, "NOTICE", NULL, "hello");
	assert_false(pktbuf_failed(&pb));

	assert_true(add_pb(&rs, &pb));
	assert_int_equal(rs.nrows, 2);
	EXPECT_ROW(&rs, 0, "a", "1");
	EXPECT_ROW(&rs, 1, "b", "2");

	/* an empty answer adds nothing and is fine */
	assert_true(rowset_add(&rs, pb.buf, 0));
	assert_int_equal(rs.nrows, 2);

	rowset_free(&rs);
	pktbuf_free(&pb);
}

/* ---- keyed merges ---- */

static void test_keyed_sum_and_max(void **state)
{
	struct rowset rs;
	struct pktbuf w1, w2, w3;
	(void)state;

	rowset_init(&rs, "kk+M");
	pktbuf_init(&w1, 64);
	pktbuf_init(&w2, 64);
	pktbuf_init(&w3, 64);
	ROW(&w1, "db1", "u1", "3", "10");
	ROW(&w1, "db2", "u1", "1", "5");
	ROW(&w2, "db1", "u1", "4", "7");
	ROW(&w2, "db1", "u2", "2", "2");
	ROW(&w3, "db1", "u1", "0", "12");
	ROW(&w3, "db2", "u1", "-3", "-1");

	assert_true(add_pb(&rs, &w1));
	assert_true(add_pb(&rs, &w2));
	assert_true(add_pb(&rs, &w3));
	assert_int_equal(rs.nrows, 3);     /* in the order keys were first seen */
	EXPECT_ROW(&rs, 0, "db1", "u1", "7", "12");
	EXPECT_ROW(&rs, 1, "db2", "u1", "-2", "5");
	EXPECT_ROW(&rs, 2, "db1", "u2", "2", "2");

	rowset_free(&rs);
	pktbuf_free(&w1);
	pktbuf_free(&w2);
	pktbuf_free(&w3);
}

/* SHOW POOLS' maxwait/maxwait_us: the larger (seconds, microseconds) pair
 * wins whole; taking each column's maximum would mix two workers. */
static void test_wait_pair(void **state)
{
	struct rowset rs;
	struct pktbuf pb;
	(void)state;

	rowset_init(&rs, "kWw+");
	pktbuf_init(&pb, 64);
	ROW(&pb, "p", "1", "900000", "1");
	ROW(&pb, "p", "2", "100", "1");
	ROW(&pb, "p", "0", "999999", "1");
	ROW(&pb, "q", "3", "5", "1");
	ROW(&pb, "q", "3", "7", "1");
	ROW(&pb, "q", "3", "6", "1");
	assert_true(add_pb(&rs, &pb));
	assert_int_equal(rs.nrows, 2);
	EXPECT_ROW(&rs, 0, "p", "2", "100", "3");
	EXPECT_ROW(&rs, 1, "q", "3", "7", "3");

	rowset_free(&rs);
	pktbuf_free(&pb);
}

/* Both key columns count: equal first key, different second key stay apart;
 * sums beyond 32 bits and negative maxima. */
static void test_keyed_wide_values(void **state)
{
	struct rowset rs;
	struct pktbuf pb;
	(void)state;

	rowset_init(&rs, "k+Mk");
	pktbuf_init(&pb, 64);
	ROW(&pb, "a", "4000000000", "-9", "x");
	ROW(&pb, "a", "4000000000", "-5", "x");
	ROW(&pb, "a", "1", "-7", "y");
	ROW(&pb, "a", "-8000000001", "-12", "x");
	assert_true(add_pb(&rs, &pb));
	assert_int_equal(rs.nrows, 2);
	EXPECT_ROW(&rs, 0, "a", "-1", "-5", "x");
	EXPECT_ROW(&rs, 1, "a", "1", "-7", "y");

	rowset_free(&rs);
	pktbuf_free(&pb);
}

static void test_null_values(void **state)
{
	struct rowset rs;
	struct pktbuf pb;
	(void)state;

	rowset_init(&rs, "k+M");
	pktbuf_init(&pb, 64);
	/* NULL keys merge with each other, not with "" */
	ROW(&pb, NULL, "1", "1");
	ROW(&pb, "", "10", "10");
	ROW(&pb, NULL, "2", "5");
	ROW(&pb, "", "20", "3");
	/* a NULL sum/max cell takes the next worker's value ... */
	ROW(&pb, "n", NULL, NULL);
	ROW(&pb, "n", "4", "9");
	/* ... and a later NULL leaves a value alone */
	ROW(&pb, "n", NULL, NULL);
	/* all NULL stays NULL */
	ROW(&pb, "z", NULL, NULL);
	ROW(&pb, "z", NULL, NULL);
	assert_true(add_pb(&rs, &pb));

	assert_int_equal(rs.nrows, 4);
	EXPECT_ROW(&rs, 0, NULL, "3", "5");
	EXPECT_ROW(&rs, 1, "", "30", "10");
	EXPECT_ROW(&rs, 2, "n", "4", "9");
	EXPECT_ROW(&rs, 3, "z", NULL, NULL);

	rowset_free(&rs);
	pktbuf_free(&pb);
}

/* 'f' keeps the first worker's value, even a NULL one; columns past the
 * end of the rule are 'f' too. */
static void test_first_kept(void **state)
{
	struct rowset rs;
	struct pktbuf w1, w2;
	(void)state;

	rowset_init(&rs, "kf+");
	pktbuf_init(&w1, 64);
	pktbuf_init(&w2, 64);
	ROW(&w1, "a", "first", "1", "p");
	ROW(&w1, "b", NULL, "1", NULL);
	ROW(&w2, "a", "second", "2", "q");
	ROW(&w2, "b", "second", "2", "q");
	assert_true(add_pb(&rs, &w1));
	assert_true(add_pb(&rs, &w2));

	assert_int_equal(rs.nrows, 2);
	EXPECT_ROW(&rs, 0, "a", "first", "3", "p");
	EXPECT_ROW(&rs, 1, "b", NULL, "3", NULL);

	rowset_free(&rs);
	pktbuf_free(&w1);
	pktbuf_free(&w2);
}

/* SHOW LISTS: lists every worker holds a copy of take the maximum, the
 * per-worker counts are summed. */
static void test_lists_rule(void **state)
{
	static const char *const copied[] = {
		"databases", "users", "pools", "peers", "peer_pools", "dns_names", "dns_zones",
	};
	static const char *const summed[] = {
		"free_clients", "used_clients", "login_clients", "free_servers", "used_servers",
		"dns_queries", "dns_pending", "Databases", "databases_x",
	};
	static const char *const worker_vals[3] = { "4", "6", "5" };
	const size_t nc = sizeof(copied) / sizeof(copied[0]);
	const size_t ns = sizeof(summed) / sizeof(summed[0]);
	struct rowset rs;
	(void)state;

	rowset_init(&rs, "kL");
	for (int w = 0; w < 3; w++) {
		struct pktbuf pb;
		pktbuf_init(&pb, 256);
		for (size_t i = 0; i < nc; i++)
			ROW(&pb, copied[i], worker_vals[w]);
		for (size_t i = 0; i < ns; i++)
			ROW(&pb, summed[i], worker_vals[w]);
		assert_true(add_pb(&rs, &pb));
		pktbuf_free(&pb);
	}
	assert_int_equal(rs.nrows, (int)(nc + ns));
	for (size_t i = 0; i < nc; i++)
		EXPECT_ROW(&rs, (int)i, copied[i], "6");
	for (size_t i = 0; i < ns; i++)
		EXPECT_ROW(&rs, (int)(nc + i), summed[i], "15");

	rowset_free(&rs);
}

/* ---- malformed input ---- */

static void test_truncated_message(void **state)
{
	struct rowset rs;
	struct pktbuf pb;
	(void)state;

	rowset_init(&rs, "k+");
	pktbuf_init(&pb, 64);
	ROW(&pb, "a", "1");
	size_t one = pb.len;
	ROW(&pb, "b", "2");

	/* every cut inside the second message is refused */
	for (size_t cut = one + 1; cut < pb.len; cut++) {
		struct rowset t;
		rowset_init(&t, "k+");
		assert_false(rowset_add(&t, pb.buf, cut));
		for (int i = 0; i < t.nrows; i++)      /* whatever got in is not "b" */
			assert_string_not_equal(t.rows[i][0], "b");
		rowset_free(&t);
	}
	/* a cut inside the only message: nothing added */
	for (size_t cut = 1; cut < one; cut++) {
		assert_false(rowset_add(&rs, pb.buf, cut));
		assert_int_equal(rs.nrows, 0);
	}
	/* the intact answer still goes in afterwards */
	assert_true(add_pb(&rs, &pb));
	assert_int_equal(rs.nrows, 2);
	EXPECT_ROW(&rs, 0, "a", "1");
	EXPECT_ROW(&rs, 1, "b", "2");

	rowset_free(&rs);
	pktbuf_free(&pb);
}

static void test_bad_lengths(void **state)
{
	struct rowset rs;
	(void)state;

	rowset_init(&rs, NULL);

	/* message length word below 4 */
	static const uint8_t short_word[] = { 'D', 0, 0, 0, 3, 0, 0 };
	assert_false(rowset_add(&rs, short_word, sizeof(short_word)));
	/* message length word far beyond the buffer */
	static const uint8_t huge_word[] = { 'D', 0x7f, 0xff, 0xff, 0xff, 0, 1, 0, 0, 0, 0 };
	assert_false(rowset_add(&rs, huge_word, sizeof(huge_word)));
	static const uint8_t max_word[] = { 'D', 0xff, 0xff, 0xff, 0xff, 0, 1, 0, 0, 0, 0 };
	assert_false(rowset_add(&rs, max_word, sizeof(max_word)));
	/* a DataRow with no column count */
	static const uint8_t no_count[] = { 'D', 0, 0, 0, 4 };
	assert_false(rowset_add(&rs, no_count, sizeof(no_count)));
	/* a field length past the end of the message */
	static const uint8_t field_past[] = { 'D', 0, 0, 0, 12, 0, 1, 0, 0, 0, 9, 'a', 'b' };
	assert_false(rowset_add(&rs, field_past, sizeof(field_past)));
	/* a huge field length */
	static const uint8_t field_huge[] = { 'D', 0, 0, 0, 12, 0, 1, 0x7f, 0xff, 0xff, 0xff, 'a', 'b' };
	assert_false(rowset_add(&rs, field_huge, sizeof(field_huge)));
	/* fewer fields than the column count says (second field missing) */
	static const uint8_t few_fields[] = { 'D', 0, 0, 0, 11, 0, 2, 0, 0, 0, 1, 'a' };
	assert_false(rowset_add(&rs, few_fields, sizeof(few_fields)));
	/* bytes left over after the last field */
	static const uint8_t extra[] = { 'D', 0, 0, 0, 12, 0, 1, 0, 0, 0, 1, 'a', 'z' };
	assert_false(rowset_add(&rs, extra, sizeof(extra)));
	/* a NULL, then a field length cut in half */
	static const uint8_t cut_len[] = { 'D', 0, 0, 0, 12, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0 };
	assert_false(rowset_add(&rs, cut_len, sizeof(cut_len)));
	assert_int_equal(rs.nrows, 0);

	/* the same shapes done right are accepted */
	static const uint8_t good[] = { 'D', 0, 0, 0, 15, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'a' };
	assert_true(rowset_add(&rs, good, sizeof(good)));
	assert_int_equal(rs.nrows, 1);
	EXPECT_ROW(&rs, 0, NULL, "a");

	rowset_free(&rs);
}

static void test_column_count_changes(void **state)
{
	struct rowset rs;
	struct pktbuf w1, w2, w3;
	(void)state;

	rowset_init(&rs, "k+");
	pktbuf_init(&w1, 64);
	pktbuf_init(&w2, 64);
	pktbuf_init(&w3, 64);
	ROW(&w1, "a", "1");
	ROW(&w2, "a", "1", "extra");       /* a third column */
	ROW(&w3, "a", "2");
	ROW(&w3, "b");                     /* one column, inside one answer */

	assert_true(add_pb(&rs, &w1));
	assert_false(add_pb(&rs, &w2));
	assert_int_equal(rs.ncols, 2);
	assert_int_equal(rs.nrows, 1);
	EXPECT_ROW(&rs, 0, "a", "1");      /* untouched by the refused answer */
	/* w3's good first row went in before its bad second row was seen */
	assert_false(add_pb(&rs, &w3));
	assert_int_equal(rs.ncols, 2);
	assert_int_equal(rs.nrows, 1);
	EXPECT_ROW(&rs, 0, "a", "3");

	rowset_free(&rs);
	pktbuf_free(&w1);
	pktbuf_free(&w2);
	pktbuf_free(&w3);
}

/* ---- rowset_write ---- */

static void test_write_parses_back(void **state)
{
	struct rowset rs, back;
	struct pktbuf in, out, out2;
	char big[5000];
	struct cell cells[8];
	(void)state;

	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	const char *const rows[][4] = {
		{ "db1", "", NULL, "12" },
		{ "db2", big, "x y\tz", "-4" },
		{ NULL, NULL, NULL, NULL },
	};

	rowset_init(&rs, NULL);
	pktbuf_init(&in, 64);
	pktbuf_init(&out, 64);
	pktbuf_init(&out2, 64);
	for (int i = 0; i < 3; i++)
		put_row(&in, 4, rows[i]);
	assert_true(add_pb(&rs, &in));
	rowset_write(&rs, &out);
	assert_false(pktbuf_failed(&out));
	assert_false(out.in_msg);

	size_t off = 0;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(decode_row(&out, &off, cells, 8), 4);
		for (int j = 0; j < 4; j++)
			expect_decoded(&cells[j], rows[i][j]);
	}
	assert_int_equal(off, out.len);
	/* the same bytes as the input, since nothing merged */
	assert_int_equal(out.len, in.len);
	assert_memory_equal(out.buf, in.buf, in.len);

	/* and written rows read back into a rowset, then out again, unchanged */
	rowset_init(&back, NULL);
	assert_true(add_pb(&back, &out));
	rowset_write(&back, &out2);
	assert_int_equal(out2.len, out.len);
	assert_memory_equal(out2.buf, out.buf, out.len);

	rowset_free(&rs);
	rowset_free(&back);
	pktbuf_free(&in);
	pktbuf_free(&out);
	pktbuf_free(&out2);
}

/* Merged values are written as the merge computed them; an empty rowset
 * writes nothing. */
static void test_write_merged(void **state)
{
	struct rowset rs;
	struct pktbuf w1, w2, out;
	struct cell cells[4];
	(void)state;

	rowset_init(&rs, "k+M");
	pktbuf_init(&w1, 64);
	pktbuf_init(&w2, 64);
	pktbuf_init(&out, 64);

	rowset_write(&rs, &out);
	assert_int_equal(out.len, 0);

	ROW(&w1, "p", "5", NULL);
	ROW(&w2, "p", "6", "3");
	ROW(&w2, "q", NULL, "1");
	assert_true(add_pb(&rs, &w1));
	assert_true(add_pb(&rs, &w2));
	rowset_write(&rs, &out);
	assert_false(pktbuf_failed(&out));

	size_t off = 0;
	assert_int_equal(decode_row(&out, &off, cells, 4), 3);
	expect_decoded(&cells[0], "p");
	expect_decoded(&cells[1], "11");
	expect_decoded(&cells[2], "3");
	assert_int_equal(decode_row(&out, &off, cells, 4), 3);
	expect_decoded(&cells[0], "q");
	expect_decoded(&cells[1], NULL);
	expect_decoded(&cells[2], "1");
	assert_int_equal(off, out.len);

	rowset_free(&rs);
	pktbuf_free(&w1);
	pktbuf_free(&w2);
	pktbuf_free(&out);
}

/* A numeric key orders the rows ascending whatever order the workers
 * answered in (10 after 9: numbers, not text). */
static void test_numeric_key_sorted(void **state)
{
	struct rowset rs;
	struct pktbuf w, out;
	struct cell cells[2];
	static const char *const order[] = { "0", "1", "2", "9", "10" };
	(void)state;

	rowset_init(&rs, "nf");
	pktbuf_init(&w, 64);
	pktbuf_init(&out, 64);
	ROW(&w, "10", "a");
	ROW(&w, "2", "b");
	ROW(&w, "0", "c");
	ROW(&w, "9", "d");
	ROW(&w, "1", "e");
	assert_true(add_pb(&rs, &w));
	rowset_write(&rs, &out);
	size_t off = 0;
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		assert_int_equal(decode_row(&out, &off, cells, 2), 2);
		expect_decoded(&cells[0], order[i]);
	}
	assert_int_equal(off, out.len);
	rowset_free(&rs);
	pktbuf_free(&w);
	pktbuf_free(&out);
}

/* ---- size ---- */

/* The CPU time this process has used: the work done, which a busy machine
 * does not stretch as it stretches the wall clock. */
static double cpu_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define MANY 5000
#define MANY_WORKERS 4

/* 4 workers x 5000 pools merged by key, and 4 x 5000 clients concatenated,
 * in bounded CPU time. The keyed merge scans every merged row for each new
 * one (quadratic): about 0.6 s here at -O2 and 1-3.5 s with ASan/UBSan, so
 * the bound is generous and only catches something far worse. */
static void test_many_rows(void **state)
{
	struct rowset keyed, plain;
	struct pktbuf out;
	char db[32], n[32];
	(void)state;

	rowset_init(&keyed, "kk+M");
	rowset_init(&plain, NULL);
	pktbuf_init(&out, 1024);
	double t0 = cpu_sec();
	for (int w = 0; w < MANY_WORKERS; w++) {
		struct pktbuf pb;
		pktbuf_init(&pb, 1024);
		for (int i = 0; i < MANY; i++) {
			snprintf(db, sizeof(db), "db%d", i);
			snprintf(n, sizeof(n), "%d", i + w);
			ROW(&pb, db, "user", n, n);
		}
		assert_true(add_pb(&keyed, &pb));
		assert_true(add_pb(&plain, &pb));
		pktbuf_free(&pb);
	}
	rowset_write(&keyed, &out);
	rowset_write(&plain, &out);
	double took = cpu_sec() - t0;

	assert_false(pktbuf_failed(&out));
	assert_int_equal(keyed.nrows, MANY);
	assert_int_equal(plain.nrows, MANY * MANY_WORKERS);
	for (int i = 0; i < MANY; i += 499) {
		snprintf(db, sizeof(db), "db%d", i);
		expect_cell(&keyed, i, 0, db);
		snprintf(n, sizeof(n), "%d", MANY_WORKERS * i + 0 + 1 + 2 + 3);
		expect_cell(&keyed, i, 2, n);
		snprintf(n, sizeof(n), "%d", i + MANY_WORKERS - 1);
		expect_cell(&keyed, i, 3, n);
	}
	print_message("merged %d x %d rows in %.3f s of CPU\n", MANY_WORKERS, MANY, took);
	if (took > 10.0)
		fail_msg("merging %d x %d rows took %.3f s of CPU", MANY_WORKERS, MANY, took);

	rowset_free(&keyed);
	rowset_free(&plain);
	pktbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concat_null_rule),
		cmocka_unit_test(test_numeric_key_sorted),
		cmocka_unit_test(test_other_messages_skipped),
		cmocka_unit_test(test_keyed_sum_and_max),
		cmocka_unit_test(test_keyed_wide_values),
		cmocka_unit_test(test_null_values),
		cmocka_unit_test(test_first_kept),
		cmocka_unit_test(test_lists_rule),
		cmocka_unit_test(test_truncated_message),
		cmocka_unit_test(test_bad_lengths),
		cmocka_unit_test(test_column_count_changes),
		cmocka_unit_test(test_wait_pair),
		cmocka_unit_test(test_write_parses_back),
		cmocka_unit_test(test_write_merged),
		cmocka_unit_test(test_many_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

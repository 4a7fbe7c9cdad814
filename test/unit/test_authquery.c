/* pgcrew — unit tests for auth/authquery's protocol pieces: the
 * Parse/Bind/Describe/Execute/Sync batch (with and without the reset query)
 * and the parsing of RowDescription and DataRow answers, including NULLs,
 * wrong column counts and truncated or overlong messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "authquery.h"
#include "proto/build.h"
#include "proto/packet.h"

/* Walk pb's messages: their types in order, and the message bodies. */
static int types_of(const struct pktbuf *pb, char *types, const uint8_t **bodies, uint32_t *lens)
{
	size_t pos = 0;
	int n = 0;
	while (pos + 5 <= pb->len) {
		const uint8_t *p = pb->buf + pos;
		uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
		types[n] = (char)p[0];
		bodies[n] = p + 5;
		lens[n] = len - 4;
		n++;
		pos += 1 + len;
	}
	assert_int_equal(pos, pb->len);
	types[n] = 0;
	return n;
}

static void test_build_batch(void **state)
{
	struct pktbuf pb;
	char types[16];
	const uint8_t *b[16];
	uint32_t l[16];

	(void)state;
	pktbuf_init(&pb, 64);
	assert_int_equal(authquery_build(&pb, NULL, "SELECT u, p FROM f($1)", "bob"), 1);
	assert_int_equal(types_of(&pb, types, b, l), 5);
	assert_string_equal(types, "PBDES");
	/* Parse: unnamed statement, the query, no parameter types. */
	assert_string_equal((const char *)b[0] + 1, "SELECT u, p FROM f($1)");
	/* Bind: "", "", 0 formats, 1 value of 3 bytes "bob", 0 result formats. */
	static const uint8_t bind[] = { 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 'b', 'o', 'b', 0, 0 };
	assert_int_equal(l[1], sizeof(bind));
	assert_memory_equal(b[1], bind, sizeof(bind));
	/* Describe portal "", Execute "" without row limit, Sync empty. */
	assert_int_equal(l[2], 2);
	assert_int_equal(b[2][0], 'P');
	assert_int_equal(l[3], 5);
	assert_int_equal(l[4], 0);
	pktbuf_free(&pb);

	pktbuf_init(&pb, 64);
	assert_int_equal(authquery_build(&pb, "RESET \"search_path\";", "q", "x"), 2);
	assert_int_equal(types_of(&pb, types, b, l), 6);
	assert_string_equal(types, "QPBDES");
	assert_string_equal((const char *)b[0], "RESET \"search_path\";");
	pktbuf_free(&pb);
}

static void test_rowdesc(void **state)
{
	static const uint8_t two[] = { 0, 2, 'x' };
	(void)state;
	assert_int_equal(authquery_parse_rowdesc(two, sizeof(two)), 2);
	assert_int_equal(authquery_parse_rowdesc(two, 1), -1);
}

/* A DataRow body: columns given as (len, bytes); len -1 = NULL. */
static size_t row(uint8_t *out, int ncol, int32_t l1, const char *v1, int32_t l2, const char *v2)
{
	size_t n = 0;
	out[n++] = (uint8_t)(ncol >> 8);
	out[n++] = (uint8_t)ncol;
	int32_t ls[2] = { l1, l2 };
	const char *vs[2] = { v1, v2 };
	for (int i = 0; i < 2; i++) {
		uint32_t u = (uint32_t)ls[i];
		out[n++] = (uint8_t)(u >> 24);
		out[n++] = (uint8_t)(u >> 16);
		out[n++] = (uint8_t)(u >> 8);
		out[n++] = (uint8_t)u;
		/* A length beyond the value (a lying length word) copies only the value. */
		size_t have = ls[i] > 0 ? strnlen(vs[i], (size_t)ls[i]) : 0;
		memcpy(out + n, vs[i] ? vs[i] : "", have);
		n += have;
	}
	return n;
}

static void test_row_secret(void **state)
{
	uint8_t body[128];
	char secret[64], err[96];
	bool null_pw = true;

	(void)state;
	size_t n = row(body, 2, 3, "bob", 6, "md5abc");
	assert_int_equal(authquery_parse_row(body, n, secret, sizeof(secret), &null_pw, err, sizeof(err)), 0);
	assert_string_equal(secret, "md5abc");
	assert_false(null_pw);
	/* NULL password: the user exists, with no usable password. */
	n = row(body, 2, 3, "bob", -1, NULL);
	assert_int_equal(authquery_parse_row(body, n, secret, sizeof(secret), &null_pw, err, sizeof(err)), 0);
	assert_true(null_pw);
	assert_string_equal(secret, "");
	/* NULL user name: no such user. */
	n = row(body, 2, -1, NULL, 6, "md5abc");
	assert_int_equal(authquery_parse_row(body, n, secret, sizeof(secret), &null_pw, err, sizeof(err)), 1);
	/* An overlong secret is an error, never cut short (nor overflowing). */
	static const char longpw[40] = "0123456789012345678901234567890123456789";
	n = row(body, 2, 1, "b", 40, longpw);
	assert_int_equal(authquery_parse_row(body, n, secret, 8, &null_pw, err, sizeof(err)), -1);
	assert_string_equal(err, "auth_query returned a password longer than 7 bytes");
	n = row(body, 2, 1, "b", 7, longpw);          /* exactly what fits */
	assert_int_equal(authquery_parse_row(body, n, secret, 8, &null_pw, err, sizeof(err)), 0);
	assert_string_equal(secret, "0123456");
}

static void test_row_errors(void **state)
{
	uint8_t body[128];
	char secret[64], err[96];
	bool null_pw;

	(void)state;
	size_t n = row(body, 3, 3, "bob", 2, "pw");
	assert_int_equal(authquery_parse_row(body, n, secret, sizeof(secret), &null_pw, err, sizeof(err)), -1);
	assert_string_equal(err, "expected 2 columns from auth_query, not 3");
	n = row(body, 2, 3, "bob", 2, "pw");
	for (size_t cut = 0; cut < n; cut++) {
		assert_int_equal(authquery_parse_row(body, cut, secret, sizeof(secret), &null_pw, err, sizeof(err)), -1);
		assert_string_equal(err, "bad packet");
	}
	/* Trailing bytes, a length past the end, a negative length. */
	body[n] = 'x';
	assert_int_equal(authquery_parse_row(body, n + 1, secret, sizeof(secret), &null_pw, err, sizeof(err)), -1);
	n = row(body, 2, 3, "bob", 1000, "pw");
	assert_int_equal(authquery_parse_row(body, n, secret, sizeof(secret), &null_pw, err, sizeof(err)), -1);
	n = row(body, 2, -2, NULL, 2, "pw");
	assert_int_equal(authquery_parse_row(body, n, secret, sizeof(secret), &null_pw, err, sizeof(err)), -1);
	assert_string_equal(err, "bad packet");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_batch),
		cmocka_unit_test(test_rowdesc),
		cmocka_unit_test(test_row_secret),
		cmocka_unit_test(test_row_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

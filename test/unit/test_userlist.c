/* pgcrew — unit tests for userlist.txt (src/config/userlist.c): quoting,
 * comments, duplicates, secret kinds, bad lines with their line number,
 * and the hash table under many users. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/userlist.h"

#ifndef DATADIR
#define DATADIR "test/unit/data"
#endif

#define SCRAM_BOB "SCRAM-SHA-256$4096:cGdjcmV3LXRlc3Qtc2FsdA==$MzstzQCFcfmroCMzYDlXZESKZG61/pd6wjXK9AqAQX0=" \
	":QSG80uoYJH9scTDUDtVmy8XUDmO3RGi4woXfzssxSBM="

static char tmp_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(tmp_path, sizeof(tmp_path), "/tmp/pgcrew-userlist-XXXXXX");
	fd = mkstemp(tmp_path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return unlink(tmp_path);
}

static void write_text(const char *text)
{
	FILE *f = fopen(tmp_path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_good_file(void **state)
{
	struct config_error err = { "" };
	struct userlist *ul = userlist_load(DATADIR "/config/userlist_good.txt", &err);

	(void)state;
	if (!ul)
		fail_msg("%s", err.msg);
	assert_int_equal(userlist_count(ul), 7);
	assert_string_equal(userlist_find(ul, "alice"), "md54a0a68b43b6cd5cf266fa02f196e2371");
	assert_string_equal(userlist_find(ul, "bob"), SCRAM_BOB);
	assert_string_equal(userlist_find(ul, "carol"), "plain secret with spaces");
	assert_string_equal(userlist_find(ul, "say \"hi\""), "pass\"word");
	assert_string_equal(userlist_find(ul, "empty"), "");
	assert_string_equal(userlist_find(ul, "dave"), "second");      /* the last line wins */
	assert_string_equal(userlist_find(ul, "semi;colon"), "#not a comment");
	assert_null(userlist_find(ul, "Alice"));                         /* case-sensitive */
	assert_null(userlist_find(ul, "extra"));
	assert_null(userlist_find(ul, "nobody"));
	userlist_free(ul);
}

static const struct {
	const char *text, *error;
} bad_cases[] = {
	{ "\"a\" \"b\"\nalice \"x\"\n", ":2: expected a double-quoted user name" },
	{ "; c\n\n\"alice\n", ":3: unterminated quoted user name" },
	{ "\"alice\" \"secret\n", ":1: unterminated quoted secret for user 'alice'" },
	{ "\"a\" \"b\"\n\"alice\"\n", ":2: missing double-quoted secret for user 'alice'" },
	{ "\"alice\" secret\n", ":1: missing double-quoted secret for user 'alice'" },
	{ "\"\" \"x\"\n", ":1: empty user name" },
	{ "\"ali\"\"ce\" \"x\"\n\"bob\" \"y\" \n  \"carol\" \"\"\"\n", ":3: unterminated quoted secret for user 'carol'" },
};

static void test_bad_lines(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct config_error err = { "" };
		char want[160];
		struct userlist *ul;

		write_text(bad_cases[i].text);
		ul = userlist_load(tmp_path, &err);
		snprintf(want, sizeof(want), "%s%s", tmp_path, bad_cases[i].error);
		if (ul)
			fail_msg("case %zu accepted", i);
		if (!strstr(err.msg, want))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, want);
	}
}

/* Secrets up to 65,535 bytes are kept whole; a longer one is an error
 * naming file and line, never cut short. */
static void test_long_secret(void **state)
{
	struct config_error err = { "" };
	size_t tlen = SECRET_MAX_LEN + 64;
	char *text = malloc(tlen), *secret = malloc(SECRET_MAX_LEN + 1), want[200];
	struct userlist *ul;

	(void)state;
	memset(secret, 'p', SECRET_MAX_LEN - 1);
	secret[SECRET_MAX_LEN - 1] = 0;
	snprintf(text, tlen, "\"u1\" \"x\"\n\"long\" \"%s\"\n", secret);
	write_text(text);
	ul = userlist_load(tmp_path, &err);
	assert_non_null(ul);
	assert_int_equal(strlen(userlist_find(ul, "long")), SECRET_MAX_LEN - 1);
	userlist_free(ul);
	memset(secret, 'p', SECRET_MAX_LEN);
	secret[SECRET_MAX_LEN] = 0;
	snprintf(text, tlen, "\"u1\" \"x\"\n\"long\" \"%s\"\n", secret);
	write_text(text);
	assert_null(userlist_load(tmp_path, &err));
	snprintf(want, sizeof(want), "%s:2: secret for user 'long' is longer than 65535 bytes", tmp_path);
	assert_string_equal(err.msg, want);
	free(text);
	free(secret);
}

static void test_missing_file(void **state)
{
	struct config_error err = { "" };

	(void)state;
	assert_null(userlist_load(DATADIR "/config/no-such-userlist.txt", &err));
	assert_non_null(strstr(err.msg, "could not open auth_file"));
	assert_non_null(strstr(err.msg, "no-such-userlist.txt"));
}

static void test_empty(void **state)
{
	struct userlist *ul = userlist_new_empty();
	struct config_error err = { "" };

	(void)state;
	assert_int_equal(userlist_count(ul), 0);
	assert_null(userlist_find(ul, "alice"));
	userlist_free(ul);
	write_text("; only comments\n\n# here\n");
	ul = userlist_load(tmp_path, &err);
	assert_non_null(ul);
	assert_int_equal(userlist_count(ul), 0);
	userlist_free(ul);
}

/* Enough users to force several table growths; every one still found. */
static void test_many_users(void **state)
{
	FILE *f = fopen(tmp_path, "w");
	struct config_error err = { "" };
	struct userlist *ul;
	char user[32], secret[32];

	(void)state;
	assert_non_null(f);
	for (int i = 0; i < 5000; i++)
		fprintf(f, "\"user%d\" \"secret%d\"\n", i, i * 7);
	fclose(f);
	ul = userlist_load(tmp_path, &err);
	assert_non_null(ul);
	assert_int_equal(userlist_count(ul), 5000);
	for (int i = 0; i < 5000; i++) {
		snprintf(user, sizeof(user), "user%d", i);
		snprintf(secret, sizeof(secret), "secret%d", i * 7);
		assert_string_equal(userlist_find(ul, user), secret);
	}
	assert_null(userlist_find(ul, "user5000"));
	userlist_free(ul);
}

static const struct {
	const char *secret;
	enum userlist_kind kind;
} kind_cases[] = {
	{ "md54a0a68b43b6cd5cf266fa02f196e2371", USERLIST_MD5 },
	{ "md54A0A68B43B6CD5CF266FA02F196E2371", USERLIST_MD5 },
	{ "md54a0a68b43b6cd5cf266fa02f196e237", USERLIST_PLAIN },      /* 31 hex digits */
	{ "md54a0a68b43b6cd5cf266fa02f196e23712", USERLIST_PLAIN },    /* 33 */
	{ "md54a0a68b43b6cd5cf266fa02f196e237z", USERLIST_PLAIN },     /* not hex */
	{ SCRAM_BOB, USERLIST_SCRAM },
	{ "SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5", USERLIST_SCRAM },
	{ "SCRAM-SHA-256$:c2FsdA==$a2V5:a2V5", USERLIST_PLAIN },       /* no iterations */
	{ "SCRAM-SHA-256$0:c2FsdA==$a2V5:a2V5", USERLIST_PLAIN },
	{ "SCRAM-SHA-256$4096:c2FsdA==$a2V5", USERLIST_PLAIN },        /* no server key */
	{ "SCRAM-SHA-256$4096:c2FsdA==$a2V5:", USERLIST_PLAIN },
	{ "SCRAM-SHA-256$4096:$a2V5:a2V5", USERLIST_PLAIN },           /* no salt */
	{ "SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5 ", USERLIST_PLAIN },
	{ "scram-sha-256$4096:c2FsdA==$a2V5:a2V5", USERLIST_PLAIN },
	{ "", USERLIST_PLAIN },
	{ "hunter2", USERLIST_PLAIN },
};

static void test_secret_kind(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kind_cases) / sizeof(kind_cases[0]); i++) {
		enum userlist_kind k = userlist_secret_kind(kind_cases[i].secret);

		if (k != kind_cases[i].kind)
			fail_msg("'%s': got %s want %s", kind_cases[i].secret, userlist_kind_name(k),
				 userlist_kind_name(kind_cases[i].kind));
	}
	assert_string_equal(userlist_kind_name(USERLIST_SCRAM), "scram-sha-256");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_long_secret),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_many_users),
		cmocka_unit_test(test_secret_kind),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

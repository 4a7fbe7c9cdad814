/* pgcrew — unit tests for auth/md5: PostgreSQL's md5 secret and salted
 * response, and checking a client's response against plain/md5/SCRAM secrets.
 * Expected values come from Python's hashlib (shown next to each). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth/crypto.h"
#include "auth/md5.h"

/* 'md5' + hashlib.md5(b'passworduser').hexdigest() */
#define PW_HASH "md54d45974e13472b5a0be3533de4666414"
/* 'md5' + hashlib.md5(PW_HASH[3:].encode() + bytes([1,2,3,4])).hexdigest() */
#define SALTED  "md5a3576f1ae039b8996bc4fc2720f9c71a"

static const uint8_t salt[4] = { 1, 2, 3, 4 };

static int setup(void **state)
{
	(void)state;
	return crypto_init();
}

static int teardown(void **state)
{
	(void)state;
	crypto_shutdown();
	return 0;
}

static void test_password_hash(void **state)
{
	char out[36];

	(void)state;
	md5_password_hash("user", "password", out);
	assert_string_equal(out, PW_HASH);
	md5_password_hash("other", "password", out);
	assert_string_not_equal(out, PW_HASH);
}

static void test_salted(void **state)
{
	static const uint8_t other_salt[4] = { 4, 3, 2, 1 };
	char out[36];

	(void)state;
	md5_salted(PW_HASH, salt, out);
	assert_string_equal(out, SALTED);
	md5_salted(PW_HASH, other_salt, out);
	assert_string_not_equal(out, SALTED);
	md5_salted("md5short", salt, out);          /* malformed secret */
	assert_string_equal(out, "");
}

static void test_is_secret(void **state)
{
	(void)state;
	assert_true(md5_is_secret(PW_HASH));
	assert_false(md5_is_secret("password"));
	assert_false(md5_is_secret("md5zz5974e13472b5a0be3533de4666414"));   /* not hex */
	assert_false(md5_is_secret(PW_HASH "0"));
	assert_false(md5_is_secret(NULL));
}

static void test_check_client(void **state)
{
	(void)state;
	/* Plaintext and md5 userlist secrets both accept the right answer. */
	assert_true(md5_check_client("password", "user", salt, SALTED));
	assert_true(md5_check_client(PW_HASH, "user", salt, SALTED));
	/* Wrong password, wrong user, wrong salt, wrong or mangled response. */
	assert_false(md5_check_client("passwore", "user", salt, SALTED));
	assert_false(md5_check_client("password", "usex", salt, SALTED));
	assert_false(md5_check_client("password", "user", (const uint8_t *)"\1\2\3\5", SALTED));
	assert_false(md5_check_client("password", "user", salt, "md5a3576f1ae039b8996bc4fc2720f9c71b"));
	assert_false(md5_check_client("password", "user", salt, SALTED "0"));
	assert_false(md5_check_client("password", "user", salt, "md5"));
	assert_false(md5_check_client("password", "user", salt, ""));
	assert_false(md5_check_client("password", "user", salt, NULL));
	/* The client sends the md5 secret itself instead of the salted answer. */
	assert_false(md5_check_client("password", "user", salt, PW_HASH));
	/* Secrets that cannot answer an md5 challenge. */
	assert_false(md5_check_client("", "user", salt, SALTED));
	assert_false(md5_check_client(NULL, "user", salt, SALTED));
	assert_false(md5_check_client("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$"
				      "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:"
				      "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=", "user", salt, SALTED));
}

/* A SCRAM verifier is never used as if it were a plaintext password. */
static void test_check_client_verifier_not_plaintext(void **state)
{
	const char *v = "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$"
			"WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=";
	char hash[36], resp[36];

	(void)state;
	md5_password_hash("user", v, hash);
	md5_salted(hash, salt, resp);
	assert_false(md5_check_client(v, "user", salt, resp));
}

/* A plaintext password that merely starts like a verifier is still plaintext. */
static void test_check_client_scram_lookalike(void **state)
{
	const char *pw = "SCRAM-SHA-256$not-a-verifier";
	char hash[36], resp[36];

	(void)state;
	md5_password_hash("user", pw, hash);
	md5_salted(hash, salt, resp);
	assert_true(md5_check_client(pw, "user", salt, resp));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_password_hash),
		cmocka_unit_test(test_salted),
		cmocka_unit_test(test_is_secret),
		cmocka_unit_test(test_check_client),
		cmocka_unit_test(test_check_client_verifier_not_plaintext),
		cmocka_unit_test(test_check_client_scram_lookalike),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

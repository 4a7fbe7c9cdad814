/* pgcrew — unit tests for auth/authcache: answers within their TTL, expiry,
 * "no such user" answers, replacement, eviction of the oldest when full,
 * clearing (RELOAD), and keys that keep their fields apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/authcache.h"

#define SEC ((usec_t)1000000)

static void key(char *buf, const char *user)
{
	assert_true(authcache_key(buf, AUTHCACHE_KEY_MAX, "db", "auth", "SELECT 1", user));
}

static void test_hit_within_ttl_then_expiry(void **state)
{
	struct authcache *ac = authcache_new(8);
	char k[AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX];

	(void)state;
	key(k, "alice");
	assert_int_equal(authcache_get(ac, k, 100 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_MISS);
	authcache_put(ac, k, "md5abc", 100 * SEC);
	assert_int_equal(authcache_get(ac, k, 159 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_FOUND);
	assert_string_equal(secret, "md5abc");
	/* At the TTL the answer is gone, and stays gone. */
	assert_int_equal(authcache_get(ac, k, 160 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_MISS);
	assert_int_equal(authcache_count(ac), 0);
	assert_int_equal(authcache_get(ac, k, 101 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_MISS);
	authcache_free(ac);
}

static void test_ttl_zero_disables(void **state)
{
	struct authcache *ac = authcache_new(8);
	char k[AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX];

	(void)state;
	key(k, "alice");
	authcache_put(ac, k, "pw", 5 * SEC);
	assert_int_equal(authcache_get(ac, k, 5 * SEC, 0, secret, sizeof(secret)), AUTHCACHE_MISS);
	authcache_free(ac);
}

static void test_no_user_and_null_password(void **state)
{
	struct authcache *ac = authcache_new(8);
	char k1[AUTHCACHE_KEY_MAX], k2[AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX] = "junk";

	(void)state;
	key(k1, "ghost");
	key(k2, "nopw");
	authcache_put(ac, k1, NULL, SEC);
	authcache_put(ac, k2, "", SEC);
	assert_int_equal(authcache_get(ac, k1, 2 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_NO_USER);
	assert_int_equal(authcache_get(ac, k2, 2 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_FOUND);
	assert_string_equal(secret, "");
	authcache_free(ac);
}

static void test_replace(void **state)
{
	struct authcache *ac = authcache_new(8);
	char k[AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX];

	(void)state;
	key(k, "alice");
	authcache_put(ac, k, "old", SEC);
	authcache_put(ac, k, "new", 2 * SEC);
	assert_int_equal(authcache_count(ac), 1);
	/* The replacement's own age counts: alive at 2 s + 59 s. */
	assert_int_equal(authcache_get(ac, k, 61 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_FOUND);
	assert_string_equal(secret, "new");
	authcache_free(ac);
}

/* The longest secret (65,535 bytes) comes back whole. */
static void test_long_secret(void **state)
{
	struct authcache *ac = authcache_new(8);
	char k[AUTHCACHE_KEY_MAX];
	char *in = malloc(AUTHCACHE_SECRET_MAX), *out = malloc(AUTHCACHE_SECRET_MAX);

	(void)state;
	memset(in, 's', AUTHCACHE_SECRET_MAX - 1);
	in[AUTHCACHE_SECRET_MAX - 1] = 0;
	key(k, "alice");
	authcache_put(ac, k, in, SEC);
	assert_int_equal(authcache_get(ac, k, 2 * SEC, 60 * SEC, out, AUTHCACHE_SECRET_MAX), AUTHCACHE_FOUND);
	assert_int_equal(strlen(out), AUTHCACHE_SECRET_MAX - 1);
	assert_string_equal(out, in);
	authcache_free(ac);
	free(in);
	free(out);
}

static void test_oldest_evicted_when_full(void **state)
{
	struct authcache *ac = authcache_new(3);
	char k[5][AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX], name[8];

	(void)state;
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "u%d", i);
		key(k[i], name);
		authcache_put(ac, k[i], name, (usec_t)(i + 1) * SEC);
		assert_true(authcache_count(ac) <= 3);
	}
	assert_int_equal(authcache_count(ac), 3);
	assert_int_equal(authcache_get(ac, k[0], 6 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_MISS);
	assert_int_equal(authcache_get(ac, k[1], 6 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_MISS);
	for (int i = 2; i < 5; i++) {
		assert_int_equal(authcache_get(ac, k[i], 6 * SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_FOUND);
		snprintf(name, sizeof(name), "u%d", i);
		assert_string_equal(secret, name);
	}
	authcache_free(ac);
}

static void test_clear(void **state)
{
	struct authcache *ac = authcache_new(100);
	char k[AUTHCACHE_KEY_MAX], secret[AUTHCACHE_SECRET_MAX], name[16];

	(void)state;
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "user%d", i);
		key(k, name);
		authcache_put(ac, k, "pw", SEC);
	}
	assert_int_equal(authcache_clear(ac), 50);
	assert_int_equal(authcache_count(ac), 0);
	assert_int_equal(authcache_get(ac, k, SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_MISS);
	authcache_put(ac, k, "again", SEC);
	assert_int_equal(authcache_get(ac, k, SEC, 60 * SEC, secret, sizeof(secret)), AUTHCACHE_FOUND);
	authcache_free(ac);
}

static void test_keys_separate_fields(void **state)
{
	char a[AUTHCACHE_KEY_MAX], b[AUTHCACHE_KEY_MAX], c[AUTHCACHE_KEY_MAX], d[AUTHCACHE_KEY_MAX];
	char big[400];

	(void)state;
	assert_true(authcache_key(a, sizeof(a), "db", "auth", "SELECT 1", "alice"));
	assert_true(authcache_key(b, sizeof(b), "db", "auth", "SELECT 2", "alice"));
	assert_true(authcache_key(c, sizeof(c), "db2", "auth", "SELECT 1", "alice"));
	assert_true(authcache_key(d, sizeof(d), "db", "auth2", "SELECT 1", "alice"));
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(a, d);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_false(authcache_key(a, sizeof(a), "db", "auth", "q", big));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit_within_ttl_then_expiry),
		cmocka_unit_test(test_ttl_zero_disables),
		cmocka_unit_test(test_no_user_and_null_password),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_long_secret),
		cmocka_unit_test(test_oldest_evicted_when_full),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_keys_separate_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

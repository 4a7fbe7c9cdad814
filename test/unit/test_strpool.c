/* pgcrew — unit tests for strpool: equal strings share one id, counts
 * follow references, the last release frees (the tables empty and are
 * freed, so ASan sees no leak), released ids are reused, growth past the
 * initial tables keeps every string findable, and varcache values come
 * from the pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>

#include "strpool.h"
#include "varcache.h"

static void test_equal_strings_share(void **state)
{
	(void)state;
	char buf[16];
	strcpy(buf, "UTF8");
	uint32_t a = strpool_intern("UTF8"), b = strpool_intern(buf);
	assert_int_not_equal(a, 0);
	assert_int_equal(a, b);
	assert_ptr_not_equal(strpool_str(a), buf);
	assert_string_equal(strpool_str(a), "UTF8");
	uint32_t c = strpool_intern("LATIN1");
	assert_int_not_equal(a, c);
	assert_int_equal(strpool_count(), 2);
	strpool_release(a);
	assert_int_equal(strpool_count(), 2);      /* b still holds it */
	assert_string_equal(strpool_str(b), "UTF8");
	strpool_release(b);
	assert_int_equal(strpool_count(), 1);
	strpool_release(c);
	assert_int_equal(strpool_count(), 0);
	strpool_release(0);
	strpool_retain(0);
	assert_null(strpool_str(0));
}

static void test_retain_reuse_and_empty_string(void **state)
{
	(void)state;
	uint32_t keep = strpool_intern("keep");
	uint32_t e = strpool_intern("");
	assert_string_equal(strpool_str(e), "");
	strpool_retain(e);
	strpool_release(e);
	assert_int_equal(strpool_count(), 2);
	strpool_release(e);
	assert_int_equal(strpool_count(), 1);
	uint32_t again = strpool_intern("other");
	assert_int_equal(again, e);                /* the freed id came back */
	assert_string_equal(strpool_str(again), "other");
	assert_string_equal(strpool_str(keep), "keep");
	strpool_release(again);
	strpool_release(keep);
	assert_int_equal(strpool_count(), 0);
}

static void test_growth_keeps_everything(void **state)
{
	(void)state;
	enum { N = 5000 };
	static uint32_t id[N];
	char s[32];
	for (int i = 0; i < N; i++) {
		snprintf(s, sizeof(s), "value-%d", i);
		id[i] = strpool_intern(s);
	}
	assert_int_equal(strpool_count(), N);
	for (int i = 0; i < N; i++) {
		snprintf(s, sizeof(s), "value-%d", i);
		uint32_t q = strpool_intern(s);
		assert_int_equal(q, id[i]);
		assert_string_equal(strpool_str(q), s);
		strpool_release(q);
	}
	for (int i = N - 1; i >= 0; i -= 2)      /* out of order */
		strpool_release(id[i]);
	for (int i = 0; i < N; i += 2) {
		snprintf(s, sizeof(s), "value-%d", i);
		assert_string_equal(strpool_str(id[i]), s);
	}
	for (int i = N - 2; i >= 0; i -= 2)
		strpool_release(id[i]);
	assert_int_equal(strpool_count(), 0);
}

static void test_varcache_values_are_pooled(void **state)
{
	(void)state;
	struct varcache a, b;
	varcache_set_tracked(NULL);
	varcache_init(&a);
	varcache_init(&b);
	int enc = varcache_lookup("client_encoding");
	assert_true(varcache_set(&a, "client_encoding", "UTF8"));
	assert_true(varcache_set(&b, "client_encoding", "UTF8"));
	assert_ptr_equal(varcache_get(&a, enc), varcache_get(&b, enc));
	assert_int_equal(strpool_count(), 1);
	/* Setting a value from the cache's own string is safe. */
	assert_true(varcache_set(&a, "client_encoding", varcache_get(&a, enc)));
	assert_string_equal(varcache_get(&a, enc), "UTF8");
	varcache_copy(&b, &a);
	assert_true(varcache_set(&a, "client_encoding", "SQL_ASCII"));
	assert_string_equal(varcache_get(&b, enc), "UTF8");
	assert_int_equal(strpool_count(), 2);
	varcache_clear(&a);
	varcache_clear(&b);
	assert_int_equal(strpool_count(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equal_strings_share),
		cmocka_unit_test(test_retain_reuse_and_empty_string),
		cmocka_unit_test(test_growth_keeps_everything),
		cmocka_unit_test(test_varcache_values_are_pooled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

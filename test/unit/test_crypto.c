/* pgcrew — unit tests for auth/crypto: HMAC-SHA-256 (RFC 4231), SHA-256, MD5,
 * PBKDF2-HMAC-SHA-256 (values from Python's hashlib.pbkdf2_hmac), base64
 * (RFC 4648), random bytes (drawn in blocks: distinct across refills and
 * across fork() once the child re-inits) and failure before crypto_init(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth/crypto.h"

static void to_hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

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

static void check_hmac(const uint8_t *key, size_t keylen, const void *data, size_t len, const char *hex)
{
	uint8_t mac[32];
	char got[65];

	assert_true(crypto_hmac_sha256(key, keylen, data, len, mac));
	to_hex(mac, 32, got);
	assert_string_equal(got, hex);
}

/* RFC 4231 test cases 1, 2, 3, 4, 6, 7 (case 5 is a truncated MAC). */
static void test_hmac_rfc4231(void **state)
{
	uint8_t k0b[20], kaa[131], k4[25], dd[50], cd[50];
	const char *t6 = "Test Using Larger Than Block-Size Key - Hash Key First";
	const char *t7 = "This is a test using a larger than block-size key and a larger than "
			 "block-size data. The key needs to be hashed before being used by the HMAC algorithm.";

	(void)state;
	memset(k0b, 0x0b, sizeof(k0b));
	memset(kaa, 0xaa, sizeof(kaa));
	memset(dd, 0xdd, sizeof(dd));
	memset(cd, 0xcd, sizeof(cd));
	for (int i = 0; i < 25; i++)
		k4[i] = (uint8_t)(i + 1);
	check_hmac(k0b, 20, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	check_hmac((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28,
		   "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	check_hmac(kaa, 20, dd, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
	check_hmac(k4, 25, cd, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
	check_hmac(kaa, 131, t6, strlen(t6), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	check_hmac(kaa, 131, t7, strlen(t7), "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
	/* Either side of the block size: a 64-byte key is used as is, a 65-byte
	 * one hashed first (values from Python's hmac module). */
	check_hmac(kaa, 64, "Hi There", 8, "ebef34e13d0a0fe04593d043bc7a865106db0604211d404c18206d862e5d7852");
	check_hmac(kaa, 65, "Hi There", 8, "00af6c42340b99e2e1d9a1cdf1547be431fe2e9bab3215c68d013ba858891927");
}

/* The iovec form gives the same MAC as the concatenation. */
static void test_hmac_iov(void **state)
{
	uint8_t a[32], b[32];
	struct iovec iov[3] = {
		{ .iov_base = "what do ya ", .iov_len = 11 },
		{ .iov_base = "", .iov_len = 0 },
		{ .iov_base = "want for nothing?", .iov_len = 17 },
	};

	(void)state;
	assert_true(crypto_hmac_sha256_iov("Jefe", 4, iov, 3, a));
	assert_true(crypto_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, b));
	assert_memory_equal(a, b, 32);
	/* Empty key is valid HMAC, and differs from another key. */
	assert_true(crypto_hmac_sha256(NULL, 0, "x", 1, a));
	assert_true(crypto_hmac_sha256("k", 1, "x", 1, b));
	assert_memory_not_equal(a, b, 32);
}

static void test_digests(void **state)
{
	uint8_t d[32];
	char hex[65], md5[33];

	(void)state;
	assert_true(crypto_sha256("abc", 3, d));
	to_hex(d, 32, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_true(crypto_md5_hex("abc", 3, md5));
	assert_string_equal(md5, "900150983cd24fb0d6963f7d28e17f72");
	assert_true(crypto_md5_hex("", 0, md5));
	assert_string_equal(md5, "d41d8cd98f00b204e9800998ecf8427e");
}

static void check_pbkdf2(const char *pass, const char *salt, int iter, const char *hex)
{
	uint8_t out[32];
	char got[65];

	assert_true(crypto_pbkdf2_sha256(pass, strlen(pass), (const uint8_t *)salt, strlen(salt), iter, out));
	to_hex(out, 32, got);
	assert_string_equal(got, hex);
}

/* Expected values: hashlib.pbkdf2_hmac('sha256', pass, salt, iter).hex() */
static void test_pbkdf2(void **state)
{
	uint8_t out[32];

	(void)state;
	check_pbkdf2("password", "salt", 1, "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b");
	check_pbkdf2("password", "salt", 2, "ae4d0c95af6b46d32d0adff928f06dd02a303f8ef3c251dfd6e2d85a95474c43");
	check_pbkdf2("password", "salt", 4096, "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a");
	check_pbkdf2("", "salt", 3, "5ddf839afa2d5fb4be56e1a0f48917617559bef61ec122bfca1c7f75ac8f401d");
	assert_false(crypto_pbkdf2_sha256("p", 1, (const uint8_t *)"s", 1, 0, out));
	assert_false(crypto_pbkdf2_sha256("p", 1, (const uint8_t *)"s", 1, -5, out));
}

static void test_random(void **state)
{
	uint8_t a[32], b[32];

	(void)state;
	assert_true(crypto_random(a, sizeof(a)));
	assert_true(crypto_random(b, sizeof(b)));
	assert_memory_not_equal(a, b, sizeof(a));
}

/* Small draws come from a block: none repeats, across several refills, and
 * a draw bigger than the block still works. */
static void test_random_slices(void **state)
{
	uint8_t got[200][26], big[4096];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(got); i++)
		assert_true(crypto_random(got[i], sizeof(got[i])));
	for (size_t i = 0; i < ARRAY_SIZE(got); i++) {
		for (size_t j = i + 1; j < ARRAY_SIZE(got); j++)
			assert_memory_not_equal(got[i], got[j], sizeof(got[i]));
	}
	assert_true(crypto_random(big, sizeof(big)));
	assert_memory_not_equal(big, big + 2048, 2048);
}

/* A worker is a fork of a process that may hold drawn-ahead bytes: after its
 * crypto_init() it must not hand out the ones its parent hands out next. */
static void test_random_after_fork(void **state)
{
	uint8_t parent[16], child[16];
	int fds[2], status;
	pid_t pid;

	(void)state;
	assert_true(crypto_random(parent, sizeof(parent)));   /* the block is filled */
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		bool ok = crypto_init() == 0 && crypto_random(child, sizeof(child));

		ok = ok && write(fds[1], child, sizeof(child)) == (ssize_t)sizeof(child);
		_exit(ok ? 0 : 1);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], child, sizeof(child)), (ssize_t)sizeof(child));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(crypto_random(parent, sizeof(parent)));
	assert_memory_not_equal(parent, child, sizeof(parent));
}

static void test_b64_vectors(void **state)
{
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const enc[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
	char out[16];
	uint8_t dec[16];

	(void)state;
	for (size_t i = 0; i < 7; i++) {
		size_t n = crypto_b64_encode((const uint8_t *)plain[i], strlen(plain[i]), out, sizeof(out));

		assert_int_equal(n, strlen(enc[i]));
		assert_string_equal(out, enc[i]);
		assert_int_equal(crypto_b64_decode(enc[i], strlen(enc[i]), dec, sizeof(dec)), strlen(plain[i]));
		assert_memory_equal(dec, plain[i], strlen(plain[i]));
	}
}

static void test_b64_round_trip(void **state)
{
	uint8_t src[100], dec[100];
	char enc[CRYPTO_B64_ENC_LEN(100) + 1];

	(void)state;
	assert_true(crypto_random(src, sizeof(src)));
	for (size_t len = 0; len <= sizeof(src); len++) {
		size_t n = crypto_b64_encode(src, len, enc, sizeof(enc));

		assert_int_equal(n, CRYPTO_B64_ENC_LEN(len));
		assert_int_equal(crypto_b64_decode(enc, n, dec, len), (int)len);
		assert_memory_equal(dec, src, len);
	}
}

static void test_b64_bad(void **state)
{
	static const char *const bad[] = {
		"Zg=", "Z===", "====", "Zg=a", "=g==", "Zm9v!A==", "Zg==Zg==", "Zm 9", "Zm9\n",
		"Zm9v\0AAA", "Zh==", "Zm9=",     /* unused bits set */
	};
	uint8_t dec[16];
	char out[8];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(crypto_b64_decode(bad[i], i == 9 ? 8 : strlen(bad[i]), dec, sizeof(dec)), -1);
	/* Too long for the destination. */
	assert_int_equal(crypto_b64_decode("Zm9vYmFy", 8, dec, 5), -1);
	assert_int_equal(crypto_b64_decode("Zm9vYmFy", 8, dec, 6), 6);
	/* Encode into too small a buffer: "" and 0, never an overflow. */
	memset(out, 'x', sizeof(out));
	assert_int_equal(crypto_b64_encode((const uint8_t *)"foobar", 6, out, 8), 0);
	assert_string_equal(out, "");
	assert_int_equal(crypto_b64_encode((const uint8_t *)"foobar", 6, out, 0), 0);
	assert_int_equal(out[1], 'x');
}

/* Before init everything fails cleanly; re-init (as after fork) works. */
static void test_uninitialised_and_reinit(void **state)
{
	uint8_t d[32];
	char md5[33];

	(void)state;
	crypto_shutdown();
	assert_false(crypto_hmac_sha256("k", 1, "x", 1, d));
	assert_false(crypto_sha256("x", 1, d));
	assert_false(crypto_md5_hex("x", 1, md5));
	assert_string_equal(md5, "");
	assert_false(crypto_pbkdf2_sha256("p", 1, (const uint8_t *)"s", 1, 1, d));
	assert_int_equal(crypto_init(), 0);
	assert_int_equal(crypto_init(), 0);   /* second call frees and refetches */
	assert_true(crypto_sha256("x", 1, d));
	assert_true(crypto_hmac_sha256("k", 1, "x", 1, d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_hmac_iov),
		cmocka_unit_test(test_digests),
		cmocka_unit_test(test_pbkdf2),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_random_slices),
		cmocka_unit_test(test_random_after_fork),
		cmocka_unit_test(test_b64_vectors),
		cmocka_unit_test(test_b64_round_trip),
		cmocka_unit_test(test_b64_bad),
		cmocka_unit_test(test_uninitialised_and_reinit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

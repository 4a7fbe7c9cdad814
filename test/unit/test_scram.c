/* pgcrew — unit tests for auth/scram: RFC 7677 example in both directions,
 * our client against our server (plaintext, verifier, pass-through, mock),
 * verifier parsing, the derived-key cache, and hostile messages on every
 * step, and SCRAM-SHA-256-PLUS channel binding (negotiation and the c= check).
 * The verifier for "pencil" was computed with Python's hashlib/hmac. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "auth/crypto.h"
#include "auth/scram.h"

#define RFC_CNONCE "rOprNGfwEbeRWgbNEkqO"
#define RFC_SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define RFC_SALT_B64 "W22ZaJ0SNY7soEsUEjb6gQ=="
#define RFC_CLIENT_FIRST "n,,n=user,r=" RFC_CNONCE
#define RFC_SERVER_FIRST "r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT_B64 ",i=4096"
#define RFC_CLIENT_FINAL "c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define RFC_SERVER_FINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
/* StoredKey/ServerKey of "pencil" with the RFC salt and 4096 iterations. */
#define PENCIL_VERIFIER "SCRAM-SHA-256$4096:" RFC_SALT_B64 \
	"$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
/* ClientKey: hmac.new(salted_password, b'Client Key', 'sha256') */
static const uint8_t pencil_client_key[32] = {
	0xa6, 0x0f, 0xc9, 0x23, 0xd6, 0x7e, 0x86, 0x44, 0xa9, 0x2d, 0x16, 0xb9, 0x6e, 0xda, 0x5e, 0xf4,
	0x65, 0x6b, 0x0c, 0x72, 0x5c, 0x48, 0x43, 0x74, 0xbe, 0x25, 0x53, 0x55, 0x76, 0x99, 0x6e, 0x8b,
};

static uint8_t rfc_salt[16];

static int setup(void **state)
{
	(void)state;
	if (crypto_init() != 0)
		return -1;
	return crypto_b64_decode(RFC_SALT_B64, strlen(RFC_SALT_B64), rfc_salt, sizeof(rfc_salt)) == 16 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	scram_cache_clear();
	crypto_shutdown();
	return 0;
}

/* Each test starts with random nonces. */
static int reset_hooks(void **state)
{
	(void)state;
	scram_server_set_test_nonce(NULL);
	scram_client_set_test_nonce(NULL, NULL);
	return 0;
}

static int srv_first(struct scram_server *st, const struct scram_secret *sec, bool mock, const char *msg,
		     char *out, size_t outlen, const char **err)
{
	size_t n = 0;

	return scram_server_first(st, sec, mock, msg, strlen(msg), out, outlen, &n, err);
}

static int srv_final(struct scram_server *st, const char *msg, char *out, size_t outlen, const char **err)
{
	size_t n = 0;

	return scram_server_final(st, msg, strlen(msg), out, outlen, &n, err);
}

static void pencil_secret(struct scram_secret *sec)
{
	assert_true(scram_secret_from_password("pencil", rfc_salt, sizeof(rfc_salt), 4096, sec));
}

static void test_rfc7677_server(void **state)
{
	struct scram_server st;
	struct scram_secret sec;
	char out[600];
	size_t n = 0;
	const char *err = NULL;

	(void)state;
	pencil_secret(&sec);
	scram_server_set_test_nonce(RFC_SNONCE);
	assert_int_equal(scram_server_first(&st, &sec, false, RFC_CLIENT_FIRST, strlen(RFC_CLIENT_FIRST),
					    out, sizeof(out), &n, &err), 0);
	assert_string_equal(out, RFC_SERVER_FIRST);
	assert_int_equal(n, strlen(RFC_SERVER_FIRST));
	assert_string_equal(scram_server_state_name(st.state), "first_sent");
	assert_int_equal(srv_final(&st, RFC_CLIENT_FINAL, out, sizeof(out), &err), 0);
	assert_string_equal(out, RFC_SERVER_FINAL);
	assert_true(st.got_client_key);
	assert_memory_equal(st.client_key, pencil_client_key, 32);
	assert_true(st.secret.has_client_key);
	assert_string_equal(scram_server_state_name(st.state), "done");
	/* A second final on a finished exchange is refused. */
	assert_int_equal(srv_final(&st, RFC_CLIENT_FINAL, out, sizeof(out), &err), -1);
}

static void test_rfc7677_server_from_verifier(void **state)
{
	struct scram_server st;
	struct scram_secret sec;
	char out[600];
	const char *err = NULL;

	(void)state;
	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &sec));
	assert_false(sec.has_client_key);
	scram_server_set_test_nonce(RFC_SNONCE);
	assert_int_equal(srv_first(&st, &sec, false, RFC_CLIENT_FIRST, out, sizeof(out), &err), 0);
	assert_string_equal(out, RFC_SERVER_FIRST);
	assert_int_equal(srv_final(&st, RFC_CLIENT_FINAL, out, sizeof(out), &err), 0);
	assert_string_equal(out, RFC_SERVER_FINAL);
	assert_memory_equal(st.client_key, pencil_client_key, 32);
}

static void test_rfc7677_client(void **state)
{
	struct scram_client cl;
	char out[600];
	size_t n = 0;
	const char *err = NULL;

	(void)state;
	scram_client_set_test_nonce(RFC_CNONCE, "user");
	assert_int_equal(scram_client_first(&cl, out, sizeof(out), &n), 0);
	assert_string_equal(out, RFC_CLIENT_FIRST);
	assert_int_equal(n, strlen(RFC_CLIENT_FIRST));
	assert_int_equal(scram_client_final(&cl, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST), "pencil", NULL,
					    out, sizeof(out), &n, &err), 0);
	assert_string_equal(out, RFC_CLIENT_FINAL);
	assert_int_equal(scram_client_verify(&cl, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err), 0);
	assert_string_equal(scram_client_state_name(cl.state), "done");
}

/* Pass-through with the RFC values: ClientKey alone reproduces the proof. */
static void test_rfc7677_client_pass_through(void **state)
{
	struct scram_client cl;
	struct scram_secret sec;
	char out[600];
	size_t n = 0;
	const char *err = NULL;

	(void)state;
	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &sec));
	memcpy(sec.client_key, pencil_client_key, 32);
	sec.has_client_key = true;
	scram_client_set_test_nonce(RFC_CNONCE, "user");
	assert_int_equal(scram_client_first(&cl, out, sizeof(out), &n), 0);
	assert_int_equal(scram_client_final(&cl, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST), NULL, &sec,
					    out, sizeof(out), &n, &err), 0);
	assert_string_equal(out, RFC_CLIENT_FINAL);
	assert_int_equal(scram_client_verify(&cl, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err), 0);
}

/* Runs our client against our server; returns the server_final result and
 * leaves the server state in *st. */
static int exchange(struct scram_server *st, const struct scram_secret *server_secret, bool mock,
		    const char *password, const struct scram_secret *client_secret)
{
	struct scram_client cl;
	char c1[256], s1[600], c2[600], s2[128];
	size_t n1 = 0, n2 = 0, n3 = 0, n4 = 0;
	const char *err = NULL;
	int rc;

	assert_int_equal(scram_client_first(&cl, c1, sizeof(c1), &n1), 0);
	assert_memory_equal(c1, "n,,n=,r=", 8);
	assert_int_equal(scram_server_first(st, server_secret, mock, c1, n1, s1, sizeof(s1), &n2, &err), 0);
	assert_int_equal(scram_client_final(&cl, s1, n2, password, client_secret, c2, sizeof(c2), &n3, &err), 0);
	rc = scram_server_final(st, c2, n3, s2, sizeof(s2), &n4, &err);
	if (rc == 0)
		assert_int_equal(scram_client_verify(&cl, s2, n4, &err), 0);
	else
		assert_string_equal(err, "SCRAM authentication failed");
	return rc;
}

static void test_end_to_end_plaintext(void **state)
{
	struct scram_server st;
	struct scram_secret sec;

	(void)state;
	assert_true(scram_secret_for_user("alice", "s3cret", 4096, &sec));
	assert_int_equal(sec.salt_len, SCRAM_DEFAULT_SALT_LEN);
	assert_int_equal(exchange(&st, &sec, false, "s3cret", NULL), 0);
	assert_true(st.got_client_key);
	assert_memory_equal(st.client_key, sec.client_key, 32);
	assert_int_equal(exchange(&st, &sec, false, "s3creT", NULL), -2);
	assert_false(st.got_client_key);
	/* Non-ASCII passwords are used as raw bytes on both sides. */
	assert_true(scram_secret_for_user("bob", "p\xc3\xa4ssw\xc3\xb6rd", 4096, &sec));
	assert_int_equal(exchange(&st, &sec, false, "p\xc3\xa4ssw\xc3\xb6rd", NULL), 0);
	assert_int_equal(exchange(&st, &sec, false, "p\xc3\xa4ssw\xc3\xb6rD", NULL), -2);
}

static void test_end_to_end_verifier_and_pass_through(void **state)
{
	struct scram_server st, st2;
	struct scram_secret verifier, pass;

	(void)state;
	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &verifier));
	/* Client-facing: the client proves "pencil"; we recover its ClientKey. */
	assert_int_equal(exchange(&st, &verifier, false, "pencil", NULL), 0);
	assert_true(st.got_client_key);
	assert_memory_equal(st.client_key, pencil_client_key, 32);
	pass = st.secret;
	assert_true(pass.has_client_key);
	/* Server-facing: no password, only the recovered key; the "PostgreSQL"
	 * side holds only the verifier and accepts. */
	assert_int_equal(exchange(&st2, &verifier, false, NULL, &pass), 0);
	/* A tampered ClientKey is rejected by that server. */
	pass.client_key[0] ^= 1;
	assert_int_equal(exchange(&st2, &verifier, false, NULL, &pass), -2);
}

static void test_pass_through_mismatch(void **state)
{
	struct scram_server st;
	struct scram_client cl;
	struct scram_secret verifier, other;
	char c1[256], s1[600], c2[600];
	size_t n1 = 0, n2 = 0, n3 = 0;
	const char *err = NULL;

	(void)state;
	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &verifier));
	/* A key for the same password but another iteration count. */
	assert_true(scram_secret_from_password("pencil", rfc_salt, sizeof(rfc_salt), 4097, &other));
	assert_int_equal(scram_client_first(&cl, c1, sizeof(c1), &n1), 0);
	assert_int_equal(scram_server_first(&st, &verifier, false, c1, n1, s1, sizeof(s1), &n2, &err), 0);
	assert_int_equal(scram_client_final(&cl, s1, n2, NULL, &other, c2, sizeof(c2), &n3, &err), -1);
	assert_string_equal(err, "SCRAM pass-through: salt/iterations do not match the server's");
	/* Same salt bytes, but the secret's salt is one byte shorter. */
	other = verifier;
	memcpy(other.client_key, pencil_client_key, 32);
	other.has_client_key = true;
	other.salt_len--;
	assert_int_equal(scram_client_first(&cl, c1, sizeof(c1), &n1), 0);
	assert_int_equal(scram_server_first(&st, &verifier, false, c1, n1, s1, sizeof(s1), &n2, &err), 0);
	assert_int_equal(scram_client_final(&cl, s1, n2, NULL, &other, c2, sizeof(c2), &n3, &err), -1);
	/* Different salt byte. */
	other.salt_len++;
	other.salt[3] ^= 1;
	assert_int_equal(scram_client_first(&cl, c1, sizeof(c1), &n1), 0);
	assert_int_equal(scram_server_first(&st, &verifier, false, c1, n1, s1, sizeof(s1), &n2, &err), 0);
	assert_int_equal(scram_client_final(&cl, s1, n2, NULL, &other, c2, sizeof(c2), &n3, &err), -1);
	/* No credential at all. */
	assert_int_equal(scram_client_first(&cl, c1, sizeof(c1), &n1), 0);
	assert_int_equal(scram_server_first(&st, &verifier, false, c1, n1, s1, sizeof(s1), &n2, &err), 0);
	assert_int_equal(scram_client_final(&cl, s1, n2, NULL, &verifier, c2, sizeof(c2), &n3, &err), -1);
}

/* Mock: unknown users look like plaintext users and always fail. */
static void test_mock(void **state)
{
	struct scram_server st;
	struct scram_secret mock, mock2, plain, real;

	(void)state;
	scram_mock_secret("ghost", 4096, &mock);
	scram_mock_secret("ghost", 4096, &mock2);
	assert_memory_equal(&mock, &mock2, sizeof(mock));
	assert_true(scram_secret_for_user("ghost", "whatever", 4096, &plain));
	assert_int_equal(mock.salt_len, plain.salt_len);
	assert_memory_equal(mock.salt, plain.salt, mock.salt_len);
	scram_mock_secret("ghost2", 4096, &mock2);
	assert_memory_not_equal(mock.salt, mock2.salt, mock.salt_len);
	assert_int_equal(exchange(&st, &mock, true, "whatever", NULL), -2);
	/* Even a right proof fails when the exchange is a mock. */
	assert_true(scram_secret_for_user("ghost", "whatever", 4096, &real));
	assert_int_equal(exchange(&st, &real, true, "whatever", NULL), -2);
	assert_false(st.got_client_key);
}

static void test_secret_for_user(void **state)
{
	struct scram_secret a, b;

	(void)state;
	assert_false(scram_secret_for_user("u", "md54d45974e13472b5a0be3533de4666414", 4096, &a));
	assert_false(scram_secret_for_user("u", "", 4096, &a));
	assert_false(scram_secret_for_user("u", NULL, 4096, &a));
	assert_false(scram_secret_for_user("u", "pw", 0, &a));
	assert_false(scram_secret_for_user("u", "pw", SCRAM_MAX_ITERATIONS + 1, &a));
	/* Verifier: taken as is. */
	assert_true(scram_secret_for_user("u", PENCIL_VERIFIER, 1, &a));
	assert_int_equal(a.iterations, 4096);
	assert_false(a.has_client_key);
	/* Plaintext: stable salt per user, different between users. */
	assert_true(scram_secret_for_user("u", "pw", 4096, &a));
	assert_true(scram_secret_for_user("u", "pw", 4096, &b));
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(a.has_client_key);
	assert_true(scram_secret_for_user("v", "pw", 4096, &b));
	assert_memory_not_equal(a.salt, b.salt, a.salt_len);
	/* A malformed "verifier" is a plaintext password, as in PgBouncer. */
	assert_true(scram_secret_for_user("u", "SCRAM-SHA-256$oops", 4096, &a));
	assert_true(a.has_client_key);
}

static void test_parse_verifier(void **state)
{
	/* Format as produced by PostgreSQL (pg_authid.rolpassword). */
	static const char *const good =
		"SCRAM-SHA-256$4096:Mg8UNqSaPstxvBVRVYPQTw==$"
		"Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=";
	static const char *const bad[] = {
		"",
		"SCRAM-SHA-256",
		"SCRAM-SHA-1$4096:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		/* missing '$' between salt and keys */
		"SCRAM-SHA-256$4096:Mg8UNqSaPstxvBVRVYPQTw==Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		/* iterations 0, negative, not a number, missing */
		"SCRAM-SHA-256$0:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$-1:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$4k:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$99999999999:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		/* bad base64 in salt, stored key, server key */
		"SCRAM-SHA-256$4096:Mg8UNqSaPs!xvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$4096:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1E=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$4096:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s",
		/* empty salt, missing server key, trailing garbage */
		"SCRAM-SHA-256$4096:$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=",
		"SCRAM-SHA-256$4096:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=",
		"SCRAM-SHA-256$4096:Mg8UNqSaPstxvBVRVYPQTw==$Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:"
		"G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=x",
	};
	struct scram_secret sec;
	char huge[400];

	(void)state;
	assert_true(scram_parse_verifier(good, &sec));
	assert_int_equal(sec.iterations, 4096);
	assert_int_equal(sec.salt_len, 16);
	assert_false(sec.has_client_key);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_false(scram_parse_verifier(bad[i], &sec));
		assert_int_equal(sec.iterations, 0);
	}
	assert_false(scram_parse_verifier(NULL, &sec));
	/* A salt over SCRAM_MAX_SALT (68 bytes as 92 base64 chars). */
	snprintf(huge, sizeof(huge), "SCRAM-SHA-256$4096:%.*s$%s", 92,
		 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		 "Zl7Rhln+rus3z+4YwC+7CgL/uKSUvqWH8mHMUizh1EI=:G9dSawW20CNLxTnZdcwHEHg9U9hG2noNEV2/t7ptq3s=");
	assert_false(scram_parse_verifier(huge, &sec));
}

/* The second derivation of the same (password, salt, iterations) is a cache
 * hit; changing any of the three derives again. */
static void test_cache(void **state)
{
	struct scram_secret a, b;
	unsigned long runs = scram_pbkdf2_runs();
	uint8_t salt2[16];

	(void)state;
	memcpy(salt2, rfc_salt, sizeof(salt2));
	salt2[0] ^= 1;
	assert_true(scram_secret_from_password("cache-pw", rfc_salt, 16, 1000, &a));
	assert_int_equal(scram_pbkdf2_runs(), runs + 1);
	assert_true(scram_secret_from_password("cache-pw", rfc_salt, 16, 1000, &b));
	assert_int_equal(scram_pbkdf2_runs(), runs + 1);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(scram_secret_from_password("cache-pw", rfc_salt, 16, 1001, &b));
	assert_true(scram_secret_from_password("cache-pw", salt2, 16, 1000, &b));
	assert_true(scram_secret_from_password("cache-pw", rfc_salt, 15, 1000, &b));
	assert_true(scram_secret_from_password("cache-pX", rfc_salt, 16, 1000, &b));
	assert_int_equal(scram_pbkdf2_runs(), runs + 5);
	/* Cached values are the right ones: same as a fresh derivation. */
	scram_cache_clear();
	assert_true(scram_secret_from_password("cache-pw", rfc_salt, 16, 1000, &b));
	assert_int_equal(scram_pbkdf2_runs(), runs + 6);
	assert_memory_equal(&a, &b, sizeof(a));
	/* Invalid inputs never reach PBKDF2. */
	assert_false(scram_secret_from_password("x", rfc_salt, 0, 1000, &b));
	assert_false(scram_secret_from_password("x", rfc_salt, SCRAM_MAX_SALT + 1, 1000, &b));
	assert_false(scram_secret_from_password("x", rfc_salt, 16, 0, &b));
	assert_false(scram_secret_from_password(NULL, rfc_salt, 16, 1, &b));
	assert_int_equal(scram_pbkdf2_runs(), runs + 6);
}

/* The cache is bounded: after many other entries the first one is gone. */
static void test_cache_bounded(void **state)
{
	struct scram_secret s;
	unsigned long runs;
	char pw[32];

	(void)state;
	assert_true(scram_secret_from_password("first", rfc_salt, 16, 1, &s));
	runs = scram_pbkdf2_runs();
	for (int i = 0; i < 8 * SCRAM_CACHE_ENTRIES; i++) {
		snprintf(pw, sizeof(pw), "filler-%d", i);
		assert_true(scram_secret_from_password(pw, rfc_salt, 16, 1, &s));
	}
	assert_int_equal(scram_pbkdf2_runs(), runs + 8 * SCRAM_CACHE_ENTRIES);
	assert_true(scram_secret_from_password("first", rfc_salt, 16, 1, &s));
	assert_int_equal(scram_pbkdf2_runs(), runs + 8 * SCRAM_CACHE_ENTRIES + 1);
}

/* The warm-up is a whole successful exchange that costs no PBKDF2 and
 * leaves the derived-key cache alone. */
static void test_warm_up(void **state)
{
	struct scram_secret s;
	unsigned long runs;

	(void)state;
	assert_true(scram_secret_from_password("warm-pw", rfc_salt, 16, 1, &s));
	runs = scram_pbkdf2_runs();
	assert_true(scram_warm_up());
	assert_true(scram_warm_up());
	assert_int_equal(scram_pbkdf2_runs(), runs);
	assert_true(scram_secret_from_password("warm-pw", rfc_salt, 16, 1, &s));
	assert_int_equal(scram_pbkdf2_runs(), runs);
}

/* ---- hostile input, server side ---- */

static void test_server_first_hostile(void **state)
{
	static const char *const bad[] = {
		"",
		"n",
		"n,",
		"n,,",
		"p=tls-server-end-point,,n=,r=abc",      /* channel binding requested */
		"x,,n=,r=abc",
		"nn,,n=,r=abc",
		"n,a=user,n=,r=abc",                      /* authzid */
		"n,b=user,n=,r=abc",
		"n,,m=ext,n=,r=abc",                      /* mandatory extension */
		"n,,r=abc",                               /* n missing */
		"n,,r=abc,n=",                            /* order */
		"n,,n=,x=1,r=abc",
		"n,,n=",                                  /* r missing */
		"n,,n=,",
		"n,,n=,r=",                               /* empty nonce */
		"n,,n=,r=ab c",                           /* space in nonce */
		"n,,n=,r=abc,",                           /* trailing comma */
		"n,,n=,r=abc,cd",                         /* not an attribute */
		"n,,n=,r=abc,1=x",
		"n,,n=,R=abc",
		"n,,n,r=abc",
	};
	struct scram_server st;
	struct scram_secret sec;
	char out[600], big[2100];
	const char *err;

	(void)state;
	scram_mock_secret("u", 4096, &sec);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err = NULL;
		assert_int_equal(srv_first(&st, &sec, false, bad[i], out, sizeof(out), &err), -1);
		assert_non_null(err);
		assert_int_not_equal(st.state, SCRAM_SERVER_FIRST_SENT);
	}
	/* The reasons PostgreSQL gives for these three. */
	assert_int_equal(srv_first(&st, &sec, false, "n,a=user,n=,r=abc", out, sizeof(out), &err), -1);
	assert_string_equal(err, "client uses authorization identity, but it is not supported");
	assert_int_equal(srv_first(&st, &sec, false, "n,,m=ext,n=,r=abc", out, sizeof(out), &err), -1);
	assert_string_equal(err, "client requires an unsupported SCRAM extension");
	assert_int_equal(srv_first(&st, &sec, false, "p=tls-unique,,n=,r=abc", out, sizeof(out), &err), -1);
	assert_non_null(strstr(err, "channel binding"));
	/* Nonce of 255 is fine, 256 is not; invalid bytes are refused. */
	memcpy(big, "n,,n=,r=", 8);
	memset(big + 8, 'a', 255);
	big[8 + 255] = '\0';
	assert_int_equal(srv_first(&st, &sec, false, big, out, sizeof(out), &err), 0);
	big[8 + 255] = 'a';
	big[8 + 256] = '\0';
	assert_int_equal(srv_first(&st, &sec, false, big, out, sizeof(out), &err), -1);
	memcpy(big, "n,,n=,r=ab\x7f", 12);
	assert_int_equal(srv_first(&st, &sec, false, big, out, sizeof(out), &err), -1);
	memcpy(big, "n,,n=,r=ab\x80", 12);
	assert_int_equal(srv_first(&st, &sec, false, big, out, sizeof(out), &err), -1);
	/* An overlong message (a huge user name) is an error, not an overflow. */
	memcpy(big, "n,,n=", 5);
	memset(big + 5, 'u', 2000);
	strcpy(big + 2005, ",r=abc");
	assert_int_equal(srv_first(&st, &sec, false, big, out, sizeof(out), &err), -1);
	/* Just under the message bound but over the stored bare buffer. */
	memset(big + 5, 'u', 900);
	strcpy(big + 905, ",r=abc");
	assert_int_equal(srv_first(&st, &sec, false, big, out, sizeof(out), &err), -1);
	/* An embedded NUL. */
	assert_int_equal(scram_server_first(&st, &sec, false, "n,,n=\0,r=abc", 12, out, sizeof(out), NULL, &err), -1);
	/* Output buffer too small. */
	assert_int_equal(srv_first(&st, &sec, false, "n,,n=,r=abc", out, 10, &err), -1);
}

static void test_server_first_accepts(void **state)
{
	static const char *const good[] = {
		"y,,n=,r=abc",                 /* client could bind, we advertise no -PLUS */
		"n,,n=user,r=abc,x=ext",       /* optional extensions after the nonce */
		"n,,n=*,r=abc",
	};
	struct scram_server st;
	struct scram_secret sec;
	char out[600];
	const char *err = NULL;

	(void)state;
	scram_mock_secret("u", 4096, &sec);
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(srv_first(&st, &sec, false, good[i], out, sizeof(out), &err), 0);
		assert_memory_equal(out, "r=abc", 5);
	}
	assert_string_equal(st.gs2_header, "n,,");
}

/* Each hostile client-final after a valid RFC first step. */
static void check_final(const char *final, int want)
{
	struct scram_server st;
	struct scram_secret sec;
	char out[600];
	const char *err = NULL;

	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &sec));
	scram_server_set_test_nonce(RFC_SNONCE);
	assert_int_equal(srv_first(&st, &sec, false, RFC_CLIENT_FIRST, out, sizeof(out), &err), 0);
	assert_int_equal(srv_final(&st, final, out, sizeof(out), &err), want);
	assert_non_null(err);
	assert_false(st.got_client_key);
	assert_int_equal(st.state, SCRAM_SERVER_FAILED);
}

#define NONCE RFC_CNONCE RFC_SNONCE
#define PROOF "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="

static void test_server_final_hostile(void **state)
{
	static const char *const malformed[] = {
		"",
		"r=" NONCE "," PROOF,                           /* c missing */
		"c=biws," PROOF,                                /* r missing */
		"c=biws,r=" NONCE,                              /* p missing */
		"c=biws,r=" NONCE ",",
		"c=bi!s,r=" NONCE "," PROOF,                    /* bad base64 */
		"c=eSws,r=" NONCE "," PROOF,                    /* "y,," for an "n,," header */
		"c=,r=" NONCE "," PROOF,
		"c=biw=,r=" NONCE "," PROOF,                    /* "n," : too short */
		"c=biwsbg==,r=" NONCE "," PROOF,                /* "n,,n" : too long */
		"c=biws,r=" RFC_CNONCE "," PROOF,               /* nonce without server part */
		"c=biws,r=" NONCE "x," PROOF,
		"c=biws,r=X" NONCE "," PROOF,
		"r=" NONCE ",c=biws," PROOF,                    /* order */
		"c=biws,r=" NONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7And!Q=",
		"c=biws,r=" NONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ",
		"c=biws,r=" NONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=AAAA",   /* 35 bytes */
		"c=biws,r=" NONCE ",p=",
		"c=biws,r=" NONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVR=",   /* non-canonical */
		"c=biws,r=" NONCE "," PROOF ",x=1",             /* p not last */
		"c=biws,r=" NONCE ",9=1," PROOF,
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(malformed); i++)
		check_final(malformed[i], -1);
	/* Extensions before the proof are allowed (and part of AuthMessage, so
	 * the RFC proof no longer matches: -2, not -1). */
	check_final("c=biws,r=" NONCE ",x=ext," PROOF, -2);
	/* Wrong proof. */
	check_final("c=biws,r=" NONCE ",p=eHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", -2);
	check_final("c=biws,r=" NONCE ",p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", -2);
}

static void test_server_final_bounds(void **state)
{
	struct scram_server st;
	struct scram_secret sec;
	char out[600], big[1400];
	const char *err = NULL;

	(void)state;
	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &sec));
	/* Out of order: final before first. */
	memset(&st, 0, sizeof(st));
	assert_int_equal(srv_final(&st, RFC_CLIENT_FINAL, out, sizeof(out), &err), -1);
	/* Too long, and an embedded NUL. */
	scram_server_set_test_nonce(RFC_SNONCE);
	assert_int_equal(srv_first(&st, &sec, false, RFC_CLIENT_FIRST, out, sizeof(out), &err), 0);
	snprintf(big, sizeof(big), "c=biws,r=%s,x=%01100d,%s", NONCE, 0, PROOF);
	assert_int_equal(srv_final(&st, big, out, sizeof(out), &err), -1);
	assert_int_equal(srv_first(&st, &sec, false, RFC_CLIENT_FIRST, out, sizeof(out), &err), 0);
	assert_int_equal(scram_server_final(&st, "c=biws\0", 7, out, sizeof(out), NULL, &err), -1);
	/* Output too small for the server-final. */
	assert_int_equal(srv_first(&st, &sec, false, RFC_CLIENT_FIRST, out, sizeof(out), &err), 0);
	assert_int_equal(srv_final(&st, RFC_CLIENT_FINAL, out, 20, &err), -1);
}

/* ---- hostile input, client side ---- */

static int cli_final(const char *server_first, const char **err)
{
	struct scram_client cl;
	char out[600];
	size_t n = 0;

	scram_client_set_test_nonce(RFC_CNONCE, "user");
	assert_int_equal(scram_client_first(&cl, out, sizeof(out), &n), 0);
	return scram_client_final(&cl, server_first, strlen(server_first), "pencil", NULL, out, sizeof(out), &n, err);
}

static void test_client_final_hostile(void **state)
{
	static const char *const bad[] = {
		"",
		"m=ext," RFC_SERVER_FIRST,
		"r=XrOprNGfwEbeRWgbNEkqO" RFC_SNONCE ",s=" RFC_SALT_B64 ",i=4096",   /* not our nonce */
		"r=" RFC_CNONCE ",s=" RFC_SALT_B64 ",i=4096",                         /* no server part */
		"r=rOprNGfwEbeRWgbNEk,s=" RFC_SALT_B64 ",i=4096",                     /* shorter than ours */
		"r=" NONCE " x,s=" RFC_SALT_B64 ",i=4096",
		"s=" RFC_SALT_B64 ",i=4096",                                          /* r missing */
		"r=" NONCE ",i=4096",                                                 /* s missing */
		"r=" NONCE ",s=" RFC_SALT_B64,                                        /* i missing */
		"r=" NONCE ",i=4096,s=" RFC_SALT_B64,                                 /* order */
		"r=" NONCE ",s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096",                       /* bad base64 */
		"r=" NONCE ",s=W22ZaJ0SN!7soEsUEjb6gQ==,i=4096",
		"r=" NONCE ",s=,i=4096",                                              /* empty salt */
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=0",
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=10000001",
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=99999999999999999999",
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=-1",
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=4k",
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=",
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=4096,x=1",                         /* garbage at end */
		"r=" NONCE ",s=" RFC_SALT_B64 ",i=4096,",
		"e=other-error",
	};
	char big[1400];
	const char *err;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err = NULL;
		assert_int_equal(cli_final(bad[i], &err), -1);
		assert_non_null(err);
	}
	/* Salt over SCRAM_MAX_SALT: 66 bytes = 88 base64 characters. */
	snprintf(big, sizeof(big), "r=%s,s=%.88s,i=4096", NONCE,
		 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
	assert_int_equal(cli_final(big, &err), -1);
	/* Exactly SCRAM_MAX_SALT bytes is fine (1 iteration to keep it quick). */
	snprintf(big, sizeof(big), "r=%s,s=%.86s==,i=1", NONCE,
		 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
	assert_int_equal(cli_final(big, &err), 0);
	/* Nonce over 255 characters. */
	snprintf(big, sizeof(big), "r=%s%0240d,s=%s,i=4096", RFC_CNONCE, 0, RFC_SALT_B64);
	assert_int_equal(cli_final(big, &err), -1);
	/* Message over SCRAM_MAX_SERVER_FIRST. */
	snprintf(big, sizeof(big), "r=%s,s=%s,i=4096%01100d", NONCE, RFC_SALT_B64, 0);
	assert_int_equal(cli_final(big, &err), -1);
}

static void test_client_order_and_buffers(void **state)
{
	struct scram_client cl;
	char out[600];
	size_t n = 0;
	const char *err = NULL;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	assert_int_equal(scram_client_final(&cl, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST), "pencil", NULL,
					    out, sizeof(out), &n, &err), -1);
	assert_int_equal(scram_client_verify(&cl, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err), -1);
	assert_int_equal(scram_client_first(&cl, out, 10, &n), -1);
	scram_client_set_test_nonce(RFC_CNONCE, "user");
	assert_int_equal(scram_client_first(&cl, out, sizeof(out), &n), 0);
	assert_int_equal(scram_client_final(&cl, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST), "pencil", NULL,
					    out, 40, &n, &err), -1);
	/* Random nonces differ between exchanges. */
	scram_client_set_test_nonce(NULL, NULL);
	assert_int_equal(scram_client_first(&cl, out, sizeof(out), &n), 0);
	assert_int_equal(n, strlen("n,,n=,r=") + 24);
	{
		char first[64];

		memcpy(first, out, n + 1);
		assert_int_equal(scram_client_first(&cl, out, sizeof(out), &n), 0);
		assert_string_not_equal(first, out);
	}
}

/* *err may point into cl (the text of an "e=" error), so cl is the caller's. */
static int cli_verify(struct scram_client *cl, const char *server_final, const char **err)
{
	char out[600];
	size_t n = 0;

	scram_client_set_test_nonce(RFC_CNONCE, "user");
	assert_int_equal(scram_client_first(cl, out, sizeof(out), &n), 0);
	assert_int_equal(scram_client_final(cl, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST), "pencil", NULL,
					    out, sizeof(out), &n, err), 0);
	return scram_client_verify(cl, server_final, strlen(server_final), err);
}

static void test_client_verify_hostile(void **state)
{
	static const char *const bad[] = {
		"",
		"v=",
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=x",       /* trailing byte */
		"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",        /* wrong signature */
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5=",        /* non-canonical base64 */
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4",         /* bad base64 */
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl9",
		RFC_SERVER_FINAL ",x=1",
		"x=" RFC_SERVER_FINAL,
		"V=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
	};
	struct scram_client cl;
	const char *err;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err = NULL;
		assert_int_equal(cli_verify(&cl, bad[i], &err), -1);
		assert_non_null(err);
		assert_int_equal(cl.state, SCRAM_CLIENT_FAILED);
	}
	assert_int_equal(cli_verify(&cl, "e=invalid-proof", &err), -1);
	assert_string_equal(err, "SCRAM server error: invalid-proof");
	assert_int_equal(cli_verify(&cl, RFC_SERVER_FINAL, &err), 0);
}

static void test_state_names(void **state)
{
	(void)state;
	assert_string_equal(scram_server_state_name(SCRAM_SERVER_INIT), "init");
	assert_string_equal(scram_server_state_name(SCRAM_SERVER_FAILED), "failed");
	assert_string_equal(scram_server_state_name(99), "invalid");
	assert_string_equal(scram_client_state_name(SCRAM_CLIENT_FINAL_SENT), "final_sent");
	assert_string_equal(scram_client_state_name(-1), "invalid");
}


/* ---- SCRAM-SHA-256-PLUS (tls-server-end-point) ---- */

#define CB_GS2 "p=tls-server-end-point,,"
#define CB_FIRST CB_GS2 "n=,r=" RFC_CNONCE

static void plus_cb(struct scram_cbind *cb, bool plus)
{
	memset(cb, 0, sizeof(*cb));
	cb->offered = true;
	cb->plus = plus;
	cb->len = 32;
	memset(cb->data, 0xab, cb->len);
}

/* The client-final a client bound to `data` sends for "pencil". */
static void plus_final(const char *server_first, const uint8_t *data, size_t dlen, char *out, size_t outlen)
{
	uint8_t cbuf[sizeof(CB_GS2) + 64], stored[32], sig[32], proof[32];
	char c64[200], p64[64], without[400], auth[1200];
	size_t glen = strlen(CB_GS2);

	memcpy(cbuf, CB_GS2, glen);
	memcpy(cbuf + glen, data, dlen);
	crypto_b64_encode(cbuf, glen + dlen, c64, sizeof(c64));
	snprintf(without, sizeof(without), "c=%s,r=%s", c64, strchr(server_first, '=') + 1);
	*strchr(without + 2 + strlen(c64) + 3, ',') = '\0';   /* r= ends at ",s=" */
	snprintf(auth, sizeof(auth), "n=,r=" RFC_CNONCE ",%s,%s", server_first, without);
	assert_true(crypto_sha256(pencil_client_key, 32, stored));
	assert_true(crypto_hmac_sha256(stored, 32, auth, strlen(auth), sig));
	for (int i = 0; i < 32; i++)
		proof[i] = pencil_client_key[i] ^ sig[i];
	crypto_b64_encode(proof, 32, p64, sizeof(p64));
	snprintf(out, outlen, "%s,p=%s", without, p64);
}

static int plus_first(struct scram_server *st, const struct scram_cbind *cb, const char *msg, char *out,
		      const char **err)
{
	struct scram_secret sec;
	size_t n = 0;

	assert_true(scram_parse_verifier(PENCIL_VERIFIER, &sec));
	scram_server_set_test_nonce(RFC_SNONCE);
	return scram_server_first_cb(st, &sec, false, cb, msg, strlen(msg), out, 600, &n, err);
}

static void test_plus_binding_checked(void **state)
{
	struct scram_server st;
	struct scram_cbind cb;
	char first[600], final[600], out[600];
	uint8_t other[32];
	const char *err = NULL;

	(void)state;
	plus_cb(&cb, true);
	assert_int_equal(plus_first(&st, &cb, CB_FIRST, first, &err), 0);
	assert_string_equal(st.gs2_header, CB_GS2);
	plus_final(first, cb.data, cb.len, final, sizeof(final));
	assert_int_equal(srv_final(&st, final, out, sizeof(out), &err), 0);
	assert_true(st.got_client_key);
	assert_memory_equal(st.client_key, pencil_client_key, 32);

	/* Bound to another certificate: refused before the proof counts. */
	memset(other, 0xac, sizeof(other));
	assert_int_equal(plus_first(&st, &cb, CB_FIRST, first, &err), 0);
	plus_final(first, other, sizeof(other), final, sizeof(final));
	assert_int_equal(srv_final(&st, final, out, sizeof(out), &err), -1);
	assert_string_equal(err, "SCRAM channel binding check failed");
	assert_false(st.got_client_key);
	/* The header alone, or a shorter hash, is no binding. */
	assert_int_equal(plus_first(&st, &cb, CB_FIRST, first, &err), 0);
	plus_final(first, cb.data, 0, final, sizeof(final));
	assert_int_equal(srv_final(&st, final, out, sizeof(out), &err), -1);
	assert_string_equal(err, "SCRAM channel binding check failed");
	assert_int_equal(plus_first(&st, &cb, CB_FIRST, first, &err), 0);
	plus_final(first, cb.data, 31, final, sizeof(final));
	assert_int_equal(srv_final(&st, final, out, sizeof(out), &err), -1);
	/* Plain SCRAM's "biws" under -PLUS. */
	assert_int_equal(plus_first(&st, &cb, CB_FIRST, first, &err), 0);
	assert_int_equal(srv_final(&st, "c=biws,r=" NONCE "," PROOF, out, sizeof(out), &err), -1);
	assert_string_equal(err, "SCRAM channel binding check failed");
	/* c= too long for any binding: malformed, not an overflow. */
	char big[700] = "c=";
	memset(big + 2, 'A', 400);
	strcpy(big + 402, ",r=" NONCE "," PROOF);
	assert_int_equal(plus_first(&st, &cb, CB_FIRST, first, &err), 0);
	assert_int_equal(srv_final(&st, big, out, sizeof(out), &err), -1);
}

/* pgcrew as -PLUS client (toward PostgreSQL) against pgcrew as -PLUS
 * server: the same end-point data succeeds, another certificate's fails. */
static void test_plus_client_against_server(void **state)
{
	struct scram_secret sec;
	struct scram_cbind cb = { .offered = true, .plus = true, .len = 32 };
	uint8_t wrong[32];
	const char *err = NULL;

	(void)state;
	memset(cb.data, 0x5a, sizeof(cb.data));
	memset(wrong, 0x5b, sizeof(wrong));
	assert_true(scram_secret_for_user("alice", "s3cret", 4096, &sec));
	for (int round = 0; round < 2; round++) {
		struct scram_client cl;
		struct scram_server st;
		char c1[256], s1[600], c2[700], s2[128];
		size_t n1 = 0, n2 = 0, n3 = 0, n4 = 0;
		const uint8_t *mine = round == 0 ? cb.data : wrong;

		memset(&st, 0, sizeof(st));
		assert_int_equal(scram_client_first_plus(&cl, mine, 32, c1, sizeof(c1), &n1), 0);
		assert_memory_equal(c1, "p=tls-server-end-point,,n=,r=", 29);
		assert_int_equal(scram_server_first_cb(&st, &sec, false, &cb, c1, n1, s1, sizeof(s1), &n2,
						       &err), 0);
		assert_int_equal(scram_client_final(&cl, s1, n2, "s3cret", NULL, c2, sizeof(c2), &n3, &err), 0);
		int rc = scram_server_final(&st, c2, n3, s2, sizeof(s2), &n4, &err);
		if (round == 0) {
			assert_int_equal(rc, 0);
			assert_int_equal(scram_client_verify(&cl, s2, n4, &err), 0);
		} else {
			assert_int_equal(rc, -1);
			assert_string_equal(err, "SCRAM channel binding check failed");
		}
	}
	struct scram_client cl;
	char c1[256];
	assert_int_equal(scram_client_first_plus(&cl, wrong, 0, c1, sizeof(c1), NULL), -1);
	assert_int_equal(scram_client_first_plus(&cl, wrong, 65, c1, sizeof(c1), NULL), -1);
}

static void test_plus_negotiation(void **state)
{
	struct scram_server st;
	struct scram_cbind offered, plus;
	char out[600];
	const char *err = NULL;

	(void)state;
	plus_cb(&offered, false);
	plus_cb(&plus, true);
	/* -PLUS offered, client says it could bind but thinks we cannot. */
	assert_int_equal(plus_first(&st, &offered, "y,,n=,r=abc", out, &err), -1);
	assert_string_equal(err, "SCRAM channel binding negotiation error");
	/* Not offered (plain connection): 'y' is fine, 'p' is not. */
	assert_int_equal(plus_first(&st, NULL, "y,,n=,r=abc", out, &err), 0);
	assert_int_equal(plus_first(&st, NULL, CB_FIRST, out, &err), -1);
	/* Offered and plain SCRAM chosen: 'n' fine, 'p' malformed. */
	assert_int_equal(plus_first(&st, &offered, "n,,n=,r=abc", out, &err), 0);
	assert_int_equal(plus_first(&st, &offered, CB_FIRST, out, &err), -1);
	assert_non_null(strstr(err, "without channel binding"));
	/* -PLUS chosen: 'n'/'y' malformed, other binding types unsupported. */
	assert_int_equal(plus_first(&st, &plus, "n,,n=,r=abc", out, &err), -1);
	assert_non_null(strstr(err, "does not include channel binding data"));
	assert_int_equal(plus_first(&st, &plus, "y,,n=,r=abc", out, &err), -1);
	assert_int_equal(plus_first(&st, &plus, "p=tls-unique,,n=,r=abc", out, &err), -1);
	assert_string_equal(err, "unsupported SCRAM channel-binding type");
	assert_int_equal(plus_first(&st, &plus, "p=tls-server-end-pointX,,n=,r=abc", out, &err), -1);
	assert_int_equal(plus_first(&st, &plus, "p,,n=,r=abc", out, &err), -1);
	assert_int_equal(plus_first(&st, &plus, "p=,,n=,r=abc", out, &err), -1);
	/* -PLUS without anything to bind to is our bug, refused. */
	plus.offered = false;
	assert_int_equal(plus_first(&st, &plus, CB_FIRST, out, &err), -1);
	plus.offered = true;
	plus.len = 0;
	assert_int_equal(plus_first(&st, &plus, CB_FIRST, out, &err), -1);
}

#define T(f) cmocka_unit_test_setup(f, reset_hooks)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_rfc7677_server),
		T(test_rfc7677_server_from_verifier),
		T(test_rfc7677_client),
		T(test_rfc7677_client_pass_through),
		T(test_end_to_end_plaintext),
		T(test_end_to_end_verifier_and_pass_through),
		T(test_pass_through_mismatch),
		T(test_mock),
		T(test_secret_for_user),
		T(test_parse_verifier),
		T(test_cache),
		T(test_cache_bounded),
		T(test_warm_up),
		T(test_server_first_hostile),
		T(test_server_first_accepts),
		T(test_server_final_hostile),
		T(test_server_final_bounds),
		T(test_client_final_hostile),
		T(test_client_order_and_buffers),
		T(test_client_verify_hostile),
		T(test_state_names),
		T(test_plus_binding_checked),
		T(test_plus_negotiation),
		T(test_plus_client_against_server),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

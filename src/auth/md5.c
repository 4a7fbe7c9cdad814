/* pgcrew — md5 password authentication as PostgreSQL and PgBouncer do it:
 * the secret is "md5" + md5(password || user), the client answers with
 * "md5" + md5(<secret hex> || 4-byte salt). */
#include "auth/md5.h"

#include <string.h>

#include <openssl/crypto.h>

#include "auth/crypto.h"
#include "auth/scram.h"

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
	}
	return true;
}

bool md5_is_secret(const char *secret)
{
	return secret != NULL && strlen(secret) == MD5_PASSWD_LEN && strncmp(secret, "md5", 3) == 0
	       && is_hex(secret + 3, CRYPTO_MD5_HEX_LEN);
}

void md5_password_hash(const char *user, const char *password, char out[36])
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)password, .iov_len = strlen(password) },
		{ .iov_base = (void *)user, .iov_len = strlen(user) },
	};

	memcpy(out, "md5", 3);
	if (!crypto_md5_hex_iov(iov, 2, out + 3))
		out[0] = '\0';
}

void md5_salted(const char *md5hash, const uint8_t salt[4], char out[36])
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)(md5hash + 3), .iov_len = CRYPTO_MD5_HEX_LEN },
		{ .iov_base = (void *)salt, .iov_len = 4 },
	};

	out[0] = '\0';
	if (!md5_is_secret(md5hash))
		return;
	memcpy(out, "md5", 3);
	if (!crypto_md5_hex_iov(iov, 2, out + 3))
		out[0] = '\0';
}

/* The md5 secret to check against: the userlist one as is, or hashed from a
 * plaintext password. A SCRAM verifier cannot answer an md5 challenge. */
static bool md5_secret_for(const char *secret, const char *user, char out[36])
{
	struct scram_secret scram;

	if (secret == NULL || secret[0] == '\0')
		return false;     /* PostgreSQL never accepts an empty password */
	if (md5_is_secret(secret)) {
		memcpy(out, secret, MD5_PASSWD_LEN + 1);
		return true;
	}
	if (scram_parse_verifier(secret, &scram))
		return false;
	md5_password_hash(user, secret, out);
	return out[0] != '\0';
}

bool md5_check_client(const char *secret, const char *user, const uint8_t salt[4],
		      const char *client_response)
{
	char stored[MD5_PASSWD_LEN + 1], expect[MD5_PASSWD_LEN + 1];
	bool ok;

	if (client_response == NULL || strlen(client_response) != MD5_PASSWD_LEN)
		return false;
	if (!md5_secret_for(secret, user, stored))
		return false;
	md5_salted(stored, salt, expect);
	ok = expect[0] != '\0' && CRYPTO_memcmp(expect, client_response, MD5_PASSWD_LEN) == 0;
	OPENSSL_cleanse(stored, sizeof(stored));
	return ok;
}

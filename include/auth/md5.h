/* pgcrew — PostgreSQL's md5 password scheme: the stored "md5" + md5(password ||
 * user) secret, the salted response a client sends, and checking a client's
 * response against a userlist secret (plaintext or md5). */
#ifndef PGCREW_AUTH_MD5_H
#define PGCREW_AUTH_MD5_H

#include "types.h"

#define MD5_PASSWD_LEN 35          /* "md5" + 32 hex digits */

/* "md5" + md5hex(password || user). Writes "" if MD5 is unavailable. */
void md5_password_hash(const char *user, const char *password, char out[36]);
/* What a client sends for AuthenticationMD5Password:
 * "md5" + md5hex(<32 hex of md5hash> || salt). Writes "" on a malformed
 * md5hash or if MD5 is unavailable. */
void md5_salted(const char *md5hash /* "md5..." */, const uint8_t salt[4], char out[36]);
/* True when the secret is an md5 secret: "md5" followed by 32 hex digits. */
bool md5_is_secret(const char *secret);
/* Checks a client's PasswordMessage against a userlist secret: plaintext or
 * "md5..." work; a SCRAM verifier, an empty secret or a wrong response give
 * false. Compared in constant time. */
bool md5_check_client(const char *secret /* plain or md5... */, const char *user,
		      const uint8_t salt[4], const char *client_response);

#endif

/* pgcrew — the auth_file (userlist.txt): "user" "secret" lines, secrets
 * kept verbatim (plain text, md5..., SCRAM-SHA-256$...). Lookup is a hash
 * table because it runs on every login. */
#ifndef PGCREW_CONFIG_USERLIST_H
#define PGCREW_CONFIG_USERLIST_H

#include "../config.h"

enum userlist_kind { USERLIST_PLAIN, USERLIST_MD5, USERLIST_SCRAM, USERLIST_KIND_COUNT };

struct userlist;

/* NULL with err set ("<file>:<line>: ...") on an unreadable file or a
 * malformed line. A user listed twice keeps the last secret. */
struct userlist *userlist_load(const char *path, struct config_error *err);
struct userlist *userlist_new_empty(void);
void userlist_free(struct userlist *ul);
const char *userlist_find(const struct userlist *ul, const char *user);   /* secret or NULL */
size_t userlist_count(const struct userlist *ul);
/* Every user name in turn: start with *pos = 0; NULL after the last. */
const char *userlist_name_at(const struct userlist *ul, size_t *pos);
/* md5 + 32 hex digits is MD5; a well-formed SCRAM-SHA-256 verifier is
 * SCRAM; anything else (including a malformed verifier) is plain text. */
enum userlist_kind userlist_secret_kind(const char *secret);
const char *userlist_kind_name(enum userlist_kind k);     /* "plain", "md5", "scram-sha-256" */

#endif

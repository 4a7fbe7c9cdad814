/* pgcrew — certificate authentication (auth_type = cert, HBA method cert):
 * the client's TLS certificate, verified against client_tls_ca_file, names
 * the user by its CN, directly or through an ident map (map=). */
#ifndef PGCREW_AUTH_CERTAUTH_H
#define PGCREW_AUTH_CERTAUTH_H

#include "auth/verdict.h"

struct hba_ident;

/* The login of `user` (user_known: in auth_file or found by auth_query)
 * over a connection with or without TLS whose verified certificate has the
 * CN `cn` (NULL: none). map is the HBA line's map= (NULL: the CN must equal
 * the user). Rejections carry PostgreSQL's wording and PgBouncer's log. */
enum auth_outcome certauth_check(bool tls, const char *cn, const char *user, bool user_known,
				 const struct hba_ident *ident, const char *map,
				 struct auth_verdict *v);

#endif

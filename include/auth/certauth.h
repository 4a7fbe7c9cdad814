/* pgcrew — certificate authentication (auth_type = cert, HBA method cert):
 * the client's TLS certificate, verified against client_tls_ca_file, names
 * the user by its CN, directly or through an ident map (map=). */
#ifndef PGCREW_AUTH_CERTAUTH_H
#define PGCREW_AUTH_CERTAUTH_H

#include "types.h"

struct client;

/* True when the certificate lets c log in as its user; otherwise c is
 * closed with PostgreSQL's wording and the reason logged with PgBouncer's
 * text. map is the HBA line's map= (NULL: the CN must equal the user). */
bool certauth_check(struct client *c, const char *map) MUSTCHECK;

#endif

/* pgcrew — the password methods checked by an outside authority, LDAP and
 * PAM: the client is asked for a cleartext password, which one of the
 * worker's authentication threads (authpool.h) checks. */
#ifndef PGCREW_AUTH_EXTAUTH_H
#define PGCREW_AUTH_EXTAUTH_H

#include "types.h"

struct client;
struct hba_rule;

enum extauth_method { EXTAUTH_LDAP, EXTAUTH_PAM };

/* Whether this build has the method (configure --with-ldap / --with-pam). */
bool extauth_available(enum extauth_method m);
/* Prepare c's check: LDAP settings from the HBA rule's options, or from
 * auth_ldap_options when rule is NULL; PAM's service from pamservice=, else
 * "pgbouncer". False when c was closed (method not built, bad settings:
 * logged, the client gets the method's failure text). */
bool extauth_begin(struct client *c, enum extauth_method m, const struct hba_rule *rule) MUSTCHECK;
/* The client's password arrived: queue the check. The answer comes back
 * through client_extauth_done(); a full queue closes c. */
void extauth_password(struct client *c, const char *password);

/* ---- run in an authentication thread (ldapauth.c, pamauth.c) ---- */
struct authpool_job;
void ldapauth_run(struct authpool_job *j);
void pamauth_run(struct authpool_job *j);

#endif

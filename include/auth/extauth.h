/* pgcrew — the password methods checked by an outside authority, LDAP and
 * PAM: the client is asked for a cleartext password, which one of the
 * worker's authentication threads (authpool.h) checks. This module makes
 * the job and runs it; the client code submits it and acts on the answer. */
#ifndef PGCREW_AUTH_EXTAUTH_H
#define PGCREW_AUTH_EXTAUTH_H

#include "types.h"

struct authpool_job;
struct hba_rule;

enum extauth_method { EXTAUTH_LDAP, EXTAUTH_PAM };

/* Whether this build has the method (configure --with-ldap / --with-pam). */
bool extauth_available(enum extauth_method m);
/* What the client is told when the check fails (PgBouncer's text), by
 * method or for a finished job. */
const char *extauth_failure_text(enum extauth_method m);
const char *extauth_job_failure_text(const struct authpool_job *j);
/* A job checking user's password from rhost (its run set; the caller adds
 * the password and its done, and submits it to authpool.h): LDAP settings
 * from the HBA rule's options, or from ldap_options (auth_ldap_options)
 * when rule is NULL; PAM's service from pamservice=, else "pgbouncer".
 * NULL with why set when the method is not built or its settings are bad:
 * the caller logs why and refuses with extauth_failure_text(). */
struct authpool_job *extauth_prepare(enum extauth_method m, const struct hba_rule *rule,
				     const char *ldap_options, const char *user, const char *rhost,
				     char *why, size_t whylen) MUSTCHECK;
/* The client's password into j; false when it is too long for the check. */
bool extauth_set_password(struct authpool_job *j, const char *password) MUSTCHECK;

/* ---- run in an authentication thread (ldapauth.c, pamauth.c) ---- */
struct authpool_job;
void ldapauth_run(struct authpool_job *j);
void pamauth_run(struct authpool_job *j);

#endif

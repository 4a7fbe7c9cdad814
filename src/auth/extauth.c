/* pgcrew — LDAP and PAM logins (see extauth.h): settings are read in the
 * loop when the login starts (a RELOAD may free the HBA rules before the
 * password arrives), the check runs in an authentication thread. */
#include "auth/extauth.h"
#include "auth/authpool.h"
#include "auth/hba.h"
#include "auth/ldapconf.h"
#include "build-config.h"
#include "client.h"
#include "config.h"
#include "objects.h"
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAM_DEFAULT_SERVICE "pgbouncer"   /* PgBouncer's service name */

static const char *method_name(enum extauth_method m)
{
	return m == EXTAUTH_LDAP ? "LDAP" : "PAM";
}

/* The client's text on failure, PgBouncer's. */
static const char *failure_text(enum extauth_method m)
{
	return m == EXTAUTH_LDAP ? "LDAP authentication failed" : "auth failed";
}

bool extauth_available(enum extauth_method m)
{
#ifdef HAVE_LDAP
	if (m == EXTAUTH_LDAP)
		return true;
#endif
#ifdef HAVE_PAM
	if (m == EXTAUTH_PAM)
		return true;
#endif
	return false;
}

static bool ldap_settings(const struct hba_rule *rule, struct ldapconf *lc, char *err, size_t errlen)
{
	if (!rule)
		return ldapconf_parse(lc, W->cfg->auth_ldap_options, err, errlen);
	ldapconf_init(lc);
	for (size_t i = 0; i < hba_rule_option_count(rule); i++) {
		const char *name, *value;
		hba_rule_option_at(rule, i, &name, &value);
		if (!ldapconf_set(lc, name, value, err, errlen))
			return false;
	}
	return ldapconf_finish(lc, err, errlen);
}

static bool refuse(struct client *c, enum extauth_method m, const char *why)
{
	log_client(c, LG_WARNING, "%s", why);
	client_close(c, true, failure_text(m));
	return false;
}

bool extauth_begin(struct client *c, enum extauth_method m, const struct hba_rule *rule)
{
	char err[512];

	if (!extauth_available(m)) {
		snprintf(err, sizeof(err), "%s authentication is not supported by this build (configure --with-%s)",
			 method_name(m), m == EXTAUTH_LDAP ? "ldap" : "pam");
		return refuse(c, m, err);
	}
	struct authpool_job *j = xcalloc(1, sizeof(*j));
	if (m == EXTAUTH_LDAP) {
		struct ldapconf *lc = xcalloc(1, sizeof(*lc));
		j->arg = lc;
		if (!ldap_settings(rule, lc, err, sizeof(err))) {
			authpool_job_free(j);
			return refuse(c, m, err);
		}
		j->run = ldapauth_run;
	} else {
		const char *svc = rule ? hba_rule_option(rule, "pamservice") : NULL;
		j->arg = xstrdup(svc && *svc ? svc : PAM_DEFAULT_SERVICE);
		j->run = pamauth_run;
	}
	j->method = method_name(m);
	strlcpy_(j->user, c->user_name, sizeof(j->user));
	strlcpy_(j->rhost, c->is_unix ? "[local]" : c->addr, sizeof(j->rhost));
	c->auth_job = j;
	return true;
}

static void done(struct client *c, struct authpool_job *j)
{
	if (!j->ok) {
		client_close(c, true, strcmp(j->method, "LDAP") == 0 ? failure_text(EXTAUTH_LDAP)
								 : failure_text(EXTAUTH_PAM));
		return;
	}
	client_extauth_done(c, j->password);
}

void extauth_password(struct client *c, const char *password)
{
	struct authpool_job *j = c->auth_job;

	if (!j) {
		client_close(c, true, "unexpected password packet");
		return;
	}
	if (strlen(password) >= sizeof(j->password)) {
		client_close(c, true, "password too long");
		return;
	}
	strcpy(j->password, password);
	j->done = done;
	c->auth_job = NULL;      /* authpool_submit sets it again */
	if (!authpool_submit(c, j))
		client_close_sqlstate(c, "53300", "too many authentication requests in progress, try again");
}

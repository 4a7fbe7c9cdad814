/* pgcrew — LDAP and PAM logins (see extauth.h): settings are read in the
 * loop when the login starts (a RELOAD may free the HBA rules before the
 * password arrives), the check runs in an authentication thread. */
#include "auth/extauth.h"
#include "auth/authpool.h"
#include "auth/hba.h"
#include "auth/ldapconf.h"
#include "build-config.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAM_DEFAULT_SERVICE "pgbouncer"   /* PgBouncer's service name */

static const char *method_name(enum extauth_method m)
{
	return m == EXTAUTH_LDAP ? "LDAP" : "PAM";
}

const char *extauth_failure_text(enum extauth_method m)
{
	return m == EXTAUTH_LDAP ? "LDAP authentication failed" : "auth failed";
}

const char *extauth_job_failure_text(const struct authpool_job *j)
{
	return extauth_failure_text(strcmp(j->method, "LDAP") == 0 ? EXTAUTH_LDAP : EXTAUTH_PAM);
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

static bool ldap_settings(const struct hba_rule *rule, const char *options, struct ldapconf *lc,
			  char *err, size_t errlen)
{
	if (!rule)
		return ldapconf_parse(lc, options, err, errlen);
	ldapconf_init(lc);
	for (size_t i = 0; i < hba_rule_option_count(rule); i++) {
		const char *name, *value;
		hba_rule_option_at(rule, i, &name, &value);
		if (!ldapconf_set(lc, name, value, err, errlen))
			return false;
	}
	return ldapconf_finish(lc, err, errlen);
}

struct authpool_job *extauth_prepare(enum extauth_method m, const struct hba_rule *rule,
				     const char *ldap_options, const char *user, const char *rhost,
				     char *why, size_t whylen)
{
	if (!extauth_available(m)) {
		snprintf(why, whylen, "%s authentication is not supported by this build (configure --with-%s)",
			 method_name(m), m == EXTAUTH_LDAP ? "ldap" : "pam");
		return NULL;
	}
	struct authpool_job *j = xcalloc(1, sizeof(*j));
	if (m == EXTAUTH_LDAP) {
		struct ldapconf *lc = xcalloc(1, sizeof(*lc));
		j->arg = lc;
		if (!ldap_settings(rule, ldap_options, lc, why, whylen)) {
			authpool_job_free(j);
			return NULL;
		}
		j->run = ldapauth_run;
	} else {
		const char *svc = rule ? hba_rule_option(rule, "pamservice") : NULL;
		j->arg = xstrdup(svc && *svc ? svc : PAM_DEFAULT_SERVICE);
		j->run = pamauth_run;
	}
	j->method = method_name(m);
	strlcpy_(j->user, user, sizeof(j->user));
	strlcpy_(j->rhost, rhost, sizeof(j->rhost));
	return j;
}

bool extauth_set_password(struct authpool_job *j, const char *password)
{
	if (strlen(password) >= sizeof(j->password))
		return false;
	strcpy(j->password, password);
	return true;
}

/* pgcrew — the LDAP check, run in an authentication thread (extauth.h):
 * PostgreSQL's two modes, a simple bind as prefix+user+suffix, or a search
 * (anonymous or as ldapbinddn) for the user's DN followed by a bind as that
 * DN. Every libldap call is synchronous with bounded network timeouts. */
#include "auth/extauth.h"
#include "auth/authpool.h"
#include "auth/ldapconf.h"
#include "build-config.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_LDAP

#include <ldap.h>
#include <sys/time.h>

#define LDAP_NET_TIMEOUT_SEC 3     /* connecting to a server (PgBouncer's) */
#define LDAP_OP_TIMEOUT_SEC 10     /* any one request */

static bool open_ldap(struct authpool_job *j, const struct ldapconf *lc, LDAP **out)
{
	char uris[1024];
	int version = LDAP_VERSION3, rc;
	struct timeval net = { LDAP_NET_TIMEOUT_SEC, 0 }, op = { LDAP_OP_TIMEOUT_SEC, 0 };
	LDAP *ld = NULL;

	if (!ldapconf_uris(lc, uris, sizeof(uris))) {
		snprintf(j->why, sizeof(j->why), "LDAP server list too long");
		return false;
	}
	if ((rc = ldap_initialize(&ld, uris)) != LDAP_SUCCESS) {
		snprintf(j->why, sizeof(j->why), "could not initialize LDAP: %s", ldap_err2string(rc));
		return false;
	}
	if (ldap_set_option(ld, LDAP_OPT_PROTOCOL_VERSION, &version) != LDAP_OPT_SUCCESS ||
	    ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &net) != LDAP_OPT_SUCCESS ||
	    ldap_set_option(ld, LDAP_OPT_TIMEOUT, &op) != LDAP_OPT_SUCCESS ||
	    ldap_set_option(ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF) != LDAP_OPT_SUCCESS) {
		snprintf(j->why, sizeof(j->why), "could not set LDAP options");
		ldap_unbind_ext_s(ld, NULL, NULL);
		return false;
	}
	if (lc->starttls && (rc = ldap_start_tls_s(ld, NULL, NULL)) != LDAP_SUCCESS) {
		snprintf(j->why, sizeof(j->why), "could not start LDAP TLS session: %s, server: %.128s, port: %d",
			 ldap_err2string(rc), lc->server, lc->port);
		ldap_unbind_ext_s(ld, NULL, NULL);
		return false;
	}
	*out = ld;
	return true;
}

static int simple_bind(LDAP *ld, const char *dn, const char *password)
{
	struct berval cred = { .bv_len = strlen(password), .bv_val = (char *)password };
	return ldap_sasl_bind_s(ld, dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL, NULL);
}

static const int scopes[] = {
	[LDAPCONF_SCOPE_BASE] = LDAP_SCOPE_BASE, [LDAPCONF_SCOPE_ONE] = LDAP_SCOPE_ONELEVEL,
	[LDAPCONF_SCOPE_SUB] = LDAP_SCOPE_SUBTREE,
};

/* Search+bind, first half: the DN of the one entry the filter finds. */
static bool find_dn(struct authpool_job *j, const struct ldapconf *lc, char *dn, size_t dnlen)
{
	char filter[LDAPCONF_STR * 2];
	char *attrs[] = { LDAP_NO_ATTRS, NULL };
	LDAPMessage *res = NULL;
	LDAP *ld;
	int rc;

	if (!ldapconf_filter(lc, j->user, filter, sizeof(filter))) {
		snprintf(j->why, sizeof(j->why), "invalid character in user name for LDAP authentication");
		return false;
	}
	if (!open_ldap(j, lc, &ld))
		return false;
	if ((rc = simple_bind(ld, lc->binddn, lc->bindpasswd)) != LDAP_SUCCESS) {
		snprintf(j->why, sizeof(j->why),
			 "could not perform initial LDAP bind for ldapbinddn \"%.128s\" on server \"%.128s\": %s",
			 lc->binddn, lc->server, ldap_err2string(rc));
		goto fail;
	}
	rc = ldap_search_ext_s(ld, lc->basedn, scopes[lc->scope], filter, attrs, 0, NULL, NULL, NULL, 2, &res);
	if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED) {
		snprintf(j->why, sizeof(j->why), "could not search LDAP for filter \"%.160s\" on server \"%.128s\": %s",
			 filter, lc->server, ldap_err2string(rc));
		goto fail;
	}
	int count = ldap_count_entries(ld, res);
	if (count != 1) {
		snprintf(j->why, sizeof(j->why), count == 0 ? "LDAP user \"%s\" does not exist"
			 : "LDAP user \"%s\" is not unique", j->user);
		goto fail;
	}
	char *found = ldap_get_dn(ld, ldap_first_entry(ld, res));
	if (!found || strlen(found) >= dnlen) {
		snprintf(j->why, sizeof(j->why), "could not get dn for the first entry matching \"%.160s\" on server \"%.128s\"",
			 filter, lc->server);
		ldap_memfree(found);
		goto fail;
	}
	strcpy(dn, found);
	ldap_memfree(found);
	ldap_msgfree(res);
	ldap_unbind_ext_s(ld, NULL, NULL);
	return true;
fail:
	ldap_msgfree(res);
	ldap_unbind_ext_s(ld, NULL, NULL);
	return false;
}

void ldapauth_run(struct authpool_job *j)
{
	const struct ldapconf *lc = j->arg;
	char dn[LDAPCONF_STR * 3];
	LDAP *ld;

	j->ok = false;
	/* An empty password would be an unauthenticated bind, which succeeds. */
	if (!j->password[0]) {
		snprintf(j->why, sizeof(j->why), "empty password for LDAP user \"%s\"", j->user);
		return;
	}
	if (lc->search) {
		if (!find_dn(j, lc, dn, sizeof(dn)))
			return;
	} else if (!ldapconf_bind_dn(lc, j->user, dn, sizeof(dn))) {
		snprintf(j->why, sizeof(j->why), "LDAP DN too long for user \"%s\"", j->user);
		return;
	}
	if (!open_ldap(j, lc, &ld))
		return;
	int rc = simple_bind(ld, dn, j->password);
	ldap_unbind_ext_s(ld, NULL, NULL);
	if (rc != LDAP_SUCCESS) {
		snprintf(j->why, sizeof(j->why), "LDAP login failed for user %.200s on server %.128s: %s",
			 dn, lc->server, ldap_err2string(rc));
		return;
	}
	j->ok = true;
}

#else

void ldapauth_run(struct authpool_job *j)
{
	j->ok = false;
	snprintf(j->why, sizeof(j->why), "LDAP authentication is not supported by this build");
}

#endif

/* pgcrew — certificate authentication (see certauth.h). The handshake has
 * already verified the chain (tls.c asks for a certificate whenever
 * auth_type is cert or hba); only a verified certificate yields a CN, which
 * the client code reads and passes in. */
#include "auth/certauth.h"
#include "auth/hba.h"

#include <stdio.h>
#include <string.h>

/* PostgreSQL's answer when there is no usable certificate. */
static enum auth_outcome no_certificate(struct auth_verdict *v, const char *why)
{
	v->outcome = AUTH_REJECT;
	v->sqlstate = "28000";
	snprintf(v->message, sizeof(v->message), "connection requires a valid client certificate");
	snprintf(v->log, sizeof(v->log), "%s", why);
	return v->outcome;
}

static enum auth_outcome refused(struct auth_verdict *v, const char *user)
{
	v->outcome = AUTH_REJECT;
	v->sqlstate = "28000";
	snprintf(v->message, sizeof(v->message), "certificate authentication failed for user \"%s\"", user);
	return v->outcome;
}

enum auth_outcome certauth_check(bool tls, const char *cn, const char *user, bool user_known,
				 const struct hba_ident *ident, const char *map,
				 struct auth_verdict *v)
{
	memset(v, 0, sizeof(*v));
	if (!tls)
		return no_certificate(v, "TLS connection required");
	if (!cn)
		return no_certificate(v, "TLS client certificate required");
	snprintf(v->detail, sizeof(v->detail), "TLS cert login: CN=%s", cn);
	/* As PgBouncer: the user must exist (auth_file or auth_query). */
	if (!user_known)
		return refused(v, user);
	if (map) {
		if (hba_ident_match(ident, map, cn, user))
			return v->outcome = AUTH_ACCEPT;
		snprintf(v->log, sizeof(v->log), "ident map: %s does not have a match", map);
		return refused(v, user);
	}
	if (strcmp(cn, user) == 0)
		return v->outcome = AUTH_ACCEPT;
	snprintf(v->log, sizeof(v->log), "TLS certificate name mismatch");
	return refused(v, user);
}

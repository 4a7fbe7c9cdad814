/* pgcrew — certificate authentication (see certauth.h). The handshake has
 * already verified the chain (tls.c asks for a certificate whenever
 * auth_type is cert or hba); only a verified certificate yields a CN here. */
#include "auth/certauth.h"
#include "auth/hba.h"
#include "client.h"
#include "tls.h"
#include "worker.h"

#include <stdio.h>

/* PostgreSQL's answer when there is no usable certificate. */
static bool no_certificate(struct client *c, const char *why)
{
	log_client(c, LG_ERROR, "%s", why);
	client_close_sqlstate(c, "28000", "connection requires a valid client certificate");
	return false;
}

static bool refused(struct client *c)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "certificate authentication failed for user \"%s\"", c->user_name);
	client_close_sqlstate(c, "28000", msg);
	return false;
}

bool certauth_check(struct client *c, const char *map)
{
	char cn[256];

	if (!c->s.tls)
		return no_certificate(c, "TLS connection required");
	if (!tls_conn_peer_cn(c->s.tls, cn, sizeof(cn)))
		return no_certificate(c, "TLS client certificate required");
	client_debug(c, "TLS cert login: CN=%s", cn);
	/* As PgBouncer: the user must exist (auth_file or auth_query). */
	if (!c->login_user)
		return refused(c);
	if (map) {
		if (hba_ident_match(W->hba_ident, map, cn, c->user_name))
			return true;
		log_client(c, LG_ERROR, "ident map: %s does not have a match", map);
		return refused(c);
	}
	if (strcmp(cn, c->user_name) == 0)
		return true;
	log_client(c, LG_ERROR, "TLS certificate name mismatch");
	return refused(c);
}

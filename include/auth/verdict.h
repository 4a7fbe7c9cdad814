/* pgcrew — what an authentication check decides. The checks under auth/
 * only decide; the client code acts on the verdict: it logs `log` (the
 * reason, in PgBouncer's or PostgreSQL's words) and closes the client with
 * `sqlstate` and `message`, or lets it in. */
#ifndef PGCREW_AUTH_VERDICT_H
#define PGCREW_AUTH_VERDICT_H

#include "types.h"

enum auth_outcome {
	AUTH_ACCEPT,
	AUTH_REJECT,
};

struct auth_verdict {
	enum auth_outcome outcome;
	const char *sqlstate;       /* AUTH_REJECT: for the client's ErrorResponse */
	char message[256];          /* AUTH_REJECT: what the client is told */
	char log[640];              /* the reason, logged at ERROR; "" for none */
	char detail[320];           /* a debug note, whatever the outcome ("CN=..."); "" for none */
};

#endif

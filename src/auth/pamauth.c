/* pgcrew — the PAM check, run in an authentication thread (extauth.h):
 * pam_authenticate then pam_acct_mgmt for the job's service, the password
 * answering every hidden prompt, as PgBouncer does. */
#include "auth/extauth.h"
#include "auth/authpool.h"
#include "build-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_PAM

#include <security/pam_appl.h>

/* The conversation: hidden prompts get the password, visible prompts
 * nothing (there is no one to ask), messages are ignored. */
static int converse(int n, const struct pam_message **msg, struct pam_response **resp, void *arg)
{
	struct authpool_job *j = arg;

	if (n < 1 || n > PAM_MAX_NUM_MSG)
		return PAM_CONV_ERR;
	struct pam_response *r = calloc((size_t)n, sizeof(*r));
	if (!r)
		return PAM_BUF_ERR;
	for (int i = 0; i < n; i++) {
		if (msg[i]->msg_style != PAM_PROMPT_ECHO_OFF)
			continue;
		r[i].resp = strdup(j->password);
		if (!r[i].resp) {
			for (int k = 0; k < i; k++)
				free(r[k].resp);
			free(r);
			return PAM_BUF_ERR;
		}
	}
	*resp = r;
	return PAM_SUCCESS;
}

void pamauth_run(struct authpool_job *j)
{
	const char *service = j->arg;
	struct pam_conv conv = { .conv = converse, .appdata_ptr = j };
	pam_handle_t *ph = NULL;

	j->ok = false;
	int rc = pam_start(service, j->user, &conv, &ph);
	if (rc != PAM_SUCCESS) {
		snprintf(j->why, sizeof(j->why), "pam_start() failed: %s", pam_strerror(ph, rc));
		return;
	}
	if ((rc = pam_set_item(ph, PAM_RHOST, j->rhost)) != PAM_SUCCESS)
		snprintf(j->why, sizeof(j->why), "pam_set_item(): can't set PAM_RHOST to '%s'", j->rhost);
	else if ((rc = pam_authenticate(ph, PAM_SILENT)) != PAM_SUCCESS)
		snprintf(j->why, sizeof(j->why), "pam_authenticate() failed: %s", pam_strerror(ph, rc));
	else if ((rc = pam_acct_mgmt(ph, PAM_SILENT)) != PAM_SUCCESS)
		snprintf(j->why, sizeof(j->why), "pam_acct_mgmt() failed: %s", pam_strerror(ph, rc));
	else
		j->ok = true;
	pam_end(ph, rc);
}

#else

void pamauth_run(struct authpool_job *j)
{
	j->ok = false;
	snprintf(j->why, sizeof(j->why), "PAM authentication is not supported by this build");
}

#endif

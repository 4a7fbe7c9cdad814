/* pgcrew — peer authentication (see peerauth.h). The kernel vouches for the
 * client's uid (SO_PEERCRED is taken at connect time, so a client cannot
 * change it afterwards); the name comes from the password database. */
#include "auth/peerauth.h"
#include "auth/hba.h"
#include "client.h"
#include "worker.h"

#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool peerauth_os_user(int fd, char *buf, size_t len, const char **why)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct passwd pw, *found = NULL;
	char pwbuf[4096];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || clen != sizeof(cred)) {
		*why = "could not get peer credentials";
		return false;
	}
	if (getpwuid_r(cred.uid, &pw, pwbuf, sizeof(pwbuf), &found) != 0 || !found) {
		*why = "could not look up local user ID";
		return false;
	}
	if (strlen(found->pw_name) >= len) {
		*why = "local user name too long";
		return false;
	}
	strcpy(buf, found->pw_name);
	return true;
}

static bool refused(struct client *c)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "Peer authentication failed for user \"%s\"", c->user_name);
	client_close_sqlstate(c, "28000", msg);
	return false;
}

bool peerauth_check(struct client *c, const char *map)
{
	char osuser[256];
	const char *why = NULL;

	if (!c->is_unix) {
		log_client(c, LG_ERROR, "peer authentication is only available on local connections");
		return refused(c);
	}
	if (!peerauth_os_user(c->s.fd, osuser, sizeof(osuser), &why)) {
		log_client(c, LG_ERROR, "%s", why);
		return refused(c);
	}
	client_debug(c, "peer login: os_user=%s", osuser);
	/* As for cert: the user must exist (auth_file or auth_query). */
	if (!c->login_user) {
		log_client(c, LG_ERROR, "no such user: %s", c->user_name);
		return refused(c);
	}
	if (map) {
		if (hba_ident_match(W->hba_ident, map, osuser, c->user_name))
			return true;
		log_client(c, LG_ERROR, "no match in ident map \"%s\" for OS user \"%s\"", map, osuser);
		return refused(c);
	}
	if (strcmp(osuser, c->user_name) == 0)
		return true;
	log_client(c, LG_ERROR, "provided user name (%s) and authenticated user name (%s) do not match",
		   c->user_name, osuser);
	return refused(c);
}

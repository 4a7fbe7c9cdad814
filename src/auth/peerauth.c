/* pgcrew — peer authentication (see peerauth.h). The kernel vouches for the
 * client's uid (SO_PEERCRED is taken at connect time, so a client cannot
 * change it afterwards); the name comes from the password database. */
#include "auth/peerauth.h"
#include "auth/hba.h"

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

static enum auth_outcome refused(struct auth_verdict *v, const char *user)
{
	v->outcome = AUTH_REJECT;
	v->sqlstate = "28000";
	snprintf(v->message, sizeof(v->message), "Peer authentication failed for user \"%s\"", user);
	return v->outcome;
}

enum auth_outcome peerauth_check(bool is_unix, int fd, const char *user, bool user_known,
				 const struct hba_ident *ident, const char *map,
				 struct auth_verdict *v)
{
	char osuser[256];
	const char *why = NULL;

	memset(v, 0, sizeof(*v));
	if (!is_unix) {
		snprintf(v->log, sizeof(v->log), "peer authentication is only available on local connections");
		return refused(v, user);
	}
	if (!peerauth_os_user(fd, osuser, sizeof(osuser), &why)) {
		snprintf(v->log, sizeof(v->log), "%s", why);
		return refused(v, user);
	}
	snprintf(v->detail, sizeof(v->detail), "peer login: os_user=%s", osuser);
	/* As for cert: the user must exist (auth_file or auth_query). */
	if (!user_known) {
		snprintf(v->log, sizeof(v->log), "no such user: %s", user);
		return refused(v, user);
	}
	if (map) {
		if (hba_ident_match(ident, map, osuser, user))
			return v->outcome = AUTH_ACCEPT;
		snprintf(v->log, sizeof(v->log), "no match in ident map \"%s\" for OS user \"%s\"", map,
			 osuser);
		return refused(v, user);
	}
	if (strcmp(osuser, user) == 0)
		return v->outcome = AUTH_ACCEPT;
	snprintf(v->log, sizeof(v->log),
		 "provided user name (%s) and authenticated user name (%s) do not match", user, osuser);
	return refused(v, user);
}

/* pgcrew — peer authentication (HBA method peer, local lines only): the
 * operating-system user of a Unix-socket client, from the kernel
 * (SO_PEERCRED), names the user directly or through an ident map (map=). */
#ifndef PGCREW_AUTH_PEERAUTH_H
#define PGCREW_AUTH_PEERAUTH_H

#include "auth/verdict.h"

struct hba_ident;

/* May the OS user at the other end of Unix socket fd (is_unix false: a TCP
 * client, always refused) log in as `user` (user_known: in auth_file or
 * found by auth_query)? map is the HBA line's map= (NULL: the OS user name
 * must equal the user). Rejections say "Peer authentication failed for
 * user", with the reason for the log. */
enum auth_outcome peerauth_check(bool is_unix, int fd, const char *user, bool user_known,
				 const struct hba_ident *ident, const char *map,
				 struct auth_verdict *v);

/* The OS user name of the process at the other end of Unix socket fd, in
 * buf. False with errno-free reason in why when it cannot be known. */
bool peerauth_os_user(int fd, char *buf, size_t len, const char **why) MUSTCHECK;

#endif

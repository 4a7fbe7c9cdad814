/* pgcrew — peer authentication (HBA method peer, local lines only): the
 * operating-system user of a Unix-socket client, from the kernel
 * (SO_PEERCRED), names the user directly or through an ident map (map=). */
#ifndef PGCREW_AUTH_PEERAUTH_H
#define PGCREW_AUTH_PEERAUTH_H

#include "types.h"

struct client;

/* True when the client's OS user may log in as its user; otherwise c is
 * closed with PostgreSQL's wording ("Peer authentication failed for user")
 * and the reason logged. map is the HBA line's map= (NULL: the OS user name
 * must equal the user). */
bool peerauth_check(struct client *c, const char *map) MUSTCHECK;

/* The OS user name of the process at the other end of Unix socket fd, in
 * buf. False with errno-free reason in why when it cannot be known. */
bool peerauth_os_user(int fd, char *buf, size_t len, const char **why) MUSTCHECK;

#endif

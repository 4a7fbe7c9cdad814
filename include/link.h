/* pgcrew — the link between a client and the server it holds: the only
 * code that writes both sides (client.link, server.link and their streams'
 * peers). Attach asserts both are free and of one pool; detach asserts
 * they are linked to each other, and says what happens to bytes in flight. */
#ifndef PGCREW_LINK_H
#define PGCREW_LINK_H

#include "objects.h"

/* What a detach does with what one side was forwarding to the other. */
enum link_end {
	LINK_RELEASE,        /* the transaction is over, from inside the server's
	                        own callback: what is being forwarded still goes */
	LINK_SERVER_GONE,    /* the server closes: the client forgets it */
	LINK_CLIENT_GONE,    /* the client went: the server forgets it */
	LINK_BOTH_GO,        /* both leave (online restart, fast close) */
};

void link_attach(struct client *c, struct server *sv);
void link_detach(struct client *c, struct server *sv, enum link_end how);
/* sv's client if linked, detached with how; NULL when sv had none. */
struct client *link_detach_server(struct server *sv, enum link_end how);
/* A server joining or leaving its pool's idle list has no client. */
void link_assert_free(const struct server *sv);

#endif

/* pgcrew — a new TCP client's PROXY protocol phase (proxy_protocol = 1):
 * before its first packet, a load balancer listed in proxy_protocol_sources
 * sends a v1 or v2 header naming the real client, which becomes the
 * client's address everywhere (HBA, SHOW CLIENTS, logs). */
#ifndef PGCREW_PROXY_ACCEPT_H
#define PGCREW_PROXY_ACCEPT_H

#include "objects.h"

struct config;

/* The worker's parsed proxy_protocol_sources, again after each reload.
 * False (the old list kept) when the text does not parse. */
bool proxy_accept_configure(const struct config *cfg);
void proxy_accept_free_all(void);

/* Is the phase due for this new connection? */
bool proxy_accept_wanted(const struct client *c);
/* Reads the header (or finds there is none) on c's socket, then calls
 * done(c) with the client's own bytes next on the socket. On any fault
 * failed(c, why, warn) is called instead: the caller closes c without a
 * word, logging why as a WARNING when warn (a refused header; not for a
 * connection that simply broke). */
void proxy_accept_start(struct client *c, void (*done)(struct client *c),
			void (*failed)(struct client *c, const char *why, bool warn));
/* c goes away during the phase. */
void proxy_accept_cancel(struct client *c);

#endif

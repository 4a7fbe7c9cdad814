/* pgcrew — console views of one worker's sockets and memory: SHOW CLIENTS,
 * SERVERS, SOCKETS, ACTIVE_SOCKETS, FDS and MEM with PgBouncer 1.25's columns
 * (FDS adds the whole cancel key), and pgcrew's PROTOCOLS. */
#ifndef PGCREW_ADMIN_SOCKETS_H
#define PGCREW_ADMIN_SOCKETS_H

struct result;

void admin_view_clients(struct result *r);
void admin_view_servers(struct result *r);
void admin_view_sockets(struct result *r);
void admin_view_active_sockets(struct result *r);
void admin_view_fds(struct result *r);
void admin_view_protocols(struct result *r);     /* pgcrew */
void admin_view_mem(struct result *r);

#endif

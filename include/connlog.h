/* pgcrew — log lines about one connection, with PgBouncer's prefixes:
 * "C-<id>: db/user@addr:port" for a client, "S-<id>: ..." for a server.
 * Their own module, so that code which only logs about a connection does
 * not depend on the client or server state machines. */
#ifndef PGCREW_CONNLOG_H
#define PGCREW_CONNLOG_H

#include "log.h"
#include "objects.h"

void log_client(const struct client *c, enum log_level lvl, const char *fmt, ...) PRINTF(3, 4);
#define client_debug(c, ...) do { if (log_verbose >= 1) log_client(c, LG_DEBUG, __VA_ARGS__); } while (0)
void log_server(const struct server *sv, enum log_level lvl, const char *fmt, ...) PRINTF(3, 4);
#define server_debug(sv, ...) do { if (log_verbose >= 1) log_server(sv, LG_DEBUG, __VA_ARGS__); } while (0)

#endif

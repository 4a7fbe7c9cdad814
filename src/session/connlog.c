/* pgcrew — log lines about one connection (connlog.h). */
#include "connlog.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>

void log_client(const struct client *c, enum log_level lvl, const char *fmt, ...)
{
	char msg[1024], where[CLIENT_ADDR_LEN + 16];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(lvl, "C-%llu: %s/%s@%s %s", (unsigned long long)c->id,
		c->db_name[0] ? c->db_name : "(nodb)", c->user_name[0] ? c->user_name : "(nouser)",
		util_addr_port(where, sizeof(where), c->addr, c->port), msg);
}

void log_server(const struct server *sv, enum log_level lvl, const char *fmt, ...)
{
	char msg[1024], where[sizeof(sv->addr) + 16];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(lvl, "S-%llu: %s/%s@%s %s", (unsigned long long)sv->id,
		sv->pool->db->name, sv->pool->user->name,
		util_addr_port(where, sizeof(where), sv->addr, sv->port), msg);
}

/* pgcrew — the extended query protocol on the admin console (PgBouncer
 * issue #1178: drivers such as pgx, JDBC and asyncpg always use it). Parse,
 * Bind, Describe, Execute, Close, Flush and Sync around the console's
 * commands; no parameters; text or binary result formats. */
#ifndef PGCREW_ADMIN_EXT_H
#define PGCREW_ADMIN_EXT_H

#include "objects.h"

struct pktbuf;
struct world;

enum stream_action admin_ext_message(struct client *c, uint8_t type, const uint8_t *body, size_t len);
void admin_ext_free(struct client *c);

/* Copy a result (RowDescription + DataRows) to pb: without the
 * RowDescription unless header, and with the columns a Bind asked for in
 * binary (formats as in Bind: none = text, one = all, else per column)
 * encoded as PostgreSQL sends int2/int4/int8 and text. */
void admin_ext_encode_rows(struct pktbuf *pb, const uint8_t *buf, size_t len, bool header,
			   const int16_t *formats, int n_formats);

/* admin.c */
enum stream_action admin_run_text(struct client *c, const char *sql, bool header, const int16_t *formats,
				  int n_formats, bool *failed);
bool admin_describe(struct world *w, const char *text, struct pktbuf *pb);

#endif

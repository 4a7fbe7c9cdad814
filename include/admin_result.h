/* pgcrew — building one console result: a RowDescription, then DataRows in
 * text format, in a pktbuf. Shared by the console's view modules (admin.c,
 * admin_sockets.c). */
#ifndef PGCREW_ADMIN_RESULT_H
#define PGCREW_ADMIN_RESULT_H

#include "proto/build.h"
#include "util.h"

#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25

struct world;

struct result {
	struct world *world;            /* whose objects it shows */
	struct pktbuf pb;
	int ncols;
	int nrows;
};

#define COLS(...) (const char *const[]){ __VA_ARGS__ }
#define TYPES(...) (const int[]){ __VA_ARGS__ }

void res_begin(struct result *r, const char *const *names, const int *types, int n);
/* fmt: one char per column: s = string (NULL = SQL NULL), i = int, q = uint64 */
void res_row(struct result *r, const char *fmt, ...);
/* A monotonic time as the wall-clock timestamp PgBouncer prints. */
void admin_fmt_time(char *buf, size_t len, usec_t mono);

#endif

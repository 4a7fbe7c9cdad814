/* pgcrew — merging SHOW rows from every worker into one view. Each worker
 * answers with DataRow messages; a view's merge rule says, per column,
 * whether it is part of the row's key, summed, the maximum, or taken from
 * the first worker, so SHOW POOLS shows one row per pool for the instance
 * while SHOW CLIENTS simply lists every worker's clients. */
#ifndef PGCREW_ROWMERGE_H
#define PGCREW_ROWMERGE_H

#include "types.h"

struct pktbuf;

/*
 * Column rules, one character per column:
 *   k  key: rows with equal keys merge
 *   s  a text key, rows written in its ascending order (strcmp), as
 *      PgBouncer keeps its databases, users and pools
 *   n  a numeric key: the same, and rows are written in its ascending order
 *   +  sum (integers)
 *   M  maximum (integers)
 *   f  the first worker's value
 *   W w  a (seconds, microseconds) pair: the larger pair, both columns from
 *      the same worker
 *   L  SHOW LISTS' items: the maximum for lists every worker holds a copy
 *      of (databases, users, pools, ...), the sum for the others
 * A NULL rule concatenates rows without merging.
 */
struct rowset {
	const char *rule;
	int ncols;
	int nrows, cap;
	char ***rows;              /* rows[i][j]: NUL-terminated, or NULL for SQL NULL */
	int *index;                /* rows by the hash of their key columns (rowmerge.c) */
	int index_cap;
};

void rowset_init(struct rowset *rs, const char *rule);
/* Add a run of DataRow messages (other message types are skipped). False
 * when the bytes are not well-formed messages or the column count differs. */
bool rowset_add(struct rowset *rs, const uint8_t *buf, size_t len);
/* Append the merged rows as DataRow messages. */
void rowset_write(const struct rowset *rs, struct pktbuf *pb);
void rowset_free(struct rowset *rs);

#endif

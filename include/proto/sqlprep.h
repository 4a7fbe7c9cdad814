/* pgcrew — recognising a simple Query whose whole text is one SQL PREPARE,
 * EXECUTE or DEALLOCATE statement, and where its name and the rest are, so
 * that prepared.c can map the name like a protocol-level statement. Anything
 * else is "not ours" and passes through untouched. */
#ifndef PGCREW_PROTO_SQLPREP_H
#define PGCREW_PROTO_SQLPREP_H

#include <stdbool.h>
#include <stddef.h>

/* NAMEDATALEN - 1: PostgreSQL cuts longer identifiers to this many bytes. */
#define SQLPREP_NAME_MAX 63

enum sqlprep_kind {
	SQLPREP_NONE,            /* not one of ours */
	SQLPREP_PREPARE,         /* PREPARE name [(types)] AS statement */
	SQLPREP_EXECUTE,         /* EXECUTE name [(args)] */
	SQLPREP_DEALLOCATE,      /* DEALLOCATE [PREPARE] name */
	SQLPREP_DEALLOCATE_ALL,  /* DEALLOCATE [PREPARE] ALL */
};

/* Offsets are into the text given to sqlprep_scan. */
struct sqlprep {
	enum sqlprep_kind kind;
	size_t name_end;         /* just past the name as written */
	size_t rest;             /* PREPARE: its '(' or AS; EXECUTE: '(' or end */
	size_t end;              /* just past the statement's last token */
	size_t name_len;
	char name[SQLPREP_NAME_MAX + 1];  /* as PostgreSQL folds it: unquoted
	                                     lower-cased, quoted kept, then cut */
};

/* prefix = the first len bytes of a query (maybe not all of it): false when
 * it certainly does not start with PREPARE, EXECUTE or DEALLOCATE, so the
 * rest need not be read. */
bool sqlprep_maybe(const char *prefix, size_t len);
/* The whole query text (len bytes, no NUL inside): the statement's kind,
 * with *out filled, or SQLPREP_NONE (multi-statement, other statement,
 * unterminated quote or comment, ...). Never reads outside [text, text+len). */
enum sqlprep_kind sqlprep_scan(const char *text, size_t len, struct sqlprep *out);

#endif

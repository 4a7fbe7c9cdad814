/* pgcrew — ErrorResponse / NoticeResponse: building the pooler's own errors
 * the way PgBouncer sends them, and parsing the ones servers send, without
 * trusting that any particular field is present. */
#ifndef PGCREW_PROTO_ERROR_H
#define PGCREW_PROTO_ERROR_H

#include "proto/build.h"
#include "types.h"

/* E with fields S, V (both = severity), C, M, then the terminator.
 * severity is "ERROR" or "FATAL"; sqlstate NULL means "XX000". */
void pkt_write_error(struct pktbuf *pb, const char *severity, const char *sqlstate,
		     const char *fmt, ...) PRINTF(4, 5);

/* Fields of a parsed E/N body. Pointers point into the body; "" when absent. */
struct pg_error {
	const char *severity;  /* V (non-localized) if present, else S */
	const char *sqlstate;  /* C */
	const char *message;   /* M */
	const char *detail;    /* D */
	const char *hint;      /* H */
};

/* body = the bytes after the 5-byte header of an 'E' or 'N' message. Returns
 * false unless the body is a list of (code byte, NUL-terminated string)
 * fields ended by a zero byte that is the body's last byte. Missing fields,
 * SQLSTATE included (a server or impostor may omit it), are "" and do not
 * make it fail. */
bool pkt_parse_error(const uint8_t *body, size_t len, struct pg_error *out) MUSTCHECK;

/* An 'E'/'N' body of len bytes of which only the first `have` may be
 * buffered (an error can be far larger than the I/O buffer: it quotes the
 * input). PKT_OK: *val is field `code` (the first one), or NULL when the
 * message has none; PKT_NEED_MORE: the fields read so far do not have it
 * and the rest is not buffered; PKT_BAD: malformed. PostgreSQL sends S, V,
 * C and M first, so a check of the SQLSTATE rarely needs more than the
 * first bytes; with any other order it needs more, up to the whole. */
enum pkt_status pkt_error_field(const uint8_t *body, size_t have, size_t len, uint8_t code,
				const char **val) MUSTCHECK;

enum pkt_match {
	PKT_MATCH_NO,        /* not that error (or malformed) */
	PKT_MATCH_YES,
	PKT_MATCH_NEED_MORE, /* the fields that decide are not buffered yet */
};

/* Is this (partly buffered, as above) body an error with SQLSTATE sqlstate
 * whose message (M) contains text (NULL: any message)? */
enum pkt_match pkt_error_is(const uint8_t *body, size_t have, size_t len, const char *sqlstate,
			    const char *text) MUSTCHECK;

#endif

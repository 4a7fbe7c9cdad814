/* pgcrew — ErrorResponse: the pooler's own errors in PgBouncer's field
 * layout, and a parser for server errors and notices that tolerates any
 * missing field (PgBouncer once dereferenced a missing SQLSTATE).
 *
 * INTERFACE ROUTINES
 *	pkt_write_error		- append an 'E' message with S, V, C and a formatted M
 *	pkt_parse_error		- split an 'E'/'N' body into severity, SQLSTATE, message, detail, hint
 *	pkt_error_field		- one field of an 'E'/'N' body of which only a prefix may be buffered
 *	pkt_error_is		- SQLSTATE (and message text) check on such a prefix
 */
#include "proto/error.h"

#include <string.h>

#include "proto/packet.h"

void pkt_write_error(struct pktbuf *pb, const char *severity, const char *sqlstate,
		     const char *fmt, ...)
{
	va_list ap;

	pktbuf_begin(pb, 'E');
	pktbuf_put_u8(pb, 'S');
	pktbuf_put_string(pb, severity);
	pktbuf_put_u8(pb, 'V');
	pktbuf_put_string(pb, severity);
	pktbuf_put_u8(pb, 'C');
	pktbuf_put_string(pb, sqlstate ? sqlstate : "XX000");
	pktbuf_put_u8(pb, 'M');
	va_start(ap, fmt);
	pktbuf_put_vformat(pb, fmt, ap);
	va_end(ap);
	pktbuf_put_u8(pb, 0);
	pktbuf_finish(pb);
}

/* Stores one field's value where the caller wants it; fields we do not
 * report (position, where, file, line, ...) are skipped. */
static void store_field(struct pg_error *out, uint8_t code, const char *val, bool *have_v)
{
	switch (code) {
	case 'V':
		out->severity = val;
		*have_v = true;
		break;
	case 'S':
		if (!*have_v)
			out->severity = val;    /* localized; V wins when present */
		break;
	case 'C':
		out->sqlstate = val;
		break;
	case 'M':
		out->message = val;
		break;
	case 'D':
		out->detail = val;
		break;
	case 'H':
		out->hint = val;
		break;
	default:
		break;
	}
}

/* Parses into a local copy so that on failure *out holds only "" fields,
 * never a pointer picked up before the garbage. */
bool pkt_parse_error(const uint8_t *body, size_t len, struct pg_error *out)
{
	struct pg_error e = { "", "", "", "", "" };
	struct pkt_reader r;
	bool have_v = false;

	*out = e;
	pkt_reader_init(&r, body, len);
	for (;;) {
		uint8_t code = pkt_get_u8(&r);
		if (r.failed)
			return false;       /* ran out before the terminator */
		if (code == 0)
			break;
		const char *val = pkt_get_string(&r);
		if (r.failed)
			return false;
		store_field(&e, code, val, &have_v);
	}
	if (!pkt_get_end(&r))
		return false;               /* bytes after the terminator */
	*out = e;
	return true;
}

/* Walks the fields in [0, have): each is a code byte and a NUL-terminated
 * string; a zero code ends the list. A field cut off by `have` is unread. */
enum pkt_status pkt_error_field(const uint8_t *body, size_t have, size_t len, uint8_t code,
				const char **val)
{
	size_t pos = 0;

	*val = NULL;
	if (have > len)
		have = len;
	while (pos < have) {
		uint8_t c = body[pos++];
		if (c == 0)
			return PKT_OK;          /* the end: no such field */
		const uint8_t *nul = memchr(body + pos, 0, have - pos);
		if (!nul)
			break;
		if (c == code) {
			*val = (const char *)body + pos;
			return PKT_OK;
		}
		pos = (size_t)(nul - body) + 1;
	}
	return have < len ? PKT_NEED_MORE : PKT_BAD;
}

enum pkt_match pkt_error_is(const uint8_t *body, size_t have, size_t len, const char *sqlstate,
			    const char *text)
{
	const char *state, *msg;

	enum pkt_status st = pkt_error_field(body, have, len, 'C', &state);
	if (st != PKT_OK || !state || strcmp(state, sqlstate) != 0)
		return st == PKT_NEED_MORE ? PKT_MATCH_NEED_MORE : PKT_MATCH_NO;
	if (!text)
		return PKT_MATCH_YES;
	st = pkt_error_field(body, have, len, 'M', &msg);
	if (st != PKT_OK || !msg)
		return st == PKT_NEED_MORE ? PKT_MATCH_NEED_MORE : PKT_MATCH_NO;
	return strstr(msg, text) ? PKT_MATCH_YES : PKT_MATCH_NO;
}

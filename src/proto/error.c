/* pgcrew — ErrorResponse: the pooler's own errors in PgBouncer's field
 * layout, and a parser for server errors and notices that tolerates any
 * missing field (PgBouncer once dereferenced a missing SQLSTATE).
 *
 * INTERFACE ROUTINES
 *	pkt_write_error		- append an 'E' message with S, V, C and a formatted M
 *	pkt_parse_error		- split an 'E'/'N' body into severity, SQLSTATE, message, detail, hint
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

/* pgcrew — PostgreSQL v3 framing: header validation before buffering,
 * direct-TLS sniffing, message type names, and the body reader cursor.
 * Pure functions over byte buffers; no I/O.
 *
 * INTERFACE ROUTINES
 *	pkt_parse_header	- validate a typed or startup header incrementally
 *	pkt_is_tls_hello	- does the stream start with a TLS ClientHello record
 *	pkt_type_name		- message type byte to a name, per direction
 *	pkt_ready_status	- transaction status of a complete ReadyForQuery
 *	pkt_status_name		- enum pkt_status to text
 *	pkt_reader_init		- start reading a message body
 *	pkt_get_u8 / pkt_get_u16 / pkt_get_u32 / pkt_get_i32 - big-endian integers
 *	pkt_get_string		- NUL-terminated string inside the body
 *	pkt_get_bytes		- n raw bytes inside the body
 *	pkt_get_end		- was the body consumed exactly, without failure
 */
#include "proto/packet.h"

#include <string.h>

static uint32_t read_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static enum pkt_status header_bad(const char **why, const char *reason)
{
	if (why)
		*why = reason;
	return PKT_BAD;
}

/* The length word counts itself but not the type byte, so a typed packet
 * occupies word + 1 bytes and a startup packet word bytes. Everything is
 * computed in 64 bits: the peer controls the word. */
enum pkt_status pkt_parse_header(const uint8_t *p, size_t avail, bool startup, uint32_t max_len,
				 struct pkt_hdr *out, const char **why)
{
	uint32_t hdr_len = startup ? PKT_STARTUP_HDR : PKT_TYPED_HDR;
	if (avail < hdr_len)
		return PKT_NEED_MORE;

	uint8_t type = startup ? 0 : p[0];
	uint32_t word = read_be32(p + hdr_len - 4);
	uint64_t limit = max_len;
	uint64_t total = (uint64_t)word + (startup ? 0 : 1);

	if (startup) {
		if (word < PKT_STARTUP_MIN)
			return header_bad(why, "startup packet too short");
		if (limit > PKT_STARTUP_MAX)
			limit = PKT_STARTUP_MAX;
		if (total > limit)
			return header_bad(why, "startup packet too long");
	} else {
		if (word < 4)
			return header_bad(why, "invalid packet length");
		if (total > limit)
			return header_bad(why, "packet exceeds max_packet_size");
	}
	out->type = type;
	out->len = (uint32_t)total;
	out->hdr_len = hdr_len;
	return PKT_OK;
}

/* TLS record header: content type 22 (handshake), legacy version 3.x with
 * x <= 4, then two length bytes; the handshake body starts with its type,
 * 1 = ClientHello. */
bool pkt_is_tls_hello(const uint8_t *p, size_t avail)
{
	if (avail < 3)
		return false;
	if (p[0] != 0x16 || p[1] != 0x03 || p[2] > 0x04)
		return false;
	if (avail >= 6 && p[5] != 0x01)
		return false;
	return true;
}

static const char *const frontend_names[256] = {
	[0] = "StartupPacket",
	['B'] = "Bind", ['C'] = "Close", ['d'] = "CopyData", ['c'] = "CopyDone",
	['f'] = "CopyFail", ['D'] = "Describe", ['E'] = "Execute", ['H'] = "Flush",
	['F'] = "FunctionCall", ['p'] = "PasswordMessage", ['P'] = "Parse",
	['Q'] = "Query", ['S'] = "Sync", ['X'] = "Terminate",
};

static const char *const backend_names[256] = {
	[0] = "StartupPacket",
	['R'] = "Authentication", ['K'] = "BackendKeyData", ['2'] = "BindComplete",
	['3'] = "CloseComplete", ['C'] = "CommandComplete", ['d'] = "CopyData",
	['c'] = "CopyDone", ['G'] = "CopyInResponse", ['H'] = "CopyOutResponse",
	['W'] = "CopyBothResponse", ['D'] = "DataRow", ['I'] = "EmptyQueryResponse",
	['E'] = "ErrorResponse", ['V'] = "FunctionCallResponse",
	['v'] = "NegotiateProtocolVersion", ['n'] = "NoData", ['N'] = "NoticeResponse",
	['A'] = "NotificationResponse", ['t'] = "ParameterDescription",
	['S'] = "ParameterStatus", ['1'] = "ParseComplete", ['s'] = "PortalSuspended",
	['Z'] = "ReadyForQuery", ['T'] = "RowDescription",
};

const char *pkt_type_name(uint8_t type, bool from_server)
{
	const char *name = from_server ? backend_names[type] : frontend_names[type];
	return name ? name : "unknown";
}

bool pkt_ready_status(const uint8_t *pkt, size_t len, char *status)
{
	if (len != 6 || pkt[0] != 'Z' || read_be32(pkt + 1) != 5)
		return false;
	char st = (char)pkt[5];
	if (st != 'I' && st != 'T' && st != 'E')
		return false;
	*status = st;
	return true;
}

static const char *const status_names[] = {
	[PKT_NEED_MORE] = "need-more", [PKT_OK] = "ok", [PKT_BAD] = "bad",
};
_Static_assert(ARRAY_SIZE(status_names) == PKT_BAD + 1, "status_names");

const char *pkt_status_name(enum pkt_status st)
{
	return (unsigned)st < ARRAY_SIZE(status_names) ? status_names[st] : "?";
}

/* An empty body may come as NULL; pointing at a real byte keeps every later
 * pointer computation defined. */
void pkt_reader_init(struct pkt_reader *r, const uint8_t *body, size_t len)
{
	static const uint8_t no_body[1];
	r->p = body ? body : no_body;
	r->len = len;
	r->pos = 0;
	r->failed = false;
}

/* Returns the next n bytes and advances, or NULL (setting failed) when the
 * reader has already failed or fewer than n bytes remain. */
static const uint8_t *take(struct pkt_reader *r, size_t n)
{
	if (r->failed || n > r->len - r->pos) {
		r->failed = true;
		return NULL;
	}
	const uint8_t *at = r->p + r->pos;
	r->pos += n;
	return at;
}

uint8_t pkt_get_u8(struct pkt_reader *r)
{
	const uint8_t *b = take(r, 1);
	return b ? b[0] : 0;
}

uint16_t pkt_get_u16(struct pkt_reader *r)
{
	const uint8_t *b = take(r, 2);
	return b ? (uint16_t)(b[0] << 8 | b[1]) : 0;
}

uint32_t pkt_get_u32(struct pkt_reader *r)
{
	const uint8_t *b = take(r, 4);
	return b ? read_be32(b) : 0;
}

int32_t pkt_get_i32(struct pkt_reader *r)
{
	uint32_t v = pkt_get_u32(r);
	int32_t s;
	memcpy(&s, &v, sizeof(s));    /* two's complement reinterpretation, no UB */
	return s;
}

const char *pkt_get_string(struct pkt_reader *r)
{
	if (r->failed || r->pos == r->len) {
		r->failed = true;
		return "";
	}
	const uint8_t *start = r->p + r->pos;
	const uint8_t *nul = memchr(start, 0, r->len - r->pos);
	if (!nul) {
		r->failed = true;
		return "";
	}
	r->pos += (size_t)(nul - start) + 1;
	return (const char *)start;
}

const uint8_t *pkt_get_bytes(struct pkt_reader *r, size_t n)
{
	return take(r, n);
}

bool pkt_get_end(const struct pkt_reader *r)
{
	return !r->failed && r->pos == r->len;
}

/* pgcrew — PostgreSQL v3 message builder: begin / put_* / finish with the
 * length patched in at finish and a sticky error (STYLE rule 11), and one
 * writer per whole message the pooler originates.
 *
 * INTERFACE ROUTINES
 *	pktbuf_init		- heap buffer that grows up to PKTBUF_MAX_HEAP
 *	pktbuf_init_fixed	- caller-owned buffer that never grows
 *	pktbuf_reset		- forget contents and any failure
 *	pktbuf_free		- release heap storage
 *	pktbuf_begin		- start a message (type 0 = startup-style, no type byte)
 *	pktbuf_put_u8 / _u16 / _u32 - big-endian integers
 *	pktbuf_put_string	- string with its NUL
 *	pktbuf_put_bytes	- raw bytes
 *	pktbuf_put_vformat	- printf-formatted string with its NUL
 *	pktbuf_finish		- patch the current message's length word
 *	pktbuf_failed		- did anything fail since init/reset
 *	pkt_write_auth_ok / _cleartext / _md5 / _sasl / _sasl_continue / _sasl_final - 'R'
 *	pkt_write_parameter_status	- 'S'
 *	pkt_write_backend_key		- 'K'
 *	pkt_write_ready			- 'Z'
 *	pkt_write_query			- 'Q'
 *	pkt_write_terminate		- 'X'
 *	pkt_write_password / _sasl_initial / _sasl_response - 'p'
 *	pkt_write_startup		- v3.x StartupMessage
 *	pkt_write_ssl_request		- SSLRequest
 *	pkt_write_cancel_request	- CancelRequest
 *	pkt_write_negotiate_version	- 'v'
 *	pkt_write_notice		- 'N' with S, V, C, M
 */
#include "proto/build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/packet.h"
#include "heaptrim.h"

enum {
	AUTH_OK = 0,
	AUTH_CLEARTEXT = 3,
	AUTH_MD5 = 5,
	AUTH_SASL = 10,
	AUTH_SASL_CONTINUE = 11,
	AUTH_SASL_FINAL = 12,
};

void pktbuf_init(struct pktbuf *pb, size_t initial)
{
	memset(pb, 0, sizeof(*pb));
	pb->max_len = PKTBUF_MAX_HEAP;
	if (initial == 0)
		initial = 64;
	if (initial > PKTBUF_MAX_HEAP)
		initial = PKTBUF_MAX_HEAP;
	pb->buf = malloc(initial);
	if (!pb->buf) {
		pb->failed = true;
		return;
	}
	pb->cap = initial;
}

/* A fixed buffer's cap must fit max_len; anything beyond 4 GB is simply not
 * used, which no protocol message needs. */
void pktbuf_init_fixed(struct pktbuf *pb, void *storage, size_t cap)
{
	memset(pb, 0, sizeof(*pb));
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	pb->buf = storage;
	pb->cap = cap;
	pb->fixed = true;
	pb->max_len = (uint32_t)cap;
}

void pktbuf_reset(struct pktbuf *pb)
{
	pb->len = 0;
	pb->msg_start = 0;
	pb->in_msg = false;
	pb->failed = false;
}

void pktbuf_free(struct pktbuf *pb)
{
	if (!pb->fixed) {
		free(pb->buf);
		heaptrim_note(pb->cap);
	}
	memset(pb, 0, sizeof(*pb));
}

/* Makes room for n more bytes, doubling a heap buffer up to max_len. On any
 * failure the buffer is marked failed and left untouched: no partial put. */
static bool reserve(struct pktbuf *pb, size_t n)
{
	if (pb->failed)
		return false;
	if (n <= pb->cap - pb->len)
		return true;
	if (pb->fixed || n > (size_t)pb->max_len - pb->len) {
		pb->failed = true;
		return false;
	}
	size_t need = pb->len + n;
	size_t cap = pb->cap ? pb->cap : 64;
	while (cap < need)
		cap *= 2;
	if (cap > pb->max_len)
		cap = pb->max_len;
	uint8_t *nb = realloc(pb->buf, cap);
	if (!nb) {
		pb->failed = true;
		return false;
	}
	pb->buf = nb;
	pb->cap = cap;
	return true;
}

static void write_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Beginning a message inside another is a caller bug; failing the buffer
 * makes it visible at the single pktbuf_failed() check. */
void pktbuf_begin(struct pktbuf *pb, uint8_t type)
{
	if (pb->in_msg)
		pb->failed = true;
	if (!reserve(pb, type ? 5 : 4))
		return;
	pb->msg_start = pb->len;
	pb->in_msg = true;
	if (type)
		pb->buf[pb->len++] = type;
	memset(pb->buf + pb->len, 0, 4);   /* length word, patched by finish */
	pb->len += 4;
}

void pktbuf_put_u8(struct pktbuf *pb, uint8_t v)
{
	if (!reserve(pb, 1))
		return;
	pb->buf[pb->len++] = v;
}

void pktbuf_put_u16(struct pktbuf *pb, uint16_t v)
{
	if (!reserve(pb, 2))
		return;
	pb->buf[pb->len++] = (uint8_t)(v >> 8);
	pb->buf[pb->len++] = (uint8_t)v;
}

void pktbuf_put_u32(struct pktbuf *pb, uint32_t v)
{
	if (!reserve(pb, 4))
		return;
	write_be32(pb->buf + pb->len, v);
	pb->len += 4;
}

void pktbuf_put_bytes(struct pktbuf *pb, const void *p, size_t n)
{
	if (!reserve(pb, n) || n == 0)
		return;
	memcpy(pb->buf + pb->len, p, n);
	pb->len += n;
}

void pktbuf_put_string(struct pktbuf *pb, const char *s)
{
	pktbuf_put_bytes(pb, s, strlen(s) + 1);
}

/* Measures first, so long messages are never cut short. */
void pktbuf_put_vformat(struct pktbuf *pb, const char *fmt, va_list ap)
{
	va_list measure;
	va_copy(measure, ap);
	int n = vsnprintf(NULL, 0, fmt, measure);
	va_end(measure);
	if (n < 0) {
		pb->failed = true;
		return;
	}
	if (!reserve(pb, (size_t)n + 1))
		return;
	vsnprintf((char *)pb->buf + pb->len, (size_t)n + 1, fmt, ap);
	pb->len += (size_t)n + 1;
}

/* The length word counts itself and the body but not the type byte. No
 * field records whether the message is typed: begin wrote either a nonzero
 * type byte or the first (zero) byte of the length placeholder at msg_start,
 * and that byte tells the two apart. */
void pktbuf_finish(struct pktbuf *pb)
{
	if (!pb->in_msg) {
		pb->failed = true;
		return;
	}
	pb->in_msg = false;
	if (pb->failed)
		return;
	size_t word_at = pb->msg_start + (pb->buf[pb->msg_start] ? 1 : 0);
	write_be32(pb->buf + word_at, (uint32_t)(pb->len - word_at));
}

bool pktbuf_failed(const struct pktbuf *pb)
{
	return pb->failed;
}

static void write_auth(struct pktbuf *pb, uint32_t code, const void *data, size_t len)
{
	pktbuf_begin(pb, 'R');
	pktbuf_put_u32(pb, code);
	pktbuf_put_bytes(pb, data, len);
	pktbuf_finish(pb);
}

void pkt_write_auth_ok(struct pktbuf *pb)
{
	write_auth(pb, AUTH_OK, NULL, 0);
}

void pkt_write_auth_cleartext(struct pktbuf *pb)
{
	write_auth(pb, AUTH_CLEARTEXT, NULL, 0);
}

void pkt_write_auth_md5(struct pktbuf *pb, const uint8_t salt[4])
{
	write_auth(pb, AUTH_MD5, salt, 4);
}

/* PostgreSQL offers the channel-binding variant first when TLS is in use. */
void pkt_write_auth_sasl(struct pktbuf *pb, bool plus)
{
	pktbuf_begin(pb, 'R');
	pktbuf_put_u32(pb, AUTH_SASL);
	if (plus)
		pktbuf_put_string(pb, "SCRAM-SHA-256-PLUS");
	pktbuf_put_string(pb, "SCRAM-SHA-256");
	pktbuf_put_u8(pb, 0);
	pktbuf_finish(pb);
}

void pkt_write_auth_sasl_continue(struct pktbuf *pb, const void *data, size_t len)
{
	write_auth(pb, AUTH_SASL_CONTINUE, data, len);
}

void pkt_write_auth_sasl_final(struct pktbuf *pb, const void *data, size_t len)
{
	write_auth(pb, AUTH_SASL_FINAL, data, len);
}

void pkt_write_parameter_status(struct pktbuf *pb, const char *key, const char *val)
{
	pktbuf_begin(pb, 'S');
	pktbuf_put_string(pb, key);
	pktbuf_put_string(pb, val);
	pktbuf_finish(pb);
}

void pkt_write_backend_key(struct pktbuf *pb, const struct cancelkey *k)
{
	pktbuf_begin(pb, 'K');
	pktbuf_put_u32(pb, k->pid);
	pktbuf_put_bytes(pb, k->secret, k->len);
	pktbuf_finish(pb);
}

void pkt_write_ready(struct pktbuf *pb, char status)
{
	pktbuf_begin(pb, 'Z');
	pktbuf_put_u8(pb, (uint8_t)status);
	pktbuf_finish(pb);
}

void pkt_write_query(struct pktbuf *pb, const char *sql)
{
	pktbuf_begin(pb, 'Q');
	pktbuf_put_string(pb, sql);
	pktbuf_finish(pb);
}

void pkt_write_terminate(struct pktbuf *pb)
{
	pktbuf_begin(pb, 'X');
	pktbuf_finish(pb);
}

void pkt_write_password(struct pktbuf *pb, const char *pw)
{
	pktbuf_begin(pb, 'p');
	pktbuf_put_string(pb, pw);
	pktbuf_finish(pb);
}

/* SASLInitialResponse: the data length is Int32, -1 meaning "no data". */
void pkt_write_sasl_initial(struct pktbuf *pb, const char *mech, const void *data, size_t len)
{
	if (data && len > INT32_MAX) {
		pb->failed = true;
		return;
	}
	pktbuf_begin(pb, 'p');
	pktbuf_put_string(pb, mech);
	pktbuf_put_u32(pb, data ? (uint32_t)len : UINT32_MAX);
	if (data)
		pktbuf_put_bytes(pb, data, len);
	pktbuf_finish(pb);
}

void pkt_write_sasl_response(struct pktbuf *pb, const void *data, size_t len)
{
	pktbuf_begin(pb, 'p');
	pktbuf_put_bytes(pb, data, len);
	pktbuf_finish(pb);
}

void pkt_write_startup(struct pktbuf *pb, uint32_t minor, const char *const *kv)
{
	pktbuf_begin(pb, 0);
	pktbuf_put_u32(pb, PROTO_V3 | (minor & 0xFFFF));
	for (; kv && kv[0]; kv += 2) {
		if (!kv[1]) {
			pb->failed = true;   /* key without value */
			break;
		}
		pktbuf_put_string(pb, kv[0]);
		pktbuf_put_string(pb, kv[1]);
	}
	pktbuf_put_u8(pb, 0);
	pktbuf_finish(pb);
}

void pkt_write_ssl_request(struct pktbuf *pb)
{
	pktbuf_begin(pb, 0);
	pktbuf_put_u32(pb, PROTO_SSL_REQUEST);
	pktbuf_finish(pb);
}

void pkt_write_cancel_request(struct pktbuf *pb, const struct cancelkey *k)
{
	pktbuf_begin(pb, 0);
	pktbuf_put_u32(pb, PROTO_CANCEL_REQUEST);
	pktbuf_put_u32(pb, k->pid);
	pktbuf_put_bytes(pb, k->secret, k->len);
	pktbuf_finish(pb);
}

/* The documentation calls the first field the "newest minor version", but
 * PostgreSQL puts the whole version word there and libpq 18 reads it so. */
void pkt_write_negotiate_version(struct pktbuf *pb, uint32_t newest_minor,
				 const char *const *unrecognized, int n)
{
	pktbuf_begin(pb, 'v');
	pktbuf_put_u32(pb, PROTO_V3 | (newest_minor & 0xFFFF));
	pktbuf_put_u32(pb, n > 0 ? (uint32_t)n : 0);
	for (int i = 0; i < n; i++)
		pktbuf_put_string(pb, unrecognized[i]);
	pktbuf_finish(pb);
}

void pkt_write_notice(struct pktbuf *pb, const char *severity, const char *sqlstate, const char *msg)
{
	pktbuf_begin(pb, 'N');
	pktbuf_put_u8(pb, 'S');
	pktbuf_put_string(pb, severity);
	pktbuf_put_u8(pb, 'V');
	pktbuf_put_string(pb, severity);
	pktbuf_put_u8(pb, 'C');
	pktbuf_put_string(pb, sqlstate ? sqlstate : "00000");
	pktbuf_put_u8(pb, 'M');
	pktbuf_put_string(pb, msg);
	pktbuf_put_u8(pb, 0);
	pktbuf_finish(pb);
}

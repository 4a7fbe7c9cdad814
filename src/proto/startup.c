/* pgcrew — the first packet a client sends: StartupMessage v3.x, SSLRequest,
 * GSSENCRequest or CancelRequest, validated the way PostgreSQL's postmaster
 * does; and the "options" startup parameter split into key/value pairs.
 *
 * INTERFACE ROUTINES
 *	startup_parse		- classify and parse a complete first packet
 *	startup_parse_options	- "-c key=value --key=value" with backslash escapes
 *	startup_length_refused	- a request's length checked before its body is read
 *	startup_kind_name	- enum startup_kind to text
 */
#include "proto/startup.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/cancelkey.h"
#include "proto/packet.h"

#define PROTO_PQ_PREFIX "_pq_."
#define REQUEST_LENGTH_ERR "invalid length of request packet"
#define CANCEL_LENGTH_ERR "invalid length of cancel request packet"

static const char *const kind_names[] = {
	[STARTUP_V3] = "startup", [STARTUP_SSL] = "ssl-request",
	[STARTUP_GSSENC] = "gssenc-request", [STARTUP_CANCEL] = "cancel-request",
	[STARTUP_BAD] = "bad",
};
_Static_assert(ARRAY_SIZE(kind_names) == STARTUP_BAD + 1, "kind_names");

const char *startup_kind_name(enum startup_kind kind)
{
	return (unsigned)kind < ARRAY_SIZE(kind_names) ? kind_names[kind] : "?";
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) PRINTF(3, 4);
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static enum startup_kind bad(struct startup_msg *out, char *err, size_t errlen, const char *msg)
{
	set_err(err, errlen, "%s", msg);
	out->kind = STARTUP_BAD;
	return STARTUP_BAD;
}

/* Later duplicates win, as they do for PostgreSQL's GUCs. */
static void note_shortcut(struct startup_msg *out, const char *key, const char *val)
{
	if (strcmp(key, "user") == 0)
		out->user = val;
	else if (strcmp(key, "database") == 0)
		out->database = val;
	else if (strcmp(key, "options") == 0)
		out->options = val;
	else if (strcmp(key, "replication") == 0)
		out->replication = val;
}

/* _pq_.* names are protocol extensions, not settings: they are kept apart so
 * the caller lists them in NegotiateProtocolVersion and never forwards them. */
static bool add_param(struct startup_msg *out, const char *key, const char *val)
{
	if (out->n_params + out->n_unsupported >= STARTUP_MAX_PARAMS)
		return false;
	if (strncmp(key, PROTO_PQ_PREFIX, strlen(PROTO_PQ_PREFIX)) == 0) {
		out->unsupported[out->n_unsupported++] = key;
		return true;
	}
	out->keys[out->n_params] = key;
	out->vals[out->n_params] = val;
	out->n_params++;
	note_shortcut(out, key, val);
	return true;
}

/* Body after the version word: (key NUL value NUL)* NUL, the final NUL being
 * the packet's last byte. An empty key is that terminator. */
static enum startup_kind parse_params(const uint8_t *body, size_t len, struct startup_msg *out,
				      char *err, size_t errlen)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	for (;;) {
		if (r.pos == r.len)
			return bad(out, err, errlen, "invalid startup packet layout: missing terminator");
		const char *key = pkt_get_string(&r);
		if (r.failed)
			return bad(out, err, errlen, "invalid startup packet layout: unterminated parameter name");
		if (key[0] == '\0')
			break;
		const char *val = pkt_get_string(&r);
		if (r.failed)
			return bad(out, err, errlen, "invalid startup packet layout: parameter without value");
		if (!add_param(out, key, val))
			return bad(out, err, errlen, "too many parameters in startup packet");
	}
	if (!pkt_get_end(&r))
		return bad(out, err, errlen, "invalid startup packet layout: expected terminator as last byte");
	return STARTUP_V3;
}

static enum startup_kind parse_v3(const uint8_t *pkt, size_t len, struct startup_msg *out,
				  char *err, size_t errlen)
{
	if (PROTO_MAJOR(out->version) != 3) {
		set_err(err, errlen, "unsupported frontend protocol %u.%u: server supports 3.0 to 3.%d",
			PROTO_MAJOR(out->version), PROTO_MINOR(out->version), PROTO_MINOR_LATEST);
		out->kind = STARTUP_BAD;
		return STARTUP_BAD;
	}
	if (parse_params(pkt + PKT_STARTUP_MIN, len - PKT_STARTUP_MIN, out, err, errlen) == STARTUP_BAD)
		return STARTUP_BAD;
	if (!out->user || out->user[0] == '\0')
		return bad(out, err, errlen, "no PostgreSQL user name specified in startup packet");
	if (!out->database || out->database[0] == '\0')
		out->database = out->user;
	out->kind = STARTUP_V3;
	return STARTUP_V3;
}

static enum startup_kind parse_request(size_t len, size_t want, enum startup_kind kind,
				       struct startup_msg *out, char *err, size_t errlen)
{
	if (len != want)
		return bad(out, err, errlen, REQUEST_LENGTH_ERR);
	out->kind = kind;
	return kind;
}

static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Length word, code, pid, then the secret up to the end: 4 bytes (protocol
 * 3.0) to 256 (3.2). */
static enum startup_kind parse_cancel(const uint8_t *pkt, size_t len, struct startup_msg *out,
				      char *err, size_t errlen)
{
	if (len < CANCELKEY_REQUEST_HDR || !cancelkey_set(&out->cancel, PROTO_MINOR_LATEST, be32_at(pkt + 8),
					       pkt + CANCELKEY_REQUEST_HDR, len - CANCELKEY_REQUEST_HDR))
		return bad(out, err, errlen, CANCEL_LENGTH_ERR);
	out->kind = STARTUP_CANCEL;
	return STARTUP_CANCEL;
}

enum startup_kind startup_parse(const uint8_t *pkt, size_t len, struct startup_msg *out,
				char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->kind = STARTUP_BAD;
	set_err(err, errlen, "%s", "");
	if (len < PKT_STARTUP_MIN || len > PKT_STARTUP_MAX || be32_at(pkt) != len)
		return bad(out, err, errlen, "invalid length of startup packet");

	out->version = be32_at(pkt + 4);
	switch (out->version) {
	case PROTO_SSL_REQUEST:
		return parse_request(len, 8, STARTUP_SSL, out, err, errlen);
	case PROTO_GSSENC_REQUEST:
		return parse_request(len, 8, STARTUP_GSSENC, out, err, errlen);
	case PROTO_CANCEL_REQUEST:
		return parse_cancel(pkt, len, out, err, errlen);
	default:
		return parse_v3(pkt, len, out, err, errlen);
	}
}

const char *startup_length_refused(const uint8_t *first8, size_t len)
{
	switch (be32_at(first8 + 4)) {
	case PROTO_SSL_REQUEST:
	case PROTO_GSSENC_REQUEST:
		return len == 8 ? NULL : REQUEST_LENGTH_ERR;
	case PROTO_CANCEL_REQUEST:
		return len >= CANCELKEY_REQUEST_HDR + CANCELKEY_MIN && len <= CANCELKEY_REQUEST_MAX
			       ? NULL : CANCEL_LENGTH_ERR;
	default:
		return NULL;
	}
}

/* Copies the next whitespace-separated token of *pos into buf, a backslash
 * taking the following character literally (a trailing backslash is kept).
 * Returns 1 with a token, 0 at the end, -1 if the token does not fit. */
static int next_token(const char **pos, char *buf, size_t cap)
{
	const char *s = *pos;
	size_t n = 0;

	while (isspace((unsigned char)*s))
		s++;
	if (*s == '\0')
		return 0;
	while (*s && !isspace((unsigned char)*s)) {
		if (s[0] == '\\' && s[1] != '\0')
			s++;
		if (n + 1 >= cap)
			return -1;
		buf[n++] = *s++;
	}
	buf[n] = '\0';
	*pos = s;
	return 1;
}

/* PgBouncer's words, which clients and operators grep. */
#define OPTIONS_FORMAT_ERR \
	"unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"

/* "name=value" -> name, value in place; dashes in the name become
 * underscores, as PostgreSQL does for both -c and --. */
static int split_pair(char *pair, char **val, char *err, size_t errlen)
{
	char *eq = strchr(pair, '=');
	if (!eq || eq == pair) {
		set_err(err, errlen, "%s", OPTIONS_FORMAT_ERR);
		return -1;
	}
	*eq = '\0';
	*val = eq + 1;
	for (char *c = pair; *c; c++)
		if (*c == '-')
			*c = '_';
	return 0;
}

/* Reduces the next switch to its "name=value" text in buf: -c name=value,
 * -cname=value or --name=value. Returns 1, 0 at the end, -1 on error. */
static int next_pair(const char **pos, char *buf, size_t cap, char **pair, char *err, size_t errlen)
{
	int rc = next_token(pos, buf, cap);
	if (rc > 0 && strcmp(buf, "-c") == 0) {
		rc = next_token(pos, buf, cap);
		if (rc == 0) {
			set_err(err, errlen, "%s", OPTIONS_FORMAT_ERR);
			return -1;
		}
		*pair = buf;
	} else if (rc > 0) {
		if (strncmp(buf, "--", 2) != 0 && strncmp(buf, "-c", 2) != 0) {
			set_err(err, errlen, "%s", OPTIONS_FORMAT_ERR);
			return -1;
		}
		*pair = buf + 2;
	}
	if (rc < 0)
		set_err(err, errlen, "%s", "options startup parameter too long");
	return rc;
}

int startup_parse_options(const char *options, int (*cb)(void *arg, const char *key, const char *val),
			  void *arg, char *err, size_t errlen)
{
	char buf[PKT_STARTUP_MAX];   /* a value never outgrows its startup packet */
	const char *pos = options ? options : "";
	char *pair, *val;
	int rc;

	set_err(err, errlen, "%s", "");
	while ((rc = next_pair(&pos, buf, sizeof(buf), &pair, err, errlen)) > 0) {
		if (split_pair(pair, &val, err, errlen) < 0)
			return -1;
		if (cb(arg, pair, val) != 0) {
			set_err(err, errlen, "unsupported startup parameter in options: %s", pair);
			return -1;
		}
	}
	return rc < 0 ? -1 : 0;
}

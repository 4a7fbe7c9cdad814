/* pgcrew — extended query protocol on the console (see admin_ext.h). The
 * statements are the console's commands, so they are kept as text; an
 * error skips to Sync as PostgreSQL does. */
#include "admin_ext.h"
#include "client.h"
#include "proto/build.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>

#define EXT_STMTS 32
#define EXT_FORMATS 64
#define OID_INT2 21
#define OID_INT4 23
#define OID_INT8 20

struct admin_ext {
	struct { char name[64]; char *sql; } stmts[EXT_STMTS];
	char *portal;              /* the unnamed portal's command */
	int16_t formats[EXT_FORMATS];
	int n_formats;
	bool failed;               /* an error: skip to Sync */
};

static struct admin_ext *ext_of(struct client *c)
{
	if (!c->admin_ext)
		c->admin_ext = xcalloc(1, sizeof(*c->admin_ext));
	return c->admin_ext;
}

void admin_ext_free(struct client *c)
{
	struct admin_ext *x = c->admin_ext;
	if (!x)
		return;
	for (int i = 0; i < EXT_STMTS; i++)
		free(x->stmts[i].sql);
	free(x->portal);
	free(x);
	c->admin_ext = NULL;
}

static void send_simple(struct client *c, uint8_t type)
{
	uint8_t m[5] = { type, 0, 0, 0, 4 };
	(void)stream_write_raw(&c->s, m, sizeof(m));
}

static void ext_error(struct client *c, struct admin_ext *x, const char *msg)
{
	struct pktbuf pb;
	pktbuf_init(&pb, 128);
	pkt_write_error(&pb, "ERROR", "08P01", "%s", msg);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
	x->failed = true;
}

static int find_stmt(struct admin_ext *x, const char *name)
{
	for (int i = 0; i < EXT_STMTS; i++)
		if (x->stmts[i].sql && strcmp(x->stmts[i].name, name) == 0)
			return i;
	return -1;
}

static void on_parse(struct client *c, struct admin_ext *x, struct pkt_reader *r)
{
	const char *name = pkt_get_string(r);
	const char *sql = pkt_get_string(r);
	int n = pkt_get_u16(r);
	if (r->failed || strlen(name) >= sizeof(x->stmts[0].name)) {
		ext_error(c, x, "malformed Parse message");
		return;
	}
	if (n > 0) {
		ext_error(c, x, "console commands take no parameters");
		return;
	}
	int i = find_stmt(x, name);
	if (i >= 0 && name[0]) {
		ext_error(c, x, "prepared statement already exists");
		return;
	}
	for (int k = 0; i < 0 && k < EXT_STMTS; k++)
		if (!x->stmts[k].sql)
			i = k;
	if (i < 0) {
		ext_error(c, x, "too many prepared statements on the console");
		return;
	}
	free(x->stmts[i].sql);
	strlcpy_(x->stmts[i].name, name, sizeof(x->stmts[i].name));
	x->stmts[i].sql = xstrdup(sql);
	send_simple(c, '1');
}

static void on_bind(struct client *c, struct admin_ext *x, struct pkt_reader *r)
{
	const char *portal = pkt_get_string(r);
	const char *stmt = pkt_get_string(r);
	int nf = pkt_get_u16(r);
	int16_t f[EXT_FORMATS];
	for (int i = 0; i < nf && !r->failed; i++) {
		int16_t v = (int16_t)pkt_get_u16(r);
		if (i < EXT_FORMATS)
			f[i] = v;
	}
	int np = pkt_get_u16(r);
	for (int i = 0; i < np && !r->failed; i++) {
		int32_t l = pkt_get_i32(r);
		if (l > 0)
			(void)pkt_get_bytes(r, (size_t)l);
	}
	int nr = pkt_get_u16(r);
	int16_t rf[EXT_FORMATS];
	for (int i = 0; i < nr && !r->failed; i++) {
		int16_t v = (int16_t)pkt_get_u16(r);
		if (i < EXT_FORMATS)
			rf[i] = v;
	}
	(void)f;
	if (r->failed || nr > EXT_FORMATS) {
		ext_error(c, x, "malformed Bind message");
		return;
	}
	if (portal[0]) {
		ext_error(c, x, "named portals are not supported on the console");
		return;
	}
	if (np > 0) {
		ext_error(c, x, "console commands take no parameters");
		return;
	}
	int i = find_stmt(x, stmt);
	if (i < 0) {
		ext_error(c, x, "prepared statement does not exist");
		return;
	}
	free(x->portal);
	x->portal = xstrdup(x->stmts[i].sql);
	memcpy(x->formats, rf, sizeof(int16_t) * (size_t)nr);
	x->n_formats = nr;
	send_simple(c, '2');
}

static void on_describe(struct client *c, struct admin_ext *x, struct pkt_reader *r)
{
	uint8_t what = pkt_get_u8(r);
	const char *name = pkt_get_string(r);
	const char *sql = NULL;
	struct pktbuf pb;

	if (what == 'S') {
		int i = find_stmt(x, name);
		sql = i >= 0 ? x->stmts[i].sql : NULL;
	} else if (what == 'P' && !name[0]) {
		sql = x->portal;
	}
	if (r->failed || !sql) {
		ext_error(c, x, what == 'S' ? "prepared statement does not exist" : "portal does not exist");
		return;
	}
	pktbuf_init(&pb, 512);
	if (what == 'S') {
		pktbuf_begin(&pb, 't');            /* ParameterDescription: none */
		pktbuf_put_u16(&pb, 0);
		pktbuf_finish(&pb);
	}
	struct pktbuf t;
	pktbuf_init(&t, 512);
	if (!admin_describe(c->world, sql, &t)) {
		pktbuf_begin(&pb, 'n');            /* NoData */
		pktbuf_finish(&pb);
	} else if (what == 'P') {
		/* A portal's description carries the formats its Bind chose. */
		admin_ext_encode_rows(&pb, t.buf, t.len, true, x->formats, x->n_formats);
	} else {
		pktbuf_put_bytes(&pb, t.buf, t.len);
	}
	pktbuf_free(&t);
	(void)stream_write(&c->s, &pb);
	pktbuf_free(&pb);
}

static enum stream_action on_execute(struct client *c, struct admin_ext *x, struct pkt_reader *r)
{
	char sql[8192];
	bool failed = false;
	const char *portal = pkt_get_string(r);
	(void)pkt_get_u32(r);                    /* row limit: results are small, sent whole */
	if (r->failed || portal[0] || !x->portal) {
		ext_error(c, x, "portal does not exist");
		return SA_CONSUMED;
	}
	strlcpy_(sql, x->portal, sizeof(sql));
	enum stream_action a = admin_run_text(c, sql, false, x->formats, x->n_formats, &failed);
	if (a == SA_CONSUMED && failed)
		x->failed = true;
	return a;
}

static void on_close(struct client *c, struct admin_ext *x, struct pkt_reader *r)
{
	uint8_t what = pkt_get_u8(r);
	const char *name = pkt_get_string(r);
	if (what == 'S') {
		int i = find_stmt(x, name);
		if (i >= 0) {
			free(x->stmts[i].sql);
			x->stmts[i].sql = NULL;
		}
	} else if (!name[0]) {
		free(x->portal);
		x->portal = NULL;
	}
	send_simple(c, '3');
}

enum stream_action admin_ext_message(struct client *c, uint8_t type, const uint8_t *body, size_t len)
{
	struct admin_ext *x = ext_of(c);
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);

	if (type == 'S') {
		struct pktbuf pb;
		x->failed = false;
		pktbuf_init(&pb, 8);
		pkt_write_ready(&pb, 'I');
		(void)stream_write(&c->s, &pb);
		pktbuf_free(&pb);
		return SA_CONSUMED;
	}
	if (x->failed)
		return SA_CONSUMED;            /* skipped until Sync */
	switch (type) {
	case 'P': on_parse(c, x, &r); break;
	case 'B': on_bind(c, x, &r); break;
	case 'D': on_describe(c, x, &r); break;
	case 'E': return on_execute(c, x, &r);
	case 'C': on_close(c, x, &r); break;
	case 'H': break;
	default:
		client_close(c, true, "unsupported message on the admin console");
		return SA_STOP;
	}
	return SA_CONSUMED;
}

/* ---- result encoding ---- */

static int16_t format_of(const int16_t *formats, int n, int col)
{
	if (n == 0)
		return 0;
	return n == 1 ? formats[0] : (col < n ? formats[col] : 0);
}

/* Column type OIDs from a RowDescription. */
static int row_types(const uint8_t *body, size_t len, uint32_t *oids, int max)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	int n = pkt_get_u16(&r);
	for (int i = 0; i < n && !r.failed; i++) {
		(void)pkt_get_string(&r);
		(void)pkt_get_u32(&r);
		(void)pkt_get_u16(&r);
		uint32_t oid = pkt_get_u32(&r);
		(void)pkt_get_u16(&r);
		(void)pkt_get_u32(&r);
		(void)pkt_get_u16(&r);
		if (i < max)
			oids[i] = oid;
	}
	return r.failed ? -1 : n;
}

/* The RowDescription with its format codes set to what the Bind asked. */
static void put_header(struct pktbuf *pb, const uint8_t *body, size_t len, const int16_t *formats, int nf)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	int n = pkt_get_u16(&r);
	pktbuf_begin(pb, 'T');
	pktbuf_put_u16(pb, (uint16_t)n);
	for (int i = 0; i < n && !r.failed; i++) {
		pktbuf_put_string(pb, pkt_get_string(&r));
		pktbuf_put_u32(pb, pkt_get_u32(&r));
		pktbuf_put_u16(pb, pkt_get_u16(&r));
		pktbuf_put_u32(pb, pkt_get_u32(&r));
		pktbuf_put_u16(pb, pkt_get_u16(&r));
		pktbuf_put_u32(pb, pkt_get_u32(&r));
		(void)pkt_get_u16(&r);
		pktbuf_put_u16(pb, (uint16_t)format_of(formats, nf, i));
	}
	pktbuf_finish(pb);
}

static void put_value(struct pktbuf *pb, const uint8_t *v, int32_t vlen, bool binary, uint32_t oid)
{
	if (vlen < 0) {
		pktbuf_put_u32(pb, 0xffffffff);
		return;
	}
	if (binary && (oid == OID_INT8 || oid == OID_INT4 || oid == OID_INT2)) {
		char num[32];
		snprintf(num, sizeof(num), "%.*s", (int)vlen, (const char *)v);
		long long x = strtoll(num, NULL, 10);
		if (oid == OID_INT8) {
			pktbuf_put_u32(pb, 8);
			pktbuf_put_u32(pb, (uint32_t)((unsigned long long)x >> 32));
			pktbuf_put_u32(pb, (uint32_t)x);
		} else if (oid == OID_INT4) {
			pktbuf_put_u32(pb, 4);
			pktbuf_put_u32(pb, (uint32_t)x);
		} else {
			pktbuf_put_u32(pb, 2);
			pktbuf_put_u16(pb, (uint16_t)x);
		}
		return;
	}
	/* text: the same bytes in either format */
	pktbuf_put_u32(pb, (uint32_t)vlen);
	pktbuf_put_bytes(pb, v, (size_t)vlen);
}

static void put_row(struct pktbuf *pb, const uint8_t *body, size_t len, const uint32_t *oids, int ncols,
		    const int16_t *formats, int nf)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	int n = pkt_get_u16(&r);
	pktbuf_begin(pb, 'D');
	pktbuf_put_u16(pb, (uint16_t)n);
	for (int i = 0; i < n && !r.failed; i++) {
		int32_t vlen = pkt_get_i32(&r);
		const uint8_t *v = vlen > 0 ? pkt_get_bytes(&r, (size_t)vlen) : (const uint8_t *)"";
		if (!v)
			break;           /* a field past the message: nothing more to copy */
		put_value(pb, v, vlen, format_of(formats, nf, i) == 1, i < ncols ? oids[i] : 0);
	}
	pktbuf_finish(pb);
}

void admin_ext_encode_rows(struct pktbuf *pb, const uint8_t *buf, size_t len, bool header,
			   const int16_t *formats, int n_formats)
{
	uint32_t oids[1600];        /* PostgreSQL's column limit */
	int ncols = 0;
	bool any_binary = false;
	for (int i = 0; i < n_formats; i++)
		any_binary |= formats[i] == 1;
	if (!any_binary && header) {
		pktbuf_put_bytes(pb, buf, len);
		return;
	}
	for (size_t off = 0; off < len;) {
		struct pkt_hdr h;
		if (pkt_parse_header(buf + off, len - off, false, 1u << 30, &h, NULL) != PKT_OK || h.len > len - off)
			return;
		const uint8_t *body = buf + off + 5;
		size_t blen = h.len - 5;
		if (h.type == 'T') {
			ncols = row_types(body, blen, oids, (int)ARRAY_SIZE(oids));
			if (ncols > (int)ARRAY_SIZE(oids))
				ncols = (int)ARRAY_SIZE(oids);
			if (header)
				put_header(pb, body, blen, formats, n_formats);
		} else if (h.type == 'D' && any_binary) {
			put_row(pb, body, blen, oids, ncols, formats, n_formats);
		} else {
			pktbuf_put_bytes(pb, buf + off, h.len);
		}
		off += h.len;
	}
}

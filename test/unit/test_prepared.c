/* pgcrew — unit tests for prepared statements: client names renamed to
 * PGCREW_<n>, statements shared by text, the server LRU and its evictions,
 * re-preparing a statement a server lost, Close answered without touching
 * the server's statement, PostgreSQL's errors through the barrier, the
 * rollback at ReadyForQuery, and malformed Parse/Bind rejected; SQL
 * PREPARE/EXECUTE/DEALLOCATE (sql_prepared_statements) mapped the same way;
 * a server's statements exported and imported when it moves to another
 * worker, and statement numbers from each worker's own range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "prepared.h"
#include "proto/build.h"
#include "proto/error.h"
#include "proto/packet.h"

/* One client and its server, as the relay would hold them. */
struct fix {
	struct ps_client *pc;
	struct ps_server *ps;
	struct pktbuf inject, out, msg;
	struct ps_rewrite rw;
	struct ps_counters cnt;
	int max;
	bool unnamed;
	bool sql;
	uint32_t owed;
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	pktbuf_init(&f->inject, 256);
	pktbuf_init(&f->out, 256);
	pktbuf_init(&f->msg, 256);
	f->max = 200;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	ps_client_free(f->pc);
	ps_server_free(f->ps);
	pktbuf_free(&f->inject);
	pktbuf_free(&f->out);
	pktbuf_free(&f->msg);
	free(f);
	assert_int_equal(ps_stmt_count(), 0);    /* every reference returned */
	return 0;
}

/* ---- messages ---- */

static const struct pktbuf *parse_msg(struct fix *f, const char *name, const char *sql)
{
	pktbuf_reset(&f->msg);
	pktbuf_begin(&f->msg, 'P');
	pktbuf_put_string(&f->msg, name);
	pktbuf_put_string(&f->msg, sql);
	pktbuf_put_u16(&f->msg, 1);
	pktbuf_put_u32(&f->msg, 23);
	pktbuf_finish(&f->msg);
	return &f->msg;
}

static const struct pktbuf *bind_msg(struct fix *f, const char *portal, const char *name)
{
	pktbuf_reset(&f->msg);
	pktbuf_begin(&f->msg, 'B');
	pktbuf_put_string(&f->msg, portal);
	pktbuf_put_string(&f->msg, name);
	pktbuf_put_u16(&f->msg, 0);
	pktbuf_put_u16(&f->msg, 1);
	pktbuf_put_u32(&f->msg, 1);
	pktbuf_put_u8(&f->msg, '7');
	pktbuf_put_u16(&f->msg, 0);
	pktbuf_finish(&f->msg);
	return &f->msg;
}

static const struct pktbuf *kind_msg(struct fix *f, uint8_t type, uint8_t kind, const char *name)
{
	pktbuf_reset(&f->msg);
	pktbuf_begin(&f->msg, type);
	pktbuf_put_u8(&f->msg, kind);
	pktbuf_put_string(&f->msg, name);
	pktbuf_finish(&f->msg);
	return &f->msg;
}

static enum ps_verdict send_avail(struct fix *f, const struct pktbuf *m, size_t avail, bool inject, bool grow)
{
	struct ps_config cfg = { .max_stmts = f->max, .unnamed_cache = f->unnamed, .sql = f->sql };
	pktbuf_reset(&f->inject);
	return ps_client_msg(&f->pc, &f->ps, &cfg, f->owed, m->buf, avail, (uint32_t)m->len,
			     inject, grow, &f->inject, &f->rw, &f->cnt);
}

static enum ps_verdict send(struct fix *f, const struct pktbuf *m)
{
	return send_avail(f, m, m->len, true, true);
}

/* A server reply of len bytes, the first avail of them buffered. */
static enum ps_reply reply_avail(struct fix *f, const uint8_t *msg, size_t avail, size_t len)
{
	pktbuf_reset(&f->out);
	return ps_server_msg(f->ps, f->pc, msg, avail, (uint32_t)len, &f->out);
}

static enum ps_reply reply(struct fix *f, const uint8_t *msg, size_t len)
{
	return reply_avail(f, msg, len, len);
}

static enum ps_reply reply_type(struct fix *f, uint8_t type)
{
	uint8_t m[6] = { type, 0, 0, 0, 4, 'I' };
	if (type == 'Z')
		m[4] = 5;
	return reply(f, m, type == 'Z' ? 6 : 5);
}

/* The message the server gets: the head as rewritten plus the kept tail. */
static size_t rewritten(const struct fix *f, const struct pktbuf *m, uint8_t *out)
{
	memcpy(out, f->rw.head, f->rw.head_len);
	memcpy(out + f->rw.head_len, m->buf + f->rw.old_len, m->len - f->rw.old_len);
	return f->rw.head_len + (m->len - f->rw.old_len);
}

/* The name the rewritten message carries after `skip` body bytes. */
static const char *server_name(const struct fix *f, const struct pktbuf *m, size_t skip, char *buf)
{
	uint8_t full[1024];
	size_t n = rewritten(f, m, full);
	uint32_t len = (uint32_t)full[1] << 24 | (uint32_t)full[2] << 16 | (uint32_t)full[3] << 8 | full[4];
	assert_int_equal(len + 1, n);          /* the length word fits the new size */
	strcpy(buf, (const char *)full + 5 + skip);
	return buf;
}

/* Messages in the inject buffer, as type letters; names into names[]. */
static void injected(const struct fix *f, char *types, char names[][32])
{
	size_t off = 0;
	int i = 0;
	while (off < f->inject.len) {
		struct pkt_hdr h;
		assert_int_equal(pkt_parse_header(f->inject.buf + off, f->inject.len - off, false, 1u << 20, &h, NULL), PKT_OK);
		types[i] = (char)h.type;
		snprintf(names[i], 32, "%s", (const char *)f->inject.buf + off + 5 + (h.type == 'C' ? 1 : 0));
		off += h.len;
		i++;
	}
	types[i] = 0;
}

/* ---- tests ---- */

static void test_parse_bind_renamed(void **state)
{
	struct fix *f = *state;
	char a[64], b[64];
	const struct pktbuf *m = parse_msg(f, "s1", "SELECT $1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(f->inject.len, 0);
	assert_memory_equal(server_name(f, m, 0, a), "PGCREW_", 7);
	/* the statement text and types follow the new name unchanged */
	uint8_t full[256];
	size_t n = rewritten(f, m, full);
	assert_string_equal((const char *)full + 5 + strlen(a) + 1, "SELECT $1");
	assert_int_equal(n, m->len - 2 + strlen(a));
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);

	m = bind_msg(f, "", "s1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, b), a);
	m = kind_msg(f, 'D', 'S', "s1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, b), a);
	assert_int_equal(f->cnt.client_parse, 1);
	assert_int_equal(f->cnt.server_parse, 1);
	assert_int_equal(f->cnt.bind, 1);
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(ps_server_count(f->ps), 1);
}

static void test_unnamed_pass(void **state)
{
	struct fix *f = *state;
	assert_int_equal(send(f, parse_msg(f, "", "SELECT 1")), PS_PASS);
	assert_int_equal(send(f, bind_msg(f, "", "")), PS_PASS);
	assert_int_equal(send(f, kind_msg(f, 'D', 'P', "")), PS_PASS);
	assert_int_equal(send(f, kind_msg(f, 'C', 'P', "portal")), PS_PASS);
	/* their replies still pass in order */
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(reply_type(f, '3'), PSR_FORWARD);
	assert_int_equal(ps_client_count(f->pc), 0);
}

static void test_close_local_and_unknown(void **state)
{
	struct fix *f = *state;
	char nm[64];
	assert_int_equal(send(f, parse_msg(f, "s1", "SELECT 1")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	const struct pktbuf *m = kind_msg(f, 'C', 'S', "s1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, nm), "PGCREW_0");   /* nobody */
	assert_int_equal(ps_client_count(f->pc), 0);
	assert_int_equal(ps_server_count(f->ps), 1);                  /* kept for others */
	assert_int_equal(reply_type(f, '3'), PSR_FORWARD);
	m = kind_msg(f, 'C', 'S', "never");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, nm), "PGCREW_0");
	assert_int_equal(reply_type(f, '3'), PSR_FORWARD);
}

static void test_same_text_shared(void **state)
{
	struct fix *f = *state;
	struct ps_client *other = NULL;
	char a[64], b[64];
	const struct pktbuf *m = parse_msg(f, "x", "SELECT 1");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, a);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	/* same text, another name: already on the server, a Close of nobody
	 * stands in and its CloseComplete comes back as ParseComplete */
	m = parse_msg(f, "y", "SELECT 1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(f->rw.head[0], 'C');
	assert_int_equal(reply_type(f, '3'), PSR_SKIP_SEND);
	assert_int_equal(f->out.len, 5);
	assert_int_equal(f->out.buf[0], '1');
	assert_int_equal(f->cnt.server_parse, 1);
	assert_int_equal(ps_stmt_count(), 1);
	/* another client, same name, other text: its own statement */
	struct ps_client *mine = f->pc;
	f->pc = other;
	m = parse_msg(f, "x", "SELECT 2");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, b);
	assert_string_not_equal(a, b);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(ps_stmt_count(), 2);
	assert_int_equal(ps_server_count(f->ps), 2);
	other = f->pc;
	f->pc = mine;
	/* the first client's x still means SELECT 1 */
	m = bind_msg(f, "", "x");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, b), a);
	ps_client_free(other);
}

static void test_eviction_and_reprepare(void **state)
{
	struct fix *f = *state;
	char types[8], names[8][32], first[64], nm[64];
	f->max = 2;
	const struct pktbuf *m = parse_msg(f, "a", "SELECT 'a'");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, first);
	assert_int_equal(send(f, parse_msg(f, "b", "SELECT 'b'")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	/* a third statement: the least recently used (a) is closed first */
	assert_int_equal(send(f, parse_msg(f, "c", "SELECT 'c'")), PS_REWRITE);
	injected(f, types, names);
	assert_string_equal(types, "C");
	assert_string_equal(names[0], first);
	assert_int_equal(ps_server_count(f->ps), 2);
	assert_int_equal(reply_type(f, '3'), PSR_SKIP);      /* our Close */
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);   /* the client's Parse */
	/* Bind of a: prepared again (evicting b), under a new name */
	m = bind_msg(f, "p", "a");
	assert_int_equal(send(f, m), PS_REWRITE);
	injected(f, types, names);
	assert_string_equal(types, "CP");
	assert_string_equal(server_name(f, m, 2, nm), names[1]);
	assert_string_not_equal(nm, first);
	const uint8_t *text = f->inject.buf + (f->inject.len - (5 + strlen(nm) + 1 + 11 + 2 + 4)) + 5 + strlen(nm) + 1;
	assert_string_equal((const char *)text, "SELECT 'a'");
	assert_int_equal(reply_type(f, '3'), PSR_SKIP);
	assert_int_equal(reply_type(f, '1'), PSR_SKIP);      /* our Parse: the client never sent one */
	assert_int_equal(f->cnt.server_parse, 4);
	assert_int_equal(ps_client_count(f->pc), 3);
}

static void test_flush_changes_nothing(void **state)
{
	struct fix *f = *state;
	f->max = 1;
	assert_int_equal(send(f, parse_msg(f, "a", "SELECT 1")), PS_REWRITE);
	assert_int_equal(send(f, parse_msg(f, "b", "SELECT 2")), PS_REWRITE);  /* evicts a */
	struct ps_counters before = f->cnt;
	const struct pktbuf *m = bind_msg(f, "", "a");
	assert_int_equal(send_avail(f, m, m->len, false, true), PS_FLUSH);
	assert_memory_equal(&before, &f->cnt, sizeof(before));
	assert_int_equal(f->inject.len, 0);
	assert_int_equal(send_avail(f, m, m->len, true, false), PS_FLUSH);  /* would grow */
	assert_int_equal(send_avail(f, m, m->len, true, true), PS_REWRITE);
}

static void test_errors_through_barrier(void **state)
{
	struct fix *f = *state;
	struct pktbuf e;
	struct pg_error pe;
	assert_int_equal(send(f, parse_msg(f, "s", "SELECT 1")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(send(f, parse_msg(f, "s", "SELECT 2")), PS_REWRITE);
	assert_int_equal(f->rw.head[0], 'D');               /* fails on the server */
	pktbuf_init(&e, 128);
	pkt_write_error(&e, "ERROR", "26000", "prepared statement \"%s\" does not exist", PS_NAME_PREFIX "ERR");
	assert_int_equal(reply(f, e.buf, e.len), PSR_SKIP_SEND);
	assert_true(pkt_parse_error(f->out.buf + 5, f->out.len - 5, &pe));
	assert_string_equal(pe.sqlstate, "42P05");
	assert_string_equal(pe.message, "prepared statement \"s\" already exists");
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	/* Bind of a name never prepared: PostgreSQL's 26000 */
	assert_int_equal(send(f, bind_msg(f, "", "nope")), PS_REWRITE);
	assert_int_equal(reply(f, e.buf, e.len), PSR_SKIP_SEND);
	assert_true(pkt_parse_error(f->out.buf + 5, f->out.len - 5, &pe));
	assert_string_equal(pe.sqlstate, "26000");
	assert_string_equal(pe.message, "prepared statement \"nope\" does not exist");
	/* the same Bind, not fully buffered: injected barrier, message skipped */
	const struct pktbuf *m = bind_msg(f, "", "nope");
	assert_int_equal(send_avail(f, m, m->len - 1, true, true), PS_REPLACE);
	assert_int_equal(f->inject.buf[0], 'D');
	pktbuf_free(&e);
}

static void test_rollback_after_error(void **state)
{
	struct fix *f = *state;
	uint8_t err[] = { 'E', 0, 0, 0, 4 + 7, 'C', '4', '2', '6', '0', '1', 0, 0 };
	err[4] = (uint8_t)(sizeof(err) - 1);
	assert_int_equal(send(f, parse_msg(f, "bad", "SELEC 1")), PS_REWRITE);
	f->owed = 1;      /* its Sync */
	assert_int_equal(reply(f, err, sizeof(err)), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	f->owed = 0;
	/* the failed Parse left nothing: the name is free, the server empty */
	assert_int_equal(ps_client_count(f->pc), 0);
	assert_int_equal(ps_server_count(f->ps), 0);
	assert_int_equal(send(f, parse_msg(f, "bad", "SELECT 1")), PS_REWRITE);
	assert_int_equal(f->rw.head[0], 'P');
}

static void test_skipped_segment_only(void **state)
{
	struct fix *f = *state;
	/* Parse a; Sync; Parse b; Sync. a succeeds, b's segment fails before b. */
	assert_int_equal(send(f, parse_msg(f, "a", "SELECT 1")), PS_REWRITE);
	f->owed = 1;
	assert_int_equal(send(f, parse_msg(f, "b", "SELECT 2")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);    /* ends a's segment */
	assert_int_equal(ps_client_count(f->pc), 2);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);    /* b was skipped */
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(ps_server_count(f->ps), 1);
}

static void test_malformed(void **state)
{
	struct fix *f = *state;
	struct pktbuf m;
	pktbuf_init(&m, 64);
	/* Parse announcing 5 parameter types and carrying none */
	pktbuf_begin(&m, 'P');
	pktbuf_put_string(&m, "n");
	pktbuf_put_string(&m, "SELECT 1");
	pktbuf_put_u16(&m, 5);
	pktbuf_finish(&m);
	assert_int_equal(send(f, &m), PS_BAD);
	assert_non_null(f->rw.why);
	/* Parse with a negative count */
	pktbuf_reset(&m);
	pktbuf_begin(&m, 'P');
	pktbuf_put_string(&m, "n");
	pktbuf_put_string(&m, "SELECT 1");
	pktbuf_put_u16(&m, 0xffff);
	pktbuf_finish(&m);
	assert_int_equal(send(f, &m), PS_BAD);
	/* Bind whose names never end */
	pktbuf_reset(&m);
	pktbuf_begin(&m, 'B');
	pktbuf_put_bytes(&m, "abc", 3);
	pktbuf_finish(&m);
	assert_int_equal(send(f, &m), PS_BAD);
	/* a Bind head not buffered yet is asked for, not refused */
	const struct pktbuf *b = bind_msg(f, "portal", "stmt");
	assert_int_equal(send_avail(f, b, 9, true, true), PS_NEED_MORE);
	/* a named Parse is needed whole */
	const struct pktbuf *p = parse_msg(f, "s", "SELECT 1");
	assert_int_equal(send_avail(f, p, 8, true, true), PS_NEED_FULL);
	/* Describe with a bad kind */
	assert_int_equal(send(f, kind_msg(f, 'D', 'X', "s")), PS_BAD);
	assert_int_equal(ps_client_count(f->pc), 0);
	pktbuf_free(&m);
}

/* Names of any length (PostgreSQL takes them): a 3,000-byte statement name
 * and a 2,000-byte portal name are rewritten like short ones; the head with
 * the portal is longer than the rewrite's own bytes; a Bind whose names are
 * not all buffered yet asks for the whole message once past PS_HEAD_MAX. */
static void test_long_names(void **state)
{
	struct fix *f = *state;
	char *stmt = malloc(3001), *portal = malloc(2001), a[64];
	memset(stmt, 's', 3000);
	stmt[3000] = 0;
	memset(portal, 'p', 2000);
	portal[2000] = 0;

	const struct pktbuf *m = parse_msg(f, stmt, "SELECT $1");
	assert_int_equal(send(f, m), PS_REWRITE);
	uint8_t *full = malloc(m->len + 64);
	size_t n = rewritten(f, m, full);
	snprintf(a, sizeof(a), "%s", (const char *)full + 5);
	assert_memory_equal(a, "PGCREW_", 7);
	assert_int_equal(n, m->len - 3000 + strlen(a));
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);

	m = bind_msg(f, portal, stmt);
	assert_int_equal(send_avail(f, m, 5 + PS_HEAD_MAX - 1, true, true), PS_NEED_MORE);
	assert_int_equal(send_avail(f, m, 5 + PS_HEAD_MAX + 100, true, true), PS_NEED_FULL);
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_true(f->rw.head_len > PS_HEAD_MAX);
	free(full);
	full = malloc(m->len + 64);
	n = rewritten(f, m, full);
	uint32_t len = (uint32_t)full[1] << 24 | (uint32_t)full[2] << 16 | (uint32_t)full[3] << 8 | full[4];
	assert_int_equal(len + 1, n);
	assert_string_equal((const char *)full + 5, portal);
	assert_string_equal((const char *)full + 5 + 2001, a);

	m = kind_msg(f, 'D', 'S', stmt);
	assert_int_equal(send_avail(f, m, 100, true, true), PS_NEED_FULL);
	assert_int_equal(send(f, m), PS_REWRITE);
	n = rewritten(f, m, full);
	assert_string_equal((const char *)full + 6, a);
	m = kind_msg(f, 'C', 'S', stmt);
	assert_int_equal(send(f, m), PS_REWRITE);
	n = rewritten(f, m, full);
	assert_string_equal((const char *)full + 6, "PGCREW_0");     /* nobody */
	assert_int_equal(ps_client_count(f->pc), 0);
	free(full);
	free(stmt);
	free(portal);
	ps_rewrite_free_all();
}

/* DDL changed a statement's result type: PostgreSQL answers its Bind with
 * 0A000. The shared statement goes stale for every client: a Parse of the
 * same text prepares a fresh server statement (closing the stale one
 * first), and a client still naming the stale one gets PostgreSQL's error
 * from us on a server that lacks it, so its driver prepares again. */
static void test_stale_after_ddl(void **state)
{
	struct fix *f = *state;
	struct pktbuf e, barrier;
	struct pg_error pe;
	char a[64], b[64], types[8], names[8][32];

	const struct pktbuf *m = parse_msg(f, "s1", "SELECT v FROM t");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, a);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(send(f, bind_msg(f, "", "s1")), PS_REWRITE);
	pktbuf_init(&e, 128);
	pkt_write_error(&e, "ERROR", "0A000", "cached plan must not change result type");
	assert_int_equal(reply(f, e.buf, e.len), PSR_FORWARD);       /* the client's to see */
	assert_int_equal(ps_stmt_count(), 0);                       /* out of the registry */

	/* The same client on a server without the stale statement: our 0A000. */
	struct ps_server *first = f->ps;
	f->ps = NULL;
	assert_int_equal(send(f, bind_msg(f, "", "s1")), PS_REWRITE);
	assert_int_equal(f->rw.head[0], 'D');
	pktbuf_init(&barrier, 128);
	pkt_write_error(&barrier, "ERROR", "26000", "prepared statement \"%s\" does not exist", PS_NAME_PREFIX "ERR");
	assert_int_equal(reply(f, barrier.buf, barrier.len), PSR_SKIP_SEND);
	assert_true(pkt_parse_error(f->out.buf + 5, f->out.len - 5, &pe));
	assert_string_equal(pe.sqlstate, "0A000");
	assert_string_equal(pe.message, "cached plan must not change result type");
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	ps_server_free(f->ps);
	f->ps = first;

	/* The driver's retry: Close, Parse of the same text: a fresh statement,
	 * the stale one closed on this server first. */
	assert_int_equal(send(f, kind_msg(f, 'C', 'S', "s1")), PS_REWRITE);
	assert_int_equal(reply_type(f, '3'), PSR_FORWARD);
	m = parse_msg(f, "s1", "SELECT v FROM t");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, b);
	assert_string_not_equal(a, b);
	injected(f, types, names);
	assert_string_equal(types, "C");
	assert_string_equal(names[0], a);
	assert_int_equal(reply_type(f, '3'), PSR_SKIP);             /* our Close's */
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(ps_server_count(f->ps), 1);
	assert_int_equal(ps_stmt_count(), 1);
	pktbuf_free(&e);
	pktbuf_free(&barrier);
}

/* Errors are read from their first fields only: a 1 MB error (PostgreSQL
 * quotes the bad input) is decided on from its first bytes once its
 * SQLSTATE is buffered, and "more" is asked for until then; a 0A000 also
 * needs its message before the statements of the latest Binds go stale. */
static void test_long_error_from_its_start(void **state)
{
	struct fix *f = *state;
	struct pktbuf big, plan;
	char *text = malloc(1000001);
	assert_non_null(text);
	memset(text, 'x', 1000000);
	text[1000000] = 0;

	assert_int_equal(send(f, parse_msg(f, "s1", "SELECT v FROM t")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(send(f, bind_msg(f, "", "s1")), PS_REWRITE);  /* bound: errors are watched */
	assert_true(ps_server_watch(f->ps, f->pc, 'E'));

	pktbuf_init(&big, 64);
	pkt_write_error(&big, "ERROR", "22P02", "invalid input syntax for type integer: \"%s\"", text);
	assert_false(pktbuf_failed(&big));
	assert_int_equal(reply_avail(f, big.buf, 12, big.len), PSR_NEED_MORE);
	assert_int_equal(reply_avail(f, big.buf, 16384, big.len), PSR_FORWARD);
	assert_int_equal(ps_stmt_count(), 1);                        /* not stale */

	pktbuf_init(&plan, 64);
	pkt_write_error(&plan, "ERROR", "0A000", "cached plan must not change result type");
	assert_int_equal(reply_avail(f, plan.buf, 30, plan.len), PSR_NEED_MORE);   /* C, not M */
	assert_int_equal(ps_stmt_count(), 1);
	assert_int_equal(reply_avail(f, plan.buf, plan.len, plan.len), PSR_FORWARD);
	assert_int_equal(ps_stmt_count(), 0);                        /* stale now */
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);

	/* A barrier owed: a 1 MB error of the server's own passes it by. */
	assert_int_equal(send(f, bind_msg(f, "", "nope")), PS_REWRITE);
	assert_int_equal(f->rw.head[0], 'D');
	assert_int_equal(reply_avail(f, big.buf, 10, big.len), PSR_NEED_MORE);
	assert_int_equal(reply_avail(f, big.buf, 16384, big.len), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	pktbuf_free(&big);
	pktbuf_free(&plan);
	free(text);
}

static void test_deallocate_all(void **state)
{
	struct fix *f = *state;
	static const uint8_t tag[] = "C\0\0\0\x13" "DEALLOCATE ALL";
	assert_int_equal(send(f, parse_msg(f, "s", "SELECT 1")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_true(ps_server_watch(f->ps, f->pc, 'C'));
	assert_int_equal(reply(f, tag, sizeof(tag)), PSR_FORWARD);
	assert_int_equal(ps_client_count(f->pc), 0);
	assert_int_equal(ps_server_count(f->ps), 0);
	ps_server_reset_sql(f->ps, "discard all");
}

static void test_client_gone_with_replies_owed(void **state)
{
	struct fix *f = *state;
	assert_int_equal(send(f, parse_msg(f, "s", "SELECT 1")), PS_REWRITE);
	ps_client_free(f->pc);
	f->pc = NULL;
	assert_true(ps_server_client_gone(f->ps));
	assert_false(ps_server_client_gone(f->ps));
}

/* unnamed_statement_cache: the first unnamed Parse of a text is sent named,
 * later ones are answered by the statement the server has; "" in Bind and
 * Describe follows; a simple Query, Close of "" or an uncached Parse ends it. */
static void test_unnamed_cache(void **state)
{
	struct fix *f = *state;
	char a[64], b[64];
	f->unnamed = true;
	const struct pktbuf *m = parse_msg(f, "", "SELECT $1");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, a);
	assert_memory_equal(a, "PGCREW_", 7);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	m = bind_msg(f, "", "");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, b), a);
	assert_int_equal(f->cnt.bind, 0);                    /* binds of named statements only */
	/* the same text again: no Parse reaches the server */
	m = parse_msg(f, "", "SELECT $1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(f->rw.head[0], 'C');
	assert_int_equal(reply_type(f, '3'), PSR_SKIP_SEND);
	assert_int_equal(f->out.buf[0], '1');
	m = kind_msg(f, 'D', 'S', "");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, b), a);
	assert_int_equal(f->cnt.server_parse, 1);
	/* a simple Query replaces the server's unnamed statement: "" is its own again */
	pktbuf_reset(&f->msg);
	pktbuf_begin(&f->msg, 'Q');
	pktbuf_put_string(&f->msg, "SELECT 1");
	pktbuf_finish(&f->msg);
	assert_int_equal(send(f, &f->msg), PS_PASS);
	assert_int_equal(send(f, bind_msg(f, "", "")), PS_PASS);
	/* a failed unnamed Parse leaves nothing mapped */
	assert_int_equal(send(f, parse_msg(f, "", "SELEC")), PS_REWRITE);
	f->owed = 1;
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	f->owed = 0;
	assert_int_equal(send(f, bind_msg(f, "", "")), PS_PASS);
	/* off: unnamed Parse passes and forgets */
	assert_int_equal(send(f, parse_msg(f, "", "SELECT $1")), PS_REWRITE);
	f->unnamed = false;
	assert_int_equal(send(f, parse_msg(f, "", "SELECT $1")), PS_PASS);
	assert_int_equal(send(f, bind_msg(f, "", "")), PS_PASS);
}

/* A Close the server skipped after an error (Bind fails, Close, Sync)
 * leaves the name in place, as in PostgreSQL; a Parse of the name skipped
 * with it does not replace it. */
static void test_skipped_close_keeps_name(void **state)
{
	struct fix *f = *state;
	char a[64], b[64];
	const struct pktbuf *m = parse_msg(f, "s", "SELECT 1");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, a);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(send(f, kind_msg(f, 'C', 'S', "s")), PS_REWRITE);
	assert_int_equal(ps_client_count(f->pc), 0);
	assert_int_equal(send(f, parse_msg(f, "s", "SELECT 2")), PS_REWRITE);
	f->owed = 1;
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);     /* both skipped */
	f->owed = 0;
	assert_int_equal(ps_client_count(f->pc), 1);
	m = bind_msg(f, "", "s");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(server_name(f, m, 1, b), a);       /* still SELECT 1 */
	/* answered, the Close takes the name away */
	assert_int_equal(send(f, kind_msg(f, 'C', 'S', "s")), PS_REWRITE);
	assert_int_equal(reply_type(f, '3'), PSR_FORWARD);
	assert_int_equal(ps_client_count(f->pc), 0);
}

/* ---- SQL PREPARE / EXECUTE / DEALLOCATE ---- */

static const struct pktbuf *query_msg(struct fix *f, const char *sql)
{
	pktbuf_reset(&f->msg);
	pktbuf_begin(&f->msg, 'Q');
	pktbuf_put_string(&f->msg, sql);
	pktbuf_finish(&f->msg);
	return &f->msg;
}

static enum ps_reply reply_tag(struct fix *f, const char *tag)
{
	struct pktbuf m;
	pktbuf_init(&m, 64);
	pktbuf_begin(&m, 'C');
	pktbuf_put_string(&m, tag);
	pktbuf_finish(&m);
	enum ps_reply r = reply(f, m.buf, m.len);
	pktbuf_free(&m);
	return r;
}

/* The text of the Query the server gets (rewritten in place). */
static const char *sent_sql(const struct fix *f, const struct pktbuf *m, char *buf)
{
	uint8_t full[1024];
	size_t n = rewritten(f, m, full);
	uint32_t len = (uint32_t)full[1] << 24 | (uint32_t)full[2] << 16 | (uint32_t)full[3] << 8 | full[4];
	assert_int_equal(len + 1, n);
	assert_int_equal(full[0], 'Q');
	strcpy(buf, (const char *)full + 5);
	return buf;
}

/* A PREPARE the server has not seen, answered. */
static void prepare_ok(struct fix *f, const char *sql)
{
	assert_int_equal(send(f, query_msg(f, sql)), PS_REWRITE);
	assert_int_equal(reply_tag(f, "PREPARE"), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
}

static void sql_setup(struct fix *f)
{
	f->sql = true;
}

static void test_sql_prepare_execute(void **state)
{
	struct fix *f = *state;
	char buf[512], want[512];
	sql_setup(f);
	const struct pktbuf *m = query_msg(f, " /* c */ PREPARE Foo (int) AS SELECT $1 -- x\n;");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(f->inject.len, 0);
	sent_sql(f, m, buf);
	assert_memory_equal(buf, "PREPARE \"PGCREW_", 16);
	const char *num = buf + 16;
	assert_string_equal(strchr(num, '"'), "\" (int) AS SELECT $1 -- x\n;");
	assert_int_equal(reply_tag(f, "PREPARE"), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);

	m = query_msg(f, "execute FOO(42);");
	assert_int_equal(send(f, m), PS_REWRITE);
	snprintf(want, sizeof(want), "EXECUTE \"PGCREW_%.*s(42);", (int)(strchr(num, '"') - num + 1), num);
	assert_string_equal(sent_sql(f, m, buf), want);
	assert_int_equal(reply_tag(f, "SELECT 1"), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(f->cnt.client_parse, 1);
	assert_int_equal(f->cnt.server_parse, 1);
	assert_int_equal(f->cnt.bind, 1);
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(ps_server_count(f->ps), 1);
	/* not ours: passes as it is */
	assert_int_equal(send(f, query_msg(f, "EXECUTE foo; SELECT 1")), PS_PASS);
	assert_int_equal(send(f, query_msg(f, "SELECT 1")), PS_PASS);
}

/* Another server: one Query prepares the statement there, then executes. */
static void test_sql_execute_on_other_server(void **state)
{
	struct fix *f = *state;
	sql_setup(f);
	prepare_ok(f, "PREPARE s(int) AS SELECT $1 + 1");
	ps_server_free(f->ps);
	f->ps = NULL;
	assert_int_equal(send(f, query_msg(f, "EXECUTE s (1) ; ")), PS_REPLACE);
	assert_int_equal(f->inject.buf[0], 'Q');
	const char *sql = (const char *)f->inject.buf + 5;
	const char *exec = strstr(sql, ";\nEXECUTE \"PGCREW_");
	assert_non_null(exec);
	assert_memory_equal(sql, "PREPARE \"PGCREW_", 16);
	assert_non_null(strstr(sql, "\" (int) AS SELECT $1 + 1;\n"));
	assert_string_equal(strchr(exec + 18, '"'), "\" (1) ; ");
	assert_int_equal(reply_tag(f, "PREPARE"), PSR_SKIP);       /* ours */
	assert_int_equal(reply_tag(f, "SELECT 1"), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_server_count(f->ps), 1);
	/* it failed there (table gone): the server forgets it, the name stays */
	ps_server_free(f->ps);
	f->ps = NULL;
	assert_int_equal(send(f, query_msg(f, "EXECUTE s(2)")), PS_REPLACE);
	uint8_t err[] = { 'E', 0, 0, 0, 11, 'C', '4', '2', 'P', '0', '1', 0, 0 };
	assert_int_equal(reply(f, err, sizeof(err)), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_server_count(f->ps), 0);
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(send(f, query_msg(f, "EXECUTE s(2)")), PS_REPLACE);
	assert_int_equal(reply_tag(f, "PREPARE"), PSR_SKIP);
}

/* A statement the server has: PREPARE and DEALLOCATE change names only,
 * an UNLISTEN runs instead and its tag is replaced. */
static void test_sql_known_and_deallocate(void **state)
{
	struct fix *f = *state;
	char buf[256];
	sql_setup(f);
	prepare_ok(f, "PREPARE a AS SELECT 1");
	const struct pktbuf *m = query_msg(f, "PREPARE b AS SELECT 1;");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(sent_sql(f, m, buf), "UNLISTEN \"PGCREW_0\"");
	assert_int_equal(reply_tag(f, "UNLISTEN"), PSR_SKIP_SEND);
	assert_string_equal((const char *)f->out.buf + 5, "PREPARE");
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_client_count(f->pc), 2);
	assert_int_equal(ps_server_count(f->ps), 1);
	assert_int_equal(f->cnt.server_parse, 1);

	m = query_msg(f, "DEALLOCATE a");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(sent_sql(f, m, buf), "UNLISTEN \"PGCREW_0\"");
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(reply_tag(f, "UNLISTEN"), PSR_SKIP_SEND);
	assert_string_equal((const char *)f->out.buf + 5, "DEALLOCATE");
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE ALL")), PS_REWRITE);
	assert_int_equal(ps_client_count(f->pc), 0);
	assert_int_equal(reply_tag(f, "UNLISTEN"), PSR_SKIP_SEND);
	assert_string_equal((const char *)f->out.buf + 5, "DEALLOCATE ALL");
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_server_count(f->ps), 1);      /* kept for others */
}

static void expect_error(struct fix *f, const char *code, const char *text)
{
	struct pktbuf e;
	struct pg_error pe;
	pktbuf_init(&e, 128);
	pkt_write_error(&e, "ERROR", "26000", "prepared statement \"%s\" does not exist", PS_NAME_PREFIX "ERR");
	assert_int_equal(reply(f, e.buf, e.len), PSR_SKIP_SEND);
	assert_true(pkt_parse_error(f->out.buf + 5, f->out.len - 5, &pe));
	assert_string_equal(pe.sqlstate, code);
	assert_string_equal(pe.message, text);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	pktbuf_free(&e);
}

static void test_sql_errors(void **state)
{
	struct fix *f = *state;
	char buf[256];
	sql_setup(f);
	const struct pktbuf *m = query_msg(f, "EXECUTE nope(1)");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_string_equal(sent_sql(f, m, buf), "EXECUTE \"PGCREW_ERR\"");
	expect_error(f, "26000", "prepared statement \"nope\" does not exist");
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE \"Nope\"")), PS_REWRITE);
	expect_error(f, "26000", "prepared statement \"Nope\" does not exist");
	prepare_ok(f, "PREPARE x AS SELECT 1");
	assert_int_equal(send(f, query_msg(f, "PREPARE X AS SELECT 2")), PS_REWRITE);
	expect_error(f, "42P05", "prepared statement \"x\" already exists");
	/* a Parse'd name is not for EXECUTE, nor an SQL one for Bind */
	assert_int_equal(send(f, parse_msg(f, "p", "SELECT 3")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(send(f, query_msg(f, "EXECUTE p")), PS_REWRITE);
	expect_error(f, "0A000", "prepared statement \"p\" was made by Parse: pgcrew cannot EXECUTE it");
	assert_int_equal(send(f, bind_msg(f, "", "x")), PS_REWRITE);
	expect_error(f, "0A000", "prepared statement \"x\" was made by SQL PREPARE: "
		     "pgcrew runs it only with EXECUTE");
	assert_int_equal(send(f, parse_msg(f, "x", "SELECT 4")), PS_REWRITE);   /* one namespace */
	assert_int_equal(f->rw.head[0], 'D');
}

/* What the server skips (a failed PREPARE, an aborted transaction) is
 * undone at ReadyForQuery. */
static void test_sql_rollback(void **state)
{
	struct fix *f = *state;
	uint8_t err[] = { 'E', 0, 0, 0, 11, 'C', '2', '5', 'P', '0', '2', 0, 0 };
	sql_setup(f);
	assert_int_equal(send(f, query_msg(f, "PREPARE bad AS SELEC 1")), PS_REWRITE);
	assert_int_equal(reply(f, err, sizeof(err)), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_client_count(f->pc), 0);
	assert_int_equal(ps_server_count(f->ps), 0);
	prepare_ok(f, "PREPARE a AS SELECT 1");
	prepare_ok(f, "PREPARE b AS SELECT 2");
	const char *skipped[] = { "DEALLOCATE ALL", "DEALLOCATE a", "PREPARE c AS SELECT 1" };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(send(f, query_msg(f, skipped[i])), PS_REWRITE);
		assert_int_equal(reply(f, err, sizeof(err)), PSR_FORWARD);
		assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
		assert_int_equal(ps_client_count(f->pc), 2);
	}
	/* pipelined: the second's skip does not undo the first */
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE a")), PS_REWRITE);
	f->owed = 1;
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE b")), PS_REWRITE);
	f->owed = 0;
	assert_int_equal(reply_tag(f, "UNLISTEN"), PSR_SKIP_SEND);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(reply(f, err, sizeof(err)), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(send(f, query_msg(f, "EXECUTE b")), PS_REWRITE);
	assert_int_equal(reply_tag(f, "SELECT 1"), PSR_FORWARD);
}

/* Eviction, flushes that change nothing, the setting off. */
static void test_sql_evict_flush_off(void **state)
{
	struct fix *f = *state;
	char types[8], names[8][32];
	sql_setup(f);
	f->max = 1;
	prepare_ok(f, "PREPARE a AS SELECT 1");
	const struct pktbuf *m = query_msg(f, "PREPARE b AS SELECT 2");
	assert_int_equal(send_avail(f, m, m->len, false, true), PS_FLUSH);   /* must inject a Close */
	assert_int_equal(send_avail(f, m, m->len, true, false), PS_FLUSH);   /* must grow */
	assert_int_equal(send_avail(f, m, m->len - 1, true, true), PS_NEED_FULL);
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(send(f, m), PS_REWRITE);
	injected(f, types, names);
	assert_string_equal(types, "C");
	assert_int_equal(reply_type(f, '3'), PSR_SKIP);
	assert_int_equal(reply_tag(f, "PREPARE"), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(ps_server_count(f->ps), 1);
	m = query_msg(f, "EXECUTE a");
	assert_int_equal(send_avail(f, m, m->len, false, true), PS_FLUSH);
	assert_int_equal(send(f, m), PS_REPLACE);
	injected(f, types, names);
	assert_string_equal(types, "CQ");
	f->sql = false;
	assert_int_equal(reply_type(f, '3'), PSR_SKIP);
	assert_int_equal(reply_tag(f, "PREPARE"), PSR_SKIP);
	assert_int_equal(reply_tag(f, "SELECT 1"), PSR_FORWARD);
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);
	assert_int_equal(send(f, query_msg(f, "EXECUTE a")), PS_PASS);
	/* a long leading comment: the start is enough to tell "not ours" */
	char big[3000];
	memset(big, ' ', sizeof(big) - 1);
	memcpy(big + 2000, "SELECT 1", 8);
	big[sizeof(big) - 1] = 0;
	f->sql = true;
	m = query_msg(f, big);
	assert_int_equal(send_avail(f, m, 2100, true, true), PS_PASS);
	assert_int_equal(send_avail(f, m, 1000, true, true), PS_NEED_FULL);
}

/* ---- a server moving to another worker ---- */

/* What ps_server_export wrote, read back into a fresh server table. */
static struct ps_server *moved(const struct ps_server *from)
{
	struct pktbuf pb;
	struct pkt_reader r;
	struct ps_server *to = NULL;
	pktbuf_init(&pb, 256);
	ps_server_export(from, &pb);
	assert_false(pktbuf_failed(&pb));
	pkt_reader_init(&r, pb.buf, pb.len);
	assert_true(ps_server_import(&to, &r));
	assert_true(pkt_get_end(&r));
	pktbuf_free(&pb);
	return to;
}

/* Protocol and SQL statements keep their server names: after the move a
 * Bind or EXECUTE of either prepares nothing again. */
static void test_export_import(void **state)
{
	struct fix *f = *state;
	char before[64], after[64], buf[512];
	sql_setup(f);
	const struct pktbuf *m = parse_msg(f, "s1", "SELECT $1");
	assert_int_equal(send(f, m), PS_REWRITE);
	server_name(f, m, 0, before);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	prepare_ok(f, "PREPARE q(int) AS SELECT $1 + 1");
	assert_true(ps_server_movable(f->ps));

	struct ps_server *to = moved(f->ps);
	assert_int_equal(ps_server_count(to), 2);
	ps_server_free(f->ps);
	f->ps = to;
	m = bind_msg(f, "", "s1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(f->inject.len, 0);
	assert_string_equal(server_name(f, m, 1, after), before);
	assert_int_equal(send(f, query_msg(f, "EXECUTE q(1)")), PS_REWRITE);
	assert_int_equal(f->inject.len, 0);
	assert_memory_equal(sent_sql(f, query_msg(f, "EXECUTE q(1)"), buf), "EXECUTE \"PGCREW_", 16);
	assert_int_equal(f->cnt.server_parse, 2);     /* only the two before the move */
	assert_int_equal(ps_stmt_count(), 2);
}

/* Replies owed: the server cannot move. An empty table moves as nothing. */
static void test_export_owed_and_empty(void **state)
{
	struct fix *f = *state;
	assert_true(ps_server_movable(NULL));
	struct ps_server *to = moved(NULL);
	assert_null(to);
	assert_int_equal(send(f, parse_msg(f, "s1", "SELECT 1")), PS_REWRITE);
	assert_false(ps_server_movable(f->ps));       /* ParseComplete owed */
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_true(ps_server_movable(f->ps));
}

/* Without sql_prepared_statements, an SQL DEALLOCATE of one of the
 * client's protocol names is its Close (psycopg on libpq < 17); any other
 * SQL statement, and DEALLOCATE of another name, passes untouched. A server
 * handed to another worker leaves its stale statements behind. */
static void test_dealloc_without_sql_and_stale_export(void **state)
{
	struct fix *f = *state;
	struct pktbuf pb, e;
	assert_false(f->sql);
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE _pg3_0")), PS_PASS);   /* no names yet */
	assert_int_equal(send(f, parse_msg(f, "_pg3_0", "SELECT 1")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(send(f, parse_msg(f, "_pg3_1", "SELECT v FROM t")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	assert_int_equal(send(f, query_msg(f, "EXECUTE _pg3_0")), PS_PASS);
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE other")), PS_PASS);
	assert_int_equal(send(f, query_msg(f, "DEALLOCATE _pg3_0")), PS_REWRITE);
	assert_int_equal(ps_client_count(f->pc), 1);
	assert_int_equal(reply_tag(f, "UNLISTEN"), PSR_SKIP_SEND);          /* retagged */
	assert_int_equal(reply_type(f, 'Z'), PSR_FORWARD);

	assert_int_equal(send(f, bind_msg(f, "", "_pg3_1")), PS_REWRITE);
	pktbuf_init(&e, 128);
	pkt_write_error(&e, "ERROR", "0A000", "cached plan must not change result type");
	assert_int_equal(reply(f, e.buf, e.len), PSR_FORWARD);
	pktbuf_init(&pb, 256);
	ps_server_export(f->ps, &pb);
	struct pkt_reader r;
	pkt_reader_init(&r, pb.buf, pb.len);
	assert_int_equal(pkt_get_u32(&r), 1);      /* SELECT 1 only */
	pktbuf_free(&pb);
	pktbuf_free(&e);
}

/* Malformed or cut records are refused, never half-read into a crash. */
static void test_import_malformed(void **state)
{
	struct fix *f = *state;
	struct pktbuf pb;
	assert_int_equal(send(f, parse_msg(f, "s1", "SELECT 1")), PS_REWRITE);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	pktbuf_init(&pb, 256);
	ps_server_export(f->ps, &pb);
	for (size_t cut = 0; cut < pb.len; cut++) {
		struct pkt_reader r;
		struct ps_server *to = NULL;
		pkt_reader_init(&r, pb.buf, cut);
		assert_false(ps_server_import(&to, &r) && pkt_get_end(&r));
		ps_server_free(to);
	}
	pktbuf_free(&pb);
	uint8_t zero_num[] = { 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x' };
	struct pkt_reader r;
	struct ps_server *to = NULL;
	pkt_reader_init(&r, zero_num, sizeof(zero_num));
	assert_false(ps_server_import(&to, &r));
	ps_server_free(to);
}

/* Numbers come from the worker's base; one of our range that arrives on a
 * server is never handed out again, one of another range changes nothing. */
static void test_num_base(void **state)
{
	struct fix *f = *state;
	char nm[64];
	uint64_t base = (uint64_t)3 << 40 | (uint64_t)2 << 32;
	ps_set_num_base(base);
	const struct pktbuf *m = parse_msg(f, "a", "SELECT 1");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(strtoull(server_name(f, m, 0, nm) + 7, NULL, 10), base + 1);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);

	/* a server from elsewhere holding our base + 7 and another range's */
	struct pktbuf pb;
	struct pkt_reader r;
	struct ps_server *to = NULL;
	const char *texts[2] = { "SELECT 2", "SELECT 3" };
	uint64_t nums[2] = { base + 7, ((uint64_t)5 << 40) + 99 };
	pktbuf_init(&pb, 128);
	pktbuf_put_u32(&pb, 2);
	for (int i = 0; i < 2; i++) {
		pktbuf_put_u32(&pb, (uint32_t)(nums[i] >> 32));
		pktbuf_put_u32(&pb, (uint32_t)nums[i]);
		pktbuf_put_u8(&pb, 0);
		pktbuf_put_u32(&pb, (uint32_t)strlen(texts[i]) + 3);
		pktbuf_put_bytes(&pb, texts[i], strlen(texts[i]) + 1);
		pktbuf_put_u16(&pb, 0);
	}
	pkt_reader_init(&r, pb.buf, pb.len);
	assert_true(ps_server_import(&to, &r));
	pktbuf_free(&pb);
	ps_server_free(f->ps);
	f->ps = to;
	m = parse_msg(f, "b", "SELECT 4");
	assert_int_equal(send(f, m), PS_REWRITE);
	assert_int_equal(strtoull(server_name(f, m, 0, nm) + 7, NULL, 10), base + 8);
	assert_int_equal(reply_type(f, '1'), PSR_FORWARD);
	ps_set_num_base(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parse_bind_renamed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unnamed_pass, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_local_and_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_text_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eviction_and_reprepare, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_through_barrier, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_after_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_skipped_segment_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_after_ddl, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_error_from_its_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deallocate_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_gone_with_replies_owed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unnamed_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_skipped_close_keeps_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sql_prepare_execute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sql_execute_on_other_server, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sql_known_and_deallocate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sql_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sql_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sql_evict_flush_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_import, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_owed_and_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dealloc_without_sql_and_stale_export, setup, teardown),
		cmocka_unit_test_setup_teardown(test_import_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_num_base, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — prepared statements: the worker's statements keyed by query text
 * and parameter types (or, for SQL PREPARE, the text after the name), each
 * client's names for them, each server's LRU of what is prepared there (as
 * PGCREW_<n>), and the rewrite decisions for client messages and server
 * replies. Pure bookkeeping: the relay glue (psrelay.c) moves the bytes. */
#include "prepared.h"
#include "log.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "proto/sqlprep.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- chained hash tables (load factor at most 1) ---- */

struct ps_link {
	struct ps_link *next;
	uint64_t hash;
};

struct ps_tab {
	struct ps_link **b;
	uint32_t mask;            /* buckets - 1 (0 with no buckets) */
	uint32_t n;
};

#define FNV_INIT 0xcbf29ce484222325ULL

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ULL;       /* FNV-1a */
	return h;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
	uint64_t h = fnv(FNV_INIT, p, n);
	return h ^ (h >> 29);
}

static void tab_grow(struct ps_tab *t)
{
	uint32_t nb = t->b ? (t->mask + 1) * 2 : 16;
	struct ps_link **b = xcalloc(nb, sizeof(*b));
	for (uint32_t i = 0; t->b && i <= t->mask; i++) {
		struct ps_link *l = t->b[i], *next;
		for (; l; l = next) {
			next = l->next;
			l->next = b[l->hash & (nb - 1)];
			b[l->hash & (nb - 1)] = l;
		}
	}
	free(t->b);
	t->b = b;
	t->mask = nb - 1;
}

static void tab_add(struct ps_tab *t, struct ps_link *l)
{
	if (!t->b || t->n > t->mask)
		tab_grow(t);
	l->next = t->b[l->hash & t->mask];
	t->b[l->hash & t->mask] = l;
	t->n++;
}

static void tab_del(struct ps_tab *t, struct ps_link *l)
{
	struct ps_link **pp = &t->b[l->hash & t->mask];
	while (*pp && *pp != l)
		pp = &(*pp)->next;
	if (!*pp)
		fatal("prepared: unlinking an entry not in its table");
	*pp = l->next;
	t->n--;
}

static struct ps_link *tab_chain(const struct ps_tab *t, uint64_t hash)
{
	return t->b ? t->b[hash & t->mask] : NULL;
}

/* ---- statements: the body after the name, shared by every client ---- */

struct ps_stmt {
	struct ps_link link;      /* registry */
	uint32_t refs;            /* client names, server entries, replies owed */
	uint32_t len;
	bool sql;                 /* from SQL PREPARE (body ends in SQL_MARK) */
	bool stale;               /* out of the registry: DDL changed its result type */
	uint8_t body[];           /* query\0, int16 count, int32 type oids; or
	                             the text after PREPARE's name, SQL_MARK */
};

/* An SQL statement's body is its text then this mark; a protocol body has a
 * count >= 0 right after its query's NUL, so the two kinds never meet. */
static const uint8_t SQL_MARK[] = { 0, 0xff, 0xff };

static struct ps_tab registry;
static uint64_t next_num = 1;     /* PGCREW_<n>; 0 never exists (see CLOSE_NOBODY) */
static uint64_t num_base;         /* this worker's range of numbers (ps_set_num_base) */
static uint32_t stale_gen;        /* bumped when a statement goes stale */

/* A Close of a name that never exists: the server answers CloseComplete and
 * changes nothing, which puts a locally answered message in its place. */
#define CLOSE_NOBODY PS_NAME_PREFIX "0"
/* Describe of a name that never exists: the server fails here, exactly as
 * it would for the client's own mistake, and skips to Sync. */
#define BARRIER_NAME PS_NAME_PREFIX "ERR"

/* A body given in two pieces (an SQL text and its mark need no copy). */
struct piece2 {
	const uint8_t *a, *b;
	uint32_t alen, blen;
};

static uint64_t hash_piece2(const struct piece2 *k)
{
	uint64_t h = fnv(fnv(FNV_INIT, k->a, k->alen), k->b, k->blen);
	return h ^ (h >> 29);
}

static struct ps_stmt *stmt_find2(const struct piece2 *k, uint64_t h)
{
	for (struct ps_link *l = tab_chain(&registry, h); l; l = l->next) {
		struct ps_stmt *s = (struct ps_stmt *)l;
		if (l->hash == h && s->len == k->alen + k->blen && memcmp(s->body, k->a, k->alen) == 0 &&
		    (k->blen == 0 || memcmp(s->body + k->alen, k->b, k->blen) == 0))
			return s;
	}
	return NULL;
}

static struct ps_stmt *stmt_find(const uint8_t *body, uint32_t len, uint64_t h)
{
	struct piece2 k = { body, NULL, len, 0 };
	return stmt_find2(&k, h);
}

/* The statement for the body, with one more reference. */
static struct ps_stmt *stmt_get2(const struct piece2 *k, uint64_t h)
{
	struct ps_stmt *s = stmt_find2(k, h);
	if (!s) {
		s = xmalloc(sizeof(*s) + k->alen + k->blen);
		s->link.hash = h;
		s->refs = 0;
		s->len = k->alen + k->blen;
		s->sql = k->b == SQL_MARK;
		s->stale = false;
		memcpy(s->body, k->a, k->alen);
		if (k->blen)
			memcpy(s->body + k->alen, k->b, k->blen);
		tab_add(&registry, &s->link);
	}
	s->refs++;
	return s;
}

static struct ps_stmt *stmt_get(const uint8_t *body, uint32_t len, uint64_t h)
{
	struct piece2 k = { body, NULL, len, 0 };
	return stmt_get2(&k, h);
}

static void stmt_put(struct ps_stmt *s)
{
	if (!s || --s->refs > 0)
		return;
	if (!s->stale)
		tab_del(&registry, &s->link);
	free(s);
	if (registry.n == 0) {
		free(registry.b);
		registry.b = NULL;
		registry.mask = 0;
	}
}

size_t ps_stmt_count(void)
{
	return registry.n;
}

/* PostgreSQL said a plan of s must not change its result type (DDL on a
 * table it reads): the server statements made from s stay what they were,
 * but the next Parse of the same text, from any client, makes a fresh one
 * (its Describe from the server), and the stale ones are closed on their
 * servers (see evict_for_one). Clients still naming s learn it from
 * PostgreSQL, or from us where the server lacks it, and prepare again. */
static void stmt_stale(struct ps_stmt *s)
{
	if (s->stale)
		return;
	s->stale = true;
	tab_del(&registry, &s->link);
	stale_gen++;
}

/* ---- client names ---- */

struct ps_centry {
	struct ps_link link;
	struct ps_stmt *stmt;     /* one reference */
	struct ps_client *owner;  /* NULL once the client is gone */
	uint32_t refs;            /* the map's, plus replies owed for it */
	bool in_map;
	char name[];
};

struct ps_client {
	struct ps_tab names;
	struct ps_stmt *unnamed;  /* unnamed_statement_cache: what "" stands for, or NULL */
};

static struct ps_centry *client_find(const struct ps_client *pc, const char *name, size_t n)
{
	uint64_t h = hash_bytes(name, n);
	for (struct ps_link *l = pc ? tab_chain(&pc->names, h) : NULL; l; l = l->next) {
		struct ps_centry *ce = (struct ps_centry *)l;
		if (l->hash == h && strcmp(ce->name, name) == 0)
			return ce;
	}
	return NULL;
}

static struct ps_centry *client_add(struct ps_client *pc, const char *name, size_t n, struct ps_stmt *st)
{
	struct ps_centry *ce = xmalloc(sizeof(*ce) + n + 1);
	memcpy(ce->name, name, n + 1);
	ce->link.hash = hash_bytes(name, n);
	ce->stmt = st;
	ce->owner = pc;
	ce->refs = 1;
	ce->in_map = true;
	tab_add(&pc->names, &ce->link);
	return ce;
}

static void ce_put(struct ps_centry *ce)
{
	if (!ce || --ce->refs > 0)
		return;
	stmt_put(ce->stmt);
	free(ce);
}

static void client_remove(struct ps_centry *ce)
{
	if (!ce || !ce->in_map || !ce->owner)
		return;
	tab_del(&ce->owner->names, &ce->link);
	ce->in_map = false;
	ce_put(ce);
}

/* A Close the server skipped: the name is the client's again, unless it
 * has been prepared anew since. */
static void client_restore(struct ps_centry *ce)
{
	if (!ce || ce->in_map || !ce->owner || client_find(ce->owner, ce->name, strlen(ce->name)))
		return;
	tab_add(&ce->owner->names, &ce->link);
	ce->in_map = true;
	ce->refs++;
}

static void client_forget_all(struct ps_client *pc)
{
	for (uint32_t i = 0; pc && pc->names.b && i <= pc->names.mask; i++) {
		struct ps_link *l = pc->names.b[i], *next;
		for (; l; l = next) {
			struct ps_centry *ce = (struct ps_centry *)l;
			next = l->next;
			ce->in_map = false;
			ce->owner = NULL;
			ce_put(ce);
		}
		pc->names.b[i] = NULL;
	}
	if (pc) {
		pc->names.n = 0;
		stmt_put(pc->unnamed);
		pc->unnamed = NULL;
	}
}

size_t ps_client_count(const struct ps_client *pc)
{
	return pc ? pc->names.n : 0;
}

/* Movable: every name is only in the map (no reply owed for any). */
bool ps_client_movable(const struct ps_client *pc)
{
	for (uint32_t i = 0; pc && pc->names.b && i <= pc->names.mask; i++)
		for (struct ps_link *l = pc->names.b[i]; l; l = l->next)
			if (((const struct ps_centry *)l)->refs != 1)
				return false;
	return true;
}

static void put_stmt(struct pktbuf *pb, const struct ps_stmt *st)
{
	pktbuf_put_u8(pb, st->sql);
	pktbuf_put_u32(pb, st->len);
	pktbuf_put_bytes(pb, st->body, st->len);
}

void ps_client_export(const struct ps_client *pc, struct pktbuf *pb)
{
	pktbuf_put_u32(pb, (uint32_t)ps_client_count(pc));
	for (uint32_t i = 0; pc && pc->names.b && i <= pc->names.mask; i++)
		for (struct ps_link *l = pc->names.b[i]; l; l = l->next) {
			const struct ps_centry *ce = (const struct ps_centry *)l;
			pktbuf_put_string(pb, ce->name);
			put_stmt(pb, ce->stmt);
		}
	pktbuf_put_u8(pb, pc && pc->unnamed);
	if (pc && pc->unnamed)
		put_stmt(pb, pc->unnamed);
}

/* A statement as put_stmt wrote it, with one reference; NULL if malformed. */
static struct ps_stmt *get_stmt(struct pkt_reader *r)
{
	uint8_t sql = pkt_get_u8(r);
	uint32_t len = pkt_get_u32(r);
	const uint8_t *body = pkt_get_bytes(r, len);
	if (r->failed || !body || len == 0)
		return NULL;
	struct ps_stmt *st = stmt_get(body, len, hash_bytes(body, len));
	st->sql = sql != 0;
	return st;
}

bool ps_client_import(struct ps_client **pcp, struct pkt_reader *r)
{
	uint32_t n = pkt_get_u32(r);
	for (uint32_t i = 0; i < n && !r->failed; i++) {
		const char *name = pkt_get_string(r);
		struct ps_stmt *st = name ? get_stmt(r) : NULL;
		if (!st)
			return false;
		if (!*pcp)
			*pcp = xcalloc(1, sizeof(**pcp));
		if (client_find(*pcp, name, strlen(name)))
			stmt_put(st);          /* a name twice: keep the first */
		else
			(void)client_add(*pcp, name, strlen(name), st);
	}
	if (pkt_get_u8(r) && !r->failed) {
		struct ps_stmt *st = get_stmt(r);
		if (!st)
			return false;
		if (!*pcp)
			*pcp = xcalloc(1, sizeof(**pcp));
		stmt_put((*pcp)->unnamed);
		(*pcp)->unnamed = st;
	}
	return !r->failed;
}

void ps_client_free(struct ps_client *pc)
{
	if (!pc)
		return;
	client_forget_all(pc);
	free(pc->names.b);
	free(pc);
}

/* ---- server statements and the replies a server owes ---- */

struct ps_sentry {
	struct ps_link link;              /* keyed by the statement's address */
	struct ps_sentry *older, *newer;  /* LRU */
	struct ps_stmt *stmt;             /* one reference */
	uint64_t num;                     /* prepared there as PGCREW_<num> */
};

/* What a Parse or Close sent to the server stands for, so that its reply
 * (ParseComplete, CloseComplete) can be passed on, dropped or replaced, and
 * what was skipped after an error can be rolled back at ReadyForQuery. */
enum pend_kind {
	PE_PASS,          /* the client's own unnamed Parse or Close: pass the reply */
	PE_CLIENT_PARSE,  /* the client's Parse, renamed: pass */
	PE_CLIENT_FAKE,   /* the client's Parse of a statement the server has: CloseComplete becomes ParseComplete */
	PE_INJECTED,      /* our Parse before a Bind/Describe: drop */
	PE_EVICT,         /* our Close of the least recently used: drop */
	PE_ERROR,         /* our barrier: its error becomes the client's error */
	PE_UNNAMED_PARSE, /* unnamed Parse sent named (unnamed_statement_cache): pass */
	PE_UNNAMED_FAKE,  /* unnamed Parse the server had: CloseComplete becomes ParseComplete */
	PE_CLIENT_CLOSE,  /* the client's Close of a name, as a Close of nobody: pass */
	/* SQL statements (sql_prepared_statements): CommandComplete replies */
	PE_SQL_PREPARE,   /* the client's PREPARE, renamed: pass */
	PE_SQL_INJECTED,  /* our PREPARE before an EXECUTE: drop */
	PE_SQL_FAKE,      /* the client's PREPARE of a statement the server has: UNLISTEN in its place */
	PE_SQL_DEALLOC,   /* the client's DEALLOCATE name: UNLISTEN in its place */
	PE_SQL_DEALLOC_ALL, /* the client's DEALLOCATE ALL: UNLISTEN in its place */
};

struct ps_pend {
	uint8_t kind;
	uint32_t seg;                     /* ReadyForQuery that ends its Sync's segment */
	struct ps_stmt *stmt;             /* a reference, or NULL */
	struct ps_centry *ce;             /* a reference, or NULL */
	uint64_t num;
	char *error;                      /* PE_ERROR */
	char code[6];
	struct ps_centry **saved;         /* PE_SQL_DEALLOC_ALL: the names dropped, a reference each */
	uint32_t n_saved;
};

struct ps_server {
	struct ps_tab stmts;
	struct ps_sentry *oldest, *newest;
	struct ps_pend *q;                /* ring of replies owed, in order */
	uint32_t q_head, q_len, q_cap;
	uint32_t z_seen;                  /* ReadyForQuery seen while replies were owed */
	uint32_t stale_seen;              /* stale_gen when its stale ones were last closed */
	uint64_t bound[4];                /* numbers of the latest Binds (a ring) */
	uint8_t bound_next, n_bound;
};

static uint64_t ptr_hash(const void *p)
{
	return hash_bytes(&p, sizeof(p));
}

static struct ps_sentry *server_find(const struct ps_server *ps, const struct ps_stmt *st)
{
	uint64_t h = ptr_hash(st);
	for (struct ps_link *l = ps ? tab_chain(&ps->stmts, h) : NULL; l; l = l->next) {
		struct ps_sentry *se = (struct ps_sentry *)l;
		if (se->stmt == st)
			return se;
	}
	return NULL;
}

static void lru_unlink(struct ps_server *ps, struct ps_sentry *se)
{
	if (se->older)
		se->older->newer = se->newer;
	else
		ps->oldest = se->newer;
	if (se->newer)
		se->newer->older = se->older;
	else
		ps->newest = se->older;
	se->older = se->newer = NULL;
}

static void lru_append(struct ps_server *ps, struct ps_sentry *se)
{
	se->older = ps->newest;
	se->newer = NULL;
	if (ps->newest)
		ps->newest->newer = se;
	else
		ps->oldest = se;
	ps->newest = se;
}

static void server_touch(struct ps_server *ps, struct ps_sentry *se)
{
	if (ps->newest == se)
		return;
	lru_unlink(ps, se);
	lru_append(ps, se);
}

static struct ps_sentry *server_add(struct ps_server *ps, struct ps_stmt *st, uint64_t num)
{
	struct ps_sentry *se = xcalloc(1, sizeof(*se));
	se->link.hash = ptr_hash(st);
	se->stmt = st;
	st->refs++;
	se->num = num;
	tab_add(&ps->stmts, &se->link);
	lru_append(ps, se);
	return se;
}

/* Forget se; its statement reference goes to the caller when keep_ref. */
static void server_remove(struct ps_server *ps, struct ps_sentry *se, bool keep_ref)
{
	tab_del(&ps->stmts, &se->link);
	lru_unlink(ps, se);
	if (!keep_ref)
		stmt_put(se->stmt);
	free(se);
}

static void server_forget_all(struct ps_server *ps)
{
	while (ps && ps->oldest)
		server_remove(ps, ps->oldest, false);
}

size_t ps_server_count(const struct ps_server *ps)
{
	return ps ? ps->stmts.n : 0;
}

void ps_set_num_base(uint64_t base)
{
	num_base = base;
	next_num = base + 1;
}

bool ps_server_movable(const struct ps_server *ps)
{
	return !ps || ps->q_len == 0;
}

/* Oldest first, so that the importer's LRU comes out in the same order. A
 * stale statement stays behind: the importer knows nothing of it, so its
 * clients prepare the text afresh (it would take the stale one for good). */
void ps_server_export(const struct ps_server *ps, struct pktbuf *pb)
{
	uint32_t n = 0;
	for (const struct ps_sentry *se = ps ? ps->oldest : NULL; se; se = se->newer)
		n += !se->stmt->stale;
	pktbuf_put_u32(pb, n);
	for (const struct ps_sentry *se = ps ? ps->oldest : NULL; se; se = se->newer) {
		if (se->stmt->stale)
			continue;
		pktbuf_put_u32(pb, (uint32_t)(se->num >> 32));
		pktbuf_put_u32(pb, (uint32_t)se->num);
		pktbuf_put_u8(pb, se->stmt->sql);
		pktbuf_put_u32(pb, se->stmt->len);
		pktbuf_put_bytes(pb, se->stmt->body, se->stmt->len);
	}
}

/* A number of our own range already on this server must never be handed
 * out again: move past it (a server can come back to the worker that made
 * its statements, or to that worker's successor in the same slot). */
static void note_foreign_num(uint64_t num)
{
	if (num >= next_num && (num >> 32) == (num_base >> 32))
		next_num = num + 1;
}

bool ps_server_import(struct ps_server **psp, struct pkt_reader *r)
{
	uint32_t n = pkt_get_u32(r);
	for (uint32_t i = 0; i < n && !r->failed; i++) {
		uint64_t num = (uint64_t)pkt_get_u32(r) << 32;
		num |= pkt_get_u32(r);
		uint8_t sql = pkt_get_u8(r);
		uint32_t len = pkt_get_u32(r);
		const uint8_t *body = pkt_get_bytes(r, len);
		if (r->failed || !body || len == 0 || num == 0)
			return false;
		if (!*psp)
			*psp = xcalloc(1, sizeof(**psp));
		struct ps_stmt *st = stmt_get(body, len, hash_bytes(body, len));
		st->sql = sql != 0;
		if (!server_find(*psp, st))
			(void)server_add(*psp, st, num);
		stmt_put(st);
		note_foreign_num(num);
	}
	return !r->failed;
}

static struct ps_pend *pend_at(struct ps_server *ps, uint32_t i)
{
	return &ps->q[(ps->q_head + i) % ps->q_cap];
}

static struct ps_pend *pend_push(struct ps_server *ps, enum pend_kind kind, uint32_t seg)
{
	if (ps->q_len == ps->q_cap) {
		uint32_t cap = ps->q_cap ? ps->q_cap * 2 : 16;
		struct ps_pend *q = xcalloc(cap, sizeof(*q));
		for (uint32_t i = 0; i < ps->q_len; i++)
			q[i] = *pend_at(ps, i);
		free(ps->q);
		ps->q = q;
		ps->q_cap = cap;
		ps->q_head = 0;
	}
	struct ps_pend *p = pend_at(ps, ps->q_len++);
	memset(p, 0, sizeof(*p));
	p->kind = (uint8_t)kind;
	p->seg = seg;
	return p;
}

static void pend_release(struct ps_pend *p)
{
	stmt_put(p->stmt);
	ce_put(p->ce);
	free(p->error);
	for (uint32_t i = 0; i < p->n_saved; i++)
		ce_put(p->saved[i]);
	free(p->saved);
	p->stmt = NULL;
	p->ce = NULL;
	p->error = NULL;
	p->saved = NULL;
	p->n_saved = 0;
}

static void pend_pop(struct ps_server *ps)
{
	pend_release(pend_at(ps, 0));
	ps->q_head = (ps->q_head + 1) % ps->q_cap;
	ps->q_len--;
}

static void server_remove_num(struct ps_server *ps, struct ps_stmt *st, uint64_t num)
{
	struct ps_sentry *se = server_find(ps, st);
	if (se && se->num == num)
		server_remove(ps, se, false);
}

/* The server skipped this request (an earlier error in its segment): undo
 * what sending it assumed. A skipped eviction leaves the statement on the
 * server under a name nobody uses again, until the connection closes. */
static void pend_rollback(struct ps_server *ps, struct ps_client *pc, struct ps_pend *p)
{
	if ((p->kind == PE_UNNAMED_PARSE || p->kind == PE_UNNAMED_FAKE) && pc && pc->unnamed == p->stmt) {
		stmt_put(pc->unnamed);
		pc->unnamed = NULL;
	}
	switch (p->kind) {
	case PE_UNNAMED_PARSE:
	case PE_CLIENT_PARSE:
	case PE_SQL_PREPARE:
		client_remove(p->ce);
		server_remove_num(ps, p->stmt, p->num);
		break;
	case PE_CLIENT_FAKE:
	case PE_SQL_FAKE:
		client_remove(p->ce);
		break;
	case PE_CLIENT_CLOSE:
	case PE_SQL_DEALLOC:
		client_restore(p->ce);
		break;
	case PE_SQL_DEALLOC_ALL:
		for (uint32_t i = 0; i < p->n_saved; i++)
			client_restore(p->saved[i]);
		break;
	case PE_INJECTED:
	case PE_SQL_INJECTED:
		server_remove_num(ps, p->stmt, p->num);
		break;
	default:
		break;
	}
}

bool ps_server_client_gone(struct ps_server *ps)
{
	bool owed = ps && ps->q_len > 0;
	while (ps && ps->q_len > 0)
		pend_pop(ps);
	return owed;
}

void ps_server_free(struct ps_server *ps)
{
	if (!ps)
		return;
	(void)ps_server_client_gone(ps);
	server_forget_all(ps);
	free(ps->q);
	free(ps->stmts.b);
	free(ps);
}

/* ---- client messages ---- */

struct ctx {
	struct ps_client **pc;
	struct ps_server **ps;
	int max;
	bool unnamed_cache;
	bool sql;
	uint32_t seg;
	const uint8_t *msg;
	size_t avail;
	uint32_t len;
	bool can_inject, can_grow;
	struct pktbuf *inject;
	struct ps_rewrite *rw;
	struct ps_counters *cnt;
};

static struct ps_server *need_server(struct ctx *x)
{
	if (!*x->ps)
		*x->ps = xcalloc(1, sizeof(**x->ps));
	return *x->ps;
}

static struct ps_client *need_client(struct ctx *x)
{
	if (!*x->pc)
		*x->pc = xcalloc(1, sizeof(**x->pc));
	return *x->pc;
}

static int num_name(char *buf, size_t len, uint64_t num)
{
	return snprintf(buf, len, PS_NAME_PREFIX "%llu", (unsigned long long)num);
}

/* The NUL-terminated string at off, inside [off, lim): its length, or -1. */
static long str_at(const uint8_t *p, size_t off, size_t lim)
{
	if (off >= lim)
		return -1;
	const uint8_t *z = memchr(p + off, 0, lim - off);
	return z ? (long)(z - (p + off)) : -1;
}

/* Head writer: in the rewrite's own bytes, or for a longer head (a portal
 * name of any length) in big_head, kept for the next one. */
struct hw {
	struct ps_rewrite *rw;
	size_t cap;
};

static uint8_t *big_head;
static size_t big_cap;

void ps_rewrite_free_all(void)
{
	free(big_head);
	big_head = NULL;
	big_cap = 0;
}

static void hw_put(struct hw *w, const void *p, size_t n)
{
	struct ps_rewrite *rw = w->rw;
	if (rw->head_len + n > w->cap) {
		size_t need = rw->head_len + n;
		if (need > big_cap) {
			big_head = xrealloc(big_head, need * 2);
			big_cap = need * 2;
		}
		if (rw->head != big_head)
			memcpy(big_head, rw->head, rw->head_len);
		rw->head = big_head;
		w->cap = big_cap;
	}
	memcpy(rw->head + rw->head_len, p, n);
	rw->head_len += (uint32_t)n;
}

static void hw_str(struct hw *w, const char *s)
{
	hw_put(w, s, strlen(s) + 1);
}

/* Type byte and a length word patched by hw_finish. */
static void hw_begin(struct hw *w, uint8_t type)
{
	w->rw->head = w->rw->small;
	w->cap = sizeof(w->rw->small);
	w->rw->head_len = 0;
	hw_put(w, &type, 1);
	hw_put(w, "\0\0\0\0", 4);
}

/* new total = head + the bytes of the message kept after old_len. */
static void hw_finish(struct hw *w, uint32_t old_len, uint32_t len)
{
	uint32_t total = w->rw->head_len + (len - old_len) - 1;
	uint8_t *l = w->rw->head + 1;
	l[0] = (uint8_t)(total >> 24);
	l[1] = (uint8_t)(total >> 16);
	l[2] = (uint8_t)(total >> 8);
	l[3] = (uint8_t)total;
	w->rw->old_len = old_len;
}

static enum ps_verdict bad(struct ctx *x, const char *why)
{
	x->rw->why = why;
	return PS_BAD;
}

/* Would growing the message from old_len to new_len bytes need a flush? */
static bool must_flush_to_grow(const struct ctx *x, size_t old_len, size_t new_len)
{
	return new_len > old_len && !x->can_grow;
}

static void inject_close(struct ctx *x, const char *name)
{
	pktbuf_begin(x->inject, 'C');
	pktbuf_put_u8(x->inject, 'S');
	pktbuf_put_string(x->inject, name);
	pktbuf_finish(x->inject);
}

static void evict(struct ctx *x, struct ps_server *ps, struct ps_sentry *se)
{
	char nm[32];
	num_name(nm, sizeof(nm), se->num);
	inject_close(x, nm);
	struct ps_pend *p = pend_push(ps, PE_EVICT, x->seg);
	p->stmt = se->stmt;       /* the entry's reference moves here */
	server_remove(ps, se, true);
}

/* Make room for one more statement on the server: Close the stale ones
 * (see stmt_stale), then the least recently used, CloseCompletes dropped. */
static void evict_for_one(struct ctx *x, struct ps_server *ps)
{
	int max = x->max > 0 ? x->max : 1;
	if (ps->stale_seen != stale_gen) {
		for (struct ps_sentry *se = ps->oldest, *next; se; se = next) {
			next = se->newer;
			if (se->stmt->stale)
				evict(x, ps, se);
		}
		ps->stale_seen = stale_gen;
	}
	while (ps->stmts.n >= (uint32_t)max && ps->oldest)
		evict(x, ps, ps->oldest);
}

static bool evict_needed(const struct ctx *x)
{
	int max = x->max > 0 ? x->max : 1;
	return ps_server_count(*x->ps) >= (size_t)max ||
	       (*x->ps && (*x->ps)->stale_seen != stale_gen);
}

/* st becomes one of the server's statements, under a new number, after
 * Close of the least recently used if it is full (injected). Returns the
 * pending reply of what prepares it, for the caller to complete. */
static struct ps_pend *server_prepare(struct ctx *x, struct ps_stmt *st, enum pend_kind kind)
{
	struct ps_server *ps = need_server(x);
	x->cnt->server_parse++;
	evict_for_one(x, ps);
	uint64_t num = next_num++;
	(void)server_add(ps, st, num);
	struct ps_pend *p = pend_push(ps, kind, x->seg);
	p->stmt = st;
	st->refs++;
	p->num = num;
	return p;
}

/* Prepare st on the server under a new number, ahead of the message. */
static void inject_parse(struct ctx *x, struct ps_stmt *st)
{
	char nm[32];
	struct ps_pend *p = server_prepare(x, st, PE_INJECTED);
	num_name(nm, sizeof(nm), p->num);
	pktbuf_begin(x->inject, 'P');
	pktbuf_put_string(x->inject, nm);
	pktbuf_put_bytes(x->inject, st->body, st->len);
	pktbuf_finish(x->inject);
}

static void pass_reply(struct ctx *x)
{
	(void)pend_push(need_server(x), PE_PASS, x->seg);
}

/* The error the barrier's failure is to become. */
static void push_error(struct ctx *x, const char *code, const char *fmt, const char *name)
{
	char text[512];
	snprintf(text, sizeof(text), fmt, name);
	struct ps_pend *p = pend_push(need_server(x), PE_ERROR, x->seg);
	p->error = xstrdup(text);
	memcpy(p->code, code, sizeof(p->code));
}

/* The client's mistake answered the way PostgreSQL would: the message is
 * replaced by a Describe that fails on the server, whose error becomes
 * ours, so ordering, the skip to Sync and the aborted transaction are the
 * server's own. */
static enum ps_verdict client_error(struct ctx *x, const char *code, const char *fmt, const char *name)
{
	static const uint8_t barrier_len = 1 + 4 + 1 + sizeof(BARRIER_NAME);
	bool whole = x->avail >= x->len;

	if (whole ? must_flush_to_grow(x, x->len, barrier_len) : !x->can_inject)
		return PS_FLUSH;
	/* PgBouncer closes the client with these words; pgcrew answers
	 * PostgreSQL's error and keeps the session, and logs them still. */
	if (strcmp(code, "26000") == 0)
		log_warning("prepared statement '%s' not found", name);
	else if (strcmp(code, "42P05") == 0)
		log_warning("prepared statement '%s' was already prepared", name);
	push_error(x, code, fmt, name);
	if (!whole) {
		pktbuf_begin(x->inject, 'D');
		pktbuf_put_u8(x->inject, 'S');
		pktbuf_put_string(x->inject, BARRIER_NAME);
		pktbuf_finish(x->inject);
		return PS_REPLACE;
	}
	struct hw w = { x->rw, 0 };
	hw_begin(&w, 'D');
	hw_put(&w, "S", 1);
	hw_str(&w, BARRIER_NAME);
	hw_finish(&w, x->len, x->len);
	return PS_REWRITE;
}

#define CLOSE_NOBODY_LEN (1 + 4 + 1 + sizeof(CLOSE_NOBODY))

/* The whole message becomes a Close of nobody. */
static enum ps_verdict close_nobody(struct ctx *x)
{
	struct hw w = { x->rw, 0 };
	hw_begin(&w, 'C');
	hw_put(&w, "S", 1);
	hw_str(&w, CLOSE_NOBODY);
	hw_finish(&w, x->len, x->len);
	return PS_REWRITE;
}

struct parse_msg {
	const char *name;
	size_t name_len;
	const uint8_t *body;      /* after the name */
	uint32_t body_len;
};

static bool parse_parse(const uint8_t *msg, uint32_t len, struct parse_msg *pm)
{
	struct pkt_reader r;
	pkt_reader_init(&r, msg + 5, len - 5);
	pm->name = pkt_get_string(&r);
	size_t after_name = r.pos;
	(void)pkt_get_string(&r);
	int16_t n = (int16_t)pkt_get_u16(&r);
	if (n < 0)
		return false;
	(void)pkt_get_bytes(&r, 4 * (size_t)n);
	if (!pkt_get_end(&r))
		return false;
	pm->name_len = strlen(pm->name);
	pm->body = msg + 5 + after_name;
	pm->body_len = len - 5 - (uint32_t)after_name;
	return true;
}

/* The client's Parse goes to the server as PGCREW_<n> (old_head = the
 * bytes up to the end of its name): st becomes one of the server's
 * statements. The pending reply is returned for the caller to complete. */
static struct ps_pend *parse_renamed(struct ctx *x, struct ps_stmt *st, enum pend_kind kind,
				     uint32_t old_head)
{
	char nm[32];
	struct ps_pend *p = server_prepare(x, st, kind);
	num_name(nm, sizeof(nm), p->num);
	struct hw w = { x->rw, 0 };
	hw_begin(&w, 'P');
	hw_str(&w, nm);
	hw_finish(&w, old_head, x->len);
	return p;
}

/* ---- unnamed_statement_cache: PgDoorman's extension ----
 * An unnamed Parse is sent as a named one (PGCREW_<n>, shared like any
 * other), or, when the server already has that statement, answered by it
 * without a new plan; Bind and Describe of "" then use it until the next
 * unnamed Parse, Close of "" or simple Query. */

#define UNNAMED_CACHE_MAX 8192   /* larger unnamed Parse pass through */

static void set_unnamed(struct ctx *x, struct ps_stmt *st)
{
	struct ps_client *pc = st ? need_client(x) : *x->pc;
	if (!pc)
		return;
	stmt_put(pc->unnamed);
	pc->unnamed = st;
}

static enum ps_verdict unnamed_pass(struct ctx *x, bool reply_owed)
{
	set_unnamed(x, NULL);
	if (reply_owed)
		pass_reply(x);
	return PS_PASS;
}

static enum ps_verdict parse_unnamed(struct ctx *x)
{
	struct parse_msg pm;
	char nm[32];

	if (x->len > UNNAMED_CACHE_MAX)
		return unnamed_pass(x, true);
	if (x->avail < x->len)
		return PS_NEED_FULL;
	if (!parse_parse(x->msg, x->len, &pm))
		return bad(x, "broken Parse packet");
	uint64_t h = hash_bytes(pm.body, pm.body_len);
	struct ps_stmt *st = stmt_find(pm.body, pm.body_len, h);
	struct ps_sentry *se = st ? server_find(*x->ps, st) : NULL;
	if (se) {
		if (must_flush_to_grow(x, x->len, CLOSE_NOBODY_LEN))
			return PS_FLUSH;
		server_touch(*x->ps, se);
		st->refs++;
		set_unnamed(x, st);
		struct ps_pend *p = pend_push(*x->ps, PE_UNNAMED_FAKE, x->seg);
		p->stmt = st;
		st->refs++;
		return close_nobody(x);
	}
	size_t new_head = 5 + (size_t)num_name(nm, sizeof(nm), next_num) + 1;
	if ((evict_needed(x) && !x->can_inject) || must_flush_to_grow(x, 6, new_head))
		return PS_FLUSH;
	st = stmt_get(pm.body, pm.body_len, h);
	set_unnamed(x, st);
	(void)parse_renamed(x, st, PE_UNNAMED_PARSE, 6);
	return PS_REWRITE;
}

/* The statement "" stands for, or NULL (then "" is the server's own). */
static struct ps_stmt *unnamed_of(const struct ctx *x)
{
	return *x->pc ? (*x->pc)->unnamed : NULL;
}

/* The client names a statement this server already has: the name is its
 * own now, and the reply of what stands in for the request (kind) becomes
 * the answer. */
static void name_known(struct ctx *x, const char *name, size_t name_len, struct ps_stmt *st,
		       struct ps_sentry *se, enum pend_kind kind)
{
	x->cnt->client_parse++;
	struct ps_centry *ce = client_add(need_client(x), name, name_len, st);
	st->refs++;
	server_touch(*x->ps, se);
	struct ps_pend *p = pend_push(*x->ps, kind, x->seg);
	p->ce = ce;
	ce->refs++;
}

/* The client's Parse of a statement this server already has: a Close of
 * nobody stands in, its CloseComplete becomes the ParseComplete. */
static enum ps_verdict parse_known(struct ctx *x, const struct parse_msg *pm,
				   struct ps_stmt *st, struct ps_sentry *se)
{
	if (must_flush_to_grow(x, x->len, CLOSE_NOBODY_LEN))
		return PS_FLUSH;
	name_known(x, pm->name, pm->name_len, st, se, PE_CLIENT_FAKE);
	return close_nobody(x);
}

static enum ps_verdict on_parse(struct ctx *x)
{
	struct parse_msg pm;
	char nm[32];

	if (x->len < 6)
		return bad(x, "broken Parse packet");
	if (x->avail < 6)
		return PS_NEED_MORE;
	if (x->msg[5] == 0)
		return x->unnamed_cache ? parse_unnamed(x) : unnamed_pass(x, true);
	if (x->avail < x->len)
		return PS_NEED_FULL;
	if (!parse_parse(x->msg, x->len, &pm))
		return bad(x, "broken Parse packet");
	if (client_find(*x->pc, pm.name, pm.name_len))
		return client_error(x, "42P05", "prepared statement \"%s\" already exists", pm.name);
	uint64_t h = hash_bytes(pm.body, pm.body_len);
	struct ps_stmt *st = stmt_find(pm.body, pm.body_len, h);
	struct ps_sentry *se = st ? server_find(*x->ps, st) : NULL;
	if (se)
		return parse_known(x, &pm, st, se);
	uint32_t old_head = 5 + (uint32_t)pm.name_len + 1;
	size_t new_head = 5 + (size_t)num_name(nm, sizeof(nm), next_num) + 1;
	if ((evict_needed(x) && !x->can_inject) || must_flush_to_grow(x, old_head, new_head))
		return PS_FLUSH;
	x->cnt->client_parse++;
	st = stmt_get(pm.body, pm.body_len, h);
	struct ps_centry *ce = client_add(need_client(x), pm.name, pm.name_len, st);
	struct ps_pend *p = parse_renamed(x, st, PE_CLIENT_PARSE, old_head);
	p->ce = ce;
	ce->refs++;
	return PS_REWRITE;
}

/* The latest Binds per server: a 0A000 "cached plan must not change result
 * type" is about one of them (the first not yet complete). Marking all of
 * them stale costs the innocent ones a fresh Parse; tracking BindComplete
 * would cost every Bind a watched reply. */
static void note_bound(struct ps_server *ps, uint64_t num)
{
	ps->bound[ps->bound_next] = num;
	ps->bound_next = (uint8_t)((ps->bound_next + 1) % (sizeof(ps->bound) / sizeof(ps->bound[0])));
	if (ps->n_bound < sizeof(ps->bound) / sizeof(ps->bound[0]))
		ps->n_bound++;
}

/* Bind and Describe of statement st: the server's name, prepared there
 * first if it is not. prefix = what precedes the name in the new head (the
 * portal for Bind, 'S' for Describe), old_head = the bytes the new head
 * replaces. */
static enum ps_verdict use_stmt(struct ctx *x, uint8_t type, struct ps_stmt *st, bool named,
				const void *prefix, size_t prefix_len, uint32_t old_head)
{
	char nm[32];
	struct ps_sentry *se = server_find(*x->ps, st);
	uint64_t num = se ? se->num : next_num;
	/* What PostgreSQL answers a statement whose result type DDL changed;
	 * a server that has it answers for itself. */
	if (st->stale && !se && type == 'B')
		return client_error(x, "0A000", "cached plan must not change result type%s", "");
	size_t new_head = 5 + prefix_len + (size_t)num_name(nm, sizeof(nm), num) + 1;
	if ((!se && !x->can_inject) || must_flush_to_grow(x, old_head, new_head))
		return PS_FLUSH;
	if (type == 'B' && named)
		x->cnt->bind++;
	if (se)
		server_touch(*x->ps, se);
	else
		inject_parse(x, st);
	if (type == 'B')
		note_bound(*x->ps, num);
	struct hw w = { x->rw, 0 };
	hw_begin(&w, type);
	hw_put(&w, prefix, prefix_len);
	hw_str(&w, nm);
	hw_finish(&w, old_head, x->len);
	return PS_REWRITE;
}

static enum ps_verdict use_statement(struct ctx *x, uint8_t type, const char *name,
				     const void *prefix, size_t prefix_len, uint32_t old_head)
{
	struct ps_stmt *st = unnamed_of(x);
	if (!*name)
		return st ? use_stmt(x, type, st, false, prefix, prefix_len, old_head) : PS_PASS;
	struct ps_centry *ce = client_find(*x->pc, name, strlen(name));
	if (!ce)
		return client_error(x, "26000", "prepared statement \"%s\" does not exist", name);
	if (ce->stmt->sql)
		return client_error(x, "0A000", "prepared statement \"%s\" was made by SQL PREPARE: "
				    "pgcrew runs it only with EXECUTE", name);
	return use_stmt(x, type, ce->stmt, true, prefix, prefix_len, old_head);
}

static enum ps_verdict on_bind(struct ctx *x)
{
	size_t lim = x->avail < x->len ? x->avail : x->len;
	long portal = str_at(x->msg, 5, lim);
	long name = portal < 0 ? -1 : str_at(x->msg, 5 + (size_t)portal + 1, lim);

	if (name < 0 && x->avail < x->len)   /* names of any length: all of it, then */
		return x->avail < 5 + PS_HEAD_MAX ? PS_NEED_MORE : PS_NEED_FULL;
	if (name < 0)
		return bad(x, "broken Bind packet");
	if (name == 0 && !unnamed_of(x))
		return PS_PASS;
	const char *nm = (const char *)x->msg + 5 + portal + 1;
	uint32_t old_head = 5 + (uint32_t)portal + 1 + (uint32_t)name + 1;
	return use_statement(x, 'B', nm, x->msg + 5, (size_t)portal + 1, old_head);
}

/* Describe and Close: a kind byte and a name, nothing else. False with
 * *v set when the message is not (yet) usable. */
static bool read_kind_name(struct ctx *x, const char *malformed, uint8_t *kind,
			   const char **name, enum ps_verdict *v)
{
	struct pkt_reader r;
	if (x->avail < x->len) {
		*v = PS_NEED_FULL;
		return false;
	}
	pkt_reader_init(&r, x->msg + 5, x->len - 5);
	*kind = pkt_get_u8(&r);
	*name = pkt_get_string(&r);
	if (!pkt_get_end(&r) || (*kind != 'S' && *kind != 'P')) {
		*v = bad(x, malformed);
		return false;
	}
	return true;
}

static enum ps_verdict on_describe(struct ctx *x)
{
	enum ps_verdict v;
	uint8_t kind;
	const char *name;

	if (!read_kind_name(x, "broken Describe packet", &kind, &name, &v))
		return v;
	if (kind == 'P' || (!*name && !unnamed_of(x)))
		return PS_PASS;
	return use_statement(x, 'D', name, "S", 1, x->len);
}

/* Close of a named statement is the client's business only: its name goes,
 * the server keeps the statement for others, and a Close of nobody gets
 * the CloseComplete back in its place. */
static enum ps_verdict on_close(struct ctx *x)
{
	enum ps_verdict v;
	uint8_t kind;
	const char *name;

	if (!read_kind_name(x, "broken Close packet", &kind, &name, &v))
		return v;
	if (kind == 'P') {
		pass_reply(x);
		return PS_PASS;
	}
	if (!*name)
		return unnamed_pass(x, true);
	if (must_flush_to_grow(x, x->len, CLOSE_NOBODY_LEN))
		return PS_FLUSH;
	struct ps_centry *ce = client_find(*x->pc, name, strlen(name));
	struct ps_pend *p = pend_push(need_server(x), ce ? PE_CLIENT_CLOSE : PE_PASS, x->seg);
	if (ce) {
		p->ce = ce;
		ce->refs++;
		client_remove(ce);
	}
	return close_nobody(x);
}

/* ---- SQL PREPARE / EXECUTE / DEALLOCATE (sql_prepared_statements) ----
 * A simple Query that is exactly one of them maps its name like a Parse'd
 * one: PREPARE goes to the server as PREPARE "PGCREW_<n>" (or not at all
 * when the server has the text), EXECUTE as EXECUTE "PGCREW_<n>" (preceded
 * by that PREPARE in the same Query when the server lacks it), DEALLOCATE
 * drops names only. What the client gets answered without the server doing
 * the work runs an UNLISTEN of nothing instead, whose CommandComplete is
 * retagged: the reply order, the aborted-transaction error and the
 * ReadyForQuery status stay the server's own. */

/* Longer queries are not looked at: they pass through. */
#define SQL_QUERY_MAX (1u << 20)
/* UNLISTEN of a channel nobody listens on: no effect, one CommandComplete,
 * refused only in an aborted transaction, allowed in read-only transactions
 * and on standbys. */
#define SQL_NOOP "UNLISTEN \"" CLOSE_NOBODY "\""
/* Fails on the server with 26000 naming the barrier, which on_error turns
 * into the client's own error. */
#define SQL_BARRIER "EXECUTE \"" BARRIER_NAME "\""

/* verb "PGCREW_<num>" into buf: its length. */
static size_t sql_verb_name(char *buf, size_t len, const char *verb, uint64_t num)
{
	return (size_t)snprintf(buf, len, "%s \"" PS_NAME_PREFIX "%llu\"", verb, (unsigned long long)num);
}

/* The whole message becomes the Query sql (the caller checked the growth). */
static enum ps_verdict sql_substitute(struct ctx *x, const char *sql)
{
	struct hw w = { x->rw, 0 };
	hw_begin(&w, 'Q');
	hw_str(&w, sql);
	hw_finish(&w, x->len, x->len);
	return PS_REWRITE;
}

static bool sql_must_flush(const struct ctx *x, const char *sql)
{
	return must_flush_to_grow(x, x->len, 5 + strlen(sql) + 1);
}

static enum ps_verdict sql_error(struct ctx *x, const char *code, const char *fmt, const char *name)
{
	if (sql_must_flush(x, SQL_BARRIER))
		return PS_FLUSH;
	push_error(x, code, fmt, name);
	return sql_substitute(x, SQL_BARRIER);
}

/* The first old_head bytes (up to the end of the client's name) become
 * verb "PGCREW_<num>"; the rest of the text stays. */
static enum ps_verdict sql_rename(struct ctx *x, const char *verb, uint64_t num, uint32_t old_head)
{
	char head[64];
	size_t n = sql_verb_name(head, sizeof(head), verb, num);
	struct hw w = { x->rw, 0 };
	hw_begin(&w, 'Q');
	hw_put(&w, head, n);
	hw_finish(&w, old_head, x->len);
	return PS_REWRITE;
}

static enum ps_verdict sql_prepare(struct ctx *x, const struct sqlprep *sp)
{
	const uint8_t *text = x->msg + 5;
	char head[64];

	if (client_find(*x->pc, sp->name, sp->name_len))
		return sql_error(x, "42P05", "prepared statement \"%s\" already exists", sp->name);
	struct piece2 k = { text + sp->rest, SQL_MARK, (uint32_t)(sp->end - sp->rest), sizeof(SQL_MARK) };
	uint64_t h = hash_piece2(&k);
	struct ps_stmt *st = stmt_find2(&k, h);
	struct ps_sentry *se = st ? server_find(*x->ps, st) : NULL;
	if (se) {
		if (sql_must_flush(x, SQL_NOOP))
			return PS_FLUSH;
		name_known(x, sp->name, sp->name_len, st, se, PE_SQL_FAKE);
		return sql_substitute(x, SQL_NOOP);
	}
	uint32_t old_head = 5 + (uint32_t)sp->name_end;
	size_t new_head = 5 + sql_verb_name(head, sizeof(head), "PREPARE", next_num);
	if ((evict_needed(x) && !x->can_inject) || must_flush_to_grow(x, old_head, new_head))
		return PS_FLUSH;
	x->cnt->client_parse++;
	st = stmt_get2(&k, h);
	struct ps_centry *ce = client_add(need_client(x), sp->name, sp->name_len, st);
	struct ps_pend *p = server_prepare(x, st, PE_SQL_PREPARE);
	p->ce = ce;
	ce->refs++;
	return sql_rename(x, "PREPARE", p->num, old_head);
}

/* The server lacks st: one Query prepares it, then runs the EXECUTE (its
 * text after the client's name kept), in place of the client's. */
static enum ps_verdict sql_execute_anew(struct ctx *x, const struct sqlprep *sp, struct ps_stmt *st)
{
	char head[64];
	struct ps_pend *p = server_prepare(x, st, PE_SQL_INJECTED);
	pktbuf_begin(x->inject, 'Q');
	pktbuf_put_bytes(x->inject, head, sql_verb_name(head, sizeof(head), "PREPARE", p->num));
	pktbuf_put_u8(x->inject, ' ');
	pktbuf_put_bytes(x->inject, st->body, st->len - sizeof(SQL_MARK));
	pktbuf_put_bytes(x->inject, ";\n", 2);
	pktbuf_put_bytes(x->inject, head, sql_verb_name(head, sizeof(head), "EXECUTE", p->num));
	pktbuf_put_bytes(x->inject, x->msg + 5 + sp->name_end, x->len - 5 - sp->name_end);
	pktbuf_finish(x->inject);
	return PS_REPLACE;
}

static enum ps_verdict sql_execute(struct ctx *x, const struct sqlprep *sp)
{
	char head[64];
	struct ps_centry *ce = client_find(*x->pc, sp->name, sp->name_len);

	if (!ce)
		return sql_error(x, "26000", "prepared statement \"%s\" does not exist", sp->name);
	if (!ce->stmt->sql)
		return sql_error(x, "0A000", "prepared statement \"%s\" was made by Parse: "
				 "pgcrew cannot EXECUTE it", sp->name);
	struct ps_sentry *se = server_find(*x->ps, ce->stmt);
	uint32_t old_head = 5 + (uint32_t)sp->name_end;
	if (!se) {
		if (!x->can_inject)
			return PS_FLUSH;
		x->cnt->bind++;
		return sql_execute_anew(x, sp, ce->stmt);
	}
	if (must_flush_to_grow(x, old_head, 5 + sql_verb_name(head, sizeof(head), "EXECUTE", se->num)))
		return PS_FLUSH;
	x->cnt->bind++;
	server_touch(*x->ps, se);
	return sql_rename(x, "EXECUTE", se->num, old_head);
}

static enum ps_verdict sql_deallocate(struct ctx *x, const struct sqlprep *sp)
{
	struct ps_centry *ce = client_find(*x->pc, sp->name, sp->name_len);
	if (!ce)
		return sql_error(x, "26000", "prepared statement \"%s\" does not exist", sp->name);
	if (sql_must_flush(x, SQL_NOOP))
		return PS_FLUSH;
	struct ps_pend *p = pend_push(need_server(x), PE_SQL_DEALLOC, x->seg);
	p->ce = ce;
	ce->refs++;
	client_remove(ce);
	return sql_substitute(x, SQL_NOOP);
}

/* Every name goes; the pending reply keeps them, to give them back if the
 * server skips the UNLISTEN (an aborted transaction), as PostgreSQL would
 * keep them. */
static enum ps_verdict sql_deallocate_all(struct ctx *x)
{
	struct ps_client *pc = *x->pc;
	if (sql_must_flush(x, SQL_NOOP))
		return PS_FLUSH;
	struct ps_pend *p = pend_push(need_server(x), PE_SQL_DEALLOC_ALL, x->seg);
	if (pc && pc->names.n > 0) {
		p->saved = xcalloc(pc->names.n, sizeof(*p->saved));
		for (uint32_t i = 0; i <= pc->names.mask; i++)
			for (struct ps_link *l = pc->names.b[i]; l; l = l->next) {
				p->saved[p->n_saved] = (struct ps_centry *)l;
				p->saved[p->n_saved++]->refs++;
			}
		for (uint32_t i = 0; i < p->n_saved; i++)
			client_remove(p->saved[i]);
	}
	return sql_substitute(x, SQL_NOOP);
}

static enum ps_verdict sql_statement(struct ctx *x)
{
	const char *text = (const char *)x->msg + 5;
	size_t have = (x->avail < x->len ? x->avail : x->len) - 5;
	struct sqlprep sp;

	/* Without sql_prepared_statements, an SQL DEALLOCATE of one of the
	 * client's protocol-level names is still the client's Close of it
	 * (psycopg with libpq < 17 evicts that way); nothing else is looked at. */
	bool dealloc_only = !x->sql && *x->pc && (*x->pc)->names.n > 0;
	if ((!x->sql && !dealloc_only) || x->len < 6 || x->len > SQL_QUERY_MAX || !sqlprep_maybe(text, have))
		return PS_PASS;
	if (x->avail < x->len)
		return PS_NEED_FULL;
	if (x->msg[x->len - 1] != 0 || memchr(text, 0, x->len - 6))
		return PS_PASS;       /* the server refuses it */
	enum sqlprep_kind kind = sqlprep_scan(text, x->len - 6, &sp);
	if (dealloc_only) {
		struct ps_centry *ce = kind == SQLPREP_DEALLOCATE ? client_find(*x->pc, sp.name, sp.name_len) : NULL;
		return ce && !ce->stmt->sql ? sql_deallocate(x, &sp) : PS_PASS;
	}
	switch (kind) {
	case SQLPREP_PREPARE:
		return sql_prepare(x, &sp);
	case SQLPREP_EXECUTE:
		return sql_execute(x, &sp);
	case SQLPREP_DEALLOCATE:
		return sql_deallocate(x, &sp);
	case SQLPREP_DEALLOCATE_ALL:
		return sql_deallocate_all(x);
	default:
		return PS_PASS;
	}
}

/* A simple Query also drops the server's unnamed statement. */
static enum ps_verdict on_query(struct ctx *x)
{
	if (x->avail < 5)
		return PS_NEED_MORE;
	enum ps_verdict v = sql_statement(x);
	if (v == PS_PASS || v == PS_REWRITE || v == PS_REPLACE)
		set_unnamed(x, NULL);
	return v;
}

enum ps_verdict ps_client_msg(struct ps_client **pc, struct ps_server **psv,
			      const struct ps_config *cfg, uint32_t syncs_owed,
			      const uint8_t *msg, size_t avail, uint32_t len,
			      bool can_inject, bool can_grow, struct pktbuf *inject,
			      struct ps_rewrite *rw, struct ps_counters *cnt)
{
	struct ctx x = {
		.pc = pc, .ps = psv, .max = cfg->max_stmts, .unnamed_cache = cfg->unnamed_cache,
		.sql = cfg->sql,
		.msg = msg, .avail = avail, .len = len,
		.can_inject = can_inject, .can_grow = can_grow, .inject = inject, .rw = rw, .cnt = cnt,
	};
	x.seg = (*psv ? (*psv)->z_seen : 0) + syncs_owed;
	rw->old_len = rw->head_len = 0;
	rw->why = NULL;
	switch (msg[0]) {
	case 'P': return on_parse(&x);
	case 'B': return on_bind(&x);
	case 'D': return on_describe(&x);
	case 'C': return on_close(&x);
	case 'Q': return on_query(&x);
	default: return PS_PASS;
	}
}

/* ---- server replies ---- */

bool ps_server_watch(const struct ps_server *ps, const struct ps_client *pc, uint8_t type)
{
	switch (type) {
	case 'E':
		return ps && (ps->q_len > 0 || ps->n_bound > 0);
	case '1':
	case '3':
	case 'Z':
		return ps && ps->q_len > 0;
	case 'C':
		return (ps && (ps->stmts.n > 0 || ps->q_len > 0)) || (pc && pc->names.n > 0);
	default:
		return false;
	}
}

static enum ps_reply on_complete(struct ps_server *ps, struct pktbuf *out)
{
	struct ps_pend *p = pend_at(ps, 0);
	if (p->seg > ps->z_seen || p->kind == PE_ERROR)
		return PSR_FORWARD;     /* not ours: cannot happen with a sane server */
	enum pend_kind kind = p->kind;
	pend_pop(ps);
	switch (kind) {
	case PE_CLIENT_FAKE:
	case PE_UNNAMED_FAKE:
		pktbuf_begin(out, '1');
		pktbuf_finish(out);
		return PSR_SKIP_SEND;
	case PE_INJECTED:
	case PE_EVICT:
		return PSR_SKIP;
	default:
		return PSR_FORWARD;
	}
}

/* An ErrorResponse (msg, avail of its len bytes buffered) checked from its
 * first fields only: errors quote their input and may be far larger than
 * the I/O buffer. */
static enum pkt_match error_is(const uint8_t *msg, size_t avail, uint32_t len, const char *sqlstate,
			       const char *text)
{
	return pkt_error_is(msg + 5, avail - 5, len - 5, sqlstate, text);
}

static enum ps_reply on_error(struct ps_server *ps, const uint8_t *msg, size_t avail,
			      uint32_t len, struct pktbuf *out)
{
	struct ps_pend *p = pend_at(ps, 0);
	if (p->kind != PE_ERROR || p->seg != ps->z_seen)
		return PSR_FORWARD;
	switch (error_is(msg, avail, len, "26000", "\"" BARRIER_NAME "\"")) {
	case PKT_MATCH_NEED_MORE:
		return PSR_NEED_MORE;
	case PKT_MATCH_NO:
		return PSR_FORWARD;
	case PKT_MATCH_YES:
		break;
	}
	pkt_write_error(out, "ERROR", p->code, "%s", p->error);
	pend_pop(ps);
	return PSR_SKIP_SEND;
}

/* End of a segment: what is still owed there was skipped by the server
 * after an error. Undo newest first, so a statement evicted and prepared
 * again in the same segment ends as it was. */
static void on_ready(struct ps_server *ps, struct ps_client *pc)
{
	uint32_t k = 0;
	while (k < ps->q_len && pend_at(ps, k)->seg <= ps->z_seen)
		k++;
	for (uint32_t i = k; i-- > 0;)
		pend_rollback(ps, pc, pend_at(ps, i));
	while (k-- > 0)
		pend_pop(ps);
	ps->z_seen++;
}

/* CommandComplete answering one of our SQL rewrites (same segment, the
 * expected tag): pass, drop or retag it. False: not ours. */
static bool on_sql_complete(struct ps_server *ps, const char *tag, struct pktbuf *out,
			    enum ps_reply *r)
{
	static const struct {
		const char *want, *retag;
	} expect[] = {
		[PE_SQL_PREPARE] = { "PREPARE", NULL },
		[PE_SQL_INJECTED] = { "PREPARE", NULL },
		[PE_SQL_FAKE] = { "UNLISTEN", "PREPARE" },
		[PE_SQL_DEALLOC] = { "UNLISTEN", "DEALLOCATE" },
		[PE_SQL_DEALLOC_ALL] = { "UNLISTEN", "DEALLOCATE ALL" },
	};
	struct ps_pend *p = pend_at(ps, 0);
	uint8_t kind = p->kind;
	if (p->seg != ps->z_seen || kind >= sizeof(expect) / sizeof(expect[0]) || !expect[kind].want ||
	    strcmp(tag, expect[kind].want) != 0)
		return false;
	pend_pop(ps);
	*r = kind == PE_SQL_INJECTED ? PSR_SKIP : PSR_FORWARD;
	if (expect[kind].retag) {
		pktbuf_begin(out, 'C');
		pktbuf_put_string(out, expect[kind].retag);
		pktbuf_finish(out);
		*r = PSR_SKIP_SEND;
	}
	return true;
}

static enum ps_reply on_command_complete(struct ps_server *ps, struct ps_client *pc,
					 const uint8_t *msg, size_t avail, uint32_t len,
					 struct pktbuf *out)
{
	if (avail < len)
		return PSR_NEED_FULL;
	const char *tag = (const char *)msg + 5;
	enum ps_reply r;
	if (len < 6 || msg[len - 1] != 0)
		return PSR_FORWARD;
	if (ps && ps->q_len > 0 && on_sql_complete(ps, tag, out, &r))
		return r;
	if (strcmp(tag, "DEALLOCATE ALL") == 0 || strcmp(tag, "DISCARD ALL") == 0) {
		server_forget_all(ps);
		client_forget_all(pc);
	}
	return PSR_FORWARD;
}

/* A 0A000 "cached plan must not change result type": the statements of the
 * latest Binds go stale (stmt_stale). False while more of the error is
 * needed to tell; asking again is harmless until it is told. */
static bool note_error(struct ps_server *ps, const uint8_t *msg, size_t avail, uint32_t len)
{
	switch (error_is(msg, avail, len, "0A000", "cached plan must not change result type")) {
	case PKT_MATCH_NEED_MORE:
		return false;
	case PKT_MATCH_NO:
		return true;
	case PKT_MATCH_YES:
		break;
	}
	for (struct ps_sentry *se = ps->oldest; se; se = se->newer)
		for (uint8_t i = 0; i < ps->n_bound; i++)
			if (se->num == ps->bound[i])
				stmt_stale(se->stmt);
	ps->n_bound = 0;
	return true;
}

enum ps_reply ps_server_msg(struct ps_server *ps, struct ps_client *pc, const uint8_t *msg,
			    size_t avail, uint32_t len, struct pktbuf *out)
{
	switch (msg[0]) {
	case '1':
	case '3':
		return ps && ps->q_len ? on_complete(ps, out) : PSR_FORWARD;
	case 'E':
		if (ps && ps->n_bound > 0 && !note_error(ps, msg, avail, len))
			return PSR_NEED_MORE;
		return ps && ps->q_len ? on_error(ps, msg, avail, len, out) : PSR_FORWARD;
	case 'Z':
		if (avail < len)
			return PSR_NEED_FULL;
		if (ps && ps->q_len)
			on_ready(ps, pc);
		return PSR_FORWARD;
	case 'C':
		return on_command_complete(ps, pc, msg, avail, len, out);
	default:
		return PSR_FORWARD;
	}
}

static bool mentions(const char *sql, const char *what)
{
	size_t n = strlen(what);
	for (const char *p = sql; *p; p++)
		if (strncasecmp(p, what, n) == 0)
			return true;
	return false;
}

void ps_server_reset_sql(struct ps_server *ps, const char *sql)
{
	if (ps && (mentions(sql, "DISCARD ALL") || mentions(sql, "DEALLOCATE ALL")))
		server_forget_all(ps);
}

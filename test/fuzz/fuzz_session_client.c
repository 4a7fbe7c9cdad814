/* pgcrew — the session fuzz target's fake clients: startup packets made of
 * the parameters PostgreSQL drivers send (and garbage), SSL/GSSENC/cancel
 * requests, TLS handshakes driven a step at a time (completed, stopped,
 * cut, garbage), right and wrong answers to every authentication exchange
 * (cleartext, md5, SCRAM with pgcrew's own SCRAM client), simple and
 * extended queries, named statements with large Bind/Execute/Describe
 * messages sent in pieces, console commands, raw messages and bytes,
 * Terminate and hang-ups. */
#include "fuzz_session.h"
#include "rig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/md5.h"
#include "auth/scram.h"
#include "proto/cancelkey.h"
#include "tls.h"
#include "world.h"

#define MAX_CONNECTS 16          /* connections per input, cancels included */
#define HANDSHAKE_ROUNDS 6       /* a TLS handshake completed at once: loop pumps at most */
#define SSL_REQUEST 80877103
#define LONG_NAME "a_name_longer_than_namedatalen_which_is_sixty_four_bytes_long_xxxxxxxx"
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Where a client's TLS is. */
enum ftls {
	FT_NONE,                      /* plain */
	FT_ASKED,                     /* SSLRequest sent over TCP */
	FT_ACCEPTED,                  /* 'S' came: TLS bytes from here on */
	FT_SHAKING,                   /* ClientHello sent, handshake under way */
	FT_UP,                        /* everything goes through TLS */
	FT_BROKEN,                    /* cut, garbage or failed: what comes is dropped */
};

struct fclient {
	int fd;                       /* -1: the slot is free */
	enum ftls tls_state;
	struct fz_tls *tls;
	struct outq q;                /* everything it sends, in order */
	bool started;                 /* sent a startup packet */
	bool ready;                   /* saw ReadyForQuery */
	char user[80];                /* the user it sent: which password it types */
	int auth;                     /* the last authentication request, -1 none */
	uint8_t salt[4];
	struct scram_client scram;
	char server_first[SCRAM_MAX_SERVER_FIRST + 1];
	size_t server_first_len;
	bool has_key;                 /* BackendKeyData */
	struct cancelkey key;
	struct reader rd;
};

static struct fclient clients[FZ_CLIENTS];
static int cancel_fds[MAX_CONNECTS];
static int n_cancel_fds, n_connects;

/* ---- the tables a startup packet is made of ---- */

static const uint32_t VERSIONS[8] = {
	196608, 196608, 196608, 196608, 196610 /* 3.2 */, 131072 /* 2.0 */, 196613, 262144,
};
static const char *const USERS[16] = {
	"alice", "bob", "carol", "dave", "mallory", "", LONG_NAME, "pgbouncer",
	"alice", "bob", "carol", "alice", NULL, "alice", "bob", "carol",
};
static const char *const DATABASES[16] = {
	"db", "forced", "sess", "replication", "nosuch", "pgbouncer", "", NULL,
	LONG_NAME, "alice", "db", "db", "forced", "replication", "postgres", "template1",
};

struct param {
	const char *name;
	const char *values[10];
};

/* What libpq, pgjdbc, node-postgres, asyncpg, psycopg and pgx send, and
 * what PgBouncer refuses or ignores; "user"/"database" again (the last one
 * wins). NULL ends a value list. */
static const struct param PARAMS[15] = {
	{ "replication", { "true", "database", "on", "off", "yes", "0", "maybe", "", "TRUE", NULL } },
	{ "options", { "-c DateStyle=ISO", "-c search_path=public", "--client_encoding=UTF8",
		       "-c statement_timeout=0", "-c geqo=off", "-cTimeZone=UTC\\ x", "garbage",
		       "", "-c a", "-c extra_float_digits=3" } },
	{ "application_name", { "psql", "pg_basebackup", "pg_receivewal", "PostgreSQL JDBC Driver",
				"", "asyncpg", LONG_NAME LONG_NAME, "pgx", "pgbench", NULL } },
	{ "client_encoding", { "UTF8", "'utf-8'", "LATIN1", "SQL_ASCII", "", "UNICODE", NULL } },
	{ "DateStyle", { "ISO", "ISO, MDY", "German", NULL } },
	{ "TimeZone", { "UTC", "Europe/Berlin", "", NULL } },
	{ "extra_float_digits", { "3", "2", NULL } },
	{ "IntervalStyle", { "postgres", "iso_8601", NULL } },
	{ "search_path", { "public", "\"$user\", public", NULL } },
	{ "statement_timeout", { "0", "5000", NULL } },
	{ "_pq_.protocol_managed_params", { "", "x", NULL } },
	{ "geqo", { "off", NULL } },
	{ "standard_conforming_strings", { "on", "off", NULL } },
	{ "user", { "alice", "bob", "carol", "mallory", "", NULL } },
	{ "database", { "db", "forced", "nosuch", "replication", "", NULL } },
};

static size_t n_values(const struct param *p)
{
	size_t n = 0;
	while (n < ARRAY_LEN(p->values) && p->values[n])
		n++;
	return n;
}

/* ---- connections ---- */

static bool open_conn(int *fd, bool tcp)
{
	struct peer p;
	if (n_connects >= MAX_CONNECTS)
		return false;
	n_connects++;
	if (tcp)
		rig_client_tcp(&p);
	else
		rig_client_raw(&p);
	*fd = p.fd;
	/* A TCP client's end comes blocking: the fakes never wait. */
	if (tcp)
		(void)fcntl(p.fd, F_SETFL, O_NONBLOCK);
	return true;
}

static void reset_client(struct fclient *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->auth = -1;
	c->rd.typed = true;           /* the pooler sends no startup packet */
	c->rd.check_fill = true;
}

static void hang_up(struct fclient *c)
{
	if (c->fd >= 0)
		close(c->fd);
	outq_free(&c->q);
	fz_tls_free(c->tls);
	reset_client(c);
}

static void send_out(struct fclient *c, struct out *o)
{
	out_queue(o, &c->q, c->fd);
}

static bool ensure_conn(struct fclient *c, bool tcp)
{
	return c->fd >= 0 || open_conn(&c->fd, tcp);
}

/* ---- startup ---- */

static void put_pair(struct pktbuf *pb, const char *k, const char *v)
{
	pktbuf_put_string(pb, k);
	pktbuf_put_string(pb, v);
}

/* The parameters chosen by two mask bytes, one value byte each. */
static void put_params(struct fclient *c, struct pktbuf *pb, struct input *in)
{
	unsigned mask = (unsigned)in_byte(in) << 8 | in_byte(in);
	for (size_t i = 0; i < ARRAY_LEN(PARAMS); i++) {
		if (!(mask & (1u << i)))
			continue;
		const struct param *p = &PARAMS[i];
		const char *v = p->values[in_pick(in, n_values(p))];
		put_pair(pb, p->name, v);
		if (strcmp(p->name, "user") == 0)
			snprintf(c->user, sizeof(c->user), "%s", v);
	}
	if (mask & 0x8000) {          /* one of the input's own */
		const uint8_t *b;
		size_t n = in_take(in, &b, in_byte(in) % 64);
		pktbuf_put_bytes(pb, b, n);
		pktbuf_put_u8(pb, 0);
	}
}

/* Two bytes (version, transport, user; database, order, terminator),
 * then the parameters. */
static void send_startup(struct fclient *c, struct input *in)
{
	uint8_t a = in_byte(in), b = in_byte(in);
	const char *user = USERS[a >> 4], *db = DATABASES[b & 15];
	struct out o;

	if (!ensure_conn(c, a & 8))
		return;
	out_init(&o);
	pktbuf_begin(&o.pb, 0);
	pktbuf_put_u32(&o.pb, VERSIONS[a & 7]);
	snprintf(c->user, sizeof(c->user), "%s", user ? user : "");
	if (!(b & 0x10) && user)
		put_pair(&o.pb, "user", user);
	if (!(b & 0x10) && db)
		put_pair(&o.pb, "database", db);
	put_params(c, &o.pb, in);
	if ((b & 0x10) && user)
		put_pair(&o.pb, "user", user);
	if (!(b & 0x20))
		pktbuf_put_u8(&o.pb, 0);
	pktbuf_finish(&o.pb);
	send_out(c, &o);
	c->started = true;
}

static void send_request(struct fclient *c, uint32_t code)
{
	uint8_t b[8] = { 0, 0, 0, 8, (uint8_t)(code >> 24), (uint8_t)(code >> 16),
			 (uint8_t)(code >> 8), (uint8_t)code };
	if (!ensure_conn(c, false))
		return;
	outq_send(&c->q, c->fd, b, sizeof(b));
	c->rd.answers++;
	if (code == SSL_REQUEST && c->tls_state == FT_NONE)
		c->tls_state = FT_ASKED;
}

/* A key one of the fakes was given, one the pooler holds for a client
 * that has not been told it yet, or the input's. */
static void cancel_key(struct input *in, struct cancelkey *k)
{
	static const uint16_t lens[] = { CANCELKEY_SHORT, CANCELKEY_LONG, 8, CANCELKEY_MAX };
	uint8_t src = in_byte(in) & 7;
	const uint8_t *b;
	memset(k, 0, sizeof(*k));
	if (src < FZ_CLIENTS && fz_client_key(src, k))
		return;
	if (src < 6) {
		struct list *it;
		int skip = src & 1;
		list_for_each(it, &rig_w->all_clients) {
			struct client *pc = container_of(it, struct client, all_node);
			cancelkey_from_own(k, &pc->key);
			if (skip-- <= 0)
				return;
		}
		return;
	}
	/* Made up: a pid and a secret of a length PostgreSQL allows. */
	uint16_t len = lens[in_byte(in) & 3];
	if (in_take(in, &b, 4) == 4) {
		k->pid = get32(b);
		k->len = len;
		for (uint16_t i = 0; i < len; i++)
			k->secret[i] = in_byte(in);
	}
}

static void send_cancel(struct input *in)
{
	struct out o;
	struct cancelkey k;
	int fd;
	cancel_key(in, &k);
	if (k.len == 0)
		k.len = CANCELKEY_SHORT;          /* a key of zeros, as before */
	if (n_cancel_fds == MAX_CONNECTS || !open_conn(&fd, in_byte(in) & 1))
		return;
	cancel_fds[n_cancel_fds++] = fd;
	out_init(&o);
	pkt_write_cancel_request(&o.pb, &k);
	out_send(&o, fd);
}

/* ---- authentication ---- */

static void send_sasl_first(struct fclient *c, struct pktbuf *pb, const char *mech)
{
	char first[256];
	size_t n = 0;
	if (scram_client_first(&c->scram, first, sizeof(first), &n) < 0)
		return;
	pkt_write_sasl_initial(pb, mech, first, n);
}

static void send_sasl_final(struct fclient *c, struct pktbuf *pb, const char *pw)
{
	char final[512];
	size_t n = 0;
	const char *err = NULL;
	if (scram_client_final(&c->scram, c->server_first, c->server_first_len, pw, NULL, final,
			       sizeof(final), &n, &err) < 0)
		pkt_write_sasl_response(pb, "c=biws,r=x,p=x", 14);
	else
		pkt_write_sasl_response(pb, final, n);
}

/* What the client answers to its last authentication request with pw. */
static void answer_auth(struct fclient *c, struct pktbuf *pb, const char *pw)
{
	char hash[36], salted[36];
	switch (c->auth) {
	case 5:
		md5_password_hash(c->user, pw, hash);
		md5_salted(hash, c->salt, salted);
		pkt_write_password(pb, salted);
		break;
	case 10:
		send_sasl_first(c, pb, "SCRAM-SHA-256");
		break;
	case 11:
		send_sasl_final(c, pb, pw);
		break;
	default:
		pkt_write_password(pb, pw);
		break;
	}
}

/* Wrong in one of the ways a client can be. */
static void answer_badly(struct fclient *c, struct pktbuf *pb, struct input *in)
{
	const uint8_t *b;
	size_t n;
	switch (in_byte(in) & 7) {
	case 0:
		answer_auth(c, pb, "wrong");
		break;
	case 1:                        /* no terminating NUL */
		pktbuf_begin(pb, 'p');
		pktbuf_put_bytes(pb, "secret", 6);
		pktbuf_finish(pb);
		break;
	case 2:
		send_sasl_first(c, pb, "SCRAM-SHA-1");
		break;
	case 3:
		n = in_take(in, &b, in_byte(in));
		pkt_write_sasl_initial(pb, "SCRAM-SHA-256", b, n);
		break;
	case 4:
		n = in_take(in, &b, in_byte(in));
		pkt_write_sasl_response(pb, b, n);
		break;
	case 5:
		pktbuf_begin(pb, 'p');
		pktbuf_finish(pb);
		break;
	case 6:
		pkt_write_sasl_initial(pb, "SCRAM-SHA-256", NULL, 0);
		break;
	default:                       /* the first step again */
		send_sasl_first(c, pb, "SCRAM-SHA-256");
		break;
	}
}

static void auth_op(struct fclient *c, bool good, struct input *in)
{
	struct out o;
	out_init(&o);
	if (good)
		answer_auth(c, &o.pb, fz_password(c->user));
	else
		answer_badly(c, &o.pb, in);
	send_out(c, &o);
}

/* ---- queries ---- */

static const char *const QUERIES[16] = {
	"SELECT 1", "BEGIN", "COMMIT", "ROLLBACK", "", "SET DateStyle = German",
	"SET application_name = 'x'", "RESET ALL", "DISCARD ALL", "PREPARE p1 AS SELECT 1",
	"EXECUTE p1", "DEALLOCATE p1", "DEALLOCATE ALL", "LISTEN x", "IDENTIFY_SYSTEM",
	"BEGIN; SELECT 1; COMMIT",
};
static const char *const STATEMENTS[4] = { "", "s1", "s2", "PGCREW_1" };

static void query_op(struct fclient *c, struct input *in)
{
	struct out o;
	out_init(&o);
	pkt_write_query(&o.pb, QUERIES[in_pick(in, ARRAY_LEN(QUERIES))]);
	send_out(c, &o);         /* nowhere without a connection */
}

/* One extended-protocol message of type t for statement name. */
static void put_extended(struct pktbuf *pb, char t, const char *name, const char *sql)
{
	pktbuf_begin(pb, (uint8_t)t);
	switch (t) {
	case 'P':
		pktbuf_put_string(pb, name);
		pktbuf_put_string(pb, sql);
		pktbuf_put_u16(pb, 0);
		break;
	case 'B':
		pktbuf_put_string(pb, "");
		pktbuf_put_string(pb, name);
		pktbuf_put_u32(pb, 0);       /* no formats, no parameters */
		pktbuf_put_u16(pb, 0);
		break;
	case 'D':
	case 'C':
		pktbuf_put_u8(pb, 'S');
		pktbuf_put_string(pb, name);
		break;
	case 'E':
		pktbuf_put_string(pb, "");
		pktbuf_put_u32(pb, 0);
		break;
	case 'F':
		pktbuf_put_u32(pb, 1598);    /* an oid, no arguments */
		pktbuf_put_u32(pb, 0);
		pktbuf_put_u16(pb, 0);
		break;
	default:                       /* S, H: empty */
		break;
	}
	pktbuf_finish(pb);
}

static void extended_op(struct fclient *c, struct input *in)
{
	/* libpq and pgjdbc unnamed (PBDES), pgx and asyncpg preparing (PDS)
	 * then running (BES), psycopg's pipeline (PBDEH ... S), and odd ones. */
	static const char *const SEQS[16] = {
		"PBDES", "PS", "BES", "PBES", "PH", "CS", "PBDEH", "DS", "P", "ES", "PBEPBES", "FS",
		"PDS", "BDES", "S", "H",
	};
	const char *seq = SEQS[in_pick(in, ARRAY_LEN(SEQS))];
	const char *name = STATEMENTS[in_pick(in, ARRAY_LEN(STATEMENTS))];
	const char *sql = QUERIES[in_pick(in, ARRAY_LEN(QUERIES))];
	struct out o;
	out_init(&o);
	for (; *seq; seq++)
		put_extended(&o.pb, *seq, name, sql);
	send_out(c, &o);
}

static void message_op(struct fclient *c, struct input *in)
{
	struct out o;
	out_message(&o, in, "QPBDESCHXpFdcf");
	send_out(c, &o);
}

static void bytes_op(struct fclient *c, struct input *in)
{
	const uint8_t *b;
	size_t n = in_take(in, &b, in_byte(in));
	if (ensure_conn(c, false))
		outq_send(&c->q, c->fd, b, n);
}

/* What a real client does next: connect and start, authenticate, query. */
static void step(struct fclient *c, struct input *in)
{
	if (c->fd < 0 || !c->started)
		send_startup(c, in);
	else if (c->auth == 3 || c->auth == 5 || c->auth == 10 || c->auth == 11)
		auth_op(c, true, in);
	else
		query_op(c, in);
}

/* Also as the first packet (node-postgres ending a client before it
 * connected). */
static void terminate(struct fclient *c)
{
	struct out o;
	if (!ensure_conn(c, false))
		return;
	out_init(&o);
	pkt_write_terminate(&o.pb);
	send_out(c, &o);
}

/* ---- TLS, a step at a time ---- */

static ssize_t client_read(struct fclient *c);

/* One step of the handshake; what OpenSSL wrote goes on the wire. */
static void tls_step(struct fclient *c)
{
	switch (fz_tls_handshake(c->tls)) {
	case TLS_OK:
		c->tls_state = FT_UP;
		c->q.tls = c->tls;
		break;
	case TLS_WANT_READ:
		c->tls_state = FT_SHAKING;
		break;
	default:
		c->tls_state = FT_BROKEN;
		break;
	}
	fz_tls_take(c->tls, &c->q.wire);
	outq_flush(&c->q, c->fd);
}

/* A real client: steps and loop pumps until the handshake is done (or
 * the pooler gave up). */
static void tls_complete(struct fclient *c)
{
	for (int i = 0; i < HANDSHAKE_ROUNDS; i++) {
		tls_step(c);
		if (c->tls_state != FT_SHAKING)
			return;
		rig_pump();
		if (client_read(c) < 0) {
			hang_up(c);
			return;
		}
	}
}

/* Only the first k bytes of the ClientHello go. */
static void tls_cut_hello(struct fclient *c, uint8_t k)
{
	struct bytes hello = { 0 };
	(void)fz_tls_handshake(c->tls);
	fz_tls_take(c->tls, &hello);
	if (hello.len > 1)
		outq_raw(&c->q, c->fd, hello.p, 1 + k % (hello.len - 1));
	bytes_free(&hello);
	c->tls_state = FT_BROKEN;
}

/* Two bytes (how: step, complete, garbage, cut or stop; a length) and up
 * to 15 garbage bytes, always read. Without a connection: a TCP one and
 * its SSLRequest; once 'S' came, the handshake as the input says. */
static void tls_op(struct fclient *c, struct input *in)
{
	uint8_t m = in_byte(in), k = in_byte(in);
	const uint8_t *junk;
	size_t nj = in_take(in, &junk, m >> 4);
	if (c->fd < 0) {
		if (ensure_conn(c, true))
			send_request(c, SSL_REQUEST);
		return;
	}
	if (c->tls_state != FT_ACCEPTED && c->tls_state != FT_SHAKING && c->tls_state != FT_UP)
		return;
	if (!c->tls && !(c->tls = fz_tls_new())) {
		c->tls_state = FT_BROKEN;
		return;
	}
	switch (c->tls_state == FT_UP ? 2 : m & 3) {
	case 0: tls_step(c); break;
	case 1: tls_complete(c); break;
	case 2:
		if (m & 4 || c->tls_state != FT_UP) {    /* records the pooler cannot read */
			outq_raw(&c->q, c->fd, junk, nj);
			c->tls_state = FT_BROKEN;
		}
		break;
	default:
		if (c->tls_state == FT_ACCEPTED)
			tls_cut_hello(c, k);
		break;                    /* mid-way: stops there */
	}
}

/* ---- a named statement and a large message for it, in pieces ---- */

static size_t msg_start(struct bytes *b, char type)
{
	uint8_t h[5] = { (uint8_t)type };
	bytes_add(b, h, sizeof(h));
	return b->len - sizeof(h);
}

static void msg_end(struct bytes *b, size_t at)
{
	uint32_t n = (uint32_t)(b->len - at - 1);
	uint8_t *l = b->p + at + 1;
	l[0] = (uint8_t)(n >> 24);
	l[1] = (uint8_t)(n >> 16);
	l[2] = (uint8_t)(n >> 8);
	l[3] = (uint8_t)n;
}

static void add_u16(struct bytes *b, uint16_t v)
{
	uint8_t x[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	bytes_add(b, x, sizeof(x));
}

static void add_u32(struct bytes *b, uint32_t v)
{
	uint8_t x[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	bytes_add(b, x, sizeof(x));
}

/* A name: a string, or n bytes of filler (big_name) and its NUL. */
static void add_name(struct bytes *b, const char *name, size_t big)
{
	if (big)
		fill_add(b, big);
	bytes_add(b, name, big ? 1 : strlen(name) + 1);
}

static void big_parse(struct bytes *b, const char *name, size_t big)
{
	size_t at = msg_start(b, 'P');
	add_name(b, name, big);
	bytes_add(b, "SELECT $1::text", 16);
	add_u16(b, 0);
	msg_end(b, at);
}

/* Bind of portal (big: filler of that size) to the statement, with one
 * parameter (param bytes of filler, or "1"). */
static void big_bind(struct bytes *b, const char *name, size_t big_portal, size_t param)
{
	size_t at = msg_start(b, 'B');
	add_name(b, "", big_portal);
	add_name(b, name, 0);
	add_u16(b, 0);
	add_u16(b, 1);
	add_u32(b, param ? (uint32_t)param : 1);
	if (param)
		fill_add(b, param);
	else
		bytes_add(b, "1", 1);
	add_u16(b, 0);
	msg_end(b, at);
}

static void small_msg(struct bytes *b, char type, const char *portal, size_t big)
{
	size_t at = msg_start(b, type);
	if (type == 'D')
		bytes_add(b, "S", 1);
	if (type == 'E' || type == 'D')
		add_name(b, portal, big);
	if (type == 'E')
		add_u32(b, 0);
	msg_end(b, at);
}

/* Three bytes: which (low 2 bits) and the statement's name (next 2); the
 * size (up to about 98 kB). Held back for CO_PIECE: a Bind of the
 * statement (Parsed before) whose parameter is that large, Execute and
 * Sync (what issue 40's TLS client sent), the same after its Parse and a
 * Sync, a Parse and Describe of a statement whose name is that large, or
 * a Parse, then a Bind and Execute of a portal whose name is. */
static void big_op(struct fclient *c, struct input *in)
{
	uint8_t k = in_byte(in), hi = in_byte(in), lo = in_byte(in);
	size_t n = ((size_t)hi << 8 | lo) * 3 / 2;
	const char *name = STATEMENTS[(k >> 2) & 3];
	struct bytes b = { 0 };
	switch (k & 3) {
	case 0:
	case 1:
		if (k & 1) {
			big_parse(&b, name, 0);
			small_msg(&b, 'S', "", 0);
		}
		big_bind(&b, name, 0, n);
		small_msg(&b, 'E', "", 0);
		break;
	case 2:
		big_parse(&b, "", n);
		small_msg(&b, 'D', "", n);
		break;
	default:
		big_parse(&b, name, 0);
		big_bind(&b, name, n, 0);
		small_msg(&b, 'E', "", n);
		break;
	}
	small_msg(&b, 'S', "", 0);
	if (c->fd >= 0)
		outq_hold(&c->q, b.p, b.len);
	bytes_free(&b);
}

/* ---- the console ---- */

/* Every SHOW view (src/console/admin.c views[]) and the control commands
 * a session survives; not SUSPEND (the rig has no listener to pause) nor
 * SHUTDOWN (it signals the parent process). KILL_CLIENT takes the id of
 * one of the world's clients. */
static const char *const CONSOLE_COMMANDS[] = {
	"SHOW HELP", "SHOW VERSION", "SHOW CONFIG", "SHOW POOLS", "SHOW CLIENTS", "SHOW SERVERS",
	"SHOW DATABASES", "SHOW USERS", "SHOW LISTS", "SHOW STATS", "SHOW STATS_TOTALS",
	"SHOW STATS_AVERAGES", "SHOW TOTALS", "SHOW STATE", "SHOW DNS_HOSTS", "SHOW DNS_ZONES",
	"SHOW WORKERS", "SHOW PEERS", "SHOW HOSTS", "SHOW PEER_POOLS", "SHOW FDS", "SHOW PROTOCOLS",
	"SHOW SOCKETS", "SHOW ACTIVE_SOCKETS", "SHOW MEM", "PAUSE", "PAUSE db", "RESUME",
	"RESUME db", "KILL db", "KILL sess", "KILL", "DISABLE db", "ENABLE db", "RECONNECT db",
	"RECONNECT", "WAIT_CLOSE db", "KILL_CLIENT", "RELOAD", "SHOW nosuch", "PAUSE nosuch",
	"SET nothing",
};
static const char *const CONSOLE_USERS[4] = { "alice", "bob", "pgbouncer", "carol" };

static void console_command(struct fclient *c, uint8_t pick, uint8_t m)
{
	char sql[64];
	struct out o;
	const char *cmd = CONSOLE_COMMANDS[pick % ARRAY_LEN(CONSOLE_COMMANDS)];
	snprintf(sql, sizeof(sql), "%s", cmd);
	if (strcmp(cmd, "KILL_CLIENT") == 0) {
		struct list *it;
		int skip = m >> 3;
		list_for_each(it, &rig_w->all_clients) {
			const struct client *pc = container_of(it, struct client, all_node);
			snprintf(sql, sizeof(sql), "KILL_CLIENT %llu", (unsigned long long)pc->id);
			if (skip-- <= 0)
				break;
		}
	}
	out_init(&o);
	pkt_write_query(&o.pb, sql);
	send_out(c, &o);
}

/* Two bytes, always read: who logs in (alice an admin, bob a stats user,
 * pgbouncer over the Unix socket, carol nobody) and over TCP or not; the
 * command. A client that has not started logs in to the console (over
 * its TLS when that is up); one that has runs the command, whatever its
 * state. */
static void console_op(struct fclient *c, struct input *in)
{
	uint8_t m = in_byte(in), pick = in_byte(in);
	struct out o;
	const char *kv[] = { "user", CONSOLE_USERS[m & 3], "database", "pgbouncer", NULL };
	if (c->started) {
		console_command(c, pick, m);
		return;
	}
	if (!ensure_conn(c, m & 4))
		return;
	out_init(&o);
	pkt_write_startup(&o.pb, 0, kv);
	send_out(c, &o);
	snprintf(c->user, sizeof(c->user), "%s", CONSOLE_USERS[m & 3]);
	c->started = true;
}

/* An op reads its arguments whatever the client's state (CO_STEP aside:
 * what comes next depends on it), so a mutation of one action leaves the
 * reading of the next ones alone. */
void fz_client_op(enum client_op op, int slot, struct input *in)
{
	struct fclient *c = &clients[slot];
	switch (op) {
	case CO_STEP: step(c, in); break;
	case CO_STARTUP: send_startup(c, in); break;
	case CO_SSL: send_request(c, SSL_REQUEST); break;
	case CO_GSSENC: send_request(c, 80877104); break;
	case CO_CANCEL: send_cancel(in); break;
	case CO_AUTH_GOOD: auth_op(c, true, in); break;
	case CO_AUTH_BAD: auth_op(c, false, in); break;
	case CO_QUERY: query_op(c, in); break;
	case CO_EXTENDED: extended_op(c, in); break;
	case CO_MESSAGE: message_op(c, in); break;
	case CO_BYTES: bytes_op(c, in); break;
	case CO_TERMINATE: terminate(c); break;
	case CO_HANGUP: hang_up(c); break;
	case CO_TLS: tls_op(c, in); break;
	case CO_BIG: big_op(c, in); break;
	case CO_PIECE: outq_piece(&c->q, c->fd, piece_len(in)); break;
	case CO_CONSOLE: console_op(c, in); break;
	default: break;
	}
}

/* ---- what the pooler says ---- */

static void on_auth(struct fclient *c, const uint8_t *body, size_t len)
{
	if (len < 4)
		return;
	int code = (int)get32(body);
	c->auth = code == 0 || code == 12 ? -1 : code;
	if (code == 5 && len >= 8)
		memcpy(c->salt, body + 4, 4);
	if (code == 11) {
		c->server_first_len = len - 4 < SCRAM_MAX_SERVER_FIRST ? len - 4 : SCRAM_MAX_SERVER_FIRST;
		memcpy(c->server_first, body + 4, c->server_first_len);
	}
}

static void on_msg(void *arg, char type, const uint8_t *body, size_t len)
{
	struct fclient *c = arg;
	switch (type) {
	case 'R':
		on_auth(c, body, len);
		break;
	case 'K':
		if (len >= 8 && cancelkey_set(&c->key, PROTO_MINOR_LATEST, get32(body), body + 4, len - 4))
			c->has_key = true;
		break;
	case 'Z':
		c->ready = true;
		break;
	case ' ':
		if (c->tls_state == FT_ASKED)
			c->tls_state = body[0] == 'S' ? FT_ACCEPTED : FT_NONE;
		break;
	default:
		break;
	}
}

/* A cancel connection hears nothing; the pooler closes it. */
static int drain_cancels(void)
{
	int n = 0;
	for (int i = 0; i < n_cancel_fds; i++) {
		char b[64];
		if (cancel_fds[i] >= 0 && recv(cancel_fds[i], b, sizeof(b), MSG_DONTWAIT) == 0) {
			close(cancel_fds[i]);
			cancel_fds[i] = -1;
			n++;
		}
	}
	return n;
}

/* What TLS decrypted, to the reader; -1 once the session is over. */
static ssize_t tls_plaintext(struct fclient *c)
{
	uint8_t buf[16384];
	ssize_t n, total = 0;
	while ((n = fz_tls_read(c->tls, buf, sizeof(buf))) > 0) {
		reader_feed(&c->rd, buf, (size_t)n, on_msg, c);
		total += n;
		if (c->tls_state != FT_UP)
			return total;
	}
	return n < 0 ? -1 : total;
}

/* What came for c: plain bytes to its reader; once TLS was accepted,
 * records to OpenSSL and, when the session is up, what they decrypt to
 * (while broken, dropped). Bytes read, or -1 at EOF. */
static ssize_t client_read(struct fclient *c)
{
	uint8_t buf[16384];
	ssize_t n, total = 0;
	outq_flush(&c->q, c->fd);
	if (c->tls_state < FT_ACCEPTED)
		return reader_drain(&c->rd, c->fd, on_msg, c);
	while ((n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		total += n;
		if (c->tls && c->tls_state != FT_BROKEN)
			fz_tls_feed(c->tls, buf, (size_t)n);
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		return -1;
	if (c->tls_state == FT_UP && tls_plaintext(c) < 0)
		return -1;
	return total;
}

int fz_clients_drain(void)
{
	int n = 0;
	for (int i = 0; i < FZ_CLIENTS; i++) {
		struct fclient *c = &clients[i];
		if (c->fd < 0)
			continue;
		ssize_t got = client_read(c);
		n += got != 0;
		if (got < 0)
			hang_up(c);
	}
	return n + drain_cancels();
}

bool fz_client_key(int slot, struct cancelkey *k)
{
	const struct fclient *c = &clients[slot];
	if (c->has_key)
		*k = c->key;
	return c->has_key;
}

void fz_clients_reset(void)
{
	for (int i = 0; i < FZ_CLIENTS; i++)
		reset_client(&clients[i]);
	n_cancel_fds = n_connects = 0;
}

void fz_clients_close(void)
{
	for (int i = 0; i < FZ_CLIENTS; i++)
		hang_up(&clients[i]);
	for (int i = 0; i < n_cancel_fds; i++)
		if (cancel_fds[i] >= 0)
			close(cancel_fds[i]);
	n_cancel_fds = 0;
}

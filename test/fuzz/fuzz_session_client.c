/* pgcrew — the session fuzz target's fake clients: startup packets made of
 * the parameters PostgreSQL drivers send (and garbage), SSL/GSSENC/cancel
 * requests, right and wrong answers to every authentication exchange
 * (cleartext, md5, SCRAM with pgcrew's own SCRAM client), simple and
 * extended queries, raw messages and bytes, Terminate and hang-ups. */
#include "fuzz_session.h"
#include "rig.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth/md5.h"
#include "auth/scram.h"
#include "proto/cancelkey.h"
#include "world.h"

#define MAX_CONNECTS 16          /* connections per input, cancels included */
#define LONG_NAME "a_name_longer_than_namedatalen_which_is_sixty_four_bytes_long_xxxxxxxx"
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct fclient {
	int fd;                       /* -1: the slot is free */
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
	return true;
}

static void reset_client(struct fclient *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->auth = -1;
	c->rd.typed = true;           /* the pooler sends no startup packet */
}

static void hang_up(struct fclient *c)
{
	if (c->fd >= 0)
		close(c->fd);
	reset_client(c);
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
	out_send(&o, c->fd);
	c->started = true;
}

static void send_request(struct fclient *c, uint32_t code)
{
	uint8_t b[8] = { 0, 0, 0, 8, (uint8_t)(code >> 24), (uint8_t)(code >> 16),
			 (uint8_t)(code >> 8), (uint8_t)code };
	if (!ensure_conn(c, false))
		return;
	send_bytes(c->fd, b, sizeof(b));
	c->rd.answers++;
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
	out_send(&o, c->fd);
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
	out_send(&o, c->fd);     /* nowhere without a connection */
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
	out_send(&o, c->fd);
}

static void message_op(struct fclient *c, struct input *in)
{
	struct out o;
	out_message(&o, in, "QPBDESCHXpFdcf");
	out_send(&o, c->fd);
}

static void bytes_op(struct fclient *c, struct input *in)
{
	const uint8_t *b;
	size_t n = in_take(in, &b, in_byte(in));
	if (ensure_conn(c, false))
		send_bytes(c->fd, b, n);
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
	out_send(&o, c->fd);
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
	case CO_SSL: send_request(c, 80877103); break;
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

int fz_clients_drain(void)
{
	int n = 0;
	for (int i = 0; i < FZ_CLIENTS; i++) {
		struct fclient *c = &clients[i];
		if (c->fd < 0)
			continue;
		ssize_t got = reader_drain(&c->rd, c->fd, on_msg, c);
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

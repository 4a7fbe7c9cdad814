/* pgcrew — the session fuzz target's fake PostgreSQL: takes the pooler's
 * server connections (and its cancel connections), answers the login as
 * the input chooses (accepted, an md5, cleartext or SCRAM exchange, a
 * refusal, NegotiateProtocolVersion, a hang-up), answers requests in order
 * (auth_query rows included), with errors, notices, ParameterStatus or
 * garbage between them, sends large filler messages in pieces, or hangs
 * up. A server that kept to the protocol is checked to be at a message
 * boundary whenever the pooler keeps it idle. */
#include "fuzz_session.h"
#include "rig.h"

#include <stdio.h>
#include <sys/types.h>
#include <string.h>
#include <unistd.h>

#include "auth/scram.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "server.h"
#include "world.h"

#define MAX_PENDING 32
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define BIG_MAX 100000

enum phase { FS_FREE, FS_STARTUP, FS_LOGIN, FS_READY };

struct fserver {
	int fd;
	struct outq q;                /* everything it sends, in order */
	uint32_t pid;                 /* of its BackendKeyData, 0 before */
	bool liar;                    /* sent what the protocol does not allow there */
	enum phase phase;
	char user[64];                /* of its startup packet */
	char pending[MAX_PENDING];    /* requests owed an answer, in order (see note_request) */
	int n_pending;
	bool authq;                   /* the unnamed statement is the auth_query */
	char authq_user[64];          /* its parameter */
	char status;                  /* transaction status: 'I' or 'T' */
	int sasl_step;                /* 0 none, 1 asked, 2 server-first sent */
	bool got_password;            /* a 'p' came since the last login step */
	bool gone;                    /* closes its end after reading */
	uint8_t password[512];        /* its body */
	size_t password_len;
	struct scram_server scram;
	struct reader rd;
};

static struct fserver servers[FZ_SERVERS];
static uint32_t next_pid;

static void hang_up(struct fserver *s)
{
	if (s->fd >= 0)
		close(s->fd);
	outq_free(&s->q);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

/* ---- what the pooler sends ---- */

static void on_startup(struct fserver *s, const uint8_t *body, size_t len)
{
	uint32_t code = len >= 4 ? get32(body) : 0;
	if (code == 80877102) {            /* a CancelRequest: PostgreSQL just closes */
		s->gone = true;
		return;
	}
	if (code == 80877103) {            /* SSLRequest: no TLS here */
		outq_send(&s->q, s->fd, "N", 1);
		s->rd.typed = false;
		return;
	}
	for (size_t i = 4; i < len && body[i];) {
		const char *k = (const char *)body + i;
		size_t kl = strnlen(k, len - i);
		const char *v = k + kl + 1;
		if (i + kl + 1 >= len)
			break;
		size_t vl = strnlen(v, len - i - kl - 1);
		if (strcmp(k, "user") == 0)
			snprintf(s->user, sizeof(s->user), "%.*s", (int)vl, v);
		i += kl + vl + 2;
	}
	s->phase = FS_LOGIN;
}

static void push(struct fserver *s, char what)
{
	if (s->n_pending < MAX_PENDING)
		s->pending[s->n_pending++] = what;
}

/* The first parameter of a Bind: the auth_query's user name. */
static void note_bind(struct fserver *s, const uint8_t *body, size_t len)
{
	size_t i = strnlen((const char *)body, len) + 1;
	i += i < len ? strnlen((const char *)body + i, len - i) + 1 : 0;
	if (i + 2 > len)
		return;
	i += 2 + 2 * (size_t)(body[i] << 8 | body[i + 1]);
	if (i + 6 > len)
		return;
	uint32_t n = get32(body + i + 2);
	if (n <= len - i - 6 && n < sizeof(s->authq_user))
		snprintf(s->authq_user, sizeof(s->authq_user), "%.*s", (int)n, body + i + 6);
}

/* Queue what a request is owed: Q as '0' (empty), 'T' (BEGIN), 'I'
 * (COMMIT/ROLLBACK) or 'Q'; an auth_query's Describe and Execute as 'd'
 * and 'A'; other extended messages as themselves. */
static void note_request(struct fserver *s, char type, const uint8_t *body, size_t len)
{
	const char *text = (const char *)body;
	size_t tl = strnlen(text, len);
	switch (type) {
	case 'Q':
		push(s, tl == 0 ? '0' : strncmp(text, "BEGIN", 5) == 0 ? 'T' :
			strncmp(text, "COMMIT", 6) == 0 || strncmp(text, "ROLLBACK", 8) == 0 ? 'I' : 'Q');
		break;
	case 'P':
		s->authq = tl + 1 < len && strstr(text + tl + 1, "rolname") != NULL;
		push(s, 'P');
		break;
	case 'B':
		note_bind(s, body, len);
		push(s, 'B');
		break;
	case 'D':
		push(s, s->authq ? 'd' : 'D');
		break;
	case 'E':
		push(s, s->authq ? 'A' : 'E');
		break;
	case 'C': case 'S': case 'F':
		push(s, type);
		break;
	default:                            /* H, copy data: nothing owed */
		break;
	}
}

static void on_msg(void *arg, char type, const uint8_t *body, size_t len)
{
	struct fserver *s = arg;
	if (s->gone)
		return;
	if (type == 0) {
		on_startup(s, body, len);
		return;
	}
	if (type == 'X') {
		s->gone = true;
		return;
	}
	if (type == 'p' && s->phase == FS_LOGIN) {
		s->got_password = true;
		s->password_len = len < sizeof(s->password) ? len : sizeof(s->password);
		memcpy(s->password, body, s->password_len);
		return;
	}
	if (s->phase == FS_READY)
		note_request(s, type, body, len);
}

/* New connections into free slots (the rest wait in the backlog). */
static int accept_new(void)
{
	struct peer p;
	int n = 0;
	for (int i = 0; i < FZ_SERVERS; i++) {
		struct fserver *s = &servers[i];
		if (s->fd >= 0)
			continue;
		if (!rig_pg_try_accept(&p))
			break;
		s->fd = p.fd;
		s->phase = FS_STARTUP;
		s->status = 'I';
		n++;
	}
	return n;
}

int fz_servers_drain(void)
{
	int n = accept_new();
	for (int i = 0; i < FZ_SERVERS; i++) {
		struct fserver *s = &servers[i];
		if (s->fd < 0)
			continue;
		outq_flush(&s->q, s->fd);
		ssize_t got = reader_drain(&s->rd, s->fd, on_msg, s);
		n += got > 0;
		if (got < 0 || s->gone) {
			hang_up(s);
			n++;
		}
	}
	return n;
}

/* ---- login ---- */

static void welcome(struct fserver *s, struct pktbuf *pb, uint8_t variant)
{
	static const char *const params[][2] = {
		{ "server_version", "16.4" }, { "server_encoding", "UTF8" },
		{ "client_encoding", "UTF8" }, { "DateStyle", "ISO, MDY" },
		{ "TimeZone", "UTC" }, { "integer_datetimes", "on" },
		{ "standard_conforming_strings", "on" }, { "application_name", "" },
		{ "IntervalStyle", "postgres" }, { "is_superuser", "off" },
		{ "default_transaction_read_only", "off" },
	};
	pkt_write_auth_ok(pb);
	for (size_t i = 0; i < ARRAY_LEN(params); i++)
		pkt_write_parameter_status(pb, params[i][0], params[i][1]);
	pkt_write_parameter_status(pb, "in_hot_standby", variant & 1 ? "on" : "off");
	if (variant & 2)
		pkt_write_notice(pb, "WARNING", "01000", "a notice during login");
	s->pid = ++next_pid;
	/* pgcrew asks for 3.2: PostgreSQL 18's 32-byte key, or an older
	 * server's 4 bytes, every other server. */
	struct cancelkey k = { .pid = next_pid, .len = next_pid & 1 ? 32 : 4 };
	for (uint16_t i = 0; i < k.len; i++)
		k.secret[i] = (uint8_t)(0x5e + next_pid + i);
	pkt_write_backend_key(pb, &k);
	pkt_write_ready(pb, 'I');
	s->phase = FS_READY;
}

/* SCRAM as PostgreSQL does it, for the user's password as the fakes know
 * it: asked, then server-first, then server-final and in. */
static void sasl_step(struct fserver *s, struct pktbuf *pb)
{
	static const uint8_t salt[] = "fuzzsaltfuzzsalt";
	struct scram_secret secret;
	char out[512];
	size_t n = 0;
	const char *err = NULL;
	struct pkt_reader r;

	if (s->sasl_step == 0 || !s->got_password) {
		pkt_write_auth_sasl(pb, false);
		s->sasl_step = 1;
		return;
	}
	s->got_password = false;
	if (!scram_secret_from_password(fz_password(s->user), salt, 16, 16, &secret))
		return;
	if (s->sasl_step == 1) {
		pkt_reader_init(&r, s->password, s->password_len);
		(void)pkt_get_string(&r);
		int32_t dl = pkt_get_i32(&r);
		const uint8_t *d = dl > 0 ? pkt_get_bytes(&r, (size_t)dl) : NULL;
		memset(&s->scram, 0, sizeof(s->scram));
		if (d && scram_server_first(&s->scram, &secret, false, (const char *)d, (size_t)dl, out,
					    sizeof(out), &n, &err) == 0) {
			pkt_write_auth_sasl_continue(pb, out, n);
			s->sasl_step = 2;
		} else {
			pkt_write_error(pb, "FATAL", "08P01", "malformed SCRAM message");
		}
		return;
	}
	if (scram_server_final(&s->scram, (const char *)s->password, s->password_len, out,
			       sizeof(out), &n, &err) == 0) {
		pkt_write_auth_sasl_final(pb, out, n);
		welcome(s, pb, 0);
	} else {
		pkt_write_error(pb, "FATAL", "28P01", "password authentication failed for user \"%s\"", s->user);
	}
}

static void login_step(struct fserver *s, struct pktbuf *pb, uint8_t m)
{
	static const uint8_t salt[4] = { 1, 2, 3, 4 };
	static const char *const unsupported[] = { "_pq_.protocol_managed_params" };
	switch (m % 12) {
	case 5: pkt_write_auth_md5(pb, salt); break;
	case 6: pkt_write_auth_cleartext(pb); break;
	case 7: sasl_step(s, pb); break;
	case 8:
		pkt_write_error(pb, "FATAL", "28P01", "password authentication failed for user \"%s\"", s->user);
		break;
	case 9:
		if (m & 16)
			pkt_write_error(pb, "FATAL", "57P03", "the database system is starting up");
		else
			pkt_write_error(pb, "FATAL", "53300", "sorry, too many clients already");
		break;
	case 10:
		pkt_write_negotiate_version(pb, 0, unsupported, 1);
		welcome(s, pb, m >> 4);
		break;
	case 11: break;                      /* hangs up below */
	default: welcome(s, pb, m >> 4); break;
	}
}

/* ---- requests ---- */

/* The auth_query's row: the user's password as a plain secret, a NULL
 * one, or none at all (m's variation bits). */
static void authq_row(struct fserver *s, struct pktbuf *pb, uint8_t m)
{
	const char *pw = fz_password(s->authq_user);
	if (!(m & 0x20)) {
		pktbuf_begin(pb, 'D');
		pktbuf_put_u16(pb, 2);
		pktbuf_put_u32(pb, (uint32_t)strlen(s->authq_user));
		pktbuf_put_bytes(pb, s->authq_user, strlen(s->authq_user));
		pktbuf_put_u32(pb, m & 0x40 ? 0xffffffffu : (uint32_t)strlen(pw));
		if (!(m & 0x40))
			pktbuf_put_bytes(pb, pw, strlen(pw));
		pktbuf_finish(pb);
	}
	pktbuf_begin(pb, 'C');
	pktbuf_put_string(pb, "SELECT 1");
	pktbuf_finish(pb);
}

static void row_description(struct pktbuf *pb)
{
	static const char *const cols[] = { "rolname", "rolpassword" };
	pktbuf_begin(pb, 'T');
	pktbuf_put_u16(pb, 2);
	for (size_t i = 0; i < ARRAY_LEN(cols); i++) {
		pktbuf_put_string(pb, cols[i]);
		pktbuf_put_u32(pb, 0);
		pktbuf_put_u16(pb, 0);
		pktbuf_put_u32(pb, 25);           /* text */
		pktbuf_put_u16(pb, 0xffff);
		pktbuf_put_u32(pb, 0xffffffffu);
		pktbuf_put_u16(pb, 0);
	}
	pktbuf_finish(pb);
}

static void put_tagged(struct pktbuf *pb, char type, const char *text)
{
	pktbuf_begin(pb, (uint8_t)type);
	if (text)
		pktbuf_put_string(pb, text);
	pktbuf_finish(pb);
}

/* The normal answer to one request; status is the ReadyForQuery's. */
static void answer(struct fserver *s, struct pktbuf *pb, char what, uint8_t m, char status)
{
	switch (what) {
	case 'T': s->status = 'T'; put_tagged(pb, 'C', "BEGIN"); break;
	case 'I': s->status = 'I'; put_tagged(pb, 'C', "COMMIT"); break;
	case 'Q': put_tagged(pb, 'C', "SELECT 1"); break;
	case '0': put_tagged(pb, 'I', NULL); break;
	case 'P': put_tagged(pb, '1', NULL); return;
	case 'B': put_tagged(pb, '2', NULL); return;
	case 'D': put_tagged(pb, 'n', NULL); return;
	case 'd': row_description(pb); return;
	case 'E': put_tagged(pb, 'C', "SELECT 0"); return;
	case 'A': authq_row(s, pb, m); return;
	case 'C': put_tagged(pb, '3', NULL); return;
	case 'F':
		pktbuf_begin(pb, 'V');
		pktbuf_put_u32(pb, 0xffffffffu);
		pktbuf_finish(pb);
		break;
	default: break;                      /* 'S' */
	}
	pkt_write_ready(pb, status ? status : s->status);
}

static void take(struct fserver *s, int n)
{
	s->n_pending -= n;
	memmove(s->pending, s->pending + n, (size_t)s->n_pending);
}

/* An ERROR for the first request. A simple query is then over; an
 * extended batch is skipped up to its Sync (all of it when the Sync has
 * not come yet: it gets its ReadyForQuery when it does). */
static void fail_first(struct fserver *s, struct pktbuf *pb)
{
	int n = 1;
	if (s->n_pending == 0)
		return;
	pkt_write_error(pb, "ERROR", "42601", "syntax error at or near \"x\"");
	if (!strchr("TIQ0F", s->pending[0])) {
		while (n < s->n_pending && s->pending[n - 1] != 'S')
			n++;
		if (s->pending[n - 1] != 'S') {
			take(s, n);
			return;
		}
	}
	pkt_write_ready(pb, s->status == 'T' ? 'E' : 'I');
	take(s, n);
}

static void async_messages(struct pktbuf *pb, uint8_t m)
{
	static const char *const params[][2] = {
		{ "TimeZone", "Europe/Paris" }, { "application_name", "changed" },
		{ "in_hot_standby", "on" }, { "default_transaction_read_only", "on" },
	};
	pkt_write_parameter_status(pb, params[(m >> 4) & 3][0], params[(m >> 4) & 3][1]);
	pkt_write_notice(pb, "NOTICE", "00000", "a notice");
	pktbuf_begin(pb, 'A');
	pktbuf_put_u32(pb, 4242);
	pktbuf_put_string(pb, "x");
	pktbuf_put_string(pb, "payload");
	pktbuf_finish(pb);
}

static void answer_all(struct fserver *s, struct pktbuf *pb, uint8_t m, char status, int most)
{
	int n = s->n_pending < most ? s->n_pending : most;
	for (int i = 0; i < n; i++)
		answer(s, pb, s->pending[i], m, status);
	take(s, n);
}

/* Returns false when the server hangs up. */
static bool ready_step(struct fserver *s, struct pktbuf *pb, uint8_t m)
{
	switch (m % 12) {
	case 6: fail_first(s, pb); break;
	case 7: answer_all(s, pb, m, 0, 1); break;
	case 8: async_messages(pb, m); answer_all(s, pb, m, 0, MAX_PENDING); break;
	case 9:
		pkt_write_error(pb, "FATAL", "57P01", "terminating connection due to administrator command");
		return false;
	case 10: answer_all(s, pb, m, 'E', MAX_PENDING); break;
	case 11:                               /* a ReadyForQuery nothing asked for */
		s->liar = true;
		pkt_write_ready(pb, s->status);
		break;
	default: answer_all(s, pb, m, 0, MAX_PENDING); break;
	}
	return true;
}

static void step(struct fserver *s, uint8_t m)
{
	struct out o;
	bool stay = true;
	out_init(&o);
	if (s->phase == FS_LOGIN) {
		login_step(s, &o.pb, m);
		stay = m % 12 != 11 && (m % 12 < 8 || m % 12 > 9);
	} else if (s->phase == FS_READY) {
		stay = ready_step(s, &o.pb, m);
	}
	out_queue(&o, &s->q, s->fd);
	if (!stay && s->fd >= 0)
		hang_up(s);
}

static void message(struct fserver *s, struct input *in)
{
	struct out o;
	out_message(&o, in, "RSKZENCDTI123AvGHWdcns");
	if (s->fd >= 0)
		s->liar = true;
	out_queue(&o, &s->q, s->fd);
}

/* Four bytes: which (CopyData, as in COPY TO STDOUT, or a DataRow), its
 * size (up to about 98 kB), then a first piece: the message is held back
 * and sent piece by piece (SO_PIECE); what the server says after it
 * waits behind it. */
static void big(struct fserver *s, struct input *in)
{
	uint8_t k = in_byte(in), hi = in_byte(in), lo = in_byte(in);
	size_t n = ((size_t)hi << 8 | lo) * 3 / 2, first = piece_len(in);
	uint8_t hdr[5] = { k & 1 ? 'D' : 'd' };
	struct bytes b = { 0 };
	if (s->fd < 0)
		return;
	uint32_t len = (uint32_t)(4 + n);
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
	bytes_add(&b, hdr, sizeof(hdr));
	fill_add(&b, n);
	outq_hold(&s->q, b.p, b.len);
	bytes_free(&b);
	s->liar = true;      /* nobody asked for it */
	outq_piece(&s->q, s->fd, first);
}

void fz_server_op(enum server_op op, int slot, struct input *in)
{
	struct fserver *s = &servers[slot];
	switch (op) {
	case SO_STEP: step(s, in_byte(in)); break;
	case SO_MESSAGE: message(s, in); break;
	case SO_HANGUP: hang_up(s); break;
	case SO_BIG: big(s, in); break;
	case SO_PIECE: outq_piece(&s->q, s->fd, piece_len(in)); break;
	default: break;
	}
}

static struct fserver *by_pid(uint32_t pid)
{
	for (int i = 0; i < FZ_SERVERS; i++)
		if (servers[i].fd >= 0 && servers[i].pid == pid)
			return &servers[i];
	return NULL;
}

bool fz_servers_at_boundary(char *why, size_t len)
{
	struct list *it;
	list_for_each(it, &rig_w->all_servers) {
		const struct server *sv = container_of(it, struct server, all_node);
		const struct fserver *s = sv->state == SERVER_IDLE ? by_pid(sv->be.pid) : NULL;
		if (!s || s->liar || (!reader_mid_message(&s->rd) && s->n_pending == 0))
			continue;
		snprintf(why, len, "S-%llu is idle, and its server %s", (unsigned long long)sv->id,
			 s->n_pending ? "still owes an answer to a request" : "has part of a message");
		return false;
	}
	return true;
}

bool fz_server_adopt(int fd)
{
	for (int i = 0; i < FZ_SERVERS; i++) {
		struct fserver *s = &servers[i];
		if (s->fd >= 0)
			continue;
		s->fd = fd;
		s->phase = FS_READY;
		s->status = 'I';
		return true;
	}
	return false;
}

void fz_servers_reset(void)
{
	for (int i = 0; i < FZ_SERVERS; i++) {
		memset(&servers[i], 0, sizeof(servers[i]));
		servers[i].fd = -1;
	}
	next_pid = 0;
}

void fz_servers_close(void)
{
	for (int i = 0; i < FZ_SERVERS; i++)
		hang_up(&servers[i]);
}

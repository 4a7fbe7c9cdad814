/* pgcrew — fuzz target: the stream transport (src/net/stream.c) alone.
 * Three streams on socketpairs and a private event base, as in
 * test/unit/test_stream.c: A reads messages of input-chosen sizes (up to a
 * few hundred kB) written in input-chosen pieces, and its owner, scripted
 * by the input, forwards, skips, consumes, needs them whole or in part,
 * pauses, flushes, rewrites their heads longer or shorter and writes
 * pooler messages to its peer, B or C; the destinations read or stall, and
 * go mid-message. Both batching modes, reads outside the batch (ops that
 * are not plain_ops, as a TLS stream's) and stream_read_now before the
 * turn's end. Asserted: the buffer bounds and counts after every turn; the
 * owner is offered each message once in order, its bytes as sent; what
 * reaches a destination is exactly the forwarded messages with their
 * rewrites, the pooler's messages only between whole ones and never ahead
 * of a message forwarded before them, or a prefix of that when the stream
 * was torn or the destination went; A takes in everything it is sent; no
 * buffer is left lent. Input format and seeds: test/fuzz/stream_seeds.py. */
#include "fuzz.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stream.h"
#include "uring.h"

#define MAX_MSGS 40
#define MAX_WIRE (1u << 20)       /* bytes of messages per input */
#define MAX_INJECTED 64
#define MAX_DRIVER_OPS 96
#define FINAL_TURNS 3000          /* the last phase's bound; it ends when nothing moves */
#define QUIET_TURNS 8
#define SMALL_SOCKBUF 4096
#define INJ_TYPE 'i'              /* pooler messages; forwarded ones are upper case */
#define INJ_LEN 9
#define REWRITE_FILL 0xEE

enum act {
	ACT_FORWARD,
	ACT_SKIP,
	ACT_CONSUME_NOW,      /* CONSUMED at the first offer, whatever is buffered */
	ACT_CONSUME_FULL,     /* NEED_FULL until whole, then CONSUMED */
	ACT_FULL_FORWARD,     /* NEED_FULL until whole, then FORWARD */
	ACT_MORE_FORWARD,     /* NEED_MORE until `want` bytes, then FORWARD */
	ACT_PAUSE,            /* PAUSE once; the driver resumes */
	ACT_FLUSH,            /* FLUSH once, then FORWARD */
	ACT_REWRITE,          /* the first `want` bytes become `new_len` (FLUSH when no room) */
	ACT_INJECT_FLUSHED,   /* FLUSH until nothing is queued, a pooler message, FORWARD */
	ACT_INJECT_NOW,       /* a pooler message at once, then FORWARD */
	ACT_CLOSE,            /* stream_close inside the callback */
	ACT_COUNT
};

/* One message of A's input and what its owner does with it. */
struct plan {
	uint32_t off, len;        /* where in wire; wire bytes, type byte included */
	enum act act;
	uint32_t want;            /* MORE_FORWARD: bytes wanted; REWRITE: old head length */
	uint32_t new_len;         /* REWRITE: the new head's length */
	bool asked;               /* PAUSE/FLUSH said once */
};

/* B or C: what was forwarded to it and written for it, what arrived. */
struct dest {
	struct stream s;
	int fd;                   /* the far end, read by the driver */
	bool reading;
	bool gone;                /* forgotten or closed: its output may stop anywhere */
	struct bytes out;         /* arrived at the far end */
	struct bytes fwd;         /* the forwarded messages as they must arrive */
	size_t fwd_ends[MAX_MSGS];
	size_t n_fwd;
	uint32_t inj_num[MAX_INJECTED];  /* the pooler messages written to it, by number */
	size_t inj_after[MAX_INJECTED];  /* forwarded messages decided before each */
	size_t n_inj;
};

static struct event_base *base;
static struct {
	struct stream s;
	int fd;                   /* the far end the driver writes */
	bool read_now;            /* stream_read_now before each turn's end */
} src;
static struct dest dests[2];
static struct plan plans[MAX_MSGS];
static size_t n_plans, decided;
static struct bytes wire;     /* A's input: every message, in order */
static size_t written;
static uint32_t next_injected;
static bool ring;             /* uring_init gave a ring */
static bool trace;            /* FUZZ_STREAM_LOG: what each destination got */

static NORETURN PRINTF(1, 2) void fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fuzz_stream: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static struct dest *dest_of(const struct stream *s)
{
	for (int i = 0; i < 2; i++)
		if (s == &dests[i].s)
			return &dests[i];
	return NULL;
}

/* ---- the invariants ---- */

static size_t check_stream(const struct stream *s, const char *name)
{
	const struct iobuf *b = s->buf;
	if (s->out_sent > s->out.len || s->out_mark > s->out.len)
		fail("%s: out queue offsets %u/%u past its %zu bytes", name, s->out_sent, s->out_mark,
		     s->out.len);
	if (s->closed && (b || s->fd >= 0))
		fail("%s: closed with a buffer or a socket", name);
	if (!b)
		return 0;
	if (b->done > b->parse || b->parse > b->recv || b->recv > STREAM_HEADROOM + b->cap)
		fail("%s: buffer offsets done %u parse %u recv %u, capacity %u + %d", name, b->done,
		     b->parse, b->recv, b->cap, STREAM_HEADROOM);
	return 1;
}

/* After every turn: bounds, and the cache lends one buffer per stream
 * holding one, no more. */
static void check_all(void)
{
	size_t held = check_stream(&src.s, "A") + check_stream(&dests[0].s, "B") +
		      check_stream(&dests[1].s, "C");
	if (stream_cache_used() != held)
		fail("%zu buffers lent, %zu held by the streams", stream_cache_used(), held);
}

/* ---- what the destinations must get ---- */

static void injected_bytes(uint8_t msg[INJ_LEN], uint32_t k)
{
	msg[0] = INJ_TYPE;
	put32(msg + 1, INJ_LEN - 1);
	put32(msg + 5, k);
}

/* A pooler message for d (from the owner or the driver); expected when
 * the stream took it. */
static void inject(struct dest *d)
{
	uint8_t msg[INJ_LEN];
	if (!d || d->gone || d->n_inj == MAX_INJECTED)
		return;
	injected_bytes(msg, next_injected);
	if (!stream_write_raw(&d->s, msg, sizeof(msg)))
		return;
	d->inj_num[d->n_inj] = next_injected++;
	d->inj_after[d->n_inj++] = d->n_fwd;
}

/* Message p is forwarded to A's peer as head (new_len bytes replacing
 * its first old_len) plus the rest. */
static void expect_forward(const struct plan *p, const uint8_t *head, uint32_t old_len, uint32_t new_len)
{
	struct dest *d = src.s.peer ? dest_of(src.s.peer) : NULL;
	if (!d || d->s.closed)
		return;
	bytes_add(&d->fwd, head, new_len);
	bytes_add(&d->fwd, wire.p + p->off + old_len, p->len - old_len);
	d->fwd_ends[d->n_fwd++] = d->fwd.len;
}

/* The message a forwarded one starts at in d's output: its length. */
static size_t fwd_len(const struct dest *d, size_t i)
{
	return d->fwd_ends[i] - (i ? d->fwd_ends[i - 1] : 0);
}

/* One item of the output at *pos: the next forwarded message, or the next
 * injected one where it may stand. False at a prefix that ends early. */
static bool match_item(const struct dest *d, size_t *pos, size_t *f, size_t *k, const char *name)
{
	const uint8_t *o = d->out.p + *pos;
	size_t left = d->out.len - *pos, n;
	const uint8_t *want;
	uint8_t msg[INJ_LEN];
	if (o[0] == INJ_TYPE) {
		if (*k == d->n_inj)
			fail("%s: a pooler message at byte %zu, none was written", name, *pos);
		/* A destination let go of drops what was forwarded to it and not
		 * sent yet; what its owner wrote behind that still goes. */
		if (d->inj_after[*k] > *f && d->gone)
			*f = d->inj_after[*k];
		if (d->inj_after[*k] > *f)
			fail("%s: pooler message %zu at byte %zu, ahead of forwarded message %zu", name,
			     *k, *pos, *f);
		injected_bytes(msg, d->inj_num[(*k)++]);
		want = msg;
		n = INJ_LEN;
	} else {
		if (*f == d->n_fwd)
			fail("%s: %zu bytes at byte %zu after every forwarded message", name, left, *pos);
		n = fwd_len(d, *f);
		want = d->fwd.p + d->fwd_ends[*f] - n;
		(*f)++;
	}
	size_t cmp = left < n ? left : n;
	if (memcmp(o, want, cmp) != 0)
		fail("%s: bytes %zu..%zu are not the message expected there", name, *pos, *pos + cmp);
	*pos += cmp;
	return cmp == n;
}

/* d's output against what it must be: all of it, or a prefix of it when
 * d went or its stream was torn. */
static void check_output(const struct dest *d, const char *name)
{
	size_t pos = 0, f = 0, k = 0;
	bool prefix = d->gone || d->s.torn || d->s.closed;
	while (pos < d->out.len) {
		if (match_item(d, &pos, &f, &k, name))
			continue;
		if (!prefix)
			fail("%s: the output ends inside a message", name);
		return;
	}
	if (!prefix && (f < d->n_fwd || k < d->n_inj))
		fail("%s: %zu of %zu forwarded and %zu of %zu pooler messages arrived", name, f, d->n_fwd,
		     k, d->n_inj);
}

/* ---- A's owner, as the input scripts it ---- */

static enum stream_action decided_as(enum stream_action a)
{
	decided++;
	return a;
}

static enum stream_action forward(const struct plan *p)
{
	expect_forward(p, NULL, 0, 0);
	return decided_as(SA_FORWARD);
}

/* The message's first want bytes become new_len bytes: its type, its new
 * length, filler. */
static enum stream_action rewrite(const struct plan *p, size_t avail)
{
	uint8_t head[STREAM_HEADROOM + 128];
	uint32_t old_len = p->want, new_len = p->new_len;
	if (avail < old_len)
		return SA_NEED_MORE;
	if (new_len > old_len && new_len - old_len > stream_head_room(&src.s)) {
		if (stream_has_pending_forward(&src.s))
			return SA_FLUSH;
		fail("A: %u bytes of head room with nothing queued", stream_head_room(&src.s));
	}
	head[0] = wire.p[p->off];
	put32(head + 1, p->len - old_len + new_len - 1);
	memset(head + 5, REWRITE_FILL, new_len - 5);
	uint8_t *at = stream_rewrite_head(&src.s, old_len, new_len);
	if (!at)
		fail("A: no rewrite of %u into %u bytes with %u of head room", old_len, new_len,
		     stream_head_room(&src.s));
	memcpy(at, head, new_len);
	expect_forward(p, head, old_len, new_len);
	return decided_as(SA_FORWARD);
}

static enum stream_action decide(struct plan *p, size_t avail)
{
	bool whole = avail >= p->len;
	switch (p->act) {
	case ACT_SKIP: return decided_as(SA_SKIP);
	case ACT_CONSUME_NOW: return decided_as(SA_CONSUMED);
	case ACT_CONSUME_FULL: return whole ? decided_as(SA_CONSUMED) : SA_NEED_FULL;
	case ACT_FULL_FORWARD: return whole ? forward(p) : SA_NEED_FULL;
	case ACT_MORE_FORWARD: return avail >= p->want ? forward(p) : SA_NEED_MORE;
	case ACT_REWRITE: return rewrite(p, avail);
	case ACT_PAUSE:
	case ACT_FLUSH:
		if (p->asked)
			return forward(p);
		p->asked = true;
		return p->act == ACT_PAUSE ? SA_PAUSE : SA_FLUSH;
	case ACT_INJECT_FLUSHED:
		if (stream_has_pending_forward(&src.s))
			return SA_FLUSH;
		inject(src.s.peer ? dest_of(src.s.peer) : NULL);
		return forward(p);
	case ACT_INJECT_NOW:
		inject(src.s.peer ? dest_of(src.s.peer) : NULL);
		return forward(p);
	case ACT_CLOSE:
		stream_close(&src.s);
		return decided_as(SA_STOP);
	default:
		return forward(p);
	}
}

/* Each message is offered in order, with the bytes it was sent with. */
static enum stream_action on_pkt(struct stream *s, const struct pkt_hdr *h, const uint8_t *data,
				 size_t avail)
{
	if (s != &src.s)
		fail("a destination was offered a message");
	if (decided == n_plans)
		fail("A: a message offered after the last one (%zu)", n_plans);
	struct plan *p = &plans[decided];
	if (h->len != p->len || h->type != wire.p[p->off])
		fail("A: message %zu offered as '%c' of %u bytes, sent as '%c' of %u", decided, h->type,
		     h->len, wire.p[p->off], p->len);
	if (memcmp(data, wire.p + p->off, avail < p->len ? avail : p->len) != 0)
		fail("A: message %zu offered with other bytes than it was sent with", decided);
	return decide(p, avail);
}

static void on_event(struct stream *s, enum stream_event ev)
{
	struct dest *d = dest_of(s);
	if (ev != SE_EOF && ev != SE_ERROR)
		return;
	if (d)
		d->gone = true;
	stream_close(s);
}

/* Not plain_ops: A is read at once, outside the turn's receive batch, as
 * a TLS stream is (its forwards still wait for the send batch). */
static ssize_t own_recv(struct stream *s, void *buf, size_t len)
{
	return recv(s->fd, buf, len, 0);
}

static ssize_t own_send(struct stream *s, const void *buf, size_t len)
{
	return send(s->fd, buf, len, MSG_NOSIGNAL);
}

static const struct stream_ops own_ops = { own_recv, own_send };

/* ---- the input: the world, the messages ---- */

enum flags {
	F_BATCHING = 0x01,        /* io_uring batches, where the kernel gives a ring */
	F_OWN_OPS = 0x02,         /* A read outside the batch */
	F_READ_NOW = 0x04,        /* stream_read_now(A) before every turn's end */
	F_SMALL_B = 0x08,         /* small socket buffers toward B */
	F_SMALL_C = 0x10,
	F_SMALL_A = 0x20,         /* and into A */
	F_MAX_WHOLE = 0x40,       /* max_whole 100000 */
	F_BIG_BUF = 0x80,         /* 32 kB buffers (else 16 kB) */
};

static void small_bufs(int send_fd, int recv_fd)
{
	int v = SMALL_SOCKBUF;
	(void)setsockopt(send_fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	(void)setsockopt(recv_fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

static void open_end(struct stream *s, int *far)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		fail("socketpair: %s", strerror(errno));
	stream_init(s, sv[0], NULL, on_pkt, on_event);
	*far = sv[1];
}

static void open_world(uint8_t flags)
{
	memset(&src, 0, sizeof(src));
	memset(dests, 0, sizeof(dests));
	open_end(&src.s, &src.fd);
	for (int i = 0; i < 2; i++) {
		open_end(&dests[i].s, &dests[i].fd);
		dests[i].reading = true;
	}
	src.s.peer = &dests[0].s;
	src.read_now = flags & F_READ_NOW;
	if (flags & F_OWN_OPS)
		src.s.ops = &own_ops;
	if (flags & F_MAX_WHOLE)
		src.s.max_whole = 100000;
	if (flags & F_SMALL_A)
		small_bufs(src.fd, src.s.fd);
	if (flags & F_SMALL_B)
		small_bufs(dests[0].s.fd, dests[0].fd);
	if (flags & F_SMALL_C)
		small_bufs(dests[1].s.fd, dests[1].fd);
	stream_start_reading(&src.s);
}

/* Two bytes: a size class and a value. */
static uint32_t msg_len(struct input *in, uint32_t bufsize)
{
	uint8_t c = in_byte(in), x = in_byte(in);
	uint32_t v = (uint32_t)(c & 31) << 8 | x;
	switch (c >> 5) {
	case 0:
	case 1: return 5 + (x & 63);
	case 2: return 5 + v;                          /* up to 8 kB */
	case 3: return bufsize - 128 + x;              /* about the buffer's size */
	case 4: return bufsize - 1024 - 128 + x;       /* about a full buffer's last read */
	case 5: return 5 + v * 8;                      /* up to 64 kB */
	case 6: return 65536 + v * 32;                 /* up to 320 kB */
	default: return 5 + v * 2;
	}
}

static void add_message(uint32_t len)
{
	struct plan *p = &plans[n_plans];
	uint8_t hdr[5], fill[256];
	uint32_t i = (uint32_t)n_plans++;
	p->off = (uint32_t)wire.len;
	p->len = len;
	hdr[0] = (uint8_t)('A' + i % 26);
	put32(hdr + 1, len - 1);
	bytes_add(&wire, hdr, 5);
	for (size_t k = 0; k < sizeof(fill); k++)
		fill[k] = (uint8_t)(i * 31 + k * 7);
	for (uint32_t o = 5; o < len; o += sizeof(fill))
		bytes_add(&wire, fill, len - o < sizeof(fill) ? len - o : sizeof(fill));
}

/* Five bytes a message: its size (two), what the owner does, two
 * parameters (the bytes NEED_MORE waits for or the old head's length;
 * the new head's). */
static void read_plans(struct input *in, uint32_t bufsize)
{
	size_t n = 1 + in_pick(in, MAX_MSGS);
	for (size_t i = 0; i < n && in->n > 0; i++) {
		uint32_t len = msg_len(in, bufsize);
		uint8_t act = in_byte(in), a = in_byte(in), b = in_byte(in);
		if (wire.len + len > MAX_WIRE)
			len = 5 + a % 32;
		add_message(len);
		struct plan *p = &plans[n_plans - 1];
		p->act = (enum act)(act % (ACT_COUNT + 4));   /* the rest: FORWARD */
		uint32_t head = 5 + a % 96;
		p->want = p->act == ACT_MORE_FORWARD ? 1 + (uint32_t)a * len / 256 : head;
		if (p->want > len)
			p->want = len;
		p->new_len = 5 + b % 96;
		if (p->new_len > p->want + STREAM_HEADROOM)
			p->new_len = p->want + STREAM_HEADROOM;
	}
}

/* ---- the driver: writes, loop turns, destinations reading or not ---- */

static bool src_shut;         /* the far end of A shut for writing (EOF) */

static void write_some(size_t max)
{
	size_t n = wire.len - written;
	if (src_shut || n == 0)
		return;
	ssize_t k = send(src.fd, wire.p + written, n < max ? n : max, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (k > 0)
		written += (size_t)k;
}

static void drain(struct dest *d)
{
	uint8_t tmp[65536];
	ssize_t n;
	while ((n = recv(d->fd, tmp, sizeof(tmp), MSG_DONTWAIT)) > 0)
		bytes_add(&d->out, tmp, (size_t)n);
}

/* One loop turn as the worker runs it, then the checks. */
static void turn(void)
{
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	if (src.read_now && !src.s.closed)
		stream_read_now(&src.s);
	stream_turn_end();
	check_all();
	for (int i = 0; i < 2; i++)
		if (dests[i].reading)
			drain(&dests[i]);
}

/* A piece of the input to write: one byte, after the op's argument. */
static size_t chunk_len(unsigned arg, uint8_t b)
{
	if (arg < 4)
		return 1 + (size_t)b;
	if (arg < 8)
		return 1 + ((size_t)(arg & 3) << 8 | b);
	if (arg < 12)
		return 1 + (size_t)b * 64;
	return arg < 15 ? 1 + (size_t)b * 1024 : SIZE_MAX;
}

/* d's owner lets go of it: A forgets it (and it closes, when it leaves);
 * A's peer is the other destination, if that is still there. */
static void let_go(struct dest *d, bool leave)
{
	struct dest *other = &dests[d == &dests[0]];
	if (d->gone)
		return;
	d->gone = true;
	if (!src.s.closed)
		stream_forget_peer(&src.s, &d->s);
	if (leave)
		stream_close(&d->s);
	if (src.s.peer == &d->s)
		src.s.peer = other->gone ? NULL : &other->s;
}

enum driver_op {
	D_WRITE, D_WRITE2, D_WRITE3, D_TURNS, D_TURNS2, D_READING, D_RESUME, D_INJECT,
	D_FORGET, D_LEAVE, D_CLOSE_A, D_EOF_A, D_WRITE_ALL, D_TURNS3, D_TURNS4, D_TURNS5,
};

/* One byte: what (low 4 bits) and an argument (high 4); writes take one
 * byte more. */
static void drive(struct input *in)
{
	uint8_t o = in_byte(in);
	unsigned arg = o >> 4;
	struct dest *d = &dests[arg & 1];
	switch ((enum driver_op)(o & 15)) {
	case D_WRITE: case D_WRITE2: case D_WRITE3: write_some(chunk_len(arg, in_byte(in))); break;
	case D_READING: d->reading = !d->reading; break;
	case D_RESUME: if (!src.s.closed && src.s.paused) stream_resume(&src.s); break;
	case D_INJECT: inject(d); break;
	case D_FORGET: let_go(d, false); break;
	case D_LEAVE: let_go(d, true); break;
	case D_CLOSE_A: stream_close(&src.s); break;
	case D_EOF_A:
		if (!src_shut)
			shutdown(src.fd, SHUT_WR);
		src_shut = true;
		break;
	case D_WRITE_ALL: write_some(SIZE_MAX); break;
	default:
		for (unsigned i = 0; i <= arg; i++)
			turn();
		break;
	}
}

static size_t progress(void)
{
	return written + (size_t)src.s.bytes_in + decided + dests[0].out.len + dests[1].out.len;
}

/* Everything written, A resumed, the destinations reading, until nothing
 * moves any more. */
static void settle(void)
{
	dests[0].reading = dests[1].reading = true;
	for (int i = 0, quiet = 0; i < FINAL_TURNS && quiet < QUIET_TURNS; i++) {
		size_t before = progress();
		write_some(SIZE_MAX);
		if (!src.s.closed && src.s.paused)
			stream_resume(&src.s);
		turn();
		quiet = progress() == before ? quiet + 1 : 0;
	}
}

/* A still open has taken in and decided every message (none stuck in a
 * full buffer); then it hears EOF, and every destination has what it
 * must. */
static void finish(void)
{
	settle();
	if (!src.s.closed && !src_shut &&
	    (written < wire.len || decided < n_plans || stream_unprocessed(&src.s) || src.s.pkt_remain))
		fail("A: stuck with %zu of %zu bytes written, %zu of %zu messages decided, %zu unread",
		     written, wire.len, decided, n_plans, stream_unprocessed(&src.s));
	if (!src_shut)
		shutdown(src.fd, SHUT_WR);
	src_shut = true;
	settle();
	for (int i = 0; i < 2 && trace; i++)
		fprintf(stderr, "fuzz_stream: %c: %zu forwarded and %zu pooler messages expected, %zu bytes"
			" arrived%s%s\n", "BC"[i], dests[i].n_fwd, dests[i].n_inj, dests[i].out.len,
			dests[i].s.torn ? ", torn" : "", dests[i].gone ? ", gone" : "");
	check_output(&dests[0], "B");
	check_output(&dests[1], "C");
}

static void close_world(void)
{
	stream_close(&src.s);
	close(src.fd);
	for (int i = 0; i < 2; i++) {
		stream_close(&dests[i].s);
		close(dests[i].fd);
		bytes_free(&dests[i].out);
		bytes_free(&dests[i].fwd);
	}
	bytes_free(&wire);
	if (stream_cache_used() != 0)
		fail("%zu buffers still lent after every stream closed", stream_cache_used());
	stream_cache_free();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	if (!base)
		abort();
	stream_base = base;
	ring = uring_init() == URING_READY;
	trace = getenv("FUZZ_STREAM_LOG") != NULL;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	uint8_t flags = in_byte(&in);
	uint32_t bufsize = flags & F_BIG_BUF ? 32768 : 16384;

	stream_cache_init(bufsize);
	stream_set_batching(ring && (flags & F_BATCHING));
	n_plans = decided = written = 0;
	next_injected = 0;
	src_shut = false;
	memset(plans, 0, sizeof(plans));
	read_plans(&in, bufsize);
	open_world(flags);
	for (int i = 0; i < MAX_DRIVER_OPS && in.n > 0; i++)
		drive(&in);
	finish();
	close_world();
	stream_set_batching(false);
	return 0;
}

/* pgcrew — the session fuzz target's fakes' I/O: a tolerant reader of
 * what the pooler sends (whole messages; larger ones dropped, their filler
 * checked byte by byte on a client's side), and the output queue every
 * fake sends through: in the order decided, held back and handed on in
 * pieces, through TLS once a client has it up, kept while the socket is
 * full. */
#include "fuzz_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define OUTQ_MAX (4u << 20)     /* held or waiting bytes; beyond, the peer gave up */

uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* ---- filler ---- */

void fill_add(struct bytes *b, size_t n)
{
	uint8_t fill[4096];
	if (n >= FILL_MAGIC_LEN) {
		bytes_add(b, FILL_MAGIC, FILL_MAGIC_LEN);
		n -= FILL_MAGIC_LEN;
	}
	memset(fill, FILL, sizeof(fill));
	for (size_t k; n > 0; n -= k) {
		k = n < sizeof(fill) ? n : sizeof(fill);
		bytes_add(b, fill, k);
	}
}

static bool has_magic(const uint8_t *body)
{
	return memcmp(body, FILL_MAGIC, FILL_MAGIC_LEN) == 0;
}

/* Bytes at offset `at` of a filler message's body onwards: filler only. */
static void check_fill(const uint8_t *b, size_t n, size_t at)
{
	for (size_t i = 0; i < n; i++) {
		if (at + i < FILL_MAGIC_LEN || b[i] == FILL)
			continue;
		fprintf(stderr, "fuzz_session: byte %zu of a relayed filler message is 0x%02x: a message "
			"of the pooler's inside a relayed one\n", at + i, b[i]);
		abort();
	}
}

/* ---- reading what the pooler sends ---- */

/* A message larger than the buffer: dropped as it comes (checked, when
 * filler); its body's first bytes say which, so they are waited for. */
static size_t drop_large(struct reader *r, size_t hdr, size_t whole)
{
	if (r->typed && r->check_fill && r->len < hdr + FILL_MAGIC_LEN)
		return 0;
	r->skip = whole;
	r->skipped = 0;
	r->skip_fill = r->typed && r->check_fill && has_magic(r->buf + hdr);
	return 0;
}

/* The next whole message at the front of the buffer, or 0 bytes. */
static size_t next_msg(struct reader *r, msg_fn fn, void *arg)
{
	if (r->answers > 0 && r->len >= 1 && (r->buf[0] == 'N' || r->buf[0] == 'S')) {
		r->answers--;
		fn(arg, ' ', r->buf, 1);
		return 1;
	}
	r->answers = 0;
	size_t hdr = r->typed ? 5 : 4;
	if (r->len < hdr)
		return 0;
	uint32_t len = get32(r->buf + hdr - 4);
	if (len < 4) {
		r->len = 0;          /* no message: nothing after it can be framed */
		return 0;
	}
	size_t whole = hdr + len - 4;
	if (whole > sizeof(r->buf))
		return drop_large(r, hdr, whole);
	size_t have = r->len < whole ? r->len : whole;
	if (r->typed && r->check_fill && have >= hdr + FILL_MAGIC_LEN && has_magic(r->buf + hdr))
		check_fill(r->buf + hdr, have - hdr, 0);
	if (r->len < whole)
		return 0;
	char type = r->typed ? (char)r->buf[0] : 0;
	r->typed = true;
	fn(arg, type, r->buf + hdr, whole - hdr);
	return whole;
}

static void drop(struct reader *r, size_t n)
{
	r->len -= n;
	memmove(r->buf, r->buf + n, r->len);
}

/* Bytes of a dropped message; a filler one's past its header and magic
 * are checked. */
static void skip_some(struct reader *r)
{
	size_t n = r->skip < r->len ? r->skip : r->len, head = 5 + FILL_MAGIC_LEN;
	if (r->skip_fill) {
		size_t k = r->skipped < head ? head - r->skipped : 0;
		if (k < n)
			check_fill(r->buf + k, n - k, r->skipped + k - 5);
	}
	drop(r, n);
	r->skip -= n;
	r->skipped += n;
}

static void dispatch(struct reader *r, msg_fn fn, void *arg)
{
	for (;;) {
		if (r->skip) {
			skip_some(r);
			if (r->skip)
				return;
		}
		size_t n = next_msg(r, fn, arg);
		if (n == 0 && !r->skip)
			return;
		drop(r, n);
	}
}

void reader_feed(struct reader *r, const uint8_t *b, size_t n, msg_fn fn, void *arg)
{
	while (n > 0) {
		size_t k = sizeof(r->buf) - r->len;
		if (k > n)
			k = n;
		memcpy(r->buf + r->len, b, k);
		r->len += k;
		b += k;
		n -= k;
		dispatch(r, fn, arg);
		if (k == 0)
			return;         /* a buffer full of a message it cannot frame */
	}
}

ssize_t reader_drain(struct reader *r, int fd, msg_fn fn, void *arg)
{
	ssize_t total = 0;
	for (;;) {
		ssize_t n = recv(fd, r->buf + r->len, sizeof(r->buf) - r->len, MSG_DONTWAIT);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? total : -1;
		total += n;
		r->len += (size_t)n;
		dispatch(r, fn, arg);
	}
}

bool reader_mid_message(const struct reader *r)
{
	return r->skip > 0 || r->len > 0;
}

/* ---- the output queue ---- */

void outq_flush(struct outq *q, int fd)
{
	while (fd >= 0 && q->wire.len > 0) {
		ssize_t n = send(fd, q->wire.p, q->wire.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				q->wire.len = 0;      /* the pooler is gone: its EOF comes */
			return;
		}
		bytes_drop(&q->wire, (size_t)n);
	}
}

static void hand_on(struct outq *q, int fd, const void *b, size_t n)
{
	if (q->tls) {
		if (!fz_tls_write(q->tls, b, n))
			return;
		fz_tls_take(q->tls, &q->wire);
	} else if (q->wire.len + n <= OUTQ_MAX) {
		bytes_add(&q->wire, b, n);
	}
	outq_flush(q, fd);
}

void outq_hold(struct outq *q, const void *b, size_t n)
{
	if (q->held.len + n <= OUTQ_MAX)
		bytes_add(&q->held, b, n);
}

void outq_send(struct outq *q, int fd, const void *b, size_t n)
{
	if (q->held.len > 0)
		outq_hold(q, b, n);
	else
		hand_on(q, fd, b, n);
}

void outq_piece(struct outq *q, int fd, size_t n)
{
	if (n > q->held.len)
		n = q->held.len;
	if (n == 0 || fd < 0)
		return;
	hand_on(q, fd, q->held.p, n);
	bytes_drop(&q->held, n);
}

void outq_raw(struct outq *q, int fd, const void *b, size_t n)
{
	if (q->wire.len + n <= OUTQ_MAX)
		bytes_add(&q->wire, b, n);
	outq_flush(q, fd);
}

void outq_free(struct outq *q)
{
	bytes_free(&q->held);
	bytes_free(&q->wire);
	q->tls = NULL;
}

size_t piece_len(struct input *in)
{
	uint8_t m = in_byte(in), x = in_byte(in);
	switch (m >> 6) {
	case 0: return 1 + (m & 63u);
	case 1: return 1 + ((size_t)(m & 63u) << 8 | x);
	case 2: return (1 + (size_t)(m & 63u)) * 4096;
	default: return SIZE_MAX;
	}
}

/* ---- building ---- */

void out_init(struct out *o)
{
	pktbuf_init_fixed(&o->pb, o->storage, sizeof(o->storage));
}

void send_bytes(int fd, const void *b, size_t n)
{
	if (fd >= 0 && n > 0)
		(void)send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void out_send(struct out *o, int fd)
{
	if (!pktbuf_failed(&o->pb))
		send_bytes(fd, o->pb.buf, o->pb.len);
	pktbuf_reset(&o->pb);
}

void out_queue(struct out *o, struct outq *q, int fd)
{
	if (!pktbuf_failed(&o->pb) && fd >= 0)
		outq_send(q, fd, o->pb.buf, o->pb.len);
	pktbuf_reset(&o->pb);
}

void out_message(struct out *o, struct input *in, const char *types)
{
	size_t nt = strlen(types);
	uint8_t t = in_byte(in);
	const uint8_t *b;
	size_t n = in_take(in, &b, in_byte(in));
	out_init(o);
	pktbuf_begin(&o->pb, t < 2 * nt ? (uint8_t)types[t / 2] : t);
	if (n >= FILL_MAGIC_LEN && has_magic(b)) {
		pktbuf_put_u8(&o->pb, (uint8_t)(b[0] ^ 1));     /* only the fakes' filler has it */
		b++;
		n--;
	}
	pktbuf_put_bytes(&o->pb, b, n);
	pktbuf_finish(&o->pb);
}

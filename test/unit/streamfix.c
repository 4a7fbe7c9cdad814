/* pgcrew — the stream tests' fixture (test_stream.c, test_stream_tls.c):
 * byte strings of generated messages, a scripted stream owner that records
 * every callback and does per message what the test's script says, and the
 * checks on what reached a far end. */
#include "streamfix.h"
#include "uring.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

const uint8_t injected_msg[9] = { 'i', 0, 0, 0, 8, 1, 2, 3, 4 };

/* ---- byte buffers and message generation ---- */

void bytes_add(struct bytes *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		assert_non_null(b->p);
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void bytes_free(struct bytes *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static uint8_t pattern(uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 31u + i * 7u + (i >> 8));
}

void add_msg(struct bytes *b, uint8_t type, uint32_t seq, uint32_t len)
{
	uint32_t word = len - 1;
	uint8_t hdr[9] = { type, (uint8_t)(word >> 24), (uint8_t)(word >> 16), (uint8_t)(word >> 8),
			   (uint8_t)word, (uint8_t)(seq >> 24), (uint8_t)(seq >> 16),
			   (uint8_t)(seq >> 8), (uint8_t)seq };
	assert_true(len >= 9);
	bytes_add(b, hdr, 9);
	for (size_t i = 9; i < len; i++) {
		uint8_t v = pattern(seq, i);
		bytes_add(b, &v, 1);
	}
}

uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- the scripted owner ---- */

static enum step step_for(const struct end *e)
{
	return e->msg_idx < e->n_script ? e->script[e->msg_idx] : e->dflt;
}

static void record_call(struct end *e, const struct pkt_hdr *h, const uint8_t *data, size_t avail)
{
	assert_true(e->n_calls < MAX_CALLS);
	struct call *c = &e->calls[e->n_calls++];
	c->type = h->type;
	c->len = h->len;
	c->hdr_len = h->hdr_len;
	c->avail = avail;
	c->seq = avail >= h->hdr_len + 4 ? (int64_t)be32(data + h->hdr_len) : -1;
}

static enum stream_action decided(struct end *e, enum stream_action act)
{
	e->msg_idx++;
	return act;
}

/* The message's type, length and sequence number stay; GROW adds filler
 * after them, SHRINK drops the pattern bytes that follow them. */
static enum stream_action rewrite_step(struct end *e, const struct pkt_hdr *h,
				       const uint8_t *data, size_t avail)
{
	bool grow = step_for(e) == STEP_GROW;
	uint32_t old_len = grow ? 9 : 9 + SHRINK_BY, new_len = grow ? 9 + GROW_BY : 9;
	uint8_t head[9 + GROW_BY];
	if (avail < old_len)
		return SA_NEED_MORE;
	uint32_t word = h->len - old_len + new_len - 1;
	memcpy(head, data, 9);
	head[1] = (uint8_t)(word >> 24);
	head[2] = (uint8_t)(word >> 16);
	head[3] = (uint8_t)(word >> 8);
	head[4] = (uint8_t)word;
	memset(head + 9, 0xEE, GROW_BY);
	uint8_t *at = stream_rewrite_head(&e->s, old_len, new_len);
	if (!at)
		return SA_FLUSH;
	memcpy(at, head, new_len);
	return decided(e, SA_FORWARD);
}

enum stream_action on_pkt(struct stream *s, const struct pkt_hdr *h,
				 const uint8_t *data, size_t avail)
{
	struct end *e = s->owner;

	record_call(e, h, data, avail);
	switch (step_for(e)) {
	case STEP_FORWARD:
		return decided(e, SA_FORWARD);
	case STEP_SKIP:
		return decided(e, SA_SKIP);
	case STEP_CONSUME_NOW:
		return decided(e, SA_CONSUMED);
	case STEP_MORE_CONSUME:
	case STEP_CONSUME:
		if (avail < h->len)
			return step_for(e) == STEP_MORE_CONSUME ? SA_NEED_MORE : SA_NEED_FULL;
		bytes_add(&e->consumed, data, h->len);
		return decided(e, SA_CONSUMED);
	case STEP_FULL_FORWARD:
		return avail < h->len ? SA_NEED_FULL : decided(e, SA_FORWARD);
	case STEP_PAUSE_ONCE:
		if (e->paused_for != e->msg_idx + 1) {
			e->paused_for = e->msg_idx + 1;
			return SA_PAUSE;
		}
		return decided(e, SA_FORWARD);
	case STEP_CLOSE:
		stream_close(s);
		return decided(e, SA_STOP);
	case STEP_GROW:
	case STEP_SHRINK:
		return rewrite_step(e, h, data, avail);
	case STEP_INJECT:
		if (stream_has_pending_forward(s))
			return SA_FLUSH;
		assert_true(stream_write_raw(s->peer, injected_msg, sizeof(injected_msg)));
		return decided(e, SA_FORWARD);
	case STEP_CLOSE_PEER: {
		struct pktbuf pb;
		notices(&pb, 1);
		assert_true(stream_write(s->peer, &pb));
		pktbuf_free(&pb);
		stream_forget_peer(s, s->peer);
		stream_consume(s, h->len);
		return decided(e, SA_STOP);
	}
	}
	fail();
	return SA_STOP;
}

void on_event(struct stream *s, enum stream_event ev)
{
	struct end *e = s->owner;

	assert_true(ev < SE_COUNT);
	if (e->n_events++ == 0)
		e->first_event = ev;
	e->ev_count[ev]++;
	if (ev == SE_ERROR)
		e->last_errmsg = s->errmsg;
	if ((ev == SE_EOF || ev == SE_ERROR) && !e->keep_open)
		stream_close(s);
}

size_t count_events(const struct end *e, enum stream_event ev)
{
	return e->ev_count[ev];
}

/* ---- a stream and the test's end of its socket ---- */

void end_attach(struct end *e, int stream_fd, int test_fd)
{
	stream_init(&e->s, stream_fd, e, on_pkt, on_event);
	e->fd = test_fd;
	e->calls = calloc(MAX_CALLS, sizeof(*e->calls));
	assert_non_null(e->calls);
	e->dflt = STEP_FORWARD;
}

void end_open(struct end *e)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	end_attach(e, sv[0], sv[1]);
}

void end_close(struct end *e)
{
	stream_close(&e->s);
	if (e->fd >= 0)
		close(e->fd);
	free(e->calls);
	bytes_free(&e->consumed);
}

void small_sockbufs(struct end *e)
{
	int v = SMALL_SOCKBUF;
	assert_int_equal(setsockopt(e->s.fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), 0);
	assert_int_equal(setsockopt(e->fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
}

void drain_fd(int fd, struct bytes *out)
{
	uint8_t tmp[65536];
	for (;;) {
		ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
		if (n <= 0)
			return;
		bytes_add(out, tmp, (size_t)n);
	}
}

void assert_calls_in_order(const struct end *e, size_t n_msgs)
{
	assert_int_equal(e->n_calls, n_msgs);
	for (size_t i = 0; i < n_msgs; i++) {
		const struct call *c = &e->calls[i];
		if (c->avail >= c->hdr_len + 4)
			assert_int_equal(c->seq, (int64_t)i);
		else
			assert_int_equal(c->seq, -1);
	}
}

void notices(struct pktbuf *pb, int n)
{
	char msg[64];
	pktbuf_init(pb, 1024);
	for (int i = 0; i < n; i++) {
		snprintf(msg, sizeof(msg), "pooler notice %d", i);
		pkt_write_notice(pb, "NOTICE", "01000", msg);
	}
	assert_false(pktbuf_failed(pb));
}

bool parse_messages(const struct bytes *b, uint8_t *types, size_t max, size_t *n)
{
	size_t off = 0;
	*n = 0;
	while (off < b->len) {
		struct pkt_hdr h;
		if (pkt_parse_header(b->p + off, b->len - off, false, 1u << 30, &h, NULL) != PKT_OK)
			return false;
		if (h.len > b->len - off || *n == max)
			return false;
		if (h.type != 'D' && h.type != 'N')
			return false;
		types[(*n)++] = h.type;
		off += h.len;
	}
	return true;
}

/* What reaches the peer (want) or the owner's capture (eaten) of message
 * seq, of `type` and len bytes, under step st. */
static void add_expected(struct bytes *want, struct bytes *eaten, enum step st, uint8_t type,
			 uint32_t seq, uint32_t len)
{
	struct bytes one = { 0 };
	add_msg(&one, type, seq, len);
	switch (st) {
	case STEP_SKIP:
	case STEP_CONSUME_NOW:
	case STEP_CLOSE:
	case STEP_CLOSE_PEER:
		break;
	case STEP_CONSUME:
	case STEP_MORE_CONSUME:
		assert_non_null(eaten);
		bytes_add(eaten, one.p, one.len);
		break;
	case STEP_GROW:
	case STEP_SHRINK: {
		uint32_t cut = st == STEP_SHRINK ? SHRINK_BY : 0, add = st == STEP_GROW ? GROW_BY : 0;
		uint32_t word = len + add - cut - 1;
		uint8_t hdr[5] = { type, (uint8_t)(word >> 24), (uint8_t)(word >> 16), (uint8_t)(word >> 8),
				   (uint8_t)word };
		uint8_t fill[GROW_BY];
		memset(fill, 0xEE, sizeof(fill));
		bytes_add(want, hdr, 5);
		bytes_add(want, one.p + 5, 4);
		bytes_add(want, fill, add);
		bytes_add(want, one.p + 9 + cut, len - 9 - cut);
		break;
	}
	case STEP_INJECT:
		bytes_add(want, injected_msg, sizeof(injected_msg));
		bytes_add(want, one.p, one.len);
		break;
	default:
		bytes_add(want, one.p, one.len);
	}
	bytes_free(&one);
}

void script_case(struct end *e, uint8_t type, const enum step *script, const uint32_t *lens, size_t n,
		 struct bytes *in, struct bytes *want, struct bytes *eaten)
{
	for (uint32_t i = 0; i < n; i++) {
		add_msg(in, type, i, lens[i]);
		add_expected(want, eaten, script[i], type, i, lens[i]);
	}
	e->script = script;
	e->n_script = n;
	e->msg_idx = 0;
}

uint32_t add_bulk(struct bytes *in, size_t total)
{
	uint32_t seq = 0;
	while (in->len < total) {
		uint32_t len = seq % 17 == 0 ? 100000 : 9 + (seq * 37) % 3000;
		add_msg(in, 'D', seq++, len);
	}
	return seq;
}

/* ---- both modes ---- */

int run_both_modes(const struct CMUnitTest *tests, size_t n, CMFixtureFunction group_setup,
		   CMFixtureFunction group_teardown)
{
	int failed = _cmocka_run_group_tests("recv/send", tests, n, group_setup, group_teardown);
	/* The same scenarios with the turn's receives and sends batched
	 * through io_uring, where this kernel gives a ring. */
	enum uring_verdict v = uring_init();
	if (v != URING_READY) {
		printf("io_uring batching not tested: %s\n",
		       v == URING_NOT_BUILT ? "built without liburing" : "this kernel gives no usable ring");
		return failed;
	}
	stream_set_batching(true);
	failed += _cmocka_run_group_tests("io_uring batches", tests, n, group_setup, group_teardown);
	uint64_t batches, ops;
	stream_batch_counts(&batches, &ops);
	stream_set_batching(false);
	uring_free();
	/* The batched run must have batched: a path that never gathers
	 * anything would pass the scenarios without testing them. */
	if (batches == 0 || ops < batches) {
		printf("io_uring batches: %llu batches, %llu operations\n",
		       (unsigned long long)batches, (unsigned long long)ops);
		failed++;
	}
	return failed;
}

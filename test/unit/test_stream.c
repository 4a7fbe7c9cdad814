/* pgcrew — unit tests for the stream transport: three streams on real
 * non-blocking socketpairs and a private event_base, driven by a scripted
 * owner callback; checks byte-exact forwarding, every owner action,
 * back-pressure, framing errors, EOF, pooler writes and buffer release. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/build.h"
#include "proto/packet.h"
#include "stream.h"
#include "streamfix.h"

#define BUFSIZE     16384
#define MAX_ITER    200000      /* loop turns before a scenario counts as stuck */

struct fx {
	struct event_base *base;
	struct end a, b, c;
};

/* ---- fixture ---- */

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	fx->base = event_base_new();
	if (!fx->base)
		return -1;
	stream_base = fx->base;
	stream_cache_init(BUFSIZE);
	end_open(&fx->a);
	end_open(&fx->b);
	end_open(&fx->c);
	fx->a.s.peer = &fx->b.s;
	fx->b.s.peer = &fx->a.s;
	stream_start_reading(&fx->a.s);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;
	end_close(&fx->a);
	end_close(&fx->b);
	end_close(&fx->c);
	event_base_free(fx->base);
	stream_base = NULL;
	/* Every test closes its streams: a buffer still lent out is a leak. */
	int rc = stream_cache_used() == 0 ? 0 : -1;
	stream_cache_free();
	free(fx);
	return rc;
}

/* ---- driving the loop ---- */

/* Feeds `in` into wfd (at most `chunk` bytes per turn, 0 = as much as
 * fits), runs one non-blocking loop turn, and collects what arrives on rfd. */
struct pump {
	int wfd;
	const uint8_t *in;
	size_t in_len, in_off, chunk;
	int rfd;
	bool reading;
	struct bytes out;
	size_t max_used;             /* highest stream_cache_used() seen */
};

static void pump_write(struct pump *p)
{
	if (p->wfd < 0 || p->in_off == p->in_len)
		return;
	size_t n = p->in_len - p->in_off;
	if (p->chunk && n > p->chunk)
		n = p->chunk;
	ssize_t w = send(p->wfd, p->in + p->in_off, n, MSG_NOSIGNAL);
	if (w > 0)
		p->in_off += (size_t)w;
	else
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

/* One loop turn as the worker runs it: the events, then the turn's
 * batches (io_uring on: the gathered receives and sends). */
static void loop_turn(struct fx *fx)
{
	event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	stream_turn_end();
}

static void pump_turn(struct fx *fx, struct pump *p)
{
	pump_write(p);
	loop_turn(fx);
	if (stream_cache_used() > p->max_used)
		p->max_used = stream_cache_used();
	if (p->reading && p->rfd >= 0)
		drain_fd(p->rfd, &p->out);
}

/* Runs until everything is written and `want` bytes were collected. */
static bool pump_until(struct fx *fx, struct pump *p, size_t want)
{
	for (int i = 0; i < MAX_ITER; i++) {
		pump_turn(fx, p);
		if (p->in_off == p->in_len && p->out.len >= want)
			return true;
	}
	return false;
}

static void pump_turns(struct fx *fx, struct pump *p, int n)
{
	for (int i = 0; i < n; i++)
		pump_turn(fx, p);
}

static void turns(struct fx *fx, int n)
{
	for (int i = 0; i < n; i++)
		loop_turn(fx);
}

static struct pump pump_a_to_b(struct fx *fx, const struct bytes *in)
{
	struct pump p = { .wfd = fx->a.fd, .in = in->p, .in_len = in->len,
			  .rfd = fx->b.fd, .reading = true };
	return p;
}

/* Sends `in` into A, expects exactly `want` on B's far end. */
static void expect_relay(struct fx *fx, const struct bytes *in, size_t chunk, const struct bytes *want)
{
	struct pump p = pump_a_to_b(fx, in);
	p.chunk = chunk;
	assert_true(pump_until(fx, &p, want->len));
	pump_turns(fx, &p, 20);      /* nothing more may trickle in */
	assert_int_equal(p.out.len, want->len);
	assert_memory_equal(p.out.p, want->p, want->len);
	bytes_free(&p.out);
}

/* ---- forwarding ---- */

static void test_forward_single(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'Q', 0, 40);

	expect_relay(fx, &in, 0, &in);
	assert_int_equal(fx->a.n_calls, 1);
	assert_int_equal(fx->a.calls[0].type, 'Q');
	assert_int_equal(fx->a.calls[0].len, 40);
	assert_int_equal(fx->a.calls[0].hdr_len, 5);
	assert_int_equal(fx->a.calls[0].avail, 40);
	assert_int_equal(fx->a.s.bytes_in, 40);
	assert_int_equal(fx->b.s.bytes_out, 40);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
}

struct coalesce_case {
	const char *name;
	uint32_t n_msgs;
	uint32_t min_len, spread;    /* length = min_len + (seq * 13) % spread */
	size_t chunk;                /* bytes per write; 0 = all at once */
};

static const struct coalesce_case coalesce_cases[] = {
	{ "500 small, one write", 500, 9, 40, 0 },
	{ "3000 small, more than a buffer", 3000, 9, 60, 0 },
	{ "minimum-size messages", 2000, 9, 1, 0 },
	{ "straddling buffer edges", 300, 1000, 2000, 0 },
	{ "one message, 1-byte writes", 1, 57, 1, 1 },
	{ "ten messages, 1-byte writes", 10, 9, 30, 1 },
	{ "mixed, 7-byte writes", 200, 9, 300, 7 },
	{ "mixed, 4093-byte writes", 400, 9, 5000, 4093 },
};

static void test_forward_coalesced_and_split(void **state)
{
	struct fx *fx = *state;
	for (size_t k = 0; k < ARRAY_SIZE(coalesce_cases); k++) {
		const struct coalesce_case *c = &coalesce_cases[k];
		struct bytes in = { 0 };
		print_message("case: %s\n", c->name);
		for (uint32_t i = 0; i < c->n_msgs; i++)
			add_msg(&in, (uint8_t)('A' + i % 26), i, c->min_len + (i * 13) % c->spread);
		fx->a.n_calls = 0;
		fx->a.msg_idx = 0;
		expect_relay(fx, &in, c->chunk, &in);
		/* One callback per message, in order, never a duplicate. */
		assert_calls_in_order(&fx->a, c->n_msgs);
		for (uint32_t i = 0; i < c->n_msgs; i++) {
			assert_int_equal(fx->a.calls[i].type, 'A' + i % 26);
			assert_int_equal(fx->a.calls[i].len, c->min_len + (i * 13) % c->spread);
			assert_true(fx->a.calls[i].avail >= 5);
		}
		assert_int_equal(stream_cache_used(), 0);
		bytes_free(&in);
	}
}

static void test_forward_large_message(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'D', 0, 1 << 20);
	add_msg(&in, 'C', 1, 20);
	add_msg(&in, 'Z', 2, 9);

	expect_relay(fx, &in, 0, &in);
	assert_calls_in_order(&fx->a, 3);
	assert_int_equal(fx->a.calls[0].len, 1 << 20);
	assert_true(fx->a.calls[0].avail <= BUFSIZE);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
}

static void test_forward_startup_packets(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	const char *kv[] = { "user", "alice", "database", "db1", NULL };
	pktbuf_init(&pb, 64);
	pkt_write_startup(&pb, 0, kv);
	pkt_write_ssl_request(&pb);
	assert_false(pktbuf_failed(&pb));
	struct bytes in = { 0 };
	bytes_add(&in, pb.buf, pb.len);
	pktbuf_free(&pb);

	fx->a.s.startup = true;
	expect_relay(fx, &in, 1, &in);
	assert_int_equal(fx->a.n_calls, 2);
	assert_int_equal(fx->a.calls[0].type, 0);
	assert_int_equal(fx->a.calls[0].hdr_len, 4);
	assert_int_equal(fx->a.calls[1].len, 8);
	bytes_free(&in);
}

/* ---- owner actions ---- */

static void test_skip_drops_one_message(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_SKIP, STEP_FORWARD, STEP_SKIP,
					    STEP_SKIP, STEP_FORWARD };
	struct fx *fx = *state;
	struct bytes in = { 0 }, want = { 0 };
	static const uint32_t lens[] = { 30, 25, 40000, 100, 20000, 12 };
	script_case(&fx->a, 'D', script, lens, ARRAY_SIZE(lens), &in, &want, NULL);

	expect_relay(fx, &in, 0, &want);
	assert_calls_in_order(&fx->a, ARRAY_SIZE(lens));
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
	bytes_free(&want);
}

static void test_consumed_gets_full_message(void **state)
{
	static const enum step script[] = { STEP_CONSUME, STEP_FORWARD, STEP_CONSUME, STEP_CONSUME };
	struct fx *fx = *state;
	struct bytes in = { 0 }, want = { 0 }, eaten = { 0 };
	static const uint32_t lens[] = { 300, 50, 9000, 16384 };
	script_case(&fx->a, 'P', script, lens, ARRAY_SIZE(lens), &in, &want, &eaten);

	/* 100-byte writes: every consumed message arrives in pieces. */
	expect_relay(fx, &in, 100, &want);
	assert_int_equal(fx->a.msg_idx, ARRAY_SIZE(lens));
	assert_int_equal(fx->a.consumed.len, eaten.len);
	assert_memory_equal(fx->a.consumed.p, eaten.p, eaten.len);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
	bytes_free(&want);
	bytes_free(&eaten);
}

static void test_consumed_partial_drops_rest(void **state)
{
	/* SA_CONSUMED with only the header buffered still drops the whole
	 * message, body bytes that come later included. */
	static const enum step script[] = { STEP_CONSUME_NOW, STEP_FORWARD };
	struct fx *fx = *state;
	struct bytes first = { 0 }, second = { 0 };
	add_msg(&first, 'd', 0, 50000);
	add_msg(&second, 'c', 1, 9);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	struct pump p = pump_a_to_b(fx, &first);
	p.in_len = 5;
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 10);
	assert_int_equal(fx->a.n_calls, 1);
	assert_int_equal(fx->a.calls[0].avail, 5);
	p.in_len = first.len;
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 10);
	assert_int_equal(p.out.len, 0);
	bytes_free(&p.out);

	expect_relay(fx, &second, 0, &second);
	assert_calls_in_order(&fx->a, 2);
	bytes_free(&first);
	bytes_free(&second);
}

static void test_need_full_called_again(void **state)
{
	static const enum step script[] = { STEP_FULL_FORWARD, STEP_FORWARD };
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'B', 0, 3000);
	add_msg(&in, 'E', 1, 10);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	/* First 1000 bytes: one call, too little for the owner. */
	struct pump p = pump_a_to_b(fx, &in);
	p.in_len = 1000;
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 10);
	assert_int_equal(fx->a.n_calls, 1);
	assert_int_equal(fx->a.calls[0].avail, 1000);
	assert_int_equal(p.out.len, 0);
	assert_int_equal(stream_unprocessed(&fx->a.s), 1000);

	/* The rest: called again with the whole message, which is forwarded. */
	p.in_len = in.len;
	assert_true(pump_until(fx, &p, in.len));
	pump_turns(fx, &p, 10);
	assert_int_equal(p.out.len, in.len);
	assert_memory_equal(p.out.p, in.p, in.len);
	assert_true(fx->a.n_calls >= 3);
	size_t last = fx->a.n_calls - 2;
	assert_int_equal(fx->a.calls[last].seq, 0);
	assert_true(fx->a.calls[last].avail >= 3000);
	for (size_t i = 0; i < last; i++)
		assert_true(fx->a.calls[i].avail < 3000);
	assert_int_equal(fx->a.calls[last + 1].seq, 1);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* A message that needs the whole buffer, behind forwarded bytes: the
 * buffer must be flushed and compacted so it fits. */
static void need_full_behind_forward(struct fx *fx, bool slow_peer)
{
	static const enum step script[] = { STEP_FORWARD, STEP_CONSUME, STEP_FORWARD };
	struct bytes in = { 0 }, want = { 0 }, eaten = { 0 };
	add_msg(&want, 'D', 0, 15000);
	add_msg(&eaten, 'P', 1, 16000);
	bytes_add(&in, want.p, want.len);
	bytes_add(&in, eaten.p, eaten.len);
	struct bytes tail = { 0 };
	add_msg(&tail, 'S', 2, 9);
	bytes_add(&in, tail.p, tail.len);
	bytes_add(&want, tail.p, tail.len);
	bytes_free(&tail);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);
	struct pump p = pump_a_to_b(fx, &in);
	if (slow_peer) {
		/* The peer's far end reads nothing at first. */
		small_sockbufs(&fx->b);
		p.reading = false;
		pump_turns(fx, &p, 50);
		assert_true(stream_has_pending_forward(&fx->a.s));
		p.reading = true;
	}
	assert_true(pump_until(fx, &p, want.len));
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, want.len);
	assert_memory_equal(p.out.p, want.p, want.len);
	assert_int_equal(fx->a.consumed.len, eaten.len);
	assert_memory_equal(fx->a.consumed.p, eaten.p, eaten.len);
	assert_int_equal(count_events(&fx->a, SE_ERROR), 0);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
	bytes_free(&want);
	bytes_free(&eaten);
}

static void test_need_full_compacts(void **state)
{
	need_full_behind_forward(*state, false);
}

static void test_need_full_compacts_slow_peer(void **state)
{
	need_full_behind_forward(*state, true);
}

/* Beyond the stream's max_whole a message is not held: SE_ERROR at its
 * header, before any body is buffered for it. */
static void test_need_full_too_large(void **state)
{
	static const enum step script[] = { STEP_CONSUME };
	struct fx *fx = *state;
	struct bytes in = { 0 };
	fx->a.s.max_whole = 4 * BUFSIZE;
	add_msg(&in, 'P', 0, 4 * BUFSIZE + 1);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	struct pump p = pump_a_to_b(fx, &in);
	pump_turns(fx, &p, 50);
	assert_int_equal(count_events(&fx->a, SE_ERROR), 1);
	assert_string_equal(fx->a.last_errmsg, "message too large to hold whole");
	assert_true(fx->a.s.closed);
	assert_int_equal(fx->a.consumed.len, 0);
	assert_int_equal(p.out.len, 0);
	assert_true(p.max_used <= 1);          /* no second buffer was taken */
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
}

static void test_pause_resume(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_PAUSE_ONCE, STEP_FORWARD };
	struct fx *fx = *state;
	struct bytes in = { 0 }, first = { 0 };
	add_msg(&in, 'Q', 0, 20);
	bytes_add(&first, in.p, in.len);
	add_msg(&in, 'Q', 1, 30);
	add_msg(&in, 'Q', 2, 40);
	/* Written while paused: more than half a buffer, so reading stops. */
	for (uint32_t i = 3; i < 40; i++)
		add_msg(&in, 'd', i, 1000);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	struct pump p = pump_a_to_b(fx, &in);
	pump_turns(fx, &p, 200);
	/* Only the first message went out; the paused one was offered once. */
	assert_int_equal(p.out.len, first.len);
	assert_memory_equal(p.out.p, first.p, first.len);
	assert_int_equal(fx->a.n_calls, 2);
	assert_int_equal(fx->a.calls[1].seq, 1);
	assert_true(fx->a.s.paused);
	/* Bounded: no more than a buffer is taken in while paused. */
	assert_true(fx->a.s.bytes_in <= BUFSIZE);
	assert_true(p.max_used <= 1);

	stream_resume(&fx->a.s);
	assert_true(pump_until(fx, &p, in.len));
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, in.len);
	assert_memory_equal(p.out.p, in.p, in.len);
	/* Message 1 offered exactly twice (pause, then forward), the rest once. */
	assert_int_equal(fx->a.n_calls, 41);
	assert_int_equal(fx->a.calls[2].seq, 1);
	for (size_t i = 3; i < fx->a.n_calls; i++)
		assert_int_equal(fx->a.calls[i].seq, (int64_t)i - 1);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
	bytes_free(&first);
}

/* SUSPEND: nothing is read while suspended, not even when the owner asks
 * (stream_resume, stream_start_reading); unsuspend relays everything. */
static void test_suspend_unsuspend(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 };
	for (uint32_t i = 0; i < 5; i++)
		add_msg(&in, 'Q', i, 50);
	stream_suspend(&fx->a.s);
	assert_true(stream_flushed(&fx->a.s));
	struct pump p = pump_a_to_b(fx, &in);
	pump_turns(fx, &p, 50);
	stream_resume(&fx->a.s);
	stream_start_reading(&fx->a.s);
	pump_turns(fx, &p, 50);
	assert_int_equal(fx->a.n_calls, 0);
	assert_int_equal(fx->a.s.bytes_in, 0);
	assert_int_equal(p.out.len, 0);

	stream_unsuspend(&fx->a.s);
	assert_true(pump_until(fx, &p, in.len));
	assert_memory_equal(p.out.p, in.p, in.len);
	assert_int_equal(fx->a.n_calls, 5);
	assert_true(stream_flushed(&fx->a.s));
	bytes_free(&p.out);
	bytes_free(&in);
}

static void test_pause_notices_eof(void **state)
{
	static const enum step script[] = { STEP_PAUSE_ONCE };
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'Q', 0, 20);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	struct pump p = pump_a_to_b(fx, &in);
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 10);
	assert_true(fx->a.s.paused);
	shutdown(fx->a.fd, SHUT_WR);
	pump_turns(fx, &p, 10);
	assert_int_equal(count_events(&fx->a, SE_EOF), 1);
	assert_int_equal(p.out.len, 0);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
}

static void test_close_inside_callback(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_CLOSE };
	struct fx *fx = *state;
	struct bytes first = { 0 }, rest = { 0 };
	add_msg(&first, 'Q', 0, 20);
	for (uint32_t i = 1; i < 50; i++)
		add_msg(&rest, 'Q', i, 20);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	expect_relay(fx, &first, 0, &first);
	/* Closed by the owner at the first of 49 messages: no more callbacks,
	 * nothing forwarded, the buffer is back in the cache. */
	struct pump p = pump_a_to_b(fx, &rest);
	pump_turns(fx, &p, 20);
	assert_true(fx->a.s.closed);
	assert_int_equal(fx->a.n_calls, 2);
	assert_int_equal(fx->a.calls[1].seq, 1);
	assert_int_equal(p.out.len, 0);
	assert_int_equal(fx->a.n_events, 0);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&first);
	bytes_free(&rest);
}

/* ---- back-pressure ---- */

static void test_back_pressure(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 };
	uint32_t seq = add_bulk(&in, 4u << 20);
	small_sockbufs(&fx->b);

	/* B's far end reads nothing: A must stop taking bytes in. */
	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 3000);
	assert_true(p.in_off < in.len);
	uint64_t in_before = fx->a.s.bytes_in;
	pump_turns(fx, &p, 500);
	assert_int_equal(fx->a.s.bytes_in, in_before);
	assert_true(fx->a.s.bytes_in - fx->b.s.bytes_out <= BUFSIZE);
	assert_true(p.max_used <= 1);
	assert_true(stream_has_pending_forward(&fx->a.s));
	assert_true(stream_has_pending_out(&fx->b.s));

	/* Draining B releases everything, in order. */
	p.reading = true;
	assert_true(pump_until(fx, &p, in.len));
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, in.len);
	assert_memory_equal(p.out.p, in.p, in.len);
	assert_calls_in_order(&fx->a, seq);
	assert_true(p.max_used <= 1);
	assert_false(stream_has_pending_out(&fx->b.s));
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* ---- framing errors and EOF ---- */

struct bad_case {
	const char *name;
	uint8_t bytes[5];
	size_t n;
	bool startup;
	uint32_t max_pkt;            /* 0 = leave the default */
};

static const struct bad_case bad_cases[] = {
	{ "typed length 3", { 'Q', 0, 0, 0, 3 }, 5, false, 0 },
	{ "typed length 0", { 'Q', 0, 0, 0, 0 }, 5, false, 0 },
	{ "typed length > max_pkt", { 'Q', 0, 0, 0x10, 0 }, 5, false, 4096 },
	{ "typed max_pkt + 1", { 'D', 0, 0, 0x10, 0x00 }, 5, false, 4096 },
	{ "typed 0xFFFFFFFF", { 'D', 0xFF, 0xFF, 0xFF, 0xFF }, 5, false, 0 },
	{ "startup length 4", { 0, 0, 0, 4 }, 4, true, 0 },
	{ "startup length 10001", { 0, 0, 0x27, 0x11 }, 4, true, 0 },
};

static void test_bad_header_table(void **state)
{
	struct fx *fx = *state;
	for (size_t k = 0; k < ARRAY_SIZE(bad_cases); k++) {
		const struct bad_case *c = &bad_cases[k];
		print_message("case: %s\n", c->name);
		end_close(&fx->a);
		memset(&fx->a, 0, sizeof(fx->a));
		end_open(&fx->a);
		fx->a.s.peer = &fx->b.s;
		fx->a.s.startup = c->startup;
		if (c->max_pkt)
			fx->a.s.max_pkt = c->max_pkt;
		stream_start_reading(&fx->a.s);

		/* A good message first (forwarded), then the bad header. */
		struct bytes in = { 0 }, good = { 0 };
		if (c->startup) {
			uint8_t ssl[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
			bytes_add(&good, ssl, sizeof(ssl));
		} else {
			add_msg(&good, 'Q', 0, 30);
		}
		expect_relay(fx, &good, 0, &good);
		assert_int_equal(fx->a.n_calls, 1);
		bytes_add(&in, c->bytes, c->n);
		uint8_t junk[64] = { 0 };
		bytes_add(&in, junk, sizeof(junk));

		struct pump p = pump_a_to_b(fx, &in);
		pump_turns(fx, &p, 30);
		assert_int_equal(fx->a.n_calls, 1);
		assert_int_equal(count_events(&fx->a, SE_ERROR), 1);
		assert_int_equal(fx->a.n_events, 1);
		assert_non_null(fx->a.last_errmsg);
		assert_true(fx->a.last_errmsg[0] != 0);
		assert_true(fx->a.s.closed);
		assert_int_equal(p.out.len, 0);
		assert_int_equal(stream_cache_used(), 0);
		bytes_free(&p.out);
		bytes_free(&in);
		bytes_free(&good);
	}
}

static void test_eof(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'Q', 0, 20);
	add_msg(&in, 'X', 1, 9);

	/* Messages sent just before the close still arrive, then SE_EOF. */
	struct pump p = pump_a_to_b(fx, &in);
	pump_write(&p);
	assert_int_equal(p.in_off, in.len);
	close(fx->a.fd);
	fx->a.fd = -1;
	p.wfd = -1;
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, in.len);
	assert_memory_equal(p.out.p, in.p, in.len);
	assert_int_equal(count_events(&fx->a, SE_EOF), 1);
	assert_int_equal(fx->a.n_events, 1);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
}

static void test_eof_mid_header(void **state)
{
	struct fx *fx = *state;
	fx->a.keep_open = true;
	assert_int_equal(send(fx->a.fd, "Q\0\0", 3, 0), 3);
	shutdown(fx->a.fd, SHUT_WR);
	turns(fx, 10);
	assert_int_equal(fx->a.n_calls, 0);
	assert_true(count_events(&fx->a, SE_EOF) >= 1);
	assert_int_equal(fx->a.first_event, SE_EOF);
	stream_close(&fx->a.s);
	assert_int_equal(stream_cache_used(), 0);
}

/* ---- pooler writes ---- */

static void test_write_before_forward(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	struct bytes fwd = { 0 }, want = { 0 };
	notices(&pb, 3000);
	for (uint32_t i = 0; i < 100; i++)
		add_msg(&fwd, 'D', i, 500);
	bytes_add(&want, pb.buf, pb.len);
	bytes_add(&want, fwd.p, fwd.len);
	small_sockbufs(&fx->b);

	/* The pooler's bytes do not fit in the socket: the rest is queued. */
	assert_true(stream_write(&fx->b.s, &pb));
	pktbuf_free(&pb);
	assert_true(stream_has_pending_out(&fx->b.s));

	/* The forwarded bytes arrive, then the client makes room: they must
	 * still wait behind the pooler's queue. */
	struct pump p = pump_a_to_b(fx, &fwd);
	pump_write(&p);
	drain_fd(fx->b.fd, &p.out);
	assert_true(p.out.len > 0);
	p.reading = false;
	pump_turns(fx, &p, 100);
	assert_int_equal(count_events(&fx->b, SE_FLUSHED), 0);
	p.reading = true;
	assert_true(pump_until(fx, &p, want.len));
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, want.len);
	assert_memory_equal(p.out.p, want.p, want.len);
	assert_false(stream_has_pending_out(&fx->b.s));
	assert_true(count_events(&fx->b, SE_FLUSHED) >= 1);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&fwd);
	bytes_free(&want);
}

static void test_write_drains_on_writability(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	notices(&pb, 5000);
	small_sockbufs(&fx->b);
	struct bytes want = { 0 };
	bytes_add(&want, pb.buf, pb.len);

	assert_true(stream_write(&fx->b.s, &pb));
	pktbuf_free(&pb);
	assert_true(stream_has_pending_out(&fx->b.s));
	assert_true(fx->b.s.bytes_out < want.len);

	struct pump p = { .wfd = -1, .rfd = fx->b.fd, .reading = true };
	assert_true(pump_until(fx, &p, want.len));
	pump_turns(fx, &p, 10);
	assert_int_equal(p.out.len, want.len);
	assert_memory_equal(p.out.p, want.p, want.len);
	assert_false(stream_has_pending_out(&fx->b.s));
	assert_int_equal(count_events(&fx->b, SE_FLUSHED), 1);
	assert_int_equal(fx->b.s.bytes_out, want.len);

	/* A failed builder is refused without sending anything. */
	uint8_t tiny[4];
	pktbuf_init_fixed(&pb, tiny, sizeof(tiny));
	pkt_write_notice(&pb, "NOTICE", NULL, "does not fit");
	assert_false(stream_write(&fx->b.s, &pb));
	pump_turns(fx, &p, 5);
	assert_int_equal(p.out.len, want.len);
	bytes_free(&p.out);
	bytes_free(&want);
}

/*
 * Regression (stream.c, fixed): a pooler write to a socket that a
 * blocked forward is sending to lands in the middle of the forwarded
 * message. stream_write_raw() sends at once (or queues in s->out, which
 * on_write flushes before resuming s->blocked_src), ignoring the forwarded
 * message whose first part is already on the wire.
 */
static void test_write_while_forward_blocked(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	struct bytes in = { 0 };
	add_msg(&in, 'D', 0, 200000);
	small_sockbufs(&fx->b);

	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 200);
	assert_true(stream_has_pending_forward(&fx->a.s));
	assert_true(fx->b.s.bytes_out > 0);

	/* The client drains a little; the pooler then writes a notice. */
	uint8_t some[2000];
	ssize_t got = recv(fx->b.fd, some, sizeof(some), 0);
	assert_true(got > 0);
	bytes_add(&p.out, some, (size_t)got);
	notices(&pb, 1);
	assert_true(stream_write(&fx->b.s, &pb));
	size_t notice_len = pb.len;
	pktbuf_free(&pb);

	p.reading = true;
	assert_true(pump_until(fx, &p, in.len + notice_len));
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, in.len + notice_len);
	uint8_t types[4];
	size_t n;
	assert_true(parse_messages(&p.out, types, ARRAY_SIZE(types), &n));
	assert_int_equal(n, 2);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* ---- idle buffers ---- */

static void test_buffers_return_to_cache(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'Q', 0, 100);

	assert_int_equal(stream_cache_used(), 0);
	assert_null(fx->a.s.buf);
	/* B forwards to A as well: two streams busy, both go idle again. */
	fx->b.s.peer = &fx->a.s;
	stream_start_reading(&fx->b.s);
	for (int round = 0; round < 5; round++) {
		expect_relay(fx, &in, 0, &in);
		assert_null(fx->a.s.buf);
		assert_int_equal(stream_cache_used(), 0);
		assert_int_equal(send(fx->b.fd, in.p, in.len, 0), (ssize_t)in.len);
		struct bytes back = { 0 };
		for (int i = 0; i < 100 && back.len < in.len; i++) {
			turns(fx, 1);
			drain_fd(fx->a.fd, &back);
		}
		assert_int_equal(back.len, in.len);
		assert_memory_equal(back.p, in.p, in.len);
		assert_null(fx->b.s.buf);
		assert_int_equal(stream_cache_used(), 0);
		bytes_free(&back);
	}
	/* Reused from the free list, not allocated anew each time. */
	assert_true(stream_cache_free_count() >= 1);
	assert_true(stream_cache_free_count() <= 2);

	/* A half-received header keeps its buffer; the rest frees it. */
	assert_int_equal(send(fx->a.fd, in.p, 3, 0), 3);
	turns(fx, 5);
	assert_non_null(fx->a.s.buf);
	assert_int_equal(stream_cache_used(), 1);
	assert_int_equal(stream_unprocessed(&fx->a.s), 3);
	struct pump p = pump_a_to_b(fx, &in);
	p.in_off = 3;
	assert_true(pump_until(fx, &p, in.len));
	assert_memory_equal(p.out.p, in.p, in.len);
	pump_turns(fx, &p, 5);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* ---- losing the peer ---- */

static void test_forget_peer_while_blocked(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 }, want_c = { 0 };
	add_msg(&in, 'D', 0, 300000);
	add_msg(&want_c, 'C', 1, 20);
	add_msg(&want_c, 'Z', 2, 9);
	bytes_add(&in, want_c.p, want_c.len);
	small_sockbufs(&fx->b);

	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 200);
	assert_true(stream_has_pending_forward(&fx->a.s));
	assert_int_equal(fx->a.n_calls, 1);

	/* B goes away; A gets a new peer C. The rest of the message in flight
	 * to B is dropped, the later messages go whole to C. */
	stream_forget_peer(&fx->a.s, &fx->b.s);
	assert_null(fx->a.s.peer);
	assert_false(stream_has_pending_forward(&fx->a.s));
	stream_close(&fx->b.s);
	fx->a.s.peer = &fx->c.s;

	struct pump pc = { .wfd = fx->a.fd, .in = in.p, .in_len = in.len, .in_off = p.in_off,
			   .rfd = fx->c.fd, .reading = true };
	assert_true(pump_until(fx, &pc, want_c.len));
	pump_turns(fx, &pc, 20);
	assert_int_equal(pc.out.len, want_c.len);
	assert_memory_equal(pc.out.p, want_c.p, want_c.len);
	assert_calls_in_order(&fx->a, 3);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&pc.out);
	bytes_free(&in);
	bytes_free(&want_c);
}

static void test_close_blocked_peer(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 }, later = { 0 };
	add_msg(&in, 'D', 0, 300000);
	small_sockbufs(&fx->b);

	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 200);
	assert_true(stream_has_pending_forward(&fx->a.s));

	/* Closing B alone unblocks A: it reads on (the rest is dropped). */
	stream_close(&fx->b.s);
	assert_null(fx->a.s.peer);
	assert_false(stream_has_pending_forward(&fx->a.s));
	assert_true(pump_until(fx, &p, 0));
	add_msg(&later, 'Q', 1, 30);
	p.in = later.p;
	p.in_len = later.len;
	p.in_off = 0;
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 20);
	assert_int_equal(fx->a.n_calls, 2);
	assert_int_equal(fx->a.calls[1].seq, 1);
	assert_int_equal(count_events(&fx->a, SE_ERROR), 0);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
	bytes_free(&later);
}

/*
 * Regression (stream.c, fixed): when a forward is blocked on a
 * destination change (a SKIP after queued FORWARD bytes) the later messages
 * stay unprocessed in the buffer. stream_forget_peer() re-arms reading but
 * does not process them, so with a quiet socket they are never offered.
 */
static void test_forget_peer_processes_buffered(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_SKIP, STEP_FORWARD };
	struct fx *fx = *state;
	struct bytes in = { 0 }, want_c = { 0 };
	add_msg(&in, 'D', 0, 200);
	add_msg(&in, 'S', 1, 100);
	add_msg(&want_c, 'Z', 2, 9);
	bytes_add(&in, want_c.p, want_c.len);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);
	/* B's socket is full before anything is forwarded. */
	static uint8_t junk[4096];
	while (send(fx->b.s.fd, junk, sizeof(junk), MSG_NOSIGNAL) > 0)
		;

	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 50);
	assert_int_equal(p.in_off, in.len);
	assert_true(stream_has_pending_forward(&fx->a.s));
	assert_true(stream_unprocessed(&fx->a.s) > 0);

	stream_forget_peer(&fx->a.s, &fx->b.s);
	stream_close(&fx->b.s);
	fx->a.s.peer = &fx->c.s;
	struct pump pc = { .wfd = -1, .rfd = fx->c.fd, .reading = true };
	pump_turns(fx, &pc, 50);
	assert_int_equal(pc.out.len, want_c.len);
	assert_memory_equal(pc.out.p, want_c.p, want_c.len);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&pc.out);
	bytes_free(&in);
	bytes_free(&want_c);
}

static void test_peer_socket_broken(void **state)
{
	struct fx *fx = *state;
	struct bytes in = { 0 }, more = { 0 };
	add_msg(&in, 'D', 0, 100);
	add_msg(&more, 'D', 1, 100);

	/* B's far end is gone: forwarding fails on B, which is told; A goes on. */
	close(fx->b.fd);
	fx->b.fd = -1;
	struct pump p = { .wfd = fx->a.fd, .in = in.p, .in_len = in.len, .rfd = -1 };
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 10);
	assert_int_equal(count_events(&fx->b, SE_ERROR), 1);
	assert_non_null(fx->b.last_errmsg);
	assert_true(fx->b.s.closed);
	assert_int_equal(count_events(&fx->a, SE_ERROR), 0);
	p.in = more.p;
	p.in_len = more.len;
	p.in_off = 0;
	assert_true(pump_until(fx, &p, 0));
	pump_turns(fx, &p, 10);
	assert_calls_in_order(&fx->a, 2);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&in);
	bytes_free(&more);
}

/*
 * Regression (stream.c, fixed): bytes an owner marked SA_FORWARD are
 * only queued ([done, parse)); when a later message of the same read makes
 * the owner close the stream (client 'Q' then 'X' in one packet), or has a
 * bad header, stream_close() gives the buffer back and the queued message
 * never reaches the peer. PostgreSQL itself would run that query.
 */
static void test_close_after_queued_forward(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_CLOSE };
	struct fx *fx = *state;
	struct bytes in = { 0 }, want = { 0 };
	add_msg(&want, 'Q', 0, 30);
	bytes_add(&in, want.p, want.len);
	add_msg(&in, 'X', 1, 9);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);

	struct pump p = pump_a_to_b(fx, &in);
	pump_turns(fx, &p, 20);
	assert_true(fx->a.s.closed);
	assert_int_equal(fx->a.n_calls, 2);
	assert_int_equal(p.out.len, want.len);
	assert_memory_equal(p.out.p, want.p, want.len);
	bytes_free(&p.out);
	bytes_free(&in);
	bytes_free(&want);
}

static void test_sniff_tls_hello(void **state)
{
	struct fx *fx = *state;
	static const uint8_t hello[] = { 0x16, 0x03, 0x01, 0x00, 0x40, 0x01 };

	fx->a.s.sniff_tls = true;
	fx->a.s.startup = true;
	assert_int_equal(send(fx->a.fd, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
	turns(fx, 10);
	/* Reported once, reading stopped, nothing taken off the socket. */
	assert_int_equal(count_events(&fx->a, SE_TLS_HELLO), 1);
	assert_int_equal(fx->a.n_events, 1);
	assert_int_equal(fx->a.n_calls, 0);
	assert_int_equal(fx->a.s.bytes_in, 0);
	assert_int_equal(stream_cache_used(), 0);
	uint8_t peek[sizeof(hello)];
	assert_int_equal(recv(fx->a.s.fd, peek, sizeof(peek), MSG_PEEK), (ssize_t)sizeof(hello));
	assert_memory_equal(peek, hello, sizeof(hello));
}

static void test_sniff_tls_plain_startup(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	const char *kv[] = { "user", "bob", NULL };
	pktbuf_init(&pb, 64);
	pkt_write_startup(&pb, 0, kv);
	assert_false(pktbuf_failed(&pb));
	struct bytes in = { 0 };
	bytes_add(&in, pb.buf, pb.len);
	pktbuf_free(&pb);

	/* A startup packet starts with 0x00: processed as usual. */
	fx->a.s.sniff_tls = true;
	fx->a.s.startup = true;
	expect_relay(fx, &in, 1, &in);
	assert_int_equal(count_events(&fx->a, SE_TLS_HELLO), 0);
	assert_int_equal(fx->a.n_calls, 1);
	assert_int_equal(fx->a.calls[0].len, in.len);
	bytes_free(&in);
}

static void test_event_names(void **state)
{
	(void)state;
	for (int i = 0; i < SE_COUNT; i++) {
		assert_non_null(stream_event_name((enum stream_event)i));
		assert_string_not_equal(stream_event_name((enum stream_event)i), "?");
	}
	assert_string_equal(stream_event_name(SE_EOF), "eof");
	assert_string_equal(stream_event_name(SE_COUNT), "?");
}

/* Heads rewritten in place, longer and shorter, several in one batch (the
 * queued bytes before each move with it), pooler messages injected after a
 * flush, messages larger than the buffer: byte-exact at the peer, whole and
 * in small pieces. */
static void test_rewrite_and_inject(void **state)
{
	static const enum step script[] = {
		STEP_FORWARD, STEP_GROW, STEP_GROW, STEP_GROW, STEP_GROW, STEP_SHRINK, STEP_INJECT,
		STEP_GROW, STEP_FORWARD, STEP_INJECT, STEP_SHRINK, STEP_GROW, STEP_GROW,
	};   /* four growths in a row exceed the headroom: the fourth flushes first */
	static const uint32_t lens[] = { 30, 12, 40, 9, 33, 20, 60, 30000, 50, 15, 40000, 16, 21 };
	struct fx *fx = *state;
	for (size_t chunk = 0; chunk <= 7; chunk += 7) {
		struct bytes in = { 0 }, want = { 0 };
		script_case(&fx->a, 'D', script, lens, ARRAY_SIZE(lens), &in, &want, NULL);
		expect_relay(fx, &in, chunk, &want);
		bytes_free(&in);
		bytes_free(&want);
	}
	assert_int_equal(stream_cache_used(), 0);
}

/* Messages beyond the buffer's size that the owner needs whole (NEED_FULL,
 * or NEED_MORE until it has all of it: the buffer fills with the start)
 * arrive whole in a buffer of their own, consumed or forwarded from it; the
 * buffer goes away (not to the cache) once empty, and the idle stream owns
 * none. Up to exactly max_whole bytes. */
static void test_need_full_beyond_buffer(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_CONSUME, STEP_FORWARD, STEP_MORE_CONSUME,
					    STEP_FULL_FORWARD, STEP_CONSUME, STEP_MORE_CONSUME, STEP_FORWARD };
	static const uint32_t lens[] = { 30, 40000, 50, 70000, 1000000, 100, 3 * BUFSIZE, 20 };
	struct fx *fx = *state;
	fx->a.s.max_whole = 1000000;
	for (size_t chunk = 0; chunk <= 1000; chunk += 1000) {
		struct bytes in = { 0 }, want = { 0 }, eaten = { 0 };
		script_case(&fx->a, 'E', script, lens, ARRAY_SIZE(lens), &in, &want, &eaten);
		bytes_free(&fx->a.consumed);
		expect_relay(fx, &in, chunk, &want);
		assert_int_equal(count_events(&fx->a, SE_ERROR), 0);
		assert_int_equal(fx->a.consumed.len, eaten.len);
		assert_memory_equal(fx->a.consumed.p, eaten.p, eaten.len);
		assert_null(fx->a.s.buf);
		assert_int_equal(stream_cache_used(), 0);
		assert_true(stream_cache_free_count() <= 2);     /* the large ones were freed */
		bytes_free(&in);
		bytes_free(&want);
		bytes_free(&eaten);
	}
}

/* A large message needed whole and then forwarded to a peer that reads
 * nothing for a while: it waits in its own buffer (reading stops: nothing
 * more is taken in), goes out whole once the peer reads, and the buffer is
 * given back. */
static void test_need_full_beyond_buffer_slow_peer(void **state)
{
	static const enum step script[] = { STEP_FULL_FORWARD, STEP_FORWARD };
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'S', 0, 300000);
	add_msg(&in, 'Z', 1, 9);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);
	small_sockbufs(&fx->b);
	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 200);
	assert_true(stream_has_pending_forward(&fx->a.s));
	assert_int_equal(fx->a.s.buf->cap, 300000);
	assert_true(fx->a.n_calls > 0);
	assert_int_equal(fx->a.calls[fx->a.n_calls - 1].avail, 300000);
	p.reading = true;
	assert_true(pump_until(fx, &p, in.len));
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, in.len);
	assert_memory_equal(p.out.p, in.p, in.len);
	assert_null(fx->a.s.buf);
	assert_int_equal(stream_cache_used(), 0);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* ---- streams read outside the turn's batch ----
 * A TLS stream is read through its ops (SSL_read), never in the turn's
 * receive batch, while its forwards to a plain socket still wait for the
 * turn's send batch; OpenSSL's held bytes read it again before the batch
 * has run. These ops stand in for TLS: plain recv/send that are not
 * plain_ops, so the stream is read at once as a TLS one is. */
static ssize_t own_recv(struct stream *s, void *buf, size_t len)
{
	return recv(s->fd, buf, len, 0);
}

static ssize_t own_send(struct stream *s, const void *buf, size_t len)
{
	return send(s->fd, buf, len, MSG_NOSIGNAL);
}

static const struct stream_ops own_ops = { own_recv, own_send };

/* One loop turn in which A is read a second time before the turn's sends
 * have run, as OpenSSL's held bytes make a TLS stream be. */
static void turn_with_second_read(struct fx *fx, struct pump *p)
{
	pump_write(p);
	event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	if (!fx->a.s.closed)
		stream_read_now(&fx->a.s);
	stream_turn_end();
	if (p->reading)
		drain_fd(p->rfd, &p->out);
}

/*
 * Regression (stream.c, fixed; issue 40 item 1): a head rewritten longer
 * moves the queued bytes into the headroom; a second read before they were
 * sent found the buffer nearly full and compact() moved them forward past
 * the buffer's end (a heap overflow a TLS client steered with a Bind over
 * 16 kB), or, full, stopped reading for good (the client hung). Now the
 * queued bytes are sent first: byte-exact relay, whatever the sizes.
 */
static void test_rewrite_read_outside_batch(void **state)
{
	static const enum step script[] = { STEP_GROW, STEP_GROW, STEP_FORWARD, STEP_GROW, STEP_SHRINK,
					    STEP_GROW };
	static const uint32_t lens[] = { 100000, 16384, 30, 16300, 50000, 9 };
	struct fx *fx = *state;
	fx->a.s.ops = &own_ops;
	for (size_t chunk = 0; chunk <= 5000; chunk += 5000) {
		struct bytes in = { 0 }, want = { 0 };
		script_case(&fx->a, 'D', script, lens, ARRAY_SIZE(lens), &in, &want, NULL);
		struct pump p = pump_a_to_b(fx, &in);
		p.chunk = chunk;
		for (int i = 0; i < MAX_ITER && !(p.in_off == in.len && p.out.len >= want.len); i++)
			turn_with_second_read(fx, &p);
		for (int i = 0; i < 20; i++)
			turn_with_second_read(fx, &p);
		assert_int_equal(p.out.len, want.len);
		assert_memory_equal(p.out.p, want.p, want.len);
		assert_true(fx->a.s.reading);
		assert_int_equal(count_events(&fx->a, SE_ERROR), 0);
		bytes_free(&p.out);
		bytes_free(&in);
		bytes_free(&want);
	}
	assert_int_equal(stream_cache_used(), 0);
}

/* A message in flight from A to B, part of it on B's wire, then the
 * pooler queues a message for B (a FATAL for a client that is closed) and
 * A is forgotten mid-message (the client goes): the pooler's message would
 * land inside A's. B is torn instead: it sends nothing more, refuses
 * writes, and what reached B's far end is a prefix of A's message. */
static void test_forget_peer_mid_message_tears(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	struct bytes in = { 0 };
	add_msg(&in, 'd', 0, 200000);
	small_sockbufs(&fx->b);

	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	pump_turns(fx, &p, 200);
	assert_true(fx->b.s.bytes_out > 0);
	assert_true(stream_forwarding_to(&fx->a.s, &fx->b.s));
	notices(&pb, 1);
	assert_true(stream_write(&fx->b.s, &pb));      /* queued behind the message */

	stream_forget_peer(&fx->a.s, &fx->b.s);
	assert_true(fx->b.s.torn);
	assert_false(stream_write(&fx->b.s, &pb));
	pktbuf_free(&pb);
	drain_fd(fx->b.fd, &p.out);
	for (int i = 0; i < 50; i++) {
		turns(fx, 1);
		drain_fd(fx->b.fd, &p.out);
	}
	assert_true(p.out.len < in.len);
	assert_memory_equal(p.out.p, in.p, p.out.len);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* The same with A's messages whole in its buffer and their sending cut
 * short (B's socket full): part of one is on B's wire, so B is torn too
 * and the pooler's message never goes; what B's far end got is a prefix. */
static void test_forget_peer_blocked_tears(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	struct bytes in = { 0 };
	for (uint32_t i = 0; i < 6; i++)      /* one read's worth, more than B's socket takes */
		add_msg(&in, 'D', i, 2000);
	small_sockbufs(&fx->b);

	struct pump p = pump_a_to_b(fx, &in);
	p.reading = false;
	for (int i = 0; i < 200 && !(p.in_off == in.len && stream_unprocessed(&fx->a.s) == 0); i++)
		pump_turn(fx, &p);
	assert_true(stream_forwarding_to(&fx->a.s, &fx->b.s));
	assert_int_equal(fx->a.s.pkt_remain, 0);
	assert_ptr_equal(fx->b.s.blocked_src, &fx->a.s);
	notices(&pb, 1);
	assert_true(stream_write(&fx->b.s, &pb));
	pktbuf_free(&pb);

	stream_forget_peer(&fx->a.s, &fx->b.s);
	assert_true(fx->b.s.torn);
	assert_false(stream_has_pending_forward(&fx->a.s));
	p.reading = true;
	pump_turns(fx, &p, 50);
	assert_true(p.out.len < in.len);
	assert_memory_equal(p.out.p, in.p, p.out.len);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* Whole messages routed to B and not yet sent (nothing of them on the
 * wire), then A is forgotten (the client goes, as when a statement-mode
 * client's BEGIN is answered): they are dropped, as PgBouncer drops them,
 * and the pooler's message goes alone, at a boundary. */
static void test_forget_peer_unsent_dropped(void **state)
{
	static const enum step script[] = { STEP_FORWARD, STEP_CLOSE_PEER };
	struct fx *fx = *state;
	struct bytes in = { 0 };
	add_msg(&in, 'C', 0, 20);
	add_msg(&in, 'Z', 1, 9);
	fx->a.script = script;
	fx->a.n_script = ARRAY_SIZE(script);
	struct pump p = pump_a_to_b(fx, &in);
	pump_turns(fx, &p, 20);
	assert_false(fx->b.s.torn);
	uint8_t types[4];
	size_t n;
	assert_true(parse_messages(&p.out, types, ARRAY_SIZE(types), &n));
	assert_int_equal(n, 1);
	assert_int_equal(types[0], 'N');
	bytes_free(&p.out);
	bytes_free(&in);
}

/* A goes (closes) mid-message to B: B is torn too, and the message's
 * start is all B's far end ever gets. */
static void test_close_mid_message_tears_peer(void **state)
{
	struct fx *fx = *state;
	struct pktbuf pb;
	struct bytes in = { 0 };
	add_msg(&in, 'D', 0, 100000);

	struct pump p = pump_a_to_b(fx, &in);
	p.in_len = 30000;           /* only the start comes */
	assert_true(pump_until(fx, &p, 30000));
	assert_true(stream_forwarding_to(&fx->a.s, &fx->b.s));
	notices(&pb, 1);
	assert_true(stream_write(&fx->b.s, &pb));
	stream_close(&fx->a.s);
	assert_true(fx->b.s.torn);
	pktbuf_free(&pb);
	pump_turns(fx, &p, 20);
	assert_int_equal(p.out.len, 30000);
	assert_memory_equal(p.out.p, in.p, 30000);
	bytes_free(&p.out);
	bytes_free(&in);
}

/* ---- outgoing connections ---- */

struct tune_seen {
	int calls;
	int peer_errno;              /* getpeername() inside the callback */
};

static void tune_small_rcvbuf(int fd, const void *arg)
{
	struct tune_seen *seen = (struct tune_seen *)arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v = SMALL_SOCKBUF;

	seen->calls++;
	seen->peer_errno = getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ? errno : 0;
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
}

static int tcp_listener(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)sin, sizeof(*sin)), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)sin, &len), 0);
	return fd;
}

/* A stream of its own connecting to a fresh listener on 127.0.0.1, run
 * until connected; returns the listener. */
static int connect_end(struct fx *fx, struct end *e, stream_tune_fn tune, void *arg)
{
	struct sockaddr_in sin;
	int lfd = tcp_listener(&sin);

	*e = (struct end){ .dflt = STEP_FORWARD, .fd = -1 };
	e->calls = calloc(MAX_CALLS, sizeof(*e->calls));
	assert_non_null(e->calls);
	stream_init(&e->s, -1, e, on_pkt, on_event);
	assert_int_equal(stream_connect(&e->s, (struct sockaddr *)&sin, sizeof(sin), tune, arg), 0);
	for (int i = 0; i < MAX_ITER && count_events(e, SE_CONNECTED) == 0; i++)
		turns(fx, 1);
	assert_int_equal(count_events(e, SE_CONNECTED), 1);
	return lfd;
}

static void accept_and_close(int lfd, struct end *e)
{
	int afd = accept(lfd, NULL, NULL);
	assert_true(afd >= 0);
	close(afd);
	close(lfd);
	end_close(e);
}

/* The socket options of an outgoing connection are set before connect():
 * a receive buffer set after the handshake leaves TCP's window scaled for
 * the default one (with 4 kB, pg_basebackup crawled at one retransmission
 * timeout per 8 kB). */
static void test_connect_tunes_before_connect(void **state)
{
	struct tune_seen seen = { 0, 0 };
	struct end e;
	int lfd = connect_end(*state, &e, tune_small_rcvbuf, &seen);

	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.peer_errno, ENOTCONN);
	/* Set before the SYN, the small buffer caps the window TCP offers. */
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	assert_int_equal(getsockopt(e.s.fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
	assert_true(ti.tcpi_rcv_wscale <= 1);
	accept_and_close(lfd, &e);
}

/* Without a tune callback the socket keeps the kernel's defaults. */
static void test_connect_without_tune(void **state)
{
	struct end e;
	int lfd = connect_end(*state, &e, NULL, NULL);

	int v = 0;
	socklen_t len = sizeof(v);
	assert_int_equal(getsockopt(e.s.fd, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	assert_true(v > 2 * SMALL_SOCKBUF);
	accept_and_close(lfd, &e);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_forward_single),
		T(test_forward_coalesced_and_split),
		T(test_forward_large_message),
		T(test_forward_startup_packets),
		T(test_skip_drops_one_message),
		T(test_consumed_gets_full_message),
		T(test_consumed_partial_drops_rest),
		T(test_need_full_called_again),
		T(test_need_full_compacts),
		T(test_need_full_compacts_slow_peer),
		T(test_need_full_too_large),
		T(test_pause_resume),
		T(test_suspend_unsuspend),
		T(test_pause_notices_eof),
		T(test_close_inside_callback),
		T(test_back_pressure),
		T(test_bad_header_table),
		T(test_eof),
		T(test_eof_mid_header),
		T(test_write_before_forward),
		T(test_write_drains_on_writability),
		T(test_buffers_return_to_cache),
		T(test_forget_peer_while_blocked),
		T(test_close_blocked_peer),
		T(test_peer_socket_broken),
		T(test_sniff_tls_hello),
		T(test_sniff_tls_plain_startup),
		T(test_event_names),
		T(test_write_while_forward_blocked),
		T(test_forget_peer_processes_buffered),
		T(test_close_after_queued_forward),
		T(test_rewrite_and_inject),
		T(test_need_full_beyond_buffer),
		T(test_need_full_beyond_buffer_slow_peer),
		T(test_connect_tunes_before_connect),
		T(test_connect_without_tune),
		T(test_rewrite_read_outside_batch),
		T(test_forget_peer_mid_message_tears),
		T(test_forget_peer_blocked_tears),
		T(test_forget_peer_unsent_dropped),
		T(test_close_mid_message_tears_peer),
	};
	return run_both_modes(tests, ARRAY_SIZE(tests), NULL, NULL);
}

/* pgcrew — unit tests for ipc: two channels on a real SOCK_SEQPACKET
 * socketpair and a private event_base. Messages round-trip with type, request
 * id, sender and payload; fds arrive usable via SCM_RIGHTS; a long queue keeps
 * its order; EOF is reported once; oversized and malformed messages fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc.h"

#define MAX_MSGS 6000
#define MAX_TURNS 100000
#define SUP_ID (-1)
#define WORKER_ID 3

struct got {
	struct ipc_hdr hdr;
	uint8_t *payload;          /* copy; the channel's buffer is reused */
	int fd;
};

/* What one channel has received. */
struct inbox {
	struct got msgs[MAX_MSGS];
	size_t n;
	int eofs;
	struct ipc_chan *ch;
};

struct fx {
	struct event_base *base;
	struct inbox sup, wrk;     /* sup = self id -1, wrk = self id 3 */
};

static void on_msg(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
		   int fd, void *arg)
{
	struct inbox *in = arg;
	assert_ptr_equal(ch, in->ch);
	assert_true(in->n < MAX_MSGS);
	struct got *g = &in->msgs[in->n++];
	g->hdr = *hdr;
	g->payload = malloc(hdr->len ? hdr->len : 1);
	assert_non_null(g->payload);
	memcpy(g->payload, payload, hdr->len);
	g->fd = fd;
}

static void on_eof(struct ipc_chan *ch, void *arg)
{
	struct inbox *in = arg;
	assert_ptr_equal(ch, in->ch);
	in->eofs++;
}

static void inbox_reset(struct inbox *in)
{
	for (size_t i = 0; i < in->n; i++) {
		free(in->msgs[i].payload);
		if (in->msgs[i].fd >= 0)
			close(in->msgs[i].fd);
	}
	in->n = 0;
}

static int setup(void **state)
{
	int sv[2];
	struct fx *fx = calloc(1, sizeof(*fx));
	if (!fx || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	fx->base = event_base_new();
	if (!fx->base)
		return -1;
	fx->sup.ch = ipc_chan_new(fx->base, sv[0], SUP_ID, on_msg, on_eof, &fx->sup);
	fx->wrk.ch = ipc_chan_new(fx->base, sv[1], WORKER_ID, on_msg, on_eof, &fx->wrk);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;
	ipc_chan_free(fx->sup.ch);
	ipc_chan_free(fx->wrk.ch);
	inbox_reset(&fx->sup);
	inbox_reset(&fx->wrk);
	event_base_free(fx->base);
	free(fx);
	return 0;
}

/* One loop pass that runs what is ready and never blocks. */
static void turn(struct fx *fx)
{
	event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static bool run_until_count(struct fx *fx, const struct inbox *in, size_t n)
{
	for (int i = 0; i < MAX_TURNS && in->n < n; i++)
		turn(fx);
	return in->n >= n;
}

static void turns(struct fx *fx, int n)
{
	for (int i = 0; i < n; i++)
		turn(fx);
}

static void fill_payload(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

/* ---- round trips ---- */

struct rt_case {
	enum ipc_type type;
	uint32_t reqid;
	uint32_t len;
	bool to_worker;            /* sup -> worker, else worker -> sup */
};

static const struct rt_case rt_cases[] = {
	{ IPC_WORKER_READY, 0, 0, false },
	{ IPC_RELOAD, 1, 0, true },
	{ IPC_RELOAD_DONE, 1, 4, false },
	{ IPC_SHUTDOWN, 7, 4, true },
	{ IPC_PAUSE, 0xFFFFFFFF, 1, true },
	{ IPC_RESUME, 12345, 1000, true },
	{ IPC_LOG_REOPEN, 99, 65535, true },
	{ IPC_RELOAD_DONE, 42, IPC_MAX_PAYLOAD, false },
	{ IPC_SHUTDOWN, 3, IPC_MAX_PAYLOAD, true },
};

static void test_round_trip_table(void **state)
{
	struct fx *fx = *state;
	static uint8_t payload[IPC_MAX_PAYLOAD];

	for (size_t k = 0; k < ARRAY_SIZE(rt_cases); k++) {
		const struct rt_case *c = &rt_cases[k];
		struct inbox *from = c->to_worker ? &fx->sup : &fx->wrk;
		struct inbox *to = c->to_worker ? &fx->wrk : &fx->sup;
		print_message("case %zu: %s len %u\n", k, ipc_type_name(c->type), c->len);
		fill_payload(payload, c->len, (uint32_t)k);
		inbox_reset(&fx->sup);
		inbox_reset(&fx->wrk);
		assert_int_equal(ipc_send(from->ch, c->type, c->reqid, c->len ? payload : NULL,
					  c->len, -1), 0);
		assert_true(run_until_count(fx, to, 1));
		turns(fx, 5);
		assert_int_equal(to->n, 1);
		const struct got *g = &to->msgs[0];
		assert_int_equal(g->hdr.type, c->type);
		assert_int_equal(g->hdr.reqid, c->reqid);
		assert_int_equal(g->hdr.len, c->len);
		assert_int_equal(g->hdr.flags, 0);
		assert_int_equal(g->hdr.worker, c->to_worker ? SUP_ID : WORKER_ID);
		assert_int_equal(g->fd, -1);
		assert_memory_equal(g->payload, payload, c->len);
		assert_int_equal(from->n, 0);
	}
	assert_int_equal(fx->sup.eofs + fx->wrk.eofs, 0);
}

static void test_too_large(void **state)
{
	struct fx *fx = *state;
	uint8_t *big = calloc(1, IPC_MAX_PAYLOAD + 1);
	assert_non_null(big);

	assert_int_equal(ipc_send(fx->sup.ch, IPC_RELOAD, 1, big, IPC_MAX_PAYLOAD + 1, -1), -1);
	assert_int_equal(ipc_send(fx->sup.ch, IPC_RELOAD, 2, big, UINT32_MAX, -1), -1);
	/* Refused without side effects: nothing arrives, the channel works. */
	assert_int_equal(ipc_send(fx->sup.ch, IPC_PAUSE, 3, big, 8, -1), 0);
	assert_true(run_until_count(fx, &fx->wrk, 1));
	turns(fx, 5);
	assert_int_equal(fx->wrk.n, 1);
	assert_int_equal(fx->wrk.msgs[0].hdr.reqid, 3);
	assert_int_equal(fx->wrk.eofs, 0);
	free(big);
}

/* ---- file descriptors ---- */

static void test_fd_passing(void **state)
{
	struct fx *fx = *state;
	int p[2];
	char buf[16];
	assert_int_equal(pipe(p), 0);

	assert_int_equal(ipc_send(fx->sup.ch, IPC_RELOAD, 5, "fd", 2, p[0]), 0);
	assert_int_equal(ipc_send(fx->sup.ch, IPC_PAUSE, 6, NULL, 0, -1), 0);
	assert_true(run_until_count(fx, &fx->wrk, 2));
	const struct got *g = &fx->wrk.msgs[0];
	assert_int_equal(g->hdr.reqid, 5);
	assert_memory_equal(g->payload, "fd", 2);
	assert_true(g->fd >= 0);
	assert_int_not_equal(g->fd, p[0]);
	/* Received close-on-exec, so a later exec does not leak it. */
	assert_true(fcntl(g->fd, F_GETFD) & FD_CLOEXEC);
	/* Only the message that carried it has an fd. */
	assert_int_equal(fx->wrk.msgs[1].fd, -1);

	/* The same pipe: bytes written at one end come out of the passed fd. */
	assert_int_equal(write(p[1], "hello", 5), 5);
	assert_int_equal(read(g->fd, buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "hello", 5);

	/* The sender's own fd is still the caller's: ipc_send duplicated it. */
	assert_true(fcntl(p[0], F_GETFD) >= 0);
	assert_int_equal(write(p[1], "again", 5), 5);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "again", 5);
	close(p[0]);
	close(p[1]);
}

static void test_fd_passing_socket(void **state)
{
	struct fx *fx = *state;
	int sp[2];
	char buf[8];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);

	/* A connection handed from worker to supervisor still talks to its peer. */
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_RELOAD_DONE, 1, NULL, 0, sp[0]), 0);
	close(sp[0]);
	assert_true(run_until_count(fx, &fx->sup, 1));
	int fd = fx->sup.msgs[0].fd;
	assert_true(fd >= 0);
	assert_int_equal(send(fd, "ping", 4, 0), 4);
	assert_int_equal(recv(sp[1], buf, sizeof(buf), 0), 4);
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(send(sp[1], "pong", 4, 0), 4);
	assert_int_equal(recv(fd, buf, sizeof(buf), 0), 4);
	assert_memory_equal(buf, "pong", 4);
	close(sp[1]);
}

/* ---- queueing ---- */

static void test_many_queued_in_order(void **state)
{
	struct fx *fx = *state;
	enum { N = 5000, LEN = 1500, FD_EVERY = 250 };
	static uint8_t payload[LEN];
	int pipes[N / FD_EVERY][2];

	/* Far more than the socket holds: most wait in the queue. */
	for (uint32_t i = 0; i < N; i++) {
		int fd = -1;
		uint32_t len = i % 3 == 0 ? 0 : LEN - (i % 100);
		fill_payload(payload, len, i);
		if (i % FD_EVERY == 0) {
			assert_int_equal(pipe(pipes[i / FD_EVERY]), 0);
			fd = pipes[i / FD_EVERY][0];
		}
		assert_int_equal(ipc_send(fx->sup.ch, (enum ipc_type)(i % IPC_TYPE_COUNT), i,
					  len ? payload : NULL, len, fd), 0);
		if (fd >= 0)
			close(fd);
	}
	assert_true(fx->wrk.n == 0);
	assert_true(run_until_count(fx, &fx->wrk, N));
	turns(fx, 10);
	assert_int_equal(fx->wrk.n, N);
	for (uint32_t i = 0; i < N; i++) {
		const struct got *g = &fx->wrk.msgs[i];
		uint32_t len = i % 3 == 0 ? 0 : LEN - (i % 100);
		assert_int_equal(g->hdr.reqid, i);
		assert_int_equal(g->hdr.type, i % IPC_TYPE_COUNT);
		assert_int_equal(g->hdr.len, len);
		fill_payload(payload, len, i);
		assert_memory_equal(g->payload, payload, len);
		if (i % FD_EVERY != 0) {
			assert_int_equal(g->fd, -1);
			continue;
		}
		/* Each fd arrives with its own message. */
		char c = (char)('a' + i / FD_EVERY);
		char r = 0;
		assert_true(g->fd >= 0);
		assert_int_equal(write(pipes[i / FD_EVERY][1], &c, 1), 1);
		assert_int_equal(read(g->fd, &r, 1), 1);
		assert_int_equal(r, c);
		close(pipes[i / FD_EVERY][1]);
	}
	assert_int_equal(fx->sup.eofs + fx->wrk.eofs, 0);
}

/* ---- corked sends ---- */

/* Nothing of the channel's is readable at the peer. */
static bool nothing_sent(struct fx *fx)
{
	char c;
	ssize_t n = recv(ipc_chan_fd(fx->wrk.ch), &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static void test_cork_holds_then_sends_in_order(void **state)
{
	struct fx *fx = *state;
	int p[2];
	assert_int_equal(pipe(p), 0);

	ipc_cork(fx->sup.ch);
	ipc_cork(fx->sup.ch);                        /* nested: the outer one counts */
	assert_int_equal(ipc_send(fx->sup.ch, IPC_SLOT_RELEASE, 1, "r", 1, -1), 0);
	assert_int_equal(ipc_send(fx->sup.ch, IPC_SLOT_REQ, 2, NULL, 0, p[0]), 0);
	turns(fx, 10);
	assert_true(nothing_sent(fx));
	ipc_uncork(fx->sup.ch);
	assert_int_equal(ipc_send(fx->sup.ch, IPC_SLOT_REQ, 3, "q", 1, -1), 0);
	turns(fx, 10);
	assert_true(nothing_sent(fx));
	assert_int_equal(fx->wrk.n, 0);
	ipc_uncork(fx->sup.ch);
	/* All three went in the uncork itself, before any loop turn. */
	assert_false(nothing_sent(fx));
	assert_true(run_until_count(fx, &fx->wrk, 3));
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(fx->wrk.msgs[i].hdr.reqid, i + 1);
	assert_int_equal(fx->wrk.msgs[0].hdr.type, IPC_SLOT_RELEASE);
	assert_int_equal(fx->wrk.msgs[0].fd, -1);
	assert_true(fx->wrk.msgs[1].fd >= 0);        /* the fd goes with its own message */
	assert_int_equal(fx->wrk.msgs[2].fd, -1);

	/* Uncorked, a send goes at once; an extra uncork changes nothing. */
	ipc_uncork(fx->sup.ch);
	assert_int_equal(ipc_send(fx->sup.ch, IPC_PAUSE, 4, NULL, 0, -1), 0);
	assert_false(nothing_sent(fx));
	assert_true(run_until_count(fx, &fx->wrk, 4));
	assert_int_equal(fx->wrk.msgs[3].hdr.reqid, 4);
	ipc_cork(NULL);                              /* no channel: nothing to hold */
	ipc_uncork(NULL);
	close(p[0]);
	close(p[1]);
}

/* More than the socket holds, queued corked: the uncork sends what fits
 * and the rest follows as the peer reads, in order. */
static void test_cork_more_than_the_socket_holds(void **state)
{
	struct fx *fx = *state;
	enum { N = 3000, LEN = 2000 };
	static uint8_t payload[LEN];

	ipc_cork(fx->wrk.ch);
	for (uint32_t i = 0; i < N; i++) {
		fill_payload(payload, LEN, i);
		assert_int_equal(ipc_send(fx->wrk.ch, IPC_RELOAD_DONE, i, payload, LEN, -1), 0);
	}
	turns(fx, 5);
	assert_int_equal(fx->sup.n, 0);
	ipc_uncork(fx->wrk.ch);
	assert_true(run_until_count(fx, &fx->sup, N));
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(fx->sup.msgs[i].hdr.reqid, i);
		fill_payload(payload, LEN, i);
		assert_memory_equal(fx->sup.msgs[i].payload, payload, LEN);
	}
}

/* Leaving while corked (ipc_chan_drain) still sends what was queued. */
static void test_drain_sends_what_is_corked(void **state)
{
	struct fx *fx = *state;
	ipc_cork(fx->wrk.ch);
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_SHUTDOWN_READY, 9, NULL, 0, -1), 0);
	assert_true(ipc_chan_drain(fx->wrk.ch, 1000));
	assert_true(run_until_count(fx, &fx->sup, 1));
	assert_int_equal(fx->sup.msgs[0].hdr.reqid, 9);
}

static void test_both_directions_interleaved(void **state)
{
	struct fx *fx = *state;
	enum { N = 2000 };
	uint8_t payload[600];

	for (uint32_t i = 0; i < N; i++) {
		fill_payload(payload, sizeof(payload), i);
		assert_int_equal(ipc_send(fx->sup.ch, IPC_RELOAD, i, payload, sizeof(payload), -1), 0);
		assert_int_equal(ipc_send(fx->wrk.ch, IPC_RELOAD_DONE, i, payload, sizeof(payload), -1), 0);
		if (i % 7 == 0)
			turn(fx);
	}
	assert_true(run_until_count(fx, &fx->wrk, N));
	assert_true(run_until_count(fx, &fx->sup, N));
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(fx->wrk.msgs[i].hdr.reqid, i);
		assert_int_equal(fx->wrk.msgs[i].hdr.worker, SUP_ID);
		assert_int_equal(fx->sup.msgs[i].hdr.reqid, i);
		assert_int_equal(fx->sup.msgs[i].hdr.worker, WORKER_ID);
		fill_payload(payload, sizeof(payload), i);
		assert_memory_equal(fx->sup.msgs[i].payload, payload, sizeof(payload));
	}
}

/* A handler that reads another channel to its end (the supervisor does,
 * for a worker that has exited) in the middle of a batch: the batch's
 * other messages arrive intact. */
struct nested {
	struct inbox in;
	struct ipc_chan *other;    /* read to its end at the first message */
};

static void on_msg_nested(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload,
			  int fd, void *arg)
{
	struct nested *ne = arg;
	on_msg(ch, hdr, payload, fd, &ne->in);
	if (ne->in.n == 1)
		ipc_chan_read_rest(ne->other);
}

/* Sends n raw RELOAD_DONE messages of len bytes, reqids from first. */
static void send_raw(int fd, uint32_t first, uint32_t n, uint32_t len)
{
	static uint8_t msg[sizeof(struct ipc_hdr) + 4096];
	assert_true(len <= 4096);
	for (uint32_t i = first; i < first + n; i++) {
		struct ipc_hdr h = { .type = IPC_RELOAD_DONE, .worker = WORKER_ID, .reqid = i, .len = len };
		memcpy(msg, &h, sizeof(h));
		fill_payload(msg + sizeof(h), len, i);
		assert_int_equal(send(fd, msg, sizeof(h) + len, 0), (ssize_t)(sizeof(h) + len));
	}
}

static void test_read_inside_a_handler_keeps_the_batch(void **state)
{
	struct fx *fx = *state;
	enum { N = 6, LEN = 3000 };
	static uint8_t payload[LEN];
	struct nested *ne = calloc(1, sizeof(*ne));
	struct inbox *other = calloc(1, sizeof(*other));
	int a_sv[2], o_sv[2];
	assert_non_null(ne);
	assert_non_null(other);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, a_sv), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, o_sv), 0);
	/* The other channel's loop never runs: only the handler reads it. */
	struct event_base *idle_base = event_base_new();
	other->ch = ipc_chan_new(idle_base, o_sv[0], SUP_ID, on_msg, on_eof, other);
	ne->other = other->ch;
	ne->in.ch = ipc_chan_new(fx->base, a_sv[0], SUP_ID, on_msg_nested, on_eof, ne);

	send_raw(o_sv[1], 100, N, LEN);
	send_raw(a_sv[1], 0, N, LEN);
	assert_true(run_until_count(fx, &ne->in, N));
	assert_int_equal(other->n, N);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(ne->in.msgs[i].hdr.reqid, i);
		fill_payload(payload, LEN, i);
		assert_memory_equal(ne->in.msgs[i].payload, payload, LEN);
		assert_int_equal(other->msgs[i].hdr.reqid, 100 + i);
		fill_payload(payload, LEN, 100 + i);
		assert_memory_equal(other->msgs[i].payload, payload, LEN);
	}
	ipc_chan_free(ne->in.ch);
	ipc_chan_free(other->ch);
	event_base_free(idle_base);
	close(a_sv[1]);
	close(o_sv[1]);
	inbox_reset(&ne->in);
	inbox_reset(other);
	free(ne);
	free(other);
}

/* ---- end of the channel ---- */

static void test_eof_on_peer_close(void **state)
{
	struct fx *fx = *state;

	/* Messages sent before the close still arrive, then EOF, once. */
	assert_int_equal(ipc_send(fx->sup.ch, IPC_SHUTDOWN, 1, "\0\0\0\0", 4, -1), 0);
	ipc_chan_free(fx->sup.ch);
	fx->sup.ch = NULL;
	turns(fx, 50);
	assert_int_equal(fx->wrk.n, 1);
	assert_int_equal(fx->wrk.msgs[0].hdr.type, IPC_SHUTDOWN);
	assert_int_equal(fx->wrk.eofs, 1);
	/* A dead channel refuses to send. */
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_WORKER_READY, 0, NULL, 0, -1), -1);
	turns(fx, 10);
	assert_int_equal(fx->wrk.eofs, 1);
}

static void test_send_to_closed_peer(void **state)
{
	struct fx *fx = *state;
	struct inbox *lone = calloc(1, sizeof(*lone));
	int sv[2];
	assert_non_null(lone);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	lone->ch = ipc_chan_new(fx->base, sv[0], SUP_ID, on_msg, on_eof, lone);

	/* The peer is gone before anything was read: the failed send reports
	 * the end itself, once, and later sends are refused. */
	close(sv[1]);
	int rc = ipc_send(lone->ch, IPC_RELOAD, 1, NULL, 0, -1);
	assert_true(rc == 0 || rc == -1);
	turns(fx, 10);
	assert_int_equal(lone->eofs, 1);
	assert_int_equal(ipc_send(lone->ch, IPC_RELOAD, 2, NULL, 0, -1), -1);
	turns(fx, 10);
	assert_int_equal(lone->eofs, 1);
	assert_int_equal(lone->n, 0);
	ipc_chan_free(lone->ch);
	free(lone);
}

/* A worker hands its last connections over and exits; the supervisor's
 * next send to it fails before it has read them. The failed send must not
 * end the reading: the messages (and the sockets they carry) are still
 * read, by the loop or by ipc_chan_read_rest, and the end comes once. */
static void test_failed_send_still_reads_what_came(void **state)
{
	struct fx *fx = *state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);

	assert_int_equal(ipc_send(fx->wrk.ch, IPC_TAKEN_CLIENT, 1, "a", 1, sv[0]), 0);
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_TAKEN_CLIENT, 2, "b", 1, -1), 0);
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_TAKEN_SERVER, 3, "c", 1, sv[1]), 0);
	close(sv[0]);
	close(sv[1]);
	ipc_chan_free(fx->wrk.ch);
	fx->wrk.ch = NULL;

	/* Nothing read yet: the send finds the peer gone and says so. */
	assert_int_equal(ipc_send(fx->sup.ch, IPC_POOL_WANT, 0, "x", 1, -1), -1);
	assert_int_equal(fx->sup.eofs, 0);
	ipc_chan_read_rest(fx->sup.ch);
	assert_int_equal(fx->sup.n, 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(fx->sup.msgs[i].hdr.reqid, i + 1);
	assert_true(fx->sup.msgs[0].fd >= 0);
	assert_int_equal(fx->sup.msgs[1].fd, -1);
	assert_true(fx->sup.msgs[2].fd >= 0);
	assert_int_equal(fx->sup.eofs, 1);
	turns(fx, 10);
	assert_int_equal(fx->sup.eofs, 1);
	assert_int_equal(ipc_send(fx->sup.ch, IPC_POOL_WANT, 0, "x", 1, -1), -1);
}

/* The same when the worker exits with the supervisor's last messages
 * unread: the kernel reports that as ECONNRESET on the supervisor's next
 * read of a SEQPACKET socket, before the messages still queued there.
 * The error is the peer's close, not the end: what it sent is read. */
static void test_peer_closing_unread_still_reads_what_came(void **state)
{
	struct fx *fx = *state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);

	assert_int_equal(ipc_send(fx->sup.ch, IPC_SLOT_GRANT, 9, "g", 1, -1), 0);
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_TAKEN_CLIENT, 1, "a", 1, sv[0]), 0);
	assert_int_equal(ipc_send(fx->wrk.ch, IPC_TAKEN_SERVER, 2, "b", 1, sv[1]), 0);
	close(sv[0]);
	close(sv[1]);
	ipc_chan_free(fx->wrk.ch);      /* the grant still unread there */
	fx->wrk.ch = NULL;

	turns(fx, 10);
	assert_int_equal(fx->sup.n, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(fx->sup.msgs[i].hdr.reqid, i + 1);
		assert_true(fx->sup.msgs[i].fd >= 0);
	}
	assert_int_equal(fx->sup.eofs, 1);
}

/* ---- malformed input is our own bug: fatal ---- */

struct bad_case {
	const char *name;
	uint16_t type;
	uint32_t hdr_len;           /* what the header claims */
	size_t body;                /* bytes actually after the header */
	size_t total;               /* 0 = header + body; else a raw short datagram */
};

static const struct bad_case bad_cases[] = {
	{ "short datagram", 0, 0, 0, 3 },
	{ "length larger than sent", IPC_RELOAD, 10, 4, 0 },
	{ "length smaller than sent", IPC_RELOAD, 2, 4, 0 },
	{ "unknown type", IPC_TYPE_COUNT, 0, 0, 0 },
	{ "type 0xffff", 0xffff, 0, 0, 0 },
};

static struct event_base *child_base;     /* reachable for the leak checker at exit() */
static struct ipc_chan *child_chan;
static struct inbox child_inbox;

/* Runs a channel in a child on `fd` and returns its exit status. */
static int child_status(int fd)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		child_base = event_base_new();
		child_chan = ipc_chan_new(child_base, fd, 0, on_msg, on_eof, &child_inbox);
		child_inbox.ch = child_chan;
		for (int i = 0; i < 1000; i++)
			event_base_loop(child_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		_exit(child_inbox.n == 1 ? 0 : 2);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

static void test_malformed_is_fatal(void **state)
{
	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(bad_cases); k++) {
		const struct bad_case *c = &bad_cases[k];
		int sv[2];
		uint8_t dgram[sizeof(struct ipc_hdr) + 16] = { 0 };
		struct ipc_hdr hdr = { .type = c->type, .len = c->hdr_len, .worker = 0 };
		size_t n = c->total ? c->total : sizeof(hdr) + c->body;

		print_message("case: %s\n", c->name);
		memcpy(dgram, &hdr, sizeof(hdr));
		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
		assert_int_equal(send(sv[0], dgram, n, 0), (ssize_t)n);
		int st = child_status(sv[1]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 1);
		close(sv[0]);
		close(sv[1]);
	}

	/* Control: a well-formed datagram is delivered, no exit(1). */
	int sv[2];
	struct ipc_hdr hdr = { .type = IPC_PAUSE, .len = 0, .worker = -1 };
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(send(sv[0], &hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	int st = child_status(sv[1]);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_type_names(void **state)
{
	(void)state;
	for (int i = 0; i < IPC_TYPE_COUNT; i++) {
		assert_non_null(ipc_type_name((enum ipc_type)i));
		assert_string_not_equal(ipc_type_name((enum ipc_type)i), "?");
		for (int j = 0; j < i; j++)
			assert_string_not_equal(ipc_type_name((enum ipc_type)i),
						ipc_type_name((enum ipc_type)j));
	}
	assert_string_equal(ipc_type_name(IPC_RELOAD_DONE), "RELOAD_DONE");
	assert_string_equal(ipc_type_name(IPC_TYPE_COUNT), "?");
}

/* ---- typed messages ---- */

/* Each builder's message, read back by its reader from the other side. */
static void test_typed_round_trip(void **state)
{
	struct fx *fx = *state;
	struct slot_req r = { .db = "app", .user = "alice", .pool_limit = 5, .wait = 1 };
	struct pool_want w = { .pool = { .db = "app", .user = "bob" }, .n = 2, .other_since = 77 };
	struct login_failure f = { .pool = { .db = "d", .user = "u" }, .code = "28P01",
				   .msg = "password authentication failed", .age_usec = 9 };
	assert_int_equal(ipc_send_slot(fx->wrk.ch, IPC_SLOT_REQ, 41, &r), 0);
	assert_int_equal(ipc_send_want(fx->wrk.ch, &w), 0);
	assert_int_equal(ipc_send_login_failure(fx->wrk.ch, &f), 0);
	struct cancelkey k = { .pid = 0x01020304u, .len = 32 };
	for (int i = 0; i < 32; i++)
		k.secret[i] = (uint8_t)(i + 1);
	struct cancel_waiter wt = { .worker = 1, .client = 0x1122334455ull };
	assert_int_equal(ipc_send_cancel(fx->wrk.ch, &k, &wt), 0);
	assert_int_equal(ipc_send_i32(fx->wrk.ch, IPC_RELOAD_DONE, 0, -1, -1), 0);
	assert_int_equal(ipc_send_text(fx->wrk.ch, IPC_ADMIN_REQ, 8, "SHOW POOLS"), 0);
	assert_int_equal(ipc_send_empty(fx->wrk.ch, IPC_WORKER_READY), 0);
	assert_true(run_until_count(fx, &fx->sup, 7));
	const struct got *g = fx->sup.msgs;

	struct slot_req r2;
	assert_true(ipc_get_slot(&g[0].hdr, g[0].payload, &r2));
	assert_int_equal(g[0].hdr.reqid, 41);
	assert_string_equal(r2.db, "app");
	assert_int_equal(r2.pool_limit, 5);
	struct pool_want w2;
	assert_true(ipc_get_want(&g[1].hdr, g[1].payload, &w2));
	assert_string_equal(w2.pool.user, "bob");
	assert_int_equal(w2.other_since, 77);
	struct login_failure f2;
	assert_true(ipc_get_login_failure(&g[2].hdr, g[2].payload, &f2));
	assert_string_equal(f2.code, "28P01");
	assert_string_equal(f2.msg, "password authentication failed");
	struct cancelkey k2;
	struct cancel_waiter wt2;
	assert_true(ipc_get_cancel(&g[3].hdr, g[3].payload, &k2, &wt2));
	assert_int_equal(wt2.worker, 1);
	assert_int_equal(wt2.client, 0x1122334455ull);
	assert_int_equal(k2.pid, 0x01020304u);
	assert_int_equal(k2.len, 32);
	assert_memory_equal(k2.secret, k.secret, 32);
	int32_t v;
	assert_true(ipc_get_i32(&g[4].hdr, g[4].payload, &v));
	assert_int_equal(v, -1);
	const char *text;
	assert_true(ipc_get_text(&g[5].hdr, g[5].payload, &text));
	assert_string_equal(text, "SHOW POOLS");
	assert_int_equal(g[6].hdr.type, IPC_WORKER_READY);
	assert_int_equal(g[6].hdr.len, 0);
}

/* A payload of the wrong size, or a text without its NUL, is refused by
 * every reader; names that fill their field come out terminated. */
static void test_typed_bad_payloads(void **state)
{
	uint8_t buf[sizeof(struct login_failure) + 8];
	struct ipc_hdr h = { .type = IPC_SLOT_REQ, .worker = 2 };
	struct slot_req r;
	struct pool_want w;
	struct login_failure f;
	struct cancelkey k;
	struct cancel_waiter wt;
	int32_t v;
	const char *text;
	(void)state;
	memset(buf, 'x', sizeof(buf));
	for (uint32_t len = 0; len < sizeof(buf); len++) {
		h.len = len;
		assert_int_equal(ipc_get_slot(&h, buf, &r), len == sizeof(r));
		assert_int_equal(ipc_get_want(&h, buf, &w), len == sizeof(w));
		assert_int_equal(ipc_get_login_failure(&h, buf, &f), len == sizeof(f));
		assert_false(ipc_get_cancel(&h, buf, &k, &wt));     /* a key of 0x7878 bytes */
		assert_int_equal(ipc_get_cancel_done(&h, buf, &wt), len == sizeof(wt));
		assert_int_equal(ipc_get_i32(&h, buf, &v), len == 4);
		assert_false(ipc_get_text(&h, buf, &text));            /* no NUL anywhere */
	}
	h.len = sizeof(r);
	assert_true(ipc_get_slot(&h, buf, &r));
	assert_int_equal(strlen(r.db), sizeof(r.db) - 1);
	assert_int_equal(strlen(r.user), sizeof(r.user) - 1);
	h.len = sizeof(f);
	assert_true(ipc_get_login_failure(&h, buf, &f));
	assert_int_equal(strlen(f.msg), sizeof(f.msg) - 1);
	assert_int_equal(strlen(f.code), sizeof(f.code) - 1);
	buf[3] = 0;
	h.len = 4;
	assert_true(ipc_get_text(&h, buf, &text));
	assert_string_equal(text, "xxx");
	/* A cancel key of the right size whose length is outside 4..256. */
	static const struct {
		uint16_t len;
		bool ok;
	} keys[] = { { 0, false }, { 3, false }, { 4, true }, { 256, true }, { 257, false } };
	h.type = IPC_CANCEL_FWD;
	h.len = sizeof(k);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		struct cancelkey in = { .pid = 9, .len = keys[i].len };
		assert_int_equal(ipc_get_cancel(&h, &in, &k, &wt), keys[i].ok);
		assert_int_equal(wt.worker, -1);            /* a key alone: nobody waits */
	}
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_round_trip_table),
		T(test_too_large),
		T(test_fd_passing),
		T(test_fd_passing_socket),
		T(test_many_queued_in_order),
		T(test_cork_holds_then_sends_in_order),
		T(test_cork_more_than_the_socket_holds),
		T(test_drain_sends_what_is_corked),
		T(test_both_directions_interleaved),
		T(test_eof_on_peer_close),
		T(test_send_to_closed_peer),
		T(test_failed_send_still_reads_what_came),
		T(test_peer_closing_unread_still_reads_what_came),
		T(test_read_inside_a_handler_keeps_the_batch),
		cmocka_unit_test(test_malformed_is_fatal),
		cmocka_unit_test(test_type_names),
		T(test_typed_round_trip),
		cmocka_unit_test(test_typed_bad_payloads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

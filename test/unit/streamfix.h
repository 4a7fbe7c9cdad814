/* pgcrew — the stream tests' fixture (test_stream.c, test_stream_tls.c):
 * byte strings of generated messages, a scripted stream owner (struct end:
 * a stream, the test's end of its socket, what the owner saw) and the
 * checks on what reached a far end. Failures are cmocka assertions. */
#ifndef PGCREW_TEST_STREAMFIX_H
#define PGCREW_TEST_STREAMFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include "proto/build.h"
#include "proto/packet.h"
#include "stream.h"

#define MAX_CALLS   8192
#define SMALL_SOCKBUF 4096      /* the kernel doubles it; still far below our payloads */

/* What the scripted owner does with the n-th message. */
enum step {
	STEP_FORWARD,
	STEP_SKIP,
	STEP_CONSUME,        /* NEED_FULL until complete, then capture it and CONSUMED */
	STEP_CONSUME_NOW,    /* CONSUMED at the first offer, whatever is buffered */
	STEP_FULL_FORWARD,   /* NEED_FULL until complete, then FORWARD */
	STEP_PAUSE_ONCE,     /* PAUSE at the first offer, FORWARD after stream_resume */
	STEP_CLOSE,          /* stream_close() inside the callback, then SA_STOP */
	STEP_GROW,           /* NEED_MORE until 9 bytes, then the head grows by GROW_BY (0xEE) */
	STEP_SHRINK,         /* NEED_MORE until 9 + SHRINK_BY bytes, then those are cut */
	STEP_INJECT,         /* FLUSH while bytes are queued, then a pooler message, then FORWARD */
	STEP_MORE_CONSUME,   /* NEED_MORE until complete (even beyond the buffer), then as CONSUME */
	STEP_CLOSE_PEER,     /* a pooler message to the peer, then the peer is forgotten (it goes) */
};

#define GROW_BY   20
#define SHRINK_BY 6
extern const uint8_t injected_msg[9];   /* what STEP_INJECT writes */

struct bytes {
	uint8_t *p;
	size_t len, cap;
};

struct call {
	uint8_t type;
	uint32_t len, hdr_len;
	size_t avail;
	int64_t seq;         /* message sequence number, -1 if not buffered yet */
};

struct end {
	struct stream s;
	int fd;                      /* the test's end of the socketpair */
	const enum step *script;     /* per message; dflt after the end */
	size_t n_script;
	enum step dflt;
	size_t msg_idx;              /* messages decided so far */
	size_t paused_for;           /* msg_idx + 1 of the message paused once */
	struct call *calls;
	size_t n_calls;
	size_t ev_count[SE_COUNT];   /* events seen, by kind */
	size_t n_events;
	enum stream_event first_event;
	const char *last_errmsg;
	struct bytes consumed;       /* every consumed message, concatenated */
	bool keep_open;              /* do not close on SE_EOF / SE_ERROR */
};

/* ---- byte buffers and message generation ---- */

void bytes_add(struct bytes *b, const void *p, size_t n);
void bytes_free(struct bytes *b);
/* A typed message of `len` wire bytes (type byte included, len >= 9) whose
 * body starts with its big-endian sequence number. */
void add_msg(struct bytes *b, uint8_t type, uint32_t seq, uint32_t len);
uint32_t be32(const uint8_t *p);
/* NoticeResponses, as the pooler would send them. */
void notices(struct pktbuf *pb, int n);
/* Splits a byte string into typed messages ('D' and 'N' only); false if it
 * is not a clean sequence of complete messages. */
bool parse_messages(const struct bytes *b, uint8_t *types, size_t max, size_t *n);
/* Messages of `type` and lens[i] bytes (sequence numbers from 0) into in;
 * what the peer must get under script[i] into want (rewritten heads,
 * injected messages), what the owner captures (STEP_CONSUME,
 * STEP_MORE_CONSUME) into eaten, NULL when the script consumes nothing;
 * e's script set and restarted. */
void script_case(struct end *e, uint8_t type, const enum step *script, const uint32_t *lens, size_t n,
		 struct bytes *in, struct bytes *want, struct bytes *eaten);
/* Messages 'D' of mixed sizes (every 17th of 100000 bytes, more than a
 * buffer) until in holds total bytes; returns how many. */
uint32_t add_bulk(struct bytes *in, size_t total);

/* ---- the scripted owner ---- */

/* The stream callbacks of an end (s->owner is the struct end): on_pkt
 * records the call and follows the script; on_event counts, and closes
 * the stream on SE_EOF / SE_ERROR unless keep_open. */
enum stream_action on_pkt(struct stream *s, const struct pkt_hdr *h, const uint8_t *data, size_t avail);
void on_event(struct stream *s, enum stream_event ev);
size_t count_events(const struct end *e, enum stream_event ev);
/* One callback per message, in order; the sequence number is checked
 * wherever the callback saw it (not with only the header buffered). */
void assert_calls_in_order(const struct end *e, size_t n_msgs);

/* ---- a stream and the test's end of its socket ---- */

/* The stream on stream_fd (stream_base must be set), the test on test_fd. */
void end_attach(struct end *e, int stream_fd, int test_fd);
/* The same on a fresh non-blocking socketpair. */
void end_open(struct end *e);
void end_close(struct end *e);
/* Small buffers on the stream's sending side and the test's receiving one. */
void small_sockbufs(struct end *e);
/* Everything the non-blocking fd has now, appended to out. */
void drain_fd(int fd, struct bytes *out);

/* ---- both modes ---- */

/* The tests as the group "recv/send", then, where the kernel gives an
 * io_uring ring, as "io_uring batches" (stream_set_batching on), with a
 * check that batches really ran. Returns the failures. */
int run_both_modes(const struct CMUnitTest *tests, size_t n, CMFixtureFunction group_setup,
		   CMFixtureFunction group_teardown);

#endif

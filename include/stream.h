/* pgcrew — the transport under every client and server connection.
 * It knows bytes and message boundaries, not protocol states: it reads into a
 * buffer borrowed from the worker's cache, finds each message header, asks
 * the owner what to do with the message (forward to the linked stream, skip,
 * handle internally), and sends forwarded bytes straight from its own buffer
 * to the peer's socket: one recv and one send per batch, no copies. */
#ifndef PGCREW_STREAM_H
#define PGCREW_STREAM_H

#include "types.h"
#include "util.h"
#include "proto/packet.h"
#include "proto/build.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <sys/types.h>

struct stream;
struct tls_conn;

/* What the owner decides for one message (see stream_pkt_fn). */
enum stream_action {
	SA_FORWARD,        /* send the whole message to s->peer */
	SA_SKIP,           /* drop it */
	SA_CONSUMED,       /* owner handled the complete message; drop its bytes */
	SA_NEED_FULL,      /* call again once the whole message is buffered: one
	                      larger than the buffer (up to s->max_whole) gets a
	                      buffer of its own, freed once the message has gone */
	SA_PAUSE,          /* leave it unconsumed; stop until stream_resume() */
	SA_STOP,           /* the owner closed or re-targeted the stream: stop now */
	SA_FLUSH,          /* send the bytes queued before this message, then ask again */
	SA_NEED_MORE,      /* ask again with more of the message buffered (it may be
	                      larger than the buffer: only its start is needed).
	                      Said with the buffer full of the message's start, it
	                      is read whole, as for SA_NEED_FULL */
};

/* The largest message a stream holds whole unless its owner sets
 * s->max_whole lower: PostgreSQL builds the body of every message it sends
 * in a StringInfo, which holds at most MaxAllocSize - 1 (1 GiB - 2) bytes,
 * so no error, notice, ParameterStatus or DataRow from a server is larger
 * than that plus the type byte and the length word. */
#define STREAM_WHOLE_MAX (0x3ffffffeu + 5u)

/* Bytes kept free before the data of every buffer, so that a message can
 * be rewritten in place a little longer (stream_rewrite_head). */
#define STREAM_HEADROOM 64

enum stream_event {
	SE_CONNECTED,      /* outgoing connect finished */
	SE_CONNECT_FAILED,
	SE_EOF,            /* peer closed */
	SE_ERROR,          /* read/write error or a framing violation (see s->errmsg) */
	SE_FLUSHED,        /* everything queued for this socket has been written */
	SE_TLS_READY,      /* TLS handshake completed */
	SE_TLS_HELLO,      /* first byte is a TLS record (direct TLS); nothing consumed */
	SE_COUNT
};

/*
 * Called for each message header. `data` points at the first byte of the
 * message, `avail` bytes are buffered (at least the header, maybe less than
 * hdr->len). SA_CONSUMED and SA_NEED_FULL: the owner may only rely on the
 * body when avail >= hdr->len. Returning SA_STOP is required after closing
 * the stream or changing its peer from inside the callback.
 *
 * A message the owner needs whole (SA_NEED_FULL, or SA_NEED_MORE with the
 * buffer full) and that is larger than the buffer moves, once what is
 * queued before it has been sent, into a buffer of exactly its size: every
 * message PostgreSQL may send passes, and the memory goes back as soon as
 * the message has been consumed or sent. Larger than s->max_whole, or no
 * memory for it: SE_ERROR.
 */
typedef enum stream_action (*stream_pkt_fn)(struct stream *s, const struct pkt_hdr *hdr,
					     const uint8_t *data, size_t avail);
/* Transport events. The owner may close the stream from here. */
typedef void (*stream_event_fn)(struct stream *s, enum stream_event ev);

struct stream_ops {
	ssize_t (*recv)(struct stream *s, void *buf, size_t len);   /* -1 + errno */
	ssize_t (*send)(struct stream *s, const void *buf, size_t len);
};

struct iobuf {
	struct iobuf *next_free;
	uint32_t done;         /* [0, done) sent, skipped or consumed */
	uint32_t parse;        /* [done, parse) queued for sending to send_dst */
	uint32_t recv;         /* [parse, recv) received, not looked at yet */
	uint32_t cap;          /* data bytes after the headroom: the cache's size,
	                          or one large message's (SA_NEED_FULL) */
	uint8_t data[];
};

struct stream {
	int fd;
	struct event ev_read;
	struct event *ev_write;    /* made on first need (write_ev() in stream.c) */
	const struct stream_ops *ops;
	struct tls_conn *tls;
	struct iobuf *buf;         /* NULL while idle: idle connections own no buffer */
	struct stream *peer;       /* where SA_FORWARD sends to (linked connection) */
	struct stream *send_dst;   /* destination of the queued [done, parse) bytes */
	struct stream *fwd_dst;    /* destination of the message being forwarded */
	struct stream *blocked_src;/* a stream whose forward waits for us to be writable */
	struct stream *hold_src;   /* a stream with a message in flight to us: our own
	                              writes wait behind it (see out_mark) */
	struct pktbuf out;         /* pooler-generated messages for this socket */
	uint32_t out_sent;         /* bytes of out already written */
	uint32_t out_mark;         /* out bytes queued before hold_src's message; the rest follow it */
	uint32_t pkt_remain;       /* bytes of the current message still to route */
	int32_t len_adjust;        /* set by stream_rewrite_head for the message at hand */
	uint8_t pkt_action;        /* SA_FORWARD or SA_SKIP for pkt_remain */
	bool startup;              /* parse startup-phase packets (no type byte) */
	bool reading;              /* ev_read is armed */
	bool paused;               /* owner said SA_PAUSE */
	bool wait_peer;            /* reading stopped until the peer drains */
	bool connecting;
	bool closed;
	bool want_write_for_read;  /* TLS read needs the socket writable */
	bool tls_end_held;         /* TLS: a close_notify or error came behind data read */
	bool flushed_owed;         /* TLS: SE_FLUSHED once the ciphertext has gone */
	bool handshaking;          /* TLS handshake in progress */
	bool in_process;           /* inside process(): resume must not recurse */
	bool sniff_tls;            /* peek at the first byte for a direct-TLS ClientHello */
	bool suspended;            /* SUSPEND: reads stay off until stream_unsuspend() */
	bool torn;                 /* a message to us was cut off mid-way: no more output */
	bool sent_mid;             /* our forward's last bytes sent ended inside a message */
	uint32_t max_pkt;          /* max_packet_size for typed packets */
	uint64_t bytes_in, bytes_out;
	const char *errmsg;        /* static reason for SE_ERROR */
	bool bad_header;           /* that SE_ERROR: a packet header that cannot be */
	uint32_t max_whole;        /* largest message held whole (default STREAM_WHOLE_MAX) */
	stream_pkt_fn on_pkt;
	stream_event_fn on_event;
	void *owner;               /* struct client * or struct server * */
	/* io_uring batching (stream_set_batching): this loop turn's receive,
	 * and the forward [done, parse) left for the turn's send batch. */
	struct list read_node, send_node;
	struct list tls_node;      /* a buffered TLS stream's ciphertext left for the send batch */
};

void stream_init(struct stream *s, int fd, void *owner, stream_pkt_fn on_pkt, stream_event_fn on_event);
/* Socket options for a new outgoing socket, set before connect(): the
 * receive buffer size must be known then, as TCP chooses its window scale
 * and clamp from it in the handshake. */
typedef void (*stream_tune_fn)(int fd, const void *arg);
/* Start an outgoing non-blocking connect, with tune (may be NULL) called
 * on the socket first; SE_CONNECTED/SE_CONNECT_FAILED follow. */
int stream_connect(struct stream *s, const struct sockaddr *sa, socklen_t salen,
		   stream_tune_fn tune, const void *arg) MUSTCHECK;
void stream_start_reading(struct stream *s);
void stream_stop_reading(struct stream *s);
/* Reads now, as if the socket had signalled, instead of after a loop turn:
 * a socket accepted with TCP_DEFER_ACCEPT has its first bytes waiting. */
void stream_read_now(struct stream *s);
/* SUSPEND: stop reading and keep it stopped, whatever the owner asks,
 * while queued output still drains; unsuspend reads again. */
void stream_suspend(struct stream *s);
void stream_unsuspend(struct stream *s);
/* Nothing queued for sending from or to this stream. */
bool stream_flushed(const struct stream *s);
/* Re-run message processing after SA_PAUSE (e.g. a server was linked). */
void stream_resume(struct stream *s);
/* Queue pooler-generated bytes (complete messages in pb) for this socket and
 * try to send them now. Returns false if the connection is broken. */
bool stream_write(struct stream *s, const struct pktbuf *pb);
bool stream_write_raw(struct stream *s, const void *data, size_t len);
/* Anything not yet written (own out queue, or bytes queued toward us)? */
bool stream_has_pending_out(const struct stream *s);
bool stream_has_pending_forward(const struct stream *s);
/* s has bytes on their way to dst: a message routed there by its header
 * with part of its body still to come, or routed bytes not yet sent. dst
 * is not at a message boundary of s's stream until both are done, so its
 * owner must not give it to anybody else (nor keep it once s is gone). */
bool stream_forwarding_to(const struct stream *s, const struct stream *dst);
/* Drop the first n unprocessed bytes (a message the owner handled by hand
 * before returning SA_STOP). */
void stream_consume(struct stream *s, uint32_t n);
/* From inside on_pkt, before returning SA_FORWARD: the message's first
 * old_len bytes (buffered) become new_len bytes, which the caller writes at
 * the returned address; the rest is forwarded from the buffer as it is.
 * NULL when the message cannot grow that much without a flush first
 * (return SA_FLUSH). The data pointer given to on_pkt is stale afterwards. */
uint8_t *stream_rewrite_head(struct stream *s, uint32_t old_len, uint32_t new_len) MUSTCHECK;
/* How many bytes stream_rewrite_head could grow the message at hand by. */
uint32_t stream_head_room(const struct stream *s);
/* Bytes received and not yet processed. */
size_t stream_unprocessed(const struct stream *s);
void stream_set_tls(struct stream *s, struct tls_conn *tls);
/* Drive tls_handshake() from the socket events; SE_TLS_READY or SE_ERROR follow. */
void stream_start_tls(struct stream *s, struct tls_conn *tls);
/* `gone` is closing: drop s's bytes queued toward it and forget it. */
void stream_forget_peer(struct stream *s, struct stream *gone);
/* Stop watching the socket and hand it to the caller (stream_close will
 * not close it). -1 if there is none. */
int stream_take_fd(struct stream *s);
/* Close the socket and release the buffer. Safe to call twice. */
void stream_close(struct stream *s);
const char *stream_event_name(enum stream_event ev);

/* Per-worker buffer cache; size from pkt_buf (at least 16 KiB). */
void stream_cache_init(uint32_t bufsize);
void stream_cache_free(void);
uint32_t stream_bufsize(void);
size_t stream_cache_used(void);
size_t stream_cache_free_count(void);

extern struct event_base *stream_base;   /* the worker's loop */

/* io_uring batching (setting io_uring; uring.h). On: a readable plain
 * socket is read, and a forward through a plain socket is sent, at the end
 * of the loop turn, all of them in one io_uring_enter per batch. Off (or
 * no ring): at once, one recv or send each. Switching off first runs what
 * the turn has gathered. */
void stream_set_batching(bool on);
bool stream_batching(void);
/* The end of a loop turn: the gathered receives (their messages routed),
 * then the gathered sends, until none is left. The loop's owner calls it
 * after every turn. */
void stream_turn_end(void);
/* Send s's forward gathered for the turn now, e.g. before its socket is
 * handed to another worker (the queued bytes must go out first). */
void stream_flush_deferred(struct stream *s);
/* Batches this process has run, and the operations in them. */
void stream_batch_counts(uint64_t *batches, uint64_t *ops);

#endif

/* pgcrew — transport: per-connection socket, borrowed I/O buffer, message
 * routing. Forwarded bytes go from the source's buffer straight to the
 * destination socket; a short write stops reading on the source until the
 * destination drains (back-pressure instead of unbounded buffering). */
#include "stream.h"
#include "log.h"
#include "tls.h"
#include "uring.h"
#include "util.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

struct event_base *stream_base;

/* Buffer offsets run from STREAM_HEADROOM to BUF_END: the headroom lets a
 * message at the start of the data be rewritten longer in place. */
#define BUF_END(b) (STREAM_HEADROOM + (b)->cap)

static struct {
	struct iobuf *free_list;
	uint32_t size;
	size_t n_free, n_used;
} cache;

static const char *const event_names[] = {
	[SE_CONNECTED] = "connected", [SE_CONNECT_FAILED] = "connect-failed",
	[SE_EOF] = "eof", [SE_ERROR] = "error", [SE_FLUSHED] = "flushed",
	[SE_TLS_READY] = "tls-ready", [SE_TLS_HELLO] = "tls-hello",
};
_Static_assert(ARRAY_SIZE(event_names) == SE_COUNT, "stream event names");

const char *stream_event_name(enum stream_event ev)
{
	return ev < SE_COUNT ? event_names[ev] : "?";
}

/* ---- buffer cache ---- */

void stream_cache_init(uint32_t bufsize)
{
	cache.size = bufsize < 16384 ? 16384 : bufsize;
}

void stream_cache_free(void)
{
	while (cache.free_list) {
		struct iobuf *b = cache.free_list;
		cache.free_list = b->next_free;
		free(b);
	}
	cache.n_free = 0;
}

uint32_t stream_bufsize(void) { return cache.size; }
size_t stream_cache_used(void) { return cache.n_used; }
size_t stream_cache_free_count(void) { return cache.n_free; }

static struct iobuf *buf_get(void)
{
	struct iobuf *b = cache.free_list;
	if (b) {
		cache.free_list = b->next_free;
		cache.n_free--;
	} else {
		b = xmalloc(sizeof(*b) + STREAM_HEADROOM + cache.size);
	}
	b->done = b->parse = b->recv = STREAM_HEADROOM;
	b->cap = cache.size;
	b->next_free = NULL;
	cache.n_used++;
	return b;
}

static void buf_put(struct iobuf *b)
{
	cache.n_used--;
	/* Keep a bounded reserve of standard buffers; give the rest back. */
	if (cache.n_free >= 256 || b->cap != cache.size) {
		free(b);
		return;
	}
	b->next_free = cache.free_list;
	cache.free_list = b;
	cache.n_free++;
}

static void release_if_empty(struct stream *s)
{
	struct iobuf *b = s->buf;
	if (b && b->done == b->recv) {
		s->buf = NULL;
		buf_put(b);
	}
}

/* ---- plain and TLS transports ---- */

static ssize_t plain_recv(struct stream *s, void *buf, size_t len)
{
	return recv(s->fd, buf, len, 0);
}

static ssize_t plain_send(struct stream *s, const void *buf, size_t len)
{
	return send(s->fd, buf, len, MSG_NOSIGNAL);
}

static const struct stream_ops plain_ops = { plain_recv, plain_send };

static void tls_flush_later(struct stream *s);
static bool batching;
static struct list turn_tls = { &turn_tls, &turn_tls };    /* ciphertext for the send batch */

/* A buffered connection (tls_conn_use_buffers) read outside a batch (the
 * ring was given up): the ciphertext is received here, with one recv,
 * as OpenSSL's socket BIO would. */
static void tls_fill(struct stream *s)
{
	size_t room;
	if (batching || !tls_conn_buffered(s->tls) || tls_in_held(s->tls))
		return;
	uint8_t *at = tls_in_space(s->tls, &room);
	ssize_t n = room ? recv(s->fd, at, room, 0) : -1;
	if (n >= 0)
		tls_in_added(s->tls, n);
}

static ssize_t tls_ops_recv(struct stream *s, void *buf, size_t len)
{
	enum tls_status st;
	size_t got = 0;
	ssize_t n;
	tls_fill(s);
	/* SSL_read gives one record a call: a buffered connection's records
	 * are all in memory, so take as many as fit now, not one per loop
	 * turn (each turn is a wait for events). */
	s->tls_end_held = false;
	do
		n = tls_recv(s->tls, (uint8_t *)buf + got, len - got, &st);
	while (n > 0 && (got += (size_t)n) < len && tls_conn_buffered(s->tls));
	tls_flush_later(s);        /* a read may have written (a KeyUpdate's answer) */
	if (got > 0) {
		/* A close_notify or a bad record behind the data: OpenSSL has
		 * taken it, so no socket event and nothing pending will say so;
		 * the next read (from the loop) reports it. */
		s->tls_end_held = n <= 0 && (st == TLS_EOF || st == TLS_FAIL);
		return (ssize_t)got;
	}
	if (n == 0 && st == TLS_EOF)
		return n;
	s->want_write_for_read = st == TLS_WANT_WRITE;
	errno = (st == TLS_WANT_READ || st == TLS_WANT_WRITE) ? EAGAIN : EIO;
	if (st == TLS_FAIL)
		s->errmsg = tls_conn_error(s->tls);
	return -1;
}

static ssize_t tls_ops_send(struct stream *s, const void *buf, size_t len)
{
	enum tls_status st;
	ssize_t n = tls_send(s->tls, buf, len, &st);
	if (n > 0) {
		tls_flush_later(s);
		return n;
	}
	errno = (st == TLS_WANT_READ || st == TLS_WANT_WRITE) ? EAGAIN : EPIPE;
	if (st == TLS_FAIL)
		s->errmsg = tls_conn_error(s->tls);
	return -1;
}

static const struct stream_ops tls_ops = { tls_ops_recv, tls_ops_send };

void stream_set_tls(struct stream *s, struct tls_conn *tls)
{
	s->tls = tls;
	s->ops = tls ? &tls_ops : &plain_ops;
}

/* ---- event plumbing ---- */

static void fire(struct stream *s, enum stream_event ev);
static void on_write(evutil_socket_t fd, short what, void *arg);
static bool move_queued(struct stream *src, struct stream *dst);

/* The write event exists only once a socket has had to wait to be
 * writable (or is connecting): most connections never do, and an idle one
 * is then 128 bytes smaller. */
static struct event *write_ev(struct stream *s)
{
	if (!s->ev_write) {
		s->ev_write = event_new(stream_base, s->fd, EV_WRITE, on_write, s);
		if (!s->ev_write)
			fatal("stream: out of memory for an event");
	}
	return s->ev_write;
}

static void drop_write_ev(struct stream *s)
{
	if (s->ev_write) {
		event_free(s->ev_write);
		s->ev_write = NULL;
	}
}

/* Bytes OpenSSL holds (decrypted, or records read ahead) raise no socket
 * event: read them from the loop. */
static void read_tls_held(struct stream *s)
{
	if (s->tls && s->reading && !s->closed && !s->handshaking && !s->paused && !s->wait_peer &&
	    (tls_pending(s->tls) || s->tls_end_held))
		event_active(&s->ev_read, EV_READ, 0);
}

/* One handshake step; re-arms the event the handshake waits for. */
static void handshake_step(struct stream *s)
{
	switch (tls_handshake(s->tls)) {
	case TLS_OK:
		s->handshaking = false;
		if (s->ev_write)
			event_del(s->ev_write);
		/* With io_uring batches the ciphertext joins them; kernel TLS,
		 * which lets a server connection move, keeps its socket. */
		if (batching && !tls_conn_in_kernel(s->tls) && !tls_conn_use_buffers(s->tls))
			log_debug("stream: TLS keeps its socket (no memory for buffers)");
		fire(s, SE_TLS_READY);
		/* The client's first message may have come with its Finished. */
		read_tls_held(s);
		return;
	case TLS_WANT_READ:
		stream_start_reading(s);
		return;
	case TLS_WANT_WRITE:
		event_add(write_ev(s), NULL);
		return;
	default:
		s->errmsg = tls_conn_error(s->tls);
		fire(s, SE_ERROR);
	}
}

void stream_start_tls(struct stream *s, struct tls_conn *tls)
{
	stream_set_tls(s, tls);
	s->handshaking = true;
	handshake_step(s);
}

static void on_read(evutil_socket_t fd, short what, void *arg);

static void fire(struct stream *s, enum stream_event ev)
{
	if (!s->closed)
		s->on_event(s, ev);
}

void stream_init(struct stream *s, int fd, void *owner, stream_pkt_fn on_pkt, stream_event_fn on_event)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->owner = owner;
	s->on_pkt = on_pkt;
	s->on_event = on_event;
	s->ops = &plain_ops;
	s->max_pkt = 0x7fffffff;
	s->max_whole = STREAM_WHOLE_MAX;
	list_init(&s->read_node);
	list_init(&s->send_node);
	list_init(&s->tls_node);
	if (fd >= 0)
		event_assign(&s->ev_read, stream_base, fd, EV_READ | EV_PERSIST, on_read, s);
}

int stream_connect(struct stream *s, const struct sockaddr *sa, socklen_t salen,
		   stream_tune_fn tune, const void *arg)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (tune)
		tune(fd, arg);
	if (connect(fd, sa, salen) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	s->fd = fd;
	s->connecting = true;
	event_assign(&s->ev_read, stream_base, fd, EV_READ | EV_PERSIST, on_read, s);
	drop_write_ev(s);          /* one made for an earlier socket */
	event_add(write_ev(s), NULL);
	return 0;
}

void stream_start_reading(struct stream *s)
{
	if (s->closed || s->fd < 0 || s->suspended)
		return;
	if (!s->reading) {
		s->reading = true;
		event_add(&s->ev_read, NULL);
	}
	read_tls_held(s);
}

void stream_stop_reading(struct stream *s)
{
	if (!s->reading)
		return;
	s->reading = false;
	event_del(&s->ev_read);
}

void stream_suspend(struct stream *s)
{
	s->suspended = true;
	stream_stop_reading(s);
}

/* Read again as the stream would have: not while a connect or a blocked
 * forward is pending (their completion starts reading), and bytes that
 * arrived meanwhile (or TLS holds) are routed from the loop. */
void stream_unsuspend(struct stream *s)
{
	if (!s->suspended)
		return;
	s->suspended = false;
	if (s->closed || s->connecting || s->wait_peer || s->fd < 0)
		return;
	stream_start_reading(s);
	if (stream_unprocessed(s) > 0)
		event_active(&s->ev_read, EV_READ, 0);
}

bool stream_flushed(const struct stream *s)
{
	return !stream_has_pending_out(s) && !stream_has_pending_forward(s);
}

/* ---- output ---- */

/* Write the out queue up to `limit`; true when that much is written. */
static bool flush_out_upto(struct stream *s, uint32_t limit)
{
	while (s->out_sent < limit) {
		ssize_t n = s->ops->send(s, s->out.buf + s->out_sent, limit - s->out_sent);
		if (n > 0) {
			s->out_sent += (uint32_t)n;
			s->bytes_out += (uint64_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			event_add(write_ev(s), NULL);
			return false;
		}
		if (!s->errmsg)
			s->errmsg = "send failed";
		return false;
	}
	if (s->out_sent == s->out.len) {
		pktbuf_free(&s->out);
		s->out_sent = 0;
		if (s->out_mark)
			s->out_mark = 0;
	}
	return true;
}

static bool flush_out(struct stream *s)
{
	return flush_out_upto(s, (uint32_t)s->out.len);
}

/* How much of dst's out queue goes before src's forwarded bytes: pooler
 * messages written while src had a message in flight wait behind it, so
 * they never land inside a forwarded message. */
static uint32_t out_before(const struct stream *dst, const struct stream *src)
{
	return dst->hold_src == src ? dst->out_mark : (uint32_t)dst->out.len;
}

/* src starts queueing message bytes for dst. */
static inline void hold_for(struct stream *dst, struct stream *src)
{
	if (dst->hold_src == src)
		return;
	dst->hold_src = src;
	dst->out_mark = (uint32_t)dst->out.len;
}

/* src's message to dst will never be complete (src is going mid-message):
 * what dst's owner queued behind it would land inside that message on the
 * wire, and so would anything written later. Those bytes are dropped and
 * dst refuses further output; its owner closes it (a client whose server
 * went, a client that is going itself). Bytes queued before the message
 * (out_mark) still go: none of the message has been sent before them. */
static void tear(struct stream *dst)
{
	if (dst->out.len > dst->out_mark)
		dst->out.len = dst->out_mark;
	dst->torn = true;
	if (!dst->errmsg)
		dst->errmsg = "output cut inside a message";
}

/* Has s a message in flight to dst that has not been wholly received? */
static bool mid_message_to(const struct stream *s, const struct stream *dst)
{
	return s->pkt_remain > 0 && s->pkt_action == SA_FORWARD && s->fwd_dst == dst;
}

/* src's message to dst is complete and sent: release what waited behind it. */
static void release_hold(struct stream *dst)
{
	dst->hold_src = NULL;
	dst->out_mark = 0;
	if (dst->closed)
		return;
	if (dst->out.len > dst->out_sent && !flush_out(dst))
		event_add(write_ev(dst), NULL);
	else if (dst->paused)
		/* Its owner may wait for a clean socket (SE_FLUSHED) to go on;
		 * tell it from the loop, not from inside another stream. */
		event_active(write_ev(dst), EV_WRITE, 0);
}

bool stream_write_raw(struct stream *s, const void *data, size_t len)
{
	if (s->closed || s->torn)
		return false;
	if (s->out.len == 0 && !s->connecting && !s->hold_src) {
		/* Fast path: nothing queued, send from the caller's memory. */
		ssize_t n = s->ops->send(s, data, len);
		if (n > 0) {
			s->bytes_out += (uint64_t)n;
			data = (const uint8_t *)data + n;
			len -= (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			s->errmsg = "send failed";
			return false;
		}
		if (len == 0)
			return true;
	}
	if (s->out.cap == 0)
		pktbuf_init(&s->out, len < 512 ? 512 : len);
	pktbuf_put_bytes(&s->out, data, len);
	if (pktbuf_failed(&s->out))
		return false;
	if (!s->connecting)
		event_add(write_ev(s), NULL);
	return true;
}

bool stream_write(struct stream *s, const struct pktbuf *pb)
{
	if (pktbuf_failed(pb))
		return false;
	return stream_write_raw(s, pb->buf, pb->len);
}

/* Ciphertext a buffered TLS connection still has to send. */
static size_t tls_unsent(const struct stream *s)
{
	size_t n = 0;
	if (s->tls && tls_conn_buffered(s->tls))
		(void)tls_out_data(s->tls, &n);
	return n;
}

bool stream_has_pending_out(const struct stream *s)
{
	return s->out.len > s->out_sent || s->blocked_src != NULL || s->hold_src != NULL ||
	       tls_unsent(s) > 0;
}

bool stream_has_pending_forward(const struct stream *s)
{
	return s->buf && s->buf->done < s->buf->parse;
}

bool stream_forwarding_to(const struct stream *s, const struct stream *dst)
{
	if (s->pkt_remain > 0 && s->pkt_action == SA_FORWARD && s->fwd_dst == dst)
		return true;
	return s->send_dst == dst && s->buf && s->buf->done < s->buf->parse;
}

void stream_consume(struct stream *s, uint32_t n)
{
	struct iobuf *b = s->buf;
	if (!b || b->done != b->parse || b->recv - b->parse < n)
		fatal("stream_consume: bad state");
	b->parse += n;
	b->done = b->parse;
}

size_t stream_unprocessed(const struct stream *s)
{
	return s->buf ? s->buf->recv - s->buf->parse : 0;
}

/* src's queued bytes are all out: a message it has finished no longer
 * holds back dst's own writes. */
static void forward_sent(struct stream *src, struct stream *dst)
{
	/* All queued bytes are out: the wire is inside a message exactly
	 * when one is still being forwarded (its rest to come). */
	src->sent_mid = mid_message_to(src, dst);
	if (dst->hold_src == src && !src->sent_mid)
		release_hold(dst);
}

/*
 * Send src's queued bytes to their destination. True when nothing is queued
 * any more; false when the destination is full (src then waits for it) or
 * broken (the destination's owner has been told).
 */
static bool flush_forward(struct stream *src)
{
	struct iobuf *b = src->buf;
	struct stream *dst = src->send_dst;

	if (!b || b->done == b->parse)
		return true;
	if (!dst || dst->closed) {
		b->done = b->parse;    /* the receiver is gone; drop */
		return true;
	}
	if (dst->torn) {
		b->done = b->parse;
		fire(dst, SE_ERROR);
		return false;
	}
	uint32_t first = out_before(dst, src);
	if (dst->out_sent < first && !flush_out_upto(dst, first))
		goto blocked;
	while (b->done < b->parse) {
		ssize_t n = dst->ops->send(dst, b->data + b->done, b->parse - b->done);
		if (n > 0) {
			b->done += (uint32_t)n;
			dst->bytes_out += (uint64_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			goto blocked;
		if (!dst->errmsg)
			dst->errmsg = "send failed";
		b->done = b->parse;
		fire(dst, SE_ERROR);
		return false;
	}
	forward_sent(src, dst);
	return true;
blocked:
	if (dst->errmsg) {
		b->done = b->parse;
		fire(dst, SE_ERROR);
		return false;
	}
	dst->blocked_src = src;
	src->wait_peer = true;
	stream_stop_reading(src);
	event_add(write_ev(dst), NULL);
	return false;
}

/* ---- buffered TLS: the ciphertext's way out ---- */

/* Send what OpenSSL wrote, now, with one send per call. False when some
 * is left (the write event is armed) or the socket broke (errmsg set;
 * the caller fires SE_ERROR where it may). */
static bool tls_send_now(struct stream *s)
{
	size_t len;
	const uint8_t *p = tls_out_data(s->tls, &len);
	while (len > 0) {
		ssize_t n = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			event_add(write_ev(s), NULL);
			return false;
		}
		if (n < 0) {
			if (!s->errmsg)
				s->errmsg = "send failed";
			return false;
		}
		tls_out_sent(s->tls, (size_t)n);
		p = tls_out_data(s->tls, &len);
	}
	list_del(&s->tls_node);
	return true;
}

/* OpenSSL wrote ciphertext: it joins the turn's send batch, or (no
 * batches) goes now. */
static void tls_flush_later(struct stream *s)
{
	if (tls_unsent(s) == 0)
		return;
	if (batching) {
		if (list_empty(&s->tls_node))
			list_append(&turn_tls, &s->tls_node);
		return;
	}
	(void)tls_send_now(s);
}

/* ---- input ---- */

/* Move the bytes still held ([done, recv)) to the start of the data area.
 * A message rewritten longer may have put them into the headroom; they
 * move forward only if they fit before BUF_END, so the buffer's bounds
 * hold whatever the offsets (a rewrite followed by a full buffer once made
 * this write past the end). */
static void compact(struct iobuf *b)
{
	uint32_t n = b->recv - b->done;
	if (b->done == STREAM_HEADROOM || n > b->cap)
		return;
	memmove(b->data + STREAM_HEADROOM, b->data + b->done, n);
	b->parse = b->parse - b->done + STREAM_HEADROOM;
	b->recv = b->recv - b->done + STREAM_HEADROOM;
	b->done = STREAM_HEADROOM;
}

/* The offsets' order and bounds, checked wherever they move by more than
 * a routing step (a rewrite, a receive): a violation is our bug, and a
 * worker that stops is better than one that writes past its memory. */
static void buf_check(const struct iobuf *b)
{
	if (!(b->done <= b->parse && b->parse <= b->recv && b->recv <= BUF_END(b)))
		fatal("stream: buffer offsets out of order: done %u parse %u recv %u end %u", b->done,
		      b->parse, b->recv, BUF_END(b));
}

uint32_t stream_head_room(const struct stream *s)
{
	return s->buf ? s->buf->done : 0;
}

/* The bytes queued before the message ([done, parse)) move with its start,
 * so they stay contiguous with it. */
uint8_t *stream_rewrite_head(struct stream *s, uint32_t old_len, uint32_t new_len)
{
	struct iobuf *b = s->buf;
	if (!b || b->recv - b->parse < old_len)
		fatal("stream_rewrite_head: the head is not buffered");
	if (new_len > old_len) {
		uint32_t grow = new_len - old_len;
		if (b->done < grow)
			return NULL;
		memmove(b->data + b->done - grow, b->data + b->done, b->parse - b->done);
		b->done -= grow;
		b->parse -= grow;
	} else {
		uint32_t shrink = old_len - new_len;
		memmove(b->data + b->done + shrink, b->data + b->done, b->parse - b->done);
		b->done += shrink;
		b->parse += shrink;
	}
	s->len_adjust = (int32_t)new_len - (int32_t)old_len;
	buf_check(b);
	return b->data + b->parse;
}

/* Route bytes of a message already decided on. False: stop processing. */
static bool route_remaining(struct stream *s)
{
	struct iobuf *b = s->buf;
	uint32_t avail = b->recv - b->parse;
	uint32_t n = avail < s->pkt_remain ? avail : s->pkt_remain;

	if (n == 0)
		return false;
	if (s->pkt_action == SA_FORWARD && s->fwd_dst && !s->fwd_dst->closed) {
		if (s->send_dst != s->fwd_dst && b->done != b->parse && !flush_forward(s))
			return false;
		s->send_dst = s->fwd_dst;
		hold_for(s->fwd_dst, s);
		b->parse += n;
	} else {
		if (b->done != b->parse && !flush_forward(s))
			return false;
		b->parse += n;
		b->done = b->parse;
	}
	s->pkt_remain -= n;
	return true;
}

/* A message larger than the cache's buffers is needed whole: once what is
 * queued before it is sent, it moves to a buffer of exactly its size, which
 * goes back (freed, not cached) as soon as it is empty. Always false:
 * processing goes on when bytes come or the flush completes. */
static bool enlarge(struct stream *s, uint32_t len)
{
	struct iobuf *b = s->buf;
	if (len > s->max_whole) {
		s->errmsg = "message too large to hold whole";
		fire(s, SE_ERROR);
		return false;
	}
	if (b->done != b->parse && !flush_forward(s))
		return false;
	uint32_t n = b->recv - b->parse;
	if (n > len)     /* the buffer holds less than this one message */
		fatal("stream: %u bytes buffered for a message of %u", n, len);
	struct iobuf *nb = malloc(sizeof(*nb) + STREAM_HEADROOM + len);
	if (!nb) {
		s->errmsg = "out of memory for a large message";
		fire(s, SE_ERROR);
		return false;
	}
	memcpy(nb->data + STREAM_HEADROOM, b->data + b->parse, n);
	nb->done = nb->parse = STREAM_HEADROOM;
	nb->recv = STREAM_HEADROOM + n;
	nb->cap = len;
	nb->next_free = NULL;
	cache.n_used++;
	buf_put(b);
	s->buf = nb;
	return false;
}

/* The owner wants `need` bytes of the message at hand buffered (at most
 * the buffer's size): the message moves to the start of the buffer when
 * it would not fit after what precedes it. Always false. */
static bool wait_for(struct stream *s, uint32_t need)
{
	struct iobuf *b = s->buf;
	if (b->parse + need > BUF_END(b)) {
		if (b->done != b->parse && !flush_forward(s))
			return false;
		compact(b);
	}
	return false;
}

/* SA_NEED_FULL / SA_NEED_MORE with `avail` bytes of the message buffered. */
static bool need_bytes(struct stream *s, const struct pkt_hdr *h, enum stream_action act, uint32_t avail)
{
	struct iobuf *b = s->buf;
	/* Only the start is wanted, but the buffer is full of it: the owner
	 * needs the whole message. */
	if (act == SA_NEED_MORE && avail >= b->cap)
		act = SA_NEED_FULL;
	uint32_t need = act == SA_NEED_MORE && h->len > b->cap ? b->cap : h->len;
	if (avail >= need) {
		s->errmsg = "owner asked for bytes already buffered";
		fire(s, SE_ERROR);
		return false;
	}
	return need > b->cap ? enlarge(s, need) : wait_for(s, need);
}

/* Handle the next message header. False: stop processing. */
static bool route_new(struct stream *s)
{
	struct iobuf *b = s->buf;
	struct pkt_hdr h;
	const char *why = NULL;
	uint32_t avail = b->recv - b->parse;
	uint32_t max = s->startup ? PKT_STARTUP_MAX : s->max_pkt;

	enum pkt_status st = pkt_parse_header(b->data + b->parse, avail, s->startup, max, &h, &why);
	if (st == PKT_NEED_MORE)
		return false;
	if (st == PKT_BAD) {
		s->errmsg = why ? why : "bad packet header";
		s->bad_header = true;
		fire(s, SE_ERROR);
		return false;
	}
	/* The destination is the peer at decision time: the owner may unlink
	 * (release the server) inside the callback. */
	struct stream *dst = s->peer;
	s->len_adjust = 0;
	enum stream_action act = s->on_pkt(s, &h, b->data + b->parse, avail);
	if (s->closed || act == SA_STOP)
		return false;
	switch (act) {
	case SA_FORWARD:
	case SA_SKIP:
	case SA_CONSUMED:
		s->pkt_remain = (uint32_t)((int64_t)h.len + s->len_adjust);
		s->len_adjust = 0;
		s->pkt_action = act == SA_FORWARD ? SA_FORWARD : SA_SKIP;
		s->fwd_dst = act == SA_FORWARD ? (dst ? dst : s->peer) : NULL;
		return true;
	case SA_FLUSH:
		/* Asked again at once when the flush completes, else when the
		 * destination drains (on_write processes us again). */
		return b->done == b->parse || flush_forward(s);
	case SA_NEED_MORE:
	case SA_NEED_FULL:
		return need_bytes(s, &h, act, avail);
	case SA_PAUSE:
		/* Keep reading so a disconnect is noticed while paused; a full
		 * buffer stops reading in on_read. */
		s->paused = true;
		return false;
	default:
		return false;
	}
}

/* ---- io_uring batching: what a turn gathers ----
 * With batching on, a readable plain socket is not read in its event
 * callback: the stream joins turn_reads, and stream_turn_end() reads every
 * one of them with one io_uring_enter. A forward through a plain socket
 * that process() would send at once joins turn_sends the same way. The
 * bytes wait in the source's buffer as they would for a short write, so
 * every path that looks at pending bytes (a destination closing, a hand
 * over, pooler messages queued behind a forward) works unchanged. */
static struct list turn_reads = { &turn_reads, &turn_reads };
static struct list turn_sends = { &turn_sends, &turn_sends };

/* A buffered TLS stream's socket is read in the batch too, unless its
 * ciphertext already waits: that is decrypted at once. */
static bool read_batchable(const struct stream *s)
{
	if (!batching || s->fd < 0 || s->closed)
		return false;
	return s->ops == &plain_ops || (s->tls && tls_conn_buffered(s->tls) && !tls_in_held(s->tls));
}

static void defer_read(struct stream *s)
{
	if (list_empty(&s->read_node))
		list_append(&turn_reads, &s->read_node);
}

static bool send_batchable(const struct stream *s)
{
	const struct stream *dst = s->send_dst;
	return batching && dst && !dst->closed && dst->ops == &plain_ops && dst->fd >= 0 &&
	       !dst->connecting;
}

static void defer_send(struct stream *s)
{
	if (list_empty(&s->send_node))
		list_append(&turn_sends, &s->send_node);
}

static void process(struct stream *s)
{
	/* An owner callback may resume this very stream (login finished while
	 * handling a message); the running loop picks the change up instead. */
	if (s->in_process)
		return;
	s->in_process = true;
	while (s->buf && !s->closed && !s->paused && !s->wait_peer) {
		bool more = s->pkt_remain ? route_remaining(s) : route_new(s);
		if (!more)
			break;
	}
	s->in_process = false;
	if (s->closed || !s->buf)
		return;
	if (s->buf->done != s->buf->parse && !s->wait_peer) {
		if (send_batchable(s)) {
			defer_send(s);
			return;
		}
		flush_forward(s);
	}
	if (s->closed || !s->buf)
		return;
	if (s->buf->done == s->buf->recv)
		release_if_empty(s);
}

/* The room a receive needs is taken by routed bytes not yet sent: a
 * forward left for the turn's send batch (a TLS stream is read outside
 * the batch, and a turn may end with sends still gathered) goes now.
 * False when it could not all go (s then waits for its peer to drain,
 * which starts reading again) or s was closed meanwhile. */
static bool send_held_forward(struct stream *s)
{
	list_del(&s->send_node);
	return flush_forward(s) && !s->closed && s->buf;
}

/* Before a receive: route what is already buffered, then make room.
 * False when there is to be no receive now. */
static bool read_prepare(struct stream *s)
{
	if (s->buf && s->buf->parse < s->buf->recv && !s->paused && !s->wait_peer) {
		process(s);
		if (s->closed || s->wait_peer)
			return false;
	}
	if (!s->buf)
		s->buf = buf_get();
	struct iobuf *b = s->buf;
	if (BUF_END(b) - b->recv < 1024) {
		if (b->done != b->parse && !send_held_forward(s))
			return false;
		compact(b);
	}
	if (b->recv == BUF_END(b) || (s->paused && b->recv - STREAM_HEADROOM > b->cap / 2)) {
		/* Full of bytes we cannot route yet: wait for the peer. */
		stream_stop_reading(s);
		return false;
	}
	return true;
}

/* What a receive of n bytes (already added to the buffer), or of none
 * (n <= 0, err), means. */
static void read_done(struct stream *s, ssize_t n, int err)
{
	if (n < 0) {
		if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
			if (s->want_write_for_read)
				event_add(write_ev(s), NULL);
			release_if_empty(s);
			return;
		}
		if (!s->errmsg)
			s->errmsg = "recv failed";
		fire(s, SE_ERROR);
		return;
	}
	if (n == 0) {
		release_if_empty(s);
		fire(s, SE_EOF);
		return;
	}
	process(s);
	read_tls_held(s);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;

	if (s->handshaking) {
		handshake_step(s);
		return;
	}
	if (s->suspended)          /* an event_active() from before SUSPEND */
		return;
	if (s->sniff_tls) {
		uint8_t first;
		ssize_t k = recv(s->fd, &first, 1, MSG_PEEK);
		if (k == 1) {
			s->sniff_tls = false;
			if (first == 0x16) {
				stream_stop_reading(s);
				fire(s, SE_TLS_HELLO);
				return;
			}
		}
	}
	if (read_batchable(s)) {
		defer_read(s);
		return;
	}
	if (!read_prepare(s))
		return;
	struct iobuf *b = s->buf;
	ssize_t n = s->ops->recv(s, b->data + b->recv, BUF_END(b) - b->recv);
	if (n > 0) {
		b->recv += (uint32_t)n;
		s->bytes_in += (uint64_t)n;
		buf_check(b);
	}
	read_done(s, n, errno);
}

void stream_read_now(struct stream *s)
{
	if (s->reading)
		on_read(s->fd, EV_READ, s);
}

void stream_resume(struct stream *s)
{
	if (s->closed)
		return;
	s->paused = false;
	if (!s->wait_peer) {
		stream_start_reading(s);
		process(s);
	}
}

static void connect_done(struct stream *s)
{
	int err = 0;
	socklen_t len = sizeof(err);
	s->connecting = false;
	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		errno = err;
		s->errmsg = "connect failed";
		fire(s, SE_CONNECT_FAILED);
		return;
	}
	fire(s, SE_CONNECTED);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;

	if (s->connecting) {
		connect_done(s);
		return;
	}
	if (s->handshaking) {
		handshake_step(s);
		return;
	}
	if (s->want_write_for_read) {
		s->want_write_for_read = false;
		on_read(fd, EV_READ, s);
		if (s->closed)
			return;
	}
	if (tls_unsent(s) > 0 && !tls_send_now(s))
		return;
	struct stream *src = s->blocked_src;
	if (src) {
		/* Pooler bytes queued before the forward, the forward, then the rest. */
		if (!flush_forward(src))
			return;
		s->blocked_src = NULL;
		src->wait_peer = false;
		if (!src->paused) {
			stream_start_reading(src);
			process(src);
		}
		if (s->closed || s->blocked_src)
			return;
	}
	/* With a message still in flight to us, only what precedes it. */
	uint32_t lim = s->hold_src ? s->out_mark : (uint32_t)s->out.len;
	if (s->out_sent < lim && !flush_out_upto(s, lim)) {
		if (s->errmsg && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			fire(s, SE_ERROR);
		return;
	}
	if (s->out.len > s->out_sent)
		return;
	if (tls_unsent(s) > 0) {
		/* Encrypted, not yet sent (the turn's batch sends it):
		 * flushed once tls_settle sees it gone. */
		s->flushed_owed = true;
		return;
	}
	s->flushed_owed = false;
	fire(s, SE_FLUSHED);
}

/* Is the wire from s to dst inside a message? A send to dst was cut short
 * (blocked), or the last bytes that went out ended inside one. Bytes only
 * queued (a turn's send batch not run yet) are not on the wire. */
static bool wire_mid(const struct stream *s, const struct stream *dst)
{
	return dst->blocked_src == s || (s->send_dst == dst && s->sent_mid);
}

void stream_forget_peer(struct stream *s, struct stream *gone)
{
	/* Bytes queued for gone are dropped (as PgBouncer drops a closing
	 * client's unsent results); if the wire is inside a message, what
	 * gone's owner queued behind it could only land inside it. */
	bool torn = wire_mid(s, gone);
	if (s->send_dst == gone) {
		if (s->buf)
			s->buf->done = s->buf->parse;
		s->send_dst = NULL;
		s->sent_mid = false;
	}
	if (s->fwd_dst == gone)
		s->fwd_dst = NULL;
	if (s->peer == gone)
		s->peer = NULL;
	if (gone->hold_src == s) {
		if (torn)
			tear(gone);
		release_hold(gone);
	}
	if (gone->blocked_src == s) {
		gone->blocked_src = NULL;
		s->wait_peer = false;
		if (!s->closed && !s->paused) {
			stream_start_reading(s);
			/* Messages that arrived behind the blocked forward are routed
			 * from the loop, once the owner has settled its new peer. */
			if (s->reading && stream_unprocessed(s) > 0)
				event_active(&s->ev_read, EV_READ, 0);
		}
	}
}

/* src's queued bytes ([done, parse)) move into dst's out queue, ahead of
 * what dst's owner queued behind them, so they still go first; src no
 * longer holds or blocks dst. False when there was no memory for them. */
static bool move_queued(struct stream *src, struct stream *dst)
{
	struct iobuf *b = src->buf;
	uint32_t n = b->parse - b->done;
	uint32_t at = out_before(dst, src);
	uint32_t tail = (uint32_t)dst->out.len - at;
	if (dst->out.cap == 0)
		pktbuf_init(&dst->out, n < 512 ? 512 : n);
	pktbuf_put_bytes(&dst->out, b->data + b->done, n);
	if (pktbuf_failed(&dst->out))
		return false;
	if (tail) {
		memmove(dst->out.buf + at + n, dst->out.buf + at, tail);
		memcpy(dst->out.buf + at, b->data + b->done, n);
	}
	b->done = b->parse;
	if (dst->blocked_src == src)
		dst->blocked_src = NULL;
	if (dst->hold_src == src) {
		dst->hold_src = NULL;
		dst->out_mark = 0;
	}
	if (!dst->connecting)
		event_add(write_ev(dst), NULL);
	return true;
}

/* s closes with forwarded bytes still queued (a 'Q' and an 'X' in one
 * read): they go on to the destination through its out queue, in order.
 * s closing in the middle of a message it forwards tears the destination:
 * the message can never be completed, and its start may be on the wire. */
static void hand_over_forward(struct stream *s)
{
	struct iobuf *b = s->buf;
	struct stream *dst = s->send_dst;

	/* send_dst and fwd_dst are only trusted while bytes or a message are
	 * in flight: a destination that closes first clears them (hold_src). */
	struct stream *mid = mid_message_to(s, s->fwd_dst) ? s->fwd_dst : NULL;
	if (mid && !mid->closed && mid->hold_src == s) {
		tear(mid);
		if (dst == mid && b)
			b->done = b->parse;
		release_hold(mid);
	}
	if (!b || b->done == b->parse || !dst || dst->closed)
		return;
	(void)move_queued(s, dst);
}

int stream_take_fd(struct stream *s)
{
	int fd = s->fd;
	if (fd < 0 || s->closed)
		return -1;
	event_del(&s->ev_read);
	drop_write_ev(s);
	s->reading = false;
	s->fd = -1;
	return fd;
}

void stream_close(struct stream *s)
{
	if (s->closed)
		return;
	s->closed = true;
	list_del(&s->read_node);
	list_del(&s->send_node);
	if (s->fd >= 0)
		event_del(&s->ev_read);
	if (s->blocked_src)
		stream_forget_peer(s->blocked_src, s);
	if (s->hold_src)
		stream_forget_peer(s->hold_src, s);
	list_del(&s->tls_node);
	if (s->tls) {
		/* What OpenSSL wrote last (a FATAL before the close) goes,
		 * as far as the socket takes it. */
		if (tls_unsent(s) > 0 && s->fd >= 0)
			(void)tls_send_now(s);
		tls_conn_free(s->tls);
		s->tls = NULL;
	}
	drop_write_ev(s);          /* after the last send, which may have armed it */
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	hand_over_forward(s);
	if (s->buf) {
		buf_put(s->buf);
		s->buf = NULL;
	}
	pktbuf_free(&s->out);
	s->out_sent = 0;
	s->peer = NULL;
	s->send_dst = NULL;
	s->fwd_dst = NULL;
}

/* ---- io_uring batching: the end of the turn ---- */

static uint64_t batch_runs, batch_ops;

void stream_set_batching(bool on)
{
	if (!on && batching)
		stream_turn_end();
	batching = on;
}

bool stream_batching(void)
{
	return batching;
}

void stream_batch_counts(uint64_t *batches, uint64_t *ops)
{
	*batches = batch_runs;
	*ops = batch_ops;
}

/* Run ops (ring, or one syscall each when the ring fails) and count. */
static void run_ops(struct uring_op *ops, int n)
{
	if (n == 0)
		return;
	if (uring_run(ops, n) < 0) {
		log_msg_errno(LG_WARNING, "io_uring batch of %d failed; batching off for this worker", n);
		batching = false;
		for (int i = 0; i < n; i++) {
			ssize_t k = ops[i].send ? send(ops[i].fd, ops[i].buf, ops[i].len, MSG_DONTWAIT | MSG_NOSIGNAL)
						: recv(ops[i].fd, ops[i].buf, ops[i].len, MSG_DONTWAIT);
			ops[i].res = k < 0 ? -errno : (int32_t)k;
		}
		return;
	}
	batch_runs++;
	batch_ops += (uint64_t)n;
}

/* The forward of src left for the turn's batch is sent (or failed, or
 * blocked): settle it as flush_forward and process() would have. */
static void send_settle(struct stream *src, int32_t res)
{
	struct iobuf *b = src->buf;
	struct stream *dst = src->send_dst;

	if (src->closed || !b)
		return;
	if (res < 0 && res != -EAGAIN && res != -EWOULDBLOCK && res != -EINTR && dst && !dst->closed) {
		if (!dst->errmsg)
			dst->errmsg = "send failed";
		b->done = b->parse;
		fire(dst, SE_ERROR);
		return;
	}
	/* A short write or a full socket: the usual path arms the wait. */
	if (b->done != b->parse) {
		if (!flush_forward(src))
			return;
	} else if (dst && !dst->closed) {
		forward_sent(src, dst);
	}
	if (src->closed || !src->buf)
		return;
	if (src->buf->done == src->buf->recv)
		release_if_empty(src);
}

/* May src's forward go into this batch? Pooler messages queued before it
 * for the same socket, or a second forward to that socket in the batch,
 * keep it out: those go one by one after the batch, in order. */
static bool send_op(struct stream *src, struct uring_op *op, struct stream **dsts, int n)
{
	struct iobuf *b = src->buf;
	struct stream *dst = src->send_dst;

	if (!b || b->done == b->parse || !send_batchable(src) || src->wait_peer ||
	    dst->out_sent < out_before(dst, src))
		return false;
	for (int i = 0; i < n; i++)
		if (dsts[i] == dst)
			return false;
	*op = (struct uring_op){ .fd = dst->fd, .send = true, .buf = b->data + b->done,
				 .len = b->parse - b->done };
	return true;
}

/* Its ciphertext is sent (or failed, or the socket is full): what waited
 * for room (a blocked forward, the stream's own queue, an owner waiting
 * for SE_FLUSHED) goes on from the loop, through on_write. */
static void tls_settle(struct stream *s, int32_t res)
{
	if (s->closed)
		return;
	if (res < 0 && res != -EAGAIN && res != -EWOULDBLOCK && res != -EINTR) {
		if (!s->errmsg)
			s->errmsg = "send failed";
		fire(s, SE_ERROR);
		return;
	}
	if (tls_unsent(s) > 0)
		event_add(write_ev(s), NULL);
	else if (s->blocked_src || s->paused || s->out.len > s->out_sent || s->flushed_owed)
		event_active(write_ev(s), EV_WRITE, 0);
}

/* Buffered TLS streams' ciphertext joins the batch after the forwards
 * (ops[n..)); returns the new count. */
static int tls_send_ops(struct uring_op *ops, struct stream **ss, int n)
{
	struct list *it;
	while (n < URING_BATCH && (it = list_first(&turn_tls)) != NULL) {
		struct stream *s = container_of(it, struct stream, tls_node);
		list_del(it);
		size_t len;
		const uint8_t *p = tls_out_data(s->tls, &len);
		if (s->closed || s->fd < 0 || len == 0)
			continue;
		ops[n] = (struct uring_op){ .fd = s->fd, .send = true, .buf = (void *)p,
					    .len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len };
		ss[n++] = s;
	}
	return n;
}

/* One batch of the gathered sends: forwards to plain sockets, then TLS
 * ciphertext. */
static void send_batch(void)
{
	struct uring_op ops[URING_BATCH];
	struct stream *srcs[URING_BATCH], *dsts[URING_BATCH], *later[URING_BATCH];
	int n = 0, nl = 0;
	struct list *it;

	while (n < URING_BATCH && nl < URING_BATCH && (it = list_first(&turn_sends)) != NULL) {
		struct stream *src = container_of(it, struct stream, send_node);
		list_del(it);
		if (send_op(src, &ops[n], dsts, n)) {
			srcs[n] = src;
			dsts[n++] = src->send_dst;
		} else {
			later[nl++] = src;
		}
	}
	int nf = n;
	n = tls_send_ops(ops, srcs, n);
	run_ops(ops, n);
	/* Count every byte sent before any owner runs: a callback may close
	 * a stream of this batch, and its unsent rest moves on from there. */
	for (int i = 0; i < n; i++) {
		if (ops[i].res <= 0)
			continue;
		if (i >= nf) {
			tls_out_sent(srcs[i]->tls, (size_t)ops[i].res);
			continue;
		}
		srcs[i]->buf->done += (uint32_t)ops[i].res;
		dsts[i]->bytes_out += (uint64_t)ops[i].res;
	}
	for (int i = 0; i < nf; i++)
		send_settle(srcs[i], ops[i].res);
	for (int i = nf; i < n; i++)
		tls_settle(srcs[i], ops[i].res);
	for (int i = 0; i < nl; i++)
		send_settle(later[i], 0);
}

/* The receive a stream's batch entry makes: into its buffer, or a
 * buffered TLS stream's ciphertext into OpenSSL's input. False: no room. */
static bool read_op(struct stream *s, struct uring_op *op)
{
	struct iobuf *b = s->buf;
	size_t room = BUF_END(b) - b->recv;
	void *at = b->data + b->recv;
	if (s->tls)
		at = tls_in_space(s->tls, &room);
	if (room == 0)
		return false;
	*op = (struct uring_op){ .fd = s->fd, .buf = at,
				 .len = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room };
	return true;
}

/* A buffered TLS stream's ciphertext (or EOF) came in the batch: decrypt
 * into the stream's buffer and route, as on_read would. */
static void tls_read_done(struct stream *s)
{
	struct iobuf *b = s->buf;
	ssize_t n = s->ops->recv(s, b->data + b->recv, BUF_END(b) - b->recv);
	if (n > 0) {
		b->recv += (uint32_t)n;
		s->bytes_in += (uint64_t)n;
		buf_check(b);
	}
	read_done(s, n, errno);
}

/* One batch of the gathered receives. Buffers are readied first (that
 * may route messages, and so close streams), then the receives run with
 * no callback in between, then each stream's bytes are counted before
 * any of them is routed. */
static void read_batch(void)
{
	struct uring_op ops[URING_BATCH];
	struct stream *ss[URING_BATCH];
	struct list ready, *it;
	int n = 0;

	list_init(&ready);
	for (int k = 0; k < URING_BATCH && (it = list_first(&turn_reads)) != NULL; k++) {
		struct stream *s = container_of(it, struct stream, read_node);
		list_del(it);
		if (!s->closed && s->reading && !s->suspended && read_prepare(s))
			list_append(&ready, &s->read_node);
	}
	while ((it = list_first(&ready)) != NULL) {
		struct stream *s = container_of(it, struct stream, read_node);
		list_del(it);
		if (s->closed || !s->reading || s->fd < 0)
			continue;
		if (!s->buf)
			s->buf = buf_get();
		struct iobuf *b = s->buf;
		if (b->recv == BUF_END(b))
			continue;
		if (!read_op(s, &ops[n]))
			continue;
		ss[n++] = s;
	}
	run_ops(ops, n);
	for (int i = 0; i < n; i++) {
		if (ss[i]->tls) {
			tls_in_added(ss[i]->tls, ops[i].res);   /* ciphertext, or the EOF */
			continue;
		}
		if (ops[i].res <= 0)
			continue;
		ss[i]->buf->recv += (uint32_t)ops[i].res;
		ss[i]->bytes_in += (uint64_t)ops[i].res;
		buf_check(ss[i]->buf);
	}
	for (int i = 0; i < n; i++) {
		if (ss[i]->closed)
			continue;
		if (ss[i]->tls && (ops[i].res >= 0 || ops[i].res == -EAGAIN))
			tls_read_done(ss[i]);
		else
			read_done(ss[i], ops[i].res < 0 ? -1 : ops[i].res, ops[i].res < 0 ? -ops[i].res : 0);
	}
}

/* Bounded: what a turn's routing gathers anew beyond this waits for the
 * next turn's end (the loop comes back at once: the sockets are ready). */
#define TURN_ROUNDS 8

void stream_turn_end(void)
{
	for (int r = 0; r < TURN_ROUNDS; r++) {
		if (!list_empty(&turn_reads))
			read_batch();
		else if (!list_empty(&turn_sends) || !list_empty(&turn_tls))
			send_batch();
		else
			return;
	}
}

void stream_flush_deferred(struct stream *s)
{
	if (list_empty(&s->send_node))
		return;
	list_del(&s->send_node);
	send_settle(s, 0);
}

/* pgcrew — framed supervisor/worker messages over a SOCK_SEQPACKET
 * socketpair. A malformed message from our own process is a bug: fatal(). */
#include "ipc.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <event2/event.h>
#include <sys/socket.h>
#include <unistd.h>

struct ipc_msg {
	struct list node;
	int fd;                        /* to pass, or -1; closed after sending */
	size_t len;
	uint8_t data[];                /* header + payload */
};

struct ipc_chan {
	int fd;
	int self_id;
	struct event *ev_read, *ev_write;
	struct list outq;              /* struct ipc_msg, in order */
	ipc_handler_fn on_msg;
	ipc_eof_fn on_eof;
	void *arg;
	bool dead;                     /* read to its end: the peer is gone */
	bool unsendable;               /* a send failed: the peer closed its end */
	int corked;                    /* ipc_cork depth: sends queue until 0 */
};

static const char *const type_names[] = {
	[IPC_WORKER_READY] = "WORKER_READY", [IPC_RELOAD] = "RELOAD",
	[IPC_RELOAD_DONE] = "RELOAD_DONE", [IPC_SHUTDOWN] = "SHUTDOWN",
	[IPC_PAUSE] = "PAUSE", [IPC_RESUME] = "RESUME",
	[IPC_LOG_REOPEN] = "LOG_REOPEN", [IPC_RELOAD_COMMIT] = "RELOAD_COMMIT",
	[IPC_RELOAD_ABORT] = "RELOAD_ABORT", [IPC_SLOT_REQ] = "SLOT_REQ",
	[IPC_SLOT_GRANT] = "SLOT_GRANT", [IPC_SLOT_DENY] = "SLOT_DENY",
	[IPC_SLOT_RELEASE] = "SLOT_RELEASE", [IPC_POOL_WANT] = "POOL_WANT",
	[IPC_CANCEL_FWD] = "CANCEL_FWD", [IPC_WELCOME_PUT] = "WELCOME_PUT",
	[IPC_WELCOME_GET] = "WELCOME_GET", [IPC_WELCOME] = "WELCOME",
	[IPC_LOGIN_FAILED] = "LOGIN_FAILED", [IPC_ADMIN_REQ] = "ADMIN_REQ",
	[IPC_ADMIN_RUN] = "ADMIN_RUN", [IPC_ADMIN_PART] = "ADMIN_PART",
	[IPC_ADMIN_DONE] = "ADMIN_DONE", [IPC_CLIENT_FD] = "CLIENT_FD",
	[IPC_TAKEOVER] = "TAKEOVER", [IPC_LISTEN_FD] = "LISTEN_FD",
	[IPC_LISTEN_END] = "LISTEN_END", [IPC_TAKEOVER_DONE] = "TAKEOVER_DONE",
	[IPC_SERVER_FD] = "SERVER_FD",
	[IPC_TAKEN_CLIENT] = "TAKEN_CLIENT", [IPC_TAKEN_SERVER] = "TAKEN_SERVER",
	[IPC_SHUTDOWN_READY] = "SHUTDOWN_READY", [IPC_RELOAD_APPLIED] = "RELOAD_APPLIED",
	[IPC_SLOT_WITHDRAW] = "SLOT_WITHDRAW", [IPC_CANCEL_DONE] = "CANCEL_DONE",
	[IPC_POOL_EVICT] = "POOL_EVICT", [IPC_EVICT_NONE] = "EVICT_NONE",
	[IPC_EVICT_DONE] = "EVICT_DONE", [IPC_WELCOME_FETCH] = "WELCOME_FETCH",
	[IPC_WELCOME_NONE] = "WELCOME_NONE",
};
_Static_assert(ARRAY_SIZE(type_names) == IPC_TYPE_COUNT, "ipc type names");

const char *ipc_type_name(enum ipc_type t)
{
	return t < IPC_TYPE_COUNT ? type_names[t] : "?";
}

static void chan_dead(struct ipc_chan *ch)
{
	if (ch->dead)
		return;
	ch->dead = true;
	event_del(ch->ev_read);
	event_del(ch->ev_write);
	if (ch->on_eof)
		ch->on_eof(ch, ch->arg);
}

/* A queued message goes (sent, or never to be): the socket it carried too. */
static void drop_msg(struct ipc_msg *m)
{
	list_del(&m->node);
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}

static void drop_queue(struct ipc_chan *ch)
{
	struct list *it;
	while ((it = list_first(&ch->outq)) != NULL)
		drop_msg(container_of(it, struct ipc_msg, node));
}

/* The peer closed its end: nothing more goes out, but what it sent before
 * is still to be read (a worker's last handovers), up to the EOF that
 * ends the channel (chan_dead). */
static void stop_sending(struct ipc_chan *ch)
{
	ch->unsendable = true;
	event_del(ch->ev_write);
	drop_queue(ch);
}

/* Queued messages go out IPC_SEND_BATCH at a time (sendmmsg): what a
 * corked sender queued (ipc_cork) reaches the peer in one system call, so
 * it wakes once and reads it all in one batch. */
#define IPC_SEND_BATCH 8

struct outbox {
	struct iovec iov[IPC_SEND_BATCH];
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl[IPC_SEND_BATCH];
	struct mmsghdr mm[IPC_SEND_BATCH];
};

static void fill_one(struct outbox *out, int i, struct ipc_msg *m)
{
	struct msghdr *mh = &out->mm[i].msg_hdr;
	out->iov[i] = (struct iovec){ .iov_base = m->data, .iov_len = m->len };
	*mh = (struct msghdr){ .msg_iov = &out->iov[i], .msg_iovlen = 1 };
	if (m->fd < 0)
		return;
	mh->msg_control = out->ctl[i].b;
	mh->msg_controllen = sizeof(out->ctl[i].b);
	struct cmsghdr *c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &m->fd, sizeof(int));
}

/* Returns messages sent (the first ones), 0 would block, -1 peer gone. */
static int send_some(struct ipc_chan *ch, struct outbox *out)
{
	int n = 0;
	struct list *it;
	list_for_each(it, &ch->outq) {
		if (n == IPC_SEND_BATCH)
			break;
		fill_one(out, n++, container_of(it, struct ipc_msg, node));
	}
	int sent = sendmmsg(ch->fd, out->mm, (unsigned)n, MSG_NOSIGNAL);
	if (sent >= 0)
		return sent;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	return -1;
}

static void flush_queue(struct ipc_chan *ch)
{
	struct outbox out;
	if (ch->corked > 0)
		return;
	while (list_first(&ch->outq)) {
		int sent = send_some(ch, &out);
		if (sent < 0) {
			stop_sending(ch);
			return;
		}
		for (int i = 0; i < sent; i++)
			drop_msg(container_of(list_first(&ch->outq), struct ipc_msg, node));
		if (sent == 0) {
			event_add(ch->ev_write, NULL);
			return;
		}
	}
}

void ipc_cork(struct ipc_chan *ch)
{
	if (ch)
		ch->corked++;
}

void ipc_uncork(struct ipc_chan *ch)
{
	if (!ch || ch->corked <= 0 || --ch->corked > 0 || ch->unsendable)
		return;
	flush_queue(ch);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	flush_queue(arg);
}

static int take_fd(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int fd;
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
			return fd;
		}
	}
	return -1;
}

/* Messages are read IPC_BATCH at a time (recvmmsg): a batch that comes
 * back short means the socket was empty then, so the usual wake-up, for
 * one or two messages, costs one read instead of a second one only to hear
 * EAGAIN (bench/tenants: about 5 per transaction across the processes). */
#define IPC_BATCH 8

struct inbox {
	uint8_t buf[IPC_BATCH][sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl[IPC_BATCH];
	struct iovec iov[IPC_BATCH];
	struct mmsghdr mm[IPC_BATCH];
};

/* One inbox for the process; a read begun inside a handler (the rest of a
 * dead worker's channel) gets one of its own. */
static struct inbox shared_inbox;
static bool shared_inbox_busy;

/* Returns messages read, 0 for none now, -1 for the peer gone (at the
 * EOF recvmmsg also counts empty messages: the caller stops at one). */
static int recv_batch(struct ipc_chan *ch, struct inbox *in)
{
	for (int i = 0; i < IPC_BATCH; i++) {
		in->iov[i] = (struct iovec){ .iov_base = in->buf[i], .iov_len = sizeof(in->buf[i]) };
		in->mm[i].msg_hdr = (struct msghdr){ .msg_iov = &in->iov[i], .msg_iovlen = 1,
						     .msg_control = in->ctl[i].b,
						     .msg_controllen = sizeof(in->ctl[i].b) };
	}
	for (;;) {
		int n = recvmmsg(ch->fd, in->mm, IPC_BATCH, MSG_CMSG_CLOEXEC | MSG_DONTWAIT, NULL);
		if (n > 0)
			return n;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		/* The peer closed with our messages unread: the kernel says so
		 * once, ahead of what the peer sent before closing (a worker's
		 * last handovers), which is still to be read up to the EOF. */
		if (n < 0 && errno == ECONNRESET)
			continue;
		return -1;
	}
}

static void deliver(struct ipc_chan *ch, struct inbox *in, int i)
{
	struct msghdr *mh = &in->mm[i].msg_hdr;
	size_t n = in->mm[i].msg_len;
	struct ipc_hdr hdr;
	if (n < sizeof(hdr))
		fatal("ipc: short message (%zu bytes)", n);
	memcpy(&hdr, in->buf[i], sizeof(hdr));
	if (hdr.len != n - sizeof(hdr) || hdr.type >= IPC_TYPE_COUNT || (mh->msg_flags & MSG_TRUNC))
		fatal("ipc: malformed message type=%u len=%u got=%zu", hdr.type, hdr.len, n);
	int rfd = take_fd(mh);
	if (ch->dead) {               /* gone while the batch was handled */
		if (rfd >= 0)
			close(rfd);
		return;
	}
	log_noise("ipc: got %s from %d len=%u", ipc_type_name(hdr.type), hdr.worker, hdr.len);
	ch->on_msg(ch, &hdr, in->buf[i] + sizeof(hdr), rfd, ch->arg);
}

/* Up to 64 messages; false when none is left (or the peer is gone); a
 * short batch counts as none left unless to_end (the rest of a channel
 * whose peer has exited, read to its EOF). */
static bool read_some(struct ipc_chan *ch, bool to_end)
{
	struct inbox *in = &shared_inbox;
	bool own = shared_inbox_busy;
	if (own)
		in = xmalloc(sizeof(*in));
	else
		shared_inbox_busy = true;
	bool more = true;
	for (int round = 0; more && round < 64 / IPC_BATCH && !ch->dead; round++) {
		int got = recv_batch(ch, in);
		bool eof = got < 0;
		for (int i = 0; i < got && !eof; i++) {
			eof = in->mm[i].msg_len == 0;    /* the EOF, as an empty message */
			if (!eof)
				deliver(ch, in, i);
		}
		if (eof)
			chan_dead(ch);
		more = !eof && (got == IPC_BATCH || (to_end && got > 0));
	}
	if (own)
		free(in);
	else
		shared_inbox_busy = false;
	return more && !ch->dead;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	(void)read_some(arg, false);
}

void ipc_chan_read_rest(struct ipc_chan *ch)
{
	while (ch && read_some(ch, true))
		;
}

struct ipc_chan *ipc_chan_new(struct event_base *base, int fd, int self_id,
			      ipc_handler_fn on_msg, ipc_eof_fn on_eof, void *arg)
{
	struct ipc_chan *ch = xcalloc(1, sizeof(*ch));
	ch->fd = fd;
	ch->self_id = self_id;
	ch->on_msg = on_msg;
	ch->on_eof = on_eof;
	ch->arg = arg;
	list_init(&ch->outq);
	if (util_set_nonblock(fd) < 0)
		fatal_errno("ipc: nonblock");
	ch->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, on_read, ch);
	ch->ev_write = event_new(base, fd, EV_WRITE, on_write, ch);
	event_add(ch->ev_read, NULL);
	return ch;
}

int ipc_chan_fd(const struct ipc_chan *ch)
{
	return ch->fd;
}

bool ipc_chan_drain(struct ipc_chan *ch, int timeout_ms)
{
	usec_t end = util_monotonic() + (usec_t)timeout_ms * 1000;
	if (ch)
		ch->corked = 0;           /* leaving: nothing is held back any more */
	while (ch && !ch->dead && !ch->unsendable && list_first(&ch->outq)) {
		usec_t now = util_monotonic();
		if (now >= end)
			return false;
		struct pollfd pfd = { .fd = ch->fd, .events = POLLOUT };
		int left_ms = (int)((end - now) / 1000) + 1;
		if (poll(&pfd, 1, left_ms) < 0 && errno != EINTR)
			return false;
		flush_queue(ch);
	}
	return !ch || !list_first(&ch->outq);
}

void ipc_chan_free(struct ipc_chan *ch)
{
	if (!ch)
		return;
	drop_queue(ch);
	event_free(ch->ev_read);
	event_free(ch->ev_write);
	close(ch->fd);
	free(ch);
}

int ipc_send(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid,
	     const void *payload, uint32_t len, int fd)
{
	if (ch->dead || ch->unsendable || len > IPC_MAX_PAYLOAD)
		return -1;
	struct ipc_msg *m = xmalloc(sizeof(*m) + sizeof(struct ipc_hdr) + len);
	struct ipc_hdr hdr = { .type = type, .len = len, .worker = ch->self_id, .reqid = reqid };
	memcpy(m->data, &hdr, sizeof(hdr));
	if (len)
		memcpy(m->data + sizeof(hdr), payload, len);
	m->len = sizeof(hdr) + len;
	m->fd = fd >= 0 ? dup(fd) : -1;
	list_append(&ch->outq, &m->node);
	flush_queue(ch);
	/* The peer is gone: this one was dropped, the caller still has its fd. */
	return ch->unsendable ? -1 : 0;
}

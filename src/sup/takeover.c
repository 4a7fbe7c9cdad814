/* pgcrew — online restart (see takeover.h). The running supervisor serves
 * its listening sockets on an abstract SEQPACKET socket with the same framing
 * as the worker channels; the new supervisor fetches them before its first
 * fork (blocking, bounded by a timeout: nothing else runs yet). */
#include "takeover.h"
#include "handover.h"
#include "ipc.h"
#include "listen.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define FETCH_TIMEOUT_SEC 5
#define MAX_FETCHED (LISTEN_MAX_FDS * 128 + 1)

/* IPC_TAKEOVER_DONE: the new process, and the record format of the
 * connections it can take (handover.h), 0 for none. */
struct done_msg {
	int32_t pid;
	int32_t format;
};

struct listen_fd_msg {
	int32_t slot;              /* -1: the Unix socket */
	char unix_path[108];
};

static struct {
	int fd;
	struct event *ev;
	struct event_base *base;
	struct listen_set *ls;
	takeover_done_fn on_done;
	struct ipc_chan *peer;     /* the one new process talking to us */
} srv = { .fd = -1 };

static int ctl_fd = -1;       /* new side: the connection to the old process */
static struct ipc_chan *old_chan;  /* the same, once our workers run: connections come */

static socklen_t ctl_addr(int port, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "pgcrew.%d", port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* ---- running side ---- */

static bool same_user(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	       (cr.uid == getuid() || cr.uid == 0);
}

static bool send_fd(struct ipc_chan *ch, int slot, const char *path, int fd)
{
	struct listen_fd_msg m;
	memset(&m, 0, sizeof(m));
	m.slot = slot;
	if (path)
		strlcpy_(m.unix_path, path, sizeof(m.unix_path));
	return ipc_send(ch, IPC_LISTEN_FD, 0, &m, sizeof(m), fd) == 0;
}

static void hand_sockets(struct ipc_chan *ch)
{
	const struct listen_set *ls = srv.ls;
	bool ok = true;
	for (int s = 0; s < ls->n_slots && ok; s++)
		for (int i = 0; i < ls->slots[s].n_fds && ok; i++)
			ok = send_fd(ch, s, NULL, ls->slots[s].fds[i]);
	if (ok && ls->unix_fd >= 0)
		ok = send_fd(ch, -1, ls->unix_path, ls->unix_fd);
	int32_t n = ls->n_slots;
	if (!ok || ipc_send(ch, IPC_LISTEN_END, 0, &n, sizeof(n), -1) < 0)
		log_error("online restart: could not pass the listening sockets");
	else
		log_info("online restart: listening sockets passed to a new process");
}

static void on_ctl_msg(struct ipc_chan *ch, const struct ipc_hdr *hdr, const void *payload, int fd, void *arg)
{
	if (fd >= 0)
		close(fd);
	switch (hdr->type) {
	case IPC_TAKEOVER:
		hand_sockets(ch);
		break;
	case IPC_TAKEOVER_DONE: {
		/* An older pgcrew sends its pid alone: it cannot take
		 * connections, so ours drain here as they did. */
		struct done_msg d = { 0, 0 };
		memcpy(&d, payload, hdr->len < sizeof(d) ? hdr->len : sizeof(d));
		takeover_serve_stop();
		srv.on_done((pid_t)d.pid, d.format == HANDOVER_FORMAT);
		break;
	}
	default:
		log_warning("online restart: unexpected %s on the control socket", ipc_type_name(hdr->type));
	}
}

static void on_ctl_eof(struct ipc_chan *ch, void *arg)
{
	/* Freed by the next accept or takeover_free(), never from inside
	 * its own read loop. */
}

static void on_ctl_accept(evutil_socket_t lfd, short what, void *arg)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	if (!same_user(fd)) {
		log_warning("online restart: control connection from another user refused");
		close(fd);
		return;
	}
	ipc_chan_free(srv.peer);
	srv.peer = ipc_chan_new(srv.base, fd, -1, on_ctl_msg, on_ctl_eof, NULL);
}

int takeover_serve(struct event_base *base, int port, struct listen_set *ls, takeover_done_fn on_done)
{
	struct sockaddr_un sa;
	socklen_t len = ctl_addr(port, &sa);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 4) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	srv.fd = fd;
	srv.base = base;
	srv.ls = ls;
	srv.on_done = on_done;
	srv.ev = event_new(base, fd, EV_READ | EV_PERSIST, on_ctl_accept, NULL);
	event_add(srv.ev, NULL);
	return 0;
}

int takeover_pass(enum ipc_type type, uint32_t reqid, const void *payload, uint32_t len, int fd)
{
	return srv.peer ? ipc_send(srv.peer, type, reqid, payload, len, fd) : -1;
}

void takeover_free(void)
{
	takeover_serve_stop();
	/* Connections handed over may still be queued for the new process:
	 * lost here, they would be closed. */
	if (srv.peer && !ipc_chan_drain(srv.peer, 5000))
		log_warning("online restart: connections not passed to the new process in time");
	ipc_chan_free(srv.peer);
	srv.peer = NULL;
	ipc_chan_free(old_chan);
	old_chan = NULL;
}

void takeover_close_in_child(void)
{
	if (srv.fd >= 0)
		close(srv.fd);
	if (srv.peer)
		close(ipc_chan_fd(srv.peer));
	if (old_chan)
		close(ipc_chan_fd(old_chan));
}

void takeover_serve_stop(void)
{
	if (srv.ev)
		event_free(srv.ev);
	srv.ev = NULL;
	if (srv.fd >= 0)
		close(srv.fd);
	srv.fd = -1;
}

/* ---- new side ---- */

struct fetched {
	int slot;
	int fd;
};

static int recv_one(int fd, struct ipc_hdr *hdr, void *payload, size_t cap, int *rfd)
{
	uint8_t buf[sizeof(struct ipc_hdr) + 256];
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };

	*rfd = -1;
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < (ssize_t)sizeof(*hdr))
		return -1;
	memcpy(hdr, buf, sizeof(*hdr));
	if (hdr->len != (size_t)n - sizeof(*hdr) || hdr->len > cap)
		return -1;
	memcpy(payload, buf + sizeof(*hdr), hdr->len);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(rfd, CMSG_DATA(c), sizeof(int));
	return 0;
}

static int send_hdr(int fd, enum ipc_type type, const void *payload, uint32_t len)
{
	uint8_t buf[sizeof(struct ipc_hdr) + 16];
	struct ipc_hdr hdr = { .type = type, .len = len, .worker = -1 };
	memcpy(buf, &hdr, sizeof(hdr));
	if (len)
		memcpy(buf + sizeof(hdr), payload, len);
	return send(fd, buf, sizeof(hdr) + len, MSG_NOSIGNAL) == (ssize_t)(sizeof(hdr) + len) ? 0 : -1;
}

/* New slot s takes the old slots o with o % n_slots == s; with more new
 * slots than old ones, the extra slots share (a dup of) an old slot's. */
static int place(struct listen_set *ls, int n_slots, int old_slots, const struct fetched *f, int n)
{
	ls->n_slots = n_slots;
	ls->slots = xcalloc((size_t)n_slots, sizeof(*ls->slots));
	for (int s = 0; s < n_slots; s++) {
		struct listen_slot *sl = &ls->slots[s];
		for (int i = 0; i < n; i++) {
			int o = f[i].slot;
			bool mine = s < old_slots ? o % n_slots == s : o == s % old_slots;
			if (!mine)
				continue;
			if (sl->n_fds == LISTEN_MAX_FDS)
				return -1;
			sl->fds[sl->n_fds++] = dup(f[i].fd);
		}
	}
	return 0;
}

int takeover_fetch(int port, int n_slots, struct listen_set *ls)
{
	struct sockaddr_un sa;
	socklen_t len = ctl_addr(port, &sa);
	struct fetched *got = xcalloc(MAX_FETCHED, sizeof(*got));
	int n = 0, old_slots = 0, rc = -1;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	memset(ls, 0, sizeof(*ls));
	ls->unix_fd = -1;
	struct timeval tv = { FETCH_TIMEOUT_SEC, 0 };
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0) {
		log_error("online restart: no running pgcrew answers for port %d", port);
		goto out;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send_hdr(fd, IPC_TAKEOVER, NULL, 0) < 0)
		goto out;
	for (;;) {
		struct ipc_hdr hdr;
		union { struct listen_fd_msg m; int32_t n; } p;
		int rfd;
		if (recv_one(fd, &hdr, &p, sizeof(p), &rfd) < 0) {
			log_error("online restart: the running pgcrew did not pass its sockets");
			goto out;
		}
		if (hdr.type == IPC_LISTEN_END && hdr.len == sizeof(int32_t)) {
			old_slots = p.n;
			break;
		}
		if (hdr.type != IPC_LISTEN_FD || hdr.len != sizeof(p.m) || rfd < 0 || n == MAX_FETCHED) {
			if (rfd >= 0)
				close(rfd);
			continue;
		}
		if (p.m.slot < 0) {
			ls->unix_fd = rfd;
			p.m.unix_path[sizeof(p.m.unix_path) - 1] = 0;
			strlcpy_(ls->unix_path, p.m.unix_path, sizeof(ls->unix_path));
			continue;
		}
		got[n].slot = p.m.slot;
		got[n++].fd = rfd;
	}
	if (old_slots <= 0 || place(ls, n_slots, old_slots, got, n) < 0) {
		log_error("online restart: cannot spread %d old sockets over %d workers", n, n_slots);
		goto out;
	}
	log_info("online restart: took %d listening sockets from the running pgcrew (%d workers)", n, old_slots);
	ctl_fd = fd;
	fd = -1;
	rc = 0;
out:
	for (int i = 0; i < n; i++)
		close(got[i].fd);
	free(got);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		ls->keep_path = true;    /* the path is still the old process's */
		listen_close(ls);
	}
	return rc;
}

static void on_old_eof(struct ipc_chan *ch, void *arg)
{
	log_info("online restart: the old process has finished");
}

void takeover_release_old(struct event_base *base, ipc_handler_fn on_conn)
{
	struct done_msg d = { (int32_t)getpid(), HANDOVER_FORMAT };
	if (ctl_fd < 0)
		return;
	if (send_hdr(ctl_fd, IPC_TAKEOVER_DONE, &d, sizeof(d)) < 0) {
		log_warning("online restart: could not tell the old process to stop");
		close(ctl_fd);
		ctl_fd = -1;
		return;
	}
	/* Its idle clients and servers come this way now. */
	old_chan = ipc_chan_new(base, ctl_fd, -1, on_conn, on_old_eof, NULL);
	ctl_fd = -1;
}

/* pgcrew — listening sockets: bound by the supervisor (one SO_REUSEPORT
 * socket per address per worker slot, plus the shared Unix socket) or taken
 * from systemd (socket activation), accepted on by the worker of each slot.
 * Startup resolution may block: it runs before any client exists. */
#include "listen.h"
#include "config.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <event2/event.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct listener {
	struct event *evs[LISTEN_MAX_FDS + 1];
	bool is_unix[LISTEN_MAX_FDS + 1];
	struct sockaddr_storage local[LISTEN_MAX_FDS + 1];   /* AF_UNSPEC: not one address */
	int n;
	listen_accept_fn cb;
	void *arg;
	bool paused;
};

static int bind_tcp(const struct addrinfo *ai, const struct config *cfg)
{
	int backlog = cfg->listen_backlog;
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int on = 1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
	if (ai->ai_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (cfg->tcp_defer_accept) {
		int secs = 45;   /* PgBouncer's value: accept only once data arrived */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
	}
	return fd;
}

static int open_addr(struct listen_set *ls, const char *host, const struct config *cfg)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *res = NULL;
	char port[16];
	snprintf(port, sizeof(port), "%d", cfg->listen_port);
	const char *h = strcmp(host, "*") == 0 ? NULL : host;
	int rc = getaddrinfo(h, port, &hints, &res);
	if (rc != 0) {
		log_error("cannot resolve listen_addr '%s': %s", host, gai_strerror(rc));
		return -1;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		for (int s = 0; s < ls->n_slots; s++) {
			struct listen_slot *sl = &ls->slots[s];
			if (sl->n_fds >= LISTEN_MAX_FDS) {
				log_error("too many listen addresses");
				freeaddrinfo(res);
				return -1;
			}
			int fd = bind_tcp(ai, cfg);
			if (fd < 0) {
				char a[64];
				util_format_addr(ai->ai_addr, a, sizeof(a), NULL);
				log_msg_errno(LG_ERROR, "cannot listen on %s:%d", a, cfg->listen_port);
				freeaddrinfo(res);
				return -1;
			}
			sl->fds[sl->n_fds++] = fd;
		}
	}
	freeaddrinfo(res);
	return 0;
}

static int open_unix(struct listen_set *ls, const struct config *cfg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.s.PGSQL.%d",
			 cfg->unix_socket_dir, cfg->listen_port);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		log_error("unix_socket_dir too long: %s", cfg->unix_socket_dir);
		return -1;
	}
	/* A stale socket from a crashed run would make bind fail; PgBouncer
	 * removes it too, after checking that nobody answers on it. */
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0) {
		if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			log_error("unix socket %s is in use by another process", sa.sun_path);
			return -1;
		}
		close(probe);
	}
	unlink(sa.sun_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, cfg->listen_backlog) < 0) {
		log_msg_errno(LG_ERROR, "cannot listen on unix socket %s", sa.sun_path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	(void)chmod(sa.sun_path, (mode_t)cfg->unix_socket_mode);
	if (cfg->unix_socket_group[0]) {
		struct group *g = getgrnam(cfg->unix_socket_group);
		if (g)
			(void)chown(sa.sun_path, (uid_t)-1, g->gr_gid);
		else
			log_warning("unix_socket_group '%s' not found", cfg->unix_socket_group);
	}
	ls->unix_fd = fd;
	strlcpy_(ls->unix_path, sa.sun_path, sizeof(ls->unix_path));
	return 0;
}

/* sd_listen_fds(3) without libsystemd: sockets start at fd 3; LISTEN_PID
 * must name this process (a forked daemon is not the one systemd started).
 * The variables are removed so no child process takes them for its own. */
#define SD_LISTEN_FDS_START 3

static int systemd_fd_count(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	if (!pid || !fds)
		return 0;
	char *end;
	long p = strtol(pid, &end, 10);
	if (*end || p != (long)getpid())
		return 0;
	long n = strtol(fds, &end, 10);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (*end || n < 0 || n > LISTEN_MAX_FDS + 1) {
		log_error("LISTEN_FDS=%s from the service manager is not a socket count", fds);
		return -1;
	}
	return (int)n;
}

/* One passed socket: a listening stream socket, made non-blocking (every
 * worker polls the same one) and close-on-exec. */
static int adopt_fd(struct listen_set *ls, const struct config *cfg, int fd)
{
	int type = 0, acc = 0;
	socklen_t tl = sizeof(type), al = sizeof(acc);
	struct sockaddr_storage ss;
	socklen_t ssl = sizeof(ss);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc ||
	    getsockname(fd, (struct sockaddr *)&ss, &ssl) < 0) {
		log_error("fd %d passed from service manager is not a listening stream socket", fd);
		return -1;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (ss.ss_family == AF_UNIX) {
		if (ls->unix_fd >= 0) {
			log_error("service manager passed more than one unix socket (fd %d)", fd);
			return -1;
		}
		const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;
		ls->unix_fd = fd;
		ls->keep_path = true;   /* the service manager owns the path */
		strlcpy_(ls->unix_path, un->sun_path, sizeof(ls->unix_path));
	} else {
		if (ls->slots[0].n_fds >= LISTEN_MAX_FDS) {
			log_error("too many listen addresses");
			return -1;
		}
		if (cfg->tcp_defer_accept) {
			int secs = 45;
			(void)setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
		}
		/* No SO_REUSEPORT group here: systemd bound one socket as root, so
		 * every worker accepts from that one queue through its own dup. */
		for (int s = 0; s < ls->n_slots; s++) {
			struct listen_slot *slot = &ls->slots[s];
			int dfd = s == 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 0);
			if (dfd < 0) {
				log_msg_errno(LG_ERROR, "dup of fd %d failed", fd);
				return -1;
			}
			slot->fds[slot->n_fds++] = dfd;
		}
	}
	log_info("socket passed from service manager (fd %d)", fd);
	return 0;
}

static int adopt_systemd(struct listen_set *ls, const struct config *cfg, int n)
{
	if (cfg->listen_addr[0])
		log_warning("sockets passed from service manager, cf_listen_addr ignored");
	if (cfg->unix_socket_dir[0] && strcmp(cfg->unix_socket_dir, "/tmp") != 0)
		log_warning("sockets passed from service manager, cf_unix_socket_dir ignored");
	int rc = 0;
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		if (rc == 0)
			rc = adopt_fd(ls, cfg, fd);
		else
			close(fd);   /* not adopted: listen_close would miss it */
	}
	return rc;
}

int listen_open(struct listen_set *ls, const struct config *cfg, int n_slots)
{
	memset(ls, 0, sizeof(*ls));
	ls->unix_fd = -1;
	ls->n_slots = n_slots;
	ls->slots = xcalloc((size_t)n_slots, sizeof(*ls->slots));

	int sd = systemd_fd_count();
	if (sd != 0) {
		if (sd < 0 || adopt_systemd(ls, cfg, sd) < 0) {
			listen_close(ls);
			return -1;
		}
		return 0;
	}

	char *addrs = xstrdup(cfg->listen_addr);
	char *save = NULL;
	int rc = 0;
	for (char *a = strtok_r(addrs, ", \t", &save); a && rc == 0; a = strtok_r(NULL, ", \t", &save))
		rc = open_addr(ls, a, cfg);
	free(addrs);
	if (rc == 0 && cfg->unix_socket_dir[0])
		rc = open_unix(ls, cfg);
	if (rc == 0 && ls->slots[0].n_fds == 0 && ls->unix_fd < 0) {
		log_error("nowhere to listen: listen_addr and unix_socket_dir are both empty");
		rc = -1;
	}
	if (rc < 0)
		listen_close(ls);
	return rc;
}

void listen_close(struct listen_set *ls)
{
	for (int s = 0; s < ls->n_slots; s++)
		for (int i = 0; i < ls->slots[s].n_fds; i++)
			close(ls->slots[s].fds[i]);
	free(ls->slots);
	ls->slots = NULL;
	ls->n_slots = 0;
	if (ls->unix_fd >= 0) {
		close(ls->unix_fd);
		if (!ls->keep_path)
			unlink(ls->unix_path);
	}
	ls->unix_fd = -1;
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct listener *l = arg;
	int at = 0;
	for (int i = 0; i < l->n; i++)
		if (event_get_fd(l->evs[i]) == lfd)
			at = i;
	bool is_unix = l->is_unix[at];
	/* Bounded batch: fairness toward traffic already being served. */
	for (int k = 0; k < 32 && !l->paused; k++) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(lfd, is_unix ? NULL : (struct sockaddr *)&peer, is_unix ? NULL : &plen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				log_msg_errno(LG_WARNING, "accept() failed");
			else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
				 errno != ECONNABORTED)
				log_msg_errno(LG_WARNING, "accept() failed");
			return;
		}
		struct accepted how = {
			(const struct sockaddr *)&peer,
			l->local[at].ss_family != AF_UNSPEC ? (const struct sockaddr *)&l->local[at] : NULL,
		};
		l->cb(fd, is_unix, is_unix ? NULL : &how, l->arg);
	}
}

/* The local address of every connection accepted on fd, if it is bound to
 * a single address (not 0.0.0.0 or ::); else family AF_UNSPEC. */
static void bound_address(int fd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);
	bool one = false;
	if (getsockname(fd, (struct sockaddr *)ss, &len) == 0) {
		if (ss->ss_family == AF_INET)
			one = ((const struct sockaddr_in *)ss)->sin_addr.s_addr != htonl(INADDR_ANY);
		else if (ss->ss_family == AF_INET6)
			one = !IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
	}
	if (!one)
		ss->ss_family = AF_UNSPEC;
}

struct listener *listener_start(struct event_base *base, const struct listen_set *ls,
				int slot, listen_accept_fn cb, void *arg)
{
	struct listener *l = xcalloc(1, sizeof(*l));
	l->cb = cb;
	l->arg = arg;
	const struct listen_slot *sl = &ls->slots[slot];
	for (int i = 0; i < sl->n_fds; i++) {
		bound_address(sl->fds[i], &l->local[l->n]);
		l->evs[l->n++] = event_new(base, sl->fds[i], EV_READ | EV_PERSIST, on_accept, l);
	}
	if (ls->unix_fd >= 0) {
		l->is_unix[l->n] = true;
		l->evs[l->n++] = event_new(base, ls->unix_fd, EV_READ | EV_PERSIST, on_accept, l);
	}
	for (int i = 0; i < l->n; i++)
		event_add(l->evs[i], NULL);
	return l;
}

void listen_close_tcp(struct listen_set *ls)
{
	for (int s = 0; s < ls->n_slots; s++) {
		for (int i = 0; i < ls->slots[s].n_fds; i++)
			close(ls->slots[s].fds[i]);
		ls->slots[s].n_fds = 0;
	}
}

void listener_stop_tcp(struct listener *l)
{
	int kept = 0;
	for (int i = 0; i < l->n; i++) {
		if (!l->is_unix[i]) {
			event_free(l->evs[i]);
			continue;
		}
		l->evs[kept] = l->evs[i];
		l->is_unix[kept++] = true;
	}
	l->n = kept;
}

void listener_pause(struct listener *l, bool paused)
{
	if (l->paused == paused)
		return;
	l->paused = paused;
	for (int i = 0; i < l->n; i++) {
		if (paused)
			event_del(l->evs[i]);
		else
			event_add(l->evs[i], NULL);
	}
}

void listener_free(struct listener *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->n; i++)
		event_free(l->evs[i]);
	free(l);
}

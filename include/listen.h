/* pgcrew — listening sockets. The supervisor binds one SO_REUSEPORT socket
 * per TCP address per worker slot (so a restarted worker inherits its queue)
 * and one shared Unix socket; a worker accepts on the sockets of its slot. */
#ifndef PGCREW_LISTEN_H
#define PGCREW_LISTEN_H

#include "types.h"

struct config;
struct event_base;

#define LISTEN_MAX_FDS 16

struct listen_slot {
	int fds[LISTEN_MAX_FDS];   /* TCP sockets of this slot */
	int n_fds;
};

struct listen_set {
	struct listen_slot *slots;
	int n_slots;
	int unix_fd;               /* shared by every slot, -1 if none */
	char unix_path[108];
	bool keep_path;            /* handed to another process: do not unlink */
};

/* Bind everything, or adopt the sockets systemd passed (LISTEN_FDS; then
 * listen_addr and unix_socket_dir are ignored, as in PgBouncer, and every
 * slot shares each passed TCP socket). On error logs why and returns -1. */
int listen_open(struct listen_set *ls, const struct config *cfg, int n_slots) MUSTCHECK;
void listen_close(struct listen_set *ls);   /* also unlinks the unix socket */
/* Shutdown: close this process's copies of the TCP sockets, keep the Unix
 * one (the console stays reachable). Once every process has, new TCP
 * clients are refused, or go to the other instances sharing the port. */
void listen_close_tcp(struct listen_set *ls);

/* What accept() told of a TCP connection, so that a login need not ask
 * the kernel again: the peer's address, and the local one when the
 * listening socket is bound to one address (NULL for a wildcard, where
 * only getsockname() knows which of the host's addresses was reached). */
struct accepted {
	const struct sockaddr *peer;
	const struct sockaddr *local;
};

/* Worker side: accept on the given fds, calling worker code per connection
 * (how is NULL for the Unix socket). */
typedef void (*listen_accept_fn)(int fd, bool is_unix, const struct accepted *how, void *arg);
struct listener;
struct listener *listener_start(struct event_base *base, const struct listen_set *ls,
				int slot, listen_accept_fn cb, void *arg);
void listener_pause(struct listener *l, bool paused);   /* stop/start accepting */
void listener_stop_tcp(struct listener *l);    /* before listen_close_tcp: Unix only from now */
void listener_free(struct listener *l);

#endif

/* pgcrew — supervisor <-> worker messages. One SOCK_SEQPACKET socketpair per
 * worker: the kernel keeps message boundaries, so a message is one header plus
 * payload in one datagram; file descriptors ride along with SCM_RIGHTS. */
#ifndef PGCREW_IPC_H
#define PGCREW_IPC_H

#include "types.h"

struct event_base;

enum ipc_type {
	IPC_WORKER_READY,      /* worker -> sup: loop running, listeners open */
	IPC_RELOAD,            /* sup -> worker: load and check the config, keep it staged */
	IPC_RELOAD_DONE,       /* worker -> sup: staged (payload: int32 status, 0 = ok) */
	IPC_SHUTDOWN,          /* sup -> worker: payload int32 enum shutdown_mode */
	IPC_PAUSE,             /* sup -> worker: SIGUSR1 */
	IPC_RESUME,            /* sup -> worker: SIGUSR2 */
	IPC_LOG_REOPEN,        /* sup -> worker: reopen the logfile */
	IPC_RELOAD_COMMIT,     /* sup -> worker: every worker staged it: apply */
	IPC_RELOAD_ABORT,      /* sup -> worker: some worker failed: drop the staged one */
	IPC_SLOT_REQ,          /* worker -> sup: struct slot_req; reqid echoed in the answer */
	IPC_SLOT_GRANT,        /* sup -> worker: struct slot_req, now or when one frees */
	IPC_SLOT_DENY,         /* sup -> worker: struct slot_req (did not ask to wait) */
	IPC_SLOT_RELEASE,      /* worker -> sup: struct slot_req (names only) */
	IPC_POOL_WANT,         /* sup -> worker: struct slot_req + int32 n: give up to n idle servers */
	IPC_CANCEL_FWD,        /* worker -> sup -> owner worker: struct cancel_fwd */
	IPC_WELCOME_PUT,       /* worker -> sup: a pool's server parameters (see pool.c) */
	IPC_WELCOME_GET,       /* worker -> sup: names; answered by IPC_WELCOME */
	IPC_WELCOME,           /* sup -> worker: names + parameters (none: unknown) */
	IPC_LOGIN_FAILED,      /* worker -> sup -> other workers: struct login_failure */
	IPC_ADMIN_REQ,         /* worker -> sup: a console command for every worker (text) */
	IPC_ADMIN_RUN,         /* sup -> worker: run it here (reqid = fan-out id) */
	IPC_ADMIN_PART,        /* worker -> sup -> asking worker: result messages */
	IPC_ADMIN_DONE,        /* worker -> sup -> asking worker: finished (payload: error text) */
	IPC_CLIENT_FD,         /* worker -> sup -> worker: a fresh client socket (fd), struct client_fd */
	IPC_TAKEOVER,          /* new pgcrew -> running one (control socket): pass your sockets */
	IPC_LISTEN_FD,         /* running -> new: one listening socket (fd) and its slot */
	IPC_LISTEN_END,        /* running -> new: int32 number of slots; all sent */
	IPC_TAKEOVER_DONE,     /* new -> running: int32 pid; my workers run, drain and exit */
	IPC_SERVER_FD,         /* worker -> sup -> worker: an idle server connection (fd) and its
	                          state (handover.h); reqid: the slot request it answers, or
	                          IPC_SERVER_BACK_* when it returns to its sender */
	IPC_TAKEN_CLIENT,      /* old worker -> old sup -> new sup -> new worker (online restart):
	                          an idle client (fd) and its state (handover.h); reqid: IPC_TAKEN_* */
	IPC_TAKEN_SERVER,      /* the same for an idle server (handover.h record); after its
	                          client when they are linked (session pooling) */
	IPC_SHUTDOWN_READY,    /* worker -> sup: SHUTDOWN WAIT_FOR_SERVERS, no server in use
	                          here; the supervisor ends all workers once every one is */
	IPC_RELOAD_APPLIED,    /* worker -> sup: RELOAD_COMMIT or _ABORT done here (the
	                          console's RELOAD answers once every worker has) */
	IPC_SLOT_WITHDRAW,     /* worker -> sup: struct slot_req (names only), reqid: its queued
	                          request is not needed; answered IPC_SLOT_DENY (reqid, or
	                          IPC_SLOT_NOT_QUEUED when its grant went first) */
	IPC_CANCEL_DONE,       /* owner worker -> sup -> waiter's worker: struct cancel_waiter */
	IPC_POOL_EVICT,        /* sup -> worker: struct slot_req (names only): close an idle
	                          server of this pool for another pool's client (a full
	                          max_db/user_connections); its slot returns as any close's */
	IPC_EVICT_NONE,        /* worker -> sup: struct slot_req (names only): no idle server
	                          of the pool left to close for IPC_POOL_EVICT */
	IPC_EVICT_DONE,        /* worker -> sup: struct slot_req (names only): closed a server
	                          of the pool for its want, which was other pools' only
	                          (pool_want.same == 0), in place of offering it */
	IPC_WELCOME_FETCH,     /* sup -> worker: names: another worker asked for the pool's
	                          welcome, not sent yet (pool.c sends it only when another
	                          worker holds the pool): send it (IPC_WELCOME_PUT), or
	                          IPC_WELCOME_NONE when this worker neither has it nor
	                          expects it */
	IPC_WELCOME_NONE,      /* worker -> sup: names: no welcome of the pool here */
	IPC_TYPE_COUNT
};

enum shutdown_mode {
	SHUTDOWN_IMMEDIATE,        /* SIGQUIT: close everything now */
	SHUTDOWN_WAIT_SERVERS,     /* SIGINT: wait until servers are released */
	SHUTDOWN_WAIT_CLIENTS,     /* SIGTERM: wait until clients leave */
	SHUTDOWN_HANDOVER,         /* online restart: hand idle clients and servers to the
	                              new process; the rest as WAIT_CLIENTS */
};

/* IPC_TAKEN_*'s reqid: the old worker's id (the new process gives the
 * connection to worker id % its workers, where the client's cancel key
 * now points), and for a server whether a client came for it first. */
#define IPC_TAKEN_WORKER(reqid) ((int)((reqid) & 0xffffu))
#define IPC_TAKEN_PAIRED 0x10000u

/* IPC_ADMIN_REQ's text for the console's RELOAD: the supervisor reloads
 * and answers IPC_ADMIN_DONE once every worker has applied it. */
#define ADMIN_RELOAD_REQ "RELOAD"

/* IPC_SERVER_FD's reqid beside a slot request's id (those start at 1):
 * UNASKED, for a worker whose client waits longest but has no request
 * queued (the ledger moved the slot all the same); back to the worker that
 * offered it, when no other worker's client waits for its pool: KEEP it
 * idle, or CLOSE it to make room for another pool of its database or user. */
#define IPC_SERVER_UNASKED 0x7fffffefu
/* IPC_SLOT_DENY's reqid answering an IPC_SLOT_WITHDRAW that found nothing
 * queued (the grant went first); a withdrawn request is denied by its id. */
#define IPC_SLOT_NOT_QUEUED 0x7fffffeeu
#define IPC_SERVER_BACK_KEEP 0x7ffffff0u
#define IPC_SERVER_BACK_CLOSE 0x7ffffff1u

struct ipc_hdr {
	uint16_t type;             /* enum ipc_type */
	uint16_t flags;
	uint32_t len;              /* payload bytes after the header */
	int32_t worker;            /* sender's worker id, -1 = supervisor */
	uint32_t reqid;            /* matches replies to requests */
};

#define IPC_MAX_PAYLOAD 65536

#define LEDGER_NAME 64

/* One request, as a worker sends it (IPC_SLOT_REQ payload). Limits <= 0
 * mean none. The worker resolves them from its config: pool_limit is
 * pool_size, plus reserve_pool_size when its waiter may use the reserve. */
struct slot_req {
	char db[LEDGER_NAME];
	char user[LEDGER_NAME];
	int32_t pool_limit;
	int32_t db_limit;
	int32_t user_limit;
	uint8_t wait;              /* queue when at a limit instead of refusing */
	uint8_t own;               /* for a server of a client's own (replication): an
	                              idle server of the pool elsewhere cannot serve it,
	                              only be closed to make room */
	uint8_t move;              /* only an idle server moved from another worker
	                              serves it (the reuse order): never granted a
	                              new slot, denied when none came in time */
	uint8_t claim;             /* IPC_SLOT_RELEASE: the server was closed on an
	                              eviction claim (shm.h) on the database's
	                              slot (SLOT_CLAIM_DB) or the user's (_USER) */
	int64_t asked_at;          /* IPC_SLOT_REQ: when the worker asked
	                              (util_monotonic), echoed in the answer: the
	                              slot_wait histogram pairs them exactly */
};
enum { SLOT_CLAIM_NONE, SLOT_CLAIM_DB, SLOT_CLAIM_USER };

/* IPC_POOL_WANT payload. n: queued requests elsewhere this pool's idle
 * servers could serve (give up servers idle for a while), at most the
 * servers of the pool the worker holds; soon: how many of
 * those come from a worker below its fair share of the pool, or from
 * another pool (a full max_db/user_connections), which should not wait
 * long; over: servers held beyond the fair share while others queue (give
 * up as soon as idle); other_since: when the oldest request of another
 * pool among them was queued (first come, first served across pools; told
 * again only when it moves by more than a slack, so it may be up to 2 ms
 * older than the oldest still queued). */
struct pool_want {
	struct slot_req pool;      /* names only */
	int32_t n;
	int32_t soon;
	int32_t over;
	int32_t same;              /* of n, requests of this very pool (a server moved
	                              serves them); 0: every one is another pool's (or
	                              a server of a client's own), which only a close
	                              serves: the worker closes its server itself and
	                              tells IPC_EVICT_DONE, no handover */
	int64_t other_since;       /* oldest of those for another pool: queued since
	                              (CLOCK_MONOTONIC), 0 for none */
};

/* IPC_LOGIN_FAILED payload: a pool's server login failed; every worker
 * serves the cached error until server_login_retry, as one PgBouncer would. */
struct login_failure {
	struct slot_req pool;      /* names only */
	char code[6];
	char msg[512];
	char pad[2];
	int64_t age_usec;          /* how long ago it failed */
};

/* A client's cancel connection, kept open until its cancel is done (as
 * PgBouncer keeps it: a driver that waits for it to close before its next
 * query must not have that query canceled), and how the cancel ended. */
struct cancel_waiter {
	int32_t worker;            /* the worker holding the connection; -1: nobody waits */
	int32_t outcome;           /* enum cancel_outcome (cancel.h), in IPC_CANCEL_DONE */
	uint64_t client;           /* its connection id */
};

struct cancel_fwd {
	struct cancelkey key;
	struct cancel_waiter waiter;
};

/* IPC_CLIENT_FD payload: a client socket accepted by one worker and handed
 * to a lighter one. The id was taken at accept, as PgBouncer numbers a
 * socket when it accepts it: a client accepted later elsewhere, while this
 * one travels, has a later id. */
struct client_fd {
	int32_t target;            /* the worker it goes to */
	int32_t pad;
	uint64_t id;               /* its socket id (SHOW CLIENTS id, C-<id>) */
};

struct ipc_chan;
typedef void (*ipc_handler_fn)(struct ipc_chan *ch, const struct ipc_hdr *hdr,
			       const void *payload, int fd, void *arg);
/* Called once when the peer is gone: read to its EOF (or an error). A
 * failed send stops sending only: what the peer sent before is read first. */
typedef void (*ipc_eof_fn)(struct ipc_chan *ch, void *arg);

struct ipc_chan *ipc_chan_new(struct event_base *base, int fd, int self_id,
			      ipc_handler_fn on_msg, ipc_eof_fn on_eof, void *arg);
void ipc_chan_free(struct ipc_chan *ch);
/* Before exit: send what is queued, blocking up to timeout_ms. True when
 * nothing is left (messages carrying sockets must not be lost). */
bool ipc_chan_drain(struct ipc_chan *ch, int timeout_ms);
/* The peer has exited: handle what it sent before it went. */
void ipc_chan_read_rest(struct ipc_chan *ch);
int ipc_chan_fd(const struct ipc_chan *ch);
/* Between ipc_cork and ipc_uncork (nested) sends only queue; the last
 * uncork sends them in one system call, so the peer wakes once for a
 * release and the request it makes room for. */
void ipc_cork(struct ipc_chan *ch);
void ipc_uncork(struct ipc_chan *ch);
/* Queue a message (fd = -1 for none); sends at once when the socket allows.
 * -1 when the peer is known gone (this message dropped, fd still the
 * caller's); 0 does not promise delivery of a queued one. */
int ipc_send(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid,
	     const void *payload, uint32_t len, int fd) MUSTCHECK;
const char *ipc_type_name(enum ipc_type t);

/* Typed messages: one builder and one reader per payload shape. Builders
 * return ipc_send's result. A reader checks the length (and the
 * terminating NUL of strings) and copies out; a bad payload is logged here,
 * the same way for every type ("ipc: bad <TYPE> payload (<n> bytes) from
 * worker <w>"), and the reader returns false: the caller drops the message. */
int ipc_send_empty(struct ipc_chan *ch, enum ipc_type type) MUSTCHECK;
int ipc_send_i32(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid, int32_t v, int fd) MUSTCHECK;
bool ipc_get_i32(const struct ipc_hdr *hdr, const void *payload, int32_t *v) MUSTCHECK;
int ipc_send_slot(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid,
		  const struct slot_req *r) MUSTCHECK;
bool ipc_get_slot(const struct ipc_hdr *hdr, const void *payload, struct slot_req *r) MUSTCHECK;
int ipc_send_want(struct ipc_chan *ch, const struct pool_want *w) MUSTCHECK;
bool ipc_get_want(const struct ipc_hdr *hdr, const void *payload, struct pool_want *w) MUSTCHECK;
int ipc_send_client_fd(struct ipc_chan *ch, const struct client_fd *m, int fd) MUSTCHECK;
bool ipc_get_client_fd(const struct ipc_hdr *hdr, const void *payload, struct client_fd *m) MUSTCHECK;
int ipc_send_login_failure(struct ipc_chan *ch, const struct login_failure *f) MUSTCHECK;
bool ipc_get_login_failure(const struct ipc_hdr *hdr, const void *payload,
			   struct login_failure *f) MUSTCHECK;
/* IPC_CANCEL_FWD: a CancelRequest's key (pid and a secret of 4 to 256
 * bytes; another length is a bad payload) and who waits for its outcome
 * (a payload of the key alone has no waiter). IPC_CANCEL_DONE: the outcome
 * for the waiter. */
int ipc_send_cancel(struct ipc_chan *ch, const struct cancelkey *k, const struct cancel_waiter *wt) MUSTCHECK;
bool ipc_get_cancel(const struct ipc_hdr *hdr, const void *payload, struct cancelkey *k,
		    struct cancel_waiter *wt) MUSTCHECK;
int ipc_send_cancel_done(struct ipc_chan *ch, const struct cancel_waiter *wt) MUSTCHECK;
bool ipc_get_cancel_done(const struct ipc_hdr *hdr, const void *payload, struct cancel_waiter *wt) MUSTCHECK;
/* A NUL-terminated text (console commands and their errors). */
int ipc_send_text(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid, const char *text) MUSTCHECK;
bool ipc_get_text(const struct ipc_hdr *hdr, const void *payload, const char **text) MUSTCHECK;

#endif

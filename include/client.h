/* pgcrew — client connections: login (startup, TLS, authentication), the
 * request/response relay toward a linked server, and closing. */
#ifndef PGCREW_CLIENT_H
#define PGCREW_CLIENT_H

#include "connlog.h"
#include "objects.h"
#include "cancel.h"
#include "log.h"

struct accepted;

/* The largest client message the pooler reads whole (its stream's
 * max_whole). A named Parse is read whole when prepared statements are
 * tracked, so this bounds their text; no client makes the pooler hold more
 * than this for one message. */
#define CLIENT_WHOLE_MAX (16u << 20)

/* id: the socket's id, taken when it was accepted (0: take one now). */
void client_accept(struct world *w, int fd, bool is_unix, const struct accepted *how, uint64_t id);
void client_set_state(struct client *c, enum client_state st);
const char *client_state_name(enum client_state st);
/* Attached to its pool: waiting for it or active in it (c->pool is then set
 * and counts it). A client logging in, cancelling or gone may have no pool. */
bool client_in_pool(const struct client *c);

/* Close with a reason; with send_error the client gets a FATAL ErrorResponse
 * carrying the reason (PgBouncer's disconnect_client). */
void client_close(struct client *c, bool send_error, const char *reason);
void client_close_sqlstate(struct client *c, const char *sqlstate, const char *reason);
/* Begin authentication per auth_type (c->login_user may be NULL: mock). */
void client_start_auth(struct client *c);
/* A console login counts in its user's and the console database's client
 * counts, limited by max_user/db_client_connections unless exempt
 * (admin_users), as in PgBouncer; false: refused and closed. */
bool client_count_console(struct client *c, bool exempt);
/* auth_query answered: u is the user, with the secret it fetched. */
void client_login_found(struct client *c, struct puser *u);
/* Pool callbacks. */
void client_server_linked(struct client *c);      /* a server is now c->link */
void client_pool_ready(struct client *c);         /* welcome parameters known */
void client_server_login_failed(struct client *c, const char *sqlstate, const char *msg);
void client_cached_login_error(struct client *c, const char *msg);
void client_send_notice(struct client *c, const char *msg);
/* login_notify_message, if set, as a NoticeResponse into pb (the welcome). */
struct pktbuf;
void client_put_login_notice(const struct client *c, struct pktbuf *pb);
/* Add the client's traffic since the last call to its pool's counters. */
void client_account_bytes(struct client *c);
/* Online restart. Taken: a logged-in client arriving from the old process
 * with its cancel key, in CLIENT_ACTIVE of pool p, not reading yet (the
 * caller moves its parameters and statements in and starts it). Forget:
 * it has been sent to the new process; gone here without a word. */
struct handover_client;
struct client *client_taken(int fd, const struct handover_client *h, struct pool *p,
			    struct puser *login_user);
void client_forget(struct client *c);
void client_free(struct client *c);              /* reaper only */
/* The pool c belongs to (NULL: none); counted in the pool's n_clients
 * until c is freed (pool_idle_timeout). Never set c->pool otherwise. */
void client_set_pool(struct client *c, struct pool *p);


struct startup_msg;

/* The console (admin.c) registers how its clients log in, are welcomed,
 * served and freed, so that client.c never calls up into it. */
struct client_console_ops {
	void (*login)(struct client *c, const struct startup_msg *m);
	void (*welcome)(struct client *c);
	enum stream_action (*on_pkt)(struct client *c, const struct pkt_hdr *h, const uint8_t *data,
				     size_t avail);
	void (*freed)(struct client *c);
};
void client_set_console(const struct client_console_ops *ops);

/* A waiting cancel connection's cancel is done: it closes (worker.c
 * registers this with cancel_set_waiter_done). */
void client_cancel_done(struct world *w, uint64_t id, enum cancel_outcome o);

#endif

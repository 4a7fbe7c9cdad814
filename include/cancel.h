/* pgcrew — query cancellation: the BackendKeyData pgcrew hands to clients,
 * lookup of a CancelRequest's target, and forwarding it to the PostgreSQL
 * backend the target client is running on. */
#ifndef PGCREW_CANCEL_H
#define PGCREW_CANCEL_H

#include "ipc.h"
#include "objects.h"

/* Give the client a key of its protocol version (a pid unique in this
 * worker, a secret from the CSPRNG), register it, and count the login. */
void cancel_register(struct client *c);
/* A key told to the client elsewhere (online restart): kept as it is. */
void cancel_register_key(struct client *c, const struct cancelkey_own *key);
void cancel_unregister(struct client *c);
/* This worker's client whose key k is exactly (secret compared in
 * constant time), or NULL. */
struct client *cancel_find(const struct cancelkey *k);
struct client *cancel_find_own(const struct cancelkey_own *key);
/* How a CancelRequest ended; its client connection closes with the text
 * (PgBouncer's words) once it has (cancel_outcome_text). */
enum cancel_outcome {
	CANCEL_PENDING,            /* not yet: the waiter is told later */
	CANCEL_SENT,               /* PostgreSQL (or the peer) has taken it */
	CANCEL_UNKNOWN_KEY,
	CANCEL_IDLE,               /* its client runs nothing */
	CANCEL_SETTING_VARS,
	CANCEL_CONSOLE,
	CANCEL_SEND_FAILED,
	CANCEL_TIMED_OUT,          /* cancel_wait_timeout */
	CANCEL_NO_ROUTE,           /* a worker or peer the key names is not there */
	CANCEL_DEFERRED,           /* its client waits for a server: sent once it has one */
	CANCEL_OUTCOMES
};
const char *cancel_outcome_text(enum cancel_outcome o);

/* A CancelRequest arrived on client connection wt->client: sent on if its
 * target is linked to a server, here, on another worker or on a [peers]
 * instance, as its key says (a key of no pgcrew layout goes nowhere).
 * CANCEL_PENDING: the connection stays open until the cancel has been
 * acted on, and then the waiter callback closes it; any other outcome is
 * final now and the caller closes it. */
enum cancel_outcome cancel_handle_request(struct world *w, const struct cancelkey *k,
					  const struct cancel_waiter *wt);
/* What closes a waiting cancel connection of this worker (client.c). */
typedef void (*cancel_waiter_fn)(struct world *w, uint64_t client, enum cancel_outcome o);
void cancel_set_waiter_done(cancel_waiter_fn fn);
/* The outcome for a waiter: closed here, or told to its worker. */
void cancel_waiter_done(struct world *w, const struct cancel_waiter *wt, enum cancel_outcome o);
/* The server code's callback for a server whose cancels are all answered
 * (one waiting for them as SERVER_BEING_CANCELED, or the client linked to
 * it holding its next request back). */
void cancel_set_server_done(void (*fn)(struct server *sv));
/* Cancel the query of this worker's client with that key (from another
 * worker), telling wt how it ended. */
void cancel_local(struct world *w, const struct cancelkey *k, const struct cancel_waiter *wt);
/* Send a CancelRequest for sv's backend on a new connection; wt (may be
 * NULL) is told once PostgreSQL has closed it. */
bool cancel_send(struct server *sv, const struct cancel_waiter *wt);
/* The server is being freed: in-flight requests forget it. */
void cancel_server_gone(struct server *sv);
/* cancel_wait_timeout */
void cancel_janitor(struct world *w, usec_t now);
/* The client's request has just gone to its server after a cancel came
 * while it waited: cancel it there in a moment. */
void cancel_after_send(struct client *c);
/* Cancels waiting for their moment (tests). */
size_t cancel_deferred_count(void);
void cancel_free_all(void);

#endif

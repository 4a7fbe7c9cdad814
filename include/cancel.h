/* pgcrew — query cancellation: the BackendKeyData pgcrew hands to clients,
 * lookup of a CancelRequest's target, and forwarding it to the PostgreSQL
 * backend the target client is running on. */
#ifndef PGCREW_CANCEL_H
#define PGCREW_CANCEL_H

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
/* A CancelRequest arrived (the caller closes its connection afterwards):
 * sent on if its target is running a query, here, on another worker or on
 * a [peers] instance, as its key says (a key of no pgcrew layout goes
 * nowhere). */
void cancel_handle_request(struct world *w, const struct cancelkey *k);
/* The server code's callback for a server whose cancels are all answered
 * while it waited for them (SERVER_BEING_CANCELED). */
void cancel_set_server_done(void (*fn)(struct server *sv));
/* Cancel the query of this worker's client with that key, if it runs one. */
void cancel_local(const struct cancelkey *k);
/* Send a CancelRequest for sv's backend on a new connection. */
bool cancel_send(struct server *sv);
/* The server is being freed: in-flight requests forget it. */
void cancel_server_gone(struct server *sv);
/* cancel_wait_timeout */
void cancel_janitor(struct world *w, usec_t now);
/* The client's request has just gone to its server after a cancel came
 * while it waited: cancel it there in a moment. */
void cancel_after_send(struct client *c);
void cancel_free_all(void);

#endif

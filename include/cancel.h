/* pgcrew — query cancellation: the BackendKeyData pgcrew hands to clients,
 * lookup of a CancelRequest's target, and forwarding it to the PostgreSQL
 * backend the target client is running on. */
#ifndef PGCREW_CANCEL_H
#define PGCREW_CANCEL_H

#include "objects.h"

/* Give the client a unique key and register it. */
void cancel_register(struct client *c);
/* A key told to the client elsewhere (online restart): kept as it is. */
void cancel_register_key(struct client *c, uint32_t pid, uint32_t key);
void cancel_unregister(struct client *c);
struct client *cancel_find(uint32_t pid, uint32_t key);
/* A CancelRequest arrived (the caller closes its connection afterwards):
 * sent on if its target is running a query, here, on another worker or on
 * a [peers] instance. */
void cancel_handle_request(struct world *w, uint32_t pid, uint32_t key);
/* The server code's callback for a server whose cancels are all answered
 * while it waited for them (SERVER_BEING_CANCELED). */
void cancel_set_server_done(void (*fn)(struct server *sv));
/* Cancel the query of this worker's client with that key, if it runs one. */
void cancel_local(uint32_t pid, uint32_t key);
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

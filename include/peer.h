/* pgcrew — [peers]: several pgcrew hosts behind one load balancer. A cancel
 * key carries this host's peer_id; a CancelRequest that lands on another
 * host is passed on to the peer named in its key, as PgBouncer does. */
#ifndef PGCREW_PEER_H
#define PGCREW_PEER_H

#include "types.h"
#include "ipc.h"

struct peer_def;
struct world;

/* Send the CancelRequest on to that peer, key unchanged (which peer a key
 * names: proto/cancelkey.h). done(w, wt, ok) is called once the peer has
 * closed the connection (ok: it took the request; a PgBouncer 1.25 or
 * pgcrew peer closes it once its own server side is done) or the forward
 * failed; false, without a call, when it failed at once. */
typedef void (*peer_done_fn)(struct world *w, const struct cancel_waiter *wt, bool ok);
bool peer_forward_cancel(struct world *w, const struct peer_def *p, const struct cancelkey *k,
			 const struct cancel_waiter *wt, peer_done_fn done) MUSTCHECK;
/* SHOW PEER_POOLS: cancels being passed to a peer (connecting / sent). */
void peer_counts(int peer_id, int *connecting, int *active);
void peer_free_all(void);

#endif

/* pgcrew — [peers]: several pgcrew hosts behind one load balancer. A cancel
 * key carries this host's peer_id; a CancelRequest that lands on another
 * host is passed on to the peer named in its key, as PgBouncer does. */
#ifndef PGCREW_PEER_H
#define PGCREW_PEER_H

#include "types.h"

struct peer_def;

/* Send the CancelRequest on to that peer, key unchanged, without waiting
 * for it. (Which peer a key names: proto/cancelkey.h.) */
void peer_forward_cancel(const struct peer_def *p, const struct cancelkey *k);
/* SHOW PEER_POOLS: cancels being passed to a peer (connecting / sent). */
void peer_counts(int peer_id, int *connecting, int *active);
void peer_free_all(void);

#endif

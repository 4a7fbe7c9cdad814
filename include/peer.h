/* pgcrew — [peers]: several pgcrew hosts behind one load balancer. A cancel
 * key carries this host's peer_id; a CancelRequest that lands on another
 * host is passed on to the peer named in its key, as PgBouncer does. */
#ifndef PGCREW_PEER_H
#define PGCREW_PEER_H

#include "types.h"

struct peer_def;

#define PEER_KEY_SHIFT 18          /* peer_id in the top 14 bits of the key */

/* The peer a cancel key belongs to (0: none/this host's). */
int peer_of_key(uint32_t key);
/* Send the CancelRequest on to that peer, without waiting for it. */
void peer_forward_cancel(const struct peer_def *p, uint32_t pid, uint32_t key);
/* SHOW PEER_POOLS: cancels being passed to a peer (connecting / sent). */
void peer_counts(int peer_id, int *connecting, int *active);
void peer_free_all(void);

#endif

/* pgcrew — the cancel keys pgcrew gives its clients: their length for each
 * protocol version, their layout (which worker, which [peers] host, how many
 * random bits), reading a CancelRequest's key back into a route, and the
 * constant-time check that a key is a client's. Written here and nowhere
 * else; the wire shape (struct cancelkey) is in types.h.
 *
 * Every key's pid: bits 0-23 random, 24-30 the worker, 31 zero.
 *
 * Protocol 3.0 and 3.1 (4-byte secret, as PgBouncer's):
 *	secret	32 random bits; with [peers], the top 14 are the peer_id
 *
 * Protocol 3.2 (CANCELKEY_LONG = 32 bytes, the length PostgreSQL 18 sends;
 * 224 of the 256 bytes allowed stay free for a layer in front of pgcrew):
 *	byte 0		CANCELKEY_TAG: this layout
 *	byte 1		the worker (0-127)
 *	bytes 2-3	the peer_id, big-endian (0: no [peers])
 *	bytes 4-31	224 random bits
 */
#ifndef PGCREW_PROTO_CANCELKEY_H
#define PGCREW_PROTO_CANCELKEY_H

#include "types.h"

struct pktbuf;
struct pkt_reader;

#define CANCELKEY_SHORT 4          /* secret bytes for a 3.0/3.1 client */
#define CANCELKEY_LONG 32          /* secret bytes for a 3.2 client */
#define CANCELKEY_TAG 0xc1         /* first byte of a long key: layout 1 */
#define CANCELKEY_RANDOM 31        /* CSPRNG bytes cancelkey_make takes */
#define CANCELKEY_WORKERS 128      /* 7 bits of worker */
#define CANCELKEY_PEERS 16384      /* 14 bits of peer_id */
/* A CancelRequest: length word, request code, pid, then the secret. */
#define CANCELKEY_REQUEST_HDR 12
#define CANCELKEY_REQUEST_MAX (CANCELKEY_REQUEST_HDR + CANCELKEY_MAX)

/* A key pgcrew made for one of its clients. Every client holds one, so it
 * is kept to the longest pgcrew makes. */
struct cancelkey_own {
	uint32_t pid;
	uint8_t len;                     /* 0 (none yet), CANCELKEY_SHORT or _LONG */
	uint8_t secret[CANCELKEY_LONG];
};

/* The key of a client of `worker` that logged in with protocol 3.<minor>;
 * peer is [peers]' peer_id (0: none). rnd: CANCELKEY_RANDOM bytes of the
 * CSPRNG (the short key uses 7 of them). */
void cancelkey_make(struct cancelkey_own *k, int minor, int worker, int peer,
		    const uint8_t rnd[CANCELKEY_RANDOM]);

/* Where a CancelRequest's key leads: the worker, and the peer_id the key
 * names (a short key's top 14 bits, meaningful only where peer_id is set).
 * False for a key no pgcrew made (another length, another tag): it cancels
 * nothing and goes nowhere. */
bool cancelkey_route(const struct cancelkey *k, int *worker, int *peer) MUSTCHECK;

/* k is exactly the client's key: same pid, same length, same secret, the
 * secret compared in constant time (the pid is no secret: it picks the
 * candidates). */
bool cancelkey_matches(const struct cancelkey_own *own, const struct cancelkey *k) MUSTCHECK;

/* Fill k; false when len is outside CANCELKEY_MIN..CANCELKEY_MAX, or is not
 * 4 in a BackendKeyData of protocol 3.0/3.1 (minor < 2; pass
 * PROTO_MINOR_LATEST where any length is allowed, as in a CancelRequest). */
bool cancelkey_set(struct cancelkey *k, int minor, uint32_t pid, const uint8_t *secret,
		   size_t len) MUSTCHECK;
void cancelkey_from_own(struct cancelkey *k, const struct cancelkey_own *own);
/* False when k has a length pgcrew never gives a client. */
bool cancelkey_to_own(struct cancelkey_own *own, const struct cancelkey *k) MUSTCHECK;

/* In hand-over records: pid, length (16 bits), secret; length 0: no key. */
void cancelkey_put(struct pktbuf *pb, const struct cancelkey *k);
bool cancelkey_get(struct pkt_reader *r, struct cancelkey *k) MUSTCHECK;

#endif

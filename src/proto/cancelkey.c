/* pgcrew — the layout of pgcrew's cancel keys (see cancelkey.h for the
 * picture): making one, routing a CancelRequest by it, checking it.
 *
 * INTERFACE ROUTINES
 *	cancelkey_make		- a client's key for its protocol version
 *	cancelkey_route		- the worker and peer a CancelRequest's key names
 *	cancelkey_matches	- the key is the client's (constant time)
 *	cancelkey_set		- a key from the wire, its length checked
 *	cancelkey_from_own	- a client's key as a wire key
 *	cancelkey_to_own	- a wire key as a client's (pgcrew's lengths only)
 *	cancelkey_put		- into a hand-over record
 *	cancelkey_get		- out of one
 */
#include "proto/cancelkey.h"

#include <openssl/crypto.h>
#include <string.h>

#include "proto/build.h"
#include "proto/packet.h"

#define WORKER_SHIFT 24
#define PEER_SHIFT 18              /* short key: peer_id in the top 14 bits */
#define LONG_HEADER 4              /* tag, worker, peer (2 bytes) */
#define LONG_MINOR 2               /* keys are long from protocol 3.2 on */

_Static_assert(CANCELKEY_RANDOM == 3 + CANCELKEY_LONG - LONG_HEADER, "random bytes of a long key");
_Static_assert(CANCELKEY_LONG - LONG_HEADER >= 16, "at least 128 random bits");
_Static_assert(CANCELKEY_LONG <= CANCELKEY_MAX / 2, "room for a layer in front");

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

void cancelkey_make(struct cancelkey_own *k, int minor, int worker, int peer,
		    const uint8_t rnd[CANCELKEY_RANDOM])
{
	uint32_t w = (uint32_t)worker & (CANCELKEY_WORKERS - 1);
	uint32_t p = (uint32_t)peer & (CANCELKEY_PEERS - 1);

	memset(k, 0, sizeof(*k));
	k->pid = ((uint32_t)rnd[0] << 16 | (uint32_t)rnd[1] << 8 | rnd[2]) | w << WORKER_SHIFT;
	rnd += 3;
	if (minor < LONG_MINOR) {
		uint32_t s = be32(rnd);
		if (p)
			s = (s & ((1u << PEER_SHIFT) - 1)) | p << PEER_SHIFT;
		k->len = CANCELKEY_SHORT;
		put_be32(k->secret, s);
		return;
	}
	k->len = CANCELKEY_LONG;
	k->secret[0] = CANCELKEY_TAG;
	k->secret[1] = (uint8_t)w;
	k->secret[2] = (uint8_t)(p >> 8);
	k->secret[3] = (uint8_t)p;
	memcpy(k->secret + LONG_HEADER, rnd, CANCELKEY_LONG - LONG_HEADER);
}

bool cancelkey_route(const struct cancelkey *k, int *worker, int *peer)
{
	if (k->len == CANCELKEY_SHORT) {
		*worker = (int)(k->pid >> WORKER_SHIFT & (CANCELKEY_WORKERS - 1));
		*peer = (int)(be32(k->secret) >> PEER_SHIFT);
		return true;
	}
	if (k->len != CANCELKEY_LONG || k->secret[0] != CANCELKEY_TAG || k->secret[1] >= CANCELKEY_WORKERS)
		return false;
	*worker = k->secret[1];
	*peer = (int)((uint32_t)k->secret[2] << 8 | k->secret[3]);
	return *peer < CANCELKEY_PEERS;
}

bool cancelkey_matches(const struct cancelkey_own *own, const struct cancelkey *k)
{
	if (own->len == 0 || own->pid != k->pid || own->len != k->len)
		return false;
	return CRYPTO_memcmp(own->secret, k->secret, own->len) == 0;
}

bool cancelkey_set(struct cancelkey *k, int minor, uint32_t pid, const uint8_t *secret, size_t len)
{
	if (len < CANCELKEY_MIN || len > CANCELKEY_MAX || (minor < LONG_MINOR && len != CANCELKEY_SHORT))
		return false;
	k->pid = pid;
	k->len = (uint16_t)len;
	memcpy(k->secret, secret, len);
	return true;
}

void cancelkey_from_own(struct cancelkey *k, const struct cancelkey_own *own)
{
	k->pid = own->pid;
	k->len = own->len;
	memcpy(k->secret, own->secret, own->len);
}

bool cancelkey_to_own(struct cancelkey_own *own, const struct cancelkey *k)
{
	if (k->len != 0 && k->len != CANCELKEY_SHORT && k->len != CANCELKEY_LONG)
		return false;
	memset(own, 0, sizeof(*own));
	own->pid = k->pid;
	own->len = (uint8_t)k->len;
	memcpy(own->secret, k->secret, k->len);
	return true;
}

void cancelkey_put(struct pktbuf *pb, const struct cancelkey *k)
{
	pktbuf_put_u32(pb, k->pid);
	pktbuf_put_u16(pb, k->len);
	pktbuf_put_bytes(pb, k->secret, k->len);
}

bool cancelkey_get(struct pkt_reader *r, struct cancelkey *k)
{
	k->pid = pkt_get_u32(r);
	k->len = pkt_get_u16(r);
	if (r->failed || (k->len != 0 && (k->len < CANCELKEY_MIN || k->len > CANCELKEY_MAX)))
		return false;
	const uint8_t *p = pkt_get_bytes(r, k->len);
	if (r->failed)
		return false;
	if (k->len)
		memcpy(k->secret, p, k->len);
	return true;
}

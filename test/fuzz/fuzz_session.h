/* pgcrew — the parts of the session-core fuzz target (fuzz_session*.c):
 * the input cursor, a tolerant reader of what the pooler sends, and the
 * three casts around one world of the unit rig (test/unit/rig.h): fake
 * clients, fake PostgreSQL servers, and a fake supervisor with the real
 * ledger. Everything is bounded so that one input runs in milliseconds. */
#ifndef PGCREW_FUZZ_SESSION_H
#define PGCREW_FUZZ_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fuzz.h"
#include "proto/build.h"
#include "types.h"

/* ---- what a fake peer reads from the pooler ---- */

#define READER_BUF 8192

/* Messages as they come; one larger than the buffer is dropped whole. */
struct reader {
	size_t len;                /* bytes buffered */
	size_t skip;               /* bytes of a dropped message still to come */
	int answers;               /* one-byte answers (SSLRequest: 'N') expected first */
	bool typed;                /* false until the first (startup) message is read */
	uint8_t buf[READER_BUF];
};

/* Called for each whole message: type 0 is an untyped startup packet (its
 * body after the length word), ' ' a one-byte answer ('N' in body[0]). */
typedef void (*msg_fn)(void *arg, char type, const uint8_t *body, size_t len);
/* Reads what fd has (never blocks) and hands over every whole message.
 * Returns the bytes read, or -1 at EOF or on an error: the caller closes
 * its end. */
ssize_t reader_drain(struct reader *r, int fd, msg_fn fn, void *arg);

/* Builds into fixed storage and sends what was built (never blocks: what
 * does not fit the socket is dropped, as from a peer that gave up). */
struct out {
	struct pktbuf pb;
	uint8_t storage[4096];
};

void out_init(struct out *o);
/* A framed message (read whatever the sender's state): a type byte (below
 * 2 * strlen(types): one of types, the others as they are), a length
 * byte, that many body bytes. Initialises o. */
void out_message(struct out *o, struct input *in, const char *types);
void out_send(struct out *o, int fd);
void send_bytes(int fd, const void *b, size_t n);
uint32_t get32(const uint8_t *b);

/* ---- the userlist and who knows which password ---- */

/* The password a client of that name types (the right one for the users
 * of the userlist; unknown users' made up). */
const char *fz_password(const char *user);
/* The userlist the worlds are built with (userlist.txt's text). */
extern const char *const fz_userlist;

/* ---- fake clients (fuzz_session_client.c) ---- */

#define FZ_CLIENTS 4

enum client_op {
	CO_STEP,              /* what a real client does next */
	CO_STARTUP,           /* a startup packet from the input's choices */
	CO_SSL,               /* SSLRequest */
	CO_GSSENC,            /* GSSENCRequest */
	CO_CANCEL,            /* CancelRequest on a connection of its own */
	CO_AUTH_GOOD,         /* the right answer to the last authentication request */
	CO_AUTH_BAD,          /* a wrong one */
	CO_QUERY,             /* a simple query */
	CO_EXTENDED,          /* Parse/Bind/Describe/Execute/Sync/Close/Flush */
	CO_MESSAGE,           /* one framed message, any type, body from the input */
	CO_BYTES,             /* raw bytes */
	CO_TERMINATE,         /* 'X' */
	CO_HANGUP,            /* close the socket */
	CO_COUNT
};

void fz_clients_reset(void);
void fz_client_op(enum client_op op, int slot, struct input *in);
/* Reads what came; returns how many fakes heard something. */
int fz_clients_drain(void);
void fz_clients_close(void);
/* A BackendKeyData the pooler gave a fake client, for CancelRequests. */
bool fz_client_key(int slot, struct cancelkey *k);

/* ---- fake PostgreSQL servers (fuzz_session_server.c) ---- */

#define FZ_SERVERS 6

enum server_op {
	SO_STEP,              /* answer what came, as the input chooses */
	SO_MESSAGE,           /* one framed message, any type */
	SO_HANGUP,
	SO_COUNT
};

void fz_servers_reset(void);
void fz_server_op(enum server_op op, int slot, struct input *in);
/* Takes new connections, reads what came on every one; returns how many
 * heard something (or came, or went). */
int fz_servers_drain(void);
void fz_servers_close(void);
/* A backend another worker logged in: fd is ours, its other end moves to
 * the pooler. False (fd untouched) when every slot is taken. */
bool fz_server_adopt(int fd);

/* ---- the fake supervisor (fuzz_session_sup.c) ---- */

/* Worker 0 of 2 (the other one a phantom the ledger knows of); hold: its
 * answers wait for a SUP op instead of going at once. */
void fz_sup_start(bool hold);
void fz_sup_op(struct input *in);
void fz_sup_stop(void);

#endif

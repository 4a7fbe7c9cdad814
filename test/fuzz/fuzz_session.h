/* pgcrew — the parts of the session-core fuzz target (fuzz_session*.c):
 * a tolerant reader of what the pooler sends, an output queue that sends
 * in order, in pieces and through TLS, and the three casts around one
 * world of the unit rig (test/unit/rig.h): fake clients (TLS and console
 * ones too), fake PostgreSQL servers, and a fake supervisor with the real
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

/* ---- filler: large messages whose every byte a fake can check ---- */

/* The body of a large message the fakes make (a server's CopyData, a
 * client's Bind parameter): FILL_MAGIC, then FILL bytes only. A fake
 * client checks every byte of a message whose body starts so: anything
 * else inside it is a pooler message written into the middle of a
 * relayed one (issue 40, rule 3 of doc/architecture.md's "Message
 * boundaries"), and the target aborts. */
#define FILL_MAGIC "FZFILLER"
#define FILL_MAGIC_LEN 8
#define FILL 0xF1
/* Filler of n bytes (magic first when it fits) after what b holds. */
void fill_add(struct bytes *b, size_t n);

/* ---- what a fake peer reads from the pooler ---- */

#define READER_BUF 8192

/* Messages as they come; one larger than the buffer is dropped whole. */
struct reader {
	size_t len;                /* bytes buffered */
	size_t skip;               /* bytes of a dropped message still to come */
	size_t skipped;            /* and already gone */
	int answers;               /* one-byte answers (SSLRequest: 'N') expected first */
	bool typed;                /* false until the first (startup) message is read */
	bool check_fill;           /* a client's: filler messages must be filler throughout */
	bool skip_fill;            /* the message being dropped is a filler one */
	uint8_t buf[READER_BUF];
};

/* Called for each whole message: type 0 is an untyped startup packet (its
 * body after the length word), ' ' a one-byte answer ('N' in body[0]). */
typedef void (*msg_fn)(void *arg, char type, const uint8_t *body, size_t len);
/* Reads what fd has (never blocks) and hands over every whole message.
 * Returns the bytes read, or -1 at EOF or on an error: the caller closes
 * its end. */
ssize_t reader_drain(struct reader *r, int fd, msg_fn fn, void *arg);
/* The same for bytes from elsewhere (what TLS decrypted). */
void reader_feed(struct reader *r, const uint8_t *b, size_t n, msg_fn fn, void *arg);
/* Part of a message has come, not all of it. */
bool reader_mid_message(const struct reader *r);

/* ---- what a fake peer sends: in order, held back in pieces, plain or TLS ---- */

struct fz_tls;

/* Everything a fake sends goes through its queue, so bytes leave in the
 * order they were decided on: a large message held back and sent piece
 * by piece (every split point reachable) keeps what was decided after it
 * behind it; bytes the socket does not take now wait for the next try. */
struct outq {
	struct bytes held;         /* decided, not yet handed on: outq_piece sends them */
	struct bytes wire;         /* handed on (encrypted once TLS is up), not yet taken */
	struct fz_tls *tls;        /* set when TLS is up (not owned) */
};

/* After anything held: to the socket (through TLS when up). */
void outq_send(struct outq *q, int fd, const void *b, size_t n);
/* Held back until outq_piece hands it on. */
void outq_hold(struct outq *q, const void *b, size_t n);
/* The first n held bytes go on. */
void outq_piece(struct outq *q, int fd, size_t n);
/* Bytes for the socket as they are (a TLS handshake's, garbage). */
void outq_raw(struct outq *q, int fd, const void *b, size_t n);
/* What waits for the socket, as much as it takes now. */
void outq_flush(struct outq *q, int fd);
void outq_free(struct outq *q);
/* A piece's size from the input: one byte says which kind (up to 64
 * bytes, to 16 kB byte by byte, in 4 kB steps, everything), one more is
 * always read. */
size_t piece_len(struct input *in);

/* Builds into fixed storage. */
struct out {
	struct pktbuf pb;
	uint8_t storage[4096];
};

void out_init(struct out *o);
/* A framed message (read whatever the sender's state): a type byte (below
 * 2 * strlen(types): one of types, the others as they are), a length
 * byte, that many body bytes (never filler's magic). Initialises o. */
void out_message(struct out *o, struct input *in, const char *types);
/* What was built goes to q (out_send: straight to a socket without a
 * queue, what does not fit dropped). */
void out_queue(struct out *o, struct outq *q, int fd);
void out_send(struct out *o, int fd);
void send_bytes(int fd, const void *b, size_t n);
uint32_t get32(const uint8_t *b);

/* ---- TLS (fuzz_session_tls.c) ---- */

/* The pooler's client-facing context (a throwaway key and certificate in
 * dir, or TMPDIR when NULL; made once per process) and the settings lines
 * naming its files; NULL when OpenSSL could not make them. */
struct tls_ctx *fz_tls_server(const char *dir, char *settings, size_t len);
/* A fake client's OpenSSL client end, on memory BIOs. */
struct fz_tls *fz_tls_new(void);
void fz_tls_free(struct fz_tls *t);
/* One handshake step: TLS_OK (done), TLS_WANT_READ or TLS_FAIL (tls.h). */
int fz_tls_handshake(struct fz_tls *t);
bool fz_tls_up(const struct fz_tls *t);
/* Bytes from the socket in; plaintext out (> 0, 0: nothing now, -1: over). */
void fz_tls_feed(struct fz_tls *t, const void *b, size_t n);
ssize_t fz_tls_read(struct fz_tls *t, void *buf, size_t len);
bool fz_tls_write(struct fz_tls *t, const void *b, size_t n);
/* What OpenSSL wrote for the socket, appended to out. */
void fz_tls_take(struct fz_tls *t, struct bytes *out);

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
	CO_TLS,               /* SSLRequest over TCP, then the handshake, a step at a time */
	CO_BIG,               /* a named Parse and a large Bind/Execute/Describe, held back */
	CO_PIECE,             /* a piece of what is held back goes */
	CO_CONSOLE,           /* the admin console: login, then a command */
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
	SO_BIG,               /* a large filler message (CopyData, DataRow), held back */
	SO_PIECE,             /* a piece of what is held back goes */
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
/* A server the pooler keeps idle is at a message boundary of both
 * directions (issue 40, rule 2): its fake PostgreSQL, if it kept to the
 * protocol, has read no part of a message and owes no answer. False with
 * why when one does. */
bool fz_servers_at_boundary(char *why, size_t len);

/* ---- the fake supervisor (fuzz_session_sup.c) ---- */

/* Worker 0 of 2 (the other one a phantom the ledger knows of); hold: its
 * answers wait for a SUP op instead of going at once. */
void fz_sup_start(bool hold);
void fz_sup_op(struct input *in);
void fz_sup_stop(void);

#endif

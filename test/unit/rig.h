/* pgcrew — a test rig for the session core: a world built without a
 * worker (its own event base, config from an ini text, one shm slot), a
 * fake PostgreSQL listening on a Unix socket that the test answers by hand,
 * clients on socketpairs, and the tests' fake clock (fakeclock.h), which
 * stands still until the test moves it. The test plays both ends; rig_*
 * pump the loop. Used by the cmocka session tests and by
 * test/fuzz/fuzz_session.c: a broken expectation goes to rig_failed(),
 * which the program defines. */
#ifndef PGCREW_TEST_RIG_H
#define PGCREW_TEST_RIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objects.h"
#include "types.h"

/* One end the test holds: a fake server's or a fake client's socket. */
struct peer {
	int fd;
	int pooler_fd;            /* a client's: the pooler's end */
	size_t len;
	uint8_t buf[16384];
};

/* One protocol message read from a peer (type 0: a startup packet). */
struct msg {
	char type;
	uint32_t len;           /* of body */
	uint8_t body[8192];
};

/* The world under test (NULL between tests). */
extern struct world *rig_w;

/* Defined by the program using the rig: a rig_* call found what it
 * expected broken (msg says what). Must not return: rig_cmocka.c fails the
 * cmocka test, the fuzz target aborts. */
NORETURN void rig_failed(const char *msg);

/* A world to build: rig_start_with. */
struct rig_setup {
	int workers;              /* 1; n: worker 0 of n, the rig its supervisor */
	const char *settings;     /* lines for [pgbouncer] */
	const char *databases;    /* lines for [databases]; "@PG@": the fake server */
	const char *userlist;     /* auth_file's text; NULL: alice/secret, bob/hunter2 */
	const char *hba;          /* auth_hba_file's text, loaded as worker.c does; NULL: none */
	const char *tmp;          /* where the world's directory goes; NULL: /tmp */
	struct tls_ctx *client_tls; /* the world's client TLS (the caller's, kept past
				       rig_stop); NULL: none, as the rig's default */
	bool console;             /* the admin console, as worker.c registers it; the
				     rig as supervisor runs its fan-outs (rig_sup_console) */
};
void rig_start_with(const struct rig_setup *s);
/* RELOAD as a worker applies it (worker_apply_config): the files
 * rewritten, the new generation in force, no-reload settings kept, HBA
 * reloaded, databases, users and pools marked and swept. s->workers and
 * s->tmp are the world's own. */
void rig_reload(const struct rig_setup *s);

/* Build the world from `settings` (lines for [pgbouncer]) and `databases`
 * (lines for [databases]; "@PG@" stands for the fake server's host and
 * port). The fake server listens from here on. */
void rig_start(const char *settings, const char *databases);
/* The same as worker 0 of n: shm has n slots, and W->sup is a channel
 * whose other end the rig holds as the supervisor (rig_sup_*). */
void rig_start_workers(int n, const char *settings, const char *databases);
/* Close everything and free the world (leak-checked by ASan). As a
 * cmocka teardown, also after a failed test: rig_teardown. */
void rig_stop(void);
int rig_teardown(void **state);
/* Run the loop until nothing is ready (and the reaper has run). */
void rig_pump(void);
/* The invariants of the session core (rig_check.c): each client and server
 * on the list of its state, counters equal to lists, links both ways,
 * database/user/max_client_conn counts equal to what holds them. False
 * with the first broken one in why. rig_stop checks them once all is
 * closed (every count is then zero). */
bool rig_consistent(char *why, size_t len);

/* Fake PostgreSQL: take the next connection the pooler makes (pumping
 * until it comes; fails the test after 10 s); log it in as a server with
 * backend pid/key. */
void rig_pg_accept(struct peer *p);
bool rig_pg_pending(void);          /* a connection waits to be taken */
bool rig_pg_try_accept(struct peer *p);   /* take one if it waits; no pumping */
void rig_pg_login(struct peer *p, uint32_t pid, uint32_t key);
/* The same as a server of protocol 3.<minor> (answering the pooler's 3.2
 * with NegotiateProtocolVersion when minor is less) with key k. */
void rig_pg_login_key(struct peer *p, int minor, const struct cancelkey *k);

/* A client on a socketpair: accepted by the pooler, startup sent. Raw:
 * accepted only; then its startup packet. */
void rig_client(struct peer *p, const char *user, const char *db);
void rig_client_raw(struct peer *p);
/* The same over TCP on 127.0.0.1 (the pooler's is_unix false). */
void rig_client_tcp(struct peer *p);
void rig_send_startup(struct peer *p, const char *user, const char *db);
/* With more parameters: name, value, ..., NULL. */
void rig_send_startup_with(struct peer *p, const char *user, const char *db,
			   const char *const *extra);
/* ... asking for protocol 3.<minor>. */
void rig_send_startup_v(struct peer *p, int minor, const char *user, const char *db,
			const char *const *extra);
/* Read its welcome up to ReadyForQuery; returns the BackendKeyData. */
void rig_client_welcome(struct peer *p, uint32_t *pid, uint32_t *key);
/* The same, with the whole key (any length). */
void rig_client_welcome_key(struct peer *p, struct cancelkey *k);
struct client *rig_client_of(const struct peer *p);   /* the pooler's object */
/* alice logs in to db: welcomed at once (rig_login), or as the pool's
 * first login, whose server pg the test accepts and logs in with backend
 * pid and key pid + 1 (rig_login_first). */
void rig_login(struct peer *c);
void rig_login_first(struct peer *c, struct peer *pg, uint32_t pid);
/* c's query reaches pg, which answers CommandComplete and ReadyForQuery
 * with status; c reads both. */
void rig_round_trip(struct peer *c, struct peer *pg, const char *sql, char status);

/* Send one message (type 0: untyped, body as given). */
void rig_send(struct peer *p, char type, const void *body, size_t len);
void rig_send_query(struct peer *p, const char *sql);
/* A server's answer to a simple query: CommandComplete + ReadyForQuery. */
void rig_send_done(struct peer *p, const char *tag, char status);
/* The next message, pumping until it is whole; fails after 10 s. */
void rig_read(struct peer *p, struct msg *m);
void rig_expect(struct peer *p, char type, struct msg *m);
/* The startup packet a fake server receives. */
void rig_read_startup(struct peer *p, struct msg *m);
/* Nothing arrives within a few loop rounds. */
void rig_expect_nothing(struct peer *p);
/* The other side closed: any messages before it are skipped, except an
 * ErrorResponse, whose message text is copied to err (when given). */
void rig_expect_eof(struct peer *p, char *err, size_t errlen);
void rig_close(struct peer *p);
/* A field of an ErrorResponse/NoticeResponse ('M', 'C', ...), or "". */
const char *rig_field(const struct msg *m, char code);

/* Messages the worker sent the supervisor: how many of type t, and the
 * newest one's reqid (when asked) and payload (copied, up to len bytes;
 * its length returned). A socket it carried is kept open for the test
 * (rig_sup_last_fd) and closed by rig_stop. */
int rig_sup_count(int type);
size_t rig_sup_last(int type, uint32_t *reqid, void *payload, size_t len);
int rig_sup_last_fd(int type);
/* The newest message of type t's place in the order the worker sent
 * them (0 first), -1 for none. */
int rig_sup_last_at(int type);
/* The supervisor tells the worker something. */
void rig_sup_send(int type, uint32_t reqid, const void *payload, size_t len);
/* The same with a socket (or -1), without pumping; false if it failed. */
bool rig_sup_post(int type, uint32_t reqid, const void *payload, size_t len, int fd);
/* Play the supervisor: each message the worker sends goes to fn (which
 * owns fd) instead of the log above; NULL logs again. rig_stop resets it. */
typedef void (*rig_sup_fn)(int type, uint32_t reqid, const void *payload, size_t len, int fd);
void rig_sup_handler(rig_sup_fn fn);
/* A world with the console: the supervisor's part of a console command
 * for every worker (IPC_ADMIN_REQ, then the worker's IPC_ADMIN_PART and
 * IPC_ADMIN_DONE), as the supervisor's fan-out does it; true when the
 * message was one of those. Worker 0 runs the command; any other worker
 * counts as having answered with no rows and no error. A RELOAD is
 * answered at once without reloading (rig_reload is the test's). Called
 * for the messages the rig logs; a handler (rig_sup_handler) calls it
 * itself. */
bool rig_sup_console(int type, uint32_t reqid, const void *payload, size_t len);

/* Big-endian 32-bit integers, as the protocol has them. */
uint32_t rig_be32(const uint8_t *b);
void rig_put32(uint8_t *b, uint32_t v);

/* The only pool of database db (asserted to exist). */
struct pool *rig_pool(const char *db, const char *user);

#endif

/* pgcrew — prepared statements (max_prepared_statements, and SQL ones with
 * sql_prepared_statements): the worker's shared statements, each client's
 * name -> statement map, each server's LRU of statements prepared on it, and
 * the rename/inject decisions for Parse/Bind/Describe/Close, SQL PREPARE/
 * EXECUTE/DEALLOCATE and their replies. No sockets here: the relay glue
 * (psrelay.c) applies the decisions to the streams. */
#ifndef PGCREW_PREPARED_H
#define PGCREW_PREPARED_H

#include "types.h"
#include "proto/build.h"

#define PS_NAME_PREFIX "PGCREW_"
/* A rewritten head (type, length, portal and names) up to this long is
 * built in the rewrite itself; a longer one (a portal name of any length)
 * in a buffer this module keeps for it. Bind's names are looked for in
 * the first bytes buffered up to this long, then in the whole message. */
#define PS_HEAD_MAX 600
/* How much longer than the client's a rewritten message may get: a server
 * name (PGCREW_ + 20 digits) for a one-byte client name, or a barrier. */
#define PS_MAX_GROW 32

struct ps_client;   /* per client: its statement names */
struct ps_server;   /* per server: statements prepared there, replies owed */

struct ps_counters {
	uint64_t client_parse;    /* named Parse from clients */
	uint64_t server_parse;    /* Parse sent to servers with our names */
	uint64_t bind;            /* Bind of a named statement */
};

enum ps_verdict {
	PS_PASS,        /* forward the message as it is */
	PS_REWRITE,     /* send `inject` first, then the message with its first
	                   old_len bytes replaced by head[0, head_len) */
	PS_REPLACE,     /* send `inject` instead of the message (skip it) */
	PS_FLUSH,       /* would inject or grow: flush queued bytes, then call again */
	PS_NEED_MORE,   /* the names are not buffered yet */
	PS_NEED_FULL,   /* the whole message is needed */
	PS_BAD,         /* malformed message: close the client (why) */
};

struct ps_rewrite {
	uint32_t old_len;
	uint32_t head_len;
	const char *why;          /* PS_BAD */
	uint8_t *head;            /* PS_REWRITE: `small`, or the module's buffer */
	uint8_t small[PS_HEAD_MAX];
};

/* The buffer for long heads, at the worker's end. */
void ps_rewrite_free_all(void);

/* What a client sends toward its server (P, B, D, C; Q forgets the
 * unnamed statement, and with cfg->sql one SQL PREPARE, EXECUTE or
 * DEALLOCATE is mapped like a protocol-level statement). msg points at the message (type
 * byte first), avail bytes of its len are buffered. syncs_owed: Sync/Query
 * already sent to this server whose ReadyForQuery has not come back.
 * can_inject: nothing of earlier messages is still queued toward the
 * server; can_grow: the stream can make the message PS_MAX_GROW longer in
 * place. State changes only with PS_PASS, PS_REWRITE and PS_REPLACE, so a
 * call that asks for more bytes or a flush can simply be repeated. *pc and
 * *psv are created on first use. */
struct ps_config {
	int max_stmts;            /* max_prepared_statements */
	bool unnamed_cache;       /* unnamed_statement_cache (PgDoorman's) */
	bool sql;                 /* sql_prepared_statements, outside session mode */
};

enum ps_verdict ps_client_msg(struct ps_client **pc, struct ps_server **psv,
			      const struct ps_config *cfg, uint32_t syncs_owed,
			      const uint8_t *msg, size_t avail, uint32_t len,
			      bool can_inject, bool can_grow, struct pktbuf *inject,
			      struct ps_rewrite *rw, struct ps_counters *cnt);

enum ps_reply {
	PSR_FORWARD,    /* pass the reply to the client */
	PSR_SKIP,       /* drop it (answer to something the client did not send) */
	PSR_SKIP_SEND,  /* drop it and send `out` to the client instead */
	PSR_NEED_FULL,  /* ask again with the whole reply buffered */
	PSR_NEED_MORE,  /* ask again with more of it (an error: its first fields) */
};

/* Does this server reply need ps_server_msg? (cheap; both may be NULL) */
bool ps_server_watch(const struct ps_server *ps, const struct ps_client *pc, uint8_t type);
/* A reply from the server linked to the client owning pc (pc may be NULL).
 * ReadyForQuery ends a Sync's segment: what the server skipped there after an
 * error is rolled back (names, server statements). */
enum ps_reply ps_server_msg(struct ps_server *ps, struct ps_client *pc, const uint8_t *msg,
			    size_t avail, uint32_t len, struct pktbuf *out);

/* The server ran sql outside any client (server_reset_query): DISCARD ALL
 * and DEALLOCATE ALL empty its statements. */
void ps_server_reset_sql(struct ps_server *ps, const char *sql);
/* The linked client left: true when replies were still owed, so what the
 * server holds is uncertain and it should be closed rather than reused. */
bool ps_server_client_gone(struct ps_server *ps);

/* Several workers: a server moves between workers with its statements.
 * Each worker numbers its statements from its own base (worker slot and
 * generation in the top bits), so names made anywhere never collide on one
 * server. Movable: no reply is owed. Export writes the statements into pb;
 * import rebuilds them (in this worker's registry) from what export wrote,
 * false on a malformed record. */
void ps_set_num_base(uint64_t base);
bool ps_server_movable(const struct ps_server *ps);
void ps_server_export(const struct ps_server *ps, struct pktbuf *pb);
struct pkt_reader;
bool ps_server_import(struct ps_server **psp, struct pkt_reader *r);

/* A client moves to a new process (online restart) with its names: only
 * when no reply is owed for any of them. Same record rules as servers. */
bool ps_client_movable(const struct ps_client *pc);
void ps_client_export(const struct ps_client *pc, struct pktbuf *pb);
bool ps_client_import(struct ps_client **pcp, struct pkt_reader *r);
size_t ps_client_count(const struct ps_client *pc);
size_t ps_server_count(const struct ps_server *ps);
void ps_client_free(struct ps_client *pc);
void ps_server_free(struct ps_server *ps);
/* Statements known to the worker (shared by clients and servers). */
size_t ps_stmt_count(void);

#endif

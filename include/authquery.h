/* pgcrew — auth_query: a login whose user is not in auth_file has its secret
 * fetched by auth_query (Parse/Bind $1/Describe/Execute/Sync, as PgBouncer)
 * on a pooled server connection of auth_user in auth_dbname (or the client's
 * database). Answers are cached per worker for auth_query_cache_ttl, and
 * logins for the same user share one query in flight. */
#ifndef PGCREW_AUTHQUERY_H
#define PGCREW_AUTHQUERY_H

#include "stream.h"
#include "types.h"

struct client;
struct pool;
struct pktbuf;
struct server;

/* ---- worker glue ---- */

/* Whether this client's user is looked up by auth_query: not in auth_file,
 * and an auth_user applies to its database (per database, else global). */
bool authquery_applies(const struct client *c);
/* Look the user up: from the cache at once, else by joining or starting a
 * query. The client then continues with client_login_found(), or is closed
 * with PgBouncer's text ("no such user", "bouncer config error", ...). */
void authquery_start(struct client *c);

/* pool.c: a server of pool p became usable; true if an auth query took it. */
bool authquery_server_ready(struct server *sv);
/* Since when the oldest lookup waiting for a server of p waits; 0: none. */
usec_t authquery_waiting_since(const struct pool *p);
/* server.c: messages of a server running an auth query (SI_AUTH_QUERY). */
enum stream_action authquery_server_pkt(struct server *sv, const struct pkt_hdr *h,
					const uint8_t *data, size_t avail);
/* server.c: that server is closing. */
void authquery_server_closed(struct server *sv);
/* client.c: a client waiting for an answer is closing. */
void authquery_client_closed(struct client *c);
/* Server logins of p fail: queries waiting for a server give the clients
 * the same error as the pool's own waiters get. */
void authquery_pool_failed(struct pool *p, const char *sqlstate, const char *msg, bool cached);
/* RELOAD: the cached answers go (logged with their count). */
void authquery_reload(void);
void authquery_free_all(void);

/* ---- protocol pieces (unit-tested) ---- */

/* The batch sent to the server: reset_sql as a simple query first when not
 * NULL, then Parse(query)/Bind($1 = user)/Describe/Execute/Sync. False if
 * pb failed. Returns the number of ReadyForQuery the server will send. */
int authquery_build(struct pktbuf *pb, const char *reset_sql, const char *query, const char *user);
/* RowDescription: the column count, -1 if malformed. */
int authquery_parse_rowdesc(const uint8_t *body, size_t len);
/* DataRow of two text columns (user name, password). Returns 0 and fills
 * secret (null_secret for an SQL NULL password: the user exists but only
 * trust lets it in), 1 for a NULL user name (no such user), or -1 with
 * PgBouncer's reason in errbuf ("bad packet", "expected 2 columns from
 * auth_query, not N"). */
int authquery_parse_row(const uint8_t *body, size_t len, char *secret, size_t slen,
			bool *null_secret, char *errbuf, size_t errlen);

#endif

/* pgcrew — prepared statements in the relay: applies prepared.c's decisions
 * to a client's messages and its server's replies (rename in place, inject
 * ahead, drop or replace a reply), so client.c and server.c only call in. */
#ifndef PGCREW_PSRELAY_H
#define PGCREW_PSRELAY_H

#include "objects.h"

/* Does this client message need psrelay_client_pkt? (P, B, D, C when
 * max_prepared_statements is on or the client already has names; Q when
 * it has names, or sql_prepared_statements applies to its pool) */
bool psrelay_client_watch(const struct client *c, uint8_t type);
/* For a linked client: SA_FORWARD (maybe rewritten), SA_SKIP, or what the
 * stream should do first (SA_NEED_FULL, SA_NEED_MORE, SA_FLUSH), or SA_STOP
 * with *close_why: the caller closes the client, telling it why. */
enum stream_action psrelay_client_pkt(struct client *c, const struct pkt_hdr *h,
				      const uint8_t *data, size_t avail, const char **close_why);
bool psrelay_server_watch(const struct server *sv, uint8_t type);
/* A reply for the linked client: SA_FORWARD to go on as usual, or SA_SKIP,
 * SA_NEED_FULL, SA_NEED_MORE (an error: its first fields); SA_STOP with
 * *close_why when the client could not be written to: the caller closes it
 * without a word. */
enum stream_action psrelay_server_pkt(struct server *sv, const struct pkt_hdr *h,
				      const uint8_t *data, size_t avail, const char **close_why);
/* The client left sv: replies still owed make sv unfit for reuse. */
void psrelay_client_gone(struct server *sv);
/* The pooler runs sql on sv (server_reset_query). */
void psrelay_server_sql(struct server *sv, const char *sql);
/* Per worker: the scratch buffer's memory. */
void psrelay_free(void);

#endif

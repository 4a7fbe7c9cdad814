/* pgcrew — target_session_attrs over a database's host list: each host's
 * role as its servers report it (in_hot_standby, default_transaction_read_only),
 * whether a role serves the database, which host to try next, and the short
 * back-off of a host that did not match. Shared by the workers (shm.h). */
#ifndef PGCREW_HOSTROLE_H
#define PGCREW_HOSTROLE_H

#include "objects.h"

enum host_role {
	ROLE_UNKNOWN,
	ROLE_PRIMARY,          /* read-write */
	ROLE_READ_ONLY,        /* not in recovery, but default_transaction_read_only */
	ROLE_STANDBY,          /* in hot standby */
	ROLE_COUNT
};

/* PostgreSQL < 14 reports neither in_hot_standby nor
 * default_transaction_read_only: its role is asked after login, as libpq
 * asks (pg_is_in_recovery(), SHOW transaction_read_only), in one query. */
#define HOSTROLE_QUERY "SELECT pg_catalog.pg_is_in_recovery(), " \
	"pg_catalog.current_setting('transaction_read_only')"

/* A host that did not match is skipped this long (by every worker). */
#define HOSTROLE_SKIP_USEC (250 * 1000)

const char *host_role_name(enum host_role r);
enum tsa hostrole_tsa(const struct database *db);
/* The role a server's ParameterStatus gave; ROLE_UNKNOWN when it reported
 * neither (PostgreSQL < 14). */
enum host_role hostrole_of_server(const struct server *sv);
/* The DataRow answering HOSTROLE_QUERY (text format): in recovery and
 * read-only as 0/1. false, and both left alone, for anything else. */
bool hostrole_parse_row(const uint8_t *body, size_t len, int8_t *in_recovery, int8_t *read_only);
/* Does a server of role r serve db? prefer-standby takes another role only
 * while no host of the list may still be a standby. */
bool hostrole_serves(const struct database *db, int host, enum host_role r);
/* A server of host reported role r: remembered, and logged when it changed. */
void hostrole_note(struct database *db, int host, enum host_role r);
enum host_role hostrole_get(const struct database *db, int host);
/* host did not match: skip it for HOSTROLE_SKIP_USEC. */
void hostrole_skip(struct database *db, int host);
usec_t hostrole_skipped_until(const struct database *db, int host);
/* The host to open the next server on, from the list position start on:
 * the first not skipped whose known role may serve db; -1 when none may
 * now (every host skipped: wait). */
int hostrole_pick(struct database *db, int start);
/* A host name with n_addrs addresses (A/AAAA): the one to connect to,
 * passing over those that failed a moment ago: with target_session_attrs
 * the last that served (libpq tries a name's addresses in order too), with
 * `any` each in turn (PgBouncer's DNS round robin). 0 for one address. */
int hostrole_pick_addr(struct database *db, int host, int n_addrs);
/* Address addr of host failed (refused, reset, wrong role): skipped a
 * moment, the next one taken. True while another address of the name is
 * left to try; false when the host itself failed. */
bool hostrole_addr_failed(struct database *db, int host, int addr, int n_addrs);

#endif

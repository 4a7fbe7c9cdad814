/* pgcrew — the admin console: the "pgbouncer" (alias "pgcrew") database,
 * reached with psql, answering PgBouncer's SHOW and control commands. */
#ifndef PGCREW_ADMIN_H
#define PGCREW_ADMIN_H

#include "objects.h"
#include "proto/startup.h"

struct world;

/* The worker's start: client.c learns how console clients log in, are
 * welcomed, served and freed (client_set_console). */
void admin_register(void);
/* Startup for the console: checks admin_users/stats_users, authenticates. */
void admin_client_login(struct client *c, const struct startup_msg *m);
/* Authenticated: send the console's welcome. */
void admin_welcome(struct client *c);
enum stream_action admin_on_pkt(struct client *c, const struct pkt_hdr *h,
				const uint8_t *data, size_t avail);
/* Several workers: run a console command here for another worker's client;
 * and, for our own client, the other workers' answers. */
void admin_remote_run(struct world *w, uint32_t fanid, const char *text, size_t len);
void admin_fanout_part(struct world *w, uint32_t reqid, const uint8_t *data, size_t len);
void admin_fanout_done(struct world *w, uint32_t reqid, const char *err, size_t len);
/* The client goes away while it waits. */
void admin_fanout_free(struct client *c);
/* How a view's rows from several workers merge (rowmerge.h), NULL: they
 * are concatenated (or the view is unknown). */
const char *admin_view_rule(const char *view);

#endif

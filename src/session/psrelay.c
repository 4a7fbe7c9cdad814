/* pgcrew — prepared statements in the relay: a client's Parse/Bind/Describe/
 * Close go through prepared.c, whose verdict becomes a stream action; the
 * server's ParseComplete/CloseComplete/ErrorResponse/ReadyForQuery go back
 * through it. Untouched messages stay zero-copy; a rename is done in place
 * in the client's buffer. */
#include "psrelay.h"
#include "connlog.h"
#include "pool.h"
#include "config.h"
#include "world.h"

/* Injected messages and replacement replies are built here, one at a time;
 * the memory is kept, so the hot path does not allocate. */
static struct pktbuf scratch;

static struct pktbuf *scratch_buf(void)
{
	if (scratch.cap == 0)
		pktbuf_init(&scratch, 1024);
	pktbuf_reset(&scratch);
	return &scratch;
}

void psrelay_free(void)
{
	pktbuf_free(&scratch);
	memset(&scratch, 0, sizeof(scratch));
	ps_rewrite_free_all();
}

/* SQL PREPARE/EXECUTE are left to the server in session mode, where its
 * statements stay with the client. */
static bool sql_on(const struct client *c)
{
	return c->world->cfg->sql_prepared_statements && c->world->cfg->max_prepared_statements > 0 &&
	       pool_mode_of(c->pool) != POOL_SESSION;
}

/* Session pooling passes the client's statement names through, as
 * PgBouncer does: the server is the client's for the whole session, so SQL
 * EXECUTE / DEALLOCATE and pg_prepared_statements see the names the driver
 * chose. A client that already has renamed statements keeps its map. */
bool psrelay_client_watch(const struct client *c, uint8_t type)
{
	/* max_prepared_statements = 0 (the console's SET included) stops the
	 * rewriting on every connection at once, as in PgBouncer. */
	if (c->world->cfg->max_prepared_statements <= 0)
		return false;
	if (type == 'Q')
		return c->ps != NULL || sql_on(c);
	if (type != 'P' && type != 'B' && type != 'D' && type != 'C')
		return false;
	return c->ps != NULL || pool_mode_of(c->pool) != POOL_SESSION;
}

static bool send_scratch(struct stream *to, const struct pktbuf *pb)
{
	return pb->len == 0 || stream_write(to, pb);
}

enum stream_action psrelay_client_pkt(struct client *c, const struct pkt_hdr *h,
				      const uint8_t *data, size_t avail, const char **close_why)
{
	struct server *sv = c->link;
	struct ps_rewrite rw;
	struct pktbuf *inject = scratch_buf();
	bool can_inject = !stream_has_pending_forward(&c->s);
	bool can_grow = stream_head_room(&c->s) >= PS_MAX_GROW;

	struct ps_config cfg = {
		.max_stmts = c->world->cfg->max_prepared_statements,
		.unnamed_cache = c->world->cfg->unnamed_statement_cache && c->world->cfg->max_prepared_statements > 0,
		.sql = sql_on(c),
	};

	switch (ps_client_msg(&c->ps, &sv->ps, &cfg, (uint32_t)sv->expect_rfq, data, avail,
			      h->len, can_inject, can_grow, inject, &rw, &c->pool->stats.ps)) {
	case PS_PASS:
		return SA_FORWARD;
	case PS_NEED_MORE:
		return SA_NEED_MORE;
	case PS_NEED_FULL:
		return SA_NEED_FULL;      /* a named Parse may exceed the buffer */
	case PS_FLUSH:
		if (can_inject && can_grow)
			fatal("prepared: flush asked for with nothing to flush");
		return SA_FLUSH;
	case PS_BAD:
		*close_why = rw.why ? rw.why : "malformed message";
		return SA_STOP;
	case PS_REPLACE:
		if (pktbuf_failed(inject) || !send_scratch(&sv->s, inject))
			break;
		return SA_SKIP;
	case PS_REWRITE: {
		if (pktbuf_failed(inject) || !send_scratch(&sv->s, inject))
			break;
		uint8_t *at = stream_rewrite_head(&c->s, rw.old_len, rw.head_len);
		if (!at)
			fatal("prepared: no room to rewrite a message");
		memcpy(at, rw.head, rw.head_len);
		return SA_FORWARD;
	}
	}
	*close_why = "server conn crashed?";
	return SA_STOP;
}

bool psrelay_server_watch(const struct server *sv, uint8_t type)
{
	return (sv->ps || (sv->link && sv->link->ps)) &&
	       ps_server_watch(sv->ps, sv->link ? sv->link->ps : NULL, type);
}

enum stream_action psrelay_server_pkt(struct server *sv, const struct pkt_hdr *h,
				      const uint8_t *data, size_t avail, const char **close_why)
{
	struct client *c = sv->link;
	struct pktbuf *out = scratch_buf();

	switch (ps_server_msg(sv->ps, c ? c->ps : NULL, data, avail, h->len, out)) {
	case PSR_NEED_FULL:
		return SA_NEED_FULL;
	case PSR_NEED_MORE:
		return SA_NEED_MORE;
	case PSR_SKIP:
		return SA_SKIP;
	case PSR_SKIP_SEND:
		/* Written while our earlier forwards may still be queued: the
		 * stream sends it after them (hold), and before what follows,
		 * because skipping this reply flushes them first. */
		if (c && (pktbuf_failed(out) || !stream_write(&c->s, out))) {
			*close_why = "send failed";
			return SA_STOP;
		}
		return SA_SKIP;
	default:
		return SA_FORWARD;
	}
}

void psrelay_client_gone(struct server *sv)
{
	if (ps_server_client_gone(sv->ps)) {
		sv->close_needed = true;
		sv->close_reason = "client left with prepared statement replies owed";
	}
}

void psrelay_server_sql(struct server *sv, const char *sql)
{
	ps_server_reset_sql(sv->ps, sql);
}

/* pgcrew — the client-server link (link.h). One place writes both sides,
 * so "c->link == sv exactly when sv->link == c" holds everywhere else; a
 * broken invariant is a bug, and stops the worker rather than letting two
 * clients share one backend. */
#include "link.h"
#include "log.h"
#include "stream.h"

static NORETURN void broken(const char *what, const struct client *c, const struct server *sv)
{
	fatal("link: %s: C-%llu (linked to S-%llu) and S-%llu (linked to C-%llu)", what,
	      c ? (unsigned long long)c->id : 0ULL,
	      c && c->link ? (unsigned long long)c->link->id : 0ULL,
	      sv ? (unsigned long long)sv->id : 0ULL,
	      sv && sv->link ? (unsigned long long)sv->link->id : 0ULL);
}

void link_attach(struct client *c, struct server *sv)
{
	if (c->link || sv->link || c->pool != sv->pool)
		broken("attach of a linked pair or of two pools", c, sv);
	c->link = sv;
	sv->link = c;
	c->s.peer = &sv->s;
	sv->s.peer = &c->s;
}

void link_detach(struct client *c, struct server *sv, enum link_end how)
{
	if (c->link != sv || sv->link != c)
		broken("detach of a pair not linked to each other", c, sv);
	if (how == LINK_SERVER_GONE || how == LINK_BOTH_GO)
		stream_forget_peer(&c->s, &sv->s);
	if (how == LINK_CLIENT_GONE || how == LINK_BOTH_GO)
		stream_forget_peer(&sv->s, &c->s);
	c->link = NULL;
	sv->link = NULL;
	c->s.peer = NULL;
	sv->s.peer = NULL;
}

struct client *link_detach_server(struct server *sv, enum link_end how)
{
	struct client *c = sv->link;
	if (c)
		link_detach(c, sv, how);
	else
		sv->s.peer = NULL;
	return c;
}

void link_assert_free(const struct server *sv)
{
	if (sv->link)
		broken("server joins its pool still linked", sv->link, sv);
}

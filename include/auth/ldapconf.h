/* pgcrew — LDAP authentication settings (auth_ldap_options, or the options
 * of an HBA ldap line, PostgreSQL's ldap* names) parsed into a fixed-size
 * struct, and what a login derives from them: the server URIs, the DN of a
 * simple bind, the search filter of search+bind. Pure: no libldap, no I/O. */
#ifndef PGCREW_AUTH_LDAPCONF_H
#define PGCREW_AUTH_LDAPCONF_H

#include "types.h"

#define LDAPCONF_STR 256

enum ldapconf_scope { LDAPCONF_SCOPE_BASE, LDAPCONF_SCOPE_ONE, LDAPCONF_SCOPE_SUB };

struct ldapconf {
	char scheme[8];                   /* "ldap" (default) or "ldaps" */
	char server[LDAPCONF_STR];        /* blank-separated host names */
	int port;                         /* 0: the scheme's default port */
	bool starttls;                    /* ldaptls=1 */
	char prefix[LDAPCONF_STR], suffix[LDAPCONF_STR];      /* simple bind mode */
	char basedn[LDAPCONF_STR], binddn[LDAPCONF_STR];      /* search+bind mode */
	char bindpasswd[LDAPCONF_STR];
	char searchattribute[64];
	char searchfilter[LDAPCONF_STR];
	enum ldapconf_scope scope;        /* search scope; ldapurl may set it */
	bool search;                      /* search+bind (basedn set) rather than simple bind */
};

/* Start from the defaults (scheme ldap, subtree scope, nothing else). */
void ldapconf_init(struct ldapconf *lc);
/* One name=value. False with err filled for an unknown name, a bad value or
 * one too long; ldapurl fills scheme, server, port, basedn, attribute,
 * scope and filter from ldap[s]://host[:port]/basedn[?attr[?scope[?filter]]]. */
bool ldapconf_set(struct ldapconf *lc, const char *name, const char *value,
		  char *err, size_t errlen) MUSTCHECK;
/* auth_ldap_options: name=value words separated by blanks (a value may be
 * "quoted", "" inside quotes being a quote), then ldapconf_finish(). */
bool ldapconf_parse(struct ldapconf *lc, const char *text, char *err, size_t errlen) MUSTCHECK;
/* PostgreSQL's checks on the whole set: the two modes not mixed, one of
 * them chosen, a server named, attribute and filter not both. */
bool ldapconf_finish(struct ldapconf *lc, char *err, size_t errlen) MUSTCHECK;

/* "scheme://host:port" for each host, blank-separated (ldap_initialize). */
bool ldapconf_uris(const struct ldapconf *lc, char *out, size_t len) MUSTCHECK;
/* Simple bind mode: prefix + user + suffix. */
bool ldapconf_bind_dn(const struct ldapconf *lc, const char *user, char *out, size_t len) MUSTCHECK;
/* Search+bind mode: "(attr=user)" (attr defaults to uid) or the filter with
 * every $username replaced. False when the user name holds a character
 * that would change the filter (* ( ) \ /, as PostgreSQL refuses them) or
 * the result does not fit. */
bool ldapconf_filter(const struct ldapconf *lc, const char *user, char *out, size_t len) MUSTCHECK;

#endif

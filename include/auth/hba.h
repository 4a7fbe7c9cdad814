/* pgcrew — auth_type = hba: the auth_hba_file (PostgreSQL's pg_hba.conf
 * syntax as PgBouncer accepts it) and the auth_ident_file it refers to with
 * map=. Loading parses a file into an immutable rule list; matching a login
 * against it needs no allocation and no locks, so one loaded generation can
 * be shared read-only by every worker.
 *
 * HBA file, one record a line (no backslash continuation, no include /
 * include_if_exists / include_dir: PgBouncer supports neither):
 *
 *   local      DATABASE USER          METHOD [OPTIONS]
 *   host       DATABASE USER ADDRESS  METHOD [OPTIONS]
 *   hostssl    DATABASE USER ADDRESS  METHOD [OPTIONS]
 *   hostnossl  DATABASE USER ADDRESS  METHOD [OPTIONS]
 *
 * Fields are separated by blanks; '#' outside quotes starts a comment.
 * Double quotes protect blanks, commas and '#', and "" inside quotes is a
 * literal quote. A quoted word is never a keyword: "all" is a database or
 * user named all.
 *   DATABASE  comma list of: all | sameuser (database = user name) |
 *             replication (physical replication connections) | @file | name.
 *             samerole/samegroup are refused, as in PgBouncer.
 *   USER      comma list of: all | @file | name. +group is refused.
 *             In both fields an unquoted /regex is refused (PostgreSQL 16
 *             syntax; PgBouncer would compare it as a plain name).
 *   @file     names (blank or comma separated, '#' comments, quoting and
 *             keywords as above, nested @file) from a file relative to the
 *             directory of the file that names it.
 *   ADDRESS   all | IPv4/IPv6 address with /prefix | address followed by a
 *             netmask column. Host names, samehost and samenet are refused.
 *             No IPv4-mapped IPv6 magic: ::ffff:10.0.0.1 is an IPv6 client
 *             and only IPv6 rules match it (PgBouncer compares families).
 *   METHOD    trust reject md5 password scram-sha-256 cert peer ldap, plus
 *             pam (a pgcrew extension: PgBouncer refuses pam in the file)
 *             and gss (loaded so a gss line still matches first, but the
 *             rule is unusable: pgcrew has no GSSAPI).
 *   OPTIONS   name=value words. map=NAME for every method but ldap/pam/gss
 *             (the map must exist in the ident file); ldap takes PostgreSQL's
 *             ldap* options (ldapserver, ldapport, ldapscheme, ldaptls,
 *             ldapprefix, ldapsuffix, ldapbasedn, ldapbinddn, ldapbindpasswd,
 *             ldapsearchattribute, ldapsearchfilter, ldapurl); pam takes
 *             pamservice= and pam_use_hostname=; gss tolerates include_realm=.
 * hostgssenc/hostnogssenc lines are parsed and checked but never match
 * (pgcrew has no GSSAPI encryption; PgBouncer skips such lines).
 *
 * Bad lines: like PgBouncer, a line that cannot be parsed is skipped and
 * the rest of the file is loaded. Every skipped line (and every line that is
 * loaded but can never authenticate, see hba_rule_unusable) is recorded as
 * a problem naming the file and line, e.g.
 *   "/etc/pgcrew/hba.conf line 7: unknown auth method 'foo' (line ignored)".
 * The caller logs them; a caller that wants PostgreSQL's all-or-nothing
 * behaviour refuses a file with hba_problem_count() > 0.
 *
 * Ident file (auth_ident_file), PgBouncer's simplified pg_ident.conf:
 *   MAPNAME SYSTEM-USERNAME DATABASE-USERNAME
 * DATABASE-USERNAME may be the keyword all. Regular expressions (/...),
 * +group and include directives are refused; bad lines are skipped and
 * recorded like in the HBA file. */
#ifndef PGCREW_AUTH_HBA_H
#define PGCREW_AUTH_HBA_H

#include "types.h"

#include <sys/socket.h>

#define HBA_MAX_FILE_DEPTH 10          /* nested @file references */
#define HBA_MAX_PROBLEMS 100           /* recorded; more are counted in a last entry */

enum hba_method {
	HBA_TRUST, HBA_REJECT, HBA_MD5, HBA_PASSWORD, HBA_SCRAM_SHA_256,
	HBA_CERT, HBA_PEER, HBA_LDAP, HBA_PAM, HBA_GSS, HBA_METHOD_COUNT
};

/* The login being authenticated. */
struct hba_conn {
	enum { HBA_LOCAL, HBA_HOST } kind;  /* Unix socket or TCP */
	bool tls;                       /* TCP connection that did the TLS handshake */
	const struct sockaddr *addr;    /* HBA_HOST: the client's AF_INET/AF_INET6 address */
	const char *database;           /* startup packet's database (NULL = "") */
	const char *user;               /* startup packet's user (NULL = "") */
	bool replication;               /* physical replication (replication=true); a logical
					 * one (replication=database) is an ordinary login here */
};

struct hba;
struct hba_rule;
struct hba_ident;

/* Loads an HBA file. ident is the loaded auth_ident_file, or NULL when there
 * is none (then every map= line is skipped, as in PgBouncer). Returns 0 and
 * sets *out when the file was read, even if some lines were skipped: err
 * then holds the first problem, or "" when there were none. Returns -1 with
 * *out = NULL and err set when the file cannot be opened or read. (PgBouncer
 * then installs an empty rule set, which rejects every login; hba_match()
 * on a NULL hba does the same.) */
int hba_load(const char *path, const struct hba_ident *ident, struct hba **out,
	     char *err, size_t errlen) MUSTCHECK;
void hba_free(struct hba *hba);

/* Problems found by hba_load, in file order, each a whole message naming
 * file and line. */
size_t hba_problem_count(const struct hba *hba);
const char *hba_problem(const struct hba *hba, size_t i);
size_t hba_rule_count(const struct hba *hba);     /* rules loaded */

/* The first rule matching the login, or NULL: no rule, which means reject
 * (also for a NULL hba). The rule lives as long as the hba. */
const struct hba_rule *hba_match(const struct hba *hba, const struct hba_conn *conn);

enum hba_method hba_rule_method(const struct hba_rule *rule);
const char *hba_method_name(enum hba_method m);   /* "scram-sha-256", ... */
int hba_rule_line(const struct hba_rule *rule);    /* line number in the HBA file */
/* Non-NULL when the rule matched but cannot authenticate anybody (gss,
 * peer on a TCP line, LDAP options PgBouncer would fail on at login): the
 * caller must reject the login, logging this reason. */
const char *hba_rule_unusable(const struct hba_rule *rule);
/* Options after the method, unquoted: value of the last name=value with
 * that name, or NULL. hba_rule_map() is hba_rule_option(rule, "map"),
 * except that it is always NULL for ldap rules (map= is no LDAP option). */
const char *hba_rule_option(const struct hba_rule *rule, const char *name);
const char *hba_rule_map(const struct hba_rule *rule);
size_t hba_rule_option_count(const struct hba_rule *rule);
void hba_rule_option_at(const struct hba_rule *rule, size_t i, const char **name, const char **value);
/* The options exactly as written after the method (quotes kept, comment and
 * surrounding blanks dropped), "" if none: for an ldap rule this is the
 * same key=value text auth_ldap_options takes. */
const char *hba_rule_options_raw(const struct hba_rule *rule);

/* Ident file: 0 and *out, even with skipped lines (err = first problem or
 * ""), or -1, *out = NULL and err when the file cannot be read. */
int hba_ident_load(const char *path, struct hba_ident **out, char *err, size_t errlen) MUSTCHECK;
void hba_ident_free(struct hba_ident *ident);
size_t hba_ident_problem_count(const struct hba_ident *ident);
const char *hba_ident_problem(const struct hba_ident *ident, size_t i);
bool hba_ident_has_map(const struct hba_ident *ident, const char *map);
/* True when map lets system_user (certificate CN, peer's OS user) log in
 * as db_user. */
bool hba_ident_match(const struct hba_ident *ident, const char *map,
		     const char *system_user, const char *db_user);

#endif

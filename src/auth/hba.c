/* pgcrew — auth_hba_file and auth_ident_file (see include/auth/hba.h for the
 * accepted syntax). A small lexer turns one line into words (quoted parts
 * unquoted, "" a literal quote), commas and end of line; the line parsers
 * build rules; bad lines are recorded as problems and skipped, the way
 * PgBouncer loads these files. */
#include "auth/hba.h"
#include "log.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY_LEN 1024                    /* one line's error message */
#define QMAX 64                         /* longest user text quoted in a message */
/* 'text', shortened to QMAX characters with "..." */
#define QFMT "'%.*s%s'"
#define QARG(s) (int)QMAX, (s), strlen(s) > QMAX ? "..." : ""

/* ---- problems: messages for skipped or unusable lines ---- */

struct problems {
	char **v;
	size_t n;
	size_t dropped;                 /* beyond HBA_MAX_PROBLEMS */
};

static void problem_add(struct problems *pr, const char *fmt, ...) PRINTF(2, 3);

static void problem_add(struct problems *pr, const char *fmt, ...)
{
	char buf[WHY_LEN + 512];
	va_list ap;

	if (pr->n >= HBA_MAX_PROBLEMS) {
		pr->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!pr->v)
		pr->v = xcalloc(HBA_MAX_PROBLEMS + 1, sizeof(*pr->v));
	pr->v[pr->n++] = xstrdup(buf);
}

/* After loading: one last entry counting the problems not recorded. */
static void problems_finish(struct problems *pr)
{
	char buf[96];

	if (pr->dropped == 0)
		return;
	snprintf(buf, sizeof(buf), "... and %zu more problem%s", pr->dropped, pr->dropped == 1 ? "" : "s");
	pr->v[pr->n++] = xstrdup(buf);
}

static void problems_free(struct problems *pr)
{
	for (size_t i = 0; i < pr->n; i++)
		free(pr->v[i]);
	free(pr->v);
}

static void copy_first_problem(const struct problems *pr, char *err, size_t errlen)
{
	if (errlen)
		snprintf(err, errlen, "%s", pr->n ? pr->v[0] : "");
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) PRINTF(3, 4);

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void *xrealloc_array(void *p, size_t n, size_t sz)
{
	void *q;

	if (n && sz > SIZE_MAX / n)
		fatal("out of memory (%zu x %zu bytes)", n, sz);
	q = realloc(p, (n * sz) != 0 ? n * sz : 1);
	if (!q)
		fatal("out of memory (%zu x %zu bytes)", n, sz);
	return q;
}

/* ---- lexer ---- */

enum tok_kind { T_WORD, T_COMMA, T_EOL, T_ERR };

struct lexer {
	const char *p, *end;            /* unread part of the line */
	enum tok_kind kind;             /* current token */
	char *text;                     /* T_WORD: unquoted text (NUL-terminated, in buf) */
	bool quoted;                    /* T_WORD: some part was in double quotes */
	const char *start, *stop;       /* T_WORD: its extent in the line */
	char *buf;
	size_t cap;
	char err[128];                  /* T_ERR: why */
};

static void lex_init(struct lexer *lx, const char *line, size_t len)
{
	lx->p = line;
	lx->end = line + len;
	lx->kind = T_EOL;
	lx->text = NULL;
	lx->quoted = false;
	lx->err[0] = '\0';
}

static void lex_free(struct lexer *lx)
{
	free(lx->buf);
	lx->buf = NULL;
	lx->cap = 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static void lex_fail(struct lexer *lx, const char *why)
{
	lx->kind = T_ERR;
	snprintf(lx->err, sizeof(lx->err), "%s", why);
	lx->p = lx->end;
}

/* Reads the next token. A word runs to a blank, ',' or '#' outside
 * quotes; quoted parts may contain anything but a lone '"' ("" is '"'). */
static void lex_next(struct lexer *lx)
{
	const char *p = lx->p;
	size_t n = 0, need;

	if (lx->kind == T_ERR)
		return;
	while (p < lx->end && is_blank(*p))
		p++;
	if (p < lx->end && *p == '\0') {
		lex_fail(lx, "line contains a NUL byte");
		return;
	}
	if (p >= lx->end || *p == '#') {
		lx->kind = T_EOL;
		lx->p = lx->end;
		return;
	}
	if (*p == ',') {
		lx->kind = T_COMMA;
		lx->p = p + 1;
		return;
	}
	need = (size_t)(lx->end - p) + 1;
	if (need > lx->cap) {
		free(lx->buf);
		lx->buf = xmalloc(need);
		lx->cap = need;
	}
	lx->start = p;
	lx->quoted = false;
	while (p < lx->end && !is_blank(*p) && *p != ',' && *p != '#') {
		if (*p == '\0') {
			lex_fail(lx, "line contains a NUL byte");
			return;
		}
		if (*p != '"') {
			lx->buf[n++] = *p++;
			continue;
		}
		lx->quoted = true;
		for (p++;; p++) {
			if (p >= lx->end || *p == '\n') {
				lex_fail(lx, "unterminated quoted string");
				return;
			}
			if (*p == '\0') {
				lex_fail(lx, "line contains a NUL byte");
				return;
			}
			if (*p == '"') {
				if (p + 1 < lx->end && p[1] == '"') {
					p++;
				} else {
					p++;
					break;
				}
			}
			lx->buf[n++] = *p;
		}
	}
	lx->buf[n] = '\0';
	lx->stop = p;
	lx->p = p;
	lx->text = lx->buf;
	lx->kind = T_WORD;
	/* "...  \" at the end: PostgreSQL's line continuation, which PgBouncer
	 * does not have. Say so rather than report the next line as garbage. */
	if (p[-1] == '\\') {
		const char *q = p;

		while (q < lx->end && is_blank(*q))
			q++;
		if (q >= lx->end)
			lex_fail(lx, "line continuation with '\\' is not supported");
	}
}

static bool is_kw(const struct lexer *lx, const char *kw)
{
	return lx->kind == T_WORD && !lx->quoted && strcmp(lx->text, kw) == 0;
}

/* Relative names are relative to the directory of the file naming them. */
static char *path_relative_to(const char *file, const char *name)
{
	const char *slash = strrchr(file, '/');
	size_t len;
	char *out;

	if (name[0] == '/' || !slash)
		return xstrdup(name);
	len = (size_t)(slash - file) + 1 + strlen(name) + 1;
	out = xmalloc(len);
	snprintf(out, len, "%.*s/%s", (int)(slash - file), file, name);
	return out;
}

/* Calls fn for each line of path. -1 with err when the file cannot be
 * opened or read, or when fn fails (then stopping at that line). */
typedef int (*line_fn)(void *arg, const char *line, size_t len, int lineno);

static int for_each_line(const char *path, line_fn fn, void *arg, bool stop_on_error,
			 const char *what, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;

	if (!f) {
		set_err(err, errlen, "could not open %s'%s': %s", what, path, strerror(errno));
		return -1;
	}
	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (fn(arg, line, (size_t)len, ++lineno) < 0) {
			rc = -1;
			if (stop_on_error)
				break;
		}
		errno = 0;
	}
	if (ferror(f)) {
		set_err(err, errlen, "could not read %s'%s': %s", what, path, strerror(errno ? errno : EIO));
		rc = -1;
	}
	free(line);
	fclose(f);
	return rc;
}

/* ---- rules ---- */

#define NAME_ALL 1u
#define NAME_SAMEUSER 2u
#define NAME_REPLICATION 4u

struct names {
	unsigned flags;
	char **v;                       /* sorted, unique after the line is parsed */
	size_t n, cap;
};

enum rule_type { R_LOCAL, R_HOST, R_HOSTSSL, R_HOSTNOSSL, R_HOSTGSSENC, R_HOSTNOGSSENC };

struct haddr {
	bool all;
	int family;                     /* AF_INET / AF_INET6 when !all */
	uint8_t a[16], m[16];           /* address already masked */
};

struct hba_opt {
	char *name, *value;
};

struct hba_rule {
	int line;
	enum rule_type type;
	struct names db, user;
	struct haddr addr;
	enum hba_method method;
	struct hba_opt *opts;
	size_t n_opts;
	char *raw;                      /* options as written */
	char *unusable;                 /* NULL, or why it can never authenticate */
};

struct hba {
	struct hba_rule *rules;
	size_t n, cap;
	struct problems pr;
};

static const char *const method_names[] = {
	[HBA_TRUST] = "trust", [HBA_REJECT] = "reject", [HBA_MD5] = "md5",
	[HBA_PASSWORD] = "password", [HBA_SCRAM_SHA_256] = "scram-sha-256",
	[HBA_CERT] = "cert", [HBA_PEER] = "peer", [HBA_LDAP] = "ldap",
	[HBA_PAM] = "pam", [HBA_GSS] = "gss",
};
_Static_assert(ARRAY_SIZE(method_names) == HBA_METHOD_COUNT, "method_names");

const char *hba_method_name(enum hba_method m)
{
	return (unsigned)m < HBA_METHOD_COUNT ? method_names[m] : "?";
}

static void names_add(struct names *nm, const char *s)
{
	if (nm->n == nm->cap) {
		nm->cap = nm->cap ? nm->cap * 2 : 4;
		nm->v = xrealloc_array(nm->v, nm->cap, sizeof(*nm->v));
	}
	nm->v[nm->n++] = xstrdup(s);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_finish(struct names *nm)
{
	size_t out = 0;

	if (nm->n < 2)
		return;
	qsort(nm->v, nm->n, sizeof(*nm->v), cmp_str);
	for (size_t i = 0; i < nm->n; i++) {
		if (out > 0 && strcmp(nm->v[out - 1], nm->v[i]) == 0)
			free(nm->v[i]);
		else
			nm->v[out++] = nm->v[i];
	}
	nm->n = out;
}

static bool names_has(const struct names *nm, const char *s)
{
	return nm->n > 0 && bsearch(&s, nm->v, nm->n, sizeof(*nm->v), cmp_str) != NULL;
}

static void names_free(struct names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->v[i]);
	free(nm->v);
}

static void rule_free(struct hba_rule *r)
{
	names_free(&r->db);
	names_free(&r->user);
	for (size_t i = 0; i < r->n_opts; i++) {
		free(r->opts[i].name);
		free(r->opts[i].value);
	}
	free(r->opts);
	free(r->raw);
	free(r->unusable);
}

/* State of one hba_load. */
struct loader {
	const struct hba_ident *ident;
	char why[WHY_LEN];              /* the current line's error */
	bool located;                   /* why already says where: do not prefix it again */
};

static int fail(struct loader *ld, const char *fmt, ...) PRINTF(2, 3);

static int fail(struct loader *ld, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ld->why, sizeof(ld->why), fmt, ap);
	va_end(ap);
	return -1;
}

static int add_word(struct loader *ld, struct names *nm, const char *word, bool quoted, bool is_db,
		    const char *file, int depth);

/* One @file: every word on every line is a name (or keyword, or @file). */
struct namefile {
	struct loader *ld;
	struct names *nm;
	bool is_db;
	const char *path;
	int depth;
};

static int namefile_line(void *arg, const char *line, size_t len, int lineno)
{
	struct namefile *nf = arg;
	struct lexer lx = { 0 };
	int rc = 0;

	lex_init(&lx, line, len);
	for (lex_next(&lx); rc == 0 && lx.kind != T_EOL; lex_next(&lx)) {
		if (lx.kind == T_ERR) {
			snprintf(nf->ld->why, sizeof(nf->ld->why), "%s", lx.err);
			rc = -1;
		} else if (lx.kind == T_WORD) {
			rc = add_word(nf->ld, nf->nm, lx.text, lx.quoted, nf->is_db, nf->path, nf->depth);
		}
	}
	lex_free(&lx);
	if (rc < 0 && !nf->ld->located) {
		/* Put this file's location in front of the message. */
		char inner[WHY_LEN];
		int n;

		memcpy(inner, nf->ld->why, sizeof(inner));
		n = snprintf(nf->ld->why, sizeof(nf->ld->why), "'%s' line %d: ", nf->path, lineno);
		if (n >= 0 && (size_t)n < sizeof(nf->ld->why))
			strlcpy_(nf->ld->why + n, inner, sizeof(nf->ld->why) - (size_t)n);
	}
	return rc;
}

static int load_namefile(struct loader *ld, struct names *nm, const char *name, bool is_db,
			 const char *file, int depth)
{
	struct namefile nf = { .ld = ld, .nm = nm, .is_db = is_db, .depth = depth + 1 };
	char err[WHY_LEN];
	char *path;
	int rc;

	if (name[0] == '\0')
		return fail(ld, "'@' must be followed by a file name");
	if (depth >= HBA_MAX_FILE_DEPTH) {
		fail(ld, "'%s': @%s: @file references nested more than %d deep", file, name, HBA_MAX_FILE_DEPTH);
		ld->located = true;
		return -1;
	}
	path = path_relative_to(file, name);
	nf.path = path;
	err[0] = '\0';
	ld->why[0] = '\0';
	rc = for_each_line(path, namefile_line, &nf, true, "", err, sizeof(err));
	if (rc < 0 && err[0])
		fail(ld, "@%s: %s", name, err);
	free(path);
	return rc;
}

/* A database or user word: keyword, @file or a plain name. Only an
 * unquoted word can be a keyword, a group or a file reference. */
static int add_word(struct loader *ld, struct names *nm, const char *word, bool quoted, bool is_db,
		    const char *file, int depth)
{
	if (!quoted) {
		if (strcmp(word, "all") == 0) {
			nm->flags |= NAME_ALL;
			return 0;
		}
		if (is_db && strcmp(word, "sameuser") == 0) {
			nm->flags |= NAME_SAMEUSER;
			return 0;
		}
		if (is_db && strcmp(word, "replication") == 0) {
			nm->flags |= NAME_REPLICATION;
			return 0;
		}
		if (is_db && (strcmp(word, "samerole") == 0 || strcmp(word, "samegroup") == 0))
			return fail(ld, "%s is not supported", word);
		if (word[0] == '+')
			return fail(ld, "group membership (" QFMT ") is not supported", QARG(word));
		if (word[0] == '/')
			return fail(ld, "regular expressions (" QFMT ") are not supported", QARG(word));
		if (word[0] == '@')
			return load_namefile(ld, nm, word + 1, is_db, file, depth);
	}
	names_add(nm, word);
	return 0;
}

/* A comma list of words; on return lx is at the token after it. */
static int parse_name_list(struct loader *ld, struct lexer *lx, struct names *nm, bool is_db,
			   const char *field, const char *file)
{
	for (;;) {
		if (lx->kind == T_ERR)
			return fail(ld, "%s", lx->err);
		if (lx->kind == T_EOL)
			return fail(ld, nm->n || nm->flags ? "%s list ends with ','" : "missing %s field", field);
		if (lx->kind == T_COMMA)
			return fail(ld, "empty name in %s list", field);
		if (add_word(ld, nm, lx->text, lx->quoted, is_db, file, 0) < 0)
			return -1;
		lex_next(lx);
		if (lx->kind != T_COMMA)
			break;
		lex_next(lx);
	}
	names_finish(nm);
	return 0;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
	}
	return true;
}

static bool looks_like_address(const char *s)
{
	uint8_t tmp[16];
	char buf[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);

	if (n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(AF_INET, buf, tmp) == 1 || inet_pton(AF_INET6, buf, tmp) == 1;
}

/* ADDRESS: all, addr/prefix or addr + netmask; lx moves past it. */
static int parse_address(struct loader *ld, struct lexer *lx, struct haddr *ha)
{
	char addr[64];
	const char *slash;
	size_t alen, bytes;
	bool bad = false;

	if (lx->kind == T_ERR)
		return fail(ld, "%s", lx->err);
	if (lx->kind == T_EOL)
		return fail(ld, "missing address field");
	if (lx->kind == T_COMMA)
		return fail(ld, "unexpected ',' in the address field");
	if (lx->quoted)
		return fail(ld, "quoted address " QFMT ": host names are not supported", QARG(lx->text));
	if (strcmp(lx->text, "all") == 0) {
		ha->all = true;
		lex_next(lx);
		return 0;
	}
	if (strcmp(lx->text, "samehost") == 0 || strcmp(lx->text, "samenet") == 0)
		return fail(ld, "%s is not supported", lx->text);
	slash = strchr(lx->text, '/');
	alen = slash ? (size_t)(slash - lx->text) : strlen(lx->text);
	if (alen >= sizeof(addr))
		return fail(ld, "invalid IP address " QFMT, QARG(lx->text));
	memcpy(addr, lx->text, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET, addr, ha->a) == 1) {
		ha->family = AF_INET;
	} else if (inet_pton(AF_INET6, addr, ha->a) == 1) {
		ha->family = AF_INET6;
	} else {
		bool name = addr[0] == '.';

		for (const char *c = addr; *c && !name; c++)
			name = isalpha((unsigned char)*c) && !strchr(addr, ':');
		if (name)
			return fail(ld, "host names are not supported: " QFMT, QARG(lx->text));
		return fail(ld, "invalid IP address " QFMT, QARG(lx->text));
	}
	bytes = ha->family == AF_INET ? 4 : 16;
	if (slash) {
		unsigned long bits;

		if (!all_digits(slash + 1) || strlen(slash + 1) > 9 ||
		    (bits = strtoul(slash + 1, NULL, 10)) > bytes * 8)
			return fail(ld, "invalid prefix length " QFMT " for an %s address", QARG(slash + 1),
				    ha->family == AF_INET ? "IPv4" : "IPv6");
		for (size_t i = 0; i < bytes; i++) {
			size_t left = bits > i * 8 ? bits - i * 8 : 0;

			ha->m[i] = left >= 8 ? 0xff : (uint8_t)(0xff00u >> left);
		}
		lex_next(lx);
	} else {
		lex_next(lx);
		if (lx->kind == T_ERR)
			return fail(ld, "%s", lx->err);
		if (lx->kind != T_WORD || lx->quoted || strlen(lx->text) >= sizeof(addr) ||
		    inet_pton(ha->family, lx->text, ha->m) != 1) {
			char found[QMAX + 16];

			if (lx->kind == T_WORD)
				snprintf(found, sizeof(found), QFMT, QARG(lx->text));
			else
				snprintf(found, sizeof(found), "%s", lx->kind == T_EOL ? "the end of the line" : "','");
			return fail(ld, "address '%s' needs a /prefix or a netmask column, found %s", addr, found);
		}
		lex_next(lx);
	}
	/* PgBouncer keeps such a rule but it can never match (it compares the
	 * masked client address with the unmasked one); refuse it loudly. */
	for (size_t i = 0; i < bytes; i++) {
		if (ha->a[i] & (uint8_t)~ha->m[i])
			bad = true;
	}
	if (bad) {
		char mbuf[INET6_ADDRSTRLEN];

		inet_ntop(ha->family, ha->m, mbuf, sizeof(mbuf));
		return fail(ld, "address %s has bits set outside its mask %s", addr, mbuf);
	}
	return 0;
}

static const struct {
	const char *name;
	enum hba_method method;
} methods[] = {
	{ "trust", HBA_TRUST }, { "reject", HBA_REJECT }, { "md5", HBA_MD5 },
	{ "password", HBA_PASSWORD }, { "scram-sha-256", HBA_SCRAM_SHA_256 },
	{ "cert", HBA_CERT }, { "peer", HBA_PEER }, { "ldap", HBA_LDAP },
	{ "pam", HBA_PAM }, { "gss", HBA_GSS },
};

/* PostgreSQL methods neither PgBouncer nor pgcrew implement. */
static const char *const unsupported_methods[] = {
	"ident", "radius", "sspi", "bsd", "oauth", "krb5", "crypt",
};

static int parse_method(struct loader *ld, struct lexer *lx, enum rule_type type, enum hba_method *out)
{
	if (lx->kind == T_ERR)
		return fail(ld, "%s", lx->err);
	if (lx->kind == T_EOL)
		return fail(ld, "missing auth method");
	if (lx->kind == T_COMMA)
		return fail(ld, "unexpected ',' before the auth method");
	if (lx->quoted)
		return fail(ld, "the auth method must not be quoted: " QFMT, QARG(lx->text));
	for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
		if (strcmp(lx->text, methods[i].name) == 0) {
			*out = methods[i].method;
			return 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(unsupported_methods); i++) {
		if (strcmp(lx->text, unsupported_methods[i]) == 0)
			return fail(ld, "auth method '%s' is not supported", lx->text);
	}
	if (type == R_LOCAL && (strcmp(lx->text, "all") == 0 || looks_like_address(lx->text)))
		return fail(ld, "local lines have no address field: found " QFMT " where the auth method goes",
			    QARG(lx->text));
	return fail(ld, "unknown auth method " QFMT, QARG(lx->text));
}

static void rule_add_opt(struct hba_rule *r, const char *name, size_t nlen, const char *value)
{
	r->opts = xrealloc_array(r->opts, r->n_opts + 1, sizeof(*r->opts));
	r->opts[r->n_opts].name = xmalloc(nlen + 1);
	memcpy(r->opts[r->n_opts].name, name, nlen);
	r->opts[r->n_opts].name[nlen] = '\0';
	r->opts[r->n_opts].value = xstrdup(value);
	r->n_opts++;
}

static char *dup_trimmed(const char *s, const char *e)
{
	char *out;

	while (s < e && is_blank(*s))
		s++;
	while (e > s && is_blank(e[-1]))
		e--;
	out = xmalloc((size_t)(e - s) + 1);
	memcpy(out, s, (size_t)(e - s));
	out[e - s] = '\0';
	return out;
}

/* Options of every method but ldap: name=value words from the lexer. */
static int parse_options(struct loader *ld, struct lexer *lx, struct hba_rule *r)
{
	const char *first = NULL, *last = NULL;

	for (; lx->kind != T_EOL; lex_next(lx)) {
		const char *eq;
		size_t nlen;

		if (lx->kind == T_ERR)
			return fail(ld, "%s", lx->err);
		if (lx->kind == T_COMMA)
			return fail(ld, "unexpected ',' among the options");
		eq = strchr(lx->text, '=');
		if (!eq || eq == lx->text)
			return fail(ld, "option " QFMT " is not in name=value form", QARG(lx->text));
		nlen = (size_t)(eq - lx->text);
		for (size_t i = 0; i < r->n_opts; i++) {
			if (strlen(r->opts[i].name) == nlen && memcmp(r->opts[i].name, lx->text, nlen) == 0)
				return fail(ld, "option '%.*s' given twice", (int)nlen, lx->text);
		}
		rule_add_opt(r, lx->text, nlen, eq + 1);
		if (!first)
			first = lx->start;
		last = lx->stop;
	}
	r->raw = first ? dup_trimmed(first, last) : xstrdup("");
	return 0;
}

/* LDAP options are taken like PgBouncer takes them: the rest of the line,
 * words name=value (value possibly "quoted") separated by blanks, so an
 * unquoted ldapbasedn=dc=example,dc=net works. A '#' starting a word starts
 * a comment. Problems make the rule unusable (PgBouncer fails such logins)
 * rather than skipping the line. */
static const char *parse_ldap_options(struct hba_rule *r, const char *p, const char *end, char *why, size_t whylen)
{
	const char *first = NULL, *last = NULL;

	for (;;) {
		const char *name, *eq;
		char *val;
		size_t n = 0;

		while (p < end && is_blank(*p))
			p++;
		if (p >= end || *p == '#')
			break;
		name = p;
		while (p < end && !is_blank(*p) && *p != '=')
			p++;
		if (p >= end || *p != '=' || p == name) {
			while (p < end && !is_blank(*p))
				p++;
			if (p - name == 1 && *name == '\\')
				snprintf(why, whylen, "line continuation with '\\' is not supported");
			else
				snprintf(why, whylen, "LDAP option '%.*s%s' is not in name=value form",
					 (int)(p - name > QMAX ? QMAX : p - name), name, p - name > QMAX ? "..." : "");
			r->raw = dup_trimmed(first ? first : name, end);
			return why;
		}
		eq = p++;
		val = xmalloc((size_t)(end - p) + 1);
		if (p < end && *p == '"') {
			for (p++;; p++) {
				if (p >= end || *p == '\n') {
					free(val);
					snprintf(why, whylen, "unterminated quoted value for LDAP option '%.*s'",
						 (int)(eq - name > QMAX ? QMAX : eq - name), name);
					r->raw = dup_trimmed(first ? first : name, end);
					return why;
				}
				if (*p == '"') {
					if (p + 1 < end && p[1] == '"')
						p++;
					else
						break;
				}
				val[n++] = *p;
			}
			p++;
		} else {
			while (p < end && !is_blank(*p))
				val[n++] = *p++;
		}
		val[n] = '\0';
		rule_add_opt(r, name, (size_t)(eq - name), val);
		free(val);
		if (!first)
			first = name;
		last = p;
	}
	r->raw = first ? dup_trimmed(first, last) : xstrdup("");
	return NULL;
}

static const char *const ldap_option_names[] = {
	"ldapserver", "ldapport", "ldapscheme", "ldaptls", "ldapprefix", "ldapsuffix",
	"ldapbasedn", "ldapbinddn", "ldapbindpasswd", "ldapsearchattribute",
	"ldapsearchfilter", "ldapurl",
};

/* PostgreSQL's and PgBouncer's rules for the LDAP options; NULL if fine. */
static const char *check_ldap(const struct hba_rule *r, char *why, size_t whylen)
{
	bool prefix = false, search = false, basedn = false, server = false, url = false;
	bool attr = false, filter = false;

	for (size_t i = 0; i < r->n_opts; i++) {
		const char *n = r->opts[i].name, *v = r->opts[i].value;
		bool known = false;

		for (size_t k = 0; k < ARRAY_SIZE(ldap_option_names); k++)
			known = known || strcmp(n, ldap_option_names[k]) == 0;
		if (!known) {
			snprintf(why, whylen, "unknown LDAP option " QFMT, QARG(n));
			return why;
		}
		if (strcmp(n, "ldapport") == 0 && (!all_digits(v) || strlen(v) > 5 || atoi(v) < 1 || atoi(v) > 65535)) {
			snprintf(why, whylen, "invalid ldapport " QFMT, QARG(v));
			return why;
		}
		if (strcmp(n, "ldapscheme") == 0 && strcmp(v, "ldap") != 0 && strcmp(v, "ldaps") != 0) {
			snprintf(why, whylen, "invalid ldapscheme " QFMT " (ldap or ldaps)", QARG(v));
			return why;
		}
		if (strcmp(n, "ldaptls") == 0 && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
			snprintf(why, whylen, "invalid ldaptls " QFMT " (0 or 1)", QARG(v));
			return why;
		}
		if (strcmp(n, "ldapurl") == 0) {
			if (strncmp(v, "ldap://", 7) != 0 && strncmp(v, "ldaps://", 8) != 0) {
				snprintf(why, whylen, "invalid ldapurl " QFMT " (ldap:// or ldaps://)", QARG(v));
				return why;
			}
			url = true;
		}
		if (strcmp(n, "ldapprefix") == 0 || strcmp(n, "ldapsuffix") == 0)
			prefix = true;
		if (strcmp(n, "ldapbinddn") == 0 || strcmp(n, "ldapbindpasswd") == 0)
			search = true;
		attr = attr || strcmp(n, "ldapsearchattribute") == 0;
		filter = filter || strcmp(n, "ldapsearchfilter") == 0;
		basedn = basedn || strcmp(n, "ldapbasedn") == 0;
		server = server || strcmp(n, "ldapserver") == 0;
	}
	if (prefix && (search || attr || filter || basedn || url)) {
		snprintf(why, whylen, "ldapbasedn, ldapbinddn, ldapbindpasswd, ldapsearchattribute, "
			 "ldapsearchfilter and ldapurl cannot be used together with ldapprefix or ldapsuffix");
		return why;
	}
	if (!prefix && !basedn && !url) {
		snprintf(why, whylen, "auth method ldap needs ldapbasedn, ldapprefix, ldapsuffix or ldapurl");
		return why;
	}
	if (attr && filter) {
		snprintf(why, whylen, "ldapsearchattribute and ldapsearchfilter cannot be used together");
		return why;
	}
	if (!server && !url) {
		snprintf(why, whylen, "auth method ldap needs ldapserver or ldapurl");
		return why;
	}
	return NULL;
}

static bool ident_map_known(const struct hba_ident *ident, const char *map);

/* Which options each method takes; -1 and ld->why for a bad one. */
static int check_options(struct loader *ld, struct hba_rule *r)
{
	for (size_t i = 0; i < r->n_opts; i++) {
		const char *n = r->opts[i].name, *v = r->opts[i].value;

		switch (r->method) {
		case HBA_PAM:
			if (strcmp(n, "pamservice") == 0) {
				if (!*v)
					return fail(ld, "pamservice must not be empty");
				continue;
			}
			if (strcmp(n, "pam_use_hostname") == 0) {
				if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
					return fail(ld, "invalid pam_use_hostname " QFMT " (0 or 1)", QARG(v));
				continue;
			}
			break;
		case HBA_GSS:
			if (strcmp(n, "include_realm") == 0)
				continue;       /* PgBouncer ignores it too */
			if (strcmp(n, "krb_realm") == 0 || strcmp(n, "map") == 0)
				return fail(ld, "GSSAPI option '%s' is not supported", n);
			break;
		case HBA_LDAP:
			continue;               /* checked by check_ldap() */
		default:
			if (strcmp(n, "map") == 0) {
				if (!*v)
					return fail(ld, "map= needs a map name");
				if (!ld->ident)
					return fail(ld, "user name map " QFMT " is used but no ident file is loaded", QARG(v));
				if (!ident_map_known(ld->ident, v))
					return fail(ld, "user name map " QFMT " is not in the ident file", QARG(v));
				continue;
			}
			break;
		}
		return fail(ld, "option " QFMT " is not supported with auth method %s", QARG(n),
			    hba_method_name(r->method));
	}
	return 0;
}

static const struct {
	const char *kw;
	enum rule_type type;
} rule_types[] = {
	{ "local", R_LOCAL }, { "host", R_HOST }, { "hostssl", R_HOSTSSL },
	{ "hostnossl", R_HOSTNOSSL }, { "hostgssenc", R_HOSTGSSENC },
	{ "hostnogssenc", R_HOSTNOGSSENC },
};

struct hba_parse {
	struct loader ld;
	struct hba *hba;
	const char *path;
};

/* Fills r from one line. 1: a rule, 0: blank or comment, -1: bad line. */
static int parse_rule(struct hba_parse *hp, struct lexer *lx, struct hba_rule *r, const char **note)
{
	struct loader *ld = &hp->ld;
	bool found = false;

	lex_next(lx);
	if (lx->kind == T_EOL)
		return 0;
	if (lx->kind == T_ERR)
		return fail(ld, "%s", lx->err);
	if (lx->kind == T_COMMA)
		return fail(ld, "unexpected ',' at the start of the line");
	for (size_t i = 0; i < ARRAY_SIZE(rule_types) && !found; i++) {
		if (is_kw(lx, rule_types[i].kw)) {
			r->type = rule_types[i].type;
			found = true;
		}
	}
	if (!found) {
		if (is_kw(lx, "include") || is_kw(lx, "include_if_exists") || is_kw(lx, "include_dir"))
			return fail(ld, "%s directives are not supported", lx->text);
		return fail(ld, "unknown connection type " QFMT, QARG(lx->text));
	}
	lex_next(lx);
	if (parse_name_list(ld, lx, &r->db, true, "database", hp->path) < 0)
		return -1;
	if (parse_name_list(ld, lx, &r->user, false, "user", hp->path) < 0)
		return -1;
	if (r->type != R_LOCAL && parse_address(ld, lx, &r->addr) < 0)
		return -1;
	if (parse_method(ld, lx, r->type, &r->method) < 0)
		return -1;
	if (r->method == HBA_LDAP) {
		char why[WHY_LEN];
		const char *bad = parse_ldap_options(r, lx->p, lx->end, why, sizeof(why));

		if (!bad)
			bad = check_ldap(r, why, sizeof(why));
		if (bad)
			r->unusable = xstrdup(bad);
	} else {
		lex_next(lx);
		if (parse_options(ld, lx, r) < 0)
			return -1;
	}
	if (check_options(ld, r) < 0)
		return -1;
	if (r->method == HBA_GSS)
		r->unusable = xstrdup("GSSAPI authentication is not supported by pgcrew");
	else if (r->method == HBA_PEER && r->type != R_LOCAL)
		r->unusable = xstrdup("peer authentication is only available on local connections");
	if (r->type == R_HOSTGSSENC || r->type == R_HOSTNOGSSENC)
		*note = "hostgssenc and hostnogssenc lines never match: pgcrew has no GSSAPI encryption";
	return 1;
}

static int hba_line(void *arg, const char *line, size_t len, int lineno)
{
	struct hba_parse *hp = arg;
	struct hba *hba = hp->hba;
	struct lexer lx = { 0 };
	struct hba_rule r = { .line = lineno };
	const char *note = NULL;
	int rc;

	lex_init(&lx, line, len);
	hp->ld.why[0] = '\0';
	hp->ld.located = false;
	rc = parse_rule(hp, &lx, &r, &note);
	lex_free(&lx);
	if (rc <= 0) {
		if (rc < 0)
			problem_add(&hba->pr, "%s line %d: %s (line ignored)", hp->path, lineno, hp->ld.why);
		rule_free(&r);
		return 0;
	}
	if (r.unusable)
		problem_add(&hba->pr, "%s line %d: %s; logins matching this line are rejected",
			    hp->path, lineno, r.unusable);
	if (note)
		problem_add(&hba->pr, "%s line %d: %s", hp->path, lineno, note);
	if (hba->n == hba->cap) {
		hba->cap = hba->cap ? hba->cap * 2 : 16;
		hba->rules = xrealloc_array(hba->rules, hba->cap, sizeof(*hba->rules));
	}
	hba->rules[hba->n++] = r;
	return 0;
}

int hba_load(const char *path, const struct hba_ident *ident, struct hba **out, char *err, size_t errlen)
{
	struct hba *hba = xcalloc(1, sizeof(*hba));
	struct hba_parse hp = { .ld = { .ident = ident }, .hba = hba, .path = path };

	*out = NULL;
	if (for_each_line(path, hba_line, &hp, false, "HBA file ", err, errlen) < 0) {
		hba_free(hba);
		return -1;
	}
	problems_finish(&hba->pr);
	copy_first_problem(&hba->pr, err, errlen);
	*out = hba;
	return 0;
}

void hba_free(struct hba *hba)
{
	if (!hba)
		return;
	for (size_t i = 0; i < hba->n; i++)
		rule_free(&hba->rules[i]);
	free(hba->rules);
	problems_free(&hba->pr);
	free(hba);
}

size_t hba_problem_count(const struct hba *hba)
{
	return hba ? hba->pr.n : 0;
}

const char *hba_problem(const struct hba *hba, size_t i)
{
	return hba && i < hba->pr.n ? hba->pr.v[i] : NULL;
}

size_t hba_rule_count(const struct hba *hba)
{
	return hba ? hba->n : 0;
}

/* ---- matching ---- */

static bool addr_match(const struct haddr *ha, const struct sockaddr *sa)
{
	const uint8_t *b;
	size_t n;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;

	if (ha->all)
		return true;
	if (!sa || sa->sa_family != ha->family)
		return false;
	if (ha->family == AF_INET) {
		memcpy(&sin, sa, sizeof(sin));
		b = (const uint8_t *)&sin.sin_addr;
		n = 4;
	} else {
		memcpy(&sin6, sa, sizeof(sin6));
		b = sin6.sin6_addr.s6_addr;
		n = 16;
	}
	for (size_t i = 0; i < n; i++) {
		if ((b[i] & ha->m[i]) != ha->a[i])
			return false;
	}
	return true;
}

static bool type_match(enum rule_type t, const struct hba_conn *c)
{
	if (c->kind == HBA_LOCAL)
		return t == R_LOCAL;
	switch (t) {
	case R_HOST:
		return true;
	case R_HOSTSSL:
		return c->tls;
	case R_HOSTNOSSL:
		return !c->tls;
	default:
		return false;           /* local; gssenc lines never match */
	}
}

const struct hba_rule *hba_match(const struct hba *hba, const struct hba_conn *conn)
{
	const char *db, *user;

	if (!hba || !conn)
		return NULL;
	db = conn->database ? conn->database : "";
	user = conn->user ? conn->user : "";
	for (size_t i = 0; i < hba->n; i++) {
		const struct hba_rule *r = &hba->rules[i];

		if (!type_match(r->type, conn))
			continue;
		if (conn->kind == HBA_HOST && !addr_match(&r->addr, conn->addr))
			continue;
		if (conn->replication) {
			/* Only the replication keyword matches a physical
			 * replication connection; "all" does not. */
			if (!(r->db.flags & NAME_REPLICATION))
				continue;
		} else if (!(r->db.flags & NAME_ALL) &&
			   !((r->db.flags & NAME_SAMEUSER) && strcmp(db, user) == 0) &&
			   !names_has(&r->db, db)) {
			continue;
		}
		if (!(r->user.flags & NAME_ALL) && !names_has(&r->user, user))
			continue;
		return r;
	}
	return NULL;
}

enum hba_method hba_rule_method(const struct hba_rule *rule)
{
	return rule->method;
}

int hba_rule_line(const struct hba_rule *rule)
{
	return rule->line;
}

const char *hba_rule_unusable(const struct hba_rule *rule)
{
	return rule->unusable;
}

const char *hba_rule_option(const struct hba_rule *rule, const char *name)
{
	for (size_t i = rule->n_opts; i-- > 0;) {
		if (strcmp(rule->opts[i].name, name) == 0)
			return rule->opts[i].value;
	}
	return NULL;
}

const char *hba_rule_map(const struct hba_rule *rule)
{
	return rule->method == HBA_LDAP ? NULL : hba_rule_option(rule, "map");
}

size_t hba_rule_option_count(const struct hba_rule *rule)
{
	return rule->n_opts;
}

void hba_rule_option_at(const struct hba_rule *rule, size_t i, const char **name, const char **value)
{
	*name = i < rule->n_opts ? rule->opts[i].name : NULL;
	*value = i < rule->n_opts ? rule->opts[i].value : NULL;
}

const char *hba_rule_options_raw(const struct hba_rule *rule)
{
	return rule->raw ? rule->raw : "";
}

/* ---- ident file ---- */

struct ident_entry {
	char *map, *sys, *db;           /* db NULL = all */
};

struct hba_ident {
	struct ident_entry *v;
	size_t n, cap;
	struct problems pr;
};

struct ident_parse {
	struct hba_ident *ident;
	const char *path;
	char why[WHY_LEN];
};

static int ident_fail(struct ident_parse *ip, const char *fmt, ...) PRINTF(2, 3);

static int ident_fail(struct ident_parse *ip, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ip->why, sizeof(ip->why), fmt, ap);
	va_end(ap);
	return -1;
}

/* One word of an ident line; lx is left on it. */
static int ident_word(struct ident_parse *ip, struct lexer *lx, const char *field)
{
	lex_next(lx);
	if (lx->kind == T_ERR)
		return ident_fail(ip, "%s", lx->err);
	if (lx->kind == T_EOL)
		return ident_fail(ip, "missing %s field", field);
	if (lx->kind == T_COMMA)
		return ident_fail(ip, "lists are not allowed in the ident file");
	return 0;
}

static int parse_ident_line(struct ident_parse *ip, struct lexer *lx, struct ident_entry *e)
{
	lex_next(lx);
	if (lx->kind == T_EOL)
		return 0;
	if (lx->kind == T_ERR)
		return ident_fail(ip, "%s", lx->err);
	if (lx->kind == T_COMMA)
		return ident_fail(ip, "lists are not allowed in the ident file");
	if (is_kw(lx, "include") || is_kw(lx, "include_if_exists") || is_kw(lx, "include_dir"))
		return ident_fail(ip, "%s directives are not supported", lx->text);
	e->map = xstrdup(lx->text);
	if (ident_word(ip, lx, "system user name") < 0)
		return -1;
	if (!lx->quoted && lx->text[0] == '/')
		return ident_fail(ip, "regular expressions (" QFMT ") are not supported", QARG(lx->text));
	e->sys = xstrdup(lx->text);
	if (ident_word(ip, lx, "database user name") < 0)
		return -1;
	if (!lx->quoted && lx->text[0] == '+')
		return ident_fail(ip, "group membership (" QFMT ") is not supported", QARG(lx->text));
	if (lx->quoted || strcmp(lx->text, "all") != 0)
		e->db = xstrdup(lx->text);
	lex_next(lx);
	if (lx->kind == T_ERR)
		return ident_fail(ip, "%s", lx->err);
	if (lx->kind != T_EOL)
		return ident_fail(ip, "unexpected text after the database user name");
	return 1;
}

static int ident_line(void *arg, const char *line, size_t len, int lineno)
{
	struct ident_parse *ip = arg;
	struct hba_ident *id = ip->ident;
	struct lexer lx = { 0 };
	struct ident_entry e = { 0 };
	int rc;

	lex_init(&lx, line, len);
	rc = parse_ident_line(ip, &lx, &e);
	lex_free(&lx);
	if (rc <= 0) {
		if (rc < 0)
			problem_add(&id->pr, "%s line %d: %s (line ignored)", ip->path, lineno, ip->why);
		free(e.map);
		free(e.sys);
		free(e.db);
		return 0;
	}
	if (id->n == id->cap) {
		id->cap = id->cap ? id->cap * 2 : 16;
		id->v = xrealloc_array(id->v, id->cap, sizeof(*id->v));
	}
	id->v[id->n++] = e;
	return 0;
}

int hba_ident_load(const char *path, struct hba_ident **out, char *err, size_t errlen)
{
	struct hba_ident *id = xcalloc(1, sizeof(*id));
	struct ident_parse ip = { .ident = id, .path = path };

	*out = NULL;
	if (for_each_line(path, ident_line, &ip, false, "ident file ", err, errlen) < 0) {
		hba_ident_free(id);
		return -1;
	}
	problems_finish(&id->pr);
	copy_first_problem(&id->pr, err, errlen);
	*out = id;
	return 0;
}

void hba_ident_free(struct hba_ident *ident)
{
	if (!ident)
		return;
	for (size_t i = 0; i < ident->n; i++) {
		free(ident->v[i].map);
		free(ident->v[i].sys);
		free(ident->v[i].db);
	}
	free(ident->v);
	problems_free(&ident->pr);
	free(ident);
}

size_t hba_ident_problem_count(const struct hba_ident *ident)
{
	return ident ? ident->pr.n : 0;
}

const char *hba_ident_problem(const struct hba_ident *ident, size_t i)
{
	return ident && i < ident->pr.n ? ident->pr.v[i] : NULL;
}

static bool ident_map_known(const struct hba_ident *ident, const char *map)
{
	for (size_t i = 0; ident && i < ident->n; i++) {
		if (strcmp(ident->v[i].map, map) == 0)
			return true;
	}
	return false;
}

bool hba_ident_has_map(const struct hba_ident *ident, const char *map)
{
	return map && ident_map_known(ident, map);
}

bool hba_ident_match(const struct hba_ident *ident, const char *map,
		     const char *system_user, const char *db_user)
{
	if (!ident || !map || !system_user || !db_user)
		return false;
	for (size_t i = 0; i < ident->n; i++) {
		const struct ident_entry *e = &ident->v[i];

		if (strcmp(e->map, map) == 0 && strcmp(e->sys, system_user) == 0 &&
		    (!e->db || strcmp(e->db, db_user) == 0))
			return true;
	}
	return false;
}

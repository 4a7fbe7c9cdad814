/* pgcrew — a small SQL lexer that tells whether a simple Query is exactly one
 * PREPARE, EXECUTE or DEALLOCATE statement (sql_prepared_statements). It
 * follows PostgreSQL's lexical rules where they decide where a statement
 * ends: nested comments, quoted identifiers, string literals ('' and E''),
 * dollar quoting. Anything it does not fully understand is "not ours".
 *
 * INTERFACE ROUTINES
 *	sqlprep_maybe	- cheap test of a query's first word
 *	sqlprep_scan	- recognise one statement and locate its name and parts
 */
#include "proto/sqlprep.h"

#include <string.h>
#include <strings.h>

struct lex {
	const char *s;
	size_t n;
	size_t i;
};

static bool ident_start(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool ident_cont(unsigned char c)
{
	return ident_start(c) || (c >= '0' && c <= '9') || c == '$';
}

static bool space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool at(const struct lex *l, size_t k, char c)
{
	return l->i + k < l->n && l->s[l->i + k] == c;
}

/* Block comments nest, as in PostgreSQL. False: unterminated. */
static bool skip_block_comment(struct lex *l)
{
	int depth = 0;
	do {
		if (at(l, 0, '/') && at(l, 1, '*')) {
			depth++;
			l->i += 2;
		} else if (at(l, 0, '*') && at(l, 1, '/')) {
			depth--;
			l->i += 2;
		} else if (l->i < l->n) {
			l->i++;
		} else {
			return false;
		}
	} while (depth > 0);
	return true;
}

/* Whitespace and comments. False: an unterminated comment. */
static bool skip_space(struct lex *l)
{
	for (;;) {
		if (l->i < l->n && space((unsigned char)l->s[l->i])) {
			l->i++;
		} else if (at(l, 0, '-') && at(l, 1, '-')) {
			while (l->i < l->n && l->s[l->i] != '\n')
				l->i++;
		} else if (at(l, 0, '/') && at(l, 1, '*')) {
			if (!skip_block_comment(l))
				return false;
		} else {
			return true;
		}
	}
}

/* An unquoted word at l->i: its length (0 when none), consumed. */
static size_t word(struct lex *l)
{
	size_t start = l->i;
	if (l->i >= l->n || !ident_start((unsigned char)l->s[l->i]))
		return 0;
	while (l->i < l->n && ident_cont((unsigned char)l->s[l->i]))
		l->i++;
	return l->i - start;
}

static bool is_kw(const struct lex *l, size_t start, size_t len, const char *kw)
{
	return len == strlen(kw) && strncasecmp(l->s + start, kw, len) == 0;
}

/* Cut to SQLPREP_NAME_MAX bytes without splitting a UTF-8 character (a
 * character is at most 4 bytes: in text that is not UTF-8, which the
 * server refuses anyway, cut at the limit). */
static size_t clip_name(const char *name, size_t len)
{
	if (len <= SQLPREP_NAME_MAX)
		return len;
	for (len = SQLPREP_NAME_MAX; len > SQLPREP_NAME_MAX - 3; len--)
		if (((unsigned char)name[len] & 0xC0) != 0x80)
			return len;
	return ((unsigned char)name[len] & 0xC0) != 0x80 ? len : SQLPREP_NAME_MAX;
}

static void put_name_byte(struct sqlprep *out, size_t *k, char c)
{
	if (*k < sizeof(out->name))      /* one byte more, for clip_name */
		out->name[*k] = c;
	(*k)++;
}

/* "..." with "" for a quote. False: unterminated, empty, or with a NUL
 * (no query text has one: the caller's text may). */
static bool quoted_name(struct lex *l, struct sqlprep *out)
{
	size_t k = 0;
	l->i++;
	for (;;) {
		if (l->i >= l->n || l->s[l->i] == '\0')
			return false;
		if (l->s[l->i] == '"') {
			if (!at(l, 1, '"'))
				break;
			l->i++;
		}
		put_name_byte(out, &k, l->s[l->i++]);
	}
	l->i++;
	if (k == 0)
		return false;
	out->name_len = clip_name(out->name, k < sizeof(out->name) ? k : sizeof(out->name));
	out->name[out->name_len] = '\0';
	return true;
}

/* A statement name: quoted, or an unquoted word lower-cased. *plain tells
 * which (an unquoted ALL is a keyword, not a name). */
static bool name(struct lex *l, struct sqlprep *out, bool *plain)
{
	*plain = !at(l, 0, '"');
	if (!*plain)
		return quoted_name(l, out);
	size_t start = l->i, k = 0;
	if (word(l) == 0)
		return false;
	for (size_t j = start; j < l->i; j++) {
		char c = l->s[j];
		put_name_byte(out, &k, c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
	}
	out->name_len = clip_name(out->name, k < sizeof(out->name) ? k : sizeof(out->name));
	out->name[out->name_len] = '\0';
	return true;
}

/* A literal quoted by q ('' or "" doubles it); backslash escapes in E''. */
static bool quoted(struct lex *l, char q, bool backslash)
{
	l->i++;
	while (l->i < l->n) {
		char c = l->s[l->i++];
		if (backslash && c == '\\') {
			if (l->i >= l->n)
				return false;
			l->i++;
		} else if (c == q) {
			if (!at(l, 0, q))
				return true;
			l->i++;
		}
	}
	return false;
}

/* Length of a dollar-quote delimiter ($tag$) at l->i, 0 when none. */
static size_t dollar_tag(const struct lex *l)
{
	size_t j = l->i + 1;
	if (j < l->n && (unsigned char)l->s[j] >= '0' && (unsigned char)l->s[j] <= '9')
		return 0;
	while (j < l->n && l->s[j] != '$') {
		unsigned char c = (unsigned char)l->s[j];
		if (!ident_start(c) && !(c >= '0' && c <= '9'))
			return 0;
		j++;
	}
	return j < l->n ? j + 1 - l->i : 0;
}

static bool dollar_quoted(struct lex *l, size_t tag)
{
	const char *delim = l->s + l->i;
	l->i += tag;
	for (; l->i + tag <= l->n; l->i++)
		if (memcmp(l->s + l->i, delim, tag) == 0) {
			l->i += tag;
			return true;
		}
	return false;
}

/* One token that is not a comment, at l->i < l->n. False: unterminated. */
static bool token(struct lex *l)
{
	unsigned char c = (unsigned char)l->s[l->i];
	if (c == '\'')
		return quoted(l, '\'', false);
	if (c == '"')
		return quoted(l, '"', false);
	if (c == '$') {
		size_t tag = dollar_tag(l);
		if (tag)
			return dollar_quoted(l, tag);
		l->i++;
		return true;
	}
	if (ident_start(c)) {
		if (word(l) == 1 && (c == 'e' || c == 'E') && at(l, 0, '\''))
			return quoted(l, '\'', true);
		return true;
	}
	if (c >= '0' && c <= '9') {
		while (l->i < l->n && (ident_cont((unsigned char)l->s[l->i]) || l->s[l->i] == '.'))
			l->i++;
		return true;
	}
	l->i++;
	return true;
}

/* From l->i: only whitespace, comments and semicolons up to the end. */
static bool only_trailer(struct lex *l)
{
	for (;;) {
		if (!skip_space(l))
			return false;
		if (l->i >= l->n)
			return true;
		if (l->s[l->i] != ';')
			return false;
		l->i++;
	}
}

/* A parenthesised group at l->i ('('), nested parens balanced, quotes and
 * comments skipped. l->i ends after its ')'. */
static bool paren_group(struct lex *l)
{
	int depth = 0;
	for (;;) {
		if (!skip_space(l) || l->i >= l->n)
			return false;
		char c = l->s[l->i];
		if (c == ';')
			return false;
		if (!token(l))
			return false;
		if (c == '(')
			depth++;
		else if (c == ')' && --depth == 0)
			return true;
	}
}

/* The statement ends here: *end = l->i, then only a trailer may follow. */
static bool statement_end(struct lex *l, struct sqlprep *out)
{
	size_t end = l->i;
	if (!only_trailer(l))
		return false;
	out->end = end;
	return true;
}

/* PREPARE's body after AS: at least one token, up to a top-level ';'. */
static bool body(struct lex *l, struct sqlprep *out)
{
	size_t end = 0;
	for (;;) {
		if (!skip_space(l))
			return false;
		if (l->i >= l->n || l->s[l->i] == ';')
			break;
		if (!token(l))
			return false;
		end = l->i;
	}
	if (end == 0 || !only_trailer(l))
		return false;
	out->end = end;
	return true;
}

/* PREPARE's and EXECUTE's name (an unquoted ALL is a syntax error there),
 * then l->i and out->rest at the next token. */
static bool stmt_name(struct lex *l, struct sqlprep *out)
{
	bool plain;
	if (!skip_space(l) || !name(l, out, &plain))
		return false;
	if (plain && strcmp(out->name, "all") == 0)
		return false;
	out->name_end = l->i;
	if (!skip_space(l))
		return false;
	out->rest = l->i;
	return true;
}

static enum sqlprep_kind prepare(struct lex *l, struct sqlprep *out)
{
	if (!stmt_name(l, out))
		return SQLPREP_NONE;
	if (at(l, 0, '(') && (!paren_group(l) || !skip_space(l)))
		return SQLPREP_NONE;
	size_t as = l->i;
	if (!is_kw(l, as, word(l), "as") || !body(l, out))
		return SQLPREP_NONE;
	return SQLPREP_PREPARE;
}

static enum sqlprep_kind execute(struct lex *l, struct sqlprep *out)
{
	if (!stmt_name(l, out))
		return SQLPREP_NONE;
	bool args = at(l, 0, '(');
	if (args && !paren_group(l))
		return SQLPREP_NONE;
	if (!statement_end(l, out))
		return SQLPREP_NONE;
	if (!args)
		out->end = out->rest = out->name_end;
	return SQLPREP_EXECUTE;
}

/* DEALLOCATE [PREPARE] { name | ALL }; "DEALLOCATE prepare" names "prepare". */
static enum sqlprep_kind deallocate(struct lex *l, struct sqlprep *out)
{
	bool plain;
	if (!skip_space(l))
		return SQLPREP_NONE;
	size_t start = l->i;
	if (is_kw(l, start, word(l), "prepare")) {
		if (!skip_space(l))
			return SQLPREP_NONE;
		if (l->i >= l->n || l->s[l->i] == ';')
			l->i = start;        /* the name is "prepare" */
	} else {
		l->i = start;
	}
	if (!name(l, out, &plain))
		return SQLPREP_NONE;
	out->name_end = out->rest = l->i;
	if (!statement_end(l, out))
		return SQLPREP_NONE;
	if (plain && strcmp(out->name, "all") == 0) {
		out->name[0] = '\0';
		out->name_len = 0;
		return SQLPREP_DEALLOCATE_ALL;
	}
	return SQLPREP_DEALLOCATE;
}

static const char *const keywords[] = { "prepare", "execute", "deallocate" };

bool sqlprep_maybe(const char *prefix, size_t len)
{
	struct lex l = { prefix, len, 0 };
	if (!skip_space(&l) || l.i >= l.n)
		return true;       /* a comment or blanks still open: cannot tell */
	size_t start = l.i, n = word(&l);
	if (n == 0)
		return false;
	if (l.i >= l.n)
		return true;       /* the word may go on */
	for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
		if (is_kw(&l, start, n, keywords[k]))
			return true;
	return false;
}

enum sqlprep_kind sqlprep_scan(const char *text, size_t len, struct sqlprep *out)
{
	struct lex l = { text, len, 0 };
	enum sqlprep_kind kind = SQLPREP_NONE;

	memset(out, 0, sizeof(*out));
	if (!skip_space(&l))
		return SQLPREP_NONE;
	size_t start = l.i, n = word(&l);
	if (is_kw(&l, start, n, "prepare"))
		kind = prepare(&l, out);
	else if (is_kw(&l, start, n, "execute"))
		kind = execute(&l, out);
	else if (is_kw(&l, start, n, "deallocate"))
		kind = deallocate(&l, out);
	if (kind == SQLPREP_NONE)
		memset(out, 0, sizeof(*out));
	out->kind = kind;
	return kind;
}

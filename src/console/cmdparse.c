/* pgcrew — the console's grammar (see cmdparse.h). Each form is matched
 * as the regular expression would be: the words cannot overlap their
 * separators, so one left-to-right scan decides, except for an unquoted
 * SET key, whose end is searched for from the longest down. */
#include "cmdparse.h"

#include <string.h>
#include <strings.h>

static bool is_ws(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* [0-9a-z_] with REG_ICASE: ASCII only. */
static bool is_word_char(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       ch == '_';
}

static const char *skip_ws(const char *p)
{
	while (is_ws(*p))
		p++;
	return p;
}

/* A quoted token at p (q"..."q, a doubled q inside is one q): its end, or
 * NULL. Taking a doubled q as an escape is never wrong: a token closed
 * there would be followed by q, which no form allows after a word. */
static const char *scan_quoted(const char *p, char q)
{
	for (p++; *p; p++) {
		if (*p != q)
			continue;
		if (p[1] != q)
			return p + 1;
		p++;
	}
	return NULL;
}

/* A WORD at p: its end, or NULL. */
static const char *scan_word(const char *p)
{
	const char *s = p;
	if (*p == '"')
		return scan_quoted(p, '"');
	while (is_word_char(*p))
		p++;
	return p > s ? p : NULL;
}

/* WS* (; WS*)? and the end of the query. */
static bool at_end(const char *p)
{
	p = skip_ws(p);
	if (*p == ';')
		p = skip_ws(p + 1);
	return *p == 0;
}

/* PgBouncer's copy_arg: false when the token as typed does not fit;
 * a token that opens with q is unquoted. */
static bool copy_token(const char *s, const char *e, char *dst, size_t max, char q)
{
	size_t len = (size_t)(e - s), n = 0;
	if (len >= max)
		return false;
	if (len < 2 || *s != q) {
		memcpy(dst, s, len);
		dst[len] = 0;
		return true;
	}
	for (size_t i = 1; i < len - 1; i++) {
		if (s[i] == q && s[i + 1] == q)
			i++;
		dst[n++] = s[i];
	}
	dst[n] = 0;
	return true;
}

/* The first form: WORD [WORD]. false: it does not match. */
static bool match_command(const char *q, const char **cmd, const char **cmd_end,
			  const char **arg, const char **arg_end)
{
	const char *p = skip_ws(q);
	const char *e = scan_word(p);
	if (!e)
		return false;
	*cmd = p;
	*cmd_end = e;
	*arg = *arg_end = NULL;
	p = skip_ws(e);
	if (p > e && (e = scan_word(p)) != NULL) {
		*arg = p;
		*arg_end = e;
		p = e;
	}
	return at_end(p);
}

/* What follows a SET key: WS* (=|to) WS* VALUE WS* (; WS*)?, VALUE a
 * STRING or a WORD. false: no match. */
static bool match_set_rest(const char *p, bool string, const char **val, const char **val_end)
{
	p = skip_ws(p);
	if (*p == '=')
		p++;
	else if (strncasecmp(p, "to", 2) == 0)
		p += 2;
	else
		return false;
	p = skip_ws(p);
	const char *e = string ? (*p == '\'' ? scan_quoted(p, '\'') : NULL) : scan_word(p);
	if (!e || !at_end(e))
		return false;
	*val = p;
	*val_end = e;
	return true;
}

/* A SET form: the key's end (the longest unquoted key that lets the rest
 * match) and the value's span. */
static bool match_set(const char *q, bool string, const char **key, const char **key_end,
		      const char **val, const char **val_end)
{
	const char *p = skip_ws(q);
	if (strncasecmp(p, "set", 3) != 0 || !is_ws(p[3]))
		return false;
	p = skip_ws(p + 3);
	const char *e = scan_word(p);
	if (!e)
		return false;
	*key = p;
	if (*p == '"') {
		*key_end = e;
		return match_set_rest(e, string, val, val_end);
	}
	for (; e > p; e--) {
		if (match_set_rest(e, string, val, val_end)) {
			*key_end = e;
			return true;
		}
	}
	return false;
}

enum cmdparse_kind cmdparse(const char *query, struct cmdparse *out)
{
	const char *s, *e, *as, *ae;

	memset(out, 0, sizeof(*out));
	if (match_command(query, &s, &e, &as, &ae)) {
		if (!copy_token(s, e, out->cmd, sizeof(out->cmd), '"'))
			return CMDPARSE_BAD_ARGS;
		if (as && !copy_token(as, ae, out->arg, sizeof(out->arg), '"'))
			return CMDPARSE_BAD_ARGS;
		return CMDPARSE_COMMAND;
	}
	for (int string = 1; string >= 0; string--) {
		if (!match_set(query, string, &s, &e, &as, &ae))
			continue;
		if (!copy_token(s, e, out->arg, sizeof(out->arg), '"') || !out->arg[0] ||
		    !copy_token(as, ae, out->val, sizeof(out->val), string ? '\'' : '"'))
			return CMDPARSE_BAD_ARGS;
		return CMDPARSE_SET;
	}
	return CMDPARSE_SYNTAX;
}

/* pgcrew — ini grammar of pgbouncer.ini: sections, key = value, comment
 * lines, double-quoted values ("" is a literal quote) and %include with a
 * depth limit. Line continuation is not supported, as in PgBouncer. */
#include "config/ini.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ini_state {
	ini_handler_fn cb;
	void *arg;
	struct config_error *err;
	char *section;              /* current section, NULL before the first header */
};

/* Where we are, for messages and the callback. */
struct ini_pos {
	const char *file;
	int line;
	int depth;                  /* 0 for the main file */
};

static int parse_file(struct ini_state *st, const char *path, const struct ini_pos *from);

static char *skip_space(char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

static void trim_right(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
}

/* p points at an opening '"'. Unquote in place ("" -> ") and return the
 * start of the text; *rest is set past the closing quote. NULL when the
 * quote is not closed on this line. */
static char *unquote(char *p, char **rest)
{
	char *src = p + 1, *dst = p + 1, *start = p + 1;

	for (;;) {
		if (*src == '\0')
			return NULL;
		if (*src == '"') {
			if (src[1] != '"')
				break;
			src++;
		}
		*dst++ = *src++;
	}
	*dst = '\0';
	*rest = src + 1;
	return start;
}

static int syntax_error(struct ini_state *st, const struct ini_pos *pos, const char *what, const char *key)
{
	if (key)
		config_error_set(st->err, "%s:%d: syntax error: %s for key '%s'", pos->file, pos->line, what, key);
	else
		config_error_set(st->err, "%s:%d: syntax error: %s", pos->file, pos->line, what);
	return -1;
}

static int parse_section(struct ini_state *st, const struct ini_pos *pos, char *p)
{
	char *end = strchr(p, ']');
	char *name;

	if (!end)
		return syntax_error(st, pos, "unterminated section header", NULL);
	if (*skip_space(end + 1) != '\0')
		return syntax_error(st, pos, "unexpected text after section header", NULL);
	*end = '\0';
	name = skip_space(p + 1);
	trim_right(name);
	if (*name == '\0')
		return syntax_error(st, pos, "empty section name", NULL);
	free(st->section);
	st->section = strdup(name);
	if (!st->section)
		fatal("out of memory");
	return st->cb(st->arg, pos->file, pos->line, st->section, NULL, NULL, st->err);
}

/* Relative include paths are relative to the including file's directory. */
static char *include_path(const char *from, const char *name)
{
	const char *slash = strrchr(from, '/');
	size_t dirlen = slash ? (size_t)(slash - from) : 0;
	size_t len = dirlen + 1 + strlen(name) + 1;
	char *out = malloc(len);

	if (!out)
		fatal("out of memory");
	if (name[0] == '/' || !slash)
		snprintf(out, len, "%s", name);
	else
		snprintf(out, len, "%.*s/%s", (int)dirlen, from, name);
	return out;
}

static int parse_include(struct ini_state *st, const struct ini_pos *pos, char *p)
{
	char *name = skip_space(p), *rest, *path;
	int rc;

	if (*name == '"') {
		name = unquote(name, &rest);
		if (!name || *skip_space(rest) != '\0')
			return syntax_error(st, pos, "bad quoting in %include", NULL);
	}
	trim_right(name);
	if (*name == '\0')
		return syntax_error(st, pos, "%include needs a file name", NULL);
	if (pos->depth >= INI_MAX_INCLUDE_DEPTH) {
		config_error_set(st->err, "%s:%d: %%include nested too deeply (limit %d): '%s'",
				 pos->file, pos->line, INI_MAX_INCLUDE_DEPTH, name);
		return -1;
	}
	path = include_path(pos->file, name);
	rc = parse_file(st, path, pos);
	free(path);
	return rc;
}

/* The key: a double-quoted string or a run up to blank or '='. */
static char *parse_key(char **pp)
{
	char *p = *pp, *key = p;

	if (*p == '"') {
		key = unquote(p, &p);
		if (!key)
			return NULL;
	} else {
		while (*p && *p != '=' && !isspace((unsigned char)*p))
			p++;
	}
	*pp = p;
	return key;
}

static int parse_pair(struct ini_state *st, const struct ini_pos *pos, char *p)
{
	char *key, *value, *rest, *after;
	bool has_eq;

	key = parse_key(&p);
	if (!key)
		return syntax_error(st, pos, "unterminated quoted key", NULL);
	after = skip_space(p);
	has_eq = *after == '=';
	*p = '\0';              /* terminate an unquoted key (may overwrite the '=') */
	if (*key == '\0')
		return syntax_error(st, pos, has_eq ? "missing key before '='" : "missing key", NULL);
	if (!has_eq)
		return syntax_error(st, pos, "missing '='", key);
	value = skip_space(after + 1);
	if (*value == '"') {
		value = unquote(value, &rest);
		if (!value)
			return syntax_error(st, pos, "unterminated quoted value", key);
		if (*skip_space(rest) != '\0')
			return syntax_error(st, pos, "unexpected text after quoted value", key);
	} else {
		trim_right(value);
	}
	if (!st->section) {
		config_error_set(st->err, "%s:%d: key '%s' outside of any section", pos->file, pos->line, key);
		return -1;
	}
	return st->cb(st->arg, pos->file, pos->line, st->section, key, value, st->err);
}

static int parse_line(struct ini_state *st, const struct ini_pos *pos, char *line)
{
	char *p = skip_space(line);

	if (*p == '\0' || *p == ';' || *p == '#')
		return 0;
	if (*p == '[')
		return parse_section(st, pos, p);
	if (strncmp(p, "%include", 8) == 0 && (p[8] == '\0' || isspace((unsigned char)p[8])))
		return parse_include(st, pos, p + 8);
	if (*p == '%')
		return syntax_error(st, pos, "unknown directive", NULL);
	return parse_pair(st, pos, p);
}

/* from is the %include line that names path, or NULL for the main file. */
static int parse_file(struct ini_state *st, const char *path, const struct ini_pos *from)
{
	struct ini_pos pos = { .file = path, .depth = from ? from->depth + 1 : 0 };
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		if (from)
			config_error_set(st->err, "%s:%d: %%include: could not open '%s': %s",
					 from->file, from->line, path, strerror(errno));
		else
			config_error_set(st->err, "could not open configuration file '%s': %s",
					 path, strerror(errno));
		return -1;
	}
	while (rc == 0 && getline(&line, &cap, f) >= 0) {
		pos.line++;
		rc = parse_line(st, &pos, line);
	}
	if (rc == 0 && ferror(f)) {
		config_error_set(st->err, "%s:%d: read error: %s", path, pos.line, strerror(errno));
		rc = -1;
	}
	free(line);
	fclose(f);
	return rc;
}

int ini_parse_file(const char *path, ini_handler_fn cb, void *arg, struct config_error *err)
{
	struct ini_state st = { .cb = cb, .arg = arg, .err = err };
	int rc = parse_file(&st, path, NULL);

	free(st.section);
	return rc;
}

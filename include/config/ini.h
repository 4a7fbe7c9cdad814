/* pgcrew — the pgbouncer.ini grammar: [section] headers, key = value lines,
 * ';'/'#' comment lines, double-quoted values and keys, %include. The parser
 * knows no keys; it hands each line to a callback with its file and line. */
#ifndef PGCREW_CONFIG_INI_H
#define PGCREW_CONFIG_INI_H

#include "../config.h"

#define INI_MAX_INCLUDE_DEPTH 10

/* Called for every "key = value" line (key and value unquoted and trimmed)
 * and, with key == NULL and value == NULL, for every section header.
 * section is the current section (it carries across %include, as if the
 * included text were pasted in). Return 0 to go on, or -1 after filling err
 * to stop parsing; ini_parse_file() then returns -1 with that message. */
typedef int (*ini_handler_fn)(void *arg, const char *file, int line, const char *section,
			      const char *key, const char *value, struct config_error *err);

/* 0 on success; -1 with err set to "<file>:<line>: <what>" on a syntax
 * error, an unreadable file, %include nesting deeper than
 * INI_MAX_INCLUDE_DEPTH, or a callback failure. */
int ini_parse_file(const char *path, ini_handler_fn cb, void *arg, struct config_error *err) MUSTCHECK;

#endif

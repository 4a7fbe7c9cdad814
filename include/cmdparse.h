/* pgcrew — the console's grammar: PgBouncer 1.25's three regular
 * expressions (admin.c cmd_normal_rx, cmd_set_str_rx, cmd_set_word_rx) and
 * its fixed buffers, as a hand-written parser that takes the same queries,
 * reads the same words out of them and refuses the same ones. */
#ifndef PGCREW_CMDPARSE_H
#define PGCREW_CMDPARSE_H

#include "types.h"

/* PgBouncer's buffers (admin_parse_query): a word as typed, quotes
 * included, must be shorter than its buffer, or the query gets "bad
 * arguments"; nothing is ever cut short. */
#define CMDPARSE_CMD_MAX 16
#define CMDPARSE_ARG_MAX 64
#define CMDPARSE_VAL_MAX 256

enum cmdparse_kind {
	CMDPARSE_COMMAND,          /* WORD [WORD]: cmd and arg */
	CMDPARSE_SET,              /* SET key =|TO value: arg is the key, val the value */
	CMDPARSE_SYNTAX,           /* no form matches: "invalid command '...', use SHOW HELP;" */
	CMDPARSE_BAD_ARGS,         /* a word too long for its buffer, or SET "": "bad arguments" */
};

struct cmdparse {
	char cmd[CMDPARSE_CMD_MAX];        /* the command word, unquoted */
	char arg[CMDPARSE_ARG_MAX];        /* its argument ("" without one); SET: the key */
	char val[CMDPARSE_VAL_MAX];        /* SET: the value, unquoted */
};

/*
 * Parse one console query. The forms, tried in PgBouncer's order (WS is
 * blank, tab, CR or LF; case does not matter):
 *   WS* WORD (WS+ WORD)? WS* (; WS*)?
 *   WS* set WS+ WORD WS* (=|to) WS* STRING WS* (; WS*)?
 *   WS* set WS+ WORD WS* (=|to) WS* WORD WS* (; WS*)?
 * where WORD is "..." ("" inside is a quote) or [0-9a-z_]+, and STRING is
 * '...' ('' inside is a quote). An unquoted SET key is the longest that
 * lets the rest match, as with POSIX regular expressions: "SET
 * pool_sizeto 5" sets pool_size. Words are unquoted in out; on SYNTAX and
 * BAD_ARGS out holds nothing of use.
 */
enum cmdparse_kind cmdparse(const char *query, struct cmdparse *out);

#endif

/* pgcrew — the settings table (STYLE rule 21): one row per [pgbouncer] key
 * with its type, place in struct config, default, bounds and flags. The
 * loader, SHOW CONFIG, SET, the reload check and doc/config.md all read it. */
#ifndef PGCREW_CONFIG_SETTINGS_H
#define PGCREW_CONFIG_SETTINGS_H

#include "../config.h"

enum setting_type {
	SETTING_BOOL,               /* bool */
	SETTING_INT,                /* int, within [min, max] */
	SETTING_SIZE,               /* int64_t bytes, within [min, max] */
	SETTING_TIME,               /* usec_t, within [min, max] */
	SETTING_STRING,             /* char *, never NULL */
	SETTING_ENUM,               /* an enum stored as int */
	SETTING_TYPE_COUNT
};

enum setting_flag {
	CF_NO_RELOAD = 1 << 0,      /* needs a restart: RELOAD refuses a change, SET refuses it */
	CF_EXTENSION = 1 << 1,      /* pgcrew's own key, PgBouncer lacks it */
	CF_AUTO = 1 << 2,           /* SETTING_INT that takes "auto", stored as 0 */
	CF_ZERO_OFF = 1 << 3,       /* SETTING_TIME: 0 (off) is valid below min */
};

struct setting {
	const char *name;           /* the key, and the struct config field */
	enum setting_type type;
	size_t offset;              /* into struct config */
	const char *def;            /* default, as SHOW CONFIG prints it */
	int64_t min, max;           /* ints and sizes; times in usec */
	unsigned flags;             /* enum setting_flag */
	const char *(*enum_name)(int);   /* SETTING_ENUM: value -> name */
	int enum_count;
	const char *desc;           /* one line for doc/config.md */
	/* SETTING_STRING: -1 with the reason in msg when value is not valid */
	int (*check)(const char *value, char *msg, size_t msglen);
};

const char *setting_type_name(enum setting_type t);    /* "bool", "int", ... */

/* Every row set to its default (strings strdup'ed). */
void settings_init_defaults(struct config *cfg);
/* Parse value for s and store it in cfg. -1 with the reason (no key, no
 * file) in msg when the value is not valid; cfg is then unchanged. */
int setting_parse(struct config *cfg, const struct setting *s, const char *value,
		  char *msg, size_t msglen) MUSTCHECK;
/* Free the string settings of cfg. */
void settings_free_values(struct config *cfg);

#endif

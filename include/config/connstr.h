/* pgcrew — connection strings: the values of [databases], [users] and
 * [peers] entries, space-separated key=value pairs quoted as in libpq
 * ('...' with '' and \' escapes). Unknown keys and bad values are errors. */
#ifndef PGCREW_CONFIG_CONNSTR_H
#define PGCREW_CONFIG_CONNSTR_H

#include "../config.h"

struct connstr_pair {
	char *key;
	char *value;                /* unquoted */
};

struct connstr {                /* a tokenized connection string */
	struct connstr_pair *pairs;
	int n;
};

/* Split text into pairs. 0, or -1 with a message (no file/line) in msg. */
int connstr_parse(const char *text, struct connstr *out, char *msg, size_t msglen) MUSTCHECK;
void connstr_clear(struct connstr *cs);

/* Build one entry from its key (name) and value (text). file and line are
 * where it was written and prefix every error; out is overwritten, and
 * owns nothing when -1 is returned. */
int connstr_parse_db(const char *name, const char *text, const char *file, int line,
		     struct db_def *out, struct config_error *err) MUSTCHECK;
int connstr_parse_user(const char *name, const char *text, const char *file, int line,
		       struct user_def *out, struct config_error *err) MUSTCHECK;
int connstr_parse_peer(const char *id, const char *text, const char *file, int line,
		       struct peer_def *out, struct config_error *err) MUSTCHECK;

void connstr_db_free(struct db_def *db);       /* frees the members, not db */
void connstr_user_free(struct user_def *u);
void connstr_peer_free(struct peer_def *p);

#endif

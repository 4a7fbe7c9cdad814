/* pgcrew — connection strings of [databases], [users] and [peers]: a libpq
 * style tokenizer, then one key table per section that says where each key
 * is stored and how its value is checked. */
#include "config/connstr.h"
#include "config/value.h"
#include "log.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum cs_type {
	CS_STR,                     /* char *, strdup'ed */
	CS_SECRET,                  /* the same, at most SECRET_MAX_LEN - 1 bytes */
	CS_PORT,                    /* int 1..65535 */
	CS_COUNT,                   /* int >= 0 */
	CS_TIME,                    /* usec_t; "-1" means not set */
	CS_POOL_MODE,               /* int, enum pool_mode */
	CS_LB,                      /* int, enum load_balance */
	CS_SSLNEG,                  /* int, enum sslnegotiation */
	CS_TSA,                     /* int, enum tsa */
};

struct cs_key {
	const char *name;
	enum cs_type type;
	size_t off;
};

#define DB(n, t, f)   { n, t, offsetof(struct db_def, f) }
#define USR(n, t, f)  { n, t, offsetof(struct user_def, f) }
#define PEER(n, t, f) { n, t, offsetof(struct peer_def, f) }

static const struct cs_key db_keys[] = {
	DB("host", CS_STR, host),
	DB("port", CS_PORT, port),
	DB("dbname", CS_STR, dbname),
	DB("user", CS_STR, user),
	DB("password", CS_SECRET, password),
	DB("auth_user", CS_STR, auth_user),
	DB("auth_query", CS_STR, auth_query),
	DB("auth_dbname", CS_STR, auth_dbname),
	DB("pool_size", CS_COUNT, pool_size),
	DB("min_pool_size", CS_COUNT, min_pool_size),
	DB("reserve_pool_size", CS_COUNT, reserve_pool_size),
	DB("reserve_pool", CS_COUNT, reserve_pool_size),      /* old alias */
	DB("max_db_connections", CS_COUNT, max_db_connections),
	DB("max_db_client_connections", CS_COUNT, max_db_client_connections),
	DB("pool_mode", CS_POOL_MODE, pool_mode),
	DB("connect_query", CS_STR, connect_query),
	DB("client_encoding", CS_STR, client_encoding),
	DB("datestyle", CS_STR, datestyle),
	DB("timezone", CS_STR, timezone),
	DB("application_name", CS_STR, application_name),
	DB("load_balance_hosts", CS_LB, load_balance_hosts),
	DB("server_lifetime", CS_TIME, server_lifetime),
	DB("query_wait_timeout", CS_TIME, query_wait_timeout),
	DB("sslnegotiation", CS_SSLNEG, sslnegotiation),       /* pgcrew */
	DB("target_session_attrs", CS_TSA, target_session_attrs),   /* pgcrew */
};

static const struct cs_key user_keys[] = {
	USR("pool_mode", CS_POOL_MODE, pool_mode),
	USR("pool_size", CS_COUNT, pool_size),
	USR("reserve_pool_size", CS_COUNT, reserve_pool_size),
	USR("max_user_connections", CS_COUNT, max_user_connections),
	USR("max_user_client_connections", CS_COUNT, max_user_client_connections),
	USR("query_timeout", CS_TIME, query_timeout),
	USR("idle_transaction_timeout", CS_TIME, idle_transaction_timeout),
	USR("client_idle_timeout", CS_TIME, client_idle_timeout),
	USR("transaction_timeout", CS_TIME, transaction_timeout),
	USR("query_wait_timeout", CS_TIME, query_wait_timeout),
};

static const struct cs_key peer_keys[] = {
	PEER("host", CS_STR, host),
	PEER("port", CS_PORT, port),
	PEER("pool_size", CS_COUNT, pool_size),
};

/* The entry being built, for error messages. */
struct entry {
	const char *what;           /* "database", "user", "peer" */
	const char *name;
	const char *file;
	int line;
};

static const char *skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *d = strndup(s, n);

	if (!d)
		fatal("out of memory");
	return d;
}

/* Key and '=' at *pp; the key is returned, *pp left at the value. */
static char *read_key(const char **pp, char *msg, size_t msglen)
{
	const char *p = *pp, *start = p;

	while (*p && *p != '=' && !isspace((unsigned char)*p))
		p++;
	if (p == start) {
		snprintf(msg, msglen, "missing parameter name before '='");
		return NULL;
	}
	if (*skip_space(p) != '=') {
		snprintf(msg, msglen, "missing '=' after '%.*s'", (int)(p - start), start);
		return NULL;
	}
	*pp = skip_space(skip_space(p) + 1);
	return xstrndup(start, (size_t)(p - start));
}

/* One value: 'quoted' ('' and \x escapes) or up to the next blank. */
static char *read_value(const char **pp, const char *key, char *msg, size_t msglen)
{
	const char *p = *pp;
	bool quoted = *p == '\'';
	char *out = xstrndup(p, strlen(p)), *d = out;

	for (p += quoted;; ) {
		if (*p == '\0' || (!quoted && isspace((unsigned char)*p)))
			break;
		if (quoted && *p == '\'' && p[1] != '\'')
			break;
		if ((quoted && *p == '\'') || (*p == '\\' && p[1] != '\0'))
			p++;
		*d++ = *p++;
	}
	*d = '\0';
	if (quoted && *p != '\'')
		snprintf(msg, msglen, "unterminated quoted value for '%s'", key);
	else if (quoted && *++p != '\0' && !isspace((unsigned char)*p))
		snprintf(msg, msglen, "unexpected text after quoted value for '%s'", key);
	else if (!quoted && d == out)
		snprintf(msg, msglen, "missing value for '%s'", key);
	else {
		*pp = p;
		return out;
	}
	free(out);
	return NULL;
}

static void add_pair(struct connstr *cs, char *key, char *value)
{
	struct connstr_pair *np = realloc(cs->pairs, sizeof(*np) * (size_t)(cs->n + 1));

	if (!np)
		fatal("out of memory");
	cs->pairs = np;
	cs->pairs[cs->n].key = key;
	cs->pairs[cs->n].value = value;
	cs->n++;
}

int connstr_parse(const char *text, struct connstr *out, char *msg, size_t msglen)
{
	const char *p = text;
	char *key, *value;

	memset(out, 0, sizeof(*out));
	for (p = skip_space(p); *p; p = skip_space(p)) {
		key = read_key(&p, msg, msglen);
		if (!key)
			goto fail;
		value = read_value(&p, key, msg, msglen);
		if (!value) {
			free(key);
			goto fail;
		}
		add_pair(out, key, value);
	}
	return 0;
fail:
	connstr_clear(out);
	return -1;
}

void connstr_clear(struct connstr *cs)
{
	for (int i = 0; i < cs->n; i++) {
		free(cs->pairs[i].key);
		free(cs->pairs[i].value);
	}
	free(cs->pairs);
	cs->pairs = NULL;
	cs->n = 0;
}

static int entry_error(struct config_error *err, const struct entry *e, const char *detail)
{
	config_error_set(err, "%s:%d: %s '%s': %s", e->file, e->line, e->what, e->name, detail);
	return -1;
}

static int parse_int_range(const char *value, int64_t min, int64_t max, int *out)
{
	int64_t v;

	if (value_parse_int(value, &v) < 0 || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_enum(const char *value, const char *(*name_fn)(int), int count, int *out)
{
	for (int i = 0; i < count; i++) {
		if (strcasecmp(value, name_fn(i)) == 0) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

static const char *pool_mode_name_i(int i) { return pool_mode_name((enum pool_mode)i); }
static const char *load_balance_name_i(int i) { return load_balance_name((enum load_balance)i); }
static const char *sslneg_name_i(int i) { return sslnegotiation_name((enum sslnegotiation)i); }
static const char *tsa_name_i(int i) { return tsa_name((enum tsa)i); }

/* Store value at base + k->off; -1 when the value is not valid for k. */
static int apply_key(void *base, const struct cs_key *k, const char *value)
{
	void *dst = (char *)base + k->off;

	switch (k->type) {
	case CS_SECRET:
		if (strlen(value) >= SECRET_MAX_LEN)
			return -1;
		/* fall through */
	case CS_STR:
		free(*(char **)dst);
		*(char **)dst = xstrndup(value, strlen(value));
		return 0;
	case CS_PORT:
		return parse_int_range(value, 1, 65535, dst);
	case CS_COUNT:
		return parse_int_range(value, 0, INT_MAX, dst);
	case CS_TIME:
		if (strcmp(value, "-1") == 0) {
			*(usec_t *)dst = -1;
			return 0;
		}
		return value_parse_time(value, dst);
	case CS_POOL_MODE:
		return parse_enum(value, pool_mode_name_i, POOL_MODE_COUNT, dst);
	case CS_LB:
		return parse_enum(value, load_balance_name_i, LB_COUNT, dst);
	case CS_SSLNEG:
		return parse_enum(value, sslneg_name_i, SSLNEG_COUNT, dst);
	case CS_TSA:
		return parse_enum(value, tsa_name_i, TSA_COUNT, dst);
	}
	return -1;
}

static int apply_text(const char *text, const struct cs_key *keys, size_t nkeys, void *base,
		      const struct entry *e, struct config_error *err)
{
	struct connstr cs;
	char detail[300];
	int rc = 0;

	if (connstr_parse(text, &cs, detail, sizeof(detail)) < 0)
		return entry_error(err, e, detail);
	for (int i = 0; i < cs.n && rc == 0; i++) {
		const struct cs_key *k = NULL;

		for (size_t j = 0; j < nkeys && !k; j++)
			k = strcmp(keys[j].name, cs.pairs[i].key) == 0 ? &keys[j] : NULL;
		int bad = k ? apply_key(base, k, cs.pairs[i].value) : 0;
		if (!k)
			snprintf(detail, sizeof(detail), "unknown parameter '%.100s'", cs.pairs[i].key);
		else if (bad < 0 && k->type == CS_SECRET)
			snprintf(detail, sizeof(detail), "'%s' is longer than %d bytes", k->name,
				 SECRET_MAX_LEN - 1);      /* never the secret itself in a log */
		else if (bad < 0)
			snprintf(detail, sizeof(detail), "bad value '%.100s' for '%s'", cs.pairs[i].value, k->name);
		else
			continue;
		rc = entry_error(err, e, detail);
	}
	connstr_clear(&cs);
	return rc;
}

/* host "a, b,/tmp" -> hosts {"a", "b", "/tmp"} */
static int split_hosts(struct db_def *db)
{
	const char *p = db->host;

	while (p) {
		const char *comma = strchr(p, ',');
		const char *end = comma ? comma : p + strlen(p);
		char **nh;

		p = skip_space(p);
		while (end > p && isspace((unsigned char)end[-1]))
			end--;
		if (end == p)
			return -1;
		nh = realloc(db->hosts, sizeof(char *) * (size_t)(db->n_hosts + 1));
		if (!nh)
			fatal("out of memory");
		db->hosts = nh;
		db->hosts[db->n_hosts++] = xstrndup(p, (size_t)(end - p));
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

int connstr_parse_db(const char *name, const char *text, const char *file, int line,
		     struct db_def *out, struct config_error *err)
{
	struct entry e = { "database", name, file, line };

	memset(out, 0, sizeof(*out));
	out->name = xstrndup(name, strlen(name));
	out->file = xstrndup(file, strlen(file));
	out->line = line;
	out->port = 5432;
	out->pool_size = out->min_pool_size = out->reserve_pool_size = -1;
	out->max_db_connections = out->max_db_client_connections = -1;
	out->pool_mode = -1;
	out->load_balance_hosts = LB_ROUND_ROBIN;
	out->server_lifetime = out->query_wait_timeout = -1;
	out->sslnegotiation = -1;
	out->target_session_attrs = -1;
	if (apply_text(text, db_keys, ARRAY_SIZE(db_keys), out, &e, err) < 0)
		goto fail;
	if (out->host && split_hosts(out) < 0) {
		entry_error(err, &e, "empty entry in host list");
		goto fail;
	}
	return 0;
fail:
	connstr_db_free(out);
	return -1;
}

int connstr_parse_user(const char *name, const char *text, const char *file, int line,
		       struct user_def *out, struct config_error *err)
{
	struct entry e = { "user", name, file, line };

	memset(out, 0, sizeof(*out));
	out->name = xstrndup(name, strlen(name));
	out->pool_mode = out->pool_size = out->reserve_pool_size = -1;
	out->max_user_connections = out->max_user_client_connections = -1;
	out->query_timeout = out->idle_transaction_timeout = out->client_idle_timeout = -1;
	out->transaction_timeout = out->query_wait_timeout = -1;
	if (apply_text(text, user_keys, ARRAY_SIZE(user_keys), out, &e, err) < 0) {
		connstr_user_free(out);
		return -1;
	}
	return 0;
}

int connstr_parse_peer(const char *id, const char *text, const char *file, int line,
		       struct peer_def *out, struct config_error *err)
{
	struct entry e = { "peer", id, file, line };

	memset(out, 0, sizeof(*out));
	out->port = 6432;
	out->pool_size = -1;
	if (parse_int_range(id, 1, 16383, &out->peer_id) < 0)
		return entry_error(err, &e, "peer id must be a number from 1 to 16383");
	if (apply_text(text, peer_keys, ARRAY_SIZE(peer_keys), out, &e, err) < 0)
		goto fail;
	if (!out->host) {
		entry_error(err, &e, "host is required");
		goto fail;
	}
	return 0;
fail:
	connstr_peer_free(out);
	return -1;
}

void connstr_db_free(struct db_def *db)
{
	char **strs[] = {
		&db->name, &db->host, &db->dbname, &db->user, &db->password, &db->auth_user,
		&db->auth_query, &db->auth_dbname, &db->connect_query, &db->client_encoding,
		&db->datestyle, &db->timezone, &db->application_name, &db->file,
	};

	for (int i = 0; i < db->n_hosts; i++)
		free(db->hosts[i]);
	free(db->hosts);
	db->hosts = NULL;
	db->n_hosts = 0;
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
}

void connstr_user_free(struct user_def *u)
{
	free(u->name);
	u->name = NULL;
}

void connstr_peer_free(struct peer_def *p)
{
	free(p->host);
	p->host = NULL;
}

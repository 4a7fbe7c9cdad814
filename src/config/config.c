/* pgcrew — config_load(): drive the ini parser over pgbouncer.ini, route each
 * line to the settings table or the [databases]/[users]/[peers] builders,
 * validate the whole generation and load its auth_file. */
#include "config.h"
#include "config/connstr.h"
#include "config/ini.h"
#include "config/settings.h"
#include "config/userlist.h"
#include "auth/ldapconf.h"
#include "build-config.h"
#include "log.h"

#include <limits.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reserved for the admin console, as in PgBouncer. */
#define ADMIN_DB_NAME "pgbouncer"

bool config_is_console_db(const char *name)
{
	return strcmp(name, "pgbouncer") == 0 || strcmp(name, "pgcrew") == 0;
}

static void *grow_array(void *arr, int n, size_t elem)
{
	void *p = realloc(arr, elem * (size_t)(n + 1));

	if (!p)
		fatal("out of memory");
	return p;
}

static bool is_settings_section(const char *section)
{
	return strcmp(section, "pgbouncer") == 0 || strcmp(section, "pgcrew") == 0;
}

static int on_section(const char *file, int line, const char *section, struct config_error *err)
{
	static const char *const known[] = { "pgbouncer", "pgcrew", "databases", "users", "peers" };

	for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
		if (strcmp(section, known[i]) == 0)
			return 0;
	}
	config_error_set(err, "%s:%d: unknown section [%s]", file, line, section);
	return -1;
}

static int on_setting(struct config *cfg, const char *file, int line, const char *section,
		      const char *key, const char *value, struct config_error *err)
{
	const struct setting *s = setting_find(key);
	char msg[300];

	if (!s) {
		config_error_set(err, "%s:%d: unknown key '%s' in [%s]", file, line, key, section);
		return -1;
	}
	if (setting_parse(cfg, s, value, msg, sizeof(msg)) < 0) {
		/* PgBouncer's wording: operators and tests grep for it. */
		config_error_set(err, "invalid value \"%s\" for parameter %s in configuration (%s:%d): %s",
				 value, key, file, line, msg);
		return -1;
	}
	return 0;
}

static struct db_def *find_db(struct config *cfg, const char *name)
{
	for (int i = 0; i < cfg->n_dbs; i++) {
		if (strcmp(cfg->dbs[i].name, name) == 0)
			return &cfg->dbs[i];
	}
	return NULL;
}

/* A name defined twice keeps its last definition, as in PgBouncer. */
static int on_database(struct config *cfg, const char *file, int line, const char *name,
		       const char *value, struct config_error *err)
{
	struct db_def db, *slot;

	if (strcmp(name, ADMIN_DB_NAME) == 0) {
		config_error_set(err, "%s:%d: database name '%s' is reserved for the admin console",
				 file, line, name);
		return -1;
	}
	if (connstr_parse_db(name, value, file, line, &db, err) < 0)
		return -1;
	if (strcmp(name, "*") == 0) {
		if (!cfg->autodb && !(cfg->autodb = calloc(1, sizeof(*cfg->autodb))))
			fatal("out of memory");
		slot = cfg->autodb;
	} else if (!(slot = find_db(cfg, name))) {
		cfg->dbs = grow_array(cfg->dbs, cfg->n_dbs, sizeof(*cfg->dbs));
		slot = &cfg->dbs[cfg->n_dbs++];
		memset(slot, 0, sizeof(*slot));
	}
	connstr_db_free(slot);
	*slot = db;
	return 0;
}

static int on_user(struct config *cfg, const char *file, int line, const char *name,
		   const char *value, struct config_error *err)
{
	struct user_def u, *slot = (struct user_def *)config_find_user(cfg, name);

	if (connstr_parse_user(name, value, file, line, &u, err) < 0)
		return -1;
	if (!slot) {
		cfg->users = grow_array(cfg->users, cfg->n_users, sizeof(*cfg->users));
		slot = &cfg->users[cfg->n_users++];
		memset(slot, 0, sizeof(*slot));
	}
	connstr_user_free(slot);
	*slot = u;
	return 0;
}

static int on_peer(struct config *cfg, const char *file, int line, const char *id,
		   const char *value, struct config_error *err)
{
	struct peer_def p, *slot;

	if (connstr_parse_peer(id, value, file, line, &p, err) < 0)
		return -1;
	slot = (struct peer_def *)config_find_peer(cfg, p.peer_id);
	if (!slot) {
		cfg->peers = grow_array(cfg->peers, cfg->n_peers, sizeof(*cfg->peers));
		slot = &cfg->peers[cfg->n_peers++];
		memset(slot, 0, sizeof(*slot));
	}
	connstr_peer_free(slot);
	*slot = p;
	return 0;
}

/* ini callback: key == NULL announces a section header. */
static int on_line(void *arg, const char *file, int line, const char *section,
		   const char *key, const char *value, struct config_error *err)
{
	struct config *cfg = arg;

	if (!key)
		return on_section(file, line, section, err);
	if (is_settings_section(section))
		return on_setting(cfg, file, line, section, key, value, err);
	if (strcmp(section, "databases") == 0)
		return on_database(cfg, file, line, key, value, err);
	if (strcmp(section, "users") == 0)
		return on_user(cfg, file, line, key, value, err);
	return on_peer(cfg, file, line, key, value, err);
}

const char *config_resolve_path(const struct config *cfg, const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(cfg->path, '/');
	int n;

	if (path[0] == '\0' || path[0] == '/' || !slash)
		return path;
	n = snprintf(buf, len, "%.*s/%s", (int)(slash - cfg->path), cfg->path, path);
	if (n < 0 || (size_t)n >= len)
		return NULL;
	/* PgBouncer reads a relative path from its working directory: a file
	 * found there, and not beside the config file, is the one meant. */
	if (access(buf, F_OK) != 0 && access(path, F_OK) == 0) {
		log_info("%s: not found beside %s, using the one in the working directory", path, cfg->path);
		return path;
	}
	return buf;
}

static bool auth_needs_secrets(enum auth_type t)
{
	return t == AUTH_PLAIN || t == AUTH_MD5 || t == AUTH_SCRAM;
}

static int load_userlist(struct config *cfg, struct config_error *err)
{
	char buf[PATH_MAX];
	const char *path;

	if (cfg->auth_file[0] == '\0') {
		cfg->userlist = userlist_new_empty();
		return 0;
	}
	path = config_resolve_path(cfg, cfg->auth_file, buf, sizeof(buf));
	if (!path) {
		config_error_set(err, "%s: auth_file path too long", cfg->path);
		return -1;
	}
	cfg->userlist = userlist_load(path, err);
	return cfg->userlist ? 0 : -1;
}

/* auth_type ldap/pam: the build must have the method, and LDAP settings
 * must make sense (PgBouncer would start and then fail every login). */
static int validate_external_auth(struct config *cfg, struct config_error *err)
{
	char why[256];
	struct ldapconf lc;

	if (cfg->auth_type == AUTH_LDAP) {
#ifndef HAVE_LDAP
		config_error_set(err, "%s: auth_type = ldap: pgcrew was built without LDAP (configure --with-ldap)",
				 cfg->path);
		return -1;
#endif
		if (!ldapconf_parse(&lc, cfg->auth_ldap_options, why, sizeof(why))) {
			config_error_set(err, "%s: auth_ldap_options: %s", cfg->path, why);
			return -1;
		}
	}
#ifndef HAVE_PAM
	if (cfg->auth_type == AUTH_PAM) {
		config_error_set(err, "%s: auth_type = pam: pgcrew was built without PAM (configure --with-pam)",
				 cfg->path);
		return -1;
	}
#endif
	return 0;
}

/* Checks that need the whole file: what a single line cannot know. */
static int validate(struct config *cfg, struct config_error *err)
{
	if (validate_external_auth(cfg, err) < 0)
		return -1;
	if (config_is_console_db(cfg->auth_dbname)) {
		/* PgBouncer's words: the console has no auth_query to run. */
		config_error_set(err, "%s: cannot use the reserved \"pgbouncer\" database as an auth_dbname",
				 cfg->path);
		return -1;
	}
	if (cfg->proxy_protocol && !cfg->proxy_protocol_sources[0]) {
		/* Nobody could send a header: the setting would do nothing. */
		config_error_set(err, "%s: proxy_protocol = 1 needs proxy_protocol_sources "
				 "(the load balancers' addresses)", cfg->path);
		return -1;
	}
	if (auth_needs_secrets(cfg->auth_type) && cfg->auth_file[0] == '\0' && cfg->auth_user[0] == '\0') {
		config_error_set(err, "%s: auth_file must be set when auth_type is %s (or set auth_user)",
				 cfg->path, auth_type_name(cfg->auth_type));
		return -1;
	}
	if (cfg->conffile[0] == '\0') {
		free(cfg->conffile);
		cfg->conffile = strdup(cfg->path);
		if (!cfg->conffile)
			fatal("out of memory");
	}
	return 0;
}

int config_load(const char *path, struct config **out, struct config_error *err)
{
	struct config *cfg = calloc(1, sizeof(*cfg));

	*out = NULL;
	if (!cfg || !(cfg->path = strdup(path)))
		fatal("out of memory");
	settings_init_defaults(cfg);
	if (ini_parse_file(path, on_line, cfg, err) < 0 || validate(cfg, err) < 0 ||
	    load_userlist(cfg, err) < 0) {
		config_free(cfg);
		return -1;
	}
	*out = cfg;
	return 0;
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	for (int i = 0; i < cfg->n_dbs; i++)
		connstr_db_free(&cfg->dbs[i]);
	free(cfg->dbs);
	if (cfg->autodb)
		connstr_db_free(cfg->autodb);
	free(cfg->autodb);
	for (int i = 0; i < cfg->n_users; i++)
		connstr_user_free(&cfg->users[i]);
	free(cfg->users);
	for (int i = 0; i < cfg->n_peers; i++)
		connstr_peer_free(&cfg->peers[i]);
	free(cfg->peers);
	userlist_free(cfg->userlist);
	settings_free_values(cfg);
	free(cfg->path);
	free(cfg);
}

const struct db_def *config_find_db(const struct config *cfg, const char *name)
{
	return find_db((struct config *)cfg, name);
}

const struct user_def *config_find_user(const struct config *cfg, const char *name)
{
	for (int i = 0; i < cfg->n_users; i++) {
		if (strcmp(cfg->users[i].name, name) == 0)
			return &cfg->users[i];
	}
	return NULL;
}

const struct peer_def *config_find_peer(const struct config *cfg, int peer_id)
{
	for (int i = 0; i < cfg->n_peers; i++) {
		if (cfg->peers[i].peer_id == peer_id)
			return &cfg->peers[i];
	}
	return NULL;
}

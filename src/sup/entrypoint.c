/* pgcrew — pgcrew-entrypoint, the container image's entrypoint
 * (doc/container.md): finds a mounted pgbouncer.ini, or writes one and a
 * userlist from the environment as the common PgBouncer images take it
 * (DATABASE_URL, DB_*, any setting as its upper-case name), then execs
 * pgcrew in its place. No shell; secrets never reach a command line or log. */
#include "auth/crypto.h"
#include "auth/scram.h"
#include "config.h"
#include "config/settings.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SBINDIR
#define SBINDIR "/usr/sbin"
#endif
#define RUNDIR "/run/pgcrew"          /* the image makes it, owned by pgcrew */
#define SALT_LEN 16

/* Mounted configurations, first found wins; userlists beside them. */
static const char *const mounted_ini[] = {
	"/etc/pgcrew/pgcrew.ini", "/etc/pgcrew/pgbouncer.ini", "/etc/pgbouncer/pgbouncer.ini",
};
static const char *const mounted_userlist[] = { "/etc/pgcrew/userlist.txt", "/etc/pgbouncer/userlist.txt" };
/* Settings the container owns: pgcrew runs as the image's user, logs to
 * stderr and needs no pidfile. */
static const char *const container_owned[] = { "user", "logfile", "pidfile" };

static const char *rundir = RUNDIR;  /* PGCREW_RUNDIR: where the files go */
static char ini_path[512], userlist_path[512];

struct dburl {                        /* DATABASE_URL, or the DB_* variables */
	char *host, *port, *user, *password, *name, *sslmode;
};

static void say(const char *fmt, ...) PRINTF(1, 2);
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("pgcrew-entrypoint: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static NORETURN void die(const char *fmt, ...) PRINTF(1, 2);
static NORETURN void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("pgcrew-entrypoint: FATAL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* A variable's value; NULL when unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* No value may carry a control character: it would end an ini line. */
static void check_text(const char *what, const char *v)
{
	for (const char *p = v; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			die("%s holds a control character (newline?)", what);
}

/* ---- DATABASE_URL ---- */

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

/* A URL part, %XX decoded. */
static char *decode(const char *p, size_t len, const char *what)
{
	char *out = xmalloc(len + 1), *o = out;
	for (size_t i = 0; i < len; i++) {
		if (p[i] != '%') {
			*o++ = p[i];
			continue;
		}
		if (i + 2 >= len || hexval(p[i + 1]) < 0 || hexval(p[i + 2]) < 0)
			die("DATABASE_URL: bad %%-escape in the %s", what);
		*o++ = (char)(hexval(p[i + 1]) * 16 + hexval(p[i + 2]));
		i += 2;
	}
	*o = 0;
	return out;
}

/* ?sslmode=...: the server side's TLS; nothing else is taken. */
static void url_params(const char *q, struct dburl *u)
{
	while (q && *q) {
		const char *end = strchr(q, '&');
		size_t len = end ? (size_t)(end - q) : strlen(q);
		if (len > 8 && strncmp(q, "sslmode=", 8) == 0)
			u->sslmode = decode(q + 8, len - 8, "sslmode");
		else if (len)
			die("DATABASE_URL: parameter '%.*s' is not supported (only sslmode; "
			    "other settings go in their own variables)", (int)strcspn(q, "=&"), q);
		q = end ? end + 1 : NULL;
	}
}

/* host, [v6], :port */
static void url_hostport(const char *p, size_t len, struct dburl *u)
{
	const char *colon = NULL;
	if (len && *p == '[') {
		const char *close = memchr(p, ']', len);
		if (!close)
			die("DATABASE_URL: '[' without ']' in the host");
		u->host = decode(p + 1, (size_t)(close - p - 1), "host");
		colon = close + 1 < p + len && close[1] == ':' ? close + 1 : NULL;
	} else {
		colon = memchr(p, ':', len);
		u->host = decode(p, colon ? (size_t)(colon - p) : len, "host");
	}
	if (colon)
		u->port = decode(colon + 1, (size_t)(p + len - colon - 1), "port");
}

/* postgres[ql]://[user[:password]@]host[:port][/dbname][?sslmode=...] */
static void parse_url(const char *url, struct dburl *u)
{
	check_text("DATABASE_URL", url);
	const char *p = strstr(url, "://");
	if (!p || (strncmp(url, "postgres://", 11) != 0 && strncmp(url, "postgresql://", 13) != 0))
		die("DATABASE_URL must start with postgres:// or postgresql://");
	p += 3;
	size_t auth_len = strcspn(p, "/?");
	const char *at = NULL;
	for (const char *q = p; q < p + auth_len; q++)
		if (*q == '@')
			at = q;                     /* the last one: a password may hold '@' encoded or not */
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		u->user = decode(p, colon ? (size_t)(colon - p) : (size_t)(at - p), "user");
		if (colon)
			u->password = decode(colon + 1, (size_t)(at - colon - 1), "password");
		auth_len -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	url_hostport(p, auth_len, u);
	p += auth_len;
	if (*p == '/') {
		size_t n = strcspn(p + 1, "?");
		if (n)
			u->name = decode(p + 1, n, "database name");
		p += 1 + n;
	}
	if (*p == '?')
		url_params(p + 1, u);
}

/* DATABASE_URL's parts first, the DB_* variables for what it leaves out
 * (a password kept out of the URL, say). */
static void gather_db(struct dburl *u)
{
	static const struct { const char *var; size_t off; } vars[] = {
		{ "DB_HOST", offsetof(struct dburl, host) }, { "DB_PORT", offsetof(struct dburl, port) },
		{ "DB_USER", offsetof(struct dburl, user) }, { "DB_PASSWORD", offsetof(struct dburl, password) },
		{ "DB_NAME", offsetof(struct dburl, name) },
	};
	memset(u, 0, sizeof(*u));
	if (env("DATABASE_URL"))
		parse_url(env("DATABASE_URL"), u);
	for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
		char **slot = (char **)((char *)u + vars[i].off);
		if ((!*slot || !**slot) && env(vars[i].var)) {
			check_text(vars[i].var, env(vars[i].var));
			free(*slot);
			*slot = xstrdup(env(vars[i].var));
		}
	}
	if (!u->host || !*u->host)
		die("no configuration: mount /etc/pgbouncer/pgbouncer.ini (or /etc/pgcrew/pgcrew.ini), "
		    "or set DATABASE_URL or DB_HOST");
	char *end;
	long port = u->port ? strtol(u->port, &end, 10) : 5432;
	if (u->port && (*end || end == u->port || port < 1 || port > 65535))
		die("DB_PORT (or DATABASE_URL's port) must be a number from 1 to 65535, not '%s'", u->port);
	if (u->password && !u->user)
		die("DB_PASSWORD is set but DB_USER is not");
}

/* ---- writing ---- */

/* A connection-string value: bare, or quoted with '' for a quote. */
static void put_connval(FILE *f, const char *key, const char *v)
{
	bool bare = *v != 0;
	for (const char *p = v; *p; p++)
		if (isspace((unsigned char)*p) || *p == '\'' || *p == '\\' || *p == '"')
			bare = false;
	fprintf(f, " %s=", key);
	if (bare) {
		fputs(v, f);
		return;
	}
	fputc('\'', f);
	for (const char *p = v; *p; p++) {
		if (*p == '\'' || *p == '\\')
			fputc(*p, f);
		fputc(*p, f);
	}
	fputc('\'', f);
}

/* A userlist name or secret: "..." with "" for a quote. */
static void put_quoted(FILE *f, const char *v)
{
	fputc('"', f);
	for (; *v; v++) {
		if (*v == '"')
			fputc('"', f);
		fputc(*v, f);
	}
	fputc('"', f);
}

static FILE *create(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f)
		die("cannot write %s: %s (the image's %s must be writable by its user: "
		    "with a read-only root, mount an emptyDir or tmpfs there)", path, strerror(errno), rundir);
	return f;
}

static void finish(FILE *f, const char *path)
{
	if (ferror(f) | fclose(f))
		die("cannot write %s: %s", path, strerror(errno));
}

/* SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>, as PostgreSQL
 * stores it, with a fresh salt. */
static void scram_verifier(const char *password, int iterations, char *out, size_t len)
{
	uint8_t salt[SALT_LEN];
	struct scram_secret s;
	char b_salt[CRYPTO_B64_ENC_LEN(SALT_LEN) + 1], b_stored[CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN) + 1],
		b_server[CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN) + 1];
	if (crypto_init() < 0 || !crypto_random(salt, sizeof(salt)) ||
	    !scram_secret_from_password(password, salt, sizeof(salt), iterations, &s))
		die("cannot compute the SCRAM secret of DB_PASSWORD (OpenSSL failed)");
	crypto_b64_encode(salt, sizeof(salt), b_salt, sizeof(b_salt));
	crypto_b64_encode(s.stored_key, SCRAM_KEY_LEN, b_stored, sizeof(b_stored));
	crypto_b64_encode(s.server_key, SCRAM_KEY_LEN, b_server, sizeof(b_server));
	snprintf(out, len, "SCRAM-SHA-256$%d:%s$%s:%s", iterations, b_salt, b_stored, b_server);
	explicit_bzero(&s, sizeof(s));
}

/* ---- settings from the environment ---- */

static bool owned(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(container_owned); i++)
		if (strcmp(name, container_owned[i]) == 0)
			return true;
	return false;
}

/* PEER_ID: a number, or a StatefulSet pod's name, whose ordinal + 1 it
 * takes (pgcrew-0 -> 1, pgcrew-1 -> 2; 0 would turn peering off), so one
 * manifest gives each replica its own id through the downward API. */
static const char *peer_id_of(const char *v)
{
	static char buf[24];
	size_t n = strlen(v), d = n;
	while (d > 0 && isdigit((unsigned char)v[d - 1]))
		d--;
	if (d == 0 || d == n || v[d - 1] != '-' || n - d > 5)
		return v;                   /* a number, or left to the check */
	snprintf(buf, sizeof(buf), "%ld", strtol(v + d, NULL, 10) + 1);
	return buf;
}

/* A setting's value from NAME or PGBOUNCER_NAME (bitnami's prefix); both
 * set and different is an error. */
static const char *setting_env(const char *name, char *var, size_t len)
{
	char up[96], pre[128];
	size_t i;
	for (i = 0; name[i] && i + 1 < sizeof(up); i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	up[i] = 0;
	snprintf(pre, sizeof(pre), "PGBOUNCER_%s", up);
	const char *a = env(up), *b = env(pre);
	if (a && b && strcmp(a, b) != 0)
		die("%s and %s are both set, to different values", up, pre);
	snprintf(var, len, "%s", a ? up : pre);
	return a ? a : b;
}

/* Defaults of the generated file where pgcrew's own differ: the common
 * images' (listen on every address, port 5432) and the probes'. */
static const struct { const char *name, *value; } image_defaults[] = {
	{ "listen_addr", "*" },
	{ "listen_port", "5432" },
	{ "auth_type", "scram-sha-256" },
	{ "metrics_listen", "*:9127" },
	{ "ignore_startup_parameters", "extra_float_digits" },
};

static const char *image_default(const char *name, const struct dburl *u)
{
	if (strcmp(name, "auth_file") == 0)
		return userlist_path;
	if (strcmp(name, "admin_users") == 0)
		return u->user;
	if (strcmp(name, "server_tls_sslmode") == 0)
		return u->sslmode;
	if (strcmp(name, "unix_socket_dir") == 0)
		return rundir;              /* writable with a read-only root too */
	for (size_t i = 0; i < ARRAY_SIZE(image_defaults); i++)
		if (strcmp(name, image_defaults[i].name) == 0)
			return image_defaults[i].value;
	return NULL;
}

/* Every row of the settings table: its variable, checked as the config
 * loader would check it, or the image's default. Returns the value
 * written for name "want" (auth_file, scram_iterations). */
static void put_settings(FILE *f, const struct dburl *u, const char **auth_file, int *iterations)
{
	struct config scratch;
	char var[140], msg[256];
	memset(&scratch, 0, sizeof(scratch));
	settings_init_defaults(&scratch);
	fputs("[pgbouncer]\n", f);
	for (size_t i = 0; i < settings_count(); i++) {
		const struct setting *s = settings_get(i);
		const char *name = setting_name(s), *v = setting_env(name, var, sizeof(var));
		if (v && owned(name)) {
			say("%s ignored: the container sets %s itself", var, name);
			continue;
		}
		if (v && strcmp(name, "peer_id") == 0)
			v = peer_id_of(v);
		if (v)
			check_text(var, v);
		else
			v = image_default(name, u);
		if (!v)
			continue;
		if (setting_parse(&scratch, s, v, msg, sizeof(msg)) < 0)
			die("%s: %s", var[0] ? var : name, msg);
		fprintf(f, "%s = %s\n", name, v);
		if (strcmp(name, "auth_file") == 0)
			*auth_file = v;
	}
	*iterations = scratch.scram_iterations;
	settings_free_values(&scratch);
}

static void put_database(FILE *f, const struct dburl *u)
{
	fprintf(f, "[databases]\n%s =", u->name ? u->name : "*");
	put_connval(f, "host", u->host);
	if (u->port)
		put_connval(f, "port", u->port);
	if (u->user)
		put_connval(f, "user", u->user);
	if (u->password)
		put_connval(f, "password", u->password);
	if (u->name)
		put_connval(f, "dbname", u->name);
	fputs("\n\n", f);
}

/* A mounted userlist's lines, then DB_USER's SCRAM secret unless the
 * mounted one has that user. */
static void put_userlist(const char *path, const struct dburl *u, int iterations)
{
	FILE *f = create(path), *in = NULL;
	char line[4096], quser[512];
	bool have = false;
	snprintf(quser, sizeof(quser), "\"%s\"", u->user ? u->user : "");
	for (size_t i = 0; i < ARRAY_SIZE(mounted_userlist) && !in; i++)
		if ((in = fopen(mounted_userlist[i], "r")) != NULL)
			say("userlist: %s, copied", mounted_userlist[i]);
	while (in && fgets(line, sizeof(line), in)) {
		have |= u->user && strncmp(line, quser, strlen(quser)) == 0;
		fputs(line, f);
		if (!strchr(line, '\n'))
			fputc('\n', f);
	}
	if (in)
		fclose(in);
	if (u->user && u->password && !have) {
		char secret[256];
		scram_verifier(u->password, iterations, secret, sizeof(secret));
		put_quoted(f, u->user);
		fputc(' ', f);
		put_quoted(f, secret);
		fputc('\n', f);
		explicit_bzero(secret, sizeof(secret));
		say("userlist: DB_USER with a SCRAM-SHA-256 secret of DB_PASSWORD");
	}
	finish(f, path);
}

/* The generated configuration's path. */
static const char *generate(void)
{
	const char *ini = ini_path;
	struct dburl u;
	const char *auth_file = NULL;
	int iterations = 4096;
	gather_db(&u);
	umask(077);
	FILE *f = create(ini);
	fputs("; written by pgcrew-entrypoint from the environment at start; see doc/container.md\n", f);
	put_database(f, &u);
	put_settings(f, &u, &auth_file, &iterations);
	finish(f, ini);
	/* AUTH_FILE names the user's own file: it is not written. */
	if (auth_file && strcmp(auth_file, userlist_path) == 0)
		put_userlist(auth_file, &u, iterations);
	say("wrote %s: database %s on %s:%s%s%s", ini, u.name ? u.name : "* (any)", u.host,
	    u.port ? u.port : "5432", u.user ? " as " : "", u.user ? u.user : "");
	if (u.password)
		explicit_bzero(u.password, strlen(u.password));
	return ini;
}

/* A mounted file with PEER_ID set: a file of ours that includes it and
 * sets peer_id after it (a later key wins), so every replica of one
 * manifest mounts the same ConfigMap. */
static const char *wrap_mounted(const char *mounted)
{
	const char *v = env("PEER_ID");
	char msg[256];
	struct config scratch;
	if (!v)
		return mounted;
	v = peer_id_of(v);
	memset(&scratch, 0, sizeof(scratch));
	settings_init_defaults(&scratch);
	check_text("PEER_ID", v);
	if (setting_parse(&scratch, setting_find("peer_id"), v, msg, sizeof(msg)) < 0)
		die("PEER_ID: %s", msg);
	settings_free_values(&scratch);
	FILE *f = create(ini_path);
	fprintf(f, "; written by pgcrew-entrypoint: %s with PEER_ID\n%%include %s\n[pgbouncer]\npeer_id = %s\n",
		mounted, mounted, v);
	finish(f, ini_path);
	say("peer_id = %s (PEER_ID), over %s", v, mounted);
	return ini_path;
}

static const char *find_mounted(void)
{
	struct stat st;
	for (size_t i = 0; i < ARRAY_SIZE(mounted_ini); i++)
		if (stat(mounted_ini[i], &st) == 0)
			return mounted_ini[i];
	return NULL;
}

/* pgcrew-entrypoint [pgcrew options] [config file]: a config file given
 * is used as is; otherwise a mounted one, or one written from the
 * environment. The options (-v, -q, ...) go to pgcrew. */
int main(int argc, char **argv)
{
	const char *conf = NULL;
	char **args = xcalloc((size_t)argc + 2, sizeof(char *));
	int n = 0;
	args[n++] = (char *)"pgcrew";
	bool info = false;                  /* -V, -h: no configuration needed */
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] != '-')
			conf = argv[i];
		info |= strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0 ||
			strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0;
		args[n++] = argv[i];
	}
	if (!conf && !info) {
		if (env("PGCREW_RUNDIR"))
			rundir = env("PGCREW_RUNDIR");
		snprintf(ini_path, sizeof(ini_path), "%s/pgcrew.ini", rundir);
		snprintf(userlist_path, sizeof(userlist_path), "%s/userlist.txt", rundir);
		conf = find_mounted();
		if (conf) {
			say("using the mounted %s", conf);
			conf = wrap_mounted(conf);
		} else
			conf = generate();
		args[n++] = (char *)conf;
	}
	args[n] = NULL;
	execv(SBINDIR "/pgcrew", args);
	die("cannot run %s/pgcrew: %s", SBINDIR, strerror(errno));
}

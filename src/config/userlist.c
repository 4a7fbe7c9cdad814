/* pgcrew — userlist.txt: parse "user" "secret" lines into an open-addressing
 * hash table (FNV-1a, linear probing, at most half full) so a login's
 * lookup is O(1); classify secrets as plain, md5 or SCRAM. */
#include "config/userlist.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct userlist_entry {
	char *user;                 /* NULL = free slot */
	char *secret;
};

struct userlist {
	struct userlist_entry *slots;
	size_t cap;                 /* power of two */
	size_t count;
};

static const char *const kind_names[] = {
	[USERLIST_PLAIN] = "plain", [USERLIST_MD5] = "md5", [USERLIST_SCRAM] = "scram-sha-256",
};
_Static_assert(ARRAY_SIZE(kind_names) == USERLIST_KIND_COUNT, "kind_names");

const char *userlist_kind_name(enum userlist_kind k)
{
	return (unsigned)k < USERLIST_KIND_COUNT ? kind_names[k] : "?";
}

static uint64_t hash_name(const char *s)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= UINT64_C(1099511628211);
	}
	return h;
}

/* The slot holding user, or the free slot where it would go. */
static struct userlist_entry *slot_for(const struct userlist *ul, const char *user)
{
	size_t mask = ul->cap - 1;
	size_t i = (size_t)hash_name(user) & mask;

	while (ul->slots[i].user && strcmp(ul->slots[i].user, user) != 0)
		i = (i + 1) & mask;
	return &ul->slots[i];
}

static void alloc_slots(struct userlist *ul, size_t cap)
{
	ul->slots = calloc(cap, sizeof(*ul->slots));
	if (!ul->slots)
		fatal("out of memory");
	ul->cap = cap;
}

static void grow(struct userlist *ul)
{
	struct userlist_entry *old = ul->slots;
	size_t oldcap = ul->cap;

	alloc_slots(ul, oldcap * 2);
	for (size_t i = 0; i < oldcap; i++) {
		if (old[i].user)
			*slot_for(ul, old[i].user) = old[i];
	}
	free(old);
}

/* Takes ownership of user and secret; a repeated user keeps the last secret. */
static void insert(struct userlist *ul, char *user, char *secret)
{
	struct userlist_entry *e;

	if ((ul->count + 1) * 2 > ul->cap)
		grow(ul);
	e = slot_for(ul, user);
	if (e->user) {
		free(user);
		free(e->secret);
		e->secret = secret;
		return;
	}
	e->user = user;
	e->secret = secret;
	ul->count++;
}

struct userlist *userlist_new_empty(void)
{
	struct userlist *ul = calloc(1, sizeof(*ul));

	if (!ul)
		fatal("out of memory");
	alloc_slots(ul, 16);
	return ul;
}

void userlist_free(struct userlist *ul)
{
	if (!ul)
		return;
	for (size_t i = 0; i < ul->cap; i++) {
		free(ul->slots[i].user);
		free(ul->slots[i].secret);
	}
	free(ul->slots);
	free(ul);
}

const char *userlist_find(const struct userlist *ul, const char *user)
{
	if (!ul || !user)
		return NULL;
	return slot_for(ul, user)->secret;
}

const char *userlist_name_at(const struct userlist *ul, size_t *pos)
{
	while (ul && *pos < ul->cap) {
		const char *u = ul->slots[(*pos)++].user;
		if (u)
			return u;
	}
	return NULL;
}

size_t userlist_count(const struct userlist *ul)
{
	return ul ? ul->count : 0;
}

/* *pp at an opening '"': return the unquoted field ("" -> ") and move *pp
 * past the closing quote; NULL if the quote is not closed on the line. */
static char *read_field(const char **pp)
{
	const char *p = *pp + 1;
	char *out = malloc(strlen(p) + 1), *d = out;

	if (!out)
		fatal("out of memory");
	for (;; p++) {
		if (*p == '\0' || *p == '\n') {
			free(out);
			return NULL;
		}
		if (*p == '"' && p[1] != '"')
			break;
		if (*p == '"')
			p++;
		*d++ = *p;
	}
	*d = '\0';
	*pp = p + 1;
	return out;
}

static const char *skip_space(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

/* One line; 0 when it was a user, a comment or blank. */
static int parse_line(struct userlist *ul, const char *line, const char *path, int lineno,
		      struct config_error *err)
{
	const char *p = skip_space(line);
	char *user, *secret;

	if (*p == '\0' || *p == ';' || *p == '#')
		return 0;
	if (*p != '"') {
		config_error_set(err, "%s:%d: expected a double-quoted user name", path, lineno);
		return -1;
	}
	user = read_field(&p);
	if (!user) {
		config_error_set(err, "%s:%d: unterminated quoted user name", path, lineno);
		return -1;
	}
	p = skip_space(p);
	secret = *p == '"' ? read_field(&p) : NULL;
	if (!secret || user[0] == '\0') {
		config_error_set(err, "%s:%d: %s '%s'", path, lineno,
				 user[0] == '\0' ? "empty user name" :
				 *p == '"' ? "unterminated quoted secret for user" :
				 "missing double-quoted secret for user", user);
		free(user);
		free(secret);
		return -1;
	}
	if (strlen(secret) >= SECRET_MAX_LEN) {
		config_error_set(err, "%s:%d: secret for user '%s' is longer than %d bytes", path, lineno,
				 user, SECRET_MAX_LEN - 1);
		free(user);
		free(secret);
		return -1;
	}
	insert(ul, user, secret);
	return 0;
}

struct userlist *userlist_load(const char *path, struct config_error *err)
{
	struct userlist *ul;
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		config_error_set(err, "could not open auth_file '%s': %s", path, strerror(errno));
		return NULL;
	}
	ul = userlist_new_empty();
	while (rc == 0 && getline(&line, &cap, f) >= 0)
		rc = parse_line(ul, line, path, ++lineno, err);
	if (rc == 0 && ferror(f)) {
		config_error_set(err, "%s:%d: read error: %s", path, lineno, strerror(errno));
		rc = -1;
	}
	free(line);
	fclose(f);
	if (rc < 0) {
		userlist_free(ul);
		return NULL;
	}
	return ul;
}

static bool is_md5(const char *s)
{
	if (strncmp(s, "md5", 3) != 0 || strlen(s) != 35)
		return false;
	for (s += 3; *s; s++) {
		if (!isxdigit((unsigned char)*s))
			return false;
	}
	return true;
}

/* Length of the base64 run at s (at least one character). */
static size_t base64_span(const char *s)
{
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=");
}

/* SCRAM-SHA-256$<iterations>:<salt>$<storedkey>:<serverkey> */
static bool is_scram(const char *s)
{
	static const char prefix[] = "SCRAM-SHA-256$";
	size_t n;

	if (strncmp(s, prefix, sizeof(prefix) - 1) != 0)
		return false;
	s += sizeof(prefix) - 1;
	n = strspn(s, "0123456789");
	if (n == 0 || s[n] != ':' || strtol(s, NULL, 10) <= 0)
		return false;
	s += n + 1;
	if ((n = base64_span(s)) == 0 || s[n] != '$')
		return false;
	s += n + 1;
	if ((n = base64_span(s)) == 0 || s[n] != ':')
		return false;
	s += n + 1;
	n = base64_span(s);
	return n > 0 && s[n] == '\0';
}

enum userlist_kind userlist_secret_kind(const char *secret)
{
	if (is_md5(secret))
		return USERLIST_MD5;
	if (is_scram(secret))
		return USERLIST_SCRAM;
	return USERLIST_PLAIN;
}

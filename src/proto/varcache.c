/* pgcrew — parameter tracking. Names are interned in one table so a cache is
 * an array indexed by parameter, compared without string lookups; values
 * are pooled strings (strpool.h), shared by every connection that has them. */
#include "varcache.h"
#include "proto/build.h"
#include "strpool.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const builtin[] = {
	"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings",
	"application_name",
};

static char *names[VAR_MAX];
static int n_names;

void varcache_set_tracked(const char *extra_params)
{
	for (int i = (int)ARRAY_SIZE(builtin); i < n_names; i++)
		free(names[i]);
	n_names = 0;
	for (size_t i = 0; i < ARRAY_SIZE(builtin); i++)
		names[n_names++] = (char *)builtin[i];
	if (!extra_params)
		return;
	char *copy = xstrdup(extra_params), *save = NULL;
	for (char *t = strtok_r(copy, ", \t", &save); t && n_names < VAR_MAX;
	     t = strtok_r(NULL, ", \t", &save)) {
		if (strlen(t) <= VAR_NAME_MAX && varcache_lookup(t) < 0)
			names[n_names++] = xstrdup(t);
	}
	free(copy);
}

int varcache_count(void) { return n_names; }
const char *varcache_name(int i) { return names[i]; }

int varcache_lookup(const char *name)
{
	for (int i = 0; i < n_names; i++)
		if (strcasecmp(names[i], name) == 0)
			return i;
	return -1;
}

void varcache_init(struct varcache *vc)
{
	memset(vc, 0, sizeof(*vc));
}

void varcache_clear(struct varcache *vc)
{
	for (int i = 0; i < VAR_MAX; i++) {
		strpool_release(vc->val[i]);
		vc->val[i] = 0;
	}
}

static void set_index(struct varcache *vc, int i, const char *value)
{
	/* Servers repeat ParameterStatus values they already reported: no
	 * hashing or reference churn for those. */
	if (vc->val[i] && value && strcmp(strpool_str(vc->val[i]), value) == 0)
		return;
	uint32_t id = value ? strpool_intern(value) : 0;
	strpool_release(vc->val[i]);
	vc->val[i] = id;
}

void varcache_copy(struct varcache *dst, const struct varcache *src)
{
	for (int i = 0; i < VAR_MAX; i++) {
		if (dst->val[i] == src->val[i])
			continue;
		strpool_retain(src->val[i]);
		strpool_release(dst->val[i]);
		dst->val[i] = src->val[i];
	}
}

bool varcache_set(struct varcache *vc, const char *name, const char *value)
{
	int i = varcache_lookup(name);
	if (i < 0)
		return false;
	set_index(vc, i, value);
	return true;
}

const char *varcache_get(const struct varcache *vc, int i)
{
	return i >= 0 && i < VAR_MAX ? strpool_str(vc->val[i]) : NULL;
}

/* Copy v into d as the body of a string literal (quotes doubled; backslashes
 * are literal with standard_conforming_strings, which every supported server
 * has on); returns the end. */
static char *put_literal(char *d, const char *v)
{
	for (; *v; v++) {
		if (*v == '\'')
			*d++ = '\'';
		*d++ = *v;
	}
	return d;
}

static size_t literal_len(const char *v)
{
	size_t n = 0;
	for (; *v; v++)
		n += *v == '\'' ? 2 : 1;
	return n;
}

/* Append `SET name='value';` for the built-in parameters, and
 * `SELECT pg_catalog.set_config('name','value',false);` for the
 * track_extra_parameters ones: SET takes a quoted value of a list parameter
 * (search_path, GUC_LIST_QUOTE) as one element, so `SET search_path='a, b'`
 * would name a single schema "a, b", while set_config parses the text as
 * the server reported it. False, with nothing appended, when it does not
 * fit with its NUL. */
static bool put_set(char *buf, size_t len, size_t *n, int idx, const char *v)
{
	static const char set_fn[] = "SELECT pg_catalog.set_config('";
	const char *name = names[idx];
	bool builtin_var = idx < (int)ARRAY_SIZE(builtin);
	size_t need = builtin_var ? strlen("SET =''; ") + strlen(name)
				  : strlen(set_fn) + literal_len(name) + strlen("','',false); ");
	need += literal_len(v);
	if (need > len - *n)
		return false;
	char *d = buf + *n;
	if (builtin_var) {
		d += sprintf(d, "SET %s='", name);
	} else {
		d += sprintf(d, "%s", set_fn);
		d = put_literal(d, name);
		d += sprintf(d, "','");
	}
	d = put_literal(d, v);
	d += sprintf(d, builtin_var ? "';" : "',false);");
	*n = (size_t)(d - buf);
	return true;
}

/* An encoding name as PostgreSQL matches it: case and punctuation do not
 * count ("utf-8", "UTF_8" and "UTF8" are one), and "unicode" is UTF8. */
static void encoding_key(const char *v, char *out, size_t len)
{
	size_t n = 0;
	for (; *v && n + 1 < len; v++)
		if (isalnum((unsigned char)*v))
			out[n++] = (char)tolower((unsigned char)*v);
	out[n] = 0;
	if (strcmp(out, "unicode") == 0)
		snprintf(out, len, "utf8");
}

/* One DateStyle part ("ISO", " MDY"), trimmed, for a case-blind compare. */
static size_t part_len(const char *p, const char **start)
{
	while (*p == ' ')
		p++;
	*start = p;
	size_t n = strcspn(p, ",");
	while (n > 0 && p[n - 1] == ' ')
		n--;
	return n;
}

/* DateStyle "ISO" sets the output format and keeps the order, so it equals
 * what the server reports as "ISO, MDY"; two parts must both match. */
static bool same_datestyle(const char *want, const char *have)
{
	const char *a, *b;
	size_t na = part_len(want, &a), nb = part_len(have, &b);
	if (na != nb || strncasecmp(a, b, na) != 0)
		return false;
	const char *wa = strchr(want, ','), *ha = strchr(have, ',');
	if (!wa)
		return true;
	if (!ha)
		return false;
	na = part_len(wa + 1, &a);
	nb = part_len(ha + 1, &b);
	return na == nb && strncasecmp(a, b, na) == 0;
}

/* Equal as the server understands them, though spelt otherwise (the client's
 * startup spelling against the server's report): no SET is needed. */
static bool same_meaning(int idx, const char *want, const char *have)
{
	char a[64], b[64];
	if (!have)
		return false;
	if (strcasecmp(names[idx], "client_encoding") == 0) {
		encoding_key(want, a, sizeof(a));
		encoding_key(have, b, sizeof(b));
		return a[0] && strcmp(a, b) == 0;
	}
	if (strcasecmp(names[idx], "DateStyle") == 0)
		return same_datestyle(want, have);
	return false;
}

bool varcache_diff_query(const struct varcache *want, const struct varcache *have,
			 char *buf, size_t len)
{
	size_t n = 0;
	if (len == 0)
		return false;
	buf[0] = 0;
	for (int i = 0; i < n_names; i++) {
		/* Equal values are equal ids (one pool per process). */
		if (!want->val[i] || want->val[i] == have->val[i])
			continue;
		if (same_meaning(i, strpool_str(want->val[i]), have->val[i] ? strpool_str(have->val[i]) : NULL))
			continue;
		if (!put_set(buf, len, &n, i, strpool_str(want->val[i]))) {
			buf[0] = 0;
			return false;
		}
	}
	return n > 0;
}

size_t varcache_query_room(const struct varcache *want)
{
	size_t n = 1;
	for (int i = 0; i < n_names; i++)
		if (want->val[i])
			n += sizeof("SELECT pg_catalog.set_config('','',false); ") + literal_len(names[i]) +
			     literal_len(strpool_str(want->val[i]));
	return n;
}

void varcache_write_status(struct pktbuf *pb, const struct varcache *base, const struct varcache *over)
{
	for (int i = 0; i < n_names; i++) {
		uint32_t v = over && over->val[i] ? over->val[i] : base->val[i];
		if (v)
			pkt_write_parameter_status(pb, names[i], strpool_str(v));
	}
}

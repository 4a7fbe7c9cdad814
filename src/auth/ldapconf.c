/* pgcrew — LDAP authentication settings (see ldapconf.h). The semantics are
 * PostgreSQL's pg_hba LDAP options, which PgBouncer 1.25 also takes in
 * auth_ldap_options; checks that PostgreSQL does when loading pg_hba.conf
 * are done here so a bad set is reported before any network traffic. */
#include "auth/ldapconf.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ldapconf_init(struct ldapconf *lc)
{
	memset(lc, 0, sizeof(*lc));
	strcpy(lc->scheme, "ldap");
	lc->scope = LDAPCONF_SCOPE_SUB;
}

static bool put(char *dst, size_t size, const char *name, const char *v, char *err, size_t errlen)
{
	if (strlen(v) >= size) {
		snprintf(err, errlen, "LDAP option %s is too long", name);
		return false;
	}
	strcpy(dst, v);
	return true;
}

static bool set_port(struct ldapconf *lc, const char *v, char *err, size_t errlen)
{
	char *end;
	long port = strtol(v, &end, 10);
	if (!*v || *end || port < 1 || port > 65535) {
		snprintf(err, errlen, "invalid LDAP port number: \"%.64s\"", v);
		return false;
	}
	lc->port = (int)port;
	return true;
}

/* %XX decoding of one URL part into dst; false on a bad escape or overflow. */
static bool url_decode(const char *s, size_t n, char *dst, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch == '%') {
			if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2]))
				return false;
			char hex[3] = { s[i + 1], s[i + 2], 0 };
			ch = (char)strtol(hex, NULL, 16);
			i += 2;
		}
		if (o + 1 >= size)
			return false;
		dst[o++] = ch;
	}
	dst[o] = '\0';
	return true;
}

/* ldap[s]://host[:port][/basedn[?attrs[?scope[?filter]]]] (RFC 4516). */
static bool set_url(struct ldapconf *lc, const char *url, char *err, size_t errlen)
{
	const char *p, *host, *slash;
	char part[LDAPCONF_STR];

	if (strncmp(url, "ldap://", 7) == 0) {
		strcpy(lc->scheme, "ldap");
		host = url + 7;
	} else if (strncmp(url, "ldaps://", 8) == 0) {
		strcpy(lc->scheme, "ldaps");
		host = url + 8;
	} else {
		snprintf(err, errlen, "unsupported LDAP URL scheme: \"%.64s\"", url);
		return false;
	}
	slash = host + strcspn(host, "/");
	p = memchr(host, ':', (size_t)(slash - host));
	size_t hlen = (size_t)((p ? p : slash) - host);
	if (hlen >= sizeof(lc->server))
		goto bad;
	memcpy(lc->server, host, hlen);
	lc->server[hlen] = '\0';
	if (p) {
		size_t plen = (size_t)(slash - p - 1);
		if (plen == 0 || plen > 5)
			goto bad;
		memcpy(part, p + 1, plen);
		part[plen] = '\0';
		if (!set_port(lc, part, err, errlen))
			return false;
	}
	if (!*slash)
		return true;
	/* basedn ? attributes ? scope ? filter */
	const char *fields[4] = { slash + 1, NULL, NULL, NULL };
	for (int i = 1; i < 4 && fields[i - 1]; i++) {
		const char *q = strchr(fields[i - 1], '?');
		fields[i] = q ? q + 1 : NULL;
	}
	for (int i = 0; i < 4 && fields[i]; i++) {
		const char *end = i < 3 && fields[i + 1] ? fields[i + 1] - 1 : fields[i] + strlen(fields[i]);
		if (!url_decode(fields[i], (size_t)(end - fields[i]), part, sizeof(part)))
			goto bad;
		if (i == 0 && !put(lc->basedn, sizeof(lc->basedn), "ldapurl", part, err, errlen))
			return false;
		if (i == 1 && *part) {
			part[strcspn(part, ",")] = '\0';  /* the first attribute only */
			if (!put(lc->searchattribute, sizeof(lc->searchattribute), "ldapurl", part, err, errlen))
				return false;
		}
		if (i == 2 && *part) {
			if (strcmp(part, "base") == 0)
				lc->scope = LDAPCONF_SCOPE_BASE;
			else if (strcmp(part, "one") == 0)
				lc->scope = LDAPCONF_SCOPE_ONE;
			else if (strcmp(part, "sub") == 0)
				lc->scope = LDAPCONF_SCOPE_SUB;
			else
				goto bad;
		}
		if (i == 3 && *part && !put(lc->searchfilter, sizeof(lc->searchfilter), "ldapurl", part, err, errlen))
			return false;
	}
	return true;
bad:
	snprintf(err, errlen, "could not parse LDAP URL \"%.128s\"", url);
	return false;
}

bool ldapconf_set(struct ldapconf *lc, const char *name, const char *v, char *err, size_t errlen)
{
	static const struct { const char *name; size_t off, size; } strs[] = {
#define S(n, f) { n, offsetof(struct ldapconf, f), sizeof(((struct ldapconf *)0)->f) }
		S("ldapserver", server), S("ldapprefix", prefix), S("ldapsuffix", suffix),
		S("ldapbasedn", basedn), S("ldapbinddn", binddn), S("ldapbindpasswd", bindpasswd),
		S("ldapsearchattribute", searchattribute), S("ldapsearchfilter", searchfilter),
#undef S
	};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (strcmp(name, strs[i].name) == 0)
			return put((char *)lc + strs[i].off, strs[i].size, name, v, err, errlen);
	if (strcmp(name, "ldapport") == 0)
		return set_port(lc, v, err, errlen);
	if (strcmp(name, "ldapurl") == 0)
		return set_url(lc, v, err, errlen);
	if (strcmp(name, "ldapscheme") == 0) {
		if (strcmp(v, "ldap") != 0 && strcmp(v, "ldaps") != 0) {
			snprintf(err, errlen, "invalid ldapscheme value: \"%.64s\"", v);
			return false;
		}
		strcpy(lc->scheme, v);
		return true;
	}
	if (strcmp(name, "ldaptls") == 0) {
		lc->starttls = strcmp(v, "1") == 0;
		return true;
	}
	snprintf(err, errlen, "invalid LDAP key parameter: \"%.64s\"", name);
	return false;
}

/* One name=value word of auth_ldap_options; p is advanced past it. */
static bool next_word(const char **pp, char *name, size_t nlen, char *val, size_t vlen,
		      char *err, size_t errlen)
{
	const char *p = *pp, *start = p;
	size_t n = 0;

	while (*p && *p != '=' && !isspace((unsigned char)*p))
		p++;
	if (*p != '=' || p == start || (size_t)(p - start) >= nlen) {
		snprintf(err, errlen, "LDAP option \"%.*s\" is not in name=value form",
			 (int)strcspn(start, " \t\r\n") > 64 ? 64 : (int)strcspn(start, " \t\r\n"), start);
		return false;
	}
	memcpy(name, start, (size_t)(p - start));
	name[p - start] = '\0';
	p++;
	if (*p == '"') {
		for (p++;; p++) {
			if (!*p) {
				snprintf(err, errlen, "unterminated quoted value for LDAP option %s", name);
				return false;
			}
			if (*p == '"' && p[1] != '"')
				break;
			if (*p == '"')
				p++;
			if (n + 1 >= vlen)
				goto long_value;
			val[n++] = *p;
		}
		p++;
	} else {
		while (*p && !isspace((unsigned char)*p)) {
			if (n + 1 >= vlen)
				goto long_value;
			val[n++] = *p++;
		}
	}
	val[n] = '\0';
	*pp = p;
	return true;
long_value:
	snprintf(err, errlen, "LDAP option %s is too long", name);
	return false;
}

bool ldapconf_parse(struct ldapconf *lc, const char *text, char *err, size_t errlen)
{
	char name[64], val[LDAPCONF_STR * 2];
	const char *p = text ? text : "";

	ldapconf_init(lc);
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		if (!next_word(&p, name, sizeof(name), val, sizeof(val), err, errlen) ||
		    !ldapconf_set(lc, name, val, err, errlen))
			return false;
	}
	return ldapconf_finish(lc, err, errlen);
}

bool ldapconf_finish(struct ldapconf *lc, char *err, size_t errlen)
{
	bool simple = lc->prefix[0] || lc->suffix[0];
	bool search = lc->basedn[0] || lc->binddn[0] || lc->bindpasswd[0] ||
		lc->searchattribute[0] || lc->searchfilter[0];

	if (simple && search) {
		snprintf(err, errlen, "cannot use ldapbasedn, ldapbinddn, ldapbindpasswd, "
			 "ldapsearchattribute, ldapsearchfilter, or ldapurl together with ldapprefix");
		return false;
	}
	if (!simple && !lc->basedn[0]) {
		snprintf(err, errlen, "authentication method \"ldap\" requires argument \"ldapbasedn\", "
			 "\"ldapprefix\", or \"ldapsuffix\" to be set");
		return false;
	}
	if (lc->searchattribute[0] && lc->searchfilter[0]) {
		snprintf(err, errlen, "cannot use ldapsearchattribute together with ldapsearchfilter");
		return false;
	}
	if (!lc->server[0]) {
		snprintf(err, errlen, "authentication method \"ldap\" requires argument \"ldapserver\" to be set");
		return false;
	}
	lc->search = !simple;
	return true;
}

bool ldapconf_uris(const struct ldapconf *lc, char *out, size_t len)
{
	int port = lc->port ? lc->port : strcmp(lc->scheme, "ldaps") == 0 ? 636 : 389;
	size_t o = 0;

	for (const char *p = lc->server; *p;) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (!n)
			break;
		int w = snprintf(out + o, len - o, "%s%s://%.*s:%d", o ? " " : "", lc->scheme, (int)n, p, port);
		if (w < 0 || (size_t)w >= len - o)
			return false;
		o += (size_t)w;
		p += n;
	}
	return o > 0;
}

bool ldapconf_bind_dn(const struct ldapconf *lc, const char *user, char *out, size_t len)
{
	int w = snprintf(out, len, "%s%s%s", lc->prefix, user, lc->suffix);
	return w >= 0 && (size_t)w < len;
}

bool ldapconf_filter(const struct ldapconf *lc, const char *user, char *out, size_t len)
{
	static const char placeholder[] = "$username";
	size_t o = 0, ulen = strlen(user);

	if (strpbrk(user, "*()\\/"))
		return false;
	if (!lc->searchfilter[0]) {
		int w = snprintf(out, len, "(%s=%s)", lc->searchattribute[0] ? lc->searchattribute : "uid", user);
		return w >= 0 && (size_t)w < len;
	}
	for (const char *p = lc->searchfilter; *p;) {
		const char *piece = p;
		size_t n = 1;
		if (strncmp(p, placeholder, sizeof(placeholder) - 1) == 0) {
			piece = user;
			n = ulen;
			p += sizeof(placeholder) - 1;
		} else {
			p++;
		}
		if (o + n >= len)
			return false;
		memcpy(out + o, piece, n);
		o += n;
	}
	out[o] = '\0';
	return true;
}

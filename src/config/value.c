/* pgcrew — config value parsers: booleans, integers, sizes and times with
 * units, enum names. PgBouncer takes bare numbers (times in seconds); units
 * are a superset so a PgBouncer file always parses the same way here. */
#include "config/value.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct unit {
	const char *name;
	int64_t mult;
};

static const struct unit time_units[] = {
	{ "us", 1 }, { "ms", 1000 }, { "s", 1000000 }, { "min", 60000000 },
	{ "h", INT64_C(3600000000) }, { "d", INT64_C(86400000000) },
};

static const struct unit size_units[] = {
	{ "b", 1 }, { "kb", 1024 }, { "mb", 1024 * 1024 },
	{ "gb", INT64_C(1) << 30 }, { "tb", INT64_C(1) << 40 },
};

/* Multiplier for the unit text at s (after optional spaces); an empty
 * suffix gives dflt. -1 when the suffix is not a known unit. */
static int64_t unit_mult(const char *s, const struct unit *units, size_t n, int64_t dflt)
{
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '\0')
		return dflt;
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(s, units[i].name) == 0)
			return units[i].mult;
	}
	return -1;
}

int value_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "yes", "on", "true" };
	static const char *const no[] = { "no", "off", "false" };
	int64_t n;

	if (value_parse_int(s, &n) == 0) {
		*out = n != 0;
		return 0;
	}
	if (value_parse_enum(s, yes, ARRAY_SIZE(yes)) >= 0) {
		*out = true;
		return 0;
	}
	if (value_parse_enum(s, no, ARRAY_SIZE(no)) >= 0) {
		*out = false;
		return 0;
	}
	return -1;
}

int value_parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!isdigit((unsigned char)s[0]) && !(s[0] == '-' && isdigit((unsigned char)s[1])))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int value_parse_size(const char *s, int64_t *out)
{
	char *end;
	long long v;
	int64_t mult;

	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0)
		return -1;
	mult = unit_mult(end, size_units, ARRAY_SIZE(size_units), 1);
	if (mult < 0 || v > INT64_MAX / mult)
		return -1;
	*out = v * mult;
	return 0;
}

int value_parse_time(const char *s, usec_t *out)
{
	char *end;
	double v;
	int64_t mult;

	/* strtod would also take "inf", "nan", hex and leading blanks */
	if (!isdigit((unsigned char)s[0]) && s[0] != '.')
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || !isfinite(v))
		return -1;
	mult = unit_mult(end, time_units, ARRAY_SIZE(time_units), USEC_PER_SEC);
	if (mult < 0 || v * (double)mult >= 9.2e18)
		return -1;
	*out = (usec_t)llround(v * (double)mult);
	return 0;
}

int value_parse_enum(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++) {
		if (names[i] && strcasecmp(s, names[i]) == 0)
			return i;
	}
	return -1;
}

void value_format_time(usec_t v, char *buf, size_t len)
{
	snprintf(buf, len, "%g", (double)v / (double)USEC_PER_SEC);
}

int value_parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
	const char *colon = strrchr(s, ':');
	const char *h = s, *h_end = colon;
	int64_t p;

	if (!colon || colon == s || value_parse_int(colon + 1, &p) < 0 || p < 1 || p > 65535 ||
	    !isdigit((unsigned char)colon[1]))
		return -1;
	if (*s == '[') {                /* [::1]:9127 */
		if (colon[-1] != ']' || colon - s < 3)
			return -1;
		h = s + 1;
		h_end = colon - 1;
	}
	size_t n = (size_t)(h_end - h);
	if (n >= hostlen)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)h[i]) || h[i] == '[' || h[i] == ']' || (h[i] == ':' && *s != '['))
			return -1;
	memcpy(host, h, n);
	host[n] = 0;
	*port = (int)p;
	return 0;
}

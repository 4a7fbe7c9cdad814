/* pgcrew — config value syntax shared by [pgbouncer] settings and connection
 * strings: booleans, integers, byte sizes with units, times with units, and
 * enum names. Every parser consumes the whole string or fails. */
#ifndef PGCREW_CONFIG_VALUE_H
#define PGCREW_CONFIG_VALUE_H

#include "../types.h"

/* 0/1 (any integer: nonzero is true), yes/no, on/off, true/false. */
int value_parse_bool(const char *s, bool *out) MUSTCHECK;
/* strtol base 0 as PgBouncer: "0777" is octal, "0x10" hex. */
int value_parse_int(const char *s, int64_t *out) MUSTCHECK;
/* Bytes, optional unit B/kB/MB/GB/TB (1024-based, any case). */
int value_parse_size(const char *s, int64_t *out) MUSTCHECK;
/* Seconds (fractions allowed) or a number with unit us/ms/s/min/h/d. */
int value_parse_time(const char *s, usec_t *out) MUSTCHECK;
/* Index of s in names[0..n) (case-insensitive), or -1. */
int value_parse_enum(const char *s, const char *const *names, int n);
/* "host:port", "[v6addr]:port" or "*:port" (host "*" = every address);
 * the port 1-65535, the host without spaces. */
int value_parse_hostport(const char *s, char *host, size_t hostlen, int *port) MUSTCHECK;
/* Seconds printed with "%g", as PgBouncer's SHOW CONFIG does. */
void value_format_time(usec_t v, char *buf, size_t len);

#endif

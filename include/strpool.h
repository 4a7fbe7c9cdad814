/* pgcrew — interned, reference-counted strings for values that thousands of
 * connections share (client_encoding, DateStyle, application_name...): each
 * distinct value is stored once per process and named by a small id, so a
 * connection holds 4 bytes per value and equal values have equal ids.
 * Single-threaded: the event loop's thread only. */
#ifndef PGCREW_STRPOOL_H
#define PGCREW_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

/* The id of s, with one more reference; never 0. */
uint32_t strpool_intern(const char *s);
/* One more reference to id (0 is ignored). */
void strpool_retain(uint32_t id);
/* Drop one reference (0 is ignored); the last one frees the string. */
void strpool_release(uint32_t id);
/* The string of id; NULL for 0. Valid while a reference is held. */
const char *strpool_str(uint32_t id);
/* The same by pointer, for fields read as plain strings: the pooled copy
 * of s with one more reference, and the release of a pointer that
 * strpool_get returned (NULL is ignored). */
const char *strpool_get(const char *s);
void strpool_put(const char *p);
/* Distinct strings held (tests). */
size_t strpool_count(void);

#endif

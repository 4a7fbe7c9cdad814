/* pgcrew — shared helpers of the libFuzzer targets in test/fuzz/: input as a
 * NUL-terminated string, as a file (for the parsers that read paths), split
 * into parts at NUL bytes, or read front to back as a script's bytes. Each
 * target is one fuzz_<name>.c. */
#ifndef PGCREW_FUZZ_H
#define PGCREW_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd NUL-terminated copy (embedded NULs end it early, as in C). */
char *fuzz_str(const uint8_t *data, size_t size);

/* Writes data to this process's scratch file (name fixed per process and
 * tag) and returns its path; the file is rewritten on every call. */
const char *fuzz_file(const char *tag, const uint8_t *data, size_t size);

/* The next part of *data up to a NUL (or the end), as a malloc'd string;
 * advances *data and *size past the NUL. */
char *fuzz_next_part(const uint8_t **data, size_t *size, size_t *len);

/* The input as a script (fuzz_session, fuzz_stream), front to back; past
 * its end every byte reads 0. */
struct input {
	const uint8_t *p;
	size_t n;
};

uint8_t in_byte(struct input *in);
/* Up to max bytes (fewer at the end); *bytes points into the input. */
size_t in_take(struct input *in, const uint8_t **bytes, size_t max);
/* One of n table entries. */
size_t in_pick(struct input *in, size_t n);

/* A growing byte buffer (malloc'd; aborts when memory runs out). */
struct bytes {
	uint8_t *p;
	size_t len, cap;
};

void bytes_add(struct bytes *b, const void *p, size_t n);
/* Drops the first n bytes. */
void bytes_drop(struct bytes *b, size_t n);
void bytes_free(struct bytes *b);

#endif

/* pgcrew — the helpers of fuzz.h, linked into every fuzz target. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *fuzz_str(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

const char *fuzz_file(const char *tag, const uint8_t *data, size_t size)
{
	static char path[256];
	const char *dir = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/pgcrew-fuzz-%ld-%s", dir && *dir ? dir : "/tmp",
		 (long)getpid(), tag);
	FILE *f = fopen(path, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	return path;
}

char *fuzz_next_part(const uint8_t **data, size_t *size, size_t *len)
{
	const uint8_t *nul = *size ? memchr(*data, 0, *size) : NULL;
	size_t n = nul ? (size_t)(nul - *data) : *size;
	char *s = fuzz_str(*data, n);
	*data += nul ? n + 1 : n;
	*size -= nul ? n + 1 : n;
	if (len)
		*len = n;
	return s;
}

uint8_t in_byte(struct input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

size_t in_take(struct input *in, const uint8_t **bytes, size_t max)
{
	size_t n = in->n < max ? in->n : max;
	*bytes = in->p;
	in->p += n;
	in->n -= n;
	return n;
}

size_t in_pick(struct input *in, size_t n)
{
	return in_byte(in) % n;
}

void bytes_add(struct bytes *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			abort();
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void bytes_drop(struct bytes *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

void bytes_free(struct bytes *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

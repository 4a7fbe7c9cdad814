/* pgcrew — memory a large, short-lived buffer leaves behind goes back to
 * the kernel: glibc keeps freed heap pages, and once a large mmap'd block
 * is freed it raises its mmap threshold, so the next large buffers come
 * from the heap and stay (SHOW USERS over 100,000 auth_file users left
 * 40 MB in each worker). */
#ifndef PGCREW_HEAPTRIM_H
#define PGCREW_HEAPTRIM_H

#include <stdbool.h>
#include <stddef.h>

/* A buffer this large or larger was freed: a trim is due. */
#define HEAPTRIM_MIN_BYTES (256 * 1024)

void heaptrim_note(size_t bytes);
/* Give free heap memory back when a large buffer was freed since the
 * last call (the janitor's pass: never on the hot path). True when it did. */
bool heaptrim_run(void);

#endif

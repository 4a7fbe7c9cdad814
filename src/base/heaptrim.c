/* pgcrew — trimming the heap after large buffers went (heaptrim.h): a
 * flag set where they are freed, one malloc_trim at the next janitor pass,
 * so a burst of large console results costs one trim, and a pooler that
 * never builds one never trims. */
#include "heaptrim.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

static bool due;

void heaptrim_note(size_t bytes)
{
	if (bytes >= HEAPTRIM_MIN_BYTES)
		due = true;
}

bool heaptrim_run(void)
{
	if (!due)
		return false;
	due = false;
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
	return true;
}

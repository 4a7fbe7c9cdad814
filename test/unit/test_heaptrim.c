/* pgcrew — unit tests for heaptrim: a trim is due only after a buffer of
 * HEAPTRIM_MIN_BYTES or more was freed, runs once for any number of them,
 * and a pktbuf that grew that large notes itself when freed. (What the
 * trim gives back is measured with glibc's allocator, not here: the test
 * build's sanitizer has an allocator of its own.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "heaptrim.h"
#include "proto/build.h"

static void test_due_after_a_large_free(void **state)
{
	(void)state;
	(void)heaptrim_run();                        /* whatever came before */
	assert_false(heaptrim_run());
	heaptrim_note(HEAPTRIM_MIN_BYTES - 1);
	assert_false(heaptrim_run());
	heaptrim_note(HEAPTRIM_MIN_BYTES);
	heaptrim_note(10 * HEAPTRIM_MIN_BYTES);
	assert_true(heaptrim_run());
	assert_false(heaptrim_run());                /* once for both */
}

static void test_pktbuf_notes_itself(void **state)
{
	struct pktbuf pb;
	static uint8_t chunk[4096];
	(void)state;
	(void)heaptrim_run();
	pktbuf_init(&pb, 64);
	pktbuf_put_bytes(&pb, chunk, sizeof(chunk));
	pktbuf_free(&pb);
	assert_false(heaptrim_run());                /* small */
	pktbuf_init(&pb, 64);
	for (size_t n = 0; n < HEAPTRIM_MIN_BYTES; n += sizeof(chunk))
		pktbuf_put_bytes(&pb, chunk, sizeof(chunk));
	assert_false(pktbuf_failed(&pb));
	pktbuf_free(&pb);
	assert_true(heaptrim_run());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_due_after_a_large_free),
		cmocka_unit_test(test_pktbuf_notes_itself),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

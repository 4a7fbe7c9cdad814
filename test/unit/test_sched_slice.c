/* pgcrew — unit tests for sched_slice_set against the running kernel: the
 * slice it reports as set is the one /proc shows, 0 gives the kernel's
 * default back, the nice value survives, and a process under another
 * policy is left alone. On a kernel without custom slices (before 6.12)
 * the verdict must say so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sched_slice.h"

/* se.slice of this thread in ns, from /proc; -1 when the kernel has none. */
static long long proc_slice(void)
{
	char path[64], line[256];
	long long v = -1;
	snprintf(path, sizeof(path), "/proc/self/task/%ld/sched", (long)syscall(SYS_gettid));
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "se.slice", 8) == 0) {
			const char *colon = strchr(line, ':');
			v = colon ? atoll(colon + 1) : -1;
		}
	}
	fclose(f);
	return v;
}

static bool kernel_has_custom_slices(void)
{
	struct utsname u;
	int major = 0, minor = 0;
	assert_int_equal(uname(&u), 0);
	assert_true(sscanf(u.release, "%d.%d", &major, &minor) == 2);
	return major > 6 || (major == 6 && minor >= 12);
}

static void test_set_and_reset(void **state)
{
	(void)state;
	long long def = proc_slice();
	enum slice_verdict v = sched_slice_set(300);
	if (!kernel_has_custom_slices()) {
		assert_int_equal(v, SLICE_UNSUPPORTED);
		return;
	}
	assert_int_equal(v, SLICE_SET);
	assert_int_equal(proc_slice(), 300000);
	assert_int_equal(sched_slice_set(2000), SLICE_SET);
	assert_int_equal(proc_slice(), 2000000);
	assert_int_equal(sched_slice_set(0), SLICE_SET);
	assert_int_equal(proc_slice(), def);
	assert_true(def != 300000 && def != 2000000);
}

static void test_keeps_nice(void **state)
{
	(void)state;
	errno = 0;
	int before = getpriority(PRIO_PROCESS, 0);
	assert_int_equal(errno, 0);
	/* raising nice needs no privilege; the test process ends soon after */
	assert_int_equal(setpriority(PRIO_PROCESS, 0, before + 1), 0);
	enum slice_verdict v = sched_slice_set(500);
	assert_true(v == SLICE_SET || v == SLICE_UNSUPPORTED);
	assert_int_equal(getpriority(PRIO_PROCESS, 0), before + 1);
	assert_int_equal(sched_slice_set(0), v);
}

static void test_other_policy_left_alone(void **state)
{
	(void)state;
	struct sched_param none = { 0 };
	long long before = proc_slice();
	assert_int_equal(sched_setscheduler(0, SCHED_BATCH, &none), 0);
	assert_int_equal(sched_slice_set(300), SLICE_OTHER_POLICY);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	assert_int_equal(proc_slice(), before);
	assert_int_equal(sched_setscheduler(0, SCHED_OTHER, &none), 0);
}

/* The supervisor's SCHED_BATCH: on and off keep the nice value; off undoes
 * only a SCHED_BATCH this process set, the way a forked worker gives back
 * its supervisor's and leaves an operator's chrt -b. */
static void test_batch_on_and_off(void **state)
{
	(void)state;
	struct sched_param none = { 0 };
	int nice = getpriority(PRIO_PROCESS, 0);
	assert_int_equal(sched_batch_set(false), SLICE_SET);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	assert_int_equal(sched_batch_set(true), SLICE_SET);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	assert_int_equal(sched_batch_set(true), SLICE_SET);
	assert_int_equal(sched_slice_set(300), SLICE_OTHER_POLICY);
	assert_int_equal(getpriority(PRIO_PROCESS, 0), nice);
	assert_int_equal(sched_batch_set(false), SLICE_SET);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	assert_int_equal(getpriority(PRIO_PROCESS, 0), nice);

	/* an operator's SCHED_BATCH (and any other policy) stays */
	assert_int_equal(sched_setscheduler(0, SCHED_BATCH, &none), 0);
	assert_int_equal(sched_batch_set(false), SLICE_OTHER_POLICY);
	assert_int_equal(sched_batch_set(true), SLICE_OTHER_POLICY);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	assert_int_equal(sched_setscheduler(0, SCHED_OTHER, &none), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_and_reset),
		cmocka_unit_test(test_keeps_nice),
		cmocka_unit_test(test_other_policy_left_alone),
		cmocka_unit_test(test_batch_on_and_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

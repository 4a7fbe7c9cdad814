/* pgcrew — how the Linux scheduler treats pgcrew's processes. A worker
 * wakes for a few microseconds per message; Linux (EEVDF, 6.12+) lets a
 * task that asks for a short slice preempt a running one with a longer
 * slice when it wakes, so relayed messages wait less behind backends and
 * clients. The supervisor runs as SCHED_BATCH: its wake-ups (a worker's
 * slot request) then do not preempt the worker that sent it mid-turn.
 * Neither changes a task's weight (its share of CPU). */
#include "sched_slice.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* sched_setattr(2)'s struct: glibc (2.36) has no wrapper for the call. */
struct slice_attr {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime;           /* SCHED_OTHER: the requested slice, in ns */
	uint64_t deadline;
	uint64_t period;
};

#define SLICE_KEEP_FLAGS 0x01   /* SCHED_FLAG_RESET_ON_FORK */

#ifdef SYS_sched_setattr
/* This process made itself SCHED_BATCH (a forked worker inherits the flag
 * with the policy, and gives the policy back); an operator's chrt is not
 * ours to undo. */
static bool batch_ours;

/* A failed call: a kernel without the call, or one that knows a smaller
 * struct than ours (E2BIG), has no custom slices. */
static enum slice_verdict failed(void)
{
	return errno == E2BIG || errno == ENOSYS ? SLICE_UNSUPPORTED : SLICE_FAILED;
}

static int get_attr(struct slice_attr *a)
{
	memset(a, 0, sizeof(*a));
	return (int)syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof(*a), 0);
}

enum slice_verdict sched_slice_set(usec_t slice_usec)
{
	struct slice_attr a;
	uint64_t want = (uint64_t)slice_usec * 1000;

	if (get_attr(&a) != 0)
		return failed();
	if (a.policy != SCHED_OTHER)
		return SLICE_OTHER_POLICY;
	a.size = sizeof(a);
	a.flags &= SLICE_KEEP_FLAGS;
	a.runtime = want;       /* the nice value read above is kept */
	if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
		return failed();
	/* Kernels before 6.12 accept and ignore runtime for SCHED_OTHER. */
	if (get_attr(&a) != 0)
		return SLICE_FAILED;
	return want == 0 || a.runtime == want ? SLICE_SET : SLICE_UNSUPPORTED;
}

static enum slice_verdict set_policy(struct slice_attr *a, uint32_t policy)
{
	a->size = sizeof(*a);
	a->policy = policy;
	a->flags &= SLICE_KEEP_FLAGS;
	a->runtime = 0;         /* the kernel's slice; the nice value is kept */
	return syscall(SYS_sched_setattr, 0, a, 0) == 0 ? SLICE_SET : failed();
}

enum slice_verdict sched_batch_set(bool on)
{
	struct slice_attr a;
	if (get_attr(&a) != 0)
		return failed();
	if (a.policy == SCHED_BATCH && batch_ours) {
		if (on)
			return SLICE_SET;
		enum slice_verdict v = set_policy(&a, SCHED_OTHER);
		batch_ours = v != SLICE_SET;
		return v;
	}
	if (a.policy != SCHED_OTHER)
		return SLICE_OTHER_POLICY;
	if (!on)
		return SLICE_SET;
	enum slice_verdict v = set_policy(&a, SCHED_BATCH);
	batch_ours = v == SLICE_SET;
	return v;
}
#else
enum slice_verdict sched_slice_set(usec_t slice_usec)
{
	(void)slice_usec;
	return SLICE_UNSUPPORTED;
}

enum slice_verdict sched_batch_set(bool on)
{
	(void)on;
	return SLICE_UNSUPPORTED;
}
#endif

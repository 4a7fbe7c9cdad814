/* pgcrew — the CPU slice a worker asks the Linux scheduler for
 * (worker_sched_slice) and the supervisor's SCHED_BATCH
 * (supervisor_sched_batch). The calls return a verdict; the caller decides
 * what to log. */
#ifndef PGCREW_SCHED_SLICE_H
#define PGCREW_SCHED_SLICE_H

#include <stdbool.h>

#include "util.h"

enum slice_verdict {
	SLICE_SET,          /* the kernel took the slice (or the default, for 0) */
	SLICE_UNSUPPORTED,  /* the kernel keeps its own slice: Linux before 6.12 */
	SLICE_OTHER_POLICY, /* the process runs under another policy (chrt): left alone */
	SLICE_FAILED,       /* sched_setattr/getattr failed; errno says why */
};

/* Asks for slice_usec (0: the kernel's default) for the calling thread,
 * keeping its policy and nice value. */
enum slice_verdict sched_slice_set(usec_t slice_usec);

/* on: SCHED_OTHER becomes SCHED_BATCH (nice kept). off: a SCHED_BATCH this
 * process (or the parent it was forked from) set becomes SCHED_OTHER again.
 * Another policy, or a SCHED_BATCH set from outside, is left alone
 * (SLICE_OTHER_POLICY). */
enum slice_verdict sched_batch_set(bool on);

#endif

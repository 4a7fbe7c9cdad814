/* pgcrew — the CPU slice a worker asks the Linux scheduler for
 * (worker_sched_slice). The call returns a verdict; the worker decides
 * what to log. */
#ifndef PGCREW_SCHED_SLICE_H
#define PGCREW_SCHED_SLICE_H

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

#endif

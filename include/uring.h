/* pgcrew — io_uring as a syscall batcher (setting io_uring). A worker's
 * stream layer gathers the receives and sends of one loop turn and runs
 * them with one io_uring_enter each batch instead of one recv or send per
 * socket. Every operation is non-blocking (MSG_DONTWAIT) and done when the
 * call returns: nothing stays in flight between batches, so buffers and
 * sockets need no lifetime rules beyond the call. */
#ifndef PGCREW_URING_H
#define PGCREW_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest batch: more operations are run in several calls. */
#define URING_BATCH 256

enum uring_verdict {
	URING_READY,        /* the ring is set up and behaves as the batches need */
	URING_NOT_BUILT,    /* pgcrew was built without liburing */
	URING_REFUSED,      /* the kernel refused a ring (too old, io_uring_disabled, seccomp); errno */
	URING_UNFIT,        /* a ring, but a non-blocking receive did not finish at once */
};

struct uring_op {
	int fd;
	bool send;              /* else a receive */
	void *buf;
	uint32_t len;
	int32_t res;            /* after uring_run: bytes, or -errno */
};

/* Sets up this process's ring (once; a second call returns the first
 * verdict). A forked child must not use its parent's ring: workers call
 * this after the fork. */
enum uring_verdict uring_init(void);
bool uring_ready(void);
/* Runs ops[0..n) (at most URING_BATCH), in order, and fills each res.
 * Returns the number of io_uring_enter calls made, or -1 (errno) when the
 * ring failed, in which case every res is -EIO. */
int uring_run(struct uring_op *ops, int n);
/* Closes the ring (worker exit). */
void uring_free(void);
/* Batches and io_uring_enter calls run so far by this process. */
uint64_t uring_batches(void);
uint64_t uring_ops(void);

#endif

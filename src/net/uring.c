/* pgcrew — io_uring as a syscall batcher: a batch of non-blocking receives
 * and sends on sockets, submitted and reaped with one io_uring_enter. On
 * loopback TCP a recv or send costs about as much in entering the kernel as
 * in TCP itself; a loop turn that relays ten messages enters it twice
 * instead of twenty times. The ring is private to the process that made it. */
#include "uring.h"
#include "build-config.h"

#include <errno.h>
#include <string.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#include <sys/socket.h>
#include <unistd.h>

static struct io_uring ring;
static bool tried;
static enum uring_verdict verdict;
static int saved_errno;
static uint64_t n_batches, n_ops;

/* The batches rely on MSG_DONTWAIT making an operation finish inside the
 * call (with -EAGAIN when the socket has nothing): a kernel that would
 * instead wait for readiness in the background is no syscall batcher. */
static bool dontwait_finishes(void)
{
	int sv[2];
	char byte;
	struct io_uring_cqe *cqe = NULL;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_recv(sqe, sv[0], &byte, 1, MSG_DONTWAIT);
	bool ok = io_uring_submit(&ring) == 1 && io_uring_peek_cqe(&ring, &cqe) == 0 &&
		  cqe->res == -EAGAIN;
	if (cqe)
		io_uring_cqe_seen(&ring, cqe);
	/* Closing the sockets ends a receive left waiting (res 0 or -ECANCELED). */
	close(sv[0]);
	close(sv[1]);
	if (!ok && io_uring_wait_cqe(&ring, &cqe) == 0)
		io_uring_cqe_seen(&ring, cqe);
	return ok;
}

static int setup(void)
{
	/* One task submits, and completions are taken in that task's own
	 * calls: no interrupting task work (Linux 6.0+; plain ring before). */
	int rc = io_uring_queue_init(URING_BATCH, &ring,
				     IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
				     IORING_SETUP_SUBMIT_ALL);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(URING_BATCH, &ring, 0);
	return rc;
}

enum uring_verdict uring_init(void)
{
	if (tried) {
		errno = saved_errno;
		return verdict;
	}
	tried = true;
	int rc = setup();
	if (rc < 0) {
		saved_errno = errno = -rc;
		return verdict = URING_REFUSED;
	}
	if (!dontwait_finishes()) {
		io_uring_queue_exit(&ring);
		saved_errno = 0;
		return verdict = URING_UNFIT;
	}
	return verdict = URING_READY;
}

bool uring_ready(void)
{
	return tried && verdict == URING_READY;
}

static void prep(const struct uring_op *op, int i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	if (op->send)
		io_uring_prep_send(sqe, op->fd, op->buf, op->len, MSG_DONTWAIT | MSG_NOSIGNAL);
	else
		io_uring_prep_recv(sqe, op->fd, op->buf, op->len, MSG_DONTWAIT);
	io_uring_sqe_set_data64(sqe, (uint64_t)i);
}

static int fail_all(struct uring_op *ops, int n, int err)
{
	for (int i = 0; i < n; i++)
		ops[i].res = -EIO;
	errno = err;
	return -1;
}

int uring_run(struct uring_op *ops, int n)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	if (!uring_ready() || n <= 0 || n > URING_BATCH)
		return n == 0 ? 0 : fail_all(ops, n, EINVAL);
	for (int i = 0; i < n; i++)
		prep(&ops[i], i);
	int rc;
	do
		rc = io_uring_submit_and_wait(&ring, (unsigned)n);
	while (rc == -EINTR);
	if (rc < 0)
		return fail_all(ops, n, -rc);
	io_uring_for_each_cqe(&ring, head, cqe) {
		uint64_t i = io_uring_cqe_get_data64(cqe);
		if (i < (uint64_t)n)
			ops[i].res = cqe->res;
		seen++;
	}
	io_uring_cq_advance(&ring, seen);
	if (seen != (unsigned)n)
		return fail_all(ops, n, EIO);
	n_batches++;
	n_ops += (uint64_t)n;
	return 1;
}

void uring_free(void)
{
	if (uring_ready())
		io_uring_queue_exit(&ring);
	tried = false;
}

uint64_t uring_batches(void) { return n_batches; }
uint64_t uring_ops(void) { return n_ops; }

#else /* !HAVE_LIBURING */

enum uring_verdict uring_init(void) { return URING_NOT_BUILT; }
bool uring_ready(void) { return false; }
int uring_run(struct uring_op *ops, int n)
{
	for (int i = 0; i < n; i++)
		ops[i].res = -EIO;
	errno = ENOSYS;
	return n == 0 ? 0 : -1;
}
void uring_free(void) {}
uint64_t uring_batches(void) { return 0; }
uint64_t uring_ops(void) { return 0; }

#endif

/* pgcrew — unit tests for the io_uring syscall batcher: a batch of sends
 * and receives on socketpairs runs in order in one call, a receive on an
 * empty socket and a send to a full one finish at once with -EAGAIN, a bad
 * descriptor fails alone, and an empty batch costs nothing. Skipped (with
 * a line saying so) where the kernel gives no ring. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uring.h"

#define PAIRS 8

static int pairs[PAIRS][2];

static int setup(void **state)
{
	(void)state;
	for (int i = 0; i < PAIRS; i++)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pairs[i]) < 0)
			return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < PAIRS; i++) {
		close(pairs[i][0]);
		close(pairs[i][1]);
	}
	return 0;
}

static void test_sends_then_receives(void **state)
{
	struct uring_op ops[PAIRS];
	char out[PAIRS][16], in[PAIRS][16];
	uint64_t b0 = uring_batches(), o0 = uring_ops();

	(void)state;
	for (int i = 0; i < PAIRS; i++) {
		snprintf(out[i], sizeof(out[i]), "message %d", i);
		ops[i] = (struct uring_op){ .fd = pairs[i][0], .send = true, .buf = out[i],
					    .len = (uint32_t)strlen(out[i]) + 1 };
	}
	assert_int_equal(uring_run(ops, PAIRS), 1);
	for (int i = 0; i < PAIRS; i++) {
		assert_int_equal(ops[i].res, (int32_t)strlen(out[i]) + 1);
		ops[i] = (struct uring_op){ .fd = pairs[i][1], .buf = in[i], .len = sizeof(in[i]) };
	}
	assert_int_equal(uring_run(ops, PAIRS), 1);
	for (int i = 0; i < PAIRS; i++) {
		assert_int_equal(ops[i].res, (int32_t)strlen(out[i]) + 1);
		assert_string_equal(in[i], out[i]);
	}
	assert_int_equal(uring_batches(), b0 + 2);
	assert_int_equal(uring_ops(), o0 + 2 * PAIRS);
}

static void test_nothing_to_read_finishes_at_once(void **state)
{
	char buf[8];
	struct uring_op op = { .fd = pairs[0][1], .buf = buf, .len = sizeof(buf) };
	(void)state;
	assert_int_equal(uring_run(&op, 1), 1);
	assert_int_equal(op.res, -EAGAIN);
}

static void test_full_socket_finishes_at_once(void **state)
{
	static char big[65536];
	(void)state;
	while (send(pairs[1][0], big, sizeof(big), MSG_DONTWAIT) > 0)
		;
	struct uring_op ops[2] = {
		{ .fd = pairs[1][0], .send = true, .buf = big, .len = 100 },
		{ .fd = pairs[2][0], .send = true, .buf = big, .len = 100 },
	};
	assert_int_equal(uring_run(ops, 2), 1);
	assert_int_equal(ops[0].res, -EAGAIN);
	assert_int_equal(ops[1].res, 100);           /* the other socket is not held up */
}

static void test_bad_descriptor_fails_alone(void **state)
{
	char buf[4] = "abc";
	int fd = open("/dev/null", O_RDONLY);
	(void)state;
	assert_true(fd >= 0);
	struct uring_op ops[3] = {
		{ .fd = pairs[3][0], .send = true, .buf = buf, .len = 4 },
		{ .fd = fd, .send = true, .buf = buf, .len = 4 },        /* not a socket */
		{ .fd = pairs[4][0], .send = true, .buf = buf, .len = 4 },
	};
	assert_int_equal(uring_run(ops, 3), 1);
	assert_int_equal(ops[0].res, 4);
	assert_int_equal(ops[1].res, -ENOTSOCK);
	assert_int_equal(ops[2].res, 4);
	close(fd);
}

static void test_peer_gone(void **state)
{
	char buf[4] = "abc";
	(void)state;
	close(pairs[5][1]);
	pairs[5][1] = open("/dev/null", O_RDONLY);     /* teardown closes something */
	struct uring_op op = { .fd = pairs[5][0], .send = true, .buf = buf, .len = 4 };
	assert_int_equal(uring_run(&op, 1), 1);
	assert_int_equal(op.res, -EPIPE);              /* MSG_NOSIGNAL: no SIGPIPE */
}

static void test_batch_limits(void **state)
{
	static struct uring_op ops[URING_BATCH + 1];
	(void)state;
	assert_int_equal(uring_run(ops, 0), 0);
	assert_int_equal(uring_run(ops, URING_BATCH + 1), -1);   /* the caller splits batches */
	assert_int_equal(ops[0].res, -EIO);
	assert_int_equal(ops[URING_BATCH].res, -EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sends_then_receives, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_to_read_finishes_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_socket_finishes_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_descriptor_fails_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_limits, setup, teardown),
	};
	enum uring_verdict v = uring_init();
	assert_int_equal(uring_init(), v);             /* once: the same verdict */
	if (v != URING_READY) {
		printf("io_uring not tested: %s\n", v == URING_NOT_BUILT ? "built without liburing"
			: v == URING_REFUSED ? strerror(errno) : "non-blocking receives wait in the ring");
		return 0;
	}
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	uring_free();
	return failed;
}

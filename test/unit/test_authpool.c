/* pgcrew — unit tests for auth/authpool on a private event_base: answers
 * come back to the loop, an owner that went away is never touched, and the
 * queue limit refuses the job after the 64th. The "checks" block on a pipe
 * the test controls; the owners are plain structs, not clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <event2/event.h>
#include <poll.h>
#include <unistd.h>

#include "auth/authpool.h"
#include "util.h"

struct owner {
	struct authpool_job *auth_job;
};

static struct event_base *base;
static int gate[2];                /* a byte written per check to let through */
static int done_calls;
static struct owner *done_owner;
static char done_password[64];

static void run_wait_gate(struct authpool_job *j)
{
	char b;
	j->ok = read(gate[0], &b, 1) == 1 && strcmp(j->password, "right") == 0;
}

static void on_done(void *owner, struct authpool_job *j)
{
	done_calls++;
	done_owner = owner;
	strlcpy_(done_password, j->ok ? j->password : "", sizeof(done_password));
}

static struct authpool_job *job(const char *pw)
{
	struct authpool_job *j = xcalloc(1, sizeof(*j));
	j->run = run_wait_gate;
	j->done = on_done;
	j->method = "TEST";
	strlcpy_(j->user, "alice", sizeof(j->user));
	strlcpy_(j->password, pw, sizeof(j->password));
	return j;
}

/* Run the loop until every job came back (bounded: 10 s). */
static void drain(void)
{
	for (int i = 0; i < 1000 && authpool_pending() > 0; i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	assert_int_equal(authpool_pending(), 0);
}

static void open_gate(int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(write(gate[1], "x", 1), 1);
}

static bool submit(struct owner *o, struct authpool_job *j)
{
	return authpool_submit(base, j, o, &o->auth_job);
}

static void test_answer_reaches_client(void **state)
{
	struct owner c = { 0 };

	(void)state;
	done_calls = 0;
	assert_true(submit(&c, job("right")));
	assert_ptr_equal(c.auth_job->owner, &c);
	open_gate(1);
	drain();
	assert_int_equal(done_calls, 1);
	assert_ptr_equal(done_owner, &c);
	assert_string_equal(done_password, "right");
	assert_null(c.auth_job);
}

static void test_client_gone_is_not_touched(void **state)
{
	struct owner c = { 0 };

	(void)state;
	done_calls = 0;
	assert_true(submit(&c, job("right")));
	authpool_owner_gone(&c.auth_job);
	assert_null(c.auth_job);
	open_gate(1);
	drain();
	assert_int_equal(done_calls, 0);
}

static void test_queue_limit(void **state)
{
	static struct owner cs[AUTHPOOL_QUEUE_MAX + 1];

	(void)state;
	done_calls = 0;
	memset(cs, 0, sizeof(cs));
	for (int i = 0; i < AUTHPOOL_QUEUE_MAX; i++)
		assert_true(submit(&cs[i], job("wrong")));
	assert_int_equal(authpool_pending(), AUTHPOOL_QUEUE_MAX);
	assert_false(submit(&cs[AUTHPOOL_QUEUE_MAX], job("right")));
	assert_null(cs[AUTHPOOL_QUEUE_MAX].auth_job);
	open_gate(AUTHPOOL_QUEUE_MAX);
	drain();
	assert_int_equal(done_calls, AUTHPOOL_QUEUE_MAX);
	assert_string_equal(done_password, "");     /* wrong password: ok false */
	/* Room again. */
	assert_true(submit(&cs[0], job("right")));
	open_gate(1);
	drain();
	assert_string_equal(done_password, "right");
}

static void test_unsubmitted_job_freed_on_close(void **state)
{
	struct owner c = { 0 };

	(void)state;
	c.auth_job = job("x");         /* prepared, never queued (ASan checks the free) */
	authpool_owner_gone(&c.auth_job);
	assert_null(c.auth_job);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_reaches_client),
		cmocka_unit_test(test_client_gone_is_not_touched),
		cmocka_unit_test(test_queue_limit),
		cmocka_unit_test(test_unsubmitted_job_freed_on_close),
	};
	base = event_base_new();
	if (pipe(gate) < 0)
		return 1;
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	return rc;
}

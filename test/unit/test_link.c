/* pgcrew — unit tests for the client-server link (link.c): attach sets
 * both sides and their streams' peers; each kind of detach clears them and
 * keeps or forgets what one side was forwarding to the other; attaching a
 * linked or foreign pair, or detaching a pair not linked to each other,
 * stops the process (exit 1), checked in a child. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "link.h"
#include "log.h"

static struct pool pool_a, pool_b;

static void pair(struct client *c, struct server *sv)
{
	memset(c, 0, sizeof(*c));
	memset(sv, 0, sizeof(*sv));
	c->id = 1;
	sv->id = 2;
	c->pool = sv->pool = &pool_a;
}

static void test_attach_detach(void **state)
{
	static const enum link_end ends[] = { LINK_RELEASE, LINK_SERVER_GONE, LINK_CLIENT_GONE,
					      LINK_BOTH_GO };
	struct client c;
	struct server sv;
	(void)state;
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		pair(&c, &sv);
		link_attach(&c, &sv);
		assert_ptr_equal(c.link, &sv);
		assert_ptr_equal(sv.link, &c);
		assert_ptr_equal(c.s.peer, &sv.s);
		assert_ptr_equal(sv.s.peer, &c.s);
		/* Each is forwarding to the other when they part. */
		c.s.send_dst = &sv.s;
		sv.s.send_dst = &c.s;
		link_detach(&c, &sv, ends[i]);
		assert_null(c.link);
		assert_null(sv.link);
		assert_null(c.s.peer);
		assert_null(sv.s.peer);
		bool client_forgets = ends[i] == LINK_SERVER_GONE || ends[i] == LINK_BOTH_GO;
		bool server_forgets = ends[i] == LINK_CLIENT_GONE || ends[i] == LINK_BOTH_GO;
		assert_ptr_equal(c.s.send_dst, client_forgets ? NULL : &sv.s);
		assert_ptr_equal(sv.s.send_dst, server_forgets ? NULL : &c.s);
	}
}

static void test_detach_server(void **state)
{
	struct client c;
	struct server sv;
	(void)state;
	pair(&c, &sv);
	assert_null(link_detach_server(&sv, LINK_RELEASE));    /* none: nothing to do */
	link_assert_free(&sv);
	link_attach(&c, &sv);
	assert_ptr_equal(link_detach_server(&sv, LINK_SERVER_GONE), &c);
	assert_null(c.link);
	assert_null(sv.link);
	link_assert_free(&sv);
	/* Linked again afterwards, as a pooled server is. */
	link_attach(&c, &sv);
	assert_ptr_equal(sv.link, &c);
}

enum misuse { ATTACH_LINKED, ATTACH_OTHER_POOL, DETACH_UNLINKED, DETACH_OTHER, FREE_LINKED, FINE };

static void misuse(enum misuse m)
{
	struct client c, c2;
	struct server sv, sv2;
	pair(&c, &sv);
	pair(&c2, &sv2);
	c2.id = 3;
	sv2.id = 4;
	switch (m) {
	case ATTACH_LINKED:
		link_attach(&c, &sv);
		link_attach(&c2, &sv);
		break;
	case ATTACH_OTHER_POOL:
		c.pool = &pool_b;
		link_attach(&c, &sv);
		break;
	case DETACH_UNLINKED:
		link_detach(&c, &sv, LINK_RELEASE);
		break;
	case DETACH_OTHER:
		link_attach(&c, &sv);
		link_attach(&c2, &sv2);
		link_detach(&c, &sv2, LINK_BOTH_GO);
		break;
	case FREE_LINKED:
		link_attach(&c, &sv);
		link_assert_free(&sv);
		break;
	case FINE:
		link_attach(&c, &sv);
		link_detach(&c, &sv, LINK_RELEASE);
		link_assert_free(&sv);
		break;
	}
}

static int exit_code_of(enum misuse m)
{
	int st;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		misuse(m);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_misuse_stops(void **state)
{
	(void)state;
	assert_int_equal(exit_code_of(ATTACH_LINKED), 1);
	assert_int_equal(exit_code_of(ATTACH_OTHER_POOL), 1);
	assert_int_equal(exit_code_of(DETACH_UNLINKED), 1);
	assert_int_equal(exit_code_of(DETACH_OTHER), 1);
	assert_int_equal(exit_code_of(FREE_LINKED), 1);
	assert_int_equal(exit_code_of(FINE), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attach_detach),
		cmocka_unit_test(test_detach_server),
		cmocka_unit_test(test_misuse_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

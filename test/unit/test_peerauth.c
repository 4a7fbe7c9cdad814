/* pgcrew — unit tests for auth/peerauth: the OS user of the other end of a
 * Unix socket is this process's user; a TCP socket has none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/peerauth.h"

static void test_unix_socket_peer(void **state)
{
	int sv[2];
	char name[256];
	const char *why = NULL;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct passwd *pw = getpwuid(getuid());
	assert_non_null(pw);
	assert_true(peerauth_os_user(sv[0], name, sizeof(name), &why));
	assert_string_equal(name, pw->pw_name);
	/* A buffer too small is an error, not a truncated name. */
	assert_false(peerauth_os_user(sv[0], name, strlen(pw->pw_name), &why));
	assert_string_equal(why, "local user name too long");
	close(sv[0]);
	close(sv[1]);
}

static void test_tcp_socket_has_no_peer_user(void **state)
{
	char name[256];
	const char *why = NULL;

	(void)state;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_false(peerauth_os_user(fd, name, sizeof(name), &why));
	assert_non_null(why);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unix_socket_peer),
		cmocka_unit_test(test_tcp_socket_has_no_peer_user),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

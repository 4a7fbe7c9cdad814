/* pgcrew — unit tests for auth/peerauth and auth/certauth: the OS user of
 * the other end of a Unix socket is this process's user, a TCP socket has
 * none; and the verdicts of both checks (accept, or reject with
 * PostgreSQL's message and the reason to log) for each way a login goes. */
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

#include "auth/certauth.h"
#include "auth/hba.h"
#include "auth/peerauth.h"

#include <stdlib.h>

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

static struct hba_ident *ident_from(const char *text)
{
	char path[] = "/tmp/pgcrew-ident-XXXXXX", err[256];
	struct hba_ident *id = NULL;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(hba_ident_load(path, &id, err, sizeof(err)), 0);
	unlink(path);
	return id;
}

static void assert_rejected(const struct auth_verdict *v, const char *message, const char *log)
{
	assert_int_equal(v->outcome, AUTH_REJECT);
	assert_string_equal(v->sqlstate, "28000");
	assert_string_equal(v->message, message);
	assert_string_equal(v->log, log);
}

static void test_peer_verdicts(void **state)
{
	struct auth_verdict v;
	int sv[2];
	char note[300];
	(void)state;
	struct passwd *pw = getpwuid(getuid());
	assert_non_null(pw);
	const char *me = pw->pw_name;
	char line[300];
	snprintf(line, sizeof(line), "m %s alice\n", me);
	struct hba_ident *id = ident_from(line);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

	assert_int_equal(peerauth_check(false, sv[0], "bob", true, id, NULL, &v), AUTH_REJECT);
	assert_rejected(&v, "Peer authentication failed for user \"bob\"",
			"peer authentication is only available on local connections");

	assert_int_equal(peerauth_check(true, sv[0], me, true, id, NULL, &v), AUTH_ACCEPT);
	snprintf(note, sizeof(note), "peer login: os_user=%s", me);
	assert_string_equal(v.detail, note);

	char want[300];
	assert_int_equal(peerauth_check(true, sv[0], me, false, id, NULL, &v), AUTH_REJECT);
	snprintf(want, sizeof(want), "no such user: %s", me);
	snprintf(line, sizeof(line), "Peer authentication failed for user \"%s\"", me);
	assert_rejected(&v, line, want);

	assert_int_equal(peerauth_check(true, sv[0], "someone", true, id, NULL, &v), AUTH_REJECT);
	snprintf(want, sizeof(want), "provided user name (someone) and authenticated user name (%s) do not match", me);
	assert_rejected(&v, "Peer authentication failed for user \"someone\"", want);

	assert_int_equal(peerauth_check(true, sv[0], "alice", true, id, "m", &v), AUTH_ACCEPT);
	assert_int_equal(peerauth_check(true, sv[0], "bob", true, id, "m", &v), AUTH_REJECT);
	snprintf(want, sizeof(want), "no match in ident map \"m\" for OS user \"%s\"", me);
	assert_rejected(&v, "Peer authentication failed for user \"bob\"", want);

	close(sv[0]);
	close(sv[1]);
	hba_ident_free(id);
}

static void test_cert_verdicts(void **state)
{
	struct auth_verdict v;
	struct hba_ident *id = ident_from("certmap cn1 alice\n");
	(void)state;

	assert_int_equal(certauth_check(false, NULL, "alice", true, id, NULL, &v), AUTH_REJECT);
	assert_rejected(&v, "connection requires a valid client certificate", "TLS connection required");
	assert_int_equal(certauth_check(true, NULL, "alice", true, id, NULL, &v), AUTH_REJECT);
	assert_rejected(&v, "connection requires a valid client certificate",
			"TLS client certificate required");

	assert_int_equal(certauth_check(true, "alice", "alice", true, id, NULL, &v), AUTH_ACCEPT);
	assert_string_equal(v.detail, "TLS cert login: CN=alice");
	assert_int_equal(certauth_check(true, "alice", "alice", false, id, NULL, &v), AUTH_REJECT);
	assert_rejected(&v, "certificate authentication failed for user \"alice\"", "");
	assert_int_equal(certauth_check(true, "mallory", "alice", true, id, NULL, &v), AUTH_REJECT);
	assert_rejected(&v, "certificate authentication failed for user \"alice\"",
			"TLS certificate name mismatch");

	assert_int_equal(certauth_check(true, "cn1", "alice", true, id, "certmap", &v), AUTH_ACCEPT);
	assert_int_equal(certauth_check(true, "cn1", "bob", true, id, "certmap", &v), AUTH_REJECT);
	assert_rejected(&v, "certificate authentication failed for user \"bob\"",
			"ident map: certmap does not have a match");
	hba_ident_free(id);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unix_socket_peer),
		cmocka_unit_test(test_tcp_socket_has_no_peer_user),
		cmocka_unit_test(test_peer_verdicts),
		cmocka_unit_test(test_cert_verdicts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pgcrew — unit tests for tls.c: a throwaway CA, server and client certs are
 * made with the OpenSSL API at start; our server context is driven against
 * our client context (or a raw OpenSSL client) over a non-blocking socketpair. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <poll.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls.h"
#include "tlsfix.h"

#define LOOP_MAX 2000
#define UNUSED __attribute__((unused))

static char dir[64];
static char ca_crt[128], other_ca_crt[128], srv_crt[128], srv_key[128], cli_crt[128], cli_key[128];
static char sha1_crt[128], ed_crt[128], ed_key[128];   /* odd server certs for channel binding */
static char nul_crt[128];                              /* client cert whose CN hides a NUL */

/*
 * Certificates
 */

static void path(char *out, const char *name)
{
	snprintf(out, 128, "%s/%s", dir, name);
}

static int make_certs(void **state UNUSED)
{
	EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *other_key = EVP_EC_gen("P-256");
	EVP_PKEY *skey = EVP_EC_gen("P-256"), *ckey = EVP_EC_gen("P-256");
	EVP_PKEY *edkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	X509 *ca, *other, *srv, *cli, *sha1, *ed, *nul;

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof dir, "/tmp/pgcrew-tls-XXXXXX");
	assert_non_null(mkdtemp(dir));
	path(ca_crt, "ca.crt");
	path(other_ca_crt, "other-ca.crt");
	path(srv_crt, "server.crt");
	path(srv_key, "server.key");
	path(cli_crt, "client.crt");
	path(cli_key, "client.key");
	path(sha1_crt, "server-sha1.crt");
	path(ed_crt, "server-ed25519.crt");
	path(ed_key, "server-ed25519.key");
	path(nul_crt, "client-nul.crt");

	ca = make_cert(ca_key, "pgcrew test CA", -1, NULL, NULL, ca_exts, EVP_sha256());
	other = make_cert(other_key, "some other CA", -1, NULL, NULL, ca_exts, EVP_sha256());
	srv = make_cert(skey, "localhost", -1, ca, ca_key, srv_exts, EVP_sha256());
	cli = make_cert(ckey, "alice", -1, ca, ca_key, cli_exts, EVP_sha256());
	sha1 = make_cert(skey, "localhost", -1, ca, ca_key, srv_exts, EVP_sha1());
	nul = make_cert(ckey, "alice\0.evil", 11, ca, ca_key, cli_exts, EVP_sha256());
	ed = make_cert(edkey, "localhost", -1, NULL, NULL, srv_exts, NULL);   /* Ed25519 takes no digest */
	write_pem(ca_crt, ca, NULL);
	write_pem(other_ca_crt, other, NULL);
	write_pem(srv_crt, srv, NULL);
	write_pem(srv_key, NULL, skey);
	write_pem(cli_crt, cli, NULL);
	write_pem(cli_key, NULL, ckey);
	write_pem(sha1_crt, sha1, NULL);
	write_pem(ed_crt, ed, NULL);
	write_pem(ed_key, NULL, edkey);
	write_pem(nul_crt, nul, NULL);
	X509_free(nul);
	X509_free(sha1);
	X509_free(ed);
	EVP_PKEY_free(edkey);
	X509_free(ca);
	X509_free(other);
	X509_free(srv);
	X509_free(cli);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(other_key);
	EVP_PKEY_free(skey);
	EVP_PKEY_free(ckey);
	return 0;
}

static int remove_certs(void **state UNUSED)
{
	const char *files[] = { ca_crt, other_ca_crt, srv_crt, srv_key, cli_crt, cli_key, sha1_crt, ed_crt, ed_key, nul_crt };

	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		unlink(files[i]);
	rmdir(dir);
	return 0;
}

/*
 * Settings and contexts
 */

static struct tls_settings srv_settings(int mode)
{
	return (struct tls_settings){ .sslmode = mode, .cert_file = srv_crt, .key_file = srv_key,
				      .ca_file = mode >= TLS_SSLMODE_VERIFY_CA ? ca_crt : "" };
}

static struct tls_settings cli_settings(int mode, const char *ca)
{
	return (struct tls_settings){ .sslmode = mode, .ca_file = ca };
}

static struct tls_ctx *server_ctx(const struct tls_settings *s)
{
	char err[256] = "";
	struct tls_ctx *ctx = tls_ctx_new_server(s, err, sizeof err);

	if (ctx == NULL)
		fail_msg("tls_ctx_new_server: %s", err);
	return ctx;
}

static struct tls_ctx *client_ctx(const struct tls_settings *s)
{
	char err[256] = "";
	struct tls_ctx *ctx = tls_ctx_new_client(s, err, sizeof err);

	if (ctx == NULL)
		fail_msg("tls_ctx_new_client: %s", err);
	return ctx;
}

/*
 * A socketpair and its two ends. Either end is one of our tls_conns or a
 * raw OpenSSL SSL (to play clients our own code would never be).
 */

struct end {
	struct tls_conn *tc;
	SSL *raw;
	enum tls_status st;
};

struct pair {
	int fd[2];                 /* [0] server end, [1] client end */
	struct end srv, cli;
	SSL_CTX *raw_ctx;
};

static void pair_open(struct pair *p)
{
	memset(p, 0, sizeof *p);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fcntl(p->fd[i], F_SETFL, O_NONBLOCK), 0);
}

static void pair_close(struct pair *p)
{
	tls_conn_free(p->srv.tc);
	tls_conn_free(p->cli.tc);
	SSL_free(p->srv.raw);
	SSL_free(p->cli.raw);
	SSL_CTX_free(p->raw_ctx);
	for (int i = 0; i < 2; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
	}
}

/* A raw OpenSSL client; alpn NULL sends no ALPN extension at all. */
static void raw_client(struct pair *p, const unsigned char *alpn, unsigned alpn_len)
{
	p->raw_ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(p->raw_ctx);
	if (alpn != NULL)
		assert_int_equal(SSL_CTX_set_alpn_protos(p->raw_ctx, alpn, alpn_len), 0);
	p->cli.raw = SSL_new(p->raw_ctx);
	assert_non_null(p->cli.raw);
	assert_true(SSL_set_fd(p->cli.raw, p->fd[1]));
	SSL_set_connect_state(p->cli.raw);
}

static enum tls_status end_step(struct end *e)
{
	int r;

	if (e->tc != NULL)
		return tls_handshake(e->tc);
	ERR_clear_error();
	r = SSL_do_handshake(e->raw);
	if (r == 1)
		return TLS_OK;
	switch (SSL_get_error(e->raw, r)) {
	case SSL_ERROR_WANT_READ:
		return TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return TLS_WANT_WRITE;
	default:
		ERR_clear_error();
		return TLS_FAIL;
	}
}

static bool end_done(enum tls_status st)
{
	return st == TLS_OK || st == TLS_FAIL || st == TLS_EOF;
}

/* Steps both handshakes until both are over (or a bounded number of
 * rounds: a side that failed silently leaves the other waiting). */
static void drive(struct pair *p)
{
	p->srv.st = p->cli.st = TLS_WANT_READ;
	for (int i = 0; i < LOOP_MAX && !(end_done(p->srv.st) && end_done(p->cli.st)); i++) {
		if (!end_done(p->cli.st))
			p->cli.st = end_step(&p->cli);
		if (!end_done(p->srv.st))
			p->srv.st = end_step(&p->srv);
	}
}

/* Our server ctx against our client ctx. */
static void handshake(struct pair *p, struct tls_ctx *sctx, struct tls_ctx *cctx, const char *host)
{
	pair_open(p);
	p->srv.tc = tls_conn_accept(sctx, p->fd[0], false);
	p->cli.tc = tls_conn_connect(cctx, p->fd[1], host);
	assert_non_null(p->srv.tc);
	assert_non_null(p->cli.tc);
	drive(p);
}

static void assert_contains(const char *hay, const char *needle)
{
	if (strstr(hay, needle) == NULL)
		fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* Reads exactly len bytes, stepping the writer's pending output too. */
static void recv_exact(struct tls_conn *c, void *buf, size_t len)
{
	size_t got = 0;
	enum tls_status st;

	for (int i = 0; i < LOOP_MAX && got < len; i++) {
		ssize_t n = tls_recv(c, (char *)buf + got, len - got, &st);
		if (n > 0)
			got += (size_t)n;
		else
			assert_int_equal(st, TLS_WANT_READ);
	}
	assert_int_equal(got, len);
}

static void send_all(struct tls_conn *c, const void *buf, size_t len)
{
	enum tls_status st;
	ssize_t n = tls_send(c, buf, len, &st);

	assert_int_equal(n, (ssize_t)len);
	assert_int_equal(st, TLS_OK);
}

/*
 * Tests
 */

static void test_handshake_and_data(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	struct pair p;
	char buf[16];

	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.cli.st, TLS_OK);
	assert_int_equal(p.srv.st, TLS_OK);
	assert_string_equal(tls_conn_version(p.srv.tc), "TLSv1.3");
	assert_string_equal(tls_conn_cipher(p.srv.tc), tls_conn_cipher(p.cli.tc));
	assert_string_equal(tls_conn_error(p.srv.tc), "");

	send_all(p.cli.tc, "ping", 4);
	recv_exact(p.srv.tc, buf, 4);
	assert_memory_equal(buf, "ping", 4);
	send_all(p.srv.tc, "pong!", 5);
	recv_exact(p.cli.tc, buf, 5);
	assert_memory_equal(buf, "pong!", 5);

	/* require does not ask for a client certificate, so there is no CN */
	assert_false(tls_conn_peer_cn(p.srv.tc, buf, sizeof buf));
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* The kernel's list of loaded TCP upper layers, word by word; and a
 * connection whose keys OpenSSL keeps (a socketpair never has kTLS) is not
 * "in kernel", so it never moves between processes. */
static void test_ktls_checks(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	struct pair p;

	assert_true(tls_ulp_list_has_tls("tls"));
	assert_true(tls_ulp_list_has_tls("mptcp tls\n"));
	assert_true(tls_ulp_list_has_tls("tls espintcp"));
	assert_false(tls_ulp_list_has_tls("mptcp\n"));
	assert_false(tls_ulp_list_has_tls("tlsx mptls tl"));
	assert_false(tls_ulp_list_has_tls(""));
	assert_false(tls_ulp_list_has_tls(NULL));

	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.cli.st, TLS_OK);
	assert_false(tls_conn_in_kernel(p.cli.tc));
	assert_false(tls_conn_in_kernel(p.srv.tc));
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* More than the socket buffer holds: partial writes and WANT_WRITE must
 * be reported, and every byte must arrive in order. */
static void test_bulk_transfer(void **state UNUSED)
{
	enum { TOTAL = 1 << 20 };
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	unsigned char *out = malloc(TOTAL), *in = malloc(TOTAL);
	size_t sent = 0, got = 0;
	bool saw_want_write = false;
	struct pair p;

	assert_non_null(out);
	assert_non_null(in);
	for (size_t i = 0; i < TOTAL; i++)
		out[i] = (unsigned char)(i * 7 + (i >> 11));
	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.srv.st, TLS_OK);
	/* fill the socket until the writer is told to wait */
	for (int i = 0; i < LOOP_MAX && !saw_want_write; i++) {
		enum tls_status st;
		ssize_t n = tls_send(p.cli.tc, out + sent, TOTAL - sent, &st);

		if (n > 0)
			sent += (size_t)n;
		else if (st == TLS_WANT_WRITE)
			saw_want_write = true;
		else
			fail_msg("send: %s %s", tls_status_name(st), tls_conn_error(p.cli.tc));
	}
	assert_true(saw_want_write);
	assert_true(sent < TOTAL);
	for (int i = 0; i < 100000 && got < TOTAL; i++) {
		enum tls_status st;
		ssize_t n;

		if (sent < TOTAL) {
			n = tls_send(p.cli.tc, out + sent, TOTAL - sent, &st);
			if (n > 0)
				sent += (size_t)n;
			else if (st != TLS_WANT_WRITE)
				fail_msg("send: %s %s", tls_status_name(st), tls_conn_error(p.cli.tc));
		}
		n = tls_recv(p.srv.tc, in + got, TOTAL - got, &st);
		if (n > 0)
			got += (size_t)n;
		else
			assert_int_equal(st, TLS_WANT_READ);
	}
	assert_int_equal(got, TOTAL);
	assert_memory_equal(in, out, TOTAL);
	free(out);
	free(in);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_pending_and_close_notify(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	char msg[100], buf[100];
	enum tls_status st;
	struct pair p;

	memset(msg, 'x', sizeof msg);
	handshake(&p, sctx, cctx, "localhost");
	send_all(p.cli.tc, msg, sizeof msg);   /* one record */
	recv_exact(p.srv.tc, buf, 10);
	assert_true(tls_pending(p.srv.tc));
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 90);
	assert_false(tls_pending(p.srv.tc));

	/* Read-ahead: the first record's recv takes the second from the socket
	 * too. The socket will not signal it, so tls_pending() must, though
	 * none of it is decrypted yet. */
	send_all(p.cli.tc, msg, sizeof msg);
	send_all(p.cli.tc, msg, sizeof msg);
	recv_exact(p.srv.tc, buf, sizeof buf);
	{
		struct pollfd pfd = { .fd = p.fd[0], .events = POLLIN };

		assert_int_equal(poll(&pfd, 1, 0), 0);
	}
	assert_true(tls_pending(p.srv.tc));
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 100);
	assert_false(tls_pending(p.srv.tc));

	tls_conn_shutdown(p.cli.tc);
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 0);
	assert_int_equal(st, TLS_EOF);
	/* after our own close_notify, writing is an error */
	assert_int_equal(tls_send(p.cli.tc, "x", 1, &st), -1);
	assert_int_equal(st, TLS_FAIL);
	assert_contains(tls_conn_error(p.cli.tc), "shutdown");
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* Clients often just close the socket; that is an EOF, not an error. */
static void test_eof_without_close_notify(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	enum tls_status st;
	struct pair p;
	char buf[8];

	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.srv.st, TLS_OK);
	/* the client consumes the session ticket, then goes away */
	assert_int_equal(tls_recv(p.cli.tc, buf, sizeof buf, &st), -1);
	assert_int_equal(st, TLS_WANT_READ);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 0);
	assert_int_equal(st, TLS_EOF);
	assert_string_equal(tls_conn_error(p.srv.tc), "");
	pair_close(&p);

	/* closing with unread bytes (the ticket) resets the socket: a failure
	 * that carries the errno text */
	handshake(&p, sctx, cctx, "localhost");
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), -1);
	assert_int_equal(st, TLS_FAIL);
	assert_string_equal(tls_conn_error(p.srv.tc), "Connection reset by peer");
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* A peer that hangs up mid-handshake: over, with a reason to log. */
static void test_eof_during_handshake(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE);
	struct tls_ctx *sctx = server_ctx(&ss);
	enum tls_status st;
	struct pair p;

	pair_open(&p);
	p.srv.tc = tls_conn_accept(sctx, p.fd[0], false);
	assert_non_null(p.srv.tc);
	assert_int_equal(tls_handshake(p.srv.tc), TLS_WANT_READ);
	close(p.fd[1]);
	p.fd[1] = -1;
	st = tls_handshake(p.srv.tc);
	assert_int_equal(st, TLS_EOF);
	assert_string_equal(tls_conn_error(p.srv.tc), "connection closed during TLS handshake");
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
}

static void test_verify_full_right_host(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_VERIFY_FULL, ca_crt);
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	const char *hosts[] = { "localhost", "127.0.0.1" };

	for (size_t i = 0; i < 2; i++) {
		struct pair p;

		handshake(&p, sctx, cctx, hosts[i]);
		if (p.cli.st != TLS_OK)
			fail_msg("%s: %s", hosts[i], tls_conn_error(p.cli.tc));
		assert_int_equal(p.srv.st, TLS_OK);
		pair_close(&p);
	}
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_verify_full_wrong_host(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_VERIFY_FULL, ca_crt);
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	const char *hosts[] = { "db.example.com", "127.0.0.2" };

	for (size_t i = 0; i < 2; i++) {
		struct pair p;

		handshake(&p, sctx, cctx, hosts[i]);
		assert_int_equal(p.cli.st, TLS_FAIL);
		assert_contains(tls_conn_error(p.cli.tc), "certificate verify failed");
		assert_contains(tls_conn_error(p.cli.tc), i == 0 ? "hostname mismatch" : "IP address mismatch");
		/* the server hears the alert */
		assert_int_equal(p.srv.st, TLS_FAIL);
		assert_string_not_equal(tls_conn_error(p.srv.tc), "");
		assert_int_equal(ERR_peek_error(), 0);
		/* a failed connection stays failed without calling into OpenSSL */
		assert_int_equal(tls_handshake(p.cli.tc), TLS_FAIL);
		pair_close(&p);
	}
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_verify_ca_ignores_host(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_VERIFY_CA, ca_crt);
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	struct pair p;

	handshake(&p, sctx, cctx, "db.example.com");
	assert_int_equal(p.cli.st, TLS_OK);
	assert_int_equal(p.srv.st, TLS_OK);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_verify_full_needs_host(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_VERIFY_FULL, ca_crt);
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	struct pair p;

	handshake(&p, sctx, cctx, NULL);
	assert_int_equal(p.cli.st, TLS_FAIL);
	assert_contains(tls_conn_error(p.cli.tc), "verify-full needs a host name");
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_wrong_ca_refused(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_VERIFY_CA, other_ca_crt);
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	struct pair p;

	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.cli.st, TLS_FAIL);
	assert_contains(tls_conn_error(p.cli.tc), "certificate verify failed");
	assert_contains(tls_conn_error(p.cli.tc), "unable to get local issuer certificate");
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* Server end with a raw OpenSSL client offering the given ALPN list. */
static void raw_handshake(struct pair *p, struct tls_ctx *sctx, bool direct,
			  const unsigned char *alpn, unsigned alpn_len)
{
	pair_open(p);
	p->srv.tc = tls_conn_accept(sctx, p->fd[0], direct);
	assert_non_null(p->srv.tc);
	raw_client(p, alpn, alpn_len);
	drive(p);
}

static const unsigned char alpn_pg[] = "\x0apostgresql";
static const unsigned char alpn_http_pg[] = "\x08http/1.1\x0apostgresql";
static const unsigned char alpn_http[] = "\x08http/1.1";

static void test_direct_requires_alpn(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE);
	struct tls_ctx *sctx = server_ctx(&ss);
	const unsigned char *sel;
	unsigned sel_len;
	struct pair p;

	/* no ALPN at all: refused inside the handshake */
	raw_handshake(&p, sctx, true, NULL, 0);
	assert_int_equal(p.srv.st, TLS_FAIL);
	assert_int_equal(p.cli.st, TLS_FAIL);
	assert_contains(tls_conn_error(p.srv.tc), "without ALPN \"postgresql\"");
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);

	/* ALPN without postgresql: refused */
	raw_handshake(&p, sctx, true, alpn_http, sizeof alpn_http - 1);
	assert_int_equal(p.srv.st, TLS_FAIL);
	assert_int_equal(p.cli.st, TLS_FAIL);
	assert_contains(tls_conn_error(p.srv.tc), "ALPN");
	pair_close(&p);

	/* postgresql, also when not first: accepted and selected */
	raw_handshake(&p, sctx, true, alpn_http_pg, sizeof alpn_http_pg - 1);
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	SSL_get0_alpn_selected(p.cli.raw, &sel, &sel_len);
	assert_int_equal(sel_len, 10);
	assert_memory_equal(sel, "postgresql", 10);
	pair_close(&p);
	tls_ctx_free(sctx);
}

static void test_direct_with_our_client(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	struct pair p;

	pair_open(&p);
	p.srv.tc = tls_conn_accept(sctx, p.fd[0], true);
	p.cli.tc = tls_conn_connect(cctx, p.fd[1], "localhost");
	assert_non_null(p.srv.tc);
	assert_non_null(p.cli.tc);
	drive(&p);
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* After SSLRequest ALPN is optional, but if offered must name postgresql. */
static void test_sslrequest_alpn_optional(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE);
	struct tls_ctx *sctx = server_ctx(&ss);
	struct pair p;

	raw_handshake(&p, sctx, false, NULL, 0);
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	pair_close(&p);

	raw_handshake(&p, sctx, false, alpn_pg, sizeof alpn_pg - 1);
	assert_int_equal(p.srv.st, TLS_OK);
	pair_close(&p);

	raw_handshake(&p, sctx, false, alpn_http, sizeof alpn_http - 1);
	assert_int_equal(p.srv.st, TLS_FAIL);
	assert_int_equal(p.cli.st, TLS_FAIL);
	assert_contains(tls_conn_error(p.srv.tc), "ALPN without \"postgresql\"");
	pair_close(&p);
	tls_ctx_free(sctx);
}

/* Session tickets are on: a client that kept its ticket resumes. */
static void test_ticket_resumption(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE);
	struct tls_ctx *sctx = server_ctx(&ss);
	SSL_SESSION *sess;
	struct pair p;
	char buf[8];

	raw_handshake(&p, sctx, false, alpn_pg, sizeof alpn_pg - 1);
	assert_int_equal(p.cli.st, TLS_OK);
	assert_false(SSL_session_reused(p.cli.raw));
	/* TLS 1.3 tickets arrive after the handshake: read to take them in */
	assert_int_equal(SSL_read(p.cli.raw, buf, sizeof buf), -1);
	assert_int_equal(SSL_get_error(p.cli.raw, -1), SSL_ERROR_WANT_READ);
	sess = SSL_get1_session(p.cli.raw);
	assert_non_null(sess);
	/* OpenSSL spoils the session of a client freed without close_notify */
	(void)SSL_shutdown(p.cli.raw);
	pair_close(&p);
	assert_true(SSL_SESSION_is_resumable(sess));

	pair_open(&p);
	p.srv.tc = tls_conn_accept(sctx, p.fd[0], false);
	assert_non_null(p.srv.tc);
	raw_client(&p, alpn_pg, sizeof alpn_pg - 1);
	assert_true(SSL_set_session(p.cli.raw, sess));
	drive(&p);
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	assert_true(SSL_session_reused(p.cli.raw));
	SSL_SESSION_free(sess);
	pair_close(&p);
	tls_ctx_free(sctx);
}

static void test_client_cert_cn(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_VERIFY_CA), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx, *nocert;
	enum tls_status st;
	char cn[64], small[5], buf[8];
	struct pair p;

	cs.cert_file = cli_crt;
	cs.key_file = cli_key;
	cctx = client_ctx(&cs);
	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	assert_true(tls_conn_peer_cn(p.srv.tc, cn, sizeof cn));
	assert_string_equal(cn, "alice");
	assert_false(tls_conn_peer_cn(p.srv.tc, small, sizeof small));   /* "alice" + NUL needs 6 */
	pair_close(&p);
	tls_ctx_free(cctx);

	/* a CN with an embedded NUL must not pass as its prefix "alice" */
	cs.cert_file = nul_crt;
	cctx = client_ctx(&cs);
	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.srv.st, TLS_OK);
	assert_false(tls_conn_peer_cn(p.srv.tc, cn, sizeof cn));
	pair_close(&p);

	/* verify-ca without a client certificate: refused by the server; in
	 * TLS 1.3 the client learns it on its first read */
	cs.cert_file = cs.key_file = "";
	nocert = client_ctx(&cs);
	handshake(&p, sctx, nocert, "localhost");
	assert_int_equal(p.srv.st, TLS_FAIL);
	assert_contains(tls_conn_error(p.srv.tc), "certificate");
	assert_int_equal(tls_recv(p.cli.tc, buf, sizeof buf, &st), -1);
	assert_int_equal(st, TLS_FAIL);
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
	tls_ctx_free(nocert);
}

/* Channel binding data of both ends after a handshake against a server
 * using cert/key; false when either end reports none. */
static bool end_points(const char *cert, const char *key, const char *ciphers, uint8_t *sbuf,
		       size_t *slen, uint8_t *cbuf, size_t *clen)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx, *cctx;
	struct pair p;
	size_t cap = *slen;
	bool ok;

	ss.cert_file = cert;
	ss.key_file = key;
	ss.ciphers = cs.ciphers = ciphers;
	sctx = server_ctx(&ss);
	cctx = client_ctx(&cs);
	pair_open(&p);
	p.srv.tc = tls_conn_accept(sctx, p.fd[0], false);
	p.cli.tc = tls_conn_connect(cctx, p.fd[1], "localhost");
	assert_false(tls_conn_server_end_point(p.srv.tc, sbuf, &cap));   /* before the handshake */
	drive(&p);
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	ok = tls_conn_server_end_point(p.srv.tc, sbuf, slen);
	ok = tls_conn_server_end_point(p.cli.tc, cbuf, clen) && ok;
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
	return ok;
}

static void sha256_of_cert(const char *file, uint8_t *out)
{
	FILE *f = fopen(file, "r");
	X509 *cert;
	unsigned n;

	assert_non_null(f);
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(cert);
	assert_true(X509_digest(cert, EVP_sha256(), out, &n));
	assert_int_equal(n, 32);
	X509_free(cert);
}

static void test_server_end_point(void **state UNUSED)
{
	uint8_t sbuf[64], cbuf[64], want[32];
	size_t slen = sizeof sbuf, clen = sizeof cbuf;

	/* ecdsa-with-SHA256: SHA-256, the same bytes on both ends */
	sha256_of_cert(srv_crt, want);
	assert_true(end_points(srv_crt, srv_key, "", sbuf, &slen, cbuf, &clen));
	assert_int_equal(slen, 32);
	assert_int_equal(clen, 32);
	assert_memory_equal(sbuf, want, 32);
	assert_memory_equal(cbuf, want, 32);

	/* SHA-1 signed: RFC 5929 says SHA-256 (SECLEVEL=0 lets OpenSSL load it) */
	sha256_of_cert(sha1_crt, want);
	slen = clen = sizeof sbuf;
	assert_true(end_points(sha1_crt, srv_key, "DEFAULT:@SECLEVEL=0", sbuf, &slen, cbuf, &clen));
	assert_int_equal(slen, 32);
	assert_memory_equal(sbuf, want, 32);
	assert_memory_equal(cbuf, want, 32);

	/* too small a buffer */
	slen = 16;
	clen = sizeof cbuf;
	assert_false(end_points(srv_crt, srv_key, "", sbuf, &slen, cbuf, &clen));

	/* Ed25519 has no separate hash: channel binding is undefined */
	slen = clen = sizeof sbuf;
	assert_false(end_points(ed_crt, ed_key, "", sbuf, &slen, cbuf, &clen));
	assert_int_equal(ERR_peek_error(), 0);
}

/* ctx creation must fail, with err containing every one of the needles. */
static void expect_ctx_error(bool server, const struct tls_settings *s, const char *n1, const char *n2)
{
	char err[256] = "";
	struct tls_ctx *ctx = server ? tls_ctx_new_server(s, err, sizeof err) : tls_ctx_new_client(s, err, sizeof err);

	if (ctx != NULL)
		fail_msg("context built; expected an error with \"%s\"", n1);
	assert_contains(err, n1);
	if (n2 != NULL)
		assert_contains(err, n2);
	assert_int_equal(ERR_peek_error(), 0);
}

static void test_bad_files(void **state UNUSED)
{
	struct tls_settings s = srv_settings(TLS_SSLMODE_REQUIRE);

	s.cert_file = "/nonexistent/x.crt";
	expect_ctx_error(true, &s, "client_tls_cert_file /nonexistent/x.crt: No such file or directory", NULL);
	s = srv_settings(TLS_SSLMODE_REQUIRE);
	s.key_file = "/nonexistent/x.key";
	expect_ctx_error(true, &s, "client_tls_key_file /nonexistent/x.key: No such file or directory", NULL);
	s.key_file = cli_key;   /* a real key, not the certificate's */
	expect_ctx_error(true, &s, "client_tls_key_file", "mismatch");
	s.key_file = srv_crt;   /* not a key at all */
	expect_ctx_error(true, &s, "client_tls_key_file", srv_crt);
	s.key_file = "";
	expect_ctx_error(true, &s, "client_tls_key_file is not set", NULL);
	s = srv_settings(TLS_SSLMODE_VERIFY_FULL);
	s.ca_file = "/nonexistent/ca.crt";
	expect_ctx_error(true, &s, "client_tls_ca_file /nonexistent/ca.crt: No such file or directory", NULL);
	s.ca_file = "";
	expect_ctx_error(true, &s, "client_tls_ca_file is not set", NULL);

	s = cli_settings(TLS_SSLMODE_VERIFY_CA, "/nonexistent/root.crt");
	expect_ctx_error(false, &s, "server_tls_ca_file /nonexistent/root.crt: No such file or directory", NULL);
	s = cli_settings(TLS_SSLMODE_REQUIRE, "");
	s.cert_file = "/nonexistent/c.crt";
	s.key_file = cli_key;
	expect_ctx_error(false, &s, "server_tls_cert_file /nonexistent/c.crt: No such file or directory", NULL);
}

/* Handshake with the given protocols on each side; returns the version or
 * NULL when the handshake failed. */
static const char *proto_handshake(const char *sproto, const char *cproto, char *ver, size_t len)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx, *cctx;
	struct pair p;
	const char *ret = NULL;

	ss.protocols = sproto;
	cs.protocols = cproto;
	sctx = server_ctx(&ss);
	cctx = client_ctx(&cs);
	handshake(&p, sctx, cctx, "localhost");
	if (p.srv.st == TLS_OK && p.cli.st == TLS_OK) {
		snprintf(ver, len, "%s", tls_conn_version(p.srv.tc));
		ret = ver;
	}
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
	return ret;
}

static void test_protocols(void **state UNUSED)
{
	struct tls_settings s = srv_settings(TLS_SSLMODE_REQUIRE);
	char v[32];

	assert_string_equal(proto_handshake("secure", "tlsv1.2", v, sizeof v), "TLSv1.2");
	assert_string_equal(proto_handshake("tlsv1.3", "", v, sizeof v), "TLSv1.3");
	assert_string_equal(proto_handshake("", "secure", v, sizeof v), "TLSv1.3");
	assert_string_equal(proto_handshake("TLSv1.2, tlsv1.3", "tlsv1.2", v, sizeof v), "TLSv1.2");
	assert_string_equal(proto_handshake("secure,!tlsv1.3", "all", v, sizeof v), "TLSv1.2");
	assert_string_equal(proto_handshake("legacy", "tlsv1.2 tlsv1.3", v, sizeof v), "TLSv1.3");
	assert_null(proto_handshake("tlsv1.3", "tlsv1.2", v, sizeof v));

	s.protocols = "tlsv9";
	expect_ctx_error(true, &s, "client_tls_protocols tlsv9: unknown protocol \"tlsv9\"", NULL);
	s.protocols = "secure,!all";
	expect_ctx_error(true, &s, "client_tls_protocols", "no protocol version left");
	s = cli_settings(TLS_SSLMODE_REQUIRE, "");
	s.protocols = "sslv3";
	expect_ctx_error(false, &s, "server_tls_protocols sslv3", NULL);
}

static void test_ciphers_curves_dh(void **state UNUSED)
{
	static const char *const good_ciphers[] = { "default", "secure", "fast", "normal", "all", "HIGH:!aNULL" };
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx, *cctx;
	struct pair p;

	for (size_t i = 0; i < sizeof good_ciphers / sizeof good_ciphers[0]; i++) {
		ss.ciphers = good_ciphers[i];
		tls_ctx_free(server_ctx(&ss));
	}
	ss.ciphers = "no-such-cipher";
	expect_ctx_error(true, &ss, "client_tls_ciphers no-such-cipher", NULL);
	ss.ciphers = "";
	ss.tls13_ciphers = "TLS_NO_SUCH_SUITE";
	expect_ctx_error(true, &ss, "failed to set the TLSv1.3 cipher suites: client_tls13_ciphers TLS_NO_SUCH_SUITE", NULL);
	ss.ecdhcurve = "no-such-curve";
	ss.tls13_ciphers = "";
	expect_ctx_error(true, &ss, "client_tls_ecdhcurve no-such-curve", NULL);
	ss.ecdhcurve = "";
	ss.dheparams = "huge";
	expect_ctx_error(true, &ss, "client_tls_dheparams huge", NULL);
	/* 1024-bit DH is below security level 2 (Debian's default) */
	ss.dheparams = "legacy";
	ss.ciphers = "DEFAULT:@SECLEVEL=2";
	expect_ctx_error(true, &ss, "client_tls_dheparams legacy: dh key too small", "@SECLEVEL=1");
	ss.ciphers = "DEFAULT:@SECLEVEL=1";
	tls_ctx_free(server_ctx(&ss));
	ss.ciphers = "";
	ss.dheparams = "none";
	tls_ctx_free(server_ctx(&ss));

	/* the settings reach the handshake */
	ss.tls13_ciphers = "TLS_AES_128_GCM_SHA256";
	ss.ecdhcurve = "secp384r1";
	sctx = server_ctx(&ss);
	cctx = client_ctx(&cs);
	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.srv.st, TLS_OK);
	assert_string_equal(tls_conn_cipher(p.cli.tc), "TLS_AES_128_GCM_SHA256");
	pair_close(&p);
	tls_ctx_free(sctx);

	/* ecdhcurve none: TLS 1.3 still completes over a finite-field group */
	ss.ecdhcurve = "none";
	sctx = server_ctx(&ss);
	handshake(&p, sctx, cctx, "localhost");
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_status_names(void **state UNUSED)
{
	assert_string_equal(tls_status_name(TLS_OK), "ok");
	assert_string_equal(tls_status_name(TLS_WANT_WRITE), "want-write");
	assert_string_equal(tls_status_name(TLS_FAIL), "fail");
	assert_string_equal(tls_status_name(TLS_STATUS_COUNT), "?");
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

/* The warm-up is a real handshake: it completes for a context that asks
 * no certificate, fails (without breaking the context) for one that
 * demands one, refuses a client-side context, and leaks no descriptor. */
static void test_warm_up(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_PREFER), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_settings vs = srv_settings(TLS_SSLMODE_VERIFY_CA);
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs), *vctx = server_ctx(&vs);
	int fds = open_fds();
	struct pair p;

	assert_true(tls_ctx_warm_up(sctx));
	assert_true(tls_ctx_warm_up(sctx));
	assert_false(tls_ctx_warm_up(vctx));
	assert_false(tls_ctx_warm_up(cctx));
	assert_false(tls_ctx_warm_up(NULL));
	assert_int_equal(open_fds(), fds);
	assert_int_equal(ERR_peek_error(), 0);

	handshake(&p, sctx, cctx, "localhost");       /* still serves real clients */
	assert_int_equal(p.srv.st, TLS_OK);
	assert_int_equal(p.cli.st, TLS_OK);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
	tls_ctx_free(vctx);
}

/*
 * Buffered connections (io_uring batches): ciphertext through memory
 */

/* Moves what the socket has into srv's input, at most `chunk` bytes
 * (0: all there is); returns the bytes moved, -1 at EOF. */
static ssize_t feed(struct pair *p, size_t chunk)
{
	size_t room;
	uint8_t *at = tls_in_space(p->srv.tc, &room);
	assert_non_null(at);
	if (chunk && room > chunk)
		room = chunk;
	ssize_t n = recv(p->fd[0], at, room, 0);
	if (n < 0) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		return 0;
	}
	tls_in_added(p->srv.tc, n);
	return n == 0 ? -1 : n;
}

/* Sends what srv's OpenSSL wrote to the socket. */
static void drain_out(struct pair *p)
{
	size_t len;
	const uint8_t *d = tls_out_data(p->srv.tc, &len);
	while (len > 0) {
		ssize_t n = send(p->fd[0], d, len, MSG_NOSIGNAL);
		assert_true(n > 0);
		tls_out_sent(p->srv.tc, (size_t)n);
		d = tls_out_data(p->srv.tc, &len);
	}
}

static void buffered_pair(struct pair *p, struct tls_ctx *sctx, struct tls_ctx *cctx)
{
	handshake(p, sctx, cctx, "localhost");
	assert_int_equal(p->srv.st, TLS_OK);
	assert_int_equal(p->cli.st, TLS_OK);
	assert_true(tls_conn_use_buffers(p->srv.tc));
	assert_true(tls_conn_buffered(p->srv.tc));
}

/* The server end reads and writes through memory, the client through its
 * socket: the same bytes arrive, whichever way the ciphertext is cut,
 * down to one byte at a time (a record split at every byte), and the
 * server's own writes never touch the socket until they are drained. */
static void test_buffered_transfer(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	static const size_t chunks[] = { 0, 1, 7, 5000 };
	enum tls_status st;
	struct pair p;

	buffered_pair(&p, sctx, cctx);
	for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
		char msg[16000], got[16000];
		size_t have = 0, len = chunks[k] == 1 ? 300 : sizeof msg;
		for (size_t i = 0; i < len; i++)
			msg[i] = (char)(i * 7 + k);
		send_all(p.cli.tc, msg, len);         /* one record */
		for (int i = 0; i < 100000 && have < len; i++) {
			ssize_t n = tls_recv(p.srv.tc, got + have, len - have, &st);
			if (n > 0) {
				have += (size_t)n;
				continue;
			}
			assert_int_equal(st, TLS_WANT_READ);
			assert_false(tls_in_held(p.srv.tc));
			assert_true(feed(&p, chunks[k]) >= 0);
		}
		assert_int_equal(have, len);
		assert_memory_equal(got, msg, len);

		/* And back: nothing more on the socket until drained. */
		int before = 0, after = 0;
		assert_int_equal(ioctl(p.fd[1], FIONREAD, &before), 0);
		send_all(p.srv.tc, msg, len);
		assert_int_equal(ioctl(p.fd[1], FIONREAD, &after), 0);
		assert_int_equal(after, before);
		size_t out;
		(void)tls_out_data(p.srv.tc, &out);
		assert_true(out > len);
		drain_out(&p);
		recv_exact(p.cli.tc, got, len);
		assert_memory_equal(got, msg, len);
	}
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* Writes wait (TLS_WANT_WRITE) while 64 kB of ciphertext is unsent, and
 * go on once it is drained. */
static void test_buffered_out_full(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	static char block[16384];
	enum tls_status st;
	struct pair p;
	int written = 0;

	buffered_pair(&p, sctx, cctx);
	while (tls_send(p.srv.tc, block, sizeof block, &st) > 0)
		assert_true(++written < 10);
	assert_int_equal(st, TLS_WANT_WRITE);
	assert_true(tls_out_full(p.srv.tc));
	assert_int_equal(written, 4);
	size_t len;
	const uint8_t *d = tls_out_data(p.srv.tc, &len);
	ssize_t n = send(p.fd[0], d, 30000, MSG_NOSIGNAL);
	assert_int_equal(n, 30000);
	tls_out_sent(p.srv.tc, 30000);
	assert_false(tls_out_full(p.srv.tc));
	assert_int_equal(tls_send(p.srv.tc, block, sizeof block, &st), (ssize_t)sizeof block);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* close_notify, and a socket EOF without it (OpenSSL is told to take that
 * as an end, as PgBouncer does): both say TLS_EOF; ciphertext held in
 * memory counts as pending, so the stream reads it without a socket
 * event. */
static void test_buffered_eof(void **state UNUSED)
{
	struct tls_settings ss = srv_settings(TLS_SSLMODE_REQUIRE), cs = cli_settings(TLS_SSLMODE_REQUIRE, "");
	struct tls_ctx *sctx = server_ctx(&ss), *cctx = client_ctx(&cs);
	enum tls_status st;
	struct pair p;
	char buf[64];

	buffered_pair(&p, sctx, cctx);
	send_all(p.cli.tc, "hello", 5);
	tls_conn_shutdown(p.cli.tc);
	while (feed(&p, 0) > 0)
		;
	assert_true(tls_pending(p.srv.tc));
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 5);
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 0);
	assert_int_equal(st, TLS_EOF);
	pair_close(&p);

	buffered_pair(&p, sctx, cctx);
	send_all(p.cli.tc, "bye", 3);
	shutdown(p.fd[1], SHUT_WR);
	while (feed(&p, 0) > 0)
		;
	assert_true(tls_in_held(p.srv.tc));
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 3);
	assert_int_equal(tls_recv(p.srv.tc, buf, sizeof buf, &st), 0);
	assert_int_equal(st, TLS_EOF);
	assert_int_equal(ERR_peek_error(), 0);
	pair_close(&p);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_and_data),
		cmocka_unit_test(test_ktls_checks),
		cmocka_unit_test(test_bulk_transfer),
		cmocka_unit_test(test_pending_and_close_notify),
		cmocka_unit_test(test_eof_without_close_notify),
		cmocka_unit_test(test_eof_during_handshake),
		cmocka_unit_test(test_verify_full_right_host),
		cmocka_unit_test(test_verify_full_wrong_host),
		cmocka_unit_test(test_verify_ca_ignores_host),
		cmocka_unit_test(test_verify_full_needs_host),
		cmocka_unit_test(test_wrong_ca_refused),
		cmocka_unit_test(test_direct_requires_alpn),
		cmocka_unit_test(test_direct_with_our_client),
		cmocka_unit_test(test_sslrequest_alpn_optional),
		cmocka_unit_test(test_ticket_resumption),
		cmocka_unit_test(test_client_cert_cn),
		cmocka_unit_test(test_server_end_point),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_protocols),
		cmocka_unit_test(test_ciphers_curves_dh),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_warm_up),
		cmocka_unit_test(test_buffered_transfer),
		cmocka_unit_test(test_buffered_out_full),
		cmocka_unit_test(test_buffered_eof),
	};

	return cmocka_run_group_tests(tests, make_certs, remove_certs);
}

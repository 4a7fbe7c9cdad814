/* pgcrew — TLS for the session fuzz target: the pooler's client-facing
 * context (a throwaway P-256 key and self-signed certificate, made once per
 * process), and the fake clients' OpenSSL client ends on memory BIOs, so
 * that a fake client moves its handshake and its records over its
 * non-blocking socket itself, step by step and piece by piece. */
#include "fuzz_session.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tls.h"

struct fz_tls {
	SSL *ssl;
	BIO *rbio, *wbio;          /* from the socket; for the socket */
	bool up;                   /* handshake done */
};

static SSL_CTX *client_ctx;
static struct tls_ctx *server_ctx;
static char key_path[256], cert_path[256];

static X509 *self_signed(EVP_PKEY *key)
{
	X509 *cert = X509_new();
	X509_NAME *name = X509_get_subject_name(cert);
	if (!cert || !X509_set_version(cert, 2) || !ASN1_INTEGER_set(X509_get_serialNumber(cert), 1) ||
	    !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(cert), 10L * 365 * 86400) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)"localhost", -1,
					-1, 0) ||
	    !X509_set_issuer_name(cert, name) || !X509_set_pubkey(cert, key) ||
	    X509_sign(cert, key, EVP_sha256()) <= 0) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

static bool write_pem(const char *path, X509 *cert, EVP_PKEY *key)
{
	FILE *f = fopen(path, "w");
	bool ok = f && (cert ? PEM_write_X509(f, cert) : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL));
	if (f && fclose(f) != 0)
		ok = false;
	return ok;
}

/* The key and certificate files in dir, and a context made from them
 * as worker.c makes one. */
static bool make_server(const char *dir)
{
	char err[256];
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *cert = key ? self_signed(key) : NULL;
	snprintf(key_path, sizeof(key_path), "%s/pgcrew-fuzz-%ld.key", dir, (long)getpid());
	snprintf(cert_path, sizeof(cert_path), "%s/pgcrew-fuzz-%ld.crt", dir, (long)getpid());
	bool ok = cert && write_pem(key_path, NULL, key) && write_pem(cert_path, cert, NULL);
	X509_free(cert);
	EVP_PKEY_free(key);
	struct tls_settings ts = { .sslmode = TLS_SSLMODE_ALLOW, .key_file = key_path, .cert_file = cert_path };
	if (ok)
		server_ctx = tls_ctx_new_server(&ts, err, sizeof(err));
	if (!server_ctx)
		fprintf(stderr, "fuzz_session: no client TLS: %s\n", ok ? err : "no key or certificate");
	return server_ctx != NULL;
}

static void remove_files(void)
{
	unlink(key_path);
	unlink(cert_path);
}

struct tls_ctx *fz_tls_server(const char *dir, char *settings, size_t len)
{
	static bool tried;
	if (!tried) {
		tried = true;
		client_ctx = SSL_CTX_new(TLS_client_method());
		const char *tmp = getenv("TMPDIR");
		if (!dir)
			dir = tmp && *tmp ? tmp : "/tmp";
		if (client_ctx && make_server(dir))
			atexit(remove_files);
	}
	if (!server_ctx || !client_ctx)
		return NULL;
	snprintf(settings, len, "client_tls_key_file = %s\nclient_tls_cert_file = %s\n", key_path, cert_path);
	return server_ctx;
}

struct fz_tls *fz_tls_new(void)
{
	struct fz_tls *t = calloc(1, sizeof(*t));
	if (!t || !client_ctx || !(t->ssl = SSL_new(client_ctx))) {
		free(t);
		return NULL;
	}
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->rbio || !t->wbio) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		fz_tls_free(t);
		return NULL;
	}
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	SSL_set_connect_state(t->ssl);
	return t;
}

void fz_tls_free(struct fz_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	free(t);
	ERR_clear_error();
}

int fz_tls_handshake(struct fz_tls *t)
{
	int rc = SSL_do_handshake(t->ssl);
	if (rc == 1) {
		t->up = true;
		return TLS_OK;
	}
	int e = SSL_get_error(t->ssl, rc);
	ERR_clear_error();
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? TLS_WANT_READ : TLS_FAIL;
}

bool fz_tls_up(const struct fz_tls *t)
{
	return t && t->up;
}

void fz_tls_feed(struct fz_tls *t, const void *b, size_t n)
{
	if (n > 0)
		(void)BIO_write(t->rbio, b, (int)n);
}

ssize_t fz_tls_read(struct fz_tls *t, void *buf, size_t len)
{
	int rc = SSL_read(t->ssl, buf, (int)len);
	if (rc > 0)
		return rc;
	int e = SSL_get_error(t->ssl, rc);
	ERR_clear_error();
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

bool fz_tls_write(struct fz_tls *t, const void *b, size_t n)
{
	while (n > 0) {
		int rc = SSL_write(t->ssl, b, (int)(n > 16384 ? 16384 : n));
		if (rc <= 0) {
			ERR_clear_error();
			return false;
		}
		b = (const uint8_t *)b + rc;
		n -= (size_t)rc;
	}
	return true;
}

void fz_tls_take(struct fz_tls *t, struct bytes *out)
{
	uint8_t tmp[16384];
	int n;
	while ((n = BIO_read(t->wbio, tmp, sizeof(tmp))) > 0)
		bytes_add(out, tmp, (size_t)n);
}

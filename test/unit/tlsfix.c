/* pgcrew — the TLS tests' certificates (test_tls.c, test_stream_tls.c):
 * X.509 certificates made with the OpenSSL API, signed by a throwaway CA
 * or by themselves, and PEM files of them and their keys. */
#include "tlsfix.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

static void add_exts(X509 *cert, X509 *issuer, const struct ext *exts)
{
	X509V3_CTX v3;

	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	for (; exts->value != NULL; exts++) {
		X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, exts->nid, exts->value);
		assert_non_null(e);
		assert_true(X509_add_ext(cert, e, -1));
		X509_EXTENSION_free(e);
	}
}

X509 *make_cert(EVP_PKEY *key, const char *cn, int cn_len, X509 *issuer, EVP_PKEY *issuer_key,
		const struct ext *exts, const EVP_MD *md)
{
	static long serial = 1;
	X509 *cert = X509_new();
	X509_NAME *name = X509_NAME_new();

	assert_non_null(cert);
	assert_true(X509_set_version(cert, 2));
	assert_true(ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++));
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(cert), -3600));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(cert), 86400));
	assert_true(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, cn_len, -1, 0));
	assert_true(X509_set_subject_name(cert, name));
	assert_true(X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name));
	X509_NAME_free(name);
	assert_true(X509_set_pubkey(cert, key));
	add_exts(cert, issuer ? issuer : cert, exts);
	assert_true(X509_sign(cert, issuer_key ? issuer_key : key, md) > 0);
	return cert;
}

void write_pem(const char *path, X509 *cert, EVP_PKEY *key)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	if (cert != NULL)
		assert_true(PEM_write_X509(f, cert));
	if (key != NULL)
		assert_true(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL));
	assert_int_equal(fclose(f), 0);
}

const struct ext ca_exts[] = {
	{ NID_basic_constraints, "critical,CA:TRUE" },
	{ NID_key_usage, "critical,keyCertSign,cRLSign" },
	{ NID_subject_key_identifier, "hash" },
	{ 0, NULL },
};

const struct ext srv_exts[] = {
	{ NID_basic_constraints, "CA:FALSE" },
	{ NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1" },
	{ NID_ext_key_usage, "serverAuth" },
	{ 0, NULL },
};

const struct ext cli_exts[] = {
	{ NID_basic_constraints, "CA:FALSE" },
	{ NID_ext_key_usage, "clientAuth" },
	{ 0, NULL },
};

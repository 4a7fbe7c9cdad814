/* pgcrew — the TLS tests' certificates (test_tls.c, test_stream_tls.c):
 * X.509 certificates made with the OpenSSL API, signed by a throwaway CA
 * or by themselves, and PEM files of them and their keys. Failures are
 * cmocka assertions. */
#ifndef PGCREW_TEST_TLSFIX_H
#define PGCREW_TEST_TLSFIX_H

#include <openssl/evp.h>
#include <openssl/x509.h>

/* An X.509v3 extension by NID and its config text; lists end with a NULL value. */
struct ext { int nid; const char *value; };

extern const struct ext ca_exts[];    /* a CA: keyCertSign, cRLSign */
extern const struct ext srv_exts[];   /* serverAuth, for localhost and 127.0.0.1 */
extern const struct ext cli_exts[];   /* clientAuth */

/* A certificate for key with CN cn (cn_len -1: up to its NUL), valid from an
 * hour ago for a day, signed by issuer/issuer_key with md (issuer NULL:
 * self-signed by key; md NULL for keys that take no digest, Ed25519). */
X509 *make_cert(EVP_PKEY *key, const char *cn, int cn_len, X509 *issuer, EVP_PKEY *issuer_key,
		const struct ext *exts, const EVP_MD *md);
/* cert then key (either may be NULL) as PEM into path. */
void write_pem(const char *path, X509 *cert, EVP_PKEY *key);

#endif

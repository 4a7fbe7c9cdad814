/* pgcrew — per-process crypto primitives (HMAC-SHA-256, SHA-256, MD5, PBKDF2,
 * random bytes, base64) on objects fetched once by crypto_init(), so no call
 * on the per-connection path takes OpenSSL's provider-registry lock.
 * Not thread-safe: each process (worker) is single-threaded and owns its own. */
#ifndef PGCREW_AUTH_CRYPTO_H
#define PGCREW_AUTH_CRYPTO_H

#include <sys/uio.h>

#include "types.h"

#define CRYPTO_SHA256_LEN 32
#define CRYPTO_MD5_HEX_LEN 32

/* Fetch EVP_MAC "HMAC", EVP_MD "SHA256" and "MD5" and build the HMAC template.
 * Call once per process; call again in each worker after fork() (it frees the
 * inherited objects and fetches fresh ones). Returns 0 on success, -1 if HMAC
 * or SHA256 is unavailable. MD5 missing (FIPS) only logs a warning: the md5
 * functions then fail. */
int crypto_init(void) MUSTCHECK;
void crypto_shutdown(void);

/* All of these return false (never crash) before crypto_init() or on an
 * OpenSSL failure. */
bool crypto_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
			uint8_t out[32]) MUSTCHECK;
/* Same over several pieces, so callers need not concatenate (SCRAM AuthMessage). */
bool crypto_hmac_sha256_iov(const void *key, size_t keylen, const struct iovec *iov,
			    size_t iovcnt, uint8_t out[32]) MUSTCHECK;
bool crypto_sha256(const void *data, size_t len, uint8_t out[32]) MUSTCHECK;
/* PBKDF2-HMAC-SHA-256 with a 32-byte output (SCRAM's Hi()); iterations >= 1. */
bool crypto_pbkdf2_sha256(const void *pass, size_t passlen, const uint8_t *salt, size_t saltlen,
			  int iterations, uint8_t out[32]) MUSTCHECK;
bool crypto_md5_hex(const void *data, size_t len, char out[33]) MUSTCHECK;   /* lowercase hex + NUL */
bool crypto_md5_hex_iov(const struct iovec *iov, size_t iovcnt, char out[33]) MUSTCHECK;
/* RAND_bytes, drawn from a per-process block after crypto_init(): a child of
 * fork() must call crypto_init() before drawing, or it repeats its parent. */
bool crypto_random(void *buf, size_t len) MUSTCHECK;

/* Standard alphabet with '=' padding. Encode returns the length written and
 * NUL-terminates; if dst is too small it writes "" (when dstlen > 0) and
 * returns 0. Decode is strict (no whitespace, length a multiple of 4, padding
 * only at the end) and returns the decoded length, or -1 on bad input or when
 * the result would not fit in dstlen. */
#define CRYPTO_B64_ENC_LEN(n) ((((n) + 2) / 3) * 4)
size_t crypto_b64_encode(const uint8_t *src, size_t len, char *dst, size_t dstlen);
int crypto_b64_decode(const char *src, size_t len, uint8_t *dst, size_t dstlen);

#endif

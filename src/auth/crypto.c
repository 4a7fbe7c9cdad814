/* pgcrew — crypto primitives on pre-fetched OpenSSL 3 objects.
 * crypto_init() fetches EVP_MAC/EVP_MD once; every digest and HMAC reuses one
 * EVP_MD_CTX and each PBKDF2 run dups a ready EVP_MAC_CTX, so nothing here goes
 * through the provider registry (and its global lock) after start-up; random
 * bytes come from OpenSSL in blocks, since each login wants two small draws. */
#include "auth/crypto.h"

#include <limits.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "log.h"

static struct {
	EVP_MAC *mac;
	EVP_MAC_CTX *hmac_template;    /* digest param set, no key */
	EVP_MD *sha256;
	EVP_MD *md5;                   /* NULL when the provider lacks it (FIPS) */
	EVP_MD_CTX *md_ctx;            /* reused by every digest call */
	bool ready;
	/* A RAND_bytes call has a fixed cost of microseconds (DRBG lock, fork
	 * check, cipher re-init) whatever its size; login draws 8 + 18 bytes.
	 * Unused bytes sit at the end; used ones are wiped. */
	size_t random_left;
	uint8_t random_pool[512];
} cr;

/* HMAC needs a non-NULL key pointer even for an empty key: a NULL key means
 * "reuse the previous key" to EVP_MAC_init. */
static const uint8_t empty_key[1];

static int build_hmac_template(void)
{
	OSSL_PARAM params[2];

	cr.mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (cr.mac == NULL)
		return -1;
	cr.hmac_template = EVP_MAC_CTX_new(cr.mac);
	if (cr.hmac_template == NULL)
		return -1;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	return EVP_MAC_CTX_set_params(cr.hmac_template, params) == 1 ? 0 : -1;
}

int crypto_init(void)
{
	/* After fork() the child holds copies of the parent's objects; drop them
	 * and fetch our own so each worker owns everything it uses. */
	if (cr.ready)
		crypto_shutdown();
	if (build_hmac_template() < 0) {
		log_error("crypto: cannot set up HMAC-SHA256 through EVP_MAC");
		goto fail;
	}
	cr.sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	cr.md_ctx = EVP_MD_CTX_new();
	if (cr.sha256 == NULL || cr.md_ctx == NULL) {
		log_error("crypto: cannot fetch SHA256");
		goto fail;
	}
	cr.md5 = EVP_MD_fetch(NULL, "MD5", NULL);
	if (cr.md5 == NULL)
		log_warning("crypto: MD5 is not available; md5 authentication will fail");
	cr.ready = true;
	return 0;
fail:
	crypto_shutdown();
	return -1;
}

void crypto_shutdown(void)
{
	EVP_MD_CTX_free(cr.md_ctx);
	EVP_MD_free(cr.md5);
	EVP_MD_free(cr.sha256);
	EVP_MAC_CTX_free(cr.hmac_template);
	EVP_MAC_free(cr.mac);
	/* A forked worker must never hand out the bytes its parent still held. */
	OPENSSL_cleanse(&cr, sizeof(cr));
}

static EVP_MAC_CTX *hmac_start(const void *key, size_t keylen)
{
	EVP_MAC_CTX *ctx;

	if (!cr.ready)
		return NULL;
	ctx = EVP_MAC_CTX_dup(cr.hmac_template);
	if (ctx == NULL)
		return NULL;
	if (key == NULL || keylen == 0)
		key = empty_key;
	if (EVP_MAC_init(ctx, key, keylen, NULL) != 1) {
		EVP_MAC_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static bool hmac_finish(EVP_MAC_CTX *ctx, uint8_t out[32])
{
	size_t outl = 0;

	return EVP_MAC_final(ctx, out, &outl, CRYPTO_SHA256_LEN) == 1 && outl == CRYPTO_SHA256_LEN;
}

static bool digest_update_iov(const struct iovec *iov, size_t iovcnt)
{
	for (size_t i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > 0 && EVP_DigestUpdate(cr.md_ctx, iov[i].iov_base, iov[i].iov_len) != 1)
			return false;
	}
	return true;
}

/* SHA-256 of a 64-byte HMAC pad followed by the pieces, on the reused
 * digest context. */
static bool sha256_after_pad(const uint8_t pad[64], const struct iovec *iov, size_t iovcnt,
			     uint8_t out[32])
{
	unsigned int got = 0;

	return EVP_DigestInit_ex2(cr.md_ctx, cr.sha256, NULL) == 1
	       && EVP_DigestUpdate(cr.md_ctx, pad, 64) == 1 && digest_update_iov(iov, iovcnt)
	       && EVP_DigestFinal_ex(cr.md_ctx, out, &got) == 1 && got == CRYPTO_SHA256_LEN;
}

/* HMAC (RFC 2104) spelled out over the digest context: duplicating and
 * freeing a keyed EVP_MAC_CTX costs a login more than the hashing itself. */
bool crypto_hmac_sha256_iov(const void *key, size_t keylen, const struct iovec *iov,
			    size_t iovcnt, uint8_t out[32])
{
	uint8_t pad[64], hashed_key[CRYPTO_SHA256_LEN], inner[CRYPTO_SHA256_LEN];
	struct iovec inner_iov = { .iov_base = inner, .iov_len = sizeof(inner) };
	const uint8_t *k = key;
	bool ok;

	if (!cr.ready)
		return false;
	if (keylen > sizeof(pad)) {
		if (!crypto_sha256(key, keylen, hashed_key))
			return false;
		k = hashed_key;
		keylen = sizeof(hashed_key);
	}
	memset(pad, 0x36, sizeof(pad));
	for (size_t i = 0; i < keylen; i++)
		pad[i] ^= k[i];
	ok = sha256_after_pad(pad, iov, iovcnt, inner);
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] ^= 0x36 ^ 0x5c;
	ok = ok && sha256_after_pad(pad, &inner_iov, 1, out);
	OPENSSL_cleanse(pad, sizeof(pad));
	OPENSSL_cleanse(hashed_key, sizeof(hashed_key));
	OPENSSL_cleanse(inner, sizeof(inner));
	return ok;
}

bool crypto_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len, uint8_t out[32])
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };

	return crypto_hmac_sha256_iov(key, keylen, &iov, 1, out);
}

/* One PBKDF2 block (RFC 8018 F with i = 1): U1 = HMAC(P, S || INT(1)), then
 * Un = HMAC(P, Un-1), result = U1 ^ ... ^ Uc. The keyed context is re-armed
 * with EVP_MAC_init(ctx, NULL, ...) between rounds, which keeps the key's
 * ipad/opad state: no dup, no allocation, no fetch per iteration. */
static bool pbkdf2_rounds(EVP_MAC_CTX *ctx, const uint8_t *salt, size_t saltlen, int iterations,
			  uint8_t out[32])
{
	static const uint8_t block_one[4] = { 0, 0, 0, 1 };
	uint8_t u[CRYPTO_SHA256_LEN];
	bool ok = false;

	if ((saltlen > 0 && EVP_MAC_update(ctx, salt, saltlen) != 1)
	    || EVP_MAC_update(ctx, block_one, sizeof(block_one)) != 1 || !hmac_finish(ctx, u))
		goto done;
	memcpy(out, u, sizeof(u));
	for (int round = 1; round < iterations; round++) {
		if (EVP_MAC_init(ctx, NULL, 0, NULL) != 1 || EVP_MAC_update(ctx, u, sizeof(u)) != 1
		    || !hmac_finish(ctx, u))
			goto done;
		for (size_t i = 0; i < sizeof(u); i++)
			out[i] ^= u[i];
	}
	ok = true;
done:
	OPENSSL_cleanse(u, sizeof(u));
	return ok;
}

bool crypto_pbkdf2_sha256(const void *pass, size_t passlen, const uint8_t *salt, size_t saltlen,
			  int iterations, uint8_t out[32])
{
	EVP_MAC_CTX *ctx;
	bool ok;

	if (iterations < 1)
		return false;
	ctx = hmac_start(pass, passlen);
	if (ctx == NULL)
		return false;
	ok = pbkdf2_rounds(ctx, salt, saltlen, iterations, out);
	EVP_MAC_CTX_free(ctx);
	if (!ok)
		OPENSSL_cleanse(out, CRYPTO_SHA256_LEN);
	return ok;
}

static bool digest_iov(const EVP_MD *md, const struct iovec *iov, size_t iovcnt,
		       uint8_t *out, unsigned int outlen)
{
	unsigned int got = 0;

	return cr.ready && md != NULL && EVP_DigestInit_ex2(cr.md_ctx, md, NULL) == 1
	       && digest_update_iov(iov, iovcnt)
	       && EVP_DigestFinal_ex(cr.md_ctx, out, &got) == 1 && got == outlen;
}

bool crypto_sha256(const void *data, size_t len, uint8_t out[32])
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };

	return digest_iov(cr.sha256, &iov, 1, out, CRYPTO_SHA256_LEN);
}

bool crypto_md5_hex_iov(const struct iovec *iov, size_t iovcnt, char out[33])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[16];

	out[0] = '\0';
	if (!digest_iov(cr.md5, iov, iovcnt, raw, sizeof(raw)))
		return false;
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[CRYPTO_MD5_HEX_LEN] = '\0';
	return true;
}

bool crypto_md5_hex(const void *data, size_t len, char out[33])
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };

	return crypto_md5_hex_iov(&iov, 1, out);
}

bool crypto_random(void *buf, size_t len)
{
	uint8_t *from;

	if (!cr.ready || len > sizeof(cr.random_pool))
		return len <= INT_MAX && RAND_bytes(buf, (int)len) == 1;
	if (cr.random_left < len) {
		if (RAND_bytes(cr.random_pool, sizeof(cr.random_pool)) != 1) {
			cr.random_left = 0;
			return false;
		}
		cr.random_left = sizeof(cr.random_pool);
	}
	from = cr.random_pool + sizeof(cr.random_pool) - cr.random_left;
	memcpy(buf, from, len);
	OPENSSL_cleanse(from, len);
	cr.random_left -= len;
	return true;
}

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t crypto_b64_encode(const uint8_t *src, size_t len, char *dst, size_t dstlen)
{
	size_t need = CRYPTO_B64_ENC_LEN(len), o = 0;

	if (len > (SIZE_MAX - 3) / 4 * 3 || dstlen < need + 1) {
		if (dstlen > 0)
			dst[0] = '\0';
		return 0;
	}
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16;
		size_t left = len - i;

		if (left > 1)
			v |= (uint32_t)src[i + 1] << 8;
		if (left > 2)
			v |= src[i + 2];
		dst[o++] = b64_chars[(v >> 18) & 63];
		dst[o++] = b64_chars[(v >> 12) & 63];
		dst[o++] = left > 1 ? b64_chars[(v >> 6) & 63] : '=';
		dst[o++] = left > 2 ? b64_chars[v & 63] : '=';
	}
	dst[o] = '\0';
	return o;
}

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decodes one 4-char group; pad is how many trailing '=' it may hold. */
static bool b64_group(const char *src, size_t pad, uint8_t *dst)
{
	uint32_t v = 0;

	for (size_t i = 0; i < 4; i++) {
		int d = (i >= 4 - pad) ? 0 : b64_value(src[i]);

		if (d < 0)
			return false;
		v = (v << 6) | (uint32_t)d;
	}
	/* Bits beyond the data must be zero: exactly one encoding per value,
	 * so a changed character always means changed bytes. */
	if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0))
		return false;
	dst[0] = (uint8_t)(v >> 16);
	if (pad < 2)
		dst[1] = (uint8_t)(v >> 8);
	if (pad < 1)
		dst[2] = (uint8_t)v;
	return true;
}

int crypto_b64_decode(const char *src, size_t len, uint8_t *dst, size_t dstlen)
{
	size_t pad = 0, outlen, o = 0;

	if (len % 4 != 0)
		return -1;
	if (len == 0)
		return 0;
	if (src[len - 1] == '=')
		pad = (src[len - 2] == '=') ? 2 : 1;
	outlen = len / 4 * 3 - pad;
	if (outlen > dstlen || outlen > INT_MAX)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		bool last = (i + 4 == len);
		uint8_t tmp[3];

		if (!b64_group(src + i, last ? pad : 0, tmp))
			return -1;
		for (size_t k = 0; k < 3 && o < outlen; k++)
			dst[o++] = tmp[k];
	}
	return (int)outlen;
}

/* pgcrew — SCRAM-SHA-256 exchanges (RFC 5802/7677 as PostgreSQL applies them):
 * secrets and the per-process derived-key cache, the server side toward
 * clients (with ClientKey recovery for pass-through), and the client side
 * toward PostgreSQL. Every received message is length-bounded before use. */
#include "auth/scram.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "auth/crypto.h"
#include "auth/md5.h"

#define RAW_NONCE_LEN 18        /* 24 base64 characters, as PostgreSQL and libpq */
#define CACHE_WAYS 4
#define CACHE_SETS (SCRAM_CACHE_ENTRIES / CACHE_WAYS)
#define B64_KEY_LEN CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN)

static const char verifier_prefix[] = "SCRAM-SHA-256$";

/* ---------------------------------------------------------------------- */
/* Process key, test hooks, state names                                     */

/* Random per process (or inherited from the parent if it was made before
 * fork): keys the cache tags and the per-user salts. */
static struct {
	uint8_t key[32];
	bool ready;
} process_key;

static char test_server_nonce[SCRAM_MY_NONCE_MAX + 1];
static char test_client_nonce[SCRAM_MY_NONCE_MAX + 1];
static char test_client_user[65];

static const char *const server_state_names[] = {
	[SCRAM_SERVER_INIT] = "init",
	[SCRAM_SERVER_FIRST_SENT] = "first_sent",
	[SCRAM_SERVER_DONE] = "done",
	[SCRAM_SERVER_FAILED] = "failed",
};
_Static_assert(ARRAY_SIZE(server_state_names) == SCRAM_SERVER_STATE_COUNT, "server state names");

static const char *const client_state_names[] = {
	[SCRAM_CLIENT_INIT] = "init",
	[SCRAM_CLIENT_FIRST_SENT] = "first_sent",
	[SCRAM_CLIENT_FINAL_SENT] = "final_sent",
	[SCRAM_CLIENT_DONE] = "done",
	[SCRAM_CLIENT_FAILED] = "failed",
};
_Static_assert(ARRAY_SIZE(client_state_names) == SCRAM_CLIENT_STATE_COUNT, "client state names");

const char *scram_server_state_name(int state)
{
	if (state < 0 || state >= SCRAM_SERVER_STATE_COUNT)
		return "invalid";
	return server_state_names[state];
}

const char *scram_client_state_name(int state)
{
	if (state < 0 || state >= SCRAM_CLIENT_STATE_COUNT)
		return "invalid";
	return client_state_names[state];
}

static bool ensure_process_key(void)
{
	if (process_key.ready)
		return true;
	if (!crypto_random(process_key.key, sizeof(process_key.key)))
		return false;
	process_key.ready = true;
	return true;
}

static void set_test_string(char *dst, size_t dstlen, const char *src)
{
	dst[0] = '\0';
	if (src != NULL && strlen(src) < dstlen)
		memcpy(dst, src, strlen(src) + 1);
}

void scram_server_set_test_nonce(const char *nonce)
{
	set_test_string(test_server_nonce, sizeof(test_server_nonce), nonce);
}

void scram_client_set_test_nonce(const char *nonce, const char *user)
{
	set_test_string(test_client_nonce, sizeof(test_client_nonce), nonce);
	set_test_string(test_client_user, sizeof(test_client_user), nonce ? user : NULL);
}

/* ---------------------------------------------------------------------- */
/* Small parsing helpers                                                    */

struct scan {
	const char *p, *end;
};

struct span {
	const char *p;
	size_t len;
};

static int fail(const char **errmsg, const char *msg)
{
	if (errmsg != NULL)
		*errmsg = msg;
	return -1;
}

/* "x=value" up to the next ',' or the end; leaves p on that ',' or end. */
static bool scan_any_attr(struct scan *s, char *name, struct span *val)
{
	const char *comma;
	char c;

	if (s->end - s->p < 2)
		return false;
	c = s->p[0];
	if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || s->p[1] != '=')
		return false;
	*name = c;
	val->p = s->p + 2;
	comma = memchr(val->p, ',', (size_t)(s->end - val->p));
	val->len = (size_t)((comma ? comma : s->end) - val->p);
	s->p = val->p + val->len;
	return true;
}

static bool scan_attr(struct scan *s, char want, struct span *val)
{
	char name;

	return scan_any_attr(s, &name, val) && name == want;
}

static bool scan_comma(struct scan *s)
{
	if (s->p >= s->end || *s->p != ',')
		return false;
	s->p++;
	return true;
}

static bool scan_peek_attr(const struct scan *s, char name)
{
	return s->end - s->p >= 2 && s->p[0] == name && s->p[1] == '=';
}

/* RFC 5802 printable: %x21-7E except ','. */
static bool nonce_valid(struct span n)
{
	if (n.len == 0 || n.len > SCRAM_MAX_NONCE)
		return false;
	for (size_t i = 0; i < n.len; i++) {
		unsigned char c = (unsigned char)n.p[i];

		if (c < 0x21 || c > 0x7e || c == ',')
			return false;
	}
	return true;
}

/* Strict decimal in [min, max]; no sign, no spaces. */
static bool parse_int(const char *p, size_t len, long min, long max, int *out)
{
	long v = 0;

	if (len == 0 || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (p[i] - '0');
	}
	if (v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

static bool decode_key(const char *p, size_t len, uint8_t out[SCRAM_KEY_LEN])
{
	return crypto_b64_decode(p, len, out, SCRAM_KEY_LEN) == SCRAM_KEY_LEN;
}

static bool decode_salt(const char *p, size_t len, struct scram_secret *out)
{
	int n = crypto_b64_decode(p, len, out->salt, sizeof(out->salt));

	if (n <= 0)
		return false;
	out->salt_len = (size_t)n;
	return true;
}

static void xor_key(uint8_t *dst, const uint8_t *a, const uint8_t *b)
{
	for (size_t i = 0; i < SCRAM_KEY_LEN; i++)
		dst[i] = a[i] ^ b[i];
}

/* Appends src to out[*pos], keeping room for a NUL; false when it does not fit. */
static bool put(char *out, size_t outlen, size_t *pos, const char *src, size_t n)
{
	if (outlen == 0 || n >= outlen - *pos)
		return false;
	memcpy(out + *pos, src, n);
	*pos += n;
	out[*pos] = '\0';
	return true;
}

static bool put_str(char *out, size_t outlen, size_t *pos, const char *src)
{
	return put(out, outlen, pos, src, strlen(src));
}

static bool put_b64(char *out, size_t outlen, size_t *pos, const uint8_t *src, size_t n)
{
	size_t w;

	if (outlen <= *pos)
		return false;
	w = crypto_b64_encode(src, n, out + *pos, outlen - *pos);
	if (w == 0 && n > 0)
		return false;
	*pos += w;
	return true;
}

static bool random_nonce(char *out, size_t outlen)
{
	uint8_t raw[RAW_NONCE_LEN];

	if (!crypto_random(raw, sizeof(raw)))
		return false;
	return crypto_b64_encode(raw, sizeof(raw), out, outlen) > 0;
}

/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
static bool auth_hmac(const uint8_t key[SCRAM_KEY_LEN], struct span cfb, struct span sf,
		      struct span cfwp, uint8_t out[SCRAM_KEY_LEN])
{
	struct iovec iov[5] = {
		{ .iov_base = (void *)cfb.p, .iov_len = cfb.len },
		{ .iov_base = (void *)",", .iov_len = 1 },
		{ .iov_base = (void *)sf.p, .iov_len = sf.len },
		{ .iov_base = (void *)",", .iov_len = 1 },
		{ .iov_base = (void *)cfwp.p, .iov_len = cfwp.len },
	};

	return crypto_hmac_sha256_iov(key, SCRAM_KEY_LEN, iov, 5, out);
}

/* ---------------------------------------------------------------------- */
/* Secrets and the derived-key cache                                        */

struct cache_entry {
	bool used;
	uint64_t stamp;              /* LRU within the set */
	uint8_t tag[32];             /* HMAC(process key, iterations, salt, password) */
	uint8_t client_key[SCRAM_KEY_LEN], stored_key[SCRAM_KEY_LEN], server_key[SCRAM_KEY_LEN];
};

static struct cache_entry cache[CACHE_SETS][CACHE_WAYS];
static uint64_t cache_clock;
static unsigned long pbkdf2_runs;

unsigned long scram_pbkdf2_runs(void)
{
	return pbkdf2_runs;
}

void scram_cache_clear(void)
{
	OPENSSL_cleanse(cache, sizeof(cache));
	cache_clock = 0;
}

static bool cache_tag(const char *password, const uint8_t *salt, size_t salt_len, int iterations,
		      uint8_t tag[32])
{
	uint8_t head[5] = { (uint8_t)(iterations >> 24), (uint8_t)(iterations >> 16),
			    (uint8_t)(iterations >> 8), (uint8_t)iterations, (uint8_t)salt_len };
	struct iovec iov[4] = {
		{ .iov_base = (void *)"cache", .iov_len = 6 },
		{ .iov_base = head, .iov_len = sizeof(head) },
		{ .iov_base = (void *)salt, .iov_len = salt_len },
		{ .iov_base = (void *)password, .iov_len = strlen(password) },
	};

	if (!ensure_process_key())
		return false;
	return crypto_hmac_sha256_iov(process_key.key, sizeof(process_key.key), iov, 4, tag);
}

static struct cache_entry *cache_set(const uint8_t tag[32])
{
	return cache[((size_t)tag[0] << 8 | tag[1]) % CACHE_SETS];
}

static struct cache_entry *cache_lookup(const uint8_t tag[32])
{
	struct cache_entry *set = cache_set(tag);

	for (int w = 0; w < CACHE_WAYS; w++) {
		if (set[w].used && CRYPTO_memcmp(set[w].tag, tag, 32) == 0) {
			set[w].stamp = ++cache_clock;
			return &set[w];
		}
	}
	return NULL;
}

static struct cache_entry *cache_victim(const uint8_t tag[32])
{
	struct cache_entry *set = cache_set(tag), *victim = &set[0];

	for (int w = 0; w < CACHE_WAYS; w++) {
		if (!set[w].used)
			return &set[w];
		if (set[w].stamp < victim->stamp)
			victim = &set[w];
	}
	return victim;
}

/* SaltedPassword -> ClientKey, StoredKey = H(ClientKey), ServerKey. */
static bool derive_keys(const char *password, const uint8_t *salt, size_t salt_len, int iterations,
			struct cache_entry *e)
{
	uint8_t salted[SCRAM_KEY_LEN];
	bool ok;

	pbkdf2_runs++;
	ok = crypto_pbkdf2_sha256(password, strlen(password), salt, salt_len, iterations, salted)
	     && crypto_hmac_sha256(salted, sizeof(salted), "Client Key", 10, e->client_key)
	     && crypto_sha256(e->client_key, SCRAM_KEY_LEN, e->stored_key)
	     && crypto_hmac_sha256(salted, sizeof(salted), "Server Key", 10, e->server_key);
	OPENSSL_cleanse(salted, sizeof(salted));
	return ok;
}

bool scram_secret_from_password(const char *password, const uint8_t *salt, size_t salt_len,
				int iterations, struct scram_secret *out)
{
	struct cache_entry *e;
	uint8_t tag[32];

	memset(out, 0, sizeof(*out));
	if (password == NULL || salt_len == 0 || salt_len > SCRAM_MAX_SALT || iterations < 1
	    || iterations > SCRAM_MAX_ITERATIONS)
		return false;
	if (!cache_tag(password, salt, salt_len, iterations, tag))
		return false;
	e = cache_lookup(tag);
	if (e == NULL) {
		e = cache_victim(tag);
		e->used = false;
		if (!derive_keys(password, salt, salt_len, iterations, e))
			return false;
		memcpy(e->tag, tag, sizeof(tag));
		e->used = true;
		e->stamp = ++cache_clock;
	}
	out->iterations = iterations;
	memcpy(out->salt, salt, salt_len);
	out->salt_len = salt_len;
	memcpy(out->stored_key, e->stored_key, SCRAM_KEY_LEN);
	memcpy(out->server_key, e->server_key, SCRAM_KEY_LEN);
	memcpy(out->client_key, e->client_key, SCRAM_KEY_LEN);
	out->has_client_key = true;
	return true;
}

bool scram_parse_verifier(const char *verifier, struct scram_secret *out)
{
	const char *iter, *colon, *salt, *dollar, *stored, *colon2, *server;

	memset(out, 0, sizeof(*out));
	if (verifier == NULL || strncmp(verifier, verifier_prefix, sizeof(verifier_prefix) - 1) != 0)
		return false;
	iter = verifier + sizeof(verifier_prefix) - 1;
	colon = strchr(iter, ':');
	if (colon == NULL || !parse_int(iter, (size_t)(colon - iter), 1, INT_MAX, &out->iterations))
		goto bad;
	salt = colon + 1;
	dollar = strchr(salt, '$');
	if (dollar == NULL || !decode_salt(salt, (size_t)(dollar - salt), out))
		goto bad;
	stored = dollar + 1;
	colon2 = strchr(stored, ':');
	if (colon2 == NULL || !decode_key(stored, (size_t)(colon2 - stored), out->stored_key))
		goto bad;
	server = colon2 + 1;
	if (!decode_key(server, strlen(server), out->server_key))
		goto bad;
	return true;
bad:
	memset(out, 0, sizeof(*out));
	return false;
}

/* Same salt for a plaintext user and for an unknown (mock) user of that name. */
static bool user_salt(const char *user, uint8_t salt[SCRAM_DEFAULT_SALT_LEN])
{
	uint8_t full[32];
	struct iovec iov[2] = {
		{ .iov_base = (void *)"salt", .iov_len = 5 },
		{ .iov_base = (void *)user, .iov_len = strlen(user) },
	};

	if (!ensure_process_key()
	    || !crypto_hmac_sha256_iov(process_key.key, sizeof(process_key.key), iov, 2, full))
		return false;
	memcpy(salt, full, SCRAM_DEFAULT_SALT_LEN);
	return true;
}

bool scram_secret_for_user(const char *user, const char *userlist_secret, int iterations,
			   struct scram_secret *out)
{
	uint8_t salt[SCRAM_DEFAULT_SALT_LEN];

	memset(out, 0, sizeof(*out));
	if (user == NULL || userlist_secret == NULL || userlist_secret[0] == '\0')
		return false;
	if (strncmp(userlist_secret, verifier_prefix, sizeof(verifier_prefix) - 1) == 0
	    && scram_parse_verifier(userlist_secret, out))
		return true;
	if (md5_is_secret(userlist_secret))
		return false;
	if (!user_salt(user, salt))
		return false;
	return scram_secret_from_password(userlist_secret, salt, sizeof(salt), iterations, out);
}

void scram_mock_secret(const char *user, int iterations, struct scram_secret *out)
{
	memset(out, 0, sizeof(*out));
	out->iterations = (iterations >= 1) ? iterations : SCRAM_DEFAULT_ITERATIONS;
	out->salt_len = SCRAM_DEFAULT_SALT_LEN;
	/* On a (practically impossible) failure the salt stays zero; the
	 * exchange fails at the end anyway. The keys stay zero: no ClientKey
	 * hashes to an all-zero StoredKey, and mock = true fails regardless. */
	if (!user_salt(user ? user : "", out->salt))
		memset(out->salt, 0, sizeof(out->salt));
}

/* ---------------------------------------------------------------------- */
/* Server side                                                              */

/* gs2-header: cbind-flag "," [authzid] "," */
static int parse_gs2_header(struct scram_server *st, struct scan *s, const char **errmsg)
{
	const char *start = s->p;

	if (s->p >= s->end)
		return fail(errmsg, "malformed SCRAM message (empty message)");
	struct span type;

	switch (*s->p) {
	case 'n':
	case 'y':
		if (st->cbind.plus)
			return fail(errmsg, "malformed SCRAM message (the client selected SCRAM-SHA-256-PLUS, "
				    "but the SCRAM message does not include channel binding data)");
		/* 'y': the client could bind but thinks we cannot. Fine when
		 * we did not offer -PLUS; when we did, a man in the middle
		 * stripped it (PostgreSQL's downgrade check). */
		if (*s->p == 'y' && st->cbind.offered)
			return fail(errmsg, "SCRAM channel binding negotiation error");
		s->p++;
		break;
	case 'p':
		if (!st->cbind.offered)
			return fail(errmsg, "SCRAM channel binding is not supported (no SCRAM-SHA-256-PLUS)");
		if (!st->cbind.plus)
			return fail(errmsg, "malformed SCRAM message (the client selected SCRAM-SHA-256 without "
				    "channel binding, but the SCRAM message includes channel binding data)");
		if (!scan_attr(s, 'p', &type))
			return fail(errmsg, "malformed SCRAM message (bad channel-binding flag)");
		if (type.len != strlen("tls-server-end-point") ||
		    memcmp(type.p, "tls-server-end-point", type.len) != 0)
			return fail(errmsg, "unsupported SCRAM channel-binding type");
		break;
	default:
		return fail(errmsg, "malformed SCRAM message (unexpected channel-binding flag)");
	}
	if (!scan_comma(s))
		return fail(errmsg, "malformed SCRAM message (comma expected after channel-binding flag)");
	if (scan_peek_attr(s, 'a'))
		return fail(errmsg, "client uses authorization identity, but it is not supported");
	if (!scan_comma(s))
		return fail(errmsg, "malformed SCRAM message (unexpected attribute in gs2 header)");
	st->gs2_len = (size_t)(s->p - start);
	if (st->gs2_len >= sizeof(st->gs2_header))
		return fail(errmsg, "malformed SCRAM message (gs2 header too long)");
	memcpy(st->gs2_header, start, st->gs2_len);
	st->gs2_header[st->gs2_len] = '\0';
	return 0;
}

/* client-first-message-bare: n=user,r=nonce[,ext...]. The user name is
 * ignored, as PostgreSQL does: the startup packet's user is authoritative. */
static int parse_client_first_bare(struct scram_server *st, struct scan *s, const char **errmsg)
{
	const char *bare = s->p;
	struct span user, nonce, ext;
	char name;

	if (scan_peek_attr(s, 'm'))
		return fail(errmsg, "client requires an unsupported SCRAM extension");
	if (!scan_attr(s, 'n', &user) || !scan_comma(s))
		return fail(errmsg, "malformed SCRAM message (attribute \"n\" expected)");
	if (!scan_attr(s, 'r', &nonce))
		return fail(errmsg, "malformed SCRAM message (attribute \"r\" expected)");
	if (!nonce_valid(nonce))
		return fail(errmsg, "malformed SCRAM message (invalid client nonce)");
	while (s->p < s->end) {
		if (!scan_comma(s) || !scan_any_attr(s, &name, &ext))
			return fail(errmsg, "malformed SCRAM message (bad extension attribute)");
	}
	st->client_first_bare_len = (size_t)(s->end - bare);
	if (st->client_first_bare_len >= sizeof(st->client_first_bare))
		return fail(errmsg, "malformed SCRAM message (client-first-message too long)");
	memcpy(st->client_first_bare, bare, st->client_first_bare_len);
	memcpy(st->client_nonce, nonce.p, nonce.len);
	st->client_nonce[nonce.len] = '\0';
	return 0;
}

static int build_server_first(struct scram_server *st, const char **errmsg)
{
	size_t pos = 0;
	char iter[16];

	if (test_server_nonce[0] != '\0')
		memcpy(st->server_nonce, test_server_nonce, sizeof(st->server_nonce));
	else if (!random_nonce(st->server_nonce, sizeof(st->server_nonce)))
		return fail(errmsg, "could not generate random SCRAM nonce");
	snprintf(iter, sizeof(iter), "%d", st->secret.iterations);
	if (!put_str(st->server_first, sizeof(st->server_first), &pos, "r=")
	    || !put_str(st->server_first, sizeof(st->server_first), &pos, st->client_nonce)
	    || !put_str(st->server_first, sizeof(st->server_first), &pos, st->server_nonce)
	    || !put_str(st->server_first, sizeof(st->server_first), &pos, ",s=")
	    || !put_b64(st->server_first, sizeof(st->server_first), &pos, st->secret.salt,
			st->secret.salt_len)
	    || !put_str(st->server_first, sizeof(st->server_first), &pos, ",i=")
	    || !put_str(st->server_first, sizeof(st->server_first), &pos, iter))
		return fail(errmsg, "SCRAM server-first-message does not fit");
	st->server_first_len = pos;
	return 0;
}

static int copy_out(const char *src, size_t n, char *out, size_t outlen, size_t *outn,
		    const char **errmsg)
{
	size_t pos = 0;

	if (!put(out, outlen, &pos, src, n))
		return fail(errmsg, "SCRAM output buffer too small");
	if (outn != NULL)
		*outn = n;
	return 0;
}

int scram_server_first(struct scram_server *st, const struct scram_secret *secret, bool mock,
		       const char *msg, size_t len, char *out, size_t outlen, size_t *outn,
		       const char **errmsg)
{
	return scram_server_first_cb(st, secret, mock, NULL, msg, len, out, outlen, outn, errmsg);
}

int scram_server_first_cb(struct scram_server *st, const struct scram_secret *secret, bool mock,
			  const struct scram_cbind *cb, const char *msg, size_t len, char *out,
			  size_t outlen, size_t *outn, const char **errmsg)
{
	struct scan s = { msg, msg + len };

	memset(st, 0, sizeof(*st));
	st->state = SCRAM_SERVER_FAILED;
	if (cb != NULL) {
		if (cb->len > sizeof(st->cbind.data) || (cb->plus && (!cb->offered || cb->len == 0)))
			return fail(errmsg, "SCRAM: bad channel-binding setup");
		st->cbind = *cb;
	}
	if (secret == NULL || msg == NULL)
		return fail(errmsg, "SCRAM: no secret or message");
	if (len > SCRAM_MAX_CLIENT_FIRST || memchr(msg, '\0', len) != NULL)
		return fail(errmsg, "malformed SCRAM message (client-first-message too long or has NUL)");
	st->secret = *secret;
	st->mock = mock;
	if (parse_gs2_header(st, &s, errmsg) < 0 || parse_client_first_bare(st, &s, errmsg) < 0
	    || build_server_first(st, errmsg) < 0)
		return -1;
	if (copy_out(st->server_first, st->server_first_len, out, outlen, outn, errmsg) < 0)
		return -1;
	st->state = SCRAM_SERVER_FIRST_SENT;
	return 0;
}

/* c= is base64(gs2 header [+ channel-binding data]): the header exactly as
 * the client sent it first, and with -PLUS the hash of our certificate. */
static int check_channel_binding(const struct scram_server *st, struct span cb, const char **errmsg)
{
	uint8_t buf[sizeof(st->gs2_header) + SCRAM_CBIND_MAX];
	size_t extra = st->cbind.plus ? st->cbind.len : 0;
	int n = crypto_b64_decode(cb.p, cb.len, buf, sizeof(buf));

	if (n < 0)
		return fail(errmsg, "malformed SCRAM message (invalid channel-binding data)");
	if ((size_t)n != st->gs2_len + extra || memcmp(buf, st->gs2_header, st->gs2_len) != 0 ||
	    CRYPTO_memcmp(buf + st->gs2_len, st->cbind.data, extra) != 0)
		return fail(errmsg, "SCRAM channel binding check failed");
	return 0;
}

static bool nonce_matches(const struct scram_server *st, struct span nonce)
{
	size_t cl = strlen(st->client_nonce), sl = strlen(st->server_nonce);

	return nonce.len == cl + sl && memcmp(nonce.p, st->client_nonce, cl) == 0
	       && memcmp(nonce.p + cl, st->server_nonce, sl) == 0;
}

/* c=...,r=...[,ext...],p=... ; *without_proof ends before ",p=". */
static int parse_client_final(const struct scram_server *st, const char *msg, size_t len,
			      uint8_t proof[SCRAM_KEY_LEN], struct span *without_proof,
			      const char **errmsg)
{
	struct scan s = { msg, msg + len };
	struct span cb, nonce, val;
	const char *attr_start;
	char name = 0;

	if (!scan_attr(&s, 'c', &cb) || !scan_comma(&s))
		return fail(errmsg, "malformed SCRAM message (attribute \"c\" expected)");
	if (check_channel_binding(st, cb, errmsg) < 0)
		return -1;
	if (!scan_attr(&s, 'r', &nonce))
		return fail(errmsg, "malformed SCRAM message (attribute \"r\" expected)");
	if (!nonce_matches(st, nonce))
		return fail(errmsg, "SCRAM nonce does not match");
	do {
		attr_start = s.p;
		if (!scan_comma(&s) || !scan_any_attr(&s, &name, &val))
			return fail(errmsg, "malformed SCRAM message (proof expected)");
	} while (name != 'p');
	if (s.p != s.end)
		return fail(errmsg, "malformed SCRAM message (garbage at end of client-final-message)");
	if (!decode_key(val.p, val.len, proof))
		return fail(errmsg, "malformed SCRAM message (malformed proof)");
	without_proof->p = msg;
	without_proof->len = (size_t)(attr_start - msg);
	return 0;
}

/* Recovers ClientKey from the proof and checks it against StoredKey. */
static int verify_proof(struct scram_server *st, const uint8_t proof[SCRAM_KEY_LEN],
			struct span without_proof, uint8_t server_sig[SCRAM_KEY_LEN],
			const char **errmsg)
{
	struct span cfb = { st->client_first_bare, st->client_first_bare_len };
	struct span sf = { st->server_first, st->server_first_len };
	uint8_t client_sig[SCRAM_KEY_LEN], client_key[SCRAM_KEY_LEN], check[SCRAM_KEY_LEN];
	int rc = -2;

	if (!auth_hmac(st->secret.stored_key, cfb, sf, without_proof, client_sig)
	    || !auth_hmac(st->secret.server_key, cfb, sf, without_proof, server_sig))
		return fail(errmsg, "SCRAM: HMAC failed");
	xor_key(client_key, proof, client_sig);
	if (!crypto_sha256(client_key, SCRAM_KEY_LEN, check)) {
		rc = fail(errmsg, "SCRAM: SHA-256 failed");
		goto done;
	}
	/* A mock exchange does all the work of a real one, then fails. */
	if (CRYPTO_memcmp(check, st->secret.stored_key, SCRAM_KEY_LEN) != 0 || st->mock) {
		if (errmsg != NULL)
			*errmsg = "SCRAM authentication failed";
		goto done;
	}
	memcpy(st->client_key, client_key, SCRAM_KEY_LEN);
	st->got_client_key = true;
	memcpy(st->secret.client_key, client_key, SCRAM_KEY_LEN);
	st->secret.has_client_key = true;
	rc = 0;
done:
	OPENSSL_cleanse(client_key, sizeof(client_key));
	return rc;
}

int scram_server_final(struct scram_server *st, const char *msg, size_t len, char *out,
		       size_t outlen, size_t *outn, const char **errmsg)
{
	uint8_t proof[SCRAM_KEY_LEN], server_sig[SCRAM_KEY_LEN];
	struct span without_proof;
	char final[2 + B64_KEY_LEN + 1];
	size_t pos = 0;
	int rc;

	if (st->state != SCRAM_SERVER_FIRST_SENT)
		return fail(errmsg, "SCRAM exchange out of order");
	st->state = SCRAM_SERVER_FAILED;
	if (msg == NULL || len > SCRAM_MAX_CLIENT_FINAL || memchr(msg, '\0', len) != NULL)
		return fail(errmsg, "malformed SCRAM message (client-final-message too long or has NUL)");
	if (parse_client_final(st, msg, len, proof, &without_proof, errmsg) < 0)
		return -1;
	rc = verify_proof(st, proof, without_proof, server_sig, errmsg);
	if (rc != 0)
		return rc;
	if (!put_str(final, sizeof(final), &pos, "v=")
	    || !put_b64(final, sizeof(final), &pos, server_sig, SCRAM_KEY_LEN)
	    || copy_out(final, pos, out, outlen, outn, errmsg) < 0)
		return -1;
	st->state = SCRAM_SERVER_DONE;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Client side                                                              */

#define GS2_PLUS "p=tls-server-end-point,,"

static int client_first(struct scram_client *st, char *out, size_t outlen, size_t *outn)
{
	size_t pos = 0;

	st->state = SCRAM_CLIENT_FAILED;
	if (test_client_nonce[0] != '\0')
		memcpy(st->client_nonce, test_client_nonce, sizeof(st->client_nonce));
	else if (!random_nonce(st->client_nonce, sizeof(st->client_nonce)))
		return -1;
	if (!put_str(st->client_first_bare, sizeof(st->client_first_bare), &pos, "n=")
	    || !put_str(st->client_first_bare, sizeof(st->client_first_bare), &pos, test_client_user)
	    || !put_str(st->client_first_bare, sizeof(st->client_first_bare), &pos, ",r=")
	    || !put_str(st->client_first_bare, sizeof(st->client_first_bare), &pos, st->client_nonce))
		return -1;
	st->cfb_len = pos;
	pos = 0;
	if (!put_str(out, outlen, &pos, st->plus ? GS2_PLUS : "n,,") ||
	    !put(out, outlen, &pos, st->client_first_bare, st->cfb_len))
		return -1;
	if (outn != NULL)
		*outn = pos;
	st->state = SCRAM_CLIENT_FIRST_SENT;
	return 0;
}

int scram_client_first(struct scram_client *st, char *out, size_t outlen, size_t *outn)
{
	memset(st, 0, sizeof(*st));
	return client_first(st, out, outlen, outn);
}

int scram_client_first_plus(struct scram_client *st, const uint8_t *cbind, size_t cbind_len,
			    char *out, size_t outlen, size_t *outn)
{
	memset(st, 0, sizeof(*st));
	if (cbind_len == 0 || cbind_len > sizeof(st->cbind))
		return -1;
	st->plus = true;
	memcpy(st->cbind, cbind, cbind_len);
	st->cbind_len = cbind_len;
	return client_first(st, out, outlen, outn);
}

/* c= of client-final: base64 of the gs2 header, plus the channel-binding
 * data for -PLUS ("biws" is base64 of "n,,"). */
static bool put_cbind_attr(const struct scram_client *st, char *out, size_t outlen, size_t *pos)
{
	uint8_t raw[sizeof(GS2_PLUS) - 1 + sizeof(st->cbind)];
	if (!st->plus)
		return put_str(out, outlen, pos, "c=biws");
	memcpy(raw, GS2_PLUS, sizeof(GS2_PLUS) - 1);
	memcpy(raw + sizeof(GS2_PLUS) - 1, st->cbind, st->cbind_len);
	return put_str(out, outlen, pos, "c=") &&
	       put_b64(out, outlen, pos, raw, sizeof(GS2_PLUS) - 1 + st->cbind_len);
}

struct server_first {
	struct span nonce;
	struct scram_secret params;     /* only salt and iterations are filled */
};

/* r=nonce,s=salt,i=iterations and nothing else, as libpq accepts. */
static int parse_server_first(const struct scram_client *st, const char *msg, size_t len,
			      struct server_first *f, const char **errmsg)
{
	struct scan s = { msg, msg + len };
	size_t cl = strlen(st->client_nonce);
	struct span salt, iter;

	memset(f, 0, sizeof(*f));
	if (len > SCRAM_MAX_SERVER_FIRST || memchr(msg, '\0', len) != NULL)
		return fail(errmsg, "malformed SCRAM message (server-first-message too long or has NUL)");
	if (scan_peek_attr(&s, 'm'))
		return fail(errmsg, "server requires an unsupported SCRAM extension");
	if (!scan_attr(&s, 'r', &f->nonce) || !scan_comma(&s))
		return fail(errmsg, "malformed SCRAM message (attribute \"r\" expected)");
	if (!nonce_valid(f->nonce) || f->nonce.len <= cl || memcmp(f->nonce.p, st->client_nonce, cl) != 0)
		return fail(errmsg, "invalid SCRAM response (nonce mismatch)");
	if (!scan_attr(&s, 's', &salt) || !scan_comma(&s))
		return fail(errmsg, "malformed SCRAM message (attribute \"s\" expected)");
	if (!decode_salt(salt.p, salt.len, &f->params))
		return fail(errmsg, "malformed SCRAM message (invalid salt)");
	if (!scan_attr(&s, 'i', &iter))
		return fail(errmsg, "malformed SCRAM message (attribute \"i\" expected)");
	if (!parse_int(iter.p, iter.len, 1, SCRAM_MAX_ITERATIONS, &f->params.iterations))
		return fail(errmsg, "malformed SCRAM message (invalid iteration count)");
	if (s.p != s.end)
		return fail(errmsg, "malformed SCRAM message (garbage at end of server-first-message)");
	return 0;
}

/* The keys to prove with: from the password (through the cache), or the
 * pass-through ClientKey, which only works with the verifier's salt and
 * iteration count. */
static int client_credential(const struct server_first *f, const char *password,
			     const struct scram_secret *secret, struct scram_secret *keys,
			     const char **errmsg)
{
	if (password != NULL) {
		if (!scram_secret_from_password(password, f->params.salt, f->params.salt_len,
						f->params.iterations, keys))
			return fail(errmsg, "SCRAM: could not derive keys from the password");
		return 0;
	}
	if (secret == NULL || !secret->has_client_key)
		return fail(errmsg, "SCRAM: no password or client key available");
	if (secret->salt_len != f->params.salt_len || secret->iterations != f->params.iterations
	    || memcmp(secret->salt, f->params.salt, f->params.salt_len) != 0)
		return fail(errmsg, "SCRAM pass-through: salt/iterations do not match the server's");
	*keys = *secret;
	if (!crypto_sha256(keys->client_key, SCRAM_KEY_LEN, keys->stored_key))
		return fail(errmsg, "SCRAM: SHA-256 failed");
	return 0;
}

/* Writes "c=<cbind>,r=<nonce>,p=<proof>" and remembers the expected ServerSignature. */
static int build_client_final(struct scram_client *st, const struct server_first *f,
			      struct span sf, const struct scram_secret *keys, char *out,
			      size_t outlen, size_t *outn, const char **errmsg)
{
	struct span cfb = { st->client_first_bare, st->cfb_len }, wp;
	uint8_t client_sig[SCRAM_KEY_LEN], proof[SCRAM_KEY_LEN];
	size_t pos = 0;

	if (!put_cbind_attr(st, out, outlen, &pos) || !put_str(out, outlen, &pos, ",r=") ||
	    !put(out, outlen, &pos, f->nonce.p, f->nonce.len))
		return fail(errmsg, "SCRAM output buffer too small");
	wp = (struct span){ out, pos };
	if (!auth_hmac(keys->stored_key, cfb, sf, wp, client_sig)
	    || !auth_hmac(keys->server_key, cfb, sf, wp, st->expected_server_sig))
		return fail(errmsg, "SCRAM: HMAC failed");
	xor_key(proof, keys->client_key, client_sig);
	if (!put_str(out, outlen, &pos, ",p=") || !put_b64(out, outlen, &pos, proof, SCRAM_KEY_LEN))
		return fail(errmsg, "SCRAM output buffer too small");
	if (outn != NULL)
		*outn = pos;
	return 0;
}

int scram_client_final(struct scram_client *st, const char *server_first, size_t len,
		       const char *password, const struct scram_secret *secret, char *out,
		       size_t outlen, size_t *outn, const char **errmsg)
{
	struct span sf = { server_first, len };
	struct server_first f;
	struct scram_secret keys;
	int rc;

	if (st->state != SCRAM_CLIENT_FIRST_SENT)
		return fail(errmsg, "SCRAM exchange out of order");
	st->state = SCRAM_CLIENT_FAILED;
	if (server_first == NULL)
		return fail(errmsg, "SCRAM: no server-first-message");
	if (parse_server_first(st, server_first, len, &f, errmsg) < 0
	    || client_credential(&f, password, secret, &keys, errmsg) < 0)
		return -1;
	rc = build_client_final(st, &f, sf, &keys, out, outlen, outn, errmsg);
	OPENSSL_cleanse(&keys, sizeof(keys));
	if (rc == 0)
		st->state = SCRAM_CLIENT_FINAL_SENT;
	return rc;
}

int scram_client_verify(struct scram_client *st, const char *server_final, size_t len,
			const char **errmsg)
{
	struct scan s = { server_final, server_final + len };
	uint8_t sig[SCRAM_KEY_LEN];
	struct span val;
	char name;

	if (st->state != SCRAM_CLIENT_FINAL_SENT)
		return fail(errmsg, "SCRAM exchange out of order");
	st->state = SCRAM_CLIENT_FAILED;
	if (server_final == NULL || len > SCRAM_MAX_SERVER_FINAL || memchr(server_final, '\0', len) != NULL)
		return fail(errmsg, "malformed SCRAM message (server-final-message too long or has NUL)");
	if (!scan_any_attr(&s, &name, &val) || (name != 'e' && name != 'v'))
		return fail(errmsg, "malformed SCRAM message (attribute \"v\" expected)");
	if (name == 'e') {
		snprintf(st->server_error, sizeof(st->server_error), "SCRAM server error: %.*s",
			 (int)val.len, val.p);
		return fail(errmsg, st->server_error);
	}
	if (s.p != s.end)
		return fail(errmsg, "malformed SCRAM message (garbage at end of server-final-message)");
	if (!decode_key(val.p, val.len, sig))
		return fail(errmsg, "malformed SCRAM message (malformed server signature)");
	if (CRYPTO_memcmp(sig, st->expected_server_sig, SCRAM_KEY_LEN) != 0)
		return fail(errmsg, "incorrect server signature");
	st->state = SCRAM_CLIENT_DONE;
	return 0;
}

/* ---- warm-up ---- */

/* One whole exchange, pgcrew's client side against its server side, with a
 * made-up secret whose ClientKey is known (the pass-through path, so no
 * PBKDF2 and nothing in the derived-key cache): it touches every page and
 * lazily set-up OpenSSL object a real login uses, so a worker's first
 * client does not pay for that. */
bool scram_warm_up(void)
{
	struct scram_secret secret = { .iterations = SCRAM_DEFAULT_ITERATIONS,
				       .salt_len = SCRAM_DEFAULT_SALT_LEN, .has_client_key = true };
	struct scram_server srv = { 0 };
	struct scram_client cli = { 0 };
	char first[SCRAM_MAX_CLIENT_FIRST], reply[SCRAM_MAX_SERVER_FIRST];
	size_t n1, n2;
	const char *err;

	memset(secret.salt, 's', secret.salt_len);
	memset(secret.client_key, 'c', SCRAM_KEY_LEN);
	memset(secret.server_key, 'k', SCRAM_KEY_LEN);
	if (!crypto_sha256(secret.client_key, SCRAM_KEY_LEN, secret.stored_key))
		return false;
	return scram_client_first(&cli, first, sizeof first, &n1) == 0 &&
	       scram_server_first(&srv, &secret, false, first, n1, reply, sizeof reply, &n2, &err) == 0 &&
	       scram_client_final(&cli, reply, n2, NULL, &secret, first, sizeof first, &n1, &err) == 0 &&
	       scram_server_final(&srv, first, n1, reply, sizeof reply, &n2, &err) == 0 &&
	       scram_client_verify(&cli, reply, n2, &err) == 0;
}

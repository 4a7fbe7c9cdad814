/* pgcrew — TLS: builds each worker's SSL_CTXs from the pgbouncer.ini TLS keys
 * (PgBouncer's spellings for protocols, ciphers, curves and DH) and drives one
 * non-blocking TLS socket: handshake, read, write, close, channel binding.
 * Every OpenSSL error is turned into text and drained where it happens. */
#include "tls.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define ALPN_PG "postgresql"
#define ALPN_PG_LEN (sizeof(ALPN_PG) - 1)

struct tls_ctx {
	SSL_CTX *ssl;
	bool server;                         /* pgcrew accepts (client-facing) */
	bool verify_full;                    /* client ctx: check host names */
};

/* Ciphertext a buffered connection holds (tls_conn_use_buffers): bytes
 * [off, len) of p. */
struct tls_buf {
	uint8_t *p;
	size_t off, len, cap;
};

struct tls_conn {
	SSL *ssl;
	bool buffered;                       /* ciphertext through in/out, not the socket */
	bool in_eof;                         /* the socket said EOF: no ciphertext after in */
	struct tls_buf in, out;
	int8_t ktls;                         /* both directions in the kernel: -1 not yet known */
	/* No pointer to the tls_ctx: a RELOAD frees the worker's old one while
	 * connections made with it live on (the SSL keeps its SSL_CTX). */
	bool verify_full;                    /* copied from the ctx at creation */
	bool direct;                         /* direct TLS: ALPN mandatory */
	bool failed;                         /* fatal error seen; OpenSSL must not be called again */
	bool shut;                           /* close_notify attempted */
	char err[256];                       /* first fatal error, "" when none */
};

static const char *const status_names[] = {
	[TLS_OK] = "ok", [TLS_WANT_READ] = "want-read", [TLS_WANT_WRITE] = "want-write",
	[TLS_EOF] = "eof", [TLS_FAIL] = "fail",
};
_Static_assert(ARRAY_SIZE(status_names) == TLS_STATUS_COUNT, "status_names");

const char *tls_status_name(enum tls_status st)
{
	return (unsigned)st < TLS_STATUS_COUNT ? status_names[st] : "?";
}

static bool is_set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

/*
 * Error text
 */

/* Text of the oldest queued error (the root cause: fopen's errno comes
 * before the PEM and SSL wrappers), then empties the queue so the next
 * connection on this worker starts clean. */
static void ssl_reason(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	const char *r = NULL;

	if (e == 0)
		r = "unknown error";
	else if (ERR_SYSTEM_ERROR(e))
		r = strerror(ERR_GET_REASON(e));
	else
		r = ERR_reason_error_string(e);
	if (r != NULL)
		snprintf(buf, len, "%s", r);
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
}

/* err = "<side>_<key> <value>: <OpenSSL reason>", e.g. side "client" and key
 * "tls_cert_file" name client_tls_cert_file; always returns false. */
static bool ctx_fail(char *err, size_t errlen, const char *side, const char *key,
		     const char *value)
{
	char why[160];

	ssl_reason(why, sizeof why);
	snprintf(err, errlen, "%s_%s %s: %s", side, key, value, why);
	return false;
}

/* Like ctx_fail for our own checks, where OpenSSL queued nothing. */
static bool ctx_reject(char *err, size_t errlen, const char *side, const char *key,
		       const char *value, const char *why)
{
	ERR_clear_error();
	snprintf(err, errlen, "%s_%s %s: %s", side, key, value, why);
	return false;
}

/*
 * Protocol versions, PgBouncer syntax: words separated by commas, colons or
 * blanks; "!word" removes. The result must be one or more versions.
 */

enum tls_proto_bits {
	PROTO_TLS10 = 1 << 0,
	PROTO_TLS11 = 1 << 1,
	PROTO_TLS12 = 1 << 2,
	PROTO_TLS13 = 1 << 3,
	PROTO_SECURE = PROTO_TLS12 | PROTO_TLS13,
	PROTO_ALL = PROTO_TLS10 | PROTO_TLS11 | PROTO_TLS12 | PROTO_TLS13,
};

static const struct { const char *word; unsigned bits; } proto_words[] = {
	{ "tlsv1.0", PROTO_TLS10 }, { "tlsv1.1", PROTO_TLS11 },
	{ "tlsv1.2", PROTO_TLS12 }, { "tlsv1.3", PROTO_TLS13 },
	{ "secure", PROTO_SECURE }, { "default", PROTO_SECURE },
	{ "all", PROTO_ALL }, { "legacy", PROTO_ALL },
};

/* Versions in bit order, with the option that removes each one from the
 * min..max range when the list has a hole ("tlsv1.0,tlsv1.2"). */
static const struct { int version; uint64_t no_opt; } proto_versions[] = {
	{ TLS1_VERSION, SSL_OP_NO_TLSv1 }, { TLS1_1_VERSION, SSL_OP_NO_TLSv1_1 },
	{ TLS1_2_VERSION, SSL_OP_NO_TLSv1_2 }, { TLS1_3_VERSION, SSL_OP_NO_TLSv1_3 },
};

static bool proto_word(const char *w, size_t n, unsigned *bits)
{
	for (size_t i = 0; i < ARRAY_SIZE(proto_words); i++) {
		if (strlen(proto_words[i].word) == n && strncasecmp(w, proto_words[i].word, n) == 0) {
			*bits = proto_words[i].bits;
			return true;
		}
	}
	return false;
}

/* Parses s into a set of enum tls_proto_bits; on error names the bad word. */
static bool proto_parse(const char *s, unsigned *out, char *bad, size_t badlen)
{
	static const char seps[] = ", :\t";
	unsigned set = 0;

	if (!is_set(s))
		s = "secure";
	for (s += strspn(s, seps); *s != '\0'; s += strspn(s, seps)) {
		size_t n = strcspn(s, seps);
		bool neg = s[0] == '!';
		unsigned bits;

		if (!proto_word(s + neg, n - neg, &bits)) {
			snprintf(bad, badlen, "unknown protocol \"%.*s\"", (int)n, s);
			return false;
		}
		set = neg ? set & ~bits : set | bits;
		s += n;
	}
	if (set == 0) {
		snprintf(bad, badlen, "no protocol version left");
		return false;
	}
	*out = set;
	return true;
}

static bool setup_protocols(SSL_CTX *ssl, const struct tls_settings *s, const char *side,
			    char *err, size_t errlen)
{
	char why[64];
	unsigned set;
	int lo = -1, hi = -1;

	if (!proto_parse(s->protocols, &set, why, sizeof why))
		return ctx_reject(err, errlen, side, "tls_protocols", s->protocols, why);
	for (int i = 0; i < (int)ARRAY_SIZE(proto_versions); i++) {
		if (!(set & (1u << i)))
			continue;
		lo = lo < 0 ? i : lo;
		hi = i;
	}
	for (int i = lo; i <= hi; i++) {
		if (!(set & (1u << i)))
			SSL_CTX_set_options(ssl, proto_versions[i].no_opt);
	}
	if (!SSL_CTX_set_min_proto_version(ssl, proto_versions[lo].version) ||
	    !SSL_CTX_set_max_proto_version(ssl, proto_versions[hi].version))
		return ctx_fail(err, errlen, side, "tls_protocols", s->protocols);
	if (lo < 2)
		log_debug("%s_tls_protocols: TLS 1.0/1.1 also need \"@SECLEVEL=0\" in %s_tls_ciphers with OpenSSL 3",
			  side, side);
	return true;
}

/*
 * Ciphers, curves, DH
 */

/* PgBouncer's cipher shortcuts. "default", "secure", "fast" and "normal"
 * all mean OpenSSL's defaults today; "compat" and "legacy" are accepted so
 * PgBouncer 1.18-era files still load, and mean the same. */
static const char *cipher_alias(const char *c)
{
	static const char *const dflt[] = { "default", "secure", "fast", "normal", "compat", "legacy" };

	if (!is_set(c))
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(dflt); i++) {
		if (strcasecmp(c, dflt[i]) == 0)
			return NULL;
	}
	if (strcasecmp(c, "all") == 0 || strcasecmp(c, "insecure") == 0)
		return "ALL";
	return c;
}

static bool setup_ciphers(SSL_CTX *ssl, const struct tls_settings *s, const char *side,
			  char *err, size_t errlen)
{
	const char *list = cipher_alias(s->ciphers);

	if (list != NULL && !SSL_CTX_set_cipher_list(ssl, list))
		return ctx_fail(err, errlen, side, "tls_ciphers", s->ciphers);
	if (is_set(s->tls13_ciphers) && !SSL_CTX_set_ciphersuites(ssl, s->tls13_ciphers)) {
		/* PgBouncer's words first (operators grep them), then which key. */
		ERR_clear_error();
		snprintf(err, errlen, "failed to set the TLSv1.3 cipher suites: %s_tls13_ciphers %s", side,
			 s->tls13_ciphers);
		return false;
	}
	return true;
}

/* "auto": OpenSSL's default groups. "none": no ECDHE, so only the finite
 * field groups remain (TLS 1.3 needs some group). Else a list of curve
 * names ("prime256v1", "secp384r1", "X25519"), comma or colon separated. */
static bool setup_ecdhcurve(SSL_CTX *ssl, const char *curve, char *err, size_t errlen)
{
	static const char ffdhe[] = "ffdhe2048:ffdhe3072:ffdhe4096:ffdhe6144:ffdhe8192";
	char list[256];

	if (!is_set(curve) || strcasecmp(curve, "auto") == 0)
		return true;
	if (strcasecmp(curve, "none") == 0)
		snprintf(list, sizeof list, "%s", ffdhe);
	else if ((size_t)snprintf(list, sizeof list, "%s", curve) >= sizeof list)
		return ctx_reject(err, errlen, "client", "tls_ecdhcurve", curve, "too long");
	for (char *p = list; *p != '\0'; p++)
		*p = *p == ',' ? ':' : *p;
	if (!SSL_CTX_set1_groups_list(ssl, list))
		return ctx_reject(err, errlen, "client", "tls_ecdhcurve", curve, "unknown curve");
	return true;
}

/* A 1024-bit DH group for "legacy" (RFC 5114's, the one OpenSSL names). */
static bool set_legacy_dh(SSL_CTX *ssl)
{
	EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL);
	EVP_PKEY *dh = NULL;
	OSSL_PARAM params[2];

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"dh_1024_160", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (pctx == NULL || EVP_PKEY_paramgen_init(pctx) <= 0 ||
	    !EVP_PKEY_CTX_set_params(pctx, params) || EVP_PKEY_paramgen(pctx, &dh) <= 0) {
		EVP_PKEY_CTX_free(pctx);
		return false;
	}
	EVP_PKEY_CTX_free(pctx);
	if (!SSL_CTX_set0_tmp_dh_pkey(ssl, dh)) {
		EVP_PKEY_free(dh);
		return false;
	}
	return true;
}

/* "none": no DHE suites; "auto": a group matched to the key's strength. */
static bool setup_dheparams(SSL_CTX *ssl, const char *dh, char *err, size_t errlen)
{
	if (!is_set(dh) || strcasecmp(dh, "auto") == 0) {
		if (!SSL_CTX_set_dh_auto(ssl, 1))
			return ctx_fail(err, errlen, "client", "tls_dheparams", "auto");
		return true;
	}
	if (strcasecmp(dh, "none") == 0)
		return true;
	if (strcasecmp(dh, "legacy") != 0)
		return ctx_reject(err, errlen, "client", "tls_dheparams", dh, "must be none, auto or legacy");
	if (!set_legacy_dh(ssl)) {
		ctx_fail(err, errlen, "client", "tls_dheparams", dh);
		/* OpenSSL refuses 1024-bit DH above security level 1 */
		snprintf(err + strlen(err), errlen - strlen(err), " (needs \"@SECLEVEL=1\" in client_tls_ciphers)");
		return false;
	}
	return true;
}

/*
 * Files
 */

/* Certificate chain and matching key; both or neither must be set. */
static bool load_keypair(SSL_CTX *ssl, const struct tls_settings *s, const char *side,
			 char *err, size_t errlen)
{
	if (is_set(s->cert_file) != is_set(s->key_file)) {
		const char *missing = is_set(s->cert_file) ? "key_file" : "cert_file";
		ERR_clear_error();
		snprintf(err, errlen, "%s_tls_%s is not set", side, missing);
		return false;
	}
	if (!is_set(s->cert_file))
		return true;
	if (!SSL_CTX_use_certificate_chain_file(ssl, s->cert_file))
		return ctx_fail(err, errlen, side, "tls_cert_file", s->cert_file);
	if (!SSL_CTX_use_PrivateKey_file(ssl, s->key_file, SSL_FILETYPE_PEM))
		return ctx_fail(err, errlen, side, "tls_key_file", s->key_file);
	if (!SSL_CTX_check_private_key(ssl))
		return ctx_fail(err, errlen, side, "tls_key_file", s->key_file);
	return true;
}

static bool load_ca(SSL_CTX *ssl, const char *ca, const char *side, char *err, size_t errlen)
{
	if (!SSL_CTX_load_verify_locations(ssl, ca, NULL))
		return ctx_fail(err, errlen, side, "tls_ca_file", ca);
	return true;
}

/*
 * Channel binding (RFC 5929 tls-server-end-point)
 */

static bool end_point_hash(X509 *cert, uint8_t *out, size_t *outlen)
{
	int md_nid = NID_undef;
	unsigned n = 0;
	EVP_MD *md;
	bool ok;

	if (cert == NULL || !X509_get_signature_info(cert, &md_nid, NULL, NULL, NULL) ||
	    md_nid == NID_undef) {
		ERR_clear_error();
		return false;
	}
	if (md_nid == NID_md5 || md_nid == NID_sha1)
		md_nid = NID_sha256;
	md = EVP_MD_fetch(NULL, OBJ_nid2sn(md_nid), NULL);
	ok = md != NULL && (size_t)EVP_MD_get_size(md) <= *outlen && X509_digest(cert, md, out, &n);
	EVP_MD_free(md);
	ERR_clear_error();
	*outlen = ok ? n : 0;
	return ok;
}

/*
 * Contexts
 */

static struct tls_ctx *ctx_alloc(const SSL_METHOD *method, char *err, size_t errlen)
{
	struct tls_ctx *ctx = calloc(1, sizeof *ctx);

	if (ctx == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ctx->ssl = SSL_CTX_new(method);
	if (ctx->ssl == NULL) {
		ssl_reason(err, errlen);
		free(ctx);
		return NULL;
	}
	/* Release buffers of idle connections (10k idle clients would otherwise
	 * hold ~35 kB each); let the stream layer write from a moving evbuffer. */
	SSL_CTX_set_mode(ctx->ssl, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
				   SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* The PostgreSQL protocol frames itself, so a TCP close without
	 * close_notify cannot truncate a message unseen: treat it as EOF.
	 * Renegotiation has no use here and is a CPU-exhaustion lever. */
	SSL_CTX_set_options(ctx->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	/* One recv per record instead of two (its 5-byte header, then the
	 * rest); what it reads beyond the record waits in OpenSSL, which
	 * tls_pending() reports. */
	SSL_CTX_set_read_ahead(ctx->ssl, 1);
	return ctx;
}

void tls_ctx_free(struct tls_ctx *ctx)
{
	if (ctx == NULL)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

/* Walks the client's ALPN list (length-prefixed names) for "postgresql". */
static bool alpn_has_pg(const unsigned char *in, size_t inlen, const unsigned char **name)
{
	for (size_t i = 0; i < inlen; i += 1 + (size_t)in[i]) {
		size_t n = in[i];

		if (i + 1 + n > inlen)
			return false;
		if (n == ALPN_PG_LEN && memcmp(in + i + 1, ALPN_PG, ALPN_PG_LEN) == 0) {
			*name = in + i + 1;
			return true;
		}
	}
	return false;
}

/* PostgreSQL 17's rule: whoever offers ALPN must offer "postgresql". */
static int alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
			  const unsigned char *in, unsigned int inlen, void *arg)
{
	struct tls_conn *c = SSL_get_app_data(ssl);
	const unsigned char *name;

	(void)arg;
	if (alpn_has_pg(in, inlen, &name)) {
		*out = name;
		*outlen = ALPN_PG_LEN;
		return SSL_TLSEXT_ERR_OK;
	}
	snprintf(c->err, sizeof c->err, "client offered ALPN without \"" ALPN_PG "\"");
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* The ALPN callback only runs when the client sent ALPN at all; a direct
 * TLS client that sent none is refused here, inside the handshake, so it
 * gets the no_application_protocol alert rather than a silent close. */
static int client_hello_cb(SSL *ssl, int *alert, void *arg)
{
	struct tls_conn *c = SSL_get_app_data(ssl);
	const unsigned char *ext;
	size_t extlen;

	(void)arg;
	if (!c->direct ||
	    SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext, &extlen))
		return SSL_CLIENT_HELLO_SUCCESS;
	snprintf(c->err, sizeof c->err, "direct TLS connection without ALPN \"" ALPN_PG "\"");
	*alert = SSL_AD_NO_APPLICATION_PROTOCOL;
	return SSL_CLIENT_HELLO_ERROR;
}

/* Certificate authentication below verify-ca: a missing or bad client
 * certificate must not fail the handshake (the login is refused with
 * PostgreSQL's words instead); OpenSSL still records the verdict, which
 * verified_peer() reads. */
static int record_verdict(int preverify_ok, X509_STORE_CTX *x)
{
	(void)preverify_ok;
	(void)x;
	return 1;
}

static bool server_verify(struct tls_ctx *ctx, const struct tls_settings *s, char *err, size_t errlen)
{
	STACK_OF(X509_NAME) *names;
	bool optional = s->sslmode < TLS_SSLMODE_VERIFY_CA;

	/* PgBouncer: below verify-ca a client cert is not even asked for,
	 * unless certificate authentication may need one. */
	if (optional && (!s->ask_client_cert || !is_set(s->ca_file)))
		return true;
	if (!is_set(s->ca_file)) {
		snprintf(err, errlen, "client_tls_ca_file is not set (needed by client_tls_sslmode verify-ca/verify-full)");
		return false;
	}
	if (!load_ca(ctx->ssl, s->ca_file, "client", err, errlen))
		return false;
	names = SSL_load_client_CA_file(s->ca_file);
	if (names == NULL)
		return ctx_fail(err, errlen, "client", "tls_ca_file", s->ca_file);
	SSL_CTX_set_client_CA_list(ctx->ssl, names);
	if (optional)
		SSL_CTX_set_verify(ctx->ssl, SSL_VERIFY_PEER, record_verdict);
	else
		SSL_CTX_set_verify(ctx->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return true;
}

/* ---- session tickets shared by every worker ----
 * OpenSSL's own ticket keys are random per SSL_CTX, so a client would
 * resume only on the worker that issued its ticket, while SO_REUSEPORT
 * sends its reconnect to any worker. The supervisor draws one key set
 * before the first fork (tls_ticket_keys_init); every worker, respawned
 * ones too, inherits it and encrypts and decrypts tickets with it. */
struct ticket_keys {
	uint8_t name[16];                /* tells our tickets from another pgcrew's */
	uint8_t aes[32];                 /* AES-256-CBC */
	uint8_t hmac[32];                /* HMAC-SHA256 */
};
static struct ticket_keys tickets;
static bool tickets_ready;
static EVP_CIPHER *ticket_cipher;       /* fetched once per process */

bool tls_ticket_keys_init(void)
{
	if (RAND_bytes((unsigned char *)&tickets, sizeof tickets) != 1) {
		ERR_clear_error();
		return false;
	}
	tickets_ready = true;
	return true;
}

/* SSL_CTX_set_tlsext_ticket_key_evp_cb: 1 = use these keys, 0 = not our
 * key (the client gets a full handshake), -1 = error. */
static int ticket_key_cb(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
			 EVP_MAC_CTX *hctx, int enc)
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, tickets.hmac, sizeof tickets.hmac),
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};

	(void)ssl;
	if (enc) {
		memcpy(name, tickets.name, sizeof tickets.name);
		if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(ticket_cipher)) != 1 ||
		    !EVP_EncryptInit_ex2(cctx, ticket_cipher, tickets.aes, iv, NULL))
			return -1;
	} else {
		if (CRYPTO_memcmp(name, tickets.name, sizeof tickets.name) != 0)
			return 0;
		if (!EVP_DecryptInit_ex2(cctx, ticket_cipher, tickets.aes, iv, NULL))
			return -1;
	}
	return EVP_MAC_CTX_set_params(hctx, params) ? 1 : -1;
}

static void shared_tickets(SSL_CTX *ssl)
{
	if (!tickets_ready)
		return;
	if (ticket_cipher == NULL)
		ticket_cipher = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
	if (ticket_cipher == NULL) {
		ERR_clear_error();
		return;     /* OpenSSL's per-context keys stay */
	}
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ssl, ticket_key_cb);
}

static void server_sessions(SSL_CTX *ssl)
{
	static const unsigned char sid_ctx[] = "pgcrew";

	/* Required for resumption when client certificates are verified. */
	SSL_CTX_set_session_id_context(ssl, sid_ctx, sizeof sid_ctx - 1);
	/* Tickets are stateless: no per-worker session cache to grow. */
	SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
	/* One TLS 1.3 ticket is enough for the reconnect that will use it. */
	SSL_CTX_set_num_tickets(ssl, 1);
	shared_tickets(ssl);
}

static bool server_setup(struct tls_ctx *ctx, const struct tls_settings *s, char *err, size_t errlen)
{
	if (!is_set(s->cert_file) && !is_set(s->key_file)) {
		snprintf(err, errlen, "client_tls_key_file and client_tls_cert_file must be set for client TLS");
		return false;
	}
	/* Ciphers first: an "@SECLEVEL=n" there also decides which keys and
	 * certificate signatures are acceptable when they are loaded. */
	if (!setup_protocols(ctx->ssl, s, "client", err, errlen) ||
	    !setup_ciphers(ctx->ssl, s, "client", err, errlen) ||
	    !load_keypair(ctx->ssl, s, "client", err, errlen) ||
	    !setup_ecdhcurve(ctx->ssl, s->ecdhcurve, err, errlen) ||
	    !setup_dheparams(ctx->ssl, s->dheparams, err, errlen) ||
	    !server_verify(ctx, s, err, errlen))
		return false;
	server_sessions(ctx->ssl);
	SSL_CTX_set_alpn_select_cb(ctx->ssl, alpn_select_cb, NULL);
	SSL_CTX_set_client_hello_cb(ctx->ssl, client_hello_cb, NULL);
	return true;
}

struct tls_ctx *tls_ctx_new_server(const struct tls_settings *s, char *err, size_t errlen)
{
	struct tls_ctx *ctx = ctx_alloc(TLS_server_method(), err, errlen);

	if (ctx == NULL)
		return NULL;
	ctx->server = true;
	if (!server_setup(ctx, s, err, errlen)) {
		tls_ctx_free(ctx);
		return NULL;
	}
	log_debug("client TLS context ready: sslmode=%d protocols=%s", s->sslmode,
		  is_set(s->protocols) ? s->protocols : "secure");
	return ctx;
}

static bool client_verify(struct tls_ctx *ctx, const struct tls_settings *s, char *err, size_t errlen)
{
	if (s->sslmode < TLS_SSLMODE_VERIFY_CA)
		return true;
	if (is_set(s->ca_file)) {
		if (!load_ca(ctx->ssl, s->ca_file, "server", err, errlen))
			return false;
	} else if (!SSL_CTX_set_default_verify_paths(ctx->ssl)) {
		return ctx_fail(err, errlen, "server", "tls_ca_file", "(system default)");
	}
	SSL_CTX_set_verify(ctx->ssl, SSL_VERIFY_PEER, NULL);
	ctx->verify_full = s->sslmode == TLS_SSLMODE_VERIFY_FULL;
	return true;
}

struct tls_ctx *tls_ctx_new_client(const struct tls_settings *s, char *err, size_t errlen)
{
	static const unsigned char alpn[] = "\x0a" ALPN_PG;
	struct tls_ctx *ctx = ctx_alloc(TLS_client_method(), err, errlen);

	if (ctx == NULL)
		return NULL;
	/* Ciphers first: an "@SECLEVEL=n" there also decides which keys and
	 * certificate signatures are acceptable when they are loaded. */
	if (!setup_protocols(ctx->ssl, s, "server", err, errlen) ||
	    !setup_ciphers(ctx->ssl, s, "server", err, errlen) ||
	    !load_keypair(ctx->ssl, s, "server", err, errlen) ||
	    !client_verify(ctx, s, err, errlen))
		goto fail;
	/* SSL_CTX_set_alpn_protos returns 0 on success. */
	if (SSL_CTX_set_alpn_protos(ctx->ssl, alpn, sizeof alpn - 1) != 0) {
		ssl_reason(err, errlen);
		goto fail;
	}
	bool ktls = tls_ktls_available();
#ifdef SSL_OP_ENABLE_KTLS
	/* Keys in the kernel let a server connection move to another worker
	 * (server_move.c); OpenSSL falls back to itself per connection when
	 * the cipher or kernel does not allow it. */
	if (ktls)
		SSL_CTX_set_options(ctx->ssl, SSL_OP_ENABLE_KTLS);
#else
	ktls = false;
#endif
	log_debug("server TLS context ready: sslmode=%d protocols=%s ktls=%s", s->sslmode,
		  is_set(s->protocols) ? s->protocols : "secure", ktls ? "on" : "off");
	return ctx;
fail:
	tls_ctx_free(ctx);
	return NULL;
}

/*
 * Connections
 */

static struct tls_conn *conn_new(struct tls_ctx *ctx, int fd)
{
	struct tls_conn *c = calloc(1, sizeof *c);

	if (c == NULL)
		return NULL;
	c->verify_full = ctx->verify_full;
	c->ktls = -1;
	c->ssl = SSL_new(ctx->ssl);
	if (c->ssl == NULL || !SSL_set_fd(c->ssl, fd)) {
		ERR_clear_error();
		SSL_free(c->ssl);
		free(c);
		return NULL;
	}
	SSL_set_app_data(c->ssl, c);
	return c;
}

struct tls_conn *tls_conn_accept(struct tls_ctx *ctx, int fd, bool direct)
{
	struct tls_conn *c = conn_new(ctx, fd);

	if (c == NULL)
		return NULL;
	c->direct = direct;
	SSL_set_accept_state(c->ssl);
	return c;
}

static bool is_ip_literal(const char *host)
{
	unsigned char addr[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

/* SNI and the verify-full name check; false with c->err set when the name
 * cannot be used, which then fails the handshake rather than skipping it. */
static bool conn_set_host(struct tls_conn *c, const char *host)
{
	bool ip = is_set(host) && is_ip_literal(host);
	X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);

	if (is_set(host) && !ip && !SSL_set_tlsext_host_name(c->ssl, host))
		goto fail;
	if (!c->verify_full)
		return true;
	if (!is_set(host)) {
		snprintf(c->err, sizeof c->err, "server_tls_sslmode verify-full needs a host name");
		return false;
	}
	X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (ip ? !X509_VERIFY_PARAM_set1_ip_asc(param, host) : !X509_VERIFY_PARAM_set1_host(param, host, 0))
		goto fail;
	return true;
fail:
	snprintf(c->err, sizeof c->err, "cannot use host name \"%s\" for TLS", host);
	ERR_clear_error();
	return false;
}

struct tls_conn *tls_conn_connect(struct tls_ctx *ctx, int fd, const char *host)
{
	struct tls_conn *c = conn_new(ctx, fd);

	if (c == NULL)
		return NULL;
	SSL_set_connect_state(c->ssl);
	if (!conn_set_host(c, host))
		c->failed = true;
	return c;
}

/* Records why the connection failed (the first reason wins: a callback may
 * already have said it better than the alert OpenSSL reports) and drains
 * the error queue. */
static void conn_fail(struct tls_conn *c, int sslerr, int saved_errno)
{
	unsigned long e = ERR_peek_error();
	char why[160];

	c->failed = true;
	if (c->err[0] != '\0') {
		ERR_clear_error();
		return;
	}
	if (e == 0 && sslerr == SSL_ERROR_SYSCALL) {
		snprintf(c->err, sizeof c->err, "%s", saved_errno != 0 ? strerror(saved_errno) : "unexpected EOF");
		return;
	}
	ssl_reason(why, sizeof why);
	if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED)
		snprintf(c->err, sizeof c->err, "%s: %s", why,
			 X509_verify_cert_error_string(SSL_get_verify_result(c->ssl)));
	else
		snprintf(c->err, sizeof c->err, "%s", why);
}

/* Maps a failed SSL call (ret from the _ex functions or do_handshake) to a
 * status; saved_errno is errno right after the call. */
static enum tls_status conn_status(struct tls_conn *c, int ret, int saved_errno)
{
	int sslerr = SSL_get_error(c->ssl, ret);

	switch (sslerr) {
	case SSL_ERROR_WANT_READ:
		return TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return TLS_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN:
		ERR_clear_error();
		return TLS_EOF;
	default:
		conn_fail(c, sslerr, saved_errno);
		return TLS_FAIL;
	}
}

enum tls_status tls_handshake(struct tls_conn *c)
{
	enum tls_status st;
	int ret;

	if (c->failed)
		return TLS_FAIL;
	ERR_clear_error();
	errno = 0;
	ret = SSL_do_handshake(c->ssl);
	if (ret == 1)
		return TLS_OK;
	st = conn_status(c, ret, errno);
	if (st == TLS_EOF && c->err[0] == '\0')
		snprintf(c->err, sizeof c->err, "connection closed during TLS handshake");
	return st;
}

ssize_t tls_recv(struct tls_conn *c, void *buf, size_t len, enum tls_status *st)
{
	size_t n = 0;

	*st = TLS_OK;
	if (c->failed) {
		*st = TLS_FAIL;
		return -1;
	}
	if (len == 0)
		return 0;
	ERR_clear_error();
	errno = 0;
	if (SSL_read_ex(c->ssl, buf, len, &n))
		return (ssize_t)n;
	*st = conn_status(c, 0, errno);
	return *st == TLS_EOF ? 0 : -1;
}

ssize_t tls_send(struct tls_conn *c, const void *buf, size_t len, enum tls_status *st)
{
	size_t n = 0;

	*st = TLS_OK;
	if (c->failed) {
		*st = TLS_FAIL;
		return -1;
	}
	if (len == 0)
		return 0;
	if (c->buffered && tls_out_full(c)) {
		*st = TLS_WANT_WRITE;      /* drain tls_out_data first */
		return -1;
	}
	ERR_clear_error();
	errno = 0;
	if (SSL_write_ex(c->ssl, buf, len, &n))
		return (ssize_t)n;
	*st = conn_status(c, 0, errno);
	/* Writing after the peer's close_notify is an error for the writer. */
	if (*st == TLS_EOF)
		*st = TLS_FAIL;
	return -1;
}

bool tls_pending(struct tls_conn *c)
{
	/* SSL_pending() counts only decrypted bytes; with read-ahead whole
	 * records may wait undecrypted in the read buffer; a buffered
	 * connection may hold ciphertext OpenSSL has not read yet, or the
	 * socket's EOF still to be said. */
	return !c->failed && (SSL_has_pending(c->ssl) || tls_in_held(c));
}

const char *tls_conn_error(struct tls_conn *c)
{
	return c->err;
}

const char *tls_conn_version(struct tls_conn *c)
{
	return SSL_get_version(c->ssl);
}

const char *tls_conn_info(struct tls_conn *c, char *buf, size_t len)
{
	/* Until the handshake is over (a client that sent SSLRequest and no
	 * ClientHello yet, or one mid-handshake) there is no cipher or group
	 * to show, and OpenSSL 3.0's SSL_get_negotiated_group() dereferences
	 * state that does not exist yet: the console asks about connections in
	 * every state, so only the version is asked for then. */
	if (c->failed || !SSL_is_init_finished(c->ssl)) {
		snprintf(buf, len, "%s/-", SSL_get_version(c->ssl));
		return buf;
	}
	const SSL_CIPHER *ciph = SSL_get_current_cipher(c->ssl);
	int group = SSL_get_negotiated_group(c->ssl);
	const char *gname = group > 0 ? OBJ_nid2sn(group) : NULL;
	snprintf(buf, len, "%s/%s%s%s", SSL_get_version(c->ssl), ciph ? SSL_CIPHER_get_name(ciph) : "-",
		 gname ? "/ECDH=" : "", gname ? gname : "");
	return buf;
}

const char *tls_conn_cipher(struct tls_conn *c)
{
	const char *name = SSL_CIPHER_get_name(SSL_get_current_cipher(c->ssl));

	return name != NULL ? name : "(none)";
}

/* Only a certificate OpenSSL verified counts: with SSL_VERIFY_PEER a bad
 * one already failed the handshake, without it nothing was checked. */
static X509 *verified_peer(struct tls_conn *c)
{
	if (c->failed || !SSL_is_init_finished(c->ssl) || !(SSL_get_verify_mode(c->ssl) & SSL_VERIFY_PEER))
		return NULL;
	if (SSL_get_verify_result(c->ssl) != X509_V_OK)
		return NULL;
	return SSL_get0_peer_certificate(c->ssl);
}

bool tls_conn_peer_cn(struct tls_conn *c, char *buf, size_t len)
{
	X509 *peer = verified_peer(c);
	X509_NAME *subject = peer != NULL ? X509_get_subject_name(peer) : NULL;
	int idx = subject != NULL ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1;
	unsigned char *utf8 = NULL;
	int n;
	bool ok;

	if (idx < 0)
		return false;
	n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx)));
	/* A NUL inside the CN would let "admin\0.evil" pass as "admin". */
	ok = n >= 0 && (size_t)n < len && memchr(utf8, '\0', (size_t)n) == NULL;
	if (ok) {
		memcpy(buf, utf8, (size_t)n);
		buf[n] = '\0';
	}
	OPENSSL_free(utf8);
	ERR_clear_error();
	return ok;
}

bool tls_conn_server_end_point(struct tls_conn *c, uint8_t *out, size_t *outlen)
{
	if (c->failed || !SSL_is_init_finished(c->ssl))
		return false;
	/* From the SSL itself, which keeps its SSL_CTX and certificate
	 * referenced across a RELOAD. One digest per SCRAM-PLUS login. */
	if (!SSL_is_server(c->ssl))
		return end_point_hash(SSL_get0_peer_certificate(c->ssl), out, outlen);
	return end_point_hash(SSL_get_certificate(c->ssl), out, outlen);
}

void tls_conn_shutdown(struct tls_conn *c)
{
	if (c->failed || c->shut || !SSL_is_init_finished(c->ssl))
		return;
	c->shut = true;
	ERR_clear_error();
	(void)SSL_shutdown(c->ssl);
	ERR_clear_error();
}

/*
 * Kernel TLS
 */

bool tls_ulp_list_has_tls(const char *list)
{
	const char *p = list;
	while (p && *p) {
		size_t n = strcspn(p, " \t\n");
		if (n == 3 && strncmp(p, "tls", 3) == 0)
			return true;
		p += n;
		p += strspn(p, " \t\n");
	}
	return false;
}

bool tls_ktls_available(void)
{
	static int known = -1;
	if (known < 0) {
		/* Loaded ULPs only: an unprivileged process cannot load the
		 * module itself (the kernel autoloads for CAP_NET_ADMIN). */
		char buf[256] = "";
		FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);
			buf[n] = 0;
			fclose(f);
		}
		known = tls_ulp_list_has_tls(buf);
	}
	return known > 0;
}

bool tls_conn_in_kernel(struct tls_conn *c)
{
	if (c->failed || c->shut || !SSL_is_init_finished(c->ssl))
		return false;
	if (c->ktls < 0)
		c->ktls = BIO_get_ktls_send(SSL_get_wbio(c->ssl)) &&
			  BIO_get_ktls_recv(SSL_get_rbio(c->ssl));
	return c->ktls > 0 && !SSL_has_pending(c->ssl);
}

/*
 * Buffered connections: OpenSSL reads and writes ciphertext through a BIO
 * of ours backed by two buffers, which the stream layer fills and drains
 * with the io_uring batch's receives and sends, so SSL_read and SSL_write
 * never enter the kernel themselves.
 */

#define TLS_IN_CAP (34 * 1024)        /* two whole records, and their headers */
#define TLS_OUT_FULL (64 * 1024)      /* SSL_write waits while this much is unsent */
#define TLS_OUT_MIN (20 * 1024)       /* a record's worth, and more */
#define SPARE_MAX 64                  /* empty buffers kept per kind, per process */

/* An idle connection holds no ciphertext buffer: each is taken when bytes
 * come and given back when they are gone, and a few empty ones are kept
 * for the next (idle TLS clients stay as small as plain ones). */
struct spares {
	uint8_t *b[SPARE_MAX];
	int n;
};
static struct spares spare_in, spare_out;

static uint8_t *buf_take(struct spares *sp, size_t size)
{
	return sp->n > 0 ? sp->b[--sp->n] : malloc(size);
}

static void buf_give(struct spares *sp, struct tls_buf *b, size_t size)
{
	if (b->cap == size && sp->n < SPARE_MAX)
		sp->b[sp->n++] = b->p;
	else
		free(b->p);
	*b = (struct tls_buf){ 0 };
}

void tls_conn_free(struct tls_conn *c)
{
	if (c == NULL)
		return;
	SSL_free(c->ssl);
	ERR_clear_error();
	buf_give(&spare_in, &c->in, TLS_IN_CAP);
	buf_give(&spare_out, &c->out, TLS_OUT_MIN);
	free(c);
}

void tls_buffers_free(void)
{
	while (spare_in.n > 0)
		free(spare_in.b[--spare_in.n]);
	while (spare_out.n > 0)
		free(spare_out.b[--spare_out.n]);
}

static int bio_write(BIO *b, const char *data, int len)
{
	struct tls_conn *c = BIO_get_data(b);
	struct tls_buf *o = &c->out;
	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (o->off > 0 && o->off == o->len)
		o->off = o->len = 0;
	if (!o->p && (size_t)len <= TLS_OUT_MIN) {
		if (!(o->p = buf_take(&spare_out, TLS_OUT_MIN)))
			return -1;
		o->cap = TLS_OUT_MIN;
	}
	if (o->len + (size_t)len > o->cap) {
		size_t cap = o->cap ? o->cap : TLS_OUT_MIN;
		while (cap < o->len + (size_t)len)
			cap *= 2;
		uint8_t *p = realloc(o->p, cap);
		if (!p)
			return -1;
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, data, (size_t)len);
	o->len += (size_t)len;
	return len;
}

static int bio_read(BIO *b, char *data, int len)
{
	struct tls_conn *c = BIO_get_data(b);
	struct tls_buf *in = &c->in;
	size_t have = in->len - in->off;
	BIO_clear_retry_flags(b);
	if (have == 0) {
		if (c->in_eof)
			return 0;
		BIO_set_retry_read(b);
		return -1;
	}
	size_t n = have < (size_t)len ? have : (size_t)len;
	memcpy(data, in->p + in->off, n);
	in->off += n;
	if (in->off == in->len)
		buf_give(&spare_in, in, TLS_IN_CAP);
	return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_conn *c = BIO_get_data(b);
	(void)num;
	(void)ptr;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_PENDING:
		return (long)(c->in.len - c->in.off);
	case BIO_CTRL_EOF:
		return c->in_eof && c->in.len == c->in.off;
	default:
		return 0;
	}
}

static int bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static const BIO_METHOD *buffer_method(void)
{
	static BIO_METHOD *m;
	if (m)
		return m;
	m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "pgcrew buffers");
	if (!m || !BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
	    !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create)) {
		BIO_meth_free(m);
		m = NULL;
	}
	return m;
}

bool tls_conn_use_buffers(struct tls_conn *c)
{
	const BIO_METHOD *m = buffer_method();
	if (c->buffered)
		return true;
	if (!m || c->failed || !SSL_is_init_finished(c->ssl))
		return false;
	BIO *b = BIO_new(m);
	if (!b) {
		ERR_clear_error();
		return false;
	}
	BIO_set_data(b, c);
	/* The socket BIOs go (they do not close the socket); records OpenSSL
	 * has read ahead stay in the SSL and are read first. One BIO for both
	 * directions: SSL_set_bio then takes a single reference. */
	SSL_set_bio(c->ssl, b, b);
	c->buffered = true;
	return true;
}

bool tls_conn_buffered(const struct tls_conn *c)
{
	return c->buffered;
}

uint8_t *tls_in_space(struct tls_conn *c, size_t *len)
{
	struct tls_buf *in = &c->in;
	if (!in->p) {
		*len = 0;
		if (!(in->p = buf_take(&spare_in, TLS_IN_CAP)))
			return NULL;
		in->cap = TLS_IN_CAP;
	}
	if (in->off > 0) {
		memmove(in->p, in->p + in->off, in->len - in->off);
		in->len -= in->off;
		in->off = 0;
	}
	*len = in->cap - in->len;
	return in->p + in->len;
}

void tls_in_added(struct tls_conn *c, ssize_t n)
{
	if (n > 0)
		c->in.len += (size_t)n;
	else if (n == 0)
		c->in_eof = true;
}

bool tls_in_held(const struct tls_conn *c)
{
	return c->buffered && (c->in.len > c->in.off || c->in_eof);
}

const uint8_t *tls_out_data(const struct tls_conn *c, size_t *len)
{
	*len = c->out.len - c->out.off;
	return c->out.p ? c->out.p + c->out.off : NULL;     /* no buffer while nothing is held */
}

void tls_out_sent(struct tls_conn *c, size_t n)
{
	c->out.off += n;
	if (c->out.off == c->out.len)
		buf_give(&spare_out, &c->out, TLS_OUT_MIN);
}

bool tls_out_full(const struct tls_conn *c)
{
	return c->out.len - c->out.off >= TLS_OUT_FULL;
}

/*
 * Warm-up
 */

static SSL *warm_client(int fd)
{
	static const unsigned char alpn[] = "\x0a" ALPN_PG;
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = NULL;

	if (cctx == NULL)
		return NULL;
	SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
	if (SSL_CTX_set_alpn_protos(cctx, alpn, sizeof alpn - 1) == 0)
		ssl = SSL_new(cctx);
	SSL_CTX_free(cctx);              /* the SSL holds its own reference */
	if (ssl != NULL && !SSL_set_fd(ssl, fd)) {
		SSL_free(ssl);
		ssl = NULL;
	}
	if (ssl != NULL)
		SSL_set_connect_state(ssl);
	return ssl;
}

/* Both ends are non-blocking and in this process: step them in turn. A
 * handshake takes 2-3 flights each way; 16 turns is plenty. */
static bool warm_handshake(struct tls_conn *srv, SSL *cli)
{
	bool cli_done = false, srv_done = false;

	for (int turn = 0; turn < 16 && !(cli_done && srv_done); turn++) {
		if (!cli_done) {
			int ret = SSL_do_handshake(cli);
			int e = ret == 1 ? SSL_ERROR_NONE : SSL_get_error(cli, ret);
			if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
				return false;
			cli_done = ret == 1;
		}
		if (!srv_done) {
			enum tls_status st = tls_handshake(srv);
			if (st != TLS_OK && st != TLS_WANT_READ && st != TLS_WANT_WRITE)
				return false;
			srv_done = st == TLS_OK;
		}
	}
	return cli_done && srv_done;
}

bool tls_ctx_warm_up(struct tls_ctx *ctx)
{
	struct tls_conn *srv = NULL;
	SSL *cli = NULL;
	bool ok = false;
	int sv[2];

	if (ctx == NULL || !ctx->server ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	srv = tls_conn_accept(ctx, sv[0], false);
	cli = warm_client(sv[1]);
	if (srv != NULL && cli != NULL)
		ok = warm_handshake(srv, cli);
	if (!ok && srv != NULL)
		log_debug("TLS warm-up handshake did not complete: %s", tls_conn_error(srv));
	SSL_free(cli);
	tls_conn_free(srv);
	close(sv[0]);
	close(sv[1]);
	ERR_clear_error();
	return ok;
}

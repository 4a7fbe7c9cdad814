/* pgcrew — SCRAM-SHA-256 (RFC 5802/7677, PostgreSQL's rules) on both sides:
 * as a server toward clients and as a client toward PostgreSQL, with a
 * per-process cache of derived keys and ClientKey recovery for pass-through.
 * State structs hold no heap pointers so they can live inside struct client. */
#ifndef PGCREW_AUTH_SCRAM_H
#define PGCREW_AUTH_SCRAM_H

#include "types.h"

#define SCRAM_KEY_LEN 32
#define SCRAM_MAX_SALT 64
#define SCRAM_DEFAULT_SALT_LEN 16          /* what PostgreSQL generates */
#define SCRAM_DEFAULT_ITERATIONS 4096
#define SCRAM_MAX_NONCE 255                /* any received nonce longer than this is an error */
#define SCRAM_MAX_CLIENT_FIRST 1024        /* client-first-message bound (server side) */
#define SCRAM_MAX_SERVER_FIRST 1024        /* server-first-message bound (client side) */
#define SCRAM_MAX_CLIENT_FINAL 1024        /* client-final-message bound (server side) */
#define SCRAM_MAX_SERVER_FINAL 512         /* server-final-message bound (client side) */
#define SCRAM_MAX_ITERATIONS 10000000      /* for anything we must run PBKDF2 on */
#define SCRAM_MY_NONCE_MAX 63              /* our own nonces, and test nonces */
#define SCRAM_CACHE_ENTRIES 1024           /* derived-key cache size, per process */
#define SCRAM_CBIND_MAX 64                 /* tls-server-end-point data: a hash, at most SHA-512 */

struct scram_secret {            /* everything a verifier holds, plus the ClientKey when known */
	int iterations;
	uint8_t salt[SCRAM_MAX_SALT];
	size_t salt_len;
	uint8_t stored_key[SCRAM_KEY_LEN], server_key[SCRAM_KEY_LEN];
	bool has_client_key;
	uint8_t client_key[SCRAM_KEY_LEN];   /* from a plaintext password or pass-through */
};

/* "SCRAM-SHA-256$<iter>:<b64salt>$<b64stored>:<b64server>". Iterations
 * 1..INT_MAX, salt 1..SCRAM_MAX_SALT bytes, keys exactly 32 bytes. */
bool scram_parse_verifier(const char *verifier, struct scram_secret *out) MUSTCHECK;

/* Derives SaltedPassword = Hi(password, salt, iterations) and the keys,
 * through the per-process cache (SCRAM_CACHE_ENTRIES, 4-way set-associative,
 * LRU within a set, keyed by an HMAC of (iterations, salt, password) under a
 * process-random key): a second login of the same user costs no PBKDF2.
 * The password is used as raw bytes, without SASLprep: PostgreSQL does the
 * same when SASLprep fails, and ASCII passwords are unaffected; non-ASCII
 * passwords that NFKC normalisation would change do not match. */
bool scram_secret_from_password(const char *password, const uint8_t *salt, size_t salt_len,
				int iterations, struct scram_secret *out) MUSTCHECK;

/* Client-facing secret for a userlist entry: a SCRAM verifier is parsed; a
 * plaintext password gets a salt that is stable per user within a process
 * (HMAC of the user name under a process-random key, the same derivation as
 * scram_mock_secret, so plaintext users and unknown users look alike) and
 * goes through scram_secret_from_password. An md5 secret, an empty or NULL
 * secret give false (SCRAM cannot be done). */
bool scram_secret_for_user(const char *user, const char *userlist_secret, int iterations,
			   struct scram_secret *out) MUSTCHECK;

/* Deterministic fake secret for unknown users: the salt is the one a
 * plaintext user of that name would get; use it with mock = true. */
void scram_mock_secret(const char *user, int iterations, struct scram_secret *out);

/* Worker start: one in-memory login of pgcrew's SCRAM client against its
 * SCRAM server (made-up keys, no PBKDF2, no cache entry), so the first real
 * login finds OpenSSL's objects set up and the code paged in. True when the
 * exchange succeeded, which it always should. */
bool scram_warm_up(void) MUSTCHECK;

/* Test and statistics hooks. */
unsigned long scram_pbkdf2_runs(void);      /* PBKDF2 runs in this process */
void scram_cache_clear(void);               /* wipe the derived-key cache */
/* Test only: use this nonce instead of a random one in every following
 * scram_server_first() (NULL restores random nonces). Up to SCRAM_MY_NONCE_MAX
 * printable characters. */
void scram_server_set_test_nonce(const char *nonce);
/* Test only: fixed client nonce and user name ("" by default, as libpq) for
 * every following scram_client_first(); NULL nonce restores the defaults.
 * The user name exists only to replay the RFC 7677 example (n=user). */
void scram_client_set_test_nonce(const char *nonce, const char *user);

/* ---- pgcrew as SCRAM server (toward clients) ---- */
enum scram_server_state {
	SCRAM_SERVER_INIT,
	SCRAM_SERVER_FIRST_SENT,
	SCRAM_SERVER_DONE,
	SCRAM_SERVER_FAILED,
	SCRAM_SERVER_STATE_COUNT
};
const char *scram_server_state_name(int state);

/* Channel binding toward a TLS client: SCRAM-SHA-256-PLUS with
 * tls-server-end-point (RFC 5929), the only type PostgreSQL offers. */
struct scram_cbind {
	bool offered;                    /* -PLUS was advertised: a TLS client, end-point data known */
	bool plus;                       /* the client selected SCRAM-SHA-256-PLUS */
	uint8_t data[SCRAM_CBIND_MAX];   /* hash of our certificate (tls_conn_server_end_point) */
	size_t len;
};

struct scram_server {
	int state;                   /* enum scram_server_state */
	struct scram_cbind cbind;    /* what this exchange binds to */
	struct scram_secret secret;  /* on success also gets the recovered ClientKey */
	bool mock;                   /* always fail at the end */
	char gs2_header[32];         /* kept verbatim for the c= check */
	size_t gs2_len;
	char client_nonce[SCRAM_MAX_NONCE + 1];
	char server_nonce[SCRAM_MY_NONCE_MAX + 1];
	char client_first_bare[512];
	size_t client_first_bare_len;
	char server_first[512];
	size_t server_first_len;
	bool got_client_key;
	uint8_t client_key[SCRAM_KEY_LEN];   /* recovered from the proof (pass-through) */
};

/* Step 1: SASLInitialResponse payload (client-first-message). Writes the
 * NUL-terminated server-first-message into out (*outn = its length).
 * Returns 0, or -1 when malformed (errmsg set): channel-binding flag 'p'
 * (without -PLUS), authzid, 'm=' extension, attributes missing or out of
 * order, a nonce empty, over SCRAM_MAX_NONCE or not printable, a message
 * over SCRAM_MAX_CLIENT_FIRST or a NUL byte, or out too small. */
int scram_server_first(struct scram_server *st, const struct scram_secret *secret, bool mock,
		       const char *msg, size_t len, char *out, size_t outlen, size_t *outn,
		       const char **errmsg) MUSTCHECK;
/* The same with channel binding (cb NULL = none offered). PostgreSQL's
 * rules: with cb->plus the gs2 header must be "p=tls-server-end-point";
 * 'p' for plain SCRAM-SHA-256, 'n'/'y' for -PLUS, another binding type, and
 * 'y' while -PLUS was offered (a downgrade) are refused. The final step then
 * checks that c= carries the gs2 header followed by cb->data. */
int scram_server_first_cb(struct scram_server *st, const struct scram_secret *secret, bool mock,
			  const struct scram_cbind *cb, const char *msg, size_t len, char *out,
			  size_t outlen, size_t *outn, const char **errmsg) MUSTCHECK;
/* Step 2: client-final-message. On success writes server-final ("v=...") and
 * returns 0; -1 malformed (errmsg set), -2 wrong proof or mock (authentication
 * failed). Checks c= against the gs2 header, the nonce, then the proof:
 * ClientKey = proof XOR ClientSignature, H(ClientKey) == StoredKey. On
 * success got_client_key/client_key and secret.has_client_key/client_key are
 * set, so st->secret is ready for pass-through toward PostgreSQL. */
int scram_server_final(struct scram_server *st, const char *msg, size_t len, char *out,
		       size_t outlen, size_t *outn, const char **errmsg) MUSTCHECK;

/* ---- pgcrew as SCRAM client (toward PostgreSQL) ---- */
enum scram_client_state {
	SCRAM_CLIENT_INIT,
	SCRAM_CLIENT_FIRST_SENT,
	SCRAM_CLIENT_FINAL_SENT,
	SCRAM_CLIENT_DONE,
	SCRAM_CLIENT_FAILED,
	SCRAM_CLIENT_STATE_COUNT
};
const char *scram_client_state_name(int state);

struct scram_client {
	int state;                   /* enum scram_client_state */
	char client_nonce[SCRAM_MY_NONCE_MAX + 1];
	char client_first_bare[160];
	size_t cfb_len;
	/* AuthMessage is hashed when client-final is built, so only the
	 * signature we expect back is kept, not the message or ServerKey. */
	uint8_t expected_server_sig[SCRAM_KEY_LEN];
	char server_error[128];      /* text of an "e=" server-final, for errmsg */
	/* SCRAM-SHA-256-PLUS: the gs2 header and tls-server-end-point data,
	 * both repeated (base64) in client-final's c= attribute. */
	bool plus;
	uint8_t cbind[64];
	size_t cbind_len;
};

/* client-first-message "n,,n=,r=<nonce>" (empty user name, as libpq).
 * 0, or -1 if out is too small or no random bytes. */
int scram_client_first(struct scram_client *st, char *out, size_t outlen, size_t *outn) MUSTCHECK;
/* The same for SCRAM-SHA-256-PLUS over TLS: gs2 header
 * "p=tls-server-end-point,,", cbind = the hash of the server's certificate
 * (tls_conn_server_end_point), at most 64 bytes. */
int scram_client_first_plus(struct scram_client *st, const uint8_t *cbind, size_t cbind_len,
			    char *out, size_t outlen, size_t *outn) MUSTCHECK;
/* Given server-first and either a plaintext password or (password NULL) a
 * secret with has_client_key (pass-through), writes client-final. -1 with
 * errmsg on: message over SCRAM_MAX_SERVER_FIRST, 'm=', bad/missing/extra
 * attributes, nonce not extending ours or over SCRAM_MAX_NONCE, bad or
 * oversized salt, iterations outside 1..SCRAM_MAX_ITERATIONS, pass-through
 * salt/iterations differing from the secret's, no credential, out too small. */
int scram_client_final(struct scram_client *st, const char *server_first, size_t len,
		       const char *password, const struct scram_secret *secret, char *out,
		       size_t outlen, size_t *outn, const char **errmsg) MUSTCHECK;
/* server-final: "v=<sig>" must match (0); "e=<error>" or a wrong signature
 * or anything malformed gives -1 with errmsg. For "e=" errmsg points into
 * st->server_error, so it lives as long as st. */
int scram_client_verify(struct scram_client *st, const char *server_final, size_t len,
			const char **errmsg) MUSTCHECK;

#endif

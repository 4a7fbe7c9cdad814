/* pgcrew — TLS contexts and connections on top of OpenSSL 3.
 * Each worker builds its own SSL_CTXs after fork from the pgbouncer.ini TLS
 * keys; a tls_conn drives one non-blocking socket and knows bytes, not the
 * PostgreSQL protocol (the stream layer wraps it in its TLS ops). */
#ifndef PGCREW_TLS_H
#define PGCREW_TLS_H

#include <sys/types.h>

#include "types.h"

/* Same values, same order as enum sslmode in config.h; the code that fills
 * struct tls_settings from struct config passes the config value through. */
enum tls_sslmode {
	TLS_SSLMODE_DISABLE,
	TLS_SSLMODE_ALLOW,
	TLS_SSLMODE_PREFER,
	TLS_SSLMODE_REQUIRE,
	TLS_SSLMODE_VERIFY_CA,
	TLS_SSLMODE_VERIFY_FULL,
};

/* One side's TLS keys (client_tls_* or server_tls_*), filled from struct
 * config. NULL and "" both mean "not set" and select PgBouncer's default. */
struct tls_settings {
	int sslmode;               /* enum sslmode value */
	const char *key_file;
	const char *cert_file;
	const char *ca_file;
	const char *protocols;     /* "secure" (default), "all", "legacy", "tlsv1.2,tlsv1.3", "!tlsv1.2" */
	const char *ciphers;       /* TLS <= 1.2; "default" (default), "secure", "fast", "normal", "all", or OpenSSL syntax */
	const char *tls13_ciphers; /* TLS 1.3 suites, OpenSSL syntax; empty = OpenSSL default */
	const char *ecdhcurve;     /* client side only: "auto" (default), "none", or curve names */
	const char *dheparams;     /* client side only: "auto" (default), "none", "legacy" */
	bool ask_client_cert;      /* client side, below verify-ca: still ask for a certificate and
				    * check it against ca_file, without failing the handshake
				    * (certificate authentication decides; see tls_conn_peer_cn) */
};

struct tls_ctx;
struct tls_conn;

enum tls_status {
	TLS_OK,
	TLS_WANT_READ,             /* call again when the socket is readable */
	TLS_WANT_WRITE,            /* call again when the socket is writable */
	TLS_EOF,                   /* peer closed (close_notify or plain EOF) */
	TLS_FAIL,                  /* fatal; tls_conn_error() says why */
	TLS_STATUS_COUNT
};
const char *tls_status_name(enum tls_status st);

/* Client-facing context (pgcrew is the TLS server). Returns NULL and fills
 * err ("client_tls_cert_file /x/y.crt: No such file or directory") on
 * failure. verify-ca/verify-full require a client certificate signed by
 * ca_file. ALPN: a client that offers ALPN must offer "postgresql"; a direct
 * TLS client (PostgreSQL 17 sslnegotiation=direct) must offer it. */
struct tls_ctx *tls_ctx_new_server(const struct tls_settings *s, char *err, size_t errlen) MUSTCHECK;

/* Server-facing context (pgcrew is the TLS client toward PostgreSQL).
 * verify-ca/verify-full check the chain against ca_file (the system store
 * when ca_file is empty); verify-full also checks the host name given to
 * tls_conn_connect(). ALPN "postgresql" is always offered. */
struct tls_ctx *tls_ctx_new_client(const struct tls_settings *s, char *err, size_t errlen) MUSTCHECK;
void tls_ctx_free(struct tls_ctx *ctx);

/* One TLS handshake of a client-facing context with a throwaway client over
 * a socketpair, so the key's first private-key operation, the key exchange
 * and the cipher fetches happen before the first real client's handshake.
 * False if the handshake did not complete (a context that demands client
 * certificates, for instance); the context is usable either way. */
bool tls_ctx_warm_up(struct tls_ctx *ctx);

/* Supervisor, before the first fork: draw the session-ticket keys every
 * worker's client-facing context will use, so a client resumes its TLS
 * session whichever worker accepts the reconnect. False (then each context
 * keeps OpenSSL's own keys) when no random bytes could be had. */
bool tls_ticket_keys_init(void) MUSTCHECK;

/* Start TLS on a connected non-blocking socket; the peer's first TLS bytes
 * must still be unread in the socket (sniff with MSG_PEEK). NULL only when
 * out of memory. The ctx must outlive the connection. */
struct tls_conn *tls_conn_accept(struct tls_ctx *ctx, int fd, bool direct) MUSTCHECK;
/* host: sent as SNI unless it is an IP literal, and checked against the
 * certificate under verify-full (an IP literal against its IP SANs). */
struct tls_conn *tls_conn_connect(struct tls_ctx *ctx, int fd, const char *host) MUSTCHECK;

/* Non-blocking; call again on TLS_WANT_*. */
enum tls_status tls_handshake(struct tls_conn *c) MUSTCHECK;
/* >0: bytes moved. 0 with *st = TLS_EOF on close. -1 with *st =
 * TLS_WANT_READ/TLS_WANT_WRITE/TLS_FAIL. A read may need the socket writable
 * and a write may need it readable: wait for what *st says, not for what the
 * call did. Writes may be partial; the buffer may move between retries. */
ssize_t tls_recv(struct tls_conn *c, void *buf, size_t len, enum tls_status *st) MUSTCHECK;
ssize_t tls_send(struct tls_conn *c, const void *buf, size_t len, enum tls_status *st) MUSTCHECK;
/* Bytes buffered inside OpenSSL (decrypted, or records read ahead): read
 * them before polling, the socket will not signal them again. */
bool tls_pending(struct tls_conn *c);

const char *tls_conn_error(struct tls_conn *c);   /* "" when none */
const char *tls_conn_version(struct tls_conn *c); /* "TLSv1.3" */
const char *tls_conn_cipher(struct tls_conn *c);  /* "TLS_AES_256_GCM_SHA384" */
/* CN of a verified peer certificate (auth_type=cert); false when there is
 * no verified certificate, no CN, or it does not fit in buf. */
bool tls_conn_peer_cn(struct tls_conn *c, char *buf, size_t len) MUSTCHECK;
/* RFC 5929 tls-server-end-point data for SCRAM-SHA-256-PLUS: the hash of the
 * server's certificate (ours after accept, the peer's after connect) with
 * the certificate's signature hash, SHA-256 for MD5/SHA-1. *outlen is the
 * capacity of out on entry (EVP_MAX_MD_SIZE = 64 always suffices) and the
 * length on return. false when unavailable (e.g. Ed25519 certificate). */
bool tls_conn_server_end_point(struct tls_conn *c, uint8_t *out, size_t *outlen) MUSTCHECK;

/* Buffered connections (io_uring batches, stream.c). After the
 * handshake, OpenSSL reads ciphertext from a buffer the caller fills
 * (tls_in_space, then tls_in_added with what a receive gave: 0 is the
 * socket's EOF) and writes it to one the caller drains (tls_out_data,
 * then tls_out_sent), so tls_recv and tls_send make no system call;
 * tls_send says TLS_WANT_WRITE while tls_out_full. False when the switch
 * cannot be made (no memory; the handshake not over): the socket stays. */
bool tls_conn_use_buffers(struct tls_conn *c) MUSTCHECK;
bool tls_conn_buffered(const struct tls_conn *c);
uint8_t *tls_in_space(struct tls_conn *c, size_t *len);
void tls_in_added(struct tls_conn *c, ssize_t n);
/* Ciphertext (or an EOF) waits that OpenSSL has not read yet. */
bool tls_in_held(const struct tls_conn *c);
const uint8_t *tls_out_data(const struct tls_conn *c, size_t *len);
void tls_out_sent(struct tls_conn *c, size_t n);
bool tls_out_full(const struct tls_conn *c);
/* The spare ciphertext buffers kept for the next connections (exit). */
void tls_buffers_free(void);

/* Best-effort close_notify; never blocks, never retries. */
void tls_conn_shutdown(struct tls_conn *c);
/* Frees the TLS state; does not close fd; sends nothing by itself. */
void tls_conn_free(struct tls_conn *c);
/* PgBouncer's description of a connection for logs and SHOW CLIENTS /
 * SERVERS: "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519". */
const char *tls_conn_info(struct tls_conn *c, char *buf, size_t len);
/* Kernel TLS for server connections: available when the kernel has the
 * "tls" upper layer loaded (/proc/sys/net/ipv4/tcp_available_ulp, a list
 * the second function reads); then server-facing contexts ask OpenSSL for
 * it (SSL_OP_ENABLE_KTLS). In kernel: the handshake is over, OpenSSL put
 * both directions' keys in the kernel and holds no decrypted byte, so the
 * socket can move to another process and be read and written as a plain
 * one (the kernel encrypts). Untested where the kernel has no kTLS. */
bool tls_ktls_available(void);
bool tls_ulp_list_has_tls(const char *list);
bool tls_conn_in_kernel(struct tls_conn *c);

#endif

/* pgcrew — building PostgreSQL v3 messages: begin / put_* / finish into a
 * growable or caller-owned buffer with a sticky error, plus one writer per
 * whole message the pooler sends to clients or servers. */
#ifndef PGCREW_PROTO_BUILD_H
#define PGCREW_PROTO_BUILD_H

#include <stdarg.h>

#include "types.h"

#define PKTBUF_MAX_HEAP (1u << 30)       /* growth limit of heap buffers: 1 GB */

/* After any failure (allocation, overflow of a fixed buffer, misuse such as
 * finish without begin) every later call does nothing until pktbuf_reset(),
 * so callers build a whole batch and check pktbuf_failed() once. */
struct pktbuf {
	uint8_t *buf;      /* storage: heap (grows) or caller-owned (fixed) */
	size_t len, cap;   /* bytes written, bytes available */
	size_t msg_start;  /* where the current message began (to patch its length) */
	bool in_msg;       /* between begin and finish */
	bool failed;       /* sticky error */
	bool fixed;        /* caller-owned storage, never grows */
	uint32_t max_len;  /* cap never exceeds this: PKTBUF_MAX_HEAP, or cap when fixed */
};

void pktbuf_init(struct pktbuf *pb, size_t initial);              /* heap, grows (up to 1 GB) */
void pktbuf_init_fixed(struct pktbuf *pb, void *storage, size_t cap);
void pktbuf_reset(struct pktbuf *pb);                             /* len = 0, failed = false */
void pktbuf_free(struct pktbuf *pb);
void pktbuf_begin(struct pktbuf *pb, uint8_t type);               /* type 0 = startup-style (no type byte) */
void pktbuf_put_u8(struct pktbuf *pb, uint8_t v);
void pktbuf_put_u16(struct pktbuf *pb, uint16_t v);
void pktbuf_put_u32(struct pktbuf *pb, uint32_t v);
void pktbuf_put_string(struct pktbuf *pb, const char *s);         /* with NUL */
void pktbuf_put_bytes(struct pktbuf *pb, const void *p, size_t n);
/* printf-formatted text with its NUL, never truncated. */
void pktbuf_put_vformat(struct pktbuf *pb, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void pktbuf_finish(struct pktbuf *pb);                            /* patches length of current message */
bool pktbuf_failed(const struct pktbuf *pb) MUSTCHECK;

/* Whole messages, each one begin..finish, appended to pb. */
void pkt_write_auth_ok(struct pktbuf *pb);                                  /* R, 0 */
void pkt_write_auth_cleartext(struct pktbuf *pb);                           /* R, 3 */
void pkt_write_auth_md5(struct pktbuf *pb, const uint8_t salt[4]);          /* R, 5 */
void pkt_write_auth_sasl(struct pktbuf *pb, bool plus);                     /* R, 10 */
void pkt_write_auth_sasl_continue(struct pktbuf *pb, const void *data, size_t len); /* R, 11 */
void pkt_write_auth_sasl_final(struct pktbuf *pb, const void *data, size_t len);    /* R, 12 */
void pkt_write_parameter_status(struct pktbuf *pb, const char *key, const char *val); /* S */
void pkt_write_backend_key(struct pktbuf *pb, const struct cancelkey *k);   /* K */
void pkt_write_ready(struct pktbuf *pb, char status);                       /* Z */
void pkt_write_query(struct pktbuf *pb, const char *sql);                   /* Q */
void pkt_write_terminate(struct pktbuf *pb);                                /* X */
void pkt_write_password(struct pktbuf *pb, const char *pw);                 /* p (cleartext or md5 response) */
/* p; data == NULL sends length -1 (no initial response). */
void pkt_write_sasl_initial(struct pktbuf *pb, const char *mech, const void *data, size_t len);
void pkt_write_sasl_response(struct pktbuf *pb, const void *data, size_t len); /* p */
/* v3.<minor> StartupMessage; kv = key,val,key,val,...,NULL (an odd count fails pb). */
void pkt_write_startup(struct pktbuf *pb, uint32_t minor, const char *const *kv);
void pkt_write_ssl_request(struct pktbuf *pb);                              /* 1234.5679 */
/* 1234.5678 with the key's pid and secret (4 to 256 bytes). */
void pkt_write_cancel_request(struct pktbuf *pb, const struct cancelkey *k);
/* v; the version word sent is (3 << 16) | newest_minor, as PostgreSQL sends it. */
void pkt_write_negotiate_version(struct pktbuf *pb, uint32_t newest_minor,
				 const char *const *unrecognized, int n);
/* N with fields S, V, C, M; sqlstate NULL means "00000". */
void pkt_write_notice(struct pktbuf *pb, const char *severity, const char *sqlstate, const char *msg);

#endif

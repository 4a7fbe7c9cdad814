/* pgcrew — PostgreSQL v3 wire framing: validating packet headers before any
 * body is buffered, sniffing direct-TLS ClientHellos, and reading message
 * bodies through a bounds-checked cursor with a sticky failure flag. */
#ifndef PGCREW_PROTO_PACKET_H
#define PGCREW_PROTO_PACKET_H

#include "types.h"

#define PKT_STARTUP_MAX 10000            /* PostgreSQL's MAX_STARTUP_PACKET_LENGTH */
#define PKT_STARTUP_MIN 8                /* length word + protocol/request code */
#define PKT_TYPED_HDR   5                /* type byte + length word */
#define PKT_STARTUP_HDR 4                /* length word only */

#define PROTO_SSL_REQUEST     80877103   /* 1234.5679 */
#define PROTO_GSSENC_REQUEST  80877104   /* 1234.5680 */
#define PROTO_CANCEL_REQUEST  80877102   /* 1234.5678 */
#define PROTO_V3              196608     /* 3 << 16 */
/* The newest minor version pgcrew speaks, on both sides: 3.2 (PostgreSQL
 * 18), whose one change is the secret's length in cancel keys. */
#define PROTO_MINOR_LATEST    2
#define PROTO_MAJOR(v) ((uint32_t)(v) >> 16)
#define PROTO_MINOR(v) ((uint32_t)(v) & 0xFFFF)

enum pkt_status {
	PKT_NEED_MORE,     /* header incomplete: wait for more bytes */
	PKT_OK,            /* header valid; out->len bytes make the packet */
	PKT_BAD,           /* protocol violation: close the connection */
};

struct pkt_hdr {
	uint8_t type;      /* message type byte, 0 for startup-phase packets */
	uint32_t len;      /* whole packet length in bytes including type byte and length word */
	uint32_t hdr_len;  /* 5 for typed, 4 for startup */
};

/* Incremental header parse (STYLE rule 10). Returns PKT_NEED_MORE while fewer
 * than 5 (typed) / 4 (startup) bytes are available. Returns PKT_BAD when the
 * length word is below 4 (typed) or 8 (startup: a packet must at least carry
 * its request code), or when the whole length exceeds max_len (the
 * max_packet_size setting for typed packets; for startup packets the
 * effective limit is min(max_len, PKT_STARTUP_MAX)). The comparison is done
 * in 64 bits, so a length word of 0xFFFFFFFF is refused instead of wrapping.
 * On PKT_BAD *why gets a static reason string (why may be NULL). The caller
 * still has to wait until out->len bytes are buffered. */
enum pkt_status pkt_parse_header(const uint8_t *p, size_t avail, bool startup, uint32_t max_len,
				 struct pkt_hdr *out, const char **why) MUSTCHECK;

/* True if the first bytes look like a TLS handshake record carrying a
 * ClientHello (0x16 0x03 0x00..0x04, handshake type 1 once 6 bytes are there):
 * PostgreSQL 17 sslnegotiation=direct. Needs at least 3 bytes, else false; a
 * real startup packet starts with 0x00 (its length is below 10000), so the
 * answer is unambiguous as soon as the 4-byte startup header is available. */
bool pkt_is_tls_hello(const uint8_t *p, size_t avail);

/* Name of a message type for logs ("Query", "ReadyForQuery", ...). The same
 * byte means different messages in each direction, hence from_server. Type 0
 * is "StartupPacket"; unknown bytes give "unknown". */
const char *pkt_type_name(uint8_t type, bool from_server);

/* Reads the transaction status of a complete ReadyForQuery message (pkt
 * includes the 5-byte header). Returns false unless pkt is exactly one 'Z'
 * message of length 5 whose status is 'I', 'T' or 'E'. */
bool pkt_ready_status(const uint8_t *pkt, size_t len, char *status) MUSTCHECK;

const char *pkt_status_name(enum pkt_status st);

/* Reading a message body with a cursor and a sticky failure flag (STYLE rule
 * 11): every get_* past the end sets failed and returns 0 / "" / NULL, and
 * every get_* after a failure does the same, so a parser checks once, at the
 * end, with pkt_get_end(). */
struct pkt_reader {
	const uint8_t *p;  /* body, not owned */
	size_t len;        /* body length */
	size_t pos;        /* next byte to read */
	bool failed;       /* a read ran past the end or a string lacked its NUL */
};

void pkt_reader_init(struct pkt_reader *r, const uint8_t *body, size_t len);
uint8_t pkt_get_u8(struct pkt_reader *r);
uint16_t pkt_get_u16(struct pkt_reader *r);
uint32_t pkt_get_u32(struct pkt_reader *r);
int32_t pkt_get_i32(struct pkt_reader *r);
/* NUL-terminated inside the body, else failed; returns "" on failure. */
const char *pkt_get_string(struct pkt_reader *r);
/* Pointer to the next n bytes inside the body; NULL (and failed) if fewer remain. */
const uint8_t *pkt_get_bytes(struct pkt_reader *r, size_t n);
/* !failed && pos == len: the body was consumed exactly. */
bool pkt_get_end(const struct pkt_reader *r) MUSTCHECK;

#endif

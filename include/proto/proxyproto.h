/* pgcrew — HAProxy's PROXY protocol (versions 1 and 2): the header a load
 * balancer sends before the client's own bytes to say who the client really
 * is, and the list of peers (proxy_protocol_sources) trusted to send one.
 * Pure parsing, no I/O: the listener feeds it the bytes it has read. */
#ifndef PGCREW_PROTO_PROXYPROTO_H
#define PGCREW_PROTO_PROXYPROTO_H

#include "types.h"

#include <sys/socket.h>

#define PROXY_V1_MAX 107   /* the spec's longest v1 line, CRLF included */
#define PROXY_V2_MAX 1024  /* largest v2 header accepted (16 + addresses + TLVs) */

enum proxy_result {
	PROXY_NONE,        /* no PROXY header: the bytes belong to the client */
	PROXY_NEED_MORE,   /* a prefix of a header so far: read more */
	PROXY_OK,          /* a whole valid header */
	PROXY_BAD,         /* malformed: close the connection */
};

struct proxy_header {
	int version;                      /* 1 or 2 */
	bool local;                       /* v2 LOCAL (or PROXY UNSPEC), v1 UNKNOWN:
	                                     keep the connection's own addresses */
	struct sockaddr_storage src, dst; /* AF_INET / AF_INET6 when !local */
	size_t len;                       /* bytes of the header, to skip */
};

/* buf holds the first n bytes received on a connection.
 *   PROXY_NONE: they do not start with either signature and cannot become
 *     one; decided at the first byte that differs, so a startup packet, an
 *     SSLRequest or a TLS ClientHello is recognised from its first byte.
 *   PROXY_NEED_MORE: a prefix of a header; never returned once n reaches
 *     PROXY_V1_MAX for v1 or the length a v2 header announces.
 *   PROXY_OK: *h filled; the client's bytes start at buf + h->len.
 *   PROXY_BAD: malformed; *why (a static string) says how.
 * *h is zeroed unless the result is PROXY_OK; *why is NULL unless PROXY_BAD
 * (why may be NULL). Never reads outside [buf, buf + n). */
enum proxy_result proxy_parse(const uint8_t *buf, size_t n, struct proxy_header *h,
			      const char **why) MUSTCHECK;
const char *proxy_result_name(enum proxy_result r);   /* "none", "need-more", ... */

/* The peers allowed to send a header: addresses with an optional /prefix. */
struct proxy_sources;

/* text like "10.0.0.0/8, 192.168.1.5, ::1, fd00::/8": items separated by
 * commas and/or blanks. Bits set outside the prefix are an error, as in
 * PostgreSQL's pg_hba.conf, because such an entry is almost always a typo.
 * An empty or blank text is a valid empty list (nobody may send a header).
 * False with a message naming the bad item in err, and *out = NULL. */
bool proxy_sources_parse(const char *text, struct proxy_sources **out, char *err,
			 size_t errlen) MUSTCHECK;
/* True when sa (AF_INET or AF_INET6; anything else never matches) is in the
 * list. An IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack
 * listener reports) also matches the IPv4 entries. A NULL list matches
 * nothing. */
bool proxy_sources_match(const struct proxy_sources *s, const struct sockaddr *sa);
size_t proxy_sources_count(const struct proxy_sources *s);
void proxy_sources_free(struct proxy_sources *s);

#endif

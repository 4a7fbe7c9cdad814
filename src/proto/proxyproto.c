/* pgcrew — HAProxy's PROXY protocol, versions 1 (text) and 2 (binary), as
 * its spec (doc/proxy-protocol.txt in HAProxy) describes it, read strictly:
 * whatever is not exactly a header closes the connection, because a header
 * that parses loosely is a way to forge a client address. Also the list of
 * peers trusted to send one (proxy_protocol_sources).
 *
 * INTERFACE ROUTINES
 *	proxy_parse		- recognise and decode a header at the start of a stream
 *	proxy_result_name	- enum proxy_result to text
 *	proxy_sources_parse	- "10.0.0.0/8, ::1" into a list of networks
 *	proxy_sources_match	- whether a peer address is in that list
 *	proxy_sources_count	- entries in the list
 *	proxy_sources_free	- release the list
 */
#include "proto/proxyproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V1_SIG "PROXY"
#define V1_SIG_LEN 5
#define V2_SIG_LEN 12
#define V2_HDR_LEN 16          /* signature, ver/cmd, family, length */
#define V2_CMD_LOCAL 0x0
#define V2_CMD_PROXY 0x1
#define V2_TLV_HDR_LEN 3       /* type, 2-byte length */

/* The messages below quote both limits. */
_Static_assert(PROXY_V1_MAX == 107 && PROXY_V2_MAX == 1024, "limits in messages");

static const uint8_t v2_sig[V2_SIG_LEN] = {
	0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
};

static const char *const result_names[] = {
	[PROXY_NONE] = "none", [PROXY_NEED_MORE] = "need-more",
	[PROXY_OK] = "ok", [PROXY_BAD] = "bad",
};
_Static_assert(ARRAY_SIZE(result_names) == PROXY_BAD + 1, "result_names");

const char *proxy_result_name(enum proxy_result r)
{
	return (unsigned)r < ARRAY_SIZE(result_names) ? result_names[r] : "?";
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void set_addr(struct sockaddr_storage *ss, int family, const void *addr, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, addr, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, addr, 16);
	}
}

/* ---- version 1 ---- */

struct field {
	const char *s;
	size_t len;
};

/* Where the CRLF ending the line is (*eol = index of its CR). The spec
 * allows no bare CR or LF and the line is text, so those and NUL end the
 * search as soon as they are seen rather than at byte 107. */
static enum proxy_result v1_find_eol(const uint8_t *buf, size_t n, size_t *eol, const char **why)
{
	size_t limit = min_size(n, PROXY_V1_MAX);

	for (size_t i = 0; i < limit; i++) {
		if (buf[i] == '\0') {
			*why = "v1 header: NUL byte";
			return PROXY_BAD;
		}
		if (buf[i] == '\n') {
			*why = "v1 header: LF without CR";
			return PROXY_BAD;
		}
		if (buf[i] != '\r')
			continue;
		if (i + 1 == limit)
			break;
		if (buf[i + 1] != '\n') {
			*why = "v1 header: CR without LF";
			return PROXY_BAD;
		}
		*eol = i;
		return PROXY_OK;
	}
	if (n >= PROXY_V1_MAX) {
		*why = "v1 header: no CRLF within 107 bytes";
		return PROXY_BAD;
	}
	return PROXY_NEED_MORE;
}

/* Exactly want fields, each separated by one space: an empty field is two
 * spaces in a row or a space at either end. NULL, or what is wrong. */
static const char *v1_split(const char *s, size_t len, struct field *f, int want)
{
	int k = 0;
	size_t start = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != ' ')
			continue;
		if (i == start)
			return "v1 header: empty field (fields take exactly one space between them)";
		if (k == want)
			return "v1 header: too many fields";
		f[k].s = s + start;
		f[k].len = i - start;
		k++;
		start = i + 1;
	}
	return k == want ? NULL : "v1 header: too few fields";
}

/* inet_pton takes care of the spec's canonical forms: glibc refuses leading
 * zeros in IPv4 and anything that is not the family asked for. */
static bool v1_addr(const struct field *f, int family, uint8_t addr[16])
{
	char text[INET6_ADDRSTRLEN];

	if (f->len >= sizeof(text))
		return false;
	memcpy(text, f->s, f->len);
	text[f->len] = '\0';
	return inet_pton(family, text, addr) == 1;
}

/* Decimal 0-65535, no sign, no leading zero (the spec: they could be read
 * as octal). */
static bool v1_port(const struct field *f, uint16_t *port)
{
	unsigned long v = 0;

	if (f->len == 0 || f->len > 5 || (f->s[0] == '0' && f->len > 1))
		return false;
	for (size_t i = 0; i < f->len; i++) {
		if (f->s[i] < '0' || f->s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(f->s[i] - '0');
	}
	if (v > 65535)
		return false;
	*port = (uint16_t)v;
	return true;
}

/* "<src> <dst> <sport> <dport>" after "PROXY TCP4 " or "PROXY TCP6 ". */
static const char *v1_tcp(const char *s, size_t len, int family, struct proxy_header *h)
{
	struct field f[4];
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	const char *bad = v1_split(s, len, f, 4);

	if (bad)
		return bad;
	if (!v1_addr(&f[0], family, src) || !v1_addr(&f[1], family, dst))
		return family == AF_INET ? "v1 header: bad TCP4 address" : "v1 header: bad TCP6 address";
	if (!v1_port(&f[2], &sport) || !v1_port(&f[3], &dport))
		return "v1 header: bad port";
	set_addr(&h->src, family, src, sport);
	set_addr(&h->dst, family, dst, dport);
	return NULL;
}

/* The line without its CRLF; it holds no NUL, CR or LF. UNKNOWN may be
 * followed by anything, which the spec says to ignore. */
static const char *v1_line(const char *line, size_t len, struct proxy_header *h)
{
	const char *p;
	size_t rest;

	if (len <= V1_SIG_LEN || line[V1_SIG_LEN] != ' ')
		return "v1 header: no space after PROXY";
	p = line + V1_SIG_LEN + 1;
	rest = len - V1_SIG_LEN - 1;
	if (rest >= 7 && memcmp(p, "UNKNOWN", 7) == 0) {
		h->local = true;
		return NULL;
	}
	if (rest >= 5 && memcmp(p, "TCP4 ", 5) == 0)
		return v1_tcp(p + 5, rest - 5, AF_INET, h);
	if (rest >= 5 && memcmp(p, "TCP6 ", 5) == 0)
		return v1_tcp(p + 5, rest - 5, AF_INET6, h);
	return "v1 header: protocol is not TCP4, TCP6 or UNKNOWN";
}

static enum proxy_result v1_parse(const uint8_t *buf, size_t n, struct proxy_header *h, const char **why)
{
	size_t eol = 0;
	enum proxy_result r;

	if (memcmp(buf, V1_SIG, min_size(n, V1_SIG_LEN)) != 0)
		return PROXY_NONE;
	r = v1_find_eol(buf, n, &eol, why);
	if (r != PROXY_OK)
		return r;
	*why = v1_line((const char *)buf, eol, h);
	if (*why)
		return PROXY_BAD;
	h->version = 1;
	h->len = eol + 2;
	return PROXY_OK;
}

/* ---- version 2 ---- */

/* Size of the address block a PROXY command's family byte announces, or -1
 * with *why. UDP and UNIX are valid v2 but cannot describe a client of a
 * TCP listener, so a sender claiming them is misconfigured. */
static int v2_addr_len(uint8_t fam, const char **why)
{
	switch (fam) {
	case 0x00:
		return 0;              /* UNSPEC: the block is opaque */
	case 0x11:
		return 12;             /* TCP over IPv4: 2 x 4 + 2 x 2 */
	case 0x21:
		return 36;             /* TCP over IPv6: 2 x 16 + 2 x 2 */
	case 0x12:
	case 0x22:
		*why = "v2 header: UDP family (only TCP is accepted)";
		return -1;
	case 0x31:
	case 0x32:
		*why = "v2 header: UNIX family (only TCP is accepted)";
		return -1;
	default:
		*why = "v2 header: unknown address family or transport";
		return -1;
	}
}

/* Checks on bytes 13 to 16 as soon as each arrives, so a bad header is
 * refused without waiting for the length it announces. *addr_len: the
 * address block size, 0 for LOCAL and UNSPEC. */
static enum proxy_result v2_fixed(const uint8_t *buf, size_t n, int *addr_len, const char **why)
{
	uint8_t cmd;

	if (n <= V2_SIG_LEN)
		return PROXY_NEED_MORE;
	cmd = buf[12] & 0x0F;
	if (buf[12] >> 4 != 2) {
		*why = "v2 header: version is not 2";
		return PROXY_BAD;
	}
	if (cmd != V2_CMD_LOCAL && cmd != V2_CMD_PROXY) {
		*why = "v2 header: command is neither LOCAL nor PROXY";
		return PROXY_BAD;
	}
	if (n <= V2_SIG_LEN + 1)
		return PROXY_NEED_MORE;
	*addr_len = cmd == V2_CMD_LOCAL ? 0 : v2_addr_len(buf[13], why);
	if (*addr_len < 0)
		return PROXY_BAD;
	if (n < V2_HDR_LEN)
		return PROXY_NEED_MORE;
	if (V2_HDR_LEN + (size_t)be16(buf + 14) > PROXY_V2_MAX) {
		*why = "v2 header: longer than 1024 bytes";
		return PROXY_BAD;
	}
	if (be16(buf + 14) < *addr_len) {
		*why = "v2 header: address block longer than the header length";
		return PROXY_BAD;
	}
	return PROXY_OK;
}

/* TLVs fill what follows the addresses exactly; their contents are not
 * used, but a broken sequence means a broken sender. */
static const char *v2_tlvs(const uint8_t *p, size_t len)
{
	while (len > 0) {
		size_t vlen;

		if (len < V2_TLV_HDR_LEN)
			return "v2 header: truncated TLV";
		vlen = be16(p + 1);
		if (vlen > len - V2_TLV_HDR_LEN)
			return "v2 header: oversized TLV (runs past the end of the header)";
		p += V2_TLV_HDR_LEN + vlen;
		len -= V2_TLV_HDR_LEN + vlen;
	}
	return NULL;
}

/* The address block of a PROXY TCP header: addresses, then ports, all in
 * network order. */
static void v2_addresses(const uint8_t *p, int addr_len, struct proxy_header *h)
{
	int family = addr_len == 12 ? AF_INET : AF_INET6;
	size_t a = addr_len == 12 ? 4 : 16;

	set_addr(&h->src, family, p, be16(p + 2 * a));
	set_addr(&h->dst, family, p + a, be16(p + 2 * a + 2));
}

/* LOCAL and UNSPEC leave the block unread: the spec says to discard it,
 * and under UNSPEC its layout (where addresses end, TLVs start) is
 * unknown. */
static enum proxy_result v2_parse(const uint8_t *buf, size_t n, struct proxy_header *h, const char **why)
{
	int addr_len = 0;
	size_t total;
	enum proxy_result r;

	if (memcmp(buf, v2_sig, min_size(n, V2_SIG_LEN)) != 0)
		return PROXY_NONE;
	r = v2_fixed(buf, n, &addr_len, why);
	if (r != PROXY_OK)
		return r;
	total = V2_HDR_LEN + (size_t)be16(buf + 14);
	if (n < total)
		return PROXY_NEED_MORE;
	h->version = 2;
	h->len = total;
	if (addr_len == 0) {
		h->local = true;
		return PROXY_OK;
	}
	*why = v2_tlvs(buf + V2_HDR_LEN + addr_len, total - V2_HDR_LEN - (size_t)addr_len);
	if (*why)
		return PROXY_BAD;
	v2_addresses(buf + V2_HDR_LEN, addr_len, h);
	return PROXY_OK;
}

/* The signatures differ in their first byte ('P', CR), and neither can
 * start what a PostgreSQL client sends first: a length word (its first byte
 * is 0 for any packet under 16 MB) or 0x16 for a direct-TLS ClientHello. So
 * a client that sends no header is told apart at its first byte. */
enum proxy_result proxy_parse(const uint8_t *buf, size_t n, struct proxy_header *h, const char **why)
{
	const char *ignored;
	enum proxy_result r = PROXY_NONE;

	if (!why)
		why = &ignored;
	*why = NULL;
	memset(h, 0, sizeof(*h));
	if (n == 0)
		return PROXY_NEED_MORE;
	if (buf[0] == V1_SIG[0])
		r = v1_parse(buf, n, h, why);
	else if (buf[0] == v2_sig[0])
		r = v2_parse(buf, n, h, why);
	if (r != PROXY_OK)
		memset(h, 0, sizeof(*h));
	if (r != PROXY_BAD)
		*why = NULL;
	return r;
}

/* ---- trusted sources ---- */

struct proxy_net {
	int family;                /* AF_INET or AF_INET6 */
	unsigned bits;             /* prefix length */
	uint8_t addr[16];          /* network order; bits past the prefix are 0 */
};

struct proxy_sources {
	size_t count;
	struct proxy_net net[];
};

#define SOURCES_SEP ", \t\r\n"
#define ITEM_MAX 64              /* longer than any address with a prefix */
#define ITEM_SHOW 60             /* bytes of a bad item quoted in a message */

static size_t count_items(const char *text)
{
	size_t k = 0;

	for (text += strspn(text, SOURCES_SEP); *text; text += strspn(text, SOURCES_SEP)) {
		k++;
		text += strcspn(text, SOURCES_SEP);
	}
	return k;
}

/* The mask byte i of a prefix of bits bits. */
static uint8_t mask_byte(unsigned bits, size_t i)
{
	size_t left = bits > i * 8 ? bits - i * 8 : 0;

	return left >= 8 ? 0xFF : (uint8_t)(0xFF00u >> left);
}

/* "/N" after an address: decimal, at most the family's width. */
static bool parse_bits(const char *s, unsigned max, unsigned *bits)
{
	size_t len = strlen(s);
	unsigned v = 0;

	if (len == 0 || len > 3)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*bits = v;
	return v <= max;
}

/* text holds one item, NUL-terminated and at most ITEM_MAX - 1 bytes. */
static bool parse_item(char *text, struct proxy_net *net, char *err, size_t errlen)
{
	char *slash = strchr(text, '/');
	unsigned width;

	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, text, net->addr) == 1) {
		net->family = AF_INET;
	} else if (inet_pton(AF_INET6, text, net->addr) == 1) {
		net->family = AF_INET6;
	} else {
		snprintf(err, errlen, "invalid IP address '%s' (host names are not allowed)", text);
		return false;
	}
	width = net->family == AF_INET ? 32 : 128;
	net->bits = width;
	if (slash && !parse_bits(slash + 1, width, &net->bits)) {
		snprintf(err, errlen, "invalid prefix length '/%s' after %s (0-%u for an %s address)",
			 slash + 1, text, width, width == 32 ? "IPv4" : "IPv6");
		return false;
	}
	for (size_t i = 0; i < width / 8; i++) {
		if (net->addr[i] & (uint8_t)~mask_byte(net->bits, i)) {
			snprintf(err, errlen, "address %s/%u has bits set outside its prefix", text, net->bits);
			return false;
		}
	}
	return true;
}

/* The next item of *text into item (NUL-terminated); *text moves past it. */
static bool next_item(const char **text, char item[ITEM_MAX], char *err, size_t errlen)
{
	const char *s = *text + strspn(*text, SOURCES_SEP);
	size_t len = strcspn(s, SOURCES_SEP);

	*text = s + len;
	if (len >= ITEM_MAX) {
		snprintf(err, errlen, "invalid IP address '%.*s...'", ITEM_SHOW, s);
		return false;
	}
	memcpy(item, s, len);
	item[len] = '\0';
	return true;
}

bool proxy_sources_parse(const char *text, struct proxy_sources **out, char *err, size_t errlen)
{
	size_t n = count_items(text);
	struct proxy_sources *s = calloc(1, sizeof(*s) + n * sizeof(s->net[0]));
	char item[ITEM_MAX];

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	for (s->count = 0; s->count < n; s->count++) {
		if (!next_item(&text, item, err, errlen) ||
		    !parse_item(item, &s->net[s->count], err, errlen)) {
			free(s);
			return false;
		}
	}
	*out = s;
	return true;
}

static bool net_match(const struct proxy_net *net, int family, const uint8_t *addr)
{
	size_t bytes = family == AF_INET ? 4 : 16;

	if (net->family != family)
		return false;
	for (size_t i = 0; i < bytes; i++) {
		if ((addr[i] & mask_byte(net->bits, i)) != net->addr[i])
			return false;
	}
	return true;
}

/* A dual-stack (::) listener sees IPv4 peers as ::ffff:a.b.c.d; the person
 * who wrote 10.0.0.0/8 means them too. */
bool proxy_sources_match(const struct proxy_sources *s, const struct sockaddr *sa)
{
	const uint8_t *addr, *v4 = NULL;
	int family;

	if (!s || !sa)
		return false;
	if (sa->sa_family == AF_INET) {
		addr = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
		family = AF_INET;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		addr = a6->s6_addr;
		family = AF_INET6;
		if (IN6_IS_ADDR_V4MAPPED(a6))
			v4 = a6->s6_addr + 12;
	} else {
		return false;
	}
	for (size_t i = 0; i < s->count; i++) {
		if (net_match(&s->net[i], family, addr) || (v4 && net_match(&s->net[i], AF_INET, v4)))
			return true;
	}
	return false;
}

size_t proxy_sources_count(const struct proxy_sources *s)
{
	return s ? s->count : 0;
}

void proxy_sources_free(struct proxy_sources *s)
{
	free(s);
}

/* pgcrew — fuzz target: the PROXY protocol header parser and the
 * proxy_protocol_sources list (src/proto/proxyproto.c) on arbitrary bytes.
 * Checks beyond the sanitizers: a header found lies inside the input and
 * parses the same without what follows it, "need more" never outlives the
 * size limits, and a reason comes with "bad" and only with it. */
#include "fuzz.h"
#include "proto/proxyproto.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static void check_ok(const uint8_t *data, size_t size, const struct proxy_header *h)
{
	struct proxy_header again;
	const char *why;

	if (h->len == 0 || h->len > size || (h->version != 1 && h->version != 2))
		abort();
	if (h->len > (h->version == 1 ? PROXY_V1_MAX : PROXY_V2_MAX))
		abort();
	if (!h->local && (h->src.ss_family != h->dst.ss_family ||
			  (h->src.ss_family != AF_INET && h->src.ss_family != AF_INET6)))
		abort();
	if (h->local && (h->src.ss_family != 0 || h->dst.ss_family != 0))
		abort();
	/* The header ends where it says, whatever the client sends next. */
	if (proxy_parse(data, h->len, &again, &why) != PROXY_OK || memcmp(&again, h, sizeof(again)) != 0)
		abort();
}

static void check_header(const uint8_t *data, size_t size, struct proxy_header *h)
{
	const char *why = "unset";
	enum proxy_result r = proxy_parse(data, size, h, &why);

	if ((r == PROXY_BAD) != (why != NULL))
		abort();
	if (r == PROXY_NEED_MORE && size >= (size && data[0] == 'P' ? PROXY_V1_MAX : PROXY_V2_MAX))
		abort();
	if (r == PROXY_NONE && (size == 0 || (size == 1 && (data[0] == 'P' || data[0] == '\r'))))
		abort();     /* one byte of either signature is still a maybe */
	if (r == PROXY_OK)
		check_ok(data, size, h);
	else if (h->len != 0 || h->version != 0)
		abort();
}

/* The input as a source list; the peer tried is the header's source when
 * there is one, else an address made of the first input bytes. */
static void check_sources(const uint8_t *data, size_t size, const struct proxy_header *h)
{
	char *text = fuzz_str(data, size);
	struct proxy_sources *s = (struct proxy_sources *)text;   /* not NULL: must be cleared */
	char err[256] = "";
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

	if (!proxy_sources_parse(text, &s, err, sizeof(err))) {
		if (s != NULL || err[0] == '\0')
			abort();
		free(text);
		return;
	}
	if (proxy_sources_count(s) > strlen(text))
		abort();
	memcpy(&in6.sin6_addr, data, size < 16 ? size : 16);
	(void)proxy_sources_match(s, (const struct sockaddr *)&in6);
	memcpy(in6.sin6_addr.s6_addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
	(void)proxy_sources_match(s, (const struct sockaddr *)&in6);
	if (h->version && !h->local)
		(void)proxy_sources_match(s, (const struct sockaddr *)&h->src);
	proxy_sources_free(s);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_header h;

	check_header(data, size, &h);
	check_sources(data, size, &h);
	return 0;
}

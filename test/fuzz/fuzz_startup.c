/* pgcrew — fuzz target: the first packet a client sends (startup, SSL/GSS
 * requests, CancelRequest, a direct-TLS ClientHello) and the "options"
 * value of a startup packet. A CancelRequest of any length must come out
 * with a secret of 4 to 256 bytes that is the packet's tail, rebuild to the
 * same bytes, and route (proto/cancelkey.h) without reading past it; a
 * length refused from the first 8 bytes is one the parser refuses too. */
#include "fuzz.h"
#include "proto/build.h"
#include "proto/cancelkey.h"
#include "proto/packet.h"
#include "proto/startup.h"

#include <stdlib.h>
#include <string.h>

static void check_cancel(const uint8_t *data, size_t len, const struct startup_msg *m)
{
	uint8_t again[CANCELKEY_REQUEST_MAX];
	struct pktbuf pb;
	struct cancelkey_own own;
	int worker, peer;

	if (m->cancel.len < CANCELKEY_MIN || m->cancel.len > CANCELKEY_MAX || len != CANCELKEY_REQUEST_HDR + (size_t)m->cancel.len)
		abort();
	pktbuf_init_fixed(&pb, again, sizeof(again));
	pkt_write_cancel_request(&pb, &m->cancel);
	if (pktbuf_failed(&pb) || pb.len != len || memcmp(again, data, len) != 0)
		abort();
	if (cancelkey_route(&m->cancel, &worker, &peer) &&
	    (worker < 0 || worker >= CANCELKEY_WORKERS || peer < 0 || peer >= CANCELKEY_PEERS))
		abort();
	if (cancelkey_to_own(&own, &m->cancel) && !cancelkey_matches(&own, &m->cancel))
		abort();
}

static int count_option(void *arg, const char *key, const char *val)
{
	(void)key;
	(void)val;
	(*(int *)arg)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct startup_msg m;
	struct pkt_hdr h;
	const char *why = NULL;
	char err[256];
	int n = 0;

	(void)pkt_is_tls_hello(data, size);
	if (pkt_parse_header(data, size, true, 1u << 20, &h, &why) != PKT_OK || h.len > size)
		return 0;
	/* The early length verdict never refuses what the parser takes. */
	const char *refused = startup_length_refused(data, h.len);
	enum startup_kind kind = startup_parse(data, h.len, &m, err, sizeof(err));
	if (refused && kind != STARTUP_BAD)
		abort();
	switch (kind) {
	case STARTUP_V3:
		if (m.options)
			(void)startup_parse_options(m.options, count_option, &n, err, sizeof(err));
		break;
	case STARTUP_CANCEL:
		check_cancel(data, h.len, &m);
		break;
	default:
		break;
	}
	return 0;
}

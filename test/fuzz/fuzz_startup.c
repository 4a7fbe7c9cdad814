/* pgcrew — fuzz target: the first packet a client sends (startup, SSL/GSS
 * requests, CancelRequest, a direct-TLS ClientHello) and the "options"
 * value of a startup packet. */
#include "fuzz.h"
#include "proto/packet.h"
#include "proto/startup.h"

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
	if (startup_parse(data, h.len, &m, err, sizeof(err)) == STARTUP_V3 && m.options)
		(void)startup_parse_options(m.options, count_option, &n, err, sizeof(err));
	return 0;
}

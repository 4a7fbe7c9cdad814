/* pgcrew — fuzz target: a whole client byte stream, as a worker reads it:
 * the startup packet, then typed messages framed by pkt_parse_header, each
 * body given to the parser pgcrew uses for its type (SCRAM exchange for 'p',
 * console command parser for 'Q', field readers for the extended protocol). */
#include "fuzz.h"
#include "auth/scram.h"
#include "cmdparse.h"
#include "control.h"
#include "proto/packet.h"
#include "proto/startup.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A verifier for password "pw": the exchange can get as far as the proof. */
static const char VERIFIER[] =
	"SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0$"
	"WrFUzmCiU9ItPLCWFXHUBTNTh4GJtQpWpjBeUvyL3VQ=:"
	"6kmzNkaPNmwfIvHbDQLSwhd9VWRzQoFqZwW3dI0Sm5I=";

struct session {
	struct scram_server scram;
	struct scram_secret secret;
	bool have_secret;
	int sasl_step;
};

static void on_password(struct session *s, const uint8_t *body, size_t len)
{
	char out[1024];
	size_t outn;
	const char *errmsg;
	struct pkt_reader r;

	if (!s->have_secret)
		return;
	if (s->sasl_step == 0) {
		pkt_reader_init(&r, body, len);
		const char *mech = pkt_get_string(&r);
		int32_t n = pkt_get_i32(&r);
		const uint8_t *msg = n >= 0 ? pkt_get_bytes(&r, (size_t)n) : NULL;
		if (!mech || !msg)
			return;
		memset(&s->scram, 0, sizeof(s->scram));
		if (scram_server_first(&s->scram, &s->secret, false, (const char *)msg, (size_t)n,
				       out, sizeof(out), &outn, &errmsg) == 0)
			s->sasl_step = 1;
	} else if (s->sasl_step == 1) {
		(void)scram_server_final(&s->scram, (const char *)body, len, out, sizeof(out),
					 &outn, &errmsg);
		s->sasl_step = 2;
	}
}

static void on_query(const uint8_t *body, size_t len)
{
	char *text = fuzz_str(body, len);
	struct cmdparse words;
	enum ctl_cmd cmd;
	if (cmdparse(text, &words) == CMDPARSE_COMMAND && ctl_lookup(words.cmd, &cmd))
		(void)ctl_name(cmd);
	free(text);
}

/* Parse/Bind: every field read the way a reader of them must, bounds checked. */
static void on_extended(uint8_t type, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	if (type == 'P') {
		(void)pkt_get_string(&r);
		(void)pkt_get_string(&r);
		for (int n = pkt_get_u16(&r); n > 0; n--)
			(void)pkt_get_u32(&r);
	} else if (type == 'B') {
		(void)pkt_get_string(&r);
		(void)pkt_get_string(&r);
		for (int n = pkt_get_u16(&r); n > 0; n--)
			(void)pkt_get_u16(&r);
		for (int n = pkt_get_u16(&r); n > 0; n--) {
			int32_t l = pkt_get_i32(&r);
			if (l > 0)
				(void)pkt_get_bytes(&r, (size_t)l);
		}
		for (int n = pkt_get_u16(&r); n > 0; n--)
			(void)pkt_get_u16(&r);
	} else {
		(void)pkt_get_u8(&r);
		(void)pkt_get_string(&r);
	}
	(void)pkt_get_end(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session s = { .have_secret = false };
	struct pkt_hdr h;
	const char *why;
	struct startup_msg m;
	char err[256];

	scram_server_set_test_nonce("fuzzservernonce");
	s.have_secret = scram_parse_verifier(VERIFIER, &s.secret);
	if (!s.have_secret)
		abort();   /* the target would test nothing of SCRAM */
	if (pkt_parse_header(data, size, true, 1u << 20, &h, &why) != PKT_OK || h.len > size)
		return 0;
	if (startup_parse(data, h.len, &m, err, sizeof(err)) != STARTUP_V3)
		return 0;
	data += h.len;
	size -= h.len;
	for (int i = 0; i < 4096; i++) {
		if (pkt_parse_header(data, size, false, 1u << 20, &h, &why) != PKT_OK || h.len > size)
			break;
		const uint8_t *body = data + h.hdr_len;
		size_t blen = h.len - h.hdr_len;
		switch (h.type) {
		case 'p': on_password(&s, body, blen); break;
		case 'Q': on_query(body, blen); break;
		case 'P': case 'B': case 'D': case 'C': case 'E': on_extended(h.type, body, blen); break;
		default: break;
		}
		data += h.len;
		size -= h.len;
	}
	return 0;
}

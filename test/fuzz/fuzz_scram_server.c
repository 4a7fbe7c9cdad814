/* pgcrew — fuzz target: pgcrew as SCRAM server, fed a client-first and a
 * client-final message (the input split at its first NUL), real and mock
 * secrets: bad base64, huge nonces, missing attributes, wrong proofs. */
#include "fuzz.h"
#include "auth/scram.h"

#include <stdlib.h>

static const char VERIFIER[] =
	"SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0$"
	"WrFUzmCiU9ItPLCWFXHUBTNTh4GJtQpWpjBeUvyL3VQ=:"
	"6kmzNkaPNmwfIvHbDQLSwhd9VWRzQoFqZwW3dI0Sm5I=";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scram_secret secret;
	struct scram_server st = { .state = 0 };
	char out[1024];
	size_t outn, l1, l2;
	const char *errmsg;

	if (!scram_parse_verifier(VERIFIER, &secret))
		abort();
	/* Fixed so a client-final can repeat it, as a real one must. */
	scram_server_set_test_nonce("fuzzservernonce");
	bool mock = size > 0 && (data[0] & 1);
	char *first = fuzz_next_part(&data, &size, &l1);
	char *final = fuzz_next_part(&data, &size, &l2);
	if (scram_server_first(&st, &secret, mock, first, l1, out, sizeof(out), &outn, &errmsg) == 0)
		(void)scram_server_final(&st, final, l2, out, sizeof(out), &outn, &errmsg);
	free(first);
	free(final);
	return 0;
}

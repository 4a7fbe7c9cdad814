/* pgcrew — fuzz target: pgcrew as SCRAM client toward a hostile server:
 * server-first then server-final (the input split at its first NUL), with a
 * password; also the verifier parser on the whole input. */
#include "fuzz.h"
#include "auth/scram.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scram_client st;
	struct scram_secret secret;
	char out[1024];
	size_t outn, l1, l2;
	const char *errmsg;

	char *whole = fuzz_str(data, size);
	(void)scram_parse_verifier(whole, &secret);
	free(whole);

	char *first = fuzz_next_part(&data, &size, &l1);
	char *final = fuzz_next_part(&data, &size, &l2);
	memset(&st, 0, sizeof(st));
	/* Fixed so a server-first can extend it, as a real one must. */
	scram_client_set_test_nonce("fuzzclientnonce", NULL);
	/* Iteration counts over 4096 cost seconds of PBKDF2, not coverage. */
	const char *it = strstr(first, ",i=");
	bool cheap = !it || strtol(it + 3, NULL, 10) <= 4096;
	if (cheap && scram_client_first(&st, out, sizeof(out), &outn) == 0 &&
	    scram_client_final(&st, first, l1, "pw", NULL, out, sizeof(out), &outn, &errmsg) == 0)
		(void)scram_client_verify(&st, final, l2, &errmsg);
	free(first);
	free(final);
	return 0;
}

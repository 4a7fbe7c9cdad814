/* pgcrew — fuzz target: userlist.txt (quoted names and secrets, comments,
 * plaintext/md5/SCRAM secret kinds). */
#include "fuzz.h"
#include "config.h"
#include "config/userlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_error err;
	struct userlist *ul = userlist_load(fuzz_file("userlist", data, size), &err);
	if (!ul)
		return 0;
	const char *secret = userlist_find(ul, "postgres");
	if (secret)
		(void)userlist_kind_name(userlist_secret_kind(secret));
	userlist_free(ul);
	return 0;
}

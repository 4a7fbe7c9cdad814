/* pgcrew — fuzz target: the connection strings of [databases], [users] and
 * [peers] entries (quoting, host lists, every key's value). */
#include "fuzz.h"
#include "config.h"
#include "config/connstr.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_error err;
	struct db_def db;
	struct user_def user;
	struct peer_def peer;
	char *text = fuzz_str(data, size);

	memset(&db, 0, sizeof(db));
	if (connstr_parse_db("fuzzdb", text, "fuzz.ini", 1, &db, &err) == 0)
		connstr_db_free(&db);
	memset(&user, 0, sizeof(user));
	if (connstr_parse_user("fuzzuser", text, "fuzz.ini", 1, &user, &err) == 0)
		connstr_user_free(&user);
	memset(&peer, 0, sizeof(peer));
	if (connstr_parse_peer("1", text, "fuzz.ini", 1, &peer, &err) == 0)
		connstr_peer_free(&peer);
	free(text);
	return 0;
}

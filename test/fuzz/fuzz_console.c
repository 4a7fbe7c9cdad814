/* pgcrew — fuzz target: admin console commands (SHOW/PAUSE/KILL_CLIENT/...
 * with arguments, SET key = value in both spellings, PgBouncer's grammar in
 * cmdparse) and the startup "options" splitter, on arbitrary text. */
#include "fuzz.h"
#include "cmdparse.h"
#include "control.h"
#include "proto/startup.h"

#include <stdlib.h>

static int ignore(void *arg, const char *key, const char *val)
{
	(void)arg;
	(void)key;
	(void)val;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_str(data, size);
	struct cmdparse words;
	enum ctl_cmd cmd;
	unsigned long long id;
	char err[256];

	if (cmdparse(text, &words) == CMDPARSE_COMMAND && ctl_lookup(words.cmd, &cmd)) {
		(void)ctl_name(cmd);
		(void)ctl_client_id(words.arg, &id);
	}
	(void)startup_parse_options(text, ignore, NULL, err, sizeof(err));
	free(text);
	return 0;
}

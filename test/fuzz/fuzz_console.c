/* pgcrew — fuzz target: admin console commands (SHOW/PAUSE/KILL_CLIENT/...
 * with arguments, SET key = value in both spellings) and the startup
 * "options" splitter, on arbitrary text. */
#include "fuzz.h"
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
	enum ctl_cmd cmd;
	const char *arg;
	char key[64], val[1024], err[256];

	if (ctl_parse(text, &cmd, &arg))
		(void)ctl_name(cmd);
	(void)ctl_parse_set(text, key, sizeof(key), val, sizeof(val));
	(void)startup_parse_options(text, ignore, NULL, err, sizeof(err));
	free(text);
	return 0;
}

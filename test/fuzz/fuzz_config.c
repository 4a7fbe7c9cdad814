/* pgcrew — fuzz target: a whole pgbouncer.ini through config_load (ini
 * grammar, every [pgbouncer] setting's value parser, [databases]/[users]/
 * [peers] connection strings, cross-checks). %include and file settings
 * name files relative to a scratch directory; most will not exist. */
#include "fuzz.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *cfg = NULL;
	struct config_error err;
	/* A %include of a FIFO or a device would block or never end: not a
	 * pooler bug (the operator writes the config), so such inputs are
	 * left out. */
	for (size_t i = 0; i + 4 < size; i++)
		if (data[i] == '/' && data[i + 1] == 'd' && data[i + 2] == 'e' && data[i + 3] == 'v')
			return 0;
	if (config_load(fuzz_file("ini", data, size), &cfg, &err) == 0)
		config_free(cfg);
	return 0;
}

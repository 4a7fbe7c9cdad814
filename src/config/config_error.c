/* pgcrew — the configuration's error message (config.h): one place that
 * every parser of the config module (ini, settings, connection strings,
 * userlist) writes its "file:line: ..." text to, below them all. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

void config_error_set(struct config_error *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

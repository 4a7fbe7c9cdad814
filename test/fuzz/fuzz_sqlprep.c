/* pgcrew — fuzz target: the SQL PREPARE/EXECUTE/DEALLOCATE scanner
 * (src/proto/sqlprep.c) on arbitrary query text, read from a buffer of
 * exactly the input's size. Checks beyond the sanitizers: offsets inside the
 * text and in order, the name folded and at most 63 bytes, and a statement
 * it accepts is accepted again with trailing blanks and a semicolon. */
#include "fuzz.h"
#include "proto/sqlprep.h"

#include <stdlib.h>
#include <string.h>

static void check(const struct sqlprep *sp, size_t size)
{
	if (sp->kind == SQLPREP_NONE)
		return;
	if (sp->name_len > SQLPREP_NAME_MAX || strlen(sp->name) != sp->name_len)
		abort();
	if (sp->name_end > size || sp->rest > size || sp->end > size)
		abort();
	if (sp->kind == SQLPREP_PREPARE && !(sp->name_end <= sp->rest && sp->rest < sp->end))
		abort();
	if (sp->kind == SQLPREP_EXECUTE && !(sp->name_end <= sp->rest && sp->rest <= sp->end))
		abort();
	if (sp->kind != SQLPREP_DEALLOCATE_ALL && sp->name_len == 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sqlprep sp, again;
	char *text = malloc(size + 3);

	if (!text)
		return 0;
	memcpy(text, data, size);
	enum sqlprep_kind k = sqlprep_scan(text, size, &sp);
	check(&sp, size);
	(void)sqlprep_maybe(text, size);
	if (k != SQLPREP_NONE && !sqlprep_maybe(text, size))
		abort();     /* the cheap test must never turn one of ours away */
	if (k != SQLPREP_NONE && !memchr(text, '-', size)) {
		/* Without a "--" comment that would swallow it, a trailer changes nothing. */
		memcpy(text + size, " ;\n", 3);
		if (sqlprep_scan(text, size + 3, &again) != k || again.end != sp.end ||
		    strcmp(again.name, sp.name) != 0)
			abort();
	}
	free(text);
	return 0;
}

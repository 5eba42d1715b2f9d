// SPDX-License-Identifier: GPL-2.0
/* The line reader of state files, and this boot's id: see saved.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "core/sp.h"
#include "core/saved.h"

#define MAX_BAD_SHOWN 20		/* bad lines named per file */

const char *sp_boot_id(void)
{
	static char id[64];
	FILE *f;

	if (!id[0] && (f = fopen("/proc/sys/kernel/random/boot_id", "r"))) {
		if (!fgets(id, sizeof(id), f))
			id[0] = '\0';
		id[strcspn(id, "\n")] = '\0';
		fclose(f);
	}
	return id;
}

/* ---- reading ------------------------------------------------------------ */

void sp_persist_bad(struct sp_persist_reader *r, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	/* Not the per-call-site limiter (5 a second): each bad line of a file is
	 * named, up to MAX_BAD_SHOWN, then counted (see sp_persist_next()). */
	if (++r->bad > MAX_BAD_SHOWN)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	sp_log_at(NULL, SP_LOG_WARN, "%s:%d: %s; line ignored", r->file, r->line, why);
}

char *sp_persist_next(struct sp_persist_reader *r)
{
	int n;

	while ((n = sp_read_line(r->f, r->buf, sizeof(r->buf))) != SP_LINE_EOF) {
		r->line++;
		if (n == SP_LINE_LONG)
			sp_persist_bad(r, "longer than %zu bytes", sizeof(r->buf) - 1);
		else if (n == SP_LINE_NUL)
			sp_persist_bad(r, "holds a NUL byte");
		else if (r->buf[0] && r->buf[0] != '#')
			return r->buf;
	}
	if (r->bad > MAX_BAD_SHOWN)
		sp_log(SP_LOG_WARN, "%s: %d more bad lines ignored", r->file, r->bad - MAX_BAD_SHOWN);
	r->bad = 0;
	return NULL;
}

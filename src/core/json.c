// SPDX-License-Identifier: GPL-2.0
/*
 * A minimal JSON writer in the manner of bpftool's json_writer: the writer
 * places the commas, so output stays valid whichever members are skipped
 * (a missing pin used to leave `{,"connections":[]`).
 */
#include <math.h>
#include <string.h>
#include "core/sp.h"

void sp_json_init(struct sp_json *j, FILE *out)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
}

static void sep(struct sp_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->nonempty & (1u << j->depth))
		fputc(',', j->out);
	j->nonempty |= 1u << j->depth;
}

static void push(struct sp_json *j, char c)
{
	sep(j);
	fputc(c, j->out);
	if (j->depth < 31)
		j->depth++;
	j->nonempty &= ~(1u << j->depth);
}

static void pop(struct sp_json *j, char c)
{
	fputc(c, j->out);
	if (j->depth > 0)
		j->depth--;
}

void sp_json_begin_object(struct sp_json *j) { push(j, '{'); }
void sp_json_end_object(struct sp_json *j) { pop(j, '}'); }
void sp_json_begin_array(struct sp_json *j) { push(j, '['); }
void sp_json_end_array(struct sp_json *j) { pop(j, ']'); }

/* At most max bytes of s: strings read from maps need not end in a NUL. */
static void str(FILE *out, const char *s, size_t max)
{
	fputc('"', out);
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

void sp_json_key(struct sp_json *j, const char *key)
{
	sep(j);
	str(j->out, key, strlen(key));
	fputc(':', j->out);
	j->after_key = true;
}

void sp_json_strn(struct sp_json *j, const char *s, size_t max)
{
	sep(j);
	str(j->out, s, max);
}

void sp_json_str(struct sp_json *j, const char *s) { sp_json_strn(j, s, strlen(s)); }

void sp_json_u64(struct sp_json *j, unsigned long long v)
{
	sep(j);
	fprintf(j->out, "%llu", v);
}

void sp_json_s64(struct sp_json *j, long long v)
{
	sep(j);
	fprintf(j->out, "%lld", v);
}

void sp_json_double(struct sp_json *j, double v)
{
	sep(j);
	if (isfinite(v))
		fprintf(j->out, "%.1f", v);
	else
		fputs("null", j->out);
}

void sp_json_bool(struct sp_json *j, bool v)
{
	sep(j);
	fputs(v ? "true" : "false", j->out);
}

void sp_json_null(struct sp_json *j)
{
	sep(j);
	fputs("null", j->out);
}

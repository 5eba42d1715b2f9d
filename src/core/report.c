// SPDX-License-Identifier: GPL-2.0
/*
 * The status model: modules fill records and tables (sp.h), the renderers
 * here turn them into text or JSON. Keeping modules away from output formats
 * is what lets a Prometheus renderer (issue 13) come later without touching
 * a module, and keeps JSON valid whichever records are missing.
 */
#include <string.h>
#include <unistd.h>
#include "core/sp.h"

void sp_report_reset(struct sp_report *r)
{
	r->nr_recs = r->nr_tables = r->spilled = 0;
}

struct sp_val *sp_rec_add(struct sp_report *r, const char *group, const struct sp_field *f)
{
	struct sp_rec *rec;

	/* Past the end, values go nowhere: a module never writes out of bounds. */
	if (r->nr_recs == SP_REPORT_RECS) {
		if (!r->spilled++)
			sp_err("status: more than %d records; %s and later ones not shown",
			       SP_REPORT_RECS, f->key);
		memset(&r->spill, 0, sizeof(r->spill));
		return &r->spill;
	}
	rec = &r->recs[r->nr_recs++];
	memset(rec, 0, sizeof(*rec));
	rec->f = *f;
	rec->group = group;
	return &rec->v;
}

void sp_rec_counter(struct sp_report *r, const char *group, const char *key,
		    unsigned long long v, const char *unit, const char *help)
{
	struct sp_field f = { key, SP_COUNTER, false, unit, help };

	sp_rec_add(r, group, &f)->u = v;
}

void sp_rec_gauge(struct sp_report *r, const char *group, const char *key,
		  long long v, const char *unit, const char *help)
{
	struct sp_field f = { key, SP_GAUGE, false, unit, help };

	sp_rec_add(r, group, &f)->i = v;
}

struct sp_table *sp_table_add(struct sp_report *r, const char *key, const char *help,
			      const struct sp_field *cols, int nr_cols)
{
	struct sp_table *t;

	if (r->nr_tables == SP_REPORT_TABLES || nr_cols > SP_TABLE_COLS)
		return NULL;
	t = &r->tables[r->nr_tables++];
	t->key = key;
	t->help = help;
	t->cols = cols;
	t->nr_cols = nr_cols;
	t->nr_rows = 0;
	t->no_prom = false;
	return t;
}

struct sp_val *sp_table_row(struct sp_table *t)
{
	if (!t || t->nr_rows == SP_TABLE_ROWS)
		return NULL;
	memset(t->rows[t->nr_rows], 0, sizeof(t->rows[0]));
	return t->rows[t->nr_rows++];
}

void sp_report_counters(struct sp_report *r, const char *pin_dir, const char *map,
			const struct sp_counter *c, int n)
{
	int fd = sp_open_pinned(pin_dir, map);
	__u64 v;

	if (fd < 0)
		return;
	for (int i = 0; i < n; i++) {
		if (sp_sum_percpu(fd, i, &v))
			v = 0;
		sp_rec_counter(r, NULL, c[i].name, v, c[i].unit ? c[i].unit : "", c[i].help);
	}
	close(fd);
}

const struct sp_rec *sp_rec_find(const struct sp_report *r, const char *group, const char *key)
{
	for (int i = 0; i < r->nr_recs; i++) {
		const struct sp_rec *rec = &r->recs[i];

		if (!strcmp(rec->f.key, key) &&
		    (group ? rec->group && !strcmp(rec->group, group) : !rec->group))
			return rec;
	}
	return NULL;
}

double sp_rec_num(const struct sp_report *r, const char *group, const char *key)
{
	const struct sp_rec *rec = sp_rec_find(r, group, key);

	if (!rec)
		return 0;
	switch (rec->f.type) {
	case SP_COUNTER: return rec->v.u;
	case SP_GAUGE: return rec->f.real ? rec->v.d : rec->v.i;
	case SP_BOOL: return rec->v.b;
	case SP_STRING: break;
	}
	return 0;
}

const struct sp_table *sp_table_find(const struct sp_report *r, const char *key)
{
	for (int i = 0; i < r->nr_tables; i++)
		if (!strcmp(r->tables[i].key, key))
			return &r->tables[i];
	return NULL;
}

int sp_table_col(const struct sp_table *t, const char *key)
{
	for (int c = 0; t && c < t->nr_cols; c++)
		if (!strcmp(t->cols[c].key, key))
			return c;
	return -1;
}

struct sp_phrase *sp_say(struct sp_summary *s, unsigned int flags, double v, const char *words)
{
	struct sp_phrase *p;

	if (s->n == SP_SAY_MAX)
		return NULL;
	p = &s->p[s->n++];
	p->words = words;
	p->v = v;
	p->flags = flags;
	p->detail[0] = 0;
	return p;
}

struct sp_phrase *sp_say_rec(struct sp_summary *s, unsigned int flags, const struct sp_report *r,
			     const char *key, const char *words)
{
	double v = sp_rec_num(r, NULL, key);

	return (flags & SP_SAY_WARN) && !v ? NULL : sp_say(s, flags, v, words);
}

int sp_say_words(const char *words, const char *num, char *buf, size_t len)
{
	bool one = !strcmp(num, "1");
	size_t l = 0;

#define PUT(c) do { if (l + 1 < len) buf[l] = (c); l++; } while (0)
	for (const char *w = words; *w; w++) {
		const char *bar, *end;

		if (w[0] == '%' && w[1] == 's') {
			for (const char *c = num; *c; c++)
				PUT(*c);
			w++;
		} else if (w[0] == '{' && (bar = strchr(w, '|')) && (end = strchr(bar, '}'))) {
			const char *from = one ? w + 1 : bar + 1, *to = one ? bar : end;

			for (const char *c = from; c < to; c++)
				PUT(*c);
			w = end;
		} else {
			PUT(*w);
		}
	}
#undef PUT
	if (len)
		buf[l < len ? l : len - 1] = 0;
	return l;
}

/* ---- renderers ---------------------------------------------------------- */

/* A value as text in buf; returns its length, as snprintf. */
static int val_str(const struct sp_field *f, const struct sp_val *v, char *buf, size_t len)
{
	switch (f->type) {
	case SP_COUNTER: return snprintf(buf, len, "%llu", v->u);
	case SP_GAUGE:
		return f->real ? snprintf(buf, len, "%.1f", v->d) : snprintf(buf, len, "%lld", v->i);
	case SP_STRING: return snprintf(buf, len, "%.*s", (int)sizeof(v->s), v->s);
	case SP_BOOL: return snprintf(buf, len, "%s", v->b ? "yes" : "no");
	}
	return snprintf(buf, len, "?");
}

static void val_json(const struct sp_field *f, const struct sp_val *v, struct sp_json *j)
{
	switch (f->type) {
	case SP_COUNTER: sp_json_u64(j, v->u); break;
	case SP_GAUGE:
		if (f->real)
			sp_json_double(j, v->d);
		else
			sp_json_s64(j, v->i);
		break;
	case SP_STRING: sp_json_strn(j, v->s, sizeof(v->s)); break;
	case SP_BOOL: sp_json_bool(j, v->b); break;
	}
}

/* "seconds" reads as "s" after a number; a plain count has no unit. */
static const char *unit_text(const char *unit)
{
	if (!unit || !*unit)
		return "";
	return !strcmp(unit, "seconds") ? " s" : !strcmp(unit, "bytes") ? " B" :
	       !strcmp(unit, "ns") ? " ns" : "";
}

/* A header line of column names, then one aligned line per row. */
static void table_text(const struct sp_table *t, FILE *out, const char *indent)
{
	int w[SP_TABLE_COLS];
	char cell[sizeof(((struct sp_val *)0)->s) + 32];

	fprintf(out, "%s%s (%d):\n", indent, t->key, t->nr_rows);
	if (!t->nr_rows)
		return;
	for (int c = 0; c < t->nr_cols; c++) {
		w[c] = strlen(t->cols[c].key);
		for (int r = 0; r < t->nr_rows; r++) {
			int n = val_str(&t->cols[c], &t->rows[r][c], cell, sizeof(cell));

			if (n > w[c])
				w[c] = n;
		}
	}
	fprintf(out, "%s ", indent);
	for (int c = 0; c < t->nr_cols; c++)
		fprintf(out, " %-*s", c + 1 < t->nr_cols ? w[c] : 0, t->cols[c].key);
	fputc('\n', out);
	for (int r = 0; r < t->nr_rows; r++) {
		fprintf(out, "%s ", indent);
		for (int c = 0; c < t->nr_cols; c++) {
			val_str(&t->cols[c], &t->rows[r][c], cell, sizeof(cell));
			fprintf(out, " %-*s", c + 1 < t->nr_cols ? w[c] : 0, cell);
		}
		fputc('\n', out);
	}
}

static void table_json(const struct sp_table *t, struct sp_json *j)
{
	sp_json_key(j, t->key);
	sp_json_begin_array(j);
	for (int r = 0; r < t->nr_rows; r++) {
		sp_json_begin_object(j);
		for (int c = 0; c < t->nr_cols; c++) {
			sp_json_key(j, t->cols[c].key);
			val_json(&t->cols[c], &t->rows[r][c], j);
		}
		sp_json_end_object(j);
	}
	sp_json_end_array(j);
}

void sp_report_text(const struct sp_report *r, FILE *out, const char *indent)
{
	for (int i = 0; i < r->nr_recs; i++) {
		const struct sp_rec *rec = &r->recs[i];
		char name[96], value[sizeof(rec->v.s) + 32];

		snprintf(name, sizeof(name), "%s%s%s", rec->group ? rec->group : "",
			 rec->group ? "." : "", rec->f.key);
		val_str(&rec->f, &rec->v, value, sizeof(value));
		fprintf(out, "%s%-26s %s%s\n", indent, name, value, unit_text(rec->f.unit));
	}
	for (int i = 0; i < r->nr_tables; i++)
		table_text(&r->tables[i], out, indent);
}

/* Members of the object j is in: records (a group as a nested object), then tables. */
void sp_report_json(const struct sp_report *r, struct sp_json *j)
{
	const char *open = NULL;

	for (int i = 0; i < r->nr_recs; i++) {
		const struct sp_rec *rec = &r->recs[i];

		if (open && (!rec->group || strcmp(open, rec->group))) {
			sp_json_end_object(j);
			open = NULL;
		}
		if (rec->group && !open) {
			sp_json_key(j, rec->group);
			sp_json_begin_object(j);
			open = rec->group;
		}
		sp_json_key(j, rec->f.key);
		val_json(&rec->f, &rec->v, j);
	}
	if (open)
		sp_json_end_object(j);
	for (int i = 0; i < r->nr_tables; i++)
		table_json(&r->tables[i], j);
}

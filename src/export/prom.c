// SPDX-License-Identifier: GPL-2.0
/*
 * The status model as Prometheus text exposition (format 0.0.4), for
 * `status --prometheus` and run's --metrics-textfile (issue 13). Rendered
 * from the same records as text and JSON, so a module never knows about
 * Prometheus; the naming rules live here, in one place:
 *
 *   stackpilot_<module>_<key>      gauges; stackpilot_<module>_<key>_total counters
 *   a key that starts with its module's word drops it (rehash's rehash_now
 *   is stackpilot_rehash_now_total, not stackpilot_rehash_rehash_now_total)
 *   unit "bytes" -> _bytes, "seconds" -> _seconds, "ns" -> _seconds (value / 1e9);
 *   a key bytes_<what> in bytes is <what>_bytes (rehash's bytes_delivered)
 *   a group or key "ipv4"/"ipv6" -> label family (one metric, two series)
 *   tables: one metric per numeric column, named after the table
 *   (stackpilot_pmtu_destination_*, stackpilot_fragguard_peer_*), the string
 *   columns that name a row as labels; a state is never a label of a
 *   counter (rate() would break when it changes): a bool column is a 0/1
 *   gauge of its own, string columns of unit "state" are the labels of one
 *   gauge <table>_state, always 1; a module's table has at most
 *   meta.metrics_top rows (run --metrics-top, in the table's own order);
 *   tables marked no_prom (rows without a stable name) are not exposed
 *   programs: labels module and program (the full name), never the id,
 *   which changes at every start
 *
 * Tunables (group "cfg") are configuration, shown by `get`; not exposed.
 * Neither are ratios of two counters (unit "ratio"): rate(a) / rate(b).
 */
#define _GNU_SOURCE	/* memmem */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "export/export.h"
#include "core/loop.h"
#include "core/state.h"

struct lab { const char *k, *v; };

/* Label values escape \ " and newline; HELP text escapes \ and newline. */
static void put_escaped(FILE *out, const char *s, bool label)
{
	for (size_t i = 0; i < sizeof(((struct sp_val *)0)->s) && s[i]; i++) {
		if (s[i] == '\\')
			fputs("\\\\", out);
		else if (s[i] == '\n')
			fputs("\\n", out);
		else if (s[i] == '"' && label)
			fputs("\\\"", out);
		else
			fputc(s[i], out);
	}
}

static void header(FILE *out, const char *name, bool counter, const char *help)
{
	fprintf(out, "# HELP %s ", name);
	put_escaped(out, help && *help ? help : "(no help)", false);
	fprintf(out, "\n# TYPE %s %s\n", name, counter ? "counter" : "gauge");
}

static bool is_ns(const struct sp_field *f) { return f->unit && !strcmp(f->unit, "ns"); }

static void sample(FILE *out, const char *name, const struct lab *l, int n,
		   const struct sp_field *f, const struct sp_val *v)
{
	fputs(name, out);
	for (int i = 0; i < n; i++) {
		fprintf(out, "%s%s=\"", i ? "," : "{", l[i].k);
		put_escaped(out, l[i].v, true);
		fputc('"', out);
	}
	fputs(n ? "} " : " ", out);
	/* Integers stay exact (a double has 53 bits); only ns become fractions. */
	if (is_ns(f))
		fprintf(out, "%.9f\n", (f->type == SP_COUNTER ? (double)v->u :
					f->real ? v->d : (double)v->i) / 1e9);
	else if (f->type == SP_COUNTER)
		fprintf(out, "%llu\n", v->u);
	else if (f->type == SP_BOOL)
		fprintf(out, "%d\n", v->b);
	else if (f->real)
		fprintf(out, "%.17g\n", v->d);
	else
		fprintf(out, "%lld\n", v->i);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* stackpilot_<prefix>_<key>, in base units, _total for counters. */
static void metric_name(char *buf, size_t len, const char *prefix, const char *key,
			const struct sp_field *f)
{
	char k[128];
	const char *unit = f->unit ? f->unit : "", *suffix = "";

	/* rehash's "rehash_now" is stackpilot_rehash_now: no word twice. */
	if (!strncmp(key, prefix, strlen(prefix)) && key[strlen(prefix)] == '_')
		key += strlen(prefix) + 1;
	snprintf(k, sizeof(k), "%s", key);
	/* "age_s" in seconds is age_seconds: promtool rejects abbreviated units. */
	if (!strcmp(unit, "seconds") || !strcmp(unit, "ns")) {
		if (ends_with(k, *unit == 'n' ? "_ns" : "_s"))
			k[strlen(k) - (*unit == 'n' ? 3 : 2)] = 0;
		suffix = "_seconds";
	} else if (!strcmp(unit, "bytes")) {
		/* The unit goes last: JSON's bytes_delivered is delivered_bytes_total. */
		if (!strncmp(k, "bytes_", 6))
			memmove(k, k + 6, strlen(k + 6) + 1);
		suffix = "_bytes";
	}
	if (ends_with(k, suffix))
		suffix = "";
	snprintf(buf, len, "stackpilot_%s_%s%s%s", prefix, k, suffix,
		 f->type == SP_COUNTER ? "_total" : "");
}

void sp_prom_counter_name(char *buf, size_t len, const char *module, const struct sp_counter *c)
{
	const struct sp_field f = { c->name, SP_COUNTER, false, c->unit, c->help };

	metric_name(buf, len, module, c->name, &f);
}

static bool is_family(const char *s)
{
	return s && (!strcmp(s, "ipv4") || !strcmp(s, "ipv6"));
}

/* A record's metric name and its family label (NULL if none); false: not exposed. */
static bool rec_name(const struct sp_rec *r, const char *module, char *buf, size_t len,
		     const char **family)
{
	char key[128];

	*family = NULL;
	if (r->f.type == SP_STRING || (r->group && !strcmp(r->group, "cfg")) ||
	    (r->f.unit && !strcmp(r->f.unit, "ratio")))
		return false;
	if (is_family(r->group))
		*family = r->group, snprintf(key, sizeof(key), "%s", r->f.key);
	else if (r->group && is_family(r->f.key))
		*family = r->f.key, snprintf(key, sizeof(key), "%s", r->group);
	else
		snprintf(key, sizeof(key), "%s%s%s", r->group ? r->group : "",
			 r->group ? "_" : "", r->f.key);
	metric_name(buf, len, module, key, &r->f);
	return true;
}

/*
 * Records, one metric at a time: the exposition wants a metric's series
 * together, and family-grouped records are not adjacent (ipv4.mem,
 * ipv4.time_s, ipv6.mem ...). Quadratic in at most SP_REPORT_RECS.
 */
static void render_recs(FILE *out, const struct sp_report *rep, const char *module,
			const char *cgroup)
{
	for (int i = 0; i < rep->nr_recs; i++) {
		char name[192], other[192];
		const char *fam, *fam2;
		bool seen = false;

		if (!rec_name(&rep->recs[i], module, name, sizeof(name), &fam))
			continue;
		for (int j = 0; j < i && !seen; j++)
			seen = rec_name(&rep->recs[j], module, other, sizeof(other), &fam2) &&
			       !strcmp(name, other);
		if (seen)
			continue;
		header(out, name, rep->recs[i].f.type == SP_COUNTER, rep->recs[i].f.help);
		for (int j = i; j < rep->nr_recs; j++) {
			struct lab l[2];
			int n = 0;

			if (!rec_name(&rep->recs[j], module, other, sizeof(other), &fam2) ||
			    strcmp(name, other))
				continue;
			if (cgroup)
				l[n++] = (struct lab){ "cgroup", cgroup };
			if (fam2)
				l[n++] = (struct lab){ "family", fam2 };
			sample(out, name, l, n, &rep->recs[j].f, &rep->recs[j].v);
		}
	}
}

/* A table's metric prefix; pmtu's column "dst" is the label "destination". */
static const char *table_prefix(const char *key)
{
	return !strcmp(key, "top_peers") ? "peer" : !strcmp(key, "destinations") ? "destination" :
	       !strcmp(key, "targets") ? "target" : key;
}

static bool is_state(const struct sp_field *f)
{
	return f->type == SP_STRING && f->unit && !strcmp(f->unit, "state");
}

/* Row r's labels: the cgroup, the string columns that name it, and with states its states. */
static int row_labels(const struct sp_table *t, int r, const char *cgroup, bool states,
		      struct lab *l)
{
	int n = 0;

	if (cgroup)
		l[n++] = (struct lab){ "cgroup", cgroup };
	for (int c = 0; c < t->nr_cols; c++) {
		const struct sp_field *g = &t->cols[c];

		if (g->type == SP_STRING && (states || !is_state(g)))
			l[n++] = (struct lab){ strcmp(g->key, "dst") ? g->key : "destination",
					       t->rows[r][c].s };
	}
	return n;
}

/*
 * A module's table is at most top rows, its first (each table is in its
 * own order: pmtu's destinations by connections clamped, then probes;
 * rehash's by rehashes; fragguard's peers by memory); 0: not at all.
 */
static void render_table(FILE *out, const struct sp_table *t, const char *module,
			 const char *cgroup, unsigned int top)
{
	char prefix[96], name[192], help[512];
	int rows = module && (unsigned int)t->nr_rows > top ? (int)top : t->nr_rows;
	size_t hl = 0;

	if (t->no_prom || (module && !top))
		return;
	snprintf(prefix, sizeof(prefix), "%s%s%s", module ? module : "", module ? "_" : "",
		 table_prefix(t->key));
	for (int c = 0; c < t->nr_cols; c++) {
		const struct sp_field *f = &t->cols[c];

		if (f->type == SP_STRING) {
			if (is_state(f) && hl < sizeof(help))
				hl += snprintf(help + hl, sizeof(help) - hl, "%s%s: %s",
					       hl ? "; " : "1, its state as labels: ", f->key, f->help);
			continue;
		}
		metric_name(name, sizeof(name), prefix, f->key, f);
		header(out, name, f->type == SP_COUNTER, f->help);
		for (int r = 0; r < rows; r++) {
			struct lab l[SP_TABLE_COLS + 1];

			sample(out, name, l, row_labels(t, r, cgroup, false, l), f, &t->rows[r][c]);
		}
	}
	if (!hl)
		return;
	snprintf(name, sizeof(name), "stackpilot_%s_state", prefix);
	header(out, name, false, help);
	for (int r = 0; r < rows; r++) {
		const struct sp_field f = { "state", SP_GAUGE, false, "", "" };
		const struct sp_val one = { .i = 1 };
		struct lab l[SP_TABLE_COLS + 1];

		sample(out, name, l, row_labels(t, r, cgroup, true, l), &f, &one);
	}
}

/* The programs table (status.c): id, name, module, run_cnt, run_time_ns, avg_ns. */
static void render_progs(FILE *out, const struct sp_table *t)
{
	static const char *const names[] = { "stackpilot_bpf_program_runs_total",
					     "stackpilot_bpf_program_run_seconds_total" };
	static const char *const help[] = {
		"times the attached BPF program ran (kernel BPF stats, on while `run` lives)",
		"time spent in the attached BPF program (kernel BPF stats)" };

	if (!t || t->nr_cols < 5)
		return;
	for (int m = 0; m < 2; m++) {
		header(out, names[m], true, help[m]);
		for (int r = 0; r < t->nr_rows; r++) {
			/* Not the id: a new one at every start would be a new series. */
			struct lab l[2] = { { "module", t->rows[r][2].s }, { "program", t->rows[r][1].s } };
			bool dup = false;

			/* A program attached twice (two devices) is one program: one series. */
			for (int q = 0; q < r; q++)
				dup |= t->rows[q][0].i == t->rows[r][0].i;
			if (dup)
				continue;
			sample(out, names[m], l, 2, &t->cols[3 + m], &t->rows[r][3 + m]);
		}
	}
}

static void gauge_unit(FILE *out, const char *name, const char *help, const struct lab *l, int n,
		       long long v, const char *unit)
{
	const struct sp_field f = { "", SP_GAUGE, false, unit, "" };
	struct sp_val val = { .i = v };

	if (help)
		header(out, name, false, help);
	sample(out, name, l, n, &f, &val);
}

static void gauge(FILE *out, const char *name, const char *help, const struct lab *l, int n,
		  long long v)
{
	gauge_unit(out, name, help, l, n, v, "");
}

static int prom_write_one(const char *pin_dir, FILE *out)
{
	struct sp_meta meta;
	struct sp_report *rep;
	struct timespec ts;

	sp_pin_errors = 0;
	if (sp_status_read_meta(pin_dir, &meta))
		return 1;
	rep = malloc(sizeof(*rep));	/* big: top-N tables */
	if (!rep)
		return sp_fail(1, "status: %s", strerror(ENOMEM));
	meta.cgroup[sizeof(meta.cgroup) - 1] = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	gauge(out, "stackpilot_running", "1: the run that made the pins is alive; 0: stale pins",
	      NULL, 0, !kill(meta.pid, 0));
	gauge(out, "stackpilot_uptime_seconds", "seconds since the run started", NULL, 0,
	      ts.tv_sec - (long long)(meta.started_ns / 1000000000ULL));
	gauge_unit(out, "stackpilot_loop_delay_seconds", "the event loop's largest lateness "
		   "serving its periodic timers in the last second (scrapes, status, module work)",
		   NULL, 0, meta.loop_delay_ns, "ns");
	gauge_unit(out, "stackpilot_loop_delay_max_seconds", "the event loop's largest lateness "
		   "since the run started", NULL, 0, meta.loop_delay_max_ns, "ns");
	meta.version[sizeof(meta.version) - 1] = 0;
	gauge(out, "stackpilot_build_info", "1, with the run's version (stackpilot --version) as a label",
	      &(struct lab){ "version", meta.version[0] ? meta.version : "unknown" }, 1, 1);
	header(out, "stackpilot_module_loaded", false, "1 for each module the run loaded; 0 for each "
	       "it left out because this kernel refuses it (stackpilot probe)");
	for (int i = 0; i < sp_nr_modules; i++) {
		/* A cgroup module's has its cgroup, like its other series (dashboards list them). */
		struct lab l[2] = { { "module", sp_modules[i]->name }, { "cgroup", meta.cgroup } };

		if ((meta.modules | meta.refused) & (1u << i))
			gauge(out, "stackpilot_module_loaded", NULL, l,
			      sp_modules[i]->needs_cgroup && meta.cgroup[0] ? 2 : 1,
			      !!(meta.modules & (1u << i)));
	}
	for (int i = 0; i < sp_nr_modules; i++) {
		const struct sp_module *m = sp_modules[i];
		const char *cg = m->needs_cgroup ? meta.cgroup : NULL;

		if (!(meta.modules & (1u << i)))
			continue;
		sp_status_module(pin_dir, m, rep);
		render_recs(out, rep, m->name, cg);
		for (int t = 0; t < rep->nr_tables; t++)
			render_table(out, &rep->tables[t], m->name, cg, meta.metrics_top);
	}
	sp_report_reset(rep);
	sp_targets_report(pin_dir, rep);
	sp_status_progs(&meta, rep);
	for (int t = 0; t < rep->nr_tables; t++) {
		if (!strcmp(rep->tables[t].key, "programs"))
			render_progs(out, &rep->tables[t]);
		else
			render_table(out, &rep->tables[t], NULL, NULL, 0);
	}
	free(rep);
	return sp_pin_errors ? 1 : 0;
}

/* ---- run --metrics-textfile DIR ----------------------------------------- */

/* One per process, like the loop: a run writes one file. */
/*
 * A config run has one instance per cgroup: each is rendered as above, then
 * the metrics are merged, since the exposition wants each metric's HELP and
 * TYPE once with all its series together. Series without a cgroup label
 * (running, uptime, programs, targets) get their instance's.
 */
struct prom_part { char *text; size_t len; char cgroup[256]; };

/* The metric name of a sample line, or of a "# HELP name" line; its length. */
static size_t line_metric(const char *l, const char **name)
{
	if (!strncmp(l, "# HELP ", 7))
		l += 7;
	else if (*l == '#')
		return 0;
	*name = l;
	return strcspn(l, "{ \n");
}

static void put_sample(FILE *out, const char *l, size_t nlen, const char *cgroup)
{
	size_t len = strcspn(l, "\n");

	if (!*cgroup || memmem(l, len, "{cgroup=\"", 9) || memmem(l, len, ",cgroup=\"", 9)) {
		fprintf(out, "%.*s\n", (int)len, l);
		return;
	}
	fprintf(out, "%.*s{cgroup=\"", (int)nlen, l);
	put_escaped(out, cgroup, true);
	if (l[nlen] == '{')
		fprintf(out, "\",%.*s\n", (int)(len - nlen - 1), l + nlen + 1);
	else
		fprintf(out, "\"}%.*s\n", (int)(len - nlen), l + nlen);
}

static void prom_merge(FILE *out, struct prom_part *parts, int n)
{
	for (int i = 0; i < n; i++) {
		for (const char *l = parts[i].text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			const char *name, *n2;
			size_t nlen;
			bool seen = false;

			if (strncmp(l, "# HELP ", 7) || !(nlen = line_metric(l, &name)))
				continue;
			/* Once per metric: the first instance that has it. */
			for (int k = 0; k <= i && !seen; k++)
				for (const char *m = parts[k].text; m && *m && !seen;
				     m = strchr(m, '\n') ? strchr(m, '\n') + 1 : NULL) {
					if (m == l)
						break;
					seen = !strncmp(m, "# HELP ", 7) && line_metric(m, &n2) == nlen &&
					       !strncmp(n2, name, nlen);
				}
			if (seen)
				continue;
			/* HELP and TYPE, then every instance's series of it. */
			fprintf(out, "%.*s\n", (int)strcspn(l, "\n"), l);
			if (strchr(l, '\n'))
				fprintf(out, "%.*s\n", (int)strcspn(strchr(l, '\n') + 1, "\n"), strchr(l, '\n') + 1);
			for (int k = i; k < n; k++)
				for (const char *m = parts[k].text; m && *m;
				     m = strchr(m, '\n') ? strchr(m, '\n') + 1 : NULL)
					if (*m != '#' && line_metric(m, &n2) == nlen && !strncmp(n2, name, nlen))
						put_sample(out, m, nlen, parts[k].cgroup);
		}
	}
}

int sp_prom_write(const char *pin_dir, FILE *out)
{
	static char names[SP_MAX_INSTANCES][256];
	struct prom_part *parts;
	int n = sp_instances(pin_dir, names, SP_MAX_INSTANCES), np = 0, rc = 0, errors = 0;
	char dir[600];

	if (!n)
		return prom_write_one(pin_dir, out);
	parts = calloc(n + 1, sizeof(*parts));
	if (!parts)
		return sp_fail(1, "status: %s", strerror(ENOMEM));
	for (int i = -1; i < n; i++) {
		struct sp_meta meta;
		FILE *f;

		/* -1: the interfaces' instance, in the folder itself, if there is one. */
		if (i < 0 ? (snprintf(dir, sizeof(dir), "%s/meta", pin_dir), access(dir, F_OK))
			  : sp_pin_path(dir, sizeof(dir), pin_dir, names[i]))
			continue;
		if (i < 0)
			snprintf(dir, sizeof(dir), "%s", pin_dir);
		if (sp_status_read_meta(dir, &meta) || !(f = open_memstream(&parts[np].text, &parts[np].len))) {
			rc = 1;
			continue;
		}
		snprintf(parts[np].cgroup, sizeof(parts[np].cgroup), "%.*s",
			 (int)sizeof(meta.cgroup) - 1, meta.cgroup);
		rc |= prom_write_one(dir, f);
		errors += sp_pin_errors;
		fclose(f);
		np++;
	}
	prom_merge(out, parts, np);
	for (int i = 0; i < np; i++)
		free(parts[i].text);
	free(parts);
	sp_pin_errors = errors;
	return rc || errors ? 1 : 0;
}

/*
 * The folder is opened once, at start, and written through that fd: a
 * folder above it moved meanwhile (Debian's /var/lib/prometheus belongs to
 * the prometheus user) does not send the file elsewhere.
 */
static struct { char dir[256]; int dfd; const char *pin_dir; struct sp_watch *w; } tf = { .dfd = -1 };

#define TEXTFILE "stackpilot.prom"

/*
 * A temp file in DIR, then rename: node_exporter reads either the old file
 * or the new one, never half of one. The temp name does not end in .prom,
 * so the textfile collector skips it.
 */
static void textfile_write(void *ctx)
{
	char tmp[64];
	FILE *f;
	int fd, bad;

	(void)ctx;
	snprintf(tmp, sizeof(tmp), "." TEXTFILE ".%d", (int)getpid());
	unlinkat(tf.dfd, tmp, 0);
	fd = openat(tf.dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		sp_log(SP_LOG_WARN, "--metrics-textfile %s: %s", tf.dir, strerror(errno));
		return;
	}
	fchmod(fd, 0644);	/* node_exporter runs as its own user */
	if (!(f = fdopen(fd, "w"))) {
		close(fd);
		unlinkat(tf.dfd, tmp, 0);
		return;
	}
	sp_prom_write(tf.pin_dir, f);
	bad = ferror(f);
	if (fclose(f) || bad || renameat(tf.dfd, tmp, tf.dfd, TEXTFILE)) {
		sp_log(SP_LOG_WARN, "--metrics-textfile %s/" TEXTFILE ": cannot write: %s", tf.dir,
		       strerror(errno));
		unlinkat(tf.dfd, tmp, 0);
	}
}

/*
 * Where a root process writes a file that node_exporter serves: a folder
 * of root's (or ours) that nobody else can write, or another user could
 * put their own metrics in our name, or have us replace a file of theirs.
 */
static int textfile_folder_ok(const char *dir, const struct stat *st)
{
	if (!S_ISDIR(st->st_mode))
		return sp_err("--metrics-textfile %s: not a folder", dir);
	if ((st->st_uid && st->st_uid != geteuid()) || (st->st_mode & S_IWOTH) ||
	    ((st->st_mode & S_IWGRP) && st->st_gid))
		return sp_err("--metrics-textfile %s: owned by uid %u, mode %04o: must belong to root "
			      "(or uid %u) and be writable by nobody else: refusing it", dir, st->st_uid,
			      st->st_mode & 07777, geteuid());
	return 0;
}

int sp_prom_textfile_check(const char *dir)
{
	struct stat st;

	if (dir[0] != '/' || strlen(dir) >= sizeof(tf.dir) || stat(dir, &st) || !S_ISDIR(st.st_mode))
		return sp_fail(2, "--metrics-textfile %s: expected an existing folder, by its absolute path",
			       dir);
	return textfile_folder_ok(dir, &st) ? 1 : 0;
}

/* "promfile DIR" of a killed run: its metrics would look current for good. */
static int undo_textfile(const char *dir)
{
	char path[320];

	if ((size_t)snprintf(path, sizeof(path), "%s/" TEXTFILE, dir) >= sizeof(path))
		return -EINVAL;
	return unlink(path) ? -errno : 0;
}

static const struct sp_state_undo textfile_undo = { .kind = "promfile", .undo = undo_textfile };

__attribute__((constructor)) static void register_undo(void)
{
	sp_state_undo_register(&textfile_undo);
}

int sp_prom_textfile_start(const char *dir, const char *pin_dir, unsigned int every_s)
{
	struct stat st;

	snprintf(tf.dir, sizeof(tf.dir), "%s", dir);
	tf.pin_dir = pin_dir;
	tf.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tf.dfd < 0)
		return sp_err("--metrics-textfile %s: %s", dir, strerror(errno));
	/* The folder opened is the one checked, whatever happened to the path since. */
	if (fstat(tf.dfd, &st) || textfile_folder_ok(dir, &st) ||
	    sp_state_add("promfile %s", tf.dir)) {
		close(tf.dfd);
		tf.dfd = -1;
		return -1;
	}
	/* At once, so the file is there as soon as the run is attached. */
	if (!(tf.w = sp_loop_timer(textfile_write, NULL)) ||
	    sp_timer_arm(tf.w, 0, every_s * 1000))
		return -1;
	return 0;
}

/*
 * A stopped run's metrics would otherwise look current to node_exporter;
 * a killed run's are removed by the next run in the namespace (the
 * "promfile" entry of its state file).
 */
void sp_prom_textfile_stop(void)
{
	if (tf.dfd < 0)
		return;
	sp_loop_unwatch(tf.w);
	tf.w = NULL;
	unlinkat(tf.dfd, TEXTFILE, 0);
	close(tf.dfd);
	tf.dfd = -1;
	sp_state_del("promfile %s", tf.dir);
}

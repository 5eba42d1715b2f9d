// SPDX-License-Identifier: GPL-2.0
/*
 * The status model, read from a run's pins: what `status` prints and what
 * Prometheus scrapes are the same records (core/report.c), filled here
 * and by each module's report(). Another process reads these pins than
 * the one that wrote them, so nothing here holds an instance.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "export/export.h"

/* The layout t_status_hostile_meta writes by hand: grow both together. */
_Static_assert(sizeof(struct sp_meta) == 1600, "struct sp_meta changed: update t_status_hostile_meta");

int sp_instances(const char *pin_dir, char (*names)[256], int max)
{
	struct dirent **e;
	char p[600];
	/* In name order: the same order every time, for people and diffs. */
	int nr = scandir(pin_dir, &e, NULL, alphasort), n = 0;

	for (int i = 0; i < nr; i++) {
		if (n < max && e[i]->d_type == DT_DIR && e[i]->d_name[0] != '.' &&
		    snprintf(p, sizeof(p), "%s/%s/meta", pin_dir, e[i]->d_name) < (int)sizeof(p) &&
		    !access(p, F_OK))
			snprintf(names[n++], 256, "%s", e[i]->d_name);
		free(e[i]);
	}
	if (nr >= 0)
		free(e);
	return n;
}

int sp_status_read_meta(const char *pin_dir, struct sp_meta *meta)
{
	__u32 zero = 0;
	int fd = sp_open_pinned(pin_dir, "meta"), err;

	if (fd < 0)
		return -1;
	err = sp_map_lookup_sized(fd, &zero, meta, sizeof(*meta));
	close(fd);
	if (err)
		return sp_err("%s/meta: %s", pin_dir, err == -EMSGSIZE ?
			      "not a stackpilot meta map (value size differs)" : strerror(-err));
	return 0;
}

static const struct sp_field prog_cols[] = {
	{ "id", SP_GAUGE, false, "", "the kernel's program id (an identifier)" },
	{ "name", SP_STRING, false, "", "program name" },
	{ "module", SP_STRING, false, "", "the module it belongs to" },
	{ "run_cnt", SP_COUNTER, false, "", "runs counted while BPF stats were on (--bpf-stats)" },
	{ "run_time_ns", SP_COUNTER, false, "ns", "time spent in the program" },
	{ "avg_ns", SP_GAUGE, true, "ns", "average time per run" },
};

/* The attached programs' kernel stats, as a table of rep. */
void sp_status_progs(const struct sp_meta *meta, struct sp_report *rep)
{
	struct sp_table *t = sp_table_add(rep, "programs", "attached BPF programs",
					  prog_cols, sizeof(prog_cols) / sizeof(prog_cols[0]));

	for (__u32 i = 0; i < meta->nr_progs && i < SP_MAX_PROGS; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(meta->prog_ids[i]);
		struct sp_val *row;

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		close(fd);
		if (!(row = sp_table_row(t)))
			break;
		row[0].i = info.id;
		/* The full name the run recorded: the kernel keeps 15 characters. */
		if (meta->prog_name[i][0])
			snprintf(row[1].s, sizeof(row[1].s), "%.*s", (int)sizeof(meta->prog_name[i]),
				 meta->prog_name[i]);
		else
			snprintf(row[1].s, sizeof(row[1].s), "%.*s", (int)sizeof(info.name), info.name);
		snprintf(row[2].s, sizeof(row[2].s), "%.*s", (int)sizeof(meta->prog_module[i]),
			 meta->prog_module[i]);
		row[3].u = info.run_cnt;
		row[4].u = info.run_time_ns;
		row[5].d = info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0;
	}
}

/*
 * A module's records: its tunables first (group "cfg"; false when its
 * config pin is missing), its counters, then what its report() adds.
 */
bool sp_status_module(const char *pin_dir, const struct sp_module *m, struct sp_report *rep)
{
	unsigned char cfg[SP_CFG_MAX];
	bool have_cfg = !sp_cfg_read(pin_dir, m, cfg);

	sp_report_reset(rep);
	for (int i = 0; have_cfg && i < m->nr_tunables; i++)
		sp_rec_gauge(rep, "cfg", m->tunables[i].name, sp_cfg_get(cfg, &m->tunables[i]), "",
			     m->tunables[i].help);
	if (m->nr_counters)
		sp_report_counters(rep, pin_dir, m->counter_map, m->counters, m->nr_counters);
	if (m->report)
		m->report(pin_dir, rep);
	return have_cfg;
}

static const struct sp_field target_cols[] = {
	{ "kind", SP_STRING, false, "", "cgroup or iface" },
	{ "name", SP_STRING, false, "", "the cgroup's path or the device's name" },
	{ "state", SP_STRING, false, "state", "attached, or gone (removed, or a device deleted)" },
	{ "changes", SP_COUNTER, false, "", "times it went or came back" },
};

/* What the run watches and whether it is there, as a "targets" table of rep. */
void sp_targets_report(const char *pin_dir, struct sp_report *rep)
{
	static const char *const kinds[] = { "cgroup", "iface" }, *const states[] = { "attached", "gone" };
	struct sp_target_rec r;
	struct sp_table *t;
	struct sp_val *row;
	char path[512];
	int fd;

	/* Optional: only a run that watches something pins it. */
	if (sp_pin_path(path, sizeof(path), pin_dir, "targets") || (fd = bpf_obj_get(path)) < 0)
		return;
	t = sp_table_add(rep, "targets", "what the run is attached to",
			 target_cols, sizeof(target_cols) / sizeof(target_cols[0]));
	for (__u32 i = 0; i < SP_TARGET_RECS; i++) {
		if (bpf_map_lookup_elem(fd, &i, &r) || !r.name[0] || r.kind > T_IFACE || r.state > T_GONE)
			continue;
		if (!(row = sp_table_row(t)))
			break;
		snprintf(row[0].s, sizeof(row[0].s), "%s", kinds[r.kind]);
		snprintf(row[1].s, sizeof(row[1].s), "%.*s", (int)sizeof(r.name), r.name);
		snprintf(row[2].s, sizeof(row[2].s), "%s", states[r.state]);
		row[3].u = r.changes;
	}
	close(fd);
}

/* ---- the plain summary -------------------------------------------------- */

void sp_status_summary(const char *pin_dir, const struct sp_module *m, struct sp_report *rep,
		       struct sp_summary *s)
{
	s->n = 0;
	sp_status_module(pin_dir, m, rep);
	if (m->say)
		m->say(rep, s);
}

/* A phrase's number: a count as it is (a rate with a decimal), bytes in B/KiB/MiB/GiB, a percentage. */
static void num_text(const struct sp_phrase *p, double v, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	if (p->flags & SP_SAY_PCT) {
		snprintf(buf, len, "%.1f%%", v);
		return;
	}
	if (!(p->flags & SP_SAY_BYTES)) {
		/* A rate may be a fraction: its first digit or one decimal. */
		snprintf(buf, len, v >= 10 || v == (long long)v ? "%.0f" : v >= 1 ? "%.1f" : "%.1g", v);
		return;
	}
	for (; v >= 1024 && u < 4; u++)
		v /= 1024;
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* The phrase of prev that p continues (the same words), or NULL. */
static const struct sp_phrase *same_phrase(const struct sp_summary *prev, const struct sp_phrase *p)
{
	for (int i = 0; prev && i < prev->n; i++)
		if (prev->p[i].words == p->words)
			return &prev->p[i];
	return NULL;
}

int sp_summary_words(const struct sp_summary *s, const struct sp_summary *prev, double secs,
		     bool warn, char *buf, size_t len)
{
	size_t l = 0;
	int n = 0;

	buf[0] = 0;
	for (int i = 0; i < s->n && l < len; i++) {
		const struct sp_phrase *p = &s->p[i], *q;
		char num[32], words[256];
		double v = p->v;

		if (!(p->flags & SP_SAY_WARN) != !warn)
			continue;
		if (prev) {
			/*
			 * Over the interval: what a counter added, per second;
			 * what holds now is said since start.
			 */
			if (!(p->flags & SP_SAY_COUNTER))
				continue;
			q = same_phrase(prev, p);
			v = q && q->v <= v ? v - q->v : v;
			if (!v)
				continue;
			v /= secs > 0 ? secs : 1;
		}
		num_text(p, v, num, sizeof(num));
		sp_say_words(p->words, num, words, sizeof(words));
		l += snprintf(buf + l, len - l, "%s%s%s", n++ ? ", " : "", words,
			      prev ? "" : p->detail);
	}
	return n;
}

int sp_summary_wrap(FILE *out, const char *head, const char *text, int width, int max_lines)
{
	const int indent = 11;
	int lines = 0;

	while (lines < max_lines) {
		int room = width - indent, n = strlen(text);
		const char *cut;

		fprintf(out, "%-*s", indent, lines ? "" : head);
		if (n <= room) {
			fprintf(out, "%s\n", text);
			return lines + 1;
		}
		/* Break after a ", " that fits; else in the middle. */
		cut = NULL;
		for (const char *c = text; c + 1 - text < room; c++)
			if (c[0] == ',' && c[1] == ' ')
				cut = c + 1;
		if (lines + 1 == max_lines) {
			fprintf(out, "%.*s...\n", room - 3, text);
			return lines + 1;
		}
		if (!cut)
			cut = text + room;
		fprintf(out, "%.*s\n", (int)(cut - text), text);
		text = cut;
		while (*text == ' ')
			text++;
		lines++;
	}
	return lines;
}

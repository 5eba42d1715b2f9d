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
	{ "run_cnt", SP_COUNTER, false, "", "runs since the run enabled BPF stats" },
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
		snprintf(row[1].s, sizeof(row[1].s), "%.*s", (int)sizeof(info.name), info.name);
		row[2].u = info.run_cnt;
		row[3].u = info.run_time_ns;
		row[4].d = info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0;
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
	{ "state", SP_STRING, false, "", "attached, or gone (removed, or a device deleted)" },
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

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * export/: how the outside reads a run: the status model from its pins
 * (status.c), as Prometheus text (prom.c), served or written by a run
 * (metrics.c). Below the service, which starts the exporters, and the
 * commands, which print the model.
 */
#ifndef SP_EXPORT_H
#define SP_EXPORT_H

#include "core/sp.h"

/*
 * prom.c: the status model as Prometheus text (naming rules at its top).
 * sp_prom_write: 0, or 1 when the meta map or a pin could not be read.
 */
int sp_prom_write(const char *pin_dir, FILE *out);
/* The metric a module's counter is exposed as (man pages: doc.c). */
void sp_prom_counter_name(char *buf, size_t len, const char *module, const struct sp_counter *c);
/* run --metrics-textfile DIR: 0, or an exit code after saying why. */
int sp_prom_textfile_check(const char *dir);
/* Write DIR/stackpilot.prom now and every every_s seconds from the loop. */
int sp_prom_textfile_start(const char *dir, const char *pin_dir, unsigned int every_s);
void sp_prom_textfile_stop(void);
/*
 * metrics.c: run's --metrics-textfile ('t'), --metrics-listen ('L') and
 * --metrics-top ('T'). sp_metrics_top: rows of each module's table
 * (destinations, peers) in the metrics, 0 = none; the run publishes it in
 * its meta, so `status --prometheus` renders what the run serves.
 */
#define SP_METRICS_TOP_DEFAULT	20
extern unsigned int sp_metrics_top;
int sp_metrics_opt(int opt, const char *arg);	/* 0, or an exit code after saying why */
int sp_metrics_start(const char *pin_dir, unsigned int interval_s);
void sp_metrics_stop(void);
/*
 * run --bpf-stats ('B', through sp_metrics_opt): the kernel's run counts
 * and times of BPF programs (status' programs table, stackpilot_bpf_program_*
 * metrics). Off unless asked: while on, every BPF program of the host, not
 * only ours, reads the clock twice a run. sp_bpf_stats_open: the fd that
 * keeps them on (the kernel drops them with it), or -1 when not asked or
 * refused (a warning).
 */
int sp_bpf_stats_open(void);
/* status.c: the pieces of `status`, shared by the command and prom.c. */
struct sp_meta;
int sp_status_read_meta(const char *pin_dir, struct sp_meta *meta);
bool sp_status_module(const char *pin_dir, const struct sp_module *m, struct sp_report *rep);
void sp_status_progs(const struct sp_meta *meta, struct sp_report *rep);
/*
 * The plain summary: module m's phrases (its .say) from its records as
 * status reads them (rep is scratch). sp_summary_words writes the phrases
 * of s (warn: only warnings, else only the others) as one text, "a, b";
 * with prev, only what counters added since prev, those that did, per
 * second over secs. It returns how many it wrote. sp_summary_wrap prints head, then text in
 * lines of width at most, at most max_lines (the last cut with "...");
 * it returns the lines printed.
 */
void sp_status_summary(const char *pin_dir, const struct sp_module *m, struct sp_report *rep,
		       struct sp_summary *s);
int sp_summary_words(const struct sp_summary *s, const struct sp_summary *prev, double secs,
		     bool warn, char *buf, size_t len);
int sp_summary_wrap(FILE *out, const char *head, const char *text, int width, int max_lines);
/* The pin folders of a config run's cgroups under pin_dir (those with a meta pin), sorted. */
int sp_instances(const char *pin_dir, char (*names)[256], int max);
/* Each target's state for `status`, as a "targets" table (from the pinned map). */
void sp_targets_report(const char *pin_dir, struct sp_report *rep);
/* The pinned "targets" map that service/targets.c writes: one record a target. */
enum { T_CGROUP, T_IFACE };
enum { T_ATTACHED, T_GONE };
struct sp_target_rec {
	char name[256];
	__u32 kind, state, ifindex, changes;
};
#define SP_TARGET_RECS (1 + SP_MAX_IFACES)	/* the cgroup, then each --iface */

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The core of the loader, below every other layer: what a module is and
 * what a run holds, tunables, errors and logs, pins, the status records.
 * Nothing here names a module or knows who runs them (docs/architecture.md).
 */
#ifndef SP_H
#define SP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
#include "stackpilot.h"

struct bpf_object;
struct bpf_object_open_opts;

/* A tunable is a __u32 field of a module's config struct (stackpilot.h). */
struct sp_tunable {
	const char *name;
	__u32 off;		/* offsetof() in the config struct */
	__u32 min, max;		/* accepted by `set`; the BPF side clamps too */
	__u32 def;
	const char *help;
};

/*
 * One row of a module's loader table, from its X-macro list in stackpilot.h:
 * static const struct sp_tunable t[] = { SP_X_TUNABLES(SP_TUNABLE_ROW, struct sp_x_cfg) };
 */
#define SP_TUNABLE_ROW(cfg_type, name, min, max, def, oor, help) \
	{ #name, offsetof(cfg_type, name), min, max, def, help },
/* The rows of an X-macro list, as a constant: (0 SP_X_TUNABLES(SP_COUNT_ROW, _)). */
#define SP_COUNT_ROW(...) + 1
/* The elements of an array (not a pointer). */
#define SP_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A tunable's value, typed: what MODULE.KEY=VALUE becomes, once. */
struct sp_assign {
	const struct sp_module *m;
	const struct sp_tunable *t;
	__u32 v;
};
/* Why sp_assign_parse() refused an assignment. */
enum sp_assign_err {
	SP_ASSIGN_SYNTAX = 1,	/* no KEY=VALUE */
	SP_ASSIGN_KEY_LONG,
	SP_ASSIGN_NO_DOT,	/* KEY is not MODULE.NAME */
	SP_ASSIGN_MODULE,	/* no such module */
	SP_ASSIGN_TUNABLE,	/* no such tunable */
	SP_ASSIGN_RANGE,	/* VALUE outside the tunable's range */
	SP_ASSIGN_ZEROS,	/* VALUE with leading zeros */
	SP_ASSIGN_NAN,		/* VALUE not a number */
};
#define SP_CFG_MAX 256	/* bytes of a module's config struct, at most */

struct sp_run;
struct sp_report;
struct sp_summary;
struct sp_fit;
struct sp_persister;
struct sp_target_ops;

/*
 * A module runs as instances: start() allocates one and stores it in *inst
 * (as soon as it exists, so that stop() can undo a start that failed half
 * way); stop(), tick() and the module's loop callbacks get it back. Nothing
 * a module changes lives in file-level statics, so one process can later run
 * a module for several cgroups (issue 12).
 *
 * What stays process-wide, on purpose: the event loop (one thread, one
 * epoll: every instance's fds and timers in it, loop.c), the log rate
 * limiters (one stderr), the state file under /run/stackpilot (one per host,
 * entries keyed by pid, state.c), and the tables modules register from
 * constructors (run options, target ops, undo kinds), which are code, the
 * same for every instance.
 */
struct sp_counter;
struct sp_module {
	const char *name;
	const char *summary;
	const char *cfg_map;	/* pin name of the config map */
	__u32 cfg_size;
	const struct sp_tunable *tunables;
	int nr_tunables;
	/*
	 * Its per-CPU counter array, pinned as counter_map: status records
	 * (after the tunables, before what report() adds), Prometheus counters
	 * and the man page's COUNTERS, all from this one table.
	 */
	const char *counter_map;
	const struct sp_counter *counters;
	int nr_counters;
	bool needs_cgroup;	/* attaches sockops to the cgroup */
	bool needs_iface;	/* attaches to --iface devices */
	/* What it needs of the kernel and which mechanism it will use (probe.h). */
	void (*fit)(struct sp_fit *fit);
	/*
	 * Its skeleton's X_bpf__open_opts() (returning the struct X_bpf *).
	 * A module that is a skeleton and at most one sockops program needs
	 * nothing else: the core loads, publishes and attaches it
	 * (sp_module_start()), and takes it down again.
	 */
	void *(*open)(const struct bpf_object_open_opts *opts);
	/* Or its own: open, load, pin maps, attach. Returns 0 or -1 after printing why. */
	int (*start)(struct sp_run *run, void **inst);
	/* Detach and destroy what start() made, and free inst; NULL is fine. */
	void (*stop)(struct sp_run *run, void *inst);
	/* Called every 100 ms while running, if set. */
	void (*tick)(struct sp_run *run, void *inst);
	/*
	 * Status from the pinned maps into records (see struct sp_report),
	 * beyond the counters; NULL: none. `status` is another process, so
	 * no instance here.
	 */
	void (*report)(const char *pin_dir, struct sp_report *rep);
	/*
	 * What it did, in words, from its own records (the ones above, as
	 * `status --json` shows them): phrases with their numbers, which
	 * export/ lays out for `status` and run's live view. NULL: none.
	 */
	void (*say)(const struct sp_report *rep, struct sp_summary *s);
	/* What it saves and restores beyond tunables (core/saved.h), or NULL. */
	const struct sp_persister *persister;
	/* How it follows an --iface that vanishes and comes back, or NULL. */
	const struct sp_target_ops *target_ops;
};

/*
 * What a module's name gives of its declaration: its config map is
 * NAME_cfg (bpf/NAME.bpf.c), holding the config struct that its tunable
 * table describes. A module's struct sp_module starts with this.
 */
#define SP_MODULE(nm, cfg_type, table)						\
	.name = #nm, .cfg_map = #nm "_cfg", .cfg_size = sizeof(cfg_type),	\
	.tunables = table, .nr_tunables = SP_LEN(table)
/* Its counters: the per-CPU array NAME_ctr, an element for each of table. */
#define SP_COUNTERS(nm, table) \
	.counter_map = #nm "_ctr", .counters = table, .nr_counters = SP_LEN(table)

#define SP_MAX_MODULES	16	/* bits of sp_meta.modules that are used */
#define SP_MAX_CGROUPS	64	/* [cgroup] sections of a config file */
/* Cgroup instances of a config run (sections and pattern matches) status reads back. */
#define SP_MAX_INSTANCES 4096
#define SP_MAX_RUN_OPTS	16

/* What one `stackpilot run` holds. */
struct sp_run {
	char pin_dir[256];
	int cgroup_fd;
	char cgroup[256];
	int nr_ifaces;
	int ifindex[SP_MAX_IFACES];
	char ifname[SP_MAX_IFACES][32];
	__u32 modules;			/* bitmask over sp_modules */
	const char *btf_path;		/* --btf, or NULL for the kernel's */
	__u32 nr_progs;
	__u32 prog_ids[SP_MAX_PROGS];	/* attached programs, for status */
	char prog_module[SP_MAX_PROGS][16], prog_name[SP_MAX_PROGS][32];	/* of each */
	void *inst[SP_MAX_MODULES];	/* each started module's instance */
	struct sp_targets *targets;	/* what targets.c watches for this run */
	__u64 started_ns;		/* CLOCK_MONOTONIC, once published */
	__u64 loop_delay_ns, loop_delay_max_ns;	/* published in sp_meta, see there */
	const char *opt_arg[SP_MAX_RUN_OPTS];	/* module run options given, by registration order */
	bool persist;		/* run --persist (config runs: default): save and restore state */
	bool dry_run;		/* run --dry-run: every `enforce` tunable starts at 0 */
	/* If set, changes a module's default tunables before it attaches (a config file's). */
	void (*cfg_init)(struct sp_run *run, const struct sp_module *m, void *cfg);
	void *owner;			/* whoever set cfg_init: a config run's instance */
	/*
	 * If set, called once a module's config map holds its first config
	 * and before its maps are pinned: the service's saved tunables,
	 * --dry-run and saved state. 0, or -1 after saying why.
	 */
	int (*restore)(struct sp_run *run, const struct sp_module *m, int cfg_fd);
	bool keep_pin_dir;		/* detach leaves pin_dir (it holds other runs' folders) */
	struct sp_chain *chain;		/* its one sockops program and the modules behind it (chain.c) */
};

/* log.c: errors are log lines too, at the bottom of every layer. */
int sp_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * While set, sp_err() starts its line with "WHERE: " (a config file's
 * FILE:LINE, so that every check reused from the command line names it).
 */
extern const char *sp_err_where;
/* While set, sp_err() keeps its first line here instead of printing (a reload's one log line). */
extern char *sp_err_capture;
extern size_t sp_err_capture_len;
/* sp_err(), then return the exit code. */
#define sp_fail(code, ...) (sp_err(__VA_ARGS__), (code))

/* util.c */
int sp_parse_u32(const char *s, __u32 min, __u32 max, __u32 *out);
/*
 * The next line of f in buf, without its newline: its length, or one of
 * these, the whole line read either way. fgets() cannot tell a NUL byte
 * from the end of the string: a line with one looked like a line too long
 * for the buffer, and the "rest" skipped was the next line.
 */
enum { SP_LINE_EOF = -1, SP_LINE_LONG = -2 /* over size - 1 bytes */, SP_LINE_NUL = -3 };
int sp_read_line(FILE *f, char *buf, size_t size);
int sp_check_privileges(void);
int sp_check_btf(const char *btf_path);
int sp_trusted_path(const char *path);
int sp_trusted_file(const char *path, const char *what);
int sp_private_dir(const char *path, bool create);
int sp_lock_targets(struct sp_run *run);
void sp_unlock_targets(const struct sp_run *run);
int sp_ensure_bpffs(const char *pin_dir);
int sp_check_pin_path(const char *pin_dir);
int sp_cgroup2_mount(char *buf, size_t len);
int sp_cgroup2_find(char *buf, size_t len);	/* the same, read only: mounts nothing */
extern bool sp_mounted_bpffs, sp_mounted_cgroup2;
void sp_unmount_ours(void);
int sp_resolve_cgroup(const char *arg, char *out, size_t len);
int sp_pin_path(char *buf, size_t len, const char *pin_dir, const char *name);
int sp_sum_percpu(int map_fd, __u32 key, __u64 *sum);
int sp_open_pinned(const char *pin_dir, const char *name);
extern int sp_pin_errors;	/* sp_open_pinned() failures, for status's exit code */
int sp_map_lookup_sized(int fd, const void *key, void *val, __u32 size);
struct bpf_program;
/* An attached program of a module (or of "chain", sp_sockops), for status and metrics. */
void sp_run_add_prog(struct sp_run *run, const char *module, const struct bpf_program *prog);

/*
 * The one place a tunable's value goes into a module's config (defaults,
 * a config file, `set`, saved state, --dry-run, a clamp), and comes out.
 */
void sp_cfg_apply(void *cfg, const struct sp_tunable *t, __u32 v);
__u32 sp_cfg_get(const void *cfg, const struct sp_tunable *t);
int sp_cfg_write_initial(struct sp_run *run, const struct sp_module *m, int map_fd);
int sp_cfg_read(const char *pin_dir, const struct sp_module *m, void *cfg);
int sp_cfg_write(const char *pin_dir, const struct sp_module *m, const void *cfg);
int sp_pin_obj_maps(struct bpf_object *obj, const char *pin_dir);
void sp_unpin_obj_maps(struct bpf_object *obj, const char *pin_dir);
struct bpf_program;
struct bpf_link;
int sp_module_publish(struct sp_run *run, const struct sp_module *m,
		      struct bpf_object *obj, struct bpf_program *sockops);
void sp_module_unpublish(struct sp_run *run, struct bpf_object *obj);
/* m's start() or the core's for a module that only declares .open; 0 or -1. */
int sp_module_start(struct sp_run *run, const struct sp_module *m, void **inst);
void sp_module_stop(struct sp_run *run, const struct sp_module *m, void *inst);
/* For a module's own start(): a zeroed instance of size in *inst, or NULL after saying why. */
void *sp_module_inst(const struct sp_module *m, size_t size, void **inst);
/* The map of bpf/rttcb.bpf.h, shared by every module object of the process. */
#define SP_RTTCB_MAP "sp_rttcb"
/* Load an opened skeleton (its struct X_bpf *) into run, or say why not; 0 or -1. */
int sp_skel_load(struct sp_run *run, const struct sp_module *m, void *skel);
/* Each of progs attached by its own kind (fentry, tp_btf), into links[]; 0 or -1. */
int sp_attach_progs(struct sp_run *run, const struct sp_module *m, struct bpf_program **progs,
		    int n, struct bpf_link **links);

/*
 * chain.c: the run's one sockops program and its modules behind it
 * (bpf/chain.bpf.h). join: before m's object loads, if it has a sockops
 * program (its slot, the shared map); add: its program into its slot;
 * attach: the chain onto the cgroup, once every module started (none
 * joined: nothing); stop: off the cgroup and gone. 0 or -1 after saying why.
 */
#define SP_CHAIN_MAP "sp_chain"
struct sp_chain;
int sp_chain_join(struct sp_run *run, const struct sp_module *m, struct bpf_object *obj);
int sp_chain_add(struct sp_run *run, const struct sp_module *m, struct bpf_program *prog);
int sp_chain_attach(struct sp_run *run);
void sp_chain_stop(struct sp_run *run);

/* json.c: commas are placed by the writer, never by hand. */
struct sp_json {
	FILE *out;
	int depth;
	__u32 nonempty;		/* bit d: the container at depth d has an element */
	bool after_key;
};
void sp_json_init(struct sp_json *j, FILE *out);
void sp_json_begin_object(struct sp_json *j);
void sp_json_end_object(struct sp_json *j);
void sp_json_begin_array(struct sp_json *j);
void sp_json_end_array(struct sp_json *j);
void sp_json_key(struct sp_json *j, const char *key);
void sp_json_str(struct sp_json *j, const char *s);
void sp_json_strn(struct sp_json *j, const char *s, size_t max);
void sp_json_u64(struct sp_json *j, unsigned long long v);
void sp_json_s64(struct sp_json *j, long long v);
void sp_json_double(struct sp_json *j, double v);
void sp_json_bool(struct sp_json *j, bool v);
void sp_json_null(struct sp_json *j);

/*
 * report.c: one status model, rendered as text and JSON by `status` (and
 * as Prometheus metrics, issue 13). A module's report() adds records (named
 * values with a type and a unit; consecutive records of one group form a
 * nested object) and tables (rows of such values: top-N lists). Names are
 * JSON member names and stay stable: scripts read them.
 */
enum sp_rec_type {
	SP_COUNTER,	/* only grows while the run lives (u) */
	SP_GAUGE,	/* goes up and down (i, or d when real) */
	SP_STRING,	/* s */
	SP_BOOL,	/* b */
};
struct sp_field {
	const char *key;
	enum sp_rec_type type;
	bool real;		/* a gauge with a fraction: d */
	/*
	 * "bytes", "seconds", "ns", "" for a plain count, or "ratio" for a
	 * quotient of two counters shown for people (Prometheus computes it
	 * from the counters, so prom.c leaves it out); a string column of a
	 * table: "state" when it is a state of the row, not its name (prom.c
	 * makes no label of it on the row's counters)
	 */
	const char *unit;
	const char *help;
};
struct sp_val {
	unsigned long long u;
	long long i;
	double d;
	bool b;
	char s[256];		/* a cgroup path fits (sp_meta.cgroup) */
};
struct sp_rec {
	struct sp_field f;
	const char *group;	/* NULL, or the nested object it is a member of */
	struct sp_val v;
};
#define SP_TABLE_COLS	12
#define SP_TABLE_ROWS	100	/* pmtu has always shown at most 100 destinations */
struct sp_table {
	const char *key;
	const char *help;
	const struct sp_field *cols;	/* a constant array of nr_cols */
	int nr_cols, nr_rows;
	bool no_prom;		/* rows without a stable identity: not for Prometheus */
	struct sp_val rows[SP_TABLE_ROWS][SP_TABLE_COLS];
};
#define SP_REPORT_RECS	64
#define SP_REPORT_TABLES 4
struct sp_report {
	int nr_recs, nr_tables;
	struct sp_rec recs[SP_REPORT_RECS];
	struct sp_table tables[SP_REPORT_TABLES];
	struct sp_val spill;	/* what records past SP_REPORT_RECS are written to */
	int spilled;
};
/* Empty r for the next report: a report is big (top-N tables), so it is reused. */
void sp_report_reset(struct sp_report *r);
/* The value to fill in (a scratch one when the report is full, said once on stderr). */
struct sp_val *sp_rec_add(struct sp_report *r, const char *group, const struct sp_field *f);
void sp_rec_counter(struct sp_report *r, const char *group, const char *key,
		    unsigned long long v, const char *unit, const char *help);
void sp_rec_gauge(struct sp_report *r, const char *group, const char *key,
		  long long v, const char *unit, const char *help);
/* A table with constant columns; rows are added with sp_table_row(). */
struct sp_table *sp_table_add(struct sp_report *r, const char *key, const char *help,
			      const struct sp_field *cols, int nr_cols);
/* The cells of a new row, or NULL when the table is full. */
struct sp_val *sp_table_row(struct sp_table *t);
/* One element of a module's per-CPU counter array: its record's key, help, unit (NULL: a count). */
struct sp_counter { const char *name, *help, *unit; };
/* A pinned per-CPU counter array, summed over CPUs, as counter records. */
void sp_report_counters(struct sp_report *r, const char *pin_dir, const char *map,
			const struct sp_counter *c, int n);
/* The record group.key (group NULL: top level), or NULL. */
const struct sp_rec *sp_rec_find(const struct sp_report *r, const char *group, const char *key);
/* Its value as a number (a counter, gauge or bool); 0 when there is no such record. */
double sp_rec_num(const struct sp_report *r, const char *group, const char *key);
/* The table key, or NULL; the index of its column key, or -1. */
const struct sp_table *sp_table_find(const struct sp_report *r, const char *key);
int sp_table_col(const struct sp_table *t, const char *key);

/*
 * A module's plain summary (its .say): phrases, each a number and the
 * words around it ("moved flows %s times"). Only numbers and words: how
 * they are laid out (a status line, a screen, a rate over the last
 * interval) is export/'s, so a module knows no output format.
 */
enum {
	SP_SAY_COUNTER = 1,	/* grows while the run lives: a live view shows its change */
	SP_SAY_WARN = 2,	/* something to act on: shown as a warning */
	SP_SAY_BYTES = 4,	/* v is bytes: shown as B, KiB, MiB */
	SP_SAY_PCT = 8,		/* v is a percentage: shown with a fraction and % */
};
#define SP_SAY_MAX	10
struct sp_phrase {
	const char *words;	/* one %s, the number; {one|many}: sp_say_words() */
	double v;
	unsigned int flags;	/* SP_SAY_* */
	char detail[160];	/* after the words (e.g. which paths), or "" */
};
struct sp_summary {
	int n;
	struct sp_phrase p[SP_SAY_MAX];
};
/* Add a phrase (past SP_SAY_MAX: dropped); returns it, or NULL. */
struct sp_phrase *sp_say(struct sp_summary *s, unsigned int flags, double v, const char *words);
/* The same of r's top-level record key; a warning (SP_SAY_WARN) only when it is not 0. */
struct sp_phrase *sp_say_rec(struct sp_summary *s, unsigned int flags, const struct sp_report *r,
			     const char *key, const char *words);

/*
 * A phrase's words as text in buf, its number written as num: the %s is
 * num, each {one|many} is one when num reads "1", else many ("%s
 * {path|paths}": "1 path", "2 paths", "0.5 paths"). Every module's
 * singular and plural go through it. Returns the length, as snprintf.
 */
int sp_say_words(const char *words, const char *num, char *buf, size_t len);

/* Text: one line per record, then each table with a header line. */
void sp_report_text(const struct sp_report *r, FILE *out, const char *indent);
/* JSON: members of the object j is in (groups as nested objects), then tables as arrays. */
void sp_report_json(const struct sp_report *r, struct sp_json *j);

/* ---- loader core v2 (issue 9): log levels, module run options, signals ---- */
enum { SP_LOG_ERROR, SP_LOG_WARN, SP_LOG_INFO, SP_LOG_DEBUG };
#define SP_LOG_BURST 5		/* lines per second per call site, as a token bucket */
struct sp_ratelimit { long long last_ns; double tokens; unsigned int suppressed; bool primed; };
extern int sp_log_level;
void sp_log_at(struct sp_ratelimit *rl, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * One rate limiter per call site, static on purpose even in module code: it
 * limits what the process writes to its one stderr, whichever instance logs.
 */
#define sp_log(level, ...) do {						\
	static struct sp_ratelimit sp_rl_;				\
	sp_log_at(&sp_rl_, (level), __VA_ARGS__);			\
} while (0)

/* An option of `run` that belongs to one module (e.g. pmtu's --mtu-probing). */
struct sp_run_opt {
	const struct sp_module *module;
	const char *name;	/* without the leading -- */
	const char *arg;	/* argument name in the usage text */
	const char *help;
	/* Checks arg at parse time: 0, or an exit code after printing why. */
	int (*check)(const char *arg);
};
/* The argument of opt given to this run, or NULL; read by the module's start(). */
const char *sp_run_opt_arg(const struct sp_run *run, const struct sp_run_opt *opt);
/* From a module's constructor, before main(). */
void sp_run_opt_register(const struct sp_run_opt *opt);
/* What was registered, in order: `run` parses these (core/module.c). */
extern const struct sp_run_opt *sp_run_opts[SP_MAX_RUN_OPTS];
extern int sp_nr_run_opts;

/* Targets that vanish and come back (targets.c). Modules react through ops. */
struct sp_target_ops {
	void (*iface_gone)(struct sp_run *run, void *inst, int i);
	/* run->ifindex[i] is already the new device's; 0 or -1 after logging why. */
	int (*iface_back)(struct sp_run *run, void *inst, int i, int old_ifindex);
};

#endif /* SP_H */

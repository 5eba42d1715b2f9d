// SPDX-License-Identifier: GPL-2.0
/* status, get, set: talk to a running `stackpilot run` through its pins. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "service/config.h"
#include "service/persist.h"
#include "export/export.h"
#include "cli/cli.h"

/* status --prometheus, --all; set --persist (1) / --no-persist (-1). parse_common() sets them. */
static bool want_prom, want_all;
static int want_persist;
static void usage_set(FILE *out);

/* --cgroup PATH of a config run: its instance's pin folder below --pin-path. */
static int with_cgroup(char *pin_dir, size_t len, const char *cgroup)
{
	char name[256];
	size_t l = strlen(pin_dir);

	if (!cgroup)
		return 0;
	if (sp_cgroup_arg_name(cgroup, name, sizeof(name)))
		return -1;
	if (snprintf(pin_dir + l, len - l, "/%s", name) >= (int)(len - l))
		return sp_err("--cgroup %s: pin folder name too long", cgroup);
	return 0;
}

/*
 * get/set without --cgroup on a config run whose module m runs per cgroup:
 * say which to pick. 0 when there is nothing to pick from.
 */
static int pick_cgroup(const char *pin_dir, const struct sp_module *m)
{
	char (*names)[256] = malloc(SP_MAX_INSTANCES * sizeof(*names)), list[512] = "", path[512];
	int n = names ? sp_instances(pin_dir, names, SP_MAX_INSTANCES) : 0;
	size_t l = 0;

	if (!n || (m && !sp_pin_path(path, sizeof(path), pin_dir, m->cfg_map) && !access(path, F_OK))) {
		free(names);
		return 0;
	}
	for (int i = 0; i < n && l < sizeof(list); i++) {
		char dir[600];
		struct sp_meta meta;

		if (!sp_pin_path(dir, sizeof(dir), pin_dir, names[i]) && !sp_status_read_meta(dir, &meta))
			l += snprintf(list + l, sizeof(list) - l, "%s%.*s", i ? ", " : "",
				      (int)sizeof(meta.cgroup), meta.cgroup);
	}
	free(names);
	return sp_err("%s runs %s%sper cgroup: pick one with --cgroup PATH (%s)", pin_dir,
		      m ? m->name : "", m ? " " : "its modules ", list);
}

/* Shared option parsing: --pin-path, --cgroup and (status only) --json, --prometheus. */
static int parse_common(int argc, char **argv, char *pin_dir, size_t len,
			bool *json, void (*usage)(FILE *))
{
	static const struct option opts[] = {
		{ "pin-path", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "all", no_argument, NULL, 'a' },
		{ "persist", no_argument, NULL, 'S' },
		{ "no-persist", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ "cgroup", required_argument, NULL, 'c' },
		{},
	};
	const char *cgroup = NULL;
	int opt;

	snprintf(pin_dir, len, "%s", SP_PIN_DEFAULT);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (optarg[0] != '/' || strlen(optarg) >= len)
				return sp_fail(2, "--pin-path %s: must be an absolute path", optarg);
			snprintf(pin_dir, len, "%s", optarg);
			break;
		case 'j':
			if (!json)
				return sp_fail(2, "--json is only for status");
			*json = true;
			break;
		case 'P':
			if (!json)
				return sp_fail(2, "--prometheus is only for status");
			want_prom = true;
			break;
		case 'a':
			if (!json)
				return sp_fail(2, "--all is only for status");
			want_all = true;
			break;
		case 'c': cgroup = optarg; break;
		case 'S': case 'N':
			if (usage != usage_set)
				return sp_fail(2, "--persist and --no-persist are only for set");
			want_persist = opt == 'S' ? 1 : -1;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	return with_cgroup(pin_dir, len, cgroup) ? 2 : -1;	/* -1: go on */
}

static void module_json(const char *pin_dir, const struct sp_module *m, struct sp_json *j,
			struct sp_report *rep)
{
	bool have_cfg = sp_status_module(pin_dir, m, rep);

	sp_json_key(j, m->name);
	sp_json_begin_object(j);
	/* "cfg" is always there, first: null when the module's config pin is missing. */
	if (!have_cfg)
		sp_json_key(j, "cfg"), sp_json_null(j);
	else if (!m->nr_tunables)
		sp_json_key(j, "cfg"), sp_json_begin_object(j), sp_json_end_object(j);
	sp_report_json(rep, j);
	sp_json_end_object(j);
}

/*
 * --iface i of the run, by the name it was given (not by its index: status
 * may run in another network namespace), "NAME (gone)" while deleted.
 */
static void iface_name(const struct sp_meta *meta, __u32 i, char *buf, size_t len)
{
	snprintf(buf, len, "%.*s%s", (int)sizeof(meta->ifname[i]), meta->ifname[i],
		 meta->ifindex[i] ? "" : " (gone)");
}

/* The version of the JSON layout: raised when a member changes meaning or goes. */
#define SP_STATUS_SCHEMA 1

static void status_json(struct sp_json *jp, const char *pin_dir, const struct sp_meta *meta,
			bool alive, unsigned long long up, struct sp_report *rep)
{
#define j (*jp)
	sp_json_begin_object(&j);
	sp_json_key(&j, "schema"), sp_json_u64(&j, SP_STATUS_SCHEMA);
	sp_json_key(&j, "pid"), sp_json_u64(&j, meta->pid);
	sp_json_key(&j, "alive"), sp_json_bool(&j, alive);
	sp_json_key(&j, "uptime_s"), sp_json_u64(&j, up);
	sp_json_key(&j, "loop_delay_us"), sp_json_u64(&j, meta->loop_delay_ns / 1000);
	sp_json_key(&j, "loop_delay_max_us"), sp_json_u64(&j, meta->loop_delay_max_ns / 1000);
	sp_json_key(&j, "pin_path"), sp_json_str(&j, pin_dir);
	sp_json_key(&j, "cgroup"), sp_json_strn(&j, meta->cgroup, sizeof(meta->cgroup));
	sp_json_key(&j, "ifaces");
	sp_json_begin_array(&j);
	for (__u32 i = 0; i < meta->nr_ifaces && i < SP_MAX_IFACES; i++) {
		char name[32];

		iface_name(meta, i, name, sizeof(name));
		sp_json_str(&j, name);
	}
	sp_json_end_array(&j);
	sp_json_key(&j, "modules");
	sp_json_begin_object(&j);
	for (int i = 0; i < sp_nr_modules; i++)
		if (meta->modules & (1u << i))
			module_json(pin_dir, sp_modules[i], &j, rep);
	sp_json_end_object(&j);
	sp_report_reset(rep);
	sp_persist_report(pin_dir, meta, rep);
	sp_targets_report(pin_dir, rep);
	sp_status_progs(meta, rep);
	sp_report_json(rep, &j);
	sp_json_end_object(&j);
#undef j
}

static void status_text(const char *pin_dir, const struct sp_meta *meta, bool alive,
			unsigned long long up, struct sp_report *rep)
{
	printf("stackpilot pid %u%s, up %llu s, pins %s\n", meta->pid,
	       alive ? "" : " (not running: stale pins)", up, pin_dir);
	printf("event loop late by at most %.1f ms in the last second, %.1f ms since start\n",
	       meta->loop_delay_ns / 1e6, meta->loop_delay_max_ns / 1e6);
	if (meta->cgroup[0])
		printf("cgroup %.*s\n", (int)sizeof(meta->cgroup), meta->cgroup);
	for (__u32 i = 0; i < meta->nr_ifaces && i < SP_MAX_IFACES; i++) {
		char name[32];

		iface_name(meta, i, name, sizeof(name));
		printf("%s%s", i ? "," : "iface ", name);
	}
	if (meta->nr_ifaces)
		printf("\n");
	for (int i = 0; i < sp_nr_modules; i++) {
		if (!(meta->modules & (1u << i)))
			continue;
		printf("%s:\n", sp_modules[i]->name);
		sp_status_module(pin_dir, sp_modules[i], rep);
		sp_report_text(rep, stdout, "  ");
	}
	sp_report_reset(rep);
	sp_persist_report(pin_dir, meta, rep);
	sp_targets_report(pin_dir, rep);
	sp_status_progs(meta, rep);
	sp_report_text(rep, stdout, "");
}

/*
 * The plain summary of one instance: what is attached where, a line or
 * two of words a module (its .say, laid out by export/), and warnings.
 * With live: also what the counters added since the last call (run's
 * live view), a module in at most two lines; live keeps the values.
 */
static void status_plain(const char *pin_dir, const struct sp_meta *meta, bool alive,
			 unsigned long long up, struct sp_report *rep, FILE *out,
			 struct sp_live *live)
{
	/* A status is read whole; a screen gives a module two lines and a warning one. */
	int width = live ? live->width : 80, lines = live ? 2 : 100;
	char text[1024], head[24];
	struct sp_summary s;
	const struct sp_table *t;
	int name, state, kind;

	fprintf(out, "stackpilot pid %u%s, up %llu s", meta->pid,
		alive ? "" : " (not running: stale pins)", up);
	if (meta->cgroup[0])
		fprintf(out, ", cgroup %.*s", (int)sizeof(meta->cgroup), meta->cgroup);
	for (__u32 i = 0; i < meta->nr_ifaces && i < SP_MAX_IFACES; i++) {
		char name[32];

		iface_name(meta, i, name, sizeof(name));
		fprintf(out, "%s%s", i ? "," : ", iface ", name);
	}
	fputc('\n', out);
	if (meta->flags & SP_META_DRY_RUN)
		fprintf(out, "dry run: counting, not acting; to act: stackpilot set MODULE.enforce=1\n");
	for (int i = 0; i < sp_nr_modules; i++) {
		const struct sp_module *m = sp_modules[i];

		if (!(meta->modules & (1u << i)))
			continue;
		sp_status_summary(pin_dir, m, rep, &s);
		if (!sp_summary_words(&s, NULL, 0, false, text, sizeof(text)))
			snprintf(text, sizeof(text), "attached");
		sp_summary_wrap(out, m->name, text, width, lines);
		if (live && live->have) {
			snprintf(head, sizeof(head), "last %.0f s, per s:", live->secs);
			if (!sp_summary_words(&s, &live->prev[i], live->secs, false,
					      text + strlen(head) + 1, sizeof(text) - strlen(head) - 1))
				snprintf(text + strlen(head) + 1, sizeof(text) - strlen(head) - 1,
					 "nothing new");
			memcpy(text, head, strlen(head));
			text[strlen(head)] = ' ';
			sp_summary_wrap(out, "", text, width, 1);
		}
		if (sp_summary_words(&s, NULL, 0, true, text, sizeof(text))) {
			snprintf(head, sizeof(head), "warning:");
			sp_summary_wrap(out, head, text, width, live ? 1 : lines);
		}
		if (live)
			live->prev[i] = s;
	}
	/* Targets that went: the run follows them back, but nothing acts there meanwhile. */
	sp_report_reset(rep);
	sp_targets_report(pin_dir, rep);
	t = sp_table_find(rep, "targets");
	kind = sp_table_col(t, "kind"), name = sp_table_col(t, "name"), state = sp_table_col(t, "state");
	for (int r = 0; t && kind >= 0 && name >= 0 && state >= 0 && r < t->nr_rows; r++)
		if (strcmp(t->rows[r][state].s, "attached"))
			fprintf(out, "warning:   %s %s is %s: nothing acts there until it is back\n",
				t->rows[r][kind].s, t->rows[r][name].s, t->rows[r][state].s);
	if (live)
		live->have = true;
}

static void usage_status(FILE *out)
{
	fprintf(out,
"Usage: stackpilot status [--all | --json | --prometheus] [--pin-path DIR]\n"
"                         [--cgroup PATH]\n"
"What the running stackpilot attached where, and what each module did, in\n"
"words; warnings (a target gone, a map full).\n"
"--all: every counter of each module, and each program's run count and average\n"
"run time (kernel BPF stats, enabled by `run`).\n"
"--json: what --all shows, for scripts.\n"
"--prometheus: the same as Prometheus text exposition (docs/metrics.md).\n"
"A config run (run --config) has one instance per cgroup: all are shown, or the\n"
"one of --cgroup PATH (as written in the file).\n");
}

/* One instance's status; 0, or 1 when its meta cannot be read. */
static int status_one(const char *pin_dir, struct sp_json *j, struct sp_report *rep,
		      FILE *out, struct sp_live *live)
{
	struct sp_meta meta;
	struct timespec ts;
	unsigned long long up;
	bool alive;

	if (sp_status_read_meta(pin_dir, &meta))
		return 1;
	alive = !kill(meta.pid, 0);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	up = ts.tv_sec - meta.started_ns / 1000000000ULL;
	if (j)
		status_json(j, pin_dir, &meta, alive, up, rep);
	else if (want_all)
		status_text(pin_dir, &meta, alive, up, rep);
	else
		status_plain(pin_dir, &meta, alive, up, rep, out, live);
	return 0;
}

int cmd_status(int argc, char **argv)
{
	char pin_dir[256], (*names)[256], dir[600];
	struct sp_report *rep;
	struct sp_json j;
	bool json = false;
	int rc = parse_common(argc, argv, pin_dir, sizeof(pin_dir), &json, usage_status), n;

	if (rc >= 0)
		return rc;
	if (optind < argc)
		return sp_fail(2, "status: unexpected argument '%s'", argv[optind]);
	if (want_prom + json + want_all > 1)
		return sp_fail(2, "status: one of --all, --json and --prometheus");
	if (want_prom)
		return sp_prom_write(pin_dir, stdout);
	sp_pin_errors = 0;
	/* A report holds top-N tables: too big for the stack of a status every interval. */
	rep = malloc(sizeof(*rep));
	names = malloc(SP_MAX_INSTANCES * sizeof(*names));
	if (!rep || !names) {
		free(rep), free(names);
		return sp_fail(1, "status: %s", strerror(ENOMEM));
	}
	sp_json_init(&j, stdout);
	/* A config run: its interfaces' instance (if any) and each cgroup's. */
	n = sp_instances(pin_dir, names, SP_MAX_INSTANCES);
	snprintf(dir, sizeof(dir), "%s/meta", pin_dir);
	if (!n && access(dir, F_OK) && !access(pin_dir, F_OK)) {
		free(rep), free(names);
		return sp_fail(1, "%s: nothing attached (a `run --config` whose cgroups do not exist yet "
			       "has no pins until one does)", pin_dir);
	}
	if (!n) {
		rc = status_one(pin_dir, json ? &j : NULL, rep, stdout, NULL);
	} else {
		if (json) {
			sp_json_begin_object(&j);
			sp_json_key(&j, "schema"), sp_json_u64(&j, SP_STATUS_SCHEMA);
			sp_json_key(&j, "pin_path"), sp_json_str(&j, pin_dir);
			sp_json_key(&j, "instances");
			sp_json_begin_array(&j);
		}
		rc = !access(dir, F_OK) && status_one(pin_dir, json ? &j : NULL, rep, stdout, NULL);
		for (int i = 0; i < n; i++) {
			rc |= sp_pin_path(dir, sizeof(dir), pin_dir, names[i]) ? 1 :
			      status_one(dir, json ? &j : NULL, rep, stdout, NULL);
		}
		if (json)
			sp_json_end_array(&j), sp_json_end_object(&j);
	}
	if (json)
		putchar('\n');
	free(rep), free(names);
	/* Output stays well-formed, but a missing pin is a failure to report. */
	return rc || sp_pin_errors ? 1 : 0;
}

int sp_status_live(const char *pin_dir, FILE *out, struct sp_live *live)
{
	static char names[SP_MAX_INSTANCES][256];
	char dir[600];
	struct sp_report *rep = malloc(sizeof(*rep));
	int n = sp_instances(pin_dir, names, SP_MAX_INSTANCES), rc = 0;

	if (!rep)
		return 1;
	want_all = false;
	snprintf(dir, sizeof(dir), "%s/meta", pin_dir);
	if (!access(dir, F_OK))
		rc = status_one(pin_dir, NULL, rep, out, n ? NULL : live);
	/* A config run's instances: since start only (live keeps one instance's values). */
	for (int i = 0; i < n; i++)
		rc |= sp_pin_path(dir, sizeof(dir), pin_dir, names[i]) ? 1 :
		      status_one(dir, NULL, rep, out, NULL);
	free(rep);
	return rc;
}

static void list_tunables(FILE *out)
{
	for (int i = 0; i < sp_nr_modules; i++)
		for (int j = 0; j < sp_modules[i]->nr_tunables; j++) {
			const struct sp_tunable *t = &sp_modules[i]->tunables[j];

			fprintf(out, "  %s.%-16s [%u, %u] default %u: %s\n", sp_modules[i]->name,
				t->name, t->min, t->max, t->def, t->help);
		}
}

static void usage_get(FILE *out)
{
	fprintf(out,
"Usage: stackpilot get [--pin-path DIR] [--cgroup PATH] [KEY ...]\n"
"Print tunables of the running stackpilot (all of them without KEY).\n"
"The BPF side clamps or ignores values outside the range shown.\n"
"Tunables:\n");
	list_tunables(out);
}

static void usage_set(FILE *out)
{
	fprintf(out,
"Usage: stackpilot set [--pin-path DIR] [--cgroup PATH] [--persist | --no-persist]\n"
"                      KEY=VALUE ...\n"
"Change tunables of the running stackpilot; programs use the new value at once.\n"
"All assignments are checked before any is written. --persist also saves them\n"
"for the next run on the same cgroup (the default when the run has --persist).\n"
"All or nothing: when they cannot be saved (a full state folder), none is\n"
"changed, and set exits 1.\n"
"Tunables:\n");
	list_tunables(out);
}

static int get_one(const char *pin_dir, const struct sp_module *m, const struct sp_tunable *t)
{
	unsigned char cfg[SP_CFG_MAX];

	if (sp_cfg_read(pin_dir, m, cfg))
		return -1;
	printf("%s.%s=%u\n", m->name, t->name, sp_cfg_get(cfg, t));
	return 0;
}

int cmd_get(int argc, char **argv)
{
	char pin_dir[256];
	const struct sp_module *m;
	const struct sp_tunable *t;
	int rc = parse_common(argc, argv, pin_dir, sizeof(pin_dir), NULL, usage_get);

	if (rc >= 0)
		return rc;
	for (int i = optind; i < argc; i++)	/* validate all first */
		if (!sp_tunable_find(argv[i], &m))
			return 2;
	for (int i = optind; i < argc; i++)
		if (sp_tunable_find(argv[i], &m) && pick_cgroup(pin_dir, m))
			return 2;
	if (optind == argc) {	/* every tunable of every loaded module */
		int shown = 0;

		for (int i = 0; i < sp_nr_modules; i++) {
			char path[512];

			if (sp_pin_path(path, sizeof(path), pin_dir, sp_modules[i]->cfg_map) ||
			    access(path, F_OK))
				continue;	/* not loaded */
			for (int j = 0; j < sp_modules[i]->nr_tunables; j++, shown++)
				if (get_one(pin_dir, sp_modules[i], &sp_modules[i]->tunables[j]))
					return 1;
		}
		if (!shown && pick_cgroup(pin_dir, NULL))
			return 2;
		return shown ? 0 : sp_fail(1, "%s: no module's tunables (is `stackpilot run` active "
					   "with this --pin-path?)", pin_dir);
	}
	for (int i = optind; i < argc; i++) {
		t = sp_tunable_find(argv[i], &m);
		if (get_one(pin_dir, m, t))
			return 1;
	}
	return 0;
}

/* Every module of mask back to its config in cfg (a set that failed half way). */
static void set_revert(const char *pin_dir, __u32 mask, unsigned char (*cfg)[SP_CFG_MAX])
{
	for (int i = 0; i < sp_nr_modules; i++)
		if ((mask & (1u << i)) && sp_cfg_write(pin_dir, sp_modules[i], cfg[i]))
			sp_err("set: %s's tunables could not be put back: they may differ from the "
			       "saved ones (stackpilot get shows them)", sp_modules[i]->name);
}

/*
 * All or nothing, the save included. Every module's config is read
 * before any is written (an assignment to a module that is not loaded
 * fails the whole command); the new state file is written beside the
 * old one (a full folder fails here); each map is written once, its
 * other fields kept; only then is the file put in place, and a failure
 * after a map was written puts the maps back. So a change is never
 * live when it was to be saved and could not be.
 */
static int set_all(const char *pin_dir, const struct sp_assign *as, int n)
{
	unsigned char old[SP_MAX_MODULES][SP_CFG_MAX], cfg[SP_MAX_MODULES][SP_CFG_MAX];
	struct sp_persist_txn txn;
	__u32 touched = 0, written = 0;
	int idx;

	for (int i = 0; i < n; i++) {
		sp_module_find(as[i].m->name, &idx);
		if (!(touched & (1u << idx)) && sp_cfg_read(pin_dir, as[i].m, old[idx]))
			return 1;
		if (!(touched & (1u << idx)))
			memcpy(cfg[idx], old[idx], sizeof(cfg[idx]));
		touched |= 1u << idx;
		sp_cfg_apply(cfg[idx], as[i].t, as[i].v);
#ifdef SP_MUTANT_SET_WRITE_FIRST	/* make mutants: written before the rest is checked */
		if (sp_cfg_write(pin_dir, as[i].m, cfg[idx]))
			return 1;
#endif
	}
	if (sp_persist_set_prepare(pin_dir, want_persist, as, n, &txn))
		return 1;
	for (int i = 0; i < sp_nr_modules; i++) {
		if (!(touched & (1u << i)))
			continue;
		if (sp_cfg_write(pin_dir, sp_modules[i], cfg[i])) {
			set_revert(pin_dir, written, old);
			sp_persist_set_abort(&txn);
			return 1;
		}
		written |= 1u << i;
	}
	if (sp_persist_set_commit(&txn)) {
		set_revert(pin_dir, written, old);
		return 1;
	}
	for (int i = 0; i < n; i++)
		printf("%s.%s=%u\n", as[i].m->name, as[i].t->name, as[i].v);
	return 0;
}

int cmd_set(int argc, char **argv)
{
	char pin_dir[256];
	struct sp_assign *as;
	int n, rc = parse_common(argc, argv, pin_dir, sizeof(pin_dir), NULL, usage_set);

	if (rc >= 0)
		return rc;
	if (optind == argc)
		return sp_fail(2, "set: expected KEY=VALUE (see: stackpilot set --help)");
	/* Each assignment is parsed once, here; the rest works on its typed value. */
	n = argc - optind;
	as = calloc(n, sizeof(*as));
	if (!as)
		return sp_fail(1, "set: %s", strerror(ENOMEM));
	for (int i = 0; i < n; i++) {
		if (sp_parse_assignment(argv[optind + i], &as[i]) || pick_cgroup(pin_dir, as[i].m)) {
			free(as);
			return 2;
		}
	}
	rc = set_all(pin_dir, as, n);
	free(as);
	return rc;
}

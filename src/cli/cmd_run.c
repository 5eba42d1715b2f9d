// SPDX-License-Identifier: GPL-2.0
/*
 * `stackpilot run`: its options, the checks before anything is attached,
 * and the foreground run; with --config, the service (service/service.c)
 * runs the file's instances instead. Attaching, the event loop and
 * detaching are the service's (service/run.c): this file only decides what
 * to ask of it, and what --interval shows (`status`).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "service/service.h"
#include "modules/modules.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/probe.h"
#include "core/state.h"
#include "export/export.h"
#include "service/config.h"
#include "service/persist.h"
#include "cli/cli.h"

/* --interval, for the live view's "last N s". */
static __u32 live_interval;

static void usage_run(FILE *out)
{
	fprintf(out,
"Usage: stackpilot run [OPTIONS]\n"
"Attach stackpilot and stay in the foreground; Ctrl-C (SIGINT/SIGTERM) detaches\n"
"everything and removes the pins.\n"
"\n"
"  --config FILE      the cgroups, modules and tunables of FILE (stackpilot(8),\n"
"                     CONFIGURATION); SIGHUP re-reads it; state persists as with\n"
"                     --persist. With it go only --log-level, --interval,\n"
"                     --state-dir, --dry-run, --watch-config, --metrics-top,\n"
"                     --bpf-stats and --verbose.\n"
"                     Without --config, --cgroup, --iface and --modules: %s\n"
"                     if it exists\n"
"  --watch-config     re-read the --config file as SIGHUP does whenever its\n"
"                     content changes (an editor's save, a Kubernetes\n"
"                     ConfigMap update)\n"
"  --cgroup PATH      cgroup v2 folder, absolute or relative to the cgroup v2\n"
"                     mount; the root (every process of the host) only as\n"
"                     --cgroup /. Needed by the cgroup modules\n"
"  --modules LIST     comma-separated modules, or 'all' (default: all; without\n"
"                     --iface, all but those that attach to interfaces)\n"
"  --iface DEV        interface for modules that attach to devices (repeatable,\n"
"                     at most %d)\n"
"  --pin-path DIR     pin folder on a bpf filesystem (default %s)\n"
"  --btf FILE         kernel BTF to use instead of /sys/kernel/btf/vmlinux\n"
"  --interval SEC     print status every SEC seconds; 0 = never (default 2;\n"
"                     0 when stderr is the journal). On a terminal, one screen\n"
"                     redrawn in place: what each module did, since start and\n"
"                     over the last SEC s; elsewhere, every counter\n"
"  --log-level LEVEL  error, warn, info (default) or debug\n"
"  --metrics-textfile DIR  write DIR/stackpilot.prom (Prometheus text, for\n"
"                     node_exporter) every --interval, or 10 s if it is 0\n"
"  --metrics-listen [ADDR:]PORT  serve Prometheus text on http://ADDR:PORT/metrics\n"
"                     (ADDR 127.0.0.1 unless given; off by default)\n"
"  --metrics-top N    in the metrics, at most N rows of each module's table: pmtu's\n"
"                     destinations, rehash's, fragguard's peers, each in its own\n"
"                     order (docs/metrics.md); 0 = none (default %d, at most %d)\n"
"  --bpf-stats        count the runs and run time of the BPF programs (status'\n"
"                     programs, the stackpilot_bpf_program_* metrics). Off by\n"
"                     default: while on, every BPF program of the host reads\n"
"                     the clock twice a run\n"
"  --persist          apply and save state: tunables `set` changes are saved\n"
"                     for the next run on this cgroup, and what modules learned\n"
"                     (pmtu) is saved every %d s and at exit, restored at start\n"
"                     (always with --config)\n"
"  --state-dir DIR    where state is kept (default %s)\n"
"  --dry-run          every module with an `enforce` tunable starts with it at 0\n"
"                     (count, do not act); `set MODULE.enforce=1` turns it on\n",
		SP_CONFIG_DEFAULT, SP_MAX_IFACES, SP_PIN_DEFAULT, SP_METRICS_TOP_DEFAULT, SP_TABLE_ROWS,
		SP_PERSIST_SAVE_S, SP_STATE_DIR_DEFAULT);
	for (int i = 0; i < sp_nr_run_opts; i++) {
		char left[64];

		snprintf(left, sizeof(left), "--%s %s", sp_run_opts[i]->name, sp_run_opts[i]->arg);
		fprintf(out, "  %-18s %s: %s\n", left, sp_run_opts[i]->module->name, sp_run_opts[i]->help);
	}
	fprintf(out,
"  --verbose          debug lines and libbpf's messages (the verifier's log on a\n"
"                     load failure)\n"
"  -h, --help         this text\n");
}

struct run_args {
	const char *cgroup, *modules, *config;
	const char *file_only;		/* an option the config file gives instead */
	bool verbose, need_cgroup, need_iface, log_level, have_interval, module_opt, watch;
	__u32 interval;
};

/* Options into run and a; -1 to go on, else the exit code. */
static int parse_run(int argc, char **argv, struct sp_run *run, struct run_args *a)
{
	/* The fixed options, the modules' run options after them, a zero end. */
	struct option opts[18 + SP_MAX_RUN_OPTS + 1] = {
		{ "cgroup", required_argument, NULL, 'c' },
		{ "modules", required_argument, NULL, 'm' },
		{ "iface", required_argument, NULL, 'i' },
		{ "pin-path", required_argument, NULL, 'p' },
		{ "btf", required_argument, NULL, 'b' },
		{ "interval", required_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "metrics-textfile", required_argument, NULL, 't' },
		{ "metrics-listen", required_argument, NULL, 'L' },
		{ "persist", no_argument, NULL, 'P' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "dry-run", no_argument, NULL, 'D' },
		{ "config", required_argument, NULL, 'C' },
		{ "watch-config", no_argument, NULL, 'W' },
		{ "metrics-top", required_argument, NULL, 'T' },
		{ "bpf-stats", no_argument, NULL, 'B' },
	};
	int opt, n = 0, rc, li = 0;

	while (opts[n].name)
		n++;

	for (int i = 0; i < sp_nr_run_opts; i++)
		opts[n++] = (struct option){ sp_run_opts[i]->name, required_argument, NULL, 256 + i };
	optind = 1;
	while ((opt = getopt_long(argc, argv, "hv", opts, &li)) != -1) {
		if (strchr("cmbpitL", opt) || opt >= 256)
			a->file_only = opts[li].name, a->module_opt = opt >= 256;
		switch (opt) {
		case 'C': a->config = optarg; break;
		case 'W': a->watch = true; break;
		case 'c': a->cgroup = optarg; break;
		case 'm': a->modules = optarg; break;
		case 'b': run->btf_path = optarg; break;
		case 'p':
			if (optarg[0] != '/' || strlen(optarg) >= sizeof(run->pin_dir))
				return sp_fail(2, "--pin-path %s: must be an absolute path under %zu bytes",
					       optarg, sizeof(run->pin_dir));
			snprintf(run->pin_dir, sizeof(run->pin_dir), "%s", optarg);
			break;
		case 'n':
			if (sp_parse_u32(optarg, 0, 86400, &a->interval))
				return sp_fail(2, "--interval %s: expected seconds in [0, 86400]", optarg);
			a->have_interval = true;
			break;
		case 'i':
			if (run->nr_ifaces == SP_MAX_IFACES)
				return sp_fail(2, "--iface: at most %d interfaces", SP_MAX_IFACES);
			if (strlen(optarg) >= sizeof(run->ifname[0]) ||
			    !(run->ifindex[run->nr_ifaces] = if_nametoindex(optarg)))
				return sp_fail(2, "--iface %s: no such interface", optarg);
			snprintf(run->ifname[run->nr_ifaces++], sizeof(run->ifname[0]), "%s", optarg);
			break;
		case 't': case 'L': case 'T': case 'B':	/* metrics.c */
			if ((rc = sp_metrics_opt(opt, optarg)))
				return rc;
			break;
		case 'P': case 'S': case 'D':	/* service/persist.c */
			if ((rc = sp_persist_opt(run, opt, optarg)))
				return rc;
			break;
		case 'v': a->verbose = true; break;
		case 'l': if (sp_log_set_level(optarg)) return 2; a->log_level = true; break;
		case 'h': usage_run(stdout); return 0;
		default:
			if (opt < 256 || opt >= 256 + sp_nr_run_opts) {
				usage_run(stderr);
				return 2;
			}
			rc = sp_run_opts[opt - 256]->check(optarg);
			if (rc)
				return rc;
			run->opt_arg[opt - 256] = optarg;
		}
	}
	if (optind < argc)
		return sp_fail(2, "run: unexpected argument '%s'", argv[optind]);
	/* Without a target, the host's config file when there is one. */
	if (!a->config && !a->file_only && !access(SP_CONFIG_DEFAULT, F_OK))
		a->config = SP_CONFIG_DEFAULT;
	if (a->config && a->module_opt)
		return sp_fail(2, "--%s: with --config, give it in the file (mtu-probing = N)",
			       a->file_only);
	if (a->config && a->file_only)
		return sp_fail(2, "--%s: with --config, give it in the file (only --log-level, "
			       "--interval, --state-dir, --dry-run, --watch-config, --metrics-top, "
			       "--bpf-stats and --verbose go with --config)", a->file_only);
	if (a->watch && !a->config)
		return sp_fail(2, "--watch-config: give --config FILE too (it watches that file)");
	if (a->config)
		return -1;
	if (sp_parse_modules(a->modules, &run->modules))
		return 2;
	/* "all" means all that can run with what was given: the modules that
	 * attach to interfaces only when there is an --iface. */
	if (!strcmp(a->modules, "all") && !run->nr_ifaces)
		for (int i = 0; i < sp_nr_modules; i++)
			if (sp_modules[i]->needs_iface)
				run->modules &= ~(1u << i);
	for (int i = 0; i < sp_nr_modules; i++) {
		if (!(run->modules & (1u << i)))
			continue;
		a->need_cgroup |= sp_modules[i]->needs_cgroup;
		a->need_iface |= sp_modules[i]->needs_iface;
	}
	if (run->nr_ifaces && !a->need_iface)
		return sp_fail(2, "--iface: none of the chosen modules attaches to interfaces");
	if (a->need_iface && !run->nr_ifaces)
		return sp_fail(2, "the chosen modules need at least one --iface DEV");
	for (int i = 0; i < sp_nr_run_opts; i++) {
		int idx = 0;

		sp_module_find(sp_run_opts[i]->module->name, &idx);
		if (run->opt_arg[i] && !(run->modules & (1u << idx)))
			return sp_fail(2, "--%s is for the %s module, which is not chosen",
				       sp_run_opts[i]->name, sp_run_opts[i]->module->name);
	}
	if (a->cgroup && !a->need_cgroup)
		return sp_fail(2, "--cgroup: none of the chosen modules attaches to a cgroup");
	return -1;
}

/* Everything up to "attached"; 0, or 1 with nothing left attached. */
static int setup_run(struct sp_run *run, struct run_args *a, int *lock_fd, int *stats_fd)
{
	if (sp_check_privileges() || sp_check_btf(run->btf_path) || sp_probe(run->btf_path))
		return 1;
	/* What this kernel cannot run: refused by name, left out of "all". */
	if (sp_fit_modules(&run->modules, strcmp(a->modules, "all") ? run->modules : 0))
		return 1;
	if (!run->modules)
		return sp_fail(1, "no chosen module can run on this kernel (see: stackpilot probe)");
	if (a->need_cgroup) {
		if (sp_resolve_cgroup(a->cgroup, run->cgroup, sizeof(run->cgroup)))
			return 1;
		run->cgroup_fd = open(run->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (run->cgroup_fd < 0)
			return sp_fail(1, "cannot open cgroup %s: %s", run->cgroup, strerror(errno));
	}
	/* The lock comes before anything is attached: a refused second run touches nothing. */
	/* Then what a killed run left in this namespace is undone. */
	if (sp_loop_init() || sp_ensure_bpffs(run->pin_dir) ||
	    (*lock_fd = sp_lock_targets(run) ? -1 : sp_lock_pin_dir(run->pin_dir)) < 0 ||
	    sp_state_open())
		return 1;
	sp_sweep_pins(run->pin_dir);
	/* With --bpf-stats, run counts and times while we run. */
	*stats_fd = sp_bpf_stats_open();
	if (sp_run_attach(run))
		return 1;
	printf("stackpilot: attached");
	for (int i = 0; i < sp_nr_modules; i++)
		if (run->modules & (1u << i))
			printf(" %s", sp_modules[i]->name);
	if (a->need_cgroup)
		printf(" to cgroup %s", run->cgroup);
	for (int i = 0; i < run->nr_ifaces; i++)
		printf("%s%s", i ? "," : " on ", run->ifname[i]);
	printf("; pins in %s; Ctrl-C detaches\n", run->pin_dir);
	fflush(stdout);
	return 0;
}

/*
 * --interval on a terminal: one screen redrawn in place (home, then each
 * line cleared to its end, then the rest of the screen), the plain summary
 * since start and over the last interval, cut to the terminal's size (at
 * most 80x24, what every terminal has).
 */
static void show_live(char *pin_dir)
{
	static struct sp_live live;
	static bool drawn;
	struct winsize ws;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int rows = 24, shown = 0;

	if (!out)
		return;
	live.width = 80;
	if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col && ws.ws_row) {
		live.width = ws.ws_col < 80 ? ws.ws_col : 80;
		rows = ws.ws_row < 24 ? ws.ws_row : 24;
	}
	live.secs = live_interval;
	sp_status_live(pin_dir, out, &live);
	fprintf(out, "\nCtrl-C detaches. Every counter: stackpilot status --all\n");
	fclose(out);
	/* The first time, the whole screen: what was on it is not ours. */
	fputs(drawn ? "\033[H" : "\033[H\033[2J", stdout);
	drawn = true;
	/*
	 * At most rows - 1 lines of at most width columns, each cleared to its
	 * end: the cursor stays on the last one, and nothing wraps or scrolls.
	 */
	for (char *l = buf, *nl; l && *l && shown < rows - 1; l = nl ? nl + 1 : NULL, shown++) {
		size_t n;

		nl = strchr(l, '\n');
		n = nl ? (size_t)(nl - l) : strlen(l);
		fwrite(l, 1, n < (size_t)live.width ? n : (size_t)live.width, stdout);
		fputs("\033[K", stdout);
		if (nl && shown + 1 < rows - 1)
			fputc('\n', stdout);
	}
	fputs("\033[J", stdout);
	fflush(stdout);
	free(buf);
}

/*
 * --interval: on a terminal the live view; elsewhere (a file, a pipe, the
 * journal) every counter of the run's pins, as `stackpilot status --all`.
 */
static void show_status(char *pin_dir)
{
	char *args[] = { "status", "--all", "--pin-path", pin_dir, NULL };

	if (isatty(STDOUT_FILENO)) {
		show_live(pin_dir);
		return;
	}
	cmd_status(4, args);
	fflush(stdout);
}

int cmd_run(int argc, char **argv)
{
	struct sp_run run = { .cgroup_fd = -1 };
	/* Under systemd a status dump every 2 s would flood the journal. */
	struct run_args a = { .modules = "all", .interval = sp_log_journal() ? 0 : 2 };
	int lock_fd = -1, stats_fd = -1, rc;

	sp_run_block_signals();
	snprintf(run.pin_dir, sizeof(run.pin_dir), "%s", SP_PIN_DEFAULT);
	rc = parse_run(argc, argv, &run, &a);
	if (rc >= 0)
		return rc;
	live_interval = a.interval;
	if (!a.verbose)
		libbpf_set_print(NULL);	/* our own one-line errors instead */
	else
		sp_log_level = SP_LOG_DEBUG;
	if (a.config)
		return sp_config_run(a.config, a.log_level || a.verbose,
				     a.have_interval ? (int)a.interval : -1, run.dry_run, a.watch,
				     show_status);
	rc = setup_run(&run, &a, &lock_fd, &stats_fd);
	if (!rc) {
		rc = sp_run_loop(run.pin_dir, a.interval, show_status);
		sp_run_detach(&run);
		if (!rc)
			printf("stackpilot: detached, pins removed\n");
	}
	if (stats_fd >= 0)
		close(stats_fd);
	if (run.cgroup_fd >= 0)
		close(run.cgroup_fd);
	sp_unlock_targets(&run);
	if (lock_fd >= 0)
		close(lock_fd);
	sp_state_close();
	sp_loop_fini();
	sp_unmount_ours();
	return rc;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * `stackpilot run`: attach the chosen modules, stay in the foreground, and
 * on SIGINT/SIGTERM/SIGHUP take down everything this run made.
 *
 * Cgroup programs are attached through bpf_links held only by this process,
 * so even a SIGKILL detaches them; pins are removed on the normal exit path
 * and, if a killed run left some, by the next run on the same pin folder.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sp.h"

volatile sig_atomic_t sp_stopping;

static void on_signal(int sig)
{
	sp_stopping = 1;
}

static void usage_run(FILE *out)
{
	fprintf(out,
"Usage: stackpilot run [OPTIONS]\n"
"Attach stackpilot and stay in the foreground; Ctrl-C (SIGINT/SIGTERM) detaches\n"
"everything and removes the pins.\n"
"\n"
"  --cgroup PATH      cgroup v2 folder, absolute or relative to the cgroup v2\n"
"                     mount (default: its root, i.e. the whole host)\n"
"  --modules LIST     comma-separated modules, or 'all' (default: all; without\n"
"                     --iface, all but those that attach to interfaces)\n"
"  --iface DEV        interface for modules that attach to devices (repeatable,\n"
"                     at most %d)\n"
"  --pin-path DIR     pin folder on a bpf filesystem (default %s)\n"
"  --btf FILE         kernel BTF to use instead of /sys/kernel/btf/vmlinux\n"
"  --interval SEC     print status every SEC seconds; 0 = never (default 2)\n"
"  --mtu-probing N    pmtu: set net.ipv4.tcp_mtu_probing to N (0-2) in this\n"
"                     namespace for the run, restored on exit\n"
"  --verbose          libbpf's messages too (the verifier's log on a load failure)\n"
"  -h, --help         this text\n", SP_MAX_IFACES, SP_PIN_DEFAULT);
}

static int pmtu_index(void)
{
	int idx = 0;

	sp_module_find("pmtu", &idx);
	return idx;
}

static int lock_pin_dir(const char *pin_dir)
{
	struct stat a, b;
	int fd;

	for (;;) {
		if (mkdir(pin_dir, 0700) && errno != EEXIST)
			return sp_err("cannot create pin folder %s: %s", pin_dir, strerror(errno));
		fd = open(pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return sp_err("cannot open pin folder %s: %s", pin_dir, strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int e = errno;

			close(fd);
			if (e == EWOULDBLOCK)
				return sp_err("another `stackpilot run` is active on %s", pin_dir);
			return sp_err("cannot lock %s: %s", pin_dir, strerror(e));
		}
		/* The run before us may have removed the folder as we opened it. */
		if (!fstat(fd, &a) && !stat(pin_dir, &b) && a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
}

static int pin_meta(const struct sp_run *run)
{
	struct sp_meta meta = {};
	struct timespec ts;
	__u32 zero = 0;
	char path[512];
	int fd, err;

	meta.pid = getpid();
	meta.modules = run->modules;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	meta.started_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	meta.nr_ifaces = run->nr_ifaces;
	for (int i = 0; i < run->nr_ifaces; i++)
		meta.ifindex[i] = run->ifindex[i];
	meta.nr_progs = run->nr_progs;
	memcpy(meta.prog_ids, run->prog_ids, sizeof(meta.prog_ids));
	snprintf(meta.cgroup, sizeof(meta.cgroup), "%s", run->cgroup);

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sp_meta", sizeof(__u32),
			    sizeof(meta), 1, NULL);
	if (fd < 0)
		return sp_err("creating meta map: %s", strerror(errno));
	err = bpf_map_update_elem(fd, &zero, &meta, BPF_ANY);
	if (!err && !sp_pin_path(path, sizeof(path), run->pin_dir, "meta")) {
		unlink(path);
		err = bpf_obj_pin(fd, path);
	}
	close(fd);
	return err ? sp_err("pinning meta map: %s", strerror(errno)) : 0;
}

static void stop_all(struct sp_run *run)
{
	char path[512];

	for (int i = sp_nr_modules - 1; i >= 0; i--)
		if (run->modules & (1u << i))
			sp_modules[i]->stop(run);
	if (!sp_pin_path(path, sizeof(path), run->pin_dir, "meta"))
		unlink(path);
	rmdir(run->pin_dir);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cgroup", required_argument, NULL, 'c' },
		{ "modules", required_argument, NULL, 'm' },
		{ "iface", required_argument, NULL, 'i' },
		{ "pin-path", required_argument, NULL, 'p' },
		{ "btf", required_argument, NULL, 'b' },
		{ "interval", required_argument, NULL, 'n' },
		{ "mtu-probing", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct sp_run run = { .cgroup_fd = -1, .mtu_probing = -1 };
	const char *cgroup_arg = NULL, *modules_arg = "all";
	bool need_cgroup = false, need_iface = false;
	int opt, lock_fd, stats_fd, rc = 1;
	bool verbose = false;
	__u32 interval = 2;
	struct sigaction sa = { .sa_handler = on_signal };

	snprintf(run.pin_dir, sizeof(run.pin_dir), "%s", SP_PIN_DEFAULT);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': cgroup_arg = optarg; break;
		case 'm': modules_arg = optarg; break;
		case 'b': run.btf_path = optarg; break;
		case 'p':
			if (optarg[0] != '/' || strlen(optarg) >= sizeof(run.pin_dir))
				return sp_fail(2, "--pin-path %s: must be an absolute path under %zu bytes",
					       optarg, sizeof(run.pin_dir));
			snprintf(run.pin_dir, sizeof(run.pin_dir), "%s", optarg);
			break;
		case 'n':
			if (sp_parse_u32(optarg, 0, 86400, &interval))
				return sp_fail(2, "--interval %s: expected seconds in [0, 86400]", optarg);
			break;
		case 'P': {
			__u32 v;

			if (sp_parse_u32(optarg, 0, 2, &v))
				return sp_fail(2, "--mtu-probing %s: expected 0, 1 or 2", optarg);
			run.mtu_probing = v;
			break;
		}
		case 'i':
			if (run.nr_ifaces == SP_MAX_IFACES)
				return sp_fail(2, "--iface: at most %d interfaces", SP_MAX_IFACES);
			if (strlen(optarg) >= sizeof(run.ifname[0]) ||
			    !(run.ifindex[run.nr_ifaces] = if_nametoindex(optarg)))
				return sp_fail(2, "--iface %s: no such interface", optarg);
			snprintf(run.ifname[run.nr_ifaces++], sizeof(run.ifname[0]), "%s", optarg);
			break;
		case 'v': verbose = true; break;
		case 'h': usage_run(stdout); return 0;
		default: usage_run(stderr); return 2;
		}
	}
	if (optind < argc)
		return sp_fail(2, "run: unexpected argument '%s'", argv[optind]);
	if (sp_parse_modules(modules_arg, &run.modules))
		return 2;
	/* "all" means all that can run with what was given: the modules that
	 * attach to interfaces only when there is an --iface. */
	if (!strcmp(modules_arg, "all") && !run.nr_ifaces)
		for (int i = 0; i < sp_nr_modules; i++)
			if (sp_modules[i]->needs_iface)
				run.modules &= ~(1u << i);
	for (int i = 0; i < sp_nr_modules; i++) {
		if (!(run.modules & (1u << i)))
			continue;
		need_cgroup |= sp_modules[i]->needs_cgroup;
		need_iface |= sp_modules[i]->needs_iface;
	}
	if (run.nr_ifaces && !need_iface)
		return sp_fail(2, "--iface: none of the chosen modules attaches to interfaces");
	if (need_iface && !run.nr_ifaces)
		return sp_fail(2, "the chosen modules need at least one --iface DEV");
	if (run.mtu_probing >= 0 && !(run.modules & (1u << pmtu_index())))
		return sp_fail(2, "--mtu-probing is for the pmtu module, which is not chosen");
	if (cgroup_arg && !need_cgroup)
		return sp_fail(2, "--cgroup: none of the chosen modules attaches to a cgroup");

	if (sp_check_privileges() || sp_check_btf(run.btf_path))
		return 1;
	if (need_cgroup) {
		if (sp_resolve_cgroup(cgroup_arg, run.cgroup, sizeof(run.cgroup)))
			return 1;
		run.cgroup_fd = open(run.cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (run.cgroup_fd < 0)
			return sp_fail(1, "cannot open cgroup %s: %s", run.cgroup, strerror(errno));
	}
	if (sp_ensure_bpffs(run.pin_dir))
		return 1;
	lock_fd = sp_lock_targets(&run) ? -1 : lock_pin_dir(run.pin_dir);
	if (lock_fd < 0)
		return 1;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (!verbose)
		libbpf_set_print(NULL);	/* our own one-line errors instead */

	/* Run counts and times while we run; the kernel drops this with the fd. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0)
		fprintf(stderr, "stackpilot: warning: BPF run-time stats unavailable: %s\n",
			strerror(errno));

	for (int i = 0; i < sp_nr_modules; i++) {
		if ((run.modules & (1u << i)) && sp_modules[i]->start(&run)) {
			stop_all(&run);
			goto out;
		}
	}
	if (pin_meta(&run)) {
		stop_all(&run);
		goto out;
	}

	printf("stackpilot: attached");
	for (int i = 0; i < sp_nr_modules; i++)
		if (run.modules & (1u << i))
			printf(" %s", sp_modules[i]->name);
	if (need_cgroup)
		printf(" to cgroup %s", run.cgroup);
	for (int i = 0; i < run.nr_ifaces; i++)
		printf("%s%s", i ? "," : " on ", run.ifname[i]);
	printf("; pins in %s; Ctrl-C detaches\n", run.pin_dir);
	fflush(stdout);

	/* 100 ms ticks for modules that sample the system; status every interval. */
	for (unsigned long t = 1; !sp_stopping; t++) {
		struct timespec ts = { .tv_nsec = 100 * 1000000 };

		nanosleep(&ts, NULL);
		for (int i = 0; i < sp_nr_modules && !sp_stopping; i++)
			if ((run.modules & (1u << i)) && sp_modules[i]->tick)
				sp_modules[i]->tick(&run);
		if (!sp_stopping && interval && t % (interval * 10) == 0) {
			char *args[] = { "status", "--pin-path", run.pin_dir, NULL };

			cmd_status(3, args);
			fflush(stdout);
		}
	}
	stop_all(&run);
	printf("stackpilot: detached, pins removed\n");
	rc = 0;
out:
	if (stats_fd >= 0)
		close(stats_fd);
	if (run.cgroup_fd >= 0)
		close(run.cgroup_fd);
	close(lock_fd);
	sp_unmount_ours();
	return rc;
}

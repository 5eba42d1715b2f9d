// SPDX-License-Identifier: GPL-2.0
/*
 * A run: attach the chosen modules, and on SIGINT/SIGTERM/SIGHUP take
 * down everything this run made. One event loop (loop.c) until a signal
 * arrives on the signalfd. `run`'s options and checks are cli/cmd_run.c.
 *
 * Cgroup programs are attached through bpf_links held only by this process,
 * so even a SIGKILL detaches them; pins are removed on the normal exit path
 * and, if a killed run left some, by the next run on the same pin folder,
 * whatever its modules (sp_sweep_pins).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "core/sp.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/state.h"
#include "modules/modules.h"
#include "export/export.h"
#include "service/persist.h"
#include "service/targets.h"
#include "service/run.h"

volatile sig_atomic_t sp_stopping;

static void run_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

/*
 * Called first thing for `run`: a SIGTERM during start-up then waits in the
 * signalfd and ends the run cleanly once attached, instead of killing the
 * process half-attached (rc 143).
 */
void sp_run_block_signals(void)
{
	sigset_t set;

	run_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

int sp_lock_pin_dir(const char *pin_dir)
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

/* A name stackpilot pins: meta, targets, or a module's map (each starts with "MODULE_"). */
static bool our_pin(const char *name)
{
	size_t n;

	if (!strcmp(name, "meta") || !strcmp(name, "targets"))
		return true;
	for (int i = 0; i < sp_nr_modules; i++) {
		n = strlen(sp_modules[i]->name);
		if (!strncmp(name, sp_modules[i]->name, n) && name[n] == '_')
			return true;
	}
	return false;
}

/* Our pins in dir (top: and in its folders, then removed if empty); how many went. */
static int sweep_dir(const char *dir, bool top)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[600];
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p))
			continue;
		if (e->d_type == DT_DIR && top)
			n += sweep_dir(p, false);
		else if (e->d_type != DT_DIR && our_pin(e->d_name))
			n += !unlink(p);
	}
	closedir(d);
	if (!top)
		rmdir(dir);
	return n;
}

/*
 * What a killed run left in the pin folder we hold the lock of, whatever
 * modules it ran: its pins (a single run's, or a config run's interfaces'
 * instance) and its cgroups' folders. Otherwise `get` would show a dead
 * module's tunables, `set` would write them with exit 0, and they would stay
 * after this run's exit. Only names stackpilot pins: the folder is ours, but
 * may be one an operator shares with other pins by mistake.
 */
void sp_sweep_pins(const char *pin_dir)
{
	int n = sweep_dir(pin_dir, true);

	if (n)
		sp_log(SP_LOG_INFO, "removed %d pin%s a killed run left in %s", n, n == 1 ? "" : "s",
		       pin_dir);
}

/* The runs of this process: one, or one per cgroup of a config file. */
static struct sp_run **runs;
static int nr_runs, runs_cap;

void sp_runs_add(struct sp_run *run)
{
	if (nr_runs == runs_cap) {
		int cap = runs_cap ? 2 * runs_cap : 16;
		struct sp_run **r = realloc(runs, cap * sizeof(*r));

		/* Without room the run still works: it only misses its ticks. */
		if (!r)
			return;
		runs = r;
		runs_cap = cap;
	}
	runs[nr_runs++] = run;
}

void sp_runs_del(struct sp_run *run)
{
	for (int i = 0; i < nr_runs; i++)
		if (runs[i] == run)
			runs[i] = runs[--nr_runs];
}

void sp_run_detach(struct sp_run *run)
{
	char path[512];

	sp_runs_del(run);
	sp_persist_stop(run);	/* the last save, while the modules still hold what they learned */
	sp_targets_stop(run);
	sp_chain_stop(run);	/* the sockops modules off the cgroup at once */
	for (int i = sp_nr_modules - 1; i >= 0; i--) {
		if (run->modules & (1u << i))
			sp_module_stop(run, sp_modules[i], run->inst[i]);
		run->inst[i] = NULL;
	}
	if (!sp_pin_path(path, sizeof(path), run->pin_dir, "meta"))
		unlink(path);
	if (!run->keep_pin_dir)
		rmdir(run->pin_dir);
}

int sp_run_attach(struct sp_run *run)
{
	/* Saved state and --dry-run are the service's: modules are handed them. */
	run->restore = sp_persist_apply;
	for (int i = 0; i < sp_nr_modules; i++) {
		if ((run->modules & (1u << i)) && sp_module_start(run, sp_modules[i], &run->inst[i])) {
			sp_run_detach(run);
			return -1;
		}
	}
	if (sp_chain_attach(run) || sp_run_publish_meta(run) || sp_targets_start(run) ||
	    sp_persist_start(run)) {
		sp_run_detach(run);
		return -1;
	}
	sp_runs_add(run);
	return 0;
}

static void on_signalfd(void *ctx)
{
	struct signalfd_siginfo si;

	if (read(*(int *)ctx, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGHUP && sp_reload_hook) {
		sp_notify("RELOADING=1");
		sp_reload_hook();
		sp_notify("READY=1");
		return;
	}
	sp_log(SP_LOG_DEBUG, "signal %u: detaching", si.ssi_signo);
	sp_notify("STOPPING=1");
	sp_stopping = 1;
	sp_loop_stop();
}

/*
 * Modules that still sample the system on a fixed tick. Every 10th tick
 * (1 s) also publishes how late the loop was (a map update a second: cheap,
 * and a scrape or `status` sees a value at most 1 s old).
 */
static void on_tick(void *ctx)
{
	static unsigned int ticks;
	static __u64 delay_max;
	__u64 delay;

	for (int r = 0; r < nr_runs; r++)
		for (int i = 0; i < sp_nr_modules; i++)
			if ((runs[r]->modules & (1u << i)) && sp_modules[i]->tick)
				sp_modules[i]->tick(runs[r], runs[r]->inst[i]);
	if (++ticks % 10)
		return;
	/* One loop serves every run of the process: one lateness, in each run's meta. */
	delay = sp_loop_delay_take();
	if (delay > delay_max)
		delay_max = delay;
	for (int r = 0; r < nr_runs; r++) {
		runs[r]->loop_delay_ns = delay;
		runs[r]->loop_delay_max_ns = delay_max;
		sp_run_publish_meta(runs[r]);
	}
}

/* What --interval's dump shows, and of which pin folder: the caller's. */
struct status_dump {
	sp_show_fn *show;
	char *pin_dir;
};

static void on_status(void *ctx)
{
	struct status_dump *d = ctx;

	d->show(d->pin_dir);
}

void (*sp_reload_hook)(void);

/* The event loop of a run; pin_dir is what the status dump shows. */
int sp_run_loop(char *pin_dir, __u32 interval, sp_show_fn *show)
{
	struct status_dump dump = { show, pin_dir };
	struct sp_watch *sig_w = NULL, *tick_w = NULL, *status_w = NULL;
	sigset_t set;
	int sfd, rc = 1;

	run_sigset(&set);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return sp_fail(1, "signalfd: %s", strerror(errno));
	sig_w = sp_loop_watch(sfd, on_signalfd, &sfd);
	tick_w = sp_loop_timer(on_tick, NULL);
	if (interval)
		status_w = sp_loop_timer(on_status, &dump);
	if (!sig_w || !tick_w || (interval && !status_w) ||
	    sp_timer_arm(tick_w, 100, 100) ||
	    (status_w && sp_timer_arm(status_w, interval * 1000, interval * 1000)) ||
	    sp_metrics_start(pin_dir, interval))
		goto out;
	/* Everything is attached (or waiting for its cgroup) and /metrics listens. */
	sp_notify("READY=1");
	rc = sp_loop_run() ? 1 : 0;
out:
	sp_metrics_stop();
	sp_loop_unwatch(status_w);
	sp_loop_unwatch(tick_w);
	sp_loop_unwatch(sig_w);
	close(sfd);
	return rc;
}

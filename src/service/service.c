// SPDX-License-Identifier: GPL-2.0
/*
 * `run --config FILE`: one process, one struct sp_run per [cgroup] section
 * (its own module instances, programs, maps and pins, under
 * PIN_DIR/<name>, see sp_cgroup_pin_name) and one for the interfaces of
 * the global settings (pins in PIN_DIR itself). Every instance ticks in
 * the one event loop (run.c).
 *
 * A cgroup that does not exist yet is waited for with inotify on its parent
 * folder (IN_CREATE), so a service started later is attached as its cgroup
 * is made, before systemd has moved the service's process into it; and, for
 * a parent that does not exist either, by a stat of each path every
 * CHECK_MS. One that goes away is detached (its programs went with the
 * cgroup) and waited for again. A killed config run's locks go with it;
 * its pins are removed by the next run on the pin folder (sp_sweep_pins).
 *
 * SIGHUP re-reads the file. Only what changed is touched: a tunable whose
 * configured value changed is written in place into the running map (so a
 * `set` of another key stays), a cgroup whose modules changed is attached
 * anew, added ones are attached and removed ones detached; the others keep
 * their programs and links. A file with an error changes nothing.
 *
 * With --watch-config a change of the file's content is a SIGHUP too: an
 * inotify watch on its folder sees the file written or renamed over (an
 * editor), or a symlink above it swapped (a Kubernetes ConfigMap volume
 * swaps its "..data" link), and the file is re-read when its bytes differ
 * from those last read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "core/sp.h"
#include "service/service.h"
#include "modules/modules.h"
#include "export/export.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/state.h"
#include "service/config.h"
#include "service/persist.h"

#define CHECK_MS 200
#define MTU_PROBING "net/ipv4/tcp_mtu_probing"

/* I_REFUSED: a pattern's match that nests in (or holds) another's cgroup, or is another's. */
enum { I_WAITING, I_ATTACHED, I_FAILED, I_REFUSED };

struct inst {
	struct sp_run run;
	struct sp_cfg_section sec;	/* what it runs */
	char abs[600];			/* the cgroup's folder; "" for the interfaces' */
	int state;
	ino_t ino;			/* of the cgroup attached, or that failed */
	int pin_lock;			/* a cgroup's pin folder's flock, while attached */
	char from[256];			/* the pattern it matches; "" for a section's own */
	bool dup_said;			/* a later pattern that matches it too was named */
};

/* What a pattern's walk watches in each folder it spans. */
#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ONLYDIR)
/* A full walk of the patterns every this many checks, in case an event was lost. */
#define SCAN_CHECKS 25
/*
 * What a match may take of the machine (docs/configuration.md has the
 * numbers): file descriptors kept free for the rest of the run (metrics
 * connections, state files, a reload), memory left to others, and what a
 * match is taken to need before one was measured (all cgroup modules: 49
 * descriptors before the sockops chain, a few more since; 0.5 MB of our
 * memory and 1.7 MB of the kernel's).
 */
#define FD_RESERVE 256
#define MEM_RESERVE_KB (128 << 10)
#define FDS_GUESS 64
#define MEM_GUESS_KB (4 << 10)

static struct {
	struct sp_config *cfg;
	struct inst *cg[SP_MAX_CGROUPS];
	int n;
	struct inst **m;		/* the patterns' matches */
	int nm, m_cap;
	int limit;			/* of matches: what status reads back */
	int fds_per;			/* descriptors the last match attached took; 0: none yet */
	int limit_at;			/* matches when the limit was said; 0: not reached */
	int checks;
	struct inst *ifaces;		/* NULL without iface = */
	char mnt[256];
	bool keep_log_level, dry_run;
	int ino_fd;			/* parents of the cgroups waited for */
	int saved_probing;		/* tcp_mtu_probing before mtu-probing =, or -1 */
	struct sp_watch *ino_w;
	int cfg_fd;			/* --watch-config: the config file's folder */
	struct sp_watch *cfg_w;
	unsigned long long cfg_sum;	/* of the bytes last read (file_sum) */
} S = { .ino_fd = -1, .saved_probing = -1, .cfg_fd = -1 };

/* sp_run.cfg_init: the configured values over the defaults, before attaching. */
static void cfg_init(struct sp_run *run, const struct sp_module *m, void *cfg)
{
	const struct sp_cfg_section *sec = &((struct inst *)run->owner)->sec;

	for (int i = 0; i < sec->nr_sets; i++)
		if (sec->sets[i].a.m == m)
			sp_cfg_apply(cfg, sec->sets[i].a.t, sec->sets[i].a.v);
}

static const char *what(const struct inst *in)
{
	return in->abs[0] ? in->sec.path : "interfaces";
}

static void modules_str(__u32 mask, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < sp_nr_modules && n < len; i++)
		if (mask & (1u << i))
			n += snprintf(buf + n, len - n, "%s%s", n ? "," : "", sp_modules[i]->name);
}

static void reset_run(struct inst *in)
{
	struct sp_run *run = &in->run;

	memset(run, 0, sizeof(*run));
	run->cgroup_fd = -1;
	run->cfg_init = cfg_init;
	run->owner = in;
	run->keep_pin_dir = !in->abs[0];	/* the interfaces' pins are in the cgroups' parent */
	/*
	 * A service: what `set` changes and pmtu learns outlives the run; but
	 * not a pattern's match, whose cgroup is one container's, never back.
	 */
	run->persist = !in->from[0];
	run->dry_run = S.dry_run;
	run->modules = in->sec.modules;
	run->btf_path = S.cfg->btf[0] ? S.cfg->btf : NULL;
}

static void detach(struct inst *in)
{
	if (in->state != I_ATTACHED)
		return;
	sp_run_detach(&in->run);
	sp_unlock_targets(&in->run);
	if (in->run.cgroup_fd >= 0)
		close(in->run.cgroup_fd);
	in->run.cgroup_fd = -1;
	if (in->pin_lock >= 0)
		close(in->pin_lock);
	in->pin_lock = -1;
	in->state = I_WAITING;
}

/*
 * Wake on_check() when something is made in the parent of a cgroup waited
 * for. Watches are per folder (adding one again is a no-op) and go when the
 * folder does; one left on a folder no longer needed costs a spurious check.
 */
static void watch_parent(const struct inst *in)
{
	char parent[sizeof(in->abs)], *slash;

	snprintf(parent, sizeof(parent), "%s", in->abs);
	slash = strrchr(parent, '/');
	if (S.ino_fd < 0 || !slash || slash == parent)
		return;
	*slash = '\0';
	inotify_add_watch(S.ino_fd, parent, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
}

static const struct inst *conflict(const char *path, __u32 modules, const struct inst *self);
static void say_conflict(const struct inst *in, const struct inst *o);

/* 0: attached, waiting for its cgroup, or failed before on this one; -1: failed now (said why). */
static int attach(struct inst *in)
{
	struct sp_run *run = &in->run;
	char where[300], mods[128];
	const struct inst *o;
	struct stat st;
	bool theirs = false;	/* the pin folder is another run's */
	int err;

	if (in->abs[0] && (stat(in->abs, &st) || !S_ISDIR(st.st_mode))) {
		if (in->state == I_FAILED)
			in->state = I_WAITING;
		if (!in->from[0])
			watch_parent(in);
		return 0;
	}
	/* Tried once on this very cgroup: again when it is re-created or on reload. */
	if (in->abs[0] && in->state == I_FAILED && st.st_ino == in->ino)
		return 0;
	/* A section's cgroup made inside (or above) a pattern's match that runs its modules. */
	if (in->abs[0] && !in->from[0] && (o = conflict(in->sec.path, in->sec.modules, in))) {
		say_conflict(in, o);
		in->ino = st.st_ino;
		in->state = I_FAILED;
		return -1;
	}
	reset_run(in);
	snprintf(where, sizeof(where), "cgroup %s", in->sec.path);
	sp_err_where = in->abs[0] ? where : NULL;
	if (in->abs[0]) {
		in->ino = st.st_ino;
		err = sp_resolve_cgroup(in->sec.path, run->cgroup, sizeof(run->cgroup));
		if (!err && (run->cgroup_fd = open(run->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			err = sp_err("cannot open %s: %s", run->cgroup, strerror(errno));
		if (!err && sp_pin_path(run->pin_dir, sizeof(run->pin_dir), S.cfg->pin_dir, in->sec.name))
			err = -1;
	} else {
		err = 0;
		snprintf(run->pin_dir, sizeof(run->pin_dir), "%s", S.cfg->pin_dir);
		run->nr_ifaces = S.cfg->nr_ifaces;
		for (int i = 0; i < run->nr_ifaces && !err; i++) {
			snprintf(run->ifname[i], sizeof(run->ifname[i]), "%s", S.cfg->ifname[i]);
			if (!(run->ifindex[i] = if_nametoindex(run->ifname[i])))
				err = sp_err("iface %s: no such interface", run->ifname[i]);
		}
	}
	/*
	 * A cgroup's pin folder is locked as a single run's is: a run given it
	 * as --pin-path would otherwise take its pins for a killed run's and
	 * remove them. (The interfaces' folder is the run's own, locked already.)
	 */
	if (!err)
		err = sp_lock_targets(run);
	if (!err && in->abs[0] && (in->pin_lock = sp_lock_pin_dir(run->pin_dir)) < 0) {
		theirs = true;
		err = -1;
	}
	if (!err)
		err = sp_run_attach(run);
	sp_err_where = NULL;
	if (err) {
		sp_unlock_targets(run);
		if (run->cgroup_fd >= 0)
			close(run->cgroup_fd);
		run->cgroup_fd = -1;
		if (in->abs[0] && !theirs)
			rmdir(run->pin_dir);
		if (in->pin_lock >= 0)
			close(in->pin_lock);
		in->pin_lock = -1;
		in->state = I_FAILED;
		return -1;
	}
	in->state = I_ATTACHED;
	modules_str(in->sec.modules, mods, sizeof(mods));
	if (in->from[0])
		sp_log(SP_LOG_INFO, "cgroup %s (matches [cgroup %s]): attached %s; pins in %s",
		       in->sec.path, in->from, mods, run->pin_dir);
	else
		sp_log(SP_LOG_INFO, "%s%s: attached %s; pins in %s", in->abs[0] ? "cgroup " : "",
		       what(in), mods, run->pin_dir);
	return 0;
}

static struct inst *inst_new(const struct sp_cfg_section *sec)
{
	struct inst *in = calloc(1, sizeof(*in));

	if (!in) {
		sp_err("%s", strerror(ENOMEM));
		return NULL;
	}
	in->sec = *sec;
	in->run.cgroup_fd = -1;
	in->pin_lock = -1;
	if (sec->path[0])
		snprintf(in->abs, sizeof(in->abs), "%s%s%s", S.mnt, strcmp(sec->path, "/") ? "/" : "",
			 strcmp(sec->path, "/") ? sec->path : "");
	return in;
}

static void inst_free(struct inst *in)
{
	if (!in)
		return;
	detach(in);
	free(in);
}

/* ---- patterns ---------------------------------------------------------------- */

/* in (its section's modules) would share a module with out on a cgroup above, below or the same. */
static const struct inst *conflict(const char *path, __u32 modules, const struct inst *self)
{
	for (int i = 0; i < S.n + S.nm; i++) {
		const struct inst *o = i < S.n ? S.cg[i] : S.m[i - S.n];

		if (!o || o == self || o->state != I_ATTACHED)
			continue;
		if (!strcmp(o->sec.path, path) ||
		    ((o->sec.modules & modules) &&
		     (sp_cgroup_is_above(o->sec.path, path) || sp_cgroup_is_above(path, o->sec.path))))
			return o;
	}
	return NULL;
}

/* The section of a line as a log line names it. */
static void section_str(const struct inst *in, char *buf, size_t len)
{
	if (in->from[0])
		snprintf(buf, len, "cgroup %s (matches [cgroup %s] at line %d)", in->sec.path,
			 in->from, in->sec.line);
	else
		snprintf(buf, len, "[cgroup %s] at line %d", in->sec.path, in->sec.line);
}

/* One line: why in is not attached, o being attached where in would nest. */
static void say_conflict(const struct inst *in, const struct inst *o)
{
	char a[600], b[600], mods[128];

	section_str(in, a, sizeof(a));
	section_str(o, b, sizeof(b));
	modules_str(in->sec.modules & o->sec.modules, mods, sizeof(mods));
	if (!strcmp(in->sec.path, o->sec.path))
		sp_log(SP_LOG_WARN, "%s: not attached: the same cgroup as %s", a, b);
	else
		sp_log(SP_LOG_WARN, "%s: not attached: %s %s, and both run %s, whose programs "
		       "would run twice for the inner one's sockets; give each module to one section",
		       a, sp_cgroup_is_above(in->sec.path, o->sec.path) ? "holds" : "is inside", b, mods);
}

static int live_matches(void)
{
	int n = 0;

	for (int i = 0; i < S.nm; i++)
		n += S.m[i]->state == I_ATTACHED;
	return n;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3;	/* ".", ".." and the folder's own */
}

static long mem_available_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/*
 * Whether one more match fits: "" when it does, else what is full, for the
 * one line said when the limit is reached. The count that status reads
 * back, the descriptors this process may open, the machine's memory.
 */
static const char *full(char *why, size_t len)
{
	struct rlimit rl;
	int fds = open_fds(), need = S.fds_per ?: FDS_GUESS;
	long kb = mem_available_kb();

	why[0] = '\0';
	if (live_matches() >= S.limit)
		snprintf(why, len, "%d instances of patterns, as many as status reads back", S.limit);
	else if (!getrlimit(RLIMIT_NOFILE, &rl) && fds >= 0 && rl.rlim_cur != RLIM_INFINITY &&
		 (rlim_t)fds + need + FD_RESERVE > rl.rlim_cur)
		snprintf(why, len, "%d instances of patterns hold %d of the %llu file descriptors "
			 "this process may open (LimitNOFILE)", live_matches(), fds,
			 (unsigned long long)rl.rlim_cur);
	else if (kb >= 0 && kb < MEM_RESERVE_KB + MEM_GUESS_KB)
		snprintf(why, len, "%d instances of patterns, and %ld MB of memory available",
			 live_matches(), kb >> 10);
	return why;
}

/* A cgroup rel matches pattern section k: its instance, unless it has one or may not. */
static void found(const char *rel, int k)
{
	const struct sp_cfg_section *pat = &S.cfg->cg[k];
	const struct inst *o;
	struct inst *in = NULL;
	char a[600], why[200];
	int fds;

	/* The walk goes down what may match; the matcher says what does (one definition). */
	if (!sp_cgroup_match(pat->path, rel))
		return;
	for (int i = 0; i < S.nm && !in; i++)
		if (!strcmp(S.m[i]->sec.path, rel))
			in = S.m[i];
	if (in && in->state != I_REFUSED) {
		if (strcmp(in->from, pat->path) && !in->dup_said) {
			sp_log(SP_LOG_WARN, "cgroup %s (matches [cgroup %s] at line %d): not attached "
			       "again: it matches [cgroup %s] first", rel, pat->path, pat->line, in->from);
			in->dup_said = true;
		}
		return;
	}
	/* A section of its own (the file named it) or an attached neighbour comes first. */
	for (int i = 0; i < S.n && !in; i++)
		if (!strcmp(S.cg[i]->sec.path, rel))
			return;
	if (!in) {
		if (*full(why, sizeof(why))) {
			if (!S.limit_at)
				sp_log(SP_LOG_ERROR, "cgroup %s (matches [cgroup %s] at line %d): not "
				       "attached, nor other new matches until one goes: limit reached: %s",
				       rel, pat->path, pat->line, why);
			S.limit_at = live_matches() ?: 1;
			return;
		}
		if (S.nm == S.m_cap) {
			int cap = S.m_cap ? 2 * S.m_cap : 16;
			struct inst **m = realloc(S.m, cap * sizeof(*m));

			if (!m)
				return;
			S.m = m;
			S.m_cap = cap;
		}
		if (!(in = calloc(1, sizeof(*in))))
			return;
		in->sec = *pat;
		in->sec.pattern = false;
		snprintf(in->sec.path, sizeof(in->sec.path), "%s", rel);
		snprintf(in->from, sizeof(in->from), "%s", pat->path);
		snprintf(in->abs, sizeof(in->abs), "%s/%s", S.mnt, rel);
		in->run.cgroup_fd = -1;
		in->pin_lock = -1;
		if (sp_cgroup_pin_name(rel, in->sec.name, sizeof(in->sec.name))) {
			free(in);
			return;
		}
		S.m[S.nm++] = in;
		if ((o = conflict(rel, in->sec.modules, in))) {
			struct stat st;

			in->state = I_REFUSED;
			in->ino = stat(in->abs, &st) ? 0 : st.st_ino;
			say_conflict(in, o);
			return;
		}
	} else if (conflict(rel, in->sec.modules, in)) {
		return;		/* refused still, said already */
	}
	in->state = I_WAITING;
	section_str(in, a, sizeof(a));
	fds = open_fds();
	if (attach(in))
		sp_log(SP_LOG_ERROR, "%s: not attached; tried again when it is re-created", a);
	else if (in->state == I_ATTACHED && fds >= 0 && open_fds() > fds)
		S.fds_per = open_fds() - fds;
}

/*
 * The folder abs (rel below the mount) and the levels of a pattern from pat
 * on: watch it, then read it (in this order, so a cgroup made in between
 * is seen by one or the other), and go down the folders that match.
 */
static void walk(const char *abs, const char *rel, const char *pat, int k)
{
	size_t lp = strcspn(pat, "/");
	const char *next = pat + lp + (pat[lp] == '/');
	bool globstar = lp == 2 && !strncmp(pat, "**", 2);
	char name[256], cabs[1024], crel[512];
	struct dirent *e;
	DIR *d;

	if (!*pat) {
		found(rel, k);
		return;
	}
	if (lp >= sizeof(name))
		return;
	memcpy(name, pat, lp);
	name[lp] = '\0';
	if (S.ino_fd >= 0)
		inotify_add_watch(S.ino_fd, abs, WATCH_MASK);
	if (globstar && *next)
		walk(abs, rel, next, k);	/* zero levels */
	if (!(d = opendir(abs)))
		return;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!globstar && fnmatch(name, e->d_name, 0))
			continue;
		if ((size_t)snprintf(crel, sizeof(crel), "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
		    sizeof(S.m[0]->sec.path) ||
		    (size_t)snprintf(cabs, sizeof(cabs), "%s/%s", abs, e->d_name) >= sizeof(cabs))
			continue;
		if (globstar && !*next)
			found(crel, k);
		walk(cabs, crel, globstar ? pat : next, k);
	}
	closedir(d);
}

static void drop(int i, const char *why)
{
	struct inst *in = S.m[i];

	if (in->state != I_REFUSED)
		sp_log(SP_LOG_INFO, "cgroup %s (matches [cgroup %s]) %s: dropped", in->sec.path,
		       in->from, why);
	inst_free(in);
	S.m[i] = S.m[--S.nm];
}

/* Matches whose cgroup is gone (or is another cgroup now) are dropped, not waited for. */
static void drop_gone(void)
{
	struct stat st;

	for (int i = 0; i < S.nm; i++) {
		struct inst *in = S.m[i];

		if (stat(in->abs, &st) || (in->ino && st.st_ino != in->ino))
			drop(i--, "is gone");
	}
	/* Said again only once some went (what is free wavers by a descriptor or two). */
	if (S.limit_at && live_matches() < S.limit_at) {
		sp_log(SP_LOG_INFO, "patterns: below the limit again (%d instances)", live_matches());
		S.limit_at = 0;
	}
}

/* Each pattern's matches: new ones attached, gone ones dropped. */
static void scan_patterns(void)
{
	drop_gone();
	for (int k = 0; k < S.cfg->nr_cgroups; k++)
		if (S.cfg->cg[k].pattern)
			walk(S.mnt, "", S.cfg->cg[k].path, k);
}

/* Cgroups that appeared, went, or came back as another cgroup of the same path. */
static void on_check(void *ctx)
{
	struct stat st;

	for (int i = 0; i < S.n; i++) {
		struct inst *in = S.cg[i];

		if (in->state == I_ATTACHED &&
		    (stat(in->abs, &st) || st.st_ino != in->ino)) {
			sp_log(SP_LOG_INFO, "cgroup %s is gone: detached; attached again when it is back",
			       in->sec.path);
			detach(in);
		}
		if (in->state != I_ATTACHED && attach(in))
			sp_log(SP_LOG_ERROR, "cgroup %s: not attached; tried again when it is "
			       "re-created or the file is reloaded", in->sec.path);
	}
	/* Without inotify, or in case it lost an event: the patterns walked now and then. */
	if (ctx == &S || S.ino_fd < 0 || ++S.checks % SCAN_CHECKS == 0)
		scan_patterns();
	else
		drop_gone();
}

static void on_inotify(void *ctx)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(S.ino_fd, buf, sizeof(buf)) > 0)
		;
	on_check(&S);
}

/* ---- reload ---------------------------------------------------------------- */

/*
 * The file changed t: replace a value `set` saved for it. Also for a cgroup
 * waited for (its service stopped), named by its path, or the saved value
 * would win over the file's new one when the cgroup is back.
 */
static int saved_reload(struct inst *in, const struct sp_module *m, const struct sp_tunable *t,
			__u32 v)
{
	struct sp_run *run;
	int err;

	if (in->state == I_ATTACHED)
		return sp_persist_reload(&in->run, m, t, v);
	if (strlen(in->abs) >= sizeof(run->cgroup) || !(run = calloc(1, sizeof(*run))))
		return -1;
	run->persist = true;
	memcpy(run->cgroup, in->abs, strlen(in->abs) + 1);
	err = sp_persist_reload(run, m, t, v);
	free(run);
	return err;
}

/* Write the tunables of in whose configured value differs in sec; one line each. */
static int retune(struct inst *in, const struct sp_cfg_section *sec)
{
	unsigned char cfg[SP_CFG_MAX];
	int changed = 0;

	for (int i = 0; i < sp_nr_modules; i++) {
		const struct sp_module *m = sp_modules[i];
		bool dirty = false;

		if (!(sec->modules & (1u << i)))
			continue;
		if (in->state == I_ATTACHED && sp_cfg_read(in->run.pin_dir, m, cfg))
			continue;
		for (int k = 0; k < m->nr_tunables; k++) {
			const struct sp_tunable *t = &m->tunables[k];
			__u32 was = sp_cfg_value(&in->sec, m, t), now = sp_cfg_value(sec, m, t);

			if (was == now)
				continue;
			/*
			 * A value `set` saved for t that cannot be replaced would come
			 * back at the next start: the running one stays too, rather
			 * than a change a restart silently takes back.
			 */
			if (saved_reload(in, m, t, now)) {
				sp_log(SP_LOG_ERROR, "%s: %s.%s not changed to %u: the value `set` saved "
				       "for it could not be replaced", what(in), m->name, t->name, now);
				continue;
			}
			sp_cfg_apply(cfg, t, now);
			dirty = true;
			changed++;
			sp_log(SP_LOG_INFO, "%s%s: %s.%s %u -> %u", in->abs[0] ? "cgroup " : "",
			       what(in), m->name, t->name, was, now);
		}
		if (dirty && in->state == I_ATTACHED && sp_cfg_write(in->run.pin_dir, m, cfg))
			sp_log(SP_LOG_ERROR, "%s: writing %s's tunables failed", what(in), m->name);
	}
	in->sec = *sec;
	return changed;
}

/* What may not change without a restart: the pins' place and what serves the metrics. */
static int check_fixed(const struct sp_config *o, const struct sp_config *c)
{
	if (strcmp(o->pin_dir, c->pin_dir))
		return sp_err("pin-path cannot change on reload (restart the run)");
	if (strcmp(o->btf, c->btf))
		return sp_err("btf cannot change on reload (restart the run)");
	if (o->interval != c->interval)
		return sp_err("interval cannot change on reload (restart the run)");
	if (o->mtu_probing != c->mtu_probing)
		return sp_err("mtu-probing cannot change on reload (restart the run)");
	if (strcmp(o->metrics_textfile, c->metrics_textfile) ||
	    strcmp(o->metrics_listen, c->metrics_listen))
		return sp_err("metrics-textfile and metrics-listen cannot change on reload (restart the run)");
	return 0;
}

static bool same_ifaces(const struct sp_config *o, const struct sp_config *c)
{
	if (o->nr_ifaces != c->nr_ifaces || o->global.modules != c->global.modules)
		return false;
	for (int i = 0; i < c->nr_ifaces; i++)
		if (strcmp(o->ifname[i], c->ifname[i]))
			return false;
	return true;
}

/* The interfaces' instance: tunables in place, or attached anew when the list changed. */
static int apply_ifaces(struct sp_config *c)
{
	if (S.ifaces && S.ifaces->state == I_ATTACHED && same_ifaces(S.cfg, c))
		return retune(S.ifaces, &c->global);
	if (!S.ifaces && !c->nr_ifaces)
		return 0;
	inst_free(S.ifaces);
	S.ifaces = NULL;
	if (c->nr_ifaces && (S.ifaces = inst_new(&c->global)) && attach(S.ifaces))
		sp_log(SP_LOG_ERROR, "interfaces: not attached; tried again on reload");
	else
		sp_log(SP_LOG_INFO, "interfaces: %s", c->nr_ifaces ? "attached anew" : "detached");
	return 1;
}

/* "WHAT FILE: N cgroups (M waiting for theirs), interfaces A,B": the start's
 * line, and the service manager's STATUS= after a start or a reload. */
static void status_line(char *buf, size_t len, const char *what, int waiting)
{
	const struct sp_config *c = S.cfg;
	int n = S.n - waiting, np = 0;
	size_t at;

	for (int i = 0; i < c->nr_cgroups; i++)
		np += c->cg[i].pattern;
	at = snprintf(buf, len, "%s %s: %d cgroup%s (%d waiting for theirs)", what, c->file,
		      n, n == 1 ? "" : "s", waiting);
	if (np && at < len)
		at += snprintf(buf + at, len - at, ", %d pattern%s matching %d (at most %d)", np,
			       np == 1 ? "" : "s", live_matches(), S.limit);
	for (int i = 0; i < c->nr_ifaces && at < len; i++)
		at += snprintf(buf + at, len - at, "%s%s", i ? "," : ", interfaces ", c->ifname[i]);
}

/* FNV-1a of the file's bytes; 0 when it cannot be read. */
static unsigned long long file_sum(const char *path)
{
	unsigned long long h = 14695981039346656037ULL;
	unsigned char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	close(fd);
	return n < 0 ? 0 : h;
}

/*
 * The patterns' matches on reload: those of a pattern still in the file with
 * the same modules keep their programs (tunables written in place); the
 * others are detached, and the walk after the reload attaches what the new
 * file's patterns match (also what was refused or failed, tried anew).
 */
static int reload_matches(const struct sp_config *c)
{
	int changed = 0;

	for (int i = 0; i < S.nm; i++) {
		struct inst *in = S.m[i];
		struct sp_cfg_section sec;
		int k = 0;

		while (k < c->nr_cgroups && !(c->cg[k].pattern && !strcmp(c->cg[k].path, in->from)))
			k++;
		if (k < c->nr_cgroups && c->cg[k].modules == in->sec.modules &&
		    in->state == I_ATTACHED) {
			sec = c->cg[k];
			sec.pattern = false;
			memcpy(sec.path, in->sec.path, sizeof(sec.path));
			memcpy(sec.name, in->sec.name, sizeof(sec.name));
			changed += retune(in, &sec);
			continue;
		}
		if (in->state == I_ATTACHED) {
			sp_log(SP_LOG_INFO, "cgroup %s (matches [cgroup %s]): %s", in->sec.path, in->from,
			       k < c->nr_cgroups ? "modules changed: attached anew" :
			       "pattern removed from the file: detached");
			changed++;
		}
		inst_free(in);
		S.m[i--] = S.m[--S.nm];
	}
	S.limit_at = 0;
	return changed;
}

static void reload(void)
{
	struct sp_config *c = malloc(sizeof(*c));
	struct inst *next[SP_MAX_CGROUPS] = {};
	char why[512] = "";
	int changed = 0, err, waiting;

	if (S.cfg_fd >= 0)
		S.cfg_sum = file_sum(S.cfg->file);
	if (!c) {
		sp_log(SP_LOG_ERROR, "reload: %s: the running policy stays", strerror(ENOMEM));
		return;
	}
	sp_err_capture = why;
	sp_err_capture_len = sizeof(why);
	/* The metrics settings are the running ones (check_fixed): not applied again. */
	err = sp_config_load(S.cfg->file, c) || sp_config_check_host(c, false) || check_fixed(S.cfg, c);
	sp_err_capture = NULL;
	if (err) {
		sp_log(SP_LOG_ERROR, "reload rejected, the running policy stays: %s", why);
		sp_notify("STATUS=reload rejected, the running policy stays: %s", why);
		free(c);
		return;
	}
	if (!S.keep_log_level && c->log_level >= 0)
		sp_log_level = c->log_level;
	changed += reload_matches(c);
	/* Removed cgroups first: their locks and pins are free for the others. */
	for (int i = 0; i < S.n; i++) {
		int k = 0;

		while (k < c->nr_cgroups && strcmp(c->cg[k].name, S.cg[i]->sec.name))
			k++;
#ifdef SP_MUTANT_RELOAD_REATTACH	/* make mutants: unchanged cgroups attached anew */
		if (0) {
#else
		if (k < c->nr_cgroups && c->cg[k].modules == S.cg[i]->sec.modules) {
#endif
			next[k] = S.cg[i];
			changed += retune(next[k], &c->cg[k]);
			/* One that could not be attached is tried again now. */
			if (next[k]->state == I_FAILED) {
				next[k]->state = I_WAITING;
				if (attach(next[k]))
					sp_log(SP_LOG_ERROR, "cgroup %s: still not attached", c->cg[k].path);
			}
			continue;
		}
		sp_log(SP_LOG_INFO, "cgroup %s: %s", S.cg[i]->sec.path,
		       k < c->nr_cgroups ? "modules changed: attached anew" : "removed from the file: detached");
		inst_free(S.cg[i]);
		/* Gone: conflict() walks S.cg while the new ones attach below. */
		S.cg[i] = NULL;
		changed++;
	}
	changed += apply_ifaces(c);
	for (int k = 0; k < c->nr_cgroups; k++) {
		if (next[k] || c->cg[k].pattern)
			continue;
		changed++;
		if (!(next[k] = inst_new(&c->cg[k])))
			continue;
		if (attach(next[k]))
			sp_log(SP_LOG_ERROR, "cgroup %s: not attached; tried again when it is "
			       "re-created or the file is reloaded", c->cg[k].path);
		else if (next[k]->state == I_WAITING)
			sp_log(SP_LOG_INFO, "cgroup %s: added; attached when it exists", c->cg[k].path);
	}
	S.n = 0;
	for (int k = 0; k < c->nr_cgroups; k++)
		if (next[k])
			S.cg[S.n++] = next[k];
	/* In place: metrics.c holds pointers to the (unchanged) metrics strings. */
	memcpy(S.cfg, c, sizeof(*c));
	free(c);
	scan_patterns();
	sp_log(SP_LOG_INFO, "reloaded %s: %d change%s", S.cfg->file, changed, changed == 1 ? "" : "s");
	waiting = 0;
	for (int i = 0; i < S.n; i++)
		waiting += S.cg[i]->state != I_ATTACHED;
	status_line(why, sizeof(why), "reloaded", waiting);
	sp_notify("STATUS=%s", why);
}

/* --watch-config: something changed in the file's folder; a reload if its bytes did. */
static void on_cfg_event(void *ctx)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	unsigned long long sum;

	(void)ctx;
	while (read(S.cfg_fd, buf, sizeof(buf)) > 0)
		;
	sum = file_sum(S.cfg->file);
	if (!sum || sum == S.cfg_sum)	/* gone for a moment, or the same bytes */
		return;
	sp_log(SP_LOG_INFO, "%s changed: reloading", S.cfg->file);
	reload();
}

/* The file's folder, watched for files written, renamed or linked into it. */
static int watch_config(const char *file)
{
	char dir[4096], *slash;

	snprintf(dir, sizeof(dir), "%s", file);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	S.cfg_sum = file_sum(file);
	S.cfg_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (S.cfg_fd < 0 ||
	    inotify_add_watch(S.cfg_fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ONLYDIR) < 0)
		return sp_err("--watch-config: cannot watch %s: %s", dir, strerror(errno));
	return (S.cfg_w = sp_loop_watch(S.cfg_fd, on_cfg_event, NULL)) ? 0 : -1;
}

/* ---- run ------------------------------------------------------------------- */

static void stop_all(void)
{
	for (int i = 0; i < S.nm; i++)
		inst_free(S.m[i]);
	free(S.m);
	S.m = NULL;
	S.nm = S.m_cap = 0;
	for (int i = 0; i < S.n; i++)
		inst_free(S.cg[i]);
	S.n = 0;
	inst_free(S.ifaces);
	S.ifaces = NULL;
}

static int start_all(void)
{
	struct sp_config *c = S.cfg;
	char line[512];
	int waiting = 0;

	if (c->nr_ifaces && (!(S.ifaces = inst_new(&c->global)) || attach(S.ifaces)))
		return -1;
	for (int i = 0; i < c->nr_cgroups; i++) {
		if (c->cg[i].pattern)
			continue;
		if (!(S.cg[S.n] = inst_new(&c->cg[i])))
			return -1;
		S.n++;
		/* At start, a cgroup that exists and cannot be attached is an error of the set-up. */
		if (attach(S.cg[S.n - 1]))
			return -1;
		if (S.cg[S.n - 1]->state == I_WAITING) {
			waiting++;
			sp_log(SP_LOG_INFO, "cgroup %s does not exist yet: attached when it appears",
			       c->cg[i].path);
		}
	}
	scan_patterns();
	status_line(line, sizeof(line), "attached from", waiting);
	printf("stackpilot: %s; pins in %s; SIGHUP re-reads the file, Ctrl-C detaches\n",
	       line, c->pin_dir);
	fflush(stdout);
	sp_notify("STATUS=%s", line);
	return 0;
}

/* Each match holds a few dozen descriptors: the soft limit up to the hard one. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			sp_log(SP_LOG_WARN, "cannot raise the file descriptor limit: %s", strerror(errno));
	}
}

int sp_config_run(const char *file, bool keep_log_level, int interval, bool dry_run,
		  bool watch, sp_show_fn *show)
{
	struct sp_watch *check_w = NULL;
	int lock_fd = -1, stats_fd = -1, rc = 1;

	S.keep_log_level = keep_log_level;
	S.dry_run = dry_run;
	if (!(S.cfg = malloc(sizeof(*S.cfg))))
		return sp_fail(1, "%s", strerror(ENOMEM));
	if (sp_config_load(file, S.cfg) || sp_config_check_host(S.cfg, true)) {
		free(S.cfg);
		return 1;
	}
	if (!keep_log_level && S.cfg->log_level >= 0)
		sp_log_level = S.cfg->log_level;
	if (interval < 0)
		interval = S.cfg->interval >= 0 ? S.cfg->interval : sp_log_journal() ? 0 : 2;
	if (sp_check_privileges() || sp_check_btf(S.cfg->btf[0] ? S.cfg->btf : NULL) ||
	    (S.cfg->nr_cgroups && sp_cgroup2_mount(S.mnt, sizeof(S.mnt))) ||
	    sp_loop_init() || sp_ensure_bpffs(S.cfg->pin_dir) ||
	    (lock_fd = sp_lock_pin_dir(S.cfg->pin_dir)) < 0 || sp_private_dir(S.cfg->pin_dir, false) ||
	    sp_state_open())
		goto out;
	sp_sweep_pins(S.cfg->pin_dir);
	/* For the whole namespace, so the run's, not one pmtu instance's (they come and go). */
	if (S.cfg->mtu_probing >= 0 &&
	    sp_sysctl_own(MTU_PROBING, S.cfg->mtu_probing, &S.saved_probing, "mtu-probing"))
		goto out;
	/* Without inotify the periodic check still finds new cgroups. */
	S.ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (S.ino_fd >= 0 && !(S.ino_w = sp_loop_watch(S.ino_fd, on_inotify, NULL)))
		goto out;
	stats_fd = sp_bpf_stats_open();
	S.limit = SP_MAX_INSTANCES - SP_MAX_CGROUPS;
	raise_nofile();
	if ((watch && watch_config(S.cfg->file)) || start_all())
		goto out;
	check_w = sp_loop_timer(on_check, NULL);
	if (!check_w || sp_timer_arm(check_w, CHECK_MS, CHECK_MS))
		goto out;
	sp_reload_hook = reload;
	rc = sp_run_loop(S.cfg->pin_dir, interval, show);
	sp_reload_hook = NULL;
	if (!rc) {
		stop_all();
		printf("stackpilot: detached, pins removed\n");
	}
out:
	sp_loop_unwatch(check_w);
	sp_loop_unwatch(S.ino_w);
	if (S.ino_fd >= 0)
		close(S.ino_fd);
	sp_loop_unwatch(S.cfg_w);
	if (S.cfg_fd >= 0)
		close(S.cfg_fd);
	S.cfg_w = NULL;
	S.cfg_fd = -1;
	stop_all();
	rmdir(S.cfg->pin_dir);
	sp_sysctl_release(MTU_PROBING, S.saved_probing, S.cfg->mtu_probing);
	if (stats_fd >= 0)
		close(stats_fd);
	if (lock_fd >= 0)
		close(lock_fd);
	sp_state_close();
	sp_loop_fini();
	sp_unmount_ours();
	free(S.cfg);
	return rc;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * State that outlives a run: see persist.h. Files, per cgroup, in the state
 * folder (--state-dir, default /var/lib/stackpilot, made 0700):
 *
 *   KEY.tunables   `set --persist` assignments, MODULE.NAME=VALUE a line
 *   KEY.pmtu       pmtu's learned destinations (pmtu_persist.c)
 *
 * KEY names the cgroup relative to the cgroup v2 mount (so a run inside
 * `ip netns exec`, which mounts cgroup v2 elsewhere, finds the same file):
 * "cgroup-" and the path with every byte but [A-Za-z0-9_.@+-] as %XX
 * ("cgroup-" alone for the root, "global" for a run without a cgroup). Each
 * file starts with "cgroup PATH", checked on reading.
 *
 * Files are written whole to a temporary file, fsync'd and renamed over the
 * old one, so a crash leaves the old file or the new one. Reading trusts
 * nothing: a file not owned by us or writable by others is skipped; a line
 * that does not parse, or a value outside its tunable's range, is one
 * warning naming FILE:LINE and is ignored; the rest still applies.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "core/sp.h"
#include "modules/modules.h"
#include "export/export.h"
#include "core/loop.h"
#include "service/persist.h"

#define MAX_FILE_BYTES (4 << 20)	/* pmtu: 4096 entries of < 200 bytes fit */
#define MAX_SAVED 128			/* tunables in a file */

static char state_dir[PATH_MAX - 64] = SP_STATE_DIR_DEFAULT;

int sp_persist_opt(struct sp_run *run, int opt, const char *arg)
{
	switch (opt) {
	case 'P': run->persist = true; break;
	case 'D': run->dry_run = true; break;
	case 'S':
		if (arg[0] != '/' || strlen(arg) >= sizeof(state_dir))
			return sp_fail(2, "--state-dir %s: must be an absolute path under %zu bytes",
				       arg, sizeof(state_dir));
		snprintf(state_dir, sizeof(state_dir), "%s", arg);
		break;
	}
	return 0;
}

/* The cgroup of run relative to the cgroup v2 mount ("" for the root), or NULL. */
static const char *cgroup_rel(const struct sp_run *run, char *buf, size_t len)
{
	char mnt[PATH_MAX];
	size_t n;

	if (!run->cgroup[0])
		return NULL;
	sp_cgroup2_find(mnt, sizeof(mnt));	/* read only: `set` must mount nothing */
	n = strlen(mnt);
	if (n && !strncmp(run->cgroup, mnt, n) && (run->cgroup[n] == '/' || !run->cgroup[n]))
		snprintf(buf, len, "%s", run->cgroup + n + (run->cgroup[n] == '/'));
	else
		snprintf(buf, len, "%s", run->cgroup);
	return buf;
}

/* STATE_DIR/KEY.suffix; -1 when it does not fit. */
static int state_path(const struct sp_run *run, const char *suffix, char *out, size_t len)
{
	char rel[PATH_MAX], key[NAME_MAX + 1];
	const char *cg = cgroup_rel(run, rel, sizeof(rel));
	size_t k;

	if (!cg) {
		snprintf(key, sizeof(key), "global");
	} else {
		k = snprintf(key, sizeof(key), "cgroup-");
		for (const unsigned char *p = (const unsigned char *)cg; *p; p++) {
			if (k + 4 + strlen(suffix) + 8 >= sizeof(key))
				return sp_err("cgroup %s: name too long for a state file", cg);
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || strchr("_.@+-", *p))
				key[k++] = *p;
			else
				k += snprintf(key + k, sizeof(key) - k, "%%%02X", *p);
		}
		key[k] = '\0';
	}
	if ((size_t)snprintf(out, len, "%s/%s.%s", state_dir, key, suffix) >= len)
		return sp_err("%s: state file path too long", state_dir);
	return 0;
}

/* "cgroup PATH" (or "cgroup -" without one): the first line of each file. */
static void header_of(const struct sp_run *run, char *buf, size_t len)
{
	char rel[PATH_MAX];
	const char *cg = cgroup_rel(run, rel, sizeof(rel));

	snprintf(buf, len, "cgroup %s", !cg ? "-" : cg[0] ? cg : "/");
}

/*
 * A state file to read, positioned after its header, or NULL (missing, or
 * refused after one warning). Only a regular file of ours that nobody else
 * can write: whoever writes it sets our tunables.
 */
static FILE *open_state(const struct sp_run *run, const char *path, struct sp_persist_reader *r)
{
	char want[PATH_MAX + 16], *line;
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	memset(r, 0, sizeof(*r));
	r->file = path;
	if (fd < 0) {
		if (errno != ENOENT)
			sp_log(SP_LOG_WARN, "%s: %s; not applied", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_size > MAX_FILE_BYTES) {
		sp_log(SP_LOG_WARN, "%s: not a regular file of uid %u writable only by it, or over "
		       "%d bytes; not applied", path, geteuid(), MAX_FILE_BYTES);
		close(fd);
		return NULL;
	}
	r->f = fdopen(fd, "r");
	if (!r->f) {
		close(fd);
		return NULL;
	}
	header_of(run, want, sizeof(want));
	line = sp_persist_next(r);
	if (!line || strcmp(line, want)) {
		sp_log(SP_LOG_WARN, "%s:%d: expected '%s' first; file not applied", path,
		       r->line, want);
		fclose(r->f);
		return r->f = NULL;
	}
	return r->f;
}

/* ---- writing ------------------------------------------------------------ */

/*
 * What path is to hold, in a temporary file beside it (PATH.tmp.PID, in
 * tmp), fsync'd: 0, or an errno with nothing left. The first half of a
 * write: nothing has changed yet when a full folder makes it fail.
 */
static int write_tmp(const struct sp_run *run, const char *path,
		     int (*fill)(FILE *f, void *ctx), void *ctx, char *tmp, size_t len)
{
	char head[PATH_MAX + 16];
	int fd, err = 0;
	FILE *f;

	snprintf(tmp, len, "%s.tmp.%d", path, getpid());
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	if (!(f = fdopen(fd, "w"))) {
		err = errno;
		close(fd);
		unlink(tmp);
		return err;
	}
	header_of(run, head, sizeof(head));
	fprintf(f, "# written by stackpilot; read by the next run on this cgroup\n%s\n", head);
	errno = 0;
	if (fill(f, ctx) || fflush(f) || fsync(fd))
		err = errno ? errno : EIO;
	if (fclose(f) && !err)
		err = errno ? errno : EIO;
	if (err)
		unlink(tmp);
	return err;
}

/* The second half: tmp in path's place, and the folder fsync'd. 0, or an errno with tmp gone. */
static int commit_tmp(const char *tmp, const char *path)
{
	int dfd, err;

	if (rename(tmp, path)) {
		err = errno;
		unlink(tmp);
		return err;
	}
	dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* path, whole or not at all: temporary file, fsync, rename, fsync of the folder. */
static int write_atomic(const struct sp_run *run, const char *path,
			int (*fill)(FILE *f, void *ctx), void *ctx)
{
	char tmp[PATH_MAX + 32];
	int err;

	if (sp_private_dir(state_dir, true))
		return -1;
	err = write_tmp(run, path, fill, ctx, tmp, sizeof(tmp));
	if (!err)
		err = commit_tmp(tmp, path);
	return err ? sp_err("writing %s: %s", path, strerror(err)) : 0;
}

/* ---- tunables ----------------------------------------------------------- */

struct saved { const struct sp_module *m; const struct sp_tunable *t; __u32 v; };
struct saved_set { int n; struct saved e[MAX_SAVED]; };

/* An entry for t in s, replacing an earlier one. */
static void saved_put(struct saved_set *s, const struct sp_module *m, const struct sp_tunable *t,
		      __u32 v)
{
	for (int i = 0; i < s->n; i++)
		if (s->e[i].t == t) {
			s->e[i].v = v;
			return;
		}
	if (s->n < MAX_SAVED)
		s->e[s->n++] = (struct saved){ m, t, v };
}

/* MODULE.NAME=VALUE with VALUE in range, or a warning naming file:line. */
static void parse_saved(struct sp_persist_reader *r, const char *line, struct saved_set *s)
{
	const char *eq = strchr(line, '='), *dot = strchr(line, '.');
	struct sp_assign a;
	int why = sp_assign_parse(line, &a);

	/* A state file's own words for each reason: they name file:line. */
	if (!why)
		saved_put(s, a.m, a.t, a.v);
	else if (why == SP_ASSIGN_SYNTAX || why == SP_ASSIGN_NO_DOT ||
		 (why == SP_ASSIGN_MODULE && dot - line >= 32))
		sp_persist_bad(r, "expected MODULE.NAME=VALUE");
	else if (why == SP_ASSIGN_MODULE)
		sp_persist_bad(r, "unknown module '%.*s'", (int)(dot - line), line);
	else if (why == SP_ASSIGN_TUNABLE || why == SP_ASSIGN_KEY_LONG)
		sp_persist_bad(r, "unknown tunable '%.*s'", (int)(eq - line), line);
	else
		sp_persist_bad(r, "%s.%s=%.32s: not a number in [%u, %u]", a.m->name, a.t->name,
			       eq + 1, a.t->min, a.t->max);
}

static void read_saved(const struct sp_run *run, const char *path, struct saved_set *s)
{
	struct sp_persist_reader r;
	char *line;

	s->n = 0;
	if (!open_state(run, path, &r))
		return;
	while ((line = sp_persist_next(&r)))
		parse_saved(&r, line, s);
	fclose(r.f);
}

static int fill_saved(FILE *f, void *ctx)
{
	struct saved_set *s = ctx;

	/* In the order of the tables, as `get` prints them. */
	for (int i = 0; i < sp_nr_modules; i++)
		for (int j = 0; j < sp_modules[i]->nr_tunables; j++)
			for (int k = 0; k < s->n; k++)
				if (s->e[k].t == &sp_modules[i]->tunables[j])
					fprintf(f, "%s.%s=%u\n", sp_modules[i]->name,
						s->e[k].t->name, s->e[k].v);
	return ferror(f) ? -1 : 0;
}

/*
 * The saved tunables are read once per run, at its first module's start, so
 * that a bad line is reported once; the cache holds the run it is for.
 */
static const struct sp_run *cached_run;
static struct saved_set cache;

static const struct sp_tunable *find_enforce(const struct sp_module *m)
{
	for (int i = 0; i < m->nr_tunables; i++)
		if (!strcmp(m->tunables[i].name, "enforce"))
			return &m->tunables[i];
	return NULL;
}

int sp_persist_apply(struct sp_run *run, const struct sp_module *m, int cfg_fd)
{
	unsigned char cfg[SP_CFG_MAX];
	const struct sp_tunable *enf = find_enforce(m);
	char path[PATH_MAX];
	__u32 zero = 0, changed = 0;

	if (cached_run != run) {
		cache.n = 0;
		cached_run = run;
		if (!state_path(run, "tunables", path, sizeof(path)))
			read_saved(run, path, &cache);
	}
	if (bpf_map_lookup_elem(cfg_fd, &zero, cfg))
		return sp_err("%s: reading its config: %s", m->name, strerror(errno));
	for (int i = 0; i < cache.n; i++) {
		if (cache.e[i].m != m)
			continue;
		sp_cfg_apply(cfg, cache.e[i].t, cache.e[i].v);
		sp_log(SP_LOG_INFO, "%s.%s=%u (saved for cgroup %s)", m->name, cache.e[i].t->name,
		       cache.e[i].v, run->cgroup[0] ? run->cgroup : "-");
		changed++;
	}
	/* Dry run wins over a saved enforce=1: nothing acts until `set` says so. */
	if (run->dry_run && enf) {
		sp_cfg_apply(cfg, enf, 0);
		changed++;
	}
	if (changed && bpf_map_update_elem(cfg_fd, &zero, cfg, BPF_ANY))
		return sp_err("%s: writing saved tunables: %s", m->name, strerror(errno));
	if (run->persist && m->persister && !state_path(run, m->persister->suffix, path, sizeof(path))) {
		struct sp_persist_reader r;

		if (open_state(run, path, &r)) {
			m->persister->restore(run, sp_run_inst(run, m), &r);
			fclose(r.f);
		}
	}
	return 0;
}

/*
 * A config reload changed t of m to v in the file: a value `set` saved for
 * t is replaced by it, so that the next start does not bring back the older
 * one. Keys nobody saved stay unsaved: the file gives them at every start.
 */
int sp_persist_reload(struct sp_run *run, const struct sp_module *m, const struct sp_tunable *t,
		      __u32 v)
{
	char path[PATH_MAX];
	struct saved_set *s;
	bool found = false;
	int fd, err = 0;

	if (!run->persist || state_path(run, "tunables", path, sizeof(path)) || access(path, F_OK))
		return 0;
	fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX) || !(s = malloc(sizeof(*s)))) {
		err = sp_err("%s: %s", state_dir, strerror(errno ? errno : ENOMEM));
		if (fd >= 0)
			close(fd);
		return err;
	}
	read_saved(run, path, s);
	for (int i = 0; i < s->n; i++)
		if (s->e[i].m == m && s->e[i].t == t && s->e[i].v != v)
			s->e[i].v = v, found = true;
	if (found)
		err = write_atomic(run, path, fill_saved, s);
	if (cached_run == run)
		cached_run = NULL;
	free(s);
	close(fd);
	return err;
}

/* ---- learned state: periodic and final save ------------------------------ */

struct save_ctx { struct sp_run *run; const struct sp_persister *p; void *inst; };

static int fill_learned(FILE *f, void *ctx)
{
	struct save_ctx *c = ctx;

	return c->p->save(c->run, c->inst, f);
}

static void save_learned(struct sp_run *run)
{
	char path[PATH_MAX];

	for (int idx = 0; idx < sp_nr_modules; idx++) {
		struct save_ctx c = { run, sp_modules[idx]->persister, NULL };

		if (!c.p || !(run->modules & (1u << idx)) || !(c.inst = run->inst[idx]) ||
		    state_path(run, c.p->suffix, path, sizeof(path)))
			continue;
		if (!write_atomic(run, path, fill_learned, &c))
			sp_log(SP_LOG_DEBUG, "%s: saved", path);
	}
}

/*
 * The runs saving now, each with its timer: one process may hold several
 * runs (a configuration file's cgroups), each with its own files.
 */
#define MAX_SAVING 64
static struct saving { struct sp_run *run; struct sp_watch *w; } saving[MAX_SAVING];

static void on_save(void *ctx)
{
	save_learned(ctx);
}

static struct saving *saving_of(const struct sp_run *run)
{
	for (int i = 0; i < MAX_SAVING; i++)
		if (saving[i].run == run)
			return &saving[i];
	return NULL;
}

int sp_persist_start(struct sp_run *run)
{
	char names[128] = "";
	struct saving *s;
	size_t n = 0;

	if (run->dry_run) {
		for (int i = 0; i < sp_nr_modules; i++)
			if ((run->modules & (1u << i)) && find_enforce(sp_modules[i]) && n < sizeof(names))
				n += snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "",
					      sp_modules[i]->name);
		if (n)
			sp_log(SP_LOG_INFO, "dry run: enforce=0 in %s (counting only); `stackpilot set "
			       "MODULE.enforce=1` turns enforcement on", names);
		else
			sp_log(SP_LOG_WARN, "dry run: no started module has an enforce tunable; "
			       "they act as usual");
	}
	if (!run->persist)
		return 0;
	if (sp_private_dir(state_dir, true))
		return -1;
	if (!(s = saving_of(NULL)))
		return sp_err("persist: more than %d runs in one process", MAX_SAVING);
	s->w = sp_loop_timer(on_save, run);
	if (!s->w || sp_timer_arm(s->w, SP_PERSIST_SAVE_S * 1000, SP_PERSIST_SAVE_S * 1000)) {
		sp_loop_unwatch(s->w);
		s->w = NULL;
		return sp_err("persist: registering with the event loop failed");
	}
	s->run = run;
	return 0;
}

void sp_persist_stop(struct sp_run *run)
{
	struct saving *s = saving_of(run);

	if (cached_run == run)
		cached_run = NULL;
	if (!s)
		return;
	sp_loop_unwatch(s->w);
	*s = (struct saving){};
	save_learned(run);
}

void sp_persist_meta(const struct sp_run *run, struct sp_meta *meta)
{
	meta->flags = (run->persist ? SP_META_PERSIST : 0) | (run->dry_run ? SP_META_DRY_RUN : 0);
	if (state_path(run, "tunables", meta->state_file, sizeof(meta->state_file)))
		meta->state_file[0] = '\0';
}

/* ---- set ---------------------------------------------------------------- */

int sp_persist_set_prepare(const char *pin_dir, int force, const struct sp_assign *as, int n,
			   struct sp_persist_txn *txn)
{
	struct sp_run run = {};	/* what the files are named after */
	struct saved_set *s;
	struct sp_meta meta;
	char *slash;
	int fd, err;

	txn->lock_fd = -1;
	txn->tmp[0] = '\0';
	if (force < 0 || sp_status_read_meta(pin_dir, &meta))
		return force < 0 ? 0 : -1;
	if (!force && !(meta.flags & SP_META_PERSIST))
		return 0;
#ifdef SP_MUTANT_PERSIST_NOTHING	/* make mutants: set --persist saves nothing */
	return 0;
#endif
	meta.state_file[sizeof(meta.state_file) - 1] = '\0';
	meta.cgroup[sizeof(meta.cgroup) - 1] = '\0';
	slash = strrchr(meta.state_file, '/');
	if (!slash || slash == meta.state_file)
		return sp_err("%s/meta: the run names no state file", pin_dir);
	snprintf(state_dir, sizeof(state_dir), "%.*s", (int)(slash - meta.state_file), meta.state_file);
	snprintf(run.cgroup, sizeof(run.cgroup), "%s", meta.cgroup);
	if (sp_private_dir(state_dir, true))
		return -1;
	/* Two `set --persist` at once: one read-modify-write after the other. */
	fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		err = sp_err("%s: %s", state_dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return err;
	}
	s = malloc(sizeof(*s));
	if (!s) {
		close(fd);
		return sp_err("set: %s", strerror(ENOMEM));
	}
	read_saved(&run, meta.state_file, s);
	for (int i = 0; i < n; i++)
		saved_put(s, as[i].m, as[i].t, as[i].v);
	err = write_tmp(&run, meta.state_file, fill_saved, s, txn->tmp, sizeof(txn->tmp));
	free(s);
	if (err) {
		close(fd);
		txn->tmp[0] = '\0';
		return sp_err("set: saving %s: %s; nothing changed", meta.state_file, strerror(err));
	}
	snprintf(txn->path, sizeof(txn->path), "%s", meta.state_file);
	txn->lock_fd = fd;
	return 0;
}

int sp_persist_set_commit(struct sp_persist_txn *txn)
{
	int err = txn->tmp[0] ? commit_tmp(txn->tmp, txn->path) : 0;

	txn->tmp[0] = '\0';
	sp_persist_set_abort(txn);
	return err ? sp_err("set: saving %s: %s; nothing changed", txn->path, strerror(err)) : 0;
}

void sp_persist_set_abort(struct sp_persist_txn *txn)
{
	if (txn->tmp[0])
		unlink(txn->tmp);
	txn->tmp[0] = '\0';
	if (txn->lock_fd >= 0)
		close(txn->lock_fd);
	txn->lock_fd = -1;
}

/* ---- status ------------------------------------------------------------- */

void sp_persist_report(const char *pin_dir, const struct sp_meta *meta, struct sp_report *rep)
{
	static const struct sp_field dry = { "dry_run", SP_BOOL, false, "",
		"started with --dry-run and some module's enforce is still 0: counting, not acting" };
	static const struct sp_field per = { "persist", SP_BOOL, false, "",
		"tunables set now are saved for the next run; learned state is saved" };
	unsigned char cfg[SP_CFG_MAX];
	bool off = false;

	for (int i = 0; (meta->flags & SP_META_DRY_RUN) && i < sp_nr_modules; i++) {
		const struct sp_tunable *enf = find_enforce(sp_modules[i]);
		char path[512];

		if (!(meta->modules & (1u << i)) || !enf ||
		    sp_pin_path(path, sizeof(path), pin_dir, sp_modules[i]->cfg_map) || access(path, F_OK) ||
		    sp_cfg_read(pin_dir, sp_modules[i], cfg))
			continue;
		off |= !sp_cfg_get(cfg, enf);
	}
	sp_rec_add(rep, NULL, &dry)->b = off;
	sp_rec_add(rep, NULL, &per)->b = meta->flags & SP_META_PERSIST;
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * State that outlives a run (issue 12): tunables saved by `set --persist`,
 * and what modules learned (pmtu's destinations), in files under the state
 * folder (/var/lib/stackpilot, root's, 0700), one set of files per cgroup.
 * Also `run --dry-run`: every started module that has a tunable named
 * `enforce` starts with it at 0.
 */
#ifndef SP_PERSIST_H
#define SP_PERSIST_H

#include <limits.h>
#include <stdio.h>
#include "core/sp.h"
#include "core/saved.h"

#define SP_STATE_DIR_DEFAULT "/var/lib/stackpilot"
#define SP_PERSIST_SAVE_S 60	/* learned state is saved this often, and at exit */

/* sp_meta.flags */
#define SP_META_PERSIST	1	/* `set` persists by default (run --persist, config runs) */
#define SP_META_DRY_RUN	2	/* started with --dry-run */

/* run's --persist ('P'), --state-dir ('S'), --dry-run ('D'): 0, or an exit code after saying why. */
int sp_persist_opt(struct sp_run *run, int opt, const char *arg);
/*
 * From sp_module_publish(), once m's config map holds its defaults and
 * before anything is attached: saved tunables (always, when a file exists),
 * then --dry-run's enforce=0, then what m saved of its own (run->persist).
 */
int sp_persist_apply(struct sp_run *run, const struct sp_module *m, int cfg_fd);
/* Once everything is attached: the periodic save (run->persist) and the dry-run log line. */
int sp_persist_start(struct sp_run *run);
/* Before the modules stop: the last save. Does nothing unless started. */
void sp_persist_stop(struct sp_run *run);
/* From sp_run_publish_meta(). */
void sp_persist_meta(const struct sp_run *run, struct sp_meta *meta);
/* A config reload changed a tunable: a saved value of it is replaced (0 or -1). */
int sp_persist_reload(struct sp_run *run, const struct sp_module *m, const struct sp_tunable *t,
		      __u32 v);
/*
 * `set` saves assignments in the run's state file in two steps around its
 * writes to the maps, so that a failed save changes nothing: prepare
 * writes the new file beside the old one (a full folder fails here, before
 * any map is written), holding the folder's lock; commit puts it in place
 * (on failure the caller puts the maps back); abort drops it. With nothing
 * to save (force: --persist 1, --no-persist -1, neither 0, as the run's
 * default), prepare leaves txn empty and commit does nothing. 0 or -1.
 */
struct sp_persist_txn {
	int lock_fd;
	char path[PATH_MAX], tmp[PATH_MAX + 32];	/* tmp "": nothing to save */
};
int sp_persist_set_prepare(const char *pin_dir, int force, const struct sp_assign *as, int n,
			   struct sp_persist_txn *txn);
int sp_persist_set_commit(struct sp_persist_txn *txn);
void sp_persist_set_abort(struct sp_persist_txn *txn);
/* `status`: the run's persistence and dry-run records. */
void sp_persist_report(const char *pin_dir, const struct sp_meta *meta, struct sp_report *rep);

#endif

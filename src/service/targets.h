/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SP_TARGETS_H
#define SP_TARGETS_H

#include "core/sp.h"

/* targets.c: what a run watches, as it goes and comes back (struct sp_target_ops). */
int sp_targets_start(struct sp_run *run);
void sp_targets_stop(struct sp_run *run);
/* (Re)write the pinned meta map from run: targets and the loop publish it. */
int sp_run_publish_meta(struct sp_run *run);

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/* fragguard's loader files: the module (fragguard.c) and its status (fragguard_report.c). */
#ifndef SP_FRAGGUARD_H
#define SP_FRAGGUARD_H

#include "core/sp.h"

extern const struct sp_module sp_mod_fragguard;
void sp_fg_report(const char *pin_dir, struct sp_report *rep);
void sp_fg_say(const struct sp_report *r, struct sp_summary *s);
extern const struct sp_counter sp_fg_counters[SP_FG_NR];

#endif

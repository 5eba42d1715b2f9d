/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module table (modules.c): the one list that names the modules, and
 * what needs it: finding a module or tunable by name, the one parse of an
 * assignment, which modules this kernel runs. Above every module's folder,
 * below the service, export and commands that use it.
 */
#ifndef SP_MODULES_H
#define SP_MODULES_H

#include "core/sp.h"

/* Order is attach order, and the bit order of sp_meta.modules. */
extern const struct sp_module *const sp_modules[];
extern const int sp_nr_modules;

const struct sp_module *sp_module_find(const char *name, int *idx);
int sp_parse_modules(const char *list, __u32 *mask);
/*
 * Takes the modules of *mask this kernel cannot run out of it, each with a
 * warning line; a module in named (asked for by name) is an error instead:
 * -1 after its one line, *mask unchanged past it. Without the privileges
 * to probe, takes nothing out (the load will say what is wrong).
 */
int sp_fit_modules(unsigned int *mask, unsigned int named);
/* The modules sp_fit_modules() took out, for any run of this process (metrics). */
extern unsigned int sp_modules_refused;
/* The instance of m in run, or NULL when m is not running there. */
void *sp_run_inst(const struct sp_run *run, const struct sp_module *m);
const struct sp_tunable *sp_tunable_find(const char *key,
					 const struct sp_module **mod);
/*
 * MODULE.KEY=VALUE as a typed value: the one parse of an assignment, for
 * the command line, a config file and saved state alike. 0, or a reason
 * (enum sp_assign_err) for the caller to word; sp_parse_assignment()
 * words it for the command line and a config file.
 */
int sp_assign_parse(const char *arg, struct sp_assign *a);
int sp_parse_assignment(const char *arg, struct sp_assign *a);

#endif

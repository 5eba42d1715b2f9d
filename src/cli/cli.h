/* SPDX-License-Identifier: GPL-2.0 */
/* The commands (main.c dispatches): the top layer, which nothing includes. */
#ifndef SP_CLI_H
#define SP_CLI_H

int cmd_run(int argc, char **argv);		/* cmd_run.c */
int cmd_status(int argc, char **argv);		/* ctl.c */
/*
 * run's live view: the plain summary of pin_dir's run into out, what each
 * line says since start and, from the second call on, over the last
 * interval (secs), in lines of at most width columns (a module's at
 * most two). live keeps the values between calls. 0, or 1 when a meta pin
 * could not be read.
 */
#include "core/sp.h"
struct sp_live {
	bool have;
	double secs;
	int width;
	struct sp_summary prev[SP_MAX_MODULES];
};
int sp_status_live(const char *pin_dir, FILE *out, struct sp_live *live);
int cmd_get(int argc, char **argv);
int cmd_set(int argc, char **argv);
int cmd_probe(int argc, char **argv);		/* cmd_probe.c */
/* `stackpilot tunables`, `counters` (doc.c): the loader's tables for man pages and completion. */
int cmd_tunables(int argc, char **argv);
int cmd_counters(int argc, char **argv);

#endif

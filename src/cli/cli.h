/* SPDX-License-Identifier: GPL-2.0 */
/* The commands (main.c dispatches): the top layer, which nothing includes. */
#ifndef SP_CLI_H
#define SP_CLI_H

int cmd_run(int argc, char **argv);		/* cmd_run.c */
int cmd_status(int argc, char **argv);		/* ctl.c */
int cmd_get(int argc, char **argv);
int cmd_set(int argc, char **argv);
int cmd_probe(int argc, char **argv);		/* cmd_probe.c */
/* `stackpilot tunables`, `counters` (doc.c): the loader's tables for man pages and completion. */
int cmd_tunables(int argc, char **argv);
int cmd_counters(int argc, char **argv);

#endif

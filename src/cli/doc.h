/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SP_DOC_H
#define SP_DOC_H
/* `stackpilot tunables`, `counters` (doc.c): the loader's tables for man pages and completion. */
int cmd_tunables(int argc, char **argv);
int cmd_counters(int argc, char **argv);
#endif

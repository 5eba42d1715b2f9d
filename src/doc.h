/* SPDX-License-Identifier: GPL-2.0 */
#ifndef SP_DOC_H
#define SP_DOC_H
/* `stackpilot tunables` (doc.c): the loader's tunable tables for man pages and completion. */
int cmd_tunables(int argc, char **argv);
#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a module needs to keep state across runs, below the service that
 * decides when and where (service/persist.c): the line reader of a state
 * file and the hooks a module declares. A module includes this, never the
 * service's header.
 */
#ifndef SP_SAVED_H
#define SP_SAVED_H

#include <stdio.h>

struct sp_run;

/* Shared line reader: the next line without its newline, or NULL at the end. Counts lines. */
struct sp_persist_reader {
	FILE *f;
	const char *file;
	int line, bad;
	char buf[512];
};

/*
 * What a module saves and restores beyond tunables (pmtu_persist.c), in
 * FILE.<suffix>: named by its struct sp_module, called by the service.
 */
struct sp_persister {
	const char *suffix;
	/* Lines after the header; 0 or -1. */
	int (*save)(struct sp_run *run, void *inst, FILE *f);
	/* r is past the header; bad lines are logged with file:line by sp_persist_bad(). */
	void (*restore)(struct sp_run *run, void *inst, struct sp_persist_reader *r);
};
char *sp_persist_next(struct sp_persist_reader *r);
/* One warning naming file:line. */
void sp_persist_bad(struct sp_persist_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* This boot's id (/proc/sys/kernel/random/boot_id), "" when unreadable. */
const char *sp_boot_id(void);

#endif

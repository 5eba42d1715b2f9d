/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a run changed in its network namespace (sysctls, routes), kept in
 * /run/stackpilot/state-<netns inode>-<pid> and written before each change,
 * so that the next run in the namespace undoes what a killed one left.
 * An entry is one line: "KIND ARGS", e.g. "sysctl net/ipv4/tcp_mtu_probing 0 2".
 */
#ifndef SP_STATE_H
#define SP_STATE_H

#include <sys/types.h>

#define SP_STATE_DIR "/run/stackpilot"

/* How to undo an entry of a kind (besides "sysctl", which state.c knows). */
struct sp_state_undo {
	const char *kind;
	int (*undo)(const char *args);	/* 0, or -errno */
};
void sp_state_undo_register(const struct sp_state_undo *u);

/* Lock the namespace's state, undo the entries of dead runs; 0 or -1. */
int sp_state_open(void);
/* Serialise check-then-change against other runs in the namespace. */
void sp_state_lock(void);
void sp_state_unlock(void);
/* Record an entry (on disk, fsynced) before the change; forget it after undoing. */
int sp_state_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sp_state_del(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A live other run's entry that starts with prefix: its pid, else 0. */
pid_t sp_state_held(const char *prefix, char *line, size_t len);
/* Clean exit: remove this run's file. */
void sp_state_close(void);

/* Sysctls under /proc/sys, as "net/ipv4/tcp_mtu_probing". */
int sp_sysctl_read(const char *name);
int sp_sysctl_write(const char *name, int v);

/*
 * A sysctl one run owns while it lives: refused when another live run in
 * the namespace set it; its old value is on disk before the change, for
 * the next run to restore if this one is killed. 0 with *saved the old
 * value, or -1 after one line naming who (the option) and why.
 */
int sp_sysctl_own(const char *name, int v, int *saved, const char *who);
/* Clean exit: the old value back (saved < 0: nothing was owned). */
void sp_sysctl_release(const char *name, int saved, int v);

#endif
